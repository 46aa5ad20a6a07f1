"""The store's one cache: ``.kexp/cache-<hash>.sqlite``, and the one module that opens
SQLite.

Everything kexp keeps to answer fast is in this file (git-ignored; SQLite from Python's
standard library), keyed so that it can only be current or missing, never wrong:

* ``contents``: what is parsed from a file's bytes (:func:`kexp.storage.rows.record_of`), by
  its content key (git's blob hash of the bytes), for contents found on refs;
* ``folders`` and ``packs``: the working tree, folder by folder: the names, each file's
  stat signature and content key (the listing), and the records of its files (the
  pack, read in one piece by queries that rank the whole store); both are kept in
  :data:`~kexp.storage.cachefile.PACK_GROUPS` groups of folders, a record each;
* ``objects``: what never changes once known: git trees by hash, merge bases by the
  commits they join, a ranking's answer by the listing's generation
  (:mod:`kexp.storage.answers`: every save of the listing forgets them);
* ``docs``, ``fts``, ``postings``, ``indexed``, ``shingle_order``: the retrieval index
  (:mod:`kexp.storage.retrieval`) by content key: each content's words (an FTS5 table
  holding exactly the working tree's current experiments), its code change's key and
  shingles, and the prefix of its shingles (``postings``, for near-duplicates, in the
  order of ``shingle_order``, kept in groups: :mod:`kexp.storage.postings`; posted by
  a later command than the one that added the doc: :meth:`Cache.post_pending`);
  ``indexed``: each folder's content keys as the index last took them in, and the
  stamp of the whole working tree when every folder was (a search of an unchanged tree
  compares no folder).

The file itself is :mod:`kexp.storage.cachefile`: its tables, its header (and so its
name: a kexp that could judge a file differently makes its own), every record sealed
with a CRC-32 of its key and its bytes. On any doubt (a header that is not this kexp's,
a checksum that fails, an error SQLite raises) the file is thrown away and made again
from the files (:class:`~kexp.storage.cachefile.DamagedCacheError` tells the caller to
start again); there is no other defence, and none is needed: a record can only be missing
(then its file is read) or checked. A cache that cannot be written (a store one may
read but not write, a full disk, another process holding it too long) is kept in memory
for this process; a store read at a revision has one in memory only, and writes nothing.
"""

from __future__ import annotations

import contextlib
import os
import sqlite3
import zlib
from array import array
from collections.abc import Callable, Iterable, Iterator, Sequence
from operator import itemgetter
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

from kexp.storage import postings
from kexp.storage.cachefile import (
    FTS_TOKENIZER,
    DamagedCacheError,
    create_tables,
    file_name,
    group_key,
    header,
    header_of,
    pack_group,
    seal,
    unseal,
)
from kexp.storage.doctext import fts_phrase
from kexp.storage.leftovers import remove_unused_caches
from kexp.storage.names import folder_name, stored_name

if TYPE_CHECKING:
    from kexp.core.settings import Settings

#: A file changed this recently (ns) when it was read is read again next time: it may
#: change again within its timestamps' granularity without a new signature.
RACY_NS = 2_000_000_000
#: Seconds a write waits for another process's write to end; then this process keeps
#: what it would have written in memory.
BUSY_TIMEOUT_S = 5.0
#: Rows asked of SQLite at once by their keys.
_CHUNK = 500
#: The retrieval index's FTS columns (their weights: kexp.storage.retrieval.COLUMN_WEIGHTS).
FTS_COLUMNS = (
    "summary",
    "description",
    "insight",
    "operator",
    "code",
    "summary_numbers",
    "insight_numbers",
    "code_numbers",
)


#: The term each word asked of :func:`index_terms` is kept as, up to this many words.
_TERMS: dict[str, str] = {}
_TERMS_SIZE = 1 << 16


def index_terms(words: Sequence[str]) -> dict[str, str]:
    """The term the FTS table keeps each word (one token: :func:`fts_phrase`'s) as: its
    Porter stem (``tiling``, ``tiled``: ``tile``), as the table's tokenizer makes it
    (``FTS_TOKENIZER``, asked in a table in memory)."""
    missing = [word for word in dict.fromkeys(words) if word not in _TERMS]
    if missing:
        connection = sqlite3.connect(":memory:")
        try:
            connection.execute(
                f"CREATE VIRTUAL TABLE words USING fts5(word, tokenize = '{FTS_TOKENIZER}')"
            )
            connection.execute("CREATE VIRTUAL TABLE terms USING fts5vocab(words, instance)")
            connection.executemany(
                "INSERT INTO words (rowid, word) VALUES (?, ?)", enumerate(missing)
            )
            found = dict(connection.execute("SELECT doc, term FROM terms WHERE offset = 0"))
        finally:
            connection.close()
        if len(_TERMS) + len(missing) > _TERMS_SIZE:
            _TERMS.clear()
        for number, word in enumerate(missing):
            _TERMS[word] = str(found.get(number, word))
    return {word: _TERMS[word] for word in words}


