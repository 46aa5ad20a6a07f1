"""``kexp sync`` publishes experiments, not code: on the remote's default branch (where
pull requests land), commits of the checkout that change files outside ``experiments/``
are never pushed by it (the skill's loop commits and reverts a kernel change; a
work-in-progress commit waits on main while main is brought in after a pull request).
The merge still comes in; the push is held back, said in one line naming the commits
and what to do. Real git: a bare repository on disk as the remote, its clones."""

from __future__ import annotations

import json
import re
import shlex
import subprocess
from pathlib import Path

from conftest import git, run_kexp
from test_sync import clone, make_remote, record, remote_ids
from test_sync_landed import land

from kexp import Store
from kexp.storage.sync import sync


def commit_code(root: Path, text: str, message: str) -> str:
    with (root / "kernel.cu").open("a") as file:
        file.write(text)
    git(root, "commit", "-q", "-am", message)
    return git(root, "rev-parse", "--short", "HEAD")


def test_a_kernel_change_committed_and_reverted_leaves_mains_code_as_it_was(
    tmp_path: Path,
) -> None:
    """The skill's loop with the change committed: the agent records it (base HEAD~1),
    reverts it and runs kexp sync on main: the experiment is published; the two commits
    ride along (the experiment's base commit must resolve for the others) and are said,
    and main's code is as it was."""
    remote, _ = make_remote(tmp_path)
    alice = clone(remote, tmp_path / "alice")
    kernel = git(remote, "show", "main:kernel.cu")
    change = commit_code(alice, "// persistent grid\n", "softmax: persistent grid")
    exp = record(alice, git(alice, "rev-parse", "HEAD~1"), "Persistent grid - -7%", score=0.93)
    git(alice, "revert", "--no-edit", "HEAD")

    done = run_kexp("sync", cwd=alice)
    assert done.returncode == 0, done.stderr
    assert remote_ids(remote, "main") == [exp.id]
    assert git(remote, "show", "main:kernel.cu") == kernel
    assert change in done.stdout and "with no change to them in the end" in done.stdout


def test_a_kernel_change_committed_is_not_pushed_to_main(tmp_path: Path) -> None:
    """The agent keeps its kernel change committed on main, records it and runs kexp
    sync: nothing reaches origin/main; the one-line refusal names the commit and the
    two ways on (push it yourself, or publish the experiment on a side branch), and the
    second way, run as written, publishes it."""
    remote, _ = make_remote(tmp_path)
    alice = clone(remote, tmp_path / "alice")
    main = git(remote, "rev-parse", "main")
    change = commit_code(alice, "// persistent grid\n", "softmax: persistent grid")
    exp = record(alice, git(alice, "rev-parse", "HEAD~1"), "Persistent grid - +7%", score=1.07)

    refused = run_kexp("sync", cwd=alice)
    assert refused.returncode != 0, refused
    assert refused.stderr.count("\n") == 1, refused.stderr
    assert change in refused.stderr and "softmax: persistent grid" in refused.stderr
    assert "git push" in refused.stderr and "kexp sync --branch" in refused.stderr
    assert git(remote, "rev-parse", "main") == main  # nothing pushed
    assert remote_ids(remote, "main") == []

    done = run_kexp("sync", "--branch", "kexp/alice", cwd=alice)
    assert done.returncode == 0, done.stderr
    assert remote_ids(remote, "kexp/alice") == [exp.id]
    assert git(remote, "rev-parse", "main") == main


def test_main_is_brought_in_while_a_work_in_progress_commit_waits(tmp_path: Path) -> None:
    """Bob pushed an experiment to main; Alice has a work-in-progress kernel commit on
    her main and nothing new to publish: kexp sync brings Bob's experiment in and pushes
    nothing (no error: nothing of hers was to publish), saying that her commit stays."""
    remote, base = make_remote(tmp_path)
    alice, bob = clone(remote, tmp_path / "alice"), clone(remote, tmp_path / "bob")
    his = record(bob, base, "Vectorized stores - +2.5%", score=1.025)
    sync(Store(bob))
    main = git(remote, "rev-parse", "main")
    wip = commit_code(alice, "// WIP: do not merge\n", "WIP: unreviewed experiment")

    done = run_kexp("sync", cwd=alice)
    assert done.returncode == 0, done.stderr
    assert git(remote, "rev-parse", "main") == main  # nothing pushed
    assert Store(alice).get_experiment(his.id).score == 1.025
    assert "merged the experiments of origin/main" in done.stdout
    assert f"not pushed: {wip}" not in done.stdout  # (said as a sentence, below)
    assert wip in done.stdout and "WIP: unreviewed experiment" in done.stdout, done.stdout


