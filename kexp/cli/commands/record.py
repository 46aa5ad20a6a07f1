"""Recording commands: kexp add (an experiment from flags, a document and timings) and
kexp remeasure (another round of timings for one), each one library call."""

from __future__ import annotations

import dataclasses
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from kexp.cli.commands.common import (
    complete_ids,
    get_store,
    refs_options,
    report_written,
    shown_path,
)
from kexp.cli.commands.terminal import clean, echo_json
from kexp.core.errors import KexpError, ValidationError

if TYPE_CHECKING:
    from kexp.core.model import KernelExperiment
    from kexp.storage.store import Store


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
    report_written(exp, "recorded", as_json)
    # lazy: one command's library, loaded when that command runs
    from kexp.core.advice import REMEASURE
    from kexp.core.outcome import NOTHING_MEASURED
    from kexp.format.samples import describe_interval

    if exp.derived.shown_score is None:
        line = f"  {NOTHING_MEASURED}: {exp.outcome}"
    elif exp.derived.control:  # an A/A run: what it measures is the noise itself
        interval = describe_interval(exp.score, exp.score_ci or ())
        # (a biased one is warned of by the record itself, on every write path)
        click.echo(f"  score {interval}: an A/A run (control), the noise floor on this env")
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


class _Aliased(click.Option):
    """An option also spelt as the field it sets (``--change-summary`` for
    ``--summary``): the later spellings are taken, and left out of the help."""

    def get_help_record(self, ctx: click.Context) -> tuple[str, str] | None:
        spellings = self.opts
        self.opts = spellings[:1]
        try:
            return super().get_help_record(ctx)
        finally:
            self.opts = spellings


def _field_option(name: str, field: str, **attrs: Any) -> Any:
    """``--name`` setting ``field``, also taken as ``--<field>`` (``_`` as ``-``) when
    that is another spelling (hidden from the help)."""
    alias = f"--{field.replace('_', '-')}"
    spellings = [f"--{name}"] + ([alias] if alias != f"--{name}" else [])
    return click.option(*spellings, field, cls=_Aliased, **attrs)


