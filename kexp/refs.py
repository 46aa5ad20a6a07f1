"""The store read across refs: the working tree plus the store at every matching branch,
remote-tracking branch or tag, read from git objects without a checkout.

``RefsStore(store, patterns=["origin/*"])`` (or ``all_refs=True``) answers the read API
(``list_experiments``, ``top_experiments``, ``get_experiment``, lineage) over all of them.
An experiment found in several places with the same content (the same blob) is one
entry; found with different content (a correction on one branch), each version is an
entry of its own, the newest commit's first (the working tree counts as newest).
:meth:`RefsStore.where` says where an entry was found and which refs hold other
versions.

Fast because git is content-addressed: what is parsed from a blob is kept by its hash
in ``.kexp/blobs-<code>.sqlite`` forever (a blob never changes); a cold read streams
each distinct blob once through one ``git cat-file --batch``.
"""

from __future__ import annotations

import contextlib
import dataclasses
import fnmatch
import functools
import heapq
import json
import sqlite3
import warnings
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from kexp import ids
from kexp.campaign import Derivation, derive
from kexp.errors import (
    AmbiguousIdError,
    ExperimentNotFoundError,
    InvalidExperimentWarning,
    KexpError,
    KexpWarning,
)
from kexp.model import BODY_FIELDS, PENDING_STATUSES, KernelExperiment, attach
from kexp.query import build_filters, chronological, matches, rank, ranking_leaves_out
from kexp.sources import EXPERIMENTS_DIR
from kexp.store import Store
from kexp.validate import EXPERIMENT_NAME, check_bytes

if TYPE_CHECKING:
    from kexp.dedupe import Repeat
    from kexp.git import RefInfo, Worktree

#: The name the working tree goes by among the refs.
WORKING_TREE = "(working tree)"
_WORKING_TREE_DATE = 1 << 62  # newer than any commit
_REGULAR_MODES = frozenset({"100644", "100755"})
_SQL_BATCH = 900
#: Above this many blobs wanted, the cache's table is read through once.
_SCAN_ABOVE = 2000
_SHOWN_REFS = 5


@dataclasses.dataclass(frozen=True)
class Sighting:
    """Where one version of an experiment was found."""

    #: Where it was found first: the newest commit's ref (the working tree only when no
    #: ref holds this version).
    ref: str
    #: Every place holding this very content, newest first (the working tree first).
    refs: tuple[str, ...]
    #: The refs holding other versions of the same experiment (a correction), newest
    #: first; empty when every place agrees.
    other_versions: tuple[str, ...]
    #: The file's hash (git's blob id).
    blob: str

    @property
    def note(self) -> str:
        """One line for people: where the other versions are ("" when there are none)."""
        if not self.other_versions:
            return ""
        shown = ", ".join(self.other_versions[:_SHOWN_REFS])
        more = len(self.other_versions) - _SHOWN_REFS
        return f"another version on {shown}" + (f" and {more} more" if more > 0 else "")

    def to_dict(self) -> dict[str, Any]:
        """As ``--json`` adds it to each experiment."""
        data: dict[str, Any] = {"ref": self.ref, "refs": list(self.refs)}
        if self.other_versions:
            data["other_versions"] = list(self.other_versions)
            data["note"] = self.note
        return data


@dataclasses.dataclass
class _Version:
    """One distinct content (blob) of an experiment and the places holding it."""

    exp_id: str
    blob: str
    row: tuple[Any, ...]  # what the blob cache keeps of it (see _BlobCache)
    paths: list[str]  # the repository paths holding it
    places: list[tuple[int, str, str]] | None = None  # (date, place, path), newest first


def _parallel(
    jobs: dict[str, Callable[[], Any]], meanwhile: Callable[[], Any] | None = None
) -> dict[str, Any]:
    """Run each job in a thread of its own (they wait on git processes), and
    ``meanwhile`` in this one; the jobs' results by name. The first failure is raised."""
    import threading

    results: dict[str, Any] = {}
    failures: list[BaseException] = []

    def run(name: str, job: Callable[[], Any]) -> None:
        try:
            results[name] = job()
        except BaseException as exc:  # raised again below, in the caller's thread
            failures.append(exc)

    threads = [threading.Thread(target=run, args=item, daemon=True) for item in jobs.items()]
    for thread in threads:
        thread.start()
    try:
        if meanwhile is not None:
            meanwhile()
    finally:
        for thread in threads:
            thread.join()
    if failures:
        raise failures[0]
    return results


def _name_id(path: str, prefix: str) -> str | None:
    """The id in an experiment file's name under ``prefix`` (None: not an experiment
    file of the store, or one in a hidden folder)."""
    if not path.startswith(prefix):
        return None
    rest = path[len(prefix) :]
    if rest.startswith(".") or "/." in rest:
        return None
    found = EXPERIMENT_NAME.fullmatch(rest, rest.rfind("/") + 1)
    return found.group(1) if found else None


