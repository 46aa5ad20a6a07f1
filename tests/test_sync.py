"""``kexp sync`` with real git: a bare repository on disk as the remote, real clones,
and real processes syncing at once.

The truth is read from git itself (``git ls-tree`` of the remote's branch) and from the
files, never from what kexp reports about itself.
"""

from __future__ import annotations

import json
import multiprocessing
import re
import traceback
from collections.abc import Callable
from multiprocessing.synchronize import Barrier
from pathlib import Path
from typing import Any

import pytest
from conftest import experiment_fields, git, init_repo, run_kexp

import kexp
from kexp import GitError, KexpError, Store, SyncConflictError, ValidationError
from kexp.storage.sync import sync

CONTEXT = multiprocessing.get_context("forkserver")
CONTEXT.set_forkserver_preload([__name__])
CLONES = 8
PER_CLONE = 25
SYNC_EVERY = 5
_EXPERIMENT = re.compile(r"experiments/\d{4}/\d{2}/(?:[0-9a-f]{2}/)?([0-9a-f]{16})-[a-z0-9-]*\.md")


def make_remote(tmp_path: Path) -> tuple[Path, str]:
    """A bare repository holding one commit (a kernel and an empty store); its ``main``."""
    seed = init_repo(tmp_path / "seed")
    (seed / "experiments").mkdir()
    (seed / "experiments" / "README.md").write_text("The experiments.\n")
    git(seed, "add", "experiments")
    git(seed, "commit", "-q", "-m", "store")
    remote = tmp_path / "remote.git"
    git(tmp_path, "clone", "-q", "--bare", str(seed), str(remote))
    return remote, git(seed, "rev-parse", "HEAD")


def clone(remote: Path, folder: Path, branch: str = "main") -> Path:
    """A clone of ``remote`` at ``folder`` with an identity, on ``branch``."""
    git(remote.parent, "clone", "-q", str(remote), str(folder))
    git(folder, "config", "user.name", f"Agent {folder.name}")
    git(folder, "config", "user.email", f"{folder.name}@example.com")
    git(folder, "config", "commit.gpgsign", "false")
    if branch != "main":
        git(folder, "checkout", "-q", "-b", branch)
    return folder


def record(root: Path, base: str, summary: str, **fields: Any) -> kexp.KernelExperiment:
    return Store(root).create_experiment(
        **experiment_fields(change_summary=summary, base_commit=base, **fields)
    )


def published(
    tmp_path: Path, *steps: tuple[str, dict[str, Any]]
) -> tuple[Path, str, list[kexp.KernelExperiment]]:
    """A bare remote (:func:`make_remote`) whose ``main`` holds ``steps`` (a summary and
    fields each), recorded in a publisher's clone (``tmp_path / "publisher"``) and
    synced: (the remote, its first commit: an empty store, the experiments)."""
    remote, base = make_remote(tmp_path)
    publisher = clone(remote, tmp_path / "publisher")
    made = [record(publisher, base, summary, **fields) for summary, fields in steps]
    sync(Store(publisher))
    return remote, base, made


def remote_ids(remote: Path, branch: str = "main") -> list[str]:
    """The experiment ids in the remote branch's tree, one per file (duplicates kept)."""
    listing = git(remote, "ls-tree", "-r", "--name-only", branch, "--", "experiments")
    return [m.group(1) for line in listing.splitlines() if (m := _EXPERIMENT.fullmatch(line))]


def files_ids(root: Path) -> list[str]:
    """The experiment ids of the files in a working tree's ``experiments/``."""
    return [
        m.group(1)
        for path in (root / "experiments").rglob("*.md")
        if (m := _EXPERIMENT.fullmatch(path.relative_to(root).as_posix()))
    ]


# --- two clones -----------------------------------------------------------------------


def test_two_clones_see_each_other_within_one_sync_and_one_fetch(tmp_path: Path) -> None:
    remote, base = make_remote(tmp_path)
    alice, bob = clone(remote, tmp_path / "alice"), clone(remote, tmp_path / "bob")
    a = record(alice, base, "Unrolled by 4 - +1.9%")
    b = record(bob, base, "Vectorized stores - +3.0%", score=1.03)

    first = sync(Store(alice))
    assert (
        first.pushed
        and first.commit
        and first.committed == (Path(str(a.path)).relative_to(alice).as_posix(),)
    )
    second = sync(Store(bob))  # merges alice's in, pushes both
    assert second.merged and second.pushed
    assert sorted(remote_ids(remote)) == sorted([a.id, b.id])
    assert {e.id for e in Store(bob).list_experiments()} == {a.id, b.id}
    # Alice: one more sync (a fetch and a fast-forward) and bob's is in her tree.
    third = sync(Store(alice))
    assert third.merged and not third.pushed and not third.commit
    assert {e.id for e in Store(alice).list_experiments()} == {a.id, b.id}


