"""The quick verdict on experiment files, and the fast front-matter reader it stands on.

The fast reader (:mod:`kexp.format.fastpath`) must return exactly what the YAML reader returns,
or None. On that, :func:`kexp.format.quickcheck.quick_fields` must answer None or the very
fields of a file :func:`kexp.format.validate.check_bytes` finds valid: checked on the bad-input
corpus, the bundled experiments, the benchmark store when it has been generated, and
mutations of valid files (fences, headings, ids, dates, scores, line endings, odd
characters).
"""

from __future__ import annotations

import codecs
import datetime as dt
import json
import re
import string
from pathlib import Path
from typing import Any

import pytest
from conftest import experiment_fields
from hypothesis import given, settings
from hypothesis import strategies as st

from kexp.core.model import BODY_FIELDS, KernelExperiment
from kexp.format.fastpath import (
    _HEX_WORD,
    _STR,
    _tag_of_plain,
    read_simple_front_matter,
)
from kexp.format.fileformat import FRONT_MATTER_BAD_CHAR, STRING_FIELDS, serialize
from kexp.format.quickcheck import quick_bodies, quick_fields
from kexp.format.rules import EXPERIMENT_NAME
from kexp.format.rules import is_real_time as _real_time
from kexp.format.validate import check_bytes
from kexp.format.yamlio import YamlReadError, read_mapping, render_field

# --- the fast front-matter reader ------------------------------------------------------

_TRICKY = (
    string.ascii_letters
    + string.digits
    + " -:#'\",[]{}&*!|>%@`~.+_/()?=\t\\é🚀\xa0"
    + ";$^<Ä\u2003\x85"
)


def _same_as_yaml(text: str, *, block_lists: bool = False) -> dict[str, object] | None:
    """The fast reading of ``text``, checked against the YAML reader's."""
    fast = read_simple_front_matter(text, STRING_FIELDS, block_lists=block_lists)
    try:
        full = read_mapping(text, STRING_FIELDS)
    except YamlReadError:
        assert fast is None, text
        return None
    if fast is not None:
        assert fast == full.values, text
        assert list(fast) == list(full.values)
        assert _types(fast) == _types(full.values), text
        assert not full.retyped, text
    return fast


