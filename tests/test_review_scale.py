"""``kexp validate --changed`` and ``kexp review`` stream the store: the same problems
and the same review as before, flat memory.

``check_changes`` used to read every file of the store into a whole document, and keep
them all, with every valid experiment of both sides of the change (1.7 GB at 100,000
files). It now keeps of each file what the store-wide checks need (and, for a review, a
few front-matter values of each valid experiment), and reads whole only the changed
files. These tests hold it to what the old way reported (kept below as the reference, as
it was), on real stores in real git repositories: duplicate ids (one in the change, one
outside), dangling pid and combines, lineage cycles, broken files, warnings, files
added, corrected, removed and moved; in the working tree, at a revision, split between
two processes; as data, as the command prints it, and the memory it takes.
"""

from __future__ import annotations

import dataclasses
import json
import os
import re
import shutil
import subprocess
import sys
from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path

import pytest

from kexp import KernelExperiment, Store
from kexp.agents.lessons import LESSON_GROUPS, group_lessons
from kexp.core.campaign import derive
from kexp.core.cumulative import change_percent, cumulative_change
from kexp.core.model import attach
from kexp.core.noise import ratio_interval, rounded_interval
from kexp.core.outcome import measured_against_parent
from kexp.core.problems import Problem, format_problems, sort_problems
from kexp.format.fileformat import key_insight
from kexp.format.filelinks import FileLinks
from kexp.format.rules import id_from_name
from kexp.format.storechecks import moved_problem
from kexp.format.suspect import suspect_reasons
from kexp.format.validate import CheckedFile, check_bytes
from kexp.review.build import (
    LineageGraph,
    LineageNode,
    Review,
    ReviewedExperiment,
    _relative_problems,
    check_changes,
    merge_base,
    render_markdown,
    review,
    to_json,
)
from kexp.review.entry import as_text, field_change
from kexp.review.headlines import MAX_GRAPH_NODES, MAX_RELATIVES
from kexp.review.model import BestChange, LostLesson
from kexp.storage.caused import (
    added_files,
    copied_by_change,
    removed_by_change,
    removed_files,
)
from kexp.storage.changed import head_of
from kexp.storage.history import Changes, ExperimentChange
from kexp.storage.lineage import build_forest, is_scored
from kexp.storage.scorechange import add_unexplained_scores
from kexp.storage.snapshot import StoreLocation
from tests.conftest import git, past_racy_window, run_kexp
from tests.test_validate_scale import (
    NOWHERE,
    A,
    B,
    C,
    D,
    E,
    G,
    H,
    J,
    K,
    L,
    U,
    V,
    experiment,
    fill,
    hex_id,
    messy_store,
    reference_check_store,
    reference_validate,
    write,
)

# --- the reference: check_changes and review as they were (whole documents kept) ---------


@dataclasses.dataclass
class ReferenceCheck:
    """What ``check_changes`` returned before it streamed."""

    merge_base: str
    head: str | None
    changes: Changes
    file_problems: list[Problem]
    store_problems: list[Problem]
    caused: list[Problem]
    head_experiments: list[KernelExperiment]
    base_experiments: list[KernelExperiment]

    @property
    def changed_paths(self) -> list[Path]:
        return [c.path for c in [*self.changes.added, *self.changes.modified]]

    @property
    def problems(self) -> list[Problem]:
        return sort_problems(dict.fromkeys([*self.file_problems, *self.store_problems]))