def test_nothing_new_commits_and_pushes_nothing(tmp_path: Path) -> None:
    remote, base = make_remote(tmp_path)
    alice = clone(remote, tmp_path / "alice")
    record(alice, base, "Unrolled by 4 - +1.9%")
    sync(Store(alice))
    head, remote_head = git(alice, "rev-parse", "HEAD"), git(remote, "rev-parse", "main")
    again = sync(Store(alice))
    assert again.up_to_date and not again.commit and again.push_attempts == 0
    assert git(alice, "rev-parse", "HEAD") == head
    assert git(remote, "rev-parse", "main") == remote_head
    assert "up to date" in again.lines()[0]


def test_only_experiment_files_are_committed(tmp_path: Path) -> None:
    remote, base = make_remote(tmp_path)
    alice = clone(remote, tmp_path / "alice")
    (alice / "kernel.cu").write_text("__global__ void k() { /* work in progress */ }\n")
    (alice / "notes.txt").write_text("untracked notes\n")
    exp = record(alice, base, "Unrolled by 4 - +1.9%")
    hidden = Path(str(exp.path)).parent / ".writer.tmp"
    hidden.write_text("a writer's temporary file\n")

    result = sync(Store(alice))
    committed = git(alice, "show", "--name-only", "--format=", "HEAD").splitlines()
    assert committed == [Path(str(exp.path)).relative_to(alice).as_posix()]
    assert list(result.committed) == committed
    status = [line.strip() for line in git(alice, "status", "--porcelain", "-uall").splitlines()]
    assert "M kernel.cu" in status and "?? notes.txt" in status
    assert f"?? {Path(str(hidden)).relative_to(alice).as_posix()}" in status
    assert (alice / "kernel.cu").read_text().endswith("/* work in progress */ }\n")


def test_a_deletion_staged_with_git_rm_is_published(tmp_path: Path) -> None:
    """``git rm`` of an experiment file, then ``kexp sync``: the file is in neither the
    working tree nor the index, and the sync commits its deletion (it failed with
    "pathspec did not match any files")."""
    remote, base = make_remote(tmp_path)
    alice = clone(remote, tmp_path / "alice")
    kept = record(alice, base, "Unrolled by 4 - +1.9%")
    gone = record(alice, base, "Unrolled by 8 - -0.4%")
    sync(Store(alice))
    git(alice, "rm", "-q", str(gone.path))
    result = sync(Store(alice))
    assert result.pushed and result.committed == ()
    assert result.removed == (Path(str(gone.path)).relative_to(alice).as_posix(),)
    assert remote_ids(remote) == [kept.id]


def test_other_staged_work_is_refused_with_one_clear_line(tmp_path: Path) -> None:
    remote, base = make_remote(tmp_path)
    alice = clone(remote, tmp_path / "alice")
    record(alice, base, "Unrolled by 4 - +1.9%")
    (alice / "kernel.cu").write_text("__global__ void k2() {}\n")
    git(alice, "add", "kernel.cu")
    head = git(alice, "rev-parse", "HEAD")
    with pytest.raises(KexpError, match=r"staged changes outside experiments/ \(kernel.cu\)"):
        sync(Store(alice))
    assert git(alice, "rev-parse", "HEAD") == head
    assert git(alice, "status", "--porcelain", "--untracked-files=no") == "M  kernel.cu"
    result = run_kexp("sync", cwd=alice)
    assert result.returncode == 2
    assert result.stderr.count("\n") == 1 and "git restore --staged" in result.stderr


def test_dry_run_changes_nothing_and_json_says_what_was_pushed(tmp_path: Path) -> None:
    remote, base = make_remote(tmp_path)
    alice = clone(remote, tmp_path / "alice")
    exp = record(alice, base, "Unrolled by 4 - +1.9%")
    head, remote_head = git(alice, "rev-parse", "HEAD"), git(remote, "rev-parse", "main")
    shown = run_kexp("sync", "--dry-run", cwd=alice)
    assert shown.returncode == 0, shown.stderr
    assert "would commit 1 experiment file(s)" in shown.stdout and exp.id in shown.stdout
    assert git(alice, "rev-parse", "HEAD") == head
    assert git(remote, "rev-parse", "main") == remote_head
    assert "??" in git(alice, "status", "--porcelain", "--untracked-files=all")

    done = run_kexp("sync", "--json", cwd=alice)
    assert done.returncode == 0, done.stderr
    data = json.loads(done.stdout)
    assert data["pushed"] is True and data["commits_pushed"] == 1
    assert data["head"] == git(remote, "rev-parse", "main") == git(alice, "rev-parse", "HEAD")
    assert [Path(p).name for p in data["committed"]] == [Path(str(exp.path)).name]
    assert remote_ids(remote) == [exp.id]


