"""Validation of what a change does to the store: the twin of ``kexp validate --changed``.

* :func:`check_changes` / :func:`validate_changed` — every problem of the files changed
  since ``BASE``, plus the store-wide checks (duplicate ids, dangling ``pid``/``combines``,
  lineage cycles), without resolving every other file's ``base_commit``.
* :func:`check_and_scan` — the same check, and what a review (:mod:`kexp.review.build`) needs of
  the store at the head: the :class:`Facts` of each valid experiment.

Both read every file of the store once, one after the other, and keep of each only what
they need (:class:`~kexp.format.filelinks.FileLinks` for the store-wide checks; for a review, a
few front-matter values of each valid experiment): memory does not grow with the files'
contents. The changed files are read whole.

Like a forge's pull-request diff, both compare with the *merge base* of ``BASE`` and the
head: experiments added on ``BASE`` after the branch was made are not "removed" by it.
"""

from __future__ import annotations

import dataclasses
import operator
import os
import sys
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, NamedTuple

from kexp.core.collector import collector_paused
from kexp.core.errors import GitError, StoreNotFoundError
from kexp.core.fields import FIELD
from kexp.core.problems import Problem, sort_problems
from kexp.format.filelinks import FileLinks, key_lines, links_of, valid_fields
from kexp.format.rules import id_from_name
from kexp.format.storechecks import moved_problem, store_findings
from kexp.storage.caused import added_files, copied_by_change, removed_by_change, removed_files
from kexp.storage.layout import layout_twins, where_kexp_puts
from kexp.storage.movedtwins import moved_back
from kexp.storage.scan import Keep, scan, value_positions
from kexp.storage.scorechange import add_unexplained_scores
from kexp.storage.validation import misplaced_problem

if TYPE_CHECKING:
    from kexp.core.settings import Settings
    from kexp.storage.history import Changes
    from kexp.storage.rows import Row
    from kexp.storage.store import Store

__all__ = [
    "STORE_WIDE_CODES",
    "ChangeCheck",
    "Facts",
    "HeadScan",
    "check_and_scan",
    "check_changes",
    "facts_of",
    "head_of",
    "merge_base",
    "validate_changed",
]

#: Problem codes of the checks across the store (as opposed to one file's checks).
STORE_WIDE_CODES = frozenset({"duplicate-id", "dangling-pid", "dangling-combines", "lineage-cycle"})


@dataclasses.dataclass
class ChangeCheck:
    """The validation of what changed (see :func:`check_changes`).

    ``file_problems``: every problem of each added or corrected file (its own checks and
    its ``base_commit``); ``store_problems``: the store-wide problems of the whole store
    at the head (duplicate ids, dangling ``pid``/``combines``, lineage cycles), of which
    ``caused`` are those the change brings (absent at the merge base and at the base
    branch's tip). The other files
    of the store are not kept (``changes`` holds the changed files, read and checked).
    """

    base: str  # the base revision as given
    merge_base: str  # full hash of the commit compared with
    head: str | None  # the head revision as given (None: the working tree)
    changes: Changes
    file_problems: list[Problem]
    store_problems: list[Problem]
    caused: list[Problem]

    @property
    def changed_paths(self) -> list[Path]:
        """The added and corrected files (the files whose own checks ran)."""
        return [c.path for c in [*self.changes.added, *self.changes.modified]]

    @property
    def removed_paths(self) -> list[Path]:
        """The removed files (checked for what their removal leaves: a child's parent
        gone)."""
        return [c.path for c in self.changes.removed]

    @property
    def problems(self) -> list[Problem]:
        """What ``kexp validate --changed`` reports: the changed files' problems plus the
        store-wide problems, sorted, each once."""
        return sort_problems(dict.fromkeys([*self.file_problems, *self.store_problems]))


# --- checking what changed -------------------------------------------------------------


