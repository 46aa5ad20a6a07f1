"""kexp review and kexp validate --changed: pull requests of experiments, in real git
repositories with branches (base..head as a forge's pull request has it)."""

from __future__ import annotations

import dataclasses
import gc
import json
import os
import re
import shutil
from pathlib import Path
from typing import Any

import pytest
import yaml
from click.testing import CliRunner
from conftest import REPO_ROOT, experiment_fields, git, run_kexp

from kexp import KernelExperiment, Store
from kexp.cli.main import main
from kexp.core.errors import GitError, StoreNotFoundError
from kexp.format.rules import EXPERIMENT_NAME
from kexp.review.build import (
    COMMENT_MARKER,
    check_changes,
    md_code,
    md_text,
    render_markdown,
    render_mermaid,
    review,
    to_json,
    validate_changed,
)

OPERATOR = "csrc/kernels/cache_kernels.cu: reshape_and_cache_flash"
OTHER_OPERATOR = "csrc/kernels/other.cu: rms_norm"


def commit_all(repo: Path, message: str) -> None:
    git(repo, "add", "-A", "experiments")
    git(repo, "commit", "-q", "-m", message)


def create(store: Store, **overrides: Any) -> KernelExperiment:
    if overrides.get("pid"):  # these scores are over the reference (no step product)
        overrides.setdefault("measured_against", "reference")
    return store.create_experiment(**experiment_fields(author="Test Engineer", **overrides))


@dataclasses.dataclass
class PullRequest:
    """A store whose branch ``agent/fuse`` adds three experiments and corrects one."""

    repo: Path
    store: Store
    root: KernelExperiment  # on main
    unroll: KernelExperiment  # on main, corrected on the branch (score 1.019 -> 1.021)
    other: KernelExperiment  # on main, another operator
    fused: KernelExperiment  # added: the new best on OPERATOR
    spills: KernelExperiment  # added: a regression with a key insight
    crash: KernelExperiment  # added: buggy


@pytest.fixture
def pr(repo: Path, store: Store) -> PullRequest:
    root = create(store, change_summary="Baseline port of the cache kernel - 1.00x", score=1.0)
    unroll = create(store, pid=root.id, change_summary="Unrolled the inner loop by 4 - +1.90%")
    other = create(
        store, change_summary="Vectorized loads - +4%", score=1.04, operator_sig=OTHER_OPERATOR
    )
    commit_all(repo, "Experiments on main")
    git(repo, "checkout", "-q", "-b", "agent/fuse")
    fused = create(
        store,
        pid=unroll.id,
        score=1.046,  # over the reference: +2.4% over its parent's 1.021
        tags=["fuse"],
        change_summary="Fused unroll + vectorized store - +4.6%",
    )
    spills = create(
        store,
        pid=fused.id,
        score=0.988,
        change_summary="Unroll by 8 - -1.2% (spills)",
        detailed_description="**Approach**: unroll 8\n\n**Key insight**: unroll 8 spills "
        "registers on MI300X",
    )
    crash = create(
        store,
        pid=unroll.id,
        score=0.0,
        status="failed",
        is_buggy=True,
        change_summary="Async prefetch - crashed (illegal address)",
        error_message="HIP error: an illegal memory access was encountered",
        detailed_description="**Key insight**: the prefetch reads past the block end",
    )
    store.update_experiment(
        unroll.id,
        score=1.021,
        detailed_description="**Approach**: unroll 4\n\n**Key insight**: unrolling helps\n\n"
        "**Correction**: score 1.019 → 1.021. Reason: rerun on an idle GPU",
    )
    commit_all(repo, "Fused kernel experiments")
    return PullRequest(repo, store, root, unroll, other, fused, spills, crash)


# --- checkers for the Markdown --------------------------------------------------------

_FENCE = re.compile(r"^(`{3,})([^`]*)$")


def code_blocks(markdown: str) -> list[tuple[str, str]]:
    """(info string, text) of each fenced block; fails on a fence left open."""
    blocks: list[tuple[str, str]] = []
    lines = markdown.splitlines()
    i = 0
    while i < len(lines):
        opening = _FENCE.match(lines[i])
        if opening is None:
            i += 1
            continue
        fence, info = opening.group(1), opening.group(2).strip()
        end = next(
            (
                j
                for j in range(i + 1, len(lines))
                if re.fullmatch(rf"`{{{len(fence)},}}\s*", lines[j])
            ),
            None,
        )
        assert end is not None, f"fence opened at line {i + 1} is never closed"
        blocks.append((info, "\n".join(lines[i + 1 : end])))
        i = end + 1
    return blocks


def outside_code_blocks(markdown: str) -> str:
    """The Markdown with the fenced blocks left out."""
    kept, inside, fence = [], False, ""
    for line in markdown.splitlines():
        opening = _FENCE.match(line)
        if not inside and opening is not None:
            inside, fence = True, opening.group(1)
        elif inside and re.fullmatch(rf"`{{{len(fence)},}}\s*", line):
            inside = False
        elif not inside:
            kept.append(line)
    return "\n".join(kept)


def without_code_spans(text: str) -> str:
    """``text`` with its inline code spans left out (their content is shown as is), read
    as CommonMark does: a backslash escapes the next character, and a run of backticks
    opens a span that the next run of the same length closes."""
    kept, i = [], 0
    while i < len(text):
        if text[i] == "\\":
            kept.append(text[i : i + 2])
            i += 2
            continue
        run = re.match(r"`+", text[i:])
        if run is None:
            kept.append(text[i])
            i += 1
            continue
        fence = run.group(0)
        closing = re.compile(rf"(?<!`){fence}(?!`)").search(text, i + len(fence))
        if closing is None:
            kept.append(fence)
            i += len(fence)
        else:
            i = closing.end()
    return "".join(kept)


