"""The predecessor's helpers, kept exactly, on top of kexp (installed with the package).

Code and agent skills written for the single-JSON-file helpers keep working unchanged:
the names, arguments, return values, exceptions and defaults are the predecessor's.

* :class:`KernelExperiment` is kexp's own class (a subclass of it), in the
  predecessor's field order: ``id`` (16 hex) and ``created_at`` (UTC, with
  microseconds) are made when it is built; ``to_dict()`` gives the predecessor's 16
  keys in that order (``dataclasses.asdict`` of them), ``KernelExperiment.from_dict(d)``.
* ``create_experiment(exp)`` returns ``None``; ``ValueError`` if ``exp.id`` exists.
* ``get_experiment(exp_id)``: the experiment, or ``None`` (full ids only).
* ``list_experiments()``: every experiment, in id order.
* ``top_experiments(max_results=20)``: every experiment (buggy and pending too) as a
  dict, sorted by ``score``, highest first.
* ``update_experiment(exp_id, **changes)``: the updated experiment; ``KeyError`` if
  there is none.
* ``delete_experiment(exp_id)``: ``None``; ``KeyError`` if there is none.
* ``test_insert_example()`` inserts a sample; ``python -m kernel_exp_dataclass`` too.
* ``DB_PATH`` and ``Status``.

A ``score`` is the predecessor's throughout, a speedup over the operator's original
code: a kexp step measured against its parent is handed out with its cumulative score
as ``score`` (``measured_against: reference``, its ``pid`` kept; the file unchanged; its
top dict adds ``step_score``, ``cumulative_score``, ``measured_against``, and
``suspect``: why kexp finds a measurement too good to be true), and what is
written back is read the same way: values equal to those handed out change nothing (an
unchanged ``id`` and the derived keys too), a restored record keeps the same cumulative
score, a new ``score`` (or a new ``pid``) keeps a speedup over the original code.

They act on kexp's default store (``$KEXP_ROOT``, else the nearest folder above the
working directory holding ``experiments/``). With no store, reads return nothing and
the first create makes one in the working directory, saying where. The predecessor's
``kernel_experiments_db.json`` in the working directory is not read: when the store
lacks its records, the first call warns once, naming ``kexp import``. Where fetched
branches hold experiments the working tree lacks, the first read warns once too, as
``kexp context`` says it (``not read: ...``); the answers stay the predecessor's. kexp validates
what the predecessor wrote blindly: an invalid score, a ``pid`` naming no experiment,
deleting a parent are refused with an exception naming the field, and nothing written;
so is a record written back that was read before a correction (its
``detailed_description`` lacks a dated correction note the file holds), or a step's
before one of its ancestors was retired or corrected (its score the old product).

New code should use :mod:`kexp` itself (id prefixes, filters, lineage, git).
"""

from __future__ import annotations

import contextlib
import dataclasses
import math
import os
import re
import shutil
import sys
import warnings
from pathlib import Path
from types import SimpleNamespace
from typing import TYPE_CHECKING, Any

from kexp.core import model
from kexp.core.advice import CORRECT_FIELD, REMEASURE
from kexp.core.errors import (
    ExperimentNotFoundError,
    KexpError,
    KexpWarning,
    StoreNotFoundError,
    ValidationError,
)
from kexp.core.ids import SHOWN_LENGTH, is_valid_id
from kexp.core.model import Status
from kexp.core.outcome import measured_against_parent

if TYPE_CHECKING:
    from kexp.storage.store import Store

__all__ = [
    "DB_PATH",
    "KernelExperiment",
    "Status",
    "create_experiment",
    "delete_experiment",
    "get_experiment",
    "list_experiments",
    "test_insert_example",
    "top_experiments",
    "update_experiment",
]

#: Where the first write makes the store when there is none, relative to the working
#: directory (as the predecessor's database file was): its ``experiments/`` folder.
DB_PATH = Path("experiments")
#: The predecessor's database file, relative to the working directory (its
#: ``DB_PATH``): kexp does not read it, and says so (:func:`_warn_of_predecessor_database`).
PREDECESSOR_DB = Path("kernel_experiments_db.json")
#: The sample's ``base_commit`` outside a git repository, where none can be taken from
#: ``HEAD`` (the predecessor inserted its sample there with an empty one; kexp requires
#: a hash): no commit, said as one.
SAMPLE_BASE_COMMIT = "0" * 40

