"""Shared fixtures: real git repositories and stores in temporary folders."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import settings

from kexp import KernelExperiment, Store

# Hypothesis explores the same examples on every run (a failure found once is found
# again, and CI never stops on a draw that an earlier run did not make);
# HYPOTHESIS_PROFILE=explore searches new ones each run, to find what these miss.
settings.register_profile("repeatable", derandomize=True)
settings.register_profile("explore", derandomize=False)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "repeatable"))

REPO_ROOT = Path(__file__).resolve().parent.parent


def git(cwd: Path, *args: str) -> str:
    """Run git in ``cwd`` and return its stdout (fails the test on error)."""
    result = subprocess.run(["git", *args], cwd=cwd, check=True, capture_output=True, text=True)
    return result.stdout.strip()


def past_racy_window() -> None:
    """Wait until what was just written is older than the cache's "racily clean"
    window, as a user's next command would be: a file changed within it is read again
    by every query (its change time counts, and cannot be set back: only time settles
    a file)."""
    import time

    from kexp.storage.cache import RACY_NS

    time.sleep(RACY_NS / 1e9 + 0.3)


def edit_in_place(path: Path, edit: Callable[[str], str]) -> None:
    """Rewrite a file's text with ``edit`` in place (the same inode, as most editors save)."""
    text = path.read_text(encoding="utf-8")
    with path.open("r+", encoding="utf-8") as handle:
        handle.write(edit(text))
        handle.truncate()


def init_repo(path: Path) -> Path:
    """``git init`` a folder with an identity and one commit of a kernel file."""
    path.mkdir(parents=True, exist_ok=True)
    git(path, "init", "-q", "-b", "main")
    git(path, "config", "user.name", "Test Engineer")
    git(path, "config", "user.email", "test@example.com")
    git(path, "config", "commit.gpgsign", "false")
    (path / "kernel.cu").write_text("__global__ void k() {}\n")
    git(path, "add", "kernel.cu")
    git(path, "commit", "-q", "-m", "initial kernel")
    return path


@pytest.fixture(autouse=True)
def _isolated_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    """Tests never see the developer's KEXP_* settings, git identity or terminal size."""
    for name in ("KEXP_ROOT", "KEXP_CODE_REPO", "NO_COLOR", "VISUAL", "EDITOR", "COLUMNS", "LINES"):
        monkeypatch.delenv(name, raising=False)
    # kexp's author is git's (GIT_AUTHOR_NAME first): the repositories' user.name here.
    monkeypatch.delenv("GIT_AUTHOR_NAME", raising=False)
    monkeypatch.setenv("GIT_CONFIG_NOSYSTEM", "1")


@pytest.fixture(autouse=True)
def _ids_apart_in_their_shown_characters(monkeypatch: pytest.MonkeyPatch) -> None:
    """Ids a test makes in this process differ in their first 10 characters (as a
    user's made seconds apart do): two made in the same second share those with
    probability 1/256, so a test giving ``id[:10]`` would fail one run in a few hundred.
    The 9th and 10th characters count up; the time and the last 6 stay as kexp makes
    them. Tests about shared prefixes write their ids out."""
    import itertools

    import kexp.core.ids

    made = kexp.core.ids.new_id
    count = itertools.count()

    def apart(now: float | None = None) -> str:
        exp_id = made(now)
        return f"{exp_id[:8]}{next(count) % 256:02x}{exp_id[10:]}"

    monkeypatch.setattr(kexp.core.ids, "new_id", apart)


