"""What a sync's check of what it publishes makes of the problems found: the first
error, which stops it (:func:`first_error`), and the scores changed with no correction
note, which it publishes and says (:func:`unexplained_scores`).

A score changed without a note is a warning, not an error (``kexp validate`` exits 0 on
it): in the file, a score edited by hand reads as one ``kexp update --set score=...``
corrected without ``--reason``, which is the user's to choose. So the sync publishes it,
and its answer names each one, as ``kexp validate --changed`` would.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from kexp.core.problems import Problem, display_path, sort_problems
from kexp.storage.scorechange import SCORE_WITHOUT_NOTE

if TYPE_CHECKING:
    from kexp.storage.store import Store

__all__ = ["first_error", "unexplained_scores"]


def first_error(problems: list[Problem]) -> str:
    """The first error of ``problems`` in files a sync publishes, on one line
    (``path:line: error[code] field: message``, and how many more), or ""."""
    errors = sort_problems(p for p in problems if p.severity == "error" and p.code != "stray-file")
    if not errors:
        return ""
    first = errors[0]
    field = f" {first.field}:" if first.field else ""
    # Two files sharing an id are one problem, said of each file: counted once.
    shared = {p.message.split()[1] for p in errors if p.code == "duplicate-id"}
    others = len(errors) - len([p for p in errors if p.code == "duplicate-id"]) + len(shared) - 1
    more = f" (and {others} more)" if others > 0 else ""
    where = f"{display_path(first.path)}:{first.line}"
    return f"{where}: error[{first.code}]{field} {first.message}{more}"


def unexplained_scores(store: Store, base: str | None, head: str | None) -> tuple[str, ...]:
    """The scores that ``head`` changed since ``base`` (the remote's branch before the
    push) with no correction note saying why, one ``path:line: score: message`` each;
    none without both commits."""
    if base is None or head is None or base == head:
        return ()
    # lazy: kexp.storage.changed reads the whole store; only a push needs it
    from kexp.storage.changed import check_changes

    found = check_changes(store, base, head).file_problems
    return tuple(
        f"{display_path(p.path)}:{p.line}: {p.field}: {p.message}"
        for p in sort_problems(p for p in found if p.code == SCORE_WITHOUT_NOTE)
    )
