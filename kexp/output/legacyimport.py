"""Import of the predecessor's database into a store (see :mod:`kexp.output.legacy` for the
decisions)."""

from __future__ import annotations

import dataclasses
import itertools
import re
import warnings
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from kexp.core import ids
from kexp.core.errors import InvalidExperimentWarning, KexpError
from kexp.core.model import LEGACY_FIELDS, KernelExperiment
from kexp.core.problems import Problem, has_errors, sort_problems
from kexp.core.progress import track
from kexp.format.fileformat import serialize
from kexp.format.legacykeys import (
    EXTRA_FIELD,
    KEY_FIELD,
    LEGACY_PREFIX,
    MISSING_FIELD,
)
from kexp.format.rules import id_from_name
from kexp.format.validate import check_bytes, read_and_check
from kexp.format.yamlio import MAX_DEPTH
from kexp.output.legacy import (
    IMPORTED_AGAINST,
    NO_COMMIT,
    Note,
    Progress,
    assign_ids,
    differences,
    experiment_from_legacy,
    found_sidecar,
    legacy_record,
    made_by_kexp,
    read_legacy_database,
    read_sidecar,
    reporting_to,
    restore_kept,
    sidecar_path,
)
from kexp.storage import atomic

if TYPE_CHECKING:
    from kexp.core.settings import Settings
    from kexp.storage.store import Store

_SURROGATE = re.compile("[\ud800-\udfff]")
_MISSING = object()

#: How many files an import writes (and syncs) at once: first, and at most.
FIRST_BATCH, LARGEST_BATCH = 100, 5000


@dataclasses.dataclass
class ImportReport:
    """What an import did: counts for the summary, and every note with its record id."""

    source: str
    total: int = 0
    dry_run: bool = False
    #: Record keys written (or, in a dry run, that would be written), in write order.
    imported: list[str] = dataclasses.field(default_factory=list)
    #: Record keys already in the store, identical: not written again.
    skipped: list[str] = dataclasses.field(default_factory=list)
    #: Records whose id is taken by a different experiment: not written.
    conflicts: list[Note] = dataclasses.field(default_factory=list)
    #: Records that could not be imported at all: not written.
    failed: list[Note] = dataclasses.field(default_factory=list)
    #: Values kept in ``legacy_*`` keys, or worth checking (imported records).
    notes: list[Note] = dataclasses.field(default_factory=list)
    #: Record key -> the file written for it.
    paths: dict[str, Path] = dataclasses.field(default_factory=dict)
    #: Said when records kexp made are imported without the sidecar ("" otherwise).
    sidecar_note: str = ""
    #: Experiments of the store whose ``legacy_pid`` names, as an id, an experiment that
    #: is there now (imported after them): their ``pid`` set (in a dry run: would be).
    relinked: list[Note] = dataclasses.field(default_factory=list)

    @property
    def needing_attention(self) -> list[str]:
        """Keys of records with a conflict, a failure or a note (sorted, unique)."""
        return sorted({n.record for n in (*self.conflicts, *self.failed, *self.notes)})

    @property
    def ok(self) -> bool:
        """Whether every record is now in the store (no conflict, no failure)."""
        return not self.conflicts and not self.failed

    def summary(self) -> str:
        """One line: imported, skipped, needing attention."""
        verb = "would import" if self.dry_run else "imported"
        text = (
            f"{verb} {len(self.imported)}, skipped {len(self.skipped)} (already in the "
            f"store), {len(self.needing_attention)} needing attention"
        )
        details = []
        if self.conflicts:
            details.append(f"{len(self.conflicts)} conflicting")
        if self.failed:
            details.append(f"{len(self.failed)} not imported")
        text += (f" ({', '.join(details)})" if details else "") + f" of {self.total}"
        if self.relinked:
            linked = "would re-link" if self.dry_run else "re-linked"
            text += (
                f"; {linked} {len(self.relinked)} experiment(s) of the store to the parent "
                "their legacy_pid names, imported now"
            )
        return text

    def lines(self) -> list[str]:
        """Every note (conflicts, failures, then kept values), then the summary line."""
        out = [f"conflict: {n.format()}" for n in self.conflicts]
        out += [f"not imported: {n.format()}" for n in self.failed]
        out += [f"kept: {n.format()}" for n in self.notes]
        out += [f"no sidecar: {self.sidecar_note}"] if self.sidecar_note else []
        out += [f"re-linked: {n.format()}" for n in self.relinked]
        out.append(self.summary())
        return out


