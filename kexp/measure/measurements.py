"""Timings in, measurements out: each configuration's baseline and candidate times
(:class:`Measurement`) from timing files in any format :mod:`kexp.measure.timings`
reads, from ``{config: times}`` dicts or from one CSV table, paired by configuration;
what :mod:`kexp.measure.record` scores and records (:func:`gather`).
"""

from __future__ import annotations

import dataclasses
import statistics
import warnings
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from kexp.core.advice import PICK_KERNEL, RECORD_FAILURE
from kexp.core.errors import MeasurementError, TimingsWarning
from kexp.core.noise import side_stats
from kexp.measure.checks import UNSTATED_UNIT_FORMS
from kexp.measure.timings import IN_PYTHON, from_mapping, read_timings
from kexp.measure.timings import read_table as read_sides
from kexp.measure.timings.common import Timings, check_stat, check_time, tidy
from kexp.measure.timings.nsys import NAME as NSYS
from kexp.measure.timings.pytest_benchmark import NAME as PYTEST_BENCHMARK


@dataclasses.dataclass(frozen=True)
class Measurement:
    """One configuration's baseline and candidate times, in microseconds.

    Measured with repeated timings, ``baseline_samples`` and ``candidate_samples`` hold
    them and ``baseline`` and ``candidate`` are their medians, outliers set aside (see
    :func:`measurement_of`). A ``summary`` comes from a tool that kept no raw samples:
    ``baseline_n`` and ``candidate_n`` say how many runs each time sums up (when known).
    """

    config: str
    baseline: float
    candidate: float
    baseline_samples: tuple[float, ...] = ()
    candidate_samples: tuple[float, ...] = ()
    summary: bool = False
    baseline_n: int | None = None
    candidate_n: int | None = None

    @property
    def has_samples(self) -> bool:
        """Whether a side was timed more than once."""
        return len(self.baseline_samples) > 1 or len(self.candidate_samples) > 1

    @property
    def speedup(self) -> float:
        """Baseline time over candidate time (> 1 is faster)."""
        return self.baseline / self.candidate

    def to_result(self) -> dict[str, Any]:
        """The entry of the ``results`` field (a summary's run counts too)."""
        result: dict[str, Any] = {
            "config": self.config,
            "baseline": tidy(self.baseline),
            "candidate": tidy(self.candidate),
            "speedup": round(self.speedup, 4),
            "unit": "us",
        }
        if self.baseline_n is not None:
            result["baseline_n"] = self.baseline_n
        if self.candidate_n is not None:
            result["candidate_n"] = self.candidate_n
        return result


def measurement_of(
    config: str, baseline: Sequence[float], candidate: Sequence[float]
) -> Measurement:
    """A configuration's measurement from its samples (microseconds): the times are
    their medians, outliers (load spikes) set aside (:func:`kexp.core.noise.side_stats`).
    Repeated timings are kept as :func:`kexp.format.samples.kept_sample` keeps them; one
    number a side is a plain measurement, as before."""
    # lazy: not every command that imports this module needs kexp.format.samples
    from kexp.format.samples import kept_sample

    if not baseline or not candidate:
        raise MeasurementError(f"{config}: no samples")
    if len(baseline) == 1 and len(candidate) == 1:
        return Measurement(config, tidy(baseline[0]), tidy(candidate[0]))
    base = tuple(kept_sample(v) for v in baseline)
    cand = tuple(kept_sample(v) for v in candidate)
    return Measurement(config, side_stats(base).median, side_stats(cand).median, base, cand)


# --- timings in --------------------------------------------------------------------------


def _reduce(samples: Sequence[Any], stat: str, where: str) -> float:
    values = [check_time(v, where) for v in samples]
    if not values:
        raise MeasurementError(f"{where}: no samples")
    if check_stat(stat) == "median":
        return float(statistics.median(values))
    if stat == "mean":
        return float(statistics.fmean(values))
    return min(values) if stat == "min" else max(values)


def read_table(path: Path | str, *, unit: str = "us") -> list[Measurement]:
    """Measurements from one CSV table with ``config``, ``baseline``, ``candidate``
    columns (see :func:`kexp.measure.timings.read_table`): several rows of a configuration are
    its samples, one a side per row."""
    return [
        measurement_of(c, base, cand) for c, (base, cand) in read_sides(path, unit=unit).items()
    ]


