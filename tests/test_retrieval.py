"""Retrieval: kexp similar, near-duplicate code changes, and the index that holds them,
checked against the truth read from the files."""

from __future__ import annotations

import contextlib
import importlib.util
import itertools
import json
import os
import shutil
import subprocess
import sys
import textwrap
import warnings
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from conftest import REPO_ROOT, edit_in_place, experiment_fields, git, run_kexp
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, rule

import kexp.storage.doctext as doctext
import kexp.storage.postings as postings
from kexp import KernelExperiment, KexpError, Store
from kexp.agents.context import context
from kexp.storage.cache import Cache
from kexp.storage.dedupe import (
    NearDuplicateWarning,
    RemeasureWarning,
    RepeatedChangeWarning,
    code_shingles,
    is_matchable,
    normalize_code_change,
    shingle_similarity,
)
from kexp.storage.repeats import find_repeats, tried_before
from kexp.storage.retrieval import MIN_RELEVANCE, searching, similar


def _evaluate_module() -> Any:
    spec = importlib.util.spec_from_file_location(
        "retrieval_evaluate", REPO_ROOT / "tests" / "retrieval" / "evaluate.py"
    )
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # its dataclasses look their module up
    spec.loader.exec_module(module)
    return module


def test_the_retrieval_figures_on_the_labelled_fixture_meet_the_bar() -> None:
    evaluate = _evaluate_module()
    figures = evaluate.run()

    assert figures.pairs >= 50 and figures.related >= 40
    assert figures.recall >= 0.8, figures.misses  # the bar
    assert figures.near_precision >= 0.95, figures.misses
    assert figures.near_recall >= 0.9, figures.misses
    assert figures.unrelated_first == 0, figures.misses


VECTORIZE = """\
--- a/csrc/cache_kernels.cu
+++ b/csrc/cache_kernels.cu
@@ -219,4 +219,8 @@ __global__ void reshape_and_cache_flash_kernel(
-    for (int d = threadIdx.x; d < head_size; d += blockDim.x) {
+    const uint4* k_src = reinterpret_cast<const uint4*>(key + src_k);
+    uint4* k_dst = reinterpret_cast<uint4*>(key_cache + tgt);
+    for (int v = threadIdx.x; v < n_vec; v += blockDim.x) {
+      k_dst[v] = k_src[v];
@@ -240,2 +244,3 @@ void reshape_and_cache_flash(
+  TORCH_CHECK(reinterpret_cast<uintptr_t>(key.data_ptr()) % 16 == 0, "aligned");
   const int64_t key_stride = key.stride(0);
"""


def _swap_hunks(diff: str) -> str:
    header, first, second = diff.split("@@ -2")
    return header + "@@ -2" + second + "@@ -2" + first


def test_shingles_match_renamed_variables_and_reordered_hunks_only() -> None:
    renamed = VECTORIZE.replace("k_src", "key_in").replace("k_dst", "key_out")
    renamed = renamed.replace("(int v ", "(int vi ").replace("v < n_vec; v +=", "vi < n_vec; vi +=")
    renamed = renamed.replace("k_dst[v] = k_src[v]", "key_out[vi] = key_in[vi]")
    original = code_shingles(VECTORIZE)

    assert shingle_similarity(original, code_shingles(renamed)) == 1.0
    assert shingle_similarity(original, code_shingles(_swap_hunks(VECTORIZE))) == 1.0
    # The same line added to another loop is not the same change (a loop that differs
    # only in its variables' names would be).
    elsewhere = (
        "@@ -33 +33 @@\n+#pragma unroll 4\n"
        "   for (int idx = threadIdx.x; idx < hidden; idx += blockDim.x) {\n"
        "     variance += x[idx] * x[idx];\n"
    )
    here = (
        "@@ -218 +218 @@\n+#pragma unroll 4\n   for (int j = 0; j < 4; ++j) {\n"
        "     k_dst[j] = k_src[j];\n"
    )
    assert shingle_similarity(code_shingles(elsewhere), code_shingles(here)) < 0.5
    assert code_shingles("(see logs/iter1.patch)") == frozenset()


UNROLL_NORM = """\
--- a/csrc/layernorm_kernels.cu
+++ b/csrc/layernorm_kernels.cu
@@ -40,9 +40,10 @@ __global__ void rms_norm_kernel(
   const int tid = threadIdx.x;
   float variance = 0.0f;
   const scalar_t* row = input + blockIdx.x * hidden_size;
-  for (int idx = tid; idx < hidden_size; idx += blockDim.x) {
-    const float x = (float)row[idx];
+#pragma unroll 4
+  for (int idx = tid; idx < hidden_size; idx += blockDim.x) {
+    const float x = static_cast<float>(row[idx]);
     variance += x * x;
   }
   variance = blockReduceSum<float>(variance);
"""
#: UNROLL_NORM made again on a newer base: upstream changed two of its context lines
#: (the row pointer, the reduction's call) and moved it down by 12 lines.
UNROLL_NORM_REBASED = (
    UNROLL_NORM.replace("@@ -40,9 +40,10 @@", "@@ -52,9 +52,10 @@")
    .replace(
        "   const scalar_t* row = input + blockIdx.x * hidden_size;",
        "   const scalar_t* __restrict__ row = input + (int64_t)blockIdx.x * input_stride;",
    )
    .replace("blockReduceSum<float>(variance);", "blockReduceSum<float>(variance, red_buf);")
)


