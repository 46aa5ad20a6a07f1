"""``kexp export`` keeps what the files keep: store → export → import gives the same
files, byte for byte, in every format.

The store holds what a hand-edited, long-lived store holds: kexp's own fields (tags,
author, combines, results), unknown front-matter keys, a preamble before the first
section, sections kexp does not know, multi-line and Unicode text, a lineage, and
experiments imported from the predecessor with values kept in ``legacy_*`` keys. Each
round trip goes through the real ``kexp`` command; a property test drives the library
with generated content.
"""

from __future__ import annotations

import dataclasses
import io
import json
import string
from pathlib import Path
from typing import Any

import pytest
from conftest import REPO_ROOT, experiment_fields, run_kexp
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kexp import Store, init_store
from kexp.core.model import LEGACY_FIELDS
from kexp.output.export import DERIVED_FIELDS, FORMATS, export, read_records
from kexp.output.legacy import sidecar_path
from kexp.output.legacyimport import import_legacy

COMMIT = "9c1d2e3f4a5b6c7d8e9f0a1b2c3d4e5f6a7b8c9d"


def fields_of_record(record: dict[str, Any]) -> dict[str, Any]:
    """What :meth:`kexp.Store.create_experiment` takes to store the experiment of a
    record again, the same file: the record less its derived values."""
    fields = {k: v for k, v in record.items() if k not in DERIVED_FIELDS}
    if isinstance(fields.get("extra_sections"), list):
        fields["extra_sections"] = [tuple(pair) for pair in fields["extra_sections"]]
    return fields


def files_of(root: Path) -> dict[str, bytes]:
    """Every experiment file of a store, by path below experiments/."""
    folder = root / "experiments"
    return {
        str(p.relative_to(folder)): p.read_bytes()
        for p in sorted(folder.rglob("*.md"))
        if p.name != "README.md"
    }


def kexp(root: Path, *args: str) -> str:
    result = run_kexp(*args, cwd=root, env={"KEXP_ROOT": str(root)})
    assert result.returncode == 0, result.stdout + result.stderr
    assert "Traceback" not in result.stderr
    return result.stdout + result.stderr


def rich_store(root: Path) -> Store:
    """A store (no git: every value given) holding everything a file can keep."""
    init_store(root)
    store = Store(root)
    legacy = {
        "a1f0c3d2e4b50001": {
            "id": "a1f0c3d2e4b50001", "pid": "", "score": 1, "raw_result": "r\r\nwindows",
            "dtype_sig": "bf16", "env": "MI300X", "is_buggy": False, "error_message": "",
            "change_summary": "Imported from the predecessor - +0%",
            "detailed_description": "d", "code_change": "", "base_commit": "main",
            "operator_sig": "cache.cu: k", "profiling_info": "", "status": "done",
            "created_at": "2026-10-02T09:10:00.000007Z",
        }
    }  # fmt: skip
    assert import_legacy(legacy, store, check_commits=False).ok
    store.update_experiment("a1f0c3d2e4b50001", tags=["imported"], author="Ada")
    parent = store.create_experiment(
        **experiment_fields(
            base_commit=COMMIT,
            author="Grace",
            created_at="2026-11-01T10:00:00Z",
            tags=["cache", "unroll"],
            results=[
                {"config": "b8_s1024", "baseline_us": 10.0, "candidate_us": 9.8, "speedup": 1.0204}
            ],
            score=1.0204,
            preamble="Notes before the sections: «ünïcode», `code`, and ## not a heading.",
            extra_sections=[("Follow-up", "Try unroll 8.\n\n- step one\n- step two")],
            extra_fields={"reviewed_by": "Linus", "bench": {"iters": 200, "warmup": [1, 2]}},
            detailed_description="**Approach**: unroll 4\n\n```cpp\n#pragma unroll 4\n```",
            code_change="diff --git a/k.cu b/k.cu\n-a\n+b\n",
        )
    )
    store.create_experiment(
        **experiment_fields(
            base_commit=COMMIT,
            author="Grace",
            created_at="2026-11-02T10:00:00Z",
            pid=parent.id,
            combines=[parent.id, "a1f0c3d2e4b50001"],
            change_summary="Combined unroll with scalar slot math - +0.7%",
            score=1.007,
            is_buggy=True,
            error_message="RuntimeError: misaligned address\n  at k.cu:12",
            profiling_info="line one\n\ttabbed line\ntrailing spaces   ",
        )
    )
    return store


def test_every_export_format_imports_back_to_the_same_files(tmp_path: Path) -> None:
    source = tmp_path / "source"
    rich_store(source)
    originals = files_of(source)
    assert len(originals) == 3
    for output_format in FORMATS:
        exported = tmp_path / f"export.{output_format}"
        kexp(source, "export", "--format", output_format, "-o", str(exported))
        target = tmp_path / f"from-{output_format}"
        init_store(target)
        with exported.open(encoding="utf-8", newline="") as stream:
            records = read_records(stream, output_format)
        for record in records:
            # One record is one `kexp add` document (a JSON object).
            document = json.dumps(fields_of_record(record))
            result = run_kexp("add", cwd=target, env={"KEXP_ROOT": str(target)}, input=document)
            assert result.returncode == 0, (output_format, result.stderr)
        assert files_of(target) == originals, output_format


