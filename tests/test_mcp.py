"""``kexp mcp`` end to end: the MCP SDK's own client launches the server as a subprocess
and an agent's session runs against a real store in a real git repository (with a bare
repository as its remote); every answer is checked against the files and git."""

from __future__ import annotations

import json
import os
import re
import shutil
import sys
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from conftest import git, init_repo, run_kexp

pytest.importorskip("mcp")
import anyio
from mcp import ClientSession, StdioServerParameters, stdio_client

from kexp import Store
from kexp.agents.skill import MCP_CONFIGS, install_mcp_config, mcp_server_entry
from kexp.cli.main import main
from kexp.cli.mcp import TOOLS
from kexp.core.advice import for_tools
from kexp.format.samples import summarize
from kexp.output.export import BRIEF_FIELDS

README = Path(__file__).resolve().parent.parent / "README.md"
BASE = {"r64_c1024": [12.4, 12.1, 12.3, 12.5, 12.2], "r128_c1024": [23.1, 22.9, 23.3, 23.0]}
CAND = {"r64_c1024": [11.8, 11.9, 11.7, 12.0, 11.8], "r128_c1024": [22.1, 21.9, 22.0, 22.2]}
#: A second candidate, a little faster than the first.
FASTER = {c: [t * 0.98 for t in times] for c, times in CAND.items()}


class Agent:
    """A client session on a ``kexp mcp`` subprocess: tool calls answer JSON."""

    def __init__(self, session: ClientSession) -> None:
        self.session = session

    async def call(self, name: str, **arguments: Any) -> tuple[bool, list[str]]:
        """(is_error, the texts of the answer)."""
        result = await self.session.call_tool(name, arguments)
        texts = [block.text for block in result.content]  # type: ignore[union-attr]
        return bool(result.is_error), texts

    async def json(self, name: str, **arguments: Any) -> Any:
        """The JSON answer of a call that must succeed."""
        failed, texts = await self.call(name, **arguments)
        assert not failed, texts
        return json.loads(texts[0])


def readme_server() -> dict[str, Any]:
    """The ``kexp`` server of the client configuration the README shows."""
    text = README.read_text(encoding="utf-8")
    start = text.index("```json\n", text.index("kexp skill install --claude --mcp")) + 8
    entry: dict[str, Any] = json.loads(text[start : text.index("```", start)])["mcpServers"]["kexp"]
    return entry


def run_agent(
    cwd: Path,
    work: Callable[[Agent], Awaitable[None]],
    env: dict[str, str] | None = None,
    command: list[str] | None = None,
) -> None:
    """Launch ``kexp mcp`` (``python -m kexp mcp`` unless ``command`` is given) in
    ``cwd`` with the SDK's stdio client and run ``work``."""
    program, *args = command or [sys.executable, "-m", "kexp", "mcp"]
    params = StdioServerParameters(command=program, args=args, cwd=str(cwd), env=env)

    async def main() -> None:
        async with stdio_client(params) as (read, write), ClientSession(read, write) as session:
            await session.initialize()
            await work(Agent(session))

    anyio.run(main)


def record_fields(**overrides: Any) -> dict[str, Any]:
    fields: dict[str, Any] = {
        "change_summary": "Warp-shuffle row reduction",  # no figure: scores vary
        "operator_sig": "csrc/softmax.cu: softmax_kernel",
        "dtype_sig": "bf16",
        "env": "H100, CUDA 12.4",
        "detailed_description": "**Approach**: shuffle\n\n**Key insight**: shuffles beat smem",
        "protocol": {"timer": "cuda_events", "warmup": 10},
    }
    fields.update(overrides)
    return fields


@pytest.fixture
def shared_repo(tmp_path: Path) -> Path:
    """A kernel repository holding a store, with a bare repository as ``origin``."""
    remote = tmp_path / "remote.git"
    git(tmp_path, "init", "-q", "--bare", "-b", "main", str(remote))
    repo = init_repo(tmp_path / "kernels")
    (repo / "experiments").mkdir()
    git(repo, "remote", "add", "origin", str(remote))
    git(repo, "push", "-q", "-u", "origin", "main")
    return repo


