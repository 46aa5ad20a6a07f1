"""Fuzzing the file parser: whatever the bytes, only kexp's own errors come out.

Reading a file (:func:`kexp.validate.check_bytes`, as every query does), and putting it
in canonical form (:func:`kexp.formatting.canonical_text`, as ``kexp fmt`` does), must
turn any input into problems with a code, a position and a hint, or a
:class:`~kexp.formatting.NotFormattable` error: never another exception (a
``RecursionError``, a ``ValueError`` from a huge number, a ``KeyError`` ...). A file that
reads as a valid experiment must also survive a round trip: its canonical text reads
back as the same experiment.

The inputs are arbitrary bytes and text, valid files with random edits, and front-matter
built from YAML's own punctuation (flow and block collections, anchors and aliases,
tags, quotes, block scalars, directives), where the parser's corner cases live.
Hypothesis derandomizes the search (``derandomize=True``), so a failure reproduces.
"""

from __future__ import annotations

from pathlib import Path

from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from kexp.fileformat import FileFormatError, parse
from kexp.formatting import NotFormattable, canonical_text
from kexp.problems import Problem
from kexp.validate import CheckedFile, check_bytes

ID = "6749f3a0c2d41e7b"
PATH = Path(f"experiments/2026/11/{ID}-fuzzed.md")

GOOD = f"""\
---
id: {ID}
pid: ''
change_summary: Unrolled the inner loop by 4 - +1.90%
score: 1.019
status: done
is_buggy: false
operator_sig: 'csrc/kernels/cache_kernels.cu: reshape_and_cache_flash'
dtype_sig: bf16
env: MI300X, ROCm 7.0.0
base_commit: 3f2c9e1a7b8d4c6e5f0a1b2c3d4e5f6a7b8c9d0e
created_at: '2026-11-29T15:52:36Z'
tags: [cache, unroll]
results:
- {{config: small, baseline: 2.0, candidate: 1.96, speedup: 1.019}}
---

## Detailed description

**Approach**: unroll by 4.

## Raw result

Iteration 1 Results - SUCCESS

## Code change

```diff
-  for (int i = 0; i < n; ++i)
+  #pragma unroll 4
```
"""

FUZZ = settings(
    max_examples=300,
    deadline=None,
    derandomize=True,
    database=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)

#: Pieces of YAML syntax, so that generated front-matter reaches the parser's corners.
# fmt: off
YAML_PIECES = [
    "\n", " ", "  ", "\t", ":", ": ", "- ", "? ", ",", "[", "]", "{", "}", "'", '"',
    "#", "&a ", "*a", "&b ", "*b", "!!python/object:os.system ", "!!str ", "!!int ",
    "!!binary ", "!!set ", "!custom ", "!<tag:x> ", "|", ">", "|-", "%YAML 1.1\n",
    "%TAG ! tag:x\n", "---", "...", "<<: ", "~", "null", "true", "no", ".nan", ".inf",
    "-.inf", "0x1f", "0o17", "017", "0123456789", "1e309", "9" * 400, "1_000",
    "190:20:30", "2026-11-29", "2026-11-29T15:52:36Z", "\\u0000", "\\e", '"\\x1b[31m"',
    "id", "pid", "score", "status", "results", "tags", "combines", "created_at",
    "speedup", "config", "\u00e9", "\u2028", "\u0085", "\x00", "\x1b", "\r", "\r\n",
    "\ufeff", "\ud7ff", "\U0001f600", "`", "```", "## ", "## Raw result\n",
]
# fmt: on


def _checked(data: bytes | str) -> CheckedFile:
    checked = check_bytes(data, PATH)
    assert isinstance(checked, CheckedFile)
    for problem in checked.problems:
        assert isinstance(problem, Problem)
        assert problem.code and problem.message and problem.hint, problem
        assert problem.line >= 1 and problem.column >= 1, problem
        assert problem.severity in ("error", "warning"), problem
        problem.format()
    return checked


def _fast_reader_agrees(data: bytes | str) -> None:
    """The fast reader of canonical front-matter gives the full reader's values or none."""
    try:
        fast = parse(data, PATH, fast=True).fields
    except FileFormatError:
        fast = None
    try:
        full = parse(data, PATH).fields
    except FileFormatError:
        full = None
    if fast is None or full is None:
        assert fast is full, (fast, full)
    else:
        assert repr(fast) == repr(full)  # repr: nan equals nan


