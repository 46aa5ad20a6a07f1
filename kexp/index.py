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

import gc
import marshal
import os
import secrets
import stat
import time
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any, NamedTuple

from kexp.model import FRONT_MATTER_FIELDS, KernelExperiment, experiment_from_fields
from kexp.problems import sort_problems
from kexp.validate import EXPERIMENT_NAME as _NAME
from kexp.validate import read_and_check

if TYPE_CHECKING:
    from kexp.settings import Settings

INDEX_FILE = "index-v1"
#: Files modified this recently (ns) before the cache is written are not cached.
RACY_NS = 2_000_000_000

#: One file's cache entry: (mtime_ns, size, inode, ctime_ns, values or None, error or "")
#: where values are the front-matter fields in :data:`ROW_FIELDS` order.
Entry = tuple[int, int, int, int, "tuple[Any, ...] | None", str]

#: The fields of a :class:`Row`, in order.
ROW_FIELDS = (*FRONT_MATTER_FIELDS, "extra_fields", "path", "interference")
_DEFAULTS: dict[str, Any] = {"tags": (), "author": "", "combines": (), "results": ()}


class Row(NamedTuple):
    """The front-matter of one valid experiment, as the cache holds it.

    It has the attributes filtering and ranking read (``score``, ``operator_sig``,
    ...), so queries run on rows and build experiments only for what they return.
    ``path`` is relative to ``experiments/``; lists are tuples.
    """

    id: str
    pid: str
    change_summary: str
    score: float
    status: str
    is_buggy: bool
    operator_sig: str
    dtype_sig: str
    env: str
    base_commit: str
    created_at: str
    tags: tuple[str, ...]
    author: str
    combines: tuple[str, ...]
    results: tuple[dict[str, Any], ...]
    extra_fields: dict[str, Any] | None
    path: str
    interference: bool

    def to_experiment(self, experiments_dir: Path) -> KernelExperiment:
        """The experiment with this front-matter (body fields empty: not read)."""
        fields: dict[str, Any] = {}
        for name, value in zip(FRONT_MATTER_FIELDS, self, strict=False):
            fields[name] = (
                [dict(v) if isinstance(v, dict) else v for v in value]
                if isinstance(value, tuple)
                else value
            )
        fields.update(self.extra_fields or {})
        exp = experiment_from_fields(fields, experiments_dir / self.path)
        exp.interference = self.interference
        return exp


def _values(fields: dict[str, Any]) -> tuple[Any, ...]:
    """A valid file's front-matter as a compact tuple in :data:`ROW_FIELDS` order."""
    values = []
    for name in FRONT_MATTER_FIELDS:
        value = fields.get(name)
        if value is None and name in _DEFAULTS:
            value = _DEFAULTS[name]
        values.append(tuple(value) if isinstance(value, list) else value)
    extra = {k: v for k, v in fields.items() if k not in _KNOWN}
    values.append(extra or None)
    return tuple(values)


_KNOWN = frozenset(FRONT_MATTER_FIELDS)


def _header(settings: Settings) -> str:
    from kexp import __version__

    layout = ",".join(ROW_FIELDS)
    return (
        f"kexp-index/2 kexp={__version__} max_file_bytes={settings.max_file_bytes} fields={layout}"
    )


def _visible_entries(folder: str) -> list[os.DirEntry[str]]:
    """The entries of ``folder`` except hidden ones (writers' temporary files)."""
    try:
        with os.scandir(folder) as iterator:
            return [entry for entry in iterator if entry.name[0] != "."]
    except (FileNotFoundError, NotADirectoryError, PermissionError):
        return []


def walk_experiment_files(folder: str) -> Iterator[tuple[str, str, os.stat_result]]:
    """(path, name, ``lstat``) of every file below ``folder`` that may be an experiment.

    Hidden entries are skipped and symbolic links to folders are not followed; a
    symbolic link to a file is listed (reading it reports it). Names are not checked
    here (the caller checks the ones it does not know), and the order is the file
    system's.
    """
    for entry in _visible_entries(folder):
        if entry.is_dir(follow_symlinks=False):
            yield from walk_experiment_files(entry.path)
        elif entry.name.endswith(".md"):
            try:
                yield entry.path, entry.name, entry.stat(follow_symlinks=False)
            except FileNotFoundError:
                continue


