"""The predecessor's JSON database: lossless import into a store, and export back.

The predecessor kept every experiment in one file, ``kernel_experiments_db.json``: a
JSON object mapping each id to a record with exactly the keys of
:data:`kexp.model.LEGACY_FIELDS`. :func:`import_legacy` turns every record into an
experiment file; :func:`export_legacy` writes the store back in that shape, so that an
import followed by an export gives back an equal database (same keys, same values,
same types, byte for byte when written by :func:`dump_legacy`).

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
  ``legacy_base_commit: main``), which kexp keeps on every read and update. Stand-ins:
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
present: to correct an imported value for good, set the field and delete its
``legacy_`` line from the file.

Re-running an import skips records already in the store and identical (compared as
exported), and reports records whose id is taken by a different experiment (conflicts),
never overwriting. Parents are written before their children, so an interrupted import
leaves a valid store; run it again to finish.

**What kexp keeps that the predecessor's records have no place for (the decision).**
``tags``, ``author``, ``combines``, ``results`` (and any field kexp adds), unknown
front-matter keys, the text before the first section and unknown ``## `` sections. The
predecessor builds each record with ``KernelExperiment(**record)``: an extra key in a
record, or an extra entry in the database, would make every one of its reads fail. So
:func:`export_legacy` writes them beside the database, in a *sidecar* file
(``FILE.kexp.json`` for ``FILE``: ``kernel_experiments_db.json.kexp.json``; see
:func:`sidecar_path`) that the predecessor never opens, and :func:`import_legacy`
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
import itertools
import json
import math
import re
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from kexp import atomic, ids
from kexp.errors import KexpError
from kexp.fileformat import serialize
from kexp.inputs import read_input, read_input_text
from kexp.legacykeys import (
    EXTRA_FIELD,
    KEY_FIELD,
    LEGACY_PREFIX,
    MISSING_FIELD,
    describe_value,
    is_legacy_key,
)
from kexp.model import ALL_FIELDS, LEGACY_FIELDS, STATUSES, KernelExperiment
from kexp.problems import Problem, has_errors, sort_problems
from kexp.progress import reporting, track
from kexp.settings import DEFAULT_SETTINGS
from kexp.validate import check_bytes, id_from_name, read_and_check
from kexp.yamlio import MAX_DEPTH

if TYPE_CHECKING:
    from kexp.settings import Settings
    from kexp.store import Store

#: What an imported record with a parent is measured against (the predecessor's skill).
_IMPORTED_AGAINST = "reference"

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
_SURROGATE = re.compile("[\ud800-\udfff]")
_MISSING = object()

#: How many files an import writes (and syncs) at once: first, and at most.
FIRST_BATCH, LARGEST_BATCH = 100, 5000
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


@dataclasses.dataclass
class ImportReport:
    """What an import did: counts for the summary, and every note with its record id."""

    source: str
    total: int = 0
    dry_run: bool = False
    #: Record keys written (or, in a dry run, that would be written), in write order.
    imported: list[str] = dataclasses.field(default_factory=list)
    #: Record keys already in the store, identical: not written again.
    skipped: list[str] = dataclasses.field(default_factory=list)
    #: Records whose id is taken by a different experiment: not written.
    conflicts: list[Note] = dataclasses.field(default_factory=list)
    #: Records that could not be imported at all: not written.
    failed: list[Note] = dataclasses.field(default_factory=list)
    #: Values kept in ``legacy_*`` keys, or worth checking (imported records).
    notes: list[Note] = dataclasses.field(default_factory=list)
    #: Record key -> the file written for it.
    paths: dict[str, Path] = dataclasses.field(default_factory=dict)
    #: Said when records kexp made are imported without the sidecar ("" otherwise).
    sidecar_note: str = ""

    @property
    def needing_attention(self) -> list[str]:
        """Keys of records with a conflict, a failure or a note (sorted, unique)."""
        return sorted({n.record for n in (*self.conflicts, *self.failed, *self.notes)})

    @property
    def ok(self) -> bool:
        """Whether every record is now in the store (no conflict, no failure)."""
        return not self.conflicts and not self.failed

    def summary(self) -> str:
        """One line: imported, skipped, needing attention."""
        verb = "would import" if self.dry_run else "imported"
        text = (
            f"{verb} {len(self.imported)}, skipped {len(self.skipped)} (already in the "
            f"store), {len(self.needing_attention)} needing attention"
        )
        details = []
        if self.conflicts:
            details.append(f"{len(self.conflicts)} conflicting")
        if self.failed:
            details.append(f"{len(self.failed)} not imported")
        return text + (f" ({', '.join(details)})" if details else "") + f" of {self.total}"

    def lines(self) -> list[str]:
        """Every note (conflicts, failures, then kept values), then the summary line."""
        out = [f"conflict: {n.format()}" for n in self.conflicts]
        out += [f"not imported: {n.format()}" for n in self.failed]
        out += [f"kept: {n.format()}" for n in self.notes]
        out += [f"no sidecar: {self.sidecar_note}"] if self.sidecar_note else []
        out.append(self.summary())
        return out


@dataclasses.dataclass
class ExportReport:
    """What an export wrote, and what it left out (invalid files, duplicate keys)."""

    destination: str
    exported: int = 0
    problems: list[str] = dataclasses.field(default_factory=list)
    #: The sidecar written beside the database ("" when none was needed).
    sidecar: str = ""
    #: How many experiments keep something in the sidecar.
    kept: int = 0

    def summary(self) -> str:
        """One line: how many records, and how many files were left out."""
        text = f"exported {self.exported} records to {self.destination}"
        if self.sidecar:
            text += f" (and what {self.kept} of them keep besides, in {self.sidecar})"
        if self.problems:
            text += f" ({len(self.problems)} left out: see above)"
        return text

    def lines(self) -> list[str]:
        """Every problem, then the summary line."""
        return [*self.problems, self.summary()]


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
    exp.measured_against = _IMPORTED_AGAINST if pid else ""

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


def _differences(a: Mapping[str, Any], b: Mapping[str, Any]) -> list[str]:
    keys = list(dict.fromkeys([*a, *b]))
    return [k for k in keys if k not in a or k not in b or not _same(a[k], b[k])]


# --- import ---------------------------------------------------------------------------


def read_legacy_database(
    path: Path | str, limit: int = DEFAULT_SETTINGS.max_import_bytes
) -> dict[str, Any]:
    """The predecessor's database from a JSON file (an object mapping id -> record),
    refused over ``limit`` bytes (:func:`kexp.inputs.read_input`)."""
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


@dataclasses.dataclass
class _Plan:
    key: str
    record: Mapping[str, Any]
    exp: KernelExperiment
    notes: list[Note]


def _resolve_parent(
    raw: Any, id_of: Mapping[str, str], by_record_id: Mapping[str, str], present: set[str]
) -> str:
    if not isinstance(raw, str) or raw == "":
        return ""
    if raw in id_of:
        return id_of[raw]
    if raw in by_record_id:
        return by_record_id[raw]
    return raw if ids.is_valid_id(raw) and raw in present else ""


def _break_cycles(plans: dict[str, _Plan]) -> None:
    """Cut every pid loop among the imported records at its smallest key."""
    key_of = {plan.exp.id: key for key, plan in plans.items()}
    for start in sorted(plans):
        path: list[str] = []
        current: str | None = start
        while current is not None and current not in path:
            path.append(current)
            parent = plans[current].exp.pid
            current = key_of.get(parent) if parent else None
        if current is None:
            continue
        loop = path[path.index(current) :]
        cut = plans[min(loop)]
        raw = cut.record.get("pid", _MISSING)
        if raw is not _MISSING:
            cut.exp.extra_fields = _with_legacy(cut.exp.extra_fields, "pid", raw)
        cut.exp.pid = ""
        cut.notes.append(
            Note(
                cut.key,
                "pid",
                f"parents loop ({' -> '.join([*loop, loop[0]])}): pid cleared, the original "
                f"kept in {LEGACY_PREFIX}pid",
            )
        )


def _with_legacy(extra: dict[str, Any], field: str, value: Any) -> dict[str, Any]:
    """``extra`` with ``legacy_<field>`` set, keeping the canonical key order."""
    wanted = {**extra, LEGACY_PREFIX + field: value}
    order = [KEY_FIELD, *(LEGACY_PREFIX + f for f in LEGACY_FIELDS), MISSING_FIELD, EXTRA_FIELD]
    return {name: wanted[name] for name in order if name in wanted}


def _write_order(plans: dict[str, _Plan]) -> list[_Plan]:
    """Parents before children; otherwise by creation time, then key."""
    key_of = {plan.exp.id: key for key, plan in plans.items()}
    depth: dict[str, int] = {}

    def depth_of(key: str) -> int:
        chain = []
        current: str | None = key
        while current is not None and current not in depth and current not in chain:
            chain.append(current)
            parent = plans[current].exp.pid
            current = key_of.get(parent) if parent else None
        base = depth.get(current, -1) if current is not None else -1
        for item in reversed(chain):
            base += 1
            depth[item] = base
        return depth[key]

    return sorted(plans.values(), key=lambda p: (depth_of(p.key), p.exp.created_at, p.key))


class _CommitChecker:
    """Reports ``base_commit`` values that do not resolve in the code repository."""

    def __init__(self, store: Store, enabled: bool) -> None:
        self.repo: Any = None
        if enabled:
            from kexp import git as kgit

            self.repo = kgit.find_repo(store.code_repo)
        self.cache: dict[str, str | None] = {}

    def problem(self, commit: str) -> str | None:
        if self.repo is None or commit == NO_COMMIT:
            return None
        if commit not in self.cache:
            from kexp import git as kgit

            try:
                kgit.resolve_commit(self.repo, commit)
                self.cache[commit] = None
            except KexpError:
                self.cache[commit] = (
                    f"it does not resolve in the code repository {self.repo.working_dir} "
                    "('git fetch' it there, or correct it)"
                )
        return self.cache[commit]


def import_legacy(
    source: Path | str | Mapping[str, Any],
    store: Store | None = None,
    *,
    dry_run: bool = False,
    check_commits: bool = True,
    progress: Progress | None = None,
    kexp_content: Mapping[str, Mapping[str, Any]] | None = None,
) -> ImportReport:
    """Import the predecessor's database (a file, or its decoded JSON) into ``store``.

    What kexp keeps that the records cannot hold comes from ``kexp_content`` (record
    key -> what :func:`read_sidecar` gives), by default from the sidecar beside the
    file (:func:`sidecar_path`), when there is one.

    Every record becomes one experiment file, every value kept (see the module's
    documentation for values kept in ``legacy_*`` keys). Records already in the store
    and identical are skipped; records whose id is taken by a different experiment are
    reported as conflicts and not written. ``dry_run`` writes nothing and reports what
    would happen. ``check_commits`` reports ``base_commit`` values that do not resolve
    in the code repository. Progress goes to ``progress`` (called with (done, total)
    per record) or else to the reporter of :func:`kexp.progress.reporting`, if any.
    """
    if store is None:
        from kexp import default_store

        store = default_store()
    if isinstance(source, Mapping):
        database: Mapping[str, Any] = source
        label = "<database>"
    else:
        limit = store.settings.max_import_bytes
        database = read_legacy_database(source, limit)
        label = str(source)
        sidecar = found_sidecar(source) if kexp_content is None else None
        if sidecar is not None:
            kexp_content = read_sidecar(sidecar, limit)
    kept = kexp_content or {}
    report = ImportReport(label, total=len(database), dry_run=dry_run)
    if not isinstance(source, Mapping) and kexp_content is None:
        made = sum(1 for r in database.values() if isinstance(r, Mapping) and made_by_kexp(r))
        if made:
            report.sidecar_note = (
                f"{made} record(s) were made by kexp, and there is no sidecar beside the "
                f"database ({sidecar_path(source).name}): the tags, authors, results and "
                "other content kexp kept there are not restored; put the sidecar written "
                "with the export beside the database and import again"
            )
    existing: dict[str, Path] = {}
    for path in store.paths():
        found = id_from_name(path)
        if found is not None:
            existing.setdefault(found, path)
    id_of = assign_ids(database)
    by_record_id = {
        record["id"]: id_of[key]
        for key, record in database.items()
        if isinstance(record, Mapping)
        and isinstance(record.get("id"), str)
        and record["id"] not in id_of
    }
    planned_ids = set(id_of.values()) | set(existing)
    plans: dict[str, _Plan] = {}
    for key, record in database.items():
        if not isinstance(record, Mapping):
            report.failed.append(
                Note(key, "", f"the record is {type(record).__name__}, not an object: not imported")
            )
            continue
        parent = _resolve_parent(record.get("pid"), id_of, by_record_id, planned_ids)
        exp, notes = experiment_from_legacy(
            key,
            record,
            exp_id=id_of[key],
            pid=parent,
            summary_limit=store.settings.max_summary_chars,
        )
        if key in kept:
            _restore_kept(exp, kept[key])
        plans[key] = _Plan(key, record, exp, notes)
    _break_cycles(plans)

    commits = _CommitChecker(store, check_commits and bool(plans))
    present = set(existing)
    tracked = _tracked(_write_order(plans), progress)
    # A batch at a time: its files rendered and checked (in two processes when there are
    # many), then staged in order (a record whose parent failed loses its pid), then
    # written with one sync. Batches grow: the first files are in place soon, and a
    # large import costs a few syncs.
    size = FIRST_BATCH
    while batch := list(itertools.islice(tracked, size)):
        size = min(2 * size, LARGEST_BATCH)
        ahead = _render_ahead(store, [plan for plan in batch if plan.exp.id not in existing])
        staged: list[tuple[_Plan, Path, str]] = []
        for plan in batch:
            written = _stage(store, plan, existing, present, commits, report, ahead.get(plan.key))
            if written is not None:
                path, text = written
                present.add(plan.exp.id)
                if report.dry_run:
                    _imported(report, plan, path)
                else:
                    staged.append((plan, path, text))
        if staged:
            _write_batch(staged, report)
    return report


def _write_batch(batch: list[tuple[_Plan, Path, str]], report: ImportReport) -> None:
    """Write new files for ``batch`` (parents before children): every file written to
    a temporary name and synced at once, then each linked into place in order, a child
    only when its parent's file is in place."""
    from kexp.store import link_new_file, prepare_new_files

    temporaries = prepare_new_files([(path, text) for _, path, text in batch])
    not_written: dict[str, str] = {}
    for (plan, path, _), temporary in zip(batch, temporaries, strict=True):
        if plan.exp.pid in not_written:
            temporary.unlink(missing_ok=True)
            error = f"its parent's file was not written ({not_written[plan.exp.pid]})"
        else:
            try:
                link_new_file(temporary, path)
            except (KexpError, OSError) as exc:
                error = str(exc)
            else:
                _imported(report, plan, path)
                continue
        not_written[plan.exp.id] = error
        report.failed.append(Note(plan.key, "", f"not written: {error}"))
    atomic.sync_folders([path for _, path, _ in batch])  # the new names durable


