"""The ``kexp`` command: a thin layer over the library, one library call per command.

The commands live in :mod:`kexp.cli.commands` (read, record, edit, admin, ...); this module
assembles them under one group with one error boundary.

Exit codes: 0 success; 1 problems found (validation errors, a write refused because
the result would be invalid, files not canonical, an aborted edit or delete); 2 usage
error, unknown or ambiguous id, missing store; 3 an unexpected error (a bug in kexp).
"""

from __future__ import annotations

import contextlib
import importlib
import os
import sys
import warnings
from collections.abc import Iterator, MutableMapping, Sequence
from typing import TYPE_CHECKING, Any

import click
from click import formatting

from kexp.cli.commands.exits import EXIT_BUG, EXIT_OK, EXIT_PROBLEMS, EXIT_USAGE
from kexp.core.version import __version__

if TYPE_CHECKING:
    from pathlib import Path

__all__ = ["EXIT_BUG", "EXIT_OK", "EXIT_PROBLEMS", "EXIT_USAGE", "main"]
#: Exceptions the error boundary lets through to click (which handles them) unchanged.
_PASSED_ON = (click.exceptions.Exit, click.exceptions.Abort, click.ClickException)


#: Every command: the module of :mod:`kexp.cli.commands` defining it, and the first
#: paragraph of its help, so that ``kexp --help`` lists them without importing a command
#: module, and a command imports its own module only (``tests/test_startup.py`` holds
#: this table equal to the modules' commands).
COMMAND_TABLE: dict[str, tuple[str, str]] = {
    "add": ("record", "Record an experiment without an editor (for agents and scripts)."),
    "context": ("agents", "What to read before the next iteration on an operator, in one packet."),
    "env": ("admin", "The detected environment: GPU, CUDA/ROCm, torch, triton, CPU, compiler, "
            "OS, Python."),
    "export": ("read", "Write the experiments matching the filters as JSON, JSON Lines or CSV."),
    "fmt": ("edit", "Rewrite experiment files in canonical form (all by default)."),
    "import": ("agents", "Import the predecessor's kernel_experiments_db.json: one file per "
               "record."),
    "init": ("admin", "Create a store: experiments/ with a README, and the .gitignore rule for "
             ".kexp/."),
    "lessons": ("summaries", "The failures to learn from: buggy, failed, regression, marginal, "
                "interference."),
    "list": ("read", "Every experiment matching the filters, oldest first."),
    "log": ("read", "The history of one experiment: every commit that touched its file, oldest "
            "first."),
    "mcp": ("agents", "Serve kexp's tools to agent clients over the Model Context Protocol "
            "(stdio)."),
    "migrate-layout": ("admin", "Move month-layout files to experiments/YYYY/MM/xx/."),
    "new": ("draft", "Write a new experiment in $VISUAL / $EDITOR, from a prefilled template."),
    "review": ("review", "Summarise what a branch changes in the store, for its pull request."),
    "re-id": ("edit", "Give an experiment file a fresh id, and the file name that goes with "
              "it."),
    "remeasure": ("record", "Add a round of measurement to an experiment (no best-of-N)."),
    "report": ("report", "Write a static HTML report: open its index.html from disk, no "
               "server needed."),
    "rm": ("remove", "Delete an experiment's file (asks first unless --yes)."),
    "settings": ("admin", "The settings in force: each value, and where it came from (kexp.toml "
                 "or default)."),
    "show": ("read", "One experiment, by id or unique id prefix."),
    "similar": ("agents", "The experiments most related to a plan (--text), a diff (--diff) "
                "or an experiment."),
    "skill": ("agents", "The kernel-exp-history agent skill."),
    "stats": ("summaries", "Counts per operator and outcome; the best tip per operator, dtype "
              "and env."),
    "sync": ("sync", "Publish this machine's experiments: commit experiments/, fetch, merge, "
             "push."),
    "top": ("read", "The best experiments by cumulative score, the speedup over the "
            "reference."),
    "tree": ("read", "The lineage (experiments linked by pid) as a tree; a chain's steps in "
             "one column."),
    "update": ("edit", "Correct fields of an experiment (validated; only the changed lines are "
               "rewritten)."),
    "validate": ("admin", "Check experiment files (all by default); exit 1 if any has an "
                 "error."),
}  # fmt: skip


