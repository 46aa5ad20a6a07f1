"""The sync command: publish this machine's experiments, take in the others'."""

from __future__ import annotations

import click

from kexp.cli.commands.common import get_store
from kexp.cli.commands.terminal import clean, echo_json


@click.command()
@click.option(
    "--branch",
    metavar="BRANCH",
    help="Publish to this branch (e.g. kexp/alice) instead of the checked-out one; the "
    "checkout, index and working tree are left as they are.",
)
@click.option(
    "--remote", default="origin", show_default=True, metavar="NAME", help="The remote to push to."
)
@click.option("-m", "--message", help="The commit message (default: the files committed).")
@click.option(
    "--attempts",
    type=click.IntRange(1, 100),
    default=20,
    show_default=True,
    help="How many pushes to try when others keep pushing first (fetch and merge between).",
)
@click.option(
    "--dry-run",
    is_flag=True,
    help="Say what would be committed, removed, made, merged in and pushed; change nothing.",
)
@click.option("--json", "as_json", is_flag=True, help="Print what was done as JSON.")
@click.pass_context
def sync(
    ctx: click.Context,
    branch: str | None,
    remote: str,
    message: str | None,
    attempts: int,
    dry_run: bool,
    as_json: bool,
) -> None:
    """Publish this machine's experiments: commit experiments/, fetch, merge, push.

    Commits only the files under experiments/ (never your other changes; refused while
    the index holds other staged work), fetches the remote branch, merges it in when
    both moved (the other clones' experiments arrive in your working tree), and pushes;
    a push rejected because another clone pushed first is retried. Never a force-push.
    Nothing new: nothing committed. With --branch, an experiment removed here is
    removed from the branch when this clone published it there or the checkout tracks
    it; another clone's files on a shared branch never are. A real conflict (the same
    experiment corrected on both sides) stops with the file named, nothing changed; so
    does an experiment that kexp validate --changed would reject (exit 1).

    Python: kexp.sync(branch=None, remote="origin", dry_run=False).

    \b
    Examples:
      kexp sync                        # after each iteration
      kexp sync --branch kexp/alice    # one branch per agent, the checkout untouched
      kexp sync --dry-run              # what would be committed and pushed
    """
    # lazy: one command's library, loaded when that command runs
    from kexp.storage.sync import sync as publish

    result = publish(
        get_store(ctx),
        branch=branch,
        remote=remote,
        message=message,
        dry_run=dry_run,
        attempts=attempts,
    )
    if as_json:
        echo_json(result.to_dict())
        return
    for line in result.lines():
        click.echo(clean(line))


COMMANDS = (sync,)
