"""Don't repeat: find experiments whose ``code_change`` is the same change.

Two code changes are the same when they are equal after :func:`normalize_code_change`:
diff headers dropped (``diff --git``, ``index``, ``---``/``+++`` file lines, mode and
rename lines), hunk headers reduced to ``@@`` (line numbers move as the base moves),
``\\ No newline at end of file`` dropped, whitespace runs collapsed to one space, line
ends and blank lines ignored. Placeholders are never matched: a code change with no
added or removed line and fewer than :data:`MIN_PLAIN_CHARS` characters (``N/A``,
``see PR 12``) matches nothing.

:meth:`kexp.Store.create_experiment` calls :func:`warn_repeats`, which warns with a
:class:`RepeatedChangeWarning` naming each earlier experiment and its score; when an
earlier one also has the same base commit and env, the new one measures the same
thing again, and the warning is a :class:`RemeasureWarning`: add a round to the earlier
experiment (``kexp remeasure``) instead, so that tries are pooled, not picked from.
"""

from __future__ import annotations

import dataclasses
import re
import warnings
from collections.abc import Iterable
from pathlib import Path
from typing import TYPE_CHECKING

from kexp.fileformat import FileFormatError, parse
from kexp.model import attach, outcome_of
from kexp.store import KexpWarning
from kexp.validate import read_and_check, read_file

if TYPE_CHECKING:
    from kexp.store import Store

#: Shortest normalised code change (without added/removed lines) that is matched.
MIN_PLAIN_CHARS = 40
_HEADER = re.compile(
    r"(diff --git |diff --cc |diff -r |index [0-9a-fA-F]+\.\.|new file mode |deleted file mode |"
    r"old mode |new mode |similarity index |dissimilarity index |rename from |rename to |"
    r"copy from |copy to |Binary files )"
)
_HUNK = re.compile(r"@@+ [-+0-9, ]+ @@+")


class RepeatedChangeWarning(KexpWarning):
    """A new experiment's code change was already tried in an earlier experiment."""


class RemeasureWarning(RepeatedChangeWarning):
    """A new experiment repeats an earlier one's code change, base commit and env: it
    should be a new round of that experiment (``kexp remeasure``)."""


@dataclasses.dataclass(frozen=True)
class Repeat:
    """An earlier experiment with the same code change."""

    id: str
    score: float
    outcome: str
    change_summary: str
    path: Path | None
    base_commit: str = ""
    env: str = ""

    def describe(self) -> str:
        """One line: id, score, outcome and summary."""
        return f"{self.id} (score {self.score:.4f}, {self.outcome}: {self.change_summary!r})"


def normalize_code_change(text: str) -> str:
    """The code change with headers, line numbers and whitespace differences removed."""
    lines = text.replace("\r\n", "\n").replace("\r", "\n").split("\n")
    kept: list[str] = []
    previous_was_old_file = False
    for index, line in enumerate(lines):
        following = lines[index + 1] if index + 1 < len(lines) else ""
        if line.startswith("--- ") and following.startswith("+++ "):
            previous_was_old_file = True
            continue
        if line.startswith("+++ ") and previous_was_old_file:
            previous_was_old_file = False
            continue
        previous_was_old_file = False
        if _HEADER.match(line) or line.startswith("\\ No newline"):
            continue
        if _HUNK.match(line):
            kept.append("@@")
            continue
        collapsed = " ".join(line.split())
        if collapsed in ("", "+", "-"):
            continue
        kept.append(collapsed)
    while kept and kept[-1] == "@@":
        kept.pop()
    return "\n".join(kept)


def is_matchable(normalized: str) -> bool:
    """Whether a normalised code change is a real change (not a placeholder)."""
    if not normalized:
        return False
    changed = any(line[:1] in ("+", "-") for line in normalized.split("\n"))
    return changed or len(normalized) >= MIN_PLAIN_CHARS


