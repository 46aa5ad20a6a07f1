"""Which version of an experiment is newest when a team on a forge lands pull requests
by squash or rebase merge, reverts them and keeps the merged branches (the forge's
default): read across refs (``--all-refs``) in real clones of a bare remote, each merge
style made with plain git commands, every commit's date pinned so that the order of
the changes is the test's. What kexp ranks is compared with what git says: the file as
the default branch holds it, and the dates of the commits that last changed it.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
from pathlib import Path
from typing import Any

import pytest
from conftest import experiment_fields, git, run_kexp
from test_sync import clone, make_remote

from kexp import Store

#: A commit's date, pinned: the n-th tick of the scenario (one minute apart).
START = 1_800_000_000


def at(cwd: Path, tick: int, *args: str) -> str:
    """``git ARGS`` in ``cwd`` with its author and committer date the ``tick``-th
    minute of the scenario."""
    when = f"@{START + 60 * tick} +0000"
    env = {**os.environ, "GIT_AUTHOR_DATE": when, "GIT_COMMITTER_DATE": when}
    done = subprocess.run(["git", *args], cwd=cwd, env=env, check=True, capture_output=True,
                          text=True)  # fmt: skip
    return done.stdout.strip()


def add(root: Path, summary: str, score: float, **fields: Any) -> str:
    """Record an experiment in ``root``'s working tree: its id."""
    made = Store(root).create_experiment(
        **experiment_fields(change_summary=summary, score=score, **fields)
    )
    return made.id


def correct(root: Path, exp_id: str, score: float, reason: str) -> None:
    """``kexp update ID --set score=S --reason R``, as a reviewer corrects a score."""
    done = run_kexp("update", exp_id, "--set", f"score={score}", "--reason", reason, cwd=root)
    assert done.returncode == 0, done.stderr


def commit_all(root: Path, tick: int, message: str) -> None:
    git(root, "add", "-A")
    at(root, tick, "commit", "-q", "-m", message)


def top(root: Path) -> dict[str, dict[str, Any]]:
    """``kexp top --all-refs --json`` of ``root``: each ranked row by id."""
    done = run_kexp("top", "--all-refs", "--json", "-n", "50", cwd=root)
    assert done.returncode == 0, done.stderr
    return {row["id"]: row for row in json.loads(done.stdout)}


def score_at(root: Path, ref: str, exp_id: str) -> float:
    """The score ``exp_id``'s file holds at ``ref``, read with git."""
    listing = git(root, "ls-tree", "-r", "--name-only", ref, "--", "experiments")
    path = next(line for line in listing.splitlines() if f"/{exp_id}-" in line)
    found = re.search(r"^score: (\S+)$", git(root, "show", f"{ref}:{path}"), re.M)
    assert found is not None
    return float(found.group(1))


def last_changed(root: Path, ref: str, exp_id: str) -> int:
    """The date of the commit of ``ref``'s history that last changed ``exp_id``'s file."""
    listing = git(root, "ls-tree", "-r", "--name-only", ref, "--", "experiments")
    path = next(line for line in listing.splitlines() if f"/{exp_id}-" in line)
    return int(git(root, "log", "-1", "--format=%ct", ref, "--", path))


def _last_commit(root: Path, ref: str, exp_id: str) -> str:
    """The commit of ``ref``'s history that last changed ``exp_id``'s file."""
    listing = git(root, "ls-tree", "-r", "--name-only", ref, "--", "experiments")
    path = next(line for line in listing.splitlines() if f"/{exp_id}-" in line)
    return git(root, "log", "-1", "--format=%H", ref, "--", path)


def holds(root: Path, ref: str, exp_id: str) -> bool:
    listing = git(root, "ls-tree", "-r", "--name-only", ref, "--", "experiments")
    return f"/{exp_id}-" in listing