def _reporting(progress: Progress | None) -> contextlib.AbstractContextManager[None]:
    """Send progress to ``progress`` when given; else to the caller's reporter, if any."""
    return reporting(progress) if progress is not None else contextlib.nullcontext()


def _tracked(items: list[_Plan], progress: Progress | None) -> Iterator[_Plan]:
    with _reporting(progress):
        yield from track(items)


def _imported(report: ImportReport, plan: _Plan, path: Path) -> None:
    report.imported.append(plan.key)
    report.paths[plan.key] = path
    report.notes.extend(plan.notes)


def _stage(
    store: Store,
    plan: _Plan,
    existing: Mapping[str, Path],
    present: set[str],
    commits: _CommitChecker,
    report: ImportReport,
    ahead: tuple[str, str, str] | None = None,
) -> tuple[Path, str] | None:
    """The file to write for one record (checked), or None: skipped, conflict, failed.
    ``ahead`` is its :func:`_render`, made beforehand on the record as planned."""
    exp, key = plan.exp, plan.key
    if exp.id in existing:
        _compare_existing(store, plan, existing[exp.id], report)
        return None
    cleared = bool(exp.pid and exp.pid not in present)
    if cleared:
        # The parent was not written (a failure): keep the store valid.
        raw = plan.record.get("pid", _MISSING)
        if raw is not _MISSING:
            exp.extra_fields = _with_legacy(exp.extra_fields, "pid", raw)
        plan.notes.append(
            Note(key, "pid", f"parent {exp.pid} was not imported: pid cleared, kept in legacy_pid")
        )
        exp.pid = ""
    problem = commits.problem(exp.base_commit)
    if problem is not None:
        plan.notes.append(Note(key, "base_commit", f"kept as is, but {problem}"))
    found = ahead if ahead is not None and not cleared else _render(store, plan)
    where, text, message = found
    if not where:
        report.failed.append(Note(key, text, message))
        return None
    return Path(where), text


