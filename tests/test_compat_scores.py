"""``kernel_exp_dataclass`` next to the team's kexp steps: what an old caller's ``score``
means (a speedup over the operator's original code) is kept both ways.

The team records steps with ``kexp add --pid`` (a score over the parent's code); an old
caller's code, unchanged, runs in its own process beside them: its ``top_experiments``
ranks by the speedup over the original code, and a score it gives ``update_experiment``
is kept as one.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import REPO_ROOT, git, run_kexp

from kexp import Store

OPERATOR = "csrc/gemm.cu: sgemm_tiled"
ENV = "H100, CUDA 12.4"


def add(repo: Path, summary: str, score: float, pid: str = "") -> str:
    """A team member's ``kexp add`` (a step over ``pid`` when given); its id."""
    result = run_kexp(
        "add", "--summary", summary, "--score", str(score), *(["--pid", pid] if pid else []),
        "--operator", OPERATOR, "--dtype", "fp16", "--env", ENV,
        "--description", "**Key insight**: x", "--json",
        cwd=repo, process=True,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    return str(json.loads(result.stdout)["id"])


def old_caller(code: str, repo: Path) -> subprocess.CompletedProcess[str]:
    """The predecessor's user's code, run in the store's checkout (the repository's
    module found first, as installed)."""
    env = {**os.environ, "PYTHONIOENCODING": "utf-8"}
    env.pop("KEXP_ROOT", None)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(REPO_ROOT), env.get("PYTHONPATH")]))
    return subprocess.run(
        [sys.executable, "-c", code], cwd=repo, env=env, capture_output=True, text=True,
        encoding="utf-8", timeout=120,
    )  # fmt: skip


@pytest.fixture
def team(repo: Path) -> dict[str, str]:
    """Three steps of the team, each over its parent: 1.50, then 1.20 (1.80 over the
    original code), then 1.30 (2.34: the team's best), committed."""
    tiling = add(repo, "Tiling - +50%", 1.50)
    double = add(repo, "Double buffer - +20%", 1.20, tiling)
    tensor = add(repo, "Tensor cores - +30%", 1.30, double)
    git(repo, "add", "-A")
    git(repo, "commit", "-qm", "team")
    return {"tiling": tiling, "double": double, "tensor": tensor}


TOP_SCRIPT = """\
import json
from kernel_exp_dataclass import KernelExperiment, create_experiment, top_experiments
old = KernelExperiment(1.60, "", "fp16", "H100, CUDA 12.4", False, "",
                       "Old tool: launch bounds - 1.6x", "d", "", "",
                       "csrc/gemm.cu: sgemm_tiled", "", "done")
create_experiment(old)
print(old.id)
print(json.dumps(top_experiments(4)))
"""


def test_old_callers_top_ranks_by_the_speedup_over_the_original_code(
    repo: Path, team: dict[str, str]
) -> None:
    result = old_caller(TOP_SCRIPT, repo)
    assert result.returncode == 0, result.stderr
    old_id, printed = result.stdout.splitlines()
    top = json.loads(printed)
    # The team's best (1.5 x 1.2 x 1.3 = 2.34 over the original code) first, its
    # 1.80 step next, then the old tool's 1.60, then the 1.50 root.
    expected = [team["tensor"], team["double"], old_id, team["tiling"]]
    assert [row["id"] for row in top] == expected
    over_original = [row["cumulative_score"] for row in top]
    assert over_original == pytest.approx([2.34, 1.80, 1.60, 1.50])
    # ``score`` is the predecessor's (over the original code), so the list is sorted by
    # the score it shows; the stored score is kept as ``step_score``, with what it is over.
    assert [row["score"] for row in top] == pytest.approx([2.34, 1.80, 1.60, 1.50])
    assert [row["step_score"] for row in top] == [1.30, 1.20, 1.60, 1.50]
    said = ["parent", "parent", "reference", "reference"]
    assert [row["measured_against"] for row in top] == said


