"""A read asked about an operator no experiment was recorded on (a typo: ``sofmax``)
answered an empty list, which reads as "no failures here", while ``kexp context`` said
that no recorded operator matches. Every read that takes an operator filter says so
too, naming the closest operators recorded, as a note (a warning: the answer stays
what it is), through the command, the library and the MCP tools alike; an operator
that is recorded, with nothing to show, is said nothing of."""

from __future__ import annotations

import json
import warnings
from pathlib import Path

import pytest
from conftest import run_kexp

from kexp import Store
from kexp.agents.lessons import lessons
from kexp.measure.record import record_iteration

SOFTMAX = "kernels/softmax.py: softmax_kernel"
RMS_NORM = "csrc/rms_norm.cu: rms_norm_kernel"
SAID = "no recorded operator matches 'sofmax'"


@pytest.fixture
def recorded(repo: Path) -> Path:
    """A store with a failure on softmax and an improvement on rms_norm."""
    store = Store(repo)
    common = {"dtype_sig": "fp16", "env": "H100"}
    store.create_experiment(
        change_summary="fp16 accumulate - wrong output", operator_sig=SOFTMAX, score=0,
        status="failed", is_buggy=True, error_message="NaN", **common,
    )  # fmt: skip
    store.create_experiment(
        change_summary="vectorized loads - +4%", operator_sig=RMS_NORM, score=1.04,
        status="done", **common,
    )  # fmt: skip
    return repo


#: Each read command that takes --operator, as it is asked for JSON.
READS = [
    ["lessons", "--json"],
    ["top", "--json"],
    ["list", "--json"],
    ["tree", "--json"],
    ["stats", "--json"],
    ["similar", "--text", "accumulate in fp32", "--json"],
]


@pytest.mark.parametrize("argv", READS, ids=[argv[0] for argv in READS])
def test_each_read_command_notes_an_operator_no_experiment_has(
    recorded: Path, argv: list[str]
) -> None:
    """The answer is printed as before (JSON, exit 0); one warning line says that no
    recorded operator matches and names the closest first; a recorded operator with
    nothing to show (rms_norm has no lessons) is no note."""
    typo = run_kexp(*argv, "--operator", "sofmax", cwd=recorded)
    assert typo.returncode == 0, typo.stderr
    json.loads(typo.stdout)
    (line,) = [line for line in typo.stderr.splitlines() if SAID in line]
    assert line.startswith("kexp: warning: "), typo.stderr
    assert SOFTMAX in line and line.index(SOFTMAX) < line.index(RMS_NORM), line
    for known in ("softmax", "RMS_NORM"):
        right = run_kexp(*argv, "--operator", known, cwd=recorded)
        assert right.returncode == 0 and "no recorded operator" not in right.stderr, right.stderr


def test_the_library_notes_it_as_a_warning(recorded: Path) -> None:
    store = Store(recorded)
    with pytest.warns(UserWarning, match=SAID):
        assert lessons(store, operator="sofmax") == {
            "buggy": [], "failed": [], "regression": [], "marginal": [], "interference": []
        }  # fmt: skip
    with pytest.warns(UserWarning, match=SOFTMAX):
        assert store.top_experiments(operator="sofmax") == []
    with warnings.catch_warnings():
        warnings.filterwarnings("error", message="no recorded operator")
        assert store.top_experiments(operator="softmax") == []  # only a buggy one: no note
        assert lessons(store, operator="rms_norm")["regression"] == []
        # Recording timings on a new operator counts its iterations: no note of it.
        record_iteration(
            store, baseline={"n1": [10.0, 10.1, 10.2]}, candidate={"n1": [9.9, 10.0, 9.8]},
            change_summary="first try on a new kernel", operator_sig="new.cu: k", dtype_sig="fp16",
            env="H100",
        )  # fmt: skip


def test_the_mcp_tools_note_it_after_their_answer(recorded: Path) -> None:
    pytest.importorskip("mcp")
    from test_mcp import BASE, CAND, Agent, record_fields, run_agent

    said: dict[str, list[str]] = {}

    async def work(agent: Agent) -> None:
        for tool, extra in (("lessons", {}), ("top", {}), ("list", {}), ("tree", {}),
                            ("similar", {"text": "accumulate in fp32"})):  # fmt: skip
            failed, texts = await agent.call(tool, operator="sofmax", **extra)
            assert not failed, texts
            json.loads(texts[0])
            said[tool] = texts[1:]
        # Timings: the record counts the iterations on its operator, new here.
        failed, texts = await agent.call("record", baseline=BASE, candidate=CAND,
                                         **record_fields())  # fmt: skip
        assert not failed, texts
        said["record"] = texts[1:]

    run_agent(recorded, work)
    for tool in ("lessons", "top", "list", "tree", "similar"):
        (note,) = [text for text in said[tool] if SAID in text]
        assert note.startswith("kexp: warning: ") and SOFTMAX in note, (tool, note)
    assert not any("no recorded operator" in text for text in said["record"]), said
