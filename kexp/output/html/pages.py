"""The report's pages: the overview and one page per operator (the experiment pages are
:mod:`kexp.output.html.experiment`), with what they share: the site and its links.

Each function returns a whole page as text; :mod:`kexp.output.html` decides what is
written where. What the pages show is computed here from the experiments' front-matter
(plus, for lessons, the key insights read from their descriptions):

* the **frontier**: per operator × dtype × env ("cell"), the best tip: the best
  cumulative score (the speedup over the operator's reference, :mod:`kexp.core.campaign`)
  of an experiment neither buggy nor pending, nor a control;
* the cells **never improved**: those where no experiment's outcome is an improvement.
"""

from __future__ import annotations

import dataclasses
import hashlib
import math
import os
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import Any, TypeVar

from kexp.agents.lessons import LESSON_GROUPS, speedup_over_parent
from kexp.core.ids import SHOWN_LENGTH
from kexp.core.model import OUTCOMES, KernelExperiment
from kexp.core.outcome import NOTHING_MEASURED
from kexp.core.spelling import campaign_key, campaign_names
from kexp.format.samples import describe_score
from kexp.output.html import svg
from kexp.output.html.markup import (
    filter_box,
    one_line,
    page,
    table,
    text,
)
from kexp.storage.lineage import TreeNode, build_forest, is_scored
from kexp.storage.query import best_tip, rank

#: Where the experiment pages are: ``e/<last three hex digits of the ids>.html``, one
#: section per experiment (``#<id>``); the stylesheet shows only the one linked to.
EXPERIMENT_DIR = "e"
#: Hex digits of an id (its last ones, random) naming its experiment page: at most
#: 4,096 files, however many experiments (files cost more than bytes to write).
PAGE_DIGITS = 3
#: Where the operator pages are: ``op/<slug>.html``, and when an operator's experiments
#: or lessons do not fit one page, ``op/<slug>--experiments-<n>.html`` and
#: ``op/<slug>--lessons-<n>.html`` (n from 2: the first is on the operator's page).
OPERATOR_DIR = "op"
#: Rows of the table of experiments on one page, and lessons on one page: a page of a
#: large operator stays small enough to load at once (below 2 MB at 10,000 experiments).
ROWS_PER_PAGE = 1000
LESSONS_PER_PAGE = 500
#: Outcomes in the order the report lists them (best news first).
OUTCOME_ORDER = (
    "improvement",
    "marginal",
    "regression",
    "interference",
    "buggy",
    "failed",
    "pending",
    "control",
)
assert sorted(OUTCOME_ORDER) == sorted(OUTCOMES)
#: What the report counts: the outcomes, the controls (A/A runs, the noise floor, whose
#: outcome is ``control``, as ``kexp stats``, ``top`` and ``context`` count them) last.
COUNTED = OUTCOME_ORDER
_T = TypeVar("_T")


def score_interval(exp: KernelExperiment) -> tuple[float, float] | None:
    """The experiment's score interval ``score_ci: [low, high]``, when it records one."""
    value = getattr(exp, "score_ci", None)
    if value is None:
        value = exp.extra_fields.get("score_ci")
    if not isinstance(value, (list, tuple)) or len(value) != 2:
        return None
    low, high = value
    if not all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in (low, high)):
        return None
    if not (math.isfinite(low) and math.isfinite(high)) or low > high:
        return None
    return float(low), float(high)


def score_text(exp: KernelExperiment) -> str:
    """The score as HTML, with its interval when there is one: ``1.0234 [1.01, 1.03]``."""
    score = exp.score
    if not isinstance(score, (int, float)):
        return text(score)
    if exp.derived.shown_score is None:
        return f'<span class="none" title="{NOTHING_MEASURED}">—</span>'
    shown = f"{score:.4f}"
    interval = score_interval(exp)
    if interval is None:
        return shown
    return f'{shown} <span class="ci">[{interval[0]:.4f}, {interval[1]:.4f}]</span>'


def cumulative_text(exp: KernelExperiment) -> str:
    """The cumulative score as HTML, with its interval when there is one; ``—`` (and why,
    as a tooltip) when there is none."""
    value = exp.cumulative_score
    if value is None:
        return f'<span class="none" title="{text(exp.cumulative_reason)}">—</span>'
    interval = exp.cumulative_ci
    if interval is None:
        return f"{value:.4f}"
    return f'{value:.4f} <span class="ci">[{interval[0]:.4f}, {interval[1]:.4f}]</span>'


