"""The working tree as every query sees it: each experiment file's path, stat signature
and content key, folder by folder, and the record of each content.

:func:`refresh` brings the cache's listing (:mod:`kexp.storage.cache`: ``folders`` and ``packs``)
up to date with ``experiments/`` and returns it:

1. Walk ``experiments/`` (any depth of folders) and ``stat`` every experiment file,
   folder by folder; a folder whose own signature is the cached one is not listed
   again (its names are the cached ones), but its files are still ``stat``-ed: an edit
   in place changes a file, not its folder. With many files, on a machine with more
   than one core, the folders are split between this process and a forked child.
2. A file whose signature (modification time in ns, size, inode, change time) is the
   cached one has the cached content key and record; every other file is read (in two
   processes when many), its content key computed (git's blob hash of its bytes) and
   its record made (:func:`kexp.storage.rows.record_of`).
3. A file changed less than :data:`~kexp.storage.cache.RACY_NS` before it was read ("racily
   clean", as git says) may change again within its timestamps' granularity without a
   new signature: it is stored without a signature, and read again next time. The
   change time counts because it cannot be set back: an edit followed by ``touch -d``,
   ``tar -x``, ``rsync -t`` or ``cp -a`` restoring the old modification time is seen.

What a signature cannot see: a file whose bytes change while its modification time,
size, inode *and* change time stay the same, which only a change of the system clock
or a tool writing the disk below the file system can do.

The listing's records are keyed by content, so a row can only be current: a concurrent
writer can only store what some file held (its signature says which), never a wrong
value for a file as it is now.
"""

from __future__ import annotations

import atexit
import bisect
import gc
import hashlib
import itertools
import os
import stat
import time
from array import array
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, NamedTuple

from kexp.core.collector import collector_paused
from kexp.core.ids import ID_LENGTH
from kexp.format.fileformat import FileFormatError
from kexp.format.reading import read_file_and_stat, read_or_problem
from kexp.format.rules import EXPERIMENT_NAME
from kexp.storage.cache import RACY_NS, Cache
from kexp.storage.cachefile import DamagedCacheError
from kexp.storage.parallel import in_two_processes
from kexp.storage.rows import (
    Record,
    Row,
    content_key,
    named_record,
    problem_at,
    row_of,
)

if TYPE_CHECKING:
    from kexp.core.settings import Settings

#: A signature no file has: racily clean entries, unreadable files.
_NO_SIGNATURE = (-1, -1, -1, -1)
NO_SIGNATURE = array("q", _NO_SIGNATURE).tobytes()
SIGNATURE_SIZE = len(NO_SIGNATURE)
#: The content key of a file that could not be read.
NO_KEY = bytes(20)
KEY_SIZE = len(NO_KEY)
#: How many files a worker reads before it checks them (system calls between the checks
#: slow the checking code down on machines with speculative-execution mitigations).
READ_BATCH = 256


class Folder(NamedTuple):
    """One folder of ``experiments/`` as the listing holds it."""

    #: The folder's own signature when it was listed (it changes when an entry is
    #: added, removed or renamed; not when a file is edited in place).
    listed_at: bytes
    subfolders: tuple[str, ...]
    #: The experiment file names (:data:`kexp.format.validate.EXPERIMENT_NAME`), sorted.
    names: tuple[str, ...]
    #: Each name's stat signature, 4 int64: mtime_ns, size, inode, ctime_ns.
    signatures: bytes
    #: Each name's content key (:data:`NO_KEY`: it could not be read).
    keys: bytes


def path_order(path: str) -> str:
    """A sort key ordering relative paths as :class:`pathlib.Path` objects sort
    (component by component): the order of :meth:`kexp.Store.paths`."""
    return path.replace(os.sep, "\0")


# --- walking -------------------------------------------------------------------------


