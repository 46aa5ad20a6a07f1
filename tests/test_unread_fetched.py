"""What fetched branches hold, said where a read of the working tree alone missed it
(trial L, R02): agent B synced a better step and a dead end to ``origin/kexp/b``; agent
A ran ``git fetch`` and consulted, and recorded B's exact dead-end change, both without
all_refs (the server's default): its own step was the current best and no change was
said tried before, nothing hinting that fetched branches held more. Now the packet and
the record say how many experiment files fetched branches hold that this checkout has
not merged, and on which branch, and how to read them."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from conftest import git, run_kexp
from test_sync import clone, make_remote

OPERATOR = "kernels/gemm.cu: gemm_bf16"


def add(root: Path, summary: str, score: float, *extra: str) -> str:
    done = run_kexp(
        "add", "--json", "--summary", summary, "--score", str(score), "--status", "done",
        "--operator", OPERATOR, "--dtype", "bf16", "--env", "H100", *extra, cwd=root,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    return str(json.loads(done.stdout)["id"])


@pytest.fixture
def fetched(tmp_path: Path) -> tuple[Path, Path]:
    """(A, B): A's step on main; B's two steps on it synced to kexp/b; A fetched."""
    remote, _ = make_remote(tmp_path)
    a = clone(remote, tmp_path / "a")
    root = add(a, "Tile 64x64 - +43%", 1.43, "--measured-against", "reference")
    assert run_kexp("sync", cwd=a, process=True).returncode == 0
    b = clone(remote, tmp_path / "b")
    add(b, "cp.async 2-stage - -6%", 0.94, "--pid", root)
    add(b, "Tensor cores - +80%", 1.8, "--pid", root)
    synced = run_kexp("sync", "--branch", "kexp/b", cwd=b, process=True)
    assert synced.returncode == 0, synced.stderr
    git(a, "fetch", "-q", "origin")
    return a, b


def test_a_packet_of_the_working_tree_says_what_fetched_branches_hold(
    fetched: tuple[Path, Path],
) -> None:
    a, _ = fetched
    said = "not read: 2 experiment file(s) added or changed on fetched branches this "
    text = run_kexp("context", "--operator", "gemm", cwd=a, process=True).stdout
    (line,) = [line for line in text.splitlines() if line.startswith(said)]
    assert "(origin/kexp/b: 2); read across refs: add --all-refs" in line, line
    data = json.loads(run_kexp("context", "--operator", "gemm", "--json", cwd=a).stdout)
    assert data["context"]["unread"] == line
    # Read across refs, or merged: nothing left unread, nothing said.
    across = run_kexp("context", "--operator", "gemm", "--all-refs", cwd=a).stdout
    assert "not read:" not in across and "Tensor cores - +80%" in across
    git(a, "merge", "-q", "--ff-only", "origin/kexp/b")
    assert "not read:" not in run_kexp("context", "--operator", "gemm", cwd=a).stdout


def test_record_without_all_refs_says_what_it_did_not_look_at(
    fetched: tuple[Path, Path],
) -> None:
    pytest.importorskip("mcp")
    from test_mcp import Agent, run_agent

    from kexp.cli.mcp import INSTRUCTIONS

    a, _ = fetched
    replies: list[list[str]] = []

    async def work(agent: Agent) -> None:
        failed, texts = await agent.call(
            "record", change_summary="cp.async 2-stage - try", operator_sig=OPERATOR,
            dtype_sig="bf16", env="H100", score=0.95, measured_against="reference",
        )  # fmt: skip
        assert not failed, texts
        replies.append(texts)
        failed, texts = await agent.call(
            "record", change_summary="Swizzle - try", operator_sig=OPERATOR,
            dtype_sig="bf16", env="H100", score=0.97, measured_against="reference",
            all_refs=True,
        )  # fmt: skip
        assert not failed, texts
        replies.append(texts)

    run_agent(a, work)
    (warned,) = [t for t in replies[0][1:] if "not read: 2 experiment file(s)" in t]
    assert "looked for in this checkout alone" in warned and "all_refs: true" in warned
    assert not any("not read:" in t for t in replies[1])  # read across refs
    assert "all_refs" in INSTRUCTIONS.split("call record", 1)[1]  # not for consult alone


def test_the_line_counts_only_the_files_the_packets_filters_read(tmp_path: Path) -> None:
    """Trial R, R09: a fetched branch held a softmax experiment alone and ``kexp context
    --operator gemm`` said "not read: 1 ...; read across refs", sending the agent to read
    again for nothing. Now the line counts the files its operator, dtype and env read (as
    every filter reads them: ``bf16`` reads ``torch.bfloat16``), in the packet and in the
    MCP consult tool's answer alike."""
    remote, _ = make_remote(tmp_path)
    a = clone(remote, tmp_path / "a")
    add(a, "Tile 64x64 - +43%", 1.43, "--measured-against", "reference")
    assert run_kexp("sync", cwd=a, process=True).returncode == 0
    b = clone(remote, tmp_path / "b")
    softmax = ("--operator", "kernels/softmax.cu: softmax_fp16", "--dtype", "fp16")
    add(b, "Online softmax - +15%", 1.15, *softmax, "--measured-against", "reference")
    assert run_kexp("sync", "--branch", "kexp/b", cwd=b, process=True).returncode == 0
    git(a, "fetch", "-q", "origin")

    def unread(*asked: str) -> str:
        text = run_kexp("context", *asked, cwd=a, process=True).stdout
        return next((line for line in text.splitlines() if line.startswith("not read:")), "")

    assert unread("--operator", "gemm") == "", "nothing on gemm is unread"
    assert "not read: 1 experiment file(s)" in unread("--operator", "softmax")
    # B's gemm step in torch's words: read by bf16, not by fp8 nor on another env.
    add(b, "Split-K 4 - +9%", 1.09, "--dtype", "torch.bfloat16", "--measured-against",
        "reference")  # fmt: skip
    assert run_kexp("sync", "--branch", "kexp/b", cwd=b, process=True).returncode == 0
    git(a, "fetch", "-q", "origin")
    line = unread("--operator", "gemm", "--dtype", "bf16")
    assert "not read: 1 experiment file(s)" in line and "(origin/kexp/b: 1)" in line, line
    assert unread("--operator", "gemm", "--dtype", "fp8") == ""
    assert unread("--operator", "gemm", "--env", "MI300X") == ""
    assert "not read: 2 experiment file(s)" in unread("--operator", "kernels/")

    pytest.importorskip("mcp")
    from test_mcp import Agent, run_agent

    answers: list[str] = []

    async def work(agent: Agent) -> None:
        for dtype in ("fp8", "bf16"):
            failed, texts = await agent.call("consult", operator="gemm", dtype=dtype)
            assert not failed, texts
            answers.append(texts[0])

    run_agent(a, work)
    assert "not read:" not in answers[0], answers[0]
    counted = line.split("; ")[0]  # (the advice in the tools' words: all_refs)
    assert counted in answers[1] and "all_refs: true" in answers[1], answers[1]


