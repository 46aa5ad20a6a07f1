"""``kexp export --format parquet``: read back by DuckDB, as an engine would, and
compared with what kexp answers (``kexp top --json``, ``kexp export --format json``)."""

from __future__ import annotations

import json
import math
import sys
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from conftest import experiment_fields, git, init_repo, run_kexp
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st
from test_sync import make_remote

from kexp import Store
from kexp.cli.main import main
from kexp.core.fields import BODY_FIELDS
from kexp.output.parquet import MARKER, export_parquet, partition_value

duckdb = pytest.importorskip("duckdb")
pytest.importorskip("pyarrow")

COMMIT = "9c1d2e3f4a5b6c7d8e9f0a1b2c3d4e5f6a7b8c9d"
OPERATORS = [
    "csrc/kernels/cache_kernels.cu: reshape_and_cache_flash",
    "csrc/kernels/cache_kernels.cu: reshape_and_cache",  # shares nothing but a prefix
    "kernels/triton/fp8 gemm.py: _scaled_mm",
    "ünïcode/ops.cu: k::run<8>",
    "..",
]
#: docs/parquet.md: the keys NULL in the table where the JSON record holds "", [] or {}
#: (what the file does not have).
ABSENT_WHEN_EMPTY = {
    "pid", "measured_against", "score_ci", "author", "protocol", "results", *BODY_FIELDS,
    "preamble", "extra_fields", "cumulative_ci", "cumulative_reason",
}  # fmt: skip
STAMPS = [
    "2026-10-02T09:11:03Z",
    "2026-10-02T09:11:03.000001Z",
    "2026-10-02T09:11:03.5Z",
    "2026-11-30T23:59:59Z",
    "2027-01-01T00:00:00.123456Z",
]


def invoke(*args: str) -> Any:
    result = CliRunner().invoke(main, list(args))
    assert result.exit_code == 0, result.output
    return result


def sql(query: str) -> list[tuple[Any, ...]]:
    return duckdb.connect().sql(query).fetchall()  # type: ignore[no-any-return]


def experiments_of(folder: Path) -> str:
    return f"read_parquet('{folder}/experiments/**/*.parquet', hive_partitioning=true)"


def results_of(folder: Path) -> str:
    return f"read_parquet('{folder}/results/**/*.parquet', hive_partitioning=true)"


def top_query(folder: Path) -> str:
    """docs/parquet.md's query of ``kexp top``'s answer, as written there, over the
    export in ``folder``."""
    import re

    text = (Path(__file__).parent.parent / "docs" / "parquet.md").read_text(encoding="utf-8")
    blocks = re.findall(r"```sql\n(.*?)```", text, re.S)
    (block,) = [b for b in blocks if b.startswith("-- kexp top")]
    return block.replace("DIR", str(folder))


experiment_specs = st.lists(
    st.fixed_dictionaries(
        {
            "operator_sig": st.sampled_from(OPERATORS),
            "score": st.sampled_from([0.0, 0.5, 0.995, 1.0, 1.02, 1.1, 2.0, 1.5]),
            "status": st.sampled_from(["done", "done", "failed", "timeout", "new", "running"]),
            "is_buggy": st.booleans(),
            "created_at": st.sampled_from(STAMPS),
            "results": st.booleans(),
            "tags": st.lists(st.sampled_from(["a", "control", "x y"]), max_size=2, unique=True),
            # A child of an earlier experiment (its index from the end), measured against
            # its parent or the reference, or missing it: the cumulative score then is
            # not the score.
            "parent": st.none() | st.integers(1, 5),
            "measured_against": st.sampled_from(["parent", "reference", ""]),
        }
    ),
    min_size=1,
    max_size=30,
)


def record_all(store: Store, specs: list[dict[str, Any]]) -> None:
    made: list[str] = []
    for n, spec in enumerate(specs):
        fields = dict(spec)
        with_results = fields.pop("results")
        parent = fields.pop("parent", None)
        against = fields.pop("measured_against", "")
        if parent is not None and made:
            fields["pid"] = made[-min(parent, len(made))]
            fields["measured_against"] = against
        if with_results and fields["score"] > 0:
            fields["results"] = [
                {"config": f"b{n}", "baseline": 2.0, "candidate": 2.0 / fields["score"],
                 "speedup": fields["score"], "unit": "us", "baseline_n": 5, "note": "hot"},
            ]  # fmt: skip
        if fields["is_buggy"]:
            fields["error_message"] = "RuntimeError: boom"
        exp = store.create_experiment(
            **experiment_fields(
                change_summary=f"Step {n} - ok", base_commit=COMMIT, author="A", **fields
            )
        )
        made.append(exp.id)