def reference_check_changes(store: Store, base: str, head: str | None = None) -> ReferenceCheck:
    """``kexp.review.build.check_changes`` as it was: every file of the store checked whole."""
    from kexp.gitops.provenance import base_commit_problems

    head = head_of(store, head)
    fork = merge_base(store, base, head)
    changes = store.changes(fork, head)
    target = store if head is None else store.at(head)
    checked = target.check_files()
    location = StoreLocation.of(store.root)

    def in_repo(path: Path) -> str:
        return location.repo_path(path) or str(path)

    add_unexplained_scores(changes, base, in_repo)  # a score changed by hand, as said
    _reference_add_folded(store, fork, changes, checked)
    after = [c.after for c in [*changes.added, *changes.modified] if c.after is not None]
    file_problems = [p for item in after for p in item.problems]
    file_problems += base_commit_problems(after, target.code_repo)
    file_problems += [  # a file moved from where kexp put it (not to the other layout)
        moved_problem(str(c.path), in_repo(c.old_path), in_repo(c.path))
        for c in changes.modified
        if c.old_path is not None and _moved_by_hand(store, c.id, c.old_path, c.path)
    ]

    head_sw = reference_check_store(checked, _id_index(checked))
    changed_now = {str(item.path) for item in after}
    before = [c.before for c in [*changes.modified, *changes.removed] if c.before is not None]
    base_checked = [c for c in checked if str(c.path) not in changed_now] + before
    moved = {str(c.old_path): str(c.path) for c in changes.modified if c.old_path is not None}
    base_sw = {
        _problem_key(p, moved) for p in reference_check_store(base_checked, _id_index(base_checked))
    }
    # A parent the change removed, said as check_changes says it.
    links = [FileLinks.of(str(c.path), c.document.fields if c.document else None) for c in checked]
    removals = removed_by_change(head_sw, links, removed_files(changes, in_repo), base)
    removals = copied_by_change(removals, links, added_files(changes))
    said = dict(zip(head_sw, removals, strict=True))
    caused = [said[p] for p in head_sw if _problem_key(p, {}) not in base_sw]
    head_sw = [said[p] if _problem_key(p, {}) not in base_sw else p for p in head_sw]
    return ReferenceCheck(
        merge_base=fork,
        head=head,
        changes=changes,
        file_problems=sort_problems(dict.fromkeys(file_problems)),
        store_problems=sort_problems(head_sw),
        caused=sort_problems(caused),
        head_experiments=_experiments(target, checked),
        base_experiments=_experiments(target, base_checked),
    )


def _reference_add_folded(
    store: Store, fork: str, changes: Changes, checked: Sequence[CheckedFile]
) -> None:
    from kexp.core.errors import StoreNotFoundError

    ids = {c.id for c in changes}
    listed = {str(c.path) for c in changes} | {str(c.old_path) for c in changes if c.old_path}
    candidates = [
        item for item in checked if id_from_name(item.path) in ids and str(item.path) not in listed
    ]
    if not candidates:
        return
    try:
        at_base = {str(p) for p in store.at(fork).paths()}
    except StoreNotFoundError:
        at_base = set()
    for item in candidates:
        if str(item.path) not in at_base:
            exp_id = id_from_name(item.path)
            assert exp_id is not None
            changes.added.append(ExperimentChange(exp_id, "added", item.path, None, None, item, {}))
    changes.added.sort(key=lambda c: str(c.path))


def _moved_by_hand(store: Store, exp_id: str, old: Path, new: Path) -> bool:
    """Whether a file moved from ``old``, in a month folder or its id's fan-out folder
    of one, to ``new``, not the same file in the other layout."""
    before = old.relative_to(store.experiments_dir).as_posix()
    after = new.relative_to(store.experiments_dir).as_posix()
    placed = re.fullmatch(rf"[0-9]{{4}}/[0-9]{{2}}/(?:{exp_id[-2:]}/)?{exp_id}[^/]*", before)
    other_layout = re.sub(rf"/{exp_id[-2:]}/", "/", after) == re.sub(
        rf"/{exp_id[-2:]}/", "/", before
    )
    return placed is not None and not other_layout


def _id_index(checked: Iterable[CheckedFile]) -> dict[str, list[Path]]:
    index: dict[str, list[Path]] = {}
    for item in checked:
        if item.document is not None and isinstance(item.document.fields.get("id"), str):
            index.setdefault(item.document.fields["id"], []).append(item.path)
    return index


def _problem_key(problem: Problem, moved: Mapping[str, str]) -> tuple[str, str, str, str]:
    path = moved.get(problem.path, problem.path)
    return (path, problem.code, problem.field, problem.message)


def _experiments(store: Store, checked: Iterable[CheckedFile]) -> list[KernelExperiment]:
    found: list[KernelExperiment] = []
    for item in checked:
        if item.ok:
            found.append(attach(item.experiment(), store.settings, path=item.path))
    derivation = derive(found, store.settings)
    for exp in found:
        attach(exp, derived=derivation.of(exp))
    return found


