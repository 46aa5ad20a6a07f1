"""Score from measurements: timings in, ``score``, ``results`` and ``raw_result`` out.

Timings come as baseline and candidate times per configuration, from

* two JSON files ``{"config": microseconds, ...}``, or ``{"config": [samples], ...}``
  (repeated timings: what ``triton.testing.do_bench(..., return_mode="all")`` and
  ``torch.utils.benchmark``'s ``Measurement.times`` give; pass ``unit`` when they are
  not microseconds);
* two pytest-benchmark JSON files (``pytest --benchmark-json``): each benchmark's
  ``name`` is the configuration, its raw ``stats.data`` (seconds, kept with
  ``--benchmark-save-data``) the samples, else ``stats[stat]`` the time;
* two CSV files with ``config,time`` columns, or one CSV table with
  ``config,baseline,candidate`` columns (several rows of a configuration: its samples).

With repeated timings the file keeps per configuration the median of each side, the
sample counts and interquartile ranges (``results``), the score's 95 % interval
(``score_ci``, see :mod:`kexp.noise`) and the raw samples in a ``## Samples`` section
(:mod:`kexp.samples`; ``keep_samples=False`` leaves them out, and with them the chance
to pool a later round: :func:`remeasure`). Single numbers are recorded as before. A
``stat`` other than the median reduces samples to one number, as before (no interval).

CSV headers are matched case-insensitively; a time column may name its unit
(``baseline_ms``, ``candidate (ns)``; microseconds otherwise). Every time is stored in
microseconds (``unit: us``).

:func:`score_measurements` computes each configuration's speedup (baseline / candidate),
the ``score`` as their geometric mean (4 decimals), the ``results`` list, and the
``raw_result`` text in the skill's format::

    Iteration 3 Results - SUCCESS:

    **Overall**: 1.0190x speedup = +1.90% IMPROVEMENT

    **Per-kernel breakdown**:
    - cache_b8_s1024: 1.0170x (+1.70%)  12.30 -> 12.09 µs

:func:`record_iteration` does all of it and records the experiment in one call;
:func:`remeasure` adds a round of measurement to a recorded experiment.
"""

from __future__ import annotations

import csv
import dataclasses
import io
import json
import math
import re
import statistics
import warnings
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from kexp.errors import KexpError, SuspectMeasurementWarning
from kexp.settings import DEFAULT_SETTINGS, Settings
from kexp.suspect import SUSPECT_LABEL, UNIT_TO_US, suspect_reasons

if TYPE_CHECKING:
    from kexp.samples import Round

if TYPE_CHECKING:
    from kexp.model import KernelExperiment
    from kexp.store import Store

#: Statistics a list of samples (or a pytest-benchmark entry) can be reduced with.
STATS = ("median", "mean", "min", "max")
_UNIT_IN_HEADER = re.compile(
    r"(?P<name>.*?)(?:\s*\(\s*(?P<unit>[^()\s]+)\s*\)|[\s_](?P<suffix>[^\s_]+))"
)
_CONFIG_NAMES = ("config", "configuration", "name", "shape", "case", "benchmark")


class MeasurementError(KexpError, ValueError):
    """Timings cannot be read or paired; the message says which file and configuration."""


@dataclasses.dataclass(frozen=True)
class Measurement:
    """One configuration's baseline and candidate times, in microseconds.

    Measured with repeated timings, ``baseline_samples`` and ``candidate_samples`` hold
    them and ``baseline`` and ``candidate`` are their medians (see
    :func:`measurement_of`).
    """

    config: str
    baseline: float
    candidate: float
    baseline_samples: tuple[float, ...] = ()
    candidate_samples: tuple[float, ...] = ()

    @property
    def has_samples(self) -> bool:
        """Whether a side was timed more than once."""
        return len(self.baseline_samples) > 1 or len(self.candidate_samples) > 1

    @property
    def speedup(self) -> float:
        """Baseline time over candidate time (> 1 is faster)."""
        return self.baseline / self.candidate

    def to_result(self) -> dict[str, Any]:
        """The entry of the ``results`` field."""
        return {
            "config": self.config,
            "baseline": _tidy(self.baseline),
            "candidate": _tidy(self.candidate),
            "speedup": round(self.speedup, 4),
            "unit": "us",
        }


def _tidy(value: float) -> float | int:
    """A time without float noise from unit conversion (12.000000000000002 -> 12.0)."""
    return float(f"{value:.12g}")


