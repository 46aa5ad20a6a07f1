"""Commands for migrating and for agents: import, skill (install, show), context, similar,
mcp."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import click

from kexp.cli.commands.common import (
    EXIT_OK,
    EXIT_PROBLEMS,
    REF_LEGEND,
    get_store,
    ref_labels,
    refs_options,
)
from kexp.cli.commands.terminal import clean, echo_json, echo_raw, one_line, print_table, progress
from kexp.core.errors import KexpError, StoreNotFoundError

if TYPE_CHECKING:
    from kexp.output.legacy import Note
    from kexp.output.legacyimport import ImportReport


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

    Python: kexp.output.legacyimport.import_legacy(source, store).

    \b
    Example:
      kexp import ~/kernel_experiments_db.json --dry-run
    """
    # lazy: one command's library, loaded when that command runs
    from kexp.output.legacyimport import import_legacy

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
        ("re-linked", report.relinked),
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
    if report.sidecar_note:
        out.append(f"no sidecar: {report.sidecar_note}")
    out.append(report.summary())
    return out


@click.group()
def skill() -> None:
    """The kernel-exp-history agent skill.

    \b
    Examples:
      kexp skill install --claude
      kexp skill show | less
    """


@skill.command(name="show")
def skill_show() -> None:
    """Print the skill's text (its SKILL.md), as an agent reads it.

    Python: kexp.agents.skill.skill_text().

    \b
    Example:
      kexp skill show | less
    """
    # lazy: one command's library, loaded when that command runs
    from kexp.agents.skill import skill_text

    click.echo(skill_text(), nl=False)


@skill.command(name="install")
@click.option("--claude", "target", flag_value="claude", default=True, help=".claude/skills/")
@click.option("--cursor", "target", flag_value="cursor", help=".cursor/skills/")
@click.option(
    "--dir",
    "directory",
    type=click.Path(file_okay=False, path_type=Path),
    help="Install into this skills folder instead.",
)
@click.option(
    "--mcp",
    "with_mcp",
    is_flag=True,
    help="Also add the kexp MCP server (kexp mcp) to the client's project configuration: "
    ".mcp.json (Claude Code) or .cursor/mcp.json (Cursor), other servers kept.",
)
@click.pass_context
def skill_install(ctx: click.Context, target: str, directory: Path | None, with_mcp: bool) -> None:
    """Copy the skill into an agent's skills folder of this project.

    The project is the top of the git repository around the working directory. With
    --mcp, the client's configuration also starts kexp's MCP server (kexp mcp) on this
    store, so the agent calls kexp's tools directly.

    Python: kexp.agents.skill.install_skill(target, directory=DIR);
    kexp.agents.skill.install_mcp_config(target, store=ROOT).

    \b
    Examples:
      kexp skill install --claude --mcp  # .claude/skills/kernel-exp-history/, .mcp.json
      kexp skill install --cursor --mcp  # .cursor/skills/..., .cursor/mcp.json
      kexp skill install --dir ~/skills  # ~/skills/kernel-exp-history/
    """
    # lazy: one command's library, loaded when that command runs
    from kexp.agents.skill import (
        install_mcp_config,
        install_skill,
        installed_server,
        keep_local,
    )

    for path in install_skill(target, directory=directory):
        click.echo(f"wrote {path}")
    if with_mcp:
        # lazy: contextlib, kexp.storage.location only when this runs (start-up)
        import contextlib

        from kexp.storage.location import find_root

        store: Path | None = ctx.find_root().params.get("root")
        if store is None:  # none yet: the server finds the store where it runs
            with contextlib.suppress(StoreNotFoundError):
                store = find_root()
        path = install_mcp_config(target, store=store)
        click.echo(f"wrote {path}: the client runs {installed_server(path)}")
        click.echo(keep_local(path, target))


def _read_diff(path: str, limit: int) -> str:
    """The text of ``--diff FILE`` (``-``: standard input), at most ``limit`` bytes."""
    # lazy: one command's library, loaded when that command runs
    from kexp.core.inputs import read_input_text

    return read_input_text(path, "the diff", limit=limit, errors="replace")


