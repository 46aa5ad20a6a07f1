"""The files of a store at one git revision: the :class:`GitRevision` source.

``Store(root).at("HEAD~1")`` is a :class:`~kexp.storage.store.Store` over a
:class:`GitRevision` (a :class:`~kexp.storage.sources.FileSource`): the same query API
(``list_experiments``, ``top_experiments``, ``get_experiment``, lineage) and the same
validation as the working tree, but reading the files of one commit without a checkout
and without touching the working tree. The source is neither writable (writes raise
:class:`~kexp.core.errors.KexpError`) nor cacheable. :class:`StoreLocation` says where a
store's ``experiments/`` folder lies in its repository.

Reading is bulk: one ``git ls-tree`` lists the files, one ``git cat-file --batch``
process streams every blob (100,000 files do not start 100,000 processes). Validation
takes each blob in turn and keeps only what the store-wide checks need of it (see
:meth:`Store.validate`): canonical files are checked without the full parse.
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from kexp.core.errors import KexpError, StoreNotFoundError
from kexp.core.problems import Problem
from kexp.core.settings import Settings
from kexp.format.reading import size_problem
from kexp.format.rules import EXPERIMENT_NAME, id_from_name, is_stray
from kexp.format.validate import CheckedFile, check_bytes
from kexp.gitops import git as kgit
from kexp.storage.rows import named_record, record_of, row_of
from kexp.storage.sources import EXPERIMENTS_DIR, Found

if TYPE_CHECKING:
    import git

    from kexp.gitops.git import TreeEntry, Worktree
    from kexp.storage.cache import Cache
    from kexp.storage.rows import Record, Row

_SYMLINK_MODE = "120000"
_SUBMODULE_MODE = "160000"


@dataclasses.dataclass(frozen=True)
class StoreLocation:
    """Where a store's ``experiments/`` folder lies inside its git repository."""

    repo: git.Repo
    toplevel: Path
    root: Path
    #: ``experiments/`` relative to the repository root, with '/' (e.g. ``experiments``
    #: or ``sub/dir/experiments``).
    folder: str

    @classmethod
    def of(cls, root: Path) -> StoreLocation:
        """The location of the store rooted at ``root`` (:class:`GitError` outside git)."""
        repo = kgit.open_repo(root)
        top = kgit.toplevel(repo)
        resolved = Path(root).resolve()
        try:
            relative = resolved.relative_to(top).as_posix()
        except ValueError:  # pragma: no cover - open_repo searched root's parents
            raise KexpError(f"{resolved} is not inside {top}") from None
        folder = EXPERIMENTS_DIR if relative == "." else f"{relative}/{EXPERIMENTS_DIR}"
        return cls(repo, top, resolved, folder)

    def path(self, repo_path: str) -> Path:
        """The store path (as the working tree would have it) of a repository path."""
        return Path(self.text_path(repo_path))

    def text_path(self, repo_path: str) -> str:
        """:meth:`path` as a string (cheaper: no :class:`Path` built)."""
        return f"{self.toplevel}/{repo_path}"

    def repo_path(self, path: Path) -> str | None:
        """The repository path of a store path (None when outside the repository)."""
        try:
            return Path(path).resolve().relative_to(self.toplevel).as_posix()
        except ValueError:
            return None

    def is_experiment(self, repo_path: str) -> bool:
        """Whether a repository path is an experiment file of this store (not hidden)."""
        prefix = self.folder + "/"
        if not repo_path.startswith(prefix):
            return False
        parts = repo_path[len(prefix) :].split("/")
        return EXPERIMENT_NAME.fullmatch(parts[-1]) is not None and not any(
            p.startswith(".") for p in parts[:-1]
        )

    def is_stray(self, repo_path: str) -> bool:
        """Whether a repository path is a Markdown file of this store that is not an
        experiment's (nor the folder's README): what validation reports
        (:func:`kexp.format.validate.is_stray`)."""
        prefix = self.folder + "/"
        return repo_path.startswith(prefix) and is_stray(repo_path[len(prefix) :])


