"""Related work: the experiments a plan, a diff or another experiment resembles.

Two measures, one index:

* **Relevance** (``kexp similar``, :func:`similar`): BM25, as SQLite's FTS5 ranks it
  (Porter stemming), over five columns of every experiment: its summary, its detailed
  description (with the error message), its key insight, its operator (with dtype and
  env), and the words of its code change's added and removed lines (identifiers split
  at ``_`` and at case changes, so ``warpReduceSum`` matches "warp reduce"). A query's
  words are lowercased, common English words and the headings every description
  repeats (approach, result, key insight) dropped, and expanded with a few synonyms of
  the trade (:data:`SYNONYMS`: LDS and shared memory, warp and wavefront, ...).
* **Near-duplicate code changes** (the "tried before" check of a create, and a boost
  for ``similar --diff`` and ``similar ID``): the Jaccard similarity of two changes'
  shingles (:func:`kexp.dedupe.code_shingles`: changed lines with variables renamed,
  hunks as sets). The index keeps every change's shingles and an inverted table of
  them; a query looks up the rarest half of its own shingles (by how many changes hold
  each), which every change at least :attr:`~kexp.settings.Settings.near_duplicate_similarity`
  similar must share (it holds at least that share of the query's shingles), and
  computes the similarity of those exactly.
* **The same code change** (the rest of the "tried before" check, :func:`tried_before`
  and :func:`find_repeats`): the index keeps every change's key
  (:func:`kexp.dedupe.code_key`), and is the one place that answers which experiments
  hold a change; what it names is read again from the files.

A change relevant to a text query scores its BM25 over the best BM25 among the
candidates (so 1.0 for the best match); a near-duplicate adds
:data:`NEAR_DUPLICATE_WEIGHT` times its similarity. Ties go to the older experiment.

The index is ``.kexp/retrieval-<hash>.sqlite`` (git-ignored, SQLite from the standard
library; the hash names kexp's version and this layout), kept in step with the files by
path and stat signature: each query asks the store for the listing its cache's refresh
found on disk (:meth:`kexp.Store.current_listing`), and reads again only the files whose
signature differs from the one the index read them at; a file changed within
:data:`RACY_NS` of being read is read again next time. A create, which must stay fast,
checks folders instead (:meth:`RetrievalIndex.session` with ``quick=True``): a folder
whose own signature is unchanged (no file added, removed or renamed in it) is trusted,
so a file edited in place since the last query is compared as it was then; what the
check reports is read again from the files first. The index is an optimisation: one
that cannot be written (a read-only store, another process holding it too long) is
brought up to date in memory for this query, and a damaged one is rebuilt.
"""

from __future__ import annotations

import contextlib
import dataclasses
import hashlib
import marshal
import math
import os
import re
import sqlite3
import time
import warnings
import zlib
from array import array
from collections.abc import Callable, Iterable, Iterator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, NamedTuple, TypeVar

from kexp.dedupe import (
    Repeat,
    code_shingles,
    is_matchable,
    key_of_normalized,
    normalize_code_change,
    remeasure_message,
    repeat_message,
    shingle_similarity,
    shingles_of_normalized,
)
from kexp.errors import KexpError, NearDuplicateWarning, RemeasureWarning, RepeatedChangeWarning
from kexp.fileformat import FileFormatError
from kexp.lessons import key_insight
from kexp.model import attach, outcome_of
from kexp.query import below_best_combined
from kexp.validate import EXPERIMENT_NAME, check_bytes, read_and_check, read_file_and_stat

if TYPE_CHECKING:
    from kexp.index import Listing
    from kexp.model import KernelExperiment
    from kexp.settings import Settings
    from kexp.storeview import StoreView

#: Bump when what the index holds changes: the file name changes with it.
LAYOUT = 4
#: A file modified this recently (ns) before it is read is read again next time.
RACY_NS = 2_000_000_000
#: BM25 weights of the columns: summary, description, key insight, operator, code.
COLUMN_WEIGHTS = (3.0, 1.0, 2.0, 1.0, 1.0)
#: How much a near-duplicate's similarity adds to its relevance (the best text match
#: scores 1.0).
NEAR_DUPLICATE_WEIGHT = 2.0
#: The near-duplicate search is exact while the shingles it looks up are held by at most
#: this many changes in all; beyond, it asks the LSH bands (see Session.near_duplicates).
EXACT_POSTINGS = 20_000
#: One-permutation MinHash of a change's shingles: this many bins, banded by BAND_BINS.
MINHASH_BINS = 24
BAND_BINS = 3
#: How many BM25 candidates are ranked again with the near-duplicate similarity.
CANDIDATES = 200
#: At most this many words of a query are looked up (a diff holds hundreds).
MAX_QUERY_TERMS = 32
#: A word held by more than this share of the experiments (and by more than
#: :data:`COMMON_MIN` of them) is too common to rank them by (its BM25 weight is small,
#: and scoring every experiment holding it is not): it is left out of the query, but
#: for the :data:`RAREST_KEPT` rarest words of the query.
COMMON_SHARE = 0.1
COMMON_MIN = 1000
RAREST_KEPT = 3
#: Below this similarity a shared shingle does not count as related code.
RELATED_CODE_SIMILARITY = 0.2

#: Words never searched for: common English, and the headings every description repeats.
STOP_WORDS = frozenset(
    """
    a an and are as at be been but by can did do does for from had has have how i if in
    into is it its itself no not of on once only or our out over per so such than that the
    their them then there these they this those through to too under up us use used using
    via was we were what when where which while who why will with would you your
    approach result results worked work failed fail key insight insights why try tried
    """.split()  # noqa: SIM905 - a paragraph of words reads better than a list
)
#: Words of the trade that mean the same, or nearly: a query holding one searches for all.
SYNONYMS = (
    ("lds", "shared", "smem", "scratchpad"),
    ("warp", "wavefront", "wave", "subgroup"),
    ("vectorize", "vectorized", "vector", "vec", "uint4", "float4", "dwordx4"),
    ("unroll", "unrolled", "unrolling"),
    ("register", "registers", "vgpr", "vgprs", "sgpr", "sgprs", "spill", "spills"),
    ("fuse", "fused", "fusion", "fusing"),
    ("coalesce", "coalesced", "coalescing"),
    ("prefetch", "preload", "prefetching"),
    ("atomic", "atomics", "atomicadd", "atomic_add"),
    ("reduce", "reduction", "reductions"),
    ("splitk", "split"),
    ("mfma", "wmma", "mma", "tensor", "matrix"),
    ("barrier", "syncthreads", "sync", "__syncthreads"),
    ("bf16", "bfloat16"),
    ("fp16", "half"),
    ("fp8", "e4m3", "e5m2", "float8"),
    ("tile", "tiling", "tiled"),
    ("occupancy", "waves"),
    ("shuffle", "shfl", "dpp"),
    ("nontemporal", "streaming", "non-temporal"),
    ("launch", "grid"),
    ("persistent", "stream-k", "streamk"),
)
_SYNONYM_OF = {word: group for group in SYNONYMS for word in group}
_D = TypeVar("_D", "Doc", "Light")
_WORD = re.compile(r"[A-Za-z][A-Za-z0-9]*|[0-9]+")
_CASE_CHANGE = re.compile(r"(?<=[a-z0-9])(?=[A-Z])|(?<=[A-Z])(?=[A-Z][a-z])")
_SIGNATURE = array("q")
_NO_SIGNATURE = array("q", (-1, -1, -1, -1)).tobytes()
_SIGNATURE_SIZE = len(_NO_SIGNATURE)

