"""Timings CSV: a header, then ``config,time`` rows; several rows of a configuration
are its samples. The time column's header may name its unit (``time_ms``,
``time (ns)``), which wins over ``unit``. Tried last: any text that is not JSON and
no other format claims.
"""

from __future__ import annotations

from kexp.core.errors import MeasurementError
from kexp.measure.timings.common import Source, Timings, cell_time, split_header, unit_factor

NAME = "timings CSV"


def sniff(source: Source) -> bool:
    """Any text that is not JSON."""
    return not source.is_json


def read(source: Source, unit: str, stat: str) -> Timings:
    """The samples of each configuration, in the order first seen."""
    rows = source.rows
    if not rows:
        raise MeasurementError(f"{source.path}: the file is empty")
    columns = [split_header(cell, unit_factor(unit)) for cell in rows[0]]
    if len(columns) < 2:
        raise MeasurementError(f"{source.path}: expected two columns, config and time")
    factor = columns[1][1]
    times: dict[str, list[float]] = {}
    for number, row in enumerate(rows[1:], 2):
        config = row[0].strip()
        if not config:
            raise MeasurementError(f"{source.path}:{number}: the configuration is empty")
        where = f"{source.path}:{number} ({config})"
        times.setdefault(config, []).append(cell_time(row, 1, factor, where))
    return Timings(times, NAME)
