"""The store's cache: every experiment file's front-matter, keyed by the file's stat.

Queries rank and filter on front-matter alone, so kexp keeps it for every file in
``.kexp/index-<hash>.sqlite`` (git-ignored; SQLite from Python's standard library; the
hash names the kexp version, layout and settings) and reads a file again only when its
stat signature (modification time in nanoseconds, size, inode, change time) differs
from the cached one.

How a query checks the cache, in order:

1. Walk ``experiments/`` and ``stat`` every ``*.md`` file, folder by folder (a folder
   whose own signature is the cached one is not listed again: its names are the
   cached ones); a folder whose sorted names and packed signatures equal the cached
   ones is unchanged, and none of its files is compared one by one. With many files,
   on a machine with more than one core, the folders are split between this process
   and one forked child.
2. Files of changed folders whose signature differs (or which are new) are read and
   checked again; rows of files that are gone are dropped; all of it in one SQLite
   transaction, so a crash leaves the previous cache.
3. Ranking asks SQLite for rows in score order and stops once it has enough; every row
   a query returns is checked against the signature of the file on disk found in step
   1, and a row that does not match (a cache damaged by anything) makes kexp rebuild
   the cache from the files and answer from that.

The cache is never trusted beyond that:

* A file modified within :data:`RACY_NS` of the moment the cache is written is stored
  with a signature no file has (git calls such entries "racily clean"): an edit in
  place that keeps the size and lands in the same timestamp tick cannot hide behind it.
* A corrupt cache, one SQLite cannot open, or one whose header row is not this kexp's
  is rebuilt silently. A new cache file is linked into place only where there is none
  (or the one there is unusable), never renamed over a cache another process may be
  writing: SQLite names its rollback journal after the path, and would apply a journal
  of the old file to the new one.
* Another process writing the cache at the same moment is waited for briefly and then
  left alone: a cache that cannot be written is an optimisation lost, never an error.

Rows hold the front-matter as ``marshal`` data, which cannot run code when read (unlike
pickle): the cache folder is only git-ignored, not trusted.
"""

from __future__ import annotations

import bisect
import contextlib
import gc
import itertools
import marshal
import os
import stat
import sys
import time
import zlib
from array import array
from collections.abc import Callable, Iterable, Iterator, Sequence
from pathlib import Path
from struct import Struct
from typing import TYPE_CHECKING, Any, NamedTuple, TypeVar

from kexp.model import FRONT_MATTER_FIELDS, KernelExperiment, attach, experiment_from_fields
from kexp.query import below_best_combined

if TYPE_CHECKING:
    import sqlite3

    from kexp.query import Filters
    from kexp.settings import Settings


def index_file_name(settings: Settings) -> str:
    """The cache's file name: one per kexp version, layout and settings, so that two
    kexp versions sharing a store keep a cache each instead of replacing each other's."""
    return f"index-{zlib.crc32(_header(settings).encode()):08x}.sqlite"


#: Files modified this recently (ns) before the cache is written are not cached.
RACY_NS = 2_000_000_000
#: A signature no file has: racily clean entries, symbolic links, unreadable names.
_NO_SIGNATURE = (-1, -1, -1, -1)
#: Packs (mtime_ns, size, inode, ctime_ns) as :func:`signatures` does (native int64).
_pack = Struct("=4q").pack
#: Below this many files one process checks them all (a fork costs more than it saves).
PARALLEL_MIN_FILES = 3000
#: How many files a worker reads before checking them (see ``Index._checker``).
READ_BATCH = 256

#: The fields of a :class:`Row`, in order.
ROW_FIELDS = (*FRONT_MATTER_FIELDS, "extra_fields", "path", "interference")
_DEFAULTS: dict[str, Any] = {
    "score_ci": (),
    "tags": (),
    "author": "",
    "combines": (),
    "protocol": None,
    "results": (),
}
_KNOWN = frozenset(FRONT_MATTER_FIELDS)
_ID, _SCORE, _STATUS, _IS_BUGGY, _OPERATOR, _DTYPE, _ENV = (
    ROW_FIELDS.index(name)
    for name in ("id", "score", "status", "is_buggy", "operator_sig", "dtype_sig", "env")
)

_FILES_TABLE = """
CREATE TABLE files (
    path TEXT PRIMARY KEY,        -- folder + name
    folder TEXT NOT NULL,
    name_id TEXT NOT NULL,        -- the id in the file's name
    signature BLOB NOT NULL,      -- the signature the row was read at
    valid INTEGER NOT NULL,
    error TEXT NOT NULL,          -- the first error of an invalid file
    id TEXT,
    score REAL,
    operator_lc TEXT,             -- lowercased for substring filters (Python's lower())
    dtype_lc TEXT,
    env_lc TEXT,
    status TEXT,
    is_buggy INTEGER,
    data BLOB                     -- marshal: the front-matter values (Row order)
)"""
_TABLES = (
    "CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL)",
    # The small columns first: SQLite reads a row's columns in order, through the
    # overflow pages of the large ones (a prefix lookup reads only the small ones).
    """CREATE TABLE folders (
        folder TEXT PRIMARY KEY,      -- relative to experiments/: '' or ending with '/'
        experiments INTEGER NOT NULL, -- how many of the names are experiment file names
        listed_at BLOB NOT NULL,      -- the folder's own signature when it was listed
        subfolders BLOB NOT NULL,     -- marshal: the sorted sub-folder names
        names BLOB NOT NULL,          -- marshal: the sorted *.md names
        signatures BLOB NOT NULL      -- 4 int64 per name: mtime_ns, size, inode, ctime_ns
    )""",
    _FILES_TABLE,
)
#: A valid file's id is the one in its name (else it is an error), so ``name_id``
#: serves lookups by id too.
_INDEXES = (
    "CREATE INDEX files_by_score ON files (valid, score)",
    "CREATE INDEX files_by_name_id ON files (name_id)",
)
_ROW_COLUMNS = "path, folder, signature, data"
_FOLDER_COLUMNS = "folder, names, signatures, experiments, listed_at, subfolders"
_INSERT_FOLDER = f"INSERT INTO folders ({_FOLDER_COLUMNS}) VALUES (?, ?, ?, ?, ?, ?)"
_UPSERT_FOLDER = f"INSERT OR REPLACE INTO folders ({_FOLDER_COLUMNS}) VALUES (?, ?, ?, ?, ?, ?)"