class _Side:
    """The old review's side of a change: every valid experiment, whole."""

    def __init__(self, experiments: list[KernelExperiment]) -> None:
        self.experiments = experiments
        self.by_path = {str(e.path): e for e in experiments}
        self.by_id: dict[str, KernelExperiment] = {}
        self.children: dict[str, list[KernelExperiment]] = {}
        for exp in experiments:
            self.by_id.setdefault(exp.id, exp)
        for exp in sorted(experiments, key=lambda e: (e.created_at, e.id)):
            if exp.pid:
                self.children.setdefault(exp.pid, []).append(exp)

    def scored_on(self, campaign: tuple[str, str, str]) -> list[KernelExperiment]:
        """The ranked experiments of a campaign: operator × dtype × env."""
        return [
            e
            for e in self.experiments
            if (e.operator_sig, e.dtype_sig, e.env) == campaign
            and is_scored(e)
            and e.derived.ranked
        ]

    def best_on(self, campaign: tuple[str, str, str]) -> KernelExperiment | None:
        """The best tip that is not suspect (a suspect one is no best until checked),
        nor built on a suspect step (suspect_reasons reads its derived built_on_suspect)."""
        improved = [
            e
            for e in self.scored_on(campaign)
            if e.outcome == "improvement" and not suspect_reasons(e, e.settings)
        ]
        return max(improved, key=lambda e: e.cumulative_score, default=None)


_KINDS = ("added", "corrected", "removed")
_Reviewed = tuple[ReviewedExperiment, "KernelExperiment | None"]


def reference_review(store: Store, base: str, head: str | None = None) -> Review:
    """``kexp.review.build.review`` as it was."""
    from kexp.gitops import git as kgit
    from kexp.storage.snapshot import StoreLocation

    head = head_of(store, head)
    check = reference_check_changes(store, base, head)
    location = StoreLocation.of(store.root)
    head_commit = kgit.resolve_commit(location.repo, head) if head is not None else None
    now = _Side(check.head_experiments)
    then = _Side(check.base_experiments)

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
            exp = side.by_path.get(str(checked.path))
            entries[kind].append((_entry(kind, change, checked, exp, side, then, relative), exp))
    for kind in _KINDS:
        for entry, _ in entries[kind]:
            entry.problems = _relative_problems(entry.problems, relative)
    lost = _lost_lessons(entries, then)
    lessons = group_lessons(_new_lessons(entries, then, {item.id for item in lost}))
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
        best_changes=_best_changes(entries, now, then),
        lessons_lost=lost,
    )


def _best_changes(entries: dict[str, list[_Reviewed]], now: _Side, then: _Side) -> list[BestChange]:
    """The touched campaigns (no new best among their entries) whose best tip moved."""
    found = []
    everything = [entry for kind in _KINDS for entry, _ in entries[kind]]
    for campaign in sorted({(e.operator_sig, e.dtype_sig, e.env) for e in everything if e.valid}):
        if any(e.new_best for e in everything if (e.operator_sig, e.dtype_sig, e.env) == campaign):
            continue
        before, after = then.best_on(campaign), now.best_on(campaign)
        old = (before.id, before.cumulative_score) if before else (None, None)
        new = (after.id, after.cumulative_score) if after else (None, None)
        if old != new:
            found.append(BestChange(campaign[0], *old, *new, *campaign[1:]))
    return found


