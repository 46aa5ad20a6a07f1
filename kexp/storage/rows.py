"""What queries know of one experiment file without reading it whole: a :class:`Row`.

A file's *content key* is git's blob hash of its bytes (``sha1(b"blob <size>\\0" +
bytes)``), whether it lies in the working tree or in a commit: the same bytes have the
same key everywhere, so what is parsed from them (:func:`record_of`: the front-matter
values, or the first problem of an invalid file) is kept once, by key
(:mod:`kexp.storage.cache`), for the working tree and every ref alike. A record never depends
on where the file lies: the one rule that does (the id in the file name must be the id
in the file) is applied to each file found (:func:`row_of`). :class:`RowsByKey` finds the
rows holding a content.
"""

from __future__ import annotations

import collections
import dataclasses
import hashlib
import os
from collections.abc import Sequence
from pathlib import Path
from sys import intern
from typing import TYPE_CHECKING, Any, NamedTuple

from kexp.core.fields import FIELDS, FRONT_MATTER_FIELDS
from kexp.core.model import KernelExperiment, attach, experiment_from_fields
from kexp.core.problems import Problem, sort_problems
from kexp.format.filelinks import valid_fields
from kexp.format.rules import EXPERIMENT_NAME
from kexp.format.validate import check_bytes

if TYPE_CHECKING:
    from kexp.core.settings import Settings

#: The front-matter values a record holds of a valid file, in this order (lists as
#: tuples, absent optional fields as their defaults; then the unknown keys, or None).
VALUE_FIELDS = (*FRONT_MATTER_FIELDS, "extra_fields")
#: A file whose content is checked without its name: a name no experiment has (the
#: name rule is :func:`row_of`'s).
_NEUTRAL = "content.md"
_FRONT_MATTER = tuple(f for f in FIELDS if f.in_front_matter)
#: (index, value) of the optional fields: their values when absent (a list as an empty
#: tuple, a mapping as None).
_OPTIONAL_AT = tuple((index, f.absent()) for index, f in enumerate(_FRONT_MATTER) if not f.required)
_KNOWN = frozenset(FRONT_MATTER_FIELDS)
_ID = FRONT_MATTER_FIELDS.index("id")
_TAGS = FRONT_MATTER_FIELDS.index("tags")
_REPEATING = tuple(index for index, f in enumerate(_FRONT_MATTER) if f.repeats)
#: (index, name) of the fields whose values are lists (a row's tuples) or mappings: an
#: experiment made of a row gets lists and fresh dicts of them; the other values (text,
#: numbers, booleans) are immutable and shared.
_CONTAINERS_AT = tuple(
    (index, f.name) for index, f in enumerate(_FRONT_MATTER) if isinstance(f.default, (list, dict))
)

#: What is kept of one file's content: (the first error as (line, column, code,
#: field, message, hint), or None; the values of :data:`VALUE_FIELDS`, or None).
Record = tuple["tuple[Any, ...] | None", "tuple[Any, ...] | None"]


def content_key(data: bytes) -> bytes:
    """The content key of a file's bytes: git's blob hash (20 bytes)."""
    return hashlib.sha1(b"blob %d\0" % len(data) + data, usedforsecurity=False).digest()


def values_of(fields: dict[str, Any]) -> tuple[Any, ...]:
    """A valid file's front-matter as :data:`VALUE_FIELDS` values; the texts that repeat
    from file to file (status, operator, dtype, env, base commit, author, parent, tags)
    interned, so that a store's rows share them (``marshal`` keeps them interned)."""
    values = list(map(fields.get, FRONT_MATTER_FIELDS))
    for index, default in _OPTIONAL_AT:
        value = values[index]
        if value is None:
            values[index] = default
        elif type(value) is list:
            values[index] = tuple(value)
    for index in _REPEATING:
        value = values[index]
        if type(value) is str:
            values[index] = intern(value)
    tags = values[_TAGS]
    if tags:
        values[_TAGS] = tuple(intern(tag) if type(tag) is str else tag for tag in tags)
    values.append(
        None if fields.keys() <= _KNOWN else {k: v for k, v in fields.items() if k not in _KNOWN}
    )
    return tuple(values)


