"""The quick verdict on experiment files, and the fast front-matter reader it stands on.

The fast reader (:mod:`kexp.fastpath`) must return exactly what the YAML reader returns,
or None. On that, :func:`kexp.quickcheck.quick_fields` must answer None or the very
fields of a file :func:`kexp.validate.check_bytes` finds valid: checked on the bad-input
corpus, the bundled experiments, the benchmark store when it has been generated, and
mutations of valid files (fences, headings, ids, dates, scores, line endings, odd
characters).
"""

from __future__ import annotations

import string

from hypothesis import given, settings
from hypothesis import strategies as st

from kexp.fastpath import (
    _HEX_WORD,
    _STR,
    _tag_of_plain,
    read_simple_front_matter,
)
from kexp.fileformat import _FRONT_MATTER_BAD_CHAR, STRING_FIELDS
from kexp.yamlio import YamlReadError, read_mapping, render_field

# --- the fast front-matter reader ------------------------------------------------------

_TRICKY = string.ascii_letters + string.digits + " -:#'\",[]{}&*!|>%@`~.+_/()?=\t\\é🚀\xa0"


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
        and _FRONT_MATTER_BAD_CHAR.match(chr(code) + "x")
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
