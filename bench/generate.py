"""Generate the benchmark's data: N realistic experiments, three ways.

For a given N and seed this writes, under ``<data-dir>/n<N>-seed<seed>-v<version>/``:

* ``store/`` — a kexp store (``experiments/<YYYY>/<MM>/<xx>/<id>-<slug>.md``, the layout of
  :mod:`kexp.storage.layout`; canonical files
  written with :func:`kexp.format.fileformat.serialize`, plus ``experiments/README.md`` and the
  ``.gitignore`` of ``kexp init``), by default also a git repository with one commit;
* ``code/`` — a small git repository whose commits are the experiments' ``base_commit``;
* ``kernel_experiments_db.json`` — the same records in the predecessor's one-file JSON
  database (``json.dump(db, f, indent=2, sort_keys=True)``, id → record, legacy keys);
* ``experiments.sqlite`` — the same records in one SQLite table, indexed by score;
* ``meta.json`` — what the benchmark needs to check answers (the expected top scores,
  an id to show, a filter and its match count), sizes and timings. It is written last:
  a folder without it is incomplete and is generated again.

Everything is deterministic: one seeded :class:`random.Random` drives every choice, so
the same N and seed give byte-identical files on every machine.

Speed: kexp's serializer renders each front-matter field with PyYAML's pure-Python
dumper (about 4 ms a file), which would take minutes at 100,000 files. While generating,
two leaf helpers of :mod:`kexp.format.fileformat` are wrapped (``render_field``: memoised, with
a fast path for plain hex strings, timestamps and plain one-line text;
``_is_plain_safe``: a fast path for text without ``##`` or fence lines). Everything else
is kexp's own ``serialize``, and every ``--verify-every``-th file (and the first 200) is
compared byte for byte with the unwrapped serializer; any difference aborts.

Run ``python bench/generate.py --sizes 1000`` to generate without measuring.
"""

from __future__ import annotations

import argparse
import dataclasses
import datetime as dt
import json
import math
import os
import random
import re
import shutil
import sqlite3
import subprocess
import sys
import time
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

import kexp.format.fileformat as fileformat
from kexp.core.model import LEGACY_FIELDS, KernelExperiment
from kexp.storage.layout import folder_parts
from kexp.storage.store import init_store, slugify

#: Bump when the generated data changes, so cached data sets are regenerated. 3: the
#: fan-out layout and children measured against the reference (each of the two was a
#: version 2 on its own branch, before they merged). 4: the data set's answers hold
#: ``kexp top``'s own top 20 (a child measured against the reference is judged over its
#: parent: one within noise of it ranks below the steps that improved).
GENERATOR_VERSION = 4
DEFAULT_SEED = 20261129
DEFAULT_DATA_DIR = Path(__file__).resolve().parent / ".data"
#: Experiments per month on average: keeps every ``YYYY/MM`` folder below 1,000 files.
DEFAULT_PER_MONTH = 800
#: The newest experiment is created shortly before this moment.
END_TIME = dt.datetime(2026, 11, 29, tzinfo=dt.timezone.utc)
#: Share of the oldest experiments that were imported from the predecessor's JSON file
#: (fractional-second timestamps, no tags, no author).
IMPORTED_SHARE = 0.15
#: The filter of the ``list-filtered`` case.
FILTER_OPERATOR = "reshape_and_cache"
FILTER_DTYPE = "bf16"
TOP_N = 20

JSON_NAME = "kernel_experiments_db.json"
SQLITE_NAME = "experiments.sqlite"
META_NAME = "meta.json"

# --- the vocabulary ------------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class Operator:
    """A kernel that experiments target: its file, name, family and popularity."""

    path: str
    kernel: str
    family: str
    weight: int

    @property
    def sig(self) -> str:
        """The ``operator_sig`` of experiments on this kernel."""
        return f"{self.path}: {self.kernel}"


OPERATORS = (
    Operator("csrc/cache_kernels.cu", "reshape_and_cache_flash", "cache", 7),
    Operator("csrc/cache_kernels.cu", "reshape_and_cache", "cache", 3),
    Operator("csrc/cache_kernels.cu", "copy_blocks_kernel", "cache", 1),
    Operator("csrc/attention/paged_attention_v1.cu", "paged_attention_v1_kernel", "attention", 3),
    Operator(
        "csrc/attention/paged_attention_v2.cu", "paged_attention_v2_reduce_kernel", "attention", 2
    ),
    Operator("csrc/rocm/attention.cu", "paged_attention_ll4mi_QKV_mfma16_kernel", "attention", 5),
    Operator("aiter/csrc/kernels/mla/mla_decode.cu", "mla_decode_fwd_kernel", "attention", 3),
    Operator("csrc/layernorm_kernels.cu", "rms_norm_kernel", "norm", 4),
    Operator("csrc/layernorm_kernels.cu", "fused_add_rms_norm_kernel", "norm", 4),
    Operator("csrc/activation_kernels.cu", "act_and_mul_kernel", "activation", 3),
    Operator("csrc/activation_kernels.cu", "gelu_tanh_and_mul_kernel", "activation", 1),
    Operator("csrc/pos_encoding_kernels.cu", "rotary_embedding_kernel", "rope", 3),
    Operator("csrc/quantization/fp8/common.cu", "scaled_fp8_quant_kernel", "quant", 3),
    Operator(
        "csrc/quantization/fp8/common.cu", "dynamic_per_token_scaled_fp8_quant_kernel", "quant", 3
    ),
    Operator("csrc/quantization/gptq/q_gemm.cu", "gemm_half_q_half_gptq_4bit_kernel", "gemm", 2),
    Operator("csrc/quantization/awq/gemm_kernels.cu", "gemm_forward_4bit_cuda_m16nXk32", "gemm", 1),
    Operator("csrc/rocm/skinny_gemms.cu", "wvSplitK_hf_sml_", "gemm", 4),
    Operator("triton/ops/matmul.py", "matmul_kernel", "gemm", 3),
    Operator("triton/ops/flash_attention.py", "_attn_fwd", "attention", 4),
    Operator("csrc/moe/topk_softmax_kernels.cu", "topkGatingSoftmax", "moe", 3),
    Operator("csrc/moe/moe_align_sum_kernels.cu", "moe_align_block_size_kernel", "moe", 3),
    Operator("triton/ops/fused_moe.py", "fused_moe_kernel", "moe", 4),
    Operator("csrc/custom_all_reduce.cuh", "cross_device_reduce_1stage", "allreduce", 2),
    Operator("csrc/sampler.cu", "apply_repetition_penalties_kernel", "sampling", 1),
    Operator("csrc/mamba/causal_conv1d/causal_conv1d.cu", "causal_conv1d_fwd_kernel", "mamba", 1),
)

DTYPES = (
    ("bf16", 9),
    ("fp16", 6),
    ("fp8", 4),
    ("fp8_e4m3fnuz", 3),
    ("int8", 1),
    ("fp32", 1),
    ("bf16,fp8", 2),
)

#: (env, vendor, peak HBM GB/s)
ENVS = (
    ("MI300X, ROCm 7.0.0, PyTorch 2.8.0", "amd", 5300, 8),
    ("MI300X, ROCm 6.4.1, PyTorch 2.7.1", "amd", 5300, 4),
    ("MI325X, ROCm 7.0.0, PyTorch 2.8.0", "amd", 6000, 4),
    ("MI355X, ROCm 7.0.2, PyTorch 2.9.0", "amd", 8000, 3),
    ("H100 SXM, CUDA 12.8, PyTorch 2.8.0", "nvidia", 3350, 4),
    ("H200, CUDA 12.9, PyTorch 2.9.0", "nvidia", 4800, 2),
    ("A100 80GB, CUDA 12.4, PyTorch 2.6.0", "nvidia", 2000, 1),
)

