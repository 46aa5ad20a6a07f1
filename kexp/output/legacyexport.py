"""Export of a store as the predecessor's database, with its sidecar (see
:mod:`kexp.output.legacy`)."""

from __future__ import annotations

import contextlib
import dataclasses
import errno
import json
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from kexp.core.problems import sort_problems
from kexp.output.legacy import (
    Progress,
    dump_sidecar,
    kept_content,
    legacy_record,
    reporting_to,
    sidecar_path,
)
from kexp.storage import atomic

if TYPE_CHECKING:
    from kexp.storage.store import Store


@dataclasses.dataclass
class ExportReport:
    """What an export wrote, and what it left out (invalid files, duplicate keys)."""

    destination: str
    exported: int = 0
    problems: list[str] = dataclasses.field(default_factory=list)
    #: The sidecar written beside the database ("" when none was needed).
    sidecar: str = ""
    #: How many experiments keep something in the sidecar.
    kept: int = 0

    def summary(self) -> str:
        """One line: how many records, and how many files were left out."""
        text = f"exported {self.exported} records to {self.destination}"
        if self.sidecar:
            text += f" (and what {self.kept} of them keep besides, in {self.sidecar})"
        if self.problems:
            text += f" ({len(self.problems)} left out: see above)"
        return text

    def lines(self) -> list[str]:
        """Every problem, then the summary line."""
        return [*self.problems, self.summary()]


def legacy_database(
    store: Store | None = None, *, progress: Progress | None = None
) -> tuple[dict[str, dict[str, Any]], list[str]]:
    """Every valid experiment as the predecessor's database, and what was left out.

    Invalid files and records whose key another experiment already used are left out,
    each with a line saying why.
    """
    database, _, problems = legacy_export(store, progress=progress)
    return database, problems


def legacy_export(
    store: Store | None = None, *, progress: Progress | None = None
) -> tuple[dict[str, dict[str, Any]], dict[str, dict[str, Any]], list[str]]:
    """:func:`legacy_database`, with what kexp keeps that the records cannot hold
    (record key -> :func:`kept_content`, for the experiments that keep any): the
    content of the sidecar file."""
    if store is None:
        from kexp.storage.location import find_root
        from kexp.storage.store import Store

        store = Store(find_root())
    kept: dict[str, dict[str, Any]] = {}
    database: dict[str, dict[str, Any]] = {}
    origin: dict[str, Path] = {}
    problems: list[str] = []
    with reporting_to(progress):
        everything = store.check_files()
    for checked in everything:
        path = checked.path
        if not checked.ok:
            first = next(p for p in sort_problems(checked.problems) if p.severity == "error")
            problems.append(f"left out {path}: not a valid experiment: {first.format()}")
            continue
        exp = checked.experiment()
        key, record = legacy_record(exp)
        if key in database:
            problems.append(f"left out {path}: its key {key!r} is also {origin[key]}'s")
            continue
        database[key] = record
        origin[key] = path
        content = kept_content(exp)
        if content:
            kept[key] = content
    return database, kept, problems


def dump_legacy(database: Mapping[str, Any]) -> str:
    """The database as the predecessor wrote it (``json.dump(db, indent=2, sort_keys=True)``)."""
    return json.dumps(database, indent=2, sort_keys=True)


def export_legacy(
    destination: Path | str,
    store: Store | None = None,
    *,
    progress: Progress | None = None,
) -> ExportReport:
    """Write the store as the predecessor's ``kernel_experiments_db.json`` (atomically)."""
    database, kept, problems = legacy_export(store, progress=progress)
    destination = Path(destination)
    if not destination.parent.is_dir():  # said of the file asked for, not the sidecar
        raise atomic.write_failure(destination, FileNotFoundError(errno.ENOENT, "no folder"))
    sidecar = sidecar_path(destination)
    if kept:
        _write_atomically(sidecar, dump_sidecar(kept, destination.name))
    else:
        with contextlib.suppress(FileNotFoundError):
            sidecar.unlink()  # an older export's: nothing of this one is in it
    _write_atomically(destination, dump_legacy(database))
    report = ExportReport(str(destination), len(database), problems)
    report.sidecar = str(sidecar) if kept else ""
    report.kept = len(kept)
    return report


def _write_atomically(destination: Path, text: str) -> None:
    with atomic.writing_output(destination):
        atomic.replace(destination, text)