def _timings_of(value: Path | str | Mapping[str, Any], name: str, unit: str, stat: str) -> Timings:
    """One side's timings: a file in any format :mod:`kexp.measure.timings` reads, or a dict."""
    if isinstance(value, Mapping):
        return from_mapping(value, unit=unit, name=name)
    return read_timings(value, unit=unit, stat=stat)


def _same_configurations(
    baseline: Mapping[str, Any], candidate: Mapping[str, Any], form: str = ""
) -> None:
    """Refuse sides of different configurations, saying what likely happened: names
    that differ on both sides (a kernel or test renamed between the runs, another
    kernel's file), or configurations the candidate lacks (it failed there: a
    pytest-benchmark benchmark that fails is left out of its JSON)."""
    only_base = [c for c in baseline if c not in candidate]
    only_cand = [c for c in candidate if c not in baseline]
    if not (only_base or only_cand):
        if not baseline:
            raise MeasurementError("no configurations were measured")
        return
    parts = []
    if only_base:
        parts.append(f"only in the baseline: {', '.join(only_base)}")
    if only_cand:
        parts.append(f"only in the candidate: {', '.join(only_cand)}")
    said = "baseline and candidate measured different configurations (" + "; ".join(parts)
    if only_base and only_cand:
        picked = f", or {PICK_KERNEL.say(kernel='NAME')}" if form == NSYS else ""
        raise MeasurementError(
            f"{said}): their names differ, and nothing was written: a kernel or test renamed "
            "between the runs (a template argument in a kernel's name), or another kernel's "
            "file; give each configuration the same name on both sides (edit the names in "
            f"one file, or time both under one name){picked}"
        )
    if only_base:  # a benchmark that fails leaves no timing (pytest-benchmark's JSON)
        why = " (pytest-benchmark leaves a benchmark that failed out of its JSON)"
        raise MeasurementError(
            f"{said}): the candidate may have failed there"
            f"{why if form == PYTEST_BENCHMARK else ''}; if it crashed or gave wrong "
            f"results, record the failure, without timings: {RECORD_FAILURE}, else time both "
            "sides on the same configurations"
        )
    raise MeasurementError(said + ")")


#: The protocol fields that say what kind of timing a side is besides its tool: a wall
#: clock and a CPU clock of one tool (pytest-benchmark's --benchmark-timer) time apart.
KIND_FIELDS = ("timer", "device")


def _kind(timings: Timings) -> str:
    """What kind of timing ``timings`` are, in words: the tool (the file's form) and
    the protocol fields it tells of its clock (:data:`KIND_FIELDS`)."""
    told = [f"{k} {timings.protocol[k]}" for k in KIND_FIELDS if k in timings.protocol]
    return f"{timings.form} ({', '.join(told)})" if told else timings.form


def same_kind(base: Timings, cand: Timings) -> None:
    """Refuse a baseline and a candidate timed by different tools, or by one tool's
    different clocks: their times are not comparable (a CPU wall clock in seconds beside
    a GPU's milliseconds made a 6.9x step), whatever configurations they share. Every
    kind of file is a tool of its own (a CSV beside a JSON file too); timings given in
    Python (:data:`~kexp.measure.timings.IN_PYTHON`) name no tool: the program that
    holds them timed them, and pairs them with what it chooses (beside a tool's file,
    with a warning: :func:`untold_kind`)."""
    if _kind(base) == _kind(cand) or IN_PYTHON in (base.form, cand.form):
        return
    if base.form == cand.form:
        said = f"the baseline is {_kind(base)} and the candidate {_kind(cand)}"
    else:
        said = f"the baseline is {base.form} and the candidate {cand.form}"
    raise MeasurementError(
        f"{said}: times of different tools or clocks do not compare, and nothing was "
        "written; time both sides with the same tool and clock"
    )


