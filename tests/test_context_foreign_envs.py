"""What ``kexp context`` (the MCP ``consult``) spends its budget on (trial D, finding 9):
asked for softmax on an H100, its "Not tried yet ... on this operator" listed every env
the store holds, MI300X and A100 ones recorded for other operators, as "never tried":
nothing an agent on one GPU can act on. And each suspect entry said the near-zero time
of every configuration and side again, cut off mid-way. Now, with an env given, only
the envs it matches are listed; the near-zero times are said once, compactly."""

from __future__ import annotations

import re
import warnings
from pathlib import Path

from kexp import Store
from kexp.measure.record import record_iteration
from tests.conftest import run_kexp

SOFTMAX = "kernels/softmax.py: softmax"


def recorded(store: Store, operator: str, env: str, summary: str, base: float) -> None:
    """An experiment of four configurations timed around ``base`` us (a third faster)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # near-zero times: suspect, as meant
        record_iteration(
            store,
            baseline={f"N{i}": [base * (1 + i), base * (1 + i) * 1.01] * 3 for i in range(4)},
            candidate={
                f"N{i}": [base * (1 + i) * 0.67, base * (1 + i) * 0.68] * 3 for i in range(4)
            },
            unit="us",
            change_summary=summary,
            operator_sig=operator,
            dtype_sig="fp16",
            env=env,
            measured_against="reference",
        )


def test_not_tried_lists_only_the_envs_the_one_given_matches(repo: Path) -> None:
    store = Store(repo)
    recorded(store, "kernels/gemm.cu: gemm", "MI300X, ROCm 7.0.0", "Tile 256 - +50%", 40.0)
    recorded(store, "kernels/norm.cu: rms", "A100-SXM4-80GB, CUDA 12.4", "Fuse - +50%", 40.0)
    recorded(store, "kernels/attn.cu: attn", "H100 SXM5 80GB, CUDA 12.4", "Split - +50%", 40.0)
    recorded(store, SOFTMAX, "H100 PCIe, CUDA 12.4", "Port to Triton - +50%", 40.0)
    text = run_kexp("context", "--operator", "softmax", "--env", "H100", cwd=repo).stdout
    not_tried = text.split("## Not tried yet", 1)[1].split("\n## ", 1)[0]
    assert "- env H100 SXM5 80GB, CUDA 12.4: never tried" in not_tried, not_tried
    assert "MI300X" not in not_tried and "A100" not in not_tried, not_tried
    anywhere = run_kexp("context", "--operator", "softmax", cwd=repo).stdout
    assert "- env MI300X, ROCm 7.0.0: never tried" in anywhere  # no env given: every one


def test_a_suspect_entry_says_its_near_zero_times_once(repo: Path) -> None:
    store = Store(repo)
    recorded(store, SOFTMAX, "H100", "Two rows per program - +50%", 0.02)  # ms read as us
    text = run_kexp("context", "--operator", "softmax", "--env", "H100", cwd=repo).stdout
    (said,) = [line for line in text.splitlines() if line.startswith("  suspect:")]
    assert said.count("near zero") == 1 and "…" not in said, said
    times = r"N0 [\d.]+/[\d.]+, N1 [\d.]+/[\d.]+, N2 [\d.]+/[\d.]+ us and 1 more"
    assert re.search(
        rf"suspect: times near zero \(below 0.5 us; baseline/candidate\): {times}$", said
    )


def test_another_kernels_dtype_and_another_machines_steps(repo: Path) -> None:
    """Trial L, R06: a gemm bf16 packet on an H100 advised "dtype fp16: never tried" only
    because a softmax kernel is fp16, and listed the MI300X gemm steps as related
    successes with no word that they are another machine's."""
    gemm = "kernels/gemm.cu: gemm_bf16"
    for operator, dtype, env in (
        (gemm, "bf16", "H100 SXM"),
        (gemm, "bf16", "MI300X"),
        ("kernels/softmax.cu: softmax_fp16", "fp16", "H100 SXM"),
    ):
        done = run_kexp(
            "add", "--summary", "Tile - +43%", "--score", "1.43", "--measured-against",
            "reference", "--operator", operator, "--dtype", dtype, "--env", env,
            "--status", "done", cwd=repo,
        )  # fmt: skip
        assert done.returncode == 0, done.stderr
    text = run_kexp("context", "--operator", "gemm", "--dtype", "bf16", "--env", "H100",
                    cwd=repo).stdout  # fmt: skip
    assert "fp16" not in text, text
    successes = text.split("## Related successes\n", 1)[1].split("\n\n", 1)[0]
    assert successes.rstrip().endswith("Tile - +43% (another env: MI300X)"), successes
    anywhere = run_kexp("context", "--operator", "gemm", cwd=repo).stdout
    assert "- dtype fp16: never tried" in anywhere  # no dtype asked: the store's
