"""The operators recorded, the closest to one asked for first: what a read says when its
operator filter matches none of them (a typo, another name), rather than an empty
answer that reads as "nothing here" (``kexp context``'s packet lists them; every other
read notes them, :func:`unmatched_operator`). The same for a dtype or env filter that
matches none of the operator's experiments (an env typed otherwise than ``kexp env``
wrote it: ``CPU`` for ``AMD EPYC (2 cores), gcc 12``): :func:`unmatched_value`.

Every filter of an ``operator``, ``dtype`` or ``env`` reads a value as :func:`part_of`
says: a part of it in any case, in the value's own spelling or in kexp's (:func:`spelled`:
``bfloat16`` and ``torch.bfloat16`` are ``bf16``; ``path.py:function`` is
``path.py: function``; ``H100-SXM5`` is ``H100 SXM5``); a dtype's whole names only
(``float16`` is no part of ``bfloat16``, ``fp8`` none of ``fp8e5m2``)."""

from __future__ import annotations

import functools
import re
from collections.abc import Sequence
from typing import TYPE_CHECKING

from kexp.core.spelling import DTYPE_SPELLINGS, folded, spelled

if TYPE_CHECKING:
    from kexp.storage.rows import Row

__all__ = [
    "COLUMNS",
    "DTYPE_SPELLINGS",
    "closest",
    "closest_operators",
    "distinct",
    "folded",
    "matched_as",
    "matching",
    "named_closest",
    "names_dtypes",
    "part_of",
    "read_alone",
    "spelled",
    "trigrams",
    "unmatched_operator",
    "unmatched_value",
]

#: How many of the closest operators a read's note names.
NAMED = 3

#: A dtype's name, whole: no letter or digit beside it, nor ``-`` or ``_`` joining one to
#: it (``fp8`` is no name of ``fp8e5m2`` nor of ``fp8-e5m2``; it is one of ``bf16->fp8``).
_WHOLE = r"(?<![a-z0-9])(?<![a-z0-9][-_]){}(?![a-z0-9])(?![-_][a-z0-9])"


def trigrams(text: str) -> set[str]:
    """The runs of three letters or digits of ``text``, lowercased, words joined by a space."""
    joined = " ".join(re.findall(r"[a-z0-9]+", text.lower()))
    return {joined[at : at + 3] for at in range(len(joined) - 2)}


@functools.lru_cache(maxsize=65536)  # a filter over every row: their values repeat
def part_of(column: str, wanted: str, value: str) -> bool:
    """Whether a filter ``wanted`` of ``column`` reads ``value``: a part of it, in any
    case, as given or as both are :func:`spelled`; a dtype kexp names
    (:func:`names_dtypes`) only by its whole names, as both are spelled (``fp8`` of
    ``bf16->fp8``, not of ``fp8e5m2``; ``float16`` is ``fp16``, no part of ``bfloat16``)."""
    mine = spelled(column, wanted)
    if column == "dtype_sig" and names_dtypes(wanted):  # "float16" is in "bfloat16"
        whole = _WHOLE.format(re.escape(mine))
        return re.search(whole, spelled(column, value)) is not None
    if wanted.lower() in value.lower():
        return True
    return bool(mine) and mine.lower() in spelled(column, value).lower()


@functools.lru_cache(maxsize=4096)
def names_dtypes(wanted: str) -> bool:
    """Whether a dtype filter ``wanted`` names dtypes kexp knows, each whole (``bf16``,
    ``torch.float16``, ``bf16,fp8``: :data:`DTYPE_SPELLINGS`), so that it reads their
    whole names alone; other text (``fp``) is a part of the value, as every filter is."""
    names = re.split(r"[^a-z0-9_-]+", spelled("dtype_sig", wanted))
    return any(names) and all(name in DTYPE_SPELLINGS for name in names if name)


