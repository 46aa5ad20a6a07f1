"""``kexp sync`` fetches the remote's other branches: one agent per branch (as
docs/team.md recommends), an agent whose only git is ``sync`` (an MCP client) reads what
the others synced with ``all_refs``, as of its last sync. Real git: a bare repository on
disk as the remote, one clone per agent; the MCP agent through the SDK's own client on a
``kexp mcp`` subprocess, the other agent through real ``kexp`` processes."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from conftest import git, run_kexp
from test_sync import clone, make_remote, record

pytest.importorskip("mcp")
from test_mcp import Agent, run_agent

#: The dead end Bob recorded: the same code change recorded again must be warned of.
DEAD_END = """\
diff --git a/kernels/gemm.cu b/kernels/gemm.cu
--- a/kernels/gemm.cu
+++ b/kernels/gemm.cu
@@ -10,1 +10,3 @@
-  load_tile(As, A);
+  cp_async_cg_shared_global<16>(&As[r][c], &A[idx]);
+  cp_async_commit_group();
+  cp_async_wait_group<0>();
"""
OP = "kernels/gemm.cu: gemm_bf16"


def _bob_publishes(bob: Path, base: str) -> tuple[str, str]:
    """Bob's better step and his dead end (with its diff), synced to ``kexp/b`` by a
    real ``kexp sync`` process: (the better one's id, the dead end's id)."""
    fast = record(bob, base, "Tensor cores - +80%", score=1.8, operator_sig=OP, env="H100")
    dead = record(
        bob, base, "cp.async 2-stage - -6% (dead end)", score=0.94, operator_sig=OP,
        env="H100", code_change=DEAD_END,
    )  # fmt: skip
    synced = run_kexp("sync", "--branch", "kexp/b", cwd=bob, process=True)
    assert synced.returncode == 0, synced.stderr
    return fast.id, dead.id


def test_an_mcp_agent_reads_what_another_synced_on_its_own_branch_after_its_sync(
    tmp_path: Path,
) -> None:
    """Alice (MCP only, no shell) syncs to ``kexp/a`` after Bob synced ``kexp/b``: the
    sync's answer names Bob's branch as fetched, and consult and record with all_refs
    see his best and his dead end (the same diff recorded again is warned of). Before,
    the sync fetched ``kexp/a`` alone: consult named Alice's own 1.2x as the best, and
    the repeat of Bob's dead end went unwarned."""
    remote, base = make_remote(tmp_path)
    alice, bob = clone(remote, tmp_path / "alice"), clone(remote, tmp_path / "bob")
    mine = record(alice, base, "Tiling - +20%", score=1.2, operator_sig=OP, env="H100")
    assert run_kexp("sync", "--branch", "kexp/a", cwd=alice, process=True).returncode == 0
    fast, dead = _bob_publishes(bob, base)
    tip = git(remote, "rev-parse", "kexp/b")

    async def work(agent: Agent) -> None:
        done = await agent.json("sync", branch="kexp/a")
        assert done["fetched"] == [{"branch": "kexp/b", "commits": 1, "new": True}]
        assert git(alice, "rev-parse", "origin/kexp/b") == tip
        failed, texts = await agent.call("consult", operator="gemm", all_refs=True)
        assert not failed, texts
        best = texts[0].split("## Current best", 1)[1].split("##", 1)[0]
        assert fast[:10] in best and "origin/kexp/b" in best, texts[0]
        assert dead[:10] in texts[0] and mine.id[:10] in texts[0]
        failed, texts = await agent.call(
            "record", change_summary="cp.async again", operator_sig=OP, dtype_sig="bf16",
            env="H100", score=0.95, base_commit=base, code_change=DEAD_END, all_refs=True,
        )  # fmt: skip
        assert not failed, texts
        warned = [t for t in texts[1:] if dead in t]
        assert warned and "origin/kexp/b" in warned[0], texts
        again = await agent.json("sync", branch="kexp/a")  # nothing new on kexp/b
        assert again["fetched"] == []

    run_agent(alice, work)


def test_kexp_sync_says_which_other_branches_it_fetched(tmp_path: Path) -> None:
    """A sync with nothing to publish still brings the other agents' branches in, says
    each with its new commits and how to read them; a dry run moves no ref; a branch
    Bob moves on is said with the commits it gained."""
    remote, base = make_remote(tmp_path)
    alice, bob = clone(remote, tmp_path / "alice"), clone(remote, tmp_path / "bob")
    _bob_publishes(bob, base)
    planned = run_kexp("sync", "--dry-run", cwd=alice, process=True)
    assert planned.returncode == 0, planned.stderr
    assert "other branches gained" not in planned.stdout
    assert "origin/kexp/b" not in git(alice, "branch", "-r")
    done = run_kexp("sync", cwd=alice, process=True)
    assert done.returncode == 0, done.stderr
    said = [line for line in done.stdout.splitlines() if line.startswith("fetched")]
    assert said == [
        "fetched what origin's other branches gained: kexp/b (new here, 1 new commit(s)); read "
        "them with --all-refs (kexp context --all-refs, kexp add --all-refs)"
    ], done.stdout
    assert git(alice, "rev-parse", "origin/kexp/b") == git(remote, "rev-parse", "kexp/b")
    record(bob, base, "Swizzled smem - +3%", score=1.03, operator_sig=OP, env="H100")
    record(bob, base, "Bigger tiles - +1%", score=1.01, operator_sig=OP, env="H100")
    assert run_kexp("sync", "--branch", "kexp/b", cwd=bob, process=True).returncode == 0
    again = run_kexp("sync", "--json", cwd=alice, process=True)
    assert again.returncode == 0, again.stderr
    assert json.loads(again.stdout)["fetched"] == [{"branch": "kexp/b", "commits": 1, "new": False}]
    assert git(alice, "rev-parse", "origin/kexp/b") == git(remote, "rev-parse", "kexp/b")
    ids = run_kexp("list", "--all-refs", "--json", cwd=alice, process=True)
    assert len(json.loads(ids.stdout)) == 4
