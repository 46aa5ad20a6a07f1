"""Experiments as records: stable keys, sorting, and JSON / JSON Lines / CSV output.

The Python twin of ``kexp export`` is :func:`export`; ``kexp list`` and ``kexp top`` use
:func:`to_record`, :func:`sort_experiments` and :func:`write_records` for their
``--json`` and ``--format`` output.
"""

from __future__ import annotations

import csv
import json
import os
from collections.abc import Iterable, Iterator, Sequence
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any

from kexp.core.advice import READ_ACROSS_REFS
from kexp.core.errors import KexpError
from kexp.core.fields import (
    ALL_FIELDS,
    BODY_FIELDS,
    BOOLEAN_FIELDS,
    BRIEF_STORED,
    FIELDS,
    JSON_FIELDS,
    LIST_FIELDS,
    NUMBER_FIELDS,
    OPTIONAL_FIELDS,
)
from kexp.core.model import KernelExperiment
from kexp.core.outcome import time_key
from kexp.format.outputs import FORMATS as OUTPUT_FORMATS
from kexp.format.outputs import record_format_names, write_csv

if TYPE_CHECKING:
    from kexp.storage.store import Store

#: What a file keeps besides its fields, as record keys: unknown front-matter keys
#: (a mapping), the text before the first section, and the ``## `` sections kexp does
#: not know (a list of [heading, text]).
KEPT_CONTENT = ("extra_fields", "preamble", "extra_sections")
#: Values derived from the rest (ignored when a record is read back).
DERIVED_FIELDS = (
    "outcome",
    "cumulative_score",
    "cumulative_ci",
    "cumulative_reason",
    "suspect",
    "path",
)
#: Every key a record can hold, in their stable order: the stored fields, what the
#: file keeps besides them (:data:`KEPT_CONTENT`), then the derived ``outcome``, the
#: ``cumulative_score`` (the speedup over the operator's reference: see
#: :mod:`kexp.core.campaign`) with its ``cumulative_ci`` and, when there is none, its
#: ``cumulative_reason``, ``suspect`` (why the measurement is implausible: a list,
#: empty when it is believable) and the file's ``path``.
RECORD_FIELDS = (*ALL_FIELDS, *KEPT_CONTENT, *DERIVED_FIELDS)
#: Keys ``--fields`` also accepts, derived from the fields: the ``**Key insight**:`` line
#: of the detailed description.
DERIVED_RECORD_FIELDS = ("key_insight",)
#: What ``--brief`` prints: what an agent needs to decide, in this order (``score_ci``,
#: ``key_insight`` and ``suspect`` only when there is one): the stored fields the table
#: marks ``brief`` (:mod:`kexp.core.fields`), the derived values after the score's interval.
_AFTER_SCORE = BRIEF_STORED.index("score_ci") + 1
BRIEF_FIELDS = (
    *BRIEF_STORED[:_AFTER_SCORE],
    "cumulative_score",
    "cumulative_ci",
    "outcome",
    "key_insight",
    "suspect",
    *BRIEF_STORED[_AFTER_SCORE:],
)
#: Fields whose empty value machine output leaves out (unless asked for): the optional
#: front-matter fields, the body sections, what a file keeps besides its fields, and
#: ``suspect`` (empty: believable).
_DROPPED_WHEN_EMPTY = frozenset(
    {*OPTIONAL_FIELDS, *BODY_FIELDS, *KEPT_CONTENT, "suspect"}
    | {"key_insight", "cumulative_ci", "cumulative_reason"}
)
#: Output formats of :func:`write_records`: the registry's record formats
#: (:mod:`kexp.format.outputs`).
FORMATS = tuple(record_format_names())
_NUMERIC = NUMBER_FIELDS
#: Derived numbers that may be missing (sorted after every number).
_MAYBE_NUMERIC = frozenset({"cumulative_score"})
#: Record keys whose CSV cells hold JSON (lists and mappings), and numbers and booleans.
_CSV_JSON = (
    LIST_FIELDS | JSON_FIELDS | {"extra_fields", "extra_sections", "suspect", "cumulative_ci"}
)
_CSV_NUMBERS = NUMBER_FIELDS | {"cumulative_score"}
_CSV_BOOLEANS = BOOLEAN_FIELDS
#: The keys whose empty CSV cell is an empty mapping (else an empty list).
_MAPPINGS = frozenset({*(f.name for f in FIELDS if f.kind == "mapping"), "extra_fields"})
#: Text of a file kept besides its fields that a brief record leaves out, as the bodies.
_BRIEF_DROPS = frozenset({*BODY_FIELDS, "preamble", "extra_sections"})
#: Record keys made of a file's text (its body), not of its front-matter.
_TEXTS = frozenset({*_BRIEF_DROPS, "key_insight"})


