"""The one atomic writer: how every file kexp writes gets to disk.

A file is first written whole to a hidden temporary file beside it
(``.<name>.<12 hex>.tmp``: never read as an experiment, swept by ``kexp fmt`` when
stale), flushed and fsynced; then

* :func:`create` links it into place only if the name is free (``FileExistsError``
  otherwise: nothing is ever overwritten), and
* :func:`replace` renames it over the file,

and the folder is fsynced, so that the new name survives a crash too. A reader sees the
old file or the new one, never part of one.

The mode rule: a replaced file keeps the permission bits of the file it replaces
(``kexp fmt``, ``kexp update`` and every other writer alike); a new file gets the
default for the user's umask (``0o666 & ~umask``), as ``open`` makes it.

:func:`prepare` and :func:`link` split a create of many files (an import) in two, so
that all of them are made durable by one sync of their file system. Every function
raises :class:`OSError`; :func:`write_failure` is the error to tell the user (and
:func:`writing_output` gives it for every writer of an output: a report, an export).
"""

from __future__ import annotations

import contextlib
import errno
import os
import secrets
import shutil
import sys
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import IO

from kexp.core.errors import ExperimentExistsError, KexpError


def temporary_beside(path: Path) -> Path:
    """A fresh hidden temporary name beside ``path``."""
    import secrets  # here: it costs a query a few milliseconds to import

    return path.with_name(f".{path.name}.{secrets.token_hex(6)}.tmp")


def _written(path: Path, data: str | bytes, *, sync: bool = True) -> Path:
    """A finished temporary file beside ``path`` holding ``data`` (text as UTF-8),
    fsynced unless ``sync`` is False; removed again when it cannot be written whole."""
    temporary = temporary_beside(path)
    try:
        with temporary.open("xb") as handle:
            handle.write(data.encode("utf-8") if isinstance(data, str) else data)
            if sync:
                handle.flush()
                os.fsync(handle.fileno())
    except BaseException:
        with contextlib.suppress(OSError):
            temporary.unlink()
        raise
    return temporary


def sync_folder(folder: Path) -> None:
    """fsync ``folder``, so that names created, renamed or removed in it are durable
    (where the system cannot open a folder, nothing is done)."""
    try:
        fd = os.open(folder, os.O_RDONLY)
    except OSError:
        return
    try:
        with contextlib.suppress(OSError):
            os.fsync(fd)
    finally:
        os.close(fd)


def create(path: Path, data: str | bytes) -> None:
    """Create ``path`` holding ``data`` atomically; :class:`FileExistsError` (nothing
    written) when the name is taken."""
    temporary = _written(path, data)
    try:
        os.link(temporary, path)
    finally:
        temporary.unlink(missing_ok=True)
    sync_folder(path.parent)


def replace(path: Path, data: str | bytes, *, only_if_exists: bool = False) -> bool:
    """Replace ``path`` with ``data`` atomically, keeping the permission bits of the
    file there (see the module docstring). With ``only_if_exists``, a file deleted
    meanwhile is not brought back: False, and nothing written. True when written."""
    return _put_in_place(_written(path, data), path, only_if_exists)


@contextlib.contextmanager
def replacing(path: Path) -> Iterator[IO[str]]:
    """A text stream (UTF-8) whose whole text replaces ``path`` atomically, as
    :func:`replace` does, when the ``with`` block ends; nothing written when it raises.
    For a file too large to hold in memory (an export)."""
    temporary = temporary_beside(path)
    try:
        with temporary.open("x", encoding="utf-8", newline="") as handle:
            yield handle
            handle.flush()
            os.fsync(handle.fileno())
    except BaseException:
        temporary.unlink(missing_ok=True)
        raise
    _put_in_place(temporary, path, False)


def _put_in_place(temporary: Path, path: Path, only_if_exists: bool) -> bool:
    """Rename the finished ``temporary`` over ``path`` (see :func:`replace`)."""
    try:
        try:
            mode: int | None = os.lstat(path).st_mode & 0o7777
        except FileNotFoundError:
            if only_if_exists:
                temporary.unlink()
                return False
            mode = None
        if mode is not None:
            with contextlib.suppress(OSError):
                os.chmod(temporary, mode)
        os.replace(temporary, path)
    except BaseException:
        temporary.unlink(missing_ok=True)
        raise
    sync_folder(path.parent)
    return True


