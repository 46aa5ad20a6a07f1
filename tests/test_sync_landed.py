"""After a side branch's pull request lands: ``kexp sync --branch`` left the files it
published untracked in the checkout on ``main``; the pull request is merged on the
remote as a forge merges it (a merge commit, or squashed), and the team workflow's next
step, ``kexp sync`` on ``main``, brings main's files in (``git pull`` refuses: the
untracked files would be overwritten). Real git: a bare repository on disk as the
remote, the merge made in another clone and pushed. The truth is read from git and the
files."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest
from conftest import git, run_kexp
from test_sync import clone, make_remote, record, remote_ids

from kexp import Store
from kexp.storage.sync import sync


def land(remote: Path, forge: Path, branch: str, how: str, edit: str = "") -> None:
    """Merge ``branch``'s pull request into the remote's ``main`` from the clone
    ``forge``, as a forge does (``how``: a merge commit, or squashed, the branch kept);
    ``edit`` is a line the reviewer appends to every file the branch adds first."""
    if not forge.exists():
        clone(remote, forge)
    git(forge, "fetch", "-q")
    git(forge, "reset", "-q", "--hard", "origin/main")
    if how == "merge commit":
        git(forge, "merge", "-q", "--no-ff", "--no-edit", f"origin/{branch}")
    else:
        git(forge, "merge", "-q", "--squash", f"origin/{branch}")
        git(forge, "commit", "-q", "-m", f"{branch} (#1)")
    if edit:
        added = git(forge, "diff", "--name-only", "--diff-filter=A", "HEAD^", "HEAD")
        for path in added.splitlines():
            with (forge / path).open("a") as file:
                file.write(edit)
        git(forge, "commit", "-q", "-am", "review: amended")
    git(forge, "push", "-q", "origin", "main")


def relative(root: Path, path: object) -> str:
    return Path(str(path)).relative_to(root).as_posix()


@pytest.mark.parametrize("removal", ["kexp rm", "git rm"])
@pytest.mark.parametrize("how", ["merge commit", "squashed"])
def test_after_the_pull_request_merges_kexp_sync_on_main_brings_main_in(
    tmp_path: Path, how: str, removal: str
) -> None:
    """Alice records an experiment, corrects one main holds and removes another, and
    syncs to kexp/alice from main; her pull request is merged; ``kexp sync`` (the
    documented step) fast-forwards her main to the remote's: the files it published,
    untracked or changed here and alike on main (the removed one gone from both), are
    main's now; nothing is committed or pushed, nothing lost, and git pull has nothing
    left to do."""
    remote, base = make_remote(tmp_path)
    alice = clone(remote, tmp_path / "alice")
    corrected = record(alice, base, "Vectorized loads - +12%", score=1.12)
    gone = record(alice, base, "Unroll 8 - crash", score=1.0)
    sync(Store(alice))
    Store(alice).update_experiment(corrected.id, score=1.11)
    if removal == "kexp rm":
        Store(alice).delete_experiment(gone.id)
    else:  # the deletion staged
        git(alice, "rm", "-q", relative(alice, gone.path))
    exp = record(alice, base, "Unrolled by 4 - +1.9%")
    path = relative(alice, exp.path)
    text = (alice / path).read_text()
    (alice / "notes.txt").write_text("my notes\n")
    assert sync(Store(alice), branch="kexp/alice").pushed
    land(remote, tmp_path / "forge", "kexp/alice", how)
    main = git(remote, "rev-parse", "main")

    git(alice, "fetch", "-q")  # a dry run knows the remote's commits as last fetched
    planned = run_kexp("sync", "--dry-run", cwd=alice)
    assert planned.returncode == 0, planned.stderr
    assert planned.stdout.splitlines()[0] == "would merge in what origin/main gained", planned
    done = run_kexp("sync", cwd=alice)
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == ["merged the experiments of origin/main"], done.stdout
    assert git(remote, "rev-parse", "main") == main  # nothing pushed
    assert git(alice, "rev-parse", "HEAD") == main  # main's commit, checked out
    assert git(alice, "status", "--porcelain", "--untracked-files=all") == "?? notes.txt"
    assert (alice / path).read_text() == text
    assert sorted(remote_ids(remote, "main")) == sorted([corrected.id, exp.id])
    assert Store(alice).get_experiment(corrected.id).score == 1.11
    git(alice, "pull", "-q")  # nothing left for git to refuse
    assert sync(Store(alice)).up_to_date


def test_an_untracked_file_that_differs_from_main_s_is_kept_and_named(tmp_path: Path) -> None:
    """The reviewer amended Alice's experiment before the merge: her untracked copy
    differs from main's. ``kexp sync`` stops before anything changes, in one line
    naming the file and what to do; her copy is kept as it is. Doing what it says
    brings main's version in."""
    remote, base = make_remote(tmp_path)
    alice = clone(remote, tmp_path / "alice")
    exp = record(alice, base, "Unrolled by 4 - +1.9%")
    path = relative(alice, exp.path)
    mine = (alice / path).read_text()
    sync(Store(alice), branch="kexp/alice")
    land(remote, tmp_path / "forge", "kexp/alice", "squashed", edit="\nReviewed.\n")
    main, head = git(remote, "rev-parse", "main"), git(alice, "rev-parse", "HEAD")

    refused = run_kexp("sync", cwd=alice)
    assert refused.returncode != 0
    assert refused.stderr.count("\n") == 1, refused.stderr
    assert path in refused.stderr and "kexp sync again" in refused.stderr, refused.stderr
    assert (alice / path).read_text() == mine  # kept
    assert git(alice, "rev-parse", "HEAD") == head
    assert git(remote, "rev-parse", "main") == main
    assert git(alice, "status", "--porcelain", "--", path) == f"?? {path}"

    # What it says: move the copy aside, sync again (main's version comes in).
    aside = tmp_path / "mine.md"
    (alice / path).rename(aside)
    done = run_kexp("sync", cwd=alice)
    assert done.returncode == 0, done.stderr
    assert git(alice, "rev-parse", "HEAD") == main
    assert (alice / path).read_text().endswith("Reviewed.\n")
    assert aside.read_text() == mine


