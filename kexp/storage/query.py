"""Filtering and ranking experiments: the keyword filters every query accepts."""

from __future__ import annotations

import dataclasses
import datetime as dt
import heapq
import itertools
import math
import operator
import os
import warnings
from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import TYPE_CHECKING, Any, Protocol, TypeVar

from kexp.core.collector import collector_paused
from kexp.core.errors import KexpError, NoMatchWarning
from kexp.core.fields import BODY_FIELDS, SEARCHED_FIELDS
from kexp.core.inputs import first_non_text
from kexp.core.model import OUTCOMES, STATUSES, KernelExperiment, outcome_of
from kexp.core.outcome import CONTROL_TAG, PENDING_STATUSES, failed_run, time_key
from kexp.core.settings import DEFAULT_SETTINGS, Settings
from kexp.format.suspect import suspect_reasons
from kexp.storage.operators import folded, part_of, read_alone

if TYPE_CHECKING:
    from kexp.core.campaign import Derivation
    from kexp.core.cumulative import Derived


class Ranked(Protocol):
    """What ranking needs: a KernelExperiment, or a front-matter row of the cache."""

    @property
    def id(self) -> str: ...
    @property
    def score(self) -> float: ...
    @property
    def created_at(self) -> str: ...


_E = TypeVar("_E", bound=Ranked)


class Judged(Ranked, Protocol):
    """What ranking and judging a measurement need (:mod:`kexp.format.suspect`)."""

    @property
    def results(self) -> Any: ...
    @property
    def is_buggy(self) -> Any: ...


_J = TypeVar("_J", bound=Judged)
_T = TypeVar("_T")


_SEARCHED_FIELDS = (*SEARCHED_FIELDS, *BODY_FIELDS, "preamble")
_BOOLEAN_WORDS = {"true": True, "yes": True, "1": True, "false": False, "no": False, "0": False}


@dataclasses.dataclass(frozen=True)
class Filters:
    """Combinable filters; every one left as None does not filter.

    Text filters (``operator``, ``dtype``, ``env``, ``text``) match a case-insensitive
    substring (``operator``, ``dtype``, ``env``: also in kexp's spelling of both,
    :func:`kexp.storage.operators.part_of`; :func:`select` reads a value an
    ``operator``, ``dtype`` or ``env`` names exactly alone, as ``kexp context`` does);
    ``base_commit`` and ``pid`` match a prefix; ``status``, ``outcome`` and ``tags``
    take one value or a list (``tags``: all must be present); ``since`` and
    ``until`` bound ``created_at`` (inclusive; a date or an ISO 8601 time). ``pid=""``
    selects the experiments without a parent.
    """

    operator: str | None = None
    dtype: str | None = None
    env: str | None = None
    base_commit: str | None = None
    status: tuple[str, ...] | None = None
    outcome: tuple[str, ...] | None = None
    is_buggy: bool | None = None
    min_score: float | None = None
    max_score: float | None = None
    pid: str | None = None
    tags: tuple[str, ...] | None = None
    since: dt.datetime | None = None
    until: dt.datetime | None = None
    text: str | None = None


FILTER_NAMES = tuple(f.name for f in dataclasses.fields(Filters))
_NO_FILTERS = Filters()


def _as_tuple(name: str, value: Any, allowed: Sequence[str] | None = None) -> tuple[str, ...]:
    values = (value,) if isinstance(value, str) else tuple(value)
    if allowed is not None:
        for item in values:
            if item not in allowed:
                raise KexpError(f"{name}={item!r} is not one of: {', '.join(allowed)}")
    return values


def _as_bool(name: str, value: Any) -> bool:
    if isinstance(value, bool):
        return value
    word = str(value).strip().lower()
    if word not in _BOOLEAN_WORDS:
        raise KexpError(f"{name}={value!r} is not true or false")
    return _BOOLEAN_WORDS[word]


