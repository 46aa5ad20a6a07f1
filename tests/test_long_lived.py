"""Long-lived processes while the world changes under them (trial N, round 23): an MCP
server an agent keeps open for hours and a notebook's ``import kexp``, while the
checkout they were started in is removed and cloned again, and while other agents
sync. Each answer is compared with what the files (or a fresh process) say."""

from __future__ import annotations

import shutil
import sys
from pathlib import Path

import pytest
from conftest import git
from test_mcp import Agent, record_fields, run_agent
from test_sync import clone, make_remote

import kexp
from kexp import Store
from kexp.core.errors import StoreNotFoundError
from kexp.storage.sync import sync


def test_a_server_whose_checkout_was_removed_and_cloned_again_serves_the_new_clone(
    tmp_path: Path,
) -> None:
    """An agent's client starts ``kexp mcp --root`` in the store's folder; the user
    removes the checkout and clones it again at the same path. The server answered
    every tool with ": No such file or directory" from then on (its working directory
    was the removed folder), while a fresh process answered."""
    remote, base = make_remote(tmp_path)
    kernels = clone(remote, tmp_path / "kernels")
    first = Store(kernels).create_experiment(base_commit=base, score=1.03, **record_fields())
    sync(Store(kernels))

    async def work(agent: Agent) -> None:
        assert [r["id"] for r in await agent.json("list")] == [first.id]
        shutil.rmtree(kernels)
        clone(remote, kernels)
        again = Store(kernels).create_experiment(
            base_commit=base, score=1.05, **record_fields(change_summary="Two rows a warp")
        )
        listed = await agent.json("list")
        assert sorted(r["id"] for r in listed) == sorted([first.id, again.id])
        shutil.rmtree(kernels)  # gone for good: said in words, not as a bare OSError
        failed, texts = await agent.call("list")
        assert failed and "is gone" in texts[0] and str(kernels) in texts[0], texts

    command = [sys.executable, "-m", "kexp", "mcp", "--root", str(kernels)]
    run_agent(kernels, work, command=command)


def test_a_notebook_whose_working_directory_is_gone_is_told_so(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``kexp.list_experiments()`` in a notebook whose working directory was removed
    raised a bare FileNotFoundError from the search for the store."""
    folder = tmp_path / "kernels"
    (folder / "experiments").mkdir(parents=True)
    monkeypatch.delenv("KEXP_ROOT", raising=False)
    monkeypatch.chdir(folder)
    shutil.rmtree(folder)
    with pytest.raises(StoreNotFoundError, match="working directory is gone"):
        kexp.list_experiments()
    git(tmp_path, "init", "-q", str(folder))  # the folder back: the store is found again
    (folder / "experiments").mkdir()
    monkeypatch.chdir(folder)
    assert kexp.list_experiments() == []


def test_a_notebooks_store_read_across_refs_sees_each_fetch(tmp_path: Path) -> None:
    """A notebook keeps ``kexp.Store(root, all_refs=True)`` open while another agent
    syncs: each read answers the refs as they are then (a branch fetched since, a ref a
    fetch moved, one reset back), as a Store opened at that moment does. It read the refs
    once, when it was made: a fetched agent's best was missing, and its own sync's too."""
    remote, base = make_remote(tmp_path)
    alice, bob = clone(remote, tmp_path / "alice"), clone(remote, tmp_path / "bob")
    notebook = Store(alice, all_refs=True)
    patterned = Store(alice, refs=["origin/*"])
    assert notebook.list_experiments() == []

    def ids(store: Store) -> list[str]:
        return sorted(e.id for e in store.list_experiments())

    first = Store(bob).create_experiment(
        base_commit=base, score=1.25, status="done", **record_fields()
    )
    sync(Store(bob), branch="kexp/bob")
    git(alice, "fetch", "-q")
    assert ids(notebook) == ids(Store(alice, all_refs=True)) == [first.id]
    assert ids(patterned) == [first.id]
    assert notebook.get_experiment(first.id[:10]).score == pytest.approx(1.25)
    second = Store(bob).create_experiment(
        base_commit=base, score=1.1, status="done", pid=first.id, measured_against="parent",
        **record_fields(change_summary="Two rows a warp"),
    )  # fmt: skip
    sync(Store(bob), branch="kexp/bob")
    git(alice, "fetch", "-q")
    assert ids(notebook) == sorted([first.id, second.id])
    assert notebook.top_experiments(1)[0].id == second.id
    git(bob, "fetch", "-q")  # bob takes his step back: the branch reset, force-pushed
    git(bob, "push", "-q", "--force", "origin", "origin/kexp/bob~1:refs/heads/kexp/bob")
    git(alice, "fetch", "-q")
    assert ids(notebook) == ids(Store(alice, all_refs=True)) == [first.id]
    mine = Store(alice).create_experiment(
        base_commit=base, score=1.05, **record_fields(change_summary="Alice's own")
    )
    sync(notebook, branch="kexp/alice")  # the notebook's own sync: read at once
    assert mine.id in ids(notebook)


def test_a_fetch_during_a_read_leaves_no_answer_of_the_wrong_refs(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A fetch lands while a read across refs is under way: the answer is kept under
    the refs as its key saw them, so it must be made of those refs, or once that ref is
    back where it was (reset, force-pushed) the kept answer names an experiment no ref
    holds. The read looks at the refs once, for its key and its rows alike."""
    remote, base = make_remote(tmp_path)
    alice, bob = clone(remote, tmp_path / "alice"), clone(remote, tmp_path / "bob")
    first = Store(bob).create_experiment(
        base_commit=base, score=1.25, status="done", **record_fields()
    )
    sync(Store(bob), branch="kexp/bob")
    git(alice, "fetch", "-q")
    before = git(alice, "rev-parse", "origin/kexp/bob").strip()
    second = Store(bob).create_experiment(
        base_commit=base, score=1.5, status="done", **record_fields(change_summary="Other")
    )
    sync(Store(bob), branch="kexp/bob")
    after = git(bob, "rev-parse", "origin/kexp/bob").strip()
    git(alice, "fetch", "-q")
    git(alice, "update-ref", "refs/remotes/origin/kexp/bob", before)

    from kexp.storage.sources import WorkingTree

    plain = WorkingTree.read
    moved: list[bool] = []

    def fetched_meanwhile(self: WorkingTree, *args: object, **kwargs: object) -> object:
        if not moved:  # the fetch lands once, between the answer's key and its rows
            moved.append(True)
            git(alice, "update-ref", "refs/remotes/origin/kexp/bob", after)
        return plain(self, *args, **kwargs)  # type: ignore[arg-type]

    notebook = Store(alice, all_refs=True)
    monkeypatch.setattr(WorkingTree, "read", fetched_meanwhile)
    assert [e.id for e in notebook.top_experiments(5)] in ([first.id], [second.id, first.id])
    monkeypatch.setattr(WorkingTree, "read", plain)
    git(alice, "update-ref", "refs/remotes/origin/kexp/bob", before)
    assert [e.id for e in notebook.top_experiments(5)] == [first.id]
    assert [e.id for e in Store(alice, all_refs=True).top_experiments(5)] == [first.id]
