"""The operators recorded, the closest to one asked for first: what a read says when its
operator filter matches none of them (a typo, another name), rather than an empty
answer that reads as "nothing here" (``kexp context``'s packet lists them; every other
read notes them, :func:`unmatched_operator`)."""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from kexp.storage.rows import Row

__all__ = ["closest_operators", "distinct", "trigrams", "unmatched_operator"]

#: How many of the closest operators a read's note names.
NAMED = 3


def trigrams(text: str) -> set[str]:
    """The runs of three letters or digits of ``text``, lowercased, words joined by a space."""
    joined = " ".join(re.findall(r"[a-z0-9]+", text.lower()))
    return {joined[at : at + 3] for at in range(len(joined) - 2)}


def distinct(rows: Sequence[Row], column: str) -> list[tuple[str, str, int]]:
    """(lowercased value, its most common spelling, how many experiments) of a text
    column (``operator_sig``, ``dtype_sig``, ``env``) over ``rows``, most common first."""
    counts: dict[str, int] = {}
    for row in rows:
        spelling = getattr(row, column)
        counts[spelling] = counts.get(spelling, 0) + 1
    totals: dict[str, int] = {}
    spellings: dict[str, tuple[int, str]] = {}
    for spelling, count in counts.items():
        key = spelling.lower()
        totals[key] = totals.get(key, 0) + count
        best = spellings.get(key)
        if best is None or (-count, spelling) < (-best[0], best[1]):
            spellings[key] = (count, spelling)
    return sorted(
        ((key, spellings[key][1], total) for key, total in totals.items() if total),
        key=lambda item: (-item[2], item[0]),
    )


def closest_operators(rows: Sequence[Row], operator: str) -> list[tuple[str, str, int]]:
    """The operators recorded in ``rows`` (as :func:`distinct`), the closest to
    ``operator`` first: the most of its words (by length) found in them, then the most
    trigrams shared, then the most experiments, then by name."""
    words = re.findall(r"[a-z0-9]+", operator.lower())
    wanted = trigrams(operator)

    def closeness(known: tuple[str, str, int]) -> tuple[int, float, int, str]:
        key, _, count = known
        theirs = trigrams(key)
        shared = len(wanted & theirs) / len(wanted | theirs) if wanted | theirs else 0.0
        return (-sum(len(w) for w in words if w in key), -round(shared, 9), -count, key)

    return sorted(distinct(rows, "operator_sig"), key=closeness)


def unmatched_operator(rows: Sequence[Row], operator: str) -> str | None:
    """What to say of an operator filter (a part of ``operator_sig``, in any case) that
    matches no experiment of ``rows`` (every one a read sees, whatever its other
    filters): that none does, and the closest recorded; None when one matches, or
    nothing is recorded."""
    wanted = operator.lower()
    if not rows or any(wanted in row.operator_sig.lower() for row in rows):
        return None
    known = closest_operators(rows, operator)
    named = ", ".join(repr(shown) for _, shown, _ in known[:NAMED])
    return (
        f"no recorded operator matches {operator!r} (a part of operator_sig, in any case), "
        f"so nothing was found for it; the closest of the {len(known)} recorded: {named}; "
        "give one of them, or a part of it, as the operator"
    )
