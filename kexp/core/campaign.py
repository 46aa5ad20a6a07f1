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
  0), is not in the store, or its ``pid`` chain is a cycle; or it is a control; or a
  step it is built on, by any ``pid`` chain (a reference measurement on the way too:
  its code holds that step's change), was retired (:func:`leave_with_retired`);
* ``control``: tagged ``control`` (an A/A run, the same code on both sides). A control
  measures the noise floor: it has no cumulative score, is never ranked, never the
  best, never a dead end. Its code is its parent's (or the reference's, without a
  parent), so an experiment built on a control continues its parent's chain;
* ``drift``: the newest measured controls of an env (``control_drift_window`` of them,
  :func:`env_controls`; of the same timer when both name one) judge its steps: an
  ``improvement`` or a ``regression`` whose interval does not clear
  ``control_drift_reach`` times the largest drift they measured
  (:func:`kexp.core.outcome.within_drift`) is ``marginal``, and ``drift`` says why,
  naming the controls read. An interval covers the noise within one run; the controls
  are the one measure of the drift between runs. They are known from the rows: one
  more pass.

``combines`` (a merge of other experiments' changes) does not enter the product: the
merge is measured against its ``pid`` (the code it was made on) or the reference like
any experiment, so its cumulative score follows its ``pid`` chain. It is
``interference`` when its cumulative score is below the best cumulative score of the
experiments it combines (without a cumulative score of its own: its score below their
best score, today's rule for stores measured against the reference).

An id held by several files (which validation reports) counts with its first file in
the order given (path order); :meth:`Derivation.of` gives a later file's own values.

The outcome of one experiment by its own front-matter is :mod:`kexp.core.outcome`; the
arithmetic of a cumulative score along a chain, and :class:`Derived`, is
:mod:`kexp.core.cumulative`; this module derives them over a whole store (and hands on
the few of their names that :mod:`kexp.storage` reads from here).
"""

from __future__ import annotations

import math
from collections.abc import Collection, Iterable, Sequence
from typing import Any

from kexp.core.collector import collector_paused
from kexp.core.cumulative import (
    RETIRED_PROBLEM,
    Code,
    Derived,
    absent_reason,
    broken_code,
    carries_parent,
    chain_interval,
    cumulative_digits,
    derived_of,
    needs_parent,
    outcome_over_parent,
    parent_value,
    retired_below,
    step_code,
)
from kexp.core.outcome import (
    CONTROL_TAG,
    FAILED_STATUSES,
    PENDING_STATUSES,
    ControlFloor,
    drift_reason,
    floor_reach,
    is_control,
    judged_over_parent,
    recorded_interval,
    time_key,
    timer_of,
    within_drift,
)
from kexp.core.settings import DEFAULT_SETTINGS, Settings
from kexp.core.spelling import canonical
from kexp.core.suspicion import findings


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
        codes: dict[str, Code],
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
        #: env -> timer -> its measured controls, newest first (:func:`env_controls`).
        self.controls = env_controls(first.values())
        self._reasons: dict[str, str] = {}

    def judged_by_control(self, record: Any, value: Derived) -> Derived:
        """:func:`judged_by_control` with this derivation's controls."""
        return judged_by_control(record, value, self.controls, self.settings, self._reasons)

    def of(self, record: Any) -> Derived:
        """The derived values of ``record``: the first record of its id, or another file
        holding the same id (judged with its own front-matter)."""
        exp_id: str = record.id
        first = self._first.get(exp_id)
        if first is record or (first is not None and _front(first) == _front(record)):
            return self[exp_id]  # the same record (read again: the same front-matter)
        before: Code | None = None
        if needs_parent(record):
            before = self._codes.get(record.pid) or broken_code(
                record.pid, absent_reason(record.pid, self._invalid)
            )
        code = self._left_with_retired(record, step_code(record, before, self.settings))
        found = derived_of(record, code, self._first, self._codes, self.settings)
        found = self.judged_by_control(record, found)
        if found.cumulative_score is None:
            return found
        return found._replace(built_on_suspect=self.suspect_below(record))

    def built_on_retired(self, record: Any) -> str:
        """The id of the retired step (status failed after it was measured) that
        ``record`` is built on, its chain broken there ("" when none is): it leaves the
        ranking, every current best and the successes with that step."""
        exp_id: str = record.id
        code = self._codes.get(exp_id)
        if self._first.get(exp_id) is not record:
            before = self._codes.get(record.pid) if needs_parent(record) else None
            if before is not None or not needs_parent(record):
                code = self._left_with_retired(record, step_code(record, before, self.settings))
            else:
                code = None
        return retired_below(code, exp_id)

    def _left_with_retired(self, record: Any, code: Code) -> Code:
        """``code``, the code value of ``record`` of its own front-matter, broken when
        its parent's is by a retired step (:func:`leave_with_retired`): measured against
        the reference or not, its code holds that step's change."""
        if code[0] is None or not record.pid:
            return code
        culprit = retired_below(self._codes.get(record.pid), "")
        return broken_code(culprit, RETIRED_PROBLEM) if culprit else code

    def leaving_with(self, exp_id: str) -> list[str]:
        """The ids of the steps built on ``exp_id`` that leave the ranking with it
        (:meth:`built_on_retired` names it), oldest first as given."""
        return [
            other
            for other, record in self._first.items()
            if other != exp_id and self.built_on_retired(record) == exp_id
        ]

    def suspect_below(self, record: Any) -> str:
        """The id of the nearest step whose score ``record``'s cumulative score multiplies
        (its ancestors measured step on step, controls passed through) and whose own
        measurement is suspect; "" when none is. Each ancestor is judged once."""
        first, carried = self._first, self.carried
        chain: list[str] = []  # the ancestors walked, nearest first, not known yet
        below = ""
        current = record
        while carries_parent(current) and current.pid in first:
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

    def suspect(self, record: Any, value: Derived | None = None) -> bool:
        """Whether ``record``'s own measurement is suspect (a control's never counts);
        ``value``: what is derived of it, when this derivation does not hold it yet."""
        if value is None:
            value = self.get(record.id)
        return not is_control(record) and bool(
            findings(
                record.score,
                getattr(record, "results", None),
                record.is_buggy,
                self.settings,
                getattr(record, "protocol", None),
                over=None if value is None else value.parent_cumulative,
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
    path, held equal to :func:`judge` and :func:`derived_of` by the tests); the others
    are derived by :func:`derived_of` once every code value is known. ``invalid``: the ids
    of the store's files that are not valid experiments (their records are not among
    ``records``): a child of one is told its parent is invalid, not missing (a mapping:
    what each id is, as :func:`absent_reason` says it)."""
    first: dict[str, Any] = {}
    for record in records:
        first.setdefault(record.id, record)
    codes: dict[str, Code] = {}
    derived: dict[str, Derived | None] = dict.fromkeys(first)  # path order; None: below
    waiting_on: dict[str, list[str]] = {}  # a parent's id -> its children waiting for it
    regression_below, improvement_above = settings.regression_below, settings.improvement_above
    made = tuple.__new__  # a NamedTuple made as the tuple it is (its __new__ is slower)
    over_parent: list[str] = []  # measured against the reference, made on a parent
    on_parent: list[str] = []  # built on a parent's code value, in the order settled
    retired: list[str] = []  # retired steps (status failed after they were measured)
    apart: list[str] = []  # made on a parent, their code values not built on its (slow path)

    def settle(exp_id: str, record: Any, before: Code | None) -> None:
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
            and record.status not in FAILED_STATUSES  # failed, retired: judged in full
            and not record.combines
            and not ((tags := record.tags) and CONTROL_TAG in tags)
            and (before is None or before[0] is not None)
        ):
            codes[exp_id] = step_code(record, before, settings)
            if record.status in FAILED_STATUSES and retired_below(codes[exp_id], "") == exp_id:
                retired.append(exp_id)
            if before is None and record.pid:
                apart.append(exp_id)
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
            interval = recorded_interval(record)
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
                Derived,
                (outcome, False, score, interval, "", False, exp_id, 1, score, "", "", None),
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
            interval = chain_interval(value, below, above)
        else:
            interval = None
        reached = cumulative_digits(value)
        derived[exp_id] = made(
            Derived,
            (outcome, False, reached, interval, "", False, start, steps, score, "", "", None),
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
        if needs_parent(record):
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
        missing = broken_code(pid, absent_reason(pid, invalid))
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
                    codes[member] = broken_code(member, "is in a pid cycle")
                for member in members[members.index(current) :]:
                    release(member)
            else:
                release(current)
    # What is built on a retired step holds its change, however measured: what the
    # product of codes did not break (a reference measurement on the way) is broken.
    if retired and _retired_above(first, codes, [*over_parent, *apart]):
        leave_with_retired(first, codes, derived, retired)
    for exp_id in over_parent:
        record, value = first[exp_id], derived[exp_id]
        if value is None:  # left with a retired step below it: derived below
            continue
        parent = codes.get(record.pid)
        outcome = outcome_over_parent(record, value.outcome, parent, settings)
        derived[exp_id] = value._replace(outcome=outcome, parent_cumulative=parent_value(parent))
    for exp_id, value in derived.items():
        if value is None:
            derived[exp_id] = derived_of(first[exp_id], codes[exp_id], first, codes, settings)
    derivation = Derivation(first, codes, settings, invalid)
    # A suspect step carried up the products, parents first (the order they settled in):
    # each parent judged once (Derivation.suspect_below's rule, in one pass).
    below: dict[str, str] = {}
    carried = derivation.carried
    for exp_id in on_parent:
        pid = first[exp_id].pid
        found = carried.get(pid)
        if found is None:
            suspect = derivation.suspect(first[pid], derived[pid])
            found = carried[pid] = pid if suspect else below.get(pid, "")
        below[exp_id] = found
        if found:
            value = derived[exp_id]
            assert value is not None
            if value.cumulative_score is not None:
                derived[exp_id] = value._replace(built_on_suspect=found)
    if derivation.controls:  # each step judged by its env's control: one more pass
        judged = derivation.judged_by_control
        for exp_id, value in derived.items():
            assert value is not None
            if value.outcome in _CHANGES:
                derived[exp_id] = judged(first[exp_id], value)
    dict.update(derivation, derived)
    return derivation


def _retired_above(first: dict[str, Any], codes: dict[str, Code], made_on: list[str]) -> bool:
    """Whether a step retired is an ancestor of one of ``made_on`` (made on a parent, its
    code value not built on its parent's), its chain walked up to a code value broken by
    a retired step, each step once."""
    known: dict[str, bool] = {}
    for exp_id in made_on:
        code = codes.get(exp_id)
        if code is None or code[0] is None:
            continue
        path: list[str] = []
        current = first[exp_id].pid
        found = False
        while current and current not in known and current in first:
            if current in path:  # a pid cycle
                break
            path.append(current)
            if retired_below(codes.get(current), ""):
                found = True
                break
            current = first[current].pid
        found = found or known.get(current, False)
        known.update(dict.fromkeys(path, found))
        if found:
            return True
    return False


def leave_with_retired(
    first: dict[str, Any],
    codes: dict[str, Code],
    derived: dict[str, Derived | None],
    retired: Sequence[str],
) -> None:
    """Break the code value of every experiment built on one of the ``retired`` steps
    (status failed after it was measured: its code is not to build on), through any
    chain of ``pid``: a step measured against the reference keeps a code value of its
    own, though its code holds the retired change. Each is told of the nearest retired
    step below it (:func:`retired_below` names it) and derived again (its ``derived``
    set to None)."""
    children: dict[str, list[str]] = {}
    for exp_id, record in first.items():
        if record.pid:
            children.setdefault(record.pid, []).append(exp_id)
    done = set(retired)
    waiting = [(exp_id, exp_id) for exp_id in retired]
    while waiting:
        exp_id, culprit = waiting.pop()
        for child in children.get(exp_id, ()):
            if child in done:  # a retired step names itself; a pid cycle ends
                continue
            done.add(child)
            code = codes.get(child)
            if code is not None and code[0] is not None:
                codes[child] = broken_code(culprit, RETIRED_PROBLEM)
                derived[child] = None
            waiting.append((child, culprit))


#: The outcomes a control of the env may find within the drift between runs.
_CHANGES = frozenset({"improvement", "regression"})


def env_controls(records: Iterable[Any]) -> dict[str, dict[str, list[Any]]]:
    """The measured (not pending, not buggy) controls of each env and timer
    (:func:`kexp.core.outcome.timer_of`; "" unknown) among ``records``, newest first:
    env -> timer -> records. One pass; the env in kexp's spelling (:func:`canonical`:
    ``MI300X ROCm-6.2`` is the machine of ``MI300X ROCm 6.2``)."""
    found: dict[str, dict[str, list[Any]]] = {}
    for record in records:
        tags = record.tags
        if not tags or CONTROL_TAG not in tags:
            continue
        if record.status in PENDING_STATUSES or record.is_buggy:
            continue
        timers = found.setdefault(canonical("env", getattr(record, "env", "")), {})
        timers.setdefault(timer_of(record), []).append(record)
    for timers in found.values():
        for listed in timers.values():
            listed.sort(key=_newest, reverse=True)
    return found


def control_for(
    record: Any,
    controls: dict[str, dict[str, list[Any]]],
    window: int = DEFAULT_SETTINGS.control_drift_window,
) -> ControlFloor | None:
    """The controls that judge ``record`` (:func:`env_controls`): the ``window`` newest
    of its env timed by the same timer or an unknown one (when its own timer is unknown,
    those of the timer whose control is the env's newest)."""
    if not controls:
        return None
    timers = controls.get(canonical("env", getattr(record, "env", "")))
    if not timers:
        return None
    timer = timer_of(record)
    chosen: list[Any]
    if timer:
        chosen = [*timers.get(timer, ()), *timers.get("", ())]
    else:
        chosen = list(timers[max(timers, key=lambda each: _newest(timers[each][0]))])
    if not chosen:
        return None
    chosen.sort(key=_newest, reverse=True)
    return ControlFloor(tuple(chosen[: max(window, 1)]))


def _newest(record: Any) -> tuple[str, str]:
    """How records are ordered in time: by ``created_at`` (none: the oldest), then id."""
    return (time_key(getattr(record, "created_at", None) or ""), record.id)


def judged_by_control(
    record: Any,
    value: Derived,
    controls: dict[str, dict[str, Any]],
    settings: Settings = DEFAULT_SETTINGS,
    reasons: dict[str, str] | None = None,
) -> Derived:
    """``value`` (what is derived of ``record``), ``marginal`` with the reason
    (``drift``) when the newest controls of its env (:func:`control_for` among
    ``controls``) find its change within the drift between runs
    (:func:`kexp.core.outcome.within_drift`); a step judged over its parent's cumulative
    score is left as it is. ``reasons``: each floor's reason, said once."""
    if not may_meet_control(value) or judged_over_parent(record):
        return value
    floor = control_for(record, controls, settings.control_drift_window)
    if floor is None or not within_drift(
        value.outcome, record.score, record.score_ci, floor_reach(floor, settings)
    ):
        return value
    reasons = {} if reasons is None else reasons
    key = " ".join(floor.ids)
    reason = reasons.get(key)
    if reason is None:
        reason = reasons[key] = drift_reason(floor, settings)
    return value._replace(outcome="marginal", drift=reason)


def may_meet_control(value: Derived) -> bool:
    """Whether what is derived of a record without the store's controls (``value``)
    may change once its env's control is known: a change, not a control."""
    return not value.control and value.outcome in _CHANGES


def depends_on(record: Any) -> list[str]:
    """The ids whose values what is derived of ``record`` needs: its parent's, when its
    score builds on its parent's code (or it is a control with a parent) or its outcome
    is judged over its parent (:func:`judged_over_parent`), and those it combines.
    :func:`derive` over ``record`` and these, each with what its code value depends on
    in turn (:func:`code_depends_on`), gives what it gives over the whole store for
    ``record``."""
    needed = [record.pid] if needs_parent(record) or judged_over_parent(record) else []
    needed += [c for c in getattr(record, "combines", None) or () if c]
    return needed


def code_depends_on(record: Any) -> list[str]:
    """The ids whose values the code value of ``record`` needs (what an experiment that
    depends on it reads of it): its parent's, whatever it was measured against (a step
    retired below breaks it: :func:`leave_with_retired`), and those it combines."""
    needed = [record.pid] if record.pid else []
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
    controls = env_controls(records)
    window = settings.control_drift_window
    for record in wanted:
        waiting += [record.id, *depends_on(record)]
        if controls and (floor := control_for(record, controls, window)) is not None:
            waiting += floor.ids
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
