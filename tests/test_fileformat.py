"""The experiment file format: round trips, canonical form, minimal updates, traps.

These tests work on the format layer (``kexp.format.fileformat.parse``/``serialize``/
``render_update``) with real bytes, so they hold for any text a user or an agent can put
in a field, valid experiment or not.
"""

from __future__ import annotations

import dataclasses
import difflib
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, example, given, reject, settings
from hypothesis import strategies as st

from kexp.core.model import FRONT_MATTER_FIELDS, SECTION_HEADINGS, KernelExperiment
from kexp.format.fileformat import Document, FileFormatError, parse, render_update, serialize
from kexp.format.validate import check_bytes

# --- strategies ----------------------------------------------------------------------

#: Pieces of text that have tripped up Markdown/YAML writers: headings, front-matter
#: fences, code fences of every kind (closed or not), line endings, YAML indicators and
#: implicit types, control characters, Unicode line breaks, a BOM, emoji.
TRICKY = [
    "## ",
    "## Raw result",
    "## Code change",
    "##",
    "### Sub",
    "---",
    "---\n",
    "```",
    "````",
    "```diff",
    "```kexp-verbatim",
    "~~~",
    "~~~~",
    "   ```",
    "\n",
    "\n\n",
    "\r\n",
    "\r",
    "\t",
    " ",
    "😀",
    "\x01",
    "\x1b[31m",
    "\x7f",
    "\x85",
    "\u2028",
    "\u2029",
    "\ufeff",
    "\xa0",
    "#",
    " #",
    ": ",
    "- ",
    "? ",
    "'",
    '"',
    "\\",
    "`",
    "|",
    ">",
    "{",
    "[",
    "]",
    ",",
    "&a",
    "*a",
    "!!python/object/apply:os.system",
    "%YAML",
    "@",
    "null",
    "~",
    "yes",
    "true",
    "1234567",
    "0123456",
    "0x1f",
    "1e5",
    ".inf",
    "2026-11-29T15:52:36Z",
    "2026-11-29",
    "<<",
    "=",
]

_chars = st.characters(exclude_characters="\x00", exclude_categories=("Cs",))
texts = st.one_of(
    st.lists(st.one_of(st.sampled_from(TRICKY), st.text(_chars, max_size=12)), max_size=10).map(
        "".join
    ),
    st.sampled_from(TRICKY),
)
#: 10,000-character fields, built from a short random unit.
long_texts = st.lists(
    st.one_of(st.sampled_from(TRICKY), st.text(_chars, min_size=1, max_size=3)),
    min_size=1,
    max_size=3,
).map(lambda parts: ("".join(parts) * 10_000)[:10_000])
short_texts = st.lists(
    st.one_of(st.sampled_from(TRICKY), st.text(_chars, max_size=6)), max_size=4
).map("".join)
_KNOWN_HEADINGS = {heading.lower() for heading in SECTION_HEADINGS.values()}
#: Headings of unknown sections: one line, no surrounding blanks, not a known heading.
headings = short_texts.map(lambda h: h.replace("\n", " ").strip()).filter(
    lambda h: h.lower() not in _KNOWN_HEADINGS
)
finite = st.floats(allow_nan=False)
scalars = st.one_of(st.none(), st.booleans(), st.integers(), finite, short_texts)
json_like = st.recursive(
    scalars,
    lambda inner: st.one_of(
        st.lists(inner, max_size=3), st.dictionaries(short_texts, inner, max_size=3)
    ),
    max_leaves=6,
)
results = st.lists(
    st.fixed_dictionaries(
        {"config": short_texts, "speedup": finite},
        optional={"baseline": finite, "candidate": finite, "unit": short_texts},
    ),
    max_size=3,
)
extra_keys = short_texts.map(lambda k: f"x-{k}" if k in FRONT_MATTER_FIELDS else k)


