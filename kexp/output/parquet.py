"""``kexp export --format parquet -o DIR``: the store as a Parquet dataset, for engines.

DuckDB, Polars, Spark and every warehouse read Parquet. The export is two tables, each
partitioned hive-style by operator and creation month::

    DIR/experiments/operator=<op>/month=<YYYY-MM>/part-0.parquet
    DIR/results/operator=<op>/month=<YYYY-MM>/part-0.parquet
    DIR/_kexp_export.json          what kexp wrote (and the mark of a kexp export)

``experiments`` has one row per experiment and a column per key of the JSON export's
record (:func:`kexp.output.export.to_record`: every field, what a file keeps besides them, the
derived ``outcome``, ``suspect`` reasons and ``path``; a value kexp derives later comes
with it): ``score`` a double, ``is_buggy`` a boolean, ``created_at`` a timestamp (UTC,
microseconds), ``tags``, ``combines`` and ``suspect`` lists of strings, ``score_ci`` a
list of doubles, ``cumulative_score`` a double and ``cumulative_ci`` a list of doubles
(null when there is none: ``cumulative_reason`` says why), mappings and lists of
mappings (``protocol``, ``results``, ``extra_fields``) JSON text, the rest text. A value
a file does not have (no parent, an optional field or a section left out, no interval:
:data:`ABSENT_WHEN_EMPTY`) is null, where the JSON record holds ``""``, ``[]`` or ``{}``.
Read across refs (``--refs``, ``--all-refs``), it has the JSON export's ``ref`` (text),
``refs``, ``other_versions`` and ``removed_on`` (lists of strings) too: where each was
found and the side branches whose removal of it waits unmerged, with ``unmerged_on`` (a
list of strings: the side branches whose unmerged versions its numbers rest on, as
``kexp top`` marks them) and ``default_cumulative_score`` (a double: its cumulative
score as the working tree or default branch holds them; null when it rests on none)
(:func:`kexp.output.export.sighting_record`).
``results`` has one row per configuration measured (``id``, the experiment's
``operator_sig``, ``dtype_sig``, ``env``, ``created_at``, then ``config``, ``baseline``,
``candidate``, ``speedup``, ``unit``, the sample counts (NULL past 64 bits: a warning
names the file) and IQRs, and any other key as JSON in ``extra``).

The partition value ``operator`` is ``operator_sig`` made safe for a folder name
(characters other than letters, digits, ``.``, ``_`` and ``-`` become ``_``; at most
:data:`MAX_PARTITION_CHARS`); the real value is the ``operator_sig`` column (two
operators may share a folder). An export is built beside ``DIR`` and put in its place
when complete, replacing an earlier export whole (the staging folder of one killed before
it finished, locked by none, is removed by the next); a folder that is not empty and
holds no kexp export is refused.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import itertools
import json
import os
import re
import secrets
import shutil
import warnings
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from kexp.core.collector import collector_paused
from kexp.core.errors import KexpError, KexpWarning
from kexp.core.fields import BODY_FIELDS, FIELDS
from kexp.core.problems import display_path
from kexp.output.export import RECORD_FIELDS, SIGHTING_KEYS, sighting_record, to_record
from kexp.storage.atomic import replace_folder, writing_output
from kexp.storage.locking import folder_lock

if TYPE_CHECKING:
    from kexp.core.model import KernelExperiment
    from kexp.storage.store import Store

#: The file that marks a folder as a kexp Parquet export (readers skip ``_`` files).
MARKER = "_kexp_export.json"
EXPERIMENTS_TABLE = "experiments"
RESULTS_TABLE = "results"
MAX_PARTITION_CHARS = 80
#: The columns the ``NAME=value`` folders of a partition give (hive-style).
PARTITION_COLUMNS = ("operator", "month")
_UNSAFE = re.compile(r"[^A-Za-z0-9._-]+")
_FILE = "part-0.parquet"
#: The named columns of the results table (any other key of a result goes to ``extra``).
RESULT_COLUMNS = (
    "config",
    "baseline",
    "candidate",
    "speedup",
    "unit",
    "baseline_n",
    "candidate_n",
    "baseline_iqr",
    "candidate_iqr",
)
_MISSING_PYARROW = (
    "kexp export --format parquet needs pyarrow, which is not installed: "
    "pip install 'kexp[parquet]' (or pip install pyarrow)"
)


@dataclasses.dataclass(frozen=True)
class ParquetExport:
    """What an export wrote."""

    folder: Path
    experiments: int
    results: int
    #: The Parquet files written, relative to ``folder``.
    files: tuple[str, ...]

    def to_dict(self) -> dict[str, Any]:
        """The export as JSON-ready data (also the marker file's content)."""
        return {
            "format": "kexp-parquet/1",
            "experiments": self.experiments,
            "results": self.results,
            "tables": {
                EXPERIMENTS_TABLE: f"{EXPERIMENTS_TABLE}/**/*.parquet",
                RESULTS_TABLE: f"{RESULTS_TABLE}/**/*.parquet",
            },
            "files": list(self.files),
        }


def partition_value(operator_sig: str) -> str:
    """The ``operator=`` folder name of an operator: safe on every file system."""
    safe = _UNSAFE.sub("_", operator_sig).strip("._")[:MAX_PARTITION_CHARS].strip("._")
    return safe or "none"


def export_parquet(store: Store, output: Path | str, **filters: Any) -> ParquetExport:
    """Write the experiments of ``store`` matching ``filters`` as a Parquet dataset in
    the folder ``output`` (see the module's description); an earlier export there is
    replaced whole. Raises :class:`KexpError` when pyarrow is missing or ``output`` is
    not a folder kexp may replace."""
    pa, pq = _pyarrow()
    target = Path(output)
    with writing_output(target):
        _check_output(target)
    listed = store.list_experiments(brief=True, **filters)
    for exp in listed:
        _warn_of_unfit_counts(exp)
    groups: dict[tuple[str, str], list[KernelExperiment]] = {}
    for exp in listed:
        key = (partition_value(exp.operator_sig), exp.created_at[:7])
        groups.setdefault(key, []).append(exp)
    # Records and tables are made and dropped a partition at a time, none in a cycle:
    # the collector's passes over the listed experiments would only cost CPU (12 % at
    # 100,000).
    with writing_output(target, made_folder=True), collector_paused():
        return _write_export(pa, pq, store, target, groups)


def _write_export(
    pa: Any,
    pq: Any,
    store: Store,
    target: Path,
    groups: dict[tuple[str, str], list[KernelExperiment]],
) -> ParquetExport:
    """Build the export of ``groups`` in a new folder beside ``target`` and put it in
    place."""
    target.parent.mkdir(parents=True, exist_ok=True)
    _remove_leftovers(target)
    staging = target.parent / f".{target.name}.kexp-new-{secrets.token_hex(4)}"
    staging.mkdir()
    # Locked while it is written (by the child too, which shares the lock): a staging
    # folder nobody holds is a killed export's, which the next one removes.
    with folder_lock(staging, 0):
        return _build(pa, pq, store, target, staging, groups)


def _remove_leftovers(target: Path) -> None:
    """Remove the staging folders of exports into ``target`` that were killed (kexp's
    own, by name, that no export holds locked): never another export's at work."""
    leftover = re.compile(rf"\.{re.escape(target.name)}\.kexp-new-[0-9a-f]{{8}}")
    with os.scandir(target.parent) as entries:
        found = [
            Path(entry.path)
            for entry in entries
            if leftover.fullmatch(entry.name) and entry.is_dir(follow_symlinks=False)
        ]
    for folder in found:
        try:
            with folder_lock(folder, 0):
                # empty: one an export just made and is about to lock (a killed one's
                # holds what it wrote)
                if any(folder.iterdir()):
                    shutil.rmtree(folder, ignore_errors=True)
        except (KexpError, OSError):  # held: an export at work; or gone meanwhile
            continue


def _build(
    pa: Any,
    pq: Any,
    store: Store,
    target: Path,
    staging: Path,
    groups: dict[tuple[str, str], list[KernelExperiment]],
) -> ParquetExport:
    """:func:`_write_export` in the folder ``staging``, locked."""
    try:
        written = _write_partitions(pa, pq, store, staging, groups)
        files = [relative for relative, _, _, _ in written]
        schemas: dict[str, list[str]] = {}
        counts = {EXPERIMENTS_TABLE: 0, RESULTS_TABLE: 0}
        for _, name, rows, schema in written:
            counts[name] += rows
            schemas.setdefault(name, []).append(schema)
        # Read across refs, where each experiment was found: its columns, rows or none.
        across = store.source.places is not None
        columns = [*RECORD_FIELDS, *SIGHTING_KEYS] if across else list(RECORD_FIELDS)
        empty = {
            EXPERIMENTS_TABLE: _experiments_table(pa, [], columns),
            RESULTS_TABLE: _results_table(pa, []),
        }
        for name, table in empty.items():
            if name not in schemas:  # no row: one empty file, so that the table exists
                # with the columns the partition folders give a table with rows (a
                # query on month answers no row)
                for column in PARTITION_COLUMNS:
                    table = table.append_column(column, pa.array([], type=pa.string()))
                (staging / name).mkdir()
                pq.write_table(table, staging / name / _FILE, compression="zstd")
                files.append(f"{name}/{_FILE}")
        _unify(pa, pq, staging, files, schemas)
        result = ParquetExport(
            target, counts[EXPERIMENTS_TABLE], counts[RESULTS_TABLE], tuple(files)
        )
        marker = json.dumps(result.to_dict(), indent=2) + "\n"
        (staging / MARKER).write_text(marker, encoding="utf-8")
        _replace(staging, target)
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise
    return result


#: What :func:`_write_partitions` gives per file: its path in the export, its table, its
#: rows and its schema (as text).
_Written = tuple[str, str, int, str]


def _write_partitions(
    pa: Any,
    pq: Any,
    store: Store,
    staging: Path,
    groups: dict[tuple[str, str], list[KernelExperiment]],
) -> list[_Written]:
    """Write the files of every partition of ``groups`` into ``staging``, in the order
    of the partitions. Reading the bodies, building and writing the tables is most of
    an export's work: a large store's is split between this process and a forked child
    (:func:`kexp.storage.parallel.in_two_processes`, which does the child's half here if
    the child fails); the files are the same either way."""
    # lazy: not every command that imports this module needs kexp.storage.parallel
    from kexp.storage.parallel import in_two_processes

    def work(part: list[tuple[str, str]]) -> list[_Written]:
        written: list[_Written] = []
        for operator, month in part:
            records = [
                {**to_record(e, relative_to=store.root), **sighting_record(e)}
                for e in store.with_bodies(groups[operator, month])
            ]
            folder = f"operator={operator}/month={month}"  # PARTITION_COLUMNS
            tables = {
                EXPERIMENTS_TABLE: _experiments_table(pa, records),
                RESULTS_TABLE: _results_table(pa, records),
            }
            for name, table in tables.items():
                if table.num_rows == 0:
                    continue
                relative = f"{name}/{folder}/{_FILE}"
                (staging / relative).parent.mkdir(parents=True, exist_ok=True)
                pq.write_table(table, staging / relative, compression="zstd")
                written.append((relative, name, table.num_rows, str(table.schema)))
        return written

    keys = sorted(groups)
    total = sum(len(members) for members in groups.values())
    return in_two_processes(work, keys, total, [len(groups[key]) for key in keys])


def _pyarrow() -> tuple[Any, Any]:
    try:
        import pyarrow as pa
        import pyarrow.parquet as pq
    except ImportError:
        raise KexpError(_MISSING_PYARROW) from None
    return pa, pq


def _check_output(target: Path) -> None:
    if target.is_symlink() or (target.exists() and not target.is_dir()):
        raise KexpError(f"{target} is not a folder: give a folder for the Parquet export (-o DIR)")
    if target.is_dir() and any(target.iterdir()) and not (target / MARKER).is_file():
        raise KexpError(
            f"{target} is not empty and holds no kexp export: give an empty or new folder "
            "(kexp replaces only a folder it wrote)"
        )


def _replace(staging: Path, target: Path) -> None:
    """Put the finished export in place of ``target`` (checked again: it may have
    changed meanwhile); the earlier export goes only once the new one is in place."""
    _check_output(target)
    replace_folder(staging, target)


# --- the tables ---------------------------------------------------------------------


def _types(pa: Any) -> dict[str, Any]:
    """The Parquet type of each record key kexp knows (a column that is NULL throughout
    keeps its type)."""
    strings = pa.list_(pa.string())
    return {
        **{name: pa.string() for name in _TEXTS},
        "score": pa.float64(),
        "score_ci": pa.list_(pa.float64()),
        "cumulative_score": pa.float64(),
        "cumulative_ci": pa.list_(pa.float64()),
        "cumulative_reason": pa.string(),
        "measured_against": pa.string(),
        "is_buggy": pa.bool_(),
        "created_at": pa.timestamp("us", tz="UTC"),
        "tags": strings,
        "combines": strings,
        "suspect": strings,
        "ref": pa.string(),
        "refs": strings,
        "other_versions": strings,
        "removed_on": strings,
        "unmerged_on": strings,
        "default_cumulative_score": pa.float64(),
        "extra_sections": pa.list_(strings),
        "protocol": pa.string(),
        "results": pa.string(),
        "extra_fields": pa.string(),
    }


def _experiments_table(
    pa: Any, records: Sequence[dict[str, Any]], names: Sequence[str] = ()
) -> Any:
    """One partition's experiments: a column per record key, in the records' order
    (``names``, when there is no record)."""
    types = _types(pa)
    names = list(dict.fromkeys(itertools.chain.from_iterable(records))) or list(names)
    columns = []
    for name in names:
        values = _cells(name, [record.get(name) for record in records])
        kind = types.get(name)
        if kind is None:
            if any(isinstance(v, dict) or _holds_mappings(v) for v in values):
                values = [_json(v) for v in values]
                kind = pa.string()
            elif any(isinstance(v, str) for v in values) and all(
                v is None or isinstance(v, str) for v in values
            ):
                kind = pa.string()
        columns.append(pa.array(values, type=kind if values or kind else pa.string()))
    return pa.Table.from_arrays(columns, names=names)


#: The keys held as doubles, and as lists of doubles (ints among them converted).
_DOUBLES = frozenset({"score", "cumulative_score"})
_DOUBLE_LISTS = frozenset({"score_ci", "cumulative_ci"})
#: The record keys held as text.
_TEXTS = frozenset(
    {f.name for f in FIELDS if f.kind == "text"}
    | {"preamble", "outcome", "cumulative_reason", "path", "ref"}
)
#: The keys whose empty value (``""``, ``[]``, ``{}``) says the file has none: NULL in
#: the table, so that ``count()`` and ``GROUP BY`` see no value (no parent, an optional
#: field left out, an empty section, no interval). Lists of names (``tags``,
#: ``combines``, ``suspect``, the refs) stay lists, empty when there is none.
ABSENT_WHEN_EMPTY = frozenset(
    {"pid", "measured_against", "score_ci", "author", "protocol", "results", *BODY_FIELDS}
    | {"preamble", "extra_fields", "cumulative_ci", "cumulative_reason"}
)


def _cells(name: str, values: list[Any]) -> list[Any]:
    """A column of record values as the table holds them."""
    if name in ABSENT_WHEN_EMPTY:
        values = [None if value in ("", [], {}) else value for value in values]
    if name == "created_at":
        return [_timestamp(value) for value in values]
    if name in ("protocol", "results", "extra_fields"):
        return [_json(value) for value in values]
    if name in _DOUBLES:
        return [
            float(value) if isinstance(value, int) and not isinstance(value, bool) else value
            for value in values
        ]
    if name in _DOUBLE_LISTS:
        return [[float(v) for v in value] if isinstance(value, list) else value for value in values]
    return values


def _holds_mappings(value: Any) -> bool:
    return isinstance(value, list) and any(isinstance(v, (dict, list)) for v in value)


def _json(value: Any) -> str | None:
    if value is None:
        return None
    return json.dumps(value, ensure_ascii=False, sort_keys=True)


#: ``created_at`` as kexp writes it: ASCII digits, seconds, an optional fraction.
_CANONICAL_STAMP = re.compile(
    r"([0-9]{4})-([0-9]{2})-([0-9]{2})T([0-9]{2}):([0-9]{2}):([0-9]{2})(?:\.([0-9]+))?Z"
)


def _timestamp(value: Any) -> dt.datetime | None:
    """``created_at`` (``YYYY-MM-DDTHH:MM:SS[.fff...]Z``) as an aware datetime (digits
    past microseconds dropped); None when it is not one."""
    if not isinstance(value, str) or not value.endswith("Z"):
        return None
    canonical = _CANONICAL_STAMP.fullmatch(value)
    if canonical is not None:  # the shape kexp writes, without strptime's cost
        year, month, day, hour, minute, second, digits = canonical.groups()
        try:
            moment = dt.datetime(
                int(year), int(month), int(day), int(hour), int(minute), int(second),
                tzinfo=dt.timezone.utc,
            )  # fmt: skip
        except ValueError:
            return None
        return moment.replace(microsecond=int((digits + "000000")[:6])) if digits else moment
    whole, _, fraction = value[:-1].partition(".")
    try:
        moment = dt.datetime.strptime(whole, "%Y-%m-%dT%H:%M:%S")
    except ValueError:
        return None
    micro = int((fraction + "000000")[:6]) if fraction.isdigit() else 0
    return moment.replace(microsecond=micro, tzinfo=dt.timezone.utc)


def _results_table(pa: Any, records: Iterable[dict[str, Any]]) -> Any:
    """One partition's per-configuration results: a row per entry of ``results``."""
    rows: dict[str, list[Any]] = {
        name: []
        for name in ("id", "operator_sig", "dtype_sig", "env", "created_at", *RESULT_COLUMNS)
    }
    rows["extra"] = []
    for record in records:
        for item in record.get("results") or []:
            if not isinstance(item, dict):
                continue
            for name in ("id", "operator_sig", "dtype_sig", "env"):
                rows[name].append(record.get(name))
            rows["created_at"].append(_timestamp(record.get("created_at")))
            for name in RESULT_COLUMNS:
                value = item.get(name)
                if name in ("config", "unit"):
                    rows[name].append(value)
                elif name in _COUNTS:
                    rows[name].append(_count(value))
                else:
                    rows[name].append(_double(value))
            others = {k: v for k, v in item.items() if k not in RESULT_COLUMNS}
            rows["extra"].append(_json(others) if others else None)
    types = {
        "created_at": pa.timestamp("us", tz="UTC"),
        "baseline": pa.float64(),
        "candidate": pa.float64(),
        "speedup": pa.float64(),
        "baseline_n": pa.int64(),
        "candidate_n": pa.int64(),
        "baseline_iqr": pa.float64(),
        "candidate_iqr": pa.float64(),
    }
    return pa.Table.from_arrays(
        [pa.array(values, type=types.get(name, pa.string())) for name, values in rows.items()],
        names=list(rows),
    )


#: The results' keys held as 64-bit integers (the sample counts).
_COUNTS = frozenset({"baseline_n", "candidate_n"})
_INT64_MAX = 2**63 - 1


def _double(value: Any) -> float | None:
    """A number of a result as its double column holds it (an integer past 64 bits
    too: a file holds none past a double's range, see ``yaml-number-too-large``)."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    return float(value)


def _count(value: Any) -> int | None:
    """A sample count as its 64-bit column holds it: None when it is no number, or one
    past 64 bits (``1e23`` is a valid count, whole as the schema asks)."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    if isinstance(value, float) and not value.is_integer():
        return None
    return int(value) if -_INT64_MAX <= value <= _INT64_MAX else None


def _unfit_counts(results: Any) -> list[str]:
    """Where ``results`` holds a sample count (a number) no 64-bit column holds."""
    return [
        f"results[{at}].{name}"
        for at, item in enumerate(results if isinstance(results, list) else [])
        if isinstance(item, dict)
        for name in sorted(_COUNTS)
        if _double(item.get(name)) is not None and _count(item.get(name)) is None
    ]


def _warn_of_unfit_counts(exp: KernelExperiment) -> None:
    """One warning naming the file of ``exp`` when a count of its results cannot be
    exported as the integer it is (before the work is shared with a child process, so
    that it is said once)."""
    unfit = _unfit_counts(exp.results)
    if unfit:
        where = display_path(exp.path) if exp.path is not None else exp.id
        warnings.warn(
            f"{where}: {', '.join(unfit)} too large for a 64-bit integer: NULL in the "
            "Parquet results table (the experiments table's results JSON keeps it)",
            KexpWarning,
            stacklevel=3,
        )


def _unify(pa: Any, pq: Any, folder: Path, files: list[str], schemas: dict[str, list[str]]) -> None:
    """Give every file of a table the same columns and types (an engine reading them as
    one table needs that): a column a partition lacks, or holds only empty values of, is
    added or cast. ``schemas``: each table's schemas as text, one per file; the
    partitions that already match are not rewritten."""
    for name, found in schemas.items():
        if len(set(found)) <= 1:
            continue
        mine = [relative for relative in files if relative.startswith(f"{name}/")]
        unified = pa.unify_schemas(
            [pq.read_schema(folder / relative) for relative in mine], promote_options="permissive"
        )
        for relative in mine:
            table = pq.ParquetFile(folder / relative).read()
            if table.schema.equals(unified):
                continue
            columns = [
                table.column(field.name).cast(field.type)
                if field.name in table.column_names
                else pa.nulls(table.num_rows, type=field.type)
                for field in unified
            ]
            table = pa.Table.from_arrays(columns, schema=unified)
            pq.write_table(table, folder / relative, compression="zstd")
