"""The git-facing options of the command: log, --rev, --reachable-from, validate --strict."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

from conftest import git, run_kexp

from kexp import KernelExperiment, Store


def _commit_all(repo: Path, message: str) -> None:
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", message)


def test_log_shows_a_score_correction_with_its_commit(
    repo: Path, store: Store, make_experiment: Callable[..., KernelExperiment]
) -> None:
    exp = make_experiment(score=1.019)
    _commit_all(repo, "Record unroll 4")
    store.update_experiment(exp.id, score=1.021)
    _commit_all(repo, "Correct the unroll 4 score")
    correction = git(repo, "rev-parse", "HEAD")

    result = run_kexp("log", exp.id[:10], cwd=repo)
    assert result.returncode == 0, result.stderr
    assert "Correct the unroll 4 score" in result.stdout
    assert correction[:12] in result.stdout
    assert "score: 1.019 → 1.021" in result.stdout

    entries = json.loads(run_kexp("log", exp.id, "--json", cwd=repo).stdout)
    assert [e["action"] for e in entries] == ["added", "modified"]
    assert entries[1]["commit"] == correction
    assert entries[1]["changes"]["score"] == {"old": 1.019, "new": 1.021}


def test_rev_reads_an_older_state_without_touching_the_working_tree(
    repo: Path, store: Store, make_experiment: Callable[..., KernelExperiment]
) -> None:
    first = make_experiment(score=1.05)
    _commit_all(repo, "first")
    make_experiment(score=1.30, change_summary="Second try - +30%")
    _commit_all(repo, "second")
    before = {p: p.read_bytes() for p in store.paths()}

    old = json.loads(run_kexp("top", "--rev", "HEAD~1", "--json", cwd=repo).stdout)
    assert [e["id"] for e in old] == [first.id]
    now = json.loads(run_kexp("top", "--json", cwd=repo).stdout)
    assert len(now) == 2
    shown = run_kexp("show", first.id[:9], "--rev", "HEAD~1", "--field", "score", cwd=repo)
    assert shown.stdout.strip() == "1.05"
    assert {p: p.read_bytes() for p in store.paths()} == before
    assert git(repo, "status", "--porcelain") == ""


def test_option_like_revisions_are_refused(repo: Path, store: Store) -> None:
    for revision in ("--output=/tmp/x", "-p", "HEAD:experiments", "a..b"):
        result = run_kexp("top", "--rev", revision, cwd=repo)
        assert result.returncode == 2, (revision, result.stdout, result.stderr)
        assert result.stderr.startswith("kexp: error: ")
        assert "Traceback" not in result.stderr


def test_reachable_from_keeps_what_a_branch_contains(
    repo: Path, store: Store, make_experiment: Callable[..., KernelExperiment]
) -> None:
    on_main = make_experiment(change_summary="Measured on main - +5%")
    git(repo, "checkout", "-q", "-b", "feature")
    (repo / "kernel.cu").write_text("// faster\n")
    git(repo, "commit", "-q", "-am", "feature kernel change")
    on_feature = make_experiment(change_summary="Measured on feature - +7%")
    git(repo, "checkout", "-q", "main")

    from_main = json.loads(
        run_kexp("list", "--reachable-from", "main", "--json", "--fields", "id", cwd=repo).stdout
    )
    assert [e["id"] for e in from_main] == [on_main.id]
    from_feature = json.loads(
        run_kexp("list", "--reachable-from", "feature", "--json", "--fields", "id", cwd=repo).stdout
    )
    assert sorted(e["id"] for e in from_feature) == sorted([on_main.id, on_feature.id])


def test_validate_strict_makes_an_unknown_base_commit_an_error(
    repo: Path, store: Store, make_experiment: Callable[..., KernelExperiment]
) -> None:
    make_experiment(base_commit="0123456789abcdef0123456789abcdef01234567")
    relaxed = run_kexp("validate", cwd=repo)
    assert relaxed.returncode == 0 and "warning[base-commit-unknown]" in relaxed.stdout
    strict = run_kexp("validate", "--strict", cwd=repo)
    assert strict.returncode == 1 and "error[base-commit-unknown]" in strict.stdout
