"""An experiment's history and the changes between revisions, in real repositories."""

from __future__ import annotations

import datetime as dt
import os
import re
import subprocess
from pathlib import Path
from typing import Any

import pytest
from conftest import experiment_fields, git

import kexp
from kexp import ExperimentNotFoundError, GitError, Store


def commit_all(repo: Path, message: str, *, author: str | None = None) -> str:
    git(repo, "add", "-A")
    extra = ["--author", author] if author else []
    git(repo, "commit", "-q", "-m", message, *extra)
    return git(repo, "rev-parse", "HEAD")


@pytest.fixture
def corrected(repo: Path, store: Store) -> dict[str, Any]:
    """An experiment recorded, its score corrected three times, then its file renamed,
    with unrelated commits in between."""
    exp = store.create_experiment(**experiment_fields(score=1.02))
    other = store.create_experiment(**experiment_fields(change_summary="Other - +1%"))
    commits = [commit_all(repo, "record unroll experiment\n\nmeasured on MI300X")]
    for score, who in ((1.05, "Ana <ana@example.com>"), (1.07, None), (0.98, None)):
        store.update_experiment(exp.id, score=score)
        commits.append(commit_all(repo, f"correct score to {score}", author=who))
        store.update_experiment(other.id, env=f"MI300X run {score}")
        (repo / "kernel.cu").write_text(f"// {score}\n")
        commit_all(repo, "unrelated: other experiment and kernel")
    assert exp.path is not None
    # A month folder no experiment was created in, whatever today's date.
    moved = exp.path.parent.parent.parent / "2000" / "01" / f"{exp.id}-unroll-by-4.md"
    moved.parent.mkdir(parents=True)
    git(repo, "mv", str(exp.path), str(moved))
    commits.append(commit_all(repo, "rename: shorter slug"))
    return {"exp": exp, "commits": commits, "moved": moved, "other": other}


def test_history_lists_every_commit_with_the_fields_it_changed(
    repo: Path, store: Store, corrected: dict[str, Any]
) -> None:
    exp, commits = corrected["exp"], corrected["commits"]
    entries = store.history(exp.id)
    assert [e.commit for e in entries] == commits
    assert [e.action for e in entries] == ["added", "modified", "modified", "modified", "renamed"]
    added, fix1, fix2, fix3, renamed = entries
    assert added.changes["score"] == (None, 1.02)
    assert added.changes["id"] == (None, exp.id)
    assert added.summary == "record unroll experiment"
    assert added.message == "record unroll experiment\n\nmeasured on MI300X"
    assert fix1.changes == {"score": (1.02, 1.05)}
    assert (fix1.author, fix1.author_email) == ("Ana", "ana@example.com")
    assert fix2.changes == {"score": (1.05, 1.07)}
    assert (fix2.author, fix2.author_email) == ("Test Engineer", "test@example.com")
    assert fix3.changes == {"score": (1.07, 0.98)}
    assert fix3.summary == "correct score to 0.98"
    assert dt.datetime.fromisoformat(fix3.date).tzinfo is not None
    assert renamed.changes == {}
    assert renamed.old_path == exp.path.relative_to(repo).as_posix()
    assert renamed.path == corrected["moved"].relative_to(repo).as_posix()
    data = fix1.to_dict()
    assert data["changes"] == {"score": {"old": 1.02, "new": 1.05}}
    assert data["summary"] == "correct score to 1.05"