def _entry(
    kind: str,
    change: ExperimentChange,
    checked: CheckedFile,
    exp: KernelExperiment | None,
    side: _Side,
    then: _Side,
    relative: Callable[[Path | None], str | None],
) -> ReviewedExperiment:
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
        changes=[field_change(name, old, new) for name, (old, new) in change.fields.items()],
        problems=sort_problems(checked.problems) if kind != "removed" else [],
    )
    if exp is None:
        fields = checked.document.fields if checked.document is not None else {}
        entry.change_summary = as_text(fields.get("change_summary"))
        entry.operator_sig = as_text(fields.get("operator_sig"))
        entry.dtype_sig = as_text(fields.get("dtype_sig"))
        entry.env = as_text(fields.get("env"))
        entry.pid = as_text(fields.get("pid"))
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
    entry.pid = exp.pid
    entry.key_insight = key_insight(exp.detailed_description)
    entry.score_ci = list(exp.score_ci) if len(exp.score_ci) == 2 else None
    entry.measured_against = exp.measured_against
    mine = exp.cumulative_score
    entry.cumulative_score = mine
    entry.cumulative_ci = None if exp.cumulative_ci is None else list(exp.cumulative_ci)
    entry.cumulative_reason = exp.cumulative_reason
    parent = side.by_id.get(exp.pid) if exp.pid else None
    if parent is not None:
        entry.parent_score = float(parent.score)
        theirs = parent.cumulative_score
        if mine is not None and theirs is not None:
            # (the deltas to the digits the scores carry, as the review now gives them)
            entry.delta, entry.delta_pct = cumulative_change(theirs, mine)
            if theirs > 0:
                if measured_against_parent(exp) and entry.score_ci:
                    entry.delta_pct_ci = [change_percent(v) for v in entry.score_ci]
                elif exp.cumulative_ci is not None and parent.cumulative_ci is not None:
                    low, high = rounded_interval(
                        *ratio_interval(mine, exp.cumulative_ci, theirs, parent.cumulative_ci)
                    )
                    entry.delta_pct_ci = [change_percent(low), change_percent(high)]
    if is_scored(exp) and exp.derived.ranked and mine is not None:
        rivals = side.scored_on((exp.operator_sig, exp.dtype_sig, exp.env))
        key = (exp.outcome == "improvement", mine)  # the steps that improved first
        entry.rank = 1 + sum(
            1 for e in rivals if (e.outcome == "improvement", e.cumulative_score or 0.0) > key
        )
        entry.rank_of = len(rivals)
        trees = build_forest(side.experiments)  # a dead end as kexp tree marks it
        entry.dead_end = any(n.dead_end for t in trees for n in t.walk() if n.experiment is exp)
    if (
        kind != "removed"
        and entry.rank is not None
        and mine is not None
        and exp.outcome == "improvement"
    ):
        # Against the current best, the best believable tip: a believable step that is
        # it, or a suspect one above it (no best until checked), against the best before.
        current = side.best_on((exp.operator_sig, exp.dtype_sig, exp.env))
        reasons = suspect_reasons(exp, exp.settings)
        now = None if current is None else current.cumulative_score or 0.0
        ahead = now is None or (mine > now if reasons else mine >= now)
        previous = then.best_on((exp.operator_sig, exp.dtype_sig, exp.env)) if ahead else None
        if previous is not None:
            entry.previous_best_id = previous.id
            entry.previous_best_score = float(previous.score)
            entry.previous_best_cumulative = previous.cumulative_score
        best = ahead and (
            previous is None
            or (
                (previous.id != exp.id or bool(reasons))
                and mine > (previous.cumulative_score or 0.0)
            )
        )
        if best and reasons:
            entry.suspect = reasons
        else:
            entry.new_best = best
    return entry


def _lost_lessons(entries: Mapping[str, list[_Reviewed]], then: _Side) -> list[LostLesson]:
    def lost(exp: KernelExperiment, how: str) -> LostLesson:
        insight = key_insight(exp.detailed_description)
        return LostLesson(exp.id, how, exp.outcome, exp.change_summary, insight)

    found = [
        lost(exp, "removed")
        for _, exp in entries["removed"]
        if exp is not None and exp.outcome in LESSON_GROUPS and "control" not in exp.tags
    ]
    for entry, exp in entries["corrected"]:
        old = then.by_id.get(entry.id)
        if (
            exp is not None
            and old is not None
            and old.outcome in LESSON_GROUPS
            and exp.outcome == old.outcome
            and "control" not in old.tags
            and key_insight(old.detailed_description)
            and not key_insight(exp.detailed_description)
        ):
            found.append(lost(old, "key insight removed"))
    return found


def _new_lessons(
    entries: Mapping[str, list[_Reviewed]], then: _Side, lost: set[str]
) -> list[KernelExperiment]:
    found: list[KernelExperiment] = []
    for entry, exp in [*entries["added"], *entries["corrected"]]:
        if exp is None or exp.outcome not in LESSON_GROUPS or entry.id in lost:
            continue
        if entry.kind == "corrected":
            old = then.by_id.get(entry.id)
            if (
                old is not None
                and old.outcome == exp.outcome
                and key_insight(old.detailed_description) == entry.key_insight
            ):
                continue
        found.append(exp)
    return found


def _lineage(entries: Mapping[str, list[_Reviewed]], now: _Side, then: _Side) -> LineageGraph:
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
    for kind in _KINDS:
        side = then if kind == "removed" else now
        for entry, exp in entries[kind]:
            if exp is not None and add(exp, kind, entry.new_best):
                touched.append((exp, side))
    for exp, side in touched:
        current, steps, seen = exp, 0, {exp.id}
        while current.pid and steps < MAX_RELATIVES:
            parent = side.by_id.get(current.pid) or now.by_id.get(current.pid)
            if parent is None or parent.id in seen:
                break
            seen.add(parent.id)
            add(parent, "context")
            current, steps = parent, steps + 1
    for exp, _ in touched:
        for child in now.children.get(exp.id, [])[:MAX_RELATIVES]:
            add(child, "context")
        omitted += max(0, len(now.children.get(exp.id, [])) - MAX_RELATIVES)
    edges = [(n.pid, n.id) for n in nodes.values() if n.pid in nodes and n.pid != n.id]
    return LineageGraph(list(nodes.values()), edges, omitted)