#: The keys a read across refs adds to each record of ``--json`` (where it was found:
#: :meth:`kexp.storage.rows.Sighting.to_dict`), each with its value when it is not there.
WHERE_FIELDS = {
    "ref": "",
    "refs": [],
    "other_versions": [],
    "diverged": False,
    "diverged_on": [],
    "removed_on": [],
    "note": "",
}


def check_fields(fields: Iterable[str], *, where: bool = False) -> list[str]:
    """Return ``fields`` as a list if every one is a record key (with ``where``, or one
    of :data:`WHERE_FIELDS`: ``--fields``, not ``--sort``), else raise KexpError."""
    chosen = list(fields)
    known = (*RECORD_FIELDS, *DERIVED_RECORD_FIELDS, *(WHERE_FIELDS if where else ()))
    unknown = [f for f in chosen if f not in known]
    if unknown:
        raise KexpError(f"unknown field(s) {', '.join(unknown)}; fields are: {', '.join(known)}")
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
    # lazy: not every command that imports this module needs kexp.format.suspect
    from kexp.format.suspect import suspect_reasons

    stored = exp.to_dict(include_derived=True)
    data = {name: stored[name] for name in ALL_FIELDS}  # the file's order, id first
    path = stored.pop("path", None)
    derived = {name: stored[name] for name in DERIVED_FIELDS if name in stored}
    data["extra_fields"] = dict(exp.extra_fields)
    data["preamble"] = exp.preamble
    data["extra_sections"] = [[heading, text] for heading, text in exp.extra_sections]
    data.update(derived)
    data["suspect"] = suspect_reasons(exp, exp.settings)
    data["path"] = path
    if exp.path is not None:
        base = (os.fspath(relative_to) or os.curdir) if relative_to is not None else os.getcwd()
        try:
            data["path"] = os.path.relpath(exp.path, base)
        except ValueError:  # pragma: no cover - another drive on Windows
            data["path"] = str(exp.path)
    if fields:
        chosen = check_fields(fields, where=True)
        asked = [name for name in chosen if name in WHERE_FIELDS]
        if asked:
            data.update(_where(exp, asked))
        if "key_insight" in chosen:
            # lazy: not every command that imports this module needs kexp.format.fileformat
            from kexp.format.fileformat import key_insight

            data["key_insight"] = key_insight(exp.detailed_description)
        return {name: data[name] for name in chosen}
    if brief:
        return {k: v for k, v in data.items() if k not in _BRIEF_DROPS}
    return data


def _where(exp: KernelExperiment, asked: Sequence[str]) -> dict[str, Any]:
    """The fields of :data:`WHERE_FIELDS` ``asked`` for: where a read across refs found
    ``exp``; a KexpError for a read of the working tree alone, which knows none."""
    if exp.where is None:
        raise KexpError(
            f"{', '.join(asked)}: where each experiment was found is known only to a "
            f"{READ_ACROSS_REFS}"
        )
    found = exp.where.to_dict()
    return {name: found.get(name, WHERE_FIELDS[name]) for name in asked}


def machine_record(
    exp: KernelExperiment,
    fields: Sequence[str] | None = None,
    *,
    brief: bool = False,
    front_matter: bool = False,
    full: bool = False,
    relative_to: Path | str | None = None,
) -> dict[str, Any]:
    """One experiment as ``--json`` and ``--format jsonl`` print it: the one place that
    decides their shape.

    ``fields``: exactly those keys, in that order (empty values and ``path`` included).
    Else ``brief``: :data:`BRIEF_FIELDS` (the key insight read from the detailed
    description, the score's interval when it has one); ``front_matter``: the
    front-matter fields with ``outcome`` and ``suspect``; otherwise every field. Unless
    ``full``, an empty optional field (``tags: []``, ``author: ""``, an empty body
    section, ``suspect: []``, no ``score_ci``) is left out, and so is ``path``;
    ``full`` keeps every key of the chosen shape (:data:`RECORD_FIELDS` order). A
    change the A/A control of its env judged within the drift between runs (``marginal``)
    says why after its ``outcome``: ``outcome_reason``, as ``kexp add --json`` does.
    """
    if fields:
        return to_record(exp, fields, relative_to=relative_to)
    if brief:
        # lazy: not every command that imports this module needs kexp.format.fileformat
        from kexp.format.fileformat import key_insight

        record = to_record(exp, relative_to=relative_to)
        record["key_insight"] = key_insight(exp.detailed_description)
        record.setdefault("score_ci", exp.extra_fields.get("score_ci"))
        chosen = {name: record.get(name) for name in BRIEF_FIELDS}
    else:
        chosen = to_record(exp, brief=front_matter, relative_to=relative_to)
        if not full:
            chosen.pop("path", None)
    if "outcome" in chosen and exp.derived.drift:  # why a change is within noise
        chosen = _with_reason(chosen, exp.derived.drift)
    if full:
        return chosen
    return {k: v for k, v in chosen.items() if not (k in _DROPPED_WHEN_EMPTY and _empty(v))}


