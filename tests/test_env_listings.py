"""One operator timed on two GPUs, as an agent on one of them reads the store: the
listings that rank both machines' steps in one list say which env each is on (kexp top,
the MCP top tool, kexp tree), and consult with no env names the env of its A/A and says
that each env has its own best."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from conftest import run_kexp
from test_mcp import Agent, run_agent

from kexp import Store
from kexp.core.errors import ControlWarning
from kexp.measure.record import record_iteration

OP = "kernels/softmax.py: softmax_kernel"
H100 = "H100 SXM, CUDA 12.4"
MI300X = "MI300X, ROCm 6.2"


def add(repo: Path, *options: str) -> str:
    """``kexp add --json`` in ``repo``: the id recorded."""
    done = run_kexp(
        "add", "--json", "--operator", OP, "--dtype", "fp16", "--description", "x",
        *options, cwd=repo,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    return str(json.loads(done.stdout)["id"])


def two_gpus(repo: Path) -> tuple[str, str]:
    """An H100 step (1.32) and an MI300X one (1.50), each against the reference."""
    h100 = add(repo, "--summary", "H100 online softmax - +32%", "--score", "1.32", "--env", H100)
    mi300x = add(repo, "--summary", "MI300X split rows - +50%", "--score", "1.5", "--env", MI300X)
    return h100, mi300x


def test_top_shows_each_steps_env_when_it_ranks_two_gpus(repo: Path) -> None:
    h100, mi300x = two_gpus(repo)
    shown = run_kexp("top", "--operator", "softmax", cwd=repo).stdout.splitlines()
    assert "ENV" in shown[0], shown
    first, second = shown[1], shown[2]
    assert mi300x[:10] in first and "MI300X" in first, shown
    assert h100[:10] in second and "H100" in second, shown
    records = json.loads(run_kexp("top", "--json", "--brief", cwd=repo).stdout)
    assert [r["env"] for r in records] == [MI300X, H100]
    full = json.loads(run_kexp("top", "--json", cwd=repo).stdout)
    assert [r["env"] for r in full] == [MI300X, H100]


def test_top_of_one_gpu_keeps_its_columns(repo: Path) -> None:
    add(repo, "--summary", "H100 online softmax - +32%", "--score", "1.32", "--env", H100)
    add(repo, "--summary", "H100 split rows - +40%", "--score", "1.4", "--env", H100)
    shown = run_kexp("top", cwd=repo).stdout.splitlines()
    assert "ENV" not in shown[0], shown


def test_the_mcp_top_tool_says_each_steps_env(repo: Path) -> None:
    two_gpus(repo)

    async def work(agent: Agent) -> None:
        ranked = await agent.json("top", operator="softmax")
        assert [r["env"] for r in ranked] == [MI300X, H100]

    run_agent(repo, work)


def test_tree_marks_a_step_measured_on_another_env_than_its_parent(repo: Path) -> None:
    root = add(repo, "--summary", "Tiling - +30%", "--score", "1.3", "--env", H100)
    same = add(repo, "--summary", "Unroll - +5%", "--score", "1.05", "--pid", root, "--env", H100)
    other = add(
        repo, "--summary", "Rows - +4%", "--score", "1.04", "--pid", root,
        "--env", MI300X, "--measured-against", "reference",
    )  # fmt: skip
    lines = run_kexp("tree", cwd=repo, env={"COLUMNS": "80"}).stdout.splitlines()
    line = {exp: next(x for x in lines if exp[:10] in x) for exp in (root, same, other)}
    assert "[env: MI300X, ROCm 6.2]" in line[other], lines
    assert "env:" not in line[root] and "env:" not in line[same], lines


def timings(repo: Path, ratio: float) -> list[str]:
    """``--baseline`` and ``--candidate`` files: the candidate ``ratio`` times faster,
    each config's samples 0.1% apart (an interval about 0.2% wide)."""
    base = {f"c{i}": [0.020 * (1 + 0.001 * j) for j in range(-5, 6)] for i in range(3)}
    # (in another order: a run of its own, never a copy of the baseline's samples)
    cand = {k: [x / ratio for x in reversed(v)] for k, v in base.items()}
    (repo / "base.json").write_text(json.dumps(base), encoding="utf-8")
    (repo / "cand.json").write_text(json.dumps(cand), encoding="utf-8")
    return ["--baseline", "base.json", "--candidate", "cand.json", "--unit", "ms"]


def biased_control(repo: Path) -> None:
    """An H100 A/A whose interval leaves out 1 (1.031 [1.029, 1.033]): biased."""
    add(
        repo, "--summary", "A/A - noise", "--env", H100, "--tag", "control",
        *timings(repo, 1.031),
    )  # fmt: skip


def test_context_with_no_env_names_the_aa_env_and_the_envs_of_the_operator(repo: Path) -> None:
    biased_control(repo)
    two_gpus(repo)
    packet = run_kexp("context", "--operator", "softmax", cwd=repo).stdout
    aa = next(line for line in packet.splitlines() if line.startswith("A/A"))
    assert aa.startswith(f"A/A on {H100!r}: 1.031"), aa
    assert "biased" in aa
    assert "Measured on 2 envs" in packet and MI300X in packet, packet
    assert "kexp context --env ENV" in packet
    # One env asked for: its own A/A, no word of the others.
    mine = run_kexp("context", "--operator", "softmax", "--env", H100, cwd=repo).stdout
    assert "A/A on this env: 1.031" in mine and "Measured on" not in mine, mine

    async def work(agent: Agent) -> None:
        failed, texts = await agent.call("consult", operator="softmax")
        assert not failed, texts
        assert f"A/A on {H100!r}" in texts[0] and "Measured on 2 envs" in texts[0]
        assert "call consult with env" in texts[0] and "--env" not in texts[0], texts[0]

    run_agent(repo, work)


def test_recording_a_biased_aa_warns_at_once_on_every_write_path(repo: Path) -> None:
    done = run_kexp(
        "add", "--summary", "A/A - noise", "--operator", OP, "--dtype", "fp16",
        "--env", H100, "--tag", "control", *timings(repo, 1.031), cwd=repo,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert "warning: control" in done.stderr and "biased" in done.stderr, done.stderr
    assert "fix it and time the A/A again" in done.stderr
    # An unbiased A/A (its interval holds 1) is recorded without a word of bias.
    quiet = run_kexp(
        "add", "--summary", "A/A - noise", "--operator", OP, "--dtype", "fp16",
        "--env", MI300X, "--tag", "control", *timings(repo, 1.0), cwd=repo,
    )  # fmt: skip
    assert quiet.returncode == 0 and "biased" not in quiet.stderr, quiet.stderr
    timings(repo, 1.032)  # timed again: other samples
    with pytest.warns(ControlWarning, match="biased"):
        record_iteration(
            Store(repo), change_summary="A/A again - noise", operator_sig=OP, dtype_sig="fp16",
            env=H100, tags=["control"], baseline=repo / "base.json",
            candidate=repo / "cand.json", unit="ms",
        )  # fmt: skip

    timings(repo, 1.033)

    async def work(agent: Agent) -> None:
        failed, texts = await agent.call(
            "record", change_summary="A/A third - noise", operator_sig=OP, dtype_sig="fp16",
            env=H100, tags=["control"], baseline=json.loads((repo / "base.json").read_text()),
            candidate=json.loads((repo / "cand.json").read_text()), unit="ms",
            measured_against="reference",
        )  # fmt: skip
        assert not failed, texts
        assert any("biased" in text and "warning: control" in text for text in texts), texts

    run_agent(repo, work)
