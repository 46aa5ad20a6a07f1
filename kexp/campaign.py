"""A campaign's numbers: what is derived from the front-matter of all experiments at once.

One function, :func:`derive`, computes every derived value of every experiment from the
front-matter of the store's current records (cache rows, :class:`KernelExperiment`
objects, a review's facts: anything with the attributes read below), so that every
view ranks and judges alike:

* ``outcome`` and ``interference`` (see :func:`judge`);
* ``cumulative_score``: the speedup of the experiment's code over the operator's
  reference (original) code. A score is measured against what ``measured_against``
  names: ``reference`` (or an experiment without a ``pid``: its parent is the
  reference) is its own cumulative score; ``parent`` (a ``pid`` without the field
  counts as ``parent``: kexp's convention, and validation warns that it should be
  written) multiplies its score onto its parent's cumulative score. So the cumulative
  score is the product of the steps along the ``pid`` chain back to the nearest
  experiment measured against the reference;
* ``cumulative_ci``: its 95 % interval when every step has one (``score_ci``): the
  steps' log half-widths, below and above the score, add in quadrature (each step's
  interval is Student's t on the log scale, :mod:`kexp.noise`; independent steps' log
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
from collections.abc import Iterable
from typing import Any, NamedTuple

from kexp.noise import rounded_interval
from kexp.settings import DEFAULT_SETTINGS, Settings

#: Statuses of an experiment not measured yet (its outcome is ``pending``).
PENDING_STATUSES = frozenset({"new", "running"})
#: The tag of an A/A run: the same code on both sides, the measured noise floor.
CONTROL_TAG = "control"
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

    @property
    def ranked(self) -> bool:
        """Whether a ranking by the cumulative score places it (not a control, and a
        cumulative score known)."""
        return not self.control and self.cumulative_score is not None


def judge(
    status: Any,
    is_buggy: Any,
    interference: bool,
    score: Any,
    interval: Any,
    settings: Settings = DEFAULT_SETTINGS,
) -> str:
    """The outcome: pending, buggy, interference, regression, marginal, improvement.

    With an interval (``score_ci``), ``improvement`` needs its low end above 1 and
    ``regression`` its high end below 1 (besides the thresholds); otherwise the
    thresholds alone decide.
    """
    if status in PENDING_STATUSES:
        return "pending"
    if is_buggy:
        return "buggy"
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
    if (
        isinstance(found, (list, tuple))
        and len(found) == 2
        and all(isinstance(v, (int, float)) and not isinstance(v, bool) and v > 0 for v in found)
    ):
        return float(found[0]), float(found[1])
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
    score = record.score
    if (
        not isinstance(score, (int, float))
        or isinstance(score, bool)
        or not math.isfinite(score)
        or score <= 0
    ):
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

    def __init__(self, first: dict[str, Any], codes: dict[str, _Code], settings: Settings):
        super().__init__()
        self._first = first
        self._codes = codes
        self.settings = settings

    def of(self, record: Any) -> Derived:
        """The derived values of ``record``: the first record of its id, or another file
        holding the same id (judged with its own front-matter)."""
        exp_id: str = record.id
        first = self._first.get(exp_id)
        if first is record or (first is not None and _front(first) == _front(record)):
            return self[exp_id]  # the same record (read again: the same front-matter)
        return self._derive(record)

    def records(self) -> dict[str, Any]:
        """The first record of each id, as derived."""
        return dict(self._first)

    def _code_of(self, record: Any) -> _Code:
        before: _Code | None = None
        if _needs_parent(record):
            before = self._codes.get(record.pid) or _broken(record.pid, "is not in the store")
        return _step(record, before)

    def _derive(self, record: Any, code: _Code | None = None) -> Derived:
        if code is None:
            code = self._code_of(record)
        control = is_control(record)
        combines = getattr(record, "combines", None)
        if combines:
            combines = [c for c in combines if c]
        cumulative: float | None = None
        interval: tuple[float, float] | None = None
        reason = _CONTROL_REASON
        value, below, above, recorded, steps, start, _, _ = code
        if not control:
            cumulative = value
            reason = "" if cumulative is not None else _reason(record.id, record.pid, code)
            if cumulative is not None:
                if steps == 1:
                    interval = recorded
                elif below is not None and above is not None:
                    interval = rounded_interval(
                        cumulative * math.exp(-math.sqrt(below)),
                        cumulative * math.exp(math.sqrt(above)),
                    )
        interference = False
        if combines:
            if cumulative is not None:
                theirs = [
                    self._codes[c][0]
                    for c in combines
                    if c in self._codes and not is_control(self._first[c])
                ]
                known = [v for v in theirs if v is not None]
                interference = bool(known) and cumulative < max(known)
            else:
                scores = [float(self._first[c].score) for c in combines if c in self._first]
                interference = bool(scores) and float(record.score) < max(scores)
        outcome = judge(
            record.status,
            record.is_buggy,
            interference,
            record.score,
            getattr(record, "score_ci", None),
            self.settings,
        )
        return Derived(
            outcome,
            interference,
            cumulative,
            interval,
            reason,
            control,
            start if cumulative is not None else "",
            steps if cumulative is not None else 0,
        )


def derive(records: Iterable[Any], settings: Settings = DEFAULT_SETTINGS) -> Derivation:
    """Every derived value of every record (see the module documentation), computed
    over ``records``: the store's current records (every one: a record's values depend
    on its ancestors' and on those it combines). Records are taken in the order given
    (path order): the first record of an id counts for it. Without recursion: a lineage
    may be thousands of iterations deep."""
    first: dict[str, Any] = {}
    for record in records:
        first.setdefault(record.id, record)
    codes: dict[str, _Code] = {}
    for start, record in first.items():
        if start in codes:
            continue
        if not _needs_parent(record):  # most records: a root or over the reference
            codes[start] = _step(record, None)
            continue
        path: list[str] = []
        on_path: set[str] = set()
        current = start
        above: _Code | None = None
        while current not in codes:
            record = first.get(current)
            if record is None:
                above = _broken(current, "is not in the store")
                break
            if current in on_path:
                at = path.index(current)
                for member in path[at:]:
                    codes[member] = _broken(member, "is in a pid cycle")
                del path[at:]
                break
            path.append(current)
            on_path.add(current)
            if not _needs_parent(record):
                break
            current = record.pid
        for member in reversed(path):
            record = first[member]
            before: _Code | None = None
            if _needs_parent(record):
                before = codes.get(record.pid) or above
                if before is None:  # pragma: no cover - the walk above computed it
                    before = _broken(record.pid, "is not in the store")
            codes[member] = _step(record, before)
            above = None
    derivation = Derivation(first, codes, settings)
    for exp_id, record in first.items():
        derivation[exp_id] = derivation._derive(record, codes[exp_id])
    return derivation


def stands_alone(record: Any) -> bool:
    """Whether what is derived of ``record`` depends on no other experiment: it builds
    on no parent's code (a root, a reference measurement, buggy or pending) and combines
    none. :func:`derive` over ``[record]`` alone then gives what it gives over the whole
    store (an id several files hold aside: the first file's front-matter counts)."""
    return not _needs_parent(record) and not any(getattr(record, "combines", None) or ())


def derive_alone(record: Any, settings: Settings = DEFAULT_SETTINGS) -> Derived:
    """The derived values of one record no store handed out: with only itself known,
    a step over a parent has no cumulative score (its parent was not read)."""
    return derive([record], settings)[record.id]


def latest_control(controls: Iterable[Any]) -> Any | None:
    """The newest of ``controls`` (by ``created_at``, then id) that was measured (not
    pending, not buggy): the noise floor of its env. None when there is none."""
    found = [r for r in controls if r.status not in PENDING_STATUSES and not r.is_buggy]
    return max(found, key=lambda r: (_time_key(r.created_at), r.id), default=None)


def describe_control(record: Any) -> str:
    """A control as the noise floor: ``A/A on this env: 1.039 [0.839, 1.287]``."""
    text = f"A/A on this env: {float(record.score):.3f}"
    interval = _interval(record)
    if interval is not None:
        text += f" [{interval[0]:.3f}, {interval[1]:.3f}]"
    return text


def _time_key(created_at: str) -> str:
    text = created_at[:-1] if created_at.endswith("Z") else created_at
    seconds, _, fraction = text.partition(".")
    return f"{seconds}.{fraction:0<9}"
