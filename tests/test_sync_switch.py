"""``kexp sync --branch`` after the checkout moved (``git switch``), with real git (a
bare repository on disk as the remote, real clones, a pull request merged as a forge
does).

A removal it publishes is one the user made: a file the checkout's ``HEAD`` tracks and
the working tree lacks (``kexp rm``, ``git rm``, any deletion ``git status`` shows), or
one ``kexp rm`` deleted while it was untracked here (published from beside the
checkout). A file the working tree lacks only because the checkout is at a commit
that does not hold it is never removed. The truth is read from git (``git ls-tree``
of the remote's branch).
"""

from __future__ import annotations

import json
import shlex
from pathlib import Path

import pytest
from conftest import git, run_kexp
from test_sync import clone, make_remote, record, remote_ids
from test_sync_landed import land

from kexp import Store
from kexp.storage.sync import sync


def relative(root: Path, path: object) -> str:
    return Path(str(path)).relative_to(root).as_posix()


@pytest.mark.parametrize(
    "switch",
    [("switch", "-q", "work"), ("switch", "-q", "--detach", "HEAD~1")],
    ids=["back to the work branch", "to a parent commit"],
)
def test_a_switch_away_from_the_merged_experiments_removes_nothing(
    tmp_path: Path, switch: tuple[str, ...]
) -> None:
    """Alice works on ``work`` (a kernel commit), publishes two experiments to kexp/a;
    the pull request is merged; ``kexp sync`` on main (as docs/team.md says) makes them
    main's; then ``git switch work`` (or to main's parent, to try a variant) takes them
    out of the working tree, as git does. The next ``kexp sync --branch kexp/a`` (and
    its dry run) removes nothing: the branch keeps both, and its next pull request would
    delete nothing from main."""
    remote, base = make_remote(tmp_path)
    alice = clone(remote, tmp_path / "alice", branch="work")
    (alice / "kernel.py").write_text("def k(): pass  # tuned\n")
    git(alice, "add", "kernel.py")
    git(alice, "commit", "-q", "-m", "kernel change")
    first = record(alice, base, "Unroll 4 - +10%", score=1.1)
    second = record(alice, base, "Smem staging - regression", score=0.85)
    assert sync(Store(alice), branch="kexp/a").pushed
    land(remote, tmp_path / "forge", "kexp/a", "merge commit")
    git(alice, "switch", "-q", "main")
    done = run_kexp("sync", cwd=alice)
    assert done.returncode == 0, done.stderr
    assert git(alice, "ls-files", "experiments").count(".md") == 3  # main's now
    published = git(remote, "rev-parse", "kexp/a")

    git(alice, *switch)
    assert not Path(str(first.path)).exists() and not Path(str(second.path)).exists()
    assert git(alice, "status", "--porcelain") == ""  # nothing deleted, as git sees it
    planned = run_kexp("sync", "--branch", "kexp/a", "--dry-run", "--json", cwd=alice)
    assert planned.returncode == 0, planned.stderr
    assert json.loads(planned.stdout)["removed"] == [], planned.stdout
    result = run_kexp("sync", "--branch", "kexp/a", cwd=alice)
    assert result.returncode == 0, result.stderr
    assert "removed" not in result.stdout, result.stdout
    assert sorted(remote_ids(remote, "kexp/a")) == sorted([first.id, second.id])
    assert git(remote, "diff", "--name-status", published, "kexp/a") == ""
    git(tmp_path / "forge", "fetch", "-q")
    review = run_kexp("review", "origin/main", "origin/kexp/a", "--json", cwd=tmp_path / "forge")
    assert review.returncode == 0 and json.loads(review.stdout)["removed"] == [], review.stdout


