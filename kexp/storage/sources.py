"""Where a store's bytes come from: the seam between a :class:`~kexp.storage.store.Store` and
its files.

A :class:`FileSource` finds the experiments a query sees (``read``: each current
experiment file's front-matter, with its path and content key, through the store's
cache, :mod:`kexp.storage.cache`), lists the experiment files (``paths``, ``files``), gives
their bytes (``contents``: each file's bytes, or the problem that says why it cannot be
read) and checks them (``check_files``, ``check_found``: the files of rows it found),
and says what a store over it may do: ``writable`` (writes go to its files) and
``cacheable`` (queries may keep what they read in the store's cache file). Three
sources exist: :class:`WorkingTree` (the files of ``experiments/`` on disk),
:class:`kexp.storage.snapshot.GitRevision` (the files of one commit, read from git objects)
and :class:`kexp.storage.refs.RefsSource` (the working tree and the store at any set of refs,
one entry per experiment: its newest version).
"""

from __future__ import annotations

import os
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, NamedTuple, Protocol

from kexp.core.campaign import Derivation, derive
from kexp.core.cumulative import INVALID
from kexp.core.errors import KexpError
from kexp.core.problems import Problem
from kexp.core.progress import track
from kexp.core.settings import Settings
from kexp.format.reading import read_or_problem
from kexp.format.rules import EXPERIMENT_NAME, id_from_name, is_stray
from kexp.format.validate import CheckedFile, read_and_check
from kexp.storage.rows import LOCAL, content_key

if TYPE_CHECKING:
    from kexp.storage.cache import Cache
    from kexp.storage.listing import Listing
    from kexp.storage.rows import Row

#: The folder of a store that holds its experiment files.
EXPERIMENTS_DIR = "experiments"

#: Files of the working tree read before any of them is checked (no system calls in
#: between the checks: faster).
READ_BATCH = 256
#: Files asked at once of :meth:`FileSource.check_files` where whole documents are
#: kept (memory), such as files read again for the positions of their problems.
CHECK_BATCH = 2048


def removed_phrase(place: str) -> str:
    """How an experiment whose newest state is its removal by ``place`` (read across
    refs: the working tree, or a ref) is said: ``was removed on origin/kexp/bob``."""
    return (
        "was removed in the working tree (kexp rm, or a commit of its branch)"
        if place == LOCAL
        else f"was removed on {place}"
    )


class Found(NamedTuple):
    """What a query sees of a source (:meth:`FileSource.read`)."""

    #: Every current valid experiment file's row, in path order (for a source of
    #: several places, one entry per experiment: its newest version).
    rows: list[Row]
    #: (path relative to ``experiments/``, its first error: a :class:`Problem`, or the
    #: error tuple of a record) of every invalid file.
    invalid: list[tuple[str, Any]]
    #: The working tree's rows (the same list as ``rows`` for the working tree alone;
    #: those of a revision for a revision).
    local: list[Row]
    #: The working tree's listing (None at a revision).
    listing: Listing | None = None
    #: What the read saw besides the working tree's files, naming the answer a ranking
    #: keeps (:mod:`kexp.storage.answers`), as (name, value) pairs: ``HEAD``'s commit,
    #: each ref's and what rewrites the history when refs were read; () for the working
    #: tree alone.
    places: tuple[Any, ...] = ()
    #: The experiments whose newest state is their removal (read across refs: not
    #: read), each with the place that removed it.
    removed: tuple[tuple[str, str], ...] = ()

    def derivation(self, settings: Settings) -> Derivation:
        """What is derived of every row from all of them
        (:func:`kexp.core.campaign.derive`), the invalid files' ids told apart."""
        if not self.removed:
            return derive(self.rows, settings, self.invalid_ids())
        absent = dict.fromkeys(self.invalid_ids(), INVALID)
        absent.update((exp_id, removed_phrase(place)) for exp_id, place in self.removed)
        return derive(self.rows, settings, absent)

    def invalid_ids(self) -> frozenset[str]:
        """The ids the names of the invalid files give (an experiment whose file is there
        but broken: what names it is told so, not that it is missing)."""
        return frozenset(
            exp_id for path, _ in self.invalid if (exp_id := id_from_name(path)) is not None
        )

    @classmethod
    def of_listing(cls, listing: Listing) -> Found:
        """What the working tree alone holds, as ``listing`` found it."""
        rows, invalid = listing.rows()
        return cls(rows, invalid, rows, listing)

    def held_ids(self) -> set[str]:
        """The id of every experiment the read holds (its valid rows, its invalid files)."""
        return {row.id for row in self.rows} | self.invalid_ids()

    def ids(self) -> list[str]:
        """The id of every experiment file read: of every version, the invalid files' too."""
        found = [row.id for row in self.rows]
        if self.local is not self.rows:
            found += [row.id for row in self.local]
        return found + list(self.invalid_ids())