@pytest.mark.parametrize("style", ["squash", "rebase"])
def test_a_kept_branch_pushed_to_after_its_merge_does_not_bring_back_its_old_version(
    tmp_path: Path, style: str
) -> None:
    """Alice's pull request records E (1.10). The lead lands it by a squash merge,
    correcting E to 1.05 in it, or by a rebase merge (main moved first) then a
    correction on main. Alice keeps her branch and pushes one more step F on E to it.
    Bob reads across refs: main's 1.05 is E's newest version (main last changed E after
    the branch did), not the branch's pre-review 1.10, and F builds on it. Then Alice
    corrects E on her branch, after main's correction: hers is read (unmerged)."""
    remote, _ = make_remote(tmp_path)
    lead, alice, bob = (clone(remote, tmp_path / name) for name in ("lead", "alice", "bob"))
    git(alice, "switch", "-q", "-c", "kexp/alice")
    e = add(alice, "Tiles 128 - +10%", 1.10)
    commit_all(alice, 1, "E")
    git(alice, "push", "-q", "-u", "origin", "kexp/alice")
    git(lead, "fetch", "-q")
    if style == "squash":
        git(lead, "merge", "-q", "--squash", "origin/kexp/alice")
        correct(lead, e, 1.05, "reviewer: rerun on a quiet box gives 1.05")
        commit_all(lead, 3, "PR #1 (squashed, score corrected)")
    else:
        (lead / "notes.txt").write_text("other work\n")
        commit_all(lead, 2, "other work")
        git(lead, "switch", "-q", "-c", "landing", "origin/kexp/alice")
        at(lead, 3, "rebase", "-q", "main")
        git(lead, "switch", "-q", "main")
        git(lead, "merge", "-q", "--ff-only", "landing")
        correct(lead, e, 1.05, "lead: rerun on a quiet box gives 1.05")
        commit_all(lead, 4, "correct E")
    git(lead, "push", "-q", "origin", "main")
    f = add(alice, "Stages 4 - +3%", 1.03, pid=e)
    commit_all(alice, 5, "F")
    git(alice, "push", "-q", "origin", "kexp/alice")
    git(bob, "pull", "-q")
    # The truth, from git: both changed E apart; main last changed it later.
    newest = score_at(bob, "origin/main", e)
    assert (newest, score_at(bob, "origin/kexp/alice", e)) == (1.05, 1.10)
    assert last_changed(bob, "origin/main", e) > last_changed(bob, "origin/kexp/alice", e)
    rows = top(bob)
    assert rows[e]["score"] == newest and rows[e]["ref"] == "local", rows[e]
    assert "unmerged" not in rows[e], rows[e]
    assert rows[f]["cumulative_score"] == pytest.approx(newest * 1.03), rows[f]
    shown = run_kexp("show", e, "--all-refs", cwd=bob).stdout
    assert "1.1000" not in shown.split("note")[0], shown
    # Alice corrects E on her branch after main's correction: that is the newest change.
    correct(alice, e, 1.02, "alice: locked clocks give 1.02")
    commit_all(alice, 6, "correct E again")
    git(alice, "push", "-q", "origin", "kexp/alice")
    git(bob, "fetch", "-q")
    assert last_changed(bob, "origin/kexp/alice", e) > last_changed(bob, "origin/main", e)
    rows = top(bob)
    assert rows[e]["score"] == score_at(bob, "origin/kexp/alice", e) == 1.02, rows[e]
    assert rows[e]["ref"] == "origin/kexp/alice" and rows[e]["unmerged"], rows[e]


