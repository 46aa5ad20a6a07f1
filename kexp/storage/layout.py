"""Where an experiment's file lives: ``experiments/<YYYY>/<MM>/<xx>/<id>-<slug>.md``.

``YYYY/MM`` is the creation month (UTC); ``xx`` is the last two hex digits of the id,
which are random (in kexp's ids, ``secrets``; in the predecessor's, all sixteen), so
the experiments of a month spread evenly over 256 folders. The fan-out is decided by
the id alone: two machines or branches writing at once need no coordination, and a
merge of two branches never overfills a folder (a folder that split when full could
not promise that across a merge). At 1,000,000 experiments a year a folder holds about
330 files (binomially spread: none near 1,000), a burst of thousands in one day is
spread over the 256 folders, and a month folder lists at most 256 entries. The path is
chosen once, at creation, and never changes.

Stores written in the plain month layout (``experiments/<YYYY>/<MM>/<id>-<slug>.md``,
kexp before this layout) are read as they are, and both layouts mixed read as one
store: kexp finds experiment files at any depth. :mod:`kexp.storage.migration` moves a store's
month-layout files into the fan-out layout.
"""

from __future__ import annotations

import re

#: A year folder and a month folder.
_YEAR = re.compile(r"[0-9]{4}")
_MONTH = re.compile(r"(0[1-9]|1[0-2])")
#: A fan-out folder: the last hex digits of an id.
_FANOUT = re.compile(r"[0-9a-f]{2}")
#: How many of the id's last hex digits name its folder within a month.
FANOUT_DIGITS = 2


def month_of(created_at: str, now: str) -> tuple[str, str]:
    """(year, month) folder names of an experiment created at ``created_at`` (an ISO
    time); of ``now`` (an ISO time too) when ``created_at`` is no such time."""
    year, month = created_at[:4], created_at[5:7]
    if not (_YEAR.fullmatch(year) and _MONTH.fullmatch(month) and created_at[4:5] == "-"):
        year, month = now[:4], now[5:7]
    return year, month


def fanout(exp_id: str) -> str:
    """The folder within its month of the experiment with (checked) id ``exp_id``."""
    return exp_id[-FANOUT_DIGITS:]


def folder_parts(exp_id: str, created_at: str, now: str) -> tuple[str, str, str]:
    """The folders, below ``experiments/``, of a new file of experiment ``exp_id``
    (a checked id) created at ``created_at``: (year, month, fan-out)."""
    year, month = month_of(created_at, now)
    return year, month, fanout(exp_id)


def is_month_folder(parts: tuple[str, ...] | list[str]) -> bool:
    """Whether ``parts`` (folder names below ``experiments/``) are a month folder of
    the plain month layout: ``(YYYY, MM)``."""
    return len(parts) == 2 and bool(_YEAR.fullmatch(parts[0]) and _MONTH.fullmatch(parts[1]))


def moved_parts(parts: tuple[str, ...] | list[str], exp_id: str) -> tuple[str, ...] | None:
    """Where a file at ``parts`` (its path below ``experiments/``, as names; its file
    name holds ``exp_id``) goes in the fan-out layout: None when it is not in the plain
    month layout (already fanned out, or in a folder of someone's own)."""
    *folders, name = parts
    if not is_month_folder(folders):
        return None
    return (*folders, fanout(exp_id), name)


def where_kexp_puts(parts: tuple[str, ...] | list[str], exp_id: str) -> bool:
    """Whether a file at ``parts`` (its path below ``experiments/``, as names; its file
    name holds ``exp_id``) lies where kexp puts a file: its id's fan-out folder of a
    month (``<YYYY>/<MM>/<xx>/``), or a month folder of the plain month layout."""
    *folders, _ = parts
    if len(folders) == 3 and folders[-1] == fanout(exp_id):
        folders = folders[:2]
    return is_month_folder(folders)


def misplaced_parts(parts: tuple[str, ...] | list[str], exp_id: str) -> tuple[str, ...] | None:
    """Where a file at ``parts`` (its path's names, the last its file name, which holds
    ``exp_id``) belongs when it lies in another id's fan-out folder
    (``<YYYY>/<MM>/<xx>/``, ``xx`` not the last hex digits of ``exp_id``: where a merge's
    directory-rename detection can move a file): the same path with its id's folder;
    None when it is in its own (or not in a fan-out folder at all)."""
    if len(parts) < 4:
        return None
    *above, folder, name = parts
    if not (_FANOUT.fullmatch(folder) and is_month_folder(above[-2:])):
        return None
    right = fanout(exp_id)
    return None if folder == right else (*above, right, name)


def layout_twins(path: str) -> tuple[str, ...]:
    """``path`` (``/``-separated, ending in an experiment file's name, under any prefix)
    and the path of the same file in the other layout, when it is in one: its fan-out
    folder for a month-layout path, its month folder for a fan-out one (where
    :mod:`kexp.migration` moves it from or to)."""
    *folders, name = path.split("/")
    exp_id = name[:16]
    if len(folders) >= 2 and is_month_folder(folders[-2:]):
        return path, "/".join([*folders, fanout(exp_id), name])
    if len(folders) >= 3 and folders[-1] == fanout(exp_id) and is_month_folder(folders[-3:-1]):
        return path, "/".join([*folders[:-1], name])
    return (path,)
