"""A dtype or env asked for that matches none of the operator's experiments (trial G,
repro 04): an agent recorded with ``--detect-env`` (``AMD EPYC (2 cores), gcc ...``) and
consults with the env it would type (``CPU``). The packet said "0 experiment(s) on this
operator" and "Nothing recorded here yet. Start with an A/A run" beside the A/A it had
recorded; an operator typo gets the operators recorded, the closest first. Now the env
(or dtype) gets the same: the packet says none matches and names the operator's, the
closest first, counts the control, and every read that finds nothing warns so (the CLI
on stderr, the MCP tools in their answer)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from conftest import run_kexp

from kexp import Store
from kexp.agents.context import START

OPERATOR = "kernels/softmax.py: softmax"
DETECTED = "AMD EPYC (2 cores), gcc 12.2.0, Python 3.11.7"
OTHER = "MI300X, ROCm 7.0.0"


def add(repo: Path, summary: str, score: float, *extra: str, env: str = DETECTED) -> None:
    result = run_kexp(
        "add", "--summary", summary, "--score", str(score), "--operator", OPERATOR,
        "--dtype", "fp64", "--env", env, "--base-commit", "HEAD", *extra, cwd=repo,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr


@pytest.fixture
def controlled(repo: Path, store: Store) -> Path:
    """A store whose only experiment on the operator is its A/A control."""
    add(repo, "A/A control - noise floor", 1.0, "--tag", "control")
    return repo


def packet(repo: Path, *options: str) -> tuple[str, dict[str, Any]]:
    """The packet's Markdown (its header: the lines before the budget's) and its JSON."""
    asked = ("context", "--operator", "softmax", *options)
    text = run_kexp(*asked, cwd=repo, process=True)
    assert text.returncode == 0 and not text.stderr, text.stderr
    header = text.stdout.split("\nBudget: ")[0]
    data = json.loads(run_kexp(*asked, "--json", cwd=repo).stdout)["context"]
    return header, data


def test_an_env_nobody_recorded_is_said_and_the_recorded_ones_named(controlled: Path) -> None:
    header, data = packet(controlled, "--dtype", "fp64", "--env", "CPU")
    assert "Nothing recorded here yet" not in header, header
    assert "0 experiment(s) on this operator (and 1 A/A control, not counted); " in header
    note = (
        "No experiment on this operator has an env matching 'CPU' (a part of env, in any "
        f"case): its 1 env(s), the closest first: {DETECTED!r} (1 recorded). Give one of "
        "them, or a part of it, as the env."
    )
    assert note in header.splitlines(), header
    assert data["unmatched"] == [note] and data["controls_on_operator"] == 1
    assert data["start"].startswith("If this env is new here, start its campaign with an A/A")
    assert data["start"] in header.splitlines()

    add(controlled, "Reciprocal multiply - +7.8%", 1.078, "--measured-against", "reference")
    add(controlled, "Unrolled by 4 - +2%", 1.02, env=OTHER)
    header, data = packet(controlled, "--env", "rocm 7")  # a part, in any case: matches
    assert "unmatched" not in data and data["experiments_here"] == 1, data
    header, data = packet(controlled, "--env", "EPYC 2")  # its words: the closest first
    assert "2 experiment(s) on this operator (and 1 A/A control, not counted)" in header
    assert f"its 2 env(s), the closest first: {DETECTED!r} (2 recorded), {OTHER!r}" in header


def test_a_dtype_nobody_recorded_on_the_operator_is_said(controlled: Path) -> None:
    header, data = packet(controlled, "--dtype", "bf16", "--env", "EPYC")
    assert data["start"].startswith("If this dtype is new here, start its campaign with")
    assert data["unmatched"] == [
        "No experiment on this operator has a dtype matching 'bf16' (a whole dtype name in "
        "dtype_sig, in any spelling): its 1 dtype(s), the closest first: 'fp64' (1 "
        "recorded). Give one of them, or one of its names, as the dtype."
    ], data
    assert "Nothing recorded here yet" not in header


def test_a_campaign_not_begun_still_starts_with_an_a_a_run(repo: Path, store: Store) -> None:
    """The empty case is unchanged where it is true: nothing recorded on the operator
    (nothing at all), or an env and dtype recorded, but never together."""
    header, data = packet(repo, "--env", "CPU")
    assert data["start"] == START and START in header and "unmatched" not in data
    add(repo, "Unrolled by 4 - +2%", 1.02, env=OTHER)
    add(repo, "fp64 A/A - noise floor", 1.0, "--tag", "control", "--dtype", "fp32")
    header, data = packet(repo, "--dtype", "fp32", "--env", "MI300X")
    assert "unmatched" not in data and data["controls_on_operator"] == 1, data
    assert START in header  # (a cell never measured: its A/A was on another env)


def test_a_read_that_finds_nothing_for_an_unrecorded_env_warns_naming_the_recorded(
    controlled: Path,
) -> None:
    add(controlled, "Reciprocal multiply - +7.8%", 1.078, "--measured-against", "reference")
    result = run_kexp("top", "--operator", "softmax", "--env", "CPU", cwd=controlled, process=True)
    assert result.returncode == 0, result.stderr
    assert result.stderr.splitlines()[:1] == [
        "kexp: warning: no experiment on operator 'softmax' has an env matching 'CPU' (a "
        "part of env, in any case), so nothing was found for it; the closest of the 1 "
        f"env(s) recorded for it: {DETECTED!r} (2 recorded); give one of them, or a part "
        "of it, as the env"
    ], result.stderr
    listed = run_kexp("list", "--dtype", "bf16", cwd=controlled, process=True)
    assert "no experiment recorded has a dtype matching 'bf16'" in listed.stderr
    assert "'fp64' (2 recorded)" in listed.stderr
    found = run_kexp("top", "--operator", "softmax", "--env", "epyc", cwd=controlled)
    assert found.returncode == 0 and "warning" not in found.stderr, found.stderr


def test_the_mcp_tools_warn_of_an_unrecorded_env_too(controlled: Path) -> None:
    pytest.importorskip("mcp")
    from test_mcp import Agent, run_agent

    async def work(agent: Agent) -> None:
        failed, texts = await agent.call("top", operator="softmax", env="CPU")
        assert not failed and json.loads(texts[0]) == [], texts
        assert texts[1].startswith(
            "kexp: warning: no experiment on operator 'softmax' has an env matching 'CPU'"
        ), texts
        assert DETECTED in texts[1]
        failed, texts = await agent.call("consult", operator="softmax", env="CPU")
        assert not failed and "Nothing recorded here yet" not in texts[0], texts
        assert "has an env matching 'CPU'" in texts[0] and "1 A/A control" in texts[0]

    run_agent(controlled, work)