def measurement_of(
    config: str, baseline: Sequence[float], candidate: Sequence[float]
) -> Measurement:
    """A configuration's measurement from its samples (microseconds): the times are
    their medians. Repeated timings are kept as :func:`kexp.samples.kept_sample` keeps
    them; one number a side is a plain measurement, as before."""
    from kexp.samples import kept_sample

    if not baseline or not candidate:
        raise MeasurementError(f"{config}: no samples")
    if len(baseline) == 1 and len(candidate) == 1:
        return Measurement(config, _tidy(baseline[0]), _tidy(candidate[0]))
    base = tuple(kept_sample(v) for v in baseline)
    cand = tuple(kept_sample(v) for v in candidate)
    return Measurement(
        config, float(statistics.median(base)), float(statistics.median(cand)), base, cand
    )


@dataclasses.dataclass(frozen=True)
class Scored:
    """The fields computed from measurements."""

    score: float
    results: list[dict[str, Any]]
    raw_result: str
    measurements: tuple[Measurement, ...]
    #: The score's 95 % interval (empty without enough samples).
    score_ci: list[float] = dataclasses.field(default_factory=list)
    #: The ``## Samples`` section (empty without samples, or when not kept).
    samples: str = ""

    def fields(self) -> dict[str, Any]:
        """``score``, ``results`` and ``raw_result`` (and ``score_ci`` and ``samples``
        when measured with samples), ready for ``create_experiment``."""
        data: dict[str, Any] = {
            "score": self.score,
            "results": self.results,
            "raw_result": self.raw_result,
        }
        if self.score_ci:
            data["score_ci"] = self.score_ci
        if self.samples:
            data["samples"] = self.samples
        return data


# --- reading -------------------------------------------------------------------------


def _check_time(value: Any, where: str) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise MeasurementError(f"{where}: time {value!r} is not a number")
    number = float(value)
    if not math.isfinite(number) or number <= 0:
        raise MeasurementError(
            f"{where}: time {value!r} must be a positive number of microseconds "
            "(0 means nothing was measured: record score 0 instead)"
        )
    return number


def _reduce(samples: Sequence[Any], stat: str, where: str) -> float:
    values = [_check_time(v, where) for v in samples]
    if not values:
        raise MeasurementError(f"{where}: no samples")
    if stat == "median":
        return float(statistics.median(values))
    if stat == "mean":
        return float(statistics.fmean(values))
    if stat == "min":
        return min(values)
    if stat == "max":
        return max(values)
    raise MeasurementError(f"unknown statistic {stat!r}; use one of {', '.join(STATS)}")


def parse_timings(
    data: Any, *, source: str = "<timings>", stat: str = "median"
) -> dict[str, float]:
    """Timings (microseconds per configuration) from decoded JSON.

    ``data`` is ``{config: microseconds}`` (or ``{config: [samples]}``), or a
    pytest-benchmark document (``{"benchmarks": [...]}``, times in seconds).
    """
    if stat not in STATS:
        raise MeasurementError(f"unknown statistic {stat!r}; use one of {', '.join(STATS)}")
    if isinstance(data, Mapping) and isinstance(data.get("benchmarks"), list):
        timings: dict[str, float] = {}
        for index, entry in enumerate(data["benchmarks"]):
            where = f"{source}: benchmarks[{index}]"
            if not isinstance(entry, Mapping) or not isinstance(entry.get("stats"), Mapping):
                raise MeasurementError(f"{where} has no 'stats'")
            name = entry.get("name") or entry.get("fullname")
            if not isinstance(name, str) or not name:
                raise MeasurementError(f"{where} has no 'name'")
            if stat not in entry["stats"]:
                raise MeasurementError(f"{where} ({name}) has no stats.{stat}")
            if name in timings:
                raise MeasurementError(f"{source}: benchmark {name!r} appears twice")
            seconds = _check_time(entry["stats"][stat], f"{where} ({name})")
            timings[name] = _tidy(seconds * UNIT_TO_US["s"])
        return timings
    if not isinstance(data, Mapping):
        raise MeasurementError(
            f"{source}: expected a JSON object {{config: microseconds}} or pytest-benchmark output"
        )
    result: dict[str, float] = {}
    for config, value in data.items():
        where = f"{source}: {config}"
        if isinstance(value, list):
            result[str(config)] = _reduce(value, stat, where)
        else:
            result[str(config)] = _check_time(value, where)
    return result


