"""Read commands: top, list, show, tree, log, export (lessons and stats:
:mod:`kexp.cli.commands.summaries`)."""

from __future__ import annotations

import io
import os
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from kexp.cli.commands.common import (
    cell,
    complete_ids,
    drift_legend,
    emit_experiments,
    field_list,
    filter_options,
    filters_from,
    get_store,
    needs_bodies,
    read_options,
    refs_options,
    rev_option,
    suspect_reasons,
    where_found,
)
from kexp.cli.commands.terminal import (
    OUTCOME_STYLES,
    clean,
    echo_json,
    echo_raw,
    one_line,
    paged_output,
    progress,
    stdout_is_terminal,
    styler,
    terminal_width,
    truncate,
    wrap_under,
)
from kexp.cli.commands.treeview import print_trees, ref_keys
from kexp.format.outputs import record_format_names

if TYPE_CHECKING:
    from kexp.core.model import KernelExperiment
    from kexp.storage.store import Store


def _sorted(
    experiments: list[KernelExperiment], sort: str | None, reverse: bool
) -> list[KernelExperiment]:
    """``experiments`` by ``sort`` (checked by :func:`_check_sort`), or reversed."""
    if not sort:
        return list(reversed(experiments)) if reverse else experiments
    from kexp.output.export import sort_experiments

    return sort_experiments(experiments, sort, descending=reverse)


_SORT_HELP = "Sort by this field (a leading '-' sorts descending)."


def _check_sort(ctx: click.Context, param: click.Parameter, value: str | None) -> str | None:
    """``--sort``: a record field, else a usage error naming the fields."""
    if value:
        from kexp.core.errors import KexpError
        from kexp.output.export import check_fields

        try:
            check_fields([value.removeprefix("-")])
        except KexpError as exc:
            raise click.BadParameter(str(exc)) from None
    return value


@click.command()
@click.option(
    "-n",
    "--limit",
    type=int,
    help="How many experiments (default: the setting top_default, 20 unless kexp.toml "
    "says otherwise).",
)
@click.option(
    "--include-buggy",
    is_flag=True,
    help="Keep buggy experiments and failed runs (crashed or timed out: nothing measured).",
)
@click.option("--include-pending", is_flag=True, help="Keep new/running experiments.")
@filter_options
@refs_options
@click.option(
    "--by",
    type=click.Choice(["cumulative", "score", "low"]),
    default="cumulative",
    show_default=True,
    help="Rank by the cumulative score (the speedup over the operator's reference: the "
    "product of the steps along the lineage), by the score itself (one step when "
    "measured against the parent), or by the low end of the cumulative score's 95% "
    "interval (a robust 'at least this fast').",
)
@click.option(
    "--sort", callback=_check_sort, help=_SORT_HELP + " Default: the ranking, best first."
)
@click.option("--reverse", is_flag=True, help="Reverse the order.")
@read_options
@click.pass_context
@paged_output
def top(
    ctx: click.Context,
    /,
    limit: int | None,
    include_buggy: bool,
    include_pending: bool,
    by: str,
    sort: str | None,
    reverse: bool,
    as_json: bool,
    output_format: str,
    fields: str | None,
    brief: bool,
    front_matter: bool,
    full: bool,
    **params: Any,
) -> None:
    """The best experiments by cumulative score, the speedup over the reference.

    The steps that improved come first (the first is the best tip), then the others
    measured (within noise, regressions), each by cumulative score. Buggy and pending
    experiments, failed runs (crashed or timed out, nothing measured)
    and controls (tag control) are left out. CUMULATIVE
    is the product of the steps along the lineage back to the nearest score measured
    against the reference ('-' when an ancestor is buggy, pending or missing: kexp show
    says why); SCORE is the experiment's own measurement (over its parent when
    measured_against is parent). JSON and JSON Lines leave out empty
    optional fields and path (--full keeps them, --fields picks keys); --brief prints
    what an agent needs to decide, --front-matter every front-matter field.

    Python: kexp.Store.top_experiments(limit, by="cumulative", **filters).

    \b
    Examples:
      kexp top --operator cache --dtype bf16 -n 5
      kexp top --by score                  # ranked by the score of each step
      kexp top --by low                    # ranked by the interval's low end
      kexp top --json --brief              # the best 20, for an agent
    """
    store = get_store(ctx)
    filters = filters_from(params)
    experiments = store.top_experiments(
        limit,
        include_buggy=include_buggy,
        include_pending=include_pending,
        by=by,
        brief=not needs_bodies(output_format, as_json, fields, front_matter),
        **filters,
    )
    experiments = _sorted(experiments, sort, reverse)
    emit_experiments(
        experiments,
        output_format=output_format,
        as_json=as_json,
        fields=fields,
        brief=brief,
        ranked=not sort and not reverse,
        front_matter=front_matter,
        full=full,
        where=where_found(store),
        id_length=store.shown_id_length(exp.id for exp in experiments),
        env=filters.get("env"),
    )


