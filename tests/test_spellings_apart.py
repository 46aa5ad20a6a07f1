"""Kexp's spellings must not read two campaigns as one (trial P, repros 01 to 04 and 09):
``--dtype float16`` read a ``bfloat16`` campaign (the raw text ``float16`` is in
``bfloat16``), ``fp8`` (e4m3) an ``fp8e5m2`` one, ``--env gfx90a:xnack-`` (XNACK off)
the ``xnack+`` one; ``kexp add`` and ``validate`` called an env spelt otherwise "a
campaign of its own in ... context", which ``context`` then read as one with it, without
a word; its "Not tried yet" listed another spelling of what was tried as never tried."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from conftest import run_kexp
from test_spellings import ENV, OPERATOR, add, consult, consulted_by_mcp

from kexp import Store


def top(root: Path, *options: str) -> tuple[list[dict[str, Any]], str]:
    """``kexp top`` on the campaign's operator with ``options``: its rows and warnings."""
    done = run_kexp("top", "--operator", "fused_attention_fwd", "--json", *options, cwd=root)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout), done.stderr


def test_a_dtype_filter_reads_whole_dtype_names_never_raw_text(repo: Path, store: Store) -> None:
    add(repo, "bf16 tile - +40%", 1.4, dtype="bfloat16")
    for fp16 in ("float16", "fp16", "torch.float16", "half"):
        rows, said = top(repo, "--dtype", fp16)
        assert rows == [] and "(a whole dtype name in dtype_sig, in any spelling)" in said, rows
    rows, said = top(repo, "--dtype", "float")  # fp32
    assert rows == [] and "has a dtype matching" in said, rows
    _, data = consult(repo, "--dtype", "float16", "--env", "H100")
    assert data["best"] is None and data["experiments_here"] == 0, data
    assert data["unmatched"] and "'bfloat16' (1 recorded)" in data["unmatched"][0], data
    # Recorded too, fp16 is read alone, and bfloat16 is no part of it to name.
    fp16 = add(repo, "fp16 tile - +10%", 1.1, dtype="fp16")
    rows, said = top(repo, "--dtype", "float16")
    assert [row["id"] for row in rows] == [fp16] and "bfloat16" not in said, (rows, said)
    # A list of dtypes is several names: one of them reads it (the exact value alone).
    listed = add(repo, "fp8 cast - +20%", 1.2, dtype="bf16,fp8")
    rows, _ = top(repo, "--dtype", "float8_e4m3fn")
    assert [row["id"] for row in rows] == [listed], rows
    # Text that names no dtype kexp knows is a part of the value, as every filter is.
    rows, _ = top(repo, "--dtype", "fp")
    assert sorted(row["id"] for row in rows) == sorted([fp16, listed]), rows
    rows, said = top(repo, "--dtype", "fp4")
    assert rows == [] and "(a part of dtype_sig, in any case)" in said, said


def test_fp8_is_e4m3_and_e5m2_is_a_dtype_of_its_own(repo: Path, store: Store) -> None:
    e5m2 = add(repo, "E5M2 tile - +40%", 1.4, dtype="fp8e5m2")
    answers = {dtype: top(repo, "--dtype", dtype)[0] for dtype in ("fp8", "float8_e4m3fn")}
    assert answers == {"fp8": [], "float8_e4m3fn": []}, answers
    _, data = consult(repo, "--dtype", "fp8", "--env", "H100")
    assert data["best"] is None and data["experiments_here"] == 0, data
    for dtype in ("fp8e5m2", "float8_e5m2", "torch.float8_e5m2", "e5m2"):
        assert [row["id"] for row in top(repo, "--dtype", dtype)[0]] == [e5m2], dtype
    # Spelt as torch spells it, e5m2 is still no fp8 (e4m3); e4m3 spelt so is.
    add(repo, "E5M2 again - +5%", 1.05, dtype="float8_e5m2")
    e4m3 = add(repo, "E4M3 tile - +30%", 1.3, dtype="fp8-e4m3")
    for dtype in ("fp8", "float8_e4m3fn", "tl.float8e4nv"):
        assert [row["id"] for row in top(repo, "--dtype", dtype)[0]] == [e4m3], dtype


def test_an_env_feature_switched_off_is_not_the_one_switched_on(repo: Path, store: Store) -> None:
    on = "MI250X, gfx90a:xnack+, ROCm 6.2"
    add(repo, "Unroll 4 - +30%", 1.3, env=on)
    _, data = consult(repo, "--dtype", "bf16", "--env", "MI250X, gfx90a:xnack-")
    assert data["best"] is None and data["experiments_here"] == 0, data
    off = add(repo, "Unroll 2 - +10%", 1.1, env="MI250X, gfx90a:xnack-, ROCm 6.2")
    rows, said = top(repo, "--env", "gfx90a:xnack-")
    assert [row["id"] for row in rows] == [off] and "xnack+" not in said, (rows, said)
    _, data = consult(repo, "--dtype", "bf16", "--env", "xnack-")
    assert data["experiments_here"] == 1 and data.get("read_alone") is None, data
    # A dash between two letters or digits is still a space: H100-SXM5 is H100 SXM5.
    add(repo, "Tiling - +5%", 1.05)
    assert len(top(repo, "--env", "H100-SXM5")[0]) == 1


