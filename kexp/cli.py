"""The ``kexp`` command: a thin layer over the library, one library call per command.

Exit codes: 0 success; 1 problems found (validation errors); 2 usage error, unknown
id or missing store; 3 an unexpected error (a bug in kexp).
"""

from __future__ import annotations

import json
import os
import shutil
import sys
import warnings
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, TypeVar

import click

from kexp import __version__
from kexp.errors import KexpError, ValidationError
from kexp.model import ALL_FIELDS, BODY_FIELDS, KernelExperiment
from kexp.store import Store, init_store

EXIT_OK, EXIT_PROBLEMS, EXIT_USAGE, EXIT_BUG = 0, 1, 2, 3
_F = TypeVar("_F", bound=Callable[..., Any])


def _store(ctx: click.Context) -> Store:
    root = ctx.find_root().params.get("root")
    return Store(root)


def _clean(text: str) -> str:
    """Neutralise control characters and ANSI escapes in text shown in a terminal."""
    return "".join(
        ch
        if ch in "\n\t" or (ch >= " " and ch != "\x7f" and not 0x80 <= ord(ch) < 0xA0)
        else f"\\x{ord(ch):02x}"
        for ch in text
    )


def _one_line(text: str) -> str:
    return _clean(" ".join(str(text).split()))


def _truncate(text: str, width: int) -> str:
    if width <= 0:
        return ""
    return text if len(text) <= width else text[: max(0, width - 1)] + "…"


