"""A root whose baseline is an earlier experiment's candidate: the step it was made on,
found by its timings (the warning of a record that left its ``pid`` out).

An agent that times each iteration against the previous one and records it without its
``pid`` gets a new root "over the reference" every time: each step ranks as if it were
the whole campaign, and the campaign's best stays at its first step. The timings tell:
the new record's baseline, configuration by configuration, is what an earlier record of
the same kernel, dtype and env measured as its candidate (the same medians, sample
counts and spreads: the same samples; or, of a record whose step improved by its own
timings, medians within both spreads of each other, while they are not within noise of
that record's own baseline: the same code timed again. A step that did not improve is
not matched within noise: a change within the drift between runs, or a regression, is
no code told apart from its baseline's, nor one to build on). :func:`warn_if_chained`
says so in one line, naming that experiment and the correction that makes the record a
step on it.

It warns and does not set the ``pid`` itself: a record stores what its caller gave, a
lineage is the caller's to state (the code the baseline ran may be another copy of that
step's), and a ``pid`` set behind the caller's back would change the cumulative score of
every step built on it unseen; the correction is one call, given as written.
"""

from __future__ import annotations

import warnings
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from kexp.core.advice import SET_PARENT
from kexp.core.errors import RootWarning
from kexp.core.model import KernelExperiment
from kexp.core.outcome import PENDING_STATUSES, is_control, judge
from kexp.core.settings import Settings
from kexp.core.spelling import campaign_key
from kexp.core.suspicion import UNIT_TO_US
from kexp.storage.store import Store

#: A configuration's timing: (median in microseconds, samples, interquartile range in
#: microseconds; None when not recorded).
_Timing = tuple[float, Any, float | None]


def warn_if_chained(store: Store, exp: KernelExperiment, rows: Sequence[Any] | None = None) -> None:
    """Warn (:class:`~kexp.core.errors.RootWarning`) when ``exp``, just recorded as a root
    with timings, was timed against the code of an earlier experiment of its kernel,
    dtype and env (:func:`chained_to`): its score is a step over that code, not over the
    reference. ``rows``: the store's as read before the write, when it was read."""
    if exp.pid or not exp.results or is_control(exp) or exp.is_buggy:
        return
    if exp.status in PENDING_STATUSES:
        return
    found = chained_root(store, exp, rows)
    if found is None:
        return
    row, exact = found
    how = "are" if exact else "match, within noise,"
    warnings.warn(
        f"experiment {exp.id} is a root (no pid), yet its baseline timings {how} the "
        f"candidate timings of {row.id} ({row.change_summary!r}): its score is a step over "
        f"that code, not over the reference; give it its parent: "
        f"{SET_PARENT.say(id=exp.id, pid=row.id[:10])} (and record each next step with "
        "its pid)",
        RootWarning,
        stacklevel=3,
    )


def chained_root(
    store: Store, exp: KernelExperiment, rows: Sequence[Any] | None = None
) -> tuple[Any, bool] | None:
    """:func:`chained_to` of ``exp``'s timings among the other experiments of its
    kernel, dtype and env in ``store`` (of ``rows``, when the caller read them): the one
    whose candidate its baseline timed."""
    key = campaign_key(exp)  # in any spelling: torch.bfloat16 is bf16
    same = [
        row
        for row in (store.found().rows if rows is None else rows)
        if campaign_key(row) == key and row.id != exp.id
    ]
    return chained_to(exp.results, same, store.settings)


def chained_to(
    results: Sequence[Mapping[str, Any]], rows: Iterable[Any], settings: Settings
) -> tuple[Any, bool] | None:
    """The record among ``rows`` (not controls, not buggy) whose candidate timings the
    baseline timings of ``results`` repeat, for every configuration both measured, the
    same set: (it, True) when they are the same (medians, counts and spreads), (it,
    False) when its own score is an improvement and each median is within the larger of
    the two spreads of the other and not within noise of that record's own baseline.
    The same first, then the closest, then the newest; None when none is."""
    mine = _timings(results, "baseline")
    if not mine:
        return None
    chosen: tuple[tuple[int, float, str], Any, bool] | None = None
    for row in rows:
        if is_control(row) or row.is_buggy or not row.results:
            continue
        theirs = _timings(row.results, "candidate")
        if theirs.keys() != mine.keys():
            continue
        exact = all(_same(mine[c], theirs[c]) for c in mine)
        if not exact:
            improved = judge("done", False, False, row.score, row.score_ci, settings)
            if improved != "improvement" or not all(_within(mine[c], theirs[c]) for c in mine):
                continue
            own = _timings(row.results, "baseline")
            if own.keys() == mine.keys() and all(_within(mine[c], own[c]) for c in mine):
                continue  # its candidate times like its baseline: no code told apart
        distance = max(abs(mine[c][0] - theirs[c][0]) / theirs[c][0] for c in mine)
        rank = (0 if exact else 1, distance, _newest_first(row.created_at))
        if chosen is None or rank < chosen[0]:
            chosen = (rank, row, exact)
    return None if chosen is None else (chosen[1], chosen[2])


def _timings(results: Sequence[Mapping[str, Any]], side: str) -> dict[str, _Timing]:
    """Each configuration's ``side`` (baseline or candidate) timing in ``results``, in
    microseconds; none when a configuration is listed twice or has no such timing."""
    found: dict[str, _Timing] = {}
    for result in results:
        config = result.get("config")
        value = result.get(side)
        scale = UNIT_TO_US.get(str(result.get("unit") or "us"))
        if not isinstance(config, str) or config in found or scale is None:
            return {}
        if not isinstance(value, (int, float)) or isinstance(value, bool) or value <= 0:
            return {}
        spread = result.get(f"{side}_iqr")
        iqr = float(spread) * scale if isinstance(spread, (int, float)) else None
        found[config] = (float(value) * scale, result.get(f"{side}_n"), iqr)
    return found


def _same(one: _Timing, other: _Timing) -> bool:
    """The same samples, as far as ``results`` tell: median, count and spread."""
    return one == other


def _within(one: _Timing, other: _Timing) -> bool:
    """Medians within the larger of the two spreads of each other (never without one)."""
    spreads = [s for s in (one[2], other[2]) if s is not None]
    return bool(spreads) and abs(one[0] - other[0]) <= max(spreads)


def _newest_first(created_at: Any) -> str:
    """A sort key that puts the later ``created_at`` first."""
    return "".join(chr(0x10FFFF - ord(ch)) for ch in str(created_at or ""))