def merge_base(store: Store, base: str, head: str | None = None) -> str:
    """The full hash of the merge base of ``base`` and ``head`` (None: ``HEAD``).

    Falls back to ``base`` itself when the two histories share no commit. In a shallow
    clone that cannot see the merge base, raises :class:`~kexp.core.errors.GitError` saying
    how to fetch the history.
    """
    # lazy: not every command that imports this module needs kexp.gitops.git, kexp.storage.snapshot
    from kexp.gitops import git as kgit
    from kexp.storage.snapshot import StoreLocation

    repo = StoreLocation.of(store.root).repo
    base_sha = kgit.resolve_commit(repo, base)
    tip = kgit.resolve_commit(repo, head if head is not None else "HEAD")
    status, output = kgit.run_git(repo, "merge-base", base_sha, tip, ok_codes=(0, 1))
    found = output.strip()
    if status == 0 and found:
        return found
    if kgit.is_shallow(repo):
        raise GitError(
            f"{base!r} and {head or 'HEAD'!r} have no common commit in this shallow clone: "
            "fetch the history ('git fetch --unshallow'; in GitHub Actions, "
            "actions/checkout with 'fetch-depth: 0')"
        )
    return base_sha


def before_first_commit(store: Store, base: str) -> bool:
    """Whether ``base`` is ``HEAD`` in a repository without a commit yet: what is staged
    for the first commit is the whole store (``kexp validate --changed HEAD``, the
    pre-commit hook's command, then checks every file)."""
    # lazy: not every command that imports this module needs kexp.gitops.objects
    from kexp.gitops.objects import head_info
    from kexp.storage.snapshot import StoreLocation

    if base not in ("HEAD", "@"):
        return False
    try:
        return head_info(StoreLocation.of(store.root).repo) is None
    except GitError:
        return False  # outside a git repository: check_changes says so


def check_changes(store: Store, base: str, head: str | None = None) -> ChangeCheck:
    """Validate what changed from ``base`` to ``head`` (None: the working tree, or the
    revision of a store from :meth:`Store.at`).

    The added and corrected files get every check (``base_commit`` included); the whole
    store at the head gets the store-wide checks, and those problems the change causes
    (absent at the merge base and at the base branch's tip) are told apart from those it
    found. Every file is read
    once, and only what the store-wide checks need is kept of it (memory does not grow
    with the files' contents); other files' ``base_commit`` values are not resolved,
    which is what keeps this fast on a large store.

    Raises :class:`~kexp.core.errors.GitError` outside a git repository or for an unknown
    revision.
    """
    return _check(store, base, head, facts=False)[0]


def check_and_scan(
    store: Store, base: str, head: str | None = None
) -> tuple[ChangeCheck, HeadScan]:
    """:func:`check_changes`, and what a review needs of the store at the head: the
    :class:`Facts` of its valid experiments (:class:`HeadScan`)."""
    return _check(store, base, head, facts=True)


