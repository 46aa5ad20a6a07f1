"""Commands for migrating and for agents: import, skill install."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import click

from kexp.commands.common import EXIT_OK, EXIT_PROBLEMS, clean, get_store, progress

if TYPE_CHECKING:
    from kexp.legacy import ImportReport, Note


@click.command(name="import")
@click.argument("source", type=click.Path(exists=True, dir_okay=False, path_type=Path))
@click.option("--dry-run", is_flag=True, help="Write nothing; report what would happen.")
@click.option(
    "--no-check-commits",
    is_flag=True,
    help="Do not report base_commit values that do not resolve in the code repository.",
)
@click.option(
    "-v", "--verbose", is_flag=True, help="One line per note, instead of alike notes grouped."
)
@click.pass_context
def import_command(
    ctx: click.Context, source: Path, dry_run: bool, no_check_commits: bool, verbose: bool
) -> None:
    """Import the predecessor's kernel_experiments_db.json: one file per record.

    Every value is kept exactly; a value the format cannot hold as is is kept in a
    legacy_<field> line and reported with its record id. Re-running skips identical
    records and reports conflicting ones. Alike notes of many records are grouped on one
    line (-v lists each). Exit 1 when something needs attention.

    Python: kexp.legacy.import_legacy(source, store).

    \b
    Example:
      kexp import ~/kernel_experiments_db.json --dry-run
    """
    from kexp.legacy import import_legacy

    store = get_store(ctx)
    with progress("importing"):
        report = import_legacy(source, store, dry_run=dry_run, check_commits=not no_check_commits)
    lines = report.lines() if verbose else grouped_notes(report)
    for line in lines:
        click.echo(clean(line))
    ctx.exit(EXIT_PROBLEMS if report.needing_attention else EXIT_OK)


#: At least this many records with the same note are shown as one line.
GROUP_FROM = 3
#: What to add to a group of notes of one field (how to silence or fix them).
_GROUP_HINTS = {"base_commit": "--no-check-commits skips this check"}


def grouped_notes(report: ImportReport) -> list[str]:
    """The import's notes with alike ones (same field, same message) of many records on
    one line, with a count and the first records; then the summary line."""
    out: list[str] = []
    for kind, notes in (
        ("conflict", report.conflicts),
        ("not imported", report.failed),
        ("kept", report.notes),
    ):
        groups: dict[tuple[str, str], list[Note]] = {}
        for note in notes:
            groups.setdefault((note.field, note.message), []).append(note)
        for (field, message), members in groups.items():
            if len(members) < GROUP_FROM:
                out += [f"{kind}: {note.format()}" for note in members]
                continue
            records = ", ".join(note.record for note in members[:3])
            hint = _GROUP_HINTS.get(field)
            out.append(
                f"{kind}: {len(members):,} records ({records}, …): {field + ': ' if field else ''}"
                f"{message}" + (f"; {hint}" if hint else "")
            )
    out.append(report.summary())
    return out


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
