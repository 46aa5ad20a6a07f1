"""The predecessor's JSON database: lossless import into a store, and export back.

The predecessor kept every experiment in one file, ``kernel_experiments_db.json``: a
JSON object mapping each id to a record with exactly the keys of
:data:`kexp.core.model.LEGACY_FIELDS`. :func:`kexp.output.legacyimport.import_legacy` turns every
record into an experiment file; :func:`kexp.output.legacyexport.export_legacy` writes the store
back in that shape, so that an import followed by an export gives back an equal database
(same keys, same values, same types, byte for byte when written by
:func:`kexp.output.legacyexport.dump_legacy`). This module holds what both share: a record
turned into an experiment and back, the stand-ins, the sidecar.

**How values the format cannot hold are kept (the decision).** A store must stay valid
(queries skip invalid files, and every write validates), yet nothing of a record may be
dropped or silently changed. So the importer keeps every record and every value:

* A value kexp can hold as is (the usual case: all-digit ids and hashes, ``yes``,
  ``null``, multi-line text, CRLF, tabs, emoji, integer scores, empty strings) is stored
  as is; the serializer quotes what YAML would retype and fences what Markdown would
  misread.
* A value kexp cannot hold as is (a ``base_commit`` such as ``main`` or ``""``, a
  ``change_summary`` over 80 characters or on several lines, a ``created_at`` that is no
  ISO UTC time, an unknown ``status``, a score that is no finite number ≥ 0, ``is_buggy``
  without an error message, a ``pid`` naming no record, a key that is no 16-hex id, a
  value of the wrong type) gets a *stand-in* that makes the file valid, and the original
  value is kept exactly in an extra front-matter key ``legacy_<field>`` (for example
  ``legacy_base_commit: main``), which kexp keeps on every read and on updates of
  other fields (an update of the field itself drops it: the new value is the truth).
  Stand-ins:
  ``base_commit`` 40 zeros (git's "no commit"), or the lowercased hash; ``change_summary``
  its first line, cut to fit with ``…``, or ``(no summary)``; ``created_at`` the same
  instant in UTC, else ``1970-01-01T00:00:00Z``; ``status`` its lowercase form, else
  ``done``; ``score`` 0; ``error_message`` a sentence saying none was recorded;
  ``pid`` ``""`` (or the parent's new id); text of the wrong type its JSON text.
* A record key that is no id gets an id (its lowercase form, the record's ``id``, or
  16 hex digits of its SHA-256) and keeps the key in ``legacy_key``; keys a record
  lacks are listed in ``legacy_missing``; keys kexp does not know are kept, with their
  values, in the mapping ``legacy_extra``.
* Every such value is reported with the record's id (:class:`Note`), and counted as
  needing attention. ``base_commit`` values that do not resolve in the code repository
  are kept as they are and reported too.

Before a file is written the importer reads it back and checks that exporting it gives
the record exactly; a record for which that fails is reported and not written (never
written changed). Export uses ``legacy_<field>`` in place of the field whenever it is
present: to correct an imported value for good, set the field (``kexp update ID --set
FIELD=VALUE`` drops its ``legacy_`` line). A ``legacy_pid`` that is the id of an
experiment imported later (another machine's database) becomes the ``pid`` when that
experiment is imported (:attr:`ImportReport.relinked`).

Re-running an import skips records already in the store and identical (compared as
exported), and reports records whose id is taken by a different experiment (conflicts),
never overwriting. Parents are written before their children, so an interrupted import
leaves a valid store; run it again to finish.

**What kexp keeps that the predecessor's records have no place for (the decision).**
``tags``, ``author``, ``combines``, ``results`` (and any field kexp adds), unknown
front-matter keys, the text before the first section and unknown ``## `` sections. The
predecessor builds each record with ``KernelExperiment(**record)``: an extra key in a
record, or an extra entry in the database, would make every one of its reads fail. So
:func:`~kexp.output.legacyexport.export_legacy` writes them beside the database, in a *sidecar* file
(``FILE.kexp.json`` for ``FILE``: ``kernel_experiments_db.json.kexp.json``; see
:func:`sidecar_path`) that the predecessor never opens, and
:func:`~kexp.output.legacyimport.import_legacy`
restores them from the sidecar beside the file it imports (or from
``kernel_experiments_db.kexp.json``, the name earlier versions gave it): store → export
→ import gives the same files. Records kexp made (their id starts with their creation
second) imported with no sidecar are said to have lost what it held. Records the
predecessor added or changed meanwhile import as usual (a sidecar entry only adds what
the record cannot hold).
"""

