"""A score a change corrected without saying why: the twin, for a hand edit, of the
note ``kexp update --reason`` and ``kexp remeasure`` record.

A correction made with kexp appends a dated note to ``detailed_description`` (``**Correction
(2026-11-30)**: score 1.019 → 1.021. Reason: ...``): a reader of the experiment sees that
its number moved, and why. A pull request that edits the ``score`` line by hand (someone
else's experiment, most often) leaves no such note: :func:`unexplained_score` is the
warning ``kexp validate --changed`` and ``kexp review`` give of it, naming whose
experiment it is and what its summary still says.
"""

from __future__ import annotations

import os
import re
import shlex
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from kexp.core.advice import CORRECT_SCORE, REMEASURE
from kexp.core.problems import Problem

if TYPE_CHECKING:
    from kexp.format.fileformat import Document
    from kexp.storage.history import Changes

__all__ = ["SCORE_WITHOUT_NOTE", "add_unexplained_scores", "unexplained_score"]

#: The code of the warning.
SCORE_WITHOUT_NOTE = "score-without-note"

#: The start of a correction note as kexp writes it (``**Correction (DATE)**:``), or as
#: a person writes it by hand (``**Correction**:``).
_NOTE = re.compile(r"^\*\*Correction\b[^*\n]*\*\*:(.*)$", re.MULTILINE)


def _score_notes(doc: Document) -> list[str]:
    """The correction notes of ``doc``'s ``detailed_description`` that name the score."""
    text = doc.body_values().get("detailed_description") or ""
    return [note for note in _NOTE.findall(text) if "score" in note]


def _shown(value: Any) -> str:
    return "(absent)" if value is None else str(value)


def unexplained_score(
    before: Document,
    after: Document,
    path: str,
    base: str,
    old_path: str,
    new_path: str | None = None,
) -> Problem | None:
    """The ``score-without-note`` warning of a change that made ``before`` (the file at
    the merge base, at ``old_path`` from the repository's root) into ``after`` (at
    ``path``; ``new_path`` from the repository's root, when the change moved it): its
    score changed and no correction note naming the score was added; None otherwise.
    ``base``: the revision the change is compared with, which the advice restores the
    file from (a moved file moved back first: restored where it was, it would be a
    second file of the same experiment)."""
    old, new = before.fields.get("score"), after.fields.get("score")
    if old == new or old is None:
        return None
    if [n for n in _score_notes(after) if n not in set(_score_notes(before))]:
        return None  # the change says why, as kexp writes it
    exp_id = str(after.fields.get("id") or "")
    author = str(after.fields.get("author") or before.fields.get("author") or "")
    whose = f"{author}'s experiment" if author else "an experiment that names no author"
    summary = before.fields.get("change_summary")
    said = ""
    if summary is not None and summary == after.fields.get("change_summary"):
        said = f"; its change_summary still reads {str(summary)!r}"
    line, column = after.position(("score",))
    # ":/": the path from the repository's root, wherever the command is run
    restore = f"git restore --source {shlex.quote(base)} -- {shlex.quote(':/' + old_path)}"
    where = ""
    if new_path is not None and new_path != old_path:
        folder = os.path.dirname(old_path)
        mkdir = f"mkdir -p {shlex.quote(folder)} && " if folder else ""
        back = f"git mv {shlex.quote(new_path)} {shlex.quote(old_path)}"
        restore = f"{mkdir}{back} && {restore}"
        where = "where it was, from the repository's root "
    return Problem(
        path,
        line,
        column,
        "warning",
        SCORE_WITHOUT_NOTE,
        "score",
        f"changed {_shown(old)} → {_shown(new)} by hand, with no correction note saying why "
        f"({whose}{said})",
        f"a score is corrected with its reason, which kexp records in the description: "
        f"put the file back {where}({restore}), then {CORRECT_SCORE.say(id=exp_id[:10] or 'ID')} "
        f"(or new timings: {REMEASURE.say(id=exp_id[:10] or 'ID')})"
        + (f"; ask {author} first" if author else ""),
    )


def add_unexplained_scores(changes: Changes, base: str, in_repo: Callable[[Path], str]) -> None:
    """Add to each corrected file's problems of ``changes`` (compared with ``base``) the
    :func:`unexplained_score` warning of its score changed without a note (``in_repo``:
    a store path from the repository's root)."""
    for before, now, after, change in changes.both_read():
        where = in_repo(change.old_path or after.path)
        moved = in_repo(after.path) if change.old_path is not None else None
        # Brought back after a removal: restored from the commit before the removal.
        source = f"{change.removed_in[:12]}~1" if change.removed_in else base
        found = unexplained_score(before, now, str(after.path), source, where, moved)
        if found is not None:
            after.problems.append(found)
