"""The link rule: kexp reads and writes a store only through real folders and files.

A repository can commit symbolic links (``git add -f`` even under ``.kexp/``, which is
git-ignored), and a clone recreates them. Each test commits such links to a real git
repository, clones it, and runs kexp in the clone as a user would: ``experiments/``
being a link is refused (wherever it points), and so is any link in kexp's cache folder
``.kexp/`` (its index files and their journals, ``locks/``, ``drafts/``). Nothing
outside the clone is read, created or written.
"""

from __future__ import annotations

import os
import shlex
import shutil
import sys
from pathlib import Path

import pytest
from conftest import experiment_fields, git, init_repo, run_kexp

from kexp import KexpError, Store, init_store
from kexp.core.settings import DEFAULT_SETTINGS
from kexp.storage.cachefile import file_name

COMMIT = "3f2c9e1a7b8d4c6e5f0a1b2c3d4e5f6a7b8c9d0e"


def everything_below(folder: Path) -> dict[str, bytes | str]:
    """Every entry below ``folder``: a file's bytes, a link's target, '<dir>'."""
    found: dict[str, bytes | str] = {}
    for path in sorted(folder.rglob("*")):
        if path.is_symlink():
            found[str(path)] = os.readlink(path)
        elif path.is_dir():
            found[str(path)] = "<dir>"
        else:
            found[str(path)] = path.read_bytes()
    return found


def kexp(root: Path, *args: str, **extra: str) -> tuple[int, str]:
    env = {"KEXP_ROOT": str(root), **extra}
    result = run_kexp(*args, cwd=root, env=env, input="")
    output = result.stdout + result.stderr
    assert "Traceback" not in output and "internal error" not in output, output
    return result.returncode, output


def clone_with(tmp_path: Path, name: str, links: dict[str, str]) -> tuple[Path, str]:
    """A repository with one experiment and ``links`` (path -> target) committed, cloned
    next to a folder ``outside`` (the links' targets lie there); the clone and the id."""
    origin = init_repo(tmp_path / f"{name}-origin")
    init_store(origin)
    exp = Store(origin).create_experiment(**experiment_fields(base_commit=COMMIT))
    for path, target in links.items():
        link = origin / path
        link.parent.mkdir(parents=True, exist_ok=True)
        if link.is_dir() and not link.is_symlink():
            shutil.rmtree(link)  # made by the create (its claim lock), replaced by the link
        link.symlink_to(target)
        git(origin, "add", "-f", path)
    git(origin, "add", "-A")
    git(origin, "commit", "-q", "-m", "links")
    clone = tmp_path / name
    git(tmp_path, "clone", "-q", str(origin), str(clone))
    for path in links:
        assert (clone / path).is_symlink(), path  # git recreated the link
    return clone, exp.id


@pytest.mark.parametrize(
    ("link", "command"),
    [
        (f".kexp/{file_name(DEFAULT_SETTINGS)}", ["list"]),
        (f".kexp/{file_name(DEFAULT_SETTINGS)}-journal", ["top"]),
        (".kexp/locks", ["update", "{id}", "--set", "score=2.0"]),
        (".kexp/drafts", ["new"]),
    ],
    ids=["index", "journal", "locks", "drafts"],
)
def test_links_committed_in_the_cache_folder_are_refused_after_a_clone(
    tmp_path: Path, link: str, command: list[str]
) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "existing").write_text("a file of the user's\n")
    clone, exp_id = clone_with(tmp_path, "clone", {link: "../../outside/target"})
    before = everything_below(outside)
    editor = tmp_path / "editor.py"
    editor.write_text("import sys\n")
    args = [part.format(id=exp_id) for part in command]
    code, output = kexp(clone, *args, EDITOR=f"{shlex.quote(sys.executable)} {editor}")
    assert code == 2, output
    assert f"{clone / link} is a symbolic link" in " ".join(output.split())
    assert "remove it" in output
    with pytest.raises(KexpError, match="symbolic link"):
        Store(clone).list_experiments()
    with pytest.raises(KexpError, match="symbolic link"):
        Store(clone).update_experiment(exp_id, score=2.0)
    assert everything_below(outside) == before  # nothing created, written or linked
    assert Store(clone).at("HEAD").get_experiment(exp_id).score == 1.019  # not updated


