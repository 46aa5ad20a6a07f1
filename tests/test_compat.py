"""``kernel_exp_dataclass``: the predecessor's contract (``COMPAT.md``), row by row.

Every test works on a real store (a git repository in a temporary folder, or a bare
folder for first use) as a predecessor user's code would, and checks what that code
sees. The skill's query examples and the issue's lineage snippet run verbatim in real
processes.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import importlib.util
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
import typing
import warnings
from collections.abc import Callable, Iterator
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
from conftest import REPO_ROOT, experiment_fields, init_repo, run_kexp
from hypothesis import settings as hypothesis_settings
from hypothesis import strategies as st
from hypothesis.stateful import (
    RuleBasedStateMachine,
    initialize,
    invariant,
    precondition,
    rule,
)

import kexp
from kexp import KernelExperiment, Settings, Store
from kexp.core.errors import ExperimentExistsError, KexpError, KexpWarning, ValidationError
from kexp.core.ids import SHOWN_LENGTH

SKILL_MD = REPO_ROOT / "skill" / "kernel-exp-history" / "SKILL.md"

#: The predecessor's dataclass fields, in its (positional) order (COMPAT.md, "The record").
PREDECESSOR_ORDER = (
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
    "id",
    "pid",
    "created_at",
)
#: The keys of the predecessor's ``top_experiments`` dicts.
TOP_TEN = (
    "base_commit",
    "change_summary",
    "detailed_description",
    "dtype_sig",
    "env",
    "id",
    "operator_sig",
    "profiling_info",
    "raw_result",
    "score",
)
ID_RE = re.compile(r"[0-9a-f]{16}")
#: The predecessor's created_at: ISO 8601 UTC with microseconds and Z.
CREATED_AT_FORMAT = "%Y-%m-%dT%H:%M:%S.%fZ"

#: The lineage code of issue 14, verbatim (plus what it prints to be checked).
LINEAGE_SNIPPET = """\
from kernel_exp_dataclass import KernelExperiment, create_experiment, list_experiments
fields = dict(score=1.02, raw_result="r", dtype_sig="bf16", env="MI300X", is_buggy=False,
              error_message="", change_summary="unroll 4 - +2%", detailed_description="d",
              code_change="", base_commit="abcdef1234567890", operator_sig="a.cu: k",
              profiling_info="p", status="done")
parent = KernelExperiment(**fields)
create_experiment(parent)
print(repr(parent.id))                       # '' : the id was never set on the object
child = KernelExperiment(**{**fields, "score": 1.05}, pid=parent.id)
create_experiment(child)                     # stored with pid '' : lineage lost, no error
print(repr(child.id))
"""


def values_in_predecessor_order() -> tuple[Any, ...]:
    return (
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
        "6749f3a0c2d41e7b",
        "6749e1b2a0f3c9d4",
        "2026-11-29T15:52:36.000001Z",
    )


def predecessor_fields(**overrides: Any) -> dict[str, Any]:
    """The 13 fields the predecessor required, by keyword (a valid experiment)."""
    fields: dict[str, Any] = {
        "score": 1.019,
        "raw_result": "Iteration 1 Results - SUCCESS",
        "dtype_sig": "bf16",
        "env": "MI300X, ROCm 7.0.0",
        "is_buggy": False,
        "error_message": "",
        "change_summary": "Unrolled the inner loop by 4 - +1.90%",
        "detailed_description": "**Approach**: unroll 4\n\n**Key insight**: unrolling helps",
        "code_change": "",
        "base_commit": "",
        "operator_sig": "csrc/kernels/cache_kernels.cu: reshape_and_cache_flash",
        "profiling_info": "Not profiled",
        "status": "done",
    }
    fields.update(overrides)
    return fields


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


@pytest.fixture
def bare(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A kernel repository without a store (none anywhere above it either), as the
    working directory."""
    folder = init_repo(tmp_path / "work")
    monkeypatch.chdir(folder)
    return folder


#: What the kernel repository of ``bare`` holds.
BARE = [".git", "kernel.cu"]


def snapshot(folder: Path) -> dict[str, bytes]:
    """Every file of a store (its cache and git's own files aside) with its bytes."""
    return {
        str(path.relative_to(folder)): path.read_bytes()
        for path in sorted(folder.rglob("*"))
        if path.is_file() and not {".git", ".kexp"} & set(path.relative_to(folder).parts)
    }


