"""``kexp sync`` publishes removals, with real git (a bare repository on disk as the
remote, real clones), on a side branch shared by several clones too.

A removal is published when this clone removed the file: its checkout's ``HEAD``
tracks it and the working tree lacks it, or this clone published it to the side branch
earlier (its record of what it committed there) and the branch still holds that
version. A file another clone published is never removed. The truth is read from git
(``git ls-tree`` of the remote's branch).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from conftest import git, run_kexp
from test_sync import clone, kexp_sync_in, make_remote, record, remote_ids

from kexp import Store, ValidationError
from kexp.storage.sync import sync


def relative(root: Path, path: object) -> str:
    return Path(str(path)).relative_to(root).as_posix()


def test_a_removal_of_a_file_published_from_beside_the_checkout_is_published(
    tmp_path: Path,
) -> None:
    """Variant 1: ``sync --branch`` left the files it published untracked in the
    checkout; ``kexp rm`` of one, then ``sync --branch``: the branch loses it. The dry
    run names the removal (apart from what it would commit), and the sync does that."""
    remote, base = make_remote(tmp_path)
    alice = clone(remote, tmp_path / "alice")
    kept = record(alice, base, "Vectorized loads - +12%", score=1.12)
    gone = record(alice, base, "Unroll 8 - crash", score=1.0)
    sync(Store(alice), branch="kexp/alice")
    head = git(alice, "rev-parse", "HEAD")
    Store(alice).delete_experiment(gone.id)

    planned = sync(Store(alice), branch="kexp/alice", dry_run=True)
    assert planned.removed == (relative(alice, gone.path),) and planned.committed == ()
    assert not planned.up_to_date
    said = "\n".join(planned.lines())
    assert "would remove 1 experiment file(s) from kexp/alice" in said, said
    assert relative(alice, gone.path) in said and "would commit" not in said, said
    assert "would push 1 commit(s) to origin/kexp/alice" in said, said

    done = sync(Store(alice), branch="kexp/alice")
    assert done.removed == planned.removed and done.committed == ()
    assert done.pushed and done.commits_pushed == planned.commits_to_push == 1
    assert "removed 1 experiment file(s)" in "\n".join(done.lines())
    assert remote_ids(remote, "kexp/alice") == [kept.id]
    assert git(alice, "rev-parse", "HEAD") == head
    assert git(alice, "symbolic-ref", "--short", "HEAD") == "main"
    # Published: nothing more to do.
    assert sync(Store(alice), branch="kexp/alice").up_to_date


@pytest.mark.parametrize("how", ["kexp rm", "git rm"])
def test_a_removal_of_a_file_the_checkout_tracks_is_published(tmp_path: Path, how: str) -> None:
    """Variant 2: the checkout is the branch's commit (detached) and ``git status``
    shows the file deleted (`` D``, or ``D `` after ``git rm``)."""
    remote, base = make_remote(tmp_path)
    alice = clone(remote, tmp_path / "alice")
    kept = record(alice, base, "Vectorized loads - +12%", score=1.12)
    gone = record(alice, base, "Unroll 8 - crash", score=1.0)
    sync(Store(alice), branch="kexp/alice")
    git(alice, "clean", "-qfd", "experiments")
    git(alice, "checkout", "-q", "--detach", "origin/kexp/alice")
    if how == "kexp rm":
        Store(alice).delete_experiment(gone.id)
    else:
        git(alice, "rm", "-q", str(gone.path))
    status = git(alice, "status", "--porcelain")
    assert status.startswith((" D ", "D ")), status

    planned = sync(Store(alice), branch="kexp/alice", dry_run=True)
    done = sync(Store(alice), branch="kexp/alice")
    assert planned.removed == done.removed == (relative(alice, gone.path),)
    assert done.pushed
    assert remote_ids(remote, "kexp/alice") == [kept.id]
    assert git(alice, "status", "--porcelain") == status  # the checkout untouched


def test_a_shared_branch_loses_only_what_this_clone_removed(tmp_path: Path) -> None:
    """Alice and Bob share a side branch: Bob's working tree lacks Alice's file, and his
    syncs never remove it; Alice's removal of her own file is published, and Bob's next
    sync (after a fetch) does not bring it back."""
    remote, base = make_remote(tmp_path)
    alice, bob = clone(remote, tmp_path / "alice"), clone(remote, tmp_path / "bob")
    first = record(alice, base, "Unrolled by 4 - +1.9%")
    sync(Store(alice), branch="kexp/shared")
    second = record(bob, base, "Vectorized - +3.0%", score=1.03)
    assert sync(Store(bob), branch="kexp/shared").removed == ()
    third = record(bob, base, "Vectorized stores - +3.5%", score=1.035)
    again = sync(Store(bob), branch="kexp/shared", dry_run=True)
    assert again.removed == ()
    assert sync(Store(bob), branch="kexp/shared").removed == ()
    assert sorted(remote_ids(remote, "kexp/shared")) == sorted([first.id, second.id, third.id])

    Store(alice).delete_experiment(first.id)
    removed = sync(Store(alice), branch="kexp/shared")
    assert removed.removed == (relative(alice, first.path),) and removed.merged
    assert sorted(remote_ids(remote, "kexp/shared")) == sorted([second.id, third.id])

    git(bob, "fetch", "-q")
    assert sync(Store(bob), branch="kexp/shared").removed == ()
    fourth = record(bob, base, "Vectorized stores by 8 - +3.6%", score=1.036)
    later = sync(Store(bob), branch="kexp/shared")
    assert later.pushed and later.removed == ()
    assert sorted(remote_ids(remote, "kexp/shared")) == sorted([second.id, third.id, fourth.id])
    # Bob's files, which Alice's working tree lacks, are never removed by her syncs.
    assert sync(Store(alice), branch="kexp/shared").removed == ()


@pytest.mark.parametrize("fetched", [True, False])
def test_a_file_another_clone_corrected_on_the_branch_is_not_removed(
    tmp_path: Path, fetched: bool
) -> None:
    """Alice published an experiment; Bob corrected it on the shared branch; Alice
    removes her copy: the branch keeps Bob's correction, and the sync says so (it
    fetches the branch first; a dry run knows it as last fetched)."""
    remote, base = make_remote(tmp_path)
    alice, bob = clone(remote, tmp_path / "alice"), clone(remote, tmp_path / "bob")
    exp = record(alice, base, "Unrolled by 4 - +1.9%")
    sync(Store(alice), branch="kexp/shared")
    git(bob, "fetch", "-q")
    git(bob, "checkout", "-q", "--detach", "origin/kexp/shared")
    Store(bob).update_experiment(exp.id, change_summary="Unrolled by 4 - +2.1%")
    assert sync(Store(bob), branch="kexp/shared").committed == (relative(alice, exp.path),)

    if fetched:
        git(alice, "fetch", "-q")
    Store(alice).delete_experiment(exp.id)
    planned = sync(Store(alice), branch="kexp/shared", dry_run=True)
    done = sync(Store(alice), branch="kexp/shared")
    path = relative(alice, exp.path)
    for result in (planned, done) if fetched else (done,):
        assert result.removed == () and result.not_removed == (path,)
        said = "\n".join(result.lines())
        assert "corrected there by another clone" in said and path in said, said
    assert remote_ids(remote, "kexp/shared") == [exp.id]
    assert "+2.1%" in git(remote, "show", f"kexp/shared:{path}")


def test_json_says_removals_apart(tmp_path: Path) -> None:
    remote, base = make_remote(tmp_path)
    alice = clone(remote, tmp_path / "alice")
    record(alice, base, "Vectorized loads - +12%", score=1.12)
    gone = record(alice, base, "Unroll 8 - crash", score=1.0)
    sync(Store(alice), branch="kexp/alice")
    Store(alice).delete_experiment(gone.id)
    new = record(alice, base, "Unroll 2 - +0.5%", score=1.005)
    shown = run_kexp("sync", "--branch", "kexp/alice", "--dry-run", "--json", cwd=alice)
    assert shown.returncode == 0, shown.stderr
    planned = json.loads(shown.stdout)
    done = run_kexp("sync", "--branch", "kexp/alice", "--json", cwd=alice)
    assert done.returncode == 0, done.stderr
    data = json.loads(done.stdout)
    for answer in (planned, data):
        assert answer["removed"] == [relative(alice, gone.path)]
        assert answer["committed"] == [relative(alice, new.path)]
        assert answer["not_removed"] == [] and answer["kept_back"] == []
    # Before, there is something to publish; after, everything is: up to date.
    assert planned["up_to_date"] is False and data["up_to_date"] is True
    assert gone.id not in remote_ids(remote, "kexp/alice")
    assert new.id in remote_ids(remote, "kexp/alice")


def test_a_removal_on_the_checked_out_branch_is_said_as_one(tmp_path: Path) -> None:
    """A plain sync published a deletion already, but called it "would commit 1
    experiment file(s)": it says removal now, in lines and in ``removed``."""
    remote, base = make_remote(tmp_path)
    alice = clone(remote, tmp_path / "alice")
    kept = record(alice, base, "Unrolled by 4 - +1.9%")
    gone = record(alice, base, "Unrolled by 8 - -0.4%", score=0.996)
    sync(Store(alice))
    Store(alice).delete_experiment(gone.id)
    shown = run_kexp("sync", "--dry-run", cwd=alice)
    assert shown.returncode == 0, shown.stderr
    assert "would remove 1 experiment file(s) from main" in shown.stdout, shown.stdout
    assert "would commit" not in shown.stdout, shown.stdout
    done = sync(Store(alice))
    assert done.removed == (relative(alice, gone.path),) and done.committed == ()
    assert "removed 1 experiment file(s)" in "\n".join(done.lines())
    assert remote_ids(remote) == [kept.id]


