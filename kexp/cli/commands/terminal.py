"""Text for the terminal: escaping, colour, the pager, JSON, tables fitted to the
width, and progress bars (what every command prints through).

Only click is imported up front (``kexp --help`` loads every command module).
"""

from __future__ import annotations

import contextlib
import functools
import io
import json
import os
import re
import sys
from collections.abc import Callable, Iterator, Sequence
from typing import Any, TypeVar

import click

_F = TypeVar("_F", bound=Callable[..., Any])
#: Progress is shown for loops over at least this many files.
PROGRESS_MIN_ITEMS = 200
_C1 = {code: f"\\u{code:04x}" for code in range(0x7F, 0xA0)}
#: Unicode bidirectional-text controls: they reorder what a terminal shows ("Trojan
#: Source"), so text can display as something other than what it is.
_BIDI = frozenset("\u061c\u200e\u200f\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069")
#: What :func:`json_text` writes as ``\\uXXXX`` escapes.
_JSON_ESCAPES = {
    **_C1,
    **{ord(ch): f"\\u{ord(ch):04x}" for ch in (*_BIDI, "\u2028", "\u2029")},
    **{code: f"\\u{code:04x}" for code in range(0xD800, 0xE000)},
}
#: Any character :func:`clean` escapes.
_UNSAFE = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\ud800-\udfff" + "".join(sorted(_BIDI)) + "]")


# --- text for the terminal -----------------------------------------------------------


def clean(text: str) -> str:
    """Neutralise control characters, ANSI escapes and bidirectional-text controls in text
    shown in a terminal: each is written as its escape (``\\x1b``, ``\\u202e``)."""
    if _UNSAFE.search(text) is None:
        return text  # the common case, answered by one regular expression
    return "".join(
        ch
        if ch in "\n\t"
        or (
            ch >= " "
            and ch != "\x7f"
            and not 0x80 <= ord(ch) < 0xA0
            and ch not in _BIDI
            and not 0xD800 <= ord(ch) < 0xE000  # a lone surrogate: not printable as UTF-8
        )
        else f"\\x{ord(ch):02x}"
        if ord(ch) < 0x100
        else f"\\u{ord(ch):04x}"
        for ch in text
    )


def one_line(text: Any) -> str:
    """``text`` on one line (white space collapsed), cleaned for the terminal."""
    return clean(" ".join(str(text).split()))


def truncate(text: str, width: int) -> str:
    """``text`` cut to ``width`` characters, ending in an ellipsis when cut."""
    if width <= 0:
        return ""
    return text if len(text) <= width else text[: max(0, width - 1)] + "…"


class _Output:
    """How this run prints: set once by ``kexp --color/--no-pager`` (see :func:`configure`)."""

    color = "auto"
    pager = True
    #: Whether the real stdout is a terminal, saved while :func:`paged` captures it.
    terminal: bool | None = None


def configure(color: str | None = None, pager: bool | None = None) -> None:
    """Set this run's color mode (``auto``, ``always``, ``never``) and whether long output
    may go through a pager (None: as it is)."""
    if color is not None:
        _Output.color = color
    if pager is not None:
        _Output.pager = pager


def stdout_is_terminal() -> bool:
    """Whether what the command prints ends up on a terminal (directly or in the pager)."""
    return sys.stdout.isatty() if _Output.terminal is None else _Output.terminal


def use_color() -> bool:
    """Whether stdout gets color: ``--color always``, or a terminal with ``NO_COLOR`` unset
    (``--color auto``, the default)."""
    if _Output.color != "auto":
        return _Output.color == "always"
    return stdout_is_terminal() and not os.environ.get("NO_COLOR")


def styler() -> Callable[..., str]:
    """A ``click.style`` that does nothing when color is off."""
    color = use_color()

    def style(text: str, **kwargs: Any) -> str:
        return click.style(text, **kwargs) if color else text

    return style