def list_folder(path: str, prefix: str = "") -> tuple[list[str], list[str]] | None:
    """(sorted experiment file names starting with ``prefix``, sorted sub-folder names)
    of one folder; None when it is not a folder (any more).

    As :func:`os.walk` sees them: hidden entries (writers' temporary files) are skipped;
    a folder is a folder whatever its name (``notes.md/`` is walked, not read); a
    symbolic link to a folder is neither a file nor walked.
    """
    fullmatch = EXPERIMENT_NAME.fullmatch
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
                        name.startswith(prefix)
                        and fullmatch(name)
                        and not (entry.is_symlink() and entry.is_dir())
                    ):
                        names.append(name)
                except OSError:
                    continue
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


def folder_signature(path: str, dir_fd: int | None = None) -> bytes | None:
    """A folder's own packed signature; None when it is not a folder (``path`` relative
    to the folder open as ``dir_fd`` when given)."""
    try:
        info = os.stat(path, dir_fd=dir_fd)
    except OSError:
        return None
    if not stat.S_ISDIR(info.st_mode):
        return None
    return array("q", (info.st_mtime_ns, info.st_size, info.st_ino, info.st_ctime_ns)).tobytes()


def signatures(folder: str, names: Sequence[str], dir_fd: int | None = None) -> bytes:
    """The packed stat signatures of ``names`` in ``folder`` (4 int64 each, in order);
    :data:`NO_SIGNATURE` for a name that is gone or not a regular file. ``folder`` is
    relative to the folder open as ``dir_fd`` when given (see :func:`open_top`): one
    path lookup shorter a file than from the root, and no folder opened and closed."""
    packed: array[int] = array("q")
    extend = packed.extend
    is_regular = stat.S_ISREG
    for name in names:
        try:
            info = os.stat(folder + name, dir_fd=dir_fd, follow_symlinks=False)
        except OSError:
            extend(_NO_SIGNATURE)
            continue
        if is_regular(info.st_mode):
            extend((info.st_mtime_ns, info.st_size, info.st_ino, info.st_ctime_ns))
        else:
            extend(_NO_SIGNATURE)
    return packed.tobytes()


def open_top(path: str) -> int | None:
    """A descriptor of the folder ``path`` to look names up from (``O_PATH`` where there
    is one: no read permission needed, as for a path); None when it is not a folder."""
    try:
        return os.open(path, getattr(os, "O_PATH", os.O_RDONLY) | getattr(os, "O_DIRECTORY", 0))
    except OSError:
        return None


def settled(signature: bytes, horizon: int) -> bool:
    """Whether a file (or folder) with this signature last changed before ``horizon``:
    its modification time and its change time both."""
    if signature == NO_SIGNATURE:
        return False
    mtime, _, _, ctime = array("q", signature)
    return mtime < horizon and ctime < horizon


def _storable(signatures_: bytes, horizon: int) -> bytes:
    """``signatures_`` as the cache stores them: racily clean ones as none."""
    if len(signatures_) == SIGNATURE_SIZE:
        return signatures_ if settled(signatures_, horizon) else NO_SIGNATURE
    values = array("q", signatures_)
    for at in range(0, len(values), 4):
        if not (values[at] < horizon and values[at + 3] < horizon) or values[at] == -1:
            values[at : at + 4] = array("q", _NO_SIGNATURE)
    return values.tobytes()


# --- the listing ------------------------------------------------------------------------


#: A folder's pack as the cache keeps it: (the names, their content keys, the record of
#: each): a record is looked up by name and key, never by position alone (a pack written
#: by another process may describe another listing of the folder).
Pack = tuple[tuple[str, ...], bytes, list[Record]]


def pack_records(pack: Pack | None) -> dict[tuple[str, bytes], Record]:
    """(name, content key) → record of a pack."""
    if pack is None:
        return {}
    names, keys, records = pack
    return {
        (name, keys[at * KEY_SIZE : (at + 1) * KEY_SIZE]): records[at]
        for at, name in enumerate(names)
        if at < len(records)
    }