def test_code_on_an_agents_own_branch_is_pushed_as_before(tmp_path: Path) -> None:
    """One branch per agent (README, Many machines at once): an agent whose checkout is
    kexp/alice pushes its kernel commits there with its experiments (its pull request
    reviews both)."""
    remote, _ = make_remote(tmp_path)
    alice = clone(remote, tmp_path / "alice", branch="kexp/alice")
    commit_code(alice, "// unrolled by 4\n", "Unroll by 4")
    exp = record(alice, git(alice, "rev-parse", "HEAD"), "Unrolled by 4 - +1.9%")
    assert sync(Store(alice)).pushed
    assert remote_ids(remote, "kexp/alice") == [exp.id]
    assert git(remote, "rev-parse", "kexp/alice") == git(alice, "rev-parse", "HEAD")


def test_code_alone_ahead_of_main_is_said_not_pushed(tmp_path: Path) -> None:
    """Alice committed kernel code on main and recorded nothing: kexp sync (and its dry
    run) pushes nothing and says why, naming the commit."""
    remote, _ = make_remote(tmp_path)
    alice = clone(remote, tmp_path / "alice")
    main = git(remote, "rev-parse", "main")
    change = commit_code(alice, "// unrolled by 4\n", "Unroll by 4")
    for dry_run in (["--dry-run"], []):
        done = run_kexp("sync", *dry_run, cwd=alice)
        assert done.returncode == 0, done.stderr
        assert f"{change} Unroll by 4" in done.stdout and "nothing" in done.stdout, done.stdout
        assert "would push 1" not in done.stdout and "pushed 1" not in done.stdout
    assert git(remote, "rev-parse", "main") == main


def test_a_step_on_work_under_review_is_refused_on_main_and_stacked_on_a_branch(
    tmp_path: Path,
) -> None:
    """Alice publishes A to kexp/alice (a pull request, open) and records B on it. A
    ``kexp sync`` on main refused nothing and pushed B without A (main's store invalid:
    B's parent missing); it stops now, in one line naming A's file and the ways on, with
    nothing changed. On a branch of her own (a checkout of kexp/alice2), the same sync
    publishes B with A (her pull request stacks on the first)."""
    remote, base = make_remote(tmp_path)
    alice = clone(remote, tmp_path / "alice")
    first = record(alice, base, "Vectorize float4 - +10%", score=1.1)
    sync(Store(alice), branch="kexp/alice")
    step = record(alice, base, "Unroll on float4 - +3%", score=1.03, pid=first.id,
                  measured_against="parent")  # fmt: skip
    main, head = git(remote, "rev-parse", "main"), git(alice, "rev-parse", "HEAD")

    refused = run_kexp("sync", cwd=alice)
    assert refused.returncode != 0 and refused.stderr.count("\n") == 1, refused.stderr
    assert first.path is not None and first.path.name in refused.stderr, refused.stderr
    assert "kexp sync --branch" in refused.stderr, refused.stderr
    assert git(remote, "rev-parse", "main") == main and remote_ids(remote, "main") == []
    assert git(alice, "rev-parse", "HEAD") == head

    git(alice, "switch", "-q", "-c", "kexp/alice2")
    done = run_kexp("sync", cwd=alice)
    assert done.returncode == 0, done.stderr
    assert sorted(remote_ids(remote, "kexp/alice2")) == sorted([first.id, step.id])