def test_history_by_prefix_module_function_and_at_a_revision(
    repo: Path, store: Store, corrected: dict[str, Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    exp, commits = corrected["exp"], corrected["commits"]
    monkeypatch.chdir(repo)
    assert [e.commit for e in kexp.history(exp.id[:12])] == commits
    # Up to a revision: the store at that revision, or an explicit revision.
    assert [e.commit for e in store.at(commits[2]).history(exp.id)] == commits[:3]
    assert [e.commit for e in store.history(exp.id, revision=commits[1])] == commits[:2]


def test_history_of_a_deleted_experiment_and_of_an_unknown_id(
    repo: Path, store: Store, corrected: dict[str, Any]
) -> None:
    exp = corrected["exp"]
    store.delete_experiment(exp.id)
    gone = commit_all(repo, "drop the experiment")
    entries = store.history(exp.id)
    assert entries[-1].action == "deleted" and entries[-1].commit == gone
    with pytest.raises(ExperimentNotFoundError):
        store.history("0123456789abcdef")
    with pytest.raises(GitError, match="unknown revision"):
        store.history(corrected["other"].id, revision="nope")


def test_uncommitted_experiment_has_no_history_yet(store: Store) -> None:
    exp = store.create_experiment(**experiment_fields())
    assert store.history(exp.id) == []


# --- changes between revisions -------------------------------------------------------


def test_changes_between_two_revisions(repo: Path, store: Store) -> None:
    kept = store.create_experiment(**experiment_fields(change_summary="Kept - +1%"))
    fixed = store.create_experiment(**experiment_fields(change_summary="Fixed - +2%"))
    dropped = store.create_experiment(**experiment_fields(change_summary="Dropped - +3%"))
    moved = store.create_experiment(**experiment_fields(change_summary="Moved - +4%"))
    base = commit_all(repo, "base")
    store.update_experiment(fixed.id, score=1.5, tags=["rechecked"])
    store.delete_experiment(dropped.id)
    assert moved.path is not None
    git(repo, "mv", str(moved.path), str(moved.path.with_name(f"{moved.id}-renamed.md")))
    added = store.create_experiment(**experiment_fields(change_summary="Added - +5%"))
    head = commit_all(repo, "pr")
    (repo / "experiments" / "README.md").write_text("not an experiment\n")
    commit_all(repo, "readme")

    result = store.changes(base, head)
    assert (result.base, result.head) == (base, head)
    assert [c.id for c in result.added] == [added.id]
    assert [c.id for c in result.removed] == [dropped.id]
    by_id = {c.id: c for c in result.modified}
    assert set(by_id) == {fixed.id, moved.id}
    assert by_id[fixed.id].fields == {"score": (1.019, 1.5), "tags": (None, ["rechecked"])}
    assert by_id[fixed.id].old is not None and by_id[fixed.id].old.score == pytest.approx(1.019)
    assert by_id[fixed.id].new is not None and by_id[fixed.id].new.score == pytest.approx(1.5)
    assert by_id[moved.id].fields == {}
    assert by_id[moved.id].old_path == moved.path
    assert by_id[moved.id].path.name == f"{moved.id}-renamed.md"
    assert result.added[0].new is not None and result.added[0].old is None
    assert result.removed[0].old is not None and result.removed[0].new is None
    assert kept.id not in {c.id for c in result}
    assert len(result) == 4
    assert store.changes(head, "HEAD").added == []


def test_changes_against_the_working_tree(repo: Path, store: Store) -> None:
    exp = store.create_experiment(**experiment_fields())
    base = commit_all(repo, "base")
    store.update_experiment(exp.id, score=1.25)  # not staged
    new = store.create_experiment(**experiment_fields(change_summary="New - +9%"))  # untracked
    assert new.path is not None
    broken = new.path.with_name("0123456789abcdef-broken.md")
    broken.write_text("---\nid: [\n---\n")
    result = kexp.Store(repo).changes(base)
    assert result.head is None
    assert [c.fields for c in result.modified] == [{"score": (1.019, 1.25)}]
    assert sorted(c.id for c in result.added) == sorted([new.id, "0123456789abcdef"])
    (problem,) = next(c for c in result.added if c.id == "0123456789abcdef").problems
    assert problem.severity == "error"
    assert store.changes("HEAD", None).modified[0].id == exp.id


def test_changes_name_every_file_as_git_lists_it_whatever_its_bytes(
    repo: Path, store: Store
) -> None:
    """The working tree's changes come from two git walks run at once (tracked and
    untracked files): both are read whole, with names that are not UTF-8 kept as the
    file system gives them."""
    exp = store.create_experiment(**experiment_fields())
    assert exp.path is not None
    base = commit_all(repo, "base")
    store.update_experiment(exp.id, score=1.25)
    odd = os.fsdecode(b"notes-\xff.md")  # a Markdown file kexp never reads: a stray
    (exp.path.parent / odd).write_text("a note\n")
    many = [f"{n:016x}" for n in range(2000)]  # more names than a pipe holds (64 KiB)
    for exp_id in many:
        (exp.path.parent / f"{exp_id}-step.md").write_text("---\nid: [\n---\n")
    result = store.changes(base)
    assert [c.id for c in result.modified] == [exp.id]
    assert [c.id for c in result.added] == many
    assert [Path(p.path).name for p in result.strays] == [odd]
    assert result.strays[0].code == "stray-file"


def test_changes_unknown_revision(repo: Path, store: Store) -> None:
    with pytest.raises(GitError, match="unknown revision 'nope'"):
        store.changes("nope")


def test_history_includes_a_merge_that_resolved_a_conflict(repo: Path, store: Store) -> None:
    exp = store.create_experiment(**experiment_fields())
    commit_all(repo, "record")
    git(repo, "checkout", "-q", "-b", "rerun")
    store.update_experiment(exp.id, score=1.1)
    rerun = commit_all(repo, "rerun: 1.1")
    git(repo, "checkout", "-q", "main")
    store.update_experiment(exp.id, score=1.2)
    commit_all(repo, "remeasured: 1.2")
    merged = subprocess.run(
        ["git", "merge", "-q", "rerun"], cwd=repo, capture_output=True, text=True
    )
    assert merged.returncode != 0  # both changed the score line
    store_text = exp.path.read_text() if exp.path else ""
    resolved = re.sub(r"<<<<<<< HEAD\n.*?>>>>>>> rerun\n", "score: 1.15\n", store_text, flags=re.S)
    assert exp.path is not None
    exp.path.write_text(resolved)
    merge = commit_all(repo, "merge rerun: average")
    entries = store.history(exp.id)
    assert [e.summary for e in entries] == [
        "record",
        "rerun: 1.1",
        "remeasured: 1.2",
        "merge rerun: average",
    ] or [e.summary for e in entries] == [
        "record",
        "remeasured: 1.2",
        "rerun: 1.1",
        "merge rerun: average",
    ]
    by_commit = {e.commit: e for e in entries}
    assert by_commit[rerun].changes == {"score": (1.019, 1.1)}
    assert by_commit[merge].changes == {"score": (1.2, 1.15)}


@pytest.mark.parametrize("merges", ["merge commit", "two merges"])
def test_an_experiment_merged_in_is_added_once(repo: Path, store: Store, merges: str) -> None:
    """Bob records an experiment on his branch; a pull request merges it into main with a
    merge commit (and, with two merges, his clone's main merges main back in after a
    commit of its own): kexp log says it was added once, by Bob's commit, as git log
    --follow shows it, not again by each merge that brought the same file in."""
    git(repo, "checkout", "-q", "-b", "kexp/bob")
    exp = store.create_experiment(**experiment_fields())
    added = commit_all(repo, "kexp sync: 1 experiment file(s)", author="Bob <bob@example.com>")
    git(repo, "checkout", "-q", "main")
    (repo / "kernel.cu").write_text("// main moved on\n")
    commit_all(repo, "kernel: main moved on")
    git(repo, "merge", "-q", "--no-ff", "--no-edit", "kexp/bob")
    if merges == "two merges":
        git(repo, "checkout", "-q", "-b", "clone", "kexp/bob")
        (repo / "notes.txt").write_text("mine\n")
        commit_all(repo, "notes")
        git(repo, "merge", "-q", "--no-ff", "--no-edit", "main")
    entries = store.history(exp.id)
    assert [(e.commit, e.action) for e in entries] == [(added, "added")], [
        (e.summary, e.action) for e in entries
    ]
