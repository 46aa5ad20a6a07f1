"""Score from measurements: timings in, ``score``, ``results`` and ``raw_result`` out.

Timings come as baseline and candidate times per configuration, from

* two JSON files ``{"config": microseconds, ...}`` (a list of samples per config is
  reduced with ``stat``, the median by default);
* two pytest-benchmark JSON files (``pytest --benchmark-json``): each benchmark's
  ``name`` is the configuration, its ``stats[stat]`` (seconds) the time;
* two CSV files with ``config,time`` columns, or one CSV table with
  ``config,baseline,candidate`` columns.

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

:func:`record_iteration` does all of it and records the experiment in one call.
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

from kexp.errors import KexpError
from kexp.settings import DEFAULT_SETTINGS, Settings
from kexp.suspect import SUSPECT_LABEL, UNIT_TO_US, suspect_reasons

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


class SuspectMeasurementWarning(UserWarning):
    """A recorded experiment's measurements look too good (or too small) to be true."""


@dataclasses.dataclass(frozen=True)
class Measurement:
    """One configuration's baseline and candidate times, in microseconds."""

    config: str
    baseline: float
    candidate: float

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


@dataclasses.dataclass(frozen=True)
class Scored:
    """The fields computed from measurements."""

    score: float
    results: list[dict[str, Any]]
    raw_result: str
    measurements: tuple[Measurement, ...]

    def fields(self) -> dict[str, Any]:
        """``score``, ``results`` and ``raw_result``, ready for ``create_experiment``."""
        return {"score": self.score, "results": self.results, "raw_result": self.raw_result}


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


def _split_header(header: str) -> tuple[str, float]:
    """A CSV column's name (lowercase) and the factor that turns its values into us."""
    text = header.strip().lower()
    match = _UNIT_IN_HEADER.fullmatch(text)
    if match is not None:
        unit = match.group("unit") or match.group("suffix")
        if unit in UNIT_TO_US:
            return match.group("name").strip(), UNIT_TO_US[unit]
    return text, 1.0


