"""A run both buggy and timed out measured nothing: every view says so, lessons and the
review included (they knew the outcome, ``buggy``, not that the run timed out)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from conftest import git, run_kexp

from kexp import KernelExperiment, Store


def test_a_buggy_timed_out_run_prints_no_score_in_lessons_and_review(
    repo: Path, store: Store, make_experiment: Callable[..., KernelExperiment]
) -> None:
    base = make_experiment(score=1.2, change_summary="Vectorize - +20%")
    git(repo, "add", "-A", "experiments")
    git(repo, "commit", "-q", "-m", "base")
    git(repo, "checkout", "-q", "-b", "agent/unroll")
    # The harness timed out and the partial result was wrong: the 1.05 it carries is
    # no measurement (a predecessor's placeholder).
    hung = make_experiment(
        pid=base.id,
        measured_against="reference",
        score=1.05,
        status="timeout",
        is_buggy=True,
        error_message="timed out after 600 s; wrong output",
        change_summary="Unroll 16 - hung, wrong output",
    )
    git(repo, "add", "-A", "experiments")
    git(repo, "commit", "-q", "-m", "unroll")
    short = hung.id[:10]

    lessons = run_kexp("lessons", cwd=repo)
    assert lessons.returncode == 0, lessons.stderr
    (line,) = [x for x in lessons.stdout.splitlines() if short in x]
    assert "1.05" not in line and " - " in line, line
    shown = run_kexp("show", short, cwd=repo).stdout
    assert "score     - (buggy: nothing measured)" in shown, shown

    markdown = run_kexp("review", "main", cwd=repo)
    assert markdown.returncode == 0, markdown.stderr
    text = markdown.stdout
    assert "1.05" not in text, text
    assert f"`{hung.id}` (nothing measured)" in text
    assert "buggy (nothing measured)" in text  # the lineage graph's node


DIFF = """\
diff --git a/csrc/k.cu b/csrc/k.cu
--- a/csrc/k.cu
+++ b/csrc/k.cu
@@ -13 +13 @@ __global__ void k_attn(scalar_t* out)
-#pragma unroll 2
+#pragma unroll 16
"""


def test_a_buggy_timed_out_run_prints_no_score_where_it_is_found_again(
    repo: Path, store: Store, make_experiment: Callable[..., KernelExperiment]
) -> None:
    """The run both buggy and timed out, found again: by ``kexp similar`` (its table) and
    by the tried-before warning of the next ``kexp add`` of the same change. Neither
    prints the 1.05 it carries as its score (they knew the outcome, not the status)."""
    hung = make_experiment(
        score=1.05,
        status="timeout",
        is_buggy=True,
        error_message="timed out after 600 s; wrong output",
        change_summary="Unroll 16 - hung, wrong output",
        code_change=DIFF,
    )
    (repo / "again.diff").write_text(DIFF)
    found = run_kexp("similar", "--diff", "again.diff", cwd=repo)
    assert found.returncode == 0, found.stderr
    (line,) = [x for x in found.stdout.splitlines() if hung.id[:8] in x]
    assert "1.05" not in line and " - " in line, line

    again = run_kexp("add", "--operator", hung.operator_sig, "--summary", "Unroll 16 again",
                     "--score", "1.1", "--diff-file", "again.diff", cwd=repo)  # fmt: skip
    assert again.returncode == 0, again.stderr
    (warned,) = [x for x in again.stderr.splitlines() if hung.id in x]
    assert "1.05" not in warned and "nothing measured" in warned, warned