def table_cells(row: str) -> list[str]:
    """The cells of a GitHub-flavoured table row: split on pipes not escaped by ``\\``."""
    cells, current, i = [], "", 0
    while i < len(row):
        if row[i] == "\\" and i + 1 < len(row):
            current += row[i : i + 2]
            i += 2
            continue
        if row[i] == "|":
            cells.append(current)
            current = ""
        else:
            current += row[i]
        i += 1
    cells.append(current)
    return [c.strip() for c in cells[1:-1]]


def table_rows(markdown: str) -> list[list[str]]:
    return [
        table_cells(line)
        for line in outside_code_blocks(markdown).splitlines()
        if line.startswith("|")
    ]


_MERMAID_ID = r"[A-Za-z][A-Za-z0-9_]*"
_MERMAID_KEYWORDS = {
    "end",
    "graph",
    "flowchart",
    "subgraph",
    "class",
    "classDef",
    "style",
    "linkStyle",
    "click",
    "direction",
    "call",
    "href",
}


def assert_sound_mermaid(text: str) -> set[str]:
    """Fail unless ``text`` is a flowchart of quoted, escaped nodes and edges between
    them; returns the node ids."""
    lines = text.splitlines()
    assert lines[0] == "flowchart TD"
    nodes: set[str] = set()
    for line in lines[1:]:
        node = re.fullmatch(rf'  ({_MERMAID_ID})\["([^"]*)"\]', line)
        edge = re.fullmatch(rf"  ({_MERMAID_ID}) --> ({_MERMAID_ID})", line)
        class_def = re.fullmatch(r"  classDef [a-z]+ [a-z0-9:#,. -]+", line)
        klass = re.fullmatch(rf"  class ({_MERMAID_ID}(?:,{_MERMAID_ID})*) [a-z]+", line)
        if node:
            name, label = node.groups()
            assert name not in _MERMAID_KEYWORDS and name.lower() != "end"
            assert name not in nodes, f"node {name} defined twice"
            nodes.add(name)
            # Only entities, <br/> and plain characters in a label.
            plain = re.sub(r"#[0-9]+;|<br/>", "", label)
            assert re.fullmatch(r"[A-Za-z0-9 .,:+\-/()]*", plain), label
        elif edge:
            assert set(edge.groups()) <= nodes, line
        elif class_def:
            pass
        elif klass:
            assert set(klass.group(1).split(",")) <= nodes, line
        else:
            raise AssertionError(f"not a line of a flowchart: {line!r}")
    for line in lines:
        for pair in ("[]", "()", "{}"):
            assert line.count(pair[0]) == line.count(pair[1]), line
        assert line.count('"') % 2 == 0, line
    return nodes


def mermaid_of(markdown: str) -> str:
    blocks = [text for info, text in code_blocks(markdown) if info == "mermaid"]
    assert len(blocks) == 1
    return blocks[0]


def row_of(markdown: str, exp_id: str) -> list[str]:
    rows = [r for r in table_rows(markdown) if r and exp_id in r[0]]
    assert len(rows) == 1, rows
    return rows[0]


# --- the review, as data ---------------------------------------------------------------


def test_review_lists_what_the_branch_adds_and_corrects(pr: PullRequest) -> None:
    result = review(pr.store, "main")
    assert [e.id for e in result.added] == sorted([pr.fused.id, pr.spills.id, pr.crash.id])
    assert [e.id for e in result.corrected] == [pr.unroll.id]
    assert result.removed == [] and result.ok
    fused = next(e for e in result.added if e.id == pr.fused.id)
    assert fused.outcome == "improvement" and fused.score == 1.046
    assert fused.pid == pr.unroll.id and fused.parent_score == 1.021
    assert fused.delta == pytest.approx(0.025)
    assert fused.delta_pct == round((1.046 / 1.021 - 1) * 100, 2)
    # Ranked among the store's scored experiments on the same operator (not the other
    # operator's 1.04, not the buggy one).
    assert (fused.rank, fused.rank_of, fused.new_best) == (1, 4, True)
    assert (fused.previous_best_id, fused.previous_best_score) == (pr.unroll.id, 1.019)
    spills = next(e for e in result.added if e.id == pr.spills.id)
    assert (spills.outcome, spills.rank, spills.new_best) == ("regression", 4, False)
    crash = next(e for e in result.added if e.id == pr.crash.id)
    assert (crash.outcome, crash.rank, crash.delta) == ("buggy", None, None)
    unroll = result.corrected[0]
    assert {c.field for c in unroll.changes} == {"score", "detailed_description"}
    score = next(c for c in unroll.changes if c.field == "score")
    assert (score.old, score.new, score.diff) == (1.019, 1.021, None)
    assert unroll.rank == 2 and not unroll.new_best
    assert [e.id for e in result.new_bests] == [pr.fused.id]


def test_the_same_review_from_committed_revisions_without_a_checkout(pr: PullRequest) -> None:
    git(pr.repo, "checkout", "-q", "main")
    from_main = review(pr.store, "main", "agent/fuse")
    assert from_main.head_commit == git(pr.repo, "rev-parse", "agent/fuse")
    assert [e.id for e in from_main.added] == sorted([pr.fused.id, pr.spills.id, pr.crash.id])
    assert [e.id for e in from_main.corrected] == [pr.unroll.id]
    assert len(Store(pr.repo).paths()) == 3  # nothing was checked out meanwhile
    at_branch = review(pr.store.at("agent/fuse"), "main")
    assert [e.id for e in at_branch.added] == [e.id for e in from_main.added]
    result = CliRunner().invoke(
        main, ["--root", str(pr.repo), "validate", "--rev", "agent/fuse", "--changed", "main"]
    )
    assert result.exit_code == 0 and "4 changed file(s) checked" in result.output


