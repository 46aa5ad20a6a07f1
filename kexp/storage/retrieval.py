"""Related work: the experiments a plan, a diff or another experiment resembles.

Two measures, one index:

* **Relevance** (``kexp similar``, :func:`similar`): BM25, as SQLite's FTS5 ranks it
  (Porter stemming), over the columns of every experiment: its summary, its detailed
  description (with the error message, without the bold labels every description
  repeats: ``**Key insight**:``), its key insight, its operator (with dtype and
  env), the words of its code change's added and removed lines (identifiers split
  at ``_`` and at case changes, so ``warpReduceSum`` matches "warp reduce"), and the
  numbers of its summary, of its key insight and of its code words, a column each
  (``unroll 8``, ``128-bit``, ``num_warps=8``, both of ``128x64``; not those of measurements:
  :func:`kexp.storage.doctext.numbers_of`).
  A query's words are lowercased, common English words and the headings every
  description repeats (approach, result, key insight) dropped, and expanded with a few
  synonyms of the trade (:data:`kexp.storage.doctext.SYNONYMS`: LDS and shared memory,
  warp and wavefront, ...), each term of the index asked once (``tiling`` and ``tiled``
  are the index's ``tile``); its numbers are looked for in the numbers columns alone
  (:func:`kexp.storage.doctext.fts_phrase`: descriptions hold numbers in nearly every
  experiment, where BM25 gives them no weight), weighing :data:`NUMBER_WEIGHT` times a
  word of their place.
* **Near-duplicate code changes** (the "tried before" check of a create, and a boost
  for ``similar --diff`` and ``similar ID``): the Jaccard similarity of two changes'
  shingles (:func:`kexp.storage.dedupe.code_shingles`: changed lines with variables renamed,
  hunks as sets). Candidates are the changes sharing a shingle of their prefixes
  (:func:`kexp.storage.doctext.shingle_prefix`: prefix filtering, exact at the setting's
  ``near_duplicate_similarity``), and each candidate's similarity is computed from its
  shingles. Less similar code (down to :data:`RELATED_CODE_SIMILARITY`) boosts the
  text matches alone (see :meth:`Search.related_code`).
* **The same code change** (the rest of the "tried before" check,
  :func:`kexp.storage.repeats.tried_before`
  and :func:`kexp.storage.repeats.find_repeats`): every change's key
  (:func:`kexp.storage.dedupe.code_key`); what
  the check reports is read again from the files.

A change relevant to a text query scores its BM25 over the best BM25 among the
candidates (so 1.0 for the best match); a near-duplicate adds
:data:`NEAR_DUPLICATE_WEIGHT` times its similarity. Ties go to the older experiment.
Controls (tag ``control``: A/A runs, the same code on both sides) changed nothing and
are never listed.

The index is part of the store's cache (:mod:`kexp.storage.cache`), keyed by content: every
question reads the store as every query does (:meth:`kexp.Store.found`: the files on
disk as they are now, and with refs, each experiment's newest version), and asks only
about those contents. The FTS table holds exactly the working tree's current
experiments (what a query adds or takes away from it is what changed since the last
one: :mod:`kexp.storage.indexing`), so a file edited in place is found by its new words
at once, and a store read with refs holds the refs' versions for that one query (in a
transaction undone at its end): the same files and options rank the same, whatever the
cache's history.
"""

from __future__ import annotations

import contextlib
import dataclasses
import math
import os
from array import array
from collections import Counter
from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import TYPE_CHECKING, Any, TypeVar

from kexp.core.collector import collector_paused
from kexp.core.errors import KexpError
from kexp.core.outcome import is_control
from kexp.format.fileformat import key_insight
from kexp.storage.dedupe import code_shingles, shingle_similarity
from kexp.storage.doctext import (
    code_words,
    query_words,
    score_interval,
    shingle_prefix,
)
from kexp.storage.indexing import DocTexts, add_docs, document_working_tree, index_working_tree
from kexp.storage.operators import part_of
from kexp.storage.rows import RowsByKey, Sighting, sighting_of

