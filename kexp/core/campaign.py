"""A campaign's numbers: what is derived from the front-matter of all experiments at once.

One function, :func:`derive`, computes every derived value of every experiment from the
front-matter of the store's current records (cache rows, :class:`KernelExperiment`
objects, a review's facts: anything with the attributes read below), so that every
view ranks and judges alike:

* ``outcome`` and ``interference`` (see :func:`judge`). A step is judged over the code
  it was made on: a child measured against the reference is judged by its score over
  its parent's cumulative score (the intervals' log half-widths in quadrature), so a
  child within noise of its parent is ``marginal``, however far above the reference
  (:func:`judged_over_parent`);
* ``cumulative_score``: the speedup of the experiment's code over the operator's
  reference (original) code. A score is measured against what ``measured_against``
  names: ``reference`` (or an experiment without a ``pid``: its parent is the
  reference) is its own cumulative score; ``parent`` (a ``pid`` without the field
  counts as ``parent``: kexp's convention, and validation warns that it should be
  written) multiplies its score onto its parent's cumulative score. So the cumulative
  score is the product of the steps along the ``pid`` chain back to the nearest
  experiment measured against the reference (to :data:`CUMULATIVE_DIGITS` significant
  digits);
* ``cumulative_ci``: its 95 % interval when every step has one (``score_ci``): the
  steps' log half-widths, below and above the score, add in quadrature (each step's
  interval is Student's t on the log scale, :mod:`kexp.core.noise`; independent steps' log
  variances add). One step's interval is its own ``score_ci``; a longer chain's is
  rounded outwards to 4 decimals. No random numbers: the same files give the same
  values, and it needs only the front-matter (a bootstrap would read every step's
  ``## Samples`` section and still need a seed);
* ``cumulative_reason``: why there is no cumulative score, when there is none: the
  experiment (or an ancestor on its chain) is buggy, pending, measured nothing (score
  0), is not in the store, or its ``pid`` chain is a cycle; or it is a control;
* ``control``: tagged ``control`` (an A/A run, the same code on both sides). A control
  measures the noise floor: it has no cumulative score, is never ranked, never the
  best, never a dead end. Its code is its parent's (or the reference's, without a
  parent), so an experiment built on a control continues its parent's chain.

``combines`` (a merge of other experiments' changes) does not enter the product: the
merge is measured against its ``pid`` (the code it was made on) or the reference like
any experiment, so its cumulative score follows its ``pid`` chain. It is
``interference`` when its cumulative score is below the best cumulative score of the
experiments it combines (without a cumulative score of its own: its score below their
best score, today's rule for stores measured against the reference).

An id held by several files (which validation reports) counts with its first file in
the order given (path order); :meth:`Derivation.of` gives a later file's own values.
"""

from __future__ import annotations

import math
from collections.abc import Collection, Iterable, Mapping, Sequence
from typing import Any, NamedTuple

from kexp.core.collector import collector_paused
from kexp.core.noise import SCORE_DIGITS
from kexp.core.settings import DEFAULT_SETTINGS, Settings
from kexp.core.suspicion import findings

#: Statuses of an experiment not measured yet (its outcome is ``pending``).
PENDING_STATUSES = frozenset({"new", "running"})
#: Statuses of a run that ended badly: with no score (0), not buggy, its outcome is
#: ``failed`` (it crashed or timed out), not a regression to 0.
FAILED_STATUSES = frozenset({"failed", "timeout"})
#: The status of a run that timed out: it measured nothing, whatever its score says.
TIMED_OUT = "timeout"
#: Outcomes of an experiment whose score is no measurement (pending, wrong results, a
#: run that failed or timed out with score 0): no cumulative score, never a best.
UNMEASURED_OUTCOMES = frozenset({"pending", "buggy", "failed"})
#: The tag of an A/A run: the same code on both sides, the measured noise floor.
CONTROL_TAG = "control"
#: Significant digits a cumulative score keeps: a product of scores, each of a few
#: significant digits (4 decimals in a file), carries no more; fewer than a float's 17,
#: so that it prints 1.43, not 1.4300000000000002 (binary noise), in every output. The
#: product is made exactly (as floats multiply) and rounded once, when derived.
CUMULATIVE_DIGITS = 13
#: What a view says of a score that records no measurement (:func:`measured_nothing`).
NOTHING_MEASURED = "nothing measured"
#: What ``score`` is measured against (``measured_against``).
MEASURED_AGAINST = ("parent", "reference")


