"""Corrections a change dropped: an experiment whose correction note (``kexp update
--reason``, ``kexp remeasure``) a later change removed, as a ``git revert`` of a code
commit that held the correction too (``git commit -a``) or a merge does, silently
putting the corrected score back.

* :func:`dropped_in_history` — for ``kexp validate``: the files whose last change to
  their notes, in git's history or not committed yet, removed one
  (:func:`kexp.gitops.log.dropped_corrections`).
* :func:`dropped_between` — for ``kexp validate --changed`` and ``kexp review``: the
  notes a file had before a change and lacks after it.
"""

from __future__ import annotations

import math
import os
import re
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from kexp.core.advice import CORRECT_SCORE
from kexp.core.errors import KexpError
from kexp.core.problems import Problem
from kexp.format.fileformat import FileFormatError, parse
from kexp.format.notes import CORRECTION_START
from kexp.gitops.log import correction_key, dropped_corrections

if TYPE_CHECKING:
    from kexp.format.fileformat import Document
    from kexp.storage.view import StoreView

__all__ = ["correction_notes", "dropped_between", "dropped_in_history"]

#: What a note says of the score: ``score 0.9543 → 1.0995``.
_SCORE_CHANGE = re.compile(r"\bscore (\S+) → (\S+?)[;.]?(?:\s|$)")
#: The note's date and what it changed: ``**Correction (2026-12-07)**: score ...``.
_NOTE = re.compile(r"\*\*Correction \(([^)]*)\)\*\*:\s*(.*)")


def correction_notes(doc: Document) -> list[str]:
    """The correction notes' lines of an experiment's ``detailed_description``."""
    text = doc.body_values().get("detailed_description") or ""
    return [line.strip() for line in text.splitlines() if line.startswith(CORRECTION_START)]


def dropped_in_history(store: StoreView, files: Sequence[str]) -> list[Problem]:
    """A ``correction-dropped`` warning for each of ``files`` (paths of the working
    tree's store) whose last change to its correction notes removed one; none outside
    git (or for a store read at a revision)."""
    if store.commit is not None or not store.is_working_tree or not files:
        return []
    # lazy: not every command that imports this module needs kexp.storage.snapshot
    from kexp.storage.snapshot import StoreLocation

    try:
        location = StoreLocation.of(store.root)
        dropped = dropped_corrections(location.repo, location.folder)
    except KexpError:  # outside git, or git could not say: nothing to compare with
        return []
    problems: list[Problem] = []
    for path in files:
        found = dropped.get(os.path.basename(path))
        if found is None:
            continue
        if found.commit:
            who = f"commit {found.commit[:12]} ({found.subject!r})"
            rev = f"{found.commit[:12]}^"
        else:
            who, rev = "a change not committed yet", "HEAD"
        problems += _problems(path, _read(path), found.notes, who, rev, found.path)
    return problems


def dropped_between(
    before: Document, after: Document, path: str, base: str, repo_path: str
) -> list[Problem]:
    """A ``correction-dropped`` warning for each correction note ``before`` (the file
    at ``base``, a full hash) holds and ``after`` (the file at ``path``, ``repo_path``
    from the repository's root) lacks."""
    kept = {correction_key(line) for line in correction_notes(after)}
    gone = tuple(line for line in correction_notes(before) if correction_key(line) not in kept)
    if not gone:
        return []
    return _problems(path, after, gone, "this change", base[:12], repo_path)


def _read(path: str) -> Document | None:
    try:
        with open(path, "rb") as handle:
            return parse(handle.read(), path)
    except (OSError, FileFormatError):
        return None


def _problems(
    path: str, doc: Document | None, notes: Sequence[str], who: str, rev: str, repo_path: str
) -> list[Problem]:
    """One warning per dropped note, at the file's ``score`` line."""
    score: Any = doc.fields.get("score") if doc is not None else None
    exp_id = str(doc.fields.get("id", "")) if doc is not None else ""
    line = _score_line(path)
    problems = []
    for note in notes:
        match = _NOTE.match(note)
        date, what = (match[1], match[2]) if match else ("", note)
        what = what.split(". Reason:", 1)[0]
        back = ""
        score_change = _SCORE_CHANGE.search(what)
        if score_change and _same(score, score_change[1]):
            back = f", and its score is back to {score_change[1]}, the value it corrected"
        shown = score_change[0].strip().rstrip(";.") if score_change else what
        shown = shown if len(shown) <= 80 else shown[:77] + "..."
        message = (
            f"{who} removed its correction of {date or 'an earlier day'} ({shown}){back}: "
            "a git revert of a commit that held the correction too, or a merge, undoes it"
        )
        hint = (
            f"bring it back (git checkout {rev} -- :/{repo_path}) and commit that file alone, "
            "apart from code; if the correction was wrong, say so: "
            + CORRECT_SCORE.say(id=exp_id[:10] or "ID")
        )
        problems.append(
            Problem(path, line, 1, "warning", "correction-dropped", "score", message, hint)
        )
    return problems


def _same(score: Any, written: str) -> bool:
    try:
        value = float(written)
    except ValueError:
        return False
    if isinstance(score, bool) or not isinstance(score, (int, float)):
        return False
    return math.isclose(float(score), value, rel_tol=0, abs_tol=5e-5)


def _score_line(path: str) -> int:
    """The line of the front-matter's ``score:`` key (1 when it has none)."""
    try:
        with open(path, encoding="utf-8", errors="replace") as handle:
            for number, line in enumerate(handle, 1):
                if line.startswith("score:"):
                    return number
                if number > 1 and line.rstrip() == "---":
                    break
    except OSError:
        pass
    return 1