AUTHORS = (
    *(f"agent-{i}" for i in range(1, 13)),
    "Wei Chen",
    "Priya Raman",
    "Jonas Berg",
    "Ana Souza",
)


@dataclasses.dataclass(frozen=True)
class Technique:
    """One kind of change: its summary, tags, and the sentences that describe it."""

    what: str
    tags: tuple[str, ...]
    approach: str
    worked: str
    failed: str
    insight: str


TECHNIQUES = (
    Technique(
        "Unrolled the inner copy loop by @U",
        ("unroll",),
        "Unrolled the per-thread loop by @U with #pragma unroll and hoisted the stride "
        "computation out of it",
        "the compiler now issues @U independent loads before the first use, hiding HBM "
        "latency behind the address arithmetic",
        "the unrolled body raised VGPR use past the occupancy cliff, so fewer waves were "
        "resident to hide latency",
        "unrolling pays only while the register budget keeps at least 4 waves per SIMD",
    ),
    Technique(
        "Vectorized loads and stores to @V-wide vectors",
        ("vectorize", "memory"),
        "Replaced scalar element accesses with @V-wide vector loads and stores "
        "(reinterpret_cast to vec_t) and handled the tail with a scalar loop",
        "each thread moves 16 bytes per instruction, which halves the number of memory "
        "transactions on the hot path",
        "head_size is not a multiple of @V for several models, and the tail loop dominated "
        "for small token counts",
        "vector width must divide the innermost dimension for every supported model",
    ),
    Technique(
        "Non-temporal stores for the cache writes",
        ("memory", "cache-policy"),
        "Wrote the KV cache with __builtin_nontemporal_store so the stores bypass L2",
        "the written blocks are not read again by this kernel, and keeping them out of L2 "
        "left room for the slot mapping and the key tiles",
        "the attention kernel that runs next reads the same blocks, and evicting them from "
        "L2 slowed it down more than the store gained",
        "cache policy must be judged on the whole decode step, not on one kernel",
    ),
    Technique(
        "Warp-level reduction with shuffles",
        ("reduction", "warp"),
        "Replaced the shared-memory tree reduction with __shfl_xor butterflies over the "
        "wavefront and a single shared-memory pass across warps",
        "it removes @M barriers and all but one round trip through LDS",
        "the kernel is memory bound at these sizes, so the saved barriers did not show",
        "shuffle reductions help only when the reduction is on the critical path",
    ),
    Technique(
        "Block size @B with launch bounds",
        ("launch-config", "occupancy"),
        "Changed the launch to @B threads per block and added __launch_bounds__(@B, 2) so "
        "the compiler keeps register use within budget",
        "more blocks fit per CU and the tail effect on the last wave of blocks shrank",
        "the smaller register budget caused spills to scratch in the epilogue",
        "check scratch usage in the ISA after changing launch bounds",
    ),
    Technique(
        "Fused residual add into RMSNorm",
        ("fusion", "norm"),
        "Fused the residual add into the normalization so the hidden state is read once "
        "and written once instead of twice each",
        "it saves a full read and write of the hidden state per layer",
        "the fused kernel needs two passes over the row for large hidden sizes, which "
        "brought the second read back",
        "fusion saves traffic only when the row fits in registers or LDS",
    ),
    Technique(
        "Hoisted the scale reciprocal out of the loop",
        ("arithmetic", "quant"),
        "Computed 1/scale once per block instead of dividing every element",
        "a multiply is a quarter of the cost of a division on this architecture",
        "the compiler had already hoisted it; the ISA before and after was identical",
        "read the ISA before micro-optimizing arithmetic",
    ),
    Technique(
        "Double-buffered K tiles in LDS",
        ("pipelining", "lds"),
        "Loaded the next K tile into a second LDS buffer while computing on the current one",
        "global-memory latency is now overlapped with the MFMA work",
        "LDS use doubled and only one block fits per CU, which cost more than the overlap",
        "software pipelining needs LDS headroom for at least two resident blocks",
    ),
    Technique(
        "MFMA 32x32x8 tiles instead of 16x16x16",
        ("mfma", "tiling"),
        "Switched the inner product to the 32x32x8 MFMA instruction and re-tiled the accumulators",
        "fewer instructions per FLOP and better operand reuse from registers",
        "the larger tile wastes work when the sequence length is short",
        "pick the MFMA shape per problem size rather than globally",
    ),
    Technique(
        "Split-K with @S splits",
        ("split-k", "gemm"),
        "Split the K dimension @S ways across blocks and reduced the partial sums in a "
        "second small kernel",
        "skinny decode GEMMs now fill every CU instead of a handful",
        "the extra reduction kernel and its launch cost outweighed the gain for M > 64",
        "split-K is a small-M optimization; guard it with a size heuristic",
    ),
    Technique(
        "Packed two bf16 values per 32-bit store",
        ("packing", "memory"),
        "Converted pairs of results with __float22bfloat162_rn and stored them as one 32-bit word",
        "half as many store instructions, and the stores are naturally aligned",
        "the pairing forced a shuffle between lanes that cost more than the saved stores",
        "packing is free only when neighbouring elements live in the same thread",
    ),
    Technique(
        "Cached cos/sin in registers across heads",
        ("rope", "registers"),
        "Loaded the rotary cos/sin values once per token and reused them for every head",
        "the cos/sin cache reads dropped by a factor of num_heads",
        "register pressure grew and the compiler serialized the head loop",
        "reuse across heads needs the head loop inside the thread, not across blocks",
    ),
    Technique(
        "Persistent kernel over tokens",
        ("persistent", "scheduling"),
        "Launched one block per CU that loops over tokens instead of one block per token",
        "launch overhead and the tail of partially filled waves disappeared",
        "load imbalance between long and short sequences left CUs idle at the end",
        "persistent kernels need work stealing when token costs vary",
    ),
    Technique(
        "Prefetched the next block table entry",
        ("prefetch", "memory"),
        "Issued the load of the next block-table entry one iteration ahead",
        "the dependent address computation no longer waits on a global load each step",
        "the prefetch added a branch in the loop and the gain was within noise",
        "pointer-chasing loops benefit from prefetch only with long trip counts",
    ),
    Technique(
        "Removed the bounds check from the hot loop",
        ("control-flow",),
        "Peeled the last iteration so the main loop runs without a bounds check",
        "the loop body is now branch-free and the compiler schedules it tighter",
        "the peeled tail path is taken by most decode shapes, so nothing changed",
        "measure which path the real shapes take before peeling loops",
    ),
    Technique(
        "Autotuned num_warps=@W num_stages=@G",
        ("autotune", "triton"),
        "Added num_warps=@W and num_stages=@G to the autotune configs and re-ran the sweep",
        "the new configuration hides more latency at the common decode sizes",
        "the configuration wins on large batches but loses at batch 1, which dominates",
        "autotune keys must include the batch size bucket",
    ),
    Technique(
        "Used readfirstlane for uniform values",
        ("scalar", "amd"),
        "Wrapped wave-uniform indices in __builtin_amdgcn_readfirstlane so they live in SGPRs",
        "VGPR pressure dropped by 6 and one more wave fits per SIMD",
        "the values were already scalarized by the compiler",
        "check s_ vs v_ instructions in the ISA to see what is uniform already",
    ),
    Technique(
        "Two-pass atomic-free reduction",
        ("reduction", "atomics"),
        "Replaced global atomics with per-block partial results and a second pass",
        "the result is deterministic and contention on hot addresses is gone",
        "the second pass doubled the launches for small problems",
        "atomic-free reductions need a fused second pass to pay off at small sizes",
    ),
)

