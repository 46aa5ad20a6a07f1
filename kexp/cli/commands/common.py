"""What every command shares: the store, filters, output formats, tables, progress.

Reading input and formatting output live here and in the command modules; everything
else is one call into the library. Only click is imported up front: ``kexp --help``
loads every command module, so the library (and json) are imported where used.
"""

from __future__ import annotations

import contextlib
import functools
import io
import json
import math
import os
import re
import sys
from collections.abc import Callable, Iterator, Sequence
from typing import TYPE_CHECKING, Any, TypeVar

import click

from kexp.cli.commands.exits import EXIT_BUG as EXIT_BUG
from kexp.cli.commands.exits import EXIT_OK as EXIT_OK
from kexp.cli.commands.exits import EXIT_PROBLEMS as EXIT_PROBLEMS
from kexp.cli.commands.exits import EXIT_USAGE as EXIT_USAGE
from kexp.core.errors import KexpError
from kexp.format.outputs import FORMATS, format_names

if TYPE_CHECKING:
    from kexp.core.model import KernelExperiment
    from kexp.storage.store import Store

#: The flag of a suspect measurement in listings (as kexp.format.suspect.SUSPECT_LABEL).
SUSPECT_LABEL = "suspect: verify correctness"
#: Progress is shown for loops over at least this many files.
PROGRESS_MIN_ITEMS = 200
_F = TypeVar("_F", bound=Callable[..., Any])
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


class _ScoreBound(click.types.FloatParamType):
    """A score a filter bounds by: a finite number (``nan`` and ``inf`` bound nothing)."""

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> Any:
        number = super().convert(value, param, ctx)
        if not math.isfinite(number):
            self.fail(f"{value!r} is no score bound: give a finite number (1.05)", param, ctx)
        return number


SCORE_BOUND = _ScoreBound()


def get_store(ctx: click.Context) -> Store:
    """The store the command works on (``--root``, ``$KEXP_ROOT``, or found by walking up).

    The one place a store is opened: with ``--rev REV`` it is the read-only store as it
    was at that revision, read from git objects (``Store.at``); with ``--refs PATTERN``
    or ``--all-refs`` the working tree plus the store at those refs, one entry per
    experiment (``Store(root, refs=...)``).
    """
    # lazy: the store, not for commands that open none (init, env, skill)
    from kexp.storage.store import Store

    root = ctx.find_root().params.get("root")
    revision = ctx.params.get("rev")
    refs, all_refs = ctx.params.get("refs") or (), bool(ctx.params.get("all_refs"))
    if refs or all_refs:
        if revision:
            raise click.UsageError("give --rev or --refs/--all-refs, not both")
        return Store(root, refs=list(refs), all_refs=all_refs)
    store = Store(root)
    return store.at(revision) if revision else store


def refs_options(func: _F) -> _F:
    """``--refs PATTERN`` (repeatable) and ``--all-refs``: read the working tree plus
    the store at every matching ref, from git objects: one entry per experiment, its
    newest version."""
    options = [
        click.option(
            "--refs",
            "refs",
            multiple=True,
            metavar="PATTERN",
            help="Also read the store at every ref matching PATTERN (origin/*, "
            "refs/remotes/origin/agent-*; repeatable), from git objects: one entry per "
            "experiment, its newest version.",
        ),
        click.option(
            "--all-refs",
            is_flag=True,
            help="Also read the store at every branch and remote-tracking branch.",
        ),
    ]
    for option in reversed(options):
        func = option(func)
    return func


def where_found(store: Any) -> Callable[[KernelExperiment], Any] | None:
    """Where each experiment a store reading refs handed out was found (its ``where``:
    a :class:`kexp.storage.rows.Sighting`), or None for a store that reads no refs."""
    if getattr(store.source, "places", None) is None:
        return None
    return lambda exp: exp.where


def rev_option(func: _F) -> _F:
    """``--rev REV``: read the store as it was at a revision (read commands)."""
    option = click.option(
        "--rev",
        metavar="REV",
        help="Read the store as it was at this revision (commit, branch, tag, HEAD~2), "
        "from git objects, without a checkout.",
    )
    return option(func)


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


# --- shell completion ------------------------------------------------------------------

#: At most this many ids are offered at once (a large store has many).
COMPLETION_LIMIT = 500


