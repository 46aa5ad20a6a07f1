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

from kexp.core.advice import (
    CORRECT_FIELD,
    MEASURED_AGAINST,
    REMEASURE,
    RESTORE_SCORE,
    SET_RAW_RESULT,
)
from kexp.core.errors import (
    KexpError,
    KexpWarning,
    MeasuredAgainstWarning,
    StaleMeasurementWarning,
    ValidationError,
)
from kexp.core.fields import (
    ALL_FIELDS,
    BODY_FIELDS,
    FIELD,
    JSON_FIELDS,
    KIND_WORDS,
    MAPPING_FIELDS,
    TEXT_LIST_FIELDS,
    is_of_kind,
)
from kexp.core.model import KernelExperiment
from kexp.core.outcome import judge, measured_nothing
from kexp.core.settings import DEFAULT_SETTINGS, Settings
from kexp.format.legacykeys import LEGACY_PREFIX, is_legacy_key
from kexp.format.rules import missing_measured_against, score_results_mismatch

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


def note_value(value: Any) -> str:
    """How a correction note writes a value (``score 1.019 → 1.021``)."""
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
            parts.append(f"{field} {note_value(before)} → {note_value(value)}")
    what = "; ".join(parts) if parts else "no field changed"
    reason = " ".join(reason.split())
    return f"**Correction ({day})**: {what}. Reason: {reason}"


def effective_changes(store: Store, exp_id: str, changes: Mapping[str, Any]) -> dict[str, Any]:
    """The ``changes`` that would change the experiment (ids resolved): those whose value
    differs from the one it has."""
    store.path_of(exp_id, writing=True)  # in the working tree, else said where it is
    updates = store.resolve_references(dict(changes))
    old = to_correct(store, exp_id, updates)
    return {
        field: value for field, value in updates.items() if getattr(old, field, _ABSENT) != value
    }


_ABSENT = object()


def to_correct(store: Store, exp_id: str, changes: Mapping[str, Any]) -> KernelExperiment:
    """The experiment ``changes`` correct, as its file holds it: also a file that is no
    valid experiment only in fields ``changes`` set (a ``score_ci`` that does not hold
    the score, which validate advises emptying with ``kexp update``, or a score edited
    by hand that the correction's ``score`` puts back), so that the correction can
    repair it; the result is validated as any update's is."""
    try:
        return store.get_experiment(exp_id)
    except ValidationError as exc:
        errors = [p for p in exc.problems if p.severity == "error"]
        # a score_ci that does not hold the score: a new score may repair it too
        mended = {*changes, "score_ci"} if "score" in changes else set(changes)
        if not errors or any(p.field not in mended for p in errors):
            raise
        document = store.check_file(store.path_of(exp_id, writing=True)).document
        if document is None:
            raise
        return document.to_experiment()


def correct(
    store: Store, exp_id: str, changes: Mapping[str, Any], reason: str | None = None
) -> KernelExperiment:
    """Update an experiment's fields; with ``reason``, append a dated correction note to
    its ``detailed_description`` (old → new values and the reason).

    The update is validated and atomic (see :meth:`kexp.Store.update_experiment`). When
    no value differs from the one the experiment has, nothing is written and no note is
    appended: the experiment is returned as it is. A new ``score`` carries what follows
    from it (:func:`following_score`): the figure of ``change_summary`` that stated the
    old score states the new one, as ``kexp remeasure`` restates it, and the old
    measurement's ``score_ci`` is dropped unless a new one is given (or the score is put
    back inside it: one edited by hand, restored). It warns
    (:class:`StaleMeasurementWarning`) of what the old measurement left: ``results``
    or ``raw_result`` as they were, the interval dropped, a figure that could not be
    restated. A ``pid`` given to an experiment that does not say what its score is
    measured against warns (:class:`MeasuredAgainstWarning`): its score now counts as
    a step over the parent.
    """
    updates = store.resolve_references(dict(changes))
    if not updates:
        raise KexpError("nothing to change: give at least one FIELD=VALUE")
    if reason is not None and not reason.strip():
        raise KexpError("the reason of a correction must not be empty")
    # read, note and write under the experiment's lock: another correction's note is
    # never written over by one computed from the file before it
    with store.editing(exp_id, names_others=_names_others(updates)) as exp_id:
        return _correct(store, exp_id, changes, updates, reason)


