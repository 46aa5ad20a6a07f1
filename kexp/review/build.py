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

This module builds the review and is its public face: the names of the modules above are
importable from it, as they were when it held them all. The two sides of the change are
:mod:`kexp.review.side`, one changed file as a reviewer sees it :mod:`kexp.review.entry`,
and what the review calls out over the whole change :mod:`kexp.review.headlines`.
"""

from __future__ import annotations

import dataclasses
from collections import Counter
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING

from kexp.agents.lessons import group_lessons
from kexp.core.problems import Problem
from kexp.review.entry import Reviewed, field_change, reviewed_entry
from kexp.review.graph import LineageGraph, LineageNode, render_mermaid
from kexp.review.graph import mermaid_id as mermaid_id
from kexp.review.graph import mermaid_text as mermaid_text
from kexp.review.headlines import (
    best_changes,
    control_demotions,
    lineage_graph,
    lost_lessons,
    new_lessons,
)
from kexp.review.model import KINDS, BehindBase, FieldChange, Review, ReviewedExperiment
from kexp.review.render import COMMENT_MARKER as COMMENT_MARKER
from kexp.review.render import defuse_links as defuse_links
from kexp.review.render import md_block as md_block
from kexp.review.render import md_code as md_code
from kexp.review.render import md_text as md_text
from kexp.review.render import render_markdown, to_json
from kexp.review.side import campaign_of, sides
from kexp.review.tried import mark_tried_before
from kexp.storage.changed import (
    STORE_WIDE_CODES,
    ChangeCheck,
    check_and_scan,
    check_changes,
    head_of,
    validate_changed,
)
from kexp.storage.changed import merge_base as merge_base
from kexp.storage.scorechange import SCORE_WITHOUT_NOTE, unexplained_score

if TYPE_CHECKING:
    from kexp.core.model import KernelExperiment
    from kexp.format.validate import CheckedFile
    from kexp.storage.history import Changes, ExperimentChange
    from kexp.storage.snapshot import StoreLocation
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
    behind = _behind(check.changes, on_base)
    ours = {id(c) for c in landed} | {id(c) for c, _ in behind}
    changes = dataclasses.replace(
        check.changes,
        added=[c for c in check.changes.added if id(c) not in ours],
        modified=[c for c in check.changes.modified if id(c) not in ours],
        removed=[c for c in check.changes.removed if id(c) not in ours],
    )
    changes = _held_on_tip(changes, on_base)
    # A correction of the tip's version (held on the tip): its score checked as check_changes
    # checks the branch's corrections.
    theirs = {id(m) for m in check.changes.modified}
    held = [c for c in changes.modified if id(c) not in theirs]
    tip_problems = _unexplained_on_tip(held, base, location)
    now, then, at_tip = sides(scan, check.changes, changes, on_base)
    del scan

    def relative(path: Path | None) -> str | None:
        if path is None:
            return None
        return location.repo_path(path) or str(path)

    # A file moved and nothing else: listed as moved, never as a correction.
    moved = [
        reviewed_entry("moved", change, change.after, now.at_path(str(change.after.path)), now,
                       then, relative)
        for change in changes.modified
        if change.moved_only and change.after is not None
    ]  # fmt: skip
    corrected = [change for change in changes.modified if not change.moved_only]
    found: list[tuple[str, ExperimentChange, CheckedFile, KernelExperiment | None]] = []
    for kind, group in zip(KINDS, (changes.added, corrected, changes.removed), strict=True):
        for change in group:
            checked = change.before if kind == "removed" else change.after
            assert checked is not None
            path = str(checked.path)
            if kind == "removed":
                found.append((kind, change, checked, then.at_path(at_tip.get(path, path))))
            else:
                found.append((kind, change, checked, now.at_path(path)))
    # Each campaign touched is ranked on both sides: asked of all at once.
    campaigns = sorted({campaign_of(exp) for *_, exp in found if exp is not None})
    now.prime(campaigns)
    then.prime(campaigns)
    entries: dict[str, list[Reviewed]] = {kind: [] for kind in KINDS}
    for kind, change, checked, exp in found:
        side = then if kind == "removed" else now
        entry = reviewed_entry(kind, change, checked, exp, side, then, relative)
        entries[kind].append((entry, exp))

    for kind in KINDS:
        for entry, _ in entries[kind]:
            entry.problems = _relative_problems(entry.problems, relative)
    mark_tried_before(store, tip, entries["added"], then)
    _put_back(store, tip, entries["corrected"])
    touched = {entry.id: entry for entry, _ in [*entries["corrected"], *entries["removed"]]}
    if touched and on_base is not None:
        _changed_on_base(on_base, touched)
    lost = lost_lessons(entries, then)
    lessons = group_lessons(new_lessons(entries, then, {item.id for item in lost}))
    landed_paths = {
        str(c.after.path) for c in [*landed, *(c for c, _ in behind)] if c.after is not None
    }
    return Review(
        base=base,
        merge_base=check.merge_base,
        head=head,
        head_commit=head_commit,
        added=[entry for entry, _ in entries["added"]],
        corrected=[entry for entry, _ in entries["corrected"]],
        removed=[entry for entry, _ in entries["removed"]],
        file_problems=_relative_problems(
            [p for p in [*check.file_problems, *tip_problems] if p.path not in landed_paths],
            relative,
        ),
        store_problems=_relative_problems(check.caused, relative),
        preexisting_store_problems=_relative_problems(
            [p for p in check.store_problems if p not in check.caused], relative
        ),
        lessons={group: items for group, items in lessons.items() if items},
        lineage=lineage_graph(entries, now, then),
        best_changes=best_changes(entries, now, then),
        demoted_by_control=control_demotions(entries, now, then),
        lessons_lost=lost,
        base_commit=tip,
        already_on_base=sorted({c.id for c in landed if id(c) not in shared}),
        moved=moved,
        behind_base=[
            BehindBase(
                change.id,
                relative(change.path) or str(change.path),
                summary,
                [field_change(name, old, new) for name, (old, new) in change.fields.items()],
            )
            for _, (change, summary) in behind
        ],
    )


def _put_back(store: Store, tip: str, corrected: Iterable[Reviewed]) -> None:
    """Mark each correction whose score, changed without a note, is the value the base
    side's last change of the score (in the history of ``tip``) replaced: a revert, or a
    correction dropped, puts it back; the commit it undoes is no author's edit to ask
    about."""
    # lazy: not every command that imports this module needs kexp.storage.history
    from kexp.core.errors import KexpError
    from kexp.storage.history import history

    for entry, _ in corrected:
        score = next((c for c in entry.changes if c.field == "score"), None)
        if score is None or not any(p.code == SCORE_WITHOUT_NOTE for p in entry.problems):
            continue
        try:
            past = history(store, entry.id, revision=tip)
        except KexpError:  # not in the base side's history: nothing to put back
            continue
        last = next((step for step in reversed(past) if "score" in step.changes), None)
        if last is not None and _same_score(last.changes["score"][0], score.new):
            entry.puts_back, entry.puts_back_subject = last.commit, last.summary


def _same_score(old: object, new: object) -> bool:
    """Whether two front-matter scores are one number."""
    numbers = (int, float)
    if isinstance(old, bool) or isinstance(new, bool):
        return False
    return isinstance(old, numbers) and isinstance(new, numbers) and float(old) == float(new)


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


def _behind(
    pr: Changes, on_base: Changes | None
) -> list[tuple[ExperimentChange, tuple[ExperimentChange, str]]]:
    """The branch's additions of an experiment that the base branch added too since the
    merge base, in the same file, corrected since: its version holds every correction
    note of the branch's and more, and each field the two differ in (but the description
    the notes are in) is named by one of those notes (squash-merged, then corrected).
    Each with the correction the base made (the branch's version before, the tip's
    after) and the tip's change_summary."""
    if on_base is None or not pr.added:
        return []
    # lazy: not every command that imports this module needs kexp.storage.history,
    # kexp.storage.dropped
    from kexp.storage.dropped import correction_notes
    from kexp.storage.history import ExperimentChange, diff_fields, field_values

    theirs = {c.id: c.after for c in on_base.added if c.after is not None}
    found: list[tuple[ExperimentChange, tuple[ExperimentChange, str]]] = []
    for change in pr.added:
        mine, its = change.after, theirs.get(change.id)
        if mine is None or its is None or mine.document is None or its.document is None:
            continue
        if str(mine.path) != str(its.path):
            continue
        mine_notes, its_notes = correction_notes(mine.document), correction_notes(its.document)
        extra = [note for note in its_notes if note not in mine_notes]
        if not extra or any(note not in its_notes for note in mine_notes):
            continue
        fields = diff_fields(field_values(mine.document), field_values(its.document))
        said = " ".join(extra)
        if all(name == "detailed_description" or f"{name} " in said for name in fields):
            base = ExperimentChange(change.id, "modified", change.path, None, mine, its, fields)
            found.append((change, (base, str(its.document.fields.get("change_summary") or ""))))
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


def _unexplained_on_tip(
    held: Iterable[ExperimentChange], base: str, location: StoreLocation
) -> list[Problem]:
    """The :func:`~kexp.storage.scorechange.unexplained_score` warnings of the corrections
    ``held`` of versions the base branch's tip holds (:func:`_held_on_tip`), added to
    their files' problems too."""
    found: list[Problem] = []
    for change in held:
        before, after = change.before, change.after
        if before is None or after is None or before.document is None or after.document is None:
            continue
        where = location.repo_path(before.path) or str(before.path)
        moved = location.repo_path(after.path) or str(after.path)
        problem = unexplained_score(
            before.document, after.document, str(after.path), base, where, moved
        )
        if problem is not None and problem not in after.problems:
            after.problems.append(problem)
            found.append(problem)
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
                    field_change(name, old, new) for name, (old, new) in change.fields.items()
                ]


def _relative_problems(
    problems: Iterable[Problem], relative: Callable[[Path | None], str | None]
) -> list[Problem]:
    """``problems`` with their paths relative to the repository root, as a comment on
    the pull request shows them wherever the review ran."""
    return [dataclasses.replace(p, path=relative(Path(p.path)) or p.path) for p in problems]