def test_uncommitted_and_untracked_files_are_part_of_a_working_tree_review(
    pr: PullRequest,
) -> None:
    extra = create(pr.store, pid=pr.fused.id, score=1.03, change_summary="Tuned block size")
    result = review(pr.store, "main")
    assert extra.id in [e.id for e in result.added]
    assert extra.id not in [e.id for e in review(pr.store, "main", "HEAD").added]


def test_a_review_of_the_checked_out_commit_reads_the_commit_not_the_edits_since(
    pr: PullRequest,
) -> None:
    """``review BASE HEAD`` reads the store through the working tree's cache only when it
    holds the commit's files (git checks that while the working tree is read): an edit
    not committed, to an experiment the change does not touch, is not read."""
    committed = to_json(review(pr.store, "main", "HEAD"))
    pr.store.update_experiment(pr.unroll.id, score=1.5)  # the parent of what was added
    assert to_json(review(pr.store, "main")) != committed  # the edit changes the review
    assert to_json(review(pr.store, "main", "HEAD")) == committed
    at_commit = to_json(review(pr.store.at("HEAD"), "main"))
    assert {**at_commit, "head": "HEAD"} == committed  # (the store at HEAD names its hash)


def _branch_with_a_child(repo: Path, store: Store) -> tuple[KernelExperiment, KernelExperiment]:
    """A root committed on main, and a branch ``feature`` adding its child (checked out)."""
    root = store.create_experiment(**experiment_fields(score=1.0))
    commit_all(repo, "main")
    git(repo, "checkout", "-q", "-b", "feature")
    child = store.create_experiment(**experiment_fields(pid=root.id, measured_against="reference"))
    commit_all(repo, "feature")
    return root, child


def test_a_review_of_the_commit_never_reads_what_git_does_not_look_at(
    repo: Path, store: Store
) -> None:
    """``review BASE HEAD`` reads HEAD's files, not the working tree's, where the working
    tree holds files git does not look at (skip-worktree, assume-unchanged) or leaves
    out (a sparse checkout), which ``git status`` does not show."""
    root, child = _branch_with_a_child(repo, store)
    assert child.path is not None and root.path is not None
    expected = to_json(review(store, "main", "HEAD"))
    text = child.path.read_text()
    child.path.write_text(re.sub(r"(?m)^score: .*$", "score: 9.5", text))
    relative = str(child.path.relative_to(repo))
    for flag in ("--skip-worktree", "--assume-unchanged"):
        git(repo, "update-index", flag, relative)
        assert to_json(review(store, "main", "HEAD")) == expected, flag
        git(repo, "update-index", flag.replace("--", "--no-"), relative)
    child.path.write_text(text)
    hidden = root.path.parent.relative_to(repo).as_posix()
    git(repo, "sparse-checkout", "set", "--no-cone", "/*", f"!/{hidden}/")
    assert not root.path.exists()
    assert to_json(review(store, "main", "HEAD")) == expected


def test_a_failed_review_leaves_no_git_process_behind(repo: Path, store: Store) -> None:
    """git's walks run while a review reads the store: a review that fails meanwhile
    stops them, even one blocked on a list longer than a pipe holds (a long-lived
    process calling the library would keep it otherwise)."""

    def git_children() -> set[str]:
        """The git processes this one started that still run or wait to be reaped."""
        found = set()
        for entry in Path("/proc").iterdir():
            try:
                stat = (entry / "stat").read_text()
            except OSError:  # not a process, or one that ended meanwhile
                continue
            name, _, rest = stat.partition(" (")[2].rpartition(") ")
            if name == "git" and rest.split()[1] == str(os.getpid()):
                found.add(entry.name)
        return found

    notes = repo / "experiments" / "notes"
    notes.mkdir()
    for n in range(800):  # git's list of their removal: more than a pipe holds
        (notes / f"{n:04d}-{'x' * 80}.txt").write_text("x\n")
    commit_all(repo, "many")
    git(repo, "checkout", "-q", "-b", "drop")
    git(repo, "rm", "-rq", "experiments")
    git(repo, "commit", "-q", "-m", "drop")
    (repo / "experiments").mkdir()
    before = git_children()
    with pytest.raises(StoreNotFoundError):  # HEAD has no experiments/
        validate_changed(store, "main", "HEAD")
    gc.collect()
    assert git_children() - before == set()


def test_experiments_added_on_the_base_after_branching_are_not_removed_by_the_branch(
    pr: PullRequest,
) -> None:
    git(pr.repo, "checkout", "-q", "main")
    later = create(pr.store, change_summary="Recorded on main meanwhile", score=1.01)
    commit_all(pr.repo, "Another experiment on main")
    git(pr.repo, "checkout", "-q", "agent/fuse")
    result = review(pr.store, "main")
    assert result.removed == []
    assert later.id not in [e.id for e in result.experiments]
    assert len(result.added) == 3