@click.command(name="list")
@filter_options
@refs_options
@click.option("--sort", callback=_check_sort, help=_SORT_HELP + " Default: oldest first.")
@click.option("--reverse", is_flag=True, help="Reverse the order.")
@click.option(
    "-n",
    "--limit",
    type=int,
    help="At most this many: the newest, or with --sort the first in that order.",
)
@read_options
@click.pass_context
@paged_output
def list_command(
    ctx: click.Context,
    /,
    sort: str | None,
    reverse: bool,
    limit: int | None,
    as_json: bool,
    output_format: str,
    fields: str | None,
    brief: bool,
    front_matter: bool,
    full: bool,
    **params: Any,
) -> None:
    """Every experiment matching the filters, oldest first.

    Python: kexp.output.export.listed_experiments(store, sort=..., limit=..., **filters)
    (kexp.Store.list_experiments(**filters): every match, oldest first).

    \b
    Examples:
      kexp list --outcome regression --outcome buggy --operator cache
      kexp list --sort -score -n 10 --fields id,score,change_summary
      kexp list --format csv > experiments.csv
    """
    from kexp.output.export import listed_experiments

    store = get_store(ctx)
    filters = filters_from(params)
    experiments = listed_experiments(
        store,
        sort=sort,
        reverse=reverse,
        limit=limit,
        brief=not needs_bodies(output_format, as_json, fields, front_matter),
        **filters,
    )
    emit_experiments(
        experiments,
        output_format=output_format,
        as_json=as_json,
        fields=fields,
        brief=brief,
        ranked=False,
        front_matter=front_matter,
        full=full,
        where=where_found(store),
        id_length=store.shown_id_length(exp.id for exp in experiments),
        env=filters.get("env"),
    )


@click.command()
@click.argument("exp_id", shell_complete=complete_ids)
@rev_option
@refs_options
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
@click.option("--field", "one_field", help="Print one field's raw value (for scripts).")
@click.option("--fields", help="Only these fields (comma-separated).")
@click.option(
    "--brief",
    is_flag=True,
    help="Front-matter only, no body text; with --json what an agent needs to decide.",
)
@click.option("--front-matter", is_flag=True, help="With --json: the front-matter fields only.")
@click.option("--full", is_flag=True, help="With --json: keep empty fields and path.")
@click.pass_context
@paged_output
def show(
    ctx: click.Context,
    exp_id: str,
    rev: str | None,
    refs: tuple[str, ...],
    all_refs: bool,
    as_json: bool,
    one_field: str | None,
    fields: str | None,
    brief: bool,
    front_matter: bool,
    full: bool,
) -> None:
    """One experiment, by id or unique id prefix.

    Ids begin with their creation time, so ids made within hours share their first 4
    characters: give the id as listings print it (10 characters, more where two ids
    share them).

    Python: kexp.Store.get_experiment(exp_id).

    \b
    Examples:
      kexp show 6aca6c49dc
      kexp show 6aca6c49dc --field code_change > change.diff
      kexp show 6aca6c49dc --json --fields id,score,outcome
    """
    store = get_store(ctx)
    exp = store.get_experiment(exp_id)  # one on a branch alone: its error says which
    where = where_found(store)
    # The id the text prints (in its advice to read the raw timings), unique in the store.
    id_length = store.id_length_of(exp.id) if exp.samples and not brief else 0
    if not (one_field or as_json or fields):
        # Read across refs: the newest version, with where it was found and where the
        # older ones are.
        _print_experiment(exp, brief, where(exp) if where is not None else None, id_length)
        return
    import json

    from kexp.output.export import to_record
    from kexp.output.replies import experiment_reply

    if one_field:
        chosen = field_list(one_field)
        assert chosen is not None
        if len(chosen) != 1:
            raise click.BadParameter("give one field", param_hint="--field")
        value = to_record(exp, chosen)[chosen[0]]
        if isinstance(value, str):
            echo_raw(value)
        else:
            echo_raw(json.dumps(value, ensure_ascii=False))
        return
    chosen = field_list(fields)
    if as_json:
        echo_json(experiment_reply(exp, chosen, brief=brief, front_matter=front_matter, full=full))
        return
    if chosen:
        record = to_record(exp, chosen)
        for name in chosen:
            value = record[name]
            if isinstance(value, str) and "\n" in value:
                click.echo(f"{name}:")
                click.echo(clean(value.rstrip("\n")))
            else:
                click.echo(f"{name}: {cell(exp, name)}")
        return
    _print_experiment(exp, brief, id_length=id_length)