@st.composite
def experiments(draw: st.DrawFn, texts: st.SearchStrategy[str] = texts) -> KernelExperiment:
    """Any experiment the format must carry: arbitrary text in every text field."""
    return KernelExperiment(
        id=draw(texts),
        pid=draw(texts),
        score=draw(finite),
        raw_result=draw(texts),
        dtype_sig=draw(texts),
        env=draw(texts),
        is_buggy=draw(st.booleans()),
        error_message=draw(texts),
        change_summary=draw(texts),
        detailed_description=draw(texts),
        code_change=draw(texts),
        base_commit=draw(texts),
        operator_sig=draw(texts),
        profiling_info=draw(texts),
        status=draw(texts),
        created_at=draw(texts),
        tags=draw(st.lists(short_texts, max_size=3)),
        author=draw(texts),
        combines=draw(st.lists(short_texts, max_size=2)),
        results=draw(results),
        extra_fields=draw(st.dictionaries(extra_keys, json_like, max_size=3)),
        preamble=draw(texts),
        extra_sections=draw(st.lists(st.tuples(headings, texts), max_size=3)),
    )


def _reread(text: str) -> KernelExperiment:
    return parse(text.encode("utf-8"), "exp.md").to_experiment()


# --- round trips ---------------------------------------------------------------------


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(experiments())
@example(KernelExperiment())
@example(
    KernelExperiment(
        change_summary="a\r\nb",
        detailed_description="```\n## Raw result\nnot a heading\n",
        raw_result="````\n~~~\n---\n",
        code_change="```diff\n-old\n+new\n```\n````",
        preamble="## Not a section",
        extra_sections=[("Notes", "\n\n  x\t\n\n")],
        extra_fields={"reviewer": None, "nested": {"a": [1, "2"]}},
    )
)
def test_round_trip_any_text(exp: KernelExperiment) -> None:
    _assert_round_trip(exp)