# --- comparing ---------------------------------------------------------------------------


def assert_same_check(store: Store, base: str, head: str | None = None) -> list[Problem]:
    """``check_changes`` equals the reference in everything a user sees of it; returns
    the problems (for the callers' own checks)."""
    found = check_changes(store, base, head)
    expected = reference_check_changes(store, base, head)
    assert found.problems == expected.problems
    assert found.file_problems == expected.file_problems
    assert found.store_problems == expected.store_problems
    assert found.caused == expected.caused
    assert found.changed_paths == expected.changed_paths
    assert (found.merge_base, found.head) == (expected.merge_base, expected.head)
    for kind in ("added", "modified", "removed"):
        ours, theirs = getattr(found.changes, kind), getattr(expected.changes, kind)
        assert [(c.id, str(c.path), str(c.old_path)) for c in ours] == [
            (c.id, str(c.path), str(c.old_path)) for c in theirs
        ]
    return found.problems


def assert_same_review(store: Store, base: str, head: str | None = None) -> Review:
    """``review`` equals the reference: the same data and the same comment."""
    found = review(store, base, head)
    expected = reference_review(store, base, head)
    assert to_json(found) == to_json(expected)
    assert render_markdown(found) == render_markdown(expected)
    return found


def codes(problems: Iterable[Problem]) -> set[str]:
    return {p.code for p in problems}


# --- a pull request on a store with every kind of problem --------------------------------


def scored(
    exp_id: str,
    score: float,
    *,
    pid: str = "''",
    operator: str = "csrc/kernels/other.cu: rms_norm",
    combines: str | None = None,
    extra_fields: str = "",
    insight: str = "",
    buggy: bool = False,
    created: str = "2026-11-29T15:52:36Z",
) -> str:
    """A canonical experiment on ``operator`` with ``score`` (and a key insight)."""
    body = "## Detailed description\n\n**Approach**: unroll by 4.\n"
    if insight:
        body += f"\n**Key insight**: {insight}\n"
    if buggy:
        body += "\n## Error message\n\nHIP error: an illegal memory access\n"
    text = experiment(exp_id, pid=pid, combines=combines, extra=extra_fields, body=body)
    text = text.replace("score: 1.019", f"score: {score}")
    # Scores over the operator's original code: the rank is the score's.
    text = text.replace("measured_against: parent", "measured_against: reference")
    text = text.replace(
        "operator_sig: 'csrc/kernels/cache_kernels.cu: reshape_and_cache_flash'",
        f"operator_sig: '{operator}'",
    )
    text = text.replace("created_at: '2026-11-29T15:52:36Z'", f"created_at: '{created}'")
    if buggy:
        text = text.replace("is_buggy: false", "is_buggy: true")
    return text


# Ids of the experiments on the second operator, and those the pull request adds.
R1, R2, R3, R4, R5, R6, R7 = (hex_id(0x6E00000000000000 + n) for n in range(7))
N1, N2, N3, N4, N5, N6, N7, N8, N9 = (hex_id(0x6E10000000000000 + n) for n in range(9))
NOWHERE3 = "cccc000000000003"


def commit(repo: Path, message: str) -> None:
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", message)


def on_main(repo: Path) -> dict[str, Path]:
    """The store on main: the messy store, and a lineage on a second operator."""
    files = messy_store(repo)
    lineage = [
        ("R1", R1, scored(R1, 1.0, created="2026-11-01T10:00:00Z")),
        ("R2", R2, scored(R2, 1.05, pid=R1, created="2026-11-02T10:00:00Z", insight="a")),
        ("R3", R3, scored(R3, 1.10, pid=R2, created="2026-11-03T10:00:00Z")),
        ("R4", R4, scored(R4, 0.97, pid=R2, created="2026-11-03T10:00:00Z", insight="b")),
        ("R5", R5, scored(R5, 1.08, pid=R3, combines=f"[{R3}, {R2}]")),  # interference
        ("R6", R6, scored(R6, 0.0, pid=R3, buggy=True, insight="it crashed")),
    ]
    for name, exp_id, text in lineage:
        files[name] = write(repo, f"2026/11/{exp_id}-rms.md", text)
    commit(repo, "the store on main")
    return files