def complete_ids(ctx: click.Context, param: click.Parameter, incomplete: str) -> list[Any]:
    """Shell completion of an experiment id: the ids starting with what was typed, each
    described by its file's slug (file names only: nothing is read)."""
    # lazy: only for shell completion
    from click.shell_completion import CompletionItem

    try:
        # lazy: only for shell completion
        from kexp.storage.listing import find_names
        from kexp.storage.store import Store

        store = Store(ctx.find_root().params.get("root"))
        found = find_names(None, store.experiments_dir, incomplete.lower())
    except Exception:  # no store here, unreadable folders: nothing to offer
        return []
    slugs = {name[:16]: name[17:-3] for _, name in found}
    return [CompletionItem(i, help=slugs[i]) for i in sorted(slugs)[:COMPLETION_LIMIT]]


def complete_outcomes(ctx: click.Context, param: click.Parameter, incomplete: str) -> list[Any]:
    """Shell completion of an outcome (``--outcome``)."""
    # lazy: only for shell completion
    from click.shell_completion import CompletionItem

    from kexp.core.model import OUTCOMES

    return [CompletionItem(o) for o in OUTCOMES if o.startswith(incomplete)]


# --- options shared by commands ------------------------------------------------------


def filter_options(func: _F) -> _F:
    """The query filters, as options shared by the read commands."""
    options = [
        click.option("--operator", help="Operator/file substring (case-insensitive)."),
        click.option("--dtype", help="Data type substring, e.g. bf16."),
        click.option("--env", "env_filter", help="Environment substring, e.g. MI300X."),
        click.option(
            "--base-commit", help="Base commit: a hash prefix, or a revision (main, HEAD~2)."
        ),
        click.option(
            "--reachable-from",
            metavar="REV",
            help="Only experiments whose base commit is an ancestor of REV (what code "
            "REV contains).",
        ),
        click.option("--status", multiple=True, help="Status (repeatable)."),
        click.option(
            "--outcome",
            multiple=True,
            shell_complete=complete_outcomes,
            help="pending, buggy, failed, interference, regression, marginal, improvement "
            "(repeatable).",
        ),
        click.option("--buggy/--not-buggy", "is_buggy", default=None, help="Only (not) buggy."),
        click.option("--min-score", type=SCORE_BOUND, help="Lowest score."),
        click.option("--max-score", type=SCORE_BOUND, help="Highest score."),
        click.option("--pid", help="Parent id (or unique prefix).", shell_complete=complete_ids),
        click.option(
            "--tag",
            "tags",
            multiple=True,
            help="Tag that must be present (repeatable, or comma-separated: each must be).",
        ),
        click.option("--since", help="Created at or after (date or ISO time)."),
        click.option("--until", help="Created at or before (date or ISO time)."),
        click.option("--text", help="Substring of any field."),
    ]
    for option in reversed(options):
        func = option(func)
    return rev_option(func)


_FILTER_PARAMS = {
    "operator": "operator",
    "dtype": "dtype",
    "env_filter": "env",
    "base_commit": "base_commit",
    "reachable_from": "reachable_from",
    "status": "status",
    "outcome": "outcome",
    "is_buggy": "is_buggy",
    "min_score": "min_score",
    "max_score": "max_score",
    "pid": "pid",
    "tags": "tags",
    "since": "since",
    "until": "until",
    "text": "text",
}


def filters_from(params: dict[str, Any]) -> dict[str, Any]:
    """The library's filter keyword arguments from the options of :func:`filter_options`."""
    filters: dict[str, Any] = {}
    for param, name in _FILTER_PARAMS.items():
        value = params.pop(param, None)
        if value is None or value == ():
            continue
        filters[name] = list(value) if isinstance(value, tuple) else value
    if "tags" in filters:  # comma-separated, as kexp add --tag and --set tags= take them
        filters["tags"] = [
            t.strip() for raw in filters["tags"] for t in raw.split(",") if t.strip()
        ]
    return filters


