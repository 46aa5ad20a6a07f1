"""Don't repeat, don't believe blindly: repeated code changes and suspect measurements."""

from __future__ import annotations

import dataclasses
import warnings
from collections.abc import Callable
from pathlib import Path

import pytest

from kexp import KernelExperiment, Store
from kexp.core.errors import RepeatedChangeWarning
from kexp.core.settings import DEFAULT_SETTINGS
from kexp.format.fileformat import parse, serialize
from kexp.format.suspect import SUSPECT_LABEL, is_suspect, suspect_problems, suspect_reasons
from kexp.storage.dedupe import normalize_code_change
from kexp.storage.repeats import find_repeats
from kexp.storage.retrieval import searching
from kexp.storage.sources import WorkingTree

DIFF = """\
diff --git a/csrc/kernels/cache_kernels.cu b/csrc/kernels/cache_kernels.cu
index 1a2b3c4..5d6e7f8 100644
--- a/csrc/kernels/cache_kernels.cu
+++ b/csrc/kernels/cache_kernels.cu
@@ -212,7 +212,8 @@ __global__ void reshape_and_cache_flash_kernel(
   const int64_t block_idx = slot_idx / block_size;
-  for (int i = threadIdx.x; i < n; i += blockDim.x) {
+  #pragma unroll 4
+  for (int i = threadIdx.x; i < n; i += blockDim.x) {
"""

# The same change, taken on another base: other index hashes and line numbers, CRLF line
# ends, other indentation and trailing spaces, no diff --git header.
SAME_ELSEWHERE = """\
--- a/csrc/kernels/cache_kernels.cu\r
+++ b/csrc/kernels/cache_kernels.cu\r
@@ -230,7 +230,8 @@\r
     const int64_t  block_idx = slot_idx / block_size;   \r
-    for (int i = threadIdx.x; i < n; i += blockDim.x) {\r
+    #pragma unroll 4\r
\r
+    for (int i = threadIdx.x; i < n; i += blockDim.x) {\r
\\ No newline at end of file\r
"""


def test_normalising_ignores_headers_line_numbers_and_whitespace() -> None:
    assert normalize_code_change(DIFF) == normalize_code_change(SAME_ELSEWHERE)
    assert normalize_code_change(DIFF.replace("unroll 4", "unroll 8")) != normalize_code_change(
        DIFF
    )
    # A removed line that merely looks like a header is kept.
    sql = "@@ -1 +1 @@\n--- a comment\n+-- another\n"
    assert "--- a comment" in normalize_code_change(sql)


def test_a_repeated_code_change_warns_naming_the_earlier_experiment_and_its_score(
    make_experiment: Callable[..., KernelExperiment], store: Store
) -> None:
    first = make_experiment(code_change=DIFF, score=1.019)

    with pytest.warns(RepeatedChangeWarning) as caught:
        second = make_experiment(code_change=SAME_ELSEWHERE, score=1.02)

    message = str(caught[0].message)
    assert first.id in message and "score 1.0190" in message
    assert first.change_summary in message
    assert caught[0].filename == __file__ or caught[0].filename.endswith("conftest.py")
    assert second.path is not None and second.path.exists()  # recorded all the same
    assert {r.id for r in find_repeats(store, DIFF)} == {first.id, second.id}
    assert find_repeats(store, DIFF, exclude=[second.id])[0].score == 1.019


def test_a_new_change_or_a_placeholder_does_not_warn(
    make_experiment: Callable[..., KernelExperiment],
) -> None:
    make_experiment(code_change=DIFF)
    make_experiment(code_change="(see logs/cache/iter1_diff.patch)")

    with warnings.catch_warnings():
        warnings.simplefilter("error", RepeatedChangeWarning)
        make_experiment(code_change=DIFF.replace("unroll 4", "unroll 8"))
        make_experiment(code_change="(see logs/cache/iter1_diff.patch)")
        make_experiment(code_change="")


# --- suspect measurements -------------------------------------------------------------


def test_a_score_above_the_ceiling_is_suspect() -> None:
    exp = KernelExperiment(score=5.2, status="done")

    assert suspect_reasons(exp) == ["score 5.2x is above the plausibility ceiling 3x"]
    assert is_suspect(exp)
    assert not is_suspect(KernelExperiment(score=2.9, status="done"))
    assert not is_suspect(dataclasses.replace(exp, is_buggy=True))  # already known wrong
    lenient = dataclasses.replace(DEFAULT_SETTINGS, suspect_score_above=10.0)
    assert not is_suspect(exp, lenient)


def test_a_near_zero_time_or_a_huge_per_config_speedup_is_suspect() -> None:
    exp = KernelExperiment(
        score=1.5,
        results=[
            {
                "config": "b8",
                "baseline": 0.001,
                "candidate": 0.00008,
                "speedup": 1.25,
                "unit": "ms",
            },
            {"config": "b32", "baseline": 0.01, "candidate": 10.0, "speedup": 0.001},
            {"config": "b64", "baseline": 40.0, "candidate": 10.0, "speedup": 4.0},
        ],
    )

    reasons = suspect_reasons(exp)

    assert reasons == [
        "b8: candidate time 8e-05 ms is near zero (below 0.5 us)",
        "b32: baseline time 0.01 us is near zero (below 0.5 us)",
        "b64: speedup 4x is above the plausibility ceiling 3x",
    ]
    assert not is_suspect(KernelExperiment(results=[{"config": "a", "baseline": 5.0}]))


