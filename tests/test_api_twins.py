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


def _store_paragraph() -> str:
    """The README's paragraph on a store given (after the table of functions)."""
    text = (REPO_ROOT / "README.md").read_text(encoding="utf-8")
    (paragraph,) = [p for p in text.split("\n\n") if p.startswith("**A store given.**")]
    return " ".join(paragraph.split())


def test_the_readme_says_which_functions_a_store_has_and_which_take_one(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Trial K07: the README said ``kexp.Store(".")`` has the "same methods" as the
    module's functions; it lacks lessons, stats, tree, context, report and
    review_changes, so ``Store(root, all_refs=True).stats()`` failed. The README names
    exactly the functions a store has as methods, and for each other one the call that
    takes the store as its first argument, which answers as the module's function does."""
    import importlib
    import inspect
    import re

    from kexp.storage.store import Store

    paragraph = _store_paragraph()
    functions = {
        name
        for name in kexp.__all__
        if inspect.isfunction(getattr(kexp, name))
        and name not in ("default_store", "find_root", "init_store")
    }
    methods = set(re.findall(r"`store\.(\w+)\(", paragraph))
    assert methods == {name for name in functions if hasattr(Store, name)}, paragraph
    twins = dict(re.findall(r"`kexp\.(\w+)` is `([\w.]+)\(store\b", paragraph))
    assert set(twins) == functions - methods, (sorted(twins), paragraph)
    called = {}
    for name, dotted in twins.items():
        module, _, attribute = dotted.rpartition(".")
        called[name] = getattr(importlib.import_module(module), attribute)
        assert next(iter(inspect.signature(called[name]).parameters)) == "store", dotted
    monkeypatch.setenv("KEXP_ROOT", str(REPO_ROOT))
    store = Store(REPO_ROOT)
    assert called["stats"](store).to_dict() == kexp.stats().to_dict()
    assert lessons_reply(called["lessons"](store), (), 20) == lessons_reply(kexp.lessons(), (), 20)
    assert [tree_reply(called["tree"](store))] == [tree_reply(kexp.tree())]