#: What ``kexp show`` says of a raw result whose verdict a control's drift overrules.
RAW_VERDICT = "the raw result's verdict is its interval's alone, before the drift"


def _print_experiment(
    exp: KernelExperiment, brief: bool, sighting: Any = None, id_length: int = 0
) -> None:
    """One experiment as text; ``id_length``: how many characters of its id its advice
    prints (unique in the store: :meth:`kexp.Store.id_length_of`; 0: all of them)."""
    from kexp.core.model import SECTION_HEADINGS
    from kexp.core.outcome import NOTHING_MEASURED
    from kexp.format.samples import describe_interval

    style = styler()
    width = terminal_width()  # show's own lines fit it; the Markdown body is the user's
    for line in wrap_under(f"{exp.id}  ", one_line(exp.change_summary), width):
        click.echo(style(line, bold=True))
    score = describe_interval(exp.score, exp.score_ci or ())
    if exp.score_ci:
        score += " (95% interval)"
    outcome = exp.outcome  # styled once the line is composed (clean() would escape it)
    against = exp.measured_against or ("parent" if exp.pid else "reference")
    measured = f"{score}  ({outcome}; over the {against})"
    if exp.derived.shown_score is None:  # no speedup an agent could take for a result
        measured = f"-  ({outcome}: {NOTHING_MEASURED})"
    if exp.cumulative_score is None:
        reached = f"-  ({exp.cumulative_reason})"
    else:
        reached = describe_interval(exp.cumulative_score, exp.cumulative_ci or ())
        reached += "  (cumulative: the speedup over the reference, the operator's original code)"
    rows = [("score", measured)]
    if exp.derived.drift:  # why a change is within noise (its raw result's verdict is not)
        rows.append(("why", f"{outcome}: {exp.derived.drift} ({RAW_VERDICT})"))
    rows += [
        ("overall", reached),
        ("status", exp.status + ("  [buggy]" if exp.is_buggy else "")),
        ("operator", exp.operator_sig),
        ("dtype", exp.dtype_sig),
        ("env", exp.env),
        ("base", exp.base_commit),
        ("created", exp.created_at),
        ("parent", exp.pid or "-"),
    ]
    if exp.combines:
        rows.append(("combines", ", ".join(exp.combines)))
    if exp.tags:
        rows.append(("tags", ", ".join(exp.tags)))
    if exp.author:
        rows.append(("author", exp.author))
    for key, value in exp.extra_fields.items():
        if not isinstance(value, str):
            import json  # here: most experiments have no other fields

            value = json.dumps(value)
        rows.append((str(key), value))
    if exp.protocol:
        from kexp.format.samples import describe_protocol

        rows.append(("protocol", describe_protocol(exp.protocol)))
    for config in exp.results:
        described = None
        if "baseline_n" in config:
            from kexp.format.samples import describe_result

            described = describe_result(config)
        rows.append(("result", described or ", ".join(f"{k}={v}" for k, v in config.items())))
    reasons = suspect_reasons(exp)
    if reasons:
        rows.append(("suspect", f"verify correctness: {'; '.join(reasons)}"))
    if exp.path:
        rows.append(("file", os.path.relpath(exp.path)))
    if sighting is not None:
        rows.append(("ref", ", ".join(sighting.refs)))
        if sighting.note:
            rows.append(("note", sighting.note))
    styled = style(outcome, **OUTCOME_STYLES.get(outcome, {}))
    for name, value in rows:
        lines = wrap_under(f"  {one_line(name):<9} ", one_line(value), width, path=name == "file")
        for line in lines:
            if name == "score" and f"({outcome}" in line:
                line = line.replace(f"({outcome}", f"({styled}", 1)
            click.echo(line)
    if brief:
        return
    if exp.preamble:
        click.echo("")
        click.echo(clean(exp.preamble.rstrip("\n")))
    sections = [(SECTION_HEADINGS[f], getattr(exp, f)) for f in SECTION_HEADINGS]
    if exp.samples:
        from kexp.format.samples import describe_samples

        # The raw timings are for tools (kexp show ID --field samples), not for reading.
        command = f"kexp show {exp.id[: id_length or None]} --field samples"
        lines = wrap_under("", f"{describe_samples(exp.samples)};", width)
        if width is None or len(lines[-1]) + 1 + len(command) <= width:
            lines[-1] += f" {command}"
        else:  # the command on a line of its own, whole
            lines.append(command)
        summary = "\n".join(lines)
        sections = [(h, summary if h == SECTION_HEADINGS["samples"] else t) for h, t in sections]
    for heading, text in [*sections, *exp.extra_sections]:
        if text:
            click.echo("")
            click.echo(style(f"## {one_line(heading)}", bold=True))
            click.echo(clean(text.rstrip("\n")))