if TYPE_CHECKING:
    from kexp.core.campaign import Derivation, Versions
    from kexp.storage.cache import Cache
    from kexp.storage.listing import Listing
    from kexp.storage.rows import Row
    from kexp.storage.sources import Found
    from kexp.storage.view import StoreView

_T = TypeVar("_T")

#: How much more a number weighs than a word of its place: a word is matched loosely
#: (stemmed, with its synonyms), a number exactly, and only where it names a setting
#: (``BLOCK_N 128 -> 256``, ``unroll 8``; the numbers of measurements are not kept).
NUMBER_WEIGHT = 2.0
#: BM25 weights of the columns: summary, description, key insight, operator, code; then
#: the numbers of the summary, of the key insight and of the code, each
#: :data:`NUMBER_WEIGHT` times its place's (a query's numbers are asked in them alone:
#: :func:`kexp.storage.doctext.fts_phrase`).
COLUMN_WEIGHTS = (3.0, 1.0, 2.0, 1.0, 1.0, *(NUMBER_WEIGHT * w for w in (3.0, 2.0, 1.0)))
#: How much a near-duplicate's similarity adds to its relevance (the best text match
#: scores 1.0).
NEAR_DUPLICATE_WEIGHT = 2.0
#: How many BM25 candidates are ranked again with the near-duplicate similarity.
CANDIDATES = 200
#: A word held by more than this share of the experiments (and by more than
#: :data:`COMMON_MIN` of them) is too common to rank them by (its BM25 weight is small,
#: and scoring every experiment holding it is not): it is left out of the query, but
#: for the :data:`RAREST_KEPT` rarest words of the query.
COMMON_SHARE = 0.1
COMMON_MIN = 1000
RAREST_KEPT = 3
#: Below this similarity a shared shingle does not count as related code.
RELATED_CODE_SIMILARITY = 0.2
#: A match below this relevance (a share of the best's) shares only words nearly every
#: experiment holds (their BM25 weight is next to nothing): it is not listed.
MIN_RELEVANCE = 0.01


# --- what the index keeps of a content ---------------------------------------------------