@settings(max_examples=5, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(experiments(long_texts))
def test_round_trip_10000_character_fields(exp: KernelExperiment) -> None:
    assert len(exp.detailed_description) == len(exp.change_summary) == 10_000
    _assert_round_trip(exp)


def _assert_round_trip(exp: KernelExperiment) -> None:
    text = serialize(exp)
    again = _reread(text)
    assert again == exp
    assert serialize(again) == text
    assert text.endswith("\n")
    assert text.startswith("---\nid: ")


def test_canonical_file_is_rewritten_byte_for_byte() -> None:
    canonical = _GOLDEN
    doc = parse(canonical.encode(), "6749f3a0c2d41e7b-fused-unroll.md")
    exp = doc.to_experiment()
    assert serialize(exp) == canonical
    assert render_update(doc, exp) == canonical
    assert exp.score == 0.9937
    assert exp.created_at == "2026-11-29T15:52:36Z"
    assert exp.tags == ["cache", "unroll", "vectorize"]
    assert exp.code_change == "--- a/cache_kernels.cu\n+++ b/cache_kernels.cu\n-x\n+y"
    assert exp.detailed_description.startswith("**Approach**: fuse")
    assert "## Not a heading" in exp.profiling_info
    assert exp.error_message == ""


_GOLDEN = """\
---
id: 6749f3a0c2d41e7b
pid: 6749e1b2a0f3c9d4
change_summary: Fused unroll + vectorized store into cache kernel - -0.63% (interference)
score: 0.9937
status: done
is_buggy: false
operator_sig: 'csrc/kernels/cache_kernels.cu: reshape_and_cache_flash'
dtype_sig: bf16
env: MI300X, ROCm 7.0.0
base_commit: 3f2c9e1a7b8d4c6e5f0a1b2c3d4e5f6a7b8c9d0e
created_at: '2026-11-29T15:52:36Z'
tags: [cache, unroll, vectorize]
---

## Detailed description

**Approach**: fuse the unrolled loop with the vectorized store.
**Result**: -0.63%.

### Why it failed
Register pressure.

## Raw result

Iteration 7 Results - REGRESSION: 0.9937x

## Profiling info

```text
## Not a heading: inside a fence
VGPRs: 128
```

## Code change

```diff
--- a/cache_kernels.cu
+++ b/cache_kernels.cu
-x
+y
```
"""


# --- updates touch only what changed -------------------------------------------------

#: A hand-written file: comments, unusual spacing and quoting, an unknown field, a
#: preamble and an unknown section; none of it canonical.
_HANDWRITTEN = """\
---
# Written by hand; keep this comment.
id: 6749f3a0c2d41e7b
pid:   ""        # no parent
change_summary: "Unrolled the inner loop by 4 - +1.90%"
score: 1.019   # measured twice
status: done
is_buggy: no
operator_sig: csrc/kernels/cache_kernels.cu:reshape_and_cache_flash
dtype_sig: bf16
env: "MI300X, ROCm 7.0.0"
base_commit: '3f2c9e1a7b8d4c6e5f0a1b2c3d4e5f6a7b8c9d0e'
created_at: "2026-11-29T15:52:36Z"
reviewer: alice     # not a kexp field
---
Some notes before the first section.


## Detailed description
**Approach**: unroll 4
**Key insight**: unrolling helps
## Raw result

Iteration 1 Results - SUCCESS


## Notes

Ask Bob about the LDS layout.

## Code change

````diff
-a
+b
````
"""


def _changed_lines(old: str, new: str) -> tuple[list[str], list[str]]:
    """Lines removed from ``old`` and added in ``new`` (a difflib unified diff)."""
    removed: list[str] = []
    added: list[str] = []
    for line in difflib.unified_diff(old.splitlines(), new.splitlines(), lineterm="", n=0):
        if line.startswith(("---", "+++", "@@")):
            continue
        (removed if line.startswith("-") else added).append(line[1:])
    return removed, added


def _update(text: str, **changes: Any) -> str:
    doc = parse(text.encode(), "6749f3a0c2d41e7b-unroll.md")
    new = render_update(doc, dataclasses.replace(doc.to_experiment(), **changes))
    reread = _reread(new)
    expected = dataclasses.replace(doc.to_experiment(), **changes)
    assert reread == expected
    return new


@pytest.mark.parametrize("text", [_GOLDEN, _HANDWRITTEN], ids=["canonical", "handwritten"])
def test_unchanged_update_is_a_no_op(text: str) -> None:
    doc = parse(text.encode(), "x.md")
    assert render_update(doc, doc.to_experiment()) == text


def test_score_update_changes_only_the_score_line() -> None:
    new = _update(_HANDWRITTEN, score=1.25)
    assert _changed_lines(_HANDWRITTEN, new) == (
        ["score: 1.019   # measured twice"],
        ["score: 1.25"],
    )


def test_score_update_in_canonical_file() -> None:
    new = _update(_GOLDEN, score=1.5)
    assert _changed_lines(_GOLDEN, new) == (["score: 0.9937"], ["score: 1.5"])


def test_section_update_changes_only_that_section() -> None:
    new = _update(_HANDWRITTEN, raw_result="Iteration 2 Results - SUCCESS")
    removed, added = _changed_lines(_HANDWRITTEN, new)
    assert [line for line in removed if line] == ["Iteration 1 Results - SUCCESS"]
    assert [line for line in added if line] == ["Iteration 2 Results - SUCCESS"]
    # Everything outside the section is untouched.
    assert new.split("## Raw result")[0] == _HANDWRITTEN.split("## Raw result")[0]
    assert new.split("## Notes")[1] == _HANDWRITTEN.split("## Notes")[1]


def test_added_optional_field_is_one_new_line() -> None:
    new = _update(_HANDWRITTEN, tags=["cache", "unroll"])
    assert _changed_lines(_HANDWRITTEN, new) == ([], ["tags: [cache, unroll]"])
    # In canonical order: after created_at, before the unknown field.
    lines = new.splitlines()
    assert (
        lines.index("tags: [cache, unroll]")
        == lines.index('created_at: "2026-11-29T15:52:36Z"') + 1
    )


def test_added_section_is_inserted_in_canonical_order() -> None:
    new = _update(_HANDWRITTEN, profiling_info="VGPRs: 96")
    removed, added = _changed_lines(_HANDWRITTEN, new)
    assert removed == []
    assert [line for line in added if line] == ["## Profiling info", "VGPRs: 96"]
    assert new.index("## Raw result") < new.index("## Profiling info") < new.index("## Code change")


def test_emptied_section_is_removed() -> None:
    new = _update(_HANDWRITTEN, raw_result="")
    removed, added = _changed_lines(_HANDWRITTEN, new)
    assert added == []
    assert [line for line in removed if line] == ["## Raw result", "Iteration 1 Results - SUCCESS"]
    assert "## Raw result" not in new


def test_code_change_update_keeps_everything_else() -> None:
    new = _update(_HANDWRITTEN, code_change="-a\n+c")
    removed, added = _changed_lines(_HANDWRITTEN, new)
    assert "+b" in removed and "+c" in added
    before, after = _HANDWRITTEN.split("## Code change")[0], new.split("## Code change")[0]
    assert before == after


@settings(max_examples=60, deadline=None)
@given(field=st.sampled_from(["change_summary", "env", "detailed_description"]), value=texts)
def test_update_of_one_field_leaves_other_lines_alone(field: str, value: str) -> None:
    new = _update(_HANDWRITTEN, **{field: value})
    for keep in (
        "# Written by hand; keep this comment.",
        'pid:   ""        # no parent',
        "score: 1.019   # measured twice",
        "is_buggy: no",
        "reviewer: alice     # not a kexp field",
        "Ask Bob about the LDS layout.",
    ):
        assert keep in new.splitlines()


def test_section_added_after_an_unclosed_fence_stays_a_section() -> None:
    # A hand-written last section leaves a fence open: it runs to the end of the file.
    text = _GOLDEN.split("## Raw result")[0] + "## Raw result\n\n```\nlog, never closed\n"
    doc = parse(text.encode(), "x.md")
    assert doc.to_experiment().raw_result == "```\nlog, never closed"
    new = render_update(doc, dataclasses.replace(doc.to_experiment(), error_message="boom"))
    again = _reread(new)
    assert again.error_message == "boom"
    assert again.raw_result == "```\nlog, never closed"


_FIELDS = (
    "id: 6749f3a0c2d41e7b, pid: '', change_summary: x, score: 1.0, status: done, "
    "is_buggy: false, operator_sig: k, dtype_sig: bf16, env: e, base_commit: 3f2c9e1, "
    "created_at: '2026-11-29T15:52:36Z'"
)


@pytest.mark.parametrize(
    "front_matter",
    [
        "{" + _FIELDS + "}\n",
        "".join(f"  {item}\n" for item in _FIELDS.split(", ")),
        "{" + _FIELDS.replace(", ", ",\n") + "\n}\n",
    ],
    ids=["flow", "indented", "flow-multiline"],
)
def test_update_of_an_unusual_front_matter_layout(front_matter: str) -> None:
    text = f"---\n# keep me\n{front_matter}---\n\n## Raw result\n\nok\n"
    doc = parse(text.encode(), "x.md")
    assert doc.fields["base_commit"] == "3f2c9e1"
    assert render_update(doc, doc.to_experiment()) == text
    for change in ({"score": 2.0}, {"tags": ["a"]}, {"raw_result": "new"}):
        new = render_update(doc, dataclasses.replace(doc.to_experiment(), **change))
        assert _reread(new) == dataclasses.replace(doc.to_experiment(), **change)
        assert new.startswith("---\n# keep me\n")


_body_pieces = st.sampled_from(
    [
        "## Detailed description\n",
        "## Raw result\n",
        "## Error message\n",
        "## Code change\n",
        "## Notes\n",
        "##\n",
        "\n",
        "text\n",
        "```\n",
        "````\n",
        "~~~\n",
        "```diff\n",
        "```kexp-verbatim\n",
        "x\r\n",
    ]
)
_edits = st.one_of(
    st.tuples(
        st.sampled_from(
            [
                "detailed_description",
                "raw_result",
                "profiling_info",
                "error_message",
                "code_change",
                "preamble",
                "change_summary",
            ]
        ),
        texts,
    ),
    st.tuples(st.just("extra_sections"), st.lists(st.tuples(headings, texts), max_size=2)),
    st.tuples(st.just("tags"), st.lists(short_texts, max_size=2)),
)


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(body=st.lists(st.one_of(_body_pieces, texts), max_size=10).map("".join), edit=_edits)
def test_update_of_any_handwritten_body(body: str, edit: tuple[str, Any]) -> None:
    """Whatever a person wrote in the body, an update reads back as the new values."""
    text = _GOLDEN.split("---\n\n")[0] + "---\n" + body
    try:
        doc = parse(text.encode(), "x.md")
    except FileFormatError as exc:
        assert exc.problem.code == "duplicate-section"
        reject()
    exp = doc.to_experiment()
    assert render_update(doc, exp) == text
    changed = dataclasses.replace(exp, **{edit[0]: edit[1]})
    assert _reread(render_update(doc, changed)) == changed


# --- line endings and BOM ------------------------------------------------------------


def _values(doc: Document) -> KernelExperiment:
    return doc.to_experiment()


def test_crlf_file_reads_like_the_lf_file() -> None:
    lf = _values(parse(_HANDWRITTEN.encode(), "x.md"))
    crlf = _values(parse(_HANDWRITTEN.replace("\n", "\r\n").encode(), "x.md"))
    assert crlf == lf
    assert "\r" not in crlf.detailed_description


def test_bom_file_reads_like_the_lf_file() -> None:
    lf = _values(parse(_HANDWRITTEN.encode(), "x.md"))
    bom = _values(parse(b"\xef\xbb\xbf" + _HANDWRITTEN.encode(), "x.md"))
    both = _values(parse(b"\xef\xbb\xbf" + _HANDWRITTEN.replace("\n", "\r\n").encode(), "x.md"))
    assert bom == lf
    assert both == lf


def test_crlf_file_problems_are_at_the_same_lines() -> None:
    bad = _HANDWRITTEN.replace("score: 1.019", "score: -1")
    lf = check_bytes(bad.encode(), Path("6749f3a0c2d41e7b-unroll.md"))
    crlf = check_bytes(bad.replace("\n", "\r\n").encode(), Path("6749f3a0c2d41e7b-unroll.md"))
    assert [(p.code, p.line, p.column) for p in crlf.problems] == [
        (p.code, p.line, p.column) for p in lf.problems
    ]
    assert ("out-of-range", 6, 1) in [(p.code, p.line, p.column) for p in lf.problems]


def test_crlf_inside_a_value_of_an_lf_file_is_kept() -> None:
    exp = KernelExperiment(
        id="6749f3a0c2d41e7b",
        detailed_description="Windows log:\r\nline two\r\n",
        raw_result="old Mac\rline",
    )
    text = serialize(exp)
    assert "\r\n" in text
    again = _reread(text)
    assert again.detailed_description == "Windows log:\r\nline two\r\n"
    assert again.raw_result == "old Mac\rline"


# --- YAML implicit types -------------------------------------------------------------


def _file_with(line: str, key: str) -> str:
    lines = _GOLDEN.splitlines(keepends=True)
    index = next(i for i, text in enumerate(lines) if text.startswith(f"{key}:"))
    lines[index] = line + "\n"
    return "".join(lines)


@pytest.mark.parametrize(
    ("line", "field", "value", "kind"),
    [
        ("base_commit: 1234567", "base_commit", "1234567", "integer"),
        ("base_commit: 0123456", "base_commit", "0123456", "integer"),
        ("created_at: 2026-11-29T15:52:36Z", "created_at", "2026-11-29T15:52:36Z", "timestamp"),
        ("dtype_sig: null", "dtype_sig", "null", "null"),
        ("env: yes", "env", "yes", "boolean"),
    ],
)
def test_implicit_types_keep_the_written_text_and_warn(
    line: str, field: str, value: str, kind: str
) -> None:
    text = _file_with(line, field)
    line_number = text.splitlines().index(line) + 1
    checked = check_bytes(text.encode(), Path("6749f3a0c2d41e7b-fused-unroll.md"))
    assert checked.document is not None
    exp = checked.document.to_experiment()
    assert getattr(exp, field) == value
    assert isinstance(getattr(exp, field), str)
    warnings = [p for p in checked.problems if p.code == "yaml-implicit-type"]
    assert [(p.line, p.column, p.severity, p.field) for p in warnings] == [
        (line_number, len(field) + 3, "warning", field)
    ]
    assert kind in warnings[0].message
    assert warnings[0].hint
    # Written back quoted, so no YAML tool can misread it; then no warning.
    rewritten = serialize(exp)
    assert f"{field}: '{value}'" in rewritten.splitlines()
    again = check_bytes(rewritten.encode(), Path("6749f3a0c2d41e7b-fused-unroll.md"))
    assert not [p for p in again.problems if p.code == "yaml-implicit-type"]


@pytest.mark.parametrize(
    "value",
    [
        "1234567",
        "0123456",
        "0123456789",
        "1234e56",
        "12345e7",
        "1e5",
        "0x1f",
        "0o17",
        "1_000",
        "2026-11-29T15:52:36Z",
        "2026-11-29",
        "null",
        "~",
        "true",
        "yes",
        "off",
        ".inf",
        ".nan",
    ],
)
def test_serializer_quotes_strings_yaml_would_retype(value: str) -> None:
    exp = KernelExperiment(base_commit=value, tags=[value])
    lines = serialize(exp).splitlines()
    assert f"base_commit: '{value}'" in lines
    assert f"tags: ['{value}']" in lines
    assert _reread(serialize(exp)).base_commit == value


def test_plain_hex_hash_stays_unquoted() -> None:
    exp = KernelExperiment(base_commit="3f2c9e1a7b8d4c6e5f0a1b2c3d4e5f6a7b8c9d0e")
    assert "base_commit: 3f2c9e1a7b8d4c6e5f0a1b2c3d4e5f6a7b8c9d0e" in serialize(exp).splitlines()


def test_without_libyaml_kexp_says_so_and_still_reads(monkeypatch: pytest.MonkeyPatch) -> None:
    """PyYAML built without libyaml: the pure-Python parser is used, with a warning."""
    import yaml

    from kexp.format import yamlio

    monkeypatch.delattr(yaml, "CSafeLoader", raising=False)
    yamlio._yaml.cache_clear()
    try:
        with pytest.warns(RuntimeWarning, match="without libyaml"):
            mapping = yamlio.read_mapping("score: 1.5\ntags: [a, b]  # note\n", frozenset())
        assert mapping.values == {"score": 1.5, "tags": ["a", "b"]}
        assert not yamlio.have_libyaml()
    finally:
        monkeypatch.undo()
        yamlio._yaml.cache_clear()
    assert yamlio.have_libyaml()


def _unwrapped_by_runs(content: str, info: str) -> str:
    """``unwrap`` as first written: every run of backticks inside measured."""
    import re

    match = re.fullmatch(r"(`{3,})" + re.escape(info) + r"[ \t]*\n(.*)\n\1", content, re.DOTALL)
    if match is None:
        return content
    inner, fence = match.group(2), match.group(1)
    if any(len(run) >= len(fence) for run in re.findall(r"`+", inner)):
        return content
    return inner


_FENCE_PIECES = st.sampled_from(["`", "``", "```", "````", "\n", " ", "\t", "diff", "text", "x"])


@settings(max_examples=500, deadline=None)
@given(
    ticks=st.integers(0, 6),
    info=st.sampled_from(["diff", "text", ""]),
    pieces=st.lists(_FENCE_PIECES, max_size=12),
    closing=st.integers(0, 6),
)
@example(ticks=3, info="diff", pieces=["\n", "```", "\n"], closing=3)
@example(ticks=4, info="diff", pieces=["\n", "```", "\n"], closing=4)
def test_a_fence_is_unwrapped_unless_a_run_inside_is_as_long(
    ticks: int, info: str, pieces: list[str], closing: int
) -> None:
    """A fence's content is the text inside unless a run of backticks inside is as long
    as the fence (the substring test equals measuring every run)."""
    from kexp.format.fileformat import unwrap

    content = "`" * ticks + info + "".join(pieces) + "`" * closing
    for wanted in ("diff", "text"):
        assert unwrap(content, wanted) == _unwrapped_by_runs(content, wanted)
