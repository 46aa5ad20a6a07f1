"""``kexp report``: a static HTML site of a store, opened from disk (no server, no network).

The Python twin of ``kexp report [-o DIR] [filters]`` is :func:`build_report` (and
``kexp.report(...)`` on the default store). The site holds:

* ``index.html``: counts by outcome, the operators, the frontier (the best experiment
  of every operator × dtype × env) and the cells never improved;
* ``op/<operator>.html``: one page per operator, with its own data: score over
  iterations, lineage, speedup per configuration, lessons, a table of its experiments;
* ``e/<xxx>.html#<id>``: one section per experiment, its file rendered readably,
  linked to its parent and children (the experiments whose ids end in the same three
  hex digits share a file: at most 4,096 files, since files cost more than bytes to
  write and to delete; a link to one shows that one only);
* ``assets/``: one stylesheet and one small script (sorting and filtering tables).

Charts are SVG drawn by :mod:`kexp.output.html.svg`; every text is escaped
(:mod:`kexp.output.html.markup`) and every page forbids inline script.

The site is built in a new folder next to the output folder and put in place with a
rename when it is complete, so the output never holds half a report. An output folder
that is not empty must be a report kexp wrote, and hold nothing else: :data:`MARKER`
lists the files it wrote, each of a report page's shape. A file added to it (``CNAME``,
notes) is never deleted: the report is refused, naming it; a marker put in a user's
folder does not make it replaceable (the user's files are not a report's). Reports into
one folder take turns (a lock on the folder above it), and each removes the hidden
folders a killed report left there (``.NAME.kexp-new-*``, ``.NAME.kexp-old-*``).

Writing the experiment pages is most of the work. A report written over an earlier one
reuses (hard-links) each earlier experiment page whose key is unchanged: a hash of the
report's own code and, for each experiment on it, its file's stat signature (as the
cache keys files: modification and change times in nanoseconds, size, inode; a file
changed within :data:`RACY_NS` of the build has no key, git's "racily clean" rule) and
everything else its section shows, its listed front-matter included
(:func:`~kexp.output.html.experiment.experiment_page_context`). Keys are kept in
:data:`PAGES`; a page with an experiment that has no key is written again. The pages are
the same either way (a test holds them equal).
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import hashlib
import json
import os
import re
import secrets
import shutil
import time
from collections.abc import Callable
from importlib import resources
from pathlib import Path
from typing import TYPE_CHECKING, Any

from kexp.agents.lessons import LESSON_GROUPS, taught
from kexp.core.collector import collector_paused
from kexp.core.errors import KexpError
from kexp.core.model import KernelExperiment
from kexp.core.progress import reporting, track_part
from kexp.core.version import __version__
from kexp.format.fileformat import error_line, key_insight
from kexp.output.html.experiment import experiment_page, experiment_page_context
from kexp.output.html.markup import text
from kexp.output.html.pages import (
    EXPERIMENT_DIR,
    OPERATOR_DIR,
    PAGE_DIGITS,
    Site,
    experiment_path,
    operator_pages,
    overview_page,
    scope_text,
)
from kexp.storage import atomic
from kexp.storage.locking import folder_lock

if TYPE_CHECKING:
    from kexp.storage.store import Store

__all__ = ["MARKER", "ReportResult", "build_report", "default_output"]

#: The file that marks a folder as a report written by kexp (so it may be replaced).
MARKER = ".kexp-report.json"
#: The key (and key insight) of every experiment page, for the next report to reuse.
PAGES = ".kexp-report-pages.json"
_ASSETS = ("report.css", "report.js")
#: A file changed this recently (ns) when a report is made gets no key (see above).
RACY_NS = 2_000_000_000
#: The code that decides what a page holds (with the assets and kexp's version).
_LAYOUT_SOURCES = ("__init__.py", "experiment.py", "markup.py", "pages.py", "svg.py")
#: The shape of every file a report writes (relative paths, with '/').
_REPORT_FILE = re.compile(
    rf"index\.html|{re.escape(MARKER)}|{re.escape(PAGES)}|assets/report\.(?:css|js)|"
    rf"{EXPERIMENT_DIR}/[0-9a-f]{{{PAGE_DIGITS}}}\.html|"
    rf"{OPERATOR_DIR}/[a-z0-9-]+-[0-9a-f]{{8}}(?:--(?:experiments|lessons)-[0-9]+)?\.html|"
    rf"(?:assets|{EXPERIMENT_DIR}|{OPERATOR_DIR})/"  # empty (a report of no experiment)
)
#: How long a report waits for another one writing into the same folder (seconds).
WAIT_S = 1800.0
_SHOWN = 5


@dataclasses.dataclass(frozen=True)
class ReportResult:
    """What :func:`build_report` wrote."""

    output: Path
    experiments: int
    operators: int
    pages: int
    total_bytes: int
    overview_bytes: int
    largest_operator_bytes: int

    @property
    def index(self) -> Path:
        """The overview page: open it in a browser."""
        return self.output / "index.html"

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready data (stable keys)."""
        data = dataclasses.asdict(self)
        data["output"] = str(self.output)
        data["index"] = str(self.index)
        return data


