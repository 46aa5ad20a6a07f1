"""Git provenance: revisions, the code repository, create and validate, in real repositories."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import warnings
from pathlib import Path

import pytest
from conftest import experiment_fields, git, init_repo, run_kexp
from test_sync import make_remote

from kexp import GitError, KexpError, Store, ValidationError
from kexp.gitops import git as kgit
from kexp.gitops.provenance import UNCOMMITTED_TAG, CodeRepoWarning, UncommittedBaseWarning


def commit_file(repo: Path, name: str, text: str, message: str) -> str:
    """Write a file, commit it, and return the new commit's full hash."""
    (repo / name).write_text(text)
    git(repo, "add", name)
    git(repo, "commit", "-q", "-m", message)
    return git(repo, "rev-parse", "HEAD")


def resolve(repo: Path, revision: str) -> str:
    return kgit.resolve_commit(kgit.open_repo(repo), revision)


# --- revisions ---------------------------------------------------------------------


@pytest.fixture(scope="module")
def history_repo(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, list[str]]:
    """A repository with three commits (oldest first), a tag and a branch (shared by the
    tests of this module, which only read it)."""
    repo = init_repo(tmp_path_factory.mktemp("history") / "code")
    commits = [git(repo, "rev-parse", "HEAD")]
    commits.append(commit_file(repo, "kernel.cu", "__global__ void k2() {}\n", "second"))
    commits.append(commit_file(repo, "kernel.cu", "__global__ void k3() {}\n", "third"))
    git(repo, "tag", "v1", commits[1])
    git(repo, "tag", "-a", "v2", "-m", "annotated", commits[2])
    git(repo, "branch", "feature", commits[0])
    return repo, commits


def test_revision_forms_resolve_to_the_full_hash(history_repo: tuple[Path, list[str]]) -> None:
    repo, (first, second, third) = history_repo
    assert resolve(repo, third) == third
    assert resolve(repo, third[:7]) == third
    assert resolve(repo, third[:12].upper()) == third
    assert resolve(repo, "HEAD") == third
    assert resolve(repo, "HEAD~2") == first
    assert resolve(repo, "HEAD^") == second
    assert resolve(repo, "main") == third
    assert resolve(repo, "feature") == first
    assert resolve(repo, "v1") == second
    assert resolve(repo, "v2") == third  # an annotated tag names its commit


def test_remote_branch_resolves(history_repo: tuple[Path, list[str]], tmp_path: Path) -> None:
    origin, commits = history_repo
    git(tmp_path, "clone", "-q", f"file://{origin}", "clone")
    clone = tmp_path / "clone"
    commit_file(clone, "local.txt", "local\n", "local work")
    assert resolve(clone, "origin/main") == commits[2]
    assert resolve(clone, "origin/feature") == commits[0]


def test_ambiguous_short_hash_is_a_clear_error(tmp_path: Path) -> None:
    repo = init_repo(tmp_path / "code")
    # Enough commits that two of them share a 4-character prefix (fast-import: one process).
    stream = []
    for n in range(1500):
        message = f"commit {n}"
        stream.append(
            f"commit refs/heads/many\ncommitter T <t@example.com> {1700000000 + n} +0000\n"
            f"data {len(message)}\n{message}\n"
        )
    subprocess.run(
        ["git", "fast-import", "--quiet"],
        cwd=repo,
        input="".join(stream),
        text=True,
        check=True,
    )
    hashes = git(repo, "rev-list", "many").split()
    seen: dict[str, str] = {}
    prefix = next(h[:4] for h in hashes if seen.setdefault(h[:4], h) != h)
    with pytest.raises(GitError, match="ambiguous") as caught:
        resolve(repo, prefix)
    assert "more characters" in str(caught.value)
    assert prefix in str(caught.value)