class _Commands(MutableMapping[str, click.Command]):
    """The group's commands by name: a module of :mod:`kexp.cli.commands` is imported when
    one of its commands is first asked for."""

    def __init__(self) -> None:
        self._loaded: dict[str, click.Command] = {}

    def __getitem__(self, name: str) -> click.Command:
        if name not in self._loaded:
            if name not in COMMAND_TABLE:
                raise KeyError(name)
            module = importlib.import_module(f"kexp.cli.commands.{COMMAND_TABLE[name][0]}")
            commands: Sequence[click.Command] = module.COMMANDS
            for command in commands:
                if str(command.name) not in self._loaded:
                    _accept_global_options(command)
                    self._loaded[str(command.name)] = command
        return self._loaded[name]

    def __setitem__(self, name: str, command: click.Command) -> None:
        self._loaded[name] = command

    def __delitem__(self, name: str) -> None:
        del self._loaded[name]

    def __iter__(self) -> Iterator[str]:
        return iter(sorted({*COMMAND_TABLE, *self._loaded}))

    def __len__(self) -> int:
        return len({*COMMAND_TABLE, *self._loaded})


def _late_root(ctx: click.Context, param: click.Parameter, value: str | None) -> None:
    if value is not None:
        from pathlib import Path  # lazy: kexp --help loads no pathlib

        ctx.find_root().params["root"] = Path(value)


def _late_color(ctx: click.Context, param: click.Parameter, value: str | None) -> None:
    if value is None:
        return
    from kexp.cli.commands.terminal import configure  # lazy: kexp --help loads no library

    configure(color=value)
    shown = None if value == "auto" else value == "always"
    here: click.Context | None = ctx
    while here is not None:  # click.echo asks the current context, which inherited it
        here.color = shown
        here = here.parent


def _late_no_pager(ctx: click.Context, param: click.Parameter, value: bool) -> None:
    if value:
        from kexp.cli.commands.terminal import configure  # lazy: kexp --help loads no library

        configure(pager=False)


def _accept_global_options(command: click.Command) -> None:
    """Let ``--root``, ``--color`` and ``--no-pager`` follow the command too (``kexp top
    --no-pager``), as they may precede it: hidden options of the command (and of its
    subcommands) that set what the group's options set."""
    names = {opt for param in command.params for opt in getattr(param, "opts", ())}
    late = [
        click.Option(["--root"], type=click.Path(file_okay=False), callback=_late_root),
        click.Option(
            ["--color"], type=click.Choice(["auto", "always", "never"]), callback=_late_color
        ),
        click.Option(["--no-pager"], is_flag=True, callback=_late_no_pager),
    ]
    for option in late:
        if not names.intersection(option.opts):
            option.hidden, option.expose_value = True, False
            command.params.append(option)
    if isinstance(command, click.Group):
        for sub in command.commands.values():
            _accept_global_options(sub)


def terminal_columns() -> int:
    """The terminal's width as :func:`shutil.get_terminal_size` gives it (``$COLUMNS``,
    else the terminal of stdout, else 80), without importing :mod:`shutil` (which
    imports compression modules ``kexp --help`` does not need)."""
    try:
        columns = int(os.environ["COLUMNS"])
    except (KeyError, ValueError):
        columns = 0
    if columns <= 0:
        try:
            columns = os.get_terminal_size(sys.__stdout__.fileno()).columns  # type: ignore[union-attr]
        except (AttributeError, ValueError, OSError):
            columns = 0
    return columns or 80


