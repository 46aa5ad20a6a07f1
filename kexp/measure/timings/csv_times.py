"""Timings CSV: a header, then ``config,time`` rows; several rows of a configuration
are its samples. The time column's header may name its unit (``time_ms``,
``time (ns)``), which wins over ``unit``. A file whose first line holds a time
(``r4096,20.0``) has no header: every line is a row, in ``unit``. Tried last: any
text that is not JSON and no other format claims.
"""

from __future__ import annotations

from kexp.core.errors import MeasurementError
from kexp.measure.timings.common import (
    Source,
    Timings,
    cell_time,
    check_cells,
    is_number,
    split_header,
    unit_factor,
)

NAME = "timings CSV"


def sniff(source: Source) -> bool:
    """Any text that is not JSON."""
    return not source.is_json


def read(source: Source, unit: str, stat: str) -> Timings:
    """The samples of each configuration, in the order first seen."""
    rows = source.rows
    if not rows:
        raise MeasurementError(f"{source.path}: the file is empty")
    if len(rows) == 1 and len(rows[0]) == 1 and is_number(rows[0][0]):
        raise MeasurementError(
            f"{source.path} holds a bare time, without the configuration it times "
            "(json.dump(do_bench(fn)) writes one): write {config: [times]}, e.g. "
            '{"r4096_c1024": do_bench(fn, return_mode="all")}'
        )
    headerless = len(rows[0]) >= 2 and is_number(rows[0][1])
    if headerless:  # no column is named by a number: the first line is a timing
        columns = [("config", unit_factor(unit)), ("time", unit_factor(unit))]
    else:
        columns = [split_header(cell, unit_factor(unit)) for cell in rows[0]]
    if len(columns) < 2:
        raise MeasurementError(f"{source.path}: expected two columns, config and time")
    factor = columns[1][1]
    times: dict[str, list[float]] = {}
    first = 0 if headerless else 1
    for index, row in enumerate(rows[first:], first):
        number = source.line(index)
        config = row[0].strip()
        if not config:
            raise MeasurementError(f"{source.path}:{number}: the configuration is empty")
        where = f"{source.path}:{number} ({config})"
        check_cells(row, len(columns), where)
        times.setdefault(config, []).append(cell_time(row, 1, factor, where))
    return Timings(times, NAME, unit_stated=not headerless and _names_unit(rows[0][1]))


def _names_unit(header: str) -> bool:
    """Whether a column's header names its unit (``time_ms``, ``time (ns)``)."""
    return split_header(header, 0.0)[1] != 0.0