#: The keys of a ``top_experiments`` dict: the predecessor's ten, then kexp's
#: additions (so a high score that is buggy, pending or a regression shows as such, and
#: a step's score over its parent as one: ``cumulative_score`` is its speedup over the
#: original code, None when it cannot be known; ``measured_against`` says what
#: ``score`` is over, ``parent`` or ``reference``; ``suspect`` why its measurement is
#: too good to be true, as ``kexp top`` flags it: it still ranks by its score here).
TOP_KEYS = (
    "base_commit",
    "change_summary",
    "detailed_description",
    "dtype_sig",
    "env",
    "id",
    "operator_sig",
    "profiling_info",
    "raw_result",
    "score",
)
EXTRA_TOP_KEYS = (
    "pid",
    "status",
    "is_buggy",
    "outcome",
    "created_at",
    "step_score",
    "cumulative_score",
    "measured_against",
    "suspect",
)


class KernelExperiment(model.KernelExperiment):
    """kexp's experiment (:class:`kexp.KernelExperiment`, every field and property),
    with the predecessor's ``to_dict()``: its 16 keys, in field order.

    Equal to a :class:`kexp.KernelExperiment` with the same values; everything this
    module hands out is one of these.
    """

    def to_dict(self, *, include_derived: bool = False) -> dict[str, Any]:
        """``dataclasses.asdict`` of the predecessor's 16 fields, in their order (with
        ``include_derived``, kexp's derived values after them, as
        :meth:`kexp.KernelExperiment.to_dict` gives them)."""
        whole = dataclasses.asdict(self)
        data = {name: whole[name] for name in PREDECESSOR_FIELDS}
        if include_derived:
            derived = super().to_dict(include_derived=True)
            data.update((name, derived[name]) for name in derived if name in model.DERIVED)
        return data

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, model.KernelExperiment):
            return NotImplemented
        return all(
            getattr(self, field.name) == getattr(other, field.name)
            for field in dataclasses.fields(model.KernelExperiment)
            if field.compare
        )

    __hash__ = None  # type: ignore[assignment]  # mutable, as kexp's


#: The predecessor's fields, in its order: the first of :class:`KernelExperiment`'s.
PREDECESSOR_FIELDS = tuple(field.name for field in dataclasses.fields(KernelExperiment))[:16]


def _handed_out(exp: model.KernelExperiment) -> KernelExperiment:
    """``exp`` as this module's class, in the predecessor's meaning: the same values and
    store state, but a step measured against its parent whose speedup over the original
    code is known has that speedup as its ``score`` (and its interval as ``score_ci``),
    ``measured_against: reference`` (its ``pid`` kept), as the predecessor's records."""
    cumulative = exp.cumulative_score if measured_against_parent(exp) else None
    if cumulative is None and isinstance(exp, KernelExperiment):
        return exp
    same = KernelExperiment.__new__(KernelExperiment)
    same.__dict__.update(exp.__dict__)
    if cumulative is not None:
        interval = exp.cumulative_ci
        same.score = cumulative
        same.score_ci = [] if interval is None else list(interval)
        same.measured_against = "reference"
    return same


def create_experiment(exp: model.KernelExperiment) -> None:
    """Record ``exp``; ``ValueError`` when an experiment with ``exp.id`` exists.

    kexp validates first (an invalid experiment raises :class:`kexp.ValidationError`,
    a ``ValueError`` naming each bad field, and nothing is written) and fills in an
    empty ``base_commit`` and ``author`` from git. An empty ``id`` or ``created_at``
    is generated and set on ``exp`` too (so ``exp.id`` names what was stored).
    """
    recorded = exp
    if exp.pid and not exp.measured_against:
        # The predecessor's skill measured every iteration against the operator's
        # original code: its scores are speedups over the reference, never steps.
        recorded = dataclasses.replace(exp, measured_against="reference")
    stored = _create(recorded, stacklevel=3)
    if not exp.id:
        exp.id = stored.id
    if not exp.created_at:
        exp.created_at = stored.created_at


def get_experiment(exp_id: str) -> KernelExperiment | None:
    """The experiment with this id, or ``None``: for an unknown id, and for anything
    that is not a full id (a prefix, a path, not a string)."""
    store = _existing_store() if is_valid_id(exp_id) else None
    if store is None:
        return None
    _warn_of_unread(store, "get_experiment()")
    try:
        return _handed_out(store.get_experiment(exp_id))
    except ExperimentNotFoundError:
        _warn_of_elsewhere(store, exp_id)
        return None


def list_experiments(**filters: Any) -> list[KernelExperiment]:
    """Every experiment, in id order (``filters``: kexp's, optional)."""
    store = _existing_store()
    if store is None:
        return []
    _warn_of_unread(store, "list_experiments()")
    return [_handed_out(exp) for exp in sorted(store.list_experiments(**filters), key=_id_of)]