def test_a_dry_runs_json_says_what_it_would_push_never_that_it_pushed(tmp_path: Path) -> None:
    """Bob pushed an experiment; Alice recorded one. ``kexp sync --dry-run --json`` said
    ``"pushed": true`` (and ``"merged": true``) for what it only would do: an agent
    reading it believed her experiment published. A dry run says it pushed and merged
    nothing, and what it would do under ``would_*`` keys; the sync then does that. Once
    it has, her clone is up to date with the remote (it said ``"up_to_date": false``
    after publishing everything, holding nothing back: an agent thought something
    still pending)."""
    remote, base = make_remote(tmp_path)
    alice, bob = clone(remote, tmp_path / "alice"), clone(remote, tmp_path / "bob")
    record(bob, base, "Vectorized stores - +2.5%")
    sync(Store(bob))
    mine = record(alice, base, "Unrolled by 4 - +1.9%")
    git(alice, "fetch", "-q")
    tip = git(remote, "rev-parse", "main")

    shown = run_kexp("sync", "--dry-run", "--json", cwd=alice)
    assert shown.returncode == 0, shown.stderr
    planned = json.loads(shown.stdout)
    assert planned["dry_run"] is True and planned["commit"] is None, planned
    assert planned["pushed"] is False and planned["commits_pushed"] == 0, planned
    assert planned["merged"] is False and planned["created_branch"] is False, planned
    assert planned["would_push"] is True and planned["commits_to_push"] == 2, planned
    assert planned["would_merge"] is True and planned["up_to_date"] is False, planned
    assert git(remote, "rev-parse", "main") == tip  # nothing pushed, as it says

    done = json.loads(run_kexp("sync", "--json", cwd=alice).stdout)
    assert done["dry_run"] is False and done["would_push"] is False, done
    assert done["pushed"] is True and done["merged"] is True, done
    assert done["commits_pushed"] == planned["commits_to_push"], (planned, done)
    assert mine.id in remote_ids(remote)
    assert git(remote, "rev-parse", "main") == git(alice, "rev-parse", "HEAD")
    assert done["held_back"] == [] and done["up_to_date"] is True, done


def test_branch_option_publishes_beside_the_checkout(tmp_path: Path) -> None:
    remote, base = make_remote(tmp_path)
    alice = clone(remote, tmp_path / "alice")
    (alice / "kernel.cu").write_text("__global__ void wip() {}\n")
    exp = record(alice, base, "Unrolled by 4 - +1.9%")
    head = git(alice, "rev-parse", "HEAD")
    before = git(alice, "status", "--porcelain", "--untracked-files=all")

    result = kexp_sync_in(alice, branch="kexp/alice")
    assert result.pushed and result.branch == "kexp/alice"
    assert git(alice, "rev-parse", "HEAD") == head  # main, untouched
    assert git(alice, "symbolic-ref", "--short", "HEAD") == "main"
    assert git(alice, "status", "--porcelain", "--untracked-files=all") == before
    assert remote_ids(remote, "kexp/alice") == [exp.id]
    assert remote_ids(remote, "main") == []
    assert git(remote, "rev-parse", "kexp/alice") == git(alice, "rev-parse", "kexp/alice")
    # Nothing new: nothing committed, the branch stays where it is.
    tip = git(alice, "rev-parse", "kexp/alice")
    assert kexp_sync_in(alice, branch="kexp/alice").up_to_date
    assert git(alice, "rev-parse", "kexp/alice") == tip


def test_a_side_branch_with_nothing_to_publish_is_not_created(tmp_path: Path) -> None:
    """An agent that syncs to its own branch before recording anything (or after its
    experiments landed on main) publishes nothing: no branch appears, on the remote or
    here, to open an empty pull request from."""
    remote, base = make_remote(tmp_path)
    alice = clone(remote, tmp_path / "alice")
    result = kexp_sync_in(alice, branch="kexp/alice")
    assert result.up_to_date and not result.pushed and result.head is None
    assert "kexp/alice" not in git(remote, "branch", "--list")
    assert "kexp/alice" not in git(alice, "branch", "--list")
    shown = run_kexp("sync", "--branch", "kexp/bob", cwd=alice)
    assert shown.returncode == 0, shown.stderr
    assert shown.stdout.strip() == (  # not "up to date with" a branch origin lacks
        "nothing to publish: kexp/bob is not on origin yet (nor here); the first sync with an "
        "experiment to publish makes it"
    )
    assert git(remote, "branch", "--list") == "* main"
    # Once it holds an experiment, the branch is made and published.
    exp = record(alice, base, "Unrolled by 4 - +1.9%")
    assert kexp_sync_in(alice, branch="kexp/alice").pushed
    assert remote_ids(remote, "kexp/alice") == [exp.id]


