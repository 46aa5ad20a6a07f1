"""Write locks (POSIX ``flock``), released by the kernel on process death.

Because the kernel drops an ``flock`` when its holder exits, even on SIGKILL, a crashed
writer never leaves a stale lock behind: the next writer gets the lock within one poll
(10 ms). Lock files themselves are kept (deleting them would race with a waiting
writer). The descriptor is not inherited by programs the holder starts, so a child
process (git) cannot keep a lock alive after its parent died.

These locks guard a store (all under its cache folder, ``.kexp/locks/``):

* one per experiment, exclusive: updates, deletes and ``kexp fmt`` of that file;
* one for the lineage, shared by writes that name other experiments (``pid``,
  ``combines``) from checking that those exist until the file is written, exclusive for
  a delete from checking that nothing names the experiment until it is gone. So a
  parent is never deleted under a new child, and writes naming parents never wait for
  each other. Whoever takes both takes the lineage lock first;
* one per parent (by its id's last two characters; the roots share one), exclusive,
  held by a create of timings from its check that no experiment holds them already
  until its file is written: the same timings recorded twice at once are written once.
  It is taken before any other.
"""

from __future__ import annotations

import errno
import fcntl
import os
import time
from collections.abc import Iterator
from contextlib import AbstractContextManager, contextmanager
from pathlib import Path

from kexp.core.errors import KexpError, LockTimeoutError

#: The longest pause between two attempts to take a lock (seconds).
_MAX_POLL_S = 0.01


@contextmanager
def file_lock(path: Path, timeout_s: float, *, shared: bool = False) -> Iterator[None]:
    """Hold a lock on ``path`` (created if needed) for the ``with`` block: exclusive (one
    holder), or ``shared`` (any number of shared holders, no exclusive one).

    Raises :class:`LockTimeoutError` when it cannot be taken within ``timeout_s``.
    """
    try:
        if path.parent.is_symlink():
            raise KexpError(
                f"{path.parent} is a symbolic link: kexp never writes its locks through one; "
                "remove it (kexp recreates it)"
            )
        path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(path, os.O_RDWR | os.O_CREAT | getattr(os, "O_NOFOLLOW", 0), 0o644)
    except OSError as exc:
        raise KexpError(_lock_failure(path, exc)) from None
    try:
        _take(fd, path, timeout_s, shared)
        yield
    finally:
        os.close(fd)


@contextmanager
def folder_lock(path: Path, timeout_s: float) -> Iterator[None]:
    """Hold an exclusive lock on the folder ``path`` itself (no lock file is made in it)
    for the ``with`` block; :class:`LockTimeoutError` after ``timeout_s``."""
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_DIRECTORY", 0))
    except OSError as exc:
        raise KexpError(f"cannot lock the folder {path}: {exc.strerror or exc}") from None
    try:
        _take(fd, path, timeout_s, shared=False)
        yield
    finally:
        os.close(fd)


def _take(fd: int, path: Path, timeout_s: float, shared: bool) -> None:
    deadline = time.monotonic() + timeout_s
    # Polled, not blocking (a blocking flock cannot time out); the short ceiling keeps
    # the lock from lying idle long after its holder lets go.
    delay = 0.0005
    mode = fcntl.LOCK_SH if shared else fcntl.LOCK_EX
    while True:
        try:
            fcntl.flock(fd, mode | fcntl.LOCK_NB)
            return
        except BlockingIOError:
            if time.monotonic() >= deadline:
                raise LockTimeoutError(
                    f"another kexp process has held {path} for over {_seconds(timeout_s)} s; "
                    "try again, or find the process that is stuck"
                ) from None
            time.sleep(delay)
            delay = min(delay * 2, _MAX_POLL_S)


def _seconds(seconds: float) -> str:
    """``seconds`` as a message says them: to the millisecond, no trailing zeros (``0.3``,
    ``30``), never rounded to ``0``."""
    return f"{seconds:.3f}".rstrip("0").rstrip(".") or "0"


def _lock_failure(path: Path, exc: OSError) -> str:
    """Why a lock file cannot be created, and what to do."""
    if exc.errno == errno.ELOOP:
        return (
            f"{path} is a symbolic link: kexp never writes its locks through one; remove it "
            "(kexp recreates it)"
        )
    if isinstance(exc, PermissionError) or exc.errno == errno.EROFS:
        return (
            f"cannot create the lock file {path}: {exc.strerror}; kexp writes its locks in "
            f"{path.parent} (check its owner and permissions, or remove it so that kexp "
            "recreates it)"
        )
    return f"cannot create the lock file {path}: {exc.strerror or exc}"


def exclusive_lock(path: Path, timeout_s: float) -> AbstractContextManager[None]:
    """Hold an exclusive lock on ``path`` (created if needed) for the ``with`` block."""
    return file_lock(path, timeout_s)
