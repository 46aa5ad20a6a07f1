"""Where an experiment a write names is when the working tree lacks it (a branch, a
remote-tracking branch), and what brings it in: the merge, or the sync that merges it;
for a removal made here already, the sync that publishes it. Asked of git alone (one
``git ls-tree`` per commit), so that a refused write writes nothing, not even the
cache."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

from kexp.core.advice import MERGE_SYNCED
from kexp.core.errors import KexpError
from kexp.format.validate import id_from_name
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
        if removing and "publishes the removal" in found
        else f" (a write needs the experiments it names in {store.experiments_dir})"
    )
    return type(error)(f"experiment {named} is {found}{needs}")


def elsewhere(store: Any, id_or_prefix: str, *, removing: bool = False) -> str | None:
    """Where the experiment ``id_or_prefix`` names is when the working tree does not
    hold it, and how a write naming it can go on: ``on origin/kexp/alice, not in your
    working tree: merge it in first (git merge origin/kexp/alice) and run this again``;
    None when no ref holds it. ``removing`` (a ``kexp rm`` of it): when the checked-out
    branch holds it (its file deleted here) or a branch of this clone (a side branch it
    published to), the removal is made already, and the sync that publishes it is named,
    never a merge (which would bring nothing back, or the side branch into the
    checkout)."""
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
        return (
            f"on {shown}, not in your working tree: removed here already? kexp sync "
            f"--branch {mine[0]} publishes the removal of what this clone published there"
        )
    # The checkout's own branch on the remote first (what kexp sync merges), before
    # another agent's side branch that holds it too (merging that brings its work in).
    upstream = f"origin/{branch}" if branch else None
    merge = upstream if upstream in refs else next(ref for ref in refs if ref != branch)
    if branch and merge == f"origin/{branch}":  # what kexp sync merges
        return f"on {shown}, not in your working tree: {MERGE_SYNCED.say(ref=merge)}"
    return (
        f"on {shown}, not in your working tree: merge it in first (git merge {merge}) "
        "and run this again"
    )


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
