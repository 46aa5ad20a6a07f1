"""``torch.utils.benchmark`` measurements, as JSON (never unpickled).

``torch.utils.benchmark.Timer(...).blocked_autorange()`` returns a ``Measurement``, a
dataclass; ``dataclasses.asdict(m)`` is plain data, written as JSON one measurement, a
list of them, or an object ``{config: measurement}``::

    json.dump([dataclasses.asdict(m) for m in measurements], file)

Each measurement's samples are ``raw_times[i] / number_per_run`` (seconds). Its
configuration is the key of the object, else its task's ``sub_label`` (the input, as
``Compare`` shows rows), else ``description``, ``label`` or ``stmt``. In Python, the
``Measurement`` objects themselves are taken as the values of a ``{config:
measurement}`` dict (see :func:`measurement_samples`).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from kexp.core.errors import MeasurementError
from kexp.format.suspect import UNIT_TO_US
from kexp.measure.timings.common import Source, Timings, sample_list, single_value

NAME = "torch.utils.benchmark"
TIMER = "torch_benchmark"


def _is_measurement(value: Any) -> bool:
    return isinstance(value, Mapping) and "raw_times" in value and "number_per_run" in value


def sniff(source: Source) -> bool:
    """A measurement, a list of them, or an object whose values are measurements."""
    if not source.is_json:
        return False
    data = source.data
    if _is_measurement(data):
        return True
    values = (
        data if isinstance(data, list) else list(data.values()) if isinstance(data, Mapping) else []
    )
    return isinstance(values, list) and bool(values) and all(map(_is_measurement, values))


def _runs(value: Mapping[str, Any], where: str) -> int:
    runs = value.get("number_per_run")
    if isinstance(runs, bool) or not isinstance(runs, int) or runs < 1:
        raise MeasurementError(f"{where}: number_per_run {runs!r} is not a count of runs")
    return runs


def _config(value: Mapping[str, Any], where: str) -> str:
    spec = value.get("task_spec")
    if isinstance(spec, Mapping):
        for key in ("sub_label", "description", "label", "stmt"):
            name = spec.get(key)
            if isinstance(name, str) and name.strip():
                return " ".join(name.split())
    raise MeasurementError(
        f"{where}: no task_spec sub_label, description, label or stmt to name it"
    )


def read(source: Source, unit: str, stat: str) -> Timings:
    """Samples (seconds per run) of each measurement."""
    data = source.data
    if isinstance(data, Mapping) and not _is_measurement(data):
        items = [(str(config), value, f"{source.path}: {config}") for config, value in data.items()]
    else:
        measurements = [data] if _is_measurement(data) else list(data)
        items = [
            (_config(value, f"{source.path}: [{i}]"), value, f"{source.path}: [{i}]")
            for i, value in enumerate(measurements)
        ]
    times: dict[str, list[float]] = {}
    runs: dict[str, int] = {}
    for config, value, where in items:
        if config in times:
            raise MeasurementError(
                f"{source.path}: configuration {config!r} appears twice (name each "
                "measurement by its own sub_label)"
            )
        raw = value.get("raw_times")
        if not isinstance(raw, list):
            raise MeasurementError(f"{where}: raw_times is not a list of times")
        runs[config] = _runs(value, where)
        times[config] = sample_list(raw, UNIT_TO_US["s"] / runs[config], f"{where} ({config})")
    protocol: dict[str, Any] = {"timer": TIMER}
    repetitions = single_value(runs)
    if repetitions is not None:
        protocol["repetitions"] = repetitions
    return Timings(times, NAME, protocol)


def measurement_samples(value: Any, where: str) -> tuple[list[float], int] | None:
    """A ``torch.utils.benchmark`` ``Measurement`` object's samples (microseconds) and
    its runs per sample; None for anything else."""
    times = getattr(value, "times", None)
    if not isinstance(times, list) or isinstance(value, (list, tuple)):
        return None
    runs = getattr(value, "number_per_run", None)
    return sample_list(times, UNIT_TO_US["s"], where), runs if isinstance(runs, int) else 0
