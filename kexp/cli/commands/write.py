"""Write commands: new, add, update, rm, fmt."""

from __future__ import annotations

import os
import shlex
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any, NoReturn

import click

from kexp.cli.commands.common import EXIT_PROBLEMS, complete_ids, get_store, refs_options
from kexp.cli.commands.terminal import clean, echo_json, one_line, progress
from kexp.core.errors import (
    ExperimentExistsError,
    KexpError,
    StoreNotFoundError,
    ValidationError,
)

if TYPE_CHECKING:
    from kexp.core.model import KernelExperiment
    from kexp.core.problems import Problem
    from kexp.storage.store import Removal, Store


def _relative(path: Path | None) -> str:
    # lazy: one command's library, loaded when that command runs
    from kexp.core.problems import display_path

    return "" if path is None else display_path(path)


def _report_written(exp: KernelExperiment, verb: str, as_json: bool) -> None:
    if as_json:
        # lazy: one command's library, loaded when that command runs
        from kexp.output.export import written_record

        echo_json(written_record(exp))
    else:
        click.echo(f"{verb} {exp.id} {clean(_relative(exp.path))}")


def _report_measured(exp: KernelExperiment, as_json: bool, store: Store) -> None:
    """What ``kexp add`` prints of the experiment it recorded: as any write, then its
    score (computed from timings: with its interval) and outcome, what to do when the
    interval holds 1 (a round more narrows it), and, for a step on a parent, the
    cumulative score its chain reaches (the campaign's progress); a step measured
    against the reference, made on a parent, names the parent's cumulative score its
    outcome is judged over, and its speedup over it."""
    if as_json:
        # lazy: one command's library, loaded when that command runs
        from kexp.output.export import measured_record

        echo_json(measured_record(exp))
        return
    _report_written(exp, "recorded", as_json)
    # lazy: one command's library, loaded when that command runs
    from kexp.core.advice import REMEASURE
    from kexp.core.outcome import NOTHING_MEASURED, control_bias
    from kexp.format.samples import describe_interval

    if exp.derived.shown_score is None:
        line = f"  {NOTHING_MEASURED}: {exp.outcome}"
    elif exp.derived.control:  # an A/A run: what it measures is the noise itself
        interval = describe_interval(exp.score, exp.score_ci or ())
        click.echo(f"  score {interval}: an A/A run (control), the noise floor on this env")
        bias = control_bias(exp)
        if bias:
            click.echo(f"  {bias}")
        return
    else:
        over = _over_parent(exp, store)
        line = f"  score {describe_interval(exp.score, exp.score_ci or ())}{over}: {exp.outcome}"
    low, high = exp.score_ci or (0.0, 0.0)
    if exp.outcome == "marginal" and low <= 1 <= high and low < high:
        line += f", within noise: {REMEASURE.say(id=exp.id)} pools another round"
    cumulative = exp.cumulative_score
    if cumulative is not None and exp.pid and cumulative != exp.score:
        line += f"; cumulative {cumulative:.4f} over the reference"  # the campaign's progress
    click.echo(line)


def _over_parent(exp: KernelExperiment, store: Store) -> str:
    """What the printed line of a step judged over its parent
    (:func:`kexp.core.outcome.judged_over_parent`) adds after its score: the parent's
    cumulative score and the step's speedup over it; "" for any other step, or a parent
    without a cumulative score (then the step is judged over the reference)."""
    # lazy: one command's library, loaded when that command runs
    from kexp.core.errors import KexpError
    from kexp.core.ids import SHOWN_LENGTH
    from kexp.core.outcome import judged_over_parent

    if not judged_over_parent(exp):
        return ""
    try:
        parent = store.get_experiment(exp.pid).cumulative_score
    except KexpError:
        return ""
    if not parent:
        return ""
    ratio = float(exp.score) / parent
    return f" over the reference; {ratio:.4f}x over parent {exp.pid[:SHOWN_LENGTH]} ({parent:.4f}x)"


