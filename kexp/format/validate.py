"""Validation: schema plus the semantic checks a schema cannot express, one report.

Per file: the schema (structure and types), file name vs id, finite score, a buggy
experiment's error message, a real ``created_at``, ``score`` vs ``results``,
``score_ci`` holding the score and the ``## Samples`` section vs ``results`` (see
:mod:`kexp.format.samples`), unknown fields. Across the store: duplicate ids,
``pid``/``combines`` pointing nowhere, lineage cycles.
"""

from __future__ import annotations

import dataclasses
import math
import os
import shlex
import stat
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any, NamedTuple

from kexp.core.advice import ERROR_MESSAGE, LIST_SHOWS, RE_ID
from kexp.core.collector import collector_paused
from kexp.core.model import KernelExperiment
from kexp.core.problems import Problem, Severity, display_path, has_errors
from kexp.core.settings import DEFAULT_SETTINGS, Settings
from kexp.format.fileformat import Document, FileFormatError, parse
from kexp.format.legacykeys import is_legacy_key, legacy_problems
from kexp.format.quickcheck import quick_fields
from kexp.format.rules import (
    EXPERIMENT_NAME,
    KEXP_NAME,
    KNOWN_FIELDS,
    README_NAME,
    TIMESTAMP,
    canonical_name,
    encoded_size,
    id_from_name,
    is_real_time,
    is_stray,
    missing_measured_against,
    score_results_mismatch,
    slugify,
    warns_if_valid,
)
from kexp.format.suspect import suspect_problems

#: The validation code of a child that does not say what its score is measured against.
MEASURED_AGAINST_MISSING = "measured-against-missing"

__all__ = [
    "EXPERIMENT_NAME",
    "KEXP_NAME",
    "README_NAME",
    "canonical_name",
    "encoded_size",
    "id_from_name",
    "is_real_time",
    "is_stray",
    "score_results_mismatch",
    "slugify",
    "warns_if_valid",
]


@dataclasses.dataclass
class CheckedFile:
    """The outcome of reading and checking one file."""

    path: Path
    document: Document | None
    problems: list[Problem]

    @property
    def ok(self) -> bool:
        """Whether the file holds a valid experiment (warnings allowed)."""
        return self.document is not None and not has_errors(self.problems)

    def experiment(self) -> KernelExperiment:
        """The experiment; only meaningful when :attr:`ok`."""
        assert self.document is not None
        return self.document.to_experiment()


def _symlink_error(path: Path | str) -> FileFormatError:
    return FileFormatError(
        _error(
            path,
            1,
            1,
            "symlink",
            "",
            "experiment files may not be symbolic links",
            "replace the link with the file itself",
        )
    )


def read_file(path: Path | str, settings: Settings = DEFAULT_SETTINGS) -> bytes:
    """The bytes of an experiment file, read safely.

    Raises :class:`FileFormatError` for a symbolic link (never followed, even if the
    file is swapped for one meanwhile), something that is not a regular file (a FIFO
    would block, a device never end), or a file over ``settings.max_file_bytes`` (never
    read whole: at most one byte over the limit is read); :class:`OSError` when it
    cannot be read.
    """
    return read_file_and_stat(path, settings)[0]