class Derived(NamedTuple):
    """What is derived of one experiment from the whole store's front-matter."""

    outcome: str
    #: It combines others and its cumulative score is below the best of theirs.
    interference: bool
    #: Speedup over the operator's reference: the product of the steps back to the
    #: nearest reference measurement (None when it cannot be known: ``cumulative_reason``).
    cumulative_score: float | None
    #: The 95 % interval of ``cumulative_score`` (None without one).
    cumulative_ci: tuple[float, float] | None
    #: Why there is no ``cumulative_score`` ("" when there is one).
    cumulative_reason: str
    #: Tagged ``control``: an A/A run, never ranked.
    control: bool
    #: The id of the experiment the product starts at (measured against the reference;
    #: "" when there is no cumulative score, or the chain starts at a control).
    reference: str = ""
    #: How many scores the product multiplies.
    steps: int = 0
    #: The score every view prints as its speedup: None when it is no measurement
    #: (:func:`shown_score`). The files and JSON keep the score recorded.
    shown_score: float | None = None
    #: The id of the nearest step below it whose score its cumulative score multiplies
    #: and whose own measurement is suspect (:func:`kexp.core.suspicion.findings`): its
    #: cumulative score is no better checked than that step's ("" when none is).
    built_on_suspect: str = ""

    @property
    def ranked(self) -> bool:
        """Whether a ranking by the cumulative score places it (not a control, and a
        cumulative score known)."""
        return not self.control and self.cumulative_score is not None

    @property
    def can_be_best(self) -> bool:
        """Whether it can be a campaign's best tip: ranked, and its step an improvement
        (a step within noise, a regression or an interference leaves the code its parent
        left, or worse: never a best, whatever its cumulative score)."""
        return self.ranked and self.outcome == "improvement"


def judge(
    status: Any,
    is_buggy: Any,
    interference: bool,
    score: Any,
    interval: Any,
    settings: Settings = DEFAULT_SETTINGS,
) -> str:
    """The outcome: pending, buggy, failed (status failed or timeout, not buggy, and no
    score: the run measured nothing), interference, regression, marginal, improvement.

    With an interval (``score_ci``), ``improvement`` needs its low end above 1 and
    ``regression`` its high end below 1 (besides the thresholds); otherwise the
    thresholds alone decide.
    """
    if status in PENDING_STATUSES:
        return "pending"
    if is_buggy:
        return "buggy"
    if failed_run(status, score):
        return "failed"
    if interference:
        return "interference"
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
    over its parent's cumulative score (:func:`_over_parent`), not over the reference."""
    return (
        bool(record.pid)
        and getattr(record, "measured_against", "") == "reference"
        and not is_control(record)
    )


#: The outcomes a score decides (the others: the record's status, bugs, interference).
SCORED_OUTCOMES = frozenset({"improvement", "marginal", "regression"})


def _over_parent(record: Any, outcome: str, parent: Any, settings: Settings) -> str:
    """The outcome of ``record`` (:func:`judged_over_parent`), judged as it was over the
    reference (``outcome``), judged now over its parent's code value (``parent``: its
    code tuple, None when not in the store): the ratio of its score to its parent's
    cumulative score, with an interval when it has one (the parent's log half-widths,
    when it has them, added in quadrature: two independent measurements). Without a
    parent's cumulative score (buggy, pending, missing...), ``outcome`` stands."""
    if outcome not in SCORED_OUTCOMES or parent is None or parent[0] is None:
        return outcome
    score = record.score
    if measured_nothing(score):
        return outcome
    score = float(score)
    value, below, above = parent[0], parent[1], parent[2]
    ratio = score / value
    own = _interval(record)
    interval = None
    if own is not None:
        low_sq = math.log(score / own[0]) ** 2
        high_sq = math.log(own[1] / score) ** 2
        if below is not None and above is not None:
            low_sq, high_sq = low_sq + above, high_sq + below
        interval = (ratio * math.exp(-math.sqrt(low_sq)), ratio * math.exp(math.sqrt(high_sq)))
    return judge("done", False, False, ratio, interval, settings)


