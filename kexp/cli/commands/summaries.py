"""The commands that sum a store up: kexp lessons (the failures to learn from), kexp stats."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import click

from kexp.cli.commands.common import (
    SUSPECT_LABEL,
    filter_options,
    filters_from,
    get_store,
    ref_labels,
    refs_options,
)
from kexp.cli.commands.terminal import (
    OUTCOME_STYLES,
    echo_json,
    one_line,
    paged_output,
    print_table,
    styler,
    terminal_width,
    wrap_under,
)

if TYPE_CHECKING:
    from kexp.agents.lessons import Lesson


@click.command()
@filter_options
@refs_options
@click.option(
    "--group",
    "groups",
    multiple=True,
    type=click.Choice(["buggy", "failed", "regression", "marginal", "interference"]),
    help="Only this group (repeatable).",
)
@click.option(
    "-n",
    "--limit",
    type=int,
    help="At most this many per group, the newest (default: the setting top_default, 20 "
    "unless kexp.toml says otherwise; with --json: all).",
)
@click.option(
    "--all",
    "every",
    is_flag=True,
    help="Every lesson, each on its own (not taken together by key insight).",
)
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
@click.pass_context
@paged_output
def lessons(
    ctx: click.Context,
    /,
    groups: tuple[str, ...],
    limit: int | None,
    every: bool,
    as_json: bool,
    **params: Any,
) -> None:
    """The failures to learn from: buggy, failed, regression, marginal, interference.

    Each with its summary, its campaign (operator · dtype · env) and the "Key
    insight" line of its description; the lessons of one campaign that taught one key
    insight are one entry, its newest, with how many they are; at
    most the newest 20 entries of a group (-n N: N; --all: every lesson, each on its
    own), the last line saying how many more. Controls (tag
    control, A/A runs) are no lessons: the newest of each env is shown first as its
    noise floor ("A/A on this env: 1.0390 [0.8390, 1.2870]").

    Python: kexp.lessons(**filters).

    \b
    Examples:
      kexp lessons --operator cache
      kexp lessons --group buggy --json
    """
    from kexp.agents.lessons import lesson_report
    from kexp.core.advice import MORE_LESSONS
    from kexp.output.replies import lessons_reply, lessons_shown

    store = get_store(ctx)
    filters = filters_from(params)
    report = lesson_report(store, **filters)
    if as_json:
        echo_json(lessons_reply(report, groups, None if every else limit))
        return
    if limit is None and not every:
        limit = store.settings.top_default
    found = lessons_shown(report, groups, None if every else limit, each=every)
    style = styler()
    width = terminal_width()
    shown = [floor.id for floor in report.noise_floors]
    id_length = store.shown_id_length(
        shown + [item.id for group in found.values() for item, _ in group.entries]
    )
    for floor in report.noise_floors:
        where = f"({one_line(floor.env)}; control {floor.id[:id_length]})"
        _print_floor(floor.describe(), where, width)
    if report.noise_floors:
        click.echo("")
    first = True
    for name, group in found.items():
        if not group.entries:
            continue
        if not first:
            click.echo("")
        first = False
        heading = style(name.upper(), **{"bold": True, **OUTCOME_STYLES.get(name, {})})
        click.echo(f"{heading} ({group.total:,})")
        for lesson, count in group.entries:
            sighting = report.where.get(lesson.id)
            place = ref_labels([sighting])[0] if sighting is not None else ""
            _print_lesson(lesson, width, id_length, place, count)
    if first:
        click.echo("(no lessons: no buggy, regressed, marginal or interfering experiments match)")
    hidden = sum(group.hidden for group in found.values())
    if hidden and limit is not None:
        more = MORE_LESSONS.say(n=max(limit, 1) * 5)
        click.echo("")
        click.echo(f"({hidden:,} more lesson(s) not shown: {more})")


def _print_floor(floor: str, where: str, width: int | None) -> None:
    """A noise floor and its env and control: one line, or where it would be wider than
    the terminal, wrapped (never cut) to it, the rest and the env and control under its
    first line, indented."""
    import textwrap

    line = f"{floor}  {where}"
    if width is None or len(line) <= width:
        click.echo(line)
        return
    head, *rest = textwrap.wrap(floor, max(20, width), break_on_hyphens=False) or [""]
    click.echo(head)
    for part in textwrap.wrap(" ".join([*rest, where]), max(20, width - 4), break_on_hyphens=False):
        click.echo("    " + part)


def _print_lesson(
    lesson: Lesson, width: int | None, id_length: int, found: str = "", count: int = 1
) -> None:
    """One lesson: id (``id_length`` characters), score and summary, its campaign
    (``On: operator · dtype · env``), a step judged over its parent its speedup over
    it, then where it was found (``found``, read across refs: ``Ref: origin/kexp/bob``)
    and its key insight, with how many lessons taught it (``count``) when more than this
    one, wrapped (never cut) to the terminal's width."""
    import textwrap

    from kexp.agents.lessons import taught
    from kexp.format.samples import describe_score

    shown = describe_score(lesson.shown_score, lesson.score_ci)
    score = f"{shown:>6}"
    head = f"  {lesson.id[:id_length]}  {score}  "
    summary = one_line(lesson.change_summary)
    insight = one_line(taught(lesson.key_insight, lesson.error)) or "(no key insight recorded)"
    label = "      Key insight: " if count == 1 else f"      Key insight ({count:,} lessons): "
    notes = _campaign_lines(lesson, width)
    if lesson.over_parent is not None:
        change = (lesson.over_parent - 1) * 100
        notes += wrap_under(
            "      ",
            f"Over parent {lesson.pid[:id_length]}: {lesson.over_parent:.4f} ({change:+.1f}%);"
            f" {score.strip()} is over the reference",
            width,
        )
    if lesson.outcome_reason:  # why a change is within noise: the A/A control's drift
        notes += wrap_under("      Why: ", one_line(lesson.outcome_reason), width)
    if lesson.retired:  # found wrong after its key insight was written
        notes += wrap_under("      Retired: ", one_line(lesson.retired), width)
    if width is None:
        click.echo(head + summary)
        click.echo("\n".join(notes))
        if found:
            click.echo(f"      Ref: {found}")
        click.echo(label + insight)
        return
    lines = textwrap.wrap(
        summary,
        max(20, width - len(head)),
        initial_indent="",
        subsequent_indent="",
        break_on_hyphens=False,
    ) or [""]
    click.echo(head + lines[0])
    for line in lines[1:]:
        click.echo(" " * len(head) + line)
    click.echo("\n".join(notes))
    if found:
        for line in textwrap.wrap(
            found, max(31, width), initial_indent="      Ref: ", subsequent_indent=" " * 11
        ):
            click.echo(line)
    for line in textwrap.wrap(
        insight,
        max(len(label) + 20, width),
        initial_indent=label,
        subsequent_indent=" " * len(label),
        break_on_hyphens=False,
    ):
        click.echo(line)


