"""A quick, certain verdict on an experiment file: its fields when valid, else "not sure".

Building the query cache from scratch reads and checks every file of the store, and
:func:`kexp.format.validate.check_bytes` costs several hundred microseconds a file: it builds
a whole :class:`~kexp.format.fileformat.Document` (every line, every section, positions).
Files kexp wrote are canonical, and their validity can be decided from much less:

* the text: UTF-8, a BOM and CRLF endings undone as :func:`kexp.format.fileformat.decode`
  does, no other carriage return;
* the front-matter: ``---`` lines around it, no character YAML refuses, read by
  :func:`kexp.format.fastpath.read_simple_front_matter` (values exactly as the YAML reader's,
  or no answer), valid against the schema (each value checked by its property's
  generated validator when its line is first read, the answer remembered with the
  line), the id of the file name (as ``validate.id_from_name`` reads it), a finite
  score, a real ``created_at``;
* the body: only its ``## `` headings and code fences matter (a duplicate known section
  is an error; ``is_buggy: true`` needs a non-empty ``## Error message``; a
  ``score_ci`` and a ``## Samples`` section are checked by
  :func:`kexp.format.samples.sample_findings`, and any finding of it means "not sure"). Regular
  expressions find the lines that can open or close a fence or be a heading, and the
  fence state machine of :func:`kexp.format.fileformat._fence_state` runs over those alone.

:func:`quick_fields` returns the fields only when :func:`~kexp.format.validate.check_bytes`
would find the file valid (``ok``) with exactly these fields. It returns None for every
file with an error, and for valid files outside what it reads: YAML comments,
double-quoted or multi-line values, flow mappings, block lists other than lists of
one-line flow mappings (``results``), plain values YAML would retype in a text field
(a warning), keys over 128 characters, ``---`` lines with more on them, a carriage
return other than CRLF line endings. The caller then runs the full check, which
reports the problems.
"""

from __future__ import annotations

import codecs
import functools
import math
import operator
import os
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

from kexp.core.fields import STRING_FIELDS
from kexp.core.settings import DEFAULT_SETTINGS, Settings
from kexp.format.fastpath import read_simple_front_matter
from kexp.format.fileformat import (
    DIFF_INFO,
    FIELD_BY_HEADING,
    FRONT_MATTER_BAD_CHAR,
    VERBATIM_INFO,
    decode_segment,
    unwrap,
)
from kexp.format.rules import EXPERIMENT_NAME, TIMESTAMP, encoded_size, is_real_time

_BOM = codecs.BOM_UTF8
#: Lines that may be headings or open or close a code fence; every other line leaves the
#: fence state of ``fileformat._fence_state`` as it is and is no heading. A heading:
#: the newline before it, ``##`` alone or ``## `` and text (group 1). A fence line: a
#: run of 3 or more backticks (or tildes) after a newline and up to 3 spaces (the
#: lookbehinds): group 1, the rest of the line: group 2.
_HEADING_LINE = re.compile(r"\n##(?:( [^\n]*)|(?=\n|\Z))")
_LINE_START = r"(?:(?<=\n{0})|(?<=\n {0})|(?<=\n  {0})|(?<=\n   {0}))"
_BACKTICK_LINE = re.compile("(```" + _LINE_START.format("```") + r"`*)([^\n]*)")
_TILDE_LINE = re.compile("(~~~" + _LINE_START.format("~~~") + r"~*)([^\n]*)")
_START = operator.methodcaller("start")


