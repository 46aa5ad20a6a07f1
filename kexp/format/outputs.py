"""Output formats of the commands that print experiments (``--format``): a registry,
and the one Markdown table writer.

Each :class:`OutputFormat` has a name, a line of help and a writer of rows: the machine
formats (``json``, ``jsonl``, ``csv``) write records (:func:`kexp.output.export.machine_record`:
one dict per experiment), the formats for people (``table``, ``markdown``) the table's
header and cells. ``table`` is laid out for the terminal by the CLI (widths, colours);
the others write text. :func:`register_format` adds one: ``--format`` offers every
registered name. Imports only the standard library (``kexp --help`` builds its choices
from it).
"""

from __future__ import annotations

import csv
import io
import itertools
import json
from collections.abc import Callable, Iterable, Sequence
from typing import IO, Any, NamedTuple


class OutputFormat(NamedTuple):
    """One way of printing experiments."""

    name: str
    help: str
    #: Whether it prints records (dicts); else the table's header and cells.
    records: bool
    #: Writes what it prints to a stream: ``write(records, out)`` for a record format,
    #: ``write(header, rows, out)`` for a table format; None: the CLI lays it out (the
    #: terminal's table).
    write: Callable[..., None] | None


def markdown_table(
    header: Sequence[str], rows: Sequence[Sequence[str]], *, right: Sequence[int] = ()
) -> str:
    """A GitHub-flavoured Markdown table (no final newline): ``right`` names the columns
    (by index) aligned right. The cells are written as given: escape ``|`` in them
    first."""
    rule = "|" + "".join("---:|" if i in right else "---|" for i in range(len(header)))
    lines = ["| " + " | ".join(header) + " |", rule]
    lines += ["| " + " | ".join(row) + " |" for row in rows]
    return "\n".join(lines)


def _csv_cell(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (list, dict)):
        return json.dumps(value, ensure_ascii=False)
    return str(value)


def write_json(records: Iterable[dict[str, Any]], out: IO[str]) -> None:
    """One JSON array, indented (as ``json.dump(list(records), out, indent=2)`` writes
    it), written a record at a time."""
    opening = "[\n"
    for record in records:
        # A JSON text holds no raw line break: each line of a record indented once more
        # is the record as the indented array holds it.
        out.write(
            opening + "  " + json.dumps(record, indent=2, ensure_ascii=False).replace("\n", "\n  ")
        )
        opening = ",\n"
    out.write("[]\n" if opening == "[\n" else "\n]\n")


def write_jsonl(records: Iterable[dict[str, Any]], out: IO[str]) -> None:
    """One JSON object a line."""
    for record in records:
        out.write(json.dumps(record, ensure_ascii=False) + "\n")


def write_csv(records: Iterable[dict[str, Any]], out: IO[str], header: Sequence[str] = ()) -> None:
    """A header row (the first record's keys, else ``header``), then a row a record:
    lists and mappings in a cell written as JSON, booleans as ``true``/``false``."""
    pending = iter(records)
    first = next(pending, None)
    names = list(first) if first is not None else list(header)
    # Rows end in LF, but a cell holding a CR (or LF) must be quoted, which the csv
    # module does only for the characters of its line terminator: each row is written
    # with CRLF, which then becomes LF.
    row = io.StringIO()
    writer = csv.writer(row, lineterminator="\r\n")
    rest = () if first is None else itertools.chain((first,), pending)
    for cells in itertools.chain((names,), ([_csv_cell(r.get(n)) for n in names] for r in rest)):
        writer.writerow(cells)
        out.write(row.getvalue()[:-2] + "\n")
        row.seek(0)
        row.truncate()


def write_markdown(header: Sequence[str], rows: Sequence[Sequence[str]], out: IO[str]) -> None:
    """The table as Markdown (``|`` in a cell escaped)."""
    cells = [[c.replace("|", "\\|") for c in row] for row in rows]
    numbers = [i for i, name in enumerate(header) if name in _RIGHT]
    out.write(markdown_table(header, cells, right=numbers) + "\n")


#: Columns a table aligns right.
_RIGHT = frozenset({"#", "CUMULATIVE", "SCORE"})

#: Every output format, by name, in the order ``--format`` lists them.
FORMATS: dict[str, OutputFormat] = {}


def register_format(output_format: OutputFormat) -> None:
    """Offer ``output_format`` to every command that prints experiments."""
    FORMATS[output_format.name] = output_format


for _format in (
    OutputFormat("table", "a table for the terminal", records=False, write=None),
    OutputFormat("json", "one JSON array of records", records=True, write=write_json),
    OutputFormat("jsonl", "one JSON record a line", records=True, write=write_jsonl),
    OutputFormat("csv", "CSV with a header row", records=True, write=write_csv),
    OutputFormat("markdown", "the table as Markdown", records=False, write=write_markdown),
):
    register_format(_format)


def format_names() -> list[str]:
    """The names ``--format`` accepts."""
    return list(FORMATS)


def record_format_names() -> list[str]:
    """The formats that print records (what ``kexp export`` writes, besides its own)."""
    return [name for name, output_format in FORMATS.items() if output_format.records]