# --- add -----------------------------------------------------------------------------


def _text_option(name: str, field: str, what: str) -> list[Any]:
    return [
        click.option(f"--{name}", field, help=f"{what} (text)."),
        click.option(
            f"--{name}-file",
            f"{field}_file",
            metavar="FILE",
            help=f"{what}, read from a file ('-': stdin).",
        ),
    ]


_ADD_TEXT_FIELDS = (
    ("description", "detailed_description", "## Detailed description"),
    ("raw-result", "raw_result", "## Raw result"),
    ("profiling", "profiling_info", "## Profiling info (ncu --csv: kept as a table)"),
    ("error", "error_message", "## Error message (required with --buggy)"),
    ("diff", "code_change", "## Code change: the diff"),
)
_ADD_FLAG_FIELDS = (
    "change_summary",
    "score",
    "status",
    "is_buggy",
    "operator_sig",
    "dtype_sig",
    "env",
    "pid",
    "measured_against",
    "base_commit",
    "author",
)


#: The statuses ``--status`` accepts: kexp.core.model.STATUSES (a test checks), spelled out so
#: that ``kexp --help`` does not import the model.
_STATUSES = ("new", "running", "done", "failed", "timeout")


_UNIT_OPTION = click.option(
    "--unit",
    type=click.Choice(["ns", "us", "ms", "s"]),
    default="us",
    show_default=True,
    help="Unit of plain JSON or CSV timings (do_bench gives ms; a CSV header such "
    "as time_ms and pytest-benchmark's seconds win).",
)


def _add_options(func: Any) -> Any:
    options: list[Any] = [
        click.option(
            "-f",
            "--file",
            "document",
            metavar="FILE",
            help="Read the fields from a YAML, JSON or Markdown experiment file "
            "('-': stdin; stdin is also read when no field option is given).",
        ),
        click.option("--summary", "change_summary", help="One line ≤ 80: '<What> - <Result>'."),
        click.option("--score", type=float, help="Speedup vs baseline (1.18 = 18% faster)."),
        click.option("--status", type=click.Choice(_STATUSES), help="Default: done."),
        click.option("--buggy/--not-buggy", "is_buggy", default=None, help="Crashed or wrong."),
        click.option("--operator", "operator_sig", help="Files/kernels changed."),
        click.option("--dtype", "dtype_sig", help="Data type, e.g. bf16."),
        click.option("--env", help="GPU, driver, versions (see --detect-env)."),
        click.option(
            "--detect-env", is_flag=True, help="Fill env from 'kexp env' when it is not given."
        ),
        click.option(
            "--pid", help="Parent experiment id (or unique prefix).", shell_complete=complete_ids
        ),
        click.option(
            "--measured-against",
            type=click.Choice(["parent", "reference"]),
            help="What the score is a speedup over: the parent's code (the default with "
            "--pid) or the operator's original code.",
        ),
        click.option("--base-commit", help="Commit the change was made on (default: HEAD)."),
        click.option("--tag", "tags", multiple=True, help="Tag (repeatable, or comma-separated)."),
        click.option(
            "--combines",
            multiple=True,
            help="Id of an experiment this one merges (repeatable, or comma-separated).",
            shell_complete=complete_ids,
        ),
        click.option("--author", help="Who recorded it (default: git user.name)."),
    ]
    for name, field, what in _ADD_TEXT_FIELDS:
        options.extend(_text_option(name, field, what))
    options.extend(
        [
            click.option(
                "--baseline",
                type=click.Path(exists=True, dir_okay=False, path_type=Path),
                help="Baseline timings as the timing tool wrote them (JSON {config: us or "
                "[samples]}, do_bench lists, pytest-benchmark, torch.utils.benchmark as JSON, "
                "KernelBench, nsys stats CSV, or CSV config,time): with --candidate, score, "
                "results and raw_result are computed.",
            ),
            click.option(
                "--candidate",
                type=click.Path(exists=True, dir_okay=False, path_type=Path),
                help="Candidate timings, in the same form as --baseline.",
            ),
            click.option(
                "--table",
                "--timings",
                "table",
                type=click.Path(exists=True, dir_okay=False, path_type=Path),
                help="One CSV with config,baseline,candidate columns (instead of two files).",
            ),
            click.option(
                "--stat",
                type=click.Choice(["median", "mean", "min", "max"]),
                default="median",
                show_default=True,
                help="How a list of samples per configuration is reduced (median: samples "
                "are kept, with a 95% interval of the score; others: one number each).",
            ),
            _UNIT_OPTION,
            click.option(
                "--no-samples",
                "keep_samples",
                flag_value=False,
                default=True,
                help="Keep medians, counts and the interval, not the raw samples (a later "
                "kexp remeasure cannot pool with them).",
            ),
            click.option(
                "--protocol",
                "protocol",
                multiple=True,
                metavar="KEY=VALUE",
                help="How it was measured (repeatable): timer=cuda_events|hip_events|"
                "do_bench|torch_benchmark|wall_clock|other, warmup=N, repetitions=N, "
                "l2_flushed=true, clocks_locked=true, synchronized=true, device=gpu|cpu.",
            ),
            click.option(
                "--diff-from-git",
                is_flag=True,
                help="Code change: 'git diff' of the working tree against base_commit.",
            ),
            click.option("--json", "as_json", is_flag=True, help="Print id and path as JSON."),
        ]
    )
    for option in reversed(options):
        func = option(func)
    return func