def test_a_removal_that_leaves_a_child_dangling_is_refused(tmp_path: Path) -> None:
    """A removal is checked as any publication: removing a parent whose child stays is
    refused before anything is committed, as ``kexp validate --changed`` refuses it."""
    remote, base = make_remote(tmp_path)
    alice = clone(remote, tmp_path / "alice")
    parent = record(alice, base, "Vectorized loads - +12%", score=1.12)
    child = record(
        alice, base, "Unroll 8 on top - +1%", score=1.01, pid=parent.id,
        measured_against="parent",
    )  # fmt: skip
    sync(Store(alice), branch="kexp/alice")
    tip = git(remote, "rev-parse", "kexp/alice")
    Store(alice).delete_experiment(parent.id, force=True)
    with pytest.raises(ValidationError, match="dangling"):
        sync(Store(alice), branch="kexp/alice", dry_run=True)
    with pytest.raises(ValidationError, match="dangling"):
        sync(Store(alice), branch="kexp/alice")
    assert git(remote, "rev-parse", "kexp/alice") == tip
    assert sorted(remote_ids(remote, "kexp/alice")) == sorted([parent.id, child.id])


def test_a_damaged_record_removes_nothing_and_is_rewritten(tmp_path: Path) -> None:
    """The record of what this clone published is a small file in the git folder; one
    that cannot be read is never fatal: only files the checkout tracks are removed, and
    the next sync writes it again."""
    from kexp.storage.published import record_path
    from kexp.storage.snapshot import StoreLocation

    remote, base = make_remote(tmp_path)
    alice = clone(remote, tmp_path / "alice")
    record(alice, base, "Vectorized loads - +12%", score=1.12)
    first = record(alice, base, "Unroll 8 - crash", score=1.0)
    sync(Store(alice), branch="kexp/alice")
    path = record_path(StoreLocation.of(alice).repo, "kexp/alice")
    assert path.is_file() and path.is_relative_to(alice / ".git")
    path.write_bytes(b"\x00not a record{")
    Store(alice).delete_experiment(first.id)
    result = sync(Store(alice), branch="kexp/alice")
    assert result.removed == () and result.kept_back == (relative(alice, first.path),)
    assert not result.up_to_date  # (the removal waits, said with what removes it there)
    assert first.id in remote_ids(remote, "kexp/alice")
    # Written again: what this clone publishes from now on is removed when it goes.
    second = record(alice, base, "Unroll 2 - +0.5%", score=1.005)
    sync(Store(alice), branch="kexp/alice")
    assert json.loads(path.read_text())
    Store(alice).delete_experiment(second.id)
    assert sync(Store(alice), branch="kexp/alice").removed == (relative(alice, second.path),)
    assert second.id not in remote_ids(remote, "kexp/alice")


