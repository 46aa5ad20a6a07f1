"""A three-way merge of one experiment file by field: two corrections of one experiment
made apart (one agent's score, another's tags, each with its dated note) merge as git
merges two files, field by field instead of line by line: a field one side changed is
taken from it, one both changed alike once; the notes both sides appended to a text
section are kept, the other side's first, and so are those one side appended to a text the
other rewrote. A field both changed otherwise, or a text both changed otherwise than by
adding lines (one adding only correction notes aside), is a conflict: no merge (None)."""

from __future__ import annotations

import difflib
from collections.abc import Callable
from pathlib import Path
from typing import Any

from kexp.core.model import BODY_FIELDS, experiment_from_fields
from kexp.format.fileformat import Document, FileFormatError, parse, render_update
from kexp.format.notes import CORRECTION_START

#: The text sections whose additions on both sides are both kept (notes, prose); a code
#: change is never stitched together.
_ADDITIVE = frozenset({"detailed_description", "raw_result", "profiling_info", "error_message"})
_ABSENT = object()
_CLASH = object()


def merge_fields(path: str, base: bytes, ours: bytes, theirs: bytes) -> str | None:
    """The text of the experiment file at ``path`` merged from ``ours`` and ``theirs``
    (each changed since ``base``) field by field, written as ``ours`` is (only the lines
    of the fields ``theirs`` brings change); None when they clash (a field both changed
    otherwise) or one of them is no experiment file."""
    try:
        was, mine, other = (parse(data, path) for data in (base, ours, theirs))
    except FileFormatError:
        return None
    fields: dict[str, Any] = {}
    for key in dict.fromkeys([*mine.fields, *other.fields, *was.fields]):
        value = _pick(*(doc.fields.get(key, _ABSENT) for doc in (was, mine, other)))
        if value is _CLASH:
            return None
        if value is not _ABSENT:
            fields[key] = value
    merged = experiment_from_fields(fields, Path(path))
    bodies = [doc.body_values() for doc in (was, mine, other)]
    for name in BODY_FIELDS:
        text = _pick(*(body[name] for body in bodies))
        if text is _CLASH and name in _ADDITIVE:
            texts = [body[name] for body in bodies]
            text = _both_added(*texts)
            if text is None:
                text = _noted_beside_rewrite(*texts)
        if text is _CLASH or text is None:
            return None
        setattr(merged, name, text)
    preamble = _pick(was.preamble, mine.preamble, other.preamble)
    extra = _pick(*(_extra(doc) for doc in (was, mine, other)))
    if preamble is _CLASH or extra is _CLASH:
        return None
    merged.preamble, merged.extra_sections = preamble, extra
    return render_update(mine, merged)


def noting(
    merge: Callable[[str, bytes, bytes, bytes], str | None], into: list[str]
) -> Callable[[str, bytes, bytes, bytes], str | None]:
    """``merge`` (as :func:`merge_fields`), noting in ``into`` each path it merged."""

    def noted(path: str, base: bytes, ours: bytes, theirs: bytes) -> str | None:
        merged = merge(path, base, ours, theirs)
        if merged is not None:
            into.append(path)
        return merged

    return noted


def _pick(base: Any, ours: Any, theirs: Any) -> Any:
    """The merged value of one field: the side that changed it, either when both changed
    it alike; :data:`_CLASH` when both changed it otherwise."""
    if ours == theirs or theirs == base:
        return ours
    if ours == base:
        return theirs
    return _CLASH


def _extra(doc: Document) -> list[tuple[str, str]]:
    return [(s.heading, s.text) for s in doc.sections if s.field is None]


def _both_added(base: str, ours: str, theirs: str) -> str | None:
    """``base`` with the lines each side added (at the same place: theirs, a blank line,
    ours); None when a side did more than add lines."""
    was = base.split("\n") if base else []
    added = [_additions(was, text.split("\n") if text else []) for text in (ours, theirs)]
    mine, other = added
    if mine is None or other is None:
        return None
    lines: list[str] = []
    for at in range(len(was) + 1):
        first, second = other.get(at, []), mine.get(at, [])
        if first == second:
            second = []
        gap = [""] if first and second and first[-1] and second[0] else []
        lines += first + gap + second
        if at < len(was):
            lines.append(was[at])
    return "\n".join(lines)


def _noted_beside_rewrite(base: str, ours: str, theirs: str) -> str | None:
    """The text one side rewrote, with the correction notes the other side appended to
    ``base`` (its only change) kept, the remote's (``theirs``) first: before the notes
    ``ours`` appended after its rewrite, or after all of ``theirs``; None otherwise."""
    was = base.split("\n") if base else []
    for adder, rewrite, remote_first in ((theirs, ours, True), (ours, theirs, False)):
        added = _additions(was, adder.split("\n") if adder else [])
        if not added or set(added) != {len(was)}:
            continue  # (not only lines appended at the end)
        notes = [line for line in added[len(was)] if line.strip()]
        if not all(line.startswith(CORRECTION_START) for line in notes):
            continue
        lines = rewrite.split("\n") if rewrite else []
        cut = len(lines)
        if remote_first:  # before the notes the rewrite appended (blank lines aside)
            while cut and (
                not lines[cut - 1].strip()
                or (lines[cut - 1].startswith(CORRECTION_START) and lines[cut - 1] not in was)
            ):
                cut -= 1
        parts = [_trimmed(lines[:cut]), notes, _trimmed(lines[cut:])]
        joined: list[str] = []
        for part in (p for p in parts if p):
            joined += ([""] if joined else []) + part
        return "\n".join(joined)
    return None


def _trimmed(lines: list[str]) -> list[str]:
    """``lines`` without the blank lines at either end."""
    start, end = 0, len(lines)
    while start < end and not lines[start].strip():
        start += 1
    while end > start and not lines[end - 1].strip():
        end -= 1
    return lines[start:end]


def _additions(base: list[str], text: list[str]) -> dict[int, list[str]] | None:
    """The lines ``text`` adds to ``base``, by the line of ``base`` they come before;
    None when it changed or removed any."""
    found: dict[int, list[str]] = {}
    matcher = difflib.SequenceMatcher(None, base, text, autojunk=False)
    for tag, low, high, start, end in matcher.get_opcodes():
        if tag == "insert":
            found[low] = text[start:end]
        elif tag != "equal" or high - low != end - start:
            return None
    return found
