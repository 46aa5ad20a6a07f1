"""The removing command: kexp rm, an experiment's file deleted (asking first), refused
while others build on it."""

from __future__ import annotations

from typing import TYPE_CHECKING, NoReturn

import click

from kexp.cli.commands.common import EXIT_PROBLEMS, complete_ids, get_store, shown_path
from kexp.cli.commands.terminal import clean, one_line

if TYPE_CHECKING:
    from kexp.storage.store import Removal


@click.command()
@click.argument("exp_id", shell_complete=complete_ids)
@click.option("-y", "--yes", is_flag=True, help="Do not ask.")
@click.option(
    "--force", is_flag=True, help="Delete even when other experiments name it as their parent."
)
@click.pass_context
def rm(ctx: click.Context, exp_id: str, yes: bool, force: bool) -> None:
    """Delete an experiment's file (asks first unless --yes).

    Refused (exit 1, before asking) while other experiments name it as their parent or
    in their combines, unless --force.

    Python: kexp.remove_experiment(id, force=False, confirm=None), the same checks and
    question (kexp.Store.delete_experiment(id, force=False) deletes without asking).

    \b
    Example:
      kexp rm 6ad1e3ef8a --yes
    """

    def ask(removal: Removal) -> bool:
        summary = "(invalid file)" if removal.summary is None else one_line(removal.summary)
        question = f"Delete {removal.id} {summary} ({clean(shown_path(removal.path))})?"
        try:
            return click.confirm(question, default=False, err=True)
        except click.Abort:
            return False

    removal = get_store(ctx).remove_experiment(exp_id, force=force, confirm=None if yes else ask)
    if removal.refused:
        _refuse_delete(ctx, removal.refused)
    if not removal.deleted:
        click.echo("kexp: nothing deleted", err=True)
        ctx.exit(EXIT_PROBLEMS)
    click.echo(f"deleted {removal.id} {clean(shown_path(removal.path))}")


def _refuse_delete(ctx: click.Context, why: str) -> NoReturn:
    """A refused delete: one line naming --force, exit 1 (as a refused write)."""
    click.echo(
        f"kexp: error: {one_line(why)}; nothing deleted (re-parent them first, or delete "
        "it anyway with kexp rm --force)",
        err=True,
    )
    ctx.exit(EXIT_PROBLEMS)


COMMANDS = (rm,)