def test_a_side_branch_publishes_what_the_checkout_committed_and_the_remote_lacks(
    tmp_path: Path,
) -> None:
    """Nothing new in the working tree, but the checkout's commits hold experiments the
    remote lacks (committed by hand on main, ahead of origin/main): the side branch is
    made there and pushed (its dry run does not find it up to date). From a detached
    HEAD, the branch starts at HEAD's commit (not an unrelated history of every file),
    and is made only when there is something to publish."""
    remote, base = make_remote(tmp_path)
    alice = clone(remote, tmp_path / "alice")
    exp = record(alice, base, "Unrolled by 4 - +1.9%")
    git(alice, "add", "experiments")
    git(alice, "commit", "-q", "-m", "record the unroll")
    assert not sync(Store(alice), branch="kexp/alice", dry_run=True).up_to_date
    result = kexp_sync_in(alice, branch="kexp/alice")
    assert result.pushed and result.up_to_date
    assert remote_ids(remote, "kexp/alice") == [exp.id]
    assert remote_ids(remote, "main") == []

    bob = clone(remote, tmp_path / "bob", branch="main")
    git(bob, "checkout", "-q", "--detach")
    head = git(bob, "rev-parse", "HEAD")
    assert kexp_sync_in(bob, branch="kexp/bob").up_to_date  # HEAD is origin/main's
    assert "kexp/bob" not in git(remote, "branch", "--list")
    made = record(bob, base, "Vectorized stores - +2.5%")
    assert kexp_sync_in(bob, branch="kexp/bob").pushed
    assert remote_ids(remote, "kexp/bob") == [made.id]
    assert git(remote, "rev-parse", "kexp/bob^") == head  # on HEAD's history
    assert git(bob, "rev-parse", "HEAD") == head  # the checkout untouched


def test_a_side_branch_publishes_experiments_the_remote_lacks_and_nothing_else(
    tmp_path: Path,
) -> None:
    """What a side branch publishes is experiments: a checkout ahead only by code
    commits, a work branch level with the remote (its default branch unnamed), and a
    side branch merged and deleted there publish nothing (no empty pull request); an
    invalid experiment committed by hand is refused, as a sync of the checkout refuses
    it, before any branch is made."""
    remote, base = make_remote(tmp_path)
    alice = clone(remote, tmp_path / "alice")
    git(alice, "remote", "set-head", "origin", "-d")  # as after a push to an empty remote
    (alice / "kernel.cu").write_text("__global__ void k2() { /* unrolled */ }\n")
    git(alice, "add", "kernel.cu")
    git(alice, "commit", "-q", "-m", "kernel work, not published yet")
    assert kexp_sync_in(alice, branch="kexp/alice").up_to_date
    git(alice, "checkout", "-q", "-b", "work", "origin/main")
    assert kexp_sync_in(alice, branch="kexp/alice").up_to_date
    assert git(remote, "branch", "--list") == "* main"

    exp = record(alice, base, "Unrolled by 4 - +1.9%")
    assert kexp_sync_in(alice, branch="kexp/alice").pushed
    git(remote, "update-ref", "refs/heads/main", git(remote, "rev-parse", "kexp/alice"))
    git(remote, "branch", "-D", "kexp/alice")  # merged, and the branch deleted
    git(alice, "fetch", "-q", "--prune")
    assert kexp_sync_in(alice, branch="kexp/alice").up_to_date
    assert git(remote, "branch", "--list") == "* main"
    assert remote_ids(remote, "main") == [exp.id]

    bad = record(alice, base, "Vectorized stores - +2.5%")
    path = Path(str(bad.path))
    path.write_text(path.read_text().replace("score: 1.019", "score: -5"))
    git(alice, "add", "experiments")
    git(alice, "commit", "-q", "-m", "a hand edit gone wrong")
    with pytest.raises(ValidationError, match="score"):
        kexp_sync_in(alice, branch="kexp/bad")
    assert "kexp/bad" not in git(remote, "branch", "--list")


@pytest.mark.parametrize("merged", ["merge commit", "squashed, branch deleted", "squashed"])
def test_a_side_branch_whose_pull_request_merged_publishes_only_what_is_new(
    tmp_path: Path, merged: str
) -> None:
    """Bob's pull request (kexp/bob) is merged as forges merge (a merge commit; squashed,
    the branch deleted or kept); Bob moves his checkout to main, corrects Alice's
    experiment and records another, and syncs to kexp/bob again: the branch carries the
    correction as a correction and the new experiment, nothing of main's copied, and it
    merges into main cleanly (it was built on the stale branch: the correction arrived
    as a new file, an add/add conflict)."""
    remote, base = make_remote(tmp_path)
    alice = clone(remote, tmp_path / "alice")
    corrected = record(alice, base, "Unrolled by 4 - +1.9%")
    sync(Store(alice))
    bob = clone(remote, tmp_path / "bob")
    record(bob, base, "Vectorized stores - +2.5%")
    sync(Store(bob), branch="kexp/bob")
    forge = clone(remote, tmp_path / "forge")
    if merged == "merge commit":
        git(forge, "merge", "-q", "--no-ff", "--no-edit", "origin/kexp/bob")
    else:
        git(forge, "merge", "-q", "--squash", "origin/kexp/bob")
        git(forge, "commit", "-q", "-m", "Vectorized stores (#1)")
        if merged == "squashed, branch deleted":
            git(forge, "push", "-q", "origin", "--delete", "kexp/bob")
    git(forge, "push", "-q", "origin", "main")
    git(bob, "fetch", "-q", "--prune")
    git(bob, "reset", "-q", "--hard", "origin/main")  # his published file is main's now
    Store(bob).update_experiment(corrected.id, score=1.017)
    new = record(bob, base, "Nontemporal stores - +4.1%")

    planned = sync(Store(bob), branch="kexp/bob", dry_run=True)
    done = sync(Store(bob), branch="kexp/bob")
    assert done.pushed and planned.would_push and not planned.pushed
    assert sorted(Path(p).name[:16] for p in done.committed) == sorted([corrected.id, new.id])
    changes = git(remote, "diff", "--no-renames", "--name-status", "main...kexp/bob")
    assert sorted(
        line.split("\t")[0] + " " + Path(line).name[:16] for line in changes.splitlines()
    ) == sorted([f"M {corrected.id}", f"A {new.id}"]), changes
    merge = git(remote, "merge-tree", "--write-tree", "main", "kexp/bob")  # exits 1 on conflict
    assert "CONFLICT" not in merge


