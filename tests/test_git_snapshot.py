"""The store at a revision (``Store.at``) and ancestry queries, in real repositories."""

from __future__ import annotations

import dataclasses
import os
import re
import warnings
from pathlib import Path
from typing import Any

import pytest
from conftest import experiment_fields, git, init_repo

from kexp import (
    GitError,
    InvalidExperimentWarning,
    KernelExperiment,
    KexpError,
    Store,
    StoreNotFoundError,
)
from kexp.storage.store import init_store


def commit_all(repo: Path, message: str) -> str:
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", message)
    return git(repo, "rev-parse", "HEAD")


def comparable(experiments: list[KernelExperiment], root: Path) -> list[dict[str, Any]]:
    """Experiments as data, with paths relative to their store (to compare stores)."""
    rows = []
    for exp in experiments:
        data = exp.to_dict(include_derived=True)
        data["path"] = Path(data["path"]).relative_to(root).as_posix()
        data["interference"] = exp.interference
        rows.append(data)
    return rows


def tree_state(repo: Path) -> tuple[str, dict[str, tuple[int, bytes]]]:
    """``git status`` plus every file's mtime and content under experiments/."""
    files = {
        str(p.relative_to(repo)): (p.stat().st_mtime_ns, p.read_bytes())
        for p in sorted((repo / "experiments").rglob("*"))
        if p.is_file()
    }
    return git(repo, "status", "--porcelain", "--untracked-files=all"), files


@pytest.fixture
def evolving(repo: Path, store: Store) -> dict[str, Any]:
    """A store with four commits of history: creates, an update, a delete, a broken file."""
    a = store.create_experiment(**experiment_fields(change_summary="A - +1.9%"))
    b = store.create_experiment(
        **experiment_fields(change_summary="B - +5%", score=1.05, pid=a.id, tags=["x"])
    )
    first = commit_all(repo, "record a and b")
    store.update_experiment(b.id, score=1.07, status="done")
    c = store.create_experiment(
        **experiment_fields(change_summary="C combines - -1%", score=0.99, combines=[a.id, b.id])
    )
    second = commit_all(repo, "correct b, add c")
    assert a.path is not None
    broken = a.path.with_name("0123456789abcdef-broken.md")
    broken.write_text("---\nid: 0123456789abcdef\nscore: [\n---\n")
    third = commit_all(repo, "a broken file")
    store.delete_experiment(c.id, force=True)
    store.update_experiment(a.id, score=0.5, change_summary="A - regression after all")
    fourth = commit_all(repo, "delete c, a regressed")
    return {"a": a, "b": b, "c": c, "commits": [first, second, third, fourth]}


def test_store_at_reads_the_previous_state_without_touching_the_working_tree(
    repo: Path, store: Store, evolving: dict[str, Any]
) -> None:
    a = evolving["a"]
    before = tree_state(repo)
    previous = store.at("HEAD~1")
    assert previous.get_experiment(a.id).score == pytest.approx(1.019)
    assert store.get_experiment(a.id).score == pytest.approx(0.5)
    with pytest.warns(InvalidExperimentWarning, match="0123456789abcdef-broken.md"):
        found = previous.list_experiments()
    assert {e.id for e in found} == {a.id, evolving["b"].id, evolving["c"].id}
    assert tree_state(repo) == before