def read_file_and_stat(
    path: Path | str, settings: Settings = DEFAULT_SETTINGS
) -> tuple[bytes, os.stat_result]:
    """:func:`read_file`, and the file's ``stat`` taken before it was read (the
    signature the cache keeps with what was read)."""
    flags = os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_NONBLOCK", 0)
    try:
        fd = os.open(path, flags)
    except OSError:
        if os.path.islink(path):  # O_NOFOLLOW refused it (or it became one meanwhile)
            raise _symlink_error(path) from None
        raise
    if not hasattr(os, "O_NOFOLLOW") and os.path.islink(path):  # pragma: no cover
        os.close(fd)
        raise _symlink_error(path)
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            raise FileFormatError(
                _error(
                    path,
                    1,
                    1,
                    "unreadable",
                    "",
                    "cannot read the file: it is not a regular file",
                    "give the path of an experiment file",
                )
            )
        limit = settings.max_file_bytes
        chunks: list[bytes] = []
        size = 0
        # One byte more than its size tells whether the file grew meanwhile.
        want = info.st_size + 1
        while info.st_size <= limit and size <= limit:
            asked = min(want, limit + 1 - size)
            chunk = os.read(fd, asked)
            if not chunk:
                break
            chunks.append(chunk)
            size += len(chunk)
            if len(chunk) < asked and size == info.st_size:
                # All of it, as fstat saw it: a write after that changed the file's
                # signature, so whoever caches these bytes reads it again.
                break
            want = 1 << 16
        if info.st_size > limit or size > limit:
            shown = info.st_size if info.st_size > limit else f"over {limit}"
            raise FileFormatError(size_problem(path, shown, limit))
    finally:
        os.close(fd)
    return b"".join(chunks), info


def size_problem(path: Path | str, size: int | str, limit: int) -> Problem:
    """The ``file-too-large`` problem of a file of ``size`` bytes over ``limit``: the one
    size verdict, whatever the bytes come from (a file, a git blob, a write)."""
    return _error(
        path,
        1,
        1,
        "file-too-large",
        "",
        f"the file is {size} bytes; the limit is {limit} (the max_file_bytes setting)",
        "move large logs or profiles out of the experiment (into files of their own, "
        "linked from it) and keep a summary in the experiment",
    )


def stray_problem(
    path: Path | str, data: bytes | Problem, settings: Settings = DEFAULT_SETTINGS
) -> Problem:
    """The ``stray-file`` error of a Markdown file of ``experiments/`` that kexp never
    reads (:func:`is_stray`), naming the rename to make: to ``<id>-<slug>.md`` with the
    id of its front-matter (``data``: its bytes) or of its name."""
    exp_id = summary = None
    if isinstance(data, bytes):
        try:
            fields = parse(data, Path(path), fast=True).fields
        except FileFormatError:
            fields = {}
        found = fields.get("id")
        if isinstance(found, str) and EXPERIMENT_NAME.fullmatch(f"{found}.md"):
            exp_id = found
        text = fields.get("change_summary")
        summary = text if isinstance(text, str) and text.strip() else None
    folder, name = os.path.split(str(path))
    new = canonical_name(name, exp_id, summary)
    if new.startswith("<"):
        hint = (
            "if it is an experiment, rename it <id>-<slug>.md with the id of its "
            "front-matter; if it is not, move it out of experiments/"
        )
    else:
        # mv, not git mv: a file written by hand is mostly untracked (git mv refuses);
        # a tracked one moved so is a deletion and an addition, which git sees as a rename.
        moved = (shlex.quote(display_path(p)) for p in (path, os.path.join(folder, new)))
        hint = f"rename it to {new} (mv {' '.join(moved)})"
    return _error(
        path,
        1,
        1,
        "stray-file",
        "",
        f"{name!r} is not named as an experiment (<16 hex id>-<slug>.md), so kexp never reads it",
        hint,
    )


def read_and_check(path: Path, settings: Settings = DEFAULT_SETTINGS) -> CheckedFile:
    """Read one file (refusing oversize files and symbolic links) and check it."""
    data = read_or_problem(path, settings)
    if isinstance(data, Problem):
        return CheckedFile(path, None, [data])
    return check_bytes(data, path, settings)


def read_or_problem(path: Path | str, settings: Settings = DEFAULT_SETTINGS) -> bytes | Problem:
    """The bytes of an experiment file (as :func:`read_file` reads them), or the problem
    that says why it cannot be read (as :func:`read_and_check` reports it)."""
    try:
        return read_file(path, settings)
    except FileFormatError as exc:
        return exc.problem
    except OSError as exc:
        return _error(
            path,
            1,
            1,
            "unreadable",
            "",
            f"cannot read the file: {exc.strerror or exc}",
            f"check the path ({LIST_SHOWS} the experiments)"
            if isinstance(exc, FileNotFoundError)
            else "check the file's permissions"
            if isinstance(exc, PermissionError)
            else "give the path of an experiment file",
        )