def test_removing_a_parent_reports_the_child_it_leaves_dangling(pr: PullRequest) -> None:
    git(pr.repo, "checkout", "-q", "-b", "cleanup", "main")
    pr.store.delete_experiment(pr.root.id, force=True)
    commit_all(pr.repo, "Remove the baseline")
    result = review(pr.store, "main")
    assert [e.id for e in result.removed] == [pr.root.id]
    removed = result.removed[0]
    assert (removed.score, removed.outcome, removed.rank) == (1.0, "marginal", 2)
    assert result.file_problems == []
    assert [(Path(p.path).name, p.code) for p in result.store_problems] == [
        (pr.unroll.path.name, "dangling-pid")  # type: ignore[union-attr]
    ]
    assert not result.ok
    markdown = render_markdown(result)
    assert "### Removed (1)" in markdown and "dangling-pid" in markdown
    assert "class e" + pr.root.id + " removed" in mermaid_of(markdown)


def test_a_file_copied_under_an_existing_id_is_a_duplicate_naming_both_paths(
    pr: PullRequest,
) -> None:
    assert pr.unroll.path is not None
    copy = pr.unroll.path.with_name(f"{pr.unroll.id}-copied-by-hand.md")
    shutil.copy(pr.unroll.path, copy)
    result = review(pr.store, "main")
    duplicates = [p for p in result.store_problems if p.code == "duplicate-id"]
    assert {Path(p.path).name for p in duplicates} == {pr.unroll.path.name, copy.name}
    assert all(copy.name in p.message or pr.unroll.path.name in p.message for p in duplicates)
    assert "duplicate-id" in render_markdown(result)


def test_an_invalid_file_is_listed_with_its_problems(pr: PullRequest) -> None:
    exp_id = "6f00000000000001"
    bad = pr.repo / "experiments" / f"{exp_id}-bad.md"
    bad.write_text(
        "---\n"
        f"id: {exp_id}\npid: ''\nchange_summary: Hand-written - 1.2x\nscore: 1.2x\n"
        "status: done\nis_buggy: false\noperator_sig: k.cu\ndtype_sig: bf16\nenv: H100\n"
        "base_commit: ''\ncreated_at: '2026-01-01T00:00:00Z'\n---\n",
        encoding="utf-8",
    )
    result = review(pr.store, "main")
    entry = next(e for e in result.added if e.id == exp_id)
    assert (entry.valid, entry.outcome, entry.change_summary) == (
        False,
        "invalid",
        "Hand-written - 1.2x",
    )
    assert any(p.field == "score" and p.severity == "error" for p in entry.problems)
    assert not result.ok
    markdown = render_markdown(result)
    assert "❌" in markdown.split("###")[0]  # the headline says so
    validation = markdown.split("### Validation")[1]
    assert f"{exp_id}-bad.md:5:" in validation and "score" in validation


def test_a_reformatted_file_is_a_correction_with_no_field_changed(pr: PullRequest) -> None:
    assert pr.other.path is not None
    text = pr.other.path.read_text(encoding="utf-8")
    pr.other.path.write_text(text.replace("score: 1.04", "score: 1.040"), encoding="utf-8")
    result = review(pr.store, "main")
    other = next(e for e in result.corrected if e.id == pr.other.id)
    assert other.changes == []
    assert "No field changed" in render_markdown(result)


def test_long_text_changes_are_a_short_diff(pr: PullRequest) -> None:
    long_before = "\n".join(f"line {i}" for i in range(100))
    long_after = "\n".join(f"line {i}" if i % 2 else f"changed {i}" for i in range(100))
    create(pr.store, change_summary="Profiling run", profiling_info=long_before)
    commit_all(pr.repo, "profiled")
    git(pr.repo, "branch", "-f", "base-profile")
    exp = pr.store.list_experiments(text="Profiling run")[0]
    pr.store.update_experiment(exp.id, profiling_info=long_after, change_summary="x" * 79)
    result = review(pr.store, "base-profile")
    changes = {c.field: c for c in result.corrected[0].changes}
    profiling = changes["profiling_info"]
    assert profiling.diff is not None and len(profiling.diff) == 24
    assert profiling.diff_omitted > 0
    assert profiling.diff[0].startswith("@@") and "-line 0" in profiling.diff
    assert changes["change_summary"].diff is None  # one line of at most 80 characters
    markdown = render_markdown(result)
    diffs = [text for info, text in code_blocks(markdown) if info == "diff"]
    assert len(diffs) == 1 and "+changed 0" in diffs[0] and "more line(s)" in diffs[0]


# --- the Markdown comment --------------------------------------------------------------


