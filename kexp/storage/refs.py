"""The working tree plus the store at any set of refs, read as one: :class:`RefsSource`.

``Store(root, refs=["origin/*"])`` (or ``all_refs=True``: every branch and
remote-tracking branch) reads the working tree and the store at every matching ref,
straight from git objects, without a checkout. Every command reads through it alike:
one entry per experiment, whatever the number of places holding it.

**The newest version.** An experiment held with different contents in several places
(a correction on one branch) is one entry: its newest version, which is ranked and
counted; the places holding the others are named (``other_versions``). Newest means,
in this order: an uncommitted edit in the working tree (it differs from ``HEAD``'s
file), unless the other version's history held it (that ref descends from it: what
this clone published to a side branch that a reviewer corrected there since is no
edit, but the older version; so is a local branch's, and the working tree's as that
branch has it, when its remote-tracking branch holds a rewrite of every commit of it
that it lacks: a reviewer amended the published commit and force-pushed; so is a
file copied unchanged from a remote-tracking branch whose reflog held it, rewritten
since: its author amended it and force-pushed); else, each
version taken at the commit that last changed it (of the places holding it, the
newest commit of their history that made its files what they are: a revert is one;
a ref's later commits that left the file alone are not), the one whose change
descends from the other's (made on top of it: what a merge would keep); else the one
whose places' history held the other's very files (a rebase merge copied them, then
changed them); else (both changed apart: a squash merge that corrected it) the one
changed last, then the working tree, then the refs in the order given. A file of the
working tree that is ``HEAD``'s is ``HEAD``'s version.

**A removal.** A place removed an experiment when it lacks it and its commit descends
from every place holding it at a commit holding that very version (a branch that merged
it, then removed it; the working tree after ``kexp rm``); so did ``HEAD``'s commit or a
remote's default branch when only side refs hold it and its history since it parted
from each of them held that very version (landed by a squash or rebase merge, which
shares no commit with the branch, then reverted). The working tree's removal is
the reader's newest state: the experiment is not read; so is a remote's default
branch's (``origin/HEAD``'s target, which a clone sets) unless another default branch
holds it, the working tree's file from before it said held there (a clone that fetched
the merged removal, not pulled it). Another ref's removal hides it only when neither
the working tree nor a default branch holds it: a removal waiting on a side branch (a
pull request under review) does not hide what the reader or the default branch holds.
Such an experiment is read as the places holding it have it (its newest version), noting
the refs that removed it (``removed_on``: "removed on origin/kexp/a").

**Fast, because git is content-addressed.** The working tree is read as every query
reads it (:mod:`kexp.storage.listing`); each ref's folders are git trees, read once and kept by
hash in the cache (:mod:`kexp.storage.cache`), and a folder whose tree is the same in every
place (and the working tree's, when it equals ``HEAD``'s) is taken once; what is
parsed of a content is kept by its key (git's blob hash), so a version held by the
working tree is never read again from git; merge bases are kept too.
"""

from __future__ import annotations

import fnmatch
import warnings
from collections.abc import Iterable, Iterator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, NamedTuple

from kexp.core.advice import LOG_REMOVED, READ_WITHOUT_REFS, SHOW_ALL_REFS, Advice
from kexp.core.errors import KexpError, KexpWarning
from kexp.core.problems import display_path
from kexp.format.reading import size_problem
from kexp.format.rules import id_from_name, is_stray
from kexp.format.validate import CheckedFile, check_bytes
from kexp.gitops import git as kgit
from kexp.gitops import objects as gitobjects
from kexp.storage.layout import layout_twins
from kexp.storage.rows import LOCAL, Row, Seen, problem_at, record_of, row_of
from kexp.storage.sources import EXPERIMENTS_DIR, Found, WorkingTree, removed_phrase
from kexp.storage.unmerged import displaced, marked
from kexp.storage.versions import (
    FILE_MODES,
    Duplicate,
    GitTrees,
    Newest,
    PlaceFolders,
    Single,
    Version,
    one_file_a_place,
)

if TYPE_CHECKING:
    from kexp.core.problems import Problem
    from kexp.core.settings import Settings
    from kexp.gitops.git import Worktree
    from kexp.gitops.objects import RefInfo
    from kexp.storage.cache import Cache
    from kexp.storage.rows import Record