def distinct(rows: Sequence[Row], column: str) -> list[tuple[str, str, int]]:
    """(value in the case kexp tells values apart by (:func:`folded`: an operator's own,
    ``k.py:Gemm`` is not ``k.py:gemm``; a dtype's or env's lowercased), its most common
    spelling, how many experiments) of a text column (``operator_sig``, ``dtype_sig``,
    ``env``) over ``rows``, most common first."""
    counts: dict[str, int] = {}
    for row in rows:
        spelling = getattr(row, column)
        counts[spelling] = counts.get(spelling, 0) + 1
    totals: dict[str, int] = {}
    spellings: dict[str, tuple[int, str]] = {}
    for spelling, count in counts.items():
        key = folded(column, spelling)
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
    ``operator`` first (:func:`closest`)."""
    return closest(rows, "operator_sig", operator)


def closest(rows: Sequence[Row], column: str, value: str) -> list[tuple[str, str, int]]:
    """The values of ``column`` recorded in ``rows`` (as :func:`distinct`), the closest
    to ``value`` first: the most of its words (by length) found in them, then the most
    trigrams shared, then the most experiments, then by name."""
    words = re.findall(r"[a-z0-9]+", value.lower())
    wanted = trigrams(value)

    def closeness(known: tuple[str, str, int]) -> tuple[int, float, int, str]:
        key, _, count = known
        theirs = trigrams(key)
        shared = len(wanted & theirs) / len(wanted | theirs) if wanted | theirs else 0.0
        lowered = key.lower()  # an operator's key keeps its case; closeness does not
        return (-sum(len(w) for w in words if w in lowered), -round(shared, 9), -count, key)

    return sorted(distinct(rows, column), key=closeness)


def unmatched_operator(rows: Sequence[Row], operator: str) -> str | None:
    """What to say of an operator filter (a part of ``operator_sig``, in any case) that
    matches no experiment of ``rows`` (every one a read sees, whatever its other
    filters): that none does, and the closest recorded; None when one matches, or
    nothing is recorded."""
    if not rows or any(part_of("operator_sig", operator, row.operator_sig) for row in rows):
        return None
    known = closest_operators(rows, operator)
    named = ", ".join(repr(shown) for _, shown, _ in known[:NAMED])
    return (
        f"no recorded operator matches {operator!r} (a part of operator_sig, in any case), "
        f"so nothing was found for it; the closest of the {len(known)} recorded: {named}; "
        "give one of them, or a part of it, as the operator"
    )


def matching(rows: Sequence[Row], column: str, wanted: str) -> list[tuple[str, str, int]]:
    """The values of ``column`` in ``rows`` (as :func:`distinct`) that ``wanted`` is a
    part of (:func:`part_of`). Of several, the one ``wanted`` names exactly, alone (with
    its other spellings: ``bf16`` and ``bfloat16``): the whole value (``bf16``, not
    ``bf16,fp8``), else one of its parts split at ``,``, ``:`` and ``/`` (``H100 SXM5
    80GB`` of ``H100 SXM5 80GB, CUDA 12.4``; ``gemm_bf16`` of ``kernels/gemm.cu:
    gemm_bf16``, not of ``...: batched_gemm_bf16``). Several left: the filter mixes them."""
    found = [item for item in distinct(rows, column) if part_of(column, wanted, item[0])]
    if len(found) < 2:
        return found
    mine = spelled(column, wanted)
    whole = [item for item in found if spelled(column, item[0]) == mine]
    part = [item for item in found if mine in re.split(r"[,:/]", spelled(column, item[0]))]
    for exact in (whole, part):
        if len({spelled(column, key) for key, _, _ in exact}) == 1:
            return exact
    return found


def read_alone(rows: Sequence[Row], column: str, wanted: str) -> tuple[set[str], str | None]:
    """The values of ``column`` (:func:`folded`) a filter ``wanted`` reads, as ``kexp
    context`` reads it (:func:`matching`: the one it names exactly, alone, else every
    one it is a part of), and a line naming those it is a part of but did not read
    (None when it read them all)."""
    found = distinct(rows, column)
    read = matching(rows, column, wanted)
    keys = {key for key, _, _ in read}
    others = [shown for key, shown, _ in found if key not in keys and part_of(column, wanted, key)]
    if not others:
        return keys, None
    name = {"operator_sig": "operator", "dtype_sig": "dtype"}.get(column, column)
    shown = ", ".join(repr(other) for other in others[:NAMED])
    more = f" and {len(others) - NAMED} more" if len(others) > NAMED else ""
    return keys, (
        f"{name} {read[0][1]!r} read alone, the value recorded exactly; "
        f"it is also a part of {shown}{more}, not read: give one of them as the {name} "
        "to read it"
    )


#: The column each filter of a value is a part of.
COLUMNS = {"dtype": "dtype_sig", "env": "env"}


def named_closest(rows: Sequence[Row], name: str, value: str) -> tuple[int, str]:
    """How many values of the filter ``name`` (``dtype``, ``env``) ``rows`` hold, and
    the closest to ``value`` (:data:`NAMED` of them), each with how many experiments
    (controls too) were recorded with it: ``'MI300X' (3 recorded)``."""
    known = closest(rows, COLUMNS[name], value)
    named = ", ".join(f"{shown!r} ({count} recorded)" for _, shown, count in known[:NAMED])
    return len(known), named


def matched_as(column: str, wanted: str) -> tuple[str, str]:
    """How a filter ``wanted`` of ``column`` reads a value (:func:`part_of`), and what of
    a value to give it: a part, in any case; a dtype kexp names, its whole names."""
    if column == "dtype_sig" and names_dtypes(wanted):
        return "a whole dtype name in dtype_sig, in any spelling", "one of its names"
    return f"a part of {column}, in any case", "a part of it"


def unmatched_value(
    rows: Sequence[Row], name: str, value: str, operator: str | None = None
) -> str | None:
    """What to say of a ``dtype`` or ``env`` filter (``name``; read as :func:`part_of`
    says) that matches none of ``rows``: the operator's experiments when
    ``operator`` is given (it matches some), else every one a read sees. That none
    does, and the closest recorded; None when one matches, or ``rows`` is empty."""
    column = COLUMNS[name]
    if not rows or any(part_of(column, value, getattr(row, column)) for row in rows):
        return None
    count, named = named_closest(rows, name, value)
    where = f"on operator {operator!r} has" if operator else "recorded has"
    how, part = matched_as(column, value)
    return (
        f"no experiment {where} {_article(name)} {name} matching {value!r} ({how}), so "
        f"nothing was found for it; the closest of the {count} {name}(s) recorded"
        f"{' for it' if operator else ''}: {named}; give one of them, or {part}, as the "
        f"{name}"
    )


def _article(name: str) -> str:
    return "an" if name[:1] in "aeiou" else "a"