def test_markdown_comment_has_every_part_a_reviewer_needs(pr: PullRequest) -> None:
    markdown = render_markdown(review(pr.store, "main"))
    assert markdown.startswith(COMMENT_MARKER + "\n")
    headline = markdown.split("### ")[0]
    assert "3 added · 1 corrected · 0 removed" in headline and "✅" in headline
    assert f"**New best** on `{OPERATOR}`" in headline and pr.fused.id in headline
    # One table row per experiment: id, summary, operator, dtype, score, cumulative score,
    # delta, outcome, rank.
    header = table_rows(markdown)[0]
    assert header == [
        "id",
        "summary",
        "operator",
        "dtype",
        "score",
        "cumulative",
        "Δ vs parent",
        "outcome",
        "rank on operator",
    ]
    assert all(len(row) == 9 for row in table_rows(markdown))
    fused = row_of(markdown, pr.fused.id)
    assert fused[1] == "Fused unroll + vectorized store - +4.6%"
    assert fused[2] == f"`{OPERATOR}`" and fused[3] == "`bf16`" and fused[4] == "1.0460"
    assert fused[5] == "1.0460"  # measured against the reference: its own cumulative
    assert fused[6] == f"+0.0250 (+2.45%) vs `{pr.unroll.id}`"
    assert fused[7].endswith("improvement") and fused[8] == "**#&#8203;1 of 4, new best**"
    assert row_of(markdown, pr.spills.id)[8] == "#&#8203;4 of 4"
    crash = row_of(markdown, pr.crash.id)
    # A crash measured nothing: no score of 0.0000 to read as a speedup of zero.
    assert crash[7].endswith("buggy") and crash[4] == "—"
    # The correction: each field old -> new, long text as a diff.
    corrected = markdown.split("### Corrected (1)")[1].split("### Validation")[0]
    assert "- `score`: `1.019` → `1.021`" in corrected
    (diff,) = [text for info, text in code_blocks(corrected) if info == "diff"]
    assert "+**Correction**: score 1.019 → 1.021. Reason: rerun on an idle GPU" in diff
    # Validation, lessons, lineage.
    assert "The changed files pass every check." in markdown
    assert "The change causes no store-wide problem." in markdown
    lessons = markdown.split("### Lessons added (2)")[1].split("###")[0]
    assert "Key insight: unroll 8 spills registers on MI300X" in lessons
    assert "Key insight: the prefetch reads past the block end" in lessons
    assert lessons.index("buggy") < lessons.index("regression")
    assert f"`{pr.crash.id}` (nothing measured): Async prefetch" in lessons
    nodes = assert_sound_mermaid(mermaid_of(markdown))
    expected = {pr.root.id, pr.unroll.id, pr.fused.id, pr.spills.id, pr.crash.id}
    assert nodes == {"e" + i for i in expected}  # the other operator is not touched
    graph = mermaid_of(markdown)
    assert f"e{pr.unroll.id} --> e{pr.fused.id}" in graph
    assert f'e{pr.fused.id}["{pr.fused.id}<br/>1.0460 improvement<br/>new best"]' in graph
    assert f"class e{pr.root.id} context" in graph
    assert f'e{pr.crash.id}["{pr.crash.id}<br/>buggy (nothing measured)"]' in graph


def test_a_corrected_experiment_that_becomes_a_failure_is_a_new_lesson(
    pr: PullRequest,
) -> None:
    pr.store.update_experiment(pr.other.id, score=0.95)
    result = review(pr.store, "main")
    assert {lesson.id for lesson in result.lessons["regression"]} == {pr.spills.id, pr.other.id}
    # A correction that leaves an old failure as it was is no new lesson.
    git(pr.repo, "checkout", "-q", "-f", "agent/fuse")
    git(pr.repo, "checkout", "-q", "-b", "more")
    pr.store.update_experiment(pr.spills.id, env="MI300X, ROCm 7.0.1")
    assert review(pr.store, "agent/fuse").lessons == {}


def test_empty_change(pr: PullRequest) -> None:
    result = review(pr.store, "HEAD")
    assert result.experiments == [] and result.lineage.nodes == []
    markdown = render_markdown(result)
    assert "No experiment added, corrected or removed." in markdown
    assert "mermaid" not in markdown


HOSTILE = "x | y <img src=x onerror=alert(1)> ``` `a` [l](javascript:z) $e$ *b* & @all"


def test_hostile_text_cannot_alter_the_comment_or_the_graph(repo: Path, store: Store) -> None:
    base = create(store, change_summary="Baseline - 1.00x", score=1.0)
    commit_all(repo, "base")
    git(repo, "checkout", "-q", "-b", "hostile")
    hostile = create(
        store,
        pid=base.id,
        change_summary=HOSTILE[:80],
        score=1.2,
        operator_sig="a`b | c\\|d <script>alert(1)</script> ```",
        dtype_sig="bf16 | </td>",
        detailed_description='**Key insight**: ]]" --> e0["pwned"] </details> | <b>x</b>',
    )
    buggy = create(
        store,
        pid=base.id,
        change_summary='crash - "]; click e call alert()',
        score=0.0,
        is_buggy=True,
        status="failed",
        error_message="```\n</pre>\n## Heading",
        detailed_description='**Key insight**: ```mermaid\ngraph TD\n  end["x"]',
    )
    # An invalid file can hold line breaks and control characters in its summary.
    bad = repo / "experiments" / "6f00000000000002-bad.md"
    bad.write_text(
        '---\nid: 6f00000000000002\nchange_summary: "line one\\n| --- |\\n## two\\u001b[31m"\n'
        "score: nope\n---\n",
        encoding="utf-8",
    )
    store.update_experiment(base.id, env="<iframe> | `` ` ``")
    commit_all(repo, "hostile experiments")
    markdown = render_markdown(review(store, "main"))

    # No HTML passes through: outside code (where it is shown as text) every < > & is an
    # entity, except kexp's own comment marker and footer.
    prose = without_code_spans(outside_code_blocks(markdown))
    prose = prose.replace(COMMENT_MARKER, "").replace("<sub>", "").replace("</sub>", "")
    assert "<" not in prose and ">" not in prose.replace("&gt;", "")
    assert "\x1b" not in markdown
    assert "&lt;img src=x onerror=alert(1)&gt;" in markdown
    # Every table row keeps its nine cells; no line of text became a heading.
    rows = table_rows(markdown)
    assert rows and all(len(row) == 9 for row in rows), rows
    text = outside_code_blocks(markdown)
    headings = [line for line in text.splitlines() if line.startswith("#")]
    assert all(h.startswith(("## kexp review", "### ", "#### ")) for h in headings), headings
    # The code blocks are exactly those kexp wrote: problems, the env diff, the graph.
    infos = [info for info, _ in code_blocks(markdown)]
    assert infos.count("mermaid") == 1 and set(infos) <= {"text", "diff", "mermaid"}
    nodes = assert_sound_mermaid(mermaid_of(markdown))
    assert "e0" not in nodes and len(nodes) == 3
    # Text is escaped, not dropped: the summary cell reads back as the summary.
    row = row_of(markdown, hostile.id)
    assert (
        row[1].startswith("x \\| y &lt;img") and "\\[l\\](javascript:z) \\$e\\$ \\*b\\*" in row[1]
    )
    assert row_of(markdown, buggy.id)[1] == 'crash - "\\]; click e call alert()'
    assert "line one \\| --- \\| \\#\\# two" in row_of(markdown, "6f00000000000002")[1]