def default_output(store: Store) -> Path:
    """Where the report goes when no folder is given: ``.kexp/report`` of the store."""
    return store.cache_dir / "report"


def build_report(
    store: Store,
    output: Path | str | None = None,
    *,
    now: dt.datetime | None = None,
    **filters: Any,
) -> ReportResult:
    """Write the report of the experiments of ``store`` matching ``filters``; its pages
    say what it read (the working tree, a revision, the refs read with it) and mark an
    experiment the working tree does not hold with where it was found.

    ``output`` is the folder to write (default :func:`default_output`); it is replaced
    as a whole when the report is complete. ``now`` is the time the pages say they were
    generated (default: now). Raises :class:`~kexp.core.errors.KexpError` when ``output``
    is a file, or a folder that holds other files than a report of kexp.
    """
    target = Path(output) if output is not None else default_output(store)
    with atomic.writing_output(target):
        _check_output(target)
    experiments = store.list_experiments(brief=True, **filters)
    stamp = (now or dt.datetime.now(dt.timezone.utc)).strftime("%Y-%m-%d %H:%M UTC")
    places = store.source.places
    scope = scope_text(
        store.revision, store.commit, places, getattr(store.source, "checked_out", None)
    )
    site = Site(
        experiments=experiments,
        store_root=store.root,
        footer=f"kexp {text(__version__)} · generated {text(stamp)} from {text(scope)}",
        page_footer=f"kexp {text(__version__)} · {text(scope)}",
        filters={k: v for k, v in filters.items() if v is not None},
        id_length=store.shown_id_length(exp.id for exp in experiments),
        scope=scope,
        reads_refs=places is not None,
    )
    # Pages make many objects and keep few, none in a cycle: the collector's passes
    # over the listed experiments would cost 13 % of the report's CPU at 100,000.
    with atomic.writing_output(target, made_folder=True), collector_paused():
        written = _write_report(store, site, target, len(experiments))
    return ReportResult(
        output=target.resolve(),
        experiments=len(experiments),
        operators=len(site.operators),
        pages=written.pages,
        total_bytes=written.total,
        overview_bytes=written.overview,
        largest_operator_bytes=written.largest_operator,
    )


def _write_report(store: Store, site: Site, target: Path, experiments: int) -> _Written:
    """Build the site in a new folder beside ``target`` and put it in place."""
    target.parent.mkdir(parents=True, exist_ok=True)
    with folder_lock(target.parent, WAIT_S):
        _check_output(target)
        _remove_leftovers(target)
        staging = target.parent / f".{target.name}.kexp-new-{secrets.token_hex(4)}"
        staging.mkdir()
        try:
            written = _write_site(store, site, staging, _Earlier.of(target, store))
            marker = {
                "kexp": __version__,
                "experiments": experiments,
                "files": sorted([*_files(staging), MARKER]),
            }
            (staging / MARKER).write_text(json.dumps(marker) + "\n", encoding="utf-8")
            _check_output(target)  # again: it may have changed while it was written
            atomic.replace_folder(staging, target)
        except BaseException:
            shutil.rmtree(staging, ignore_errors=True)
            raise
    return written


