"""What a review calls out over the whole change: the campaigns whose best tip moved,
the lessons it adds and those it loses, and the lineage graph of what it touches.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping

from kexp.agents.lessons import LESSON_GROUPS
from kexp.core.campaign import control_for, env_controls
from kexp.core.model import KernelExperiment
from kexp.core.outcome import is_control
from kexp.format.fileformat import key_insight
from kexp.review.entry import Reviewed
from kexp.review.graph import LineageGraph, LineageNode
from kexp.review.model import KINDS, BestChange, ControlDemotion, LostLesson
from kexp.review.side import Campaign, Side, campaign_name, campaign_of

#: Ancestors and children of each touched experiment drawn in the lineage graph.
MAX_RELATIVES = 6


#: Nodes in the lineage graph at most (the rest are counted, not drawn).
MAX_GRAPH_NODES = 60


def best_changes(entries: Mapping[str, list[Reviewed]], now: Side, then: Side) -> list[BestChange]:
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
            operator, dtype, env = campaign_name(campaign, now, then)
            change = BestChange(
                operator,
                None if before is None else before.id,
                old,
                None if after is None else after.id,
                new,
                dtype,
                env,
            )
            found.append(_judged(change, campaign, entries, now, then))
    return found


def _judged(
    change: BestChange,
    campaign: Campaign,
    entries: Mapping[str, list[Reviewed]],
    now: Side,
    then: Side,
) -> BestChange:
    """``change`` with its cause when an A/A control finds steps of ``campaign`` that
    were improvements before the change within its drift (``marginal`` now, with the
    reason): the control, whether the change adds or corrects it, and those steps."""
    judged: list[KernelExperiment] = []
    for key, number in then.scored_on(campaign):
        found = now.first.get(then.facts[number].id) if key[0] else None
        if found is not None and now.derived(found).drift:  # derived: no experiment made
            judged.append(now.experiment(found))
    if not judged:
        return change
    floor = control_for(judged[0], env_controls(now.facts), now.settings.control_drift_window)
    if floor is None:  # pragma: no cover - a step's drift names its control
        return change
    control = floor.judge
    how = {entry.id: kind for kind in ("added", "corrected") for entry, _ in entries[kind]}
    here = {"added": " added here", "corrected": " corrected here"}.get(how.get(control.id, ""), "")
    steps = ", ".join(step.id for step in judged)
    return dataclasses.replace(
        change,
        reason=f"the A/A control {control.id}{here}, which judges {steps} within its drift "
        "(now marginal)",
        control_id=control.id,
        judged_by_control=[
            {"id": step.id, "outcome": step.outcome, "drift": step.derived.drift} for step in judged
        ],
    )


def control_demotions(
    entries: Mapping[str, list[Reviewed]], now: Side, then: Side
) -> list[ControlDemotion]:
    """The A/A controls the change adds or corrects, each with the steps of its env
    that it judges (the largest drift of the env's newest controls is its) within its
    drift: an improvement or a regression before the change, ``marginal`` now. Steps
    the change adds are left out (the review lists them with their outcome)."""
    brought = [
        (entry, kind)
        for kind in ("added", "corrected")
        for entry, _ in entries[kind]
        if entry.valid and entry.control
    ]
    how = {entry.id: kind for entry, kind in brought}
    envs = {entry.env for entry, _ in brought}
    if not how:
        return []
    controls = env_controls(now.facts)
    window = now.settings.control_drift_window
    judges: dict[int, str] = {}  # number -> the control brought here that judges it
    for number, item in enumerate(now.facts):
        if item.env not in envs or is_control(item) or now.first.get(item.id) != number:
            continue
        floor = control_for(item, controls, window)
        if floor is not None and floor.judge.id in how and item.id in then.first:
            judges[number] = floor.judge.id
    derived = now.derived_all(judges)
    earlier = then.derived_all(then.first[now.facts[number].id] for number in judges)
    found: dict[str, list[dict[str, str]]] = {}
    for (number, judge), value, old in zip(judges.items(), derived, earlier, strict=True):
        if value.drift and old.outcome in ("improvement", "regression"):
            step = {"id": now.facts[number].id, "was": old.outcome}
            step |= {"outcome": value.outcome, "drift": value.drift}
            found.setdefault(judge, []).append(step)
    return [
        ControlDemotion(control_id, how[control_id], now.facts[now.first[control_id]].env, steps)
        for control_id, steps in found.items()
    ]


def new_lessons(
    entries: Mapping[str, list[Reviewed]], then: Side, lost: set[str]
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


def lost_lessons(entries: Mapping[str, list[Reviewed]], then: Side) -> list[LostLesson]:
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


def lineage_graph(entries: Mapping[str, list[Reviewed]], now: Side, then: Side) -> LineageGraph:
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

    touched: list[tuple[KernelExperiment, Side]] = []
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
