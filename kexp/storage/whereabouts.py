"""Where an experiment a write names is when the working tree lacks it (a branch, a
remote-tracking branch), and what brings it in: the sync that merges the checkout's own
branch, or its file copied from another agent's side branch (never a merge of that
branch's other work); for a removal made here already, the sync that publishes it.
Asked of git alone (one ``git ls-tree`` per commit), so that a refused write writes
nothing, not even the cache."""

from __future__ import annotations

import os
import shlex
from pathlib import Path
from typing import TYPE_CHECKING, Any

from kexp.core.advice import MERGE_SYNCED, SYNC_MERGES
from kexp.core.errors import KexpError
from kexp.format.fileformat import named_parents
from kexp.format.rules import id_from_name
from kexp.gitops import git as kgit
from kexp.gitops import objects as gitobjects

if TYPE_CHECKING:
    from kexp.gitops.objects import RefInfo


def not_in_working_tree(
    store: Any, prefix: str, error: KexpError, *, removing: bool = False
) -> KexpError:
    """``error`` (no experiment ``prefix`` names in the working tree, where a write's
    ``pid``, ``combines`` and target must be) saying which refs hold it and the merge
    that brings it in (``removing``: a ``kexp rm`` of it, which a removal made here
    already answers); ``error`` itself when no ref does. ``store``: a
    :class:`kexp.storage.store.Store` of the working tree."""
    found = elsewhere(store, prefix, removing=removing)
    if found is None:
        return error
    named = prefix if len(prefix) == 16 else f"{prefix}..."
    needs = (
        ""
        if removing and ("publishes the removal" in found or "to remove it" in found)
        else f" (a write needs the experiments it names in {store.experiments_dir})"
    )
    return type(error)(f"experiment {named} is {found}{needs}")


def elsewhere(store: Any, id_or_prefix: str, *, removing: bool = False) -> str | None:
    """Where the experiment ``id_or_prefix`` names is when the working tree does not
    hold it, and how a write naming it can go on: on the checkout's own branch on the
    remote, ``on origin/main, not in your working tree: merge it in first (kexp sync,
    which merges origin/main) and run this again`` (``git merge`` refuses while files a
    side branch published are untracked here, alike on it); on another agent's side
    branch, ``on origin/kexp/alice, not in your working tree: copy its file in first, not
    that branch's other work (git restore --source origin/kexp/alice -- experiments/...)
    and run this again`` (:func:`bring_in`); None when no ref holds it.
    ``removing`` (a ``kexp rm`` of it): when the checked-out branch holds it (its file
    deleted here) or a branch of this clone (a side branch it published to), the removal
    is made already, and the sync that publishes it is named, never a merge (which would
    bring nothing back, or the side branch into the checkout)."""
    repo = kgit.find_repo(store.root) if store.is_working_tree else None
    found = _branches_holding(repo, store.experiments_dir, id_or_prefix) if repo else []
    if repo is None or not found:
        return None
    from kexp.gitops.commits import current_branch

    branch = current_branch(repo)
    refs = [ref.short for ref in found]
    shown = ", ".join(refs[:3]) + (f" and {len(refs) - 3} more" if len(refs) > 3 else "")
    mine = [ref.short for ref in found if ref.name.startswith("refs/heads/")]
    if branch is not None and branch in mine:  # tracked here: its file is deleted
        if removing:
            return (
                f"removed from your working tree already (git status shows its file "
                f"deleted; it is on {shown}): kexp sync publishes the removal"
            )
        return (
            f"on {shown}, not in your working tree (git status shows its file deleted): "
            "restore it and run this again"
        )
    if removing and mine:
        noted = [name for name in mine if _removal_noted(repo, name, id_or_prefix)]
        if noted:
            return (
                f"on {shown}, not in your working tree: removed here already; kexp sync "
                f"--branch {noted[0]} publishes the removal of what this clone published there"
            )
        command, _ = _restore(repo, store, id_or_prefix, found, branch)
        return (
            f"on {shown}, not in your working tree (the checkout is at a commit without "
            f"it, or it was deleted by hand): to remove it, bring its file back first "
            f"({command}) and run this again"
        )
    # The checkout's own branch on the remote first (what kexp sync merges), before
    # another agent's side branch that holds it too (merging that brings its work in).
    upstream = f"origin/{branch}" if branch else None
    if upstream in refs:  # what kexp sync merges
        return f"on {shown}, not in your working tree: {MERGE_SYNCED.say(ref=upstream)}"
    command, taken = _restore(repo, store, id_or_prefix, found, branch)
    lineage = f" with the {taken} it builds on that you lack," if taken else ""
    return (
        f"on {shown}, not in your working tree: copy its file in first,{lineage} not that "
        f"branch's other work ({command}) and run this again"
    )


