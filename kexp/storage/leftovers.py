"""The caches no process uses any more, found beside the one in use and removed."""

from __future__ import annotations

import contextlib
import time
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from kexp.core.settings import Settings


def remove_unused_caches(in_use: Path, settings: Settings) -> None:
    """Remove the caches beside ``in_use`` (a cache file) that no process uses any
    more: those of kexp before this layout (``index-*``, ``retrieval-*``, ``blobs-*``)
    and of other kexp builds, once not written for ``settings.unused_cache_days`` and
    with no journal beside them."""
    folder = in_use.parent
    with contextlib.suppress(OSError):
        (folder / "index-v1").unlink()  # the cache of kexp before SQLite
    now = time.time()
    unused = now - settings.unused_cache_days * 86400
    killed = now - settings.stale_temporary_s
    for pattern, horizon in (
        ("cache-*.sqlite", unused),
        ("index-*.sqlite", unused),
        ("retrieval-*.sqlite", unused),
        ("blobs-*.sqlite", unused),
        # Temporary and side databases of the layout before this one's builders.
        (".index-*.sqlite.*.tmp", killed),
        (".index-*.sqlite.*.side", killed),
    ):
        with contextlib.suppress(OSError):
            for left in folder.glob(pattern):
                if left.name == in_use.name or any(
                    left.with_name(left.name + s).exists() for s in ("-journal", "-wal")
                ):
                    continue
                with contextlib.suppress(OSError):
                    if left.lstat().st_mtime < horizon:
                        left.unlink()