def test_a_side_branch_is_not_made_for_files_the_remote_holds_alike(tmp_path: Path) -> None:
    """Alice's checkout holds, untracked, the experiment her merged pull request brought
    to main (she has not pulled): a new side branch would be an empty pull request, so
    none is made; what is new beside it is published alone."""
    remote, base = make_remote(tmp_path)
    alice = clone(remote, tmp_path / "alice")
    exp = record(alice, base, "Unrolled by 4 - +1.9%")
    sync(Store(alice), branch="kexp/alice")
    forge = clone(remote, tmp_path / "forge")
    git(forge, "merge", "-q", "--no-ff", "--no-edit", "origin/kexp/alice")
    git(forge, "push", "-q", "origin", "main")
    git(alice, "fetch", "-q")
    assert sync(Store(alice), branch="kexp/alice2", dry_run=True).up_to_date
    result = sync(Store(alice), branch="kexp/alice2")
    assert result.up_to_date and "kexp/alice2" not in git(remote, "branch", "--list")
    new = record(alice, base, "Vectorized stores - +2.5%")
    result = sync(Store(alice), branch="kexp/alice2")
    assert result.pushed and [Path(p).name[:16] for p in result.committed] == [new.id]
    assert sorted(remote_ids(remote, "kexp/alice2")) == sorted([new.id])
    assert exp.id in remote_ids(remote, "main")


def kexp_sync_in(root: Path, **arguments: Any) -> kexp.SyncResult:
    """``kexp.sync(...)`` (the Python twin) run from ``root``, as an agent runs it."""
    import os

    saved = Path.cwd()
    os.chdir(root)
    try:
        return kexp.sync(**arguments)
    finally:
        os.chdir(saved)


# --- a real conflict --------------------------------------------------------------------


def test_the_same_experiment_corrected_on_both_sides_stops_naming_the_file(
    tmp_path: Path,
) -> None:
    remote, base = make_remote(tmp_path)
    alice = clone(remote, tmp_path / "alice")
    exp = record(alice, base, "Unrolled by 4 - +1.9%")
    sync(Store(alice))
    bob = clone(remote, tmp_path / "bob")
    Store(alice).update_experiment(exp.id, score=1.021)
    Store(bob).update_experiment(exp.id, score=1.017)
    sync(Store(alice))
    remote_head = git(remote, "rev-parse", "main")
    relative = Path(str(exp.path)).relative_to(alice).as_posix()

    with pytest.raises(SyncConflictError, match=re.escape(relative)) as caught:
        sync(Store(bob))
    assert caught.value.paths == [relative]
    assert git(remote, "rev-parse", "main") == remote_head  # the remote untouched
    # Nothing lost: bob's correction is committed locally and still in his file.
    assert "score: 1.017" in git(bob, "show", f"HEAD:{relative}")
    assert "score: 1.017" in (bob / relative).read_text()
    assert Store(bob).get_experiment(exp.id).score == 1.017
    assert not (bob / ".git" / "MERGE_HEAD").exists()
    shown = run_kexp("sync", cwd=bob)
    assert shown.returncode == 2 and relative in shown.stderr
    assert shown.stderr.count("\n") == 1


# --- refused before git sees them -------------------------------------------------------


@pytest.mark.parametrize(
    "branch",
    ["--upload-pack=touch HACKED", "-b", "a..b", "HEAD", "refs/heads/x", "x y", "a\nb", "x.lock",
     "feature/\u202ex", "x:y", "*", ""],
)  # fmt: skip
def test_hostile_branch_names_are_refused(tmp_path: Path, branch: str) -> None:
    remote, base = make_remote(tmp_path)
    alice = clone(remote, tmp_path / "alice")
    record(alice, base, "Unrolled by 4 - +1.9%")
    head = git(alice, "rev-parse", "HEAD")
    with pytest.raises(GitError, match="not a branch name kexp accepts"):
        sync(Store(alice), branch=branch)
    assert git(alice, "rev-parse", "HEAD") == head
    assert not (alice / "HACKED").exists() and not (tmp_path / "HACKED").exists()
    assert git(remote, "branch", "--list").split() == ["*", "main"]


