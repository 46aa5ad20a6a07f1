"""Score from measurements: timings in, ``score``, ``results`` and ``raw_result`` out.

Timings come as baseline and candidate times per configuration, from two files in any
format :mod:`kexp.measure.timings` reads (plain JSON ``{config: microseconds}`` or
``{config: [samples]}`` such as ``triton.testing.do_bench(..., return_mode="all")``
lists, pytest-benchmark, ``torch.utils.benchmark`` as JSON, KernelBench, ``nsys
stats`` kernel summaries, ``config,time`` CSV), from ``{config: times}`` dicts, or
from one CSV table with ``config,baseline,candidate`` columns: read and paired by
:mod:`kexp.measure.measurements`.

With repeated timings the file keeps per configuration the median of each side, the
sample counts and interquartile ranges (``results``), the score's 95 % interval
(``score_ci``, see :mod:`kexp.core.noise`) and the raw samples in a ``## Samples`` section
(:mod:`kexp.format.samples`; ``keep_samples=False`` leaves them out, and with them the chance
to pool a later round: :func:`remeasure`). Single numbers are recorded as before. A
``stat`` other than the median reduces samples to one number, as before (no interval).
Summaries a tool wrote without its raw samples (KernelBench, nsys, pytest-benchmark
without ``--benchmark-save-data``) are recorded as single numbers, with the runs they
sum up as ``baseline_n``/``candidate_n`` and a line of ``raw_result`` saying there
are no raw samples, without an interval, with a warning (:class:`TimingsWarning`).
Every time is stored in microseconds (``unit: us``).

:func:`kexp.measure.scoring.score_measurements` computes each
configuration's speedup (baseline / candidate), the ``score`` as their geometric mean (4
decimals), the ``results`` list, and the ``raw_result`` text in the skill's format::

    Iteration 3 Results - SUCCESS:

    **Overall**: 1.0190x speedup = +1.90% IMPROVEMENT

    **Per-kernel breakdown**:
    - cache_b8_s1024: 1.0170x (+1.70%)  12.30 -> 12.09 µs

:func:`record_iteration` does all of it and records the experiment in one call;
:func:`remeasure` adds a round of measurement to a recorded experiment.
"""

from __future__ import annotations

import dataclasses
import warnings
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, NamedTuple

from kexp.core.advice import (
    CORRECT_SCORE,
    RECORD_AGAIN,
    RECORD_AGAIN_ROOT,
    SCORE_OR_TIMINGS,
    SET_MEASURED,
    SET_PARENT,
)
from kexp.core.campaign import control_for, env_controls
from kexp.core.errors import (
    CodeRepoWarning,
    ControlWarning,
    KexpError,
    KexpWarning,
    MeasuredAgainstWarning,
    MeasurementError,
    NoMatchWarning,
    RootWarning,
    RoundsWarning,
    SummaryWarning,
    SuspectMeasurementWarning,
    TimingsWarning,
    ValidationError,
)
from kexp.core.model import PROTOCOL_KEYS, KernelExperiment, attach
from kexp.core.outcome import (
    PENDING_STATUSES,
    TIMED_OUT,
    control_bias,
    describe_control,
    is_control,
    measured_nothing,
    no_measurement,
)
from kexp.core.settings import DEFAULT_SETTINGS, Settings
from kexp.format.rules import missing_measured_against
from kexp.format.suspect import SUSPECT_LABEL, UNIT_TO_US, suspect_reasons
from kexp.measure.chained import chained_root, warn_if_chained
from kexp.measure.checks import (
    ONE_SIDE_A_RUN,
    base_commit_problem,
    check_assumed_unit,
    check_round_scale,
    done_without_measure,
    drift_notes,
    few_samples_hint,
    implausible_control,
    modes_hint,
    one_run_control_note,
    protocol_overrides,
    replaced_round_held,
    resolution_hint,
    rounds_disagree,
    rounds_modes_hint,
    samples_too_large,
    summary_contradiction,
    throttled_rounds,
    unit_hint,
)
from kexp.measure.controlnote import control_notes
from kexp.measure.envs import env_warnings, parents_env
from kexp.measure.measurements import (
    KIND_FIELDS,
    Measurement,
    gather,
    load_measurements,
    measurement_of,
    pair_samples,
    pair_timings,
    read_table,
    same_kind,
    sides_of,
)
from kexp.measure.scoring import parent_judge, score_measurements
from kexp.measure.stepbase import StepBaseline, step_baseline
from kexp.measure.timings import IN_PYTHON, profiling_info, sniff
from kexp.measure.timings.common import STATS, Timings, tidy
from kexp.measure.timings.pytest_benchmark import NAME as PYTEST_BENCHMARK
from kexp.measure.timings.torch_benchmark import NAME as TORCH
from kexp.measure.timings.torch_benchmark import TIMER as TORCH_TIMER
from kexp.storage.location import find_root
from kexp.storage.store import Store

if TYPE_CHECKING:
    from kexp.format.samples import Round
    from kexp.storage.rows import Row
    from kexp.storage.sources import Found