def test_what_a_side_branch_holds_still_lands_through_its_pull_request(tmp_path: Path) -> None:
    """Alice's first pull request merged; she recorded another experiment since and
    published it to kexp/alice (a second pull request, open). The step after the merge,
    ``kexp sync`` on main, brings main's files in and leaves that one untracked, where
    it was: it reaches main through review, not pushed there by the sync."""
    remote, base = make_remote(tmp_path)
    alice = clone(remote, tmp_path / "alice")
    first = record(alice, base, "Unrolled by 4 - +1.9%")
    sync(Store(alice), branch="kexp/alice")
    land(remote, tmp_path / "forge", "kexp/alice", "merge commit")
    second = record(alice, base, "Vectorized stores - +2.5%", score=1.025)
    assert sync(Store(alice), branch="kexp/alice").pushed
    assert second.id in remote_ids(remote, "kexp/alice")
    main = git(remote, "rev-parse", "main")

    done = sync(Store(alice))
    assert done.merged and not done.pushed and not done.committed
    assert git(remote, "rev-parse", "main") == main
    assert git(alice, "rev-parse", "HEAD") == main
    assert remote_ids(remote, "main") == [first.id]
    status = git(alice, "status", "--porcelain", "--untracked-files=all")
    assert status == f"?? {relative(alice, second.path)}"