def read_options(func: _F) -> _F:
    """``--json``, ``--format``, ``--fields`` and ``--brief`` of the commands that list."""
    options = [
        click.option("--json", "as_json", is_flag=True, help="Print JSON (same as --format json)."),
        click.option(
            "--format",
            "output_format",
            type=click.Choice(format_names()),
            default="table",
            show_default=True,
            help="Output format (markdown: the table's columns as a Markdown table).",
        ),
        click.option(
            "--fields",
            help="Only these fields (comma-separated; also columns of the table).",
        ),
        click.option(
            "--brief",
            is_flag=True,
            help="JSON/JSONL: what an agent needs to decide (id, summary, score and its "
            "interval, outcome, key insight, suspect, operator, dtype).",
        ),
        click.option(
            "--front-matter",
            is_flag=True,
            help="JSON/JSONL/CSV: every front-matter field, no body text.",
        ),
        click.option(
            "--full",
            is_flag=True,
            help="JSON/JSONL: keep empty fields and path (by default they are left out).",
        ),
    ]
    for option in reversed(options):
        func = option(func)
    return func


def field_list(value: str | None) -> list[str] | None:
    """The fields of ``--fields a,b,c`` (checked), or None."""
    if not value:
        return None
    # lazy: not every command takes --fields
    from kexp.output.export import check_fields

    fields = [f.strip() for f in value.split(",") if f.strip()]
    try:
        return check_fields(fields, where=True)
    except KexpError as exc:
        raise click.BadParameter(str(exc), param_hint="--fields") from None


_COLUMNS = (
    "id",
    "cumulative_score",
    "score",
    "outcome",
    "dtype_sig",
    "operator_sig",
    "change_summary",
)
_HEADERS = {
    "id": "ID",
    "cumulative_score": "CUMULATIVE",
    "score": "SCORE",
    "outcome": "OUTCOME",
    "dtype_sig": "DTYPE",
    "operator_sig": "OPERATOR",
    "change_summary": "SUMMARY",
    "is_buggy": "BUGGY",
    "created_at": "CREATED",
    "base_commit": "BASE",
}


def suspect_reasons(exp: KernelExperiment) -> list[str]:
    """Why an experiment's measurement is implausible (empty when believable)."""
    # lazy: not every command shows suspicion
    from kexp.format.suspect import suspect_reasons as reasons

    return reasons(exp, exp.settings)


def cell(exp: KernelExperiment, column: str, id_width: int = 10) -> str:
    """One table cell: short ids and hashes, four-decimal scores (three, followed by the
    95 % interval, as in ``1.032 [1.011, 1.054]``, when there is one), one-line text; a
    suspect measurement's summary starts with ``[suspect: verify correctness]``.
    """
    if column == "cumulative_score":
        cumulative = exp.cumulative_score
        return "-" if cumulative is None else f"{cumulative:.4f}"
    if column == "cumulative_ci":
        interval = exp.cumulative_ci
        return "" if interval is None else f"[{interval[0]:.3f}, {interval[1]:.3f}]"
    if column == "score":
        from kexp.format.samples import describe_score

        digits = 3 if exp.score_ci else 4
        return describe_score(exp.score, exp.score_ci or (), digits, status=exp.status)
    if column in ("id", "pid", "base_commit"):
        return str(getattr(exp, column))[:id_width]
    if column == "path":
        return os.path.relpath(exp.path) if exp.path else ""
    if column == "suspect":
        return one_line("; ".join(suspect_reasons(exp)))
    if column == "change_summary" and suspect_reasons(exp):
        return f"[{SUSPECT_LABEL}] {one_line(exp.change_summary)}"
    value = exp.outcome if column == "outcome" else getattr(exp, column)
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, list):
        value = ", ".join(json.dumps(v) if isinstance(v, dict) else str(v) for v in value)
    return one_line(value)


def ref_labels(sightings: Sequence[Any]) -> list[str]:
    """The REF cells of a table: where each experiment was found (``local``, or the ref
    holding it, ``+N`` other places holding the same content; ``(older elsewhere)``, or
    ``(diverged elsewhere)`` when both versions changed since their commits parted;
    ``(removed elsewhere)`` when a ref removed it, read all the same: ``removed_on``,
    named by ``kexp show`` and ``--json``), with the prefix all the refs shown share
    left out (``origin/kexp/agent-7f3a`` and ``origin/kexp/agent-9c1e`` read
    ``…agent-7f3a`` and ``…agent-9c1e``), so that the part telling them apart shows in
    a narrow column."""
    refs = sorted({s.ref for s in sightings if s is not None and s.ref != "local"})
    cut = 0
    if len(refs) > 1:
        first, last = refs[0], refs[-1]
        while cut < min(len(first), len(last)) and first[cut] == last[cut]:
            cut += 1
        cut = first.rfind("/", 0, cut + 1) + 1  # at a whole component of the name
    labels = []
    for sighting in sightings:
        if sighting is None:
            labels.append("")
            continue
        text = sighting.ref if sighting.ref == "local" or not cut else "…" + sighting.ref[cut:]
        if len(sighting.refs) > 1:
            text += f" +{len(sighting.refs) - 1}"
        # Diverged: the other version changed too since they parted (not older).
        marks = [("diverged" if sighting.diverged else "older")] if sighting.other_versions else []
        marks += ["removed"] if sighting.removed_on else []
        if marks:
            text += f" ({', '.join(marks)} elsewhere)"
        labels.append(one_line(text))
    return labels