__all__ = [
    "STATS",
    "Measurement",
    "MeasurementError",
    "SuspectMeasurementWarning",
    "TimingsWarning",
    "earlier_rounds",
    "load_measurements",
    "measurement_of",
    "pair_samples",
    "pair_timings",
    "parse_protocol",
    "read_table",
    "record_iteration",
    "remeasure",
    "warn_if_suspect",
    "with_timings",
]


# --- recording -------------------------------------------------------------------------


def _stand_in(data: Mapping[str, Any]) -> KernelExperiment:
    """An experiment of the fields a campaign judges by (pid, measured_against, status,
    is_buggy, tags, combines) of ``data``, fields to be recorded: what
    :func:`parent_judge` judges before the score is known."""
    names = ("pid", "measured_against", "is_buggy", "tags", "combines")
    given = {name: data[name] for name in names if data.get(name)}
    return KernelExperiment(status=data.get("status") or "done", **given)


def _kept_round(
    timings: Mapping[str, tuple[Sequence[float], Sequence[float]]],
) -> Round:
    """A round of ``timings`` with each sample as :func:`kexp.format.samples.kept_sample` keeps
    it."""
    # lazy: not every command that imports this module needs kexp.format.samples
    from kexp.format.samples import Round, kept_sample

    return Round(
        {
            config: (tuple(map(kept_sample, base)), tuple(map(kept_sample, cand)))
            for config, (base, cand) in timings.items()
        }
    )


_PROTOCOL_BOOLEANS = {"true": True, "yes": True, "1": True, "false": False, "no": False, "0": False}


def parse_protocol(assignments: Iterable[str]) -> dict[str, Any]:
    """``protocol`` fields from ``KEY=VALUE`` texts (``kexp add --protocol``): ``timer``
    text, ``warmup`` and ``repetitions`` counts, ``synchronized``, ``l2_flushed`` and
    ``clocks_locked`` true or false, ``device`` gpu or cpu."""
    protocol: dict[str, Any] = {}
    for text in assignments:
        key, sep, raw = (part.strip() for part in text.partition("="))
        if not sep or key not in PROTOCOL_KEYS:
            raise MeasurementError(
                f"{text!r} is not KEY=VALUE with KEY one of {', '.join(PROTOCOL_KEYS)} "
                "(e.g. timer=cuda_events)"
            )
        if key in protocol:
            raise MeasurementError(f"protocol {key} is given twice")
        if key == "timer":
            protocol[key] = raw
        elif key == "device":
            if raw.lower() not in ("gpu", "cpu"):
                raise MeasurementError(f"protocol device={raw!r} is not gpu or cpu")
            protocol[key] = raw.lower()
        elif key in ("warmup", "repetitions"):
            if not raw.isdigit():
                raise MeasurementError(f"protocol {key}={raw!r} is not a count (e.g. {key}=10)")
            protocol[key] = int(raw)
        elif raw.lower() in _PROTOCOL_BOOLEANS:
            protocol[key] = _PROTOCOL_BOOLEANS[raw.lower()]
        else:
            raise MeasurementError(f"protocol {key}={raw!r} is not true or false")
    return protocol


