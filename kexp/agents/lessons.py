"""Lessons: the failures worth learning from, grouped by kind, each with its key insight.

The Python twin of ``kexp lessons`` is :func:`lesson_report` (:func:`lessons`: the
groups alone). Groups, in this order: ``buggy`` (crashed or wrong results),
``regression`` (slower), ``marginal`` (within noise: inside the thresholds, or its 95 %
interval holds 1), ``interference`` (a combination whose cumulative score is below the
best of those it combines). Controls (tag ``control``, A/A runs) are no lessons: the
newest of each env is its measured noise floor (:func:`noise_floors`). Each lesson
names its campaign (operator × dtype × env); a step measured against the reference but
judged over its parent says its speedup over the parent (:attr:`Lesson.over_parent`).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, Any

from kexp.core.errors import KexpError
from kexp.core.model import KernelExperiment
from kexp.core.outcome import (
    describe_control,
    floor_control,
    is_control,
    judged_over_parent,
    shown_score,
)
from kexp.core.settings import DEFAULT_SETTINGS
from kexp.core.spelling import campaign_key
from kexp.format.fileformat import error_line, key_insight
from kexp.format.notes import retired_reason

if TYPE_CHECKING:
    from kexp.storage.rows import Sighting
    from kexp.storage.view import StoreView

#: The groups of :func:`lessons`, in display order.
LESSON_GROUPS = ("buggy", "failed", "regression", "marginal", "interference")


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
    #: The line of ``error_message`` that says what went wrong
    #: (:func:`kexp.format.fileformat.error_line`): what a crash taught when no key
    #: insight says it.
    error: str = ""
    #: The run's status: a timed-out run measured nothing, whatever its score and
    #: outcome (:attr:`shown_score`).
    status: str = ""
    #: The env it ran on: with ``operator_sig`` and ``dtype_sig``, its campaign.
    env: str = ""
    #: Its parent's id ("" for a root).
    pid: str = ""
    #: A step measured against the reference but judged over its parent
    #: (:func:`kexp.core.outcome.judged_over_parent`): its speedup over the parent's
    #: code (its score over the parent's cumulative score); None for any other.
    over_parent: float | None = None
    #: Why a change is ``marginal`` though its interval leaves out 1: within the drift
    #: the A/A control of its env measured (:attr:`kexp.core.cumulative.Derived.drift`).
    outcome_reason: str = ""
    #: Why it was retired (the reason of the correction that set its status to failed:
    #: :func:`kexp.format.notes.retired_reason`): what it taught above its key insight,
    #: written before it was found wrong.
    retired: str = ""

    @property
    def campaign(self) -> tuple[str, str, str]:
        """Its campaign: (operator, dtype, env) in kexp's spelling (:func:`campaign_key`:
        ``bf16`` and ``torch.bfloat16`` are one)."""
        return campaign_key(self)

    @property
    def shown_score(self) -> float | None:
        """The score a view prints: None when it is no measurement, whatever the outcome
        (:func:`kexp.core.outcome.shown_score`); the JSON keeps ``score``."""
        return shown_score(self.score, self.status)

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready data (stable keys; ``score_ci``, ``error``, ``pid``,
        ``over_parent``, ``outcome_reason`` and ``retired`` only when there is one, as
        ``--json`` leaves out an empty optional field)."""
        data = dataclasses.asdict(self)
        for optional in ("score_ci", "error", "pid", "over_parent", "outcome_reason", "retired"):
            if data[optional] in ((), "", None):
                del data[optional]
        if self.score_ci:
            data["score_ci"] = list(self.score_ci)
        return data


def taught(key_insight: str, error: str) -> str:
    """What a lesson says it taught: its key insight; without one, the error recorded
    (``(none recorded; the error: ...)``); "" when neither."""
    if key_insight or not error:
        return key_insight
    return f"(none recorded; the error: {error})"


