"""Editing commands: kexp update (correct fields), kexp re-id (a fresh id and file name)
and kexp fmt (canonical form), each one library call."""

from __future__ import annotations

import shlex
from pathlib import Path
from typing import TYPE_CHECKING

import click

from kexp.cli.commands.common import EXIT_PROBLEMS, complete_ids, get_store, shown_path
from kexp.cli.commands.terminal import clean, echo_json, progress
from kexp.core.errors import KexpError, StoreNotFoundError

if TYPE_CHECKING:
    pass


@click.command()
@click.argument("exp_id", shell_complete=complete_ids)
@click.option(
    "--set",
    "assignments",
    multiple=True,
    metavar="FIELD=VALUE",
    help="Set a field (repeatable). Lists: comma-separated; results: JSON.",
)
@click.option(
    "--set-file",
    "file_assignments",
    multiple=True,
    metavar="FIELD=PATH",
    help="Set a field to the text of a file ('-': stdin) (repeatable).",
)
@click.option(
    "--reason",
    help="Why: appends a dated correction note (old → new values and the reason) to "
    "the detailed description.",
)
@click.option("--json", "as_json", is_flag=True, help="Print id, path and changed fields as JSON.")
@click.pass_context
def update(
    ctx: click.Context,
    exp_id: str,
    assignments: tuple[str, ...],
    file_assignments: tuple[str, ...],
    reason: str | None,
    as_json: bool,
) -> None:
    """Correct fields of an experiment (validated; only the changed lines are rewritten).

    A new score restates the figure of change_summary that stated the old one (+25% ->
    +5%) and drops the old measurement's score_ci unless a new one is given.

    Python: kexp.measure.corrections.apply_correction(store, id, changes, reason).

    \b
    Examples:
      kexp update 6ac8bc7624 --set score=1.021 --reason "re-measured with 200 iterations"
      kexp update 6ac8bc7624 --set tags=cache,unroll --set status=done
      kexp update 6ac8bc7624 --set-file raw_result=bench.log
    """
    # lazy: one command's library, loaded when that command runs
    from kexp.core.inputs import read_input_text
    from kexp.measure.corrections import apply_correction, parse_assignments, parse_value
    from kexp.output.export import written_record

    changes = parse_assignments(assignments)
    store = get_store(ctx)
    for item in file_assignments:
        field, sep, name = item.partition("=")
        field = field.strip()
        if not sep or not field or not name:
            raise KexpError(f"{item!r} is not FIELD=PATH (e.g. raw_result=bench.log)")
        if field in changes:
            raise KexpError(f"{field} is set twice")
        text = read_input_text(name, f"--set-file {field}", limit=store.settings.max_input_bytes)
        changes[field] = parse_value(field, text.rstrip("\n"))
    if not changes:
        raise click.UsageError("nothing to change: give --set FIELD=VALUE or --set-file")
    updated, changed = apply_correction(store, exp_id, changes, reason)
    if as_json:
        echo_json(written_record(updated, changed=changed))
    elif not changed:  # the file already says this: nothing written, no correction note
        click.echo(f"nothing changed: {updated.id} already has {', '.join(changes)} as given")
    else:
        click.echo(f"updated {updated.id}: {', '.join(changed)}")


@click.command(name="re-id")
@click.argument("path", type=click.Path(path_type=Path))
@click.option(
    "--force", is_flag=True, help="Go ahead even when other experiments build on the file."
)
@click.pass_context
def re_id(ctx: click.Context, path: Path, force: bool) -> None:
    """Give an experiment file a fresh id, and the file name that goes with it.

    For two files holding one id (kexp validate: duplicate-id): a file copied to start
    a new experiment, or two branches that made the same id. Only the file's id line
    changes; it moves to experiments/YYYY/MM/xx/<new id>-<slug>.md, by the new id's
    time, as kexp add names a file. Refused (exit 2, nothing changed) for a path that is
    not an experiment file of the store; and, unless --force, while other experiments
    (here or on another branch, read across refs) name its id as their parent or combine
    it: the id the file's alone (their lineage would break), or the file the one holding
    the id where they are (their lineage would move to the other file's experiment: re-id
    that one instead).

    Python: kexp.Store.re_id(path, force=False).

    \b
    Example:
      kexp re-id experiments/2026/10/26/6ad1e3ef8a949f26-*.md
    """
    done = get_store(ctx).re_id(path, force=force)
    click.echo(
        f"re-id {done.old_id} -> {done.id}: {clean(shown_path(done.old_path))} -> "
        f"{clean(shown_path(done.path))}"
    )