@pytest.mark.parametrize("name", ["--exec=touch HACKED", "-v", "a b", "nowhere", ""])
def test_hostile_or_unknown_remotes_are_refused(tmp_path: Path, name: str) -> None:
    remote, base = make_remote(tmp_path)
    alice = clone(remote, tmp_path / "alice")
    record(alice, base, "Unrolled by 4 - +1.9%")
    with pytest.raises(GitError, match="remote"):
        sync(Store(alice), remote=name)
    assert not (alice / "HACKED").exists()
    assert git(alice, "log", "--format=%s").splitlines() == ["store", "initial kernel"]


# --- many clones at once ----------------------------------------------------------------


def _clone_worker(
    root: str, base: str, index: int, branch: str | None, barrier: Barrier, out: Any
) -> None:
    """Record PER_CLONE experiments, syncing every SYNC_EVERY; report each sync."""
    try:
        barrier.wait(timeout=120)
        made: list[str] = []
        reports: list[dict[str, Any]] = []
        for n in range(PER_CLONE):
            exp = record(Path(root), base, f"Clone {index} try {n} - +{n}%", score=1 + n / 100)
            made.append(exp.id)
            if (n + 1) % SYNC_EVERY == 0:
                result = sync(Store(root), branch=branch, attempts=60, backoff=0.05)
                reports.append(result.to_dict())
        out.put((index, made, reports, None))
    except BaseException:
        out.put((index, [], [], traceback.format_exc()))


def _run_clones(
    tmp_path: Path, remote: Path, base: str, branches: list[str | None]
) -> tuple[list[Path], dict[int, tuple[list[str], list[dict[str, Any]]]]]:
    roots = [clone(remote, tmp_path / f"clone{i}") for i in range(len(branches))]
    barrier = CONTEXT.Barrier(len(roots))
    out = CONTEXT.Queue()
    workers = [
        CONTEXT.Process(
            target=_clone_worker, args=(str(root), base, i, branch, barrier, out)
        )
        for i, (root, branch) in enumerate(zip(roots, branches, strict=True))
    ]  # fmt: skip
    for worker in workers:
        worker.start()
    results: dict[int, tuple[list[str], list[dict[str, Any]]]] = {}
    errors: list[str] = []
    for _ in workers:
        index, made, reports, error = out.get(timeout=600)
        if error:
            errors.append(error)
        results[index] = (made, reports)
    for worker in workers:
        worker.join(timeout=60)
    assert not errors, errors[0]
    return roots, results


@pytest.mark.slow  # scale: pytest -m slow (.ci/run)
def test_eight_clones_syncing_to_one_branch_at_once_lose_nothing(tmp_path: Path) -> None:
    remote, base = make_remote(tmp_path)
    roots, results = _run_clones(tmp_path, remote, base, [None] * CLONES)
    made = [exp_id for ids, _ in results.values() for exp_id in ids]
    assert len(made) == len(set(made)) == CLONES * PER_CLONE
    on_remote = remote_ids(remote)
    assert len(on_remote) == len(set(on_remote))  # none duplicated
    assert sorted(on_remote) == sorted(made)  # none lost
    reports = [r for _, rs in results.values() for r in rs]
    assert len(reports) == CLONES * PER_CLONE // SYNC_EVERY
    for report in reports:
        # Every sync committed its five files and got them onto the remote: pushed, or
        # (rejected, then) found them already there after another clone's merge.
        assert len(report["committed"]) == SYNC_EVERY
        assert report["push_attempts"] == report["rejected_pushes"] + int(report["pushed"])
    assert any(r["pushed"] for r in reports)
    assert sum(r["rejected_pushes"] for r in reports) > 0  # the race really happened
    # Every clone sees all of them after a fetch, read across refs (no pull) ...
    for root in roots:
        git(root, "fetch", "-q")
        across = Store(root, refs=["origin/*"]).list_experiments(brief=True)
        assert sorted(e.id for e in across) == sorted(made)
    # ... and in its files after one more sync (a fetch and a fast-forward).
    for root in roots:
        sync(Store(root))
        assert sorted(files_ids(root)) == sorted(made)
        assert sorted(e.id for e in Store(root).list_experiments()) == sorted(made)
    assert git(remote, "fsck", "--no-progress") == ""


@pytest.mark.slow  # scale: pytest -m slow (.ci/run)
def test_eight_clones_on_eight_branches_each_publish_their_own(tmp_path: Path) -> None:
    remote, base = make_remote(tmp_path)
    branches: list[str | None] = [f"kexp/agent-{i}" for i in range(CLONES)]
    _, results = _run_clones(tmp_path, remote, base, branches)
    for index, (made, reports) in results.items():
        assert sorted(remote_ids(remote, f"kexp/agent-{index}")) == sorted(made)
        assert all(r["rejected_pushes"] == 0 for r in reports)