def operator_slug(operator: str) -> str:
    """The operator page's file name (without ``.html``): readable, and unique by hash."""
    # lazy: not every command that imports this module needs kexp.validate
    from kexp.format.rules import slugify

    digest = hashlib.sha1(operator.encode("utf-8", "surrogatepass")).hexdigest()[:8]
    return f"{slugify(operator.rsplit(':', 1)[-1] or 'none', 40)}-{digest}"


def experiment_path(exp_id: str) -> str:
    """The path of the page holding an experiment, relative to the report's folder."""
    return f"{EXPERIMENT_DIR}/{exp_id[-PAGE_DIGITS:]}.html"


def experiment_href(exp_id: str) -> str:
    """The link to an experiment, relative to the report's folder: its page and section."""
    return f"{experiment_path(exp_id)}#{exp_id}"


def badge(outcome: str) -> str:
    """An outcome, colored by the stylesheet."""
    return f'<span class="badge o-{text(outcome)}">{text(outcome)}</span>'


@dataclasses.dataclass
class Site:
    """What every page needs to know about the report as a whole."""

    experiments: list[KernelExperiment]
    store_root: Path
    #: The footer of the overview (when the report was made).
    footer: str
    #: The footer of the other pages (no time: a page changes only with its data).
    page_footer: str = ""
    filters: dict[str, Any] = dataclasses.field(default_factory=dict)
    #: Key insight of each lesson (buggy, failed, regression, marginal, interference), by id.
    insights: dict[str, str] = dataclasses.field(default_factory=dict)
    #: How many characters of an id the pages print: as the command's listings, each id
    #: unique among the store's (:meth:`kexp.storage.reader.StoreReader.shown_id_length`).
    id_length: int = SHOWN_LENGTH
    #: What the report read, in words (:func:`scope_text`): its header says it.
    scope: str = "the working tree"
    #: Whether it read refs besides the working tree: an experiment the working tree
    #: does not hold is marked with where it was found (:meth:`found_on`).
    reads_refs: bool = False
    by_id: dict[str, KernelExperiment] = dataclasses.field(init=False)
    children: dict[str, list[KernelExperiment]] = dataclasses.field(init=False)
    #: Each campaign -> its name (:func:`campaign_names`, chosen once over the report's
    #: experiments): every page, cell and link names an operator by it.
    names: dict[tuple[str, str, str], tuple[str, str, str]] = dataclasses.field(init=False)
    operators: dict[str, list[KernelExperiment]] = dataclasses.field(init=False)
    slugs: dict[str, str] = dataclasses.field(init=False)

    def __post_init__(self) -> None:
        self.by_id = {exp.id: exp for exp in self.experiments}
        self.children = {}
        self.names = campaign_names(self.experiments)
        by_name: dict[str, list[KernelExperiment]] = {}  # one operator, any spelling
        for exp in self.experiments:
            if exp.pid and exp.pid in self.by_id and exp.pid != exp.id:
                self.children.setdefault(exp.pid, []).append(exp)
            by_name.setdefault(self.operator_of(exp), []).append(exp)
        self.operators = dict(sorted(by_name.items()))
        self.slugs = {op: operator_slug(op) for op in self.operators}

    def operator_of(self, exp: KernelExperiment) -> str:
        """The name the report shows ``exp``'s operator by (its page's, in any spelling)."""
        return self.names[campaign_key(exp)][0]

    def experiment_link(self, exp_id: str, root: str, label: str | None = None) -> str:
        """A link to an experiment's page (plain text when it is not in the report),
        marked with where it was found when the working tree does not hold it."""
        shown = one_line(label if label is not None else exp_id[: self.id_length])
        if exp_id not in self.by_id:
            return f'<span class="id missing" title="not in this report">{shown}</span>'
        found = self.found_on(self.by_id[exp_id])
        mark = f' <span class="ref">{text(found)}</span>' if found else ""
        return f'<a class="id" href="{root}{experiment_href(exp_id)}">{shown}</a>{mark}'

    def found_on(self, exp: KernelExperiment, *, every: bool = False) -> str:
        """Where a report read across refs found ``exp`` when the working tree does not
        hold it, or holds it built on a side branch's version, as ``kexp top --all-refs``
        says it (``on feat/splitk +1``, ``on origin/x (unmerged)``, ``built on
        unmerged``; ``every``: each ref holding it named, as ``kexp show --all-refs``
        does, ``on origin/kexp/a, origin/kexp/b``); "" otherwise."""
        sighting = exp.where if self.reads_refs else None
        if sighting is None:
            return ""
        unmerged = sighting.unmerged
        if sighting.local:
            return "" if unmerged is None else "built on unmerged"
        if every:
            found = ", ".join(sighting.refs)
        else:
            more = len(sighting.refs) - 1
            found = sighting.ref + (f" +{more}" if more > 0 else "")
        if unmerged is not None:
            found += " (unmerged)" if unmerged.own else " (built on unmerged)"
        return "on " + " ".join(found.split())

    def operator_href(self, operator: str, root: str) -> str:
        """The relative link to an operator's page."""
        return f"{root}{OPERATOR_DIR}/{self.slugs[operator]}.html"

    def operator_link(self, operator: str, root: str, limit: int | None = 90) -> str:
        """A link to an operator's page, labelled with the operator (whole in a tooltip
        when the label is cut)."""
        shown = one_line(operator or "(none)", limit)
        cut = limit is not None and len(" ".join(operator.split())) > limit
        title = f' title="{text(operator)}"' if cut else ""
        return f'<a href="{self.operator_href(operator, root)}"{title}>{shown}</a>'

    def relative_path(self, exp: KernelExperiment) -> str:
        """The experiment's file relative to the store."""
        if exp.path is None:
            return ""
        path, root = os.fspath(exp.path), os.fspath(self.store_root) + os.sep
        return (path[len(root) :] if path.startswith(root) else path).replace(os.sep, "/")