def bring_in(store: Any, exp_id: str) -> str | None:
    """The command that brings the experiment ``exp_id`` into the working tree when a
    branch holds it and the working tree does not (advice such as the tried-before
    warning's, ``kexp sync, which merges origin/main, then kexp remeasure ...``): the
    sync when the checkout's own branch on the remote holds it (``git merge`` refuses
    while files a side branch published are untracked here, alike on it), else the
    ``git restore`` of its file (with the files of its lineage the working tree lacks)
    from a branch holding it, not a merge of that branch's other work. None when no
    branch holds it."""
    repo = kgit.find_repo(store.root) if store.is_working_tree else None
    found = _branches_holding(repo, store.experiments_dir, exp_id) if repo else []
    if repo is None or not found:
        return None
    from kexp.gitops.commits import current_branch

    branch = current_branch(repo)
    upstream = f"origin/{branch}" if branch else None
    if upstream in [ref.short for ref in found]:
        return SYNC_MERGES.say(ref=upstream)
    return _restore(repo, store, exp_id, found, branch)[0]


def _restore(
    repo: Any, store: Any, prefix: str, found: list[RefInfo], branch: str | None
) -> tuple[str, str]:
    """The ``git restore`` that copies the file of the experiment ``prefix`` names from
    the first of ``found`` that is not the checked-out ``branch`` into the working tree,
    with the files of the experiments its ``pid`` and ``combines`` name (and theirs) that
    the working tree lacks and that commit holds (a write needs them there too), and how
    many of those it copies ("" for none, "2 experiments")."""
    source = next((ref for ref in found if ref.short != branch), found[0])
    top = kgit.toplevel(repo).resolve()
    folder = store.experiments_dir.resolve().relative_to(top).as_posix()
    held: dict[str, kgit.TreeEntry] = {}
    for entry in kgit.list_tree(repo, source.commit, folder):
        exp_id = id_from_name(entry.path.rpartition("/")[2])
        if exp_id is not None:
            held.setdefault(exp_id, entry)
    wanted = [exp_id for exp_id in held if exp_id.startswith(prefix)]
    taken: list[str] = []
    while wanted:
        exp_id = wanted.pop(0)
        if exp_id in taken:
            continue
        taken.append(exp_id)
        wanted += [
            named
            for named in _names(repo, held[exp_id].sha)
            if named in held and named not in taken and not store.id_index(named)
        ]
    paths = [held[exp_id].path for exp_id in taken]
    here = Path.cwd().resolve()
    if here == top or top in here.parents:
        shown = [os.path.relpath(top / path, here) for path in paths]
        command = ["git", "restore", "--source", source.short, "--", *shown]
    else:
        command = ["git", "-C", str(top), "restore", "--source", source.short, "--", *paths]
    more = len(taken) - 1
    return shlex.join(command), (f"{more} experiment{'s' if more > 1 else ''}" if more else "")


def _removal_noted(repo: Any, branch: str, prefix: str) -> bool:
    """Whether ``kexp rm`` deleted here a file this clone published to the side branch
    ``branch``, of an experiment whose id starts with ``prefix``: the next ``kexp sync
    --branch`` removes it there (:mod:`kexp.storage.published`)."""
    from kexp.storage.published import Record

    try:
        noted = Record.read(repo, branch).removed
    except KexpError:
        return False
    return any(
        (exp_id := id_from_name(path.rpartition("/")[2])) is not None and exp_id.startswith(prefix)
        for path in noted
    )


def _names(repo: Any, sha: str) -> list[str]:
    """The ids the ``pid`` and ``combines`` of the experiment file ``sha`` name (none
    when it cannot be read)."""
    for _, data in kgit.iter_blobs(repo, [sha]):
        return named_parents(data or b"")
    return []


def _branches_holding(repo: Any, experiments_dir: Path, prefix: str) -> list[RefInfo]:
    """The branches and remote-tracking branches (in git's order) whose tree holds a file
    of an experiment whose id starts with ``prefix`` in ``experiments_dir``: asked of git
    alone (one ``git ls-tree`` per commit), so that a refused write writes nothing, not
    even the cache."""
    try:
        top = kgit.toplevel(repo).resolve()
        folder = experiments_dir.resolve().relative_to(top).as_posix()
    except (KexpError, ValueError):
        return []
    holds: dict[str, bool] = {}
    found = []
    for ref in gitobjects.list_refs(repo):
        if not ref.name.startswith(("refs/heads/", "refs/remotes/")):
            continue
        if ref.commit not in holds:
            names = (entry.path for entry in kgit.list_tree(repo, ref.commit, folder))
            holds[ref.commit] = any(
                (exp_id := id_from_name(name)) is not None and exp_id.startswith(prefix)
                for name in names
            )
        if holds[ref.commit]:
            found.append(ref)
    return found
