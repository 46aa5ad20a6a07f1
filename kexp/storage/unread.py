"""What a read of the working tree alone did not see: the experiment files fetched
branches added or changed that this checkout has not merged (a teammate's records
synced to ``origin/kexp/bob``, corrections on ``origin/main`` after ``git fetch``),
said in one line where a read across refs would see them
(:func:`kexp.gitops.fetched.fetched_not_merged`: two git processes)."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from kexp.core.advice import READ_ACROSS_REFS
from kexp.core.errors import KexpError
from kexp.gitops import git as kgit
from kexp.gitops.fetched import fetched_not_merged
from kexp.storage.sources import EXPERIMENTS_DIR

if TYPE_CHECKING:
    from kexp.storage.store import Store

#: How many fetched branches the line names, each with its count.
NAMED_REFS = 3


def unread_fetched(store: Store) -> str | None:
    """One line naming how many experiment files fetched branches hold that ``store``'s
    read (the working tree alone) did not see, and on which branches; None when it read
    across refs, or none is fetched, or the store is not in git."""
    if store.source.places is not None or not store.source.writable:
        return None
    try:
        tree = kgit.find_worktree(store.root)
        relative = Path(store.root).resolve().relative_to(Path(tree.working_tree_dir).resolve())
        folder = (relative / EXPERIMENTS_DIR).as_posix().removeprefix("./")
        found = fetched_not_merged(tree, folder)
    except (KexpError, ValueError, OSError):
        return None
    if not found:
        return None
    ranked = sorted(found.items(), key=lambda item: (-len(item[1]), item[0]))
    named = ", ".join(f"{ref}: {len(paths)}" for ref, paths in ranked[:NAMED_REFS])
    more = f" and {len(ranked) - NAMED_REFS} more" if len(ranked) > NAMED_REFS else ""
    total = sum(len(paths) for paths in found.values())
    return (
        f"not read: {total} experiment file(s) added or changed on fetched branches this "
        f"checkout has not merged ({named}{more}); {READ_ACROSS_REFS}"
    )
