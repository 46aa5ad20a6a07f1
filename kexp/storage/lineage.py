"""Lineage trees: experiments linked through ``pid``, with each step's score, the change
of the cumulative score (the speedup over the operator's reference, :mod:`kexp.core.campaign`)
against the parent, the path to the best tip, and dead ends.

The Python twin of ``kexp tree`` is :func:`lineage_forest` (a whole store, or the
experiments matching filters) and :func:`lineage_of` (one experiment's ancestors and
descendants).
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import TYPE_CHECKING, Any, TypeVar

from kexp.core.campaign import Derivation, derive
from kexp.core.cumulative import Derived, cumulative_change
from kexp.core.model import KernelExperiment, attach
from kexp.core.outcome import UNMEASURED_OUTCOMES
from kexp.storage.query import best_tip, chronological

if TYPE_CHECKING:
    from kexp.storage.store import Store

#: A node of a lineage: a tree's, or a record linked through ``pid``.
_N = TypeVar("_N")


@dataclasses.dataclass
class TreeNode:
    """One experiment in a lineage tree.

    ``delta`` is the cumulative score minus the parent's (None for a root or when
    either has none); ``delta_pct`` the same relative to the parent's cumulative score,
    in percent (for a step measured against its parent: its own speedup).
    ``is_best`` marks the experiment of the tree with the best cumulative score among
    the steps that improved (its best *tip*: :func:`kexp.storage.query.best_tip`) and
    ``on_best_path`` the nodes from the root to it; ``dead_end`` marks an experiment
    others built on (it has children) that no descendant beats (a higher cumulative
    score, not within noise of its parent), never the best nor a control.
    """

    experiment: KernelExperiment
    children: list[TreeNode] = dataclasses.field(default_factory=list)
    depth: int = 0
    delta: float | None = None
    delta_pct: float | None = None
    on_best_path: bool = False
    dead_end: bool = False
    is_best: bool = False
    #: On a tree's root: the experiment of the whole tree with the best cumulative score
    #: (None: none ranks), shown or not (:func:`lineage_of` shows a part of a tree).
    best_tip: KernelExperiment | None = None
    #: On the root of :func:`lineage_of`'s tree: the full id of the experiment asked for.
    focus: str | None = None

    @property
    def scored(self) -> bool:
        """Whether this experiment's score counts (not pending, not buggy)."""
        return is_scored(self.experiment)

    def walk(self) -> Iterator[TreeNode]:
        """This node and every node below it, depth first, in display order (without
        recursion: a lineage may be thousands of iterations deep)."""
        stack = [self]
        while stack:
            node = stack.pop()
            yield node
            stack.extend(reversed(node.children))

    def to_dict(self) -> dict[str, Any]:
        """The subtree as JSON-ready data (stable keys)."""
        exp = self.experiment
        return {
            "id": exp.id,
            "pid": exp.pid,
            "score": exp.score,
            "measured_against": exp.measured_against,
            "cumulative_score": exp.cumulative_score,
            "cumulative_ci": None if exp.cumulative_ci is None else list(exp.cumulative_ci),
            "control": exp.is_control,
            "delta": self.delta,
            "delta_pct": self.delta_pct,
            "outcome": exp.outcome,
            "change_summary": exp.change_summary,
            "operator_sig": exp.operator_sig,
            "dtype_sig": exp.dtype_sig,
            "on_best_path": self.on_best_path,
            "is_best": self.is_best,
            "dead_end": self.dead_end,
            "children": [child.to_dict() for child in self.children],
        }


def is_scored(exp: KernelExperiment) -> bool:
    """Whether an experiment's score is a measurement worth comparing."""
    return exp.outcome not in UNMEASURED_OUTCOMES


def build_forest(experiments: Iterable[KernelExperiment]) -> list[TreeNode]:
    """Link experiments into trees through ``pid``; roots oldest first.

    A root is an experiment without a parent among ``experiments``. Children are oldest
    first. Experiments caught in a ``pid`` cycle (which validation reports) are not
    lost: the oldest of each cycle becomes a root. Experiments no store handed out get
    their derived values (the cumulative score) from among themselves.
    """
    ordered = chronological(experiments)
    if not all(e.derived_by_store for e in ordered):
        # Experiments no store handed out: their values are derived among themselves.
        derivation = derive(sorted(ordered, key=lambda e: str(e.path or "")))
        for exp in ordered:
            if not exp.derived_by_store:
                attach(exp, derived=derivation.of(exp))
    forest = _forest(ordered)
    for tree in forest:
        annotate(tree)
    return forest