def top_experiments(max_results: int = 20, **filters: Any) -> list[dict[str, Any]]:
    """The first ``max(0, max_results)`` experiments by their speedup over the
    operator's original code (what the predecessor's ``score`` was), highest first
    (equal ones in id order), buggy and pending ones included, as dicts of
    :data:`TOP_KEYS` and :data:`EXTRA_TOP_KEYS` (``filters``: kexp's, optional).

    That speedup, each dict's ``score`` (``step_score`` is the file's), is the ``score``
    of an experiment measured against the reference (every record this module or the
    predecessor wrote), and the cumulative score of a kexp step measured against its
    parent; steps whose cumulative score cannot be known come last, by their own score
    (their dict's ``cumulative_score`` is None)."""
    store = _existing_store()
    limit = max(0, max_results)
    if store is None or limit == 0:
        return []
    _warn_of_unread(store, "top_experiments()")
    every = sorted(store.list_experiments(brief=True, **filters), key=_id_of)
    every.sort(key=_over_the_original_code, reverse=True)  # stable: ties stay in id order
    return [_top_dict(exp) for exp in store.with_bodies(every[:limit])]


def update_experiment(exp_id: str, **changes: Any) -> KernelExperiment:
    """Change fields of the experiment with this id; returns it updated.

    A ``score`` is the predecessor's: a speedup over the operator's original code. So a
    ``pid`` given to an experiment that does not say what its score is measured against
    records ``measured_against: reference``, as :func:`create_experiment` does; and a new
    ``score`` for a kexp step measured against its parent records it over the reference
    too, with a :class:`kexp.KexpWarning` saying so (``measured_against="parent"``
    given with it keeps the step a step); a new ``pid`` given to such a step without a
    score keeps its speedup over the original code as its score, over the reference,
    warning too. Values equal to those handed out (a record or a ``top_experiments``
    dict written back) change nothing (:func:`_written_back`). A record read before a
    correction of the experiment (``kexp update --reason``, ``kexp remeasure``) and
    written back is refused (:func:`_refuse_stale`), as is a step's record read before
    an ancestor was retired or corrected (:func:`_refuse_read_before_lineage`). A new
    score the old measurement's ``score_ci`` does not hold drops it
    (:func:`_without_old_interval`), as ``kexp update --set score=`` does. A
    ``change_summary`` whose figure states the old score is left as it is, and warned of
    (:func:`_with_stale_figure`), where ``kexp update --set score=`` restates it.

    ``KeyError`` when there is none; an invalid result raises
    :class:`kexp.ValidationError` (a ``ValueError``) and the file is left as it was.
    """
    store = _store_holding(exp_id)
    try:
        store.get_experiment(exp_id)
    except ExperimentNotFoundError:
        # lazy: only where an id is not found
        from kexp.storage.whereabouts import not_in_working_tree

        raise not_in_working_tree(store, exp_id, _not_found(exp_id)) from None
    # read, check and write under the experiment's lock: no correction slips in between
    with store.editing(exp_id, names_others=bool({"pid", "combines"} & set(changes))):
        old = store.get_experiment(exp_id)
        _refuse_stale(old, changes)
        given, changes = changes, _written_back(old, changes)
        _refuse_read_before_lineage(store, old, given, changes)
        said = ""
        if {"pid", "score"} & set(changes) and "measured_against" not in changes:
            changes, said = _over_the_reference(old, changes)
        changes, said = _without_old_interval(old, changes, said)
        if not changes:
            return _handed_out(old)
        updated = store.update_experiment(exp_id, **changes)
    said = _with_stale_figure(old, updated, said)
    if said:  # said once it is recorded: a refused update warns of nothing
        warnings.warn(said, KexpWarning, stacklevel=2)
    return _handed_out(updated)


#: A correction note's date and what it changed (``**Correction (2026-12-07)**: score
#: 1.019 → 1.021; change_summary A → B. Reason: ...``,
#: :func:`kexp.measure.corrections.correction_note`).
_NOTE = re.compile(r"\*\*Correction \(([^)]*)\)\*\*:\s*(.*)")