def test_code_in_a_merge_or_past_a_stale_default_is_not_pushed(tmp_path: Path) -> None:
    """Code reaches main's push by a merge commit that changed the kernel itself, and in
    a clone whose origin/HEAD still names the old default branch (master, renamed to
    main on the remote): both are held back, as the remote says its default now."""
    remote, _ = make_remote(tmp_path)
    alice = clone(remote, tmp_path / "alice")
    git(alice, "symbolic-ref", "refs/remotes/origin/HEAD", "refs/remotes/origin/master")
    main = git(remote, "rev-parse", "main")
    git(alice, "switch", "-q", "-c", "topic")
    commit_code(alice, "// topic\n", "topic work")
    git(alice, "revert", "--no-edit", "HEAD")  # the topic changes nothing in the end
    git(alice, "switch", "-q", "main")
    git(alice, "merge", "-q", "--no-ff", "--no-commit", "topic")
    with (alice / "kernel.cu").open("a") as file:
        file.write("// hot fix made in the merge\n")
    git(alice, "commit", "-q", "-am", "Merge topic")
    done = run_kexp("sync", cwd=alice)
    assert done.returncode == 0, done.stderr
    assert git(remote, "rev-parse", "main") == main, done.stdout
    assert "pushed nothing" in done.stdout, done.stdout


def test_code_held_back_is_not_up_to_date_and_the_advice_works(tmp_path: Path) -> None:
    """Alice committed kernel code on main and recorded nothing: ``kexp sync --json``
    said ``"up_to_date": true`` beside a non-empty ``held_back``, though her commit
    waits for a push. Held back, the sync (and its dry run) is not up to date, in JSON
    and in words; the push the words advise, run as printed, publishes it, and the
    next sync is up to date."""
    remote, _ = make_remote(tmp_path)
    alice = clone(remote, tmp_path / "alice")
    change = commit_code(alice, "// unrolled by 4\n", "Unroll by 4")
    for dry_run in (["--dry-run"], []):
        data = json.loads(run_kexp("sync", *dry_run, "--json", cwd=alice).stdout)
        assert data["held_back"] == [f"{change} Unroll by 4"], data
        assert data["up_to_date"] is False and data["pushed"] is False, data
        said = run_kexp("sync", *dry_run, cwd=alice).stdout
        assert "not up to date with origin/main" in said, said
        assert "up to date with origin/main: nothing to commit or push" not in said, said
    advised = re.search(r"\((git push [^)]+)\)", said)
    assert advised, said
    pushed = subprocess.run(shlex.split(advised.group(1)), cwd=alice,
                            capture_output=True, text=True)  # fmt: skip
    assert pushed.returncode == 0, pushed.stderr
    assert git(remote, "rev-parse", "main") == git(alice, "rev-parse", "HEAD")
    again = json.loads(run_kexp("sync", "--json", cwd=alice).stdout)
    assert again["up_to_date"] is True and again["held_back"] == [], again


def squash_merged_with_code_on_main(tmp_path: Path) -> tuple[Path, Path, str, str]:
    """Alice commits a kernel change on main, records it (its base commit) and publishes
    with ``--branch``; main gains another pull request's code; the lead squash-merges
    hers. (the remote, Alice's clone, her commit as ``hash subject``, her experiment)"""
    remote, _ = make_remote(tmp_path)
    alice, bob = clone(remote, tmp_path / "alice"), clone(remote, tmp_path / "bob")
    change = commit_code(alice, "// online softmax\n", "softmax: online softmax")
    exp = record(alice, git(alice, "rev-parse", "HEAD"), "Online softmax - +15%", score=1.15)
    assert sync(Store(alice), branch="kexp/alice").pushed
    (bob / "other.cu").write_text("// another pull request's kernel\n")
    git(bob, "add", "other.cu")
    git(bob, "commit", "-q", "-m", "another pull request")
    git(bob, "push", "-q", "origin", "main")
    land(remote, tmp_path / "forge", "kexp/alice", "squashed")
    git(alice, "fetch", "-q")  # a dry run knows the remote's commits as last fetched
    return remote, alice, f"{change} softmax: online softmax", exp.id


