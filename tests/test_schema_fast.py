"""The fast schema check agrees with jsonschema on every document."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import jsonschema
from hypothesis import given, settings
from hypothesis import strategies as st

from kexp.format.schema import is_schema_valid, load_schema
from kexp.format.validate import read_and_check

_VALID: dict[str, Any] = {
    "id": "6749f3a0c2d41e7b",
    "pid": "",
    "change_summary": "Unrolled by 4 - +1.9%",
    "score": 1.019,
    "status": "done",
    "is_buggy": False,
    "operator_sig": "csrc/x.cu: k",
    "dtype_sig": "bf16",
    "env": "MI300X",
    "base_commit": "0123456",
    "created_at": "2026-11-29T15:52:36Z",
}
_VALUES = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-5, 5),
    st.floats(allow_nan=True, allow_infinity=True),
    st.text(max_size=90),
    st.sampled_from(["", "done", "bogus", "6749f3a0c2d41e7b", "abc", "x\ny", "a" * 81]),
    st.lists(st.sampled_from(["a", "a", "6749f3a0c2d41e7b", "", "x\ny"]), max_size=3),
    st.lists(
        st.fixed_dictionaries(
            {"config": st.sampled_from(["c", "", "x\ny"])},
            optional={
                "speedup": st.one_of(st.floats(-1, 3), st.booleans()),
                "baseline": st.floats(-1, 3),
            },
        ),
        max_size=2,
    ),
)


@settings(max_examples=400, deadline=None)
@given(
    changes=st.dictionaries(
        st.sampled_from([*_VALID, "tags", "combines", "results", "author", "extra"]),
        _VALUES,
        max_size=4,
    ),
    removed=st.sets(st.sampled_from(list(_VALID)), max_size=2),
)
def test_fast_check_agrees_with_jsonschema(changes: dict[str, Any], removed: set[str]) -> None:
    document = {k: v for k, v in {**_VALID, **changes}.items() if k not in removed}
    expected = jsonschema.Draft202012Validator(load_schema()).is_valid(document)
    assert is_schema_valid(document) == expected, document


def test_the_valid_example_is_valid() -> None:
    assert is_schema_valid(_VALID)


def test_each_missing_field_is_reported_once(tmp_path: Path) -> None:
    path = tmp_path / "6749f3a0c2d41e7b-x.md"
    path.write_text("---\nid: 6749f3a0c2d41e7b\nchange_summary: x\nscore: 1\n---\n")
    missing = [p.field for p in read_and_check(path).problems if p.code == "missing-field"]
    assert sorted(missing) == sorted(set(_VALID) - {"id", "change_summary", "score"})
