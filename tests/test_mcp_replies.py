"""What the MCP tools say to an agent that has arguments, not flags: advice names the
tools' arguments (``all_refs: true``), never the command's options (``--all-refs``);
``show`` says which ref holds an experiment the working tree does not; ``lessons``
across refs answers from one read of the store. The SDK's own client talks to the real
server (a subprocess, or in-process where a read is counted), on real git repositories
(a bare repository as the remote, two clones)."""

from __future__ import annotations

import ast
import json
import re
import shutil
from pathlib import Path
from typing import Any

import pytest
from conftest import git, run_kexp

pytest.importorskip("mcp")
import anyio
import click
from mcp import Client
from test_mcp import BASE, CAND, Agent, record_fields, run_agent
from test_sync import clone, make_remote

from kexp import Store
from kexp.cli.mcp import build_server
from kexp.core.advice import ADVICE, for_tools
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
    Store(alice).create_experiment(base_commit=base, score=0.95, status="done", **record_fields())

    async def work(agent: Agent) -> None:
        lessons = await agent.json("lessons")
        assert [set(e) & {"ref", "refs"} for e in lessons["regression"]] == [set()]

    run_agent(alice, work)


# --- advice in the tools' words ----------------------------------------------------------

KEXP = Path(__file__).resolve().parent.parent / "kexp"
#: Other programs' options in kexp's messages (git fetch --unshallow, ncu --csv), and
#: the server's own command line (kexp mcp --root: how it is started): no tool's.
OTHER_PROGRAM = re.compile(
    r"\b(?:git|pip|pytest|ncu|nsys|nvcc|nvidia-smi|rocm-smi|amd-smi|cc|kexp mcp)\b[^;,()'\"]*"
)


def kexp_flags() -> set[str]:
    """Every option of the ``kexp`` command and its subcommands (``--all-refs``, ...)."""
    from kexp.cli.main import main

    flags: set[str] = set()
    commands: list[click.Command] = [main]
    while commands:
        command = commands.pop()
        for param in command.params:
            flags |= {o for o in (*param.opts, *param.secondary_opts) if o.startswith("--")}
        if isinstance(command, click.Group):
            context = click.Context(command)
            commands += [command.get_command(context, n) for n in command.list_commands(context)]  # type: ignore[misc]
    return flags


FLAGS = kexp_flags()
FLAG = re.compile(r"(?<![\w-])(--[a-z][\w-]*)(?![\w=-])")


def flags_named(text: str) -> list[str]:
    """The options of ``kexp`` that ``text`` names (other programs' left out)."""
    return [flag for flag in FLAG.findall(OTHER_PROGRAM.sub("", text)) if flag in FLAGS]


def messages(tree: ast.Module) -> list[tuple[int, str]]:
    """The string constants of a module that are no docstrings, with their lines (an
    f-string's literal parts joined)."""
    skipped = {  # docstrings, and the parts of f-strings (taken whole)
        id(node.body[0].value)
        for node in ast.walk(tree)
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef))
        and node.body
        and isinstance(node.body[0], ast.Expr)
    }
    skipped |= {id(v) for n in ast.walk(tree) if isinstance(n, ast.JoinedStr) for v in n.values}
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.JoinedStr):
            parts = [v.value for v in node.values if isinstance(v, ast.Constant)]
            found.append((node.lineno, " ".join(str(p) for p in parts)))
        elif (
            isinstance(node, ast.Constant)
            and isinstance(node.value, str)
            and id(node) not in skipped
            and not re.fullmatch(r"--[\w-]+", node.value)  # an argument list's "--root"
        ):
            found.append((node.lineno, node.value))
    return found


#: Messages naming an option that reach no tool, and why.
NO_TOOL = {
    ("kexp/core/fields.py", "--baseline"): "a field's note in kexp new's editor template",
    ("kexp/core/fields.py", "--candidate"): "a field's note in kexp new's editor template",
    ("kexp/format/legacykeys.py", "--format"): "names kexp export, which no tool is",
    ("kexp/measure/intake.py", "--format"): "a document given to kexp add (record: arguments)",
    ("kexp/output/parquet.py", "--format"): "kexp export, which no tool is",
    ("kexp/storage/store.py", "--set"): "a delete refused, and no tool deletes",
    ("kexp/storage/whereabouts.py", "--branch"): "a second kexp rm's advice, and no tool deletes",
}


def test_every_library_message_naming_a_kexp_option_has_the_tools_words() -> None:
    """A message of the library (anything below kexp/ but the command's own modules)
    that names an option of ``kexp`` takes it from :mod:`kexp.core.advice`, where the
    MCP tools' words stand beside it."""
    found = []
    for path in sorted(KEXP.rglob("*.py")):
        relative = path.relative_to(KEXP.parent).as_posix()
        if relative.startswith("kexp/cli/") or relative == "kexp/core/advice.py":
            continue
        tree = ast.parse(path.read_text(encoding="utf-8"))
        found += [
            f"{relative}:{line}: {flag}"
            for line, text in messages(tree)
            for flag in flags_named(text)
            if (relative, flag) not in NO_TOOL
        ]
    assert found == []