def _refuse_stale(old: model.KernelExperiment, changes: dict[str, Any]) -> None:
    """Refuse (a ``ValueError``, one line, nothing written) a write-back of a record read
    before a correction of ``old`` (``kexp update --reason``, ``kexp remeasure``): kexp's
    dated correction notes are only ever appended to ``detailed_description``, so one
    given without a note the file holds was read before it (or would erase it); and in a
    record written back (it carries values the file holds, unchanged), a value that a
    note says the correction replaced, while the file holds the value it put in its
    place, would undo it. A change given alone (``change_summary=...``) is the caller's
    own, and written."""
    # lazy: only where the file holds correction notes
    from kexp.gitops.log import CORRECTION_START, correction_key
    from kexp.measure.corrections import note_value

    held = [
        line.strip()
        for line in old.detailed_description.splitlines()
        if line.startswith(CORRECTION_START)
    ]
    if not held:
        return
    given = changes.get("detailed_description")
    if isinstance(given, str):
        kept = {
            correction_key(line) for line in given.splitlines() if line.startswith(CORRECTION_START)
        }
        for note in held:
            if correction_key(note) not in kept:
                raise ValidationError(_stale_message(old, note, ""), [])
    if not any(
        key in model.ALL_FIELDS and getattr(old, key) == value for key, value in changes.items()
    ):
        return  # no record written back (it carries values unchanged): a change, said as one
    for field, value in changes.items():
        if field in TRANSLATED or field in _NOTE_NAMES or field not in model.ALL_FIELDS:
            continue
        current = getattr(old, field)
        if value == current:
            continue
        undoing = f"{field} {note_value(value)} → {note_value(current)}"
        for note in held:
            if undoing in _note_parts(note):
                raise ValidationError(_stale_message(old, note, field), [])


#: The fields a correction note names without quoting them ("detailed_description
#: rewritten"; :func:`kexp.measure.corrections.correction_note`), and ``id``.
_NOTE_NAMES = frozenset({*model.BODY_FIELDS, "results", "samples", "id"})


def _note_parts(note: str) -> list[str]:
    """What a correction note says changed, one ``FIELD OLD → NEW`` a part."""
    match = _NOTE.match(note)
    what = match[2] if match else ""
    return [part.strip() for part in what.split(". Reason:", 1)[0].split("; ")]


def _stale_message(old: model.KernelExperiment, note: str, field: str) -> str:
    """The one line that refuses a write-back read before the correction ``note``."""
    match = _NOTE.match(note)
    date = match[1] if match else "an earlier day"
    said = ", ".join(_note_parts(note))
    said = said if len(said) <= 80 else said[:77] + "..."
    undo = (
        f"; to undo that correction of {field}, say why: kexp update {old.id[:SHOWN_LENGTH]} "
        f"--set {field}=VALUE --reason TEXT"
        if field
        else ""
    )
    return (
        f"{old.id} was corrected since you read it (the note of {date}: {said}): read it "
        f"again with get_experiment and apply your change to that{undo}"
    )


#: What a written-back score is read with: the fields this module may hand out with
#: another value than the file's (:func:`_handed_out`).
TRANSLATED = ("score", "score_ci", "measured_against")


def _written_back(old: model.KernelExperiment, changes: dict[str, Any]) -> dict[str, Any]:
    """``changes`` less what this module hands out of ``old`` unchanged (a record, or a
    ``top_experiments`` dict, written back): values equal to those handed out (or to the
    file's) change nothing. ``score``, ``score_ci`` and ``measured_against`` are left out
    together only when they match one whole view of ``old`` (the file's, or the
    predecessor's meaning, or the top dict's). An ``id`` other than ``old``'s, a derived
    key with another value, a key that is no field: a ``ValueError`` (a
    :class:`kexp.ValidationError`), nothing written."""
    shown = _handed_out(old)
    said = "parent" if measured_against_parent(old) else "reference"
    files = {**dataclasses.asdict(old), **model.KernelExperiment.to_dict(old, include_derived=True)}
    views = [
        files,
        {**files, "measured_against": said},
        {
            **dataclasses.asdict(shown),
            **model.KernelExperiment.to_dict(shown, include_derived=True),
        },
        _top_dict(old),
    ]
    given = {key: value for key, value in changes.items() if key in TRANSLATED}
    kept = {
        key: value
        for key, value in changes.items()
        if key not in TRANSLATED and not any(key in view and view[key] == value for view in views)
    }
    # The handed-out views speak of a score: without one, what is given is the file's.
    alike = views if "score" in given else views[:2]
    if not any(
        all(key in view and view[key] == value for key, value in given.items()) for view in alike
    ):
        kept.update(given)
    if "id" in kept:
        raise ValidationError(
            f"cannot update id to {kept['id']!r}: experiment {old.id}'s id never changes "
            "(create a new experiment instead)",
            [],
        )
    handed = {key for view in views for key in view} - set(model.ALL_FIELDS)
    wrong = sorted(key for key in kept if key in handed)
    if wrong:
        raise ValidationError(
            f"cannot update {', '.join(wrong)}: handed out, not a field (leave "
            f"{'it' if len(wrong) == 1 else 'them'} out, or give the value handed out: "
            + ", ".join(f"{key}={_value_of(old, shown, key)!r}" for key in wrong)
            + ")",
            [],
        )
    unknown = sorted(set(kept) - set(model.ALL_FIELDS))
    if unknown:
        raise ValidationError(
            f"cannot update {', '.join(unknown)}: not a field of experiment "
            f"{old.id[:SHOWN_LENGTH]}; fields are {', '.join(model.ALL_FIELDS)}",
            [],
        )
    return kept


