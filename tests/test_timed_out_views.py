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


UNROLL_8 = DIFF.replace("unroll 16", "unroll 8")


def test_no_view_prints_a_speedup_for_a_run_that_measured_nothing(
    repo: Path, store: Store, make_experiment: Callable[..., KernelExperiment]
) -> None:
    """Whether a view prints a record's score is derived once, where its outcome is: a
    view that forgot to ask printed the 1.05 a run both buggy and timed out carries, or
    the 1.07 of a run that timed out (outcome failed). Every view (list, tree, top,
    show, lessons, similar, context and its path to the best, the tried-before warning,
    the review of a branch, the report's pages) prints the measured ones' scores and
    neither of theirs."""
    base = make_experiment(score=1.2, change_summary="Vectorize - +20%")
    git(repo, "add", "-A", "experiments")
    git(repo, "commit", "-q", "-m", "base")
    git(repo, "checkout", "-q", "-b", "agent/unroll")
    hung = make_experiment(
        pid=base.id,
        measured_against="reference",
        score=1.05,
        status="timeout",
        is_buggy=True,
        error_message="timed out after 600 s; wrong output",
        change_summary="Unroll 16 - hung, wrong output",
        code_change=DIFF,
    )
    stalled = make_experiment(
        pid=base.id,
        measured_against="reference",
        score=1.07,
        status="timeout",
        error_message="timed out after 600 s",
        change_summary="Unroll 8 - timed out",
        code_change=UNROLL_8,
    )
    # The best, made on the timed-out run: the path to it (kexp context) passes it.
    make_experiment(
        pid=stalled.id,
        measured_against="reference",
        score=1.3,
        change_summary="Unroll 8, fixed - +30%",
    )
    git(repo, "add", "-A", "experiments")
    git(repo, "commit", "-q", "-m", "unroll")
    (repo / "again.diff").write_text(DIFF)
    (repo / "again8.diff").write_text(UNROLL_8)
    assert (hung.outcome, stalled.outcome) == ("buggy", "failed")
    unmeasured = {hung.id: "1.05", stalled.id: "1.07"}

    def lines_of(*args: str) -> list[str]:
        result = run_kexp(*args, cwd=repo)
        assert result.returncode == 0, (args, result.stderr)
        return (result.stdout + result.stderr).splitlines()

    views = [
        ("list",),
        ("tree",),
        ("top", "--include-buggy"),
        ("lessons",),
        ("similar", "--text", "unroll"),
        ("context", "--operator", "reshape_and_cache", "--text", "unroll"),
        ("context", "--operator", "reshape_and_cache", "--diff", "again.diff"),
        ("context", "--operator", "reshape_and_cache", "--diff", "again8.diff"),
    ]
    for args in views:
        lines = lines_of(*args)
        for exp_id, score in unmeasured.items():
            mine = [x for x in lines if exp_id[:10] in x]
            assert mine, (args, exp_id, lines)
            assert not any(score in x for x in mine), (args, mine)
        if args[0] != "lessons":  # (no lesson: an improvement)
            assert any(base.id[:10] in x and "1.2" in x for x in lines), (args, lines)
    for exp_id in unmeasured:
        assert "score     - (" in "\n".join(lines_of("show", exp_id[:10]))

    review = "\n".join(lines_of("review", "main"))
    assert "1.05" not in review and "1.07" not in review, review
    assert f"`{stalled.id}` (nothing measured)" in review

    for diff, exp_id in (("again.diff", hung.id), ("again8.diff", stalled.id)):
        again = run_kexp("add", "--operator", hung.operator_sig, "--summary", "Unroll again",
                         "--score", "1.1", "--diff-file", diff, cwd=repo)  # fmt: skip
        assert again.returncode == 0, again.stderr
        (warned,) = [x for x in again.stderr.splitlines() if exp_id in x]
        assert unmeasured[exp_id] not in warned and "nothing measured" in warned, warned

    from kexp.output.html.pages import experiment_path

    assert run_kexp("report", "-o", "site", cwd=repo).returncode == 0
    pages = [p.read_text(encoding="utf-8") for p in (repo / "site").rglob("*.html")]
    for exp_id, score in unmeasured.items():
        page = (repo / "site" / experiment_path(exp_id)).read_text(encoding="utf-8")
        section = page[page.index(f'id="{exp_id}"') :].split("</section>")[0]
        assert f"{score}00" not in section and 'title="nothing measured"' in section
        said = [x for page in pages for x in page.splitlines() if exp_id[:10] in x]
        assert said and not any(f"{score}00" in x for x in said), said