def test_the_same_change_on_a_newer_base_is_a_near_duplicate_by_its_changed_lines(
    store: Store, make_experiment: Callable[..., KernelExperiment]
) -> None:
    """An agent makes the unroll of the RMSNorm loop again after a rebase: the changed
    lines are the same, but upstream edited two lines of the diff's context. The
    context lines were shingled with the change, and each one that differed took three
    shingles with it: similarity 0.58 (0.71 for VECTORIZE with its one context line
    edited), where the changed lines say it is the same change. A change of a few lines
    or more is shingled by its changed lines alone; a one- or two-line change keeps its
    context lines (standalone), so that the same line added to another loop stays
    apart (test_shingles_match_renamed_variables_and_reordered_hunks_only)."""
    assert shingle_similarity(code_shingles(UNROLL_NORM), code_shingles(UNROLL_NORM_REBASED)) == 1
    edited = VECTORIZE.replace("key.stride(0);", "key.stride(0) * num_kv_heads;")
    assert shingle_similarity(code_shingles(VECTORIZE), code_shingles(edited)) == 1.0
    # A different change at the same place is not alike: the loop unrolled, not rewritten.
    other = UNROLL_NORM.replace(
        "-  for (int idx = tid; idx < hidden_size; idx += blockDim.x) {\n"
        "-    const float x = (float)row[idx];\n",
        "",
    ).replace(
        "+  for (int idx = tid; idx < hidden_size; idx += blockDim.x) {\n"
        "+    const float x = static_cast<float>(row[idx]);\n",
        "   for (int idx = tid; idx < hidden_size; idx += blockDim.x) {\n"
        "+    const float x = __ldg(&row[idx]) * inv_scale;\n",
    )
    assert shingle_similarity(code_shingles(UNROLL_NORM), code_shingles(other)) < 0.5
    # A one-line change made again on a newer base, one context line edited: alike.
    pragma = (
        "@@ -218 +218 @@\n   float acc = 0.0f;\n+#pragma unroll 4\n"
        "   for (int j = 0; j < 4; ++j) {\n     acc += k_src[j] * q[j];\n"
    )
    moved = pragma.replace("float acc = 0.0f;", "float acc = bias[j];")
    assert shingle_similarity(code_shingles(pragma), code_shingles(moved)) >= 0.5
    first = make_experiment(code_change=UNROLL_NORM, score=1.02)
    with pytest.warns(NearDuplicateWarning) as caught:
        make_experiment(code_change=UNROLL_NORM_REBASED, score=1.01)
    message = str(caught[0].message)
    assert first.id in message and "similarity 1.00" in message, message


#: A Triton launch line (the agents' trial's kernel): one change makes the grid persistent.
LAUNCH = """\
@@ -29,5 +29,5 @@ def softmax(x):
     BLOCK_SIZE = triton.next_power_of_2(n_cols)
     num_warps = 4
     y = torch.empty_like(x)
-    softmax_kernel[(n_rows,)](ARGS)
+    softmax_kernel[(min(n_rows, 132),)](ARGS)
     return y
""".replace("ARGS", "y, x, x.stride(0), y.stride(0), n_cols, BLOCK_SIZE=BLOCK_SIZE, num_warps=4")


def test_another_idea_on_the_same_line_is_not_tried_before_and_the_same_one_moved_is(
    store: Store, make_experiment: Callable[..., KernelExperiment]
) -> None:
    """The agents' trial: after a persistent grid (one launch line changed), a different
    idea on that same line (``num_ctas=1``) was warned as a near-duplicate (0.64, then
    0.50 at the threshold) by ``kexp add`` and ``kexp context --diff``: the two share the
    line they remove and its context, but add different lines, and what a change adds is
    what it tries. The persistent grid made again after a context line moved is still
    warned."""
    first = make_experiment(code_change=LAUNCH, score=0.93)
    old = "num_warps=4)\n     return"
    other = LAUNCH.replace("(min(n_rows, 132),)", "(n_rows,)").replace(
        old, "num_warps=4, num_ctas=1)\n     return"
    )
    assert other.count("num_ctas=1") == 1
    assert tried_before(store, other) == []
    with warnings.catch_warnings():
        warnings.simplefilter("error", NearDuplicateWarning)
        make_experiment(code_change=other, score=1.0)
    moved = LAUNCH.replace("num_warps = 4", "num_warps = 8 if BLOCK_SIZE >= 2048 else 4")
    assert [r.id for r in tried_before(store, moved)] == [first.id]
    with pytest.warns(NearDuplicateWarning, match=first.id):
        make_experiment(code_change=moved, score=0.94)


def kernel_diff(before: list[str], added: str) -> str:
    """A diff adding ``added`` after the lines ``before`` of one kernel (its context)."""
    body = "".join(f"     {line}\n" for line in before[-3:])
    after = "     # body\n     z = reduce(y)\n     store(z)\n"
    return f"@@ -2,6 +2,7 @@ def kernel(x):\n{body}+    {added}\n{after}"


def test_another_agents_one_line_dead_end_is_tried_before_in_its_other_surroundings(
    store: Store, make_experiment: Callable[..., KernelExperiment]
) -> None:
    """The agents' trial: agent A's dead end ``tl.num_stages(1)``, one line added after
    A's own earlier steps; agent B, whose earlier steps differ, adds the same line. The
    context lines (a small change's shingles take them, so that the same line in two
    loops is told apart) made the two 0.33 alike: not tried before, and B repeated the
    dead end. The same changed lines in other surroundings are said as such; a
    different line added at the same place is not."""
    a_steps = ["y = load(x)", "tl.vec(8)", "tl.unroll(4)", "tl.shuffle()"]
    b_steps = ["y = load(x)", "tl.vec(4)", "BLOCK = next_pow2(n)", "tl.exp2()"]
    dead = make_experiment(code_change=kernel_diff(a_steps, "tl.num_stages(1)"), score=0.88)
    mine = kernel_diff(b_steps, "tl.num_stages(1)")
    assert shingle_similarity(code_shingles(mine), code_shingles(dead.code_change)) < 0.5

    found = tried_before(store, mine)
    assert [(r.id, r.identical, r.lines_alike) for r in found] == [(dead.id, False, True)]
    assert "the same changed lines" in found[0].describe()
    packet = context(store, operator="reshape_and_cache", diff=mine).text
    said = "(the same changed lines, other lines around them)"
    assert f"{dead.id[:10]} 0.8800x regression {said}" in packet, packet
    with pytest.warns(NearDuplicateWarning, match=dead.id):
        make_experiment(code_change=mine, score=0.87)
    assert tried_before(store, kernel_diff(b_steps, "tl.num_warps(8)")) == []