def test_a_step_over_a_parent_whose_speedup_is_unknown_ranks_after_the_known(
    repo: Path, team: dict[str, str]
) -> None:
    # A step over a buggy parent: its 1.90 is over code whose speed nobody knows.
    crashed = add(repo, "Async copy - crashed", 2.0, team["tensor"])
    Store(repo).update_experiment(crashed, is_buggy=True, error_message="illegal address")
    unknown = add(repo, "Swizzle on the crashed code - +90%", 1.90, crashed)
    code = "import json, kernel_exp_dataclass as k; print(json.dumps(k.top_experiments()))"
    result = old_caller(code, repo)
    assert result.returncode == 0, result.stderr
    top = json.loads(result.stdout)
    # Last, by their scores: the crashed step (over its parent, but buggy: measured
    # nothing to build on) and the step over it.
    assert [row["id"] for row in top] == [
        team["tensor"], team["double"], team["tiling"], crashed, unknown
    ]  # fmt: skip
    assert [row["cumulative_score"] for row in top[-2:]] == [None, None]
    assert top[-1]["measured_against"] == "parent"
    # Their speedup over the original code unknown, their ``score`` is their own.
    assert [row["score"] for row in top[-2:]] == [2.0, 1.90]
    assert [row["step_score"] for row in top[-2:]] == [2.0, 1.90]


UPDATE_SCRIPT = """\
import sys
from kernel_exp_dataclass import update_experiment
updated = update_experiment(sys.argv[1], score=2.40)
print(updated.score, updated.measured_against, updated.cumulative_score)
"""


def test_an_old_callers_score_on_a_step_is_kept_as_over_the_original_code(
    repo: Path, team: dict[str, str]
) -> None:
    child = add(repo, "Epilogue fusion - +10%", 1.10, team["tensor"])
    result = old_caller(UPDATE_SCRIPT.replace("sys.argv[1]", repr(team["tensor"])), repo)
    assert result.returncode == 0, result.stderr
    assert result.stdout.split() == ["2.4", "reference", "2.4"]
    # Said, in one line, with what to pass to give a step over the parent instead.
    said = [line for line in result.stderr.splitlines() if "KexpWarning" in line]
    assert len(said) == 1, result.stderr
    assert 'measured_against="parent"' in said[0] and team["tensor"][:10] in said[0]
    stored = Store(repo)
    assert stored.get_experiment(team["tensor"]).cumulative_score == pytest.approx(2.40)
    assert stored.get_experiment(child).cumulative_score == pytest.approx(2.64)
    shown = run_kexp("show", team["tensor"][:10], cwd=repo, process=True)
    assert "4.32" not in shown.stdout and "2.4" in shown.stdout


@pytest.mark.parametrize(
    "changes",
    [
        'score=1.30, status="done"',  # its own score given back: nothing said of it
        # a step, said so, its summary restated (else: warned of, test_compat_summary_figure)
        'score=1.35, measured_against="parent", change_summary="Tensor cores - +35%"',
        'status="done"',
    ],
)
def test_an_update_that_keeps_the_step_a_step_says_nothing(
    repo: Path, team: dict[str, str], changes: str
) -> None:
    code = (
        "import kernel_exp_dataclass as k; "
        f"print(k.update_experiment({team['tensor']!r}, {changes}).score)"
    )
    result = old_caller(code, repo)
    assert result.returncode == 0, result.stderr
    assert "Warning" not in result.stderr, result.stderr
    # The file still holds a step over its parent; what comes back is in the
    # predecessor's meaning (the speedup over the original code).
    stored = Store(repo).get_experiment(team["tensor"])
    assert (stored.measured_against or "parent") == "parent"
    assert float(result.stdout) == pytest.approx(stored.cumulative_score)


BEST_SCRIPT = """\
import json
from kernel_exp_dataclass import get_experiment, list_experiments, top_experiments
top = top_experiments(3)
best = get_experiment(top[0]["id"])
print(json.dumps({
    "top": [[row["id"], row["score"]] for row in top],
    "get": [best.score, best.measured_against, best.pid, best.to_dict()["score"]],
    "list": {exp.id: exp.score for exp in list_experiments()},
}))
"""