def _names_others(changes: Mapping[str, Any]) -> bool:
    """Whether ``changes`` name other experiments (the lineage lock is taken first)."""
    return bool({"pid", "combines"} & set(changes))


def _correct(
    store: Store,
    exp_id: str,
    changes: Mapping[str, Any],
    updates: dict[str, Any],
    reason: str | None,
) -> KernelExperiment:
    """:func:`correct`, its locks held."""
    effective = effective_changes(store, exp_id, updates)
    if not effective:
        return store.get_experiment(exp_id)
    old = to_correct(store, exp_id, updates)
    if "score" in effective:
        settings = store.settings
        updates = following_score(
            old, updates, settings.max_summary_chars, settings.score_tolerance, settings
        )
    if reason:
        note = correction_note(old, updates, reason)
        description = updates.get("detailed_description", old.detailed_description)
        description = description.rstrip("\n")
        updates["detailed_description"] = f"{description}\n\n{note}" if description else note
    updated = store.update_experiment(exp_id, **updates)
    tolerance = store.settings.score_tolerance
    if "score" in effective:
        _warn_stale_measurement(old, updated, changes, tolerance)
    elif "score_ci" in effective and "results" not in effective:
        _warn_contradicted_score(updated, tolerance)
    if "pid" in updates:
        _warn_measured_against_missing(updated, bool(old.pid))
    if "status" in effective and updated.status == "failed":
        _warn_leaving_with(store, updated.id)
    return updated


def apply_correction(
    store: Store, exp_id: str, changes: Mapping[str, Any], reason: str | None = None
) -> tuple[KernelExperiment, list[str]]:
    """:func:`correct`, and the fields it changed (none: nothing was written, the
    experiment already holds these values): those given, then those that followed a
    new score (``change_summary``, ``score_ci``)."""
    with store.editing(exp_id, names_others=_names_others(changes)) as exp_id:
        changed = list(effective_changes(store, exp_id, changes))
        if not changed:
            return store.get_experiment(exp_id), []
        old = to_correct(store, exp_id, changes)
        updated = correct(store, exp_id, changes, reason)
    followed = [
        name
        for name in _FOLLOWING_SCORE
        if name not in changed and getattr(old, name) != getattr(updated, name)
    ]
    return updated, [*changed, *followed]


#: The fields a new score changes unless they are given: the summary's figure, the
#: interval of the measurement the old score came from.
_FOLLOWING_SCORE = ("change_summary", "score_ci")


def following_score(
    old: KernelExperiment,
    updates: Mapping[str, Any],
    limit: int,
    tolerance: float = 0.0,
    settings: Settings = DEFAULT_SETTINGS,
) -> dict[str, Any]:
    """``updates``, which set a new ``score``, with what follows from it where they do
    not say: the figure of ``change_summary`` that stated ``old``'s score restated for
    the new one, with an outcome it names (:func:`summary_with_score`, within ``limit``
    characters, by ``settings``), and
    ``old``'s ``score_ci`` dropped (the interval of the old measurement: it does not
    belong to the new score; kexp remeasure gives the new one), unless the new score puts
    back the one it measured (:func:`_restores`) or still agrees with it (:func:`_agrees`,
    its results within ``tolerance``)."""
    followed = dict(updates)
    new_score: Any = followed.get("score")
    kept = _restores(old, new_score) or _agrees(old, new_score, tolerance)
    if "change_summary" not in followed and _is_number(old.score) and _is_number(new_score):
        interval = followed.get("score_ci", old.score_ci if kept else [])
        summary = summary_with_score(
            old.change_summary, float(old.score), float(new_score), limit, settings, interval
        )
        if summary is not None:
            followed["change_summary"] = summary
    if "score_ci" not in followed and old.score_ci and not kept:
        followed["score_ci"] = []
    return followed


