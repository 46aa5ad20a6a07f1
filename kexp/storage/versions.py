"""Git trees read once and kept, and which version of an experiment is the newest:
the machinery of a read across refs (:mod:`kexp.storage.refs`, whose module
documentation states the rule of the newest version and of a removal)."""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from kexp.format.rules import EXPERIMENT_NAME
from kexp.gitops import git as kgit
from kexp.gitops import objects as gitobjects
from kexp.gitops.rewrites import rewritten_on
from kexp.storage.layout import layout_twins
from kexp.storage.rows import Seen

if TYPE_CHECKING:
    from kexp.gitops.git import Worktree
    from kexp.gitops.objects import PathChange
    from kexp.storage.cache import Cache

#: The modes of a folder and of a regular file in a git tree.
TREE_MODE = "40000"
FILE_MODES = frozenset({"100644", "100755"})
#: Every place's folders: folder (relative to ``experiments/``, "" or ending with "/")
#: → its tree hash in each place (``HEAD``'s, then each ref's; None: not there).
PlaceFolders = dict[str, tuple[str | None, ...]]
#: One file of an experiment: (path relative to ``experiments/``, content key, the
#: places holding it: 0 the working tree, n the n-th ref).
Version = tuple[str, bytes, tuple[int, ...]]
#: How a removal on the default branch says the working tree holds the experiment still.
HELD = "the working tree holds it from before that removal"
#: How many earlier values of a ref its reflog is read for (:meth:`Newest._copied`).
REFLOG_DEPTH = 100
#: A file of a duplicate id left out of a read: (its path, content key, the place, the
#: path kept there).
Duplicate = tuple[str, bytes, int, str]
#: The experiments of one file (the same in every place holding it): id → it.
Single = dict[str, Version]


