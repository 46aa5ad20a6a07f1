"""The validation of a store's files: every file read and checked in one scan (a large
store's by two processes, :func:`kexp.storage.scan.scan`), the store-wide checks over all
of them (ids used twice, dangling links, lineage cycles, base commits the code
repository lacks), and each problem at its position: what
:meth:`kexp.storage.reader.StoreReader.validate` returns.

Of each file only its problems and its links (:class:`~kexp.format.filelinks.FileLinks`)
are kept; a file with a store-wide problem is read again for its position
(:func:`kexp.storage.scan.value_positions`).
"""

from __future__ import annotations

import dataclasses
import os
import shlex
from collections.abc import Collection
from pathlib import Path
from typing import TYPE_CHECKING

from kexp.core.errors import GitError
from kexp.core.problems import Problem, display_path, sort_problems
from kexp.format.filelinks import FileLinks, ScanRecord, scan_bytes, scan_record
from kexp.format.reading import real_paths, stray_problem
from kexp.format.rules import id_from_name
from kexp.format.storechecks import store_findings
from kexp.format.validate import CheckedFile, check_bytes
from kexp.storage.layout import folder_parts, is_month_folder, misplaced_parts, where_kexp_puts
from kexp.storage.scan import scan, value_positions

if TYPE_CHECKING:
    from kexp.core.settings import Settings
    from kexp.storage.sources import FileSource
    from kexp.storage.view import StoreView


def validate_store(
    store: StoreView, paths: list[Path] | None = None, *, strict: bool = False
) -> tuple[list[Problem], int]:
    """Every problem in the given files of ``store`` (all by default), plus the
    store-wide checks, and how many experiment files the store holds (all of them are
    read): what :meth:`kexp.storage.reader.StoreReader.validate_counted` returns."""
    from kexp.gitops.provenance import unresolved_base_commits

    # lazy: not every command that imports this module needs kexp.storage.dropped
    from kexp.storage.dropped import dropped_in_history

    files = store.source.files()
    links, file_problems = _validation_scan(store.source, store.settings, files)
    # The Markdown files kexp never reads (few): each is a problem of its own.
    strays = {os.path.realpath(p): (p, d) for p, d in store.source.stray_files(store.settings)}
    misplaced = [found for path in files if (found := misplaced_problem(path)) is not None]
    misplaced += outside_layout_problems(store, files, {p.path for p in misplaced})
    in_store = len(files)
    dropped = dropped_in_history(store, files)
    del files
    if paths is None:
        items = links
        extra: list[CheckedFile] = []
    else:
        wanted = {os.path.realpath(p) for p in paths}
        real = real_paths([link.path for link in links])
        selected = [number for number, path in enumerate(real) if path in wanted]
        items = [links[number] for number in selected]
        file_problems = {n: file_problems[n] for n in selected if n in file_problems}
        known = set(real)
        asked = [p for p in paths if os.path.realpath(p) not in known]
        extra = [store.check_file(p) for p in asked if os.path.realpath(p) not in strays]
    problems: list[Problem] = [p for found in file_problems.values() for p in found]
    shown = strays if paths is None else {os.path.realpath(p) for p in paths}
    problems += [stray_problem(*found) for real, found in strays.items() if real in shown]
    if paths is not None:
        misplaced = [p for p in misplaced if os.path.realpath(p.path) in shown]
    problems += misplaced
    if paths is not None:
        dropped = [p for p in dropped if os.path.realpath(p.path) in shown]
    problems += dropped
    for item in extra:
        problems += item.problems
        fields = item.document.fields if item.document is not None else None
        items.append(FileLinks.of(str(item.path), fields))
    gone = store.source.removed()  # read across refs: what a newer place removed
    if paths is None:
        findings = store_findings(items, gone=gone)
    else:
        index: dict[str, list[str]] = {}
        pids: dict[str, str | None] = {}
        for link in links:
            # A file whose id cannot be read is its name's id (its error is its own).
            exp_id = link.id if link.id is not None else id_from_name(link.path)
            if exp_id is not None:
                index.setdefault(exp_id, []).append(link.path)
                pids.setdefault(exp_id, link.pid)  # the first file's, as listed
        findings = store_findings(items, index, pids.__getitem__, gone)
    del links
    bases: dict[str, list[int]] = {}
    for number, link in enumerate(items):
        if link.base_commit is not None:
            bases.setdefault(link.base_commit, []).append(number)
    unresolved = unresolved_base_commits(bases, store.code_repo, strict=strict)
    where: dict[int, set[tuple[str | int, ...]]] = {}
    for finding in findings:
        where.setdefault(finding.file, set()).add(finding.where)
    for value in unresolved:
        for number in bases[value]:
            where.setdefault(number, set()).add(("base_commit",))
    positions = value_positions(
        store.source, store.settings, items, where, len(items) - len(extra), extra
    )
    problems += [f.problem(items[f.file].path, *positions[f.file, f.where]) for f in findings]
    for value, (severity, code, message, hint) in unresolved.items():
        for number in bases[value]:
            line, column = positions[number, ("base_commit",)]
            path = items[number].path
            problems.append(
                Problem(path, line, column, severity, code, "base_commit", message, hint)
            )
    for path, place, data in store.source.shadowed_invalid(store.settings):
        if paths is None or os.path.realpath(path) in shown:  # read across refs
            elsewhere = f" (its version on {place}; the version read is valid)"
            problems += [
                dataclasses.replace(problem, message=problem.message + elsewhere)
                for problem in check_bytes(data, Path(path), store.settings).problems
            ]
    if findings:  # one experiment moved by a commit and put back beside the move
        # lazy: only a store with problems across files needs kexp.storage.movedtwins
        from kexp.storage.movedtwins import moved_back

        problems = moved_back(problems, store.root, store.commit or "HEAD")
    return sort_problems(problems), in_store