STALLS_AMD = ("VMEM wait", "LDS wait", "barrier", "SALU dependency", "instruction fetch")
STALLS_NVIDIA = ("long scoreboard", "MIO throttle", "barrier", "math pipe throttle", "not selected")

CPP_LINES = (
    "  const int64_t token_idx = blockIdx.x;",
    "  const int64_t slot_idx = slot_mapping[token_idx];",
    "  if (slot_idx < 0) {",
    "    return;",
    "  }",
    "  const int64_t block_idx = slot_idx / block_size;",
    "  const int64_t block_offset = slot_idx % block_size;",
    "  const int n = num_heads * head_size;",
    "  for (int i = threadIdx.x; i < n; i += blockDim.x) {",
    "#pragma unroll @U",
    "  for (int j = 0; j < @U; ++j) {",
    "    const int64_t src_key_idx = token_idx * key_stride + i;",
    "    const int64_t tgt_key_idx = block_idx * block_stride + block_offset * n + i;",
    "    using vec_t = vec_n_t<scalar_t, @V>;",
    "    const vec_t* src_vec = reinterpret_cast<const vec_t*>(key + src_key_idx);",
    "    vec_t val = src_vec[i / @V];",
    "    key_cache[tgt_key_idx] = key[src_key_idx];",
    "    __builtin_nontemporal_store(val, &dst_vec[i / @V]);",
    "    float acc = 0.f;",
    "    acc += static_cast<float>(x[i]) * static_cast<float>(x[i]);",
    "  acc = warpReduceSum<float>(acc);",
    "    tmp += __shfl_xor(tmp, @M);",
    "  __shared__ float s_variance;",
    "  if (threadIdx.x == 0) {",
    "    s_variance = rsqrtf(acc / hidden_size + epsilon);",
    "  __syncthreads();",
    "    out[i] = static_cast<scalar_t>(val * s_variance) * weight[i];",
    "  dim3 grid(num_tokens);",
    "  dim3 block(std::min(hidden_size, @B));",
    "  const float inv_scale = 1.0f / (*scale);",
    "    out[i] = fp8::scaled_convert<fp8_type>(x[i], inv_scale);",
    "  constexpr int kTileK = @T;",
    "__global__ void __launch_bounds__(@B, 2)",
    "    float2 f = __bfloat1622float2(pair);",
    "    const int lane = threadIdx.x % WARP_SIZE;",
    "  const int warp = threadIdx.x / WARP_SIZE;",
    "  const int head_idx = blockIdx.y;",
    "    const float cos = cos_cache[pos * rot_dim + i];",
    "    const float sin = sin_cache[pos * rot_dim + i];",
    "    const int uniform = __builtin_amdgcn_readfirstlane(block_table[b]);",
    "    acc = __builtin_amdgcn_mfma_f32_32x32x8bf16_1k(a, b, acc, 0, 0, 0);",
    "  }",
    "}",
    "",
)

PY_LINES = (
    "    pid = tl.program_id(axis=0)",
    "    num_pid_m = tl.cdiv(M, BLOCK_SIZE_M)",
    "    num_pid_n = tl.cdiv(N, BLOCK_SIZE_N)",
    "    offs_am = (pid_m * BLOCK_SIZE_M + tl.arange(0, BLOCK_SIZE_M)) % M",
    "    offs_k = tl.arange(0, BLOCK_SIZE_K)",
    "    a_ptrs = a_ptr + (offs_am[:, None] * stride_am + offs_k[None, :] * stride_ak)",
    "    accumulator = tl.zeros((BLOCK_SIZE_M, BLOCK_SIZE_N), dtype=tl.float32)",
    "    for k in range(0, tl.cdiv(K, BLOCK_SIZE_K)):",
    "        a = tl.load(a_ptrs, mask=offs_k[None, :] < K - k * BLOCK_SIZE_K, other=0.0)",
    "        b = tl.load(b_ptrs, mask=offs_k[:, None] < K - k * BLOCK_SIZE_K, other=0.0)",
    "        accumulator = tl.dot(a, b, accumulator)",
    "        a_ptrs += BLOCK_SIZE_K * stride_ak",
    "    c = accumulator.to(tl.bfloat16)",
    "    tl.store(c_ptrs, c, mask=c_mask)",
    "        triton.Config({'BLOCK_SIZE_M': 64, 'BLOCK_SIZE_N': @T}, num_warps=@W),",
    "        triton.Config({'BLOCK_SIZE_M': 128, 'BLOCK_SIZE_N': @T}, num_stages=@G),",
    "    m_i = tl.maximum(m_i, tl.max(qk, 1))",
    "    p = tl.math.exp2(qk - m_i[:, None])",
    "    l_i = l_i * alpha + tl.sum(p, 1)",
    "    acc = acc * alpha[:, None]",
    "    if EVEN_K:",
    "        k = tl.load(k_ptrs)",
    "    else:",
    "",
)

ERRORS_AMD = (
    "RuntimeError: HIP error: an illegal memory access was encountered\n"
    "HIP kernel errors might be asynchronously reported at some other API call.\n"
    "Compile with `TORCH_USE_HIP_DSA` to enable device-side assertions.",
    "Memory access fault by GPU node-2 (Agent handle: 0x55d0c2a1b9e0) on address "
    "0x7f3a1c000000. Reason: Page not present or supervisor privilege.",
    "error: no matching function for call to '__builtin_amdgcn_mfma_f32_32x32x8bf16_1k'\n"
    "note: candidate function not viable: requires 6 arguments, but 5 were provided",
)
ERRORS_NVIDIA = (
    "RuntimeError: CUDA error: an illegal memory access was encountered\n"
    "CUDA kernel errors might be asynchronously reported at some other API call.\n"
    "For debugging consider passing CUDA_LAUNCH_BLOCKING=1.",
    "RuntimeError: CUDA error: misaligned address\n"
    "Compile with `TORCH_USE_CUDA_DSA` to enable device-side assertions.",
    "ptxas error   : Entry function uses too much shared data (0x12000 bytes, 0xc000 max)",
)
ERRORS_WRONG = (
    "AssertionError: Tensor-likes are not close!\n"
    "Mismatched elements: @E / 524288 (@P%)\n"
    "Greatest absolute difference: 0.03125 at index (3, 17) (up to 0.01 allowed)\n"
    "Greatest relative difference: 0.0625 at index (3, 17) (up to 0.016 allowed)",
    "AssertionError: output differs from reference: max abs err 4.1e-01 on "
    "num_tokens=@E (tolerance 1.0e-02)",
)


# --- generating records ----------------------------------------------------------------


@dataclasses.dataclass
class _Campaign:
    """A line of iterations on one kernel, dtype and environment."""

    operator: Operator
    dtype: str
    env: tuple[str, str, int, int]
    members: list[tuple[str, float]] = dataclasses.field(default_factory=list)
    best: tuple[str, float] | None = None
    iteration: int = 0


def _weighted(rng: random.Random, items: Sequence[Any], weights: Sequence[int]) -> Any:
    return rng.choices(items, weights=weights, k=1)[0]


_PLACEHOLDER = re.compile(r"@([A-Z])")


def _fill(template: str, values: dict[str, str]) -> str:
    if "@" not in template:
        return template
    return _PLACEHOLDER.sub(lambda m: values[m.group(1)], template)