def _types(value: object) -> object:
    """``value`` with every scalar replaced by its type (to compare 1 and 1.0 apart)."""
    if isinstance(value, dict):
        return {k: _types(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_types(v) for v in value]
    return type(value)


_RESULT_ITEM = st.fixed_dictionaries(
    {"config": st.text(alphabet=_TRICKY, min_size=1, max_size=30)},
    optional={
        "baseline": st.one_of(st.floats(allow_nan=False), st.integers(-(10**20), 10**20)),
        "candidate": st.floats(min_value=0, max_value=1e9),
        "speedup": st.one_of(
            st.floats(allow_nan=False), st.booleans(), st.text(alphabet=_TRICKY, max_size=8)
        ),
        "unit": st.text(alphabet=_TRICKY, max_size=8),
    },
)


@settings(max_examples=300, deadline=None)
@given(
    results=st.lists(_RESULT_ITEM, max_size=4),
    tags=st.lists(st.text(alphabet=_TRICKY, min_size=1, max_size=12), max_size=4),
    key=st.sampled_from(["results", "tags", "env", "yes", "x"]),
)
def test_written_lists_read_the_same(
    results: list[dict[str, object]], tags: list[str], key: str
) -> None:
    text = render_field("tags", tags) + render_field(key, results) + "status: done\n"
    fast = _same_as_yaml(text, block_lists=True)
    if fast is not None:
        assert fast[key] == results
        assert read_simple_front_matter(text, STRING_FIELDS) is None or not results


@settings(max_examples=500, deadline=None)
@given(
    key=st.sampled_from(["results", "tags", "env", "score", "null"]),
    lines=st.lists(
        st.one_of(
            st.text(alphabet=_TRICKY, max_size=30).map(lambda s: "- {" + s + "}"),
            st.text(alphabet=_TRICKY, max_size=30).map(lambda s: "- " + s),
            st.sampled_from(["", "  - {config: a}", "- {config: a}", "x: 1", "- {}"]),
        ),
        max_size=4,
    ),
)
def test_any_block_list_reads_the_same_or_is_declined(key: str, lines: list[str]) -> None:
    _same_as_yaml("".join(f"{line}\n" for line in [f"{key}:", *lines]), block_lists=True)


@settings(max_examples=500, deadline=None)
@given(
    key=st.sampled_from(["env", "score", "tags", "created_at", "id"]),
    value=st.text(alphabet=_TRICKY + "0123456789abcdef.'", max_size=30),
)
def test_any_value_reads_the_same_or_is_declined(key: str, value: str) -> None:
    _same_as_yaml(f"{key}: {value}\n")
    _same_as_yaml(f"{key}: [{value}]\n")
    _same_as_yaml(f"{key}: ['{value}', {value}]\n")


@settings(max_examples=300, deadline=None)
@given(value=st.text(alphabet="0123456789abcdefbx_", min_size=1, max_size=20))
def test_hex_words_are_strings_for_yaml(value: str) -> None:
    if _HEX_WORD.fullmatch(value):
        assert _tag_of_plain(value) == _STR


def test_short_hex_words_are_strings_for_yaml() -> None:
    words = [""]
    for _ in range(4):
        words = [w + c for w in words for c in "0123456789abcdef"]
        for word in words:
            if _HEX_WORD.fullmatch(word):
                assert _tag_of_plain(word) == _STR, word
    for word in ("0b1", "0b01", "0b", "0bad", "0b1f", "1e5", "0x1f"):
        _same_as_yaml(f"env: {word}\nscore: {word}\n")


def test_canonical_lists_take_the_fast_path() -> None:
    text = (
        "combines: [6950cada1a6ff1ab, '69569e3736531718']\n"
        "results:\n"
        "- {config: 'num_tokens=1,num_heads=32', baseline: 34.46, candidate: 33.844, "
        "speedup: 1.0182}\n"
        "- {config: t1_h4096, baseline: 2, speedup: 0.9094, unit: us}\n"
        "author: Ana Souza\n"
    )
    fast = _same_as_yaml(text, block_lists=True)
    assert fast is not None
    assert fast["combines"] == ["6950cada1a6ff1ab", "69569e3736531718"]
    assert fast["results"][1] == {
        "config": "t1_h4096",
        "baseline": 2,
        "speedup": 0.9094,
        "unit": "us",
    }
    # Without block lists, only one-line values are read.
    assert read_simple_front_matter(text, STRING_FIELDS) is None
    assert read_simple_front_matter(text.split("results")[0], STRING_FIELDS) is not None


def test_unsure_block_lists_are_declined() -> None:
    for text in (
        "results:\n",  # null
        "results:\nstatus: done\n",  # null, then a key
        "results:\n\n- {config: a}\n",  # a blank line before the first item
        "results:\n- {config: a}\n\n- {config: b}\n",  # a blank line between items
        "results:\n- {config: a}\n  - {config: b}\n",  # indented
        "results:\n- {config: a}  # comment\n",
        "results:\n- {config: a, config: b}\n",  # duplicate key
        "results:\n- {config: a,}\n",
        "results:\n- {config: a, }\n",
        "results:\n- {null: a}\n",
        "results:\n- {config: ~}\n",
        "results:\n- [a]\n",
        "results:\n- a\n",
        "- {config: a}\n",  # an item without a key
        "results:\n- {config: a}\nresults:\n- {config: b}\n",
    ):
        assert read_simple_front_matter(text, STRING_FIELDS, block_lists=True) is None, text
        _same_as_yaml(text, block_lists=True)


def test_long_keys_are_declined() -> None:
    # YAML refuses an implicit key longer than 1024 characters.
    for length in (128, 129, 1024, 1025, 2000):
        text = "k" * length + ": v\n"
        fast = _same_as_yaml(text)
        assert (fast is not None) == (length <= 128)


def test_characters_yaml_refuses_are_declined() -> None:
    """No line with a character the front-matter may not hold is read (quickcheck relies
    on it for ASCII text, where it does not search for such characters)."""
    bad = [
        chr(code)
        for code in range(0x110000)
        if not 0xD800 <= code < 0xE000
        and chr(code) != "\n"
        and FRONT_MATTER_BAD_CHAR.match(chr(code) + "x")
    ]
    assert "\x85" in bad and "\u2028" in bad and "\ufeff" in bad and "\x00" in bad
    for char in bad:
        for text in (
            f"env: a{char}b\n",
            f"env: 'a{char}b'\n",
            f"tags: [a{char}b]\n",
            f"tags: ['a{char}b']\n",
            f"results:\n- {{config: 'a{char}b'}}\n",
            f"results:\n- {{config: a{char}b}}\n",
            f"id: 0a{char}\n",
            f"score: 1.0{char}\n",
        ):
            assert read_simple_front_matter(text, STRING_FIELDS, block_lists=True) is None


def test_the_line_cache_gives_fresh_lists() -> None:
    text = "tags: [a, b]\nresults:\n- {config: x, speedup: 1.5}\n"
    first = read_simple_front_matter(text, STRING_FIELDS, block_lists=True)
    assert first is not None
    first["tags"].append("c")
    first["results"][0]["config"] = "y"
    again = read_simple_front_matter(text, STRING_FIELDS, block_lists=True)
    assert again == {"tags": ["a", "b"], "results": [{"config": "x", "speedup": 1.5}]}


# --- the quick verdict ------------------------------------------------------------------

REPO = Path(__file__).resolve().parent.parent
CORPUS = REPO / "tests" / "corpus" / "bad"
#: Where the bad-input corpus files lie in a store, unless expected.json says otherwise.
CORPUS_NAME = "experiments/2026/11/6749f3a0c2d41e7b-unrolled.md"
BUNDLED = sorted(
    p for p in (REPO / "experiments").rglob("*.md") if EXPERIMENT_NAME.fullmatch(p.name)
)
BENCH = REPO / "bench" / ".data" / "n1000-seed20261129-v2" / "store" / "experiments"


def _agree(data: bytes | str, path: str | Path) -> dict[str, Any] | None:
    """quick_fields of a file, checked against check_bytes: None, or its valid fields;
    and, for a valid file, quick_bodies against the parser's body values."""
    quick = quick_fields(data, path)
    if quick is not None:
        checked = check_bytes(data, Path(path))
        assert checked.ok, [p.format() for p in checked.problems]
        assert checked.document is not None
        fields = checked.document.fields
        assert quick == fields
        assert list(quick) == list(fields)
        assert _types(quick) == _types(fields)
    if isinstance(data, bytes):
        checked = check_bytes(data, Path(path))
        if checked.ok and checked.document is not None:
            bodies = quick_bodies(data, BODY_FIELDS)
            if bodies is not None:
                assert bodies == checked.document.body_values()
    return quick


def test_the_bad_corpus_is_never_valid() -> None:
    expected = json.loads((CORPUS / "expected.json").read_text(encoding="utf-8"))
    assert len(expected) >= 40
    for name, entry in expected.items():
        data = (CORPUS / name).read_bytes()
        assert quick_fields(data, entry.get("path", CORPUS_NAME)) is None, name
        _agree(data, CORPUS / name)  # under its own name (not an experiment's)


def test_bundled_experiments_take_the_fast_answer() -> None:
    assert len(BUNDLED) >= 10
    for path in BUNDLED:
        data = path.read_bytes()
        assert _agree(data, path) is not None, path
        assert _agree(data, str(path)) is not None, path
        # The same file with CRLF line endings or a BOM is as valid.
        assert _agree(data.replace(b"\n", b"\r\n"), path) is not None, path
        assert _agree(codecs.BOM_UTF8 + data, path) is not None, path


@pytest.mark.skipif(not BENCH.is_dir(), reason="bench data not generated (bench/generate.py)")
def test_bench_store_takes_the_fast_answer() -> None:
    paths = sorted(p for p in BENCH.rglob("*.md") if EXPERIMENT_NAME.fullmatch(p.name))
    assert len(paths) >= 1000
    for path in paths:
        assert _agree(path.read_bytes(), path) is not None, path


def _real_time_by_strptime(stamp: str) -> bool:
    try:
        dt.datetime.strptime(stamp, "%Y-%m-%dT%H:%M:%S")
    except ValueError:
        return False
    return True


def test_real_times_are_what_strptime_accepts() -> None:
    for year in ("0000", "0001", "1900", "2000", "2023", "2024", "2100", "9999"):
        for month in ("00", "01", "02", "04", "09", "12", "13", "99"):
            for day in ("00", "01", "28", "29", "30", "31", "32", "99"):
                stamp = f"{year}-{month}-{day}T12:00:00"
                assert _real_time(stamp) == _real_time_by_strptime(stamp), stamp
    for hour in ("00", "09", "23", "24", "99"):
        for minute in ("00", "59", "60", "99"):
            for second in ("00", "59", "60", "61", "99"):
                stamp = f"2026-11-29T{hour}:{minute}:{second}"
                assert _real_time(stamp) == _real_time_by_strptime(stamp), stamp


GOOD_ID = "6749f3a0c2d41e7b"
GOOD_PATH = f"experiments/2026/11/{GOOD_ID}-unrolled.md"


def _experiment(**overrides: Any) -> KernelExperiment:
    fields = experiment_fields(
        id=GOOD_ID,
        base_commit="3f2c9e1a7b8d4c6e5f0a1b2c3d4e5f6a7b8c9d0e",
        created_at="2026-11-29T15:52:36Z",
        code_change="--- a/k.cu\n+++ b/k.cu\n@@ -1 +1 @@\n-a\n+b",
    )
    fields.update(overrides)
    return KernelExperiment(**fields)


#: Valid files to mutate: the bundled experiments, and files kexp writes.
BASES: list[tuple[str, str]] = [
    (str(p.relative_to(REPO)), p.read_text(encoding="utf-8")) for p in BUNDLED
] + [
    (GOOD_PATH, serialize(_experiment(**overrides)))
    for overrides in (
        {},
        {"is_buggy": True, "status": "failed", "score": 0.0, "error_message": "Segfault"},
        {
            "is_buggy": True,
            "error_message": "```\nnot closed\n## Error message\nx",
            "raw_result": "## Error message\nin a verbatim fence",
            "tags": ["a", "yes", "1.5"],
            "combines": ["6749f3a1d4e5f6a7", "1234567890123456"],
            "results": [
                {"config": "a,b", "baseline": 1.0, "candidate": 2, "speedup": 0.5},
                {"config": "c", "speedup": 1.5, "unit": "us"},
            ],
            "preamble": "a preamble\n## not a heading",
            "extra_sections": [("Notes", "~~~\nfenced")],
        },
    )
]


def test_bases_are_valid_and_fast() -> None:
    for path, text in BASES:
        assert _agree(text.encode(), path) is not None, path


_LINES = [
    "## Error message",
    "## Error message\n\nSegfault",
    "## Raw result",
    "## Code change",
    "## Detailed description",
    "## error MESSAGE  ",
    "##",
    "## ",
    "##\tError message",
    "### Error message",
    " ## Error message",
    "```",
    "````",
    "~~~",
    "~~~~",
    "   ```",
    "    ```",
    "  ```",
    " ~~~",
    "   ~~~~ x",
    "    ~~~",
    "x```",
    " x```",
    "``` ",
    "```\t",
    "``` x",
    "``` `x`",
    "~~~ `x`",
    "```kexp-verbatim",
    "```diff",
    "``",
    "---",
    "--- ",
    "---x",
    "...",
    "",
    " ",
    "\t",
    "text",
    "# comment",
    "key: value",
    "reviewer: alice",
    "tags: [a, b]",
    "tags: []",
    "results:",
    "- {config: x, speedup: 1.0}",
    "- {config: x, speedup: 1.0, speedup: 2.0}",
    "is_buggy: true",
    "is_buggy: false",
    "score: .inf",
    f"id: {GOOD_ID}",
    "status: done",
    "env: a: b",
    "pid: ''",
]
_FIELD_VALUES = {
    "id": [GOOD_ID, "6749F3A0C2D41E7B", "1234567890123456", "0b10101010101010", f"'{GOOD_ID}'"],
    "pid": ["''", GOOD_ID, "x", "''''", "6749f3a1d4e5f6a7"],
    "score": [
        "1.0",
        "0",
        "1",
        ".inf",
        ".nan",
        "-.inf",
        "-1.0",
        "1e309",
        "1.0e+3",
        "'1.5'",
        "1_000.5",
        "true",
        "0x1F",
        "1:30",
        "9" * 30,
        "-0.0",
    ],
    "is_buggy": ["true", "false", "yes", "True", "'true'", "1", "null"],
    "created_at": [
        f"'{stamp}'"
        for stamp in (
            "2026-02-30T00:00:00Z",
            "2024-02-29T23:59:59Z",
            "2023-02-29T00:00:00Z",
            "2026-13-01T00:00:00Z",
            "2026-00-10T00:00:00Z",
            "2026-01-00T00:00:00Z",
            "2026-01-01T24:00:00Z",
            "2026-01-01T23:60:00Z",
            "2026-01-01T23:59:60Z",
            "0000-01-01T00:00:00Z",
            "2026-11-29T15:52:36.5Z",
            "2026-11-29T15:52:36Z ",
            "2026-11-29 15:52:36Z",
            "1900-02-29T00:00:00Z",
            "2000-02-29T00:00:00Z",
        )
    ]
    + ["2026-11-29T15:52:36Z"],
    "status": ["done", "new", "weird", "'done'", "Done"],
    "tags": ["[a, a]", "[a, '']", "[]", "['x', y]", "[yes]", "[a, 1]"],
    "results": [
        "[]",
        "\n- {config: a, speedup: 0}",
        "\n- {config: a, speedup: 1.0}",
        "\n- {speedup: 1.0}",
        "\n- {config: '', speedup: 1.0}",
    ],
    "change_summary": ["x" * 81, "x" * 80, "'a''b'", "a #b", "a: b", "''", "yes"],
    "combines": ["[6749f3a1d4e5f6a7]", "[x]", "[6749f3a1d4e5f6a7, 6749f3a1d4e5f6a7]"],
    "author": ["''", "'a'", "[a]"],
}
_CHARS = [
    "\t",
    "\x00",
    "\x85",
    "\u2028",
    "\u2029",
    "\ufeff",
    "\xa0",
    "\r",
    "é",
    "🚀",
    "\x7f",
    "\ufffe",
    "`",
    "~",
    "#",
    "\n",
    " ",
    "'",
]
_NAMES = [
    f"{GOOD_ID}-unrolled.md",
    f"{GOOD_ID}.md",
    "6749f3a1d4e5f6a7-other.md",
    "notes.md",
    f"{GOOD_ID}-Upper.md",
]
_mutation = st.one_of(
    st.tuples(st.just("insert"), st.integers(0, 200), st.sampled_from(_LINES)),
    st.tuples(st.just("replace"), st.integers(0, 200), st.sampled_from(_LINES)),
    st.tuples(st.just("delete"), st.integers(0, 200)),
    st.tuples(st.just("duplicate"), st.integers(0, 200)),
    st.sampled_from(sorted(_FIELD_VALUES)).flatmap(
        lambda field: st.tuples(
            st.just("field"), st.just(field), st.sampled_from(_FIELD_VALUES[field])
        )
    ),
    st.tuples(st.just("char"), st.integers(0, 5000), st.sampled_from(_CHARS)),
    st.tuples(st.just("truncate"), st.integers(0, 5000)),
    st.tuples(st.just("name"), st.sampled_from(_NAMES)),
    st.sampled_from([("crlf",), ("crlf-first",), ("bom",), ("bad-utf8",)]),
)


def _mutate(path: str, text: str, mutation: tuple[Any, ...]) -> tuple[str, str | bytes]:
    kind = mutation[0]
    lines = text.split("\n")
    if kind in ("insert", "replace", "delete", "duplicate"):
        index = mutation[1] % len(lines)
        if kind == "insert":
            lines.insert(index, mutation[2])
        elif kind == "replace":
            lines[index] = mutation[2]
        elif kind == "delete":
            del lines[index]
        else:
            lines.insert(index, lines[index])
        return path, "\n".join(lines)
    if kind == "field":
        field, value = mutation[1], mutation[2]
        line = f"{field}: {value}" if not value.startswith("\n") else f"{field}:{value}"
        pattern = re.compile(rf"^{field}:.*(?:\n- .*)*$", re.MULTILINE)
        if pattern.search(text):
            return path, pattern.sub(lambda _: line, text, count=1)
        return path, text.replace("\n", f"\n{line}\n", 1)
    if kind == "char":
        index = mutation[1] % (len(text) + 1)
        return path, text[:index] + mutation[2] + text[index:]
    if kind == "truncate":
        return path, text[: mutation[1] % (len(text) + 1)]
    if kind == "name":
        return str(Path(path).with_name(mutation[1])), text
    if kind == "crlf":
        return path, text.replace("\n", "\r\n")
    if kind == "crlf-first":
        return path, text.replace("\n", "\r\n", 1)
    if kind == "bom":
        return path, "\ufeff" + text
    assert kind == "bad-utf8"
    data = text.encode()
    return path, data[: len(data) // 2] + b"\xff" + data[len(data) // 2 :]


@settings(max_examples=1500, deadline=None)
@given(
    base=st.sampled_from(BASES),
    mutations=st.lists(_mutation, min_size=1, max_size=3),
)
def test_mutated_files_are_answered_right(
    base: tuple[str, str], mutations: list[tuple[Any, ...]]
) -> None:
    path, text = base
    data: str | bytes = text
    for mutation in mutations:
        if isinstance(data, bytes):
            break
        path, data = _mutate(path, data, mutation)
    _agree(data.encode() if isinstance(data, str) else data, path)
    if isinstance(data, str):
        _agree(data, path)


def test_headings_inside_fences_are_no_sections() -> None:
    buggy = _experiment(is_buggy=True, status="failed", error_message="boom")
    text = serialize(buggy)
    assert _agree(text.encode(), GOOD_PATH) is not None
    head, tail = text.split("## Error message\n\nboom\n")
    for body, valid in (
        ("```\n## Error message\n\nboom\n```\n", False),
        ("~~~\n## Error message\n\nboom\n~~~\n", False),
        ("   ````x\n## Error message\n\nboom\n   ````\n", False),
        ("```\n## Error message\n\nboom\n````  \n", False),
        ("````\n## Error message\n\nboom\n```\n", False),  # a shorter run does not close
        ("``` `x`\n## Error message\n\nboom\n", True),  # not a fence: ` in the info
        ("~~~ `x`\n## Error message\n\nboom\n~~~\n", False),  # a tilde fence may
        ("    ```\n## Error message\n\nboom\n", True),  # indented code, not a fence
        ("## Error message\n\n```kexp-verbatim\n  \n```\n", False),  # blank when unwrapped
        ("## Error message\n\n```kexp-verbatim\nx\n```\n", True),
        ("## Error message\n\n   \n", False),
        ("## Error message", False),
        ("## error message\n\nboom\n## ERROR MESSAGE  \n\nagain\n", False),  # twice
    ):
        changed = head + body + tail
        quick = _agree(changed.encode(), GOOD_PATH)
        assert (quick is not None) == valid, body
        assert check_bytes(changed.encode(), Path(GOOD_PATH)).ok == valid, body


def test_an_unclosed_fence_runs_to_the_end() -> None:
    text = serialize(_experiment()) + "\n## Notes\n\n```\nopen\n## Raw result\n\nagain\n"
    assert _agree(text.encode(), GOOD_PATH) is not None


def test_a_section_heading_repeated_inside_a_fence_is_no_duplicate() -> None:
    """A file that is not buggy is answered from its heading lines alone unless two name
    one section; then the fences decide, as in the full check."""
    text = serialize(_experiment())
    for extra, valid in (
        ("\n## Notes\n\n```\n## Raw result\n\nagain\n```\n", True),
        ("\n## Notes\n\n~~~\n## raw result\n~~~\n", True),
        ("\n## Notes\n\n```\ncode\n```\n## Raw result\n\nagain\n", False),
        ("\n## RAW RESULT  \n\nagain\n", False),
        ("\n## Notes\n\n## Notes\n", True),  # an unknown section may repeat
    ):
        changed = (text + extra).encode()
        assert check_bytes(changed, Path(GOOD_PATH)).ok == valid, extra
        assert (_agree(changed, GOOD_PATH) is not None) == valid, extra


def test_values_outside_the_fast_reader_are_not_sure() -> None:
    text = serialize(_experiment())
    for old, new in (
        ("env: MI300X, ROCm 7.0.0", 'env: "MI300X"'),
        ("env: MI300X, ROCm 7.0.0", "env: MI300X  # comment"),
        ("dtype_sig: bf16", "dtype_sig: bf16\ntags:\n- a"),
        ("---\n", "---\n# comment\n"),
    ):
        changed = text.replace(old, new, 1)
        assert check_bytes(changed.encode(), Path(GOOD_PATH)).ok
        assert _agree(changed.encode(), GOOD_PATH) is None
    # A blank line between fields is read (YAML skips it).
    changed = text.replace("dtype_sig: bf16", "dtype_sig: bf16\n\nauthor: a")
    assert _agree(changed.encode(), GOOD_PATH) == {
        **check_bytes(text.encode(), Path(GOOD_PATH)).document.fields,  # type: ignore[union-attr]
        "author": "a",
    }


_tame = st.text(alphabet=string.ascii_letters + string.digits + " -+.,:#'\"[]()/%", max_size=30)
_body = st.lists(st.one_of(st.sampled_from(_LINES), _tame), max_size=6).map("\n".join)


@settings(max_examples=300, deadline=None)
@given(
    summary=_tame.filter(lambda s: s.strip()),
    env=_tame,
    tags=st.lists(
        st.text(alphabet=string.ascii_letters + string.digits + " -_./", min_size=1, max_size=9),
        max_size=3,
        unique=True,
    ),
    is_buggy=st.booleans(),
    bodies=st.lists(_body, min_size=6, max_size=6),
)
def test_files_kexp_writes_take_the_fast_answer(
    summary: str, env: str, tags: list[str], is_buggy: bool, bodies: list[str]
) -> None:
    exp = _experiment(
        change_summary=summary[:80],
        env=env,
        tags=tags,
        is_buggy=is_buggy,
        detailed_description=bodies[0],
        raw_result=bodies[1],
        profiling_info=bodies[2],
        error_message=bodies[3],
        code_change=bodies[4],
        preamble=bodies[5],
    )
    data = serialize(exp).encode()
    quick = _agree(data, GOOD_PATH)
    if check_bytes(data, Path(GOOD_PATH)).ok:
        assert quick is not None


# --- the schema, value by value ------------------------------------------------------

_VALID_FIELDS: dict[str, Any] = {
    "id": "665a9ec20fbc268b",
    "pid": "",
    "change_summary": "Used readfirstlane - +21%",
    "score": 1.25,
    "status": "done",
    "is_buggy": False,
    "operator_sig": "csrc/x.cu: k",
    "dtype_sig": "bf16",
    "env": "MI300X",
    "base_commit": "4d9bfc2",
    "created_at": "2024-06-01T04:08:34Z",
    "tags": ["gemm", "amd"],
    "author": "agent-8",
    "combines": ["665369008a8430ca"],
    "results": [{"config": "M=1", "speedup": 1.2}],
}
_ODD_VALUES = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-3, 3),
    st.floats(),
    st.sampled_from(["", "done", "665a9ec20fbc268b", "x" * 81, "a\nb", "bf16", "4d9bfc2"]),
    st.lists(st.sampled_from(["gemm", "", "665369008a8430ca", "gemm", 1]), max_size=3),
    st.lists(
        st.fixed_dictionaries(
            {"config": st.sampled_from(["M=1", ""])},
            optional={"speedup": st.sampled_from([1.2, 0, -1, "x", True])},
        ),
        max_size=2,
    ),
)


