"""Tried before: the experiments whose code change repeats, or nearly repeats, another's
(the warning of a create, :func:`warn_tried_before`; a context's what not to repeat,
:func:`repeats_in`), asked of :mod:`kexp.storage.retrieval`'s index; a change recorded
without a code change, by its summary, kernel, dtype, env and parent
(:func:`warn_same_summary`)."""

from __future__ import annotations

import warnings
from collections.abc import Callable, Iterable, Sequence
from typing import TYPE_CHECKING

from kexp.core.advice import REMEASURE, SET_BUGGY, SET_STATUS
from kexp.core.errors import (
    ExperimentExistsError,
    KexpError,
    NearDuplicateWarning,
    RemeasureWarning,
    RepeatedChangeWarning,
    RevertWarning,
)
from kexp.core.model import attach
from kexp.core.outcome import is_control
from kexp.format.notes import retired_reason
from kexp.storage.dedupe import (
    Repeat,
    adds_alike,
    code_shingles,
    key_of_normalized,
    lines_key,
    normalize_code_change,
    remeasure_message,
    repeat_message,
    reverts,
    shingles_of_normalized,
    signature,
    summary_key,
    summary_message,
    unchanged_key,
)
from kexp.storage.retrieval import Index, Search, asked, light_search, path_order, searching
from kexp.storage.whereabouts import bring_in

if TYPE_CHECKING:
    from kexp.core.campaign import Derivation
    from kexp.core.model import KernelExperiment
    from kexp.storage.rows import Row
    from kexp.storage.view import StoreView


#: At most this many near-duplicates are read again and reported as tried before (every
#: identical change is).
MAX_REPORTED = 10


def tried_before(
    store: StoreView, code_change: str, *, exclude: Iterable[str] = ()
) -> list[Repeat]:
    """The experiments whose code change is ``code_change`` (identical once normalised,
    similarity 1.0: every one) or a near-duplicate of it (shingle similarity at least
    ``settings.near_duplicate_similarity``: the :data:`MAX_REPORTED` most similar):
    identical ones first, oldest first, then the most similar. Each is read again from
    its file before it is reported; ids in ``exclude`` are left out. Fast: the index's
    quick check (see the module documentation)."""
    return _tried_before(store, code_change, exclude, near=True)


def find_repeats(
    store: StoreView, code_change: str, *, exclude: Iterable[str] = ()
) -> list[Repeat]:
    """The experiments whose code change is ``code_change`` once normalised (its
    :func:`kexp.storage.dedupe.code_key`), oldest first: the identical ones of
    :func:`tried_before`, from the same index; ids in ``exclude`` left out."""
    return _tried_before(store, code_change, exclude, near=False)


def _tried_before(
    store: StoreView, code_change: str, exclude: Iterable[str], *, near: bool
) -> list[Repeat]:
    """:func:`tried_before` (``near``), or its identical changes alone."""
    return asked(store, lambda: _repeats(store, code_change, exclude, near=near))


def _repeats(
    store: StoreView, code_change: str, exclude: Iterable[str], *, near: bool
) -> list[Repeat]:
    if store.is_working_tree and store.source.places is None and store.source.cacheable:
        # A write's check: the working tree as a light refresh finds it (what changed
        # since the last query, not a stat of every file).
        with light_search(store) as index:
            return repeats_in(index, store, code_change, exclude, near=near)
    with searching(store, texts=False) as search:
        return repeats_in(search, store, code_change, exclude, near=near)


