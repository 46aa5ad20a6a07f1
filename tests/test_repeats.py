"""The "tried before" check: which experiments hold the same code change, answered by one
place (the retrieval index) and held equal to the truth read from the files."""

from __future__ import annotations

import tempfile
import warnings
from collections.abc import Callable
from pathlib import Path

import pytest
from conftest import experiment_fields
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kexp import KernelExperiment, Store
from kexp.core.errors import RemeasureWarning, RepeatedChangeWarning
from kexp.storage.dedupe import is_matchable, normalize_code_change
from kexp.storage.repeats import find_repeats, tried_before, warn_tried_before

BASE = "0f54a8d954a292dd879f37334f90573ddeb49278"
OTHER_BASE = "1a2b3c4d5e6f7a8b9c0d1e2f3a4b5c6d7e8f9a0b"
DIFF = "@@ -10,2 +10,2 @@\n-  int x = 1;\n+  int x = 2;\n"
#: A description quoting an earlier attempt the way a file writes its code change.
QUOTING = (
    "**Approach**: first tried this:\n\n## Code change\n\n```diff\n+  int y = 3;\n```\n\n"
    "**Key insight**: it was not enough"
)


def _identical(store: Store, code_change: str) -> list[str]:
    """The ids the create's check reports as the same change."""
    return [r.id for r in tried_before(store, code_change) if r.identical]


def test_a_description_quoting_a_code_change_section_hides_no_repeat(
    make_experiment: Callable[..., KernelExperiment], store: Store
) -> None:
    """Once, find_repeats took a file's code change from the first "## Code change"
    section with a diff fence anywhere in the text (one inside the description too),
    and so missed the change a create was warned of."""
    made = make_experiment(code_change=DIFF, detailed_description=QUOTING, base_commit=BASE)

    assert _identical(store, DIFF) == [made.id]
    assert [r.id for r in find_repeats(store, DIFF)] == [made.id]
    assert find_repeats(store, "+  int y = 3;") == []


def test_every_identical_change_is_reported_and_the_remeasure_found_past_ten(
    make_experiment: Callable[..., KernelExperiment], store: Store
) -> None:
    """Once, a create read at most ten earlier experiments holding the change (the oldest
    in path order): an eleventh on this base and env was not seen, so the create was
    told "tried before" where it measured the same thing again (RemeasureWarning)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        made = [make_experiment(code_change=DIFF, base_commit=OTHER_BASE) for _ in range(11)]
        made.append(make_experiment(code_change=DIFF, base_commit=BASE))
    ids = [e.id for e in made]

    assert _identical(store, DIFF) == ids
    assert [r.id for r in find_repeats(store, DIFF)] == ids
    with pytest.warns(RemeasureWarning, match=f"kexp remeasure {made[-1].id}"):
        make_experiment(code_change=DIFF, base_commit=BASE)


_LINES = (
    "+  int x = 2;",
    "-  int x = 1;",
    "+  #pragma unroll 4",
    "   const int k = threadIdx.x;",
    "+  float4 v = reinterpret_cast<float4*>(src)[i];",
    "+",
    "-",
    "",
    "   ",
    "@@ -10,3 +10,4 @@",
    "@@ -230,3 +231,4 @@ __global__ void kernel(",
    "--- a/csrc/k.cu",
    "+++ b/csrc/k.cu",
    "diff --git a/csrc/k.cu b/csrc/k.cu",
    "index 1a2b3c4..5d6e7f8 100644",
    "\\ No newline at end of file",
    "N/A",
    "see PR 12",
    "a placeholder that is long enough to be matched",
    "## Code change",
    "```diff",
    "```",
    "+  résumé = 1;",
)
_VARIANT = st.sampled_from(("", " ", "\t", "  ", "\r"))


@st.composite
def code_changes(draw: st.DrawFn) -> str:
    """A code change: lines of diffs, headers, placeholders and fences, with
    whitespace variations (some normalise to the same change, some to a placeholder)."""
    lines = draw(st.lists(st.sampled_from(_LINES), min_size=0, max_size=5))
    written = []
    for line in lines:
        inner = draw(_VARIANT)
        if len(line) > 1 and line[0] in "+- " and inner != "\r":
            line = line[0] + inner + line[1:]
        written.append(line + draw(_VARIANT))
    return "\n".join(written) + draw(st.sampled_from(("", "\n", "\r\n")))


def _rewritten(change: str) -> str:
    """The same change as another tool writes it: a diff header, CRLF, trailing spaces."""
    return "diff --git a/csrc/k.cu b/csrc/k.cu\n" + change.replace("\n", " \r\n")


@settings(
    max_examples=30, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    changes=st.lists(
        st.tuples(code_changes(), st.booleans(), st.booleans()), min_size=1, max_size=6
    ),
    data=st.data(),
)
def test_the_identical_repeats_a_create_is_warned_of_are_the_files(
    changes: list[tuple[str, bool, bool]], data: st.DataObject
) -> None:
    """For generated code changes (recorded with a plain description or one quoting a
    code change section, on one base or another), what warn_tried_before and
    find_repeats report as the same change (for one of them rewritten, or another) is
    what the files hold, read whole; a create on a base and env one of them has is told
    to remeasure."""
    query = data.draw(
        st.one_of(st.sampled_from([c for c, _, _ in changes]).map(_rewritten), code_changes())
    )
    with tempfile.TemporaryDirectory(prefix="kexp-repeats-") as folder:
        root = Path(folder)
        (root / "experiments").mkdir()
        store = Store(root, code_repo=root)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            for change, quoting, other_base in changes:
                fields = experiment_fields(
                    code_change=change,
                    base_commit=OTHER_BASE if other_base else BASE,
                    **({"detailed_description": QUOTING} if quoting else {}),
                )
                store.create_experiment(**fields)
        wanted = normalize_code_change(query)
        truth = sorted(
            (
                e
                for e in store.list_experiments()
                if is_matchable(wanted) and normalize_code_change(e.code_change) == wanted
            ),
            key=lambda e: (e.created_at, e.id),
        )
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            repeats = warn_tried_before(
                store, query, base_commit=BASE, env=truth[0].env if truth else ""
            )
        assert [r.id for r in repeats if r.identical] == [e.id for e in truth]
        assert [r.id for r in find_repeats(store, query)] == [e.id for e in truth]
        kinds = {w.category for w in caught}
        if any(e.base_commit == BASE for e in truth):
            assert kinds == {RemeasureWarning}
        elif truth:
            assert kinds == {RepeatedChangeWarning}