def parse_time(value: Any, *, end_of_day: bool = False) -> dt.datetime:
    """Parse a date or ISO 8601 time (``Z`` allowed) into an aware UTC datetime."""
    if isinstance(value, dt.datetime):
        moment = value
    elif isinstance(value, dt.date):
        moment = dt.datetime.combine(value, dt.time.max if end_of_day else dt.time.min)
    else:
        text = str(value).strip()
        try:
            moment = dt.datetime.fromisoformat(text.replace("Z", "+00:00"))
        except ValueError:
            raise KexpError(
                f"{value!r} is not a date or time: use e.g. 2026-11-29 or 2026-11-29T15:52:36Z"
            ) from None
        if len(text) == 10 and end_of_day:
            moment = dt.datetime.combine(moment.date(), dt.time.max)
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=dt.timezone.utc)
    return moment.astimezone(dt.timezone.utc)


def _check_text(name: str, value: str) -> None:
    """Refuse a filter value that is not text: it holds lone surrogates, as a command
    line argument of bytes that are not UTF-8 does (decoded with surrogateescape)."""
    if first_non_text(value) is not None:
        shown = value.encode("utf-8", "surrogateescape" if _escaped(value) else "backslashreplace")
        raise KexpError(
            f"the {name} filter {shown!r} is not valid UTF-8 text: give it in UTF-8 "
            "(check the terminal's or the script's encoding)"
        )


def _escaped(value: str) -> bool:
    """Whether every lone surrogate of ``value`` stands for a byte (surrogateescape)."""
    return all("\udc80" <= ch <= "\udcff" for ch in value if "\ud800" <= ch <= "\udfff")


def build_filters(**kwargs: Any) -> Filters:
    """Check and normalise filter keyword arguments; unknown names are an error."""
    unknown = sorted(set(kwargs) - set(FILTER_NAMES))
    if unknown:
        raise KexpError(
            f"unknown filter {', '.join(unknown)}; filters are: {', '.join(FILTER_NAMES)}"
        )
    values: dict[str, Any] = {k: v for k, v in kwargs.items() if v is not None}
    for name, value in values.items():
        items = value if isinstance(value, (list, tuple)) else [value]
        for item in items:
            if isinstance(item, str):
                _check_text(name, item)
    for name in ("dtype", "env", "text"):  # an operator's case tells two kernels apart
        if name in values:
            values[name] = str(values[name]).lower()
    if "operator" in values:
        values["operator"] = str(values["operator"])
    if "base_commit" in values:
        values["base_commit"] = str(values["base_commit"]).lower()
    if "status" in values:
        values["status"] = _as_tuple("status", values["status"], STATUSES)
    if "outcome" in values:
        values["outcome"] = _as_tuple("outcome", values["outcome"], OUTCOMES)
    if "tags" in values:
        values["tags"] = _as_tuple("tags", values["tags"])
    if "is_buggy" in values:
        values["is_buggy"] = _as_bool("is_buggy", values["is_buggy"])
    for name in ("min_score", "max_score"):
        if name in values:
            try:
                values[name] = float(values[name])
            except (TypeError, ValueError):
                raise KexpError(f"{name}={values[name]!r} is not a number") from None
            if not math.isfinite(values[name]):
                raise KexpError(
                    f"{name}={values[name]!r} is no score bound: give a finite number "
                    "(1.05), or leave it out"
                )
    if "since" in values:
        values["since"] = parse_time(values["since"])
    if "until" in values:
        values["until"] = parse_time(values["until"], end_of_day=True)
    return Filters(**values)


