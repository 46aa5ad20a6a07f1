"""What the timings readers share: the file as read, the timings it gives, times, units.

A reader (one module of :mod:`kexp.measure.timings` per format) gets a :class:`Source` and
gives :class:`Timings`: per configuration its times in microseconds, a list of raw
samples, or one summary statistic (a median, a mean) of runs whose samples the tool
did not keep.
"""

from __future__ import annotations

import csv
import dataclasses
import functools
import io
import json
import math
import re
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from kexp.core.errors import InputError, MeasurementError
from kexp.core.inputs import read_input_text
from kexp.format.suspect import UNIT_TO_US

#: Statistics a list of samples (or a summary) can be reduced with.
STATS = ("median", "mean", "min", "max")
_UNIT_IN_HEADER = re.compile(
    r"(?P<name>.*?)(?:\s*\(\s*(?P<unit>[^()\s]+)\s*\)|[\s_](?P<suffix>[^\s_]+))"
)
#: A number written with thousands separators, as nsys and ncu write them.
_GROUPED = re.compile(r"[+-]?\d{1,3}(?:,\d{3})+(?:\.\d*)?")


@dataclasses.dataclass(frozen=True)
class Timings:
    """What one timings file says.

    ``times`` maps each configuration (in the file's order) to its times in
    microseconds: the raw samples, or one summary statistic when the tool kept no raw
    samples (``statistic`` then says which, and ``counts`` how many runs each sums
    up). ``protocol`` holds the ``protocol`` fields the file tells (timer,
    repetitions, device); ``warnings`` what the reader wants the user to know.
    """

    times: dict[str, list[float]]
    #: The format, in words (``pytest-benchmark``, ``nsys stats cuda_gpu_kern_sum``).
    form: str
    protocol: dict[str, Any] = dataclasses.field(default_factory=dict)
    counts: dict[str, int] = dataclasses.field(default_factory=dict)
    statistic: str = ""
    warnings: tuple[str, ...] = ()
    #: Whether the file states the unit of its times (a CSV header's ``time_ms``).
    unit_stated: bool = False

    @property
    def summary(self) -> bool:
        """Whether the times are summaries of runs whose raw samples are not there."""
        return bool(self.statistic)


class Source:
    """A timings file as read: its path and text, its JSON or CSV rows on demand."""

    def __init__(self, path: Path, text: str) -> None:
        self.path = path
        self.text = text

    @property
    def is_json(self) -> bool:
        """Whether the text is JSON (an object or a list), whatever the file's name."""
        return self.text.lstrip()[:1] in ("{", "[")

    @functools.cached_property
    def data(self) -> Any:
        """The decoded JSON; a key repeated in one object is an error (JSON readers keep
        the last one, which would drop a timing without a word)."""
        return load_json_text(self.text, str(self.path))

    @functools.cached_property
    def _numbered(self) -> list[tuple[int, list[str]]]:
        reader = csv.reader(io.StringIO(self.text))
        return [(reader.line_num, row) for row in reader if any(cell.strip() for cell in row)]

    @property
    def rows(self) -> list[list[str]]:
        """The CSV rows that hold something (blank lines left out)."""
        return [row for _, row in self._numbered]

    def line(self, index: int) -> int:
        """The file's line number of ``rows[index]`` (counting the blank lines)."""
        return self._numbered[index][0]