def test_an_old_callers_best_score_is_the_speedup_over_the_original_code(
    repo: Path, team: dict[str, str]
) -> None:
    result = old_caller(BEST_SCRIPT, repo)
    assert result.returncode == 0, result.stderr
    seen = json.loads(result.stdout)
    # What kexp top says is the best, and its cumulative score, is what the old
    # dashboard's top_experiments(1)[0]["score"] and get_experiment(best).score say.
    shown = json.loads(run_kexp("top", "--json", cwd=repo, process=True).stdout)
    assert [row[0] for row in seen["top"]] == [row["id"] for row in shown][:3]
    over_original = [row["cumulative_score"] for row in shown][:3]
    assert [row[1] for row in seen["top"]] == pytest.approx(over_original)
    assert over_original == pytest.approx([2.34, 1.80, 1.50])
    # In the predecessor's meaning throughout: over the reference, parent kept.
    assert seen["get"] == [pytest.approx(2.34), "reference", team["double"], pytest.approx(2.34)]
    assert seen["list"] == {
        team["tiling"]: 1.50, team["double"]: pytest.approx(1.80),
        team["tensor"]: pytest.approx(2.34),
    }  # fmt: skip
    # Nothing was written: the file still holds the step over its parent.
    stored = Store(repo).get_experiment(team["tensor"])
    assert (stored.score, stored.measured_against or "parent") == (1.30, "parent")


WRITE_BACK_SCRIPT = """\
import sys
from kernel_exp_dataclass import get_experiment, top_experiments, update_experiment
exp_id = sys.argv[1]
e = get_experiment(exp_id)
e.profiling_info = "ncu: 80% sm"
update_experiment(exp_id, **e.to_dict())
row = top_experiments(1)[0]
update_experiment(exp_id, **row)
row.pop("id")
update_experiment(exp_id, **row)
print("ok")
"""


def test_an_old_caller_writes_back_what_it_was_handed_and_nothing_else_changes(
    repo: Path, team: dict[str, str]
) -> None:
    code = WRITE_BACK_SCRIPT.replace("sys.argv[1]", repr(team["tensor"]))
    result = old_caller(code, repo)
    assert result.returncode == 0, result.stderr
    assert result.stdout.split() == ["ok"]
    assert "Warning" not in result.stderr, result.stderr
    stored = Store(repo).get_experiment(team["tensor"])
    assert stored.profiling_info == "ncu: 80% sm"
    # Still the step it was: 1.30 over its parent, 2.34 over the original code.
    assert (stored.score, stored.measured_against or "parent") == (1.30, "parent")
    assert stored.cumulative_score == pytest.approx(2.34)
    # The profiling section added, no other line of the file touched.
    changed = [line for line in git(repo, "diff", "-U0").splitlines() if line[:1] in "+-"]
    changed = [line for line in changed if line[:3] not in ("+++", "---")]
    assert all(line.startswith("+") for line in changed), changed
    assert "+ncu: 80% sm" in changed, changed


@pytest.mark.parametrize(
    ("changes", "named"),
    [
        ("cumulative_score=3.0", "cumulative_score"),
        ('outcome="regression"', "outcome"),
        ("step_score=1.4", "step_score"),
        ('id="0123456789abcdef"', "id"),
        ("nonsense=1", "nonsense"),
    ],
)
def test_a_key_the_module_hands_out_given_another_value_is_refused(
    repo: Path, team: dict[str, str], changes: str, named: str
) -> None:
    code = (
        "import kernel_exp_dataclass as k\n"
        "try:\n"
        f"    k.update_experiment({team['tensor']!r}, {changes})\n"
        "except ValueError as exc:\n"
        "    print(str(exc))\n"
    )
    before = {path: path.read_bytes() for path in (repo / "experiments").rglob("*.md")}
    result = old_caller(code, repo)
    assert result.returncode == 0, result.stderr
    said = result.stdout.strip()
    assert len(said.splitlines()) == 1 and named in said, said
    assert {path: path.read_bytes() for path in (repo / "experiments").rglob("*.md")} == before