@pytest.fixture
def gpu_machine(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """This machine, as kexp sees it, has a GPU: a device file it looks for exists."""
    from kexp.measure import envinfo

    device = tmp_path / "nvidiactl"
    device.touch()
    monkeypatch.setattr(envinfo, "GPU_DEVICE_FILES", (str(device),))
    monkeypatch.setattr(envinfo, "APPLE_GPU", False)


@pytest.fixture
def cpu_machine(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """This machine, as kexp sees it, has no GPU: no device file it looks for exists."""
    from kexp.measure import envinfo

    monkeypatch.setattr(envinfo, "GPU_DEVICE_FILES", (str(tmp_path / "no-gpu-device"),))
    monkeypatch.setattr(envinfo, "APPLE_GPU", False)


@pytest.fixture(scope="session")
def _template_repo(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One repository made by :func:`init_repo` per test process, copied by ``repo``
    (a copy takes a quarter of the time of the five git commands)."""
    return init_repo(tmp_path_factory.mktemp("template") / "repo")


@pytest.fixture
def repo(tmp_path: Path, _template_repo: Path) -> Path:
    """A fresh git repository with one commit, holding an empty store (a copy of the
    template: every test's repository has the same first commit)."""
    root = tmp_path / "repo"
    shutil.copytree(_template_repo, root, symlinks=True)
    (root / "experiments").mkdir()
    return root


@pytest.fixture
def store(repo: Path) -> Store:
    """A :class:`Store` in a fresh git repository."""
    return Store(repo)


def experiment_fields(**overrides: Any) -> dict[str, Any]:
    """Fields of a valid experiment (override any of them)."""
    fields: dict[str, Any] = {
        "change_summary": "Unrolled the inner loop by 4 - +1.90%",
        "score": 1.019,
        "status": "done",
        "operator_sig": "csrc/kernels/cache_kernels.cu: reshape_and_cache_flash",
        "dtype_sig": "bf16",
        "env": "MI300X, ROCm 7.0.0",
        "detailed_description": "**Approach**: unroll 4\n\n**Key insight**: unrolling helps",
        "raw_result": "Iteration 1 Results - SUCCESS",
    }
    fields.update(overrides)
    return fields


@pytest.fixture
def make_experiment(store: Store) -> Callable[..., KernelExperiment]:
    """Create a valid experiment in ``store`` (keyword arguments override fields)."""

    def make(**overrides: Any) -> KernelExperiment:
        return store.create_experiment(**experiment_fields(**overrides))

    return make


def unwrapped(text: str) -> str:
    """A raw result kexp wrote (its lines wrapped at 80 characters) with each wrapped
    paragraph or list item on one line again: a line that follows a line of text and
    starts no list item continues it."""
    lines: list[str] = []
    for line in text.split("\n"):
        if lines and lines[-1].strip() and line.strip() and not line.startswith("- "):
            lines[-1] += " " + line.strip()
        else:
            lines.append(line)
    return "\n".join(lines)


def run_kexp(
    *args: str,
    cwd: Path,
    env: dict[str, str] | None = None,
    input: str | None = None,
    process: bool = False,
) -> subprocess.CompletedProcess[str]:
    """Run the ``kexp`` command in ``cwd``: in-process with click's ``CliRunner`` (fast),
    or, with ``process=True``, as a real ``python -m kexp`` (for what only a process
    shows: start-up, signals, a terminal). Either way a ``CompletedProcess``."""
    if process:
        return subprocess.run(
            [sys.executable, "-m", "kexp", *args],
            cwd=cwd,
            env={**os.environ, **(env or {})},
            capture_output=True,
            text=True,
            input=input,
            timeout=120,
        )
    from click.testing import CliRunner

    from kexp.cli.main import main

    here = os.getcwd()
    os.chdir(cwd)
    try:
        result = CliRunner().invoke(main, list(args), input=input, env=env, prog_name="kexp")
    finally:
        os.chdir(here)
    if result.exception is not None and not isinstance(result.exception, SystemExit):
        raise result.exception
    return subprocess.CompletedProcess(
        ["kexp", *args], result.exit_code, result.stdout, result.stderr
    )


@pytest.fixture
def bundled_root() -> Iterator[Path]:
    """The repository's own store (the bundled experiments)."""
    yield REPO_ROOT


def run_pytest_benchmark(folder: Path, bench: str, side: str, *options: str) -> Path:
    """Run the real pytest-benchmark on the test file ``bench`` in ``folder``, as ``side``
    (the ``SIDE`` variable the benchmark reads), with ``options``: its ``--benchmark-json``
    file."""
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "test_bench.py").write_text(bench, encoding="utf-8")
    out = folder / f"{side}.json"
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "-q",
            "-p",
            "no:cacheprovider",
            "-p",
            "no:xdist",
            "-o",
            "addopts=",
            "test_bench.py",
            f"--benchmark-json={out}",
            "--benchmark-warmup=off",
            *options,
        ],
        cwd=folder,
        env={"PATH": "/usr/bin:/bin", "SIDE": side},
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    return out


@pytest.fixture(scope="module")
def bench_json(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """A ``--benchmark-json`` file pytest-benchmark wrote for :data:`timing_files.BENCH`
    (15 rounds a benchmark): the template :func:`timing_files.write` fills."""
    import json

    from timing_files import BENCH

    folder = tmp_path_factory.mktemp("pytest-benchmark")
    path = run_pytest_benchmark(
        folder, BENCH, "baseline", "--benchmark-min-rounds=15", "--benchmark-max-time=0.000001"
    )
    data: dict[str, Any] = json.loads(path.read_text(encoding="utf-8"))
    return data
