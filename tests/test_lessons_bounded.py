"""kexp lessons on a store of many failures, as a user reads it at a terminal: the
lessons that taught one key insight are one entry with how many they are, at most the
default limit of entries a group (as kexp top's), and a last line saying how many more
and how to see them; -n and --all show them."""

from __future__ import annotations

import json
from pathlib import Path

from conftest import experiment_fields, run_kexp

from kexp import Store


def regression(store: Store, summary: str, insight: str) -> str:
    description = f"**Approach**: {summary}\n\n**Key insight**: {insight}"
    exp = store.create_experiment(
        **experiment_fields(change_summary=summary, score=0.9, detailed_description=description)
    )
    return exp.id


def test_lessons_take_one_insight_together_and_say_how_many_more(repo: Path) -> None:
    store = Store(repo)
    same = [regression(store, "Split-K 2 - -10%", "Guard split-K by size")]
    for n in range(24):
        regression(store, f"Tile {n} - -10%", f"Tile {n} spills registers")
    same += [regression(store, f"Split-K {n} - -10%", "Guard split-K by size") for n in (4, 8)]
    lines = run_kexp("lessons", cwd=repo, env={"COLUMNS": "80"}).stdout.splitlines()
    assert lines[0] == "REGRESSION (27)"
    said = [line for line in lines if "Guard split-K by size" in line]
    assert said == ["      Key insight (3 lessons): Guard split-K by size"], lines
    assert sum(same[-1][:10] in line for line in lines) == 1  # its newest stands for them
    assert not any(old[:10] in line for old in same[:2] for line in lines)
    assert sum("Key insight" in line for line in lines) == 20  # top's default
    assert lines[-1] == "(5 more lesson(s) not shown: -n 100 shows more, --all each lesson)"
    assert all(len(line) <= 80 for line in lines)
    more = run_kexp("lessons", "-n", "100", cwd=repo).stdout
    assert more.count("Key insight") == 25 and "not shown" not in more
    every = run_kexp("lessons", "--all", cwd=repo).stdout
    assert every.count("Key insight: Guard split-K by size") == 3 and "not shown" not in every
    data = json.loads(run_kexp("lessons", "--json", cwd=repo).stdout)
    assert len(data["regression"]) == 27  # JSON: every lesson, as before