def repeats_in(
    search: Index,
    store: StoreView,
    code_change: str,
    exclude: Iterable[str] = (),
    *,
    near: bool = True,
) -> list[Repeat]:
    """:func:`tried_before` (``near``: the near-duplicates too) asked of an index
    already in step with the store (:func:`searching`)."""
    wanted = normalize_code_change(code_change)
    key = key_of_normalized(wanted)
    if key is None:
        return []  # a placeholder: no key, no shingles
    shingles = shingles_of_normalized(wanted) if near else frozenset()
    lines = lines_key(code_change, wanted) if near else None
    threshold = store.settings.near_duplicate_similarity
    skip = set(exclude)
    same = {row.path for row in search.same_change(key)}
    candidates: dict[str, tuple[Row, float]] = {
        row.path: (row, 1.0) for row in search.same_change(key)
    }
    for row, similarity in search.near_duplicates(shingles, threshold):
        candidates.setdefault(row.path, (row, similarity))
    for row in search.same_lines(lines) if lines else ():  # below the threshold
        candidates.setdefault(row.path, (row, 0.0))
    ordered = sorted(candidates, key=lambda p: (-candidates[p][1], path_order(p)))
    # Read again: every identical change, and enough of the most similar others.
    spare = MAX_REPORTED + len(skip) + 5
    near_ones = [path for path in ordered if path not in same][:spare]
    reread = [candidates[path][0] for path in ordered if path in same or path in near_ones]
    found: list[tuple[KernelExperiment, Row, float, bool, bool]] = []
    reported_near = 0
    checked_files = store.source.check_found(reread, store.settings)
    for row, checked in zip(reread, checked_files, strict=True):
        if reported_near >= MAX_REPORTED and row.path not in same:
            continue  # enough near-duplicates: only the identical ones are reported
        if not checked.ok:
            continue
        exp = checked.experiment()
        if exp.id in skip:
            continue
        attach(exp, store.settings, path=store.experiments_dir / row.path,
               where=row.sighting())  # fmt: skip
        theirs = normalize_code_change(exp.code_change)
        if theirs == wanted:
            found.append((exp, row, 1.0, True, False))
        elif near and reported_near < MAX_REPORTED:
            similarity = _similarity(exp.code_change, shingles)
            alike = similarity >= threshold and adds_alike(theirs, wanted)
            if alike or (lines is not None and lines_key(exp.code_change, theirs) == lines):
                found.append((exp, row, similarity, False, not alike))
                reported_near += 1
    # What is derived of each, as every query derives it: from the whole store (a light
    # read of a write's check derives it only when one depends on others).
    derivation = (
        search.derived([exp for exp, *_ in found])
        if isinstance(search, Search)
        else _derivation_for(store, [exp for exp, *_ in found])
    )
    repeats = []
    for exp, row, similarity, identical, lines_alike in found:
        attach(exp, derived=derivation.of(exp))
        repeats.append(_repeat(exp, row, similarity, identical, lines_alike))
    identical_first = [r for r in repeats if r.identical]
    created = {exp.id: exp.created_at for exp, *_ in found}
    identical_first.sort(key=lambda r: (created[r.id], r.id))
    return identical_first + [r for r in repeats if not r.identical]


def _repeat(
    exp: KernelExperiment, row: Row, similarity: float, identical: bool, lines_alike: bool
) -> Repeat:
    """The :class:`Repeat` of ``exp`` (read from ``row``'s file, what is derived of it
    attached)."""
    where = row.where
    return Repeat(
        exp.id,
        float(exp.score),
        exp.outcome,
        exp.change_summary,
        exp.path,
        base_commit=exp.base_commit,
        env=exp.env,
        similarity=round(similarity, 4),
        identical=identical,
        lines_alike=lines_alike,
        ref="" if where is None or where.ref == "local" else where.ref,
        samples=exp.samples,
        operator_sig=signature(exp.operator_sig),
        dtype_sig=signature(exp.dtype_sig),
        pid=signature(exp.pid),
        shown_score=exp.derived.shown_score,
        retired=retired_reason(exp.detailed_description),
    )


