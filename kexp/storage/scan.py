"""The one pass over every file of a source, and the positions found after it.

:func:`scan` reads each file of a :class:`~kexp.storage.sources.FileSource` once, in order,
and keeps what the caller's ``keep`` makes of it (validation keeps problems and links,
a review keeps links and facts): nothing else of a file stays in memory. A large
working tree is read by this process and a forked child, half each
(:func:`kexp.storage.parallel.in_two_processes`; ``KEXP_NO_FORK`` turns it off).
:func:`value_positions` finds the (line, column) of the values store-wide problems
point at, reading again only the files whose key lines the scan did not keep.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TypeVar

from kexp.core.problems import Problem
from kexp.core.progress import reporting, track_part
from kexp.core.settings import Settings
from kexp.format.filelinks import FileLinks
from kexp.format.validate import CheckedFile
from kexp.storage.sources import CHECK_BATCH, FileSource

_R = TypeVar("_R")

#: What a scan makes of one file: ``keep(path, bytes or problem, settings, shared)``,
#: where ``shared`` is one dictionary per process for strings that repeat from file to
#: file.
Keep = Callable[[str, "bytes | Problem", Settings, dict[str, str]], _R]


def scan(
    source: FileSource,
    files: list[str],
    settings: Settings,
    keep: Keep[_R],
    *,
    split: bool = True,
) -> list[_R]:
    """``keep`` of each of ``files`` of ``source``, in order (see the module docstring;
    ``split=False``: all in this process). The records must be data ``marshal`` can
    send (a child's come back that way)."""
    total = len(files)
    parent = os.getpid()

    def work(part: list[str]) -> list[_R]:
        shared: dict[str, str] = {}
        contents = track_part(source.contents(part, settings), len(part), total)
        return [keep(path, data, settings, shared) for path, data in contents]

    def either(part: list[str]) -> list[_R]:
        if os.getpid() != parent:  # the child: only the parent shows progress
            with reporting(None):
                return work(part)
        return work(part)

    if split and source.splittable:
        from kexp.storage.parallel import in_two_processes  # here: not every store command needs it

        return in_two_processes(either, files, total)
    return work(files)


def value_positions(
    source: FileSource,
    settings: Settings,
    items: Sequence[FileLinks],
    where: dict[int, set[tuple[str | int, ...]]],
    in_store: int,
    extra: Sequence[CheckedFile] = (),
) -> dict[tuple[int, tuple[str | int, ...]], tuple[int, int]]:
    """(line, column) of each front-matter value ``where[n]`` in the file ``items[n]``
    (the source's files, ``in_store`` of them, then ``extra``'s), as
    ``Document.position`` gives them: from the key lines kept (canonical files), else
    from the file read again and parsed, :data:`~kexp.storage.sources.CHECK_BATCH` at a time."""
    positions: dict[tuple[int, tuple[str | int, ...]], tuple[int, int]] = {}
    again: list[int] = []
    for n in sorted(where):
        if n >= in_store:
            document = extra[n - in_store].document
            for at in where[n]:
                positions[n, at] = document.position(at) if document is not None else (1, 1)
            continue
        for at in where[n]:
            known = items[n].position(at)
            if known is None:
                again.append(n)
                break
            positions[n, at] = known
    for start in range(0, len(again), CHECK_BATCH):
        numbers = again[start : start + CHECK_BATCH]
        with reporting(None):  # a few files read again: no progress of their own
            checked = source.check_files([Path(items[n].path) for n in numbers], settings)
        for n, item in zip(numbers, checked, strict=True):
            document = item.document
            for at in where[n]:
                positions[n, at] = document.position(at) if document is not None else (1, 1)
    return positions
