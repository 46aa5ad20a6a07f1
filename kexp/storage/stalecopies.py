"""What ``kexp sync --branch`` takes into the working tree from the side branch, holding
the experiments' locks (as ``kexp update`` writes): its own publications corrected there
(:func:`take_in_locked`, around :mod:`kexp.storage.takenin`), and an experiment file
this clone did not publish, brought in by hand from the branch (``git restore
--source``, as kexp advises), which the branch has corrected since
(:func:`take_in_stale`).

Such a copy is an earlier version of the branch's file, byte for byte (its blob is in
the history of that path on the branch), untracked by the checkout: left as it is, the
next sync would commit it over the correction. It is replaced with the branch's version
(checked again under the lock), so that the next edit is made on it. A file edited here
since is a new version, never touched."""

from __future__ import annotations

import contextlib
import os
from typing import TYPE_CHECKING

from kexp.format.rules import id_from_name
from kexp.gitops import commits as gitcommits
from kexp.gitops import divergence as gitdivergence
from kexp.gitops import git as kgit
from kexp.gitops import objects as gitobjects
from kexp.storage import atomic
from kexp.storage.rows import content_key
from kexp.storage.takenin import take_in

if TYPE_CHECKING:
    from kexp.storage.snapshot import StoreLocation
    from kexp.storage.store import Store


def take_in_stale(
    store: Store,
    location: StoreLocation,
    tip: str | None,
    head: str | None,
    *,
    dry_run: bool = False,
) -> list[str]:
    """Replace the working tree's stale copies of ``tip``'s experiment files (see the
    module's description; ``head``: the checkout's commit, whose files are not copies)
    with ``tip``'s versions; the files replaced (a dry run: those it would replace,
    nothing written)."""
    if tip is None:
        return []
    repo, top = location.repo, location.toplevel
    entries = {
        e.path: e.sha
        for e in kgit.list_tree(repo, tip, location.folder)
        if location.is_experiment(e.path) and os.path.isfile(top / e.path)
    }
    tracked = gitcommits.path_blobs(repo, head, list(entries)) if head else {}
    loose = [p for p in entries if p not in tracked]  # (untracked: brought in by hand)
    alike = gitdivergence.held_files(repo, loose, [tip])
    differing = [p for p in loose if p not in alike]
    if not differing:
        return []
    history = gitobjects.path_history_blobs(repo, tip, differing)
    stale = {p: here for p in differing if (here := _blob(top / p)) in history}
    if not stale or dry_run:
        return sorted(stale)
    contents = dict(kgit.iter_blobs(repo, [entries[p] for p in stale]))
    taken: list[str] = []
    with contextlib.ExitStack() as held:
        for exp_id in sorted({i for p in stale if (i := id_from_name(p)) is not None}):
            held.enter_context(store.lock(exp_id))
        for path, here in sorted(stale.items()):
            data = contents.get(entries[path])
            if data is not None and _blob(top / path) == here:  # (unchanged meanwhile)
                atomic.replace(top / path, data)
                taken.append(path)
    return taken


def _blob(path: os.PathLike[str]) -> str:
    try:
        with open(path, "rb") as handle:
            return content_key(handle.read()).hex()
    except OSError:
        return ""


def take_in_locked(
    store: Store,
    location: StoreLocation,
    remote: str,
    target: str,
    tip: str | None,
    local: str | None = None,
    *,
    stop: bool = True,
    rewritten: bool = False,
) -> list[str]:
    """:func:`kexp.storage.takenin.take_in`, holding the lock of each experiment it
    takes in (found first, as a dry run finds them) as ``kexp update`` does: an agent's
    correction made meanwhile is either applied before (then the file is no longer as
    this clone published it: not taken in, the clash said) or after it, never lost."""
    found = take_in(
        location, remote, target, tip, local, dry_run=True, stop=stop, rewritten=rewritten
    )
    with contextlib.ExitStack() as held:
        for exp_id in sorted({i for p in found if (i := id_from_name(p)) is not None}):
            held.enter_context(store.lock(exp_id))
        return take_in(location, remote, target, tip, local, stop=stop, rewritten=rewritten)