def measured_against_parent(record: Any) -> bool:
    """Whether ``record``'s score is a step over its parent's code: it has a ``pid`` and
    is not measured against the reference (a missing ``measured_against`` counts as
    ``parent``)."""
    return bool(record.pid) and getattr(record, "measured_against", "") != "reference"


#: The speedup of an experiment's code over the reference, or why it is unknown, as a
#: plain tuple (one is made for every experiment: a tuple is the cheapest to make):
#: (value or None, the steps' summed squared log half-widths below and above (None: a
#: step has no interval), the one step's recorded interval (a product of one step),
#: steps, the id the product starts at, and when value is None: the experiment that
#: breaks the chain and what it is).
_Code = tuple[Any, ...]
_CULPRIT, _PROBLEM = 6, 7

#: The reference's own code: the speedup 1, exactly (a root control's code).
_REFERENCE: _Code = (1.0, 0.0, 0.0, None, 0, "", "", "")


def _interval(record: Any) -> tuple[float, float] | None:
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


def _broken(culprit: str, problem: str) -> _Code:
    return (None, None, None, None, 0, "", culprit, problem)


def _step(record: Any, before: _Code | None) -> _Code:
    """The code value of ``record`` given its parent's (``before``: None when the
    record's score does not build on its parent's)."""
    if is_control(record):
        if not record.pid:
            return _REFERENCE
        return before if before is not None else _broken(record.pid, "is not in the store")
    if record.status in PENDING_STATUSES:
        return _broken(record.id, f"is pending (status {record.status})")
    if record.is_buggy:
        return _broken(record.id, "is buggy")
    if record.status == TIMED_OUT:
        return _broken(record.id, "timed out (nothing measured)")
    return _measured(record, before)


def _measured(record: Any, before: _Code | None) -> _Code:
    """:func:`_step` of a measured record (neither pending nor buggy nor a control)."""
    score = record.score
    if measured_nothing(score):
        return _broken(record.id, "measured nothing (score 0)")
    score = float(score)
    interval = _interval(record)
    low_sq = high_sq = None
    if interval is not None:
        low_sq = math.log(score / interval[0]) ** 2
        high_sq = math.log(interval[1] / score) ** 2
    if before is None:  # measured against the reference
        return (score, low_sq, high_sq, interval, 1, record.id, "", "")
    value, below, above, _, steps, start, _, _ = before
    if value is None:
        return before
    return (
        value * score,
        None if below is None or low_sq is None else below + low_sq,
        None if above is None or high_sq is None else above + high_sq,
        interval if steps == 0 else None,
        steps + 1,
        start or record.id,
        "",
        "",
    )


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


def failed_run(status: Any, score: Any) -> bool:
    """Whether a run ended badly (status failed or timeout) having measured nothing
    (:func:`no_measurement`: a timed-out run never measured): its outcome is ``failed``
    unless it is buggy (:func:`judge`)."""
    return status in FAILED_STATUSES and no_measurement(status, score)


def cumulative_digits(value: float) -> float:
    """A product of scores as a cumulative score is derived: to :data:`CUMULATIVE_DIGITS`
    significant digits (the one place its digits are decided: every output shows it as
    it is)."""
    return float(f"{value:.{CUMULATIVE_DIGITS}g}")


def cumulative_change(before: float, after: float) -> tuple[float, float | None]:
    """How a cumulative score moved from ``before`` to ``after``: the difference and the
    change in percent (None when ``before`` is not above 0), each to the digits the
    cumulative scores carry (:data:`CUMULATIVE_DIGITS`: 0.13, not 0.13000000000000012)."""
    size = max(abs(before), abs(after))
    places = CUMULATIVE_DIGITS - 2 - (math.floor(math.log10(size)) if size > 0 else 0)
    delta = round(after - before, places)
    if before <= 0:
        return delta, None
    return delta, change_percent(after / before)