#: A placeholder of the command's options (``--error-file FILE``): no tool takes a file.
PLACEHOLDER = re.compile(r"\bFILE\b")


def test_no_library_message_names_an_options_placeholder_outside_the_advice() -> None:
    """A message that explains a placeholder of the command's words (the mismatched
    configurations' "(FILE: the error it printed)", after the advice) reached the MCP
    tools as it was, naming a FILE no tool has: it belongs to the :class:`Advice`."""
    found = []
    for path in sorted(KEXP.rglob("*.py")):
        relative = path.relative_to(KEXP.parent).as_posix()
        if relative.startswith("kexp/cli/") or relative == "kexp/core/advice.py":
            continue
        tree = ast.parse(path.read_text(encoding="utf-8"))
        found += [
            f"{relative}:{line}: {text!r}"
            for line, text in messages(tree)
            if PLACEHOLDER.search(text)
        ]
    assert found == []


def test_each_advice_in_the_tools_words_names_no_option() -> None:
    for advice in ADVICE:
        fields = dict.fromkeys(re.findall(r"\{(\w+)\}", advice.command), "6749f3a0c2")
        said = f"first, {advice.say(**fields)}; then"
        # The command's words name an option, or a command (kexp list shows the ids).
        assert flags_named(advice.say(**fields)) or "kexp " in advice.command, advice
        assert for_tools(said) == f"first, {advice.tools.format(**fields)}; then"
        assert flags_named(for_tools(said)) == [], advice
        assert not PLACEHOLDER.search(advice.tools), advice


def test_each_advice_in_the_tools_words_names_tools_the_server_has(repo: Path) -> None:
    """The tools' words name only tools an MCP client can call: the server's list (the
    advice to remove an experiment named a "remove tool" no server has)."""
    listed: list[set[str]] = []

    async def work() -> None:
        async with Client(build_server(repo)) as client:
            listed.append({tool.name for tool in (await client.list_tools()).tools})

    anyio.run(work)
    (tools,) = listed
    for advice in ADVICE:
        named = re.findall(r"\bthe (\w+) tool\b", advice.tools)
        named += re.findall(r"\bcall(?:ing)? (?!this\b)(\w+)\b", advice.tools)
        assert set(named) <= tools, (advice.tools, tools)


def test_each_advice_naming_a_tool_gives_what_the_tool_requires(repo: Path) -> None:
    """Advice followed exactly is not refused for a missing argument: the trial's
    summary warning advised the update tool with exp_id and changes, and the tool
    required a reason too."""
    listed: list[dict[str, list[str]]] = []

    async def work() -> None:
        async with Client(build_server(repo)) as client:
            tools = (await client.list_tools()).tools
            listed.append({tool.name: tool.input_schema.get("required", []) for tool in tools})

    anyio.run(work)
    (required,) = listed
    for advice in ADVICE:
        for name in re.findall(r"\bthe (\w+) tool with\b", advice.tools):
            missing = [arg for arg in required[name] if arg not in advice.tools]
            assert missing == [], (advice.tools, missing)


def no_option(texts: list[str]) -> str:
    """The texts of an answer as one, checked to name no option of ``kexp``."""
    said = "\n".join(texts)
    assert flags_named(said) == [], said
    return said