class GitTrees:
    """Git trees by hash, read once (one ``git cat-file --batch`` for those not kept
    yet) and kept in the cache: a tree never changes."""

    def __init__(self, repo: Worktree, cache: Cache, *, keep_bases: bool = True) -> None:
        self._repo = repo
        self._cache = cache
        #: Whether merge bases are kept in the cache: not where the history can change
        #: without a commit changing (a shallow clone, replace refs).
        self._keep_bases = keep_bases
        self._known: dict[str, list[tuple[str, str, str]]] = {}
        self._subtrees: dict[str, dict[str, str]] = {}
        self._keys: dict[str, frozenset[bytes]] = {}
        self._files: dict[str, dict[str, bytes]] = {}
        self._roots: dict[tuple[str, str], str | None] = {}

    @property
    def repo(self) -> Worktree:
        """The repository the trees are read from."""
        return self._repo

    def files(self, tree: str) -> dict[str, bytes]:
        """Name → content key of the experiment files (regular files) of ``tree``."""
        found = self._files.get(tree)
        if found is None:
            fullmatch = EXPERIMENT_NAME.fullmatch
            found = self._files[tree] = {
                name: bytes.fromhex(sha)
                for mode, name, sha in self.entries(tree)
                if mode in FILE_MODES and fullmatch(name)
            }
        return found

    def subtrees(self, tree: str) -> dict[str, str]:
        """Name → hash of the folders of ``tree``."""
        found = self._subtrees.get(tree)
        if found is None:
            found = self._subtrees[tree] = {
                name: sha for mode, name, sha in self.entries(tree) if mode == TREE_MODE
            }
        return found

    def roots(self, commits: Sequence[str | None], folder: str) -> list[str | None]:
        """The tree of ``folder`` at each of ``commits`` (None: no commit, or no such
        folder there), asked of git at once and kept for :meth:`root`."""
        wanted = [commit for commit in dict.fromkeys(commits) if commit]
        names = gitobjects.object_names(self._repo, [f"{c}:{folder}" for c in wanted])
        for commit, found in zip(wanted, names, strict=True):
            self._roots[commit, folder] = found[0] if found and found[1] == "tree" else None
        return [self._roots[commit, folder] if commit else None for commit in commits]

    def root(self, commit: str, folder: str) -> str | None:
        """The tree of ``folder`` at ``commit`` (None: no such folder there)."""
        if (commit, folder) not in self._roots:
            names = gitobjects.object_names(self._repo, [f"{commit}:{folder}"])
            found = names[0] if names else None
            self._roots[commit, folder] = found[0] if found and found[1] == "tree" else None
        return self._roots[commit, folder]

    def entries(self, tree: str) -> list[tuple[str, str, str]]:
        """(mode, name, hash) of each entry of ``tree``."""
        if tree not in self._known:
            self.load([tree])
        return self._known[tree]

    def load(self, trees: Sequence[str]) -> None:
        """Read the trees not known yet: from the cache, else from git (and keep them)."""
        wanted = [tree for tree in dict.fromkeys(trees) if tree not in self._known]
        if not wanted:
            return
        kept = self._cache.objects([f"tree:{tree}" for tree in wanted])
        for tree in wanted:
            value = kept.get(f"tree:{tree}")
            if value is not None:
                self._known[tree] = value
        missing = [tree for tree in wanted if tree not in self._known]
        if missing:
            new: dict[str, Any] = {}
            for tree, data in kgit.iter_blobs(self._repo, missing):
                entries = gitobjects.parse_tree(data) if data is not None else []
                self._known[tree] = entries
                new[f"tree:{tree}"] = entries
            self._cache.save_objects(new)

    def place_folders(self, roots: Sequence[str | None]) -> PlaceFolders:
        """Every folder below any of ``roots`` (each place's ``experiments/`` tree; None
        where it has none) → its tree in each place (None where it has no such folder);
        hidden folders (as the working tree's walk) left out. Read level by level, each
        distinct tree once: a folder the same in every place is read once for all."""
        count = len(roots)
        found: PlaceFolders = {}
        level = [("", tuple(roots))] if any(roots) else []
        while level:
            self.load([tree for _, trees in level for tree in trees if tree is not None])
            following: list[tuple[str, tuple[str | None, ...]]] = []
            for folder, trees in level:
                found[folder] = trees
                by_tree: dict[str, list[int]] = {}
                for place, tree in enumerate(trees):
                    if tree is not None:
                        by_tree.setdefault(tree, []).append(place)
                children: dict[str, list[str | None]] = {}
                for tree, places in by_tree.items():
                    for mode, name, sha in self._known[tree]:
                        if mode == TREE_MODE and not name.startswith("."):
                            held = children.setdefault(f"{folder}{name}/", [None] * count)
                            for place in places:
                                held[place] = sha
                following += [(child, tuple(held)) for child, held in children.items()]
            level = following
        return found

    def merge_base(self, first: str, second: str) -> str | None:
        """The merge base of two commits (kept: it never changes while the history is
        complete and nothing replaced; asked of git each time otherwise)."""
        if not self._keep_bases:
            return gitobjects.merge_base(self._repo, first, second)
        pair = ":".join(sorted((first, second)))
        kept = self._cache.objects([f"base:{pair}"])
        if f"base:{pair}" in kept:
            return kept[f"base:{pair}"] or None
        found = gitobjects.merge_base(self._repo, first, second)
        self._cache.save_objects({f"base:{pair}": found or ""})
        return found

    def keys_at(self, commit: str, folder: str) -> frozenset[bytes]:
        """The content keys of every experiment file of the store at ``commit`` (hidden
        folders left out, as a read leaves them), kept for the read."""
        found = self._keys.get(commit)
        if found is None:
            keys: set[bytes] = set()
            pending = [tree] if (tree := self.root(commit, folder)) else []
            while pending:
                tree = pending.pop()
                keys.update(self.files(tree).values())
                pending += [sha for name, sha in self.subtrees(tree).items() if name[:1] != "."]
            found = self._keys[commit] = frozenset(keys)
        return found

    def history(self, commit: str, folder: str, paths: Sequence[str]) -> frozenset[bytes]:
        """The content keys ``paths`` (relative to ``folder``, the store's folder in the
        repository) held in the history of ``commit``."""
        found = gitobjects.path_history_blobs(
            self._repo, commit, [f"{folder}/{path}" for path in paths]
        )
        return frozenset(bytes.fromhex(blob) for blob in found)

    def changes(
        self,
        commit: str | Sequence[str],
        folder: str,
        paths: Sequence[str],
        exclude: str | None = None,
    ) -> list[tuple[str, int, list[PathChange]]]:
        """The commits of ``commit``'s history (or several commits'), less ``exclude``'s,
        that changed ``paths`` (relative to ``folder``, the store's folder in the
        repository), newest first, with what each changed of them
        (:func:`kexp.gitops.objects.path_changes`, its paths relative to ``folder``
        too): kept in the cache while the history is complete, as merge bases are."""
        wanted = sorted(set(paths))
        tips = commit if isinstance(commit, str) else ",".join(commit)
        name = (
            f"changes:{tips}:{exclude or ''}:"
            + hashlib.sha1("\n".join(wanted).encode("utf-8", "surrogateescape")).hexdigest()
        )
        if self._keep_bases:
            kept = self._cache.objects([name])
            if name in kept:
                return [
                    (sha, date, [(p, tuple(o), n) for p, o, n in got])
                    for sha, date, got in kept[name]
                ]
        prefix = f"{folder}/"
        found = [
            (sha, date, [(path.removeprefix(prefix), olds, new) for path, olds, new in got])
            for sha, date, got in gitobjects.path_changes(
                self._repo, commit, [prefix + path for path in wanted], exclude=exclude
            )
        ]
        if self._keep_bases:
            self._cache.save_objects({name: found})
        return found

    def blob_at(self, commit: str, folder: str, path: str) -> bytes | None:
        """The content key of ``path`` (relative to ``folder``, the store's folder in the
        repository) at ``commit``; None when there is no file there."""
        tree = self.root(commit, folder)
        if tree is None:
            return None
        *parents, name = path.split("/")
        for part in parents:
            tree = self.subtrees(tree).get(part, "")
            if not tree:
                return None
        return self.files(tree).get(name)