def prepare(files: Sequence[tuple[Path, str]]) -> list[Path]:
    """The first half of :func:`create` for many files: each text written to a
    temporary file beside its path (folders made as needed), then all of them made
    durable by one sync of their file system (:func:`sync_files`). :func:`link` puts
    each in place. On failure none is left behind."""
    written: list[Path] = []
    try:
        for path, text in files:
            path.parent.mkdir(parents=True, exist_ok=True)
            written.append(_written(path, text, sync=False))
        sync_files(written)
    except BaseException:
        for temporary in written:
            temporary.unlink(missing_ok=True)
        raise
    return written


def link(temporary: Path, path: Path) -> None:
    """Put a file of :func:`prepare` in place if ``path`` is free
    (:class:`FileExistsError` otherwise: nothing is overwritten); the temporary name
    goes. The folder is synced by :func:`sync_folders`, once for many files."""
    try:
        os.link(temporary, path)
    finally:
        temporary.unlink(missing_ok=True)


def sync_folders(paths: Sequence[Path]) -> None:
    """fsync the folder of each of ``paths`` once (after :func:`link`)."""
    for folder in dict.fromkeys(p.parent for p in paths):
        sync_folder(folder)


def sync_files(paths: Sequence[Path]) -> None:
    """Make the data of ``paths`` durable: one ``syncfs`` of their file system on Linux,
    else an ``fsync`` of each."""
    if not paths:
        return
    if sys.platform.startswith("linux"):
        # lazy: ctypes, only on Linux to call syncfs
        import ctypes

        try:
            syncfs = ctypes.CDLL(None, use_errno=True).syncfs
            fd = os.open(paths[0].parent, os.O_RDONLY)
        except (OSError, AttributeError):
            pass
        else:
            try:
                if syncfs(fd) == 0:
                    return
            finally:
                os.close(fd)
    for path in paths:
        fd = os.open(path, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)


def exists_error(path: Path) -> ExperimentExistsError:
    """The error of a create whose name was taken meanwhile (nothing overwritten)."""
    return ExperimentExistsError(f"{path} already exists; nothing was overwritten")


def write_failure(path: Path, exc: OSError, *, made_folder: bool = False) -> KexpError:
    """The error for a write of ``path`` that failed (nothing was changed), saying what
    to do. The folder to check is the one the failed call wrote in (the parent of
    ``exc.filename``: a folder above ``path`` that could not be made, say), else
    ``path``'s. ``made_folder``: the writer made ``path``'s folder itself, so a folder
    missing now was removed while it wrote."""
    where = Path(exc.filename).parent if isinstance(exc.filename, str) else path.parent
    hints = {
        errno.ENOSPC: "free some space on that disk, then run the command again",
        errno.EDQUOT: "your disk quota is used up: free some space, then run it again",
        errno.EFBIG: "the system refuses a file this large (ulimit -f?)",
        errno.EROFS: "that file system is read-only",
        errno.EACCES: f"check the owner and permissions of {where}",
        errno.EPERM: f"check the owner and permissions of {where}",
    }
    hint = hints.get(exc.errno or 0, "check the disk and the folder, then run it again")
    if exc.errno == errno.ENOENT and not path.parent.is_dir():
        if made_folder:
            return KexpError(
                f"cannot write {path}: the folder {path.parent} was removed while kexp "
                "wrote in it; nothing was changed: run the command again"
            )
        return KexpError(
            f"cannot write {path}: the folder {path.parent} does not exist; nothing was "
            "changed: make it first (mkdir -p), or write elsewhere"
        )
    return KexpError(f"cannot write {path}: {exc.strerror or exc}; nothing was changed: {hint}")


@contextlib.contextmanager
def writing_output(path: Path, *, made_folder: bool = False) -> Iterator[None]:
    """The ``with`` block writes the output ``path`` (a report, an export): an
    :class:`OSError` raised in it becomes :func:`write_failure`'s one-line error, the
    same for every writer of an output (see :func:`write_failure` for ``made_folder``)."""
    try:
        yield
    except OSError as exc:
        raise write_failure(path, exc, made_folder=made_folder) from None


def replace_folder(staging: Path, target: Path) -> None:
    """Put the finished folder ``staging`` in place of ``target`` (a folder, or
    nothing): ``target`` is renamed aside, ``staging`` renamed to it, then the old one
    removed; when the second rename fails the old folder is put back. A reader sees the
    old folder or the new one, whole (the report, :mod:`kexp.output.html`)."""
    old: Path | None = None
    if target.exists():
        old = target.parent / f".{target.name}.kexp-old-{secrets.token_hex(4)}"
        os.rename(target, old)
    try:
        os.rename(staging, target)
    except OSError:
        if old is not None:
            os.rename(old, target)
        raise
    if old is not None:
        shutil.rmtree(old, ignore_errors=True)
