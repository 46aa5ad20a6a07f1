"""The lineage trees as the MCP ``tree`` tool answers by default: one flat row per
experiment (its depth, its step score as ``kexp tree``'s step column gives it
(:func:`step_score`), its cumulative score, outcome, summary, mark), at most a limit of them, the
most telling kept (each tree's best tip, its roots, its dead ends, the path to the best
tip, then the rest in display order), and how many were left out, of each mark, said. Nested trees
(``kexp tree --json``, :func:`kexp.output.replies.tree_reply`) indent each level
deeper: a 100-step campaign is some 300 KB, more than an agent's context can spare."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from kexp.core.advice import TREE_NESTED
from kexp.core.outcome import judged_over_parent

if TYPE_CHECKING:
    from kexp.core.model import KernelExperiment
    from kexp.storage.lineage import TreeNode

__all__ = ["DEFAULT_ROWS", "step_score", "tree_rows"]

#: How many rows a reply holds unless asked for another number.
DEFAULT_ROWS = 40


def tree_rows(forest: Sequence[TreeNode], limit: int = DEFAULT_ROWS) -> dict[str, Any]:
    """The rows of ``forest``, in display order, at most ``limit`` (the most telling:
    see the module documentation), with how many trees and experiments there are and
    how many rows were left out."""
    nodes = [node for root in forest for node in root.walk()]

    def importance(at: int) -> tuple[int, int]:
        node = nodes[at]
        rank = (
            0
            if node.is_best
            else 1
            if node.depth == 0
            else 2
            if node.dead_end
            else 3
            if node.on_best_path
            else 4
        )
        return rank, at

    kept = sorted(sorted(range(len(nodes)), key=importance)[: max(limit, 0)])
    reply: dict[str, Any] = {
        "trees": len(forest),
        "experiments": len(nodes),
        "rows": [_row(nodes[at]) for at in kept],
    }
    if len(kept) < len(nodes):
        reply["left_out"] = len(nodes) - len(kept)
        shown = set(kept)
        kinds: dict[str, int] = {}
        for at, node in enumerate(nodes):
            if at not in shown:
                kind = _mark(node) or "unmarked"
                kinds[kind] = kinds.get(kind, 0) + 1
        reply["left_out_kinds"] = kinds
        reply["read_more"] = TREE_NESTED.tools.format(n=len(nodes))
    return reply


def step_score(exp: KernelExperiment) -> float | None:
    """The score of ``exp``'s step over its parent's code, as ``kexp tree``'s step
    column and these rows give it: its score, None when it measured nothing; for one
    measured against the reference on a parent (an old caller's child, an import), its
    score over the parent's cumulative score (what its outcome is judged on), None when
    the parent has none (failed, buggy, pending: no step over it can be said)."""
    shown = exp.derived.shown_score
    if shown is None or not judged_over_parent(exp):
        return shown
    over = exp.derived.parent_cumulative
    return shown / over if over else None


def _row(node: TreeNode) -> dict[str, Any]:
    exp = node.experiment
    step = step_score(exp)
    row: dict[str, Any] = {
        "id": exp.id,
        "pid": exp.pid,
        "depth": node.depth,
        "score": None if step is None else round(step, 4),
        "cumulative_score": exp.cumulative_score,
        "outcome": exp.outcome,
        "change_summary": exp.change_summary,
    }
    if exp.measured_against == "reference":  # the score the file holds, over the original
        row["measured_against"] = "reference"
        if judged_over_parent(exp):
            row["recorded_score"] = exp.score
    mark = _mark(node)
    if mark:
        row["mark"] = mark
    if exp.is_control:
        row["control"] = True
    if node.depth == 0:  # what the tree is on, said once
        row.update(operator_sig=exp.operator_sig, dtype_sig=exp.dtype_sig, env=exp.env)
    if exp.where is not None:
        row["ref"] = exp.where.to_dict().get("ref")
    return row


def _mark(node: TreeNode) -> str | None:
    """What a row's ``mark`` says of ``node``: best, on the best path, dead end, or None."""
    if node.is_best:
        return "best"
    if node.on_best_path:
        return "on the best path"
    return "dead end" if node.dead_end else None