@click.command()
@_add_options
@refs_options
@click.pass_context
def add(
    ctx: click.Context,
    /,
    document: str | None,
    detect_env: bool,
    tags: tuple[str, ...],
    combines: tuple[str, ...],
    baseline: Path | None,
    candidate: Path | None,
    table: Path | None,
    stat: str,
    unit: str,
    keep_samples: bool,
    protocol: tuple[str, ...],
    diff_from_git: bool,
    as_json: bool,
    **params: Any,
) -> None:
    """Record an experiment without an editor (for agents and scripts).

    The fields come from a YAML or JSON document (or an experiment file) on stdin or
    --file, and/or from options, which win over the document. With --baseline and
    --candidate timings (or --table) the score, results and raw_result are computed
    (repeated timings per configuration: medians, the score's 95% interval and the raw
    samples too); otherwise give --score (0 when nothing could be measured). Missing id, created_at,
    base_commit (git HEAD) and author (git user.name) are filled in; status defaults
    to done; the experiment is validated before anything is written. Prints the new
    id and path. With --pid, the
    operator, dtype and env not given are the parent's.

    With --refs PATTERN or --all-refs, a code change recorded on one of those refs
    (another agent's branch) is warned about too.

    Python: kexp.measure.intake.record(store, fields, baseline=..., candidate=...), with
    fields from kexp.measure.intake.parse_document(text).

    \b
    Examples:
      kexp add --summary "Unrolled inner loop by 4 - +1.9%" \\
          --baseline bench/base.json --candidate bench/cand.json \\
          --operator "csrc/cache.cu: reshape_and_cache" --dtype bf16 --env "MI300X" \\
          --description-file notes.md --diff-from-git --json
      kexp add --summary "Unroll 8 - crash" --score 0 --status failed --buggy \\
          --error-file err.txt --operator "csrc/cache.cu: reshape_and_cache"
      kexp add < experiment.yaml
    """
    # lazy: one command's library, loaded when that command runs
    from kexp.core.inputs import read_input_text
    from kexp.measure import intake
    from kexp.measure.corrections import parse_value

    store = get_store(ctx)
    flags: dict[str, Any] = {
        name: params.pop(name) for name in _ADD_FLAG_FIELDS if params.get(name) is not None
    }
    limit = store.settings.max_input_bytes
    for option, field, _ in _ADD_TEXT_FIELDS:
        name = params.pop(f"{field}_file", None)
        value = params.pop(field, None)
        if name is not None:
            if value is not None:
                raise click.UsageError(f"give {field} as text or as a file, not both")
            # A file's last newline is not content.
            value = read_input_text(name, f"--{option}-file", limit=limit).rstrip("\n")
            if field == "code_change" and not value.strip():
                click.echo(
                    f"kexp: warning: the diff ({name}) is empty: no code change recorded",
                    err=True,
                )
        if value is not None:
            flags[field] = value
    for field, given in (("tags", tags), ("combines", combines)):
        if given:  # each option repeatable, or comma-separated as in --set FIELD=A,B
            flags[field] = [item for raw in given for item in parse_value(field, raw)]
    if protocol:
        # lazy: one command's library, loaded when that command runs
        from kexp.measure.record import parse_protocol

        flags["protocol"] = parse_protocol(protocol)
    fields: dict[str, Any] = {}
    text: str | None = None
    source = "<stdin>"
    if document is not None:
        text = read_input_text(document, "the document (--file)", limit=limit)
        source = "<stdin>" if document == "-" else document
    elif not flags:
        if sys.stdin.isatty():
            raise click.UsageError(
                "nothing to record: give a YAML or JSON document on stdin or with --file, "
                "or the fields as options (kexp add --help)"
            )
        text = read_input_text("-", "the document", limit=limit)
    if text is not None:
        fields = intake.parse_document(text, source)
    fields.update(flags)
    if diff_from_git:
        if "code_change" in flags:
            raise click.UsageError("give --diff-file or --diff-from-git, not both")
        intake.take_git_diff(store, fields)  # and its base: the change is recorded
    if detect_env and not fields.get("env"):
        # lazy: one command's library, loaded when that command runs
        from kexp.measure.envinfo import detected_env

        fields["env"] = detected_env()
    exp = intake.record(
        store,
        fields,
        baseline=baseline,
        candidate=candidate,
        table=table,
        stat=stat,
        unit=unit,
        keep_samples=keep_samples,
        # --pid says a step; a document's pid is recorded as the document says it (an
        # export recorded back is the same file).
        parent_default="pid" in flags,
    )
    if baseline is not None or table is not None or as_json:
        _report_measured(exp, as_json, store)
    else:  # one line, as scripts read it
        _report_written(exp, "recorded", as_json)