def test_the_python_twin_says_removals(tmp_path: Path) -> None:
    remote, base = make_remote(tmp_path)
    alice = clone(remote, tmp_path / "alice")
    gone = record(alice, base, "Unroll 8 - crash", score=1.0)
    record(alice, base, "Unroll 2 - +0.5%", score=1.005)
    kexp_sync_in(alice, branch="kexp/alice")
    Store(alice).delete_experiment(gone.id)
    result = kexp_sync_in(alice, branch="kexp/alice")
    assert result.to_dict()["removed"] == [relative(alice, gone.path)]
    assert gone.id not in remote_ids(remote, "kexp/alice")


def test_two_worktrees_of_one_clone_never_remove_each_others_files(tmp_path: Path) -> None:
    """Two agents in two worktrees of one clone (``git worktree add``) publish to one
    side branch: each worktree's files are its own, so neither sync removes what the
    other published (the record was the clone's: each removed the other's file)."""
    remote, base = make_remote(tmp_path)
    alice = clone(remote, tmp_path / "alice")
    other = tmp_path / "other"
    git(alice, "worktree", "add", "-q", "--detach", str(other), "main")
    first = record(alice, base, "Vectorized stores - +10%", score=1.10)
    sync(Store(alice), branch="kexp/agents")
    second = record(other, base, "Nontemporal stores - +4%", score=1.04)
    for root in (other, alice, other):
        assert sync(Store(root), branch="kexp/agents", dry_run=True).removed == ()
        assert sync(Store(root), branch="kexp/agents").removed == ()
        assert sorted(remote_ids(remote, "kexp/agents")) == sorted([first.id, second.id])
    # Each still removes what it published itself.
    Store(other).delete_experiment(second.id)
    assert [Path(p).name[:16] for p in sync(Store(other), branch="kexp/agents").removed] == [
        second.id
    ]
    assert remote_ids(remote, "kexp/agents") == [first.id]


