"""The serializer's fast path writes every field exactly as PyYAML's emitter does."""

from __future__ import annotations

from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from kexp.format.yamlio import render_field, render_field_with_yaml

NAMES = st.sampled_from(
    ["id", "pid", "change_summary", "score", "status", "is_buggy", "operator_sig",
     "dtype_sig", "env", "base_commit", "created_at", "tags", "author", "combines",
     "results", "legacy_key", "yes", "on", "x"]
)  # fmt: skip
WORDS = st.text(alphabet="aAzZ09 ,()%+=/_.*-:#'\"!&[]{}|>@`?~\\\t", min_size=1, max_size=30)
PHRASES = st.lists(
    st.text(alphabet="aAzZeE09,()%+=/_.*:-", min_size=1, max_size=8), min_size=1, max_size=4
).map(" ".join)
HEX = st.text(alphabet="0123456789abcdef", min_size=1, max_size=20)
STAMPS = st.datetimes().map(lambda d: d.strftime("%Y-%m-%dT%H:%M:%S") + ".123Z")
TEXT = st.one_of(WORDS, PHRASES, HEX, STAMPS, st.text(max_size=20), st.sampled_from(
    ["yes", "No", "null", "~", "1e5", "0x1f", "0b11", "1_000", ".inf", "-.5", "12:30",
     "a - b", "Tried it - +1.9%", "Unroll x4 (pragma) - -0.3%", "2026-11-29T15:52:36Z",
     "deadbeef", "12345678", "1e10", "0o17", "a  b", "a b ", " a b", "done", "bf16", "y",
     "n", "NO", "Off", "True", "nan", "NaN", "inf", "Infinity", "e5", "x-1.5", "a.", "a:",
     "csrc/cache.cu: reshape_and_cache", "k.cu: k", "a: b: c", "a:b", "a: -", "a: b #c",
     "a: b'c", "a: [b]", "x: *y", "a: 1", "Null", "a- b", "- a", "a :b", "a : b"]
))  # fmt: skip
VALUES = st.one_of(
    TEXT,
    st.floats(allow_nan=True, allow_infinity=True),
    st.integers(min_value=-(10**30), max_value=10**30),
    st.booleans(),
    st.none(),
    st.lists(TEXT, max_size=4),
    st.lists(st.floats(allow_nan=False), max_size=3),
)


@settings(max_examples=3000, deadline=None)
@given(NAMES, VALUES)
def test_every_field_renders_as_pyyaml_renders_it(name: str, value: Any) -> None:
    assert render_field(name, value) == render_field_with_yaml(name, value)
    assert render_field(name, value) == render_field_with_yaml(name, value)  # memoised
