"""``kexp report``: a static HTML site of a store, opened from disk (no server, no network).

The Python twin of ``kexp report [-o DIR] [filters]`` is :func:`build_report` (and
``kexp.report(...)`` on the default store). The site holds:

* ``index.html``: counts by outcome, the operators, the frontier (the best experiment
  of every operator × dtype × env) and the cells never improved;
* ``op/<operator>.html``: one page per operator, with its own data: score over
  iterations, lineage, speedup per configuration, lessons, a table of its experiments;
* ``e/<xx>/<id>.html``: one page per experiment, its file rendered readably, linked to
  its parent and children;
* ``assets/``: one stylesheet and one small script (sorting and filtering tables).

Charts are SVG drawn by :mod:`kexp.htmlreport.svg`; every text is escaped
(:mod:`kexp.htmlreport.markup`) and every page forbids inline script.

The site is built in a new folder next to the output folder and put in place with a
rename when it is complete, so the output never holds half a report. An output folder
that is not empty must be a report kexp wrote (it holds :data:`MARKER`): kexp never
deletes anything else.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import json
import os
import secrets
import shutil
from importlib import resources
from pathlib import Path
from typing import TYPE_CHECKING, Any

from kexp.errors import KexpError
from kexp.htmlreport.markup import text
from kexp.htmlreport.pages import (
    OPERATOR_DIR,
    Site,
    experiment_page,
    experiment_path,
    operator_page,
    overview_page,
)
from kexp.lessons import LESSON_GROUPS, key_insight
from kexp.progress import reporting, track_part

if TYPE_CHECKING:
    from kexp.store import Store

__all__ = ["MARKER", "ReportResult", "build_report", "default_output"]

#: The file that marks a folder as a report written by kexp (so it may be replaced).
MARKER = ".kexp-report.json"
_ASSETS = ("report.css", "report.js")


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
    """Write the report of the experiments of ``store`` matching ``filters``.

    ``output`` is the folder to write (default :func:`default_output`); it is replaced
    as a whole when the report is complete. ``now`` is the time the pages say they were
    generated (default: now). Raises :class:`~kexp.errors.KexpError` when ``output``
    is a file, or a folder that holds other files than a report of kexp.
    """
    from kexp import __version__

    target = Path(output) if output is not None else default_output(store)
    _check_output(target)
    experiments = store.list_experiments(brief=True, **filters)
    stamp = (now or dt.datetime.now(dt.timezone.utc)).strftime("%Y-%m-%d %H:%M UTC")
    site = Site(
        experiments=experiments,
        store_root=store.root,
        footer=f"kexp {text(__version__)} · generated {text(stamp)}",
        filters={k: v for k, v in filters.items() if v is not None},
    )
    target.parent.mkdir(parents=True, exist_ok=True)
    staging = target.parent / f".{target.name}.kexp-new-{secrets.token_hex(4)}"
    staging.mkdir()
    try:
        written = _write_site(store, site, staging)
        (staging / MARKER).write_text(
            json.dumps({"kexp": __version__, "experiments": len(experiments)}) + "\n",
            encoding="utf-8",
        )
        _replace(staging, target)
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise
    return ReportResult(
        output=target.resolve(),
        experiments=len(experiments),
        operators=len(site.operators),
        pages=written.pages,
        total_bytes=written.total,
        overview_bytes=written.overview,
        largest_operator_bytes=written.largest_operator,
    )


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


def _write_site(store: Store, site: Site, folder: Path) -> _Written:
    written = _Written()
    assets = folder / "assets"
    assets.mkdir()
    package = resources.files("kexp.htmlreport") / "assets"
    for name in _ASSETS:
        written.add(assets / name, (package / name).read_text(encoding="utf-8"))
    for exp_id, insight, size in _experiment_pages(store, site, folder):
        if insight:
            site.insights[exp_id] = insight
        written.pages += 1
        written.total += size
    (folder / OPERATOR_DIR).mkdir()
    for operator, slug in site.slugs.items():
        size = written.add(folder / OPERATOR_DIR / f"{slug}.html", operator_page(site, operator))
        written.largest_operator = max(written.largest_operator, size)
    written.overview = written.add(folder / "index.html", overview_page(site))
    return written


def _experiment_pages(store: Store, site: Site, folder: Path) -> list[tuple[str, str, int]]:
    """Write every experiment's page; (id, key insight of a lesson or "", bytes) of each.

    Reading, rendering and writing the pages is most of a report's work: a large store's
    is split between this process and a forked child (:func:`kexp.index.in_two_processes`,
    which does the child's half here if the child fails; ``KEXP_NO_FORK`` turns it off).
    The pages are the same either way.
    """
    from kexp.index import in_two_processes

    experiments = site.experiments
    total = len(experiments)
    for shard in {experiment_path(exp.id).rsplit("/", 1)[0] for exp in experiments}:
        (folder / shard).mkdir(parents=True, exist_ok=True)
    parent = os.getpid()

    def pages(part: list[int]) -> list[tuple[str, str, int]]:
        chosen = [experiments[number] for number in part]
        records = []
        for exp in store.with_bodies(track_part(chosen, len(chosen), total)):
            insight = key_insight(exp.detailed_description) if exp.outcome in LESSON_GROUPS else ""
            data = experiment_page(site, exp).encode("utf-8", "replace")
            (folder / experiment_path(exp.id)).write_bytes(data)
            records.append((exp.id, insight, len(data)))
        return records

    def work(part: list[int]) -> list[tuple[str, str, int]]:
        if os.getpid() != parent:  # the child: only the parent shows progress
            with reporting(None):
                return pages(part)
        return pages(part)

    return in_two_processes(work, list(range(total)), total)


def _check_output(target: Path) -> None:
    if target.is_symlink() or (target.exists() and not target.is_dir()):
        raise KexpError(f"{target} is not a folder: give a folder for the report (-o DIR)")
    if target.is_dir() and any(target.iterdir()) and not (target / MARKER).is_file():
        raise KexpError(
            f"{target} is not empty and holds no report of kexp: give an empty or new "
            "folder (kexp replaces only a folder it wrote)"
        )


def _replace(staging: Path, target: Path) -> None:
    """Put the finished report in place of ``target`` (checked again: it may have
    changed while the report was written)."""
    _check_output(target)
    old: Path | None = None
    if target.exists():
        old = target.parent / f".{target.name}.kexp-old-{secrets.token_hex(4)}"
        os.rename(target, old)
    try:
        os.rename(staging, target)
    except OSError:
        if old is not None:
            os.rename(old, target)
        raise
    if old is not None:
        shutil.rmtree(old, ignore_errors=True)