#: Timings per configuration, in microseconds: one number or several (samples).
SampleTimings = dict[str, list[float]]


def _unit_factor(unit: str) -> float:
    factor = UNIT_TO_US.get(unit)
    if factor is None:
        raise MeasurementError(f"unknown unit {unit!r}; use one of {', '.join(UNIT_TO_US)}")
    return factor


def _sample_list(value: Any, factor: float, where: str) -> list[float]:
    """One configuration's timings in microseconds: a number, a list of numbers, or a
    ``torch.utils.benchmark`` measurement (its ``times``, in seconds)."""
    times = getattr(value, "times", None)
    if isinstance(times, list) and not isinstance(value, (list, tuple)):
        return [_tidy(_check_time(v, where) * UNIT_TO_US["s"]) for v in times] or _no_samples(where)
    if isinstance(value, (list, tuple)):
        if not value:
            _no_samples(where)
        return [_tidy(_check_time(v, where) * factor) for v in value]
    return [_tidy(_check_time(value, where) * factor)]


def _no_samples(where: str) -> list[float]:
    raise MeasurementError(f"{where}: no samples")


def parse_sample_timings(
    data: Any, *, source: str = "<timings>", unit: str = "us", stat: str = "median"
) -> SampleTimings:
    """Timings (microseconds, one or more per configuration) from decoded JSON.

    ``data`` is ``{config: time}`` or ``{config: [times]}`` in ``unit``, or a
    pytest-benchmark document: each benchmark's raw ``stats.data`` (seconds), or
    ``[stats[stat]]`` when the raw data was not saved.
    """
    factor = _unit_factor(unit)
    if isinstance(data, Mapping) and isinstance(data.get("benchmarks"), list):
        timings: SampleTimings = {}
        for index, entry in enumerate(data["benchmarks"]):
            where = f"{source}: benchmarks[{index}]"
            if not isinstance(entry, Mapping) or not isinstance(entry.get("stats"), Mapping):
                raise MeasurementError(f"{where} has no 'stats'")
            name = entry.get("name") or entry.get("fullname")
            if not isinstance(name, str) or not name:
                raise MeasurementError(f"{where} has no 'name'")
            if name in timings:
                raise MeasurementError(f"{source}: benchmark {name!r} appears twice")
            stats = entry["stats"]
            raw = stats.get("data")
            if isinstance(raw, list) and raw:
                timings[name] = _sample_list(raw, UNIT_TO_US["s"], f"{where} ({name})")
            elif stat in stats:
                timings[name] = _sample_list(stats[stat], UNIT_TO_US["s"], f"{where} ({name})")
            else:
                raise MeasurementError(f"{where} ({name}) has no stats.data or stats.{stat}")
        return timings
    if not isinstance(data, Mapping):
        raise MeasurementError(
            f"{source}: expected a JSON object {{config: microseconds}} or pytest-benchmark output"
        )
    return {str(c): _sample_list(v, factor, f"{source}: {c}") for c, v in data.items()}


def protocol_of(data: Any) -> dict[str, Any]:
    """The protocol fields a timings document tells (pytest-benchmark: a wall clock,
    ``repetitions`` its iterations per round when every benchmark agrees); empty for
    plain timings."""
    if not (isinstance(data, Mapping) and isinstance(data.get("benchmarks"), list)):
        return {}
    found: dict[str, Any] = {"timer": "wall_clock"}
    iterations = {
        entry["stats"].get("iterations")
        for entry in data["benchmarks"]
        if isinstance(entry, Mapping) and isinstance(entry.get("stats"), Mapping)
    }
    if len(iterations) == 1:
        (count,) = iterations
        if isinstance(count, int) and not isinstance(count, bool) and count >= 1:
            found["repetitions"] = count
    return found


def _protocol_of_values(values: Mapping[str, Any]) -> dict[str, Any]:
    """The protocol of ``torch.utils.benchmark`` measurements given as values."""
    runs = {getattr(v, "number_per_run", None) for v in values.values() if hasattr(v, "times")}
    if not runs:
        return {}
    found: dict[str, Any] = {"timer": "torch_benchmark"}
    if len(runs) == 1:
        (count,) = runs
        if isinstance(count, int) and not isinstance(count, bool) and count >= 1:
            found["repetitions"] = count
    return found


