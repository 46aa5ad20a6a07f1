"""The reference programs kexp is measured against (standard library only).

Each runs in a fresh process under ``bench/run.py``; run one by hand with::

    python bench/baselines.py predecessor bench/.data/n1000-.../kernel_experiments_db.json
    python bench/baselines.py sqlite      bench/.data/n1000-.../experiments.sqlite
    python bench/baselines.py read-all    bench/.data/n1000-.../store
    python bench/baselines.py stat-all    bench/.data/n1000-.../store
    python bench/baselines.py parquet-floor bench/.data/n1000-.../kernel_experiments_db.json

Each program imports only what it uses, as a small script would.

* ``predecessor``: what the tool kexp replaces did for "top 20": ``json.load`` of its one
  JSON file, one dataclass object per record, leave out buggy and pending experiments,
  sort by score, print the best 20 (id and score).
* ``sqlite``: the same answer from a SQLite table with an index on score
  (connect, one ``ORDER BY score DESC LIMIT 20`` query).
* ``read-all``: the floor for any design that reads every file: walk ``experiments/``
  with ``os.scandir`` and read every file's bytes; prints the count and bytes.
* ``stat-all``: walk and ``os.stat`` every file (what a cache validated by file
  metadata pays at least); prints the count.
* ``predecessor-create``, ``predecessor-update``, ``predecessor-delete``: what the
  predecessor's ``create_experiment``, ``update_experiment`` and ``delete_experiment``
  did: ``json.load`` of the one file, add (a fresh random id), change or remove one
  record, ``json.dump(db, f, indent=2, sort_keys=True)`` of the whole database back
  into the file. The benchmark runs them on a copy of the file.
* ``parquet-floor`` (pyarrow, not the standard library): the floor for
  ``kexp export --format parquet``'s layout: ``json.load`` of the predecessor's file,
  its records grouped by operator × month, one table from Python lists and one zstd
  Parquet file per group (its 16 keys, no results table); prints the count and files.
"""

from __future__ import annotations

import dataclasses
import os
import sys
from collections.abc import Callable, Iterator, Sequence

TOP_N = 20
PENDING = ("new", "running")


@dataclasses.dataclass
class KernelExperiment:
    """The predecessor's record: its JSON keys, in its dataclass's field order."""

    id: str = ""
    pid: str = ""
    score: float = 0.0
    raw_result: str = ""
    dtype_sig: str = ""
    env: str = ""
    is_buggy: bool = False
    error_message: str = ""
    change_summary: str = ""
    detailed_description: str = ""
    code_change: str = ""
    base_commit: str = ""
    operator_sig: str = ""
    profiling_info: str = ""
    status: str = "new"
    created_at: str = ""


def predecessor(db_path: str) -> None:
    """Load the one JSON file, build every object, print the top 20 by score."""
    import json

    with open(db_path, encoding="utf-8") as handle:
        db = json.load(handle)
    experiments = [KernelExperiment(**record) for record in db.values()]
    candidates = [e for e in experiments if not e.is_buggy and e.status not in PENDING]
    candidates.sort(key=lambda e: e.score, reverse=True)
    for exp in candidates[:TOP_N]:
        print(exp.id, f"{exp.score:.4f}", exp.change_summary)


def sqlite_top(db_path: str) -> None:
    """Connect and ask SQLite for the top 20 by score."""
    import sqlite3

    connection = sqlite3.connect(f"file:{db_path}?mode=ro", uri=True)
    rows = connection.execute(
        "SELECT id, score, change_summary FROM experiments "
        "WHERE is_buggy = 0 AND status NOT IN (?, ?) ORDER BY score DESC LIMIT ?",
        (*PENDING, TOP_N),
    ).fetchall()
    for exp_id, score, summary in rows:
        print(exp_id, f"{score:.4f}", summary)
    connection.close()


def _files(root: str) -> Iterator[str]:
    stack = [os.path.join(root, "experiments")]
    while stack:
        with os.scandir(stack.pop()) as entries:
            for entry in entries:
                if entry.is_dir(follow_symlinks=False):
                    if not entry.name.startswith("."):
                        stack.append(entry.path)
                elif entry.name.endswith(".md") and entry.name != "README.md":
                    yield entry.path


