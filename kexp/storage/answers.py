"""A ranking's answer kept for a working tree nobody changed: ``top``'s one fast path.

``kexp top`` asked twice of an unchanged store gives the same answer; finding it again
costs deriving what is known of every experiment and ranking them all (about half a
second at 100,000). So the answer (each chosen file's path, content key and what is
derived of it) is kept in the cache (:meth:`kexp.storage.cache.Cache.save_objects`)
under the listing's *generation*: a token that every save of the listing changes,
read before the listing (:attr:`kexp.storage.listing.Listing.generation`). An answer
is kept only by a read that found every file as the cache held it, and used only by a
read that found the same at the same generation: both saw the same files. A kept
answer whose files are not among the rows found now is not used.
"""

from __future__ import annotations

import contextlib
import hashlib
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from kexp.core.campaign import Derived

if TYPE_CHECKING:
    from kexp.storage.cache import Cache
    from kexp.storage.rows import Row
    from kexp.storage.sources import Found

#: What a ranking's answer is made with: the rows chosen, and what is derived of each.
Answer = tuple[list["Row"], Callable[[Any], Derived]]


def answer_name(found: Found, question: Sequence[Any] | None) -> str | None:
    """The name an answer to ``question`` (what decides it besides the files: how it
    ranks, the filters...) is kept under; None when it cannot be kept (no question, or a
    read that changed the cache or saw more than the working tree)."""
    listing = found.listing
    if question is None or listing is None or listing.generation is None:
        return None
    if found.rows is not found.local:  # refs were read too
        return None
    digest = hashlib.blake2b(repr(tuple(question)).encode(), digest_size=12).hexdigest()
    return f"answer:{listing.generation}:{digest}"


def held_answer(cache: Cache, name: str, rows: Sequence[Row]) -> Answer | None:
    """The answer kept under ``name``, its rows taken from ``rows`` (those found now);
    None when there is none, or when one of its files is not among ``rows``."""
    from kexp.storage.cache import DamagedCacheError  # lazy: as the reader opens the cache

    try:
        held = cache.objects([name]).get(name)
    except DamagedCacheError:
        cache.rebuild()  # in doubt: rebuilt, and the answer found again
        return None
    if not isinstance(held, list):
        return None
    wanted = {path: key for path, key, _ in held}
    found = {row.path: row for row in rows if row.path in wanted}
    if any(path not in found or found[path].key != key for path, key in wanted.items()):
        return None
    derived = {path: Derived(*values) for path, _, values in held}
    return [found[path] for path, _, _ in held], lambda row: derived[row.path]


def keep_answer(cache: Cache, name: str, answer: Answer) -> None:
    """Keep ``answer`` under ``name``, if the cache takes the write at once."""
    chosen, of = answer
    held = [(row.path, row.key, tuple(of(row))) for row in chosen]
    from kexp.storage.cache import DamagedCacheError

    with contextlib.suppress(DamagedCacheError):  # not kept: found again next time
        cache.save_objects({name: held}, at_once=True)