#: A folder's files as queries see them: (rows of the valid ones, (path, first error) of
#: the invalid ones), each in name order.
FolderRows = tuple[list[Row], list[tuple[str, Any]]]
#: A folder's rows with the folder as they describe it (its names and content keys):
#: they are the rows of a listing's folder that has the same names and keys.
Made = tuple[Folder, FolderRows]


def folder_rows(
    base: str,
    folder: str,
    known: Folder,
    pack: Pack | None,
    settings: Settings,
    repaired: dict[str, Pack] | None = None,
) -> Made:
    """The rows of a folder's files from its pack (a file the pack does not describe, as
    when another process wrote it for another listing, is read; the pack of what was
    found then goes into ``repaired``, for the cache to keep), with the folder as they
    describe it: ``known``, but the content keys of the files read."""
    rows: list[Row] = []
    invalid: list[tuple[str, Any]] = []
    keys = known.keys
    if pack is not None and pack[0] == known.names and pack[1] == keys:
        records = pack[2]  # the pack of this very listing (the common case)
        for at, name in enumerate(known.names):
            error, values = records[at]
            if values is None:
                invalid.append((folder + name, error))
            else:
                key = keys[at * KEY_SIZE : (at + 1) * KEY_SIZE]
                # tuple.__new__ of the class: the fastest way to make many rows.
                rows.append(tuple.__new__(Row, (*values, folder + name, key, None)))
        return known, (rows, invalid)
    by_name = pack_records(pack)
    found_keys = bytearray()
    found_records: list[Record] = []
    for at, name in enumerate(known.names):
        key = keys[at * KEY_SIZE : (at + 1) * KEY_SIZE]
        record = by_name.get((name, key))
        if record is None:  # another listing's pack (a race), or none: read the file
            _, _, key, record = _read_one(base, folder + name, settings)
        found_keys += key
        found_records.append(record)
        error, values = record
        if values is None:
            invalid.append((folder + name, error))
        else:
            rows.append(row_of(values, folder + name, key))
    if repaired is not None and known.names:
        repaired[folder] = (known.names, bytes(found_keys), found_records)
    return known._replace(keys=bytes(found_keys)), (rows, invalid)


def describes(made: Made, known: Folder) -> bool:
    """Whether ``made`` holds the rows of the folder ``known``."""
    return made[0].names == known.names and made[0].keys == known.keys


#: The rows the last listing in this process made (of which ``experiments/``, read with
#: which settings), by folder: a refresh of the same folder takes those of the folders
#: unchanged since instead of making them again of their packs. The read before a write,
#: its tried-before check and an MCP server's questions share them; a listing's rows are
#: a function of its folders' names and content keys (:func:`describes`).
_last_made: list[tuple[str, Settings, dict[str, Made]]] = []


def forget_made_rows() -> None:
    """Forget the rows the last listing made, as a new process starts without them: the
    next refresh makes its rows of the cache's packs."""
    _last_made.clear()


# Freed at exit, before the interpreter's teardown: left to it, every row kept alive
# until then cost a command about 0.6 s (``kexp review`` at 100,000) to tear down.
atexit.register(forget_made_rows)


def _made_before(base: str, settings: Settings) -> dict[str, Made]:
    """The rows the last listing made of ``base`` with ``settings`` (none: empty)."""
    for made_base, made_settings, made in _last_made:
        if made_base == base and made_settings == settings:
            return made
    return {}


