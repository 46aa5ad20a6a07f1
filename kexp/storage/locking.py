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

A thread that holds a lock may take it again (re-entrant): a read-modify-write holds
the experiment's lock from its read to its write, and the update it ends with takes the
same lock inside it. Only a shared lock cannot be taken again exclusively.
"""

from __future__ import annotations

import errno
import fcntl
import os
import threading
import time
from collections.abc import Iterator
from contextlib import AbstractContextManager, contextmanager
from pathlib import Path
from typing import Any

from kexp.core.errors import KexpError, LockTimeoutError

#: The longest pause between two attempts to take a lock (seconds).
_MAX_POLL_S = 0.01

#: The locks this thread holds: (device, inode) of the lock file → [shared, depth].
_HELD = threading.local()


def _held() -> dict[tuple[int, int], list[Any]]:
    """This thread's held locks (none in a process forked since they were taken)."""
    pid, held = getattr(_HELD, "locks", (None, None))
    if pid != os.getpid() or held is None:
        held = {}
        _HELD.locks = (os.getpid(), held)
    return held


@contextmanager
def file_lock(path: Path, timeout_s: float, *, shared: bool = False) -> Iterator[None]:
    """Hold a lock on ``path`` (created if needed) for the ``with`` block: exclusive (one
    holder), or ``shared`` (any number of shared holders, no exclusive one). Re-entrant:
    a thread taking a lock it holds goes on, the lock held until its outermost block ends.

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
        info = os.fstat(fd)
        key, held = (info.st_dev, info.st_ino), _held()
        if key in held:  # this thread holds it already: taken again
            if held[key][0] and not shared:
                raise KexpError(f"{path} is held shared here: it cannot be taken exclusively")
            held[key][1] += 1
            try:
                yield
            finally:
                held[key][1] -= 1
            return
        _take(fd, path, timeout_s, shared)
        held[key] = [shared, 1]
        try:
            yield
        finally:
            del held[key]
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