def _check(
    store: Store, base: str, head: str | None, *, facts: bool
) -> tuple[ChangeCheck, HeadScan]:
    """:func:`check_changes`, and what was kept of the store at the head: the
    :class:`Facts` of its valid experiments when ``facts``."""
    # lazy: not every command that imports this module needs kexp.gitops.provenance
    from kexp.gitops.provenance import base_commit_problems

    # lazy: not every command that imports this module needs kexp.storage.history,
    # kexp.storage.snapshot
    from kexp.storage.history import changes_listed
    from kexp.storage.snapshot import StoreLocation

    head = head_of(store, head)
    fork = merge_base(store, base, head)
    with changes_listed(store, fork, head) as listed:  # git walks the files meanwhile
        target = store if head is None else store.at(head)
        links, valid = _scan_head(store, target, facts=facts)
        changes = listed()
    location = StoreLocation.of(store.root)

    def in_repo(path: Path) -> str:  # a store path, from the repository's root
        return location.repo_path(path) or str(path)

    add_unexplained_scores(changes, base, in_repo)
    _add_folded(store, fork, changes, target, [link.path for link in links])
    _add_dropped(store, fork, changes)
    after = [c.after for c in [*changes.added, *changes.modified] if c.after is not None]
    file_problems = [p for item in after for p in item.problems] + changes.strays
    file_problems += base_commit_problems(after, target.code_repo)
    # In another id's fan-out folder: warned of as a full validate warns of it.
    file_problems += [p for item in after if (p := misplaced_problem(str(item.path))) is not None]
    file_problems += _moved_problems(store, changes, in_repo)

    head_sw = _store_problems(target, links)
    # A parent the change removed, an id it copied: said so (when the change caused it).
    removals = removed_by_change(head_sw, links, removed_files(changes, in_repo), base)
    removals = copied_by_change(removals, links, added_files(changes))
    # One experiment a commit moved and the change put back beside the move: not a copy.
    removals = moved_back(removals, store.root, head or "HEAD")
    said = dict(zip(head_sw, removals, strict=True))
    # The store at the merge base: the head's files, less what the change added or
    # corrected, plus what it removed or corrected as it was.
    changed_now = {str(item.path) for item in after}
    before = [c.before for c in [*changes.modified, *changes.removed] if c.before is not None]
    base_links = [link for link in links if link.path not in changed_now]
    base_links += [links_of(item) for item in before]
    del links
    moved = {str(c.old_path): str(c.path) for c in changes.modified if c.old_path is not None}
    base_sw: set[tuple[str, str, str, str]] = set()
    # Only the head's problems are told apart: none (a healthy store), nothing to find.
    # Those of the merge base and of the base branch's tip were there before the change.
    for stored in (base_links, _tip_links(store, base, fork, base_links)) if head_sw else ():
        for finding in store_findings(stored):
            path = stored[finding.file].path
            base_sw.add((moved.get(path, path), finding.code, finding.field, finding.message))
    del base_links
    caused = [said[p] for p in head_sw if _problem_key(p, {}) not in base_sw]
    head_sw = [said[p] if _problem_key(p, {}) not in base_sw else p for p in head_sw]
    check = ChangeCheck(
        base=base,
        merge_base=fork,
        head=head,
        changes=changes,
        file_problems=sort_problems(dict.fromkeys(file_problems)),
        store_problems=sort_problems(head_sw),
        caused=sort_problems(caused),
    )
    return check, HeadScan(target, valid)


def _moved_problems(
    store: Store, changes: Changes, in_repo: Callable[[Path], str]
) -> list[Problem]:
    """A ``moved-file`` warning for each experiment file the change moved or renamed
    from where kexp put it (:func:`kexp.format.storechecks.moved_problem`; ``in_repo``:
    a path from the repository's root); a move into the other layout (``kexp
    migrate-layout``'s) is none."""
    found = []
    for change in changes.modified:
        if change.old_path is None:
            continue
        try:
            old = change.old_path.relative_to(store.experiments_dir).parts
        except ValueError:  # pragma: no cover - git listed it under experiments/
            continue
        twins = layout_twins("/".join(old))
        new = change.path.relative_to(store.experiments_dir).as_posix()
        if where_kexp_puts(old, change.id) and new not in twins:
            found.append(
                moved_problem(str(change.path), in_repo(change.old_path), in_repo(change.path))
            )
    return found


def _add_dropped(store: Store, fork: str, changes: Changes) -> None:
    """Add to each corrected file's problems a ``correction-dropped`` warning for each
    correction note it held at the merge base ``fork`` and lacks now (a revert, a merge
    undid it: :func:`kexp.storage.dropped.dropped_between`)."""
    # lazy: not every command that imports this module needs kexp.storage.dropped,
    # kexp.storage.snapshot
    from kexp.storage.dropped import dropped_between
    from kexp.storage.snapshot import StoreLocation

    location = None
    for before, now, after, _ in changes.both_read():
        if location is None:
            location = StoreLocation.of(store.root)
        path = str(after.path)
        repo_path = location.repo_path(after.path) or path
        after.problems += dropped_between(before, now, path, fork, repo_path)


