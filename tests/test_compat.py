"""The predecessor's module ``kernel_exp_dataclass`` and the skill's query examples."""

from __future__ import annotations

import dataclasses
import importlib.util
import os
import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType

import pytest
from conftest import REPO_ROOT, experiment_fields

import kexp
from kexp import KernelExperiment, Store

# The skill's examples, verbatim.
CACHE_SNIPPET = """\
from kernel_exp_dataclass import list_experiments
experiments = list_experiments()
cache_exps = [e for e in experiments if 'cache' in e.operator_sig.lower()]
cache_exps_sorted = sorted(cache_exps, key=lambda x: x.score, reverse=True)
for exp in cache_exps_sorted[:5]:
    print(f"  {exp.score:.4f}x - {exp.change_summary}")
"""
UNROLL_SNIPPET = """\
from kernel_exp_dataclass import list_experiments
experiments = list_experiments()
unroll_exps = [e for e in experiments if 'unroll' in e.change_summary.lower()]
for exp in unroll_exps:
    factor = 'unknown'
    if 'unroll 4' in exp.detailed_description.lower():
        factor = '4'
    elif 'unroll 8' in exp.detailed_description.lower():
        factor = '8'
    print(f"Unroll {factor}: {exp.score:.4f}x - {exp.operator_sig[:50]}")
"""
FAILURES_SNIPPET = """\
from kernel_exp_dataclass import list_experiments
experiments = list_experiments()
failures = [e for e in experiments if e.score < 0.98 or e.is_buggy]
for exp in failures:
    print(f"  ❌ {exp.change_summary}")
    print(f"     Why: {exp.detailed_description[:100]}...")
"""

#: The predecessor's dataclass fields, in its (positional) order.
LEGACY_ORDER = (
    "id",
    "pid",
    "score",
    "raw_result",
    "dtype_sig",
    "env",
    "is_buggy",
    "error_message",
    "change_summary",
    "detailed_description",
    "code_change",
    "base_commit",
    "operator_sig",
    "profiling_info",
    "status",
    "created_at",
)


@pytest.fixture(scope="module")
def compat() -> ModuleType:
    """The repository's ``kernel_exp_dataclass.py``.

    Loaded from the file itself: an editable install holds a copy of it in
    site-packages that goes stale when the file changes.
    """
    spec = importlib.util.spec_from_file_location(
        "kernel_exp_dataclass", REPO_ROOT / "kernel_exp_dataclass.py"
    )
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture
def in_store(repo: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Store]:
    """Work inside a fresh store, as an agent in its checkout does."""
    monkeypatch.chdir(repo)
    yield Store(repo)


def run_snippet(code: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    """Run ``python -c code`` in ``cwd``, as an agent pasting the skill's example would."""
    env = {**os.environ, "PYTHONIOENCODING": "utf-8"}
    env.pop("KEXP_ROOT", None)
    if cwd != REPO_ROOT:
        # Elsewhere, find the repository's module before an installed copy of it.
        env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(REPO_ROOT), env.get("PYTHONPATH")]))
    return subprocess.run(
        [sys.executable, "-c", code],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        encoding="utf-8",
        timeout=120,
    )


def assert_clean_run(result: subprocess.CompletedProcess[str]) -> list[str]:
    assert result.returncode == 0, result.stderr
    assert "Traceback" not in result.stderr and "Traceback" not in result.stdout
    assert "Warning" not in result.stderr, result.stderr
    return result.stdout.splitlines()


# --- the module's helpers -------------------------------------------------------------------


def test_same_class_as_kexp(compat: ModuleType) -> None:
    assert compat.KernelExperiment is KernelExperiment


def test_positional_construction_in_the_predecessors_order(compat: ModuleType) -> None:
    values = (
        "6749f3a0c2d41e7b",
        "6749e1b2a0f3c9d4",
        1.0188,
        "Iteration 3 Results - SUCCESS",
        "bf16",
        "MI300X, ROCm 7.0.0",
        False,
        "",
        "Unroll head loop by 4 - +1.88%",
        "**Approach**: unroll 4",
        "--- a/k.cu\n+++ b/k.cu\n",
        "3f2c9e1",
        "csrc/kernels/cache_kernels.cu: reshape_and_cache_flash",
        "rocprof: VALU busy 71%",
        "done",
        "2026-11-29T15:52:36Z",
    )
    exp = compat.KernelExperiment(*values)
    assert tuple(getattr(exp, name) for name in LEGACY_ORDER) == values
    assert [f.name for f in dataclasses.fields(KernelExperiment)][: len(LEGACY_ORDER)] == list(
        LEGACY_ORDER
    )
    # kexp's additions default to empty, and every text field to "".
    assert (exp.tags, exp.author, exp.combines, exp.results) == ([], "", [], [])
    blank = compat.KernelExperiment()
    assert blank.operator_sig.lower() == "" and blank.change_summary == ""
    assert exp.to_legacy_dict() == dict(zip(LEGACY_ORDER, values, strict=True))