def matching_refs(
    repo: Worktree, patterns: Sequence[str], all_refs: bool, *, warn: bool = True
) -> list[RefInfo]:
    """The refs matching ``patterns`` (each checked first; ``*`` matches any characters,
    a pattern matches a full name or one under ``refs/``, ``refs/heads/``,
    ``refs/remotes/`` or ``refs/tags/``), or every branch and remote-tracking branch
    with ``all_refs``; a pattern no ref matches warned of (``warn``)."""
    checked = [gitobjects.check_ref_pattern(p) for p in patterns]
    found = []
    unmatched = dict.fromkeys(checked)
    for ref in gitobjects.list_refs(repo):
        names = (
            ref.name,
            *(
                ref.name[len(prefix) :]
                for prefix in ("refs/", "refs/heads/", "refs/remotes/", "refs/tags/")
                if ref.name.startswith(prefix)
            ),
        )
        matched = [p for p in checked if any(fnmatch.fnmatchcase(n, p) for n in names)]
        for pattern in matched:
            unmatched.pop(pattern, None)
        if matched or (all_refs and ref.name.startswith(("refs/heads/", "refs/remotes/"))):
            found.append(ref)
    for pattern in unmatched if warn else ():
        warnings.warn(
            f"no ref matches {pattern!r}: check the spelling (git branch -a lists the refs), "
            "or 'git fetch' first",
            KexpWarning,
            stacklevel=4,
        )
    return found