def _text_option(name: str, field: str, what: str) -> list[Any]:
    return [
        _field_option(name, field, help=f"{what} (text)."),
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


class _Score(click.ParamType):  # type: ignore[type-arg]  # generic from click 8.2 on
    """A speedup ratio (``1.18``); a percentage (``18%``) is refused saying the ratio."""

    name = "float"

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> Any:
        if isinstance(value, float):
            return value
        try:
            return float(value)
        except ValueError:
            text = str(value).strip()
            if text.endswith("%"):
                try:
                    percent = float(text[:-1])
                except ValueError:
                    percent = None
                if percent is not None:
                    self.fail(
                        f"{value!r} is a percentage: give the speedup as a ratio, "
                        f"{1 + percent / 100:g} for {text} faster (1.0: no change)",
                        param,
                        ctx,
                    )
            self.fail(f"{value!r} is not a number: a speedup ratio such as 1.18", param, ctx)


#: A timings file option, '-' for stdin (one of them at most).
_TIMINGS_PATH = click.Path(exists=True, dir_okay=False, allow_dash=True, path_type=Path)


_UNIT_OPTION = click.option(
    "--unit",
    type=click.Choice(["ns", "us", "ms", "s"]),
    default=None,
    help="Unit of plain JSON or CSV timings (us when not given; do_bench gives ms; a CSV "
    "header such as time_ms and pytest-benchmark's seconds win).",
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
        _field_option("summary", "change_summary", help="One line ≤ 80: '<What> - <Result>'."),
        click.option("--score", type=_Score(), help="Speedup vs baseline (1.18 = 18% faster)."),
        click.option("--status", type=click.Choice(_STATUSES), help="Default: done."),
        click.option("--buggy/--not-buggy", "is_buggy", default=None, help="Crashed or wrong."),
        _field_option("operator", "operator_sig", help="Files/kernels changed."),
        _field_option("dtype", "dtype_sig", help="Data type, e.g. bf16."),
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
        _field_option("tag", "tags", multiple=True, help="Tag (repeatable, or comma-separated)."),
        click.option(
            "--combines",
            multiple=True,
            help="Id of an experiment this one merges (repeatable, or comma-separated).",
            shell_complete=complete_ids,
        ),
        click.option("--author", help="Who recorded it (default: git's author, as on a commit)."),
    ]
    for name, field, what in _ADD_TEXT_FIELDS:
        options.extend(_text_option(name, field, what))
    options.extend(
        [
            click.option(
                "--baseline",
                type=_TIMINGS_PATH,
                help="Baseline timings as the timing tool wrote them ('-': stdin; JSON "
                "{config: us or [samples]}, do_bench lists, pytest-benchmark, "
                "torch.utils.benchmark as JSON, KernelBench, nsys stats CSV, or CSV "
                "config,time): with --candidate, score, results and raw_result are computed.",
            ),
            click.option(
                "--candidate",
                type=_TIMINGS_PATH,
                help="Candidate timings, in the same form as --baseline.",
            ),
            click.option(
                "--table",
                "--timings",
                "table",
                type=_TIMINGS_PATH,
                help="One CSV with config,baseline,candidate columns (instead of two files; '-': "
                "stdin).",
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
                "--kernel",
                metavar="NAME",
                help="The kernel to score of an nsys kernel summary (and of ncu --csv "
                "profiling) holding several: its name as nsys or ncu prints it, its base "
                "name (softmax_fwd), or a part of it.",
            ),
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


def _with_options(exc: ValidationError, command: click.Command) -> ValidationError:
    """``exc`` with the hint of each problem of a field an option of ``command`` sets
    naming that option, unless it does (the field's name alone is no option of kexp
    add)."""
    options = {
        param.name: param.opts[0]
        for param in command.params
        if isinstance(param, click.Option) and param.name and not param.hidden
    }
    problems = [
        dataclasses.replace(p, hint=f"{p.hint} (kexp add {options[p.field]})".lstrip())
        if p.field in options and options[p.field] not in p.hint
        else p
        for p in exc.problems
    ]
    return ValidationError(str(exc.args[0]), problems)


def _piped(*given: Path | str | None) -> list[str]:
    """The options of ``given`` that read stdin ('-'); more than one is refused (stdin
    is one input: the second would read it empty)."""
    piped = [str(value) for value in given if value is not None and str(value) == "-"]
    if len(piped) > 1:
        raise click.UsageError("stdin ('-') is one input: give it to one option, files to the rest")
    return piped


def _require_summary(fields: dict[str, Any], *, document: bool) -> None:
    """Refuse, naming the option, a record without its one required text: the change
    summary (validation would name the field alone, and the path of a file never
    written)."""
    summary = fields.get("change_summary")
    if summary is None or (isinstance(summary, str) and not summary.strip()):
        where = " (or change_summary in the document)" if document else ""
        raise click.UsageError(
            f"change_summary is missing: give --summary TEXT{where}, one line of at most "
            "80 characters, '<What> - <Result>'"
        )


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
    unit: str | None,
    kernel: str | None,
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
    base_commit (git HEAD) and author (git's, as on a commit) are filled in; status defaults
    to done; the experiment is validated before anything is written. Prints the new
    id and path. With --pid, the
    operator, dtype and env not given are the parent's. An option is also taken
    spelt as the field it sets (--change-summary, --operator-sig, --dtype-sig,
    --tags, --detailed-description, --error-message, ...).

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
    profiling_file = params.get("profiling_info_file")  # named in what is said of it
    for option, field, _ in _ADD_TEXT_FIELDS:
        name = params.pop(f"{field}_file", None)
        value = params.pop(field, None)
        if name is not None:
            if value is not None:
                raise click.UsageError(f"give --{option} or --{option}-file, not both")
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
    piped = _piped(baseline, candidate, table, document)
    if document is not None:
        text = read_input_text(document, "the document (--file)", limit=limit)
        source = "<stdin>" if document == "-" else document
    elif not flags and not piped:  # stdin holds the timings, not a document
        others = (baseline, candidate, table, diff_from_git or None, detect_env or None)
        if sys.stdin.isatty() and all(given is None for given in others):
            raise click.UsageError(
                "nothing to record: give a YAML or JSON document on stdin or with --file, "
                "or the fields as options (kexp add --help)"
            )
        if not sys.stdin.isatty():
            text = read_input_text("-", "the document", limit=limit)
        if text is not None and not text.strip() and any(o is not None for o in others):
            text = None  # an agent's or CI's stdin: no terminal, and empty
    if text is not None:
        fields = intake.parse_document(text, source)
    fields.update(flags)
    _require_summary(fields, document=text is not None)
    if diff_from_git:
        if "code_change" in flags:
            raise click.UsageError("give --diff-file or --diff-from-git, not both")
        intake.take_git_diff(store, fields)  # and its base: the change is recorded
    if detect_env and not fields.get("env"):
        # lazy: one command's library, loaded when that command runs
        from kexp.measure.envinfo import detected_env

        fields["env"] = detected_env()
    try:
        exp = intake.record(
            store,
            fields,
            baseline=baseline,
            candidate=candidate,
            table=table,
            stat=stat,
            unit=unit,
            keep_samples=keep_samples,
            kernel=kernel,
            profiling_file=None if profiling_file == "-" else profiling_file,
            # --pid says a step; a document's pid is recorded as the document says it
            # (an export recorded back is the same file).
            parent_default="pid" in flags,
        )
    except ValidationError as exc:
        raise _with_options(exc, ctx.command) from None
    if baseline is not None or table is not None or as_json:
        _report_measured(exp, as_json, store)
    else:  # one line, as scripts read it
        report_written(exp, "recorded", as_json)


@click.command()
@click.argument("exp_id")
@click.option(
    "--baseline",
    type=_TIMINGS_PATH,
    help="The new round's baseline timings (as kexp add --baseline takes them).",
)
@click.option(
    "--candidate",
    type=_TIMINGS_PATH,
    help="The new round's candidate timings.",
)
@click.option(
    "--table",
    "--timings",
    "table",
    type=_TIMINGS_PATH,
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
    unit: str | None,
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

    Python: kexp.remeasure(store, id, baseline=..., candidate=..., reason=...).

    \b
    Example:
      kexp remeasure 6ace1417ea --baseline bench/base2.json --candidate bench/cand2.json
    """
    _piped(baseline, candidate, table)
    # lazy: one command's library, loaded when that command runs
    from kexp.measure.remeasure import remeasure as add_round

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
        f"{clean(shown_path(exp.path))}"
    )


COMMANDS = (add, remeasure)