_TABLES = (
    "CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL)",
    # A folder as the index last saw it: its own signature, sub-folders, names and
    # the signature each file was read at (none for a file to read again).
    """CREATE TABLE IF NOT EXISTS folders (
        folder TEXT PRIMARY KEY,
        listed_at BLOB NOT NULL,
        subfolders BLOB NOT NULL,
        digest TEXT NOT NULL,
        names BLOB NOT NULL,
        signatures BLOB NOT NULL
    )""",
    # One row per valid experiment file: what queries filter on.
    """CREATE TABLE IF NOT EXISTS docs (
        doc INTEGER PRIMARY KEY,
        path TEXT NOT NULL UNIQUE,
        id TEXT NOT NULL,
        operator_lc TEXT NOT NULL,
        dtype_lc TEXT NOT NULL,
        env_lc TEXT NOT NULL,
        dtype_sig TEXT NOT NULL,
        env TEXT NOT NULL,
        code_hash TEXT,
        shingle_count INTEGER NOT NULL,
        pid TEXT NOT NULL,
        change_summary TEXT NOT NULL,
        score REAL NOT NULL,
        status TEXT NOT NULL,
        is_buggy INTEGER NOT NULL,
        created_at TEXT NOT NULL,
        combines TEXT NOT NULL,
        ci_low REAL,
        ci_high REAL
    )""",
    # What is read of the experiments a query returns (apart: scans read docs only).
    """CREATE TABLE IF NOT EXISTS bodies (
        doc INTEGER PRIMARY KEY, shingles BLOB NOT NULL, data BLOB NOT NULL
    )""",
    "CREATE INDEX IF NOT EXISTS docs_by_id ON docs (id)",
    "CREATE INDEX IF NOT EXISTS docs_by_code_hash ON docs (code_hash)",
    # The light rows of an operator, read from this index alone (contiguous pages).
    """CREATE INDEX IF NOT EXISTS docs_by_operator ON docs (
        operator_lc, path, id, pid, change_summary, score, status, is_buggy, dtype_sig,
        env, created_at, combines, ci_low, ci_high
    )""",
    # How many experiments hold each operator, dtype and env (and how it is spelled).
    """CREATE TABLE IF NOT EXISTS facets (
        kind TEXT NOT NULL, value TEXT NOT NULL, docs INTEGER NOT NULL,
        PRIMARY KEY (kind, value)
    ) WITHOUT ROWID""",
    """CREATE TABLE IF NOT EXISTS postings (
        key INTEGER NOT NULL, doc INTEGER NOT NULL, PRIMARY KEY (key, doc)
    ) WITHOUT ROWID""",
    "CREATE TABLE IF NOT EXISTS key_counts (key INTEGER PRIMARY KEY, docs INTEGER NOT NULL)",
    # The LSH bands of each change's shingles (see shingle_bands).
    """CREATE TABLE IF NOT EXISTS bands (
        key INTEGER NOT NULL, doc INTEGER NOT NULL, PRIMARY KEY (key, doc)
    ) WITHOUT ROWID""",
    """CREATE VIRTUAL TABLE IF NOT EXISTS fts USING fts5(
        summary, description, insight, operator, code,
        tokenize = 'porter unicode61'
    )""",
)


def _header() -> str:
    from kexp import __version__

    return f"kexp-retrieval/{LAYOUT} kexp={__version__} python-marshal={marshal.version}"


def index_file_name() -> str:
    """The index's file name in ``.kexp/``: one per kexp version and layout."""
    return f"retrieval-{zlib.crc32(_header().encode()):08x}.sqlite"


# --- what the index holds of an experiment ---------------------------------------------


class Doc(NamedTuple):
    """What retrieval and ``kexp context`` need of one valid experiment file."""

    id: str
    pid: str
    change_summary: str
    score: float
    status: str
    is_buggy: bool
    operator_sig: str
    dtype_sig: str
    env: str
    created_at: str
    tags: tuple[str, ...]
    combines: tuple[str, ...]
    #: The 95% interval of the score ``(low, high)``, or ``()`` when it has none.
    score_ci: tuple[float, ...]
    key_insight: str
    #: (config, speedup) of every entry of ``results`` that has both.
    results: tuple[tuple[str, float], ...]
    #: The file, relative to ``experiments/``.
    path: str
    #: Derived: it combines others and scores below the best of them.
    interference: bool = False

    def outcome(self, settings: Settings) -> str:
        """The outcome, derived as for an experiment (see :func:`kexp.model.outcome_of`)."""
        return outcome_of(self, settings)  # type: ignore[arg-type]


class Light(NamedTuple):
    """The front-matter :func:`kexp.model.outcome_of` and a listing need, read from the
    index's table without the rest of the record (see :meth:`Session.light`)."""

    path: str
    id: str
    pid: str
    change_summary: str
    score: float
    status: str
    is_buggy: bool
    dtype_sig: str
    env: str
    created_at: str
    combines: tuple[str, ...]
    score_ci: tuple[float, ...]
    interference: bool = False

    def outcome(self, settings: Settings) -> str:
        """The outcome, derived as for an experiment (see :func:`kexp.model.outcome_of`)."""
        return outcome_of(self, settings)  # type: ignore[arg-type]


_LIGHT_COLUMNS = (
    "d.path, d.id, d.pid, d.change_summary, d.score, d.status, d.is_buggy, d.dtype_sig, "
    "d.env, d.created_at, d.combines, d.ci_low, d.ci_high"
)


def _light(row: tuple[Any, ...]) -> Light:
    path, exp_id, pid, summary, score, status, buggy, dtype, env, created, combines, low, high = row
    interval = () if low is None or high is None else (float(low), float(high))
    return Light(
        path,
        exp_id,
        pid,
        summary,
        float(score),
        status,
        bool(buggy),
        dtype,
        env,
        created,
        tuple(combines.split()),
        interval,
    )


def score_interval(exp: Any) -> tuple[float, float] | None:
    """The 95% interval ``(low, high)`` of an experiment's score, when it records one:
    its ``score_ci`` field (or front-matter key), two numbers."""
    found = getattr(exp, "score_ci", None)
    if not found:
        extra = getattr(exp, "extra_fields", None)
        found = extra.get("score_ci") if isinstance(extra, dict) else None
    if (
        isinstance(found, (list, tuple))
        and len(found) == 2
        and all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in found)
    ):
        return float(found[0]), float(found[1])
    return None


def code_words(code_change: str) -> str:
    """The distinct words of a code change's added and removed lines, identifiers split
    at ``_`` and at case changes: the ``code`` column of the index."""
    return _words_of_normalized(normalize_code_change(code_change))


def _words_of_normalized(normalized: str) -> str:
    """The distinct words of the changed lines, in order of appearance."""
    if not is_matchable(normalized):
        return ""
    lines = [line for line in normalized.split("\n") if line[:1] in ("+", "-")]
    text = " ".join(line[1:] for line in lines) if lines else normalized.replace("@@", " ")
    words = _WORD.findall(_CASE_CHANGE.sub(" ", text.replace("_", " ")))
    return " ".join(dict.fromkeys(words))


