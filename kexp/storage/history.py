"""What changed, according to git: an experiment's history, and changes between revisions.

* :func:`history` — every commit that touched one experiment's file, oldest first: who,
  when, the commit message, and each field that changed (old → new), following renames
  (the id in the file name identifies the experiment, whatever its slug or folder).
* :func:`changes` — the experiments added, modified (with the fields that changed) and
  removed between two revisions, or between a revision and the working tree. The
  pull-request review builds on it.

(The module is not called ``history`` so that ``kexp.history``, the function, is never
shadowed by a submodule of the same name.)
"""

from __future__ import annotations

import contextlib
import dataclasses
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

from kexp.core import ids
from kexp.core.advice import LIST_SHOWS, LOG_REV
from kexp.core.errors import ExperimentNotFoundError, KexpError
from kexp.core.model import ALL_FIELDS, BODY_FIELDS
from kexp.format.fileformat import Document, FileFormatError, parse
from kexp.format.reading import read_or_problem, size_problem, stray_problem
from kexp.format.rules import id_from_name
from kexp.format.validate import CheckedFile, check_bytes, read_and_check
from kexp.gitops import git as kgit
from kexp.gitops import log as gitlog
from kexp.storage.snapshot import StoreLocation

if TYPE_CHECKING:
    from kexp.core.model import KernelExperiment
    from kexp.core.problems import Problem
    from kexp.storage.view import StoreView

#: A field's value before and after a change (None: absent on that side).
FieldChanges = dict[str, tuple[Any, Any]]


def field_values(doc: Document) -> dict[str, Any]:
    """Every field of a parsed file as written: front-matter values and body texts
    (absent sections are left out)."""
    values: dict[str, Any] = dict(doc.fields)
    for name, text in doc.body_values().items():
        if text:
            values[name] = text
    return values


def diff_fields(old: dict[str, Any] | None, new: dict[str, Any] | None) -> FieldChanges:
    """The fields whose values differ, as ``{field: (old, new)}`` in canonical order
    (known fields first, then unknown ones alphabetically)."""
    before, after = old or {}, new or {}
    names = [n for n in ALL_FIELDS if n in before or n in after]
    names += sorted((set(before) | set(after)) - set(ALL_FIELDS))
    changed: FieldChanges = {}
    for name in names:
        a, b = before.get(name), after.get(name)
        if a != b or (type(a) is not type(b) and not _same_number(a, b)):
            if name in BODY_FIELDS and (a or "") == (b or ""):
                continue
            changed[name] = (a, b)
    return changed


def _same_number(a: Any, b: Any) -> bool:
    numbers = (int, float)
    return (
        isinstance(a, numbers)
        and isinstance(b, numbers)
        and not isinstance(a, bool)
        and not isinstance(b, bool)
        and a == b
    )


def _values_of(
    data: bytes | int | None, path: str, limit: int
) -> tuple[dict[str, Any] | None, str]:
    """Field values of a file's content (an ``int``: the size of one over ``limit``, not
    read), or (None, why it cannot be read)."""
    if data is None:
        return None, ""
    if isinstance(data, int):
        return None, size_problem(path, data, limit).message
    try:
        return field_values(parse(data, path)), ""
    except FileFormatError as exc:
        return None, exc.problem.message


# --- history of one experiment ---------------------------------------------------------