class Row(NamedTuple):
    """The front-matter of one valid experiment, as the cache holds it.

    It has the attributes filtering and ranking read (``score``, ``operator_sig``,
    ...), so queries run on rows and build experiments only for what they return.
    ``path`` is relative to ``experiments/``; lists are tuples.
    """

    id: str
    pid: str
    change_summary: str
    score: float
    score_ci: tuple[float, ...]
    status: str
    is_buggy: bool
    operator_sig: str
    dtype_sig: str
    env: str
    base_commit: str
    created_at: str
    tags: tuple[str, ...]
    author: str
    combines: tuple[str, ...]
    protocol: dict[str, Any] | None
    results: tuple[dict[str, Any], ...]
    extra_fields: dict[str, Any] | None
    path: str
    interference: bool

    def to_experiment(self, experiments_dir: Path) -> KernelExperiment:
        """The experiment with this front-matter (body fields empty: not read)."""
        fields: dict[str, Any] = {}
        for name, value in zip(FRONT_MATTER_FIELDS, self, strict=False):
            fields[name] = (
                [dict(v) if isinstance(v, dict) else v for v in value]
                if isinstance(value, tuple)
                else dict(value)
                if isinstance(value, dict)
                else value
            )
        fields.update(self.extra_fields or {})
        exp = experiment_from_fields(fields, experiments_dir / self.path)
        return attach(exp, interference=self.interference)


#: A file's packed stat signature: 4 native int64 (see :func:`signatures`).
Signature = bytes
#: Files of one folder to read: (folder, names, their signatures or None: take them as
#: each file is opened).
Group = tuple[str, list[str], "list[Signature] | None"]
#: One checked file: (path, signature, values or None, first error or "").
Checked = tuple[str, Signature, "tuple[Any, ...] | None", str]


class StaleCacheError(Exception):
    """A cached row does not match its file (the cache was damaged): rebuild it."""


#: (position, default) of the optional fields: the only ones a valid file may leave out
#: (or set to null) and the only lists the schema allows.
_OPTIONAL_AT = tuple(
    (index, _DEFAULTS[name]) for index, name in enumerate(FRONT_MATTER_FIELDS) if name in _DEFAULTS
)


def _values(fields: dict[str, Any]) -> tuple[Any, ...]:
    """A valid file's front-matter as a compact tuple in :data:`ROW_FIELDS` order
    (missing optional fields as their defaults, lists as tuples)."""
    values = list(map(fields.get, FRONT_MATTER_FIELDS))
    for index, default in _OPTIONAL_AT:
        value = values[index]
        if value is None:
            values[index] = default
        elif type(value) is list:
            values[index] = tuple(value)
    values.append(
        None if fields.keys() <= _KNOWN else {k: v for k, v in fields.items() if k not in _KNOWN}
    )
    return tuple(values)


def _header(settings: Settings) -> str:
    from kexp import __version__

    layout = ",".join(ROW_FIELDS)
    return (
        f"kexp-index/7 kexp={__version__} python-marshal={marshal.version} "
        f"max_file_bytes={settings.max_file_bytes} fields={layout}"
    )


# --- walking --------------------------------------------------------------------------


def list_folder(path: str, prefix: str = "") -> tuple[list[str], list[str]] | None:
    """(sorted ``*.md`` names starting with ``prefix``, sorted sub-folder names) of one
    folder; None when it is not a folder (any more).

    Hidden entries (writers' temporary files) are skipped. A name ending in ``.md`` is
    taken for a file without a ``stat`` (each gets one later, which tells a file from
    anything else); other names are ``lstat``-ed to find folders, so symbolic links to
    folders are not followed.
    """
    try:
        entries = os.listdir(path)
    except (FileNotFoundError, NotADirectoryError, PermissionError):
        return None
    entries.sort()
    # A folder of experiments holds *.md files only: tell so without a loop in Python.
    joined = "\0" + "\0".join(entries) + "\0"
    plain = joined.count(".md\0") == len(entries) and "\0." not in joined
    if prefix:
        start = bisect.bisect_left(entries, prefix)
        end = bisect.bisect_left(entries, prefix + "\U0010ffff", start)
        names = [name for name in entries[start:end] if name.endswith(".md")]
    else:
        names = entries if plain else [n for n in entries if n.endswith(".md") and n[0] != "."]
    folders: list[str] = []
    if not plain:
        for name in [n for n in entries if n[0] != "." and not n.endswith(".md")]:
            try:
                if stat.S_ISDIR(os.lstat(os.path.join(path, name)).st_mode):
                    folders.append(name)
            except OSError:
                continue
    return names, folders


def walk_folders(visit: Callable[[str], Iterable[str]]) -> None:
    """``visit(folder)`` for ``""`` (the top) and every folder below it that a visit
    names: ``visit`` returns the names of a folder's sub-folders to visit too. Folders
    are relative to the top, ``""`` or ending with ``os.sep``."""
    pending = [""]
    while pending:
        folder = pending.pop()
        pending.extend(f"{folder}{name}{os.sep}" for name in visit(folder))


def walk_experiment_names(folder: str, prefix: str = "") -> list[tuple[str, str]]:
    """(folder, name) of every ``<id>-<slug>.md`` file below ``folder`` whose name starts
    with ``prefix``; no file is stat'ed (finding an id needs names only)."""
    from kexp.validate import EXPERIMENT_NAME

    fullmatch = EXPERIMENT_NAME.fullmatch
    base = folder.rstrip(os.sep) + os.sep
    found: list[tuple[str, str]] = []

    def visit(relative: str) -> list[str]:
        path = base + relative
        listed = list_folder(path, prefix)
        if listed is None:
            return []
        names, subfolders = listed
        found.extend((path.rstrip(os.sep), name) for name in names if fullmatch(name))
        return subfolders

    walk_folders(visit)
    return found