class GitRevision:
    """The experiment files of one commit (see the module docstring).

    ``revision`` is the revision as given, ``commit`` its full hash. Paths are where
    the files would be in a checkout of that commit. Reading is bulk: one ``git
    ls-tree`` lists the files, one ``git cat-file --batch`` process streams the blobs.
    """

    writable = False
    cacheable = False
    places: tuple[str, ...] | None = None
    # One git process streams the blobs: a scan is not shared with a child.
    splittable = False

    def __init__(self, root: Path, revision: str) -> None:
        location = StoreLocation.of(root)
        self.location = location
        self.revision: str = revision
        self.commit: str = kgit.resolve_commit(location.repo, revision)
        self._hash = self.commit
        _, listing = kgit.run_git(location.repo, "ls-tree", self._hash, "--", location.folder)
        if listing.startswith(_SYMLINK_MODE + " "):
            raise KexpError(
                f"at revision {revision} ({self._hash[:12]}), {location.folder} is a symbolic "
                "link: kexp reads only a real folder, never through a link; give a "
                "revision where it is a folder"
            )
        if not listing.strip():
            raise StoreNotFoundError(
                f"there is no {location.folder}/ folder at revision {revision} "
                f"({self._hash[:12]}): the store did not exist yet there; "
                "give a later revision"
            )
        self._entries: dict[str, TreeEntry] | None = None
        self._strays: dict[str, TreeEntry] = {}
        self._sorted: list[Path] | None = None

    def _tree(self) -> dict[str, TreeEntry]:
        """Experiment files at this revision, by store path (as a string), listed once
        (with the strays, :meth:`stray_files`)."""
        if self._entries is None:
            loc = self.location
            entries: dict[str, TreeEntry] = {}
            strays: dict[str, TreeEntry] = {}
            for entry in kgit.list_tree(loc.repo, self._hash, loc.folder):
                if entry.mode == _SUBMODULE_MODE:
                    continue
                if loc.is_experiment(entry.path):
                    entries[loc.text_path(entry.path)] = entry
                elif loc.is_stray(entry.path):
                    strays[loc.text_path(entry.path)] = entry
            self._entries, self._strays = entries, strays
        return self._entries

    def stray_files(self, settings: Settings) -> list[tuple[str, bytes | Problem]]:
        """The Markdown files at this revision that are not experiment files (nor the
        folder's README), sorted, each with its bytes or the problem that says why it
        cannot be read."""
        self._tree()
        found: list[tuple[str, bytes | Problem]] = []
        readable = []
        for path, entry in sorted(self._strays.items()):
            problem = self._entry_problem(Path(path), entry, settings)
            found.append((path, problem if problem is not None else b""))
            if problem is None:
                readable.append((len(found) - 1, entry.sha))
        blobs = kgit.iter_blobs(self.location.repo, [sha for _, sha in readable])
        for (number, _), (_, data) in zip(readable, blobs, strict=True):
            found[number] = (found[number][0], data if data is not None else b"")
        return found

    def paths(self) -> list[Path]:
        """Every experiment file at this revision, sorted (as a checkout would list them)."""
        if self._sorted is None:
            # Sorted by path components, as Path objects sort.
            self._sorted = [Path(p) for p in sorted(self._tree(), key=lambda p: p.split("/"))]
        return list(self._sorted)

    def files(self) -> list[str]:
        """:meth:`paths` as strings, in the same order, without a ``Path`` made of each
        (what validation and reviews list: at 100,000 files, 1 MiB instead of 48)."""
        if self._sorted is not None or os.sep != "/" or self.location.toplevel == Path("/"):
            return [str(p) for p in self.paths()]
        # As paths() sorts them, component by component: "\0" sorts before any character.
        return sorted(self._tree(), key=lambda path: path.replace("/", "\0"))

    def check(self, path: Path, settings: Settings) -> CheckedFile:
        """Read and check one file at this revision."""
        return self.check_files([path], settings)[0]

    def check_files(self, paths: Sequence[Path], settings: Settings) -> list[CheckedFile]:
        """Read and check files at this revision, with one ``git cat-file --batch``
        process for all of them."""
        tree = self._tree()
        results: dict[int, CheckedFile] = {}
        to_read: list[tuple[int, Path, str]] = []
        for index, path in enumerate(paths):
            entry = tree.get(str(path))
            if entry is None:
                entry = tree.get(str(Path(path).resolve()))
            problem = self._entry_problem(Path(path), entry, settings)
            if problem is not None:
                results[index] = CheckedFile(Path(path), None, [problem])
            else:
                assert entry is not None
                to_read.append((index, Path(path), entry.sha))
        blobs = kgit.iter_blobs(self.location.repo, [sha for _, _, sha in to_read])
        for (index, path, _), (_, data) in zip(to_read, blobs, strict=True):
            if data is None:  # pragma: no cover - the tree names the blob
                results[index] = CheckedFile(
                    path, None, [_problem(path, "unreadable", "the blob is missing", "")]
                )
            else:
                results[index] = check_bytes(data, path, settings)
        return [results[i] for i in range(len(paths))]

    def contents(
        self, files: Sequence[str], settings: Settings
    ) -> Iterator[tuple[str, bytes | Problem]]:
        """Each of ``files`` at this revision, in order, with its bytes or the problem
        that says why it cannot be read (as :meth:`check_files` reports it).

        One ``git cat-file --batch`` process streams the blobs, each given as it comes:
        memory does not grow with the number of files.
        """
        tree = self._tree()

        def lookup(path: str) -> tuple[TreeEntry | None, Problem | None]:
            entry = tree.get(path)
            if entry is None:  # a path spelt otherwise, as check_files takes it
                entry = tree.get(str(Path(path))) or tree.get(str(Path(path).resolve()))
            return entry, self._entry_problem(Path(path), entry, settings)

        # Two passes over the paths (nothing kept per file but the blob's hash).
        shas = [entry.sha for entry, problem in map(lookup, files) if entry and not problem]
        blobs = kgit.iter_blobs(self.location.repo, shas)
        del shas
        try:
            for path in files:
                problem = lookup(path)[1]
                if problem is not None:
                    yield path, problem
                    continue
                _, data = next(blobs)
                if data is None:  # pragma: no cover - the tree names the blob
                    yield path, _problem(Path(path), "unreadable", "the blob is missing", "")
                else:
                    yield path, data
        finally:
            close = getattr(blobs, "close", None)  # a generator: ends the git process
            if close is not None:
                close()

    def vanished(self, path: Path) -> bool:
        """Never: a commit's files do not change."""
        return False

    def read(self, cache: Cache, settings: Settings, *, rows: bool = True) -> Found:
        """Every experiment file at this revision (the records of contents the cache
        does not hold are read from git; every row is made, whatever ``rows`` says)."""
        loc = self.location
        skip = len(loc.folder) + 1
        entries = [(path, entry) for path, entry in self._tree().items()]
        entries.sort(key=lambda item: item[1].path.split("/"))
        wanted = [(entry.path[skip:], entry) for _, entry in entries]
        records = record_blobs(
            loc.repo,
            cache,
            [(p, e.sha, e.mode, e.size) for p, e in wanted],
            settings,
            loc.toplevel / loc.folder,
        )
        found: list[Row] = []
        invalid: list[tuple[str, Any]] = []
        for (relative, entry), (error, values) in zip(wanted, records, strict=True):
            if values is None:
                invalid.append((relative, error))
            else:
                found.append(row_of(values, relative, bytes.fromhex(entry.sha)))
        return Found(found, invalid, found)

    def completed(self, cache: Cache, settings: Settings, found: Found) -> Found:
        """``found``: a revision's read makes every row."""
        return found

    def answer_places(self) -> None:
        """None: a revision's ranking is not kept (its read has no listing)."""
        return None

    def removed(self) -> dict[str, str]:
        """None: one revision removes nothing another holds."""
        return {}

    def shadowed_invalid(self, settings: Settings) -> list[tuple[str, str, bytes]]:
        """None: one revision holds one version."""
        return []

    def bytes_found(
        self, items: Sequence[tuple[str, bytes]], settings: Settings
    ) -> list[bytes | None]:
        """The bytes of each (path, content key), from git objects."""
        shas = [key.hex() for _, key in items]
        streamed = kgit.iter_blobs(self.location.repo, shas, max_bytes=settings.max_file_bytes)
        return [data if isinstance(data, bytes) else None for _, data in streamed]

    def check_found(self, rows: Sequence[Row], settings: Settings) -> list[CheckedFile]:
        """Read and check the files of ``rows`` at this revision."""
        base = self.location.toplevel / self.location.folder
        return check_blobs(
            self.location.repo, [(base / row.path, row.key) for row in rows], settings
        )

    def _entry_problem(
        self, path: Path, entry: TreeEntry | None, settings: Settings
    ) -> Problem | None:
        if entry is None:
            return _problem(
                path,
                "not-in-revision",
                f"the file is not an experiment file at revision {self.revision} "
                f"({self._hash[:12]})",
                "give a path that exists at that revision (git ls-tree -r "
                f"{self._hash[:12]} -- {self.location.folder} lists them)",
            )
        if entry.mode == _SYMLINK_MODE:
            return _problem(
                path,
                "symlink",
                "experiment files may not be symbolic links",
                "replace the link with the file itself",
            )
        if entry.size > settings.max_file_bytes:
            return size_problem(path, entry.size, settings.max_file_bytes)
        return None

    def read_only(self) -> KexpError:
        """The error a write to a store over this source raises."""
        return KexpError(
            f"the store at revision {self.revision} ({self._hash[:12]}) is read-only: "
            "check out a branch and write to the working tree instead"
        )


