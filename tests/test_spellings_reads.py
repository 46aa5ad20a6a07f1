"""Agent B names A's kernel as most tools print it, ``path.py:function`` with no space
(A recorded ``path.py: function``), and its dtype in PyTorch's words (trial O, repros
02 and 03): ``kexp context`` found no recorded operator, and ``kexp top``, ``list``,
``stats``, ``lessons`` and ``similar`` nothing. Now every read's ``operator``, ``dtype``
and ``env`` filters read a value as ``kexp context`` does, in kexp's spelling of both
(:func:`kexp.storage.operators.part_of`): the CLI and the MCP tools alike."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from conftest import run_kexp
from test_spellings import add, consult

from kexp import Store

#: A's kernel as most tools print it, its dtype and env in other words than A's.
ASKED = (
    "--operator", "kernels/attn/fused_attn.py:fused_attention_fwd",
    "--dtype", "torch.bfloat16", "--env", "H100-SXM5",
)  # fmt: skip
FAILURE = "BLOCK_N 256 - failed (register spills)"


@pytest.fixture
def campaign(repo: Path, store: Store) -> tuple[Path, str]:
    """A's two steps and a failure on the second; the id of its best tip."""
    root = add(repo, "Tiling 128x64 - +15%", 1.15, "--measured-against", "reference")
    best = add(repo, "BLOCK_N 64 -> 128 - +10%", 1.10, "--pid", root)
    add(repo, FAILURE, 0, "--pid", best, "--status", "failed", "--buggy", "--error",
        "ptxas: 1184 bytes spill stores; out of resources")  # fmt: skip
    return repo, best


def test_the_packet_reads_path_colon_function_as_the_operator(
    campaign: tuple[Path, str],
) -> None:
    root, best = campaign
    text, data = consult(root, *ASKED[:2], "--dtype", "bf16", "--env", "H100")
    assert "No recorded operator matches" not in text, text
    assert data["experiments_here"] == 3 and data["best"]["id"] == best, data
    assert [f["change_summary"] for f in data["failures"]] == [FAILURE]


def test_every_read_reads_the_spellings_as_the_packet_does(campaign: tuple[Path, str]) -> None:
    root, best = campaign
    top = run_kexp("top", *ASKED, "--json", cwd=root, process=True)
    assert top.returncode == 0 and not top.stderr, top.stderr
    assert json.loads(top.stdout)[0]["id"] == best
    listed = json.loads(run_kexp("list", *ASKED, "--json", cwd=root).stdout)
    assert len(listed) == 3, listed
    stats = json.loads(run_kexp("stats", *ASKED, "--json", cwd=root).stdout)
    assert "fused_attention_fwd" in json.dumps(stats) and '"total": 3' in json.dumps(stats)
    lessons = run_kexp("lessons", *ASKED, cwd=root).stdout
    assert FAILURE in lessons, lessons
    similar = run_kexp("similar", "--text", "BLOCK_N 256", *ASKED, cwd=root)
    assert FAILURE in similar.stdout and not similar.stderr, similar.stderr


def test_the_mcp_tools_read_them_alike(campaign: tuple[Path, str]) -> None:
    pytest.importorskip("mcp")
    from test_mcp import Agent, run_agent

    root, best = campaign
    where = {
        "operator": "kernels/attn/fused_attn.py:fused_attention_fwd",
        "dtype": "bfloat16",
        "env": "NVIDIA H100 SXM5",
    }
    answers: dict[str, str] = {}

    async def work(agent: Agent) -> None:
        for tool in ("consult", "lessons", "top"):
            failed, texts = await agent.call(tool, **where)
            assert not failed, texts
            answers[tool] = "\n".join(texts)

    run_agent(root, work)
    assert best[:10] in answers["consult"] and "No recorded operator" not in answers["consult"]
    assert FAILURE in answers["consult"] and FAILURE in answers["lessons"]
    assert best in answers["top"], answers["top"]