def test_a_squash_merged_pull_requests_code_commit_is_left_off_main(tmp_path: Path) -> None:
    """Trial R, R04: after the squash merge, ``kexp sync`` on main (the documented step)
    merged main in and pushed her pre-squash commit to main, silently (git's history
    simplification hid it behind the merge), though it published no experiment: a
    squash-merging team's main got the unreviewed commit. Now nothing is pushed; the
    dry run and the sync name the commit and the way on, which, run as written, moves
    her main to origin/main, no file changed, and the next sync is up to date."""
    remote, alice, change, _ = squash_merged_with_code_on_main(tmp_path)
    main = git(remote, "rev-parse", "main")
    planned = run_kexp("sync", "--dry-run", cwd=alice)
    assert planned.returncode == 0, planned.stderr
    assert change in planned.stdout and "commit(s) to origin/main" not in planned.stdout
    done = run_kexp("sync", "--json", cwd=alice)
    assert done.returncode == 0, done.stderr
    assert git(remote, "rev-parse", "main") == main  # nothing pushed
    data = json.loads(done.stdout)
    assert data["left_off"] == [change] and not data["pushed"] and not data["up_to_date"]
    said = run_kexp("sync", cwd=alice).stdout  # (the merge made: said again, no push)
    assert change in said and "pushed nothing" in said, said
    assert git(remote, "rev-parse", "main") == main
    files = {p: (alice / p).read_bytes() for p in git(alice, "ls-files").splitlines()}
    advised = re.search(r"\((git reset --keep [^:)]+)", said)
    assert advised, said
    moved = subprocess.run(shlex.split(advised.group(1)), cwd=alice,
                           capture_output=True, text=True)  # fmt: skip
    assert moved.returncode == 0, moved.stderr
    assert git(alice, "rev-parse", "HEAD") == main
    assert {p: (alice / p).read_bytes() for p in files} == files  # no file changed
    assert git(alice, "status", "--porcelain") == ""
    again = json.loads(run_kexp("sync", "--json", cwd=alice).stdout)
    assert again["up_to_date"] is True and again["left_off"] == [], again


def test_code_commits_a_push_of_experiments_carries_behind_a_merge_are_said(
    tmp_path: Path,
) -> None:
    """After the squash merge Alice records another experiment and syncs on main: the
    push publishes it, merged with main, and carries her pre-squash commit (it adds
    nothing to main's files; her first experiment's base commit resolves on main). The
    note that says so was silent behind the merge; now the dry run says it before, and
    the sync when it pushes."""
    remote, alice, change, first = squash_merged_with_code_on_main(tmp_path)
    kernel = git(remote, "show", "main:kernel.cu")
    exp = record(alice, git(alice, "rev-parse", "HEAD"), "Two-pass softmax - -3%", score=0.97)
    planned = run_kexp("sync", "--dry-run", cwd=alice)
    assert planned.returncode == 0, planned.stderr
    assert change in planned.stdout, planned.stdout
    assert "with no change to them in the end" in planned.stdout, planned.stdout
    done = run_kexp("sync", cwd=alice)
    assert done.returncode == 0, done.stderr
    assert change in done.stdout and "with no change to them in the end" in done.stdout
    assert git(remote, "show", "main:kernel.cu") == kernel  # no change to main's code
    assert sorted(remote_ids(remote, "main")) == sorted([first, exp.id])


def test_code_history_left_off_main_only_where_its_push_changes_no_file(
    tmp_path: Path,
) -> None:
    """Alice publishes an experiment for review (``--branch``), commits it on main by
    hand, and commits a kernel change and its revert: origin/main lacks the experiment
    (only her side branch holds it), so the push changes a file there and is no code
    history alone: it is not left off (``git reset --keep origin/main`` would take the
    file out of her working tree, not "no file changes"), as without the code commits."""
    remote, _ = make_remote(tmp_path)
    alice = clone(remote, tmp_path / "alice")
    exp = record(alice, git(alice, "rev-parse", "HEAD"), "Online softmax - +15%", score=1.15)
    assert sync(Store(alice), branch="kexp/alice").pushed
    git(alice, "add", "experiments")
    git(alice, "commit", "-q", "-m", "the experiment, by hand")
    change = commit_code(alice, "// persistent grid\n", "softmax: persistent grid")
    git(alice, "revert", "--no-edit", "HEAD")
    done = run_kexp("sync", "--json", cwd=alice)
    assert done.returncode == 0, done.stderr
    data = json.loads(done.stdout)
    assert data["left_off"] == [], data
    assert data["pushed"] and any(change in c for c in data["carried"]), data
    assert remote_ids(remote, "main") == [exp.id]
