"""Nsight Systems kernel summaries: ``nsys stats --report cuda_gpu_kern_sum --format csv``.

One row per kernel: ``Time (%)``, ``Total Time (ns)``, ``Instances``, ``Avg (ns)``,
``Med (ns)``, ``Min (ns)``, ``Max (ns)``, ``StdDev (ns)``, ``Name`` (nsys 2021.2 and
later; earlier versions write ``Average``, ``Minimum``, ``Maximum``), numbers often
with thousands separators, after lines nsys prints before the table. Each kernel is a
configuration, named by ``Name``. These are summaries of the kernel's instances
without the raw samples: the median (``Med``; ``Avg`` for ``stat="mean"``, the
average where there is no median) is recorded without an interval, with a warning.
Times are in the unit the header names (``--timeunit``), nanoseconds otherwise; the
table ends where a row holds no number (another report printed after it). Another
report (``cuda_gpu_trace``, ``cuda_api_sum``) is refused, naming the one to give.
:func:`read_kernel` reads the one kernel a name picks (``kexp add --kernel NAME``).
"""

from __future__ import annotations

from kexp.core.advice import PICK_KERNEL
from kexp.core.errors import MeasurementError
from kexp.format.suspect import UNIT_TO_US
from kexp.measure.timings.common import (
    Source,
    Timings,
    cell_time,
    header_row,
    is_number,
    parse_number,
    pick_kernel,
    split_header,
)

NAME = "nsys stats cuda_gpu_kern_sum"
#: The columns of each statistic, by the names nsys has used.
COLUMNS = {
    "median": ("med", "median"),
    "mean": ("avg", "average", "mean"),
    "min": ("min", "minimum"),
    "max": ("max", "maximum"),
}


#: The other ``nsys stats`` reports, in words, by the columns their header has.
OTHER_REPORTS = (
    (
        "a trace, a row per launch or call (cuda_gpu_trace, cuda_api_trace)",
        (("start",), ("duration",), ("name",)),
    ),
    (
        "a summary of other than kernels (cuda_api_sum, cuda_gpu_mem_time_sum, ...)",
        (("time (%)",), ("total time",)),
    ),
)


def _header(source: Source) -> int | None:
    if source.is_json:
        return None
    return header_row(source.rows, ("instances",), ("name",), ("total time",), COLUMNS["mean"])


def _other_report(source: Source) -> str | None:
    """Which other ``nsys stats`` report ``source`` is, in words (None: none)."""
    if source.is_json:
        return None
    for report, columns in OTHER_REPORTS:
        if header_row(source.rows, *columns) is not None:
            return report
    return None


def sniff(source: Source) -> bool:
    """A table with ``Instances``, ``Name``, ``Total Time`` and ``Avg`` columns, or
    another ``nsys stats`` report (refused by :func:`read`)."""
    return _header(source) is not None or _other_report(source) is not None


def _kernels(source: Source, stat: str) -> tuple[dict[str, list[float]], dict[str, int], str]:
    """Each kernel's time (the statistic asked for), its count of instances, and the
    statistic read (the mean where the file has no median)."""
    start = _header(source)
    if start is None:
        raise MeasurementError(
            f"{source.path} is nsys stats output of {_other_report(source)}, not the kernel "
            "summary kexp reads: give nsys stats --report cuda_gpu_kern_sum --format csv of "
            "each side"
        )
    rows = source.rows
    columns = [split_header(cell, UNIT_TO_US["ns"]) for cell in rows[start]]
    names = [name for name, _ in columns]
    statistic = stat
    chosen = [i for i, name in enumerate(names) if name in COLUMNS[stat]]
    if not chosen and stat == "median":
        statistic = "mean"
        chosen = [i for i, name in enumerate(names) if name in COLUMNS["mean"]]
    if not chosen:
        raise MeasurementError(f"{source.path}: no {stat} column ({', '.join(COLUMNS[stat])})")
    at, factor = chosen[0], columns[chosen[0]][1]
    name_at, count_at = names.index("name"), names.index("instances")
    times: dict[str, list[float]] = {}
    counts: dict[str, int] = {}
    for index, row in enumerate(rows[start + 1 :], start + 1):
        number = source.line(index)
        if not any(is_number(cell) for cell in row):
            break  # the next report's lines (nsys stats --report A,B prints both)
        kernel = row[name_at].strip() if name_at < len(row) else ""
        where = f"{source.path}:{number} ({kernel or 'no name'})"
        if not kernel:
            raise MeasurementError(f"{where}: the kernel has no name")
        if kernel in times:
            raise MeasurementError(f"{source.path}: kernel {kernel!r} appears twice")
        times[kernel] = [cell_time(row, at, factor, where)]
        instances = parse_number(row[count_at] if count_at < len(row) else "", where)
        if instances >= 1 and instances == int(instances):
            counts[kernel] = int(instances)
    if not times:
        raise MeasurementError(f"{source.path}: no kernels below the header")
    return times, counts, statistic


def _no_interval(source: Source, statistic: str) -> str:
    return (
        f"{source.path}: nsys kernel summaries ({statistic} of each kernel's instances) "
        "hold no raw samples: recorded without an interval"
    )


def read(source: Source, unit: str, stat: str) -> Timings:
    """Each kernel's median (or the statistic asked for) over its instances."""
    times, counts, statistic = _kernels(source, stat)
    said = (_no_interval(source, statistic), *_several(times))
    return Timings(times, NAME, {"device": "gpu"}, counts, statistic, said)


def read_kernel(source: Source, unit: str, stat: str, kernel: str) -> Timings:
    """The one kernel ``kernel`` names (:func:`kexp.measure.timings.common.pick_kernel`),
    its configuration named ``kernel`` (so that a kernel whose template arguments
    changed between the runs pairs with itself)."""
    times, counts, statistic = _kernels(source, stat)
    chosen = pick_kernel(list(times), kernel, str(source.path))
    name = kernel.strip()
    count = {name: counts[chosen]} if chosen in counts else {}
    said = (_no_interval(source, statistic),)
    return Timings({name: times[chosen]}, NAME, {"device": "gpu"}, count, statistic, said)


def _short(name: str) -> str:
    """A kernel's name without its parameter list (``void k<float, (int)4>(float *)``:
    ``void k<float, (int)4>``)."""
    depth = 0
    for at in range(len(name) - 1, -1, -1):
        depth += {")": 1, "(": -1}.get(name[at], 0)
        if depth == 0:
            return name[:at].strip() or name if name.endswith(")") else name
    return name


def _several(times: dict[str, list[float]]) -> tuple[str, ...]:
    """The warning for a summary of several kernels (a PyTorch script's fill kernel
    beside the one changed): each is a configuration, and the score their geometric
    mean, which one kernel's speedup is diluted in."""
    if len(times) < 2:
        return ()
    named = "; ".join(_short(name) for name in times)
    return (
        f"the nsys kernel summary holds {len(times)} kernels, each taken as a configuration "
        f"({named}): the score is their geometric mean; to score one kernel, "
        f"{PICK_KERNEL.say(kernel='NAME')}",
    )
