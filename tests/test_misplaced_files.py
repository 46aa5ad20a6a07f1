"""A file in another id's fan-out folder (``experiments/YYYY/MM/xx/``, ``xx`` the id's
last two hex digits). ``kexp sync``'s merges never move a file by folder, but a forge's
merge of a pull request does, with git's directory-rename detection: when the pull
request emptied a shard folder and filled another (to git, the folder renamed), a file
main added meanwhile to the first folder lands in the second. Every command still
reads it; ``kexp validate`` warns, naming the move that puts it back, which runs as
printed. Real git: a bare repository on disk as the remote, clones, the forge's merge
made with git."""

from __future__ import annotations

import json
import re
import subprocess
from pathlib import Path

from conftest import experiment_fields, git, run_kexp
from test_sync import clone, make_remote, record

from kexp import Store

WHEN = "2026-12-06T10:00:00.000000Z"


def paths_on(repo: Path, rev: str) -> list[str]:
    """The experiment files at ``rev`` (git's listing)."""
    listing = git(repo, "ls-tree", "-r", "--name-only", rev, "--", "experiments")
    return [line for line in listing.splitlines() if not line.endswith("README.md")]


def test_a_file_a_forges_merge_moved_into_another_ids_folder_is_warned_and_moved_back(
    tmp_path: Path,
) -> None:
    """Alice's pull request removes the only experiment of shard ``ab`` and records one
    much like it in ``cd``; Bob records one whose id ends in ``ab`` and syncs to main
    first. The forge merges the pull request (directory renames followed, as a merge
    that does not stop on them): Bob's file lands in ``cd``. Carol's clone reads it as
    every other; ``kexp validate`` warns of it alone (exit 0) with the ``mkdir``/``mv``
    that moves it back, which runs as printed; then validate is quiet and ``kexp sync``
    publishes the move."""
    remote, base = make_remote(tmp_path)
    alice, bob = clone(remote, tmp_path / "alice"), clone(remote, tmp_path / "bob")
    first = record(alice, base, "Vectorize loads float4 - +12%", score=1.12,
                   id="6753000000000aab", created_at=WHEN)  # fmt: skip
    assert run_kexp("sync", cwd=alice).returncode == 0
    git(alice, "switch", "-q", "-c", "kexp/alice")
    Store(alice).remove_experiment(first.id)
    again = record(alice, base, "Vectorize loads float4 - +11%", score=1.11,
                   id="6753000000000bcd", created_at=WHEN)  # fmt: skip
    git(alice, "add", "-A", "experiments")
    git(alice, "commit", "-q", "-m", "Redo the float4 loads")
    git(alice, "push", "-q", "origin", "kexp/alice")
    assert run_kexp("sync", cwd=bob).returncode == 0
    theirs = record(bob, base, "Warp reduce via shfl - +5%", score=1.05,
                    id="6753000000000cab", created_at=WHEN)  # fmt: skip
    assert run_kexp("sync", cwd=bob).returncode == 0
    right = f"experiments/2026/12/ab/{theirs.path.name}"
    assert right in paths_on(remote, "main")

    forge = clone(remote, tmp_path / "forge")
    git(forge, "-c", "merge.directoryRenames=true", "merge", "-q", "--no-edit", "origin/kexp/alice")
    git(forge, "push", "-q", "origin", "main")
    wrong = f"experiments/2026/12/cd/{theirs.path.name}"
    assert sorted(paths_on(remote, "main")) == sorted([f"experiments/2026/12/cd/{again.path.name}",
                                                      wrong])  # fmt: skip

    carol = clone(remote, tmp_path / "carol")
    assert sorted(e.id for e in Store(carol).list_experiments()) == sorted([again.id, theirs.id])
    shown = json.loads(run_kexp("show", theirs.id, "--json", cwd=carol).stdout)
    assert shown["score"] == 1.05, shown
    found = run_kexp("validate", cwd=carol)
    assert found.returncode == 0, found.stdout  # a warning
    assert f"{wrong}:1:1: warning[misplaced-file]" in found.stdout, found.stdout
    problems = json.loads(run_kexp("validate", "--format", "json", cwd=carol).stdout)
    assert [(p["code"], p["severity"]) for p in problems] == [("misplaced-file", "warning")]

    command = re.search(r"\((mkdir -p .* && mv .*)\) and commit the move$", found.stdout, re.M)
    assert command is not None, found.stdout
    subprocess.run(["bash", "-c", command.group(1)], cwd=carol, check=True)
    assert (carol / right).is_file() and not (carol / wrong).exists()
    done = run_kexp("validate", cwd=carol)
    assert done.returncode == 0 and "warning" not in done.stdout, done.stdout
    assert run_kexp("sync", cwd=carol).returncode == 0
    assert right in paths_on(remote, "main") and wrong not in paths_on(remote, "main")


