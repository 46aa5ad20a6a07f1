"""Agents in worktrees of one clone (``git worktree add``, one per agent) syncing one
side branch at once: they share the clone's branches, so their syncs take turns, as
two syncs in one working tree do; none fails because the other moved the branch.
Real git: a bare repository on disk as the remote, one clone and a worktree of it;
real ``kexp`` processes, ordered by the remote's ``pre-receive`` hook."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

from conftest import git, run_kexp
from test_sync import clone, make_remote, record, remote_ids

SHARED = "kexp/shared"

#: The remote's pre-receive hook: holds the first push until ``release`` exists
#: (``arrived`` says it is held); the others pass.
_HOLD_FIRST_PUSH = """#!/bin/sh
cat >/dev/null
if mkdir "{gate}/first" 2>/dev/null; then
  touch "{gate}/arrived"
  while [ ! -e "{gate}/release" ]; do sleep 0.05; done
fi
exit 0
"""


def _holds_open(pid: int, path: Path) -> bool:
    """Whether the process ``pid`` has the file ``path`` open (it waits for its lock)."""
    folder = Path(f"/proc/{pid}/fd")
    try:
        return any(os.readlink(folder / fd) == str(path) for fd in os.listdir(folder))
    except OSError:  # (it ended meanwhile, or a descriptor closed)
        return False


def test_two_worktrees_syncing_one_side_branch_at_once_take_turns(tmp_path: Path) -> None:
    """Alice's sync (the clone) has moved the shared branch here and its push is held
    by the remote; Bob's (a worktree) runs then, on her commit. It moved the branch
    under Alice's, whose push was rejected and which then failed ("branch kexp/shared
    moved while kexp sync was merging into it"). Now Bob's waits for Alice's to end
    (her push is let go once Bob's waits, or ended), and both publish."""
    remote, base = make_remote(tmp_path)
    alice = clone(remote, tmp_path / "alice")
    bob = tmp_path / "bob"
    git(alice, "worktree", "add", "-q", "-b", "bob-work", str(bob), "main")
    made = [record(alice, base, "Unroll by 4 - +2%", score=1.02).id]
    assert run_kexp("sync", "--branch", SHARED, cwd=alice, process=True).returncode == 0
    made += [record(alice, base, "Tile by 64 - +1%", score=1.01).id]
    made += [record(bob, base, "Vectorize loads - +3%", score=1.03).id]
    gate = tmp_path / "gate"
    gate.mkdir()
    hook = remote / "hooks" / "pre-receive"
    hook.write_text(_HOLD_FIRST_PUSH.format(gate=gate))
    hook.chmod(0o755)

    command = [sys.executable, "-m", "kexp", "sync", "--branch", SHARED]
    first = subprocess.Popen(command, cwd=alice, text=True, stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE)  # fmt: skip
    while not (gate / "arrived").exists():
        assert first.poll() is None, first.communicate()
        time.sleep(0.02)
    second = subprocess.Popen(command, cwd=bob, text=True, stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE)  # fmt: skip
    lock = alice / ".git" / "kexp" / "sync.lock"  # (the clone's, which Bob's waits for)
    while second.poll() is None and not _holds_open(second.pid, lock):
        time.sleep(0.02)
    (gate / "release").touch()
    _, err = first.communicate(timeout=120)
    assert first.returncode == 0, err
    _, err = second.communicate(timeout=120)
    assert second.returncode == 0, err
    assert sorted(remote_ids(remote, SHARED)) == sorted(made)
