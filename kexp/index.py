"""The store's cache: every experiment file's front-matter, keyed by the file's stat.

Queries rank and filter on front-matter alone, so kexp keeps it for every file in
``.kexp/index-<hash>.sqlite`` (git-ignored; SQLite from Python's standard library) and
reads a file again only when its stat signature (modification time in nanoseconds,
size, inode, change time) differs from the cached one. The hash in the name is that of
the header row, which names the layout, kexp's version, a hash of kexp's library
sources and of the schema (:func:`code_fingerprint`), and the settings: a kexp that
could judge a file differently (another build, an edited schema) never reads this
cache, it makes its own.

How a query checks the cache, in order:

1. Walk ``experiments/`` and ``stat`` every ``*.md`` file, folder by folder (a folder
   whose own signature is the cached one is not listed again: its names are the
   cached ones); a folder whose sorted names and packed signatures equal the cached
   ones is unchanged, and none of its files is compared one by one. With many files,
   on a machine with more than one core, the folders are split between this process
   and one forked child.
2. Files of changed folders whose signature differs (or which are new) are read and
   checked again; rows of files that are gone are dropped; all of it in one SQLite
   transaction, which first checks that no other process changed those folders' rows
   since they were read (else the refresh starts again), so a crash or a race leaves a
   consistent cache.
3. The answer is read in one read transaction, and every row it uses is checked: its
   checksum, and its signature against the one found on disk in step 1 (see below). A
   row that fails makes kexp read those files again, or rebuild the cache from the
   files, and answer from that.

What makes a row current:

* Its signature is the file's, and the file had not changed for :data:`RACY_NS`
  (neither its modification time nor its change time) when it was read: such a row is
  *settled*, and any process may use it. A file changed more recently than that
  ("racily clean", as git calls it) may change again within the same timestamp tick
  without a new signature: its row is marked with the reading refresh's random token,
  used by that refresh only, and the folder listing stores no signature for it, so
  the next refresh reads it again. The change time counts because it cannot be set
  back: an edit followed by ``touch -d`` or ``os.utime`` to the old time (what
  ``tar -x``, ``rsync -t`` and ``cp -a`` leave) changes it, even on file systems whose
  timestamps have whole seconds only.
* What the cache cannot see: a file whose bytes change while its modification time,
  size, inode *and* change time stay the same, which only a change of the system clock
  or a tool writing the disk below the file system can do.

What the cache defends against is damage: a bit flipped, a page torn or truncated, a row
changed by hand or by another program. Every row holds its values once, in a ``marshal``
record (which cannot run code when read, unlike pickle), with a CRC-32 of the record;
the other columns are hints for SQL (the score to rank by, the ``pid`` to find children
by), and every lookup through an index is cross-checked by counting the same condition,
in one pass per query, over a second copy of the hints (a covering index apart from
those lookups use), so that a damaged hint or index entry that would hide a row is found
out; a full listing reads the table itself and counts its rows. Folder listings carry a
CRC-32 too. Whatever fails a check, and any error SQLite raises, makes kexp rebuild the
cache from the files: never a wrong answer, never an error. It does not defend against a
person who rewrites rows and their checksums on purpose: that person can edit
``experiments/`` as well.

The cache is an optimisation: one that cannot be written (a read-only store, another
user's ``.kexp/``, a full disk, another process holding it too long) is kept in memory
for this query. A new cache file is linked into place only where there is none (or the
one there is unusable), never renamed over a cache another process may be writing:
SQLite names its rollback journal after the path, and would apply a journal of the old
file to the new one.
"""

from __future__ import annotations

import bisect
import contextlib
import gc
import hashlib
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

    from kexp.settings import Settings

#: The cache's layout; part of its header (and so of its file name).
LAYOUT = "kexp-index/12"


def index_file_name(settings: Settings) -> str:
    """The cache's file name: one per header (layout, kexp version and sources, schema,
    settings), so that two kexp builds sharing a store keep a cache each instead of
    replacing or misreading each other's."""
    return f"index-{zlib.crc32(_header(settings).encode()):08x}.sqlite"


_FINGERPRINT: list[str] = []


def code_fingerprint() -> str:
    """A hash of what decides what the cache holds: the source of every module of the
    ``kexp`` package (parsing, checks, this layout) and the schema file. Two builds of
    one version (an edited schema, a ``git pull`` of kexp) get different caches."""
    if not _FINGERPRINT:
        from kexp.schema import schema_path

        digest = hashlib.blake2b(digest_size=8)
        package = Path(__file__).resolve().parent
        for path in [*sorted(package.glob("*.py")), schema_path()]:
            digest.update(path.name.encode() + b"\0")
            try:
                digest.update(path.read_bytes())
            except OSError:
                digest.update(b"\0unreadable\0")
        _FINGERPRINT.append(digest.hexdigest())
    return _FINGERPRINT[0]


#: Files (and folders) changed this recently (ns) before a refresh are not settled.
RACY_NS = 2_000_000_000
#: A signature no file has: racily clean entries, symbolic links, unreadable names.
_NO_SIGNATURE = (-1, -1, -1, -1)
#: Packs (mtime_ns, size, inode, ctime_ns) as :func:`signatures` does (native int64).
_PACKER = Struct("=4q")
_pack = _PACKER.pack
_unpack = _PACKER.unpack
#: Below this many files one process checks them all (a fork costs more than it saves).
PARALLEL_MIN_FILES = 3000
#: How many files a worker reads before checking them (see ``StoreIndex._checker``).
READ_BATCH = 256
#: How many times a query starts again when rows turn out not to be current (another
#: process wrote meanwhile) before it rebuilds the cache from the files.
_ATTEMPTS = 4

#: The fields of a :class:`Row`, in order.
ROW_FIELDS = (*FRONT_MATTER_FIELDS, "extra_fields", "path", "interference")
_DEFAULTS: dict[str, Any] = {
    "measured_against": "",
    "score_ci": (),
    "tags": (),
    "author": "",
    "combines": (),
    "protocol": None,
    "results": (),
}
_KNOWN = frozenset(FRONT_MATTER_FIELDS)
_ID, _PID, _SCORE, _COMBINES = (
    ROW_FIELDS.index(name) for name in ("id", "pid", "score", "combines")
)

