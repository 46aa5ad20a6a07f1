"""Pull-request review of experiment changes, and validation of only what changed.

An experiment lands like code: a pull request adds or corrects files under
``experiments/``, CI checks them, and the reviewer reads a summary instead of raw YAML.

* :func:`review` — what a branch (or the working tree) changes compared with a base
  revision, as data: the experiments added, corrected and removed (each with its score,
  Δ vs its parent, outcome and rank among the store's experiments on the same
  operator), the fields each correction changed, the validation problems of the changed
  files, the store-wide problems the change causes, the lessons it adds, and the lineage
  it touches. :func:`render_markdown` turns it into a comment fit to post on the pull
  request (every experiment text escaped: it cannot alter the comment or its Mermaid
  graph); :func:`to_json` into JSON-ready data.
* :func:`check_changes` / :func:`validate_changed` — the twin of
  ``kexp validate --changed BASE``: every problem of the files changed since ``BASE``,
  plus the store-wide checks (duplicate ids, dangling ``pid``/``combines``, lineage
  cycles), without resolving every other file's ``base_commit``.

Both read every file of the store once, one after the other, and keep of each only what
they need (:class:`~kexp.validate.FileLinks` for the store-wide checks; for a review, a
few front-matter values of each valid experiment): memory does not grow with the files'
contents. The changed files are read whole.

Like a forge's pull-request diff, both compare with the *merge base* of ``BASE`` and the
head: experiments added on ``BASE`` after the branch was made are not "removed" by it.
"""

from __future__ import annotations

import dataclasses
import difflib
import json
import operator
import os
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, NamedTuple

from kexp.lessons import LESSON_GROUPS, Lesson, group_lessons, key_insight
from kexp.lineage import is_scored
from kexp.model import BODY_FIELDS, KernelExperiment, attach
from kexp.noise import ratio_interval
from kexp.problems import Problem, has_errors, sort_problems
from kexp.query import below_best_combined
from kexp.samples import describe_interval, describe_protocol, sample_count
from kexp.scan import Keep, scan, value_positions
from kexp.validate import (
    CheckedFile,
    FileLinks,
    id_from_name,
    key_lines,
    links_of,
    store_findings,
    valid_fields,
)

if TYPE_CHECKING:
    from kexp.changelog import Changes, ExperimentChange
    from kexp.settings import Settings
    from kexp.store import Store

__all__ = [
    "STORE_WIDE_CODES",
    "ChangeCheck",
    "FieldChange",
    "LineageGraph",
    "LineageNode",
    "Review",
    "ReviewedExperiment",
    "check_changes",
    "render_markdown",
    "render_mermaid",
    "review",
    "to_json",
    "validate_changed",
]

#: Problem codes of the checks across the store (as opposed to one file's checks).
STORE_WIDE_CODES = frozenset({"duplicate-id", "dangling-pid", "dangling-combines", "lineage-cycle"})
#: The HTML comment that starts every review, so a bot can find and update its comment.
COMMENT_MARKER = "<!-- kexp-review -->"
#: A changed value longer than this (or with a line break) is shown as a diff.
LONG_VALUE_CHARS = 80
#: Lines of a field's diff shown before the rest is summarised.
MAX_DIFF_LINES = 24
#: Longest line of a field's diff (longer ones are cut, ending in "…").
LONG_DIFF_LINE_CHARS = 300
#: Ancestors and children of each touched experiment drawn in the lineage graph.
MAX_RELATIVES = 6
#: Nodes in the lineage graph at most (the rest are counted, not drawn).
MAX_GRAPH_NODES = 60

_KINDS = ("added", "corrected", "removed")


# --- data ------------------------------------------------------------------------------


@dataclasses.dataclass
class FieldChange:
    """One field a correction changed: old → new (None: absent on that side).

    Long or multi-line text gets ``diff``: the lines of a unified diff (without the file
    headers), at most :data:`MAX_DIFF_LINES`; ``diff_omitted`` counts the lines left out.
    """

    field: str
    old: Any
    new: Any
    diff: list[str] | None = None
    diff_omitted: int = 0

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready data (stable keys)."""
        return {
            "field": self.field,
            "old": self.old,
            "new": self.new,
            "diff": self.diff,
            "diff_omitted": self.diff_omitted,
        }


@dataclasses.dataclass
class ReviewedExperiment:
    """One experiment a change added, corrected or removed, as a reviewer sees it.

    For a removed experiment the values are those it had on the base side (its rank
    too). ``valid`` is False when the file is not a valid experiment: then ``outcome``
    is ``"invalid"`` and the values are whatever could be read. ``rank`` is the position
    by score among the store's scored experiments (not pending, not buggy) with the same
    ``operator_sig`` (1 = best; ties share a rank), out of ``rank_of``; ``new_best`` is
    set when an added or corrected experiment now beats the best of the base side on its
    operator (``previous_best_*``: that best; None when there was none).
    """

    id: str
    kind: str  # 'added', 'corrected' or 'removed'
    path: str  # relative to the repository root, with '/'
    old_path: str | None  # where a corrected file was before a move; None otherwise
    valid: bool
    change_summary: str
    operator_sig: str
    dtype_sig: str
    score: float | None
    outcome: str
    pid: str
    parent_score: float | None = None
    delta: float | None = None
    delta_pct: float | None = None
    #: The score's 95 % interval (None without one); ``delta_pct_ci``: the interval of
    #: ``delta_pct`` when this experiment and its parent both have one.
    score_ci: list[float] | None = None
    delta_pct_ci: list[float] | None = None
    #: How it was measured, in words: the protocol and the samples per configuration.
    measured: str = ""
    rank: int | None = None
    rank_of: int = 0
    new_best: bool = False
    previous_best_id: str | None = None
    previous_best_score: float | None = None
    key_insight: str = ""
    changes: list[FieldChange] = dataclasses.field(default_factory=list)
    problems: list[Problem] = dataclasses.field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready data (stable keys)."""
        data = dataclasses.asdict(self)
        data["changes"] = [c.to_dict() for c in self.changes]
        data["problems"] = [p.to_dict() for p in self.problems]
        return data