def real_paths(paths: Sequence[str]) -> list[str]:
    """``os.path.realpath`` of each of ``paths``, each folder resolved once: a file that
    is not a symbolic link is its folder's real path and its name."""
    folders: dict[str, str] = {}
    real: list[str] = []
    for path in paths:
        folder, name = os.path.split(path)
        if name in ("", ".", "..") or os.path.islink(path):
            real.append(os.path.realpath(path))
            continue
        found = folders.get(folder)
        if found is None:
            found = folders[folder] = os.path.realpath(folder)
        real.append(os.path.join(found, name))
    return real


def check_bytes(
    data: bytes | str, path: Path, settings: Settings = DEFAULT_SETTINGS
) -> CheckedFile:
    """Parse and check the text of one experiment file.

    Canonical front-matter is read by the fast path; a file with any problem is read
    again exactly, so every problem is reported at its line. Text over
    ``settings.max_file_bytes`` is one ``file-too-large`` problem, wherever it comes
    from: a file, a git blob, or what a write is about to store (every write checks
    its text here first, so none can store a file that reads would refuse).
    """
    oversize = encoded_size(data, settings.max_file_bytes)
    if oversize is not None:
        return CheckedFile(path, None, [size_problem(path, oversize, settings.max_file_bytes)])
    try:
        doc = parse(data, path, fast=True)
        if doc.exact_positions:
            return CheckedFile(path, doc, check_document(doc, settings))
        problems = check_document(doc, settings)
        if not problems:
            return CheckedFile(path, doc, problems)
        doc = parse(data, path)
    except FileFormatError as exc:
        return CheckedFile(path, None, exc.problems)
    return CheckedFile(path, doc, check_document(doc, settings))


def _error(
    path: Path | str, line: int, column: int, code: str, field: str, message: str, hint: str
) -> Problem:
    return Problem(str(path), line, column, "error", code, field, message, hint)


def _warning(
    path: Path | str, line: int, column: int, code: str, field: str, message: str, hint: str
) -> Problem:
    return Problem(str(path), line, column, "warning", code, field, message, hint)


