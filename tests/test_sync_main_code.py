"""An agent on main that commits its kernel code (``git add PATHS``, as the skill says)
and shares its iteration with the MCP ``sync`` tool (trial G, repro 09).

kexp sync never publishes code to the remote's default branch, where reviews land, so
the sync commits the experiments and pushes nothing. That is a tool error, and stays
one (docs/commands.md, "kexp sync": with experiments to publish the sync stops before
the push): the iteration is not shared (other agents do not see it), and only the
agent can choose the way on. Code alone, with nothing of its own to publish, is no
error (tests/test_sync_code.py). The skill's step 4 said only "on main it never changes
your code there, and says what it held back", which reads as a success; it says now
what happens and the way on, and the way on, taken as the tool words it, publishes.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from conftest import git
from test_skill import SKILL_MD
from test_sync import clone, make_remote, remote_ids

pytest.importorskip("mcp")
from test_mcp import Agent, run_agent


def step_four() -> str:
    """The skill's step 4 (to the next numbered step or paragraph), on one line."""
    text = SKILL_MD.read_text(encoding="utf-8")
    start = text.index("4. **Then share it:**")
    return " ".join(text[start : text.index("\n\n", start)].split())


def test_the_skill_says_what_sync_does_on_main_with_code_committed() -> None:
    step = step_four()
    assert "says what it held back" not in step, step
    assert re.search(r"pushes nothing and stops with an error", step), step
    assert "`--branch kexp/<your-name>` from then on" in step, step


def test_sync_on_main_with_code_committed_is_an_error_whose_way_on_publishes(
    tmp_path: Path,
) -> None:
    remote, base = make_remote(tmp_path)
    agent_clone = clone(remote, tmp_path / "agent")
    main = git(remote, "rev-parse", "main")
    with (agent_clone / "kernel.cu").open("a") as file:
        file.write("// persistent grid\n")
    git(agent_clone, "add", "kernel.cu")
    git(agent_clone, "commit", "-q", "-m", "softmax: persistent grid")
    change = git(agent_clone, "rev-parse", "--short", "HEAD")
    recorded: dict[str, str] = {}

    async def work(agent: Agent) -> None:
        made = await agent.json(
            "record", change_summary="Persistent grid - +7%", score=1.07,
            operator_sig="kernel.cu: softmax", dtype_sig="bf16", env="MI300X",
            base_commit="HEAD",
        )  # fmt: skip
        recorded["id"] = made["id"]
        failed, texts = await agent.call("sync")
        assert failed, texts
        said = " ".join(texts)
        assert "the experiments are committed on main, kept" in said, said
        assert change in said and "softmax: persistent grid" in said, said
        way = re.search(r'call sync with branch: "(kexp/<name>)"', said)
        assert way, said
        failed, texts = await agent.call("sync", branch=way.group(1).replace("<name>", "agent"))
        assert not failed, texts

    run_agent(agent_clone, work)
    assert git(remote, "rev-parse", "main") == main  # main: neither code nor experiments
    assert remote_ids(remote, "kexp/agent") == [recorded["id"]]
    assert git(remote, "show", "kexp/agent:kernel.cu").endswith("// persistent grid")
    assert base  # (the remote's first commit: an empty store)
