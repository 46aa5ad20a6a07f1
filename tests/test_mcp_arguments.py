"""The MCP tools' arguments are JSON, typed as each tool's input schema lists them: a
value of another JSON type (``score: true``, ``score: "1.2"``, ``is_buggy: "no"``) is
refused with one line naming the argument and what it must be, never converted, and
nothing is written. The SDK's own client drives ``kexp mcp`` over stdio, on a real store
in a real git repository."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from conftest import git

pytest.importorskip("mcp")
from jsonschema import Draft202012Validator
from test_mcp import Agent, record_fields, run_agent

from kexp import Store

#: Values of every JSON type, the ones a client most often sends in place of another.
PROBES: tuple[Any, ...] = (True, False, 1, 2.5, "1.2", "yes", ["x"], {"x": 1}, None)


def snapshot(repo: Path) -> tuple[dict[str, bytes], str, str]:
    """What a refused call must leave as it was: every file under experiments/, the
    commit checked out and git's status."""
    files = {
        str(path.relative_to(repo)): path.read_bytes()
        for path in sorted((repo / "experiments").rglob("*"))
        if path.is_file()
    }
    return files, git(repo, "rev-parse", "HEAD"), git(repo, "status", "--porcelain")


def test_every_tools_argument_of_another_json_type_is_refused_naming_it(repo: Path) -> None:
    """For each tool and each of its arguments, each probe value that the listed input
    schema does not allow is a tool error of one line naming the argument and what it
    must be (the SDK read ``true`` as the score 1.0, ``"1.2"`` as 1.2, ``"no"`` as
    false and wrote the experiment); nothing is written, the server goes on."""
    made = Store(repo).create_experiment(score=1.0, status="done", **record_fields())
    git(repo, "add", "-A")
    git(repo, "commit", "-qm", "one experiment")
    needed: dict[str, dict[str, Any]] = {
        "consult": {"operator": "softmax"},
        "show": {"exp_id": made.id},
        "remeasure": {"exp_id": made.id},
        "update": {"exp_id": made.id, "changes": {"tags": ["x"]}, "reason": "why"},
        "record": record_fields(),
    }
    before = snapshot(repo)
    refusals: list[tuple[str, str, Any, bool, list[str]]] = []

    async def work(agent: Agent) -> None:
        for tool in (await agent.session.list_tools()).tools:
            schema = {k: v for k, v in tool.input_schema.items() if k != "required"}
            allowed = Draft202012Validator(schema)
            for name in tool.input_schema["properties"]:
                for probe in PROBES:
                    if allowed.is_valid({name: probe}):
                        continue
                    arguments = {**needed.get(tool.name, {}), name: probe}
                    failed, texts = await agent.call(tool.name, **arguments)
                    refusals.append((tool.name, name, probe, failed, texts))
        assert await agent.json("show", exp_id=made.id)  # the server goes on answering

    run_agent(repo, work)
    tools = {tool for tool, *_ in refusals}
    assert {"record", "update", "top", "list", "consult", "sync", "remeasure"} <= tools
    wrong = [
        (tool, name, probe, texts)
        for tool, name, probe, failed, texts in refusals
        if not (
            failed
            and len(texts) == 1
            and "\n" not in texts[0]
            and f"argument {name!r} must be " in texts[0]
            and json.dumps(probe) in texts[0]
        )
    ]
    assert not wrong, f"{len(wrong)} of {len(refusals)} not refused: {wrong[:8]}"
    assert snapshot(repo) == before


@pytest.mark.parametrize(
    ("tool", "arguments", "says"),
    [
        ("record", {"score": True}, "argument 'score' must be a number, not true"),
        ("record", {"score": "1.2"}, "argument 'score' must be a number, not \"1.2\""),
        ("record", {"score": 1.0, "is_buggy": "no", "error_message": "x"},
         "argument 'is_buggy' must be true or false, not \"no\""),
        ("record", {"score": 1.0, "tags": "fast"},
         "argument 'tags' must be a list of strings, not \"fast\""),
        ("update", {"changes": {"score": True}},
         "argument 'changes': 'score' must be a number, not true"),
        ("update", {"changes": {"score": "1.02"}},
         "argument 'changes': 'score' must be a number, not \"1.02\""),
        ("update", {"changes": {"is_buggy": 1, "error_message": "x"}},
         "argument 'changes': 'is_buggy' must be true or false, not 1"),
        ("update", {"changes": {"tags": "a,b"}},
         "argument 'changes': 'tags' must be a list of strings, not \"a,b\""),
        ("update", {"changes": {"score_ci": [1, True]}},
         "argument 'changes': 'score_ci' must be a list of numbers, not [1, true]"),
    ],
)  # fmt: skip
def test_a_bool_is_no_number_and_a_text_no_bool_in_record_and_update(
    repo: Path, tool: str, arguments: dict[str, Any], says: str
) -> None:
    """The trial's calls: ``record`` with ``score: true`` wrote ``score: 1.0``, with
    ``"1.2"`` the score 1.2, with ``is_buggy: "no"`` an experiment not buggy; ``update``
    with ``changes: {"score": true}`` on a score of 1.0 answered "nothing changed", and
    typed a text as ``--set`` does. Each is refused, saying what to give; nothing is
    written."""
    made = Store(repo).create_experiment(score=1.0, status="done", **record_fields())
    before = snapshot(repo)
    given = record_fields(**arguments) if tool == "record" else {
        "exp_id": made.id, "reason": "typo", **arguments
    }  # fmt: skip

    async def work(agent: Agent) -> None:
        failed, texts = await agent.call(tool, **given)
        assert failed and len(texts) == 1 and "\n" not in texts[0], texts
        assert says in texts[0], texts[0]

    run_agent(repo, work)
    assert snapshot(repo) == before