def _forest(ordered: list[Any]) -> list[TreeNode]:
    """:func:`build_forest`'s trees of ``ordered`` (oldest first; experiments, or rows
    as the nodes' ``experiment``), not annotated."""
    by_id = {e.id: e for e in ordered}
    kids: dict[str, list[KernelExperiment]] = {}
    for exp in ordered:
        if exp.pid and exp.pid in by_id and exp.pid != exp.id:
            kids.setdefault(exp.pid, []).append(exp)
    roots = [e for e in ordered if not (e.pid and e.pid in by_id and e.pid != e.id)]
    placed: set[str] = set()
    forest: list[TreeNode] = []

    def grow(start: KernelExperiment) -> TreeNode:
        """The tree below ``start``, depth first, children oldest first (no recursion)."""
        placed.add(start.id)
        top = TreeNode(start)
        stack = [(top, iter(kids.get(start.id, [])))]
        while stack:
            node, pending = stack[-1]
            child = next(pending, None)
            if child is None:
                stack.pop()
            elif child.id not in placed:
                placed.add(child.id)
                grown = TreeNode(child, depth=node.depth + 1)
                node.children.append(grown)
                stack.append((grown, iter(kids.get(child.id, []))))
        return top

    for root in roots:
        forest.append(grow(root))
    for exp in ordered:  # cycles: no root leads to them
        if exp.id not in placed:
            forest.append(grow(exp))
    return forest


def annotate(root: TreeNode) -> None:
    """Fill in deltas, the best path and dead ends of the tree under ``root`` (without
    recursion: a lineage may be thousands of iterations deep)."""
    nodes = list(root.walk())
    parents: dict[int, TreeNode] = {}
    for node in nodes:
        before = node.experiment.cumulative_score
        for child in node.children:
            parents[id(child)] = node
            after = child.experiment.cumulative_score
            if before is not None and after is not None:
                child.delta, child.delta_pct = cumulative_change(before, after)
    for node in _dead_ends(root, _children, _derived):
        node.dead_end = True
    tip = best_tip(n.experiment for n in nodes)
    if tip is not None:
        best = next(n for n in nodes if n.experiment is tip)
        root.best_tip = best.experiment
        best.is_best = True
        best.dead_end = False
        step: TreeNode | None = best
        while step is not None:
            step.on_best_path = True
            step = parents.get(id(step))


def _beating(derived: Derived) -> float:
    """What a descendant beats its ancestors with: its cumulative score when it ranks
    (not a control, and known), and not within noise (such a step beats nothing: its
    code is its parent's, whatever its product); -inf otherwise."""
    if not derived.ranked or derived.cumulative_score is None or derived.outcome == "marginal":
        return -math.inf
    return derived.cumulative_score


def _children(node: TreeNode) -> Sequence[TreeNode]:
    return node.children


def _derived(node: TreeNode) -> Derived:
    return node.experiment.derived


def _own(exp: KernelExperiment) -> Derived:
    return exp.derived


def _dead_ends(
    root: _N, children: Callable[[_N], Sequence[_N]], derived: Callable[[_N], Derived]
) -> list[_N]:
    """The dead ends of the tree under ``root``, best tip or not (without recursion):
    each ranked experiment others built on that nothing built on it beats
    (:func:`_beating`), nor the best its lineage reached before it (its fork point's
    cumulative score, or an ancestor's above); below a fork point, a branch that never
    beats it is a dead end whole (each ranked step of it, a leaf too)."""
    order: list[tuple[_N, float]] = []  # depth first, each with the best above it
    stack = [(root, -math.inf)]
    while stack:
        node, above = stack.pop()
        order.append((node, above))
        level = max(above, _beating(derived(node)))
        stack.extend((child, level) for child in children(node))
    best_in: dict[int, float] = {}
    ends: set[int] = set()
    sunk: set[int] = set()  # the branches that never get above their fork point
    for node, above in reversed(order):  # children before their parent
        kids = children(node)
        best_below = max((best_in[id(child)] for child in kids), default=-math.inf)
        value = derived(node)
        best_in[id(node)] = max(_beating(value), best_below)
        own = value.cumulative_score if value.ranked else None
        if kids and own is not None and best_below <= max(own, above):
            ends.add(id(node))
            if own < above:
                sunk.add(id(node))
    found: list[_N] = []
    marks = [(root, False)]
    while marks:
        node, in_sunk = marks.pop()
        if id(node) in ends or (in_sunk and derived(node).ranked):
            found.append(node)
        in_sunk = in_sunk or id(node) in sunk
        marks.extend((child, in_sunk) for child in children(node))
    return found


