"""The fast front-matter reader agrees with the full YAML reader, or declines."""

from __future__ import annotations

import shutil
import string
import subprocess
import sys
from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st

from kexp.core.model import KernelExperiment
from kexp.format.fastpath import read_simple_front_matter
from kexp.format.fileformat import STRING_FIELDS, serialize, split_lines
from kexp.format.yamlio import YamlReadError, read_mapping

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


def test_the_first_characters_yaml_resolves_are_pyyamls() -> None:
    import yaml

    from kexp.format.fastpath import RESOLVED_FIRST_CHARACTERS

    table = yaml.resolver.Resolver.yaml_implicit_resolvers
    assert {c for c in table if c} == RESOLVED_FIRST_CHARACTERS


def test_reading_and_showing_canonical_files_needs_no_pyyaml(tmp_path: Path) -> None:
    """`kexp show` and a warm `kexp top` read canonical files without importing PyYAML."""
    root = Path(__file__).parents[1]
    code = (
        "import sys\n"
        "from kexp.cli.main import main\n"
        "for args in (['top'], ['show', sys.argv[2]]):\n"
        "    try:\n"
        "        main(['--root', sys.argv[1], *args], standalone_mode=False)\n"
        "    except SystemExit:\n"
        "        pass\n"
        "print('YAML', 'yaml' in sys.modules)\n"
    )
    store = tmp_path / "store"
    shutil.copytree(root / "experiments", store / "experiments")
    # (A file with `results`, a block list, is shown through the YAML reader.)
    files = sorted((store / "experiments").glob("*/*/**/*.md"))
    shown = next(p for p in files if "\nresults:" not in p.read_text()).name[:8]
    for _ in range(2):  # cold (the cache is built), then warm
        result = subprocess.run(
            [sys.executable, "-c", code, str(store), shown],
            capture_output=True,
            text=True,
            check=True,
        )
        assert "YAML False" in result.stdout, result.stdout + result.stderr


@settings(max_examples=500)
@given(st.text(alphabet=string.ascii_letters + string.digits + " .-_:", min_size=1, max_size=8))
def test_words_resolve_as_pyyaml_resolves_them(tail: str) -> None:
    """Plain scalars starting with a letter are typed without PyYAML, exactly as it would."""
    import yaml

    from kexp.format import fastpath

    table = yaml.resolver.Resolver.yaml_implicit_resolvers
    words = (tail, *fastpath._WORD_TAGS, "y" + tail, "n" + tail, "O" + tail)
    numbers = (f"1 {tail}", f"2026-11-29 {tail}", f"12 {tail}", f"3.5 {tail}", f"1_0 {tail}")
    for word in (*words, *numbers):
        if not (word[:1].isalpha() or (word[:1].isdigit() and " " in word)):
            continue
        expected = next(
            (str(tag) for tag, pattern in table.get(word[0], []) if pattern.match(word)),
            "tag:yaml.org,2002:str",
        )
        fastpath._TAGS.clear()
        assert fastpath._tag_of_plain(word) == expected, word


@settings(max_examples=300, deadline=None)
@given(
    protocol=st.dictionaries(
        st.sampled_from(["timer", "warmup", "repetitions", "l2_flushed", "x_y"]),
        st.one_of(
            st.text(alphabet=_TRICKY, max_size=12),
            st.integers(-5, 10**6),
            st.booleans(),
            st.floats(0, 1e6),
        ),
        max_size=5,
    ),
    interval=st.lists(st.floats(0.01, 100), min_size=2, max_size=2),
)
def test_a_protocol_mapping_and_an_interval_read_the_same(
    protocol: dict[str, object], interval: list[float]
) -> None:
    exp = KernelExperiment(
        id="6749f3a0c2d41e7b",
        change_summary="x - y",
        score=1.0,
        score_ci=interval,
        protocol=protocol,
        status="done",
        base_commit="0123456",
        created_at="2026-11-29T15:52:36Z",
    )
    text = _front_matter(serialize(exp))
    _agree(text)
    if all(
        isinstance(v, (int, bool)) or (str(v).isascii() and str(v).isalnum())
        for v in protocol.values()
    ):
        assert read_simple_front_matter(text, STRING_FIELDS) is not None  # the fast path


@settings(max_examples=300, deadline=None)
@given(value=st.text(alphabet=_TRICKY, max_size=30))
def test_any_flow_mapping_line_reads_the_same_or_is_declined(value: str) -> None:
    text = f"protocol: {{{value}}}\n"
    try:
        read_mapping(text, STRING_FIELDS)
    except YamlReadError:
        assert read_simple_front_matter(text, STRING_FIELDS) is None
        return
    _agree(text)


def test_a_mapping_read_twice_is_two_mappings() -> None:
    text = "protocol: {timer: do_bench, warmup: 25}\n"
    first = read_simple_front_matter(text, STRING_FIELDS)
    second = read_simple_front_matter(text, STRING_FIELDS)
    assert first is not None and second is not None
    first["protocol"]["warmup"] = 0
    assert second["protocol"] == {"timer": "do_bench", "warmup": 25}