def check_document(doc: Document, settings: Settings = DEFAULT_SETTINGS) -> list[Problem]:
    """Schema and per-file semantic problems of a parsed document."""
    # lazy: not every command that imports this module needs kexp.format.schema
    from kexp.format.schema import schema_problems

    problems = list(doc.problems)
    problems.extend(schema_problems(doc))
    fields = doc.fields
    path = doc.path

    def at(name: str) -> tuple[int, int]:
        return doc.position((name,))

    name_id = id_from_name(path)
    file_id = fields.get("id")
    if name_id is not None and isinstance(file_id, str) and file_id != name_id:
        problems.append(
            _error(
                path,
                *at("id"),
                "id-mismatch",
                "id",
                f"id {file_id!r} differs from the id in the file name ({name_id})",
                "ids never change: restore the id, or rename the file to "
                f"{file_id}-<slug>.md if the id is right",
            )
        )
    score = fields.get("score")
    if isinstance(score, float) and not math.isfinite(score):
        problems.append(
            _error(
                path,
                *at("score"),
                "score-not-finite",
                "score",
                f"score must be a finite number, not {score}",
                "write the measured speedup, or 0 when nothing was measured",
            )
        )
    if fields.get("is_buggy") is True and not doc.body_values()["error_message"].strip():
        problems.append(
            _error(
                path,
                *at("is_buggy"),
                "buggy-without-error",
                "error_message",
                "is_buggy is true but there is no '## Error message' section",
                f"give the error type and message ({ERROR_MESSAGE}; in a file, a "
                "'## Error message' section), or set is_buggy: false",
            )
        )
    created = fields.get("created_at")
    stamp = TIMESTAMP.fullmatch(created) if isinstance(created, str) else None
    # Only the date and time of day: Python 3.10's fromisoformat refuses fractions of
    # other than 3 or 6 digits, and the schema checks the shape.
    if stamp is not None and not is_real_time(stamp.group(1)):
        problems.append(
            _error(
                path,
                *at("created_at"),
                "bad-timestamp",
                "created_at",
                f"created_at {created!r} is not a real date and time",
                "write a UTC time such as '2026-11-29T15:52:36Z'",
            )
        )
    mismatch = score_results_mismatch(score, fields.get("results"), settings.score_tolerance)
    if mismatch is not None:
        problems.append(
            _warning(
                path,
                *at("score"),
                "score-results-mismatch",
                "score",
                f"score {score} differs from the geometric mean of results' "
                f"speedups ({mismatch:.4f}) by more than "
                f"{settings.score_tolerance:.1%}",
                "correct score or results (kexp computes score from timings)",
            )
        )
    if missing_measured_against(fields):
        problems.append(
            _warning(
                path,
                *at("pid"),
                MEASURED_AGAINST_MISSING,
                "measured_against",
                "it has a parent but does not say what its score is a speedup over "
                "(measured_against); it counts as a step over the parent",
                "write 'measured_against: parent' when score is the speedup over the "
                "parent experiment's code (what kexp records from timings), or "
                "'measured_against: reference' when it is over the operator's original "
                "code (as the predecessor's records were)",
            )
        )
    problems.extend(suspect_problems(doc, settings))
    problems.extend(_sample_problems(doc))
    problems.extend(legacy_problems(doc))
    for key in fields:
        if key not in KNOWN_FIELDS and not is_legacy_key(key):
            problems.append(
                _warning(
                    path,
                    *at(key),
                    "unknown-field",
                    key,
                    f"unknown field {key!r} (kept, but kexp does not use it)",
                    "check the spelling against schema/experiment.schema.json",
                )
            )
    return problems


def _sample_problems(doc: Document) -> list[Problem]:
    """``score_ci`` must hold the score; the ``## Samples`` section must be readable and
    give the ``results``, ``score`` and ``score_ci`` recorded (see :mod:`kexp.format.samples`)."""
    fields = doc.fields
    samples = doc.body_values()["samples"]
    if "score_ci" not in fields and not samples:
        return []
    # lazy: not every command that imports this module needs kexp.format.samples
    from kexp.format.samples import sample_findings

    problems = []
    for finding in sample_findings(fields, samples):
        if finding.section_line is not None:
            # The section's text starts on the second line after its heading.
            line, column = doc.section_line("samples") + 1 + finding.section_line, 1
        elif finding.path:
            line, column = doc.position(finding.path)
        else:
            line, column = doc.section_line("samples"), 1
        problems.append(
            Problem(
                doc.path,
                line,
                column,
                finding.severity,
                finding.code,
                finding.field,
                finding.message,
                finding.hint,
            )
        )
    return problems


# --- across files ------------------------------------------------------------------------


#: The keys whose lines :class:`FileLinks` keeps (the positions of store-wide problems).
_LINKED_KEYS = ("id", "pid", "base_commit")
_LINKED_KEY_LINES = tuple(f"\n{key}:".encode() for key in _LINKED_KEYS)