def _configs(rng: random.Random, family: str) -> list[str]:
    """Benchmark configurations of a kernel family (4 to 7 of them)."""
    count = rng.randint(4, 7)
    if family in ("cache", "attention"):
        heads = rng.choice((8, 16, 32, 64))
        head_size = rng.choice((64, 128, 256))
        tokens = rng.sample((1, 16, 64, 256, 1024, 2048, 4096, 8192), count)
        return [
            f"num_tokens={t},num_heads={heads},head_size={head_size},block_size=16"
            for t in sorted(tokens)
        ]
    if family in ("gemm", "moe"):
        n, k = rng.choice(((4096, 4096), (14336, 4096), (4096, 14336), (8192, 28672)))
        ms = rng.sample((1, 2, 4, 8, 16, 32, 64, 128, 256), count)
        extra = ",experts=8,topk=2" if family == "moe" else ""
        return [f"M={m},N={n},K={k}{extra}" for m in sorted(ms)]
    hidden = rng.choice((4096, 5120, 7168, 8192))
    tokens = rng.sample((1, 8, 32, 128, 512, 2048, 8192, 16384), count)
    return [f"num_tokens={t},hidden_size={hidden}" for t in sorted(tokens)]


def _diff(rng: random.Random, operator: Operator, values: dict[str, str]) -> str:
    """A unified diff of about 1.5 KB against the operator's file: two hunks."""
    pool = PY_LINES if operator.path.endswith(".py") else CPP_LINES
    path = operator.path

    def window(count: int) -> list[str]:
        first = rng.randrange(len(pool) - count)
        return [_fill(line, values) for line in pool[first : first + count]]

    lines = [
        f"diff --git a/{path} b/{path}",
        f"index {rng.getrandbits(28):07x}..{rng.getrandbits(28):07x} 100644",
        f"--- a/{path}",
        f"+++ b/{path}",
    ]
    start = rng.randint(20, 400)
    signature = "def " if pool is PY_LINES else "__global__ void "
    for _ in range(2):
        before, after = window(3), window(2)
        removed = window(rng.randint(2, 4))
        added = window(len(removed) + rng.randint(1, 4))
        old_count = len(before) + len(removed) + len(after)
        new_count = len(before) + len(added) + len(after)
        lines.append(
            f"@@ -{start},{old_count} +{start},{new_count} @@ {signature}{operator.kernel}("
        )
        lines += [" " + line for line in before]
        lines += ["-" + line for line in removed]
        lines += ["+" + line for line in added]
        lines += [" " + line for line in after]
        start += old_count + rng.randint(10, 80)
    return "\n".join(lines)


def _percent(score: float) -> str:
    return f"{(score - 1.0) * 100:+.2f}%"


def _summary(what: str, result: str, max_chars: int = 80) -> str:
    room = max_chars - len(result) - 3
    if len(what) > room:
        what = what[:room].rstrip(" ,-")
    return f"{what} - {result}"


