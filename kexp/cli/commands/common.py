"""What every command shares: the store, its options and filters, the experiments'
cells and output formats (text for the terminal: :mod:`kexp.cli.commands.terminal`).

Reading input and formatting output live here and in the command modules; everything
else is one call into the library. Only click is imported up front: ``kexp --help``
loads every command module, so the library (and json) are imported where used.
"""

from __future__ import annotations

import io
import json
import math
import os
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any, TypeVar

import click

from kexp.cli.commands.exits import EXIT_BUG as EXIT_BUG
from kexp.cli.commands.exits import EXIT_OK as EXIT_OK
from kexp.cli.commands.exits import EXIT_PROBLEMS as EXIT_PROBLEMS
from kexp.cli.commands.exits import EXIT_USAGE as EXIT_USAGE
from kexp.cli.commands.terminal import (
    clean,
    echo_json,
    echo_raw,
    one_line,
    outcome_style,
    print_table,
)
from kexp.core.errors import KexpError
from kexp.format.outputs import FORMATS, format_names

if TYPE_CHECKING:
    from pathlib import Path

    from kexp.core.model import KernelExperiment
    from kexp.storage.store import Store

#: The flag of a suspect measurement in listings (as kexp.format.suspect.SUSPECT_LABEL).
SUSPECT_LABEL = "suspect: verify correctness"
_F = TypeVar("_F", bound=Callable[..., Any])


class _ScoreBound(click.types.FloatParamType):
    """A score a filter bounds by: a finite number (``nan`` and ``inf`` bound nothing)."""

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> Any:
        number = super().convert(value, param, ctx)
        if not math.isfinite(number):
            self.fail(f"{value!r} is no score bound: give a finite number (1.05)", param, ctx)
        return number


SCORE_BOUND = _ScoreBound()


def get_store(ctx: click.Context) -> Store:
    """The store the command works on (``--root``, ``$KEXP_ROOT``, or found by walking up).

    The one place a store is opened: with ``--rev REV`` it is the read-only store as it
    was at that revision, read from git objects (``Store.at``); with ``--refs PATTERN``
    or ``--all-refs`` the working tree plus the store at those refs, one entry per
    experiment (``Store(root, refs=...)``).
    """
    # lazy: the store, not for commands that open none (init, env, skill)
    from kexp.storage.store import Store

    root = ctx.find_root().params.get("root")
    revision = ctx.params.get("rev")
    refs, all_refs = ctx.params.get("refs") or (), bool(ctx.params.get("all_refs"))
    if refs or all_refs:
        if revision:
            raise click.UsageError("give --rev or --refs/--all-refs, not both")
        return Store(root, refs=list(refs), all_refs=all_refs)
    store = Store(root)
    return store.at(revision) if revision else store


def refs_options(func: _F) -> _F:
    """``--refs PATTERN`` (repeatable) and ``--all-refs``: read the working tree plus
    the store at every matching ref, from git objects: one entry per experiment, its
    newest version."""
    options = [
        click.option(
            "--refs",
            "refs",
            multiple=True,
            metavar="PATTERN",
            help="Also read the store at every ref matching PATTERN (origin/*, "
            "refs/remotes/origin/agent-*; repeatable), from git objects: one entry per "
            "experiment, its newest version.",
        ),
        click.option(
            "--all-refs",
            is_flag=True,
            help="Also read the store at every branch and remote-tracking branch.",
        ),
    ]
    for option in reversed(options):
        func = option(func)
    return func


def where_found(store: Any) -> Callable[[KernelExperiment], Any] | None:
    """Where each experiment a store reading refs handed out was found (its ``where``:
    a :class:`kexp.storage.rows.Sighting`), or None for a store that reads no refs."""
    if getattr(store.source, "places", None) is None:
        return None
    return lambda exp: exp.where


def rev_option(func: _F) -> _F:
    """``--rev REV``: read the store as it was at a revision (read commands)."""
    option = click.option(
        "--rev",
        metavar="REV",
        help="Read the store as it was at this revision (commit, branch, tag, HEAD~2), "
        "from git objects, without a checkout.",
    )
    return option(func)


# --- shell completion ------------------------------------------------------------------

#: At most this many ids are offered at once (a large store has many).
COMPLETION_LIMIT = 500