# --- remeasure -----------------------------------------------------------------------


@click.command()
@click.argument("exp_id")
@click.option(
    "--baseline",
    type=click.Path(exists=True, dir_okay=False, path_type=Path),
    help="The new round's baseline timings (as kexp add --baseline takes them).",
)
@click.option(
    "--candidate",
    type=click.Path(exists=True, dir_okay=False, path_type=Path),
    help="The new round's candidate timings.",
)
@click.option(
    "--table",
    "--timings",
    "table",
    type=click.Path(exists=True, dir_okay=False, path_type=Path),
    help="One CSV with config,baseline,candidate columns (instead of two files).",
)
@_UNIT_OPTION
@click.option("--reason", help="Why (default: 'remeasured: round N pooled with the earlier ones').")
@click.option(
    "--replace-round",
    type=click.IntRange(min=1),
    metavar="N",
    help="Replace round N (files swapped, taken under load) instead of pooling; needs "
    "--reason and the file committed (the round stays in git history).",
)
@click.option("--json", "as_json", is_flag=True, help="Print id, path, score and interval as JSON.")
@click.pass_context
def remeasure(
    ctx: click.Context,
    exp_id: str,
    baseline: Path | None,
    candidate: Path | None,
    table: Path | None,
    unit: str,
    reason: str | None,
    replace_round: int | None,
    as_json: bool,
) -> None:
    """Add a round of measurement to an experiment (no best-of-N).

    The new timings, of the same configurations measured the same way, are pooled with
    every earlier round (the experiment's ## Samples, or its single numbers); score,
    score_ci and results are recomputed, and the correction is recorded as kexp update
    --reason records one (old → new, and why). A round that was wrong (baseline and
    candidate swapped, taken under load) is replaced with --replace-round N --reason
    TEXT: the file must be committed as it is, so that the round stays in git history.

    Python: kexp.measure.record.remeasure(store, id, baseline=..., candidate=..., reason=...).

    \b
    Example:
      kexp remeasure 6ace1417ea --baseline bench/base2.json --candidate bench/cand2.json
    """
    # lazy: one command's library, loaded when that command runs
    from kexp.measure.record import remeasure as add_round

    store = get_store(ctx)
    exp = add_round(
        store,
        exp_id,
        baseline=baseline,
        candidate=candidate,
        table=table,
        unit=unit,
        reason=reason,
        replace_round=replace_round,
    )
    if as_json:
        # lazy: one command's library, loaded when that command runs
        from kexp.output.export import measured_record

        echo_json(measured_record(exp))
        return
    interval = f" [{exp.score_ci[0]:.4f}, {exp.score_ci[1]:.4f}]" if exp.score_ci else ""
    click.echo(
        f"remeasured {exp.id}: score {exp.score:.4f}{interval} ({exp.outcome}) "
        f"{clean(_relative(exp.path))}"
    )