def signatures(folder: str, names: Sequence[str]) -> array[int]:
    """The packed stat signatures of ``names`` in ``folder`` (4 int64 each, in order);
    :data:`_NO_SIGNATURE` for a name that is gone or not a regular file."""
    packed: array[int] = array("q")
    extend = packed.extend
    try:
        fd = os.open(folder, os.O_RDONLY | getattr(os, "O_DIRECTORY", 0))
    except OSError:
        for _ in names:
            extend(_NO_SIGNATURE)
        return packed
    try:
        is_regular = stat.S_ISREG
        for name in names:
            try:
                info = os.stat(name, dir_fd=fd, follow_symlinks=False)
            except OSError:
                extend(_NO_SIGNATURE)
                continue
            if is_regular(info.st_mode):
                extend((info.st_mtime_ns, info.st_size, info.st_ino, info.st_ctime_ns))
            else:
                extend(_NO_SIGNATURE)
    finally:
        os.close(fd)
    return packed


# --- two processes --------------------------------------------------------------------

_In = TypeVar("_In")


def _forkable() -> bool:
    """Whether a child may be forked safely: POSIX, several cores, no other thread."""
    if not hasattr(os, "fork") or os.environ.get("KEXP_NO_FORK"):
        return False
    threading = sys.modules.get("threading")
    if threading is not None and threading.active_count() > 1:
        return False
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    return (cores or 1) > 1


def in_two_processes(
    work: Callable[[list[_In]], list[Any]],
    items: list[_In],
    weight: int,
    weights: Sequence[int] | None = None,
    discarded: Callable[[int], None] | None = None,
) -> list[Any]:
    """``work(items)`` as one list, split between this process and a forked child when
    ``weight`` (the number of files involved) makes it worth it; ``weights`` (one per
    item) balance the halves.

    The child sends its result back as ``marshal`` data; if it fails in any way its
    half is done here instead, so the answer never depends on the child.
    ``discarded(pid)`` runs when the child's result is not used (to clean up after it).
    """
    if weight < PARALLEL_MIN_FILES or len(items) < 2 or not _forkable():
        return work(items)
    half = len(items) // 2
    if weights is not None:
        total, running = sum(weights), 0
        for index, value in enumerate(weights):
            running += value
            if running * 2 >= total:
                half = max(1, min(len(items) - 1, index + 1))
                break
    mine, theirs = items[:half], items[half:]
    read_end, write_end = os.pipe()
    sys.stdout.flush()
    sys.stderr.flush()
    pid = os.fork()
    if pid == 0:  # pragma: no cover - the child (its result is checked by the parent)
        status = 1
        try:
            os.close(read_end)
            data = marshal.dumps(list(work(theirs)))
            view = memoryview(data)
            while view:
                view = view[os.write(write_end, view) :]
            status = 0
        finally:
            os._exit(status)
    os.close(write_end)
    try:
        result = list(work(mine))
        chunks = []
        while chunk := os.read(read_end, 1 << 20):
            chunks.append(chunk)
    except BaseException:
        os.close(read_end)  # first: a child blocked writing to the pipe then ends
        os.waitpid(pid, 0)
        if discarded is not None:
            discarded(pid)
        raise
    os.close(read_end)
    _, status = os.waitpid(pid, 0)
    if status == 0:
        try:
            result.extend(marshal.loads(b"".join(chunks)))
            return result
        except (EOFError, ValueError, TypeError):
            pass
    if discarded is not None:
        discarded(pid)
    return result + list(work(theirs))


# --- checking files -------------------------------------------------------------------


# --- the cache ------------------------------------------------------------------------


class _Folder(NamedTuple):
    names: tuple[str, ...]
    signatures: bytes
    experiments: int
    #: The folder's own signature when it was listed: unchanged, so is the listing.
    listed_at: bytes
    subfolders: tuple[str, ...]


#: One folder as a refresh found it: (its own signature, its sub-folder names, its sorted
#: ``*.md`` names, their packed signatures: 4 int64 each, see :func:`signatures`).
Listing = tuple[bytes, tuple[str, ...], tuple[str, ...], bytes]

#: What scanning one folder finds: (folder, exists, names and signatures when they
#: differ from the cache's (else None, None), sub-folder names, the folder's own
#: signature when it differs from the cache's (else None)).
Scanned = tuple[
    str, bool, "tuple[str, ...] | None", "bytes | None", "tuple[str, ...]", "bytes | None"
]


def folder_signature(path: str) -> bytes | None:
    """A folder's own packed signature (it changes when an entry is added, removed or
    renamed, not when a file is edited in place); None when it is not a folder."""
    try:
        info = os.stat(path)
    except OSError:
        return None
    if not stat.S_ISDIR(info.st_mode):
        return None
    return array("q", (info.st_mtime_ns, info.st_size, info.st_ino, info.st_ctime_ns)).tobytes()


def _scanner(base: str, cached: dict[str, _Folder]) -> Callable[[list[str]], list[Scanned]]:
    """A worker listing and ``stat``-ing folders (relative to ``base``), comparing each
    with its cached listing and packed signatures. A folder whose own signature is the
    cached one is not listed again (its names are the cached ones), but its files are
    still ``stat``-ed: an edit in place changes a file, not its folder."""

    def scan(folders: list[str]) -> list[Scanned]:
        out: list[Scanned] = []
        for folder in folders:
            path = base + folder
            # The folder's signature is taken before it is listed: an entry added in
            # between changes it again, so the listing cannot be older than the stamp.
            listed_at = folder_signature(path)
            known = cached.get(folder)
            if listed_at is None:
                out.append((folder, False, None, None, (), None))
                continue
            if known is not None and known.listed_at == listed_at:
                names: list[str] | tuple[str, ...] = known.names
                subfolders: tuple[str, ...] = known.subfolders
                fresh_stamp = None
            else:
                listed = list_folder(path)
                if listed is None:
                    out.append((folder, False, None, None, (), None))
                    continue
                names, subfolders = listed[0], tuple(listed[1])
                fresh_stamp = listed_at
            packed = signatures(path, names).tobytes()
            if (
                known is not None
                and known.signatures == packed
                and (names is known.names or list(known.names) == names)
            ):
                out.append((folder, True, None, None, subfolders, fresh_stamp))
            else:
                out.append((folder, True, tuple(names), packed, subfolders, fresh_stamp))
        return out

    return scan


