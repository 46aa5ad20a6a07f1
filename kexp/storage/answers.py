"""A question's answer kept for files nobody changed: the read's one fast path.

``kexp top`` asked twice of an unchanged store gives the same answer; finding it again
costs making a row of every file, deriving what is known of every experiment and
ranking them all (about a second at 100,000). So the answer (each chosen file's path,
content key, what is derived of it and where it was found, and the invalid files warned
about) is kept in the cache's objects under the listing's *generation*: a token that
every save of the listing changes (:meth:`kexp.storage.cache.Cache.save_folders`, which
forgets the answers kept), read before the listing
(:attr:`kexp.storage.listing.Listing.generation`). Read across refs, the answer is kept
under what the read saw besides the working tree too (:attr:`kexp.storage.sources.Found.places`:
``HEAD``'s commit and each ref's name and commit, which name their files for good, and
what rewrites the history: a shallow clone's boundary, replace refs); a chosen file of
a ref is kept whole (its row), the ids the read saw beyond the working tree's with it
(so that ids print as long as the plain read prints them). A question keeps one answer
for the refs it names: the answer for their newer commits replaces the older ones (an
agent that fetches and asks again does not grow the cache). A read that warned of a
ref's invalid file keeps none (its words name the file from the folder it ran in).

An answer is kept by a read whose listing is the cache's (every file found as the
cache held it, or what changed saved by this read with no other save in between), and
used only by a read that found every file as the cache holds it at that same
generation, the same places besides: both saw the same files.

kexp's own writes (a record, an update, a delete) forget every answer kept: the next
question, the one an agent asks after each step, then makes its rows while the files
are ``stat``-ed, as a read without a kept answer does, instead of ``stat``-ing them
first for an answer that cannot hold and making every row after.

A question answered of the rows as a whole (``kexp context``: what is derived of the
operator's campaigns, the retrieval index's matches, the lessons read of the files;
``kexp similar``'s matches) is kept the same way, whole (:func:`keep_whole`): its value,
made of plain data, the invalid files its read warned about and the ids it read.
A read that expects to use one (:func:`waiting_answer`) ``stat``\\ s every file as any
read does, but makes no row (:meth:`kexp.storage.sources.FileSource.read` with
``rows=False``), then only the rows of the answer's files: it makes every row after
all (:meth:`kexp.storage.sources.FileSource.completed`) if the store changed, or the
answer's files are not found as kept.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any, NamedTuple

from kexp.core.cumulative import Derived
from kexp.storage.rows import LOCAL, Row, plain_seen, seen_of

if TYPE_CHECKING:
    from kexp.storage.cache import Cache
    from kexp.storage.listing import Listing
    from kexp.storage.sources import Found


class Answer(NamedTuple):
    """A ranking's answer: the rows chosen, in order, what is derived of each, the
    invalid files (path, first error) the read found, and the ids it read (a kept
    answer's: those the read it was kept by saw; None: the read's own)."""

    rows: list[Row]
    of: Callable[[Any], Derived]
    invalid: list[tuple[str, Any]]
    ids: Callable[[], list[str]] | None = None


class Whole(NamedTuple):
    """A question's answer kept whole: its value (plain data: what :mod:`marshal`
    keeps), the invalid files (path, first error) its read found and the ids it read."""

    value: Any
    invalid: list[tuple[str, Any]]
    ids: Callable[[], list[str]]


#: What the cache keeps of an answer: its generation, and the answer as (the chosen
#: files' (path, content key, derived values, where found, a ref's row values), the
#: invalid files, (the ids read beyond the working tree's, its ids not read)), or
#: (:data:`WHOLE`, a :class:`Whole`'s value, its invalid files, the ids as above).
Waiting = tuple[str, Any]
#: The first item of what the cache keeps of an answer kept whole.
WHOLE = "whole"


def _name(generation: str, question: Sequence[Any], places: tuple[Any, ...]) -> str:
    """``answer:GENERATION:GROUP:STATE``: the group names the question and the places
    read (the refs' names), the state what the places held (their commits): a newer
    state's answer replaces the older ones of its group (:func:`keep_answer`)."""
    group = repr((tuple(question), tuple(name for name, _ in places)))
    return f"answer:{generation}:{_digest(group)}:{_digest(repr(places))}"


def _digest(text: str) -> str:
    return hashlib.blake2b(text.encode(), digest_size=12).hexdigest()


def answer_name(found: Found, question: Sequence[Any] | None) -> str | None:
    """The name an answer to ``question`` (what decides it besides the files: how it
    ranks, the filters...) is kept under, for what ``found`` read; None when it cannot
    be kept (no question, a read that changed the cache, or warned of a ref's invalid
    file in words made for the folder the command ran in)."""
    listing = found.listing
    if question is None or listing is None or listing.generation is None:
        return None
    if any(isinstance(error, str) for _, error in found.invalid):
        return None
    return _name(listing.generation, question, found.places)


def waiting_answer(
    cache: Cache, question: Sequence[Any], places: tuple[Any, ...]
) -> Waiting | None:
    """The answer to ``question`` kept for the cache's listing as it is and ``places``
    (:meth:`kexp.storage.sources.FileSource.answer_places`); None: none."""
    generation = cache.generation()
    name = _name(generation, question, places)
    kept = cache.objects([name]).get(name)
    return (generation, kept) if isinstance(kept, tuple) and len(kept) in (3, 4) else None


def held_answer(waiting: Waiting, listing: Listing) -> Answer | None:
    """The answer ``waiting`` (:func:`waiting_answer`) if ``listing`` found the files as
    it was kept for, its rows made of the listing (a ref's kept whole) and its ids those
    the read it was kept by saw; else None."""
    generation, kept = waiting
    if listing.generation != generation or kept[0] == WHOLE:
        return None
    chosen, invalid, ids_kept = kept
    mine = [path for path, _, _, _, values in chosen if values is None]
    folders = {path[: path.rfind(os.sep) + 1] for path in mine}
    if not folders <= listing.folders.keys():
        return None
    found = {row.path: row for folder in folders for row in listing.rows_of(folder)[0]}
    if any(path not in found or found[path].key != key
           for path, key, _, _, kept in chosen if kept is None):  # fmt: skip
        return None
    derived: dict[tuple[str, bytes], Derived] = {}
    rows: list[Row] = []
    for path, key, values, where, kept in chosen:
        if len(values) != len(Derived._fields):  # kept by a kexp that derived less
            return None
        if where is None:
            rows.append(found[path])
        else:  # read across refs: where it was found is the row's last value
            made = found[path][:-1] if kept is None else kept
            rows.append(tuple.__new__(Row, (*made, seen_of(where))))
        derived[path, key] = Derived(*values)

    ids_read = _ids_read(listing, ids_kept)
    return Answer(rows, lambda row: derived[row.path, row.key], list(invalid), ids_read)


def _ids_kept(found: Found) -> tuple[list[str], list[str]]:
    """What an answer keeps of the ids ``found`` read: those beyond the working tree's
    (read across refs), and the working tree's it did not read."""
    if found.rows is not found.local and found.listing is not None:  # refs were read too
        read, working = set(found.ids()), set(found.listing.ids())
        return sorted(read - working), sorted(working - read)
    return [], []


def _ids_read(listing: Listing, ids_kept: tuple[list[str], list[str]]) -> Callable[[], list[str]]:
    """The ids the read an answer was kept by saw, of ``listing`` and what it kept."""
    beyond, not_read = ids_kept
    if not beyond and not not_read:
        return listing.ids
    return lambda: [i for i in listing.ids() if i not in not_read] + list(beyond)


def _keep(cache: Cache, name: str, kept: tuple[Any, ...]) -> None:
    """Keep ``kept`` under ``name``, the answers of older states of its group forgotten,
    if the cache takes the write at once and :mod:`marshal` the value."""
    from kexp.storage.cachefile import DamagedCacheError  # lazy: as the reader opens the cache

    older = name[: name.rfind(":") + 1]  # the group's answers for older states: forgotten
    with contextlib.suppress(DamagedCacheError, ValueError):  # else not kept (ValueError:
        cache.save_objects({name: kept}, at_once=True, replacing=older)  # not marshal's)


def keep_answer(cache: Cache, name: str, answer: Answer, found: Found) -> None:
    """Keep ``answer`` (ranked of what ``found`` read) under ``name``, if the cache takes
    the write at once."""
    chosen = [
        (
            row.path,
            row.key,
            tuple(answer.of(row)),
            None if row.where is None else plain_seen(row.where),
            None if row.where is None or row.where.ref == LOCAL else tuple(row[:-1]),
        )
        for row in answer.rows
    ]
    _keep(cache, name, (chosen, answer.invalid, _ids_kept(found)))


def held_whole(waiting: Waiting, listing: Listing) -> Whole | None:
    """The answer kept whole ``waiting`` (:func:`waiting_answer`) if ``listing`` found
    the files as it was kept for, with the ids the read it was kept by saw; else None."""
    generation, kept = waiting
    if listing.generation != generation or kept[0] != WHOLE or len(kept) != 4:
        return None
    _, value, invalid, ids_kept = kept
    return Whole(value, list(invalid), _ids_read(listing, ids_kept))


def keep_whole(cache: Cache, name: str, value: Any, found: Found) -> None:
    """Keep ``value`` (plain data, made of what ``found`` read) whole under ``name``
    (:func:`answer_name`), if the cache takes the write at once and :mod:`marshal` it."""
    _keep(cache, name, (WHOLE, value, found.invalid, _ids_kept(found)))