@dataclasses.dataclass
class _Written:
    pages: int = 0
    total: int = 0
    overview: int = 0
    largest_operator: int = 0

    def add(self, path: Path, content: str) -> int:
        data = content.encode("utf-8", "replace")
        path.write_bytes(data)
        self.pages += path.suffix == ".html"
        self.total += len(data)
        return len(data)


@dataclasses.dataclass
class _Earlier:
    """The report being replaced: its folder and the keys of its experiment pages."""

    folder: Path | None = None
    pages: dict[str, str] = dataclasses.field(default_factory=dict)
    insights: dict[str, str] = dataclasses.field(default_factory=dict)
    layout: str = ""

    @classmethod
    def of(cls, target: Path, store: Store) -> _Earlier:
        """The earlier report in ``target`` whose pages may be reused (none when the
        store is read from git objects: its files are not the experiment's)."""
        layout = _layout_digest()
        if store.commit is not None or not (target / MARKER).is_file():
            return cls(layout=layout)
        try:
            data = json.loads((target / PAGES).read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return cls(layout=layout)
        if not isinstance(data, dict) or data.get("layout") != layout:
            return cls(layout=layout)
        pages, insights = data.get("pages"), data.get("insights")
        if not (isinstance(pages, dict) and isinstance(insights, dict)):
            return cls(layout=layout)
        return cls(target, pages, insights, layout)


def _layout_digest() -> str:
    """A hash of what decides a page besides its data: this code, the assets, kexp."""
    digest = hashlib.sha256(__version__.encode())
    package = resources.files("kexp.output.html")
    for name in _LAYOUT_SOURCES:
        digest.update((package / name).read_bytes())
    for name in _ASSETS:
        digest.update((package / "assets" / name).read_bytes())
    return digest.hexdigest()


def _write_site(store: Store, site: Site, folder: Path, earlier: _Earlier) -> _Written:
    written = _Written()
    assets = folder / "assets"
    assets.mkdir()
    package = resources.files("kexp.output.html") / "assets"
    for name in _ASSETS:
        written.add(assets / name, (package / name).read_text(encoding="utf-8"))
    keys = _experiment_keys(store, site)
    pages: dict[str, str] = {}
    insights: dict[str, str] = {}
    for name, key, size, found in _experiment_pages(store, site, folder, earlier, keys):
        for exp_id, insight in found:
            if insight:
                insights[exp_id] = site.insights[exp_id] = insight
        if key:
            pages[name] = key
        written.pages += 1
        written.total += size
    (folder / OPERATOR_DIR).mkdir()
    for name, key, size in _operator_pages(site, folder, earlier, keys):
        if key:
            pages[name] = key
        written.pages += 1
        written.total += size
        written.largest_operator = max(written.largest_operator, size)
    (folder / PAGES).write_text(
        json.dumps(
            {"layout": earlier.layout, "pages": pages, "insights": insights},
            separators=(",", ":"),
        ),
        encoding="utf-8",
    )
    written.overview = written.add(folder / "index.html", overview_page(site))
    return written


#: The key of each experiment that has one, by its file and id (one id may be held by two
#: files: a copy in a second folder, whose pages must not stand for each other).
_Keys = dict[tuple[Path, str], bytes]


def _experiment_keys(store: Store, site: Site) -> _Keys:
    """The key of every experiment that has one (see the module's docstring)."""
    if store.commit is not None:
        return {}  # read from git objects: the files on disk are not the experiments'
    racy_after = time.time_ns() - RACY_NS
    keys: _Keys = {}
    for exp in site.experiments:
        if exp.path is None:
            continue
        try:
            info = os.stat(exp.path, follow_symlinks=False)
        except OSError:
            continue
        if max(info.st_mtime_ns, info.st_ctime_ns) >= racy_after:
            continue  # it may change again within the same timestamp: no key
        signature = (info.st_mtime_ns, info.st_size, info.st_ino, info.st_ctime_ns)
        digest = hashlib.sha256(repr(signature).encode())
        digest.update(experiment_page_context(site, exp).encode("utf-8", "surrogatepass"))
        keys[exp.path, exp.id] = digest.digest()
    return keys


def _page_key(layout: str, label: str, members: list[KernelExperiment], keys: _Keys) -> str:
    """A page's key: its code, its name, and the keys of its experiments ("" if one has
    none)."""
    digest = hashlib.sha256(layout.encode())
    digest.update(label.encode("utf-8", "surrogatepass"))
    for exp in members:
        key = keys.get((exp.path, exp.id)) if exp.path is not None else None
        if key is None:
            return ""
        digest.update(key)
    return digest.hexdigest()


def _link_earlier(earlier: _Earlier, name: str, key: str, folder: Path) -> int | None:
    """Hard-link the earlier report's page ``name`` into ``folder`` if its key is ``key``;
    its size, or None."""
    if earlier.folder is None or not key or earlier.pages.get(name) != key:
        return None
    try:
        os.link(earlier.folder / name, folder / name)
        return os.stat(folder / name).st_size
    except OSError:
        return None


def _operator_pages(
    site: Site, folder: Path, earlier: _Earlier, keys: _Keys
) -> list[tuple[str, str, int]]:
    """Write (or reuse) every operator's pages (its page, and the further pages of its
    lessons and experiments), split between two processes as the experiment pages;
    (path, key, bytes) of each. An operator's pages are reused all together or written
    again all together."""
    # lazy: not every command that imports this module needs kexp.storage.parallel
    from kexp.storage.parallel import in_two_processes

    def work(operators: list[str]) -> list[tuple[str, str, int]]:
        records = []
        for operator in operators:
            key = _page_key(earlier.layout, operator, site.operators[operator], keys)
            slug = site.slugs[operator]
            names = sorted(
                name
                for name in earlier.pages
                if name == f"{OPERATOR_DIR}/{slug}.html"
                or name.startswith(f"{OPERATOR_DIR}/{slug}--")
            )
            sizes = [_link_earlier(earlier, name, key, folder) for name in names]
            if not names or None in sizes:  # written again, all of its pages
                for name in names:
                    (folder / name).unlink(missing_ok=True)
                made = [
                    (name, html.encode("utf-8", "replace"))
                    for name, html in operator_pages(site, operator)
                ]
                for name, data in made:
                    (folder / name).write_bytes(data)
                names, sizes = [name for name, _ in made], [len(data) for _, data in made]
            records += [(name, key, size or 0) for name, size in zip(names, sizes, strict=True)]
        return records

    operators = list(site.operators)
    weights = [len(site.operators[operator]) for operator in operators]
    return in_two_processes(work, operators, len(site.experiments), weights)


#: What :func:`_experiment_pages` gives per page: its path, its key ("": none), its
#: bytes, and (id, key insight or "") of each experiment on it.
_PageRecord = tuple[str, str, int, list[tuple[str, str]]]


def _experiment_pages(
    store: Store, site: Site, folder: Path, earlier: _Earlier, keys: _Keys
) -> list[_PageRecord]:
    """Write (or reuse) every experiment page.

    Reading, rendering and writing the pages is most of a report's work: a large store's
    is split between this process and a forked child
    (:func:`kexp.storage.parallel.in_two_processes`,
    which does the child's half here if the child fails; ``KEXP_NO_FORK`` turns it off).
    The pages are the same either way.
    """
    # lazy: not every command that imports this module needs kexp.storage.parallel
    from kexp.storage.parallel import in_two_processes

    grouped: dict[str, list[KernelExperiment]] = {}
    for exp in site.experiments:
        grouped.setdefault(experiment_path(exp.id), []).append(exp)
    names = sorted(grouped)
    (folder / EXPERIMENT_DIR).mkdir()
    total = len(site.experiments)
    parent = os.getpid()

    def lessons(
        members: list[KernelExperiment], insight: Callable[[KernelExperiment], str]
    ) -> list[tuple[str, str]]:
        return [(e.id, insight(e) if e.outcome in LESSON_GROUPS else "") for e in members]

    def pages(part: list[str]) -> list[_PageRecord]:
        records: list[_PageRecord] = []
        mine = sum(len(grouped[name]) for name in part)
        ticks = track_part(range(mine), mine, total)  # progress: experiments, not pages
        for name in part:
            members = grouped[name]
            key = _page_key(earlier.layout, name, members, keys)
            size = _link_earlier(earlier, name, key, folder)
            if size is not None:
                found = lessons(members, lambda e: earlier.insights.get(e.id, ""))
            else:
                whole = list(store.with_bodies(members))
                found = lessons(
                    whole,
                    lambda e: taught(
                        key_insight(e.detailed_description), error_line(e.error_message)
                    ),
                )
                data = experiment_page(site, whole).encode("utf-8", "replace")
                (folder / name).write_bytes(data)
                size = len(data)
            records.append((name, key, size, found))
            for _ in members:
                next(ticks, None)
        for _ in ticks:
            pass
        return records

    def work(part: list[str]) -> list[_PageRecord]:
        if os.getpid() != parent:  # the child: only the parent shows progress
            with reporting(None):
                return pages(part)
        return pages(part)

    return in_two_processes(work, names, total, [len(grouped[n]) for n in names])


def _check_output(target: Path) -> None:
    """Refuse an output that is not a folder kexp may replace: empty, or a report of
    kexp holding only the files it wrote."""
    if target.is_symlink() or (target.exists() and not target.is_dir()):
        raise KexpError(f"{target} is not a folder: give a folder for the report (-o DIR)")
    if not target.is_dir() or not any(target.iterdir()):
        return
    if not (target / MARKER).is_file():
        raise KexpError(
            f"{target} is not empty and holds no report of kexp: give an empty or new "
            "folder (kexp replaces only a folder it wrote)"
        )
    others = _not_written(target)
    if others:
        shown = ", ".join(others[:_SHOWN]) + (
            f" and {len(others) - _SHOWN} more" if len(others) > _SHOWN else ""
        )
        raise KexpError(
            f"{target} holds {len(others)} file(s) kexp did not write ({shown}): a report "
            "replaces its folder as a whole, so kexp leaves it as it is; move them out of "
            "it, or give another folder (-o DIR)"
        )


def _files(folder: Path) -> list[str]:
    """Every entry below ``folder`` but its folders (relative, with '/'), sorted; an
    empty folder is named with a trailing '/' (links are not followed)."""
    found: list[str] = []
    for parent, dirs, names in os.walk(folder):
        relative = os.path.relpath(parent, folder).replace(os.sep, "/")
        prefix = "" if relative == "." else relative + "/"
        found += [prefix + d for d in dirs if os.path.islink(os.path.join(parent, d))]
        found += [prefix + name for name in names]
        if not dirs and not names and prefix:
            found.append(prefix)
    return sorted(found)


def _not_written(target: Path) -> list[str]:
    """The entries of the report folder ``target`` that kexp did not write: any not
    listed by its marker, or not of a report file's shape (a link, a user's file)."""
    try:
        listed = json.loads((target / MARKER).read_text(encoding="utf-8")).get("files")
    except (OSError, ValueError, AttributeError):
        listed = None
    written = set(listed) if isinstance(listed, list) else None

    def kexps(name: str) -> bool:
        return (
            _REPORT_FILE.fullmatch(name) is not None
            and (written is None or name in written)
            and not os.path.islink(target / name)
        )

    return [name for name in _files(target) if not kexps(name)]


def _remove_leftovers(target: Path) -> None:
    """Remove the hidden folders a killed report into ``target`` left beside it (the
    caller holds the lock that keeps other reports into it out)."""
    leftover = re.compile(rf"\.{re.escape(target.name)}\.kexp-(?:new|old)-[0-9a-f]{{8}}")
    with os.scandir(target.parent) as entries:
        for entry in entries:
            if leftover.fullmatch(entry.name) and entry.is_dir(follow_symlinks=False):
                shutil.rmtree(entry.path, ignore_errors=True)