# --- cells: operator × dtype × env ----------------------------------------------------


@dataclasses.dataclass
class CellSummary:
    """The experiments of one operator × dtype × env."""

    operator: str
    dtype: str
    env: str
    experiments: list[KernelExperiment]

    @property
    def best(self) -> KernelExperiment | None:
        """The best tip (:func:`best_tip`)."""
        return best_tip(self.experiments)

    @property
    def closest(self) -> KernelExperiment | None:
        """The highest cumulative score measured, whatever its outcome (for a cell that
        never improved: how close it came)."""
        found = rank([e for e in self.experiments if is_scored(e) and e.derived.ranked], limit=1)
        return found[0] if found else None

    @property
    def improved(self) -> bool:
        """Whether any experiment of the cell (not a control) is an improvement."""
        return any(counted_as(e) == "improvement" for e in self.experiments)

    def counts(self) -> dict[str, int]:
        """Experiments per outcome (and controls)."""
        return outcome_counts(self.experiments)


def cells_of(
    experiments: Iterable[KernelExperiment], names: dict[tuple[str, str, str], tuple[str, str, str]]
) -> list[CellSummary]:
    """The experiments grouped by operator × dtype × env (one campaign, any spelling:
    :func:`campaign_key`), each named as ``names`` (:attr:`Site.names`) says, sorted by
    name."""
    groups: dict[tuple[str, str, str], list[KernelExperiment]] = {}
    for exp in experiments:
        groups.setdefault(campaign_key(exp), []).append(exp)
    return sorted(
        (CellSummary(*names[key], members) for key, members in groups.items()),
        key=lambda cell: (cell.operator, cell.dtype, cell.env),
    )


def counted_as(exp: KernelExperiment) -> str:
    """What the report counts an experiment as: its outcome, or ``control``."""
    return exp.outcome


def outcome_counts(experiments: Iterable[KernelExperiment]) -> dict[str, int]:
    """How many experiments have each outcome, and how many are controls (every key of
    :data:`COUNTED` present)."""
    found = dict.fromkeys(COUNTED, 0)
    for exp in experiments:
        found[counted_as(exp)] += 1
    return found


def _counts_line(counts: dict[str, int]) -> str:
    return " ".join(
        f'{badge(outcome)} <span class="count">{count:,}</span>'
        for outcome, count in counts.items()
        if count
    )


def _mix(counts: dict[str, int]) -> str:
    """Outcomes at a glance: a small stacked bar, with the counts as its tooltip and as
    text (read aloud, found by the filter, not shown)."""
    said = ", ".join(f"{outcome} {count:,}" for outcome, count in counts.items() if count)
    return (
        f'<span class="mix">{svg.outcome_mix(list(counts.items()), said)}'
        f'<span class="said">{text(said)}</span></span>'
    )