def _render_ahead(store: Store, plans: list[_Plan]) -> dict[str, tuple[str, str, str]]:
    """:func:`_render` of each of ``plans``, by key: in two processes when there are many
    (:func:`kexp.parallel.in_two_processes`)."""
    from kexp.parallel import in_two_processes

    def work(part: list[_Plan]) -> list[tuple[str, str, str, str]]:
        return [(plan.key, *_render(store, plan)) for plan in part]

    # Rendering and checking a record costs what reading and checking ten files does
    # (the weight in_two_processes compares with its threshold).
    rendered = in_two_processes(work, plans, 10 * len(plans))
    return {key: (where, text, message) for key, where, text, message in rendered}


def _render(store: Store, plan: _Plan) -> tuple[str, str, str]:
    """(path, text, "") of the file of a record, checked and read back unchanged; or
    ("", field, message) when it cannot be stored as it is."""
    exp, key = plan.exp, plan.key
    broken = _lone_surrogate(key, plan.record)
    if broken is not None:
        where, char = broken
        return (
            "",
            where,
            f"holds a lone surrogate (\\u{ord(char):04x}, half of a character: a broken "
            "emoji?), which no UTF-8 file can hold; replace it in the database, then "
            "import again",
        )
    path = store.path_for(exp)
    text = serialize(exp)
    stored, first = _as_stored(text, path, store.settings)
    if stored is None:
        assert first is not None
        return "", first.field, _not_storable(first)
    back_key, back = legacy_record(stored)
    if back_key != key or _differences(back, plan.record):
        fields = ", ".join(_differences(back, plan.record)) or "its key"
        return (
            "",
            "",
            f"would not come back unchanged ({fields}): not imported (a bug in kexp: report it)",
        )
    return str(path), text, ""


