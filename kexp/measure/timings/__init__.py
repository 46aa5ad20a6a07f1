"""Timings as the tools write them: one reader per format, sniffed in one place.

:func:`read_timings` reads a timings file of any format kexp knows, telling them apart
by their content (not their name), in the order of :data:`FORMATS`:

* ``pytest_benchmark``: pytest-benchmark JSON (``--benchmark-json``, or
  ``--benchmark-save`` files; raw samples only with ``--benchmark-save-data``);
* ``torch_benchmark``: ``torch.utils.benchmark`` measurements as JSON
  (``dataclasses.asdict``; never unpickled);
* ``kernelbench``: KernelBench timing JSON (summaries, no raw samples);
* ``plain_json``: ``{config: time}`` / ``{config: [samples]}``, e.g. lists from
  ``triton.testing.do_bench(..., return_mode="all")``;
* ``ncu``: ``ncu --csv`` metrics: refused as timings, turned into a table for
  ``profiling_info`` by :func:`profiling_info`;
* ``nsys``: ``nsys stats --report cuda_gpu_kern_sum --format csv`` (summaries);
* ``csv_times``: a ``config,time`` CSV.

A reader is a module of this package with ``NAME``, ``sniff(source)`` and
``read(source, unit, stat)`` (see :mod:`kexp.measure.timings.common`); a new format is one
more module, named in :data:`FORMATS`. :func:`read_table` reads one CSV holding both
sides; :func:`from_mapping` takes timings given in Python. Within :func:`kernel_named`
(``kexp add --kernel NAME``), a file of several kernels (an nsys summary, ncu
profiling) gives the one kernel named, and timings of configurations are refused.
"""

from __future__ import annotations

import contextlib
import contextvars
import importlib
import warnings
from collections.abc import Iterator, Mapping
from pathlib import Path
from types import ModuleType
from typing import Any

from kexp.core.advice import NO_KERNEL, PROFILING_FILE, TIMINGS_FILES
from kexp.core.errors import MeasurementError, TimingsWarning
from kexp.measure.timings import csv_times, table
from kexp.measure.timings.common import (
    STATS,
    Source,
    Timings,
    check_stat,
    check_time,
    read_source,
    sample_list,
    single_value,
    tidy,
    unit_factor,
)

__all__ = [
    "FORMATS",
    "STATS",
    "Timings",
    "from_mapping",
    "kernel_named",
    "profiling_info",
    "read_table",
    "read_timings",
    "sniff",
]

#: The readers, most particular first: the first whose ``sniff`` claims a file reads it.
FORMATS = (
    "pytest_benchmark",
    "torch_benchmark",
    "kernelbench",
    "plain_json",
    "ncu",
    "nsys",
    "csv_times",
)

#: The form of timings given in Python (a mapping), not read from a file.
IN_PYTHON = "timings given in Python"

#: The kernel :func:`kernel_named` picks, while it holds (None: every kernel).
_KERNEL: contextvars.ContextVar[str | None] = contextvars.ContextVar("kexp_kernel", default=None)
#: What the profiling info is called in what is said of it: the file it was read from,
#: given to :func:`kernel_named`, else these words.
PROFILING_INFO = "the profiling info"
_PROFILING: contextvars.ContextVar[str] = contextvars.ContextVar(
    "kexp_profiling", default=PROFILING_INFO
)


@contextlib.contextmanager
def kernel_named(kernel: str | None, profiling_file: str | None = None) -> Iterator[None]:
    """Within it, timings and profiling of several kernels give the one ``kernel``
    names (its name as nsys or ncu prints it, its base name ``softmax_fwd``, or a part
    of it: :func:`kexp.measure.timings.common.pick_kernel`); timings whose
    configurations are no kernels are refused. None: every kernel, as without it.
    ``profiling_file``: the file the profiling info was read from, named in what is
    said of it (a kernel it does not hold once)."""
    if kernel is not None and not kernel.strip():
        raise MeasurementError("the kernel's name is empty: give it as nsys or ncu prints it")
    token = _KERNEL.set(kernel)
    named = _PROFILING.set(profiling_file or PROFILING_INFO)
    try:
        yield
    finally:
        _PROFILING.reset(named)
        _KERNEL.reset(token)


def _no_kernels(what: str) -> MeasurementError:
    """The error for a kernel named for timings whose configurations are no kernels."""
    return MeasurementError(
        f"{what}: its configurations are no kernels, and the kernel {_KERNEL.get()!r} picks "
        "one of an nsys kernel summary (nsys stats --report cuda_gpu_kern_sum) or of ncu "
        f"profiling; record these {NO_KERNEL}"
    )


def kernel_unused(timings: bool, profiling: str) -> str | None:
    """What to say when a kernel is named (:func:`kernel_named`) and nothing given can
    be picked from: no ``timings`` and a ``profiling`` text that is no ``ncu --csv``
    output; None when something can (or no kernel is named)."""
    # lazy: not every command that imports this module needs kexp.measure.timings.ncu
    from kexp.measure.timings import ncu

    kernel = _KERNEL.get()
    if kernel is None or timings or ncu.sniff(Source(Path(PROFILING_INFO), profiling)):
        return None
    return (
        f"nothing to pick the kernel {kernel!r} from: give the timings of nsys stats --report "
        f"cuda_gpu_kern_sum ({TIMINGS_FILES}) or ncu --csv profiling ({PROFILING_FILE}), or "
        f"record {NO_KERNEL}"
    )


def readers() -> list[ModuleType]:
    """The reader modules, in the order of :data:`FORMATS`."""
    return [importlib.import_module(f"{__name__}.{name}") for name in FORMATS]


