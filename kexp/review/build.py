"""Pull-request review of experiment changes.

An experiment lands like code: a pull request adds or corrects files under
``experiments/``, CI checks them, and the reviewer reads a summary instead of raw YAML.

:func:`review` gives what a branch (or the working tree) changes compared with a base
revision, as data (:mod:`kexp.review.model`): the experiments added, corrected and
removed (each with its score, Δ vs its parent, outcome and rank among the store's
experiments of the same campaign: operator × dtype × env), the fields each correction
changed, the validation problems of the changed files, the store-wide problems the
change causes, the lessons it adds, and the lineage it touches
(:mod:`kexp.review.graph`). The validation, and the one read of the store at the head,
are those of ``kexp validate --changed`` (:mod:`kexp.storage.changed`); of the
experiments the change does not touch, a review keeps a few front-matter values only.
:func:`render_markdown` turns a review into a comment fit to post on the pull request,
:func:`to_json` into JSON-ready data (:mod:`kexp.review.render`).

This module is the review's public face: the names of the modules above are importable
from it, as they were when it held them all.
"""

from __future__ import annotations

import dataclasses
import difflib
import json
from collections import Counter
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from kexp.agents.lessons import LESSON_GROUPS, group_lessons
from kexp.core.campaign import derive_for, versions_of
from kexp.core.collector import collector_paused
from kexp.core.cumulative import Derived, change_percent, cumulative_change
from kexp.core.model import BODY_FIELDS, KernelExperiment, attach
from kexp.core.noise import ratio_interval, rounded_interval
from kexp.core.outcome import is_control, measured_against_parent, time_key
from kexp.core.problems import Problem, sort_problems
from kexp.format.fileformat import key_insight
from kexp.format.samples import describe_protocol, sample_count
from kexp.format.suspect import suspect_reasons
from kexp.format.validate import CheckedFile, links_of
from kexp.review.graph import LineageGraph, LineageNode, render_mermaid
from kexp.review.graph import mermaid_id as mermaid_id
from kexp.review.graph import mermaid_text as mermaid_text
from kexp.review.model import (
    KINDS,
    BestChange,
    FieldChange,
    LostLesson,
    Review,
    ReviewedExperiment,
    short_value,
)
from kexp.review.render import COMMENT_MARKER as COMMENT_MARKER
from kexp.review.render import defuse_links as defuse_links
from kexp.review.render import md_block as md_block
from kexp.review.render import md_code as md_code
from kexp.review.render import md_text as md_text
from kexp.review.render import render_markdown, to_json
from kexp.storage.changed import (
    STORE_WIDE_CODES,
    ChangeCheck,
    Facts,
    HeadScan,
    check_and_scan,
    check_changes,
    facts_of,
    head_of,
    validate_changed,
)
from kexp.storage.changed import merge_base as merge_base
from kexp.storage.lineage import is_scored
from kexp.storage.listing import path_order
from kexp.storage.query import believable_best

if TYPE_CHECKING:
    from kexp.core.settings import Settings
    from kexp.storage.history import Changes, ExperimentChange
    from kexp.storage.store import Store

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


# --- the review ------------------------------------------------------------------------


