"""The postings of the near-duplicate index: which docs post which shingle.

Each doc posts the prefix of its code change's shingles
(:func:`kexp.storage.doctext.shingle_prefix`, in an order decided from the docs'
shingles: :func:`order_of`). A posting is one unsigned 64-bit integer, the shingle in
the high half and the doc number in the low one (:func:`postings_of`), so postings
sort by shingle, then doc. They are kept in :data:`POSTING_GROUPS` groups by the shingle's high
bits (:func:`group_of`), each a sorted ``array('Q')``: a store of a hundred thousand
changes posts a few million shingles, which SQLite writes far faster as 65,536
records than as one row each, and a new doc rewrites only the few small groups its
prefix falls in (see :class:`kexp.storage.cache.Cache`, the one module that keeps
them).
"""

from __future__ import annotations

import heapq
from array import array
from bisect import bisect_left
from collections import Counter, defaultdict
from collections.abc import Callable, Iterable, Sequence
from itertools import chain

from kexp.storage.parallel import in_two_processes

#: The most shingles the order of the postings names (the most common ones).
ORDER_SIZE = 1 << 16
#: The high bits of a shingle (a CRC-32) that name its group.
GROUP_BITS = 16
#: How many groups the postings are kept in.
POSTING_GROUPS = 1 << GROUP_BITS
#: The doc's bits of a posting.
DOC_MASK = 0xFFFFFFFF
_GROUP_SHIFT = 64 - GROUP_BITS


def group_of(shingle: int) -> int:
    """The group the postings of ``shingle`` are kept in."""
    return shingle >> (32 - GROUP_BITS)


def postings_of(doc: int, shingles: Iterable[int]) -> list[int]:
    """The postings of one doc's ``shingles``: each the shingle (uint32) in the high
    half, the doc number in the low one."""
    return [(shingle << 32) | doc for shingle in shingles]


def grouped(postings: Iterable[int]) -> dict[int, array[int]]:
    """``postings`` (each once: a doc posts each shingle of its prefix once) by group,
    each group's a sorted ``array('Q')``."""
    groups: defaultdict[int, list[int]] = defaultdict(list)
    for entry in postings:
        groups[entry >> _GROUP_SHIFT].append(entry)
    return {group: array("Q", sorted(entries)) for group, entries in groups.items()}


def posted(
    docs: list[tuple[int, array[int]]], prefix_of: Callable[[Sequence[int]], list[int]]
) -> dict[int, array[int]]:
    """The postings of ``docs`` (number, shingles) by group (:func:`grouped`): each one's
    ``prefix_of(shingles)``, made in two processes when many."""

    def posting(part: list[tuple[int, array[int]]]) -> list[int]:
        return list(chain.from_iterable(postings_of(d, prefix_of(held)) for d, held in part))

    return grouped(in_two_processes(posting, docs, len(docs)))


def merged(kept: array[int], added: array[int]) -> array[int]:
    """A group's postings ``kept`` with those ``added``, sorted, each once."""
    return array("Q", sorted(set(kept).union(added)))


def docs_posting(group: array[int], shingle: int) -> list[int]:
    """The docs posting ``shingle`` in its ``group``'s postings."""
    start = bisect_left(group, shingle << 32)
    stop = bisect_left(group, (shingle + 1) << 32, start)
    return [entry & DOC_MASK for entry in group[start:stop]]


def order_of(shingle_sets: Iterable[Sequence[int]]) -> dict[int, int]:
    """The order of the postings decided from the docs' shingles: each shingle held by
    two docs or more → how many (the :data:`ORDER_SIZE` most common)."""
    counts = Counter(chain.from_iterable(shingle_sets))
    common = [(n, shingle) for shingle, n in counts.items() if n > 1]
    if len(common) > ORDER_SIZE:
        common = heapq.nlargest(ORDER_SIZE, common)
    return {shingle: n for n, shingle in common}