from __future__ import annotations

import contextlib
import dataclasses
import datetime as dt
import hashlib
import json
import math
import re
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from kexp.core import ids
from kexp.core.errors import KexpError
from kexp.core.inputs import read_input, read_input_text
from kexp.core.model import ALL_FIELDS, LEGACY_FIELDS, STATUSES, KernelExperiment
from kexp.core.progress import reporting
from kexp.core.settings import DEFAULT_SETTINGS
from kexp.format.legacykeys import (
    EXTRA_FIELD,
    KEY_FIELD,
    LEGACY_PREFIX,
    MISSING_FIELD,
    describe_value,
    is_legacy_key,
)

if TYPE_CHECKING:
    pass

#: What an imported record with a parent is measured against (the predecessor's skill).
IMPORTED_AGAINST = "reference"

#: Stand-in ``base_commit`` for a value that is no hash: git's null object id.
NO_COMMIT = "0" * 40
#: Stand-in ``created_at`` for a value that is no time.
NO_TIME = "1970-01-01T00:00:00Z"
#: Stand-in ``change_summary`` for an empty one.
NO_SUMMARY = "(no summary)"
#: Stand-in ``error_message`` of a buggy record that has none.
NO_ERROR_MESSAGE = "(is_buggy is true but the predecessor's record has no error message)"

_HASH = re.compile(r"[0-9a-f]{7,64}")
_TIME = re.compile(r"[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}(\.[0-9]+)?Z")
_LINE_BREAKS = re.compile("[\n\r\x85\u2028\u2029]")
#: Called with (records done, total records) as an import or export advances.
Progress = Callable[[int, int], None]


# --- reports -----------------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class Note:
    """Something about one record worth a person's attention."""

    record: str  # the record's key in the database
    field: str  # the field concerned, or ""
    message: str

    def format(self) -> str:
        """``record: field: message``."""
        where = f"{self.record}: {self.field}:" if self.field else f"{self.record}:"
        return f"{where} {self.message}"


# --- one record <-> one experiment ---------------------------------------------------


def _json_text(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, sort_keys=True)


def _same(a: Any, b: Any) -> bool:
    """Equal as JSON, types included (1 is not 1.0; NaN equals NaN)."""
    kind = type(a)
    if kind is type(b) and kind in (str, bool, int):
        return bool(a == b)  # as JSON: the same text
    return json.dumps(a, sort_keys=True) == json.dumps(b, sort_keys=True)


def _is_score(value: Any) -> bool:
    return type(value) in (int, float) and math.isfinite(value) and value >= 0


def _score_standin(value: Any) -> float:
    if isinstance(value, str):
        try:
            number = float(value.strip())
        except ValueError:
            return 0.0
        if math.isfinite(number) and number >= 0:
            return number
    return 0.0


def _is_time(value: Any) -> bool:
    if not (isinstance(value, str) and _TIME.fullmatch(value)):
        return False
    try:
        dt.datetime.fromisoformat(value[:-1])
    except ValueError:
        return False
    return True


def _time_standin(value: Any) -> str:
    if not isinstance(value, str):
        return NO_TIME
    text = value.strip()
    if text.endswith(("Z", "z")):
        text = text[:-1] + "+00:00"
    try:
        moment = dt.datetime.fromisoformat(text)
    except ValueError:
        return NO_TIME
    if moment.tzinfo is not None:
        moment = moment.astimezone(dt.timezone.utc)
    stamp = moment.strftime("%Y-%m-%dT%H:%M:%S")
    if moment.microsecond:
        stamp += f".{moment.microsecond:06d}"
    candidate = stamp + "Z"
    return candidate if _is_time(candidate) else NO_TIME