def _survives(data: bytes | str) -> None:
    """Reading, checking and formatting ``data`` raise nothing but kexp's own errors."""
    _fast_reader_agrees(data)
    checked = _checked(data)
    try:
        text = canonical_text(data, PATH)
    except NotFormattable:
        assert not checked.ok or any(p.severity == "error" for p in checked.problems)
        return
    assert checked.ok
    again = _checked(text)
    assert again.ok, [p.format() for p in again.problems]
    assert again.experiment() == checked.experiment()
    assert canonical_text(text, PATH) == text


@st.composite
def edited_good_files(draw: st.DrawFn) -> bytes:
    """A valid file with a few random edits: bytes or text inserted, deleted, replaced."""
    data = bytearray(GOOD.encode())
    for _ in range(draw(st.integers(1, 4))):
        position = draw(st.integers(0, len(data)))
        kind = draw(st.sampled_from(["insert", "delete", "replace", "piece"]))
        if kind == "insert":
            data[position:position] = draw(st.binary(min_size=1, max_size=8))
        elif kind == "delete":
            del data[position : position + draw(st.integers(1, 20))]
        elif kind == "replace":
            data[position : position + 1] = draw(st.binary(min_size=1, max_size=2))
        else:
            data[position:position] = draw(st.sampled_from(YAML_PIECES)).encode(
                "utf-8", "surrogatepass"
            )
    return bytes(data)


@st.composite
def yaml_front_matter(draw: st.DrawFn) -> str:
    """A front-matter made of YAML punctuation, keys and values, then a body."""
    pieces = draw(st.lists(st.sampled_from(YAML_PIECES), max_size=40))
    front = "".join(pieces)
    body = draw(st.sampled_from(["", "\n## Raw result\n\nx\n", "\n```\n## Raw result\n"]))
    return f"---\n{front}\n---\n{body}"


@FUZZ
@given(st.binary(max_size=600))
@example(b"")
@example(b"---\n")
@example(b"\xef\xbb\xbf---\r\n---\r\n")
@example(b"---\nscore: " + b"9" * 5000 + b"\n---\n")
@example(b"---\na: " + b"[" * 3000 + b"]" * 3000 + b"\n---\n")
def test_arbitrary_bytes(data: bytes) -> None:
    _survives(data)


@FUZZ
@given(st.text(max_size=400))
def test_arbitrary_text(text: str) -> None:
    _survives(text)
    _survives("---\n" + text)
    _survives(f"---\n{text}\n---\n")


@FUZZ
@given(edited_good_files())
def test_valid_file_with_random_edits(data: bytes) -> None:
    _survives(data)


CORPUS = sorted((Path(__file__).parent / "corpus" / "bad").glob("*.md"))


@FUZZ
@given(st.sampled_from(CORPUS), st.data())
def test_bad_files_of_the_corpus_with_random_edits(path: Path, data: st.DataObject) -> None:
    original = path.read_bytes()
    edited = bytearray(original)
    for _ in range(data.draw(st.integers(0, 3))):
        position = data.draw(st.integers(0, len(edited)))
        edited[position:position] = data.draw(st.sampled_from(YAML_PIECES)).encode(
            "utf-8", "surrogatepass"
        )
    _survives(bytes(edited))


@FUZZ
@given(yaml_front_matter())
@example("---\nscore: 1\nresults: [{speedup: " + "9" * 400 + "}]\n---\n")
@example("---\na: " + "- " * 2000 + "x\n---\n")
@example("---\n&a a: 1\n*a : 2\n---\n")
@example("---\n:: !!int \n---\n")
@example("---\na: !!bool maybe\nb: !!float x\n---\n")
def test_yaml_made_of_punctuation(text: str) -> None:
    _survives(text)
    # The same front-matter under a valid one's keys: the values reach the schema checks.
    _survives(GOOD.replace("tags: [cache, unroll]\n", text.split("---\n")[1]))


def test_good_file_is_valid() -> None:
    """The seed of the edits is itself valid (else the edits would test nothing)."""
    checked = _checked(GOOD)
    assert checked.ok, [p.format() for p in checked.problems]