def record_blobs(
    repo: git.Repo | Worktree,
    cache: Cache,
    files: Sequence[tuple[str, str, str, int]],
    settings: Settings,
    base: Path,
) -> list[Record]:
    """The record of each file (path relative to ``experiments/``, blob hash, mode,
    size) of a commit, with the name rule applied (:func:`kexp.storage.rows.named_record`):
    from the cache by content key, else from git (one ``git cat-file --batch``, and the
    new records kept in the cache)."""
    keys = [bytes.fromhex(sha) for _, sha, _, _ in files]
    known = cache.contents(sorted(set(keys)))
    found: dict[bytes, Record] = {}
    missing = sorted(
        {
            sha
            for (_, sha, mode, size), key in zip(files, keys, strict=True)
            if key not in known and mode != _SYMLINK_MODE and size <= settings.max_file_bytes
        }
    )
    for sha, data in kgit.iter_blobs(repo, missing, max_bytes=settings.max_file_bytes):
        if isinstance(data, bytes):
            found[bytes.fromhex(sha)] = record_of(data, settings)
    if found:
        cache.save_contents(found)
        known.update(found)
    records: list[Record] = []
    for (relative, sha, mode, size), key in zip(files, keys, strict=True):
        path = base / relative
        if mode == _SYMLINK_MODE:
            problem = _problem(path, "symlink", "experiment files may not be symbolic links",
                               "replace the link with the file itself")  # fmt: skip
        elif size > settings.max_file_bytes:
            problem = size_problem(path, size, settings.max_file_bytes)
        elif key not in known:  # pragma: no cover - the tree names the blob
            problem = _problem(path, "unreadable", "the blob is missing", "")
        else:
            error, values = known[key]
            name_id = id_from_name(relative)
            if values is not None and name_id is not None and values[0] != name_id:
                data = next(iter(kgit.iter_blobs(repo, [sha])))[1]
                assert data is not None
                records.append(named_record(data, str(path), settings))
            else:
                records.append((error, values))
            continue
        records.append(
            ((problem.line, problem.column, problem.code, problem.field, problem.message,
              problem.hint), None)
        )  # fmt: skip
    return records


def check_blobs(
    repo: git.Repo | Worktree, files: Sequence[tuple[Path, bytes]], settings: Settings
) -> list[CheckedFile]:
    """Read and check files (path, content key) from git objects (one ``git cat-file
    --batch``); a blob over the size limit is not read."""
    shas = [key.hex() for _, key in files]
    checked: list[CheckedFile] = []
    streamed = kgit.iter_blobs(repo, shas, max_bytes=settings.max_file_bytes)
    for (path, _), (_, data) in zip(files, streamed, strict=True):
        if isinstance(data, bytes):
            checked.append(check_bytes(data, path, settings))
        elif isinstance(data, int):
            checked.append(
                CheckedFile(path, None, [size_problem(path, data, settings.max_file_bytes)])
            )
        else:  # pragma: no cover - the tree names the blob
            checked.append(
                CheckedFile(path, None, [_problem(path, "unreadable", "the blob is missing", "")])
            )
    return checked


def _problem(path: Path, code: str, message: str, hint: str) -> Problem:
    return Problem(str(path), 1, 1, "error", code, "", message, hint)