def test_an_agents_errors_and_warnings_name_the_tools_arguments(tmp_path: Path) -> None:
    """Each error and warning that advises an option of ``kexp`` says, through the MCP
    server, the tool and argument to give instead; the command keeps its words."""
    alice, _, base = two_agents(tmp_path)
    ncu = Path(__file__).parent / "timing_files" / "ncu_details.csv"
    said: dict[str, str] = {}

    async def work(agent: Agent) -> None:
        async def error(name: str, **arguments: Any) -> str:
            failed, texts = await agent.call(name, **arguments)
            assert failed and len(texts) == 1, texts
            return no_option(texts)

        said["remote"] = await error("sync", remote="upstream")
        said["unknown id"] = await error("show", exp_id="0123456789", refs=["origin/*"])
        said["buggy"] = await error("record", is_buggy=True, score=0, **record_fields())
        said["ncu"] = await error("record", baseline=str(ncu), candidate=str(ncu),
                                  **record_fields())  # fmt: skip
        fewer = {c: t for c, t in CAND.items() if c != "r128_c1024"}
        said["fewer"] = await error("record", baseline=BASE, candidate=fewer, **record_fields())
        first = await agent.json("record", score=1.03, base_commit=base, **record_fields())
        said["interval"] = await error(
            "update", exp_id=first["id"], changes={"score_ci": [1.1, 1.2]}, reason="ci"
        )
        said["remeasure"] = await error("remeasure", exp_id=first["id"], baseline=BASE,
                                        candidate=CAND)  # fmt: skip
        # The same change measured again: a warning naming the remeasure tool.
        fields = record_fields(code_change="--- a/k.cu\n+++ b/k.cu\n@@ -1 +1 @@\n-a\n+b\n")
        await agent.json("record", score=1.02, base_commit=base, **fields)
        failed, texts = await agent.call("record", score=1.04, base_commit=base, **fields)
        assert not failed and len(texts) == 2, texts
        said["repeat"] = no_option(texts[1:])
        # A change measured on an uncommitted kernel: a warning naming base_commit.
        (alice / "kernel.cu").write_text("__global__ void k2() {}\n")
        failed, texts = await agent.call(
            "record", score=1.01, **record_fields(change_summary="Warp-shuffle, kernel.cu")
        )
        assert not failed and len(texts) == 2, texts
        said["dirty"] = no_option(texts[1:])
        git(alice, "checkout", "-q", "--detach")
        said["detached"] = await error("sync")

    run_agent(alice, work)
    assert 'remote: "NAME"' in said["remote"]
    assert "all_refs: true" in said["unknown id"]
    assert 'record with error_message: "TEXT"' in said["buggy"]
    assert 'record with profiling_file: "PATH"' in said["ncu"]
    assert "is_buggy: true, error_message (the error it printed)" in said["fewer"]
    assert not PLACEHOLDER.search(said["fewer"]), said["fewer"]
    assert re.search(r'update tool with exp_id: "[0-9a-f]{16}" and changes: \{"score_ci": \[\]\}',
                     said["interval"])  # fmt: skip
    assert re.search(
        r'update tool with exp_id: "[0-9a-f]{16}", changes: \{"score": SCORE\} and a reason',
        said["remeasure"],
    )
    assert re.search(r'remeasure tool with exp_id: "[0-9a-f]{16}"', said["repeat"])
    assert 'record with base_commit: "HEAD"' in said["dirty"]
    assert 'branch: "kexp/<name>"' in said["detached"]
    # The command keeps its words.
    printed = run_kexp("sync", "--remote", "upstream", cwd=alice)
    assert printed.returncode != 0 and "(--remote NAME)" in printed.stderr, printed.stderr


def test_an_interval_refusal_names_the_tools_and_the_experiment(tmp_path: Path) -> None:
    """A score corrected with an interval that does not hold it: the update tool's
    refusal advises the remeasure tool and the update tool with this experiment's id,
    never the command (``kexp remeasure ID``) nor a placeholder id."""
    alice, _, base = two_agents(tmp_path)
    said: dict[str, str] = {}

    async def work(agent: Agent) -> None:
        first = await agent.json(
            "record", baseline=BASE, candidate=CAND, base_commit=base, **record_fields()
        )
        said["id"] = first["id"]
        failed, texts = await agent.call(
            "update",
            exp_id=first["id"],
            changes={"score": 1.3, "score_ci": [1.1, 1.2]},
            reason="swapped",
        )
        assert failed and len(texts) == 1, texts
        said["refusal"] = texts[0]

    run_agent(alice, work)
    refusal, exp_id = said["refusal"], said["id"]
    assert "kexp remeasure" not in refusal and "kexp update" not in refusal, refusal
    assert "ID" not in refusal.replace(exp_id, ""), refusal
    assert f'the remeasure tool with exp_id: "{exp_id}"' in refusal, refusal
    assert f'the update tool with exp_id: "{exp_id}" and changes: {{"score_ci": []}}' in refusal


def test_timings_in_too_small_a_unit_advise_the_record_tools_unit(repo: Path) -> None:
    """do_bench's milliseconds recorded through the record tool as microseconds (the unit
    given; with none, they are refused: tests/test_unit_refused.py): the
    warning told the agent to "remove the experiment (kexp rm)" and record "(unit='ms')",
    a command and a Python call, and no tool removes. It names the record tool's unit
    argument, and says plainly that removing is the command's, in the checkout; the
    command keeps its words."""
    base = {"r64": [0.0142, 0.0141, 0.0143], "r128": [0.0281, 0.0282, 0.0280]}
    cand = {"r64": [0.0136, 0.0137, 0.0135], "r128": [0.0270, 0.0271, 0.0269]}
    said: list[str] = []

    async def work(agent: Agent) -> None:
        failed, texts = await agent.call("record", baseline=base, candidate=cand, unit="us",
                                         **record_fields())  # fmt: skip
        assert not failed, texts
        said.extend(t for t in texts[1:] if "1000x too short" in t)

    run_agent(repo, work)
    (warning,) = said
    assert 'call record again with unit: "ms"' in warning, warning
    assert "unit='" not in warning and "kexp add" not in warning, warning
    assert "no tool removes one: kexp rm ID in the checkout" in warning, warning
    assert warning.count("kexp rm") == 1, warning
    (repo / "b.json").write_text(json.dumps(base), encoding="utf-8")
    (repo / "c.json").write_text(json.dumps(cand), encoding="utf-8")
    printed = run_kexp("add", "--summary", "the same - x", "--operator", "k.cu: k",
                       "--dtype", "bf16", "--env", "H100", "--baseline", "b.json",
                       "--candidate", "c.json", "--unit", "us", cwd=repo)  # fmt: skip
    assert printed.returncode == 0, printed.stderr
    assert "kexp rm ID) and record them again in the unit ms (--unit ms; unit='ms' in Python)" in (
        " ".join(printed.stderr.split())
    ), printed.stderr