def shingle_bands(shingles: Iterable[int]) -> list[int]:
    """The LSH band keys of a shingle set: a one-permutation MinHash (each shingle goes
    to bin ``h mod`` :data:`MINHASH_BINS`, a bin keeps its least ``h div`` bins; an
    empty bin takes the next filled bin's value and the distance to it), cut into bands
    of :data:`BAND_BINS` bins, each band hashed. Two sets of similarity s agree on one
    band with probability s³, on one of the 8 with 1 - (1 - s³)⁸."""
    bins: list[int | None] = [None] * MINHASH_BINS
    for shingle in shingles:
        value = shingle & 0xFFFFFFFF
        slot, rank = value % MINHASH_BINS, value // MINHASH_BINS
        known = bins[slot]
        if known is None or rank < known:
            bins[slot] = rank
    if all(value is None for value in bins):
        return []
    dense: list[tuple[int, int]] = []
    for slot in range(MINHASH_BINS):
        step = 0
        while bins[(slot + step) % MINHASH_BINS] is None:
            step += 1
        found = bins[(slot + step) % MINHASH_BINS]
        assert found is not None
        dense.append((found, step))
    return [
        zlib.crc32(f"{band}:{dense[band * BAND_BINS : (band + 1) * BAND_BINS]}".encode())
        for band in range(MINHASH_BINS // BAND_BINS)
    ]


class _Entry(NamedTuple):
    """One file as read for the index: its values, or None when it is not valid."""

    path: str
    signature: bytes
    values: tuple[Any, ...] | None
    texts: tuple[str, str, str, str, str]
    code_hash: str | None
    shingles: bytes
    bands: bytes = b""


_INVALID = ("", "", "", "", "")


def _entry(path: str, relative: str, data: bytes, signature: bytes, settings: Settings) -> _Entry:
    """The entry of one file's bytes (invalid when the file is not a valid experiment)."""
    checked = check_bytes(data, Path(path), settings)
    if not checked.ok:
        return _Entry(relative, signature, None, _INVALID, None, b"")
    return entry_of(checked.experiment(), relative, signature)


def entry_of(exp: KernelExperiment, relative: str, signature: bytes = b"") -> _Entry:
    """What the index holds of one valid experiment (its file ``relative`` to
    ``experiments/``)."""
    insight = key_insight(exp.detailed_description)
    interval = score_interval(exp)
    results = tuple(
        (str(r["config"]), float(r["speedup"]))
        for r in exp.results
        if isinstance(r, dict)
        and "config" in r
        and isinstance(r.get("speedup"), (int, float))
        and not isinstance(r.get("speedup"), bool)
    )
    values = (
        exp.id,
        exp.pid,
        exp.change_summary,
        float(exp.score),
        exp.status,
        bool(exp.is_buggy),
        exp.operator_sig,
        exp.dtype_sig,
        exp.env,
        exp.created_at,
        tuple(str(t) for t in exp.tags),
        tuple(str(c) for c in exp.combines),
        interval or (),
        insight,
        results,
        relative,
    )
    description = exp.detailed_description
    if exp.error_message:
        description += "\n" + exp.error_message
    normalized = normalize_code_change(exp.code_change)
    texts = (
        exp.change_summary,
        description,
        insight,
        _CASE_CHANGE.sub(" ", f"{exp.operator_sig} {exp.dtype_sig} {exp.env}"),
        _words_of_normalized(normalized),
    )
    found = sorted(shingles_of_normalized(normalized))
    shingles = array("q", found).tobytes()
    bands = array("q", shingle_bands(found)).tobytes()
    key = key_of_normalized(normalized)
    return _Entry(relative, signature, values, texts, key, shingles, bands)


def _read_entries(base: str, relatives: Sequence[str], settings: Settings) -> list[_Entry]:
    """Read and index files (paths relative to ``base``); a file that cannot be read is
    an invalid entry stored with no signature (read again next time)."""
    horizon = time.time_ns() - RACY_NS
    out: list[_Entry] = []
    for relative in relatives:
        path = base + relative
        try:
            data, info = read_file_and_stat(path, settings)
        except (OSError, FileFormatError):
            out.append(_Entry(relative, _NO_SIGNATURE, None, _INVALID, None, b""))
            continue
        if info.st_mtime_ns >= horizon or info.st_ctime_ns >= horizon:
            signature = _NO_SIGNATURE  # racily clean: read again next time
        else:
            signature = array(
                "q", (info.st_mtime_ns, info.st_size, info.st_ino, info.st_ctime_ns)
            ).tobytes()
        out.append(_entry(path, relative, data, signature, settings))
    return out


# --- the index ------------------------------------------------------------------------------


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

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready data; the interval and similarity only when there is one."""
        data: dict[str, Any] = {
            "id": self.id,
            "relevance": self.relevance,
            "similarity": self.similarity,
            "score": self.score,
            "score_ci": list(self.score_ci) if self.score_ci else None,
            "outcome": self.outcome,
            "change_summary": self.change_summary,
            "key_insight": self.key_insight,
            "operator_sig": self.operator_sig,
            "dtype_sig": self.dtype_sig,
            "env": self.env,
        }
        return {k: v for k, v in data.items() if v is not None}


class Session:
    """The retrieval index brought up to date, open for queries (see
    :meth:`RetrievalIndex.session`)."""

    def __init__(
        self, connection: sqlite3.Connection, store: StoreView, index: RetrievalIndex
    ) -> None:
        self._connection = connection
        self.store = store
        self.settings = store.settings
        self.index = index
        self._count: int | None = None

    def close(self) -> None:
        """Close the index."""
        self._connection.close()

    # --- documents ---------------------------------------------------------------------

    def _docs(self, sql: str, parameters: Sequence[Any] = ()) -> list[Doc]:
        return [
            Doc(*marshal.loads(data))
            for (data,) in self._connection.execute(sql, parameters).fetchall()
        ]

    def documents(
        self, *, operator: str | None = None, dtype: str | None = None, env: str | None = None
    ) -> list[Doc]:
        """Every valid experiment whose operator, dtype and env hold these substrings
        (case-insensitive, as the query filters), interference marked, oldest first."""
        where, parameters = _substring_filter(operator, dtype, env, table="d.")
        return self.marked(
            _chronological(
                self._docs(
                    f"SELECT b.data FROM docs d JOIN bodies b ON b.doc = d.doc WHERE 1 = 1{where}",
                    parameters,
                )
            )
        )

    def light(
        self, *, operator: str | None = None, dtype: str | None = None, env: str | None = None
    ) -> list[Light]:
        """:meth:`documents` as :class:`Light` rows (no record read): faster for many.
        The operators holding ``operator`` are looked up among the store's
        (:meth:`facet`), their rows read from an index."""
        if operator is None:
            operators = [value.lower() for value, _ in self.facet("operator")]
        else:
            wanted = operator.lower()
            operators = sorted(
                {value.lower() for value, _ in self.facet("operator") if wanted in value.lower()}
            )
        rows = _in_chunks(
            self._connection,
            f"SELECT {_LIGHT_COLUMNS} FROM docs d INDEXED BY docs_by_operator "
            "WHERE d.operator_lc IN ({marks})",
            operators,
        )
        found = [_light(row) for row in rows]
        if dtype is not None or env is not None:
            found = [
                d
                for d in found
                if (dtype is None or dtype.lower() in d.dtype_sig.lower())
                and (env is None or env.lower() in d.env.lower())
            ]
        return self.marked(_chronological(found))

    def facet(self, kind: str) -> list[tuple[str, int]]:
        """(value, how many experiments hold it) of every ``operator``, ``dtype`` or
        ``env`` of the store, as spelled in the files, most common first."""
        rows = self._connection.execute(
            "SELECT value, docs FROM facets WHERE kind = ? AND docs > 0", (kind,)
        ).fetchall()
        return sorted(((str(v), int(n)) for v, n in rows), key=lambda item: (-item[1], item[0]))

    def by_ids(self, ids: Iterable[str]) -> dict[str, Doc]:
        """The experiments with these ids (the first file of an id, in path order)."""
        wanted = sorted(set(ids))
        found: dict[str, Doc] = {}
        for start in range(0, len(wanted), 500):
            chunk = wanted[start : start + 500]
            marks = ",".join("?" * len(chunk))
            docs = self._docs(
                f"SELECT b.data FROM docs d JOIN bodies b ON b.doc = d.doc WHERE d.id IN ({marks})",
                chunk,
            )
            for doc in sorted(docs, key=lambda d: _path_order(d.path)):
                found.setdefault(doc.id, doc)
        return found

    def marked(self, docs: list[_D]) -> list[_D]:
        """``docs`` with ``interference`` set (scoring below the best of those combined)."""
        combined = {i for doc in docs for i in doc.combines}
        if not combined:
            return docs
        scores: dict[str, float] = {}
        for exp_id, _path, score in sorted(
            _in_chunks(
                self._connection,
                "SELECT id, path, score FROM docs WHERE id IN ({marks})",
                sorted(combined),
            ),
            key=lambda row: (row[0], _path_order(row[1])),
        ):
            scores.setdefault(exp_id, float(score))  # the first file of an id, as queries
        return [
            doc._replace(interference=True)
            if doc.combines and below_best_combined(doc.score, doc.combines, scores)
            else doc
            for doc in docs
        ]

    def distinct(self, column: str) -> list[tuple[str, str, int]]:
        """(lowercased value, its most common spelling, how many experiments) of
        ``dtype_sig`` or ``env`` over the whole store, most common first."""
        if column not in ("dtype_sig", "env"):
            raise ValueError(column)
        totals: dict[str, int] = {}
        spellings: dict[str, tuple[int, str]] = {}
        for spelling, count in self.facet("dtype" if column == "dtype_sig" else "env"):
            key = spelling.lower()
            totals[key] = totals.get(key, 0) + count
            best = spellings.get(key)
            if best is None or (-count, spelling) < (-best[0], best[1]):
                spellings[key] = (count, spelling)
        return sorted(
            ((key, spellings[key][1], total) for key, total in totals.items()),
            key=lambda item: (-item[2], item[0]),
        )

    def count(self) -> int:
        """How many valid experiments the index holds."""
        if self._count is None:
            self._count = int(self._connection.execute("SELECT COUNT(*) FROM docs").fetchone()[0])
        return self._count

    # --- relevance ---------------------------------------------------------------------

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
        BM25 (higher is better), at most ``limit``."""
        words = self.telling_words(words)
        if not words:
            return {}
        expression = " OR ".join(f'"{word}"' for word in words)
        where, parameters = _substring_filter(operator, dtype, env, table="d.")
        weights = ", ".join(str(w) for w in COLUMN_WEIGHTS)
        rows = self._connection.execute(
            f"SELECT d.path, bm25(fts, {weights}) AS rank FROM fts JOIN docs d "
            f"ON d.doc = fts.rowid WHERE fts MATCH ?{where} ORDER BY rank, d.path LIMIT ?",
            [expression, *parameters, limit],
        ).fetchall()
        return {str(path): -float(rank) for path, rank in rows}

    def telling_words(self, words: Sequence[str]) -> list[str]:
        """The words of a query worth asking for: those some experiment holds, without
        the too common ones (see :data:`COMMON_SHARE`), in alphabetical order."""
        held = {}
        for word in dict.fromkeys(words):
            (count,) = self._connection.execute(
                "SELECT COUNT(*) FROM fts WHERE fts MATCH ?", (f'"{word}"',)
            ).fetchone()
            if count:
                held[word] = int(count)
        rarest = sorted(held, key=lambda w: (held[w], w))
        limit = max(COMMON_MIN, COMMON_SHARE * self.count())
        kept = rarest[:RAREST_KEPT] + [w for w in rarest[RAREST_KEPT:] if held[w] <= limit]
        return sorted(kept)

    def near_duplicates(
        self, shingles: frozenset[int], threshold: float
    ) -> list[tuple[str, float]]:
        """(path, similarity) of every experiment whose code change's shingles are at
        least ``threshold`` similar (Jaccard) to ``shingles``, most similar first.

        A change that similar holds at least ``threshold`` of the query's shingles, so it
        holds one of the query's rarest ``|Q| - ⌈t·|Q|⌉ + 1``: when those are held by at
        most :data:`EXACT_POSTINGS` changes in all, they are looked up and the answer is
        exact. Otherwise (shingles common to many changes, as in a store whose diffs
        repeat the same lines) the candidates are the changes sharing one of the query's
        LSH bands (:func:`shingle_bands`): found with a probability of
        1 - (1 - s³)⁸ for a similarity s (0.66 at 0.5, 0.98 at 0.8, over 0.999 at 0.9).
        Each candidate's similarity is computed."""
        if not shingles or threshold <= 0:
            return []
        keys = sorted(shingles)
        counts = dict(
            _in_chunks(
                self._connection, "SELECT key, docs FROM key_counts WHERE key IN ({marks})", keys
            )
        )
        held = sorted((k for k in keys if counts.get(k)), key=lambda k: (counts[k], k))
        needed = len(keys) - math.ceil(threshold * len(keys)) + 1
        probe = held[: max(0, needed)]
        if not probe:
            return []
        table = "postings"
        if sum(counts[k] for k in probe) > EXACT_POSTINGS:
            table, probe = "bands", shingle_bands(shingles)
        marks = ",".join("?" * len(probe))
        low = math.ceil(threshold * len(keys) - 1e-9)
        high = math.floor(len(keys) / threshold + 1e-9)
        rows = self._connection.execute(
            f"SELECT d.path, b.shingles FROM docs d JOIN bodies b ON b.doc = d.doc WHERE d.doc IN "
            f"(SELECT DISTINCT doc FROM {table} WHERE key IN ({marks})) "
            f"AND d.shingle_count BETWEEN ? AND ?",
            [*probe, max(1, low), high],
        ).fetchall()
        found: list[tuple[str, float]] = []
        query = set(keys)
        for path, blob in rows:
            other = array("q")
            other.frombytes(blob)
            shared = len(query.intersection(other))
            similarity = shared / (len(query) + len(other) - shared)
            if similarity >= threshold:
                found.append((str(path), similarity))
        found.sort(key=lambda item: (-item[1], _path_order(item[0])))
        return found

    def same_change(self, key: str) -> list[str]:
        """Paths of the experiments whose normalised code change hashes to ``key``."""
        rows = self._connection.execute("SELECT path FROM docs WHERE code_hash = ?", (key,))
        return sorted((str(path) for (path,) in rows), key=_path_order)

    def shingles_of(self, path: str) -> frozenset[int]:
        """The shingles of one indexed experiment's code change."""
        found = self._connection.execute(
            "SELECT b.shingles FROM docs d JOIN bodies b ON b.doc = d.doc WHERE d.path = ?",
            (path,),
        ).fetchone()
        if found is None:
            return frozenset()
        keys = array("q")
        keys.frombytes(found[0])
        return frozenset(keys)

    def docs_at(self, paths: Iterable[str]) -> dict[str, Doc]:
        """The experiments of these files (relative paths), interference marked."""
        wanted = sorted(set(paths))
        docs: list[Doc] = []
        for start in range(0, len(wanted), 500):
            chunk = wanted[start : start + 500]
            marks = ",".join("?" * len(chunk))
            docs += self._docs(
                f"SELECT b.data FROM docs d JOIN bodies b ON b.doc = d.doc "
                f"WHERE d.path IN ({marks})",
                chunk,
            )
        return {doc.path: doc for doc in self.marked(docs)}

    def match(self, doc: Doc, relevance: float, similarity: float | None) -> Match:
        """The :class:`Match` of one document."""
        interval = score_interval(doc)
        return Match(
            id=doc.id,
            relevance=round(relevance, 4),
            similarity=None if similarity is None else round(similarity, 4),
            score=doc.score,
            score_ci=interval,
            outcome=doc.outcome(self.settings),
            change_summary=doc.change_summary,
            key_insight=doc.key_insight,
            operator_sig=doc.operator_sig,
            dtype_sig=doc.dtype_sig,
            env=doc.env,
            path=doc.path,
        )

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
            p: s
            for p, s in self.near_duplicates(shingles, RELATED_CODE_SIMILARITY)
            if p not in skip
        }
        for path, similarity in near.items():
            relevance[path] = relevance.get(path, 0.0) + NEAR_DUPLICATE_WEIGHT * similarity
        docs = [
            doc
            for doc in self.docs_at(relevance).values()
            if _passes(doc, operator, dtype, env) and relevance[doc.path] > 0
        ]
        docs.sort(key=lambda d: (-round(relevance[d.path], 9), d.created_at, d.id, d.path))
        return [
            self.match(d, relevance[d.path], near.get(d.path, 0.0) if shingles else None)
            for d in docs[: max(0, limit)]
        ]