class _Context(click.Context):
    """A context whose help formatter is as wide as click makes it, measured by
    :func:`terminal_columns`."""

    def make_formatter(self) -> click.HelpFormatter:
        width = self.terminal_width
        if width is None and formatting.FORCED_WIDTH is None:
            width = max(min(terminal_columns(), self.max_content_width or 80) - 2, 50)
        return self.formatter_class(width=width, max_width=self.max_content_width)


class _Group(click.Group):
    """The error boundary: every failure is said by one ``kexp: error: ...`` line first.

    kexp errors exit 2 (validation errors 1, with each problem listed); usage errors
    exit 2 with a pointer to ``--help``; anything else is a bug in kexp (exit 3).
    Commands come from :class:`_Commands`; the help lists them from
    :data:`COMMAND_TABLE`, as click would from the commands themselves.
    """

    context_class = _Context

    def format_commands(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        names = self.list_commands(ctx)
        limit = formatter.width - 6 - max(len(name) for name in names)
        # The short help click makes of a command's help, from its first paragraph.
        rows = [
            (name, click.Command(name, help=COMMAND_TABLE[name][1]).get_short_help_str(limit))
            for name in names
        ]
        with formatter.section("Commands"):
            formatter.write_dl(rows)

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
            # lazy: kexp --help and --version load nothing of the library
            from kexp.cli.commands.terminal import clean
            from kexp.core.errors import KexpError, ValidationError

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


def _print_version(ctx: click.Context) -> None:
    """``kexp --version``: what click's version option prints (made by hand: that
    option looks up its default texts' translations when it is defined, which costs
    every command a ``locale`` import)."""
    if not ctx.resilient_parsing:
        click.echo(f"kexp, version {__version__}")
        ctx.exit()


def _one_line_error(text: str) -> str:
    from kexp.cli.commands.terminal import clean  # lazy: kexp --help loads no library

    return clean(" ".join(text.split()))


def _show_warning(
    message: Warning | str,
    category: type[Warning],
    filename: str,
    lineno: int,
    file: Any = None,
    line: str | None = None,
) -> None:
    from kexp.cli.commands.terminal import clean  # lazy: kexp --help loads no library

    click.echo(f"kexp: warning: {clean(str(message))}", err=True)


@click.group(
    cls=_Group,
    context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 100},
)
@click.option(
    "--root",
    type=click.Path(file_okay=False),  # made a Path in main: --help imports no pathlib
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
@click.option(
    "-V",
    "--version",
    is_flag=True,
    expose_value=False,
    is_eager=True,
    callback=lambda ctx, _, value: _print_version(ctx) if value else None,
    help="Show the version and exit.",
)
@click.pass_context
def main(ctx: click.Context, root: Path | None, color: str, no_pager: bool) -> None:
    """kexp: the history of GPU kernel optimization experiments, one file each, in git.

    The options below may also follow the command: kexp top --no-pager.

    Exit codes: 0 ok, 1 problems found, 2 usage error / unknown id / no store, 3 a bug.
    On a terminal, outcomes and severities are in color (NO_COLOR or --color never turns
    it off) and long output goes through a pager (less; $KEXP_PAGER or $PAGER to choose
    another, --no-pager for none).

    \b
    Examples:
      kexp top                      # best 20 experiments
      kexp top --json --brief       # the same, for an agent
      kexp add < experiment.yaml    # record one (YAML or JSON on stdin)
      kexp show 6aca6c49dc          # one experiment, by id prefix (10 characters)
      kexp tree --operator cache    # lineage of the cache kernel's iterations
      kexp validate                 # check every file (exit 1 on errors)
      kexp report                   # a static HTML report (.kexp/report/index.html)
    """
    # lazy: kexp --help and --version load no pathlib and no library
    from pathlib import Path

    from kexp.cli.commands.terminal import configure

    if root is not None:
        ctx.params["root"] = Path(root)
    configure(color, pager=not no_pager)
    if color != "auto":
        ctx.color = color == "always"  # click.echo keeps (or strips) styles accordingly


main.commands = _Commands()


if __name__ == "__main__":  # pragma: no cover
    main()
