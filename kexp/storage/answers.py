"""A ranking's answer kept for a working tree nobody changed: ``top``'s one fast path.

``kexp top`` asked twice of an unchanged store gives the same answer; finding it again
costs making a row of every file, deriving what is known of every experiment and
ranking them all (about a second at 100,000). So the answer (each chosen file's path,
content key and what is derived of it, and the invalid files warned about) is kept in
the cache's objects under the listing's *generation*: a token that every save of the
listing changes (:meth:`kexp.storage.cache.Cache.save_folders`, which forgets the
answers kept), read before the listing (:attr:`kexp.storage.listing.Listing.generation`).

An answer is kept by a read whose listing is the cache's (every file found as the
cache held it, or what changed saved by this read with no other save in between), and
used only by a read that found every file as the cache holds it at that same
generation: both saw the same files.
A read that expects to use one (:func:`waiting_answer`) ``stat``\\ s every file as any
read does, but makes no row (:meth:`kexp.storage.sources.FileSource.read` with
``rows=False``), then only the rows of the answer's files: it makes every row after
all if the store changed, or the answer's files are not found as kept.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any, NamedTuple

from kexp.core.campaign import Derived

if TYPE_CHECKING:
    from kexp.storage.cache import Cache
    from kexp.storage.listing import Listing
    from kexp.storage.rows import Row
    from kexp.storage.sources import Found


class Answer(NamedTuple):
    """A ranking's answer: the rows chosen, in order, what is derived of each, and the
    invalid files (path, first error) the read found."""

    rows: list[Row]
    of: Callable[[Any], Derived]
    invalid: list[tuple[str, Any]]


#: What the cache keeps of an answer: its generation, and the answer as
#: (the chosen files' (path, content key, derived values), the invalid files).
Waiting = tuple[str, Any]


def _name(generation: str, question: Sequence[Any]) -> str:
    digest = hashlib.blake2b(repr(tuple(question)).encode(), digest_size=12).hexdigest()
    return f"answer:{generation}:{digest}"


def answer_name(found: Found, question: Sequence[Any] | None) -> str | None:
    """The name an answer to ``question`` (what decides it besides the files: how it
    ranks, the filters...) is kept under; None when it cannot be kept (no question, or a
    read that changed the cache or saw more than the working tree)."""
    listing = found.listing
    if question is None or listing is None or listing.generation is None:
        return None
    if found.rows is not found.local:  # refs were read too
        return None
    return _name(listing.generation, question)


def waiting_answer(cache: Cache, question: Sequence[Any]) -> Waiting | None:
    """The answer to ``question`` kept for the cache's listing as it is (None: none)."""
    generation = cache.generation()
    name = _name(generation, question)
    kept = cache.objects([name]).get(name)
    return (generation, kept) if isinstance(kept, tuple) and len(kept) == 2 else None


def held_answer(waiting: Waiting, listing: Listing) -> Answer | None:
    """The answer ``waiting`` (:func:`waiting_answer`) if ``listing`` found the files as
    it was kept for, its rows made of the listing; else None."""
    generation, (chosen, invalid) = waiting
    if listing.generation != generation:
        return None
    folders = {path[: path.rfind(os.sep) + 1] for path, _, _ in chosen}
    if not folders <= listing.folders.keys():
        return None
    found = {row.path: row for folder in folders for row in listing.rows_of(folder)[0]}
    if any(path not in found or found[path].key != key for path, key, _ in chosen):
        return None
    derived = {path: Derived(*values) for path, _, values in chosen}
    rows = [found[path] for path, _, _ in chosen]
    return Answer(rows, lambda row: derived[row.path], list(invalid))


def keep_answer(cache: Cache, name: str, answer: Answer) -> None:
    """Keep ``answer`` under ``name``, if the cache takes the write at once."""
    from kexp.storage.cachefile import DamagedCacheError  # lazy: as the reader opens the cache

    chosen = [(row.path, row.key, tuple(answer.of(row))) for row in answer.rows]
    with contextlib.suppress(DamagedCacheError, ValueError):  # else not kept (ValueError:
        cache.save_objects({name: (chosen, answer.invalid)}, at_once=True)  # not marshal's)