def matches(
    exp: Any, filters: Filters, settings: Settings = DEFAULT_SETTINGS, *, outcome: str | None = None
) -> bool:
    """Whether ``exp`` passes every filter that is set (``outcome``: its outcome as
    derived from the whole store, :func:`kexp.core.campaign.derive`; else judged from its
    own attributes)."""
    f = filters
    if f.operator is not None and not part_of("operator_sig", f.operator, exp.operator_sig):
        return False
    if f.dtype is not None and not part_of("dtype_sig", f.dtype, exp.dtype_sig):
        return False
    if f.env is not None and not part_of("env", f.env, exp.env):
        return False
    if f.base_commit is not None and not exp.base_commit.lower().startswith(f.base_commit):
        return False
    if f.status is not None and exp.status not in f.status:
        return False
    if f.outcome is not None and (outcome or outcome_of(exp, settings)) not in f.outcome:
        return False
    if f.is_buggy is not None and exp.is_buggy != f.is_buggy:
        return False
    if f.min_score is not None and not exp.score >= f.min_score:
        return False
    if f.max_score is not None and not exp.score <= f.max_score:
        return False
    if f.pid is not None and not (exp.pid.startswith(f.pid) if f.pid else not exp.pid):
        return False
    if f.tags is not None and not set(f.tags) <= set(exp.tags):
        return False
    if f.since is not None or f.until is not None:
        try:
            created = parse_time(exp.created_at)
        except KexpError:
            return False
        if f.since is not None and created < f.since:
            return False
        if f.until is not None and created > f.until:
            return False
    return f.text is None or any(f.text in text.lower() for text in _texts(exp))


def _texts(exp: KernelExperiment) -> Iterator[str]:
    """Every text a reader sees in an experiment's file, for the ``text`` filter."""
    for name in _SEARCHED_FIELDS:
        yield str(getattr(exp, name))
    yield from exp.tags
    yield from exp.combines
    for heading, text in exp.extra_sections:
        yield heading
        yield text
    for key, value in exp.extra_fields.items():
        yield f"{key}: {value}"
    for result in exp.results:
        yield str(result)


def ranking_leaves_out(
    filters: dict[str, Any], *, include_buggy: bool, include_pending: bool
) -> tuple[bool, bool]:
    """(leave out buggy, leave out pending) for a ranking such as ``top``: both are left
    out unless asked for, or unless ``filters`` name an outcome, ``is_buggy`` or
    ``status`` (then the filter decides)."""
    asked_outcome = filters.get("outcome") is not None
    skip_buggy = not (include_buggy or asked_outcome or filters.get("is_buggy") is not None)
    skip_pending = not (include_pending or asked_outcome or filters.get("status") is not None)
    return skip_buggy, skip_pending


#: What a ranking (``top``) can rank by: the cumulative score (the speedup over the
#: operator's reference: the default), the score itself (one step), or the low end of
#: the cumulative score's interval.
RANKINGS = ("cumulative", "score", "low")


def rank(
    experiments: Iterable[_E],
    *,
    by: str = "cumulative",
    derivation: Derivation | None = None,
    limit: int | None = None,
) -> list[_E]:
    """The one ranking of experiments (or rows), best first: by the rank key (``by``,
    one of :data:`RANKINGS`), descending; then by score, newest first, id, path
    (deterministic). With ``limit``, the first ``limit`` of that order (only the
    candidates that can be among them are sorted).

    ``cumulative`` ranks by the cumulative score and ``low`` by the low end of its
    interval (the cumulative score without one): what is derived of each comes from
    ``derivation`` (:func:`kexp.core.campaign.derive` over the whole store; without one, an
    experiment's own :attr:`~kexp.core.model.KernelExperiment.derived`). The steps that
    improved come first, then the others with a cumulative score (within noise, a
    regression, an interference: each leaves its parent's code, or worse, however high
    the product), then those without one (see ``cumulative_reason``), by score. So the
    first is the best tip (:func:`best_tip`) when there is one. ``score`` ranks by the
    score alone (nothing derived is read).
    """
    if by not in RANKINGS:
        raise KexpError(f"cannot rank by {by!r}; use one of {', '.join(RANKINGS)}")
    items = list(experiments)
    if limit is not None and limit <= 0:
        return []
    if by == "score":
        if limit is not None and len(items) > limit:
            # Every item scoring at least the limit-th best (ties kept).
            threshold = heapq.nlargest(limit, items, key=_SCORE)[-1].score
            items = [item for item in items if item.score >= threshold]
        _tie_order(items)
        items.sort(key=_score, reverse=True)
        return items if limit is None else items[:limit]
    found = derivation.each(items) if derivation is not None else _own_derived(items)
    low = by == "low"
    keys: list[tuple[int, float]] = [
        (0, float(item.score))
        if (value := derived.cumulative_score) is None
        else (
            2 if derived.outcome == "improvement" else 1,
            derived.cumulative_ci[0] if low and derived.cumulative_ci else value,
        )
        for item, derived in zip(items, found, strict=True)
    ]
    if limit is not None and len(items) > limit:
        least = heapq.nlargest(limit, keys)[-1]
        keyed = [pair for pair in zip(keys, items, strict=True) if pair[0] >= least]
    else:
        keyed = list(zip(keys, items, strict=True))
    keyed.sort(key=lambda pair: (pair[1].id, _path_key(pair[1])))
    keyed.sort(key=lambda pair: time_key(pair[1].created_at), reverse=True)
    keyed.sort(key=lambda pair: float(pair[1].score), reverse=True)
    keyed.sort(key=_FIRST, reverse=True)
    chosen = [item for _, item in keyed]
    return chosen if limit is None else chosen[:limit]


