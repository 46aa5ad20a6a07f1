"""One question, one current best (trial M, repro 05): ``kexp context --env H100`` reads
the env recorded exactly as ``H100`` alone, while ``kexp top``/``list``/``stats`` with the
same filters also read ``H100 PCIe`` (and dtype ``bf16`` read ``bf16,fp8``): two current
bests. Now every read's filters read as context does, a line naming what else the filter
is a part of; a filter no value names exactly still reads every value it is a part of."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from conftest import run_kexp

from kexp import Store


def add(repo: Path, summary: str, score: float, dtype: str, env: str) -> None:
    result = run_kexp(
        "add", "--summary", summary, "--score", str(score), "--operator", "k.cu: gemm",
        "--dtype", dtype, "--env", env, cwd=repo,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr


def test_top_and_context_name_one_best_and_top_says_what_it_left(repo: Path, store: Store) -> None:
    add(repo, "A - +5%", 1.05, "bf16", "H100")
    add(repo, "P - +90%", 1.9, "bf16", "H100 PCIe")
    add(repo, "F - +70%", 1.7, "bf16,fp8", "H100")
    asked = ("--operator", "gemm", "--dtype", "bf16", "--env", "H100")
    top = run_kexp("top", *asked, "--json", cwd=repo, process=True)
    assert top.returncode == 0, top.stderr
    best = json.loads(top.stdout)[0]["change_summary"]
    context = json.loads(run_kexp("context", *asked, "--json", cwd=repo).stdout)["best"]
    assert best == context["change_summary"] == "A - +5%", (best, context)
    assert "env 'H100' read alone" in top.stderr and "'H100 PCIe', not read" in top.stderr
    assert "dtype 'bf16' read alone" in top.stderr and "'bf16,fp8', not read" in top.stderr
    listed = run_kexp("list", *asked, "--json", cwd=repo, process=True)
    assert [e["change_summary"] for e in json.loads(listed.stdout)] == ["A - +5%"]


def test_a_part_no_value_names_exactly_reads_them_all_without_a_word(
    repo: Path, store: Store
) -> None:
    add(repo, "P - +90%", 1.9, "bf16", "H100 PCIe")
    add(repo, "S - +50%", 1.5, "bf16", "H100 SXM")
    top = run_kexp("top", "--env", "h100", "--json", cwd=repo, process=True)
    assert top.returncode == 0 and not top.stderr, top.stderr
    assert {e["change_summary"] for e in json.loads(top.stdout)} == {"P - +90%", "S - +50%"}


def test_context_says_what_the_exact_value_left_out_as_top_does(repo: Path, store: Store) -> None:
    """Trial M05's leftover: ``kexp context`` (and the MCP consult, which is it) read the
    exact value alone as top does but said nothing of ``H100 PCIe`` and ``bf16,fp8``:
    now the packet says the very lines top warns, in Markdown, JSON and the tool's."""
    pytest.importorskip("mcp")
    from test_mcp import Agent, run_agent

    add(repo, "A - +5%", 1.05, "bf16", "H100")
    add(repo, "P - +90%", 1.9, "bf16", "H100 PCIe")
    add(repo, "F - +70%", 1.7, "bf16,fp8", "H100")
    asked = ("--operator", "gemm", "--dtype", "bf16", "--env", "H100")
    top = run_kexp("top", *asked, cwd=repo, process=True)
    notes = [line.removeprefix("kexp: warning: ") for line in top.stderr.splitlines()]
    assert len(notes) == 2 and all("read alone" in note for note in notes), top.stderr
    text = run_kexp("context", *asked, cwd=repo, process=True)
    assert text.returncode == 0 and not text.stderr, text.stderr
    for note in notes:
        assert f"\n{note}.\n" in text.stdout, text.stdout
    packet = json.loads(run_kexp("context", *asked, "--json", cwd=repo, process=True).stdout)
    assert packet["context"]["read_alone"] == notes, packet["context"]

    async def work(agent: Agent) -> None:
        failed, texts = await agent.call("consult", operator="gemm", dtype="bf16", env="H100")
        assert not failed, texts
        for note in notes:
            assert note in texts[0], texts

    run_agent(repo, work)
