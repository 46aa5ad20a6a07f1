"""An operator's case is its own (trial T, T02): ``k.py:Gemm`` and ``k.py:gemm`` are two
functions, ``K.py`` and ``k.py`` two files on a case-sensitive file system. The campaign
key lowercased the operator, so ``kexp stats``, ``tree`` and ``report`` merged them, and
``kexp context --operator k.py:Gemm`` gave the ``k.py:gemm`` step as its current best,
without a word. Now an operator's key keeps its case (a dtype's and an env's do not:
``H100`` and ``h100`` are one machine); a filter still reads any case as a query, the
value recorded exactly alone, and says when it reads two kernels (the "several" note)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from conftest import run_kexp


def add(root: Path, operator: str, summary: str, score: float, env: str = "H100") -> str:
    """Record a root step of ``operator`` measured against the reference; its id."""
    done = run_kexp(
        "add", "--json", "--summary", summary, "--score", str(score),
        "--operator", operator, "--dtype", "fp16", "--env", env,
        "--measured-against", "reference", cwd=root,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    return str(json.loads(done.stdout)["id"])


@pytest.fixture
def kernels(repo: Path) -> tuple[Path, str, str]:
    """``k.py:Gemm`` at 1.1x (on ``H100``) and ``k.py:gemm`` at 1.3x (on ``h100``)."""
    upper = add(repo, "k.py:Gemm", "Gemm: tile 64 - +10%", 1.1)
    lower = add(repo, "k.py:gemm", "gemm: split-k - +30%", 1.3, env="h100")
    return repo, upper, lower


def test_stats_and_report_keep_two_kernels_apart_by_case(kernels: tuple[Path, str, str]) -> None:
    root, upper, lower = kernels
    add(root, "k.py: gemm", "gemm: unroll - +20%", 1.2)  # spacing: the same kernel
    stats = json.loads(run_kexp("stats", "--json", cwd=root).stdout)
    assert {op: n["total"] for op, n in stats["by_operator"].items()} == {
        "k.py:Gemm": 1,
        "k.py:gemm": 2,
    }, stats["by_operator"]
    bests = {b["operator_sig"]: b["id"] for b in stats["best"]}
    assert bests == {"k.py:Gemm": upper, "k.py:gemm": lower}, stats["best"]
    done = run_kexp("report", "--output", str(root / "site"), cwd=root)
    assert done.returncode == 0, done.stderr
    assert len(list((root / "site" / "op").glob("*.html"))) == 2


def test_files_named_apart_by_case_are_two_operators(repo: Path) -> None:
    add(repo, "K.py:f", "upper file - +10%", 1.1)
    add(repo, "k.py:f", "lower file - +30%", 1.3)
    stats = json.loads(run_kexp("stats", "--json", cwd=repo).stdout)
    assert sorted(stats["by_operator"]) == ["K.py:f", "k.py:f"], stats["by_operator"]


def test_context_of_one_kernel_reads_it_alone(kernels: tuple[Path, str, str]) -> None:
    root, upper, _ = kernels
    asked = ("context", "--operator", "k.py:Gemm", "--dtype", "fp16", "--env", "H100")
    data = json.loads(run_kexp(*asked, "--json", cwd=root).stdout)
    assert data["best"]["id"] == upper, data["best"]
    header = data["context"]
    assert header["experiments_on_operator"] == 1, header
    (note,) = header["read_alone"]
    assert "'k.py:Gemm' read alone" in note and "'k.py:gemm'" in note, note
    assert not header.get("spelt_as_one"), header  # no spellings of one kernel
    # top reads it as context does, and says what it left out.
    top = run_kexp("top", "--json", "--operator", "k.py:Gemm", cwd=root)
    assert [row["id"] for row in json.loads(top.stdout)] == [upper], top.stdout
    assert "'k.py:gemm'" in top.stderr, top.stderr


def test_a_query_in_another_case_says_it_reads_two_kernels(
    kernels: tuple[Path, str, str],
) -> None:
    root, upper, lower = kernels
    asked = ("context", "--operator", "GEMM", "--dtype", "fp16", "--env", "H100")
    data = json.loads(run_kexp(*asked, "--json", cwd=root).stdout)
    (several,) = data["context"]["several"]
    assert {(m["value"], m["best"]) for m in several["matched"]} == {
        ("k.py:Gemm", upper),
        ("k.py:gemm", lower),
    }, several
    text = run_kexp(*asked, cwd=root).stdout
    assert "'GEMM' matches 2 operators" in text, text
    best = text.split("## Current best", 1)[1].split("\n\n", 1)[0]
    assert lower[:10] in best and "(k.py:gemm)" in best, best  # names its own kernel
    # The whole name in another case matches both kernels' names: both said, not one.
    alone = run_kexp("context", "--operator", "K.PY:GEMM", "--json", cwd=root)
    assert json.loads(alone.stdout)["context"]["several"], alone.stdout  # two: both said


def test_the_closest_operators_are_found_in_any_case(repo: Path) -> None:
    # An agent names the kernel in its own words; "layer norm" is in LayerNorm's name.
    add(repo, "j.py:cache_layer_kernel", "cache - +10%", 1.1)
    add(repo, "k.py:LayerNorm", "norm - +10%", 1.1)
    data = json.loads(run_kexp("context", "--operator", "layer norm", "--json", cwd=repo).stdout)
    assert [item["operator_sig"] for item in data["operators"]] == [
        "k.py:LayerNorm",
        "j.py:cache_layer_kernel",
    ], data["operators"]