@click.command()
@click.option("--operator", required=True, help="Operator/file substring (case-insensitive).")
@click.option("--dtype", help="Data type substring, e.g. bf16.")
@click.option("--env", help="Environment substring, e.g. MI300X.")
@click.option("--text", "plan", metavar="TEXT", help="What you plan to try, in words.")
@click.option(
    "--diff", "diff_file", metavar="FILE", help="The planned change as a diff ('-': stdin)."
)
@click.option(
    "--budget",
    type=click.IntRange(min=1),
    default=4000,
    show_default=True,
    help="Most tokens to print (a token counts as 4 characters).",
)
@click.option("--json", "as_json", is_flag=True, help="Print JSON instead of Markdown.")
@refs_options
@click.pass_context
def context(
    ctx: click.Context,
    operator: str,
    dtype: str | None,
    env: str | None,
    plan: str | None,
    diff_file: str | None,
    budget: int,
    as_json: bool,
    refs: tuple[str, ...],
    all_refs: bool,
) -> None:
    """What to read before the next iteration on an operator, in one packet.

    The current best for operator x dtype x env and the lineage to it (Δ per step); the
    related failures and successes, most related to the plan first, each with its key
    insight; what was already tried here and how it ended; the dtypes, envs and
    configurations never improved. Never more than --budget tokens (characters / 4);
    a last section says what did not fit. The same store and options print the same
    bytes.

    With --all-refs (or --refs PATTERN) it reads what the other agents synced too (after
    a git fetch): the consult call of an agent working with others.

    Python: kexp.context(operator=..., dtype=..., env=..., text=..., diff=..., refs=...).

    \b
    Examples:
      kexp context --operator reshape_and_cache --dtype bf16 --env MI300X
      kexp context --operator reshape_and_cache --all-refs
      kexp context --operator rms_norm --text "warp-shuffle reduction" --budget 2000
      git diff | kexp context --operator rms_norm --diff - --json
    """
    # lazy: one command's library, loaded when that command runs
    from kexp.agents.context import context as make_context

    store = get_store(ctx)
    diff = _read_diff(diff_file, store.settings.max_input_bytes) if diff_file else None
    if diff is not None and not diff.strip():  # (git diff with nothing changed)
        where = "standard input" if diff_file == "-" else diff_file
        click.echo(
            f"kexp: warning: the diff ({where}) is empty: the packet is made without it",
            err=True,
        )
    packet = make_context(
        store,
        operator=operator,
        dtype=dtype,
        env=env,
        text=plan,
        diff=diff,
        budget=budget,
        output="json" if as_json else "markdown",
    )
    echo_raw(packet.text.rstrip("\n"))