class IndexView:
    """The refreshed cache of one store: rows by score or all of them, checked against
    the files found on disk as they are returned."""

    def __init__(
        self,
        connection: sqlite3.Connection,
        folders: dict[str, _Folder],
        invalid: list[tuple[str, str]],
        fresh: set[str],
    ) -> None:
        self._connection = connection
        self._folders = folders
        self._fresh = fresh
        #: (path relative to experiments/, first error) of every invalid file.
        self.invalid = invalid

    def close(self) -> None:
        """Close the cache."""
        self._connection.close()

    def listing(self) -> dict[str, Listing]:
        """Every folder this refresh found under ``experiments/`` (``""`` or ending with
        ``os.sep``), as it found it on disk (see :data:`Listing`)."""
        return {
            folder: (known.listed_at, known.subfolders, known.names, known.signatures)
            for folder, known in self._folders.items()
        }

    def is_current(self, path: str, folder: str, signature: bytes) -> bool:
        """Whether a row read at ``signature`` describes the file on disk now."""
        if signature == _NO_SIGNATURE_BYTES:
            # Racily clean (or not a regular file): stored so that no later run trusts
            # it, but read by this very run.
            return path in self._fresh
        known = self._folders.get(folder)
        if known is None:
            return False
        name = path[len(folder) :]
        at = bisect.bisect_left(known.names, name)
        return (
            at < len(known.names)
            and known.names[at] == name
            and known.signatures[at * 32 : at * 32 + 32] == signature
        )

    def _row(self, path: str, folder: str, signature: bytes, data: bytes) -> Row:
        if not self.is_current(path, folder, signature):
            raise StaleCacheError(path)
        return Row._make((*marshal.loads(data), path, False))

    def _rows(self, sql: str, parameters: Sequence[Any] = ()) -> Iterator[Row]:
        make = self._row
        for path, folder, signature, data in self._connection.execute(sql, parameters):
            yield make(path, folder, signature, data)

    def by_score(self, prefilter: tuple[str, list[Any]] = ("", [])) -> Iterator[Row]:
        """Valid rows, best score first (ties in no particular order)."""
        where, parameters = prefilter
        return self._rows(
            f"SELECT {_ROW_COLUMNS} FROM files WHERE valid = 1{where} ORDER BY score DESC",
            parameters,
        )

    def all_rows(
        self,
        prefilter: tuple[str, list[Any]] = ("", []),
        keep: Callable[[Row], bool] | None = None,
    ) -> list[Row]:
        """Every valid row passing ``prefilter`` (SQL) and ``keep``, interference marked."""
        where, parameters = prefilter
        # '+valid': a scan of the table, not a lookup of every row through the score
        # index (four times faster for a filtered list of 100,000).
        rows = self._rows(f"SELECT {_ROW_COLUMNS} FROM files WHERE +valid = 1{where}", parameters)
        if where or keep is not None:
            return self.with_interference([row for row in rows if keep is None or keep(row)])
        everything = list(rows)
        scores = {row.id: row.score for row in everything}
        return [_marked(row, scores) for row in everything]

    def with_interference(self, rows: list[Row]) -> list[Row]:
        """``rows`` with ``interference`` set: scoring below the best of those combined."""
        wanted = sorted({i for row in rows for i in row.combines})
        if not wanted:
            return rows
        scores: dict[str, float] = {}
        for start in range(0, len(wanted), 500):
            chunk = wanted[start : start + 500]
            marks = ",".join("?" * len(chunk))
            for row in self._rows(
                f"SELECT {_ROW_COLUMNS} FROM files WHERE valid = 1 AND name_id IN ({marks})",
                chunk,
            ):
                scores[row.id] = row.score
        return [_marked(row, scores) for row in rows]


def _marked(row: Row, scores: dict[str, float]) -> Row:
    if row.combines and below_best_combined(row.score, row.combines, scores):
        return row._replace(interference=True)
    return row


def prefilter(filters: Filters) -> tuple[str, list[Any]]:
    """SQL conditions that keep every row ``filters`` can accept (rows passing them are
    still checked by :func:`kexp.query.matches`): the common filters run in SQLite."""
    where: list[str] = []
    parameters: list[Any] = []
    for column, value in (
        ("operator_lc", filters.operator),
        ("dtype_lc", filters.dtype),
        ("env_lc", filters.env),
    ):
        if value is not None:
            where.append(f"instr({column}, ?) > 0")
            parameters.append(value)
    if filters.status is not None:
        where.append(f"status IN ({','.join('?' * len(filters.status))})")
        parameters.extend(filters.status)
    if filters.is_buggy is not None:
        where.append("is_buggy = ?")
        parameters.append(int(filters.is_buggy))
    if filters.min_score is not None:
        where.append("score >= ?")
        parameters.append(filters.min_score)
    if filters.max_score is not None:
        where.append("score <= ?")
        parameters.append(filters.max_score)
    return "".join(f" AND {w}" for w in where), parameters