def untold_kind(base: Timings, cand: Timings) -> str | None:
    """The warning for a side given in Python (no tool named) beside one a tool timed
    (a file of a tool's own form: not plain times a script wrote): nothing tells that
    both were timed alike; None otherwise."""
    sides = (("baseline", base), ("candidate", cand))
    for (name, given), (other_name, other) in (sides, sides[::-1]):
        if given.form == IN_PYTHON and other.form not in UNSTATED_UNIT_FORMS:
            return (
                f"the {name}'s timings were given as numbers (a dict, a JSON object: no "
                f"tool named) and the {other_name}'s are {_kind(other)}: nothing says both "
                "sides were timed "
                "alike, and times of different tools or clocks do not compare; time both "
                f"sides with the same tool and clock ({other.form} for both)"
            )
    return None


def pair_timings(
    baseline: Mapping[str, float], candidate: Mapping[str, float]
) -> list[Measurement]:
    """Pair baseline and candidate times by configuration (baseline's order).

    Both must name the same configurations: a configuration measured on one side only
    is an error listing them, as a speedup over a subset would mislead.
    """
    _same_configurations(baseline, candidate)
    return [
        Measurement(
            config,
            check_time(baseline[config], f"baseline {config}"),
            check_time(candidate[config], f"candidate {config}"),
        )
        for config in baseline
    ]


def pair_samples(
    baseline: Mapping[str, Sequence[float]], candidate: Mapping[str, Sequence[float]]
) -> list[Measurement]:
    """Pair baseline and candidate samples by configuration (baseline's order), as
    :func:`pair_timings` pairs single times."""
    _same_configurations(baseline, candidate)
    return [measurement_of(config, baseline[config], candidate[config]) for config in baseline]


def load_measurements(
    *,
    baseline: Path | str | None = None,
    candidate: Path | str | None = None,
    table: Path | str | None = None,
    stat: str = "median",
) -> list[Measurement]:
    """One number a side per configuration from files: ``baseline`` and ``candidate``
    timings (in any format :mod:`kexp.measure.timings` reads; samples reduced with ``stat``),
    or one ``table`` (its samples kept)."""
    if table is not None:
        if baseline is not None or candidate is not None:
            raise MeasurementError("give either a table or baseline and candidate files, not both")
        return read_table(table)
    if baseline is None or candidate is None:
        raise MeasurementError("give both a baseline and a candidate timings file (or a table)")
    base, cand = (
        _timings_of(v, n, "us", stat) for n, v in (("baseline", baseline), ("candidate", candidate))
    )
    same_kind(base, cand)
    return pair_timings(
        *(
            {c: _reduce(v, stat, f"{side.form} {c}") for c, v in side.times.items()}
            for side in (base, cand)
        )
    )


def sides_of(m: Measurement) -> tuple[tuple[float, ...], tuple[float, ...]]:
    """A measurement's (baseline, candidate) samples (a single time as one sample)."""
    return (m.baseline_samples or (m.baseline,), m.candidate_samples or (m.candidate,))


@dataclasses.dataclass(frozen=True)
class Gathered:
    """The measurements of the timings given, the protocol fields they tell, and a
    line for ``raw_result`` about them (summaries without raw samples)."""

    measurements: list[Measurement]
    protocol: dict[str, Any] = dataclasses.field(default_factory=dict)
    note: str = ""
    #: Whether the times were read in the unit given, their files not saying theirs.
    unit_unstated: bool = False


def gather(
    baseline: Path | str | Mapping[str, Any] | None,
    candidate: Path | str | Mapping[str, Any] | None,
    table: Path | str | None,
    measurements: Sequence[Measurement] | None,
    stat: str,
    unit: str = "us",
) -> Gathered | None:
    """The measurements of the timings given (None when none are): a reader's warnings
    are issued (:class:`TimingsWarning`)."""
    given = [x is not None for x in (baseline or candidate, table, measurements)]
    if sum(given) > 1:
        raise MeasurementError(
            "give one source of timings: baseline and candidate, a table, or measurements"
        )
    check_stat(stat)
    if measurements is not None:
        return Gathered(list(measurements))
    if table is not None:
        found = read_table(table, unit=unit)
        reduced = found if stat == "median" else [_reduced(m, stat) for m in found]
        return Gathered(reduced, unit_unstated=True)
    if baseline is None and candidate is None:
        return None
    if baseline is None or candidate is None:
        raise MeasurementError("give both baseline and candidate timings")
    base = _timings_of(baseline, "baseline", unit, stat)
    cand = _timings_of(candidate, "candidate", unit, stat)
    same_kind(base, cand)
    # before a warning: nothing is recorded
    _same_configurations(base.times, cand.times, cand.form)
    _not_one_run(baseline, candidate, base, cand)
    untold = untold_kind(base, cand)
    said = (*base.warnings, *cand.warnings, *([untold] if untold else []))
    for message in dict.fromkeys(said):  # each once
        warnings.warn(message, TimingsWarning, stacklevel=4)
    protocol = {**base.protocol, **cand.protocol}
    if base.summary or cand.summary:
        return Gathered(_summaries(base, cand, stat), protocol, _summary_note(base, cand, stat))
    unstated = {base.form, cand.form} <= UNSTATED_UNIT_FORMS and not (
        base.unit_stated and cand.unit_stated
    )
    if stat != "median":  # the old reduction: one number a side, no interval
        one = [{c: _reduce(v, stat, c) for c, v in t.times.items()} for t in (base, cand)]
        return Gathered(pair_timings(*one), protocol, unit_unstated=unstated)
    return Gathered(pair_samples(base.times, cand.times), protocol, unit_unstated=unstated)


