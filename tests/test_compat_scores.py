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
    # The stored score is kept as it is, and says what it is over.
    assert [row["score"] for row in top] == [1.30, 1.20, 1.60, 1.50]
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
        'score=1.35, measured_against="parent"',  # a step, said so
        'status="done"',
    ],
)
def test_an_update_that_keeps_the_step_a_step_says_nothing(
    repo: Path, team: dict[str, str], changes: str
) -> None:
    code = (
        "import kernel_exp_dataclass as k; "
        f"print(k.update_experiment({team['tensor']!r}, {changes}).measured_against)"
    )
    result = old_caller(code, repo)
    assert result.returncode == 0, result.stderr
    assert result.stdout.split() == ["parent"]
    assert "Warning" not in result.stderr, result.stderr