def _is_summary(value: Any, limit: int) -> bool:
    return isinstance(value, str) and 0 < len(value) <= limit and not _LINE_BREAKS.search(value)


def _summary_standin(value: Any, limit: int) -> str:
    text = value if isinstance(value, str) else ("" if value is None else _json_text(value))
    lines = (" ".join(part.split()) for part in _LINE_BREAKS.split(text))
    first = next((line for line in lines if line), "")
    if not first:
        return NO_SUMMARY
    return first if len(first) <= limit else first[: limit - 1].rstrip() + "…"


def _is_commit(value: Any) -> bool:
    return isinstance(value, str) and _HASH.fullmatch(value) is not None


def _commit_standin(value: Any) -> str:
    if isinstance(value, str) and _HASH.fullmatch(value.strip().lower()):
        return value.strip().lower()
    return NO_COMMIT


def _is_buggy_standin(value: Any) -> bool:
    if isinstance(value, str):
        return value.strip().lower() in ("true", "yes", "1", "on")
    if isinstance(value, (int, float)):
        return bool(value)
    return False


def _status_standin(value: Any) -> str:
    if isinstance(value, str) and value.strip().lower() in STATUSES:
        return value.strip().lower()
    return "done"


def _text_standin(value: Any) -> str:
    return "" if value is None else _json_text(value)


def derived_id(key: str) -> str:
    """The id given to a record whose key is no id: 16 hex digits of its SHA-256."""
    return hashlib.sha256(key.encode("utf-8", "surrogatepass")).hexdigest()[:16]


def assign_ids(database: Mapping[str, Any]) -> dict[str, str]:
    """The experiment id of each record key (deterministic: depends on the database only).

    A key that is an id is kept. Otherwise the first free of: the record's ``id``, the
    key in lowercase, the record's ``id`` in lowercase; else :func:`derived_id`.
    """
    assigned = {key: key for key in database if ids.is_valid_id(key)}
    claimed = set(assigned)
    for key in sorted(k for k in database if k not in assigned):
        record = database[key]
        own = record.get("id") if isinstance(record, Mapping) else None
        options = [own, key.strip().lower()]
        if isinstance(own, str):
            options.append(own.strip().lower())
        choice = next((o for o in options if ids.is_valid_id(o) and o not in claimed), None)
        if choice is None:
            choice = derived_id(key)
            while choice in claimed:
                choice = derived_id(choice)
        assert isinstance(choice, str)
        assigned[key] = choice
        claimed.add(choice)
    return assigned


class _Builder:
    """Builds one experiment from one record, keeping every value it must replace."""

    def __init__(self, key: str, record: Mapping[str, Any]) -> None:
        self.key = key
        self.record = record
        self.exp = KernelExperiment(id="", created_at="")  # both set from the record
        self.legacy: dict[str, Any] = {}
        self.notes: list[Note] = []

    def note(self, field: str, message: str) -> None:
        self.notes.append(Note(self.key, field, message))

    def value(self, field: str) -> Any:
        """The record's value (``None`` when the key is missing)."""
        return self.record.get(field)

    def set(self, field: str, valid: bool, standin: Any, why: str) -> None:
        """Store the record's value, or ``standin`` keeping the original in legacy_."""
        if field not in self.record:
            setattr(self.exp, field, standin)
            return
        original = self.record[field]
        if valid:
            setattr(self.exp, field, original)
            return
        setattr(self.exp, field, standin)
        self.legacy[field] = original
        self.note(
            field,
            f"{why}: {describe_value(original)} kept in {LEGACY_PREFIX}{field}; "
            f"the field holds {standin!r}",
        )