def test_a_kexp_rm_of_a_file_published_from_beside_the_checkout_survives_a_switch(
    tmp_path: Path,
) -> None:
    """``kexp rm`` of a file ``--branch`` published (untracked here), then ``git switch``
    to another branch: the next ``sync --branch`` still publishes that removal, and only
    it (the other file it published, untracked, stays on the branch)."""
    remote, base = make_remote(tmp_path)
    alice = clone(remote, tmp_path / "alice")
    kept = record(alice, base, "Vectorized loads - +12%", score=1.12)
    gone = record(alice, base, "Unroll 8 - crash", score=1.0)
    assert sync(Store(alice), branch="kexp/alice").pushed
    removed = run_kexp("rm", gone.id, "--yes", cwd=alice)
    assert removed.returncode == 0, removed.stderr
    git(alice, "switch", "-q", "-c", "variant")

    done = sync(Store(alice), branch="kexp/alice")
    assert done.removed == (relative(alice, gone.path),) and done.pushed
    assert remote_ids(remote, "kexp/alice") == [kept.id]
    assert sync(Store(alice), branch="kexp/alice").up_to_date


def test_a_file_deleted_otherwise_than_with_kexp_rm_is_removed_once_kexp_rm_says_so(
    tmp_path: Path,
) -> None:
    """A file ``--branch`` published, untracked here, deleted by hand (``rm``): as after
    a switch, nothing says it was a removal, and the branch keeps it; brought back as
    docs/team.md says and ``kexp rm``-ed, its removal is published."""
    remote, base = make_remote(tmp_path)
    alice = clone(remote, tmp_path / "alice")
    kept = record(alice, base, "Vectorized loads - +12%", score=1.12)
    gone = record(alice, base, "Unroll 8 - crash", score=1.0)
    assert sync(Store(alice), branch="kexp/alice").pushed
    Path(str(gone.path)).unlink()
    assert sync(Store(alice), branch="kexp/alice").removed == ()
    assert sorted(remote_ids(remote, "kexp/alice")) == sorted([kept.id, gone.id])

    path = relative(alice, gone.path)
    git(alice, "restore", "--source", "kexp/alice", "--", path)
    assert run_kexp("rm", gone.id, "--yes", cwd=alice).returncode == 0
    assert sync(Store(alice), branch="kexp/alice").removed == (path,)
    assert remote_ids(remote, "kexp/alice") == [kept.id]


def test_kexp_rm_after_the_switch_says_how_to_remove_it_and_that_works(tmp_path: Path) -> None:
    """After the switch, ``kexp rm`` of one of the merged experiments (absent here) does
    not say a removal was made (none was, and ``sync --branch`` publishes none) but how
    to make it: bring its file back; followed as written, the removal is published."""
    remote, base = make_remote(tmp_path)
    alice = clone(remote, tmp_path / "alice", branch="work")
    first = record(alice, base, "Unroll 4 - +10%", score=1.1)
    second = record(alice, base, "Smem staging - regression", score=0.85)
    assert sync(Store(alice), branch="kexp/a").pushed
    land(remote, tmp_path / "forge", "kexp/a", "merge commit")
    git(alice, "switch", "-q", "main")
    assert run_kexp("sync", cwd=alice).returncode == 0
    git(alice, "switch", "-q", "work")

    refused = run_kexp("rm", second.id, "--yes", cwd=alice)
    assert refused.returncode != 0 and refused.stderr.count("\n") == 1, refused.stderr
    assert "publishes the removal" not in refused.stderr, refused.stderr
    assert "to remove it, bring its file back first (git restore" in refused.stderr
    restore = refused.stderr.split("first (", 1)[1].split(") and run this again", 1)[0]
    git(alice, *shlex.split(restore)[1:])
    assert run_kexp("rm", second.id, "--yes", cwd=alice).returncode == 0
    done = run_kexp("sync", "--branch", "kexp/a", cwd=alice)
    assert done.returncode == 0, done.stderr
    assert "removed 1 experiment file(s)" in done.stdout, done.stdout
    assert remote_ids(remote, "kexp/a") == [first.id]
