"""The words of related work (:mod:`kexp.storage.retrieval`): what its index keeps of a content
(the FTS columns' texts, code words split at case changes, the numbers of a plan, the
code change's key and shingles, shingle prefixes) and the words a query asks with
(common words dropped, :data:`SYNONYMS` added, numbers asked for as numbers:
:func:`fts_phrase`)."""

from __future__ import annotations

import marshal
import math
import re
import zlib
from array import array
from collections.abc import Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from kexp.format.fileformat import key_insight
from kexp.storage.dedupe import (
    is_matchable,
    key_of_normalized,
    normalize_code_change,
    shingles_and_lines_key,
)

if TYPE_CHECKING:
    from kexp.storage.rows import Row


#: At most this many words of a query are looked up (a diff holds hundreds).
MAX_QUERY_TERMS = 32

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


_WORD = re.compile(r"[A-Za-z][A-Za-z0-9]*|[0-9]+")


#: Every ASCII character but letters and digits, as a space (a word's end).
_SEPARATORS = str.maketrans({chr(c): " " for c in range(128) if not chr(c).isalnum()})


_CASE_CHANGE = re.compile(r"(?<=[a-z0-9])(?=[A-Z])|(?<=[A-Z])(?=[A-Z][a-z])")


#: Measurements, whose digits are no numbers of a plan: decimals (``1.88``, ``+2.1%``,
#: ``7.0.0``) and percentages (``8%``).
_MEASUREMENT = re.compile(r"[0-9]+(?:\.[0-9]+)+%?|[0-9]+%")


#: Sizes written as dimensions (``128x64``, ``32x32x8``): a number each (see
#: :func:`_spaced_dimensions`); not a hexadecimal literal (``0x10``).
_DIMENSIONS = re.compile(r"(?<![A-Za-z0-9])(?!0[xX])[0-9]+(?:[xX][0-9]+)+(?![A-Za-z0-9])")


#: A bold label a description is laid out with (``**Approach**:``, ``**Key insight:**``):
#: the template's words, in every experiment, none of its own (see :func:`texts_of`).
_LABEL = re.compile(r"\*\*[A-Za-z][^*:\n]{0,40}(?::\s*\*\*|\*\*\s*:)")


#: Runs of letters and digits already split into words (runs repeat from change to
#: change), up to this many.
_RUN_WORDS: dict[str, str] = {}


_RUN_WORDS_SIZE = 1 << 16


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


def numbers_of(text: str) -> list[str]:
    """The numbers of a text, as words (:data:`_WORD`) of digits alone, each time it
    holds them: ``unroll 8``, ``8x``, ``128-bit``, ``num_warps=8``, ``BLOCK_M 64``,
    both of ``128x64``; not the digits of measurements (:data:`_MEASUREMENT`), nor
    those of a word (``fp16``, ``float4``, ``bf16x2``)."""
    words = _WORD.findall(_spaced_dimensions(_MEASUREMENT.sub(" ", text)))
    return [word for word in words if word.isdigit()]


def _spaced_dimensions(text: str) -> str:
    """``text`` with each size written as dimensions (``128x64``) written as its
    numbers (``128 64``), as :data:`_WORD` would not find them (``128``, ``x64``)."""
    if "x" not in text and "X" not in text:
        return text
    return _DIMENSIONS.sub(lambda found: found[0].replace("x", " ").replace("X", " "), text)


def _words_of_normalized(normalized: str) -> str:
    """The distinct words of the changed lines, in order of appearance: the runs of
    ASCII letters and digits, each split where a lower-case letter or a digit meets an
    upper-case one (``warpReduceSum``: warp Reduce Sum), and before digits start a run
    (``2D`` stays, ``16x`` is 16 and x: what :data:`_WORD` finds; ``128x64`` is 128 and
    64: :func:`_spaced_dimensions`)."""
    if not is_matchable(normalized):
        return ""
    lines = [line for line in normalized.split("\n") if line[:1] in ("+", "-")]
    text = " ".join(line[1:] for line in lines) if lines else normalized.replace("@@", " ")
    split_of = _RUN_WORDS
    found: list[str] = []
    for run in dict.fromkeys(text.translate(_SEPARATORS).split()):
        words = split_of.get(run)
        if words is None:
            if run.isascii() and (run.isdigit() or (run.islower() and run[0].isalpha())):
                words = run  # one word (most runs)
            else:
                words = " ".join(_WORD.findall(_CASE_CHANGE.sub(" ", _spaced_dimensions(run))))
            if len(split_of) >= _RUN_WORDS_SIZE:
                split_of.clear()
            split_of[run] = words
        found.append(words)
    return " ".join(dict.fromkeys(" ".join(found).split()))


