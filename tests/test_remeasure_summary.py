"""A step whose summary a human typed from the first round (trial L, finding 04):
``Swizzle smem for mma - +13.6%`` beside a measured 1.1374x (within its interval, as
``kexp add`` accepts it). A second round pools the score down to about 1.07x, marginal:
the figure is not kexp's own (it is not 1.1374 at its decimals), so it cannot be
restated, and ``kexp remeasure`` warns, in one line, that the summary still states the
old measurement, with the update that restates it, which runs as printed (beside the
warning that the two rounds disagree). ``kexp update
--set score=`` judges the figure the same way."""

from __future__ import annotations

import json
import random
import re
import shlex
from pathlib import Path

from tests.conftest import git, run_kexp

SUMMARY = "Swizzle smem for mma - +13.6%"


def timings(path: Path, time: float, seed: int) -> str:
    """Seven samples of three configurations (each 30 % slower than the one before)
    around ``time`` microseconds, within ±0.4 %."""
    draw = random.Random(seed)
    path.write_text(
        json.dumps(
            {
                config: [time * (1 + k * 0.3) * (1 + draw.uniform(-0.004, 0.004)) for _ in range(7)]
                for k, config in enumerate(("M1", "M2", "M3"))
            }
        )
    )
    return str(path)


def shown(repo: Path, exp_id: str) -> dict[str, object]:
    result = run_kexp("show", exp_id, "--json", cwd=repo)
    assert result.returncode == 0, result.stderr
    return dict(json.loads(result.stdout))


def recorded(repo: Path, tmp_path: Path) -> str:
    """The step, its first round at about 1.137x, committed: its id."""
    added = run_kexp(
        "add", "--json", "--summary", SUMMARY, "--operator", "kernels/gemm.cu: gemm",
        "--dtype", "bf16", "--env", "H100", "--measured-against", "reference",
        "--baseline", timings(tmp_path / "b1.json", 25.0, 1),
        "--candidate", timings(tmp_path / "c1.json", 21.96, 2),
        cwd=repo,
    )  # fmt: skip
    assert added.returncode == 0 and "warning" not in added.stderr, added.stderr
    exp_id = str(json.loads(added.stdout)["id"])
    git(repo, "add", "-A")
    git(repo, "commit", "-qm", "the swizzle step")
    exp = shown(repo, exp_id)
    low, high = exp["score_ci"]  # type: ignore[misc]
    assert round((exp["score"] - 1) * 100, 1) != 13.6 and low <= 1.136 <= high, exp  # type: ignore[operator]
    return exp_id


def warning_of(stderr: str) -> str:
    """The one ``kexp: warning:`` line that names the change_summary (exactly one is
    required; the rounds' disagreement is another)."""
    lines = [
        line
        for line in stderr.splitlines()
        if line.startswith("kexp: warning:") and "change_summary" in line
    ]
    assert len(lines) == 1, stderr
    return lines[0]


def restated_as_advised(repo: Path, exp_id: str, warning: str) -> None:
    """The update the warning prints, run as printed with the figure of the new score:
    the summary says it."""
    printed = re.search(r"(kexp update \S+ --set change_summary=VALUE)", warning)
    assert printed is not None, warning
    figure = f"{(float(shown(repo, exp_id)['score']) - 1) * 100:+.1f}%"  # type: ignore[arg-type]
    value = shlex.quote(f"Swizzle smem for mma - {figure}")
    done = run_kexp(*shlex.split(printed.group(1).replace("VALUE", value))[1:], cwd=repo)
    assert done.returncode == 0, done.stderr
    assert shown(repo, exp_id)["change_summary"] == f"Swizzle smem for mma - {figure}"


def test_remeasure_warns_of_a_summary_that_states_the_first_rounds_figure(
    repo: Path, tmp_path: Path
) -> None:
    exp_id = recorded(repo, tmp_path)
    result = run_kexp(
        "remeasure", exp_id[:10],
        "--baseline", timings(tmp_path / "b2.json", 25.0, 3),
        "--candidate", timings(tmp_path / "c2.json", 24.6, 4),
        cwd=repo, process=True,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    exp = shown(repo, exp_id)
    assert 1.05 < exp["score"] < 1.1 and exp["change_summary"] == SUMMARY, exp  # type: ignore[operator]
    warning = warning_of(result.stderr)
    assert "change_summary still states the old score (+13.6%)" in warning, warning
    assert "kexp remeasure" not in warning, warning  # it was just measured again
    restated_as_advised(repo, exp_id, warning)


def test_update_of_the_score_warns_of_the_same_figure(repo: Path, tmp_path: Path) -> None:
    exp_id = recorded(repo, tmp_path)
    result = run_kexp(
        "update", exp_id[:10], "--set", "score=1.0744", "--reason", "pooled by hand", cwd=repo
    )
    assert result.returncode == 0, result.stderr
    warning = warning_of(result.stderr)
    assert "change_summary still states the old score (+13.6%)" in warning, warning
    restated_as_advised(repo, exp_id, warning)