def change_percent(ratio: float) -> float:
    """A speedup ``ratio`` as a change in percent (1.05: 5.0), to the decimals of a
    score (:data:`kexp.core.noise.SCORE_DIGITS`; 2 in percent: 0.52, not 0.520843458, as
    a step's own score of 1.0052 reads), so that a step measured against the reference
    says its change as one measured against its parent does."""
    return round((ratio - 1.0) * 100.0, SCORE_DIGITS - 2)


#: What a parent whose file is not a valid experiment is (``cumulative_reason``).
INVALID = "is invalid (kexp validate says why)"


def _carries_parent(record: Any) -> bool:
    """Whether ``record``'s code value is built on its parent's: a step measured over it,
    or a control (its code is its parent's)."""
    return bool(record.pid) and (is_control(record) or measured_against_parent(record))


def _absent(exp_id: str, invalid: Collection[str]) -> str:
    """What an id no record holds is: a file that is not a valid experiment (``invalid``;
    a mapping says what each of its ids is instead: an experiment removed on a newer
    branch, read across refs), or nothing in the store."""
    if exp_id not in invalid:
        return "is not in the store"
    if isinstance(invalid, Mapping):
        return str(invalid[exp_id])
    return INVALID


def _needs_parent(record: Any) -> bool:
    """Whether ``record``'s code value depends on its parent's."""
    if is_control(record):
        return bool(record.pid)
    if record.status in PENDING_STATUSES or record.is_buggy:
        return False
    return measured_against_parent(record)


def _reason(record_id: str, pid: str, code: _Code) -> str:
    culprit, problem = code[_CULPRIT], code[_PROBLEM]
    if culprit == record_id:
        return f"it {problem}"
    who = "parent" if culprit == pid else "ancestor"
    return f"{who} {culprit[:10]} {problem}"


_CONTROL_REASON = "it is a control (an A/A run): its score is the noise floor, not a speedup"


def _front(record: Any) -> tuple[Any, ...]:
    """What a record's derived values depend on, of its own front-matter."""
    return (
        record.pid,
        record.score,
        record.status,
        record.is_buggy,
        getattr(record, "measured_against", ""),
        tuple(getattr(record, "tags", None) or ()),
        tuple(getattr(record, "combines", None) or ()),
        tuple(getattr(record, "score_ci", None) or ()),
    )


