"""Unmerged versions ranked in a read across refs, and what rests on them.

A read across refs (:mod:`kexp.storage.refs`) ranks each experiment's newest version:
an edit made on a side branch after it forked (a remeasure an agent synced to its
branch, a score a pull request corrects) is newer than what the working tree or the
remote's default branch holds, and is ranked, so that what others recorded is seen
before their pull requests merge. Such a version is *unmerged*: the side branch's
alone, not yet reviewed. So that nobody mistakes it for main's, every row it touches
says so: the experiment itself (its ``ref`` names the side branch), every one whose
cumulative score builds on it along the lineage (its own file may well be ``local``),
and every one whose outcome is judged over such a score (a step measured against the
reference, judged over its parent's cumulative score), each with its numbers as the
working tree or default branch holds them (the truth before that pull request), in
:class:`kexp.storage.rows.Unmerged`.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Mapping, Sequence

from kexp.core.campaign import code_depends_on, depends_on, derive_for
from kexp.core.settings import Settings
from kexp.storage.rows import LOCAL, Row, Seen, Unmerged
from kexp.storage.versions import Version


def displaced(
    chosen: Mapping[str, tuple[list[tuple[str, bytes]], Seen]],
    several: Mapping[str, Sequence[Version]],
    places: Sequence[str],
    defaults: Collection[int],
) -> dict[str, tuple[str, bytes, str]]:
    """The experiments whose chosen version is a side branch's while the working tree
    or a default branch holds another one: id → (path, content key, place) of that
    other version (the working tree's first, else a default branch's)."""
    settled = {LOCAL, *(places[p] for p in defaults)}
    found: dict[str, tuple[str, bytes, str]] = {}
    for exp_id, (_, seen) in chosen.items():
        if settled.intersection(seen.refs) or not settled.intersection(seen.other_versions):
            continue
        held = [
            (min(where, key=lambda p: (p != 0, p)), path, key)
            for path, key, where in several.get(exp_id, ())
            if any(p == 0 or p in defaults for p in where)
        ]
        if held:
            place, path, key = min(held, key=lambda item: (item[0] != 0, item[0]))
            found[exp_id] = (path, key, places[place])
    return found


def marked(
    rows: Sequence[Row],
    instead: Mapping[str, tuple[Row, str]],
    settings: Settings,
) -> list[Row]:
    """``rows`` with each one an unmerged version touches marked (its ``where``'s
    ``unmerged``): the unmerged one itself, those whose cumulative score builds on it,
    and those whose outcome is judged over such a score. ``instead``: each unmerged
    experiment's id → the row of the version the working tree or default branch holds,
    and that place."""
    by_id = {row.id: row for row in reversed(rows)}  # the first row of an id counts
    # An experiment whose newest version is invalid has no row (the read warned of it):
    # nothing rests on a version the rows do not hold.
    instead = {exp_id: held for exp_id, held in instead.items() if exp_id in by_id}
    if not instead:
        return list(rows)
    dependents: dict[str, list[str]] = {}
    for row in rows:
        for parent in depends_on(row):  # what a row's values or outcome are judged over
            dependents.setdefault(parent, []).append(row.id)
    touched: set[str] = set()
    waiting = list(instead)
    while waiting:
        exp_id = waiting.pop()
        if exp_id not in touched:
            touched.add(exp_id)
            waiting += dependents.get(exp_id, ())
    settled = [instead[row.id][0] if row.id in instead else row for row in rows]
    wanted = [instead[exp_id][0] if exp_id in instead else by_id[exp_id] for exp_id in touched]
    derivation = derive_for(settled, wanted, settings)
    settled_by_id = {row.id: row for row in reversed(settled)}
    marks: dict[str, Unmerged] = {}
    for exp_id in touched:
        on = _resting_on(exp_id, by_id.get, instead)
        if not on:
            continue
        mine = settled_by_id[exp_id]
        place = instead[exp_id][1] if exp_id in instead else instead[on[0]][1]
        refs = tuple(dict.fromkeys(r for i in on for r in _side_refs(by_id[i])))
        marks[exp_id] = Unmerged(
            exp_id in instead,
            refs,
            place,
            mine.score,
            derivation.of(mine).cumulative_score,
        )
    return [
        row._replace(where=row.where._replace(unmerged=marks[row.id]))
        if row.id in marks and row.where is not None and by_id[row.id] is row
        else row
        for row in rows
    ]


def _resting_on(
    exp_id: str, row_of: Callable[[str], Row | None], instead: Mapping[str, object]
) -> list[str]:
    """The unmerged experiments (of ``instead``) the cumulative score of ``exp_id``
    builds on, or its outcome is judged over, itself included, nearest first."""
    found: list[str] = []
    seen: set[str] = set()
    waiting = [exp_id]
    while waiting:
        current = waiting.pop(0)
        if current in seen:
            continue
        seen.add(current)
        if current in instead:
            found.append(current)
        row = row_of(current)
        if row is not None:  # its own outcome: what it is judged over; beyond: values
            waiting += depends_on(row) if current == exp_id else code_depends_on(row)
    return found


def _side_refs(row: Row) -> tuple[str, ...]:
    """The refs holding an unmerged row's version (the side branches)."""
    return row.where.refs if row.where is not None else ()
