"""The cumulative score's arithmetic: the code value of each step (the speedup of its
code over the operator's reference, or what breaks the chain) built on its parent's, its
interval, and what is derived of one record from the code values (:class:`Derived`).

:mod:`kexp.core.campaign` walks a whole store with it (its documentation says the rules);
the outcome of one experiment by its own front-matter is :mod:`kexp.core.outcome`.
"""

from __future__ import annotations

import math
from collections.abc import Collection, Mapping
from typing import Any, NamedTuple

from kexp.core.noise import SCORE_DIGITS
from kexp.core.outcome import (
    CONTROL_TAG,
    PENDING_STATUSES,
    SCORED_OUTCOMES,
    TIMED_OUT,
    is_control,
    judge,
    judged_over_parent,
    measured_against_parent,
    measured_nothing,
    recorded_interval,
    retired,
    shown_score,
)
from kexp.core.settings import DEFAULT_SETTINGS, Settings

#: Significant digits a cumulative score keeps: a product of scores, each of a few
#: significant digits (4 decimals in a file), carries no more; fewer than a float's 17,
#: so that it prints 1.43, not 1.4300000000000002 (binary noise), in every output. The
#: product is made exactly (as floats multiply) and rounded once, when derived.
CUMULATIVE_DIGITS = 13


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
    #: Why its outcome is ``marginal`` though its interval leaves out 1: it stays within
    #: the largest drift the newest A/A controls of its env measured
    #: (:func:`kexp.core.outcome.drift_reason`; "" when no control judged it).
    drift: str = ""
    #: For a step measured against the reference on a parent (``judged_over_parent``):
    #: its parent's cumulative score, which its step is its score over (what its outcome
    #: and the plausibility ceiling judge); None otherwise.
    parent_cumulative: float | None = None

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


def outcome_over_parent(record: Any, outcome: str, parent: Any, settings: Settings) -> str:
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
    own = recorded_interval(record)
    interval = None
    if own is not None:
        low_sq = math.log(score / own[0]) ** 2
        high_sq = math.log(own[1] / score) ** 2
        if below is not None and above is not None:
            low_sq, high_sq = low_sq + above, high_sq + below
        interval = (ratio * math.exp(-math.sqrt(low_sq)), ratio * math.exp(math.sqrt(high_sq)))
    return judge("done", False, False, ratio, interval, settings)


#: The speedup of an experiment's code over the reference, or why it is unknown, as a
#: plain tuple (one is made for every experiment: a tuple is the cheapest to make):
#: (value or None, the steps' summed squared log half-widths below and above (None: a
#: step has no interval), the one step's recorded interval (a product of one step),
#: steps, the id the product starts at, and when value is None: the experiment that
#: breaks the chain and what it is).
Code = tuple[Any, ...]


_CULPRIT, _PROBLEM = 6, 7


#: What a retired step is, as the reason of a code value it breaks.
RETIRED_PROBLEM = "is marked failed (status failed: retired)"


def retired_below(code: Code | None, record_id: str) -> str:
    """The id of the retired step (:func:`retired`) that breaks the chain of ``code``,
    the code value of ``record_id``, when it is an ancestor's ("" otherwise): what is
    built on a retired step leaves the ranking with it."""
    if code is None or code[0] is not None or code[_PROBLEM] != RETIRED_PROBLEM:
        return ""
    culprit: str = code[_CULPRIT]
    return "" if culprit == record_id else culprit


#: The reference's own code: the speedup 1, exactly (a root control's code).
_REFERENCE: Code = (1.0, 0.0, 0.0, None, 0, "", "", "")


def broken_code(culprit: str, problem: str) -> Code:
    return (None, None, None, None, 0, "", culprit, problem)


def step_code(record: Any, before: Code | None, settings: Settings = DEFAULT_SETTINGS) -> Code:
    """The code value of ``record`` given its parent's (``before``: None when the
    record's score does not build on its parent's)."""
    if is_control(record):
        if not record.pid:
            return _REFERENCE
        return before if before is not None else broken_code(record.pid, "is not in the store")
    if record.status in PENDING_STATUSES:
        return broken_code(record.id, f"is pending (status {record.status})")
    if record.is_buggy:
        return broken_code(record.id, "is buggy")
    if record.status == TIMED_OUT:
        return broken_code(record.id, "timed out (nothing measured)")
    if retired(record.status, record.score, recorded_interval(record), settings):
        return broken_code(record.id, RETIRED_PROBLEM)
    return _measured(record, before)


def _measured(record: Any, before: Code | None) -> Code:
    """:func:`step_code` of a measured record (neither pending nor buggy nor a control)."""
    score = record.score
    if measured_nothing(score):
        return broken_code(record.id, "measured nothing (score 0)")
    score = float(score)
    interval = recorded_interval(record)
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


def carries_parent(record: Any) -> bool:
    """Whether ``record``'s code value is built on its parent's: a step measured over it,
    or a control (its code is its parent's)."""
    return bool(record.pid) and (is_control(record) or measured_against_parent(record))


def absent_reason(exp_id: str, invalid: Collection[str]) -> str:
    """What an id no record holds is: a file that is not a valid experiment (``invalid``;
    a mapping says what each of its ids is instead: an experiment removed on a newer
    branch, read across refs), or nothing in the store."""
    if exp_id not in invalid:
        return "is not in the store"
    if isinstance(invalid, Mapping):
        return str(invalid[exp_id])
    return INVALID


def needs_parent(record: Any) -> bool:
    """Whether ``record``'s code value depends on its parent's."""
    if is_control(record):
        return bool(record.pid)
    if record.status in PENDING_STATUSES or record.is_buggy:
        return False
    return measured_against_parent(record)


def _reason(record_id: str, pid: str, code: Code) -> str:
    culprit, problem = code[_CULPRIT], code[_PROBLEM]
    if culprit == record_id:
        return f"it {problem}"
    who = "parent" if culprit == pid else "ancestor"
    return f"{who} {culprit[:10]} {problem}"


_CONTROL_REASON = "it is a control (an A/A run): its score is the noise floor, not a speedup"


def chain_interval(value: float, below: float, above: float) -> tuple[float, float]:
    """The 95 % interval of a product of steps: ``value`` with the steps' summed squared
    log half-widths ``below`` and ``above``, rounded outwards."""
    from kexp.core.noise import rounded_interval  # statistics: not every command's import

    return rounded_interval(value * math.exp(-math.sqrt(below)), value * math.exp(math.sqrt(above)))


def derived_of(
    record: Any,
    code: Code,
    first: dict[str, Any],
    codes: dict[str, Code],
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
            interval = chain_interval(value, below, above)
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
        control=control,
    )
    over = None
    if judged_over_parent(record):
        outcome = outcome_over_parent(record, outcome, codes.get(record.pid), settings)
        over = parent_value(codes.get(record.pid))
    if cumulative is None:
        start, steps = "", 0
    shown = shown_score(record.score, record.status)
    # A NamedTuple made as the tuple it is (its __new__ takes keywords: slower).
    return tuple.__new__(
        Derived,
        (
            outcome,
            interference,
            cumulative,
            interval,
            reason,
            control,
            start,
            steps,
            shown,
            "",
            "",
            over,
        ),
    )


def parent_value(parent: Code | None) -> float | None:
    """The cumulative score of a parent's code value (``parent``: None when not in the
    store), as a step measured against the reference is judged over it."""
    if parent is None or parent[0] is None:
        return None
    return cumulative_digits(parent[0])