def review(store: Store, base: str, head: str | None = None) -> Review:
    """Review what ``head`` changes compared with ``base`` (``head`` None: the working
    tree, or the revision of a store from :meth:`Store.at`).

    ``base`` and ``head`` are revisions (branch, tag, hash, ``HEAD~2``); the change is
    taken from their merge base, as a forge's pull request is. Returns a
    :class:`Review`; :func:`render_markdown` makes the pull-request comment of it.
    Raises :class:`~kexp.core.errors.GitError` outside a git repository or for an unknown
    revision.
    """
    # lazy: not every command that imports this module needs kexp.gitops.git,
    # kexp.storage.history, kexp.storage.snapshot
    from kexp.gitops import git as kgit
    from kexp.storage.history import changes as changes_between
    from kexp.storage.snapshot import StoreLocation

    head = head_of(store, head)
    check, scan = check_and_scan(store, base, head)
    location = StoreLocation.of(store.root)
    head_commit = kgit.resolve_commit(location.repo, head) if head is not None else None
    tip = kgit.resolve_commit(location.repo, base)
    # What the base branch changed since the branch was made (only those files are read).
    on_base = changes_between(store, check.merge_base, tip) if tip != check.merge_base else None
    landed = _landed(check.changes, on_base)
    shared = _shared(store, landed, check.merge_base, tip, head_commit or "HEAD")
    ours = {id(c) for c in landed}
    changes = dataclasses.replace(
        check.changes,
        added=[c for c in check.changes.added if id(c) not in ours],
        modified=[c for c in check.changes.modified if id(c) not in ours],
        removed=[c for c in check.changes.removed if id(c) not in ours],
    )
    changes = _held_on_tip(changes, on_base)
    now, then, at_tip = _sides(scan, check.changes, changes, on_base)
    del scan

    def relative(path: Path | None) -> str | None:
        if path is None:
            return None
        return location.repo_path(path) or str(path)

    entries: dict[str, list[_Reviewed]] = {kind: [] for kind in KINDS}
    for kind, group in zip(KINDS, (changes.added, changes.modified, changes.removed), strict=True):
        for change in group:
            side = then if kind == "removed" else now
            checked = change.before if kind == "removed" else change.after
            assert checked is not None
            path = str(checked.path)
            exp = side.at_path(at_tip.get(path, path) if kind == "removed" else path)
            entries[kind].append((_entry(kind, change, checked, exp, side, then, relative), exp))

    for kind in KINDS:
        for entry, _ in entries[kind]:
            entry.problems = _relative_problems(entry.problems, relative)
    touched = {entry.id: entry for entry, _ in [*entries["corrected"], *entries["removed"]]}
    if touched and on_base is not None:
        _changed_on_base(on_base, touched)
    lost = _lost_lessons(entries, then)
    lessons = group_lessons(_new_lessons(entries, then, {item.id for item in lost}))
    landed_paths = {str(c.after.path) for c in landed if c.after is not None}
    return Review(
        base=base,
        merge_base=check.merge_base,
        head=head,
        head_commit=head_commit,
        added=[entry for entry, _ in entries["added"]],
        corrected=[entry for entry, _ in entries["corrected"]],
        removed=[entry for entry, _ in entries["removed"]],
        file_problems=_relative_problems(
            [p for p in check.file_problems if p.path not in landed_paths], relative
        ),
        store_problems=_relative_problems(check.caused, relative),
        preexisting_store_problems=_relative_problems(
            [p for p in check.store_problems if p not in check.caused], relative
        ),
        lessons={group: items for group, items in lessons.items() if items},
        lineage=_lineage(entries, now, then),
        best_changes=_best_changes(entries, now, then),
        lessons_lost=lost,
        base_commit=tip,
        already_on_base=sorted({c.id for c in landed if id(c) not in shared}),
    )


def _landed(pr: Changes, on_base: Changes | None) -> list[ExperimentChange]:
    """The changes of the branch that the base branch made too since the merge base
    (merged before, as a squash merge does): the same experiment added or corrected in
    the same file with the same fields and sections, or the same experiment removed."""
    if on_base is None:
        return []
    # lazy: not every command that imports this module needs kexp.storage.history
    from kexp.storage.history import diff_fields, field_values

    theirs = {c.id: c for c in on_base}
    found: list[ExperimentChange] = []
    for change in pr:
        other = theirs.get(change.id)
        if other is None:
            continue
        if change.kind == "removed":
            if other.kind == "removed":
                found.append(change)
            continue
        mine, its = change.after, other.after
        if (
            mine is not None
            and its is not None
            and mine.document is not None
            and its.document is not None
            and str(mine.path) == str(its.path)
            and not diff_fields(field_values(mine.document), field_values(its.document))
        ):
            found.append(change)
    return found


