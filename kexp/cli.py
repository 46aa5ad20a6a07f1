"""The ``kexp`` command: a thin layer over the library, one library call per command.

The commands live in :mod:`kexp.commands` (read, write, admin); this module assembles
them under one group with one error boundary.

Exit codes: 0 success; 1 problems found (validation errors, a write refused because
the result would be invalid, files not canonical, an aborted edit or delete); 2 usage
error, unknown or ambiguous id, missing store; 3 an unexpected error (a bug in kexp).
"""

from __future__ import annotations

import contextlib
import os
import sys
import warnings
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import click

from kexp import __version__
from kexp.commands import admin, agents, read, report, review, write
from kexp.commands.common import EXIT_BUG, EXIT_PROBLEMS, EXIT_USAGE, clean, configure

__all__ = ["EXIT_BUG", "EXIT_OK", "EXIT_PROBLEMS", "EXIT_USAGE", "main"]
EXIT_OK = 0
#: Kept for callers of the first CLI.
_clean = clean
#: Exceptions the error boundary lets through to click (which handles them) unchanged.
_PASSED_ON = (click.exceptions.Exit, click.exceptions.Abort, click.ClickException)


class _Group(click.Group):
    """The error boundary: every failure ends with one ``kexp: error: ...`` line.

    kexp errors exit 2 (validation errors 1, with each problem listed); usage errors
    exit 2 with a pointer to ``--help``; anything else is a bug in kexp (exit 3).
    """

    def invoke(self, ctx: click.Context) -> Any:
        with warnings.catch_warnings():
            warnings.simplefilter("default")
            warnings.showwarning = _show_warning
            return self._invoke(ctx)

    def _invoke(self, ctx: click.Context) -> Any:
        try:
            return super().invoke(ctx)
        except KeyboardInterrupt:
            click.echo("kexp: interrupted", err=True)
            ctx.exit(130)
        except BrokenPipeError:
            # The reader stopped reading (kexp list | head): not an error. Later writes
            # (and the flush at exit) go nowhere instead of failing again.
            with contextlib.suppress(OSError, ValueError):
                os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
            ctx.exit(EXIT_OK)
        except Exception as exc:
            # kexp.errors is imported here, not up front: kexp --help and --version
            # load nothing of the library.
            from kexp.errors import KexpError, ValidationError

            if isinstance(exc, ValidationError):
                click.echo(f"kexp: error: {clean(str(exc.args[0]))}", err=True)
                for problem in exc.problems:
                    click.echo(clean(problem.format()), err=True)
                ctx.exit(EXIT_PROBLEMS)
            if isinstance(exc, KexpError):
                click.echo(f"kexp: error: {_one_line_error(str(exc))}", err=True)
                ctx.exit(EXIT_USAGE)
            if isinstance(exc, _PASSED_ON):
                raise
            if os.environ.get("KEXP_DEBUG"):
                raise
            click.echo(
                f"kexp: internal error (a bug in kexp {__version__}, please report it): "
                f"{type(exc).__name__}: {_one_line_error(str(exc))}",
                err=True,
            )
            ctx.exit(EXIT_BUG)

    def main(
        self,
        args: Sequence[str] | None = None,
        prog_name: str | None = None,
        complete_var: str | None = None,
        standalone_mode: bool = True,
        **extra: Any,
    ) -> Any:
        """Run the command; usage errors print ``kexp: error: ...`` and exit 2."""
        if not standalone_mode:
            return super().main(args, prog_name, complete_var, standalone_mode, **extra)
        try:
            code = super().main(args, prog_name, complete_var, False, **extra)
        except _NO_ARGS_IS_HELP as exc:  # bare `kexp`, `kexp skill`: their help, as --help
            click.echo(
                exc.ctx.get_help()
                if exc.ctx is not None
                else self.get_help(self.context_class(self))
            )
            sys.exit(EXIT_OK)
        except click.UsageError as exc:
            where = exc.ctx.command_path if exc.ctx is not None else "kexp"
            click.echo(
                f"kexp: error: {_one_line_error(exc.format_message())} (see '{where} --help')",
                err=True,
            )
            sys.exit(EXIT_USAGE)
        except click.ClickException as exc:
            click.echo(f"kexp: error: {_one_line_error(exc.format_message())}", err=True)
            sys.exit(exc.exit_code)
        except click.Abort:
            click.echo("kexp: aborted", err=True)
            sys.exit(EXIT_PROBLEMS)
        sys.exit(code if isinstance(code, int) else 0)


#: What click raises for a group called without a command (click >= 8.2; before, it
#: printed the help itself).
_NO_ARGS_IS_HELP: type[click.UsageError] = getattr(
    click.exceptions, "NoArgsIsHelpError", type("_NeverRaised", (click.UsageError,), {})
)


def _one_line_error(text: str) -> str:
    return clean(" ".join(text.split()))


def _show_warning(
    message: Warning | str,
    category: type[Warning],
    filename: str,
    lineno: int,
    file: Any = None,
    line: str | None = None,
) -> None:
    click.echo(f"kexp: warning: {clean(str(message))}", err=True)


@click.group(
    cls=_Group,
    context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 100},
)
@click.option(
    "--root",
    type=click.Path(file_okay=False, path_type=Path),
    help="Store folder (holding experiments/); default: $KEXP_ROOT or the nearest "
    "folder above that holds experiments/.",
)
@click.option(
    "--color",
    type=click.Choice(["auto", "always", "never"]),
    default="auto",
    show_default=True,
    help="Color the output: auto (on a terminal, unless NO_COLOR is set), always, never.",
)
@click.option(
    "--no-pager",
    is_flag=True,
    help="Print long output directly instead of through the pager ($KEXP_PAGER, $PAGER, less).",
)
@click.version_option(__version__, "-V", "--version", prog_name="kexp")
@click.pass_context
def main(ctx: click.Context, root: Path | None, color: str, no_pager: bool) -> None:
    """kexp: the history of GPU kernel optimization experiments, one file each, in git.

    Exit codes: 0 ok, 1 problems found, 2 usage error / unknown id / no store, 3 a bug.
    On a terminal, outcomes and severities are in color (NO_COLOR or --color never turns
    it off) and long output goes through a pager (less; $KEXP_PAGER or $PAGER to choose
    another, --no-pager for none).

    \b
    Examples:
      kexp top                      best 20 experiments
      kexp top --json --brief       the same, for an agent
      kexp add < experiment.yaml    record one (YAML or JSON on stdin)
      kexp show 6749f3a0c2          one experiment, by id prefix (10 characters)
      kexp tree --operator cache    lineage of the cache kernel's iterations
      kexp validate                 check every file (exit 1 on errors)
      kexp report                   a static HTML report (.kexp/report/index.html)
    """
    configure(color, pager=not no_pager)
    if color != "auto":
        ctx.color = color == "always"  # click.echo keeps (or strips) styles accordingly


for _command in (
    *read.COMMANDS,
    *write.COMMANDS,
    *admin.COMMANDS,
    *agents.COMMANDS,
    *review.COMMANDS,
    *report.COMMANDS,
):
    main.add_command(_command)


if __name__ == "__main__":  # pragma: no cover
    main()
