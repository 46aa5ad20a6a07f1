"""A timings table: one CSV with ``config``, ``baseline`` and ``candidate`` columns
(headers matched case-insensitively; a unit in a header, ``baseline_ms``, wins over
``unit``). Several rows of a configuration are its samples, one a side per row.
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

from kexp.core.errors import MeasurementError
from kexp.measure.timings.common import (
    Source,
    cell_time,
    check_cells,
    is_number,
    read_source,
    split_header,
    unit_factor,
)

#: The names each column goes by.
CONFIG_NAMES = ("config", "configuration", "name", "shape", "case", "benchmark")
BASELINE_NAMES = ("baseline", "base", "before")
CANDIDATE_NAMES = ("candidate", "cand", "after", "new")


def _column(columns: list[tuple[str, float]], names: Iterable[str], path: Path) -> int:
    wanted = tuple(names)
    for index, (name, _) in enumerate(columns):
        if name in wanted:
            return index
    found = ", ".join(name for name, _ in columns)
    raise MeasurementError(f"{path}: no column named {' or '.join(wanted)} (found: {found})")


def read_table(
    path: Path | str | Source, *, unit: str = "us"
) -> dict[str, tuple[list[float], list[float]]]:
    """(baseline, candidate) samples in microseconds per configuration, in file order."""
    source = path if isinstance(path, Source) else read_source(path)
    rows = source.rows
    if not rows:
        raise MeasurementError(f"{source.path}: the file is empty")
    if any(is_number(cell) for cell in rows[0]):
        raise MeasurementError(
            f"{source.path}: the first line holds numbers ({','.join(rows[0])[:60]}), not a "
            "header: give a header line such as config,baseline_us,candidate_us"
        )
    columns = [split_header(cell, unit_factor(unit)) for cell in rows[0]]
    config_at = _column(columns, CONFIG_NAMES, source.path)
    base_at = _column(columns, BASELINE_NAMES, source.path)
    cand_at = _column(columns, CANDIDATE_NAMES, source.path)
    sides: dict[str, tuple[list[float], list[float]]] = {}
    for index, row in enumerate(rows[1:], 1):
        number = source.line(index)
        config = row[config_at].strip() if config_at < len(row) else ""
        if not config:
            raise MeasurementError(f"{source.path}:{number}: the configuration is empty")
        where = f"{source.path}:{number} ({config})"
        check_cells(row, len(columns), where)
        base, cand = sides.setdefault(config, ([], []))
        base.append(cell_time(row, base_at, columns[base_at][1], where))
        cand.append(cell_time(row, cand_at, columns[cand_at][1], where))
    if not sides:
        raise MeasurementError(f"{source.path}: no rows below the header")
    return sides