# --- tree ----------------------------------------------------------------------------


@click.command()
@click.argument("exp_id", required=False, shell_complete=complete_ids)
@filter_options
@refs_options
@click.option("--json", "as_json", is_flag=True, help="Print the trees as JSON.")
@click.pass_context
@paged_output
def tree(ctx: click.Context, /, exp_id: str | None, as_json: bool, **params: Any) -> None:
    """The lineage (experiments linked by pid) as a tree; a chain's steps in one column.

    A branch indents; an only child (the next step of a chain) stays under its parent,
    in its column.

    With ID: that experiment's ancestors and every descendant. Otherwise every tree of
    the experiments matching the filters (an experiment whose parent does not match
    starts a tree). Each line: id, cumulative score (the speedup over the operator's
    reference), score (the step, when measured against the parent), Δ of the
    cumulative score vs the parent's, outcome, summary. '*' marks the path from the
    root to the best tip of the tree (the best cumulative score); 'dead end' marks an
    experiment others built on that no descendant beats (a step within noise beats
    nothing). Below 92 columns the summary is given the room: one space between the
    columns, scores to 3 decimals, Δ to 1 (whole percents from ±10%).

    Python: kexp.tree(ID), kexp.tree(**filters).

    \b
    Examples:
      kexp tree 6ac8bc7624
      kexp tree --operator reshape_and_cache
    """
    from kexp.storage import lineage

    store = get_store(ctx)
    filters = filters_from(params)
    if exp_id is not None:
        if filters:
            raise click.UsageError("give an ID or filters, not both")
        forest = [lineage.lineage_of(store, exp_id)]
        focus = forest[0].focus
    else:
        forest = lineage.lineage_forest(store, **filters)
        focus = None
    if as_json:
        from kexp.output.replies import tree_reply

        echo_json(tree_reply(forest))
        return
    if not forest:
        click.echo("(no experiments match)", err=True)
        return
    width = terminal_width()
    style = styler()
    best = forest[0].best_tip
    shown = [node.experiment.id for root in forest for node in root.walk()]
    id_length = store.shown_id_length([*shown, *([best.id] if best is not None else [])])
    refs = ref_keys(forest, where_found(store))
    print_trees(forest, width, style, focus, id_length, refs)
    if (
        focus is not None
        and best is not None
        and best.id not in {node.experiment.id for node in forest[0].walk()}
    ):  # a part of a tree shown: say where its best tip is
        click.echo(
            truncate(
                f"best tip of this tree, not shown: {best.id[:id_length]} "
                f"{best.cumulative_score:.4f} (kexp tree {best.id[:id_length]})  "
                f"{one_line(best.change_summary)}",
                width or 10**9,
            )
        )
    click.echo("")
    click.echo("columns: cumulative (vs the reference), step score, Δ cumulative vs parent")
    click.echo("a line with no ├── or └──: the only child of the line above (the next step)")
    click.echo("*: path to the best tip   [dead end]: nothing after it beats it or its fork")
    nodes = [node for root in forest for node in root.walk()]
    marks = ["[best]: the best tip (top cumulative)"] if any(n.is_best for n in nodes) else []
    if any(node.experiment.is_control for node in nodes):
        marks.append("[control]: an A/A run, never ranked")
    if marks:  # the marks the lines shown carry
        click.echo("   ".join(marks))
    if focus is not None:
        click.echo("<: the experiment asked for")
    for line in drift_legend([node.experiment for node in nodes], id_length):
        click.echo("\n".join(wrap_under("", line, width)))
    legend = {key: label for label, key in refs.labels.items()}
    for key in sorted(legend, key=lambda k: int(k[1:])):
        click.echo(truncate(f"{key}: found on {legend[key]}", width or 10**9))
    if refs.where is not None:
        click.echo("no @: found in the working tree (local)")