def _load_json(path: Path) -> Any:
    try:
        return json.loads(path.read_text(encoding="utf-8-sig"))
    except OSError as exc:
        raise MeasurementError(f"cannot read {path}: {exc.strerror or exc}") from None
    except json.JSONDecodeError as exc:
        raise MeasurementError(f"{path}:{exc.lineno}:{exc.colno}: not JSON: {exc.msg}") from None


def read_sample_timings(
    path: Path | str, *, unit: str = "us", stat: str = "median"
) -> SampleTimings:
    """Timings (microseconds, one or more per configuration) from a JSON,
    pytest-benchmark or CSV file (a CSV ``config,time``: one row per sample; a unit in
    the time column's header wins over ``unit``)."""
    return _read_samples(Path(path), unit, stat)[0]


def _read_samples(path: Path, unit: str, stat: str) -> tuple[SampleTimings, dict[str, Any]]:
    """(timings, protocol fields the file tells) of a timings file."""
    if path.suffix.lower() != ".csv":
        data = _load_json(path)
        return parse_sample_timings(data, source=str(path), unit=unit, stat=stat), protocol_of(data)
    columns, rows = _read_csv(path, _unit_factor(unit))
    if len(columns) < 2:
        raise MeasurementError(f"{path}: expected two columns, config and time")
    factor = columns[1][1]
    timings: SampleTimings = {}
    for number, row in enumerate(rows, 2):
        config = row[0].strip()
        if not config:
            raise MeasurementError(f"{path}:{number}: the configuration is empty")
        timings.setdefault(config, []).append(
            _cell_time(row, 1, factor, f"{path}:{number} ({config})")
        )
    return timings, {}


def _split_header(header: str, default: float = 1.0) -> tuple[str, float]:
    """A CSV column's name (lowercase) and the factor that turns its values into us
    (``default`` when the header names no unit)."""
    text = header.strip().lower()
    match = _UNIT_IN_HEADER.fullmatch(text)
    if match is not None:
        unit = match.group("unit") or match.group("suffix")
        if unit in UNIT_TO_US:
            return match.group("name").strip(), UNIT_TO_US[unit]
    return text, default


def _read_csv(path: Path, default: float = 1.0) -> tuple[list[tuple[str, float]], list[list[str]]]:
    try:
        text = path.read_text(encoding="utf-8-sig")
    except OSError as exc:
        raise MeasurementError(f"cannot read {path}: {exc.strerror or exc}") from None
    rows = [row for row in csv.reader(io.StringIO(text)) if any(cell.strip() for cell in row)]
    if not rows:
        raise MeasurementError(f"{path}: the file is empty")
    return [_split_header(h, default) for h in rows[0]], rows[1:]


def _column(columns: list[tuple[str, float]], names: Iterable[str], path: Path) -> int:
    wanted = tuple(names)
    for index, (name, _) in enumerate(columns):
        if name in wanted:
            return index
    found = ", ".join(name for name, _ in columns)
    raise MeasurementError(f"{path}: no column named {' or '.join(wanted)} (found: {found})")


def _cell_time(row: list[str], index: int, factor: float, where: str) -> float:
    cell = row[index].strip() if index < len(row) else ""
    try:
        value = float(cell)
    except ValueError:
        raise MeasurementError(f"{where}: {cell!r} is not a number") from None
    return _tidy(_check_time(value, where) * factor)


def read_timings(path: Path | str, *, stat: str = "median") -> dict[str, float]:
    """Timings (microseconds per configuration) from a JSON, pytest-benchmark or CSV file.

    A CSV file has a header and two columns: the configuration and its time (the
    second column's header may name its unit, e.g. ``time_ms``); several rows of a
    configuration, like a list of samples in JSON, are reduced with ``stat``.
    """
    path = Path(path)
    if path.suffix.lower() == ".csv":
        samples = read_sample_timings(path)
        return {c: _reduce(v, stat, f"{path} ({c})") for c, v in samples.items()}
    return parse_timings(_load_json(path), source=str(path), stat=stat)


