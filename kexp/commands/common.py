"""What every command shares: the store, filters, output formats, tables, progress.

Reading input and formatting output live here and in the command modules; everything
else is one call into the library. Only click is imported up front: ``kexp --help``
loads every command module, so the library (and json) are imported where used.
"""

from __future__ import annotations

import contextlib
import io
import itertools
import os
import re
import sys
from collections.abc import Callable, Iterator, Sequence
from typing import TYPE_CHECKING, Any, TypeVar

import click

if TYPE_CHECKING:
    from kexp.model import KernelExperiment
    from kexp.store import Store

EXIT_OK, EXIT_PROBLEMS, EXIT_USAGE, EXIT_BUG = 0, 1, 2, 3
#: The flag of a suspect measurement in listings (as kexp.suspect.SUSPECT_LABEL).
SUSPECT_LABEL = "suspect: verify correctness"
#: Progress is shown for loops over at least this many files.
PROGRESS_MIN_ITEMS = 200
_F = TypeVar("_F", bound=Callable[..., Any])
_C1 = {code: f"\\u{code:04x}" for code in range(0x7F, 0xA0)}
#: Unicode bidirectional-text controls: they reorder what a terminal shows ("Trojan
#: Source"), so text can display as something other than what it is.
_BIDI = frozenset("\u061c\u200e\u200f\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069")
#: Any character :func:`clean` escapes.
_UNSAFE = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f" + "".join(sorted(_BIDI)) + "]")


def get_store(ctx: click.Context) -> Store:
    """The store the command works on (``--root``, ``$KEXP_ROOT``, or found by walking up).

    The one place a store is opened: with ``--rev REV`` it is the read-only store as it
    was at that revision, read from git objects (``Store.at``).
    """
    from kexp.store import Store

    root = ctx.find_root().params.get("root")
    store = Store(root)
    revision = ctx.params.get("rev")
    return store.at(revision) if revision else store


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
        or (ch >= " " and ch != "\x7f" and not 0x80 <= ord(ch) < 0xA0 and ch not in _BIDI)
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


def use_color() -> bool:
    """Whether stdout gets color: a terminal, and ``NO_COLOR`` not set."""
    return sys.stdout.isatty() and not os.environ.get("NO_COLOR")


def styler() -> Callable[..., str]:
    """A ``click.style`` that does nothing when color is off."""
    color = use_color()

    def style(text: str, **kwargs: Any) -> str:
        return click.style(text, **kwargs) if color else text

    return style


def echo_raw(text: str) -> None:
    """Print text from an experiment as is, unless stdout is a terminal (then cleaned)."""
    click.echo(clean(text) if sys.stdout.isatty() else text)


def json_text(data: Any) -> str:
    """Indented JSON, UTF-8 kept, with DEL and C1 control characters escaped."""
    import json

    return json.dumps(data, indent=2, ensure_ascii=False).translate(_C1)


def echo_json(data: Any) -> None:
    """Print ``data`` as indented JSON."""
    click.echo(json_text(data))


def terminal_width() -> int | None:
    """Columns to fit tables into: the terminal's, or ``$COLUMNS``; None when piped."""
    if os.environ.get("COLUMNS", "").isdigit():
        return int(os.environ["COLUMNS"])
    if sys.stdout.isatty():
        import shutil  # here: it imports compression modules, which --help never needs

        return shutil.get_terminal_size((100, 24)).columns
    return None


def print_table(
    headers: Sequence[str],
    rows: Sequence[Sequence[str]],
    *,
    right: Sequence[str] = (),
    shrink: Sequence[str] = (),
    min_width: int = 12,
) -> None:
    """Print aligned columns, fitted to the terminal width.

    ``right``: headers of right-aligned columns. ``shrink``: headers of the columns that
    give up width (in this order) when the table is too wide; they are cut with "…".
    """
    widths = [max([len(h)] + [len(r[i]) for r in rows]) for i, h in enumerate(headers)]
    total = terminal_width()
    if total is not None:
        excess = sum(widths) + 2 * (len(widths) - 1) - total
        for floor in (min_width, 4):  # first down to min_width, then further if needed
            for name in shrink:
                if excess <= 0 or name not in headers:
                    continue
                index = list(headers).index(name)
                give = min(excess, max(0, widths[index] - floor))
                widths[index] -= give
                excess -= give
    style = styler()
    for number, row in enumerate([list(headers), *rows]):
        cells = []
        for header, cell, width in zip(headers, row, widths, strict=True):
            cell = truncate(cell, width)
            cells.append(cell.rjust(width) if header in right else cell.ljust(width))
        line = "  ".join(cells).rstrip()
        click.echo(style(line, bold=True) if number == 0 else line)