def _agrees(old: KernelExperiment, score: Any, tolerance: float) -> bool:
    """Whether a new ``score`` still agrees with ``old``'s measurement: inside its
    ``score_ci`` (which held ``old``'s score), and what its ``results`` give within
    ``tolerance`` (as validation judges them), where it has them; never for an experiment
    with neither (nothing to agree with)."""
    if not (_is_number(old.score) and _is_number(score)):
        return False
    if not old.score_ci and not old.results:
        return False
    if len(old.score_ci) == 2:
        low, high = old.score_ci
        if not (low <= old.score <= high and low <= score <= high):
            return False
    return score_results_mismatch(score, old.results, tolerance) is None


def _restores(old: KernelExperiment, score: Any) -> bool:
    """Whether ``score`` puts back the score of ``old``'s measurement: its ``score_ci``
    left out ``old``'s score (one edited by hand) and holds this one, which is kept."""
    if not (_is_number(old.score) and _is_number(score)) or len(old.score_ci) != 2:
        return False
    low, high = old.score_ci
    return not low <= old.score <= high and low <= score <= high


def _is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def checked_changes(changes: Mapping[str, Any], argument: str = "changes") -> dict[str, Any]:
    """Changes given as JSON values (an agent's ``{"score": 1.02, "tags": [...]}``),
    each of its field's JSON type, never converted (``true`` is no score, ``"1.02"``
    none either, ``"a,b"`` no tags); ``null`` removes an optional field. An unknown
    field, or a value of another type, is an error naming ``argument`` and the field."""
    for field, value in changes.items():
        if field not in ALL_FIELDS:
            raise unknown_field(field)
        kind = FIELD[field].kind
        if value is not None and not is_of_kind(value, kind):
            given = json.dumps(value, ensure_ascii=False, default=str)
            raise KexpError(
                f"argument {argument!r}: {field!r} must be {KIND_WORDS[kind]}, not "
                f"{given if len(given) <= 60 else given[:59] + '…'}"
            )
    return dict(changes)


def _warn_contradicted_score(exp: KernelExperiment, tolerance: float) -> None:
    """Warn when a correction of ``score_ci`` alone leaves a score its ``results`` (its
    own measurement) contradict: a score edited by hand, its interval emptied, would
    read as measured."""
    measured = score_results_mismatch(exp.score, exp.results, tolerance)
    if measured is None:
        return
    restore = RESTORE_SCORE.say(id=exp.id, score=f"{measured:.4f}")
    warnings.warn(
        f"{exp.id}: its score {exp.score} is not what its results give ({measured:.4f}): "
        f"a score edited by hand? put it back ({restore}), or measure again "
        f"({REMEASURE.say(id=exp.id)})",
        StaleMeasurementWarning,
        stacklevel=4,
    )