def _passes(doc: Doc, operator: str | None, dtype: str | None, env: str | None) -> bool:
    """Whether ``doc`` passes the substring filters (as the query filters do)."""
    return (
        (operator is None or operator.lower() in doc.operator_sig.lower())
        and (dtype is None or dtype.lower() in doc.dtype_sig.lower())
        and (env is None or env.lower() in doc.env.lower())
    )


# A module-level helper, not a method: the same filter for two table aliases.
def _substring_filter(
    operator: str | None, dtype: str | None, env: str | None, table: str = ""
) -> tuple[str, list[Any]]:
    where, parameters = "", []
    for column, value in (("operator_lc", operator), ("dtype_lc", dtype), ("env_lc", env)):
        if value is not None:
            where += f" AND instr({table}{column}, ?) > 0"
            parameters.append(str(value).lower())
    return where, parameters


def _path_order(path: str) -> str:
    return path.replace(os.sep, "\0")


def _chronological(docs: list[_D]) -> list[_D]:
    return sorted(docs, key=lambda d: (d.created_at, d.id, _path_order(d.path)))


def query_words(text: str) -> list[str]:
    """The words FTS5 is asked for: lowercased, identifiers split at case changes, stop
    words dropped, synonyms added, each once, in order, at most :data:`MAX_QUERY_TERMS`."""
    words: list[str] = []
    seen: set[str] = set()
    for raw in _WORD.findall(_CASE_CHANGE.sub(" ", text)):
        word = raw.lower()
        if word in STOP_WORDS or word in seen:
            continue
        for found in (word, *_SYNONYM_OF.get(word, ())):
            if found not in seen and _WORD.fullmatch(found):
                seen.add(found)
                words.append(found)
    return words[:MAX_QUERY_TERMS]