def _campaign_lines(lesson: Lesson, width: int | None) -> list[str]:
    """``      On: operator · dtype · env``, wrapped at ``width`` (never cut: the
    operator is what a reader greps for)."""
    tail = "".join(f" · {one_line(v)}" for v in (lesson.dtype_sig, lesson.env) if v)
    operator = one_line(lesson.operator_sig) or "(no operator)"
    return wrap_under("      On: ", operator + tail, width)


_OUTCOME_COLUMNS = (
    ("improvement", "IMPROVED"),
    ("marginal", "MARGINAL"),
    ("regression", "REGRESSED"),
    ("interference", "INTERFERED"),
    ("buggy", "BUGGY"),
    ("failed", "FAILED"),
    ("pending", "PENDING"),
    ("control", "CONTROL"),  # A/A runs: the noise floor, counted apart from the outcomes
)


#: The outcome columns' headers on a narrow terminal.
_SHORT = {
    "IMPROVED": "IMPR",
    "MARGINAL": "MARG",
    "REGRESSED": "REGR",
    "INTERFERED": "INTF",
    "BUGGY": "BUGGY",
    "FAILED": "FAIL",
    "PENDING": "PEND",
    "CONTROL": "CTRL",
}


@click.command()
@filter_options
@refs_options
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
@click.pass_context
@paged_output
def stats(ctx: click.Context, /, as_json: bool, **params: Any) -> None:
    """Counts per operator and outcome; the best tip per operator, dtype and env.

    The best tip is the best cumulative score (the speedup over the operator's
    reference) of a step that improved (never one within noise or a regression).

    Python: kexp.stats(**filters).

    \b
    Examples:
      kexp stats
      kexp stats --env MI300X --json
    """
    from kexp.storage.stats import stats as compute

    store = get_store(ctx)
    result = compute(store, **filters_from(params))
    if as_json:
        echo_json(result.to_dict())
        return
    style = styler()
    click.echo(style(f"{result.total} experiment(s)", bold=True))
    if not result.total:
        return
    click.echo("")
    width = terminal_width()
    narrow = width is not None and width < 120  # short headers leave room for the kernel
    headers = ["OPERATOR", "TOTAL", *(_SHORT[h] if narrow else h for _, h in _OUTCOME_COLUMNS)]
    rows = [
        [
            one_line(op) or "(none)",
            str(counts["total"]),
            *(str(counts[o]) for o, _ in _OUTCOME_COLUMNS),
        ]
        for op, counts in result.by_operator.items()
    ]
    if len(rows) > 1:
        totals = result.by_outcome
        rows.append(["(all)", str(totals["total"]), *(str(totals[o]) for o, _ in _OUTCOME_COLUMNS)])
    print_table(headers, rows, right=headers[1:], shrink=("OPERATOR",))
    click.echo("")
    click.echo(style("Best cumulative score per operator, dtype and env", bold=True))
    if not result.best:
        click.echo(
            "(no best yet: no step improved with a cumulative score; one within noise, a "
            "regression or an interference is never a best, and buggy, pending, controls "
            "and those that measured nothing have no cumulative score)"
        )
        return
    id_length = store.shown_id_length(b.id for b in result.best)
    print_table(
        ["OPERATOR", "DTYPE", "ENV", "CUMULATIVE", "ID", "SUMMARY"],
        [
            [
                one_line(b.operator_sig) or "(none)",
                one_line(b.dtype_sig),
                one_line(b.env) or "(none)",
                f"{b.cumulative_score:.4f}" if b.cumulative_score is not None else "-",
                b.id[:id_length],
                (f"[{SUSPECT_LABEL}] " if b.suspect else "") + one_line(b.change_summary),
            ]
            for b in result.best
        ],
        right=("CUMULATIVE",),
        shrink=("ENV", "OPERATOR"),
        wrap="SUMMARY",
    )
    for b in result.best:  # no best until checked, as kexp review and kexp context say
        if b.suspect_above:
            named = ", ".join(
                f"{a['id'][:id_length]} {a['cumulative_score']:.4f} ({'; '.join(a['suspect'])})"
                for a in b.suspect_above
            )
            click.echo(
                f"{one_line(b.operator_sig) or '(none)'} {one_line(b.dtype_sig)} "
                f"{one_line(b.env) or '(no env)'}: "
                f"{len(b.suspect_above)} suspect above {b.id[:id_length]}, no best until "
                f"checked ({SUSPECT_LABEL}): {one_line(named)}"
            )


COMMANDS = (lessons, stats)