@dataclasses.dataclass
class _Plan:
    key: str
    record: Mapping[str, Any]
    exp: KernelExperiment
    notes: list[Note]


def _resolve_parent(
    raw: Any, id_of: Mapping[str, str], by_record_id: Mapping[str, str], present: set[str]
) -> str:
    if not isinstance(raw, str) or raw == "":
        return ""
    if raw in id_of:
        return id_of[raw]
    if raw in by_record_id:
        return by_record_id[raw]
    return raw if ids.is_valid_id(raw) and raw in present else ""


def _break_cycles(plans: dict[str, _Plan]) -> None:
    """Cut every pid loop among the imported records at its smallest key."""
    key_of = {plan.exp.id: key for key, plan in plans.items()}
    for start in sorted(plans):
        path: list[str] = []
        current: str | None = start
        while current is not None and current not in path:
            path.append(current)
            parent = plans[current].exp.pid
            current = key_of.get(parent) if parent else None
        if current is None:
            continue
        loop = path[path.index(current) :]
        cut = plans[min(loop)]
        raw = cut.record.get("pid", _MISSING)
        if raw is not _MISSING:
            cut.exp.extra_fields = _with_legacy(cut.exp.extra_fields, "pid", raw)
        cut.exp.pid = ""
        cut.notes.append(
            Note(
                cut.key,
                "pid",
                f"parents loop ({' -> '.join([*loop, loop[0]])}): pid cleared, the original "
                f"kept in {LEGACY_PREFIX}pid",
            )
        )


def _with_legacy(extra: dict[str, Any], field: str, value: Any) -> dict[str, Any]:
    """``extra`` with ``legacy_<field>`` set, keeping the canonical key order."""
    wanted = {**extra, LEGACY_PREFIX + field: value}
    order = [KEY_FIELD, *(LEGACY_PREFIX + f for f in LEGACY_FIELDS), MISSING_FIELD, EXTRA_FIELD]
    return {name: wanted[name] for name in order if name in wanted}


def _write_order(plans: dict[str, _Plan]) -> list[_Plan]:
    """Parents before children; otherwise by creation time, then key."""
    key_of = {plan.exp.id: key for key, plan in plans.items()}
    depth: dict[str, int] = {}

    def depth_of(key: str) -> int:
        chain = []
        current: str | None = key
        while current is not None and current not in depth and current not in chain:
            chain.append(current)
            parent = plans[current].exp.pid
            current = key_of.get(parent) if parent else None
        base = depth.get(current, -1) if current is not None else -1
        for item in reversed(chain):
            base += 1
            depth[item] = base
        return depth[key]

    return sorted(plans.values(), key=lambda p: (depth_of(p.key), p.exp.created_at, p.key))


class _CommitChecker:
    """Reports ``base_commit`` values that do not resolve in the code repository."""

    def __init__(self, store: Store, enabled: bool) -> None:
        self.repo: Any = None
        if enabled:
            from kexp.gitops import git as kgit

            self.repo = kgit.find_repo(store.code_repo)
        self.cache: dict[str, str | None] = {}

    def problem(self, commit: str) -> str | None:
        if self.repo is None or commit == NO_COMMIT:
            return None
        if commit not in self.cache:
            from kexp.gitops import git as kgit

            try:
                kgit.resolve_commit(self.repo, commit)
                self.cache[commit] = None
            except KexpError:
                self.cache[commit] = (
                    f"it does not resolve in the code repository {self.repo.working_dir} "
                    "('git fetch' it there, or correct it)"
                )
        return self.cache[commit]


