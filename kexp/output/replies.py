"""The JSON the read commands print with ``--json`` and the MCP tools answer, built in
one place so that both give the same answer to the same question: experiments (``top``,
``list``, ``show``), lessons, lineage trees. A store reading refs adds where each entry
was found (``ref``, ``refs`` and the places of older versions)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, NamedTuple, TypeVar

from kexp.output.export import machine_record

if TYPE_CHECKING:
    from kexp.agents.lessons import Lesson, LessonReport
    from kexp.core.model import KernelExperiment
    from kexp.storage.lineage import TreeNode
    from kexp.storage.rows import Sighting

__all__ = [
    "LessonsShown",
    "chosen_lessons",
    "experiment_reply",
    "lessons_by_insight",
    "lessons_reply",
    "lessons_shown",
    "tree_reply",
]

_T = TypeVar("_T")


def _found(exp: KernelExperiment, record: dict[str, Any]) -> dict[str, Any]:
    """``record`` with where a store reading refs found ``exp`` (nothing otherwise)."""
    if exp.where is not None:
        record.update(exp.where.to_dict())
    return record


def experiment_reply(
    exp: KernelExperiment,
    fields: Sequence[str] | None = None,
    *,
    brief: bool = False,
    front_matter: bool = False,
    full: bool = False,
) -> dict[str, Any]:
    """One experiment as ``kexp show ID --json`` (and each entry of ``kexp top --json``)
    prints it: :func:`kexp.output.export.machine_record` and where it was found."""
    record = machine_record(exp, fields, brief=brief, front_matter=front_matter, full=full)
    return _found(exp, record)


def _newest(items: list[_T], limit: int | None) -> list[_T]:
    """The last ``limit`` items (all when None)."""
    return items if limit is None else items[-limit:] if limit > 0 else []


def chosen_lessons(
    report: LessonReport, groups: Iterable[str] = (), limit: int | None = None
) -> dict[str, list[Lesson]]:
    """The lessons of ``report`` in ``groups`` (every group when none), the newest
    ``limit`` of each (all when None)."""
    wanted = set(groups)
    return {
        name: _newest(items, limit)
        for name, items in report.groups.items()
        if not wanted or name in wanted
    }


class LessonsShown(NamedTuple):
    """What ``kexp lessons`` prints of one group: its entries, each a lesson with how many
    lessons it stands for (those of its key insight), how many lessons the group holds,
    and how many of them no entry stands for (left out by the limit)."""

    entries: list[tuple[Lesson, int]]
    total: int
    hidden: int


def lessons_by_insight(
    items: Sequence[Lesson], where: Mapping[str, Sighting] | None = None
) -> list[tuple[Lesson, int]]:
    """``items`` (oldest first) with the lessons of one key insight in one campaign
    (operator × dtype × env) taken together: the newest of each, with how many lessons
    taught it, in the order of the newest. A lesson that taught nothing recorded stands
    alone; read across refs (``where``: by id, where each was found), only lessons
    found at the same ref are taken together."""
    from kexp.agents.lessons import taught

    found = where or {}
    said = [
        (
            taught(lesson.key_insight, lesson.error).strip(),
            _ref(found.get(lesson.id)),
            *lesson.campaign,
        )
        for lesson in items
    ]
    counts: dict[tuple[str, ...], int] = {}
    newest: dict[tuple[str, ...], int] = {}
    for number, insight in enumerate(said):
        if insight[0]:
            counts[insight] = counts.get(insight, 0) + 1
            newest[insight] = number
    return [
        (lesson, counts[insight] if insight[0] else 1)
        for number, (lesson, insight) in enumerate(zip(items, said, strict=True))
        if not insight[0] or newest[insight] == number
    ]


def _ref(sighting: Sighting | None) -> str:
    """The ref a lesson was found at ("" when the working tree alone was read)."""
    return "" if sighting is None else sighting.ref


def lessons_shown(
    report: LessonReport,
    groups: Iterable[str] = (),
    limit: int | None = None,
    *,
    each: bool = False,
) -> dict[str, LessonsShown]:
    """What ``kexp lessons`` prints of ``report``'s ``groups`` (every group when none):
    per group, the lessons of one key insight in one campaign as one entry
    (:func:`lessons_by_insight`; ``each``: every lesson an entry of its own), the newest
    ``limit`` entries (all when None)."""
    shown: dict[str, LessonsShown] = {}
    for name, items in chosen_lessons(report, groups).items():
        entries = (
            [(lesson, 1) for lesson in items] if each else lessons_by_insight(items, report.where)
        )
        entries = _newest(entries, limit)
        told = sum(count for _, count in entries)
        shown[name] = LessonsShown(entries, len(items), len(items) - told)
    return shown


def lessons_reply(
    report: LessonReport, groups: Iterable[str] = (), limit: int | None = None
) -> dict[str, Any]:
    """What ``kexp lessons --json`` prints: :func:`chosen_lessons` by group (each saying
    where it was found, read across refs: ``report.where``), then ``noise_floor`` when a
    control measured one."""
    data: dict[str, Any] = {
        name: [_where(lesson.to_dict(), report) for lesson in items]
        for name, items in chosen_lessons(report, groups, limit).items()
    }
    if report.noise_floors:
        data["noise_floor"] = [floor.to_dict() for floor in report.noise_floors]
    return data


def _where(record: dict[str, Any], report: LessonReport) -> dict[str, Any]:
    """A lesson's ``record`` with where it was found (read across refs)."""
    sighting = report.where.get(record["id"])
    if sighting is not None:
        record.update(sighting.to_dict())
    return record


def tree_reply(forest: Sequence[TreeNode]) -> list[dict[str, Any]]:
    """What ``kexp tree --json`` prints: each tree as a dict, each node saying where it
    was found (read across refs) and, when the A/A control of its env judged its change
    within the drift between runs, why it is ``marginal`` (``outcome_reason``)."""
    trees = [node.to_dict() for node in forest]
    stack = list(zip(forest, trees, strict=True))
    while stack:
        node, data = stack.pop()
        _found(node.experiment, data)
        if node.experiment.derived.drift:
            data["outcome_reason"] = node.experiment.derived.drift
        stack.extend(zip(node.children, data["children"], strict=True))
    return trees