def with_timings(
    store: Store,
    fields: Mapping[str, Any],
    *,
    baseline: Path | str | Mapping[str, Any] | None = None,
    candidate: Path | str | Mapping[str, Any] | None = None,
    table: Path | str | None = None,
    measurements: Sequence[Measurement] | None = None,
    iteration: int | None = None,
    stat: str = "median",
    unit: str | None = None,
    keep_samples: bool = True,
    notes: list[StepBaseline] | None = None,
) -> dict[str, Any]:
    """``fields`` with ``score``, ``results`` and ``raw_result`` computed from timings.

    Timings are ``baseline`` and ``candidate`` (files, or ``{config: times}`` dicts:
    a number or a list of samples in ``unit``, or a ``torch.utils.benchmark``
    measurement), or a ``table`` file, or ready ``measurements``; without any,
    ``fields`` come back as they are. With samples, ``score_ci`` and the ``## Samples``
    section (unless not ``keep_samples``) are filled too, and the ``protocol`` fields
    the timings tell (timer, repetitions, device) are added to any given; a wall clock
    on a machine without a GPU (:func:`kexp.measure.envinfo.gpu_present`) timed the CPU
    (``device: cpu``). A reader's warnings (summaries without raw samples) are issued.
    Timings that do not state their unit are in ``unit``, microseconds when it is None;
    then any below ``Settings.suspect_time_below_us`` (0.5 us: no GPU kernel is timed
    that short) are refused (:func:`kexp.measure.checks.check_assumed_unit`): the unit
    must be given.
    A ``raw_result`` already in ``fields`` is kept below the computed breakdown.
    Giving timings and a ``score`` or ``results`` is an error (the score is computed).
    With a ``pid``, ``measured_against`` defaults to ``parent`` (the baseline is the
    parent's code, the commit the change was made on); give ``reference`` when the
    baseline is the operator's original code; a baseline that timed the code the parent
    was measured against (:func:`kexp.measure.stepbase.step_baseline`) is appended to
    ``notes`` (its parent's reference baseline given again, ``measured_against`` not
    given: recorded ``reference``). ``iteration`` (the raw-result header)
    defaults to the number of this operator's experiments recorded so far (controls
    left out) plus one; a control's (tag ``control``) says it is the A/A control instead.
    This is what ``kexp add --baseline/--candidate/--timings`` does.
    """
    data = dict(fields)
    gathered = gather(baseline, candidate, table, measurements, stat, unit or "us")
    if gathered is None:
        return data
    if "score" in data or "results" in data or "score_ci" in data:
        raise MeasurementError(
            "give timings or score/results, not both: the score is computed from timings"
        )
    given = bool(data.get("measured_against"))
    if data.get("pid") and not given:
        data["measured_against"] = "parent"
    if data.get("measured_against") == "parent" and isinstance(data.get("pid"), str):
        note = _step_baseline(store, data["pid"], gathered.measurements, given)
        if note is not None:
            if note.settled:  # certain: the reference's samples, timed for the parent
                data["measured_against"] = "reference"
            if notes is not None:
                notes.append(note)
    title = None
    if is_control(_stand_in(data)):  # an A/A run measures the noise: no iteration
        title = CONTROL_TITLE
    elif iteration is None:
        iteration = operator_iteration(store, data.get("operator_sig"))
    overridden = protocol_overrides(gathered.protocol, data.get("protocol") or {})
    if overridden is not None:
        warnings.warn(overridden, TimingsWarning, stacklevel=3)
    protocol = {**gathered.protocol, **(data.get("protocol") or {})}
    if protocol.get("timer") == "wall_clock" and "device" not in protocol:
        # lazy: not every command that imports this module needs kexp.measure.envinfo
        from kexp.measure.envinfo import gpu_present

        if not gpu_present():  # a wall clock on a machine without a GPU timed a CPU
            protocol["device"] = "cpu"
    if protocol:
        data["protocol"] = protocol
    if gathered.unit_unstated:
        times = [t for m in gathered.measurements for t in (m.baseline, m.candidate)]
        if unit is None:  # nor by the caller: refused, before anything is written
            check_assumed_unit(times, store.settings.suspect_time_below_us)
        hint = unit_hint(times, unit or "us", store.settings.suspect_time_below_us)
        if hint is not None:
            warnings.warn(hint, TimingsWarning, stacklevel=3)
    sides = {m.config: sides_of(m) for m in gathered.measurements}
    sampled = stat == "median" and not any(m.summary for m in gathered.measurements)
    few = few_samples_hint(sides) if sampled else None  # a summary's reader said so
    for hint in (few, resolution_hint(sides), modes_hint(sides)):
        if hint is not None:
            warnings.warn(hint, TimingsWarning, stacklevel=3)
    scored = score_measurements(
        gathered.measurements,
        iteration=iteration,
        settings=store.settings,
        keep_samples=keep_samples,
        protocol=protocol,
        title=title,
        note=gathered.note,
        over_parent=parent_judge(store, _stand_in(data)),
    )
    given = data.pop("raw_result", "")
    data.update(scored.fields())
    if given:
        data["raw_result"] = f"{scored.raw_result}\n\n{given}"
    return data


def _step_baseline(
    store: Store, pid: str, measurements: Sequence[Measurement], given: bool
) -> StepBaseline | None:
    """:func:`kexp.measure.stepbase.step_baseline` of the parent ``pid`` names (None
    when the store lacks it: validation says so)."""
    try:
        parent = store.get_experiment(pid.strip())
    except KexpError:
        return None
    found = step_baseline(parent, measurements, given=given)
    if found is not None and found.settled and not parent.pid and chained_root(store, parent):
        # A root's baseline is the reference as it says, not when it timed an earlier
        # step's code (a chained root): the step is then warned of, not recorded so.
        found = dataclasses.replace(found, settled=False)
    return found


#: The title of a control's raw result (an A/A run is no iteration of the campaign).
CONTROL_TITLE = "A/A control Results"


def operator_iteration(store: Store, operator_sig: Any) -> int | None:
    """The iteration number of the next experiment on ``operator_sig``: its experiments
    recorded so far in the working tree (every one, whatever its lineage, but the
    controls: an A/A run is no step), plus one.
    None without an operator. A store read with refs (``kexp add --all-refs``, to be
    warned of a change tried on another branch) counts the working tree as well: the
    number does not depend on what else the store was asked to read."""
    if not isinstance(operator_sig, str) or not operator_sig.strip():
        return None
    if store.source.places is not None:  # read with refs: count the working tree's
        store = Store(store.root, code_repo=store.code_repo, settings=store.settings)
    with warnings.catch_warnings():  # a new operator has none yet: no typo to note
        warnings.simplefilter("ignore", NoMatchWarning)
        found = store.list_experiments(brief=True, operator=operator_sig)
    # A control (an A/A run) measures the noise, not a step: no iteration.
    return 1 + sum(1 for exp in found if exp.operator_sig == operator_sig and not is_control(exp))