def record_of(data: bytes, settings: Settings) -> Record:
    """What is kept of one file's bytes (see the module documentation)."""
    fields, checked = valid_fields(data, _NEUTRAL, settings)
    if fields is not None:
        return None, values_of(fields)
    assert checked is not None
    return first_error(checked.problems), None


def named_record(data: bytes, path: str, settings: Settings) -> Record:
    """:func:`record_of` for the file at ``path``: with the name rule (the id in its
    name must be the id it holds) applied."""
    found = record_of(data, settings)
    values = found[1]
    named = EXPERIMENT_NAME.fullmatch(os.path.basename(path))
    if values is not None and named is not None and values[_ID] != named.group(1):
        return first_error(check_bytes(data, Path(path), settings).problems), None
    return found


def first_error(problems: list[Problem]) -> tuple[Any, ...]:
    """The first error of ``problems``, without its path (see :data:`Record`)."""
    first = next(p for p in sort_problems(problems) if p.severity == "error")
    return (first.line, first.column, first.code, first.field, first.message, first.hint)


def problem_at(path: Path | str, error: tuple[Any, ...]) -> Problem:
    """The problem of a :data:`Record` in the file at ``path``."""
    line, column, code, field, message, hint = error
    return Problem(str(path), line, column, "error", code, field, message, hint)


#: The name the working tree goes by among the places a store reads.
LOCAL = "local"
#: At most this many other places are named in a note.
_SHOWN_REFS = 5


class Seen(NamedTuple):
    """Where one version of an experiment was found, shared by the rows found there."""

    #: Where: ``local`` when the working tree holds this version, else a remote's
    #: default branch holding it, else the ref holding it whose commit is the newest.
    ref: str
    #: Every place holding this version (the working tree first, then refs in order; the
    #: checked-out branch, the working tree's commit, is not named beside ``local``).
    refs: tuple[str, ...]
    #: The places holding other versions of the same experiment (older ones, or one
    #: that changed too since their commits parted: ``diverged_on``), in order.
    other_versions: tuple[str, ...]
    #: The places among ``other_versions`` whose version changed too since their commits
    #: parted from this one's (the later commit's, or the working tree's edit, was taken).
    diverged_on: tuple[str, ...] = ()
    #: The refs that removed the experiment, read all the same: the working tree or a
    #: remote's default branch holds it (:meth:`kexp.storage.versions.Newest.removed`).
    removed_on: tuple[str, ...] = ()
    #: :class:`Unmerged`: this version, or one its cumulative score builds on, is a side
    #: branch's, ranked over the one the working tree or a default branch holds (None
    #: when none is: :mod:`kexp.storage.unmerged`).
    unmerged: Unmerged | None = None

    @property
    def diverged(self) -> bool:
        """Whether another place's version changed too since their commits parted."""
        return bool(self.diverged_on)


def plain_seen(where: Seen) -> tuple[Any, ...]:
    """``where`` as plain tuples (what :mod:`marshal` keeps: no named tuple);
    :func:`seen_of` makes it again."""
    unmerged = where.unmerged
    return (*where[:-1], None if unmerged is None else tuple(unmerged))


def seen_of(values: Sequence[Any]) -> Seen:
    """The :class:`Seen` of what :func:`plain_seen` gave."""
    full = tuple(values) if len(values) == len(Seen._fields) else (*values, None)
    unmerged = full[-1]
    return Seen._make((*full[:-1], None if unmerged is None else Unmerged(*unmerged)))


def sighting_of(values: Sequence[Any]) -> Sighting:
    """The :class:`Sighting` of its values as :func:`dataclasses.astuple` gives them
    (an ``unmerged`` made plain again with it)."""
    full = tuple(values) if len(values) == 7 else (*values, None)  # kept before unmerged
    ref, refs, others, diverged_on, key, removed_on, unmerged = full
    made = None if unmerged is None else Unmerged(*unmerged)
    return Sighting(ref, refs, others, tuple(diverged_on), key, removed_on, made)