def needs_bodies(output_format: str, as_json: bool, fields: str | None, front_matter: bool) -> bool:
    """Whether printing experiments this way shows body text (else it is not read):
    ``--brief`` shows the key insight, from the detailed description."""
    # lazy: not every command takes --fields
    from kexp.core.model import BODY_FIELDS

    chosen = field_list(fields)
    if chosen is not None:
        return any(name in (*BODY_FIELDS, "key_insight") for name in chosen)
    return (as_json or FORMATS[output_format].records) and not front_matter


def emit_experiments(
    experiments: Sequence[KernelExperiment],
    *,
    output_format: str,
    as_json: bool,
    fields: str | None,
    brief: bool,
    ranked: bool,
    front_matter: bool = False,
    full: bool = False,
    where: Callable[[KernelExperiment], Any] | None = None,
    id_length: int = 10,
) -> None:
    """Print experiments in an output format of :mod:`kexp.format.outputs`: a table (``#``
    column when ``ranked``; ids ``id_length`` characters long) for the terminal or as
    Markdown, JSON, JSON Lines or CSV (records shaped by
    :func:`kexp.output.export.machine_record`; CSV keeps every column). ``where`` (read
    across refs): each record says where it was found (``ref``, a REF column)."""
    chosen = field_list(fields)
    output_format = "json" if as_json else output_format
    if FORMATS[output_format].records:
        # lazy: only for a command that prints records
        from kexp.output.export import machine_record, to_record, write_records

        if output_format == "csv":
            records = [to_record(e, chosen, brief=brief or front_matter) for e in experiments]
        else:
            records = [
                machine_record(e, chosen, brief=brief, front_matter=front_matter, full=full)
                for e in experiments
            ]
        if where is not None:
            for exp, record in zip(experiments, records, strict=True):
                sighting = where(exp)
                if sighting is not None:
                    found = sighting.to_dict()
                    if output_format == "csv":
                        found = {"ref": found["ref"], "refs": " ".join(found["refs"])}
                    record.update(found)
        if output_format == "json":
            echo_json(records)
            return
        stream = io.StringIO()
        write_records(records, stream, output_format)
        text = stream.getvalue()
        if text:  # no experiment in JSON Lines: no line at all
            echo_raw(text.rstrip("\n"))
        return
    columns = tuple(chosen) if chosen else _COLUMNS
    headers = [_HEADERS.get(c, c.upper()) for c in columns]
    rows = [[cell(e, c, id_length) for c in columns] for e in experiments]
    if where is not None:
        at = columns.index("id") + 1 if "id" in columns else 0
        headers.insert(at, "REF")
        labels = ref_labels([where(exp) for exp in experiments])
        for label, row in zip(labels, rows, strict=True):
            row.insert(at, label)
    if ranked:
        headers.insert(0, "#")
        for number, row in enumerate(rows, 1):
            row.insert(0, str(number))
    write = FORMATS[output_format].write
    if write is not None:
        stream = io.StringIO()
        write(headers, rows, stream)
        echo_raw(stream.getvalue().rstrip("\n"))
        return
    print_table(
        headers,
        rows,
        right=("#", "CUMULATIVE", "SCORE"),
        # The REF column keeps its width: what tells two refs apart is at its end.
        shrink=(
            "OPERATOR",
            *(h for h in headers if h not in ("#", "CUMULATIVE", "SCORE", "ID", "SUMMARY", "REF")),
        ),
        wrap="SUMMARY" if headers[-1] == "SUMMARY" else None,
        styles={"OUTCOME": outcome_style},
    )
    if not rows:
        click.echo("(no experiments match)", err=True)