def warn_if_suspect(exp: KernelExperiment, settings: Settings = DEFAULT_SETTINGS) -> list[str]:
    """Warn (:class:`SuspectMeasurementWarning`) when ``exp`` is suspect; returns why."""
    reasons = suspect_reasons(exp, settings)
    if reasons:
        warnings.warn(
            f"experiment {exp.id}: {SUSPECT_LABEL}: {'; '.join(reasons)}",
            SuspectMeasurementWarning,
            stacklevel=3,
        )
    return reasons


def record_iteration(
    store: Store | None = None,
    *,
    baseline: Path | str | Mapping[str, Any] | None = None,
    candidate: Path | str | Mapping[str, Any] | None = None,
    table: Path | str | None = None,
    measurements: Sequence[Measurement] | None = None,
    iteration: int | None = None,
    stat: str = "median",
    unit: str | None = None,
    keep_samples: bool = True,
    parent_default: bool = True,
    **fields: Any,
) -> KernelExperiment:
    """Record one optimization iteration in one call; returns the stored experiment.

    Timings (``baseline`` and ``candidate`` as files or ``{config: times}`` dicts, a
    number or a list of samples each, in ``unit``; or a ``table`` file, or ready
    ``measurements``) fill ``score``, ``results`` and the ``raw_result`` breakdown,
    and with samples ``score_ci`` and the ``## Samples`` section (see
    :func:`with_timings`). ``protocol={...}`` says how they were measured (timer,
    warmup, repetitions, l2_flushed, clocks_locked, synchronized, device). Without timings,
    ``score`` must be among ``fields``. ``status`` defaults to ``done``; with a ``pid``,
    ``operator_sig``, ``dtype_sig`` and ``env`` not given are the parent's. The store
    (default: the default store) fills id, created_at, base_commit and author,
    validates, and writes; a repeated code change
    (:class:`kexp.core.errors.RepeatedChangeWarning`, or
    :class:`kexp.core.errors.RemeasureWarning` when base commit and env repeat too: use
    :func:`remeasure`) and a suspect measurement (:class:`SuspectMeasurementWarning`)
    are warnings, not errors. A ``profiling_info`` that is ``ncu --csv`` output is kept
    as a compact table (:func:`kexp.measure.timings.profiling_info`).
    With a ``pid`` and a ``score`` given (no timings), ``measured_against`` not given
    is written ``parent``, as timings write it (``parent_default=False``: left out, and
    warned of, as ``kexp add`` of a document that names its ``pid`` keeps it).
    """
    if store is None:
        store = Store(find_root())
    fields = _with_parents_kernel(store, fields)
    parents = parents_env(store, fields)
    notes: list[StepBaseline] = []
    data = with_timings(
        store,
        fields,
        baseline=baseline,
        candidate=candidate,
        table=table,
        measurements=measurements,
        iteration=iteration,
        stat=stat,
        unit=unit,
        keep_samples=keep_samples,
        notes=notes,
    )
    if "score" not in data:
        raise MeasurementError(
            f"no score: give the timings or the score ({SCORE_OR_TIMINGS}; score 0 when "
            "nothing could be measured: a crash, a timeout, wrong results)"
        )
    if isinstance(data.get("profiling_info"), str):
        data["profiling_info"] = profiling_info(data["profiling_info"])
        _warn_if_large_profiling(data["profiling_info"], store.settings.large_profiling_bytes)
    data.setdefault("status", "done")
    if (
        parent_default
        and data.get("pid")
        and not data.get("measured_against")
        and not measured_nothing(data["score"])
    ):
        # A score given by hand is a step over the parent, as one from timings is (and as
        # the campaign counts it): said in the file, so that validate has nothing to ask.
        data["measured_against"] = "parent"
    # A base_commit given is judged as kexp validate judges it (one taken from HEAD is
    # there): an error refused before the write, a warning said after it.
    given = data.get("base_commit")
    said_of_base = None
    if isinstance(given, str) and given.strip():
        said_of_base = base_commit_problem(given.strip(), store.code_repo)
        if said_of_base is not None and said_of_base[0] == "error":
            raise ValidationError(f"the experiment was not recorded: {said_of_base[1]}", [])
    before = read_before_write(store, data)
    try:
        exp = store.create_experiment(**data)
    except ValidationError as exc:
        samples_too_large(exc, str(data.get("samples") or ""))
        raise
    if before.read:  # its outcome judged by the controls read before: not read again
        attach(exp, derived=lambda: store.derived_of(exp, controls=before.controls))
    warn_if_suspect(exp, store.settings)
    for note in notes:  # a baseline that is not the parent's code
        warnings.warn(note.said(exp.id), MeasuredAgainstWarning, stacklevel=2)
    env_warnings(exp, before.envs, parents)
    if is_control(exp) and not exp.is_buggy and exp.status not in PENDING_STATUSES:
        for line in control_notes(store, exp, before.controls):  # every view says so now
            warnings.warn(line, ControlWarning, stacklevel=2)
    tool = sniff(baseline) if isinstance(baseline, (str, Path)) else ""
    if is_control(exp) and control_bias(exp):  # as consult will say of it
        bias = describe_control(exp)
        if tool in ONE_SIDE_A_RUN:  # not biased: the drift between the tool's runs
            bias = one_run_control_note(exp, tool, store.settings)
        warnings.warn(f"control {exp.id}: {bias}", ControlWarning, stacklevel=2)
    elif ("score_ci" in data or exp.derived.drift) and not exp.is_buggy:  # drift: typed too
        has_control = control_for(exp, before.controls) is not None
        drift = drift_notes(exp, exp.derived.drift, has_control, tool)
        if drift is not None:
            warnings.warn(drift, TimingsWarning, stacklevel=2)
    if not is_control(exp) and not exp.is_buggy:
        claim = summary_contradiction(
            exp.id,
            exp.change_summary,
            exp.score,
            exp.cumulative_score,
            store.settings,
            exp.score_ci,
        )
        if claim is not None:  # a warning: the figure may state something else
            warnings.warn(claim, SummaryWarning, stacklevel=2)
    said = {"pid": exp.pid, "status": exp.status, "is_buggy": exp.is_buggy, "score": exp.score}
    if exp.measured_against:
        said["measured_against"] = exp.measured_against
    # As validate warns; a score of 0 has its own warning (it measured nothing).
    if missing_measured_against(said) and not measured_nothing(exp.score):
        from kexp.core.advice import MEASURED_AGAINST

        warnings.warn(
            f"{exp.id} has a parent and no measured_against: its score counts as a speedup "
            f"over the parent's code, and kexp validate warns of it; say so: "
            f"{MEASURED_AGAINST.say(id=exp.id)} (or reference: over the operator's "
            "original code)",
            MeasuredAgainstWarning,
            stacklevel=2,
        )
    nothing = done_without_measure(exp.id, exp.status, exp.is_buggy, exp.score)
    if nothing is not None:
        warnings.warn(nothing, KexpWarning, stacklevel=2)
    rooted = root_note(exp, before.tip)
    if rooted is not None:
        warnings.warn(rooted, RootWarning, stacklevel=2)
    warn_if_chained(store, exp, before.rows if before.read else None)  # a chained root
    if said_of_base is not None:
        warnings.warn(
            f"experiment {exp.id}: {said_of_base[1]} (kexp validate warns of it)",
            CodeRepoWarning,
            stacklevel=2,
        )
    return exp