class StoreIndex:
    """The cache of one store (see the module documentation)."""

    def __init__(self, experiments_dir: Path, cache_dir: Path, settings: Settings) -> None:
        self.experiments_dir = experiments_dir
        self.file = cache_dir / index_file_name(settings)
        self.settings = settings
        self.header = _header(settings)
        self._base = str(experiments_dir).rstrip(os.sep) + os.sep

    def names_with_prefix(self, prefix: str) -> list[tuple[str, str]] | None:
        """(folder, name) of every experiment file whose name starts with ``prefix``, or
        None when there is no cache to ask.

        Only folder signatures are checked, not files: a folder whose own signature is
        the cached one holds the cached names (ids are in names), the others are listed.
        """
        import sqlite3

        from kexp.validate import EXPERIMENT_NAME

        connection = self._open()
        if connection is None:
            return None
        try:
            listings = {
                folder: (listed_at, marshal.loads(subfolders))
                for folder, listed_at, subfolders in connection.execute(
                    "SELECT folder, listed_at, subfolders FROM folders"
                )
            }
            found: list[tuple[str, str]] = []
            trusted: set[str] = set()

            def visit(folder: str) -> Sequence[str]:
                path = self._base + folder
                stamp = folder_signature(path)
                known = listings.get(folder)
                if stamp is None:
                    return ()
                if known is not None and known[0] == stamp:
                    trusted.add(folder)
                    return known[1]  # type: ignore[no-any-return]
                listed = list_folder(path, prefix)
                if listed is None:
                    return ()
                found.extend(
                    (path.rstrip(os.sep), name)
                    for name in listed[0]
                    if EXPERIMENT_NAME.fullmatch(name) is not None
                )
                return listed[1]

            walk_folders(visit)
            # Ids are lowercase hex: every id starting with the prefix sorts below prefix+g.
            for folder, path in connection.execute(
                "SELECT folder, path FROM files WHERE name_id >= ? AND name_id < ?",
                (prefix, prefix + "g"),
            ):
                if folder in trusted:
                    found.append(((self._base + folder).rstrip(os.sep), path[len(folder) :]))
            return found
        except (sqlite3.Error, EOFError, ValueError, TypeError):
            return None
        finally:
            connection.close()

    def refresh(self, *, rebuild: bool = False) -> IndexView:
        """Bring the cache up to date with the files and return it for querying.

        Files whose stat matches the cache are not read; the others are read and
        checked. ``rebuild`` reads every file again (used after a stale row was found).
        """
        # Walking creates a few objects per file and frees none: the cyclic garbage
        # collector would scan them all again and again.
        collecting = gc.isenabled()
        gc.disable()
        try:
            return self._refresh(rebuild)
        finally:
            if collecting:
                gc.enable()

    def _open(self) -> sqlite3.Connection | None:
        """The cache, if it exists, is readable and was written by this kexp."""
        import sqlite3

        if not self.file.is_file():
            return None
        try:
            connection = sqlite3.connect(self.file, timeout=5.0, isolation_level=None)
        except sqlite3.Error:
            return None
        try:
            found = connection.execute("SELECT value FROM meta WHERE key = 'header'").fetchone()
            if found is not None and found[0] == self.header:
                return connection
        except sqlite3.Error:
            pass
        connection.close()
        return None

    def _cached_folders(self, connection: sqlite3.Connection | None) -> dict[str, _Folder]:
        import sqlite3

        if connection is None:
            return {}
        try:
            rows = connection.execute(f"SELECT {_FOLDER_COLUMNS} FROM folders").fetchall()
            return {
                folder: _Folder(
                    marshal.loads(names), signatures, experiments, listed_at, marshal.loads(subs)
                )
                for folder, names, signatures, experiments, listed_at, subs in rows
            }
        except (sqlite3.Error, EOFError, ValueError, TypeError):
            return {}

    def _refresh(self, rebuild: bool) -> IndexView:

        # One horizon for the whole refresh, taken before any file is read: a file
        # modified after it is racily clean (see the module documentation).
        horizon = time.time_ns() - RACY_NS
        connection = None if rebuild else self._open()
        cached = self._cached_folders(connection)
        if connection is not None and not cached:
            connection.close()
            connection = None
        if connection is None:
            return self._build_from_files(horizon, rebuild)
        found = self._scan(cached)
        gone = [folder for folder in cached if folder not in found]

        # Which files to read again: new names, or a signature that differs.
        folders: dict[str, _Folder] = {}
        changed: dict[str, _Folder] = {}
        groups: list[Group] = []
        removed: list[str] = []
        for folder, (_, _, names, packed, subfolders, listed_at) in found.items():
            known = cached.get(folder)
            if names is None or packed is None:
                assert known is not None
                if listed_at is not None and (
                    _storable(listed_at, horizon) != known.listed_at
                    or subfolders != known.subfolders
                ):
                    # Entries came and went: the new listing's sub-folders are stored with
                    # its signature (a folder of folders, such as experiments/2026/, has
                    # no file names to tell the change).
                    known = known._replace(listed_at=listed_at, subfolders=subfolders)
                    changed[folder] = known
                folders[folder] = known
                continue
            count, stale, missing = _compare(names, packed, known)
            if stale:
                groups.append((folder, [name for name, _ in stale], [sig for _, sig in stale]))
            removed.extend(folder + name for name in missing)
            if listed_at is None:
                assert known is not None
                listed_at = known.listed_at
            folders[folder] = changed[folder] = _Folder(names, packed, count, listed_at, subfolders)

        checked, sides, _ = self._check(groups, horizon)
        if groups:
            self._remove_leftovers()
        try:
            if (changed or gone) and not self._update(
                connection, changed, gone, removed, checked, sides, horizon
            ):
                connection.close()
                return self._refresh(rebuild=True)
        finally:
            for side in sides:
                side.unlink(missing_ok=True)
        fresh = {folder + name for folder, names, _ in groups for name in names}
        return self._view(connection, folders, fresh, rebuild)

    def _view(
        self,
        connection: sqlite3.Connection,
        folders: dict[str, _Folder],
        fresh: set[str],
        rebuild: bool,
    ) -> IndexView:
        """The view of a written cache, once its rows are counted and the invalid ones
        found current; a cache that fails either is rebuilt from the files."""
        import sqlite3

        view = IndexView(connection, folders, [], fresh)
        try:
            count = connection.execute("SELECT COUNT(*) FROM files").fetchone()[0]
            invalid = connection.execute(
                "SELECT path, folder, signature, error FROM files WHERE valid = 0 ORDER BY path"
            ).fetchall()
        except sqlite3.Error:
            count, invalid = -1, []
        expected = sum(folder.experiments for folder in folders.values())
        trusted = all(view.is_current(path, folder, sig) for path, folder, sig, _ in invalid)
        if count != expected or not trusted:
            connection.close()
            if rebuild:
                raise StaleCacheError(str(self.file))
            return self._refresh(rebuild=True)
        view.invalid = [(path, error) for path, _, _, error in invalid]
        return view

    def _build_from_files(self, horizon: int, rebuild: bool) -> IndexView:
        """A cache made from nothing: folders listed, every experiment file read and
        checked (in two processes), its signature taken as it is opened."""

        import sqlite3

        from kexp.validate import EXPERIMENT_NAME

        fullmatch = EXPERIMENT_NAME.fullmatch
        folders: dict[str, _Folder] = {}
        groups: list[Group] = []

        def visit(folder: str) -> list[str]:
            path = self._base + folder
            listed_at = folder_signature(path)
            listed = list_folder(path) if listed_at is not None else None
            if listed_at is None or listed is None:
                return []
            names, subfolders = listed
            experiments = [name for name in names if fullmatch(name)]
            groups.append((folder, experiments, None))
            # Signatures are filled in once every file is read.
            folders[folder] = _Folder(
                tuple(names), b"", len(experiments), listed_at, tuple(subfolders)
            )
            return subfolders

        walk_folders(visit)
        checked, sides, read_at = self._check(groups, horizon)
        groups.clear()
        for folder, known in folders.items():
            folders[folder] = known._replace(
                signatures=self._signatures_as_read(folder, known, read_at.get(folder, b""))
            )
        del read_at
        self._remove_leftovers()
        try:
            connection = self._build(folders, checked, sides, horizon, private=rebuild)
        finally:
            for side in sides:
                side.unlink(missing_ok=True)
        try:
            # Every row was read by this run: the racily clean ones may be used now.
            fresh = {
                path
                for (path,) in connection.execute(
                    "SELECT path FROM files WHERE signature = ?", (_NO_SIGNATURE_BYTES,)
                )
            }
        except sqlite3.Error:
            fresh = set()
        return self._view(connection, folders, fresh, rebuild)

    def _remove_leftovers(self) -> None:
        """Remove what no process uses any more: the cache of kexp before its SQLite one
        (``index-v1``, a marshal file); temporary or side databases of processes killed
        while building, once older than ``settings.stale_temporary_s``; and caches of
        other kexp versions not written for ``settings.unused_cache_days`` and with no
        journal beside them (a writer of that version is not in a transaction)."""
        folder = self.file.parent
        with contextlib.suppress(OSError):
            (folder / "index-v1").unlink()
        now = time.time()
        stale = {
            ".index-*.sqlite.*.tmp": now - self.settings.stale_temporary_s,
            ".index-*.sqlite.*.side": now - self.settings.stale_temporary_s,
            "index-*.sqlite": now - self.settings.unused_cache_days * 86400,
        }
        for pattern, horizon in stale.items():
            for left in folder.glob(pattern):
                if left.name == self.file.name:
                    continue
                if pattern == "index-*.sqlite" and any(
                    left.with_name(left.name + suffix).exists() for suffix in ("-journal", "-wal")
                ):
                    continue
                with contextlib.suppress(OSError):
                    if left.lstat().st_mtime < horizon:
                        left.unlink()

    def _scan(self, cached: dict[str, _Folder]) -> dict[str, Scanned]:
        """Every folder reachable from ``experiments/`` now, scanned: the cached ones in
        two processes (when there are many files), new ones here."""
        scan = _scanner(self._base, cached)
        known = sorted(cached)
        sizes = [len(cached[folder].names) + 1 for folder in known]
        scanned = {item[0]: item for item in in_two_processes(scan, known, sum(sizes), sizes)}
        found: dict[str, Scanned] = {}

        def visit(folder: str) -> tuple[str, ...]:
            item = scanned.get(folder) or scan([folder])[0]
            if not item[1]:
                return ()
            found[folder] = item
            return item[4]

        walk_folders(visit)
        return found

    def _checker(self) -> Callable[[Iterable[tuple[str, Signature | None]]], list[Checked]]:
        """A worker reading and checking (path, signature) items; a signature of None is
        taken from the file as it is opened.

        Files are read :data:`READ_BATCH` at a time before any of them is checked: the
        checking code then runs without system calls in between, which on this
        project's machines (speculative-execution mitigations flush the processor's
        predictors at every call into the kernel) makes it about a third faster."""
        # Imported here, before any fork, so that a child inherits them.
        from kexp.fileformat import FileFormatError
        from kexp.problems import sort_problems
        from kexp.quickcheck import quick_fields
        from kexp.validate import check_bytes, read_and_check, read_file_and_stat

        base, settings = self._base, self.settings
        no_stat = (None, None)

        def read(relative: str) -> tuple[bytes, os.stat_result] | tuple[None, None]:
            try:
                return read_file_and_stat(base + relative, settings)
            except (OSError, FileFormatError):
                return no_stat

        def check(items: Iterable[tuple[str, Signature | None]]) -> list[Checked]:
            out: list[Checked] = []
            pending = iter(items)
            while batch := list(itertools.islice(pending, READ_BATCH)):
                contents = [read(relative) for relative, _ in batch]
                for (relative, known), (data, info) in zip(batch, contents, strict=True):
                    path = base + relative
                    if data is None or info is None:
                        result = read_and_check(Path(path), settings)  # it reports why
                        signature = _NO_SIGNATURE_BYTES if known is None else known
                    else:
                        signature = (
                            _pack(info.st_mtime_ns, info.st_size, info.st_ino, info.st_ctime_ns)
                            if known is None
                            else known
                        )
                        # Most files are canonical: a certain answer without the full parse.
                        fields = quick_fields(data, path, settings)
                        if fields is not None:
                            out.append((relative, signature, _values(fields), ""))
                            continue
                        result = check_bytes(data, Path(path), settings)
                    if result.ok:
                        assert result.document is not None
                        out.append((relative, signature, _values(result.document.fields), ""))
                        continue
                    errors = [p for p in sort_problems(result.problems) if p.severity == "error"]
                    out.append((relative, signature, None, errors[0].format()))
            return out

        return check

    def _check(
        self, groups: list[Group], horizon: int
    ) -> tuple[list[Checked], list[Path], dict[str, bytes]]:
        """Read and check the files of ``groups``: the results in memory when they are
        few; else written by this process and a forked child into side databases
        (returned), so that neither holds every row in memory. Also returned: each
        folder's signatures of the files read, in the order of its group's names."""
        import sqlite3

        check = self._checker()
        total = sum(len(names) for _, names, _ in groups)
        if total < PARALLEL_MIN_FILES:
            checked = check(_items(groups))
            return checked, [], _joined(_signatures_by_folder(checked, {}))
        made: list[Path] = []

        def into_side(part: list[Group]) -> list[tuple[str, dict[str, bytes]]]:
            side = self.file.with_name(f".{self.file.name}.{os.getpid()}-{len(made)}.side")
            made.append(side)
            side.unlink(missing_ok=True)
            database = sqlite3.connect(side, isolation_level=None)
            read_at: dict[str, list[bytes]] = {}
            try:
                database.execute("PRAGMA journal_mode = OFF")
                database.execute("PRAGMA synchronous = OFF")
                database.execute(_FILES_TABLE)
                database.execute("BEGIN")
                items = _items(part)
                while batch := list(itertools.islice(items, 2 * READ_BATCH)):
                    checked = check(batch)
                    _signatures_by_folder(checked, read_at)
                    database.executemany(_INSERT_FILE, self._records(checked, horizon))
                    # Parsing leaves reference cycles, and the collector is paused.
                    gc.collect(0)
                database.execute("COMMIT")
            finally:
                database.close()
            return [(str(side), _joined(read_at))]

        def clean_up(pid: int) -> None:
            # A child whose result is not used leaves its side database: remove it.
            for left in self.file.parent.glob(f".{self.file.name}.{pid}-*.side"):
                left.unlink(missing_ok=True)

        sizes = [len(names) + 1 for _, names, _ in groups]
        try:
            self.file.parent.mkdir(parents=True, exist_ok=True)
            parts = in_two_processes(into_side, groups, total, sizes, clean_up)
        except (OSError, sqlite3.Error):
            for side in made:
                side.unlink(missing_ok=True)
            checked = check(_items(groups))
            return checked, [], _joined(_signatures_by_folder(checked, {}))
        read_at: dict[str, bytes] = {}
        for _, signatures_read in parts:
            read_at.update(signatures_read)
        return [], [Path(side) for side, _ in parts], read_at

    def _signatures_as_read(self, folder: str, known: _Folder, read: bytes) -> bytes:
        """The packed signatures of a folder's ``*.md`` names: those of its experiment
        files as they were read (``read``, in name order), the others' taken now. When
        ``read`` does not match the names (it should), none: every file is read again
        next time."""
        from kexp.validate import EXPERIMENT_NAME

        names = known.names
        if len(read) != known.experiments * _SIGNATURE_SIZE:
            return _NO_SIGNATURE_BYTES * len(names)
        if known.experiments == len(names):
            return read
        path = self._base + folder
        packed: list[bytes] = []
        taken = 0
        for name in names:
            if EXPERIMENT_NAME.fullmatch(name):
                packed.append(read[taken : taken + _SIGNATURE_SIZE])
                taken += _SIGNATURE_SIZE
            else:
                packed.append(signatures(path, [name]).tobytes())
        return b"".join(packed)

    def _records(self, checked: list[Checked], horizon: int) -> Iterator[tuple[Any, ...]]:
        for path, signature, values, error in checked:
            folder = path[: path.rfind(os.sep) + 1]
            name_id = path[len(folder) : len(folder) + 16]
            packed = _storable(signature, horizon)
            if values is None:
                yield (path, folder, name_id, packed, 0, error, *_NO_VALUES)
                continue
            score = values[_SCORE]
            yield (
                path,
                folder,
                name_id,
                packed,
                1,
                "",
                values[_ID],
                float(score) if isinstance(score, (int, float)) else None,
                str(values[_OPERATOR]).lower(),
                str(values[_DTYPE]).lower(),
                str(values[_ENV]).lower(),
                values[_STATUS],
                int(bool(values[_IS_BUGGY])),
                marshal.dumps(values),
            )

    def _folder_records(
        self, folders: dict[str, _Folder], horizon: int
    ) -> Iterator[tuple[Any, ...]]:
        for folder, known in folders.items():
            packed = array("q")
            packed.frombytes(known.signatures)
            for i in range(0, len(packed), 4):
                if packed[i] >= horizon:
                    packed[i : i + 4] = array("q", _NO_SIGNATURE)
            listed_at = _storable(known.listed_at, horizon)
            yield (
                folder,
                marshal.dumps(known.names),
                packed.tobytes(),
                known.experiments,
                listed_at,
                marshal.dumps(known.subfolders),
            )

    def _build(
        self,
        folders: dict[str, _Folder],
        checked: list[Checked],
        sides: list[Path],
        horizon: int,
        private: bool = False,
    ) -> sqlite3.Connection:
        """A new cache with everything, written to a temporary file renamed into place
        (in memory only when the cache folder cannot be written); this query answers
        from the new file, which no other process changes.

        A cache file is never renamed over another, nor removed while it may be in use
        (SQLite names its rollback journal after the file's path, so a journal left by a
        writer of the old file would be rolled back into the new one): the new file is
        linked into place only where there is none, or the one there is unusable. When
        a usable one is there (another process built it meanwhile, or ``private``: a
        rebuild after rows were found not to match their files), the rows are copied
        into it in one transaction."""
        import secrets
        import sqlite3

        temporary = self.file.with_name(f".{self.file.name}.{secrets.token_hex(6)}.tmp")
        rows = list(sides)
        try:
            self.file.parent.mkdir(parents=True, exist_ok=True)
            base: list[Path] = []
            if sides:
                # The first side database (this process's rows) grows into the cache:
                # its rows are not copied.
                os.replace(sides[0], temporary)
                rows[0] = temporary
                base = [temporary]
            connection = sqlite3.connect(temporary, isolation_level=None, timeout=5.0)
            try:
                self._fill(connection, folders, checked, rows[len(base) :], horizon, base)
            except BaseException:
                connection.close()
                raise
        except (OSError, sqlite3.Error):
            pass
        else:
            try:
                self._publish(temporary, replace_rows=private)
            finally:
                temporary.unlink(missing_ok=True)  # this connection keeps reading it
            return connection
        # The cache folder cannot be written (or read back): keep the cache in memory.
        connection = sqlite3.connect(":memory:", isolation_level=None)
        try:
            self._fill(connection, folders, checked, rows, horizon)
        finally:
            temporary.unlink(missing_ok=True)
        return connection

    def _publish(self, temporary: Path, *, replace_rows: bool) -> None:
        """Make the cache in ``temporary`` the store's (see :meth:`_build`); errors are
        ignored: the cache is an optimisation."""
        import sqlite3

        for _ in range(2):
            with contextlib.suppress(OSError):
                os.link(temporary, self.file)
                return
            shared = None
            try:
                shared = sqlite3.connect(self.file, timeout=5.0, isolation_level=None)
                found = shared.execute("SELECT value FROM meta WHERE key = 'header'").fetchone()
            except sqlite3.OperationalError as exc:
                if "locked" in str(exc) or "busy" in str(exc):
                    if shared is not None:
                        shared.close()
                    return  # in use by another process: it is fine, and theirs
                found = None
            except sqlite3.Error:
                found = None
            if shared is None or found is None or found[0] != self.header:
                # Not a usable cache of this kexp (corrupt, truncated, tampered with).
                if shared is not None:
                    shared.close()
                with contextlib.suppress(OSError):
                    self.file.unlink()
                continue
            try:
                if replace_rows:
                    shared.execute("ATTACH DATABASE ? AS fresh", (str(temporary),))
                    shared.execute("BEGIN IMMEDIATE")
                    try:
                        for table in ("files", "folders"):
                            shared.execute(f"DELETE FROM {table}")
                            shared.execute(f"INSERT INTO {table} SELECT * FROM fresh.{table}")
                        shared.execute("COMMIT")
                    except sqlite3.Error:
                        shared.execute("ROLLBACK")
            except sqlite3.Error:
                pass
            finally:
                shared.close()
            return

    def _fill(
        self,
        connection: sqlite3.Connection,
        folders: dict[str, _Folder],
        checked: list[Checked],
        sides: list[Path],
        horizon: int,
        has_files: Sequence[Path] = (),
    ) -> None:
        """Write the cache into an empty database (or a side database holding rows
        already, when ``has_files`` names it)."""
        connection.execute("PRAGMA journal_mode = OFF")  # a new file: renamed when complete
        connection.execute("PRAGMA synchronous = OFF")
        connection.execute("BEGIN")
        for statement in _TABLES:
            if not (has_files and statement is _FILES_TABLE):
                connection.execute(statement)
        connection.execute("INSERT INTO meta VALUES ('header', ?)", (self.header,))
        connection.executemany(_INSERT_FILE, self._records(checked, horizon))
        connection.execute("COMMIT")
        for side in sides:
            connection.execute("ATTACH DATABASE ? AS side", (str(side),))
            connection.execute("INSERT OR REPLACE INTO files SELECT * FROM side.files")
            connection.execute("DETACH DATABASE side")
        for statement in _INDEXES:
            connection.execute(statement)
        connection.execute("BEGIN")
        connection.executemany(_INSERT_FOLDER, self._folder_records(folders, horizon))
        connection.execute("COMMIT")

    def _update(
        self,
        connection: sqlite3.Connection,
        folders: dict[str, _Folder],
        gone: list[str],
        removed: list[str],
        checked: list[Checked],
        sides: list[Path],
        horizon: int,
    ) -> bool:
        """Write what changed in one transaction; False if that failed (another writer
        held the cache too long, a full disk)."""
        import sqlite3

        names = [f"side{i}" for i in range(len(sides))]
        try:
            for side, name in zip(sides, names, strict=True):
                connection.execute(f"ATTACH DATABASE ? AS {name}", (str(side),))
            connection.execute("BEGIN IMMEDIATE")
        except sqlite3.Error:
            _detach(connection, names)
            return False
        try:
            for folder in gone:
                connection.execute("DELETE FROM folders WHERE folder = ?", (folder,))
                connection.execute("DELETE FROM files WHERE folder = ?", (folder,))
            connection.executemany("DELETE FROM files WHERE path = ?", [(p,) for p in removed])
            connection.executemany(
                _UPSERT_FOLDER,
                self._folder_records(folders, horizon),
            )
            connection.executemany(_UPSERT_FILE, self._records(checked, horizon))
            for name in names:
                connection.execute(f"INSERT OR REPLACE INTO files SELECT * FROM {name}.files")
            connection.execute("COMMIT")
        except sqlite3.Error:
            with contextlib.suppress(sqlite3.Error):
                connection.execute("ROLLBACK")
            return False
        finally:
            _detach(connection, names)
        return True