def _tip_links(store: Store, base: str, fork: str, at_fork: list[FileLinks]) -> list[FileLinks]:
    """The links of the store at ``base``'s tip, from those at the merge base ``fork``
    (``at_fork``) and the files the base branch changed since (only those are read)."""
    # lazy: not every command that imports this module needs kexp.gitops.git,
    # kexp.storage.history, kexp.storage.snapshot
    from kexp.gitops import git as kgit
    from kexp.storage.history import changes
    from kexp.storage.snapshot import StoreLocation

    tip = kgit.resolve_commit(StoreLocation.of(store.root).repo, base)
    if tip == fork:
        return []  # the merge base's, found already
    on_base = changes(store, fork, tip)
    gone = {str(item.path) for c in on_base for item in (c.before, c.after) if item is not None}
    now = [links_of(c.after) for c in on_base if c.after is not None]
    return [link for link in at_fork if link.path not in gone] + now


def _add_folded(
    store: Store, fork: str, changes: Changes, target: Store, paths: Sequence[str]
) -> None:
    """Add to ``changes.added`` the new files that share an id with another changed file
    (``paths``: every file of ``target``, the store at the head).

    :func:`kexp.storage.history.changes` matches files by the id in their name, so a second
    file with the same id (copied by hand, or made on two branches) is folded into the
    first; for a review it is a file of its own, and the duplicate it makes must show.
    """
    # lazy: not every command that imports this module needs kexp.storage.history
    from kexp.storage.history import ExperimentChange

    ids = {c.id for c in changes}
    listed = {str(c.path) for c in changes} | {str(c.old_path) for c in changes if c.old_path}
    candidates = [
        path
        for path in paths
        if os.path.basename(path)[:16] in ids  # most are not: no regular expression
        and id_from_name(path) in ids
        and path not in listed
    ]
    if not candidates:
        return
    try:
        at_base = {str(p) for p in store.at(fork).paths()}
    except StoreNotFoundError:
        at_base = set()
    for path in candidates:
        if path not in at_base:
            item = target.check_file(path)
            exp_id = id_from_name(path)
            assert exp_id is not None
            changes.added.append(ExperimentChange(exp_id, "added", item.path, None, None, item, {}))
    changes.added.sort(key=lambda c: (c.id, str(c.path)))  # id order, as changes() gives


def head_of(store: Store, head: str | None) -> str | None:
    """``head``, or the revision of a store read at one (:meth:`Store.at`)."""
    if head is None and store.commit is not None:
        return store.commit
    return head


def validate_changed(store: Store, base: str, head: str | None = None) -> list[Problem]:
    """The problems of the files changed since ``base`` plus the store-wide problems
    (the twin of ``kexp validate --changed BASE``); see :func:`check_changes`."""
    return check_changes(store, base, head).problems


def _problem_key(problem: Problem, moved: Mapping[str, str]) -> tuple[str, str, str, str]:
    path = moved.get(problem.path, problem.path)
    return (path, problem.code, problem.field, problem.message)


def _store_problems(target: Store, links: list[FileLinks]) -> list[Problem]:
    """The store-wide problems of the files ``links`` (every file of ``target``), at the
    positions the full parser gives (a file read again only when its key lines are not
    known: see :meth:`Store.validate`)."""
    findings = store_findings(links)
    where: dict[int, set[tuple[str | int, ...]]] = {}
    for finding in findings:
        where.setdefault(finding.file, set()).add(finding.where)
    positions = value_positions(target.source, target.settings, links, where, len(links))
    return [f.problem(links[f.file].path, *positions[f.file, f.where]) for f in findings]


# --- reading the store at the head, one file after the other -----------------------------


class Facts(NamedTuple):
    """What a review needs of a valid experiment it does not show whole: where it is,
    its lineage, and what its outcome and rank are derived from."""

    path: str
    id: str
    pid: str
    combines: tuple[str | None, ...]
    score: Any  # a number
    status: str
    is_buggy: bool
    operator_sig: str
    created_at: str
    change_summary: str
    dtype_sig: str
    env: str
    protocol: Any  # of which derived values read only the timer (a control's, a step's)
    score_ci: Any  # a list of two numbers, or empty
    measured_against: str
    tags: Any  # strings, of which derived values read only whether one is "control"