def test_a_file_restored_from_the_branch_is_read(fetched: tuple[Path, Path]) -> None:
    """Trial T, T06: the agent did what kexp advises, ``git restore --source
    origin/kexp/b -- FILE`` (left uncommitted), and the line still counted that file:
    it compared the branch with ``HEAD``, not with the working tree. A file the working
    tree holds with the branch's very content is read; one changed since is not."""
    a, _ = fetched

    def unread() -> str:
        text = run_kexp("context", "--operator", "gemm", cwd=a, process=True).stdout
        return next((line for line in text.splitlines() if line.startswith("not read:")), "")

    listed = git(a, "ls-tree", "-r", "--name-only", "origin/kexp/b", "--", "experiments")
    theirs = [p for p in listed.split() if p.endswith(".md") and not p.endswith("README.md")]
    new = [p for p in theirs if not (a / p).exists()]
    assert len(new) == 2 and "not read: 2 experiment file(s)" in unread()
    git(a, "restore", "--source", "origin/kexp/b", "--", new[0])
    assert "not read: 1 experiment file(s)" in unread() and "(origin/kexp/b: 1)" in unread()
    # Changed in the working tree: the branch's version is not the one read.
    (a / new[0]).write_bytes((a / new[0]).read_bytes() + b"\nLocal note.\n")
    assert "not read: 2 experiment file(s)" in unread()
    git(a, "restore", "--source", "origin/kexp/b", "--", *new)
    assert unread() == "", "every file the branch adds is the working tree's, read"
    assert "Tensor cores - +80%" in run_kexp("context", "--operator", "gemm", cwd=a).stdout