class Listing:
    """The working tree as one refresh found it (see the module documentation)."""

    def __init__(
        self,
        cache: Cache,
        base: str,
        folders: dict[str, Folder],
        packs: dict[str, Pack],
        made: dict[str, Made] | None = None,
        repaired: dict[str, Pack] | None = None,
        generation: str | None = None,
    ) -> None:
        self._cache = cache
        #: The cache's generation that holds this listing: the one the refresh found,
        #: or made when it saved what changed with no other save in between (None: one
        #: came between, or the refresh did not ``stat`` every file).
        self.generation = generation
        self._base = base
        #: Every folder found (relative to ``experiments/``, "" or ending with os.sep).
        self.folders = folders
        self._packs = packs
        #: Rows made ahead (while a forked child stat-ed files), by folder, with the
        #: listing they were made of.
        self._made = made if made is not None else {}
        #: Packs made again of files read because their folder's pack did not describe
        #: them (see :meth:`_keep_repaired`).
        self._repaired = repaired or {}
        self._stamp: bytes | None = None
        #: What :meth:`rows` found (a listing's folders never change): asked again by
        #: the commands that read the store twice (``review``).
        self._all: FolderRows | None = None

    def paths(self) -> list[str]:
        """Every experiment file (relative to ``experiments/``), in path order."""
        return [path for path, _ in self.files()]

    def ids(self) -> list[str]:
        """The id of every experiment file (its name's first characters), in no order."""
        return [name[:ID_LENGTH] for known in self.folders.values() for name in known.names]

    def files(self) -> list[tuple[str, bytes]]:
        """(path relative to ``experiments/``, content key) of every experiment file, in
        path order (:data:`NO_KEY`: unreadable)."""
        found: list[tuple[str, bytes]] = []
        mixed = False
        for folder in sorted(self.folders, key=path_order):
            known = self.folders[folder]
            keys = known.keys
            found.extend(
                (folder + name, keys[at * KEY_SIZE : (at + 1) * KEY_SIZE])
                for at, name in enumerate(known.names)
            )
            mixed = mixed or bool(known.names and known.subfolders)
        if mixed:  # files beside sub-folders: not in path order folder by folder
            found.sort(key=lambda item: path_order(item[0]))
        return found

    def stamp(self) -> bytes:
        """A digest of every folder's name, file names and content keys: what the
        working tree's valid rows are a function of."""
        if self._stamp is not None:
            return self._stamp
        digest = hashlib.blake2b(digest_size=16)
        for folder in sorted(self.folders):
            known = self.folders[folder]
            names = "\0".join(known.names).encode("utf-8", "surrogatepass")
            path = folder.encode("utf-8", "surrogatepass")
            for part in (path, names, known.keys):
                digest.update(len(part).to_bytes(8, "little"))
                digest.update(part)
        self._stamp = digest.digest()
        return self._stamp

    def rows(self) -> FolderRows:
        """The rows of every valid experiment file and the first error of every invalid
        one, each in path order (new lists each time)."""
        if self._all is None:
            self._all = self._every_row()
        rows, invalid = self._all
        return list(rows), list(invalid)

    def _every_row(self) -> FolderRows:
        """:meth:`rows`, made."""
        missing = [
            folder
            for folder, known in self.folders.items()
            if folder not in self._packs and folder not in self._made
        ]
        if missing:
            self._packs.update(self._cache.packs(missing))
        rows: list[Row] = []
        invalid: list[tuple[str, Any]] = []
        mixed = False
        settings = self._cache.settings
        for folder in sorted(self.folders, key=path_order):
            known = self.folders[folder]
            made = self._made.get(folder)
            if made is None or not describes(made, known):
                made = folder_rows(
                    self._base, folder, known, self._packs.get(folder), settings, self._repaired
                )
                self._made[folder] = made  # asked for again by folder
            found, wrong = made[1]
            rows += found
            invalid += wrong
            mixed = mixed or bool(known.names and known.subfolders)
        if mixed:  # files beside sub-folders: not in path order folder by folder
            rows.sort(key=lambda row: path_order(row.path))
            invalid.sort(key=lambda item: path_order(item[0]))
        self._keep_repaired()
        return rows, invalid

    def _keep_repaired(self) -> None:
        """Store the packs made again of files read (a folder whose pack was missing or
        written by another process for another listing would be read by every query
        until it changed), if the cache takes a write at once."""
        if self._repaired:
            self._cache.save_folders({}, self._repaired, (), at_once=True)
            self._repaired = {}

    def rows_of(self, folder: str) -> FolderRows:
        """The rows and errors of one folder's files."""
        found = self._rows_of(folder)
        self._keep_repaired()
        return found

    def _rows_of(self, folder: str) -> FolderRows:
        """:meth:`rows_of`, a pack made again left for the caller to keep."""
        known = self.folders[folder]
        made = self._made.get(folder)
        if made is None or not describes(made, known):
            if folder not in self._packs:
                self._packs.update(self._cache.packs([folder]))
            made = folder_rows(
                self._base,
                folder,
                known,
                self._packs.get(folder),
                self._cache.settings,
                self._repaired,
            )
        return made[1]

    def rows_naming(self, text: str) -> list[Row]:
        """The rows, in path order, of the valid files whose front-matter may hold
        ``text`` (an id): every one that does, but not those of the folders whose pack
        certainly names it nowhere (:meth:`kexp.storage.cache.Cache.packs_naming`), which are
        not read."""
        unread = {
            folder: known.keys
            for folder, known in self.folders.items()
            if folder not in self._made and folder not in self._packs
        }
        packs = self._cache.packs_naming(unread, text.encode("utf-8")) if unread else {}
        rows: list[Row] = []
        for folder in self.folders:
            if folder in packs and packs[folder] is None:
                continue
            if folder in packs:
                self._packs[folder] = packs[folder]
            rows += self._rows_of(folder)[0]
        self._keep_repaired()  # in one write, however many folders were read
        rows.sort(key=lambda row: path_order(row.path))
        return rows

    @collector_paused()  # a tuple a file, none in a cycle
    def records(self) -> list[tuple[str, Row | None]]:
        """(path, its row or None for an invalid file) of every experiment file, in
        path order."""
        rows, invalid = self.rows()  # each in path order
        found: list[tuple[str, Row | None]] = [(row.path, row) for row in rows]
        if invalid:
            found += [(path, None) for path, _ in invalid]
            found.sort(key=lambda item: path_order(item[0]))
        return found

    def keys(self) -> set[bytes]:
        """The content keys of every readable experiment file."""
        found: set[bytes] = set()
        for known in self.folders.values():
            keys = known.keys
            found.update(keys[at : at + KEY_SIZE] for at in range(0, len(keys), KEY_SIZE))
        found.discard(NO_KEY)
        return found


