"""The env that keeps a record out of its campaign (operator × dtype × env), as a user
records it: a step on another machine than its parent, an env spelt otherwise than a
recorded one, an empty env. Each is recorded, with a warning that says what to do;
kexp validate warns of the step on another machine too."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import pytest
from conftest import experiment_fields, git, run_kexp

from kexp import Store
from kexp.measure.record import record_iteration

OP = "csrc/k.cu: k"


def add(repo: Path, *options: str) -> tuple[str, str]:
    """``kexp add --json`` in ``repo``: the id recorded, and what it said on stderr."""
    done = run_kexp(
        "add", "--json", "--operator", OP, "--dtype", "fp16", "--description", "x",
        *options, cwd=repo,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)["id"], done.stderr


def test_a_step_on_another_machine_than_its_parent_is_warned_of_at_add_and_in_validate(
    repo: Path,
) -> None:
    root, _ = add(repo, "--summary", "LDS tiling - +30%", "--score", "1.3", "--env", "MI300X")
    step, said = add(
        repo, "--summary", "MFMA - +35%", "--score", "1.35", "--pid", root,
        "--measured-against", "parent",
    )  # fmt: skip
    assert "machines" not in said  # the parent's env, taken from it
    other, said = add(
        repo, "--summary", "Tile 64 - +3%", "--score", "1.03", "--pid", step,
        "--measured-against", "parent", "--env", "H100 SXM, CUDA 12.4",
    )  # fmt: skip
    assert "'H100 SXM, CUDA 12.4'" in said and "'MI300X'" in said, said
    assert "two machines" in said and "start from the reference" in said
    assert f"kexp update {other} --set pid=VALUE" in said
    # Measured against the reference on its own machine: its cumulative score is its own.
    _, said = add(
        repo, "--summary", "Tile 32 - +4%", "--score", "1.04", "--pid", step,
        "--measured-against", "reference", "--env", "H100 SXM, CUDA 12.4",
    )  # fmt: skip
    assert "machines" not in said, said
    checked = run_kexp("validate", cwd=repo)
    found = [line for line in checked.stdout.splitlines() if "env-differs-from-parent" in line]
    assert len(found) == 1 and other in found[0], checked.stdout
    assert "two machines" in found[0]
    assert "1 warning(s)" in checked.stderr


def test_the_library_and_mcp_warn_as_the_command_does(repo: Path) -> None:
    store = Store(repo)
    root = record_iteration(store, **experiment_fields(env="MI300X"))
    with pytest.warns(UserWarning, match="two machines"):
        record_iteration(
            store, **experiment_fields(pid=root.id, env="H100", measured_against="parent")
        )
    pytest.importorskip("mcp")
    import anyio
    from mcp import ClientSession, StdioServerParameters, stdio_client

    params = StdioServerParameters(
        command=sys.executable, args=["-m", "kexp", "mcp"], cwd=str(repo)
    )
    fields: dict[str, Any] = experiment_fields(
        pid=root.id, env="B200", measured_against="parent", change_summary="Tile 8 - +2%"
    )
    texts: list[str] = []

    async def main() -> None:
        async with stdio_client(params) as (read, write), ClientSession(read, write) as session:
            await session.initialize()
            result = await session.call_tool("record", fields)
            assert not result.is_error, result.content
            texts.extend(block.text for block in result.content)  # type: ignore[union-attr]

    anyio.run(main)
    assert any("two machines" in t and "'B200'" in t for t in texts), texts


def test_an_env_spelt_otherwise_than_a_recorded_one_is_warned_of(repo: Path) -> None:
    add(repo, "--summary", "Tiling - +50%", "--score", "1.5", "--env", "H100 SXM, CUDA 12.4")
    spelt = ("--env", "h100 sxm cuda12.4")
    _, said = add(repo, "--summary", "Tile 64 - +10%", "--score", "1.1", *spelt)
    assert "'h100 sxm cuda12.4'" in said and "'H100 SXM, CUDA 12.4'" in said, said
    assert "--set env=VALUE" in said
    for env in ("H100 SXM, CUDA 12.4", "MI300X, ROCm 6.2", "h100 sxm cuda12.4"):
        _, said = add(repo, "--summary", "Tile 32 - +2%", "--score", "1.02", "--env", env)
        assert "spelt otherwise" not in said, (env, said)  # recorded, or another machine


def test_an_empty_env_given_is_warned_of(repo: Path) -> None:
    exp_id, said = add(repo, "--summary", "Tile 16 - +3%", "--score", "1.03", "--env", "")
    assert f"experiment {exp_id} has an empty env" in said, said
    assert f"kexp update {exp_id} --set env=VALUE" in said
    # A step that leaves it empty takes its parent's: nothing to say.
    root, _ = add(repo, "--summary", "Tile 8 - +1%", "--score", "1.01", "--env", "MI300X")
    _, said = add(repo, "--summary", "Tile 4 - +1%", "--score", "1.01", "--pid", root,
                  "--measured-against", "parent", "--env", "")  # fmt: skip
    assert "env" not in said, said


def test_context_says_which_step_of_the_best_crossed_machines(repo: Path) -> None:
    """The packet's current best multiplies a step on H100 by its parent's on MI300X: it
    says so, naming the step and what to do, as ``kexp context`` and MCP's consult."""
    root, _ = add(repo, "--summary", "LDS tiling - +30%", "--score", "1.3", "--env", "MI300X")
    step, _ = add(
        repo, "--summary", "Tile 64 - +3%", "--score", "1.03", "--pid", root,
        "--measured-against", "parent", "--env", "H100",
    )  # fmt: skip
    packet = run_kexp("context", "--operator", "k", cwd=repo)
    assert packet.returncode == 0, packet.stderr
    best = packet.stdout.split("## Current best\n", 1)[1].split("\n## ", 1)[0]
    assert best.startswith(f"- {step[:10]} 1.3390x"), packet.stdout
    (said,) = [line for line in best.splitlines() if "machines" in line]
    assert f"{step[:10]}" in said and "'H100'" in said and "'MI300X'" in said, said
    assert f"kexp update {step[:10]} --set pid=VALUE" in said, said
    data = json.loads(run_kexp("context", "--operator", "k", "--json", cwd=repo).stdout)
    assert data["best"]["crossed_machines"] == {
        "id": step, "env": "H100", "parent": root, "parent_env": "MI300X", "more": 0,
    }  # fmt: skip
    # Measured against the reference on its own machine: its score is its own.
    alone, _ = add(
        repo, "--summary", "Tile 32 - +40%", "--score", "1.4", "--pid", root,
        "--measured-against", "reference", "--env", "H100",
    )  # fmt: skip
    data = json.loads(run_kexp("context", "--operator", "k", "--json", cwd=repo).stdout)
    assert data["best"]["id"] == alone and "crossed_machines" not in data["best"], data["best"]
    assert "machines" not in run_kexp("context", "--operator", "k", cwd=repo).stdout
    run_kexp("rm", alone, "--yes", cwd=repo)

    pytest.importorskip("mcp")
    import anyio
    from mcp import ClientSession, StdioServerParameters, stdio_client

    params = StdioServerParameters(
        command=sys.executable, args=["-m", "kexp", "mcp"], cwd=str(repo)
    )
    texts: list[str] = []

    async def main() -> None:
        async with stdio_client(params) as (read, write), ClientSession(read, write) as session:
            await session.initialize()
            result = await session.call_tool("consult", {"operator": "k"})
            assert not result.is_error, result.content
            texts.extend(block.text for block in result.content)  # type: ignore[union-attr]

    anyio.run(main)
    (said,) = [line for line in texts[0].splitlines() if "machines" in line]
    assert f'the update tool with exp_id: "{step[:10]}"' in said and "'H100'" in said, said
    assert "kexp update" not in said, said