def test_two_clones_share_a_side_branch_without_touching_their_checkouts(
    tmp_path: Path,
) -> None:
    remote, base = make_remote(tmp_path)
    alice, bob = clone(remote, tmp_path / "alice"), clone(remote, tmp_path / "bob")
    first = record(alice, base, "Unrolled by 4 - +1.9%")
    sync(Store(alice), branch="kexp/shared")
    second = record(bob, base, "Vectorized - +3.0%", score=1.03)
    made = sync(Store(bob), branch="kexp/shared")  # builds on the remote's branch
    assert made.pushed and not made.merged
    third = record(alice, base, "Unrolled by 8 - +2.5%", score=1.025)
    again = sync(Store(alice), branch="kexp/shared")  # behind the remote: merged
    assert again.merged and again.pushed
    assert sorted(remote_ids(remote, "kexp/shared")) == sorted([first.id, second.id, third.id])
    for root in (alice, bob):
        assert git(root, "symbolic-ref", "--short", "HEAD") == "main"
        assert git(root, "rev-parse", "HEAD") == git(remote, "rev-parse", "main")
    assert remote_ids(remote, "main") == []


# --- a dry run says what the sync then does ---------------------------------------------


def _ahead_by_a_committed_experiment(alice: Path, base: str, remote: Path) -> None:
    record(alice, base, "Unrolled by 4 - +1.9%")
    git(alice, "add", "experiments")
    git(alice, "commit", "-q", "-m", "record the unroll")


def _ahead_by_code(alice: Path, base: str, remote: Path) -> None:
    (alice / "kernel.cu").write_text("__global__ void k2() { /* unrolled */ }\n")
    git(alice, "add", "kernel.cu")
    git(alice, "commit", "-q", "-m", "kernel work")


def _behind_the_remote(alice: Path, base: str, remote: Path) -> None:
    bob = clone(remote, alice.parent / "bob")
    record(bob, base, "Vectorized stores - +2.5%")
    sync(Store(bob))
    git(alice, "fetch", "-q")


def _both_moved(alice: Path, base: str, remote: Path) -> None:
    _behind_the_remote(alice, base, remote)
    record(alice, base, "Unrolled by 4 - +1.9%")


def _bob_publishes(alice: Path, base: str, remote: Path, branch: str) -> None:
    bob = clone(remote, alice.parent / f"bob-{branch.replace('/', '-')}")
    record(bob, base, f"Vectorized stores on {branch} - +2.5%")
    sync(Store(bob), branch=branch)
    git(alice, "fetch", "-q")


def _merged_from_a_branch_since_deleted(alice: Path, base: str, remote: Path) -> None:
    """Alice's work branch holds what Bob published, and Bob's branch is gone from the
    remote (a pull request closed unmerged): the remote holds it nowhere any more."""
    _bob_publishes(alice, base, remote, "kexp/bob")
    git(alice, "checkout", "-q", "-b", "work")
    git(alice, "merge", "-q", "--no-edit", "origin/kexp/bob")
    git(remote, "branch", "-D", "kexp/bob")  # this clone's origin/kexp/bob is stale now


def _merged_from_two_branches(alice: Path, base: str, remote: Path) -> None:
    """Alice's work branch merges two published branches: each experiment is on one of
    them, none new."""
    _bob_publishes(alice, base, remote, "kexp/bob")
    _bob_publishes(alice, base, remote, "kexp/carol")
    git(alice, "checkout", "-q", "-b", "work", "origin/kexp/bob")
    git(alice, "merge", "-q", "--no-edit", "origin/kexp/carol")


def _moved_to_a_new_remote(alice: Path, base: str, remote: Path) -> None:
    """Alice's work branch was published on the old remote; the team moved to a new one
    (which has main alone): her origin/work is the old remote's."""
    git(alice, "checkout", "-q", "-b", "work")
    record(alice, base, "Unrolled by 4 - +1.9%")
    sync(Store(alice))
    moved = remote.parent / "moved.git"
    git(remote.parent, "clone", "-q", "--bare", "--single-branch", str(remote), str(moved))
    git(alice, "remote", "set-url", "origin", str(moved))


def _on_a_remote_named_like_a_prefix(alice: Path, base: str, remote: Path) -> None:
    """A second remote ``origin/old`` holds Alice's work branch; ``origin`` does not."""
    other = remote.parent / "old.git"
    git(remote.parent, "clone", "-q", "--bare", str(remote), str(other))
    git(alice, "remote", "add", "origin/old", str(other))
    git(alice, "checkout", "-q", "-b", "work")
    record(alice, base, "Unrolled by 4 - +1.9%")
    git(alice, "add", "experiments")
    git(alice, "commit", "-q", "-m", "record the unroll")
    git(alice, "push", "-q", "origin/old", "work")


def _pull_request_merged(alice: Path, base: str, remote: Path) -> None:
    """Alice published to kexp/alice from main (its files untracked here), and her pull
    request was merged on the remote (squashed): main holds them alike."""
    record(alice, base, "Unrolled by 4 - +1.9%")
    sync(Store(alice), branch="kexp/alice")
    forge = clone(remote, alice.parent / "forge")
    git(forge, "merge", "-q", "--squash", "origin/kexp/alice")
    git(forge, "commit", "-q", "-m", "Unrolled by 4 (#1)")
    git(forge, "push", "-q", "origin", "main")
    git(alice, "fetch", "-q")