def test_a_round_remeasured_in_another_unit_advises_the_remeasure_tools_unit(
    repo: Path,
) -> None:
    """An experiment recorded from microseconds, remeasured through the remeasure tool
    with do_bench's milliseconds and no unit: the refusal ended "unit='ms' in Python",
    a Python call an MCP client cannot make. It names the tool's unit argument; the
    command keeps its words."""
    base = {"r64": [14.2, 14.1, 14.3], "r128": [28.1, 28.2, 28.0]}
    cand = {"r64": [13.6, 13.7, 13.5], "r128": [27.0, 27.1, 26.9]}
    in_ms = {side: {c: [t / 1000 for t in ts] for c, ts in d.items()} for side, d in
             (("baseline", base), ("candidate", cand))}  # fmt: skip
    said: list[str] = []

    async def work(agent: Agent) -> None:
        made = await agent.json("record", baseline=base, candidate=cand, **record_fields())
        failed, texts = await agent.call("remeasure", exp_id=made["id"], **in_ms)
        assert failed and len(texts) == 1, texts
        said.extend([texts[0], made["id"]])

    run_agent(repo, work)
    refusal, exp_id = said
    assert "read in ms instead of us they agree" in refusal, refusal
    assert 'give the unit ms (call remeasure again with unit: "ms")' in refusal, refusal
    assert "in Python" not in refusal and "unit='" not in refusal, refusal
    assert "--unit" not in refusal, refusal
    for side, data in in_ms.items():
        (repo / f"{side}.json").write_text(json.dumps(data), encoding="utf-8")
    printed = run_kexp("remeasure", exp_id, "--baseline", "baseline.json", "--candidate",
                       "candidate.json", cwd=repo)  # fmt: skip
    assert printed.returncode != 0
    assert "give the unit ms (--unit ms; unit='ms' in Python)" in " ".join(
        printed.stderr.split()
    ), printed.stderr


def test_a_linked_store_names_the_servers_root(tmp_path: Path) -> None:
    """A store whose experiments/ is a link is refused, saying how to start the server
    on the real folder (no tool's argument can)."""
    real = tmp_path / "real"
    (real / "experiments").mkdir(parents=True)
    linked = tmp_path / "linked"
    linked.mkdir()
    (linked / "experiments").symlink_to(real / "experiments")

    async def work(agent: Agent) -> None:
        failed, texts = await agent.call("top")
        assert failed and "start the server on the folder" in texts[0], texts
        assert "kexp mcp --root DIR" in texts[0]

    run_agent(linked, work)


def test_consult_says_how_to_read_more_with_the_tools(tmp_path: Path) -> None:
    """A context packet that left entries out says which tools read more, and a budget
    too small names the argument."""
    shutil.copytree(Path(__file__).resolve().parent.parent / "experiments",
                    tmp_path / "experiments")  # fmt: skip
    packets: list[str] = []

    async def work(agent: Agent) -> None:
        failed, texts = await agent.call("consult", operator="cache", budget=10)
        assert failed and no_option(texts)
        smallest = int(re.search(r"give budget (\d+) or more", texts[0]).group(1))  # type: ignore[union-attr]
        failed, texts = await agent.call("consult", operator="cache", budget=smallest)
        assert not failed, texts
        packets.append(no_option(texts))
        assert len(texts[0]) <= smallest * 4  # the tools' words fit the budget too

    run_agent(tmp_path, work)
    assert "read more: similar (text: PLAN); lessons (operator: OP)" in packets[0]


# --- show: where an experiment the working tree does not hold is -------------------------


