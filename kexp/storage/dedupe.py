"""Don't repeat: find experiments whose ``code_change`` is the same change.

Two code changes are the same when they are equal after :func:`normalize_code_change`:
diff headers dropped (``diff --git``, ``index``, ``---``/``+++`` file lines, mode and
rename lines), hunk headers reduced to ``@@`` (line numbers move as the base moves),
``\\ No newline at end of file`` dropped, comments dropped by each file's language (its
extension: ``#`` in Python and Triton, ``//`` and ``/* */`` in C, C++, CUDA and HIP;
strings and ``#pragma`` kept), whitespace runs collapsed to one space, line ends and
blank lines ignored. Placeholders are never matched: a code change with no
added or removed line and fewer than :data:`MIN_PLAIN_CHARS` characters (``N/A``,
``see PR 12``) matches nothing.

Two code changes are *near-duplicates* when the Jaccard similarity of their shingle
sets (:func:`code_shingles`, :func:`shingle_similarity`) is at least
``settings.near_duplicate_similarity``: each changed (added or removed) line is cut
into tokens, identifiers that are not keywords, types, calls or members are renamed
by order of first appearance within the line (``acc``/``i`` and ``sum``/``idx`` both
become ``v0``/``v1``), and each changed line and each pair of consecutive changed
lines of a hunk is hashed. The context lines around them are not: the same change
made on a newer base, where upstream edited a line near it, is the same set. A change
too small to tell apart by itself (fewer than :data:`SMALL_CHANGE_SHINGLES` shingles:
one or two changed lines, such as ``+#pragma unroll 4``) adds its context lines, each
hashed alone, so that the same line added to two different loops differs while one
context line edited upstream leaves it a near-duplicate. A change whose variables were
renamed gives the same shingles; reordered hunks give the same set.

:func:`code_key` is the one key of a code change (this normalisation, this rule of what
is matchable); the retrieval index (:mod:`kexp.storage.retrieval`) keeps it for every file and
is the one place that answers which experiments hold the same change:
:meth:`kexp.Store.create_experiment` asks it (:func:`kexp.storage.repeats.warn_tried_before`)
for both and warns with a :class:`RepeatedChangeWarning` naming each earlier experiment,
its similarity, score and outcome (a :class:`NearDuplicateWarning` when none is
identical); when an identical one that measured a score also has the same base commit
(or one whose code is the same: the two differ only in the store's folder, as a ``kexp
sync`` in between leaves ``HEAD``) and env, the new one measures the same thing again,
and the warning is a :class:`RemeasureWarning`: add a round to the earlier experiment
(``kexp remeasure``) instead, so that tries are pooled, not picked from.
:func:`kexp.storage.repeats.find_repeats` gives the identical ones alone.
A store read with refs (``Store(root, refs=...)``) asks the same of every
experiment's newest version, on any ref.
"""

from __future__ import annotations

import dataclasses
import functools
import hashlib
import itertools
import re
import zlib
from collections import Counter
from collections.abc import Iterable, Iterator
from pathlib import Path

# The warnings a create gives (defined with every warning in kexp.core.errors), named here
# too, where they were first defined.
from kexp.core.advice import REMEASURE, REMOVE_NEW
from kexp.core.errors import NearDuplicateWarning as NearDuplicateWarning
from kexp.core.errors import RemeasureWarning as RemeasureWarning
from kexp.core.errors import RepeatedChangeWarning as RepeatedChangeWarning
from kexp.core.outcome import NOTHING_MEASURED, UNMEASURED_OUTCOMES

