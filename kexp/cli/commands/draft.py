"""The drafting command: kexp new, an experiment written in the editor from a prefilled
template, kept as a draft under .kexp/drafts/ until it is recorded."""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import TYPE_CHECKING

import click

from kexp.cli.commands.common import (
    EXIT_PROBLEMS,
    complete_ids,
    get_store,
    report_written,
    shown_path,
)
from kexp.cli.commands.terminal import clean
from kexp.core.errors import ExperimentExistsError, KexpError, ValidationError

if TYPE_CHECKING:
    from kexp.core.model import KernelExperiment
    from kexp.core.problems import Problem
    from kexp.storage.store import Store


@click.command()
@click.option(
    "--pid",
    help="Parent experiment: prefills pid, operator, dtype and env.",
    shell_complete=complete_ids,
)
@click.option(
    "--from",
    "start_from",
    metavar="FILE",
    help="Start from this file (e.g. a draft kept by an earlier kexp new) instead of the template.",
)
@click.option(
    "--diff-from-git",
    is_flag=True,
    help="Prefill the code change with 'git diff' against HEAD.",
)
@click.option("--json", "as_json", is_flag=True, help="Print id and path as JSON.")
@click.pass_context
def new(
    ctx: click.Context,
    pid: str | None,
    start_from: str | None,
    diff_from_git: bool,
    as_json: bool,
) -> None:
    """Write a new experiment in $VISUAL / $EDITOR, from a prefilled template.

    The template holds a new id, created_at, base_commit (git HEAD), env (detected, see
    kexp env), every section heading, and guidance as comments that are removed. The
    saved file is validated before it enters the store: on a problem kexp shows it and
    offers to edit again; saving an empty file aborts. Nothing you wrote is lost: an
    unrecorded draft is kept under .kexp/drafts/.

    Python: kexp.measure.template.draft_text(kexp.measure.template.prefill(store)), then
    kexp.Store.create_experiment.

    \b
    Examples:
      kexp new
      kexp new --pid 6aca6c49dc --diff-from-git
    """
    # lazy: secrets, kexp, kexp.core.inputs only when this runs (start-up)
    import secrets

    from kexp.core.inputs import read_input_text
    from kexp.measure import intake, template

    store = get_store(ctx)
    if not (os.environ.get("VISUAL") or os.environ.get("EDITOR") or sys.stdin.isatty()):
        raise KexpError(
            "no editor: set $VISUAL or $EDITOR (or run kexp new in a terminal); "
            "to record without an editor use kexp add"
        )
    if start_from is not None:
        text = read_input_text(start_from, "--from", limit=store.settings.max_input_bytes)
    else:
        if pid:  # the new experiment's parent: in the working tree, else said where it is
            store.path_of(pid, writing=True)
        parent = store.get_experiment(pid) if pid else None
        prefilled = template.prefill(store, parent)
        if diff_from_git:
            base, prefilled.code_change = intake.diff_against(store, prefilled.base_commit or None)
            prefilled.base_commit = base
        text = template.draft_text(prefilled)
    drafts = store.cache_dir / "drafts"
    drafts.mkdir(parents=True, exist_ok=True)
    draft = drafts / f"new-{secrets.token_hex(4)}.md"
    draft.write_text(text, encoding="utf-8")
    while True:
        _edit(draft)
        text = read_input_text(draft, "the draft", limit=store.settings.max_input_bytes)
        if template.is_empty_draft(text):
            draft.unlink()
            click.echo("kexp: aborted: the file was saved empty; nothing was recorded", err=True)
            ctx.exit(EXIT_PROBLEMS)
        created, problems = _record_draft(store, text, draft)
        if created is not None:
            draft.unlink()
            if start_from is not None and Path(start_from).resolve().parent == drafts.resolve():
                Path(start_from).unlink(missing_ok=True)  # the draft resumed is recorded
            report_written(created, "recorded", as_json)
            return
        click.echo("kexp: the experiment was not recorded:", err=True)
        for problem in problems:
            click.echo(clean(problem.format()), err=True)
        if not _confirm("Edit it again?"):
            click.echo(
                f"kexp: error: nothing was recorded; your text is kept in "
                f"{clean(shown_path(draft))} (continue with: kexp new --from {shown_path(draft)})",
                err=True,
            )
            ctx.exit(EXIT_PROBLEMS)


def _edit(draft: Path) -> None:
    try:
        click.edit(filename=str(draft), extension=".md")
    except click.ClickException as exc:
        raise KexpError(
            f"the editor failed ({exc.format_message()}); set $VISUAL or $EDITOR; your text "
            f"is kept in {shown_path(draft)} (continue with: kexp new --from {shown_path(draft)})"
        ) from None


def _confirm(question: str) -> bool:
    try:
        return click.confirm(question, default=True, err=True)
    except click.Abort:
        return False


def _record_draft(
    store: Store, text: str, draft: Path
) -> tuple[KernelExperiment | None, list[Problem]]:
    # lazy: one command's library, loaded when that command runs
    from kexp.core.problems import Problem, has_errors
    from kexp.measure import template

    exp, problems, doc = template.read_draft(text, draft, store.settings)
    if exp is None or doc is None or has_errors(problems):
        return None, problems
    try:
        refs = store.resolve_references({"pid": exp.pid, "combines": exp.combines})
        exp.pid, exp.combines = refs["pid"], refs["combines"]
        return store.create_experiment(exp), []
    except ValidationError as exc:
        return None, template.relocate(exc.problems, doc)
    except ExperimentExistsError:
        shown = exp.id[: store.id_length_of(exp.id)]
        message = (
            f"experiment {exp.id} is recorded already (kexp show {shown}); to record "
            "another from this text, delete its id: line (a new one is made)"
        )
        return None, [Problem(str(draft), 1, 1, "error", "not-recorded", "id", message, "")]
    except KexpError as exc:
        return None, [Problem(str(draft), 1, 1, "error", "not-recorded", "", str(exc), "")]


COMMANDS = (new,)
