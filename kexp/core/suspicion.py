"""The judgement of a measurement too good (or too small) to be true, of its own values
alone: the rules :mod:`kexp.format.suspect` describes (where they are shown) and
:mod:`kexp.core.campaign` carries up a lineage (a cumulative score built on a suspect
step). Plain data in, no formatting.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping, Sequence
from typing import Any, Protocol

from kexp.core.settings import Settings


class Measured(Protocol):
    """What the judgement reads of an experiment (a query's row has it too)."""

    @property
    def score(self) -> Any: ...
    @property
    def results(self) -> Any: ...
    @property
    def is_buggy(self) -> Any: ...


#: Microseconds per unit of a result's ``unit`` (``us`` when absent).
UNIT_TO_US = {
    "ns": 1e-3,
    "us": 1.0,
    "µs": 1.0,
    "μs": 1.0,
    "usec": 1.0,
    "ms": 1e3,
    "msec": 1e3,
    "s": 1e6,
    "sec": 1e6,
}


def _number(value: Any) -> float | None:
    if type(value) is float:  # the common case first: a derivation judges every step
        return value if math.isfinite(value) else None
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    number = float(value)
    return number if math.isfinite(number) else None


def findings(
    score: Any,
    results: Any,
    is_buggy: Any,
    settings: Settings,
    protocol: Any = None,
    *,
    over: float | None = None,
    step_unknown: bool = False,
) -> list[tuple[tuple[str | int, ...], str]]:
    """(JSON path of the offending value, reason) for each suspect value. ``over``: the
    parent's cumulative score of a step measured against the reference on a parent: the
    ceiling judges its step (its score and speedups over ``over``), as a step measured
    over its parent is judged, not the campaign's product; ``step_unknown``: such a step
    whose parent is not known here (a file judged alone): no ceiling is applied."""
    if is_buggy is True:
        return []
    found: list[tuple[tuple[str | int, ...], str]] = []
    if protocol is not None:
        found.extend(_unsynchronized(results, protocol, settings))
    ceiling = settings.suspect_score_above
    value = _number(score)
    per = 1.0 if over is None or not math.isfinite(over) or over <= 0 else over
    if step_unknown:
        ceiling = math.inf
    if value is not None and value / per > ceiling:
        said = f"score {value:g}x" if per == 1.0 else f"step {value / per:.4g}x over its parent"
        found.append((("score",), f"{said} is above the plausibility ceiling {ceiling:g}x"))
    if not isinstance(results, (list, tuple)):  # a row's lists are tuples
        return found
    near_zero = settings.suspect_time_below_us
    for index, item in enumerate(results):
        if type(item) is not dict and not isinstance(item, Mapping):
            continue
        config = item.get("config") if "config" in item else f"#{index}"
        speedup = _number(item.get("speedup"))
        if speedup is not None and speedup / per > ceiling:
            said = f"speedup {speedup:g}x"
            if per != 1.0:
                said += f" over the reference ({speedup / per:.4g}x over its parent)"
            found.append(
                (
                    ("results", index, "speedup"),
                    f"{config}: {said} is above the plausibility ceiling {ceiling:g}x",
                )
            )
        unit = item.get("unit", "us")
        scale = UNIT_TO_US.get(unit) if isinstance(unit, str) else None
        for side in ("baseline", "candidate"):
            time = _number(item.get(side))
            if time is None or scale is None:
                continue
            if time * scale < near_zero:
                found.append(
                    (
                        ("results", index, side),
                        f"{config}: {side} time {time:g} {unit} is near zero "
                        f"(below {near_zero:g} us)",
                    )
                )
    return found


#: A near-zero reason as :func:`findings` says it.
_NEAR_ZERO = re.compile(
    r"(?P<config>.*): (?P<side>baseline|candidate) time (?P<time>\S+) (?P<unit>\S+) "
    r"is near zero \(below (?P<limit>\S+) us\)"
)


def folded(reasons: Sequence[str], shown: int = 3) -> list[str]:
    """``reasons`` said once: the near-zero times of every configuration and side
    (:func:`findings` says each on its own) as one reason naming the first ``shown``
    configurations, ``N256 0.0158/0.0209 us`` (baseline/candidate); the others as they
    are."""
    near = [m for m in map(_NEAR_ZERO.fullmatch, reasons) if m is not None]
    if len(near) < 2:
        return list(reasons)
    times: dict[str, dict[str, str]] = {}
    for match in near:
        times.setdefault(match["config"], {})[match["side"]] = match["time"]
    units = {m["unit"] for m in near}
    unit = f" {units.pop()}" if len(units) == 1 else ""
    parts = []
    for config, sides in list(times.items())[:shown]:
        if len(sides) == 2:
            parts.append(f"{config} {sides['baseline']}/{sides['candidate']}")
        else:
            ((side, time),) = sides.items()
            parts.append(f"{config} {side} {time}")
    more = f" and {len(times) - shown} more" if len(times) > shown else ""
    said = (
        f"times near zero (below {near[0]['limit']} us; baseline/candidate): "
        f"{', '.join(parts)}{unit}{more}"
    )
    return [said, *(r for r in reasons if _NEAR_ZERO.fullmatch(r) is None)]


def _unsynchronized(
    results: Any, protocol: Any, settings: Settings
) -> list[tuple[tuple[str | int, ...], str]]:
    """The finding of a wall clock that timed a short GPU kernel without
    synchronisation (never for a kernel that ran on the CPU)."""
    if not isinstance(protocol, Mapping) or protocol.get("timer") != "wall_clock":
        return []
    if protocol.get("device") == "cpu":
        return []
    if protocol.get("synchronized") is True or not isinstance(results, (list, tuple)):
        return []
    limit = settings.suspect_wall_clock_below_us
    for item in results:
        if not isinstance(item, Mapping):
            continue
        unit = item.get("unit", "us")
        scale = UNIT_TO_US.get(unit) if isinstance(unit, str) else None
        times = [_number(item.get(side)) for side in ("baseline", "candidate")]
        shortest = min((t for t in times if t is not None), default=None)
        if scale is None or shortest is None or shortest * scale >= limit:
            continue
        said = "false" if protocol.get("synchronized") is False else "not said"
        device = (
            "" if protocol.get("device") == "gpu" else "; device not said: cpu if it ran on the CPU"
        )
        return [
            (
                ("protocol", "timer"),
                f"{item.get('config')}: a {shortest * scale:g} us GPU kernel timed with a "
                f"wall clock without device synchronisation (synchronized: {said}{device}): "
                "the clock may read the launch, not the kernel",
            )
        ]
    return []