def test_code_spans_survive_backticks_and_cells_escape_pipes() -> None:
    assert md_code("a`b") == "``a`b``"
    assert md_code("``x``") == "``` ``x`` ```"
    assert md_code("a|b", in_table=True) == "`a\\|b`"
    assert md_code("") == "—"
    assert md_code("two\nlines") == "`two lines`"
    # A backslash before a pipe cannot be held by a code span in a table.
    assert md_code("a\\|b", in_table=True) == "a\\\\\\|b"
    assert md_text("a\nb|c <d> & e") == "a b\\|c &lt;d&gt; &amp; e"
    assert md_text("x" * 300, limit=10) == "x" * 9 + "…"


def test_mermaid_labels_are_escaped() -> None:
    from kexp.review.build import LineageGraph, LineageNode, mermaid_text

    assert mermaid_text('a"b]<c>#;`') == "a#34;b#93;#60;c#62;#35;#59;#96;"
    graph = LineageGraph([LineageNode("0123456789abcdef", "", "added", 1.5, 'x"]end', "s")], [], 0)
    text = render_mermaid(graph)
    assert_sound_mermaid(text)
    assert 'e0123456789abcdef["0123456789abcdef<br/>1.5000 x#34;#93;end"]' in text


# --- JSON ------------------------------------------------------------------------------


def test_json_has_the_same_content(pr: PullRequest) -> None:
    data = to_json(review(pr.store, "main"))
    json.dumps(data)  # JSON-ready
    assert data["summary"] == {
        "added": 3,
        "corrected": 1,
        "removed": 0,
        "moved": 0,
        "errors": 0,
        "warnings": 0,
        "new_best": [pr.fused.id],
        "suspect": [],
        "tried_before": [],
        "changed_on_base": [],
        "best_changes": [],
        "demoted_by_control": [],
        "lessons_lost": [],
        "already_on_base": [],
        "behind_base": [],
    }
    assert data["base_commit"] == data["merge_base"]  # main has not moved on
    fused = next(e for e in data["added"] if e["id"] == pr.fused.id)
    assert fused["rank"] == 1 and fused["new_best"] and fused["delta"] == pytest.approx(0.025)
    assert fused["path"].startswith("experiments/") and fused["path"].endswith(".md")
    (corrected,) = data["corrected"]
    changes = {c["field"]: c for c in corrected["changes"]}
    assert changes["score"]["old"] == 1.019 and changes["score"]["new"] == 1.021
    assert changes["detailed_description"]["diff"]
    assert {lesson["id"] for lesson in data["lessons"]["regression"]} == {pr.spills.id}
    assert data["lineage"]["mermaid"].startswith("flowchart TD")
    assert {"parent": pr.unroll.id, "child": pr.fused.id} in data["lineage"]["edges"]
    assert set(data["problems"]) == {"changed_files", "store_wide", "preexisting_store_wide"}


# --- validate --changed ----------------------------------------------------------------


def write_broken(repo: Path, exp_id: str) -> Path:
    path = repo / "experiments" / f"{exp_id}-broken.md"
    path.write_text(f"---\nid: {exp_id}\nscore: fast\n---\n", encoding="utf-8")
    return path


def test_validate_changed_checks_the_branch_and_the_store_wide_rules(pr: PullRequest) -> None:
    git(pr.repo, "checkout", "-q", "main")
    old_broken = write_broken(pr.repo, "6f000000000000aa")
    commit_all(pr.repo, "a broken file nobody fixed")
    git(pr.repo, "checkout", "-q", "-b", "agent/next")
    create(pr.store, pid=pr.unroll.id, change_summary="Fine", score=1.02)
    commit_all(pr.repo, "good experiment")
    # The broken file on main is not this branch's business...
    assert validate_changed(pr.store, "main") == []
    assert any(Path(p.path).name == old_broken.name for p in pr.store.validate())
    # ... a broken file the branch adds is.
    new_broken = write_broken(pr.repo, "6f000000000000bb")
    problems = validate_changed(pr.store, "main")
    assert problems and {Path(p.path).name for p in problems} == {new_broken.name}
    new_broken.unlink()
    # Store-wide checks cover untouched files: removing a parent leaves its child
    # (unchanged) pointing nowhere.
    pr.store.delete_experiment(pr.root.id, force=True)
    check = check_changes(pr.store, "main")
    assert [(Path(p.path).name, p.code) for p in check.problems] == [
        (pr.unroll.path.name, "dangling-pid")  # type: ignore[union-attr]
    ]
    assert check.caused == check.store_problems
    assert len(check.changed_paths) == 1  # the new experiment; the removal has no file


def test_validate_changed_on_the_command_line(pr: PullRequest) -> None:
    runner = CliRunner()
    root = ["--root", str(pr.repo)]
    result = runner.invoke(main, [*root, "validate", "--changed", "main"])
    assert result.exit_code == 0, result.output
    assert "4 changed file(s) checked, and the store-wide checks: 0 error(s)" in result.output
    broken = write_broken(pr.repo, "6f000000000000cc")
    result = runner.invoke(main, [*root, "validate", "--changed", "main", "--format", "github"])
    assert result.exit_code == 1
    assert "::error file=" in result.output and broken.name in result.output
    result = runner.invoke(main, [*root, "validate", "--changed", "main", str(broken)])
    assert result.exit_code == 2 and "not both" in result.output
    result = runner.invoke(main, [*root, "validate", "--changed", "no-such-branch"])
    assert result.exit_code == 2 and "unknown revision 'no-such-branch'" in result.output


