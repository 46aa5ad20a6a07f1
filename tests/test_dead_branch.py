"""A branch that never beats its fork point is a dead end, each step of it.

The trial: B1 forked from A3 (cumulative 1.9062x) and regressed (0.938: 1.788x); B2
recovered part of it (1.0218 over B1: 1.827x), still below A3. ``kexp tree`` marked
neither a dead end, ``kexp context`` listed B2 under "Related successes" and ``kexp
review`` ranked it an improvement like any other.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from conftest import git, run_kexp

KERNEL = ("--operator", "kernels/gemm.cu: gemm_bf16", "--dtype", "bf16", "--env", "H100")


def add(repo: Path, summary: str, score: str, *more: str) -> str:
    done = run_kexp(
        "add", "--json", "--summary", summary, *KERNEL, "--score", score, *more, cwd=repo
    )
    assert done.returncode == 0, done.stderr
    return str(json.loads(done.stdout)["id"])


def walk(nodes: list[dict[str, Any]]) -> Iterator[dict[str, Any]]:
    for node in nodes:
        yield node
        yield from walk(node["children"])


def section(packet: str, title: str) -> str:
    found = re.search(rf"^## {title}.*?(?=^## |\Z)", packet, re.M | re.S)
    return found[0] if found else ""


def test_a_branch_below_its_fork_point_is_a_dead_end_in_tree_context_and_review(
    repo: Path,
) -> None:
    a1 = add(repo, "Tile 64x64 - +43%", "1.43", "--measured-against", "reference")
    a3 = add(repo, "Vectorize loads float4 - +33%", "1.333", "--pid", a1)
    a5 = add(repo, "Tensor cores mma - +80%", "1.8", "--pid", a3)
    git(repo, "add", "experiments")
    git(repo, "commit", "-qm", "the main line")
    git(repo, "switch", "-qc", "agent/b")
    b1 = add(repo, "cp.async 2-stage pipeline - -6.3%", "0.938", "--pid", a3)
    b2 = add(repo, "cp.async 3-stage pipeline - +2.1% over 2-stage", "1.0218", "--pid", b1)
    # A branch that does get above its fork point is none.
    c1 = add(repo, "Swizzle smem - -2%", "0.98", "--pid", a3)
    c2 = add(repo, "Swizzle and pad smem - +5% over swizzle", "1.05", "--pid", c1)
    git(repo, "add", "experiments")
    git(repo, "commit", "-qm", "the cp.async branch")

    done = run_kexp("tree", "--operator", "gemm", "--json", cwd=repo, process=True)
    assert done.returncode == 0, done.stderr
    dead = {n["id"]: n["dead_end"] for n in walk(json.loads(done.stdout))}
    assert dead == {a1: False, a3: False, a5: False, b1: True, b2: True, c1: False, c2: False}
    text = run_kexp("tree", "--operator", "gemm", cwd=repo, process=True).stdout
    (line,) = [line for line in text.splitlines() if "cp.async 3-stage" in line]
    assert line.rstrip().endswith("[dead end]"), text

    done = run_kexp("context", *KERNEL, "--text", "cp.async pipeline", cwd=repo, process=True)
    assert done.returncode == 0, done.stderr
    packet = done.stdout
    assert b2[:10] not in section(packet, "Related successes"), packet
    assert c2[:10] in section(packet, "Related successes"), packet
    assert re.search(
        rf"^- cp\.async 3-stage pipeline — improvement ×1, a dead end .*{b2[:10]}",
        section(packet, "Do not repeat"),
        re.M,
    ), packet

    done = run_kexp("review", "main", "agent/b", "--format", "json", cwd=repo, process=True)
    assert done.returncode == 0, done.stderr
    added = {e["id"]: e for e in json.loads(done.stdout)["added"]}
    assert {i: e["dead_end"] for i, e in added.items()} == {
        b1: True, b2: True, c1: False, c2: False,
    }  # fmt: skip
    assert added[b2]["outcome"] == "improvement"  # its step: the dead end is its branch
    markdown = run_kexp("review", "main", "agent/b", cwd=repo, process=True).stdout
    (row,) = [row for row in markdown.splitlines() if b2[:12] in row and "cp.async 3" in row]
    assert row.rstrip(" |").endswith(", dead end"), row