#: The color of each outcome, and of each severity, on a terminal.
OUTCOME_STYLES: dict[str, dict[str, Any]] = {
    "improvement": {"fg": "green"},
    "marginal": {"dim": True},
    "regression": {"fg": "yellow"},
    "interference": {"fg": "magenta"},
    "buggy": {"fg": "red", "bold": True},
    "failed": {"fg": "red"},
    "pending": {"fg": "cyan"},
}
SEVERITY_STYLES: dict[str, dict[str, Any]] = {
    "error": {"fg": "red", "bold": True},
    "warning": {"fg": "yellow"},
}
_SEVERITY = re.compile(r": (error|warning)(?=\[)")


def styled_severities(line: str, style: Callable[..., str]) -> str:
    """A problem line (``path:line:col: error[code] ...``) with its severity colored."""
    return _SEVERITY.sub(
        lambda m: ": " + style(m.group(1), **SEVERITY_STYLES[m.group(1)]), line, count=1
    )


def echo_raw(text: str) -> None:
    """Print text from an experiment as is, unless stdout is a terminal (then cleaned)."""
    click.echo(clean(text) if stdout_is_terminal() else text)


# --- the pager ---------------------------------------------------------------------------


def pager_command() -> str | None:
    """The pager: ``$KEXP_PAGER``, else ``$PAGER``, else ``less``; None when set to "" or
    ``cat`` (no pager), as git does."""
    for name in ("KEXP_PAGER", "PAGER"):
        if name in os.environ:
            value = os.environ[name].strip()
            return None if value in ("", "cat") else value
    return "less"


def _fits(text: str) -> bool:
    import shutil  # here: it imports compression modules, which --help never needs

    size = shutil.get_terminal_size((80, 24))
    lines = text.split("\n")
    if len(lines) >= size.lines:
        return False
    plain = (click.unstyle(line) for line in lines)
    return all(len(line) <= size.columns for line in plain)


@contextlib.contextmanager
def paged() -> Iterator[None]:
    """Send what the command prints to stdout through the pager, as git does: only on a
    terminal, only when it does not fit on the screen, not with ``--no-pager``.

    The pager gets ``LESS=FRX`` unless ``$LESS`` is set (quit when it fits, keep colors,
    leave the text on the screen). Output is printed as it is if the pager cannot start.
    """
    command = pager_command() if _Output.pager else None
    if command is None or not sys.stdout.isatty():
        yield
        return
    real, buffer = sys.stdout, io.StringIO()
    _Output.terminal = True
    context = click.get_current_context(silent=True)
    kept_color = context.color if context is not None else None
    if context is not None and use_color():
        context.color = True  # keep styles in the captured text: the pager shows them
    failed = True
    try:
        with contextlib.redirect_stdout(buffer):
            yield
        failed = False
    finally:
        _Output.terminal = None
        if context is not None:
            context.color = kept_color
        text = buffer.getvalue()
        if failed or _fits(text) or not _page(text, command, real):
            real.write(text)
            real.flush()


def _page(text: str, command: str, real: Any) -> bool:
    """Show ``text`` in the pager; False if the pager could not be started (or the shell
    found no such command)."""
    # lazy: only to start the pager
    import signal
    import subprocess

    env = dict(os.environ)
    env.setdefault("LESS", "FRX")
    env.setdefault("LV", "-c")
    real.flush()
    try:
        pager = subprocess.Popen(command, shell=True, stdin=subprocess.PIPE, env=env)
    except OSError:
        return False
    assert pager.stdin is not None
    interrupt = signal.signal(signal.SIGINT, signal.SIG_IGN)  # the pager handles Ctrl-C
    try:
        with contextlib.suppress(BrokenPipeError, OSError):  # the user quit the pager early
            pager.stdin.write(text.encode(getattr(real, "encoding", None) or "utf-8", "replace"))
        with contextlib.suppress(BrokenPipeError, OSError):
            pager.stdin.close()
        status = pager.wait()
    finally:
        signal.signal(signal.SIGINT, interrupt)
    return status not in (126, 127)  # the shell could not run it: nothing was shown


def paged_output(func: _F) -> _F:
    """Run a command's callback under :func:`paged` (its long output goes to the pager)."""

    @functools.wraps(func)
    def run(*args: Any, **kwargs: Any) -> Any:
        with paged():
            return func(*args, **kwargs)

    return run  # type: ignore[return-value]


