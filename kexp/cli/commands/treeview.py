"""``kexp tree``'s text: one line per experiment, a branch indented, an only child (the
next step of a chain) in its parent's column; the columns (id, cumulative score, step
score, Δ, outcome, summary, marks) laid out for the terminal's width."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import click

from kexp.cli.commands.common import SUSPECT_LABEL, ref_labels, suspect_reasons
from kexp.cli.commands.terminal import one_line, truncate
from kexp.core.spelling import canonical
from kexp.output.treerows import step_score

if TYPE_CHECKING:
    from kexp.core.model import KernelExperiment
    from kexp.storage.lineage import TreeNode


def print_trees(
    forest: list[TreeNode],
    width: int | None,
    style: Any,
    focus: str | None,
    id_length: int,
    refs: RefKeys,
) -> None:
    """Print each tree of ``forest`` (a blank line between two) at ``width`` (None: no
    limit), ids ``id_length`` characters long, ``focus`` (an id) marked ``<``, where each
    was found keyed by ``refs``; ``style`` colours a line (:func:`styler`)."""
    layout = _layout(forest, width)
    for number, root in enumerate(forest):
        if number:
            click.echo("")  # a tree starts at its root, after a blank line
        _print_node(root, "", "", layout, style, focus, id_length, refs)


@dataclasses.dataclass
class RefKeys:
    """Where a tree's experiments were found, read across refs: a short key (``@1``)
    for each place other than the working tree, its label (:func:`ref_labels`) told
    once under the tree, so that every line keeps its room at 80 columns."""

    where: Callable[[KernelExperiment], Any] | None
    labels: dict[str, str] = dataclasses.field(default_factory=dict)
    of_id: dict[str, str] = dataclasses.field(default_factory=dict)


def ref_keys(forest: list[TreeNode], where: Callable[[KernelExperiment], Any] | None) -> RefKeys:
    """The keys of :class:`RefKeys` for the experiments of ``forest`` (none without
    ``where``: a store that reads no refs)."""
    keys = RefKeys(where)
    if where is None:
        return keys
    for root in forest:
        for node in root.walk():
            sighting = where(node.experiment)
            label = ref_labels([sighting])[0] if sighting is not None else ""
            if label and label != "local":
                key = keys.labels.setdefault(label, f"@{len(keys.labels) + 1}")
                keys.of_id[node.experiment.id] = key
    return keys


@dataclasses.dataclass(frozen=True)
class _Layout:
    """How a tree's lines are laid out at ``width`` (None: no limit). Below
    :data:`_COMPACT_BELOW` columns the summary is given the room: one space between the
    columns, three decimals a score and one a Δ, the outcome's column as wide as the
    longest outcome shown, the suspect mark short."""

    width: int | None
    compact: bool
    outcome_width: int

    @property
    def gap(self) -> str:
        return " " if self.compact else "  "

    @property
    def digits(self) -> int:
        return 3 if self.compact else 4

    @property
    def head(self) -> int:
        """A line's head after its lead (mark, id, scores, Δ, outcome) as a rule: a longer
        Δ (+400.00%) shortens the summary, not the lead."""
        return len(f"* 0123456789{self.gap}{1:.{self.digits}f} {1:.{self.digits}f} "
                   f"{_delta_text(1.0, self)}{self.gap}{'':<{self.outcome_width}} ")  # fmt: skip


#: Below this width a tree's lines are compact (:class:`_Layout`): the full head and 40
#: characters of summary do not fit.
_COMPACT_BELOW = len("* 0123456789  1.0000 1.0000 Δ  +1.00%  interference ") + 40


def _layout(forest: list[TreeNode], width: int | None) -> _Layout:
    compact = width is not None and width < _COMPACT_BELOW
    outcomes = [len(node.experiment.outcome) for root in forest for node in root.walk()]
    return _Layout(width, compact, max(outcomes, default=12) if compact else 12)


def _delta_text(pct: float, layout: _Layout) -> str:
    """Δ, a space and the percentage, right-aligned: ``Δ  +5.00%``, ``Δ +25.00%``;
    compact, as wide up to ±999%: ``Δ +1.9%``, whole percents from ±10% (``Δ  +25%``)."""
    if not layout.compact:
        return f"Δ {pct:+6.2f}%"
    return f"Δ {pct:+4.1f}%" if abs(pct) < 9.95 else f"Δ {pct:+4.0f}%"


def _delta(node: TreeNode, layout: _Layout) -> str:
    if node.delta_pct is None:
        blank = " " * len(_delta_text(0.0, layout))
        return f"Δ{blank[2:]}-" if node.depth else blank
    return _delta_text(node.delta_pct, layout)


def _print_node(
    root: TreeNode,
    lead: str,
    child_lead: str,
    layout: _Layout,
    style: Any,
    focus: str | None,
    id_length: int,
    refs: RefKeys,
) -> None:
    """Print a tree, one line per node (ids ``id_length`` characters long), depth first
    (no recursion: a lineage may be thousands of iterations deep). An only child, the
    next step of a chain, is printed under its parent at its indent, without a branch:
    a campaign's twelve steps stay in one column at 80 columns."""
    # each node with its parent's env in kexp's spelling (None: a root)
    stack: list[tuple[TreeNode, str, str, str | None]] = [(root, lead, child_lead, None)]
    while stack:
        node, lead, child_lead, parents = stack.pop()
        env = node.experiment.env.strip()
        # Another machine, not the parent's spelt otherwise (MI300X ROCm-6.2 is ROCm 6.2).
        mine = canonical("env", env)
        moved = env if parents is not None and mine != parents else None
        where = refs.of_id.get(node.experiment.id)
        _print_line(node, lead, layout, style, focus, id_length, where, moved)
        if len(node.children) == 1:
            stack.append((node.children[0], child_lead, child_lead, mine))
            continue
        last = len(node.children) - 1
        for index, child in reversed(list(enumerate(node.children))):
            stack.append(
                (
                    child,
                    child_lead + ("└── " if index == last else "├── "),
                    child_lead + ("    " if index == last else "│   "),
                    mine,
                )
            )