class BeforeWrite(NamedTuple):
    """What a record's checks need of the store as it was before the write, from one
    read (:func:`read_before_write`)."""

    #: Every ``env`` recorded before (empty: no env to check).
    envs: list[str]
    #: The best tip of the campaign the record joins as a root, and its cumulative score,
    #: when that campaign is a lineage (None: no such campaign, or not a root).
    tip: tuple[Row, float | None] | None
    #: The controls of each env and timer recorded before, newest first
    #: (:func:`kexp.core.campaign.env_controls`).
    controls: dict[str, dict[str, list[Row]]]
    #: Whether the store was read (not when there was nothing to check: no env, not a
    #: root; then the other fields are empty), and its rows then.
    read: bool
    rows: Sequence[Row] = ()


def _warn_if_large_profiling(text: str, limit: int) -> None:
    """Warn, in one line, of a ``profiling_info`` over ``limit`` bytes
    (``Settings.large_profiling_bytes``): it is kept, all of it, in the experiment's file."""
    size = len(text.encode("utf-8"))
    if size > limit:
        warnings.warn(
            f"profiling_info holds {size / 1024:,.0f} KB, kept whole in the experiment's file "
            f"(over large_profiling_bytes, {limit / 1024:,.0f} KB): keep the profiler's "
            "summary of what matters, not its whole output (a timings file is baseline or "
            "candidate, not profiling)",
            KexpWarning,
            stacklevel=3,
        )


def read_before_write(store: Store, data: Mapping[str, Any]) -> BeforeWrite:
    """The store's experiments before the record ``data`` is written, read once (none
    when nothing is checked): the envs recorded (the env's spelling is checked against
    them) and, for a root (no ``pid``, not measured against the reference, no control),
    its campaign's best tip (:func:`root_note`). Nothing is read again after the write:
    the record itself is neither of them."""
    env = str(data.get("env") or "").strip()
    root = not data.get("pid") and data.get("measured_against") != "reference"
    if not env and not root:
        return BeforeWrite([], None, {}, False)
    found = store.found()
    envs = sorted({row.env for row in found.rows}) if env else []
    controls = env_controls(found.rows)
    key = (str(data.get("operator_sig") or ""), str(data.get("dtype_sig") or ""), env)
    tip = lineage_tip(found, key, store.settings) if root else None
    return BeforeWrite(envs, tip, controls, True, found.rows)


def lineage_tip(found: Found, key: tuple[str, str, str], settings: Settings) -> (
    tuple[Row, float | None] | None
):  # fmt: skip
    """The best tip of the campaign ``key`` (kernel, dtype, env) among ``found``'s rows
    and its cumulative score, when it is a step on a parent (the campaign is a lineage);
    None otherwise. What is derived is derived only where a lineage may be."""
    rows = [row for row in found.rows if (row.operator_sig, row.dtype_sig, row.env) == key]
    if not any(row.pid for row in rows):
        return None  # roots side by side are tries of their own
    from kexp.storage.query import best_tip

    derivation = found.derivation(settings)
    tip = best_tip(rows, derivation=derivation)
    if tip is None or not tip.pid:
        return None
    return tip, derivation.of(tip).cumulative_score