@pytest.mark.parametrize("back", [0, 1, 2, 3])
def test_store_at_equals_a_checkout_of_that_revision(
    repo: Path, store: Store, evolving: dict[str, Any], tmp_path: Path, back: int
) -> None:
    revision = evolving["commits"][3 - back]
    checkout = tmp_path / "checkout"
    git(repo, "worktree", "add", "-q", "--detach", str(checkout), revision)
    there = Store(checkout)
    at = store.at(revision)

    def read(s: Store, root: Path, how: str) -> tuple[list[dict[str, Any]], list[str]]:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            if how == "list":
                found = s.list_experiments()
            else:
                found = s.top_experiments(include_pending=True, include_buggy=True)
        messages = [str(w.message).replace(str(root), "<root>") for w in caught]
        return comparable(found, root), messages

    for how in ("list", "top"):
        assert read(at, repo, how) == read(there, checkout, how)
    assert [p.relative_to(repo) for p in at.paths()] == [
        p.relative_to(checkout) for p in there.paths()
    ]

    def problems(s: Store, root: Path) -> list[tuple[str, int, int, str, str, str]]:
        return [
            (str(Path(p.path).relative_to(root)), p.line, p.column, p.severity, p.code, p.message)
            for p in s.validate()
        ]

    assert problems(at, repo) == problems(there, checkout)
    b = evolving["b"].id
    assert comparable([at.get_experiment(b[:12])], repo) == comparable(
        [there.get_experiment(b[:12])], checkout
    )
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        assert [e.id for e in at.ancestors(b)] == [e.id for e in there.ancestors(b)]


def test_store_at_is_read_only(repo: Path, store: Store, evolving: dict[str, Any]) -> None:
    at = store.at("HEAD~1")
    a = evolving["a"]
    with pytest.raises(KexpError, match="read-only"):
        at.create_experiment(**experiment_fields())
    with pytest.raises(KexpError, match="read-only"):
        at.update_experiment(a.id, score=2.0)
    with pytest.raises(KexpError, match="read-only"):
        at.delete_experiment(a.id)
    assert store.get_experiment(a.id).score == pytest.approx(0.5)


def test_store_at_is_a_plain_store_over_a_revision_source(
    repo: Path, store: Store, evolving: dict[str, Any]
) -> None:
    """Read-only and uncached are properties of the source, not of a subclass."""
    at = store.at("HEAD~1")
    head = git(repo, "rev-parse", "HEAD~1").strip()
    assert type(at) is Store
    assert (at.revision, at.commit) == ("HEAD~1", head)
    assert (store.revision, store.commit) == (None, None)
    assert not at.source.writable and not at.source.cacheable
    assert store.source.writable and store.source.cacheable
    assert repr(at) == f"Store({str(store.root)!r}).at('HEAD~1')  # commit {head[:12]}"
    assert repr(store.at(head)) == f"Store({str(store.root)!r}).at({head!r})"
    with pytest.raises(KexpError, match="read-only"):
        at.cache_dir  # noqa: B018 - the property refuses
    assert at.file_records() is None
    assert not at.is_working_tree
    paths = [str(p) for p in at.paths()]
    assert [path for path, _ in at.contents(paths)] == paths


def test_store_at_validates_like_the_working_tree(
    repo: Path, store: Store, evolving: dict[str, Any]
) -> None:
    at = store.at(evolving["commits"][2])
    problems = at.validate()
    assert [(Path(p.path).name, p.severity) for p in problems if p.severity == "error"] == [
        ("0123456789abcdef-broken.md", "error")
    ]
    one = at.validate([repo / "experiments" / "nowhere" / "0123456789abcdef-x.md"])
    assert "not-in-revision" in [p.code for p in one]


def test_store_at_before_the_store_existed(repo: Path, store: Store) -> None:
    store.create_experiment(**experiment_fields())
    commit_all(repo, "first experiment")
    with pytest.raises(StoreNotFoundError, match="did not exist yet"):
        store.at("HEAD~1")


def test_store_at_unknown_revision(repo: Path, store: Store) -> None:
    with pytest.raises(GitError, match="unknown revision 'nope'"):
        store.at("nope")


def test_store_in_a_subfolder_of_its_repository(tmp_path: Path) -> None:
    repo = init_repo(tmp_path / "mono")
    root = init_store(repo / "tools" / "perf")
    store = Store(root)
    exp = store.create_experiment(**experiment_fields())
    commit_all(repo, "record")
    store.update_experiment(exp.id, score=1.3)
    commit_all(repo, "correct")
    assert store.at("HEAD~1").get_experiment(exp.id).score == pytest.approx(1.019)
    assert store.at("HEAD~1").paths()[0].relative_to(root) == exp.path.relative_to(root)  # type: ignore[union-attr]
    (entry,) = [h for h in store.history(exp.id) if h.action == "modified"]
    assert entry.changes == {"score": (1.019, 1.3)}
    assert entry.path.startswith("tools/perf/experiments/")