@pytest.mark.parametrize("branches", ["deleted", "kept"])
def test_the_advice_to_bring_in_main_s_experiment_works_as_written(
    tmp_path: Path, branches: str
) -> None:
    """Alice's and Bob's pull requests both merged (squashed, their branches deleted or
    kept); Alice fetched, and builds on Bob's experiment: the write is refused (it is on
    origin/main, not in her working tree) with advice that names a command, and that
    command, run as written, brings it in (``git merge origin/main`` refuses: her own
    published files are untracked here), after which the write succeeds; with Bob's
    branch kept, the advice brings main in, not Bob's side branch."""
    remote, base = make_remote(tmp_path)
    alice, bob = clone(remote, tmp_path / "alice"), clone(remote, tmp_path / "bob")
    record(alice, base, "Unrolled by 4 - +1.9%")
    sync(Store(alice), branch="kexp/alice")
    his = record(bob, base, "Vectorized stores - +2.5%", score=1.025)
    sync(Store(bob), branch="kexp/bob")
    for branch in ("kexp/alice", "kexp/bob"):
        land(remote, tmp_path / "forge", branch, "squashed")
        if branches == "deleted":
            git(remote, "branch", "-D", branch)
    git(alice, "fetch", "-q", "--prune")

    child = ["add", "--pid", his.id, "--summary", "Unroll on vectorized - +1%",
             "--score", "1.01", "--measured-against", "parent", "--operator",
             his.operator_sig, "--dtype", "bf16", "--env", "MI300X",
             "--base-commit", base]  # fmt: skip
    refused = run_kexp(*child, cwd=alice)
    assert refused.returncode != 0 and "origin/main" in refused.stderr, refused.stderr
    named = re.search(r"\((git merge \S+?|kexp sync)[,)]", refused.stderr)
    assert named, refused.stderr
    command = named.group(1).split()
    if command[0] == "git":
        followed = subprocess.run(command, cwd=alice, capture_output=True, text=True)
    else:
        followed = run_kexp(*command[1:], cwd=alice)
    assert followed.returncode == 0, (named.group(1), followed.stderr)
    made = run_kexp(*child, cwd=alice)
    assert made.returncode == 0, made.stderr
    assert "origin/kexp/bob" not in git(alice, "branch", "-r", "--merged", "HEAD").split()


@pytest.mark.parametrize("how", ["merge commit", "squashed"])
def test_a_side_branch_merged_and_deleted_restarts_before_the_clone_fetched(
    tmp_path: Path, how: str
) -> None:
    """Alice's pull request is merged and its branch deleted (as forges do); before she
    fetched or pulled, she records another experiment and syncs to kexp/alice again:
    the branch starts again from her checkout (the sync fetches main to see that it
    holds her first experiment), so the new pull request adds the new experiment alone,
    not her first one a second time (squashed, it was on the stale branch)."""
    remote, base = make_remote(tmp_path)
    alice = clone(remote, tmp_path / "alice")
    first = record(alice, base, "Unrolled by 4 - +1.9%")
    sync(Store(alice), branch="kexp/alice")
    land(remote, tmp_path / "forge", "kexp/alice", how)
    git(remote, "branch", "-D", "kexp/alice")
    second = record(alice, base, "Vectorized stores - +2.5%", score=1.025)

    done = sync(Store(alice), branch="kexp/alice")
    assert done.pushed and [Path(p).name[:16] for p in done.committed] == [second.id]
    changes = git(remote, "diff", "--no-renames", "--name-status", "main...kexp/alice")
    assert [line.split("\t")[0] + " " + Path(line).name[:16] for line in changes.splitlines()] == [
        f"A {second.id}"
    ], changes
    assert first.id in remote_ids(remote, "main")


def test_a_correction_after_the_pull_request_merged_is_published_as_a_correction(
    tmp_path: Path,
) -> None:
    """Bob's pull request is merged (a merge commit, his branch kept); he only fetched,
    so his main is behind; he corrects his experiment and syncs to his side branch
    again: published as a correction of it (the next pull request changes the file),
    not stopped as 'changed both here and on origin/kexp/bob' by a branch restarted
    without it, and nothing of his branch or record is rewritten."""
    remote, base = make_remote(tmp_path)
    bob = clone(remote, tmp_path / "bob")
    exp = record(bob, base, "Vectorized loads - +2%", score=1.02)
    assert sync(Store(bob), branch="kexp/bob").pushed
    published = git(remote, "rev-parse", "kexp/bob")
    land(remote, tmp_path / "forge", "kexp/bob", "merge commit")
    git(bob, "fetch", "-q")
    Store(bob).update_experiment(exp.id, score=1.021)
    done = run_kexp("sync", "--branch", "kexp/bob", cwd=bob)
    assert done.returncode == 0, done.stderr
    tip = git(remote, "rev-parse", "kexp/bob")
    assert git(remote, "merge-base", "--is-ancestor", published, tip) == ""  # not rewritten
    path = relative(bob, exp.path)
    assert "score: 1.021" in git(remote, "show", f"kexp/bob:{path}")
    changes = git(remote, "diff", "--name-status", "main...kexp/bob")
    assert changes.split() == ["M", path], changes