class Unmerged(NamedTuple):
    """A version a side branch holds (a pull request not merged), ranked over the one
    the working tree or a remote's default branch holds: this experiment's own, or one
    its cumulative score builds on; and its numbers as that place holds them."""

    #: Whether this experiment's own version is the side branch's.
    own: bool
    #: The side branches holding the versions it rests on (its own, its ancestors').
    refs: tuple[str, ...]
    #: Where the versions it would rest on otherwise are: ``local`` or a default branch.
    place: str
    #: Its score and cumulative score as that place holds them (None: not known there).
    score: float | None
    cumulative: float | None

    @property
    def said(self) -> str:
        """One line for people: the side branch, and the numbers as ``place`` has them."""
        where = "your working tree" if self.place == LOCAL else self.place
        refs = _shown(self.refs)
        numbers = []
        if self.own and self.score is not None:
            numbers.append(f"score {self.score:.4f}")
        if self.cumulative is not None:
            numbers.append(f"cumulative {self.cumulative:.4f}")
        shown = ", ".join(numbers) or "not known"
        if self.own:
            return f"unmerged: this version is on {refs} alone; {where} holds {shown}"
        return f"built on an unmerged version on {refs}; as {where} holds its lineage: {shown}"

    def to_dict(self) -> dict[str, Any]:
        """As ``--json`` adds it (``unmerged``)."""
        return {
            "own": self.own,
            "refs": list(self.refs),
            "place": self.place,
            "score": self.score,
            "cumulative_score": self.cumulative,
        }


@dataclasses.dataclass(frozen=True)
class Sighting:
    """Where a store reading refs found an experiment (``exp.where``)."""

    #: ``local`` when the working tree holds this version, else a remote's default
    #: branch holding it, else the ref holding it whose commit is the newest.
    ref: str
    #: Every place holding this very content (the working tree first; the checked-out
    #: branch, the working tree's commit, is not named beside ``local``).
    refs: tuple[str, ...]
    #: The places holding other versions of the same experiment (older ones, or one
    #: that changed too since their commits parted: ``diverged_on``).
    other_versions: tuple[str, ...]
    #: The places among ``other_versions`` whose version changed too since their commits
    #: parted: this one is the later commit's, or the working tree's edit.
    diverged_on: tuple[str, ...]
    #: The content key of this version (git's blob hash).
    key: bytes
    #: The refs that removed this experiment, not followed: the working tree or a
    #: remote's default branch holds it (a removal waiting on a side branch).
    removed_on: tuple[str, ...] = ()
    #: This version, or one its cumulative score builds on, is a side branch's ranked
    #: over the working tree's or default branch's (:class:`Unmerged`; None: none is).
    unmerged: Unmerged | None = None

    @property
    def local(self) -> bool:
        """Whether the working tree holds this version."""
        return self.ref == LOCAL

    @property
    def diverged(self) -> bool:
        """Whether another place's version changed too since their commits parted."""
        return bool(self.diverged_on)

    @property
    def note(self) -> str:
        """One line for people: where the other versions are, and the refs that removed
        it ("" when there are none)."""
        said = []
        older = tuple(p for p in self.other_versions if p not in self.diverged_on)
        if older:
            said.append(f"an older version on {_shown(older)}")
        if self.diverged_on:
            which = "the working tree's edit" if self.local else "the later commit's"
            said.append(
                f"another version on {_shown(self.diverged_on)}: both changed since their "
                f"commits parted; this is {which}"
            )
        if self.removed_on:
            said.append(f"removed on {_shown(self.removed_on)}, not here nor on the default branch")
        if self.unmerged is not None:
            said.append(self.unmerged.said)
        return "; ".join(said)

    def to_dict(self) -> dict[str, Any]:
        """As ``--json`` adds it to each experiment (``removed_on`` a list, empty when
        none, as the exports hold it)."""
        data: dict[str, Any] = {"ref": self.ref, "refs": list(self.refs)}
        if self.other_versions:
            data["other_versions"] = list(self.other_versions)
            data["diverged"] = self.diverged
            if self.diverged_on:
                data["diverged_on"] = list(self.diverged_on)
        data["removed_on"] = list(self.removed_on)
        if self.unmerged is not None:
            data["unmerged"] = self.unmerged.to_dict()
        if self.other_versions or self.removed_on or self.unmerged is not None:
            data["note"] = self.note
        return data