class RefsSource:
    """The working tree and the store at matching refs, one entry per experiment (see
    the module documentation). Writes go to the working tree."""

    writable = True
    cacheable = True
    splittable = False
    revision: str | None = None
    commit: str | None = None

    def __init__(
        self,
        tree: WorkingTree,
        root: Path,
        patterns: Sequence[str],
        *,
        all_refs: bool,
        settings: Settings,
    ) -> None:
        # lazy: not every command that imports this module needs kexp.storage.location
        from kexp.storage.location import CACHE_DIR

        self.tree = tree
        self._settings = settings
        self._cache_folder = Path(root) / CACHE_DIR
        self.worktree = kgit.find_worktree(root)
        toplevel = Path(self.worktree.working_tree_dir).resolve()
        relative = Path(root).resolve().relative_to(toplevel).as_posix()
        #: ``experiments/`` relative to the repository's top, with '/'.
        self.folder = EXPERIMENTS_DIR if relative == "." else f"{relative}/{EXPERIMENTS_DIR}"
        self._patterns, self._all_refs = list(patterns), all_refs
        #: The refs read, the places read (the working tree, then each ref, as git
        #: abbreviates it) and those that are a remote's default branch (a removal waits
        #: on the others): as the last read found them (:meth:`_resolve`).
        self.refs: list[RefInfo] = []
        self.places: tuple[str, ...] = (LOCAL,)
        self.defaults: frozenset[int] = frozenset()
        self._resolve(warn=True)
        #: What :meth:`answer_places` found (``HEAD``'s commit and date, the history's
        #: rewrites), handed by :meth:`read` to the read that follows it: the answer's
        #: key and its rows come from one look at the refs.
        self._answered: tuple[tuple[str, int] | None, tuple[str, ...]] | None = None
        self._this_read: tuple[tuple[str, int] | None, tuple[str, ...]] | None = None
        #: The checked-out branch among the refs read (its short name; None: ``HEAD`` is
        #: detached, or the branch is not read), found at each read: the working tree
        #: is that branch's commit, so a version both hold is said to be ``local`` alone.
        self.checked_out: str | None = None
        self._last: Found | None = None
        #: The ids held in several files or versions at the last read → each version
        #: (path relative to ``experiments/``, content key, the places holding it).
        self.several: dict[str, list[Version]] = {}
        #: The files of duplicate ids the last read left out (path → content key).
        self._doubled: dict[str, bytes] = {}
        #: The content key and place of each invalid version a ref holds at the last
        #: read (path relative to ``experiments/`` → (key, place)): validate checks
        #: those bytes.
        self._invalid_keys: dict[str, tuple[bytes, str]] = {}

    @property
    def experiments_dir(self) -> Path:
        return self.tree.experiments_dir

    def _resolve(self, *, warn: bool = False) -> None:
        """The refs matching the patterns as they are now: a fetch, a sync or a reset
        moves them, so each read resolves them again (a store kept open, in a notebook,
        reads what was fetched since it was made). Unmatched patterns are warned of
        once, when the store is made (``warn``)."""
        self.refs = matching_refs(self.worktree, self._patterns, self._all_refs, warn=warn)
        self.places = (LOCAL, *(ref.short for ref in self.refs))
        self.defaults = _default_places(self.worktree, self.refs)

    # --- the read ------------------------------------------------------------------------

    def read(self, cache: Cache, settings: Settings, *, rows: bool = True) -> Found:
        """Every experiment's newest version (see the module documentation); with
        ``rows=False`` the working tree's listing alone (:meth:`completed` goes on)."""
        self._last = None
        self._this_read, self._answered = self._answered, None
        local = self.tree.read(cache, settings, rows=rows)
        return self._across(cache, settings, local) if rows else local

    def answer_places(self) -> tuple[Any, ...]:
        """``HEAD``'s commit, each ref read (its name and commit) and what rewrites the
        history (:func:`kexp.gitops.objects.history_rewrites`): with the working tree's
        files, what a read's answer depends on, as (name, value) pairs."""
        head, rewrites = self._looked()
        self._answered = head, rewrites
        return self._places(head[0] if head else None, rewrites, self.checked_out)

    def _looked(self) -> tuple[tuple[str, int] | None, tuple[str, ...]]:
        """The refs resolved (:meth:`_resolve`), ``HEAD``'s commit and date, the
        checked-out branch (:attr:`checked_out`) and the history's rewrites, as they are
        now."""
        self._resolve()
        head = gitobjects.head_info(self.worktree)
        self.checked_out = self._checked_out(head[0] if head else None)
        return head, gitobjects.history_rewrites(self.worktree)

    def _places(
        self, head: str | None, rewrites: tuple[str, ...], checked_out: str | None
    ) -> tuple[Any, ...]:
        """:meth:`answer_places`, of ``HEAD``'s commit, the history's rewrites and the
        checked-out branch."""
        refs = ((ref.short, ref.commit) for ref in self.refs)
        defaults = (("default", self.places[place]) for place in sorted(self.defaults))
        return (
            ("HEAD", head),
            ("checked out", checked_out),
            *refs,
            *defaults,
            *(("rewritten", line) for line in rewrites),
        )

    def _checked_out(self, head: str | None) -> str | None:
        """The short name of the checked-out branch when it is among the refs read (its
        commit is ``head``, ``HEAD``'s), else None."""
        at_head = [ref for ref in self.refs if ref.commit == head and ref.name.startswith(
            "refs/heads/")]  # fmt: skip
        if not at_head:  # no git process asked: no branch read is HEAD's
            return None
        from kexp.gitops.commits import current_branch

        branch = current_branch(self.worktree)  # type: ignore[arg-type]
        return next((ref.short for ref in at_head if ref.name == f"refs/heads/{branch}"), None)

    def _as_local(self, seen: Seen) -> Seen:
        """``seen`` without the checked-out branch beside ``local``, among the places
        holding this version or the others: that branch's commit is the working tree's,
        no other place (``local +1`` named no other ref)."""
        branch = self.checked_out
        if branch is None:
            return seen
        if seen.ref == LOCAL and branch in seen.refs:
            seen = seen._replace(refs=tuple(place for place in seen.refs if place != branch))
        if LOCAL in seen.other_versions and branch in seen.other_versions:
            seen = seen._replace(
                other_versions=tuple(p for p in seen.other_versions if p != branch),
                diverged_on=tuple(p for p in seen.diverged_on if p != branch),
            )
        return seen

    def completed(self, cache: Cache, settings: Settings, found: Found) -> Found:
        """The read across refs, from the working tree's listing ``read(rows=False)``
        found."""
        assert found.listing is not None
        return self._across(cache, settings, Found.of_listing(found.listing))

    def _across(self, cache: Cache, settings: Settings, local: Found) -> Found:
        """The read across refs, from the working tree's read ``local``."""
        assert local.listing is not None
        # the look its answer's key was made of, else a look now
        head, rewrites = self._this_read or self._looked()
        self._this_read = None
        commits = [head[0] if head else None, *(ref.commit for ref in self.refs)]
        git = GitTrees(self.worktree, cache, keep_bases=not rewrites)
        # Each folder → its tree at HEAD, then at each ref.
        folders = git.place_folders(git.roots(commits, self.folder))
        single, several = self._versions(local, folders, git)
        self.several = {exp_id: list(versions) for exp_id, versions in several.items()}
        doubled = one_file_a_place(single, several)
        self._doubled = {path: key for path, key, _, _ in doubled}
        self._invalid_keys = {}
        dates = [head[1] if head else 0, *(ref.date for ref in self.refs)]
        own = frozenset(n for n, r in enumerate(self.refs, 1) if r.name.startswith("refs/heads/"))
        names = ("", *(ref.name for ref in self.refs))
        newest = Newest(self.places, self.folder, git, commits, dates, self.defaults,
                        _tracking(self.refs), own, names)  # fmt: skip
        removed, noted = newest.removed(single, several)
        for exp_id in removed:
            single.pop(exp_id, None)
            several.pop(exp_id, None)
        chosen = newest.choose(several, noted)
        found = self._found(local, single, chosen, noted, newest, cache, settings)
        fallen = _chosen_invalid(found, chosen, several)
        if fallen:  # an invalid newest version: the newest valid one is read instead
            chosen.update(newest.choose(fallen, noted))
            told = found.invalid
            found = self._found(local, single, chosen, noted, newest, cache, settings)
            found = found._replace(invalid=_merged_invalid(told, found.invalid))
        instead = displaced(chosen, several, self.places, self.defaults)
        if instead:  # an unmerged version ranked: what rests on it says so
            found = found._replace(rows=self._unmerged(found.rows, instead, cache, settings))
        places = self._places(commits[0], rewrites, self.checked_out)
        found = found._replace(places=places, removed=tuple(removed.items()))
        if doubled:
            found = found._replace(invalid=self._with_duplicates(found.invalid, doubled))
        self._last = found
        return found

    def _unmerged(
        self,
        rows: list[Row],
        instead: dict[str, tuple[str, bytes, str]],
        cache: Cache,
        settings: Settings,
    ) -> list[Row]:
        """``rows`` marked where an unmerged version touches them
        (:func:`kexp.storage.unmerged.marked`); ``instead``: each unmerged experiment's
        version as the working tree or a default branch holds it (path, content key,
        place), read by content key (an invalid one is left out)."""
        records = _records(self.worktree, cache, [key for _, key, _ in instead.values()], settings)
        settled: dict[str, tuple[Row, str]] = {}
        for exp_id, (path, key, place) in instead.items():
            values = records[key][1]
            if values is not None and values[0] == exp_id:
                settled[exp_id] = (row_of(values, path, key), place)
        return marked(rows, settled, settings)

    def _with_duplicates(
        self, invalid: list[tuple[str, Any]], doubled: list[Duplicate]
    ) -> list[tuple[str, Any]]:
        """``invalid`` with the files of duplicate ids left out of the read, each said as
        ``kexp validate`` says it, at its place."""
        # lazy: not every command that imports this module needs kexp.storage.listing
        from kexp.storage.listing import path_order

        base = self.experiments_dir
        said = [
            (
                path,
                f"{display_path(base / path)} at {self.places[place]}: error[duplicate-id] "
                f"id {path.rsplit('/', 1)[-1][:16]} is also used by {display_path(base / kept)}",
            )
            for path, _, place, kept in doubled
        ]
        return sorted([*invalid, *said], key=lambda item: path_order(item[0]))

    def _versions(
        self, local: Found, folders: PlaceFolders, git: GitTrees
    ) -> tuple[Single, dict[str, list[Version]]]:
        """Every experiment's files, as (path, content key, places holding it): those of
        one file in every place holding it (id → it), and those of several (id → them);
        place 0 is the working tree, place ``n`` the ``n``-th ref (a folder's trees in
        ``folders``: ``HEAD``'s first, then the ``n``-th ref's)."""
        assert local.listing is not None
        working = local.listing.folders
        every = tuple(range(len(self.places)))
        absent = (None,) * len(self.places)
        single: Single = {}
        several: dict[str, list[Version]] = {}
        for folder in sorted({*working, *folders}):
            # The places grouped by what they hold here: a tree hash, or the working
            # tree's own files when they are not HEAD's.
            groups: dict[str, list[int]] = {}
            trees = folders.get(folder, absent)
            head_tree = trees[0]
            here = working.get(folder)
            if here is not None:
                same = head_tree is not None and git.files(head_tree) == dict(
                    _files_of_folder(here)
                )
                groups.setdefault(head_tree if same and head_tree else "", []).append(0)
            for place in range(1, len(trees)):
                tree = trees[place]
                if tree is not None:
                    groups.setdefault(tree, []).append(place)
            for tree, places in groups.items():
                held = every if len(places) == len(every) else tuple(places)
                files: Iterable[tuple[str, bytes]] = (
                    git.files(tree).items() if tree else _files_of_folder(here)
                )
                for name, key in files:
                    # Both listings hold experiment names alone (EXPERIMENT_NAME): the
                    # first 16 characters are the id.
                    exp_id, version = name[:16], (folder + name, key, held)
                    first = single.setdefault(exp_id, version)
                    if first is not version:
                        several.setdefault(exp_id, [first]).append(version)
        for exp_id in several:
            del single[exp_id]
        return single, several

    def _found(
        self,
        local: Found,
        single: Single,
        chosen: dict[str, tuple[list[tuple[str, bytes]], Seen]],
        noted: dict[str, tuple[str, ...]],
        newest: Newest,
        cache: Cache,
        settings: Settings,
    ) -> Found:
        """The rows of the experiments of one file (``single``) and of the chosen
        versions: the working tree's as it read them, the others' records from the cache
        by content key (read from git when missing); ``noted``: the refs that removed
        one, read all the same."""
        assert local.listing is not None
        by_path = {row.path: row for row in local.rows}
        local_invalid = dict(local.invalid)
        wanted: list[tuple[str, bytes, Seen]] = []
        rows: list[Row] = []
        invalid: list[tuple[str, Any]] = []
        seen_once: dict[tuple[int, ...], Seen] = {}
        for exp_id, (path, key, places) in single.items():
            known = seen_once.get(places)
            if exp_id in noted:
                seen = self._as_local(newest.seen(places, (), (), noted[exp_id]))
            elif known is None:
                seen = seen_once[places] = self._as_local(newest.seen(places, (), ()))
            else:
                seen = known
            mine = by_path.get(path) if seen.ref == LOCAL else None
            if mine is not None and mine.key == key:
                # mine with where=seen (the last field): the fastest way to make many.
                rows.append(tuple.__new__(Row, (*mine[:-1], seen)))
            elif seen.ref == LOCAL and path in local_invalid:
                invalid.append((path, local_invalid[path]))
            else:
                wanted.append((path, key, seen))
        for files, found_at in chosen.values():
            seen = self._as_local(found_at)
            for path, key in files:
                mine = by_path.get(path)
                if seen.ref == LOCAL and mine is not None and mine.key == key:
                    # mine with where=seen (the last field): the fastest way to make many.
                    rows.append(tuple.__new__(Row, (*mine[:-1], seen)))
                elif seen.ref == LOCAL and path in local_invalid:
                    invalid.append((path, local_invalid[path]))
                else:
                    wanted.append((path, key, seen))
        records = _records(self.worktree, cache, [key for _, key, _ in wanted], settings)
        for path, key, seen in wanted:
            error, values = records[key]
            name_id = id_from_name(path)
            if values is not None and values[0] != name_id:
                error = ("id-mismatch", f"the id {values[0]} is not {name_id}, the file name's")
                values = None
            if values is None:
                invalid.append((path, _invalid_message(self.experiments_dir / path, seen, error)))
                self._invalid_keys.setdefault(path, (key, seen.ref))
            else:
                rows.append(row_of(values, path, key, seen))
        # lazy: not every command that imports this module needs kexp.storage.listing
        from kexp.storage.listing import path_order

        told = {path for path, _ in invalid}
        invalid += [item for item in local.invalid if item[0] not in told]  # unreadable
        rows.sort(key=lambda row: path_order(row.path))
        invalid.sort(key=lambda item: path_order(item[0]))
        return Found(rows, invalid, local.rows, local.listing)

    # --- the files of the chosen versions --------------------------------------------------

    def _entries(self) -> dict[str, tuple[str, bytes, bool]]:
        """Store path → (path relative to ``experiments/``, content key, whether the
        working tree holds that content) of every file of the last read (read now when
        none was made yet)."""
        if self._last is None:
            # lazy: not every command that imports this module needs kexp.storage.cache
            from kexp.storage.cache import Cache

            folder = self._cache_folder if self._cache_folder.is_dir() else None
            cache = Cache(folder, self._settings)
            try:
                self.read(cache, self._settings)
            finally:
                cache.close()
        assert self._last is not None
        base = self.experiments_dir
        entries = {
            str(base / row.path): (row.path, row.key, row.where is None or row.where.ref == LOCAL)
            for row in self._last.rows
        }
        for path, key in self._doubled.items():  # read by validate, which says so
            entries.setdefault(str(base / path), (path, key, False))
        for path, error in self._last.invalid:
            key = self._invalid_keys.get(path, (b"", ""))[0]
            entries.setdefault(str(base / path), (path, key, not isinstance(error, str)))
        return entries

    def shadowed_invalid(self, settings: Settings) -> list[tuple[str, str, bytes]]:
        """(store path, place, bytes) of each invalid version a ref holds of an
        experiment read from another, valid version (the last read's; read now when none
        was made): what ``kexp validate --refs`` reports beside the file read."""
        self._entries()
        assert self._last is not None
        read = {row.path for row in self._last.rows}
        shadowed = [(path, *held) for path, held in self._invalid_keys.items() if path in read]
        datas = self.bytes_found([(path, key) for path, key, _ in shadowed], settings)
        base = self.experiments_dir
        return [
            (str(base / path), place, data)
            for (path, _, place), data in zip(shadowed, datas, strict=True)
            if data is not None
        ]

    def removed(self) -> dict[str, str]:
        """The experiments whose newest state is their removal, as the last read found
        them (read now when none was made), each with how it is said."""
        self._entries()
        assert self._last is not None
        return {exp_id: removed_phrase(place) for exp_id, place in self._last.removed}

    def paths(self) -> list[Path]:
        """The file of every experiment's newest version (where a checkout would have
        it), sorted."""
        return sorted(Path(path) for path in self._entries())

    def files(self) -> list[str]:
        """:meth:`paths` as strings."""
        return [str(path) for path in self.paths()]

    def bytes_found(
        self, items: Sequence[tuple[str, bytes]], settings: Settings
    ) -> list[bytes | None]:
        """The bytes of each (path relative to ``experiments/``, content key): from the
        working tree when its file holds that content, else from git (None: neither)."""
        found: list[bytes | None] = list(self.tree.bytes_found(items, settings))
        missing = [n for n, data in enumerate(found) if data is None and items[n][1]]
        if missing:
            shas = [items[n][1].hex() for n in missing]
            streamed = kgit.iter_blobs(self.worktree, shas, max_bytes=settings.max_file_bytes)
            for n, (_, data) in zip(missing, streamed, strict=True):
                found[n] = data if isinstance(data, bytes) else None
        return found

    def contents(
        self, files: Sequence[str], settings: Settings
    ) -> Iterator[tuple[str, bytes | Problem]]:
        """Each of ``files`` (of :meth:`files`) with its bytes, or the problem that says
        why it cannot be read."""
        entries = self._entries()
        for start in range(0, len(files), 256):
            batch = files[start : start + 256]
            items = [entries.get(path, ("", b"", True)) for path in batch]
            datas = self.bytes_found([(relative, key) for relative, key, _ in items], settings)
            for path, (_, _, mine), data in zip(batch, items, datas, strict=True):
                if data is None or mine:
                    yield from self.tree.contents([path], settings)
                else:
                    yield path, data

    def stray_files(self, settings: Settings) -> list[tuple[str, bytes | Problem]]:
        """The Markdown files that are not experiment files (nor the folder's README) in
        the working tree and at each ref (the working tree's where both hold a path),
        sorted, each with its bytes or the problem that says why it cannot be read."""
        # lazy: not every command that imports this module needs kexp.storage.cache
        from kexp.storage.cache import Cache

        found: dict[str, bytes | Problem] = dict(self.tree.stray_files(settings))
        wanted: dict[str, str] = {}
        cache = Cache(self._cache_folder if self._cache_folder.is_dir() else None, settings)
        try:
            git = GitTrees(self.worktree, cache)
            roots = [git.root(ref.commit, self.folder) for ref in self.refs]
            for below, trees in git.place_folders(roots).items():
                for tree in dict.fromkeys(tree for tree in trees if tree is not None):
                    for mode, name, sha in git.entries(tree):  # the first ref's path first
                        path = str(self.experiments_dir / (below + name))
                        if mode in FILE_MODES and path not in found and is_stray(below + name):
                            wanted.setdefault(path, sha)
        finally:
            cache.close()
        streamed = kgit.iter_blobs(
            self.worktree, list(wanted.values()), max_bytes=settings.max_file_bytes
        )
        for path, (_, data) in zip(wanted, streamed, strict=True):
            if isinstance(data, int):
                found[path] = size_problem(path, data, settings.max_file_bytes)
            else:
                found[path] = data if data is not None else b""
        return sorted(found.items())

    def check(self, path: Path, settings: Settings) -> CheckedFile:
        """Read and check one file of :meth:`files`."""
        return self.check_files([path], settings)[0]

    def check_files(self, paths: Sequence[Path], settings: Settings) -> list[CheckedFile]:
        """Read and check files of :meth:`files` (the newest versions)."""
        checked: list[CheckedFile] = []
        for path, (_, data) in zip(paths, self.contents([str(p) for p in paths], settings),
                                   strict=True):  # fmt: skip
            if isinstance(data, bytes):
                checked.append(check_bytes(data, Path(path), settings))
            else:
                checked.append(CheckedFile(Path(path), None, [data]))
        return checked

    def check_found(self, rows: Sequence[Row], settings: Settings) -> list[CheckedFile]:
        """Read and check the files of ``rows``: the working tree's as they are now, the
        others' by content key."""
        base = self.experiments_dir
        local = [row.where is None or row.where.ref == LOCAL for row in rows]
        others = iter(
            self.bytes_found(
                [(row.path, row.key) for row, mine in zip(rows, local, strict=True) if not mine],
                settings,
            )
        )
        checked = []
        for row, mine in zip(rows, local, strict=True):
            path = base / row.path
            data = None if mine else next(others)
            if data is None:
                checked.append(self.tree.check(path, settings))
            else:
                checked.append(check_bytes(data, path, settings))
        return checked

    def vanished(self, path: Path) -> bool:
        """Whether a working-tree file was deleted (a ref's files do not change)."""
        entry = self._entries().get(str(path))
        return (entry is None or entry[2]) and self.tree.vanished(path)

    def read_only(self) -> KexpError:  # pragma: no cover - writes go to the working tree
        """Never raised: writes go to the working tree."""
        return self.tree.read_only()