def test_show_says_which_ref_holds_an_experiment_not_in_the_working_tree(
    tmp_path: Path,
) -> None:
    """Bob fetched what Alice synced: show of her experiment in his working tree says,
    as ``kexp show`` does, that it is on her branch, and how to read it there (the
    argument, not the flag); read so, it says where it came from."""
    alice, bob, base = two_agents(tmp_path)
    hers = Store(alice).create_experiment(
        base_commit=base, score=1.03, status="done", **record_fields()
    )
    sync(Store(alice), branch="kexp/alice")
    git(bob, "fetch", "-q")
    said: list[str] = []

    async def work(agent: Agent) -> None:
        failed, texts = await agent.call("show", exp_id=hers.id[:10])
        assert failed and len(texts) == 1, texts
        said.append(no_option(texts))
        shown = await agent.json("show", exp_id=hers.id[:10], all_refs=True)
        assert (shown["id"], shown["ref"]) == (hers.id, "origin/kexp/alice")
        failed, texts = await agent.call("show", exp_id="0123456789")  # on no ref
        assert failed and "it is on" not in texts[0] and "0123456789" in texts[0], texts
        # Where the ids are, in the tools' words: the list tool, no command.
        assert "(the list tool shows the ids)" in texts[0] and "kexp" not in texts[0], texts

    run_agent(bob, work)
    assert "it is on origin/kexp/alice, not in the working tree" in said[0], said
    assert "read it there: call this tool again with all_refs: true" in said[0], said
    printed = run_kexp("show", hers.id[:10], cwd=bob)
    assert printed.returncode != 0
    assert (
        "it is on origin/kexp/alice, not in the working tree: read it there: the same "
        "command with --all-refs"
    ) in " ".join(printed.stderr.split())


def test_the_advice_to_remeasure_what_main_holds_is_followed_with_the_tools(
    tmp_path: Path,
) -> None:
    """Alice's and Bob's pull requests are merged (squashed); Alice fetched. Her agent
    records Bob's measurement again with all_refs: the warning says, in the tools'
    words, to call sync (which merges origin/main, where his experiment is) and then
    the remeasure tool, not ``git merge origin/main`` (which refuses: the file she
    published is untracked in her checkout); both calls, made as said, succeed."""
    from test_advice_followed import DIFF
    from test_sync import record
    from test_sync_landed import land

    from kexp.measure.record import record_iteration

    remote, base = make_remote(tmp_path)
    alice, bob = clone(remote, tmp_path / "alice"), clone(remote, tmp_path / "bob")
    hers = record(alice, base, "Unrolled by 4 - +1.9%")
    sync(Store(alice), branch="kexp/alice")
    fields = record_fields(code_change=DIFF)
    his = record_iteration(Store(bob), base_commit=base, baseline=BASE, candidate=CAND,
                           **fields).id  # fmt: skip
    sync(Store(bob), branch="kexp/bob")
    for branch in ("kexp/alice", "kexp/bob"):
        land(remote, tmp_path / "forge", branch, "squashed")
    git(alice, "fetch", "-q")
    mine = Path(str(hers.path)).read_bytes()
    said: list[str] = []

    async def work(agent: Agent) -> None:
        measured = {c: [t * 1.002 for t in times] for c, times in CAND.items()}  # her own run
        failed, texts = await agent.call("record", base_commit=base, baseline=BASE,
                                         candidate=measured, all_refs=True, **fields)  # fmt: skip
        assert not failed and len(texts) == 2, texts
        said.append(no_option(texts[1:]))
        Store(alice).delete_experiment(json.loads(texts[0])["id"])  # "instead"
        synced = await agent.json("sync")
        assert not synced["committed"], synced
        later = {c: [t * 1.01 for t in times] for c, times in BASE.items()}
        added = await agent.json("remeasure", exp_id=his, baseline=later, candidate=CAND)
        assert added["id"] == his

    run_agent(alice, work)
    assert (
        f'call sync (it merges origin/main), then the remeasure tool with exp_id: "{his}"'
        in (said[0])
    ), said
    assert "git merge" not in said[0]
    assert Path(str(hers.path)).read_bytes() == mine


def test_a_parent_on_another_agents_side_branch_is_brought_in_as_the_tool_says(
    tmp_path: Path,
) -> None:
    """Alice's agent records a step on Bob's, which only his side branch holds (Alice's
    published file is untracked in her checkout and alike there, so ``git merge``
    refuses): the record tool's error names the copy of his file, which, run as
    written in her checkout, lets the same call succeed."""
    from test_advice_followed import bob_started_from_alices_landed_work, follow, softmax

    _, alice, bob, base, _ = bob_started_from_alices_landed_work(tmp_path)
    his = softmax(bob, base, "Vectorize loads with float4 - +10%")
    sync(Store(bob), branch="kexp/bob")
    git(alice, "fetch", "-q")
    fields = record_fields(pid=his, measured_against="parent", score=1.02, base_commit=base)
    said: list[str] = []

    async def work(agent: Agent) -> None:
        failed, texts = await agent.call("record", **fields)
        assert failed and len(texts) == 1, texts
        said.append(no_option(texts))
        follow(texts[0], alice)
        made = await agent.json("record", **fields)
        assert Store(alice).get_experiment(made["id"]).pid == his

    run_agent(alice, work)
    assert "git restore --source origin/kexp/bob -- experiments/" in said[0], said
    assert "git merge" not in said[0]