@pytest.mark.parametrize("removal", ["kexp rm", "git rm"])
def test_a_removal_waiting_in_an_open_pull_request_is_not_pushed_to_main(
    tmp_path: Path, removal: str
) -> None:
    """Alice removes an experiment main holds and publishes the removal to kexp/alice
    (a pull request, open). Bob pushes new work to main; Alice brings it in with
    ``kexp sync`` on main: Bob's experiment comes in, and her removal stays where it
    waits for review (main keeps the experiment, her working tree still lacks it),
    as a new file on its way through a pull request does. Once the pull request
    lands, ``kexp sync`` brings the removal in from main."""
    remote, base = make_remote(tmp_path)
    alice = clone(remote, tmp_path / "alice")
    gone = record(alice, base, "Unroll 8 - crash", score=1.0)
    sync(Store(alice))
    path = relative(alice, gone.path)
    if removal == "kexp rm":
        Store(alice).delete_experiment(gone.id)
    else:  # the deletion staged
        git(alice, "rm", "-q", path)
    assert sync(Store(alice), branch="kexp/alice").pushed
    assert gone.id not in remote_ids(remote, "kexp/alice")
    bob = clone(remote, tmp_path / "bob")
    new = record(bob, base, "Vectorized stores - +2.5%", score=1.025)
    sync(Store(bob))

    done = run_kexp("sync", cwd=alice)
    assert done.returncode == 0, done.stderr
    assert sorted(remote_ids(remote, "main")) == sorted([gone.id, new.id]), done.stdout
    assert not (alice / path).exists()  # still removed here, waiting for review
    assert (alice / relative(alice, Store(alice).path_of(new.id))).is_file()
    assert git(alice, "rev-parse", "HEAD") == git(remote, "rev-parse", "main")

    land(remote, tmp_path / "forge", "kexp/alice", "merge commit")
    assert sync(Store(alice)).merged
    assert remote_ids(remote, "main") == [new.id]
    assert git(alice, "status", "--porcelain", "--untracked-files=all") == ""


@pytest.mark.parametrize("then", ["nothing", "brought main in", "committed code", "on work"])
def test_a_side_branch_squashed_and_kept_publishes_the_new_experiment_alone(
    tmp_path: Path, then: str
) -> None:
    """Alice's pull request is squashed into main and her branch kept on the remote (a
    forge's default); she records another experiment (having brought main in with
    ``kexp sync``, or not; or having committed kernel code on her main since) and syncs
    to kexp/alice again: the next pull request (the forge's diff, main...kexp/alice)
    adds the new experiment alone (and her code commit), not her first one a second
    time; the branch only moves forward (no force-push)."""
    remote, base = make_remote(tmp_path)
    alice = clone(remote, tmp_path / "alice")
    if then == "on work":  # a branch of the checkout's own, which the remote lacks
        git(alice, "switch", "-q", "-c", "work")
    first = record(alice, base, "Unrolled by 4 - +1.9%")
    sync(Store(alice), branch="kexp/alice")
    published = git(remote, "rev-parse", "kexp/alice")
    land(remote, tmp_path / "forge", "kexp/alice", "squashed")
    if then == "brought main in":
        assert sync(Store(alice)).merged
    elif then == "committed code":
        (alice / "kernel.cu").write_text("// unrolled by 4\n")
        git(alice, "add", "kernel.cu")
        git(alice, "commit", "-q", "-m", "Unroll by 4")
    second = record(alice, base, "Vectorized stores - +2.5%", score=1.025)

    done = run_kexp("sync", "--branch", "kexp/alice", cwd=alice)
    assert done.returncode == 0, done.stderr
    tip = git(remote, "rev-parse", "kexp/alice")
    assert git(remote, "merge-base", "--is-ancestor", published, tip) == ""  # not rewritten
    changes = git(remote, "diff", "--no-renames", "--name-status", "main...kexp/alice")
    code = ["M\tkernel.cu"] if then == "committed code" else []
    assert sorted(changes.splitlines()) == sorted([*code, f"A\t{relative(alice, second.path)}"])
    assert first.id in remote_ids(remote, "main")


