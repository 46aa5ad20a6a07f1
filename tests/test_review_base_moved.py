"""kexp review when the base branch moved on after the pull request's branch was made:
the review answers what merging the branch into the base's tip gives (ranks, the best
before and after, the counts), as CI's review of the merge commit does, while what the
branch adds, corrects and removes stays git's three-dot diff. Real git: a bare
repository on disk as the remote, and clones of it."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from conftest import experiment_fields, git
from test_sync import clone, make_remote

from kexp import KernelExperiment, Store
from kexp.review.build import render_markdown, review, to_json

OPERATOR = "csrc/rms.cu: rms_norm"


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
    remote, _ = make_remote(tmp_path)
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
        # (no directory renames: experiments in one shard folder, the only one of which
        # a side removed, would be moved by git after a similar added file: 1 in 256)
        git(reviewer, "-c", "merge.directoryRenames=false", "merge", "-q", "--no-ff",
            f"origin/{branch}", "-m", f"Merge PR {branch}")  # fmt: skip
    git(reviewer, "push", "-q", "origin", "main")
    git(reviewer, "fetch", "-q")


def as_ci_sees_it(reviewer: Path, branch: str) -> None:
    """Check out the branch merged into main's tip: CI's ``HEAD``."""
    git(reviewer, "checkout", "-q", "-B", "ci", "origin/main")
    git(reviewer, "-c", "merge.directoryRenames=false", "merge", "-q", "--no-ff",
        f"origin/{branch}", "-m", "CI merge")  # fmt: skip


def comparable(data: dict[str, Any]) -> dict[str, Any]:
    """A review's JSON less what names the revisions compared."""
    return {k: v for k, v in data.items() if k not in ("head", "head_commit", "merge_base")}


def test_a_branch_made_before_a_better_lineage_landed_is_ranked_against_the_base_tip(
    team: dict[str, Path],
) -> None:
    alice, bob, reviewer = team["alice"], team["bob"], team["reviewer"]
    a1 = record(alice, "Vectorize loads float4 - +12%", 1.12)
    record(alice, "Warp reduce via shfl - +5%", 1.05, pid=a1.id)  # 1.176 over the reference
    push_branch(alice, "kexp/alice", "alice's experiments")
    b1 = record(bob, "Fused residual add - +3%", 1.03)
    push_branch(bob, "kexp/bob", "bob's experiment")
    merge_into_main(reviewer, "kexp/alice")

    git(reviewer, "fetch", "-q")
    store = Store(reviewer)
    local = review(store, "origin/main", "origin/kexp/bob")
    [entry] = local.added
    assert entry.id == b1.id
    assert not entry.new_best and local.new_bests == []
    assert (entry.rank, entry.rank_of) == (3, 3)
    markdown = render_markdown(local)
    assert "New best" not in markdown
    assert "first scored experiment" not in markdown

    # The same review as CI's, of the branch merged into main's tip
    as_ci_sees_it(reviewer, "kexp/bob")
    ci = review(store, "origin/main", "HEAD")
    assert comparable(to_json(local)) == comparable(to_json(ci))


def test_the_best_before_is_the_base_tips_after_a_correction_landed_there(
    team: dict[str, Path],
) -> None:
    alice, bob, reviewer = team["alice"], team["bob"], team["reviewer"]
    a1 = record(alice, "Vectorize loads float4 - +12%", 1.12)
    a2 = record(alice, "Warp reduce via shfl - +5%", 1.05, pid=a1.id)
    push_branch(alice, "kexp/alice", "alice's experiments")
    merge_into_main(reviewer, "kexp/alice")
    git(bob, "fetch", "-q")
    git(bob, "merge", "-q", "--ff-only", "origin/main")
    b1 = record(bob, "Persistent kernel - +18%", 1.18)
    push_branch(bob, "kexp/bob", "bob's experiment")
    # alice corrects her first step on main meanwhile: her tip now reaches 1.10 x 1.05
    git(alice, "fetch", "-q")
    git(alice, "checkout", "-q", "-B", "kexp/alice", "origin/main")
    Store(alice).update_experiment(a1.id, score=1.10)
    push_branch(alice, "kexp/alice", "re-measured")
    merge_into_main(reviewer, "kexp/alice")

    git(reviewer, "fetch", "-q")
    store = Store(reviewer)
    local = review(store, "origin/main", "origin/kexp/bob")
    [entry] = local.added
    assert entry.id == b1.id and entry.new_best
    assert entry.previous_best_id == a2.id
    assert entry.previous_best_cumulative == pytest.approx(1.10 * 1.05)
    assert "(1.1550)" in render_markdown(local)
    as_ci_sees_it(reviewer, "kexp/bob")
    assert comparable(to_json(local)) == comparable(to_json(review(store, "origin/main", "HEAD")))


