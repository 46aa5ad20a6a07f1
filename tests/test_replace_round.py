"""A round of measurement that was wrong, replaced: ``kexp remeasure --replace-round``.

A round recorded with the baseline and candidate files swapped, or taken under load,
cannot be pooled away: every later round kept it in the figure. Replacing it keeps the
history honest: the reason is required, the file must be committed as it is (so the
round replaced stays in git history) and the correction note names that commit.
"""

from __future__ import annotations

import json
import random
from pathlib import Path
from typing import Any

import pytest
from conftest import git, run_kexp

from kexp import Store

COMMON = ("--operator", "softmax.cu: softmax", "--dtype", "bf16", "--env", "H100 test")
SHAPES = {"b8": 0.0871, "b32": 1.234}


def do_bench(seed: int, speed: float, n: int = 30) -> dict[str, list[float]]:
    """``{config: do_bench(fn, return_mode="all")}``: milliseconds, 1 % CV."""
    rng = random.Random(seed)
    return {
        config: [round(ms * speed * rng.lognormvariate(0, 0.01), 6) for _ in range(n)]
        for config, ms in SHAPES.items()
    }


def write(folder: Path, name: str, data: dict[str, Any]) -> str:
    path = folder / f"{name}.json"
    path.write_text(json.dumps(data), encoding="utf-8")
    return str(path)


def round_lines(samples: str, number: int) -> list[str]:
    """The lines of a Samples section of round ``number``."""
    return [line for line in samples.splitlines() if f'"round": {number},' in line]


@pytest.fixture
def swapped(repo: Path, tmp_path: Path) -> tuple[str, Path, dict[str, str]]:
    """A step 8 % faster recorded with its timing files swapped, and committed: its id,
    file, and the timing files (``base``, ``cand``: the same run; ``base2``, ``cand2``:
    a second one)."""
    files = {
        "base": write(tmp_path, "base", do_bench(1, 1.0)),
        "cand": write(tmp_path, "cand", do_bench(2, 1 / 1.08)),
        "base2": write(tmp_path, "base2", do_bench(3, 1.0)),
        "cand2": write(tmp_path, "cand2", do_bench(4, 1 / 1.08)),
    }
    added = run_kexp(
        "add", "--summary", "online softmax - -7.2%", *COMMON, "--unit", "ms",
        "--baseline", files["cand"], "--candidate", files["base"], cwd=repo,
    )  # fmt: skip
    assert added.returncode == 0, added.stderr
    exp_id = added.stdout.split()[1].rstrip(":")
    (path,) = (repo / "experiments").rglob(f"{exp_id}-*.md")
    git(repo, "add", "experiments")
    git(repo, "commit", "-q", "-m", "online softmax, timed")
    return exp_id, path, files


def test_a_round_recorded_with_its_files_swapped_is_replaced(
    repo: Path, swapped: tuple[str, Path, dict[str, str]]
) -> None:
    """The files were given the wrong way round: the step read 0.93x, a regression.
    kexp remeasure pooled the right round with the wrong one (a figure of neither), and
    nothing replaced it. Now --replace-round 1 with a reason puts the right round in its
    place: the score is the right round's, the correction note names the commit that
    holds the swapped round, and that commit still holds its samples."""
    exp_id, path, files = swapped
    before = Store(repo).get_experiment(exp_id)
    assert before.score < 0.95
    committed = git(repo, "rev-parse", "HEAD")

    done = run_kexp(
        "remeasure", exp_id, "--replace-round", "1", "--unit", "ms",
        "--baseline", files["base"], "--candidate", files["cand"],
        "--reason", "baseline and candidate files were swapped", cwd=repo,
    )  # fmt: skip

    assert done.returncode == 0, done.stderr
    assert "(improvement)" in done.stdout
    after = Store(repo).get_experiment(exp_id)
    assert after.score == pytest.approx(1 / before.score, abs=2e-4)
    assert after.score_ci[0] > 1.07
    assert after.samples.count('"round": 1') == 2 and '"round": 2' not in after.samples
    assert after.change_summary == f"online softmax - +{(after.score - 1) * 100:.1f}%"
    note = after.detailed_description.splitlines()[-1]
    assert f"round 1 replaced (its timings: commit {committed[:12]})" in note
    assert "baseline and candidate files were swapped" in note
    assert "Round 1 replaced, 1 round(s) pooled Results - SUCCESS" in after.raw_result
    # the swapped round stays in git history: the commit named holds it
    relative = path.relative_to(repo).as_posix()
    old = git(repo, "show", f"{committed[:12]}:{relative}")
    assert before.samples.strip() in old

    checked = run_kexp("validate", cwd=repo)
    assert checked.returncode == 0, checked.stdout