def test_a_lock_file_that_is_a_link_is_refused(tmp_path: Path) -> None:
    """A link inside ``.kexp/locks/`` (one per experiment): opened O_NOFOLLOW, refused."""
    outside = tmp_path / "outside"
    outside.mkdir()
    clone, exp_id = clone_with(tmp_path, "clone", {})
    locks = clone / ".kexp" / "locks"
    locks.mkdir(parents=True)
    (locks / f"{exp_id}.lock").symlink_to(outside / "lock")
    code, output = kexp(clone, "update", exp_id, "--set", "score=2.0")
    assert code == 2 and f"{locks / exp_id}.lock is a symbolic link" in output, output
    assert everything_below(outside) == {}


@pytest.mark.parametrize(
    "target", ["../outside/experiments", "data/experiments"], ids=["outside", "inside"]
)
def test_an_experiments_folder_that_is_a_link_is_refused_after_a_clone(
    tmp_path: Path, target: str
) -> None:
    """``experiments`` committed as a link, to a folder outside the clone or inside it:
    refused either way, for reading and for writing; nothing is read or written there."""
    origin = init_repo(tmp_path / "origin")
    # The folder the link names, as the clone will see it, holding an experiment.
    holder = tmp_path / "outside" if target.startswith("..") else origin / "data"
    init_store(holder)
    secret = Store(holder).create_experiment(
        **experiment_fields(base_commit=COMMIT, change_summary="SECRET experiment - x")
    )
    (origin / "experiments").symlink_to(target, target_is_directory=True)
    git(origin, "add", "-A")
    git(origin, "commit", "-q", "-m", "experiments as a link")
    clone = tmp_path / "clone"
    git(tmp_path, "clone", "-q", str(origin), str(clone))
    assert (clone / "experiments").is_symlink() and (clone / "experiments").is_dir()
    seen = tmp_path / "outside" if target.startswith("..") else clone / "data"
    before = everything_below(seen)

    with pytest.raises(KexpError, match="is a symbolic link"):
        Store(clone)
    with pytest.raises(KexpError, match="is a symbolic link"):
        init_store(clone)
    for args in (
        ["list"],
        ["validate"],
        ["show", secret.id],
        ["add", "--summary", "New - x", "--score", "1", "--operator", "k", "--dtype", "f",
         "--env", "e", "--base-commit", COMMIT],
        ["init"],
    ):  # fmt: skip
        code, output = kexp(clone, *args)
        assert code == 2, (args, output)
        assert "is a symbolic link" in output and "SECRET" not in output, (args, output)
    assert everything_below(seen) == before


def test_init_never_writes_through_a_linked_readme_or_gitignore(tmp_path: Path) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    root = tmp_path / "store"
    (root / "experiments").mkdir(parents=True)
    (root / "experiments" / "README.md").symlink_to(outside / "readme")
    init_store(root)
    assert not (outside / "readme").exists()
    (root / ".gitignore").unlink()
    (root / ".gitignore").symlink_to(outside / "gitignore")
    code, output = kexp(root, "init", str(root))
    assert code == 2 and ".gitignore is a symbolic link" in output, output
    assert list(outside.iterdir()) == []


def test_a_store_at_a_revision_whose_experiments_is_a_link_is_refused(repo: Path) -> None:
    """Reading a commit where experiments/ was a link (the working tree is fine now)."""
    store = Store(repo)
    store.create_experiment(**experiment_fields(base_commit=COMMIT))
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", "a store")
    os.replace(repo / "experiments", repo / "kept")
    (repo / "experiments").symlink_to("kept", target_is_directory=True)
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", "experiments as a link")
    (repo / "experiments").unlink()
    os.replace(repo / "kept", repo / "experiments")
    with pytest.raises(KexpError, match=r"at revision HEAD .* is a symbolic link"):
        Store(repo).at("HEAD")
    assert len(Store(repo).at("HEAD~1").list_experiments()) == 1
