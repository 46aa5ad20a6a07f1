"""An agent that corrects an experiment while its own ``kexp sync --branch`` runs, at
the moment the sync takes another clone's correction of that experiment into the
working tree: neither correction is lost in silence. Real git: a bare repository on
disk as the remote, two clones; the agent's ``kexp update`` is a real process, run at
the chosen moment (the sync's write of the file it takes in), so the interleaving is
the same on every run."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from conftest import git, run_kexp
from test_sync import clone, make_remote, record

from kexp import Store
from kexp.storage import atomic, takenin
from kexp.storage.sync import sync

SHARED = "kexp/shared"


def _score(text: str) -> str:
    found = re.search(r"^score: (\S+)$", text, re.MULTILINE)
    assert found is not None, text
    return found.group(1)


def test_a_correction_made_as_the_sync_takes_another_in_is_never_lost(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Alice published X (1.02) on the shared branch; Bob corrected it there (1.04).
    Alice's sync takes Bob's version into her working tree; just before it writes it,
    her agent's ``kexp update X --set score=1.06`` runs. The update said it was done and
    was then overwritten by 1.04, silently. Now: either the update waits for the sync
    (the experiment's lock) and is said not done, or it is kept (and the clash said by
    the next sync); never both said done and gone."""
    remote, base = make_remote(tmp_path)
    alice = clone(remote, tmp_path / "alice")
    bob = clone(remote, tmp_path / "bob")
    made = record(alice, base, "Unroll by 4 - +2%", score=1.02)
    assert made.path is not None
    path = made.path.relative_to(alice).as_posix()
    assert run_kexp("sync", "--branch", SHARED, cwd=alice).returncode == 0
    git(bob, "fetch", "-q")
    git(bob, "restore", "--source", f"origin/{SHARED}", "--", path)
    fixed = run_kexp("update", made.id, "--set", "score=1.04", "--reason", "b: timer", cwd=bob)
    assert fixed.returncode == 0, fixed.stderr
    assert run_kexp("sync", "--branch", SHARED, cwd=bob).returncode == 0
    # (the agent's update gives up waiting for a lock after half a second)
    (alice / "kexp.toml").write_text("lock_timeout_s = 0.5\n")

    agent: list[subprocess.CompletedProcess[str]] = []
    update = [sys.executable, "-m", "kexp", "update", made.id, "--set", "score=1.06",
              "--reason", "a: remeasured"]  # fmt: skip

    def replace(target: Path, data: bytes, *args: Any, **kwargs: Any) -> Any:
        if Path(target).name == Path(path).name and not agent:
            agent.append(
                subprocess.run(update, cwd=alice, capture_output=True, text=True, timeout=120)
            )
        return atomic.replace(target, data, *args, **kwargs)

    monkeypatch.setattr(takenin, "atomic", SimpleNamespace(replace=replace))
    try:
        done = sync(Store(alice), branch=SHARED)
    except Exception as exc:  # (a stop is fine, if it says what to do)
        done = None
        assert "kexp sync" in str(exc), exc
    assert agent, "the sync took nothing in"
    updated = agent[0]
    now = (alice / path).read_text()
    if updated.returncode == 0:
        assert _score(now) == "1.06", (updated.stdout, now)  # said done: kept
    else:
        said = updated.stderr.strip()
        assert "lock" in said and "again" in said and "\n" not in said, said
        assert _score(now) == "1.04"
        assert done is not None and path in done.taken_in
    assert _score(git(remote, "show", f"{SHARED}:{path}")) == "1.04"  # Bob's stays