def test_experiments_squash_merged_already_are_not_added_again(team: dict[str, Path]) -> None:
    bob, reviewer = team["bob"], team["reviewer"]
    b1 = record(bob, "Fused residual add - +3%", 1.03)
    b2 = record(bob, "Two-pass variance - +2%", 1.02, pid=b1.id)
    push_branch(bob, "kexp/bob", "bob's experiments")
    merge_into_main(reviewer, "kexp/bob", squash=True)
    # bob goes on on the same branch, never merging main back
    b3 = record(bob, "Two rows per warp - regression", 0.97, pid=b2.id)
    push_branch(bob, "kexp/bob", "bob's next experiment")

    git(reviewer, "fetch", "-q")
    store = Store(reviewer)
    local = review(store, "origin/main", "origin/kexp/bob")
    assert [e.id for e in local.added] == [b3.id]
    assert local.already_on_base == sorted([b1.id, b2.id])
    assert local.new_bests == [] and local.best_changes == []
    [entry] = local.added
    assert (entry.rank, entry.rank_of) == (3, 3)
    markdown = render_markdown(local)
    assert "**1 added · 0 corrected · 0 removed**" in markdown
    assert "New best" not in markdown
    assert "2 change(s) of the branch are on `origin/main` already" in markdown
    assert to_json(local)["summary"]["already_on_base"] == sorted([b1.id, b2.id])


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


def criss_cross(team: dict[str, Path]) -> tuple[KernelExperiment, KernelExperiment]:
    """Alice and Bob each add an experiment on their branch; main merges both (no
    fast-forward); each then merges the other's branch into theirs: the branch and main
    have two merge bases, Alice's tip and Bob's, each lacking the other's experiment."""
    alice, bob, reviewer = team["alice"], team["bob"], team["reviewer"]
    a = record(alice, "Vectorize loads float4 - +12%", 1.12)
    push_branch(alice, "kexp/alice", "alice's experiment")
    b = record(bob, "Fused residual add - +3%", 1.03)
    push_branch(bob, "kexp/bob", "bob's experiment")
    merge_into_main(reviewer, "kexp/alice")
    merge_into_main(reviewer, "kexp/bob")
    for root, other in ((alice, "kexp/bob"), (bob, "kexp/alice")):
        git(root, "fetch", "-q")
        git(root, "merge", "-q", "--no-edit", f"origin/{other}")
        assert len(git(root, "merge-base", "--all", "origin/main", "HEAD").split()) == 2
    return a, b


@pytest.mark.parametrize("who", ["alice", "bob"])
def test_after_a_criss_cross_merge_a_correction_is_reviewed_as_ci_reviews_it(
    team: dict[str, Path], who: str
) -> None:
    a, b = criss_cross(team)
    root, mine = (team["alice"], a) if who == "alice" else (team["bob"], b)
    Store(root).update_experiment(mine.id, score=1.021)
    local = review(Store(root), "origin/main")
    assert [e.id for e in local.added] == []
    assert local.already_on_base == []  # the other's experiment: shared history, no change
    [entry] = local.corrected
    assert entry.id == mine.id
    assert [(c.field, c.old, c.new) for c in entry.changes] == [("score", mine.score, 1.021)]
    assert "**0 added · 1 corrected · 0 removed**" in render_markdown(local)

    # CI reviews the branch merged into main's tip
    push_branch(root, f"kexp/{who}", "re-measured")
    git(team["reviewer"], "fetch", "-q")
    as_ci_sees_it(team["reviewer"], f"kexp/{who}")
    ci = review(Store(team["reviewer"]), "origin/main", "HEAD")
    assert comparable(to_json(local)) == comparable(to_json(ci))


