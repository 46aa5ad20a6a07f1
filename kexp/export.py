"""Experiments as records: stable keys, sorting, and JSON / JSON Lines / CSV output.

The Python twin of ``kexp export`` is :func:`export`; ``kexp list`` and ``kexp top`` use
:func:`to_record`, :func:`sort_experiments` and :func:`write_records` for their
``--json`` and ``--format`` output.
"""

from __future__ import annotations

import csv
import json
import os
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any

from kexp.errors import KexpError
from kexp.model import ALL_FIELDS, BODY_FIELDS, KernelExperiment

if TYPE_CHECKING:
    from kexp.store import Store

#: Every key a record can hold, in their stable order: the stored fields, then the
#: derived ``outcome``, ``suspect`` (why the measurement is implausible: a list,
#: empty when it is believable) and the file's ``path``.
RECORD_FIELDS = (*ALL_FIELDS, "outcome", "suspect", "path")
#: Output formats of :func:`write_records`.
FORMATS = ("json", "jsonl", "csv")
_NUMERIC = frozenset({"score"})


def check_fields(fields: Iterable[str]) -> list[str]:
    """Return ``fields`` as a list if every one is a record key, else raise KexpError."""
    chosen = list(fields)
    unknown = [f for f in chosen if f not in RECORD_FIELDS]
    if unknown:
        raise KexpError(
            f"unknown field(s) {', '.join(unknown)}; fields are: {', '.join(RECORD_FIELDS)}"
        )
    return chosen


def to_record(
    exp: KernelExperiment,
    fields: Sequence[str] | None = None,
    *,
    brief: bool = False,
    relative_to: Path | str | None = None,
) -> dict[str, Any]:
    """One experiment as a JSON-ready dict with keys in :data:`RECORD_FIELDS` order.

    ``fields`` keeps only those keys (in the order given); ``brief`` drops the body
    fields (the long texts); ``path`` is shown relative to ``relative_to`` (default: the
    working directory) when the file lies below it.
    """
    from kexp.suspect import suspect_reasons

    data = exp.to_dict(include_derived=True)
    path = data.pop("path", None)
    data["suspect"] = suspect_reasons(exp, exp.settings)
    data["path"] = path
    if exp.path is not None:
        base = Path(relative_to) if relative_to is not None else Path.cwd()
        try:
            data["path"] = os.path.relpath(exp.path, base)
        except ValueError:  # pragma: no cover - another drive on Windows
            data["path"] = str(exp.path)
    if fields:
        return {name: data[name] for name in check_fields(fields)}
    if brief:
        return {k: v for k, v in data.items() if k not in BODY_FIELDS}
    return data


def sort_experiments(
    experiments: Iterable[KernelExperiment], field: str, *, descending: bool = False
) -> list[KernelExperiment]:
    """Sort by any record field (``outcome`` included); ties keep their order.

    A leading ``-`` on ``field`` sorts descending, as does ``descending=True``.
    """
    if field.startswith("-"):
        field, descending = field[1:], not descending
    check_fields([field])
    from kexp.suspect import suspect_reasons

    def key(exp: KernelExperiment) -> Any:
        if field == "outcome":
            return exp.outcome
        if field == "suspect":
            return len(suspect_reasons(exp, exp.settings))
        if field == "path":
            return str(exp.path or "")
        value = getattr(exp, field)
        if field in _NUMERIC:
            return float(value)
        if isinstance(value, bool):
            return int(value)
        if isinstance(value, list):
            return json.dumps(value, sort_keys=True)
        return str(value)

    return sorted(experiments, key=key, reverse=descending)


def _csv_cell(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (list, dict)):
        return json.dumps(value, ensure_ascii=False)
    return str(value)


def write_records(records: Sequence[dict[str, Any]], out: IO[str], output_format: str) -> None:
    """Write records as ``json`` (one array), ``jsonl`` (one object a line) or ``csv``.

    CSV has a header row; lists and mappings in a cell are written as JSON, booleans
    as ``true``/``false``.
    """
    if output_format == "json":
        json.dump(list(records), out, indent=2, ensure_ascii=False)
        out.write("\n")
    elif output_format == "jsonl":
        for record in records:
            out.write(json.dumps(record, ensure_ascii=False) + "\n")
    elif output_format == "csv":
        header = list(records[0]) if records else list(RECORD_FIELDS)
        writer = csv.writer(out, lineterminator="\n")
        writer.writerow(header)
        for record in records:
            writer.writerow([_csv_cell(record.get(name)) for name in header])
    else:
        raise KexpError(f"unknown format {output_format!r}; formats are: {', '.join(FORMATS)}")


def export(
    store: Store,
    out: IO[str],
    output_format: str = "jsonl",
    *,
    fields: Sequence[str] | None = None,
    brief: bool = False,
    **filters: Any,
) -> int:
    """Write every experiment of ``store`` matching ``filters`` to ``out``; returns the count.

    Records are oldest first, paths relative to the
    store's root.
    """
    if output_format not in FORMATS:
        raise KexpError(f"unknown format {output_format!r}; formats are: {', '.join(FORMATS)}")
    experiments = store.list_experiments(**filters)
    records = [to_record(e, fields, brief=brief, relative_to=store.root) for e in experiments]
    write_records(records, out, output_format)
    return len(records)