def test_unknown_revision_is_a_clear_error(history_repo: tuple[Path, list[str]]) -> None:
    repo, _ = history_repo
    for revision in ("no-such-branch", "0123456789abcdef", "HEAD~99", "kernel.cu"):
        with pytest.raises(GitError, match="unknown revision") as caught:
            resolve(repo, revision)
        assert "git fetch" in str(caught.value)


def test_a_tree_or_blob_hash_is_not_a_commit(history_repo: tuple[Path, list[str]]) -> None:
    repo, _ = history_repo
    blob = git(repo, "rev-parse", "HEAD:kernel.cu")
    with pytest.raises(GitError, match="not a commit"):
        resolve(repo, blob)


OPTION_LIKE = [
    "--output=/tmp/x",
    "-p",
    "--all",
    "HEAD:experiments",
    "a..b",
    "main...feature",
    "",
    "\n",
    "HEAD\n",
    "main --all",
    " HEAD",
    "@{-1}",
    ":/initial",
    "HEAD~1\x00",
    "x" * 300,
]


@pytest.mark.parametrize("revision", OPTION_LIKE, ids=repr)
def test_option_like_revisions_are_refused_before_git_sees_them(
    history_repo: tuple[Path, list[str]], tmp_path: Path, revision: str
) -> None:
    repo, _ = history_repo
    target = tmp_path / "x"
    revision = revision.replace("/tmp/x", str(target))
    with pytest.raises(GitError, match="not a revision kexp accepts"):
        kgit.check_revision(revision)
    with pytest.raises(GitError, match="not a revision kexp accepts"):
        resolve(repo, revision)
    assert not target.exists()


@pytest.mark.parametrize("revision", ["--output=/tmp/x", "-p", "HEAD:experiments", "a..b", ""])
def test_every_entry_point_refuses_option_like_revisions(
    repo: Path, store: Store, tmp_path: Path, revision: str
) -> None:
    target = tmp_path / "x"
    revision = revision.replace("/tmp/x", str(target))
    store.create_experiment(**experiment_fields())
    calls = [
        lambda: store.at(revision),
        lambda: store.list_experiments(reachable_from=revision),
        lambda: store.changes(revision),
        lambda: store.changes("HEAD", revision),
    ]
    if revision:
        calls.append(lambda: store.list_experiments(base_commit=revision))
    for call in calls:
        with pytest.raises(GitError, match="not a revision kexp accepts"):
            call()
    assert not target.exists()


# --- the code repository -----------------------------------------------------------


def test_experiment_records_the_full_head_hash_without_being_told(repo: Path, store: Store) -> None:
    exp = store.create_experiment(**experiment_fields())
    head = git(repo, "rev-parse", "HEAD")
    assert exp.base_commit == head and len(head) == 40
    assert exp.author == "Test Engineer"
    assert UNCOMMITTED_TAG not in exp.tags
    assert exp.path is not None
    assert f"base_commit: {head}\n" in exp.path.read_text()


@pytest.mark.parametrize("base", ["", "HEAD"], ids=["base-filled", "base-given"])
@pytest.mark.parametrize(
    ("config", "env"),
    [
        ((), {"GIT_AUTHOR_NAME": "agent-7"}),  # an agent's or CI's own name
        (("author.name", "agent-7"), {}),  # git's author, over user.name
    ],
    ids=["GIT_AUTHOR_NAME", "author.name"],
)
def test_the_author_is_the_one_git_writes_on_the_commit(
    repo: Path, base: str, config: tuple[str, ...], env: dict[str, str]
) -> None:
    # user.name is "Test Engineer"; git itself takes GIT_AUTHOR_NAME, then author.name.
    if config:
        git(repo, "config", *config)
    given = ["--base-commit", git(repo, "rev-parse", base)] if base else []
    added = run_kexp(
        "add", "--summary", "Tiling - +30%", "--score", "1.3", "--operator", "kernel.cu: k",
        "--dtype", "fp16", "--env", "H100", "--description", "**Key insight**: x", *given,
        "--json", cwd=repo, env=env, process=True,
    )  # fmt: skip
    assert added.returncode == 0, added.stderr
    exp = Store(repo).get_experiment(json.loads(added.stdout)["id"])
    subprocess.run(["git", "add", "-A"], cwd=repo, check=True)
    subprocess.run(["git", "commit", "-qm", "a"], cwd=repo, check=True, env={**os.environ, **env})
    assert exp.author == git(repo, "log", "-1", "--format=%an") == "agent-7"


