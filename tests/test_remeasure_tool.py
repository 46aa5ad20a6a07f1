"""A round of another tool is not pooled into an experiment's rounds.

Trial J: ``kexp add`` refuses a pytest-benchmark baseline beside a do_bench candidate
(times of different tools or clocks do not compare), yet ``kexp remeasure`` pooled a
do_bench round into an experiment recorded from pytest-benchmark files, its protocol
still saying ``timer: wall_clock``. Now the round is refused in one line naming both
tools, nothing written; a pytest-benchmark round is pooled as before.

pytest-benchmark files are a real run's JSON, its raw ``data`` set to known timings
(:func:`timing_files.write`); do_bench's ``{config: [ms, ...]}`` (:func:`as_do_bench`).
"""

from __future__ import annotations

import json
import random
from pathlib import Path
from typing import Any

from conftest import run_kexp
from timing_files import COMMON, as_do_bench, times, write

#: Each configuration's time (seconds).
CONFIGS = {"n8": 2.0e-6, "n64": 8.0e-6}


def side(rng: random.Random, factor: float) -> dict[str, list[float]]:
    return {config: times(rng, seconds * factor) for config, seconds in CONFIGS.items()}


def recorded(repo: Path, tmp_path: Path, template: dict[str, Any]) -> tuple[str, Path]:
    """An experiment recorded from two pytest-benchmark runs: its id and file."""
    rng = random.Random(7)
    base = write(tmp_path / "base.json", template, side(rng, 1.0))
    cand = write(tmp_path / "cand.json", template, side(rng, 0.8))
    done = run_kexp("add", "--json", "--summary", "Fuse exp and sum - faster", *COMMON,
                    "--baseline", base, "--candidate", cand, cwd=repo)  # fmt: skip
    assert done.returncode == 0, done.stderr
    record = json.loads(done.stdout)
    return record["id"], repo / record["path"]


def test_a_do_bench_round_is_not_pooled_into_pytest_benchmark_rounds(
    repo: Path, tmp_path: Path, bench_json: dict[str, Any]
) -> None:
    exp_id, path = recorded(repo, tmp_path, bench_json)
    before = path.read_bytes()
    rng = random.Random(8)
    base = tmp_path / "db_base.json"
    cand = tmp_path / "db_cand.json"
    base.write_text(as_do_bench(side(rng, 1.0)))
    cand.write_text(as_do_bench(side(rng, 0.8)))
    done = run_kexp("remeasure", exp_id, "--unit", "ms", "--baseline", str(base),
                    "--candidate", str(cand), cwd=repo)  # fmt: skip
    assert done.returncode != 0, done.stdout
    assert done.stderr.count("\n") == 1, done.stderr
    assert "pytest-benchmark" in done.stderr and "timings JSON" in done.stderr, done.stderr
    assert "nothing was written" in done.stderr
    assert path.read_bytes() == before


def test_a_pytest_benchmark_round_is_pooled_as_before(
    repo: Path, tmp_path: Path, bench_json: dict[str, Any]
) -> None:
    exp_id, path = recorded(repo, tmp_path, bench_json)
    rng = random.Random(9)
    base = write(tmp_path / "base2.json", bench_json, side(rng, 1.0))
    cand = write(tmp_path / "cand2.json", bench_json, side(rng, 0.8))
    done = run_kexp("remeasure", exp_id, "--baseline", base, "--candidate", cand, cwd=repo)
    assert done.returncode == 0, done.stderr
    assert '"round": 2' in path.read_text()
