"""A ``--kernel`` that picks no single kernel of an ``ncu --csv`` profiling file names
that file (trial P, finding 07): the error said ``<profiling info>: the kernel 'kernel'
matches 2 kernels``, where the nsys case names its file (``base.csv: ...``). The user
ran ``kexp add --profiling-file ncu.csv --kernel ...``; an agent, the MCP ``record``
tool with ``profiling_file``."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from conftest import run_kexp
from test_timings_misread import CAMPAIGN, files

NCU = Path(__file__).parent / "timing_files" / "ncu_details.csv"


@pytest.mark.parametrize(
    ("kernel", "said"),
    [
        ("kernel", "ncu.csv: the kernel 'kernel' matches 2 kernels"),
        ("nope", "ncu.csv: no kernel named 'nope'"),
    ],
)
def test_kexp_add_names_the_profiling_file_its_kernel_was_not_found_in(
    repo: Path, kernel: str, said: str
) -> None:
    shutil.copy(NCU, repo / "ncu.csv")
    done = run_kexp(
        "add", "--summary", "Fused mean - +4%", *CAMPAIGN, "--score", "1.04",
        "--profiling-file", "ncu.csv", "--kernel", kernel, cwd=repo, process=True,
    )  # fmt: skip
    assert done.returncode != 0 and "Traceback" not in done.stderr, done.stderr
    assert len(done.stderr.strip().splitlines()) == 1, done.stderr
    assert done.stderr.startswith(f"kexp: error: {said}"), done.stderr
    assert files(repo) == []


def test_the_record_tool_names_the_profiling_file(repo: Path) -> None:
    pytest.importorskip("mcp")
    from test_mcp import Agent, record_fields, run_agent

    shutil.copy(NCU, repo / "ncu.csv")
    answers: dict[str, tuple[bool, list[str]]] = {}

    async def work(agent: Agent) -> None:
        answers["ambiguous"] = await agent.call(
            "record", score=1.04, profiling_file="ncu.csv", kernel="kernel", **record_fields()
        )

    run_agent(repo, work)
    failed, (refusal,) = answers["ambiguous"]
    assert failed and "ncu.csv: the kernel 'kernel' matches 2 kernels" in refusal, refusal
    assert files(repo) == []