def _with_reason(record: dict[str, Any], reason: str) -> dict[str, Any]:
    """``record`` with ``outcome_reason`` after its ``outcome``: why the A/A control of
    its env judged its change within the drift between runs (as ``kexp add --json``
    says it)."""
    said: dict[str, Any] = {}
    for key, value in record.items():
        said[key] = value
        if key == "outcome":
            said["outcome_reason"] = reason
    return said


def written_record(exp: KernelExperiment, **extra: Any) -> dict[str, Any]:
    """What a write prints as JSON (``kexp add --json``, ``kexp update --json``): the
    id and the file's path (relative to the working directory when below it), then
    ``extra``."""
    # lazy: not every command that imports this module needs kexp.core.problems
    from kexp.core.problems import display_path

    return {"id": exp.id, "path": "" if exp.path is None else display_path(exp.path), **extra}


def measured_record(exp: KernelExperiment) -> dict[str, Any]:
    """What a measurement written prints as JSON (``kexp add --json``, ``kexp remeasure
    --json``, the MCP record tool): id, path, score, its interval, the outcome and the
    cumulative score (the speedup over the reference its chain of parents reaches; null,
    with ``cumulative_reason``, when there is none); ``outcome_reason`` when the A/A
    control of its env found its change within the drift between runs."""
    extra: dict[str, Any] = {"cumulative_score": exp.cumulative_score}
    if exp.cumulative_score is None:
        extra["cumulative_reason"] = exp.cumulative_reason
    drift = exp.derived.drift
    if drift:
        extra["outcome_reason"] = drift
    return written_record(exp, score=exp.score, score_ci=exp.score_ci, outcome=exp.outcome, **extra)


def _empty(value: Any) -> bool:
    return value is None or value == "" or (isinstance(value, (list, dict, tuple)) and not value)


def sort_experiments(
    experiments: Iterable[KernelExperiment], field: str, *, descending: bool = False
) -> list[KernelExperiment]:
    """Sort by any record field (``outcome`` included); ties keep their order.

    A leading ``-`` on ``field`` sorts descending, as does ``descending=True``.
    """
    if field.startswith("-"):
        field, descending = field[1:], not descending
    check_fields([field])
    # lazy: not every command that imports this module needs kexp.format.suspect
    from kexp.format.suspect import suspect_reasons

    def key(exp: KernelExperiment) -> Any:
        if field == "outcome":
            return exp.outcome
        if field == "suspect":
            return len(suspect_reasons(exp, exp.settings))
        if field == "path":
            return str(exp.path or "")
        if field in _MAYBE_NUMERIC:
            number = getattr(exp, field)
            return (number is not None, float(number or 0.0))
        if field == "cumulative_ci":
            return json.dumps(exp.cumulative_ci)
        if field == "created_at":  # in time order, whatever its precision
            return time_key(exp.created_at)
        value = getattr(exp, field)
        if field in _NUMERIC:
            return float(value)
        if isinstance(value, bool):
            return int(value)
        if isinstance(value, list):
            return json.dumps(value, sort_keys=True)
        return str(value)

    return sorted(experiments, key=key, reverse=descending)


def listed_experiments(
    store: Store,
    *,
    sort: str | None = None,
    reverse: bool = False,
    limit: int | None = None,
    brief: bool = False,
    **filters: Any,
) -> list[KernelExperiment]:
    """What ``kexp list`` (and the MCP tool ``list``) shows: every experiment matching
    ``filters``, oldest first, or by ``sort`` (any record field, a leading ``-``
    descending: :func:`sort_experiments`); ``reverse`` reverses the order; at most
    ``limit``: the newest, or with ``sort`` the first in that order. ``brief``: the body
    fields are not read (:meth:`kexp.Store.list_experiments`)."""
    if sort:
        check_fields([sort.removeprefix("-")])  # before the store is read
    experiments = store.list_experiments(brief=brief, **filters)
    if limit is not None and not sort:
        experiments = experiments[-limit:] if limit > 0 else []
    if sort:
        experiments = sort_experiments(experiments, sort, descending=reverse)
    elif reverse:
        experiments.reverse()
    if limit is not None and sort:
        experiments = experiments[: max(0, limit)]
    return experiments