class FileLinks(NamedTuple):
    """What the store-wide checks need of one file: its path, the ``id``, ``pid``,
    ``combines`` and ``base_commit`` written in it (as far as they are text), and where
    the keys of ``id``, ``pid`` and ``base_commit`` are when that was cheap to know."""

    path: str
    #: The ``id`` value when it is text, else None (also for a file without a document).
    id: str | None
    #: The ``pid`` value when it is non-empty text, else None.
    pid: str | None
    #: The ``combines`` list, its items that are not text as None; () when not a list.
    combines: tuple[str | None, ...]
    #: The ``base_commit`` value when it is text, else None.
    base_commit: str | None = None
    #: The 1-based lines of the keys id, pid and base_commit (0: not there), each at
    #: column 1; None when unknown (the file must be parsed for positions).
    lines: tuple[int, int, int] | None = None
    #: The ``env`` value when it is text, else None (also when not read: no check).
    env: str | None = None
    #: Its score is measured against the reference (``measured_against: reference``):
    #: its cumulative score multiplies no parent's.
    on_reference: bool = False

    @classmethod
    def of(
        cls,
        path: str,
        fields: Mapping[str, Any] | None,
        lines: tuple[int, int, int] | None = None,
    ) -> FileLinks:
        """The links of the file ``path`` whose front-matter holds ``fields`` (None: the
        file has no document), with the key ``lines`` if known."""
        if fields is None:
            return cls(path, None, None, ())
        exp_id, pid, combines = fields.get("id"), fields.get("pid"), fields.get("combines")
        base, env = fields.get("base_commit"), fields.get("env")
        return cls(
            path,
            exp_id if isinstance(exp_id, str) else None,
            pid if isinstance(pid, str) and pid else None,
            tuple(c if isinstance(c, str) else None for c in combines)
            if isinstance(combines, list)
            else (),
            base if isinstance(base, str) else None,
            lines,
            env if isinstance(env, str) else None,
            fields.get("measured_against") == "reference",
        )

    def position(self, where: tuple[str | int, ...]) -> tuple[int, int] | None:
        """The (line, column) ``Document.position(where)`` gives, when known without
        parsing the file: that of a key of :attr:`lines`; else None."""
        if self.lines is None or len(where) != 1 or where[0] not in _LINKED_KEYS:
            return None
        line = self.lines[_LINKED_KEYS.index(str(where[0]))]
        return (line, 1) if line else None


#: What a process checking files for :meth:`kexp.Store.validate` keeps of one, as data
#: ``marshal`` can send: its :class:`FileLinks` less the path, and its problems as
#: tuples (``Problem(*item)`` each).
ScanRecord = tuple[
    str | None,
    str | None,
    tuple[str | None, ...],
    str | None,
    tuple[int, int, int] | None,
    tuple[tuple[Any, ...], ...],
    str | None,
    bool,
]


def scan_record(found: Sequence[Problem], link: FileLinks, shared: dict[str, str]) -> ScanRecord:
    """The :data:`ScanRecord` of one file; ``shared`` keeps one string per
    ``base_commit`` and ``env`` value (they repeat from file to file)."""
    base, env = link.base_commit, link.env
    return (
        link.id,
        link.pid,
        link.combines,
        None if base is None else shared.setdefault(base, base),
        link.lines,
        tuple(dataclasses.astuple(p) for p in found),
        None if env is None else shared.setdefault(env, env),
        link.on_reference,
    )


def key_lines(text: bytes | str) -> tuple[int, int, int]:
    """The 1-based lines of the keys ``id``, ``pid`` and ``base_commit`` in the
    front-matter of ``text`` (0 for a key that is not there).

    Only for front-matter of one ``key: value`` line each (or a block list's items),
    every key at the start of its line: as :func:`kexp.format.quickcheck.quick_fields` and the
    parser's fast path accept it. A top-level key's position (``Document.position``) is
    then its line, column 1. A BOM and CRLF line endings change no line.
    """
    data = text.encode("utf-8", "surrogatepass") if isinstance(text, str) else text
    end = data.find(b"\n---", 3) + 1  # the closing line (0: none, then the whole text)
    found: list[int] = []
    for key in _LINKED_KEY_LINES:
        at = data.find(key, 0, end or len(data))
        found.append(data.count(b"\n", 0, at) + 2 if at >= 0 else 0)
    return (found[0], found[1], found[2])