def _shown(places: tuple[str, ...]) -> str:
    """Places for people: the first few, then how many more."""
    more = len(places) - _SHOWN_REFS
    return ", ".join(places[:_SHOWN_REFS]) + (f" and {more} more" if more > 0 else "")


if TYPE_CHECKING:

    class _RowValues(NamedTuple):
        """What code reads of a row by name, typed (the fields in :data:`VALUE_FIELDS`
        order, then ``path``, ``key``, ``where``; ``tests/test_fields.py`` checks it
        against the table). At run time the tuple is made from the table: a field
        missing here is in the row all the same."""

        id: str
        pid: str
        change_summary: str
        score: float
        measured_against: str
        score_ci: tuple[float, ...]
        status: str
        is_buggy: bool
        operator_sig: str
        dtype_sig: str
        env: str
        base_commit: str
        created_at: str
        tags: tuple[str, ...]
        author: str
        combines: tuple[str, ...]
        protocol: dict[str, Any] | None
        results: tuple[dict[str, Any], ...]
        extra_fields: dict[str, Any] | None
        path: str
        key: bytes
        where: Seen | None = None

else:
    _RowValues = collections.namedtuple(
        "_RowValues", (*VALUE_FIELDS, "path", "key", "where"), defaults=(None,)
    )


class Row(_RowValues):
    """One valid experiment file as queries see it: its front-matter and where it is.

    It has the attributes filtering, deriving (:func:`kexp.core.campaign.derive`) and ranking
    read (``score``, ``pid``, ``measured_against``, ``operator_sig``, ...), so queries
    run on rows and build experiments only for what they return. What is derived from
    the whole store is not a row's: the query's :class:`kexp.core.campaign.Derivation` holds
    it. The values are :data:`VALUE_FIELDS` (the front-matter fields of the table,
    :mod:`kexp.core.fields`, in order), then ``path`` (the file, relative to
    ``experiments/``: where a checkout would have it), ``key`` (its content key,
    :func:`content_key`) and ``where`` (where it was found, when the store reads refs:
    a :class:`Seen`; the last value, :mod:`kexp.storage.refs` sets it by position). Lists are
    tuples.
    """

    __slots__ = ()

    def to_experiment(self, experiments_dir: Path) -> KernelExperiment:
        """The experiment with this front-matter (body fields empty: not read), with
        where it was found; what is derived of it is the store's to attach."""
        fields: dict[str, Any] = dict(zip(FRONT_MATTER_FIELDS, self, strict=False))
        for at, name in _CONTAINERS_AT:
            value = self[at]
            if isinstance(value, tuple):
                fields[name] = [dict(v) if isinstance(v, dict) else v for v in value]
            elif isinstance(value, dict):
                fields[name] = dict(value)
        fields.update(self.extra_fields or {})
        exp = experiment_from_fields(fields, experiments_dir / self.path)
        return attach(exp, where=self.sighting())

    def sighting(self) -> Sighting | None:
        """Where it was found (None when the store reads no refs)."""
        where = self.where
        if where is None:
            return None
        return Sighting(
            where.ref,
            where.refs,
            where.other_versions,
            where.diverged_on,
            self.key,
            where.removed_on,
            where.unmerged,
        )


def row_of(values: tuple[Any, ...], path: str, key: bytes, where: Seen | None = None) -> Row:
    """The row of a valid file's values, found at ``path`` (relative)."""
    return Row._make((*values, path, key, where))


class RowsByKey:
    """The rows of each content key (several files may hold one content)."""

    def __init__(self, rows: Sequence[Row]) -> None:
        self._one = {row.key: row for row in rows}
        self._many: dict[bytes, list[Row]] = {}
        if len(self._one) != len(rows):
            counts = collections.Counter(row.key for row in rows)
            for row in rows:
                if counts[row.key] > 1:
                    self._many.setdefault(row.key, []).append(row)

    def get(self, key: bytes) -> list[Row]:
        """The rows holding ``key``, in the order given (none: empty)."""
        many = self._many.get(key)
        if many is not None:
            return many
        row = self._one.get(key)
        return [] if row is None else [row]
