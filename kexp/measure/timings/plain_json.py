"""Plain timings JSON: ``{config: time}``, or ``{config: [samples]}``.

What a benchmark script writes itself, e.g. from
``triton.testing.do_bench(fn, return_mode="all")`` (a list of milliseconds per
configuration: give ``unit="ms"``, ``--unit ms``). Times are in ``unit``
(microseconds by default). Tried last among the JSON formats: any JSON object the
others do not claim. Lists of 3 to 5 values ordered as do_bench's quantiles
(``quantiles=[0.5, 0.2, 0.8]``: the median first, then the rest ascending) are no
samples: each configuration's first value, the median, is read alone, a summary
without an interval, with a warning.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from itertools import pairwise

from kexp.core.errors import MeasurementError
from kexp.measure.timings.common import Source, Timings, check_time, sample_list, tidy, unit_factor

NAME = "timings JSON"
#: Lists of this many values may be do_bench's quantiles (it returns one a quantile).
QUANTILE_COUNTS = range(3, 6)


def sniff(source: Source) -> bool:
    """Any JSON object."""
    return source.is_json and isinstance(source.data, Mapping)


def read(source: Source, unit: str, stat: str) -> Timings:
    """One time or a list of samples per configuration, in ``unit``."""
    factor = unit_factor(unit)
    times: dict[str, list[float]] = {}
    if not source.data:
        raise MeasurementError(
            f"{source.path}: the JSON object is empty: no configurations were measured; "
            "give {config: [times]}"
        )
    for config, value in source.data.items():
        where = f"{source.path}: {config}"
        if isinstance(value, list):
            times[str(config)] = sample_list(value, factor, where)
        else:
            times[str(config)] = [tidy(check_time(value, where) * factor)]
    quantiles = _quantiles(list(times.values()))
    if quantiles:  # the median alone: no interval, no count of samples, from quantiles
        medians = {config: values[:1] for config, values in times.items()}
        return Timings(medians, NAME, statistic="median", warnings=quantiles)
    return Timings(times, NAME)


def _ordered(values: Sequence[float]) -> bool:
    return all(a <= b for a, b in pairwise(values))


def _quantiles(lists: list[list[float]]) -> tuple[str, ...]:
    """The warning for lists that are do_bench's quantiles, not samples: every
    configuration's list of the same 3 to 5 values, its median first and the rest
    ascending (``quantiles=[0.5, 0.2, 0.8]``, as triton's documentation writes it)."""
    counts = {len(values) for values in lists}
    if len(counts) != 1 or counts.pop() not in QUANTILE_COUNTS:
        return ()
    median_first = all(
        _ordered(values[1:]) and values[1] < values[0] < values[-1] for values in lists
    )
    if not median_first:  # ascending lists are as likely samples typed in order
        return ()
    return (
        f"the timings JSON holds {len(lists[0])} values a configuration in the order of "
        "triton's do_bench(fn, quantiles=[0.5, 0.2, 0.8]) (the median first, the rest "
        "ascending): quantiles, not samples, so each configuration's median is taken alone, "
        "without an interval; for an interval, time with "
        'do_bench(fn, return_mode="all") (every timing)',
    )