def scan_bytes(
    data: bytes, path: str, settings: Settings = DEFAULT_SETTINGS
) -> tuple[list[Problem], FileLinks]:
    """The problems ``check_bytes(data, Path(path), settings)`` reports, in its order,
    and the file's :class:`FileLinks` (from its document's fields; none without one).

    A canonical file with no problem (most files) is answered by
    :func:`kexp.format.quickcheck.quick_fields` without the full parse, and the lines of its
    keys are taken from the text (:func:`key_lines`).
    """
    fields = quick_fields(data, path, settings)
    if fields is not None:
        links = FileLinks.of(path, fields, key_lines(data))
        if not warns_if_valid(fields, settings):
            return [], links
        return check_bytes(data, Path(path), settings).problems, links
    checked = check_bytes(data, Path(path), settings)
    return checked.problems, links_of(checked)


def valid_fields(
    data: bytes, path: str, settings: Settings = DEFAULT_SETTINGS
) -> tuple[dict[str, Any] | None, CheckedFile | None]:
    """The verdict on one file's bytes: the front-matter fields when it is a valid
    experiment (else None), and the :class:`CheckedFile` when the full check ran (None
    when :func:`kexp.format.quickcheck.quick_fields` answered: a canonical file, certainly
    valid). What a review's scan asks of each file (the cache, :mod:`kexp.storage.rows`, asks
    it without the file's name)."""
    fields = quick_fields(data, path, settings)
    if fields is not None:
        return fields, None
    checked = check_bytes(data, Path(path), settings)
    if checked.ok and checked.document is not None:
        return checked.document.fields, checked
    return None, checked


def links_of(checked: CheckedFile) -> FileLinks:
    """The :class:`FileLinks` of a checked file (key lines when its document was read by
    the parser's fast path, which keeps the text)."""
    document = checked.document
    if document is None:
        return FileLinks.of(str(checked.path), None)
    simple = not document.exact_positions and document.source is not None
    return FileLinks.of(
        str(checked.path),
        document.fields,
        key_lines(document.source) if simple and document.source is not None else None,
    )


@dataclasses.dataclass(frozen=True)
class Finding:
    """A problem of a file found across files, before its line and column are known:
    those of the front-matter value at ``where`` in the file numbered ``file``."""

    file: int
    where: tuple[str | int, ...]
    code: str
    field: str
    message: str
    hint: str
    severity: Severity = "error"

    def problem(self, path: str, line: int, column: int) -> Problem:
        """The problem, in the file ``path`` at (``line``, ``column``)."""
        fields = (self.code, self.field, self.message, self.hint)
        return Problem(path, line, column, self.severity, *fields)