@dataclasses.dataclass
class HistoryEntry:
    """One commit that touched an experiment's file."""

    commit: str  # full hash
    author: str
    author_email: str
    date: str  # author date, ISO 8601 with UTC offset
    message: str  # the full commit message
    #: 'added', 'modified', 'renamed' or 'deleted'; 're-added': added after its removal,
    #: ``changes`` then against the version removed
    action: str
    path: str  # the file afterwards (the deleted file for 'deleted'), from the repo root
    old_path: str  # the file before a rename ('' otherwise)
    #: The fields this commit changed: ``{field: (old, new)}`` (None: absent).
    changes: FieldChanges
    #: Why this version of the file could not be read ('' when it could).
    error: str = ""
    #: The refs holding this commit when the history read lacks it (a version on
    #: another branch: :mod:`kexp.storage.refhistory`); empty for the history read.
    refs: tuple[str, ...] = ()

    @property
    def summary(self) -> str:
        """The first line of the commit message."""
        return self.message.splitlines()[0] if self.message else ""

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready data (``changes`` as ``{field: {"old": ..., "new": ...}}``)."""
        data = dataclasses.asdict(self)
        data["summary"] = self.summary
        data["changes"] = {k: {"old": a, "new": b} for k, (a, b) in self.changes.items()}
        return data


_ACTIONS = {"A": "added", "M": "modified", "T": "modified", "R": "renamed", "D": "deleted"}


def history(store: StoreView, exp_id: str, *, revision: str | None = None) -> list[HistoryEntry]:
    """Every commit that touched experiment ``exp_id``'s file, oldest first.

    ``exp_id`` is a full id or a unique prefix of an experiment in ``store`` (a full id
    also finds an experiment that has since been deleted). The history is that of
    ``revision`` (default: ``HEAD``, or the revision of a store from
    :meth:`Store.at`); renames and moves of the file are followed (the id in the file
    name identifies it). Each entry names the fields the commit changed, old → new (a
    file brought back after its removal, ``re-added``, against the version removed).
    Uncommitted changes are not part of the history.

    Raises :class:`~kexp.core.errors.GitError` outside a git repository or for an unknown
    revision, :class:`~kexp.core.errors.ExperimentNotFoundError` when git has no file with
    that id either.
    """
    location = StoreLocation.of(store.root)
    if revision is None:
        revision = store.commit or "HEAD"
    tip = kgit.resolve_commit(location.repo, revision)
    full_id = _full_id(store, exp_id, location, tip)
    pathspecs = [
        f":(glob){location.folder}/**/{full_id}-*.md",
        f":(glob){location.folder}/**/{full_id}.md",
    ]
    commits = gitlog.log_files(location.repo, tip, pathspecs)
    wanted = [
        sha
        for commit in commits
        for change in commit.files
        for sha in (change.old_sha, change.new_sha)
        if sha
    ]
    limit = store.settings.max_file_bytes
    blobs = dict(kgit.iter_blobs(location.repo, list(dict.fromkeys(wanted)), max_bytes=limit))
    entries: list[HistoryEntry] = []
    last_known: dict[str, Any] | None = None
    last_blob = ""
    for commit in commits:
        for change in commit.files:
            if id_from_name(change.path) != full_id:
                continue
            if len(commit.parents) > 1 and change.new_sha and change.new_sha == last_blob:
                continue  # a merge that brought in the file as a commit listed made it
            last_blob = change.new_sha
            old, _ = _values_of(blobs.get(change.old_sha), change.old_path, limit)
            new, error = _values_of(blobs.get(change.new_sha), change.path, limit)
            if old is None and change.old_sha:
                old = last_known
            action = _ACTIONS.get(change.status, "modified")
            if action == "added" and entries and entries[-1].action == "deleted":
                # Brought back after a removal: what it changed against the version removed.
                action, old = "re-added", last_known
            entries.append(
                HistoryEntry(
                    commit=commit.sha,
                    author=commit.author,
                    author_email=commit.author_email,
                    date=commit.date,
                    message=commit.message,
                    action=action,
                    path=change.path,
                    old_path=change.old_path if change.status == "R" else "",
                    changes={} if error else diff_fields(old, new),
                    error=error,
                )
            )
            if new is not None:
                last_known = new
    if not entries and full_id not in store.id_index(full_id):
        raise _elsewhere(
            store,
            exp_id.strip(),
            ExperimentNotFoundError(
                f"no experiment {full_id} in {store.experiments_dir} or in the history of "
                f"{revision} ({LIST_SHOWS} the ids)"
            ),
        )
    return entries


def _full_id(store: StoreView, exp_id: str, location: StoreLocation, tip: str) -> str:
    """A full id: as given, or the experiment in ``store`` with this unique prefix, else
    the one whose file the history of ``tip`` held (removed since: a ``git revert``, a
    ``kexp rm``)."""
    if isinstance(exp_id, str) and len(exp_id.strip()) == ids.ID_LENGTH:
        return ids.check_id(exp_id.strip().lower())
    prefix = ids.check_prefix(exp_id, store.settings.min_id_prefix)
    try:
        if not store.is_working_tree or store.source.places is not None:
            return store.resolve_id(exp_id)
        return ids.the_one(
            prefix, store.id_index(prefix), f"{store.experiments_dir} ({LIST_SHOWS} the ids)"
        )
    except ExperimentNotFoundError as error:
        held = gitlog.ids_in_history(location.repo, tip, location.folder, prefix)
        if held:  # once held: its history goes up to its removal
            return ids.the_one(prefix, held, "the history")
        if not store.is_working_tree or store.source.places is not None:
            raise
        raise _elsewhere(store, prefix, error) from None


def _elsewhere(store: StoreView, id_or_prefix: str, error: KexpError) -> KexpError:
    """``error`` (no experiment ``id_or_prefix`` names in the working tree, nor in the
    history read) saying which refs hold it and the ``kexp log --rev REF ID`` that reads
    its history there (:func:`kexp.storage.refs.on_other_refs`)."""
    from kexp.storage.refs import on_other_refs

    return on_other_refs(store, id_or_prefix, error, LOG_REV)


# --- changes between revisions -----------------------------------------------------------


@dataclasses.dataclass
class ExperimentChange:
    """One experiment added, modified or removed between two revisions."""

    id: str
    kind: str  # 'added', 'modified' or 'removed'
    #: The file afterwards (for 'removed': the file that was removed), in the store.
    path: Path
    #: The file before, when it was elsewhere (a rename or move); None otherwise.
    old_path: Path | None
    #: The file before and after, read and checked (None on the side it is absent).
    before: CheckedFile | None = dataclasses.field(repr=False)
    after: CheckedFile | None = dataclasses.field(repr=False)
    #: The fields that changed: ``{field: (old, new)}`` (None: absent). For 'added'
    #: and 'removed' this is empty.
    fields: FieldChanges
    #: Whether the file's bytes are the same on both sides: a modified one moved or
    #: renamed, and nothing else.
    moved_only: bool = False
    #: For a modified one the base lacked (an id the base's history removed, brought
    #: back changed): the commit that removed the version ``before`` (its parent holds it).
    removed_in: str = ""

    @property
    def old(self) -> KernelExperiment | None:
        """The experiment before (None when absent or not valid)."""
        return self.before.experiment() if self.before is not None and self.before.ok else None

    @property
    def new(self) -> KernelExperiment | None:
        """The experiment afterwards (None when absent or not valid)."""
        return self.after.experiment() if self.after is not None and self.after.ok else None

    @property
    def problems(self) -> list[Problem]:
        """The per-file validation problems of the version afterwards."""
        return list(self.after.problems) if self.after is not None else []


@dataclasses.dataclass
class Changes:
    """Experiments added, modified and removed from ``base`` to ``head``."""

    base: str  # full hash
    head: str | None  # full hash, or None for the working tree
    added: list[ExperimentChange]
    modified: list[ExperimentChange]
    removed: list[ExperimentChange]
    #: The ``stray-file`` problems of the Markdown files added or changed that kexp
    #: never reads (not named as experiments: :func:`kexp.format.validate.is_stray`).
    strays: list[Problem] = dataclasses.field(default_factory=list)

    def __iter__(self) -> Any:
        return iter([*self.added, *self.modified, *self.removed])

    def both_read(self) -> Iterator[tuple[Document, Document, CheckedFile, ExperimentChange]]:
        """Each modified experiment whose versions before and after both read: the
        document before, the document after, the file after (its problems to add to)
        and the change."""
        for change in self.modified:
            before, after = change.before, change.after
            if before is None or after is None:
                continue
            if before.document is not None and after.document is not None:
                yield before.document, after.document, after, change

    def __len__(self) -> int:
        return len(self.added) + len(self.modified) + len(self.removed)


def changes(store: StoreView, base: str, head: str | None = None) -> Changes:
    """The experiments added, modified and removed between revisions ``base`` and
    ``head`` (``None``: the working tree, including files not yet committed or staged).

    Experiments are matched by id, so a renamed or moved file is one modified
    experiment. Each modified one lists the fields that changed, old → new (a file whose
    fields are unchanged but whose text changed, e.g. reformatted, is listed with none).
    Each list is in id order.
    Raises :class:`~kexp.core.errors.GitError` outside a git repository or for an unknown
    revision.
    """
    with changes_listed(store, base, head) as listed:
        return listed()


@contextlib.contextmanager
def changes_listed(
    store: StoreView, base: str, head: str | None = None
) -> Iterator[Callable[[], Changes]]:
    """:func:`changes`, begun: git lists the files that changed while the ``with`` block
    runs (a review reads the store meanwhile); the function given waits for git and
    reads them. An unknown revision raises at once."""
    location = StoreLocation.of(store.root)
    repo = location.repo
    base_sha = kgit.resolve_commit(repo, base)
    head_sha = kgit.resolve_commit(repo, head) if head is not None else None
    with gitlog.changed_files(repo, base_sha, head_sha, location.folder) as listed:
        yield lambda: _changes(store, location, base_sha, head_sha, listed())


def _changes(
    store: StoreView,
    location: StoreLocation,
    base_sha: str,
    head_sha: str | None,
    raw: list[gitlog.FileChange],
) -> Changes:
    """:func:`changes` of the files git listed (``raw``)."""
    repo = location.repo
    old_side: dict[str, tuple[str, str]] = {}  # id -> (repo path, blob)
    new_side: dict[str, tuple[str, str]] = {}
    strays: dict[str, str] = {}  # repo path -> blob
    for change in raw:
        if change.status != "D" and location.is_stray(change.path):
            strays[change.path] = change.new_sha
        if change.old_sha and location.is_experiment(change.old_path or change.path):
            exp_id = id_from_name(change.old_path or change.path)
            assert exp_id is not None
            old_side.setdefault(exp_id, (change.old_path or change.path, change.old_sha))
        if change.status != "D" and location.is_experiment(change.path):
            exp_id = id_from_name(change.path)
            assert exp_id is not None
            new_side.setdefault(exp_id, (change.path, change.new_sha))
    # An id the base's history removed, brought back: compared with the version removed.
    removed = _removed_versions(location, base_sha, [i for i in new_side if i not in old_side])
    blob_shas = [sha for _, sha in old_side.values()] + [v[1] for v in removed.values()]
    if head_sha is not None:
        blob_shas += [sha for _, sha in new_side.values()]
        blob_shas += list(strays.values())
    limit = store.settings.max_file_bytes
    wanted = list(dict.fromkeys(s for s in blob_shas if s))
    blobs = dict(kgit.iter_blobs(repo, wanted, max_bytes=limit))

    def checked(repo_path: str, sha: str, from_worktree: bool) -> CheckedFile:
        path = location.path(repo_path)
        if from_worktree:
            return read_and_check(path, store.settings)
        data = blobs.get(sha)
        if data is None:  # pragma: no cover - git named the blob
            raise KexpError(f"git did not return {sha} ({repo_path})")
        if isinstance(data, int):  # over the limit: as a file of that size is refused
            return CheckedFile(path, None, [size_problem(path, data, limit)])
        return check_bytes(data, path, store.settings)

    def same(old_sha: str, new_sha: str, after: CheckedFile) -> bool:
        """Whether a file's bytes are the same before and after (``after``: the file)."""
        if head_sha is not None:
            return old_sha == new_sha
        data = blobs.get(old_sha)
        return isinstance(data, bytes) and read_or_problem(after.path, store.settings) == data

    result = Changes(base_sha, head_sha, [], [], [])
    for repo_path in sorted(strays):
        path = location.path(repo_path)
        found: bytes | Problem
        if head_sha is None:
            found = read_or_problem(path, store.settings)
        else:
            data = blobs.get(strays[repo_path])
            found = data if isinstance(data, bytes) else size_problem(path, data or 0, limit)
        result.strays.append(stray_problem(path, found, store.settings))
    for exp_id in sorted(set(old_side) | set(new_side)):
        before = checked(*old_side[exp_id], False) if exp_id in old_side else None
        after = checked(*new_side[exp_id], head_sha is None) if exp_id in new_side else None
        if before is None and after is not None and exp_id in removed:
            gone = checked(*removed[exp_id][:2], False)
            fields = diff_fields(_document_values(gone), _document_values(after))
            if fields:  # brought back changed: a correction of the version removed
                before = gone
        if before is None and after is not None:
            result.added.append(
                ExperimentChange(exp_id, "added", after.path, None, None, after, {})
            )
        elif after is None and before is not None:
            result.removed.append(
                ExperimentChange(exp_id, "removed", before.path, None, before, None, {})
            )
        elif before is not None and after is not None:
            moved = before.path if before.path != after.path else None
            gone_in = removed[exp_id][2] if exp_id not in old_side else ""
            old_blob = old_side[exp_id][1] if not gone_in else removed[exp_id][1]
            result.modified.append(
                ExperimentChange(
                    exp_id,
                    "modified",
                    after.path,
                    moved,
                    before,
                    after,
                    diff_fields(_document_values(before), _document_values(after)),
                    moved is not None and same(old_blob, new_side[exp_id][1], after),
                    gone_in,
                )
            )
    # In id order, as built: creation order for kexp's ids (paths are not: the fan-out
    # folder comes before the id).
    return result


def _removed_versions(
    location: StoreLocation, base_sha: str, exp_ids: list[str]
) -> dict[str, tuple[str, str, str]]:
    """Of ``exp_ids`` (ids the store at ``base_sha`` lacks), those whose file a commit of
    ``base_sha``'s history removed (``kexp rm``, a ``git rm``), each with the file it
    removed last: (repository path, blob, the commit that removed it). One ``git log``
    of the removals alone; none run when nothing was added."""
    if not exp_ids:
        return {}
    wanted = set(exp_ids)
    found: dict[str, tuple[str, str, str]] = {}
    for sha, change in gitlog.removals(location.repo, base_sha, location.folder):
        exp_id = id_from_name(change.path)  # newest first: the first found is the last
        if exp_id in wanted and exp_id not in found and change.old_sha:
            found[exp_id] = (change.path, change.old_sha, sha)
    return found


def _document_values(checked: CheckedFile) -> dict[str, Any] | None:
    return field_values(checked.document) if checked.document is not None else None
