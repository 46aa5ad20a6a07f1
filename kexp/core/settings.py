"""Tunable settings: thresholds and limits live here, never as literals in code.

A team keeps its own in ``kexp.toml`` beside ``experiments/``, committed with the store
(keys are the settings' names: ``improvement_above = 1.05``); :func:`load_settings`
reads it wherever a store is opened, and :func:`effective_settings` says where each
value came from (``kexp settings``).
"""

from __future__ import annotations

import dataclasses
import difflib
import math
import os
import re
import sys
from pathlib import Path
from typing import Any

from kexp.core.errors import SettingsFileError

#: The settings file of a store, beside its ``experiments/`` folder.
SETTINGS_FILE = "kexp.toml"
#: A settings file larger than this is refused unread (it holds a few lines).
MAX_SETTINGS_BYTES = 64 * 1024


@dataclasses.dataclass(frozen=True)
class Settings:
    """Thresholds and limits used by the store, queries and validation.

    Pass a modified copy to :class:`kexp.Store` (``Store(root, settings=...)``) to
    change them, e.g. ``dataclasses.replace(DEFAULT_SETTINGS, regression_below=0.98)``.
    """

    #: A score below this is a ``regression``.
    regression_below: float = 0.99
    #: A score above this is an ``improvement``; in between is ``marginal``.
    improvement_above: float = 1.01
    #: Shortest id prefix accepted for lookups.
    min_id_prefix: int = 4
    #: Longest ``change_summary`` accepted.
    max_summary_chars: int = 80
    #: Files larger than this are refused instead of read whole.
    max_file_bytes: int = 4 * 1024 * 1024
    #: An update reads a file over ``max_file_bytes`` up to this size (larger ones are
    #: refused unread), so that it can make the file small enough again; what it
    #: writes must fit ``max_file_bytes``.
    max_repair_file_bytes: int = 64 * 1024 * 1024
    #: What a user gives kexp to read whole (timings, a document, a description, a diff,
    #: standard input) is refused over this size, before it fills memory
    #: (:func:`kexp.core.inputs.read_input`).
    max_input_bytes: int = 64 * 1024 * 1024
    #: The predecessor's database ``kexp import`` reads is refused over this size (368 MB
    #: at 100,000 records).
    max_import_bytes: int = 2 * 1024 * 1024 * 1024
    #: A ``profiling_info`` recorded larger than this (bytes) warns: a profiler's whole
    #: output, or a timings file given as profiling, where a summary of what matters
    #: belongs.
    large_profiling_bytes: int = 64 * 1024
    #: Relative disagreement between ``score`` and the geometric mean of ``results``
    #: above which validation warns.
    score_tolerance: float = 0.005
    #: Seconds a writer waits for another writer's lock on the same experiment.
    lock_timeout_s: float = 30.0
    #: A writer's temporary file (``.<name>.<random>.tmp``) older than this many seconds
    #: was left by a killed writer (a live one keeps it for milliseconds): ``kexp fmt``
    #: deletes it.
    stale_temporary_s: float = 3600.0
    #: A cache of another kexp version (``.kexp/cache-<hash>.sqlite``, tens of MB
    #: for a large store) not written for this many days is removed when this version
    #: writes its own; that version rebuilds it if it is still used.
    unused_cache_days: float = 14.0
    #: Default number of experiments ``top_experiments`` returns.
    top_default: int = 20
    #: A score above this speedup is implausible enough to be flagged
    #: "suspect: verify correctness" (a kernel that skipped work, an unsynchronised timer).
    suspect_score_above: float = 3.0
    #: A measured time (baseline or candidate, in microseconds) below this is "near zero":
    #: below GPU timer resolution, so the measurement is flagged as suspect.
    suspect_time_below_us: float = 0.5
    #: Times below this (microseconds, as read) of timings that state no unit, recorded
    #: without one, are refused until the unit is given: triton's do_bench's milliseconds
    #: read as microseconds give them (a 1.2 ms GEMM read as 1.2 us), few kernels do.
    unit_ambiguous_below_us: float = 2.0
    #: A kernel shorter than this (microseconds) timed with a host wall clock without
    #: device synchronisation (``protocol``) is suspect: the clock may read the launch.
    suspect_wall_clock_below_us: float = 100.0
    #: Two code changes whose shingles (changed lines, variables renamed) are at least
    #: this similar (Jaccard) are near-duplicates: a create warns that it was tried.
    near_duplicate_similarity: float = 0.5
    #: ``kexp remeasure`` refuses a new round in which a configuration's median time (a
    #: side's) is more than this many times the earlier rounds' (or less than its
    #: inverse): other code, or timings in another unit.
    remeasure_scale_above: float = 3.0
    #: A step on an env whose A/A controls drifted from 1 (the largest drift of the
    #: newest ``control_drift_window``, a score ``c``) is a change only when its interval
    #: clears this many times that drift (``|log c|``) in its direction
    #: (:func:`kexp.core.outcome.within_drift`): a control is one draw of the drift
    #: between runs that an interval does not cover.
    control_drift_reach: float = 2.0
    #: How many of an env's (and timer's) newest A/A controls judge its steps: the
    #: largest drift among them counts, so one lucky control does not hide the others'.
    control_drift_window: int = 5


