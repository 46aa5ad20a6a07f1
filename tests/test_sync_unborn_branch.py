"""``kexp sync --branch kexp/NEW`` with nothing to publish (trial D, finding 4) said "up to
date with origin/kexp/NEW", a branch the remote did not have. It says what is true:
nothing to publish, and the branch is not on the remote yet; a branch the remote has is
still "up to date" once taken in."""

from __future__ import annotations

from pathlib import Path

from tests.conftest import git, run_kexp
from tests.test_sync import clone, make_remote, record


def test_a_side_branch_nobody_published_is_not_called_up_to_date(tmp_path: Path) -> None:
    remote, _ = make_remote(tmp_path)
    alice = clone(remote, tmp_path / "alice")
    for dry in ((), ("--dry-run",)):
        done = run_kexp("sync", "--branch", "kexp/nobody-yet", *dry, cwd=alice)
        assert done.returncode == 0, done.stderr
        first = done.stdout.splitlines()[0]
        assert first == (
            "nothing to publish: kexp/nobody-yet is not on origin yet (nor here); the first "
            "sync with an experiment to publish makes it"
        ), done.stdout
        assert "up to date" not in done.stdout, done.stdout
    assert "kexp/nobody-yet" not in git(alice, "ls-remote", "origin")


def test_a_side_branch_the_remote_has_is_up_to_date_once_taken_in(tmp_path: Path) -> None:
    remote, base = make_remote(tmp_path)
    alice, bob = clone(remote, tmp_path / "alice"), clone(remote, tmp_path / "bob")
    record(alice, base, "Unroll by 4 - +2%")
    assert run_kexp("sync", "--branch", "kexp/alice", cwd=alice).returncode == 0
    git(bob, "fetch", "-q")
    run_kexp("sync", "--branch", "kexp/alice", cwd=bob)  # takes the branch in
    again = run_kexp("sync", "--branch", "kexp/alice", cwd=bob)
    assert again.returncode == 0, again.stderr
    assert again.stdout.splitlines()[0] == (
        "up to date with origin/kexp/alice: nothing to commit or push"
    ), again.stdout