def same_summary(store: StoreView, exp: KernelExperiment, rows: Sequence[Row]) -> list[Repeat]:
    """The experiments among ``rows`` (the store as it was before ``exp`` was recorded)
    that ``exp``, recorded without a code change (none, or a placeholder), tries again:
    of its kernel, dtype, env and parent, whose ``change_summary`` says the same change
    (:func:`kexp.storage.dedupe.summary_key`: case, spaces and the result after `` - ``
    aside), controls left out; oldest first. None for a change given, a control, or a
    summary that says no change."""
    if is_control(exp) or key_of_normalized(normalize_code_change(exp.code_change)):
        return []
    wanted = summary_key(exp.change_summary)
    if not wanted:
        return []
    kernel = tuple(signature(v) for v in (exp.operator_sig, exp.dtype_sig, exp.env, exp.pid))
    alike = [
        row
        for row in rows
        if row.id != exp.id
        and not is_control(row)
        and tuple(signature(v) for v in (row.operator_sig, row.dtype_sig, row.env, row.pid))
        == kernel
        and summary_key(row.change_summary) == wanted
    ]
    found: list[tuple[KernelExperiment, Row]] = []
    for row, checked in zip(alike, store.source.check_found(alike, store.settings), strict=True):
        if checked.ok:
            earlier = checked.experiment()
            attach(earlier, store.settings, path=store.experiments_dir / row.path,
                   where=row.sighting())  # fmt: skip
            found.append((earlier, row))
    if not found:
        return []
    found.sort(key=lambda pair: (pair[0].created_at, pair[0].id))
    derivation = _derivation_for(store, [earlier for earlier, _ in found])
    repeats = []
    for earlier, row in found:
        attach(earlier, derived=derivation.of(earlier))
        repeats.append(_repeat(earlier, row, 1.0, True, False))
    return repeats


def warn_same_summary(
    store: StoreView, exp: KernelExperiment, rows: Sequence[Row], *, stacklevel: int = 2
) -> list[Repeat]:
    """Warn (:class:`~kexp.core.errors.RepeatedChangeWarning`, the record written all the
    same) when ``exp`` tries a change again by its summary (:func:`same_summary`), naming
    the earlier experiments as a repeated code change names them; returns them.
    ``stacklevel`` is relative to the caller of this function."""
    repeats = same_summary(store, exp, rows)
    if repeats:
        warnings.warn(summary_message(repeats), RepeatedChangeWarning, stacklevel=stacklevel + 1)
    return repeats


def _copied(earlier: str, new: str) -> bool:
    """Whether the one round of ``new`` (a ``## Samples`` section) is a round of
    ``earlier``, sample for sample and in the same order (the same files given again),
    each side holding at least :data:`COPY_SAMPLES` samples."""
    from kexp.format.samples import COPY_SAMPLES, parse_samples

    if not earlier:
        return False
    try:
        rounds, added = parse_samples(earlier), parse_samples(new)
    except ValueError:
        return False
    if len(added) != 1:
        return False
    timings = added[0].timings
    if any(len(side) < COPY_SAMPLES for sides in timings.values() for side in sides):
        return False
    return any(earlier_round.timings == timings for earlier_round in rounds)


def _derivation_for(store: StoreView, experiments: Sequence[KernelExperiment]) -> Derivation:
    """What is derived of ``experiments`` (:func:`kexp.core.campaign.derive`): over the whole
    store (one read) when one of them depends on other experiments, else over them (and
    the store's controls, when one is a change the control of its env may judge)."""
    from kexp.core.campaign import derive, may_meet_control, stands_alone

    if all(stands_alone(exp) for exp in experiments):
        alone = derive(experiments, store.settings)
        if not any(may_meet_control(alone.of(exp)) for exp in experiments):
            return alone  # no change that the control of its env may judge
        return derive([*experiments, *store.control_rows()], store.settings)
    return store.derivation()


def _similarity(code_change: str, shingles: frozenset[int]) -> float:
    first = code_shingles(code_change)
    union = len(first | shingles)
    return len(first & shingles) / union if union else 0.0