def import_legacy(
    source: Path | str | Mapping[str, Any],
    store: Store | None = None,
    *,
    dry_run: bool = False,
    check_commits: bool = True,
    progress: Progress | None = None,
    kexp_content: Mapping[str, Mapping[str, Any]] | None = None,
) -> ImportReport:
    """Import the predecessor's database (a file, or its decoded JSON) into ``store``.

    What kexp keeps that the records cannot hold comes from ``kexp_content`` (record
    key -> what :func:`read_sidecar` gives), by default from the sidecar beside the
    file (:func:`sidecar_path`), when there is one.

    Every record becomes one experiment file, every value kept (see the module's
    documentation for values kept in ``legacy_*`` keys). Records already in the store
    and identical are skipped; records whose id is taken by a different experiment are
    reported as conflicts and not written. ``dry_run`` writes nothing and reports what
    would happen. ``check_commits`` reports ``base_commit`` values that do not resolve
    in the code repository. Progress goes to ``progress`` (called with (done, total)
    per record) or else to the reporter of :func:`kexp.core.progress.reporting`, if any.
    """
    if store is None:
        from kexp.storage.location import find_root
        from kexp.storage.store import Store

        store = Store(find_root())
    if isinstance(source, Mapping):
        database: Mapping[str, Any] = source
        label = "<database>"
    else:
        limit = store.settings.max_import_bytes
        database = read_legacy_database(source, limit)
        label = str(source)
        sidecar = found_sidecar(source) if kexp_content is None else None
        if sidecar is not None:
            kexp_content = read_sidecar(sidecar, limit)
    kept = kexp_content or {}
    report = ImportReport(label, total=len(database), dry_run=dry_run)
    if not isinstance(source, Mapping) and kexp_content is None:
        made = sum(1 for r in database.values() if isinstance(r, Mapping) and made_by_kexp(r))
        if made:
            report.sidecar_note = (
                f"{made} record(s) were made by kexp, and there is no sidecar beside the "
                f"database ({sidecar_path(source).name}): the tags, authors, results and "
                "other content kexp kept there are not restored; put the sidecar written "
                "with the export beside the database and import again"
            )
    existing: dict[str, Path] = {}
    for path in store.paths():
        found = id_from_name(path)
        if found is not None:
            existing.setdefault(found, path)
    id_of = assign_ids(database)
    by_record_id = {
        record["id"]: id_of[key]
        for key, record in database.items()
        if isinstance(record, Mapping)
        and isinstance(record.get("id"), str)
        and record["id"] not in id_of
    }
    planned_ids = set(id_of.values()) | set(existing)
    plans: dict[str, _Plan] = {}
    for key, record in database.items():
        if not isinstance(record, Mapping):
            report.failed.append(
                Note(key, "", f"the record is {type(record).__name__}, not an object: not imported")
            )
            continue
        parent = _resolve_parent(record.get("pid"), id_of, by_record_id, planned_ids)
        exp, notes = experiment_from_legacy(
            key,
            record,
            exp_id=id_of[key],
            pid=parent,
            summary_limit=store.settings.max_summary_chars,
        )
        if key in kept:
            restore_kept(exp, kept[key])
        plans[key] = _Plan(key, record, exp, notes)
    _break_cycles(plans)

    commits = _CommitChecker(store, check_commits and bool(plans))
    present = set(existing)
    tracked = _tracked(_write_order(plans), progress)
    # A batch at a time: its files rendered and checked (in two processes when there are
    # many), then staged in order (a record whose parent failed loses its pid), then
    # written with one sync. Batches grow: the first files are in place soon, and a
    # large import costs a few syncs.
    size = FIRST_BATCH
    while batch := list(itertools.islice(tracked, size)):
        size = min(2 * size, LARGEST_BATCH)
        ahead = _render_ahead(store, [plan for plan in batch if plan.exp.id not in existing])
        staged: list[tuple[_Plan, Path, str]] = []
        for plan in batch:
            written = _stage(store, plan, existing, present, commits, report, ahead.get(plan.key))
            if written is not None:
                path, text = written
                present.add(plan.exp.id)
                if report.dry_run:
                    _imported(report, plan, path)
                else:
                    staged.append((plan, path, text))
        if staged:
            _write_batch(staged, report)
    if report.imported:
        _relink(store, present, report)
    return report