@collector_paused()  # a few entries a file, none in a cycle
def store_findings(
    items: Sequence[FileLinks],
    known_ids: Mapping[str, Sequence[Path | str]] | None = None,
    outside_pid: Callable[[str], str | None] | None = None,
    gone: Mapping[str, str] | None = None,
) -> list[Finding]:
    """The problems across files of ``items`` (numbered by their place in it): duplicate
    ids, ``pid``/``combines`` naming no experiment, lineage cycles, in that order.

    ``known_ids`` maps every id in the store to its files (default: the ids of
    ``items``); ``outside_pid(id)`` is the ``pid`` written in the first file of an id of
    ``known_ids`` that no item holds (default: none), so that a loop through a file that
    is not checked is found too; ``gone`` says of removed ids what they are (read across
    refs: ``was removed on origin/kexp/bob``). The store-wide half of :func:`check_store`, on what
    :class:`FileLinks` keeps of each file instead of whole documents; its memory is a
    few entries a file, and its time in proportion to the number of files.
    """
    findings: list[Finding] = []
    # The first item of each id, and every item of the ids several items hold (few).
    first: dict[str, int] = {}
    shared: dict[str, list[int]] = {}
    for number, item in enumerate(items):
        if item.id is not None and first.setdefault(item.id, number) != number:
            shared.setdefault(item.id, [first[item.id]]).append(number)
    ids: Mapping[str, object] = known_ids if known_ids is not None else first
    # The ids of files in the store whose id cannot be read (not UTF-8, no front-matter):
    # their own error is reported; what names them names an experiment that is there.
    unreadable = {
        exp_id for item in items if item.id is None and (exp_id := id_from_name(item.path))
    }
    if known_ids is None:  # only an id of several items can be duplicated
        candidates = sorted(shared.items(), key=lambda entry: entry[1][0])
    else:
        candidates = [(key, shared.get(key) or [number]) for key, number in first.items()]
    for exp_id, numbers in candidates:
        written = {str(p) for p in known_ids.get(exp_id, [])} if known_ids is not None else set()
        paths = sorted(written | {items[n].path for n in numbers})
        if len(paths) > 1:
            for number in numbers:
                own = items[number].path
                others = ", ".join(p for p in paths if p != own)
                findings.append(
                    Finding(
                        number,
                        ("id",),
                        "duplicate-id",
                        "id",
                        f"id {exp_id} is also used by {others}",
                        "a copied file, or two branches that made the same id: give one "
                        "file a new id and the name that goes with it (for this one: "
                        f"{RE_ID.say(path=shlex.quote(str(own)))})",
                    )
                )
    for number, item in enumerate(items):
        pid = item.pid
        if pid is not None and pid not in ids and pid not in unreadable:
            if gone and pid in gone:  # read across refs: a newer place removed it
                said = f"parent {pid} {gone[pid]}"
                hint = "build on another parent, or set pid: '' if the step stands alone"
            else:
                said = f"parent {pid} is not in the store"
                hint = (
                    f"fix the id ({LIST_SHOWS} them), or set pid: '' if the parent was "
                    "never recorded"
                )
            findings.append(Finding(number, ("pid",), "dangling-pid", "pid", said, hint))
        for index, other in enumerate(item.combines):
            if other is not None and other not in ids and other not in unreadable:
                findings.append(
                    Finding(
                        number,
                        ("combines", index),
                        "dangling-combines",
                        f"combines.{index}",
                        f"combined experiment {other} is not in the store",
                        "list only ids of recorded experiments",
                    )
                )
        parent = first.get(item.pid) if item.pid is not None else None
        if parent is not None and item.env is not None and not item.on_reference:
            finding = _env_finding(number, item.env, item.pid or "", items[parent].env)
            if finding is not None:
                findings.append(finding)
    # The parent of an id: the pid of the last of its items whose pid names a known id.
    parents: dict[str, str | None] = {}
    for exp_id, numbers in shared.items():
        named = [items[n].pid for n in numbers if items[n].pid is not None]
        known = [pid for pid in named if pid in ids]
        parents[exp_id] = known[-1] if known else None
    outside: dict[str, str | None] = {}

    def parent_of(exp_id: str) -> str | None:
        number = first.get(exp_id)
        if number is not None:
            if exp_id in parents:
                return parents[exp_id]
            pid = items[number].pid
            return pid if pid is not None and pid in ids else None
        if exp_id not in outside:
            outside[exp_id] = (
                outside_pid(exp_id) if outside_pid is not None and exp_id in ids else None
            )
        return outside[exp_id]

    if outside_pid is None:
        # A loop cannot only go down: some pid in it sorts at or after its own id. A
        # parent is made before its child, and kexp's ids sort by time, so few do: the
        # walks start at those.
        starts = [item for item in items if item.pid is not None and item.pid >= (item.id or "")]
    else:  # a loop may go up only through ids no item holds
        starts = list(items)
    findings.extend(_cycle_findings(items, starts, first, parent_of))
    return findings