def test_every_read_of_an_id_says_which_ref_holds_it_as_show_does(tmp_path: Path) -> None:
    """Bob fetched what Alice synced and asks for her experiment (the id she gave him)
    with every read that takes an id, not only show: ``kexp tree ID``, ``kexp log ID``,
    ``kexp similar ID`` and the tree and similar tools each say, as show does, that it is
    on her branch and how to read it there (the tools in their arguments' words; log, how
    to read its history there)."""
    alice, bob, base = two_agents(tmp_path)
    hers = Store(alice).create_experiment(
        base_commit=base, score=1.03, status="done", **record_fields()
    )
    sync(Store(alice), branch="kexp/alice")
    git(bob, "fetch", "-q")
    where = "it is on origin/kexp/alice, not in the working tree"
    for command in ("show", "tree", "log", "similar"):
        printed = run_kexp(command, hers.id[:10], cwd=bob)
        said = " ".join(printed.stderr.split())
        assert printed.returncode != 0 and "no experiment" in said, (command, said)
        # kexp log names the read of the history there (tests/test_advice_followed.py).
        advice = (
            f"read its history there with kexp log --rev origin/kexp/alice {hers.id[:10]}"
            if command == "log"
            else "read it there: the same command with --all-refs"
        )
        assert f"{where}: {advice}" in said, (command, said)
    said_by_tools: dict[str, str] = {}

    async def work(agent: Agent) -> None:
        for tool in ("show", "tree", "similar"):
            failed, texts = await agent.call(tool, exp_id=hers.id[:10])
            assert failed and len(texts) == 1, (tool, texts)
            said_by_tools[tool] = no_option(texts)
        tree = await agent.json("tree", exp_id=hers.id[:10], all_refs=True, brief=False)
        assert tree[0]["id"] == hers.id, tree

    run_agent(bob, work)
    for tool, said in said_by_tools.items():
        assert f"{where}: read it there: call this tool again with all_refs: true" in said, (
            tool,
            said,
        )


def refused_sync(root: Path) -> str:
    """The sync tool's one-line refusal in ``root`` (checked to name no option)."""
    said: list[str] = []

    async def work(agent: Agent) -> None:
        failed, texts = await agent.call("sync")
        assert failed and len(texts) == 1, texts
        said.append(no_option(texts))

    run_agent(root, work)
    return said[0]


def test_sync_of_an_invalid_experiment_says_to_fix_it_in_the_tools_words(
    tmp_path: Path,
) -> None:
    """An agent's experiment hand-edited to a bad score, then the sync tool: refused in
    one line naming the file and the problem, saying to fix it and call sync again (no
    option of ``kexp``); nothing pushed."""
    alice, _, base = two_agents(tmp_path)
    first = Store(alice).create_experiment(base_commit=base, score=1.03, **record_fields())
    git(alice, "add", "experiments")
    git(alice, "commit", "-q", "-m", "first")
    sync(Store(alice))
    assert first.path is not None
    first.path.write_text(first.path.read_text().replace("score: 1.03", "score: fast"))
    said = [refused_sync(alice)]
    assert first.path.name in said[0] and "score" in said[0]
    assert "call sync again" in said[0] and "update tool" in said[0]
    assert git(tmp_path / "remote.git", "rev-parse", "main") == git(alice, "rev-parse", "HEAD")


def test_every_tool_that_filters_by_outcome_or_status_names_each_one(tmp_path: Path) -> None:
    """The top tool told a client its outcome filter took "improvement, marginal,
    regression, interference, buggy, pending": no ``failed``, the outcome of a timed-out
    run. Each tool's argument names (in its description or its schema's choices) every
    outcome and status kexp has (one list each)."""
    import anyio
    from mcp import Client

    from kexp.cli.mcp import build_server
    from kexp.core.model import OUTCOMES, STATUSES

    (tmp_path / "experiments").mkdir()
    described: dict[tuple[str, str], str] = {}

    async def ask() -> None:
        async with Client(build_server(tmp_path)) as client:
            for tool in (await client.list_tools()).tools:
                properties = tool.input_schema.get("properties", {})
                for name in ("outcome", "status"):
                    if name in properties:
                        described[tool.name, name] = json.dumps(properties[name])

    anyio.run(ask)
    assert {tool for tool, name in described if name == "outcome"} >= {"top", "list"}
    for (tool, name), text in described.items():
        named = set(re.findall(r"[a-z]+", text))
        assert named >= set(OUTCOMES if name == "outcome" else STATUSES), (tool, name, text)


def test_a_first_sync_to_an_empty_remote_says_to_fix_it_in_the_tools_words(
    tmp_path: Path,
) -> None:
    """A new, empty remote (no branch, no ``origin/HEAD``): sync checks the whole store,
    and refused an invalid file telling an MCP client to run commands it does not have
    ("kexp validate lists every problem, then run kexp sync again"). It says it in the
    tools' words; nothing is pushed."""
    from conftest import init_repo

    remote = tmp_path / "remote.git"
    git(tmp_path, "init", "-q", "--bare", "-b", "main", str(remote))
    alice = init_repo(tmp_path / "alice")
    (alice / "experiments").mkdir()
    git(alice, "remote", "add", "origin", str(remote))
    base = git(alice, "rev-parse", "HEAD")
    made = Store(alice).create_experiment(base_commit=base, score=1.03, **record_fields())
    assert made.path is not None
    made.path.write_text(made.path.read_text().replace("score: 1.03", "score: fast"))
    said = [refused_sync(alice)]
    assert made.path.name in said[0] and "call sync again" in said[0], said
    assert "kexp " not in said[0].replace("kexp sync did nothing", ""), said
    assert git(remote, "for-each-ref") == ""