#: Shortest normalised code change (without added/removed lines) that is matched.
MIN_PLAIN_CHARS = 40
#: A file a unified diff changes, as its new name says it (``+++ b/PATH``).
_CHANGED_FILE = re.compile(r"^\+\+\+ (?:b/)?(\S+)", re.MULTILINE)
#: The lines a normalised change drops, each with the newline before it: a file's pair of
#: names (``--- A`` just before ``+++ B``), a header, ``\\ No newline at end of file``
#: (a line that starts with a space, a context line, is never one).
_DROPPED_LINE = re.compile(
    r"\n(?:--- [^\n]*\n\+\+\+ |diff --git |diff --cc |diff -r |index [0-9a-fA-F]+\.\.|"
    r"new file mode |deleted file mode |old mode |new mode |similarity index |"
    r"dissimilarity index |rename from |rename to |copy from |copy to |Binary files |"
    r"\\ No newline)[^\n]*"
)
#: A hunk header line, with the newline before it (reduced to ``@@``: line numbers move
#: as the base moves).
_HUNK_LINE = re.compile(r"\n@@+ [-+0-9, ]+ @@+[^\n]*")
#: What is left of a line that is dropped: nothing, or a sign alone.
_BLANK = ("", "+", "-")
#: A file's pair of names in a unified diff (``--- A`` just before ``+++ B``): the
#: language of the lines after it is told by its extension (the old name's for a file
#: deleted, ``+++ /dev/null``).
_FILE_NAMES = re.compile(r"^--- (?:a/)?(\S*)[^\n]*\n\+\+\+ (?:b/)?(\S*)", re.MULTILINE)
#: A string literal on one line (double or single quoted, with escapes): kept as written
#: when comments are dropped (``"#pragma unroll"``, ``"a // b"``).
#: (No group, and runs rather than characters: the search skips to a quote at once.)
_STRING = r"\"[^\"\\\n]*(?:\\.[^\"\\\n]*)*\"|'[^'\\\n]*(?:\\.[^'\\\n]*)*'"
#: A comment of a file in Python (Triton): ``#`` to the end of its line, not in a string.
_HASH_COMMENT = re.compile(_STRING + r"|#[^\n]*")
#: A comment of a file in C, C++, CUDA or HIP: ``//`` to the end of its line, ``/* ... */``
#: within one line (or from ``/*`` to the end of its line), not in a string;
#: ``#pragma``, ``#define`` and ``#include`` are code.
_SLASH_COMMENT = re.compile(_STRING + r"|//[^\n]*|/\*[^*\n]*(?:\*(?!/)[^*\n]*)*(?:\*/)?")
#: The comment pattern of each file extension; a file of another (or no) extension
#: keeps its comments.
_COMMENTS = {
    **dict.fromkeys((".py", ".pyi"), _HASH_COMMENT),
    **dict.fromkeys(
        (".cu", ".cuh", ".c", ".cc", ".cpp", ".cxx", ".h", ".hh", ".hpp", ".hip"),
        _SLASH_COMMENT,
    ),
}


@dataclasses.dataclass(frozen=True)
class Repeat:
    """An earlier experiment with the same code change."""

    id: str
    score: float
    outcome: str
    change_summary: str
    path: Path | None
    base_commit: str = ""
    env: str = ""
    #: Jaccard similarity of the shingles (1.0 for the same change).
    similarity: float = 1.0
    #: The same change once normalised (else a near-duplicate).
    identical: bool = True
    #: The ref it was found on, when the store reads refs and the working tree does not
    #: hold it ("" otherwise).
    ref: str = ""
    #: A near-duplicate by its changed lines alone: a change of one or two lines made in
    #: other surroundings (:func:`lines_key_of_normalized`).
    lines_alike: bool = False
    #: Its ``## Samples`` section (its rounds' timings; "" without).
    samples: str = dataclasses.field(default="", repr=False)
    #: What else says which measurement it is (:func:`measures_alike`): its kernel,
    #: dtype and parent.
    operator_sig: str = ""
    dtype_sig: str = ""
    pid: str = ""
    #: The score a view prints (None: no measurement, whatever its outcome:
    #: :attr:`kexp.core.cumulative.Derived.shown_score`).
    shown_score: float | None = None
    #: Why it was retired (the reason of the correction that set its status to
    #: failed: :func:`kexp.format.notes.retired_reason`; "" when it was not).
    retired: str = ""

    @property
    def measured(self) -> bool:
        """Whether its score is a measurement (not buggy, pending, or a run that failed
        or timed out): a round of it can be added (``kexp remeasure``)."""
        return self.outcome not in UNMEASURED_OUTCOMES

    def describe(self) -> str:
        """One line: id, score, outcome and summary (and the similarity of a
        near-duplicate, the ref it was found on)."""
        near = (
            ""
            if self.identical
            else "the same changed lines, other lines around them, "
            if self.lines_alike
            else f"similarity {self.similarity:.2f}, "
        )
        where = f" on {self.ref}" if self.ref else ""
        shown = self.shown_score
        score = NOTHING_MEASURED if shown is None else f"score {shown:.4f}"
        retired = f"; retired because: {self.retired!r}" if self.retired else ""
        return f"{self.id}{where} ({near}{score}, {self.outcome}: {self.change_summary!r}{retired})"