def complete_ids(ctx: click.Context, param: click.Parameter, incomplete: str) -> list[Any]:
    """Shell completion of an experiment id: the ids starting with what was typed, each
    described by its file's slug (file names only: nothing is read)."""
    # lazy: only for shell completion
    from click.shell_completion import CompletionItem

    try:
        # lazy: only for shell completion
        from kexp.storage.listing import find_names
        from kexp.storage.store import Store

        store = Store(ctx.find_root().params.get("root"))
        found = find_names(None, store.experiments_dir, incomplete.lower())
    except Exception:  # no store here, unreadable folders: nothing to offer
        return []
    slugs = {name[:16]: name[17:-3] for _, name in found}
    return [CompletionItem(i, help=slugs[i]) for i in sorted(slugs)[:COMPLETION_LIMIT]]


def complete_outcomes(ctx: click.Context, param: click.Parameter, incomplete: str) -> list[Any]:
    """Shell completion of an outcome (``--outcome``)."""
    # lazy: only for shell completion
    from click.shell_completion import CompletionItem

    from kexp.core.model import OUTCOMES

    return [CompletionItem(o) for o in OUTCOMES if o.startswith(incomplete)]


# --- options shared by commands ------------------------------------------------------


def filter_options(func: _F) -> _F:
    """The query filters, as options shared by the read commands."""
    options = [
        click.option("--operator", help="Operator/file substring (case-insensitive)."),
        click.option("--dtype", help="Data type substring, e.g. bf16."),
        click.option("--env", "env_filter", help="Environment substring, e.g. MI300X."),
        click.option(
            "--base-commit", help="Base commit: a hash prefix, or a revision (main, HEAD~2)."
        ),
        click.option(
            "--reachable-from",
            metavar="REV",
            help="Only experiments whose base commit is an ancestor of REV (what code "
            "REV contains).",
        ),
        click.option("--status", multiple=True, help="Status (repeatable)."),
        click.option(
            "--outcome",
            multiple=True,
            shell_complete=complete_outcomes,
            help="pending, buggy, failed, interference, regression, marginal, improvement "
            "(repeatable).",
        ),
        click.option("--buggy/--not-buggy", "is_buggy", default=None, help="Only (not) buggy."),
        click.option("--min-score", type=SCORE_BOUND, help="Lowest score."),
        click.option("--max-score", type=SCORE_BOUND, help="Highest score."),
        click.option("--pid", help="Parent id (or unique prefix).", shell_complete=complete_ids),
        click.option(
            "--tag",
            "tags",
            multiple=True,
            help="Tag that must be present (repeatable, or comma-separated: each must be).",
        ),
        click.option("--since", help="Created at or after (date or ISO time)."),
        click.option("--until", help="Created at or before (date or ISO time)."),
        click.option("--text", help="Substring of any field."),
    ]
    for option in reversed(options):
        func = option(func)
    return rev_option(func)


_FILTER_PARAMS = {
    "operator": "operator",
    "dtype": "dtype",
    "env_filter": "env",
    "base_commit": "base_commit",
    "reachable_from": "reachable_from",
    "status": "status",
    "outcome": "outcome",
    "is_buggy": "is_buggy",
    "min_score": "min_score",
    "max_score": "max_score",
    "pid": "pid",
    "tags": "tags",
    "since": "since",
    "until": "until",
    "text": "text",
}


def filters_from(params: dict[str, Any]) -> dict[str, Any]:
    """The library's filter keyword arguments from the options of :func:`filter_options`."""
    filters: dict[str, Any] = {}
    for param, name in _FILTER_PARAMS.items():
        value = params.pop(param, None)
        if value is None or value == ():
            continue
        filters[name] = list(value) if isinstance(value, tuple) else value
    if "tags" in filters:  # comma-separated, as kexp add --tag and --set tags= take them
        filters["tags"] = [
            t.strip() for raw in filters["tags"] for t in raw.split(",") if t.strip()
        ]
    return filters


def read_options(func: _F) -> _F:
    """``--json``, ``--format``, ``--fields`` and ``--brief`` of the commands that list."""
    options = [
        click.option("--json", "as_json", is_flag=True, help="Print JSON (same as --format json)."),
        click.option(
            "--format",
            "output_format",
            type=click.Choice(format_names()),
            default="table",
            show_default=True,
            help="Output format (markdown: the table's columns as a Markdown table).",
        ),
        click.option(
            "--fields",
            help="Only these fields (comma-separated; also columns of the table).",
        ),
        click.option(
            "--brief",
            is_flag=True,
            help="JSON/JSONL: what an agent needs to decide (id, summary, score and its "
            "interval, outcome, key insight, suspect, operator, dtype).",
        ),
        click.option(
            "--front-matter",
            is_flag=True,
            help="JSON/JSONL/CSV: every front-matter field, no body text.",
        ),
        click.option(
            "--full",
            is_flag=True,
            help="JSON/JSONL: keep empty fields and path (by default they are left out).",
        ),
    ]
    for option in reversed(options):
        func = option(func)
    return func


