"""Don't believe blindly: measurements too good (or too small) to be true.

An experiment is *suspect* when its ``score`` is above the plausibility ceiling
(``Settings.suspect_score_above``, 3.0x by default), when one of its ``results`` has a
speedup above it, when a measured baseline or candidate time is near zero (below
``Settings.suspect_time_below_us``), or when its ``protocol`` says a host wall clock
timed a short GPU kernel (below ``Settings.suspect_wall_clock_below_us``) without
device synchronisation (a kernel that ran on the CPU, ``protocol.device: cpu``, needs
none; one whose device is not said may be a GPU's): the usual signs of a kernel that
skipped its work, wrote wrong results, or a timer read before the GPU finished. Such an
experiment is flagged ``suspect: verify correctness`` in validation (a warning) and in
listings.

Buggy experiments are not flagged: they are already known to be wrong.

* :func:`suspect_reasons` / :func:`is_suspect` for an experiment (listings);
* :func:`suspect_problems` for a parsed file (validation warnings, code ``suspect``,
  positioned at the offending value; :func:`suspect_fields` says whether a file's
  front-matter has any).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Protocol

from kexp.core.problems import Problem
from kexp.core.settings import DEFAULT_SETTINGS, Settings

if TYPE_CHECKING:
    from kexp.format.fileformat import Document


class Measured(Protocol):
    """What the judgement reads of an experiment (a query's row has it too)."""

    @property
    def score(self) -> Any: ...
    @property
    def results(self) -> Any: ...
    @property
    def is_buggy(self) -> Any: ...


#: The flag shown next to a suspect experiment in listings.
SUSPECT_LABEL = "suspect: verify correctness"
#: The validation code of a suspect measurement (a warning).
SUSPECT_CODE = "suspect"
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
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    number = float(value)
    return number if math.isfinite(number) else None


def _findings(
    score: Any, results: Any, is_buggy: Any, settings: Settings, protocol: Any = None
) -> list[tuple[tuple[str | int, ...], str]]:
    """(JSON path of the offending value, reason) for each suspect value."""
    if is_buggy is True:
        return []
    found: list[tuple[tuple[str | int, ...], str]] = []
    found.extend(_unsynchronized(results, protocol, settings))
    ceiling = settings.suspect_score_above
    value = _number(score)
    if value is not None and value > ceiling:
        found.append(
            (("score",), f"score {value:g}x is above the plausibility ceiling {ceiling:g}x")
        )
    if not isinstance(results, (list, tuple)):  # a row's lists are tuples
        return found
    near_zero = settings.suspect_time_below_us
    for index, item in enumerate(results):
        if not isinstance(item, Mapping):
            continue
        config = item.get("config", f"#{index}")
        speedup = _number(item.get("speedup"))
        if speedup is not None and speedup > ceiling:
            found.append(
                (
                    ("results", index, "speedup"),
                    f"{config}: speedup {speedup:g}x is above the plausibility ceiling "
                    f"{ceiling:g}x",
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


def suspect_reasons(exp: Measured, settings: Settings = DEFAULT_SETTINGS) -> list[str]:
    """Why ``exp``'s measurements are implausible (empty when they are believable): an
    experiment's, or a query's row of one."""
    found = _findings(
        exp.score, exp.results, exp.is_buggy, settings, getattr(exp, "protocol", None)
    )
    return [reason for _, reason in found]


def is_suspect(exp: Measured, settings: Settings = DEFAULT_SETTINGS) -> bool:
    """Whether ``exp`` should be flagged ``suspect: verify correctness``."""
    return bool(suspect_reasons(exp, settings))


def suspect_fields(fields: Mapping[str, Any], settings: Settings = DEFAULT_SETTINGS) -> bool:
    """Whether a file whose front-matter holds ``fields`` is suspect (validation then
    warns, :func:`suspect_problems`)."""
    return bool(
        _findings(
            fields.get("score"),
            fields.get("results"),
            fields.get("is_buggy"),
            settings,
            fields.get("protocol"),
        )
    )


def suspect_problems(doc: Document, settings: Settings = DEFAULT_SETTINGS) -> list[Problem]:
    """Validation warnings (code ``suspect-measurement``) for one parsed experiment file."""
    fields = doc.fields
    problems: list[Problem] = []
    for path, reason in _findings(
        fields.get("score"),
        fields.get("results"),
        fields.get("is_buggy"),
        settings,
        fields.get("protocol"),
    ):
        line, column = doc.position(path)
        problems.append(
            Problem(
                doc.path,
                line,
                column,
                "warning",
                SUSPECT_CODE,
                ".".join(str(p) for p in path),
                f"{SUSPECT_LABEL}: {reason}",
                "check the candidate's output against the baseline's and re-measure with "
                "synchronised timing (GPU events, do_bench); set is_buggy: true if the "
                "results are wrong",
            )
        )
    return problems
