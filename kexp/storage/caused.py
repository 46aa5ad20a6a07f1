"""The store-wide problems a change causes, said as what the change did.

* A parent the change removed: a pull request whose only change deletes an experiment
  others build on leaves their ``pid`` (or ``combines``) naming an experiment the store
  no longer holds. The problem is the removal, not the children: :func:`removed_by_change`
  says so on each child's problem (which file the change removed, and how to put it
  back) instead of the advice to fix the child's ``pid``, which would rewrite someone's
  lineage and scores.
* An id the change copied: a file the change added with an id the store held already
  (a copied file). :func:`copied_by_change` gives the file that was there the advice to
  give the *added* file a new id, never itself: the established experiment keeps its id
  (others name it, and its history is under it).
"""

from __future__ import annotations

import dataclasses
import shlex
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from kexp.core.advice import CORRECT_FIELD, RE_ID
from kexp.core.problems import Problem

if TYPE_CHECKING:
    from kexp.format.filelinks import FileLinks
    from kexp.storage.history import Changes

__all__ = ["added_files", "copied_by_change", "removed_by_change", "removed_files"]


def removed_files(changes: Changes, in_repo: Callable[[Path], str]) -> dict[str, str]:
    """The ids the change removed, each with the path of the file it removed from the
    repository's root (``in_repo``: a store path's)."""
    return {c.id: in_repo(c.path) for c in changes.removed}


def removed_by_change(
    problems: Sequence[Problem],
    links: Sequence[FileLinks],
    removed: Mapping[str, str],
    base: str,
) -> list[Problem]:
    """``problems`` (the store-wide problems at the head) with each ``dangling-pid`` or
    ``dangling-combines`` problem whose missing experiment the change removed
    (``removed``: id → its file from the repository's root) said so: which file, and
    how to put it back from ``base``. ``links``: the store's files at the head (what each names)."""
    if not removed:
        return list(problems)
    named = {link.path: link for link in links if link.pid in removed or _combines(link, removed)}
    said: list[Problem] = []
    for problem in problems:
        link = named.get(problem.path)
        missing = _missing(problem, link, removed) if link is not None else None
        if link is None or missing is None:
            said.append(problem)
            continue
        path = removed[missing]
        # ":/": the path from the repository's root, wherever the command is run
        restore = f"git restore --source {shlex.quote(base)} -- {shlex.quote(':/' + path)}"
        what = "parent" if problem.code == "dangling-pid" else "combined experiment"
        child = (link.id or "")[:10] or "ID"
        said.append(
            dataclasses.replace(
                problem,
                message=f"{what} {missing} is removed by this change ({path})",
                hint=(
                    f"to keep it, put it back ({restore}) and commit, or drop the commit "
                    f"that removes it; to remove it all the same, build {child} on another "
                    f"experiment first ({CORRECT_FIELD.say(id=child, field=_field(problem))})"
                ),
            )
        )
    return said


def _combines(link: FileLinks, removed: Mapping[str, str]) -> bool:
    return any(other in removed for other in link.combines if other is not None)


def _field(problem: Problem) -> str:
    return "pid" if problem.code == "dangling-pid" else "combines"


def _missing(problem: Problem, link: FileLinks, removed: Mapping[str, str]) -> str | None:
    """The removed id ``problem`` (of the file ``link``) says is missing, if it is one."""
    if problem.code == "dangling-pid":
        return link.pid if link.pid in removed else None
    if problem.code == "dangling-combines":
        _, _, index = problem.field.partition(".")
        if index.isdigit() and int(index) < len(link.combines):
            other = link.combines[int(index)]
            return other if other in removed else None
    return None


def added_files(changes: Changes) -> dict[str, list[str]]:
    """The ids of the files the change added, each with those files (store paths)."""
    added: dict[str, list[str]] = {}
    for change in changes.added:
        if change.after is not None:
            added.setdefault(change.id, []).append(str(change.after.path))
    return added


def copied_by_change(
    problems: Sequence[Problem], links: Sequence[FileLinks], added: Mapping[str, list[str]]
) -> list[Problem]:
    """``problems`` with the ``duplicate-id`` problem of each file the change did not add
    whose id a file it added holds too (``added``: id → the files added) advising to give
    the added file a new id, not this one. ``links``: the store's files at the head."""
    if not added:
        return list(problems)
    new = {path for paths in added.values() for path in paths}
    ids = {link.path: link.id for link in links if link.id in added and link.path not in new}
    said: list[Problem] = []
    for problem in problems:
        exp_id = ids.get(problem.path) if problem.code == "duplicate-id" else None
        if exp_id is None:
            said.append(problem)
            continue
        copies = added[exp_id]
        named = ", ".join(copies)
        commands = "; ".join(RE_ID.say(path=shlex.quote(copy)) for copy in copies)
        said.append(
            dataclasses.replace(
                problem,
                hint=(
                    f"this change added {named} with the id this file held already: give "
                    f"the added file a new id and the name that goes with it ({commands}); "
                    "this one keeps its id"
                ),
            )
        )
    return said
