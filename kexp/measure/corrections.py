"""Corrections: ``FIELD=VALUE`` assignments and the dated correction note.

The Python twin of ``kexp update ID --set FIELD=VALUE ... --reason TEXT`` is
:func:`apply_correction` (:func:`correct`, and which fields changed): it changes the
fields and, given a reason, appends a note to ``detailed_description`` saying what
changed (old → new) and why, so a reader of the experiment sees that its numbers were
corrected.
"""

from __future__ import annotations

import datetime as dt
import json
import re
import warnings
from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, Any

from kexp.core.advice import MEASURED_AGAINST, REMEASURE, SET_RAW_RESULT
from kexp.core.campaign import measured_nothing
from kexp.core.errors import KexpError, MeasuredAgainstWarning, StaleMeasurementWarning
from kexp.core.fields import (
    ALL_FIELDS,
    BODY_FIELDS,
    JSON_FIELDS,
    MAPPING_FIELDS,
    TEXT_LIST_FIELDS,
)
from kexp.core.model import KernelExperiment
from kexp.format.legacykeys import LEGACY_PREFIX, is_legacy_key
from kexp.format.rules import missing_measured_against

if TYPE_CHECKING:
    from kexp.storage.store import Store

_TRUE = frozenset({"true", "yes", "1", "on"})
_FALSE = frozenset({"false", "no", "0", "off"})
#: Fields a correction note names instead of quoting (long texts, per-config lists).
_NAMED_FIELDS = frozenset({*BODY_FIELDS, "results"})


def parse_value(field: str, raw: str) -> Any:
    """The value of ``FIELD=raw`` typed for ``field``.

    ``score`` is a number, ``is_buggy`` a boolean (true/false, yes/no, 1/0), ``tags``
    and ``combines`` a comma-separated list (or a JSON list), ``results``,
    ``score_ci`` and ``protocol`` JSON; every other field is the text as given.
    """
    if field not in ALL_FIELDS:
        raise unknown_field(field)
    if field == "score":
        try:
            return float(raw)
        except ValueError:
            raise KexpError(f"score={raw!r} is not a number (e.g. score=1.18)") from None
    if field == "is_buggy":
        lowered = raw.strip().lower()
        if lowered in _TRUE:
            return True
        if lowered in _FALSE:
            return False
        raise KexpError(f"is_buggy={raw!r} is not true or false")
    if field in TEXT_LIST_FIELDS:
        if raw.strip().startswith("["):
            value = _json(field, raw)
            if not isinstance(value, list):
                raise KexpError(f"{field} must be a list")
            return value
        return [item.strip() for item in raw.split(",") if item.strip()]
    if field in JSON_FIELDS:
        if not raw.strip():  # FIELD= empties it (an optional field is then left out)
            return {} if field in MAPPING_FIELDS else []
        return _json(field, raw)
    return raw


def unknown_field(field: str) -> KexpError:
    """The error for a ``FIELD=VALUE`` naming no field; for a ``legacy_<field>`` key an
    import wrote, what to set instead."""
    real = field[len(LEGACY_PREFIX) :]
    if is_legacy_key(field) and real in ALL_FIELDS:
        return KexpError(
            f"{field} is not a field but the predecessor's value the import kept aside: set "
            f"{real} itself ({real}=VALUE), which drops {field}"
        )
    return KexpError(f"unknown field {field!r}; fields are: {', '.join(ALL_FIELDS)}")


def _json(field: str, raw: str) -> Any:
    try:
        return json.loads(raw)
    except json.JSONDecodeError as exc:
        raise KexpError(f"{field}: not valid JSON ({exc.msg})") from None


def parse_assignment(text: str) -> tuple[str, Any]:
    """Split ``FIELD=VALUE`` and type the value (see :func:`parse_value`)."""
    field, sep, raw = text.partition("=")
    field = field.strip()
    if not sep or not field:
        raise KexpError(f"{text!r} is not FIELD=VALUE (e.g. score=1.021)")
    return field, parse_value(field, raw)


def parse_assignments(items: Iterable[str]) -> dict[str, Any]:
    """Several ``FIELD=VALUE`` assignments; a field given twice is an error."""
    changes: dict[str, Any] = {}
    for item in items:
        field, value = parse_assignment(item)
        if field in changes:
            raise KexpError(f"{field} is set twice")
        changes[field] = value
    return changes


def _show(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str):
        return value if value else "''"
    return json.dumps(value, ensure_ascii=False)


def correction_note(
    old: KernelExperiment, changes: Mapping[str, Any], reason: str, today: dt.date | None = None
) -> str:
    """The note appended to ``detailed_description`` for a correction, e.g.
    ``**Correction (2026-11-30)**: score 1.019 → 1.021. Reason: re-measured.``

    Long text fields and ``results`` are named, not quoted.
    """
    day = (today or dt.datetime.now(dt.timezone.utc).date()).isoformat()
    parts = []
    for field, value in changes.items():
        before = getattr(old, field)
        if before == value:
            continue
        if field in _NAMED_FIELDS:
            parts.append(f"{field} rewritten")
        else:
            parts.append(f"{field} {_show(before)} → {_show(value)}")
    what = "; ".join(parts) if parts else "no field changed"
    reason = " ".join(reason.split())
    return f"**Correction ({day})**: {what}. Reason: {reason}"