def test_a_create_warns_of_a_near_duplicate_naming_it_with_its_similarity(
    store: Store, make_experiment: Callable[..., KernelExperiment]
) -> None:
    first = make_experiment(code_change=VECTORIZE, score=1.1167)

    with pytest.warns(NearDuplicateWarning) as caught:
        make_experiment(code_change=_swap_hunks(VECTORIZE), score=1.1)
    message = str(caught[0].message)
    assert first.id in message and "near-duplicate" in message
    assert "similarity 1.00" in message and "score 1.1167" in message

    with pytest.warns(RepeatedChangeWarning) as caught:
        make_experiment(code_change=VECTORIZE, env="H100, CUDA 12.4")
    assert [type(w.message) for w in caught] == [RepeatedChangeWarning]
    assert "already tried in" in str(caught[0].message)
    # The same change, base commit and env: a measurement again (issue 17's rule).
    with pytest.warns(RemeasureWarning, match=f"kexp remeasure {first.id}"):
        make_experiment(code_change=VECTORIZE)


def test_similar_needs_one_question_and_leaves_the_asked_experiment_out(
    store: Store, make_experiment: Callable[..., KernelExperiment]
) -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        asked = make_experiment(
            change_summary="Vectorize copies to 128-bit - +11%", code_change=VECTORIZE
        )
        twin = make_experiment(
            change_summary="Vectorized loads with uint4 - +9%", code_change=_swap_hunks(VECTORIZE)
        )
        make_experiment(change_summary="Fused residual add into RMSNorm - +9%")

    found = similar(store, exp_id=asked.id[:10])
    assert found[0].id == twin.id
    assert asked.id not in [m.id for m in found]
    assert found[0].similarity == 1.0
    with pytest.raises(KexpError, match="give one of"):
        similar(store)
    with pytest.raises(KexpError, match=r"give only one of: .* \(given: text, diff\)"):
        similar(store, text="x", diff=VECTORIZE)
    with pytest.raises(KexpError, match="the diff given is empty"):
        similar(store, diff="")


def test_kexp_similar_prints_a_table_json_and_a_one_line_error(
    repo: Path, make_experiment: Callable[..., KernelExperiment]
) -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        exp = make_experiment(change_summary="Stage the KV tile through LDS - -7% (conflicts)")
    table = run_kexp("similar", "--text", "shared memory staging of the KV tile", cwd=repo)
    assert table.returncode == 0, table.stderr
    assert table.stdout.splitlines()[0].split()[:3] == ["ID", "RELEVANCE", "SCORE"]
    assert exp.id[:10] in table.stdout

    data = json.loads(run_kexp("similar", "--text", "LDS", "--json", cwd=repo).stdout)
    assert data[0]["id"] == exp.id and data[0]["relevance"] == 1.0 and "similarity" not in data[0]

    diff_file = repo / "change.diff"
    diff_file.write_text(VECTORIZE)
    result = run_kexp("similar", "--diff", str(diff_file), "--json", cwd=repo)
    assert result.returncode == 0, result.stderr
    assert [(m["id"], m["similarity"]) for m in json.loads(result.stdout)] == [(exp.id, 0.0)]

    bad = run_kexp("similar", cwd=repo)
    assert bad.returncode == 2 and len(bad.stderr.splitlines()) == 1
    assert bad.stderr.startswith("kexp: error: give one of")
    (repo / "empty.diff").write_text("")
    bad = run_kexp("similar", "--diff", str(repo / "empty.diff"), cwd=repo)
    assert bad.returncode == 2 and len(bad.stderr.splitlines()) == 1
    assert bad.stderr.startswith("kexp: error: the diff given is empty")