# --- keeping the index in step with the files -------------------------------------------

#: A folder's head as the index holds it: (its own signature, its sub-folders, the digest
#: of its names and of the signatures its files were read at).
_Head = tuple[bytes, tuple[str, ...], str]
#: A folder's names and the signatures its files were read at, as the index holds them.
_Row = tuple[tuple[str, ...], bytes]


def _digest(names: Sequence[str], signatures: bytes) -> str:
    """What tells two listings of a folder apart: a hash of its names and signatures."""
    digest = hashlib.sha1("\0".join(names).encode("utf-8", "surrogatepass"))
    digest.update(signatures)
    return digest.hexdigest()


@dataclasses.dataclass
class _Plan:
    """What differs between the files on disk and the index."""

    #: Folders whose row changes (to their listing on disk).
    folders: dict[str, Listing] = dataclasses.field(default_factory=dict)
    #: Folders gone from disk.
    gone: list[str] = dataclasses.field(default_factory=list)
    #: Files to read (relative to experiments/).
    read: list[str] = dataclasses.field(default_factory=list)
    #: Files whose rows go (gone from disk, or read again).
    removed: list[str] = dataclasses.field(default_factory=list)


def _signature_at(signatures: bytes, index: int) -> bytes:
    return signatures[index * _SIGNATURE_SIZE : (index + 1) * _SIGNATURE_SIZE]


def _plan(
    listing: dict[str, Listing],
    heads: dict[str, _Head],
    present: Iterable[str],
    rows: Callable[[list[str]], dict[str, _Row]],
) -> _Plan:
    """Compare the folders of ``listing`` as found on disk with the index's; folders in
    ``present`` but not in ``listing`` are unchanged, folders the index holds that are
    not ``present`` are gone. ``rows(folders)`` reads the index's names and signatures
    of folders whose digest differs."""
    fullmatch = EXPERIMENT_NAME.fullmatch
    plan = _Plan()
    differing = []
    for folder, (listed_at, subfolders, names, signatures) in listing.items():
        head = heads.get(folder)
        if head is not None and head[2] == _digest(names, signatures):
            if (head[0], head[1]) != (listed_at, subfolders):
                plan.folders[folder] = (listed_at, subfolders, names, signatures)
            continue
        differing.append(folder)
    seen = set(present) | set(listing)
    plan.gone = sorted(folder for folder in heads if folder not in seen)
    stored = rows(differing + plan.gone)
    for folder in differing:
        listed_at, subfolders, names, signatures = listing[folder]
        plan.folders[folder] = listing[folder]
        before: dict[str, bytes] = {}
        if folder in stored:
            known_names, known_signatures = stored[folder]
            before = {n: _signature_at(known_signatures, i) for i, n in enumerate(known_names)}
        for index, name in enumerate(names):
            previous = before.pop(name, None)
            if fullmatch(name) is None:
                continue
            signature = _signature_at(signatures, index)
            if previous != signature or signature == _NO_SIGNATURE:
                plan.read.append(folder + name)
                if previous is not None:
                    plan.removed.append(folder + name)
        plan.removed.extend(folder + name for name in before if fullmatch(name))
    for folder in plan.gone:
        if folder in stored:
            plan.removed.extend(folder + name for name in stored[folder][0] if fullmatch(name))
    return plan


def _settled(signature: bytes, horizon: int) -> bytes:
    """``signature``, or none when it was taken less than :data:`RACY_NS` ago."""
    values = array("q")
    values.frombytes(signature)
    if len(values) != 4 or values[0] >= horizon or values[3] >= horizon:
        return _NO_SIGNATURE
    return signature