def experiment_from_legacy(
    key: str,
    record: Mapping[str, Any],
    *,
    exp_id: str | None = None,
    pid: str | None = None,
    summary_limit: int = 80,
) -> tuple[KernelExperiment, list[Note]]:
    """The experiment for one record, and notes on every value kept in ``legacy_*``.

    ``exp_id`` is the id to give it (default: from :func:`assign_ids` of this record
    alone); ``pid`` the parent id to store (default: the record's ``pid`` when it is an
    id). The result is not checked against the store (dangling parents, duplicates).
    """
    build = _Builder(key, record)
    exp = build.exp
    exp.id = exp_id if exp_id is not None else assign_ids({key: record})[key]
    if key != exp.id:
        build.note("id", f"the key {key!r} is no id: kept in {KEY_FIELD}; the id is {exp.id}")
    own = build.value("id")
    if "id" in record and not _same(own, exp.id):
        build.legacy["id"] = own
        build.note("id", f"the record's id {describe_value(own)} is kept in {LEGACY_PREFIX}id")

    raw_pid = build.value("pid")
    if pid is None:
        pid = raw_pid if raw_pid == "" or ids.is_valid_id(raw_pid) else ""
    if "pid" in record and not _same(raw_pid, pid):
        build.legacy["pid"] = raw_pid
        why = f"the parent's id is {pid}" if pid else "no such parent in the database or store"
        build.note("pid", f"{describe_value(raw_pid)}: {why}; kept in {LEGACY_PREFIX}pid")
    exp.pid = pid
    # The predecessor's skill measured every iteration against the operator's original
    # code: its scores are speedups over the reference, never steps.
    exp.measured_against = IMPORTED_AGAINST if pid else ""

    score = build.value("score")
    build.set("score", _is_score(score), _score_standin(score), "not a finite number >= 0")
    status = build.value("status")
    build.set("status", status in STATUSES, _status_standin(status), "not a known status")
    buggy = build.value("is_buggy")
    build.set("is_buggy", isinstance(buggy, bool), _is_buggy_standin(buggy), "not true/false")
    summary = build.value("change_summary")
    build.set(
        "change_summary",
        _is_summary(summary, summary_limit),
        _summary_standin(summary, summary_limit),
        f"not one line of 1 to {summary_limit} characters",
    )
    commit = build.value("base_commit")
    build.set("base_commit", _is_commit(commit), _commit_standin(commit), "not a commit hash")
    created = build.value("created_at")
    build.set("created_at", _is_time(created), _time_standin(created), "not an ISO UTC time")
    for field in (
        "operator_sig",
        "dtype_sig",
        "env",
        "detailed_description",
        "raw_result",
        "profiling_info",
        "error_message",
        "code_change",
    ):
        value = build.value(field)
        build.set(field, isinstance(value, str), _text_standin(value), "not text")
    if exp.is_buggy and not exp.error_message.strip():
        original = build.value("error_message")
        kept = ""
        if "error_message" in record:
            build.legacy.setdefault("error_message", original)
            kept = (
                f": the original {describe_value(original)} is kept in {LEGACY_PREFIX}error_message"
            )
        exp.error_message = NO_ERROR_MESSAGE
        build.note("error_message", f"is_buggy is true but there is no error message{kept}")

    extra: dict[str, Any] = {}
    if key != exp.id:
        extra[KEY_FIELD] = key
    for field in LEGACY_FIELDS:
        if field in build.legacy:
            extra[LEGACY_PREFIX + field] = build.legacy[field]
    missing = [f for f in LEGACY_FIELDS if f not in record]
    if missing:
        extra[MISSING_FIELD] = missing
        build.note("", f"the record has no {', '.join(missing)}: listed in {MISSING_FIELD}")
    unknown = {k: v for k, v in record.items() if k not in LEGACY_FIELDS}
    if unknown:
        extra[EXTRA_FIELD] = unknown
        build.note("", f"keys kexp does not know ({', '.join(unknown)}) are kept in {EXTRA_FIELD}")
    exp.extra_fields = extra
    return exp, build.notes


