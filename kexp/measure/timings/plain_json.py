"""Plain timings JSON: ``{config: time}``, or ``{config: [samples]}``.

What a benchmark script writes itself, e.g. from
``triton.testing.do_bench(fn, return_mode="all")`` (a list of milliseconds per
configuration: give ``unit="ms"``, ``--unit ms``). Times are in ``unit``
(microseconds by default). Tried last among the JSON formats: any JSON object the
others do not claim.
"""

from __future__ import annotations

from collections.abc import Mapping

from kexp.measure.timings.common import Source, Timings, check_time, sample_list, tidy, unit_factor

NAME = "timings JSON"


def sniff(source: Source) -> bool:
    """Any JSON object."""
    return source.is_json and isinstance(source.data, Mapping)


def read(source: Source, unit: str, stat: str) -> Timings:
    """One time or a list of samples per configuration, in ``unit``."""
    factor = unit_factor(unit)
    times: dict[str, list[float]] = {}
    for config, value in source.data.items():
        where = f"{source.path}: {config}"
        if isinstance(value, list):
            times[str(config)] = sample_list(value, factor, where)
        else:
            times[str(config)] = [tidy(check_time(value, where) * factor)]
    return Timings(times, NAME)