def normalize_code_change(text: str) -> str:
    """The code change with headers, line numbers, comments and whitespace differences
    removed (a change of comments alone keeps them: it changes no code, and two such
    changes are not one)."""
    text = text.replace("\r\n", "\n").replace("\r", "\n")
    bare = _without_comments(text)
    normalized = _normalized(bare)
    if bare != text and not _changes(normalized) and _changes(kept := _normalized(text)):
        return kept
    return normalized


def _normalized(text: str) -> str:
    """:func:`normalize_code_change` of a text with ``\\n`` line ends, comments as given."""
    # Every line, the first too, after a newline: a line's start is where the patterns
    # look, a whole text at a time (not a Python step per line).
    text = _HUNK_LINE.sub("\n@@", _DROPPED_LINE.sub("\n", "\n" + text))
    kept = [line for raw in text.split("\n") if (line := " ".join(raw.split())) not in _BLANK]
    while kept and kept[-1] == "@@":
        kept.pop()
    return "\n".join(kept)


def _changes(normalized: str) -> bool:
    """Whether a normalised change adds or removes a line."""
    return bool(normalized) and (
        normalized[0] in "+-" or "\n+" in normalized or "\n-" in normalized
    )


def _without_comments(text: str) -> str:
    """A unified diff with the comments of its files dropped (:data:`_COMMENTS`, each
    file's lines by its extension; a string keeps what it holds): a change whose lines
    differ only in a comment is the same change. A text without file names (no ``---``
    and ``+++`` lines) is kept as written."""
    if "#" not in text and "//" not in text and "/*" not in text:
        return text
    starts = list(_FILE_NAMES.finditer(text))
    if not starts:
        return text
    parts = [text[: starts[0].start()]]
    for index, names in enumerate(starts):
        end = starts[index + 1].start() if index + 1 < len(starts) else len(text)
        lines = text[names.end() : end]
        name = names[2] if names[2] != "/dev/null" else names[1]
        pattern = _COMMENTS.get(Path(name).suffix.lower())
        parts += [names[0], pattern.sub(_kept_string, lines) if pattern else lines]
    return "".join(parts)


def _kept_string(match: re.Match[str]) -> str:
    """A string literal as written; a comment as a space (``a/* x */b`` is two tokens)."""
    found = match[0]
    return found if found[0] in "\"'" else " "


def is_matchable(normalized: str) -> bool:
    """Whether a normalised code change is a real change (not a placeholder): a line
    added or removed, or at least :data:`MIN_PLAIN_CHARS` characters."""
    return _changes(normalized) or len(normalized) >= MIN_PLAIN_CHARS


_CODE_TOKEN = re.compile(
    r"[A-Za-z_][A-Za-z0-9_]*|0[xX][0-9a-fA-F]+|[0-9]+(?:\.[0-9]*)?(?:[eE][-+]?[0-9]+)?[A-Za-z]*"
    r"|::|->|<<=?|>>=?|&&|\|\||\+\+|--|[-+*/%&|^!=<>]=|\S"
)
#: Identifiers kept as written by :func:`code_shingles` (any other identifier that is not
#: called, qualified or a member is a variable, renamed by order of appearance): C, C++,
#: CUDA/HIP and Python/Triton keywords, types and built-ins.
KEPT_IDENTIFIERS = frozenset(
    """
    alignas alignof and as assert auto bool break case catch char class const constexpr
    continue decltype default def del delete do double elif else enum except explicit
    extern false float for from if import in inline int is lambda long not nullptr or
    pass pragma private public raise register restrict return short signed sizeof static
    struct switch template this throw true try typedef typename union unroll unsigned
    using virtual void volatile while with yield None True False
    int8_t int16_t int32_t int64_t uint8_t uint16_t uint32_t uint64_t size_t half half2
    bfloat16 float2 float4 int2 int4 uint2 uint4 double2 bf16 fp16 fp8 fp32 scalar_t
    threadIdx blockIdx blockDim gridDim warpSize tl range
    """.split()  # noqa: SIM905 - a paragraph of words reads better than a list
)
#: A changed line with fewer tokens than this (``}``, ``else {``) is too common to tell
#: changes apart: it is left out of the shingles.
MIN_LINE_TOKENS = 3


#: A code change whose changed lines give fewer shingles than this (one or two changed
#: lines) is shingled with its context lines too: by itself it does not say where it was
#: made (``+#pragma unroll 4`` fits any loop).
SMALL_CHANGE_SHINGLES = 4