def root_note(exp: KernelExperiment, tip: tuple[Row, float | None] | None) -> str | None:
    """The note for ``exp``, just recorded as a root (no pid, not measured against the
    reference, no control), when its kernel, dtype and env already have a campaign whose
    best tip is ``tip`` (:func:`lineage_tip`), which it most likely builds on; None
    otherwise."""
    if tip is None or exp.pid or exp.measured_against == "reference" or is_control(exp):
        return None
    row, cumulative = tip
    reached = f"cumulative {cumulative:.4f}x, " if cumulative is not None else ""
    return (
        f"experiment {exp.id} is a root (no pid): its kernel, dtype and env have a "
        f"campaign, best tip {row.id} ({reached}{row.change_summary!r}); if it builds on "
        f"that code, give it its parent: {SET_PARENT.say(id=exp.id, pid=row.id[:10])}"
    )


#: What a step on a parent takes from it when it does not say: the kernel measured, its
#: dtype and the machine (as ``kexp new --pid`` prefills them).
PARENTS_KERNEL = ("operator_sig", "dtype_sig", "env")


def _with_parents_kernel(store: Store, fields: dict[str, Any]) -> dict[str, Any]:
    """``fields`` with those of :data:`PARENTS_KERNEL` left out or empty taken from the
    experiment ``pid`` names (unchanged without a parent the store holds: validation
    says what is wrong with the pid)."""
    pid = fields.get("pid")
    missing = [name for name in PARENTS_KERNEL if not str(fields.get(name) or "").strip()]
    if not isinstance(pid, str) or not pid.strip() or not missing:
        return fields
    try:
        parent = store.get_experiment(pid.strip())
    except KexpError:
        return fields
    return {**fields, **{name: getattr(parent, name) for name in missing}}


def earlier_rounds(exp: KernelExperiment) -> list[Round]:
    """The rounds of measurement an experiment holds: its ``## Samples`` section, or
    its single-number ``results`` as one round of one sample a side.

    Raises :class:`MeasurementError` when there is nothing to pool with: no timings,
    or samples summarised in ``results`` but not kept.
    """
    # lazy: not every command that imports this module needs kexp.format.samples
    from kexp.format.samples import Round, SamplesError, parse_samples, sample_count

    if exp.samples.strip():
        try:
            return parse_samples(exp.samples)
        except SamplesError as exc:
            raise MeasurementError(
                f"experiment {exp.id}: its Samples section cannot be read (line {exc.line}: "
                f"{exc}); correct it first"
            ) from None
    timings: dict[str, tuple[tuple[float, ...], tuple[float, ...]]] = {}
    for result in exp.results:
        counts = sample_count(result)
        if counts is not None and max(counts) > 1:
            raise MeasurementError(
                f"experiment {exp.id} was recorded without its raw samples (summaries, or "
                "keep_samples=False): a new round cannot be pooled with them; record "
                "the new measurement as a new experiment that says so"
            )
        unit = result.get("unit", "us")
        scale = UNIT_TO_US.get(unit) if isinstance(unit, str) else None
        times = [result.get("baseline"), result.get("candidate")]
        if scale is None or not all(
            isinstance(v, (int, float)) and not isinstance(v, bool) and v > 0 for v in times
        ):
            raise MeasurementError(
                f"experiment {exp.id}: results entry {result.get('config')!r} has no "
                "baseline and candidate times to pool a new round with"
            )
        base, cand = (tidy(float(v) * scale) for v in times)  # type: ignore[arg-type]
        timings[str(result["config"])] = ((base,), (cand,))
    if not timings:
        raise MeasurementError(
            f"experiment {exp.id} has no per-configuration timings (results) to pool a new "
            f"round with: correct its score with {CORRECT_SCORE.say(id=exp.id)}"
        )
    return [Round(timings)]


def _refuse_unmeasured(exp: KernelExperiment) -> None:
    """Refuse to remeasure a run that measured nothing: there is no round to pool a new
    one with. A buggy one (it crashed or gave wrong results) stays on record as what
    happened, its code fixed is a new experiment; one that timed out or failed and has
    now run to the end, the same code, records what it measured on the same record."""
    if exp.is_buggy:
        if exp.pid:
            record = f"on its parent: {RECORD_AGAIN.say(pid=exp.pid)}"
        else:
            record = f"on the reference code: {RECORD_AGAIN_ROOT}"
        raise MeasurementError(
            f"experiment {exp.id} is buggy (it crashed or gave wrong results): there is no "
            "measurement to pool a new round with, and it stays on record as what "
            f"happened; time the fixed code as a new experiment {record} (its operator, "
            "dtype and env; its description says what was fixed)"
        )
    if no_measurement(exp.status, exp.score):  # a timed-out run's score is not read
        score = "its score not a measurement" if exp.status == TIMED_OUT else "score 0"
        raise MeasurementError(
            f"experiment {exp.id} measured nothing (status {exp.status}, {score}): there "
            "is no measurement to pool a new round with; when the same code has now run "
            f"to the end, record what it measured with {SET_MEASURED.say(id=exp.id)}"
        )