@pytest.mark.parametrize("form", ["short", "branch", "tag", "HEAD~1", "upper"])
def test_a_given_base_commit_is_stored_as_the_full_hash(
    repo: Path, store: Store, form: str
) -> None:
    first = git(repo, "rev-parse", "HEAD")
    commit_file(repo, "kernel.cu", "__global__ void k2() {}\n", "second")
    git(repo, "branch", "old", first)
    git(repo, "tag", "base", first)
    given = {
        "short": first[:8],
        "branch": "old",
        "tag": "base",
        "HEAD~1": "HEAD~1",
        "upper": first.upper(),
    }[form]
    exp = store.create_experiment(**experiment_fields(base_commit=given))
    assert exp.base_commit == first
    assert store.get_experiment(exp.id).base_commit == first


def test_an_unknown_revision_name_as_base_commit_is_refused(repo: Path, store: Store) -> None:
    with pytest.raises(GitError, match="unknown revision 'mian'"):
        store.create_experiment(**experiment_fields(base_commit="mian"))
    assert store.paths() == []


def test_an_unknown_short_hash_is_kept_and_reported_by_validate(repo: Path, store: Store) -> None:
    exp = store.create_experiment(**experiment_fields(base_commit="abcdef0"))
    assert exp.base_commit == "abcdef0"
    problems = store.validate()
    assert [(p.severity, p.code, p.field) for p in problems] == [
        ("warning", "base-commit-unknown", "base_commit")
    ]


def test_dirty_working_tree_is_reported_and_recorded(repo: Path, store: Store) -> None:
    (repo / "kernel.cu").write_text("__global__ void k_uncommitted() {}\n")
    with pytest.warns(UncommittedBaseWarning, match=r"uncommitted changes \(kernel.cu\)"):
        exp = store.create_experiment(**experiment_fields(tags=["cache"]))
    assert exp.tags == ["cache", UNCOMMITTED_TAG]
    assert exp.base_commit == git(repo, "rev-parse", "HEAD")
    assert [e.id for e in store.list_experiments(tags=UNCOMMITTED_TAG)] == [exp.id]


def test_uncommitted_experiments_and_untracked_files_do_not_make_the_tree_dirty(
    repo: Path, store: Store
) -> None:
    first = store.create_experiment(**experiment_fields())
    git(repo, "add", "experiments")
    git(repo, "commit", "-q", "-m", "record")
    assert first.path is not None
    first.path.write_text(first.path.read_text().replace("score: 1.019", "score: 1.02"))
    (repo / "build.log").write_text("untracked\n")
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        second = store.create_experiment(**experiment_fields(change_summary="Second - +1%"))
    assert UNCOMMITTED_TAG not in second.tags


def test_an_explicit_base_commit_is_not_tagged_even_in_a_dirty_tree(
    repo: Path, store: Store
) -> None:
    head = git(repo, "rev-parse", "HEAD")
    (repo / "kernel.cu").write_text("changed\n")
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        exp = store.create_experiment(**experiment_fields(base_commit=head))
    assert UNCOMMITTED_TAG not in exp.tags