class Derivation(dict[str, Derived]):
    """:func:`derive`'s answer: id → :class:`Derived` (of the first record of each id),
    and :meth:`of` for any record."""

    def __init__(
        self,
        first: dict[str, Any],
        codes: dict[str, _Code],
        settings: Settings,
        invalid: Collection[str] = frozenset(),
    ):
        super().__init__()
        self._first = first
        self._codes = codes
        self.settings = settings
        self._invalid = invalid
        #: id -> the nearest suspect step of its code value, itself included ("": none).
        self.carried: dict[str, str] = {}

    def of(self, record: Any) -> Derived:
        """The derived values of ``record``: the first record of its id, or another file
        holding the same id (judged with its own front-matter)."""
        exp_id: str = record.id
        first = self._first.get(exp_id)
        if first is record or (first is not None and _front(first) == _front(record)):
            return self[exp_id]  # the same record (read again: the same front-matter)
        before: _Code | None = None
        if _needs_parent(record):
            before = self._codes.get(record.pid) or _broken(
                record.pid, _absent(record.pid, self._invalid)
            )
        found = _derived(record, _step(record, before), self._first, self._codes, self.settings)
        if found.cumulative_score is None:
            return found
        return found._replace(built_on_suspect=self.suspect_below(record))

    def suspect_below(self, record: Any) -> str:
        """The id of the nearest step whose score ``record``'s cumulative score multiplies
        (its ancestors measured step on step, controls passed through) and whose own
        measurement is suspect; "" when none is. Each ancestor is judged once."""
        first, carried = self._first, self.carried
        chain: list[str] = []  # the ancestors walked, nearest first, not known yet
        below = ""
        current = record
        while _carries_parent(current) and current.pid in first:
            pid = current.pid
            if pid in carried or pid in chain:  # known, or a pid cycle (never a product)
                below = carried.get(pid, "")
                break
            chain.append(pid)
            current = first[pid]
        for pid in reversed(chain):  # the farthest first: each carries what is below it
            below = pid if self.suspect(first[pid]) else below
            carried[pid] = below
        return below

    def suspect(self, record: Any) -> bool:
        """Whether ``record``'s own measurement is suspect (a control's never counts)."""
        return not is_control(record) and bool(
            findings(
                record.score,
                getattr(record, "results", None),
                record.is_buggy,
                self.settings,
                getattr(record, "protocol", None),
            )
        )

    def each(self, records: Iterable[Any]) -> list[Derived]:
        """:meth:`of` each of ``records``, in order (a record derived is looked up by
        its id: one lookup each)."""
        found: list[Derived] = []
        first, of, own = self._first, self.of, self.__getitem__
        for record in records:
            exp_id = record.id
            found.append(own(exp_id) if first.get(exp_id) is record else of(record))
        return found

    def records(self) -> dict[str, Any]:
        """The first record of each id, as derived."""
        return dict(self._first)


def _chain_interval(value: float, below: float, above: float) -> tuple[float, float]:
    """The 95 % interval of a product of steps: ``value`` with the steps' summed squared
    log half-widths ``below`` and ``above``, rounded outwards."""
    from kexp.core.noise import rounded_interval  # statistics: not every command's import

    return rounded_interval(value * math.exp(-math.sqrt(below)), value * math.exp(math.sqrt(above)))


def _derived(
    record: Any,
    code: _Code,
    first: dict[str, Any],
    codes: dict[str, _Code],
    settings: Settings,
) -> Derived:
    """What is derived of ``record`` whose code value is ``code`` (``first`` and
    ``codes``: every id's first record and code value, for what it combines)."""
    tags = getattr(record, "tags", None)
    control = tags is not None and CONTROL_TAG in tags
    value, below, above, recorded, steps, start, _, _ = code
    cumulative: float | None = None
    interval: tuple[float, float] | None = None
    if control:
        reason = _CONTROL_REASON
    elif value is None:
        reason = _reason(record.id, record.pid, code)
    else:
        cumulative, reason = cumulative_digits(value), ""
        if steps == 1:
            interval = recorded
        elif below is not None and above is not None:
            interval = _chain_interval(value, below, above)
    interference = False
    combines = getattr(record, "combines", None)
    if combines and any(combines):
        combines = [c for c in combines if c]
        if cumulative is not None:
            theirs = [codes[c][0] for c in combines if c in codes and not is_control(first[c])]
            known = [v for v in theirs if v is not None]
            interference = bool(known) and value < max(known)  # (unrounded, as theirs)
        else:
            scores = [float(first[c].score) for c in combines if c in first]
            interference = bool(scores) and float(record.score) < max(scores)
    outcome = judge(
        record.status,
        record.is_buggy,
        interference,
        record.score,
        getattr(record, "score_ci", None),
        settings,
    )
    if judged_over_parent(record):
        outcome = _over_parent(record, outcome, codes.get(record.pid), settings)
    if cumulative is None:
        start, steps = "", 0
    shown = shown_score(record.score, record.status)
    # A NamedTuple made as the tuple it is (its __new__ takes keywords: slower).
    return tuple.__new__(
        Derived,
        (outcome, interference, cumulative, interval, reason, control, start, steps, shown, ""),
    )