class RetrievalIndex:
    """The retrieval index of one store (see the module documentation)."""

    def __init__(self, store: StoreView) -> None:
        self.store = store
        self.settings = store.settings
        self._base = str(store.experiments_dir).rstrip(os.sep) + os.sep

    @contextlib.contextmanager
    def session(self, *, quick: bool = False) -> Iterator[Session]:
        """The index brought up to date with the files, open for queries.

        ``quick`` checks folder signatures, not every file (see the module
        documentation; :meth:`Session.refresh_files` then checks the files a query
        reports). A store at a revision has no cache: its index is built in memory from
        its experiments.
        """
        listing: dict[str, Listing] | None = None
        if not quick or not self.store.is_working_tree:
            listing = self.store.current_listing()
            if listing is None:
                connection = self._in_memory_from_experiments()
                try:
                    yield Session(connection, self.store, self)
                finally:
                    connection.close()
                return
        connection = self._synced(listing)
        session = Session(connection, self.store, self)
        try:
            yield session
        finally:
            session.close()

    # --- the file ------------------------------------------------------------------------

    def _file(self) -> Path | None:
        try:
            return self.store.cache_dir / index_file_name()
        except (OSError, KexpError):
            return None

    def _open(self) -> sqlite3.Connection:
        """The index file (made if missing; a damaged one replaced), or an empty index
        in memory when the cache folder cannot be used."""
        path = self._file()
        for _ in range(2):
            if path is None:
                break
            try:
                connection = sqlite3.connect(path, timeout=30.0, isolation_level=None)
            except sqlite3.Error:
                break
            try:
                header = _read_header(connection)
                if header == _header():
                    return connection
                if header is None:
                    _create(connection)
                    return connection
            except sqlite3.Error:
                pass
            connection.close()
            with contextlib.suppress(OSError):
                path.unlink()  # damaged, or another layout under this name: rebuilt
        connection = sqlite3.connect(":memory:", isolation_level=None)
        _create(connection)
        return connection

    def _in_memory_from_experiments(self) -> sqlite3.Connection:
        connection = sqlite3.connect(":memory:", isolation_level=None)
        _create(connection)
        base = self.store.experiments_dir
        entries = []
        for exp in self.store.list_experiments():
            relative = os.path.relpath(exp.path, base) if exp.path else exp.id
            entries.append(entry_of(exp, relative))
        connection.execute("BEGIN")
        _insert(connection, entries)
        connection.execute("COMMIT")
        return connection

    # --- bringing it up to date ----------------------------------------------------------

    def _synced(self, listing: dict[str, Listing] | None) -> sqlite3.Connection:
        """The index, brought up to date with ``listing`` (every folder found on disk;
        None: walk the folders, trusting those whose own signature is unchanged).

        Changes are written folder by folder, in transactions of about
        :data:`BATCH_FILES` files read (so memory does not grow with the store, and
        other processes wait for short writes only)."""
        connection = self._open()
        try:
            heads = _heads(connection)
        except (sqlite3.Error, EOFError, ValueError, TypeError):
            connection.close()
            self._discard()
            connection = self._open()
            heads = {}
        if listing is None:
            listing, present = self._quick_listing(heads)
        else:
            present = set(listing)
        plan = _plan(listing, heads, present, lambda folders: _rows(connection, folders))
        return self._write(connection, plan)

    def _write(self, connection: sqlite3.Connection, plan: _Plan) -> sqlite3.Connection:
        """Carry ``plan`` out, batch by batch; the connection used (a copy in memory when
        the file cannot be written)."""
        for folders, gone, paths in _batches(plan):
            entries = {entry.path: entry for entry in self._read(paths)}
            part = {folder: plan.folders[folder] for folder in folders}
            try:
                self._apply(connection, part, gone, entries)
                continue
            except sqlite3.Error:
                pass
            # The file cannot be written now: bring a copy in memory up to date instead.
            connection = _in_memory_copy(connection)
            self._apply(connection, part, gone, entries)
        return connection

    def _discard(self) -> None:
        path = self._file()
        if path is not None:
            with contextlib.suppress(OSError):
                path.unlink()

    def _quick_listing(self, heads: dict[str, _Head]) -> tuple[dict[str, Listing], set[str]]:
        """The folders on disk, walked: those whose own signature is the index's are
        trusted (present, not listed); the others are listed and their files stat-ed."""
        from kexp.index import folder_signature, walk_folders

        found: dict[str, Listing] = {}
        present: set[str] = set()

        def visit(folder: str) -> Sequence[str]:
            stamp = folder_signature(self._base + folder)
            if stamp is None:
                return ()
            head = heads.get(folder)
            if head is not None and head[0] == stamp and stamp != _NO_SIGNATURE:
                present.add(folder)
                return head[1]
            listed = self._listing(folder, stamp)
            if listed is None:
                return ()
            present.add(folder)
            found[folder] = listed
            return listed[1]

        walk_folders(visit)
        return found, present

    def _listing(self, folder: str, stamp: bytes | None = None) -> Listing | None:
        """One folder as it is on disk now (None when it is not a folder)."""
        from kexp.index import folder_signature, list_folder, signatures

        path = self._base + folder
        stamp = stamp if stamp is not None else folder_signature(path)
        listed = list_folder(path) if stamp is not None else None
        if stamp is None or listed is None:
            return None
        names, subfolders = listed
        return (stamp, tuple(subfolders), tuple(names), signatures(path, names).tobytes())

    def refresh_files(self, session: Session, paths: Iterable[str]) -> bool:
        """Check the files ``paths`` (relative) against the disk, and bring their folders
        up to date in the index if any changed; True when something did."""
        folders = sorted({path[: path.rfind(os.sep) + 1] for path in paths})
        if not folders or not self.store.is_working_tree:
            return False  # a store at a revision is read whole, never stale
        connection = session._connection
        stored = _rows(connection, folders)
        heads = _heads(connection, folders)
        listing: dict[str, Listing] = {}
        for folder in folders:
            found = self._listing(folder)
            if found is not None:
                listing[folder] = found
        plan = _plan(listing, heads, listing, lambda wanted: stored)
        wanted = set(paths)
        if not (wanted & (set(plan.read) | set(plan.removed))):
            return False
        session._connection = self._write(connection, plan)
        return True

    def _read(self, relatives: list[str]) -> list[_Entry]:
        """Read and index files, in two processes when there are many (see
        :func:`kexp.index.in_two_processes`)."""
        from kexp.index import in_two_processes

        base, settings = self._base, self.settings

        def work(part: list[str]) -> list[tuple[Any, ...]]:
            return [tuple(entry) for entry in _read_entries(base, part, settings)]

        return [_Entry._make(item) for item in in_two_processes(work, relatives, len(relatives))]

    def _apply(
        self,
        connection: sqlite3.Connection,
        listing: dict[str, Listing],
        gone: list[str],
        read: dict[str, _Entry],
    ) -> None:
        """Write the differences between the folders of ``listing`` (and the ``gone``
        ones) and the index in one transaction, compared again with the index as it is
        now (another process may have written meanwhile); files no one read yet are read
        now."""
        horizon = time.time_ns() - RACY_NS
        connection.execute("BEGIN IMMEDIATE")
        try:
            heads = _heads(connection, [*listing, *gone])
            plan = _plan(listing, heads, listing, lambda folders: _rows(connection, folders))
            missing = [path for path in plan.read if path not in read]
            entries = dict(read)
            entries.update((entry.path, entry) for entry in self._read(missing))
            _delete(connection, plan.removed)
            _insert(connection, [entries[path] for path in plan.read])
            for folder in plan.gone:
                connection.execute("DELETE FROM folders WHERE folder = ?", (folder,))
            rows = []
            for folder, (listed_at, subfolders, names, signatures) in plan.folders.items():
                kept = bytearray(signatures)
                for index, name in enumerate(names):
                    entry = entries.get(folder + name)
                    if entry is not None:
                        at = index * _SIGNATURE_SIZE
                        known = _signature_at(signatures, index)
                        read_at = entry.signature if entry.signature == known else _NO_SIGNATURE
                        kept[at : at + _SIGNATURE_SIZE] = read_at
                rows.append(
                    (
                        folder,
                        _settled(listed_at, horizon),
                        marshal.dumps(tuple(subfolders)),
                        _digest(names, bytes(kept)),
                        marshal.dumps(tuple(names)),
                        bytes(kept),
                    )
                )
            connection.executemany(
                "INSERT OR REPLACE INTO folders "
                "(folder, listed_at, subfolders, digest, names, signatures) "
                "VALUES (?, ?, ?, ?, ?, ?)",
                rows,
            )
            connection.execute("COMMIT")
        except BaseException:
            with contextlib.suppress(sqlite3.Error):
                connection.execute("ROLLBACK")
            raise


#: Files read (and written) per transaction of a refresh.
BATCH_FILES = 4000


