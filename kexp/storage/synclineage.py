"""Which experiment files a sync publishes for their lineage: a step whose parent (its
``pid``, or an experiment it ``combines``) another branch of the remote holds takes a
copy of that parent with it, so that what it publishes is whole where it lands."""

from __future__ import annotations

import os
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from kexp.storage.snapshot import StoreLocation


def left_out(location: StoreLocation, held: set[str], present: list[str]) -> set[str]:
    """Of ``held`` (the files among ``present`` a remote branch holds alike: no news),
    those a side branch leaves out: not the lineage of the files it publishes
    (:func:`lineage_among`): the branch would publish a step whose parent it lacks, so
    takes a copy of the files the branch holding them has (its pull request lands after
    that one's)."""
    return held - lineage_among(location, held, present)


def lineage_among(location: StoreLocation, held: set[str], present: list[str]) -> set[str]:
    """The files of ``held`` that the other files of ``present`` build on (``pid``,
    ``combines``, followed through ``held``)."""
    from kexp.format.fileformat import named_parents
    from kexp.format.rules import id_from_name

    by_id = {id_from_name(os.path.basename(path)): path for path in held}
    needed: set[str] = set()
    wanted = [path for path in present if path not in held]
    while wanted:
        path = wanted.pop()
        if id_from_name(os.path.basename(path)) is None:
            continue  # the store's README
        try:
            data = (location.toplevel / path).read_bytes()
        except OSError:
            continue  # (refused by the validation of what is published)
        for parent in named_parents(data):
            found = by_id.get(parent)
            if found is not None and found not in needed:
                needed.add(found)
                wanted.append(found)
    return needed