def _relink(store: Store, present: set[str], report: ImportReport) -> None:
    """Give their parent back to experiments imported before it (another machine's
    database imported first): a ``legacy_pid`` that is an id of an experiment in the
    store now becomes the ``pid`` (as the import would have written it, the
    ``legacy_pid`` line dropped; each file replaced atomically, its other lines as they
    were). ``present``: the ids in the store, or that a dry run would write."""
    with warnings.catch_warnings():
        # Invalid files are no import's business: kexp validate reports them.
        warnings.simplefilter("ignore", InvalidExperimentWarning)
        known = store.list_experiments(brief=True)
    parent_of = {exp.id: exp.pid for exp in known}
    for exp in known:
        named = exp.extra_fields.get(LEGACY_PREFIX + "pid")
        if exp.pid or not isinstance(named, str) or not ids.is_valid_id(named):
            continue
        if named not in present or _descends_from(named, exp.id, parent_of):
            continue  # not there (yet), or a loop the import cut
        key = exp.extra_fields.get(KEY_FIELD)
        record = key if isinstance(key, str) else exp.id
        changes: dict[str, Any] = {"pid": named}
        if not exp.measured_against:
            changes["measured_against"] = IMPORTED_AGAINST
        if not report.dry_run:
            try:
                store.update_experiment(exp.id, **changes)
            except (KexpError, OSError) as exc:
                report.notes.append(Note(record, "pid", f"not re-linked to {named}: {exc}"))
                continue
        parent_of[exp.id] = named
        report.relinked.append(
            Note(
                record,
                "pid",
                "its legacy_pid names an experiment in the store now: pid set to it, "
                "legacy_pid dropped",
            )
        )


def _descends_from(start: str, ancestor: str, parent_of: Mapping[str, str]) -> bool:
    """Whether ``ancestor`` is ``start`` or on its ``pid`` chain (a loop guard)."""
    seen: set[str] = set()
    current = start
    while current and current not in seen:
        if current == ancestor:
            return True
        seen.add(current)
        current = parent_of.get(current, "")
    return False


def _write_batch(batch: list[tuple[_Plan, Path, str]], report: ImportReport) -> None:
    """Write new files for ``batch`` (parents before children): every file written to
    a temporary name and synced at once, then each linked into place in order, a child
    only when its parent's file is in place."""
    from kexp.storage.store import link_new_file, prepare_new_files

    temporaries = prepare_new_files([(path, text) for _, path, text in batch])
    not_written: dict[str, str] = {}
    for (plan, path, _), temporary in zip(batch, temporaries, strict=True):
        if plan.exp.pid in not_written:
            temporary.unlink(missing_ok=True)
            error = f"its parent's file was not written ({not_written[plan.exp.pid]})"
        else:
            try:
                link_new_file(temporary, path)
            except (KexpError, OSError) as exc:
                error = str(exc)
            else:
                _imported(report, plan, path)
                continue
        not_written[plan.exp.id] = error
        report.failed.append(Note(plan.key, "", f"not written: {error}"))
    atomic.sync_folders([path for _, path, _ in batch])  # the new names durable


def _tracked(items: list[_Plan], progress: Progress | None) -> Iterator[_Plan]:
    with reporting_to(progress):
        yield from track(items)


def _imported(report: ImportReport, plan: _Plan, path: Path) -> None:
    report.imported.append(plan.key)
    report.paths[plan.key] = path
    report.notes.extend(plan.notes)


def _stage(
    store: Store,
    plan: _Plan,
    existing: Mapping[str, Path],
    present: set[str],
    commits: _CommitChecker,
    report: ImportReport,
    ahead: tuple[str, str, str] | None = None,
) -> tuple[Path, str] | None:
    """The file to write for one record (checked), or None: skipped, conflict, failed.
    ``ahead`` is its :func:`_render`, made beforehand on the record as planned."""
    exp, key = plan.exp, plan.key
    if exp.id in existing:
        _compare_existing(store, plan, existing[exp.id], report)
        return None
    cleared = bool(exp.pid and exp.pid not in present)
    if cleared:
        # The parent was not written (a failure): keep the store valid.
        raw = plan.record.get("pid", _MISSING)
        if raw is not _MISSING:
            exp.extra_fields = _with_legacy(exp.extra_fields, "pid", raw)
        plan.notes.append(
            Note(key, "pid", f"parent {exp.pid} was not imported: pid cleared, kept in legacy_pid")
        )
        exp.pid = ""
    problem = commits.problem(exp.base_commit)
    if problem is not None:
        plan.notes.append(Note(key, "base_commit", f"kept as is, but {problem}"))
    found = ahead if ahead is not None and not cleared else _render(store, plan)
    where, text, message = found
    if not where:
        report.failed.append(Note(key, text, message))
        return None
    return Path(where), text


def _render_ahead(store: Store, plans: list[_Plan]) -> dict[str, tuple[str, str, str]]:
    """:func:`_render` of each of ``plans``, by key: in two processes when there are many
    (:func:`kexp.storage.parallel.in_two_processes`)."""
    from kexp.storage.parallel import in_two_processes

    def work(part: list[_Plan]) -> list[tuple[str, str, str, str]]:
        return [(plan.key, *_render(store, plan)) for plan in part]

    # Rendering and checking a record costs what reading and checking ten files does
    # (the weight in_two_processes compares with its threshold).
    rendered = in_two_processes(work, plans, 10 * len(plans))
    return {key: (where, text, message) for key, where, text, message in rendered}