@pytest.mark.parametrize("how", ["argument", "environment"])
def test_code_repository_apart_from_the_store(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, how: str
) -> None:
    store_repo = init_repo(tmp_path / "notes")
    (store_repo / "experiments").mkdir()
    code = init_repo(tmp_path / "code")
    code_head = commit_file(code, "kernel.cu", "__global__ void fast() {}\n", "fast kernel")
    store_head = commit_file(store_repo, "notes.md", "notes\n", "notes")
    if how == "argument":
        store = Store(store_repo, code_repo=code)
    else:
        monkeypatch.setenv("KEXP_CODE_REPO", str(code))
        store = Store(store_repo)
    exp = store.create_experiment(**experiment_fields())
    assert exp.base_commit == code_head
    # Dirtiness is that of the code repository, not the store's.
    (code / "kernel.cu").write_text("edited\n")
    with pytest.warns(UncommittedBaseWarning, match=str(code)):
        dirty = store.create_experiment(**experiment_fields(change_summary="Dirty - x"))
    assert UNCOMMITTED_TAG in dirty.tags
    # The store's own commits are not in the code repository.
    foreign = store.create_experiment(
        **experiment_fields(change_summary="Foreign - x", base_commit=store_head)
    )
    problems = store.validate()
    assert [(p.path, p.code) for p in problems] == [(str(foreign.path), "base-commit-unknown")]
    assert {e.id for e in store.list_experiments(reachable_from="main")} == {exp.id, dirty.id}
    assert {e.id for e in store.list_experiments(base_commit="HEAD")} == {exp.id, dirty.id}


def test_store_outside_any_repository_works_without_git(tmp_path: Path) -> None:
    root = tmp_path / "plain"
    (root / "experiments").mkdir(parents=True)
    store = Store(root)
    sha = "3f2c9e1a7b8d4c6e5f0a1b2c3d4e5f6a7b8c9d0e"
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        exp = store.create_experiment(**experiment_fields(base_commit=sha))
    assert exp.base_commit == sha and exp.author == ""
    assert [e.id for e in store.list_experiments()] == [exp.id]
    assert [e.id for e in store.top_experiments(base_commit="3f2c9e")] == [exp.id]
    assert store.get_experiment(exp.id[:6]).score == exp.score
    assert store.validate() == []
    store.update_experiment(exp.id, score=1.5)
    # Without a base_commit there is nothing to fill it from: say so, then refuse.
    with (
        pytest.warns(CodeRepoWarning, match="not inside a git repository"),
        pytest.raises(ValidationError),
    ):
        store.create_experiment(**experiment_fields(change_summary="No base - x"))
    for call in (
        lambda: store.at("HEAD"),
        lambda: store.history(exp.id),
        lambda: store.changes("HEAD"),
        lambda: store.list_experiments(reachable_from="HEAD"),
        lambda: store.list_experiments(base_commit="main"),
    ):
        with pytest.raises(GitError, match="not inside a git repository"):
            call()


def test_configured_code_repository_that_is_not_one(tmp_path: Path, repo: Path) -> None:
    nowhere = tmp_path / "not-a-repo"
    nowhere.mkdir()
    store = Store(repo, code_repo=nowhere)
    with pytest.warns(CodeRepoWarning, match="KEXP_CODE_REPO"):
        store.create_experiment(**experiment_fields(base_commit="3f2c9e1a7b8d4c6e5f0a1b2c3d4e5f6a"))


# --- validate ----------------------------------------------------------------------


def test_validate_reports_an_unfetched_base_commit_as_a_warning(repo: Path, store: Store) -> None:
    absent = "0123456789abcdef0123456789abcdef01234567"
    exp = store.create_experiment(**experiment_fields(base_commit=absent))
    (problem,) = store.validate()
    assert (problem.severity, problem.code, problem.field) == (
        "warning",
        "base-commit-unknown",
        "base_commit",
    )
    assert problem.path == str(exp.path)
    assert problem.line == 11  # the base_commit line
    assert f"git fetch origin {absent}" in problem.hint
    (strict,) = store.validate(strict=True)
    assert strict.severity == "error" and strict.code == "base-commit-unknown"