class _Generator:
    """Produces the experiments one by one, in creation order."""

    def __init__(self, n: int, seed: int, per_month: int, code_commits: Sequence[str]) -> None:
        self.n = n
        self.rng = random.Random(seed)
        self.mean_gap = 30.44 * 86400 / per_month
        self.start = END_TIME.timestamp() - n * self.mean_gap
        self.code_commits = list(code_commits)
        self.active: list[_Campaign] = []
        self.ids: set[str] = set()

    def _campaign(self) -> _Campaign:
        rng = self.rng
        if not self.active or rng.random() < 0.08:
            campaign = _Campaign(
                operator=_weighted(rng, OPERATORS, [o.weight for o in OPERATORS]),
                dtype=_weighted(rng, [d for d, _ in DTYPES], [w for _, w in DTYPES]),
                env=_weighted(rng, ENVS, [e[3] for e in ENVS]),
            )
            self.active.append(campaign)
            if len(self.active) > 40:
                self.active.pop(0)
            return campaign
        return rng.choice(self.active)

    def _id(self, seconds: int) -> str:
        while True:
            candidate = f"{seconds & 0xFFFFFFFF:08x}{self.rng.getrandbits(32):08x}"
            if candidate not in self.ids:
                self.ids.add(candidate)
                return candidate

    def experiments(self) -> Iterator[KernelExperiment]:
        """Every experiment, oldest first."""
        moment = self.start
        for index in range(self.n):
            moment += max(1.0, self.rng.expovariate(1.0 / self.mean_gap))
            yield self._experiment(index, moment)

    def _experiment(self, index: int, moment: float) -> KernelExperiment:
        rng = self.rng
        imported = index < self.n * IMPORTED_SHARE
        seconds = int(moment)
        when = dt.datetime.fromtimestamp(seconds, dt.timezone.utc)
        if imported:
            created_at = when.strftime("%Y-%m-%dT%H:%M:%S") + f".{rng.randrange(10**6):06d}Z"
        else:
            created_at = when.strftime("%Y-%m-%dT%H:%M:%SZ")
        exp_id = self._id(seconds)
        campaign = self._campaign()
        campaign.iteration += 1
        operator, dtype, env = campaign.operator, campaign.dtype, campaign.env
        technique = rng.choice(TECHNIQUES)
        values = {
            "U": str(rng.choice((2, 4, 8, 16))),
            "V": str(rng.choice((2, 4, 8))),
            "B": str(rng.choice((64, 128, 256, 512, 1024))),
            "M": str(rng.choice((1, 2, 4, 8, 16, 32))),
            "T": str(rng.choice((16, 32, 64, 128))),
            "S": str(rng.choice((2, 4, 8))),
            "W": str(rng.choice((2, 4, 8))),
            "G": str(rng.choice((1, 2, 3, 4))),
        }
        what = _fill(technique.what, values)

        # Lineage: build on the best iteration so far, sometimes on the latest, sometimes
        # start afresh; now and then combine two earlier iterations.
        pid = ""
        combines: list[str] = []
        parent_score = 1.0
        members = campaign.members
        roll = rng.random()
        if members and roll < 0.03 and len(members) >= 3:
            picks = rng.sample(members[-10:], 2)
            combines = sorted(p[0] for p in picks)
            pid = picks[0][0]
            parent_score = max(p[1] for p in picks)
            what = f"Combined {picks[0][0][:8]} + {picks[1][0][:8]} with {what.lower()}"
        elif members and roll < 0.75 and campaign.best is not None:
            pid, parent_score = campaign.best
        elif members and roll < 0.92:
            pid, parent_score = members[-1]

        # Outcome.
        roll = rng.random()
        status = "done"
        is_buggy = False
        timed_out = False
        if roll < 0.02:
            status = rng.choice(("new", "running"))
        elif roll < 0.10:
            is_buggy = True
            status = rng.choice(("done", "failed", "failed"))
        elif roll < 0.12:
            status = "timeout"
            timed_out = True

        configs = _configs(rng, operator.family)
        target = parent_score * math.exp(rng.gauss(-0.004, 0.045))
        target = min(max(target, 0.35), 2.9)
        speedups = [round(target * math.exp(rng.gauss(0.0, 0.012)), 4) for _ in configs]
        measured = status == "done" and not is_buggy
        score = (
            round(math.exp(sum(math.log(s) for s in speedups) / len(speedups)), 4)
            if measured
            else 0.0
        )
        if measured:
            members.append((exp_id, score))
            if campaign.best is None or score > campaign.best[1]:
                campaign.best = (exp_id, score)

        if status in ("new", "running"):
            result = "in progress"
        elif is_buggy:
            result = rng.choice(
                ("crash (illegal memory access)", "wrong results", "compile error", "NaN in output")
            )
        elif timed_out:
            result = "benchmark timed out"
        elif combines and score < parent_score:
            result = f"{_percent(score)} (interference)"
        elif score > 1.01:
            result = _percent(score)
        elif score < 0.99:
            result = f"{_percent(score)} (regression)"
        else:
            result = f"no gain ({_percent(score)})"
        summary = _summary(what, result)

        env_name, vendor, peak_bw, _ = env
        gpu = env_name.split(",")[0]
        base_commit = self._base_commit(moment)
        body = self._body(
            index=index,
            campaign=campaign,
            technique=technique,
            values=values,
            configs=configs,
            speedups=speedups,
            score=score,
            parent_score=parent_score,
            status=status,
            is_buggy=is_buggy,
            timed_out=timed_out,
            gpu=gpu,
            vendor=vendor,
            peak_bw=peak_bw,
        )
        tags: list[str] = []
        author = ""
        results: list[dict[str, Any]] = []
        if not imported:
            tags = [operator.family, *technique.tags]
            if rng.random() < 0.3:
                tags.append(
                    rng.choice(
                        ("decode", "prefill", "mi300-tuning", "llama3-70b", "deepseek-v3", "qwen3")
                    )
                )
            tags = list(dict.fromkeys(tags))
            author = rng.choice(AUTHORS)
            if measured and rng.random() < 0.05:
                results = [
                    {
                        "config": config,
                        "baseline": round(base, 3),
                        "candidate": round(base / speedup, 3),
                        "speedup": speedup,
                    }
                    for config, speedup, base in zip(
                        configs, speedups, body.pop("_bases"), strict=True
                    )
                ]
        body.pop("_bases", None)
        return KernelExperiment(
            id=exp_id,
            pid=pid,
            # Scores are drawn around the parent's: speedups over the reference (and
            # what kexp import writes of the predecessor's records).
            measured_against="reference" if pid else "",
            score=score,
            dtype_sig=dtype,
            env=env_name,
            is_buggy=is_buggy,
            change_summary=summary,
            base_commit=base_commit,
            operator_sig=operator.sig,
            status=status,
            created_at=created_at,
            tags=tags,
            author=author,
            combines=combines,
            results=results,
            **body,
        )

    def _base_commit(self, moment: float) -> str:
        if not self.code_commits:
            return f"{self.rng.getrandbits(160):040x}"
        fraction = (moment - self.start) / (END_TIME.timestamp() - self.start)
        position = int(fraction * len(self.code_commits)) - self.rng.randint(0, 2)
        return self.code_commits[min(max(position, 0), len(self.code_commits) - 1)]

    def _body(
        self,
        *,
        index: int,
        campaign: _Campaign,
        technique: Technique,
        values: dict[str, str],
        configs: list[str],
        speedups: list[float],
        score: float,
        parent_score: float,
        status: str,
        is_buggy: bool,
        timed_out: bool,
        gpu: str,
        vendor: str,
        peak_bw: int,
    ) -> dict[str, Any]:
        rng = self.rng
        operator = campaign.operator
        pending = status in ("new", "running")
        approach = _fill(technique.approach, values)
        description = (
            f"**Approach**: {approach}. Applied to `{operator.kernel}` in `{operator.path}` "
            f"for {campaign.dtype} on {gpu}, starting from the best iteration so far "
            f"(score {parent_score:.4f}).\n\n"
        )
        if pending:
            description += "**Result**: pending; the benchmark has not finished yet."
            return {
                "detailed_description": description,
                "raw_result": (
                    f"Iteration {campaign.iteration}: benchmark {status} on {gpu}"
                    if status == "running"
                    else ""
                ),
                "_bases": [],
            }
        worked = score >= 1.0 and not is_buggy and not timed_out
        why = _fill(technique.worked if worked else technique.failed, values)
        if is_buggy:
            outcome = "the change crashed or produced wrong results, so nothing was measured"
        elif timed_out:
            outcome = "the benchmark did not finish within the 600 s limit"
        else:
            outcome = (
                f"geometric-mean speedup {score:.4f}x over the baseline across "
                f"{len(configs)} configurations ({_percent(score)}; the parent was "
                f"{parent_score:.4f})"
            )
        description += (
            f"**Result**: {outcome}.\n\n"
            f"**Why it worked/failed**: {why[0].upper()}{why[1:]}.\n\n"
            f"**Key insight**: {technique.insight[0].upper()}{technique.insight[1:]}."
        )

        bases = [10 ** rng.uniform(0.5, 2.7) for _ in configs]
        if is_buggy or timed_out:
            label = "FAILED" if is_buggy else "TIMEOUT"
            failing = rng.randint(1, len(configs))
            raw = (
                f"Iteration {campaign.iteration} Results - {label}: "
                + (
                    f"correctness check failed on {failing}/{len(configs)} configs"
                    if is_buggy
                    else "benchmark did not finish within 600 s"
                )
                + "\n"
                + "\n".join(
                    f"  {config:<56} baseline {base:9.3f} us"
                    for config, base in zip(configs[:failing], bases, strict=False)
                )
            )
        else:
            label = "SUCCESS" if score > 1.01 else "REGRESSION" if score < 0.99 else "NEUTRAL"
            lines = [
                f"Iteration {campaign.iteration} Results - {label}: geomean speedup "
                f"{score:.4f}x vs baseline ({len(configs)} configs, 20 warmup / 100 timed "
                "iterations)",
                f"  {'config':<56} {'baseline':>12} {'candidate':>12}  speedup",
            ]
            for config, base, speedup in zip(configs, bases, speedups, strict=True):
                lines.append(
                    f"  {config:<56} {base:9.3f} us {base / speedup:9.3f} us  {speedup:.4f}x"
                )
            lines.append(f"Correctness: PASS (max abs err {rng.uniform(0, 8e-3):.1e} vs reference)")
            raw = "\n".join(lines)

        if vendor == "amd":
            stall_a, stall_b = rng.sample(STALLS_AMD, 2)
            vgprs = rng.choice((64, 84, 96, 128, 160, 256))
            profiling = (
                f"rocprofv3 --kernel-trace --stats: {operator.kernel} avg "
                f"{bases[-1] / max(speedups[-1], 0.1):.3f} us over 100 calls\n"
                f"VGPRs: {vgprs} (was {vgprs + rng.choice((-16, -8, 0, 8, 16))}), "
                f"SGPRs: {rng.choice((32, 48, 64, 96))}, "
                f"LDS: {rng.choice((0, 4096, 8192, 16384, 32768))} bytes, scratch: 0 bytes\n"
                f"Occupancy: {rng.randint(2, 8)}/8 waves per SIMD; HBM bandwidth "
                f"{peak_bw * rng.uniform(0.2, 0.85):.0f} GB/s of {peak_bw} GB/s peak\n"
                f"Top stalls: {stall_a} {rng.randint(20, 60)}%, {stall_b} {rng.randint(5, 20)}%"
            )
        else:
            stall = rng.choice(STALLS_NVIDIA)
            profiling = (
                f"ncu --set full: {operator.kernel} duration "
                f"{bases[-1] / max(speedups[-1], 0.1):.3f} us\n"
                f"Registers/thread: {rng.choice((32, 40, 64, 96, 128))}, shared memory: "
                f"{rng.choice((0, 8192, 16384, 49152))} bytes/block, achieved occupancy "
                f"{rng.uniform(20, 95):.1f}%\n"
                f"DRAM throughput {rng.randint(25, 92)}% of peak ({peak_bw} GB/s), L2 hit rate "
                f"{rng.randint(30, 90)}%; top stall: {stall} ({rng.randint(20, 70)}%)"
            )
        error = ""
        if is_buggy:
            pool = (
                ERRORS_WRONG
                if rng.random() < 0.4
                else (ERRORS_AMD if vendor == "amd" else ERRORS_NVIDIA)
            )
            error = _fill(
                rng.choice(pool),
                {"E": str(rng.randint(1, 9000)), "P": f"{rng.uniform(0.01, 2):.2f}"},
            )
            error += (
                f'\n  File "benchmarks/kernels/benchmark_{operator.family}.py", line '
                f"{rng.randint(80, 400)}, in run_iteration\n    torch.cuda.synchronize()"
            )
        elif timed_out:
            error = "TimeoutError: benchmark exceeded the 600 s limit (killed by the harness)"
        return {
            "detailed_description": description,
            "raw_result": raw,
            "profiling_info": profiling,
            "error_message": error,
            "code_change": _diff(rng, operator, values),
            "_bases": bases,
        }


