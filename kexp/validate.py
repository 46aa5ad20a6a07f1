"""Validation: schema plus the semantic checks a schema cannot express, one report.

Per file: the schema (structure and types), file name vs id, finite score, a buggy
experiment's error message, a real ``created_at``, ``score`` vs ``results``, unknown
fields. Across the store: duplicate ids, ``pid``/``combines`` pointing nowhere, lineage
cycles.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import math
import os
import re
import stat
from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from kexp.fileformat import Document, FileFormatError, parse
from kexp.model import ALL_FIELDS, KernelExperiment
from kexp.problems import Problem, has_errors
from kexp.settings import DEFAULT_SETTINGS, Settings

#: File names of experiments: ``<id>-<slug>.md`` (or ``<id>.md``).
EXPERIMENT_NAME = re.compile(r"([0-9a-f]{16})(?:-[a-z0-9-]*)?\.md")
_TIMESTAMP = re.compile(r"([0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2})(?:\.[0-9]+)?Z")


def id_from_name(path: Path | str) -> str | None:
    """The id in an experiment file's name, or None if the name is not an experiment's."""
    match = EXPERIMENT_NAME.fullmatch(Path(path).name)
    return match.group(1) if match else None


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
            raise FileFormatError(
                _error(
                    path,
                    1,
                    1,
                    "file-too-large",
                    "",
                    f"the file is {shown} bytes; the limit is {limit}",
                    "move large logs or profiles out of the experiment and link to them",
                )
            )
    finally:
        os.close(fd)
    return b"".join(chunks), info


def read_and_check(path: Path, settings: Settings = DEFAULT_SETTINGS) -> CheckedFile:
    """Read one file (refusing oversize files and symbolic links) and check it."""
    try:
        data = read_file(path, settings)
    except FileFormatError as exc:
        return CheckedFile(path, None, [exc.problem])
    except OSError as exc:
        return CheckedFile(
            path,
            None,
            [
                _error(
                    path,
                    1,
                    1,
                    "unreadable",
                    "",
                    f"cannot read the file: {exc.strerror or exc}",
                    "check the path (kexp list shows the experiments)"
                    if isinstance(exc, FileNotFoundError)
                    else "check the file's permissions"
                    if isinstance(exc, PermissionError)
                    else "give the path of an experiment file",
                )
            ],
        )
    return check_bytes(data, path, settings)


def check_bytes(
    data: bytes | str, path: Path, settings: Settings = DEFAULT_SETTINGS
) -> CheckedFile:
    """Parse and check the text of one experiment file.

    Canonical front-matter is read by the fast path; a file with any problem is read
    again exactly, so every problem is reported at its line.
    """
    try:
        doc = parse(data, path, fast=True)
        if doc.exact_positions:
            return CheckedFile(path, doc, check_document(doc, settings))
        problems = check_document(doc, settings)
        if not problems:
            return CheckedFile(path, doc, problems)
        doc = parse(data, path)
    except FileFormatError as exc:
        return CheckedFile(path, None, [exc.problem])
    return CheckedFile(path, doc, check_document(doc, settings))


def _error(
    path: Path | str, line: int, column: int, code: str, field: str, message: str, hint: str
) -> Problem:
    return Problem(str(path), line, column, "error", code, field, message, hint)


def _warning(
    path: Path | str, line: int, column: int, code: str, field: str, message: str, hint: str
) -> Problem:
    return Problem(str(path), line, column, "warning", code, field, message, hint)


#: Days already checked by :func:`is_real_time` (they repeat), bounded in size.
_REAL_DAYS: dict[str, bool] = {}
_REAL_DAYS_SIZE = 4096


def is_real_time(stamp: str) -> bool:
    """Whether ``YYYY-MM-DDTHH:MM:SS`` (digits where the letters are) is a real date and
    time: what ``datetime.strptime(stamp, "%Y-%m-%dT%H:%M:%S")`` accepts."""
    day = _REAL_DAYS.get(stamp[:10])
    if day is None:
        try:
            dt.date(int(stamp[0:4]), int(stamp[5:7]), int(stamp[8:10]))
            day = True
        except ValueError:
            day = False
        if len(_REAL_DAYS) >= _REAL_DAYS_SIZE:
            _REAL_DAYS.clear()
        _REAL_DAYS[stamp[:10]] = day
    # Two digits each: comparing the texts compares the numbers.
    return day and stamp[11:13] < "24" and stamp[14:16] < "60" and stamp[17:19] < "60"


def check_document(doc: Document, settings: Settings = DEFAULT_SETTINGS) -> list[Problem]:
    """Schema and per-file semantic problems of a parsed document."""
    from kexp.schema import schema_problems

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
                "add '## Error message' with the error type and message, or set is_buggy: false",
            )
        )
    created = fields.get("created_at")
    stamp = _TIMESTAMP.fullmatch(created) if isinstance(created, str) else None
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
    known = set(ALL_FIELDS)
    for key in fields:
        if key not in known:
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


def score_results_mismatch(score: Any, results: Any, tolerance: float) -> float | None:
    """The geometric mean of ``results`` speedups when ``score`` disagrees with it."""
    if not isinstance(results, list) or not results or isinstance(score, bool):
        return None
    if not isinstance(score, (int, float)):
        return None
    speedups: list[float] = []
    for item in results:
        value = item.get("speedup") if isinstance(item, dict) else None
        if not isinstance(value, (int, float)) or isinstance(value, bool):
            return None
        if not (value > 0 and math.isfinite(value)):
            return None
        speedups.append(float(value))
    mean = math.exp(sum(math.log(s) for s in speedups) / len(speedups))
    if abs(score - mean) > tolerance * mean:
        return mean
    return None


def check_store(
    checked: Sequence[CheckedFile], known_ids: Mapping[str, Sequence[Path]] | None = None
) -> list[Problem]:
    """Problems across files: duplicate ids, dangling ``pid``/``combines``, cycles.

    ``checked`` are the files to report on; ``known_ids`` maps every id in the store to
    its files (defaults to the ids of ``checked``).
    """
    problems: list[Problem] = []
    by_id: dict[str, list[CheckedFile]] = {}
    for item in checked:
        if item.document is not None and isinstance(item.document.fields.get("id"), str):
            by_id.setdefault(item.document.fields["id"], []).append(item)
    ids: Mapping[str, Sequence[Path]] = (
        known_ids
        if known_ids is not None
        else {key: [c.path for c in items] for key, items in by_id.items()}
    )
    for exp_id, items in by_id.items():
        paths = sorted({str(p) for p in ids.get(exp_id, [])} | {str(c.path) for c in items})
        if len(paths) > 1:
            for item in items:
                others = ", ".join(p for p in paths if p != str(item.path))
                assert item.document is not None
                problems.append(
                    _error(
                        item.path,
                        *item.document.position(("id",)),
                        "duplicate-id",
                        "id",
                        f"id {exp_id} is also used by {others}",
                        "two branches created the same id: give one file a "
                        "new id (and rename it) with kexp",
                    )
                )
    parents: dict[str, str] = {}
    for item in checked:
        doc = item.document
        if doc is None:
            continue
        pid = doc.fields.get("pid")
        if isinstance(pid, str) and pid:
            if pid not in ids:
                problems.append(
                    _error(
                        item.path,
                        *doc.position(("pid",)),
                        "dangling-pid",
                        "pid",
                        f"parent {pid} is not in the store",
                        "fix the id (kexp list shows them), or set pid: '' if "
                        "the parent was never recorded",
                    )
                )
            elif isinstance(doc.fields.get("id"), str):
                parents[doc.fields["id"]] = pid
        combines = doc.fields.get("combines")
        if isinstance(combines, list):
            for index, other in enumerate(combines):
                if isinstance(other, str) and other not in ids:
                    problems.append(
                        _error(
                            item.path,
                            *doc.position(("combines", index)),
                            "dangling-combines",
                            f"combines.{index}",
                            f"combined experiment {other} is not in the store",
                            "list only ids of recorded experiments",
                        )
                    )
    outside: dict[str, str | None] = {}

    def parent_of(exp_id: str) -> str | None:
        if exp_id in by_id:
            return parents.get(exp_id)
        # A file that is not being checked (kexp validate FILE): read its pid, so that a
        # loop through it is found too.
        if exp_id not in outside:
            outside[exp_id] = _pid_in(ids.get(exp_id, []))
        return outside[exp_id]

    problems.extend(_cycle_problems(checked, parent_of))
    return problems


def _pid_in(paths: Sequence[Path]) -> str | None:
    """The parent id written in the first of ``paths`` (None if none or unreadable)."""
    if not paths:
        return None
    doc = read_and_check(Path(paths[0])).document
    pid = doc.fields.get("pid") if doc is not None else None
    return pid if isinstance(pid, str) and pid else None


def _cycle_problems(
    checked: Iterable[CheckedFile], parent_of: Callable[[str], str | None]
) -> list[Problem]:
    problems: list[Problem] = []
    for item in checked:
        doc = item.document
        if doc is None or not isinstance(doc.fields.get("id"), str):
            continue
        start = doc.fields["id"]
        seen = [start]
        current = parent_of(start)
        while current is not None and current not in seen:
            seen.append(current)
            current = parent_of(current)
        if current == start:
            chain = " -> ".join([*seen, start])
            problems.append(
                _error(
                    item.path,
                    *doc.position(("pid",)),
                    "lineage-cycle",
                    "pid",
                    f"the pid chain loops back to this experiment: {chain}",
                    "a parent must be an earlier experiment: fix one pid in the loop",
                )
            )
    return problems
