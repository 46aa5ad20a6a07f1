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
to pool a later round: :func:`kexp.measure.remeasure.remeasure`). Single numbers are
recorded as before. A ``stat`` other than the median reduces samples to one number, as
before (no interval).
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
:func:`kexp.measure.remeasure.remeasure` adds a round of measurement to a recorded
experiment.
"""

from __future__ import annotations

import dataclasses
import warnings
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, NamedTuple

from kexp.core.advice import SCORE_OR_TIMINGS, SET_PARENT
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
    SummaryWarning,
    SuspectMeasurementWarning,
    TimingsWarning,
    ValidationError,
)
from kexp.core.gpunames import names_gpu
from kexp.core.model import PROTOCOL_KEYS, KernelExperiment, attach
from kexp.core.outcome import (
    PENDING_STATUSES,
    control_bias,
    describe_control,
    is_control,
    measured_nothing,
)
from kexp.core.settings import DEFAULT_SETTINGS, Settings
from kexp.core.spelling import campaign_key
from kexp.format.rules import missing_measured_against
from kexp.format.suspect import SUSPECT_LABEL, suspect_reasons
from kexp.measure.chained import chained_root, warn_if_chained
from kexp.measure.checks import (
    ONE_SIDE_A_RUN,
    base_commit_problem,
    check_assumed_unit,
    done_without_measure,
    drift_notes,
    few_samples_hint,
    modes_hint,
    one_run_control_note,
    protocol_overrides,
    resolution_hint,
    samples_too_large,
    summary_contradiction,
    unit_hint,
)
from kexp.measure.controlnote import control_notes
from kexp.measure.envs import env_warnings, parents_env
from kexp.measure.measurements import Measurement, gather, load_measurements, read_table, sides_of
from kexp.measure.scoring import parent_judge, score_measurements
from kexp.measure.stepbase import StepBaseline, step_baseline
from kexp.measure.timings import profiling_info, sniff
from kexp.storage.dedupe import code_key
from kexp.storage.location import find_root
from kexp.storage.store import Store

if TYPE_CHECKING:
    from kexp.storage.rows import Row
    from kexp.storage.sources import Found

__all__ = [
    "Measurement",
    "MeasurementError",
    "SuspectMeasurementWarning",
    "TimingsWarning",
    "load_measurements",
    "parse_protocol",
    "read_table",
    "record_iteration",
    "warn_if_suspect",
    "with_timings",
]


def _stand_in(data: Mapping[str, Any]) -> KernelExperiment:
    """An experiment of the fields a campaign judges by (pid, measured_against, status,
    is_buggy, tags, combines) of ``data``, fields to be recorded: what
    :func:`parent_judge` judges before the score is known."""
    names = ("pid", "measured_against", "is_buggy", "tags", "combines")
    given = {name: data[name] for name in names if data.get(name)}
    return KernelExperiment(status=data.get("status") or "done", **given)


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
    the timings tell (timer, repetitions, device) are added to any given; a wall clock's
    device not given is :func:`wall_clock_device`'s (the GPU the ``env`` names, else the
    CPU of a machine without a GPU). A reader's warnings (summaries without raw samples) are issued.
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
        device = wall_clock_device(data.get("env"))
        if device is not None:
            protocol["device"] = device
    if protocol:
        data["protocol"] = protocol
    if gathered.unit_unstated:
        times = [t for m in gathered.measurements for t in (m.baseline, m.candidate)]
        if unit is None:  # nor by the caller: refused, before anything is written
            check_assumed_unit(
                times,
                store.settings.suspect_time_below_us,
                store.settings.unit_ambiguous_below_us,
            )
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


def wall_clock_device(env: object) -> str | None:
    """The ``protocol.device`` of timings a wall clock took, the record saying none:
    ``gpu`` when its ``env`` names a GPU (:func:`kexp.core.gpunames.names_gpu`: the GPU
    ran them, wherever the record is made: an agent's controller, CI), else ``cpu`` on a
    machine without a GPU (:func:`kexp.measure.envinfo.gpu_present`: it timed the CPU),
    else None (a machine with a GPU may time either)."""
    if names_gpu(env):
        return "gpu"
    # lazy: not every command that imports this module needs kexp.measure.envinfo
    from kexp.measure.envinfo import gpu_present

    return None if gpu_present() else "cpu"


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
    :func:`kexp.measure.remeasure.remeasure`), a change without a code change whose
    summary, kernel, dtype, env and parent repeat an earlier experiment's
    (``RepeatedChangeWarning``: :func:`kexp.storage.repeats.warn_same_summary`) and a
    suspect measurement
    (:class:`SuspectMeasurementWarning`) are warnings, not errors. A ``profiling_info``
    that is ``ncu --csv`` output is kept as a compact table
    (:func:`kexp.measure.timings.profiling_info`).
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
    if before.read:  # no code change: the same change again, by its summary
        from kexp.storage.repeats import warn_same_summary  # lazy: retrieval's index

        warn_same_summary(store, exp, before.rows, stacklevel=2)
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
    them), for a root (no ``pid``, not measured against the reference, no control),
    its campaign's best tip (:func:`root_note`), and for a record without a code change,
    the rows its summary is compared with
    (:func:`kexp.storage.repeats.warn_same_summary`). Nothing is read again after the
    write: the record itself is none of them."""
    env = str(data.get("env") or "").strip()
    root = not data.get("pid") and data.get("measured_against") != "reference"
    if not env and not root and code_key(str(data.get("code_change") or "")):
        return BeforeWrite([], None, {}, False)
    found = store.found()
    envs = sorted({row.env for row in found.rows}) if env else []
    controls = env_controls(found.rows)
    key = campaign_key({**data, "env": env})
    tip = lineage_tip(found, key, store.settings) if root else None
    return BeforeWrite(envs, tip, controls, True, found.rows)


def lineage_tip(found: Found, key: tuple[str, str, str], settings: Settings) -> (
    tuple[Row, float | None] | None
):  # fmt: skip
    """The best tip of the campaign ``key`` (kernel, dtype, env: :func:`campaign_key`,
    any spelling) among ``found``'s rows and its cumulative score, when it is a step on a
    parent (the campaign is a lineage); None otherwise. What is derived is derived only
    where a lineage may be."""
    rows = [row for row in found.rows if campaign_key(row) == key]
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
