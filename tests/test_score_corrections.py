"""A score corrected with ``kexp update ID --set score=X --reason ...`` (trial 17,
finding 3): the figure of the change summary follows the new score as ``kexp remeasure``
restates it, the old measurement's interval does not stay beside the new score (nor in
the cumulative intervals built on it), and the one-line warning says what was dropped
and what still holds the old measurement."""

from __future__ import annotations

import json
import math
import random
import re
import shlex
from pathlib import Path

from tests.conftest import run_kexp


def timings(path: Path, time: float, spread: float, seed: int) -> Path:
    """A timing file of two configurations (``a`` and ``b``, four times slower), 15
    samples each around ``time`` with a log-normal ``spread``."""
    draw = random.Random(seed)
    path.write_text(
        json.dumps(
            {
                config: [time * scale * math.exp(draw.gauss(0, spread)) for _ in range(15)]
                for config, scale in (("a", 1.0), ("b", 4.0))
            }
        )
    )
    return path


def record(repo: Path, *args: str) -> str:
    """``kexp add ... --json``: the new experiment's id."""
    result = run_kexp("add", *args, "--json", cwd=repo)
    assert result.returncode == 0, result.stderr
    return str(json.loads(result.stdout)["id"])


def shown(repo: Path, exp_id: str) -> dict[str, object]:
    result = run_kexp("show", exp_id, "--json", cwd=repo)
    assert result.returncode == 0, result.stderr
    return dict(json.loads(result.stdout))


def warning_of(stderr: str) -> str:
    """The one ``kexp: warning:`` line (exactly one is required)."""
    lines = [line for line in stderr.splitlines() if line.startswith("kexp: warning:")]
    assert len(lines) == 1, stderr
    return lines[0]


def test_a_corrected_score_restates_the_summary_and_drops_the_old_interval(repo: Path) -> None:
    """A noisy round recorded +42% (1.42, its interval wide) whose true step is 1.10: after the
    update, every view shows +10% beside 1.1000, no interval, and the step built on it
    has no cumulative interval made of the stale one (``top --by low`` ranks it by its
    cumulative score, as any chain without an interval)."""
    t = repo / "timings"
    t.mkdir()
    root = record(
        repo, "--summary", "Vectorize - +30%", "--unit", "ms", "--operator", "k.py: k",
        "--dtype", "fp16", "--env", "H100",
        "--baseline", str(timings(t / "b1.json", 1.0, 0.01, 1)),
        "--candidate", str(timings(t / "c1.json", 1 / 1.3, 0.01, 2)),
    )  # fmt: skip
    noisy = record(
        repo, "--summary", "num_warps=8 for wide rows - +42%", "--unit", "ms", "--pid", root,
        "--baseline", str(timings(t / "b2.json", 1 / 1.3, 0.5, 11)),
        "--candidate", str(timings(t / "c2.json", 1 / 1.3 / 1.4, 0.5, 12)),
    )  # fmt: skip
    before = shown(repo, noisy)
    assert before["change_summary"] == "num_warps=8 for wide rows - +42%"
    old_ci = before["score_ci"]
    assert isinstance(old_ci, list) and old_ci[0] < 1.1 < old_ci[1], before

    result = run_kexp(
        "update", noisy, "--set", "score=1.10", "--reason", "typed from the wrong run",
        cwd=repo,
    )  # fmt: skip

    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == f"updated {before['id']}: score, change_summary, score_ci"
    warning = warning_of(result.stderr)
    assert f"score_ci [{old_ci[0]}, {old_ci[1]}]" in warning and "dropped" in warning, warning
    assert "results and raw_result still hold the measurement of the old score" in warning
    after = shown(repo, noisy)
    assert after["score"] == 1.1 and after["change_summary"] == "num_warps=8 for wide rows - +10%"
    assert "score_ci" not in after or not after["score_ci"], after
    child = record(
        repo, "--summary", "exp2 - +20%", "--unit", "ms", "--pid", noisy,
        "--baseline", str(timings(t / "b3.json", 1 / 1.3 / 1.1, 0.01, 5)),
        "--candidate", str(timings(t / "c3.json", 1 / 1.3 / 1.1 / 1.2, 0.01, 6)),
    )  # fmt: skip
    tip = shown(repo, child)
    assert tip.get("cumulative_ci") is None, tip  # not the stale [1.02, 1.93] compounded
    top = run_kexp("top", "--by", "low", "--json", cwd=repo)
    first = json.loads(top.stdout)[0]
    assert (first["id"], first.get("cumulative_ci")) == (tip["id"], None)
    noted = "wide rows - +42% →"  # the correction note says what the summary was
    views = (["top"], ["context", "--operator", "k.py", "--dtype", "fp16"], ["review", "HEAD"])
    for view in views:
        said = run_kexp(*view, cwd=repo)
        assert said.returncode == 0, said.stderr
        assert "wide rows - +10%" in said.stdout, (view, said.stdout)
        assert "wide rows - +42%" not in said.stdout.replace(noted, ""), (view, said.stdout)
    assert run_kexp("report", "-o", "site", cwd=repo).returncode == 0
    page = "".join(p.read_text() for p in (repo / "site").rglob("*.html"))
    assert "wide rows - +10%" in page and "wide rows - +42%" not in page.replace(noted, "")