def test_review_of_a_first_best_under_an_env_spelt_otherwise_says_the_spelling(
    repo: Path,
) -> None:
    add(repo, "--summary", "Tiling - +50%", "--score", "1.5", "--env", "H100 SXM, CUDA 12.4")
    git(repo, "add", "-A")
    git(repo, "commit", "-qm", "main's campaign")
    mine, _ = add(
        repo, "--summary", "Tile 64 - +10%", "--score", "1.1", "--env", "h100 sxm cuda12.4"
    )
    git(repo, "add", "-A")
    git(repo, "commit", "-qm", "a PR's step")
    done = run_kexp("review", "HEAD~1", "HEAD", cwd=repo)
    assert done.returncode == 0, done.stderr
    line = next(x for x in done.stdout.splitlines() if "New best" in x)
    assert "first scored experiment" in line, line
    assert "`H100 SXM, CUDA 12.4` is recorded, spelt otherwise" in line, line
    assert f"kexp update {mine} --set env=VALUE" in line
    # An env no recorded one is spelt like: no word of spelling.
    add(repo, "--summary", "Rows - +20%", "--score", "1.2", "--env", "MI300X, ROCm 6.2")
    git(repo, "add", "-A")
    git(repo, "commit", "-qm", "another machine")
    other = run_kexp("review", "HEAD~1", "HEAD", cwd=repo).stdout
    assert "New best" in other and "spelt otherwise" not in other, other


def test_validate_warns_of_an_env_spelt_otherwise_than_the_one_the_store_writes(
    repo: Path,
) -> None:
    """Two records on ``H100 SXM, CUDA 12.4`` and one on ``h100 sxm cuda12.4`` (another
    agent's spelling): validate warns of the odd one alone, naming the usual spelling;
    following its hint clears it."""
    usual = "H100 SXM, CUDA 12.4"
    add(repo, "--summary", "Tile 64", "--score", "1.1", "--env", usual)
    add(repo, "--summary", "Tile 128", "--score", "1.2", "--env", usual)
    odd, _ = add(repo, "--summary", "Tile 32", "--score", "1.05", "--env", "h100 sxm cuda12.4")
    checked = run_kexp("validate", cwd=repo)
    found = [line for line in checked.stdout.splitlines() if "env-spelt-otherwise" in line]
    assert len(found) == 1 and odd in found[0] and repr(usual) in found[0], checked.stdout
    assert run_kexp("update", odd, "--set", f"env={usual}", cwd=repo).returncode == 0
    assert "env-spelt-otherwise" not in run_kexp("validate", cwd=repo).stdout
