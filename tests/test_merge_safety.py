"""Merge safety by construction: experiments recorded on parallel branches (as parallel
agents do, each in its own worktree) merge without conflicts, in real git repositories."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest
from conftest import experiment_fields, git

from kexp import KernelExperiment, Store
from kexp.review.build import review, validate_changed


def commit_all(repo: Path, message: str) -> None:
    git(repo, "add", "-A", "experiments")
    git(repo, "commit", "-q", "-m", message)


def agent_worktree(repo: Path, branch: str) -> tuple[Path, Store]:
    """A second checkout on a new branch from main, as an agent working in parallel has."""
    folder = repo.parent / branch
    git(repo, "worktree", "add", "-q", "-b", branch, str(folder), "main")
    return folder, Store(folder)


def record(store: Store, count: int, label: str, pid: str = "") -> list[KernelExperiment]:
    head = git(store.root, "rev-parse", "HEAD")
    return [
        store.create_experiment(
            **experiment_fields(
                change_summary=f"{label} iteration {i} - +{i}.0%",
                score=1.0 + i / 100,
                pid=pid,
                measured_against="parent" if pid else "",
                base_commit=head,
                author=label,
            )
        )
        for i in range(count)
    ]


def merge(repo: Path, branch: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["git", "merge", "--no-edit", "-q", branch],
        cwd=repo,
        capture_output=True,
        text=True,
    )


def conflicted(repo: Path) -> list[str]:
    return git(repo, "diff", "--name-only", "--diff-filter=U").splitlines()


@pytest.fixture
def main_store(repo: Path, store: Store) -> Store:
    """A store with one committed experiment on main."""
    record(store, 1, "seed")
    commit_all(repo, "seed experiment")
    return store


def test_recording_touches_only_the_experiments_own_file(repo: Path, main_store: Store) -> None:
    # No index or cache file that every experiment would touch is ever committed.
    (exp,) = record(main_store, 1, "solo")
    main_store.update_experiment(exp.id, score=1.5)
    assert exp.path is not None
    status = git(repo, "status", "--porcelain", "--untracked-files=all").splitlines()
    assert status == [f"?? {exp.path.relative_to(repo).as_posix()}"]
    assert (repo / ".kexp").is_dir()  # the cache exists, and git ignores it


def test_two_branches_each_adding_twenty_experiments_merge_without_conflict(
    repo: Path, main_store: Store
) -> None:
    parent = main_store.list_experiments()[0].id
    folders = {}
    for agent in ("agent-a", "agent-b"):
        folder, store = agent_worktree(repo, agent)
        record(store, 20, agent, pid=parent)
        commit_all(folder, f"{agent}: 20 experiments")
        folders[agent] = folder
    for agent in folders:
        result = merge(repo, agent)
        assert result.returncode == 0, result.stdout + result.stderr
        assert conflicted(repo) == []
    store = Store(repo)
    experiments = store.list_experiments()
    assert len(experiments) == 41
    assert {e.author for e in experiments} == {"seed", "agent-a", "agent-b"}
    assert store.validate() == []
    # Each branch's review, as its pull request showed it, lists its own 20.
    assert len(review(store, "main~2", "agent-b").added) == 20


def test_two_branches_correcting_the_same_experiment_conflict_only_in_that_file(
    repo: Path, main_store: Store
) -> None:
    (target,) = main_store.list_experiments()
    assert target.path is not None
    for agent, score in (("agent-a", 1.10), ("agent-b", 1.20)):
        folder, store = agent_worktree(repo, agent)
        store.update_experiment(target.id, score=score)
        record(store, 3, agent)  # and each records new experiments too
        commit_all(folder, f"{agent}: rescored and recorded")
    assert merge(repo, "agent-a").returncode == 0
    result = merge(repo, "agent-b")
    assert result.returncode != 0
    assert conflicted(repo) == [target.path.relative_to(repo).as_posix()]
    # The other branch's new experiments came through; only the score line conflicts.
    assert len(Store(repo).paths()) == 1 + 3 + 3
    text = target.path.read_text(encoding="utf-8")
    assert "<<<<<<<" in text and "score: 1.1\n" in text and "score: 1.2\n" in text
    git(repo, "merge", "--abort")


def test_corrections_of_different_fields_of_one_experiment_merge_cleanly(
    repo: Path, main_store: Store
) -> None:
    (target,) = main_store.list_experiments()
    changes = {"agent-a": {"score": 1.25}, "agent-b": {"env": "MI300X, ROCm 7.1.0"}}
    for agent, fields in changes.items():
        folder, store = agent_worktree(repo, agent)
        store.update_experiment(target.id, **fields)
        commit_all(folder, f"{agent}: corrected {', '.join(fields)}")
    for agent in changes:
        assert merge(repo, agent).returncode == 0
    merged = Store(repo).get_experiment(target.id)
    assert (merged.score, merged.env) == (1.25, "MI300X, ROCm 7.1.0")


def test_the_same_id_on_two_branches_is_a_duplicate_naming_both_paths_after_the_merge(
    repo: Path, main_store: Store
) -> None:
    same_id = "6f0000000000beef"
    paths = []
    for agent in ("agent-a", "agent-b"):
        folder, store = agent_worktree(repo, agent)
        exp = store.create_experiment(
            **experiment_fields(id=same_id, change_summary=f"Same id from {agent}")
        )
        assert exp.path is not None
        paths.append(exp.path.relative_to(folder).as_posix())
        commit_all(folder, f"{agent}: an experiment")
        # Each pull request on its own is fine.
        assert validate_changed(Store(folder), "main") == []
    assert paths[0] != paths[1]
    for agent in ("agent-a", "agent-b"):
        assert merge(repo, agent).returncode == 0  # different files: git sees no conflict
    problems = [p for p in Store(repo).validate() if p.code == "duplicate-id"]
    assert sorted(Path(p.path).relative_to(repo).as_posix() for p in problems) == sorted(paths)
    for problem in problems:
        other = next(p for p in paths if not problem.path.endswith(p))
        assert other in problem.message
    # The next pull request's CI sees it too: the store-wide checks cover the whole store.
    after_merge = validate_changed(Store(repo), "HEAD")
    assert {p.code for p in after_merge} == {"duplicate-id"}