def test_a_branch_another_stacked_on_still_takes_its_owners_correction(tmp_path: Path) -> None:
    """Bob stacked his step on Alice's open pull request (his branch holds her file
    alike); Alice corrects her experiment and records another: her sync to kexp/alice
    publishes both, not 'changed both here and on origin/kexp/alice' (her branch was
    taken for landed because Bob's branch held all of it)."""
    remote, base = make_remote(tmp_path)
    alice, bob = clone(remote, tmp_path / "alice"), clone(remote, tmp_path / "bob")
    hers = record(alice, base, "Vectorize float4 - +10%", score=1.1)
    sync(Store(alice), branch="kexp/alice")
    git(bob, "fetch", "-q")
    path = relative(alice, hers.path)
    git(bob, "restore", "--source", "origin/kexp/alice", "--", path)
    record(bob, base, "Unroll on float4 - +3%", score=1.03, pid=hers.id, measured_against="parent")
    assert sync(Store(bob), branch="kexp/bob").pushed
    assert hers.id in remote_ids(remote, "kexp/bob")

    git(alice, "fetch", "-q")
    Store(alice).update_experiment(hers.id, score=1.11)
    other = record(alice, base, "Warp shuffle - +2%", score=1.02)
    done = run_kexp("sync", "--branch", "kexp/alice", cwd=alice)
    assert done.returncode == 0, done.stderr
    assert "score: 1.11" in git(remote, "show", f"kexp/alice:{path}")
    assert other.id in remote_ids(remote, "kexp/alice")


def test_a_removal_is_published_past_a_branch_that_never_waited_to_land_it(
    tmp_path: Path,
) -> None:
    """A release branch stripped of experiments/ (and another agent's closed pull request,
    its branch kept) lacks Alice's experiment; she removes it on main and syncs: the
    removal is published (only a removal this clone published to a side branch waits for
    that branch's pull request), where the sync said 'up to date' and kept it forever."""
    remote, base = make_remote(tmp_path)
    alice = clone(remote, tmp_path / "alice")
    gone = record(alice, base, "Bogus +40% - timer bug", score=1.4)
    sync(Store(alice))
    release = clone(remote, tmp_path / "release")
    git(release, "switch", "-q", "-c", "release/1.0")
    git(release, "rm", "-q", "-r", "experiments")
    git(release, "commit", "-q", "-m", "release: no experiments")
    git(release, "push", "-q", "origin", "release/1.0")
    git(alice, "fetch", "-q")
    Store(alice).delete_experiment(gone.id)

    done = sync(Store(alice))
    assert done.pushed and done.removed, done
    assert remote_ids(remote, "main") == []


def test_code_squashed_with_the_first_pull_request_and_changed_again_makes_a_clean_second(
    tmp_path: Path,
) -> None:
    """Alice commits kernel code on her main and publishes it with an experiment to
    kexp/alice; the pull request is squashed into main (the branch kept); she changes
    the same kernel again, records the next step and syncs to kexp/alice again (the
    team workflow's loop): the second pull request holds her new code change and the
    new experiment alone, and the forge squashes it into main without a conflict (the
    squash of her first code is not taken for a rival change of the same lines)."""
    remote, base = make_remote(tmp_path)
    alice = clone(remote, tmp_path / "alice")
    kernel = alice / "kernel.cu"
    kernel.write_text("// softmax v0\n// online softmax\n")
    git(alice, "add", "kernel.cu")
    git(alice, "commit", "-q", "-m", "Online softmax")
    record(alice, base, "Online softmax - +10%", score=1.10)
    assert run_kexp("sync", "--branch", "kexp/alice", cwd=alice).returncode == 0
    published = git(remote, "rev-parse", "kexp/alice")
    land(remote, tmp_path / "forge", "kexp/alice", "squashed")
    with kernel.open("a") as file:
        file.write("// persistent CTAs\n")
    git(alice, "commit", "-q", "-am", "Persistent CTAs")
    second = record(alice, base, "Persistent CTAs - +4%", score=1.04)

    done = run_kexp("sync", "--branch", "kexp/alice", cwd=alice)
    assert done.returncode == 0, done.stderr
    tip = git(remote, "rev-parse", "kexp/alice")
    assert git(remote, "merge-base", "--is-ancestor", published, tip) == ""  # not rewritten
    changes = git(remote, "diff", "--no-renames", "--name-status", "main...kexp/alice")
    assert sorted(changes.splitlines()) == ["A\t" + relative(alice, second.path), "M\tkernel.cu"]
    land(remote, tmp_path / "forge", "kexp/alice", "squashed")  # no conflict
    assert git(remote, "show", "main:kernel.cu") == kernel.read_text().rstrip("\n")