def legacy_record(exp: KernelExperiment) -> tuple[str, dict[str, Any]]:
    """The predecessor's (key, record) for an experiment: the inverse of the import.

    ``legacy_<field>`` values take the place of their fields; keys listed in
    ``legacy_missing`` are left out; ``legacy_extra`` keys are added.
    """
    extra = exp.extra_fields
    missing = extra.get(MISSING_FIELD)
    absent = set(missing) if isinstance(missing, list) else set()
    record: dict[str, Any] = {}
    for field in LEGACY_FIELDS:
        if field in absent:
            continue
        name = LEGACY_PREFIX + field
        record[field] = extra[name] if name in extra else getattr(exp, field)
    unknown = extra.get(EXTRA_FIELD)
    if isinstance(unknown, Mapping):
        for name, value in unknown.items():
            record.setdefault(str(name), value)
    key = extra.get(KEY_FIELD)
    return (key if isinstance(key, str) else exp.id), record


def differences(a: Mapping[str, Any], b: Mapping[str, Any]) -> list[str]:
    keys = list(dict.fromkeys([*a, *b]))
    return [k for k in keys if k not in a or k not in b or not _same(a[k], b[k])]


# --- import ---------------------------------------------------------------------------


def read_legacy_database(
    path: Path | str, limit: int = DEFAULT_SETTINGS.max_import_bytes
) -> dict[str, Any]:
    """The predecessor's database from a JSON file (an object mapping id -> record),
    refused over ``limit`` bytes (:func:`kexp.core.inputs.read_input`)."""
    path = Path(path)
    raw = read_input(path, "the database", limit=limit, setting="max_import_bytes")
    try:
        text = raw.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise KexpError(
            f"{path} is not UTF-8 text (byte 0x{raw[exc.start]:02x} at offset {exc.start}): "
            "the predecessor wrote its database as UTF-8; re-save the file as UTF-8"
        ) from None
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise KexpError(f"{path}:{exc.lineno}:{exc.colno}: not JSON: {exc.msg}") from None
    except RecursionError:
        raise KexpError(
            f"{path}: the JSON is nested too deep to read (the predecessor's records nest "
            "a few levels at most): is this its database?"
        ) from None
    except ValueError as exc:  # an integer of more digits than Python converts
        raise KexpError(
            f"{path}: not JSON kexp can read: {exc}; the predecessor's numbers are ordinary scores"
        ) from None
    if not isinstance(data, dict):
        raise KexpError(
            f"{path} is not the predecessor's database: expected a JSON object mapping "
            f"each experiment id to its record, found {type(data).__name__}"
        )
    return data


# --- validation ------------------------------------------------------------------------


# --- export ---------------------------------------------------------------------------


# --- the sidecar: what the predecessor's records have no place for ----------------------

#: The sidecar's format version (its ``kexp_sidecar`` key).
SIDECAR_VERSION = 1
#: The fields kexp has and the predecessor's records do not.
KEXP_ONLY_FIELDS = tuple(name for name in ALL_FIELDS if name not in LEGACY_FIELDS)
_KEPT_KEYS = frozenset({*KEXP_ONLY_FIELDS, "extra_fields", "preamble", "extra_sections"})


def sidecar_path(database: Path | str) -> Path:
    """The sidecar of a database file: ``FILE.kexp.json`` beside ``FILE``."""
    database = Path(database)
    return database.with_name(f"{database.name}.kexp.json")


def found_sidecar(database: Path | str) -> Path | None:
    """The sidecar beside a database file, if there is one: :func:`sidecar_path`, else
    ``X.kexp.json`` beside ``X.json`` (the name earlier versions of kexp gave it)."""
    database = Path(database)
    earlier = (
        database.with_name(database.name[: -len(".json")] + ".kexp.json")
        if database.name.endswith(".json")
        else None
    )
    for path in (sidecar_path(database), earlier):
        if path is not None and path.exists():
            return path
    return None


def made_by_kexp(record: Mapping[str, Any]) -> bool:
    """Whether a record is one kexp made (and exported): its id is kexp's, the second
    of its ``created_at`` followed by 8 random hex (a random id matches 1 in 2**32)."""
    exp_id, created = record.get("id"), record.get("created_at")
    if not (isinstance(exp_id, str) and ids.is_valid_id(exp_id) and isinstance(created, str)):
        return False
    try:
        when = dt.datetime.strptime(created[:19], "%Y-%m-%dT%H:%M:%S")
    except ValueError:
        return False
    return int(exp_id[:8], 16) == int(when.replace(tzinfo=dt.timezone.utc).timestamp())


