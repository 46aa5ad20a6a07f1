"""``kexp sync --branch kexp/NEW`` with nothing to publish (trial D, finding 4) said "up to
date with origin/kexp/NEW", a branch the remote did not have. It says what is true:
nothing to publish, and the branch is not on the remote yet; a branch the remote has is
still "up to date" once taken in."""

from __future__ import annotations

import json
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


def test_a_checked_out_branch_the_remote_lacks_is_not_called_up_to_date(tmp_path: Path) -> None:
    """``git switch -c work`` (never pushed), nothing new to publish: the sync said "up
    to date with origin/work", a branch the remote does not have. It says the branch is
    not on the remote yet and that it pushed nothing (the first sync with an experiment
    to publish pushes it), in a dry run too; the JSON says ``on_remote: false``. Once an
    experiment is recorded, the sync pushes the branch and says so."""
    remote, base = make_remote(tmp_path)
    alice = clone(remote, tmp_path / "alice")
    git(alice, "switch", "-q", "-c", "work")
    for dry in ((), ("--dry-run",)):
        done = run_kexp("sync", *dry, cwd=alice)
        assert done.returncode == 0, done.stderr
        first = done.stdout.splitlines()[0]
        assert "up to date" not in done.stdout, done.stdout
        assert first.startswith("nothing to publish: work is not on origin,"), done.stdout
        assert "the first sync with an experiment to publish pushes it" in first, first
    said = json.loads(run_kexp("sync", "--json", cwd=alice).stdout)
    assert said["on_remote"] is False and said["pushed"] is False, said
    assert "work" not in git(alice, "ls-remote", "origin")

    record(alice, base, "Unroll by 4 - +2%")
    done = run_kexp("sync", cwd=alice)
    assert done.returncode == 0, done.stderr
    assert "pushed 1 commit(s) to origin/work" in done.stdout, done.stdout
    assert "work" in git(alice, "ls-remote", "origin")
    again = json.loads(run_kexp("sync", "--json", cwd=alice).stdout)
    assert again["on_remote"] is True and again["up_to_date"] is True, again
