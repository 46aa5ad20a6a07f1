"""The retrieval index (:mod:`kexp.storage.retrieval`) kept in step with the working
tree: a doc for every content (made in two processes when many, with the words of its
FTS columns kept only where git cannot give the content back), and the FTS table
compared with the working tree folder by folder (only the folders whose files changed
since it was last done).
"""

from __future__ import annotations

import hashlib
import os
from collections import Counter
from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING, Any

from kexp.core.collector import collector_paused
from kexp.storage.dedupe import normalize_code_change, unchanged_key
from kexp.storage.doctext import (
    DOC_BODIES,
    bodies_of,
    code_of,
    packed_texts,
    texts_of,
    unpacked_texts,
)
from kexp.storage.rows import RowsByKey

if TYPE_CHECKING:
    from kexp.storage.cache import Cache
    from kexp.storage.listing import Folder, Listing
    from kexp.storage.rows import Row
    from kexp.storage.view import StoreView


def document_working_tree(
    cache: Cache,
    store: StoreView,
    listing: Listing,
    rows: Sequence[Row] | None,
    *,
    texts: bool = True,
) -> dict[bytes, tuple[str, ...]]:
    """Docs for every valid content of the working tree (``rows``, when read): those of
    the folders changed since this was last done are looked up, and made when missing
    (``texts``: with their words, returned). Nothing is compared when the whole working
    tree is as it was when every folder was last done (:meth:`Listing.stamp`)."""
    whole = listing.stamp()
    if cache.indexed_whole("docs") == whole:
        return {}
    done = cache.indexed("docs")
    folders: dict[str, bytes | None] = {f: None for f in done if f not in listing.folders}
    changed = [
        folder for folder, known in listing.folders.items() if done.get(folder) != known.keys
    ]
    made: dict[bytes, tuple[str, ...]] = {}
    spoilt: set[str] = set()
    if changed:
        if rows is not None:
            wanted = set(changed)
            of_changed = [row for row in rows if row.path[: row.path.rfind(os.sep) + 1] in wanted]
        else:
            of_changed = [row for folder in changed for row in listing.rows_of(folder)[0]]
        failed, made = add_docs(cache, store, of_changed, texts=texts)
        spoilt = {row.path[: row.path.rfind(os.sep) + 1] for row in of_changed if row.key in failed}
        folders.update(
            (folder, listing.folders[folder].keys) for folder in changed if folder not in spoilt
        )
    if folders:
        cache.save_indexed("docs", folders, None if spoilt else whole)
    elif not spoilt:
        cache.keep_whole("docs", whole)  # every folder's records current already
    return made


def add_docs(
    cache: Cache, store: StoreView, rows: Sequence[Row], *, texts: bool = True
) -> tuple[set[bytes], dict[bytes, tuple[str, ...]]]:
    """Make the docs of the contents of ``rows`` that have none, in two processes when
    many; the words of the FTS columns kept only for contents git cannot give back.
    Returns the keys whose content could not be read (changed since it was listed), and
    the words made (of every doc made, with ``texts``)."""
    chosen: dict[bytes, Row] = {}
    for row in rows:
        chosen.setdefault(row.key, row)
    if not chosen:
        return set(), {}
    have = cache.with_docs(sorted(chosen))
    items = [row for key, row in chosen.items() if key not in have]
    if not items:
        return set(), {}
    from kexp.storage.parallel import in_two_processes

    in_git = _in_git(store, [row.key for row in items])
    source, settings = store.source, store.settings

    def work(part: list[Row]) -> list[tuple[Any, ...]]:
        made: list[tuple[Any, ...]] = []
        with collector_paused():  # many objects made, none cyclic, the store's rows alive
            _make(part, made)
        return made

    def _make(part: list[Row], made: list[tuple[Any, ...]]) -> None:
        for start in range(0, len(part), 256):
            batch = part[start : start + 256]
            datas = source.bytes_found([(row.path, row.key) for row in batch], settings)
            for row, data in zip(batch, datas, strict=True):
                keep = texts or row.key not in in_git  # its words made
                wanted = DOC_BODIES if keep else ("code_change",)
                bodies = None if data is None else bodies_of(data, row.path, wanted)
                if bodies is None:
                    made.append((row.key, None, None, None, None))  # changed since: later
                    continue
                normalized = normalize_code_change(bodies["code_change"])
                words = texts_of(row, bodies, normalized) if keep else None
                code, lines, shingles = code_of(bodies["code_change"], normalized)
                if code is None:  # no code change: kept under its kernel and parent
                    code = bytes.fromhex(unchanged(row))
                made.append((row.key, code, lines, shingles, words))

    made = in_two_processes(work, items, len(items))
    cache.add_docs(
        [
            (key, code, lines, shingles, None if key in in_git else packed_texts(words))
            for key, code, lines, shingles, words in made
            if shingles is not None
        ]
    )
    failed = {item[0] for item in made if item[3] is None}
    return failed, {item[0]: tuple(item[4]) for item in made if item[4] is not None}