def pull_request(repo: Path, files: dict[str, Path]) -> None:
    """What a branch does to the store (left uncommitted; the caller commits it)."""
    # corrected: a score (the best on its operator, still), a move, a lesson whose key
    # insight changed, a file whose id another unchanged file holds too (J: J1 and J2)
    path = files["R3"]
    path.write_text(path.read_text().replace("score: 1.1\n", "score: 1.3\n"))
    moved = repo / "experiments" / "2026" / "12" / files["R4"].name
    git(repo, "mv", str(files["R4"]), str(moved))
    moved.write_text(moved.read_text().replace("**Key insight**: b", "**Key insight**: c"))
    files["R4"] = moved
    files["J2"].write_text(
        scored(J, 0.9, pid=A, operator="csrc/kernels/other.cu: rms_norm", insight="slower")
    )
    # removed: a parent with children (R1), one file of a loop (F), the root A (its id
    # lives on in N, a copy)
    for name in ("R1", "F", "A"):
        files[name].unlink()
    # added: a duplicate of an untouched file's id (U), a dangling pid and combines, a
    # loop of two new files, a new best, a broken file, a warning, a lesson, a child of
    # R2 that combines R3, and a second file with the id of a file the branch adds (folded)
    new = {
        "dup": (f"2026/12/{U}-again.md", experiment(U, pid=B)),
        "N1": (f"2026/12/{N1}-orphan.md", scored(N1, 1.5, pid=NOWHERE3)),
        "N2": (f"2026/12/{N2}-combines.md", scored(N2, 1.0, combines=f"[{NOWHERE}, {R2}]")),
        "N3": (f"2026/12/{N3}-loop.md", scored(N3, 1.0, pid=N4)),
        "N4": (f"2026/12/{N4}-loop.md", scored(N4, 1.0, pid=N3)),
        "N5": (f"2026/12/{N5}-broken.md", scored(N5, 1.0).replace("env: MI300X", "env: 'MI")),
        "N6": (f"2026/12/{N6}-unknown.md", scored(N6, 1.0, extra_fields="gpu_count: 8")),
        "N7": (f"2026/12/{N7}-spills.md", scored(N7, 0.9, pid=R2, insight="it spills")),
        "N8": (f"2026/12/{N8}-combined.md", scored(N8, 1.2, pid=R2, combines=f"[{R3}]")),
        "N9": (f"2026/12/{N9}-first.md", scored(N9, 1.01, pid=R5)),
        "N9b": (f"2027/01/{N9}-second.md", scored(N9, 1.02, pid=C)),
    }
    for name, (relative, text) in new.items():
        files[name] = write(repo, relative, text)


@pytest.fixture
def pr_store(repo: Path, store: Store) -> dict[str, Path]:
    files = on_main(repo)
    git(repo, "checkout", "-q", "-b", "pr")
    pull_request(repo, files)
    return files


def test_a_pull_request_reports_what_the_full_parse_reported(
    repo: Path, store: Store, pr_store: dict[str, Path]
) -> None:
    # uncommitted: the working tree, new files untracked
    problems = assert_same_check(store, "main")
    assert_same_review(store, "main")
    # committed: the working tree, the branch at a revision, a store read at one
    commit(repo, "the pull request")
    assert assert_same_check(store, "main") == problems
    assert_same_check(store, "main", "pr")
    assert_same_check(store.at("pr"), "main")
    found = assert_same_review(store, "main")
    assert_same_review(store, "main", "pr")
    assert_same_review(store.at("pr"), "main")
    # Every kind of problem is there, caused by the change or found before it, so the
    # comparison means something.
    check = check_changes(store, "main")
    assert {"duplicate-id", "dangling-pid", "dangling-combines", "lineage-cycle"} <= codes(
        check.caused
    )
    assert {"duplicate-id", "lineage-cycle", "dangling-combines"} <= codes(
        [p for p in check.store_problems if p not in check.caused]
    )
    assert {"yaml-syntax", "unknown-field", "base-commit-unknown"} <= codes(check.file_problems)
    duplicates = {Path(p.path).name for p in check.caused if p.code == "duplicate-id"}
    assert {pr_store["U"].name, pr_store["dup"].name} <= duplicates  # in and out of it
    assert {pr_store["N9"].name, pr_store["N9b"].name} <= duplicates  # folded
    # ... and so does the review: ranks, a new best, interference, lessons (one read
    # whole from an unchanged file), the lineage around the change
    assert [e.kind for e in found.experiments].count("removed") == 3
    assert [e.id for e in found.new_bests] == [N1]
    assert any(e.outcome == "interference" for e in found.added)
    assert {lesson.id for items in found.lessons.values() for lesson in items} >= {N7, R4, J}
    assert {"context", "added", "corrected", "removed"} <= {n.kind for n in found.lineage.nodes}