class Newest:
    """Which version of each experiment is the newest (see :mod:`kexp.storage.refs`)."""

    def __init__(
        self,
        places: tuple[str, ...],
        folder: str,
        git: GitTrees,
        commits: list[str | None],
        dates: list[int],
        defaults: frozenset[int] = frozenset(),
        tracking: dict[int, frozenset[int]] | None = None,
        own: frozenset[int] = frozenset(),
        ref_names: Sequence[str] = (),
    ) -> None:
        self._places = places
        #: The places that are a remote's default branch (``origin/HEAD``'s target).
        self._defaults = defaults
        self._folder = folder
        self._git = git
        #: Each place's commit: place 0 (the working tree) has HEAD's.
        self._commits = commits
        self._dates = dates
        self._bases: dict[tuple[int, int], str | None] = {}
        #: Each local branch's place → its remote-tracking branches' places.
        self._tracking = tracking or {}
        #: The places that are this clone's own branches (``refs/heads/``): with ``HEAD``,
        #: what its working tree's edits were made on.
        self._own = own
        self._redone: dict[tuple[str, str], bool] = {}
        #: Each place's full ref name ("" for the working tree): whose reflog says
        #: what a ref held before a force-push (:meth:`_copied`).
        self._ref_names = tuple(ref_names)
        #: Each place → the paths (relative to the store's folder) a judgement of
        #: diverged versions may ask of its history: those of every experiment of
        #: several versions it holds, walked at once (:meth:`_walk`).
        self._asked: dict[int, set[str]] = {}
        #: Each commit walked → the paths walked, the commits found (hash, date), newest
        #: first, and each path's changes (the commit's index, blobs before, after).
        self._walks: dict[
            str,
            tuple[
                frozenset[str],
                list[tuple[str, int]],
                dict[str, list[tuple[int, tuple[str, ...], str]]],
            ],
        ] = {}

    def choose(
        self, versions: dict[str, list[Version]], noted: dict[str, tuple[str, ...]]
    ) -> dict[str, tuple[list[tuple[str, bytes]], Seen]]:
        """Each experiment's chosen files (of several versions or files) and where they
        were found (``noted``: the refs that removed one, shown all the same)."""
        names = self._places
        chosen: dict[str, tuple[list[tuple[str, bytes]], Seen]] = {}
        for files in versions.values():
            paths = {twin for path, _, _ in files for twin in layout_twins(path)}
            for place in {p for _, _, where in files for p in where}:
                self._asked.setdefault(place, set()).update(paths)
        for exp_id, files in versions.items():
            # Each place's state of this experiment: the (path, key) of its files. Places
            # holding the same contents hold one state, wherever their paths (a branch
            # in the month layout, a migrated one: kexp.layout), shown at the first's.
            held: dict[int, list[tuple[str, bytes]]] = {}
            for path, key, places in files:
                for place in places:
                    held.setdefault(place, []).append((path, key))
            states: dict[tuple[bytes, ...], tuple[tuple[tuple[str, bytes], ...], list[int]]] = {}
            for place in sorted(held):
                state = tuple(sorted(held[place]))
                states.setdefault(_contents(state), (state, []))[1].append(place)
            ordered = list(states.values())
            best, diverged = ordered[0], False
            for other in ordered[1:]:
                newer, by_date = self._newer(exp_id, other, best)
                if newer:
                    best, diverged = other, by_date
                else:
                    diverged = diverged or by_date
            others = tuple(names[p] for entry in ordered if entry is not best for p in entry[1])
            apart = (  # the others that changed too since they parted from the one taken
                tuple(
                    names[p]
                    for entry in ordered
                    if entry is not best and self._newer(exp_id, entry, best)[1]
                    for p in entry[1]
                )
                if diverged
                else ()
            )
            seen = self.seen(tuple(best[1]), others, apart, noted.get(exp_id, ()))
            chosen[exp_id] = (list(best[0]), seen)
        return chosen

    def removed(
        self, single: Single, several: dict[str, list[Version]]
    ) -> tuple[dict[str, str], dict[str, tuple[str, ...]]]:
        """The experiments whose newest state is their removal, and those a ref removed
        that are read all the same. A place removed an experiment when it lacks it and
        its commit parted from each place holding it at a commit holding that very
        version (it removed it since; the holder did not change it): a branch that
        merged one, then removed it; the working tree (at ``HEAD``'s commit) after
        ``kexp rm``, unless another place corrected it since. An uncommitted file of
        the working tree is newest: never removed. The working tree's removal hides the
        experiment, and so does a remote's default branch's unless another default
        branch holds it (the working tree's file, as ``HEAD`` has it, is said held from
        before that removal); another ref's hides it only when neither the working tree
        nor a remote's default branch holds it: a removal waiting on a side branch (a
        pull request under review) does not hide what the reader or the default branch
        holds, which is read as the places holding it have it, noting the refs that
        removed it. Each hidden one's id → the first place found removing it; each noted
        one's id → the refs."""
        commits, places = self._commits, len(self._commits)
        at_commit: dict[str | None, int] = {}  # a commit → a ref at it (holding its files)
        for place in range(places - 1, 0, -1):
            at_commit[commits[place]] = place
        folder = self._folder
        stores = {0} | {
            p
            for p in range(1, places)
            if commits[p] is not None and self._git.root(str(commits[p]), folder) is not None
        }
        found: dict[str, str] = {}
        noted: dict[str, tuple[str, ...]] = {}
        waiting: dict[str, dict[int, tuple[str, bytes]]] = {}  # held by side refs alone
        held = [(i, [v]) for i, v in single.items()] + list(several.items())
        for exp_id, versions in held:
            keys = {p: (path, key) for path, key, where in versions for p in where}
            if len(keys) == places:
                continue
            if 0 in keys:
                state = tuple(sorted((path, key) for path, key, where in versions if 0 in where))
                if self._uncommitted(exp_id, state, [0]):
                    continue
            # Held by the reader or a default branch: a ref's removal is noted, not obeyed.
            kept = 0 in keys or not self._defaults.isdisjoint(keys)
            removers: list[str] = []
            for place in range(places):
                if place in keys or commits[place] is None or place not in stores:
                    continue  # (a ref without a store removed no experiment: it has none)
                if all(
                    self._holds(self._merge_base(place, h), key, keys, at_commit)
                    for h, (_, key) in keys.items()
                ):
                    if place == 0 or not kept:
                        found[exp_id] = self._places[place]
                        break
                    if place in self._defaults and self._defaults.isdisjoint(keys):
                        # The default branch removed what the working tree holds as
                        # HEAD has it: a clone that fetched the removal, not pulled it.
                        found[exp_id] = f"{self._places[place]}, the default branch ({HELD})"
                        break
                    removers.append(self._places[place])
            else:
                if removers:
                    noted[exp_id] = tuple(removers)
                elif not kept:
                    waiting[exp_id] = keys
        found.update(self._landed_and_removed(waiting, stores))
        return found, noted

    def _landed_and_removed(
        self, waiting: dict[str, dict[int, tuple[str, bytes]]], stores: set[int]
    ) -> dict[str, str]:
        """Of the experiments side refs alone hold (``waiting``: id → each holding
        place's (path, key)), those the working tree's commit or a remote's default
        branch removed after landing a copy of them (a squash or rebase merge, then a
        revert): its history since it parted from each holder held that very version
        at one of the experiment's paths, and lacks it now. One git process for each
        pair of such a place and a holder, for the paths of all the experiments they
        share, kept in the cache."""
        if not waiting:
            return {}
        commits = self._commits
        lacking = [p for p in (0, *sorted(self._defaults)) if commits[p] and p in stores]
        found: dict[str, str] = {}
        for place in lacking:
            pairs: dict[int, set[str]] = {}
            for exp_id, keys in waiting.items():
                if exp_id not in found and place not in keys:
                    for holder, (path, _) in keys.items():
                        pairs.setdefault(holder, set()).update(layout_twins(path))
            held: dict[int, dict[str, set[str]]] = {}
            for holder, paths in pairs.items():
                base = self._merge_base(place, holder)
                blobs: dict[str, set[str]] = {}
                for _, _, changed in self._git.changes(
                    str(commits[place]), self._folder, sorted(paths), exclude=base
                ):
                    for path, olds, new in changed:
                        blobs.setdefault(path, set()).update((*olds, new))
                held[holder] = blobs
            for exp_id, keys in waiting.items():
                if exp_id in found or place in keys:
                    continue
                if all(
                    key.hex() in {b for twin in layout_twins(path) for b in held[h].get(twin, ())}
                    for h, (path, key) in keys.items()
                ):
                    found[exp_id] = self._places[place]
        return found

    def _merge_base(self, first: int, second: int) -> str | None:
        """The merge base of two places' commits (kept for the read)."""
        pair = (first, second) if first < second else (second, first)
        if pair not in self._bases:
            a, b = self._commits[first], self._commits[second]
            self._bases[pair] = self._git.merge_base(a, b) if a and b else None
        return self._bases[pair]

    def _holds(
        self,
        commit: str | None,
        key: bytes,
        keys: dict[int, tuple[str, bytes]],
        at_commit: dict[str | None, int],
    ) -> bool:
        """Whether ``commit`` holds this version of an experiment (``key``: its content,
        which names its id, wherever its path): known without git when a place read is
        at that commit (``keys``: what each place holding it holds)."""
        if commit is None:
            return False
        there = at_commit.get(commit)
        if there is not None:
            return keys.get(there, ("", b""))[1] == key
        return key in self._git.keys_at(commit, self._folder)

    def seen(
        self,
        places: tuple[int, ...],
        others: tuple[str, ...],
        diverged_on: tuple[str, ...],
        removed_on: tuple[str, ...] = (),
    ) -> Seen:
        """Where a version held by ``places`` was found (``removed_on``: the refs that
        removed the experiment, read all the same: see :meth:`removed`): the working
        tree when it holds it, else a remote's default branch holding it (what main
        holds is main's, though a side branch that merged main holds it too), else the
        ref holding it whose commit is the newest."""
        names = self._places
        defaults = [p for p in places if p in self._defaults]
        newest = max(defaults or places, key=lambda p: (self._dates[p], -p))
        ref = names[0] if 0 in places else names[newest]
        return Seen(ref, tuple(names[p] for p in places), others, diverged_on, removed_on)

    def _newer(
        self,
        exp_id: str,
        first: tuple[tuple[tuple[str, bytes], ...], list[int]],
        second: tuple[tuple[tuple[str, bytes], ...], list[int]],
    ) -> tuple[bool, bool]:
        """Whether the state ``first`` (files, places) is newer than ``second``, and
        whether that was decided by the dates of their last changes (both changed apart:
        neither change made on the other's, nor either history holding the other)."""
        mine = [self._uncommitted(exp_id, state, places) for state, places in (first, second)]
        if mine[0] != mine[1]:
            edit, other = (first, second) if mine[0] else (second, first)
            if (
                self._descends(other, edit[0])
                or self._superseded(edit[1], other[1])
                or self._copied(other, edit[0])
            ):
                return mine[1], False  # the working tree's is older: not an edit
        if mine[0] or mine[1]:  # the working tree's edit is newest; diverged when the
            other = second if mine[0] else first  # other changed what this clone never had
            return mine[0], not self._had(other)
        if self._superseded(second[1], first[1]):
            return True, False
        if self._superseded(first[1], second[1]):
            return False, False
        a, b = self._last_change(first), self._last_change(second)
        if a[0] and b[0] and a[0] != b[0]:
            base = self._git.merge_base(a[0], b[0])
            if base == b[0]:  # first's change was made on second's: it came later
                return True, False
            if base == a[0]:
                return False, False
        # Neither change made on the other (a squash or rebase merge copies commits):
        # the version whose history held the other's, and changed it since, is newer.
        held = [self._held(mine, theirs[0]) for mine, theirs in ((first, second), (second, first))]
        if held[0] != held[1]:
            return held[0], False
        return a[1] > b[1], True

    def _last_change(
        self, state: tuple[tuple[tuple[str, bytes], ...], list[int]]
    ) -> tuple[str | None, int]:
        """The commit (hash, date) at which the version ``state`` (files, places) was
        last changed: of each place holding it, the newest commit of its history that
        made one of its files what it is (a revert on the default branch is a change,
        made later than the commit it restores); the first place's commit and the
        newest date of the places where no change is found."""
        files, places = state
        paths = sorted({twin for path, _ in files for twin in layout_twins(path)})
        keys = {key.hex() for _, key in files}
        best: tuple[str | None, int] = (None, -1)
        for place in sorted(places, key=lambda p: (-self._dates[p], p)):
            if self._commits[place] is None or self._dates[place] < best[1]:
                continue  # (a commit's changes are no later than its own date)
            _, order, by_path = self._walk(place, paths)
            lines = sorted(line for path in paths for line in by_path.get(path, ()))
            for at in dict.fromkeys(n for n, _, _ in lines):
                made = {new for n, _, new in lines if n == at}
                before = {old for n, olds, _ in lines if n == at for old in olds}
                if (made - before) & keys:
                    sha, date = order[at]
                    if date > best[1] or (  # as new: the one made on the other (a revert)
                        date == best[1] and sha != best[0] and self._git.merge_base(
                            sha, str(best[0])) == best[0]
                    ):  # fmt: skip
                        best = order[at]
                    break
        if best[0] is None:
            return self._commit(places), self._date(places)
        return best

    def _held(
        self,
        state: tuple[tuple[tuple[str, bytes], ...], list[int]],
        other: tuple[tuple[str, bytes], ...],
    ) -> bool:
        """Whether the history of a place holding ``state`` (files, places) held each
        of the files of ``other`` (at their paths or their twins in the other layout)."""
        paths = sorted({twin for path, _ in (*state[0], *other) for twin in layout_twins(path)})
        keys = {key.hex() for _, key in other}
        for place in state[1]:
            if self._commits[place] is None:
                continue
            _, _, by_path = self._walk(place, paths)
            seen = {
                b for path in paths for _, olds, new in by_path.get(path, ()) for b in (*olds, new)
            }
            if keys <= seen:
                return True
        return False

    def _walk(
        self, place: int, paths: Sequence[str]
    ) -> tuple[
        frozenset[str], list[tuple[str, int]], dict[str, list[tuple[int, tuple[str, ...], str]]]
    ]:
        """The changes of the history of ``place``'s commit to ``paths`` and to every
        path asked of it (:attr:`_asked`): one git process for all, kept for the read."""
        commit = str(self._commits[place])
        known = self._walks.get(commit)
        if known is not None and known[0].issuperset(paths):
            return known
        wanted = frozenset((*paths, *self._asked.get(place, ()), *(known[0] if known else ())))
        order: list[tuple[str, int]] = []
        by_path: dict[str, list[tuple[int, tuple[str, ...], str]]] = {}
        for n, (sha, date, changed) in enumerate(
            self._git.changes(commit, self._folder, sorted(wanted))
        ):
            order.append((sha, date))
            for path, olds, new in changed:
                by_path.setdefault(path, []).append((n, olds, new))
        found = self._walks[commit] = (wanted, order, by_path)
        return found

    def _uncommitted(
        self, exp_id: str, state: tuple[tuple[str, bytes], ...], places: list[int]
    ) -> bool:
        """Whether the state is the working tree's and not HEAD's (an uncommitted edit)."""
        if 0 not in places:
            return False
        head = self._commits[0]
        if head is None:
            return True
        return self._state_at(head, state, ()) != _contents(state)

    def _descends(
        self,
        state: tuple[tuple[tuple[str, bytes], ...], list[int]],
        older: tuple[tuple[str, bytes], ...],
    ) -> bool:
        """Whether the version ``state`` (files, places: a ref's) descends from the
        contents ``older`` (the working tree's): each of them was held at those paths in
        its commit's history (what this clone published to a side branch that another
        clone corrected since is no edit of the working tree's, but an older version)."""
        commit = self._commit(state[1])
        if commit is None:
            return False
        paths = {twin for path, _ in (*state[0], *older) for twin in layout_twins(path)}
        held = self._git.history(commit, self._folder, sorted(paths))
        return all(key in held for _, key in older)

    def _copied(
        self,
        state: tuple[tuple[tuple[str, bytes], ...], list[int]],
        older: tuple[tuple[str, bytes], ...],
    ) -> bool:
        """Whether the working tree's uncommitted contents ``older`` are what a
        remote-tracking branch holding ``state`` (files, places) held before it was
        rewritten: a commit its reflog names held each of them at those paths (a copy
        taken from a teammate's pull-request branch, unchanged, which its author amended
        and force-pushed since). This clone's own branches are not asked: an older
        version put back in the working tree on purpose is an edit."""
        paths = sorted({twin for path, _ in (*state[0], *older) for twin in layout_twins(path)})
        keys = {key.hex() for _, key in older}
        for place in state[1]:
            name = self._ref_names[place] if place < len(self._ref_names) else ""
            commit = self._commits[place]
            if not name.startswith("refs/remotes/") or commit is None:
                continue
            before = [
                sha
                for sha in gitobjects.reflog_commits(self._git.repo, name, REFLOG_DEPTH)
                if sha != commit
            ]
            if not before:
                continue
            held = {
                blob
                for _, _, changed in self._git.changes(before, self._folder, paths)
                for _, olds, new in changed
                for blob in (*olds, new)
            }
            if keys <= held:
                return True
        return False

    def _had(self, state: tuple[tuple[tuple[str, bytes], ...], list[int]]) -> bool:
        """Whether this clone had the version ``state`` (files, places: a ref's) before
        its working tree's edit: ``HEAD`` or one of its own branches held it (each of its
        files) in its history. A version it never had was changed there since: a
        teammate's correction or remeasure, which the edit did not start from."""
        held_by = [0, *sorted(self._own)]
        paths = sorted({twin for path, _ in state[0] for twin in layout_twins(path)})
        for place in held_by:
            commit = self._commits[place]
            if commit is None:
                continue
            held = self._git.history(commit, self._folder, paths)
            if all(key in held for _, key in state[0]):
                return True
        return False

    def _superseded(self, older: list[int], newer: list[int]) -> bool:
        """Whether a local branch among the places ``older`` was rewritten on its
        remote-tracking branch among ``newer``: a reviewer amended or rebased the commits
        this clone published and force-pushed (:func:`kexp.gitops.rewrites.rewritten_on`),
        so the branch's version is the reviewed one."""
        for local in older:
            for remote in self._tracking.get(local, frozenset()) & set(newer):
                pair = (str(self._commits[remote]), str(self._commits[local]))
                if pair not in self._redone:
                    self._redone[pair] = pair[0] != pair[1] and rewritten_on(self._git.repo, *pair)
                if self._redone[pair]:
                    return True
        return False

    def _commit(self, places: list[int]) -> str | None:
        """The commit of a state: HEAD's for the working tree, else the first ref's."""
        return self._commits[places[0]]

    def _date(self, places: list[int]) -> int:
        return max(self._dates[p] for p in places)

    def _state_at(
        self,
        commit: str,
        first: tuple[tuple[str, bytes], ...],
        second: tuple[tuple[str, bytes], ...],
    ) -> tuple[bytes, ...]:
        """The contents (keys, sorted) a commit holds at the paths of either state, or
        at those paths in the other layout (a file kexp migrate-layout moved is the
        same file)."""
        paths = sorted({twin for path, _ in (*first, *second) for twin in layout_twins(path)})
        found = []
        for path in paths:
            key = self._git.blob_at(commit, self._folder, path)
            if key is not None:
                found.append(key)
        return tuple(sorted(found))