# --- the command, end to end -----------------------------------------------------------


def test_kexp_review_main_prints_a_comment_a_reviewer_can_approve_from(
    pr: PullRequest,
) -> None:
    result = run_kexp("review", "main", cwd=pr.repo)
    assert result.returncode == 0, result.stderr
    markdown = result.stdout
    assert markdown.startswith(COMMENT_MARKER)
    assert "3 added · 1 corrected · 0 removed" in markdown and "✅ validation passed" in markdown
    for exp in (pr.fused, pr.spills, pr.crash, pr.unroll):
        row_of(markdown, exp.id)
    assert_sound_mermaid(mermaid_of(markdown))
    as_json = run_kexp("review", "main", "agent/fuse", "--format", "json", cwd=pr.repo)
    assert as_json.returncode == 0, as_json.stderr
    assert json.loads(as_json.stdout)["summary"]["added"] == 3


def test_review_errors_are_one_line(pr: PullRequest) -> None:
    result = CliRunner().invoke(main, ["--root", str(pr.repo), "review", "--", "--output=x"])
    assert result.exit_code == 2
    result = CliRunner().invoke(main, ["--root", str(pr.repo), "review", "nope"])
    assert result.exit_code == 2 and "unknown revision 'nope'" in result.output


def test_a_shallow_clone_says_to_fetch_the_history(pr: PullRequest, tmp_path: Path) -> None:
    clone = tmp_path / "clone"
    git(
        tmp_path,
        "clone",
        "-q",
        "--depth",
        "1",
        "--no-single-branch",
        f"file://{pr.repo}",
        str(clone),
    )
    git(clone, "checkout", "-q", "agent/fuse")
    with pytest.raises(GitError, match="fetch-depth: 0"):
        review(Store(clone), "origin/main")
    result = run_kexp("review", "origin/main", cwd=clone)
    assert result.returncode == 2 and "git fetch --unshallow" in result.stderr
    git(clone, "fetch", "-q", "--unshallow")
    assert len(review(Store(clone), "origin/main").added) == 3


# --- wiring for other repositories -----------------------------------------------------

EXPERIMENT_FILE = "experiments/2026/11/6749f3a0c2d41e7b-fused-unroll.md"


def test_pre_commit_hooks_run_kexp_on_experiment_files(pr: PullRequest) -> None:
    hooks = yaml.safe_load((REPO_ROOT / ".pre-commit-hooks.yaml").read_text(encoding="utf-8"))
    by_id = {hook["id"]: hook for hook in hooks}
    assert set(by_id) == {"kexp-validate", "kexp-fmt"}
    for hook in hooks:
        assert {"id", "name", "entry", "language"} <= set(hook)
        assert hook["language"] == "python"  # installs kexp from this repository
        files = re.compile(hook["files"])
        assert files.search(EXPERIMENT_FILE) and files.search("sub/" + EXPERIMENT_FILE)
        assert not files.search("experiments/README.md")
        assert not files.search("src/experiments.md")
        # the files kexp reads as experiments, hand-named ones too, and no others
        for name in ("6749f3a0c2d41e7b.md", "6749f3a0c2d41e7b-Unroll_4.md",
                     "6749f3a0c2d41e7b-fused unroll.md", "6749f3a0c2d41e7b.MD",
                     "6749f3a0c2d41e7.md", "notes.md", "6749F3A0C2D41E7B-x.md"):  # fmt: skip
            expected = EXPERIMENT_NAME.fullmatch(name) is not None
            assert (files.search(f"experiments/2026/11/{name}") is not None) == expected, name
    assert by_id["kexp-validate"]["entry"] == "kexp validate --changed HEAD"
    assert by_id["kexp-fmt"]["entry"] == "kexp fmt --check"
    # Run each hook as pre-commit would: the entry plus the matching staged files (when
    # it takes file names), from the repository root.
    staged = [str(p.relative_to(pr.repo)) for p in pr.store.paths()]
    for hook in hooks:
        files = [f for f in staged if re.search(hook["files"], f)]
        assert len(files) == 6
        args = hook["entry"].split()[1:]
        given = files if hook.get("pass_filenames", True) else []
        result = run_kexp(*args, *given, cwd=pr.repo)
        assert result.returncode == 0, result.stdout + result.stderr
    broken = write_broken(pr.repo, "6f000000000000dd")
    result = run_kexp("validate", str(broken.relative_to(pr.repo)), cwd=pr.repo)
    assert result.returncode == 1