_FILES_TABLE = """
CREATE TABLE files (
    path TEXT PRIMARY KEY,        -- folder + name, relative to experiments/
    folder TEXT NOT NULL,
    valid INTEGER NOT NULL,       -- hints for SQL: copies of values in the record
    score REAL,
    pid TEXT,
    combines TEXT,                -- ' id1 id2 ' (NULL: none)
    checksum INTEGER NOT NULL,    -- CRC-32 of record
    record BLOB NOT NULL          -- marshal: see _file_row
)"""
_TABLES = (
    "CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL)",
    """CREATE TABLE folders (
        folder TEXT PRIMARY KEY,      -- relative to experiments/: '' or ending with '/'
        experiments INTEGER NOT NULL, -- how many of the names are experiment file names
        listed_at BLOB NOT NULL,      -- the folder's own signature when it was listed
        subfolders BLOB NOT NULL,     -- marshal: the sorted sub-folder names
        names BLOB NOT NULL,          -- marshal: the sorted *.md names
        listing_sum INTEGER NOT NULL, -- CRC-32 of the columns above
        signatures BLOB NOT NULL,     -- 4 int64 per name: mtime_ns, size, inode, ctime_ns
        signatures_sum INTEGER NOT NULL
    )""",
    _FILES_TABLE,
)
_INDEXES = (
    "CREATE INDEX files_by_score ON files (valid, score)",
    "CREATE INDEX files_by_pid ON files (pid) WHERE pid IS NOT NULL",
    "CREATE INDEX files_by_combines ON files (combines) WHERE combines IS NOT NULL",
    # Every hint once more, apart from the indexes lookups use: IndexView.confirm counts
    # each lookup's condition over it (a tenth of the table's pages to read).
    "CREATE INDEX files_hints ON files (valid, score, pid, combines)",
)
_FOLDER_COLUMNS = (
    "folder, experiments, listed_at, subfolders, names, listing_sum, signatures, signatures_sum"
)
_INSERT_FOLDER = f"INSERT INTO folders ({_FOLDER_COLUMNS}) VALUES (?, ?, ?, ?, ?, ?, ?, ?)"
_UPSERT_FOLDER = _INSERT_FOLDER.replace("INSERT", "INSERT OR REPLACE")
_INSERT_FILE = "INSERT INTO files VALUES (?, ?, ?, ?, ?, ?, ?, ?)"
_UPSERT_FILE = _INSERT_FILE.replace("INSERT", "INSERT OR REPLACE")


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
    measured_against: str
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
#: A row's record: (path, folder, signature, reader, error, values or None).
Record = tuple[str, str, bytes, str, str, "tuple[Any, ...] | None"]


class StaleCacheError(Exception):
    """Cached rows do not describe the files as this query found them (another process
    wrote meanwhile): read ``paths`` again (all changed files when empty)."""

    def __init__(self, paths: Iterable[str] = ()) -> None:
        self.paths = frozenset(paths)
        super().__init__(", ".join(sorted(self.paths)) or "the cache changed")


class DamagedCacheError(Exception):
    """The cache fails a check no race can explain (a checksum, a count, an SQLite
    error): rebuild it from the files."""


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
        f"{LAYOUT} kexp={__version__} sources={code_fingerprint()} "
        f"python-marshal={marshal.version} settings={settings!r} fields={layout}"
    )


def _settled(signature: bytes, horizon: int) -> bool:
    """Whether a file (or folder) with this signature last changed before ``horizon``:
    its modification time and its change time both (the change time cannot be set
    back, so an edit restoring the old modification time is not settled)."""
    if signature == _NO_SIGNATURE_BYTES:
        return False
    mtime, _, _, ctime = _unpack(signature)
    return bool(mtime < horizon and ctime < horizon)


def _storable(signature: bytes, horizon: int) -> bytes:
    """``signature`` as a folder listing stores it: none for a racily clean file or
    folder (not settled at ``horizon``), which is then read or listed again next time."""
    return signature if _settled(signature, horizon) else _NO_SIGNATURE_BYTES


def _file_row(
    path: str,
    folder: str,
    signature: bytes,
    reader: str,
    error: str,
    values: tuple[Any, ...] | None,
) -> tuple[Any, ...]:
    """The ``files`` row of one file: the record (everything, checksummed) and the hint
    columns SQL selects and orders by."""
    record = marshal.dumps((path, folder, signature, reader, error, values))
    checksum = zlib.crc32(record)
    if values is None:
        return (path, folder, 0, None, None, None, checksum, record)
    score = values[_SCORE]
    combines = values[_COMBINES]
    return (
        path,
        folder,
        1,
        float(score) if isinstance(score, (int, float)) else None,
        values[_PID] or None,
        f" {' '.join(combines)} " if combines else None,
        checksum,
        record,
    )


def _listing_sum(
    folder: str, experiments: int, listed_at: bytes, subfolders: bytes, names: bytes
) -> int:
    """The CRC-32 of a folder listing's columns (the blobs are not copied)."""
    crc = zlib.crc32(f"{len(folder)}:{folder}:{experiments}:".encode("utf-8", "surrogatepass"))
    for blob in (listed_at, subfolders, names):
        crc = zlib.crc32(len(blob).to_bytes(8, "little"), crc)
        crc = zlib.crc32(blob, crc)
    return crc


def path_order(path: str) -> str:
    """A sort key ordering relative paths as :class:`pathlib.Path` objects sort
    (component by component): the order of :meth:`kexp.Store.paths`."""
    return path.replace(os.sep, "\0")


# --- walking --------------------------------------------------------------------------


def list_folder(path: str, prefix: str = "") -> tuple[list[str], list[str]] | None:
    """(sorted ``*.md`` names starting with ``prefix``, sorted sub-folder names) of one
    folder; None when it is not a folder (any more).

    As :func:`os.walk` sees them: hidden entries (writers' temporary files) are skipped;
    a folder is a folder whatever its name (``notes.md/`` is walked, not read); a
    symbolic link to a folder is neither a file nor walked. The kind of an entry comes
    from the listing itself on most file systems (no ``stat``).
    """
    names: list[str] = []
    folders: list[str] = []
    try:
        with os.scandir(path) as entries:
            for entry in entries:
                name = entry.name
                if name[0] == ".":
                    continue
                try:
                    if entry.is_dir(follow_symlinks=False):
                        folders.append(name)
                    elif (
                        name.endswith(".md")
                        and name.startswith(prefix)
                        and not (entry.is_symlink() and entry.is_dir())
                    ):
                        names.append(name)
                except OSError:
                    continue
    except (FileNotFoundError, NotADirectoryError, PermissionError):
        return None
    except OSError:
        return None
    names.sort()
    folders.sort()
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


