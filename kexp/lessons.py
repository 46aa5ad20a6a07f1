"""Lessons: the failures worth learning from, grouped by kind, each with its key insight.

The Python twin of ``kexp lessons`` is :func:`lessons`. Groups, in this order:
``buggy`` (crashed or wrong results), ``regression`` (slower), ``marginal`` (within
noise: inside the thresholds, or its 95 % interval holds 1), ``interference`` (a
combination that scored below the best part it combines).
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

from kexp.model import KernelExperiment

if TYPE_CHECKING:
    from kexp.storeview import StoreView

#: The groups of :func:`lessons`, in display order.
LESSON_GROUPS = ("buggy", "regression", "marginal", "interference")

_KEY_INSIGHT = re.compile(
    r"^\s*(?:[-*+]\s+)?(?:\*\*|__)?key\s+insights?\s*(?::\s*(?:\*\*|__)|(?:\*\*|__)\s*:|:)"
    r"\s*(?P<rest>.*)$",
    re.IGNORECASE,
)


@dataclasses.dataclass(frozen=True)
class Lesson:
    """One failed experiment: what was tried and what it taught."""

    id: str
    outcome: str
    score: float
    change_summary: str
    key_insight: str
    operator_sig: str
    dtype_sig: str
    #: The score's 95 % interval (empty when it has none): a ``marginal`` lesson with
    #: one is "within noise".
    score_ci: tuple[float, ...] = ()

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready data (stable keys)."""
        return dataclasses.asdict(self)


def key_insight(description: str) -> str:
    """The text of the ``**Key insight**:`` line of a detailed description ("" if none).

    When the line holds only the label, the next non-blank line is the insight.
    """
    lines = description.splitlines()
    for index, line in enumerate(lines):
        match = _KEY_INSIGHT.match(line)
        if match is None:
            continue
        rest = match.group("rest").strip()
        if rest:
            return rest
        for following in lines[index + 1 :]:
            if following.strip():
                return following.strip()
        return ""
    return ""


def group_lessons(experiments: Iterable[KernelExperiment]) -> dict[str, list[Lesson]]:
    """Group experiments into :data:`LESSON_GROUPS` (each key present, maybe empty).

    Improvements and pending experiments are not lessons and are left out.
    """
    groups: dict[str, list[Lesson]] = {name: [] for name in LESSON_GROUPS}
    for exp in experiments:
        outcome = exp.outcome
        if outcome in groups:
            groups[outcome].append(
                Lesson(
                    id=exp.id,
                    outcome=outcome,
                    score=float(exp.score),
                    change_summary=exp.change_summary,
                    key_insight=key_insight(exp.detailed_description),
                    operator_sig=exp.operator_sig,
                    dtype_sig=exp.dtype_sig,
                    score_ci=tuple(exp.score_ci),
                )
            )
    return groups


def lessons(store: StoreView, **filters: Any) -> dict[str, list[Lesson]]:
    """The lessons of the experiments in ``store`` matching ``filters``, oldest first."""
    return group_lessons(store.list_experiments(**filters))
