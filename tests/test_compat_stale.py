"""``kernel_exp_dataclass``: an old caller's record, written back after a teammate
corrected the experiment (``kexp update --reason``, ``kexp remeasure``), does not undo
the correction: it is refused in one line (a ``ValueError``), nothing written.

kexp's dated correction notes are only ever appended to ``detailed_description``, so a
record that lacks one the file holds was read before it.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from conftest import git, run_kexp
from test_compat_scores import old_caller

OPTIONS = ("--operator", "k.py:f", "--dtype", "fp32", "--env", "cpu", "--unit", "us")


def timings(repo: Path, name: str, median: float) -> str:
    times = [median + delta for delta in (0, 0.1, -0.1, 0, 0.2, -0.2)]
    (repo / name).write_text(json.dumps({"N1": times}), encoding="utf-8")
    return name


def add(repo: Path, summary: str, candidate: str, *extra: str, baseline: str = "b.json") -> str:
    result = run_kexp(
        "add", *OPTIONS, "--summary", summary, "--baseline", baseline, "--candidate",
        candidate, "--json", *extra, cwd=repo, process=True,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    return str(json.loads(result.stdout)["id"])


@pytest.fixture
def step(repo: Path) -> str:
    """A measured root (1.8x over the original code) and a step over it (1.3x, timed
    against the root's code, b.json), committed."""
    reference = timings(repo, "r.json", 180)
    root = add(repo, "root - 1.8x", timings(repo, "b.json", 100), "--measured-against",
               "reference", baseline=reference)  # fmt: skip
    exp_id = add(repo, "step - 1.3x", timings(repo, "d.json", 77), "--pid", root)
    git(repo, "add", "-A")
    git(repo, "commit", "-qm", "exps")
    return exp_id


#: Reads the step, lets a teammate's command run (argv), then writes the record back with
#: one field changed; prints the one line it was refused with.
STALE_SCRIPT = """\
import json, subprocess, sys
import kernel_exp_dataclass as k
exp_id, teammate, write = sys.argv[1], json.loads(sys.argv[2]), sys.argv[3]
e = k.get_experiment(exp_id)
subprocess.run([sys.executable, "-m", "kexp", *teammate], check=True, capture_output=True)
subprocess.run(["git", "commit", "-qam", "teammate"], check=True)
e.error_message = "reviewed"
changes = e.to_dict()
if write == "without description":
    del changes["detailed_description"]
try:
    k.update_experiment(exp_id, **changes)
except ValueError as exc:
    print(str(exc))
"""


def stale(repo: Path, exp_id: str, teammate: list[str], write: str = "record") -> str:
    code = STALE_SCRIPT.replace("sys.argv[1]", repr(exp_id))
    code = code.replace("sys.argv[2]", repr(json.dumps(teammate))).replace(
        "sys.argv[3]", repr(write)
    )
    result = old_caller(code, repo)
    assert result.returncode == 0, result.stderr
    # Refused before anything is said of it: no warning that something "is recorded".
    assert "Warning" not in result.stderr, result.stderr
    said = result.stdout.strip()
    assert len(said.splitlines()) == 1, said
    # Nothing written: the teammate's commit is all there is.
    assert git(repo, "status", "--porcelain", "--", "experiments") == ""
    return said


@pytest.mark.parametrize("write", ["record", "without description"])
def test_a_stale_write_back_after_a_correction_is_refused(
    repo: Path, step: str, write: str
) -> None:
    correction = ["update", step, "--set", "change_summary=step - 1.3x, fixed L2 reuse bug",
                  "--reason", "teammate correction"]  # fmt: skip
    said = stale(repo, step, correction, write)
    assert f"{step} was corrected since you read it (the note of " in said, said
    assert "read it again with get_experiment and apply your change to that" in said
    if write != "record":  # the summary put back to the one the note says it replaced
        assert "--set change_summary=VALUE --reason" in said, said
    shown = json.loads(run_kexp("show", step, "--json", cwd=repo, process=True).stdout)
    assert shown["change_summary"] == "step - 1.3x, fixed L2 reuse bug"
    assert "Reason: teammate correction" in shown["detailed_description"]


def test_a_stale_write_back_after_a_remeasure_says_it_was_remeasured(repo: Path, step: str) -> None:
    remeasure = ["remeasure", step, "--replace-round", "1", "--baseline", "b.json",
                 "--candidate", timings(repo, "e.json", 70), "--reason", "re-timed"]  # fmt: skip
    git(repo, "add", "e.json")
    said = stale(repo, step, remeasure)
    assert f"{step} was corrected since you read it (the note of " in said, said
    assert "score 1.2987 → 1.4286" in said and "by hand" not in said, said
    shown = json.loads(run_kexp("show", step, "--json", cwd=repo, process=True).stdout)
    assert shown["score"] == pytest.approx(1.4286) and shown["measured_against"] == "parent"


FRESH_SCRIPT = """\
import kernel_exp_dataclass as k
e = k.get_experiment(EXP_ID)
e.error_message = "reviewed"
e.detailed_description += "\\n\\nReviewed by the old dashboard."
k.update_experiment(EXP_ID, **e.to_dict())
k.update_experiment(EXP_ID, change_summary="step - 1.3x")
print("ok")
"""


def test_a_record_read_after_the_correction_is_written_back(repo: Path, step: str) -> None:
    run_kexp("update", step, "--set", "change_summary=step - 1.3x, fixed",
             "--reason", "typo", cwd=repo, process=True)  # fmt: skip
    result = old_caller(FRESH_SCRIPT.replace("EXP_ID", repr(step)), repo)
    assert result.returncode == 0, result.stderr
    assert result.stdout.split() == ["ok"]
    shown = json.loads(run_kexp("show", step, "--json", cwd=repo, process=True).stdout)
    assert (shown["error_message"], shown["change_summary"]) == ("reviewed", "step - 1.3x")
    assert "Reason: typo" in shown["detailed_description"]
    assert shown["detailed_description"].endswith("Reviewed by the old dashboard.")