@settings(max_examples=400, deadline=None)
@given(
    changes=st.lists(
        st.tuples(st.sampled_from([*_VALID_FIELDS, "extra_key"]), _ODD_VALUES), max_size=3
    ),
    removed=st.lists(st.sampled_from(list(_VALID_FIELDS)), max_size=1),
)
def test_the_schema_checked_value_by_value_agrees_with_the_whole_validator(
    changes: list[tuple[str, Any]], removed: list[str]
) -> None:
    from kexp.format.quickcheck import _schema_check
    from kexp.format.schema import fast_validator

    validate, invalid = fast_validator()
    fields = dict(_VALID_FIELDS)
    for key, value in changes:
        fields[key] = value
    for key in removed:
        fields.pop(key)
    try:
        validate(fields)
        expected = True
    except invalid:
        expected = False
    accepts, holds = _schema_check()
    assert (all(accepts(k, v) for k, v in fields.items()) and holds(fields)) == expected


def test_the_reader_remembers_each_predicates_answers_apart() -> None:
    """A line accepted once is not checked again by the same predicate, and a line read
    without a predicate (or accepted by another) is still checked by this one."""
    text = "id: 665a9ec20fbc268b\nscore: 2.5\n"
    asked: list[tuple[str, Any]] = []

    def small_scores(key: str, value: Any) -> bool:
        asked.append((key, value))
        return key != "score" or value < 2

    assert read_simple_front_matter(text, STRING_FIELDS) is not None
    assert read_simple_front_matter(text, STRING_FIELDS, accept=lambda k, v: True) is not None
    assert read_simple_front_matter(text, STRING_FIELDS, accept=small_scores) is None
    assert ("score", 2.5) in asked
    fine = "id: 665a9ec20fbc268b\nscore: 1.5\nresults:\n- {config: a, speedup: 3}\n"
    asked.clear()
    assert read_simple_front_matter(fine, STRING_FIELDS, block_lists=True, accept=small_scores)
    assert [key for key, _ in asked] == ["score", "results"]  # id remembered
    asked.clear()
    assert read_simple_front_matter(fine, STRING_FIELDS, block_lists=True, accept=small_scores)
    assert asked == [("results", [{"config": "a", "speedup": 3}])]  # lists: every time


