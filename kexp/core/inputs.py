"""The one bounded reader of what a user gives kexp: timing files, a document, a
description, a diff, a predecessor database, standard input (``-``).

Each is read up to a limit (:attr:`~kexp.core.settings.Settings.max_input_bytes`, or
:attr:`~kexp.core.settings.Settings.max_import_bytes` for a database): a larger file is
refused before it is read (its size says so), an endless one (``/dev/zero``, a pipe
that never ends) after one byte past the limit, and a device is refused unread. Each
refusal is one line (:class:`InputError`), never a ``MemoryError``.
"""

from __future__ import annotations

import os
import stat
import sys
from pathlib import Path
from typing import Any, BinaryIO

from kexp.core.errors import InputError
from kexp.core.settings import DEFAULT_SETTINGS

#: Bytes read at a time.
_CHUNK = 1 << 20
#: What ``-`` names.
STDIN = "-"


def read_input(
    name: str | Path,
    what: str = "the input",
    *,
    limit: int = DEFAULT_SETTINGS.max_input_bytes,
    setting: str = "max_input_bytes",
) -> bytes:
    """The bytes of the file ``name`` (``-``: standard input), at most ``limit`` of them.

    ``what`` names the input in errors (``"the baseline timings"``), ``setting`` the
    limit's setting. Raises :class:`InputError` for a file over the limit (unread), an
    input that goes on past it, a folder or a device (``/dev/zero``), or a file that
    cannot be opened. A pipe (``<(command)``, a FIFO) is read like a file.
    """
    if str(name) == STDIN:
        stream = getattr(sys.stdin, "buffer", None)
        if stream is None:  # pragma: no cover - a replaced stdin without bytes
            text = sys.stdin.read(limit + 1)
            data = text.encode("utf-8", "surrogateescape")
            return _within(data, limit, what, "standard input", setting)
        return _bounded(stream, limit, what, "standard input", setting)
    try:
        fd = os.open(name, os.O_RDONLY | getattr(os, "O_CLOEXEC", 0))
    except OSError as exc:
        raise InputError(f"cannot read {what} {name}: {exc.strerror or exc}") from None
    try:
        info = os.fstat(fd)
        if stat.S_ISDIR(info.st_mode):
            raise InputError(f"cannot read {what} {name}: it is a folder, not a file")
        if not (stat.S_ISREG(info.st_mode) or stat.S_ISFIFO(info.st_mode)):
            raise InputError(
                f"cannot read {what} {name}: it is not a file but a device, which may never "
                "end; give a file"
            )
        if stat.S_ISREG(info.st_mode) and info.st_size > limit:
            raise InputError(_too_large(what, str(name), limit, setting, info.st_size))
        with os.fdopen(os.dup(fd), "rb") as stream:
            return _bounded(stream, limit, what, str(name), setting)
    finally:
        os.close(fd)


def read_input_text(
    name: str | Path,
    what: str = "the input",
    *,
    limit: int = DEFAULT_SETTINGS.max_input_bytes,
    setting: str = "max_input_bytes",
    errors: str = "strict",
) -> str:
    """:func:`read_input` decoded as UTF-8 (a byte-order mark dropped); bytes that are
    not UTF-8 raise :class:`InputError` saying where (``errors="replace"`` keeps them
    as U+FFFD instead)."""
    data = read_input(name, what, limit=limit, setting=setting)
    try:
        return data.decode("utf-8-sig", errors)
    except UnicodeDecodeError as exc:
        where = "standard input" if str(name) == STDIN else str(name)
        raise InputError(
            f"{what} ({where}) is not UTF-8 text (byte 0x{data[exc.start]:02x} at offset "
            f"{exc.start}): save it as UTF-8"
        ) from None


def _bounded(stream: BinaryIO, limit: int, what: str, where: str, setting: str) -> bytes:
    """At most ``limit`` bytes of ``stream``; :class:`InputError` when it holds more."""
    chunks: list[bytes] = []
    size = 0
    while size <= limit:
        chunk = stream.read(min(_CHUNK, limit + 1 - size))
        if not chunk:
            break
        chunks.append(chunk)
        size += len(chunk)
    return _within(b"".join(chunks), limit, what, where, setting)


def _within(data: bytes, limit: int, what: str, where: str, setting: str) -> bytes:
    if len(data) > limit:
        raise InputError(_too_large(what, where, limit, setting))
    return data


def _too_large(what: str, where: str, limit: int, setting: str, size: int | None = None) -> str:
    found = f"is {_size(size)}, over" if size is not None else "is over"
    return (
        f"{what} ({where}) {found} the {_size(limit)} limit of an input (the {setting} "
        "setting): give a smaller file"
    )


def _size(count: int) -> str:
    for unit, shift in (("GiB", 30), ("MiB", 20), ("KiB", 10)):
        if count >= 1 << shift:
            value = count / (1 << shift)
            return f"{value:.0f} {unit}" if value == int(value) else f"{value:.1f} {unit}"
    return f"{count} bytes"


def first_non_text(text: str) -> int | None:
    """The index of the first lone surrogate of ``text`` (what keeps it from being
    UTF-8 text: a byte that was not UTF-8, decoded with ``surrogateescape`` as git's
    output and command-line arguments are), else None."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as exc:
        return exc.start
    return None


def describe_non_text(char: str) -> str:
    """A lone surrogate described: the byte it stands for, or itself."""
    if "\udc80" <= char <= "\udcff":
        return f"the byte 0x{ord(char) - 0xDC00:02x}"
    return f"a lone surrogate (\\u{ord(char):04x})"


def not_text(value: Any) -> str | None:
    """What keeps ``value`` (a string, or lists and mappings of them) from being UTF-8
    text (:func:`first_non_text`), described with its place, else None."""
    if isinstance(value, str):
        at = first_non_text(value)
        return None if at is None else f"{describe_non_text(value[at])} at character {at}"
    if isinstance(value, dict):
        value = [*value.keys(), *value.values()]
    if isinstance(value, (list, tuple)):
        for item in value:
            found = not_text(item)
            if found is not None:
                return found
    return None


def require_text(name: str, value: Any) -> None:
    """Refuse ``value`` for the field ``name`` when it is not UTF-8 text
    (:func:`not_text`), with one line saying what to do."""
    found = not_text(value)
    if found is not None:
        raise InputError(
            f"{name} is not UTF-8 text ({found}): give it in UTF-8 (convert a file in "
            "another encoding first, e.g. with iconv -f latin1 -t utf-8)"
        )
