"""Store statistics: counts per operator and outcome, and the best cumulative score (the
speedup over the operator's reference, :mod:`kexp.core.campaign`) per operator and data type
with the experiment that holds it: the best tip.

The Python twin of ``kexp stats`` is :func:`stats`.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

from kexp.core.model import OUTCOMES, KernelExperiment
from kexp.format.suspect import suspect_reasons
from kexp.storage.query import best_tip

if TYPE_CHECKING:
    from kexp.storage.store import Store


@dataclasses.dataclass(frozen=True)
class Best:
    """The best experiment of one (operator, dtype) pair: the best cumulative score."""

    operator_sig: str
    dtype_sig: str
    #: Its own score (one step when measured against its parent).
    score: float
    id: str
    change_summary: str
    count: int
    #: Why the best measurement is implausible (empty when it is believable).
    suspect: list[str] = dataclasses.field(default_factory=list)
    #: The speedup over the operator's reference, and its 95 % interval.
    cumulative_score: float | None = None
    cumulative_ci: list[float] | None = None


@dataclasses.dataclass
class Stats:
    """Counts and records of a set of experiments.

    ``by_operator`` maps each ``operator_sig`` to its count per outcome (every outcome
    present, zeros included, plus ``control`` and ``total``); ``by_outcome`` is the
    same over all. A control (tag ``control``, an A/A run: the noise floor) is counted
    as ``control``, never in an outcome, as ``kexp top`` and ``kexp context`` leave it
    out; ``total`` counts every experiment, controls included;
    ``best`` lists, per (operator, dtype), the experiment with the best cumulative
    score (neither buggy nor pending, not a control), best first.
    """

    total: int
    by_outcome: dict[str, int]
    by_operator: dict[str, dict[str, int]]
    best: list[Best]

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready data (stable keys)."""
        return {
            "total": self.total,
            "by_outcome": dict(self.by_outcome),
            "by_operator": {op: dict(counts) for op, counts in self.by_operator.items()},
            "best": [dataclasses.asdict(b) for b in self.best],
        }


def _zero() -> dict[str, int]:
    return {**dict.fromkeys(OUTCOMES, 0), "control": 0, "total": 0}


def compute_stats(experiments: Iterable[KernelExperiment]) -> Stats:
    """Statistics of ``experiments`` (operators sorted by name)."""
    items = list(experiments)
    by_outcome = _zero()
    by_operator: dict[str, dict[str, int]] = {}
    groups: dict[tuple[str, str], list[KernelExperiment]] = {}
    for exp in items:
        # A control is the noise floor, not an outcome (never ranked, never a lesson).
        outcome = "control" if exp.derived.control else exp.outcome
        counts = by_operator.setdefault(exp.operator_sig, _zero())
        for bucket in (counts, by_outcome):
            bucket[outcome] += 1
            bucket["total"] += 1
        groups.setdefault((exp.operator_sig, exp.dtype_sig), []).append(exp)
    best: list[Best] = []
    for (operator, dtype), members in groups.items():
        top = best_tip(members)
        if top is not None:
            best.append(
                Best(
                    operator,
                    dtype,
                    float(top.score),
                    top.id,
                    top.change_summary,
                    len(members),
                    suspect_reasons(top, top.settings),
                    top.cumulative_score,
                    None if top.cumulative_ci is None else list(top.cumulative_ci),
                )
            )
    best.sort(key=lambda b: (-(b.cumulative_score or 0.0), b.operator_sig, b.dtype_sig))
    return Stats(
        total=len(items),
        by_outcome=by_outcome,
        by_operator=dict(sorted(by_operator.items())),
        best=best,
    )


def stats(store: Store, **filters: Any) -> Stats:
    """Statistics of the experiments in ``store`` matching ``filters``: each counted
    once (read across refs, by its newest version, as every query reads it). Of the
    files, only their front-matter is needed (the query cache's rows)."""
    return compute_stats(store.list_experiments(brief=True, **filters))