def run_python(
    code: str, cwd: Path, *args: str, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    """Run ``python -c code`` (or ``python ARGS``) in ``cwd``, as an agent would."""
    full_env = {**os.environ, "PYTHONIOENCODING": "utf-8", **(env or {})}
    full_env.pop("KEXP_ROOT", None)
    # Find the repository's module before an installed copy of it.
    full_env["PYTHONPATH"] = os.pathsep.join(
        filter(None, [str(REPO_ROOT), full_env.get("PYTHONPATH")])
    )
    command = [sys.executable, *args] if args else [sys.executable, "-c", code]
    return subprocess.run(
        command,
        cwd=cwd,
        env=full_env,
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


# --- the record ---------------------------------------------------------------------------


def test_the_modules_class_is_kexps_with_the_predecessors_to_dict(
    compat: ModuleType, in_store: Store
) -> None:
    assert issubclass(compat.KernelExperiment, KernelExperiment)
    assert KernelExperiment is kexp.KernelExperiment
    assert dataclasses.fields(compat.KernelExperiment) == dataclasses.fields(KernelExperiment)
    exp = compat.KernelExperiment(**predecessor_fields())
    compat.create_experiment(exp)
    stored = in_store.get_experiment(exp.id)
    # Equal both ways to kexp's experiment with the same values, and what the module
    # hands out is its own class (its to_dict the predecessor's).
    got = compat.get_experiment(exp.id)
    assert got == stored and stored == got and got != dataclasses.replace(stored, score=2.0)
    handed_out = [
        compat.get_experiment(exp.id),
        *compat.list_experiments(),
        updated_said_stale(compat, exp.id),
        compat.test_insert_example(),
    ]
    assert all(type(e) is compat.KernelExperiment for e in handed_out)
    assert all(list(e.to_dict()) == list(PREDECESSOR_ORDER) for e in handed_out)
    assert compat.get_experiment(exp.id) == in_store.get_experiment(exp.id)


def updated_said_stale(compat: ModuleType, exp_id: str) -> Any:
    """``update_experiment(exp_id, score=1.5)`` of a "... - +1.90%" experiment: what it
    returns, and the warning that its summary states the old score."""
    with pytest.warns(KexpWarning, match=r"change_summary still states the old score \(\+1.90%\)"):
        return compat.update_experiment(exp_id, score=1.5)


def test_positional_construction_in_the_predecessors_order(compat: ModuleType) -> None:
    values = values_in_predecessor_order()
    exp = compat.KernelExperiment(*values)
    assert tuple(getattr(exp, name) for name in PREDECESSOR_ORDER) == values
    names = [f.name for f in dataclasses.fields(KernelExperiment)]
    assert names[: len(PREDECESSOR_ORDER)] == list(PREDECESSOR_ORDER)
    # kexp's additions come after, empty by default.
    assert (exp.tags, exp.author, exp.combines, exp.results) == ([], "", [], [])
    # The 13 the predecessor required, alone by position: the rest are defaults.
    short = compat.KernelExperiment(*values[:13])
    assert (short.score, short.status, short.pid) == (1.0188, "done", "")


def test_keyword_construction_of_the_required_fields(compat: ModuleType) -> None:
    fields = predecessor_fields()
    exp = compat.KernelExperiment(**fields)
    assert {name: getattr(exp, name) for name in fields} == fields
    assert exp.pid == ""


def test_id_is_fresh_16_hex_made_when_built(compat: ModuleType) -> None:
    made = [compat.KernelExperiment(**predecessor_fields()) for _ in range(200)]
    assert all(ID_RE.fullmatch(exp.id) for exp in made)
    assert len({exp.id for exp in made}) == len(made)  # fresh for every object
    given = compat.KernelExperiment(**predecessor_fields(), id="6749f3a0c2d41e7b")
    assert given.id == "6749f3a0c2d41e7b"


def test_created_at_is_utc_now_with_microseconds_made_when_built(compat: ModuleType) -> None:
    before = time.time()
    exp = compat.KernelExperiment(**predecessor_fields())
    after = time.time()
    created = dt.datetime.strptime(exp.created_at, CREATED_AT_FORMAT)
    stamp = created.replace(tzinfo=dt.timezone.utc).timestamp()
    assert before - 1e-6 <= stamp <= after + 1e-6
    assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{6}Z", exp.created_at)
    # Known before it is stored, and kept when it is.
    later = compat.KernelExperiment(**predecessor_fields(), created_at="2026-01-02T03:04:05Z")
    assert later.created_at == "2026-01-02T03:04:05Z"


def test_to_dict_is_asdict_of_the_16_predecessor_keys_in_order(compat: ModuleType) -> None:
    # COMPAT.md: "to_dict() is dataclasses.asdict(self): the 16 keys".
    exp = compat.KernelExperiment(*values_in_predecessor_order(), tags=["unroll"])
    data = exp.to_dict()
    assert list(data) == list(PREDECESSOR_ORDER)
    whole = dataclasses.asdict(exp)
    assert data == {name: whole[name] for name in PREDECESSOR_ORDER}
    assert json.loads(json.dumps(data)) == data
    assert tuple(data.values()) == values_in_predecessor_order()
    # A predecessor-era script: a CSV row under the fields' header, rebuilt positionally.
    assert compat.KernelExperiment(*data.values()) == dataclasses.replace(exp, tags=[])
    assert json.loads(json.dumps(dataclasses.asdict(exp)))["score"] == 1.0188
    # kexp's own class keeps its canonical dict (every stored field).
    assert set(KernelExperiment.to_dict(exp)) > set(PREDECESSOR_ORDER)


def test_kexps_own_to_dict_keeps_the_dataclass_field_order(store: Store, repo: Path) -> None:
    """COMPAT.md: ``to_dict()`` is ``dataclasses.asdict``, in field order. kexp's own
    class listed its keys in the file's order instead (id first, score fifth): a script
    that rebuilt an experiment positionally from ``kexp.KernelExperiment(...).to_dict()``
    values, or zipped them with the fields, got them crossed. Its keys are the stored
    fields in the dataclass's order, the predecessor's 16 first; ``kexp show --json``
    keeps its own order (id first)."""
    exp = store.create_experiment(**experiment_fields(tags=["unroll"]))
    data = exp.to_dict()
    order = [field.name for field in dataclasses.fields(KernelExperiment)]
    assert list(data) == [name for name in order if name in data]
    assert tuple(data)[:16] == PREDECESSOR_ORDER
    rebuilt = KernelExperiment(*list(data.values())[:16])  # a predecessor-era script
    assert [getattr(rebuilt, name) for name in PREDECESSOR_ORDER] == list(data.values())[:16]
    shown = json.loads(run_kexp("show", exp.id, "--json", cwd=repo).stdout)
    assert list(shown)[:2] == ["id", "pid"], list(shown)


def test_from_dict_of_a_predecessor_record(compat: ModuleType) -> None:
    record = dict(zip(PREDECESSOR_ORDER, values_in_predecessor_order(), strict=True))
    exp = compat.KernelExperiment.from_dict(record)
    assert exp == compat.KernelExperiment(**record)
    assert exp.to_dict()["id"] == "6749f3a0c2d41e7b"
    assert compat.KernelExperiment.from_dict(exp.to_dict()) == exp
    # Without an id or created_at, fresh ones, as KernelExperiment(**d) made them.
    fresh = compat.KernelExperiment.from_dict(predecessor_fields())
    assert ID_RE.fullmatch(fresh.id) and fresh.created_at.endswith("Z")


def test_the_lineage_snippet_keeps_the_parents_id(repo: Path) -> None:
    lines = assert_clean_run(run_python(LINEAGE_SNIPPET, repo))
    parent_id, child_id = (line.strip("'") for line in lines)
    assert ID_RE.fullmatch(parent_id) and ID_RE.fullmatch(child_id) and parent_id != child_id
    store = Store(repo)
    assert store.get_experiment(child_id).pid == parent_id
    assert [e.id for e in store.children(parent_id)] == [child_id]
    assert store.get_experiment(parent_id).score == 1.02


# --- the helpers --------------------------------------------------------------------------


def test_create_returns_none_and_stores_the_experiment_as_given(
    compat: ModuleType, in_store: Store
) -> None:
    exp = compat.KernelExperiment(*values_in_predecessor_order()[:13])
    assert compat.create_experiment(exp) is None
    stored = in_store.get_experiment(exp.id)
    for name in PREDECESSOR_ORDER:
        assert getattr(stored, name) == getattr(exp, name), name
    assert exp.path is None and exp.author == ""  # the caller's object is not changed
    assert stored.author == "Test Engineer"  # kexp's addition, from git


def test_create_of_an_existing_id_raises_value_error(compat: ModuleType, in_store: Store) -> None:
    exp = compat.KernelExperiment(**predecessor_fields())
    compat.create_experiment(exp)
    before = snapshot(in_store.root)
    for again in (exp, dataclasses.replace(exp, change_summary="Other summary - ok")):
        with pytest.raises(ValueError, match=exp.id) as caught:
            compat.create_experiment(again)
        assert isinstance(caught.value, ExperimentExistsError)
        assert "already exists" in str(caught.value) and "fresh id" in str(caught.value)
    assert snapshot(in_store.root) == before
    assert [e.id for e in compat.list_experiments()] == [exp.id]


def test_create_fills_in_an_empty_id(compat: ModuleType, in_store: Store) -> None:
    exp = compat.KernelExperiment(**predecessor_fields(), id="", created_at="")
    compat.create_experiment(exp)
    assert ID_RE.fullmatch(exp.id)
    assert compat.get_experiment(exp.id).created_at == exp.created_at != ""


def test_get_returns_the_experiment(compat: ModuleType, in_store: Store) -> None:
    exp = compat.KernelExperiment(**predecessor_fields(score=1.25))
    compat.create_experiment(exp)
    found = compat.get_experiment(exp.id)
    assert isinstance(found, KernelExperiment)
    assert (found.id, found.score, found.detailed_description) == (
        exp.id,
        1.25,
        exp.detailed_description,
    )
    assert isinstance(found.score, float) and isinstance(found.is_buggy, bool)


@pytest.mark.parametrize(
    "key",
    [
        "ffffffffffffffff",  # an id, of no experiment
        "6749f3a0c2d4",  # a prefix of one: exact ids only
        "6749",
        "6749F3A0C2D41E7B",  # another spelling of one
        " 6749f3a0c2d41e7b",
        "nonexistent",
        "../../etc/passwd",
        "",
        None,
        12,
    ],
)
def test_get_returns_none_for_anything_but_an_existing_id(
    compat: ModuleType, in_store: Store, key: object
) -> None:
    compat.create_experiment(compat.KernelExperiment(**predecessor_fields(), id="6749f3a0c2d41e7b"))
    compat.create_experiment(compat.KernelExperiment(**predecessor_fields(), id="6749f3a000000001"))
    assert compat.get_experiment(key) is None
    assert compat.get_experiment("6749f3a0c2d41e7b") is not None


def test_list_returns_every_record_in_id_order(compat: ModuleType, in_store: Store) -> None:
    # Made in the opposite order of their ids (imported ids are random, not by time).
    made = [
        compat.KernelExperiment(**predecessor_fields(created_at=created), id=exp_id)
        for exp_id, created in [
            ("f000000000000001", "2026-01-01T00:00:00.000001Z"),
            ("a000000000000002", "2026-02-01T00:00:00.000001Z"),
            ("0000000000000003", "2026-03-01T00:00:00.000001Z"),
        ]
    ]
    buggy = compat.KernelExperiment(
        **predecessor_fields(score=0.0, is_buggy=True, error_message="segfault", status="failed")
    )
    pending = compat.KernelExperiment(**predecessor_fields(score=0.0, status="running"))
    for exp in [*made, buggy, pending]:
        compat.create_experiment(exp)
    found = compat.list_experiments()
    assert all(isinstance(e, KernelExperiment) for e in found)
    assert [e.id for e in found] == sorted(e.id for e in [*made, buggy, pending])
    assert found[0].id == "0000000000000003"
    assert compat.list_experiments(min_score=1.0) == [e for e in found if e.score >= 1.0]


def test_top_ranks_every_record_by_score_as_dicts(compat: ModuleType, in_store: Store) -> None:
    def make(score: float, **fields: Any) -> KernelExperiment:
        exp = compat.KernelExperiment(**predecessor_fields(score=score, **fields))
        compat.create_experiment(exp)
        return exp

    low, high, mid = make(1.01), make(1.2), make(1.1)
    buggy = make(9.9, is_buggy=True, error_message="segfault", status="failed")
    pending = make(5.0, status="running")
    regression = make(0.5, raw_result="Iteration 9 Results - REGRESSION")

    top = compat.top_experiments()
    assert all(isinstance(row, dict) for row in top)
    ranked = (buggy, pending, high, mid, low, regression)
    assert [row["id"] for row in top] == [e.id for e in ranked]
    for row, exp in zip(top, ranked, strict=True):
        stored = in_store.get_experiment(exp.id)
        assert {key: row[key] for key in TOP_TEN} == {key: getattr(stored, key) for key in TOP_TEN}
    # kexp's extra keys tell a buggy or pending high score from a real one.
    assert (top[0]["is_buggy"], top[0]["status"], top[0]["outcome"]) == (True, "failed", "buggy")
    assert (top[1]["outcome"], top[-1]["outcome"]) == ("pending", "regression")
    assert top[-1]["raw_result"] == "Iteration 9 Results - REGRESSION"


def test_top_returns_the_first_max_results(compat: ModuleType, in_store: Store) -> None:
    made = [compat.KernelExperiment(**predecessor_fields(score=1 + n / 100)) for n in range(22)]
    for exp in made:
        compat.create_experiment(exp)
    best = [e.id for e in sorted(made, key=lambda e: e.score, reverse=True)]
    assert [row["id"] for row in compat.top_experiments()] == best[:20]
    assert [row["id"] for row in compat.top_experiments(3)] == best[:3]
    assert [row["id"] for row in compat.top_experiments(max_results=30)] == best
    assert compat.top_experiments(0) == compat.top_experiments(-5) == []


def test_top_orders_equal_scores_by_id(compat: ModuleType, in_store: Store) -> None:
    # kexp's own ranking puts the newest of equal scores first; the predecessor's file
    # was in id order. Here the newest has the highest id.
    ids = ["6749f3a000000003", "6749f3a000000001", "6749f3a000000002"]
    for number, exp_id in enumerate(ids):
        created = f"2026-01-0{number + 1}T00:00:00.000000Z"
        exp = compat.KernelExperiment(**predecessor_fields(score=1.5, created_at=created))
        compat.create_experiment(dataclasses.replace(exp, id=exp_id))
    compat.create_experiment(compat.KernelExperiment(**predecessor_fields(score=2.0)))
    assert [row["id"] for row in compat.top_experiments()][1:] == sorted(ids)
    assert [row["id"] for row in compat.top_experiments(2)][1:] == ["6749f3a000000001"]
    assert [row["id"] for row in compat.top_experiments(3)][1:] == sorted(ids)[:2]
    assert [row["score"] for row in compat.top_experiments(2)] == [2.0, 1.5]


def test_update_returns_the_updated_experiment(compat: ModuleType, in_store: Store) -> None:
    exp = compat.KernelExperiment(**predecessor_fields(status="running", score=0.0))
    compat.create_experiment(exp)
    updated = compat.update_experiment(exp.id, status="done", score=1.07)
    assert isinstance(updated, KernelExperiment)
    assert (updated.id, updated.status, updated.score) == (exp.id, "done", 1.07)
    assert updated.change_summary == exp.change_summary  # merged into the record
    assert compat.get_experiment(exp.id) == updated


def test_a_parent_given_by_update_keeps_the_score_over_the_reference(
    compat: ModuleType, in_store: Store
) -> None:
    # The predecessor's scores are speedups over the operator's original code: a
    # parent named later (as create_experiment with a pid) must not make 1.12 a step
    # over the parent's 1.10, an invented 1.232 that would rank first.
    parent = compat.KernelExperiment(**predecessor_fields(score=1.10))
    compat.create_experiment(parent)
    given = compat.KernelExperiment(**predecessor_fields(score=1.12), pid=parent.id)
    compat.create_experiment(given)
    later = compat.KernelExperiment(**predecessor_fields(score=1.12))
    compat.create_experiment(later)
    updated = compat.update_experiment(later.id, pid=parent.id)
    for exp_id in (given.id, later.id):
        stored = kexp.get_experiment(exp_id)
        assert (stored.pid, stored.measured_against) == (parent.id, "reference")
        assert stored.cumulative_score == pytest.approx(1.12)
    assert updated.measured_against == "reference"
    ranked = in_store.top_experiments(3)
    assert [round(exp.cumulative_score or 0, 3) for exp in ranked] == [1.12, 1.12, 1.1]
    # What the caller says is kept: a step it calls one stays a step.
    compat.update_experiment(later.id, pid=parent.id, measured_against="parent")
    assert kexp.get_experiment(later.id).cumulative_score == pytest.approx(1.10 * 1.12)
    # Handed out with its 1.232 over the original code, it keeps it without a parent.
    with pytest.warns(KexpWarning, match="keeps its speedup over the operator's original"):
        compat.update_experiment(later.id, pid="")
    stored = kexp.get_experiment(later.id)
    assert (stored.pid, stored.score) == ("", pytest.approx(1.10 * 1.12))
    assert stored.cumulative_score == pytest.approx(1.10 * 1.12)


@pytest.mark.parametrize(
    "missing", ["ffffffffffffffff", "6749f3a0c2d4", "6749", "nonexistent", "../../etc", ""]
)
def test_update_raises_key_error_for_an_unknown_id(
    compat: ModuleType, in_store: Store, missing: str
) -> None:
    compat.create_experiment(compat.KernelExperiment(**predecessor_fields(), id="6749f3a0c2d41e7b"))
    before = snapshot(in_store.root)
    with pytest.raises(KeyError) as caught:
        compat.update_experiment(missing, score=2.0)
    assert "full ids" in str(caught.value) or "no experiment" in str(caught.value)
    assert snapshot(in_store.root) == before


def test_delete_returns_none(compat: ModuleType, in_store: Store) -> None:
    exp = compat.KernelExperiment(**predecessor_fields())
    keep = compat.KernelExperiment(**predecessor_fields())
    compat.create_experiment(exp)
    compat.create_experiment(keep)
    assert compat.delete_experiment(exp.id) is None
    assert compat.get_experiment(exp.id) is None
    assert [e.id for e in compat.list_experiments()] == [keep.id]


@pytest.mark.parametrize("missing", ["ffffffffffffffff", "6749f3a0c2d4", "6749", "nonexistent"])
def test_delete_raises_key_error_for_an_unknown_id(
    compat: ModuleType, in_store: Store, missing: str
) -> None:
    compat.create_experiment(compat.KernelExperiment(**predecessor_fields(), id="6749f3a0c2d41e7b"))
    before = snapshot(in_store.root)
    with pytest.raises(KeyError):
        compat.delete_experiment(missing)
    assert snapshot(in_store.root) == before
    compat.delete_experiment("6749f3a0c2d41e7b")
    with pytest.raises(KeyError):
        compat.delete_experiment("6749f3a0c2d41e7b")  # deleted already


def test_insert_example_returns_the_sample_it_inserted(compat: ModuleType, in_store: Store) -> None:
    sample = compat.test_insert_example()
    assert isinstance(sample, KernelExperiment)
    assert in_store.get_experiment(sample.id) == sample
    assert [e.id for e in compat.list_experiments()] == [sample.id]


def test_running_the_module_inserts_a_sample(repo: Path) -> None:
    result = run_python("", repo, "-m", "kernel_exp_dataclass")
    lines = assert_clean_run(result)
    match = re.fullmatch(r"Inserted sample experiment with id: ([0-9a-f]{16})", lines[-1])
    assert match and len(lines) == 1
    assert Store(repo).get_experiment(match.group(1)).change_summary.startswith("Sample")


def test_module_names_db_path_and_status(compat: ModuleType) -> None:
    assert isinstance(compat.DB_PATH, Path) and not compat.DB_PATH.is_absolute()
    assert typing.get_origin(compat.Status) is typing.Literal
    assert typing.get_args(compat.Status) == ("new", "running", "done", "failed", "timeout")
    for name in (
        "KernelExperiment",
        "create_experiment",
        "get_experiment",
        "list_experiments",
        "top_experiments",
        "update_experiment",
        "delete_experiment",
        "test_insert_example",
        "DB_PATH",
        "Status",
    ):
        assert name in compat.__all__ and hasattr(compat, name)


def test_the_installed_module_is_importable_anywhere(tmp_path: Path) -> None:
    result = subprocess.run(
        [sys.executable, "-c", "import kernel_exp_dataclass as k; print(k.get_experiment)"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 0, result.stderr


# --- first use: no store yet ----------------------------------------------------------------


def test_first_use_reads_return_nothing_and_write_nothing(compat: ModuleType, bare: Path) -> None:
    assert compat.list_experiments() == []
    assert compat.top_experiments() == []
    assert compat.get_experiment("6749f3a0c2d41e7b") is None
    with pytest.raises(KeyError):
        compat.update_experiment("6749f3a0c2d41e7b", score=1.0)
    with pytest.raises(KeyError):
        compat.delete_experiment("6749f3a0c2d41e7b")
    assert sorted(p.name for p in bare.iterdir()) == BARE


#: A predecessor user's script: reads, then reads again (one process).
READS_SNIPPET = """\
import warnings
warnings.simplefilter("always")
from kernel_exp_dataclass import get_experiment, list_experiments, top_experiments
print(len(list_experiments()), len(top_experiments(3)), get_experiment("a000000000000002"))
print(len(list_experiments()))
"""


def test_a_predecessor_database_beside_the_script_is_named_with_its_import_once(
    tmp_path: Path,
) -> None:
    # The predecessor's DB_PATH: kernel_experiments_db.json in the working directory.
    # kexp does not read it; the caller must learn why its reads come back empty.
    folder = init_repo(tmp_path / "work")
    records = {
        f"a00000000000000{n}": {
            **dict(zip(PREDECESSOR_ORDER, values_in_predecessor_order(), strict=True)),
            "id": f"a00000000000000{n}",
            "pid": "",
            "base_commit": "0" * 40,
        }
        for n in (1, 2)
    }
    database = folder / "kernel_experiments_db.json"
    database.write_text(json.dumps(records, indent=2, sort_keys=True), encoding="utf-8")

    def warnings_of(result: subprocess.CompletedProcess[str]) -> list[str]:
        assert result.returncode == 0, result.stderr
        return [line for line in result.stderr.splitlines() if "KexpWarning" in line]

    bare = run_python(READS_SNIPPET, folder)
    (warning,) = warnings_of(bare)  # once, though the script reads four times
    assert str(database) in warning and "which kexp does not read" in warning
    assert f"run 'kexp init', then 'kexp import {database}'" in warning
    assert bare.stdout.splitlines() == ["0 0 None", "0"]

    run_kexp("init", cwd=folder)
    (warning,) = warnings_of(run_python(READS_SNIPPET, folder))
    assert "its 2 record(s) missing from the store" in warning
    assert f"with 'kexp import {database}'" in warning
    run_kexp("import", "--no-check-commits", str(database), cwd=folder)
    imported = run_python(READS_SNIPPET, folder)
    assert warnings_of(imported) == []
    assert imported.stdout.splitlines()[1] == "2"


def test_first_write_makes_the_store_in_the_working_directory_and_says_where_once(
    compat: ModuleType, bare: Path
) -> None:
    first = compat.KernelExperiment(**predecessor_fields())
    with pytest.warns(KexpWarning) as warned:
        compat.create_experiment(first)
    said = [w for w in warned if "there was no kexp store" in str(w.message)]
    assert len(said) == 1 and str(bare / compat.DB_PATH) in str(said[0].message)
    assert said[0].filename == __file__  # it points at the caller's line
    assert (bare / compat.DB_PATH).is_dir() and (bare / compat.DB_PATH).resolve() == (
        bare / "experiments"
    )
    second = compat.KernelExperiment(**predecessor_fields(score=1.5))
    with warnings.catch_warnings(record=True) as later:
        warnings.simplefilter("always")
        compat.create_experiment(second)
    assert not [w for w in later if "there was no kexp store" in str(w.message)]
    assert [e.id for e in compat.list_experiments()] == sorted([first.id, second.id])
    assert Store(bare).get_experiment(first.id).change_summary == first.change_summary


def test_first_use_with_kexp_root_makes_the_store_there(
    compat: ModuleType, bare: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    elsewhere = tmp_path / "history"
    elsewhere.mkdir()
    monkeypatch.setenv("KEXP_ROOT", str(elsewhere))
    assert compat.list_experiments() == [] and compat.top_experiments() == []
    # Not a git repository: base_commit is given (and the author is not filled in).
    exp = compat.KernelExperiment(**predecessor_fields(base_commit="3f2c9e1a7b8d4c6e"))
    with pytest.warns(KexpWarning) as warned:
        compat.create_experiment(exp)
    assert [w for w in warned if str(elsewhere / "experiments") in str(w.message)]
    assert [e.id for e in Store(elsewhere).list_experiments()] == [exp.id]
    assert sorted(p.name for p in bare.iterdir()) == BARE


def test_first_use_of_the_module_as_a_script(tmp_path: Path) -> None:
    folder = init_repo(tmp_path / "fresh")
    first = run_python("", folder, "-m", "kernel_exp_dataclass")
    assert first.returncode == 0, first.stderr
    assert "Traceback" not in first.stderr
    assert first.stderr.count("there was no kexp store") == 1
    assert str(folder / "experiments") in first.stderr
    again = run_python("", folder, "-m", "kernel_exp_dataclass")
    assert again.returncode == 0 and "there was no kexp store" not in again.stderr
    made = [out.strip().rsplit(" ", 1)[1] for out in (first.stdout, again.stdout)]
    assert len({*made}) == 2
    assert sorted(e.id for e in Store(folder).list_experiments()) == sorted(made)


def test_a_refused_first_write_leaves_no_store(compat: ModuleType, bare: Path) -> None:
    (bare / ".gitignore").write_text("build/\n")
    with pytest.raises(ValidationError, match="score"):
        compat.create_experiment(compat.KernelExperiment(**predecessor_fields(score=-1.0)))
    assert sorted(p.name for p in bare.iterdir()) == sorted([*BARE, ".gitignore"])
    assert (bare / ".gitignore").read_text() == "build/\n"
    with pytest.warns(KexpWarning, match="there was no kexp store"):  # now it says where
        compat.create_experiment(compat.KernelExperiment(**predecessor_fields()))


def test_outside_git_a_first_write_without_base_commit_is_refused(
    compat: ModuleType, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """No repository to take ``base_commit`` from: the refusal says to write it."""
    monkeypatch.chdir(tmp_path)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # "base_commit and author were not filled"
        with pytest.raises(ValidationError, match="base_commit") as caught:
            compat.create_experiment(compat.KernelExperiment(**predecessor_fields()))
    assert "git rev-parse HEAD" in str(caught.value)
    assert list(tmp_path.iterdir()) == []
    given = compat.KernelExperiment(**predecessor_fields(base_commit="3f2c9e1a7b8d4c6e"))
    with pytest.warns(KexpWarning, match="there was no kexp store"):
        compat.create_experiment(given)
    assert compat.get_experiment(given.id) == given
    # The module's own sample is inserted there, as the predecessor inserted it (with no
    # commit to take: base_commit 000...0; test_newcomer.py).
    script = run_python("", tmp_path, "-m", "kernel_exp_dataclass")
    assert script.returncode == 0 and "Traceback" not in script.stderr, script.stderr
    assert script.stdout.startswith("Inserted sample experiment with id: ")


# --- where kexp is stricter: refused, the field named, the store unchanged -----------------

#: Values the predecessor stored blindly, and the field each refusal must name.
REFUSED = [
    ({"score": -1.0}, "score"),
    ({"score": "1.2x"}, "score"),
    ({"score": float("nan")}, "score"),
    ({"score": float("inf")}, "score"),
    ({"pid": "ffffffffffffffff"}, "pid"),  # names no experiment
    ({"pid": "(Parent experiment id)"}, "pid"),  # the template's placeholder
    ({"status": "finished"}, "status"),
    ({"is_buggy": True, "error_message": ""}, "error_message"),
    ({"change_summary": "two\nlines"}, "change_summary"),
]


@pytest.mark.parametrize(("changes", "field"), REFUSED)
def test_a_stricter_create_is_refused_naming_the_field(
    compat: ModuleType, in_store: Store, changes: dict[str, Any], field: str
) -> None:
    compat.create_experiment(compat.KernelExperiment(**predecessor_fields()))
    before = snapshot(in_store.root)
    with pytest.raises(ValueError) as caught:
        compat.create_experiment(compat.KernelExperiment(**predecessor_fields(**changes)))
    assert isinstance(caught.value, ValidationError)
    named = [p for p in caught.value.problems if p.severity == "error"]
    assert named and all(p.field == field for p in named), named
    message = str(caught.value)
    assert f"] {field}: " in message and "hint: " in message  # says what to write
    assert all(p.hint for p in named)
    assert snapshot(in_store.root) == before


@pytest.mark.parametrize(("changes", "field"), REFUSED)
def test_a_stricter_update_is_refused_naming_the_field(
    compat: ModuleType, in_store: Store, changes: dict[str, Any], field: str
) -> None:
    exp = compat.KernelExperiment(**predecessor_fields())
    compat.create_experiment(exp)
    before = snapshot(in_store.root)
    with pytest.raises(ValueError) as caught:
        compat.update_experiment(exp.id, **changes)
    named = [p for p in caught.value.problems if p.severity == "error"]
    assert named and all(p.field == field and p.hint for p in named), named
    assert snapshot(in_store.root) == before
    assert compat.get_experiment(exp.id) == in_store.get_experiment(exp.id)


@pytest.mark.parametrize(
    ("changes", "named"),
    [({"notes": "x"}, "notes: not a field"), ({"id": "6749f3a0c2d41e7b"}, "id")],
)
def test_an_update_of_no_field_or_of_the_id_is_refused(
    compat: ModuleType, in_store: Store, changes: dict[str, Any], named: str
) -> None:
    exp = compat.KernelExperiment(**predecessor_fields())
    compat.create_experiment(exp)
    before = snapshot(in_store.root)
    with pytest.raises(KexpError, match=named) as caught:
        compat.update_experiment(exp.id, **changes)
    assert "create a new experiment" in str(caught.value) or "fields are" in str(caught.value)
    assert isinstance(caught.value, ValueError) and len(str(caught.value).splitlines()) == 1
    assert snapshot(in_store.root) == before


def test_deleting_a_parent_is_refused_naming_the_pid(compat: ModuleType, in_store: Store) -> None:
    parent = compat.KernelExperiment(**predecessor_fields())
    compat.create_experiment(parent)
    child = compat.KernelExperiment(**predecessor_fields(score=1.05), pid=parent.id)
    compat.create_experiment(child)
    before = snapshot(in_store.root)
    with pytest.raises(KexpError) as caught:
        compat.delete_experiment(parent.id)
    message = str(caught.value)
    assert child.id in message and "pid" in message and "nothing was deleted" in message
    assert "pid to another experiment's id, or to ''" in message  # what to write
    assert snapshot(in_store.root) == before
    compat.update_experiment(child.id, pid="")  # as the message says
    compat.delete_experiment(parent.id)
    assert [e.id for e in compat.list_experiments()] == [child.id]


# --- kexp's own API next to it -----------------------------------------------------------


def test_kexp_experiments_have_their_id_from_construction(in_store: Store) -> None:
    parent = KernelExperiment(**experiment_fields())
    assert ID_RE.fullmatch(parent.id)
    stored = kexp.create_experiment(parent)
    assert stored.id == parent.id and stored.created_at == parent.created_at
    child = kexp.create_experiment(KernelExperiment(**experiment_fields(), pid=parent.id))
    assert kexp.get_experiment(child.id).pid == parent.id
    assert [e.id for e in kexp.children(parent.id)] == [child.id]


def test_kexp_refuses_the_same_experiment_created_twice(in_store: Store) -> None:
    exp = KernelExperiment(**experiment_fields())
    in_store.create_experiment(exp)
    before = snapshot(in_store.root)
    with pytest.raises(ExperimentExistsError) as caught:
        in_store.create_experiment(exp)
    assert isinstance(caught.value, ValueError) and exp.id in str(caught.value)
    with pytest.raises(ExperimentExistsError):
        in_store.create_experiment(exp, change_summary="Another name - same id")
    assert snapshot(in_store.root) == before
    assert len(in_store.paths()) == 1


def test_runtime_state_is_no_dataclass_field(in_store: Store) -> None:
    names = {f.name for f in dataclasses.fields(KernelExperiment)}
    assert not names & {"path", "settings", "interference", "outcome"}
    strict = Store(in_store.root, settings=Settings(improvement_above=1.5))
    made = strict.create_experiment(**experiment_fields(score=1.2))
    assert made.path is not None and made.path.is_file()
    assert made.outcome == "marginal"  # with the store's settings
    assert KernelExperiment(**experiment_fields(score=1.2)).outcome == "improvement"
    with pytest.raises(AttributeError):
        made.settings = Settings()  # type: ignore[misc]


def test_asdict_of_every_experiment_kexp_hands_out_is_json(
    compat: ModuleType, in_store: Store
) -> None:
    first = in_store.create_experiment(
        **experiment_fields(
            tags=["cache"],
            results=[{"config": "a", "baseline": 2.0, "candidate": 1.0, "speedup": 2.0}],
            score=2.0,
        )
    )
    combined = in_store.create_experiment(**experiment_fields(combines=[first.id], score=1.1))
    path = combined.path
    assert path is not None
    text = path.read_text(encoding="utf-8")
    path.write_text(text.replace("score:", "reviewer: someone\nscore:") + "\n## Notes\n\nkept\n")
    handed_out: list[KernelExperiment] = [
        first,
        combined,
        in_store.get_experiment(combined.id),
        *in_store.list_experiments(),
        *in_store.list_experiments(brief=True),
        *in_store.top_experiments(5),
        in_store.update_experiment(first.id, score=2.01),
        *compat.list_experiments(),
    ]
    for exp in handed_out:
        assert json.loads(json.dumps(dataclasses.asdict(exp)))["id"] == exp.id
        assert json.loads(json.dumps(exp.to_dict()))["id"] == exp.id
    read = in_store.get_experiment(combined.id)
    assert read.interference and read.outcome == "interference"
    assert dataclasses.asdict(read)["extra_fields"] == {"reviewer": "someone"}
    assert ["Notes", "kept"] in json.loads(json.dumps(dataclasses.asdict(read)))["extra_sections"]


# --- ids: exact in the compat module, 10 characters in kexp ----------------------------------


def test_a_short_prefix_error_says_how_many_characters_to_give(in_store: Store) -> None:
    for number in range(3):
        in_store.create_experiment(**experiment_fields(id=f"6749f3a0c2{number:06x}"))
    with pytest.raises(kexp.AmbiguousIdError) as caught:
        in_store.get_experiment("6749")
    message = str(caught.value)
    assert "matches 3 experiments" in message and f"give {SHOWN_LENGTH}" in message
    with pytest.raises(kexp.InvalidIdError, match=f"give {SHOWN_LENGTH}"):
        in_store.get_experiment("674")
    assert in_store.get_experiment("6749f3a0c2000001").id == "6749f3a0c2000001"


def test_listings_print_ids_that_kexp_takes_back(repo: Path, in_store: Store) -> None:
    # Made in the same second: the first 8 characters are the same, the 9th too here.
    made = [
        in_store.create_experiment(**experiment_fields(id=f"6749f3a0c{n}000000", score=1 + n))
        for n in range(3)
    ]
    listing = run_kexp("list", cwd=repo)
    assert listing.returncode == 0, listing.stderr
    shown = [line.split()[0] for line in listing.stdout.splitlines()[1:]]
    assert sorted(shown) == sorted(e.id[:SHOWN_LENGTH] for e in made)
    for prefix in shown:
        assert in_store.get_experiment(prefix).id.startswith(prefix)
    # Ten characters two ids share: the error says how many tell them apart.
    twins = [experiment_fields(id=f"6749f3a0c8{n}d{n}000") for n in range(2)]
    for fields in twins:
        in_store.create_experiment(**fields)
    with pytest.raises(kexp.AmbiguousIdError) as caught:
        in_store.get_experiment("6749f3a0c8")
    assert "give 11 characters (they tell these apart) or the full id" in str(caught.value)
    assert in_store.get_experiment("6749f3a0c81").id == twins[1]["id"]


def test_the_documented_prefix_length_is_the_shown_one() -> None:
    readme = (REPO_ROOT / "README.md").read_text(encoding="utf-8")
    skill = SKILL_MD.read_text(encoding="utf-8")
    for text in (readme, skill):
        assert f"{SHOWN_LENGTH} characters" in text
        assert "4+ character" not in text and "prefix (4+)" not in text
    show_help = run_kexp("show", "--help", cwd=REPO_ROOT).stdout
    assert f"{SHOWN_LENGTH} characters" in show_help


# --- the module against a model of the predecessor ---------------------------------------


class Predecessor:
    """The predecessor's helpers as COMPAT.md states them: one dict of id -> record, saved
    with sorted keys (so read back in id order)."""

    def __init__(self) -> None:
        self.records: dict[str, dict[str, Any]] = {}

    def create(self, exp: KernelExperiment) -> None:
        if exp.id in self.records:
            raise ValueError(exp.id)
        self.records[exp.id] = {name: getattr(exp, name) for name in PREDECESSOR_ORDER}

    def get(self, exp_id: str) -> dict[str, Any] | None:
        return self.records.get(exp_id)

    def list(self) -> list[dict[str, Any]]:
        return [self.records[key] for key in sorted(self.records)]

    def top(self, max_results: int) -> list[dict[str, Any]]:
        ranked = sorted(self.list(), key=lambda r: r["score"], reverse=True)
        return [{key: r[key] for key in TOP_TEN} for r in ranked[: max(0, max_results)]]

    def update(self, exp_id: str, **changes: Any) -> dict[str, Any]:
        if exp_id not in self.records:
            raise KeyError(exp_id)
        self.records[exp_id].update(changes)
        return self.records[exp_id]

    def delete(self, exp_id: str) -> None:
        del self.records[exp_id]  # KeyError when unknown


SCORES = st.sampled_from([0.0, 0.5, 0.97, 1.0, 1.02, 1.02, 1.1, 2.5])
#: Ids as random as the predecessor's, few enough distinct first characters to share them.
HEX16 = st.text("0123456789abcdef", min_size=16, max_size=16).map(lambda t: "6749" + t[4:])


class CompatAgainstThePredecessor(RuleBasedStateMachine):
    """Random sequences of the helpers on a real store give the predecessor's answers."""

    def __init__(self) -> None:
        super().__init__()
        self.folder = Path(tempfile.mkdtemp(prefix="kexp-compat-"))
        self.repo = init_repo(self.folder / "repo")
        self.head = subprocess.run(
            ["git", "rev-parse", "HEAD"], cwd=self.repo, capture_output=True, text=True
        ).stdout.strip()
        self.previous = os.getcwd()
        os.chdir(self.repo)  # no store yet: the first create makes it
        spec = importlib.util.spec_from_file_location(
            "kernel_exp_dataclass", REPO_ROOT / "kernel_exp_dataclass.py"
        )
        assert spec is not None and spec.loader is not None
        self.compat = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(self.compat)
        self.model = Predecessor()
        self.made: list[KernelExperiment] = []

    def teardown(self) -> None:
        os.chdir(self.previous)
        shutil.rmtree(self.folder, ignore_errors=True)

    def known(self, data: st.DataObject) -> str:
        choices = [*self.model.records, "ffffffffffffffff", "nonexistent"]
        choice = data.draw(st.sampled_from(choices))
        if choice in self.model.records and data.draw(st.booleans()):
            return choice[: data.draw(st.integers(4, 15))]  # a prefix: no id to the module
        return choice

    @initialize(made=st.lists(st.tuples(SCORES, HEX16), min_size=2, max_size=6))
    def some_experiments(self, made: list[tuple[float, str]]) -> None:
        """A store to start from (the first create makes it), with equal scores likely."""
        for score, exp_id in made:
            self.create(score, False, "done", exp_id)

    @rule(
        score=SCORES,
        buggy=st.booleans(),
        status=st.sampled_from(["new", "done", "failed"]),
        exp_id=HEX16,
    )
    def create(self, score: float, buggy: bool, status: str, exp_id: str) -> None:
        # A drawn id (as a fresh one is random) keeps a failing sequence reproducible.
        exp = self.compat.KernelExperiment(
            **predecessor_fields(
                score=score,
                is_buggy=buggy,
                error_message="RuntimeError: illegal memory access" if buggy else "",
                status=status,
                base_commit=self.head,
                change_summary=f"Try {len(self.made)} - {score}x",
            ),
            id=exp_id,
        )
        if exp_id in self.model.records:
            with pytest.raises(ValueError):
                self.compat.create_experiment(exp)
            return
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", KexpWarning)  # "there was no kexp store"
            assert self.compat.create_experiment(exp) is None
        self.model.create(exp)
        self.made.append(exp)

    @precondition(lambda self: self.made)
    @rule(data=st.data())
    def create_again(self, data: st.DataObject) -> None:
        exp = data.draw(st.sampled_from(self.made))
        if exp.id not in self.model.records:  # deleted: its id is free again
            self.compat.create_experiment(exp)
            self.model.create(exp)
            return
        with pytest.raises(ValueError):
            self.model.create(exp)
        with pytest.raises(ValueError):
            self.compat.create_experiment(exp)

    @rule(data=st.data())
    def get(self, data: st.DataObject) -> None:
        key = self.known(data)
        found, expected = self.compat.get_experiment(key), self.model.get(key)
        if expected is None:
            assert found is None
        else:
            assert {name: getattr(found, name) for name in PREDECESSOR_ORDER} == expected

    @rule(max_results=st.integers(-2, 12))
    def top(self, max_results: int) -> None:
        rows = self.compat.top_experiments(max_results)
        assert [{key: row[key] for key in TOP_TEN} for row in rows] == self.model.top(max_results)

    @rule(data=st.data(), score=SCORES, status=st.sampled_from(["running", "done", "timeout"]))
    def update(self, data: st.DataObject, score: float, status: str) -> None:
        key = self.known(data)
        if self.model.get(key) is None:
            with pytest.raises(KeyError):
                self.compat.update_experiment(key, score=score)
            return
        with warnings.catch_warnings():
            # kexp says more than the predecessor did ("Try 3 - 1.5x" now states the old
            # score); what it returns and keeps is the predecessor's
            warnings.filterwarnings("ignore", "kernel_exp_dataclass: .* still states the old")
            updated = self.compat.update_experiment(key, score=score, status=status)
        expected = self.model.update(key, score=score, status=status)
        assert {name: getattr(updated, name) for name in PREDECESSOR_ORDER} == expected

    @rule(data=st.data())
    def delete(self, data: st.DataObject) -> None:
        key = self.known(data)
        if self.model.get(key) is None:
            with pytest.raises(KeyError):
                self.compat.delete_experiment(key)
            return
        assert self.compat.delete_experiment(key) is None
        self.model.delete(key)

    @invariant()
    def list_is_the_predecessors(self) -> None:
        found = [
            {name: getattr(e, name) for name in PREDECESSOR_ORDER}
            for e in self.compat.list_experiments()
        ]
        assert found == self.model.list()


CompatAgainstThePredecessor.TestCase.settings = hypothesis_settings(
    max_examples=20, stateful_step_count=20, deadline=None
)
test_compat_against_the_predecessor = CompatAgainstThePredecessor.TestCase


# --- the skill's examples, verbatim --------------------------------------------------------


def skill_compat_examples() -> list[str]:
    """The skill's three examples of the predecessor's helpers, as written there."""
    text = SKILL_MD.read_text(encoding="utf-8")
    blocks = re.findall(r"```python\n(.*?)```", text, re.DOTALL)
    found = [b for b in blocks if b.startswith("from kernel_exp_dataclass import")]
    assert len(found) == 3, found
    return found


CACHE_SNIPPET, UNROLL_SNIPPET, FAILURES_SNIPPET = skill_compat_examples()


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


EXPECTED: dict[str, Callable[[list[KernelExperiment]], list[str]]] = {
    CACHE_SNIPPET: expected_cache_lines,
    UNROLL_SNIPPET: expected_unroll_lines,
    FAILURES_SNIPPET: expected_failure_lines,
}


def in_id_order(store: Store) -> list[KernelExperiment]:
    """The experiments as the predecessor's ``list_experiments`` gave them: in id order,
    each ``score`` the speedup over the operator's original code (a step measured
    against its parent: its cumulative score, when known)."""
    found = sorted(store.list_experiments(strict=True), key=lambda e: e.id)
    return [dataclasses.replace(e, score=over_the_original_code(e)) for e in found]


def over_the_original_code(exp: KernelExperiment) -> float:
    """``exp``'s speedup over the operator's original code, as the store derives it (its
    own score where that is over the reference, or where no cumulative is known)."""
    over_parent = bool(exp.pid) and exp.measured_against != "reference"
    cumulative = exp.cumulative_score if over_parent else None
    return exp.score if cumulative is None else cumulative


def test_cache_snippet_on_the_bundled_experiments() -> None:
    experiments = in_id_order(Store(REPO_ROOT))
    lines = assert_clean_run(run_python(CACHE_SNIPPET, REPO_ROOT))
    cache = [e for e in experiments if "cache" in e.operator_sig.lower()]
    assert cache, "the bundled experiments include cache-kernel experiments"
    assert lines == expected_cache_lines(experiments)
    assert len(lines) == min(5, len(cache))
    assert all(re.fullmatch(r"  \d+\.\d{4}x - .+", line) for line in lines)
    scores = [float(line.split("x - ")[0]) for line in lines]
    assert scores == sorted(scores, reverse=True)
    assert scores[0] == round(max(e.score for e in cache), 4)


def test_unroll_snippet_on_the_bundled_experiments() -> None:
    experiments = in_id_order(Store(REPO_ROOT))
    lines = assert_clean_run(run_python(UNROLL_SNIPPET, REPO_ROOT))
    assert lines == expected_unroll_lines(experiments)
    unroll = [e for e in experiments if "unroll" in e.change_summary.lower()]
    assert len(lines) == len(unroll)
    assert any(line.startswith("Unroll 4: ") for line in lines)
    assert any(line.startswith("Unroll 8: ") for line in lines)
    assert all(re.fullmatch(r"Unroll (4|8|unknown): \d+\.\d{4}x - .*", line) for line in lines)


def test_failures_snippet_on_the_bundled_experiments() -> None:
    """The skill's snippet takes each step's own score (``step_score``, over its parent):
    the bundled steps that regressed over their parent, all faster than the original
    code (the predecessor's ``score`` would find none of them), and the buggy ones."""
    steps = Store(REPO_ROOT).list_experiments(strict=True)  # each score over its parent
    lines = assert_clean_run(run_python(FAILURES_SNIPPET, REPO_ROOT))
    failures = [e for e in steps if e.score < 0.98 or e.is_buggy]
    assert any(e.is_buggy for e in failures) and any(not e.is_buggy for e in failures)
    shown = sorted(line for line in lines if line.startswith("  ❌ "))
    assert shown == sorted(f"  ❌ {e.change_summary}" for e in failures)
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
    lines = assert_clean_run(run_python(snippet, nested))
    assert lines == EXPECTED[snippet](in_id_order(store))
    assert lines


@pytest.mark.parametrize("snippet", [CACHE_SNIPPET, UNROLL_SNIPPET, FAILURES_SNIPPET])
def test_snippets_print_nothing_without_a_store(tmp_path: Path, snippet: str) -> None:
    assert assert_clean_run(run_python(snippet, tmp_path)) == []
    assert list(tmp_path.iterdir()) == []


def test_snippets_see_what_the_api_sees(repo: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(repo)
    kexp.create_experiment(**experiment_fields(score=0.5, change_summary="Slow - regression"))
    lines = assert_clean_run(run_python(FAILURES_SNIPPET, repo))
    assert lines[0] == "  ❌ Slow - regression"