#: The values of :class:`Facts` read from the front-matter (after ``combines``), with
#: their defaults (:class:`KernelExperiment`'s).
FACT_FIELDS = tuple(
    (name, FIELD[name].absent())
    for name in (
        "score",
        "status",
        "is_buggy",
        "operator_sig",
        "created_at",
        "change_summary",
        "dtype_sig",
        "env",
        "protocol",
        "score_ci",
        "measured_against",
        "tags",
    )
)
#: The indexes of the :data:`FACT_FIELDS` values that repeat from file to file.
_REPEATING = tuple(
    index
    for index, (name, _) in enumerate(FACT_FIELDS)
    if name in ("operator_sig", "dtype_sig", "env")
)
#: What a review keeps of the tags: only whether the experiment is a control.
_CONTROL = ("control",)


def _slim(known: tuple[Any, ...]) -> tuple[Any, ...]:
    """:data:`FACT_FIELDS` values as a review keeps them: the protocol only its timer,
    ``measured_against`` one string per value, the tags only ``control`` (what derived
    values read of them)."""
    *head, protocol, score_ci, against, tags = known
    timer = protocol.get("timer") if isinstance(protocol, dict) else None
    shared = sys.intern(against) if isinstance(against, str) else ""
    return (
        *head,
        {"timer": sys.intern(timer)} if isinstance(timer, str) else None,
        score_ci,
        shared,
        _CONTROL if isinstance(tags, (list, tuple)) and "control" in tags else (),
    )


#: What the scan keeps of one file, as data ``marshal`` can send: its id, pid,
#: combines and key lines (see :class:`FileLinks`), and the :data:`FACT_FIELDS`
#: values of a valid experiment when asked for (else None).
_Record = tuple[
    str | None,
    str | None,
    tuple[str | None, ...],
    tuple[int, int, int] | None,
    tuple[Any, ...] | None,
]


@dataclasses.dataclass
class HeadScan:
    """The store at the head of a change, and the :class:`Facts` of its valid
    experiments in the order it lists them (when they were asked for)."""

    target: Store
    valid: list[Facts]


def facts_of(link: FileLinks, fields: Mapping[str, Any]) -> Facts:
    """The :class:`Facts` of a valid experiment: its links and front-matter ``fields``."""
    values = _slim(tuple(fields.get(name, default) for name, default in FACT_FIELDS))
    return Facts(link.path, link.id or "", link.pid or "", link.combines, *values)


def _scan_head(store: Store, target: Store, *, facts: bool) -> tuple[list[FileLinks], list[Facts]]:
    """:func:`_scan` of ``target``, the store at the head: through the working tree
    ``store``'s query cache when it holds exactly the files of ``target`` (the commit
    checked out, nothing changed under ``experiments/``), which git checks while the
    working tree is read (that read is dropped when it does not)."""
    # lazy: not every command that imports this module needs kexp.gitops.git, kexp.storage.snapshot
    from kexp.gitops import git as kgit
    from kexp.storage.snapshot import StoreLocation

    if target.commit is None:
        return _scan(target, facts=facts)
    location = StoreLocation.of(store.root)
    with kgit.matches_working_tree(location.repo, target.commit, location.folder) as same:
        if same is not None:
            try:
                found = _scan(store, facts=facts)
            except Exception:
                if same():  # the working tree held the commit's files: their error
                    raise
            else:
                if same():
                    return found
                del found  # freed before the commit's files are read
    return _scan(target, facts=facts)


