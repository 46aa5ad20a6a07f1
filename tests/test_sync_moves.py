"""``kexp sync`` where one clone moved an experiment file (``kexp migrate-layout``: the
month layout to the fan-out one) and another removed the experiment (``kexp rm``): the
removal is kept, in either order, committed or not; a move that also changed the file is
a conflict, as a removal against a correction is. Real git: a bare repository on disk
as the remote, two clones."""

from __future__ import annotations

from pathlib import Path

from conftest import git, run_kexp
from test_sync import clone, files_ids, make_remote, record, remote_ids
from test_sync_layout import follow

WHEN = "2026-12-06T10:00:00.000000Z"


def _month_layout(remote: Path, tmp_path: Path) -> tuple[Path, Path, str]:
    """Two clones of ``remote`` (alice, bob) and one experiment, X, published on main in
    the month layout (``experiments/YYYY/MM/``) and pulled by both; X's id."""
    remote_base = git(remote, "rev-parse", "main")
    alice = clone(remote, tmp_path / "alice")
    bob = clone(remote, tmp_path / "bob")
    made = record(alice, remote_base, "Unroll by 4 - +2%", score=1.02, created_at=WHEN)
    fanned = next((alice / "experiments").rglob(f"{made.id}-*.md"))
    fanned.rename(fanned.parent.parent / fanned.name)
    fanned.parent.rmdir()
    assert run_kexp("sync", cwd=alice).returncode == 0
    git(bob, "pull", "-q")
    assert files_ids(bob) == [made.id]
    return alice, bob, made.id


def _migrate(root: Path) -> None:
    done = run_kexp("migrate-layout", cwd=root)
    assert done.returncode == 0 and "moved 1 experiment file(s)" in done.stdout, done.output


def test_a_removal_synced_after_a_move_elsewhere_stays_removed(tmp_path: Path) -> None:
    """Alice migrates the layout and syncs; Bob, not pulled, removes X and syncs: X stays
    removed, on main and in Bob's store (it came back, the move taken for news)."""
    remote, _ = make_remote(tmp_path)
    alice, bob, exp_id = _month_layout(remote, tmp_path)
    _migrate(alice)
    assert run_kexp("sync", cwd=alice).returncode == 0
    assert run_kexp("rm", exp_id, "--yes", cwd=bob).returncode == 0

    done = run_kexp("sync", cwd=bob)
    assert done.returncode == 0, done.output
    assert remote_ids(remote) == [] and files_ids(bob) == []
    assert run_kexp("sync", cwd=alice).returncode == 0
    assert files_ids(alice) == []


def test_a_committed_removal_merged_with_a_move_elsewhere_stays_removed(tmp_path: Path) -> None:
    """The same with Bob's removal committed first (``git commit``): the sync's merge
    keeps the removal against the move (git calls it rename/delete)."""
    remote, _ = make_remote(tmp_path)
    alice, bob, exp_id = _month_layout(remote, tmp_path)
    _migrate(alice)
    assert run_kexp("sync", cwd=alice).returncode == 0
    assert run_kexp("rm", exp_id, "--yes", cwd=bob).returncode == 0
    git(bob, "commit", "-q", "-am", "Remove X")

    done = run_kexp("sync", cwd=bob)
    assert done.returncode == 0, done.output
    assert remote_ids(remote) == [] and files_ids(bob) == []


def test_a_move_synced_after_a_removal_elsewhere_keeps_the_removal(tmp_path: Path) -> None:
    """Alice removes X and syncs; Bob, not pulled, migrates the layout and syncs: X
    stays removed (it was back on main, at its new path)."""
    remote, _ = make_remote(tmp_path)
    alice, bob, exp_id = _month_layout(remote, tmp_path)
    assert run_kexp("rm", exp_id, "--yes", cwd=alice).returncode == 0
    assert run_kexp("sync", cwd=alice).returncode == 0
    _migrate(bob)

    done = run_kexp("sync", cwd=bob)
    assert done.returncode == 0, done.output
    assert remote_ids(remote) == [] and files_ids(bob) == []


def test_the_same_move_on_both_sides_loses_nothing(tmp_path: Path) -> None:
    """Both clones migrate the layout, Alice syncs first: X stays, once, at its new
    path."""
    remote, _ = make_remote(tmp_path)
    alice, bob, exp_id = _month_layout(remote, tmp_path)
    _migrate(alice)
    assert run_kexp("sync", cwd=alice).returncode == 0
    _migrate(bob)

    done = run_kexp("sync", cwd=bob)
    assert done.returncode == 0, done.output
    assert remote_ids(remote) == [exp_id] and files_ids(bob) == [exp_id]
    assert git(bob, "status", "--porcelain") == ""


def test_a_removal_against_a_move_that_changed_the_file_is_a_conflict(tmp_path: Path) -> None:
    """Alice migrates and corrects X, and syncs; Bob removes X: his sync stops, a removal
    against a correction, and the correction taken as the line says (run as printed) is
    published at X's new path, once."""
    remote, _ = make_remote(tmp_path)
    alice, bob, exp_id = _month_layout(remote, tmp_path)
    _migrate(alice)
    git(alice, "commit", "-q", "-m", "kexp migrate-layout")
    fixed = run_kexp("update", exp_id, "--set", "dtype_sig=fp16", "--reason",
                     "was measured in fp16", cwd=alice)  # fmt: skip
    assert fixed.returncode == 0, fixed.output
    assert run_kexp("sync", cwd=alice).returncode == 0
    assert run_kexp("rm", exp_id, "--yes", cwd=bob).returncode == 0
    git(bob, "commit", "-q", "-am", "Remove X")

    done = run_kexp("sync", cwd=bob)
    assert done.returncode != 0
    assert exp_id in done.stderr and "removed on one side" in done.stderr, done.stderr
    assert remote_ids(remote) == [exp_id]
    follow(done.stderr, r"to take origin/main's correction of .*?, run (.*?) and kexp sync", bob)
    assert run_kexp("sync", cwd=bob).returncode == 0
    assert remote_ids(remote) == [exp_id] and files_ids(bob) == [exp_id]
    assert "dtype_sig: fp16" in next((bob / "experiments").rglob(f"{exp_id}-*.md")).read_text()
