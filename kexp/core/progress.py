"""Progress reporting for work over many files, without tying the library to a terminal.

Library loops wrap their iterables in :func:`track`; it costs nothing unless a caller
(the ``kexp`` command, on a terminal) installs a reporter with :func:`reporting`::

    with reporting(lambda done, total: print(done, total)):
        store.validate()
"""

from __future__ import annotations

import contextlib
import contextvars
from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import TypeVar

_T = TypeVar("_T")

#: A reporter is called with (items done, total items) as work advances.
Reporter = Callable[[int, int], None]

_REPORTER: contextvars.ContextVar[Reporter | None] = contextvars.ContextVar(
    "kexp_progress_reporter", default=None
)


@contextlib.contextmanager
def reporting(reporter: Reporter | None) -> Iterator[None]:
    """Send the progress of :func:`track` loops in this block to ``reporter``."""
    token = _REPORTER.set(reporter)
    try:
        yield
    finally:
        _REPORTER.reset(token)


def track(items: Sequence[_T]) -> Iterator[_T]:
    """Iterate over ``items``, telling the active reporter (if any) how far it got."""
    reporter = _REPORTER.get()
    if reporter is None:
        yield from items
        return
    total = len(items)
    reporter(0, total)
    for done, item in enumerate(items, 1):
        yield item
        reporter(done, total)


def track_part(items: Iterable[_T], part: int, total: int) -> Iterator[_T]:
    """Iterate over ``items`` (``part`` of them), one part of ``total`` items of work
    shared between processes: the reporter (if any) is told this part's progress
    scaled to ``total``, so the process that reports shows the whole advancing."""
    ticks = track(range(total))
    shown = next(ticks, 0)
    for number, item in enumerate(items):
        yield item
        while shown < (number + 1) * total // part:
            shown = next(ticks, total)
    for _ in ticks:
        pass