def test_the_packet_says_where_it_reads_two_spellings_as_one_and_the_warnings_are_true(
    repo: Path, store: Store
) -> None:
    first = add(repo, "A - +30%", 1.3)
    other = "H100-SXM5 80GB, CUDA 12.4"
    done = run_kexp(
        "add", "--json", "--summary", "B - +40%", "--score", "1.4", "--operator", OPERATOR,
        "--dtype", "bfloat16", "--env", other, "--description", "**Key insight**: d", cwd=repo,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    (warned,) = [line for line in done.stderr.splitlines() if "spelt otherwise" in line]
    checked = run_kexp("validate", cwd=repo)
    (found,) = [line for line in checked.stdout.splitlines() if "env-spelt-otherwise" in line]
    for said in (warned, found):  # context reads the two as one: no "campaign of its own in
        assert "context" not in said, said  # it"
    # Nor stats, tree and review, now (one campaign key, whatever its spelling).
    assert "kexp reads both as one campaign" in found and "count each" not in found, found
    text, data = consult(repo, "--dtype", "bf16", "--env", "H100 SXM5")
    assert data["experiments_here"] == 2, data
    notes = data["spelt_as_one"]
    assert len(notes) == 2 and all(note in text for note in notes), data
    dtype, env = notes
    assert "'bf16'" in dtype and "'bfloat16'" in dtype, dtype
    # What to run on the one spelt otherwise (not on the one already spelt so).
    second = json.loads(done.stdout)["id"]
    assert f"kexp update {second[:10]}" in dtype and first[:10] not in dtype, dtype
    assert "--set dtype_sig=VALUE" in dtype and "VALUE 'bf16'" in dtype, dtype
    assert repr(other) in env and repr(ENV) in env and "--set env=VALUE" in env, env
    # Made one as the note says: nothing more to say.
    done = run_kexp("update", second, "--set", "dtype_sig=bf16", "--set", f"env={ENV}", cwd=repo)
    assert done.returncode == 0, done.stderr
    _, data = consult(repo, "--dtype", "bf16", "--env", "H100 SXM5")
    assert data["experiments_here"] == 2 and data.get("spelt_as_one") is None, data


def test_not_tried_yet_reads_spellings_as_one(repo: Path, store: Store) -> None:
    add(repo, "A - +30%", 1.3)
    add(repo, "A2 - -3%", 0.97)
    add(repo, "Z - +10%", 1.1, dtype="torch.bfloat16", env="H100-SXM5 80GB, CUDA 12.4")
    add(repo, "Y - +10%", 1.1, operator="k.py: other", dtype="bfloat16",
        env="NVIDIA H100-SXM5 80GB, CUDA 12.4")  # fmt: skip
    text, data = consult(repo)
    assert "never tried" not in text, text
    assert not [e for e in data["not_tried"] or () if e["kind"] in ("dtype", "env")], data


def test_an_env_feature_switched_off_is_no_spelling_of_the_one_switched_on(
    repo: Path, store: Store
) -> None:
    add(repo, "Unroll 4 - +30%", 1.3, env="MI250X, gfx90a:xnack+, ROCm 6.2")
    done = run_kexp(
        "add", "--summary", "Unroll 2 - +10%", "--score", "1.1", "--operator", OPERATOR,
        "--dtype", "bf16", "--env", "MI250X, gfx90a:xnack-, ROCm 6.2", cwd=repo,
    )  # fmt: skip
    assert done.returncode == 0 and "spelt otherwise" not in done.stderr, done.stderr
    # Spelt otherwise, a machine is still told of: h100-sxm5 is H100 SXM5.
    add(repo, "Tiling - +5%", 1.05, env="h100-sxm5 80GB, CUDA 12.4")
    add(repo, "Tiling 2 - +5%", 1.05)
    add(repo, "Tiling 3 - +5%", 1.05)
    checked = run_kexp("validate", cwd=repo)
    (found,) = [line for line in checked.stdout.splitlines() if "env-spelt-otherwise" in line]
    assert "'h100-sxm5 80GB, CUDA 12.4' is" in found and "xnack" not in found, checked.stdout


def test_an_env_with_the_vendors_name_is_told_of_as_spelt_otherwise(
    repo: Path, store: Store
) -> None:
    add(repo, "Tiling - +5%", 1.05)
    done = run_kexp(
        "add", "--summary", "Unroll - +10%", "--score", "1.1", "--operator", OPERATOR,
        "--dtype", "bf16", "--env", f"NVIDIA {ENV}", cwd=repo,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    (warned,) = [line for line in done.stderr.splitlines() if "spelt otherwise" in line]
    assert f"but {ENV!r} is, spelt otherwise" in warned, warned


def test_the_mcp_consult_says_it_in_the_tools_words(repo: Path, store: Store) -> None:
    pytest.importorskip("mcp")
    add(repo, "A - +30%", 1.3)
    second = add(repo, "B - +40%", 1.4, dtype="torch.bfloat16")
    answer = consulted_by_mcp(repo)
    (note,) = [line for line in answer.splitlines() if "read as one with" in line]
    assert f'the update tool with exp_id: "{second[:10]}' in note, note
    assert '"dtype_sig": VALUE' in note and "kexp update" not in note, note


def test_a_step_on_its_parents_machine_spelt_otherwise_is_told_to_write_that_spelling(
    repo: Path, store: Store
) -> None:
    root = add(repo, "A - +30%", 1.3)
    done = run_kexp(
        "add", "--json", "--pid", root, "--summary", "C - +5%", "--score", "1.05",
        "--env", "NVIDIA H100-SXM5 80GB, CUDA 12.4", cwd=repo,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    step = json.loads(done.stdout)["id"]
    (warned,) = [line for line in done.stderr.splitlines() if "its parent" in line]
    assert f"on {ENV!r}, spelt otherwise: if it is that machine, write that spelling" in warned
    assert f"kexp update {step} --set env=VALUE" in warned, warned
    checked = " ".join(run_kexp("validate", cwd=repo).stdout.split())
    assert "env-spelt-otherwise" in checked, checked  # validate says it alike:
    assert "two machines" not in checked, checked  # a spelling, not another machine
