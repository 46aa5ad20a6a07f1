"""The store as it was at any revision, read straight from git objects.

``Store(root).at("HEAD~1")`` returns a :class:`RevisionStore`: the same query API
(``list_experiments``, ``top_experiments``, ``get_experiment``, lineage) and the same
validation as the working tree, but reading the files of one commit without a checkout
and without touching the working tree. It is read-only: writes raise
:class:`~kexp.errors.KexpError`.

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

from kexp.errors import KexpError, StoreNotFoundError
from kexp.problems import Problem
from kexp.progress import track_part
from kexp.store import EXPERIMENTS_DIR, Store
from kexp.validate import (
    EXPERIMENT_NAME,
    CheckedFile,
    FileLinks,
    ScanRecord,
    check_bytes,
    scan_bytes,
    scan_record,
    size_problem,
)

if TYPE_CHECKING:
    import git

    from kexp.git import TreeEntry
    from kexp.model import KernelExperiment

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
        from kexp import git as kgit

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


class RevisionStore(Store):
    """A read-only :class:`~kexp.store.Store` at one commit (see :meth:`Store.at`).

    ``revision`` is the revision as given, ``commit`` its full hash. Experiments'
    ``path`` is where the file would be in a checkout of that commit.
    """

    # Read from git objects: the working tree's cache does not apply.
    _cached = False

    def __init__(self, store: Store, revision: str) -> None:
        from kexp import git as kgit

        self.__dict__.update(store.__dict__)
        location = StoreLocation.of(store.root)
        self.location = location
        self.revision = revision
        self.commit = kgit.resolve_commit(location.repo, revision)
        _, listing = kgit.run_git(location.repo, "ls-tree", self.commit, "--", location.folder)
        if listing.startswith(_SYMLINK_MODE + " "):
            raise KexpError(
                f"at revision {revision} ({self.commit[:12]}), {location.folder} is a symbolic "
                "link: kexp reads only a real folder, never through a link; give a "
                "revision where it is a folder"
            )
        if not listing.strip():
            raise StoreNotFoundError(
                f"there is no {location.folder}/ folder at revision {revision} "
                f"({self.commit[:12]}): the store did not exist yet there; "
                "give a later revision"
            )
        self._entries: dict[str, TreeEntry] | None = None
        self._sorted: list[Path] | None = None

    def __repr__(self) -> str:
        return f"Store({str(self.root)!r}).at({self.revision!r})"

    # --- reading from git objects ------------------------------------------------

    def _tree(self) -> dict[str, TreeEntry]:
        """Experiment files at this revision, by store path (as a string), listed once."""
        if self._entries is None:
            from kexp import git as kgit

            loc = self.location
            self._entries = {
                loc.text_path(entry.path): entry
                for entry in kgit.list_tree(loc.repo, self.commit, loc.folder)
                if entry.mode != _SUBMODULE_MODE and loc.is_experiment(entry.path)
            }
        return self._entries

    def paths(self) -> list[Path]:
        """Every experiment file at this revision, sorted (as a checkout would list them)."""
        if self._sorted is None:
            # Sorted by path components, as Path objects sort.
            self._sorted = [Path(p) for p in sorted(self._tree(), key=lambda p: p.split("/"))]
        return list(self._sorted)

    def _validation_files(self) -> list[str]:
        """:meth:`paths` as strings, in the same order, without a ``Path`` made of each
        (what validation and reviews list: at 100,000 files, 1 MiB instead of 48)."""
        if self._sorted is not None or os.sep != "/" or self.location.toplevel == Path("/"):
            return [str(p) for p in self.paths()]
        # As paths() sorts them, component by component: "\0" sorts before any character.
        return sorted(self._tree(), key=lambda path: path.replace("/", "\0"))

    def _read(self, path: Path) -> CheckedFile:
        return self.check_files([path])[0]

    def check_files(self, paths: list[Path] | None = None) -> list[CheckedFile]:
        """Read and check files at this revision (all experiment files by default), with
        one ``git cat-file --batch`` process for all of them."""
        from kexp import git as kgit

        tree = self._tree()
        wanted = list(paths) if paths else self.paths()
        results: dict[int, CheckedFile] = {}
        to_read: list[tuple[int, Path, str]] = []
        for index, path in enumerate(wanted):
            entry = tree.get(str(path))
            if entry is None:
                entry = tree.get(str(Path(path).resolve()))
            problem = self._entry_problem(Path(path), entry)
            if problem is not None:
                results[index] = CheckedFile(Path(path), None, [problem])
            else:
                assert entry is not None
                to_read.append((index, Path(path), entry.sha))
        blobs = kgit.iter_blobs(self.location.repo, [sha for _, _, sha in to_read])
        for (index, path, _), (_, data) in zip(to_read, blobs, strict=True):
            if data is None:  # pragma: no cover - the tree names the blob
                results[index] = CheckedFile(
                    path, None, [self._problem(path, "unreadable", "the blob is missing", "")]
                )
            else:
                results[index] = check_bytes(data, path, self.settings)
        return [results[i] for i in range(len(wanted))]

    def contents(self, paths: Sequence[str]) -> Iterator[tuple[str, bytes | Problem]]:
        """Each of ``paths`` at this revision, in order, with its bytes or the problem
        that says why it cannot be read (as :meth:`check_files` reports it): what
        :func:`kexp.validate.read_or_problem` is to the working tree.

        One ``git cat-file --batch`` process streams the blobs, each given as it comes:
        memory does not grow with the number of files.
        """
        from kexp import git as kgit

        tree = self._tree()

        def lookup(path: str) -> tuple[TreeEntry | None, Problem | None]:
            entry = tree.get(path)
            if entry is None:  # a path spelt otherwise, as check_files takes it
                entry = tree.get(str(Path(path))) or tree.get(str(Path(path).resolve()))
            return entry, self._entry_problem(Path(path), entry)

        # Two passes over the paths (nothing kept per file but the blob's hash).
        shas = [entry.sha for entry, problem in map(lookup, paths) if entry and not problem]
        blobs = kgit.iter_blobs(self.location.repo, shas)
        del shas
        try:
            for path in paths:
                problem = lookup(path)[1]
                if problem is not None:
                    yield path, problem
                    continue
                _, data = next(blobs)
                if data is None:  # pragma: no cover - the tree names the blob
                    yield path, self._problem(Path(path), "unreadable", "the blob is missing", "")
                else:
                    yield path, data
        finally:
            close = getattr(blobs, "close", None)  # a generator: ends the git process
            if close is not None:
                close()

    def _validation_records(self, files: list[str], total: int) -> list[ScanRecord]:
        """What :meth:`Store.validate` keeps of each of ``files`` (part of ``total``),
        from the blobs streamed by :meth:`contents`, each checked with
        :func:`~kexp.validate.scan_bytes` (a canonical file without the full parse)."""
        settings = self.settings
        records: list[ScanRecord] = []
        shared: dict[str, str] = {}  # one string per base_commit value (they repeat)
        for path, data in track_part(self.contents(files), len(files), total):
            if isinstance(data, Problem):
                found, link = [data], FileLinks.of(path, None)
            else:
                found, link = scan_bytes(data, path, settings)
            records.append(scan_record(found, link, shared))
        return records

    def _entry_problem(self, path: Path, entry: TreeEntry | None) -> Problem | None:
        if entry is None:
            return self._problem(
                path,
                "not-in-revision",
                f"the file is not an experiment file at revision {self.revision} "
                f"({self.commit[:12]})",
                "give a path that exists at that revision (git ls-tree -r "
                f"{self.commit[:12]} -- {self.location.folder} lists them)",
            )
        if entry.mode == _SYMLINK_MODE:
            return self._problem(
                path,
                "symlink",
                "experiment files may not be symbolic links",
                "replace the link with the file itself",
            )
        if entry.size > self.settings.max_file_bytes:
            return size_problem(path, entry.size, self.settings.max_file_bytes)
        return None

    @staticmethod
    def _problem(path: Path, code: str, message: str, hint: str) -> Problem:
        return Problem(str(path), 1, 1, "error", code, "", message, hint)

    # --- read-only -------------------------------------------------------------------

    def _refuse(self) -> KexpError:
        return KexpError(
            f"the store at revision {self.revision} ({self.commit[:12]}) is read-only: "
            "check out a branch and write to the working tree instead"
        )

    def create_experiment(
        self, exp: KernelExperiment | None = None, **fields: Any
    ) -> KernelExperiment:
        """Refused: a store at a revision is read-only."""
        raise self._refuse()

    def update_experiment(self, exp_id: str, **changes: Any) -> KernelExperiment:
        """Refused: a store at a revision is read-only."""
        raise self._refuse()

    def delete_experiment(self, exp_id: str, *, force: bool = False) -> Path:
        """Refused: a store at a revision is read-only."""
        raise self._refuse()

    @property
    def cache_dir(self) -> Path:
        """Refused: a store at a revision writes nothing, not even its cache."""
        raise self._refuse()