def write_records(records: Iterable[dict[str, Any]], out: IO[str], output_format: str) -> None:
    """Write records as ``json`` (one array), ``jsonl`` (one object a line) or ``csv``
    (:mod:`kexp.format.outputs`).

    CSV has a header row; lists and mappings in a cell are written as JSON, booleans
    as ``true``/``false``.
    """
    write = OUTPUT_FORMATS[output_format].write if output_format in FORMATS else None
    if output_format == "csv":
        write_csv(records, out, RECORD_FIELDS)
    elif write is not None:
        write(records, out)
    else:
        raise KexpError(f"unknown format {output_format!r}; formats are: {', '.join(FORMATS)}")


def read_records(stream: IO[str], input_format: str) -> list[dict[str, Any]]:
    """The records :func:`write_records` wrote to ``stream`` (``json``, ``jsonl`` or
    ``csv``), with their values' types: CSV cells of lists and mappings are read as
    JSON, ``score`` as a number, ``is_buggy`` as a boolean. Open a CSV file with
    ``newline=""`` (line breaks inside values are kept)."""
    if input_format == "json":
        data = json.load(stream)
        if not isinstance(data, list) or not all(isinstance(r, dict) for r in data):
            raise KexpError("not an export: expected a JSON array of objects")
        return data
    if input_format == "jsonl":
        records = [json.loads(line) for line in stream if line.strip()]
        if not all(isinstance(r, dict) for r in records):
            raise KexpError("not an export: expected one JSON object a line")
        return records
    if input_format == "csv":
        return [
            {name: _csv_value(name, cell) for name, cell in row.items()}
            for row in csv.DictReader(stream)
        ]
    raise KexpError(f"unknown format {input_format!r}; formats are: {', '.join(FORMATS)}")


def _csv_value(name: str, cell: str) -> Any:
    if name in _CSV_JSON or (name in _CSV_NUMBERS and cell):
        if cell:
            return json.loads(cell)
        return {} if name in _MAPPINGS else []
    if name in _CSV_BOOLEANS:
        return cell == "true"
    return cell


#: The keys a read across refs adds to each record (:func:`sighting_record`).
SIGHTING_KEYS = (
    "ref",
    "refs",
    "other_versions",
    "removed_on",
    "unmerged_on",
    "default_cumulative_score",
)


def sighting_record(exp: KernelExperiment, *, joined: bool = False) -> dict[str, Any]:
    """Where a store reading refs found ``exp``, as the exports add it to its record:
    ``ref`` (``local`` when the working tree holds this version, else a remote's
    default branch holding it, else the ref with the newest commit holding it),
    ``refs`` (every place holding this very content) and ``other_versions`` (the
    places holding other versions), ``removed_on`` (the side branches whose removal of
    it waits there, unmerged: ``kexp top``'s ``removed_on``), ``unmerged_on`` (the
    side branches whose unmerged versions, ranked over the working tree's or default
    branch's, its numbers rest on: its own or those its cumulative score builds on;
    ``kexp top``'s ``unmerged`` and ``built on unmerged``) and
    ``default_cumulative_score`` (its cumulative score as the working tree or default
    branch holds them; None when it rests on none); with ``joined`` (CSV), ``ref``,
    ``refs``, ``removed_on`` and ``unmerged_on`` alone, the lists texts of
    space-separated names. Empty for a store read from the working tree alone."""
    sighting = exp.where
    if sighting is None:
        return {}
    found = sighting.to_dict()
    unmerged = sighting.unmerged
    unmerged_on = list(unmerged.refs) if unmerged is not None else []
    removed_on = list(sighting.removed_on)
    if joined:
        return {
            "ref": found["ref"],
            "refs": " ".join(found["refs"]),
            "removed_on": " ".join(removed_on),
            "unmerged_on": " ".join(unmerged_on),
        }
    return {
        "ref": found["ref"],
        "refs": found["refs"],
        "other_versions": found.get("other_versions", []),
        "removed_on": removed_on,
        "unmerged_on": unmerged_on,
        "default_cumulative_score": None if unmerged is None else unmerged.cumulative,
    }


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

    Records are oldest first, paths relative to the store's root, written as they are
    made: the texts of a few files are held at a time, however many are written.
    """
    if output_format not in FORMATS:
        raise KexpError(f"unknown format {output_format!r}; formats are: {', '.join(FORMATS)}")
    shows_texts = not _TEXTS.isdisjoint(fields) if fields else not brief
    # Front-matter comes from the query cache's rows; the texts, when shown, from the
    # files, a few at a time.
    experiments: Iterable[KernelExperiment] = store.list_experiments(brief=True, **filters)
    if shows_texts and not filters.get("text"):  # (a text filter reads the matches whole)
        experiments = store.with_bodies(experiments)
    written = 0

    def records() -> Iterator[dict[str, Any]]:
        nonlocal written
        for exp in experiments:
            record = to_record(exp, fields, brief=brief, relative_to=store.root)
            record.update(sighting_record(exp, joined=output_format == "csv"))
            written += 1
            yield record

    write_records(records(), out, output_format)
    return written
