"""A pull request closed unmerged: its branch deleted on the forge. A clone that fetched
it before keeps its remote-tracking branch (``git fetch`` prunes nothing by default), and
reads across refs (``--all-refs``) showed its experiments as if still under review. Once
that clone syncs (which asks the remote for its branches), the branch the remote no
longer has drops out of those reads, as after ``git fetch --prune``; one the remote has
still is read as before. Real git: a bare repository on disk as the remote, the author's
and a teammate's clones, the lead deleting the branch as a forge does."""

from __future__ import annotations

import json
from pathlib import Path

from conftest import git, run_kexp
from test_sync import clone, make_remote, record


def _ids(clone_root: Path) -> dict[str, str]:
    """Each experiment ``kexp top --all-refs`` ranks → the ref it names."""
    done = run_kexp("top", "--all-refs", "--json", cwd=clone_root)
    assert done.returncode == 0, done.stderr
    return {row["id"]: row["ref"] for row in json.loads(done.stdout)}


def test_a_branch_deleted_on_the_forge_drops_out_of_reads_across_refs_once_synced(
    tmp_path: Path,
) -> None:
    remote, base = make_remote(tmp_path)
    carol = clone(remote, tmp_path / "carol")
    dave = clone(remote, tmp_path / "dave")
    lead = clone(remote, tmp_path / "lead")
    rejected = record(carol, base, "Split-K reduction - -4%", score=0.96)
    assert run_kexp("sync", "--branch", "kexp/carol", cwd=carol).returncode == 0
    kept = record(dave, base, "Two rows per warp - +3%", score=1.03)
    assert run_kexp("sync", "--branch", "kexp/dave", cwd=dave).returncode == 0
    other = clone(remote, tmp_path / "erin")
    assert _ids(other) == {rejected.id: "origin/kexp/carol", kept.id: "origin/kexp/dave"}

    git(lead, "push", "-q", "origin", "--delete", "kexp/carol")  # closed, branch deleted
    git(other, "fetch", "-q")  # (no --prune: git's default)
    assert rejected.id in _ids(other)  # stale: git has not forgotten it

    synced = run_kexp("sync", cwd=other)
    assert synced.returncode == 0, synced.stderr
    assert _ids(other) == {kept.id: "origin/kexp/dave"}
    assert "origin/kexp/carol" not in git(other, "branch", "-r")
    assert "origin/kexp/dave" in git(other, "branch", "-r")