def _contents(state: tuple[tuple[str, bytes], ...]) -> tuple[bytes, ...]:
    """What a state holds, whatever its paths: its files' content keys, sorted."""
    return tuple(sorted(key for _, key in state))


def one_file_a_place(single: Single, several: dict[str, list[Version]]) -> list[Duplicate]:
    """Each place holding an experiment at several paths (a duplicate id: two branches
    created the same id) keeps one of them, so that the experiment is one entry: the
    file another place holds alike, else one at a path another place holds, else the
    first in path order. The others are taken out of the read (``several`` changed in
    place; an id left with one version moves to ``single``) and returned, each as (its
    path, content key, the place, the path kept there)."""
    dropped: list[Duplicate] = []
    for exp_id in list(several):
        versions = several[exp_id]
        by_place: dict[int, list[tuple[str, bytes]]] = {}
        for path, key, places in versions:
            for place in places:
                by_place.setdefault(place, []).append((path, key))
        lost: set[tuple[str, bytes, int]] = set()
        for place, files in by_place.items():
            if len(files) < 2:
                continue
            elsewhere = {f for other, held in by_place.items() if other != place for f in held}
            paths = {path for path, _ in elsewhere}
            kept = min(files, key=lambda f: (f not in elsewhere, f[0] not in paths, f[0]))
            for path, key in sorted(files):
                if (path, key) != kept:
                    lost.add((path, key, place))
                    dropped.append((path, key, place, kept[0]))
        if not lost:
            continue
        left = [
            (path, key, kept_in)
            for path, key, places in versions
            if (kept_in := tuple(p for p in places if (path, key, p) not in lost))
        ]
        if len(left) == 1:
            single[exp_id] = left[0]
            del several[exp_id]
        else:
            several[exp_id] = left
    return dropped