DEFAULT_SETTINGS = Settings()

#: The range each setting must lie in (inclusive; None: unbounded), so that no value
#: set in ``kexp.toml`` can make kexp misbehave (a zero lock timeout, a negative limit).
RANGES: dict[str, tuple[float | None, float | None]] = {
    "regression_below": (0.0, None),
    "improvement_above": (0.0, None),
    "min_id_prefix": (4, 16),
    "max_summary_chars": (1, None),
    "max_file_bytes": (1024, None),
    "max_repair_file_bytes": (1024, None),
    "max_input_bytes": (1024, None),
    "max_import_bytes": (1024, None),
    "large_profiling_bytes": (1024, None),
    "score_tolerance": (0.0, 1.0),
    "lock_timeout_s": (0.001, None),
    "stale_temporary_s": (1.0, None),
    "unused_cache_days": (0.0, None),
    "top_default": (0, None),
    "suspect_score_above": (1.0, None),
    "suspect_time_below_us": (0.0, None),
    "unit_ambiguous_below_us": (0.0, None),
    "suspect_wall_clock_below_us": (0.0, None),
    "near_duplicate_similarity": (0.01, 1.0),
    "remeasure_scale_above": (1.1, None),
    "control_drift_reach": (0.0, None),
    "control_drift_window": (1, None),
}


def setting_problems(settings: Settings) -> list[tuple[str, str]]:
    """What is wrong with ``settings``: (setting name, message) pairs, empty when sound."""
    found: list[tuple[str, str]] = []
    for name, (low, high) in RANGES.items():
        value = getattr(settings, name)
        if (low is not None and value < low) or (high is not None and value > high):
            bounds = (
                f"between {low:g} and {high:g}"
                if low is not None and high is not None
                else f"at least {low:g}"
                if low is not None
                else f"at most {high:g}"
            )
            found.append((name, f"{name} must be {bounds}, not {value!r}"))
    if settings.improvement_above < settings.regression_below:
        found.append(
            (
                "improvement_above",
                f"improvement_above ({settings.improvement_above:g}) must not be below "
                f"regression_below ({settings.regression_below:g})",
            )
        )
    if settings.max_repair_file_bytes < settings.max_file_bytes:
        found.append(
            (
                "max_repair_file_bytes",
                "max_repair_file_bytes must not be below max_file_bytes",
            )
        )
    return found


@dataclasses.dataclass(frozen=True)
class SettingValue:
    """One setting as in force: its value, its default, and where the value came from
    (``"default"``, or ``"kexp.toml:LINE"``)."""

    name: str
    value: float | int
    default: float | int
    origin: str

    def to_dict(self) -> dict[str, Any]:
        """The setting as plain JSON-ready data."""
        return dataclasses.asdict(self)


def settings_path(root: Path | str) -> Path:
    """Where the settings file of the store at ``root`` is."""
    return Path(root) / SETTINGS_FILE


def load_settings(root: Path | str) -> Settings:
    """The settings of the store at ``root``: :data:`DEFAULT_SETTINGS` with the values of
    its ``kexp.toml``, if it has one; a bad file is a :class:`SettingsFileError` naming
    the file and line."""
    values, _ = _read_file(settings_path(root))
    return dataclasses.replace(DEFAULT_SETTINGS, **values) if values else DEFAULT_SETTINGS