@dataclasses.dataclass
class LineageNode:
    """One experiment in the lineage graph of a review.

    ``kind`` is ``added``, ``corrected`` or ``removed`` for an experiment the change
    touches, ``context`` for an ancestor or child drawn to show where it belongs.
    """

    id: str
    pid: str
    kind: str
    score: float
    outcome: str
    change_summary: str
    new_best: bool = False

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready data (stable keys)."""
        return dataclasses.asdict(self)


@dataclasses.dataclass
class LineageGraph:
    """The lineage a change touches: its experiments, their ancestors and children.

    ``edges`` are ``(parent id, child id)`` pairs; ``omitted`` counts the relatives left
    out to keep the graph readable (:data:`MAX_GRAPH_NODES`).
    """

    nodes: list[LineageNode]
    edges: list[tuple[str, str]]
    omitted: int = 0

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready data (stable keys), with the Mermaid text as ``mermaid``."""
        return {
            "nodes": [n.to_dict() for n in self.nodes],
            "edges": [{"parent": a, "child": b} for a, b in self.edges],
            "omitted": self.omitted,
            "mermaid": render_mermaid(self) if self.nodes else "",
        }


@dataclasses.dataclass
class ChangeCheck:
    """The validation of what changed (see :func:`check_changes`).

    ``file_problems``: every problem of each added or corrected file (its own checks and
    its ``base_commit``); ``store_problems``: the store-wide problems of the whole store
    at the head (duplicate ids, dangling ``pid``/``combines``, lineage cycles), of which
    ``caused`` are those the change brings (absent at the merge base). The other files
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
    def problems(self) -> list[Problem]:
        """What ``kexp validate --changed`` reports: the changed files' problems plus the
        store-wide problems, sorted, each once."""
        return sort_problems(dict.fromkeys([*self.file_problems, *self.store_problems]))


@dataclasses.dataclass
class Review:
    """What a change does to the store, as a reviewer needs it (see :func:`review`)."""

    base: str  # the base revision as given
    merge_base: str  # full hash of the commit compared with
    head: str | None  # the head revision as given (None: the working tree)
    head_commit: str | None  # its full hash (None: the working tree)
    added: list[ReviewedExperiment]
    corrected: list[ReviewedExperiment]
    removed: list[ReviewedExperiment]
    #: Validation problems of the added and corrected files.
    file_problems: list[Problem]
    #: Store-wide problems the change causes (in any file, touched or not).
    store_problems: list[Problem]
    #: Store-wide problems already present at the merge base (not caused by the change).
    preexisting_store_problems: list[Problem]
    #: The failures the change adds, by group (see :data:`kexp.lessons.LESSON_GROUPS`).
    lessons: dict[str, list[Lesson]]
    lineage: LineageGraph

    @property
    def experiments(self) -> list[ReviewedExperiment]:
        """Every reviewed experiment: added, then corrected, then removed."""
        return [*self.added, *self.corrected, *self.removed]

    @property
    def problems(self) -> list[Problem]:
        """Every problem the review reports (changed files, then those the change causes)."""
        return sort_problems(dict.fromkeys([*self.file_problems, *self.store_problems]))

    @property
    def ok(self) -> bool:
        """Whether the change brings no validation error."""
        return not has_errors(self.problems)

    @property
    def new_bests(self) -> list[ReviewedExperiment]:
        """The added or corrected experiments that are a new best on their operator."""
        return [e for e in self.experiments if e.new_best]


# --- checking what changed -------------------------------------------------------------


def merge_base(store: Store, base: str, head: str | None = None) -> str:
    """The full hash of the merge base of ``base`` and ``head`` (None: ``HEAD``).

    Falls back to ``base`` itself when the two histories share no commit. In a shallow
    clone that cannot see the merge base, raises :class:`~kexp.errors.GitError` saying
    how to fetch the history.
    """
    from kexp import git as kgit
    from kexp.errors import GitError
    from kexp.snapshot import StoreLocation

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


def check_changes(store: Store, base: str, head: str | None = None) -> ChangeCheck:
    """Validate what changed from ``base`` to ``head`` (None: the working tree, or the
    revision of a store from :meth:`Store.at`).

    The added and corrected files get every check (``base_commit`` included); the whole
    store at the head gets the store-wide checks, and those problems the change causes
    (absent at the merge base) are told apart from those it found. Every file is read
    once, and only what the store-wide checks need is kept of it (memory does not grow
    with the files' contents); other files' ``base_commit`` values are not resolved,
    which is what keeps this fast on a large store.

    Raises :class:`~kexp.errors.GitError` outside a git repository or for an unknown
    revision.
    """
    return _check_changes(store, base, head, facts=False)[0]


def _check_changes(
    store: Store, base: str, head: str | None, *, facts: bool
) -> tuple[ChangeCheck, _HeadScan]:
    """:func:`check_changes`, and what was kept of the store at the head: the
    :class:`_Facts` of its valid experiments when ``facts`` (a review needs them)."""
    from kexp.provenance import base_commit_problems

    head = _head_of(store, head)
    fork = merge_base(store, base, head)
    changes = store.changes(fork, head)
    target = store if head is None else store.at(head)
    links, valid = _scan(_same_files(store, target), facts=facts)
    _add_folded(store, fork, changes, target, [link.path for link in links])
    after = [c.after for c in [*changes.added, *changes.modified] if c.after is not None]
    file_problems = [p for item in after for p in item.problems]
    file_problems += base_commit_problems(after, target.code_repo)

    head_sw = _store_problems(target, links)
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
    for finding in store_findings(base_links) if head_sw else ():
        path = base_links[finding.file].path
        base_sw.add((moved.get(path, path), finding.code, finding.field, finding.message))
    del base_links
    caused = [p for p in head_sw if _problem_key(p, {}) not in base_sw]
    check = ChangeCheck(
        base=base,
        merge_base=fork,
        head=head,
        changes=changes,
        file_problems=sort_problems(dict.fromkeys(file_problems)),
        store_problems=sort_problems(head_sw),
        caused=sort_problems(caused),
    )
    return check, _HeadScan(target, valid)


def _add_folded(
    store: Store, fork: str, changes: Changes, target: Store, paths: Sequence[str]
) -> None:
    """Add to ``changes.added`` the new files that share an id with another changed file
    (``paths``: every file of ``target``, the store at the head).

    :func:`kexp.changelog.changes` matches files by the id in their name, so a second
    file with the same id (copied by hand, or made on two branches) is folded into the
    first; for a review it is a file of its own, and the duplicate it makes must show.
    """
    from kexp.changelog import ExperimentChange
    from kexp.errors import StoreNotFoundError

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
    changes.added.sort(key=lambda c: str(c.path))


def _head_of(store: Store, head: str | None) -> str | None:
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


class _Facts(NamedTuple):
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
    score_ci: Any  # a list of two numbers, or empty


#: The values of :class:`_Facts` read from the front-matter (after ``combines``), with
#: their defaults (:class:`KernelExperiment`'s).
_FACT_FIELDS = (
    ("score", 0.0),
    ("status", "new"),
    ("is_buggy", False),
    ("operator_sig", ""),
    ("created_at", ""),
    ("change_summary", ""),
    ("score_ci", ()),
)

#: What the scan keeps of one file, as data ``marshal`` can send: its id, pid,
#: combines and key lines (see :class:`FileLinks`), and the :class:`_FACT_FIELDS`
#: values of a valid experiment when asked for (else None).
_Record = tuple[
    str | None,
    str | None,
    tuple[str | None, ...],
    tuple[int, int, int] | None,
    tuple[Any, ...] | None,
]


@dataclasses.dataclass
class _HeadScan:
    """The store at the head of a change, and the :class:`_Facts` of its valid
    experiments in the order it lists them (when they were asked for)."""

    target: Store
    valid: list[_Facts]


def _facts_of(link: FileLinks, fields: Mapping[str, Any]) -> _Facts:
    """The :class:`_Facts` of a valid experiment: its links and front-matter ``fields``."""
    values = tuple(fields.get(name, default) for name, default in _FACT_FIELDS)
    return _Facts(link.path, link.id or "", link.pid or "", link.combines, *values)


def _same_files(store: Store, target: Store) -> Store:
    """The working tree ``store`` when it holds exactly the files of ``target`` (the
    store at a revision: the commit checked out, nothing changed under
    ``experiments/``), so that they are read through its query cache; else ``target``."""
    from kexp import git as kgit
    from kexp.snapshot import StoreLocation

    if target.commit is None:
        return target
    location = StoreLocation.of(store.root)
    if kgit.matches_working_tree(location.repo, target.commit, location.folder):
        return store
    return target


def _scan(target: Store, *, facts: bool) -> tuple[list[FileLinks], list[_Facts]]:
    """Read every file of ``target`` once, in the order it lists them: the
    :class:`FileLinks` of each, and (``facts``) the :class:`_Facts` of the valid ones.

    Nothing else is kept of a file. A working tree is read through its query cache
    (only the files that changed since are read; invalid files are read for their
    links); else a canonical file is read without the full parse
    (:func:`kexp.quickcheck.quick_fields`), and a large store by this process and a
    forked child, half each, as :meth:`Store.validate` does.
    """
    cached = target.query_cache(lambda view: view.front_matter())
    if cached is not None:
        return _scan_cached(target, cached, facts=facts)

    files = target.source.files()
    records = scan(target.source, files, target.settings, _keeper(facts))
    links: list[FileLinks] = []
    valid: list[_Facts] = []
    records.reverse()  # taken from the end: each freed as it goes
    for path in files:
        exp_id, pid, combines, lines, known = records.pop()
        link = FileLinks(path, exp_id, pid, combines, None, lines)
        links.append(link)
        if known is not None:
            valid.append(_Facts(path, exp_id or "", pid or "", combines, *known))
    return links, valid


def _scan_cached(
    target: Store, files: list[tuple[str, tuple[Any, ...] | None]], *, facts: bool
) -> tuple[list[FileLinks], list[_Facts]]:
    """What :func:`_scan` keeps of each file, from the query cache's front-matter of the
    valid files (the invalid ones are read), in the order :func:`_scan` lists them."""
    from kexp.index import ROW_FIELDS

    base = str(target.experiments_dir) + os.sep
    invalid = [base + relative for relative, values in files if values is None]
    kept = scan(target.source, invalid, target.settings, _keeper(facts), split=False)
    records = dict(zip(invalid, kept, strict=True))
    ids = operator.itemgetter(*(ROW_FIELDS.index(n) for n in ("id", "pid", "combines")))
    known_facts = operator.itemgetter(*(ROW_FIELDS.index(name) for name, _ in _FACT_FIELDS))
    make_link, make_facts = FileLinks._make, _Facts._make
    links: list[FileLinks] = []
    valid: list[_Facts] = []
    for relative, values in files:
        path = base + relative
        if values is None:
            exp_id, pid, combines, lines, known = records[path]
            links.append(FileLinks(path, exp_id, pid, combines, None, lines))
            if known is not None:
                valid.append(_Facts(path, exp_id or "", pid or "", combines, *known))
            continue
        exp_id, pid, combines = ids(values)
        links.append(make_link((path, exp_id, pid or None, combines, None, None)))
        if facts:
            valid.append(make_facts((path, exp_id, pid, combines, *known_facts(values))))
    return links, valid


def _keeper(facts: bool) -> Keep[_Record]:
    """What :func:`_scan` keeps of one file (:func:`kexp.scan.scan`): its links, and
    (``facts``) the :data:`_FACT_FIELDS` values of a valid experiment."""

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
            known = tuple(fields.get(name, default) for name, default in _FACT_FIELDS)
            operator = known[3]
            if isinstance(operator, str):  # one string per operator (they repeat)
                known = (*known[:3], shared.setdefault(operator, operator), *known[4:])
        return (link.id, link.pid, link.combines, link.lines, known)

    return keep


# --- the review ------------------------------------------------------------------------


def review(store: Store, base: str, head: str | None = None) -> Review:
    """Review what ``head`` changes compared with ``base`` (``head`` None: the working
    tree, or the revision of a store from :meth:`Store.at`).

    ``base`` and ``head`` are revisions (branch, tag, hash, ``HEAD~2``); the change is
    taken from their merge base, as a forge's pull request is. Returns a
    :class:`Review`; :func:`render_markdown` makes the pull-request comment of it.
    Raises :class:`~kexp.errors.GitError` outside a git repository or for an unknown
    revision.
    """
    from kexp import git as kgit
    from kexp.snapshot import StoreLocation

    head = _head_of(store, head)
    check, scan = _check_changes(store, base, head, facts=True)
    location = StoreLocation.of(store.root)
    head_commit = kgit.resolve_commit(location.repo, head) if head is not None else None
    now, then = _sides(scan, check.changes)
    del scan

    def relative(path: Path | None) -> str | None:
        if path is None:
            return None
        return location.repo_path(path) or str(path)

    entries: dict[str, list[_Reviewed]] = {kind: [] for kind in _KINDS}
    changes = check.changes
    for kind, group in zip(_KINDS, (changes.added, changes.modified, changes.removed), strict=True):
        for change in group:
            side = then if kind == "removed" else now
            checked = change.before if kind == "removed" else change.after
            assert checked is not None
            exp = side.at_path(str(checked.path))
            entries[kind].append((_entry(kind, change, checked, exp, side, then, relative), exp))

    for kind in _KINDS:
        for entry, _ in entries[kind]:
            entry.problems = _relative_problems(entry.problems, relative)
    lessons = group_lessons(_new_lessons(entries, then))
    return Review(
        base=base,
        merge_base=check.merge_base,
        head=head,
        head_commit=head_commit,
        added=[entry for entry, _ in entries["added"]],
        corrected=[entry for entry, _ in entries["corrected"]],
        removed=[entry for entry, _ in entries["removed"]],
        file_problems=_relative_problems(check.file_problems, relative),
        store_problems=_relative_problems(check.caused, relative),
        preexisting_store_problems=_relative_problems(
            [p for p in check.store_problems if p not in check.caused], relative
        ),
        lessons={group: items for group, items in lessons.items() if items},
        lineage=_lineage(entries, now, then),
    )


def _relative_problems(
    problems: Iterable[Problem], relative: Callable[[Path | None], str | None]
) -> list[Problem]:
    """``problems`` with their paths relative to the repository root, as a comment on
    the pull request shows them wherever the review ran."""
    return [dataclasses.replace(p, path=relative(Path(p.path)) or p.path) for p in problems]


#: A reviewed experiment and, when its file is valid, the experiment itself.
_Reviewed = tuple["ReviewedExperiment", "KernelExperiment | None"]


class _Side:
    """The valid experiments of one side of a change, in the order the store lists them.

    Of most, only their :class:`_Facts` are kept; an experiment is made of them when it
    is asked for (its long texts empty). The experiments the change touches are
    ``whole`` (by their number in ``facts``); ``read(path)`` reads another one whole.
    ``interference`` is marked among the side's experiments, as the store's queries do.
    """

    def __init__(
        self,
        facts: list[_Facts],
        whole: Mapping[int, KernelExperiment],
        settings: Settings,
        read: Callable[[str], KernelExperiment | None],
    ) -> None:
        self.facts = facts
        self.settings = settings
        self._read = read
        #: The number of the first experiment of each id.
        self.first: dict[str, int] = {}
        scores: dict[str, Any] = {}
        for number, item in enumerate(facts):
            self.first.setdefault(item.id, number)
            scores[item.id] = item.score
        self.interfering = {
            number
            for number, item in enumerate(facts)
            if item.combines and below_best_combined(item.score, _ids(item.combines), scores)
        }
        del scores
        self._whole = dict(whole)
        for number, exp in self._whole.items():
            attach(exp, interference=number in self.interfering)
        self._by_path = {facts[number].path: number for number in self._whole}
        self._made: dict[int, KernelExperiment] = {}
        self._children: dict[str, list[int]] | None = None
        self._scored: dict[str, list[tuple[Any, int]]] = {}

    def experiment(self, number: int) -> KernelExperiment:
        """The experiment numbered ``number`` (whole if the change touches it)."""
        exp = self._whole.get(number) or self._made.get(number)
        if exp is None:
            exp = self._made[number] = self._light(number)
        return exp

    def _light(self, number: int) -> KernelExperiment:
        item = self.facts[number]
        exp = KernelExperiment(
            id=item.id,
            pid=item.pid,
            score=item.score,
            is_buggy=item.is_buggy,
            change_summary=item.change_summary,
            operator_sig=item.operator_sig,
            status=item.status,
            created_at=item.created_at,
            combines=_ids(item.combines),
            score_ci=list(item.score_ci or ()),
        )
        return attach(
            exp, self.settings, path=Path(item.path), interference=number in self.interfering
        )

    def get(self, exp_id: str) -> KernelExperiment | None:
        """The first experiment with id ``exp_id`` (None when there is none)."""
        number = self.first.get(exp_id)
        return None if number is None else self.experiment(number)

    def whole(self, exp_id: str) -> KernelExperiment | None:
        """:meth:`get`, read whole (its long texts too)."""
        number = self.first.get(exp_id)
        if number is None or number in self._whole:
            return None if number is None else self._whole[number]
        exp = self._read(self.facts[number].path)
        if exp is None:  # pragma: no cover - it was valid when the store was read
            return self.experiment(number)
        return attach(exp, self.settings, interference=number in self.interfering)

    def at_path(self, path: str) -> KernelExperiment | None:
        """The experiment the change touches in the file ``path`` (None: not valid)."""
        number = self._by_path.get(path)
        return None if number is None else self._whole[number]

    def children(self, exp_id: str) -> list[int]:
        """The numbers of the experiments whose ``pid`` is ``exp_id``, oldest first."""
        if self._children is None:
            facts = self.facts
            self._children = {}
            for number in sorted(
                range(len(facts)), key=lambda n: (facts[n].created_at, facts[n].id)
            ):
                if facts[number].pid:
                    self._children.setdefault(facts[number].pid, []).append(number)
        return self._children.get(exp_id, [])

    def scored_on(self, operator: str) -> list[tuple[Any, int]]:
        """(score, number) of the scored experiments on ``operator`` (exact
        ``operator_sig``), in order."""
        found = self._scored.get(operator)
        if found is None:
            found = self._scored[operator] = [
                (item.score, number)
                for number, item in enumerate(self.facts)
                if item.operator_sig == operator
                and is_scored(self._whole.get(number) or self._light(number))
            ]
        return found

    def best_on(self, operator: str) -> KernelExperiment | None:
        """The best scored experiment on ``operator`` (None when there is none)."""
        best = max(self.scored_on(operator), key=lambda e: float(e[0]), default=None)
        return None if best is None else self.experiment(best[1])


def _ids(combines: Iterable[str | None]) -> list[str]:
    return [c for c in combines if c is not None]


def _sides(scan: _HeadScan, changes: Changes) -> tuple[_Side, _Side]:
    """The experiments at the head and at the merge base of a change: the head's, and
    the head's less what the change added or corrected, plus what it removed or
    corrected as it was (the base side is not read again)."""
    target = scan.target
    settings = target.settings

    def whole(item: CheckedFile) -> KernelExperiment:
        return attach(item.experiment(), settings, path=item.path)

    def read(path: str) -> KernelExperiment | None:
        item = target.check_file(path)
        return whole(item) if item.ok else None

    after = [c.after for c in [*changes.added, *changes.modified] if c.after is not None]
    before = [c.before for c in [*changes.modified, *changes.removed] if c.before is not None]
    changed_now = {str(item.path) for item in after}
    valid_now = {str(item.path): item for item in after if item.ok}
    head_whole = {
        number: whole(valid_now[item.path])
        for number, item in enumerate(scan.valid)
        if item.path in valid_now
    }
    base_facts = [item for item in scan.valid if item.path not in changed_now]
    base_whole: dict[int, KernelExperiment] = {}
    for item in before:
        if item.ok and item.document is not None:
            base_whole[len(base_facts)] = whole(item)
            base_facts.append(_facts_of(links_of(item), item.document.fields))
    return (
        _Side(scan.valid, head_whole, settings, read),
        _Side(base_facts, base_whole, settings, read),
    )


def _entry(
    kind: str,
    change: ExperimentChange,
    checked: CheckedFile,
    exp: KernelExperiment | None,
    side: _Side,
    then: _Side,
    relative: Callable[[Path | None], str | None],
) -> ReviewedExperiment:
    """What a reviewer sees of one changed file (``exp``: its experiment when valid)."""
    old_path = relative(change.old_path) if kind == "corrected" else None
    entry = ReviewedExperiment(
        id=change.id,
        kind=kind,
        path=relative(checked.path) or str(checked.path),
        old_path=old_path,
        valid=exp is not None,
        change_summary="",
        operator_sig="",
        dtype_sig="",
        score=None,
        outcome="invalid",
        pid="",
        changes=[_field_change(name, old, new) for name, (old, new) in change.fields.items()],
        problems=sort_problems(checked.problems) if kind != "removed" else [],
    )
    if exp is None:
        fields = checked.document.fields if checked.document is not None else {}
        entry.change_summary = _text(fields.get("change_summary"))
        entry.operator_sig = _text(fields.get("operator_sig"))
        entry.dtype_sig = _text(fields.get("dtype_sig"))
        entry.pid = _text(fields.get("pid"))
        score = fields.get("score")
        if isinstance(score, (int, float)) and not isinstance(score, bool):
            entry.score = float(score)
        return entry
    entry.change_summary = exp.change_summary
    entry.operator_sig = exp.operator_sig
    entry.dtype_sig = exp.dtype_sig
    entry.score = float(exp.score)
    entry.outcome = exp.outcome
    entry.pid = exp.pid
    entry.key_insight = key_insight(exp.detailed_description)
    entry.score_ci = list(exp.score_ci) if len(exp.score_ci) == 2 else None
    entry.measured = _measured(exp)
    parent = side.get(exp.pid) if exp.pid else None
    if parent is not None:
        entry.parent_score = float(parent.score)
        if is_scored(exp) and is_scored(parent):
            entry.delta = float(exp.score) - float(parent.score)
            if parent.score > 0:
                entry.delta_pct = (float(exp.score) / float(parent.score) - 1.0) * 100.0
                if entry.score_ci and len(parent.score_ci) == 2 and exp.score > 0:
                    low, high = ratio_interval(
                        float(exp.score), exp.score_ci, float(parent.score), parent.score_ci
                    )
                    entry.delta_pct_ci = [(low - 1.0) * 100.0, (high - 1.0) * 100.0]
    if is_scored(exp):
        rivals = side.scored_on(exp.operator_sig)
        entry.rank = 1 + sum(1 for score, _ in rivals if score > exp.score)
        entry.rank_of = len(rivals)
    if kind != "removed" and entry.rank == 1:
        previous = then.best_on(exp.operator_sig)
        if previous is not None:
            entry.previous_best_id = previous.id
            entry.previous_best_score = float(previous.score)
        entry.new_best = previous is None or (
            previous.id != exp.id and float(exp.score) > float(previous.score)
        )
    return entry


def _text(value: Any) -> str:
    return "" if value is None else str(value)


def _measured(exp: KernelExperiment) -> str:
    """The protocol and the samples per configuration of ``exp``, in words."""
    parts = [describe_protocol(exp.protocol)] if exp.protocol else []
    counts = sorted({c for c in map(sample_count, exp.results) if c is not None})
    if counts:
        parts.append(
            "samples per configuration (baseline / candidate): "
            + ", ".join(f"{b} / {c}" for b, c in counts)
        )
    return "; ".join(parts)


def _field_change(name: str, old: Any, new: Any) -> FieldChange:
    change = FieldChange(name, old, new)
    if name in BODY_FIELDS or _is_long(old) or _is_long(new):
        old_lines = _as_lines(old)
        new_lines = _as_lines(new)
        lines = [
            _cut(line.rstrip("\n"), LONG_DIFF_LINE_CHARS)
            for line in difflib.unified_diff(old_lines, new_lines, lineterm="", n=1)
        ][2:]  # drop the ---/+++ file headers
        change.diff = lines[:MAX_DIFF_LINES]
        change.diff_omitted = max(0, len(lines) - MAX_DIFF_LINES)
    return change


def _cut(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _is_long(value: Any) -> bool:
    text = value if isinstance(value, str) else _short_value(value)
    return "\n" in text or len(text) > LONG_VALUE_CHARS


def _as_lines(value: Any) -> list[str]:
    if value is None:
        return []
    if isinstance(value, str):
        return value.splitlines()
    return json.dumps(value, indent=2, ensure_ascii=False).splitlines()


def _short_value(value: Any) -> str:
    """A field value on one line, as JSON for anything but text."""
    if isinstance(value, str):
        return value
    return json.dumps(value, ensure_ascii=False)


def _new_lessons(entries: Mapping[str, list[_Reviewed]], then: _Side) -> list[KernelExperiment]:
    """Added failures, and corrected experiments that became a failure (or another kind
    of failure, or whose key insight changed)."""
    found: list[KernelExperiment] = []
    for entry, exp in [*entries["added"], *entries["corrected"]]:
        if exp is None or exp.outcome not in LESSON_GROUPS:
            continue
        if entry.kind == "corrected":
            old = then.whole(entry.id)
            if (
                old is not None
                and old.outcome == exp.outcome
                and key_insight(old.detailed_description) == entry.key_insight
            ):
                continue
        found.append(exp)
    return found


def _lineage(entries: Mapping[str, list[_Reviewed]], now: _Side, then: _Side) -> LineageGraph:
    """The touched experiments, their ancestors and their children."""
    nodes: dict[str, LineageNode] = {}
    omitted = 0

    def add(exp: KernelExperiment, kind: str, new_best: bool = False) -> bool:
        nonlocal omitted
        if exp.id in nodes:
            return True
        if len(nodes) >= MAX_GRAPH_NODES:
            omitted += 1
            return False
        nodes[exp.id] = LineageNode(
            exp.id, exp.pid, kind, float(exp.score), exp.outcome, exp.change_summary, new_best
        )
        return True

    touched: list[tuple[KernelExperiment, _Side]] = []
    for kind in _KINDS:
        side = then if kind == "removed" else now
        for entry, exp in entries[kind]:
            if exp is not None and add(exp, kind, entry.new_best):
                touched.append((exp, side))
    for exp, side in touched:
        current, steps, seen = exp, 0, {exp.id}
        while current.pid and steps < MAX_RELATIVES:
            parent = side.get(current.pid) or now.get(current.pid)
            if parent is None or parent.id in seen:
                break
            seen.add(parent.id)
            add(parent, "context")
            current, steps = parent, steps + 1
    for exp, _ in touched:
        children = now.children(exp.id)
        for number in children[:MAX_RELATIVES]:
            add(now.experiment(number), "context")
        omitted += max(0, len(children) - MAX_RELATIVES)
    edges = [(n.pid, n.id) for n in nodes.values() if n.pid in nodes and n.pid != n.id]
    return LineageGraph(list(nodes.values()), edges, omitted)


# --- JSON ------------------------------------------------------------------------------


def to_json(result: Review) -> dict[str, Any]:
    """The review as JSON-ready data: the same content as :func:`render_markdown`."""
    return {
        "base": result.base,
        "merge_base": result.merge_base,
        "head": result.head,
        "head_commit": result.head_commit,
        "summary": {
            "added": len(result.added),
            "corrected": len(result.corrected),
            "removed": len(result.removed),
            "errors": sum(p.severity == "error" for p in result.problems),
            "warnings": sum(p.severity == "warning" for p in result.problems),
            "new_best": [e.id for e in result.new_bests],
        },
        "added": [e.to_dict() for e in result.added],
        "corrected": [e.to_dict() for e in result.corrected],
        "removed": [e.to_dict() for e in result.removed],
        "problems": {
            "changed_files": [p.to_dict() for p in result.file_problems],
            "store_wide": [p.to_dict() for p in result.store_problems],
            "preexisting_store_wide": [p.to_dict() for p in result.preexisting_store_problems],
        },
        "lessons": {
            group: [lesson.to_dict() for lesson in items] for group, items in result.lessons.items()
        },
        "lineage": result.lineage.to_dict(),
    }


# --- Markdown: escaping ----------------------------------------------------------------

_HTML = {"&": "&amp;", "<": "&lt;", ">": "&gt;"}
#: Characters with a meaning in (GitHub-flavoured) Markdown inside a line: emphasis,
#: code, links and images, tables, strikethrough, headings, math.
_MARKDOWN_PUNCTUATION = frozenset("\\`*_[]|~#!$")
#: Bidirectional overrides and isolates: they could make text read other than it is.
_BIDI = frozenset("\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069")
_BACKTICKS = re.compile(r"`+")


def _visible(ch: str) -> str:
    """A control or bidirectional-override character as U+FFFD; others as they are."""
    code = ord(ch)
    if code < 0x20 or 0x7F <= code < 0xA0 or ch in _BIDI:
        return "\ufffd"
    return ch


def md_text(value: Any, *, limit: int | None = None) -> str:
    """``value`` as inline Markdown text on one line that renders as exactly that text.

    Line breaks become spaces; ``& < >`` become entities (no HTML passes through);
    Markdown punctuation is backslash-escaped (no emphasis, links, images, code, math,
    or table cells); control characters become U+FFFD; what a forge would turn into a
    live link or a notification (a bare URL, a ``www.`` host, an e-mail address, an
    ``@user`` or ``@org/team`` mention, an issue reference) gets an invisible
    zero-width space that breaks it (see :func:`defuse_links`). Safe in a table cell.
    ``limit`` cuts the text to that many characters, ending in "…".
    """
    out: list[str] = []
    for ch in _one_line(value, limit):
        if ch in _HTML:
            out.append(_HTML[ch])
        elif ch in _MARKDOWN_PUNCTUATION:
            out.append("\\" + ch)
        else:
            out.append(_visible(ch))
    return defuse_links("".join(out))


#: A zero-width space, as an entity: it renders as nothing, yet no autolink, mention
#: or reference survives it (they are recognised on the rendered text).
_BREAK = "&#8203;"
#: What GitHub-flavoured Markdown and the forge link: a URL scheme before "://" (or a
#: scheme used without slashes), "www.", "@" before a name (mentions, e-mail
#: addresses), "#" (escaped) or "GH-" before digits (issue references).
_LIVE = re.compile(
    r"(?i)(?<![a-z0-9+.-])(?:[a-z][a-z0-9+.-]*(?=://)|mailto(?=:)|xmpp(?=:))"
    r"|(?<![a-z0-9_-])www(?=\.)"
    r"|@(?=[a-z0-9_])"
    r"|\\#(?=[0-9])"
    r"|(?<![a-z0-9_])gh(?=-[0-9])"
)


def defuse_links(text: str) -> str:
    """Markdown text (as :func:`md_text` escapes it) in which nothing is linked or
    mentioned by the forge: a zero-width space after each URL scheme, ``www``, ``@``,
    ``#`` or ``GH`` that would start one. The text reads the same."""
    return _LIVE.sub(lambda match: match.group() + _BREAK, text)


def md_code(value: Any, *, in_table: bool = False, limit: int | None = None) -> str:
    """``value`` as an inline code span on one line, whatever backticks it holds.

    The span's fence is one backtick longer than the longest run inside; in a table
    cell ``|`` is escaped as GitHub-flavoured Markdown requires (text with a backslash
    is given as escaped text instead: a table cannot hold it in a code span). Empty
    text is ``—``; ``limit`` as in :func:`md_text`.
    """
    text = "".join(_visible(ch) for ch in _one_line(value, limit))
    if not text:
        return "—"
    if in_table and "\\" in text:
        # GitHub's table rows treat backslash-pipe as an escaped pipe even inside a code
        # span, and a backslash cannot be escaped there: use escaped text instead.
        return md_text(text)
    longest = max((len(run) for run in _BACKTICKS.findall(text)), default=0)
    fence = "`" * (longest + 1)
    pad = " " if text.startswith("`") or text.endswith("`") else ""
    if in_table:
        text = text.replace("|", "\\|")
    return f"{fence}{pad}{text}{pad}{fence}"


def _one_line(value: Any, limit: int | None) -> str:
    text = " ".join(str(value).split())
    if limit is not None and len(text) > limit:
        text = text[: max(0, limit - 1)] + "…"
    return text


def md_block(text: str, language: str = "text") -> str:
    """``text`` as a fenced code block whose fence no line inside can close."""
    body = "\n".join("".join(_visible(ch) for ch in line) for line in text.splitlines())
    longest = max((len(run) for run in _BACKTICKS.findall(body)), default=0)
    fence = "`" * max(3, longest + 1)
    return f"{fence}{language}\n{body}\n{fence}"


# --- Markdown: the comment -------------------------------------------------------------

_TABLE_HEADER = (
    "| id | summary | operator | dtype | score | Δ vs parent | outcome | rank on operator |\n"
    "|---|---|---|---|--:|---|---|---|"
)
#: Longest text in a table cell (an invalid file may hold anything).
_CELL_CHARS = 200
_OUTCOME_ICONS = {
    "improvement": "🟢",
    "marginal": "⚪",
    "regression": "🔴",
    "interference": "🟠",
    "buggy": "🐞",
    "pending": "⏳",
    "invalid": "❌",
}


def render_markdown(result: Review) -> str:
    """The review as a Markdown comment for the pull request (GitHub-flavoured, with a
    Mermaid lineage graph). Text from experiments is escaped throughout."""
    parts: list[str] = [COMMENT_MARKER, "## kexp review", _headline(result)]
    for kind, title in zip(_KINDS, ("Added", "Corrected", "Removed"), strict=True):
        entries = getattr(result, kind)
        if not entries:
            continue
        parts.append(f"### {title} ({len(entries)})")
        parts.append(_table(entries))
        measured = _measurements(entries)
        if measured:
            parts.append(measured)
        if kind == "corrected":
            parts.extend(_corrections(entries))
    parts.append(_validation(result))
    if result.lessons:
        parts.append(_lessons(result.lessons))
    if result.lineage.nodes:
        parts.append(_lineage_section(result.lineage))
    head = "the working tree" if result.head is None else md_code(result.head)
    parts.append(
        f"<sub>kexp review: {head} compared with {md_code(result.base)} (merge base "
        f"{md_code(result.merge_base[:12])}).</sub>"
    )
    return "\n\n".join(parts) + "\n"


def _headline(result: Review) -> str:
    counts = (
        f"**{len(result.added)} added · {len(result.corrected)} corrected · "
        f"{len(result.removed)} removed**"
    )
    if not result.experiments:
        counts = "**No experiment added, corrected or removed.**"
    errors = sum(p.severity == "error" for p in result.problems)
    warnings = sum(p.severity == "warning" for p in result.problems)
    if errors:
        verdict = f"❌ {errors} validation error(s), {warnings} warning(s): see Validation"
    elif warnings:
        verdict = f"⚠️ no validation errors, {warnings} warning(s)"
    else:
        verdict = "✅ validation passed"
    lines = [f"{counts} — {verdict}"]
    for entry in result.new_bests:
        lines.append(f"🏆 **New best** on {md_code(entry.operator_sig)}: {_best_note(entry)}")
    return "  \n".join(lines)


def _best_note(entry: ReviewedExperiment) -> str:
    score = f"{entry.score:.4f}" if entry.score is not None else "?"
    text = f"{md_code(entry.id)} scores {score}"
    if entry.previous_best_id is not None and entry.previous_best_score is not None:
        before = f"{md_code(entry.previous_best_id)} ({entry.previous_best_score:.4f})"
        text += f"; the best before was {before}"
    else:
        text += " (the first scored experiment on this operator)"
    return text


def _table(entries: Sequence[ReviewedExperiment]) -> str:
    rows = [_TABLE_HEADER]
    for e in entries:
        score = describe_interval(e.score, e.score_ci or ()) if e.score is not None else "—"
        if e.delta is not None:
            pct = f" ({e.delta_pct:+.2f}%)" if e.delta_pct is not None else ""
            if e.delta_pct is not None and e.delta_pct_ci is not None:
                low, high = e.delta_pct_ci
                pct = f" ({e.delta_pct:+.2f}% [{low:+.2f}%, {high:+.2f}%])"
            delta = f"{e.delta:+.4f}{pct} vs {md_code(e.pid, in_table=True)}"
        elif e.pid:
            delta = f"— (parent {md_code(e.pid, in_table=True, limit=_CELL_CHARS)})"
        else:
            delta = "— (no parent)"
        icon = _OUTCOME_ICONS.get(e.outcome, "")
        outcome = f"{icon} {md_text(e.outcome)}".strip()
        if e.rank is None:
            rank = "—"
        else:
            rank = f"#{_BREAK}{e.rank} of {e.rank_of}"  # "#1" alone would name issue 1
            if e.new_best:
                rank = f"**{rank}, new best**"
            elif e.kind == "removed" and e.rank == 1:
                rank += " (was the best)"
        rows.append(
            "| "
            + " | ".join(
                [
                    md_code(e.id, in_table=True),
                    md_text(e.change_summary, limit=_CELL_CHARS) or "—",
                    md_code(e.operator_sig, in_table=True, limit=_CELL_CHARS),
                    md_code(e.dtype_sig, in_table=True, limit=_CELL_CHARS),
                    score,
                    delta,
                    outcome,
                    rank,
                ]
            )
            + " |"
        )
    return "\n".join(rows)


def _measurements(entries: Sequence[ReviewedExperiment]) -> str:
    """How the listed experiments were measured (those that say), one line each."""
    lines = [
        f"- {md_code(e.id)}: {md_text(e.measured, limit=_CELL_CHARS)}"
        for e in entries
        if e.measured
    ]
    return "Measured with:\n\n" + "\n".join(lines) if lines else ""


def _corrections(entries: Sequence[ReviewedExperiment]) -> list[str]:
    parts: list[str] = []
    for e in entries:
        title = f"#### {md_code(e.id)} {md_text(e.change_summary)}".rstrip()
        lines = [title, ""]
        if e.old_path is not None:
            lines.append(f"Moved from {md_code(e.old_path)} to {md_code(e.path)}.")
            lines.append("")
        short = [c for c in e.changes if c.diff is None]
        long = [c for c in e.changes if c.diff is not None]
        for change in short:
            lines.append(f"- {md_code(change.field)}: {_value(change.old)} → {_value(change.new)}")
        if not e.changes:
            lines.append("No field changed (the file's text was reformatted).")
        parts.append("\n".join(lines).rstrip())
        for change in long:
            diff = "\n".join(change.diff or [])
            if change.diff_omitted:
                diff += f"\n… {change.diff_omitted} more line(s)"
            parts.append(f"{md_code(change.field)}:\n\n{md_block(diff, 'diff')}")
    return parts


def _value(value: Any) -> str:
    if value is None:
        return "*(absent)*"
    if value == "":
        return "*(empty)*"
    return md_code(_short_value(value))


def _validation(result: Review) -> str:
    lines = ["### Validation"]
    if result.file_problems:
        errors = sum(p.severity == "error" for p in result.file_problems)
        warnings = len(result.file_problems) - errors
        lines += [
            "",
            f"Problems in the changed files ({errors} error(s), {warnings} warning(s)):",
            "",
            md_block("\n".join(p.format() for p in result.file_problems)),
        ]
    else:
        lines += ["", "The changed files pass every check."]
    if result.store_problems:
        lines += [
            "",
            "Store-wide problems this change causes (duplicate ids, parents or combined "
            "experiments that do not exist, lineage cycles):",
            "",
            md_block("\n".join(p.format() for p in result.store_problems)),
        ]
    else:
        lines += ["", "The change causes no store-wide problem."]
    if result.preexisting_store_problems:
        lines += [
            "",
            f"*{len(result.preexisting_store_problems)} store-wide problem(s) were there "
            "before this change (`kexp validate` lists them).*",
        ]
    return "\n".join(lines)


def _lessons(groups: Mapping[str, list[Lesson]]) -> str:
    total = sum(len(items) for items in groups.values())
    lines = [f"### Lessons added ({total})", ""]
    for group in LESSON_GROUPS:
        for lesson in groups.get(group, []):
            icon = _OUTCOME_ICONS.get(group, "")
            lines.append(
                f"- {icon} **{md_text(group)}** {md_code(lesson.id)} "
                f"({describe_interval(lesson.score, lesson.score_ci)}): "
                f"{md_text(lesson.change_summary)}"
            )
            if lesson.key_insight:
                lines.append(f"  - Key insight: {md_text(lesson.key_insight)}")
            else:
                lines.append(
                    "  - *No “Key insight” line in the description: worth asking for one.*"
                )
    return "\n".join(lines)


def _lineage_section(graph: LineageGraph) -> str:
    lines = [
        "### Lineage",
        "",
        md_block(render_mermaid(graph), "mermaid"),
        "",
        "Green: added · yellow: corrected · red, dashed: removed · grey: context.",
    ]
    if graph.omitted:
        lines[-1] += f" {graph.omitted} more relative(s) not drawn."
    return "\n".join(lines)


# --- Mermaid ---------------------------------------------------------------------------

_MERMAID_SAFE = re.compile(r"[A-Za-z0-9 .,:+\-/()]")
_CLASS_STYLES = {
    "added": "fill:#dafbe1,stroke:#1a7f37,color:#000",
    "corrected": "fill:#fff8c5,stroke:#9a6700,color:#000",
    "removed": "fill:#ffebe9,stroke:#cf222e,stroke-dasharray:5 3,color:#000",
    "context": "fill:#f6f8fa,stroke:#8c959f,color:#000",
}


def mermaid_text(value: Any) -> str:
    """Text for inside a quoted Mermaid label: anything but a few plain characters is
    written as a Mermaid entity (``#35;``), so no text can end the label or the block."""
    return "".join(
        ch if _MERMAID_SAFE.fullmatch(ch) else f"#{ord(ch)};" for ch in " ".join(str(value).split())
    )


def mermaid_id(exp_id: str) -> str:
    """A Mermaid node id for an experiment id: ``e`` and the id's letters and digits."""
    return "e" + re.sub(r"[^0-9a-zA-Z]", "_", exp_id)


def render_mermaid(graph: LineageGraph) -> str:
    """The lineage graph as a Mermaid flowchart (top-down, parents above children).

    Every label is quoted and escaped with :func:`mermaid_text`; node ids are letters
    and digits only.
    """
    lines = ["flowchart TD"]
    for node in graph.nodes:
        label = [mermaid_text(node.id), mermaid_text(f"{node.score:.4f} {node.outcome}")]
        if node.kind == "removed":
            label.append("removed")
        if node.new_best:
            label.append("new best")
        lines.append(f'  {mermaid_id(node.id)}["{"<br/>".join(label)}"]')
    for parent, child in graph.edges:
        lines.append(f"  {mermaid_id(parent)} --> {mermaid_id(child)}")
    for kind, style in _CLASS_STYLES.items():
        members = [mermaid_id(n.id) for n in graph.nodes if n.kind == kind]
        if members:
            lines.append(f"  classDef {kind} {style}")
            lines.append(f"  class {','.join(members)} {kind}")
    return "\n".join(lines)