def refresh(
    cache: Cache,
    experiments_dir: Path,
    settings: Settings,
    *,
    light: bool = False,
    rows: bool = True,
) -> Listing:
    """The listing of ``experiments/`` as it is now, the cache brought up to date (see
    the module documentation).

    ``light`` takes the files of a folder whose own signature is the cached one as the
    cache last saw them, without a ``stat`` each (but those the cache holds no
    signature for): what every file added, renamed, replaced or removed since changes
    (kexp's own writes, git, most editors), but not an edit made in place by another
    program since the last query. The tried-before check of a write uses it.

    ``rows``: the rows will be asked for (:meth:`Listing.rows`): those of the cached
    folders are made while a forked child stats files.
    """
    with collector_paused():  # walking makes a few objects a file and frees none
        return _refresh(cache, experiments_dir, settings, light, rows)


#: What scanning one folder finds: (folder, exists, names and signatures when they
#: differ from the cached ones (else None, None), sub-folder names, the folder's own
#: signature when it differs from the cached one (else None)).
_Scanned = tuple[
    str, bool, "tuple[str, ...] | None", "bytes | None", "tuple[str, ...]", "bytes | None"
]


def _scanner(
    base: str, cached: dict[str, Folder], light: bool
) -> Callable[[list[str]], list[_Scanned]]:
    """A worker listing and ``stat``-ing folders (relative to ``base``), comparing each
    with its cached listing."""

    def scan(folders: list[str]) -> list[_Scanned]:
        top = open_top(base)
        if top is None:  # experiments/ is gone: so is every folder below it
            return [(folder, False, None, None, (), None) for folder in folders]
        try:
            return [scan_one(folder, top) for folder in folders]
        finally:
            os.close(top)

    def scan_one(folder: str, top: int) -> _Scanned:
        # Its names and files are looked up from experiments/ (``top``); a folder whose
        # signature changed is listed by its full path.
        path = base + folder
        # The folder's signature is taken before it is listed: an entry added in
        # between changes it again, so the listing cannot be older than the stamp.
        listed_at = folder_signature(folder or ".", top)
        known = cached.get(folder)
        if listed_at is None:
            return (folder, False, None, None, (), None)
        if known is not None and known.listed_at == listed_at:
            names: Sequence[str] = known.names
            subfolders = known.subfolders
            fresh = None
        else:
            listed = list_folder(path)
            if listed is None:
                return (folder, False, None, None, (), None)
            names, subfolders = tuple(listed[0]), tuple(listed[1])
            fresh = listed_at
        if light and fresh is None and known is not None and NO_SIGNATURE not in known.signatures:
            packed = known.signatures
        else:
            packed = signatures(folder, names, top)
        if (
            known is not None
            and known.signatures == packed
            and NO_SIGNATURE not in packed
            and (names is known.names or tuple(names) == known.names)
        ):
            return (folder, True, None, None, subfolders, fresh)
        return (folder, True, tuple(names), packed, subfolders, fresh)

    return scan


