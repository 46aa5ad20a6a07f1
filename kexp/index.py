"""The store's cache: every experiment file's front-matter, keyed by the file's stat.

Queries rank and filter on front-matter alone, so kexp keeps it for every file in
``.kexp/index-v1`` (git-ignored) and reads a file again only when its stat signature
(modification time in nanoseconds, size, inode, change time) differs from the cached
one. The cache is never trusted beyond that:

* A file modified within :data:`RACY_NS` of the moment the cache is written is not
  cached at all (git calls such entries "racily clean"): an edit in place that keeps
  the size and lands in the same timestamp tick cannot hide behind the cache.
* Files missing from the folder walk are dropped; new names (a rename, a checkout of
  another branch, another process's create) are read.
* The cache file starts with a header naming kexp's version and the settings that
  decide validity; any mismatch, a truncated or corrupt file, or one left half-written
  by a crashed process (it is replaced atomically, so there is none) means the cache
  is rebuilt silently.

It is a ``marshal`` file: fast to load and unable to run code when read (unlike
pickle), since the cache folder is only git-ignored, not trusted.
"""

from __future__ import annotations

import marshal
import os
import secrets
import stat
import time
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

from kexp.problems import sort_problems
from kexp.validate import id_from_name, read_and_check

if TYPE_CHECKING:
    from kexp.settings import Settings

INDEX_FILE = "index-v1"
#: Files modified this recently (ns) before the cache is written are not cached.
RACY_NS = 2_000_000_000

#: One file's cache entry: (mtime_ns, size, inode, ctime_ns, fields or None, error or "").
Entry = tuple[int, int, int, int, "dict[str, Any] | None", str]


def _header(settings: Settings) -> str:
    from kexp import __version__

    return f"kexp-index/1 kexp={__version__} max_file_bytes={settings.max_file_bytes}"


def walk_experiment_files(folder: Path) -> Iterator[tuple[str, os.stat_result]]:
    """Every ``<id>-<slug>.md`` file below ``folder`` with its ``lstat``, sorted by path.

    Hidden entries (writers' temporary files) are skipped and symbolic links to folders
    are not followed; a symbolic link to a file is listed (reading it reports it).
    """
    try:
        entries = sorted(os.scandir(folder), key=lambda e: e.name)
    except (FileNotFoundError, NotADirectoryError, PermissionError):
        return
    for entry in entries:
        if entry.name.startswith("."):
            continue
        if entry.is_dir(follow_symlinks=False):
            yield from walk_experiment_files(Path(entry.path))
        elif id_from_name(entry.name) is not None:
            try:
                yield entry.path, entry.stat(follow_symlinks=False)
            except FileNotFoundError:
                continue


class StoreIndex:
    """The cache of one store (see the module documentation)."""

    def __init__(self, experiments_dir: Path, cache_dir: Path, settings: Settings) -> None:
        self.experiments_dir = experiments_dir
        self.file = cache_dir / INDEX_FILE
        self.settings = settings
        self.header = _header(settings)

    def load(self) -> dict[str, Entry]:
        """The cached entries by relative path ({} when absent, stale or unreadable)."""
        try:
            with self.file.open("rb") as handle:
                data = marshal.load(handle)
        except (OSError, EOFError, ValueError, TypeError):
            return {}
        if (
            not isinstance(data, tuple)
            or len(data) != 2
            or data[0] != self.header
            or not isinstance(data[1], dict)
        ):
            return {}
        entries: dict[str, Entry] = data[1]
        return entries

    def save(self, entries: dict[str, Entry]) -> None:
        """Write ``entries`` atomically, leaving out racily clean ones. Errors are ignored:
        the cache is an optimisation, never a reason to fail."""
        horizon = time.time_ns() - RACY_NS
        stable = {path: entry for path, entry in entries.items() if entry[0] < horizon}
        temporary = self.file.with_name(f".{self.file.name}.{secrets.token_hex(6)}.tmp")
        try:
            self.file.parent.mkdir(parents=True, exist_ok=True)
            with temporary.open("wb") as handle:
                marshal.dump((self.header, stable), handle)
            os.replace(temporary, self.file)
        except OSError:
            temporary.unlink(missing_ok=True)

    def refresh(self) -> list[tuple[Path, dict[str, Any] | None, str]]:
        """(path, front-matter fields or None, first error) for every experiment file.

        Files whose stat matches the cache are not read; the others are read and
        checked, and the cache is rewritten when anything changed.
        """
        cached = self.load()
        fresh: dict[str, Entry] = {}
        changed = False
        result: list[tuple[Path, dict[str, Any] | None, str]] = []
        root = str(self.experiments_dir) + os.sep
        for full, info in walk_experiment_files(self.experiments_dir):
            relative = full[len(root) :] if full.startswith(root) else full
            signature = (info.st_mtime_ns, info.st_size, info.st_ino, info.st_ctime_ns)
            entry = cached.get(relative)
            if entry is None or entry[:4] != signature or not stat.S_ISREG(info.st_mode):
                entry = (*signature, *self._check(Path(full)))
                changed = True
            fresh[relative] = entry
            result.append((Path(full), entry[4], entry[5]))
        if changed or len(fresh) != len(cached):
            self.save(fresh)
        return result

    def _check(self, path: Path) -> tuple[dict[str, Any] | None, str]:
        checked = read_and_check(path, self.settings)
        if checked.ok:
            assert checked.document is not None
            return dict(checked.document.fields), ""
        first = next(p for p in sort_problems(checked.problems) if p.severity == "error")
        return None, first.format()