def _as_stored(
    text: str, path: Path, settings: Settings
) -> tuple[KernelExperiment | None, Problem | None]:
    """The experiment a new file's text holds if it is valid, else its first error: the
    certain verdict of :func:`kexp.quickcheck.quick_fields` on canonical text (the
    cache's), the full check when it is not sure."""
    from kexp.fileformat import parse
    from kexp.quickcheck import quick_fields

    data = text.encode("utf-8")
    if quick_fields(data, str(path), settings) is not None:
        return parse(data, path, fast=True).to_experiment(), None
    checked = check_bytes(text, path, settings)
    if has_errors(checked.problems):
        return None, next(p for p in sort_problems(checked.problems) if p.severity == "error")
    return checked.experiment(), None


def _not_storable(problem: Problem) -> str:
    """Why a record's file would be invalid, and what to do (a bug only when it is
    none of the limits a file has)."""
    if problem.code == "file-too-large":
        return f"its file would be too large: {problem.message}; {problem.hint}"
    if problem.code == "yaml-too-deep":
        return (
            f"a value is nested more than {MAX_DEPTH} levels deep, which an "
            "experiment's front-matter cannot hold (a YAML safety limit); flatten it "
            "(e.g. keep it as JSON text), then import again"
        )
    return f"cannot be stored: {problem.message} (a bug in kexp: report it)"


