"""A memoryless agent B takes over agent A's campaign (trial O): what its packet said
wrong besides the spellings (:mod:`test_spellings`). "Not tried yet" offered ``env
MI300X: never tried`` while its counts read every experiment of the operator on
``MI300X, ROCm 7.0.0``, and another kernel's dtype (``bf16 -> fp8``); a fresh clone that
did not read fetched branches said "Start with an A/A run" before its "not read" line;
an imported record whose insight is the template's ``None yet.`` showed that, not its
error."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from conftest import git, run_kexp
from test_spellings import add, consult, consulted_by_mcp
from test_sync import clone, make_remote

from kexp import Store


def test_not_tried_offers_neither_the_env_counted_nor_another_kernels_dtype(
    repo: Path, store: Store
) -> None:
    where = {"operator": "csrc/cache.cu: reshape_and_cache_flash", "env": "MI300X, ROCm 7.0.0"}
    add(repo, "Vectorize key store 16B - +3%", 1.03, **where)
    add(repo, "Unroll 8 - -2%", 0.98, **where)
    add(repo, "Persistent rmsnorm - +5%", 1.05, operator="csrc/rms.cu: rmsnorm_quant",
        dtype="bf16 -> fp8", env="MI300X")  # fmt: skip
    asked = ("context", "--operator", "reshape_and_cache_flash", "--dtype", "bf16")
    text = run_kexp(*asked, "--env", "MI300X", cwd=repo, process=True).stdout
    assert "2 of them for this dtype and env: 1 improved" in text, text
    assert "Not tried yet" not in text, text  # MI300X is the env counted; fp8 rmsnorm's
    # Its own env where it never improved is still said, and no other machine's.
    add(repo, "Unroll 4 - -1%", 0.97, **{**where, "env": "MI300X, ROCm 6.3.1"})
    data = json.loads(run_kexp(*asked, "--env", "MI300X", "--json", cwd=repo).stdout)
    said = [(e["kind"], e["value"], e["tried"]) for e in data["not_tried"]]
    assert said == [("env", "MI300X, ROCm 6.3.1", 1)], said


def test_a_clone_that_did_not_read_fetched_branches_says_so_before_anything(
    tmp_path: Path,
) -> None:
    remote, _ = make_remote(tmp_path)
    a = clone(remote, tmp_path / "a")
    add(a, "Tiling 128x64 - +15%", 1.15)
    assert run_kexp("sync", "--branch", "kexp/agentA", cwd=a, process=True).returncode == 0
    b = clone(remote, tmp_path / "b")
    git(b, "fetch", "-q", "origin")
    text, data = consult(b, "--dtype", "bf16", "--env", "H100")
    summary = text.split("\n\n", 1)[1].splitlines()
    assert summary[0].startswith("not read: 1 experiment file(s)"), summary
    assert "Start with an A/A run" not in text and "start its campaign" not in text
    from kexp.agents.sections import UNREAD_START

    assert data["start"] == UNREAD_START and summary[2].startswith(UNREAD_START), summary
    assert data["unread"] == summary[0]

    pytest.importorskip("mcp")
    answer = consulted_by_mcp(b)
    assert "not read: 1 experiment file(s)" in answer and "A/A run" not in answer
    across = run_kexp("context", "--operator", "fused_attention_fwd", "--all-refs", cwd=b)
    assert "Tiling 128x64 - +15%" in across.stdout and UNREAD_START not in across.stdout


def test_a_template_insight_left_unfilled_shows_the_error_instead(repo: Path, store: Store) -> None:
    error = "AssertionError: max abs diff 3.1e-01 > atol 1e-02 (out[3, 17, :])"
    record = {
        "id": "c0ffee00d15ea5e2", "pid": "", "score": 5.2, "raw_result": "5.2x",
        "dtype_sig": "fp16", "env": "H100 SXM5, CUDA 12.4", "is_buggy": True,
        "error_message": error, "code_change": "", "base_commit": "",
        "change_summary": "Skipped softmax rescale in flash decode - 5.2x",
        "detailed_description": "**Approach**: See summary.\n\n**Key insight**: None yet.",
        "operator_sig": "csrc/flash_decode.cu: flash_decode_kernel", "profiling_info": "",
        "status": "done", "created_at": "2026-10-02T09:10:00.000007Z",
    }  # fmt: skip
    (repo / "db.json").write_text(json.dumps({record["id"]: record}), encoding="utf-8")
    done = run_kexp("import", "db.json", "--no-check-commits", cwd=repo, process=True)
    assert "imported 1," in done.stdout, done.stdout + done.stderr  # (its base: attention)
    text = run_kexp("context", "--operator", "flash_decode", cwd=repo, process=True).stdout
    assert f"error: {error}" in text and "None yet" not in text, text
    lessons = run_kexp("lessons", cwd=repo, process=True).stdout
    assert error in lessons and "None yet" not in lessons, lessons