def _warn_stale_measurement(
    old: KernelExperiment, exp: KernelExperiment, given: Mapping[str, Any], tolerance: float
) -> None:
    """Warn, in one line, of what a new ``score`` left of the old measurement: the
    ``results`` or ``raw_result`` that measured it, left as they were (they now
    contradict the new score); its interval, dropped (:func:`following_score`); a
    figure of ``change_summary`` that still states the old score (one that could not be
    restated). The advice: a new round (``kexp remeasure``) when there are
    per-configuration ``results`` to pool it with, else (remeasure refuses it) setting
    ``raw_result``; setting ``change_summary`` for its figure."""
    stale = [name for name in ("results", "raw_result") if getattr(exp, name) and name not in given]
    if (
        _restores(old, exp.score)
        and score_results_mismatch(exp.score, exp.results, tolerance) is None
    ) or _agrees(old, exp.score, tolerance):
        stale = []  # the measurement's score put back, or still its: nothing contradicts it
    dropped = old.score_ci if old.score_ci and not exp.score_ci and "score_ci" not in given else []
    figure = stale_figure(old, exp) if "change_summary" not in given else None
    if not (stale or dropped or figure):
        return
    said = [f"{exp.id}: score is now {exp.score}"]
    if stale:
        said[0] += (
            f" but {' and '.join(stale)} still {'hold' if len(stale) > 1 else 'holds'} the "
            f"measurement of the old score, and now "
            f"{'contradict' if len(stale) > 1 else 'contradicts'} it"
        )
    if dropped:
        said.append(
            f"its score_ci [{dropped[0]}, {dropped[1]}], the old measurement's interval, was "
            "dropped (no interval, here nor in the cumulative ones built on it, until it is "
            "measured again)"
        )
    if exp.results and stale:
        advice = (
            f"measure again with {REMEASURE.say(id=exp.id)} (new timings pooled with the "
            "recorded ones: score, score_ci and results recomputed, the round added to "
            "raw_result), or set them too, or record a new experiment with this one as pid"
        )
    elif exp.results and dropped:
        advice = f"measure again with {REMEASURE.say(id=exp.id)} for a new one"
    elif "raw_result" in stale:
        advice = (
            f"set raw_result too, to what the new run reported ({SET_RAW_RESULT.say(id=exp.id)})"
        )
    else:
        advice = ""
    message = "; ".join(said)
    if advice:
        message = f"{message}: {advice}"
    if figure:
        message = (
            f"{message}; its change_summary still states the old score ({figure}): restate "
            f"it with {CORRECT_FIELD.say(id=exp.id, field='change_summary')}"
        )
    warnings.warn(message, StaleMeasurementWarning, stacklevel=4)


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
        stacklevel=4,
    )


