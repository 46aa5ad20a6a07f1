"""The JSON the read commands print with ``--json`` and the MCP tools answer, built in
one place so that both give the same answer to the same question: experiments (``top``,
``list``, ``show``), lessons, lineage trees. A store reading refs adds where each entry
was found (``ref``, ``refs`` and the places of older versions)."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING, Any, TypeVar

from kexp.output.export import machine_record

if TYPE_CHECKING:
    from kexp.agents.lessons import Lesson, LessonReport
    from kexp.core.model import KernelExperiment
    from kexp.storage.lineage import TreeNode

__all__ = ["chosen_lessons", "experiment_reply", "lessons_reply", "tree_reply"]

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
    was found (read across refs)."""
    trees = [node.to_dict() for node in forest]
    stack = list(zip(forest, trees, strict=True))
    while stack:
        node, data = stack.pop()
        _found(node.experiment, data)
        stack.extend(zip(node.children, data["children"], strict=True))
    return trees