def _lone_surrogate(key: str, record: Mapping[str, Any]) -> tuple[str, str] | None:
    """(where, the character) of the first lone surrogate in the key or the record
    (keys and values, nested ones too), or None: JSON escapes can decode to one, and no
    UTF-8 file can hold it."""
    pending: list[tuple[str, Any]] = [("", key), *((str(k), v) for k, v in record.items())]
    pending += [(str(k), k) for k in record]
    while pending:
        where, value = pending.pop()
        if isinstance(value, str):
            found = _SURROGATE.search(value)
            if found is not None:
                return where, found.group()
        elif isinstance(value, Mapping):
            pending += [(where, k) for k in value]
            pending += [(where, v) for v in value.values()]
        elif isinstance(value, list):
            pending += [(where, v) for v in value]
    return None


def _compare_existing(store: Store, plan: _Plan, path: Path, report: ImportReport) -> None:
    checked = read_and_check(path, store.settings)
    if not checked.ok:
        report.conflicts.append(
            Note(
                plan.key,
                "",
                f"id {plan.exp.id} is taken by {path}, which is not a valid "
                "experiment: fix it (kexp validate), then import again",
            )
        )
        return
    key, record = legacy_record(checked.experiment())
    differing = _differences(record, plan.record)
    if key == plan.key and not differing:
        report.skipped.append(plan.key)
        return
    what = ", ".join(differing) if differing else f"the key ({key!r})"
    report.conflicts.append(
        Note(
            plan.key,
            "",
            f"id {plan.exp.id} is already {path}, which differs in {what}: "
            "not overwritten; compare them and correct one by hand",
        )
    )