def test_a_correction_of_an_experiment_squash_merged_already_is_a_correction(
    team: dict[str, Path],
) -> None:
    bob, reviewer = team["bob"], team["reviewer"]
    b1 = record(bob, "Fused residual add - +3%", 1.03)
    push_branch(bob, "kexp/bob", "bob's experiment")
    merge_into_main(reviewer, "kexp/bob", squash=True)
    # bob corrects it on the same branch, never merging main back
    Store(bob).update_experiment(b1.id, score=1.021)
    push_branch(bob, "kexp/bob", "re-measured")

    git(reviewer, "fetch", "-q")
    store = Store(reviewer)
    local = review(store, "origin/main", "origin/kexp/bob")
    assert local.added == [] and local.already_on_base == []
    [entry] = local.corrected
    assert entry.id == b1.id
    assert [(c.field, c.old, c.new) for c in entry.changes] == [("score", 1.03, 1.021)]
    assert "**0 added · 1 corrected · 0 removed**" in render_markdown(local)
    # (no CI review to compare with: merging the branch into main is an add/add conflict)


def test_a_store_wide_problem_the_base_tip_holds_is_not_caused_by_the_branch(
    team: dict[str, Path],
) -> None:
    alice, bob, reviewer = team["alice"], team["bob"], team["reviewer"]
    a1 = record(alice, "Vectorize loads float4 - +12%", 1.12)
    a2 = record(alice, "Warp reduce via shfl - +5%", 1.05, pid=a1.id)
    assert a1.path is not None
    a1.path.unlink()  # a2's parent is gone: a dangling pid main gets
    push_branch(alice, "kexp/alice", "alice's experiments")
    record(bob, "Fused residual add - +3%", 1.03)
    push_branch(bob, "kexp/bob", "bob's experiment")
    merge_into_main(reviewer, "kexp/alice")
    merge_into_main(reviewer, "kexp/bob")
    git(alice, "fetch", "-q")
    git(alice, "merge", "-q", "--no-edit", "origin/kexp/bob")  # git picks bob's tip
    Store(alice).update_experiment(a2.id, score=1.06)

    local = review(Store(alice), "origin/main")
    assert local.store_problems == []  # those the change causes
    assert [p.code for p in local.preexisting_store_problems] == ["dangling-pid"]
    assert "The change causes no store-wide problem." in render_markdown(local)
    push_branch(alice, "kexp/alice", "re-measured")
    git(reviewer, "fetch", "-q")
    as_ci_sees_it(reviewer, "kexp/alice")
    ci = review(Store(reviewer), "origin/main", "HEAD")
    assert comparable(to_json(local)) == comparable(to_json(ci))


def test_after_a_criss_cross_merge_a_removal_both_sides_share_is_no_change_of_the_branch(
    team: dict[str, Path],
) -> None:
    alice, bob, reviewer = team["alice"], team["bob"], team["reviewer"]
    x = record(reviewer, "Naive row loop - baseline", 1.0)
    push_branch(reviewer, "main", "the first experiment")
    for root in (alice, bob):
        git(root, "pull", "-q", "--ff-only")
    Store(alice).delete_experiment(x.id)
    a = record(alice, "Vectorize loads float4 - +12%", 1.12)
    push_branch(alice, "kexp/alice", "alice's experiment, x dropped")
    record(bob, "Fused residual add - +3%", 1.03)
    push_branch(bob, "kexp/bob", "bob's experiment")
    merge_into_main(reviewer, "kexp/alice")
    merge_into_main(reviewer, "kexp/bob")
    git(alice, "fetch", "-q")
    git(alice, "merge", "-q", "--no-edit", "origin/kexp/bob")  # git picks bob's tip: x there
    Store(alice).update_experiment(a.id, score=1.021)

    local = review(Store(alice), "origin/main")
    assert local.removed == [] and local.already_on_base == []
    assert [e.id for e in local.corrected] == [a.id]
    push_branch(alice, "kexp/alice", "re-measured")
    git(reviewer, "fetch", "-q")
    as_ci_sees_it(reviewer, "kexp/alice")
    ci = review(Store(reviewer), "origin/main", "HEAD")
    assert comparable(to_json(local)) == comparable(to_json(ci))