def test_the_legacy_export_imports_back_to_the_same_files_and_the_predecessor_reads_it(
    tmp_path: Path,
) -> None:
    """What the predecessor's records have no place for goes into the sidecar beside
    the database: the predecessor still builds every record, kexp import restores it."""
    source = tmp_path / "source"
    rich_store(source)
    originals = files_of(source)
    database = tmp_path / "kernel_experiments_db.json"
    said = kexp(source, "export", "--format", "legacy", "-o", str(database))
    sidecar = sidecar_path(database)
    assert sidecar.name == "kernel_experiments_db.json.kexp.json" and str(sidecar) in said

    @dataclasses.dataclass
    class PredecessorRecord:  # the predecessor's KernelExperiment: its 16 fields
        score: float
        raw_result: str
        dtype_sig: str
        env: str
        is_buggy: bool
        error_message: str
        change_summary: str
        detailed_description: str
        code_change: str
        base_commit: str
        operator_sig: str
        profiling_info: str
        status: str
        id: str = ""
        pid: str = ""
        created_at: str = ""

    records = json.loads(database.read_text())
    assert [PredecessorRecord(**r).id for r in records.values()] == sorted(records)
    assert records["a1f0c3d2e4b50001"]["base_commit"] == "main"  # its value, given back
    assert all(set(r) == set(LEGACY_FIELDS) for r in records.values())

    target = tmp_path / "target"
    init_store(target)
    # The record whose base_commit was 'main' is reported again (its value is kept in
    # legacy_base_commit), so the import exits 1 as records needing attention do.
    result = run_kexp(
        "import", str(database), "--no-check-commits", cwd=target, env={"KEXP_ROOT": str(target)}
    )
    assert result.returncode == 1, result.stdout + result.stderr
    assert "1 needing attention of 3" in result.stdout
    assert "Traceback" not in result.stderr
    assert files_of(target) == originals

    # Printed to stdout there is no room for the sidecar: the user is told.
    result = run_kexp("export", "--format", "legacy", cwd=source, env={"KEXP_ROOT": str(source)})
    assert json.loads(result.stdout) == records
    assert "3 experiment(s) keep what the predecessor's records have no place for" in " ".join(
        result.stderr.split()
    )


_text = st.text(st.characters(blacklist_categories=("Cs",)), max_size=60)
_line = st.text(
    st.characters(
        blacklist_categories=("Cs", "Cc", "Zl", "Zp"), blacklist_characters="\ufeff\ufffe\uffff"
    ),
    min_size=1,
    max_size=30,
)
#: Headings as a file can hold them: one line, no white space around it.
_headings = _line.map(str.strip).filter(bool)
_keys = st.text(string.ascii_lowercase + "_", min_size=1, max_size=10)
_values = st.recursive(
    st.one_of(st.none(), st.booleans(), st.integers(-(10**6), 10**6), _line),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(_keys, inner, max_size=3),
    max_leaves=6,
)


@st.composite
def _contents(draw: st.DrawFn) -> dict[str, Any]:
    extra = draw(st.dictionaries(_keys.map(lambda k: f"x_{k}"), _values, max_size=3))
    return experiment_fields(
        base_commit=COMMIT,
        author=draw(_line),
        created_at="2026-11-29T15:52:36Z",
        tags=draw(st.lists(_line, max_size=3, unique=True)),
        preamble=draw(_text),
        extra_sections=draw(st.lists(st.tuples(_headings, _text), max_size=2)),
        extra_fields=extra,
        raw_result=draw(_text) or "r",
        profiling_info=draw(_text),
    )


@settings(
    max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(content=_contents())
def test_any_content_comes_back_from_each_format(tmp_path_factory: Any, content: Any) -> None:
    root = tmp_path_factory.mktemp("store")
    init_store(root)
    store = Store(root)
    store.create_experiment(**content)
    originals = files_of(root)
    for output_format in FORMATS:
        stream = io.StringIO(newline="")
        export(store, stream, output_format)
        stream.seek(0)
        target = tmp_path_factory.mktemp(output_format)
        init_store(target)
        for record in read_records(stream, output_format):
            Store(target).create_experiment(**fields_of_record(record))
        assert files_of(target) == originals, output_format


def test_a_csv_export_reads_in_duckdb_as_the_readme_says(tmp_path: Path) -> None:
    """The CSV export in an analytics engine, as the README tells its reader: DuckDB's
    ``read_csv`` types ``score`` and ``is_buggy``, and ``from_json`` makes a list cell
    (JSON text) the list the JSON export holds."""
    duckdb = pytest.importorskip("duckdb")
    out = tmp_path / "experiments.csv"
    printed = run_kexp("export", "--format", "csv", "-o", str(out), cwd=REPO_ROOT)
    assert printed.returncode == 0, printed.stderr
    exported = run_kexp("export", "--format", "json", cwd=REPO_ROOT).stdout
    tags = {r["id"]: r["tags"] for r in json.loads(exported)}
    rows = duckdb.connect().sql(
        f"SELECT id, score, is_buggy, from_json(tags, '[\"VARCHAR\"]') FROM read_csv('{out}')"
    )
    assert [str(t) for t in rows.types[1:3]] == ["DOUBLE", "BOOLEAN"]
    found = {exp_id: listed for exp_id, _, _, listed in rows.fetchall()}
    assert found == tags and any(found.values())