def dead_end_ids(records: Iterable[Any], derivation: Derivation | None = None) -> set[str]:
    """The ids of :func:`dead_end_records`."""
    return {record.id for record in dead_end_records(records, derivation)}


def dead_end_records(records: Iterable[Any], derivation: Derivation | None = None) -> list[Any]:
    """Those of ``records`` (experiments or rows, linked through ``pid``; their values
    in ``derivation``, else the experiments' own) that ``kexp tree`` marks dead ends
    (:attr:`TreeNode.dead_end`, the trees :func:`build_forest` makes of them): built on,
    and nothing built on them beats them or their fork point; each step of a branch
    that never beats its fork point. A tree's best tip is none."""
    derived = derivation.of if derivation is not None else _own
    found: list[Any] = []
    for tree in _forest(chronological(records)):
        ends = _dead_ends(tree, _children, lambda node: derived(node.experiment))
        tip = best_tip((n.experiment for n in tree.walk()), derivation=derivation)
        found += [end.experiment for end in ends if end.experiment is not tip]
    return found


def lineage_forest(store: Store, **filters: Any) -> list[TreeNode]:
    """The lineage trees of the experiments matching ``filters`` (all by default).

    An experiment whose parent does not match the filters becomes a root. The trees
    hold front-matter (``list_experiments(brief=True)``: no file is read; read the
    bodies of those you need with :meth:`kexp.Store.with_bodies`).
    """
    return build_forest(store.list_experiments(brief=True, **filters))


def lineage_of(store: Store, exp_id: str) -> TreeNode:
    """One experiment's lineage: its ancestors down from the oldest, then every
    descendant, front-matter only (as :func:`lineage_forest`'s), from one read of the
    store. Siblings of the ancestors (and their descendants) are left out, but count:
    the best path, the best tip (:attr:`TreeNode.best_tip`, shown or not) and the dead
    ends are those of the whole tree, as ``kexp tree`` without an id marks them. The
    root's :attr:`TreeNode.focus` is the full id asked for."""
    found = store.found()
    full_id = store.resolve_id(exp_id, found=found)
    derivation = found.derivation(store.settings)
    by_id = derivation.records()  # the first file of each id, as every query counts it
    if full_id not in by_id:  # its file is invalid: the error that says why
        store.get_experiment(full_id)
    chain, seen = [by_id[full_id]], {full_id}
    while chain[-1].pid in by_id and chain[-1].pid not in seen:  # up to a root or a cycle
        seen.add(chain[-1].pid)
        chain.append(by_id[chain[-1].pid])
    kids: dict[str, list[Any]] = {}
    for row in by_id.values():
        kids.setdefault(row.pid, []).append(row)
    members, queue = {chain[-1].id: chain[-1]}, [chain[-1].id]
    while queue:  # the whole tree below the oldest ancestor
        for child in kids.get(queue.pop(), []):
            if child.id not in members:
                members[child.id] = child
                queue.append(child.id)
    folder, settings = store.experiments_dir, store.settings
    experiments = [
        attach(row.to_experiment(folder), settings, derived=derivation.of(row))
        for row in members.values()
    ]
    forest = build_forest(experiments)
    root_id = chain[-1].id
    tree = next((tree for tree in forest if tree.experiment.id == root_id), forest[0])
    shown = set(seen)
    for node in tree.walk():
        if node.experiment.id == full_id:
            shown.update(below.experiment.id for below in node.walk())
            break
    for node in tree.walk():  # the siblings of the ancestors left out
        node.children = [child for child in node.children if child.experiment.id in shown]
    tree.focus = full_id
    return tree