def test_create_returns_the_id_and_get_reads_it_back(compat: ModuleType, in_store: Store) -> None:
    draft = compat.KernelExperiment(
        "",
        "",
        1.0188,
        "Iteration 3 Results - SUCCESS",
        "bf16",
        "MI300X, ROCm 7.0.0",
        False,
        "",
        "Unroll head loop by 4 - +1.88%",
        "**Approach**: unroll 4",
        "",
        "",
        "csrc/kernels/cache_kernels.cu: reshape_and_cache_flash",
        "",
        "done",
        "",
    )
    exp_id = compat.create_experiment(draft)
    assert isinstance(exp_id, str) and re.fullmatch(r"[0-9a-f]{16}", exp_id)
    assert in_store.get_experiment(exp_id).change_summary == "Unroll head loop by 4 - +1.88%"

    found = compat.get_experiment(exp_id)
    assert isinstance(found, KernelExperiment)
    assert (found.id, found.score, found.detailed_description) == (
        exp_id,
        1.0188,
        "**Approach**: unroll 4",
    )
    assert compat.get_experiment(exp_id[:6]) == found
    keyword_id = compat.create_experiment(**experiment_fields(change_summary="Keyword - ok"))
    assert compat.get_experiment(keyword_id).change_summary == "Keyword - ok"


@pytest.mark.parametrize(
    "missing", ["ffffffffffffffff", "ffff", "nonexistent", "../../etc/passwd", "abc", ""]
)
def test_get_returns_none_when_missing(compat: ModuleType, in_store: Store, missing: str) -> None:
    in_store.create_experiment(**experiment_fields(id="6749f3a0c2d41e7b"))
    assert compat.get_experiment(missing) is None


@pytest.mark.parametrize("missing", ["ffffffffffffffff", "ffff", "nonexistent", "../../etc"])
def test_update_raises_key_error_for_an_unknown_id(
    compat: ModuleType, in_store: Store, missing: str
) -> None:
    exp = in_store.create_experiment(**experiment_fields(id="6749f3a0c2d41e7b"))
    assert exp.path is not None
    before = exp.path.read_bytes()
    with pytest.raises(KeyError):
        compat.update_experiment(missing, score=2.0)
    assert exp.path.read_bytes() == before


def test_update_changes_the_experiment(compat: ModuleType, in_store: Store) -> None:
    exp_id = compat.create_experiment(**experiment_fields(status="running", score=0.0))
    updated = compat.update_experiment(exp_id, status="done", score=1.07)
    assert (updated.status, updated.score) == ("done", 1.07)
    assert compat.get_experiment(exp_id).score == 1.07


def test_list_returns_kernel_experiments(compat: ModuleType, in_store: Store) -> None:
    first = compat.create_experiment(**experiment_fields(created_at="2026-01-01T00:00:00Z"))
    second = compat.create_experiment(**experiment_fields(created_at="2026-02-01T00:00:00Z"))
    found = compat.list_experiments()
    assert all(isinstance(e, KernelExperiment) for e in found)
    assert [e.id for e in found] == [first, second]
    assert [e.id for e in compat.list_experiments(min_score=1.0)] == [first, second]


def test_top_returns_dicts_of_key_fields_best_first(compat: ModuleType, in_store: Store) -> None:
    low = compat.create_experiment(**experiment_fields(score=1.01, change_summary="Low - ok"))
    high = compat.create_experiment(**experiment_fields(score=1.2, change_summary="High - ok"))
    mid = compat.create_experiment(**experiment_fields(score=1.1, change_summary="Mid - ok"))
    compat.create_experiment(
        **experiment_fields(score=9.9, is_buggy=True, error_message="segfault")
    )
    compat.create_experiment(**experiment_fields(score=5.0, status="running"))

    top = compat.top_experiments()
    assert all(isinstance(row, dict) for row in top)
    assert [row["id"] for row in top] == [high, mid, low]
    assert [row["score"] for row in top] == [1.2, 1.1, 1.01]
    assert top[0]["change_summary"] == "High - ok"
    for key in ("id", "pid", "score", "change_summary", "operator_sig", "dtype_sig", "env"):
        assert key in top[0]
    assert top[0]["base_commit"] == in_store.get_experiment(high).base_commit
    assert [row["id"] for row in compat.top_experiments(2)] == [high, mid]
    assert [row["id"] for row in compat.top_experiments(max_results=1)] == [high]


def test_delete_reports_whether_there_was_one(compat: ModuleType, in_store: Store) -> None:
    exp_id = compat.create_experiment(**experiment_fields())
    assert compat.delete_experiment(exp_id) is True
    assert compat.get_experiment(exp_id) is None
    assert compat.delete_experiment(exp_id) is False
    assert compat.delete_experiment("nonexistent") is False


