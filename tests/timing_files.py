"""Timing files as the real tools write them, made of known timings: pytest-benchmark's
JSON (a real run's, its raw ``data`` set to the timings: the ``bench_json`` fixture of
conftest.py is that run) and do_bench's. Shared by the tests of load spikes, of noise
round by round and of rounds that disagree."""

from __future__ import annotations

import json
import random
import statistics
from pathlib import Path
from typing import Any

#: Two CPU "kernels" pytest-benchmark times, one a configuration (param).
BENCH = """
import pytest


@pytest.mark.parametrize("n", [8, 64], ids=["n8", "n64"])
def test_sum(benchmark, n):
    benchmark(sum, range(n))
"""

COMMON = ("--operator", "bench.py: sum", "--dtype", "fp32", "--env", "cpu test")


def times(
    rng: random.Random, seconds: float, n: int = 15, slow: tuple[int, ...] = ()
) -> list[float]:
    """``n`` timings of 1 % CV around ``seconds``, those at ``slow`` 1.5-3x slower."""
    drawn = [seconds * rng.lognormvariate(0, 0.01) for _ in range(n)]
    for index in slow:
        drawn[index] *= rng.uniform(1.5, 3.0)
    return drawn


def as_pytest_benchmark(template: dict[str, Any], timings: dict[str, list[float]]) -> str:
    """pytest-benchmark's JSON with each benchmark's raw ``data`` (and the summary
    statistics it writes beside) made ``timings`` (seconds)."""
    data = json.loads(json.dumps(template))
    for bench in data["benchmarks"]:
        drawn = timings[bench["param"]]
        quartiles = statistics.quantiles(drawn, n=4)
        bench["stats"].update(
            data=drawn,
            min=min(drawn),
            max=max(drawn),
            mean=statistics.fmean(drawn),
            median=statistics.median(drawn),
            stddev=statistics.stdev(drawn),
            q1=quartiles[0],
            q3=quartiles[2],
            iqr=quartiles[2] - quartiles[0],
            rounds=len(drawn),
        )
    return json.dumps(data)


def as_do_bench(timings: dict[str, list[float]]) -> str:
    """``{config: do_bench(fn, return_mode="all")}``: milliseconds."""
    return json.dumps({config: [t * 1e3 for t in drawn] for config, drawn in timings.items()})


def write(path: Path, template: dict[str, Any], timings: dict[str, list[float]]) -> str:
    """Write ``timings`` at ``path`` as pytest-benchmark's JSON; the path, as text."""
    path.write_text(as_pytest_benchmark(template, timings), encoding="utf-8")
    return str(path)