def _refresh(
    cache: Cache, experiments_dir: Path, settings: Settings, light: bool, rows: bool
) -> Listing:
    base = str(experiments_dir).rstrip(os.sep) + os.sep
    # One horizon for the whole refresh, taken before any file is read: a file changed
    # after it is not settled.
    horizon = time.time_ns() - RACY_NS
    generation: str | None = cache.generation()  # before the listing: a save changes it
    cached: dict[str, Folder] = {
        folder: Folder(*record) for folder, record in cache.folders().items()
    }
    scan = _scanner(base, cached, light)
    ordered = sorted(cached)
    sizes = [1 if light else len(cached[folder].names) + 1 for folder in ordered]
    parent = os.getpid()
    # A copy: the listing that made them may be adding more (another thread's query).
    made_earlier = dict(list(_made_before(base, settings).items()))
    made = {
        folder: earlier
        for folder, earlier in made_earlier.items()
        if folder in cached and describes(earlier, cached[folder])
    }
    repaired: dict[str, Pack] = {}

    def work(part: list[str]) -> list[_Scanned]:
        scanned = scan(part)
        if rows and os.getpid() == parent:
            # The rows of every cached folder not made already, made while the child
            # stats its half (most folders are unchanged; those that changed are made
            # again).
            unmade = [folder for folder in ordered if folder not in made]
            for folder, pack in cache.each_pack(unmade):
                made[folder] = folder_rows(base, folder, cached[folder], pack, settings, repaired)
        return scanned

    # This process also makes the rows meanwhile: the child stats more of the files.
    share = 0.35 if rows else 0.5
    scanned = {
        item[0]: item for item in in_two_processes(work, ordered, sum(sizes), sizes, share=share)
    }
    found: dict[str, _Scanned] = {}

    def visit(folder: str) -> tuple[str, ...]:
        item = scanned.get(folder) or scan([folder])[0]
        if not item[1]:
            return ()
        found[folder] = item
        return item[4]

    walk_folders(visit)

    folders: dict[str, Folder] = {}
    changed: dict[str, Folder] = {}
    to_read: list[tuple[str, bytes]] = []  # (path, signature as stat-ed)
    reused: dict[str, dict[str, tuple[bytes, int]]] = {}  # folder → name → (key, old at)
    for folder, (_, _, names, packed, subfolders, listed_at) in found.items():
        known = cached.get(folder)
        if names is None or packed is None:
            assert known is not None
            if listed_at is not None or subfolders != known.subfolders:
                known = known._replace(
                    listed_at=listed_at or known.listed_at, subfolders=subfolders
                )
                changed[folder] = known
            folders[folder] = known
            continue
        before: dict[str, tuple[bytes, bytes, int]] = {}
        if known is not None:
            for at, name in enumerate(known.names):
                before[name] = (
                    known.signatures[at * SIGNATURE_SIZE : (at + 1) * SIGNATURE_SIZE],
                    known.keys[at * KEY_SIZE : (at + 1) * KEY_SIZE],
                    at,
                )
        keep: dict[str, tuple[bytes, int]] = {}
        keys = bytearray(NO_KEY * len(names))
        for at, name in enumerate(names):
            signature = packed[at * SIGNATURE_SIZE : (at + 1) * SIGNATURE_SIZE]
            old = before.get(name)
            if old is not None and old[0] == signature and signature != NO_SIGNATURE:
                keep[name] = (old[1], old[2])
                keys[at * KEY_SIZE : (at + 1) * KEY_SIZE] = old[1]
            else:
                to_read.append((folder + name, signature))
        reused[folder] = keep
        folders[folder] = changed[folder] = Folder(
            listed_at if listed_at is not None else known.listed_at if known else NO_SIGNATURE,
            subfolders,
            names,
            packed,
            bytes(keys),
        )
    gone = [folder for folder in cached if folder not in found]

    read = _read_all(base, to_read, settings)
    packs: dict[str, Pack] = {}
    listings: dict[str, tuple[Any, ...]] = {}
    if changed:
        old_packs = cache.packs([f for f in changed if reused.get(f)])
        by_path: dict[str, tuple[bytes, bytes, Record]] = {
            path: (signature, key, record) for path, signature, key, record in read
        }
        for folder, known in changed.items():
            listings[folder] = _stored(known, horizon)
            if folder not in reused:  # only its own signature or sub-folders changed
                continue
            old_pack = pack_records(old_packs.get(folder))
            signatures_ = bytearray(known.signatures)
            keys = bytearray(known.keys)
            pack: list[Record] = []
            for at, name in enumerate(known.names):
                kept = reused[folder].get(name)
                record = old_pack.get((name, kept[0])) if kept is not None else None
                if record is not None:
                    pack.append(record)
                    continue
                done = by_path.get(folder + name)
                if done is None:
                    done = _read_one(base, folder + name, settings)[1:]
                signature, key, record = done
                signatures_[at * SIGNATURE_SIZE : (at + 1) * SIGNATURE_SIZE] = signature
                keys[at * KEY_SIZE : (at + 1) * KEY_SIZE] = key
                pack.append(record)
            known = known._replace(signatures=bytes(signatures_), keys=bytes(keys))
            folders[folder] = known
            packs[folder] = (known.names, known.keys, pack)
            listings[folder] = _stored(known, horizon)
    if listings or gone:  # the listing found is the cache's if no other save came between
        generation = cache.save_folders(listings, packs, gone, after=generation)
        if read:
            cache.remove_leftovers()
    for folder in packs:  # packs made again: their rows too
        made.pop(folder, None)
    for folder, earlier in made_earlier.items():  # a folder the cache lacked, made before
        if folder not in made and folder in folders and describes(earlier, folders[folder]):
            made[folder] = earlier
    repairs = {f: pack for f, pack in repaired.items() if f not in changed and f in folders}
    _last_made[:] = [(base, settings, made)]  # the listing's own: the rows it makes too
    return Listing(cache, base, folders, packs, made, repairs, None if light else generation)