def scope_text(
    revision: str | None,
    commit: str | None,
    places: Sequence[str] | None,
    checked_out: str | None = None,
) -> str:
    """What a report read, in words: ``the working tree``, ``revision HEAD~1
    (3f2c9e1a7b8d)``, ``the working tree (branch main) and 2 other refs: feat/x,
    origin/main`` (the refs after the working tree in ``places``, but the checked-out
    branch ``checked_out``, which is the working tree's commit; the first 6 named),
    ``the working tree (branch main), no other ref``, or ``the working tree (no ref
    matched)`` when refs were asked for and none was read."""
    if commit is not None:
        return f"revision {revision or commit} ({commit[:12]})"
    if not places:
        return "the working tree"
    refs = [place for place in list(places)[1:] if place != checked_out]
    tree = "the working tree" if checked_out is None else f"the working tree (branch {checked_out})"
    if not refs:
        return f"{tree}, no other ref" if checked_out is not None else f"{tree} (no ref matched)"
    named = ", ".join(refs[:6]) + (f" and {len(refs) - 6:,} more" if len(refs) > 6 else "")
    other = "other " if checked_out is not None else ""
    return f"{tree} and {len(refs):,} {other}ref{'' if len(refs) == 1 else 's'}: {named}"


def _filters_text(filters: dict[str, Any]) -> str:
    if not filters:
        return "all experiments"
    shown = []
    for name, value in filters.items():
        value = ", ".join(map(str, value)) if isinstance(value, (list, tuple)) else value
        shown.append(f"{name}={value}")
    return "experiments matching " + "; ".join(shown)


# --- overview ---------------------------------------------------------------------------


def _elsewhere(site: Site) -> str:
    """How many experiments the working tree does not hold as read (" N of them ...",
    "" when none is, or no ref was read)."""
    count = sum(bool(site.found_on(exp)) for exp in site.experiments)
    if not count:
        return ""
    return (
        f" {count:,} of them as only another ref holds {'it' if count == 1 else 'them'} (not"
        ' merged into the working tree), or built on such work: marked <span class="ref">on'
        ' REF</span> or <span class="ref">built on unmerged</span> beside the id.'
    )