def _shared(
    store: Store, landed: list[ExperimentChange], fork: str, tip: str, head: str
) -> set[int]:
    """The changes of ``landed`` (the same on the base branch's tip) that are no change
    of the branch at all: after a criss-cross merge, those another merge base than
    ``fork`` (the one git picked) holds as the branch does, as the merge CI reviews
    shows them (by ``id()``)."""
    if not landed:
        return set()
    # lazy: not every command that imports this module needs kexp.gitops.git
    from kexp.gitops import git as kgit
    from kexp.storage.history import diff_fields, field_values
    from kexp.storage.snapshot import StoreLocation

    others = [
        c for c in kgit.merge_bases(StoreLocation.of(store.root).repo, tip, head) if c != fork
    ]
    found: set[int] = set()
    for other in others:
        left = [c for c in landed if id(c) not in found]
        if not left:
            break
        paths = [c.path if c.after is None else c.after.path for c in left]
        held = store.at(other).check_files(paths)
        for change, item in zip(left, held, strict=True):
            if change.kind == "removed":
                same = [p.code for p in item.problems] == ["not-in-revision"]
            else:
                mine = change.after
                same = (
                    item.document is not None
                    and mine is not None
                    and mine.document is not None
                    and not diff_fields(field_values(item.document), field_values(mine.document))
                )
            if same:
                found.add(id(change))
    return found


def _held_on_tip(changes: Changes, on_base: Changes | None) -> Changes:
    """``changes`` with each addition of an experiment the base branch's tip holds (it
    added it since the merge base) made a correction of the tip's version: as merging
    the branch into the tip shows it, whichever merge base git picked (after a
    criss-cross merge, one that lacks it) or when the tip holds it by a squash merge."""
    if on_base is None or not changes.added:
        return changes
    # lazy: not every command that imports this module needs kexp.storage.history
    from kexp.storage.history import ExperimentChange, diff_fields, field_values

    on_tip = {c.id: c.after for c in on_base.added if c.after is not None}
    files = Counter(c.id for c in changes.added)
    added: list[ExperimentChange] = []
    modified = list(changes.modified)
    for change in changes.added:
        its, mine = on_tip.get(change.id), change.after
        if its is None or mine is None:
            added.append(change)
            continue
        same_path = str(its.path) == str(mine.path)
        if not same_path and files[change.id] > 1:  # another file of the id is its own
            added.append(change)
            continue
        fields = (
            diff_fields(field_values(its.document), field_values(mine.document))
            if its.document is not None and mine.document is not None
            else {}
        )
        old_path = None if same_path else its.path
        modified.append(
            ExperimentChange(change.id, "modified", change.path, old_path, its, mine, fields)
        )
    modified.sort(key=lambda c: (c.id, str(c.path)))
    return dataclasses.replace(changes, added=added, modified=modified)


def _best_changes(
    entries: Mapping[str, list[_Reviewed]], now: _Side, then: _Side
) -> list[BestChange]:
    """The campaigns touched whose best tip moved (another one, or another cumulative
    score) other than by a new best the review calls out already."""
    celebrated = {campaign_of(entry) for entry, _ in entries["added"] if entry.new_best}
    celebrated |= {campaign_of(entry) for entry, _ in entries["corrected"] if entry.new_best}
    campaigns = sorted(
        {campaign_of(entry) for kind in KINDS for entry, _ in entries[kind] if entry.valid}
        - celebrated
    )
    found: list[BestChange] = []
    for campaign in campaigns:
        before, after = then.best_on(campaign), now.best_on(campaign)
        if before is None and after is None:
            continue
        old = None if before is None else before.cumulative_score
        new = None if after is None else after.cumulative_score
        if (before and before.id) != (after and after.id) or old != new:
            operator, dtype, env = campaign
            found.append(
                BestChange(
                    operator,
                    None if before is None else before.id,
                    old,
                    None if after is None else after.id,
                    new,
                    dtype,
                    env,
                )
            )
    return found