def matching_refs(repo: Worktree, patterns: Sequence[str], all_refs: bool) -> list[RefInfo]:
    """The refs matching ``patterns`` (each checked first; ``*`` matches any characters,
    a pattern matches a full name or one under ``refs/``, ``refs/heads/``,
    ``refs/remotes/`` or ``refs/tags/``), or every branch and remote-tracking branch
    with ``all_refs``."""
    from kexp import git as kgit

    checked = [kgit.check_ref_pattern(p) for p in patterns]
    found = []
    unmatched = dict.fromkeys(checked)
    for ref in kgit.list_refs(repo):
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
    for pattern in unmatched:
        warnings.warn(
            f"no ref matches {pattern!r}: check the spelling (git branch -a lists the refs), "
            "or 'git fetch' first",
            KexpWarning,
            stacklevel=3,
        )
    return found


class RefsStore(Store):
    """The working tree and the store at matching refs, read as one. A create goes to
    the working tree (and warns when its code change was recorded on a ref too);
    updates and deletes are refused."""

    def __init__(
        self, store: Store, patterns: Sequence[str] = (), *, all_refs: bool = False
    ) -> None:
        from kexp import git as kgit

        if not store.is_working_tree:
            raise KexpError("read across refs from the working tree: give --rev or --refs")
        super().__init__(store.root, code_repo=store.code_repo, settings=store.settings)
        if isinstance(patterns, str):
            patterns = [patterns]
        self.worktree = kgit.find_worktree(self.root)
        self.toplevel = Path(self.worktree.working_tree_dir).resolve()
        relative = self.root.relative_to(self.toplevel).as_posix()
        self.folder = EXPERIMENTS_DIR if relative == "." else f"{relative}/{EXPERIMENTS_DIR}"
        self.refs = matching_refs(self.worktree, list(patterns), all_refs)
        self.patterns = tuple(patterns)
        self._versions: dict[str, list[_Version]] | None = None
        self._sources: list[tuple[int, str]] = []
        self._fronts: dict[str, str] = {}
        self._known: dict[str, tuple[Any, ...]] = {}  # cache rows kept with the base tree
        self._base_files: dict[str, str] = {}
        self._deltas: list[dict[str, str]] = []
        self._handed: dict[int, tuple[KernelExperiment, _Version, list[_Version]]] = {}
        self._derived: Derivation | None = None
        self._deriving = False

    def __repr__(self) -> str:
        return f"RefsStore({str(self.root)!r}, {list(self.patterns)!r})"

    # --- where each experiment was found ------------------------------------------

    def where(self, exp: KernelExperiment) -> Sighting | None:
        """Where an experiment this store handed out was found (None for another)."""
        handed = self._handed.get(id(exp))
        if handed is None or handed[0] is not exp:
            return None
        _, version, versions = handed
        refs = tuple(dict.fromkeys(ref for _, ref, _ in self._places(version)))
        named = [r for r in refs if r != WORKING_TREE]
        others = tuple(
            dict.fromkeys(
                ref
                for other in versions
                if other is not version
                for _, ref, _ in self._places(other)
            )
        )
        return Sighting(named[0] if named else refs[0], refs, others, version.blob)

    def versions(self, exp_id: str) -> list[KernelExperiment]:
        """Every version of an experiment (distinct contents), the newest first."""
        full = self.resolve_id(exp_id)
        found = self._all()[full]
        return [self._experiment(v, found, whole=True) for v in found]

    # --- the read API -------------------------------------------------------------

    def list_experiments(
        self, *, strict: bool = False, brief: bool = False, **filters: Any
    ) -> list[KernelExperiment]:
        """Every version matching ``filters``, oldest first (see :meth:`Store.list_experiments`)."""
        found = self._matching(filters, brief=brief)
        return chronological(found)

    def top_experiments(
        self,
        max_results: int | None = None,
        *,
        include_buggy: bool = False,
        include_pending: bool = False,
        include_controls: bool = False,
        strict: bool = False,
        brief: bool = False,
        by: str = "cumulative",
        **filters: Any,
    ) -> list[KernelExperiment]:
        """The best versions (see :meth:`Store.top_experiments`)."""
        from kexp.query import RANKINGS, rank_by

        limit = max(0, self.settings.top_default if max_results is None else max_results)
        skip_buggy, skip_pending = ranking_leaves_out(
            filters, include_buggy=include_buggy, include_pending=include_pending
        )
        tags = filters.get("tags")
        asked = [tags] if isinstance(tags, str) else list(tags or ())
        skip_controls = not include_controls and "control" not in asked
        if by != "score" or skip_controls:
            if by not in RANKINGS:
                raise KexpError(f"cannot rank by {by!r}; use one of {', '.join(RANKINGS)}")
            candidates = self._matching(filters, brief=True)
            candidates = [
                e
                for e in candidates
                if not (skip_buggy and e.is_buggy)
                and not (skip_pending and e.status in PENDING_STATUSES)
                and not (skip_controls and e.is_control)
            ]
            best = rank_by(candidates, by, lambda e: e.derived)[:limit]
            return best if brief else [self._whole(e) for e in best]
        versions = self._all()
        if not filters:
            # Ranked from the cached columns: only the best are made into experiments.
            rows = [
                (v.row[_SCORE], v, group)
                for group in versions.values()
                for v in group
                if not (skip_buggy and v.row[_BUGGY])
                and not (skip_pending and v.row[_STATUS] in PENDING_STATUSES)
            ]
            if limit == 0 or not rows:
                return []
            chosen = heapq.nlargest(limit, rows, key=lambda item: item[0])
            threshold = chosen[-1][0]
            chosen = [item for item in rows if item[0] >= threshold]  # ties kept
            candidates = [self._experiment(v, group, whole=False) for _, v, group in chosen]
        else:
            candidates = [
                e
                for e in self._matching(filters, brief=True)
                if not (skip_buggy and e.is_buggy)
                and not (skip_pending and e.status in PENDING_STATUSES)
            ]
        best = rank(candidates)[:limit]
        return best if brief else [self._whole(e) for e in best]

    def get_experiment(self, exp_id: str) -> KernelExperiment:
        """The newest version of the experiment with this id or unique prefix."""
        full = self.resolve_id(exp_id)
        group = self._all()[full]
        return self._experiment(group[0], group, whole=True)

    def resolve_id(self, id_or_prefix: str) -> str:
        """The full id of the one experiment (in any place) starting with the prefix."""
        prefix = ids.check_prefix(id_or_prefix, self.settings.min_id_prefix)
        candidates = sorted(i for i in self._all() if i.startswith(prefix))
        if not candidates:
            places = ", ".join([WORKING_TREE, *(r.short for r in self.refs)])
            raise ExperimentNotFoundError(
                f"no experiment with id {prefix}{'' if len(prefix) == 16 else '...'} in "
                f"{places} (kexp list --refs ... shows the ids)"
            )
        if len(candidates) > 1:
            raise AmbiguousIdError(prefix, candidates, ids.PREFIX_ADVICE)
        return candidates[0]

    def ancestors(self, exp_id: str) -> list[KernelExperiment]:
        """Parent, grandparent, ... (newest versions; stops at a cycle)."""
        versions = self._all()
        chain: list[KernelExperiment] = []
        current = self.get_experiment(exp_id)
        seen = {current.id}
        while current.pid and current.pid in versions and current.pid not in seen:
            group = versions[current.pid]
            current = self._experiment(group[0], group, whole=True)
            seen.add(current.id)
            chain.append(current)
        return chain

    def children(self, exp_id: str) -> list[KernelExperiment]:
        """The experiments whose parent is this one (newest versions), oldest first."""
        full = self.resolve_id(exp_id)
        return chronological(e for e in self._newest(whole=True) if e.pid == full)

    def descendants(self, exp_id: str) -> list[KernelExperiment]:
        """Children, grandchildren, ... (newest versions, breadth first)."""
        kids: dict[str, list[KernelExperiment]] = {}
        for exp in chronological(self._newest(whole=True)):
            kids.setdefault(exp.pid, []).append(exp)
        queue, found, seen = [self.resolve_id(exp_id)], [], set()
        while queue:
            current = queue.pop(0)
            for child in kids.get(current, []):
                if child.id not in seen:
                    seen.add(child.id)
                    found.append(child)
                    queue.append(child.id)
        return found

    # --- writes ---------------------------------------------------------------------

    def _refuse_write(self) -> KexpError:
        return KexpError(
            "the store read across refs corrects and deletes nothing: do it in the working "
            "tree (without --refs) and publish with kexp sync"
        )

    def create_experiment(
        self, exp: KernelExperiment | None = None, **fields: Any
    ) -> KernelExperiment:
        """Record a new experiment in the working tree (as :meth:`Store.create_experiment`
        does, warnings included), then warn when its code change was recorded on one of
        the refs too (:meth:`warn_tried_before`)."""
        made = super().create_experiment(exp, **fields)
        self._versions = None  # the working tree changed
        self._derived = None
        if made.code_change:
            self.warn_tried_before(made.code_change, exclude=[made.id], stacklevel=2)
        return made

    def tried_before(self, code_change: str, *, exclude: Iterable[str] = ()) -> list[Repeat]:
        """The experiments on the refs (not in the working tree alone, which
        :func:`kexp.retrieval.tried_before` answers) whose code change is
        ``code_change`` once normalised; oldest first, ids in ``exclude`` left out."""
        from kexp.dedupe import Repeat

        key = _change_key(code_change)
        if not key:
            return []
        skip = set(exclude)
        versions = self._all()  # first: it parses (and keeps) the blobs not seen yet
        matching = self._cache().with_code_key(key)
        found = []
        for group in versions.values():
            for version in group:
                if version.blob not in matching or version.exp_id in skip:
                    continue
                if all(name == WORKING_TREE for _, name, _ in self._places(version)):
                    continue
                found.append(self._experiment(version, group, whole=False))
        found.sort(key=lambda e: (e.created_at, e.id))
        return [
            Repeat(e.id, float(e.score), e.outcome, e.change_summary, e.path, e.base_commit, e.env)
            for e in found
        ]

    def warn_tried_before(
        self, code_change: str, *, exclude: Iterable[str] = (), stacklevel: int = 1
    ) -> list[Repeat]:
        """Warn (:class:`~kexp.dedupe.RepeatedChangeWarning`) naming the experiments on
        the refs whose code change is ``code_change``, and where they were found."""
        from kexp.dedupe import RepeatedChangeWarning, repeat_message

        repeats = self.tried_before(code_change, exclude=exclude)
        if repeats:
            places = sorted(
                {
                    sighting.ref
                    for repeat in repeats
                    for exp in [self.get_experiment(repeat.id)]
                    if (sighting := self.where(exp)) is not None
                }
            )
            warnings.warn(
                f"{repeat_message(repeats)} (found on {', '.join(places)})",
                RepeatedChangeWarning,
                stacklevel=stacklevel + 1,
            )
        return repeats

    def update_experiment(self, exp_id: str, **changes: Any) -> KernelExperiment:
        """Refused: read-only."""
        raise self._refuse_write()

    def delete_experiment(self, exp_id: str, *, force: bool = False) -> Path:
        """Refused: read-only."""
        raise self._refuse_write()

    # --- building the entries -----------------------------------------------------

    def _matching(self, filters: dict[str, Any], *, brief: bool) -> list[KernelExperiment]:
        filters = dict(filters)
        reachable_from = filters.pop("reachable_from", None)
        text = filters.pop("text", None)
        if filters.get("pid"):
            filters["pid"] = self.resolve_id(filters["pid"])
        if filters.get("base_commit"):
            from kexp.provenance import base_commit_filter

            filters["base_commit"] = base_commit_filter(self.code_repo, filters["base_commit"])
        wanted = build_filters(**filters)
        whole = not brief or text is not None
        if not self._fronts:  # every experiment is made: their front-matter in one go
            self._fronts = self._cache().fronts(
                v.blob for group in self._all().values() for v in group if not v.row[_FRONT]
            )
        found = [
            exp
            for group in self._all().values()
            for exp in (self._experiment(v, group, whole=whole) for v in group)
            if matches(exp, wanted, self.settings)
        ]
        if text is not None:
            text_filter = build_filters(text=text)
            found = [e for e in found if matches(e, text_filter, self.settings)]
        if reachable_from is not None:
            from kexp.provenance import reachable

            found = reachable(found, self.code_repo, str(reachable_from))
        return found

    def _newest(self, *, whole: bool) -> list[KernelExperiment]:
        return [self._experiment(g[0], g, whole=whole) for g in self._all().values()]

    def _whole(self, exp: KernelExperiment) -> KernelExperiment:
        handed = self._handed.get(id(exp))
        if handed is None or handed[0] is not exp:
            return exp
        return self._experiment(handed[1], handed[2], whole=True)

    def _experiment(
        self, version: _Version, group: list[_Version], *, whole: bool
    ) -> KernelExperiment:
        """The experiment of one version (bodies read from the cache when ``whole``)."""
        text = version.row[_FRONT] or self._fronts.get(version.blob)
        if not text:
            text = self._cache().fronts([version.blob]).get(version.blob, "{}")
        front = json.loads(text)
        extra = front.pop("extra_fields", {})
        if whole:
            body = self._cache().body(version.blob)
            if body is not None:
                front.update(json.loads(body))
        if "extra_sections" in front:
            front["extra_sections"] = [tuple(item) for item in front["extra_sections"]]
        exp = KernelExperiment(**front)
        exp.extra_fields.update(extra)
        path = Path(self.location_path(version.paths[0]))
        attach(exp, self.settings, path=path)
        if not self._deriving:
            attach(exp, derived=self.derivation().of(exp))
        self._handed[id(exp)] = (exp, version, group)
        return exp

    def derivation(self, *, strict: bool = False) -> Derivation:
        """What is derived of every experiment (its newest version) from all of them
        (see :meth:`Store.derivation`)."""
        if self._derived is None:
            self._deriving = True
            try:
                newest = self._newest(whole=False)
            finally:
                self._deriving = False
            self._derived = derive(newest, self.settings)
        return self._derived

    def _all(self) -> dict[str, list[_Version]]:
        """Every experiment id → its versions, the newest first (read once)."""
        if self._versions is None:
            self._versions = self._read_all()
        return self._versions

    def _read_all(self) -> dict[str, list[_Version]]:
        """Every place's files, as changes from one base commit (refs share most of
        their files: ``git diff-tree`` skips the subtrees they share), grouped into
        versions by blob."""
        from kexp import git as kgit

        repo, folder = self.worktree, self.folder
        prefix = folder + "/"
        names: dict[str, str | None] = {}  # path → the id in its name (None: not one)

        def name_id(path: str) -> str | None:
            if path not in names:
                names[path] = _name_id(path, prefix)
            return names[path]

        # The base is the working tree's own commit: the working tree is told as
        # ``git status`` against it, every ref as ``git diff-tree`` from it.
        head_and_tree = kgit.object_names(repo, ["HEAD", f"HEAD:{folder}"])
        base = head_and_tree[0][0] if head_and_tree[0] and head_and_tree[0][1] == "commit" else None
        tree = head_and_tree[1][0] if head_and_tree[1] and head_and_tree[1][1] == "tree" else None
        # The git commands run at once (each its own process), their output read here.
        jobs: dict[str, Callable[[], Any]] = {
            "status": functools.partial(kgit.status_entries, repo, folder)
        }
        commits = list(dict.fromkeys(ref.commit for ref in self.refs if ref.commit != base))
        if base is not None:
            jobs["refs"] = functools.partial(kgit.tree_changes, repo, base, commits, folder)
        else:  # no commit yet here: each ref listed whole
            for commit in commits:
                jobs[commit] = functools.partial(kgit.tree_files, repo, commit, folder)
        base_files: dict[str, str] = {}
        if base is not None and tree is not None:  # read here (the cache is this thread's)
            done = _parallel(jobs, lambda: base_files.update(self._listing(tree, names)))
        else:
            done = _parallel(jobs)
        worktree: dict[str, str] = {}  # path → blob ('' when deleted) vs base_files
        on_disk: dict[str, str] = {}  # blob → a working-tree path holding it
        for kind, xy, index_blob, path in done["status"]:
            if not name_id(path):
                continue
            if kind == "1" and xy[1:] == ".":  # the working tree's file is the index's
                worktree[path] = "" if xy[:1] == "D" else index_blob
                continue
            file = Path(self.location_path(path))
            try:
                data = None if file.is_symlink() or not file.is_file() else file.read_bytes()
            except OSError:
                data = None
            blob = "" if data is None else kgit.blob_id(data)
            worktree[path] = blob
            if blob:
                on_disk.setdefault(blob, path)
        if base is None:
            for commit in commits:
                done.setdefault("refs", {})[commit] = [
                    (path, mode, blob) for mode, blob, path in done[commit]
                ]
        deltas: list[dict[str, str]] = [worktree]
        by_commit: dict[str, dict[str, str]] = {}
        for ref in self.refs:
            if ref.commit not in by_commit:
                changes: dict[str, str] = {}
                for path, mode, blob in done.get("refs", {}).get(ref.commit, ()):
                    if name_id(path):
                        changes[path] = blob if mode in _REGULAR_MODES else ""
                by_commit[ref.commit] = changes
            deltas.append(by_commit[ref.commit])
        self._sources = [
            (_WORKING_TREE_DATE, WORKING_TREE),
            *((r.date, r.short) for r in self.refs),
        ]
        self._base_files, self._deltas = base_files, deltas
        # Every (path, blob) some place holds: the base's (unless every place changed
        # it), and what the places changed.
        changed_in: dict[str, int] = {}
        pairs: dict[tuple[str, str], None] = {}
        for delta in deltas:
            for path, blob in delta.items():
                changed_in[path] = changed_in.get(path, 0) + 1
                if blob:
                    pairs[path, blob] = None
        places = len(deltas)
        items = [(p, b) for p, b in base_files.items() if changed_in.get(p, 0) < places]
        items += [pair for pair in pairs if base_files.get(pair[0]) != pair[1]]
        rows = self._rows({blob for _, blob in items}, on_disk)
        if tree is not None and not self._known:  # kept with the tree for the next read
            self._cache().keep_tree_rows(
                tree, "\n".join(_row_line(rows[b]) for b in set(base_files.values()) if b in rows)
            )
        by_blob: dict[str, _Version] = {}
        warned: set[str] = set()
        for path, blob in items:
            row = rows.get(blob)
            if row is None:
                continue
            error = row[_ERROR]
            if not error and names[path] != row[_ID]:
                error = "the id in the file name is not the id in the file"
            if error:
                if blob not in warned:
                    warned.add(blob)
                    where = self._holders(path, blob)
                    warnings.warn(
                        f"skipped invalid experiment file {path} at "
                        f"{where[0][1] if where else WORKING_TREE}: {error}",
                        InvalidExperimentWarning,
                        stacklevel=4,
                    )
                continue
            version = by_blob.get(blob)
            if version is None:
                by_blob[blob] = _Version(row[_ID], blob, row, [path])
            else:
                version.paths.append(path)
        found: dict[str, list[_Version]] = {}
        for version in by_blob.values():
            found.setdefault(version.exp_id, []).append(version)
        for group in found.values():
            if len(group) > 1:  # the newest first
                group.sort(key=lambda v: -self._places(v)[0][0])
        return found

    def _listing(self, tree: str, names: dict[str, str | None]) -> dict[str, str]:
        """Path → blob of the experiment files in the store folder's ``tree``, kept in
        the cache by the tree's hash (a tree never changes either); ``names`` learns
        their ids."""
        from kexp import git as kgit

        prefix = self.folder + "/"
        cache = self._cache()
        kept, rows = cache.listing(tree)
        found: dict[str, str] = {}
        if kept is not None:
            for line in kept.split("\n"):
                relative, _, blob = line.partition("\t")
                if blob:
                    path = prefix + relative
                    found[path] = blob
                    names[path] = relative[relative.rfind("/") + 1 :][:16]
            if rows:  # what the cache keeps of the tree's blobs, kept beside it
                for line in rows.split("\n"):
                    parts = line.split("\t")
                    if len(parts) == 7:
                        blob, exp_id, score, buggy, status, error, key = parts
                        self._known[blob] = (
                            blob, exp_id, float(score), int(buggy), status, "", "", error, key
                        )  # fmt: skip
            return found
        for mode, blob, path in kgit.tree_files(self.worktree, tree, self.folder, tree=True):
            if mode in _REGULAR_MODES:
                names[path] = _name_id(path, prefix)
                if names[path]:
                    found[path] = blob
        cache.keep_listing(
            tree, "\n".join(f"{path[len(prefix) :]}\t{blob}" for path, blob in found.items())
        )
        return found

    def _holders(self, path: str, blob: str) -> list[tuple[int, str]]:
        """The places (date, name) holding ``blob`` at ``path``, in source order."""
        base = self._base_files.get(path, "")
        return [
            source
            for source, delta in zip(self._sources, self._deltas, strict=True)
            if delta.get(path, base) == blob
        ]

    def _places(self, version: _Version) -> list[tuple[int, str, str]]:
        """Where a version was found: (date, place, path), the newest first."""
        if version.places is None:
            found = [
                (date, name, path)
                for path in version.paths
                for date, name in self._holders(path, version.blob)
            ]
            found.sort(key=lambda place: -place[0])  # stable: the sources' order
            version.places = found or [(0, WORKING_TREE, version.paths[0])]
        return version.places

    def location_path(self, repo_path: str) -> str:
        """The file a repository path names in the working tree."""
        return f"{self.toplevel}/{repo_path}"

    def _rows(self, blobs: set[str], on_disk: dict[str, str]) -> dict[str, tuple[Any, ...]]:
        """What the cache keeps of each blob; the missing ones read (from git, or from
        the working tree for a file git has no object for), parsed and kept."""
        from kexp import git as kgit

        cache = self._cache()
        known = self._known
        rows = {b: known[b] for b in blobs if b in known}
        rows.update(cache.get(blobs - rows.keys()) if len(rows) < len(blobs) else {})
        missing = sorted(blobs - rows.keys())
        if not missing:
            return rows
        new: list[tuple[Any, ...]] = []
        from_git = [b for b in missing if b not in on_disk]
        for blob in missing:
            if blob in on_disk:
                with contextlib.suppress(OSError):
                    text = Path(self.location_path(on_disk[blob])).read_bytes()
                    new.append(self._parse(blob, text))
        limit = self.settings.max_file_bytes

        def parse(part: list[str]) -> list[tuple[Any, ...]]:
            """The rows of ``part``, streamed by one ``git cat-file --batch``."""
            made: list[tuple[Any, ...]] = []
            streamed = kgit.iter_blobs(kgit.open_repo(self.toplevel), part, max_bytes=limit)
            for blob, data in streamed:
                if data is None:
                    continue
                if isinstance(data, int):
                    made.append(_error_row(blob, f"the file is {data} bytes (limit {limit})"))
                else:
                    made.append(self._parse(blob, data))
            return made

        if from_git:  # many: half of them parsed in a forked child (see in_two_processes)
            from kexp.index import in_two_processes

            new += in_two_processes(parse, from_git, len(from_git))
        cache.put(new)
        rows.update((row[_BLOB], row) for row in new)
        return rows

    def _parse(self, blob: str, data: bytes) -> tuple[Any, ...]:
        """The cache row of one blob: its front-matter, bodies, and ranking columns."""
        checked = check_bytes(data, Path("blob.md"), self.settings)
        if not checked.ok:
            errors = [p for p in checked.problems if p.severity == "error"]
            first = errors[0] if errors else None
            return _error_row(blob, f"{first.code}: {first.message}" if first else "unreadable")
        exp = checked.experiment()
        values = {f.name: getattr(exp, f.name) for f in dataclasses.fields(exp) if f.init}
        body = {name: values.pop(name) for name in (*BODY_FIELDS, "preamble", "extra_sections")}
        return (
            blob,
            exp.id,
            float(exp.score),
            int(bool(exp.is_buggy)),
            exp.status,
            json.dumps(values, ensure_ascii=False),
            json.dumps(body, ensure_ascii=False),
            "",
            _change_key(exp.code_change),
        )

    def _cache(self) -> _BlobCache:
        if getattr(self, "_blob_cache", None) is None:
            self._blob_cache = _BlobCache(self)
        return self._blob_cache


