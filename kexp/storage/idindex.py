"""A store's experiment ids and their files, from the file names alone: in the working
tree through the cache's folder listings (:func:`kexp.storage.listing.find_folders`:
only the folders whose own signature changed are listed again); at a revision from its
paths. What :meth:`kexp.storage.reader.StoreReader.id_index`, the id lookups built on it
(:mod:`kexp.storage.idlookup`) and a write's checks ask.
"""

from __future__ import annotations

import contextlib
from collections import Counter
from pathlib import Path
from typing import TYPE_CHECKING

from kexp.core.advice import RE_ID
from kexp.core.ids import ID_LENGTH
from kexp.core.problems import display_path
from kexp.format.rules import id_from_name
from kexp.storage.location import CACHE_DIR

if TYPE_CHECKING:
    from collections.abc import Callable

    from kexp.storage.cache import Cache
    from kexp.storage.listing import Listing
    from kexp.storage.view import StoreView


def id_finder(store: StoreView, only: str = "") -> Callable[[str], dict[str, list[Path]]]:
    """A function from an id prefix to the ids starting with it and their files (in
    path order), which looks at the store once: through the cache's folder listings
    (only folders whose own signature changed are listed again; names starting with
    ``only``, what every id asked for starts with). A write asks it for the few ids
    it names."""
    if not store.is_working_tree:
        every: dict[str, list[Path]] = {}
        for path in store.paths():
            exp_id = id_from_name(path)
            assert exp_id is not None
            every.setdefault(exp_id, []).append(path)
        return lambda prefix: {k: v for k, v in every.items() if k.startswith(prefix)}
    from kexp.storage.cachefile import file_name
    from kexp.storage.listing import find_folders, names_starting

    made = (store.root / CACHE_DIR / file_name(store.settings)).is_file()
    cache = store.open_cache() if store.source.cacheable and made else None  # none made
    try:
        folders = find_folders(cache, store.experiments_dir, only)
    finally:
        if cache is not None:
            cache.close()

    def index(prefix: str) -> dict[str, list[Path]]:
        # A file's name starts with its id: only the names starting with the prefix
        # are looked at (a write asks for a few ids of a large store).
        by_id: dict[str, list[Path]] = {}
        for folder, names in folders:
            for name in names_starting(names, prefix):
                exp_id = id_from_name(name)
                if exp_id is not None and exp_id.startswith(prefix):
                    by_id.setdefault(exp_id, []).append(Path(folder, name))
        for paths in by_id.values():
            paths.sort()
        return by_id

    return index


#: The cache's object holding the listing generation
#: (:attr:`kexp.storage.listing.Listing.generation`, a token every save of the listing
#: changes) whose ids were last found each held by one file: a read of that listing
#: again (a question asked twice of a store nobody changed) counts none of them.
HELD_ONCE = "ids-held-once"


def held_twice(listing: Listing, experiments_dir: Path, cache: Cache | None = None) -> str | None:
    """The warning, on one line, of the ids several files of the working tree's
    ``listing`` hold (by their names: a copied file keeps its id), which every read lists
    as many times; None when each id is one file's (most stores: one pass over the ids).
    With the ``cache`` the listing was read from, a listing found at the generation the
    cache found every id held once at is not counted again (the same names), and one
    so found is noted there (if the cache takes the write at once)."""
    generation = listing.generation or None  # None: not the cache's listing as it is
    if cache is None or generation is None:
        return _held_twice(listing, experiments_dir)
    if cache.objects([HELD_ONCE]).get(HELD_ONCE) == generation:
        return None
    said = _held_twice(listing, experiments_dir)
    if said is None:
        from kexp.storage.cachefile import DamagedCacheError  # lazy: as the reader opens it

        with contextlib.suppress(DamagedCacheError):  # else not kept: counted again next time
            cache.save_objects({HELD_ONCE: generation}, at_once=True)
    return said


def _held_twice(listing: Listing, experiments_dir: Path) -> str | None:
    """The warning, on one line, of the ids several files of the working tree's
    ``listing`` hold (by their names: a copied file keeps its id), which every read lists
    as many times; None when each id is one file's (most stores: one pass over the ids)."""
    ids = listing.ids()
    if len(set(ids)) == len(ids):
        return None
    shared = sorted(exp_id for exp_id, count in Counter(ids).items() if count > 1)
    first = shared[0]
    paths = [
        display_path(experiments_dir / path)
        for path, _ in listing.files()
        if Path(path).name[:ID_LENGTH] == first
    ]
    more = f" (and {len(shared) - 1} more id(s) so held)" if len(shared) > 1 else ""
    return (
        f"id {first} is held by {len(paths)} files ({', '.join(paths)}){more}: reads list "
        "each of them; keep the id on the experiment that had it first and give the copy "
        f"a new one ({RE_ID.say(path='PATH')}, PATH the copy's file; kexp validate lists "
        "every file so held)"
    )