@pytest.mark.parametrize("same_second", [False, True])
def test_a_reverted_correction_stays_reverted_in_every_clone(
    tmp_path: Path, same_second: bool
) -> None:
    """E is 1.10 on main. Alice corrects it to 1.07 on her branch; the lead merges it
    by a merge commit, then reverts the merge: main holds 1.10 again, at a new commit.
    Bob (his checkout still at E's first commit, fetched since) and Alice (her checkout
    at her merged branch) both read main's 1.10: the revert is the newest change, made
    on the merge of the correction, even when every commit has the same date (a
    script's commits within one second)."""

    def tick(n: int) -> int:
        return 1 if same_second else n

    remote, _ = make_remote(tmp_path)
    lead, alice, bob = (clone(remote, tmp_path / name) for name in ("lead", "alice", "bob"))
    e = add(lead, "Tiles 128 - +10%", 1.10)
    commit_all(lead, tick(1), "E on main")
    git(lead, "push", "-q", "origin", "main")
    git(bob, "pull", "-q")
    git(alice, "pull", "-q")
    git(alice, "switch", "-q", "-c", "kexp/alice")
    correct(alice, e, 1.07, "remeasured")
    commit_all(alice, tick(2), "correct E")
    git(alice, "push", "-q", "-u", "origin", "kexp/alice")
    git(lead, "fetch", "-q")
    at(lead, tick(3), "merge", "-q", "--no-ff", "origin/kexp/alice", "-m", "Merge PR #1")
    at(lead, tick(4), "revert", "-m", "1", "--no-edit", "HEAD")
    git(lead, "push", "-q", "origin", "main")
    for reader in (lead, bob, alice):
        git(reader, "fetch", "-q")
        # The truth, from git: main reverted the correction after the branch made it.
        assert score_at(reader, "origin/main", e) == 1.10
        assert score_at(reader, "origin/kexp/alice", e) == 1.07
        assert git(reader, "merge-base", "--is-ancestor", "origin/kexp/alice", "origin/main") == ""
        # main's last change of E (the revert) was made on the branch's (the correction).
        made = [_last_commit(reader, ref, e) for ref in ("origin/kexp/alice", "origin/main")]
        assert made[0] != made[1]
        assert git(reader, "merge-base", "--is-ancestor", *made) == ""
        rows = top(reader)
        assert rows[e]["score"] == 1.10, (reader.name, rows[e])
        assert "unmerged" not in rows[e] and not rows[e].get("diverged"), (reader.name, rows[e])
        assert "origin/kexp/alice" in rows[e]["other_versions"], (reader.name, rows[e])


@pytest.mark.parametrize("cut_between", [False, True])
def test_a_rebase_merged_then_reverted_experiment_is_gone(
    tmp_path: Path, cut_between: bool
) -> None:
    """Alice's pull request (code and experiment E on B) is rebase-merged onto a moved
    main, then the lead reverts both rewritten commits; her branch stays on the remote
    (and, ``cut_between``, a branch cut from main between the merge and the revert).
    Read across refs, by the lead (on main) and by Bob (behind, fetched since), E is
    removed on main: not ranked, not counted, said removed when asked for; B stays."""
    remote, _ = make_remote(tmp_path)
    lead, alice, bob = (clone(remote, tmp_path / name) for name in ("lead", "alice", "bob"))
    b = add(lead, "Tiles 128 - +10%", 1.10)
    commit_all(lead, 1, "B on main")
    git(lead, "push", "-q", "origin", "main")
    git(alice, "pull", "-q")
    git(bob, "pull", "-q")
    git(alice, "switch", "-q", "-c", "kexp/alice")
    with (alice / "kernel.cu").open("a") as kernel:
        kernel.write("// persistent\n")
    commit_all(alice, 2, "persistent kernel")
    e = add(alice, "Persistent kernel - +5%", 1.05, pid=b)
    commit_all(alice, 3, "experiment E")
    git(alice, "push", "-q", "-u", "origin", "kexp/alice")
    (lead / "notes.txt").write_text("other work\n")
    commit_all(lead, 4, "other work")
    git(lead, "fetch", "-q")
    git(lead, "switch", "-q", "-c", "landing", "origin/kexp/alice")
    at(lead, 5, "rebase", "-q", "main")
    git(lead, "switch", "-q", "main")
    git(lead, "merge", "-q", "--ff-only", "landing")
    git(lead, "branch", "-q", "-D", "landing")
    if cut_between:  # a teammate's branch cut from main while it held E
        git(lead, "push", "-q", "origin", "main:kexp/carol")
    at(lead, 6, "revert", "--no-edit", "HEAD", "HEAD~1")
    git(lead, "push", "-q", "origin", "main")
    git(bob, "fetch", "-q")
    for reader in (lead, bob):
        # The truth, from git: main held E's very file once (the rebase), lacks it now;
        # the branch holds it still and never saw the revert.
        assert not holds(reader, "origin/main", e) and holds(reader, "origin/kexp/alice", e)
        assert not cut_between or holds(reader, "origin/kexp/carol", e)
        blob = git(reader, "rev-parse", f"origin/kexp/alice:{_path(reader, e)}")
        landed = git(reader, "log", "--format=%H", "--raw", "--no-abbrev", "origin/main",
                     "--", _path(reader, e))  # fmt: skip
        assert blob in landed
        rows = top(reader)
        assert e not in rows and b in rows, (reader.name, rows)
        stats = json.loads(run_kexp("stats", "--all-refs", "--json", cwd=reader).stdout)
        assert stats["total"] == 1, (reader.name, stats)
        shown = run_kexp("show", e, "--all-refs", cwd=reader)
        assert shown.returncode == 2 and "removed" in shown.stderr, shown.stderr