def _value_of(old: model.KernelExperiment, shown: KernelExperiment, key: str) -> Any:
    """The value of a derived ``key`` this module hands out for ``old``."""
    top = _top_dict(old)
    if key in top:
        return top[key]
    return model.KernelExperiment.to_dict(shown, include_derived=True).get(key)


def _over_the_reference(
    old: model.KernelExperiment, changes: dict[str, Any]
) -> tuple[dict[str, Any], str]:
    """``changes`` to ``old`` with ``measured_against: reference`` where the predecessor's
    meaning of its score asks for it (see :func:`update_experiment`), and the warning
    that says so once they are recorded ('' for none)."""
    shown = _handed_out(old)
    if (
        "pid" in changes
        and "score" not in changes
        and measured_against_parent(old)
        and not measured_against_parent(shown)
    ):
        # A step given another parent (or none): the score it was handed out with, its
        # speedup over the original code, is what the old caller's record keeps.
        said = (
            f"kernel_exp_dataclass: experiment {old.id[:SHOWN_LENGTH]}'s score was a step "
            "over its parent's code; given another parent (or none), it keeps its speedup "
            f"over the operator's original code, {shown.score:g} (measured_against: "
            "reference); to make it a step over the new parent, pass score=... and "
            'measured_against="parent"'
        )
        kept = {
            **changes,
            "score": shown.score,
            "score_ci": shown.score_ci,
            "measured_against": "reference",
        }
        return kept, said
    if changes.get("pid") and not old.measured_against:
        # As create_experiment: the predecessor's scores are speedups over the
        # reference, so a parent given later does not make the score a step over it.
        return {**changes, "measured_against": "reference"}, ""
    score = changes.get("score", old.score)
    if score == old.score or not changes.get("pid", old.pid) or not measured_against_parent(old):
        return changes, ""
    said = (
        f"kernel_exp_dataclass: experiment {old.id[:SHOWN_LENGTH]}'s score was a step over "
        f"its parent's code; score {score} is recorded as the predecessor's scores are, a "
        "speedup over the operator's original code (measured_against: reference); to give "
        'a step over the parent, pass measured_against="parent" with it'
    )
    return {**changes, "measured_against": "reference"}, said


def _without_old_interval(
    old: model.KernelExperiment, changes: dict[str, Any], said: str
) -> tuple[dict[str, Any], str]:
    """``changes`` with ``old``'s ``score_ci`` dropped where a new ``score`` leaves it
    behind (as ``kexp update --set score=`` drops it): the interval of the old
    measurement, over what it was measured against, holds neither a score over
    something else nor one outside it; and ``said`` (the warning of the update) saying
    so, or a warning of its own."""
    score = changes.get("score", old.score)
    interval = old.score_ci
    if "score_ci" in changes or len(interval) != 2 or score == old.score:
        return changes, said
    against = SimpleNamespace(
        pid=changes.get("pid", old.pid),
        measured_against=changes.get("measured_against", old.measured_against),
    )
    low, high = interval
    same_basis = measured_against_parent(against) == measured_against_parent(old)
    if same_basis and isinstance(score, (int, float)) and low <= score <= high:
        return changes, said  # the old measurement still holds it
    dropped = f"score_ci [{low}, {high}], the interval of its old measurement, is dropped"
    if said:
        return {**changes, "score_ci": []}, f"{said}; its {dropped}"
    said = (
        f"kernel_exp_dataclass: experiment {old.id[:SHOWN_LENGTH]}'s {dropped}: it does "
        f"not hold the new score {score} (measure again for a new one: "
        f"{REMEASURE.say(id=old.id[:SHOWN_LENGTH])})"
    )
    return {**changes, "score_ci": []}, said


def _with_stale_figure(
    old: model.KernelExperiment, updated: model.KernelExperiment, said: str
) -> str:
    """``said`` (the warning of the update, '' for none) saying, too, that ``updated``'s
    ``change_summary`` still states ``old``'s score (the fields not given are left as
    they were: ``kexp update --set score=`` would restate it), and how to restate it."""
    # lazy: the module's import loads no more of kexp than its reads need
    from kexp.measure.corrections import stale_figure

    figure = stale_figure(old, updated)
    if figure is None:
        return said
    shown = old.id[:SHOWN_LENGTH]
    stale = (
        f"change_summary still states the old score ({figure}): restate it with "
        f"update_experiment({old.id!r}, change_summary=...) or "
        f"{CORRECT_FIELD.say(id=shown, field='change_summary')}"
    )
    if said:
        return f"{said}; its {stale}"
    return f"kernel_exp_dataclass: experiment {shown}'s score is now {updated.score}; its {stale}"