class StaleComparisonError(DamagedCacheError):
    """Another process wrote the folders' records of the FTS table since this one
    compared them: the changes it found may be applied already (compare again; a cache
    that never settles is rebuilt)."""


#: The key the order of the postings is sealed under.
_ORDER_KEY = b"shingle order"


def forget_answers(folder: Path, settings: Settings) -> None:
    """Forget the answers kept in the cache file in ``folder`` (a store's ``.kexp/``),
    when there is one (:meth:`Cache.forget_answers`): none is made, and a link is never
    written through."""
    file = folder / file_name(settings)
    if folder.is_symlink() or file.is_symlink() or not file.is_file():
        return
    cache = Cache(folder, settings)
    try:
        cache.forget_answers()
    finally:
        cache.close()


class Cache:
    """One store's cache (see the module documentation). ``folder`` None: in memory."""

    def __init__(self, folder: Path | None, settings: Settings) -> None:
        self.settings = settings
        self.header = header(settings)
        self.file = None if folder is None else folder / file_name(settings)
        #: Whether this process keeps the cache in memory (nothing is written to disk).
        self.in_memory = folder is None
        self._connection = self._open()
        #: When the folders' records of each kind were last read (see _save_indexed).
        self._compared: dict[str, tuple[int, int]] = {}
        #: The numbers of the docs this object added (see :meth:`post_pending`).
        self._made_docs: set[int] = set()

    def _open(self) -> sqlite3.Connection:
        """The cache file, made (or made again) when it is missing or not this kexp's;
        in memory when the folder cannot be used."""
        if self.file is not None and not self.in_memory:
            for _ in range(2):
                try:
                    connection = sqlite3.connect(
                        self.file, timeout=BUSY_TIMEOUT_S, isolation_level=None
                    )
                except (sqlite3.Error, OSError):
                    break
                try:
                    found = header_of(connection)
                    if found == self.header:
                        return connection
                    if found is None and create_tables(connection, self.header):
                        return connection
                except sqlite3.Error:
                    pass
                connection.close()
                if not self._remove():
                    break
            self.in_memory = True
        connection = sqlite3.connect(":memory:", isolation_level=None)
        create_tables(connection, self.header)
        return connection

    def _remove(self) -> bool:
        """Remove the cache file (and what SQLite keeps beside it); whether it is gone."""
        assert self.file is not None
        for suffix in ("", "-journal", "-wal", "-shm"):
            with contextlib.suppress(FileNotFoundError):
                try:
                    os.unlink(f"{self.file}{suffix}")
                except OSError:
                    return False
        return True

    def rebuild(self) -> None:
        """Throw the cache away and start again from nothing (the file is removed; a
        file that cannot be removed is left, and the cache kept in memory)."""
        self.close()
        if self.file is not None and not self.in_memory and not self._remove():
            self.in_memory = True
        self._connection = self._open()
        self._made_docs = set()

    def close(self) -> None:
        """Close the cache."""
        with contextlib.suppress(sqlite3.Error):
            self._connection.close()

    def to_memory(self) -> None:
        """Keep the cache in memory from now on (a copy of what the file holds), for a
        write that cannot be made to the file."""
        if self.in_memory:
            return
        memory = sqlite3.connect(":memory:", isolation_level=None)
        try:
            self._connection.backup(memory)
            if header_of(memory) != self.header:
                raise sqlite3.DatabaseError("not this kexp's cache")
        except sqlite3.Error:
            memory.close()
            memory = sqlite3.connect(":memory:", isolation_level=None)
            create_tables(memory, self.header)
        self.close()
        self._connection = memory
        self.in_memory = True

    def remove_leftovers(self) -> None:
        """Remove the caches no process uses any more (:func:`remove_unused_caches`)."""
        if self.file is not None and not self.in_memory:
            remove_unused_caches(self.file, self.settings)

    # --- reading and writing -----------------------------------------------------------

    def _rows(self, sql: str, parameters: Sequence[Any] = ()) -> list[Any]:
        try:
            return self._connection.execute(sql, parameters).fetchall()
        except (sqlite3.Error, ValueError, OverflowError) as exc:
            raise DamagedCacheError(str(exc)) from None

    def _by_keys(self, sql: str, keys: Sequence[Any]) -> Iterator[Any]:
        """The rows of ``sql`` (holding ``IN ({marks})``) for every key, in chunks."""
        for start in range(0, len(keys), _CHUNK):
            chunk = list(keys[start : start + _CHUNK])
            yield from self._rows(sql.format(marks=",".join("?" * len(chunk))), chunk)

    def _transaction(self, work: Callable[[], None], *, at_once: bool = False) -> None:
        """``work()`` in one write transaction; when the file cannot take it (another
        process holds it too long, a read-only file, a full disk), in memory instead
        (:meth:`to_memory`): this process keeps what it would have written. ``at_once``:
        only if the file takes the write without waiting, else nothing is written.
        Within a transaction already (:meth:`transient`), ``work()`` is part of it."""
        if self._connection.in_transaction:
            work()
            return
        if at_once:
            self._connection.execute("PRAGMA busy_timeout = 0")
        try:
            self._transact(work, at_once)
        finally:
            if at_once:
                with contextlib.suppress(sqlite3.Error):
                    timeout = int(BUSY_TIMEOUT_S * 1000)
                    self._connection.execute(f"PRAGMA busy_timeout = {timeout}")

    def _transact(self, work: Callable[[], None], at_once: bool) -> None:
        for _ in range(2):
            try:
                self._connection.execute("BEGIN IMMEDIATE")
                work()
                self._connection.execute("COMMIT")
                return
            except (_CannotWrite, sqlite3.OperationalError) as exc:
                with contextlib.suppress(sqlite3.Error):
                    self._connection.execute("ROLLBACK")
                if at_once:
                    return
                if self.in_memory:
                    raise DamagedCacheError(str(exc)) from None
                self.to_memory()
            except sqlite3.Error as exc:
                with contextlib.suppress(sqlite3.Error):
                    self._connection.execute("ROLLBACK")
                raise DamagedCacheError(str(exc)) from None
            except BaseException:
                with contextlib.suppress(sqlite3.Error):
                    self._connection.execute("ROLLBACK")
                raise

    def _write(self, sql: str, rows: Iterable[Sequence[Any]]) -> None:
        try:
            self._connection.executemany(sql, rows)
        except sqlite3.OperationalError as exc:
            if any(word in str(exc) for word in ("full", "readonly", "locked", "busy")):
                raise _CannotWrite() from None
            raise DamagedCacheError(str(exc)) from None
        except (sqlite3.Error, ValueError, OverflowError) as exc:
            raise DamagedCacheError(str(exc)) from None

    def write(self, *writes: tuple[str, Sequence[Sequence[Any]]]) -> None:
        """Run ``(sql, rows)`` writes in one transaction (see :meth:`_transaction`)."""

        def work() -> None:
            for sql, rows in writes:
                self._write(sql, rows)

        self._transaction(work)

    # --- the working tree: folders and packs ---------------------------------------------

    def generation(self) -> str:
        """A token that every save of the listing (:meth:`save_folders`) changes."""
        found = self._rows("SELECT value FROM meta WHERE key = 'generation'")
        return str(found[0][0]) if found else ""

    def folders(self) -> dict[str, Any]:
        """Every folder's listing, as :meth:`save_folders` stored it."""
        found: dict[str, Any] = {}
        for group, record in self._groups("folders", None):
            found.update(unseal(group_key("folders", group), record))
        return found

    def _groups(self, table: str, groups: Sequence[int] | None) -> Iterator[tuple[int, bytes]]:
        """(group, sealed record) of each of ``groups`` of ``table`` (``folders``,
        ``packs``, ``postings``: records kept in groups) that has one (None: every one, a few at a
        time: memory holds a few groups' bytes at once)."""
        if groups is not None:
            sql = f"SELECT grp, record FROM {table} WHERE grp IN ({{marks}})"
            yield from self._by_keys(sql, groups)
            return
        try:
            cursor = self._connection.execute(f"SELECT grp, record FROM {table}")
            while found := cursor.fetchmany(8):
                yield from found
        except (sqlite3.Error, ValueError) as exc:
            raise DamagedCacheError(str(exc)) from None

    def each_pack(self, folders: Sequence[str]) -> Iterator[tuple[str, Any]]:
        """(folder, pack) of each of ``folders`` that has one, in no particular order;
        a few groups read at once when many are asked for, else only theirs."""
        wanted = set(folders)
        groups = None if len(wanted) > _CHUNK else sorted({pack_group(f) for f in wanted})
        for group, record in self._groups("packs", groups):
            for folder, pack in unseal(group_key("packs", group), record).items():
                if folder in wanted:
                    yield folder, pack

    def packs(self, folders: Sequence[str]) -> dict[str, Any]:
        """The pack (the records of its files) of each of ``folders`` that has one."""
        return dict(self.each_pack(folders))

    def packs_naming(self, folders: dict[str, bytes], needle: bytes) -> dict[str, Any]:
        """The pack of each of ``folders`` (→ the content keys of its files now, as the
        listing holds them) that has one: None for those that certainly hold no record
        naming ``needle`` (their group's bytes hold every one of these content keys, and
        not ``needle``), which are not read."""
        by_group: dict[int, list[str]] = {}
        for folder in folders:
            by_group.setdefault(pack_group(folder), []).append(folder)
        found: dict[str, Any] = {}
        for group, record in self._groups("packs", sorted(by_group)):
            key = group_key("packs", group)
            members = by_group[group]
            if (
                isinstance(record, bytes)
                and needle not in record
                and all(folders[folder] in record for folder in members)
                and zlib.crc32(record[4:], zlib.crc32(key)) == int.from_bytes(record[:4], "little")
            ):
                found.update(dict.fromkeys(members))
                continue
            packs = unseal(key, record)
            found.update({folder: packs[folder] for folder in members if folder in packs})
        return found

    def save_folders(
        self, listings: dict[str, Any], packs: dict[str, Any], gone: Iterable[str], *,
        at_once: bool = False, after: str | None = None,
    ) -> str | None:  # fmt: skip
        """Store the listing of each folder of ``listings`` and the pack of each of
        ``packs``; forget the ``gone`` folders (``at_once``: see :meth:`_transaction`).
        The groups changed are read and written again in the same transaction: another
        process's folders in a group are kept. A new :meth:`generation`: returned
        if ``after`` was the one before (no other save in between), else None."""
        gone = list(gone)
        made: list[str | None] = [None]

        def work() -> None:
            # A new generation: the answers kept for the listing before it are forgotten.
            token = os.urandom(8).hex()
            made[0] = token if after is not None and self.generation() == after else None
            self._write("INSERT OR REPLACE INTO meta VALUES ('generation', ?)", [(token,)])
            self._forget_answers()
            self._regroup("folders", listings, gone)
            self._regroup("packs", packs, gone)

        self._transaction(work, at_once=at_once)
        return made[0]

    def forget_answers(self) -> None:
        """Forget every answer kept (:mod:`kexp.storage.answers`), if the file takes the
        write without waiting: kexp wrote an experiment file, so none is the files' now
        (a cache that cannot take it keeps them: each is taken only at its generation)."""
        with contextlib.suppress(sqlite3.Error):
            self._transaction(self._forget_answers, at_once=True)

    def _forget_answers(self) -> None:
        self._write("DELETE FROM objects WHERE name >= 'answer:' AND name < 'answer;'", [()])

    def _regroup(self, table: str, values: dict[str, Any], gone: list[str]) -> None:
        """Write ``values`` (folder → value) into the groups of ``table`` (``folders``,
        ``packs``) and take the ``gone`` folders out, each group read again within the
        transaction: another process's folders in a group are kept."""
        touched = sorted({pack_group(folder) for folder in (*values, *gone)})
        groups: dict[int, dict[str, Any]] = {group: {} for group in touched}
        for group, record in self._groups(table, touched):
            groups[group] = unseal(group_key(table, group), record)
        for folder in gone:
            groups[pack_group(folder)].pop(folder, None)
        for folder, value in values.items():
            groups[pack_group(folder)][folder] = value
        emptied = [(group,) for group, members in groups.items() if not members]
        kept = [(g, seal(group_key(table, g), m)) for g, m in groups.items() if m]
        self._write(f"DELETE FROM {table} WHERE grp = ?", emptied)
        self._write(f"INSERT OR REPLACE INTO {table} VALUES (?, ?)", kept)

    # --- contents and objects ----------------------------------------------------------

    def contents(self, keys: Sequence[bytes]) -> dict[bytes, Any]:
        """The records kept of those contents the cache holds."""
        sql = "SELECT key, record FROM contents WHERE key IN ({marks})"
        return {key: unseal(key, record) for key, record in self._by_keys(sql, keys)}

    def save_contents(self, records: dict[bytes, Any]) -> None:
        """Keep the records of contents (a record never changes: its key is its bytes)."""
        sealed = [(key, seal(key, value)) for key, value in records.items()]
        if sealed:
            self.write(("INSERT OR REPLACE INTO contents VALUES (?, ?)", sealed))

    def objects(self, names: Sequence[str]) -> dict[str, Any]:
        """What is kept of the immutable objects named (git trees, merge bases...)."""
        sql = "SELECT name, record FROM objects WHERE name IN ({marks})"
        return {name: unseal(name.encode(), record) for name, record in self._by_keys(sql, names)}

    def save_objects(
        self, values: dict[str, Any], *, at_once: bool = False, replacing: str = ""
    ) -> None:
        """Keep immutable objects by name (``at_once``: see :meth:`_transaction`),
        forgetting first, in the same transaction, every object whose name starts with
        ``replacing`` (when given: what these values supersede)."""
        sealed = [(name, seal(name.encode(), value)) for name, value in values.items()]
        sql = "INSERT OR REPLACE INTO objects VALUES (?, ?)"

        def write() -> None:
            if replacing:  # the names from the prefix up to its last character's next
                end = replacing[:-1] + chr(ord(replacing[-1]) + 1)
                self._write("DELETE FROM objects WHERE name >= ? AND name < ?", [(replacing, end)])
            self._write(sql, sealed)

        if sealed:
            self._transaction(write, at_once=at_once)

    # --- the retrieval index -----------------------------------------------------------

    def docs(self, keys: Sequence[bytes]) -> dict[bytes, tuple[int, int, bytes | None]]:
        """(doc number, active count, the words kept of its FTS columns or None) of the
        contents with a doc."""
        found: dict[bytes, tuple[int, int, bytes | None]] = {}
        for doc, key, active, texts in self._by_keys(
            "SELECT doc, key, active, texts FROM docs WHERE key IN ({marks})", keys
        ):
            found[key] = (doc, active, None if texts is None else unseal(key, texts))
        return found

    def with_docs(self, keys: Sequence[bytes]) -> set[bytes]:
        """Those of ``keys`` that have a doc."""
        return {
            key for (key,) in self._by_keys("SELECT key FROM docs WHERE key IN ({marks})", keys)
        }

    def shingles_of(self, keys: Sequence[bytes]) -> dict[bytes, bytes]:
        """The shingles (uint32) of the code change of each of ``keys`` with a doc."""
        sql = "SELECT key, shingles FROM docs WHERE key IN ({marks})"
        return {key: unseal(key, record) for key, record in self._by_keys(sql, keys)}

    def keys_of_docs(self, docs: Sequence[int]) -> dict[int, bytes]:
        """The content key of each of ``docs``."""
        return dict(self._by_keys("SELECT doc, key FROM docs WHERE doc IN ({marks})", docs))

    def add_docs(
        self, docs: Sequence[tuple[bytes, bytes | None, bytes | None, bytes, bytes | None]]
    ) -> None:
        """Add docs, none active and none posted: (content key, code key, changed lines'
        key, shingles as uint32, the words of its FTS columns to keep or None: they can be
        made again).
        Their postings are made by a later command (see :meth:`post_pending`)."""
        if not docs:
            return
        numbers: list[int] = []

        def work() -> None:
            (last,) = self._rows("SELECT COALESCE(MAX(doc), 0) FROM docs")[0]
            known = {key for (key,) in self._by_keys(
                "SELECT key FROM docs WHERE key IN ({marks})", [d[0] for d in docs])}  # fmt: skip
            rows: list[tuple[Any, ...]] = []
            for key, code_key, lines_key, shingles, texts in docs:
                if key in known:
                    continue
                known.add(key)
                rows.append(
                    (last + len(rows) + 1, key, code_key, lines_key, len(shingles) // 4,
                     seal(key, shingles), 0, None if texts is None else seal(key, texts))
                )  # fmt: skip
            numbers[:] = [row[0] for row in rows]
            if rows:
                self._write("INSERT INTO docs VALUES (?, ?, ?, ?, ?, ?, ?, ?)", rows)

        self._transaction(work)
        self._made_docs.update(numbers)

    def _post(self) -> None:
        """Post every doc not posted yet: the prefix of its shingles for the settings'
        ``near_duplicate_similarity`` (:func:`kexp.storage.doctext.shingle_prefix`).

        The order (shingle → how many docs held it when it was decided; a shingle not
        in it counts 0) is decided from every doc's shingles the first time, and again
        (every prefix posted again) whenever the docs have doubled since: prefixes made
        of the rarest shingles share few docs (prefix filtering is exact in any one
        order; a rare-first order makes it fast)."""
        decided, posted, order = self._shingle_order()
        pending = [
            (doc, array("I", unseal(key, record)))
            for doc, key, record in self._rows(
                "SELECT doc, key, shingles FROM docs WHERE doc > ?", (posted,)
            )
        ]
        if not pending:
            return
        (total,) = self._rows("SELECT COUNT(*) FROM docs")[0]
        to_post = pending
        anew = total >= 2 * decided
        if anew:
            to_post = [
                (doc, array("I", unseal(key, record)))
                for doc, key, record in self._rows("SELECT doc, key, shingles FROM docs")
            ]
            order = postings.order_of(shingles for _, shingles in to_post)
            decided = total
            self._write("DELETE FROM postings", [()])
        from kexp.storage.doctext import shingle_prefix

        threshold = self.settings.near_duplicate_similarity
        groups = postings.posted(to_post, lambda held: shingle_prefix(held, threshold, order))
        if not anew:  # read within this transaction: another process's postings kept
            for group, kept in self._posting_groups(sorted(groups)):
                groups[group] = postings.merged(kept, groups[group])
        self._write(
            "INSERT OR REPLACE INTO postings VALUES (?, ?)",
            [
                (g, seal(group_key("postings", g), entries.tobytes()))
                for g, entries in groups.items()
            ],
        )
        self._write("DELETE FROM shingle_order", [()])
        self._write(
            "INSERT INTO shingle_order VALUES (?, ?, ?)",
            [(decided, max(doc for doc, _ in pending), seal(_ORDER_KEY, order))],
        )

    def _posting_groups(self, groups: Sequence[int]) -> Iterator[tuple[int, array[int]]]:
        """(group, its postings) of each of ``groups`` that has any."""
        for group, record in self._groups("postings", groups):
            yield group, array("Q", unseal(group_key("postings", group), record))

    def _shingle_order(self) -> tuple[int, int, dict[int, int]]:
        """(how many docs there were when the order of the postings was decided, the
        last doc posted, the order: see :meth:`_post`)."""
        found = self._rows("SELECT decided, posted, record FROM shingle_order")
        if not found:
            return 0, 0, {}
        decided, posted, record = found[0]
        return int(decided), int(posted), unseal(_ORDER_KEY, record)

    def _data_version(self) -> tuple[int, int]:
        """What changes when another connection commits to the cache file (the
        connection, and SQLite's ``data_version`` of it)."""
        return id(self._connection), self._rows("PRAGMA data_version")[0][0]

    def indexed(self, kind: str) -> dict[str, bytes]:
        """Each folder's content keys as the retrieval index last took them in: ``docs``
        (those with a doc) or ``fts`` (those the FTS table holds)."""
        self._compared[kind] = self._data_version()
        prefix = f"{kind}:"
        return {
            folder_name(stored[len(prefix) :]): unseal(stored.encode(), record)
            for stored, record in self._rows(
                "SELECT folder, record FROM indexed WHERE folder >= ? AND folder < ?",
                (prefix, f"{kind};"),
            )
        }

    def indexed_whole(self, kind: str) -> bytes | None:
        """The stamp of the whole working tree whose every folder the retrieval index
        last took in (``kind`` as for :meth:`indexed`); None when there is none (a
        folder was left to compare next time, or its folders' records were written
        without one)."""
        name = f"{kind}!"
        found = self._rows("SELECT record FROM indexed WHERE folder = ?", (name,))
        return unseal(name.encode(), found[0][0]) if found else None

    def save_indexed(
        self, kind: str, folders: dict[str, bytes | None], whole: bytes | None = None
    ) -> None:
        """Store the folders' keys as :meth:`indexed` gives them (None: forget one), and
        the stamp of the whole working tree they make up (``whole``; None: forget it)."""
        if folders or whole is not None:
            self._transaction(lambda: self._save_indexed(kind, folders, whole))

    def keep_whole(self, kind: str, whole: bytes) -> None:
        """Store the whole tree's stamp beside folders' records found current (see
        :meth:`save_indexed`) when the file takes a write at once: nothing waits for
        it, and a file that cannot take it now (another process writing, a read-only
        file) is left as it is, for a later query to store it."""
        self._transaction(lambda: self._save_indexed(kind, {}, whole), at_once=True)

    def _save_indexed(
        self, kind: str, folders: dict[str, bytes | None], whole: bytes | None = None
    ) -> None:
        # The whole's stamp is written or forgotten with every change of its folders',
        # and forgotten when another process wrote since they were compared (the folders
        # this one did not change may hold what that one saw).
        if whole is not None and self._compared.get(kind) != self._data_version():
            whole = None
        whole_name = f"{kind}!"
        self._write("DELETE FROM indexed WHERE folder = ?", [(whole_name,)])
        if whole is not None:
            self._write(
                "INSERT INTO indexed VALUES (?, ?)",
                [(whole_name, seal(whole_name.encode(), whole))],
            )
        names = {folder: f"{kind}:{stored_name(folder)}" for folder in folders}
        self._write(
            "DELETE FROM indexed WHERE folder = ?",
            [(names[f],) for f, keys in folders.items() if keys is None],
        )
        self._write(
            "INSERT OR REPLACE INTO indexed VALUES (?, ?)",
            [
                (names[f], seal(names[f].encode(), keys))
                for f, keys in folders.items()
                if keys is not None
            ],
        )

    def activate(
        self,
        changes: dict[bytes, int],
        texts: dict[bytes, tuple[int, Sequence[str]]],
        folders: dict[str, bytes | None] | None = None,
        whole: bytes | None = None,
        *,
        compared: bool = False,
    ) -> None:
        """Add ``changes[key]`` (±) to each doc's active count, putting a doc into the FTS
        table when its count leaves 0 and taking it out when it comes back to 0
        (``texts``: each changed doc's number and words); store the folders' indexed
        keys (None: the folder is gone) and the whole's stamp (see :meth:`save_indexed`).
        ``compared``: the changes come from the folders' records as :meth:`indexed` read
        them, and raise :class:`StaleComparisonError` (nothing written) when another
        process wrote since. Within :meth:`transient`, undone at its end."""

        def work() -> None:
            if compared and self._compared.get("fts") != self._data_version():
                raise StaleComparisonError("the FTS table changed since it was compared")
            self._activate(changes, texts, folders or {}, whole)

        self._transaction(work)

    def _activate(
        self,
        changes: dict[bytes, int],
        texts: dict[bytes, tuple[int, Sequence[str]]],
        folders: dict[str, bytes | None],
        whole: bytes | None,
    ) -> None:
        counts = {key: active for key, (_, active, _) in self.docs(list(changes)).items()}
        inserts: list[tuple[Any, ...]] = []
        deletes: list[tuple[Any, ...]] = []
        updates: list[tuple[int, int | None, bytes]] = []
        for key, change in changes.items():
            before = counts.get(key)
            if before is None or not change:
                continue
            after = max(0, before + change)
            if (before == 0) != (after == 0):
                doc, words = texts[key]
                (inserts if before == 0 else deletes).append((doc, *words))
            updates.append((after, texts[key][0] if key in texts else None, key))
        # In rowid order: FTS5 writes its pending terms out as a new segment whenever a
        # rowid is not above the last one (the docs came in any order: 4x slower).
        inserts.sort(key=itemgetter(0))
        deletes.sort(key=itemgetter(0))
        columns = ", ".join(FTS_COLUMNS)
        marks = ", ".join("?" * len(FTS_COLUMNS))
        self._write(
            f"INSERT INTO fts (fts, rowid, {columns}) VALUES ('delete', ?, {marks})", deletes
        )
        self._write(f"INSERT INTO fts (rowid, {columns}) VALUES (?, {marks})", inserts)
        self._write("UPDATE docs SET active = ? WHERE key = ?", [(a, k) for a, _, k in updates])
        self._save_indexed("fts", folders, whole)

    def clear_texts_index(self) -> None:
        """Empty the FTS table (every doc inactive, no folder indexed), to fill it again
        from the files (when the words of a doc to take out cannot be had)."""

        def work() -> None:
            self._write("INSERT INTO fts (fts) VALUES ('delete-all')", [()])
            self._write("UPDATE docs SET active = 0 WHERE active > 0", [()])
            self._write("DELETE FROM indexed WHERE folder >= 'fts:' AND folder < 'fts;'", [()])
            self._write("DELETE FROM indexed WHERE folder = 'fts!'", [()])

        self._transaction(work)

    @contextlib.contextmanager
    def transient(self) -> Iterator[None]:
        """A transaction whose writes (an FTS table holding another set of docs than the
        working tree's) are undone at its end."""
        try:
            self._connection.execute("BEGIN IMMEDIATE")
        except sqlite3.Error:
            self.to_memory()
            self._connection.execute("BEGIN IMMEDIATE")
        try:
            yield
        finally:
            with contextlib.suppress(sqlite3.Error):
                self._connection.execute("ROLLBACK")

    def word_counts(self, words: Sequence[str]) -> dict[str, int]:
        """How many docs of the FTS table hold each word (where :func:`fts_phrase` asks
        for it)."""
        counts: dict[str, int] = {}
        for word in words:
            phrase = fts_phrase(word)
            (count,) = self._rows("SELECT COUNT(*) FROM fts WHERE fts MATCH ?", (phrase,))[0]
            counts[word] = int(count)
        return counts

    def text_matches(
        self, words: Sequence[str], weights: Sequence[float]
    ) -> list[tuple[int, float]]:
        """(doc, BM25: higher is better) of every doc of the FTS table holding one of
        ``words`` (where :func:`fts_phrase` asks for it), best first."""
        if not words:
            return []
        expression = " OR ".join(fts_phrase(word) for word in words)
        weighted = ", ".join(str(w) for w in weights)
        return [
            (int(doc), -float(rank))
            for doc, rank in self._rows(
                f"SELECT rowid, bm25(fts, {weighted}) AS rank FROM fts WHERE fts MATCH ? "
                "ORDER BY rank, rowid",
                (expression,),
            )
        ]

    def post_pending(self) -> None:
        """Post the docs other commands added and did not post (:meth:`_post`); not
        those this object added (a question compares them as they are: the first one
        after a clone, which adds a doc for every experiment, does not also wait for
        their postings), and none within a transaction (a transient one would undo
        them)."""
        if self._connection.in_transaction:
            return
        posted = self._shingle_order()[1]
        pending = {doc for (doc,) in self._rows("SELECT doc FROM docs WHERE doc > ?", (posted,))}
        if pending - self._made_docs:
            self._transaction(self._post)

    def near_candidates(
        self, prefix_of: Callable[[dict[int, int]], Sequence[int]], least: int, most: int
    ) -> list[tuple[bytes, bytes]]:
        """(content key, shingles as uint32) of the docs holding between ``least`` and
        ``most`` shingles that post a shingle of the prefix ``prefix_of(order)`` (in
        the order of the postings, see :meth:`_post`), and of every doc not posted
        (see :meth:`post_pending`). The order, the postings and the docs are read in
        one transaction."""
        began = not self._connection.in_transaction
        if began:
            self._rows("BEGIN")
        try:
            _, posted, order = self._shingle_order()
            prefix = prefix_of(order)
            groups = dict(self._posting_groups(sorted({postings.group_of(s) for s in prefix})))
            docs: set[int] = set()
            for shingle in prefix:
                if (group := groups.get(postings.group_of(shingle))) is not None:
                    docs.update(postings.docs_posting(group, shingle))
            found = self._rows(
                "SELECT key, shingles FROM docs WHERE doc > ? AND shingle_count BETWEEN ? AND ?",
                (posted, least, most),
            )
            ordered = sorted(docs)
            for start in range(0, len(ordered), _CHUNK):
                chunk = ordered[start : start + _CHUNK]
                marks = ",".join("?" * len(chunk))
                found += self._rows(
                    f"SELECT key, shingles FROM docs WHERE doc IN ({marks}) "
                    "AND shingle_count BETWEEN ? AND ?",
                    [*chunk, least, most],
                )
        finally:
            if began:
                with contextlib.suppress(sqlite3.Error):
                    self._connection.execute("COMMIT")
        return [(key, unseal(key, record)) for key, record in dict(found).items()]

    def code_keys(self, code_key: bytes) -> list[bytes]:
        """The content keys of the docs whose code change has this key."""
        return [
            key for (key,) in self._rows("SELECT key FROM docs WHERE code_key = ?", (code_key,))
        ]

    def lines_keys(self, lines_key: bytes) -> list[bytes]:
        """The content keys of the docs whose code change's changed lines have this key
        (:func:`kexp.storage.dedupe.lines_key_of_normalized`)."""
        sql = "SELECT key FROM docs WHERE lines_key = ?"
        return [key for (key,) in self._rows(sql, (lines_key,))]


_T = TypeVar("_T")


def rebuilt_on_doubt(cache: Cache, work: Callable[[Cache], _T]) -> tuple[Cache, _T]:
    """``work(cache)``; when it finds the cache damaged, again after
    :meth:`Cache.rebuild`, and then once more on a cache in memory: a cache in doubt is
    rebuilt, never trusted and never fatal. Returns the cache the work was done on (the
    caller closes it) and what the work returned."""
    try:
        return cache, work(cache)
    except DamagedCacheError:
        cache.rebuild()
    try:
        return cache, work(cache)
    except DamagedCacheError:
        cache.close()
    memory = Cache(None, cache.settings)
    return memory, work(memory)


class _CannotWrite(Exception):
    """The file refused a write it could take later (busy, full, read-only)."""