# --- new -----------------------------------------------------------------------------


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
            _report_written(created, "recorded", as_json)
            return
        click.echo("kexp: the experiment was not recorded:", err=True)
        for problem in problems:
            click.echo(clean(problem.format()), err=True)
        if not _confirm("Edit it again?"):
            click.echo(
                f"kexp: error: nothing was recorded; your text is kept in "
                f"{clean(_relative(draft))} (continue with: kexp new --from {_relative(draft)})",
                err=True,
            )
            ctx.exit(EXIT_PROBLEMS)


def _edit(draft: Path) -> None:
    try:
        click.edit(filename=str(draft), extension=".md")
    except click.ClickException as exc:
        raise KexpError(
            f"the editor failed ({exc.format_message()}); set $VISUAL or $EDITOR; your text "
            f"is kept in {_relative(draft)} (continue with: kexp new --from {_relative(draft)})"
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


# --- update, rm ----------------------------------------------------------------------


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
        question = f"Delete {removal.id} {summary} ({clean(_relative(removal.path))})?"
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
    click.echo(f"deleted {removal.id} {clean(_relative(removal.path))}")


def _refuse_delete(ctx: click.Context, why: str) -> NoReturn:
    """A refused delete: one line naming --force, exit 1 (as a refused write)."""
    click.echo(
        f"kexp: error: {one_line(why)}; nothing deleted (re-parent them first, or delete "
        "it anyway with kexp rm --force)",
        err=True,
    )
    ctx.exit(EXIT_PROBLEMS)


@click.command(name="re-id")
@click.argument("path", type=click.Path(path_type=Path))
@click.pass_context
def re_id(ctx: click.Context, path: Path) -> None:
    """Give an experiment file a fresh id, and the file name that goes with it.

    For two files holding one id (kexp validate: duplicate-id): a file copied to start
    a new experiment, or two branches that made the same id. Only the file's id line
    changes; it moves to experiments/YYYY/MM/xx/<new id>-<slug>.md, by the new id's
    time, as kexp add names a file. Refused (exit 2, nothing changed) for a path that is
    not an experiment file of the store, and for an id no other file holds that other
    experiments name as their parent or combine (their lineage would break).

    Python: kexp.Store.re_id(path).

    \b
    Example:
      kexp re-id experiments/2026/10/26/6ad1e3ef8a949f26-*.md
    """
    done = get_store(ctx).re_id(path)
    click.echo(
        f"re-id {done.old_id} -> {done.id}: {clean(_relative(done.old_path))} -> "
        f"{clean(_relative(done.path))}"
    )


# --- fmt -----------------------------------------------------------------------------


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
        shown = clean(_relative(result.path))
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
            renamed = clean(_relative(result.path.with_name(result.canonical_name)))
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


COMMANDS = (new, add, remeasure, update, rm, re_id, fmt)