def _read_csv(path: Path) -> tuple[list[tuple[str, float]], list[list[str]]]:
    try:
        text = path.read_text(encoding="utf-8-sig")
    except OSError as exc:
        raise MeasurementError(f"cannot read {path}: {exc.strerror or exc}") from None
    rows = [row for row in csv.reader(io.StringIO(text)) if any(cell.strip() for cell in row)]
    if not rows:
        raise MeasurementError(f"{path}: the file is empty")
    return [_split_header(h) for h in rows[0]], rows[1:]


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
    second column's header may name its unit, e.g. ``time_ms``).
    """
    path = Path(path)
    if path.suffix.lower() == ".csv":
        columns, rows = _read_csv(path)
        if len(columns) < 2:
            raise MeasurementError(f"{path}: expected two columns, config and time")
        factor = columns[1][1]
        timings: dict[str, float] = {}
        for number, row in enumerate(rows, 2):
            config = row[0].strip()
            if config in timings:
                raise MeasurementError(f"{path}:{number}: configuration {config!r} appears twice")
            timings[config] = _cell_time(row, 1, factor, f"{path}:{number} ({config})")
        return timings
    try:
        data = json.loads(path.read_text(encoding="utf-8-sig"))
    except OSError as exc:
        raise MeasurementError(f"cannot read {path}: {exc.strerror or exc}") from None
    except json.JSONDecodeError as exc:
        raise MeasurementError(f"{path}:{exc.lineno}:{exc.colno}: not JSON: {exc.msg}") from None
    return parse_timings(data, source=str(path), stat=stat)


def read_table(path: Path | str) -> list[Measurement]:
    """Measurements from one CSV table with ``config``, ``baseline``, ``candidate`` columns."""
    path = Path(path)
    columns, rows = _read_csv(path)
    config_at = _column(columns, _CONFIG_NAMES, path)
    base_at = _column(columns, ("baseline", "base", "before"), path)
    cand_at = _column(columns, ("candidate", "cand", "after", "new"), path)
    measurements: list[Measurement] = []
    seen: set[str] = set()
    for number, row in enumerate(rows, 2):
        config = row[config_at].strip() if config_at < len(row) else ""
        where = f"{path}:{number} ({config})"
        if not config:
            raise MeasurementError(f"{path}:{number}: the configuration is empty")
        if config in seen:
            raise MeasurementError(f"{path}:{number}: configuration {config!r} appears twice")
        seen.add(config)
        measurements.append(
            Measurement(
                config,
                _cell_time(row, base_at, columns[base_at][1], where),
                _cell_time(row, cand_at, columns[cand_at][1], where),
            )
        )
    if not measurements:
        raise MeasurementError(f"{path}: no rows below the header")
    return measurements


def pair_timings(
    baseline: Mapping[str, float], candidate: Mapping[str, float]
) -> list[Measurement]:
    """Pair baseline and candidate times by configuration (baseline's order).

    Both must name the same configurations: a configuration measured on one side only
    is an error listing them, as a speedup over a subset would mislead.
    """
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
    return [
        Measurement(
            config,
            _check_time(baseline[config], f"baseline {config}"),
            _check_time(candidate[config], f"candidate {config}"),
        )
        for config in baseline
    ]


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


def verdict(score: float, settings: Settings = DEFAULT_SETTINGS) -> tuple[str, str]:
    """The words of the raw-result header and overall line: (``SUCCESS``, ``IMPROVEMENT``),
    (``MARGINAL``, ``MARGINAL``) or (``REGRESSION``, ``REGRESSION``)."""
    if score > settings.improvement_above:
        return "SUCCESS", "IMPROVEMENT"
    if score < settings.regression_below:
        return "REGRESSION", "REGRESSION"
    return "MARGINAL", "MARGINAL"


def raw_result_text(
    measurements: Sequence[Measurement],
    score: float,
    *,
    iteration: int | None = None,
    settings: Settings = DEFAULT_SETTINGS,
) -> str:
    """The ``raw_result`` text in the skill's format (overall, then one line per config)."""
    header, overall = verdict(score, settings)
    title = f"Iteration {iteration} Results" if iteration is not None else "Results"
    lines = [
        f"{title} - {header}:",
        "",
        f"**Overall**: {score:.4f}x speedup = {_percent(score)} {overall}",
        "",
        "**Per-kernel breakdown**:",
    ]
    for m in measurements:
        lines.append(
            f"- {m.config}: {m.speedup:.4f}x ({_percent(m.speedup)})  "
            f"{_time(m.baseline)} -> {_time(m.candidate)} µs"
        )
    return "\n".join(lines)


def score_measurements(
    measurements: Sequence[Measurement],
    *,
    iteration: int | None = None,
    settings: Settings = DEFAULT_SETTINGS,
) -> Scored:
    """``score`` (geometric mean of speedups, 4 decimals), ``results`` and ``raw_result``."""
    if not measurements:
        raise MeasurementError("no configurations were measured")
    results = [m.to_result() for m in measurements]
    score = round(geometric_mean(m.speedup for m in measurements), 4)
    text = raw_result_text(measurements, score, iteration=iteration, settings=settings)
    from kexp.model import KernelExperiment

    reasons = suspect_reasons(KernelExperiment(score=score, results=results), settings)
    if reasons:
        text += f"\n\n**{SUSPECT_LABEL}**: " + "; ".join(reasons)
    return Scored(score, results, text, tuple(measurements))


# --- recording -------------------------------------------------------------------------


def with_timings(
    store: Store,
    fields: Mapping[str, Any],
    *,
    baseline: Path | str | Mapping[str, float] | None = None,
    candidate: Path | str | Mapping[str, float] | None = None,
    table: Path | str | None = None,
    measurements: Sequence[Measurement] | None = None,
    iteration: int | None = None,
    stat: str = "median",
) -> dict[str, Any]:
    """``fields`` with ``score``, ``results`` and ``raw_result`` computed from timings.

    Timings are ``baseline`` and ``candidate`` (files, or ``{config: us}`` dicts), or a
    ``table`` file, or ready ``measurements``; without any, ``fields`` come back as
    they are. A ``raw_result`` already in ``fields`` is kept below the computed
    breakdown. Giving timings and a ``score`` or ``results`` is an error (the score is
    computed). ``iteration`` (the raw-result header) defaults to the depth of ``pid``'s
    lineage plus one. This is what ``kexp add --baseline/--candidate/--timings`` does.
    """
    data = dict(fields)
    found = _gather(baseline, candidate, table, measurements, stat)
    if found is None:
        return data
    if "score" in data or "results" in data:
        raise MeasurementError(
            "give timings or score/results, not both: the score is computed from timings"
        )
    if iteration is None:
        pid = data.get("pid")
        try:
            iteration = len(store.ancestors(pid)) + 2 if pid else 1
        except KexpError:
            iteration = None  # an unknown parent: creating will say so
    scored = score_measurements(found, iteration=iteration, settings=store.settings)
    given = data.pop("raw_result", "")
    data.update(scored.fields())
    if given:
        data["raw_result"] = f"{scored.raw_result}\n\n{given}"
    return data


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
    baseline: Path | str | Mapping[str, float] | None = None,
    candidate: Path | str | Mapping[str, float] | None = None,
    table: Path | str | None = None,
    measurements: Sequence[Measurement] | None = None,
    iteration: int | None = None,
    stat: str = "median",
    **fields: Any,
) -> KernelExperiment:
    """Record one optimization iteration in one call; returns the stored experiment.

    Timings (``baseline`` and ``candidate`` as files or ``{config: us}`` dicts, or a
    ``table`` file, or ready ``measurements``) fill ``score``, ``results`` and the
    ``raw_result`` breakdown (see :func:`with_timings`). Without timings, ``score``
    must be among ``fields``. ``status`` defaults to ``done``. The store (default: the
    default store) fills id, created_at, base_commit and author, validates, and writes;
    a repeated code change (:class:`kexp.dedupe.RepeatedChangeWarning`) and a suspect
    measurement (:class:`SuspectMeasurementWarning`) are warnings, not errors.
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
    )
    if "score" not in data:
        raise MeasurementError(
            "no score: give baseline and candidate timings (or a table), or score=..."
        )
    data.setdefault("status", "done")
    exp = store.create_experiment(**data)
    warn_if_suspect(exp, store.settings)
    return exp


def _gather(
    baseline: Path | str | Mapping[str, float] | None,
    candidate: Path | str | Mapping[str, float] | None,
    table: Path | str | None,
    measurements: Sequence[Measurement] | None,
    stat: str,
) -> list[Measurement] | None:
    given = [x is not None for x in (baseline or candidate, table, measurements)]
    if sum(given) > 1:
        raise MeasurementError(
            "give one source of timings: baseline and candidate, a table, or measurements"
        )
    if measurements is not None:
        return list(measurements)
    if table is not None:
        return read_table(table)
    if baseline is None and candidate is None:
        return None
    if baseline is None or candidate is None:
        raise MeasurementError("give both baseline and candidate timings")
    base = baseline if isinstance(baseline, Mapping) else read_timings(baseline, stat=stat)
    cand = candidate if isinstance(candidate, Mapping) else read_timings(candidate, stat=stat)
    return pair_timings(base, cand)