def filter_options(func: _F) -> _F:
    """The query filters, as options shared by the read commands."""
    options = [
        click.option("--operator", help="Operator/file substring (case-insensitive)."),
        click.option("--dtype", help="Data type substring, e.g. bf16."),
        click.option("--env", "env_filter", help="Environment substring, e.g. MI300X."),
        click.option("--base-commit", help="Base commit hash prefix."),
        click.option("--status", multiple=True, help="Status (repeatable)."),
        click.option(
            "--outcome",
            multiple=True,
            help="pending, buggy, interference, regression, marginal, improvement.",
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
    return func


def _filters(params: dict[str, Any]) -> dict[str, Any]:
    names = {
        "operator": "operator",
        "dtype": "dtype",
        "env_filter": "env",
        "base_commit": "base_commit",
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
    filters: dict[str, Any] = {}
    for param, name in names.items():
        value = params.get(param)
        if value is None or value == ():
            continue
        filters[name] = list(value) if isinstance(value, tuple) else value
    return filters


_COLUMNS = ("id", "score", "outcome", "dtype_sig", "operator_sig", "change_summary")
_HEADERS = {
    "id": "ID",
    "score": "SCORE",
    "outcome": "OUTCOME",
    "dtype_sig": "DTYPE",
    "operator_sig": "OPERATOR",
    "change_summary": "SUMMARY",
}


def _cell(exp: KernelExperiment, column: str) -> str:
    if column == "score":
        return f"{exp.score:.4f}"
    if column == "id":
        return exp.id[:10]
    value = exp.outcome if column == "outcome" else getattr(exp, column)
    return _one_line(", ".join(value) if isinstance(value, list) else str(value))


def _print_table(experiments: Sequence[KernelExperiment], ranked: bool) -> None:
    columns = ("#", *_COLUMNS) if ranked else _COLUMNS
    rows = [
        [str(n), *(_cell(e, c) for c in _COLUMNS)] if ranked else [_cell(e, c) for c in _COLUMNS]
        for n, e in enumerate(experiments, 1)
    ]
    headers = [_HEADERS.get(c, c) for c in columns]
    widths = [max([len(h)] + [len(r[i]) for r in rows]) for i, h in enumerate(headers)]
    total = shutil.get_terminal_size((120, 24)).columns
    # Shrink the operator column, then fit the summary into what is left.
    fixed = sum(widths[:-2]) + 2 * (len(widths) - 1)
    widths[-2] = min(widths[-2], max(12, (total - fixed) // 3))
    widths[-1] = max(20, total - fixed - widths[-2])
    for row in [headers, *rows]:
        cells = [_truncate(cell, w) for cell, w in zip(row, widths, strict=True)]
        line = "  ".join(
            cell.rjust(w) if headers[i] in ("#", "SCORE") else cell.ljust(w)
            for i, (cell, w) in enumerate(zip(cells, widths, strict=True))
        )
        click.echo(line.rstrip())
    if not rows:
        click.echo("(no experiments match)", err=True)


def _as_json(exp: KernelExperiment, fields: Sequence[str] | None, brief: bool) -> dict[str, Any]:
    data = exp.to_dict(include_derived=True)
    if data.get("path"):
        data["path"] = os.path.relpath(str(data["path"]))
    if brief:
        data = {k: v for k, v in data.items() if k not in BODY_FIELDS}
    if fields:
        data = {k: data[k] for k in fields}
    return data


def _field_list(value: str | None) -> list[str] | None:
    if not value:
        return None
    fields = [f.strip() for f in value.split(",") if f.strip()]
    valid = (*ALL_FIELDS, "outcome", "path")
    unknown = [f for f in fields if f not in valid]
    if unknown:
        raise click.BadParameter(
            f"unknown field(s) {', '.join(unknown)}; fields: {', '.join(valid)}"
        )
    return fields


def _emit_experiments(
    experiments: Sequence[KernelExperiment],
    as_json: bool,
    fields: str | None,
    brief: bool,
    ranked: bool,
) -> None:
    if as_json:
        chosen = _field_list(fields)
        click.echo(
            json.dumps(
                [_as_json(e, chosen, brief) for e in experiments], indent=2, ensure_ascii=False
            )
        )
    else:
        _print_table(experiments, ranked)


class _Group(click.Group):
    """The error boundary: kexp errors are one line and exit 2 (or 1 for validation)."""

    def invoke(self, ctx: click.Context) -> Any:
        warnings.simplefilter("default")
        warnings.showwarning = _show_warning
        try:
            return super().invoke(ctx)
        except ValidationError as exc:
            click.echo(f"kexp: error: {exc.args[0]}", err=True)
            for problem in exc.problems:
                click.echo(_clean(problem.format()), err=True)
            ctx.exit(EXIT_PROBLEMS)
        except KexpError as exc:
            click.echo(f"kexp: error: {_clean(str(exc))}", err=True)
            ctx.exit(EXIT_USAGE)
        except (click.exceptions.Exit, click.exceptions.Abort, click.ClickException):
            raise
        except KeyboardInterrupt:
            click.echo("kexp: interrupted", err=True)
            ctx.exit(130)
        except Exception as exc:
            click.echo(
                f"kexp: internal error (a bug in kexp {__version__}, please report it): "
                f"{type(exc).__name__}: {_clean(str(exc))}",
                err=True,
            )
            if os.environ.get("KEXP_DEBUG"):
                raise
            ctx.exit(EXIT_BUG)


def _show_warning(
    message: Warning | str,
    category: type[Warning],
    filename: str,
    lineno: int,
    file: Any = None,
    line: str | None = None,
) -> None:
    click.echo(f"kexp: warning: {_clean(str(message))}", err=True)


@click.group(cls=_Group, context_settings={"help_option_names": ["-h", "--help"]})
@click.option(
    "--root",
    type=click.Path(file_okay=False, path_type=Path),
    help="Store folder (holding experiments/); default: $KEXP_ROOT or the nearest "
    "folder above that holds experiments/.",
)
@click.version_option(__version__, "-V", "--version", prog_name="kexp")
def main(root: Path | None) -> None:
    """kexp: the history of GPU kernel optimization experiments, one file each, in git.

    \b
    Examples:
      kexp top                      best 20 experiments
      kexp list --operator cache    every experiment on a cache kernel
      kexp show 6749f3a0            one experiment, by id prefix
      kexp validate                 check every file (exit 1 on errors)
    """


@main.command()
@click.option("-n", "--limit", type=int, default=20, show_default=True, help="How many.")
@click.option("--include-buggy", is_flag=True, help="Keep buggy experiments.")
@click.option("--include-pending", is_flag=True, help="Keep new/running experiments.")
@filter_options
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
@click.option("--fields", help="With --json: only these fields (comma-separated).")
@click.option("--brief", is_flag=True, help="With --json: front-matter only, no body text.")
@click.pass_context
def top(
    ctx: click.Context,
    /,
    limit: int,
    include_buggy: bool,
    include_pending: bool,
    as_json: bool,
    fields: str | None,
    brief: bool,
    **params: Any,
) -> None:
    """The best experiments by score (buggy and pending left out).

    \b
    Example:
      kexp top --operator cache --dtype bf16 -n 5
    """
    experiments = _store(ctx).top_experiments(
        limit, include_buggy=include_buggy, include_pending=include_pending, **_filters(params)
    )
    _emit_experiments(experiments, as_json, fields, brief, ranked=True)


@main.command(name="list")
@filter_options
@click.option("-n", "--limit", type=int, help="At most this many (the newest).")
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
@click.option("--fields", help="With --json: only these fields (comma-separated).")
@click.option("--brief", is_flag=True, help="With --json: front-matter only, no body text.")
@click.pass_context
def list_command(
    ctx: click.Context,
    /,
    limit: int | None,
    as_json: bool,
    fields: str | None,
    brief: bool,
    **params: Any,
) -> None:
    """Every experiment matching the filters, oldest first.

    \b
    Example:
      kexp list --outcome regression --outcome buggy --operator cache
    """
    experiments = _store(ctx).list_experiments(**_filters(params))
    if limit is not None:
        experiments = experiments[-limit:] if limit > 0 else []
    _emit_experiments(experiments, as_json, fields, brief, ranked=False)


@main.command()
@click.argument("exp_id")
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
@click.option("--field", "one_field", help="Print one field's raw value.")
@click.option("--fields", help="With --json: only these fields (comma-separated).")
@click.option("--brief", is_flag=True, help="Front-matter only, no body text.")
@click.pass_context
def show(
    ctx: click.Context,
    exp_id: str,
    as_json: bool,
    one_field: str | None,
    fields: str | None,
    brief: bool,
) -> None:
    """One experiment, by id or unique id prefix (at least 4 characters).

    \b
    Example:
      kexp show 6749f3a0 --field code_change > change.diff
    """
    exp = _store(ctx).get_experiment(exp_id)
    if one_field:
        data = exp.to_dict(include_derived=True)
        if one_field not in data:
            raise click.BadParameter(f"unknown field {one_field!r}", param_hint="--field")
        value = data[one_field]
        click.echo(value if isinstance(value, str) else json.dumps(value, ensure_ascii=False))
        return
    if as_json:
        click.echo(
            json.dumps(_as_json(exp, _field_list(fields), brief), indent=2, ensure_ascii=False)
        )
        return
    _print_experiment(exp, brief)


def _print_experiment(exp: KernelExperiment, brief: bool) -> None:
    style = _styler()
    click.echo(style(f"{exp.id}  {_one_line(exp.change_summary)}", bold=True))
    rows = [
        ("score", f"{exp.score:.4f}  ({exp.outcome})"),
        ("status", exp.status + ("  [buggy]" if exp.is_buggy else "")),
        ("operator", exp.operator_sig),
        ("dtype", exp.dtype_sig),
        ("env", exp.env),
        ("base", exp.base_commit),
        ("created", exp.created_at),
        ("parent", exp.pid or "-"),
    ]
    if exp.combines:
        rows.append(("combines", ", ".join(exp.combines)))
    if exp.tags:
        rows.append(("tags", ", ".join(exp.tags)))
    if exp.author:
        rows.append(("author", exp.author))
    if exp.path:
        rows.append(("file", os.path.relpath(exp.path)))
    for name, value in rows:
        click.echo(f"  {name:<9} {_one_line(value)}")
    if brief:
        return
    from kexp.model import SECTION_HEADINGS

    for field, heading in SECTION_HEADINGS.items():
        text = getattr(exp, field)
        if text:
            click.echo("")
            click.echo(style(f"## {heading}", bold=True))
            click.echo(_clean(text.rstrip("\n")))


def _styler() -> Callable[..., str]:
    use_color = sys.stdout.isatty() and not os.environ.get("NO_COLOR")

    def style(text: str, **kwargs: Any) -> str:
        return click.style(text, **kwargs) if use_color else text

    return style


@main.command()
@click.argument("paths", nargs=-1, type=click.Path(path_type=Path))
@click.option(
    "--format",
    "output_format",
    type=click.Choice(["text", "json", "github"]),
    default="text",
    show_default=True,
    help="Output format.",
)
@click.pass_context
def validate(ctx: click.Context, paths: tuple[Path, ...], output_format: str) -> None:
    """Check experiment files (all by default); exit 1 if any has an error.

    \b
    Example:
      kexp validate experiments/2026/11/6749f3a0c2d41e7b-fused-unroll.md
    """
    store = _store(ctx)
    selected: list[Path] | None = None
    if paths:
        selected = []
        for path in paths:
            if path.is_dir():
                selected.extend(
                    p for p in store.paths() if p.resolve().is_relative_to(path.resolve())
                )
            else:
                selected.append(path)
    problems = store.validate(selected)
    errors = sum(p.severity == "error" for p in problems)
    checked = len(selected) if selected is not None else len(store.paths())
    if output_format == "json":
        click.echo(json.dumps([p.to_dict() for p in problems], indent=2, ensure_ascii=False))
    else:
        for problem in problems:
            text = problem.format_github() if output_format == "github" else problem.format()
            click.echo(_clean(text))
        warnings_count = len(problems) - errors
        click.echo(
            f"{checked} file(s) checked: {errors} error(s), {warnings_count} warning(s)",
            err=True,
        )
    ctx.exit(EXIT_PROBLEMS if errors else EXIT_OK)


@main.command()
@click.argument("directory", type=click.Path(file_okay=False, path_type=Path), default=".")
def init(directory: Path) -> None:
    """Create a store: experiments/ with a README, and the .gitignore rule for .kexp/.

    \b
    Example:
      kexp init ~/kernels
    """
    root = init_store(directory)
    click.echo(f"initialised kexp store in {root / 'experiments'}")


if __name__ == "__main__":  # pragma: no cover
    main()