def test_store_at_reads_many_files_with_one_git_process(
    repo: Path, store: Store, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    template = store.create_experiment(**experiment_fields())
    assert template.path is not None
    text = template.path.read_text()
    month = template.path.parent.parent
    count = 400
    for n in range(count):
        new_id = f"a{n:015x}"
        folder = month / new_id[-2:]  # its id's fan-out folder, where kexp would put it
        folder.mkdir(exist_ok=True)
        (folder / f"{new_id}-copy.md").write_text(text.replace(template.id, new_id))
    commit_all(repo, "many experiments")
    trace = tmp_path / "trace.log"
    monkeypatch.setenv("GIT_TRACE", str(trace))
    at = store.at("HEAD")
    assert len(at.list_experiments()) == count + 1
    assert len(at.validate()) == 0
    commands = re.findall(r"trace: (?:built-in|exec): git (\S+(?: \S+)?)", trace.read_text())
    # rev-parse, ls-tree (folder, files), one cat-file per pass (the rows a query ranks,
    # the experiments it returns whole, the validation), the base-commit lookup.
    assert len(commands) <= 9, commands
    assert sum(c == "cat-file --batch" for c in commands) <= 3, commands


# --- ancestry queries ----------------------------------------------------------------


@pytest.fixture
def branches(tmp_path: Path) -> dict[str, Any]:
    """Two branches that each record experiments on their own kernel commits, merged
    into main (whose kernel has both changes)."""
    repo = init_repo(tmp_path / "repo")
    init_store(repo)
    commit_all(repo, "store")
    store = Store(repo)
    base = store.create_experiment(**experiment_fields(change_summary="Base - +1%"))
    commit_all(repo, "record base experiment")
    made: dict[str, Any] = {"repo": repo, "store": store, "base": base}
    for name in ("a", "b"):
        git(repo, "checkout", "-q", "-b", f"feature-{name}", "main")
        (repo / f"kernel_{name}.cu").write_text(f"// {name} 1\n")
        commit_all(repo, f"kernel {name} 1")
        first = store.create_experiment(**experiment_fields(change_summary=f"{name}1 - +2%"))
        commit_all(repo, f"record {name}1")
        (repo / f"kernel_{name}.cu").write_text(f"// {name} 2\n")
        commit_all(repo, f"kernel {name} 2")
        second = store.create_experiment(**experiment_fields(change_summary=f"{name}2 - +3%"))
        commit_all(repo, f"record {name}2")
        made[name] = (first, second)
    git(repo, "checkout", "-q", "main")
    git(repo, "merge", "-q", "--no-ff", "-m", "merge a", "feature-a")
    git(repo, "merge", "-q", "--no-ff", "-m", "merge b", "feature-b")
    return made


def test_reachable_from_each_branch(branches: dict[str, Any]) -> None:
    store: Store = branches["store"]
    base, (a1, a2), (b1, b2) = branches["base"], branches["a"], branches["b"]
    assert a1.base_commit != b1.base_commit
    ids = lambda found: {e.id for e in found}  # noqa: E731
    assert ids(store.list_experiments()) == {base.id, a1.id, a2.id, b1.id, b2.id}
    assert ids(store.list_experiments(reachable_from="feature-a")) == {base.id, a1.id, a2.id}
    assert ids(store.list_experiments(reachable_from="feature-b")) == {base.id, b1.id, b2.id}
    assert ids(store.list_experiments(reachable_from="feature-a~2")) == {base.id, a1.id}
    assert ids(store.list_experiments(reachable_from="main")) == {
        base.id,
        a1.id,
        a2.id,
        b1.id,
        b2.id,
    }
    assert ids(store.top_experiments(reachable_from="feature-b")) == {base.id, b1.id, b2.id}
    # The same questions of the store as each branch recorded it.
    at_a = store.at("feature-a")
    assert ids(at_a.list_experiments()) == {base.id, a1.id, a2.id}
    assert ids(at_a.list_experiments(reachable_from="feature-b")) == {base.id}


def test_reachable_from_with_many_base_commits(tmp_path: Path) -> None:
    """Past the per-commit checks, ancestry comes from one history walk."""
    repo = init_repo(tmp_path / "repo")
    (repo / "experiments").mkdir()
    store = Store(repo)
    on_main = []
    for n in range(30):
        (repo / "kernel.cu").write_text(f"// {n}\n")
        commit_all(repo, f"kernel {n}")
        on_main.append(git(repo, "rev-parse", "HEAD"))
    git(repo, "checkout", "-q", "-b", "side", "HEAD~10")
    (repo / "side.cu").write_text("side\n")
    side = commit_all(repo, "side kernel")
    git(repo, "checkout", "-q", "main")
    made = [
        store.create_experiment(
            **experiment_fields(change_summary=f"E{n} - x", base_commit=commit, author="T")
        )
        for n, commit in enumerate([*on_main, side])
    ]
    reachable = store.list_experiments(reachable_from="main~5")
    assert {e.base_commit for e in reachable} == set(on_main[:25])
    assert {e.id for e in store.list_experiments(reachable_from="side")} == {
        e.id for e in made if e.base_commit in {*on_main[:20], side}
    }


def test_base_commit_filter_takes_any_revision(branches: dict[str, Any]) -> None:
    store: Store = branches["store"]
    repo: Path = branches["repo"]
    (a1, a2), (b1, _) = branches["a"], branches["b"]
    git(repo, "tag", "a1-base", a1.base_commit)
    assert [e.id for e in store.list_experiments(base_commit="a1-base")] == [a1.id]
    assert [e.id for e in store.list_experiments(base_commit="feature-a~1")] == [a2.id]
    assert [e.id for e in store.list_experiments(base_commit=b1.base_commit[:9])] == [b1.id]
    assert store.list_experiments(base_commit="main") == []
    with pytest.raises(GitError, match="unknown revision 'feature-c'"):
        store.list_experiments(base_commit="feature-c")


def test_store_at_same_data_as_fields(repo: Path, store: Store) -> None:
    """Every field, including unknown keys and sections, reads the same from git."""
    exp = store.create_experiment(
        **experiment_fields(
            results=[{"config": "bs=1", "baseline": 2.0, "candidate": 1.0, "speedup": 2.0}],
            score=2.0,
            code_change="--- a\n+++ b\n@@\n-x\n+y\n```\n",
        )
    )
    assert exp.path is not None
    exp.path.write_text(exp.path.read_text() + "\n## Notes\n\nkept\n")
    commit_all(repo, "record")
    here = store.get_experiment(exp.id)
    there = store.at("HEAD").get_experiment(exp.id)
    assert dataclasses.asdict(here) == dataclasses.asdict(there)
    assert os.fspath(there.path) == os.fspath(here.path)


def test_a_store_at_a_revision_reads_the_bodies_of_that_revision(
    repo: Path, store: Store, evolving: dict[str, Any]
) -> None:
    """``kexp export --rev`` and ``kexp report --rev`` gave a revision's front-matter with
    the working tree's bodies: an experiment removed since came out without them, and a
    body edited since came out as edited. Each body is the revision's file's."""
    a, c = evolving["a"], evolving["c"]
    store.update_experiment(a.id, detailed_description="**Approach**: rewritten since")
    at = store.at(evolving["commits"][1])  # c recorded; removed (and a rewritten) since
    read = {e.id: e for e in at.with_bodies(at.list_experiments(brief=True))}
    then = {exp_id: at.get_experiment(exp_id).detailed_description for exp_id in (a.id, c.id)}
    assert {exp_id: read[exp_id].detailed_description for exp_id in then} == then
    assert "rewritten since" not in then[a.id] and then[c.id]