@collector_paused()  # two tuples a record, none in a cycle
def derive(
    records: Iterable[Any],
    settings: Settings = DEFAULT_SETTINGS,
    invalid: Collection[str] = frozenset(),
) -> Derivation:
    """Every derived value of every record (see the module documentation), computed
    over ``records``: the store's current records (every one: a record's values depend
    on its ancestors' and on those it combines). Records are taken in the order given
    (path order): the first record of an id counts for it. A record has ``id``,
    ``pid``, ``score``, ``measured_against``, ``score_ci``, ``status``, ``is_buggy``,
    ``tags`` and ``combines``, as a :class:`kexp.storage.rows.Row`, a
    :class:`~kexp.core.model.KernelExperiment` or a review's facts have them.

    One pass over the records, in any order of parents and children: a record whose
    code value needs its parent's waits for it, and is settled (with its children
    waiting on it, and theirs) as soon as it is known; no recursion (a lineage may be
    thousands of iterations deep). Then the children of experiments not in the store,
    then the pid cycles. A measured record combining none, not a control, has its
    :class:`Derived` made on the spot (:func:`judge`'s rules, written out: the one fast
    path, held equal to :func:`judge` and :func:`_derived` by the tests); the others
    are derived by :func:`_derived` once every code value is known. ``invalid``: the ids
    of the store's files that are not valid experiments (their records are not among
    ``records``): a child of one is told its parent is invalid, not missing (a mapping:
    what each id is, as :func:`_absent` says it)."""
    first: dict[str, Any] = {}
    for record in records:
        first.setdefault(record.id, record)
    codes: dict[str, _Code] = {}
    derived: dict[str, Derived | None] = dict.fromkeys(first)  # path order; None: below
    waiting_on: dict[str, list[str]] = {}  # a parent's id -> its children waiting for it
    regression_below, improvement_above = settings.regression_below, settings.improvement_above
    made = tuple.__new__  # a NamedTuple made as the tuple it is (its __new__ is slower)
    over_parent: list[str] = []  # measured against the reference, made on a parent
    on_parent: list[str] = []  # built on a parent's code value, in the order settled

    def settle(exp_id: str, record: Any, before: _Code | None) -> None:
        """Set the code value of ``record`` given its parent's (``before``; None when
        its score does not build on its parent's), and its :class:`Derived` when it
        is a plain measured step."""
        if before is not None and before[0] is not None:
            on_parent.append(exp_id)  # its code value multiplies its parent's
        score = record.score
        if not (
            type(score) is float
            and 0.0 < score < math.inf
            and not record.is_buggy
            and record.status not in PENDING_STATUSES
            and record.status != TIMED_OUT
            and not record.combines
            and not ((tags := record.tags) and CONTROL_TAG in tags)
            and (before is None or before[0] is not None)
        ):
            codes[exp_id] = _step(record, before)
            return
        found = record.score_ci
        interval = low_sq = high_sq = None
        if found and len(found) == 2:
            low, high = found
            if high < 1 and score < regression_below:
                outcome = "regression"
            elif low > 1 and score > improvement_above:
                outcome = "improvement"
            else:
                outcome = "marginal"
            interval = _interval(record)
            if interval is not None:
                low_sq = math.log(score / interval[0]) ** 2
                high_sq = math.log(interval[1] / score) ** 2
        elif score < regression_below:
            outcome = "regression"
        elif score > improvement_above:
            outcome = "improvement"
        else:
            outcome = "marginal"
        if before is None:  # measured against the reference: its own cumulative score
            codes[exp_id] = (score, low_sq, high_sq, interval, 1, exp_id, "", "")
            derived[exp_id] = made(
                Derived, (outcome, False, score, interval, "", False, exp_id, 1, score, "")
            )
            if record.pid:  # made on a parent: judged over it once every code is known
                over_parent.append(exp_id)
            return
        value, below, above, _, steps, start, _, _ = before
        value *= score
        below = None if below is None or low_sq is None else below + low_sq
        above = None if above is None or high_sq is None else above + high_sq
        recorded = interval if steps == 0 else None
        steps += 1
        start = start or exp_id
        codes[exp_id] = (value, below, above, recorded, steps, start, "", "")
        if steps == 1:
            interval = recorded
        elif below is not None and above is not None:
            interval = _chain_interval(value, below, above)
        else:
            interval = None
        reached = cumulative_digits(value)
        derived[exp_id] = made(
            Derived, (outcome, False, reached, interval, "", False, start, steps, score, "")
        )

    def release(exp_id: str) -> None:
        """Settle the children waiting on ``exp_id`` (known now), and theirs."""
        known = [exp_id]
        while known:
            for child in waiting_on.pop(known.pop(), ()):
                if child not in codes:  # a member of a cycle is marked already
                    settle(child, first[child], codes[first[child].pid])
                    known.append(child)

    for exp_id, record in first.items():
        if _needs_parent(record):
            before = codes.get(record.pid)
            if before is None:
                waiting_on.setdefault(record.pid, []).append(exp_id)
                continue
            settle(exp_id, record, before)
        else:
            settle(exp_id, record, None)
        if exp_id in waiting_on:
            release(exp_id)
    # Children of experiments not in the store.
    for pid in [pid for pid in waiting_on if pid not in first]:
        missing = _broken(pid, _absent(pid, invalid))
        for child in waiting_on.pop(pid):
            settle(child, first[child], missing)
            release(child)
    # What still waits is a pid cycle or hangs below one.
    for children in list(waiting_on.values()):
        for start in children:
            if start in codes:
                continue
            path: dict[str, None] = {}
            current = start
            while current not in codes and current not in path:
                path[current] = None
                current = first[current].pid
            if current in path:
                members = list(path)
                for member in members[members.index(current) :]:
                    codes[member] = _broken(member, "is in a pid cycle")
                for member in members[members.index(current) :]:
                    release(member)
            else:
                release(current)
    for exp_id in over_parent:
        record, value = first[exp_id], derived[exp_id]
        assert value is not None
        outcome = _over_parent(record, value.outcome, codes.get(record.pid), settings)
        if outcome != value.outcome:
            derived[exp_id] = value._replace(outcome=outcome)
    for exp_id, value in derived.items():
        if value is None:
            derived[exp_id] = _derived(first[exp_id], codes[exp_id], first, codes, settings)
    derivation = Derivation(first, codes, settings, invalid)
    # A suspect step carried up the products, parents first (the order they settled in):
    # each parent judged once (Derivation.suspect_below's rule, in one pass).
    below: dict[str, str] = {}
    carried = derivation.carried
    for exp_id in on_parent:
        pid = first[exp_id].pid
        found = carried.get(pid)
        if found is None:
            found = carried[pid] = pid if derivation.suspect(first[pid]) else below.get(pid, "")
        below[exp_id] = found
        if found:
            value = derived[exp_id]
            assert value is not None
            if value.cumulative_score is not None:
                derived[exp_id] = value._replace(built_on_suspect=found)
    dict.update(derivation, derived)
    return derivation