def test_an_agent_records_consults_corrects_and_shares_through_kexp_mcp(
    shared_repo: Path, tmp_path: Path
) -> None:
    store = Store(shared_repo)
    (tmp_path / "base.json").write_text(json.dumps(BASE), encoding="utf-8")
    (tmp_path / "cand.json").write_text(json.dumps(FASTER), encoding="utf-8")
    (shared_repo / "csrc").mkdir()  # the server runs in a folder below the store

    async def work(agent: Agent) -> None:
        listed = await agent.session.list_tools()
        tools = {tool.name: tool for tool in listed.tools}
        assert tuple(tools) == TOOLS
        for tool in tools.values():
            assert tool.description and tool.input_schema["type"] == "object"
            assert tool.input_schema["additionalProperties"] is False  # a typo is an error
        properties = tools["record"].input_schema["properties"]
        assert {"change_summary", "baseline", "candidate", "score", "protocol"} <= set(properties)
        assert tools["update"].input_schema["required"] == ["exp_id", "changes"]

        # Record one iteration with its samples inline, one with timings files.
        first = await agent.json("record", baseline=BASE, candidate=CAND, **record_fields())
        exp = store.get_experiment(first["id"])
        summary = summarize({c: (BASE[c], CAND[c]) for c in BASE})
        assert (first["score"], first["score_ci"]) == (summary.score, summary.score_ci)
        assert (exp.score, exp.score_ci, exp.outcome) == (
            first["score"],
            first["score_ci"],
            first["outcome"],
        )
        assert [r["config"] for r in exp.results] == list(BASE)
        assert exp.protocol == {"timer": "cuda_events", "warmup": 10}
        assert "## Samples" in exp.path.read_text(encoding="utf-8")
        second = await agent.json(
            "record",
            baseline=str(tmp_path / "base.json"),
            candidate=str(tmp_path / "cand.json"),
            **record_fields(change_summary="Two rows per warp - +3%", pid=first["id"][:10]),
        )
        assert store.get_experiment(second["id"]).pid == first["id"]

        # A bad score is a tool error with kexp's message; nothing is written, and the
        # server goes on answering.
        failed, texts = await agent.call("record", score=-1.0, **record_fields())
        assert failed and "score must be at least 0" in texts[0] and "\n" not in texts[0]
        failed, texts = await agent.call("record", score="fast", **record_fields())
        assert failed and "score" in texts[0]
        assert len(store.list_experiments()) == 2

        # Consult: the packet names what was recorded.
        failed, texts = await agent.call("consult", operator="softmax", plan="warp shuffle")
        assert not failed and first["id"][:10] in texts[0] and "## Current best" in texts[0]
        packet = json.loads((await agent.call("consult", operator="softmax", format="json"))[1][0])
        assert second["score"] > first["score"] and packet["best"]["id"] == second["id"]
        ranked = await agent.json("top")
        truth = store.top_experiments(20)
        assert [r["id"] for r in ranked] == [e.id for e in truth]
        assert set(ranked[0]) <= set(BRIEF_FIELDS)  # what kexp top --json --brief prints
        shown = await agent.json("show", exp_id=first["id"][:10])
        assert (shown["id"], shown["score"], shown["samples"]) == (exp.id, exp.score, exp.samples)
        forest = await agent.json("tree", operator="softmax", brief=False)
        assert [(n["id"], [c["id"] for c in n["children"]]) for n in forest] == [
            (first["id"], [second["id"]])
        ]
        related = await agent.json("similar", text="warp shuffle reduction")
        assert {m["id"] for m in related} <= {first["id"], second["id"]} and related
        assert await agent.json("lessons") == {
            "buggy": [], "failed": [], "regression": [], "marginal": [], "interference": []
        }  # fmt: skip
        failed, texts = await agent.call("show", exp_id="ffffffffff")
        assert failed and "ffffffffff" in texts[0]

        # Correct with a reason (the stale measurement warned), add a round, share.
        failed, texts = await agent.call(
            "update",
            exp_id=second["id"][:10],
            changes={"score": 1.02, "score_ci": [1.01, 1.03]},
            reason="typo",
        )
        assert not failed, texts
        assert json.loads(texts[0])["changed"] == ["score", "score_ci"]
        assert any(t.startswith("kexp: warning:") and "remeasure" in t for t in texts[1:])
        corrected = store.get_experiment(second["id"])
        assert corrected.score == 1.02 and "Reason: typo" in corrected.detailed_description
        failed, texts = await agent.call(
            "update", exp_id=second["id"], changes={"score": 1.1}, reason=""
        )
        assert failed and store.get_experiment(second["id"]).score == 1.02
        # A new round (a copy of the first would be refused: it measures nothing).
        base2 = {c: [round(t + 0.1, 1) for t in times] for c, times in BASE.items()}
        cand2 = {c: [round(t + 0.1, 1) for t in times] for c, times in CAND.items()}
        again = await agent.json("remeasure", exp_id=first["id"], baseline=base2, candidate=cand2)
        pooled = summarize({c: (BASE[c] + base2[c], CAND[c] + cand2[c]) for c in BASE})
        assert (again["score"], again["score_ci"]) == (pooled.score, pooled.score_ci)
        shared = await agent.json("sync", message="experiments from the agent")
        assert sorted(shared["committed"]) == sorted(
            str(e.path.relative_to(shared_repo)) for e in store.list_experiments()
        )

    run_agent(shared_repo / "csrc", work)
    log = git(shared_repo.parent / "remote.git", "log", "--format=%s", "main")
    assert log.splitlines()[0] == "experiments from the agent"