def field_list(value: str | None) -> list[str] | None:
    """The fields of ``--fields a,b,c`` (checked), or None."""
    if not value:
        return None
    # lazy: not every command takes --fields
    from kexp.output.export import check_fields

    fields = [f.strip() for f in value.split(",") if f.strip()]
    try:
        return check_fields(fields, where=True)
    except KexpError as exc:
        raise click.BadParameter(str(exc), param_hint="--fields") from None


_COLUMNS = (
    "id",
    "cumulative_score",
    "score",
    "outcome",
    "dtype_sig",
    "operator_sig",
    "change_summary",
)
_HEADERS = {
    "id": "ID",
    "cumulative_score": "CUMULATIVE",
    "score": "SCORE",
    "outcome": "OUTCOME",
    "dtype_sig": "DTYPE",
    "env": "ENV",
    "operator_sig": "OPERATOR",
    "change_summary": "SUMMARY",
    "is_buggy": "BUGGY",
    "created_at": "CREATED",
    "base_commit": "BASE",
}


def suspect_reasons(exp: KernelExperiment) -> list[str]:
    """Why an experiment's measurement is implausible (empty when believable)."""
    # lazy: not every command shows suspicion
    from kexp.format.suspect import suspect_reasons as reasons

    return reasons(exp, exp.settings)


def cell(exp: KernelExperiment, column: str, id_width: int = 10) -> str:
    """One table cell: short ids and hashes, four-decimal scores (with the 95 %
    interval when there is one, ``1.0320 [1.0110, 1.0540]``: as show and add print
    them, and an interval narrower than 0.001 still reads as one), one-line text; a
    suspect measurement's summary starts with ``[suspect: verify correctness]``.
    """
    if column == "cumulative_score":
        cumulative = exp.cumulative_score
        return "-" if cumulative is None else f"{cumulative:.4f}"
    if column == "cumulative_ci":
        interval = exp.cumulative_ci
        return "" if interval is None else f"[{interval[0]:.4f}, {interval[1]:.4f}]"
    if column == "score":
        from kexp.format.samples import describe_score

        return describe_score(exp.derived.shown_score, exp.score_ci or ())
    if column in ("id", "pid", "base_commit"):
        return str(getattr(exp, column))[:id_width]
    if column == "path":
        return os.path.relpath(exp.path) if exp.path else ""
    if column == "suspect":
        return one_line("; ".join(suspect_reasons(exp)))
    if column == "change_summary" and suspect_reasons(exp):
        return f"[{SUSPECT_LABEL}] {one_line(exp.change_summary)}"
    value = exp.outcome if column == "outcome" else getattr(exp, column)
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, list):
        value = ", ".join(json.dumps(v) if isinstance(v, dict) else str(v) for v in value)
    return one_line(value)


def _is_where(column: str) -> bool:
    """Whether a column of ``--fields`` is where a read across refs found each
    experiment (:data:`kexp.output.export.WHERE_FIELDS`: ``ref``, ``refs``, ...)."""
    from kexp.output.export import WHERE_FIELDS  # lazy: only for a table of --fields

    return column in WHERE_FIELDS


def _insert_where(
    rows: list[list[str]],
    experiments: Sequence[KernelExperiment],
    names: list[str],
    places: list[int],
    where: Callable[[KernelExperiment], Any] | None,
) -> None:
    """Put the cells of the where-fields ``names`` asked for by ``--fields`` at
    ``places`` of each row: ``ref`` as the REF column says it (:func:`ref_labels`), the
    others as ``--format csv`` does (a list: its items, spaces between). A read of the
    working tree alone knows none: the one-line error of ``--json``."""
    from kexp.output.export import to_record

    labels = ref_labels([where(exp) if where is not None else None for exp in experiments])
    for exp, label, row in zip(experiments, labels, rows, strict=True):
        found = to_record(exp, names)
        for name, at in zip(names, places, strict=True):
            value = label if name == "ref" else found[name]
            if isinstance(value, list):
                value = " ".join(map(str, value))
            row.insert(at, one_line(str(value).lower() if isinstance(value, bool) else value))