def test_a_recorded_step_answers_the_cumulative_score_its_chain_reaches(tmp_path: Path) -> None:
    """An agent records step after step on its parent: the reply said the step's score
    alone (1.03), not where the campaign stands (1.12 x 1.03 = 1.1536 over the
    reference). The record tool and ``kexp add --json`` answer one record: the
    cumulative score, or null and why (a crash has none); the CLI's text after timings
    says it too."""
    alice, _, base = two_agents(tmp_path)
    replies: list[dict[str, Any]] = []

    async def work(agent: Agent) -> None:
        root = await agent.json("record", score=1.12, base_commit=base, **record_fields())
        step = await agent.json(
            "record", score=1.03, pid=root["id"], base_commit=base, **record_fields()
        )
        crash = await agent.json(
            "record", score=0, status="failed", is_buggy=True, error_message="illegal address",
            pid=step["id"], base_commit=base, **record_fields(),
        )  # fmt: skip
        replies.extend([root, step, crash])

    run_agent(alice, work)
    root, step, crash = replies
    assert (root["cumulative_score"], step["cumulative_score"]) == (1.12, 1.1536)
    assert crash["cumulative_score"] is None and crash["cumulative_reason"] == "it is buggy"
    truth = {e.id: e.cumulative_score for e in Store(alice).list_experiments()}
    assert [r["cumulative_score"] for r in replies] == [truth[r["id"]] for r in replies]
    fields = record_fields()
    flags = ["--operator", fields["operator_sig"], "--dtype", "bf16", "--env", fields["env"]]
    printed = run_kexp(
        "add", "--summary", "Unroll by 2 - +1%", "--score", "1.01", "--pid", step["id"],
        "--base-commit", base, *flags, "--json", cwd=alice,
    )  # fmt: skip
    added = json.loads(printed.stdout)
    assert set(added) == set(step) and added["cumulative_score"] == 1.165136
    (tmp_path / "base.json").write_text(json.dumps(BASE), encoding="utf-8")
    (tmp_path / "cand.json").write_text(json.dumps(CAND), encoding="utf-8")
    measured = run_kexp(
        "add", "--summary", "Unroll by 4 - faster", "--pid", step["id"], "--base-commit", base,
        "--baseline", str(tmp_path / "base.json"), "--candidate", str(tmp_path / "cand.json"),
        *flags, cwd=alice,
    )  # fmt: skip
    assert measured.returncode == 0, measured.stderr
    exp = Store(alice).get_experiment(measured.stdout.split()[1])
    assert f"; cumulative {exp.cumulative_score:.4f} over the reference" in measured.stdout


def test_a_step_on_a_parent_given_a_score_by_hand_is_written_measured_against_the_parent(
    tmp_path: Path,
) -> None:
    """A score given by hand with a parent (``kexp add --pid X --score S``, the record
    tool): the file was written without measured_against, then kexp validate warned of
    it and asked for an update. It is written as timings write it: a step over the
    parent, unless told ``reference``; a run that measured nothing is left alone."""
    alice, _, base = two_agents(tmp_path)
    said: dict[str, list[str]] = {}
    ids: dict[str, str] = {}

    async def work(agent: Agent) -> None:
        root = await agent.json("record", score=1.1, base_commit=base, **record_fields())
        failed, texts = await agent.call(
            "record", score=1.03, pid=root["id"], base_commit=base, **record_fields()
        )
        assert not failed, texts
        said["tools"] = texts[1:]
        ids["step"] = json.loads(texts[0])["id"]

    run_agent(alice, work)
    assert said["tools"] == []  # nothing to settle
    store = Store(alice)
    assert store.get_experiment(ids["step"]).measured_against == "parent"
    fields = record_fields()
    flags = ["--operator", fields["operator_sig"], "--dtype", "bf16", "--env", fields["env"]]
    added = run_kexp(
        "add", "--summary", "Unroll - +1%", "--score", "1.01", "--pid", ids["step"],
        "--base-commit", base, *flags, cwd=alice,
    )  # fmt: skip
    assert added.returncode == 0 and "warning" not in added.stderr, added.stderr
    child = added.stdout.split()[1].rstrip(":")
    assert store.get_experiment(child).measured_against == "parent"
    assert "measured-against-missing" not in run_kexp("validate", cwd=alice).stdout
    # A document that names its pid is recorded as it says (an export, recorded back, is
    # the same file): left out, and warned of with the update that settles it.
    document = json.dumps({**fields, "change_summary": "Unroll 3 - +1%", "score": 1.01,
                           "pid": child, "base_commit": base})  # fmt: skip
    as_said = run_kexp("add", cwd=alice, input=document)
    said_id = as_said.stdout.split()[1].rstrip(":")
    assert store.get_experiment(said_id).measured_against == ""
    assert f"kexp update {said_id} --set measured_against=parent" in as_said.stderr
    told = run_kexp(
        "add", "--summary", "Unroll 2 - +1%", "--score", "1.01", "--pid", child,
        "--measured-against", "reference", "--base-commit", base, *flags, cwd=alice,
    )  # fmt: skip
    told_id = told.stdout.split()[1].rstrip(":")
    assert store.get_experiment(told_id).measured_against == "reference"
    crash = run_kexp(
        "add", "--summary", "Split-K - crash", "--score", "0", "--status", "failed", "--buggy",
        "--error", "illegal address", "--pid", child, "--base-commit", base, *flags, cwd=alice,
    )  # fmt: skip
    assert crash.returncode == 0 and "measured_against" not in crash.stderr, crash.stderr
    assert store.get_experiment(crash.stdout.split()[1].rstrip(":")).measured_against == ""
    nothing = run_kexp(
        "add", "--summary", "Unroll 16 - timed out", "--score", "0", "--pid", child,
        "--base-commit", base, *flags, cwd=alice,
    )  # fmt: skip
    (said_once,) = [line for line in nothing.stderr.splitlines() if "warning" in line]
    assert "measured nothing" in said_once and "measured_against" not in said_once