def best_tip(experiments: Iterable[_E], *, derivation: Derivation | None = None) -> _E | None:
    """The best tip of ``experiments``: the step that improved with the best cumulative
    score, as :func:`rank` orders them (see
    :attr:`~kexp.core.cumulative.Derived.can_be_best`); None when no step improved."""
    found = rank(experiments, derivation=derivation, limit=1)
    if not found:
        return None
    (derived,) = derivation.each(found) if derivation is not None else _own_derived(found)
    return found[0] if derived.can_be_best else None


def believable_best(
    tips: Iterable[_T], reasons: Callable[[_T], Sequence[str]]
) -> tuple[_T | None, list[tuple[_T, list[str]]]]:
    """The current best of ``tips`` (the steps that can be best, best first): the first
    whose measurement is believable (``reasons``: why one is suspect,
    :func:`kexp.format.suspect.suspect_reasons`; None when none is), and the suspect
    ones ranked above it, each with its reasons. A suspect measurement is no best until
    checked: the one rule of ``kexp review`` (its new best) and ``kexp context`` (its
    current best); ``kexp top`` ranks it all the same, marked."""
    above: list[tuple[_T, list[str]]] = []
    for tip in tips:
        why = list(reasons(tip))
        if not why:
            return tip, above
        above.append((tip, why))
    return None, above


def believed_best(
    experiments: Iterable[_J],
    *,
    derivation: Derivation | None = None,
    settings: Settings = DEFAULT_SETTINGS,
) -> tuple[_J | None, list[tuple[_J, list[str]]]]:
    """:func:`believable_best` of ``experiments`` (or rows) ranked as :func:`best_tip`
    ranks them: the best tip whose measurement is believable, and the suspect tips above it."""
    ranked = rank(experiments, derivation=derivation)
    found = derivation.each(ranked) if derivation is not None else _own_derived(ranked)
    # The steps that can be best come first (rank's order): the tips, best first.
    tips = (
        item
        for item, _ in itertools.takewhile(
            lambda p: p[1].can_be_best, zip(ranked, found, strict=True)
        )
    )
    of = derivation.of if derivation is not None else None
    return believable_best(
        tips, lambda item: suspect_reasons(item, settings, None if of is None else of(item))
    )


def _tie_order(items: list[Any]) -> None:
    """Sort ``items`` newest first, then by id, then by path: the ranking's tie-break.
    Stable sorts, the least significant key first (cheaper than one sort on a
    composite key that has to invert a string)."""
    items.sort(key=lambda e: (e.id, _path_key(e)))
    items.sort(key=lambda e: time_key(e.created_at), reverse=True)


