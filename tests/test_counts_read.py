"""Counts as people read them: one experiment, one operator, one measurement are said
in the singular (trial 18: a campaign's first report said "on 1 operators", its first
context packet "over 1 measurements")."""

from __future__ import annotations

import json
import re
from pathlib import Path

from conftest import run_kexp

COMMON = ("--operator", "kernels/softmax.py: softmax_kernel", "--dtype", "fp32", "--env", "cpu")


def test_a_first_iteration_is_counted_in_the_singular(repo: Path, tmp_path: Path) -> None:
    """An agent's first iteration, a regression on one of two configurations: the
    report's overview and the context packet count one of each in the singular; two
    configurations measured once each are still counted so."""
    base, cand = tmp_path / "base.json", tmp_path / "cand.json"
    base.write_text(json.dumps({"r64": [10.0, 10.1, 9.9], "r128": [20.0, 20.2, 19.8]}))
    cand.write_text(json.dumps({"r64": [9.0, 9.1, 8.9], "r128": [22.0, 22.2, 21.8]}))
    added = run_kexp(
        "add", "--summary", "Vectorize row loads - faster on r64 only", *COMMON,
        "--baseline", str(base), "--candidate", str(cand), cwd=repo,
    )  # fmt: skip
    assert added.returncode == 0, added.stderr
    packet = run_kexp("context", "--operator", "softmax", cwd=repo)
    assert packet.returncode == 0, packet.stderr
    (line,) = [line for line in packet.stdout.splitlines() if "configuration r128" in line]
    assert line.endswith("over 1 measurement)"), line
    report = run_kexp("report", "-o", str(tmp_path / "site"), cwd=repo)
    assert report.returncode == 0, report.stderr
    page = (tmp_path / "site" / "index.html").read_text(encoding="utf-8")
    lead = re.search(r'<p class="lead">([^<]*)</p>', page)
    assert lead is not None, page[:2000]
    assert lead.group(1) == (
        "1 experiment (all experiments) on 1 operator, in 1 operator × dtype × env cell, "
        "read from the working tree."
    ), lead.group(1)
