"""The step score a lineage shows (trial P, findings 05 and 10): ``kexp tree``'s step
column and the MCP ``tree`` tool's rows give each experiment's step over its parent's
code, also for one measured against the reference on a parent (an old caller's child,
an import): its score over the parent's cumulative score, and none ("-", null) when
the parent measured nothing (failed, buggy) — the column showed the cumulative score
again, the rows gave it as a +29% step. A Δ of +10% or more keeps its space."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from conftest import run_kexp

DESCRIPTION = "**Approach**: a\n\n**Why it worked/failed**: c\n\n**Key insight**: d"


def add(repo: Path, summary: str, score: float, *extra: str) -> str:
    """``kexp add`` of one experiment of the attention campaign; its id."""
    done = run_kexp(
        "add", "--summary", summary, "--score", str(score), "--operator", "k.py: attn",
        "--dtype", "bf16", "--env", "H100", "--description", DESCRIPTION, "--json", *extra,
        cwd=repo,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    return str(json.loads(done.stdout)["id"])


@pytest.fixture
def lineage(repo: Path) -> dict[str, str]:
    """A root (1.20 over the original code); under it a step measured against the
    reference (1.50: a 1.25 step), a step over its parent (1.10) and a buggy step; under
    the reference-measured one a failed run; under the failed run and under the buggy
    step, a step each measured against the reference (1.60, 1.30)."""
    ids = {"root": add(repo, "root - +20%", 1.20, "--measured-against", "reference")}
    ids["ref"] = add(repo, "ref child - +25%", 1.5, "--pid", ids["root"],
                     "--measured-against", "reference")  # fmt: skip
    ids["step"] = add(repo, "step child - +10%", 1.1, "--pid", ids["root"])
    ids["failed"] = add(repo, "timeout - x", 0, "--pid", ids["ref"], "--status", "failed")
    ids["on_failed"] = add(repo, "ref child of failed - x", 1.6, "--pid", ids["failed"],
                           "--measured-against", "reference")  # fmt: skip
    ids["buggy"] = add(repo, "buggy - x", 0.8, "--pid", ids["root"], "--buggy", "--error",
                       "wrong output")  # fmt: skip
    ids["on_buggy"] = add(repo, "ref child of buggy - x", 1.3, "--pid", ids["buggy"],
                          "--measured-against", "reference")  # fmt: skip
    return ids


def tree_columns(repo: Path) -> dict[str, tuple[str, str, str]]:
    """``kexp tree``'s (cumulative, step, Δ) of each experiment, by its 10-character id."""
    printed = run_kexp("tree", cwd=repo, env={"COLUMNS": "200"})
    assert printed.returncode == 0, printed.stderr
    columns = {}
    for line in printed.stdout.splitlines():
        words = line.lstrip("│├└─ *").split()
        if words and len(words[0]) == 10:
            delta = line.split("Δ", 1)[1].split()[0] if "Δ" in line else ""
            columns[words[0]] = (words[1], words[2], delta)
    return columns


def test_the_step_column_of_a_reference_measured_step_over_a_parent_that_measured_nothing(
    repo: Path, lineage: dict[str, str]
) -> None:
    columns = tree_columns(repo)
    shown = {name: columns[exp_id[:10]] for name, exp_id in lineage.items()}
    assert shown["ref"] == ("1.5000", "1.2500", "+25.00%")  # 1.50 over the root's 1.20
    assert shown["step"][:2] == ("1.3200", "1.1000")
    # no cumulative score below them to take a step over: no step said
    assert shown["on_failed"][:2] == ("1.6000", "-")
    assert shown["on_buggy"][:2] == ("1.3000", "-")
    printed = run_kexp("tree", cwd=repo, env={"COLUMNS": "200"}).stdout
    assert "Δ +25.00%" in printed and "Δ +10.00%" in printed, printed


def test_a_delta_of_ten_percent_or_more_keeps_its_space_in_a_narrow_terminal(
    repo: Path, lineage: dict[str, str]
) -> None:
    printed = run_kexp("tree", cwd=repo, env={"COLUMNS": "80"}).stdout
    (line,) = [line for line in printed.splitlines() if lineage["ref"][:10] in line]
    assert "Δ  +25%" in line, printed  # as wide as Δ +1.9%: the summary keeps its room


def test_the_mcp_tree_rows_give_the_step_score_the_tree_prints(
    repo: Path, lineage: dict[str, str]
) -> None:
    pytest.importorskip("mcp")
    from test_mcp import Agent, run_agent

    replies: dict[str, Any] = {}

    async def work(agent: Agent) -> None:
        replies["tree"] = await agent.json("tree", operator="attn")

    run_agent(repo, work)
    rows = {row["id"]: row for row in replies["tree"]["rows"]}
    columns = tree_columns(repo)
    for name, exp_id in lineage.items():
        row, step = rows[exp_id], columns[exp_id[:10]][1]
        assert (row["score"] is None) == (step == "-"), (name, row, step)
        if row["score"] is not None:
            assert f"{row['score']:.4f}" == step, (name, row, step)
    ref = rows[lineage["ref"]]
    assert ref["score"] == pytest.approx(1.25) and ref["cumulative_score"] == 1.5
    # what the file holds, and what it is over, said beside the step
    assert (ref["measured_against"], ref["recorded_score"]) == ("reference", 1.5), ref
    on_failed = rows[lineage["on_failed"]]
    assert on_failed["score"] is None and on_failed["recorded_score"] == 1.6, on_failed
    assert "recorded_score" not in rows[lineage["step"]], rows[lineage["step"]]
    assert rows[lineage["root"]]["measured_against"] == "reference"
