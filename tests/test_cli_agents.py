"""The migration and agent commands: kexp import, export --format legacy, skill install."""

from __future__ import annotations

import json
from pathlib import Path

from conftest import run_kexp
from test_legacy import awkward_database, write_database

from kexp import Store


def test_import_then_legacy_export_round_trips_through_the_command(
    repo: Path, store: Store, tmp_path: Path
) -> None:
    database = awkward_database()
    source = write_database(tmp_path / "kernel_experiments_db.json", database)
    first = run_kexp("import", str(source), "--no-check-commits", cwd=repo)
    assert "Traceback" not in first.stderr
    assert f"imported {len(database)}" in first.stdout
    assert len(store.paths()) == len(database)

    again = run_kexp("import", str(source), "--no-check-commits", cwd=repo)
    assert f"imported 0, skipped {len(database)}" in again.stdout
    assert again.returncode == 0

    exported = tmp_path / "out.json"
    result = run_kexp("export", "--format", "legacy", "-o", str(exported), cwd=repo)
    assert result.returncode == 0, result.stderr
    assert json.loads(exported.read_text()) == database
    to_stdout = run_kexp("export", "--format", "legacy", cwd=repo)
    assert json.loads(to_stdout.stdout) == database


def test_legacy_export_refuses_filters(repo: Path, store: Store) -> None:
    result = run_kexp("export", "--format", "legacy", "--operator", "cache", cwd=repo)
    assert result.returncode == 2
    assert result.stderr.startswith("kexp: error: --format legacy exports the whole store")


def test_import_of_a_file_that_is_no_database_is_one_line_error(repo: Path, tmp_path: Path) -> None:
    bad = tmp_path / "db.json"
    bad.write_text("[1, 2, 3]")
    result = run_kexp("import", str(bad), cwd=repo)
    assert result.returncode == 2, result.stdout + result.stderr
    assert result.stderr.startswith("kexp: error: ") and len(result.stderr.splitlines()) == 1


def test_skill_install_writes_the_skill_files(repo: Path, tmp_path: Path) -> None:
    result = run_kexp("skill", "install", "--dir", str(tmp_path / "skills"), cwd=repo)
    assert result.returncode == 0, result.stderr
    skill = tmp_path / "skills" / "kernel-exp-history"
    assert (skill / "SKILL.md").read_text().startswith("---\nname: kernel-exp-history")
    assert (skill / "references" / "kexp_agent.py").is_file()
    claude = run_kexp("skill", "install", "--claude", cwd=repo)
    assert claude.returncode == 0, claude.stderr
    assert (repo / ".claude" / "skills" / "kernel-exp-history" / "SKILL.md").is_file()