@pytest.mark.parametrize("branch", [None, "kexp/alice"])
def test_a_second_rm_says_the_removal_is_made_and_which_sync_publishes_it(
    tmp_path: Path, branch: str | None
) -> None:
    """``kexp rm`` of an experiment removed here already (synced on main, or published
    to a side branch from beside the checkout): the advice is not a merge (it brought
    nothing back on main, and would merge the side branch into the checkout) but the
    sync that publishes the removal; run as written, it does."""
    remote, base = make_remote(tmp_path)
    alice = clone(remote, tmp_path / "alice")
    kept = record(alice, base, "Vectorized loads - +12%", score=1.12)
    gone = record(alice, base, "Unroll 8 - crash", score=1.0)
    sync(Store(alice), branch=branch)
    assert run_kexp("rm", gone.id, "--yes", cwd=alice).returncode == 0
    head = git(alice, "rev-parse", "HEAD")

    again = run_kexp("rm", gone.id, "--yes", cwd=alice)
    assert again.returncode != 0 and again.stderr.count("\n") == 1, again.stderr
    assert "merge" not in again.stderr, again.stderr
    command = f"kexp sync{f' --branch {branch}' if branch else ''} publishes the removal"
    assert command in again.stderr, again.stderr
    assert git(alice, "rev-parse", "HEAD") == head
    if branch is None:  # another write naming it: its file is deleted here, restore it
        update = run_kexp("update", gone.id, "--set", "score=1.01", cwd=alice)
        assert update.returncode != 0 and "merge" not in update.stderr, update.stderr
        assert "git status shows its file deleted): restore it" in update.stderr
    followed = run_kexp(*command.split()[1:-3], cwd=alice)
    assert followed.returncode == 0, followed.stderr
    assert remote_ids(remote, branch or "main") == [kept.id]


def test_a_removal_whose_child_another_clone_published_says_what_to_run_beside(
    tmp_path: Path,
) -> None:
    """Alice published an experiment to a shared side branch; Bob brought it in and
    published a step built on it there; Alice, who has not fetched, ``kexp rm``s hers
    and syncs ``--branch``: each side is valid, the merge is not (Bob's step would lose
    its parent). Nothing is pushed, and the one line says what fits a branch published
    beside the checkout (no merge into the checkout): the commands that keep the parent,
    which, run as printed, with the sync again, leave the branch valid with both."""
    import re
    import subprocess

    remote, base = make_remote(tmp_path)
    alice, bob = clone(remote, tmp_path / "alice"), clone(remote, tmp_path / "bob")
    parent = record(alice, base, "Vectorized loads - +12%", score=1.12)
    assert run_kexp("sync", "--branch", "kexp/shared", cwd=alice).returncode == 0
    git(bob, "fetch", "-q")
    git(bob, "restore", "--source", "origin/kexp/shared", "--", relative(alice, parent.path))
    child = record(
        bob, base, "Unroll 8 on top - +1%", score=1.01, pid=parent.id,
        measured_against="parent",
    )  # fmt: skip
    assert run_kexp("sync", "--branch", "kexp/shared", cwd=bob).returncode == 0
    tip = git(remote, "rev-parse", "kexp/shared")

    Store(alice).delete_experiment(parent.id)
    done = run_kexp("sync", "--branch", "kexp/shared", cwd=alice)
    assert done.returncode != 0
    said = done.stderr.strip()
    assert len(said.splitlines()) == 1 and "dangling" in said, said
    assert "git merge" not in said and "git -c merge" not in said, said
    assert git(remote, "rev-parse", "kexp/shared") == tip
    command = re.search(r"run (git .+?), then run (kexp sync --branch \S+) again", said)
    assert command, said
    subprocess.run(command.group(1), shell=True, cwd=alice, check=True)
    again = run_kexp(*command.group(2).split()[1:], cwd=alice)
    assert again.returncode == 0, again.stderr
    assert sorted(remote_ids(remote, "kexp/shared")) == sorted([parent.id, child.id])
    valid = run_kexp("validate", "--rev", "origin/kexp/shared", cwd=alice)
    assert valid.returncode == 0, valid.stdout + valid.stderr