def _env_finding(number: int, env: str, pid: str, parents: str | None) -> Finding | None:
    """The ``env-differs-from-parent`` warning of the item ``number``, a step measured
    on ``env`` whose parent ``pid`` was measured on ``parents`` (None: not known)."""
    if parents is None or env.strip() == parents.strip():
        return None
    return Finding(
        number,
        ("env",),
        "env-differs-from-parent",
        "env",
        f"env {env.strip()!r} is not its parent {pid}'s ({parents.strip()!r}): the "
        "cumulative score multiplies scores measured on two machines",
        "measure the parent's code on this machine and make that record the pid, or set "
        "pid: '' to start from the reference (and measure against it)",
        "warning",
    )


def _cycle_findings(
    items: Sequence[FileLinks],
    starts: Sequence[FileLinks],
    first: Mapping[str, int],
    parent_of: Callable[[str], str | None],
) -> list[Finding]:
    """A ``lineage-cycle`` finding for every item whose ``pid`` chain (``parent_of``:
    one parent an id) leads back to its own id, naming the loop from it.

    The chains are followed from the items ``starts`` (every loop passes through one of
    them), each id's once: the ids on it are marked as on a loop or not (``first``
    numbers the ids of items), so a store of long lineages costs time in proportion to
    its size.
    """
    unknown, clear, on_loop = 0, 1, 2
    state = bytearray(len(items))  # by the number of the first item of an id
    outside: dict[str, int] = {}  # ids no item holds

    def state_of(exp_id: str) -> int:
        number = first.get(exp_id)
        return state[number] if number is not None else outside.get(exp_id, unknown)

    for item in starts:
        if item.id is None or state[first[item.id]] != unknown:
            continue
        walked: dict[str, int] = {}
        current: str | None = item.id
        while current is not None and current not in walked and state_of(current) == unknown:
            walked[current] = len(walked)
            current = parent_of(current)
        loop_from = walked.get(current, len(walked)) if current is not None else len(walked)
        for place, exp_id in enumerate(walked):
            mark = on_loop if place >= loop_from else clear
            number = first.get(exp_id)
            if number is not None:
                state[number] = mark
            else:
                outside[exp_id] = mark
    findings: list[Finding] = []
    if on_loop not in state:
        return findings
    for number, item in enumerate(items):
        if item.id is None or state[first[item.id]] != on_loop:
            continue
        chain = [item.id]
        current = parent_of(item.id)
        while current is not None and current != item.id:
            chain.append(current)
            current = parent_of(current)
        findings.append(
            Finding(
                number,
                ("pid",),
                "lineage-cycle",
                "pid",
                f"the pid chain loops back to this experiment: {' -> '.join([*chain, item.id])}",
                "a parent must be an earlier experiment: fix one pid in the loop",
            )
        )
    return findings


def check_store(
    checked: Sequence[CheckedFile], known_ids: Mapping[str, Sequence[Path]] | None = None
) -> list[Problem]:
    """Problems across files: duplicate ids, dangling ``pid``/``combines``, cycles.

    ``checked`` are the files to report on; ``known_ids`` maps every id in the store to
    its files (defaults to the ids of ``checked``).
    """
    items = [
        FileLinks.of(str(c.path), c.document.fields if c.document is not None else None)
        for c in checked
    ]

    def outside_pid(exp_id: str) -> str | None:
        # A file that is not being checked (kexp validate FILE): read its pid.
        return _pid_in(known_ids.get(exp_id, []) if known_ids is not None else [])

    problems: list[Problem] = []
    for finding in store_findings(items, known_ids, outside_pid):
        document = checked[finding.file].document
        assert document is not None
        problems.append(
            finding.problem(items[finding.file].path, *document.position(finding.where))
        )
    return problems


def _pid_in(paths: Sequence[Path]) -> str | None:
    """The parent id written in the first of ``paths`` (None if none or unreadable)."""
    if not paths:
        return None
    doc = read_and_check(Path(paths[0])).document
    pid = doc.fields.get("pid") if doc is not None else None
    return pid if isinstance(pid, str) and pid else None