def _unique_keys(where: str) -> Any:
    def build(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
        found: dict[str, Any] = {}
        for key, value in pairs:
            if key in found:
                raise MeasurementError(
                    f"{where}: {key!r} appears twice in one JSON object: give each "
                    "configuration once (a repeated key would silently drop a timing)"
                )
            found[key] = value
        return found

    return build


def load_json_text(text: str, where: str) -> Any:
    """Decoded JSON, with a repeated key in one object an error naming it."""
    try:
        return json.loads(text, object_pairs_hook=_unique_keys(where))
    except json.JSONDecodeError as exc:
        raise MeasurementError(f"{where}:{exc.lineno}:{exc.colno}: not JSON: {exc.msg}") from None


def read_source(path: Path | str) -> Source:
    """A timings file, read as text (UTF-8, a BOM ignored), bounded as every input is
    (:func:`kexp.core.inputs.read_input_text`: a huge or endless file is refused in one line)."""
    path = Path(path)
    try:
        return Source(path, read_input_text(path, "the timings"))
    except InputError as exc:  # a measurement's error, as every other fault of a timings file
        raise MeasurementError(str(exc)) from None


def tidy(value: float) -> float:
    """A time without float noise from unit conversion (12.000000000000002 -> 12.0)."""
    return float(f"{value:.12g}")


def check_time(value: Any, where: str) -> float:
    """``value`` as a time: a positive, finite number."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise MeasurementError(f"{where}: time {value!r} is not a number")
    number = float(value)
    if not math.isfinite(number) or number <= 0:
        raise MeasurementError(
            f"{where}: time {value!r} must be a positive number of microseconds "
            "(0 means nothing was measured: record score 0 instead)"
        )
    return number


def unit_factor(unit: str) -> float:
    """Microseconds per ``unit``."""
    factor = UNIT_TO_US.get(unit)
    if factor is None:
        raise MeasurementError(f"unknown unit {unit!r}; use one of {', '.join(UNIT_TO_US)}")
    return factor


def check_stat(stat: str) -> str:
    """``stat`` when it is one of :data:`STATS`."""
    if stat not in STATS:
        raise MeasurementError(f"unknown statistic {stat!r}; use one of {', '.join(STATS)}")
    return stat


def sample_list(values: Sequence[Any], factor: float, where: str) -> list[float]:
    """Times (in the unit ``factor`` converts from) as microseconds; none is an error."""
    if not values:
        raise MeasurementError(f"{where}: no samples")
    return [tidy(check_time(v, where) * factor) for v in values]


def parse_number(cell: str, where: str) -> float:
    """A number from a CSV cell, thousands separators allowed (``1,234,567.5``)."""
    text = cell.strip()
    if _GROUPED.fullmatch(text):
        text = text.replace(",", "")
    try:
        return float(text)
    except ValueError:
        pass
    unit = re.fullmatch(r"[+-]?[\d.,]+(?:e[+-]?\d+)?\s*(\w+)", text.lower())
    hint = ""
    if unit is not None and unit.group(1) in UNIT_TO_US:
        hint = (
            ": give the unit in the column's header (time_us, baseline_us), numbers alone "
            "in the cells"
        )
    raise MeasurementError(f"{where}: {cell.strip()!r} is not a number{hint}")


def is_number(cell: str) -> bool:
    """Whether a CSV cell holds a number (thousands separators allowed)."""
    try:
        parse_number(cell, "")
    except MeasurementError:
        return False
    return True


def check_cells(row: Sequence[str], columns: int, where: str) -> None:
    """Refuse a row of more cells than the header has columns (empty trailing cells
    aside): a number with thousands separators not quoted (``1,234.5``) splits in two,
    and reading the first part alone would be a time 1000x off."""
    cells = len(row)
    while cells > columns and not row[cells - 1].strip():
        cells -= 1
    if cells > columns:
        raise MeasurementError(
            f"{where}: {cells} cells under a header of {columns} columns "
            f"({','.join(cell.strip() for cell in row)}): a number with thousands separators "
            'splits in two unless quoted; write it "1,234.5" (quoted) or 1234.5'
        )


def split_header(header: str, default: float = 1.0) -> tuple[str, float]:
    """A CSV column's name (lowercase) and the factor that turns its values into
    microseconds (``default`` when the header names no unit): ``time_ms``,
    ``Avg (ns)``."""
    text = header.strip().lower()
    match = _UNIT_IN_HEADER.fullmatch(text)
    if match is not None:
        unit = match.group("unit") or match.group("suffix")
        if unit in UNIT_TO_US:
            return match.group("name").strip(), UNIT_TO_US[unit]
    return text, default


def cell_time(row: Sequence[str], index: int, factor: float, where: str) -> float:
    """The time in a CSV row's column ``index``, in microseconds."""
    cell = row[index] if index < len(row) else ""
    return tidy(check_time(parse_number(cell, where), where) * factor)


def single_value(values: Mapping[Any, Any]) -> int | None:
    """The one count every entry agrees on (a positive integer), else None."""
    found = set(values.values())
    if len(found) != 1:
        return None
    (count,) = found
    return count if isinstance(count, int) and not isinstance(count, bool) and count >= 1 else None


def header_row(rows: Sequence[Sequence[str]], *wanted: Sequence[str]) -> int | None:
    """The index of the first row (tools print lines before their table) that has, for
    each tuple in ``wanted``, a column named one of it (names as :func:`split_header`
    gives them)."""
    for index, row in enumerate(rows):
        names = {split_header(cell)[0] for cell in row}
        if all(names & set(choices) for choices in wanted):
            return index
    return None


def kernel_base(name: str) -> str:
    """A kernel's name as nsys and ncu print it, without its return type, template
    arguments and parameters: ``void ns::k<float, 4>(float *)`` is ``ns::k``."""
    depth = 0
    head = []
    for char in name:
        if char in "<(":
            depth += 1
        elif char in ">)":
            depth = max(depth - 1, 0)
        elif depth == 0:
            head.append(char)
    words = "".join(head).split()
    return words[-1] if words else name.strip()


def pick_kernel(names: Sequence[str], wanted: str, where: str) -> str:
    """The one of ``names`` (kernels as the tool printed them) that ``wanted`` names:
    the whole name, else its base name (:func:`kernel_base`, with or without its
    namespace), else a part of it; the first of these rules that any name meets
    decides. None or several is an error naming the kernels present."""
    wanted = wanted.strip()
    rules = (
        lambda name: wanted == name.strip(),
        lambda name: wanted in (kernel_base(name), kernel_base(name).rsplit("::", 1)[-1]),
        lambda name: wanted in name,
    )
    for rule in rules:
        found = [name for name in names if rule(name)]
        if len(found) == 1:
            return found[0]
        if found:
            listed = "; ".join(found)
            raise MeasurementError(
                f"{where}: the kernel {wanted!r} matches {len(found)} kernels ({listed}): "
                "give more of its name, as the file prints it"
            )
    listed = "; ".join(names)
    raise MeasurementError(
        f"{where}: no kernel named {wanted!r}; the file holds "
        f"{len(names)}: {listed}; name one of them (its base name is enough)"
    )