def misplaced_problem(path: str) -> Problem | None:
    """The ``misplaced-file`` warning of an experiment file at ``path`` that lies in
    another id's fan-out folder (:func:`kexp.storage.layout.misplaced_parts`: a merge's
    directory-rename detection moved it), naming the move that puts it back; None for a
    file where its id puts it (or outside the fan-out layout)."""
    slash = path.rfind(os.sep)
    if path[slash - 2 : slash] == path[slash + 15 : slash + 17]:
        return None  # in its id's folder (the folder's name ends as the id): most files
    parts = path.replace(os.sep, "/").rsplit("/", 4)[1:]
    exp_id = id_from_name(parts[-1]) if parts else None
    right = misplaced_parts(parts, exp_id) if exp_id is not None else None
    if exp_id is None or right is None:
        return None
    folder = os.path.join(os.path.dirname(os.path.dirname(path)), right[-2])
    # mkdir: git removed the emptied folder; mv, not git mv: the file may be untracked.
    quoted = [shlex.quote(display_path(p)) for p in (folder, path, os.path.join(folder, right[-1]))]
    return Problem(
        path,
        1,
        1,
        "warning",
        "misplaced-file",
        "",
        f"the file is in folder {parts[-2]}/, another id's: its id {exp_id} puts it in "
        f"{right[-2]}/ (experiments/YYYY/MM/<the id's last two hex digits>/); a merge's "
        "directory-rename detection moves files so",
        f"move it back (mkdir -p {quoted[0]} && mv {quoted[1]} {quoted[2]}) and commit the move",
    )