def _batches(plan: _Plan) -> Iterator[tuple[list[str], list[str], list[str]]]:
    """(folders, gone folders, files to read) of each transaction: whole folders, about
    :data:`BATCH_FILES` files read each; the folders gone in the first."""
    reads: dict[str, list[str]] = {}
    for path in plan.read:
        reads.setdefault(path[: path.rfind(os.sep) + 1], []).append(path)
    folders: list[str] = []
    paths: list[str] = []
    gone = list(plan.gone)
    for folder in sorted(plan.folders):
        folders.append(folder)
        paths += reads.get(folder, [])
        if len(paths) >= BATCH_FILES:
            yield folders, gone, paths
            folders, paths, gone = [], [], []
    if folders or gone:
        yield folders, gone, paths


def _in_memory_copy(connection: sqlite3.Connection) -> sqlite3.Connection:
    """A copy of the index in memory (an empty index if it cannot be read)."""
    memory = sqlite3.connect(":memory:", isolation_level=None)
    try:
        connection.backup(memory)
        if _read_header(memory) != _header():
            raise sqlite3.DatabaseError("not an index")
    except sqlite3.Error:
        memory.close()
        memory = sqlite3.connect(":memory:", isolation_level=None)
        _create(memory)
    connection.close()
    return memory


def _read_header(connection: sqlite3.Connection) -> str | None:
    """The index's header row; None for an empty database (a new file)."""
    tables = connection.execute("SELECT name FROM sqlite_master WHERE type = 'table'").fetchall()
    if not tables:
        return None
    found = connection.execute("SELECT value FROM meta WHERE key = 'header'").fetchone()
    return str(found[0]) if found is not None else ""


def _create(connection: sqlite3.Connection) -> None:
    """Make the tables (in one transaction: two processes may make them at once)."""
    connection.execute("BEGIN IMMEDIATE")
    try:
        for statement in _TABLES:
            connection.execute(statement)
        connection.execute(
            "INSERT OR IGNORE INTO meta (key, value) VALUES ('header', ?)", (_header(),)
        )
        connection.execute("COMMIT")
    except BaseException:
        with contextlib.suppress(sqlite3.Error):
            connection.execute("ROLLBACK")
        raise
    if _read_header(connection) != _header():
        raise sqlite3.DatabaseError("not a retrieval index of this kexp")


def _in_chunks(
    connection: sqlite3.Connection,
    sql: str,
    values: Sequence[Any],
    parameters: Sequence[Any] = (),
) -> list[tuple[Any, ...]]:
    """The rows of ``sql`` (holding ``IN ({marks})``, then the conditions that take
    ``parameters``) for every value, 500 at a time."""
    rows: list[tuple[Any, ...]] = []
    wanted = sorted(set(values))
    for start in range(0, len(wanted), 500):
        chunk = wanted[start : start + 500]
        marks = ",".join("?" * len(chunk))
        rows += connection.execute(sql.format(marks=marks), [*chunk, *parameters]).fetchall()
    return rows


def _heads(connection: sqlite3.Connection, only: Sequence[str] | None = None) -> dict[str, _Head]:
    """The folders' heads as the index holds them (all, or those named in ``only``)."""
    sql = "SELECT folder, listed_at, subfolders, digest FROM folders"
    found = (
        connection.execute(sql).fetchall()
        if only is None
        else _in_chunks(connection, sql + " WHERE folder IN ({marks})", only)
    )
    return {
        folder: (listed_at, marshal.loads(subfolders), digest)
        for folder, listed_at, subfolders, digest in found
    }


def _rows(connection: sqlite3.Connection, folders: Sequence[str]) -> dict[str, _Row]:
    """The names and read-at signatures of these folders, as the index holds them."""
    if not folders:
        return {}
    found = _in_chunks(
        connection,
        "SELECT folder, names, signatures FROM folders WHERE folder IN ({marks})",
        folders,
    )
    return {folder: (marshal.loads(names), signatures) for folder, names, signatures in found}


def _delete(connection: sqlite3.Connection, paths: Sequence[str]) -> None:
    """Remove the rows of these files (their shingles counted down)."""
    counts: dict[int, int] = {}
    facets: dict[tuple[str, str], int] = {}
    for path in paths:
        found = connection.execute(
            "SELECT d.doc, b.shingles, b.data FROM docs d JOIN bodies b ON b.doc = d.doc "
            "WHERE d.path = ?",
            (path,),
        ).fetchone()
        if found is None:
            continue
        doc, blob, data = found
        for facet in _facets_of(marshal.loads(data)):
            facets[facet] = facets.get(facet, 0) + 1
        keys = array("q")
        keys.frombytes(blob)
        for key in keys:
            counts[key] = counts.get(key, 0) + 1
        connection.executemany(
            "DELETE FROM postings WHERE key = ? AND doc = ?", [(key, doc) for key in keys]
        )
        connection.executemany(
            "DELETE FROM bands WHERE key = ? AND doc = ?",
            [(key, doc) for key in shingle_bands(keys)],
        )
        connection.execute("DELETE FROM fts WHERE rowid = ?", (doc,))
        connection.execute("DELETE FROM docs WHERE doc = ?", (doc,))
        connection.execute("DELETE FROM bodies WHERE doc = ?", (doc,))
    connection.executemany(
        "UPDATE key_counts SET docs = docs - ? WHERE key = ?", [(n, k) for k, n in counts.items()]
    )
    connection.execute("DELETE FROM key_counts WHERE docs <= 0")
    connection.executemany(
        "UPDATE facets SET docs = docs - ? WHERE kind = ? AND value = ?",
        [(n, kind, value) for (kind, value), n in facets.items()],
    )
    connection.execute("DELETE FROM facets WHERE docs <= 0")


def _facets_of(values: Sequence[Any]) -> tuple[tuple[str, str], ...]:
    """The (kind, value) facets of an experiment's index values."""
    return (("operator", str(values[6])), ("dtype", str(values[7])), ("env", str(values[8])))