@click.command()
@click.argument("paths", nargs=-1, type=click.Path(exists=True, path_type=Path))
@click.option("--check", is_flag=True, help="Only list the files not in canonical form; exit 1.")
@click.option(
    "--format",
    "output_format",
    type=click.Choice(["text", "github"]),
    default="text",
    show_default=True,
    help="With --check: text: their paths; github: a workflow annotation on each.",
)
@click.pass_context
def fmt(ctx: click.Context, paths: tuple[Path, ...], check: bool, output_format: str) -> None:
    """Rewrite experiment files in canonical form (all by default).

    Files with errors are left alone and reported (exit 1). With --check nothing is
    written: the files that are not canonical are listed (--format github: annotated),
    the last line says the kexp fmt to run, and the exit code is 1. Comments in the
    front-matter are not data and are not kept.

    Python: kexp.storage.fmt.format_files(paths, store=store, check=False).

    \b
    Examples:
      kexp fmt
      kexp fmt --check experiments/2026/  # in CI
      kexp fmt --check --format github    # in a GitHub Actions workflow
    """
    # lazy: one command's library, loaded when that command runs
    from kexp.storage.fmt import format_files

    try:
        store = get_store(ctx)
    except StoreNotFoundError:
        if not paths:
            raise
        store = None
    with progress("formatting"):
        results = format_files(list(paths) or None, store=store, check=check)
    root = ctx.find_root().params.get("root")
    kexp = ["kexp", "--root", str(root)] if root is not None else ["kexp"]  # (as given)
    changed = errors = 0
    results = [r for r in results if r.status != "gone"]  # deleted meanwhile: not a problem
    for result in results:
        shown = clean(shown_path(result.path))
        if result.status == "error":
            errors += 1
            click.echo(f"{shown}: error: {clean(result.message)}", err=True)
        elif result.changed:
            changed += 1
            if check and output_format == "github":
                click.echo(clean(_not_canonical(shown, kexp)))
            else:
                click.echo(shown if check else f"reformatted {shown}")
        if result.canonical_name is not None:
            renamed = clean(shown_path(result.path.with_name(result.canonical_name)))
            click.echo(
                f"{shown}: note: kexp would name it {clean(result.canonical_name)} "
                f"(to rename it: mv {shlex.quote(shown)} {shlex.quote(renamed)})",
                err=True,
            )
    unchanged = len(results) - changed - errors
    verb = "would be reformatted" if check else "reformatted"
    fix = ""
    if check and changed:  # (the reader of a CI log may not know kexp)
        command = shlex.join([*kexp, "fmt", *(str(path) for path in paths)])
        fix = f": run {command} to rewrite {'it' if changed == 1 else 'them'} in canonical form"
    click.echo(
        f"{changed} file(s) {verb}, {unchanged} already canonical"
        + (f", {errors} with errors" if errors else "")
        + fix,
        err=True,
    )
    ctx.exit(EXIT_PROBLEMS if errors or (check and changed) else 0)


def _not_canonical(shown: str, kexp: list[str]) -> str:
    """The workflow annotation on the file ``shown`` (its path) not in canonical form
    (``kexp``: the command as the user gave it, ``--root`` repeated)."""
    # lazy: one command's library, loaded when that command runs
    from kexp.core.problems import Problem

    hint = f"run {shlex.join([*kexp, 'fmt', shown])}"
    message = "not in the canonical form kexp writes"
    return Problem(shown, 1, 1, "error", "not-canonical", "", message, hint).format_github()


COMMANDS = (update, re_id, fmt)