@contextlib.contextmanager
def progress(label: str) -> Iterator[None]:
    """Show a progress bar on stderr for library loops over many files (terminal only)."""
    from kexp.progress import reporting

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
            help="pending, buggy, interference, regression, marginal, improvement (repeatable).",
        ),
        click.option("--buggy/--not-buggy", "is_buggy", default=None, help="Only (not) buggy."),
        click.option("--min-score", type=float, help="Lowest score."),
        click.option("--max-score", type=float, help="Highest score."),
        click.option("--pid", help="Parent id (or unique prefix)."),
        click.option("--tag", "tags", multiple=True, help="Tag that must be present (repeatable)."),
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
    return filters


def read_options(func: _F) -> _F:
    """``--json``, ``--format``, ``--fields`` and ``--brief`` of the commands that list."""
    options = [
        click.option("--json", "as_json", is_flag=True, help="Print JSON (same as --format json)."),
        click.option(
            "--format",
            "output_format",
            type=click.Choice(["table", "json", "jsonl", "csv"]),
            default="table",
            show_default=True,
            help="Output format.",
        ),
        click.option(
            "--fields",
            help="Only these fields (comma-separated; also columns of the table).",
        ),
        click.option("--brief", is_flag=True, help="Front-matter only, no body text."),
    ]
    for option in reversed(options):
        func = option(func)
    return func


def field_list(value: str | None) -> list[str] | None:
    """The fields of ``--fields a,b,c`` (checked), or None."""
    if not value:
        return None
    from kexp.errors import KexpError
    from kexp.export import check_fields

    fields = [f.strip() for f in value.split(",") if f.strip()]
    try:
        return check_fields(fields)
    except KexpError as exc:
        raise click.BadParameter(str(exc), param_hint="--fields") from None


_COLUMNS = ("id", "score", "outcome", "dtype_sig", "operator_sig", "change_summary")
_HEADERS = {
    "id": "ID",
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
    from kexp.suspect import suspect_reasons as reasons

    return reasons(exp, exp.settings)


def id_display_width(experiments: Sequence[KernelExperiment], minimum: int = 10) -> int:
    """How many characters of the ids keep every listed id distinct (at least ``minimum``)."""
    ids = sorted({exp.id for exp in experiments})
    width = minimum
    for before, after in itertools.pairwise(ids):
        pairs = zip(before, after, strict=True)
        common = next((i for i, (a, b) in enumerate(pairs) if a != b), len(before))
        width = max(width, common + 1)
    return width


def cell(exp: KernelExperiment, column: str, id_width: int = 10) -> str:
    """One table cell: short ids and hashes, four-decimal scores, one-line text; a
    suspect measurement's summary starts with ``[suspect: verify correctness]``.
    """
    if column == "score":
        return f"{exp.score:.4f}"
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
        import json

        value = ", ".join(json.dumps(v) if isinstance(v, dict) else str(v) for v in value)
    return one_line(value)


def needs_bodies(output_format: str, as_json: bool, fields: str | None, brief: bool) -> bool:
    """Whether printing experiments this way shows body text (else it is not read)."""
    from kexp.model import BODY_FIELDS

    chosen = field_list(fields)
    if chosen is not None:
        return any(name in BODY_FIELDS for name in chosen)
    return (as_json or output_format != "table") and not brief


def emit_experiments(
    experiments: Sequence[KernelExperiment],
    *,
    output_format: str,
    as_json: bool,
    fields: str | None,
    brief: bool,
    ranked: bool,
) -> None:
    """Print experiments as a table (``#`` column when ``ranked``), JSON, JSON Lines or CSV."""
    chosen = field_list(fields)
    output_format = "json" if as_json else output_format
    if output_format != "table":
        from kexp.export import to_record, write_records

        records = [to_record(e, chosen, brief=brief) for e in experiments]
        if output_format == "json":
            echo_json(records)
            return
        stream = io.StringIO()
        write_records(records, stream, output_format)
        echo_raw(stream.getvalue().rstrip("\n"))
        return
    columns = tuple(chosen) if chosen else _COLUMNS
    headers = [_HEADERS.get(c, c.upper()) for c in columns]
    width = id_display_width(experiments)
    rows = [[cell(e, c, width) for c in columns] for e in experiments]
    if ranked:
        headers.insert(0, "#")
        for number, row in enumerate(rows, 1):
            row.insert(0, str(number))
    print_table(
        headers,
        rows,
        right=("#", "SCORE"),
        shrink=("OPERATOR", "SUMMARY", *(h for h in headers if h not in ("#", "SCORE", "ID"))),
    )
    if not rows:
        click.echo("(no experiments match)", err=True)