def test_the_installed_module_is_importable_anywhere(tmp_path: Path) -> None:
    result = subprocess.run(
        [sys.executable, "-c", "import kernel_exp_dataclass as k; print(k.get_experiment)"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 0, result.stderr


# --- the skill's examples, verbatim -------------------------------------------------------------


def expected_cache_lines(experiments: list[KernelExperiment]) -> list[str]:
    cache = [e for e in experiments if "cache" in e.operator_sig.lower()]
    best = sorted(cache, key=lambda e: -e.score)[:5]
    return [f"  {e.score:.4f}x - {e.change_summary}" for e in best]


def expected_unroll_lines(experiments: list[KernelExperiment]) -> list[str]:
    lines = []
    for e in experiments:
        if "unroll" not in e.change_summary.lower():
            continue
        description = e.detailed_description.lower()
        factor = (
            "4" if "unroll 4" in description else "8" if "unroll 8" in description else "unknown"
        )
        lines.append(f"Unroll {factor}: {e.score:.4f}x - {e.operator_sig[:50]}")
    return lines


def expected_failure_lines(experiments: list[KernelExperiment]) -> list[str]:
    lines = []
    for e in experiments:
        if e.score < 0.98 or e.is_buggy:
            lines.append(f"  ❌ {e.change_summary}")
            lines.append(f"     Why: {e.detailed_description[:100]}...")
    return "\n".join(lines).splitlines()  # a description may hold newlines


def test_cache_snippet_on_the_bundled_experiments() -> None:
    experiments = Store(REPO_ROOT).list_experiments(strict=True)
    lines = assert_clean_run(run_snippet(CACHE_SNIPPET, REPO_ROOT))
    cache = [e for e in experiments if "cache" in e.operator_sig.lower()]
    assert cache, "the bundled experiments include cache-kernel experiments"
    assert lines == expected_cache_lines(experiments)
    assert len(lines) == min(5, len(cache))
    assert all(re.fullmatch(r"  \d+\.\d{4}x - .+", line) for line in lines)
    scores = [float(line.split("x - ")[0]) for line in lines]
    assert scores == sorted(scores, reverse=True)
    assert scores[0] == round(max(e.score for e in cache), 4)


def test_unroll_snippet_on_the_bundled_experiments() -> None:
    experiments = Store(REPO_ROOT).list_experiments(strict=True)
    lines = assert_clean_run(run_snippet(UNROLL_SNIPPET, REPO_ROOT))
    assert lines == expected_unroll_lines(experiments)
    unroll = [e for e in experiments if "unroll" in e.change_summary.lower()]
    assert len(lines) == len(unroll)
    assert any(line.startswith("Unroll 4: ") for line in lines)
    assert any(line.startswith("Unroll 8: ") for line in lines)
    assert all(re.fullmatch(r"Unroll (4|8|unknown): \d+\.\d{4}x - .*", line) for line in lines)


def test_failures_snippet_on_the_bundled_experiments() -> None:
    experiments = Store(REPO_ROOT).list_experiments(strict=True)
    lines = assert_clean_run(run_snippet(FAILURES_SNIPPET, REPO_ROOT))
    failures = [e for e in experiments if e.score < 0.98 or e.is_buggy]
    assert any(e.is_buggy for e in failures) and any(not e.is_buggy for e in failures)
    assert lines == expected_failure_lines(experiments)
    assert sum(line.startswith("  ❌ ") for line in lines) == len(failures)
    assert sum(line.startswith("     Why: ") for line in lines) == len(failures)


@pytest.mark.parametrize("snippet", [CACHE_SNIPPET, UNROLL_SNIPPET, FAILURES_SNIPPET])
def test_snippets_run_from_a_subfolder_of_a_fresh_store(repo: Path, snippet: str) -> None:
    store = Store(repo)
    store.create_experiment(**experiment_fields())  # cache kernel, "unroll 4" in the description
    store.create_experiment(
        **experiment_fields(
            change_summary="Unroll by 8 - +0.4%",
            score=1.004,
            detailed_description="**Approach**: #pragma unroll 8",
        )
    )
    store.create_experiment(
        **experiment_fields(
            change_summary="Crash - segfault",
            score=0.0,
            status="failed",
            is_buggy=True,
            error_message="Memory access fault",
        )
    )
    store.create_experiment(
        change_summary="Bare minimum - ok", score=1, status="done", operator_sig=""
    )
    nested = repo / "csrc" / "kernels"
    nested.mkdir(parents=True)
    lines = assert_clean_run(run_snippet(snippet, nested))
    experiments = store.list_experiments()
    expected = {
        CACHE_SNIPPET: expected_cache_lines,
        UNROLL_SNIPPET: expected_unroll_lines,
        FAILURES_SNIPPET: expected_failure_lines,
    }[snippet](experiments)
    assert lines == expected
    assert lines


def test_snippets_see_what_the_api_sees(repo: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(repo)
    kexp.create_experiment(**experiment_fields(score=0.5, change_summary="Slow - regression"))
    lines = assert_clean_run(run_snippet(FAILURES_SNIPPET, repo))
    assert lines[0] == "  ❌ Slow - regression"