def _probes(normalized: str) -> list[bytes]:
    """Whitespace-free tokens of the changed lines, longest first: a file holding the
    same change holds every one of them verbatim (normalising only moves whitespace)."""
    lines = [line for line in normalized.split("\n") if line != "@@"]
    changed = [line[1:] for line in lines if line[:1] in ("+", "-")] or lines
    tokens = {token for line in changed for token in line.split()}
    return sorted((token.encode("utf-8") for token in tokens), key=len, reverse=True)


_CODE_SECTION = re.compile(
    rb"^## Code change[ \t]*\r?\n\r?\n(`{3,})diff[ \t]*\r?\n(.*?)\r?\n\1[ \t]*\r?$",
    re.MULTILINE | re.DOTALL,
)


def _code_change_of(raw: bytes, path: Path) -> str:
    """The code change of a file's text: its canonical diff fence, else a full parse."""
    match = _CODE_SECTION.search(raw)
    if match is not None:
        return match.group(2).decode("utf-8", errors="replace")
    try:
        return parse(raw, path).body_values()["code_change"]
    except FileFormatError:
        return ""


def find_repeats(store: Store, code_change: str, *, exclude: Iterable[str] = ()) -> list[Repeat]:
    """Valid experiments in ``store`` whose code change equals ``code_change`` (normalised).

    Oldest first. Experiments whose ids are in ``exclude`` are left out. Files are
    scanned as text first, so only likely matches are parsed.
    """
    wanted = normalize_code_change(code_change)
    if not is_matchable(wanted):
        return []
    skip = set(exclude)
    probes = _probes(wanted)
    found = []
    for path in store.paths():
        try:
            raw = read_file(path, store.settings)
        except (OSError, FileFormatError):
            continue
        if not all(probe in raw for probe in probes):
            continue
        if normalize_code_change(_code_change_of(raw, path)) != wanted:
            continue
        checked = read_and_check(path, store.settings)
        if not checked.ok:
            continue
        exp = attach(checked.experiment(), path=path)
        if exp.id in skip or normalize_code_change(exp.code_change) != wanted:
            continue
        found.append(exp)
    found.sort(key=lambda e: (e.created_at, e.id))
    return [
        Repeat(
            e.id,
            float(e.score),
            outcome_of(e, store.settings),
            e.change_summary,
            e.path,
            e.base_commit,
            e.env,
        )
        for e in found
    ]


def repeat_message(repeats: list[Repeat], limit: int = 3) -> str:
    """The warning text naming the earlier experiments (at most ``limit``)."""
    named = "; ".join(r.describe() for r in repeats[:limit])
    more = f" and {len(repeats) - limit} more" if len(repeats) > limit else ""
    return (
        f"this code_change was already tried in {named}{more}: read that experiment "
        "before measuring it again"
    )


def remeasure_message(repeat: Repeat) -> str:
    """The warning text for a new experiment that measures ``repeat`` again."""
    return (
        f"this code_change, base_commit and env repeat {repeat.describe()}: it is the same "
        f"measurement again; add it as a round of that experiment instead (kexp remeasure "
        f"{repeat.id} --baseline ... --candidate ..., or kexp.measure.remeasure), so that "
        "tries are pooled rather than the best of them kept"
    )


def warn_repeats(
    store: Store,
    code_change: str,
    *,
    exclude: Iterable[str] = (),
    stacklevel: int = 2,
    base_commit: str = "",
    env: str = "",
) -> list[Repeat]:
    """Warn (:class:`RepeatedChangeWarning`) when ``code_change`` was already tried;
    with a :class:`RemeasureWarning` when an earlier experiment also has this
    ``base_commit`` and ``env`` (given).

    Returns the repeats found. ``stacklevel`` is relative to the caller of this function.
    """
    repeats = find_repeats(store, code_change, exclude=exclude)
    same = [r for r in repeats if base_commit and r.base_commit == base_commit and r.env == env]
    if same:
        warnings.warn(remeasure_message(same[-1]), RemeasureWarning, stacklevel=stacklevel + 1)
    elif repeats:
        warnings.warn(repeat_message(repeats), RepeatedChangeWarning, stacklevel=stacklevel + 1)
    return repeats