def test_a_branch_that_only_removes_and_one_that_changes_nothing(repo: Path, store: Store) -> None:
    files = on_main(repo)
    git(repo, "checkout", "-q", "-b", "cleanup")
    for name in ("R2", "G", "K1"):
        files[name].unlink()
    commit(repo, "remove three")
    problems = assert_same_check(store, "main")
    assert "dangling-pid" in codes(problems)
    assert_same_review(store, "main")
    # nothing changed: only the store-wide problems that were there
    assert assert_same_check(store, "cleanup") == check_changes(store, "cleanup").store_problems
    assert check_changes(store, "cleanup").caused == []
    assert not assert_same_review(store, "cleanup").experiments


def test_the_commands_print_what_they_printed(
    repo: Path, store: Store, pr_store: dict[str, Path]
) -> None:
    commit(repo, "the pull request")
    result = run_kexp("validate", "--changed", "main", cwd=repo, env={"NO_COLOR": "1"})
    expected = reference_check_changes(store, "main")
    assert result.returncode == 1, result.stderr
    here = os.getcwd()
    os.chdir(repo)  # the command shows paths relative to where it runs
    try:
        # (a hint several problems share, each with its own values, printed once)
        assert result.stdout == "".join(f"{text}\n" for text in format_problems(expected.problems))
    finally:
        os.chdir(here)  # where the test ran, not the repository's root
    errors = sum(p.severity == "error" for p in expected.problems)
    removed = len(expected.changes.removed)  # a removal is a change checked too
    gone = f" ({removed} removed)" if removed else ""
    summary = (
        f"{len(expected.changed_paths) + removed} changed file(s) checked{gone}, and the "
        "store-wide checks: "
        f"{errors} error(s), {len(expected.problems) - errors} warning(s)"
    )
    assert summary in result.stderr
    github = run_kexp("validate", "--changed", "main", "--format", "github", cwd=repo)
    assert github.stdout.count("::error") == errors
    comment = run_kexp("review", "main", cwd=repo)
    assert comment.returncode == 0, comment.stderr
    assert comment.stdout == render_markdown(reference_review(store, "main"))
    as_json = run_kexp("review", "main", "pr", "--json", cwd=repo)
    assert json.loads(as_json.stdout) == json.loads(
        json.dumps(to_json(reference_review(store, "main", "pr")))
    )


# --- a large store: two processes, memory ------------------------------------------------