def depends_on(record: Any) -> list[str]:
    """The ids whose values what is derived of ``record`` needs: its parent's, when its
    score builds on its parent's code (or it is a control with a parent) or its outcome
    is judged over its parent (:func:`judged_over_parent`), and those it combines.
    :func:`derive` over ``record`` and these, each with what its code value depends on
    in turn (:func:`code_depends_on`), gives what it gives over the whole store for
    ``record``."""
    needed = [record.pid] if _needs_parent(record) or judged_over_parent(record) else []
    needed += [c for c in getattr(record, "combines", None) or () if c]
    return needed


def code_depends_on(record: Any) -> list[str]:
    """The ids whose values the code value of ``record`` needs (what an experiment that
    depends on it reads of it): :func:`depends_on` but a parent its outcome alone is
    judged over (a chain of reference measurements is not read back to its root)."""
    needed = [record.pid] if _needs_parent(record) else []
    needed += [c for c in getattr(record, "combines", None) or () if c]
    return needed


class Versions:
    """Each id's records: their numbers in a list of records, in order
    (:func:`versions_of`). Most ids have one record: only the others get a list."""

    __slots__ = ("_several", "first")

    def __init__(self, first: dict[str, int], several: dict[str, list[int]]) -> None:
        #: The number of each id's first record (the one that counts for the id), in
        #: the order the ids first appear.
        self.first = first
        self._several = several

    def get(self, exp_id: str) -> Sequence[int]:
        """The numbers of ``exp_id``'s records (empty: none)."""
        several = self._several.get(exp_id)
        if several is not None:
            return several
        number = self.first.get(exp_id)
        return () if number is None else (number,)


