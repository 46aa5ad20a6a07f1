"""Commands for migrating and for agents: import, skill install."""

from __future__ import annotations

from pathlib import Path

import click

from kexp.commands.common import EXIT_OK, EXIT_PROBLEMS, clean, get_store, progress


@click.command(name="import")
@click.argument("source", type=click.Path(exists=True, dir_okay=False, path_type=Path))
@click.option("--dry-run", is_flag=True, help="Write nothing; report what would happen.")
@click.option(
    "--no-check-commits",
    is_flag=True,
    help="Do not report base_commit values that do not resolve in the code repository.",
)
@click.pass_context
def import_command(ctx: click.Context, source: Path, dry_run: bool, no_check_commits: bool) -> None:
    """Import the predecessor's kernel_experiments_db.json: one file per record.

    Every value is kept exactly; a value the format cannot hold as is is kept in a
    legacy_<field> line and reported with its record id. Re-running skips identical
    records and reports conflicting ones. Exit 1 when something needs attention.

    Python: kexp.legacy.import_legacy(source, store).

    \b
    Example:
      kexp import ~/kernel_experiments_db.json --dry-run
    """
    from kexp.legacy import import_legacy

    store = get_store(ctx)
    with progress("importing"):
        report = import_legacy(source, store, dry_run=dry_run, check_commits=not no_check_commits)
    for line in report.lines():
        click.echo(clean(line))
    ctx.exit(EXIT_OK if report.ok else EXIT_PROBLEMS)


@click.group()
def skill() -> None:
    """The kernel-exp-history agent skill.

    \b
    Example:
      kexp skill install --claude
    """


@skill.command(name="install")
@click.option("--claude", "target", flag_value="claude", default=True, help=".claude/skills/")
@click.option("--cursor", "target", flag_value="cursor", help=".cursor/skills/")
@click.option(
    "--dir",
    "directory",
    type=click.Path(file_okay=False, path_type=Path),
    help="Install into this skills folder instead.",
)
def skill_install(target: str, directory: Path | None) -> None:
    """Copy the skill into an agent's skills folder of this project.

    The project is the top of the git repository around the working directory.

    Python: kexp.skill.install_skill(target, directory=DIR).

    \b
    Examples:
      kexp skill install --claude        # .claude/skills/kernel-exp-history/
      kexp skill install --dir ~/skills  # ~/skills/kernel-exp-history/
    """
    from kexp.skill import install_skill

    for path in install_skill(target, directory=directory):
        click.echo(f"wrote {path}")


COMMANDS = (import_command, skill)