def test_a_large_store_split_between_two_processes_reports_the_same(
    repo: Path, store: Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    from kexp.storage.parallel import PARALLEL_MIN_FILES

    fill(repo, PARALLEL_MIN_FILES + 200)
    first, last = sorted((repo / "experiments").rglob("*.md"))[:: PARALLEL_MIN_FILES + 199]
    commit(repo, "a large store")
    git(repo, "checkout", "-q", "-b", "pr")
    # a problem in each half: a duplicate of the first file's id, a child of the last's
    write(repo, f"2027/01/{hex_id(0x6F01)}-dup.md", experiment(id_from_name(first) or ""))
    last_id = id_from_name(last) or ""
    write(repo, f"2027/01/{hex_id(0x6F02)}-child.md", scored(hex_id(0x6F02), 1.5, pid=last_id))
    last.unlink()
    problems = assert_same_check(store, "main")
    assert codes(problems) >= {"duplicate-id", "dangling-pid"}
    found = assert_same_review(store, "main")
    monkeypatch.setenv("KEXP_NO_FORK", "1")
    assert check_changes(store, "main").problems == problems
    assert to_json(review(store, "main")) == to_json(found)


#: Measures, in a fresh Python, the memory a changed-files check and a review take on the
#: store given, each after one untimed run (imports, caches): what earlier tests left in
#: the process (caches, interned strings, fragments) never counts.
MEMORY_PROBE = """
import json, sys, tracemalloc
from kexp import Store
from kexp.review.build import check_changes, review
store = Store(sys.argv[1])
peaks = {}
for name, work in (("check", lambda: check_changes(store, "main")),
                   ("review", lambda: review(store, "main"))):
    work()
    tracemalloc.start()
    before = tracemalloc.get_traced_memory()[0]
    result = work()
    peaks[name] = [tracemalloc.get_traced_memory()[1] - before,
                   [[p.code, p.message] for p in result.problems]]
    tracemalloc.stop()
print(json.dumps(peaks))
"""


def test_memory_does_not_grow_with_the_files_contents(repo: Path, store: Store) -> None:
    count = 1500
    fill(repo, count)
    # make each file as long as a real one (about 3.5 kB): the old way kept them all
    text = "**Why it worked/failed**: " + "the loads coalesce once unrolled; " * 80 + "\n"
    for path in (repo / "experiments").rglob("*.md"):
        with path.open("a", encoding="utf-8") as out:
            out.write(text)
    commit(repo, "a store")
    git(repo, "checkout", "-q", "-b", "pr")
    some = sorted((repo / "experiments").rglob("*.md"))
    some[0].unlink()  # a root: its nine descendants' parent is gone
    write(repo, f"2027/01/{hex_id(0x6F03)}-new.md", scored(hex_id(0x6F03), 1.4))
    expected = reference_check_changes(store, "main").problems
    # the child of the removed root, and the new file's base commit (not in this repository)
    assert [p.code for p in expected] == ["dangling-pid", "base-commit-unknown"]
    # Files written earlier, as in a store in use: one changed within the cache's racy
    # window is read again by every query (its contents counted), and on an idle
    # machine the probe starts within it (3.05 MB, where 1.29 MB once settled).
    past_racy_window()
    probe = subprocess.run(
        [sys.executable, "-c", MEMORY_PROBE, str(repo)],
        capture_output=True,
        text=True,
        check=True,
        env={**os.environ, "KEXP_NO_FORK": "1", "PYTHONHASHSEED": "0"},
    )
    for name, (peak, problems) in json.loads(probe.stdout).items():
        # (a review shows paths from the repository's root)
        assert problems == [[p.code, p.message] for p in expected], name
        # The old way: about 13 kB a file here (the document, its text and its
        # experiment, on both sides); now under 1 kB (what the checks need of it).
        assert peak < count * 2000, (name, peak)


def test_a_store_that_did_not_exist_at_the_base(repo: Path, store: Store) -> None:
    git(repo, "checkout", "-q", "-b", "first")
    shutil.rmtree(repo / "experiments")
    git(repo, "commit", "-q", "--allow-empty", "-m", "nothing yet")
    (repo / "experiments").mkdir()
    write(repo, f"2026/11/{H}-self.md", experiment(H, pid=H))
    write(repo, f"2026/11/{K}-k.md", experiment(K, pid=L))
    write(repo, f"2026/11/{E}-e.md", experiment(E, combines=f"[{D}, {G}]"))
    write(repo, f"2026/12/{V}-v.md", experiment(V, pid=E))
    commit(repo, "first experiments")
    assert codes(assert_same_check(store, "HEAD~1")) >= {"lineage-cycle", "dangling-pid"}
    assert_same_review(store, "HEAD~1")


# --- kexp validate --rev: the blobs checked as the working tree's files are --------------


def test_validate_at_a_revision_reports_what_it_reported(
    repo: Path, store: Store, pr_store: dict[str, Path]
) -> None:
    commit(repo, "the pull request")
    at = store.at("pr")
    # listed as paths() lists them ('2026/1' before '2026/1-x', as a checkout sorts)
    assert at.source.files() == [str(p) for p in at.paths()]
    expected = reference_validate(at)
    assert at.validate() == expected
    assert codes(expected) >= {"duplicate-id", "lineage-cycle", "yaml-syntax", "symlink"}
    given = [pr_store["N3"], pr_store["link"], repo / "experiments" / "nowhere.md"]
    assert at.validate(given) == reference_validate(at, given)
    result = run_kexp("validate", "--rev", "pr", cwd=repo, env={"NO_COLOR": "1"})
    assert result.returncode == 1
    here = os.getcwd()
    os.chdir(repo)
    try:
        assert result.stdout == "".join(f"{text}\n" for text in format_problems(expected))
    finally:
        os.chdir(here)  # where the test ran, not the repository's root
    # the bytes (or the problem) of each file, as check_files reads them
    paths = [str(pr_store[name]) for name in ("N5", "link", "A", "R2")]
    for (path, data), checked in zip(
        at.contents(paths), at.check_files([Path(p) for p in paths]), strict=True
    ):
        if isinstance(data, Problem):
            assert checked.problems == [data]
        else:
            assert check_bytes(data, Path(path)).problems == checked.problems