@dataclasses.dataclass(frozen=True)
class Match:
    """One experiment related to a query, best first (see :func:`similar`)."""

    id: str
    #: How related: BM25 relative to the best text match, plus the near-duplicate boost.
    relevance: float
    #: Jaccard similarity of the code changes' shingles (None when the query has no code).
    similarity: float | None
    score: float
    score_ci: tuple[float, float] | None
    outcome: str
    change_summary: str
    key_insight: str
    operator_sig: str
    dtype_sig: str
    env: str
    #: The file, relative to ``experiments/``.
    path: str
    #: The score a view prints (None: no measurement, whatever its outcome:
    #: :attr:`kexp.core.cumulative.Derived.shown_score`).
    shown_score: float | None = None
    #: Where it was found, read across refs (None: the working tree alone was read).
    where: Sighting | None = None
    #: What its outcome judges of a step on a parent: its cumulative score over the
    #: parent's (its score when measured against the parent; None: no parent, or a
    #: cumulative score not known).
    vs_parent: float | None = None

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready data; the interval and similarity only when there is one; where it
        was found when read across refs (``ref``, ``refs``, other versions)."""
        data: dict[str, Any] = {
            "id": self.id,
            "relevance": self.relevance,
            "similarity": self.similarity,
            "score": self.score,
            "score_ci": list(self.score_ci) if self.score_ci else None,
            "vs_parent": self.vs_parent,
            "outcome": self.outcome,
            "change_summary": self.change_summary,
            "key_insight": self.key_insight,
            "operator_sig": self.operator_sig,
            "dtype_sig": self.dtype_sig,
            "env": self.env,
        }
        if self.where is not None:
            data.update(self.where.to_dict())
        return {k: v for k, v in data.items() if v is not None}


class Index:
    """The retrieval index in step with the store, for the questions on code changes."""

    def __init__(self, cache: Cache, store: StoreView) -> None:
        self._cache = cache
        self._store = store
        self.settings = store.settings
        self._lessons: dict[bytes, tuple[str, str, str]] = {}

    def _rows_of_keys(self, keys: Iterable[bytes]) -> list[Row]:
        """The current experiments holding each content, in path order."""
        raise NotImplementedError

    def read_lessons(self, rows: Iterable[Row]) -> None:
        """Read each row's lesson from its file, once (see :meth:`lesson`)."""
        from kexp.format.fileformat import FileFormatError, error_line, parse
        from kexp.format.notes import retired_reason

        wanted = {row.key: row for row in rows if row.key not in self._lessons}
        if wanted:
            items = [(row.path, key) for key, row in wanted.items()]
            datas = self._store.source.bytes_found(items, self.settings)
            for (path, key), data in zip(items, datas, strict=True):
                insight = error = retired = ""
                if data is not None:
                    with contextlib.suppress(FileFormatError):
                        bodies = parse(data, path, fast=True).body_values()
                        insight = key_insight(bodies["detailed_description"])
                        error = error_line(bodies["error_message"])
                        retired = retired_reason(bodies["detailed_description"])
                self._lessons[key] = (insight, error, retired)

    def lesson(self, row: Row) -> tuple[str, str]:
        """A row's key insight (of its detailed description) and the line of its error
        message that says what went wrong ("" when none)."""
        self.read_lessons([row])
        return self._lessons.get(row.key, ("", "", ""))[:2]

    def retired(self, row: Row) -> str:
        """Why a row's experiment was retired (:func:`kexp.format.notes.retired_reason`;
        "" when it was not), read with its lesson."""
        self.read_lessons([row])
        return self._lessons.get(row.key, ("", "", ""))[2]

    def near_duplicates(
        self, shingles: frozenset[int], threshold: float
    ) -> list[tuple[Row, float]]:
        """(row, similarity) of every experiment whose code change's shingles are at
        least ``threshold`` similar (Jaccard) to ``shingles``, most similar first: the
        candidates share a shingle of their prefixes (:func:`shingle_prefix`), or are
        not posted yet (:meth:`kexp.storage.cache.Cache.near_candidates`), and hold a
        number of shingles that allows that similarity; each one's is computed. Exact
        for a threshold at least the setting's ``near_duplicate_similarity`` (the
        prefixes posted are for it); below it, the candidates so found only."""
        if not shingles or threshold <= 0:
            return []
        query = set(shingles)
        least = max(1, math.ceil(threshold * len(query) - 1e-9))
        most = math.floor(len(query) / threshold + 1e-9)
        similar: dict[bytes, float] = {}
        self._cache.post_pending()
        for key, packed in self._cache.near_candidates(
            lambda order: shingle_prefix(shingles, threshold, order), least, most
        ):
            similarity = shingle_similarity(query, array("I", packed))
            if similarity >= threshold:
                similar[key] = similarity
        found = [(row, similar[row.key]) for row in self._rows_of_keys(similar)]
        found.sort(key=lambda item: (-item[1], path_order(item[0].path)))
        return found

    def same_change(self, key: str) -> list[Row]:
        """The experiments whose normalised code change hashes to ``key``, in path order."""
        return self._rows_of_keys(self._cache.code_keys(bytes.fromhex(key)))

    def same_lines(self, key: str) -> list[Row]:
        """The experiments whose small code change's changed lines alone hash to ``key``
        (:func:`kexp.storage.dedupe.lines_key_of_normalized`), in path order."""
        return self._rows_of_keys(self._cache.lines_keys(bytes.fromhex(key)))