def walk_experiment_names(folder: str, prefix: str = "") -> Iterator[tuple[str, str]]:
    """(folder, name) of every ``<id>-<slug>.md`` file below ``folder`` whose name starts
    with ``prefix``; no file is stat'ed (finding an id needs names only)."""
    for entry in _visible_entries(folder):
        name = entry.name
        if name.startswith(prefix) and _NAME.fullmatch(name) is not None:
            if not entry.is_dir(follow_symlinks=False):
                yield folder, name
        elif entry.is_dir(follow_symlinks=False):
            yield from walk_experiment_names(entry.path, prefix)


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
            # loads() of the whole file is several times faster than load() from a file.
            data = marshal.loads(self.file.read_bytes())
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

    def refresh(self) -> tuple[list[Row], list[tuple[str, str]]]:
        """The rows of every valid experiment file, and (path, first error) of the others.

        Files whose stat matches the cache are not read; the others are read and
        checked, and the cache is rewritten when anything changed. Paths are relative
        to ``experiments/``.
        """
        # Loading and walking create a few objects per file and free none: the cyclic
        # garbage collector would scan them all again and again (a third of the time).
        collecting = gc.isenabled()
        gc.disable()
        try:
            cached = self.load()
            try:
                return self._refresh(cached)
            except (TypeError, IndexError, ValueError):
                # A cache of another shape (a bug, or tampering): read every file instead.
                return self._refresh({})
        finally:
            if collecting:
                gc.enable()

    def _refresh(self, cached: dict[str, Entry]) -> tuple[list[Row], list[tuple[str, str]]]:
        known = len(cached)
        seen: list[tuple[str, Entry]] = []
        changed = False
        rows: list[Row] = []
        invalid: list[tuple[str, str]] = []
        make = Row._make
        root = str(self.experiments_dir) + os.sep
        skip = len(root)
        for full, name, info in walk_experiment_files(str(self.experiments_dir)):
            relative = full[skip:]
            signature = (info.st_mtime_ns, info.st_size, info.st_ino, info.st_ctime_ns)
            # pop: each cached entry is dropped once used, so the cache and the rows built
            # from it are not both held in memory.
            entry = cached.pop(relative, None)
            if entry is None or entry[:4] != signature or not stat.S_ISREG(info.st_mode):
                if _NAME.fullmatch(name) is None:
                    continue  # not an experiment file (a README, notes)
                entry = (*signature, *self._check(Path(full)))
                changed = True
            seen.append((relative, entry))
            if entry[4] is not None:
                rows.append(make((*entry[4], relative, False)))
            else:
                invalid.append((relative, entry[5]))
        if changed or len(seen) != known:
            self.save(_shared(dict(seen)))
        del cached, seen
        combining = [i for i, row in enumerate(rows) if row.combines]
        if combining:
            scores = {row.id: row.score for row in rows}
            for i in combining:
                row = rows[i]
                if _below_best(row.score, row.combines, scores):
                    rows[i] = row._replace(interference=True)
        return rows, invalid

    def _check(self, path: Path) -> tuple[tuple[Any, ...] | None, str]:
        checked = read_and_check(path, self.settings)
        if checked.ok:
            assert checked.document is not None
            return _values(checked.document.fields), ""
        first = next(p for p in sort_problems(checked.problems) if p.severity == "error")
        return None, first.format()


def _below_best(score: float, combines: tuple[str, ...], scores: dict[str, float]) -> bool:
    """Interference: an experiment scoring below the best of those it combines."""
    combined = [scores[i] for i in combines if i in scores]
    return bool(combined) and score < max(combined)


def _shared(entries: dict[str, Entry]) -> dict[str, Entry]:
    """``entries`` with equal strings made one object, so marshal writes them once."""
    pool: dict[str, str] = {}

    def share(value: Any) -> Any:
        return pool.setdefault(value, value) if isinstance(value, str) else value

    shared: dict[str, Entry] = {}
    for path, (mtime, size, inode, ctime, values, error) in entries.items():
        if values is not None:
            values = tuple(
                tuple(share(v) for v in value) if isinstance(value, tuple) else share(value)
                for value in values
            )
        shared[path] = (mtime, size, inode, ctime, values, error)
    return shared