# The columns of a cache row.
_BLOB, _ID, _SCORE, _BUGGY, _STATUS, _FRONT, _BODY, _ERROR, _KEY = range(9)


def _change_key(code_change: str) -> str:
    """The key of a code change (:func:`kexp.dedupe.code_key`, the one key every "tried
    before" answer compares); "" for none worth matching."""
    from kexp.dedupe import code_key

    return code_key(code_change) or ""


def _row_line(row: tuple[Any, ...]) -> str:
    """A cache row (without its text) as one line of tab-separated values."""
    error = " ".join(str(row[_ERROR]).split())
    return "\t".join(
        (row[_BLOB], row[_ID], repr(float(row[_SCORE])), str(int(row[_BUGGY])),
         str(row[_STATUS]), error, str(row[_KEY]))
    )  # fmt: skip


def _error_row(blob: str, error: str) -> tuple[Any, ...]:
    return (blob, "", 0.0, 0, "", "{}", "{}", error, "")


class _BlobCache:
    """Parse results by blob hash, in ``.kexp/blobs-<code>.sqlite`` (in memory where the
    folder cannot be written). A blob never changes: rows are never updated."""

    def __init__(self, store: Store) -> None:
        from kexp.index import code_fingerprint

        self.connection: sqlite3.Connection | None = None
        try:
            folder = store.cache_dir  # refuses a folder that is, or holds, a link
            file = folder / f"blobs-{code_fingerprint()[:16]}.sqlite"
            if file.is_symlink():
                raise KexpError(f"{file} is a symbolic link: remove it")
            self.connection = sqlite3.connect(str(file), timeout=10.0, isolation_level=None)
            self.connection.execute("PRAGMA journal_mode=WAL")
            self._create()
        except (OSError, sqlite3.Error):
            self.connection = sqlite3.connect(":memory:", isolation_level=None)
            self._create()

    def _create(self) -> None:
        assert self.connection is not None
        # The ranking columns apart from the text, so that ranking reads small rows.
        self.connection.execute(
            "CREATE TABLE IF NOT EXISTS blobs (blob TEXT PRIMARY KEY, id TEXT, score REAL, "
            "buggy INTEGER, status TEXT, error TEXT, code_key TEXT) WITHOUT ROWID"
        )
        self.connection.execute("CREATE INDEX IF NOT EXISTS blobs_code ON blobs (code_key)")
        self.connection.execute(
            "CREATE TABLE IF NOT EXISTS texts (blob TEXT PRIMARY KEY, front TEXT, body TEXT)"
        )
        self.connection.execute(
            "CREATE TABLE IF NOT EXISTS trees (tree TEXT PRIMARY KEY, listing TEXT, rows TEXT)"
        )

    def get(self, blobs: Iterable[str]) -> dict[str, tuple[Any, ...]]:
        """The rows of those blobs the cache holds (without their bodies)."""
        assert self.connection is not None
        wanted = list(blobs)
        found: dict[str, tuple[Any, ...]] = {}
        if len(wanted) > _SCAN_ABOVE:  # many: one pass over the table is quicker
            chosen = set(wanted)
            for row in self.connection.execute(
                "SELECT blob, id, score, buggy, status, '', '', error, code_key FROM blobs"
            ):
                if row[0] in chosen:
                    found[row[0]] = row
            return found
        for start in range(0, len(wanted), _SQL_BATCH):
            part = wanted[start : start + _SQL_BATCH]
            marks = ",".join("?" * len(part))
            for row in self.connection.execute(
                f"SELECT blob, id, score, buggy, status, '', '', error, code_key FROM blobs "
                f"WHERE blob IN ({marks})",
                part,
            ):
                found[row[0]] = row
        return found

    def with_code_key(self, key: str) -> set[str]:
        """The blobs whose code change has this key."""
        assert self.connection is not None
        rows = self.connection.execute("SELECT blob FROM blobs WHERE code_key = ?", (key,))
        return {row[0] for row in rows}

    def fronts(self, blobs: Iterable[str]) -> dict[str, str]:
        """The front-matter (JSON) of those blobs the cache holds."""
        assert self.connection is not None
        wanted = list(blobs)
        found: dict[str, str] = {}
        for start in range(0, len(wanted), _SQL_BATCH):
            part = wanted[start : start + _SQL_BATCH]
            marks = ",".join("?" * len(part))
            found.update(
                self.connection.execute(
                    f"SELECT blob, front FROM texts WHERE blob IN ({marks})", part
                ).fetchall()
            )
        return found

    def listing(self, tree: str) -> tuple[str | None, str | None]:
        """The listing kept for a folder's tree hash, and the rows of its blobs."""
        assert self.connection is not None
        row = self.connection.execute(
            "SELECT listing, rows FROM trees WHERE tree = ?", (tree,)
        ).fetchone()
        return (None, None) if row is None else (row[0], row[1])

    def keep_tree_rows(self, tree: str, rows: str) -> None:
        """Keep the rows of a tree's blobs beside its listing (one read next time)."""
        assert self.connection is not None
        with contextlib.suppress(sqlite3.Error):
            self.connection.execute("UPDATE trees SET rows = ? WHERE tree = ?", (rows, tree))

    def keep_listing(self, tree: str, listing: str) -> None:
        """Keep the listing of a folder's tree hash."""
        assert self.connection is not None
        with contextlib.suppress(sqlite3.Error):
            self.connection.execute(
                "INSERT OR IGNORE INTO trees VALUES (?, ?, NULL)", (tree, listing)
            )

    def body(self, blob: str) -> str | None:
        """The bodies (JSON) of one blob."""
        assert self.connection is not None
        row = self.connection.execute("SELECT body FROM texts WHERE blob = ?", (blob,)).fetchone()
        return None if row is None else str(row[0])

    def put(self, rows: Sequence[tuple[Any, ...]]) -> None:
        """Keep new rows (a row another process kept meanwhile is left as it is)."""
        assert self.connection is not None
        if not rows:
            return
        with contextlib.suppress(sqlite3.Error):
            self.connection.execute("BEGIN IMMEDIATE")
            self.connection.executemany(
                "INSERT OR IGNORE INTO blobs VALUES (?, ?, ?, ?, ?, ?, ?)",
                [(*row[_BLOB:_FRONT], row[_ERROR], row[_KEY]) for row in rows],
            )
            self.connection.executemany(
                "INSERT OR IGNORE INTO texts VALUES (?, ?, ?)",
                [(row[_BLOB], row[_FRONT], row[_BODY]) for row in rows],
            )
            self.connection.execute("COMMIT")
        if self.connection.in_transaction:
            with contextlib.suppress(sqlite3.Error):
                self.connection.execute("ROLLBACK")


def refs_store(store: Store, refs: Sequence[str] = (), *, all_refs: bool = False) -> Store:
    """``store`` itself when no refs are asked for, else a :class:`RefsStore`."""
    if not refs and not all_refs:
        return store
    return RefsStore(store, refs, all_refs=all_refs)


def refs_holding(store: Store, id_or_prefix: str) -> list[str]:
    """The branches and remote-tracking branches whose store holds the experiment
    ``id_or_prefix`` names (newest first; none outside git, or when none does): where
    to look for an experiment the working tree does not hold (``--all-refs``)."""
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # the lookup's: the read at hand warns itself
            across = RefsStore(store, all_refs=True)
            found = across.versions(across.resolve_id(id_or_prefix))
            places = [across.where(version) for version in found]
    except KexpError:
        return []
    refs = (ref for sighting in places if sighting is not None for ref in sighting.refs)
    return [ref for ref in dict.fromkeys(refs) if ref != WORKING_TREE]