def test_the_move_back_runs_as_printed_for_a_hand_named_file(repo: Path, store: Store) -> None:
    """A hand-named file (a space and a quote in its name) moved by hand into another
    id's folder, not committed: ``kexp validate`` (and ``kexp validate FILE``) warns
    with a move that the shell runs as printed; a file of the month layout is no
    problem, and one in a folder of someone's own is a ``moved-file`` of its own (the
    path kexp chose stays: test_moved_files)."""
    exp = store.create_experiment(**experiment_fields())
    other = "00" if exp.id.endswith("ff") else "ff"
    month = exp.path.parent.parent
    wrong = month / other / f"{exp.id}-Unroll 4 (Bob's).md"
    wrong.parent.mkdir()
    exp.path.rename(wrong)
    exp.path.parent.rmdir()
    old = store.create_experiment(**experiment_fields(change_summary="Month layout - +1%"))
    old.path.rename(month / old.path.name)
    own = store.create_experiment(**experiment_fields(change_summary="Own folder - +1%"))
    (repo / "experiments" / "mine").mkdir()
    own.path.rename(repo / "experiments" / "mine" / own.path.name)

    for args in (("validate",), ("validate", str(wrong.relative_to(repo)))):
        found = run_kexp(*args, cwd=repo)
        assert found.returncode == 0, found.stdout
        problems = json.loads(run_kexp(*args, "--format", "json", cwd=repo).stdout)
        mine = [("moved-file", own.path.name)] if len(args) == 1 else []
        assert [(p["code"], Path(p["file"]).name) for p in problems] == [
            ("misplaced-file", wrong.name),
            *mine,
        ], problems
    command = re.search(r"\((mkdir -p .* && mv .*)\) and commit the move$", found.stdout, re.M)
    assert command is not None, found.stdout
    subprocess.run(["bash", "-c", command.group(1)], cwd=repo, check=True)
    assert (month / exp.id[-2:] / wrong.name).is_file() and not wrong.exists()
    left = json.loads(run_kexp("validate", "--format", "json", cwd=repo).stdout)
    assert [(p["code"], Path(p["file"]).name) for p in left] == [("moved-file", own.path.name)]
    assert store.get_experiment(exp.id).path == month / exp.id[-2:] / wrong.name


def test_validate_changed_and_the_review_warn_of_a_misplaced_changed_file(
    repo: Path, store: Store
) -> None:
    """A branch adds an experiment in another id's folder: ``kexp validate --changed
    main`` (a pull request's check, and the pre-commit hook's) warns of it as a full
    ``kexp validate`` does, uncommitted and committed, and the review lists it."""
    git(repo, "add", "-A", "experiments")
    git(repo, "commit", "-q", "--allow-empty", "-m", "main")
    git(repo, "checkout", "-q", "-b", "agent/misplaced")
    exp = store.create_experiment(**experiment_fields())
    other = "00" if exp.id.endswith("ff") else "ff"
    wrong = exp.path.parent.parent / other / exp.path.name
    wrong.parent.mkdir()
    exp.path.rename(wrong)
    exp.path.parent.rmdir()
    full = json.loads(run_kexp("validate", "--format", "json", cwd=repo).stdout)
    assert [p["code"] for p in full] == ["misplaced-file"]
    for commit in (False, True):
        if commit:
            git(repo, "add", "-A", "experiments")
            git(repo, "commit", "-q", "-m", "misplaced")
        done = run_kexp("validate", "--changed", "main", "--format", "json", cwd=repo)
        assert done.returncode == 0, done.stdout
        found = json.loads(done.stdout)
        assert [(p["code"], Path(p["file"]).name) for p in found] == [
            ("misplaced-file", wrong.name)
        ], found
        assert found[0]["hint"] == full[0]["hint"]
    review = run_kexp("review", "main", cwd=repo)
    assert review.returncode == 0, review.stderr
    assert "misplaced-file" in review.stdout, review.stdout
