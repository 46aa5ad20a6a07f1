"""A filter that matches several values, said (trial L, R11): consult's operator and env
are parts of the field, and an SXM5 agent asking for env ``H100`` got the PCIe
machine's tip as its "Current best"; operator ``gemm`` gave a ``batched_gemm`` kernel's
root as the ``gemm_bf16`` campaign's best, nothing saying that two were mixed. Now the
one a filter names exactly (a whole part of the field) is read alone; where several are
left, the packet names each with its own best, and every line names its own."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from conftest import run_kexp

GEMM = "kernels/gemm.cu: gemm_bf16"
BATCHED = "kernels/bgemm.cu: batched_gemm_bf16"
SXM5 = "H100 SXM5 80GB, CUDA 12.4"
PCIE = "H100 PCIe, CUDA 12.4"


def add(repo: Path, summary: str, score: float, *where: str) -> str:
    result = run_kexp(
        "add", "--json", "--summary", summary, "--score", str(score), "--status", "done",
        *where, cwd=repo,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    return str(json.loads(result.stdout)["id"])


def root(operator: str, env: str) -> tuple[str, ...]:
    return ("--measured-against", "reference", "--operator", operator, "--dtype", "bf16",
            "--env", env)  # fmt: skip


def two_machines(repo: Path) -> dict[str, str]:
    """One gemm campaign on each H100 (the PCIe one's tip the higher), and a batched gemm
    root on the SXM5 above the SXM5 gemm's tip."""
    s1 = add(repo, "Tile - +43%", 1.43, *root(GEMM, SXM5))
    s2 = add(repo, "TC - +80%", 1.8, "--pid", s1)
    p1 = add(repo, "Tile - +60%", 1.6, *root(GEMM, PCIE))
    p2 = add(repo, "TC - +90%", 1.9, "--pid", p1)
    b1 = add(repo, "Batched persistent - +190%", 2.9, *root(BATCHED, SXM5))
    return {"sxm5": s2, "pcie": p2, "batched": b1}


def best_line(text: str) -> str:
    return text.split("## Current best\n", 1)[1].splitlines()[0]


def context(repo: Path, *args: str) -> str:
    result = run_kexp("context", "--dtype", "bf16", *args, cwd=repo)
    assert result.returncode == 0, result.stderr
    return result.stdout


def test_an_env_matching_two_machines_names_each_with_its_best(repo: Path) -> None:
    ids = two_machines(repo)
    text = context(repo, "--operator", "gemm_bf16", "--env", "H100")
    (note,) = [line for line in text.splitlines() if line.startswith("'H100' matches")]
    assert f"{PCIE!r} (best 3.0400x {ids['pcie'][:10]}" in note, note
    assert f"{SXM5!r} (best 2.5740x {ids['sxm5'][:10]}" in note, note
    assert "give more of the one you mean (--operator, --dtype or --env)" in note, note
    assert best_line(text).endswith(f"({PCIE})"), best_line(text)  # whose it is, said
    successes = text.split("## Related successes\n", 1)[1].split("\n\n", 1)[0]
    assert f"TC - +80% ({SXM5})" in successes, successes
    data = json.loads(
        run_kexp("context", "--operator", "gemm_bf16", "--env", "H100", "--json", cwd=repo).stdout
    )
    (several,) = data["context"]["several"]
    assert {m["value"]: m["best"] for m in several["matched"]} == {
        PCIE: ids["pcie"],
        SXM5: ids["sxm5"],
    }


def test_the_env_named_exactly_is_read_alone(repo: Path) -> None:
    ids = two_machines(repo)
    s1 = add(repo, "Tile - +20%", 1.2, *root(GEMM, "H100"))  # an env typed short
    s2 = add(repo, "TC - +50%", 1.5, "--pid", s1)
    text = context(repo, "--operator", "gemm_bf16", "--env", "H100")
    assert "matches" not in text.split("Budget:", 1)[0], text
    assert best_line(text).startswith(f"- {s2[:10]}"), best_line(text)
    assert "3 of them for this dtype and env" not in text, text  # 2: the "H100" ones
    successes = text.split("## Related successes", 1)[1]
    assert f"TC - +90% (another env: {PCIE})" in successes, successes
    assert f"TC - +80% (another env: {SXM5})" in successes, successes
    assert ids["pcie"][:10] not in best_line(text)


def test_an_operator_part_of_two_kernels(repo: Path) -> None:
    ids = two_machines(repo)
    # "gemm_bf16" is a part of both, and the whole name of one: that one alone.
    text = context(repo, "--operator", "gemm_bf16", "--env", "H100 SXM5")
    assert best_line(text).startswith(f"- {ids['sxm5'][:10]}"), best_line(text)
    assert "Batched" not in text, text
    # "gemm" names neither: both, each with its best, each line its operator.
    text = context(repo, "--operator", "gemm", "--env", "H100 SXM5")
    (note,) = [line for line in text.splitlines() if line.startswith("'gemm' matches")]
    assert f"{GEMM!r} (best 2.5740x {ids['sxm5'][:10]}" in note, note
    assert f"{BATCHED!r} (best 2.9000x {ids['batched'][:10]}" in note, note
    assert best_line(text).endswith(f"({BATCHED})"), best_line(text)
    assert f"TC - +80% ({GEMM})" in text, text


def test_consult_names_the_envs_in_the_tools_words(repo: Path) -> None:
    pytest.importorskip("mcp")
    from test_mcp import Agent, run_agent

    ids = two_machines(repo)
    replies: list[str] = []

    async def work(agent: Agent) -> None:
        failed, texts = await agent.call("consult", operator="gemm_bf16", env="H100")
        assert not failed, texts
        replies.append(texts[0])

    run_agent(repo, work)
    (note,) = [line for line in replies[0].splitlines() if line.startswith("'H100' matches")]
    assert f"{SXM5!r} (best 2.5740x {ids['sxm5'][:10]}" in note, note
    assert "(operator, dtype or env) to read it alone" in note and "--" not in note, note


def test_top_names_the_env_of_a_best_a_part_of_the_env_matched(repo: Path) -> None:
    """``kexp top --env H100 -n 1`` printed the PCIe machine's tip with no ENV column
    (one row: nothing to tell apart), read by the SXM5 agent as its own best."""
    ids = two_machines(repo)
    for command in ("top", "list"):
        table = run_kexp(command, "--operator", "kernels/gemm.cu", "--env", "H100", "-n", "1",
                         "--sort", "-score", cwd=repo).stdout  # fmt: skip
        header, row = table.splitlines()
        assert "ENV" in header.split() and PCIE in row and ids["pcie"][:10] in row, table
    exact = run_kexp("top", "--env", PCIE, "-n", "1", cwd=repo).stdout
    assert "ENV" not in exact.splitlines()[0].split(), exact  # the whole env: said once


def test_a_dtype_recorded_alone_is_not_mixed_with_a_dtype_it_is_part_of(repo: Path) -> None:
    """``--dtype bf16`` where ``bf16`` and ``bf16,fp8`` are both recorded reads the bf16
    campaign alone (trial K: it counted the bf16,fp8 steps as "here" and named one of
    them the bf16 current best), as ``kexp stats`` counts it."""
    kernel = ("--measured-against", "reference", "--operator", GEMM, "--env", SXM5)
    alone = add(repo, "A - +5%", 1.05, *kernel, "--dtype", "bf16")
    add(repo, "B - +6%", 1.06, *kernel, "--dtype", "bf16,fp8")
    add(repo, "C - -6%", 0.94, *kernel, "--dtype", "bf16,fp8")
    found = json.loads(context(repo, "--operator", GEMM, "--env", SXM5, "--json"))
    assert found["best"]["id"] == alone
    assert found["context"]["experiments_here"] == 1
    assert found["context"]["failures_here"] == 0