_SCENARIOS: dict[str, Callable[[Path, str, Path], object]] = {
    "level": lambda alice, base, remote: None,
    "an experiment not committed": lambda alice, base, remote: record(
        alice, base, "Unrolled by 4 - +1.9%"
    ),
    "ahead by a committed experiment": _ahead_by_a_committed_experiment,
    "ahead by code alone": _ahead_by_code,
    "behind the remote, fetched": _behind_the_remote,
    "both moved": _both_moved,
    "a work branch the remote lacks": lambda alice, base, remote: git(
        alice, "checkout", "-q", "-b", "work"
    ),
    "merged from a branch since deleted": _merged_from_a_branch_since_deleted,
    "merged from two branches": _merged_from_two_branches,
    "moved to a new remote": _moved_to_a_new_remote,
    "on a remote named like a prefix": _on_a_remote_named_like_a_prefix,
    "its side branch's pull request merged": _pull_request_merged,
}


def _repository_state(root: Path, remote: Path) -> tuple[str, ...]:
    """Every ref here and on the remote, and git's status: what a dry run leaves as is."""
    return (
        git(root, "for-each-ref", "--format=%(refname) %(objectname)"),
        git(root, "status", "--porcelain", "--untracked-files=all"),
        git(remote, "for-each-ref", "--format=%(refname) %(objectname)"),
    )


@pytest.mark.parametrize("branch", [None, "kexp/alice"])
@pytest.mark.parametrize("scenario", list(_SCENARIOS))
def test_a_dry_run_says_what_the_sync_then_does(
    tmp_path: Path, scenario: str, branch: str | None
) -> None:
    """An agent asks what a sync would publish, then syncs: the dry run's answer (what
    it would commit, make, merge in and push) is what
    the sync does, and the dry run changes nothing, here or on the remote. A branch new
    to the remote is pushed only with experiments it lacks, as the remote has its
    branches (not as stale remote-tracking branches, or another remote's, say)."""
    remote, base = make_remote(tmp_path)
    alice = clone(remote, tmp_path / "alice")
    _SCENARIOS[scenario](alice, base, remote)
    before = _repository_state(alice, remote)
    planned = sync(Store(alice), branch=branch, dry_run=True)
    assert _repository_state(alice, remote) == before
    done = sync(Store(alice), branch=branch)

    def answer(result: kexp.SyncResult) -> tuple[object, ...]:
        if result.dry_run:  # what it would do; it did nothing
            assert not (result.created_branch or result.merged or result.pushed), result
            assert result.commits_pushed == 0, result
            return (
                result.committed, result.removed, result.would_make_branch,
                result.would_merge, result.would_push, result.commits_to_push,
                result.held_back,
            )  # fmt: skip
        assert not (result.would_make_branch or result.would_merge or result.would_push)
        return (
            result.committed, result.removed, result.created_branch, result.merged,
            result.pushed, result.commits_pushed, result.held_back,
        )  # fmt: skip

    assert answer(planned) == answer(done), scenario
    # A branch new to the remote is published with experiments it lacks, never without
    # (an empty pull request); code commits alone are never pushed to the remote's
    # default branch (held back, and said).
    nothing_new = {
        "level", "a work branch the remote lacks", "merged from two branches",
        "ahead by code alone",
    }  # fmt: skip
    if branch is not None:
        nothing_new |= {"behind the remote, fetched", "its side branch's pull request merged"}
    assert bool(done.held_back) == (scenario == "ahead by code alone" and branch is None)
    # Held back, it is not up to date: the commits wait here for their push. Else the
    # dry run finds it up to date with nothing new, and the sync leaves it so.
    assert planned.up_to_date == (scenario in nothing_new and not done.held_back), scenario
    assert done.up_to_date == (not done.held_back), (scenario, done)
    if not done.commit and not done.merged:
        assert planned.head == done.head
    said = "\n".join(planned.lines())
    where = f"origin/{done.branch}"
    if done.pushed:
        assert f"would push {done.commits_pushed} commit(s) to {where}" in said, said
    if done.merged:
        assert f"would merge in what {where} gained" in said, said
    if done.created_branch:
        made_at = "" if done.commit else f" at {str(done.head)[:12]}"
        assert f"would make the branch {done.branch}{made_at}" in said, said
    unpublished = not git(alice, "ls-remote", "origin", f"refs/heads/{done.branch}")
    if planned.up_to_date and unpublished:
        # a branch nothing was published to (a side branch, or a checked-out one never
        # pushed): not "up to date with" a missing branch
        assert f"nothing to publish: {done.branch} is not on origin" in said, said
    elif planned.up_to_date:
        assert f"up to date with {where}: nothing to commit or push" in said, said
