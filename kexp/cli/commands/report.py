"""The report command: a static HTML site of the store."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import click

from kexp.cli.commands.common import filter_options, filters_from, get_store, refs_options
from kexp.cli.commands.terminal import clean, echo_json, progress


@click.command()
@click.option(
    "-o",
    "--output",
    type=click.Path(file_okay=False, path_type=Path),
    help="Folder to write (replaced when the report is complete); default: .kexp/report "
    "of the store.",
)
@filter_options
@refs_options
@click.option("--json", "as_json", is_flag=True, help="Print what was written as JSON.")
@click.pass_context
def report(ctx: click.Context, /, output: Path | None, as_json: bool, **params: Any) -> None:
    """Write a static HTML report: open its index.html from disk, no server needed.

    The overview counts outcomes and shows the frontier (the best experiment of every
    operator × dtype × env) and the cells never improved; each operator has a page with
    its score over the iterations, its lineage, its speedup per configuration and its
    lessons; each experiment a page with its file, linked to its parent and children.
    Experiment text is escaped everywhere and the pages run no script of their own
    but the report's table sorting. A non-empty folder is replaced only if it holds a
    report kexp wrote.

    Python: kexp.report(output, **filters); kexp.output.html.build_report(store, output).

    \b
    Examples:
      kexp report                          # writes .kexp/report/index.html
      kexp report -o site --operator cache
    """
    # lazy: one command's library, loaded when that command runs
    from kexp.output.html import build_report

    store = get_store(ctx)
    with progress("writing the report"):
        result = build_report(store, output, **filters_from(params))
    if as_json:
        echo_json(result.to_dict())
        return
    click.echo(
        f"wrote a report of {result.experiments:,} experiment(s) on {result.operators:,} "
        f"operator(s): {result.pages:,} pages, {result.total_bytes / 1e6:.1f} MB",
        err=True,
    )
    click.echo(clean(str(result.index)))


COMMANDS = (report,)