def _stored(folder: Folder, horizon: int) -> tuple[Any, ...]:
    """A folder's listing as the cache stores it: racily clean signatures (and a folder
    listed while it was changing) as none, so that they are read again next time."""
    return (
        _storable(folder.listed_at, horizon),
        folder.subfolders,
        folder.names,
        _storable(folder.signatures, horizon),
        folder.keys,
    )


#: One file read: (path, signature as read, content key, record).
_Read = tuple[str, bytes, bytes, Record]


def _read_one(base: str, path: str, settings: Settings) -> _Read:
    """Read one file: its signature (taken before it was read), content key, record."""
    try:
        data, info = read_file_and_stat(base + path, settings)
    except (OSError, FileFormatError):
        problem = read_or_problem(base + path, settings)
        if isinstance(problem, bytes):  # readable now: changed meanwhile, read next time
            problem = problem_at(base + path, (1, 1, "unreadable", "", "changed while read", ""))
        error = (problem.line, problem.column, problem.code, problem.field, problem.message,
                 problem.hint)  # fmt: skip
        return path, NO_SIGNATURE, NO_KEY, (error, None)
    signature = array("q", (info.st_mtime_ns, info.st_size, info.st_ino, info.st_ctime_ns))
    return path, signature.tobytes(), content_key(data), named_record(data, base + path, settings)