# --- fast, verified serialization -----------------------------------------------------

#: A hex string with a letter other than ``b`` and ``e`` can be no YAML number (``1e5``,
#: ``0b101``), boolean, null or date: its canonical form is plain.
_HEX_PLAIN = re.compile(r"[0-9a-f]*[acdf][0-9a-f]*")
_TIMESTAMP = re.compile(r"[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}(?:\.[0-9]+)?Z")
#: Several words of plain one-line text: no YAML indicator, no ``: `` or `` #``.
_PLAIN_TEXT = re.compile(r"[A-Za-z][A-Za-z0-9,()%+=/_.*-]* [A-Za-z0-9 ,()%+=/_.*-]*[A-Za-z0-9%)]")
_RISKY_LINE = re.compile(r"^(?: {0,3}(?:```|~~~)|##(?: |\r?$))", re.MULTILINE)


class FastSerializer:
    """While active, ``kexp.format.fileformat.serialize`` runs with two faster leaf helpers.

    ``render_field`` renders the values that are unique per experiment (ids, hashes,
    timestamps, summaries, scores) by a fixed rule when their shape leaves YAML no
    choice, and memoises kexp's own rendering of every other value (which repeat: status,
    dtype, env, tags, ...); ``_is_plain_safe`` answers at once for text without ``##`` or
    fence lines. Anything else goes to kexp's own functions. :meth:`reference` serializes
    with kexp's own functions only, to verify the fast output.
    """

    #: The helpers of :mod:`kexp.format.fileformat` that are wrapped.
    PATCHED = ("render_field", "_is_plain_safe")

    def __init__(self) -> None:
        self._originals: dict[str, Any] = {name: getattr(fileformat, name) for name in self.PATCHED}
        self._render: Callable[[str, Any], str] = self._originals["render_field"]
        self._plain_safe: Callable[[str], bool] = self._originals["_is_plain_safe"]
        self._memo: dict[tuple[Any, ...], str] = {}
        self._fast = True

    def __enter__(self) -> FastSerializer:
        wrappers = {"render_field": self.render_field, "_is_plain_safe": self.is_plain_safe}
        for name in self.PATCHED:
            setattr(fileformat, name, wrappers[name])
        return self

    def __exit__(self, *exc: object) -> None:
        for name, original in self._originals.items():
            setattr(fileformat, name, original)

    def render_field(self, name: str, value: Any) -> str:
        """kexp's ``render_field``, faster for unique plain values and repeated ones."""
        if not self._fast:
            return self._render(name, value)
        kind = type(value)
        if kind is str and name in ("id", "pid", "base_commit", "created_at", "change_summary"):
            if name == "created_at":
                if _TIMESTAMP.fullmatch(value):
                    return f"{name}: '{value}'\n"
            elif name == "change_summary":
                if _PLAIN_TEXT.fullmatch(value) and "  " not in value:
                    return f"{name}: {value}\n"
            elif _HEX_PLAIN.fullmatch(value):
                return f"{name}: {value}\n"
        elif kind is float and name == "score" and (value == 0.0 or 1e-4 <= value < 1e15):
            text = repr(value)
            if "e" not in text:
                return f"{name}: {text}\n"
        if kind in (str, float, int, bool):
            key: tuple[Any, ...] = (name, kind, value)
        elif kind is list and all(type(item) is str for item in value):
            key = (name, list, tuple(value))
        else:
            return self._render(name, value)
        rendered = self._memo.get(key)
        if rendered is None:
            rendered = self._memo[key] = self._render(name, value)
        return rendered

    def is_plain_safe(self, text: str) -> bool:
        """kexp's ``_is_plain_safe``, at once for text without risky lines."""
        if self._fast and _RISKY_LINE.search(text) is None:
            return True
        return self._plain_safe(text)

    def reference(self, exp: KernelExperiment) -> str:
        """The file text from kexp's serializer with its own helpers."""
        self._fast = False
        try:
            text: str = fileformat.serialize(exp)
            return text
        finally:
            self._fast = True


# --- writing the data set -------------------------------------------------------------


@dataclasses.dataclass
class Dataset:
    """A generated data set: where its parts are, and what the benchmark checks."""

    folder: Path
    meta: dict[str, Any]

    @property
    def n(self) -> int:
        """Number of experiments."""
        return int(self.meta["n"])

    @property
    def store(self) -> Path:
        """The kexp store root (holds ``experiments/``)."""
        return self.folder / "store"

    @property
    def code_repo(self) -> Path | None:
        """The code repository the experiments' ``base_commit`` point into, if any."""
        path = self.folder / "code"
        return path if path.is_dir() else None

    @property
    def json_path(self) -> Path:
        """The predecessor's JSON database."""
        return self.folder / JSON_NAME

    @property
    def sqlite_path(self) -> Path:
        """The SQLite database."""
        return self.folder / SQLITE_NAME


def dataset_folder(data_dir: Path, n: int, seed: int, git: bool, layout: str = "fanout") -> Path:
    """The cache folder of one data set."""
    suffix = ("" if git else "-nogit") + ("" if layout == "fanout" else f"-{layout}")
    return data_dir / f"n{n}-seed{seed}-v{GENERATOR_VERSION}{suffix}"


def _git_env(extra_env: dict[str, str] | None = None) -> dict[str, str]:
    return {
        **os.environ,
        "GIT_CONFIG_NOSYSTEM": "1",
        "GIT_CONFIG_GLOBAL": os.devnull,
        "GIT_AUTHOR_NAME": "kexp bench",
        "GIT_AUTHOR_EMAIL": "bench@kexp.invalid",
        "GIT_COMMITTER_NAME": "kexp bench",
        "GIT_COMMITTER_EMAIL": "bench@kexp.invalid",
        **(extra_env or {}),
    }


def _git(
    cwd: Path, *args: str, stdin: bytes | None = None, extra_env: dict[str, str] | None = None
) -> str:
    env = _git_env(extra_env)
    if stdin is None:
        result = subprocess.run(
            ["git", *args], cwd=cwd, env=env, check=True, capture_output=True, text=True
        )
        return result.stdout.strip()
    process = subprocess.run(
        ["git", *args], cwd=cwd, env=env, check=True, capture_output=True, input=stdin
    )
    return process.stdout.decode().strip()


def _code_repository(folder: Path, count: int = 48) -> list[str]:
    """A small code repository with ``count`` commits (deterministic hashes), oldest first."""
    folder.mkdir(parents=True)
    _git(folder, "init", "-q", "-b", "main")
    stream: list[str] = []
    for number in range(1, count + 1):
        stamp = int(END_TIME.timestamp()) - (count - number) * 30 * 86400
        content = f"// kernels, revision {number}\n__global__ void k{number}() {{}}\n"
        message = f"kernels: revision {number}\n"
        stream += [
            "commit refs/heads/main",
            f"mark :{number}",
            f"author kexp bench <bench@kexp.invalid> {stamp} +0000",
            f"committer kexp bench <bench@kexp.invalid> {stamp} +0000",
            f"data {len(message)}",
            message,
        ]
        if number > 1:
            stream.append(f"from :{number - 1}")
        stream += ["M 100644 inline kernels.cu", f"data {len(content)}", content]
    _git(folder, "fast-import", "--quiet", stdin="\n".join(stream).encode() + b"\n")
    _git(folder, "reset", "-q", "--hard", "main")
    log = _git(folder, "rev-list", "--reverse", "main")
    return log.split()