def _refuse_read_before_lineage(
    store: Store, old: model.KernelExperiment, given: dict[str, Any], kept: dict[str, Any]
) -> None:
    """Refuse (a ``ValueError``, one line, nothing written) a record of a step written
    back with the score it was handed out with before one of its ancestors changed:
    the step's speedup over the original code through ancestors since retired (status
    failed), flagged buggy, or corrected (their dated notes: ``score A → B``). Such a
    score is no new measurement of the caller's (it would record the old product over
    the reference), but a record read before the change: read it again."""
    if "score" not in kept or not measured_against_parent(old):
        return
    if not any(key != "score" and getattr(old, key, None) == value for key, value in given.items()):
        return  # a score given alone (or with other changes) is the caller's own
    score = kept["score"]
    if not isinstance(score, (int, float)) or isinstance(score, bool):
        return
    chain = _chain_to_the_reference(store, old)
    for at, ancestor in enumerate(chain[1:], start=1):
        what = _left_the_product(ancestor)
        for before in _scores_before(ancestor):
            if not what and before == ancestor.score:
                continue  # as it was: not what changed the score handed out
            product = math.prod(
                before if index == at else float(exp.score) for index, exp in enumerate(chain)
            )
            if math.isclose(product, score, rel_tol=1e-9):
                changed = what or f"its score corrected from {before:g} to {ancestor.score:g}"
                raise ValidationError(
                    f"{old.id} changed since you read it: the score you were handed, "
                    f"{score:g} over the original code, was its speedup through its "
                    f"ancestor {ancestor.id[:SHOWN_LENGTH]}, {changed} since: read it "
                    "again with get_experiment and apply your change to that",
                    [],
                )


def _chain_to_the_reference(store: Store, old: model.KernelExperiment) -> list[Any]:
    """``old`` and its ancestors, nearest first, as far as the nearest one measured
    against the reference (whatever their status: what was handed out before)."""
    chain: list[Any] = [old]
    for ancestor in store.ancestors(old.id):
        if not measured_against_parent(chain[-1]):
            break
        chain.append(ancestor)
    return chain


def _left_the_product(ancestor: Any) -> str:
    """Why ``ancestor``'s code no longer counts in the speedup of the steps on it (what
    became of it), or ''."""
    if ancestor.status == "failed":
        return "retired (status failed)"
    if ancestor.is_buggy:
        return "flagged buggy"
    if ancestor.status in ("new", "running"):
        return f"made pending (status {ancestor.status})"
    return ""


def _scores_before(exp: Any) -> list[float]:
    """``exp``'s score, and those its dated correction notes say it had before."""
    # lazy: only where a step's record is written back with another score
    from kexp.measure.corrections import note_value

    scores = [float(exp.score)]
    now = f" → {note_value(exp.score)}"
    for line in exp.detailed_description.splitlines():
        for part in _note_parts(line.strip()) if _NOTE.match(line.strip()) else []:
            if part.startswith("score ") and part.endswith(now):
                with contextlib.suppress(ValueError):
                    scores.append(float(part[len("score ") : -len(now)]))
    return scores


def delete_experiment(exp_id: str) -> None:
    """Delete the experiment with this id; ``KeyError`` when there is none.

    Refused (:class:`kexp.KexpError`, nothing deleted) while other experiments name it
    as their ``pid`` or in ``combines``.
    """
    _store_holding(exp_id).delete_experiment(exp_id)


def test_insert_example() -> KernelExperiment:
    """Insert a sample experiment (the predecessor's self-test); returns it as stored."""
    sample = KernelExperiment(
        score=1.0,
        raw_result="Sample experiment: nothing was measured.",
        dtype_sig="fp16",
        env="sample environment",
        is_buggy=False,
        error_message="",
        change_summary="Sample experiment - inserted by test_insert_example",
        detailed_description=(
            "A sample record inserted by kernel_exp_dataclass.test_insert_example(); "
            "delete it with delete_experiment(id)."
        ),
        code_change="",
        base_commit=_sample_base_commit(),
        operator_sig="sample.cu: sample_kernel",
        profiling_info="Not profiled.",
        status="done",
    )
    return _handed_out(_create(sample, stacklevel=3))