def read_all(root: str) -> None:
    """Read every experiment file's bytes."""
    count = total = 0
    for path in _files(root):
        with open(path, "rb") as handle:
            total += len(handle.read())
        count += 1
    print(count, total)


def stat_all(root: str) -> None:
    """``os.stat`` every experiment file."""
    count = 0
    for path in _files(root):
        os.stat(path)
        count += 1
    print(count)


def _rewrite(db_path: str, change: Callable[[dict[str, dict[str, object]]], str]) -> None:
    import json

    with open(db_path, encoding="utf-8") as handle:
        db = json.load(handle)
    print(change(db))
    with open(db_path, "w", encoding="utf-8") as handle:
        json.dump(db, handle, indent=2, sort_keys=True)


def predecessor_create(db_path: str) -> None:
    """Add one record (a fresh 64-bit random id) and write the whole file back."""
    import secrets
    from datetime import datetime, timezone

    def create(db: dict[str, dict[str, object]]) -> str:
        exp = KernelExperiment(
            id=secrets.token_hex(8),
            score=1.019,
            change_summary="Unrolled the inner loop by 4 - +1.9%",
            status="done",
            operator_sig="csrc/kernels/cache_kernels.cu: reshape_and_cache_flash",
            dtype_sig="bf16",
            env="MI300X, ROCm 7.0.0",
            created_at=datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.%fZ"),
        )
        if exp.id in db:
            raise ValueError(f"experiment {exp.id} exists")
        db[exp.id] = dataclasses.asdict(exp)
        return exp.id

    _rewrite(db_path, create)


def predecessor_update(db_path: str) -> None:
    """Change one record's score and write the whole file back."""

    def update(db: dict[str, dict[str, object]]) -> str:
        key = max(db)
        db[key]["score"] = 2.0 if db[key]["score"] != 2.0 else 1.5
        return key

    _rewrite(db_path, update)


def predecessor_delete(db_path: str) -> None:
    """Remove one record and write the whole file back."""

    def delete(db: dict[str, dict[str, object]]) -> str:
        key = min(db)
        del db[key]
        return key

    _rewrite(db_path, delete)


def parquet_floor(db_path: str) -> None:
    """Write the predecessor's records as ``kexp export --format parquet`` lays them out
    (a zstd file per operator × month), each partition's table made from Python lists."""
    import json
    import re
    import shutil
    import tempfile

    import pyarrow as pa
    import pyarrow.parquet as pq

    with open(db_path, encoding="utf-8") as handle:
        db = json.load(handle)
    unsafe = re.compile(r"[^A-Za-z0-9._-]+")
    groups: dict[tuple[str, str], list[dict[str, object]]] = {}
    for record in db.values():
        operator = unsafe.sub("_", str(record["operator_sig"])).strip("._")[:80].strip("._")
        groups.setdefault((operator or "none", str(record["created_at"])[:7]), []).append(record)
    names = list(KernelExperiment.__dataclass_fields__)
    folder = tempfile.mkdtemp(prefix="kexp-bench-parquet-floor-")
    try:
        for (operator, month), records in sorted(groups.items()):
            table = pa.table({name: [record.get(name) for record in records] for name in names})
            where = os.path.join(folder, f"operator={operator}", f"month={month}")
            os.makedirs(where)
            pq.write_table(table, os.path.join(where, "part-0.parquet"), compression="zstd")
    finally:
        shutil.rmtree(folder, ignore_errors=True)
    print(len(db), len(groups))


PROGRAMS: dict[str, Callable[[str], None]] = {
    "parquet-floor": parquet_floor,
    "predecessor": predecessor,
    "sqlite": sqlite_top,
    "read-all": read_all,
    "stat-all": stat_all,
    "predecessor-create": predecessor_create,
    "predecessor-update": predecessor_update,
    "predecessor-delete": predecessor_delete,
}


def main(argv: Sequence[str]) -> int:
    """``baselines.py PROGRAM PATH``."""
    if len(argv) != 2 or argv[0] not in PROGRAMS:
        print(f"usage: baselines.py {{{','.join(PROGRAMS)}}} PATH", file=sys.stderr)
        return 2
    PROGRAMS[argv[0]](argv[1])
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
