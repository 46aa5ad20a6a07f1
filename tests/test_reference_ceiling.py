"""A campaign timed against the original code: the plausibility ceiling judges each step.

The trial: every step was measured against the reference (``measured_against:
reference`` with a pid: 1.43x, 1.90x, 3.42x, 3.63x over the original; steps of 1.43,
1.33, 1.80 and 1.06 over their parents). The 3x ceiling was applied to the score over
the reference, so every step past 3x was suspect and ``kexp context``'s current best
stayed at 1.90x while the kernel was 3.63x faster.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

from conftest import run_kexp

KERNEL = ("--operator", "kernels/gemm.cu: gemm_bf16", "--dtype", "bf16", "--env", "H100")


def add(repo: Path, summary: str, score: str, *more: str) -> str:
    done = run_kexp(
        "add", "--json", "--summary", summary, *KERNEL, "--score", score,
        "--measured-against", "reference", *more, cwd=repo,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    return str(json.loads(done.stdout)["id"])


def section(packet: str, title: str) -> str:
    found = re.search(rf"^## {title}.*?(?=^## |\Z)", packet, re.M | re.S)
    return found[0] if found else ""


def test_steps_over_the_reference_past_the_ceiling_are_judged_by_their_step(repo: Path) -> None:
    r1 = add(repo, "Tile 64 - 1.43x over original", "1.43")
    r2 = add(repo, "Vectorize - 1.90x over original", "1.90", "--pid", r1)
    r3 = add(repo, "Tensor cores - 3.42x over original", "3.42", "--pid", r2)
    r4 = add(repo, "Swizzle - 3.63x over original", "3.63", "--pid", r3)

    packet = run_kexp("context", *KERNEL, cwd=repo, process=True).stdout
    assert r4[:10] in section(packet, "Current best"), packet
    assert "suspect" not in packet, packet
    done = run_kexp("top", "--operator", "gemm", "--json", cwd=repo, process=True)
    ranked = json.loads(done.stdout)
    assert [e["id"] for e in ranked] == [r4, r3, r2, r1]
    assert not any(e.get("suspect") for e in ranked), ranked
    done = run_kexp("validate", cwd=repo, process=True)
    assert done.returncode == 0 and "suspect" not in done.stdout + done.stderr, done.stdout

    # A step too good to be true over its parent is still suspect, said as a step.
    jump = add(repo, "Skip the k-loop - 12x over original", "12.0", "--pid", r4)
    packet = run_kexp("context", *KERNEL, cwd=repo, process=True).stdout
    assert r4[:10] in section(packet, "Current best"), packet
    suspect = section(packet, "Higher, but suspect")
    assert jump[:10] in suspect and "step 3.306x over its parent" in suspect, packet
    # A root over the reference past the ceiling: its score is its step.
    root = add(repo, "Rewrite - 3.5x over original", "3.5")
    done = run_kexp("show", root, "--json", cwd=repo, process=True)
    assert any("score 3.5x" in r for r in json.loads(done.stdout)["suspect"]), done.stdout
