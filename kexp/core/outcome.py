"""One experiment judged by its own front-matter: the statuses, the outcome
(:func:`judge`), controls, whether a score measured anything, and the score a view shows.

What depends on other experiments too (the cumulative score along a ``pid`` chain, a step
judged over its parent's) is :mod:`kexp.core.cumulative` and :mod:`kexp.core.campaign`.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from typing import Any, NamedTuple

from kexp.core.settings import DEFAULT_SETTINGS, Settings

#: Statuses of an experiment not measured yet (its outcome is ``pending``).
PENDING_STATUSES = frozenset({"new", "running"})


#: Statuses of a run that ended badly: not buggy, its outcome is ``failed`` (it crashed
#: or timed out), not a regression to 0; and so is a step marked ``failed`` after it was
#: measured (retired: abandoned, its code not to build on), its score kept.
FAILED_STATUSES = frozenset({"failed", "timeout"})


#: The status of a run that failed, or of a step retired after it was measured.
FAILED = "failed"


#: The status of a run that timed out: it measured nothing, whatever its score says.
TIMED_OUT = "timeout"


#: Outcomes of an experiment whose score is no measurement (pending, wrong results, a
#: run that failed or timed out with score 0): no cumulative score, never a best.
UNMEASURED_OUTCOMES = frozenset({"pending", "buggy", "failed"})


#: The tag of an A/A run: the same code on both sides, the measured noise floor.
CONTROL_TAG = "control"


#: What a view says of a score that records no measurement (:func:`measured_nothing`).
NOTHING_MEASURED = "nothing measured"


#: What ``score`` is measured against (``measured_against``).
MEASURED_AGAINST = ("parent", "reference")


def judge(
    status: Any,
    is_buggy: Any,
    interference: bool,
    score: Any,
    interval: Any,
    settings: Settings = DEFAULT_SETTINGS,
    *,
    control: bool = False,
) -> str:
    """The outcome: control, pending, buggy, failed (status failed or timeout, not
    buggy, and no score: the run measured nothing), interference, regression, marginal,
    improvement.

    A ``control`` (tagged ``control``, :func:`is_control`: an A/A run, the noise floor)
    is ``control``, whatever its score: never a regression or an improvement, in a
    listing, a filter, a tree, the report or the counts alike (a control whose interval
    leaves out 1 says its timing setup is biased: :func:`control_bias`). With an
    interval (``score_ci``), ``improvement`` needs its low end above 1 and
    ``regression`` its high end below 1 (besides the thresholds); otherwise the
    thresholds alone decide.
    """
    if control:
        return CONTROL_TAG
    if status in PENDING_STATUSES:
        return "pending"
    if is_buggy:
        return "buggy"
    if failed_run(status, score, interval, settings):
        return "failed"
    if interference:
        return "interference"
    return _measured_outcome(score, interval, settings)


def _measured_outcome(score: Any, interval: Any, settings: Settings) -> str:
    """What a measured ``score`` (with its ``interval``) says: regression, marginal or
    improvement (:func:`judge`'s thresholds)."""
    if not isinstance(score, (int, float)) or isinstance(score, bool) or math.isnan(score):
        return "regression"
    if interval and len(interval) == 2:
        # Significant and worth having: the interval excludes 1 and the score passes
        # the threshold; anything else is within noise.
        low, high = interval
        if high < 1 and score < settings.regression_below:
            return "regression"
        if low > 1 and score > settings.improvement_above:
            return "improvement"
        return "marginal"
    if score < settings.regression_below:
        return "regression"
    if score > settings.improvement_above:
        return "improvement"
    return "marginal"


def is_control(record: Any) -> bool:
    """Whether ``record`` is tagged ``control`` (an A/A run)."""
    tags = getattr(record, "tags", None)
    if not tags:
        return False
    return CONTROL_TAG in tags


def judged_over_parent(record: Any) -> bool:
    """Whether ``record``'s score is over the reference though it was made on a parent
    (a ``pid``, ``measured_against: reference``, not a control): its outcome is judged
    over its parent's cumulative score
    (:func:`kexp.core.cumulative.outcome_over_parent`), not over the reference."""
    return (
        bool(record.pid)
        and getattr(record, "measured_against", "") == "reference"
        and not is_control(record)
    )


#: The outcomes a score decides (the others: the record's status, bugs, interference).
SCORED_OUTCOMES = frozenset({"improvement", "marginal", "regression"})


def measured_against_parent(record: Any) -> bool:
    """Whether ``record``'s score is a step over its parent's code: it has a ``pid`` and
    is not measured against the reference (a missing ``measured_against`` counts as
    ``parent``)."""
    return bool(record.pid) and getattr(record, "measured_against", "") != "reference"


def recorded_interval(record: Any) -> tuple[float, float] | None:
    found = getattr(record, "score_ci", None)
    if not found or not isinstance(found, (list, tuple)) or len(found) != 2:
        return None
    low, high = found
    if (
        isinstance(low, (int, float))
        and isinstance(high, (int, float))
        and not isinstance(low, bool)
        and not isinstance(high, bool)
        and low > 0
        and high > 0
    ):
        return float(low), float(high)
    return None


def measured_nothing(score: Any) -> bool:
    """Whether a score records no measurement: 0 (a run that crashed, timed out or was
    not run), or no finite number. No view prints a speedup for it (``-``, or
    :data:`NOTHING_MEASURED`); the files and JSON keep the score recorded."""
    return (
        not isinstance(score, (int, float))
        or isinstance(score, bool)
        or not math.isfinite(score)
        or score <= 0
    )


def no_measurement(status: Any, score: Any) -> bool:
    """Whether a record holds no measurement: its score measured nothing
    (:func:`measured_nothing`), or its run timed out (status ``timeout``: whatever score it
    carries, a predecessor's 1.0 included, is not a measurement)."""
    return status == TIMED_OUT or measured_nothing(score)


def shown_score(score: Any, status: Any) -> float | None:
    """The score a view prints as a speedup: None when the record holds no measurement
    (:func:`no_measurement`: a score of 0 or no finite number, or a run that timed out;
    so a ``failed`` outcome's too, :func:`failed_run`), whatever its outcome (a run both
    buggy and timed out included). Derived once (:attr:`Derived.shown_score`): a view
    asks its record, never passes the status itself."""
    return None if no_measurement(status, score) else float(score)


def failed_run(
    status: Any, score: Any, interval: Any = None, settings: Settings = DEFAULT_SETTINGS
) -> bool:
    """Whether a run ended badly (status failed or timeout) having measured nothing
    (:func:`no_measurement`: a timed-out run never measured), or a step was retired
    (:func:`retired`): its outcome is ``failed`` unless it is buggy (:func:`judge`):
    never ranked, never a best."""
    if status not in FAILED_STATUSES:
        return False
    return no_measurement(status, score) or retired(status, score, interval, settings)


def retired(
    status: Any, score: Any, interval: Any = None, settings: Settings = DEFAULT_SETTINGS
) -> bool:
    """Whether a step was marked ``failed`` after it was measured, its measurement no
    regression (abandoned, say, as its code breaks a shape): its outcome is ``failed``,
    its score kept and shown, and the steps built on it have no cumulative score (their
    code holds it). A measured regression marked failed (the predecessor's word for a
    slower try) stays a regression, as measured."""
    if status != FAILED or measured_nothing(score):
        return False
    return _measured_outcome(score, interval, settings) != "regression"


def floor_control(
    controls: Iterable[Any], window: int = DEFAULT_SETTINGS.control_drift_window
) -> Any | None:
    """The control that sets the noise floor of its env, as its steps are judged: of
    the ``window`` newest (by ``created_at``, then id) measured (not pending, not buggy)
    ``controls``, the one that drifted most (:attr:`ControlFloor.judge`). None when
    there is none."""
    found = [r for r in controls if r.status not in PENDING_STATUSES and not r.is_buggy]
    found.sort(key=lambda r: (time_key(r.created_at), r.id), reverse=True)
    return ControlFloor(tuple(found[: max(window, 1)])).judge if found else None


def control_bias(record: Any) -> str:
    """What a control (an A/A run: the same code on both sides) whose interval leaves
    out 1 says: its timing setup is biased, the sides were not timed alike; "" for any
    other."""
    interval = recorded_interval(record)
    if interval is None or interval[0] <= 1 <= interval[1]:
        return ""
    return (
        "its interval leaves out 1, as the same code on both sides cannot: the timing "
        "setup is biased (the sides not timed alike: clocks, warm-up, load, order); fix "
        "it and time the A/A again"
    )


def describe_control(record: Any, env: str = "") -> str:
    """A control as the noise floor: ``A/A on this env: 1.0390 [0.8390, 1.2870]`` (``A/A on
    'H100': ...`` given the ``env`` it was run on, for a reader who named none), and
    :func:`control_bias` when its interval leaves out 1."""
    on = f"on {env.strip()!r}" if env.strip() else "on this env"
    text = f"A/A {on}: {float(record.score):.4f}"  # four decimals, as every view
    interval = recorded_interval(record)
    if interval is not None:
        text += f" [{interval[0]:.4f}, {interval[1]:.4f}]"
    bias = control_bias(record)
    return f"{text}: {bias}" if bias else text


def time_key(created_at: str) -> str:
    """``created_at`` in a form that sorts in time order as text: whole seconds and
    fractional ones compare correctly (``…:05Z`` becomes ``…:05.000000000``, before
    ``…:05.500000000``; as text, ``Z`` sorts after ``.``). kexp writes microseconds;
    a hand-written file, an imported one or one an older kexp wrote may hold others."""
    text = created_at[:-1] if created_at.endswith("Z") else created_at
    seconds, _, fraction = text.partition(".")
    return f"{seconds}.{fraction:0<9}"


def timer_of(record: Any) -> str:
    """The clock ``record`` was timed by, as its ``protocol`` says (``do_bench``,
    ``wall_clock``...; "" when unknown)."""
    protocol = getattr(record, "protocol", None)
    timer = protocol.get("timer") if isinstance(protocol, dict) else None
    return timer if isinstance(timer, str) else ""


def newer_control(found: Any, control: Any) -> bool:
    """Whether ``control`` is newer than ``found`` (None: there is none yet), by
    ``created_at``, then id, as :func:`floor_control` orders them."""
    return found is None or (time_key(control.created_at), control.id) > (
        time_key(found.created_at),
        found.id,
    )


def drift_of(control: Any, settings: Settings = DEFAULT_SETTINGS) -> float:
    """How far, on the log scale, a step timed as ``control`` (an A/A run) was timed may
    move from 1 with no change of code: ``control_drift_reach`` times the drift the
    control measured, ``|log score|`` (0 for a control that measured nothing, or timed
    out: :func:`no_measurement`)."""
    return settings.control_drift_reach * measured_drift(control)


def measured_drift(control: Any) -> float:
    """The drift ``control`` (an A/A run) measured, ``|log score|`` (0 for one that
    measured nothing, or timed out: :func:`no_measurement`)."""
    score = control.score
    if no_measurement(getattr(control, "status", ""), score):
        return 0.0
    return abs(math.log(float(score)))


def within_drift(outcome: str, score: Any, interval: Any, reach: float) -> bool:
    """Whether an ``improvement`` or a ``regression`` (``outcome``) stays within
    ``reach`` (:func:`drift_of`) of 1: its interval's end nearest 1 (its score, without
    an interval) does not clear the drift the A/A control of its env measured."""
    if reach <= 0 or outcome not in ("improvement", "regression") or measured_nothing(score):
        return False
    own = recorded_interval(_Interval(interval))
    if outcome == "improvement":
        nearest = own[0] if own is not None else float(score)
        return math.log(nearest) <= reach
    nearest = own[1] if own is not None else float(score)
    return -math.log(nearest) <= reach


class _Interval:
    """A bare ``score_ci`` read as a record's (:func:`recorded_interval`)."""

    __slots__ = ("score_ci",)

    def __init__(self, score_ci: Any) -> None:
        self.score_ci = score_ci


class ControlFloor(NamedTuple):
    """The drift between runs that judges the steps of an env and timer: its newest
    measured controls (newest first, at most ``Settings.control_drift_window``), of
    which the one that drifted most (:attr:`judge`) counts. One lucky A/A (timed when
    the machine was quiet) does not hide the drift its earlier ones measured."""

    controls: tuple[Any, ...]

    @property
    def judge(self) -> Any:
        """The control of :attr:`controls` whose drift is largest (the newest of equals)."""
        return max(reversed(self.controls), key=measured_drift)

    @property
    def ids(self) -> tuple[str, ...]:
        """The ids of the controls read, newest first."""
        return tuple(control.id for control in self.controls)


def floor_reach(floor: ControlFloor, settings: Settings = DEFAULT_SETTINGS) -> float:
    """How far a step judged by ``floor`` may move from 1 with no change of code:
    :func:`drift_of` its :attr:`ControlFloor.judge`."""
    return drift_of(floor.judge, settings)


def drift_reason(floor: ControlFloor, settings: Settings = DEFAULT_SETTINGS) -> str:
    """Why a step whose interval leaves out 1 is within noise (:func:`within_drift`):
    ``within the A/A control 6b16976c44's 5.1 % drift on 'cpu' (2 x its 2.6 %, the
    largest of the env's 2 newest controls: 6b16976c44 2.6 %, 0a1b2c3d4e 0.1 %): an
    interval covers the noise of one run, not the drift between runs`` (the controls
    named when it read more than one)."""
    control = floor.judge
    env = str(getattr(control, "env", "") or "").strip()
    on = f" on {env!r}" if env else ""
    reach = drift_of(control, settings)
    own = abs(math.log(float(control.score))) if reach else 0.0
    read = ""
    if len(floor.controls) > 1:
        each = ", ".join(
            f"{other.id[:10]} {math.expm1(measured_drift(other)) * 100:.1f} %"
            for other in floor.controls
        )
        read = f", the largest of the env's {len(floor.controls)} newest controls: {each}"
    return (
        f"within the A/A control {control.id[:10]}'s {math.expm1(reach) * 100:.1f} % drift"
        f"{on} ({settings.control_drift_reach:g} x its {math.expm1(own) * 100:.1f} %{read}): "
        "an interval covers the noise of one run, not the drift between runs"
    )