# --- validation ------------------------------------------------------------------------


# --- export ---------------------------------------------------------------------------


def legacy_database(
    store: Store | None = None, *, progress: Progress | None = None
) -> tuple[dict[str, dict[str, Any]], list[str]]:
    """Every valid experiment as the predecessor's database, and what was left out.

    Invalid files and records whose key another experiment already used are left out,
    each with a line saying why.
    """
    database, _, problems = legacy_export(store, progress=progress)
    return database, problems


def legacy_export(
    store: Store | None = None, *, progress: Progress | None = None
) -> tuple[dict[str, dict[str, Any]], dict[str, dict[str, Any]], list[str]]:
    """:func:`legacy_database`, with what kexp keeps that the records cannot hold
    (record key -> :func:`kept_content`, for the experiments that keep any): the
    content of the sidecar file."""
    if store is None:
        from kexp import default_store

        store = default_store()
    kept: dict[str, dict[str, Any]] = {}
    database: dict[str, dict[str, Any]] = {}
    origin: dict[str, Path] = {}
    problems: list[str] = []
    with _reporting(progress):
        everything = store.check_files()
    for checked in everything:
        path = checked.path
        if not checked.ok:
            first = next(p for p in sort_problems(checked.problems) if p.severity == "error")
            problems.append(f"left out {path}: not a valid experiment: {first.format()}")
            continue
        exp = checked.experiment()
        key, record = legacy_record(exp)
        if key in database:
            problems.append(f"left out {path}: its key {key!r} is also {origin[key]}'s")
            continue
        database[key] = record
        origin[key] = path
        content = kept_content(exp)
        if content:
            kept[key] = content
    return database, kept, problems


def dump_legacy(database: Mapping[str, Any]) -> str:
    """The database as the predecessor wrote it (``json.dump(db, indent=2, sort_keys=True)``)."""
    return json.dumps(database, indent=2, sort_keys=True)


def export_legacy(
    destination: Path | str,
    store: Store | None = None,
    *,
    progress: Progress | None = None,
) -> ExportReport:
    """Write the store as the predecessor's ``kernel_experiments_db.json`` (atomically)."""
    database, kept, problems = legacy_export(store, progress=progress)
    destination = Path(destination)
    sidecar = sidecar_path(destination)
    if kept:
        _write_atomically(sidecar, dump_sidecar(kept, destination.name))
    else:
        with contextlib.suppress(FileNotFoundError):
            sidecar.unlink()  # an older export's: nothing of this one is in it
    _write_atomically(destination, dump_legacy(database))
    report = ExportReport(str(destination), len(database), problems)
    report.sidecar = str(sidecar) if kept else ""
    report.kept = len(kept)
    return report


def _write_atomically(destination: Path, text: str) -> None:
    try:
        atomic.replace(destination, text)
    except OSError as exc:
        raise KexpError(f"cannot write {destination}: {exc.strerror or exc}") from None


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
    if exp.measured_against == (_IMPORTED_AGAINST if exp.pid else ""):
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


def _restore_kept(exp: KernelExperiment, kept: Mapping[str, Any]) -> None:
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