def _read_all(base: str, items: list[tuple[str, bytes]], settings: Settings) -> list[_Read]:
    """Read the files of ``items`` (in two processes when many)."""
    # Imported here, before any fork, so that a child inherits them.
    import kexp.format.fileformat
    import kexp.format.quickcheck
    import kexp.format.validate  # noqa: F401

    def work(part: list[tuple[str, bytes]]) -> list[_Read]:
        out: list[_Read] = []
        pending = iter(part)
        gc.freeze()  # the objects made before (the rows...) are not looked at below
        try:
            while batch := list(itertools.islice(pending, READ_BATCH)):
                out.extend(_read_one(base, path, settings) for path, _ in batch)
                gc.collect(0)  # parsing leaves reference cycles, and the collector is paused
        finally:
            gc.unfreeze()
        return out

    return in_two_processes(work, items, len(items))


# --- finding names (for writes: no file is stat-ed) -------------------------------------


def find_folders(
    cache: Cache | None, experiments_dir: Path, prefix: str = ""
) -> list[tuple[str, Sequence[str]]]:
    """(folder path, its sorted experiment file names) of every folder, as they are on
    disk now (names starting with ``prefix`` at least; a file's name starts with its
    id): a folder whose own signature is the cached one holds the cached names (an id
    is in a file's name, not its content); the others are listed."""
    base = str(experiments_dir).rstrip(os.sep) + os.sep
    cached: dict[str, Any] = {}
    if cache is not None:
        try:
            cached = cache.folders()
        except DamagedCacheError:  # walk instead
            cached = {}
    found: list[tuple[str, Sequence[str]]] = []

    def visit(folder: str) -> Sequence[str]:
        path = base + folder
        stamp = folder_signature(path)
        if stamp is None:
            return ()
        known = cached.get(folder)
        if known is not None and known[0] == stamp and stamp != NO_SIGNATURE:
            names: Sequence[str] = known[2]
            subfolders: Sequence[str] = known[1]
        else:
            listed = list_folder(path, prefix)
            if listed is None:
                return ()
            names, subfolders = listed
        if names:
            found.append((path.rstrip(os.sep), names))
        return subfolders

    walk_folders(visit)
    return found


def names_starting(names: Sequence[str], prefix: str) -> Sequence[str]:
    """The names of a sorted sequence starting with ``prefix``."""
    if not prefix:
        return names
    start = bisect.bisect_left(names, prefix)
    return names[start : bisect.bisect_left(names, prefix + "\U0010ffff", start)]


def find_names(
    cache: Cache | None, experiments_dir: Path, prefix: str = ""
) -> list[tuple[str, str]]:
    """(folder path, name) of every experiment file whose name starts with ``prefix``, as
    they are on disk now (see :func:`find_folders`)."""
    return [
        (folder, name)
        for folder, names in find_folders(cache, experiments_dir, prefix)
        for name in names_starting(names, prefix)
    ]