def overview_page(site: Site) -> str:
    """``index.html``: counts by outcome, operators, the frontier, cells never improved."""
    root = ""
    counts = outcome_counts(site.experiments)
    cells = cells_of(site.experiments, site.names)
    total = len(site.experiments)
    parts = [
        "<h1>kexp report</h1>",
        f'<p class="lead">{total:,} experiment{"" if total == 1 else "s"} '
        f"({text(_filters_text(site.filters))}) on {len(site.operators):,} "
        f"operator{'' if len(site.operators) == 1 else 's'}, in {len(cells):,} "
        f"operator × dtype × env cell{'' if len(cells) == 1 else 's'}, read from "
        f"{text(site.scope)}.{_elsewhere(site)}</p>",
        "<h2>Outcomes</h2>",
        svg.outcome_bar(list(counts.items())),
        table(
            ["outcome", "experiments", "share"],
            [
                [badge(o), f"{c:,}", f"{100 * c / total:.1f}%" if total else "—"]
                for o, c in counts.items()
            ],
            table_id="outcomes",
            numeric=(1, 2),
        ),
    ]
    never = [cell for cell in cells if not cell.improved]
    never_by_operator: dict[str, int] = {}
    for cell in never:
        never_by_operator[cell.operator] = never_by_operator.get(cell.operator, 0) + 1
    operator_rows = []
    for operator, members in site.operators.items():
        op_counts = outcome_counts(members)
        tip = best_tip(members)
        operator_rows.append(
            [
                site.operator_link(operator, root),
                f"{len(members):,} {_mix(op_counts)}",
                cumulative_text(tip) if tip is not None else "—",
                f"{never_by_operator.get(operator, 0):,}",
            ]
        )
    parts += [
        "<h2>Operators</h2>",
        "<p>Each operator's page has its score over the iterations, its lineage, the "
        "speedup per configuration and its lessons. Beside the number of its experiments, "
        "each outcome's share of them (the counts as the bar's tooltip).</p>",
        '<p class="legend mix">'
        + " ".join(f'<span><span class="key o-{o}"></span>{o}</span>' for o in COUNTED)
        + "</p>",
        filter_box("operators", "filter operators"),
        '<div class="wide">',
        table(
            ["operator", "experiments", "best cumulative", "cells never improved"],
            operator_rows,
            table_id="operators",
            numeric=(1, 2, 3),
        ),
        "</div>",
    ]
    frontier_rows = []
    for cell in cells:
        best = cell.best
        if best is None:
            continue
        frontier_rows.append(
            [
                site.operator_link(cell.operator, root, 60),
                one_line(cell.dtype),
                one_line(cell.env, 60),
                cumulative_text(best),
                badge(best.outcome),
                site.experiment_link(best.id, root),
                one_line(best.change_summary, 90),
                f"{len(cell.experiments):,}",
            ]
        )
    parts += [
        "<h2>Frontier</h2>",
        "<p>The best tip of every operator × dtype × env: the best cumulative score (the "
        "speedup over the operator's reference, the product of the steps along its "
        "lineage) of a step that improved (never one within noise, a regression, an "
        "interference, a control), with its interval when its steps record one.</p>",
        filter_box("frontier", "filter the frontier"),
        '<div class="wide">',
        table(
            [
                "operator",
                "dtype",
                "env",
                "best cumulative",
                "outcome",
                "experiment",
                "summary",
                "experiments",
            ],
            frontier_rows,
            table_id="frontier",
            numeric=(3, 7),
        ),
        "</div>",
    ]
    never_rows = []
    for cell in never:
        best = cell.closest
        cell_counts = cell.counts()
        never_rows.append(
            [
                site.operator_link(cell.operator, root, 60),
                one_line(cell.dtype),
                one_line(cell.env, 60),
                f"{len(cell.experiments):,}",
                cumulative_text(best) if best is not None else "—",
                site.experiment_link(best.id, root) if best is not None else "—",
                _counts_line({o: c for o, c in cell_counts.items() if o != "improvement"}),
            ]
        )
    parts += [
        f"<h2>Never improved ({len(never):,})</h2>",
        "<p>Operator × dtype × env cells where no experiment is an improvement.</p>",
    ]
    if never_rows:
        parts += [
            filter_box("never", "filter cells"),
            '<div class="wide">',
            table(
                [
                    "operator",
                    "dtype",
                    "env",
                    "experiments",
                    "best cumulative",
                    "experiment",
                    "outcomes",
                ],
                never_rows,
                table_id="never",
                numeric=(3, 4),
            ),
            "</div>",
        ]
    else:
        parts.append("<p>None: every cell has at least one improvement.</p>")
    return page(
        "kexp report",
        "".join(parts),
        root=root,
        crumbs=[("", "Overview")],
        script=True,
        footer=site.footer,
    )


# --- operator page ----------------------------------------------------------------------


def _tooltip(exp: KernelExperiment, id_length: int) -> str:
    score = (
        describe_score(exp.derived.shown_score)
        if isinstance(exp.score, (int, float))
        else str(exp.score)
    )
    cumulative = exp.cumulative_score
    reached = f"  cumulative {cumulative:.4f}" if cumulative is not None else ""
    said = f"{exp.outcome}  {exp.dtype_sig} · {exp.env}  {exp.change_summary}"
    return f"{exp.id[:id_length]}  {score}{reached}  {said}"


def _plotted(exp: KernelExperiment) -> float:
    """Where the score chart draws an experiment: its cumulative score when it ranks
    (NaN: in the band below)."""
    derived = exp.derived
    if derived.ranked and derived.cumulative_score is not None:
        return float(derived.cumulative_score)
    return math.nan


def _legend(items: Sequence[tuple[str, str]]) -> str:
    return (
        '<p class="legend">'
        + " ".join(f'<span class="key {cls}"></span>{text(label)}' for cls, label in items)
        + "</p>"
    )


def _series_legend(points: Sequence[svg.Point]) -> str:
    """The colour of each dtype × env's lines on the score chart, when there are two or
    more ("" for one)."""
    series = svg.campaign_series(points)
    if len(series) < 2:
        return ""
    keys = "".join(
        '<span><svg class="swatch" width="16" height="10" aria-hidden="true">'
        f'<path d="M0 5H16" stroke="{colour}"/></svg>{text(svg.campaign_label(campaign))}'
        "</span> "
        for campaign, colour in series.items()
    )
    return f'<p class="legend series">Lines by dtype · env: {keys}</p>'