def shingle_prefix(
    shingles: Iterable[int], threshold: float, order: Mapping[int, int] | None = None
) -> list[int]:
    """The prefix of a shingle set for an overlap of at least ``threshold``: its first
    ``n - ⌈threshold·n⌉ + 1`` shingles (``n`` of them) in one order: the rarest first
    (``order``: shingle → how many docs held it, 0 when not named), then by value. Two
    sets whose Jaccard similarity is at least ``threshold`` share at least
    ``⌈threshold·n⌉`` shingles of each, so their prefixes in one order share one: the
    index keeps each change's prefix for the near-duplicate threshold, and a question
    looks its own prefix up (prefix filtering, exact; see
    :meth:`kexp.storage.cache.Cache.add_docs` for the order)."""
    unique = set(shingles)
    if not unique:
        return []
    length = len(unique) - math.ceil(threshold * len(unique) - 1e-9) + 1
    length = max(1, min(len(unique), length))
    if not order:
        return sorted(unique)[:length]
    count = order.get
    keyed = sorted([(count(shingle, 0) << 32) | shingle for shingle in unique])
    return [key & 0xFFFFFFFF for key in keyed[:length]]


#: The body fields a doc is made of.
DOC_BODIES = ("detailed_description", "error_message", "code_change")


def code_of(code_change: str, normalized: str) -> tuple[bytes | None, bytes | None, bytes]:
    """What the index keeps of a content's code change (and of it normalised,
    :func:`kexp.storage.dedupe.normalize_code_change`): its key (a digest), the key of its
    changed lines alone (a small change's, else None), and its shingles as uint32."""
    key = key_of_normalized(normalized)
    shingles, lines = shingles_and_lines_key(code_change, normalized)
    return (
        bytes.fromhex(key) if key else None,
        bytes.fromhex(lines) if lines else None,
        array("I", sorted(shingles)).tobytes(),
    )


def texts_of(row: Row, bodies: dict[str, str], normalized: str | None = None) -> tuple[str, ...]:
    """The words of a content's FTS columns: summary, description (with the error
    message; without its bold labels, ``**Key insight**:``, which every description
    repeats: a plan's "keys" is no word of them all), key insight, operator (with dtype
    and env), code words (of the code change, or of it ``normalized`` already), and the
    numbers of the summary, of the key insight and of the code words, a column each
    (:func:`numbers_of`; see :func:`fts_phrase`)."""
    if normalized is None:
        normalized = normalize_code_change(bodies["code_change"])
    description = bodies["detailed_description"]
    insight = key_insight(description)
    description = _LABEL.sub(" ", description)
    if bodies["error_message"]:
        description += "\n" + bodies["error_message"]
    code = _words_of_normalized(normalized)
    return (
        row.change_summary,
        description,
        insight,
        _CASE_CHANGE.sub(" ", f"{row.operator_sig} {row.dtype_sig} {row.env}"),
        code,
        " ".join(numbers_of(row.change_summary)),
        " ".join(numbers_of(insight)),
        " ".join(word for word in code.split() if word.isdigit()),  # words already
    )


def bodies_of(data: bytes, path: str, names: tuple[str, ...] = DOC_BODIES) -> dict[str, str] | None:
    """The body texts a doc is made of (:data:`DOC_BODIES`; at least those of ``names``,
    when its words are not made: ``("code_change",)``); None when the bytes are not an
    experiment file."""
    from kexp.format.fileformat import FileFormatError, parse
    from kexp.format.quickcheck import quick_bodies

    found = quick_bodies(data, names)
    if found is not None:
        return found
    try:
        return parse(data, path, fast=True).body_values()
    except FileFormatError:
        return None


def packed_texts(texts: Sequence[str]) -> bytes:
    return zlib.compress(marshal.dumps(tuple(texts)), 1)


def unpacked_texts(packed: bytes) -> tuple[str, ...]:
    return tuple(marshal.loads(zlib.decompress(packed)))


def fts_phrase(word: str) -> str:
    """The FTS5 phrase a query's word asks for: the word, in any column; a number in
    the numbers columns alone. Descriptions are full of measurements (``56 -> 64
    VGPRs``, ``8 waves``): asked in every column, a number is held by nearly every
    experiment and BM25 gives it no weight; in the numbers of summaries, key insights
    and code (``unroll 8``) it tells the experiments apart, and weighs as a word of its
    place."""
    if word.isdigit():
        return f'{{summary_numbers insight_numbers code_numbers}} : "{word}"'
    return f'"{word}"'


def query_words(text: str) -> list[str]:
    """The words FTS5 is asked for (each as :func:`fts_phrase` has it): lowercased,
    identifiers split at case changes, stop words dropped, synonyms added, numbers
    those :func:`numbers_of` finds, each once, in order, at most :data:`MAX_QUERY_TERMS`."""
    words: list[str] = []
    seen: set[str] = set()
    spaced = _spaced_dimensions(_MEASUREMENT.sub(" ", text))
    for raw in _WORD.findall(_CASE_CHANGE.sub(" ", spaced)):
        word = raw.lower()
        if word in STOP_WORDS or word in seen:
            continue
        for found in (word, *_SYNONYM_OF.get(word, ())):
            if found not in seen and _WORD.fullmatch(found):
                seen.add(found)
                words.append(found)
    return words[:MAX_QUERY_TERMS]