def test_a_schema_relating_properties_is_checked_whole(monkeypatch: pytest.MonkeyPatch) -> None:
    """The generator writes per-property validators only for a schema whose properties
    are independent; with ``additionalProperties`` (or any other top-level keyword) it
    writes none, and the whole validator decides."""
    pytest.importorskip("fastjsonschema")
    import kexp.format.schema as schema_module

    plain = schema_module.load_schema()
    assert "PROPERTY_VALIDATORS = {" in schema_module.generated_validator_source()
    monkeypatch.setattr(
        schema_module, "load_schema", lambda: dict(plain, additionalProperties=False)
    )
    source = schema_module.generated_validator_source()
    assert "PROPERTY_VALIDATORS = None" in source
    namespace: dict[str, Any] = {}
    exec(compile(source, "generated", "exec"), namespace)
    assert namespace["PROPERTY_VALIDATORS"] is None
    namespace["validate"](dict(_VALID_FIELDS))
    with pytest.raises(namespace["JsonSchemaValueException"]):
        namespace["validate"](dict(_VALID_FIELDS, unknown=1))


def test_without_property_validators_the_fields_are_checked_whole(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import kexp.format.schema as schema_module
    from kexp.format.quickcheck import _SchemaCheck

    monkeypatch.setattr(schema_module, "property_validators", lambda: None)
    check = _SchemaCheck()
    assert check.accepts("score", -1)  # nothing checked value by value
    assert check.holds(dict(_VALID_FIELDS))
    assert not check.holds(dict(_VALID_FIELDS, score=-1))
    assert not check.holds({k: v for k, v in _VALID_FIELDS.items() if k != "id"})


def test_quick_bodies_answer_most_plain_files() -> None:
    """The body texts are read without the parse for every plain file (bundled and
    bases), and equal the parser's (checked by _agree on every file of this module)."""
    answered = 0
    for path in [*BUNDLED, *(Path(p) for p, _ in BASES)]:
        data = path.read_bytes() if path.is_file() else dict(BASES)[str(path)].encode()
        _agree(data, path)
        answered += quick_bodies(data, BODY_FIELDS) is not None
    assert answered >= len(BUNDLED)
