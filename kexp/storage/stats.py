"""Store statistics: counts per operator and outcome, and the best cumulative score (the
speedup over the operator's reference, :mod:`kexp.core.campaign`) per campaign (operator,
data type and env: one kernel's best on each machine, as ``kexp review`` and ``kexp
context`` tell campaigns apart; in any spelling, :func:`kexp.core.spelling.campaign_key`,
named by the one most written) with the experiment that holds it: the best tip whose
measurement is believable, as ``kexp review`` and ``kexp context`` name the current best
(:func:`kexp.storage.query.believable_best`), the suspect tips above it beside it.

The Python twin of ``kexp stats`` is :func:`stats`.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

from kexp.core.model import OUTCOMES, KernelExperiment
from kexp.core.spelling import campaign_key, campaign_names
from kexp.format.suspect import suspect_reasons
from kexp.storage.query import believed_best

if TYPE_CHECKING:
    from kexp.storage.store import Store


@dataclasses.dataclass(frozen=True)
class Best:
    """The best experiment of one campaign (operator, dtype, env): the best cumulative
    score."""

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
    #: The suspect tips ranked above it, best first (``id``, ``cumulative_score``,
    #: ``change_summary``, ``suspect``: why): no best until checked.
    suspect_above: list[dict[str, Any]] = dataclasses.field(default_factory=list)
    #: The machine: a campaign's best on one GPU is not another's.
    env: str = ""


@dataclasses.dataclass
class Stats:
    """Counts and records of a set of experiments.

    ``by_operator`` maps each ``operator_sig`` to its count per outcome (every outcome
    present, zeros included, plus ``control`` and ``total``); ``by_outcome`` is the
    same over all. A control (tag ``control``, an A/A run: the noise floor) is counted
    as ``control``, never in an outcome, as ``kexp top`` and ``kexp context`` leave it
    out; ``total`` counts every experiment, controls included;
    ``best`` lists, per (operator, dtype, env), the experiment with the best cumulative
    score (neither buggy nor pending, not a control) whose measurement is not suspect
    (its cumulative score built on no suspect step either), best first, each with the
    suspect ones above it (``suspect_above``); where every step that improved is suspect,
    the best of them, its ``suspect`` reasons said.
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
    by_operator: dict[str, dict[str, int]] = {}  # by kexp's spelling of the operator
    groups: dict[tuple[str, str, str], list[KernelExperiment]] = {}
    for exp in items:
        # A control's outcome is control: the noise floor (never ranked, never a lesson).
        outcome = exp.outcome
        key = campaign_key(exp)
        counts = by_operator.setdefault(key[0], _zero())
        for bucket in (counts, by_outcome):
            bucket[outcome] += 1
            bucket["total"] += 1
        groups.setdefault(key, []).append(exp)
    names = campaign_names(items)  # one name per operator, dtype and env, in every row
    operators = {key[0]: name[0] for key, name in names.items()}
    best: list[Best] = []
    for key, members in groups.items():
        operator, dtype, env = names[key]
        top, above = believed_best(members, settings=members[0].settings)
        if top is None and above:  # every step that improved is suspect: the best, said so
            top, above = above[0][0], above[1:]
        suspect = [
            {
                "id": exp.id,
                "cumulative_score": exp.cumulative_score,
                "change_summary": exp.change_summary,
                "suspect": reasons,
            }
            for exp, reasons in above
        ]
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
                    suspect,
                    env,
                )
            )
    best.sort(key=lambda b: (-(b.cumulative_score or 0.0), b.operator_sig, b.dtype_sig, b.env))
    return Stats(
        total=len(items),
        by_outcome=by_outcome,
        by_operator=dict(sorted((operators[key], counts) for key, counts in by_operator.items())),
        best=best,
    )


def stats(store: Store, **filters: Any) -> Stats:
    """Statistics of the experiments in ``store`` matching ``filters``: each counted
    once (read across refs, by its newest version, as every query reads it). Of the
    files, only their front-matter is needed (the query cache's rows)."""
    return compute_stats(store.list_experiments(brief=True, **filters))