def _not_one_run(
    baseline: Path | str | Mapping[str, Any],
    candidate: Path | str | Mapping[str, Any],
    base: Timings,
    cand: Timings,
) -> None:
    """Refuse one run given as both sides: the same file, or the same samples in the
    same order, more than two values among them (a copy), scores 1.0 within noise
    whatever the code did; an A/A control is two runs of the same code, and one run
    given twice measures none of the drift between runs."""
    if isinstance(baseline, Mapping) or isinstance(candidate, Mapping):
        same_file = False
    else:
        same_file = Path(baseline).resolve() == Path(candidate).resolve()
    # the same values in the same order: a copy, unless too few values tell (a coarse
    # timer's samples, all one tick, repeat from run to run)
    copied = not base.summary and base.times == cand.times
    copied = copied and any(len(set(samples)) > 2 for samples in base.times.values())
    if not (same_file or copied):
        return
    what = (
        f"the same file ({baseline})"
        if same_file
        else "the same samples, sample for sample (a copy of one run)"
    )
    raise MeasurementError(
        f"the baseline and the candidate are {what}, and nothing was written: one run scores "
        "1.0 whatever the code did, and an A/A control is two runs of the same code; give "
        "the candidate's own timings (a file holding both versions: time each in a run of "
        "its own)"
    )


def _summaries(base: Timings, cand: Timings, stat: str) -> list[Measurement]:
    """One number a side per configuration when a side is a summary: the other side's
    raw samples reduced with ``stat`` (and counted)."""
    for sampled, name, other in ((base, "baseline", cand), (cand, "candidate", base)):
        if not sampled.summary:
            warnings.warn(
                f"the {name}'s raw samples were reduced to their {stat} and recorded without "
                f"an interval: the {'candidate' if name == 'baseline' else 'baseline'} "
                f"({other.form}) is a summary without raw samples",
                TimingsWarning,
                stacklevel=5,
            )

    def side(timings: Timings, config: str) -> tuple[float, int | None]:
        times = timings.times[config]
        if timings.summary:
            return times[0], timings.counts.get(config)
        return _reduce(times, stat, config), len(times)

    found = []
    for config in base.times:
        (b, b_n), (c, c_n) = side(base, config), side(cand, config)
        found.append(
            Measurement(config, tidy(b), tidy(c), summary=True, baseline_n=b_n, candidate_n=c_n)
        )
    return found


def _summary_note(base: Timings, cand: Timings, stat: str) -> str:
    """The ``raw_result`` line saying the timings are summaries without raw samples."""

    def what(timings: Timings) -> str:
        if timings.summary:
            return f"{timings.form}, the {timings.statistic} of each configuration's runs"
        return f"{timings.form}, the {stat} of the raw samples"

    if base.form == cand.form and base.statistic == cand.statistic:
        sides = what(base)
    else:
        sides = f"baseline: {what(base)}; candidate: {what(cand)}"
    return f"**Timings**: summaries without raw samples ({sides}): no interval"


def _reduced(m: Measurement, stat: str) -> Measurement:
    base, cand = sides_of(m)
    return Measurement(m.config, _reduce(base, stat, m.config), _reduce(cand, stat, m.config))