# --- lessons -------------------------------------------------------------------------


# --- stats ---------------------------------------------------------------------------


# --- log -----------------------------------------------------------------------------


@click.command()
@click.argument("exp_id", shell_complete=complete_ids)
@click.option("--rev", metavar="REV", help="Follow the history back from this revision.")
@refs_options
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
@click.pass_context
@paged_output
def log(
    ctx: click.Context,
    exp_id: str,
    rev: str | None,
    refs: tuple[str, ...],
    all_refs: bool,
    as_json: bool,
) -> None:
    """The history of one experiment: every commit that touched its file, oldest first.

    For each commit: hash, date, author, message, and the fields it changed (old → new),
    following renames; a removal in one line (removed in COMMIT by AUTHOR: message).
    The audit trail of score corrections. With --refs/--all-refs, then the commits
    those refs hold that HEAD lacks (a teammate's correction on their branch), each with
    the refs holding it; without, a warning names the refs that hold such commits.

    Python: kexp.storage.refhistory.experiment_log(store, exp_id).

    \b
    Example:
      kexp log 6ac8bc7624
      kexp log 6ac8bc7624 --all-refs
    """
    from kexp.storage.refhistory import experiment_log
    from kexp.storage.store import Store

    root = ctx.find_root().params.get("root")
    if rev and (refs or all_refs):
        raise click.UsageError("give --rev or --refs/--all-refs, not both")
    store = Store(root, refs=list(refs), all_refs=all_refs) if refs or all_refs else Store(root)
    entries = experiment_log(store, exp_id, revision=rev)
    if as_json:
        echo_json([entry.to_dict() for entry in entries])
        return
    style = styler()
    for number, entry in enumerate(entries):
        if number:
            click.echo("")
        head = f"{entry.commit[:12]}  {entry.date}  {one_line(entry.author)}"
        click.echo(style(head, fg="yellow"))
        where = entry.path if not entry.old_path else f"{entry.old_path} -> {entry.path}"
        if entry.action == "deleted":  # one line: its fields were all there was
            click.echo(
                f"    removed in {entry.commit[:12]} by {one_line(entry.author)}: "
                f"{one_line(entry.summary)} ({clean(where)})"
            )
            if entry.refs:
                click.echo(f"    on {', '.join(entry.refs)} (not in HEAD)")
            continue
        click.echo(f"    {one_line(entry.summary)}")
        if entry.refs:
            click.echo(f"    on {', '.join(entry.refs)} (not in HEAD)")
        click.echo(f"    {entry.action} {clean(where)}")
        if entry.error:
            click.echo(f"    (unreadable: {one_line(entry.error)})")
        if entry.action == "added":
            continue
        for field, (old, new) in entry.changes.items():
            click.echo(f"    {field}: {_change_text(old, new)}")


def _change_text(old: Any, new: Any) -> str:
    import json

    def short(value: Any) -> str:
        if value is None:
            return "(absent)"
        text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)
        if "\n" in text or len(text) > 60:
            return f"({len(text.splitlines()) or 1} lines)"
        return one_line(repr(value) if isinstance(value, str) else text)

    return f"{short(old)} → {short(new)}"


# --- export --------------------------------------------------------------------------