def read_table(path: Path | str, *, unit: str = "us") -> list[Measurement]:
    """Measurements from one CSV table with ``config``, ``baseline``, ``candidate``
    columns (a unit in a column's header wins over ``unit``). Several rows of a
    configuration are its samples, one a side per row."""
    path = Path(path)
    columns, rows = _read_csv(path, _unit_factor(unit))
    config_at = _column(columns, _CONFIG_NAMES, path)
    base_at = _column(columns, ("baseline", "base", "before"), path)
    cand_at = _column(columns, ("candidate", "cand", "after", "new"), path)
    sides: dict[str, tuple[list[float], list[float]]] = {}
    for number, row in enumerate(rows, 2):
        config = row[config_at].strip() if config_at < len(row) else ""
        where = f"{path}:{number} ({config})"
        if not config:
            raise MeasurementError(f"{path}:{number}: the configuration is empty")
        base, cand = sides.setdefault(config, ([], []))
        base.append(_cell_time(row, base_at, columns[base_at][1], where))
        cand.append(_cell_time(row, cand_at, columns[cand_at][1], where))
    if not sides:
        raise MeasurementError(f"{path}: no rows below the header")
    return [measurement_of(config, base, cand) for config, (base, cand) in sides.items()]


def _same_configurations(baseline: Mapping[str, Any], candidate: Mapping[str, Any]) -> None:
    only_base = [c for c in baseline if c not in candidate]
    only_cand = [c for c in candidate if c not in baseline]
    if only_base or only_cand:
        parts = []
        if only_base:
            parts.append(f"only in the baseline: {', '.join(only_base)}")
        if only_cand:
            parts.append(f"only in the candidate: {', '.join(only_cand)}")
        raise MeasurementError(
            "baseline and candidate measured different configurations (" + "; ".join(parts) + ")"
        )
    if not baseline:
        raise MeasurementError("no configurations were measured")


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
            _check_time(baseline[config], f"baseline {config}"),
            _check_time(candidate[config], f"candidate {config}"),
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
    """Measurements from files: ``baseline`` and ``candidate`` timings, or one ``table``."""
    if table is not None:
        if baseline is not None or candidate is not None:
            raise MeasurementError("give either a table or baseline and candidate files, not both")
        return read_table(table)
    if baseline is None or candidate is None:
        raise MeasurementError("give both a baseline and a candidate timings file (or a table)")
    return pair_timings(read_timings(baseline, stat=stat), read_timings(candidate, stat=stat))


# --- scoring -------------------------------------------------------------------------


def geometric_mean(values: Iterable[float]) -> float:
    """The geometric mean of positive numbers."""
    numbers = [float(v) for v in values]
    if not numbers:
        raise MeasurementError("the geometric mean of nothing is undefined")
    if any(not (v > 0 and math.isfinite(v)) for v in numbers):
        raise MeasurementError("the geometric mean needs positive, finite numbers")
    return math.exp(math.fsum(math.log(v) for v in numbers) / len(numbers))


def _time(microseconds: float) -> str:
    return f"{microseconds:.2f}" if microseconds >= 1 else f"{microseconds:.4g}"


def _percent(speedup: float) -> str:
    return f"{(speedup - 1) * 100:+.2f}%"


def verdict(
    score: float, settings: Settings = DEFAULT_SETTINGS, interval: Sequence[float] = ()
) -> tuple[str, str]:
    """The words of the raw-result header and overall line: (``SUCCESS``, ``IMPROVEMENT``),
    (``MARGINAL``, ``MARGINAL``) or (``REGRESSION``, ``REGRESSION``); with an
    ``interval``, as the outcome is derived (a score past a threshold whose interval
    holds 1 is ``MARGINAL``, "within noise")."""
    from kexp.model import KernelExperiment, outcome_of

    found = outcome_of(
        KernelExperiment(score=score, score_ci=list(interval), status="done"), settings
    )
    if found == "improvement":
        return "SUCCESS", "IMPROVEMENT"
    if found == "regression":
        return "REGRESSION", "REGRESSION"
    beyond = score > settings.improvement_above or score < settings.regression_below
    return "MARGINAL", "MARGINAL (within noise)" if interval and beyond else "MARGINAL"


