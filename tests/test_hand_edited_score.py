"""A score edited by hand in an editor (trial D, finding 5): the reads refuse the file, as
its ``score_ci`` (the measurement's interval) no longer holds it, and the hint said to
empty ``score_ci`` with ``kexp update``. Done, that left a typed score its own
``results``, samples and ``raw_result`` contradict, silently, ranked first as an
improvement. Now the hint says to put the score back (or measure again), the step it
names leaves the file as measured (valid, no warning, its interval kept), and emptying
the interval of such a score warns."""

from __future__ import annotations

import json
import re
import shlex
from pathlib import Path

from tests.conftest import run_kexp


def recorded_then_edited(repo: Path) -> tuple[str, float]:
    """An experiment recorded from timings (speedup about 1.0), then its score typed as
    1.25 in the file: its id and the score it was recorded with."""
    (repo / "b.json").write_text(json.dumps({"N1": [10.0, 10.1, 9.9, 10.0, 10.2]}))
    (repo / "c.json").write_text(json.dumps({"N1": [10.0, 10.1, 9.9, 10.0, 10.1]}))
    added = run_kexp(
        "add", "--operator", "k.py: k", "--dtype", "fp16", "--env", "H100", "--summary",
        "same code - noise", "--baseline", "b.json", "--candidate", "c.json", "--unit", "us",
        "--json", cwd=repo,
    )  # fmt: skip
    assert added.returncode == 0, added.stderr
    exp_id = json.loads(added.stdout)["id"]
    (path,) = (repo / "experiments").rglob(f"{exp_id}-*.md")
    text = path.read_text(encoding="utf-8")
    measured = float(re.search(r"^score: (.*)$", text, re.M).group(1))  # type: ignore[union-attr]
    path.write_text(re.sub(r"^score: .*$", "score: 1.25", text, flags=re.M), encoding="utf-8")
    return exp_id, measured


def test_the_hint_for_a_hand_edited_score_puts_it_back(repo: Path) -> None:
    exp_id, measured = recorded_then_edited(repo)
    checked = run_kexp("validate", cwd=repo)
    assert checked.returncode == 1 and "score-ci-outside" in checked.stdout, checked.stdout
    assert "score_ci=" not in checked.stdout, checked.stdout  # not: empty the interval
    steps = re.findall(r"put it back \((kexp update [^)]*)\)", checked.stdout)
    assert steps, checked.stdout
    step = shlex.split(steps[0].replace("TEXT", "'a score typed by hand'"))[1:]
    done = run_kexp(*step, cwd=repo)
    assert done.returncode == 0 and "warning" not in done.stderr, done.stderr
    assert json.loads(run_kexp("validate", "--format", "json", cwd=repo).stdout) == []
    exp = json.loads(run_kexp("show", exp_id, "--json", cwd=repo).stdout)
    assert abs(exp["score"] - measured) < 1e-4 and exp["score_ci"], exp


def test_emptying_the_interval_of_a_hand_edited_score_warns(repo: Path) -> None:
    exp_id, measured = recorded_then_edited(repo)
    done = run_kexp("update", exp_id, "--set", "score_ci=", "--reason", "as hinted", cwd=repo)
    assert done.returncode == 0, done.stderr
    warning = [line for line in done.stderr.splitlines() if line.startswith("kexp: warning:")]
    assert len(warning) == 1, done.stderr
    assert "score 1.25 is not what its results give" in warning[0], warning
    assert f"kexp update {exp_id} --set score={measured:.4f}" in warning[0], warning
    assert f"kexp remeasure {exp_id}" in warning[0], warning