def _changed_on_base(on_base: Changes, touched: Mapping[str, ReviewedExperiment]) -> None:
    """Mark the ``touched`` experiments (corrected or removed by the change) that the
    base branch corrected or removed too since the merge base (``on_base``: what it
    changed since)."""
    for kind, group in (("corrected", on_base.modified), ("removed", on_base.removed)):
        for change in group:
            entry = touched.get(change.id)
            if entry is not None:
                entry.base_kind = kind
                entry.base_changes = [
                    _field_change(name, old, new) for name, (old, new) in change.fields.items()
                ]


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

    Of most, only their :class:`Facts` are kept; an experiment is made of them when it
    is asked for (its long texts empty). The experiments the change touches are
    ``whole`` (by their number in ``facts``); ``read(path)`` reads another one whole.
    What is derived of each (outcome, interference, cumulative score) is derived among
    the side's experiments, as the store's queries do (:func:`kexp.core.campaign.derive`).
    """

    def __init__(
        self,
        facts: list[Facts],
        whole: Mapping[int, KernelExperiment],
        settings: Settings,
        read: Callable[[str], KernelExperiment | None],
    ) -> None:
        self.facts = facts
        self.settings = settings
        self._read = read
        self._versions = versions_of(facts)
        #: The number of the first experiment of each id.
        self.first: dict[str, int] = self._versions.first
        self._derived: dict[int, Derived] = {}
        self._whole = dict(whole)
        self._derive(self._whole)
        for number, exp in self._whole.items():
            attach(exp, derived=self._derived[number])
        self._by_path = {facts[number].path: number for number in self._whole}
        self._made: dict[int, KernelExperiment] = {}
        self._children: dict[str, list[int]] | None = None
        self._children_sorted: set[str] = set()
        self._scored: dict[Campaign, list[tuple[Any, int]]] = {}

    def _derive(self, numbers: Iterable[int]) -> None:
        """Derive the experiments ``numbers`` (those not derived yet), over them and what
        they depend on (:func:`kexp.core.campaign.derive_for`): as over the whole side."""
        wanted = [number for number in numbers if number not in self._derived]
        if not wanted:
            return
        facts = self.facts
        derivation = derive_for(
            facts, [facts[number] for number in wanted], self.settings, self._versions
        )
        for number in wanted:
            self._derived[number] = derivation.of(facts[number])

    def derived(self, number: int) -> Derived:
        """What is derived of the experiment ``number``."""
        self._derive((number,))
        return self._derived[number]

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
            dtype_sig=item.dtype_sig,
            env=item.env,
            status=item.status,
            created_at=item.created_at,
            combines=_ids(item.combines),
            score_ci=list(item.score_ci or ()),
            measured_against=item.measured_against or "",
            tags=list(item.tags or ()),
        )
        return attach(exp, self.settings, path=Path(item.path), derived=self.derived(number))

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
        return attach(exp, self.settings, derived=self.derived(number))

    def at_path(self, path: str) -> KernelExperiment | None:
        """The experiment the change touches in the file ``path`` (None: not valid)."""
        number = self._by_path.get(path)
        return None if number is None else self._whole[number]

    def children(self, exp_id: str) -> list[int]:
        """The numbers of the experiments whose ``pid`` is ``exp_id``, oldest first."""
        if self._children is None:
            self._children = self._children_index()
        found = self._children.get(exp_id, [])
        if exp_id not in self._children_sorted:
            facts = self.facts
            # oldest first, in time order whatever the precision; ties: path order
            found.sort(key=lambda n: (time_key(facts[n].created_at), facts[n].id))
            self._children_sorted.add(exp_id)
        return found

    @collector_paused()  # a list a parent, none in a cycle
    def _children_index(self) -> dict[str, list[int]]:
        """Each parent's children, in path order (sorted by time when asked for)."""
        index: dict[str, list[int]] = {}
        for number, item in enumerate(self.facts):
            if item.pid:
                index.setdefault(item.pid, []).append(number)
        return index

    def scored_on(self, campaign: Campaign) -> list[tuple[tuple[bool, Any], int]]:
        """(rank key, number) of the ranked experiments of ``campaign`` (exact
        ``operator_sig``, ``dtype_sig`` and ``env``: scored, not a control, a cumulative
        score known), in order; the rank key is ``kexp top``'s (whether the step
        improved, its cumulative score)."""
        found = self._scored.get(campaign)
        if found is None:
            on = [n for n, item in enumerate(self.facts) if campaign_of(item) == campaign]
            self._derive(on)
            derived = self._derived
            found = self._scored[campaign] = [
                ((derived[number].can_be_best, derived[number].cumulative_score), number)
                for number in on
                if derived[number].ranked
                and is_scored(self._whole.get(number) or self._light(number))
            ]
        return found

    def best_on(self, campaign: Campaign) -> KernelExperiment | None:
        """The current best of ``campaign``: the best tip (the best cumulative score of a
        step that improved, :func:`kexp.storage.query.best_tip`) whose measurement is
        believable (:func:`kexp.storage.query.believable_best`); None when there is none."""
        improved = [(key[1], number) for key, number in self.scored_on(campaign) if key[0]]
        improved.sort(key=lambda e: -float(e[0]))  # best first; ties: the first listed
        found = believable_best([number for _, number in improved], self._suspect)[0]
        return None if found is None else self.experiment(found)

    def _suspect(self, number: int) -> list[str]:
        """Why the measurement of the experiment ``number`` is implausible: of its score
        alone, else of it read whole (its results and protocol are not in its facts)."""
        exp = self.experiment(number)
        reasons = suspect_reasons(exp, self.settings)
        if reasons or number in self._whole:
            return reasons
        whole = self._read(self.facts[number].path)
        return [] if whole is None else suspect_reasons(whole, self.settings)