class Search(Index):
    """The retrieval index in step with one read of a store, open for questions (see
    :func:`searching`)."""

    def __init__(
        self,
        cache: Cache,
        rows: list[Row],
        store: StoreView,
        by_key: RowsByKey | None = None,
    ) -> None:
        super().__init__(cache, store)
        #: The store's current experiments, in path order.
        self.rows = rows
        self._by_key = by_key if by_key is not None else RowsByKey(rows)
        self._derivation: Derivation | None = None
        self._versions: Versions | None = None

    def versions(self) -> Versions:
        """Each id's rows: their numbers in :attr:`rows` (the first counts for the id)."""
        if self._versions is None:
            from kexp.core.campaign import versions_of

            self._versions = versions_of(self.rows)
        return self._versions

    def first_rows(self) -> dict[str, Row]:
        """The row that counts for each id: its first in path order."""
        rows = self.rows
        return {exp_id: rows[number] for exp_id, number in self.versions().first.items()}

    @property
    def derivation(self) -> Derivation:
        """What is derived of every current experiment (:func:`kexp.core.campaign.derive`),
        as every query derives it (derived when first asked for)."""
        if self._derivation is None:
            from kexp.core.campaign import derive

            self._derivation = derive(self.rows, self.settings)
        return self._derivation

    def derived(self, rows: Iterable[Any]) -> Derivation:
        """What is derived of ``rows`` (of :attr:`rows`, or their experiments), as
        :attr:`derivation` has it: derived over them and what they depend on
        (:func:`kexp.core.campaign.derive_for`) unless the whole store's is made
        already."""
        if self._derivation is not None:
            return self._derivation
        from kexp.core.campaign import derive_for

        return derive_for(self.rows, rows, self.settings, self.versions())

    def _rows_of_keys(self, keys: Iterable[bytes]) -> list[Row]:
        rows = [row for key in set(keys) for row in self._by_key.get(key)]
        return sorted(rows, key=lambda row: path_order(row.path))

    def count(self) -> int:
        """How many experiments the index holds."""
        return len(self.rows)

    def _rows_of_docs(self, docs: Sequence[int]) -> dict[int, list[Row]]:
        keys = self._cache.keys_of_docs(sorted(set(docs)))
        found = {doc: self._by_key.get(key) for doc, key in keys.items()}
        return {doc: rows for doc, rows in found.items() if rows}

    def telling_words(self, words: Sequence[str]) -> list[str]:
        """The words of a query worth asking for: the first of those the index keeps as
        one term (a word and its synonyms stemmed alike, ``tile`` and ``tiling``, count
        once: :func:`kexp.storage.cache.index_terms`), those some experiment holds, without
        the too common ones (see :data:`COMMON_SHARE`), in alphabetical order."""
        from kexp.storage.cache import index_terms

        terms = index_terms(words)
        once = list({terms[word]: word for word in reversed(words)}.values())  # the first
        held = {w: n for w, n in self._cache.word_counts(once).items() if n}
        rarest = sorted(held, key=lambda w: (held[w], w))
        limit = max(COMMON_MIN, COMMON_SHARE * self.count())
        kept = rarest[:RAREST_KEPT] + [w for w in rarest[RAREST_KEPT:] if held[w] <= limit]
        return sorted(kept)

    def text_matches(
        self,
        words: Sequence[str],
        *,
        operator: str | None = None,
        dtype: str | None = None,
        env: str | None = None,
        limit: int = CANDIDATES,
    ) -> dict[str, float]:
        """Paths (relative) of the experiments best matching ``words`` by BM25 → their
        BM25 (higher is better), among those passing the filters: the ``limit`` best and
        every one as good as the last (a cut among equals would follow the docs' numbers)."""
        words = self.telling_words(words)
        if not words:
            return {}
        found: dict[str, float] = {}
        ranked = self._cache.text_matches(words, COLUMN_WEIGHTS)
        last: float | None = None
        for start in range(0, len(ranked), 500):
            part = ranked[start : start + 500]
            rows = self._rows_of_docs([doc for doc, _ in part])
            for doc, bm25 in part:
                if last is not None and bm25 != last:
                    return found
                for row in sorted(rows.get(doc, ()), key=lambda r: r.path):
                    if _passes(row, operator, dtype, env):
                        found.setdefault(row.path, bm25)
                if last is None and len(found) >= limit:
                    last = bm25
        return found

    def match(
        self, row: Row, relevance: float, similarity: float | None, derivation: Derivation
    ) -> Match:
        """The :class:`Match` of one experiment (``derivation``: of it, at least)."""
        derived = derivation.of(row)
        parent = derivation.get(row.pid) if row.pid else None
        own, below = derived.cumulative_score, parent and parent.cumulative_score
        return Match(
            id=row.id,
            relevance=round(relevance, 4),
            similarity=None if similarity is None else round(similarity, 4),
            score=row.score,
            score_ci=score_interval(row),
            outcome=derived.outcome,
            change_summary=row.change_summary,
            key_insight=self.lesson(row)[0],
            operator_sig=row.operator_sig,
            dtype_sig=row.dtype_sig,
            env=row.env,
            path=row.path,
            shown_score=derived.shown_score,
            where=row.sighting(),
            vs_parent=round(own / below, 4) if own is not None and below else None,
        )

    def related_code(
        self, shingles: frozenset[int], paths: Iterable[str]
    ) -> list[tuple[Row, float]]:
        """(row, similarity) of the experiments whose code change is related to
        ``shingles``: every near-duplicate (:meth:`near_duplicates`), and those of
        ``paths`` (the text matches) at least :data:`RELATED_CODE_SIMILARITY` similar
        (below the threshold, what the prefixes find depends on the cache's history)."""
        if not shingles:
            return []
        found = self.near_duplicates(shingles, self.settings.near_duplicate_similarity)
        seen = {row.path for row, _ in found}
        wanted = set(paths) - seen
        rows = [row for row in self.rows if row.path in wanted]
        held = self._cache.shingles_of(sorted({row.key for row in rows}))
        for row in rows:
            similarity = shingle_similarity(shingles, array("I", held.get(row.key, b"")))
            if similarity >= RELATED_CODE_SIMILARITY:
                found.append((row, similarity))
        return found

    def rank(
        self,
        *,
        text: str = "",
        code_change: str = "",
        exclude_paths: Iterable[str] = (),
        operator: str | None = None,
        dtype: str | None = None,
        env: str | None = None,
        limit: int = 10,
    ) -> list[Match]:
        """The experiments most related to ``text`` and ``code_change``, best first (see
        the module documentation), among those passing the substring filters."""
        skip = set(exclude_paths)
        words = query_words(text + " " + code_words(code_change))
        bm25 = self.text_matches(words, operator=operator, dtype=dtype, env=env)
        bm25 = {p: v for p, v in bm25.items() if p not in skip}
        best = max(bm25.values(), default=0.0)
        relevance = {p: (v / best if best > 0 else 0.0) for p, v in bm25.items()}
        shingles = code_shingles(code_change) if code_change else frozenset()
        near = {
            row.path: s
            for row, s in self.related_code(shingles, bm25)
            if row.path not in skip and _passes(row, operator, dtype, env)
        }
        for path, similarity in near.items():
            relevance[path] = relevance.get(path, 0.0) + NEAR_DUPLICATE_WEIGHT * similarity
        by_path = {row.path: row for row in self.rows if row.path in relevance}
        chosen = [row for path, row in by_path.items() if relevance[path] >= MIN_RELEVANCE]
        chosen.sort(key=lambda r: (-round(relevance[r.path], 9), r.created_at, r.id, r.path))
        shown = chosen[: max(0, limit)]
        self.read_lessons(shown)
        derivation = self.derived(shown)
        return [
            self.match(
                r, relevance[r.path], near.get(r.path, 0.0) if shingles else None, derivation
            )
            for r in shown
        ]