def test_a_base_commit_never_pushed_is_said_with_what_brings_it(tmp_path: Path) -> None:
    """Alice measured on a commit of a local branch she never pushed, and published the
    experiment: on Bob's clone the hint said only ``git fetch origin SHA``, which cannot
    find it (trial 17). It says the author pushes the branch holding it; once she has,
    the fetch it prints brings the commit and the warning goes."""
    remote, _ = make_remote(tmp_path)
    alice, bob = tmp_path / "alice", tmp_path / "bob"
    for clone in (alice, bob):
        git(tmp_path, "clone", "-q", str(remote), str(clone))
        git(clone, "config", "user.name", clone.name)
        git(clone, "config", "user.email", f"{clone.name}@example.com")
    git(alice, "checkout", "-q", "-b", "try-tiles")
    base = commit_file(alice, "kernel.cu", "__global__ void k() { /* tiled */ }\n", "tiles")
    git(alice, "checkout", "-q", "main")
    exp = Store(alice).create_experiment(**experiment_fields(base_commit=base))
    git(alice, "add", "experiments")
    git(alice, "commit", "-q", "-m", "an experiment")
    git(alice, "push", "-q", "origin", "main")
    git(bob, "pull", "-q")

    (problem,) = Store(bob).validate()
    assert exp.path is not None and problem.code == "base-commit-unknown"
    assert problem.path == str(bob / exp.path.relative_to(alice))
    fetch = subprocess.run(["git", "fetch", "origin", base], cwd=bob, capture_output=True)
    assert fetch.returncode != 0  # no remote holds it: no fetch can work
    assert "its author pushes that branch (git push origin BRANCH)" in problem.hint, problem.hint
    git(alice, "push", "-q", "origin", "try-tiles")  # BRANCH: the branch holding it
    assert f"git fetch origin {base}" in problem.hint
    git(bob, "fetch", "-q", "origin", base)
    assert Store(bob).validate() == []


def test_validate_refuses_a_base_commit_that_is_not_a_commit(repo: Path, store: Store) -> None:
    blob = git(repo, "rev-parse", "HEAD:kernel.cu")
    store.create_experiment(**experiment_fields(base_commit=blob))
    (problem,) = store.validate()
    assert (problem.severity, problem.code) == ("error", "base-commit-not-commit")


def test_shallow_clone_base_commit_outside_history_is_a_warning_saying_how_to_fetch(
    tmp_path: Path,
) -> None:
    origin = init_repo(tmp_path / "origin")
    (origin / "experiments").mkdir()
    store = Store(origin)
    old = store.create_experiment(**experiment_fields())  # based on the first commit
    git(origin, "add", "experiments")
    git(origin, "commit", "-q", "-m", "record experiment")
    commit_file(origin, "kernel.cu", "__global__ void newer() {}\n", "newer kernel")
    new = store.create_experiment(**experiment_fields(change_summary="Newer - +2%"))
    git(origin, "add", "experiments")
    git(origin, "commit", "-q", "-m", "record another")

    # Depth 2: the newer kernel commit is there, the first one is not.
    git(tmp_path, "clone", "-q", "--depth", "2", f"file://{origin}", "shallow")
    shallow = Store(tmp_path / "shallow")
    problems = shallow.validate()
    assert [(p.severity, p.code) for p in problems] == [("warning", "base-commit-unknown")]
    assert problems[0].path.endswith(old.path.name if old.path else "")
    assert "shallow clone" in problems[0].hint and "git fetch --unshallow" in problems[0].hint
    assert [p.severity for p in shallow.validate(strict=True)] == ["error"]
    # Queries still work; the unresolvable base commit is simply not reachable.
    assert {e.id for e in shallow.list_experiments()} == {old.id, new.id}
    assert [e.id for e in shallow.list_experiments(reachable_from="HEAD")] == [new.id]
    with pytest.raises(GitError, match="unknown revision 'HEAD~2'") as caught:
        shallow.list_experiments(reachable_from="HEAD~2")
    assert "git fetch --unshallow" in str(caught.value)
    git(tmp_path / "shallow", "fetch", "-q", "--unshallow")
    assert shallow.validate(strict=True) == []
    assert {e.id for e in shallow.list_experiments(reachable_from="HEAD")} == {old.id, new.id}