def test_a_round_taken_under_load_is_replaced_and_the_others_stay(
    repo: Path, swapped: tuple[str, Path, dict[str, str]], tmp_path: Path
) -> None:
    """Round 2 was taken under load (every candidate sample 2.5x slow: half the pooled
    samples, too many to set aside): replaced, round 1 stays as it was."""
    exp_id, _, files = swapped
    fix = run_kexp(
        "remeasure", exp_id, "--replace-round", "1", "--unit", "ms", "--baseline",
        files["base"], "--candidate", files["cand"], "--reason", "files swapped", cwd=repo,
    )  # fmt: skip
    assert fix.returncode == 0, fix.stderr
    first = round_lines(Store(repo).get_experiment(exp_id).samples, 1)
    loaded = {c: [t * 2.5 for t in times] for c, times in do_bench(5, 1 / 1.08).items()}
    added = run_kexp(
        "remeasure", exp_id, "--unit", "ms", "--baseline", files["base2"],
        "--candidate", write(tmp_path, "loaded", loaded), cwd=repo,
    )  # fmt: skip
    assert added.returncode == 0, added.stderr
    git(repo, "commit", "-q", "-am", "round 2")
    assert Store(repo).get_experiment(exp_id).outcome != "improvement"

    done = run_kexp(
        "remeasure", exp_id, "--replace-round", "2", "--unit", "ms",
        "--baseline", files["base2"], "--candidate", files["cand2"],
        "--reason", "round 2 ran beside a training job", "--json", cwd=repo,
    )  # fmt: skip

    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["outcome"] == "improvement"
    samples = Store(repo).get_experiment(exp_id).samples
    assert [samples.count(f'"round": {n}') for n in (1, 2, 3)] == [2, 2, 0]
    assert round_lines(samples, 1) == first


@pytest.mark.parametrize(
    ("arguments", "said"),
    [
        (
            ("--replace-round", "1"),
            "needs the reason its timings were wrong (files swapped, taken under load): "
            "kexp remeasure {id} --replace-round 1 --baseline ... --candidate ... --reason ...",
        ),
        (
            ("--replace-round", "3", "--reason", "swapped"),
            "has 1 round(s) of measurement, no round 3: replace one of them (kexp remeasure "
            "{id} --replace-round 1 --baseline ... --candidate ... --reason ... replaces the "
            "last)",
        ),
    ],
    ids=["no reason", "no such round"],
)
def test_a_replacement_without_its_reason_or_round_is_refused(
    repo: Path, swapped: tuple[str, Path, dict[str, str]], arguments: tuple[str, ...], said: str
) -> None:
    exp_id, path, files = swapped
    before = path.read_bytes()
    done = run_kexp(
        "remeasure", exp_id, *arguments, "--unit", "ms",
        "--baseline", files["base"], "--candidate", files["cand"], cwd=repo,
    )  # fmt: skip
    assert done.returncode != 0
    assert said.format(id=exp_id) in done.stderr, done.stderr
    assert len(done.stderr.strip().splitlines()) == 1
    assert path.read_bytes() == before


def test_a_round_not_committed_is_not_replaced(
    repo: Path, swapped: tuple[str, Path, dict[str, str]]
) -> None:
    """A round added and not committed, then replaced: nothing would hold it. Refused,
    saying to commit first."""
    exp_id, path, files = swapped
    added = run_kexp(
        "remeasure", exp_id, "--unit", "ms",
        "--baseline", files["base2"], "--candidate", files["cand2"], cwd=repo,
    )  # fmt: skip
    assert added.returncode == 0, added.stderr
    before = path.read_bytes()

    done = run_kexp(
        "remeasure", exp_id, "--replace-round", "2", "--unit", "ms", "--baseline",
        files["base"], "--candidate", files["cand"], "--reason", "swapped", cwd=repo,
    )  # fmt: skip

    assert done.returncode != 0
    assert "its file has changes not committed" in done.stderr
    relative = path.relative_to(repo).as_posix()
    assert f"commit it first (git add {relative} && git commit)" in done.stderr
    assert path.read_bytes() == before


def test_the_mcp_remeasure_tool_replaces_a_round_and_advises_in_its_words(
    repo: Path, swapped: tuple[str, Path, dict[str, str]]
) -> None:
    pytest.importorskip("mcp")
    from test_mcp import Agent, run_agent

    exp_id, _, files = swapped
    timings = {
        side: {c: [t * 1000 for t in times] for c, times in json.loads(Path(f).read_text()).items()}
        for side, f in (("baseline", files["base"]), ("candidate", files["cand"]))
    }

    async def work(agent: Agent) -> None:
        failed, texts = await agent.call("remeasure", exp_id=exp_id, replace_round=1, **timings)
        assert failed
        assert (
            f'the remeasure tool with exp_id: "{exp_id}", replace_round: 1, baseline, '
            "candidate and reason" in texts[0]
        )
        assert "--replace-round" not in texts[0]
        answer = await agent.json(
            "remeasure", exp_id=exp_id, replace_round=1, reason="files swapped", **timings
        )
        assert answer["outcome"] == "improvement"

    run_agent(repo, work)
