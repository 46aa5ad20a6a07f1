"""The one atomic writer (kexp.storage.atomic) and its mode rule: a replaced file keeps the
permission bits of the file it replaces, whichever command writes it; a new file gets
the default of the umask."""

from __future__ import annotations

import os
import stat
from collections.abc import Callable
from pathlib import Path

import pytest
from click.testing import CliRunner

from kexp import KernelExperiment, Store
from kexp.cli.main import main
from kexp.storage import atomic

pytestmark = pytest.mark.skipif(os.name != "posix", reason="POSIX permission bits")


def mode(path: Path) -> int:
    return stat.S_IMODE(os.stat(path).st_mode)


def kexp(repo: Path, *args: str) -> int:
    return CliRunner().invoke(main, ["--root", str(repo), *args]).exit_code


@pytest.mark.parametrize("bits", [0o600, 0o640, 0o664, 0o444])
def test_kexp_update_keeps_the_mode_of_the_file(
    repo: Path, make_experiment: Callable[..., KernelExperiment], bits: int
) -> None:
    exp = make_experiment()
    assert exp.path is not None
    os.chmod(exp.path, bits)
    assert kexp(repo, "update", exp.id, "--set", "status=done") == 0
    assert "status: done" in exp.path.read_text(encoding="utf-8")
    assert mode(exp.path) == bits


@pytest.mark.parametrize("bits", [0o600, 0o640, 0o664])
def test_kexp_fmt_keeps_the_mode_of_the_file(
    repo: Path, make_experiment: Callable[..., KernelExperiment], bits: int
) -> None:
    exp = make_experiment()
    assert exp.path is not None
    exp.path.write_bytes(exp.path.read_bytes().replace(b"\n", b"\r\n"))
    os.chmod(exp.path, bits)
    assert kexp(repo, "fmt") == 0
    assert b"\r\n" not in exp.path.read_bytes()
    assert mode(exp.path) == bits


def test_a_new_file_gets_the_default_mode_of_the_umask(store: Store, tmp_path: Path) -> None:
    old = os.umask(0o027)
    try:
        atomic.create(tmp_path / "new.md", "text")
        atomic.replace(tmp_path / "replaced-new.md", "text")
    finally:
        os.umask(old)
    assert mode(tmp_path / "new.md") == 0o640
    assert mode(tmp_path / "replaced-new.md") == 0o640


def test_create_never_overwrites_and_leaves_no_temporary_file(tmp_path: Path) -> None:
    path = tmp_path / "taken.md"
    path.write_text("first", encoding="utf-8")
    with pytest.raises(FileExistsError):
        atomic.create(path, "second")
    assert path.read_text(encoding="utf-8") == "first"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["taken.md"]


def test_replace_of_a_deleted_file_can_refuse_to_bring_it_back(tmp_path: Path) -> None:
    path = tmp_path / "gone.md"
    assert atomic.replace(path, "text", only_if_exists=True) is False
    assert list(tmp_path.iterdir()) == []


def test_every_write_is_fsynced_file_and_folder(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    synced: list[str] = []
    real_fsync = os.fsync

    def fsync(fd: int) -> None:
        synced.append("folder" if stat.S_ISDIR(os.fstat(fd).st_mode) else "file")
        real_fsync(fd)

    monkeypatch.setattr(os, "fsync", fsync)
    atomic.create(tmp_path / "a.md", "a")
    assert synced == ["file", "folder"]
    synced.clear()
    atomic.replace(tmp_path / "a.md", "b")
    assert synced == ["file", "folder"]