def effective_changes(store: Store, exp_id: str, changes: Mapping[str, Any]) -> dict[str, Any]:
    """The ``changes`` that would change the experiment (ids resolved): those whose value
    differs from the one it has."""
    store.path_of(exp_id, writing=True)  # in the working tree, else said where it is
    updates = store.resolve_references(dict(changes))
    old = store.get_experiment(exp_id)
    return {
        field: value for field, value in updates.items() if getattr(old, field, _ABSENT) != value
    }


_ABSENT = object()


def correct(
    store: Store, exp_id: str, changes: Mapping[str, Any], reason: str | None = None
) -> KernelExperiment:
    """Update an experiment's fields; with ``reason``, append a dated correction note to
    its ``detailed_description`` (old → new values and the reason).

    The update is validated and atomic (see :meth:`kexp.Store.update_experiment`). When
    no value differs from the one the experiment has, nothing is written and no note is
    appended: the experiment is returned as it is. A new ``score`` that leaves the
    experiment's ``results`` or ``raw_result`` as they were warns
    (:class:`StaleMeasurementWarning`): they measured the old score. A ``pid`` given
    to an experiment that does not say what its score is measured against warns
    (:class:`MeasuredAgainstWarning`): its score now counts as a step over the parent.
    """
    updates = store.resolve_references(dict(changes))
    if not updates:
        raise KexpError("nothing to change: give at least one FIELD=VALUE")
    if reason is not None and not reason.strip():
        raise KexpError("the reason of a correction must not be empty")
    if not effective_changes(store, exp_id, updates):
        return store.get_experiment(exp_id)
    if reason:
        old = store.get_experiment(exp_id)
        note = correction_note(old, updates, reason)
        description = updates.get("detailed_description", old.detailed_description)
        description = description.rstrip("\n")
        updates["detailed_description"] = f"{description}\n\n{note}" if description else note
    had_parent = bool(store.get_experiment(exp_id).pid) if "pid" in updates else True
    updated = store.update_experiment(exp_id, **updates)
    _warn_stale_measurement(updated, updates)
    if "pid" in updates:
        _warn_measured_against_missing(updated, had_parent)
    return updated


def apply_correction(
    store: Store, exp_id: str, changes: Mapping[str, Any], reason: str | None = None
) -> tuple[KernelExperiment, list[str]]:
    """:func:`correct`, and the fields it changed (none: nothing was written, the
    experiment already holds these values)."""
    changed = list(effective_changes(store, exp_id, changes))
    if not changed:
        return store.get_experiment(exp_id), []
    return correct(store, exp_id, changes, reason), changed


def typed_changes(changes: Mapping[str, Any]) -> dict[str, Any]:
    """Changes given as JSON values (an agent's ``{"score": 1.02, "tags": [...]}``):
    a text is typed as ``FIELD=VALUE`` would be (``"1.02"`` a score, ``"a,b"`` tags),
    any other value kept for validation; an unknown field is an error."""
    typed: dict[str, Any] = {}
    for field, value in changes.items():
        if field not in ALL_FIELDS:
            raise unknown_field(field)
        typed[field] = parse_value(field, value) if isinstance(value, str) else value
    return typed


def _warn_stale_measurement(exp: KernelExperiment, changes: Mapping[str, Any]) -> None:
    """Warn when ``score`` was set but the ``results`` or ``raw_result`` that measured the
    old one were left as they were (they now contradict the new score), advising what
    can be done: a new round (``kexp remeasure``) when there are per-configuration
    ``results`` to pool it with, else (remeasure refuses it) setting ``raw_result``."""
    if "score" not in changes:
        return
    stale = [
        name for name in ("results", "raw_result") if getattr(exp, name) and name not in changes
    ]
    if not stale:
        return
    if exp.results:
        message = (
            f"{exp.id}: score is now {exp.score} but {' and '.join(stale)} still "
            f"{'hold' if len(stale) > 1 else 'holds'} the measurement of the old score, "
            f"and now {'contradict' if len(stale) > 1 else 'contradicts'} it: measure "
            f"again with {REMEASURE.say(id=exp.id)} (new timings pooled with the recorded "
            "ones: score, score_ci and results recomputed, the round added to raw_result), "
            "or set them too, or record a new experiment with this one as pid"
        )
    else:
        message = (
            f"{exp.id}: score is now {exp.score} but raw_result still holds what the run "
            "reported before, and now contradicts it: set raw_result too, to what the new "
            f"run reported ({SET_RAW_RESULT.say(id=exp.id)})"
        )
    warnings.warn(message, StaleMeasurementWarning, stacklevel=3)


