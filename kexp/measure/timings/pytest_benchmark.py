"""pytest-benchmark JSON: ``pytest --benchmark-json=FILE``, or the files
``--benchmark-save=NAME`` / ``--benchmark-autosave`` write under ``.benchmarks/``.

Each benchmark is a configuration, named by its parameters' id (``param``:
``test_softmax[r64_c1024]`` is ``r64_c1024``, as other tools name a shape) unless two
benchmarks of the file share one; then by its ``name``. Its raw timings are
``stats.data`` (seconds): written by ``--benchmark-json``, and by
``--benchmark-save`` only with ``--benchmark-save-data``. Without them the file holds
summaries only: each benchmark's ``stats[stat]`` is recorded, without an interval,
with a warning saying how to keep the raw timings. pytest-benchmark times with a host
wall clock (``timer: wall_clock``) unless told otherwise (``--benchmark-timer``, which
each benchmark's ``options.timer`` names): a CPU clock (``time.process_time``) or a timer
of the user's is ``timer: other``, with a warning; a CPU clock timed CPU work, whatever
the machine (``device: cpu``); ``repetitions`` is its iterations per round.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from kexp.core.errors import MeasurementError
from kexp.format.suspect import UNIT_TO_US
from kexp.measure.timings.common import Source, Timings, sample_list, single_value

NAME = "pytest-benchmark"

#: The timers of ``--benchmark-timer`` that read a wall clock (pytest-benchmark's default
#: is ``time.perf_counter``), as ``options.timer`` names them.
WALL_CLOCKS = frozenset(
    {"perf_counter", "perf_counter_ns", "monotonic", "monotonic_ns", "time", "time_ns"}
)
#: The timers that read the CPU time of the process or thread: time spent waiting (for
#: a GPU, for I/O, preempted) is not in their timings.
CPU_CLOCKS = frozenset({"process_time", "process_time_ns", "thread_time", "thread_time_ns"})


def sniff(source: Source) -> bool:
    """A JSON object with a ``benchmarks`` list."""
    data = source.data if source.is_json else None
    return isinstance(data, Mapping) and isinstance(data.get("benchmarks"), list)


def _entries(source: Source) -> list[tuple[str, str | None, Mapping[str, Any]]]:
    """(name, param, stats) of each benchmark."""
    found = []
    for index, entry in enumerate(source.data["benchmarks"]):
        where = f"{source.path}: benchmarks[{index}]"
        if not isinstance(entry, Mapping) or not isinstance(entry.get("stats"), Mapping):
            raise MeasurementError(f"{where} has no 'stats'")
        name = entry.get("name") or entry.get("fullname")
        if not isinstance(name, str) or not name:
            raise MeasurementError(f"{where} has no 'name'")
        param = entry.get("param")
        found.append((name, param if isinstance(param, str) and param else None, entry["stats"]))
    return found


def _config_names(entries: list[tuple[str, str | None, Mapping[str, Any]]]) -> list[str]:
    """Each benchmark's configuration: its param, unless params repeat (then names)."""
    params = [param or name for name, param, _ in entries]
    if len(set(params)) == len(params):
        return params
    return [name for name, _, _ in entries]


def read(source: Source, unit: str, stat: str) -> Timings:
    """Raw samples per benchmark (``stats.data``), else ``stats[stat]`` as a summary."""
    entries = _entries(source)
    names = _config_names(entries)
    seconds = UNIT_TO_US["s"]
    raw = all(isinstance(stats.get("data"), list) and stats["data"] for _, _, stats in entries)
    times: dict[str, list[float]] = {}
    counts: dict[str, int] = {}
    for config, (name, _, stats) in zip(names, entries, strict=True):
        if config in times:
            raise MeasurementError(f"{source.path}: benchmark {config!r} appears twice")
        where = f"{source.path}: {name}"
        if raw:
            times[config] = sample_list(stats["data"], seconds, where)
            continue
        if stat not in stats:
            raise MeasurementError(f"{where} has no stats.data or stats.{stat}")
        times[config] = sample_list([stats[stat]], seconds, where)
        rounds = stats.get("rounds")
        if isinstance(rounds, int) and not isinstance(rounds, bool) and rounds >= 1:
            counts[config] = rounds
    timer, device, warned = _timer(source)
    protocol: dict[str, Any] = {"timer": timer}
    if device is not None:
        protocol["device"] = device
    iterations = single_value(
        {n: s.get("iterations") for n, (_, _, s) in zip(names, entries, strict=True)}
    )
    if iterations is not None:
        protocol["repetitions"] = iterations
    if raw:
        return Timings(times, NAME, protocol, warnings=warned)
    warning = (
        f"{source.path}: pytest-benchmark kept no raw timings (stats.data), only each "
        f"benchmark's {stat}: recorded without an interval; keep them with "
        "--benchmark-save-data (beside --benchmark-save or --benchmark-autosave), or "
        "write the file with --benchmark-json"
    )
    return Timings(times, NAME, protocol, counts, stat, (*warned, warning))


def _timer(source: Source) -> tuple[str, str | None, tuple[str, ...]]:
    """The ``protocol.timer`` of the file's benchmarks (their ``options.timer``: a wall
    clock unless every benchmark names one, ``other`` otherwise), its ``device`` (``cpu``
    for a CPU clock: it counts the CPU time of the process, what ran on the CPU; else
    None) and the warning an other timer gets (the same for both sides' files: said
    once)."""
    named = {
        str(entry["options"].get("timer", "perf_counter")).rsplit(".", 1)[-1]
        for entry in source.data["benchmarks"]
        if isinstance(entry.get("options"), Mapping)
    }
    if named <= WALL_CLOCKS:  # none named (an older file): pytest-benchmark's default
        return "wall_clock", None, ()
    others = ", ".join(sorted(named - WALL_CLOCKS))
    cpu = named - WALL_CLOCKS <= CPU_CLOCKS
    what = (
        "the CPU time of the process, without the time it waited (for a GPU, for I/O, preempted)"
        if cpu
        else "not a wall clock kexp knows"
    )
    recorded = "protocol timer other, device cpu" if cpu else "protocol timer other"
    return (
        "other",
        "cpu" if cpu else None,
        (
            f"pytest-benchmark timed with {others} ({what}): recorded as "
            f"{recorded}, not wall_clock; for a GPU kernel, time with the default "
            "(time.perf_counter) and synchronise the device in the benchmarked function",
        ),
    )