def _best_paths(forest: Sequence[TreeNode], best_ids: Sequence[str]) -> list[list[str]]:
    """The ids from its tree's root down to each of ``best_ids`` (its first node in the
    forest's depth-first order; [] when it is in none), the forest walked once."""
    parents: dict[int, TreeNode | None] = {}
    first: dict[str, TreeNode] = {}
    for tree in forest:
        stack: list[tuple[TreeNode, TreeNode | None]] = [(tree, None)]
        while stack:
            node, parent = stack.pop()
            parents[id(node)] = parent
            first.setdefault(node.experiment.id, node)
            stack.extend((child, node) for child in reversed(node.children))
    paths = []
    for best_id in best_ids:
        path: list[str] = []
        step = first.get(best_id)
        while step is not None:
            path.append(step.experiment.id)
            step = parents[id(step)]
        paths.append(path[::-1])
    return paths


def operator_pages(site: Site, operator: str) -> list[tuple[str, str]]:
    """An operator's pages, as (path in the report, HTML): its page (score chart,
    lineage, configuration heatmap, the first lessons and the first rows of its table of
    experiments), then the further pages of lessons and of the table, if any."""
    root = "../"
    members = site.operators[operator]
    counts = outcome_counts(members)
    cells = cells_of(members, site.names)
    names = site.names
    # A best is one campaign's (operator × dtype × env), as the frontier keeps it.
    bests = [best for cell in cells if (best := cell.best) is not None]
    forest = build_forest(members)
    paths = _best_paths(forest, [best.id for best in bests])
    position = {exp.id: index for index, exp in enumerate(members)}
    # Each experiment at its cumulative score (the speedup over the reference): the best
    # so far rises as the campaign did. Without one (a control, an ancestor buggy,
    # pending or missing), in the band below.
    points = [
        svg.Point(
            f"{root}{experiment_href(exp.id)}",
            _tooltip(exp, site.id_length),
            exp.outcome,
            _plotted(exp),
            exp.cumulative_ci if exp.derived.ranked else None,
            names[campaign_key(exp)][1:],
        )
        for exp in members
    ]
    series = svg.campaign_series(points)
    parts = [
        f"<h1>{one_line(operator or '(none)')}</h1>",
        f'<p class="lead">{len(members):,} experiments: {_counts_line(counts)}'
        + (f" · read from {text(site.scope)}" if site.scope != Site.scope else "")
        + "</p>",
    ]
    tips = [
        f"{site.experiment_link(best.id, root)} {cumulative_text(best)} "
        f"over the reference (this step {score_text(best)}) "
        f"{one_line(best.dtype_sig)} · {one_line(best.env, 60)} — "
        f"{one_line(best.change_summary)}"
        for best in bests
    ]
    if len(tips) == 1:
        parts.append(f"<p>Best tip: {tips[0]}</p>")
    elif tips:
        parts.append(
            "<p>Best tips, one per dtype × env:</p><ul>"
            + "".join(f"<li>{tip}</li>" for tip in tips)
            + "</ul>"
        )
    cell_rows = []
    for cell in cells:
        cell_best = cell.best
        cell_rows.append(
            [
                one_line(cell.dtype),
                one_line(cell.env, 70),
                f"{len(cell.experiments):,}",
                cumulative_text(cell_best) if cell_best is not None else "—",
                site.experiment_link(cell_best.id, root) if cell_best is not None else "—",
                "yes" if cell.improved else '<span class="never">never</span>',
            ]
        )
    parts += [
        "<h2>Score over iterations</h2>",
        _legend(
            [
                ("o-improvement", "improvement"),
                ("o-marginal", "marginal"),
                ("o-regression tri", "regression"),
                ("o-interference", "interference"),
                ("o-buggy cross", "buggy"),
                ("o-failed cross", "failed (crashed or timed out)"),
                ("o-pending", "pending"),
                ("o-control", "control (A/A run: the noise floor)"),
                ("line-best", "lineage path to the best tip (of each dtype × env)"),
                ("line-sofar", "best so far (of each dtype × env)"),
                ("line-ci", "interval"),
            ]
        ),
        _series_legend(points),
        "<p>Each experiment at its cumulative score: the speedup over the operator's "
        "reference, the product of the steps along its lineage.</p>",
        '<div class="scroll">',
        svg.score_chart(
            points,
            [[position[i] for i in path if i in position] for path in paths],
            axis="speedup over the reference",
        ),
        "</div>",
        f"<h2>Lineage ({len(forest):,} tree{'' if len(forest) == 1 else 's'})</h2>",
        "<p>Each tree grows to the right, one generation per column. The path to the "
        "best tip of each dtype × env is drawn thick, in its colour on the chart above, the "
        "best ringed in green; a node ringed in "
        "red is a dead end (built on, but nothing built on it reached a higher "
        "cumulative score than it or its fork point, other than within noise; a branch "
        "below its fork point, each step of it).</p>",
        '<div class="scroll tall">',
        svg.lineage_graph(
            forest,
            lambda node: f"{root}{experiment_href(node.experiment.id)}",
            lambda node: (
                _tooltip(node.experiment, site.id_length)
                + ("  [dead end]" if node.dead_end else "")
            ),
            best_paths=paths,
            path_colours=[series[names[campaign_key(best)][1:]] for best in bests],
        ),
        "</div>",
    ]
    parts += _heatmap_section(members, root, site.id_length)
    parts += [
        "<h2>Per dtype and environment</h2>",
        table(
            ["dtype", "env", "experiments", "best cumulative", "best", "improved"],
            cell_rows,
            table_id="cells",
            numeric=(2, 3),
        ),
    ]
    slug = site.slugs[operator]
    lessons = _lesson_entries(site, members, root)
    lesson_pages = _chunks(lessons, LESSONS_PER_PAGE)
    rows = [
        [
            site.experiment_link(exp.id, root),
            text(exp.created_at[:10]),
            score_text(exp),
            cumulative_text(exp),
            badge(counted_as(exp)),
            one_line(exp.dtype_sig),
            one_line(exp.env, 40),
            one_line(exp.change_summary, 100),
        ]
        for exp in members
    ]
    row_pages = _chunks(rows, ROWS_PER_PAGE)
    parts.append(f"<h2>Lessons ({len(lessons):,})</h2>")
    parts += _lessons_list(lesson_pages, 1, slug, root)
    parts.append(f"<h2>Experiments ({len(members):,})</h2>")
    parts += _experiments_table(row_pages, 1, slug, root)
    name = operator or "(none)"
    crumbs = [(f"{root}index.html", "Overview"), ("", name)]
    made = [(f"{OPERATOR_DIR}/{slug}.html", page(
        name, "".join(parts), root=root, crumbs=crumbs, script=True, footer=site.page_footer
    ))]  # fmt: skip
    here = [(f"{root}index.html", "Overview"), (f"{root}{OPERATOR_DIR}/{slug}.html", name)]
    further: list[tuple[str, int, Callable[[int], list[str]]]] = [
        ("lessons", len(lesson_pages), lambda n: _lessons_list(lesson_pages, n, slug, root)),
        ("experiments", len(row_pages), lambda n: _experiments_table(row_pages, n, slug, root)),
    ]
    for kind, count, render in further:
        for number in range(2, count + 1):
            title = f"{name}: {kind} ({number} of {count})"
            content = [f"<h1>{one_line(name)}: {kind}</h1>", *render(number)]
            made.append((
                _paged_name(slug, kind, number),
                page(title, "".join(content), root=root, crumbs=[*here, ("", f"{kind} {number}")],
                     script=kind == "experiments", footer=site.page_footer),
            ))  # fmt: skip
    return made


