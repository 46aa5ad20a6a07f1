"""The MCP ``tree`` tool within an agent's context (trial L, R05): it answered the
nested trees of ``kexp tree --json``, each level indented deeper, with no limit: 308 KB
for a 100-iteration campaign, where consult fits 4,000 tokens. Now it answers one flat
row per experiment, at most ``limit``, the best tip and the path to it, the roots and
the dead ends kept first, and says how many it left out and how to read them;
``brief: false`` gives the nested trees as before."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("mcp")
from test_mcp import Agent, run_agent

from kexp import Store

STEPS = 70


@pytest.fixture
def campaign(store: Store) -> tuple[Path, list[str]]:
    """A 70-step campaign, each step +1.5% over its parent, every third a regression
    left behind (the next step builds on the one before it); its steps' ids."""
    ids, pid = [], ""
    for step in range(STEPS):
        exp = store.create_experiment(
            change_summary=f"Step {step} tile tweak - +1.5%",
            score=0.98 if step % 3 == 2 else 1.015,
            status="done", operator_sig="kernels/gemm.cu: gemm", dtype_sig="bf16", env="H100",
            pid=pid, measured_against="parent" if pid else "reference",
        )  # fmt: skip
        ids.append(exp.id)
        if step % 3 != 2:
            pid = exp.id
    return store.root, ids


def test_the_tree_reply_is_bounded_and_says_what_it_left_out(
    campaign: tuple[Path, list[str]],
) -> None:
    root, ids = campaign
    replies: dict[str, Any] = {}

    async def work(agent: Agent) -> None:
        replies["rows"] = await agent.json("tree", operator="gemm")
        replies["few"] = await agent.json("tree", operator="gemm", limit=5)
        replies["nested"] = await agent.json("tree", operator="gemm", brief=False)
        failed, texts = await agent.call("tree", operator="gemm")
        assert not failed, texts
        replies["size"] = len(texts[0])

    run_agent(root, work)
    reply = replies["rows"]
    assert reply["experiments"] == STEPS and reply["trees"] == 1
    shown = len(reply["rows"])
    assert 0 < shown < STEPS and reply["left_out"] == STEPS - shown
    assert reply["read_more"] == f"limit: {STEPS} shows all; brief: false gives the nested trees"
    assert replies["size"] < 16000  # consult's default budget, 4,000 tokens
    # Kept first: the best tip (the last step that improved) and the path to it.
    best = ids[max(s for s in range(STEPS) if s % 3 != 2)]
    few = replies["few"]["rows"]
    assert len(few) == 5 and replies["few"]["left_out"] == STEPS - 5
    assert [r["mark"] for r in few] == ["on the best path"] * 4 + ["best"]
    assert few[-1]["id"] == best and few[0]["depth"] == 0 and few[0]["env"] == "H100"
    assert [r["depth"] for r in few] == sorted(r["depth"] for r in few)  # display order
    nested = replies["nested"]
    assert nested[0]["id"] == ids[0] and "children" in nested[0]  # kexp tree --json


def test_a_small_limit_keeps_the_dead_ends_and_names_what_it_left_out(store: Store) -> None:
    """Trial M, repro 08: a 7-step best path and a 2-step fork that ends below its fork
    point; ``limit: 5`` kept five best-path rows and neither fork step, ``left_out`` a
    bare 4: an agent never learned the fork failed. The dead end is kept before the
    path's middle steps, and what was left out is counted by mark."""
    path, pid = [], ""
    for step in range(7):
        exp = store.create_experiment(
            change_summary=f"step {step} - +10%", score=1.10, status="done",
            operator_sig="kernels/gemm.cu: gemm", dtype_sig="bf16", env="H100",
            pid=pid, measured_against="parent" if pid else "reference",
        )  # fmt: skip
        path.append(exp.id)
        pid = exp.id
    fork = store.create_experiment(
        change_summary="fork 1 - -6%", score=0.94, status="done",
        operator_sig="kernels/gemm.cu: gemm", dtype_sig="bf16", env="H100",
        pid=path[2], measured_against="parent",
    )  # fmt: skip
    store.create_experiment(
        change_summary="fork 2 - +3%", score=1.03, status="done",
        operator_sig="kernels/gemm.cu: gemm", dtype_sig="bf16", env="H100",
        pid=fork.id, measured_against="parent",
    )  # fmt: skip
    replies: dict[str, Any] = {}

    async def work(agent: Agent) -> None:
        replies["few"] = await agent.json("tree", operator="gemm", limit=5)

    run_agent(store.root, work)
    few = replies["few"]
    marks = {row["change_summary"]: row.get("mark") for row in few["rows"]}
    assert marks["fork 1 - -6%"] == "dead end", few
    assert marks["step 0 - +10%"] == "on the best path" and marks["step 6 - +10%"] == "best"
    assert marks["fork 2 - +3%"] == "dead end", few
    assert few["left_out"] == 4 and few["left_out_kinds"] == {"on the best path": 4}, few
