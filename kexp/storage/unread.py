"""What a read of the working tree alone did not see: the experiment files fetched
branches added or changed that this checkout has not merged (a teammate's records
synced to ``origin/kexp/bob``, corrections on ``origin/main`` after ``git fetch``),
said in one line where a read across refs would see them
(:func:`kexp.gitops.fetched.fetched_not_merged`: two git processes; a third reads the
few files the line names when a packet's filters ask which of them it would read).
A file the working tree holds with the branch's very content (``git restore --source
origin/kexp/bob -- FILE``, as kexp advises, even uncommitted) was read: it is not
counted (the few files named are read from disk and hashed, no git process)."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from kexp.core.advice import READ_ACROSS_REFS
from kexp.core.errors import KexpError
from kexp.format.fileformat import FileFormatError
from kexp.format.reading import read_file
from kexp.gitops import git as kgit
from kexp.gitops.fetched import fetched_not_merged
from kexp.storage.operators import part_of
from kexp.storage.rows import VALUE_FIELDS, content_key, record_of
from kexp.storage.sources import EXPERIMENTS_DIR

if TYPE_CHECKING:
    from kexp.core.settings import Settings
    from kexp.gitops.git import Worktree
    from kexp.storage.store import Store

#: How many fetched branches the line names, each with its count.
NAMED_REFS = 3
#: Where a record's values hold the columns a filter reads.
_AT = {column: VALUE_FIELDS.index(column) for column in ("operator_sig", "dtype_sig", "env")}


def unread_fetched(
    store: Store, *, operator: str = "", dtype: str = "", env: str = ""
) -> str | None:
    """One line naming how many experiment files fetched branches hold that ``store``'s
    read (the working tree alone) did not see, and on which branches; of those, with
    ``operator``, ``dtype`` or ``env``, the ones the filters read (:func:`part_of`: their
    newest versions read, those few blobs alone; one not read as an experiment counts).
    None when it read across refs, or none is fetched (or read), or the store is not in
    git."""
    if store.source.places is not None or not store.source.writable:
        return None
    try:
        tree = kgit.find_worktree(store.root)
        relative = Path(store.root).resolve().relative_to(Path(tree.working_tree_dir).resolve())
        folder = (relative / EXPERIMENTS_DIR).as_posix().removeprefix("./")
        fetched = fetched_not_merged(tree, folder)
        if fetched:
            fetched = _not_held(Path(tree.working_tree_dir), fetched, store.settings)
        asked = [
            (c, v) for c, v in (("operator_sig", operator), ("dtype_sig", dtype), ("env", env)) if v
        ]
        if asked and fetched:
            fetched = _read_by(tree, fetched, asked, store.settings)
    except (KexpError, ValueError, OSError):
        return None
    found = {ref: paths for ref, paths in fetched.items() if paths}
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


def _not_held(
    top: Path, fetched: dict[str, dict[str, str]], settings: Settings
) -> dict[str, dict[str, str]]:
    """Of ``fetched`` (by branch, each repository path's blob), the files the working
    tree under ``top`` does not hold with that very content (git's blob hash of its
    bytes, as the listing keys them); a file too large to be read counts as not held."""
    held: set[str] = set()
    for path, blob in {p: b for paths in fetched.values() for p, b in paths.items()}.items():
        try:  # read as every experiment file is: bounded, no symbolic link followed
            data = read_file(top / path, settings)
        except (OSError, FileFormatError):  # not in the working tree (the common case)
            continue
        if content_key(data).hex() == blob:
            held.add(path)
    return {
        ref: {path: blob for path, blob in paths.items() if path not in held}
        for ref, paths in fetched.items()
    }


def _read_by(
    tree: Worktree,
    fetched: dict[str, dict[str, str]],
    asked: list[tuple[str, str]],
    settings: Settings,
) -> dict[str, dict[str, str]]:
    """Of ``fetched`` (by branch, each file's blob), the files whose front matter every
    filter of ``asked`` (column, value) reads; one git process for their blobs."""
    blobs = sorted({blob for paths in fetched.values() for blob in paths.values()})
    read: dict[str, bool] = {}
    for blob, data in kgit.iter_blobs(tree, blobs, max_bytes=settings.max_file_bytes):
        values = record_of(data, settings)[1] if isinstance(data, bytes) else None
        read[blob] = values is None or all(
            part_of(column, value, str(values[_AT[column]] or "")) for column, value in asked
        )
    return {
        ref: {path: blob for path, blob in paths.items() if read.get(blob, True)}
        for ref, paths in fetched.items()
    }