class _StoreCommit:
    """Makes the store a git repository whose one commit holds every file, in one pack.

    Files are streamed into ``git fast-import`` while they are written (``git add`` of
    100,000 files takes minutes); the index is then rebuilt from the commit, so the
    working tree is clean, as in a fresh clone.
    """

    def __init__(self, store: Path) -> None:
        self.store = store
        _git(store, "init", "-q", "-b", "main")
        self.errors = (store / ".git" / "bench-fast-import.log").open("w+b")
        self.process = subprocess.Popen(
            ["git", "fast-import", "--quiet", "--done"],
            cwd=store,
            env=_git_env(),
            stdin=subprocess.PIPE,
            stdout=subprocess.DEVNULL,
            stderr=self.errors,
            bufsize=1 << 20,
        )
        self.paths: list[str] = []
        for extra in (".gitignore", "experiments/README.md"):
            if (store / extra).is_file():
                self.add(extra, (store / extra).read_bytes())

    def add(self, path: str, data: bytes) -> None:
        """Add one file (path relative to the store) to the commit."""
        assert self.process.stdin is not None
        self.paths.append(path)
        self.process.stdin.write(b"blob\nmark :%d\ndata %d\n" % (len(self.paths), len(data)))
        self.process.stdin.write(data)
        self.process.stdin.write(b"\n")

    def commit(self, message: str) -> None:
        """Commit every added file (deterministic hash) and rebuild the index."""
        assert self.process.stdin is not None
        stamp = f"{int(END_TIME.timestamp())} +0000"
        encoded = message.encode()
        head = (
            f"commit refs/heads/main\ncommitter kexp bench <bench@kexp.invalid> {stamp}\n"
            f"data {len(encoded)}\n"
        ).encode()
        self.process.stdin.write(head + encoded + b"\n")
        for mark, path in enumerate(self.paths, 1):
            self.process.stdin.write(b"M 100644 :%d %s\n" % (mark, path.encode()))
        self.process.stdin.write(b"\ndone\n")
        self.process.stdin.close()
        if self.process.wait() != 0:
            self.errors.seek(0)
            raise RuntimeError(f"git fast-import failed: {self.errors.read().decode()[-2000:]}")
        self.errors.close()
        (self.store / ".git" / "bench-fast-import.log").unlink()
        _git(self.store, "reset", "-q")


class _Baselines:
    """The predecessor's JSON database and the SQLite table, written record by record
    (memory stays flat at 1,000,000 experiments).

    The JSON file is byte for byte ``json.dumps(db, indent=2, sort_keys=True)``: ids
    come in creation order, which is their sorted order (each experiment is at least a
    second after the one before, and an id starts with its second).
    """

    def __init__(self, folder: Path) -> None:
        self.json = (folder / JSON_NAME).open("w", encoding="utf-8")
        self.json.write("{")
        self.last_id = ""
        self.connection = sqlite3.connect(folder / SQLITE_NAME)
        self.connection.execute("PRAGMA journal_mode = OFF")
        self.connection.execute("PRAGMA synchronous = OFF")
        columns = ", ".join(
            f"{name} REAL"
            if name == "score"
            else f"{name} INTEGER"
            if name == "is_buggy"
            else f"{name} TEXT PRIMARY KEY"
            if name == "id"
            else f"{name} TEXT"
            for name in LEGACY_FIELDS
        )
        self.connection.execute(f"CREATE TABLE experiments ({columns})")
        self.insert = f"INSERT INTO experiments VALUES ({', '.join('?' for _ in LEGACY_FIELDS)})"
        self.pending: list[list[Any]] = []

    def add(self, record: dict[str, Any]) -> None:
        """Add one record (the predecessor's keys)."""
        key = record["id"]
        if key <= self.last_id:
            raise RuntimeError(f"ids out of order at {key} (a bug in bench/generate.py)")
        entry = json.dumps({key: record}, indent=2, sort_keys=True)
        self.json.write(("\n" if not self.last_id else ",\n") + entry[2:-2])
        self.last_id = key
        self.pending.append([record[name] for name in LEGACY_FIELDS])
        if len(self.pending) >= 10_000:
            self._flush()

    def _flush(self) -> None:
        self.connection.executemany(self.insert, self.pending)
        self.pending.clear()

    def close(self) -> None:
        """Finish both files."""
        self.json.write("\n}" if self.last_id else "}")
        self.json.close()
        self._flush()
        self.connection.execute("CREATE INDEX experiments_score ON experiments (score DESC)")
        self.connection.commit()
        self.connection.close()


#: What the answers of a data set are computed from, per experiment: id, score, buggy,
#: status, operator, dtype, pid, combines.
Summary = tuple[str, float, bool, str, str, str, str, list[str]]


def _expected(experiments: list[Summary]) -> dict[str, Any]:
    """What correct answers look like: top scores (by score, as the predecessor's file
    and SQLite rank), ``kexp top``'s (the steps that improved first: every child is
    measured against the reference and judged over its parent; a merge below the best it
    combines is an interference), filter count."""
    measured = {
        exp_id: score
        for exp_id, score, buggy, status, *_ in experiments
        if not buggy and status not in ("new", "running") and score > 0
    }

    def improved(score: float, pid: str, combines: list[str]) -> bool:
        known = [measured[c] for c in combines if c in measured]
        if known and score < max(known):
            return False  # an interference
        return (score / measured[pid] if pid in measured else score) > 1.01

    candidates = [
        (score, exp_id, pid, combines)
        for exp_id, score, buggy, status, _, _, pid, combines in experiments
        if not buggy and status not in ("new", "running")
    ]
    candidates.sort(key=lambda item: -item[0])
    top_scores = [f"{score:.4f}" for score, *_ in candidates[:TOP_N]]
    ranked = [item for item in candidates if item[0] > 0]  # kexp top leaves out failed runs
    ranked.sort(key=lambda item: (improved(item[0], item[2], item[3]), item[0]), reverse=True)
    matching = sum(
        1
        for _, _, _, _, operator, dtype, _, _ in experiments
        if FILTER_OPERATOR in operator.lower() and FILTER_DTYPE in dtype.lower()
    )
    return {
        "top_scores": top_scores,
        "kexp_top_scores": [f"{score:.4f}" for score, *_ in ranked[:TOP_N]],
        "filter_count": matching,
    }