def kept_content(exp: KernelExperiment) -> dict[str, Any]:
    """What an experiment keeps that its legacy record cannot hold (empty: nothing):
    the kexp-only fields that are set, unknown front-matter keys (not the import's
    ``legacy_*`` keys, which the record gives back) with the order of all of them,
    the preamble and the unknown sections."""
    kept: dict[str, Any] = {}
    for name in KEXP_ONLY_FIELDS:
        value = getattr(exp, name)
        if value not in ("", [], {}, None):
            kept[name] = value
    if exp.measured_against == (IMPORTED_AGAINST if exp.pid else ""):
        kept.pop("measured_against", None)  # what an import says anyway
    else:
        kept["measured_against"] = exp.measured_against
    own = {k: v for k, v in exp.extra_fields.items() if not is_legacy_key(k)}
    if own:
        kept["extra_fields"] = own
        kept["extra_order"] = list(exp.extra_fields)
    if exp.preamble:
        kept["preamble"] = exp.preamble
    if exp.extra_sections:
        kept["extra_sections"] = [[heading, text] for heading, text in exp.extra_sections]
    return kept


def dump_sidecar(kept: Mapping[str, Mapping[str, Any]], database_name: str) -> str:
    """The sidecar's text: record key -> :func:`kept_content`."""
    return json.dumps(
        {
            "kexp_sidecar": SIDECAR_VERSION,
            "about": f"what kexp keeps that the records of {database_name} have no place "
            "for; kexp import restores it (the predecessor never reads this file)",
            "records": kept,
        },
        indent=2,
        ensure_ascii=False,
    )


def read_sidecar(
    path: Path | str, limit: int = DEFAULT_SETTINGS.max_import_bytes
) -> dict[str, dict[str, Any]]:
    """Record key -> what the experiment keeps besides its record, from a sidecar."""
    path = Path(path)
    try:
        data = json.loads(read_input_text(path, "the sidecar", limit=limit))
    except (ValueError, RecursionError) as exc:  # InputError is a ValueError
        raise KexpError(
            f"cannot read {path} (kexp's sidecar of the database): {exc}; "
            "move it away to import the database without it"
        ) from None
    records = data.get("records") if isinstance(data, dict) else None
    if (
        not isinstance(data, dict)
        or data.get("kexp_sidecar") != SIDECAR_VERSION
        or not isinstance(records, dict)
        or not all(
            isinstance(entry, dict) and set(entry) <= _KEPT_KEYS | {"extra_order"}
            for entry in records.values()
        )
    ):
        raise KexpError(
            f"{path} is not a sidecar this kexp writes (version {SIDECAR_VERSION}); "
            "move it away to import the database without it"
        )
    return records


def restore_kept(exp: KernelExperiment, kept: Mapping[str, Any]) -> None:
    """Give an imported experiment back what :func:`kept_content` took of it."""
    for name in KEXP_ONLY_FIELDS:
        if name in kept:
            setattr(exp, name, kept[name])
    if "preamble" in kept:
        exp.preamble = kept["preamble"]
    if "extra_sections" in kept:
        exp.extra_sections = [(str(h), str(t)) for h, t in kept["extra_sections"]]
    own = kept.get("extra_fields")
    if isinstance(own, Mapping):
        merged = {**exp.extra_fields, **{k: v for k, v in own.items() if not is_legacy_key(k)}}
        order = [k for k in kept.get("extra_order", []) if k in merged]
        order += [k for k in merged if k not in order]
        exp.extra_fields = {k: merged[k] for k in order}


def reporting_to(progress: Progress | None) -> contextlib.AbstractContextManager[None]:
    """Send progress to ``progress`` when given; else to the caller's reporter, if any."""
    return reporting(progress) if progress is not None else contextlib.nullcontext()