@settings(
    max_examples=12,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(experiment_specs)
@example(
    [  # a marginal child whose product beats an improvement; a failed run
        {"operator_sig": OPERATORS[0], "score": 2.0, "status": "done", "is_buggy": False,
         "created_at": STAMPS[0], "results": False, "tags": [], "parent": None,
         "measured_against": "reference"},
        {"operator_sig": OPERATORS[0], "score": 0.995, "status": "done", "is_buggy": False,
         "created_at": STAMPS[1], "results": False, "tags": [], "parent": 1,
         "measured_against": "parent"},
        {"operator_sig": OPERATORS[0], "score": 1.1, "status": "done", "is_buggy": False,
         "created_at": STAMPS[2], "results": False, "tags": [], "parent": None,
         "measured_against": "reference"},
        {"operator_sig": OPERATORS[0], "score": 0.0, "status": "failed", "is_buggy": False,
         "created_at": STAMPS[3], "results": False, "tags": [], "parent": None,
         "measured_against": "reference"},
    ]
)  # fmt: skip
def test_duckdb_over_the_export_answers_as_kexp_does(
    tmp_path_factory: pytest.TempPathFactory, specs: list[dict[str, Any]]
) -> None:
    """Lineages measured against parents and the reference, controls among them:
    DuckDB's top 20 over the export (by ``cumulative_score``) is ``kexp top``'s, same
    ids, same order, ties included; every row holds what ``kexp export --format json``
    holds (``cumulative_score``, ``cumulative_ci``, ``cumulative_reason`` and
    ``measured_against`` too)."""
    root = init_repo(tmp_path_factory.mktemp("p") / "repo")
    (root / "experiments").mkdir()
    store = Store(root)
    record_all(store, specs)
    out = root.parent / "parquet"
    invoke("--root", str(root), "export", "--format", "parquet", "-o", str(out))

    top = json.loads(invoke("--root", str(root), "top", "--json").output)
    assert [row[0] for row in sql(top_query(out))] == [e["id"] for e in top]

    exported = json.loads(invoke("--root", str(root), "export", "--format", "json").output)
    records = {r["id"]: r for r in exported}
    con = duckdb.connect()
    rows = con.sql(f"SELECT * FROM {experiments_of(out)}")
    names = rows.columns
    found = [dict(zip(names, row, strict=True)) for row in rows.fetchall()]
    types = dict(zip(names, (str(t) for t in rows.types), strict=True))
    assert types["cumulative_score"] == "DOUBLE" and types["cumulative_ci"] == "DOUBLE[]"
    assert types["cumulative_reason"] == types["measured_against"] == "VARCHAR"
    assert sorted(r["id"] for r in found) == sorted(records)
    for row in found:
        record = records[row["id"]]
        assert row["operator"] == partition_value(record["operator_sig"])
        assert row["month"] == record["created_at"][:7]
        for key, value in record.items():
            if key in ABSENT_WHEN_EMPTY and value in ("", [], {}):
                assert row[key] is None, key  # none in the file: NULL (docs/parquet.md)
                continue
            assert normal(key, row[key]) == normal(key, value), key

    results = sql(f"SELECT id, config, speedup, baseline_n, unit, extra FROM {results_of(out)}")
    expected = [
        (e, r["config"], r["speedup"], r.get("baseline_n"), r.get("unit"), '{"note": "hot"}')
        for e, rec in records.items()
        for r in rec["results"]
    ]
    assert sorted(results) == sorted(expected)


def normal(key: str, value: Any) -> Any:
    """A value as JSON or Parquet holds it, made comparable: timestamps as text, JSON
    text parsed, lists as lists."""
    if key == "created_at":
        if not isinstance(value, str):
            value = value.strftime("%Y-%m-%dT%H:%M:%S.%f")
        text = value.rstrip("Z")
        whole, _, fraction = text.partition(".")
        return f"{whole}.{fraction:0<6}"
    if key in ("protocol", "results", "extra_fields") and isinstance(value, str):
        return json.loads(value)
    if isinstance(value, (list, tuple)):
        return [normal(key, v) for v in value]
    if isinstance(value, float) and math.isnan(value):
        return "nan"
    return value


def test_a_derived_value_added_to_the_record_becomes_a_column(
    store: Store, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """What the JSON export's record shaping adds (issue 23's cumulative score) comes
    into Parquet with no change here, typed; a partition where it is always empty is
    cast to the same type (one table for the engine)."""
    import kexp.output.parquet as parquet_module

    shaped = parquet_module.to_record

    def with_cumulative(exp: Any, *args: Any, **kwargs: Any) -> dict[str, Any]:
        record = shaped(exp, *args, **kwargs)
        cached = exp.operator_sig == OPERATORS[0]
        record["cumulative_score"] = exp.score * 2 if cached else None
        record["cumulative_ci"] = [exp.score, exp.score * 3] if cached else None
        return record

    monkeypatch.setattr(parquet_module, "to_record", with_cumulative)
    record_all(store, [
        {"operator_sig": op, "score": 1.5, "status": "done", "is_buggy": False,
         "created_at": STAMPS[0], "results": False, "tags": []}
        for op in OPERATORS[:2]
    ])  # fmt: skip
    export_parquet(store, tmp_path / "out")
    table = experiments_of(tmp_path / "out")
    kinds = dict(sql(f"SELECT column_name, column_type FROM (DESCRIBE SELECT * FROM {table})"))
    assert kinds["cumulative_score"] == "DOUBLE"
    assert kinds["cumulative_ci"] == "DOUBLE[]"
    assert sorted(sql(f"SELECT operator_sig, cumulative_score FROM {table}")) == [
        (OPERATORS[1], None),
        (OPERATORS[0], 3.0),
    ]


def test_a_new_export_replaces_the_earlier_one_whole(store: Store, tmp_path: Path) -> None:
    record_all(store, [
        {"operator_sig": op, "score": 1.2, "status": "done", "is_buggy": False,
         "created_at": stamp, "results": True, "tags": []}
        for op in OPERATORS for stamp in STAMPS[:2]
    ])  # fmt: skip
    out = tmp_path / "out"
    first = export_parquet(store, out)
    assert first.experiments == len(OPERATORS) * 2
    kept = store.list_experiments(operator="reshape_and_cache_flash")
    for exp in store.list_experiments():
        if exp.id not in {k.id for k in kept}:
            store.delete_experiment(exp.id, force=True)
    second = export_parquet(store, out)
    assert second.experiments == len(kept)
    on_disk = sorted(p.relative_to(out).as_posix() for p in out.rglob("*.parquet"))
    assert on_disk == sorted(second.files)
    assert sql(f"SELECT count(*) FROM {experiments_of(out)}") == [(len(kept),)]
    assert json.loads((out / MARKER).read_text())["experiments"] == len(kept)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out", "repo"]  # nothing beside


def files_of(folder: Path) -> dict[str, bytes]:
    return {
        p.relative_to(folder).as_posix(): p.read_bytes() for p in folder.rglob("*") if p.is_file()
    }


def test_an_export_split_between_two_processes_is_the_one_process_export(
    store: Store, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A large store's export is read, built and written in two processes
    (:func:`kexp.storage.parallel.in_two_processes`): the same files, byte for byte, as
    in one, partitions whose columns differ made alike in both (a derived value one
    partition has and the others lack)."""
    import kexp.output.parquet
    import kexp.storage.parallel
    from kexp.output.export import to_record

    record_all(store, [
        {"operator_sig": op, "score": score, "status": "done", "is_buggy": score < 1,
         "created_at": stamp, "results": score > 1, "tags": ["a"] if score > 1 else []}
        for op in OPERATORS for stamp in STAMPS for score in (0.5, 1.2)
    ])  # fmt: skip
    late = sorted(e.id for e in store.list_experiments(operator="fp8 gemm"))

    def with_late(exp: Any, *args: Any, **kwargs: Any) -> dict[str, Any]:
        record = to_record(exp, *args, **kwargs)
        return {**record, "late_value": 1.5} if exp.id in late else record

    monkeypatch.setattr(kexp.output.parquet, "to_record", with_late)
    monkeypatch.setenv("KEXP_NO_FORK", "1")
    export_parquet(store, tmp_path / "one")
    monkeypatch.delenv("KEXP_NO_FORK")
    monkeypatch.setattr(kexp.storage.parallel, "PARALLEL_MIN_FILES", 1)
    monkeypatch.setattr(kexp.storage.parallel, "_forkable", lambda: True)
    export_parquet(store, tmp_path / "two")
    one, two = files_of(tmp_path / "one"), files_of(tmp_path / "two")
    assert sorted(one) == sorted(two)
    assert {name for name in one if one[name] != two[name]} == set()
    counts = sql(f"SELECT count(late_value), count(*) FROM {experiments_of(tmp_path / 'two')}")
    assert counts == [(len(late), len(OPERATORS) * len(STAMPS) * 2)]


def test_refuses_a_folder_it_did_not_write_and_a_file(store: Store, tmp_path: Path) -> None:
    mine = tmp_path / "mine"
    mine.mkdir()
    (mine / "notes.txt").write_text("keep me\n")
    result = CliRunner().invoke(
        main, ["--root", str(store.root), "export", "--format", "parquet", "-o", str(mine)]
    )
    assert result.exit_code != 0
    assert "holds no kexp export" in result.output and "Traceback" not in result.output
    assert [p.name for p in mine.iterdir()] == ["notes.txt"]
    afile = tmp_path / "file"
    afile.write_text("x")
    result = CliRunner().invoke(
        main, ["--root", str(store.root), "export", "--format", "parquet", "-o", str(afile)]
    )
    assert result.exit_code != 0 and "is not a folder" in result.output
    result = CliRunner().invoke(main, ["--root", str(store.root), "export", "--format", "parquet"])
    assert result.exit_code != 0 and "-o DIR" in result.output


def test_without_pyarrow_one_line_says_what_to_install(
    store: Store, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setitem(sys.modules, "pyarrow", None)
    monkeypatch.setitem(sys.modules, "pyarrow.parquet", None)
    result = CliRunner().invoke(
        main,
        ["--root", str(store.root), "export", "--format", "parquet", "-o", str(tmp_path / "o")],
    )
    assert result.exit_code != 0
    assert result.output.strip().count("\n") == 0
    assert "pip install 'kexp[parquet]'" in result.output
    assert not (tmp_path / "o").exists()


@pytest.mark.parametrize(
    ("operator", "value"),
    [
        ("csrc/kernels/cache_kernels.cu: reshape_and_cache_flash",
         "csrc_kernels_cache_kernels.cu_reshape_and_cache_flash"),
        ("..", "none"),
        ("", "none"),
        ("a" * 200, "a" * 80),
        ("k::run<8> ünï", "k_run_8_n"),
    ],
)  # fmt: skip
def test_partition_values_are_safe_folder_names(operator: str, value: str) -> None:
    assert partition_value(operator) == value


def test_an_empty_store_exports_tables_an_engine_reads(store: Store, tmp_path: Path) -> None:
    result = export_parquet(store, tmp_path / "out")
    assert (result.experiments, result.results) == (0, 0)
    assert sql(f"SELECT count(*) FROM {experiments_of(tmp_path / 'out')}") == [(0,)]
    assert sql(f"SELECT count(*) FROM {results_of(tmp_path / 'out')}") == [(0,)]


def _side_branch_query(folder: Path) -> str:
    """docs/parquet.md's query of what only side branches hold, as written there."""
    import re

    text = (Path(__file__).parent.parent / "docs" / "parquet.md").read_text(encoding="utf-8")
    blocks = re.findall(r"```sql\n(.*?)```", text, re.S)
    (block,) = [b for b in blocks if b.startswith("-- across refs")]
    return block.replace("DIR", str(folder))


def _kexp(folder: Path, *args: str) -> str:
    result = CliRunner().invoke(main, ["--root", str(folder), *args])
    assert result.exit_code == 0, result.output
    return result.stdout


def test_an_export_across_refs_says_where_each_was_found_as_json_does(tmp_path: Path) -> None:
    """Agent a lands a step on main; agent b records a new step and corrects a's on its
    side branch (kexp sync --branch). A lead exporting --all-refs asks DuckDB what only
    side branches hold: ref, refs and other_versions are the JSON Lines export's, and
    the documented query answers b's two changes (trial 17: the columns were missing)."""
    remote, _ = make_remote(tmp_path)
    clones = {}
    for name in ("a", "b"):
        clones[name] = tmp_path / name
        git(tmp_path, "clone", "-q", str(remote), str(clones[name]))
        for key, value in (("user.name", name), ("user.email", f"{name}@example.com")):
            git(clones[name], "config", key, value)
    a, b = clones["a"], clones["b"]
    base = git(a, "rev-parse", "HEAD").strip()
    landed = Store(a).create_experiment(
        **experiment_fields(change_summary="merged step - +20%", score=1.2, base_commit=base)
    )
    _kexp(a, "sync")
    git(b, "pull", "-q")
    side = Store(b).create_experiment(
        **experiment_fields(change_summary="side step - +30%", score=1.3, base_commit=base)
    )
    _kexp(b, "update", landed.id, "--set", "tags=checked", "--reason", "reviewed")
    _kexp(b, "sync", "--branch", "kexp/b")
    git(a, "fetch", "-q")

    out = tmp_path / "pq"
    _kexp(a, "export", "--format", "parquet", "--all-refs", "-o", str(out))
    lines = _kexp(a, "export", "--format", "jsonl", "--all-refs").splitlines()
    expected = {r["id"]: (r["ref"], r["refs"], r["other_versions"]) for r in map(json.loads, lines)}
    rows = sql(f"SELECT id, ref, refs, other_versions FROM {experiments_of(out)}")
    assert {i: (ref, refs, others) for i, ref, refs, others in rows} == expected
    assert expected[side.id] == ("origin/kexp/b", ["origin/kexp/b"], [])
    assert expected[landed.id][:2] == ("origin/kexp/b", ["origin/kexp/b"])
    assert "origin/main" in expected[landed.id][2]
    answered = sql(_side_branch_query(out))
    assert {row[0] for row in answered} == {side.id, landed.id}

    alone = tmp_path / "alone"
    _kexp(a, "export", "--format", "parquet", "-o", str(alone))  # the working tree alone
    columns = [row[0] for row in sql(f"DESCRIBE SELECT * FROM {experiments_of(alone)}")]
    assert not {"ref", "refs", "other_versions"} & set(columns), columns


def test_an_export_across_refs_of_no_experiment_has_the_ref_columns(
    store: Store, tmp_path: Path
) -> None:
    """The documented query runs over an export across refs with no row, too."""
    _kexp(store.root, "export", "--format", "parquet", "--all-refs", "-o", str(tmp_path / "pq"))
    assert sql(_side_branch_query(tmp_path / "pq")) == []


def _documented_query(first_line: str, folder: Path) -> str:
    """The SQL block of docs/parquet.md that starts with ``first_line``, as written."""
    import re

    text = (Path(__file__).parent.parent / "docs" / "parquet.md").read_text(encoding="utf-8")
    (block,) = [b for b in re.findall(r"```sql\n(.*?)```", text, re.S) if b.startswith(first_line)]
    return block.replace("DIR", str(folder))


def test_a_value_a_file_does_not_have_is_null_as_an_analyst_counts_it(tmp_path: Path) -> None:
    """Trial K01: a step whose file has no author, no ``measured_against``, no interval
    and no error message was exported as ``''`` / ``[]``, so ``count()`` counted what no
    file holds and ``GROUP BY author`` made a ``''`` author. Each is NULL, as
    ``cumulative_ci`` is; a value a file holds stays as it is. The documented noise
    floor query names the newest control's interval, NULL when it has none (not an older
    control's)."""
    root = init_repo(tmp_path / "repo")
    (root / "experiments").mkdir()
    store = Store(root)
    made = {}
    for name, fields in {
        "root": {"measured_against": "reference", "score_ci": [1.01, 1.09], "author": "ann"},
        "step": {"change_summary": "step - +2%", "score": 1.02},
        "old control": {"tags": ["control"], "score": 1.0, "score_ci": [0.98, 1.02]},
        "new control": {"tags": ["control"], "score": 1.004},
    }.items():
        if name == "step":
            fields["pid"] = made["root"].id
        fields.setdefault("author", "ben")
        made[name] = store.create_experiment(**experiment_fields(base_commit=COMMIT, **fields))
    # A file without author, as imported and hand-written files are.
    path = made["step"].path
    assert path is not None
    path.write_text(path.read_text().replace("author: ben\n", ""), encoding="utf-8")

    out = tmp_path / "pq"
    done = run_kexp("export", "--format", "parquet", "-o", str(out), cwd=root, process=True)
    assert done.returncode == 0, done.stderr
    table = experiments_of(out)
    counts = sql(
        "SELECT count(*), count(author), count(measured_against), count(score_ci), "
        f"count(pid), count(error_message), count(protocol), count(cumulative_ci) FROM {table}"
    )
    assert counts == [(4, 3, 1, 2, 1, 0, 0, 1)]  # the root's interval is its cumulative one
    by_author = sql(f"SELECT author, count(*) FROM {table} GROUP BY author ORDER BY ALL")
    assert by_author == [("ann", 1), ("ben", 2), (None, 1)]
    kept = sql(f"SELECT author, measured_against, score_ci FROM {table} WHERE pid IS NULL")
    assert ("ann", "reference", [1.01, 1.09]) in kept
    (floor,) = sql(_documented_query("-- kexp lessons: the noise floor", out))
    assert floor[1:] == (made["new control"].id, 1.004, None)