# --- costs and failures ------------------------------------------------------------


def run_python(code: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        env={**os.environ, **(env or {})},
        timeout=120,
    )


def test_read_only_queries_never_import_gitpython(repo: Path, store: Store) -> None:
    exp = store.create_experiment(**experiment_fields())
    code = (
        "import sys, kexp\n"
        f"store = kexp.Store({str(repo)!r})\n"
        "store.list_experiments(operator='cache', base_commit=" + repr(exp.base_commit[:7]) + ")\n"
        "store.top_experiments()\n"
        f"store.get_experiment({exp.id[:6]!r})\n"
        "print('git' in sys.modules)\n"
    )
    result = run_python(code)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "False"


def test_missing_git_executable_is_a_clear_error(repo: Path, store: Store) -> None:
    exp = store.create_experiment(**experiment_fields())
    code = (
        "import kexp\n"
        f"store = kexp.Store({str(repo)!r})\n"
        "print(len(store.list_experiments()))\n"
        "try:\n"
        "    store.at('HEAD')\n"
        "except kexp.GitError as exc:\n"
        "    print(exc)\n"
    )
    result = run_python(code, {"PATH": "/nonexistent", "GIT_PYTHON_GIT_EXECUTABLE": ""})
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert lines[0] == "1"
    assert "install git" in lines[1]
    assert exp.id


def test_a_repository_gone_meanwhile_is_said_so_not_called_git_missing(
    repo: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    opened = kgit.open_repo(repo)
    monkeypatch.chdir(tmp_path)  # outside any repository
    shutil.move(str(repo), str(tmp_path / "moved"))  # e.g. its worktree removed meanwhile
    with pytest.raises(GitError, match="is gone") as raised:
        kgit.run_git(opened, "status", "--porcelain")
    assert "git was not found" not in str(raised.value)


def test_git_errors_are_kexp_errors() -> None:
    assert issubclass(GitError, KexpError)


def test_blobs_held_asks_the_index_first_and_answers_as_the_object_database(
    tmp_path: Path,
) -> None:
    """The fast answer (the index's entries) equals looking each content up in git's
    object database, for every state a working tree's file can be in."""
    from kexp.gitops.git import find_worktree
    from kexp.gitops.objects import blobs_held, object_names
    from kexp.storage.rows import content_key

    repo = init_repo(tmp_path / "repo")
    folder = repo / "store" / "experiments"
    folder.mkdir(parents=True)
    texts = {name: f"content of {name}\n".encode() for name in "abcdef"}
    for name in "abcd":
        (folder / f"{name}.md").write_bytes(texts[name])
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", "four")
    (folder / "b.md").write_bytes(b"edited, never added\n")  # its old content in git only
    (folder / "c.md").write_bytes(texts["e"])  # staged below, then edited
    git(repo, "add", "store/experiments/c.md")
    (folder / "c.md").write_bytes(b"edited after it was staged\n")
    (folder / "f.md").write_bytes(texts["f"])  # untracked
    (repo / "outside.md").write_bytes(b"outside the store, committed\n")
    git(repo, "add", "outside.md")
    git(repo, "commit", "-q", "-m", "outside")
    contents = [*texts.values(), b"edited, never added\n", b"edited after it was staged\n",
                b"outside the store, committed\n"]  # fmt: skip
    hashes = [content_key(data).hex() for data in contents] + [git(repo, "rev-parse", "HEAD")]
    tree = find_worktree(repo)
    found = object_names(tree, hashes)
    looked_up = {h for h, got in zip(hashes, found, strict=True) if got and got[1] == "blob"}
    assert blobs_held(tree, hashes, folder) == looked_up
    assert blobs_held(tree, hashes, tmp_path) == looked_up  # a folder outside the repository
    assert content_key(texts["a"]).hex() in looked_up
    assert content_key(texts["f"]).hex() not in looked_up