def test_a_run_on_a_base_commit_the_code_repository_lacks_is_warned_when_recorded(
    tmp_path: Path,
) -> None:
    """A base commit the code repository does not hold (a commit of another repository,
    one never fetched, a typo): the file was written without a word and kexp validate
    (CI, the review) warned of it later, once per experiment. The record says it at
    once, in validate's words, with the fix (fetch it, or set KEXP_CODE_REPO); a known
    base commit is not warned, and one validate calls an error is refused."""
    alice, _, base = two_agents(tmp_path)
    elsewhere = "0123456789abcdef0123456789abcdef01234567"
    said: dict[str, list[str]] = {}

    async def work(agent: Agent) -> None:
        failed, texts = await agent.call("record", score=1.1, base_commit=base, **record_fields())
        assert not failed and len(texts) == 1, texts
        # (another change: the same summary again would be tried before, warned too)
        failed, texts = await agent.call(
            "record",
            score=1.05,
            base_commit=elsewhere,
            **record_fields(change_summary="Warp-shuffle reduction, two rows a warp"),
        )
        assert not failed, texts
        said["tools"] = texts[1:]

    run_agent(alice, work)
    (warning,) = said["tools"]
    assert f"base commit {elsewhere} is not in the code repository" in warning, warning
    assert "KEXP_CODE_REPO" in warning and flags_named(warning) == [], warning
    fields = record_fields()
    flags = ["--operator", fields["operator_sig"], "--dtype", "bf16", "--env", fields["env"]]
    added = run_kexp(
        "add", "--summary", "Unroll - +1%", "--score", "1.01", "--base-commit", elsewhere,
        *flags, cwd=alice,
    )  # fmt: skip
    assert added.returncode == 0, added.stderr
    (line,) = [x for x in added.stderr.splitlines() if elsewhere in x]
    assert line.startswith("kexp: warning: ") and added.stdout.split()[1] in line, line
    validated = run_kexp("validate", cwd=alice).stdout
    assert validated.count("warning[base-commit-unknown]") == 2, validated
    quiet = run_kexp(
        "add", "--summary", "Unroll 2 - +1%", "--score", "1.01", "--base-commit", base,
        *flags, cwd=alice,
    )  # fmt: skip
    assert quiet.returncode == 0 and "warning" not in quiet.stderr, quiet.stderr
    # A value validate calls an error (a tree, not a commit) is refused: nothing written.
    files = sorted((alice / "experiments").rglob("*.md"))
    tree = git(alice, "rev-parse", "HEAD^{tree}")
    refused = run_kexp(
        "add", "--summary", "Unroll 3 - +1%", "--score", "1.01", "--base-commit", tree,
        *flags, cwd=alice,
    )  # fmt: skip
    assert refused.returncode != 0 and refused.stderr.count("\n") == 1, refused.stderr
    assert "not recorded" in refused.stderr and "names a tree, not a commit" in refused.stderr
    assert sorted((alice / "experiments").rglob("*.md")) == files


def test_every_piece_of_advice_is_said_in_the_tools_words() -> None:
    """Each :class:`Advice` of kexp/core/advice.py is in the table the MCP server says
    messages through (one left out reached an MCP client in the command's words:
    ``kexp sync --branch``)."""
    from kexp.core import advice

    defined = {name for name, value in vars(advice).items() if isinstance(value, advice.Advice)}
    listed = {name for name in defined if getattr(advice, name) in advice.ADVICE}
    assert defined - listed == set()