def test_the_store_is_kexp_root_and_a_missing_store_is_a_tool_error(
    repo: Path, tmp_path: Path
) -> None:
    nowhere = tmp_path / "nowhere"
    nowhere.mkdir()

    async def without_store(agent: Agent) -> None:
        failed, texts = await agent.call("top")
        assert failed and "no kexp store found" in texts[0]
        assert (await agent.session.list_tools()).tools  # still answering

    run_agent(nowhere, without_store)

    async def with_root(agent: Agent) -> None:
        made = await agent.json("record", score=1.05, **record_fields())
        assert Store(repo).get_experiment(made["id"]).score == 1.05

    # The command the configuration kexp writes runs, as written (the README shows one).
    entry = mcp_server_entry("claude", project=repo, store=repo)
    run_agent(nowhere, with_root, command=[entry["command"], *entry["args"]])
    run_agent(nowhere, with_root, env={"KEXP_ROOT": str(repo)})


def test_an_agent_that_only_fetched_reads_what_another_synced_through_kexp_mcp(
    tmp_path: Path,
) -> None:
    """The read tools take refs/all_refs (issue 24): agent B's server, in a clone that
    only fetched, answers from agent A's synced experiments, as the files on A's branch
    hold them (read with git); without refs it does not see them."""
    from test_sync import clone, make_remote

    from kexp.storage.sync import sync

    remote, base = make_remote(tmp_path)
    alice, bob = clone(remote, tmp_path / "alice"), clone(remote, tmp_path / "bob")
    first = Store(alice).create_experiment(
        base_commit=base, score=1.03, status="done", **record_fields()
    )
    second = Store(alice).create_experiment(
        base_commit=base,
        score=1.05,
        status="done",
        pid=first.id,
        measured_against="parent",
        **record_fields(change_summary="Two rows per warp - +5%"),
    )
    sync(Store(alice), branch="kexp/alice")
    git(bob, "fetch", "-q")
    synced = git(bob, "show", f"origin/kexp/alice:{second.path.relative_to(alice).as_posix()}")
    assert f"id: {second.id}" in synced and "score: 1.05" in synced

    async def work(agent: Agent) -> None:
        assert await agent.json("top") == []  # bob's own store is empty
        ranked = await agent.json("top", all_refs=True)
        assert [r["id"] for r in ranked] == [second.id, first.id]  # the tip first
        assert ranked[0]["cumulative_score"] == pytest.approx(1.03 * 1.05)
        assert ranked[0]["ref"] == "origin/kexp/alice"
        shown = await agent.json("show", exp_id=second.id[:10], refs=["origin/*"])
        assert (shown["id"], shown["score"], shown["ref"]) == (second.id, 1.05, "origin/kexp/alice")
        failed, texts = await agent.call("show", exp_id=second.id[:10])
        assert failed and second.id[:10] in texts[0]
        failed, texts = await agent.call("consult", operator="softmax", all_refs=True)
        assert not failed and second.id[:10] in texts[0] and "## Current best" in texts[0]
        related = await agent.json("similar", text="two rows per warp", refs=["origin/*"])
        assert second.id in [m["id"] for m in related]
        forest = await agent.json("tree", operator="softmax", all_refs=True, brief=False)
        assert [(n["id"], [c["id"] for c in n["children"]]) for n in forest] == [
            (first.id, [second.id])
        ]

    run_agent(bob, work)


