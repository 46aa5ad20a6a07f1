"""kexp review when the base branch moved on after the pull request's branch was made:
the review answers what merging the branch into the base's tip gives (ranks, the best
before and after, the counts), as CI's review of the merge commit does, while what the
branch adds, corrects and removes stays git's three-dot diff. Real git: a bare
repository on disk as the remote, and clones of it."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from conftest import experiment_fields, git, init_repo

from kexp import KernelExperiment, Store
from kexp.review.build import render_markdown, review

OPERATOR = "csrc/rms.cu: rms_norm"


def make_remote(tmp_path: Path) -> Path:
    """A bare repository holding a kernel and an empty store on ``main``."""
    seed = init_repo(tmp_path / "seed")
    (seed / "experiments").mkdir()
    (seed / "experiments" / "README.md").write_text("The experiments.\n")
    git(seed, "add", "experiments")
    git(seed, "commit", "-q", "-m", "store")
    remote = tmp_path / "remote.git"
    git(tmp_path, "clone", "-q", "--bare", str(seed), str(remote))
    return remote


def clone(remote: Path, folder: Path) -> Path:
    git(remote.parent, "clone", "-q", str(remote), str(folder))
    git(folder, "config", "user.name", f"Agent {folder.name}")
    git(folder, "config", "user.email", f"{folder.name}@example.com")
    git(folder, "config", "commit.gpgsign", "false")
    return folder


def record(root: Path, summary: str, score: float, **fields: Any) -> KernelExperiment:
    fields.setdefault("measured_against", "parent" if fields.get("pid") else "reference")
    return Store(root).create_experiment(
        **experiment_fields(change_summary=summary, score=score, operator_sig=OPERATOR, **fields)
    )


def push_branch(root: Path, branch: str, message: str) -> None:
    """Commit the experiments of ``root`` onto ``branch`` and push it."""
    if git(root, "rev-parse", "--abbrev-ref", "HEAD") != branch:
        git(root, "checkout", "-q", "-B", branch)
    git(root, "add", "-A", "experiments")
    git(root, "commit", "-q", "-m", message)
    git(root, "push", "-q", "origin", branch)


@pytest.fixture
def team(tmp_path: Path) -> dict[str, Path]:
    remote = make_remote(tmp_path)
    return {name: clone(remote, tmp_path / name) for name in ("alice", "bob", "reviewer")}


def merge_into_main(reviewer: Path, branch: str, *, squash: bool = False) -> None:
    """Merge ``origin/<branch>`` into main on the remote (a squash merge: one commit)."""
    git(reviewer, "checkout", "-q", "main")
    git(reviewer, "fetch", "-q")
    git(reviewer, "merge", "-q", "--ff-only", "origin/main")
    if squash:
        git(reviewer, "merge", "-q", "--squash", f"origin/{branch}")
        git(reviewer, "commit", "-q", "-m", f"Squash PR {branch}")
    else:
        git(reviewer, "merge", "-q", "--no-ff", f"origin/{branch}", "-m", f"Merge PR {branch}")
    git(reviewer, "push", "-q", "origin", "main")
    git(reviewer, "fetch", "-q")


def as_ci_sees_it(reviewer: Path, branch: str) -> None:
    """Check out the branch merged into main's tip: CI's ``HEAD``."""
    git(reviewer, "checkout", "-q", "-B", "ci", "origin/main")
    git(reviewer, "merge", "-q", "--no-ff", f"origin/{branch}", "-m", "CI merge")


def comparable(data: dict[str, Any]) -> dict[str, Any]:
    """A review's JSON less what names the revisions compared."""
    return {k: v for k, v in data.items() if k not in ("head", "head_commit", "merge_base")}


def test_a_best_that_rises_is_not_shown_falling(team: dict[str, Path]) -> None:
    alice, reviewer = team["alice"], team["reviewer"]
    a1 = record(alice, "Vectorize loads float4 - +12%", 1.12)
    a2 = record(alice, "Warp reduce via shfl - +5%", 1.05, pid=a1.id)
    push_branch(alice, "kexp/alice", "alice's experiments")
    merge_into_main(reviewer, "kexp/alice")
    git(alice, "fetch", "-q")
    git(alice, "merge", "-q", "--ff-only", "origin/main")
    Store(alice).update_experiment(a1.id, score=1.15)  # the tip a2 rises with it
    push_branch(alice, "kexp/alice", "re-measured")

    git(reviewer, "fetch", "-q")
    result = review(Store(reviewer), "origin/main", "origin/kexp/alice")
    [change] = result.best_changes
    assert change.before_id == change.after_id == a2.id
    assert change.after_cumulative is not None and change.before_cumulative is not None
    assert change.after_cumulative > change.before_cumulative
    [line] = [line for line in render_markdown(result).splitlines() if "Best changed" in line]
    assert "📉" not in line and "📈" in line