def _warn_leaving_with(store: Store, exp_id: str) -> None:
    """Name the steps built on ``exp_id``, retired now, that leave the ranking with it
    (``kexp top``, every current best, context's successes: their code holds it)."""
    leaving = store.derivation().leaving_with(exp_id)
    if leaving:
        warnings.warn(
            f"{exp_id[:10]} is retired (status failed): {len(leaving)} step(s) built on it "
            f"leave kexp top and every current best with it: "
            f"{', '.join(i[:10] for i in leaving)}",
            KexpWarning,
            stacklevel=4,
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


def _stating(summary: str, score: float) -> re.Match[str] | None:
    """The figure of ``summary`` that states ``score`` (:func:`_close`): the last one,
    a percentage of its change or a ratio; None when none states it."""
    change = (score - 1) * 100
    for match in reversed(list(_FIGURE.finditer(summary))):
        if match["ratio"] is not None:
            if _close(match["ratio"], score):
                return match
            continue
        written, sign = match["percent"], match["sign"]
        signed = -float(written) if sign in ("-", "−") else float(written)
        if _close(f"{signed:.{len(written.partition('.')[2])}f}", change):
            return match
    return None


def stale_figure(old: KernelExperiment, new: KernelExperiment) -> str | None:
    """The figure of ``new``'s ``change_summary`` that still states ``old``'s score
    after its score changed (one :func:`summary_with_score` could not restate, or the
    predecessor's ``update_experiment`` left as it was), or
    that stated it as closely as its measurement did (:func:`_measured_figure`); None
    when there is none."""
    if new.change_summary != old.change_summary or new.score == old.score:
        return None
    if not _is_number(old.score) or old.score <= 0 or not _is_number(new.score):
        return None
    match = _stating(old.change_summary, float(old.score))
    if match is None:
        return _measured_figure(old, float(new.score))
    now = _stating(old.change_summary, float(new.score))
    if now is not None and now.span() == match.span():
        return None  # the figure states the new score as well (+5% is 1.0486 and 1.049)
    return match.group(0)


def _measured_figure(old: KernelExperiment, new_score: float) -> str | None:
    """The speedup ``old``'s ``change_summary`` states (:func:`stated_speedup`) when it
    is not its score at the figure's decimals but within its measurement's
    ``score_ci`` (``+13.6%`` beside 1.1374 [1.11, 1.17]: as honest as the score, as
    ``kexp add`` judged it) and nearer that score than ``new_score``: the old
    measurement's figure, no longer the score's; None otherwise (a figure of the
    speedup over the reference, none at all)."""
    stated = stated_speedup(old.change_summary)
    if stated is None or len(old.score_ci) != 2:
        return None
    written, ratio = stated
    low, high = old.score_ci
    if not low <= ratio <= high or abs(ratio - new_score) <= abs(ratio - float(old.score)):
        return None
    return written


def summary_with_score(
    summary: str,
    old_score: float,
    new_score: float,
    limit: int = 80,
    settings: Settings = DEFAULT_SETTINGS,
    interval: Any = (),
) -> str | None:
    """``summary`` with the figure that states ``old_score`` (the last percentage or
    ratio that states it, :func:`_close`: ``Tile the loads - +25%`` for 1.2559)
    restated for ``new_score``, rounded to the same decimals (``+2%``, ``1.02x``), and
    an outcome its result names (``(regression)``, :data:`_LABEL`) restated for what
    ``new_score`` (with its ``interval``, by ``settings``' thresholds) says; None when
    it states no such figure, or when the restated one would need words it does not
    have (an unsigned percentage, ``25% faster``, of a score now below 1), or the
    summary would grow past ``limit`` characters."""
    if not (old_score > 0 and new_score > 0) or old_score == new_score:
        return None
    match = _stating(summary, old_score)
    if match is None:
        return None
    decimals = len((match["ratio"] or match["percent"]).partition(".")[2])
    if match["ratio"] is not None:
        figure = f"{new_score:.{decimals}f}{match['rspace']}{match['times']}"
    else:
        sign, new_change = match["sign"], (new_score - 1) * 100
        if not sign and new_change < 0:
            return None  # "25% faster": the words would have to change too
        magnitude = f"{abs(new_change):.{decimals}f}"
        minus = "−" if sign == "−" else "-"
        new_sign = (minus if new_change < 0 else "+") if sign else ""
        figure = f"{new_sign}{magnitude}{match['pspace']}%"
    # The result's words (after the last " - " before the figure): its outcome follows.
    cut = summary.rfind(" - ", 0, match.start())
    cut = match.start() if cut < 0 else cut + 3
    outcome = judge("done", False, False, new_score, interval, settings)
    restated = (
        f"{summary[:cut]}{_relabelled(summary[cut : match.start()], outcome)}{figure}"
        f"{_relabelled(summary[match.end() :], outcome)}"
    )
    return restated if len(restated) <= limit else None


#: The outcomes a summary's result may name beside its figure (``+5% (regression)``),
#: each with the outcome it says.
_LABEL = re.compile(r"\b(?:improvement|regression|marginal|within noise)\b", re.IGNORECASE)
_SAYS = {"within noise": "marginal"}


def _relabelled(text: str, outcome: str) -> str:
    """``text`` with each outcome it names (:data:`_LABEL`) that is not ``outcome``
    saying ``outcome``, in the case it was written in (``REGRESSION``, ``Marginal``)."""

    def say(found: re.Match[str]) -> str:
        word = found[0]
        if _SAYS.get(word.lower(), word.lower()) == outcome:
            return word
        if word.isupper():
            return outcome.upper()
        return outcome.capitalize() if word[0].isupper() else outcome

    return _LABEL.sub(say, text)


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