# --- the cache ------------------------------------------------------------------------


class _Folder(NamedTuple):
    names: tuple[str, ...]
    signatures: bytes
    experiments: int
    #: The folder's own signature when it was listed: unchanged, so is the listing.
    listed_at: bytes
    subfolders: tuple[str, ...]
    #: (listing_sum, signatures_sum) of the cache's row this was read from, if any.
    stored: tuple[int, int] | None = None


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


def _scanner(
    base: str, cached: dict[str, _Folder], light: bool = False
) -> Callable[[list[str]], list[Scanned]]:
    """A worker listing and ``stat``-ing folders (relative to ``base``), comparing each
    with its cached listing and packed signatures. A folder whose own signature is the
    cached one is not listed again (its names are the cached ones), but its files are
    still ``stat``-ed: an edit in place changes a file, not its folder; ``light`` leaves
    them out too, but for those the cache holds no signature for (see
    :meth:`StoreIndex.refresh`)."""

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
            if light and fresh_stamp is None and known is not None:
                packed = _restat_unsigned(path, known)
            else:
                packed = signatures(path, names).tobytes()
            if (
                known is not None
                and known.signatures == packed
                and _NO_SIGNATURE_BYTES not in packed  # unreadable names: read every time
                and (names is known.names or list(known.names) == names)
            ):
                out.append((folder, True, None, None, subfolders, fresh_stamp))
            else:
                out.append((folder, True, tuple(names), packed, subfolders, fresh_stamp))
        return out

    return scan