@functools.lru_cache(maxsize=8192)
def line_shingle(line: str) -> int | None:
    """One changed line as a shingle: the CRC-32 of its sign and tokens, variables
    renamed by order of first appearance in the line (None for a line too short)."""
    tokens = _CODE_TOKEN.findall(line, 1)
    if len(tokens) < MIN_LINE_TOKENS:
        return None
    names: dict[str, str] = {}
    last = len(tokens) - 1
    for index, token in enumerate(tokens):
        if not (token[0].isalpha() or token[0] == "_") or token in KEPT_IDENTIFIERS:
            continue
        if token.startswith("__"):
            continue
        if index < last and tokens[index + 1] in ("(", "::"):
            continue  # called or qualified: a function, type or namespace
        if index and tokens[index - 1] in (".", "->", "::", "#"):
            continue  # a member, or a preprocessor word
        tokens[index] = names.setdefault(token, f"v{len(names)}")
    return zlib.crc32((line[0] + " ".join(tokens)).encode("utf-8"))


def code_shingles(code_change: str) -> frozenset[int]:
    """The shingles of a code change (empty for a placeholder, see :func:`is_matchable`):
    each changed line of each hunk, normalised (see the module documentation), and each
    pair of consecutive changed lines of a hunk; for a small change, its context lines
    too."""
    return shingles_of_normalized(normalize_code_change(code_change))


def shingles_of_normalized(normalized: str) -> frozenset[int]:
    """:func:`code_shingles` of a code change already normalised
    (:func:`normalize_code_change`): every changed line through :func:`line_shingle`,
    and each pair of consecutive changed lines within a hunk (``@@`` lines part hunks;
    context lines between two changed lines do not part them); with fewer than
    :data:`SMALL_CHANGE_SHINGLES` of these, every context line's shingle as well (a
    line without a sign is context). Without any line added or removed, the whole
    change is one hunk of context: each line and each pair of consecutive lines."""
    return _shingled(normalized)[0]


def lines_key(code_change: str, normalized: str) -> str | None:
    """The key of a small change's changed lines alone and the files it changes (a
    change of one or two lines, whose shingles take its context lines too:
    :data:`SMALL_CHANGE_SHINGLES`), None for any other change; ``normalized`` is
    ``code_change`` normalised. The same lines added (and removed) in the same files in
    other surroundings share it: another agent's kernel, with its own earlier steps
    around the line, whose context lines keep the two apart as near-duplicates though
    the line is the one tried, or none (``git diff -U0``); the same line in another file
    (``#pragma unroll 4`` in another kernel) does not, nor other variables set alike
    (the lines as written: ``int tile = 64`` is not ``int vec = 64``)."""
    return _lines_key_of(code_change, _shingled(normalized)[1])


def shingles_and_lines_key(code_change: str, normalized: str) -> tuple[frozenset[int], str | None]:
    """:func:`shingles_of_normalized` and :func:`lines_key` of a change in one pass over
    its lines (what the index keeps of every file)."""
    shingles, small = _shingled(normalized)
    return shingles, _lines_key_of(code_change, small)


def _shingled(normalized: str) -> tuple[frozenset[int], set[int] | None]:
    """A normalised change's shingles, and a small change's changed lines as written
    (:func:`_literal`), the key of :func:`lines_key` (None for another change). Only a
    small change's context lines and written lines are read: another's never count."""
    if not is_matchable(normalized):
        return frozenset(), None
    if not (normalized[0] in "+-" or "\n+" in normalized or "\n-" in normalized):
        lines = normalized.split("\n")
        held = [s for line in lines if line != "@@" and (s := line_shingle(" " + line)) is not None]
        return frozenset([*held, *_pairs(held)]), None
    found, changed = _changed(normalized)
    if len(found) >= SMALL_CHANGE_SHINGLES:
        return frozenset(found), None
    # With context lines or without (git diff -U0): the same lines have the same key.
    written = {shingle for line in changed if (shingle := _literal(line)) is not None}
    return frozenset(found | _context(normalized)), written or None


def _lines_key_of(code_change: str, small: set[int] | None) -> str | None:
    if small is None:
        return None
    files = sorted(set(_CHANGED_FILE.findall(code_change)))
    said = " ".join([*files, "@@", *(str(s) for s in sorted(small))])
    return hashlib.sha1(said.encode("utf-8", "surrogatepass")).hexdigest()