class FileSource(Protocol):
    """Where the experiment files of a store come from (see the module docstring)."""

    def read(self, cache: Cache, settings: Settings, *, rows: bool = True) -> Found:
        """Every experiment file a query sees, through ``cache`` (``rows=False``: the
        working tree's listing alone, its rows not made, for a caller that may need none
        of them: :mod:`kexp.storage.answers`; :meth:`completed` makes it whole)."""

    def completed(self, cache: Cache, settings: Settings, found: Found) -> Found:
        """The read ``read(rows=False)`` began (``found``), made whole."""

    def answer_places(self) -> tuple[Any, ...] | None:
        """What a read now would see besides the working tree's files (the ``places`` of
        :class:`Found`): what a kept answer is kept under; None: no answer is kept."""

    def removed(self) -> dict[str, str]:
        """The experiments whose newest state is their removal (read across refs), each
        with how it is said (``was removed on origin/kexp/bob``)."""

    def shadowed_invalid(self, settings: Settings) -> list[tuple[str, str, bytes]]:
        """(store path, place, bytes) of each invalid version another place holds of an
        experiment read from a valid one (read across refs): validate reports them."""

    def check_found(self, rows: Sequence[Row], settings: Settings) -> list[CheckedFile]:
        """Read and check the files :meth:`read` found for ``rows`` (the working tree's
        as they are now, another place's by content key)."""

    def bytes_found(
        self, items: Sequence[tuple[str, bytes]], settings: Settings
    ) -> list[bytes | None]:
        """The bytes of each (path relative to ``experiments/``, content key) found by
        :meth:`read`: exactly that content, or None when it cannot be read (a file
        changed since)."""

    @property
    def places(self) -> tuple[str, ...] | None:
        """The places read, the working tree first (None: one place only)."""

    @property
    def writable(self) -> bool:
        """Whether a store over this source may write its files."""

    @property
    def cacheable(self) -> bool:
        """Whether queries may keep what they read in the store's cache file (else the
        cache is kept in memory, for one query)."""

    @property
    def splittable(self) -> bool:
        """Whether a scan of every file may be shared with a forked child process."""

    @property
    def revision(self) -> str | None:
        """The revision as given (None: the working tree)."""

    @property
    def commit(self) -> str | None:
        """The full hash of :attr:`revision` (None: the working tree)."""

    def paths(self) -> list[Path]:
        """Every experiment file, sorted as ``Path`` objects sort."""

    def files(self) -> list[str]:
        """:meth:`paths` as strings, in the same order (lighter than ``Path`` objects)."""

    def contents(
        self, files: Sequence[str], settings: Settings
    ) -> Iterator[tuple[str, bytes | Problem]]:
        """Each of ``files`` in order, with its bytes or the problem saying why it cannot
        be read (memory does not grow with the number of files)."""

    def check(self, path: Path, settings: Settings) -> CheckedFile:
        """Read and check one file."""

    def check_files(self, paths: Sequence[Path], settings: Settings) -> list[CheckedFile]:
        """Read and check each of ``paths``."""

    def stray_files(self, settings: Settings) -> list[tuple[str, bytes | Problem]]:
        """The Markdown files that are not experiment files (nor the folder's README:
        :func:`kexp.format.validate.is_stray`), sorted, each with its bytes or the problem that
        says why it cannot be read: what validation reports."""

    def vanished(self, path: Path) -> bool:
        """Whether ``path`` was listed but is gone now (deleted by another process)."""

    def read_only(self) -> KexpError:
        """The error a write to a store over a source that is not writable raises."""