RESTORE_SCRIPT = """\
import json, sys
from kernel_exp_dataclass import (
    KernelExperiment, create_experiment, delete_experiment, get_experiment)
exp_id, how = sys.argv[1], sys.argv[2]
kept = get_experiment(exp_id)
saved = json.dumps(kept.to_dict())
delete_experiment(exp_id)
restored = KernelExperiment.from_dict(json.loads(saved)) if how == "json" else kept
create_experiment(restored)
print(len(json.loads(saved)))
"""


@pytest.mark.parametrize("how", ["json", "object"])
def test_an_old_backup_restored_keeps_the_teams_best(
    repo: Path, team: dict[str, str], how: str
) -> None:
    code = RESTORE_SCRIPT.replace("sys.argv[1]", repr(team["tensor"]))
    result = old_caller(code.replace("sys.argv[2]", repr(how)), repo)
    assert result.returncode == 0, result.stderr
    assert result.stdout.split() == ["16"]
    # Restored as the predecessor meant its score: 2.34 over the original code, its
    # parent kept; the team's best is still 2.34, not a 1.30 "regression".
    stored = Store(repo).get_experiment(team["tensor"])
    assert (stored.score, stored.measured_against) == (pytest.approx(2.34), "reference")
    assert stored.pid == team["double"] and stored.cumulative_score == pytest.approx(2.34)
    shown = json.loads(run_kexp("top", "--json", cwd=repo, process=True).stdout)
    assert shown[0]["id"] == team["tensor"]
    assert shown[0]["cumulative_score"] == pytest.approx(2.34)
    assert shown[0]["outcome"] == "improvement"


def test_measured_against_alone_is_the_files_word_not_a_write_back(
    repo: Path, team: dict[str, str]
) -> None:
    # A kexp-aware caller says the step's 1.30 was over the reference after all: with no
    # score given it speaks of the file's score, and is recorded.
    code = (
        "import kernel_exp_dataclass as k; "
        f"print(k.update_experiment({team['tensor']!r}, measured_against='reference').score)"
    )
    result = old_caller(code, repo)
    assert result.returncode == 0, result.stderr
    stored = Store(repo).get_experiment(team["tensor"])
    assert (stored.score, stored.measured_against) == (1.30, "reference")
    assert result.stdout.split() == ["1.3"]


def test_an_old_caller_reparenting_a_step_keeps_its_speedup_over_the_original_code(
    repo: Path, team: dict[str, str]
) -> None:
    # The old caller was handed 2.34 and gives the record another parent: in its meaning
    # the score is unchanged (not 1.30 over the 1.50 root: 1.95).
    code = (
        "import kernel_exp_dataclass as k; "
        f"print(k.update_experiment({team['tensor']!r}, pid={team['tiling']!r}).score)"
    )
    result = old_caller(code, repo)
    assert result.returncode == 0, result.stderr
    stored = Store(repo).get_experiment(team["tensor"])
    assert (stored.pid, stored.measured_against) == (team["tiling"], "reference")
    assert stored.score == pytest.approx(2.34)
    assert stored.cumulative_score == pytest.approx(2.34)
    assert float(result.stdout) == pytest.approx(2.34)
    said = [line for line in result.stderr.splitlines() if "KexpWarning" in line]
    assert len(said) == 1 and 'measured_against="parent"' in said[0], result.stderr


def test_a_refused_update_warns_of_nothing_recorded(repo: Path, team: dict[str, str]) -> None:
    # A new score for a step, with a status kexp refuses: the refusal alone is said, not
    # first a warning that the score "is recorded" over the original code.
    code = (
        "import kernel_exp_dataclass as k\n"
        "try:\n"
        f"    k.update_experiment({team['tensor']!r}, score=2.40, status='finished')\n"
        "except ValueError as exc:\n"
        "    print(str(exc))\n"
    )
    result = old_caller(code, repo)
    assert result.returncode == 0, result.stderr
    assert "status" in result.stdout, result.stdout
    assert "Warning" not in result.stderr and "is recorded" not in result.stderr, result.stderr
    assert git(repo, "status", "--porcelain", "--", "experiments") == ""