#: The fewest characters of a summary a tree's line keeps before its lead is shortened.
_MIN_SUMMARY = 12


def _fit_lead(head: str, lead: int, room: int, layout: _Layout) -> str:
    """``head`` (its first ``lead`` characters the tree's lines) in ``room`` characters:
    the lines of a deep tree are cut from the left ("…│   └── "), as many characters of
    every line of one depth (siblings line up); the rest is kept."""
    over = lead + layout.head - room
    if over <= 0 or lead == 0:
        return head
    return "…" + head[min(lead, over + 1) :]


def _print_line(
    node: TreeNode,
    lead: str,
    layout: _Layout,
    style: Any,
    focus: str | None,
    id_length: int,
    ref: str | None,
    moved: str | None = None,
) -> None:
    """One node's line; ``moved``: the env it was measured on, when its parent's is
    another (``[env: MI300X]``: its step is not the parent's machine's)."""
    exp = node.experiment
    mark = "*" if node.on_best_path else " "
    marks = ["[dead end]"] if node.dead_end else []
    marks += ["[best]"] if node.is_best else []
    marks += ["[control]"] if exp.is_control else []
    if suspect_reasons(exp):
        marks.append("[suspect]" if layout.compact else f"[{SUSPECT_LABEL}]")
    marks += [f"[env: {one_line(moved)}]"] if moved else []
    marks += ["<"] if exp.id == focus else []
    marks += [ref] if ref else []  # where it was found (read across refs)
    gap, digits, width = layout.gap, layout.digits, layout.width
    tail = "".join(gap + m for m in marks)
    from kexp.format.samples import describe_score

    cumulative = exp.cumulative_score
    shown = "-" if cumulative is None else f"{cumulative:.{digits}f}"
    step = describe_score(step_score(exp), (), digits)
    head = f"{lead}{mark} {exp.id[:id_length]}{gap}{shown:>{digits + 2}} {step:>{digits + 2}} "
    head += f"{_delta(node, layout)}{gap}{exp.outcome:<{layout.outcome_width}} "
    summary = one_line(exp.change_summary)
    if width is not None:
        # The marks (``[best]``, ``<``) do not count: every line of a depth keeps one
        # lead (siblings line up), their summaries shortened instead.
        room = width - _MIN_SUMMARY - (id_length - 10)
        head = _fit_lead(head, len(lead), room, layout)
        summary = truncate(summary, width - len(head) - len(tail))
    line = head + summary + tail
    if width is not None:
        line = truncate(line, width)  # tags longer than the terminal: the last resort
    if node.on_best_path:
        line = style(line, fg="green", bold=node.is_best)
    elif node.dead_end or exp.outcome in ("buggy", "failed", "regression"):
        line = style(line, fg="yellow" if exp.outcome == "regression" else "red")
    click.echo(line.rstrip())
