"""``kexp re-id PATH``: a user who copies an experiment's file to start a new one has two
files with one id; validate names the command that gives one of them a fresh id and the
name that goes with it, and the command does it (the file moved to its new id's folder,
only its id line changed), refusing a file that is not an experiment's and a unique id
other experiments name (their lineage would break). Real git repositories, real files,
the command as the user types it."""

from __future__ import annotations

import shlex
import shutil
from pathlib import Path

from conftest import experiment_fields, run_kexp

from kexp import Store
from kexp.core.ids import is_valid_id
from kexp.format.rules import id_from_name
from kexp.storage.layout import fanout


def copied(repo: Path) -> tuple[str, Path, Path]:
    """An experiment recorded, its file copied by hand beside it to start a new one:
    (its id, the original, the copy)."""
    made = Store(repo).create_experiment(**experiment_fields())
    assert made.path is not None
    copy = made.path.with_name(made.path.name.replace(".md", "-copy.md"))
    shutil.copyfile(made.path, copy)
    return made.id, made.path, copy


def ids_in(repo: Path) -> list[str | None]:
    return sorted(id_from_name(p) for p in (repo / "experiments").rglob("*-*.md"))


def test_validate_names_re_id_and_re_id_gives_the_copy_a_fresh_id(repo: Path) -> None:
    """The copy is a duplicate id; validate's hint is the ``kexp re-id`` command for that
    file (it was a sed and mv pipeline), which, run as written, moves the copy to a fresh
    id's file: only the id line changed, the original untouched, validate clean."""
    old, original, copy = copied(repo)
    before, kept = copy.read_bytes(), original.read_bytes()
    checked = run_kexp("validate", cwd=repo)
    assert checked.returncode == 1 and "duplicate-id" in checked.stdout, checked.stdout
    hint = next(
        line for line in checked.stdout.splitlines() if "hint:" in line and copy.name in line
    )
    assert f"kexp re-id {shlex.quote(str(copy))}" in hint, hint
    command = hint[hint.index("kexp re-id") :].removesuffix(")")
    done = run_kexp(*shlex.split(command)[1:], cwd=repo)
    assert done.returncode == 0, done.stderr
    assert not copy.exists() and original.read_bytes() == kept
    (moved,) = [p for p in (repo / "experiments").rglob("*.md") if p != original]
    new = id_from_name(moved)
    assert new is not None and is_valid_id(new) and new != old
    assert new[:8] >= old[:8], "a new id's time is now"
    assert moved.name == f"{new}-{copy.name.split('-', 1)[1].removesuffix('-copy.md')}.md"
    assert moved.parent.name == fanout(new)
    assert moved.read_bytes() == before.replace(f"id: {old}".encode(), f"id: {new}".encode())
    (line,) = done.stdout.splitlines()
    assert old in line and new in line and moved.name in line, line
    again = run_kexp("validate", cwd=repo)
    assert again.returncode == 0 and "duplicate-id" not in again.stdout, again.stdout
    assert Store(repo).get_experiment(new).change_summary == experiment_fields()["change_summary"]


def test_a_duplicated_parent_may_be_re_ided_but_a_unique_one_is_refused(repo: Path) -> None:
    """With a child naming the id, the copy of its parent may be given a new id (the
    original keeps the one the child names); once the id is unique, re-iding it is
    refused in one line saying the child's lineage would break, nothing changed."""
    old, original, copy = copied(repo)
    child = Store(repo).create_experiment(
        **experiment_fields(change_summary="Unroll by 8 - +1%", score=1.01, pid=old)
    )
    assert child.pid == old
    done = run_kexp("re-id", str(copy.relative_to(repo)), cwd=repo)
    assert done.returncode == 0, done.stderr
    assert Store(repo).get_experiment(child.id).pid == old
    assert ids_in(repo).count(old) == 1
    kept = original.read_bytes()
    refused = run_kexp("re-id", str(original), cwd=repo)
    assert refused.returncode == 2 and refused.stdout == "", refused.stdout
    (line,) = refused.stderr.strip().splitlines()
    assert child.id[:10] in line and "lineage" in line and "kexp re-id" in line, line
    assert original.read_bytes() == kept and ids_in(repo).count(old) == 1


def test_what_is_not_an_experiment_file_is_refused_in_one_line(repo: Path) -> None:
    """The README, a file outside experiments/, a missing file, a folder, a file whose
    front-matter cannot be read: one line each, nothing changed."""
    old, original, copy = copied(repo)
    (repo / "experiments" / "README.md").write_text("The experiments.\n")
    outside = repo / f"{old}-elsewhere.md"
    shutil.copyfile(original, outside)
    broken = copy.with_name(f"{'0' * 15}1-broken.md")
    broken.write_text("no front-matter here\n")
    files = {p: p.read_bytes() for p in (repo / "experiments").rglob("*.md")}
    for path in (
        repo / "experiments" / "README.md",
        outside,
        repo / "experiments" / f"{old}-missing.md",
        repo / "experiments",
        broken,
    ):
        refused = run_kexp("re-id", str(path), cwd=repo)
        assert refused.returncode == 2, (path, refused.stdout)
        (line,) = refused.stderr.strip().splitlines()
        assert line.startswith(f"kexp: error: {path}") and "Traceback" not in line, line
    assert {p: p.read_bytes() for p in (repo / "experiments").rglob("*.md")} == files
    assert outside.exists()


def test_the_library_call_says_what_it_did(repo: Path) -> None:
    """``Store.re_id(path)`` is the command in one call: the old and new id and paths."""
    old, _, copy = copied(repo)
    done = Store(repo).re_id(copy)
    assert done.old_id == old and done.old_path == copy and done.id != old
    assert done.path.is_file() and not copy.exists()
    assert id_from_name(done.path) == done.id
