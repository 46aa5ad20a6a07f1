"""A comment held to a length, whole-sectioned: each long section lists its first
entries and says in one line how many more there are (:class:`Listing`); what a
reviewer must act on gets the room first (:func:`fit`).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence

__all__ = ["FIRST_ENTRIES", "Listing", "fit"]

#: Entries each long section keeps before any section gets more (when they fit).
FIRST_ENTRIES = 5

#: Between the parts of a comment.
_GAP = "\n\n"


@dataclasses.dataclass(eq=False)
class Listing:
    """A section's entries, of which the first :attr:`shown` are printed.

    ``render(items, left)`` writes the section with ``items`` (the first ones) and, when
    ``left`` is not 0, the line that counts those left out; "" leaves the section out.
    """

    items: Sequence[str]
    render: Callable[[Sequence[str], int], str]
    shown: int = 0

    def text(self, shown: int | None = None) -> str:
        """The section with the first ``shown`` entries (default: :attr:`shown`)."""
        shown = self.shown if shown is None else shown
        return self.render(self.items[:shown], len(self.items) - shown)


Part = str | Listing


def fit(
    parts: Sequence[Part], max_chars: int | None, plan: Sequence[tuple[Listing, int | None]]
) -> str:
    """``parts`` (fixed text, or listings) joined by blank lines, whole; with
    ``max_chars``, each listing cut to its first entries so that the text holds at most
    ``max_chars`` characters where it can (the fixed parts, and each listing's count of
    what it leaves out, are always there). Room goes first to :data:`FIRST_ENTRIES` of
    each listing, in the order of ``plan``; then to each step of ``plan`` in turn: a
    listing and how many of its entries it may show by then (None: all)."""
    listings = [part for part in parts if isinstance(part, Listing)]
    for listing in listings:
        listing.shown = len(listing.items)
    whole = _join(parts)
    if max_chars is None or len(whole) <= max_chars:
        return whole
    for listing in listings:
        listing.shown = 0
    sizes = {id(listing): _size(listing, 0) for listing in listings}
    fixed = len(_join([part for part in parts if not isinstance(part, Listing)]))
    used = fixed + sum(sizes.values())
    first = [(listing, FIRST_ENTRIES) for listing in dict.fromkeys(step for step, _ in plan)]
    for listing, cap in [*first, *plan]:
        top = len(listing.items) if cap is None else min(len(listing.items), cap)
        room = max_chars - used + sizes[id(listing)]
        shown = _most(listing, listing.shown, top, room)
        if shown != listing.shown:
            listing.shown = shown
            size = _size(listing, shown)
            used += size - sizes[id(listing)]
            sizes[id(listing)] = size
    return _join(parts)


def _most(listing: Listing, low: int, high: int, room: int) -> int:
    """The most entries of ``listing`` (from ``low`` to ``high``) whose section takes at
    most ``room`` characters (``low`` when none more fits)."""
    if high <= low:
        return low
    if _size(listing, high) <= room:
        return high
    # Below ``high`` a section grows with each entry (the count left out shrinks by a
    # digit at most): the largest that fits, by halves.
    while low < high - 1:
        middle = (low + high) // 2
        if _size(listing, middle) <= room:
            low = middle
        else:
            high = middle
    return low


def _size(listing: Listing, shown: int) -> int:
    """The characters ``listing`` adds with ``shown`` entries (its gap included)."""
    text = listing.text(shown)
    return len(text) + len(_GAP) if text else 0


def _join(parts: Sequence[Part]) -> str:
    texts = [part if isinstance(part, str) else part.text() for part in parts]
    return _GAP.join(text for text in texts if text) + "\n"