def _literal(line: str) -> int | None:
    """A changed line as written (its sign and tokens, no variable renamed: ``int tile =
    64`` and ``int vec = 64`` are two changes), None for a line too short."""
    tokens = _CODE_TOKEN.findall(line, 1)
    if len(tokens) < MIN_LINE_TOKENS:
        return None
    return zlib.crc32((line[0] + " ".join(tokens)).encode("utf-8", "surrogatepass"))


def _changed(normalized: str) -> tuple[set[int], list[str]]:
    """The shingles of a change's changed lines (and of pairs of them within a hunk),
    and its changed lines."""
    found: set[int] = set()
    changed: list[str] = []
    hunk: list[int] = []  # the changed lines' shingles of the hunk so far
    for line in normalized.split("\n"):
        if line == "@@":
            found.update(_pairs(hunk))
            hunk = []
        elif line[:1] in ("+", "-"):
            changed.append(line)
            shingle = line_shingle(line)
            if shingle is not None:
                hunk.append(shingle)
                found.add(shingle)
    found.update(_pairs(hunk))
    return found, changed


def _context(normalized: str) -> set[int]:
    """The shingles of a change's context lines (each alone)."""
    return {
        shingle
        for line in normalized.split("\n")
        if line != "@@"
        and line[:1] not in ("+", "-")
        and (shingle := line_shingle(line if line[:1] == " " else " " + line)) is not None
    }


def reverts(code_change: str, other: str) -> bool:
    """Whether ``code_change`` undoes ``other``: in the same files, it adds the lines
    ``other`` removes and removes the lines it adds (whitespace, comments and line
    numbers aside), and changes something."""
    mine, theirs = _sides(code_change), _sides(other)
    return bool(mine[1] or mine[2]) and mine == (theirs[0], theirs[2], theirs[1])


def _sides(code_change: str) -> tuple[frozenset[str], Counter[str], Counter[str]]:
    """A change's files, and the lines it adds and removes (normalised)."""
    lines = normalize_code_change(code_change).split("\n")
    files = frozenset(_CHANGED_FILE.findall(code_change.replace("\r\n", "\n")))
    added = Counter(line[1:].strip() for line in lines if line[:1] == "+")
    removed = Counter(line[1:].strip() for line in lines if line[:1] == "-")
    return files, added, removed


def adds_alike(first: str, second: str) -> bool:
    """Whether two normalised code changes (:func:`normalize_code_change`) add alike: a
    line added by one is added by the other (:func:`line_shingle`'s likeness), or one of
    them adds nothing (a removal). What a change adds is what it tries: two changes of
    one launch line that add different lines are two ideas, however much of the line
    removed and its context they share."""
    added = [_added_shingles(first), _added_shingles(second)]
    return not added[0] or not added[1] or bool(added[0] & added[1])


def _added_shingles(normalized: str) -> set[int]:
    return {
        shingle
        for line in normalized.split("\n")
        if line[:1] == "+" and (shingle := line_shingle(line)) is not None
    }


def _pairs(shingles: list[int]) -> Iterator[int]:
    """The shingles of each pair of consecutive ``shingles``."""
    return (zlib.crc32(b"%d %d" % pair) for pair in itertools.pairwise(shingles))


def shingle_similarity(first: Iterable[int], second: Iterable[int]) -> float:
    """The Jaccard similarity of two shingle sets: shared / all (0.0 when both are empty)."""
    a, b = set(first), set(second)
    union = len(a | b)
    return len(a & b) / union if union else 0.0


def code_key(code_change: str) -> str | None:
    """The key of a code change: a hash of it normalised (:func:`normalize_code_change`),
    None for a placeholder (:func:`is_matchable`). Two changes are the same change when
    their keys are equal; every "tried before" answer (a create's warning, the refs'
    check, :func:`kexp.storage.repeats.find_repeats`) compares these keys."""
    return key_of_normalized(normalize_code_change(code_change))


def key_of_normalized(normalized: str) -> str | None:
    """:func:`code_key` of a code change already normalised."""
    if not is_matchable(normalized):
        return None
    return hashlib.sha1(normalized.encode("utf-8", "surrogatepass")).hexdigest()