def _warn_measured_against_missing(exp: KernelExperiment, had_parent: bool) -> None:
    """Warn (as ``kexp record`` and ``kexp validate`` do) when a ``pid`` was set and the
    experiment does not say what its score is a speedup over: it now counts as a step
    over the parent, where without a parent it was one over the operator's original
    code (``had_parent``: whether it had a parent before the update)."""
    said = {"pid": exp.pid, "status": exp.status, "is_buggy": exp.is_buggy, "score": exp.score}
    if exp.measured_against:
        said["measured_against"] = exp.measured_against
    if not missing_measured_against(said) or measured_nothing(exp.score):
        return
    before = "" if had_parent else ", no longer over the operator's original code as before"
    warnings.warn(
        f"{exp.id} has a parent and no measured_against: its score {exp.score} counts as a "
        f"speedup over the parent's code{before}, and kexp validate warns of it; say "
        f"which: {MEASURED_AGAINST.say(id=exp.id)}, or measured_against=reference when "
        "it is over the operator's original code",
        MeasuredAgainstWarning,
        stacklevel=3,
    )


# --- a summary's figure, following a new score ------------------------------------------

#: A speedup written in a ``change_summary``: a percentage (``+25%``, ``-0.63 %``,
#: ``−3%``, ``25%``) or a ratio (``1.25x``, ``1.25×``).
_FIGURE = re.compile(
    r"(?<![\w.])(?:(?P<sign>[+\-−]?)(?P<percent>\d+(?:\.\d+)?)(?P<pspace>\s?)%"
    r"|(?P<ratio>\d+(?:\.\d+)?)(?P<rspace>\s?)(?P<times>[x×]))(?!\w)"
)


def _close(written: str, value: float) -> bool:
    """Whether ``written`` states ``value`` at its decimals, rounded or cut short (less
    than one unit of its last place apart: ``+25%`` states 25.59)."""
    decimals = len(written.partition(".")[2])
    return abs(float(written) - value) < 10.0**-decimals


def summary_with_score(
    summary: str, old_score: float, new_score: float, limit: int = 80
) -> str | None:
    """``summary`` with the figure that states ``old_score`` (the last percentage or
    ratio that states it, :func:`_close`: ``Tile the loads - +25%`` for 1.2559)
    restated for ``new_score``, rounded to the same decimals (``+2%``, ``1.02x``);
    None when it states no such figure, or when the restated one would need words it
    does not have (an unsigned percentage, ``25% faster``, of a score now below 1), or
    the summary would grow past ``limit`` characters."""
    if not (old_score > 0 and new_score > 0) or old_score == new_score:
        return None
    old_change, new_change = (old_score - 1) * 100, (new_score - 1) * 100
    for match in reversed(list(_FIGURE.finditer(summary))):
        if match["ratio"] is not None:
            written = match["ratio"]
            if not _close(written, old_score):
                continue
            decimals = len(written.partition(".")[2])
            figure = f"{new_score:.{decimals}f}{match['rspace']}{match['times']}"
        else:
            written, sign = match["percent"], match["sign"]
            signed = -float(written) if sign in ("-", "−") else float(written)
            if not _close(f"{signed:.{len(written.partition('.')[2])}f}", old_change):
                continue
            if not sign and new_change < 0:
                return None  # "25% faster": the words would have to change too
            decimals = len(written.partition(".")[2])
            magnitude = f"{abs(new_change):.{decimals}f}"
            minus = "−" if sign == "−" else "-"
            new_sign = (minus if new_change < 0 else "+") if sign else ""
            figure = f"{new_sign}{magnitude}{match['pspace']}%"
        restated = f"{summary[: match.start()]}{figure}{summary[match.end() :]}"
        return restated if len(restated) <= limit else None
    return None


#: Words after an unsigned percentage that say which way it goes (``12% faster``).
_FASTER = re.compile(r"\s*(?:faster|speedup|quicker)\b", re.IGNORECASE)
_SLOWER = re.compile(r"\s*(?:slower|slowdown)\b", re.IGNORECASE)


def stated_speedup(summary: str) -> tuple[str, float] | None:
    """The speedup a ``change_summary``'s result states, as written and as a ratio: its
    last figure after the last ``" - "`` (``<What> - <Result>``) that is a signed
    percentage (``+12.5%``: 1.125), a ratio (``1.18x``) or an unsigned percentage said
    faster or slower (``12% slower``: 0.88); None without one (a figure of the *What*
    may be an unroll factor, an unsigned one a register count)."""
    _, separator, result = summary.rpartition(" - ")
    if not separator:
        return None
    for match in reversed(list(_FIGURE.finditer(result))):
        written = match[0]
        if match["ratio"] is not None:
            return written, float(match["ratio"])
        value = float(match["percent"]) / 100
        sign = match["sign"]
        if sign:
            return written, 1 - value if sign in ("-", "−") else 1 + value
        after = result[match.end() :]
        if _FASTER.match(after):
            return written, 1 + value
        if _SLOWER.match(after):
            return written, 1 - value
    return None