def unchanged(row: Row) -> str:
    """:func:`kexp.storage.dedupe.unchanged_key` of the experiment of ``row``."""
    return unchanged_key(row.operator_sig, row.dtype_sig, row.env, row.pid)


def _in_git(store: StoreView, keys: Sequence[bytes]) -> set[bytes]:
    """Those of the contents ``keys`` that the store's git repository holds (none
    outside one)."""
    from kexp.core.errors import GitError
    from kexp.gitops import git as kgit
    from kexp.gitops import objects as gitobjects

    try:
        repo = kgit.find_worktree(store.root)
        held = gitobjects.blobs_held(repo, [key.hex() for key in keys], store.experiments_dir)
    except GitError:
        return set()
    return {key for key in keys if key.hex() in held}


class DocTexts:
    """The words of the FTS columns of contents: kept in their docs, else made again
    from the content (the working tree's file, or git's blob)."""

    def __init__(
        self,
        store: StoreView,
        cache: Cache,
        rows: RowsByKey,
        made: dict[bytes, tuple[str, ...]],
    ) -> None:
        self._store = store
        self._cache = cache
        self._rows = rows
        self._made = made

    def of(self, keys: Iterable[bytes]) -> dict[bytes, tuple[int, Sequence[str]]]:
        """Each content's doc number and words; :class:`_NoWords` when one cannot be
        had (its content is gone)."""
        found: dict[bytes, tuple[int, Sequence[str]]] = {}
        missing: list[tuple[bytes, int]] = []
        for key, (doc, _, kept) in self._cache.docs(sorted(set(keys))).items():
            if key in self._made:
                found[key] = (doc, self._made[key])
            elif kept is not None:
                found[key] = (doc, unpacked_texts(kept))
            else:
                missing.append((key, doc))
        if not missing:
            return found
        made = self._made_again([key for key, _ in missing])
        for key, doc in missing:
            words = made.get(key)
            if words is None:
                raise _NoWords(key)
            found[key] = (doc, words)
        return found

    def _made_again(self, keys: Sequence[bytes]) -> dict[bytes, tuple[str, ...] | None]:
        """The words of the contents ``keys`` made again (as :func:`add_docs` made
        them): from the working tree's files, in two processes when many, then from
        git's blobs for those no file holds now (None: from neither)."""
        from kexp.core.errors import GitError
        from kexp.gitops import git as kgit
        from kexp.storage.parallel import in_two_processes

        source, settings = self._store.source, self._store.settings
        on_disk = [(rows[0].path, key) for key in keys if (rows := self._rows.get(key))]

        def work(part: list[tuple[str, bytes]]) -> list[tuple[bytes, tuple[str, ...] | None]]:
            made: list[tuple[bytes, tuple[str, ...] | None]] = []
            with collector_paused():  # many objects made, none cyclic
                for start in range(0, len(part), 256):  # a few files' bytes held at once
                    batch = part[start : start + 256]
                    datas = source.bytes_found(batch, settings)
                    made += [(k, self._words(k, d)) for (_, k), d in zip(batch, datas, strict=True)]
            return made

        made = dict(in_two_processes(work, on_disk, len(on_disk)))
        from_git = [key for key in keys if made.get(key) is None]
        if from_git:
            try:
                repo = kgit.find_worktree(self._store.root)
                for sha, data in kgit.iter_blobs(repo, [key.hex() for key in from_git]):
                    if isinstance(data, bytes):
                        key = bytes.fromhex(sha)
                        made[key] = self._words(key, data)
            except GitError:
                pass
        return made

    def _words(self, key: bytes, data: bytes | None) -> tuple[str, ...] | None:
        """The words of one content's FTS columns (None: not an experiment file)."""
        from kexp.format.fileformat import FileFormatError, parse
        from kexp.storage.rows import row_of, values_of

        bodies = None if data is None else bodies_of(data, "content.md")
        if data is None or bodies is None:
            return None
        known = self._rows.get(key)
        if not known:  # a content on a ref alone: its front matter's fields
            try:
                fields = parse(data, "content.md", fast=True).fields
            except FileFormatError:
                return None
            known = [row_of(values_of(fields), "", key)]
        return texts_of(known[0], bodies)