def warn_tried_before(
    store: StoreView,
    code_change: str,
    *,
    exclude: Iterable[str] = (),
    stacklevel: int = 2,
    base_commit: str = "",
    env: str = "",
    samples: str = "",
    record: KernelExperiment | None = None,
) -> list[Repeat]:
    """Warn when ``code_change`` was tried before (:func:`tried_before`): a
    :class:`~kexp.core.errors.RemeasureWarning` when an identical one that measured a
    score (a round can be added to it) also has this ``base_commit`` and ``env``
    (given) and the kernel, dtype and parent of ``record`` (the new experiment, whose id
    the warning names as the record to remove), else a
    :class:`~kexp.core.errors.RepeatedChangeWarning` naming the identical ones, else a
    :class:`~kexp.core.errors.NearDuplicateWarning` naming the near-duplicates. Returns them.
    ``stacklevel`` is relative to the caller of this function. Raises
    :class:`~kexp.core.errors.ExperimentExistsError` when an identical one of the same
    env, kernel, dtype and parent holds the new one's ``samples`` sample for sample, on
    any base commit (the same record made again: a retry, or the same files given again
    after a commit)."""
    repeats = tried_before(store, code_change, exclude=exclude)
    kernel = (
        ("", "", "")
        if record is None
        else tuple(signature(v) for v in (record.operator_sig, record.dtype_sig, record.pid))
    )
    same_base = _same_base(store, base_commit)
    alike = [
        r
        for r in repeats
        if r.identical
        and r.measured
        and r.env == env
        and (record is None or (r.operator_sig, r.dtype_sig, r.pid) == kernel)
    ]
    same = [r for r in alike if base_commit and same_base(r.base_commit)]
    # The same timings, sample for sample, on any base commit: no new measurement.
    copies = [r for r in [*same, *alike] if samples and _copied(r.samples, samples)]
    if copies:
        copy = copies[0]
        moved = "" if copy in same else copy.base_commit
        what = "code_change, env, dtype, parent" + ("" if moved else ", base_commit")
        raise _made_again(copy.id, copy.ref, what, other_base=moved)
    if same:
        first = bring_in(store, same[-1].id) if same[-1].ref else None
        recorded = record.id if record is not None else ""
        warnings.warn(
            remeasure_message(same[-1], first or "", recorded, base_commit),
            RemeasureWarning,
            stacklevel=stacklevel + 1,
        )
        return repeats
    said = _reverted_parent(store, record, code_change)
    if said is not None:
        # A revert resembles the code before its parent: said instead of that likeness.
        warnings.warn(said, RevertWarning, stacklevel=stacklevel + 1)
    told = [r for r in repeats if r.identical] if said is not None else repeats
    if told:
        category = RepeatedChangeWarning if any(r.identical for r in told) else NearDuplicateWarning
        warnings.warn(repeat_message(told), category, stacklevel=stacklevel + 1)
    return repeats


def _reverted_parent(
    store: StoreView, record: KernelExperiment | None, code_change: str
) -> str | None:
    """What a new experiment (``record``) whose ``code_change`` undoes its parent's is
    told instead of the near-duplicates it resembles (the code before the parent, an
    earlier success as like as not); None when it has no parent, or does not undo it."""
    if record is None or not record.pid:
        return None
    try:
        parent = store.get_experiment(record.pid)
    except KexpError:
        return None
    if not parent.code_change or not reverts(code_change, parent.code_change):
        return None
    back = (
        f"back to the code of {parent.pid}, its grandparent"
        if parent.pid
        else ("back to the code before it")
    )
    said = (
        f"this code_change reverts {parent.id}, its parent ({parent.outcome}: "
        f"{parent.change_summary!r}): it undoes that diff, {back}"
    )
    if record.score > 1 and parent.outcome in ("regression", "marginal", "interference"):
        # Faster than the step it undoes, as a revert of a failed step is: no new gain.
        said += f" (its speedup is over the step it undoes, not over {parent.pid or 'that code'})"
    return said


def _same_base(store: StoreView, base_commit: str) -> Callable[[str], bool]:
    """Whether a base commit is ``base_commit`` as a measurement goes: equal, or the same
    code outside the store's folder (a ``kexp sync`` between them committed only
    experiments: :func:`kexp.gitops.provenance.same_code`); git asked once per commit."""
    answers: dict[str, bool] = {base_commit: True} if base_commit else {}

    def same(theirs: str) -> bool:
        if theirs not in answers:
            from kexp.gitops.provenance import same_code

            answers[theirs] = (
                bool(base_commit)
                and bool(theirs)
                and same_code(store.code_repo, store.experiments_dir, theirs, base_commit)
            )
        return answers[theirs]

    return same


