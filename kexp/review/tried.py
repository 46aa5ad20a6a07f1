"""Tried before, for the reviewer: the experiments of the base side whose code change an
added experiment repeats (the same once normalised, or a near-duplicate), asked as
``kexp add`` asks it (:func:`kexp.storage.repeats.repeats_in`) of the base branch's tip,
with why each was retired and whether it is a dead end there."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from kexp.review.model import TriedBefore
from kexp.storage.repeats import repeats_in
from kexp.storage.retrieval import asked, searching

if TYPE_CHECKING:
    from kexp.core.model import KernelExperiment
    from kexp.review.entry import Reviewed
    from kexp.review.side import Side
    from kexp.storage.dedupe import Repeat
    from kexp.storage.store import Store


def mark_tried_before(store: Store, tip: str, added: Sequence[Reviewed], then: Side) -> None:
    """Set ``tried_before`` of each added entry whose code change the store at ``tip``
    (the base side, ``then``) holds already: one index read for them all."""
    wanted = [(entry, exp) for entry, exp in added if exp is not None and exp.code_change]
    if not wanted or not then.facts:  # no experiment on the base side (no store, maybe)
        return
    base = store.at(tip)

    def ask() -> list[list[Repeat]]:
        with searching(base, texts=False) as search:
            return [
                repeats_in(search, base, exp.code_change, exclude=[exp.id]) for _, exp in wanted
            ]

    for (entry, _), repeats in zip(wanted, asked(base, ask), strict=True):
        entry.tried_before = [_tried(repeat, then.get(repeat.id), then) for repeat in repeats]


def _tried(repeat: Repeat, exp: KernelExperiment | None, then: Side) -> TriedBefore:
    return TriedBefore(
        repeat.id,
        repeat.outcome,
        repeat.change_summary,
        identical=repeat.identical,
        similarity=repeat.similarity,
        retired=repeat.retired,
        dead_end=exp is not None and then.dead_end(exp),
    )