def _storable(signature: bytes, horizon: int) -> bytes:
    """``signature`` as the cache stores it: none for a racily clean file or folder
    (modified after ``horizon``), which is then read or listed again next time."""
    if int.from_bytes(signature[:8], sys.byteorder, signed=True) >= horizon:
        return _NO_SIGNATURE_BYTES
    return signature


def _items(groups: Iterable[Group]) -> Iterator[tuple[str, Signature | None]]:
    """(path, signature or None) of every file of ``groups``."""
    for folder, names, known in groups:
        if known is None:
            for name in names:
                yield folder + name, None
        else:
            for name, signature in zip(names, known, strict=True):
                yield folder + name, signature


def _signatures_by_folder(
    checked: list[Checked], into: dict[str, list[bytes]]
) -> dict[str, list[bytes]]:
    """``into`` with the signatures of ``checked`` appended to their folders' lists."""
    for path, signature, _, _ in checked:
        folder = path[: path.rfind(os.sep) + 1]
        found = into.get(folder)
        if found is None:
            found = into[folder] = []
        found.append(signature)
    return into


def _joined(signatures_by_folder: dict[str, list[bytes]]) -> dict[str, bytes]:
    return {folder: b"".join(found) for folder, found in signatures_by_folder.items()}


def _detach(connection: sqlite3.Connection, names: list[str]) -> None:
    import sqlite3

    for name in names:
        with contextlib.suppress(sqlite3.Error):
            connection.execute(f"DETACH DATABASE {name}")