def json_text(data: Any) -> str:
    """Indented JSON, UTF-8 kept, with what a terminal would obey written as JSON escapes
    (``\\u202e``: the same data): DEL and C1 control characters, bidirectional-text
    controls, the line and paragraph separators, and lone surrogates (which no terminal
    could be sent). JSON itself escapes the C0 controls."""
    return json.dumps(data, indent=2, ensure_ascii=False).translate(_JSON_ESCAPES)


def echo_json(data: Any) -> None:
    """Print ``data`` as indented JSON."""
    click.echo(json_text(data))


def terminal_width() -> int | None:
    """Columns to fit tables into: the terminal's, or ``$COLUMNS``; None when piped."""
    if os.environ.get("COLUMNS", "").isdigit():
        return int(os.environ["COLUMNS"])
    if stdout_is_terminal():  # the pager's terminal too
        import shutil  # here: it imports compression modules, which --help never needs

        return shutil.get_terminal_size((100, 24)).columns
    return None


def shorten_operator(text: str, width: int) -> str:
    """An operator (``path: kernel``) in ``width`` characters, keeping the kernel's name:
    the path is cut from the left (``…ernels.cu: reshape_and_cache``), then dropped; a
    plain path is cut from the left, any other text from the right."""
    if len(text) <= width or width <= 0:
        return text if width > 0 else ""
    path, sep, kernel = text.rpartition(": ")
    if sep:
        room = width - len(kernel) - len(sep)
        if room >= 4:
            return "…" + path[-(room - 1) :] + sep + kernel
        return truncate(kernel, width)
    if "/" in text:
        return "…" + text[-(width - 1) :]
    return truncate(text, width)


def _kernel_width(text: str) -> int:
    """How wide :func:`shorten_operator` needs to keep the kernel's whole name."""
    _, sep, kernel = text.rpartition(": ")
    return min(len(text), len(kernel)) if sep else min(len(text), 24)


def wrap_under(head: str, text: str, width: int | None, *, path: bool = False) -> list[str]:
    """``head`` then ``text`` in lines of at most ``width`` characters: ``text`` wrapped,
    never cut, its further lines indented under its start (a ``path`` broken after a
    ``/``); one line when it fits or ``width`` is None (piped)."""
    if width is None or len(head) + len(text) <= width:
        return [head + text]
    import textwrap  # lazy: only for a line too wide

    wrapper = textwrap.TextWrapper(max(20, width - len(head)), break_on_hyphens=False)
    if path:  # chunks end after each "/", so that a line breaks there
        wrapper.wordsep_simple_re = re.compile(r"(\s+|(?<=/)(?=[^/\s]))")
    pieces = wrapper.wrap(text) or [""]
    return [head + pieces[0], *(" " * len(head) + piece for piece in pieces[1:])]


#: Below this width the wrapping column is printed on lines of its own, under its row.
WRAP_MIN_WIDTH = 30


