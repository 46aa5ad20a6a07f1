"""What the store-wide checks need of one file, read without keeping its document: its
:class:`FileLinks` (id, pid, combines, base_commit, env and where their keys are), the
record a checking process sends of it, and the quick scan that gives both."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, NamedTuple

from kexp.core.problems import Problem
from kexp.core.settings import DEFAULT_SETTINGS, Settings
from kexp.format.quickcheck import quick_fields
from kexp.format.rules import warns_if_valid
from kexp.format.validate import CheckedFile, check_bytes

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