def _chunks(items: Sequence[_T], size: int) -> list[Sequence[_T]]:
    """``items`` in pages of ``size`` (one empty page when there is none)."""
    return [items[start : start + size] for start in range(0, len(items), size)] or [items[:0]]


def _paged_name(slug: str, kind: str, number: int) -> str:
    """The path of page ``number`` (from 1) of an operator's ``kind`` of list."""
    if number == 1:
        return f"{OPERATOR_DIR}/{slug}.html"
    return f"{OPERATOR_DIR}/{slug}--{kind}-{number}.html"


def _pager(kind: str, chunks: Sequence[Sequence[Any]], number: int, slug: str, root: str) -> str:
    """Where this page of a list is among its pages, with a link to each ("" for one)."""
    if len(chunks) <= 1:
        return ""
    first = sum(len(chunk) for chunk in chunks[: number - 1]) + 1
    total = sum(len(chunk) for chunk in chunks)
    links = " ".join(
        f"<b>{n}</b>" if n == number else f'<a href="{root}{_paged_name(slug, kind, n)}">{n}</a>'
        for n in range(1, len(chunks) + 1)
    )
    last = first + len(chunks[number - 1]) - 1
    return f'<p class="pager">{kind} {first:,}–{last:,} of {total:,} · page {links}</p>'