def _reader(source: Source) -> ModuleType:
    for reader in readers():
        if reader.sniff(source):
            return reader
    if (
        source.is_json
        and isinstance(source.data, list)
        and all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in source.data)
    ):
        raise MeasurementError(
            f"{source.path} is a bare list of times, without the configuration they time "
            '(json.dump(do_bench(fn, return_mode="all")) writes one): write them as '
            '{config: [times]}, e.g. {"r4096_c1024": [...]}'
        )
    raise MeasurementError(
        f"{source.path}: expected a JSON object {{config: microseconds}} or {{config: "
        "[samples]}, or the output of pytest-benchmark, torch.utils.benchmark (as JSON) "
        "or KernelBench"
    )


def read_table(path: Path | str, *, unit: str = "us") -> dict[str, tuple[list[float], list[float]]]:
    """(baseline, candidate) samples in microseconds per configuration, in file order, of
    one CSV table (:func:`kexp.measure.timings.table.read_table`); one side's timings
    file of a tool (pytest-benchmark JSON, an nsys summary) is refused, saying so."""
    source = read_source(path)
    if _KERNEL.get() is not None:
        raise _no_kernels(f"{source.path} is a table of config,baseline,candidate columns")
    for reader in readers():
        if reader.NAME == csv_times.NAME or not reader.sniff(source):
            continue
        if reader.__name__.endswith(".ncu"):
            reader.read(source, unit, "median")  # refused, saying where it belongs
        raise MeasurementError(
            f"{source.path} is {reader.NAME} output, one side's timings, not a table of "
            f"config,baseline,candidate columns: give a file a side, {TIMINGS_FILES}"
        )
    return table.read_table(source, unit=unit)  # read once: stdin ('-') is read once


def sniff(path: Path | str) -> str:
    """The format of a timings file, in words (its reader's ``NAME``)."""
    return str(_reader(read_source(path)).NAME)


def read_timings(path: Path | str, *, unit: str = "us", stat: str = "median") -> Timings:
    """The timings of a file in any format kexp reads (see the module's list).

    ``unit`` is the unit of formats that do not say theirs (plain JSON and CSV);
    ``stat`` picks the statistic of a summary (``median``: the median where the tool
    gives one). Raises :class:`kexp.core.errors.MeasurementError` naming the file (and
    configuration) for anything it cannot read, a repeated configuration included.
    Within :func:`kernel_named`, the one kernel named, or an error.
    """
    check_stat(stat)
    unit_factor(unit)
    source = read_source(path)
    reader = _reader(source)
    kernel = _KERNEL.get()
    if kernel is None:
        return reader.read(source, unit, stat)  # type: ignore[no-any-return]
    if not hasattr(reader, "read_kernel"):
        reader.read(source, unit, stat)  # refused as it is (ncu), else read
        raise _no_kernels(f"{source.path} is {reader.NAME}")
    return reader.read_kernel(source, unit, stat, kernel)  # type: ignore[no-any-return]


def from_mapping(data: Mapping[str, Any], *, unit: str = "us", name: str = "") -> Timings:
    """Timings given in Python: ``{config: time}``, ``{config: [samples]}`` (in
    ``unit``), or ``{config: torch.utils.benchmark Measurement}``."""
    # lazy: not every command that imports this module needs kexp.measure.timings.torch_benchmark
    from kexp.measure.timings.torch_benchmark import TIMER, measurement_samples

    if _KERNEL.get() is not None:
        raise _no_kernels(f"the {name or 'timings'} given as numbers")
    factor = unit_factor(unit)
    times: dict[str, list[float]] = {}
    runs: dict[str, int] = {}
    for config, value in data.items():
        where = f"{name} {config}".strip()
        measured = measurement_samples(value, where)
        if measured is not None:
            times[str(config)], runs[str(config)] = measured
        elif isinstance(value, (list, tuple)):
            times[str(config)] = sample_list(value, factor, where)
        else:
            times[str(config)] = [tidy(check_time(value, where) * factor)]
    protocol: dict[str, Any] = {}
    if runs:
        protocol["timer"] = TIMER
        repetitions = single_value(runs)
        if repetitions is not None:
            protocol["repetitions"] = repetitions
    return Timings(times, IN_PYTHON, protocol)


def profiling_info(text: str, source: str | None = None) -> str:
    """Profiling info as it is kept: ``ncu --csv`` output becomes a compact table (see
    :func:`kexp.measure.timings.ncu.profiling_table`; within :func:`kernel_named`, of
    the one kernel's launches); any other text is kept as it is. ``source``: what it is
    called in what is said of it (None: the file :func:`kernel_named` was given, else
    "the profiling info")."""
    # lazy: not every command that imports this module needs kexp.measure.timings.ncu
    from kexp.measure.timings import ncu

    found = Source(Path(source or _PROFILING.get()), text)
    if ncu.sniff(found):
        return ncu.profiling_table(found, _KERNEL.get())
    timed = _timings_form(found)
    if timed is not None:
        warnings.warn(
            f"the profiling info is a timings file ({timed}), kept as it is: timings "
            f"give the score and its interval as {TIMINGS_FILES}",
            TimingsWarning,
            stacklevel=3,
        )
    return text


def _timings_form(source: Source) -> str | None:
    """The format of ``source`` when it reads as timings of a tool (not a CSV of any
    text, which every text is), in words; None otherwise."""
    for reader in readers():
        if reader.NAME in ("ncu --csv", "timings CSV") or not reader.sniff(source):
            continue
        try:
            reader.read(source, "us", "median")
        except MeasurementError:
            return None
        return str(reader.NAME)
    return None