def group_lessons(
    experiments: Iterable[KernelExperiment], parents: Mapping[str, float | None] | None = None
) -> dict[str, list[Lesson]]:
    """Group experiments into :data:`LESSON_GROUPS` (each key present, maybe empty);
    ``parents``: the cumulative score of each parent a step judged over its parent has,
    by id (:attr:`Lesson.over_parent`).

    Improvements, pending experiments and controls are not lessons and are left out.
    """
    known = parents or {}
    groups: dict[str, list[Lesson]] = {name: [] for name in LESSON_GROUPS}
    for exp in experiments:
        if is_control(exp):
            continue
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
                    error=error_line(exp.error_message),
                    status=exp.status,
                    env=exp.env,
                    pid=exp.pid,
                    over_parent=speedup_over_parent(exp, known.get(exp.pid)),
                    outcome_reason=exp.derived.drift,
                    retired=retired_reason(exp.detailed_description),
                )
            )
    return groups


def speedup_over_parent(exp: KernelExperiment, parent: float | None) -> float | None:
    """``exp``'s speedup over its parent's code when it is judged over its parent and
    both the score and the parent's cumulative score (``parent``) measured something
    (None otherwise): what :attr:`Lesson.over_parent` says, and the report's lessons."""
    score = shown_score(exp.score, exp.status)
    if not judged_over_parent(exp) or not parent or score is None:
        return None
    return float(score) / parent


@dataclasses.dataclass(frozen=True)
class NoiseFloor:
    """The newest control (an A/A run: the same code on both sides) of one env: how far
    a score moves when nothing changed."""

    env: str
    id: str
    score: float
    score_ci: tuple[float, ...] = ()

    def describe(self) -> str:
        """``A/A on this env: 1.0390 [0.8390, 1.2870]``."""
        return describe_control(self)

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready data (stable keys)."""
        return {**dataclasses.asdict(self), "score_ci": list(self.score_ci)}


def noise_floors(
    experiments: Iterable[KernelExperiment], window: int = DEFAULT_SETTINGS.control_drift_window
) -> list[NoiseFloor]:
    """The control that sets each env's noise floor among ``experiments``
    (:func:`kexp.core.outcome.floor_control`: of its ``window`` newest, the one that
    drifted most, as the env's steps are judged), by env."""
    by_env: dict[str, list[KernelExperiment]] = {}
    for exp in experiments:
        if is_control(exp):
            by_env.setdefault(exp.env, []).append(exp)
    floors = []
    for env in sorted(by_env):
        found = floor_control(by_env[env], window)
        if found is not None:
            floors.append(NoiseFloor(env, found.id, float(found.score), tuple(found.score_ci)))
    return floors


@dataclasses.dataclass(frozen=True)
class LessonReport:
    """What ``kexp lessons`` prints: the lessons by group and each env's noise floor;
    read across refs, where each lesson was found (by id)."""

    groups: dict[str, list[Lesson]]
    noise_floors: list[NoiseFloor]
    where: dict[str, Sighting] = dataclasses.field(default_factory=dict)


def lesson_report(store: StoreView, **filters: Any) -> LessonReport:
    """The lessons of the experiments in ``store`` matching ``filters`` (oldest first),
    the noise floor of each env (its newest control) and, read across refs, where each
    lesson was found: all from one read of the store."""
    found = store.list_experiments(brief=True, **filters)
    failed = [e for e in found if e.outcome in LESSON_GROUPS and not is_control(e)]
    where = {e.id: e.where for e in failed if e.where is not None}
    parents = _parent_scores(store, found, [e.pid for e in failed if judged_over_parent(e)])
    # Only the lessons' files are read, for their key insights.
    groups = group_lessons(store.with_bodies(failed), parents)
    return LessonReport(groups, noise_floors(found, store.settings.control_drift_window), where)


def _parent_scores(
    store: StoreView, found: Iterable[KernelExperiment], wanted: Iterable[str]
) -> dict[str, float | None]:
    """The cumulative score of each parent ``wanted``: from ``found`` where it is there,
    else from ``store`` (None when it is in neither)."""
    wanted = set(wanted)
    scores: dict[str, float | None] = {e.id: e.cumulative_score for e in found if e.id in wanted}
    for pid in wanted - scores.keys():
        try:
            scores[pid] = store.get_experiment(pid).cumulative_score
        except KexpError:
            scores[pid] = None
    return scores


def lessons(store: StoreView, **filters: Any) -> dict[str, list[Lesson]]:
    """The lessons of the experiments in ``store`` matching ``filters``, oldest first."""
    return lesson_report(store, **filters).groups