def test_suspect_measurements_are_validation_warnings_at_their_line(tmp_path: Path) -> None:
    exp = KernelExperiment(
        id="6749f3a0c2d41e7b",
        change_summary="Skipped the rescale - 5.2x",
        score=5.2,
        status="done",
        base_commit="abcdef1",
        created_at="2026-11-29T15:52:36Z",
    )
    doc = parse(serialize(exp), tmp_path / "6749f3a0c2d41e7b-x.md")

    problems = suspect_problems(doc)

    assert len(problems) == 1
    problem = problems[0]
    assert (problem.severity, problem.code, problem.field) == (
        "warning",
        "suspect",
        "score",
    )
    assert problem.line == 5  # the score line
    assert problem.message.startswith(SUSPECT_LABEL)


def test_a_hand_written_file_without_the_diff_fence_is_matched_too(
    make_experiment: Callable[..., KernelExperiment], store: Store
) -> None:
    first = make_experiment(code_change=DIFF)
    assert first.path is not None
    text = first.path.read_text(encoding="utf-8")
    fenced = text[text.index("```diff") :]
    first.path.write_text(text.replace(fenced, "\n".join(fenced.splitlines()[1:-1]) + "\n"))
    assert store.get_experiment(first.id).code_change.startswith("diff --git")

    assert [r.id for r in find_repeats(store, SAME_ELSEWHERE)] == [first.id]


def test_the_cached_repeat_check_equals_reading_every_file(
    make_experiment: Callable[..., KernelExperiment], store: Store
) -> None:
    """Repeats are found through the code keys the retrieval index keeps (each file's
    computed once per version of it): the same answer as reading every file (a store
    without a cache, whose index is built from its files), after edits, in and past the
    racily clean window. The check refreshes the index quickly (folders, not every
    file): a file replaced (as kexp and most editors write) is seen at once, an edit in
    place by another program once a full query of the index (kexp context) has run."""
    import os
    import time

    from kexp.storage.cache import RACY_NS

    plain = Store(store.root, source=WorkingTree(store.experiments_dir, cacheable=False))
    other = DIFF.replace("unroll 4", "unroll 2")
    made = [
        make_experiment(code_change=DIFF, score=1.01),
        make_experiment(code_change=other, score=1.02),
        make_experiment(code_change="N/A", score=1.03),
        make_experiment(score=1.04),
    ]

    def same() -> None:
        for change in (DIFF, SAME_ELSEWHERE, other, "N/A"):
            assert find_repeats(store, change) == find_repeats(plain, change)

    same()
    assert [r.id for r in find_repeats(store, SAME_ELSEWHERE)] == [made[0].id]
    time.sleep(RACY_NS / 1e9 + 0.3)
    same()  # the keys computed now are kept
    same()  # and used
    path = made[1].path
    assert path is not None
    stamp = path.stat()
    path.write_text(path.read_text().replace("unroll 2", "unroll 4"))  # same size: now DIFF
    os.utime(path, ns=(stamp.st_atime_ns, stamp.st_mtime_ns))
    with searching(store):  # a full query, as kexp context makes
        pass  # an edit in place is seen by its full refresh
    same()
    assert {r.id for r in find_repeats(store, DIFF)} == {made[0].id, made[1].id}
    time.sleep(RACY_NS / 1e9 + 0.3)
    same()
    assert made[0].path is not None
    made[0].path.unlink()
    same()
    assert [r.id for r in find_repeats(store, DIFF)] == [made[1].id]
    # Replaced (a new file renamed over it, as kexp and editors write): seen at once.
    third = made[2].path
    assert third is not None
    replacement = third.with_name("." + third.name + ".new")
    text = third.read_text()
    replacement.write_text(
        text.replace(
            "## Code change\n\n```diff\nN/A\n```", "## Code change\n\n```diff\n" + DIFF + "```"
        )
    )
    replacement.replace(third)
    same()
    assert {r.id for r in find_repeats(store, DIFF)} == {made[1].id, made[2].id}


