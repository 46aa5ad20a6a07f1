"""A step retired after it was measured: ``status: failed`` takes it, and what is built on
it, out of the ranking and the current best; its numbers are kept.

The trial: a human found that the current best tip breaks K % 4 != 0 shapes and marked
it ``kexp update ID --set status=failed --reason "abandoned: ..."``; it stayed ranked #1,
an ``improvement``, and the current best of ``kexp context`` (the README says failed runs
are left out of top).
"""

from __future__ import annotations

import json
import re
from pathlib import Path

from conftest import run_kexp
from test_dead_branch import KERNEL, add


def assert_only_to_port(packet: str, step: str, retired: str) -> None:
    """``step``, built on the ``retired`` one, is no plain success in a context packet:
    where it is listed, the next line says it is one to port (trial S, finding 09)."""
    lines = packet.partition("## Related successes")[2].splitlines()
    for at, line in enumerate(lines):
        if step[:10] in line:
            assert lines[at + 1].startswith(f"  built on retired {retired[:10]}"), packet


def test_a_step_marked_failed_leaves_the_ranking_and_the_current_best(repo: Path) -> None:
    a1 = add(repo, "Tile 64x64 - +43%", "1.43", "--measured-against", "reference")
    a2 = add(repo, "Tensor cores - +80%", "1.8", "--pid", a1)
    a3 = add(repo, "Unroll k-loop 4 - +5.9%", "1.059", "--pid", a2)
    a4 = add(repo, "Unroll k-loop 8 - +2%", "1.02", "--pid", a3)  # built on it

    done = run_kexp(
        "update", a3, "--set", "status=failed", "--reason", "abandoned: breaks K%4!=0",
        cwd=repo, process=True,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr

    done = run_kexp("top", "--operator", "gemm", "--json", cwd=repo, process=True)
    ranked = {e["id"]: e for e in json.loads(done.stdout)}
    assert list(ranked)[:2] == [a2, a1] and a3 not in ranked, list(ranked)
    assert a4 not in ranked or ranked[a4]["cumulative_score"] is None  # built on it: unknown
    packet = run_kexp("context", *KERNEL, cwd=repo, process=True).stdout
    (best,) = re.findall(r"^## Current best\n- (\w+) ", packet, re.M)
    assert a2.startswith(best), packet
    shown = json.loads(run_kexp("show", a3, "--json", cwd=repo, process=True).stdout)
    assert (shown["score"], shown["outcome"], shown["status"]) == (1.059, "failed", "failed")
    assert "1.0590" in run_kexp("show", a3, cwd=repo, process=True).stdout  # kept, shown
    child = json.loads(run_kexp("show", a4, "--json", cwd=repo, process=True).stdout)
    assert child["cumulative_score"] is None and a3[:10] in child["cumulative_reason"], child
    # Asked for, it is there, as every failed run is.
    done = run_kexp("list", "--operator", "gemm", "--status", "failed", "--json", cwd=repo)
    assert [e["id"] for e in json.loads(done.stdout)] == [a3], done.stdout


def test_the_steps_built_on_a_retired_step_leave_with_it_and_the_update_names_them(
    repo: Path,
) -> None:
    """Trial M: a child recorded before its parent was retired stayed in ``kexp top`` as
    an improvement (cumulative '-') and among context's related successes, unnamed."""
    root = add(repo, "Tile 64x64 - +43%", "1.43")
    s1 = add(repo, "Tensor cores - +20%", "1.2", "--pid", root, "--measured-against", "parent")
    s2 = add(repo, "Unroll 4 - +10%", "1.1", "--pid", s1, "--measured-against", "parent")
    s3 = add(repo, "Swizzle - +50%", "1.5", "--pid", s2, "--measured-against", "parent")

    done = run_kexp(
        "update", s2, "--set", "status=failed", "--reason", "wrong results found later",
        cwd=repo, process=True,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert f"built on it leave kexp top and every current best with it: {s3[:10]}" in (
        done.stderr
    ), done.stderr

    done = run_kexp("top", "--json", cwd=repo, process=True)
    assert [e["id"] for e in json.loads(done.stdout)] == [s1, root], done.stdout
    packet = run_kexp("context", "--operator", "gemm", cwd=repo, process=True).stdout
    assert_only_to_port(packet, s3, s2)
    # Asked for by outcome, as every step is.
    done = run_kexp("top", "--outcome", "improvement", "--json", cwd=repo, process=True)
    assert s3 in [e["id"] for e in json.loads(done.stdout)], done.stdout


def test_a_step_measured_against_the_reference_on_a_retired_step_leaves_with_it(
    repo: Path,
) -> None:
    """Trial M: a child made on a step later retired but measured against the reference
    stayed ranked #1 in ``kexp top``, the current best of ``context`` and ``stats``, its
    path to the best through the retired step, and the update named none of it. Its
    code holds the retired change, however it was measured: it leaves with it, as a
    step measured over its parent does, and the update names it; put back, it returns."""
    root = add(repo, "Tile 64x64 - +43%", "1.43")
    s1 = add(repo, "Tensor cores - +20%", "1.2", "--pid", root, "--measured-against", "parent")
    s2 = add(repo, "Unroll 4 - +10%", "1.1", "--pid", s1, "--measured-against", "parent")
    s3 = add(repo, "Swizzle - +90%", "1.9", "--pid", s2, "--measured-against", "reference")
    s4 = add(repo, "Vectorize - +5%", "1.05", "--pid", s3, "--measured-against", "parent")

    done = run_kexp(
        "update", s2, "--set", "status=failed", "--reason", "wrong results found later",
        cwd=repo, process=True,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    leaving = done.stderr.partition("leave kexp top and every current best with it: ")[2]
    assert sorted(leaving.strip().split(", ")) == sorted([s3[:10], s4[:10]]), done.stderr

    done = run_kexp("top", "--json", cwd=repo, process=True)
    assert [e["id"] for e in json.loads(done.stdout)] == [s1, root], done.stdout
    packet = run_kexp("context", *KERNEL, cwd=repo, process=True).stdout
    (best,) = re.findall(r"^## Current best\n- (\w+) ", packet, re.M)
    assert s1.startswith(best), packet
    assert_only_to_port(packet, s3, s2)
    stats = json.loads(run_kexp("stats", "--json", cwd=repo, process=True).stdout)
    assert [b["id"] for b in stats["best"]] == [s1], stats["best"]
    shown = json.loads(run_kexp("show", s3, "--json", cwd=repo, process=True).stdout)
    assert shown["score"] == 1.9 and shown["cumulative_score"] is None, shown
    assert s2[:10] in shown["cumulative_reason"], shown
    # Put back, the step and what is built on it rank again.
    done = run_kexp("update", s2, "--set", "status=done", "--reason", "a false alarm",
                    cwd=repo, process=True)  # fmt: skip
    assert done.returncode == 0, done.stderr
    done = run_kexp("top", "--json", cwd=repo, process=True)
    ranked = [e["id"] for e in json.loads(done.stdout)]
    assert ranked[0] == s4 and s3 in ranked, done.stdout