def generate(
    folder: Path,
    n: int,
    seed: int = DEFAULT_SEED,
    *,
    per_month: int = DEFAULT_PER_MONTH,
    git: bool = True,
    baselines: bool = True,
    layout: str = "fanout",
    verify_every: int = 50,
    log: Callable[[str], None] = print,
) -> Dataset:
    """Generate a data set into ``folder`` (which must not exist) and return it;
    ``baselines=False`` leaves out the predecessor's JSON file and the SQLite table."""
    started = time.perf_counter()
    folder.mkdir(parents=True)
    timings: dict[str, float] = {}
    code_commits = _code_repository(folder / "code") if git else []
    store = folder / "store"
    init_store(store)
    experiments_dir = store / "experiments"
    importer = _StoreCommit(store) if git else None
    written = _Baselines(folder) if baselines else None
    summary: list[Summary] = []
    made: set[Path] = set()
    total_bytes = 0
    verified = 0
    mark = time.perf_counter()
    with FastSerializer() as fast:
        generator = _Generator(n, seed, per_month, code_commits)
        for index, exp in enumerate(generator.experiments()):
            text = fileformat.serialize(exp)
            if index < 200 or (verify_every > 0 and index % verify_every == 0):
                reference = fast.reference(exp)
                if text != reference:
                    raise RuntimeError(
                        f"fast serialization of {exp.id} differs from kexp's serializer "
                        "(a bug in bench/generate.py: FastSerializer)"
                    )
                verified += 1
            relative = "/".join(folder_parts(exp.id, exp.created_at, exp.created_at))
            if layout == "month":  # an earlier kexp's layout, to compare with
                relative = relative.rsplit("/", 1)[0]
            shard = experiments_dir / relative
            if shard not in made:
                shard.mkdir(parents=True, exist_ok=True)
                made.add(shard)
            data = text.encode("utf-8")
            name = f"{exp.id}-{slugify(exp.change_summary)}.md"
            (shard / name).write_bytes(data)
            if importer is not None:
                importer.add(f"experiments/{relative}/{name}", data)
            total_bytes += len(data)
            if written is not None:
                written.add(exp.to_legacy_dict())
            summary.append(
                (
                    exp.id,
                    float(exp.score),
                    exp.is_buggy,
                    exp.status,
                    exp.operator_sig,
                    exp.dtype_sig,
                    exp.pid,
                    list(exp.combines),
                )
            )
            if (index + 1) % 20000 == 0:
                log(f"  {index + 1:,} files written ({time.perf_counter() - mark:.1f} s)")
    timings["files_s"] = time.perf_counter() - mark

    if written is not None:
        mark = time.perf_counter()
        written.close()
        timings["baselines_s"] = time.perf_counter() - mark
    if importer is not None:
        mark = time.perf_counter()
        importer.commit(f"{n} experiments (kexp bench, seed {seed})")
        timings["git_s"] = time.perf_counter() - mark

    show = next(
        (
            exp_id
            for exp_id, _, buggy, status, *_ in summary[len(summary) // 2 :]
            if not buggy and status == "done"
        ),
        summary[0][0],
    )
    prefix = show[:8]
    if sum(1 for item in summary if item[0].startswith(prefix)) != 1:
        raise RuntimeError(f"id prefix {prefix} of the show case is not unique")
    timings["total_s"] = time.perf_counter() - started
    meta: dict[str, Any] = {
        "n": n,
        "seed": seed,
        "generator_version": GENERATOR_VERSION,
        "per_month": per_month,
        "git": git,
        "show_id": show,
        "show_prefix": prefix,
        "filter_operator": FILTER_OPERATOR,
        "filter_dtype": FILTER_DTYPE,
        **_expected(summary),
        "store_files": n,
        "store_bytes": total_bytes,
        "mean_file_bytes": round(total_bytes / max(n, 1)),
        "baselines": baselines,
        "layout": layout,
        "json_bytes": (folder / JSON_NAME).stat().st_size if baselines else 0,
        "sqlite_bytes": (folder / SQLITE_NAME).stat().st_size if baselines else 0,
        "shards": len(made),
        "largest_shard": max((len(os.listdir(path)) for path in made), default=0),
        "verified_files": verified,
        "timings": {key: round(value, 2) for key, value in timings.items()},
        "generated_at": dt.datetime.now(dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
    }
    (folder / META_NAME).write_text(json.dumps(meta, indent=2) + "\n", encoding="utf-8")
    return Dataset(folder, meta)


def ensure_dataset(
    n: int,
    data_dir: Path = DEFAULT_DATA_DIR,
    seed: int = DEFAULT_SEED,
    *,
    git: bool = True,
    per_month: int = DEFAULT_PER_MONTH,
    baselines: bool = True,
    layout: str = "fanout",
    verify_every: int = 50,
    force: bool = False,
    log: Callable[[str], None] = print,
) -> Dataset:
    """The data set for ``n`` experiments: reused from ``data_dir`` or generated there."""
    folder = dataset_folder(data_dir, n, seed, git, layout)
    meta_path = folder / META_NAME
    if meta_path.is_file() and not force:
        meta = json.loads(meta_path.read_text(encoding="utf-8"))
        if meta.get("per_month") == per_month and meta.get("baselines", True) >= baselines:
            return Dataset(folder, meta)
    if folder.exists():
        shutil.rmtree(folder)
    temporary = folder.with_name(f"{folder.name}.partial-{os.getpid()}")
    if temporary.exists():
        shutil.rmtree(temporary)
    log(f"generating {n:,} experiments into {folder} ...")
    generate(
        temporary,
        n,
        seed,
        per_month=per_month,
        git=git,
        baselines=baselines,
        layout=layout,
        verify_every=verify_every,
        log=log,
    )
    temporary.rename(folder)
    meta = json.loads(meta_path.read_text(encoding="utf-8"))
    timings = meta["timings"]
    log(
        f"  done in {timings['total_s']:.1f} s: {n:,} files of {meta['mean_file_bytes']:,} B "
        f"on average in {meta['shards']} shards; JSON {meta['json_bytes'] / 1e6:.0f} MB, "
        f"SQLite {meta['sqlite_bytes'] / 1e6:.0f} MB"
    )
    return Dataset(folder, meta)


def parse_sizes(text: str) -> list[int]:
    """``"1000,10k,1e5"`` → ``[1000, 10000, 100000]``."""
    sizes: list[int] = []
    for part in text.split(","):
        part = part.strip().lower().replace("_", "")
        if not part:
            continue
        factor = 1
        if part.endswith("k"):
            part, factor = part[:-1], 1000
        sizes.append(int(float(part) * factor))
    if not sizes or any(size < 1 for size in sizes):
        raise argparse.ArgumentTypeError(f"bad sizes {text!r}: use e.g. 1000,10000,100000")
    return sizes


def add_data_options(parser: argparse.ArgumentParser) -> None:
    """The options shared by ``generate.py`` and ``run.py``."""
    parser.add_argument(
        "--sizes",
        type=parse_sizes,
        default=[1000],
        help="comma-separated N (default 1000), e.g. 1000,10000,100000 or 10k",
    )
    parser.add_argument(
        "--data-dir",
        type=Path,
        default=DEFAULT_DATA_DIR,
        help="where generated data sets are kept (default bench/.data)",
    )
    parser.add_argument("--seed", type=int, default=DEFAULT_SEED, help="random seed")
    parser.add_argument(
        "--per-month",
        type=int,
        default=DEFAULT_PER_MONTH,
        help="experiments per month on average (sets the shard sizes)",
    )
    parser.add_argument(
        "--no-baselines",
        dest="baselines",
        action="store_false",
        help="leave out the predecessor's JSON file and the SQLite table "
        "(their cases are then not measured): at 1,000,000 they take 8 GB "
        "of disk and the predecessor's load 8 GB of memory",
    )
    parser.add_argument(
        "--layout",
        choices=("fanout", "month"),
        default="fanout",
        help="fanout: kexp's experiments/YYYY/MM/xx/ (default); month: an "
        "earlier kexp's experiments/YYYY/MM/, to compare the two",
    )
    parser.add_argument(
        "--no-git", dest="git", action="store_false", help="do not make the store a git repository"
    )
    parser.add_argument(
        "--verify-every",
        type=int,
        default=50,
        help="compare every K-th file with kexp's plain serializer (0: only the first 200)",
    )
    parser.add_argument(
        "--regenerate", action="store_true", help="generate again even if a cached data set exists"
    )


def main(argv: Sequence[str] | None = None) -> int:
    """Command line: generate (or reuse) the data sets and print where they are."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    add_data_options(parser)
    args = parser.parse_args(argv)
    for n in args.sizes:
        dataset = ensure_dataset(
            n,
            args.data_dir,
            args.seed,
            git=args.git,
            per_month=args.per_month,
            baselines=args.baselines,
            layout=args.layout,
            verify_every=args.verify_every,
            force=args.regenerate,
        )
        print(f"N={n:,}: {dataset.folder}")
    return 0


def synthetic_experiments(
    n: int, seed: int = DEFAULT_SEED, per_month: int = DEFAULT_PER_MONTH
) -> Iterator[KernelExperiment]:
    """The first ``n`` experiments of the benchmark's data (no code repository: their
    ``base_commit`` is a made-up hash), oldest first: background for other fixtures."""
    return _Generator(n, seed, per_month, []).experiments()


if __name__ == "__main__":
    sys.exit(main())