#: A campaign: operator × dtype × env (``operator_sig``, ``dtype_sig``, ``env``), as
#: the report's frontier and ``kexp context`` keep one best per campaign.
Campaign = tuple[str, str, str]


def campaign_of(item: Any) -> Campaign:
    """The campaign of an experiment, its :class:`Facts` or a reviewed entry."""
    return (item.operator_sig, item.dtype_sig, item.env)


def _ids(combines: Iterable[str | None]) -> list[str]:
    return [c for c in combines if c is not None]


@collector_paused()  # the facts of every experiment, none in a cycle
def _sides(
    scan: HeadScan, pr: Changes, kept: Changes, on_base: Changes | None
) -> tuple[_Side, _Side, dict[str, str]]:
    """The experiments after and before the change, as merging the branch into the base
    branch's tip gives them: the tip's, plus what the branch adds or corrects (``kept``:
    its changes less those on the tip already), less what it removes; and the tip's.
    Also where each file the base branch moved since the merge base is now.

    Neither side is read again: the merge base's store is the head's (``scan``) less
    what the branch (``pr``) added or corrected, plus what it removed or corrected as it
    was; the tip's is that less what the base branch changed since (``on_base``; None:
    nothing, the tip is the merge base), plus those files as they are on the tip.
    """
    target = scan.target
    settings = target.settings
    on_tip: dict[str, CheckedFile] = {}  # the files the base branch changed, as on its tip
    moved: dict[str, str] = {}  # the base branch's moves: path at the merge base -> now
    gone: set[str] = set()  # the paths the base branch changed, removed or moved away
    if on_base is not None:
        for change in on_base:
            if change.before is not None:
                gone.add(str(change.before.path))
            if change.after is not None:
                gone.add(str(change.after.path))
                on_tip[str(change.after.path)] = change.after
            if change.old_path is not None:
                moved[str(change.old_path)] = str(change.path)

    def whole(item: CheckedFile) -> KernelExperiment:
        return attach(item.experiment(), settings, path=item.path)

    def read(path: str) -> KernelExperiment | None:
        item = on_tip.get(path) or target.check_file(path)
        return whole(item) if item.ok else None

    def side(facts: list[Facts], items: Mapping[str, CheckedFile]) -> _Side:
        numbers = {
            number: whole(items[item.path])
            for number, item in enumerate(facts)
            if item.path in items and items[item.path].ok
        }
        return _Side(facts, numbers, settings, read)

    def valid(items: Iterable[CheckedFile]) -> list[Facts]:
        return [
            facts_of(links_of(item), item.document.fields)
            for item in items
            if item.ok and item.document is not None
        ]

    after = [c.after for c in [*pr.added, *pr.modified] if c.after is not None]
    before = [c.before for c in [*pr.modified, *pr.removed] if c.before is not None]
    changed_now = {str(item.path) for item in after}
    facts = [item for item in scan.valid if item.path not in changed_now] + valid(before)
    if on_base is not None:
        facts = [item for item in facts if item.path not in gone] + valid(on_tip.values())
        facts.sort(key=_listed)  # as the tip lists them (ties of the best go to the first)
    # The tip's versions of what the branch corrects or removes (those it left alone).
    was: dict[str, CheckedFile] = {}
    for item in [c.before for c in [*kept.modified, *kept.removed] if c.before is not None]:
        path = str(item.path)
        if moved.get(path, path) in on_tip:
            was[moved.get(path, path)] = on_tip[moved.get(path, path)]
        elif path not in gone:
            was[path] = item
    then = side(facts, was)
    mine = {str(c.after.path): c.after for c in [*kept.added, *kept.modified] if c.after}
    if on_base is None:  # the merge is the head
        return side(scan.valid, mine), then, moved
    drop = set(mine)
    for item in [c.before for c in [*kept.modified, *kept.removed] if c.before is not None]:
        drop |= {str(item.path), moved.get(str(item.path), str(item.path))}
    merged = [item for item in facts if item.path not in drop] + valid(mine.values())
    del facts
    merged.sort(key=_listed)
    return side(merged, mine), then, moved


