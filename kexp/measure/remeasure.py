"""Remeasuring: a new round of timings pooled with an experiment's earlier rounds.

:func:`remeasure` (``kexp remeasure``) adds a round of measurement to a recorded
experiment, no best-of-N: the rounds it holds (:func:`earlier_rounds`, its ``## Samples``
section or its single-number ``results``) and the new one, of the same configurations
timed by the same tool and clock, are pooled sample by sample; ``score``, ``score_ci``,
``results`` and ``raw_result`` are recomputed (:mod:`kexp.measure.scoring`) and the change
recorded as a correction (:mod:`kexp.measure.corrections`). A round that was wrong can
take the place of the one it replaces. What the rounds say (they disagree, a control's
noise floor moved as an A/A run cannot, too few samples) is warned of.
"""

from __future__ import annotations

import warnings
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from kexp.core.advice import CORRECT_SCORE, RECORD_AGAIN, RECORD_AGAIN_ROOT, SET_MEASURED
from kexp.core.errors import (
    ControlWarning,
    MeasurementError,
    RoundsWarning,
    TimingsWarning,
    ValidationError,
)
from kexp.core.model import KernelExperiment
from kexp.core.outcome import TIMED_OUT, is_control, no_measurement
from kexp.format.suspect import UNIT_TO_US
from kexp.measure.checks import (
    check_round_scale,
    few_samples_hint,
    implausible_control,
    replaced_round_held,
    rounds_disagree,
    rounds_modes_hint,
    samples_too_large,
    throttled_rounds,
)
from kexp.measure.measurements import (
    KIND_FIELDS,
    Measurement,
    gather,
    measurement_of,
    same_kind,
    sides_of,
)
from kexp.measure.scoring import parent_judge, score_measurements
from kexp.measure.timings import IN_PYTHON, sniff
from kexp.measure.timings.common import Timings, tidy
from kexp.measure.timings.pytest_benchmark import NAME as PYTEST_BENCHMARK
from kexp.measure.timings.torch_benchmark import NAME as TORCH
from kexp.measure.timings.torch_benchmark import TIMER as TORCH_TIMER
from kexp.storage.location import find_root
from kexp.storage.store import Store

if TYPE_CHECKING:
    from kexp.format.samples import Round

__all__ = ["earlier_rounds", "remeasure"]


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

    The new timings (as :func:`kexp.measure.record.record_iteration` takes them, of the same
    configurations, measured the same way) are pooled with every earlier round
    (:func:`earlier_rounds`); ``score``, ``score_ci`` and ``results`` are recomputed,
    the round is added to the ``## Samples`` section and its breakdown to
    ``raw_result``, the figure of ``change_summary`` that stated the old score states
    the new one (:func:`kexp.measure.corrections.summary_with_score`; one it cannot
    restate is warned of, as ``kexp update`` warns of it), and the
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
            exp.change_summary,
            float(exp.score),
            scored.score,
            store.settings.max_summary_chars,
            store.settings,
            scored.score_ci,
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