def _passes(row: Row, operator: str | None, dtype: str | None, env: str | None) -> bool:
    """Whether ``row`` passes the substring filters (as the query filters do) and is a
    change at all: a control (an A/A run, the same code on both sides) is no related
    work."""
    return (
        not is_control(row)
        and (operator is None or part_of("operator_sig", operator, row.operator_sig))
        and (dtype is None or part_of("dtype_sig", dtype, row.dtype_sig))
        and (env is None or part_of("env", env, row.env))
    )


def path_order(path: str) -> str:
    return path.replace(os.sep, "\0")


# --- keeping the index in step with a read of the store ------------------------------------


@contextlib.contextmanager
def searching(
    store: StoreView, *, texts: bool = True, found: Found | None = None
) -> Iterator[Search]:
    """The retrieval index in step with a read of ``store`` (:meth:`kexp.Store.found`,
    or ``found``: a read of it just made): a doc for every current experiment's content,
    and (``texts``) the FTS table holding exactly them. A cache found damaged while it is
    brought in step is rebuilt (:mod:`kexp.storage.cache`); one found damaged by a
    question raises :class:`~kexp.storage.cachefile.DamagedCacheError` (see
    :func:`asked`)."""
    with collector_paused():  # many objects made, none in a cycle: the question's too
        yield from _searching(store, texts, store.found() if found is None else found)