def _normalized_line_by_line(text: str) -> str:
    """normalize_code_change as first written (every line through every rule): the
    reference the library's faster form must equal."""
    import re

    header = re.compile(
        r"(diff --git |diff --cc |diff -r |index [0-9a-fA-F]+\.\.|new file mode |deleted file "
        r"mode |old mode |new mode |similarity index |dissimilarity index |rename from |rename "
        r"to |copy from |copy to |Binary files )"
    )
    hunk = re.compile(r"@@+ [-+0-9, ]+ @@+")
    lines = text.replace("\r\n", "\n").replace("\r", "\n").split("\n")
    kept: list[str] = []
    previous_was_old_file = False
    for index, line in enumerate(lines):
        following = lines[index + 1] if index + 1 < len(lines) else ""
        if line.startswith("--- ") and following.startswith("+++ "):
            previous_was_old_file = True
            continue
        if line.startswith("+++ ") and previous_was_old_file:
            previous_was_old_file = False
            continue
        previous_was_old_file = False
        if header.match(line) or line.startswith("\\ No newline"):
            continue
        if hunk.match(line):
            kept.append("@@")
            continue
        collapsed = " ".join(line.split())
        if collapsed in ("", "+", "-"):
            continue
        kept.append(collapsed)
    while kept and kept[-1] == "@@":
        kept.pop()
    return "\n".join(kept)


from hypothesis import given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

_DIFF_LINES = st.sampled_from(
    ["--- a/k.cu", "+++ b/k.cu", "--- x", "+++ y", "@@ -1,3 +1,4 @@", "@@ -7 +7 @@ fn()",
     "diff --git a/k.cu b/k.cu", "index 1a2b..3c4d 100644", "\\ No newline at end of file",
     "+  acc += x[i];", "-  acc = 0;", "   context line", "", "+", "-", " ", "+\t", "+++",
     "---", "-- x", "++ y", "+-- z", "Binary files a and b differ", "\tindented",
     # context lines that read as a header or a hunk's once their space is gone, odd
     # hunk headers, whitespace other than spaces and tabs, names with trailing spaces
     " diff --git a/k.cu b/k.cu", " @@ -1 +1 @@", "\t@@ -2 +2 @@", "@@@ -1 -1 +1 @@@",
     "@@ x @@", "\x0bctx", "a\x85b  c", "+++ b/k.cu  ", "--- a/k.cu\t", "rename from k.cu",
     "+--- z", "-+++ w"]
)  # fmt: skip


@settings(max_examples=400, deadline=None)
@given(st.lists(_DIFF_LINES, max_size=14), st.sampled_from(["\n", "\r\n", "\r"]))
def test_normalizing_a_code_change_equals_the_rule_applied_line_by_line(
    lines: list[str], newline: str
) -> None:
    text = newline.join(lines)
    assert normalize_code_change(text) == _normalized_line_by_line(text)


def _shingles_hunk_by_hunk(normalized: str) -> frozenset[int]:
    """shingles_of_normalized written plainly (the hunks made, then the rule applied to
    each): the reference the library's faster form must equal."""
    import itertools
    import zlib

    from kexp.storage.dedupe import MIN_PLAIN_CHARS, SMALL_CHANGE_SHINGLES, line_shingle

    def pairs(shingles: list[int]) -> set[int]:
        return {zlib.crc32(b"%d %d" % (a, b)) for a, b in itertools.pairwise(shingles)}

    if not normalized:
        return frozenset()
    changed = any(line[:1] in ("+", "-") for line in normalized.split("\n"))
    if not changed and len(normalized) < MIN_PLAIN_CHARS:
        return frozenset()
    hunks: list[list[str]] = [[]]
    for line in normalized.split("\n"):
        if line == "@@":
            hunks.append([])
        else:
            hunks[-1].append(line)
    if not changed:  # one hunk of context: every line, and every pair of lines
        shingles = [line_shingle(f" {line}") for hunk in hunks for line in hunk]
        held = [s for s in shingles if s is not None]
        return frozenset(set(held) | pairs(held))
    found: set[int] = set()
    context: set[int] = set()
    for hunk in hunks:
        signed = [line_shingle(line) for line in hunk if line[:1] in ("+", "-")]
        held = [s for s in signed if s is not None]
        found |= set(held) | pairs(held)
        for line in hunk:
            if line[:1] not in ("+", "-"):
                shingle = line_shingle(line if line[:1] == " " else f" {line}")
                if shingle is not None:
                    context.add(shingle)
    if len(found) < SMALL_CHANGE_SHINGLES:  # a small change: where it is made counts
        found |= context
    return frozenset(found)


_CODE_LINES = st.sampled_from(
    ["+  acc += x[i];", "-  acc = 0;", "   sum += v[j] * w[j];", "@@", "+", "-", " ", "",
     "+ for (int i = 0; i < n; ++i) {", "- }", "} else {", "+ x", "  y = f(z);", " @@ ",
     "return a->b + c.d;", "+#pragma unroll 4", "-__syncthreads();", "plain words here too"]
)  # fmt: skip


@settings(max_examples=400, deadline=None)
@given(st.lists(_CODE_LINES, max_size=16), st.booleans())
def test_shingles_equal_the_rule_applied_hunk_by_hunk(lines: list[str], normal: bool) -> None:
    from kexp.storage.dedupe import is_matchable, shingles_of_normalized

    text = "\n".join(lines)
    if normal:  # as the library calls it; else any text at all
        text = normalize_code_change(text)
    assert shingles_of_normalized(text) == _shingles_hunk_by_hunk(text)
    assert is_matchable(text) == (
        bool(text) and (any(line[:1] in ("+", "-") for line in text.split("\n")) or len(text) >= 40)
    )
