"""``kexp migrate-layout``: move a store's month-layout files into the fan-out layout.

A file at ``experiments/<YYYY>/<MM>/<id>-<slug>.md`` moves to
``experiments/<YYYY>/<MM>/<xx>/<id>-<slug>.md`` (``xx``: the id's last two hex digits,
:mod:`kexp.storage.layout`), keeping its month and its name. In a git repository the move is
what ``git mv`` does: the file is renamed and its index entry moves with it (same blob),
so git sees a rename and ``kexp log`` follows the file across it; commit the moves (or
``kexp sync``). Outside git the files are renamed.

Each file moves atomically: it is linked at its new name (only if that name is free),
then its old name is removed; the index is changed in one step after every file moved.
A migration cut short leaves every file at one of its two names (at worst both, one
file under two names) and is finished by running it again: it is idempotent. Nothing
is overwritten, and a conflict (another file at a new name) stops it before anything
moves. It holds the store's lineage lock (no delete runs meanwhile); an update that
raced with a move fails with "moved or deleted meanwhile", nothing written.
"""

from __future__ import annotations

import dataclasses
import os
from pathlib import Path
from typing import TYPE_CHECKING, Any

from kexp.core.errors import KexpError
from kexp.format.rules import id_from_name
from kexp.storage.layout import is_month_folder, moved_parts

if TYPE_CHECKING:
    from kexp.gitops.git import IndexEntry
    from kexp.storage.store import Store

_SHOWN = 5


@dataclasses.dataclass(frozen=True)
class LayoutMigration:
    """What a migration moved (or, with ``dry_run``, would move)."""

    dry_run: bool
    #: (old path, new path) of each file, relative to the store's root, with '/'.
    moved: tuple[tuple[str, str], ...]
    #: Whether the store is in a git repository (the moves are then staged as renames).
    in_git: bool

    def to_dict(self) -> dict[str, Any]:
        """The migration as JSON-ready data (``kexp migrate-layout --json``)."""
        return {
            "dry_run": self.dry_run,
            "in_git": self.in_git,
            "moved": [{"from": old, "to": new} for old, new in self.moved],
        }

    def lines(self) -> list[str]:
        """What the migration did, for people."""
        count = len(self.moved)
        if not count:
            return ["nothing to move: no experiment file is in the month layout"]
        verb = "would move" if self.dry_run else "moved"
        found = [f"{verb} {count} experiment file(s) into experiments/<YYYY>/<MM>/<xx>/"]
        found += [f"  {old} -> {new}" for old, new in self.moved[:_SHOWN]]
        if count > _SHOWN:
            found.append(f"  ... and {count - _SHOWN} more")
        if self.in_git:
            found.append(
                "the moves are staged as renames (git mv): commit them, e.g. git commit -m "
                "'kexp migrate-layout', or kexp sync"
                if not self.dry_run
                else "they would be staged as renames (git mv)"
            )
        return found


@dataclasses.dataclass
class _Move:
    old: tuple[str, ...]  # below experiments/
    new: tuple[str, ...]
    entry: IndexEntry | None = None  # its index entry, when git tracks the old path


def migrate_layout(store: Store, *, dry_run: bool = False) -> LayoutMigration:
    """Move every file of ``store`` in the month layout into the fan-out layout (see the
    module's description); ``dry_run`` only says what would move.

    Raises :class:`KexpError` when another file holds a new name (nothing moved), for a
    sparse checkout or an unresolved merge, and on a store that cannot be written.
    """
    from kexp.storage.location import refuse_linked_store

    if not store.source.writable:
        raise store.source.read_only()
    top = store.experiments_dir
    refuse_linked_store(top)
    moves: dict[tuple[str, ...], _Move] = {}
    for parts in _month_files(top):
        new = moved_parts(parts, _id_of(parts))
        assert new is not None
        moves[parts] = _Move(parts, new)
    located = _git_location(store)
    repo, prefix = located if located is not None else (None, "")
    tracked: dict[tuple[str, ...], IndexEntry] = {}
    if repo is not None:
        for entry in _index_of(repo, prefix):
            parts = tuple(entry.path[len(prefix) :].split("/"))
            tracked[parts] = entry
        for parts, entry in tracked.items():
            new = moved_parts(parts, _id_of(parts)) if id_from_name(parts[-1]) else None
            if new is None:
                continue
            if entry.stage != 0:
                raise KexpError(
                    f"{prefix}{'/'.join(parts)} has an unresolved merge conflict: resolve the "
                    "merge (git status) and commit, then run kexp migrate-layout again"
                )
            if entry.skip_worktree:
                raise KexpError(
                    "this checkout is sparse (some experiment files are not checked out): "
                    "run kexp migrate-layout in a full checkout (git sparse-checkout disable)"
                )
            move = moves.setdefault(parts, _Move(parts, new))
            move.entry = entry
    _check_conflicts(top, moves.values(), tracked, prefix)
    ordered = sorted(moves.values(), key=lambda m: m.old)
    result = LayoutMigration(
        dry_run,
        tuple((_store_path(store, top, m.old), _store_path(store, top, m.new)) for m in ordered),
        located is not None,
    )
    if dry_run or not ordered:
        return result
    with store.lineage_lock(exclusive=True):
        moved_files = [_move_file(top, move) for move in ordered]
        from kexp.storage.atomic import sync_files

        # One sync of the file system (Linux): the new names, and the old ones gone.
        sync_files([path for path in moved_files if path is not None])
        if repo is not None:
            from kexp.gitops.git import move_index_entries

            move_index_entries(
                repo,
                [(m.entry, prefix + "/".join(m.new)) for m in ordered if m.entry is not None],
            )
    return result


