"""Folder names as the cache's SQLite text holds them.

A name that is not UTF-8 (a folder made by a tool with another encoding) reaches
Python as lone surrogates, which SQLite's text refuses; such a name is stored as "/" and
its bytes as Latin-1 (no folder name starts with "/": it cannot hold one), every other
name as it is.
"""

from __future__ import annotations


def stored_name(folder: str) -> str:
    """``folder``'s name as the cache stores it."""
    try:
        folder.encode()
    except UnicodeEncodeError:
        return "/" + folder.encode("utf-8", "surrogatepass").decode("latin-1")
    return folder


def folder_name(stored: str) -> str:
    """The folder whose :func:`stored_name` is ``stored``."""
    if stored[:1] != "/":
        return stored
    return stored[1:].encode("latin-1").decode("utf-8", "surrogatepass")
