"""Filtering and ranking experiments: the keyword filters every query accepts."""

from __future__ import annotations

import dataclasses
import datetime as dt
from collections.abc import Iterable, Sequence
from typing import Any

from kexp.errors import KexpError
from kexp.model import BODY_FIELDS, OUTCOMES, STATUSES, KernelExperiment, outcome_of
from kexp.settings import DEFAULT_SETTINGS, Settings

_SEARCHED_FIELDS = (
    "id",
    "pid",
    "change_summary",
    "operator_sig",
    "dtype_sig",
    "env",
    "base_commit",
    "author",
    *BODY_FIELDS,
)


@dataclasses.dataclass(frozen=True)
class Filters:
    """Combinable filters; every one left as None does not filter.

    Text filters (``operator``, ``dtype``, ``env``, ``text``) match a case-insensitive
    substring; ``base_commit`` and ``pid`` match a prefix; ``status``, ``outcome`` and
    ``tags`` take one value or a list (``tags``: all must be present); ``since`` and
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


def _as_tuple(name: str, value: Any, allowed: Sequence[str] | None = None) -> tuple[str, ...]:
    values = (value,) if isinstance(value, str) else tuple(value)
    if allowed is not None:
        for item in values:
            if item not in allowed:
                raise KexpError(f"{name}={item!r} is not one of: {', '.join(allowed)}")
    return values


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


def build_filters(**kwargs: Any) -> Filters:
    """Check and normalise filter keyword arguments; unknown names are an error."""
    unknown = sorted(set(kwargs) - set(FILTER_NAMES))
    if unknown:
        raise KexpError(
            f"unknown filter {', '.join(unknown)}; filters are: {', '.join(FILTER_NAMES)}"
        )
    values: dict[str, Any] = {k: v for k, v in kwargs.items() if v is not None}
    for name in ("operator", "dtype", "env", "text"):
        if name in values:
            values[name] = str(values[name]).lower()
    if "base_commit" in values:
        values["base_commit"] = str(values["base_commit"]).lower()
    if "status" in values:
        values["status"] = _as_tuple("status", values["status"], STATUSES)
    if "outcome" in values:
        values["outcome"] = _as_tuple("outcome", values["outcome"], OUTCOMES)
    if "tags" in values:
        values["tags"] = _as_tuple("tags", values["tags"])
    for name in ("min_score", "max_score"):
        if name in values:
            try:
                values[name] = float(values[name])
            except (TypeError, ValueError):
                raise KexpError(f"{name}={values[name]!r} is not a number") from None
    if "since" in values:
        values["since"] = parse_time(values["since"])
    if "until" in values:
        values["until"] = parse_time(values["until"], end_of_day=True)
    return Filters(**values)


def matches(exp: KernelExperiment, filters: Filters, settings: Settings = DEFAULT_SETTINGS) -> bool:
    """Whether ``exp`` passes every filter that is set."""
    f = filters
    if f.operator is not None and f.operator not in exp.operator_sig.lower():
        return False
    if f.dtype is not None and f.dtype not in exp.dtype_sig.lower():
        return False
    if f.env is not None and f.env not in exp.env.lower():
        return False
    if f.base_commit is not None and not exp.base_commit.lower().startswith(f.base_commit):
        return False
    if f.status is not None and exp.status not in f.status:
        return False
    if f.outcome is not None and outcome_of(exp, settings) not in f.outcome:
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
    if f.text is not None:
        needle = f.text
        if not any(needle in str(getattr(exp, name)).lower() for name in _SEARCHED_FIELDS) and (
            not any(needle in tag.lower() for tag in exp.tags)
        ):
            return False
    return True


def rank(experiments: Iterable[KernelExperiment]) -> list[KernelExperiment]:
    """Best first: score descending, then newest first, then id (deterministic)."""
    return sorted(
        experiments,
        key=lambda e: (-float(e.score), _negated(e.created_at), e.id),
    )


def _negated(text: str) -> tuple[int, ...]:
    return tuple(-ord(ch) for ch in text)


def chronological(experiments: Iterable[KernelExperiment]) -> list[KernelExperiment]:
    """Oldest first (by ``created_at``, then id)."""
    return sorted(experiments, key=lambda e: (e.created_at, e.id))
