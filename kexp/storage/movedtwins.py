"""One experiment in two files because a commit moved it and it was put back beside the
move: the ``duplicate-id`` problem said as what it is.

Two files with one id are most often a copy (a file copied by hand, two branches that
made the same id), and their advice is ``kexp re-id`` on one of them. When git's history
holds a commit that *moved* (renamed) one of the two paths to the other (a hand move,
then a ``git restore`` of the old path), the two are the same experiment: a new id would
make it a second one, with the same numbers. :func:`moved_back` gives those problems the
advice to keep one file instead.
"""

from __future__ import annotations

import dataclasses
import shlex
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from kexp.core.advice import RE_ID
from kexp.core.errors import GitError, KexpError
from kexp.core.problems import Problem
from kexp.format.rules import id_from_name

if TYPE_CHECKING:
    from kexp.gitops.log import CommitInfo

__all__ = ["moved_back", "moved_twin_advice", "used_twice"]


def moved_back(problems: Sequence[Problem], root: Path, revision: str = "HEAD") -> list[Problem]:
    """``problems`` with the ``duplicate-id`` problems of each id held by exactly two
    files, one of which a commit reachable from ``revision`` moved to the other's path,
    advising to keep one file (never ``kexp re-id``). ``root``: the store's folder; the
    problems' paths are store paths. Outside git, or when no commit moved one to the
    other, the problems as they are."""
    paths: dict[str, list[str]] = {}
    for problem in problems:
        if problem.code == "duplicate-id" and (exp_id := id_from_name(problem.path)):
            paths.setdefault(exp_id, []).append(problem.path)
    hints: dict[str, str] = {}
    for found in paths.values():
        hint = moved_twin_advice(found, root, revision)
        if hint is not None:
            hints.update(dict.fromkeys(found, hint))
    return [
        dataclasses.replace(p, hint=hints[p.path])
        if p.code == "duplicate-id" and p.path in hints
        else p
        for p in problems
    ]


def moved_twin_advice(paths: Sequence[str], root: Path, revision: str = "HEAD") -> str | None:
    """The advice for the files ``paths`` (store paths) of one id when they are two and
    a commit reachable from ``revision`` moved one to the other's path (one experiment
    put back beside its move: keep one file); None otherwise (a copy: ``kexp re-id``)."""
    pair = sorted(set(paths))
    if len(pair) != 2:
        return None
    # lazy: only a store with two files of one id needs kexp.gitops.*, kexp.storage.snapshot
    from kexp.gitops import git as kgit
    from kexp.gitops.log import log_files
    from kexp.storage.snapshot import StoreLocation

    try:
        location = StoreLocation.of(root)
        tip = kgit.resolve_commit(location.repo, revision)
    except GitError:
        return None
    in_repo = [location.repo_path(Path(p)) or p for p in pair]
    move = _move_between(lambda specs: log_files(location.repo, tip, specs), in_repo)
    return _advice(*move) if move is not None else None


def _move_between(
    log: Callable[[list[str]], Sequence[CommitInfo]], specs: list[str]
) -> tuple[str, str] | None:
    """The (from, to) repository paths of the newest commit ``log`` lists that renamed one
    of the two repository paths ``specs`` to the other; None when none did."""
    try:
        commits = log(specs)
    except GitError:
        return None
    found = None
    for commit in commits:  # oldest first: the last move found is the newest
        for change in commit.files:
            if change.status == "R" and {change.old_path, change.path} == set(specs):
                found = (change.old_path, change.path)
    return found


def _advice(old: str, new: str) -> str:
    """The advice for one experiment at ``old`` (where it was) and at ``new`` (where a
    commit moved it), both from the repository's root."""
    keep_new = f"mv -f {shlex.quote(new)} {shlex.quote(old)}"
    keep_old = f"rm {shlex.quote(new)}"
    return (
        f"the same experiment twice, not a copy: a commit moved it from {old} to {new}, and "
        "it was put back where it was beside the move; a new id would make it a second "
        "experiment: keep one file, from the repository's root, where it was: the "
        f"moved file's text ({keep_new}) or the file as it was ({keep_old}), then commit"
    )


def used_twice(exp_id: str, paths: Sequence[str], root: Path) -> KexpError:
    """The error of an id several files hold (of the store at ``root``): keep one of a
    moved experiment's two files (:func:`moved_twin_advice`), else give one a new id."""
    moved = moved_twin_advice(paths, root)
    if moved is not None:  # one experiment a commit moved, put back beside the move
        return KexpError(f"id {exp_id} is used by more than one file: {moved}")
    return KexpError(
        f"id {exp_id} is used by more than one file ({', '.join(paths)}); give one of "
        f"them a new id and the name that goes with it ({RE_ID.say(path=shlex.quote(paths[-1]))})"
    )
