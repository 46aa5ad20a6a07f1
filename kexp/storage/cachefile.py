"""The cache file (:mod:`kexp.storage.cache`) as it lies on disk: its tables, its header
row (and so its name), its records sealed with a checksum, and the groups folders are
kept in.

The hash in the file name is that of the header row: the layout, kexp's version, a hash
of kexp's library sources and of the schema (:func:`code_fingerprint`) and the
settings; a kexp that could judge a file differently never reads this file, it makes
its own. Every record carries a CRC-32 of its key and its bytes (:func:`seal`); one
whose checksum fails is :class:`DamagedCacheError` (:func:`unseal`).
"""

from __future__ import annotations

import contextlib
import hashlib
import marshal
import os
import sqlite3
import zlib
from pathlib import Path
from typing import TYPE_CHECKING, Any

from kexp.core.version import __version__
from kexp.format.schema import schema_path

if TYPE_CHECKING:
    from kexp.core.settings import Settings

#: The cache's layout; part of its header (and so of its file name). 7: the code keys
#: and shingles of the docs are taken without comments (kexp.storage.dedupe). 8: the
#: FTS table's numbers column (kexp.storage.doctext.fts_phrase). 9: three numbers columns,
#: one for each place the numbers are taken from (summary, key insight, code). 10: sizes
#: written as dimensions (``128x64``) are their numbers (kexp.storage.doctext.numbers_of).
#: 11: descriptions without their bold labels (``**Key insight**:``). 12: an answer kept
#: holds what is derived with an env's A/A controls keyed in kexp's spelling
#: (kexp.core.spelling.campaign_key: a control on ROCm-6.2 judges the steps on ROCm 6.2;
#: nvidia-smi's name of a GPU is its model's). 13: campaign keys keep an operator's case
#: (kexp.core.spelling.spelled: k.py:Gemm and k.py:gemm are two kernels).
LAYOUT = "kexp-cache/13"

#: The FTS table's tokenizer: what a word is, and the term (its Porter stem) it is kept
#: as (:func:`kexp.storage.cache.index_terms` asks it of a query's words).
FTS_TOKENIZER = "porter unicode61"


_SCHEMA = (
    "CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL)",
    # The folders' listings and packs in groups (see pack_group): a group's record maps
    # folder → its listing (folders) or its pack (packs).
    "CREATE TABLE folders (grp INTEGER PRIMARY KEY, record BLOB NOT NULL)",
    "CREATE TABLE packs (grp INTEGER PRIMARY KEY, record BLOB NOT NULL)",
    "CREATE TABLE contents (key BLOB PRIMARY KEY, record BLOB NOT NULL) WITHOUT ROWID",
    "CREATE TABLE objects (name TEXT PRIMARY KEY, record BLOB NOT NULL) WITHOUT ROWID",
    # The retrieval index: one doc per content key; 'active' counts the working-tree
    # files holding it (the FTS table holds exactly the active docs); 'texts' the words
    # of its FTS columns when git cannot give the content back (they are needed to take
    # a doc out of the contentless FTS table).
    """CREATE TABLE docs (
        doc INTEGER PRIMARY KEY, key BLOB NOT NULL UNIQUE, code_key BLOB, lines_key BLOB,
        shingle_count INTEGER NOT NULL, shingles BLOB NOT NULL, active INTEGER NOT NULL,
        texts BLOB
    )""",
    "CREATE INDEX docs_by_code ON docs (code_key) WHERE code_key IS NOT NULL",
    "CREATE INDEX docs_by_lines ON docs (lines_key) WHERE lines_key IS NOT NULL",
    # The postings in groups by shingle (see kexp.storage.postings): a sorted array each.
    "CREATE TABLE postings (grp INTEGER PRIMARY KEY, record BLOB NOT NULL)",
    "CREATE TABLE indexed (folder TEXT PRIMARY KEY, record BLOB NOT NULL)",
    # The order of the shingles in the prefixes posted, and the last doc posted (see
    # Cache.post_pending): one row.
    "CREATE TABLE shingle_order (decided INTEGER NOT NULL, posted INTEGER NOT NULL, "
    "record BLOB NOT NULL)",
    "CREATE VIRTUAL TABLE fts USING fts5(summary, description, insight, operator, code, "
    f"summary_numbers, insight_numbers, code_numbers, tokenize = '{FTS_TOKENIZER}', "
    "content = '')",
)