def remeasure(
    store: Store | None,
    exp_id: str,
    *,
    baseline: Path | str | Mapping[str, Any] | None = None,
    candidate: Path | str | Mapping[str, Any] | None = None,
    table: Path | str | None = None,
    measurements: Sequence[Measurement] | None = None,
    unit: str | None = None,
    reason: str | None = None,
    replace_round: int | None = None,
) -> KernelExperiment:
    """Add a round of measurement to an experiment: no best-of-N.

    The new timings (as :func:`record_iteration` takes them, of the same
    configurations, measured the same way) are pooled with every earlier round
    (:func:`earlier_rounds`); ``score``, ``score_ci`` and ``results`` are recomputed,
    the round is added to the ``## Samples`` section and its breakdown to
    ``raw_result``, the figure of ``change_summary`` that stated the old score states
    the new one (:func:`kexp.measure.corrections.summary_with_score`), and the
    correction is recorded as ``kexp update --reason`` records one (old → new, and
    ``reason``, by default "remeasured: round N pooled with the earlier ones"). A
    control whose pooled interval is implausible for an A/A run warns
    (:class:`~kexp.core.errors.ControlWarning`). ``replace_round`` (1, 2, ...): the new
    timings take the place of that round, one that was wrong (baseline and candidate
    files swapped, taken under load), with the ``reason`` why, required; refused unless
    the file is committed as it is, so that the round replaced stays in git history (the
    correction note names the commit). The Python twin of ``kexp remeasure``."""
    # lazy: not every command that imports this module needs kexp.measure.corrections,
    # kexp.format.samples
    from kexp.format.samples import copied_round, pooled
    from kexp.measure.corrections import correct, summary_with_score

    if store is None:
        store = Store(find_root())
    unit = unit or "us"
    store.path_of(exp_id, writing=True)  # in the working tree, else said where it is
    exp = store.get_experiment(exp_id)
    gathered = gather(baseline, candidate, table, measurements, "median", unit)
    if gathered is None:
        raise MeasurementError("give the new round's baseline and candidate timings (or a table)")
    found = gathered.measurements
    if any(m.summary for m in found):
        raise MeasurementError(
            "the new round's timings are summaries without raw samples: a round is pooled "
            "sample by sample; time it again keeping the raw samples"
        )
    given = next((x for x in (baseline, table) if isinstance(x, (str, Path))), None)
    _same_tool(exp, gathered.protocol, sniff(given) if given is not None else IN_PYTHON)
    # read, pool and write under the experiment's lock: a round (and its note) another
    # process adds meanwhile is pooled with, never written over
    with store.editing(exp.id):
        exp = store.get_experiment(exp.id)
        _refuse_unmeasured(exp)
        # Every round as its samples are kept (measurement_of keeps them so): the file's
        # Samples section then gives exactly the results computed here.
        rounds = [_kept_round(r.timings) for r in earlier_rounds(exp)]
        held = None
        if replace_round is not None:
            held = replaced_round_held(exp.id, exp.path, len(rounds), replace_round, reason)
        new_round = _kept_round({m.config: sides_of(m) for m in found})
        missing = [c for c in rounds[0].timings if c not in new_round.timings]
        extra = [c for c in new_round.timings if c not in rounds[0].timings]
        if missing or extra:
            parts = [f"not in the new round: {', '.join(missing)}"] if missing else []
            parts += [f"not in the earlier rounds: {', '.join(extra)}"] if extra else []
            raise MeasurementError(
                f"the new round measured other configurations than the earlier rounds of "
                f"{exp.id} ({'; '.join(parts)}): a round pools with the earlier ones only for "
                f"the same configurations; measure {', '.join(rounds[0].timings)} again (other "
                "configurations are a new experiment: kexp add)"
            )
        problem = copied_round(rounds, new_round)
        if problem is not None:
            raise MeasurementError(f"{exp.id} was not remeasured: {problem}")
        limit = store.settings.remeasure_scale_above
        check_round_scale(exp.id, pooled(rounds), new_round.timings, unit, limit)
        if replace_round is not None:
            rounds[replace_round - 1] = new_round
        else:
            rounds.append(new_round)
        together = [measurement_of(config, *sides) for config, sides in pooled(rounds).items()]
        number = len(rounds)
        title = f"Round {number} pooled with rounds 1-{number - 1} Results"
        if replace_round is not None:
            title = f"Round {replace_round} replaced, {number} round(s) pooled Results"
        elif number == 2:
            title = "Round 2 pooled with round 1 Results"
        scored = score_measurements(
            together,
            settings=store.settings,
            rounds=rounds,
            protocol=exp.protocol,
            over_parent=parent_judge(store, exp),
            title=title,
        )
        changes: dict[str, Any] = {
            "score": scored.score,
            "score_ci": scored.score_ci,
            "results": scored.results,
            "samples": scored.samples,
            "raw_result": f"{exp.raw_result.rstrip()}\n\n{scored.raw_result}".lstrip(),
        }
        summary = summary_with_score(
            exp.change_summary, float(exp.score), scored.score, store.settings.max_summary_chars
        )
        if summary is not None:  # its figure was the old score's: it follows the new one
            changes["change_summary"] = summary
        why = reason or f"remeasured: round {number} pooled with the earlier ones"
        if held is not None:
            why = f"round {replace_round} replaced (its timings: commit {held[:12]}): {reason}"
        try:
            done = correct(store, exp.id, changes, why)
        except ValidationError as exc:
            samples_too_large(exc, scored.samples, pooled=True)
            raise
    few = few_samples_hint({m.config: sides_of(m) for m in together})  # rounds pooled
    if few is not None:
        warnings.warn(few, TimingsWarning, stacklevel=2)
    said = False
    if is_control(exp):
        said = _warn_if_implausible_control(exp, done, number, rounds)
    elif (disagree := rounds_disagree(exp.id, rounds)) is not None:
        warnings.warn(disagree, RoundsWarning, stacklevel=2)
        said = True
    # every round's samples (not only the new one's), and pooled unless a round was named
    hint = rounds_modes_hint(exp.id, rounds, replace_round or number, pooled_too=not said)
    if hint is not None:
        warnings.warn(hint, TimingsWarning, stacklevel=2)
    return done


