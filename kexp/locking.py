"""Per-experiment write locks (POSIX ``flock``), released by the kernel on process death.

Because the kernel drops an ``flock`` when its holder exits, even on SIGKILL, a crashed
writer never leaves a stale lock behind; lock files themselves are kept (deleting them
would race with a waiting writer).
"""

from __future__ import annotations

import fcntl
import os
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from kexp.errors import LockTimeoutError


@contextmanager
def exclusive_lock(path: Path, timeout_s: float) -> Iterator[None]:
    """Hold an exclusive lock on ``path`` (created if needed) for the ``with`` block."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        deadline = time.monotonic() + timeout_s
        # Polled, not blocking (a blocking flock cannot time out); the short ceiling keeps
        # the lock from lying idle long after its holder lets go.
        delay = 0.0005
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if time.monotonic() >= deadline:
                    raise LockTimeoutError(
                        f"another kexp process has held {path} for over {timeout_s:.0f} s; "
                        "try again, or find the process that is stuck"
                    ) from None
                time.sleep(delay)
                delay = min(delay * 2, 0.01)
        yield
    finally:
        os.close(fd)