def raw_result_text(
    measurements: Sequence[Measurement],
    score: float,
    *,
    iteration: int | None = None,
    settings: Settings = DEFAULT_SETTINGS,
    interval: Sequence[float] = (),
    title: str | None = None,
) -> str:
    """The ``raw_result`` text in the skill's format (overall, then one line per config);
    with samples, the interval and each configuration's sample counts too."""
    header, overall = verdict(score, settings, interval)
    if title is None:
        title = f"Iteration {iteration} Results" if iteration is not None else "Results"
    spread = f" (95% interval {interval[0]:.4f}-{interval[1]:.4f})" if interval else ""
    lines = [
        f"{title} - {header}:",
        "",
        f"**Overall**: {score:.4f}x speedup{spread} = {_percent(score)} {overall}",
        "",
        "**Per-kernel breakdown**:",
    ]
    for m in measurements:
        counts = ""
        if m.has_samples:
            base, cand = len(m.baseline_samples) or 1, len(m.candidate_samples) or 1
            counts = f" (medians of {base} / {cand} samples)"
        lines.append(
            f"- {m.config}: {m.speedup:.4f}x ({_percent(m.speedup)})  "
            f"{_time(m.baseline)} -> {_time(m.candidate)} µs{counts}"
        )
    return "\n".join(lines)


def score_measurements(
    measurements: Sequence[Measurement],
    *,
    iteration: int | None = None,
    settings: Settings = DEFAULT_SETTINGS,
    keep_samples: bool = True,
    rounds: Sequence[Round] | None = None,
    protocol: Mapping[str, Any] | None = None,
    title: str | None = None,
) -> Scored:
    """``score`` (geometric mean of speedups, 4 decimals), ``results`` and ``raw_result``.

    Measured with samples, ``results`` hold medians, counts and interquartile ranges,
    ``score_ci`` the score's interval and ``samples`` the ``## Samples`` section (the
    ``rounds`` given, else one round of these measurements; none when not
    ``keep_samples``). ``protocol`` (how it was measured) informs the plausibility check.
    """
    if not measurements:
        raise MeasurementError("no configurations were measured")
    interval: list[float] = []
    samples_text = ""
    if any(m.has_samples for m in measurements):
        from kexp.samples import Round, render_samples, summarize

        pooled = {m.config: _sides(m) for m in measurements}
        summary = summarize(pooled)
        results, score, interval = summary.results, summary.score, summary.score_ci
        if keep_samples:
            samples_text = render_samples(rounds if rounds is not None else [Round(pooled)])
    else:
        results = [m.to_result() for m in measurements]
        score = round(geometric_mean(m.speedup for m in measurements), 4)
    text = raw_result_text(
        measurements, score, iteration=iteration, settings=settings, interval=interval, title=title
    )
    from kexp.model import KernelExperiment

    judged = KernelExperiment(score=score, results=results, protocol=dict(protocol or {}))
    reasons = suspect_reasons(judged, settings)
    if reasons:
        text += f"\n\n**{SUSPECT_LABEL}**: " + "; ".join(reasons)
    return Scored(score, results, text, tuple(measurements), interval, samples_text)


def _kept_round(
    timings: Mapping[str, tuple[Sequence[float], Sequence[float]]],
) -> Round:
    """A round of ``timings`` with each sample as :func:`kexp.samples.kept_sample` keeps
    it."""
    from kexp.samples import Round, kept_sample

    return Round(
        {
            config: (tuple(map(kept_sample, base)), tuple(map(kept_sample, cand)))
            for config, (base, cand) in timings.items()
        }
    )


def _sides(m: Measurement) -> tuple[tuple[float, ...], tuple[float, ...]]:
    """A measurement's (baseline, candidate) samples (a single time as one sample)."""
    return (m.baseline_samples or (m.baseline,), m.candidate_samples or (m.candidate,))


# --- recording -------------------------------------------------------------------------

_PROTOCOL_BOOLEANS = {"true": True, "yes": True, "1": True, "false": False, "no": False, "0": False}