#: The line under a table with a REF column (where each experiment was found).
REF_LEGEND = "REF: local (the working tree and its branch) or its ref; +N: on N other refs too"


def ref_labels(sightings: Sequence[Any]) -> list[str]:
    """The REF cells of a table: where each experiment was found (``local``, or the ref
    holding it, ``+N`` other places holding the same content; ``(older elsewhere)``, or
    ``(diverged elsewhere)`` when both versions changed since their commits parted;
    ``(removed elsewhere)`` when a ref removed it, read all the same: ``removed_on``,
    named by ``kexp show`` and ``--json``; ``unmerged`` when this version is a side
    branch's ranked over the working tree's or default branch's, ``built on unmerged``
    when its cumulative score builds on such a version), with the prefix all the refs shown share
    left out (``origin/kexp/agent-7f3a`` and ``origin/kexp/agent-9c1e`` read
    ``…agent-7f3a`` and ``…agent-9c1e``), so that the part telling them apart shows in
    a narrow column."""
    refs = sorted({s.ref for s in sightings if s is not None and s.ref != "local"})
    cut = 0
    if len(refs) > 1:
        first, last = refs[0], refs[-1]
        while cut < min(len(first), len(last)) and first[cut] == last[cut]:
            cut += 1
        cut = first.rfind("/", 0, cut + 1) + 1  # at a whole component of the name
    labels = []
    for sighting in sightings:
        if sighting is None:
            labels.append("")
            continue
        text = sighting.ref if sighting.ref == "local" or not cut else "…" + sighting.ref[cut:]
        if len(sighting.refs) > 1:
            text += f" +{len(sighting.refs) - 1}"
        # Diverged: the other version changed too since they parted (not older).
        marks = [("diverged" if sighting.diverged else "older")] if sighting.other_versions else []
        marks += ["removed"] if sighting.removed_on else []
        said = [f"{', '.join(marks)} elsewhere"] if marks else []
        unmerged = getattr(sighting, "unmerged", None)
        if unmerged is not None:  # not main's: unmerged, or its cumulative built on one
            said.insert(0, "unmerged" if unmerged.own else "built on unmerged")
        if said:
            text += f" ({'; '.join(said)})"
        labels.append(one_line(text))
    return labels


def needs_bodies(output_format: str, as_json: bool, fields: str | None, front_matter: bool) -> bool:
    """Whether printing experiments this way shows body text (else it is not read):
    ``--brief`` shows the key insight, from the detailed description."""
    # lazy: not every command takes --fields
    from kexp.core.model import BODY_FIELDS

    chosen = field_list(fields)
    if chosen is not None:
        return any(name in (*BODY_FIELDS, "key_insight") for name in chosen)
    return (as_json or FORMATS[output_format].records) and not front_matter


def _several_envs(experiments: Sequence[KernelExperiment], env: str | None = None) -> bool:
    """Whether ``experiments`` hold an operator measured on more than one env: a
    listing that ranks two machines' steps in one list shows each one's env; or one
    whose env is not the whole of the ``env`` filter (a part of several it may be:
    ``H100`` of ``H100 PCIe, ...``, an SXM5's best mistaken for its own)."""
    if env and any(exp.env.strip().lower() != env.strip().lower() for exp in experiments):
        return True
    envs: dict[str, set[str]] = {}
    for exp in experiments:
        envs.setdefault(exp.operator_sig, set()).add(exp.env)
    return any(len(found) > 1 for found in envs.values())


