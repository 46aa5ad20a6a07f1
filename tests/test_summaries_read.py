"""The summaries read what they show, no more: ``kexp stats``, ``kexp tree`` and a brief
export come from the query cache's rows (no experiment file is read), and ``kexp lessons`` reads the
files of its lessons only (for their key insights). At 100,000 experiments, reading and
checking every file made ``kexp stats`` take 48 s where the rows take 2.

The truth is the same summary made of every experiment read whole from its file.
"""

from __future__ import annotations

import io
import shutil
from pathlib import Path
from typing import Any

import pytest
from conftest import REPO_ROOT

import kexp.storage.bodies
import kexp.storage.sources
from kexp import Store
from kexp.agents.lessons import LESSON_GROUPS, group_lessons, lesson_report, noise_floors
from kexp.core.outcome import is_control
from kexp.output.export import export
from kexp.storage.lineage import build_forest, lineage_forest
from kexp.storage.stats import compute_stats, stats


@pytest.fixture
def bundled_copy(repo: Path) -> Store:
    """A store holding a copy of the bundled experiments (every outcome among them)."""
    shutil.rmtree(repo / "experiments")
    shutil.copytree(REPO_ROOT / "experiments", repo / "experiments")
    return Store(repo)


def _reads(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Make reading a file whole fail, and count the files read for their bodies."""

    def whole(path: Path, settings: Any) -> Any:
        raise AssertionError(f"{path} was read and checked whole")

    read: list[str] = []
    plain = kexp.storage.bodies.read_file

    def counted(path: Path, settings: Any) -> bytes:
        read.append(Path(path).name[:16])
        return plain(path, settings)

    monkeypatch.setattr(kexp.storage.sources, "read_and_check", whole)
    monkeypatch.setattr(kexp.storage.bodies, "read_file", counted)
    return read


def test_stats_come_from_the_rows(bundled_copy: Store, monkeypatch: pytest.MonkeyPatch) -> None:
    truth = compute_stats(bundled_copy.list_experiments()).to_dict()
    read = _reads(monkeypatch)
    assert stats(bundled_copy).to_dict() == truth
    assert read == []


def test_a_brief_export_comes_from_the_rows(
    bundled_copy: Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    truths = {}
    for brief, fields in ((True, None), (False, ["id", "score", "outcome", "suspect"])):
        out = io.StringIO()
        export(bundled_copy, out, "jsonl", brief=brief, fields=fields)
        truths[brief, tuple(fields or ())] = out.getvalue()
    read = _reads(monkeypatch)
    for (brief, fields), truth in truths.items():
        out = io.StringIO()
        export(bundled_copy, out, "jsonl", brief=brief, fields=list(fields) or None)
        assert out.getvalue() == truth
    assert read == []


def test_the_lineage_trees_come_from_the_rows(
    bundled_copy: Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    truth = [tree.to_dict() for tree in build_forest(bundled_copy.list_experiments())]
    read = _reads(monkeypatch)
    assert [tree.to_dict() for tree in lineage_forest(bundled_copy)] == truth
    assert read == []


def test_lessons_read_the_files_of_the_lessons_alone(
    bundled_copy: Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    whole = bundled_copy.list_experiments()
    truth_groups, truth_floors = group_lessons(whole), noise_floors(whole)
    lessons = {e.id[:16] for e in whole if e.outcome in LESSON_GROUPS and not is_control(e)}
    assert lessons and len(lessons) < len(whole)
    read = _reads(monkeypatch)
    report = lesson_report(bundled_copy)
    assert report.groups == truth_groups
    assert report.noise_floors == truth_floors
    assert sorted(read) == sorted(lessons)