def parse_protocol(assignments: Iterable[str]) -> dict[str, Any]:
    """``protocol`` fields from ``KEY=VALUE`` texts (``kexp add --protocol``): ``timer``
    text, ``warmup`` and ``repetitions`` counts, ``synchronized``, ``l2_flushed`` and
    ``clocks_locked`` true or false."""
    from kexp.model import PROTOCOL_KEYS

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
    unit: str = "us",
    keep_samples: bool = True,
) -> dict[str, Any]:
    """``fields`` with ``score``, ``results`` and ``raw_result`` computed from timings.

    Timings are ``baseline`` and ``candidate`` (files, or ``{config: times}`` dicts:
    a number or a list of samples in ``unit``, or a ``torch.utils.benchmark``
    measurement), or a ``table`` file, or ready ``measurements``; without any,
    ``fields`` come back as they are. With samples, ``score_ci`` and the ``## Samples``
    section (unless not ``keep_samples``) are filled too, and the ``protocol`` fields
    the timings tell (pytest-benchmark, torch.utils.benchmark) are added to any given.
    A ``raw_result`` already in ``fields`` is kept below the computed breakdown.
    Giving timings and a ``score`` or ``results`` is an error (the score is computed).
    With a ``pid``, ``measured_against`` defaults to ``parent`` (the baseline is the
    parent's code, the commit the change was made on); give ``reference`` when the
    baseline is the operator's original code. ``iteration`` (the raw-result header)
    defaults to the number of this operator's experiments recorded so far plus one.
    This is what ``kexp add --baseline/--candidate/--timings`` does.
    """
    data = dict(fields)
    gathered = _gather(baseline, candidate, table, measurements, stat, unit)
    if gathered is None:
        return data
    found, detected = gathered
    if "score" in data or "results" in data or "score_ci" in data:
        raise MeasurementError(
            "give timings or score/results, not both: the score is computed from timings"
        )
    if data.get("pid") and not data.get("measured_against"):
        data["measured_against"] = "parent"
    if iteration is None:
        iteration = operator_iteration(store, data.get("operator_sig"))
    protocol = {**detected, **(data.get("protocol") or {})}
    if protocol:
        data["protocol"] = protocol
    scored = score_measurements(
        found,
        iteration=iteration,
        settings=store.settings,
        keep_samples=keep_samples,
        protocol=protocol,
    )
    given = data.pop("raw_result", "")
    data.update(scored.fields())
    if given:
        data["raw_result"] = f"{scored.raw_result}\n\n{given}"
    return data


def operator_iteration(store: Store, operator_sig: Any) -> int | None:
    """The iteration number of the next experiment on ``operator_sig``: its experiments
    recorded so far (every one, whatever its lineage), plus one. None without an
    operator."""
    if not isinstance(operator_sig, str) or not operator_sig.strip():
        return None
    found = store.list_experiments(brief=True, operator=operator_sig)
    return 1 + sum(1 for exp in found if exp.operator_sig == operator_sig)


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
    unit: str = "us",
    keep_samples: bool = True,
    **fields: Any,
) -> KernelExperiment:
    """Record one optimization iteration in one call; returns the stored experiment.

    Timings (``baseline`` and ``candidate`` as files or ``{config: times}`` dicts, a
    number or a list of samples each, in ``unit``; or a ``table`` file, or ready
    ``measurements``) fill ``score``, ``results`` and the ``raw_result`` breakdown,
    and with samples ``score_ci`` and the ``## Samples`` section (see
    :func:`with_timings`). ``protocol={...}`` says how they were measured (timer,
    warmup, repetitions, l2_flushed, clocks_locked, synchronized). Without timings,
    ``score`` must be among ``fields``. ``status`` defaults to ``done``. The store
    (default: the default store) fills id, created_at, base_commit and author,
    validates, and writes; a repeated code change
    (:class:`kexp.errors.RepeatedChangeWarning`, or
    :class:`kexp.errors.RemeasureWarning` when base commit and env repeat too: use
    :func:`remeasure`) and a suspect measurement (:class:`SuspectMeasurementWarning`)
    are warnings, not errors.
    """
    if store is None:
        from kexp import default_store

        store = default_store()
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
    )
    if "score" not in data:
        raise MeasurementError(
            "no score: give baseline and candidate timings (or a table), or score=..."
        )
    data.setdefault("status", "done")
    exp = store.create_experiment(**data)
    warn_if_suspect(exp, store.settings)
    return exp


def earlier_rounds(exp: KernelExperiment) -> list[Round]:
    """The rounds of measurement an experiment holds: its ``## Samples`` section, or
    its single-number ``results`` as one round of one sample a side.

    Raises :class:`MeasurementError` when there is nothing to pool with: no timings,
    or samples summarised in ``results`` but not kept.
    """
    from kexp.samples import Round, SamplesError, parse_samples, sample_count

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
                f"experiment {exp.id} was recorded without its raw samples "
                "(keep_samples=False): a new round cannot be pooled with them; record "
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
        base, cand = (_tidy(float(v) * scale) for v in times)  # type: ignore[arg-type]
        timings[str(result["config"])] = ((base,), (cand,))
    if not timings:
        raise MeasurementError(
            f"experiment {exp.id} has no per-configuration timings (results) to pool a new "
            "round with: correct its score with kexp update --set score=... --reason ..."
        )
    return [Round(timings)]


