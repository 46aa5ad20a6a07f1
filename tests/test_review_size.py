"""``kexp review`` of a big branch: a comment a reviewer and a forge can use. What to act
on comes first, and ``--max-chars`` holds it to a forge's limit whole-sectioned: each long
section lists its first entries and says how many more there are, and the command that
shows them all (an agent's branch that edits thousands of files made a 3.2 MB comment,
which the CI workflow cut at 65,000 characters, before its Validation section)."""

from __future__ import annotations

import re
import shlex
from pathlib import Path

import pytest
import yaml
from conftest import REPO_ROOT, experiment_fields, git, run_kexp

from kexp import Store
from kexp.review.build import render_markdown, review
from kexp.review.fit import FIRST_ENTRIES
from tests.test_review import code_blocks, table_rows

#: Experiments the branch corrects (each summary edited by hand, as a script would).
CORRECTED = 240
OPERATORS = [f"csrc/kernels/op{n}.cu: kernel{n}" for n in range(12)]
UNKNOWN = "3cb287108dd8007b18b62e1b91a98b7fd31717d5"


def mass_edit_branch(repo: Path, store: Store, count: int, every: int = 1) -> str:
    """main holds ``count`` experiments; the branch agent/mass appends " [mass]" to the
    summary of every ``every``-th, which makes one of them too long (an invalid file):
    its id."""
    made = [
        store.create_experiment(
            **experiment_fields(
                change_summary=f"Step {n} of a campaign - +{n % 9}.00%",
                score=1.0 + (n % 9) / 100,
                operator_sig=OPERATORS[n % len(OPERATORS)],
            )
        )
        for n in range(count)
    ]
    git(repo, "add", "-A", "experiments")
    git(repo, "commit", "-q", "-m", "experiments on main")
    git(repo, "checkout", "-q", "-b", "agent/mass")
    edited = made[::every]
    long = edited[len(edited) // 2]
    for exp in edited:
        path = store.get_experiment(exp.id).path
        assert path is not None
        text = path.read_text(encoding="utf-8")
        tail = " [mass]" + ("x" * 80 if exp is long else "")
        edited_text = re.sub(r"(?m)^(change_summary: .*)$", r"\g<1>" + tail, text)
        # made on a commit the repository lacks: a warning each, as a mass edit of an
        # old store gets (base-commit-unknown)
        edited_text = re.sub(r"(?m)^base_commit: .*$", f"base_commit: {UNKNOWN}", edited_text)
        path.write_text(edited_text, encoding="utf-8")
    git(repo, "commit", "-q", "-am", "mass edit")
    return long.id


@pytest.fixture
def mass_edit(repo: Path, store: Store) -> tuple[Path, str]:
    """main holds CORRECTED experiments; the branch agent/mass edits every summary."""
    return repo, mass_edit_branch(repo, store, CORRECTED)


def test_a_big_review_held_to_max_chars_keeps_validation_and_counts_the_rest(
    mass_edit: tuple[Path, str],
) -> None:
    repo, invalid = mass_edit
    bound = 15_000
    result = run_kexp("review", "main", "agent/mass", "--max-chars", str(bound), cwd=repo)
    assert result.returncode == 0, result.stderr
    comment = result.stdout
    assert len(comment) <= bound
    assert f"0 added · {CORRECTED} corrected · 0 removed" in comment
    # What to act on first: the validation error, before the experiments.
    assert f"❌ 1 validation error(s), {CORRECTED} warning(s)" in comment
    validation = comment.index("### Validation")
    assert validation < comment.index(f"### Corrected ({CORRECTED})")
    problems = next(text for _, text in code_blocks(comment[validation:]))
    assert problems.startswith("experiments/") and invalid in problems.splitlines()[0]
    assert "error[" in problems.splitlines()[0] and "change_summary" in problems
    # A warning a file (its base commit unknown here) leaves room for the experiments.
    shown = problems.count("warning[base-commit-unknown]")
    assert f"*… and {CORRECTED - shown} more problem(s): " in comment
    # Whole sections: every fence closed, each cut section counts what it leaves out and
    # names the command that prints it all.
    code_blocks(comment)
    everything = "`kexp review main agent/mass --max-chars 0` shows them all."
    rows = [row for row in table_rows(comment) if row[0].startswith("`")]
    assert rows[0][0] == f"`{invalid}`"  # the invalid file heads the table
    listed = f"*… and {CORRECTED - len(rows)} more corrected experiment(s) not listed: "
    assert FIRST_ENTRIES < len(rows) < CORRECTED and listed + everything in comment
    assert shown < len(rows)  # the experiments before a warning on each of them
    detailed = comment.count("\n#### ")
    assert f"*… and {CORRECTED - detailed} more correction(s) not detailed: " in comment
    assert "### Lineage" in comment
    # The command it names prints everything.
    whole = run_kexp("review", "main", "agent/mass", "--max-chars", "0", cwd=repo).stdout
    assert len(whole) > bound and "more corrected" not in whole and " shows them all" not in whole
    assert len([row for row in table_rows(whole) if row[0].startswith("`")]) == CORRECTED
    assert whole.count("\n#### ") == CORRECTED
    # By default the comment fits a GitHub comment (65,536 characters) all the same.
    default = run_kexp("review", "main", "agent/mass", cwd=repo).stdout
    assert len(default) <= 60_000 and "### Validation" in default


def test_a_bound_keeps_every_section_the_whole_review_has(mass_edit: tuple[Path, str]) -> None:
    repo, _ = mass_edit
    result = review(Store(repo), "main", "agent/mass")
    whole = render_markdown(result)
    titles = re.findall(r"(?m)^###? .*$", whole)
    for bound in (2_000, 6_000, 20_000):
        comment = render_markdown(result, max_chars=bound)
        assert re.findall(r"(?m)^###? .*$", comment) == titles
        assert len(comment) <= bound
        code_blocks(comment)
    assert render_markdown(result, max_chars=len(whole)) == whole


def test_the_example_workflow_posts_a_review_that_fits_a_comment_and_a_job_summary(
    mass_edit: tuple[Path, str],
) -> None:
    repo, invalid = mass_edit
    workflow = yaml.safe_load((REPO_ROOT / "docs" / "github-workflow.yml").read_text("utf-8"))
    (job,) = workflow["jobs"].values()
    step = next(s for s in job["steps"] if s.get("id") == "review")
    (line,) = [x.strip() for x in step["run"].splitlines() if x.strip().startswith("kexp review")]
    args = shlex.split(line.split(">")[0].replace("$BASE", "main"))[1:]
    comment = run_kexp(*args, cwd=repo).stdout  # HEAD: the branch, as the merge would land
    assert len(comment) <= 65_536 and len(comment.encode("utf-8")) < 1_048_576
    assert "### Validation" in comment and invalid in comment
    assert "shows them all." in comment


def test_a_review_of_many_campaigns_derives_and_reads_them_together(
    repo: Path, store: Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Each campaign the branch touches is ranked on both sides: derived in one go and
    its best read from git in one go, not once a campaign (a review of 2,915 corrections
    at 100,000 experiments took minutes doing it once a campaign, each derivation
    walking the whole store's controls)."""
    import kexp.review.side
    from kexp.storage.snapshot import GitRevision

    mass_edit_branch(repo, store, 10 * len(OPERATORS), every=5)  # 2 of each 10
    expected = render_markdown(review(Store(repo), "main", "agent/mass"))
    derivations: list[int] = []
    reads: list[int] = []
    derive_for = kexp.review.side.derive_for
    check_files = GitRevision.check_files

    def counted_derive(*args: object, **kwargs: object) -> object:
        derivations.append(1)
        return derive_for(*args, **kwargs)  # type: ignore[arg-type]

    def counted_read(self: GitRevision, paths: object, settings: object) -> object:
        reads.append(1)
        return check_files(self, paths, settings)  # type: ignore[arg-type]

    monkeypatch.setattr(kexp.review.side, "derive_for", counted_derive)
    monkeypatch.setattr(GitRevision, "check_files", counted_read)
    result = review(Store(repo), "main", "agent/mass")
    assert render_markdown(result) == expected
    campaigns = {(e.operator_sig, e.dtype_sig, e.env) for e in result.corrected}
    assert len(campaigns) == len(OPERATORS)
    assert len(derivations) <= 4 and len(reads) <= 4, (derivations, reads)


def test_a_summary_edit_moves_no_best_between_tied_experiments(repo: Path, store: Store) -> None:
    """Two steps tied for a campaign's best: the one listed first is its best, before
    and after a branch that only edits its summary (the merge base's side listed the
    corrected files last, and called the other one the best before: a "Best changed"
    line on every campaign of a mass edit)."""
    first, second = (
        store.create_experiment(**experiment_fields(change_summary=f"Tied step {n} - +5%"))
        for n in (1, 2)
    )
    git(repo, "add", "-A", "experiments")
    git(repo, "commit", "-q", "-m", "two tied steps")
    paths = sorted(str(store.get_experiment(e.id).path) for e in (first, second))
    git(repo, "checkout", "-q", "-b", "agent/mass")
    path = Path(paths[0])  # the one listed first
    path.write_text(path.read_text("utf-8").replace("- +5%", "- +5% [mass]"), "utf-8")
    git(repo, "commit", "-q", "-am", "mass edit")
    result = review(Store(repo), "main", "agent/mass")
    assert len(result.corrected) == 1 and result.best_changes == []
    assert "Best changed" not in render_markdown(result)


def test_the_command_that_shows_everything_names_the_root_the_review_was_given(
    repo: Path, store: Store, tmp_path: Path
) -> None:
    """A review run from outside the repository with ``--root DIR`` and cut to fit says
    to run it again with ``--root DIR``: the command it gives, run from the same folder,
    prints the whole review."""
    mass_edit_branch(repo, store, 60)
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    cut = run_kexp("--root", str(repo), "review", "main", "agent/mass", "--max-chars", "6000",
                   cwd=elsewhere)  # fmt: skip
    assert cut.returncode == 0, cut.stderr
    found = re.search(r"`(kexp [^`]*--max-chars 0)` shows them all", cut.stdout)
    assert found is not None, cut.stdout
    args = shlex.split(found.group(1))
    assert args[1:3] == ["--root", str(repo)], args
    whole = run_kexp(*args[1:], cwd=elsewhere)
    assert whole.returncode == 0, whole.stderr
    assert "shows them all" not in whole.stdout and "0 added · 60 corrected" in whole.stdout