def _tracking(refs: Sequence[RefInfo]) -> dict[int, frozenset[int]]:
    """Each local branch's place (1: the first ref) among ``refs`` → the places of the
    remote-tracking branches of the same name (``refs/remotes/REMOTE/NAME``)."""
    locals_ = {
        ref.name.removeprefix("refs/heads/"): n
        for n, ref in enumerate(refs, 1)
        if ref.name.startswith("refs/heads/")
    }
    found: dict[int, set[int]] = {}
    for n, ref in enumerate(refs, 1):
        if ref.name.startswith("refs/remotes/") and ref.name.count("/") >= 3:
            local = locals_.get(ref.name.split("/", 3)[3])
            if local is not None:
                found.setdefault(local, set()).add(n)
    return {local: frozenset(places) for local, places in found.items()}


def _default_places(repo: Worktree, refs: Sequence[RefInfo]) -> frozenset[int]:
    """The places (1: the first ref) of ``refs`` that are a remote's default branch
    (``refs/remotes/REMOTE/HEAD``'s target, which a clone sets)."""
    # lazy: not every command that imports this module reads refs (kexp sync's module)
    from kexp.gitops import remotes as gitremotes

    places = {ref.name: n for n, ref in enumerate(refs, 1)}
    remotes = {
        ref.name.split("/")[2]
        for ref in refs
        if ref.name.startswith("refs/remotes/") and ref.name.count("/") >= 3
    }
    found = set()
    for remote in sorted(remotes):
        branch = gitremotes.default_branch(repo, remote)  # type: ignore[arg-type]
        place = places.get(f"refs/remotes/{remote}/{branch}") if branch else None
        if place is not None:
            found.add(place)
    return frozenset(found)