def _searching(store: StoreView, texts: bool, found: Found) -> Iterator[Search]:
    from kexp.storage.cache import rebuilt_on_doubt

    alone = found.rows is found.local  # the working tree alone
    rows = found.rows
    by_key = RowsByKey(rows)

    def in_step(cache: Cache) -> tuple[DocTexts, dict[bytes, int]]:
        """Docs for every row, the FTS table in step; (their texts, what this query
        changes in the FTS table for its own rows)."""
        if found.listing is not None:
            made = document_working_tree(cache, store, found.listing, found.local, texts=texts)
            if not alone:
                local = {row.key for row in found.local}
                elsewhere = [row for row in rows if row.key not in local]
                made.update(add_docs(cache, store, elsewhere, texts=texts)[1])
        else:
            made = add_docs(cache, store, rows, texts=texts)[1]
        texts_of = DocTexts(
            store, cache, by_key if alone else RowsByKey([*found.local, *rows]), made
        )
        if not texts:
            return texts_of, {}
        if found.listing is not None:
            index_working_tree(cache, found.listing, texts_of)
        else:
            index_working_tree(cache, None, texts_of, found.local)
        return texts_of, {} if alone else _changes(found.local, rows)

    cache = store.open_cache()
    try:
        cache, (texts_of, changes) = rebuilt_on_doubt(cache, in_step)
        if not changes:
            yield Search(cache, rows, store, by_key)
            return
        cache.post_pending()  # not within the transient
        with cache.transient():
            cache.activate(changes, texts_of.of(changes))
            yield Search(cache, rows, store, by_key)
    finally:
        cache.close()


class _Light(Index):
    """The index of the working tree as a light refresh found it (folder signatures: see
    :func:`kexp.storage.listing.refresh`), for the tried-before check of a write."""

    def __init__(self, cache: Cache, listing: Listing, store: StoreView) -> None:
        super().__init__(cache, store)
        self._listing = listing

    def _rows_of_keys(self, keys: Iterable[bytes]) -> list[Row]:
        from kexp.storage.listing import KEY_SIZE

        wanted = set(keys)
        holding: set[str] = set()
        for folder, known in self._listing.folders.items():
            packed = known.keys
            for key in wanted:
                start = packed.find(key)
                while start >= 0 and start % KEY_SIZE:
                    start = packed.find(key, start + 1)
                if start >= 0:
                    holding.add(folder)
                    break
        rows: list[Row] = []
        for folder in holding:
            rows += [row for row in self._listing.rows_of(folder)[0] if row.key in wanted]
        return sorted(rows, key=lambda row: path_order(row.path))


@contextlib.contextmanager
def light_search(store: StoreView) -> Iterator[Index]:
    """The index in step with a light refresh of the working tree (see :class:`_Light`)."""
    from kexp.storage.cache import rebuilt_on_doubt
    from kexp.storage.listing import refresh

    def in_step(cache: Cache) -> Listing:
        listing = refresh(cache, store.experiments_dir, store.settings, light=True, rows=False)
        document_working_tree(cache, store, listing, None, texts=False)
        return listing

    cache = store.open_cache()
    try:
        cache, listing = rebuilt_on_doubt(cache, in_step)
        yield _Light(cache, listing, store)
    finally:
        cache.close()


