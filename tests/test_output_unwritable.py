"""Every writer of an output (the report, the exports: Parquet, CSV, JSON, the
predecessor's database) fails the same way when its folder cannot be written: one clear
line naming the output and the folder to check, exit 2, nothing left behind, never
"internal error" (trial G, repro 08).

The permissions are real: folders made read-only, enforced by the kernel for root too
(a user namespace of its own), and every command the real ``kexp`` in a subprocess. The
one race, ``.kexp/`` removed while a report writes in it, is made to happen at one point
of the report (the overview page, written last).
"""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest
from click.testing import CliRunner
from conftest import experiment_fields
from test_clear_errors import _without_privileges, assert_one_clear_line
from test_clear_errors import kexp as kexp_process

import kexp.output.html as html
from kexp import KexpError, Store
from kexp.cli.main import main
from kexp.output.html import build_report


@pytest.fixture
def recorded(store: Store) -> Store:
    """A store of one experiment, its cache (``.kexp/``) made by a first read."""
    store.create_experiment(**experiment_fields())
    store.list_experiments()
    return store


@pytest.fixture
def read_only(tmp_path: Path) -> Iterator[Path]:
    """An empty folder nobody may write in."""
    folder = tmp_path / "ro"
    folder.mkdir()
    folder.chmod(0o555)
    yield folder
    folder.chmod(0o755)


def _outputs(cache: Path, ro: Path) -> list[tuple[list[str], Path, Path]]:
    """(arguments, the output they write, the folder to check) of every output writer."""
    writers = [
        (["report"], cache / "report", cache),
        (["report", "-o", str(ro / "site")], ro / "site", ro),
        (["report", "-o", str(ro / "sub" / "site")], ro / "sub" / "site", ro),
        (["export", "--format", "csv", "-o", str(ro / "x.csv")], ro / "x.csv", ro),
        (["export", "-o", str(ro / "x.json")], ro / "x.json", ro),
        (["export", "--format", "legacy", "-o", str(ro / "db.json")], ro / "db.json", ro),
    ]
    try:
        import pyarrow  # noqa: F401
    except ImportError:
        return writers
    return [
        *writers,
        (["export", "--format", "parquet", "-o", str(ro / "pq")], ro / "pq", ro),
        (["export", "--format", "parquet", "-o", str(ro / "a" / "pq")], ro / "a" / "pq", ro),
    ]


def test_every_output_into_a_folder_kexp_cannot_write_is_one_clear_line(
    repo: Path, recorded: Store, read_only: Path
) -> None:
    cache = recorded.cache_dir
    cache.chmod(0o555)  # the report's default output is .kexp/report
    try:
        prefix = _without_privileges()
        for args, output, folder in _outputs(cache, read_only):
            result = kexp_process(repo, *args, prefix=prefix)
            assert result.returncode == 2, (args, result.stderr)
            assert_one_clear_line(
                result.stderr,
                f"cannot write {output}",  # (the legacy database's sidecar: first)
                "Permission denied; nothing was changed",
                f"check the owner and permissions of {folder}",
            )
            assert list(read_only.iterdir()) == [], args  # no half-written folder left
    finally:
        cache.chmod(0o755)
    assert not (cache / "report").exists()


def test_the_cache_folder_removed_while_a_report_is_written_is_one_clear_line(
    repo: Path, recorded: Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``rm -rf .kexp`` (a clean-up) while ``kexp report`` writes into ``.kexp/report``:
    the report says so, and running it again writes it."""
    write_overview = html.overview_page

    def removed_meanwhile(site: html.Site) -> str:
        shutil.rmtree(recorded.cache_dir)
        return write_overview(site)

    monkeypatch.setattr(html, "overview_page", removed_meanwhile)
    with pytest.raises(KexpError) as caught:
        build_report(recorded)
    assert str(caught.value) == (
        f"cannot write {recorded.cache_dir / 'report'}: the folder {recorded.cache_dir} was "
        "removed while kexp wrote in it; nothing was changed: run the command again"
    )
    result = CliRunner().invoke(main, ["--root", str(repo), "report"])
    assert result.exit_code == 2, result.output
    assert result.stderr.startswith("kexp: error: cannot write ") and "again" in result.stderr
    assert "internal error" not in result.stderr and result.stderr.count("\n") == 1

    monkeypatch.setattr(html, "overview_page", write_overview)  # run again: it is written
    assert build_report(Store(repo)).index.is_file()
