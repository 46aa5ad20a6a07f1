"""Which experiment an id or an id prefix names: its one file in the working tree (or
the revision), for a read or a write (:func:`find_file`), its full id among those a read
found (across refs too, :func:`id_among`), and the ids a write's ``pid`` and
``combines`` name (:func:`resolve_references`). Built on the ids of the file names
(:mod:`kexp.storage.idindex`); what :class:`kexp.storage.reader.StoreReader` answers.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from kexp.core import ids
from kexp.core.advice import ALL_REFS_IDS, LIST_SHOWS
from kexp.core.errors import ExperimentNotFoundError
from kexp.storage.movedtwins import used_twice

if TYPE_CHECKING:
    from kexp.storage.sources import Found
    from kexp.storage.view import StoreView


def find_file(
    store: StoreView,
    id_or_prefix: str,
    held: Mapping[str, Path],
    *,
    writing: bool = False,
    removing: bool = False,
) -> tuple[str, Path]:
    """The full id and the file of the one experiment of the working tree (or the
    revision) whose id starts with ``id_or_prefix``; ``held``: the files of the ids whose
    write lock the store holds, each found once under the lock
    (:meth:`kexp.storage.reader.StoreReader.holding`). ``writing`` (a write names it:
    it must be in the working tree): one only on refs is an error saying where it is
    and how to bring it in (:func:`kexp.storage.whereabouts.not_in_working_tree`; ``removing``:
    for a removal, which one made here already answers)."""
    held_file = held.get(id_or_prefix)
    if held_file is not None and (store.experiments_dir / held_file).is_file():
        return id_or_prefix, held_file
    prefix = ids.check_prefix(id_or_prefix, store.settings.min_id_prefix)
    index = store.id_index(prefix)
    try:
        exp_id = ids.the_one(prefix, index, f"{store.experiments_dir} ({LIST_SHOWS} the ids)")
    except ExperimentNotFoundError as error:
        if not writing:
            raise store.not_found_here(prefix, error) from None
        from kexp.storage.whereabouts import not_in_working_tree

        raise not_in_working_tree(store, prefix, error, removing=removing) from None
    paths = index[exp_id]
    if len(paths) > 1:
        raise used_twice(exp_id, [str(p) for p in paths], store.root)
    return exp_id, paths[0]


def id_among(store: StoreView, prefix: str, found: Found) -> str:
    """The full id of the one experiment whose id starts with ``prefix`` (checked) among
    those ``found`` by a read of ``store`` (in any place it reads); across refs, one whose
    newest state is its removal is said so."""
    places = store.source.places
    where = ", ".join(places) if places else str(store.experiments_dir)
    hint = ALL_REFS_IDS if places else f"{LIST_SHOWS} the ids"
    try:
        return ids.the_one(prefix, found.held_ids(), f"{where} ({hint})")
    except ExperimentNotFoundError as error:
        if places is None:
            raise store.not_found_here(prefix, error) from None
        gone = [(exp_id, by) for exp_id, by in found.removed if exp_id.startswith(prefix)]
        if len(gone) != 1:
            raise
        from kexp.storage.refs import removed_message

        raise ExperimentNotFoundError(removed_message(*gone[0], store)) from None


def resolve_references(
    store: StoreView, fields: Mapping[str, Any], held: Mapping[str, Path]
) -> dict[str, Any]:
    """``fields`` with id prefixes in ``pid`` and ``combines`` expanded to full ids of the
    working tree's experiments (:func:`find_file` for a write; ``held`` as there)."""
    resolved = dict(fields)
    pid = resolved.get("pid")
    if isinstance(pid, str) and pid.strip():
        resolved["pid"] = find_file(store, pid.strip(), held, writing=True)[0]
    combines = resolved.get("combines")
    if isinstance(combines, list):
        resolved["combines"] = [
            find_file(store, c, held, writing=True)[0] if isinstance(c, str) and c.strip() else c
            for c in combines
        ]
    return resolved
