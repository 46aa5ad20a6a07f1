"""Hand-named files under ``experiments/``: one rule decides what an experiment file is
(``<16 hex id>-<anything>.md``, :data:`kexp.format.validate.EXPERIMENT_NAME`), every listing
applies it, and any other Markdown file there is a validation error naming the rename.

Issue 28, items 2 and 3: ``<id>-Unroll_4.md`` was skipped by every command and passed
review; ``UNROLL.md`` made ``kexp validate`` say 0 errors.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from click.testing import CliRunner, Result
from conftest import experiment_fields, git, run_kexp

from kexp import Store
from kexp.cli.main import main
from kexp.storage.sources import WorkingTree

#: Names a person gives an experiment file by hand: each is an experiment (its slug is
#: only text).
HAND_NAMES = ["{id}-Unroll_4.md", "{id}-UNROLL.md", "{id}-unroll 4.md", "{id}-déroulé.md"]


def kexp(repo: Path, *args: str) -> Result:
    return CliRunner().invoke(main, ["--root", str(repo), *args])


def rename(path: Path, name: str) -> Path:
    target = path.with_name(name)
    path.rename(target)
    return target


@pytest.mark.parametrize("pattern", HAND_NAMES)
def test_a_hand_named_experiment_file_is_read_by_every_command(
    repo: Path, store: Store, pattern: str
) -> None:
    exp = store.create_experiment(**experiment_fields())
    path = rename(exp.path, pattern.format(id=exp.id))
    uncached = Store(repo, source=WorkingTree(repo / "experiments", cacheable=False))
    for reader in (store, uncached):
        assert [e.id for e in reader.list_experiments()] == [exp.id]
        assert [e.id for e in reader.top_experiments()] == [exp.id]
        assert reader.get_experiment(exp.id[:10]).path == path
    assert store.validate() == []
    shown = kexp(repo, "show", exp.id[:10], "--field", "score")
    assert shown.exit_code == 0 and shown.stdout.strip() == "1.019", shown.output
    assert kexp(repo, "validate").exit_code == 0
    # A correction keeps its name.
    store.update_experiment(exp.id, score=1.5)
    assert path.exists() and uncached.get_experiment(exp.id).score == 1.5
    # Committed: at a revision, and across refs.
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", "hand-named")
    assert store.at("HEAD").get_experiment(exp.id).score == 1.5
    assert [e.id for e in Store(repo, refs=["main"]).list_experiments()] == [exp.id]


def stray_cases(exp_id: str) -> list[tuple[str, str | None]]:
    """(path below experiments/, the rename validation must name, or None for "no id
    known": move it out or give it one)."""
    return [
        ("UNROLL.md", f"{exp_id}-unrolled-the-inner-loop-by-4-plus-1p90pct.md"),
        (
            f"2026/{exp_id.upper()}-unroll.md",
            f"{exp_id}-unrolled-the-inner-loop-by-4-plus-1p90pct.md",
        ),
        (f"{exp_id}-unroll.MD", f"{exp_id}-unrolled-the-inner-loop-by-4-plus-1p90pct.md"),
        (f"{exp_id}_unroll.md", f"{exp_id}-unrolled-the-inner-loop-by-4-plus-1p90pct.md"),
        ("notes/todo.md", None),
        ("2026/README.md", None),
    ]


@pytest.mark.parametrize("case", range(6))
def test_any_other_markdown_file_is_an_error_naming_the_rename(
    repo: Path, store: Store, case: int
) -> None:
    exp = store.create_experiment(**experiment_fields())
    relative, rename_to = stray_cases(exp.id)[case]
    stray = repo / "experiments" / relative
    stray.parent.mkdir(parents=True, exist_ok=True)
    if rename_to is None:
        stray.write_text("# notes\n\nthings to try next\n")
    else:
        shutil.move(exp.path, stray)  # the experiment itself, misnamed
    # Not reported: the folder's README, other files, hidden files.
    (repo / "experiments" / "core").write_bytes(b"\0" * 1000)
    (repo / "experiments" / "notes.txt").write_text("notes\n")
    (repo / "experiments" / ".draft.md").write_text("hidden\n")
    before = {p: p.read_bytes() for p in (repo / "experiments").rglob("*") if p.is_file()}

    problems = store.validate()
    assert [(p.path, p.code, p.severity) for p in problems] == [(str(stray), "stray-file", "error")]
    if rename_to is not None:
        assert f"rename it to {rename_to}" in problems[0].hint
    else:
        assert "move it out of experiments/" in problems[0].hint
    result = kexp(repo, "validate")
    assert result.exit_code == 1
    assert f"experiments/{relative}:1:1: error[stray-file]" in result.stdout
    # Given by name (a pre-commit hook passes the files), and at a revision.
    assert kexp(repo, "validate", str(stray)).exit_code == 1
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", "stray")
    assert [p.code for p in store.at("HEAD").validate()] == ["stray-file"]
    assert {p: p.read_bytes() for p in before} == before  # nothing changed


def test_a_stray_file_on_another_branch_is_reported_when_validating_across_refs(
    repo: Path, store: Store
) -> None:
    exp = store.create_experiment(**experiment_fields())
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", "base")
    git(repo, "checkout", "-q", "-b", "notes")
    misnamed = repo / "experiments" / "2026" / "UNROLL.md"
    misnamed.parent.mkdir(parents=True, exist_ok=True)
    misnamed.write_bytes(exp.path.read_bytes())  # a copy of the experiment, misnamed
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", "a stray on a branch")
    git(repo, "checkout", "-q", "main")
    assert not misnamed.exists() and store.validate() == []

    problems = Store(repo, all_refs=True).validate()
    assert [(p.path, p.code) for p in problems] == [(str(misnamed), "stray-file")]
    # Its front-matter was read from the branch: the rename names the experiment's id.
    assert f"rename it to {exp.path.name}" in problems[0].hint, problems[0].hint
    result = kexp(repo, "validate", "--refs", "notes")
    assert result.exit_code == 1
    assert "experiments/2026/UNROLL.md:1:1: error[stray-file]" in result.stdout
    assert kexp(repo, "validate").exit_code == 0


def test_review_and_validate_changed_see_hand_named_and_stray_files(
    repo: Path, store: Store
) -> None:
    store.create_experiment(**experiment_fields())
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", "base")
    git(repo, "checkout", "-q", "-b", "pr")
    new = store.create_experiment(**experiment_fields(change_summary="Unroll 4 - fast"))
    text = new.path.read_text().replace("score: 1.019", "score: fast")
    new.path.unlink()
    (new.path.parent / f"{new.id}-Unroll_4.md").write_text(text)

    for head in ([], ["HEAD"]):
        if head:
            git(repo, "add", "-A")
            git(repo, "commit", "-q", "-m", "hand-named")
        changed = kexp(repo, "validate", "--changed", "main", *(["--rev", "HEAD"] if head else []))
        assert changed.exit_code == 1 and "error[wrong-type] score" in changed.stdout
        review = kexp(repo, "review", "main", *head)
        assert "**1 added · 0 corrected · 0 removed**" in review.stdout, review.output
        assert "❌ 1 validation error(s)" in review.stdout

    (repo / "experiments" / "UNROLL.md").write_text("---\nscore: fast\n---\n")
    changed = kexp(repo, "validate", "--changed", "HEAD")
    assert changed.exit_code == 1
    assert "experiments/UNROLL.md:1:1: error[stray-file]" in changed.stdout
    review = kexp(repo, "review", "HEAD")
    assert "❌ 1 validation error(s)" in review.stdout and "UNROLL.md" in review.stdout


def test_fmt_offers_the_canonical_name_and_renames_nothing(repo: Path, store: Store) -> None:
    exp = store.create_experiment(**experiment_fields())
    path = rename(exp.path, f"{exp.id}-Unroll_4.md")
    result = kexp(repo, "fmt")
    assert result.exit_code == 0
    assert f"kexp would name it {exp.id}-unroll-4.md" in result.stderr
    assert path.exists() and [p.name for p in path.parent.iterdir()] == [path.name]


@pytest.mark.parametrize("name", ["unroll.md", "unroll 4 notes.md"])
def test_the_rename_a_stray_file_is_given_runs_as_written(
    repo: Path, store: Store, name: str
) -> None:
    """An agent wrote an experiment and renamed its file by hand (not committed yet, the
    usual case; a name with a space): the hint said ``git mv OLD NEW``, which git
    refuses for an untracked file ("not under version control") and which the shell
    splits at the space. Run as printed, the command given now renames it."""
    import re
    import subprocess

    exp = store.create_experiment(**experiment_fields())
    assert exp.path is not None
    rename(exp.path, name)
    found = run_kexp("validate", cwd=repo)
    assert found.returncode == 1
    command = re.search(r"\((mv .*)\)$", found.stdout, re.MULTILINE)
    assert command is not None, found.stdout

    subprocess.run(["bash", "-c", command.group(1)], cwd=repo, check=True)
    assert run_kexp("validate", cwd=repo).returncode == 0
    assert [e.id for e in Store(repo).list_experiments()] == [exp.id]


def test_the_rename_kexp_fmt_gives_runs_as_written(repo: Path, store: Store) -> None:
    """``kexp fmt``'s note on a hand-named file (its slug not kexp's, a space in it) gave
    ``git mv`` unquoted: refused for the untracked file, split at the space."""
    import re
    import subprocess

    exp = store.create_experiment(**experiment_fields())
    assert exp.path is not None
    hand_named = rename(exp.path, f"{exp.id}-unroll 4 notes.md")
    noted = run_kexp("fmt", cwd=repo)
    command = re.search(r"\(to rename it: (mv .*)\)$", noted.stderr, re.MULTILINE)
    assert command is not None, noted.stderr
    assert f"kexp would name it {exp.id}-unroll-4-notes.md" in noted.stderr

    subprocess.run(["bash", "-c", command.group(1)], cwd=repo, check=True)
    assert not hand_named.exists()
    assert hand_named.with_name(f"{exp.id}-unroll-4-notes.md").exists()