def versions_of(records: Sequence[Any]) -> Versions:
    """Each id's records: their numbers in ``records``, in order."""
    ids = [record.id for record in records]
    first = dict(zip(ids, range(len(ids)), strict=True))
    if len(first) == len(ids):  # every id once
        return Versions(first, {})
    numbers: dict[str, list[int]] = {}
    for number, exp_id in enumerate(ids):
        numbers.setdefault(exp_id, []).append(number)
    first = {exp_id: found[0] for exp_id, found in numbers.items()}
    return Versions(first, {exp_id: found for exp_id, found in numbers.items() if len(found) > 1})


def derive_for(
    records: Sequence[Any],
    wanted: Iterable[Any],
    settings: Settings = DEFAULT_SETTINGS,
    versions: Versions | None = None,
) -> Derivation:
    """:func:`derive` over ``wanted`` and what each depends on in turn
    (:func:`depends_on`), found among ``records`` (every current record, in path order):
    what it gives for each of ``wanted`` is what :func:`derive` over ``records`` gives.
    Every version of an id taken in is (``Derivation.of`` judges another file of an id
    with its own front-matter). ``versions``: :func:`versions_of` ``records``, when
    made already."""
    if versions is None:
        versions = versions_of(records)
    taken: set[str] = set()
    waiting: list[str] = []
    for record in wanted:
        waiting += [record.id, *depends_on(record)]
    while waiting:
        exp_id = waiting.pop()
        if exp_id in taken:
            continue
        taken.add(exp_id)
        for number in versions.get(exp_id):
            waiting += code_depends_on(records[number])
    chosen = sorted(number for exp_id in taken for number in versions.get(exp_id))
    return derive([records[number] for number in chosen], settings)


def stands_alone(record: Any) -> bool:
    """Whether what is derived of ``record`` depends on no other experiment: it builds
    on no parent's code (a root, a reference measurement, buggy or pending) and combines
    none. :func:`derive` over ``[record]`` alone then gives what it gives over the whole
    store (an id several files hold aside: the first file's front-matter counts)."""
    return not depends_on(record)


def derive_alone(record: Any, settings: Settings = DEFAULT_SETTINGS) -> Derived:
    """The derived values of one record no store handed out: with only itself known,
    a step over a parent has no cumulative score (its parent was not read)."""
    return derive([record], settings)[record.id]


def latest_control(controls: Iterable[Any]) -> Any | None:
    """The newest of ``controls`` (by ``created_at``, then id) that was measured (not
    pending, not buggy): the noise floor of its env. None when there is none."""
    found = [r for r in controls if r.status not in PENDING_STATUSES and not r.is_buggy]
    return max(found, key=lambda r: (time_key(r.created_at), r.id), default=None)


def describe_control(record: Any) -> str:
    """A control as the noise floor: ``A/A on this env: 1.039 [0.839, 1.287]``."""
    text = f"A/A on this env: {float(record.score):.3f}"
    interval = _interval(record)
    if interval is not None:
        text += f" [{interval[0]:.3f}, {interval[1]:.3f}]"
    return text


def time_key(created_at: str) -> str:
    """``created_at`` in a form that sorts in time order as text: whole seconds and
    fractional ones compare correctly (``…:05Z`` becomes ``…:05.000000000``, before
    ``…:05.500000000``; as text, ``Z`` sorts after ``.``). kexp writes microseconds;
    a hand-written file, an imported one or one an older kexp wrote may hold others."""
    text = created_at[:-1] if created_at.endswith("Z") else created_at
    seconds, _, fraction = text.partition(".")
    return f"{seconds}.{fraction:0<9}"