def _sample_base_commit() -> str:
    """An empty one inside a git repository (kexp fills in ``HEAD``), else
    :data:`SAMPLE_BASE_COMMIT`."""
    # lazy: not every command that imports this module needs kexp.gitops.git
    from kexp.gitops.git import in_work_tree

    code = os.environ.get("KEXP_CODE_REPO") or os.environ.get("KEXP_ROOT") or "."
    inside = in_work_tree(Path(code).expanduser())
    return "" if inside else SAMPLE_BASE_COMMIT


def _id_of(exp: model.KernelExperiment) -> str:
    return exp.id


def _over_the_original_code(exp: model.KernelExperiment) -> tuple[bool, float]:
    """How :func:`top_experiments` ranks ``exp``: whether its speedup over the original
    code is known, then that speedup (its score, when it cannot be known)."""
    if not measured_against_parent(exp):
        return True, float(exp.score)
    cumulative = exp.cumulative_score
    return (False, float(exp.score)) if cumulative is None else (True, cumulative)


def _top_dict(exp: model.KernelExperiment) -> dict[str, Any]:
    """The predecessor's ten keys (``score`` in its meaning, :func:`_handed_out`), then
    kexp's: ``step_score`` is the score the file holds, over what ``measured_against``
    says (as kexp reads it: a record without a pid, or without a word, is over the
    reference); ``suspect``, why kexp finds its measurement too good (or too small) to
    be true, as ``kexp top`` flags it (empty when believable)."""
    shown = _handed_out(exp)
    data = {key: getattr(shown, key) for key in TOP_KEYS}
    # lazy: only top_experiments judges suspicion
    from kexp.format.suspect import suspect_reasons

    data.update((key, getattr(exp, key)) for key in EXTRA_TOP_KEYS[:5])
    data["step_score"] = exp.score
    data["cumulative_score"] = exp.cumulative_score
    data["measured_against"] = "parent" if measured_against_parent(exp) else "reference"
    data["suspect"] = suspect_reasons(exp, exp.settings)
    return data


def _existing_store() -> Store | None:
    """The default store, or None when there is none yet (the first time, warning of a
    predecessor's database in the working directory that it does not hold)."""
    # lazy: not every command that imports this module needs kexp.storage.location,
    # kexp.storage.store
    from kexp.storage.location import find_root
    from kexp.storage.store import Store

    try:
        store: Store | None = Store(find_root())
    except StoreNotFoundError:
        store = None
    if not _checked_for_predecessor_database:
        _warn_of_predecessor_database(store)
    return store


#: Whether this process has looked for the predecessor's database (once is enough).
_checked_for_predecessor_database = False


def _warn_of_predecessor_database(store: Store | None) -> None:
    """Warn, once per process, when the working directory holds the predecessor's
    database (:data:`PREDECESSOR_DB`) with records the store does not hold: this module
    reads and writes the kexp store only, and ``kexp import`` brings them in."""
    global _checked_for_predecessor_database
    _checked_for_predecessor_database = True
    database = PREDECESSOR_DB.resolve()
    if not database.is_file():
        return
    # lazy: only where a predecessor's database lies about
    from kexp.core.settings import DEFAULT_SETTINGS
    from kexp.format.rules import id_from_name
    from kexp.output.legacy import assign_ids, read_legacy_database

    settings = DEFAULT_SETTINGS if store is None else store.settings
    held = set() if store is None else {id_from_name(path) for path in store.paths()}
    try:
        database_ids = assign_ids(read_legacy_database(database, settings.max_import_bytes))
    except (KexpError, OSError):  # said all the same: kexp import says what is wrong
        records, them = "it cannot be read as one", "it"
    else:
        missing = len(set(database_ids.values()) - held)
        if not missing:
            return
        records, them = f"its {missing} record(s) missing from the store", "them"
    where = (
        f"there is no kexp store yet: run 'kexp init', then 'kexp import {database}'"
        if store is None
        else f"bring {them} into {store.experiments_dir} with 'kexp import {database}'"
    )
    warnings.warn(
        f"kernel_exp_dataclass: {database} is the predecessor's database, which kexp does "
        f"not read ({records}); {where}",
        KexpWarning,
        stacklevel=4,
    )


#: Whether this process has looked for experiments fetched branches hold that its reads
#: of the working tree do not see (once is enough).
_checked_for_unread = False


def _warn_of_unread(store: Store, call: str) -> None:
    """Warn, once per process, when fetched branches hold experiment files this
    checkout has not merged (a teammate's ``origin/kexp/alice``): this module reads the
    working tree alone, as the predecessor read its one file, so its answer (``[]`` on a
    fresh clone) lacks them; the line ``kexp context`` prints
    (:func:`kexp.storage.unread.unread_fetched`: two git processes when no branch is
    fetched)."""
    global _checked_for_unread
    if _checked_for_unread:
        return
    _checked_for_unread = True
    # lazy: only the first read of a process asks git
    from kexp.storage.unread import unread_fetched

    unread = unread_fetched(store)
    if unread is None:
        return
    warnings.warn(
        f"kernel_exp_dataclass: {call} read this checkout's files alone; {unread} "
        f"(from Python: kexp.Store({str(store.root)!r}, all_refs=True))",
        KexpWarning,
        stacklevel=3,
    )


