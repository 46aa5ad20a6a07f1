"""``kexp export --format parquet`` at its edges, as a user meets them: a valid file
whose numbers no Parquet column of its type holds, an export that matches nothing, an
export killed before it finished. Read back by DuckDB, as an engine would."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from conftest import experiment_fields, init_repo, run_kexp

from kexp import Store

duckdb = pytest.importorskip("duckdb")
pytest.importorskip("pyarrow")

COMMIT = "9c1d2e3f4a5b6c7d8e9f0a1b2c3d4e5f6a7b8c9d"


def sql(query: str) -> list[tuple[Any, ...]]:
    return duckdb.connect().sql(query).fetchall()  # type: ignore[no-any-return]


def table(folder: Path, name: str) -> str:
    return f"read_parquet('{folder}/{name}/**/*.parquet', hive_partitioning=true)"


def new_store(tmp_path: Path) -> Store:
    root = init_repo(tmp_path / "repo")
    (root / "experiments").mkdir()
    return Store(root)


def test_a_count_past_64_bits_is_exported_as_null_with_a_warning(tmp_path: Path) -> None:
    """Trial Q03: ``results[].baseline_n`` = 10**23 is valid (the schema bounds no
    count) and the JSON export writes it, but the Parquet export stopped with an
    internal error (OverflowError), no row written. The export writes every row; the
    count no 64-bit column holds is NULL with one warning naming the file, a big
    integer in a double column is that double, and the results JSON keeps it whole."""
    store = new_store(tmp_path)
    big = 10**23
    huge = store.create_experiment(
        **experiment_fields(
            change_summary="Big counts - +5.0%",
            score=1.05,
            base_commit=COMMIT,
            results=[
                {
                    "config": "n=1",
                    "baseline": big,
                    "candidate": 9.5e22,
                    "speedup": 1.0526,
                    "baseline_n": big,
                    "candidate_n": 3,
                },
                {
                    "config": "n=2",
                    "baseline": 2,
                    "candidate": 1.9,
                    "speedup": 1.0526,
                    "baseline_n": 4,
                    "candidate_n": 1e23,
                },  # a float, whole: valid as a count
            ],
        )
    )
    plain = store.create_experiment(
        **experiment_fields(change_summary="Plain - +2%", score=1.02, base_commit=COMMIT)
    )
    root = store.root
    checked = run_kexp("validate", cwd=root, process=True)
    assert checked.returncode == 0, checked.stdout + checked.stderr

    out = tmp_path / "pq"
    done = run_kexp("export", "--format", "parquet", "-o", str(out), cwd=root, process=True)
    assert done.returncode == 0, done.stderr
    assert "internal error" not in done.stderr and "Traceback" not in done.stderr
    warned = [line for line in done.stderr.splitlines() if "warning" in line]
    assert len(warned) == 1, done.stderr
    assert huge.path is not None and huge.path.name in warned[0]
    assert "results[0].baseline_n" in warned[0] and "results[1].candidate_n" in warned[0]

    rows = sql(f"SELECT id, results FROM {table(out, 'experiments')} ORDER BY id")
    assert [row[0] for row in rows] == sorted([huge.id, plain.id])
    assert str(big) in dict(rows)[huge.id]  # the JSON text holds it whole
    counted = sql(
        f"SELECT baseline_n, candidate_n, baseline, candidate FROM {table(out, 'results')} "
        "ORDER BY config"
    )
    assert counted == [(None, 3, 1e23, 9.5e22), (4, None, 2.0, 1.9)]


def test_an_export_of_no_row_has_the_partition_columns(tmp_path: Path) -> None:
    """Trial Q06: a filter that matches nothing wrote ``experiments/part-0.parquet``
    without ``operator=``/``month=`` folders, so a query on ``month`` failed (Binder
    Error) instead of answering no row; so did a query on the results of a store whose
    experiments hold none. Both tables have the partition columns, whatever is empty."""
    store = new_store(tmp_path)
    store.create_experiment(
        **experiment_fields(
            change_summary="One - +5.0%",
            score=1.05,
            base_commit=COMMIT,
            created_at="2026-12-01T10:00:00Z",
        )
    )
    root = store.root
    for name, filters in (("none", ["--env", "MI300X-nowhere"]), ("all", [])):
        out = tmp_path / name
        done = run_kexp(
            "export", "--format", "parquet", "-o", str(out), *filters, cwd=root, process=True
        )
        assert done.returncode == 0, done.stderr
        for kind in ("experiments", "results"):
            counted = sql(
                f"SELECT count(*) FROM {table(out, kind)} "
                "WHERE month = '2026-12' AND operator <> '' AND id IS NOT NULL"
            )
            expected = 1 if (name, kind) == ("all", "experiments") else 0
            assert counted == [(expected,)], (name, kind)


def test_the_next_export_removes_what_a_killed_one_left_and_nothing_else(
    tmp_path: Path,
) -> None:
    """Trial Q02: an export killed (kill -9) left its hidden staging folder beside the
    output, and the next complete export left it there (125 MB at 100,000). The next
    export removes it; a staging folder an export still writes (its folder locked), a
    folder of another output and one that is not kexp's stay."""
    import fcntl
    import os

    store = new_store(tmp_path)
    store.create_experiment(
        **experiment_fields(change_summary="One - +5.0%", score=1.05, base_commit=COMMIT)
    )
    out = tmp_path / "pq"
    killed = tmp_path / ".pq.kexp-new-0a1b2c3d"
    (killed / "experiments").mkdir(parents=True)
    (killed / "experiments" / "part-0.parquet").write_bytes(b"half written")
    writing = tmp_path / ".pq.kexp-new-4e5f6a7b"
    writing.mkdir()
    others = [tmp_path / ".other.kexp-new-0a1b2c3d", tmp_path / ".pq.notes"]
    for folder in others:
        folder.mkdir()
    held = os.open(writing, os.O_RDONLY)
    try:
        fcntl.flock(held, fcntl.LOCK_EX)  # as a live export holds its staging folder
        done = run_kexp("export", "--format", "parquet", "-o", str(out), cwd=store.root,
                        process=True)  # fmt: skip
    finally:
        os.close(held)
    assert done.returncode == 0, done.stderr
    assert not killed.exists()
    assert writing.is_dir() and all(folder.is_dir() for folder in others)
    assert sql(f"SELECT count(*) FROM {table(out, 'experiments')}") == [(1,)]