def test_an_aa_control_is_no_related_work(
    repo: Path, make_experiment: Callable[..., KernelExperiment]
) -> None:
    """The A/A control (tag control: the naive kernel against itself) shares the plan's
    words, but changed nothing: ``kexp similar`` by text, by the id of a step and in JSON
    lists the steps that changed the kernel, never the control, and the best of them
    leads with relevance 1.0."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        control = make_experiment(
            change_summary="A/A control: naive softmax vs itself - noise floor",
            score=1.0021,
            tags=["control"],
            detailed_description="**Approach**: naive softmax row kernel against itself",
        )
        step = make_experiment(
            change_summary="Keep the row max of the naive softmax in a register - +1%",
            score=1.0102,
            detailed_description="**Approach**: row max in a register\n\n**Key insight**: no",
        )
        other = make_experiment(
            change_summary="Naive softmax with num_warps 8 - +10%",
            score=1.0999,
            detailed_description="**Approach**: more warps per row",
        )
    printed = run_kexp("similar", "--text", "naive softmax noise floor", "--json", cwd=repo)
    assert printed.returncode == 0, printed.stderr
    found = json.loads(printed.stdout)
    assert {m["id"] for m in found} == {step.id, other.id}, found
    assert found[0]["relevance"] == 1.0
    by_id = json.loads(run_kexp("similar", step.id[:10], "--json", cwd=repo).stdout)
    assert [m["id"] for m in by_id] == [other.id], by_id
    assert control.id not in run_kexp("similar", "--text", "A/A control", cwd=repo).stdout


def test_a_damaged_index_is_rebuilt_from_the_files(
    store: Store, make_experiment: Callable[..., KernelExperiment]
) -> None:
    exp = make_experiment(change_summary="Warp-shuffle reduction - +4.4%")
    assert [m.id for m in similar(store, text="warp shuffle")] == [exp.id]
    (index,) = store.cache_dir.glob("cache-*.sqlite")

    index.write_bytes(b"not a database" * 100)

    assert [m.id for m in similar(store, text="warp shuffle")] == [exp.id]
    with searching(store) as search:
        assert search.count() == 1


def test_the_first_question_after_a_clone_posts_nothing_and_the_next_command_posts_all(
    store: Store, make_experiment: Callable[..., KernelExperiment]
) -> None:
    """The first near-duplicate question of a store without a cache (after a clone)
    adds a doc for every experiment and compares each as it is, posting none: it does
    not also wait for the postings of the whole store. The next command's question
    posts every doc; both find the same near-duplicates."""
    import sqlite3

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # each is a near-duplicate of the one before
        made = [
            make_experiment(code_change=VECTORIZE.replace("4", str(n)), score=1.0 + n / 100)
            for n in range(4, 9)
        ]
        copy = make_experiment(code_change=VECTORIZE, score=1.1167)
    shutil.rmtree(store.cache_dir)

    def posted() -> tuple[int, int]:
        (file,) = store.cache_dir.glob("cache-*.sqlite")
        with contextlib.closing(sqlite3.connect(file)) as connection:
            (groups,) = connection.execute("SELECT COUNT(*) FROM postings").fetchone()
            (docs,) = connection.execute("SELECT COUNT(*) FROM docs").fetchone()
        return groups, docs

    first = [r.id for r in tried_before(store, _swap_hunks(VECTORIZE))]
    assert copy.id in first and len(made) + 1 == posted()[1]
    assert posted()[0] == 0
    assert [r.id for r in tried_before(store, _swap_hunks(VECTORIZE))] == first
    assert posted()[0] > 0


@pytest.mark.parametrize("damage", ["garbage", "one bit"])
def test_a_damaged_postings_group_is_found_and_the_near_duplicate_still_reported(
    store: Store, make_experiment: Callable[..., KernelExperiment], damage: str
) -> None:
    """The postings are kept in sealed groups: a group whose bytes changed (garbage, or
    one flipped bit that would name another doc or shingle) is never trusted; the
    cache is rebuilt and the near-duplicate found from the files."""
    import sqlite3

    first = make_experiment(code_change=VECTORIZE, score=1.1167)
    for _ in range(2):  # the first question adds the doc, the next one posts it
        assert [r.id for r in tried_before(store, _swap_hunks(VECTORIZE))] == [first.id]
    (file,) = store.cache_dir.glob("cache-*.sqlite")
    connection = sqlite3.connect(file)
    try:
        groups = connection.execute("SELECT grp, record FROM postings").fetchall()
        assert groups
        for group, record in groups:
            if damage == "garbage":
                spoilt = b"{\x00garbage"
            else:
                spoilt = record[:-3] + bytes([record[-3] ^ 0x04]) + record[-2:]
            connection.execute("UPDATE postings SET record = ? WHERE grp = ?", (spoilt, group))
        connection.commit()
    finally:
        connection.close()
    assert [r.id for r in tried_before(store, _swap_hunks(VECTORIZE))] == [first.id]


def test_a_search_of_an_unchanged_tree_compares_no_folder_and_sees_the_next_edit(
    store: Store,
    make_experiment: Callable[..., KernelExperiment],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The retrieval index takes the whole working tree's stamp: a search of the tree
    as it was compares no folder's records; an edit in place is compared, and found."""
    from kexp.storage.cache import Cache

    exp = make_experiment(change_summary="Warp-shuffle reduction - +4.4%")
    make_experiment(change_summary="Unrolled the inner loop by four - -1.2%")
    assert [m.id for m in similar(store, text="warp shuffle")] == [exp.id]
    compared: list[str] = []
    plain = Cache.indexed

    def counted(cache: Cache, kind: str) -> dict[str, bytes]:
        compared.append(kind)
        return plain(cache, kind)

    monkeypatch.setattr(Cache, "indexed", counted)
    assert [m.id for m in similar(store, text="warp shuffle")] == [exp.id]
    assert compared == []
    path = store.get_experiment(exp.id).path
    assert path is not None
    edit_in_place(path, lambda text: text.replace("Warp-shuffle reduction", "Vectorised stores", 1))
    assert similar(store, text="warp shuffle") == []
    assert [m.id for m in similar(store, text="vectorised stores")] == [exp.id]
    assert sorted(set(compared)) == ["docs", "fts"]


def test_the_whole_trees_stamp_is_not_kept_when_another_process_wrote_meanwhile(
    store: Store, make_experiment: Callable[..., KernelExperiment]
) -> None:
    """Two connections to one cache, as two processes: one compares the folders'
    records, the other writes some; the first's stamp of the whole tree is then not
    kept (the folders it did not change hold what the other saw)."""
    make_experiment(change_summary="Warp-shuffle reduction - +4.4%")
    assert len(similar(store, text="warp shuffle")) == 1
    with _two_connections(store) as (one, other):
        for kind in ("docs", "fts"):
            folders = one.indexed(kind)
            assert folders and one.indexed_whole(kind) is not None
            one.save_indexed(kind, {}, b"stamp of this tree")  # nobody wrote meanwhile
            assert one.indexed_whole(kind) == b"stamp of this tree"
            one.indexed(kind)
            other.save_indexed(kind, {"2026/": None})  # another process's change
            one.save_indexed(kind, {}, b"stamp of a later tree")
            assert one.indexed_whole(kind) is None
    assert len(similar(store, text="warp shuffle")) == 1


@contextlib.contextmanager
def _two_connections(store: Store) -> Iterator[tuple[Cache, Cache]]:
    """Two connections to the store's cache, as two processes have."""
    one, other = store.open_cache(), store.open_cache()
    try:
        yield one, other
    finally:
        one.close()
        other.close()