def _listed(item: Facts) -> str:
    """The key that sorts experiments as a store lists them (:func:`path_order`)."""
    return path_order(item.path)


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
        if checked.document is None:
            # Unreadable (conflict markers, bad YAML): its fields are not "absent", its
            # problems say why none could be read.
            entry.changes = []
        fields = checked.document.fields if checked.document is not None else {}
        entry.change_summary = _text(fields.get("change_summary"))
        entry.operator_sig = _text(fields.get("operator_sig"))
        entry.dtype_sig = _text(fields.get("dtype_sig"))
        entry.env = _text(fields.get("env"))
        entry.pid = _text(fields.get("pid"))
        score = fields.get("score")
        if isinstance(score, (int, float)) and not isinstance(score, bool):
            entry.score = float(score)
        return entry
    entry.change_summary = exp.change_summary
    entry.operator_sig = exp.operator_sig
    entry.dtype_sig = exp.dtype_sig
    entry.env = exp.env
    entry.score = float(exp.score)
    entry.outcome = exp.outcome
    entry.status = exp.status
    entry.control = is_control(exp)
    entry.pid = exp.pid
    entry.key_insight = key_insight(exp.detailed_description)
    entry.score_ci = list(exp.score_ci) if len(exp.score_ci) == 2 else None
    entry.measured = _measured(exp)
    entry.measured_against = exp.measured_against
    cumulative = exp.cumulative_score
    entry.cumulative_score = cumulative
    entry.cumulative_ci = None if exp.cumulative_ci is None else list(exp.cumulative_ci)
    entry.cumulative_reason = exp.cumulative_reason
    parent = side.get(exp.pid) if exp.pid else None
    if parent is not None:
        entry.parent_score = float(parent.score)
        before = parent.cumulative_score
        if cumulative is not None and before is not None:
            # The change of the speedup over the reference: for a step measured against
            # its parent, the step itself.
            entry.delta, entry.delta_pct = cumulative_change(before, cumulative)
            if before > 0:
                if measured_against_parent(exp) and entry.score_ci:
                    entry.delta_pct_ci = [change_percent(v) for v in entry.score_ci]
                elif exp.cumulative_ci is not None and parent.cumulative_ci is not None:
                    low, high = rounded_interval(  # outwards: it holds the change said
                        *ratio_interval(cumulative, exp.cumulative_ci, before, parent.cumulative_ci)
                    )
                    entry.delta_pct_ci = [change_percent(low), change_percent(high)]
    if is_scored(exp) and exp.derived.ranked and cumulative is not None:
        rivals = side.scored_on(campaign_of(exp))
        mine = (exp.derived.can_be_best, cumulative)
        entry.rank = 1 + sum(1 for key, _ in rivals if key > mine)
        entry.rank_of = len(rivals)
    if (
        kind != "removed"
        and entry.rank is not None
        and cumulative is not None
        and exp.derived.can_be_best  # a step within noise is never a new best
    ):
        # The current best is the best tip whose measurement is believable (a suspect
        # one above it is no best until checked): a believable step that is it, or a
        # suspect one above it, is measured against the best before.
        current = side.best_on(campaign_of(exp))
        reasons = suspect_reasons(exp, exp.settings)
        if current is None:
            ahead = True
        elif reasons:
            ahead = cumulative > (current.cumulative_score or 0.0)
        else:
            ahead = cumulative >= (current.cumulative_score or 0.0)
        previous = then.best_on(campaign_of(exp)) if ahead else None
        if previous is not None:
            entry.previous_best_id = previous.id
            entry.previous_best_score = float(previous.score)
            entry.previous_best_cumulative = previous.cumulative_score
        best = ahead and (
            previous is None
            or (
                (previous.id != exp.id or bool(reasons))
                and cumulative > (previous.cumulative_score or 0.0)
            )
        )
        if best and reasons:
            entry.suspect = reasons  # never celebrated: verify correctness first
        else:
            entry.new_best = best
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
    text = value if isinstance(value, str) else short_value(value)
    return "\n" in text or len(text) > LONG_VALUE_CHARS


