"""Three clones syncing to one branch (``main``, or a side branch they share) where the
remote holds one clone's push while another's lands: the held push is rejected and
retried (or its sync killed, with git under it, and run again), and a clone that has
not fetched since it last published syncs on top of both. Nothing is lost or
duplicated, and every clone reads across refs what the remote holds. Real git: a bare
repository on disk as the remote, whose ``pre-receive`` hook holds the first push
until the test releases it; real ``kexp`` processes."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import git, run_kexp
from test_sync import clone, make_remote, record, remote_ids

#: Holds the first push that reaches the remote until ``release`` exists (``arrived``
#: says it is held); the others pass.
_HOLD_FIRST = """#!/bin/sh
cat >/dev/null
if mkdir "{gate}/first" 2>/dev/null; then
  touch "{gate}/arrived"
  while [ ! -e "{gate}/release" ]; do sleep 0.05; done
fi
exit 0
"""


def _wait_for(path: Path, process: subprocess.Popen[str]) -> None:
    """Until ``path`` exists (the hook made it), or ``process`` ended without it."""
    import time

    while not path.exists():
        if process.poll() is not None:
            raise AssertionError(process.communicate())
        time.sleep(0.02)


@pytest.mark.parametrize("branch", ["main", "kexp/shared"])
@pytest.mark.parametrize("held", ["retried", "killed"])
def test_a_push_held_while_another_lands_is_retried_or_run_again_losing_nothing(
    tmp_path: Path, branch: str, held: str
) -> None:
    remote, base = make_remote(tmp_path)
    alice, bob, carol = (clone(remote, tmp_path / name) for name in ("alice", "bob", "carol"))
    to = [] if branch == "main" else ["--branch", branch]
    made = [record(carol, base, "Tile by 32 - +1%", score=1.01).id]
    assert run_kexp("sync", *to, cwd=carol, process=True).returncode == 0
    gate = tmp_path / "gate"
    gate.mkdir()
    hook = remote / "hooks" / "pre-receive"
    hook.write_text(_HOLD_FIRST.format(gate=gate))
    hook.chmod(0o755)
    made += [record(alice, base, "Unroll by 4 - +2%", score=1.02).id]
    made += [record(bob, base, "Vectorize loads - +3%", score=1.03).id]

    first = subprocess.Popen(
        [sys.executable, "-m", "kexp", "sync", "--json", *to], cwd=alice, text=True,
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, start_new_session=True,
    )  # fmt: skip
    _wait_for(gate / "arrived", first)  # Alice's push is held by the remote
    landed = run_kexp("sync", "--json", *to, cwd=bob, process=True)
    assert landed.returncode == 0, landed.stderr
    assert json.loads(landed.stdout)["pushed"] is True
    if held == "killed":  # kexp, git push and the remote's side of it
        os.killpg(first.pid, signal.SIGKILL)
        first.communicate()
        (gate / "release").touch()
        again = run_kexp("sync", "--json", *to, cwd=alice, process=True)
        assert again.returncode == 0, again.stderr
        assert json.loads(again.stdout)["pushed"] is True
    else:
        (gate / "release").touch()
        out, err = first.communicate(timeout=120)
        assert first.returncode == 0, err
        done = json.loads(out)
        assert done["rejected_pushes"] >= 1 and done["merged"] and done["pushed"], done

    made += [record(carol, base, "Tile by 64 - +1.5%", score=1.015).id]  # carol is stale
    late = run_kexp("sync", "--json", *to, cwd=carol, process=True)
    assert late.returncode == 0, late.stderr
    assert json.loads(late.stdout)["pushed"] is True

    on_remote = remote_ids(remote, branch)
    assert sorted(on_remote) == sorted(made)  # none lost, none twice
    assert git(remote, "fsck", "--no-progress") == ""
    for root in (alice, bob, carol):
        git(root, "fetch", "-q")
        stats = run_kexp("stats", "--all-refs", "--json", cwd=root, process=True)
        assert stats.returncode == 0, stats.stderr
        assert json.loads(stats.stdout)["total"] == len(made)
        top = run_kexp("top", "--all-refs", "--json", "-n", "50", cwd=root, process=True)
        assert top.returncode == 0, top.stderr
        assert sorted(row["id"] for row in json.loads(top.stdout)) == sorted(made)