def _id_of(parts: tuple[str, ...]) -> str:
    found = id_from_name(parts[-1])
    assert found is not None
    return found


def _month_files(top: Path) -> list[tuple[str, ...]]:
    """(year, month, name) of every experiment file in a month folder below ``top``
    (folders followed only when real and not hidden)."""
    found: list[tuple[str, ...]] = []
    for year in _folders(top):
        for month in _folders(top / year):
            if not is_month_folder((year, month)):
                continue
            with os.scandir(top / year / month) as entries:
                for entry in entries:
                    if (
                        not entry.name.startswith(".")
                        and id_from_name(entry.name)
                        and entry.is_file(follow_symlinks=False)
                    ):
                        found.append((year, month, entry.name))
    return found


def _folders(folder: Path) -> list[str]:
    try:
        with os.scandir(folder) as entries:
            return [
                e.name
                for e in entries
                if not e.name.startswith(".") and e.is_dir(follow_symlinks=False)
            ]
    except (FileNotFoundError, NotADirectoryError):
        return []


def _git_location(store: Store) -> tuple[Any, str] | None:
    """(the repository, the store folder's path in it with a trailing '/'), or None
    outside git."""
    from kexp.gitops import git as kgit

    if kgit.find_repo(store.root) is None:
        return None
    from kexp.storage.snapshot import StoreLocation

    location = StoreLocation.of(store.root)
    return kgit.find_worktree(location.toplevel), location.folder + "/"


def _index_of(repo: Any, prefix: str) -> list[IndexEntry]:
    from kexp.gitops.git import index_entries

    return index_entries(repo, [f":(literal){prefix.rstrip('/')}"])


def _check_conflicts(
    top: Path, moves: Any, tracked: dict[tuple[str, ...], IndexEntry], prefix: str
) -> None:
    """Refuse (nothing moved) when a new name is taken by another file: on disk, or in
    the index with other content."""
    taken: list[str] = []
    for move in moves:
        old, new = top.joinpath(*move.old), top.joinpath(*move.new)
        if os.path.lexists(new) and os.path.lexists(old) and not _same_file(old, new):
            taken.append(str(new))
        there = tracked.get(move.new)
        if move.entry is not None and there is not None and there.sha != move.entry.sha:
            taken.append(prefix + "/".join(move.new) + " (in git's index)")
    if taken:
        more = len(taken) - _SHOWN
        shown = ", ".join(taken[:_SHOWN]) + (f" and {more} more" if more > 0 else "")
        raise KexpError(
            f"kexp migrate-layout moved nothing: {shown} already exist(s) with other "
            "content; two files of one experiment? Keep one (kexp validate names duplicate "
            "ids), then run it again"
        )


def _same_file(one: Path, other: Path) -> bool:
    try:
        return os.path.samefile(one, other)
    except OSError:
        return False


def _move_file(top: Path, move: _Move) -> Path | None:
    """Move one file on disk (link at the new name, then unlink the old): its new path,
    or None when it is not on disk at its old name (moved already, or deleted)."""
    old, new = top.joinpath(*move.old), top.joinpath(*move.new)
    if not os.path.lexists(old):
        return None
    folder = new.parent
    if folder.is_symlink():
        raise KexpError(
            f"{folder} is a symbolic link: kexp writes only inside experiments/; replace the "
            "link with a folder, then run kexp migrate-layout again"
        )
    folder.mkdir(exist_ok=True)
    try:
        os.link(old, new, follow_symlinks=False)
    except FileExistsError:
        if not _same_file(old, new):
            raise KexpError(
                f"{new} appeared meanwhile with other content: kexp migrate-layout stopped "
                f"({old} stays); run it again"
            ) from None
    except OSError:  # no hard links on this file system: a rename (the name was free)
        if os.path.lexists(new):
            raise
        os.rename(old, new)
        return new
    os.unlink(old)
    return new


def _store_path(store: Store, top: Path, parts: tuple[str, ...]) -> str:
    return top.joinpath(*parts).relative_to(store.root).as_posix()
