"""The report's output folder (issue 28, items 9 and 10): a report replaces only what
kexp wrote. Files a user added to an earlier report folder are never deleted (the
report is refused, naming them); a marker file put in a user's folder does not make it
replaceable; a killed report's hidden folders are removed by the next report.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner
from conftest import experiment_fields

from kexp import KexpError, Store
from kexp.cli.main import main
from kexp.output.html import MARKER, build_report


def files_of(folder: Path) -> dict[str, bytes]:
    return {
        p.relative_to(folder).as_posix(): p.read_bytes()
        for p in sorted(folder.rglob("*"))
        if p.is_file()
    }


@pytest.fixture
def site(store: Store, tmp_path: Path) -> Path:
    """A report of a store of two experiments."""
    parent = store.create_experiment(**experiment_fields())
    store.create_experiment(**experiment_fields(pid=parent.id, score=1.05))
    folder = tmp_path / "site"
    build_report(store, folder)
    return folder


def test_files_a_user_added_to_a_report_are_never_deleted(
    repo: Path, store: Store, site: Path
) -> None:
    (site / "CNAME").write_text("kernels.example.com\n")
    (site / "notes").mkdir()
    (site / "notes" / "todo.md").write_text("- publish\n")
    before = files_of(site)
    store.create_experiment(**experiment_fields(change_summary="Third - +1%", score=1.01))

    with pytest.raises(KexpError) as caught:
        build_report(store, site)
    message = str(caught.value)
    assert "CNAME" in message and "notes/todo.md" in message and "kexp did not write" in message
    assert files_of(site) == before  # the earlier report and the user's files as they were
    result = CliRunner().invoke(main, ["--root", str(repo), "report", "-o", str(site)])
    assert result.exit_code == 2 and result.stderr.count("\n") == 1
    assert files_of(site) == before

    # Moved out, the report replaces its folder again.
    (site / "CNAME").unlink()
    shutil.rmtree(site / "notes")
    assert build_report(store, site).experiments == 3


@pytest.mark.parametrize("planted", ["copied", "empty", "forged"])
def test_a_marker_put_in_a_users_folder_does_not_make_it_replaceable(
    store: Store, site: Path, tmp_path: Path, planted: str
) -> None:
    mine = tmp_path / "mine"
    mine.mkdir()
    (mine / "thesis.tex").write_text("years of work")
    marker = {
        "copied": (site / MARKER).read_text(),
        "empty": "{}\n",
        "forged": json.dumps({"kexp": "0.1.0", "files": ["thesis.tex", "index.html"]}),
    }[planted]
    (mine / MARKER).write_text(marker)
    before = files_of(mine)
    with pytest.raises(KexpError, match=r"thesis\.tex"):
        build_report(store, mine)
    assert files_of(mine) == before


def test_a_killed_reports_hidden_folders_are_removed_by_the_next(
    store: Store, site: Path, tmp_path: Path
) -> None:
    # What a report killed while writing leaves (its folder in the making), and one killed
    # between putting the earlier report aside and the new one in place.
    new = tmp_path / ".site.kexp-new-0123abcd"
    (new / "e").mkdir(parents=True)
    (new / "e" / "abc.html").write_text("<p>half")
    shutil.copytree(site, tmp_path / ".site.kexp-old-89abcdef")
    # Not a report's leftovers: kept.
    (tmp_path / ".site.mine").mkdir()
    (tmp_path / ".other.kexp-new-01234567").mkdir()

    build_report(store, site)
    assert sorted(p.name for p in tmp_path.iterdir() if p.name.startswith(".")) == [
        ".other.kexp-new-01234567",
        ".site.mine",
    ]


def test_two_reports_into_one_folder_at_once_both_finish(
    repo: Path, store: Store, site: Path, tmp_path: Path
) -> None:
    """Reports into one folder take turns (so a report never removes the folder another
    one is writing)."""
    command = [sys.executable, "-m", "kexp", "--root", str(repo), "report", "-o", str(site)]
    environment = {**os.environ, "PYTHONPATH": str(Path(__file__).parent.parent)}
    runs = [
        subprocess.Popen(command, env=environment, stderr=subprocess.PIPE, text=True)
        for _ in range(3)
    ]
    for run in runs:
        _, err = run.communicate(timeout=120)
        assert run.returncode == 0, err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["repo", "site"]
    assert (site / "index.html").is_file()


def test_a_report_of_no_experiment_is_replaced_too(store: Store, tmp_path: Path) -> None:
    build_report(store, tmp_path / "site")
    assert build_report(store, tmp_path / "site").experiments == 0