def _chosen_invalid(
    found: Found,
    chosen: dict[str, tuple[list[tuple[str, bytes]], Seen]],
    several: dict[str, list[Version]],
) -> dict[str, list[Version]]:
    """The experiments of several versions whose chosen (newest) one is invalid and
    left no row, each with its other versions (those not holding a chosen file's
    contents): an invalid edit on a branch must not hide the valid version the working
    tree or another ref holds."""
    invalid = {path for path, _ in found.invalid}
    suspects = {
        exp_id for exp_id, (files, _) in chosen.items() if any(path in invalid for path, _ in files)
    }
    if not suspects:
        return {}
    suspects -= {row.id for row in found.rows}
    fallen: dict[str, list[Version]] = {}
    for exp_id in suspects:
        keys = {key for _, key in chosen[exp_id][0]}
        others = [version for version in several[exp_id] if version[1] not in keys]
        if others:
            fallen[exp_id] = others
    return fallen


def _merged_invalid(
    told: Sequence[tuple[str, Any]], found: Sequence[tuple[str, Any]]
) -> list[tuple[str, Any]]:
    """The invalid files of a read chosen again (``found``) with those of its first
    choice (``told``) it no longer names: each invalid version is still said."""
    # lazy: not every command that imports this module needs kexp.storage.listing
    from kexp.storage.listing import path_order

    merged = list(dict.fromkeys([*found, *told]))
    return sorted(merged, key=lambda item: path_order(item[0]))


