"""Every read command has its Python twin at the top of ``kexp`` (one library call):
``kexp.lessons``, ``kexp.stats``, ``kexp.tree`` and ``kexp.review_changes`` answer what
``kexp lessons``, ``kexp stats``, ``kexp tree`` and ``kexp review`` print, on the
bundled store and on a pull request."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from conftest import REPO_ROOT, git, run_kexp

import kexp
from kexp.output.replies import lessons_reply, tree_reply
from kexp.review.render import to_json


def _cli_json(*args: str, cwd: Path) -> object:
    done = run_kexp(*args, "--json", cwd=cwd)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def test_the_read_twins_answer_as_the_commands_do(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("KEXP_ROOT", str(REPO_ROOT))
    assert kexp.stats().to_dict() == _cli_json("stats", cwd=REPO_ROOT)
    assert kexp.stats(env="H100").to_dict() == _cli_json("stats", "--env", "H100", cwd=REPO_ROOT)
    assert tree_reply(kexp.tree()) == _cli_json("tree", cwd=REPO_ROOT)
    (first,) = kexp.top_experiments(1)
    assert tree_reply(kexp.tree(first.id)) == _cli_json("tree", first.id, cwd=REPO_ROOT)
    with pytest.raises(kexp.KexpError, match="an experiment id or filters"):
        kexp.tree(first.id, operator="x")
    assert lessons_reply(kexp.lessons(), (), 20) == _cli_json("lessons", cwd=REPO_ROOT)


def test_review_changes_is_the_review_of_the_pull_request(
    repo: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    git(repo, "checkout", "-q", "-b", "feature")
    step = ("--summary", "Tile 64 - +10%", "--score", "1.1", "--operator", "k.cu: gemm")
    added = run_kexp("add", *step, "--dtype", "fp16", "--env", "H100", "--json", cwd=repo)
    assert added.returncode == 0, added.stderr
    git(repo, "add", "experiments")
    git(repo, "commit", "-q", "-m", "tile 64")
    monkeypatch.setenv("KEXP_ROOT", str(repo))
    review = kexp.review_changes("main", "feature")
    assert [e.id for e in review.added] == [json.loads(added.stdout)["id"]]
    assert to_json(review) == _cli_json("review", "main", "feature", cwd=repo)