@click.command()
@click.option(
    "--format",
    "output_format",
    type=click.Choice([*record_format_names(), "legacy", "parquet"]),
    default="json",
    show_default=True,
    help="Output format; legacy: the predecessor's kernel_experiments_db.json; parquet: a "
    "Parquet dataset in the folder -o DIR, for DuckDB, Polars, Spark (needs pyarrow).",
)
@click.option(
    "-o",
    "--output",
    type=click.Path(path_type=Path),
    help="Write to this file (replaced atomically) instead of stdout; with --format "
    "parquet, the folder (an earlier export there is replaced whole).",
)
@filter_options
@refs_options
@click.option("--fields", help="Only these fields (comma-separated).")
@click.option("--brief", is_flag=True, help="Front-matter only, no body text.")
@click.pass_context
def export(
    ctx: click.Context,
    /,
    output_format: str,
    output: Path | None,
    fields: str | None,
    brief: bool,
    **params: Any,
) -> None:
    """Write the experiments matching the filters as JSON, JSON Lines or CSV.

    Keys are stable: every field in canonical order, then outcome and path (relative
    to the store). Oldest first. --format legacy writes the predecessor's database
    (id -> record, its keys and types) of the whole store, for tools that still read it;
    with -o FILE, what its records have no place for (tags, author, ...) goes beside it
    in FILE.kexp.json, which kexp import reads back.

    --format parquet writes two tables into the folder -o DIR, partitioned by operator
    and month (DIR/experiments/operator=.../month=.../part-0.parquet, and DIR/results/,
    one row per configuration measured), with every field, outcome and suspect;
    query them with any engine, e.g. DuckDB:
    read_parquet('DIR/experiments/**/*.parquet', hive_partitioning=true).

    Python: kexp.output.export.export(store, stream, format, **filters);
    kexp.output.legacyexport.export_legacy(path, store); kexp.output.parquet.export_parquet(store,
    dir).

    \b
    Examples:
      kexp export --format jsonl -o experiments.jsonl
      kexp export --format csv --operator cache --brief > cache.csv
      kexp export --format parquet -o kexp-parquet
    """
    from kexp.output.export import export as write_export

    store = get_store(ctx)
    if output_format == "legacy":
        _export_legacy(store, output, bool(fields or brief or filters_from(params)))
        return
    if output_format == "parquet":
        _export_parquet(store, output, bool(fields or brief), filters_from(params))
        return
    chosen = field_list(fields)
    filters = filters_from(params)
    # Written as the records are made (an export of a large store is larger than memory).
    if output is None:
        with progress("reading experiments"):
            write_export(store, _Echoed(), output_format, fields=chosen, brief=brief, **filters)
        return
    from kexp.storage import atomic

    with (
        atomic.writing_output(output),
        progress("reading experiments"),
        atomic.replacing(output) as stream,
    ):
        count = write_export(store, stream, output_format, fields=chosen, brief=brief, **filters)
    click.echo(f"exported {count} experiment(s) to {output}", err=True)


class _Echoed(io.StringIO):
    """A text stream that prints what is written to it at once (for a terminal: cleaned
    of control characters)."""

    def __init__(self) -> None:
        super().__init__()
        self.terminal = stdout_is_terminal()

    def write(self, text: str) -> int:
        click.echo(clean(text) if self.terminal else text, nl=False)
        return len(text)


def _export_parquet(
    store: Store, output: Path | None, shaped: bool, filters: dict[str, Any]
) -> None:
    from kexp.core.errors import KexpError
    from kexp.output.parquet import export_parquet

    if output is None:
        raise KexpError("--format parquet writes a folder: give it with -o DIR")
    if shaped:
        raise KexpError("--format parquet exports every field: drop --fields and --brief")
    with progress("exporting experiments"):
        result = export_parquet(store, output, **filters)
    click.echo(
        f"exported {result.experiments} experiment(s) and {result.results} result row(s) "
        f"to {clean(str(output))} ({len(result.files)} Parquet file(s))",
        err=True,
    )


def _export_legacy(store: Store, output: Path | None, filtered: bool) -> None:
    from kexp.core.errors import KexpError
    from kexp.output.legacyexport import dump_legacy, export_legacy, legacy_export

    if filtered:
        raise KexpError("--format legacy exports the whole store: drop filters and --fields")
    with progress("reading experiments"):
        if output is not None:
            report = export_legacy(output, store)
            for line in report.lines():
                click.echo(clean(line), err=True)
            return
        database, kept, problems = legacy_export(store)
    click.echo(dump_legacy(database))
    for line in problems:
        click.echo(clean(line), err=True)
    if kept:
        click.echo(
            f"kexp: warning: {len(kept)} experiment(s) keep what the predecessor's records "
            "have no place for (tags, author, combines, results, unknown fields or "
            "sections): not in this output; export with -o FILE to keep it beside the "
            "database, for kexp import",
            err=True,
        )


COMMANDS = (top, list_command, show, tree, log, export)