def outside_layout_problems(
    store: StoreView, files: list[str], skipped: Collection[str] = ()
) -> list[Problem]:
    """The ``moved-file`` warning of each experiment file of ``files`` (store paths) that
    lies outside the folders kexp puts files in (its id's fan-out folder of its creation
    month, or a month folder of the older layout that ``kexp migrate-layout`` moves):
    moved there by hand, and merged. The move back is said as ``kexp validate --changed``
    says it (:func:`kexp.format.storechecks.moved_problem`), to the folder its
    ``created_at`` and id choose; ``skipped``: the files warned of already."""
    base = os.path.join(str(store.experiments_dir), "")
    found: list[Problem] = []
    for path in files:
        slash = path.rfind(os.sep)
        if (
            path[slash - 2 : slash] == path[slash + 15 : slash + 17]  # its id's folder
            and slash == len(base) + 10  # experiments/YYYY/MM/xx/
            and path[slash - 3] == path[slash - 6] == os.sep
        ) or path in skipped:
            continue  # most files: where kexp put them
        if not path.startswith(base):
            continue
        parts = path[len(base) :].split(os.sep)
        exp_id = id_from_name(parts[-1])
        if exp_id is None or where_kexp_puts(parts, exp_id):
            continue
        problem = _outside_problem(store, path, exp_id)
        if problem is not None:
            found.append(problem)
    return found


def _outside_problem(store: StoreView, path: str, exp_id: str) -> Problem | None:
    """The ``moved-file`` warning of the experiment file ``path`` (id ``exp_id``) lying
    outside kexp's layout, or None when its ``created_at`` cannot be read (its own
    problem says so)."""
    # lazy: only a file outside the layout needs kexp.format.storechecks' wording and git
    from kexp.format.storechecks import moved_problem

    document = store.check_file(path).document
    created = document.fields.get("created_at") if document is not None else None
    if not isinstance(created, str):
        return None
    year, month, folder = folder_parts(exp_id, created, created)
    if not is_month_folder((year, month)):
        return None
    right = os.path.join(str(store.experiments_dir), year, month, folder, os.path.basename(path))
    try:
        # lazy: only a file outside the layout needs kexp.storage.snapshot (git)
        from kexp.storage.snapshot import StoreLocation

        location = StoreLocation.of(store.root)
        old, new = location.repo_path(Path(right)), location.repo_path(Path(path))
    except GitError:
        old = new = None
    if old is None or new is None:  # not in git: the paths as the command prints them
        old, new = display_path(right), display_path(path)
    problem = moved_problem(path, old, new)
    return dataclasses.replace(
        problem,
        message=(
            f"the file lies outside the folders kexp puts files in; its id and created_at "
            f"put it in {old}: an experiment's path is chosen once and stays, or a branch "
            "adding a file to the folder it left gets CONFLICT (file location) when it "
            "merges (git's directory-rename detection)"
        ),
    )


def _validation_scan(
    source: FileSource, settings: Settings, files: list[str]
) -> tuple[list[FileLinks], dict[int, list[Problem]]]:
    """Read and check every file of ``files``: the links of each, and the problems
    of those that have some (by their number in ``files``).

    A large store is checked by this process and a forked child, half each
    (:func:`kexp.storage.scan.scan`)."""
    records = scan(source, files, settings, _validation_record)
    links: list[FileLinks] = []
    problems: dict[int, list[Problem]] = {}
    records.reverse()  # taken from the end: each freed as it goes
    for number, path in enumerate(files):
        exp_id, pid, combines, base, lines, found, env, on_reference = records.pop()
        links.append(FileLinks(path, exp_id, pid, combines, base, lines, env, on_reference))
        if found:
            problems[number] = [Problem(*p) for p in found]
    return links, problems


def _validation_record(
    path: str, data: bytes | Problem, settings: Settings, shared: dict[str, str]
) -> ScanRecord:
    """What :func:`validate_store` keeps of one file: its problems and links, checked by
    :func:`~kexp.format.filelinks.scan_bytes` (a canonical file without the full parse)."""
    if isinstance(data, Problem):
        return scan_record([data], FileLinks.of(path, None), shared)
    found, link = scan_bytes(data, path, settings)
    return scan_record(found, link, shared)