def _render(store: Store, plan: _Plan) -> tuple[str, str, str]:
    """(path, text, "") of the file of a record, checked and read back unchanged; or
    ("", field, message) when it cannot be stored as it is."""
    exp, key = plan.exp, plan.key
    broken = _lone_surrogate(key, plan.record)
    if broken is not None:
        where, char = broken
        return (
            "",
            where,
            f"holds a lone surrogate (\\u{ord(char):04x}, half of a character: a broken "
            "emoji?), which no UTF-8 file can hold; replace it in the database, then "
            "import again",
        )
    path = store.path_for(exp)
    text = serialize(exp)
    stored, first = _as_stored(text, path, store.settings)
    if stored is None:
        assert first is not None
        return "", first.field, _not_storable(first)
    back_key, back = legacy_record(stored)
    if back_key != key or differences(back, plan.record):
        fields = ", ".join(differences(back, plan.record)) or "its key"
        return (
            "",
            "",
            f"would not come back unchanged ({fields}): not imported (a bug in kexp: report it)",
        )
    return str(path), text, ""


def _as_stored(
    text: str, path: Path, settings: Settings
) -> tuple[KernelExperiment | None, Problem | None]:
    """The experiment a new file's text holds if it is valid, else its first error: the
    certain verdict of :func:`kexp.format.quickcheck.quick_fields` on canonical text (the
    cache's), the full check when it is not sure."""
    from kexp.format.fileformat import parse
    from kexp.format.quickcheck import quick_fields

    data = text.encode("utf-8")
    if quick_fields(data, str(path), settings) is not None:
        return parse(data, path, fast=True).to_experiment(), None
    checked = check_bytes(text, path, settings)
    if has_errors(checked.problems):
        return None, next(p for p in sort_problems(checked.problems) if p.severity == "error")
    return checked.experiment(), None


def _not_storable(problem: Problem) -> str:
    """Why a record's file would be invalid, and what to do (a bug only when it is
    none of the limits a file has)."""
    if problem.code == "file-too-large":
        return f"its file would be too large: {problem.message}; {problem.hint}"
    if problem.code == "yaml-too-deep":
        return (
            f"a value is nested more than {MAX_DEPTH} levels deep, which an "
            "experiment's front-matter cannot hold (a YAML safety limit); flatten it "
            "(e.g. keep it as JSON text), then import again"
        )
    return f"cannot be stored: {problem.message} (a bug in kexp: report it)"


def _lone_surrogate(key: str, record: Mapping[str, Any]) -> tuple[str, str] | None:
    """(where, the character) of the first lone surrogate in the key or the record
    (keys and values, nested ones too), or None: JSON escapes can decode to one, and no
    UTF-8 file can hold it."""
    pending: list[tuple[str, Any]] = [("", key), *((str(k), v) for k, v in record.items())]
    pending += [(str(k), k) for k in record]
    while pending:
        where, value = pending.pop()
        if isinstance(value, str):
            found = _SURROGATE.search(value)
            if found is not None:
                return where, found.group()
        elif isinstance(value, Mapping):
            pending += [(where, k) for k in value]
            pending += [(where, v) for v in value.values()]
        elif isinstance(value, list):
            pending += [(where, v) for v in value]
    return None


def _compare_existing(store: Store, plan: _Plan, path: Path, report: ImportReport) -> None:
    checked = read_and_check(path, store.settings)
    if not checked.ok:
        report.conflicts.append(
            Note(
                plan.key,
                "",
                f"id {plan.exp.id} is taken by {path}, which is not a valid "
                "experiment: fix it (kexp validate), then import again",
            )
        )
        return
    key, record = legacy_record(checked.experiment())
    differing = differences(record, plan.record)
    if key == plan.key and not differing:
        report.skipped.append(plan.key)
        return
    what = ", ".join(differing) if differing else f"the key ({key!r})"
    report.conflicts.append(
        Note(
            plan.key,
            "",
            f"id {plan.exp.id} is already {path}, which differs in {what}: "
            "not overwritten; compare them and correct one by hand",
        )
    )
