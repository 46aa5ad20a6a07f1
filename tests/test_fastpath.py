"""The fast front-matter reader agrees with the full YAML reader, or declines."""

from __future__ import annotations

import string

from hypothesis import given, settings
from hypothesis import strategies as st

from kexp.fastpath import read_simple_front_matter
from kexp.fileformat import STRING_FIELDS, serialize, split_lines
from kexp.model import KernelExperiment
from kexp.yamlio import YamlReadError, read_mapping

_TRICKY = string.ascii_letters + string.digits + " -:#'\",[]{}&*!|>%@`~.+_/()?=\t\\é🚀\xa0"


def _front_matter(text: str) -> str:
    lines = split_lines(text)
    close = lines.index("---\n", 1)
    return "".join(lines[1:close])


def _agree(text: str) -> None:
    fast = read_simple_front_matter(text, STRING_FIELDS)
    if fast is None:
        return
    full = read_mapping(text, STRING_FIELDS)
    assert fast == full.values
    assert [type(v) for v in fast.values()] == [type(v) for v in full.values.values()]
    assert not full.retyped


@settings(max_examples=300, deadline=None)
@given(
    summary=st.text(alphabet=_TRICKY, max_size=40),
    env=st.text(alphabet=_TRICKY, max_size=40),
    score=st.one_of(st.floats(min_value=0, max_value=1e6), st.integers(0, 10**6)),
    tags=st.lists(st.text(alphabet=_TRICKY, min_size=1, max_size=10), max_size=4),
)
def test_serialized_front_matter_reads_the_same(
    summary: str, env: str, score: float, tags: list[str]
) -> None:
    exp = KernelExperiment(
        id="6749f3a0c2d41e7b",
        change_summary=summary,
        env=env,
        operator_sig=env[::-1],
        score=score,
        tags=tags,
        status="done",
        base_commit="0123456",
        created_at="2026-11-29T15:52:36Z",
    )
    text = _front_matter(serialize(exp))
    fast = read_simple_front_matter(text, STRING_FIELDS)
    _agree(text)
    if fast is not None:
        assert fast["score"] == score


@settings(max_examples=500, deadline=None)
@given(
    key=st.sampled_from(["env", "score", "is_buggy", "tags", "true", "x"]),
    value=st.text(alphabet=_TRICKY, max_size=30),
)
def test_any_line_reads_the_same_or_is_declined(key: str, value: str) -> None:
    text = f"{key}: {value}\n"
    try:
        read_mapping(text, STRING_FIELDS)
    except YamlReadError:
        assert read_simple_front_matter(text, STRING_FIELDS) is None
        return
    _agree(text)


def test_canonical_values_take_the_fast_path() -> None:
    text = (
        "id: 6749f3a0c2d41e7b\npid: ''\nchange_summary: Fused unroll - -0.63% (interference)\n"
        "score: 0.9937\nstatus: done\nis_buggy: false\n"
        "operator_sig: 'csrc/kernels/cache_kernels.cu: reshape_and_cache_flash'\n"
        "env: MI300X, ROCm 7.0.0\ncreated_at: '2026-11-29T15:52:36Z'\ntags: [cache, unroll]\n"
    )
    fast = read_simple_front_matter(text, STRING_FIELDS)
    assert fast == read_mapping(text, STRING_FIELDS).values
    assert fast is not None and fast["score"] == 0.9937 and fast["is_buggy"] is False


def test_unsure_values_are_declined() -> None:
    for text in (
        "base_commit: 1234567\n",  # YAML would read an integer
        "created_at: 2026-11-29T15:52:36Z\n",  # a timestamp
        "is_buggy: yes\n",  # YAML 1.1 boolean
        "env: x # comment\n",
        "tags:\n- a\n",
        'env: "escaped\\n"\n',
    ):
        assert read_simple_front_matter(text, STRING_FIELDS) is None, text