def test_kexp_mcp_without_the_sdk_says_how_to_install_it(
    repo: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delitem(sys.modules, "kexp.cli.mcp", raising=False)
    for name in [n for n in sys.modules if n == "mcp" or n.startswith("mcp.")]:
        monkeypatch.setitem(sys.modules, name, None)  # as if never installed
    result = CliRunner().invoke(main, ["mcp", "--root", str(repo)])
    assert result.exit_code == 2
    assert 'pip install "kexp[mcp]"' in result.stderr and "Traceback" not in result.stderr


# --- the client configuration ------------------------------------------------------------


def test_skill_install_mcp_merges_the_client_configuration(
    repo: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(repo)
    claude = repo / ".mcp.json"
    others = {
        "mcpServers": {"github": {"command": "gh-mcp", "args": ["serve"]}},
        "inputs": [{"id": "token"}],
    }
    claude.write_text(json.dumps(others), encoding="utf-8")
    result = CliRunner().invoke(main, ["skill", "install", "--claude", "--mcp"])
    assert result.exit_code == 0, result.output
    written = json.loads(claude.read_text(encoding="utf-8"))
    assert written["inputs"] == others["inputs"]
    # This kexp's Python and the store, by their absolute paths (said in one line).
    python = os.path.abspath(sys.executable)
    server = {"command": python, "args": ["-m", "kexp", "mcp", "--root", str(repo.resolve())]}
    assert written["mcpServers"] == {**others["mcpServers"], "kexp": server}
    said = f"{claude}: the client runs {python} -m kexp mcp --root {repo.resolve()}"
    assert said in result.output
    assert (repo / ".claude" / "skills" / "kernel-exp-history" / "SKILL.md").is_file()
    # Again: the same file (kexp's entry replaced, not added twice).
    assert CliRunner().invoke(main, ["skill", "install", "--mcp"]).exit_code == 0
    assert json.loads(claude.read_text(encoding="utf-8")) == written

    result = CliRunner().invoke(main, ["skill", "install", "--cursor", "--mcp"])
    assert result.exit_code == 0, result.output
    cursor = json.loads((repo / MCP_CONFIGS["cursor"]).read_text(encoding="utf-8"))
    assert cursor == {
        "mcpServers": {
            "kexp": {
                "command": python,
                "args": ["-m", "kexp", "mcp"],
                "env": {"KEXP_ROOT": "${workspaceFolder}"},
            }
        }
    }


def test_a_store_below_the_project_is_named_for_each_client(tmp_path: Path) -> None:
    project = init_repo(tmp_path / "project")
    store = project / "perf" / "history"
    (store / "experiments").mkdir(parents=True)
    python = os.path.abspath(sys.executable)
    assert mcp_server_entry("claude", project=project, store=store) == {
        "command": python,
        "args": ["-m", "kexp", "mcp", "--root", str(store.resolve())],
    }
    assert mcp_server_entry("cursor", project=project, store=store)["env"] == {
        "KEXP_ROOT": "${workspaceFolder}/perf/history"
    }
    elsewhere = tmp_path / "elsewhere"
    assert mcp_server_entry("claude", project=project, store=elsewhere)["args"][-2:] == [
        "--root",
        str(elsewhere.resolve()),
    ]
    assert mcp_server_entry("cursor", project=project, store=elsewhere)["env"] == {
        "KEXP_ROOT": str(elsewhere.resolve())
    }


@pytest.mark.parametrize("text", ["{not json", "[1, 2]", '{"mcpServers": []}'])
def test_a_client_configuration_kexp_cannot_read_is_left_alone(repo: Path, text: str) -> None:
    path = repo / ".mcp.json"
    path.write_text(text, encoding="utf-8")
    with pytest.raises(Exception, match="fix or move it first"):
        install_mcp_config("claude", project=repo)
    assert path.read_text(encoding="utf-8") == text


def test_the_readme_shows_the_configuration_kexp_writes() -> None:
    """The README's example: kexp installed in /home/me/kernels/.venv, the store at the
    top of /home/me/kernels."""
    shown = readme_server()
    python = shown["command"]
    assert python.endswith("/.venv/bin/python")
    project = Path(python).parents[2]
    command = [python, "-m", "kexp"]
    assert shown == mcp_server_entry("claude", project=project, store=project, command=command)


# --- each tool answers what its command prints ----------------------------------------


def test_each_read_tool_answers_what_its_command_prints_with_json(tmp_path: Path) -> None:
    """The same question to a tool and to its command (``--json``, the brief ``top``)
    gets the same answer: the key insights of ``top``, the noise floor of ``lessons``,
    where each node of ``tree`` was found across refs."""
    from test_sync import clone, make_remote

    from kexp.storage.sync import sync

    remote, base = make_remote(tmp_path)
    alice, bob = clone(remote, tmp_path / "alice"), clone(remote, tmp_path / "bob")
    shutil.copytree(Path(__file__).resolve().parent.parent / "experiments", bob / "experiments",
                    dirs_exist_ok=True)  # fmt: skip
    alices = Store(alice)
    alices.create_experiment(
        base_commit=base, score=1.004, score_ci=[0.98, 1.03], status="done", tags=["control"],
        **record_fields(change_summary="A/A run - +0.4%"),
    )  # fmt: skip
    first = alices.create_experiment(base_commit=base, score=1.03, status="done", **record_fields())
    alices.create_experiment(
        base_commit=base, score=0.96, status="done", pid=first.id, measured_against="parent",
        **record_fields(change_summary="Two rows per warp - -4%"),
    )  # fmt: skip
    sync(alices, branch="kexp/alice")
    git(bob, "fetch", "-q")
    best = Store(bob).top_experiments(1)[0].id[:10]
    questions: list[tuple[str, dict[str, Any], list[str]]] = [
        ("top", {}, ["top", "--json", "--brief"]),
        ("top", {"by": "score", "all_refs": True},
         ["top", "--json", "--brief", "--by", "score", "--all-refs"]),
        ("top", {"brief": False, "limit": 5}, ["top", "--json", "-n", "5"]),
        ("top", {"outcome": ["regression", "marginal"], "operator": "cache"},
         ["top", "--json", "--brief", "--outcome", "regression", "--outcome", "marginal",
          "--operator", "cache"]),
        ("show", {"exp_id": best}, ["show", best, "--json"]),
        ("show", {"exp_id": first.id[:10], "brief": True, "all_refs": True},
         ["show", first.id[:10], "--json", "--brief", "--all-refs"]),
        ("show", {"exp_id": best, "fields": ["id", "score", "key_insight"]},
         ["show", best, "--json", "--fields", "id,score,key_insight"]),
        ("similar", {"text": "unroll the head loop"},
         ["similar", "--text", "unroll the head loop", "--json"]),
        ("similar", {"exp_id": first.id, "all_refs": True},
         ["similar", first.id, "--json", "--all-refs"]),
        ("lessons", {}, ["lessons", "--json"]),
        ("lessons", {"all_refs": True}, ["lessons", "--json", "--all-refs"]),
        ("lessons", {"groups": ["regression"], "limit": 1, "all_refs": True},
         ["lessons", "--json", "--group", "regression", "-n", "1", "--all-refs"]),
        ("tree", {"operator": "cache", "brief": False}, ["tree", "--json", "--operator", "cache"]),
        ("tree", {"all_refs": True, "brief": False}, ["tree", "--json", "--all-refs"]),
        ("tree", {"exp_id": first.id[:10], "refs": ["origin/*"], "brief": False},
         ["tree", first.id[:10], "--json", "--refs", "origin/*"]),
        ("consult", {"operator": "cache", "format": "json"},
         ["context", "--operator", "cache", "--json"]),
        ("consult", {"operator": "softmax", "plan": "warp shuffle", "all_refs": True},
         ["context", "--operator", "softmax", "--text", "warp shuffle", "--all-refs"]),
        ("list", {}, ["list", "--json", "--brief"]),
        ("list", {"all_refs": True, "outcome": ["regression", "marginal"]},
         ["list", "--json", "--brief", "--all-refs", "--outcome", "regression", "--outcome",
          "marginal"]),
        ("list", {"operator": "cache", "sort": "-score", "limit": 3, "brief": False},
         ["list", "--json", "--operator", "cache", "--sort", "-score", "-n", "3"]),
        ("list", {"limit": 2, "reverse": True, "fields": ["id", "score", "key_insight"],
                  "is_buggy": False, "status": ["done"], "min_score": 1.0},
         ["list", "--json", "-n", "2", "--reverse", "--fields", "id,score,key_insight",
          "--not-buggy", "--status", "done", "--min-score", "1.0"]),
        ("list", {"pid": first.id[:10], "refs": ["origin/*"]},
         ["list", "--json", "--brief", "--pid", first.id[:10], "--refs", "origin/*"]),
    ]  # fmt: skip
    answers: list[str] = []

    async def work(agent: Agent) -> None:
        for name, arguments, _ in questions:
            failed, texts = await agent.call(name, **arguments)
            assert not failed and len(texts) == 1, (name, arguments, texts)
            answers.append(texts[0])

    run_agent(bob, work)
    for (name, arguments, argv), answer in zip(questions, answers, strict=True):
        printed = run_kexp(*argv, cwd=bob)
        assert printed.returncode == 0, printed.stderr
        if name == "consult" and "format" not in arguments:
            assert answer == printed.stdout.rstrip("\n"), argv
        else:  # the same, its advice in the tools' words
            assert json.loads(answer) == json.loads(for_tools(printed.stdout)), argv
    assert any("key_insight" in entry for entry in json.loads(answers[0]))
    assert json.loads(answers[10])["noise_floor"]
    listed = [json.loads(answer) for answer in answers[-5:]]
    assert all(listed) and len(listed[2]) == 3 and len(listed[3]) == 2, listed


# --- a wrong argument ---------------------------------------------------------------------


@pytest.mark.parametrize(
    ("name", "arguments", "says"),
    [
        ("top", {"operater": "cache", "limit": 3},
         ["unknown argument 'operater'", "'operator'", "limit"]),
        ("record", {"change_sumary": "x", "operator_sig": "a.cu: k", "dtype_sig": "bf16"},
         ["unknown argument 'change_sumary'", "change_summary"]),
        ("show", {}, ["'exp_id'"]),
        ("consult", {"dtype": "bf16"}, ["'operator'"]),
        ("top", {"limit": "five"}, ["'limit'", "integer", "five"]),
        ("top", {"limit": 0}, ["'limit'", "at least 1"]),
        ("top", {"outcome": "improvement"}, ["'outcome'", "list"]),
        ("top", {"by": "best"}, ["'by'", "cumulative", "score", "low"]),
        ("lessons", {"groups": ["bugy"]}, ["'groups'", "buggy", "regression"]),
        ("record", {"score": "fast", **record_fields()}, ["'score'", "number", "fast"]),
    ],
)  # fmt: skip
def test_a_wrong_argument_is_a_tool_error_of_one_line_naming_it(
    repo: Path, name: str, arguments: dict[str, Any], says: list[str]
) -> None:
    """An unknown argument (a typo), a missing one or one of the wrong kind is a tool
    error of one line naming the argument and what it must be (no pydantic dump), and
    nothing else is done; the server goes on answering."""

    async def work(agent: Agent) -> None:
        failed, texts = await agent.call(name, **arguments)
        assert failed and len(texts) == 1, texts
        assert "\n" not in texts[0] and "pydantic" not in texts[0], texts[0]
        for part in says:
            assert part in texts[0], (part, texts[0])
        assert await agent.json("top") == []

    run_agent(repo, work)
    assert Store(repo).list_experiments() == []


def test_consult_with_too_small_a_budget_names_its_argument(bundled_copy: Path) -> None:
    async def work(agent: Agent) -> None:
        failed, texts = await agent.call("consult", operator="cache", budget=10)
        assert failed and "too small" in texts[0] and "--budget" not in texts[0], texts
        smallest = int(re.search(r"give budget (\d+) or more", texts[0]).group(1))  # type: ignore[union-attr]
        failed, texts = await agent.call("consult", operator="cache", budget=smallest)
        assert not failed and len(texts[0]) <= smallest * 4, texts

    run_agent(bundled_copy, work)


@pytest.fixture
def bundled_copy(repo: Path) -> Path:
    """A repository holding a copy of the bundled experiments."""
    shutil.copytree(Path(__file__).resolve().parent.parent / "experiments", repo / "experiments",
                    dirs_exist_ok=True)  # fmt: skip
    return repo


def test_the_servers_instructions_give_ids_as_the_tools_print_them(repo: Path) -> None:
    """Two experiments of a sweep share their first 12 characters. The server told a
    client "Ids: the first 10 characters are enough", which names neither: an agent
    following it got an ambiguous id. The instructions say to give an id as a tool
    printed it, and that id (as ``top`` prints it) names its experiment."""
    from conftest import experiment_fields

    store = Store(repo)
    twins = ["6b14d0a0003d1a7e", "6b14d0a0003d2b8f"]
    for exp_id in twins:
        store.create_experiment(**experiment_fields(id=exp_id))

    async def work() -> None:
        params = StdioServerParameters(
            command=sys.executable, args=["-m", "kexp", "mcp"], cwd=str(repo)
        )
        async with stdio_client(params) as (read, write), ClientSession(read, write) as session:
            said = (await session.initialize()).instructions or ""
            agent = Agent(session)
            printed = [row["id"] for row in await agent.json("top")]
            assert sorted(printed) == [exp_id[: len(printed[0])] for exp_id in twins]
            for exp_id in twins:
                shown = await agent.json("show", exp_id=exp_id[: len(printed[0])])
                assert shown["id"] == exp_id
            failed, texts = await agent.call("show", exp_id=twins[0][:10])
            assert failed and "ambiguous" in texts[0].lower(), texts
        assert "as a tool printed it" in said and "10 characters are enough" not in said

    anyio.run(work)


def test_an_unknown_id_is_said_before_a_missing_argument(repo: Path) -> None:
    """The agent corrects an experiment through the update tool, with an id it misread
    and no changes yet: the answer says first that no experiment has that id and where
    the ids are (not only "give the changes", which given would lead to the id's error on
    the next call); a known id without changes is asked for the changes alone. Nothing is
    written."""

    async def work(agent: Agent) -> None:
        made = await agent.json("record", score=1.03, **record_fields())
        wrong = "6bdeadbeef"
        failed, texts = await agent.call("update", exp_id=wrong)
        assert failed and len(texts) == 1 and "\n" not in texts[0], texts
        said = texts[0]
        assert f"no experiment with id {wrong}" in said, said
        assert said.index("no experiment") < said.index("'changes'"), said  # the id first
        assert "list tool shows the ids" in said and "--" not in said, said
        failed, texts = await agent.call(
            "remeasure", exp_id=wrong, baseline={"n1": [1.0, 1.1]}, candidate={"n1": "fast"}
        )
        assert failed and f"no experiment with id {wrong}" in texts[0], texts
        failed, texts = await agent.call("update", exp_id=made["id"])
        assert failed and "missing argument 'changes'" in texts[0], texts
        assert "no experiment" not in texts[0], texts
        assert (await agent.json("show", exp_id=made["id"]))["score"] == 1.03

    run_agent(repo, work)


def test_a_step_recorded_on_a_parent_takes_its_operator_dtype_and_env_as_kexp_add_does(
    repo: Path,
) -> None:
    """The record tool is ``kexp add``: with a pid, the operator, dtype and env not given
    are the parent's (the schema does not require them); without a pid, leaving them out
    is a one-line error naming what to give, and nothing is written."""
    store = Store(repo)

    async def work(agent: Agent) -> None:
        listed = await agent.session.list_tools()
        schema = next(tool for tool in listed.tools if tool.name == "record").input_schema
        assert schema["required"] == ["change_summary"], schema["required"]
        parent = await agent.json("record", score=1.05, **record_fields())
        step = await agent.json(
            "record",
            change_summary="Two rows per warp - +2%",
            pid=parent["id"][:10],
            score=1.02,
            measured_against="parent",
            detailed_description="**Key insight**: fewer warps idle",
        )
        made = store.get_experiment(step["id"])
        assert (made.operator_sig, made.dtype_sig, made.env, made.pid) == (
            "csrc/softmax.cu: softmax_kernel",
            "bf16",
            "H100, CUDA 12.4",
            parent["id"],
        )
        assert step["cumulative_score"] == 1.071
        failed, texts = await agent.call(
            "record", change_summary="Vectorized loads - +1%", score=1.01, dtype_sig="bf16"
        )
        assert failed and len(texts) == 1 and "\n" not in texts[0], texts
        assert "give operator_sig" in texts[0] and "or the pid" in texts[0], texts
        assert "dtype_sig and" not in texts[0] and "--" not in texts[0], texts

    run_agent(repo, work)
    assert len(store.list_experiments()) == 2


def test_list_and_show_fields_name_where_an_experiment_was_found(
    shared_repo: Path, tmp_path: Path
) -> None:
    """The list tool's ``fields`` refused ``ref`` and ``refs`` though its rows read
    with ``all_refs`` carry them (trial 18). Now they are fields of a read across refs;
    asked of a read of the working tree alone, the error says to call it with
    ``all_refs`` in the tools' words, not the command's flag."""
    store = Store(shared_repo)
    exp = store.create_experiment(**record_fields(score=1.03, status="done"))
    git(shared_repo, "add", "experiments")
    git(shared_repo, "commit", "-q", "-m", "an experiment")
    git(shared_repo, "push", "-q", "origin", "main")

    async def work(agent: Agent) -> None:
        rows = await agent.json("list", fields=["id", "ref"], all_refs=True)
        assert [(r["id"], r["ref"]) for r in rows] == [(exp.id, "local")], rows
        shown = await agent.json("show", exp_id=exp.id[:10], fields=["refs"], all_refs=True)
        assert shown["refs"] == ["local", "origin/main"], shown  # main: the checkout
        failed, texts = await agent.call("list", fields=["id", "ref"])
        assert failed, texts
        (text,) = texts
        assert "ref: where each experiment was found" in text, text
        assert "all_refs: true" in text and "--all-refs" not in text, text

    run_agent(shared_repo, work)


def test_a_change_read_from_git_is_warned_of_when_another_agent_tried_it(
    tmp_path: Path,
) -> None:
    """The record tool had no ``kexp add --diff-from-git`` (trial): an agent that gave
    no diff recorded no code change, and the tried-before check never ran. With
    ``diff_from_git`` alice's dead end records her uncommitted change; bob, who fetched
    her sync and committed the same change, records his with ``diff_from_git`` against
    the commit he made it on: the reply warns it was tried before, naming hers."""
    from test_sync import clone, make_remote

    remote, base = make_remote(tmp_path)
    alice, bob = clone(remote, tmp_path / "alice"), clone(remote, tmp_path / "bob")
    unrolled = "__global__ void k() {\n#pragma unroll 8\n  for (;;) {}\n}\n"
    slower = {c: [t * 1.2 for t in times] for c, times in BASE.items()}
    (alice / "kernel.cu").write_text(unrolled)
    dead_end = record_fields(change_summary="Unroll the row loop by 8 - -20%", diff_from_git=True)

    async def alice_works(agent: Agent) -> None:
        listed = await agent.session.list_tools()
        described = next(t for t in listed.tools if t.name == "record").description or ""
        assert "diff_from_git" in described, described
        failed, texts = await agent.call(
            "record", baseline=BASE, candidate=slower, code_change="+x", **dead_end
        )
        assert failed and texts[0].endswith(": give code_change or diff_from_git, not both"), texts
        failed, texts = await agent.call(
            "record", baseline=BASE, candidate=slower, base_commit="no-such-rev", **dead_end
        )
        assert failed and len(texts) == 1 and "no-such-rev" in texts[0], texts
        first = await agent.json("record", baseline=BASE, candidate=slower, **dead_end)
        assert first["outcome"] == "regression", first
        dead_end["id"] = first["id"]
        assert (await agent.json("sync", branch="kexp/alice"))["pushed"]

    run_agent(alice, alice_works)
    (mine,) = Store(alice).list_experiments()
    assert mine.id == dead_end["id"] and mine.base_commit == base
    assert "+#pragma unroll 8" in mine.code_change and "experiments/" not in mine.code_change
    git(bob, "fetch", "-q")
    (bob / "kernel.cu").write_text(unrolled)
    git(bob, "commit", "-q", "-am", "unroll the row loop by 8")

    async def bob_works(agent: Agent) -> None:
        failed, texts = await agent.call(
            "record",
            baseline=BASE,
            candidate=slower,
            base_commit=base,
            all_refs=True,
            **record_fields(change_summary="Unroll rows by 8 - -20%", diff_from_git=True),
        )
        assert not failed, texts
        # the same change on the same base and env: "repeat <hers>", to pool as a round
        (warned,) = [t for t in texts[1:] if dead_end["id"] in t]
        assert warned.startswith("kexp: warning: this code_change") and "repeat" in warned

    run_agent(bob, bob_works)
    (his,) = Store(bob).list_experiments()
    assert (his.code_change, his.base_commit) == (mine.code_change, base)


def test_consult_builds_on_the_believable_best_not_a_suspect_one(tmp_path: Path) -> None:
    """The packet an agent reads first (``consult``) names as the current best what
    ``kexp review`` would: not a suspect measurement, which it names beside it."""
    from test_suspect_best import CEILING, team_repo

    repo, made = team_repo(tmp_path)

    async def work(agent: Agent) -> None:
        packet = await agent.json("consult", operator="softmax", format="json")
        assert packet["best"]["id"] == made["unroll"], packet["best"]
        assert [(e["id"], e["suspect"]) for e in packet["suspect_best"]] == [
            (made["skip"], [CEILING])
        ]
        failed, texts = await agent.call("consult", operator="softmax")
        best = texts[0].split("## Current best\n", 1)[1].split("\n## ", 1)[0]
        assert not failed and best.startswith(f"- {made['unroll'][:10]}"), texts[0]
        assert "[suspect: verify correctness] Skip the reduction" in texts[0]

    run_agent(repo, work)