def test_a_search_of_an_unchanged_tree_never_waits_to_store_the_trees_stamp(
    store: Store,
    make_experiment: Callable[..., KernelExperiment],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Another process holds the cache's write lock while a search of an unchanged
    tree finds the stamp missing: the search answers from the file at once, leaving
    the stamp for later (it waited out the busy timeout, then copied the cache into
    memory)."""
    import sqlite3
    import time

    from kexp.storage.cache import RACY_NS, Cache

    exp = make_experiment(change_summary="Warp-shuffle reduction - +4.4%")
    time.sleep(RACY_NS / 1e9 + 0.3)  # the file settled: its listing is kept
    assert [m.id for m in similar(store, text="warp shuffle")] == [exp.id]
    (file,) = store.cache_dir.glob("cache-*.sqlite")
    with contextlib.closing(sqlite3.connect(file, isolation_level=None)) as other:
        other.execute("DELETE FROM indexed WHERE folder IN ('docs!', 'fts!')")
        other.execute("BEGIN IMMEDIATE")  # another process writing

        def refused(cache: Cache) -> None:
            raise AssertionError("the search waited for the write lock")

        monkeypatch.setattr(Cache, "to_memory", refused)
        # Another question each time: the same one is answered as kept, without a search
        # (kexp.storage.answers).
        assert [m.id for m in similar(store, text="warp shuffle reduction")] == [exp.id]
        other.execute("ROLLBACK")
    monkeypatch.undo()
    assert [m.id for m in similar(store, text="shuffle")] == [exp.id]
    with contextlib.closing(sqlite3.connect(file)) as connection:
        kept = connection.execute(
            "SELECT folder FROM indexed WHERE folder IN ('docs!', 'fts!') ORDER BY folder"
        ).fetchall()
    assert kept == [("docs!",), ("fts!",)]


def test_fts_changes_compared_before_another_process_wrote_are_not_applied_twice(
    store: Store, make_experiment: Callable[..., KernelExperiment]
) -> None:
    """Two connections, as two processes, found the same change of the FTS table; the
    second to write is told to compare again (each doc's count of the files holding
    it was raised twice: a file deleted later left its doc in the table)."""
    from kexp.storage.cache import StaleComparisonError

    make_experiment(change_summary="Warp-shuffle reduction - +4.4%")
    assert len(similar(store, text="warp shuffle")) == 1
    docs_before = _fts_docs(store)
    with _two_connections(store) as (one, other):
        one.indexed("fts")
        other.indexed("fts")
        other.activate({}, {}, {"2030/": None}, compared=True)
        with pytest.raises(StaleComparisonError):
            one.activate({}, {}, {"2031/": bytes(16)}, compared=True)
        assert "2031/" not in other.indexed("fts")
    assert _fts_docs(store) == docs_before
    assert len(similar(store, text="warp shuffle")) == 1


def test_a_search_compares_again_when_another_process_changed_the_fts_table_meanwhile(
    store: Store,
    make_experiment: Callable[..., KernelExperiment],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Another process writes the FTS table's records while a search compares them
    (after an edit in place): the search compares again, and answers the files."""
    from kexp.storage.cache import Cache

    exp = make_experiment(change_summary="Warp-shuffle reduction - +4.4%")
    assert [m.id for m in similar(store, text="warp shuffle")] == [exp.id]
    path = store.get_experiment(exp.id).path
    assert path is not None
    edit_in_place(path, lambda text: text.replace("Warp-shuffle reduction", "Vectorised stores", 1))
    plain, interrupted, compared = Cache.indexed, [], []

    def meanwhile(cache: Cache, kind: str) -> dict[str, bytes]:
        found = plain(cache, kind)
        compared.append(kind)
        if kind == "fts" and not interrupted:
            interrupted.append(kind)
            other = store.open_cache()
            other.save_indexed("fts", {"elsewhere/": bytes(16)})  # another process
            other.close()
        return found

    monkeypatch.setattr(Cache, "indexed", meanwhile)
    assert [m.id for m in similar(store, text="vectorised stores")] == [exp.id]
    assert compared.count("fts") == 2  # compared again after the other's write
    assert similar(store, text="warp shuffle") == []
    monkeypatch.undo()
    docs = {row.key for row in store.found().rows}
    assert _fts_docs(store) == _docs_of(store, docs)


def _fts_docs(store: Store) -> set[int]:
    """The doc numbers the FTS table holds, read from the cache file."""
    import sqlite3

    (file,) = store.cache_dir.glob("cache-*.sqlite")
    with contextlib.closing(sqlite3.connect(file)) as connection:
        return {rowid for (rowid,) in connection.execute("SELECT rowid FROM fts")}


def _docs_of(store: Store, keys: set[bytes]) -> set[int]:
    import sqlite3

    (file,) = store.cache_dir.glob("cache-*.sqlite")
    with contextlib.closing(sqlite3.connect(file)) as connection:
        found = connection.execute("SELECT doc, key FROM docs").fetchall()
    return {doc for doc, key in found if key in keys}


def test_a_store_at_a_revision_is_searched_as_it_was(
    repo: Path, store: Store, make_experiment: Callable[..., KernelExperiment]
) -> None:
    old = make_experiment(change_summary="Warp-shuffle reduction - +4.4%")
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", "one experiment")
    make_experiment(change_summary="Warp-shuffle reduction, take two - +4.5%")

    assert len(similar(store, text="warp shuffle")) == 2
    assert [m.id for m in similar(store.at("HEAD"), text="warp shuffle")] == [old.id]


def test_near_duplicates_are_found_exactly_from_the_prefixes_of_their_shingles(
    store: Store, make_experiment: Callable[..., KernelExperiment]
) -> None:
    """Every change at least as similar as the threshold is found (prefix filtering is
    exact), and nothing below it: against every pair, computed here."""
    made = []
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for factor in range(6):
            change = VECTORIZE.replace("% 16", f"% {16 << factor}")
            if factor % 2:
                change = change.replace("k_dst[v] = k_src[v];", "k_dst[v] = k_src[v] + 0;")
            made.append(make_experiment(code_change=change))
    with searching(store) as search:
        for exp in made:
            query = code_shingles(exp.code_change)
            for threshold in (0.5, 0.7, 0.9):
                truth = sorted(
                    (
                        other.id,
                        round(shingle_similarity(query, code_shingles(other.code_change)), 9),
                    )
                    for other in made
                    if shingle_similarity(query, code_shingles(other.code_change)) >= threshold
                )
                found = sorted(
                    (row.id, round(s, 9)) for row, s in search.near_duplicates(query, threshold)
                )
                assert found == truth


def _assert_postings_are_the_prefixes(root: Path, threshold: float) -> tuple[int, int]:
    """The cache's postings are exactly each posted doc's prefix in the order it stores;
    (the docs posted, the docs)."""
    import marshal
    import sqlite3
    from array import array

    (file,) = (root / ".kexp").glob("cache-*.sqlite")
    connection = sqlite3.connect(file)
    try:
        order_row = connection.execute("SELECT posted, record FROM shingle_order").fetchone()
        posted, order = (order_row[0], marshal.loads(order_row[1][4:])) if order_row else (0, {})
        (docs,) = connection.execute("SELECT COUNT(*) FROM docs").fetchone()
        wanted = {
            (shingle, doc)
            for doc, packed in connection.execute(
                "SELECT doc, shingles FROM docs WHERE doc <= ?", (posted,)
            )
            for shingle in doctext.shingle_prefix(
                array("I", marshal.loads(packed[4:])), threshold, order
            )
        }
        found: set[tuple[int, int]] = set()
        for group, record in connection.execute("SELECT grp, record FROM postings"):
            entries = array("Q", marshal.loads(record[4:]))
            assert list(entries) == sorted(set(entries))  # sorted, each once
            for entry in entries:
                assert entry >> (64 - postings.GROUP_BITS) == group
                found.add((entry >> 32, entry & postings.DOC_MASK))
    finally:
        connection.close()
    assert found == wanted
    return posted, docs


@given(seed=st.integers(0, 2**32 - 1))
@settings(max_examples=4, deadline=None)
def test_near_duplicates_stay_exact_as_the_order_of_the_postings_is_decided_again(
    seed: int,
) -> None:
    """The postings hold each change's rarest shingles first, in an order decided from
    the docs the first time and again whenever they double: after each round of creates
    (1, 2, 4... docs), the near-duplicates at the setting's threshold are exactly those
    computed here against every change (a change shares two lines with all the others,
    and many are copies of another with one line changed), whether the docs were posted
    or, added by the question's own command, not yet."""
    import random
    import tempfile

    rng = random.Random(seed)
    folder = tempfile.TemporaryDirectory(prefix="kexp-order-")
    root = Path(folder.name)
    (root / "experiments").mkdir()
    store = Store(root, code_repo=root)
    common = ["for (int i = threadIdx.x; i < n; i += blockDim.x) {", "acc += x[i] * w[i];"]
    pool = [f"out[{i}] = acc * w[{i % 5}] + b[{i % 3}];" for i in range(14)]
    threshold = store.settings.near_duplicate_similarity
    changes: dict[str, str] = {}
    pairs = 0  # near-duplicates of another change found
    for round_size in (1, 1, 2, 4, 8, 16):
        for _ in range(round_size):
            if changes and rng.random() < 0.6:  # another with its last line changed
                lines = rng.choice(list(changes.values())).split("\n")[1:-1]
                lines[-1] = f"+  {rng.choice(pool)}"
            else:
                lines = [f"+  {line}" for line in common + rng.sample(pool, rng.randint(8, 12))]
            change = "@@ -1,1 +1,9 @@\n" + "\n".join(lines) + "\n"
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                made = store.create_experiment(
                    **experiment_fields(
                        code_change=change,
                        base_commit="0f54a8d954a292dd879f37334f90573ddeb49278",
                        author="t",
                    )
                )
                changes[made.id] = change
        with searching(store) as search:
            for change in changes.values():
                query = code_shingles(change)
                truth = sorted(
                    (other_id, round(shingle_similarity(query, code_shingles(other)), 9))
                    for other_id, other in changes.items()
                    if shingle_similarity(query, code_shingles(other)) >= threshold
                )
                found = sorted(
                    (row.id, round(s, 9)) for row, s in search.near_duplicates(query, threshold)
                )
                assert found == truth
                pairs += len(truth) - 1
        posted, docs = _assert_postings_are_the_prefixes(root, threshold)
        # A command posts the docs earlier ones added; its own doc, not yet.
        assert posted >= docs - 1
    assert posted == docs  # the last round's creates posted, its question too
    assert pairs > 0
    folder.cleanup()


# --- the index against the files, over a random history -------------------------------

_WORDS = ("vectorize", "unroll", "shuffle", "stage", "prefetch", "fuse", "hoist", "split")
_LINES = (
    "for (int i = threadIdx.x; i < n; i += blockDim.x) {",
    "acc += x[i] * w[i];",
    "__syncthreads();",
    "const int64_t slot = slot_mapping[token];",
    "out[i] = static_cast<scalar_t>(acc);",
    "#pragma unroll 4",
    "float4 v = reinterpret_cast<const float4*>(in)[i];",
    "if (slot < 0) { return; }",
)
_OPERATORS = ("csrc/cache.cu: reshape_and_cache", "csrc/norm.cu: rms_norm")
_OUTCOMES = (1.05, 0.95, 1.0, 0.0)


def _diff(lines: list[int]) -> str:
    body = "".join(f"+  {_LINES[i]}\n" for i in lines)
    return f"@@ -10,3 +10,{len(lines)} @@\n   int k = 0;\n{body}"


class IndexAgainstFiles(RuleBasedStateMachine):
    """Creates, corrections, edits in place and deletes; after each step the index's
    documents, its near-duplicates and its identical changes are the files'."""

    def __init__(self) -> None:
        super().__init__()
        self.counter = itertools.count()

    @initialize()
    def make_store(self) -> None:
        import tempfile

        self.folder = tempfile.TemporaryDirectory(prefix="kexp-retrieval-model-")
        root = Path(self.folder.name)
        (root / "experiments").mkdir()
        self.store = Store(root, code_repo=root)

    def teardown(self) -> None:
        self.folder.cleanup()

    @rule(
        word=st.sampled_from(_WORDS),
        lines=st.lists(st.integers(0, len(_LINES) - 1), min_size=0, max_size=5),
        operator=st.sampled_from(_OPERATORS),
        score=st.sampled_from(_OUTCOMES),
    )
    def create(self, word: str, lines: list[int], operator: str, score: float) -> None:
        n = next(self.counter)
        fields = experiment_fields(
            id=f"6ac0000{n:09x}",
            change_summary=f"{word.capitalize()} the loop, try {n} - result",
            operator_sig=operator,
            score=score,
            is_buggy=score == 0.0,
            error_message="crash" if score == 0.0 else "",
            base_commit="0f54a8d954a292dd879f37334f90573ddeb49278",
            author="model",
            code_change=_diff(lines) if lines else "",
        )
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            self.store.create_experiment(**fields)

    def _some_path(self, index: int) -> Path | None:
        paths = self.store.paths()
        return paths[index % len(paths)] if paths else None

    @rule(index=st.integers(0, 50), score=st.sampled_from(_OUTCOMES[:3]))
    def correct_score(self, index: int, score: float) -> None:
        path = self._some_path(index)
        if path is not None:
            exp_id = path.name[:16]
            if not self.store.get_experiment(exp_id).is_buggy:
                self.store.update_experiment(exp_id, score=score)

    @rule(index=st.integers(0, 50), word=st.sampled_from(_WORDS))
    def edit_in_place(self, index: int, word: str) -> None:
        path = self._some_path(index)
        if path is not None:
            edit_in_place(path, lambda text: text.replace("the loop", f"the {word} loop", 1))

    @rule(index=st.integers(0, 50))
    def delete(self, index: int) -> None:
        path = self._some_path(index)
        if path is not None:
            path.unlink()

    @invariant()
    def the_index_holds_the_files(self) -> None:
        if not hasattr(self, "store"):
            return
        truth = {e.path.name: e for e in self.store.list_experiments()}  # type: ignore[union-attr]
        with searching(self.store) as session:
            docs = {os.path.basename(d.path): d for d in session.rows}
            assert docs.keys() == truth.keys()
            # The FTS table holds exactly the files' contents (none stale, none missing).
            assert _fts_docs(self.store) == _docs_of(self.store, {d.key for d in docs.values()})
            for name, doc in docs.items():
                exp = truth[name]
                assert (doc.id, doc.change_summary, doc.score) == (
                    exp.id,
                    exp.change_summary,
                    exp.score,
                )
                assert session.derivation.of(doc).outcome == exp.outcome
                words = " ".join(exp.change_summary.split()[:2])
                assert exp.id in [m.id for m in session.rank(text=words, limit=100)]
            for exp in truth.values():
                query = code_shingles(exp.code_change)
                brute = sorted(
                    (name, round(shingle_similarity(query, code_shingles(e.code_change)), 9))
                    for name, e in truth.items()
                    if query and shingle_similarity(query, code_shingles(e.code_change)) >= 0.5
                )
                found = sorted(
                    (os.path.basename(row.path), round(s, 9))
                    for row, s in session.near_duplicates(query, 0.5)
                )
                assert found == brute
        self._ranks_as_a_fresh_cache(list(truth.values()))
        for exp in list(truth.values())[:3]:
            if exp.code_change:
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore")
                    fast = [r.id for r in tried_before(self.store, exp.code_change) if r.identical]
                wanted = normalize_code_change(exp.code_change)
                plain = [
                    e.id
                    for e in sorted(truth.values(), key=lambda e: (e.created_at, e.id))
                    if is_matchable(wanted) and normalize_code_change(e.code_change) == wanted
                ]
                assert fast == plain  # the index's answer is the files'
                assert [r.id for r in find_repeats(self.store, exp.code_change)] == plain

    def _ranks_as_a_fresh_cache(self, truth: list[KernelExperiment]) -> None:
        """A diff's related experiments are those a cache made at once finds (the
        postings' order, decided as the cache grew, changes nothing)."""
        fresh = Path(self.folder.name, "fresh")
        shutil.rmtree(fresh, ignore_errors=True)
        shutil.copytree(self.store.experiments_dir, fresh / "experiments")
        other = Store(fresh, code_repo=fresh)
        for exp in truth[:3]:
            if exp.code_change:
                asked = [m.to_dict() for m in similar(self.store, diff=exp.code_change)]
                assert asked == [m.to_dict() for m in similar(other, diff=exp.code_change)]


TestIndexAgainstFiles = IndexAgainstFiles.TestCase
TestIndexAgainstFiles.settings = settings(
    max_examples=8,
    stateful_step_count=10,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)


def test_many_processes_creating_at_once_lose_nothing_and_the_index_agrees(repo: Path) -> None:
    script = textwrap.dedent(
        f"""
        import sys, warnings
        sys.path.insert(0, {str(REPO_ROOT / "tests")!r})
        from conftest import experiment_fields
        from kexp import Store
        store = Store(sys.argv[1])
        warnings.simplefilter("ignore")
        for n in range(5):
            diff = "@@ -1 +1 @@\\n+  acc += x[i] * w[%d];\\n+  out[i] = acc;\\n" % n
            store.create_experiment(**experiment_fields(
                change_summary=f"Worker {{sys.argv[2]}} try {{n}} - +1%", code_change=diff))
        """
    )
    workers = [
        subprocess.Popen([sys.executable, "-c", script, str(repo), str(w)], cwd=repo)
        for w in range(4)
    ]
    assert [worker.wait(timeout=120) for worker in workers] == [0, 0, 0, 0]

    store = Store(repo)
    assert len(store.paths()) == 20
    with searching(store) as session:
        assert session.count() == 20
    assert len(similar(store, text="worker try", limit=30)) == 20


def _words_by_regex(code_change: str) -> str:
    """code_words as first written (the whole text through the case-change expression,
    sizes written as dimensions made their numbers first: ``128x64`` is 128 and 64): the
    reference the library's faster form must equal."""
    import re

    word = re.compile(r"[A-Za-z][A-Za-z0-9]*|[0-9]+")
    case = re.compile(r"(?<=[a-z0-9])(?=[A-Z])|(?<=[A-Z])(?=[A-Z][a-z])")
    sizes = re.compile(r"(?<![A-Za-z0-9])(?!0[xX])[0-9]+(?:[xX][0-9]+)+(?![A-Za-z0-9])")
    normalized = normalize_code_change(code_change)
    if not is_matchable(normalized):
        return ""
    lines = [line for line in normalized.split("\n") if line[:1] in ("+", "-")]
    text = " ".join(line[1:] for line in lines) if lines else normalized.replace("@@", " ")
    text = sizes.sub(lambda found: re.sub("[xX]", " ", found[0]), text.replace("_", " "))
    return " ".join(dict.fromkeys(word.findall(case.sub(" ", text))))


@settings(max_examples=400, deadline=None)
@given(
    st.lists(
        st.text(alphabet="aZb9_ -+.:xXYé20Dq(", min_size=0, max_size=24), min_size=1, max_size=6
    )
)
def test_code_words_equal_the_case_change_expression(lines: list[str]) -> None:
    change = "\n".join(f"+{line}" for line in lines)
    assert doctext.code_words(change) == _words_by_regex(change)
    assert doctext.code_words(VECTORIZE) == _words_by_regex(VECTORIZE)


_SHINGLES = st.one_of(
    st.sampled_from([0, 1, 0xFFFF, 0x10000, 0xABCD0001, 0xABCD0002, 2**32 - 1]),
    st.integers(0, 2**32 - 1),
)


@given(
    first=st.sets(st.tuples(_SHINGLES, st.integers(0, 2**32 - 1)), max_size=60),
    second=st.sets(st.tuples(_SHINGLES, st.integers(0, 2**32 - 1)), max_size=60),
)
def test_postings_groups_hold_every_posting_once_and_answer_each_shingle(
    first: set[tuple[int, int]], second: set[tuple[int, int]]
) -> None:
    """The postings' groups (a sorted array each, by the shingle's high bits), merged
    with more, answer which docs post a shingle as the plain set of pairs does."""
    from array import array

    def groups_of(pairs: set[tuple[int, int]]) -> dict[int, array[int]]:
        return postings.grouped(p for s, d in pairs for p in postings.postings_of(d, [s]))

    groups = groups_of(first)
    for group, entries in groups_of(second).items():
        groups[group] = postings.merged(groups.get(group, array("Q")), entries)
    truth = first | second
    for group, entries in groups.items():
        assert list(entries) == sorted(set(entries))
        assert {postings.group_of(entry >> 32) for entry in entries} == {group}
    for shingle in {shingle for shingle, _ in truth} | {12345}:
        entries = groups.get(postings.group_of(shingle), array("Q"))
        assert postings.docs_posting(entries, shingle) == sorted(
            doc for posted, doc in truth if posted == shingle
        )


@pytest.mark.parametrize("parallel", [False, True], ids=["one-process", "two-processes"])
def test_words_git_holds_are_made_again_as_they_were_made_at_once(
    repo: Path,
    store: Store,
    make_experiment: Callable[..., KernelExperiment],
    monkeypatch: pytest.MonkeyPatch,
    parallel: bool,
) -> None:
    """The first create after a clone keeps no words of the contents git holds; the
    next search makes them again (from the files, in two processes when many) and ranks
    as a search that made them at once."""
    import kexp.storage.parallel

    words = ("warp shuffle", "vectorised stores", "split-k", "LDS padding", "unrolled loop")
    warnings.simplefilter("ignore", RepeatedChangeWarning)  # the creates' own warnings
    for n, topic in enumerate(words * 2):
        make_experiment(
            change_summary=f"{topic.capitalize()} number {n} - +{n}.0%",
            detailed_description=f"**Approach**: {topic}, take {n}\n\n**Key insight**: {topic}",
            code_change=_diff([n % len(_LINES), (3 * n + 1) % len(_LINES)]),
            error_message="" if n % 3 else f"{topic} failed to compile",
        )
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", "ten experiments")
    shutil.rmtree(store.cache_dir)  # as a clone has none
    queries = [dict(text=w) for w in words] + [dict(diff=_diff([1, 4]))]

    def answers() -> list[list[dict[str, Any]]]:
        return [[m.to_dict() for m in similar(store, **q)] for q in queries]  # type: ignore[arg-type]

    make_experiment(change_summary="LDS padding again - +0.5%", code_change=_diff([2, 5]))
    committed = _committed_keys(repo)
    kept = _docs_kept_words(store)
    assert committed and not committed & kept  # no words kept of what git holds
    if parallel:
        monkeypatch.setattr(kexp.storage.parallel, "PARALLEL_MIN_FILES", 1)
        monkeypatch.setattr(kexp.storage.parallel, "_forkable", lambda: True)
    made_again = answers()
    shutil.rmtree(store.cache_dir)
    monkeypatch.setattr(kexp.storage.parallel, "_forkable", lambda: False)
    assert made_again == answers()
    assert any(made_again)


def _committed_keys(repo: Path) -> set[bytes]:
    """The content keys (blob names) of the experiment files HEAD holds."""
    listed = git(repo, "ls-tree", "-r", "HEAD", "experiments").splitlines()
    return {bytes.fromhex(line.split()[2]) for line in listed if line.endswith(".md")}


def _docs_kept_words(store: Store) -> set[bytes]:
    """The contents whose docs keep their words, read from the cache file."""
    import sqlite3

    (file,) = store.cache_dir.glob("cache-*.sqlite")
    with contextlib.closing(sqlite3.connect(file)) as connection:
        found = connection.execute("SELECT key FROM docs WHERE texts IS NOT NULL").fetchall()
    return {key for (key,) in found}


@given(
    docs=st.lists(st.sets(_SHINGLES, min_size=1, max_size=12), min_size=2, max_size=30),
    share=st.integers(1, 4),
)
@settings(max_examples=20, deadline=None)
def test_postings_made_in_two_processes_are_those_made_in_one(
    docs: list[set[int]], share: int
) -> None:
    """A command posting the docs others added makes their prefixes' postings in two
    processes when there are many: the groups are those made in one."""
    from array import array

    import kexp.storage.parallel as parallel

    numbered = [(n + 1, array("I", sorted(held))) for n, held in enumerate(docs)]

    def prefix(held: Any) -> list[int]:
        return sorted(held)[: len(held) // share + 1]

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(parallel, "PARALLEL_MIN_FILES", 1)
        patch.setattr(parallel, "_forkable", lambda: True)
        two = postings.posted(numbered, prefix)
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(parallel, "_forkable", lambda: False)
        one = postings.posted(numbered, prefix)
    truth = postings.grouped(
        p for d, held in numbered for p in postings.postings_of(d, prefix(held))
    )
    assert two == one == truth


def test_similar_lists_no_experiment_sharing_only_the_words_every_one_holds(
    store: Store, make_experiment: Callable[..., KernelExperiment]
) -> None:
    """An agent asks what is like its warp-shuffle step, in a campaign of one kernel:
    the experiments sharing only words every one holds (the kernel's) are not related;
    `kexp similar` listed them at relevance 0.000 below the real matches."""
    operator = "csrc/softmax.cu: softmax"

    def step(summary: str, insight: str) -> KernelExperiment:
        return make_experiment(
            operator_sig=operator, change_summary=summary,
            detailed_description=f"Timed on the warp reduction.\n\n**Key insight**: {insight}",
            raw_result="",
        )  # fmt: skip

    shuffle = step("Warp shuffle reduction - +12%", "shuffles beat shared memory for the row max")
    related = step("Combine shuffle with __expf - +2%", "shuffle reduction and intrinsics compose")
    for summary, insight in [
        ("Vectorize loads with float4 - +25%", "16-byte loads are the lever"),
        ("A/A control: original vs original", "noise floor 0.4%"),
        ("Templated block size - compile error", "template depth limit"),
        ("Autotune block size over 64..1024 - timed out", "budget the sweep"),
        ("Cache row max in register - +3%", "one load less per element"),
    ]:
        step(summary, insight)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        matches = similar(store, exp_id=shuffle.id)
    assert related.id in [m.id for m in matches]
    assert all(m.relevance >= MIN_RELEVANCE for m in matches), [
        (m.change_summary, m.relevance) for m in matches
    ]
