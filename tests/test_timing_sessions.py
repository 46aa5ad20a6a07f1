"""An agent's measuring sessions, step by step, with the timing tools agents really run.

Each test is one step of a session: timings written by the tool itself where it runs
here (pytest-benchmark), or in the documented form of the tool's output (do_bench
lists, nsys and ncu CSV under ``timing_files/``), recorded with the ``kexp`` command
(in-process), and the answer read as a careful engineer reads it: the numbers checked
against the raw timings, the advice checked for a next step, the store checked for
changes it should not have.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from conftest import run_kexp

from kexp.core import noise

FILES = Path(__file__).parent / "timing_files"

#: Two CPU "kernels" pytest-benchmark times: the baseline sums twice the numbers.
BENCH = """
import os

import pytest


@pytest.mark.parametrize("n", [8, 64], ids=["n8", "n64"])
def test_sum(benchmark, n):
    scale = 2 if os.environ["SIDE"] == "baseline" else 1
    benchmark(sum, range(n * scale))
"""

COMMON = ("--operator", "bench.py: sum", "--dtype", "fp32", "--env", "cpu test")


def run_pytest_benchmark(folder: Path, side: str, *options: str) -> Path:
    """Run pytest-benchmark on :data:`BENCH` as ``side``: its ``--benchmark-json`` file."""
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "test_bench.py").write_text(BENCH, encoding="utf-8")
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
def many_rounds(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """pytest-benchmark files of thousands of rounds a benchmark, as it times a fast
    function by default (a second of rounds: 10,000 to 200,000 of them)."""
    folder = tmp_path_factory.mktemp("many-rounds")
    options = ("--benchmark-min-rounds=4000", "--benchmark-max-time=0.000001")
    return (
        run_pytest_benchmark(folder, "baseline", *options),
        run_pytest_benchmark(folder, "candidate", *options),
    )


def rounds_of(path: Path) -> dict[str, int]:
    data: dict[str, Any] = json.loads(path.read_text(encoding="utf-8"))
    return {b["param"]: len(b["stats"]["data"]) for b in data["benchmarks"]}


def test_thousands_of_pytest_benchmark_rounds_are_scored_in_a_few_critical_values(
    repo: Path, many_rounds: tuple[Path, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    """pytest-benchmark keeps every round: thousands a benchmark. The outlier test took
    one Student-t quantile a fifth of the samples (20,000 samples: 4,000 quantiles,
    4.5 s a side; kexp add of a default pytest-benchmark file took 13 s, and every
    kexp validate and first read as long again). Now a few a side, with the same
    outliers found."""
    base, cand = many_rounds
    assert min(rounds_of(base).values()) >= 4000
    calls = []
    quantile = noise.t_quantile

    def counted(p: float, df: float) -> float:
        calls.append(df)
        return quantile(p, df)

    monkeypatch.setattr(noise, "t_quantile", counted)
    noise.esd_critical_value.cache_clear()
    done = run_kexp(
        "add", "--summary", "sum of half the range - faster", *COMMON,
        "--baseline", str(base), "--candidate", str(cand), cwd=repo,
    )
    assert done.returncode == 0, done.stderr
    checked = run_kexp("validate", cwd=repo)
    assert checked.returncode == 0, checked.stdout + checked.stderr
    assert len(calls) < 60, len(calls)
