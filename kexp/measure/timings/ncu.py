"""Nsight Compute metrics: ``ncu --csv`` (``--page details``, the default, or
``--page raw``: a row per launch, a column per metric, a row of units under the header).

One row per kernel launch and metric: ``"ID","Process ID","Process Name","Host
Name","Kernel Name",...,"Section Name","Metric Name","Metric Unit","Metric Value"``
(ncu 2023.1 and later add ``Block Size``, ``Grid Size``, ``Device``, ``CC`` and, with
rules, ``Rule Name``...; earlier ones ``Kernel Time``), after the ``==PROF==`` lines
ncu prints. These are profiler evidence, not timings: :func:`profiling_table` turns
them into a compact table for ``profiling_info`` (one row per metric, one column per
launch; a kernel named, its launches alone); given as timings, the file is refused
with a pointer there.
"""

from __future__ import annotations

from kexp.core.advice import PROFILING_FILE
from kexp.core.errors import MeasurementError
from kexp.format.outputs import markdown_table
from kexp.measure.timings.common import Source, Timings, header_row, pick_kernel

NAME = "ncu --csv"
#: At most this many kernel launches are shown as columns.
MAX_LAUNCHES = 8


#: The columns of ``--page raw`` that describe a launch, not a metric.
RAW_FIELDS = frozenset(
    {
        "id", "process id", "process name", "host name", "kernel name", "kernel time",
        "context", "stream", "block size", "grid size", "device", "cc",
    }
)  # fmt: skip


def _header(source: Source) -> int | None:
    if source.is_json:
        return None
    return header_row(source.rows, ("kernel name",), ("metric name",), ("metric value",))


def _raw_header(source: Source) -> int | None:
    """Where the header of ``--page raw`` is (a column per metric, a row per launch,
    a row of units under the header); None for any other text."""
    if source.is_json or _header(source) is not None:
        return None
    return header_row(source.rows, ("kernel name",), ("id",), ("process id",))


def sniff(source: Source) -> bool:
    """A table with ``Kernel Name``, ``Metric Name`` and ``Metric Value`` columns
    (``--page details``), or ``ID``, ``Process ID`` and ``Kernel Name`` (``--page raw``)."""
    return _header(source) is not None or _raw_header(source) is not None


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


#: A launch's kernel and shape (grid, block) by its ID; a metric's value per launch by
#: its name and unit.
Launches = dict[str, tuple[str, str]]
Metrics = dict[tuple[str, str], dict[str, str]]


def _launch(row: list[str], names: list[str], launches: Launches) -> str:
    """The launch ``row`` is of (its ID), added to ``launches`` when new."""

    def column(name: str) -> int | None:
        return names.index(name) if name in names else None

    launch = _cell(row, column("id")) or str(len(launches))
    if launch not in launches:
        shape = ", ".join(
            f"{what} {_cell(row, column(f'{what} size'))}"
            for what in ("grid", "block")
            if _cell(row, column(f"{what} size"))
        )
        launches[launch] = (_cell(row, column("kernel name")), f" ({shape})" if shape else "")
    return launch


def _details(rows: list[list[str]], start: int) -> tuple[Launches, Metrics]:
    """The launches and metrics of ``--page details``: a row per launch and metric."""
    names = [cell.strip().lower() for cell in rows[start]]
    at = {name: names.index(name) for name in ("metric name", "metric value")}
    at_unit = names.index("metric unit") if "metric unit" in names else None
    launches: Launches = {}
    metrics: Metrics = {}
    for row in rows[start + 1 :]:
        metric = _cell(row, at["metric name"])
        if not metric:
            continue  # a rule's row, or a section without a metric
        launch = _launch(row, names, launches)
        key = (metric, _cell(row, at_unit))
        metrics.setdefault(key, {})[launch] = _cell(row, at["metric value"])
    return launches, metrics


def _raw(rows: list[list[str]], start: int) -> tuple[Launches, Metrics]:
    """The launches and metrics of ``--page raw``: a row per launch, a column per metric,
    its unit in the row under the header (the row whose ID is empty)."""
    names = [cell.strip().lower() for cell in rows[start]]
    header = [" ".join(cell.split()) for cell in rows[start]]
    body = rows[start + 1 :]
    units = body[0] if body and not _cell(body[0], names.index("id")) else []
    if units:
        body = body[1:]
    columns = [i for i, name in enumerate(names) if name not in RAW_FIELDS]
    launches: Launches = {}
    metrics: Metrics = {}
    for row in body:
        launch = _launch(row, names, launches)
        for index in columns:
            key = (header[index], _cell(units, index))
            metrics.setdefault(key, {})[launch] = _cell(row, index)
    return launches, metrics


def profiling_table(source: Source, kernel: str | None = None) -> str:
    """The metrics as a Markdown table: a row per metric (with its unit), a column per
    kernel launch (its ID), the launches' kernel names, grid and block listed above;
    with a ``kernel`` named (:func:`kexp.measure.timings.common.pick_kernel`), the
    launches of that kernel alone, the others counted."""
    start = _header(source)
    if start is not None:
        launches, metrics = _details(source.rows, start)
    else:
        start = _raw_header(source)
        assert start is not None
        launches, metrics = _raw(source.rows, start)
    if not metrics:
        raise MeasurementError(f"{source.path}: no metrics below the ncu header")
    left_out = ""
    if kernel is not None:
        kernels = list(dict.fromkeys(name for name, _ in launches.values()))
        chosen = pick_kernel(kernels, kernel, str(source.path))
        kept = {k: v for k, v in launches.items() if v[0] == chosen}
        if len(kept) < len(launches):
            left_out = f" ({len(launches) - len(kept)} launch(es) of other kernels left out)"
        launches = kept
        metrics = {key: v for key, v in metrics.items() if any(k in v for k in launches)}
    shown = list(launches)[:MAX_LAUNCHES]
    lines = [
        f"Nsight Compute (ncu --csv): {len(metrics)} metric(s) of {len(launches)} "
        f"launch(es){left_out}"
    ]
    lines += [f"- #{launch}: {''.join(launches[launch])}" for launch in shown]
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
