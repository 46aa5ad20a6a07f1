"""A run that timed out measured nothing, whatever score it carries (the predecessor's
agents wrote 1.0, the score they started from): every view that prints its score says
it failed with no speedup, never "1.0000" beside ``failed`` as if it were measured. A
real repository with a pull request's branch, read through the kexp command; the files
and the JSON keep the score as recorded."""

from __future__ import annotations

import json
import re
from pathlib import Path

from conftest import git, run_kexp

OPERATOR = "csrc/kernels/cache_kernels.cu: reshape_and_cache_flash"
TIMED_OUT = "Autotune 64 configs - timed out"
#: The timed-out run's code change: recorded again later, the tried-before check warns.
DIFF = (
    "--- a/csrc/kernels/cache_kernels.cu\n+++ b/csrc/kernels/cache_kernels.cu\n"
    "@@ -1,3 +1,3 @@\n-  for (int i = 0; i < n; ++i) dst[i] = src[i];\n"
    "+  for (int i = 0; i < n; i += 4) copy4(dst, src, i);\n"
)
#: The score the run carries: no view shows it as a speedup.
RECORDED = "1.0000"


def add(repo: Path, *args: str) -> tuple[str, str]:
    """``kexp add`` on the campaign: (the new id, what it warned)."""
    done = run_kexp(
        "add", "--operator", OPERATOR, "--dtype", "bf16", "--env", "MI300X", *args, cwd=repo
    )
    assert done.returncode == 0, done.stderr
    return done.stdout.split()[1], done.stderr


def line_of(text: str, needle: str) -> str:
    """The one line of ``text`` holding ``needle``."""
    found = [line for line in text.splitlines() if needle in line]
    assert len(found) == 1, (needle, text)
    return found[0]


def test_every_view_prints_a_timed_out_run_as_a_failure_without_a_speedup(
    repo: Path, tmp_path: Path
) -> None:
    """A branch adds a step that timed out (``--status timeout --score 1.0``) on main's
    best: the review of its pull request, the lessons, the consult, similar, the
    tried-before warning of a later run of the same change and the HTML report show it
    as failed, with no 1.0000."""
    good, _ = add(repo, "--summary", "Vectorized loads - +3%", "--score", "1.03")
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", "good step")
    git(repo, "switch", "-q", "-c", "agent/autotune")
    timed_out, _ = add(
        repo, "--summary", TIMED_OUT, "--score", "1.0", "--status", "timeout", "--pid", good,
        "--diff", DIFF, "--description", "**Key insight**: 64 configs take over the budget",
    )  # fmt: skip
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", "autotune timed out")
    short = timed_out[:10]
    # The truth: the file keeps the score it was written with, and the JSON says so.
    path = next((repo / "experiments").rglob(f"{timed_out}-*.md"))
    assert re.search(r"^score: 1\.0$", path.read_text(), re.M)
    shown = json.loads(run_kexp("show", timed_out, "--json", cwd=repo).stdout)
    assert shown["score"] == 1.0 and shown["outcome"] == "failed", shown

    review = run_kexp("review", "main", cwd=repo).stdout
    row = line_of(review, f"| {TIMED_OUT} |")
    assert "failed" in row and RECORDED not in row, row
    lesson = line_of(review, f"**failed** `{timed_out}`")
    assert "nothing measured" in lesson and RECORDED not in lesson, lesson
    node = line_of(review, f'e{timed_out}["')  # the Mermaid lineage graph
    assert "failed (nothing measured)" in node and RECORDED not in node, node

    lessons = run_kexp("lessons", cwd=repo).stdout
    assert RECORDED not in line_of(lessons, TIMED_OUT), lessons

    packet = run_kexp(
        "context", "--operator", "reshape_and_cache_flash", "--text", "autotune configs", cwd=repo
    ).stdout
    entry = line_of(packet, f"{short} ")
    assert "failed (nothing measured)" in entry and RECORDED not in entry, packet

    similar = run_kexp("similar", "--text", "autotune configs", cwd=repo).stdout
    assert RECORDED not in line_of(similar, short), similar

    _, warned = add(repo, "--summary", "Autotune 64 configs again - +1%", "--score", "1.01",
                    "--diff", DIFF)  # fmt: skip
    said = line_of(warned, timed_out)
    assert "nothing measured" in said and RECORDED not in said, warned

    site = tmp_path / "site"
    assert run_kexp("report", "-o", str(site), cwd=repo).returncode == 0
    page = next(p for p in (site / "e").glob("*.html") if timed_out in p.read_text())
    html = page.read_text()
    assert TIMED_OUT in html and RECORDED not in html, html
    operator_page = next((site / "op").glob("*.html")).read_text()
    for tag in ("li", "tr"):  # the lessons' list, the experiments' table
        items = re.findall(rf"<{tag}>(?:(?!<{tag}>).){{0,300}}{short}.*?</{tag}>", operator_page)
        assert items and all(RECORDED not in item for item in items), items