def test_a_hand_typed_score_corrected_restates_its_figure_quietly(repo: Path) -> None:
    """A score typed by hand (no timings, no interval): its figure follows the new
    score and nothing is left to warn of."""
    exp_id = record(
        repo, "--summary", "Autotune BLOCK - +25%", "--score", "1.25", "--operator", "k.py: k",
        "--dtype", "fp16", "--env", "H100",
    )  # fmt: skip
    result = run_kexp("update", exp_id, "--set", "score=1.05", "--reason", "typo", cwd=repo)
    assert result.returncode == 0 and "warning" not in result.stderr, result.stderr
    exp = shown(repo, exp_id)
    assert exp["change_summary"] == "Autotune BLOCK - +5%" and exp["score"] == 1.05
    note = str(exp["detailed_description"]).splitlines()[-1]
    assert "change_summary Autotune BLOCK - +25% → Autotune BLOCK - +5%" in note, note


def test_a_figure_that_cannot_be_restated_is_warned_with_a_command_that_runs(
    repo: Path,
) -> None:
    """``25% faster`` cannot say a slowdown without new words: the summary is left as it
    is and the warning names the update that restates it, which runs as printed."""
    exp_id = record(
        repo, "--summary", "Tile the loads: 25% faster", "--score", "1.25", "--operator",
        "k.py: k", "--dtype", "fp16", "--env", "H100",
    )  # fmt: skip
    result = run_kexp("update", exp_id, "--set", "score=0.95", "--reason", "typo", cwd=repo)
    assert result.returncode == 0, result.stderr
    warning = warning_of(result.stderr)
    assert "change_summary still states the old score (25%)" in warning, warning
    printed = re.search(r"(kexp update \S+ --set change_summary=VALUE)", warning)
    assert printed is not None, warning
    args = shlex.split(printed.group(1).replace("VALUE", "'Tile the loads: 5% slower'"))
    done = run_kexp(*args[1:], cwd=repo)
    assert done.returncode == 0, done.stderr
    assert shown(repo, exp_id)["change_summary"] == "Tile the loads: 5% slower"


def test_a_new_interval_given_with_the_score_is_kept(repo: Path) -> None:
    """A correction that gives the new interval keeps it: nothing is dropped."""
    exp_id = record(
        repo, "--summary", "Split K - +20%", "--score", "1.2", "--operator", "k.py: k",
        "--dtype", "fp16", "--env", "H100",
    )  # fmt: skip
    first = run_kexp("update", exp_id, "--set", "score_ci=[1.1, 1.3]", cwd=repo)
    assert first.returncode == 0, first.stderr
    result = run_kexp(
        "update", exp_id, "--set", "score=1.15", "--set", "score_ci=[1.12, 1.18]", cwd=repo
    )
    assert result.returncode == 0 and "warning" not in result.stderr, result.stderr
    exp = shown(repo, exp_id)
    assert exp["score_ci"] == [1.12, 1.18] and exp["change_summary"] == "Split K - +15%"


def test_validate_after_a_corrected_score_blames_no_interval(repo: Path) -> None:
    """A timed record whose score was corrected (the harness timed the wrong kernel):
    its samples are the earlier measurement, kept as the record of it, and the interval
    went with them; validate does not ask for their interval back beside the new score
    (it still says the score and the results disagree, as the update warned)."""
    t = repo / "timings"
    t.mkdir()
    exp_id = record(
        repo, "--summary", "Split K - +20%", "--unit", "ms", "--operator", "k.py: k",
        "--dtype", "fp16", "--env", "H100",
        "--baseline", str(timings(t / "b.json", 1.0, 0.01, 1)),
        "--candidate", str(timings(t / "c.json", 1 / 1.2, 0.01, 2)),
    )  # fmt: skip
    fixed = run_kexp(
        "update", exp_id, "--set", "score=1.05", "--reason", "timed the wrong kernel", cwd=repo
    )
    assert fixed.returncode == 0, fixed.stderr
    checked = run_kexp("validate", "--format", "json", cwd=repo)
    assert checked.returncode == 0, checked.stdout
    found = [(p["code"], p["field"]) for p in json.loads(checked.stdout)]
    assert found == [("score-results-mismatch", "score")], found


def test_the_step_validate_gives_for_an_interval_outside_the_score_runs(repo: Path) -> None:
    """A file whose score_ci does not hold its score (edited by hand): validate's hint
    names a ``kexp update`` that runs on that very file and leaves it valid."""
    exp_id = record(
        repo, "--summary", "Split K - +20%", "--score", "1.2", "--operator", "k.py: k",
        "--dtype", "fp16", "--env", "H100",
    )  # fmt: skip
    (path,) = (repo / "experiments").rglob(f"{exp_id}-*.md")
    text = path.read_text(encoding="utf-8")
    path.write_text(text.replace("score: 1.2\n", "score: 1.2\nscore_ci: [1.3, 1.4]\n"))
    checked = run_kexp("validate", cwd=repo)
    assert checked.returncode == 1 and "score-ci-outside" in checked.stdout, checked.stdout
    steps = re.findall(r"\((kexp update [^)]*)\)", checked.stdout)
    assert steps, checked.stdout
    done = run_kexp(*shlex.split(steps[0])[1:], cwd=repo)
    assert done.returncode == 0, done.stderr
    assert json.loads(run_kexp("validate", "--format", "json", cwd=repo).stdout) == []
    assert shown(repo, exp_id)["score"] == 1.2