class DamagedCacheError(Exception):
    """The cache failed a check (a checksum, an SQLite error): the caller starts again
    after :meth:`kexp.storage.cache.Cache.rebuild`."""


_FINGERPRINT: list[str] = []


def code_fingerprint() -> str:
    """A hash of what decides what the cache holds: the source of every module of the
    ``kexp`` package (parsing, checks, this layout) and the schema file. Two builds of
    one version (an edited schema, a ``git pull`` of kexp) get different caches."""
    if not _FINGERPRINT:
        digest = hashlib.blake2b(digest_size=8)
        package = Path(__file__).resolve().parent.parent
        for path in [*sorted(package.rglob("*.py")), schema_path()]:
            digest.update(str(path.relative_to(package.parent)).encode() + b"\0")
            try:
                digest.update(path.read_bytes())
            except OSError:
                digest.update(b"\0unreadable\0")
        _FINGERPRINT.append(digest.hexdigest())
    return _FINGERPRINT[0]


def header(settings: Settings) -> str:
    """The header row: what a cache file must have been written by to be read."""
    return (
        f"{LAYOUT} kexp={__version__} sources={code_fingerprint()} "
        f"python-marshal={marshal.version} sqlite={sqlite3.sqlite_version} settings={settings!r}"
    )


def file_name(settings: Settings) -> str:
    """The cache's file name in ``.kexp/``: one per header."""
    return f"cache-{zlib.crc32(header(settings).encode()):08x}.sqlite"


def _with_checksum(key: bytes, payload: bytes) -> bytes:
    """``payload`` with the CRC-32 of ``key`` and ``payload`` before it."""
    return zlib.crc32(payload, zlib.crc32(key)).to_bytes(4, "little") + payload


def unseal(key: bytes, record: bytes) -> Any:
    """The value sealed in ``record`` under ``key``; :class:`DamagedCacheError` when its
    checksum fails or it cannot be read."""
    if not isinstance(record, bytes) or len(record) < 4:
        raise DamagedCacheError("a record is not one")
    payload = record[4:]
    if zlib.crc32(payload, zlib.crc32(key)) != int.from_bytes(record[:4], "little"):
        raise DamagedCacheError("a record's checksum does not match")
    try:
        return marshal.loads(payload)
    except (EOFError, ValueError, TypeError):
        raise DamagedCacheError("a record cannot be read") from None


def seal(key: bytes, value: Any) -> bytes:
    """``value`` as a record sealed under ``key`` (marshalled, its checksum before it):
    what :func:`unseal` opens."""
    return _with_checksum(key, marshal.dumps(value))


#: How many groups the folders' listings and packs are kept in.
PACK_GROUPS = 2048


def pack_group(folder: str) -> int:
    """The group a folder's listing and pack are kept in: ``marshal`` writes the texts
    packs repeat (operator, environment, commit) once a record, a read loads few
    records; a group stays small as the store grows (a write rewrites its folder's)."""
    return zlib.crc32(folder.encode("utf-8", "surrogatepass")) % PACK_GROUPS


def group_key(table: str, group: int) -> bytes:
    """The key a group of ``table`` (``folders``, ``packs``, ``postings``) is sealed under."""
    return b"%s %d" % (table.encode(), group)


def header_of(connection: sqlite3.Connection) -> str | None:
    """The header row; None for an empty database (a new file)."""
    tables = connection.execute("SELECT name FROM sqlite_master WHERE type = 'table'").fetchall()
    if not tables:
        return None
    found = connection.execute("SELECT value FROM meta WHERE key = 'header'").fetchone()
    return str(found[0]) if found is not None else ""


def create_tables(connection: sqlite3.Connection, text: str) -> bool:
    """Make the tables in one transaction (two processes may make them at once);
    whether the database holds this header now."""
    try:
        connection.execute("BEGIN IMMEDIATE")
        if header_of(connection) is None:
            for statement in _SCHEMA:
                connection.execute(statement)
            connection.execute("INSERT INTO meta VALUES ('header', ?)", (text,))
            connection.execute("INSERT INTO meta VALUES ('generation', ?)", (os.urandom(8).hex(),))
        connection.execute("COMMIT")
    except sqlite3.Error:
        with contextlib.suppress(sqlite3.Error):
            connection.execute("ROLLBACK")
        return False
    return header_of(connection) == text
