"""A memoryless agent B takes over agent A's campaign and asks kexp in other words than A
recorded (trial O): ``--dtype bfloat16`` (or ``torch.bfloat16``) for A's ``bf16``, the
env ``H100-SXM5`` for ``H100 SXM5 80GB, CUDA 12.4``. The packet found no current best and
advised a new campaign with an A/A run. Now the usual spellings of a dtype, and an env's
``-`` for a space and a leading vendor's name, read A's campaign (the CLI's packet and
the MCP consult); a value still matches exactly alone (``H100`` is not ``H100 PCIe``)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from conftest import run_kexp

from kexp import Store

OPERATOR = "kernels/attn/fused_attn.py: fused_attention_fwd"
ENV = "H100 SXM5 80GB, CUDA 12.4"
#: The header's keys left out of its JSON when None.
HEADER = ("start", "unmatched", "several", "unread")


def add(root: Path, summary: str, score: float, *extra: str, **fields: str) -> str:
    given = {"operator": OPERATOR, "dtype": "bf16", "env": ENV, **fields}
    options = [item for name, value in given.items() for item in (f"--{name}", value)]
    done = run_kexp(
        "add", "--json", "--summary", summary, "--score", str(score), *options, "--description",
        "**Approach**: a\n\n**Key insight**: d", *extra, cwd=root,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    return str(json.loads(done.stdout)["id"])


@pytest.fixture
def campaign(repo: Path, store: Store) -> tuple[Path, str]:
    """A's three steps (bf16, the H100 SXM5 env), and the id of its best tip."""
    root = add(repo, "Tiling 128x64 - +15%", 1.15, "--measured-against", "reference")
    step = add(repo, "BLOCK_N 64 -> 128 - +10%", 1.10, "--pid", root)
    return repo, add(repo, "exp2 softmax - +3%", 1.03, "--pid", step)


def consult(root: Path, *options: str) -> tuple[str, dict[str, Any]]:
    """The packet for the campaign's operator: its Markdown (a real process), and its
    JSON with the header's keys (``context``) beside the sections' (None when absent)."""
    asked = ("context", "--operator", "fused_attention_fwd", "--text", "next step", *options)
    text = run_kexp(*asked, cwd=root, process=True)
    assert text.returncode == 0, text.stderr
    data = json.loads(run_kexp(*asked, "--json", cwd=root).stdout)
    return text.stdout, {key: None for key in HEADER} | data.pop("context") | data


def consulted_by_mcp(root: Path, dtype: str = "bf16", env: str = "H100") -> str:
    """The MCP consult's answer (the SDK's own client) for the campaign's operator."""
    from test_mcp import Agent, run_agent

    answers: list[str] = []

    async def work(agent: Agent) -> None:
        failed, texts = await agent.call(
            "consult", operator="fused_attention_fwd", dtype=dtype, env=env
        )
        assert not failed, texts
        answers.append(texts[0])

    run_agent(root, work)
    return answers[0]


@pytest.mark.parametrize("dtype", ["bfloat16", "torch.bfloat16", "tl.bfloat16", "BF16"])
def test_a_dtype_in_torch_or_triton_words_reads_the_campaign(
    campaign: tuple[Path, str], dtype: str
) -> None:
    root, best = campaign
    text, data = consult(root, "--dtype", dtype, "--env", "H100")
    assert data["experiments_here"] == 3 and data["best"]["id"] == best, data
    assert data["start"] is None and data["unmatched"] is None, data
    assert "start its campaign with an A/A run" not in text and best[:10] in text
    assert "dtype bf16:" not in text and f"dtype {dtype}:" not in text  # it improved


def test_the_mcp_consult_reads_torch_bfloat16_as_bf16(campaign: tuple[Path, str]) -> None:
    pytest.importorskip("mcp")
    root, best = campaign
    answer = consulted_by_mcp(root, dtype="torch.bfloat16", env="H100-SXM5")
    assert "3 of them for this dtype and env: 3 improved" in answer, answer
    assert best[:10] in answer and "A/A run" not in answer


def test_spellings_of_one_dtype_are_one_campaign_and_exact_values_stay_alone(
    repo: Path, store: Store
) -> None:
    add(repo, "Tiling - +15%", 1.15, dtype="bfloat16")
    add(repo, "Unroll - +4%", 1.04, dtype="torch.bfloat16")
    add(repo, "FP8 cast - +30%", 1.3, dtype="bf16 -> fp8")
    text, data = consult(repo, "--dtype", "bf16")
    assert data["experiments_here"] == 2 and data["several"] is None, data
    assert data["best"]["change_summary"] == "Tiling - +15%" and "matches 2 dtypes" not in text
    # An alias is a part of a value as its short name is: fp8 of "bf16 -> fp8"; the
    # other fp8 (e5m2), better here, is another dtype.
    add(repo, "E5M2 cast - +40%", 1.4, dtype="torch.float8_e5m2")
    _, data = consult(repo, "--dtype", "float8_e4m3fn")
    assert data["best"]["change_summary"] == "FP8 cast - +30%", data
    # The table: each usual name is its short one, with or without its module.
    from kexp.storage.operators import DTYPE_SPELLINGS, spelled

    for short, names in DTYPE_SPELLINGS.items():
        for name in names:
            assert spelled("dtype_sig", f"torch.{name}") == spelled("dtype_sig", name) == short


def test_an_env_with_dashes_or_the_vendor_reads_it_and_another_gpu_name_gets_a_hint(
    campaign: tuple[Path, str],
) -> None:
    root, best = campaign
    for env in ("H100-SXM5", "NVIDIA H100 SXM5", "h100_sxm5 80gb"):
        _, data = consult(root, "--dtype", "bf16", "--env", env)
        assert data["experiments_here"] == 3 and data["best"]["id"] == best, (env, data)
    # nvidia-smi's name of the GPU is its model's (kexp.core.gpunames): it reads the env
    # recorded in the model's words; another GPU's name gets the hint naming it.
    _, data = consult(root, "--dtype", "bf16", "--env", "NVIDIA H100 80GB HBM3")
    assert data["experiments_here"] == 3 and data["best"]["id"] == best, data
    text, data = consult(root, "--dtype", "bf16", "--env", "NVIDIA A100-SXM4-80GB")
    assert data["best"] is None and data["experiments_here"] == 0
    (note,) = data["unmatched"]
    assert f"the closest first: {ENV!r} (3 recorded)" in note and note in text
    # The exact-value rule holds: H100 is recorded exactly, so H100 PCIe is not read.
    add(root, "PCIe tiling - +90%", 1.9, env="H100 PCIe")
    add(root, "H100 tiling - +5%", 1.05, env="H100")
    _, data = consult(root, "--dtype", "bf16", "--env", "H100")
    assert data["best"]["change_summary"] == "H100 tiling - +5%", data