def _insert(connection: sqlite3.Connection, entries: Sequence[_Entry]) -> None:
    """Add the rows of the valid entries (in a transaction: the next free row numbers
    are taken once)."""
    (last,) = connection.execute("SELECT COALESCE(MAX(doc), 0) FROM docs").fetchone()
    docs: list[tuple[Any, ...]] = []
    bodies: list[tuple[Any, ...]] = []
    texts: list[tuple[Any, ...]] = []
    postings: list[tuple[int, int]] = []
    bands: list[tuple[int, int]] = []
    counts: dict[int, int] = {}
    facets: dict[tuple[str, str], int] = {}
    for entry in entries:
        if entry.values is None:
            continue
        values = entry.values
        for facet in _facets_of(values):
            facets[facet] = facets.get(facet, 0) + 1
        last += 1
        keys = array("q")
        keys.frombytes(entry.shingles)
        docs.append(
            (
                last,
                entry.path,
                values[0],
                str(values[6]).lower(),
                str(values[7]).lower(),
                str(values[8]).lower(),
                str(values[7]),
                str(values[8]),
                entry.code_hash,
                len(keys),
                values[1],
                values[2],
                values[3],
                values[4],
                int(values[5]),
                values[9],
                " ".join(values[11]),
                values[12][0] if values[12] else None,
                values[12][1] if values[12] else None,
            )
        )
        bodies.append((last, entry.shingles, marshal.dumps(values)))
        texts.append((last, *entry.texts))
        postings.extend((key, last) for key in keys)
        band_keys = array("q")
        band_keys.frombytes(entry.bands)
        bands.extend((key, last) for key in band_keys)
        for key in keys:
            counts[key] = counts.get(key, 0) + 1
    connection.executemany(
        "INSERT INTO docs (doc, path, id, operator_lc, dtype_lc, env_lc, dtype_sig, env, "
        "code_hash, shingle_count, pid, change_summary, score, status, is_buggy, created_at, "
        "combines, ci_low, ci_high) "
        "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
        docs,
    )
    connection.executemany("INSERT INTO bodies (doc, shingles, data) VALUES (?, ?, ?)", bodies)
    connection.executemany(
        "INSERT INTO fts (rowid, summary, description, insight, operator, code) "
        "VALUES (?, ?, ?, ?, ?, ?)",
        texts,
    )
    connection.executemany("INSERT INTO postings (key, doc) VALUES (?, ?)", postings)
    connection.executemany("INSERT OR IGNORE INTO bands (key, doc) VALUES (?, ?)", bands)
    connection.executemany(
        "INSERT INTO key_counts (key, docs) VALUES (?, ?) "
        "ON CONFLICT (key) DO UPDATE SET docs = docs + excluded.docs",
        list(counts.items()),
    )
    connection.executemany(
        "INSERT INTO facets (kind, value, docs) VALUES (?, ?, ?) "
        "ON CONFLICT (kind, value) DO UPDATE SET docs = docs + excluded.docs",
        [(kind, value, n) for (kind, value), n in facets.items()],
    )


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
    documentation); ``operator``, ``dtype`` and ``env`` filter as in queries."""
    given = [name for name, value in (("text", text), ("diff", diff), ("id", exp_id)) if value]
    if len(given) != 1:
        raise KexpError("give one of: a text (what you plan), a diff, or an experiment id")
    exclude: list[str] = []
    if exp_id:
        exp = store.get_experiment(exp_id)
        relative = _relative(store, exp)
        exclude = [relative] if relative else []
        text = f"{exp.change_summary} {key_insight(exp.detailed_description)}"
        diff = exp.code_change
    index = RetrievalIndex(store)
    with index.session(quick=True) as session:

        def ask() -> list[Match]:
            return session.rank(
                text=text or "",
                code_change=diff or "",
                exclude_paths=exclude,
                operator=operator,
                dtype=dtype,
                env=env,
                limit=limit,
            )

        found = ask()
        # The quick check trusts unchanged folders: what is reported is checked again.
        if index.refresh_files(session, [match.path for match in found]):
            found = ask()
        return found


def _relative(store: StoreView, exp: KernelExperiment) -> str:
    if exp.path is None:
        return ""
    return os.path.relpath(exp.path, store.experiments_dir)


#: At most this many near-duplicates are read again and reported as tried before (every
#: identical change is).
MAX_REPORTED = 10


def tried_before(
    store: StoreView, code_change: str, *, exclude: Iterable[str] = ()
) -> list[Repeat]:
    """The experiments whose code change is ``code_change`` (identical once normalised,
    similarity 1.0: every one) or a near-duplicate of it (shingle similarity at least
    ``settings.near_duplicate_similarity``: the :data:`MAX_REPORTED` most similar):
    identical ones first, oldest first, then the most similar. Each is read again from
    its file before it is reported; ids in ``exclude`` are left out. Fast: the index's
    quick check (see the module documentation)."""
    return _tried_before(store, code_change, exclude, near=True)


def find_repeats(
    store: StoreView, code_change: str, *, exclude: Iterable[str] = ()
) -> list[Repeat]:
    """The experiments whose code change is ``code_change`` once normalised (its
    :func:`kexp.dedupe.code_key`), oldest first: the identical ones of
    :func:`tried_before`, from the same index; ids in ``exclude`` left out."""
    return _tried_before(store, code_change, exclude, near=False)


def _tried_before(
    store: StoreView, code_change: str, exclude: Iterable[str], *, near: bool
) -> list[Repeat]:
    """:func:`tried_before` (``near``), or its identical changes alone."""
    wanted = normalize_code_change(code_change)
    key = key_of_normalized(wanted)
    shingles = shingles_of_normalized(wanted) if near else frozenset()
    if key is None:
        return []  # a placeholder: no key, no shingles
    threshold = store.settings.near_duplicate_similarity
    skip = set(exclude)
    with RetrievalIndex(store).session(quick=True) as session:
        same = set(session.same_change(key))
        candidates: dict[str, float] = dict.fromkeys(same, 1.0)
        for path, similarity in session.near_duplicates(shingles, threshold):
            candidates.setdefault(path, similarity)
        ordered = sorted(candidates, key=lambda p: (-candidates[p], _path_order(p)))
        found: list[tuple[KernelExperiment, float, bool]] = []
        reported_near = 0
        for relative in ordered:
            if reported_near >= MAX_REPORTED and relative not in same:
                continue  # enough near-duplicates: only the identical ones are read
            exp = _read_valid(store, relative)
            if exp is None or exp.id in skip:
                continue
            identical = normalize_code_change(exp.code_change) == wanted
            if identical:
                found.append((exp, 1.0, True))
            elif near and reported_near < MAX_REPORTED:
                similarity = _similarity(exp.code_change, shingles)
                if similarity >= threshold:
                    found.append((exp, similarity, False))
                    reported_near += 1
        combined = session.by_ids(i for exp, _, _ in found for i in exp.combines)
    scores = {exp_id: doc.score for exp_id, doc in combined.items()}
    repeats = []
    for exp, similarity, identical in found:
        interference = bool(exp.combines) and below_best_combined(exp.score, exp.combines, scores)
        attach(exp, interference=interference)
        repeats.append(
            Repeat(
                exp.id,
                float(exp.score),
                exp.outcome,
                exp.change_summary,
                exp.path,
                base_commit=exp.base_commit,
                env=exp.env,
                similarity=round(similarity, 4),
                identical=identical,
            )
        )
    identical_first = [r for r in repeats if r.identical]
    identical_first.sort(key=lambda r: (_created(found, r.id), r.id))
    return identical_first + [r for r in repeats if not r.identical]


def _created(found: list[tuple[KernelExperiment, float, bool]], exp_id: str) -> str:
    return next(exp.created_at for exp, _, _ in found if exp.id == exp_id)


def _similarity(code_change: str, shingles: frozenset[int]) -> float:
    return shingle_similarity(code_shingles(code_change), shingles)


def _read_valid(store: StoreView, relative: str) -> KernelExperiment | None:
    path = store.experiments_dir / relative
    checked = read_and_check(path, store.settings)
    if not checked.ok:
        return None
    return attach(checked.experiment(), store.settings, path=path)


def warn_tried_before(
    store: StoreView,
    code_change: str,
    *,
    exclude: Iterable[str] = (),
    stacklevel: int = 2,
    base_commit: str = "",
    env: str = "",
) -> list[Repeat]:
    """Warn when ``code_change`` was tried before (:func:`tried_before`): a
    :class:`~kexp.errors.RemeasureWarning` when an identical one also has this
    ``base_commit`` and ``env`` (given), else a
    :class:`~kexp.errors.RepeatedChangeWarning` naming the identical ones, else a
    :class:`~kexp.errors.NearDuplicateWarning` naming the near-duplicates. Returns them.
    ``stacklevel`` is relative to the caller of this function."""
    repeats = tried_before(store, code_change, exclude=exclude)
    same = [
        r
        for r in repeats
        if r.identical and base_commit and r.base_commit == base_commit and r.env == env
    ]
    if same:
        warnings.warn(remeasure_message(same[-1]), RemeasureWarning, stacklevel=stacklevel + 1)
    elif repeats:
        category = (
            RepeatedChangeWarning if any(r.identical for r in repeats) else NearDuplicateWarning
        )
        warnings.warn(repeat_message(repeats), category, stacklevel=stacklevel + 1)
    return repeats