def _own_derived(experiments: list[Any]) -> list[Derived]:
    """What is derived of each experiment, as it carries it (its store's derivation)."""
    return [exp.derived for exp in experiments]


def _score(item: Any) -> float:
    return float(item.score)


_SCORE = operator.attrgetter("score")
_FIRST = operator.itemgetter(0)


def select(
    rows: Iterable[_E],
    wanted: Filters,
    settings: Settings = DEFAULT_SETTINGS,
    *,
    derivation: Derivation | None = None,
    skip_buggy: bool = False,
    skip_pending: bool = False,
    skip_controls: bool = False,
) -> list[_E]:
    """The rows passing ``wanted`` (and, with ``skip_buggy``/``skip_pending``/
    ``skip_controls``, neither buggy (nor a run that failed or timed out having measured
    nothing: no score to rank) nor pending nor a control). An ``outcome`` filter
    reads each row's outcome from ``derivation`` (what is derived from the whole store:
    interference depends on other experiments); without one, from the row itself."""
    every: list[_E] = rows if isinstance(rows, list) else list(rows)
    if skip_buggy or skip_pending or skip_controls:
        chosen = [
            row
            for row in every
            if not (skip_buggy and (row.is_buggy or _failed(row, settings, derivation)))  # type: ignore[attr-defined]
            and not (skip_pending and row.status in PENDING_STATUSES)  # type: ignore[attr-defined]
            and not (skip_controls and CONTROL_TAG in (row.tags or ()))  # type: ignore[attr-defined]
        ]
    else:
        chosen = list(every)
    if wanted == _NO_FILTERS:
        return chosen
    chosen = _read_as_consult(every, chosen, wanted)
    if wanted.outcome is None or derivation is None:
        return [row for row in chosen if matches(row, wanted, settings)]
    of = derivation.of
    return [row for row in chosen if matches(row, wanted, settings, outcome=of(row).outcome)]


def _read_as_consult(every: list[Any], chosen: list[_E], wanted: Filters) -> list[_E]:
    """``chosen`` less the rows an ``operator``, ``dtype`` or ``env`` filter is a part
    of but does not read, as ``kexp context`` reads it (:func:`read_alone`: a value
    recorded exactly, alone), each such filter noted (:class:`NoMatchWarning`)."""
    asked = [
        (column, value)
        for column, value in (
            ("operator_sig", wanted.operator),
            ("dtype_sig", wanted.dtype),
            ("env", wanted.env),
        )
        if value
    ]
    if not asked:
        return chosen
    pool = every
    for column, value in asked:
        pool = [row for row in pool if part_of(column, value, getattr(row, column))]
        keys, note = read_alone(pool, column, value)
        if note is None:
            continue
        warnings.warn(note, NoMatchWarning, stacklevel=4)
        pool = [row for row in pool if folded(column, getattr(row, column)) in keys]
        chosen = [row for row in chosen if folded(column, getattr(row, column)) in keys]
    return chosen


@collector_paused()  # a sort key an experiment, none in a cycle
def chronological(experiments: Iterable[_E]) -> list[_E]:
    """Oldest first (by ``created_at``, then id, then path: two files of one id, after a
    merge, come in path order)."""
    return sorted(experiments, key=lambda e: (time_key(e.created_at), e.id, _path_key(e)))


def _path_key(exp: Any) -> str:
    """An experiment's (or cache row's) path, as a key that sorts as paths do."""
    return str(getattr(exp, "path", None) or "").replace(os.sep, "\0")


def _failed(row: Any, settings: Settings, derivation: Derivation | None = None) -> bool:
    """Whether ``row`` is a failed run or a retired step (:func:`failed_run`), or built
    on a retired step (:meth:`Derivation.built_on_retired`: it leaves with it)."""
    if failed_run(row.status, row.score, row.score_ci, settings):
        return True
    return derivation is not None and bool(derivation.built_on_retired(row))