def effective_settings(root: Path | str) -> list[SettingValue]:
    """Every setting of the store at ``root``, with its value and where it came from."""
    path = settings_path(root)
    values, lines = _read_file(path)
    return [
        SettingValue(
            name=field.name,
            value=values.get(field.name, getattr(DEFAULT_SETTINGS, field.name)),
            default=getattr(DEFAULT_SETTINGS, field.name),
            origin=f"{path.name}:{lines[field.name]}" if field.name in values else "default",
        )
        for field in dataclasses.fields(Settings)
    ]


_TYPES = {field.name: field.type for field in dataclasses.fields(Settings)}


def _read_file(path: Path) -> tuple[dict[str, Any], dict[str, int]]:
    """The values ``path`` sets, and the line of each; ({}, {}) when there is no file."""
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0))
    except FileNotFoundError:
        return {}, {}
    except OSError as exc:
        raise SettingsFileError(
            f"{path}: cannot be read ({exc.strerror or exc}); it must be a regular file "
            "of settings, readable by you"
        ) from None
    with open(fd, "rb") as handle:
        data = handle.read(MAX_SETTINGS_BYTES + 1)
    if len(data) > MAX_SETTINGS_BYTES:
        raise SettingsFileError(
            f"{path}: larger than {MAX_SETTINGS_BYTES // 1024} KiB; a settings file holds "
            "a few lines such as 'improvement_above = 1.05'"
        )
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError:
        raise SettingsFileError(f"{path}: not UTF-8 text; save it as UTF-8") from None
    document = _parse_toml(path, text)
    values: dict[str, Any] = {}
    lines: dict[str, int] = {}
    for name, value in document.items():
        line = _line_of(text, name)
        where = f"{path}:{line}" if line else str(path)
        if name not in _TYPES:
            close = difflib.get_close_matches(name, _TYPES, n=1)
            advice = f"did you mean {close[0]!r}?" if close else "'kexp settings' lists them"
            raise SettingsFileError(f"{where}: {name!r} is not a kexp setting; {advice}")
        values[name] = _checked_value(where, name, value)
        lines[name] = line
    for name, message in setting_problems(dataclasses.replace(DEFAULT_SETTINGS, **values)):
        line = lines.get(name) or next(iter(lines.values()), 0)
        raise SettingsFileError(f"{path}:{line}: {message}; correct it in {path.name}")
    return values, lines


def _parse_toml(path: Path, text: str) -> dict[str, Any]:
    if sys.version_info >= (3, 11):
        # lazy: only a store with a kexp.toml parses TOML
        import tomllib
    else:  # pragma: no cover - Python 3.10 only
        try:
            # lazy: only a store with a kexp.toml parses TOML (tomli: an extra)
            import tomli as tomllib
        except ImportError:
            raise SettingsFileError(
                f"{path}: reading it needs Python 3.11 or the tomli package: "
                "pip install 'kexp[toml]'"
            ) from None
    try:
        document: dict[str, Any] = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        message = str(exc)
        found = re.search(r"\(at line (\d+), column (\d+)\)", message)
        where = f"{path}:{found[1]}:{found[2]}" if found else str(path)
        reason = re.sub(r"\s*\(at (line \d+, column \d+|end of document)\)", "", message)
        raise SettingsFileError(
            f"{where}: not valid TOML ({reason}); write one setting a line, such as "
            "'improvement_above = 1.05'"
        ) from None
    return document


def _line_of(text: str, name: str) -> int:
    """The line (from 1) where ``name`` is set in ``text``, 0 if not found."""
    key = re.escape(name)
    pattern = re.compile(rf"""^\s*(?:{key}|"{key}"|'{key}')\s*=""")
    for number, line in enumerate(text.splitlines(), start=1):
        if pattern.match(line):
            return number
    return 0


def _checked_value(where: str, name: str, value: Any) -> float | int:
    """``value`` for setting ``name`` if its type fits, else a SettingsFileError."""
    wanted = _TYPES[name]
    default = getattr(DEFAULT_SETTINGS, name)
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        shown = type(value).__name__ if isinstance(value, (dict, list)) else repr(value)
        raise SettingsFileError(
            f"{where}: {name} must be a number, not {shown}; for example '{name} = {default!r}'"
        )
    if wanted == "int":
        if isinstance(value, float) and not value.is_integer():
            raise SettingsFileError(
                f"{where}: {name} must be a whole number, not {value!r}; for example "
                f"'{name} = {default!r}'"
            )
        return int(value)
    if not math.isfinite(value):
        raise SettingsFileError(f"{where}: {name} must be a finite number, not {value!r}")
    return float(value)