def _path(root: Path, exp_id: str) -> str:
    listing = git(root, "ls-tree", "-r", "--name-only", "origin/kexp/alice", "--", "experiments")
    return next(line for line in listing.splitlines() if f"/{exp_id}-" in line)


def test_a_copy_taken_before_a_force_push_is_no_edit(tmp_path: Path) -> None:
    """Bob copies Alice's E from her pull-request branch (``git restore --source``, as
    kexp advises) and builds F on it; asked for an edit, Alice amends E (1.10 → 1.02)
    and force-pushes. Bob fetches: his untouched copy is the version the branch held
    before (its reflog says so), not his edit; her amended 1.02 is read, F on it."""
    remote, _ = make_remote(tmp_path)
    alice, bob = (clone(remote, tmp_path / name) for name in ("alice", "bob"))
    git(alice, "switch", "-q", "-c", "kexp/alice")
    e = add(alice, "Tiles 128 - +10%", 1.10)
    commit_all(alice, 1, "E")
    git(alice, "push", "-q", "-u", "origin", "kexp/alice")
    git(bob, "fetch", "-q")
    path = _path(bob, e)
    git(bob, "restore", "--source", "origin/kexp/alice", "--", path)
    f = add(bob, "Stages 4 - +3%", 1.03, pid=e)
    correct(alice, e, 1.02, "lead: measured with clocks unlocked; 1.02 locked")
    git(alice, "add", "-A")
    at(alice, 2, "commit", "-q", "--amend", "--no-edit")
    git(alice, "push", "-q", "-f", "origin", "kexp/alice")
    git(bob, "fetch", "-q")
    # The truth, from git: Bob's file is the blob the branch held before the push.
    before = git(bob, "rev-parse", f"origin/kexp/alice@{{1}}:{path}")
    assert git(bob, "hash-object", path) == before
    assert score_at(bob, "origin/kexp/alice", e) == 1.02
    rows = top(bob)
    assert rows[e]["score"] == 1.02 and rows[e]["ref"] == "origin/kexp/alice", rows[e]
    assert not rows[e].get("diverged"), rows[e]
    assert rows[f]["cumulative_score"] == pytest.approx(1.02 * 1.03), rows[f]
    # An edit of his own after the copy is his: read as the working tree's.
    (bob / path).write_text((bob / path).read_text().replace("score: 1.1\n", "score: 1.11\n"))
    assert top(bob)[e]["score"] == 1.11