class WorkingTree:
    """The files of an ``experiments/`` folder on disk: writable, cacheable unless
    ``cacheable=False`` (every query then reads every file: the truth the cache is
    compared with)."""

    def read(self, cache: Cache, settings: Settings, *, rows: bool = True) -> Found:
        """Every experiment file as it is now (:func:`kexp.storage.listing.refresh`)."""
        # lazy: not every command that imports this module needs kexp.storage.listing
        from kexp.storage.listing import refresh

        listing = refresh(cache, self.experiments_dir, settings, rows=rows)
        return Found.of_listing(listing) if rows else Found([], [], [], listing)

    def completed(self, cache: Cache, settings: Settings, found: Found) -> Found:
        """Every row of the listing ``read(rows=False)`` found."""
        assert found.listing is not None
        return Found.of_listing(found.listing)

    def answer_places(self) -> tuple[Any, ...]:
        """(): the working tree alone."""
        return ()

    def removed(self) -> dict[str, str]:
        """None: one place removes nothing another holds."""
        return {}

    def shadowed_invalid(self, settings: Settings) -> list[tuple[str, str, bytes]]:
        """None: one place holds one version."""
        return []

    def check_found(self, rows: Sequence[Row], settings: Settings) -> list[CheckedFile]:
        """Read and check the files of ``rows`` as they are now."""
        base = self.experiments_dir
        return [read_and_check(base / row.path, settings) for row in rows]

    def bytes_found(
        self, items: Sequence[tuple[str, bytes]], settings: Settings
    ) -> list[bytes | None]:
        """The bytes of each (path relative to ``experiments/``, content key) when the
        file holds that content now (else None)."""
        found: list[bytes | None] = []
        for path, key in items:
            data = read_or_problem(self.experiments_dir / path, settings)
            found.append(data if isinstance(data, bytes) and content_key(data) == key else None)
        return found

    revision: str | None = None
    commit: str | None = None
    places: tuple[str, ...] | None = None
    writable = True
    splittable = True

    def __init__(self, experiments_dir: Path, *, cacheable: bool = True) -> None:
        self.experiments_dir = experiments_dir
        self.cacheable = cacheable

    def paths(self) -> list[Path]:
        """Every experiment file (``<id>-<slug>.md`` under ``experiments/``), sorted.

        Hidden files and folders (temporary files of writers in progress) and symbolic
        links to folders are not followed.
        """
        found: list[Path] = []
        for folder, dirs, files in os.walk(self.experiments_dir):
            dirs[:] = sorted(d for d in dirs if not d.startswith("."))
            for name in files:
                if id_from_name(name) is not None:
                    found.append(Path(folder, name))
        found.sort()
        return found

    def files(self) -> list[str]:
        """:meth:`paths` as strings, in the same order, without a ``Path`` made of each."""
        if os.sep != "/":
            return [str(p) for p in self.paths()]
        fullmatch = EXPERIMENT_NAME.fullmatch
        found: list[str] = []
        for folder, dirs, names in os.walk(self.experiments_dir):
            dirs[:] = sorted(d for d in dirs if not d.startswith("."))
            found.extend(f"{folder}/{name}" for name in names if fullmatch(name) is not None)
        # As Path objects sort, component by component: "\0" sorts before any character
        # of a name (a list of components per path would take more memory).
        found.sort(key=lambda path: path.replace("/", "\0"))
        return found

    def stray_files(self, settings: Settings) -> list[tuple[str, bytes | Problem]]:
        """The Markdown files of ``experiments/`` that are not experiment files (nor its
        README), sorted, each with its bytes or the problem saying why it cannot be read."""
        top = str(self.experiments_dir)
        found: list[str] = []
        for folder, dirs, names in os.walk(top):
            dirs[:] = sorted(d for d in dirs if not d.startswith("."))
            below = os.path.relpath(folder, top).replace(os.sep, "/")
            prefix = "" if below == "." else below + "/"
            found.extend(os.path.join(folder, name) for name in names if is_stray(prefix + name))
        found.sort()
        return [(path, read_or_problem(path, settings)) for path in found]

    def contents(
        self, files: Sequence[str], settings: Settings
    ) -> Iterator[tuple[str, bytes | Problem]]:
        """Each of ``files``, read :data:`READ_BATCH` at a time before any is given."""
        for start in range(0, len(files), READ_BATCH):
            batch = files[start : start + READ_BATCH]
            yield from zip(batch, [read_or_problem(f, settings) for f in batch], strict=True)

    def check(self, path: Path, settings: Settings) -> CheckedFile:
        """Read and check one file (refusing an oversize file and a link)."""
        return read_and_check(path, settings)

    def check_files(self, paths: Sequence[Path], settings: Settings) -> list[CheckedFile]:
        """Read and check each of ``paths`` (refusing oversize files and links)."""
        return [read_and_check(p, settings) for p in track(paths)]

    def vanished(self, path: Path) -> bool:
        """Whether nothing is at ``path`` any more."""
        return not os.path.lexists(path)

    def read_only(self) -> KexpError:
        """Never raised: the working tree is writable."""
        return KexpError(f"{self.experiments_dir} is read-only")  # pragma: no cover