def _experiments_table(
    chunks: Sequence[Sequence[list[str]]], number: int, slug: str, root: str
) -> list[str]:
    """Page ``number`` of an operator's table of experiments (oldest first)."""
    pager = _pager("experiments", chunks, number, slug, root)
    return [
        pager,
        filter_box("experiments", "filter experiments"),
        table(
            ["id", "created", "score", "cumulative", "outcome", "dtype", "env", "summary"],
            chunks[number - 1],
            table_id="experiments",
            numeric=(2, 3),
        ),
        pager,
    ]


def _lesson_entries(
    site: Site, members: Sequence[KernelExperiment], root: str
) -> list[tuple[str, str]]:
    """(outcome, list item) of every lesson of an operator, with its dtype and env,
    grouped as
    :data:`~kexp.agents.lessons.LESSON_GROUPS` orders them, oldest first in a group."""
    groups: dict[str, list[KernelExperiment]] = {name: [] for name in LESSON_GROUPS}
    for exp in members:
        if exp.outcome in groups and not exp.is_control:
            groups[exp.outcome].append(exp)
    entries = []
    for name, items in groups.items():
        for exp in items:
            insight = site.insights.get(exp.id, "")
            shown = one_line(insight) if insight else '<span class="none">(no key insight)</span>'
            parent = site.by_id.get(exp.pid) if exp.pid else None
            over = speedup_over_parent(exp, parent.cumulative_score if parent else None)
            over_text = (  # a step measured against the reference: judged over its parent
                f'<div class="over-parent">Over parent {site.experiment_link(exp.pid, root)}: '
                f"{over:.4f} ({(over - 1) * 100:+.1f}%); {score_text(exp)} is over the "
                "reference</div>"
                if over is not None
                else ""
            )
            entries.append(
                (
                    name,
                    f"<li>{site.experiment_link(exp.id, root)} {score_text(exp)} "
                    f"{one_line(exp.change_summary)} "
                    f'<span class="campaign">({text(svg.campaign_label((exp.dtype_sig, exp.env)))})'
                    f"</span>{over_text}"
                    f'<div class="insight">Key insight: {shown}</div></li>',
                )
            )
    return entries


def _lessons_list(
    chunks: Sequence[Sequence[tuple[str, str]]], number: int, slug: str, root: str
) -> list[str]:
    """Page ``number`` of an operator's lessons, grouped by outcome."""
    entries = chunks[number - 1]
    if not entries:
        return ["<p>No buggy, regressed, marginal or interfering experiment.</p>"]
    pager = _pager("lessons", chunks, number, slug, root)
    parts = [pager]
    for name in LESSON_GROUPS:
        items = [item for outcome, item in entries if outcome == name]
        if items:
            parts.append(
                f"<details open><summary>{badge(name)} {len(items):,}</summary>"
                f'<ul class="lessons">{"".join(items)}</ul></details>'
            )
    return [*parts, pager]


def _number(value: Any) -> float | None:
    if isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value):
        return float(value)
    return None


def _heatmap_section(members: Sequence[KernelExperiment], root: str, id_length: int) -> list[str]:
    with_results = [exp for exp in members if exp.results]
    parts = ["<h2>Speedup per configuration</h2>"]
    if not with_results:
        return [*parts, "<p>No experiment of this operator records per-configuration results.</p>"]
    rows: dict[str, int] = {}
    for exp in with_results:
        for result in exp.results:
            rows.setdefault(str(result.get("config", "")), len(rows))
    columns = [
        (f"{root}{experiment_href(exp.id)}", _tooltip(exp, id_length)) for exp in with_results
    ]
    cells = []
    for column, exp in enumerate(with_results):
        shown_id = exp.id[:id_length]
        for result in exp.results:
            config = str(result.get("config", ""))
            speedup = _number(result.get("speedup"))
            base, cand = _number(result.get("baseline")), _number(result.get("candidate"))
            detail = f" ({base:g} → {cand:g})" if base is not None and cand is not None else ""
            shown = f"{speedup:.4f}×" if speedup is not None else "no speedup"
            cells.append(
                svg.Cell(column, rows[config], speedup, f"{shown_id}  {config}: {shown}{detail}")
            )
    return [
        *parts,
        f"<p>{len(with_results):,} experiments record results for {len(rows):,} "
        "configurations (one column per experiment, oldest first).</p>",
        '<div class="scroll">',
        svg.heatmap(list(rows), columns, cells),
        "</div>",
    ]