def print_table(
    headers: Sequence[str],
    rows: Sequence[Sequence[str]],
    *,
    right: Sequence[str] = (),
    shrink: Sequence[str] = (),
    min_width: int = 12,
    wrap: str | None = None,
    styles: dict[str, Callable[[str], dict[str, Any] | None]] | None = None,
) -> None:
    """Print aligned columns, fitted to the terminal width.

    ``right``: headers of right-aligned columns. ``shrink``: headers of the columns that
    give up width (in this order) when the table is too wide; they are cut with "…" (an
    ``OPERATOR`` column keeps its kernel's name, see :func:`shorten_operator`). ``wrap``:
    the header of a column (the last) that wraps instead; when less than
    :data:`WRAP_MIN_WIDTH` is left for it, it is printed on indented lines of its own,
    under each row. ``styles``: per header, the style (``click.style`` arguments) of a
    cell's text, on a terminal. A column that would be cut below its floor (its kernel's
    name for ``OPERATOR``, else ``min_width``) goes on a line of its own under each row.
    """
    headers = list(headers)
    rows = [list(row) for row in rows]
    widths = [max([len(h)] + [len(r[i]) for r in rows]) for i, h in enumerate(headers)]
    total = terminal_width()
    wrap_index = headers.index(wrap) if wrap in headers else None
    below = False  # the wrapping column on lines of its own
    under: list[int] = []  # the columns printed under each row, named
    if total is not None:
        floors = [
            max([len(h)] + [_kernel_width(r[i]) for r in rows]) if h == "OPERATOR" else min_width
            for i, h in enumerate(headers)
        ]

        def excess() -> int:
            shown = [
                w
                for i, w in enumerate(widths)
                if not (below and i == wrap_index) and i not in under
            ]
            return sum(shown) + 2 * (len(shown) - 1) - total

        def give(floor_of: Callable[[int], int]) -> None:
            for name in shrink:
                if name in headers and name != wrap and excess() > 0:
                    index = headers.index(name)
                    widths[index] -= min(excess(), max(0, widths[index] - floor_of(index)))

        give(lambda i: floors[i])
        if wrap_index is not None and excess() > 0:
            room = widths[wrap_index] - excess()
            if room >= WRAP_MIN_WIDTH:
                widths[wrap_index] = room
            else:
                below = True
        # A column that would be cut below its floor ("imp…", "sof…") goes under its
        # row instead, whole and named ("operator: ..."), the first of ``shrink`` first.
        for name in shrink:
            if name in headers and name != wrap and excess() > 0:
                under.append(headers.index(name))
        give(lambda i: min(floors[i], min_width))
        give(lambda i: 4)
    style = styler()
    color = use_color()
    indent = "    "
    for number, row in enumerate([headers, *rows]):
        cells: list[str] = []
        extra_lines: list[list[str]] = []
        for index, (header, cell, width) in enumerate(zip(headers, row, widths, strict=True)):
            if index in under:
                continue
            if index == wrap_index and (below or total is not None):
                if below:
                    continue
                import textwrap  # lazy: only for a wrapped column

                pieces = textwrap.wrap(cell, width, break_on_hyphens=False) or [""]
                cell = pieces[0]
                for line_number, piece in enumerate(pieces[1:]):
                    if len(extra_lines) <= line_number:
                        extra_lines.append([" " * w for w in widths[:index]])
                    extra_lines[line_number].append(piece)
            elif header == "OPERATOR":
                cell = shorten_operator(cell, width)
            else:
                cell = truncate(cell, width)
            padded = cell.rjust(width) if header in right else cell.ljust(width)
            if number and color and styles and header in styles:
                chosen = styles[header](cell)
                if chosen:
                    padded = padded.replace(cell, click.style(cell, **chosen), 1)
            cells.append(padded)
        line = "  ".join(cells).rstrip()
        click.echo(style(line, bold=True) if number == 0 else line)
        for extra in extra_lines:
            click.echo("  ".join(extra).rstrip())
        for index in under if number else ():
            label = f"{indent}{headers[index].lower()}: "
            room = (total or 80) - len(label)
            value = row[index]
            shown = shorten_operator(value, room) if headers[index] == "OPERATOR" else value
            click.echo(label + truncate(shown, room))
        if below and number and wrap_index is not None:
            import textwrap  # lazy: only for a wrapped column

            for piece in textwrap.wrap(
                row[wrap_index],
                max(20, total - len(indent)) if total else 80,
                break_on_hyphens=False,
            ):
                click.echo(indent + piece)


def outcome_style(cell: str) -> dict[str, Any] | None:
    """The style of an outcome cell (see :data:`OUTCOME_STYLES`)."""
    return OUTCOME_STYLES.get(cell.strip())


@contextlib.contextmanager
def progress(label: str) -> Iterator[None]:
    """Show a progress bar on stderr for library loops over many files (terminal only)."""
    # lazy: not every command shows progress
    from kexp.core.progress import reporting

    if not sys.stderr.isatty():
        yield
        return
    bars: list[Any] = []

    def report(done: int, total: int) -> None:
        if total < PROGRESS_MIN_ITEMS:
            return
        if done == 0 or not bars:
            if bars:
                bars[-1].render_finish()
            bar = click.progressbar(length=total, label=label, file=sys.stderr)
            bars.append(bar)
        bars[-1].update(done - bars[-1].pos)

    with reporting(report):
        try:
            yield
        finally:
            if bars:
                bars[-1].render_finish()
