"""A change recorded again without a diff (``kexp add --score``, a YAML document piped in
twice, MCP ``record`` without ``code_change``): its summary, kernel, dtype, env and
parent repeat an earlier experiment's, so it is warned of as tried before, naming that
experiment as a repeated code change names it; recorded all the same. Real git
repositories, the command through click's runner; the truth read from the files."""

from __future__ import annotations

import json
from pathlib import Path

from conftest import experiment_fields, run_kexp

from kexp.storage.store import Store

DIFF = """\
diff --git a/csrc/kernels/cache_kernels.cu b/csrc/kernels/cache_kernels.cu
--- a/csrc/kernels/cache_kernels.cu
+++ b/csrc/kernels/cache_kernels.cu
@@ -40,6 +40,9 @@ __global__ void reshape_and_cache_flash_kernel(
   const int64_t slot_idx = slot_mapping[token_idx];
+  __shared__ scalar_t tile[4][NUM_HEADS * HEAD_SIZE];
+  tile[threadIdx.y][threadIdx.x] = key[src_key_idx];
+  __syncthreads();
   key_cache[tgt_key_idx] = key[src_key_idx];
"""
FAILED_STEP = "Stage key/value tile through LDS before store - -7.07% (LDS conflicts)"
TRIED = "already tried in"
UNROLL = "Unroll head loop by 2 - +0.4%"


def document(pid: str, summary: str = UNROLL, *more: str) -> str:
    """The README's iteration.yaml: a step recorded from a document on stdin (``more``:
    its other lines)."""
    return "\n".join(
        [
            *more,
            f"pid: {pid}",
            "measured_against: parent",
            f"change_summary: {summary}",
            "score: 1.004",
            "detailed_description: '**Approach**: unroll 2.'",
            "",
        ]
    )


def add(repo: Path, *args: str, input: str | None = None) -> tuple[str, str]:
    """``kexp add --json``: the new id and what it warned (it is recorded)."""
    done = run_kexp("add", "--json", *args, cwd=repo, input=input)
    assert done.returncode == 0, done.stderr
    return str(json.loads(done.stdout)["id"]), done.stderr


def test_a_failed_change_recorded_again_without_a_diff_is_tried_before(
    repo: Path, store: Store
) -> None:
    """The regression recorded with its diff; the same change on the same parent again,
    its summary in other case and spacing and another figure, with a score and no diff:
    warned, naming the regression, its score and outcome, and recorded all the same."""
    parent = store.create_experiment(**experiment_fields(change_summary="Hoist slot math"))
    failed = store.create_experiment(
        **experiment_fields(
            pid=parent.id,
            measured_against="parent",
            change_summary=FAILED_STEP,
            score=0.9293,
            code_change=DIFF,
        )
    )
    exp_id, warned = add(
        repo,
        "--summary",
        "stage key/value tile  through LDS before store - -6.9% (LDS conflicts)",
        "--score",
        "0.931",
        "--pid",
        parent.id[:10],
        "--description",
        "**Approach**: stage through LDS.",
    )
    assert f"{TRIED} {failed.id} (score 0.9293, regression: {FAILED_STEP!r})" in warned, warned
    assert "no code_change given" in warned
    assert Store(repo).get_experiment(exp_id).score == 0.931  # a warning, not a refusal


def test_the_same_document_piped_in_twice_warns_the_second_time(repo: Path, store: Store) -> None:
    """The README's iteration.yaml given twice: the first is new, the second names it."""
    parent = store.create_experiment(**experiment_fields())
    first, said = add(repo, input=document(parent.id[:10]))
    assert TRIED not in said, said
    second, warned = add(repo, input=document(parent.id[:10]))
    assert f"{TRIED} {first} (score 1.0040, marginal: 'Unroll head loop by 2 - +0.4%')" in warned
    assert second != first and len(Store(repo).list_experiments()) == 3


def test_another_change_parent_or_a_control_is_not_tried_before(repo: Path, store: Store) -> None:
    """Only the same change on the same parent of the same kernel, dtype and env: another
    summary, another parent, another env, or an A/A control (recorded again by design)
    is not warned of."""
    parent = store.create_experiment(**experiment_fields(change_summary="Hoist slot math"))
    other = store.create_experiment(**experiment_fields(change_summary="Vectorize stores"))
    add(repo, input=document(parent.id[:10]))
    for said in (
        add(repo, input=document(parent.id[:10], "Unroll head loop by 4 - +1.9%"))[1],
        add(repo, input=document(other.id[:10]))[1],
        add(repo, input=document(parent.id[:10], UNROLL, "env: H100 SXM5, CUDA 12.4"))[1],
    ):
        assert TRIED not in said, said
    control = ["--summary", "A/A control - 1.00x", "--score", "1.0", "--tag", "control"]
    add(repo, *control, "--env", "MI300X, ROCm 7.0.0", "--operator", "k.cu: k", "--dtype", "bf16")
    _, said = add(
        repo, *control, "--env", "MI300X, ROCm 7.0.0", "--operator", "k.cu: k", "--dtype", "bf16"
    )
    assert TRIED not in said, said
