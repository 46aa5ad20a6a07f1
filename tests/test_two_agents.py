"""Two agents on two clones of one bare remote, each on a branch of its own, as the
README's "Many machines at once" has them work: what one reads of the other's work
(``--all-refs``) says what it is, and what it advises can be done.

The truth is what git and the files hold, never kexp's own report.
"""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

from conftest import git, run_kexp
from test_sync import clone, make_remote, record

from kexp import Store
from kexp.storage.sync import sync

OPERATOR = "csrc/softmax.cu: softmax"


def commit(root: Path, message: str, when: str) -> None:
    """Commit the store's files at a given time (the order of the two agents' commits
    decides which of two diverged versions is shown)."""
    git(root, "add", "experiments")
    dated = {"GIT_COMMITTER_DATE": when, "GIT_AUTHOR_DATE": when}
    subprocess.run(["git", "commit", "-q", "-m", message], cwd=root, check=True,
                   env={**os.environ, **dated})  # fmt: skip


def softmax(root: Path, base: str, summary: str, **fields: object) -> str:
    fields = {"operator_sig": OPERATOR, "dtype_sig": "fp32", "env": "H100", **fields}
    return record(root, base, summary, **fields).id


def test_a_version_changed_on_two_branches_is_said_diverged_never_older(tmp_path: Path) -> None:
    """Alice remeasures X on her branch while Bob retags it on main, both after their
    commits parted: Bob's (the later commit's) is shown, and every view says the other
    is a diverged version, not an older one."""
    remote, base = make_remote(tmp_path)
    alice = clone(remote, tmp_path / "alice")
    x = softmax(alice, base, "Vectorize loads with float4 - +10%", score=1.1026)
    softmax(alice, base, "Unroll row loop by 4 - +2%", score=1.02)
    sync(Store(alice))
    bob = clone(remote, tmp_path / "bob")
    git(alice, "checkout", "-q", "-b", "kexp/alice")
    Store(alice).update_experiment(x, score=1.0888)
    commit(alice, "remeasured", "2026-01-01T00:00:00Z")
    git(alice, "push", "-q", "origin", "kexp/alice")
    Store(bob).update_experiment(x, tags=["vectorize", "float4"])
    commit(bob, "retagged", "2026-02-01T00:00:00Z")
    git(bob, "push", "-q", "origin", "main")
    git(bob, "fetch", "-q")
    # The truth: both changed X since their merge base.
    assert git(bob, "diff", "--stat", "origin/main...origin/kexp/alice", "--", "experiments")
    assert git(bob, "diff", "--stat", "origin/kexp/alice...origin/main", "--", "experiments")

    for command in ("top", "list"):
        shown = run_kexp(command, "--all-refs", cwd=bob)
        assert shown.returncode == 0, shown.stderr
        (line,) = [line for line in shown.stdout.splitlines() if x[:10] in line]
        assert "1.1026" in line and "older" not in line and "diverged" in line
        data = json.loads(run_kexp(command, "--all-refs", "--json", cwd=bob).stdout)
        (found,) = [r for r in data if r["id"] == x]
        assert found["diverged"] and found["other_versions"] == ["origin/kexp/alice"]
        assert "older" not in found["note"]
    shown = run_kexp("show", x[:10], "--all-refs", cwd=bob)
    assert "both changed since their commits parted" in shown.stdout

    # The one consult call builds on Bob's version and says there is another.
    packet = run_kexp("context", "--operator", "softmax", "--all-refs", cwd=bob)
    assert packet.returncode == 0, packet.stderr
    best = packet.stdout.split("## Current best", 1)[1].split("##", 1)[0]
    assert x[:10] in best and "diverged" in best and "origin/kexp/alice" in best
    data = json.loads(
        run_kexp("context", "--operator", "softmax", "--all-refs", "--json", cwd=bob).stdout
    )
    assert data["best"]["id"] == x and data["best"]["other_versions"] == ["origin/kexp/alice"]
    # Read without refs, nothing is said of other places.
    plain = run_kexp("context", "--operator", "softmax", cwd=bob)
    assert "diverged" not in plain.stdout and "origin/" not in plain.stdout


def test_the_listing_label_of_an_older_version_still_says_older(tmp_path: Path) -> None:
    """A correction made on one branch only is newer than what the fork holds: the
    listing says the other place holds an older version."""
    remote, base = make_remote(tmp_path)
    alice = clone(remote, tmp_path / "alice")
    x = softmax(alice, base, "Vectorize loads with float4 - +10%", score=1.10)
    sync(Store(alice))
    git(alice, "checkout", "-q", "-b", "kexp/alice")
    Store(alice).update_experiment(x, score=1.0888)
    commit(alice, "remeasured", "2026-01-01T00:00:00Z")
    git(alice, "push", "-q", "origin", "kexp/alice")
    git(alice, "checkout", "-q", "main")
    shown = run_kexp("list", "--all-refs", cwd=alice)
    (line,) = [line for line in shown.stdout.splitlines() if x[:10] in line]
    assert "1.0888" in line and "older elsewhere" in line and "diverged" not in line
