"""The store's A/A controls (tag ``control``): what a read of one step needs of the
whole store, for the control of its env may judge it
(:func:`kexp.core.campaign.judged_by_control`).

Of the working tree, through the cache: only the folders whose front-matter may name
``control`` are read (:meth:`kexp.storage.listing.Listing.rows_naming`, as a delete finds
what names its id), and the rows found are kept as the answer of the listing's
generation (:mod:`kexp.storage.answers`): the next read of an unchanged store ``stat``\\ s
the files and reads none of them. Of a store read without cache or across refs: of
every row.
"""

from __future__ import annotations

import warnings
from typing import TYPE_CHECKING

from kexp.core.errors import InvalidExperimentWarning
from kexp.core.outcome import CONTROL_TAG, is_control
from kexp.storage.answers import answer_name, held_whole, keep_whole, waiting_answer
from kexp.storage.rows import Row
from kexp.storage.sources import Found

if TYPE_CHECKING:
    from kexp.storage.cache import Cache
    from kexp.storage.view import StoreView

#: The question the controls' rows are kept under (:func:`kexp.storage.answers.answer_name`).
CONTROLS_QUESTION = ("control rows",)


def control_rows(store: StoreView) -> list[Row]:
    """The rows of the store's controls, in path order (see the module documentation)."""
    if not store.source.cacheable or store.source.places is not None:
        with warnings.catch_warnings():  # the others' problems are not this read's
            warnings.simplefilter("ignore", InvalidExperimentWarning)
            return [row for row in store.found().rows if is_control(row)]
    # lazy: what a read of one experiment needs only for a change it judges
    from kexp.storage.cache import rebuilt_on_doubt
    from kexp.storage.listing import refresh

    def naming(cache: Cache) -> list[Row]:
        waiting = waiting_answer(cache, CONTROLS_QUESTION, ())
        listing = refresh(cache, store.experiments_dir, store.settings, rows=False)
        held = None if waiting is None else held_whole(waiting, listing)
        if held is not None:
            return [Row._make(values) for values in held.value]
        rows = [row for row in listing.rows_naming(CONTROL_TAG) if is_control(row)]
        none: list[Row] = []
        found = Found(none, [], none, listing)
        name = answer_name(found, CONTROLS_QUESTION)
        if name is not None:
            keep_whole(cache, name, [tuple(row) for row in rows], found)
        return rows

    cache = store.open_cache()
    try:
        cache, rows = rebuilt_on_doubt(cache, naming)
    finally:
        cache.close()
    return rows