def quick_fields(
    data: bytes | str, path: str | Path, settings: Settings = DEFAULT_SETTINGS
) -> dict[str, Any] | None:
    """The front-matter fields of a certainly valid experiment file, else None.

    When a dict is returned, ``check_bytes(data, Path(path), settings)`` is ``ok`` and
    its ``document.fields`` equal the dict (same keys in the same order, same values
    and types). None means "not sure": run :func:`kexp.format.validate.check_bytes`.
    ``settings`` changes no verdict but the size limit (data over
    ``settings.max_file_bytes`` is never certainly valid: check_bytes refuses it).
    """
    if encoded_size(data, settings.max_file_bytes) is not None:
        return None
    if isinstance(data, bytes):
        if data[:3] == _BOM:
            data = data[3:]
        try:
            text = data.decode("utf-8")
        except UnicodeDecodeError:
            return None
        first_end = text.find("\n")
        if first_end > 0 and text[first_end - 1] == "\r":
            text = text.replace("\r\n", "\n")
    else:
        text = data
    if "\r" in text or not text.startswith("---\n") or "<<<<<<<" in text:
        return None  # (git's conflict markers: the full check says where)
    close = text.find("\n---", 3)  # the newline before the closing '---'
    if close < 0:
        return None
    body = close + 4
    if body < len(text):
        if text[body] != "\n":
            return None  # '---' followed by more on its line: let the parser decide
        body += 1
    yaml_text = text[4 : close + 1]
    # In ASCII text the characters YAML refuses are control characters, which the fast
    # reader declines (it reads printable lines only).
    if not yaml_text.isascii() and FRONT_MATTER_BAD_CHAR.search(yaml_text) is not None:
        return None
    accepts, holds = _schema_check()
    fields = read_simple_front_matter(yaml_text, STRING_FIELDS, block_lists=True, accept=accepts)
    if fields is None or not holds(fields):
        return None
    # The schema holds: id, score, is_buggy and created_at are there, with their types.
    named = EXPERIMENT_NAME.fullmatch(
        path.name if isinstance(path, Path) else os.path.basename(path)
    )
    if named is not None and fields["id"] != named.group(1):
        return None
    score = fields["score"]
    if isinstance(score, float) and not math.isfinite(score):
        return None
    stamp = TIMESTAMP.fullmatch(fields["created_at"])
    if stamp is not None and not is_real_time(stamp.group(1)):
        return None
    if fields["is_buggy"] is not True:
        # Only a known section twice would make the file invalid. The heading lines
        # found without telling fenced lines apart include the real headings: when
        # they name no known section twice, neither do the real ones.
        known = [
            field
            for heading in _HEADING_LINE.findall(text, body - 1)
            if heading and (field := FIELD_BY_HEADING.get(heading.strip().lower()))
        ]
        if len(set(known)) == len(known) and "samples" not in known:
            return fields if "score_ci" not in fields or not _findings(fields, "") else None
    headings = _headings(text, body)
    known = [field for _, _, field in headings if field is not None]
    if len(set(known)) != len(known):
        return None  # a known section twice
    if fields["is_buggy"] is True and not _section(text, headings, "error_message").strip():
        return None
    if ("score_ci" in fields or "samples" in known) and _findings(
        fields, _section(text, headings, "samples")
    ):
        return None  # score_ci or the samples have a problem: let the full check say it
    return fields


def _findings(fields: dict[str, Any], samples: str) -> bool:
    """Whether :func:`kexp.format.samples.sample_findings` finds a problem (imported only for
    the files with an interval or samples)."""
    # lazy: not every command that imports this module needs kexp.format.samples
    from kexp.format.samples import sample_findings

    return bool(sample_findings(fields, samples))


class _SchemaCheck:
    """The schema, checked value by value as the front-matter is read (a line's answer
    is remembered with it by the reader) when the schema checks each property on its
    own; else checked whole once the fields are read."""

    def __init__(self) -> None:
        # lazy: not every command that imports this module needs kexp.format.schema
        from kexp.format.schema import fast_validator, property_validators

        self._validate, self._invalid = fast_validator()
        split = property_validators()
        self._required, self._validators = split if split is not None else (frozenset(), {})
        self._whole = split is None

    def accepts(self, key: str, value: Any) -> bool:
        """Whether ``value`` is valid for the property ``key`` (True for keys the
        schema does not name, and for every value when it is checked whole)."""
        check = self._validators.get(key)
        if check is None:
            return True
        try:
            check(value)
        except self._invalid:
            return False
        return True

    def holds(self, fields: dict[str, Any]) -> bool:
        """Whether ``fields``, each value accepted, satisfy the schema."""
        if not self._whole:
            return self._required <= fields.keys()
        try:
            self._validate(fields)
        except self._invalid:
            return False
        return True