def _invalid_message(path: Path, seen: Seen, error: Any) -> str:
    """The warning of an invalid file found on a ref: the file, where, its problem."""
    if len(error) == 2:
        code, message = error
    else:
        problem = problem_at(path, error)
        code, message = problem.code, problem.message
    return f"{display_path(path)} at {seen.ref}: error[{code}] {message}"


def _records(
    repo: Worktree, cache: Cache, keys: Sequence[bytes], settings: Settings
) -> dict[bytes, Record]:
    """The record of each content: from the cache, else read from git (one ``git
    cat-file --batch``) and kept."""
    wanted = sorted(set(keys))
    known = cache.contents(wanted)
    missing = [key.hex() for key in wanted if key not in known]
    if missing:
        new: dict[bytes, Record] = {}
        streamed = kgit.iter_blobs(repo, missing, max_bytes=settings.max_file_bytes)
        for sha, data in streamed:
            if isinstance(data, bytes):
                new[bytes.fromhex(sha)] = record_of(data, settings)
            elif isinstance(data, int):
                problem = size_problem("", data, settings.max_file_bytes)
                new[bytes.fromhex(sha)] = (
                    (1, 1, problem.code, "", problem.message, problem.hint),
                    None,
                )
        cache.save_contents(new)
        known.update(new)
    for key in wanted:  # pragma: no cover - every blob a tree names is in the repository
        known.setdefault(key, ((1, 1, "unreadable", "", "the blob is missing", ""), None))
    return known


