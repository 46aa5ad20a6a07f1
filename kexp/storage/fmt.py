"""Canonical form for experiment files: the Python twin of ``kexp fmt``.

:func:`format_files` rewrites each file as the one serializer would write it (key order,
quoting, blank lines, LF, one trailing newline), atomically and under the experiment's
write lock; ``check=True`` only reports the files that are not canonical. A file is
rewritten only when reading back the new text gives exactly the same experiment, and
files with errors are left alone (``kexp validate`` says what is wrong with them).
Comments in the front-matter are not data and are not kept.
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
import re
import stat
import time
from collections.abc import Iterable
from pathlib import Path
from typing import TYPE_CHECKING, Literal

from kexp.core.problems import sort_problems
from kexp.core.progress import track
from kexp.core.settings import DEFAULT_SETTINGS
from kexp.format.fileformat import FileFormatError, serialize
from kexp.format.reading import read_file
from kexp.format.rules import KEXP_NAME, canonical_name, id_from_name
from kexp.format.validate import check_bytes
from kexp.storage import atomic

if TYPE_CHECKING:
    from kexp.core.settings import Settings
    from kexp.storage.store import Store

#: The name of a writer's temporary file beside an experiment file (whose name the
#: group holds).
_TEMPORARY = re.compile(r"\.(.+)\.[0-9a-f]{12}\.tmp", re.DOTALL)
#: What happened to one file: already canonical, rewritten, would be rewritten
#: (``check=True``), left alone because it has errors, or gone (deleted meanwhile: it
#: is no longer in the store, which is no problem).
FormatStatus = Literal["unchanged", "reformatted", "would-reformat", "error", "gone"]


@dataclasses.dataclass(frozen=True)
class FormatResult:
    """The result of formatting one file; ``message`` explains an ``error``."""

    path: Path
    status: FormatStatus
    message: str = ""
    #: The name kexp would give the file, when its name is an experiment's but not one
    #: kexp writes (``<id>-Unroll_4.md``: ``<id>-unroll-4.md``); None otherwise.
    canonical_name: str | None = None

    @property
    def changed(self) -> bool:
        """Whether the file is (or was) not in canonical form."""
        return self.status in ("reformatted", "would-reformat")


class NotFormattable(Exception):
    """A file cannot be put in canonical form; the message says why."""


def canonical_text(data: bytes | str, path: Path, settings: Settings | None = None) -> str:
    """The canonical text of the experiment file ``data`` (read from ``path``).

    Raises :class:`NotFormattable` when the file has errors, or when the canonical text
    would not read back as the same experiment.
    """
    checked = check_bytes(data, path) if settings is None else check_bytes(data, path, settings)
    errors = [p for p in sort_problems(checked.problems) if p.severity == "error"]
    if checked.document is None or errors:
        first = errors[0].format().splitlines()[0] if errors else "cannot be read"
        raise NotFormattable(f"not formatted, it has errors (kexp validate): {first}")
    before = checked.document.to_experiment()
    text = serialize(before)
    again = check_bytes(text, path) if settings is None else check_bytes(text, path, settings)
    too_large = [p for p in again.problems if p.code == "file-too-large"]
    if too_large:
        raise NotFormattable(f"not formatted: in canonical form {too_large[0].message}")
    if again.document is None or again.document.to_experiment() != before:
        raise NotFormattable(
            "not formatted: its canonical form would read back differently "
            "(a bug in kexp, please report it)"
        )
    return text


def format_file(path: Path, *, check: bool = False, store: Store | None = None) -> FormatResult:
    """Put one file in canonical form (or with ``check``, only say whether it is).

    With ``store``, the experiment's write lock is held while the file is re-read and
    replaced, so a concurrent update is never lost.
    """
    exp_id = id_from_name(path)
    result = _format_file(path, exp_id, check, store)
    if exp_id is not None and not KEXP_NAME.fullmatch(path.name):
        return dataclasses.replace(result, canonical_name=canonical_name(path.name))
    return result


def _format_file(path: Path, exp_id: str | None, check: bool, store: Store | None) -> FormatResult:
    lock = (
        store.lock(exp_id)
        if store is not None and exp_id is not None and not check
        else contextlib.nullcontext()
    )
    settings = store.settings if store is not None else None
    with lock:
        try:
            data = read_file(path, settings or DEFAULT_SETTINGS)
        except FileNotFoundError:
            return FormatResult(path, "gone")
        except FileFormatError as exc:
            return FormatResult(path, "error", f"not formatted: {exc.problem.message}")
        except OSError as exc:
            return FormatResult(path, "error", f"cannot read the file: {exc.strerror or exc}")
        try:
            text = canonical_text(data, path, settings)
        except NotFormattable as exc:
            return FormatResult(path, "error", str(exc))
        if data == text.encode("utf-8"):
            return FormatResult(path, "unchanged")
        if check:
            return FormatResult(path, "would-reformat")
        try:
            if not atomic.replace(path, text, only_if_exists=True):
                return FormatResult(path, "gone")
        except OSError as exc:
            if isinstance(exc, FileNotFoundError) and not os.path.lexists(path):
                return FormatResult(path, "gone")  # its folder was deleted meanwhile
            failure = atomic.write_failure(path, exc)
            return FormatResult(path, "error", f"not formatted: {failure}")
        return FormatResult(path, "reformatted")


def format_files(
    paths: Iterable[Path] | None = None, *, store: Store | None = None, check: bool = False
) -> list[FormatResult]:
    """Format files (every experiment file of ``store`` by default); see :func:`format_file`.

    Folders among ``paths`` stand for the experiment files below them. Formatting the
    whole store also deletes stale temporary files (:func:`sweep_temporary_files`).
    """
    if paths is None:
        if store is None:
            raise ValueError("give paths, a store, or both")
        if not check:
            sweep_temporary_files(store)
        selected = store.paths()
    else:
        selected = expand_paths(paths, store)
    return [format_file(p, check=check, store=store) for p in track(selected)]


def sweep_temporary_files(store: Store, older_than_s: float | None = None) -> list[Path]:
    """Delete the temporary files killed writers left beside experiment files.

    Only kexp's own (``.<id>-<slug>.md.<12 hex>.tmp``) older than ``older_than_s``
    (default: the ``stale_temporary_s`` setting) go: a live writer keeps its file for
    milliseconds, and queries never read them anyway. Returns the files deleted.
    """
    limit = store.settings.stale_temporary_s if older_than_s is None else older_than_s
    horizon = time.time() - limit
    removed: list[Path] = []
    for folder, dirs, files in os.walk(store.experiments_dir):
        dirs[:] = [d for d in dirs if not d.startswith(".")]
        for name in files:
            temporary = _TEMPORARY.fullmatch(name)
            if temporary is None or id_from_name(temporary.group(1)) is None:
                continue
            path = Path(folder, name)
            with contextlib.suppress(FileNotFoundError):
                info = path.lstat()
                if stat.S_ISREG(info.st_mode) and info.st_mtime < horizon:
                    path.unlink()
                    removed.append(path)
    return removed


def expand_paths(paths: Iterable[Path], store: Store | None = None) -> list[Path]:
    """Files as given; each folder replaced by the experiment files below it (sorted)."""
    selected: list[Path] = []
    for path in paths:
        if path.is_dir():
            below = path.resolve()
            if store is not None:
                selected.extend(p for p in store.paths() if p.resolve().is_relative_to(below))
            else:
                selected.extend(
                    p
                    for p in sorted(path.rglob("*.md"))
                    if id_from_name(p) is not None
                    and not any(part.startswith(".") for part in p.relative_to(path).parts)
                )
        else:
            selected.append(path)
    return selected