@functools.lru_cache(maxsize=1)
def _schema_check() -> tuple[Callable[[str, Any], bool], Callable[[dict[str, Any]], bool]]:
    """``accepts`` and ``holds`` of one :class:`_SchemaCheck` (the same objects every
    time: the reader remembers answers per ``accepts``)."""
    check = _SchemaCheck()
    return check.accepts, check.holds


def _headings(text: str, body: int) -> list[tuple[int, int, str | None]]:
    """The body's ``## `` heading lines outside fences, as (start, end, field).

    The lines and the fence state are those of ``fileformat._fence_state``: a fence
    opens with a run of 3 or more backticks or tildes indented by at most 3 spaces (a
    backtick run not followed by another backtick), and closes with a run of the same
    character at least as long, indented by at most 3 spaces, with only spaces or tabs
    after it; a ``## `` line outside a fence is a heading.
    """
    headings: list[tuple[int, int, str | None]] = []
    if body >= len(text):
        return headings
    # Three searches, each for an expression starting with its literal (so the search
    # skips to where one stands), cost less than one expression tried at every line.
    lines = list(_HEADING_LINE.finditer(text, body - 1))
    fences = list(_BACKTICK_LINE.finditer(text, body))
    if text.find("~", body) >= 0:
        fences += _TILDE_LINE.finditer(text, body)
    if fences:
        lines += fences
        lines.sort(key=_START)
    fence = ""
    for line in lines:
        if line.re is _HEADING_LINE:
            if not fence:
                # The text after '##' (None for a line '##': no known section).
                heading = line.group(1)
                field = FIELD_BY_HEADING.get(heading.strip().lower()) if heading else None
                headings.append((line.start() + 1, line.end(), field))
            continue
        run, rest = line.groups()
        if fence:
            if run[0] == fence[0] and len(run) >= len(fence) and not rest.strip(" \t"):
                fence = ""
        elif run[0] != "`" or "`" not in rest:
            fence = run
    return headings


def quick_bodies(data: bytes, names: tuple[str, ...]) -> dict[str, str] | None:
    """The texts of the body fields ``names`` of a valid experiment file's bytes, as
    ``parse(data).body_values()`` gives them, without the whole parse; None when not
    sure (a file not in the plain form: parse it)."""
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        return None
    if "\r" in text or not text.startswith("---\n"):
        return None
    close = text.find("\n---", 3)  # the newline before the closing '---', as above
    if close < 0 or text[close + 4 : close + 5] != "\n":
        return None
    headings = _headings(text, close + 5)
    known = [field for _, _, field in headings if field is not None]
    if len(set(known)) != len(known):
        return None  # a known section twice: the parser's to report
    return {name: _section(text, headings, name) for name in names}


def _section(text: str, headings: list[tuple[int, int, str | None]], name: str) -> str:
    """The text of the section of body field ``name`` (as fileformat._parse_body reads
    it; "" when absent)."""
    for index, (_, end, field) in enumerate(headings):
        if field != name:
            continue
        if end >= len(text):
            return ""  # the heading is the file's last line
        last = index + 1 == len(headings)
        segment = text[end + 1 : len(text) if last else headings[index + 1][0]]
        if last:
            segment += "\n"  # the "middle" form of the last segment
        return unwrap(
            decode_segment(segment), DIFF_INFO if name == "code_change" else VERBATIM_INFO
        )
    return ""