def _files_of_folder(folder: Any) -> list[tuple[str, bytes]]:
    """(name, content key) of a working-tree folder's experiment files (readable ones)."""
    # lazy: not every command that imports this module needs kexp.storage.listing
    from kexp.storage.listing import KEY_SIZE, NO_KEY

    keys = folder.keys
    return [
        (name, keys[at * KEY_SIZE : (at + 1) * KEY_SIZE])
        for at, name in enumerate(folder.names)
        if keys[at * KEY_SIZE : (at + 1) * KEY_SIZE] != NO_KEY
    ]


def refs_holding(store: Any, id_or_prefix: str) -> list[str]:
    """The branches and remote-tracking branches whose store holds the experiment
    ``id_or_prefix`` names (those holding its newest version first; none outside git,
    or when none does): where to look for an experiment the working tree does not hold
    (``--all-refs``). ``store``: a :class:`kexp.storage.store.Store` of the working tree."""
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # the lookup's: the read at hand warns itself
            across = store.with_refs(all_refs=True)
            found = across.found()
            full = across.resolve_id(id_or_prefix, found=found)
    except KexpError:
        return []
    places = [
        place
        for row in found.rows
        if row.id == full and row.where is not None
        for place in (*row.where.refs, *row.where.other_versions)
    ]
    return [place for place in dict.fromkeys(places) if place != LOCAL]