def _scan(target: Store, *, facts: bool) -> tuple[list[FileLinks], list[Facts]]:
    """Read every file of ``target`` once, in the order it lists them: the
    :class:`FileLinks` of each, and (``facts``) the :class:`Facts` of the valid ones.

    Nothing else is kept of a file. A working tree is read through its query cache
    (only the files that changed since are read; invalid files are read for their
    links); else a canonical file is read without the full parse
    (:func:`kexp.format.quickcheck.quick_fields`), and a large store by this process and a
    forked child, half each, as :meth:`Store.validate` does.
    """
    cached = target.file_records()
    if cached is not None:
        return _scan_cached(target, cached, facts=facts)

    files = target.source.files()
    records = scan(target.source, files, target.settings, _keeper(facts))
    links: list[FileLinks] = []
    valid: list[Facts] = []
    records.reverse()  # taken from the end: each freed as it goes
    for path in files:
        exp_id, pid, combines, lines, known = records.pop()
        link = FileLinks(path, exp_id, pid, combines, None, lines)
        links.append(link)
        if known is not None:
            valid.append(Facts(path, exp_id or "", pid or "", combines, *known))
    return links, valid


#: The links :func:`_scan_cached` does not know of a valid file: its base commit, key
#: lines, env, and whether it is measured against the reference.
_NO_MORE = (None, None, None, False)


def _scan_cached(
    target: Store, files: Sequence[tuple[str, Row | None]], *, facts: bool
) -> tuple[list[FileLinks], list[Facts]]:
    """What :func:`_scan` keeps of each file, from the query cache's front-matter of the
    valid files (the invalid ones are read), in the order :func:`_scan` lists them."""
    # lazy: not every command that imports this module needs kexp.storage.rows
    from kexp.storage.rows import VALUE_FIELDS as ROW_FIELDS

    base = str(target.experiments_dir) + os.sep
    invalid = [base + relative for relative, values in files if values is None]
    kept = scan(target.source, invalid, target.settings, _keeper(facts), split=False)
    records = dict(zip(invalid, kept, strict=True))
    # id, pid, combines, then the facts' values: as the rows hold them (the rows are in
    # memory whatever is kept of them; only what derived values read of the tags is read).
    known = operator.itemgetter(
        *(ROW_FIELDS.index(n) for n in ("id", "pid", "combines", *(n for n, _ in FACT_FIELDS)))
    )
    make_link, make_facts = FileLinks._make, Facts._make
    links: list[FileLinks] = []
    valid: list[Facts] = []
    with collector_paused():  # a few objects a file, none in a cycle
        for relative, values in files:
            path = base + relative
            if values is None:
                exp_id, pid, combines, lines, fields = records[path]
                links.append(FileLinks(path, exp_id, pid, combines, None, lines))
                if fields is not None:
                    valid.append(Facts(path, exp_id or "", pid or "", combines, *fields))
                continue
            found = known(values)
            links.append(make_link((path, found[0], found[1] or None, found[2], *_NO_MORE)))
            if facts:
                valid.append(make_facts((path, *found)))
    return links, valid


def _keeper(facts: bool) -> Keep[_Record]:
    """What :func:`_scan` keeps of one file (:func:`kexp.storage.scan.scan`): its links, and
    (``facts``) the :data:`FACT_FIELDS` values of a valid experiment."""

    def keep(
        path: str, data: bytes | Problem, settings: Settings, shared: dict[str, str]
    ) -> _Record:
        fields: Mapping[str, Any] | None = None
        if isinstance(data, Problem):
            link = FileLinks.of(path, None)
        else:
            fields, checked = valid_fields(data, path, settings)
            if checked is None:  # certainly valid: the key lines read from the text
                link = FileLinks.of(path, fields, key_lines(data))
            else:
                link = links_of(checked)
        known: tuple[Any, ...] | None = None
        if facts and fields is not None:
            known = _slim(tuple(fields.get(name, default) for name, default in FACT_FIELDS))
            known = tuple(  # one string per operator, dtype, env (they repeat)
                shared.setdefault(value, value)
                if index in _REPEATING and isinstance(value, str)
                else value
                for index, value in enumerate(known)
            )
        return (link.id, link.pid, link.combines, link.lines, known)

    return keep