def _made_again(
    exp_id: str,
    ref: str,
    what: str,
    verdict: KernelExperiment | None = None,
    *,
    other_base: str = "",
) -> ExperimentExistsError:
    """The refusal of a record made again: experiment ``exp_id`` (found on ``ref``, ""
    in the working tree) holds the same ``what`` and timings. When the new record
    (``verdict``) says another status or bug than the one that holds them (a run
    recorded pending, then its verdict), the advice records that on it. ``other_base``:
    the base commit ``exp_id`` was recorded on, when it is not the new record's (the
    same timing files given again after a commit: they timed that code, not this)."""
    where = f" (on {ref})" if ref else ""
    advice = f"to measure it again, {REMEASURE.say(id=exp_id)} with new timings"
    again = "the same record made again?"
    if other_base:
        again = (
            f"recorded on base commit {other_base[:12]}: timing files given again after a "
            "commit timed the code of then, not the new commit's"
        )
        advice += "; to record the new commit's code, time it and give those timings"
    if verdict is not None:
        again = "the same run, with its verdict?"
        status = verdict.status or "done"
        if verdict.is_buggy:
            said = SET_BUGGY.say(id=exp_id, status=status)
        else:
            said = SET_STATUS.say(id=exp_id, status=status, buggy="false")
        advice = f"to record this one's status and verdict on it, {said}"
    return ExperimentExistsError(
        f"not recorded: experiment {exp_id}{where} holds this measurement already (the "
        f"same {what} and timings, sample for sample: {again}); "
        f"nothing was written; {advice}"
    )


def refuse_copy(store: StoreView, exp: KernelExperiment) -> None:
    """Raise :class:`~kexp.core.errors.ExperimentExistsError` when ``exp``, without a
    code change (none, or a placeholder), is the same record made again: an experiment
    without one, of the same kernel, dtype, env and parent, holds its ``samples`` sample
    for sample (a retry, on the same base_commit or one of the same code,
    :func:`_same_base`, named first; or the same files given again after a commit, which
    timed the code of then: no new measurement; a change's own is
    :func:`warn_tried_before`'s).
    The candidates are the index's, kept under those fields
    (:func:`kexp.storage.dedupe.unchanged_key`): only they are read again."""
    if not exp.samples or key_of_normalized(normalize_code_change(exp.code_change)):
        return
    key = unchanged_key(exp.operator_sig, exp.dtype_sig, exp.env, exp.pid)
    copy = asked(store, lambda: _copy_of(store, exp, key))
    if copy is not None:
        exp_id, ref, theirs, same = copy
        verdict = (exp.status or "done", bool(exp.is_buggy))
        other = verdict != (theirs.status or "done", bool(theirs.is_buggy))
        moved = "" if same else theirs.base_commit
        raise _made_again(
            exp_id,
            ref,
            f"operator, dtype, env, parent{'' if moved else ', base_commit'} (no code change)",
            exp if other else None,
            other_base=moved,
        )


def _copy_of(
    store: StoreView, exp: KernelExperiment, key: str
) -> tuple[str, str, KernelExperiment, bool] | None:
    """(id, ref, the experiment, whether it is on the same base commit or one of the same
    code: :func:`_same_base`) :func:`refuse_copy` refuses ``exp`` for, or None: the same
    samples, sample for sample, are no new measurement on any base commit (one on the
    same base, or the same code, is named first)."""
    if store.is_working_tree and store.source.places is None and store.source.cacheable:
        with light_search(store) as index:
            rows = index.same_change(key)
    else:
        with searching(store, texts=False) as search:
            rows = search.same_change(key)
    # The same base commit first; then, of the copies, one of the same code (git asked
    # only for those).
    rows = sorted(
        (r for r in rows if r.id != exp.id), key=lambda r: r.base_commit != exp.base_commit
    )
    same_base = _same_base(store, exp.base_commit)
    other: tuple[str, str, KernelExperiment, bool] | None = None
    for row, checked in zip(rows, store.source.check_found(rows, store.settings), strict=True):
        theirs = checked.experiment() if checked.ok else None
        if theirs is None or not _copied(theirs.samples, exp.samples):
            continue
        where = row.where
        ref = "" if where is None or where.ref == "local" else where.ref
        if same_base(theirs.base_commit):
            return row.id, ref, theirs, True
        other = other or (row.id, ref, theirs, False)
    return other
