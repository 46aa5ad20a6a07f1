"""Work over many files shared with one forked child process.

On a machine with more than one core, reading, checking or ``stat``-ing a large store
goes twice as fast in two processes. :func:`in_two_processes` forks once, gives the
child half the items and takes its result back as ``marshal`` data; the answer never
depends on the child (if it fails in any way, its half is done here). ``KEXP_NO_FORK``
keeps everything in one process, and so does a process running other threads. The
child ends with its parent (killed, it leaves no orphan working on).
"""

from __future__ import annotations

import marshal
import os
import sys
from collections.abc import Callable, Sequence
from typing import Any, TypeVar

#: Below this many files one process does the work (a fork costs more than it saves).
PARALLEL_MIN_FILES = 3000

_In = TypeVar("_In")


def _forkable() -> bool:
    """Whether a child may be forked safely: POSIX, several cores, no other thread."""
    if not hasattr(os, "fork") or os.environ.get("KEXP_NO_FORK"):
        return False
    threading = sys.modules.get("threading")
    if threading is not None and threading.active_count() > 1:
        return False
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    return (cores or 1) > 1


def _end_with_parent(fd: int) -> None:  # pragma: no cover - runs in the child
    """End this child as soon as its parent ends (killed, say): a thread waits on
    ``fd``, the pipe whose other end only the parent holds, which ends with it. The
    child's work is the parent's, never wanted alone."""

    def watch() -> None:
        try:
            while os.read(fd, 1):
                pass
        except OSError:
            pass
        os._exit(1)

    # lazy: only a child needs a thread
    import threading

    threading.Thread(target=watch, daemon=True).start()


def in_two_processes(
    work: Callable[[list[_In]], list[Any]],
    items: list[_In],
    weight: int,
    weights: Sequence[int] | None = None,
    discarded: Callable[[int], None] | None = None,
    share: float = 0.5,
) -> list[Any]:
    """``work(items)`` as one list, split between this process and a forked child when
    ``weight`` (the number of files involved) makes it worth it; ``weights`` (one per
    item) balance the parts, ``share`` is this process's (less when it has more to do
    meanwhile).

    The child sends its result back as ``marshal`` data; if it fails in any way its
    half is done here instead, so the answer never depends on the child.
    ``discarded(pid)`` runs when the child's result is not used (to clean up after it).
    """
    if weight < PARALLEL_MIN_FILES or len(items) < 2 or not _forkable():
        return work(items)
    half = max(1, min(len(items) - 1, round(len(items) * share)))
    if weights is not None:
        total, running = sum(weights), 0
        for index, value in enumerate(weights):
            running += value
            if running >= total * share:
                half = max(1, min(len(items) - 1, index + 1))
                break
    mine, theirs = items[:half], items[half:]
    read_end, write_end = os.pipe()
    # Held open by this process alone: the child sees its end when this one is gone.
    alive_read, alive_write = os.pipe()
    sys.stdout.flush()
    sys.stderr.flush()
    pid = os.fork()
    if pid == 0:  # pragma: no cover - the child (its result is checked by the parent)
        status = 1
        try:
            os.close(read_end)
            os.close(alive_write)
            _end_with_parent(alive_read)
            data = marshal.dumps(list(work(theirs)))
            view = memoryview(data)
            while view:
                view = view[os.write(write_end, view) :]
            status = 0
        finally:
            os._exit(status)
    os.close(write_end)
    os.close(alive_read)
    try:
        try:
            result = list(work(mine))
            chunks = []
            while chunk := os.read(read_end, 1 << 20):
                chunks.append(chunk)
        except BaseException:
            os.close(read_end)  # first: a child blocked writing to the pipe then ends
            os.waitpid(pid, 0)
            if discarded is not None:
                discarded(pid)
            raise
        os.close(read_end)
        _, status = os.waitpid(pid, 0)
    finally:
        os.close(alive_write)
    if status == 0:
        try:
            result.extend(marshal.loads(b"".join(chunks)))
            return result
        except (EOFError, ValueError, TypeError):
            pass
    if discarded is not None:
        discarded(pid)
    return result + list(work(theirs))