@click.command()
@click.argument("exp_id", required=False)
@click.option("--text", metavar="TEXT", help="A plan or idea, in words.")
@click.option("--diff", "diff_file", metavar="FILE", help="A code change as a diff ('-': stdin).")
@click.option("--operator", help="Only experiments on this operator (substring).")
@click.option("--dtype", help="Only this data type (substring).")
@click.option("--env", help="Only this environment (substring).")
@click.option("-n", "--limit", type=int, default=10, show_default=True, help="How many.")
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
@refs_options
@click.pass_context
def similar(
    ctx: click.Context,
    exp_id: str | None,
    text: str | None,
    diff_file: str | None,
    operator: str | None,
    dtype: str | None,
    env: str | None,
    limit: int,
    as_json: bool,
    refs: tuple[str, ...],
    all_refs: bool,
) -> None:
    """The experiments most related to a plan (--text), a diff (--diff) or an experiment.

    Ranked by BM25 over summary, description, key insight, operator and the words of
    the code change (SQLite FTS5; a plan's numbers count: "unroll by 8" is not "unroll
    by 4"), plus the similarity of the code changes (shingles of the changed lines,
    variables renamed) for a diff or an experiment. Each line:
    relevance, code similarity, score (as kexp top's SCORE: over the parent when
    measured_against is parent, else over the reference), VS PARENT (what the outcome
    judges of a step: its cumulative score over its parent's; '-' with no parent:
    the outcome judges the score), outcome, summary.

    Python: kexp.similar(text=..., diff=..., exp_id=..., refs=...).

    \b
    Examples:
      kexp similar --text "stage the KV tile through shared memory"
      kexp similar --diff change.diff --operator cache
      kexp similar 6ac50671ad --json
    """
    # lazy: one command's library, loaded when that command runs
    from kexp.storage.retrieval import similar as find_similar

    store = get_store(ctx)
    diff = _read_diff(diff_file, store.settings.max_input_bytes) if diff_file else None
    matches = find_similar(
        store,
        text=text,
        diff=diff,
        exp_id=exp_id,
        limit=limit,
        operator=operator,
        dtype=dtype,
        env=env,
    )
    if as_json:
        echo_json([match.to_dict() for match in matches])
        return
    if not matches:
        click.echo("(nothing related found)", err=True)
        return
    from kexp.format.samples import describe_score

    rows = []
    id_length = store.shown_id_length(match.id for match in matches)
    for match in matches:
        score = describe_score(match.shown_score, match.score_ci or ())
        code = "" if match.similarity is None else f"{match.similarity:.2f}"
        rows.append(
            [
                match.id[:id_length],
                f"{match.relevance:.3f}",
                code,
                score,
                "-" if match.vs_parent is None else f"{match.vs_parent:.4f}",
                match.outcome,
                one_line(match.change_summary),
            ]
        )
    headers = ["ID", "RELEVANCE", "CODE", "SCORE", "VS PARENT", "OUTCOME", "SUMMARY"]
    if all(match.similarity is None for match in matches):
        headers.remove("CODE")
        rows = [row[:2] + row[3:] for row in rows]
    if any(match.where is not None for match in matches):  # read across refs: where
        headers.insert(1, "REF")
        labels = ref_labels([match.where for match in matches])
        for label, row in zip(labels, rows, strict=True):
            row.insert(1, label)
    right = ("RELEVANCE", "CODE", "SCORE", "VS PARENT")
    print_table(headers, rows, right=right, shrink=("SUMMARY", "VS PARENT"))
    if "CODE" in headers:
        click.echo("CODE: code changes alike, 0-1   VS PARENT: cumulative over the parent's")
    else:
        click.echo("VS PARENT: cumulative score over the parent's ('-': no parent)")
    if "REF" in headers:
        click.echo(REF_LEGEND)


@click.command()
@click.pass_context
def mcp(ctx: click.Context) -> None:
    """Serve kexp's tools to agent clients over the Model Context Protocol (stdio).

    Tools: consult, similar, top, list, show, lessons, tree, record, remeasure,
    update, sync, each one library call answering what the command prints with --json. The
    store is --root, else $KEXP_ROOT, else found from the working directory. Needs
    the MCP SDK: pip install "kexp[mcp]". A client starts it; kexp skill install --mcp
    writes the client's configuration, naming this kexp's Python and the store by their
    absolute paths (the client's PATH may have no kexp, or another).

    Python: kexp.cli.mcp.serve(root).

    \b
    Example (.mcp.json of a project, for Claude Code):
      {"mcpServers": {"kexp": {"command": "/home/me/kernels/.venv/bin/python",
                               "args": ["-m", "kexp", "mcp", "--root", "/home/me/kernels"]}}}
    """
    try:
        # lazy: one command's library, loaded when that command runs
        from kexp.cli.mcp import serve
    except ImportError as exc:
        if exc.name is None or not exc.name.startswith(("mcp", "pydantic")):
            raise
        raise KexpError(
            f'kexp mcp needs the MCP SDK (missing: {exc.name}): pip install "kexp[mcp]"'
        ) from None
    serve(ctx.find_root().params.get("root"))


COMMANDS = (import_command, skill, context, similar, mcp)
