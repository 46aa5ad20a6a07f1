"""Nsight Compute metrics: ``ncu --csv`` (``--page details``, the default).

One row per kernel launch and metric: ``"ID","Process ID","Process Name","Host
Name","Kernel Name",...,"Section Name","Metric Name","Metric Unit","Metric Value"``
(ncu 2023.1 and later add ``Block Size``, ``Grid Size``, ``Device``, ``CC`` and, with
rules, ``Rule Name``...; earlier ones ``Kernel Time``), after the ``==PROF==`` lines
ncu prints. These are profiler evidence, not timings: :func:`profiling_table` turns
them into a compact table for ``profiling_info`` (one row per metric, one column per
launch); given as timings, the file is refused with a pointer there.
"""

from __future__ import annotations

from kexp.core.advice import PROFILING_FILE
from kexp.core.errors import MeasurementError
from kexp.format.outputs import markdown_table
from kexp.measure.timings.common import Source, Timings, header_row

NAME = "ncu --csv"
#: At most this many kernel launches are shown as columns.
MAX_LAUNCHES = 8


def _header(source: Source) -> int | None:
    if source.is_json:
        return None
    return header_row(source.rows, ("kernel name",), ("metric name",), ("metric value",))


def sniff(source: Source) -> bool:
    """A table with ``Kernel Name``, ``Metric Name`` and ``Metric Value`` columns."""
    return _header(source) is not None


def read(source: Source, unit: str, stat: str) -> Timings:
    """Refused: ncu metrics are profiling evidence, not timings."""
    raise MeasurementError(
        f"{source.path} is Nsight Compute output (ncu --csv): profiler metrics, not "
        f"timings; give it as the profiling info ({PROFILING_FILE}), where it becomes a table"
    )


def _cell(row: list[str], index: int | None) -> str:
    if index is None or index >= len(row):
        return ""
    return " ".join(row[index].split()).replace("|", "\\|")


def profiling_table(source: Source) -> str:
    """The metrics as a Markdown table: a row per metric (with its unit), a column per
    kernel launch (its ID), the launches' kernel names, grid and block listed above."""
    start = _header(source)
    assert start is not None
    rows = source.rows
    names = [cell.strip().lower() for cell in rows[start]]

    def column(name: str) -> int | None:
        return names.index(name) if name in names else None

    launch_at, kernel_at = column("id"), column("kernel name")
    grid_at, block_at = column("grid size"), column("block size")
    section_at, metric_at = column("section name"), column("metric name")
    unit_at, value_at = column("metric unit"), column("metric value")
    launches: dict[str, str] = {}
    metrics: dict[tuple[str, str], dict[str, str]] = {}
    sections: dict[str, set[str]] = {}
    for row in rows[start + 1 :]:
        metric = _cell(row, metric_at)
        if not metric:
            continue  # a rule's row, or a section without a metric
        launch = _cell(row, launch_at) or str(len(launches))
        if launch not in launches:
            shape = ", ".join(
                f"{what} {_cell(row, at)}"
                for what, at in (("grid", grid_at), ("block", block_at))
                if _cell(row, at)
            )
            launches[launch] = _cell(row, kernel_at) + (f" ({shape})" if shape else "")
        key = (metric, _cell(row, unit_at))
        metrics.setdefault(key, {})[launch] = _cell(row, value_at)
        sections.setdefault(metric, set()).add(_cell(row, section_at))
    if not metrics:
        raise MeasurementError(f"{source.path}: no metrics below the ncu header")
    shown = list(launches)[:MAX_LAUNCHES]
    lines = [f"Nsight Compute (ncu --csv): {len(metrics)} metric(s) of {len(launches)} launch(es)"]
    lines += [f"- #{launch}: {launches[launch]}" for launch in shown]
    if len(launches) > len(shown):
        lines.append(f"- ({len(launches) - len(shown)} more launch(es) not shown)")
    table = markdown_table(
        ["metric", "unit", *(f"#{launch}" for launch in shown)],
        [
            [metric, unit, *(values.get(launch, "") for launch in shown)]
            for (metric, unit), values in metrics.items()
        ],
        right=range(2, 2 + len(shown)),
    )
    return "\n".join([*lines, "", table])
