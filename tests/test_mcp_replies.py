"""What the MCP tools say to an agent that has arguments, not flags: advice names the
tools' arguments (``all_refs: true``), never the command's options (``--all-refs``);
``show`` says which ref holds an experiment the working tree does not; ``lessons``
across refs answers from one read of the store. The SDK's own client talks to the real
server (a subprocess, or in-process where a read is counted), on real git repositories
(a bare repository as the remote, two clones)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from conftest import git, run_kexp

pytest.importorskip("mcp")
import anyio
from mcp import Client
from test_mcp import Agent, record_fields, run_agent
from test_sync import clone, make_remote

from kexp import Store
from kexp.cli.mcp import build_server
from kexp.storage.refs import RefsSource
from kexp.storage.sync import sync


def two_agents(tmp_path: Path) -> tuple[Path, Path, str]:
    """Alice's and Bob's clones of one bare remote, and its first commit."""
    remote, base = make_remote(tmp_path)
    return clone(remote, tmp_path / "alice"), clone(remote, tmp_path / "bob"), base


def test_lessons_across_refs_read_the_store_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The lessons of a store read across refs, each saying where it was found, come
    from one read of the store (the reply asked the store again for where each was)."""
    alice, bob, base = two_agents(tmp_path)
    first = Store(alice).create_experiment(
        base_commit=base, score=1.03, status="done", **record_fields()
    )
    slower = Store(alice).create_experiment(
        base_commit=base, score=0.95, status="done", pid=first.id, measured_against="parent",
        **record_fields(change_summary="Two rows per warp - -5%"),
    )  # fmt: skip
    sync(Store(alice), branch="kexp/alice")
    git(bob, "fetch", "-q")
    reads: list[object] = []
    read = RefsSource.read

    def counted(self: RefsSource, *args: Any, **kwargs: Any) -> Any:
        reads.append(self)
        return read(self, *args, **kwargs)

    monkeypatch.setattr(RefsSource, "read", counted)
    answers: list[Any] = []

    async def work() -> None:
        async with Client(build_server(bob)) as client:
            result = await client.call_tool("lessons", {"all_refs": True})
            assert not result.is_error, result.content
            answers.append(json.loads(result.content[0].text))  # type: ignore[union-attr]

    anyio.run(work)
    monkeypatch.undo()
    (lessons,) = answers
    assert [(e["id"], e["ref"]) for e in lessons["regression"]] == [
        (slower.id, "origin/kexp/alice")
    ]
    assert len(reads) == 1, f"the store was read {len(reads)} times"
    printed = run_kexp("lessons", "--json", "--all-refs", cwd=bob)
    assert json.loads(printed.stdout) == lessons


def test_lessons_on_the_working_tree_alone_say_no_ref(tmp_path: Path) -> None:
    """Without refs the lessons carry no place (as ``kexp lessons --json`` prints them)."""
    alice, _, base = two_agents(tmp_path)
    Store(alice).create_experiment(
        base_commit=base, score=0.95, status="done", **record_fields()
    )

    async def work(agent: Agent) -> None:
        lessons = await agent.json("lessons")
        assert [set(e) & {"ref", "refs"} for e in lessons["regression"]] == [set()]

    run_agent(alice, work)