class _NoWords(Exception):
    """The words of a doc to take out of the FTS table cannot be had any more."""


def index_working_tree(
    cache: Cache, listing: Listing | None, texts_of: DocTexts, local: Sequence[Row] = ()
) -> None:
    """Bring the FTS table in step with the working tree's rows (those of ``listing``,
    else ``local``), folder by folder: only the folders whose files changed since it
    was last done are compared. When the words of a doc to take out can no longer be
    had, the table is emptied and filled again; when another process changed it since
    it was compared, it is compared again."""
    from kexp.storage.cache import StaleComparisonError
    from kexp.storage.cachefile import DamagedCacheError

    emptied = 0
    for _ in range(_COMPARISONS):
        try:
            _index_folders(cache, listing, texts_of, local)
            return
        except _NoWords:
            if emptied == 2:  # pragma: no cover - none to take out once emptied
                raise DamagedCacheError("the FTS table cannot be emptied") from None
            emptied += 1
            cache.clear_texts_index()
        except StaleComparisonError:
            continue
    raise StaleComparisonError("the FTS table never settled")  # rebuilt by the caller


#: How many times the FTS table is compared with the working tree before the cache is
#: rebuilt (another process changing it meanwhile each time).
_COMPARISONS = 8


#: The stamp of a folder whose files are to be compared next time.
_NO_STAMP = bytes(16)


def _stamp(folder: Folder) -> bytes:
    """A digest of a folder's names and content keys: its valid rows (which files the
    FTS table holds) are a function of them."""
    digest = hashlib.blake2b(folder.keys, digest_size=16)
    digest.update("\0".join(folder.names).encode("utf-8", "surrogatepass"))
    return digest.digest()


def _index_folders(
    cache: Cache, listing: Listing | None, texts_of: DocTexts, local: Sequence[Row]
) -> None:
    # Each folder's record: the stamp of its files when done, then the content keys of
    # its valid files (those the FTS table holds), sorted.
    whole = None if listing is None else listing.stamp()
    if whole is not None and cache.indexed_whole("fts") == whole:
        return  # every folder as it was when every one was last done
    indexed = cache.indexed("fts")
    current: dict[str, tuple[bytes, list[bytes]] | None] = {}
    if listing is not None:
        for folder, known in listing.folders.items():
            stamp = _stamp(known)
            if indexed.get(folder, _NO_STAMP)[:16] == stamp:
                current[folder] = None  # the same files: the same rows
            else:
                current[folder] = (stamp, [row.key for row in listing.rows_of(folder)[0]])
    else:
        for row in local:
            folder = row.path[: row.path.rfind(os.sep) + 1]
            current.setdefault(folder, (_NO_STAMP, []))[1].append(row.key)  # type: ignore[index]
    changes: Counter[bytes] = Counter()
    folders: dict[str, bytes | None] = {}
    for folder, now in current.items():
        if now is None:
            continue
        stamp, keys = now
        packed = b"".join(sorted(keys))
        before = indexed.get(folder, _NO_STAMP)
        if before[16:] != packed:
            changes.update(keys)
            changes.subtract(_keys_of(before[16:]))
        if before != stamp + packed:
            folders[folder] = stamp + packed
    for folder, before in indexed.items():
        if folder not in current:
            changes.subtract(_keys_of(before[16:]))
            folders[folder] = None
    if not folders:
        if whole is not None:
            cache.keep_whole("fts", whole)  # every folder's records current already
        return
    changed = {key: n for key, n in changes.items() if n}
    has_doc = cache.with_docs(sorted(changed))
    # Contents with no doc (not readable as they were listed) are left for next time:
    # their folders keep what the FTS table holds of them, and are compared again.
    missing = {key for key in changed if key not in has_doc}
    if missing:
        for folder, kept in list(folders.items()):
            if kept is not None and not missing.isdisjoint(_keys_of(kept[16:])):
                folders[folder] = _NO_STAMP + b"".join(
                    k for k in _keys_of(kept[16:]) if k not in missing
                )
        changed = {key: n for key, n in changed.items() if key not in missing}
    cache.activate(
        changed, texts_of.of(changed), folders, None if missing else whole, compared=True
    )


def _keys_of(packed: bytes) -> list[bytes]:
    return [packed[at : at + 20] for at in range(0, len(packed), 20)]
