"""kexp lessons on a store of many failures, as a user reads it at a terminal: the
lessons that taught one key insight are one entry with how many they are, at most the
default limit of entries a group (as kexp top's), and a last line saying how many more
and how to see them; -n and --all show them."""

from __future__ import annotations

import json
from pathlib import Path

from conftest import experiment_fields, run_kexp

from kexp import Store


def regression(store: Store, summary: str, insight: str) -> str:
    description = f"**Approach**: {summary}\n\n**Key insight**: {insight}"
    exp = store.create_experiment(
        **experiment_fields(change_summary=summary, score=0.9, detailed_description=description)
    )
    return exp.id


def test_lessons_take_one_insight_together_and_say_how_many_more(repo: Path) -> None:
    store = Store(repo)
    same = [regression(store, "Split-K 2 - -10%", "Guard split-K by size")]
    for n in range(24):
        regression(store, f"Tile {n} - -10%", f"Tile {n} spills registers")
    same += [regression(store, f"Split-K {n} - -10%", "Guard split-K by size") for n in (4, 8)]
    lines = run_kexp("lessons", cwd=repo, env={"COLUMNS": "80"}).stdout.splitlines()
    assert lines[0] == "REGRESSION (27)"
    said = [line for line in lines if "Guard split-K by size" in line]
    assert said == ["      Key insight (3 lessons): Guard split-K by size"], lines
    assert sum(same[-1][:10] in line for line in lines) == 1  # its newest stands for them
    assert not any(old[:10] in line for old in same[:2] for line in lines)
    assert sum("Key insight" in line for line in lines) == 20  # top's default
    assert lines[-1] == "(5 more lesson(s) not shown: -n 100 shows more, --all each lesson)"
    assert all(len(line) <= 80 for line in lines)
    more = run_kexp("lessons", "-n", "100", cwd=repo).stdout
    assert more.count("Key insight") == 25 and "not shown" not in more
    every = run_kexp("lessons", "--all", cwd=repo).stdout
    assert every.count("Key insight: Guard split-K by size") == 3 and "not shown" not in every
    data = json.loads(run_kexp("lessons", "--json", cwd=repo).stdout)
    assert len(data["regression"]) == 27  # JSON: every lesson, as before


def _add(
    repo: Path,
    summary: str,
    score: str,
    *more: str,
    operator: str = "csrc/gemm.cu: sgemm",
    dtype: str = "fp16",
    env: str = "H100, CUDA 12.4",
) -> str:
    """``kexp add`` as a user runs it; the new experiment's id."""
    printed = run_kexp(
        "add", "--summary", summary, "--score", score, "--operator", operator, "--dtype",
        dtype, "--env", env, "--description", "**Key insight**: registers", "--json", *more,
        cwd=repo,
    )  # fmt: skip
    return str(json.loads(printed.stdout)["id"])


def test_lessons_name_their_campaign_and_fold_only_within_one(repo: Path) -> None:
    """A lead reads lessons over two kernels on two GPUs: one key insight learnt on each
    is two entries, each naming its operator, dtype and env; a step measured against
    the reference but slower than its parent says its speedup over the parent."""
    tiling = _add(repo, "Tiling - +30%", "1.30")
    gemm = _add(
        repo, "Unroll 8 - below parent", "1.03", "--pid", tiling,
        "--measured-against", "reference",
    )  # fmt: skip
    attn = _add(repo, "Unroll 8 - -3%", "0.97", operator="csrc/attn.hip: flash_attn_fwd",
                dtype="bf16", env="MI300X, ROCm 6.2")  # fmt: skip
    again = _add(repo, "Unroll 8 again - -3%", "0.96", operator="csrc/attn.hip: flash_attn_fwd",
                 dtype="bf16", env="MI300X, ROCm 6.2")  # fmt: skip
    lines = run_kexp("lessons", cwd=repo, env={"COLUMNS": "80"}).stdout.splitlines()
    assert lines[0] == "REGRESSION (3)", lines
    assert all(len(line) <= 80 for line in lines)
    text = "\n".join(lines)
    assert gemm[:10] in text and again[:10] in text and attn[:10] not in text, text
    assert "      On: csrc/gemm.cu: sgemm · fp16 · H100, CUDA 12.4" in lines
    assert "      On: csrc/attn.hip: flash_attn_fwd · bf16 · MI300X, ROCm 6.2" in lines
    assert "      Key insight (2 lessons): registers" in lines  # the two on MI300X
    over = f"      Over parent {tiling[:10]}: 0.7923 (-20.8%); 1.0300 is over the reference"
    assert over in lines, text
    data = json.loads(run_kexp("lessons", "--json", cwd=repo).stdout)
    entry = next(e for e in data["regression"] if e["id"] == gemm)
    assert entry["env"] == "H100, CUDA 12.4" and round(entry["over_parent"], 4) == 0.7923
    assert "over_parent" not in next(e for e in data["regression"] if e["id"] == attn)


def test_a_lesson_s_campaign_keeps_its_kernel_s_name_at_80_columns(repo: Path) -> None:
    """A long operator path and a long env: the campaign line wraps at 80 columns,
    never cut (a reader greps for the operator): the kernel's name whole on a line."""
    env = "H100 SXM5 80GB, CUDA 12.4, driver 550.54.15, Triton 3.1.0, PyTorch 2.5.1"
    operator = "csrc/quantization/fp8/kernels/scaled_mm_dispatch.cu: scaled_mm_fp8_kernel"
    _add(repo, "Split-K 4 - -3%", "0.97", operator=operator, env=env)
    lines = run_kexp("lessons", cwd=repo, env={"COLUMNS": "80"}).stdout.splitlines()
    assert all(len(line) <= 80 for line in lines), lines
    at = next(i for i, line in enumerate(lines) if line.startswith("      On: "))
    assert not any("…" in line for line in lines), lines
    assert any("scaled_mm_fp8_kernel" in line for line in lines[at : at + 3]), lines
    said = " ".join(line.strip() for line in lines[at : at + 4])
    assert said.startswith(f"On: {operator} · fp16 · "), lines
    assert f"· {env}" in " ".join(said.split()), lines