#: The tools whose files tell their clock, by the ``protocol.timer`` they tell: what
#: timed an experiment's rounds, as its protocol says.
_TIMER_TOOLS = {"wall_clock": PYTEST_BENCHMARK, "other": PYTEST_BENCHMARK, TORCH_TIMER: TORCH}


def _same_tool(exp: KernelExperiment, told: Mapping[str, Any], form: str) -> None:
    """Refuse a round timed by another tool or clock than ``exp``'s rounds, as ``kexp
    add`` refuses such a pair (:func:`kexp.measure.measurements.same_kind`): the rounds'
    tool is the one whose clock ``exp``'s ``protocol.timer`` names (none: plain times), the
    new round's the files' (``form``, and the clock they tell, ``told``)."""
    timer = exp.protocol.get("timer")
    tool = _TIMER_TOOLS.get(timer) if isinstance(timer, str) else None
    now = {k: told[k] for k in KIND_FIELDS if k in told}
    then = {"timer": timer} if tool else {}
    if "device" in now and "device" in exp.protocol:
        then["device"] = exp.protocol["device"]
    earlier = tool or ("plain times (no tool's clock named)" if "timer" in now else form)
    try:
        same_kind(Timings({}, earlier, then), Timings({}, form, now))
    except MeasurementError:
        raise MeasurementError(
            f"{exp.id} was not remeasured: its rounds were timed with {_kind(earlier, then)}, "
            f"the new round with {_kind(form, now)}: times of different tools or clocks do "
            "not compare, and nothing was written; time the new round as the earlier ones "
            "were (another tool's timings are a new experiment: kexp add)"
        ) from None


def _kind(form: str, clock: Mapping[str, Any]) -> str:
    """A tool and the clock it told: ``pytest-benchmark (timer wall_clock)``."""
    return f"{form} ({', '.join(f'{k} {v}' for k, v in clock.items())})" if clock else form


def _warn_if_implausible_control(
    before: KernelExperiment, after: KernelExperiment, number: int, rounds: Sequence[Round]
) -> bool:
    """Warn (:class:`ControlWarning`), saying what to do, of the first that holds: one
    of a control's ``rounds`` was mostly set aside as load spikes
    (:func:`kexp.measure.checks.throttled_rounds`: the round named); round ``number``,
    pooled, moved the noise floor as an A/A run cannot
    (:func:`kexp.measure.checks.implausible_control`: the floor before and after); its
    rounds disagree (:func:`kexp.measure.checks.rounds_disagree`). Whether it warned."""
    reasons: list[str] = []
    named = throttled_rounds(after.id, rounds)
    if named is None and not (reasons := implausible_control(before.score_ci, after.score_ci)):
        named = rounds_disagree(after.id, rounds)
    if named is not None:
        warnings.warn(named, ControlWarning, stacklevel=3)
        return True
    if not reasons:
        return False
    from kexp.core.problems import display_path  # lazy: a warning's, seldom needed

    path = display_path(after.path or "")
    warnings.warn(
        f"control {after.id[:10]} is an A/A run (the same code on both sides), yet round "
        f"{number} moved its noise floor from {_floor(before)} to {_floor(after)}: "
        f"{' and '.join(reasons)}. The round's two sides were not timed alike (clocks, "
        f"warm-up, load, another device): check the timing setup, then drop the round "
        f"before committing it (git checkout -- {path} restores the file as last committed) "
        "and time the A/A again",
        ControlWarning,
        stacklevel=3,
    )
    return True


def _floor(exp: KernelExperiment) -> str:
    """A control's score and interval: ``1.0047 [1.0000, 1.0094]``."""
    interval = f" [{exp.score_ci[0]:.4f}, {exp.score_ci[1]:.4f}]" if exp.score_ci else ""
    return f"{float(exp.score):.4f}{interval}"