def _as_lines(value: Any) -> list[str]:
    if value is None:
        return []
    if isinstance(value, str):
        return value.splitlines()
    return json.dumps(value, indent=2, ensure_ascii=False).splitlines()


def _new_lessons(
    entries: Mapping[str, list[_Reviewed]], then: _Side, lost: set[str]
) -> list[KernelExperiment]:
    """Added failures, and corrected experiments that became a failure (or another kind
    of failure, or whose key insight changed), but for those whose lesson is ``lost``."""
    found: list[KernelExperiment] = []
    for entry, exp in [*entries["added"], *entries["corrected"]]:
        if exp is None or exp.outcome not in LESSON_GROUPS or entry.id in lost:
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


def _lost_lessons(entries: Mapping[str, list[_Reviewed]], then: _Side) -> list[LostLesson]:
    """The failures (not controls) the change removes, and those whose key insight a
    correction removes while they stay the same kind of failure."""
    lost: list[LostLesson] = []
    for _, exp in entries["removed"]:
        if exp is not None and exp.outcome in LESSON_GROUPS and not is_control(exp):
            lost.append(_lost(exp, "removed"))
    for entry, exp in entries["corrected"]:
        old = then.whole(entry.id) if exp is not None else None
        if (
            old is not None
            and exp is not None
            and old.outcome in LESSON_GROUPS
            and exp.outcome == old.outcome
            and not is_control(old)
            and key_insight(old.detailed_description)
            and not entry.key_insight
        ):
            lost.append(_lost(old, "key insight removed"))
    return lost


def _lost(exp: KernelExperiment, how: str) -> LostLesson:
    return LostLesson(
        exp.id, how, exp.outcome, exp.change_summary, key_insight(exp.detailed_description)
    )


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
            exp.id,
            exp.pid,
            kind,
            float(exp.score),
            exp.outcome,
            exp.change_summary,
            new_best,
            exp.status,
        )
        return True

    touched: list[tuple[KernelExperiment, _Side]] = []
    for kind in KINDS:
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