class Elsewhere(NamedTuple):
    """What the refs hold of an id beside one working-tree file of it
    (:func:`id_elsewhere`)."""

    #: The refs holding another experiment with the id (a file at another path).
    others: tuple[str, ...]
    #: The rows of the experiments naming the id (``pid``, ``combines``), each with where.
    naming: list[Row]
    #: The places (the working tree, refs) holding this file and no other file of the id:
    #: there, the id names this file's experiment alone.
    only_this: frozenset[str] = frozenset()


def id_elsewhere(store: Any, exp_id: str, path: str) -> Elsewhere:
    """What the branches and remote-tracking branches hold of the id ``exp_id`` beside
    the working tree's file at ``path`` (relative to ``experiments/``), read across refs
    as every read is: the refs holding another experiment with that id (a file at
    another path, in either layout: two branches made one id), the rows of the
    experiments naming it (``pid``, ``combines``) with where each is, and the places
    where the id is this file's alone. Nothing outside git. ``store``: a
    :class:`kexp.storage.store.Store` of the working tree."""
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # (the read's warnings are not this question's)
            across = store.with_refs(all_refs=True)
            found = across.found()
    except KexpError:
        return Elsewhere((), [])
    if not isinstance(across.source, RefsSource):
        return Elsewhere((), [])
    names = across.source.places
    mine = set(layout_twins(path))
    versions = across.source.several.get(exp_id, [])
    others = tuple(
        dict.fromkeys(
            names[place] for other, _, places in versions if other not in mine for place in places
        )
    )
    holding = {names[p] for other, _, places in versions if other in mine for p in places}
    naming = [row for row in found.rows if row.pid == exp_id or exp_id in row.combines]
    return Elsewhere(others, naming, frozenset(holding - set(others)))


def on_other_refs(
    store: Any, id_or_prefix: str, error: KexpError, advice: Advice = SHOW_ALL_REFS
) -> KexpError:
    """``error`` (no experiment ``id_or_prefix`` names where a read of the working tree
    alone looked) saying which refs hold it and how to read it there (``advice``, given
    the id and the first ref: the one holding its newest version; ``kexp show ID
    --all-refs``); ``error`` itself for a store reading refs or when no ref holds it.
    ``store``: a :class:`kexp.storage.store.Store`."""
    if not store.is_working_tree or store.source.places is not None:
        return error
    refs = refs_holding(store, id_or_prefix)
    if not refs:
        return error
    shown = ", ".join(refs[:3]) + (f" and {len(refs) - 3} more" if len(refs) > 3 else "")
    return type(error)(
        f"{error.args[0]}; it is on {shown}, not in the working tree: "
        f"{advice.say(id=id_or_prefix, ref=refs[0])}"
    )


def removed_message(exp_id: str, place: str, store: Any = None) -> str:
    """What a read across refs says of an experiment asked for by id whose newest state
    is its removal by ``place`` (the working tree, or a ref): for the working tree's,
    the commit of ``store``'s branch that removed it (a revert, a ``kexp rm``
    committed), when one did. ``store``: a :class:`kexp.storage.store.Store`."""
    if place == LOCAL:
        tail = "read across refs it is gone, though older commits hold it"
        by = _removed_by(store, exp_id) if store is not None else None
        if by is not None:
            return (
                f"experiment {exp_id} was removed by commit {by[0][:12]} ({by[1]}), its "
                f"newest state: {tail}; {LOG_REMOVED.say(id=exp_id[:10])}"
            )
    else:
        tail = f"read across refs it is gone ({READ_WITHOUT_REFS.say()}, if it holds one)"
    return f"experiment {exp_id} {removed_phrase(place)}, its newest state: {tail}"


def _removed_by(store: Any, exp_id: str) -> tuple[str, str] | None:
    """The commit of ``HEAD``'s history that removed ``exp_id``'s file (hash, subject);
    None when none did (a removal not committed) or outside git."""
    from kexp.gitops.log import removed_by
    from kexp.storage.snapshot import StoreLocation

    try:
        location = StoreLocation.of(store.root)
        return removed_by(location.repo, "HEAD", location.folder, exp_id)
    except KexpError:
        return None