def asked(store: StoreView, question: Callable[[], _T]) -> _T:
    """``question()`` (which searches, :func:`searching`), asked again once the cache is
    rebuilt when a question finds it damaged."""
    from kexp.storage.cachefile import DamagedCacheError

    try:
        return question()
    except DamagedCacheError:
        cache = store.open_cache()
        cache.rebuild()
        cache.close()
        return question()


def _changes(local: Sequence[Row], rows: Sequence[Row]) -> dict[bytes, int]:
    """What this query changes in the FTS table (undone at its end) for it to hold
    exactly ``rows`` (other places' versions) instead of the working tree's ``local``."""
    local_keys = Counter(row.key for row in local)
    wanted = Counter(row.key for row in rows)
    changes: dict[bytes, int] = {}
    if wanted != local_keys:
        for key in set(wanted) | set(local_keys):
            change = wanted.get(key, 0) - local_keys.get(key, 0)
            if change:
                changes[key] = change
    return changes


# --- the questions ---------------------------------------------------------------------


def similar(
    store: StoreView,
    *,
    text: str | None = None,
    diff: str | None = None,
    exp_id: str | None = None,
    limit: int = 10,
    operator: str | None = None,
    dtype: str | None = None,
    env: str | None = None,
) -> list[Match]:
    """The experiments most related to a plan (``text``), a code change (``diff``) or
    another experiment (``exp_id``, itself left out), best first (see the module
    documentation); ``operator``, ``dtype`` and ``env`` filter as in queries. A store
    read with refs (``Store(root, refs=...)``) searches every experiment's newest
    version."""
    given = [name for name, value in (("text", text), ("diff", diff), ("id", exp_id)) if value]
    if len(given) > 1:
        raise KexpError(
            f"give only one of: a text (what you plan), a diff, or an experiment id (given: "
            f"{', '.join(given)}); ask once for each"
        )
    if not given:
        empty = [name for name, value in (("text", text), ("diff", diff)) if value is not None]
        raise KexpError(
            f"the {empty[0]} given is empty: give what you plan, a diff with changed lines, "
            "or an experiment id"
            if empty
            else "give one of: a text (what you plan), a diff, or an experiment id"
        )
    exclude: list[str] = []
    if exp_id:
        exp = store.get_experiment(exp_id)
        if exp.path is not None:
            exclude = [os.path.relpath(exp.path, store.experiments_dir)]
        text = f"{exp.change_summary} {key_insight(exp.detailed_description)}"
        diff = exp.code_change

    def ask(found: Found) -> list[tuple[Any, ...]]:
        with searching(store, found=found) as search:
            matches = search.rank(
                text=text or "",
                code_change=diff or "",
                exclude_paths=exclude,
                operator=operator,
                dtype=dtype,
                env=env,
                limit=limit,
            )
        return [_kept(match) for match in matches]

    # Kept for files nobody changed since (the read's one fast path).
    question = ("similar", text or "", diff or "", tuple(exclude), operator, dtype, env, limit)
    kept = asked(store, lambda: store.answered(question, ask))
    if not kept:
        store.note_unmatched({"operator": operator, "dtype": dtype, "env": env})
    return [_match_of(match) for match in kept]


def _kept(match: Match) -> tuple[Any, ...]:
    """What :func:`similar` keeps of a match: :func:`dataclasses.astuple`, its
    ``where``'s ``unmerged`` (a named tuple) made a plain one (what :mod:`marshal`
    keeps)."""
    names = [field.name for field in dataclasses.fields(Match)]
    values = dict(zip(names, dataclasses.astuple(match), strict=True))
    where = values["where"]
    if where and where[-1] is not None:
        values["where"] = (*where[:-1], tuple(where[-1]))
    return tuple(values.values())


def _match_of(kept: tuple[Any, ...]) -> Match:
    """A match of what :func:`similar` keeps of it (:func:`_kept`)."""
    names = [field.name for field in dataclasses.fields(Match)]
    values = dict(zip(names, kept, strict=True))
    where = values.pop("where")
    return Match(**values, where=sighting_of(where) if where else None)