def _warn_of_elsewhere(store: Store, exp_id: str) -> None:
    """Warn when a branch holds the experiment ``exp_id`` the working tree lacks (a
    teammate's, fetched), saying how to bring it in: the answer ``None`` is this
    checkout's, not the team's (:func:`kexp.storage.whereabouts.elsewhere`, asked only
    of an id not found)."""
    # lazy: only where an id is not found
    from kexp.storage.whereabouts import elsewhere

    try:
        found = elsewhere(store, exp_id)
    except KexpError:
        return
    if found is not None:
        warnings.warn(
            f"kernel_exp_dataclass: get_experiment({exp_id!r}) is None in this checkout's "
            f"files: experiment {exp_id} is {found}",
            KexpWarning,
            stacklevel=3,
        )


def _store_holding(exp_id: str) -> Store:
    """The store, if ``exp_id`` is a full id and there is one (else a ``KeyError``)."""
    store = _existing_store() if is_valid_id(exp_id) else None
    if store is None:
        raise _not_found(exp_id)
    return store


def _not_found(exp_id: object) -> ExperimentNotFoundError:
    return ExperimentNotFoundError(
        f"no experiment with id {exp_id!r}: kernel_exp_dataclass takes full ids (16 "
        f"lowercase hex, as list_experiments() gives them); kexp itself also takes a "
        f"unique prefix ({SHOWN_LENGTH} characters)"
    )


def _create(exp: model.KernelExperiment, *, stacklevel: int) -> model.KernelExperiment:
    """Create ``exp`` in the default store, making the store first if there is none."""
    store = _existing_store()
    if store is not None:
        return store.create_experiment(exp)
    return _create_in_new_store(exp, stacklevel + 1)


def _create_in_new_store(exp: model.KernelExperiment, stacklevel: int) -> model.KernelExperiment:
    """The first write: make a store in the working directory (or ``$KEXP_ROOT``) and
    create ``exp`` in it, then say where. A refused create leaves no store behind."""
    # lazy: not every command that imports this module needs kexp.storage.location,
    # kexp.storage.store
    from kexp.storage.location import CACHE_DIR, init_store
    from kexp.storage.store import Store

    root = Path(os.environ.get("KEXP_ROOT") or ".").expanduser().resolve()
    experiments, cache, ignore = root / DB_PATH, root / CACHE_DIR, root / ".gitignore"
    made = {path: not path.exists() for path in (experiments, cache)}
    ignored = ignore.read_bytes() if ignore.exists() else None
    init_store(root)
    try:
        stored = Store(root).create_experiment(exp)
    except BaseException:
        _remove_new_store(experiments, cache, ignore, made, ignored)
        raise
    warnings.warn(
        f"kernel_exp_dataclass: there was no kexp store, so one was made: {experiments} "
        "(one Markdown file per experiment; commit it to share them, or set KEXP_ROOT "
        "to use another store)",
        KexpWarning,
        stacklevel=stacklevel,
    )
    return stored


def _remove_new_store(
    experiments: Path, cache: Path, ignore: Path, made: dict[Path, bool], ignored: bytes | None
) -> None:
    """Undo :func:`kexp.init_store` after a refused first create, unless another
    process has written an experiment into the new store meanwhile."""
    if not made[experiments]:
        return
    (experiments / "README.md").unlink(missing_ok=True)
    try:
        experiments.rmdir()
    except OSError:  # not empty: someone else's store now; put its README back
        # lazy: not every command that imports this module needs kexp.storage.location
        from kexp.storage.location import init_store

        init_store(experiments.parent)
        return
    if made[cache]:
        shutil.rmtree(cache, ignore_errors=True)
    if ignored is None:
        with contextlib.suppress(FileNotFoundError):
            ignore.unlink()
    else:
        ignore.write_bytes(ignored)


def _main() -> int:
    """``python -m kernel_exp_dataclass``: insert the sample, print its id."""
    try:
        sample = test_insert_example()
    except KexpError as exc:
        print(f"kernel_exp_dataclass: error: {exc}", file=sys.stderr)
        return 1
    print(f"Inserted sample experiment with id: {sample.id}")
    return 0


if __name__ == "__main__":
    raise SystemExit(_main())
