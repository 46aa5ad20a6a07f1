"""Don't repeat: find experiments whose ``code_change`` is the same change.

Two code changes are the same when they are equal after :func:`normalize_code_change`:
diff headers dropped (``diff --git``, ``index``, ``---``/``+++`` file lines, mode and
rename lines), hunk headers reduced to ``@@`` (line numbers move as the base moves),
``\\ No newline at end of file`` dropped, whitespace runs collapsed to one space, line
ends and blank lines ignored. Placeholders are never matched: a code change with no
added or removed line and fewer than :data:`MIN_PLAIN_CHARS` characters (``N/A``,
``see PR 12``) matches nothing.

:meth:`kexp.Store.create_experiment` calls :func:`warn_repeats`, which warns with a
:class:`RepeatedChangeWarning` naming each earlier experiment and its score.
"""

from __future__ import annotations

import dataclasses
import re
import warnings
from collections.abc import Iterable
from pathlib import Path
from typing import TYPE_CHECKING

from kexp.fileformat import FileFormatError, parse
from kexp.model import outcome_of
from kexp.store import KexpWarning
from kexp.validate import read_and_check, read_file, read_file_and_stat

if TYPE_CHECKING:
    from collections.abc import Callable

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


@dataclasses.dataclass(frozen=True)
class Repeat:
    """An earlier experiment with the same code change."""

    id: str
    score: float
    outcome: str
    change_summary: str
    path: Path | None

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


def code_key(normalized: str) -> str:
    """The key of a normalised code change (a hash): equal changes have equal keys."""
    import hashlib

    return hashlib.blake2b(normalized.encode("utf-8", "surrogatepass"), digest_size=12).hexdigest()


def file_code_key(raw: bytes, path: Path) -> str:
    """The :func:`code_key` of the code change in an experiment file's text; "" when it
    holds no matchable change (none, or a placeholder)."""
    normalized = normalize_code_change(_code_change_of(raw, path))
    return code_key(normalized) if is_matchable(normalized) else ""


def _keys_of(store: Store) -> Callable[[list[str]], list[tuple[str, bytes]]]:
    """A function from paths (relative to ``experiments/``) to each file's code key and
    the stat signature it was read at (in two processes when there are many)."""
    from kexp.index import in_two_processes, stat_signature

    base = store.experiments_dir

    def keys(paths: list[str]) -> list[tuple[str, bytes]]:
        found: list[tuple[str, bytes]] = []
        for relative in paths:
            path = base / relative
            try:
                raw, info = read_file_and_stat(path, store.settings)
            except (OSError, FileFormatError):
                found.append(("", b""))
                continue
            found.append((file_code_key(raw, path), stat_signature(info)))
        return found

    return lambda paths: in_two_processes(keys, paths, len(paths))


def find_repeats(store: Store, code_change: str, *, exclude: Iterable[str] = ()) -> list[Repeat]:
    """Valid experiments in ``store`` whose code change equals ``code_change`` (normalised).

    Oldest first. Experiments whose ids are in ``exclude`` are left out. The query cache
    keeps each file's :func:`code_key` (computed once per version of a file), so only
    the files holding the same change are read; a store without a cache (one at a
    revision) is scanned as text, so only likely matches are parsed.
    """
    wanted = normalize_code_change(code_change)
    if not is_matchable(wanted):
        return []
    key = code_key(wanted)
    found_rows = store.query_cache(
        lambda view: view.rows_with_code_key(key, _keys_of(store)), light=True
    )
    paths = (
        store.paths()
        if found_rows is None
        else [store.experiments_dir / row.path for row in found_rows]
    )
    return _repeats_in(store, paths, wanted, set(exclude))


def _repeats_in(store: Store, paths: list[Path], wanted: str, skip: set[str]) -> list[Repeat]:
    """The :class:`Repeat` of each of ``paths`` holding the normalised change ``wanted``."""
    probes = _probes(wanted)
    found = []
    for path in paths:
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
        exp = checked.experiment()
        exp.path = path
        if exp.id in skip or normalize_code_change(exp.code_change) != wanted:
            continue
        found.append(exp)
    found.sort(key=lambda e: (e.created_at, e.id))
    return [
        Repeat(e.id, float(e.score), outcome_of(e, store.settings), e.change_summary, e.path)
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


def warn_repeats(
    store: Store, code_change: str, *, exclude: Iterable[str] = (), stacklevel: int = 2
) -> list[Repeat]:
    """Warn (:class:`RepeatedChangeWarning`) when ``code_change`` was already tried.

    Returns the repeats found. ``stacklevel`` is relative to the caller of this function.
    """
    repeats = find_repeats(store, code_change, exclude=exclude)
    if repeats:
        warnings.warn(repeat_message(repeats), RepeatedChangeWarning, stacklevel=stacklevel + 1)
    return repeats