def test_example_ci_workflow_validates_reviews_and_fetches_full_history() -> None:
    workflow = yaml.safe_load((REPO_ROOT / "docs" / "github-workflow.yml").read_text("utf-8"))
    assert "pull_request" in workflow[True]  # YAML 1.1 reads the key 'on' as True
    assert workflow["permissions"]["pull-requests"] == "write"
    (job,) = workflow["jobs"].values()
    checkout = next(s for s in job["steps"] if s.get("uses", "").startswith("actions/checkout"))
    assert checkout["with"]["fetch-depth"] == 0
    scripts = "\n".join(step.get("run", "") for step in job["steps"])
    commands = [line.strip() for line in scripts.splitlines() if line.strip().startswith("kexp ")]
    assert any("validate --changed" in c for c in commands)
    assert any(c.startswith("kexp fmt --check") for c in commands)
    assert any(c.startswith("kexp review") for c in commands)
    post = next(s for s in job["steps"] if "github-script" in s.get("uses", ""))
    assert COMMENT_MARKER in post["with"]["script"]
    assert "createComment" in post["with"]["script"]
    # The review is held to a comment's length by kexp, whole-sectioned: never sliced
    # blindly (that cut away its Validation section), and the job summary gets the same.
    (reviewed,) = [c for c in commands if c.startswith("kexp review")]
    bound = int(reviewed.split("--max-chars")[1].split()[0])
    assert 0 < bound <= 65_536 - 1_000 and 4 * bound < 1_048_576  # UTF-8: 4 bytes at most
    assert ".slice(" not in post["with"]["script"] and ".substring(" not in post["with"]["script"]
    assert 'cat review.md >> "$GITHUB_STEP_SUMMARY"' in scripts
    # Every kexp command line in the workflow parses (options exist).
    for command in commands:
        args = [a.strip('"') for a in command.split()[1:] if not a.startswith(">")]
        args = args[: args.index("review.md")] if "review.md" in args else args
        args = ["main" if a == "$BASE" else a for a in args]
        result = CliRunner().invoke(main, [*args, "--help"])
        assert result.exit_code == 0, (command, result.output)
    assert (REPO_ROOT / "docs" / "ci.md").is_file()


def test_readme_describes_recording_experiments_as_a_team() -> None:
    readme = (REPO_ROOT / "README.md").read_text(encoding="utf-8")
    section = readme.split("## Recording experiments as a team")[1].split("\n## ")[0]
    for step in ("Branch", "Pull request", "Review", "Merge"):
        assert f"**{step}.**" in section
    assert "docs/github-workflow.yml" in section and "fetch-depth: 0" in section
    assert readme.index("## Recording experiments as a team") < readme.index("## Development")


def test_a_failure_added_without_a_key_insight_shows_the_error_it_recorded(
    pr: PullRequest,
) -> None:
    """A reviewer reads what a crash taught: with no key insight, the error's telling
    line (a traceback's last), as the consult packet, `kexp lessons` and the report say."""
    create(
        pr.store,
        pid=pr.unroll.id,
        score=0.0,
        status="failed",
        is_buggy=True,
        change_summary="Warp-specialized store - crashed",
        error_message="Traceback (most recent call last):\n"
        '  File "bench.py", line 3, in <module>\n'
        "RuntimeError: CUDA error: misaligned address",
        detailed_description="**Approach**: split the warps into producers and consumers",
    )
    commit_all(pr.repo, "A crash without a key insight")
    lessons = render_markdown(review(pr.store, "main")).split("### Lessons added")[1]
    shown = lessons.split("Warp-specialized store - crashed")[1].split("\n- ")[0]
    assert "Error: RuntimeError: CUDA error: misaligned address" in shown
    assert "worth asking for one" in shown
    assert "Traceback" not in shown


def test_a_key_insight_within_a_paragraph_is_read_alike_by_review_lessons_and_report(
    pr: PullRequest, tmp_path: Path
) -> None:
    """``**Key insight**:`` on the line of ``**Approach**:`` (one paragraph, as an agent
    writes it): the review, ``kexp lessons`` and the report's lessons all give the insight
    (the experiment's page shows the whole description), none "(no key insight)"."""
    create(
        pr.store,
        pid=pr.fused.id,
        score=0.96,
        change_summary="Warp-per-row - -4%",
        detailed_description="**Approach**: warp per row. **Key insight**: occupancy halves on "
        "long rows **Result**: 0.96x",
    )
    commit_all(pr.repo, "A regression, its key insight within the paragraph")
    insight = "occupancy halves on long rows"
    review_md = run_kexp("review", "main", cwd=pr.repo)
    assert review_md.returncode == 0, review_md.stderr
    lesson = review_md.stdout.split("### Lessons added")[1].split("Warp-per-row - -4%")[1]
    assert lesson.split("\n- ")[0].split("\n")[1] == f"  - Key insight: {insight}", lesson
    lessons = run_kexp("--no-pager", "lessons", cwd=pr.repo)
    assert f"Key insight: {insight}\n" in lessons.stdout, lessons.stdout
    assert "(no key insight recorded)" not in lessons.stdout.split("Warp-per-row")[1]
    report = run_kexp("report", "-o", str(tmp_path / "site"), cwd=pr.repo)
    assert report.returncode == 0, report.stderr
    pages = "".join(p.read_text(encoding="utf-8") for p in (tmp_path / "site" / "op").iterdir())
    assert f'<div class="insight">Key insight: {insight}</div>' in pages


def test_an_a_a_control_is_shown_as_a_control_not_as_marginal(repo: Path, store: Store) -> None:
    """A branch adds an A/A run (tagged control): the review's table says ``control``,
    as ``kexp stats`` and the report count it, never the ``marginal`` its score alone
    would give (a reviewer would take it for a step that did nothing)."""
    create(store, change_summary="Baseline port - 1.00x", score=1.0)
    commit_all(repo, "main")
    git(repo, "checkout", "-q", "-b", "agent/aa")
    aa = create(store, score=1.002, tags=["control"], change_summary="A/A control - noise floor")
    commit_all(repo, "A/A")
    result = review(store, "main")
    (entry,) = result.added
    assert entry.control and entry.to_dict()["control"] is True
    row = row_of(render_markdown(result), aa.id[:10])
    assert "🧪 control" in row and not any("marginal" in cell for cell in row), row