def emit_experiments(
    experiments: Sequence[KernelExperiment],
    *,
    output_format: str,
    as_json: bool,
    fields: str | None,
    brief: bool,
    ranked: bool,
    front_matter: bool = False,
    full: bool = False,
    where: Callable[[KernelExperiment], Any] | None = None,
    id_length: int = 10,
    env: str | None = None,
) -> None:
    """Print experiments in an output format of :mod:`kexp.format.outputs`: a table (``#``
    column when ``ranked``; ids ``id_length`` characters long) for the terminal or as
    Markdown, JSON, JSON Lines or CSV (records shaped by
    :func:`kexp.output.export.machine_record`; CSV keeps every column). ``where`` (read
    across refs): each record says where it was found (``ref``, a REF column)."""
    chosen = field_list(fields)
    output_format = "json" if as_json else output_format
    if FORMATS[output_format].records:
        # lazy: only for a command that prints records
        from kexp.output.export import machine_record, to_record, write_records

        if output_format == "csv":
            records = [to_record(e, chosen, brief=brief or front_matter) for e in experiments]
        else:
            records = [
                machine_record(e, chosen, brief=brief, front_matter=front_matter, full=full)
                for e in experiments
            ]
        if where is not None:
            for exp, record in zip(experiments, records, strict=True):
                if chosen:  # the fields asked for, ref and refs only when among them
                    if output_format == "csv" and isinstance(record.get("refs"), list):
                        record["refs"] = " ".join(record["refs"])
                    continue
                sighting = where(exp)
                if sighting is not None:
                    found = sighting.to_dict()
                    if output_format == "csv":
                        found = {"ref": found["ref"], "refs": " ".join(found["refs"])}
                    record.update(found)
        if output_format == "json":
            echo_json(records)
            return
        stream = io.StringIO()
        write_records(records, stream, output_format)
        text = stream.getvalue()
        if text:  # no experiment in JSON Lines: no line at all
            echo_raw(text.rstrip("\n"))
        return
    columns = tuple(chosen) if chosen else _COLUMNS
    if not chosen and _several_envs(experiments, env):  # whose GPU each is, told apart
        at = columns.index("dtype_sig") + 1
        columns = (*columns[:at], "env", *columns[at:])
    headers = [_HEADERS.get(c, c.upper()) for c in columns]
    asked = [at for at, column in enumerate(columns) if chosen and _is_where(column)]
    rows = [
        [cell(e, c, id_length) for at, c in enumerate(columns) if at not in asked]
        for e in experiments
    ]
    if asked:  # where each was found, asked for by --fields: in the places asked
        _insert_where(rows, experiments, [columns[at] for at in asked], asked, where)
    elif where is not None and not chosen:
        at = columns.index("id") + 1 if "id" in columns else 0
        headers.insert(at, "REF")
        labels = ref_labels([where(exp) for exp in experiments])
        for label, row in zip(labels, rows, strict=True):
            row.insert(at, label)
    if ranked:
        headers.insert(0, "#")
        for number, row in enumerate(rows, 1):
            row.insert(0, str(number))
    write = FORMATS[output_format].write
    if write is not None:
        stream = io.StringIO()
        write(headers, rows, stream)
        echo_raw(stream.getvalue().rstrip("\n"))
        return
    print_table(
        headers,
        rows,
        right=("#", "CUMULATIVE", "SCORE"),
        # The REF column keeps its width: what tells two refs apart is at its end.
        shrink=(
            "OPERATOR",
            *(h for h in headers if h not in ("#", "CUMULATIVE", "SCORE", "ID", "SUMMARY", "REF")),
        ),
        wrap="SUMMARY" if headers[-1] == "SUMMARY" else None,
        styles={"OUTCOME": outcome_style},
    )
    if not rows:
        click.echo("(no experiments match)", err=True)
    elif "REF" in headers:
        click.echo(REF_LEGEND)
    if "outcome" in columns:
        for line in drift_legend(experiments, id_length):
            click.echo(line)


def drift_legend(experiments: Sequence[KernelExperiment], id_length: int = 10) -> list[str]:
    """Why the changes an A/A control judged within the drift between runs are
    ``marginal``, a line per reason under a table: ``marginal: ID, ID within the A/A
    control ...'s 5.1 % drift on 'cpu' (...)``."""
    steps: dict[str, list[str]] = {}
    for exp in experiments:
        if exp.derived.drift:
            steps.setdefault(exp.derived.drift, []).append(exp.id[:id_length])
    return [
        one_line(f"{OUTCOME_MARGINAL}: {', '.join(ids)} {reason}") for reason, ids in steps.items()
    ]


#: The outcome the drift between runs makes of a change (:func:`drift_legend`).
OUTCOME_MARGINAL = "marginal"


def shown_path(path: Path | None) -> str:
    """``path`` as a command prints it: relative to the working directory when below it."""
    # lazy: one command's library, loaded when that command runs
    from kexp.core.problems import display_path

    return "" if path is None else display_path(path)


def report_written(exp: KernelExperiment, verb: str, as_json: bool) -> None:
    """What a command that wrote ``exp`` prints: ``VERB ID PATH``, or its record as JSON."""
    if as_json:
        # lazy: one command's library, loaded when that command runs
        from kexp.output.export import written_record

        echo_json(written_record(exp))
    else:
        click.echo(f"{verb} {exp.id} {clean(shown_path(exp.path))}")