def _restat_unsigned(path: str, known: _Folder) -> bytes:
    """The cached signatures of an unchanged folder's files, those the cache keeps none
    for (racily clean, unreadable) taken from the files now."""
    packed = known.signatures
    if _NO_SIGNATURE_BYTES not in packed:
        return packed
    fresh = bytearray(packed)
    for at in range(0, len(packed), _SIGNATURE_SIZE):
        if packed[at : at + _SIGNATURE_SIZE] == _NO_SIGNATURE_BYTES:
            name = known.names[at // _SIGNATURE_SIZE]
            fresh[at : at + _SIGNATURE_SIZE] = signatures(path, [name]).tobytes()
    return bytes(fresh)


def _name_at(names: Sequence[str], name: str) -> int:
    """The position of ``name`` in the sorted ``names``, or -1."""
    at = bisect.bisect_left(names, name)
    return at if at < len(names) and names[at] == name else -1


def _names_with_prefix(names: Sequence[str], prefix: str) -> Sequence[str]:
    """The names of the sorted ``names`` that start with ``prefix``."""
    if not prefix:
        return names
    start = bisect.bisect_left(names, prefix)
    return names[start : bisect.bisect_left(names, prefix + "\U0010ffff", start)]


class IndexView:
    """The refreshed cache of one store, read in one read transaction: rows by score,
    all of them, or by what they name, each checked as it is returned (see the module
    documentation), and :meth:`confirm` to check that no row was hidden."""

    def __init__(
        self, connection: sqlite3.Connection, folders: dict[str, _Folder], token: str
    ) -> None:
        self._connection = connection
        self._folders = folders
        self._token = token
        self._by_id: dict[str, list[str]] | None = None
        #: Rows of invalid files seen through the index, for :meth:`confirm`.
        self._invalid_seen = 0
        #: (score, how many rows with at least that score :meth:`by_score` returned).
        self._ranked: tuple[float, int] | None = None
        #: (rows, invalid rows) of the table, when :meth:`all_rows` read all of it.
        self._counted: tuple[int, int] | None = None
        #: (condition, parameters, rows) the table must hold: see :meth:`_expect`.
        self._checks: list[tuple[str, tuple[Any, ...], int]] = []
        #: (path relative to experiments/, first error) of every invalid file.
        self.invalid: list[tuple[str, str]] = []

    def close(self) -> None:
        """End the read transaction and close the cache."""
        import sqlite3

        with contextlib.suppress(sqlite3.Error):
            self._connection.close()

    def listing(self) -> dict[str, Listing]:
        """Every folder this refresh found under ``experiments/`` (``""`` or ending with
        ``os.sep``), as it found it on disk (see :data:`Listing`)."""
        return {
            folder: (known.listed_at, known.subfolders, known.names, known.signatures)
            for folder, known in self._folders.items()
        }

    def begin(self) -> None:
        """Start the read transaction and read the invalid rows."""
        for record in self._query(
            "SELECT record, checksum FROM files INDEXED BY files_by_score WHERE valid = 0",
            begin=True,
        ):
            path, _, _, _, error, values = record
            if values is not None:
                raise DamagedCacheError(f"{path}: valid, but indexed as invalid")
            self._invalid_seen += 1
            self.invalid.append((path, error))
        self.invalid.sort(key=lambda item: path_order(item[0]))

    def _query(
        self, sql: str, parameters: Sequence[Any] = (), *, begin: bool = False
    ) -> Iterator[Record]:
        """The records of ``sql`` (which selects record and checksum), each checked
        (:meth:`_check`); SQLite's errors as :class:`DamagedCacheError`."""
        import sqlite3

        check = self._check
        try:
            if begin:
                self._connection.execute("BEGIN")
            cursor = self._connection.execute(sql, parameters)
            while batch := cursor.fetchmany(1024):
                yield from [check(record, checksum) for record, checksum in batch]
        except (sqlite3.Error, ValueError) as exc:
            raise DamagedCacheError(str(exc)) from None

    def _count(self, sql: str, parameters: Sequence[Any] = ()) -> tuple[Any, ...]:
        import sqlite3

        try:
            found = self._connection.execute(sql, parameters).fetchone()
        except (sqlite3.Error, ValueError) as exc:
            raise DamagedCacheError(str(exc)) from None
        return tuple(found)

    def _check(self, record: bytes, checksum: int) -> Record:
        """A row's record, if its checksum holds and it describes the file as this
        query found it: the signature on disk, and settled or read by this refresh."""
        if zlib.crc32(record) != checksum:
            raise DamagedCacheError("a row's checksum does not match")
        try:
            fields = marshal.loads(record)
            path, folder, signature, reader, _, _ = fields
            name = path[len(folder) :]
        except (EOFError, ValueError, TypeError):
            raise DamagedCacheError("a row cannot be read") from None
        known = self._folders.get(folder)
        at = -1 if known is None or not path.startswith(folder) else _name_at(known.names, name)
        if known is None or at < 0:
            raise StaleCacheError()  # a row of a file this query did not find
        if known.signatures[at * 32 : at * 32 + 32] != signature or (
            reader and reader != self._token
        ):
            raise StaleCacheError([path])
        return fields  # type: ignore[no-any-return]

    def is_current(self, path: str, signature: bytes, reader: str) -> bool:
        """Whether a row read at ``signature`` by ``reader`` ("" for a settled row)
        describes the file on disk as this query found it."""
        folder = path[: path.rfind(os.sep) + 1]
        known = self._folders.get(folder)
        at = -1 if known is None else _name_at(known.names, path[len(folder) :])
        return (
            known is not None
            and at >= 0
            and known.signatures[at * 32 : at * 32 + 32] == signature
            and reader in ("", self._token)
        )

    def by_score(self) -> Iterator[Row]:
        """Valid rows, best score first (ties in no particular order). A caller that
        stops early says where with :meth:`ranked_down_to`."""
        for path, _, _, _, _, values in self._query_scored():
            yield _row(path, values)

    def _query_scored(self) -> Iterator[Record]:
        import sqlite3

        check = self._check
        try:
            cursor = self._connection.execute(
                "SELECT score, record, checksum FROM files INDEXED BY files_by_score "
                "WHERE valid = 1 ORDER BY score DESC"
            )
            while batch := cursor.fetchmany(64):
                for score, record, checksum in batch:
                    fields = check(record, checksum)
                    values = fields[5]
                    if values is None or float(values[_SCORE]) != score:
                        raise DamagedCacheError(f"{fields[0]}: indexed with another score")
                    yield fields
        except (sqlite3.Error, ValueError) as exc:
            raise DamagedCacheError(str(exc)) from None

    def ranked_down_to(self, score: float, seen: int) -> None:
        """Tell :meth:`confirm` that :meth:`by_score` returned ``seen`` rows scoring at
        least ``score`` before it was stopped (every one, when it was not stopped:
        ``score`` then ``-inf``)."""
        self._ranked = (score, seen)

    def all_rows(self, keep: Callable[[Row], bool] | None = None) -> list[Row]:
        """Every valid row passing ``keep`` (which sees interference marked), in path
        order. Read from the table, not an index: every row is checked."""
        rows: list[Row] = []
        best: dict[str, tuple[str, float]] = {}  # id -> (its first path, that one's score)
        total = invalid = 0
        for path, _, _, _, _, values in self._query(
            "SELECT record, checksum FROM files NOT INDEXED"
        ):
            total += 1
            if values is None:
                invalid += 1
                continue
            row = _row(path, values)
            order = path_order(path)
            known = best.get(row.id)
            if known is None or order < known[0]:
                best[row.id] = (order, row.score)
            rows.append(row)
        self._counted = (total, invalid)
        rows.sort(key=lambda row: path_order(row.path))
        scores = {exp_id: score for exp_id, (_, score) in best.items()}
        marked = (_marked(row, scores) for row in rows)
        return list(marked) if keep is None else [row for row in marked if keep(row)]

    def _expected(self) -> int:
        return sum(folder.experiments for folder in self._folders.values())

    def front_matter(self) -> list[tuple[str, tuple[Any, ...] | None]]:
        """(path, front-matter values in :data:`ROW_FIELDS` order, or None for an invalid
        file) of every file, in path order: :meth:`all_rows` without rows built or
        interference marked, for scans that keep a few values of each file."""
        import sqlite3

        # The checks of _check, inlined with every file's signature by path (faster for
        # every row than a search of its folder's names).
        signature_of: dict[str, bytes] = {}
        for folder, known in self._folders.items():
            packed = known.signatures
            for at, name in enumerate(known.names):
                signature_of[folder + name] = packed[at * 32 : at * 32 + 32]
        found: list[tuple[str, tuple[Any, ...] | None]] = []
        append, crc, loads, token = found.append, zlib.crc32, marshal.loads, self._token
        try:
            cursor = self._connection.execute("SELECT record, checksum FROM files NOT INDEXED")
            while batch := cursor.fetchmany(1024):
                for record, checksum in batch:
                    if crc(record) != checksum:
                        raise DamagedCacheError("a row's checksum does not match")
                    path, folder, signature, reader, _, values = loads(record)
                    expected = signature_of.get(path)
                    if expected is None or not path.startswith(folder):
                        raise StaleCacheError()  # a row of a file this query did not find
                    if expected != signature or (reader and reader != token):
                        raise StaleCacheError([path])
                    append((path, values))
        except (sqlite3.Error, ValueError, EOFError, TypeError) as exc:
            raise DamagedCacheError(str(exc)) from None
        self._counted = (len(found), sum(1 for _, values in found if values is None))
        found.sort(key=lambda item: path_order(item[0]))
        return found

    def paths_of(self, exp_id: str) -> list[str]:
        """The files (relative paths, in path order) whose name holds ``exp_id``, as this
        query found them."""
        from kexp.validate import EXPERIMENT_NAME

        if self._by_id is None and len(self._folders) > 0:
            by_id: dict[str, list[str]] = {}
            fullmatch = EXPERIMENT_NAME.fullmatch
            for folder, known in self._folders.items():
                for name in known.names:
                    if fullmatch(name):
                        by_id.setdefault(name[:16], []).append(folder + name)
            for paths in by_id.values():
                paths.sort(key=path_order)
            self._by_id = by_id
        return list((self._by_id or {}).get(exp_id, []))

    def rows_at(self, paths: Sequence[str]) -> dict[str, Row | None]:
        """The row of each of ``paths`` (None for an invalid file); every path must be
        one this query found."""
        found: dict[str, Row | None] = {}
        for start in range(0, len(paths), 500):
            chunk = list(paths[start : start + 500])
            marks = ",".join("?" * len(chunk))
            for path, _, _, _, _, values in self._query(
                f"SELECT record, checksum FROM files WHERE path IN ({marks})", chunk
            ):
                found[path] = None if values is None else _row(path, values)
        if not found.keys() <= set(paths):
            raise DamagedCacheError("a lookup by path returned another row")
        if len(found) != len(set(paths)):
            raise StaleCacheError()  # a file this query found has no row
        return found

    def first_valid(self, exp_id: str) -> Row | None:
        """The row of the first valid file (in path order) whose name holds ``exp_id``:
        the one whose score counts for an id that several files hold."""
        paths = self.paths_of(exp_id)
        rows = self.rows_at(paths) if paths else {}
        return next((rows[path] for path in paths if rows[path] is not None), None)

    def naming(self, exp_id: str) -> tuple[list[Row], list[Row]]:
        """(valid rows whose ``pid`` is ``exp_id``, those whose ``combines`` hold it),
        each in path order; cross-checked through the table."""
        children = [
            _row(path, values)
            for path, _, _, _, _, values in self._query(
                "SELECT record, checksum FROM files INDEXED BY files_by_pid WHERE pid = ?",
                (exp_id,),
            )
            if _agrees(path, values is not None and values[_PID] == exp_id)
        ]
        needle = f" {exp_id} "
        combiners = [
            _row(path, values)
            for path, _, _, _, _, values in self._query(
                "SELECT record, checksum FROM files INDEXED BY files_by_combines "
                "WHERE combines IS NOT NULL AND instr(combines, ?) > 0",
                (needle,),
            )
            if _agrees(path, values is not None and exp_id in values[_COMBINES])
        ]
        self._expect("pid = ?", (exp_id,), len(children))
        self._expect("instr(combines, ?) > 0", (needle,), len(combiners))
        children.sort(key=lambda row: path_order(row.path))
        combiners.sort(key=lambda row: path_order(row.path))
        return children, combiners

    def _expect(self, condition: str, parameters: Sequence[Any], rows: int) -> None:
        """Have :meth:`confirm` check that ``rows`` rows of the table meet ``condition``
        (what a lookup through an index found)."""
        self._checks.append((condition, tuple(parameters), rows))

    def confirm(self) -> None:
        """Check, in one pass over the hints apart from the indexes lookups use (a
        covering index of every hint), that no index hid a row: as many
        rows as files, as many invalid ones as the index gave, (after :meth:`by_score`
        was stopped) as many scoring at least that much as it returned, and as many as
        every other lookup found (:meth:`_expect`)."""
        checks = list(self._checks)
        if self._ranked is not None:
            threshold, seen = self._ranked
            checks.append(("valid = 1 AND score >= ?", (threshold,), seen))
        if self._counted is not None and not checks:
            total, invalid = self._counted  # all_rows read the whole table
            found: list[Any] = []
        else:
            columns = ", ".join(f"TOTAL({condition})" for condition, _, _ in checks)
            parameters = [p for _, values, _ in checks for p in values]
            total, invalid, *counted = self._count(
                f"SELECT COUNT(*), TOTAL(valid = 0){', ' if checks else ''}{columns} "
                "FROM files INDEXED BY files_hints",
                parameters,
            )
            found = counted
        (indexed,) = self._count("SELECT COUNT(*) FROM files INDEXED BY files_by_score")
        if total != self._expected() or indexed != total:
            raise StaleCacheError()
        if invalid != self._invalid_seen or list(found) != [rows for _, _, rows in checks]:
            raise DamagedCacheError("an index and the table differ")


def _row(path: str, values: tuple[Any, ...] | None) -> Row:
    """The row of a valid file's record values."""
    assert values is not None
    return Row._make((*values, path, False))


def _agrees(path: str, agrees: bool) -> bool:
    """True, or (a row selected by a hint its record does not hold) a damaged cache."""
    if not agrees:
        raise DamagedCacheError(f"{path}: a hint column differs from the row's record")
    return True


def _marked(row: Row, scores: dict[str, float]) -> Row:
    if row.combines and below_best_combined(row.score, row.combines, scores):
        return row._replace(interference=True)
    return row


_T = TypeVar("_T")


class NameLookup:
    """Experiment file names by id prefix, as they are on disk now, from the cache's
    folder listings: a folder whose own signature is the cached one holds the cached
    names (an id is in a file's name, not its content); the others are listed."""

    def __init__(self, base: str, listings: dict[str, tuple[bytes, tuple[str, ...], Any]]):
        #: Each folder's sorted names, or (cached, not decoded yet) its marshal blob.
        self._names: dict[str, Sequence[str] | bytes] = {}

        def visit(folder: str) -> Sequence[str]:
            path = base + folder
            stamp = folder_signature(path)
            if stamp is None:
                return ()
            known = listings.get(folder)
            if known is not None and known[0] == stamp:
                self._names[path.rstrip(os.sep)] = known[2]
                return known[1]
            listed = list_folder(path)
            if listed is None:
                return ()
            self._names[path.rstrip(os.sep)] = listed[0]
            return listed[1]

        walk_folders(visit)

    def find(self, prefix: str) -> list[tuple[str, str]]:
        """(folder, name) of every experiment file whose name starts with ``prefix``."""
        from kexp.validate import EXPERIMENT_NAME

        fullmatch = EXPERIMENT_NAME.fullmatch
        needle = prefix.encode("utf-8", "surrogatepass")
        found: list[tuple[str, str]] = []
        for folder, names in self._names.items():
            if isinstance(names, bytes):
                # A name holding the prefix has its bytes in the folder's marshal blob:
                # most folders are skipped without decoding their names.
                if needle not in names:
                    continue
                names = self._names[folder] = marshal.loads(names)
            found.extend(
                (folder, name) for name in _names_with_prefix(names, prefix) if fullmatch(name)
            )
        return found


class StoreIndex:
    """The cache of one store (see the module documentation)."""

    def __init__(self, experiments_dir: Path, cache_dir: Path, settings: Settings) -> None:
        self.experiments_dir = experiments_dir
        self.file = cache_dir / index_file_name(settings)
        self.settings = settings
        self.header = _header(settings)
        self._base = str(experiments_dir).rstrip(os.sep) + os.sep

    def name_lookup(self) -> NameLookup | None:
        """A :class:`NameLookup` of the store as it is now, or None when there is no
        usable cache to ask (then walk the folders: :func:`walk_experiment_names`)."""
        import sqlite3

        connection = self._open()
        if connection is None:
            return None
        try:
            listings: dict[str, tuple[bytes, tuple[str, ...], Any]] = {}
            for folder, experiments, listed_at, subfolders, names, total in connection.execute(
                "SELECT folder, experiments, listed_at, subfolders, names, listing_sum FROM folders"
            ):
                if _listing_sum(folder, experiments, listed_at, subfolders, names) != total:
                    return None  # damaged: walk instead
                listings[folder] = (listed_at, marshal.loads(subfolders), names)
            return NameLookup(self._base, listings)
        except (sqlite3.Error, EOFError, ValueError, TypeError):
            return None
        finally:
            connection.close()

    def names_with_prefix(self, prefix: str) -> list[tuple[str, str]] | None:
        """(folder, name) of every experiment file whose name starts with ``prefix``, or
        None when there is no cache to ask (see :meth:`name_lookup`)."""
        lookup = self.name_lookup()
        return None if lookup is None else lookup.find(prefix)

    def query(
        self, use: Callable[[IndexView], _T], *, light: bool = False
    ) -> tuple[_T, list[tuple[str, str]]]:
        """``use(view)`` of the refreshed cache (``light``: see :meth:`refresh`), and the
        invalid files (path relative to ``experiments/``, first error). Rows found not
        current (another process wrote meanwhile) are read again and ``use`` run again;
        a cache failing a check is rebuilt from the files, so the answer is always the
        files'."""
        again: set[str] = set()
        rebuild = False
        for attempt in range(_ATTEMPTS):
            view = self.refresh(rebuild=rebuild, again=again, light=light)
            try:
                view.begin()
                result = use(view)
                view.confirm()
                return result, view.invalid
            except StaleCacheError as stale:
                again |= stale.paths
                rebuild = attempt >= _ATTEMPTS - 2
            except DamagedCacheError:
                rebuild = True
            finally:
                view.close()
        # Every attempt saw another process change the cache (or the files) under it.
        view = self.refresh(rebuild=True, again=again, private=True)
        try:
            view.begin()
            result = use(view)
            view.confirm()
            return result, view.invalid
        finally:
            view.close()

    def refresh(
        self,
        *,
        rebuild: bool = False,
        again: Iterable[str] = (),
        private: bool = False,
        light: bool = False,
    ) -> IndexView:
        """Bring the cache up to date with the files and return it for querying
        (:meth:`query` checks and uses it).

        Files whose stat matches the cache are not read; the others are read and
        checked, and so are ``again`` (paths relative to ``experiments/``). ``rebuild``
        reads every file again; ``private`` also keeps the result in a file of its own,
        which no other process writes.

        ``light`` takes the files of a folder whose own signature is the cached one as
        the cache last saw them, without a ``stat`` each: what every file added,
        renamed, replaced or removed since changes (kexp's own writes, git, most
        editors), but not an edit made in place by another program since the last
        query. The check a delete makes (:meth:`IndexView.naming`) uses it: it costs
        what changed, not a ``stat`` of every file.
        """
        # Walking creates a few objects per file and frees none: the cyclic garbage
        # collector would scan them all again and again.
        collecting = gc.isenabled()
        gc.disable()
        try:
            return self._refresh(rebuild, set(again), private, light)
        finally:
            if collecting:
                gc.enable()

    def _open(self) -> sqlite3.Connection | None:
        """The cache, if it exists, is readable and was written by this kexp."""
        import sqlite3

        try:
            if not self.file.is_file():
                return None
        except OSError:
            return None
        try:
            connection = sqlite3.connect(self.file, timeout=5.0, isolation_level=None)
        except (sqlite3.Error, ValueError):
            return None
        try:
            found = connection.execute("SELECT value FROM meta WHERE key = 'header'").fetchone()
            if found is not None and found[0] == self.header:
                return connection
        except (sqlite3.Error, ValueError):
            pass
        connection.close()
        return None

    def _cached_folders(self, connection: sqlite3.Connection) -> dict[str, _Folder] | None:
        """The cached folder listings; None when one is damaged (or unreadable)."""
        import sqlite3

        try:
            rows = connection.execute(f"SELECT {_FOLDER_COLUMNS} FROM folders").fetchall()
            cached: dict[str, _Folder] = {}
            for folder, experiments, listed_at, subs, names, total, packed, packed_sum in rows:
                if _listing_sum(folder, experiments, listed_at, subs, names) != total or (
                    zlib.crc32(packed) != packed_sum
                ):
                    return None
                listed = marshal.loads(names)
                if len(packed) != len(listed) * _SIGNATURE_SIZE:
                    return None
                cached[folder] = _Folder(
                    listed, packed, experiments, listed_at, marshal.loads(subs), (total, packed_sum)
                )
            return cached
        except (sqlite3.Error, EOFError, ValueError, TypeError):
            return None

    def _refresh(
        self, rebuild: bool, again: set[str], private: bool, light: bool = False
    ) -> IndexView:
        token = os.urandom(8).hex()  # marks the racily clean rows this refresh reads
        for _ in range(_ATTEMPTS):
            # One horizon for the whole refresh, taken before any file is read: a file
            # changed after it is not settled (see the module documentation).
            horizon = time.time_ns() - RACY_NS
            connection = None if rebuild else self._open()
            cached = None if connection is None else self._cached_folders(connection)
            if connection is not None and not cached:
                connection.close()
                connection = None
            if connection is None or cached is None:
                return self._build_from_files(horizon, token, private or rebuild)
            view = self._refresh_cached(connection, cached, horizon, token, again, light)
            if view is not None:
                return view
            # Another process changed these folders' rows since they were read: again.
        return self._build_from_files(time.time_ns() - RACY_NS, token, True)

    def _refresh_cached(
        self,
        connection: sqlite3.Connection,
        cached: dict[str, _Folder],
        horizon: int,
        token: str,
        again: set[str],
        light: bool = False,
    ) -> IndexView | None:
        """The view after writing what changed since ``cached``; None when another
        process changed those folders' rows meanwhile (the connection is closed)."""
        for path in again:  # rows found not current: read those files again
            folder = path[: path.rfind(os.sep) + 1]
            known = cached.get(folder)
            at = -1 if known is None else _name_at(known.names, path[len(folder) :])
            if known is not None and at >= 0:
                forgotten = bytearray(known.signatures)
                forgotten[at * 32 : at * 32 + 32] = _NO_SIGNATURE_BYTES
                cached[folder] = known._replace(signatures=bytes(forgotten))
        found = self._scan(cached, light)
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
            stored = known.stored if known is not None else None
            folders[folder] = changed[folder] = _Folder(
                names, packed, count, listed_at, subfolders, stored
            )

        checked, sides, _ = self._check(groups, horizon, token)
        if groups:
            self._remove_leftovers()
        try:
            if changed or gone:
                outcome = self._update(
                    connection, cached, changed, gone, removed, checked, sides, horizon, token
                )
                if outcome is None:
                    connection.close()
                    return None
                if outcome is False:
                    # The cache cannot be written (another process holds it too long, a
                    # read-only store, a full disk): answer from a copy in memory.
                    memory = self._copy_in_memory(connection)
                    connection.close()
                    if memory is None or not self._update(
                        memory,
                        cached,
                        changed,
                        gone,
                        removed,
                        checked,
                        sides,
                        horizon,
                        token,
                        check=False,
                    ):
                        return self._build_from_files(horizon, token, True)
                    connection = memory
        finally:
            for side in sides:
                side.unlink(missing_ok=True)
        return IndexView(connection, folders, token)

    def _copy_in_memory(self, connection: sqlite3.Connection) -> sqlite3.Connection | None:
        import sqlite3

        memory = sqlite3.connect(":memory:", isolation_level=None)
        try:
            connection.backup(memory)
        except (sqlite3.Error, ValueError):
            memory.close()
            return None
        return memory

    def _build_from_files(self, horizon: int, token: str, private: bool) -> IndexView:
        """A cache made from nothing: folders listed, every experiment file read and
        checked (in two processes), its signature taken as it is opened."""
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
        checked, sides, read_at = self._check(groups, horizon, token)
        groups.clear()
        for folder, known in folders.items():
            folders[folder] = known._replace(
                signatures=self._signatures_as_read(folder, known, read_at.get(folder, b""))
            )
        del read_at
        self._remove_leftovers()
        try:
            connection = self._build(folders, checked, sides, horizon, token, private)
        finally:
            for side in sides:
                side.unlink(missing_ok=True)
        return IndexView(connection, folders, token)

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
            with contextlib.suppress(OSError):
                for left in folder.glob(pattern):
                    if left.name == self.file.name:
                        continue
                    if pattern == "index-*.sqlite" and any(
                        left.with_name(left.name + suffix).exists()
                        for suffix in ("-journal", "-wal")
                    ):
                        continue
                    with contextlib.suppress(OSError):
                        if left.lstat().st_mtime < horizon:
                            left.unlink()

    def _scan(self, cached: dict[str, _Folder], light: bool = False) -> dict[str, Scanned]:
        """Every folder reachable from ``experiments/`` now, scanned: the cached ones in
        two processes (when there are many files to ``stat``), new ones here."""
        scan = _scanner(self._base, cached, light)
        known = sorted(cached)
        sizes = [1 if light else len(cached[folder].names) + 1 for folder in known]
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
        from kexp.validate import read_and_check, read_file_and_stat, valid_fields

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
                        fields, checked = valid_fields(data, path, settings)
                        if fields is not None:
                            out.append((relative, signature, _values(fields), ""))
                            continue
                        assert checked is not None
                        result = checked
                    if result.ok:
                        assert result.document is not None
                        out.append((relative, signature, _values(result.document.fields), ""))
                        continue
                    errors = [p for p in sort_problems(result.problems) if p.severity == "error"]
                    out.append((relative, signature, None, errors[0].format()))
            return out

        return check

    def _check(
        self, groups: list[Group], horizon: int, token: str
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
                    database.executemany(_INSERT_FILE, _records(checked, horizon, token))
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
        except (OSError, sqlite3.Error, ValueError):
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

    def _build(
        self,
        folders: dict[str, _Folder],
        checked: list[Checked],
        sides: list[Path],
        horizon: int,
        token: str,
        private: bool,
    ) -> sqlite3.Connection:
        """A new cache with everything, written to a temporary file renamed into place
        (in memory only when the cache folder cannot be written); this query answers
        from the new file.

        A cache file is never renamed over another, nor removed while it may be in use
        (SQLite names its rollback journal after the file's path, so a journal left by a
        writer of the old file would be rolled back into the new one): the new file is
        linked into place only where there is none, or the one there is unusable. When
        a usable one is there (another process built it meanwhile, or ``private``: a
        rebuild after rows failed a check), the rows are copied into it in one
        transaction, and this query answers from its own file, which no other process
        writes."""
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
                self._fill(connection, folders, checked, rows[len(base) :], horizon, token, base)
            except BaseException:
                connection.close()
                raise
        except (OSError, sqlite3.Error, ValueError):
            pass
        else:
            try:
                linked = self._publish(temporary, replace_rows=private)
            except BaseException:
                connection.close()
                temporary.unlink(missing_ok=True)
                raise
            if not linked:
                # The store has its cache (another process's, or this one's rows copied
                # into it): this query reads its own file, which no other process knows.
                temporary.unlink(missing_ok=True)
                return connection
            if private:
                # A copy no other process writes (the linked file is the store's now).
                memory = self._copy_in_memory(connection)
                connection.close()
                temporary.unlink(missing_ok=True)
                if memory is not None:
                    return memory
            else:
                # Read the store's cache by its own name, so that SQLite sees the journal
                # of any other writer (named after that path).
                connection.close()
                temporary.unlink(missing_ok=True)
                reopened = self._open()
                if reopened is not None:
                    return reopened
        return self._build_in_memory(folders, checked, sides, horizon, token)

    def _build_in_memory(
        self,
        folders: dict[str, _Folder],
        checked: list[Checked],
        sides: list[Path],
        horizon: int,
        token: str,
    ) -> sqlite3.Connection:
        """The cache kept in memory (its folder cannot be written, or read back)."""
        import sqlite3

        connection = sqlite3.connect(":memory:", isolation_level=None)
        live = [side for side in sides if side.exists()]
        if len(live) != len(sides):
            # The first side database became the temporary file, now gone: read it all
            # again, here.
            checker = self._checker()
            groups = [
                (folder, [n for n in known.names if _is_experiment_name(n)], None)
                for folder, known in folders.items()
            ]
            checked, live = checker(_items(groups)), []
        self._fill(connection, folders, checked, live, horizon, token)
        return connection

    def _publish(self, temporary: Path, *, replace_rows: bool) -> bool:
        """Make the cache in ``temporary`` the store's (see :meth:`_build`); whether it
        was linked into place (else its rows were copied, or it stays private). Errors
        are ignored: the cache is an optimisation."""
        import sqlite3

        for _ in range(2):
            with contextlib.suppress(OSError):
                os.link(temporary, self.file)
                return True
            shared = None
            try:
                shared = sqlite3.connect(self.file, timeout=5.0, isolation_level=None)
                found = shared.execute("SELECT value FROM meta WHERE key = 'header'").fetchone()
            except sqlite3.OperationalError as exc:
                if _busy(exc):
                    if shared is not None:
                        shared.close()
                    return False  # in use by another process: it is fine, and theirs
                found = None
            except (sqlite3.Error, ValueError):
                found = None
            usable = shared is not None and found is not None and found[0] == self.header
            if usable and replace_rows:
                assert shared is not None
                usable = self._replace_rows(shared, temporary)
            elif usable:
                assert shared is not None
                shared.close()
                return False
            if usable:
                return False
            # Not a usable cache of this kexp (corrupt, truncated, tampered with).
            if shared is not None:
                shared.close()
            with contextlib.suppress(OSError):
                self.file.unlink()
        return False

    def _replace_rows(self, shared: sqlite3.Connection, temporary: Path) -> bool:
        """Copy every row of ``temporary`` into the shared cache in one transaction;
        False when the shared cache is damaged (True when done, or busy: theirs)."""
        import sqlite3

        try:
            shared.execute("ATTACH DATABASE ? AS fresh", (str(temporary),))
            shared.execute("BEGIN IMMEDIATE")
            try:
                for table in ("files", "folders"):
                    shared.execute(f"DELETE FROM {table}")
                    shared.execute(f"INSERT INTO {table} SELECT * FROM fresh.{table}")
                shared.execute("COMMIT")
            except (sqlite3.Error, ValueError):
                shared.execute("ROLLBACK")
                raise
        except sqlite3.OperationalError as exc:
            return _busy(exc)
        except (sqlite3.Error, ValueError):
            return False
        finally:
            shared.close()
        return True

    def _fill(
        self,
        connection: sqlite3.Connection,
        folders: dict[str, _Folder],
        checked: list[Checked],
        sides: list[Path],
        horizon: int,
        token: str,
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
        connection.executemany(_INSERT_FILE, _records(checked, horizon, token))
        connection.execute("COMMIT")
        for side in sides:
            connection.execute("ATTACH DATABASE ? AS side", (str(side),))
            connection.execute("INSERT OR REPLACE INTO files SELECT * FROM side.files")
            connection.execute("DETACH DATABASE side")
        for statement in _INDEXES:
            connection.execute(statement)
        connection.execute("BEGIN")
        connection.executemany(_INSERT_FOLDER, _folder_records(folders, horizon))
        connection.execute("COMMIT")
        connection.execute("PRAGMA journal_mode = DELETE")

    def _update(
        self,
        connection: sqlite3.Connection,
        cached: dict[str, _Folder],
        folders: dict[str, _Folder],
        gone: list[str],
        removed: list[str],
        checked: list[Checked],
        sides: list[Path],
        horizon: int,
        token: str,
        *,
        check: bool = True,
    ) -> bool | None:
        """Write what changed in one transaction: True when done; None when another
        process changed the rows of these folders since ``cached`` was read (with
        ``check``), so that this change would not fit them; False when it could not be
        written (another writer held the cache too long, a read-only file, a full disk).
        """
        import sqlite3

        names = [f"side{i}" for i in range(len(sides))]
        try:
            for side, name in zip(sides, names, strict=True):
                connection.execute(f"ATTACH DATABASE ? AS {name}", (str(side),))
            connection.execute("BEGIN IMMEDIATE")
        except (sqlite3.Error, ValueError):
            _detach(connection, names)
            return False
        try:
            if check:
                for folder in itertools.chain(folders, gone):
                    found = connection.execute(
                        "SELECT listing_sum, signatures_sum FROM folders WHERE folder = ?",
                        (folder,),
                    ).fetchone()
                    before = cached.get(folder)
                    if (tuple(found) if found else None) != (before.stored if before else None):
                        connection.execute("ROLLBACK")
                        return None
            for folder in gone:
                connection.execute("DELETE FROM folders WHERE folder = ?", (folder,))
                connection.execute("DELETE FROM files WHERE folder = ?", (folder,))
            connection.executemany("DELETE FROM files WHERE path = ?", [(p,) for p in removed])
            connection.executemany(_UPSERT_FOLDER, _folder_records(folders, horizon))
            connection.executemany(_UPSERT_FILE, _records(checked, horizon, token))
            for name in names:
                connection.execute(f"INSERT OR REPLACE INTO files SELECT * FROM {name}.files")
            connection.execute("COMMIT")
        except (sqlite3.Error, ValueError):
            with contextlib.suppress(sqlite3.Error):
                connection.execute("ROLLBACK")
            return False
        finally:
            _detach(connection, names)
        return True


def _busy(error: Exception) -> bool:
    return "locked" in str(error) or "busy" in str(error)


def _is_experiment_name(name: str) -> bool:
    from kexp.validate import EXPERIMENT_NAME

    return EXPERIMENT_NAME.fullmatch(name) is not None


def _records(checked: list[Checked], horizon: int, token: str) -> Iterator[tuple[Any, ...]]:
    """The ``files`` rows of checked files: settled ones for every process, the others
    marked with ``token`` (this refresh's)."""
    for path, signature, values, error in checked:
        folder = path[: path.rfind(os.sep) + 1]
        reader = "" if _settled(signature, horizon) else token
        yield _file_row(path, folder, signature, reader, error, values)


def _folder_records(folders: dict[str, _Folder], horizon: int) -> Iterator[tuple[Any, ...]]:
    """The ``folders`` rows: racily clean names and listings stored with no signature."""
    for folder, known in folders.items():
        packed = bytearray(known.signatures)
        for i in range(0, len(packed), _SIGNATURE_SIZE):
            if not _settled(bytes(packed[i : i + _SIGNATURE_SIZE]), horizon):
                packed[i : i + _SIGNATURE_SIZE] = _NO_SIGNATURE_BYTES
        listed_at = _storable(known.listed_at, horizon)
        names = marshal.dumps(known.names)
        subfolders = marshal.dumps(known.subfolders)
        signatures_blob = bytes(packed)
        yield (
            folder,
            known.experiments,
            listed_at,
            subfolders,
            names,
            _listing_sum(folder, known.experiments, listed_at, subfolders, names),
            signatures_blob,
            zlib.crc32(signatures_blob),
        )


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
    holds, those to read again (new, another signature, or none), and cached names gone."""
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