def unchanged_key(operator_sig: object, dtype_sig: object, env: object, pid: object) -> str:
    """The key the index keeps for an experiment without a code change (none, or a
    placeholder: :func:`code_key` is None): its kernel, dtype, env and parent, the
    candidates of the same record made again (:func:`kexp.storage.repeats.refuse_copy`).
    Never a code change's key: the text hashed holds a NUL no normalised change holds."""
    named = "\0".join(str(value or "").strip() for value in (operator_sig, dtype_sig, env, pid))
    text = f"kexp: no code change\0{named}"
    return hashlib.sha1(text.encode("utf-8", "surrogatepass")).hexdigest()


#: Where a ``change_summary``'s result starts: `` - `` before a figure (``+0.4%``,
#: ``-6.9% (LDS conflicts)``, ``1.02x``).
_RESULT_FIGURE = re.compile(r" - (?=[-+\u2212]?[0-9.])")


def summary_key(summary: object) -> str:
    """What a ``change_summary`` (``<What> - <Result>``) says was changed, the key of a
    change recorded without a code change: its text before the result (the `` - ``
    before its figure, else the last `` - ``), case, spaces and trailing punctuation
    folded ("" for none). ``Stage tile through LDS - -6.9% (LDS conflicts)`` and ``stage
    tile  through LDS - -7.07%`` share it."""
    text = str(summary or "")
    figure = _RESULT_FIGURE.search(text)
    what = text[: figure.start()] if figure else text.rpartition(" - ")[0] or text
    return " ".join(what.casefold().split()).rstrip(".,;: ")


def summary_message(repeats: list[Repeat], limit: int = 3) -> str:
    """The warning text of a change recorded without a code change whose summary
    (:func:`summary_key`), kernel, dtype, env and parent repeat ``repeats``'."""
    return (
        "this change (no code_change given: its change_summary, kernel, dtype, env and "
        f"parent compared) was already tried in {_named(repeats, limit)}: read that "
        "experiment before measuring it again"
    )


def repeat_message(repeats: list[Repeat], limit: int = 3) -> str:
    """The warning text naming the earlier experiments (at most ``limit`` of each kind):
    the identical changes, then the near-duplicates."""
    same = [r for r in repeats if r.identical]
    near = [r for r in repeats if not r.identical]
    parts = []
    if same:
        parts.append(f"this code_change was already tried in {_named(same, limit)}")
    if near:
        parts.append(
            f"{'it' if same else 'this code_change'} is a near-duplicate (shingles of the "
            f"changed lines, variables renamed) of {_named(near, limit)}"
        )
    return "; ".join(parts) + ": read that experiment before measuring it again"


def _named(repeats: list[Repeat], limit: int) -> str:
    named = "; ".join(r.describe() for r in repeats[:limit])
    more = f" and {len(repeats) - limit} more" if len(repeats) > limit else ""
    return named + more


def signature(value: object) -> str:
    """A kernel, dtype or parent as two records are compared by it (as the index keeps
    it: :func:`unchanged_key`)."""
    return str(value or "").strip()


def remeasure_message(
    repeat: Repeat, bring_in: str = "", recorded: str = "", base_commit: str = ""
) -> str:
    """The warning text for a new experiment (``recorded``, its id, written all the
    same, on ``base_commit``) that measures ``repeat`` again: remove it, then add its
    timings as a round of ``repeat``; when ``repeat`` was found on another ref,
    ``bring_in`` is the command that brings it into the working tree first, as a write
    needs it there (:func:`kexp.storage.whereabouts.bring_in`: ``kexp sync, which merges
    origin/main``, or the ``git restore`` of its file). A ``base_commit`` other than
    ``repeat``'s (the same code: they differ in the store's folder alone) is said."""
    remove = f"{REMOVE_NEW.say(id=recorded)}, then " if recorded else ""
    first = f"{bring_in}, then " if repeat.ref and bring_in else ""
    kept = f", recorded as {recorded} all the same" if recorded else ""
    base = "base_commit"
    if base_commit and repeat.base_commit and base_commit != repeat.base_commit:
        base = (
            f"base_commit's code ({base_commit[:12]} differs from its {repeat.base_commit[:12]} "
            "only in experiments, as a kexp sync leaves it)"
        )
    return (
        f"this code_change, {base}, env, dtype and parent repeat {repeat.describe()}: "
        f"it is the same measurement again{kept}; add it as a round of that experiment "
        f"instead ({remove}{first}{REMEASURE.say(id=repeat.id)}, or "
        "kexp.remeasure), so that tries are pooled rather than the best of them "
        "kept"
    )
