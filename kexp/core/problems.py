"""Validation problems and how they are reported (compiler style, JSON, GitHub)."""

from __future__ import annotations

import dataclasses
import os
import re
from collections import Counter
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any, Literal

Severity = Literal["error", "warning"]

#: A word of a message or hint: a value (a commit, an id, a path, a number) when it
#: holds a digit or one of ``/._-``, or is a hexadecimal hash.
_WORD = re.compile(r"[^\s,;()'\"]+")
_VALUE = re.compile(r"[\d/._-]|^[0-9a-f]{7,}$")


@dataclasses.dataclass(frozen=True)
class Problem:
    """One problem found in one file, at a position, with a hint saying how to fix it.

    ``code`` is stable per kind of problem (e.g. ``yaml-duplicate-key``) so scripts and
    agents can act on it; ``field`` is the dotted path of the offending field, or ``""``.
    """

    path: str
    line: int
    column: int
    severity: Severity
    code: str
    field: str
    message: str
    hint: str = ""

    def format(self) -> str:
        """Render as ``path:line:col: severity[CODE] field: message`` plus a hint line."""
        where = f"{display_path(self.path)}:{self.line}:{self.column}"
        field = f" {self.field}:" if self.field else ""
        text = f"{where}: {self.severity}[{self.code}]{field} {self.message}"
        if self.hint:
            text += f"\n  hint: {self.hint}"
        return text

    def format_github(self) -> str:
        """Render as a GitHub Actions workflow annotation."""
        kind = "error" if self.severity == "error" else "warning"
        message = f"[{self.code}] {self.field + ': ' if self.field else ''}{self.message}"
        if self.hint:
            message += f" (hint: {self.hint})"
        return (
            f"::{kind} file={_escape_property(display_path(self.path))},line={self.line},"
            f"col={self.column},title={_escape_property(f'kexp {self.code}')}::"
            f"{_escape_data(message)}"
        )

    def to_dict(self) -> dict[str, Any]:
        """The problem as JSON-ready data (stable keys)."""
        return {
            "file": display_path(self.path),
            "line": self.line,
            "column": self.column,
            "severity": self.severity,
            "code": self.code,
            "field": self.field,
            "message": self.message,
            "hint": self.hint,
        }


def _escape_data(text: str) -> str:
    """Escape a workflow command's message, as GitHub's toolkit does."""
    return text.replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")


def _escape_property(text: str) -> str:
    """Escape a workflow command's property value (a ',' or ':' would end it early)."""
    return _escape_data(text).replace(":", "%3A").replace(",", "%2C")


def display_path(path: str | os.PathLike[str]) -> str:
    """Show ``path`` relative to the working directory when it lies below it."""
    try:
        absolute = Path(os.path.abspath(path))
        # Resolve the folders (the working directory is a real path), not the file itself:
        # a symbolic link to a file elsewhere is still shown where it is.
        absolute = absolute.parent.resolve() / absolute.name
        return os.path.relpath(absolute) if absolute.is_relative_to(Path.cwd()) else str(path)
    except (OSError, ValueError):
        return str(path)


def format_problems(problems: Sequence[Problem]) -> list[str]:
    """Each problem as :meth:`Problem.format` gives it, but a hint several problems of
    one code share, each with its own values (the commit it fetches, say), printed once:
    with the first, saying for how many below it holds."""
    shapes = [(p.code, _hint_shape(p)) if p.hint else None for p in problems]
    counts = Counter(shape for shape in shapes if shape is not None)
    said: set[tuple[str, str]] = set()
    lines = []
    for problem, shape in zip(problems, shapes, strict=True):
        if shape is None or counts[shape] == 1:
            lines.append(problem.format())
        elif shape in said:
            lines.append(dataclasses.replace(problem, hint="").format())
        else:
            said.add(shape)
            lines.append(
                f"{problem.format()}\n  (the same hint, with their own values, for the "
                f"{counts[shape] - 1} other {problem.code} problem(s) below)"
            )
    return lines


def _hint_shape(problem: Problem) -> str:
    """The problem's hint with each value its message names too left out."""
    own = {w for w in _WORD.findall(problem.message) if _VALUE.search(w)}
    return _WORD.sub(lambda m: "{}" if m.group() in own else m.group(), problem.hint)


def sort_problems(problems: Iterable[Problem]) -> list[Problem]:
    """Order problems by file, then position, errors before warnings at one position."""
    return sorted(problems, key=lambda p: (p.path, p.line, p.column, p.severity != "error", p.code))


def has_errors(problems: Iterable[Problem]) -> bool:
    """Whether any of ``problems`` is an error (warnings do not count)."""
    return any(p.severity == "error" for p in problems)