def _compare(
    names: tuple[str, ...], packed: bytes, known: _Folder | None
) -> tuple[int, list[tuple[str, Signature]], list[str]]:
    """For a folder whose listing differs from the cache: how many experiment files it
    holds, those to read again (new, or another signature), and cached names gone."""
    from kexp.validate import EXPERIMENT_NAME

    fullmatch = EXPERIMENT_NAME.fullmatch
    before: dict[str, bytes] = {}
    if known is not None:
        before = {
            name: known.signatures[i * 32 : i * 32 + 32] for i, name in enumerate(known.names)
        }
    count = 0
    stale: list[tuple[str, Signature]] = []
    for i, name in enumerate(names):
        previous = before.pop(name, None)
        if fullmatch(name) is None:
            continue
        count += 1
        signature = packed[i * 32 : i * 32 + 32]
        if previous != signature or signature == _NO_SIGNATURE_BYTES:
            stale.append((name, signature))
    return count, stale, list(before)


_NO_SIGNATURE_BYTES = array("q", _NO_SIGNATURE).tobytes()
_SIGNATURE_SIZE = len(_NO_SIGNATURE_BYTES)
_INSERT_FILE = "INSERT INTO files VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)"
_UPSERT_FILE = _INSERT_FILE.replace("INSERT", "INSERT OR REPLACE")
_NO_VALUES = (None,) * 8
