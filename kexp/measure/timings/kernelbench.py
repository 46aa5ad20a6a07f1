"""KernelBench timing JSON: ``{level: {problem: {mean, std, min, max, num_trials,
hardware, device}}}``, times in milliseconds.

What KernelBench's ``generate_baseline_time.py`` writes (``results/timing/<GPU>/
baseline_time_torch.json``), and the same record per problem for a kernel timed the
same way. Each problem is a configuration, ``level1/1_Square_matrix_multiplication_``.
These are summaries of ``num_trials`` runs, without the raw samples: the ``mean`` is
recorded (``min`` or ``max`` when asked; KernelBench keeps no median), without an
interval, with a warning. A ``device`` such as ``cuda:0`` says the kernel ran on a
GPU (``protocol.device``).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from kexp.core.errors import MeasurementError
from kexp.format.suspect import UNIT_TO_US
from kexp.measure.timings.common import Source, Timings, sample_list, single_value

NAME = "KernelBench"


def _records(data: Any) -> list[Mapping[str, Any]]:
    if not isinstance(data, Mapping) or not data:
        return []
    found = []
    for problems in data.values():
        if not isinstance(problems, Mapping) or not problems:
            return []
        for record in problems.values():
            if not isinstance(record, Mapping):
                return []
            found.append(record)
    return found


def sniff(source: Source) -> bool:
    """Levels of problems whose records hold ``mean`` and ``num_trials``."""
    records = _records(source.data) if source.is_json else []
    return bool(records) and all("mean" in r and "num_trials" in r for r in records)


def _device(records: list[Mapping[str, Any]]) -> str | None:
    devices = {str(r.get("device", "")).split(":")[0].lower() for r in records}
    if devices <= {"cuda", "hip", "rocm", "xpu", "mps"} and devices:
        return "gpu"
    if devices == {"cpu"}:
        return "cpu"
    return None


def read(source: Source, unit: str, stat: str) -> Timings:
    """Each problem's ``mean`` (or ``min``/``max``) in milliseconds."""
    key = stat if stat in ("min", "max") else "mean"
    times: dict[str, list[float]] = {}
    counts: dict[str, int] = {}
    for level, problems in source.data.items():
        for problem, record in problems.items():
            name = str(problem).removesuffix(".py")
            config = f"{level}/{name}"
            if config in times:
                raise MeasurementError(f"{source.path}: problem {config!r} appears twice")
            where = f"{source.path}: {level}.{problem}"
            if key not in record:
                raise MeasurementError(f"{where} has no {key!r}")
            times[config] = sample_list([record[key]], UNIT_TO_US["ms"], where)
            trials = record.get("num_trials")
            if isinstance(trials, int) and not isinstance(trials, bool) and trials >= 1:
                counts[config] = trials
    protocol: dict[str, Any] = {}
    device = _device(_records(source.data))
    if device:
        protocol["device"] = device
    trials = single_value(counts)
    what = f"the {key} of {trials if trials else 'num_trials'} runs"
    warning = (
        f"{source.path}: KernelBench timings are summaries ({what}) without the raw "
        "samples: recorded without an interval"
    )
    return Timings(times, NAME, protocol, counts, key, (warning,))
