"""``kexp log`` across refs: an experiment's history as the checkout's ``HEAD`` has it,
then the commits other refs hold that it lacks (a teammate's correction published to a
side branch or to the remote's main and fetched), each with the refs holding it; and,
for the history of ``HEAD`` alone, a warning naming the refs that hold such commits."""

from __future__ import annotations

import dataclasses
import warnings
from typing import TYPE_CHECKING

from kexp.core.advice import LOG_ALL_REFS
from kexp.core.errors import ExperimentNotFoundError, KexpWarning
from kexp.format.rules import id_from_name
from kexp.gitops import git as kgit
from kexp.gitops import log as gitlog
from kexp.storage.history import HistoryEntry, history
from kexp.storage.snapshot import StoreLocation

if TYPE_CHECKING:
    from kexp.storage.view import StoreView


def experiment_log(
    store: StoreView, exp_id: str, *, revision: str | None = None
) -> list[HistoryEntry]:
    """Every commit that touched experiment ``exp_id``'s file, oldest first (``kexp
    log``): on a store reading refs (``refs``, ``all_refs``), :func:`history_across`;
    else the history of ``revision`` (default ``HEAD``), and without a ``revision`` a
    :class:`~kexp.core.errors.KexpWarning` naming the branches and remote-tracking
    branches that hold commits of it ``HEAD`` lacks (a newer version)."""
    entries: list[HistoryEntry] = store.history(exp_id, revision=revision)
    if getattr(store.source, "places", None) is not None:
        return entries
    if revision is None and entries:
        full_id = id_from_name(entries[-1].path)
        location = StoreLocation.of(store.root)
        if full_id is not None:
            head = kgit.resolve_commit(location.repo, "HEAD")
            specs = gitlog.id_pathspecs(location.folder, full_id)
            beyond = gitlog.commits_beyond(location.repo, head, None, specs)
            held = sorted({_short(ref) for ref in beyond.values()})
            if held:
                warnings.warn(
                    f"{', '.join(held)} hold{'s' if len(held) == 1 else ''} {len(beyond)} "
                    f"commit(s) of {full_id} that HEAD lacks ({_what(store, full_id, held)}); "
                    f"{LOG_ALL_REFS.say(id=full_id[:10])}",
                    KexpWarning,
                    stacklevel=2,
                )
    return entries


def history_across(store: StoreView, exp_id: str) -> list[HistoryEntry]:
    """The history of experiment ``exp_id`` (an id or unique prefix, across the refs
    ``store`` reads) as ``HEAD`` has it, then each commit that touched its file which
    one of those refs holds and ``HEAD`` lacks, oldest first along each ref, with the
    refs holding it (``refs``): what each changed, old → new, against that ref's
    version before."""
    location = StoreLocation.of(store.root)
    repo = location.repo
    head = kgit.resolve_commit(repo, "HEAD")
    try:
        local = history(store, exp_id)
    except ExperimentNotFoundError:
        local = []
    full_id = id_from_name(local[-1].path) if local else None
    if full_id is None:
        full_id = store.resolve_id(exp_id)  # (only on a ref: its history is there)
    refs = list(getattr(store.source, "refs", ()))
    specs = gitlog.id_pathspecs(location.folder, full_id)
    beyond = gitlog.commits_beyond(repo, head, [ref.name for ref in refs], specs)
    reached = set(beyond.values())
    seen = {entry.commit for entry in local}
    found: dict[str, HistoryEntry] = {}
    for ref in refs:
        if ref.name not in reached:
            continue
        for entry in history(store, full_id, revision=ref.commit):
            if entry.commit in seen:
                continue
            kept = found.setdefault(entry.commit, entry)
            found[entry.commit] = dataclasses.replace(kept, refs=(*kept.refs, ref.short))
    return local + list(found.values())


def _what(store: StoreView, full_id: str, held: list[str]) -> str:
    """What the refs ``held`` (short names) hold of experiment ``full_id`` that ``HEAD``
    lacks: a newer version, or its removal (the ref's last commit of it deletes it)."""
    removing = [ref for ref in held if _removes(store, full_id, ref)]
    if not removing:
        return "a newer version: a correction published there"
    said = f"{', '.join(removing)} remove{'s' if len(removing) == 1 else ''} it, not merged here"
    return said if len(removing) == len(held) else f"a newer version elsewhere; {said}"


def _removes(store: StoreView, full_id: str, ref: str) -> bool:
    """Whether ``ref``'s last commit of experiment ``full_id`` removes its file."""
    try:
        entries = history(store, full_id, revision=ref)
    except ExperimentNotFoundError:
        return False
    return bool(entries) and entries[-1].action == "deleted"


def _short(ref: str) -> str:
    """A full ref name as git abbreviates a branch's (``origin/kexp/bob``)."""
    for prefix in ("refs/remotes/", "refs/heads/"):
        if ref.startswith(prefix):
            return ref[len(prefix) :]
    return ref
