"""Reading one experiment file from disk, safely: never through a symbolic link, never
more than ``max_file_bytes``; the problem that says why a file cannot be read, or is
never read (a stray Markdown file)."""

from __future__ import annotations

import os
import shlex
import stat
from collections.abc import Sequence
from pathlib import Path

from kexp.core.advice import LIST_SHOWS
from kexp.core.problems import Problem, display_path
from kexp.core.settings import DEFAULT_SETTINGS, Settings
from kexp.format.fileformat import FileFormatError, parse
from kexp.format.rules import EXPERIMENT_NAME, canonical_name


def error_problem(
    path: Path | str, line: int, column: int, code: str, field: str, message: str, hint: str
) -> Problem:
    """An ``error`` :class:`Problem` at ``path``'s ``line`` and ``column``."""
    return Problem(str(path), line, column, "error", code, field, message, hint)


def _symlink_error(path: Path | str) -> FileFormatError:
    return FileFormatError(
        error_problem(
            path,
            1,
            1,
            "symlink",
            "",
            "experiment files may not be symbolic links",
            "replace the link with the file itself",
        )
    )


def read_file(path: Path | str, settings: Settings = DEFAULT_SETTINGS) -> bytes:
    """The bytes of an experiment file, read safely.

    Raises :class:`FileFormatError` for a symbolic link (never followed, even if the
    file is swapped for one meanwhile), something that is not a regular file (a FIFO
    would block, a device never end), or a file over ``settings.max_file_bytes`` (never
    read whole: at most one byte over the limit is read); :class:`OSError` when it
    cannot be read.
    """
    return read_file_and_stat(path, settings)[0]


def read_file_and_stat(
    path: Path | str, settings: Settings = DEFAULT_SETTINGS
) -> tuple[bytes, os.stat_result]:
    """:func:`read_file`, and the file's ``stat`` taken before it was read (the
    signature the cache keeps with what was read)."""
    flags = os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_NONBLOCK", 0)
    try:
        fd = os.open(path, flags)
    except OSError:
        if os.path.islink(path):  # O_NOFOLLOW refused it (or it became one meanwhile)
            raise _symlink_error(path) from None
        raise
    if not hasattr(os, "O_NOFOLLOW") and os.path.islink(path):  # pragma: no cover
        os.close(fd)
        raise _symlink_error(path)
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            raise FileFormatError(
                error_problem(
                    path,
                    1,
                    1,
                    "unreadable",
                    "",
                    "cannot read the file: it is not a regular file",
                    "give the path of an experiment file",
                )
            )
        limit = settings.max_file_bytes
        chunks: list[bytes] = []
        size = 0
        # One byte more than its size tells whether the file grew meanwhile.
        want = info.st_size + 1
        while info.st_size <= limit and size <= limit:
            asked = min(want, limit + 1 - size)
            chunk = os.read(fd, asked)
            if not chunk:
                break
            chunks.append(chunk)
            size += len(chunk)
            if len(chunk) < asked and size == info.st_size:
                # All of it, as fstat saw it: a write after that changed the file's
                # signature, so whoever caches these bytes reads it again.
                break
            want = 1 << 16
        if info.st_size > limit or size > limit:
            shown = info.st_size if info.st_size > limit else f"over {limit}"
            raise FileFormatError(size_problem(path, shown, limit))
    finally:
        os.close(fd)
    return b"".join(chunks), info


def size_problem(path: Path | str, size: int | str, limit: int) -> Problem:
    """The ``file-too-large`` problem of a file of ``size`` bytes over ``limit``: the one
    size verdict, whatever the bytes come from (a file, a git blob, a write)."""
    return error_problem(
        path,
        1,
        1,
        "file-too-large",
        "",
        f"the file is {size} bytes; the limit is {limit} (the max_file_bytes setting)",
        "move large logs or profiles out of the experiment (into files of their own, "
        "linked from it) and keep a summary in the experiment",
    )


def stray_problem(
    path: Path | str, data: bytes | Problem, settings: Settings = DEFAULT_SETTINGS
) -> Problem:
    """The ``stray-file`` error of a Markdown file of ``experiments/`` that kexp never
    reads (:func:`kexp.format.rules.is_stray`), naming the rename to make: to
    ``<id>-<slug>.md`` with the id of its front-matter (``data``: its bytes) or of its
    name."""
    exp_id = summary = None
    if isinstance(data, bytes):
        try:
            fields = parse(data, Path(path), fast=True).fields
        except FileFormatError:
            fields = {}
        found = fields.get("id")
        if isinstance(found, str) and EXPERIMENT_NAME.fullmatch(f"{found}.md"):
            exp_id = found
        text = fields.get("change_summary")
        summary = text if isinstance(text, str) and text.strip() else None
    folder, name = os.path.split(str(path))
    new = canonical_name(name, exp_id, summary)
    if new.startswith("<"):
        hint = (
            "if it is an experiment, rename it <id>-<slug>.md with the id of its "
            "front-matter; if it is not, move it out of experiments/"
        )
    else:
        # mv, not git mv: a file written by hand is mostly untracked (git mv refuses);
        # a tracked one moved so is a deletion and an addition, which git sees as a rename.
        moved = (shlex.quote(display_path(p)) for p in (path, os.path.join(folder, new)))
        hint = f"rename it to {new} (mv {' '.join(moved)})"
    return error_problem(
        path,
        1,
        1,
        "stray-file",
        "",
        f"{name!r} is not named as an experiment (<16 hex id>-<slug>.md), so kexp never reads it",
        hint,
    )


def read_or_problem(path: Path | str, settings: Settings = DEFAULT_SETTINGS) -> bytes | Problem:
    """The bytes of an experiment file (as :func:`read_file` reads them), or the problem
    that says why it cannot be read (as :func:`kexp.format.validate.read_and_check` reports it)."""
    try:
        return read_file(path, settings)
    except FileFormatError as exc:
        return exc.problem
    except OSError as exc:
        return error_problem(
            path,
            1,
            1,
            "unreadable",
            "",
            f"cannot read the file: {exc.strerror or exc}",
            f"check the path ({LIST_SHOWS} the experiments)"
            if isinstance(exc, FileNotFoundError)
            else "check the file's permissions"
            if isinstance(exc, PermissionError)
            else "give the path of an experiment file",
        )


def real_paths(paths: Sequence[str]) -> list[str]:
    """``os.path.realpath`` of each of ``paths``, each folder resolved once: a file that
    is not a symbolic link is its folder's real path and its name."""
    folders: dict[str, str] = {}
    real: list[str] = []
    for path in paths:
        folder, name = os.path.split(path)
        if name in ("", ".", "..") or os.path.islink(path):
            real.append(os.path.realpath(path))
            continue
        found = folders.get(folder)
        if found is None:
            found = folders[folder] = os.path.realpath(folder)
        real.append(os.path.join(found, name))
    return real
