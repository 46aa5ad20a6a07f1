"""A GPU named as its driver's tool prints it (trial O, O04): nvidia-smi calls an H100
SXM5 80GB ``NVIDIA H100 80GB HBM3``; an agent that copied that name, or let kexp detect
it, recorded a campaign apart from the team's ``H100 SXM5 80GB, CUDA 12.4``, and no
warning named the campaign it meant. Now ``kexp env`` names the GPU by its model, and
``kexp add`` of an env in the tool's words names the env the store records it as."""

from __future__ import annotations

import json
import os
import stat
from pathlib import Path

import pytest
from conftest import run_kexp

OP = "kernels/attn/fused_attn.py: fused_attention_fwd"
TEAM = "H100 SXM5 80GB, CUDA 12.4"
#: The same machine as nvidia-smi names its GPU.
SMI = "NVIDIA H100 80GB HBM3, CUDA 12.4"

#: nvidia-smi on a machine with two H100 SXM5 80GB boards, as its queries print them.
NVIDIA_SMI = """#!/bin/sh
case "$1" in
  --query-gpu=*) echo "NVIDIA H100 80GB HBM3, 550.54.15"; echo "NVIDIA H100 80GB HBM3, 550.54.15";;
  *) echo "| NVIDIA-SMI 550.54.15   Driver Version: 550.54.15   CUDA Version: 12.4 |";;
esac
"""


def add(
    repo: Path, env: str, *options: str, machine: dict[str, str] | None = None
) -> tuple[str, str]:
    """``kexp add --json`` of a root in ``repo``: the id, and what it said on stderr."""
    done = run_kexp(
        "add", "--json", "--summary", "Tiling 128x64 - +15%", "--score", "1.15",
        "--measured-against", "reference", "--operator", OP, "--dtype", "bf16",
        "--description", "x", *(("--env", env) if env else ()), *options, cwd=repo,
        env=machine, process=machine is not None,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)["id"], done.stderr


@pytest.fixture
def h100_sxm5(tmp_path: Path) -> dict[str, str]:
    """The environment of a process on an H100 SXM5 machine: nvidia-smi on PATH."""
    folder = tmp_path / "driver"
    folder.mkdir()
    tool = folder / "nvidia-smi"
    tool.write_text(NVIDIA_SMI, encoding="utf-8")
    tool.chmod(tool.stat().st_mode | stat.S_IXUSR)
    return {"PATH": os.pathsep.join((str(folder), os.environ["PATH"]))}


def test_kexp_env_names_the_gpu_by_its_model(h100_sxm5: dict[str, str], repo: Path) -> None:
    text = run_kexp("env", cwd=repo, env=h100_sxm5, process=True)
    assert text.returncode == 0, text.stderr
    assert text.stdout.startswith("2x H100 SXM5 80GB, driver 550.54.15, "), text.stdout
    data = json.loads(run_kexp("env", "--json", cwd=repo, env=h100_sxm5, process=True).stdout)
    assert data["gpus"] == ["NVIDIA H100 80GB HBM3"] * 2  # what the tool said, kept
    assert data["env"] == text.stdout.strip()
    # Recorded from the detected GPU, it is found by the team's name of the machine.
    run_kexp("init", cwd=repo)
    exp, _ = add(repo, "", "--detect-env", machine=h100_sxm5)
    found = run_kexp("list", "--env", "H100 SXM5 80GB", "--json", cwd=repo)
    assert [e["id"] for e in json.loads(found.stdout)] == [exp], found.stdout


def test_an_env_in_a_tools_words_names_the_campaign_recorded(repo: Path) -> None:
    run_kexp("init", cwd=repo)
    add(repo, TEAM)
    # nvidia-smi's name alone: the env naming that GPU's model is named.
    exp, said = add(repo, "NVIDIA H100 80GB HBM3")
    (line,) = [s for s in said.splitlines() if "NVIDIA H100 80GB HBM3" in s]
    assert "nvidia-smi names the H100 SXM5 80GB 'NVIDIA H100 80GB HBM3'" in line, line
    assert f"this store records that GPU as {TEAM!r}" in line, line
    assert f"kexp update {exp} --set env=VALUE" in line
    # The same env in the tool's words: spelt otherwise, saying why.
    _, said = add(repo, "NVIDIA H100 80GB HBM3, CUDA 12.4")
    (line,) = [s for s in said.splitlines() if "spelt otherwise" in s]
    assert f"but {TEAM!r} is, spelt otherwise (nvidia-smi names the H100 SXM5 80GB" in line


@pytest.mark.parametrize("env", ["NVIDIA H100 PCIe", "H100 SXM5 80GB, CUDA 12.8", TEAM])
def test_another_machine_or_the_models_words_say_nothing(repo: Path, env: str) -> None:
    run_kexp("init", cwd=repo)
    add(repo, TEAM)
    _, said = add(repo, env)
    assert "spelt otherwise" not in said and "as a tool prints it" not in said, said


def test_a_step_on_its_parents_machine_in_the_tools_words_is_said_spelt_otherwise(
    repo: Path,
) -> None:
    run_kexp("init", cwd=repo)
    root, _ = add(repo, TEAM)
    done = run_kexp(
        "add", "--json", "--summary", "BLOCK_N 128 - +10%", "--score", "1.1", "--pid", root,
        "--measured-against", "parent", "--env", "NVIDIA H100 80GB HBM3, CUDA 12.4",
        "--description", "x", cwd=repo,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    (line,) = [s for s in done.stderr.splitlines() if "its parent" in s]
    assert f"on {TEAM!r}, spelt otherwise: if it is that machine, write that spelling" in line


def test_validate_says_an_env_in_a_tools_words_is_spelt_otherwise(repo: Path) -> None:
    """``kexp add`` said nvidia-smi's words spell the team's machine otherwise, and
    ``kexp validate`` (the check a pull request runs) said nothing of the same file:
    its fold of two spellings did not read a GPU named as the tool names it."""
    run_kexp("init", cwd=repo)
    add(repo, TEAM)
    add(repo, TEAM)
    exp, _ = add(repo, "NVIDIA H100 80GB HBM3, CUDA 12.4")
    done = run_kexp("validate", cwd=repo)
    said = done.stdout + done.stderr
    (line,) = [s for s in said.splitlines() if "env-spelt-otherwise" in s]
    assert exp in line and f"is {TEAM!r} spelt otherwise" in line, said


def test_validate_on_a_tie_advises_the_spelling_stats_and_context_show(repo: Path) -> None:
    """One record in the team's words, one in nvidia-smi's, the latter first by file
    path: validate's hint told the team to rewrite its own env into nvidia-smi's
    (it broke the tie by path order), the opposite of what context and stats show
    (trial T, finding 05)."""
    run_kexp("init", cwd=repo)
    for exp_id, env in (("6b1718aa7c6830ff", TEAM), ("6b1718ab0ff93100", SMI)):
        document = (f"id: {exp_id}\nchange_summary: '{exp_id[-2:]} - +10%'\nscore: 1.1\n"
                    f"measured_against: reference\noperator_sig: '{OP}'\ndtype_sig: fp16\n"
                    f"env: '{env}'\n")  # fmt: skip
        done = run_kexp("add", input=document, cwd=repo)
        assert done.returncode == 0, done.stderr
    done = run_kexp("validate", cwd=repo)
    said = done.stdout + done.stderr
    (line,) = [s for s in said.splitlines() if "env-spelt-otherwise" in s]
    assert "6b1718ab0ff93100" in line and f"is {TEAM!r} spelt otherwise" in line, said