def remeasure(
    store: Store | None,
    exp_id: str,
    *,
    baseline: Path | str | Mapping[str, Any] | None = None,
    candidate: Path | str | Mapping[str, Any] | None = None,
    table: Path | str | None = None,
    measurements: Sequence[Measurement] | None = None,
    unit: str = "us",
    reason: str | None = None,
) -> KernelExperiment:
    """Add a round of measurement to an experiment: no best-of-N.

    The new timings (as :func:`record_iteration` takes them, of the same
    configurations, measured the same way) are pooled with every earlier round
    (:func:`earlier_rounds`); ``score``, ``score_ci`` and ``results`` are recomputed,
    the round is added to the ``## Samples`` section and its breakdown to
    ``raw_result``, and the correction is recorded as ``kexp update --reason`` records
    one (old → new, and ``reason``, by default "remeasured: round N pooled with the
    earlier ones"). The Python twin of ``kexp remeasure``.
    """
    from kexp.corrections import correct
    from kexp.samples import pooled

    if store is None:
        from kexp import default_store

        store = default_store()
    exp = store.get_experiment(exp_id)
    gathered = _gather(baseline, candidate, table, measurements, "median", unit)
    if gathered is None:
        raise MeasurementError("give the new round's baseline and candidate timings (or a table)")
    found, _ = gathered
    # Every round as its samples are kept (measurement_of keeps them so): the file's
    # Samples section then gives exactly the results computed here.
    rounds = [_kept_round(r.timings) for r in earlier_rounds(exp)]
    new_round = _kept_round({m.config: _sides(m) for m in found})
    _same_configurations(rounds[0].timings, new_round.timings)
    rounds.append(new_round)
    together = [measurement_of(config, *sides) for config, sides in pooled(rounds).items()]
    number = len(rounds)
    scored = score_measurements(
        together,
        settings=store.settings,
        rounds=rounds,
        protocol=exp.protocol,
        title=f"Round {number} pooled with rounds 1-{number - 1} Results"
        if number > 2
        else "Round 2 pooled with round 1 Results",
    )
    changes: dict[str, Any] = {
        "score": scored.score,
        "score_ci": scored.score_ci,
        "results": scored.results,
        "samples": scored.samples,
        "raw_result": f"{exp.raw_result.rstrip()}\n\n{scored.raw_result}".lstrip(),
    }
    why = reason or f"remeasured: round {number} pooled with the earlier ones"
    return correct(store, exp.id, changes, why)


def _gather(
    baseline: Path | str | Mapping[str, Any] | None,
    candidate: Path | str | Mapping[str, Any] | None,
    table: Path | str | None,
    measurements: Sequence[Measurement] | None,
    stat: str,
    unit: str = "us",
) -> tuple[list[Measurement], dict[str, Any]] | None:
    """The measurements of the timings given, and the protocol fields they tell."""
    given = [x is not None for x in (baseline or candidate, table, measurements)]
    if sum(given) > 1:
        raise MeasurementError(
            "give one source of timings: baseline and candidate, a table, or measurements"
        )
    if stat not in STATS:
        raise MeasurementError(f"unknown statistic {stat!r}; use one of {', '.join(STATS)}")
    if measurements is not None:
        return list(measurements), {}
    if table is not None:
        found = read_table(table, unit=unit)
        return (found if stat == "median" else [_reduced(m, stat) for m in found]), {}
    if baseline is None and candidate is None:
        return None
    if baseline is None or candidate is None:
        raise MeasurementError("give both baseline and candidate timings")
    sides = []
    protocol: dict[str, Any] = {}
    for name, value in (("baseline", baseline), ("candidate", candidate)):
        if isinstance(value, Mapping):
            factor = _unit_factor(unit)
            sides.append({str(c): _sample_list(v, factor, f"{name} {c}") for c, v in value.items()})
            protocol.update(_protocol_of_values(value))
        else:
            timings, told = _read_samples(Path(value), unit, stat)
            sides.append(timings)
            protocol.update(told)
    if stat != "median":  # the old reduction: one number a side, no interval
        reduced = [{c: _reduce(v, stat, f"{c}") for c, v in side.items()} for side in sides]
        return pair_timings(*reduced), protocol
    return pair_samples(*sides), protocol


def _reduced(m: Measurement, stat: str) -> Measurement:
    base, cand = _sides(m)
    return Measurement(m.config, _reduce(base, stat, m.config), _reduce(cand, stat, m.config))
