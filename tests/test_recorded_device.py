"""Where timings ran (``protocol.device``), as ``kexp add`` records it from a wall clock's
files: the GPU the record's env names, wherever the record is made (an agent's
controller box, CI: machines without a GPU), so that a short GPU kernel timed by an
unsynchronised wall clock is flagged suspect; the CPU of a machine without a GPU when
the env names none; an explicit ``--protocol device=`` always."""

from __future__ import annotations

import json
import random
import statistics
from pathlib import Path
from typing import Any

import pytest
from conftest import experiment_fields, run_kexp

from kexp.format.suspect import suspect_reasons
from kexp.storage.store import Store

#: A GPU kernel's times (microseconds) per configuration, as pytest-benchmark timed it.
KERNEL_US = {
    "t256_h8_d128": 5.71,
    "t1024_h8_d128": 8.46,
    "t4096_h8_d128": 20.41,
    "t4096_h32_d128": 73.7,
    "t16384_h8_d128": 74.8,
}
GPU_ENV = "MI300X, ROCm 7.0.0"
CPU_ENV = "AMD EPYC 9654 (96 cores), gcc 12.2.0, Ubuntu 22.04.4 LTS, Python 3.11.9"
UNSYNCHRONISED = "GPU kernel timed with a wall clock without device synchronisation"


def pytest_benchmark_json(path: Path, scale: float, seed: int) -> Path:
    """A ``pytest --benchmark-json`` file of :data:`KERNEL_US` times ``scale``, 30 rounds
    each (seconds, pytest-benchmark's default timer, ``time.perf_counter``)."""
    rnd = random.Random(seed)
    benchmarks: list[dict[str, Any]] = []
    for config, us in KERNEL_US.items():
        data = [us * scale * (1 + rnd.gauss(0, 0.004)) * 1e-6 for _ in range(30)]
        q1, _, q3 = statistics.quantiles(data, n=4)
        stats = {
            "min": min(data),
            "max": max(data),
            "mean": statistics.mean(data),
            "stddev": statistics.stdev(data),
            "rounds": 30,
            "median": statistics.median(data),
            "iqr": q3 - q1,
            "q1": q1,
            "q3": q3,
            "iqr_outliers": 0,
            "stddev_outliers": 0,
            "outliers": "0;0",
            "ld15iqr": min(data),
            "hd15iqr": max(data),
            "ops": 1 / statistics.mean(data),
            "total": sum(data),
            "data": data,
            "iterations": 1,
        }
        options = {
            "disable_gc": False,
            "timer": "perf_counter",
            "min_rounds": 30,
            "max_time": 1.0,
            "min_time": 5e-06,
            "warmup": False,
        }
        benchmarks.append(
            {
                "group": None,
                "name": f"test_cache[{config}]",
                "fullname": f"bench_cache.py::test_cache[{config}]",
                "params": {"cfg": config},
                "param": config,
                "extra_info": {},
                "options": options,
                "stats": stats,
            }
        )
    document = {
        "machine_info": {"node": "mi300x-07", "processor": "x86_64"},
        "commit_info": {},
        "benchmarks": benchmarks,
        "datetime": "2026-12-07T20:00:00.000000+00:00",
        "version": "4.0.0",
    }
    path.write_text(json.dumps(document), encoding="utf-8")
    return path


def record(repo: Path, tmp_path: Path, *options: str, seed: int = 2) -> str:
    """``kexp add`` of a 3% faster candidate against a baseline, both pytest-benchmark
    files; the id it printed."""
    base = pytest_benchmark_json(tmp_path / f"base{seed}.json", 1.0, 1)
    cand = pytest_benchmark_json(tmp_path / f"cand{seed}.json", 0.9709, seed)
    done = run_kexp(
        "add",
        "--baseline",
        str(base),
        "--candidate",
        str(cand),
        "--description",
        "**Approach**: non-temporal stores.\n\n**Key insight**: fewer cache lines kept.",
        "--json",
        *options,
        cwd=repo,
    )
    assert done.returncode == 0, done.stderr
    return str(json.loads(done.stdout)["id"])


@pytest.mark.usefixtures("cpu_machine")
def test_gpu_timings_recorded_on_a_machine_without_a_gpu_are_the_gpus(
    repo: Path, store: Store, tmp_path: Path
) -> None:
    """The env the step takes from its parent names a GPU (MI300X, ROCm): the wall
    clock timed that GPU, though the record is made on a box without one, so its 5.7 us
    kernel timed without synchronisation is flagged suspect, as it is when the record
    says ``--protocol device=gpu``."""
    parent = store.create_experiment(**experiment_fields(env=GPU_ENV))
    exp_id = record(repo, tmp_path, "--summary", "Non-temporal stores", "--pid", parent.id[:10])

    exp = Store(repo).get_experiment(exp_id)
    assert exp.env == GPU_ENV
    assert exp.protocol["device"] == "gpu"
    assert any(UNSYNCHRONISED in reason for reason in suspect_reasons(exp))
    listed = run_kexp("list", "--json", "--fields", "id,protocol,suspect", cwd=repo)
    (entry,) = [e for e in json.loads(listed.stdout) if e["id"] == exp_id]
    assert entry["protocol"]["device"] == "gpu"
    assert any(UNSYNCHRONISED in reason for reason in entry["suspect"])


@pytest.mark.usefixtures("cpu_machine")
def test_a_root_whose_env_names_a_gpu_runtime_alone_is_the_gpus(repo: Path, tmp_path: Path) -> None:
    """A root, its env given (a runtime, no GPU model): the GPU ran it."""
    exp_id = record(
        repo,
        tmp_path,
        "--summary",
        "Non-temporal stores",
        "--operator",
        "csrc/kernels/cache_kernels.cu: reshape_and_cache_flash",
        "--dtype",
        "bf16",
        "--env",
        "torch 2.5.1+rocm6.2",
    )
    assert Store(repo).get_experiment(exp_id).protocol["device"] == "gpu"


@pytest.mark.usefixtures("cpu_machine")
def test_timings_of_an_env_naming_a_cpu_alone_are_the_cpus(
    repo: Path, store: Store, tmp_path: Path
) -> None:
    """On a machine without a GPU, an env naming its CPU alone: the wall clock timed the
    CPU (``device: cpu``, as before), never flagged as an unsynchronised GPU kernel."""
    parent = store.create_experiment(**experiment_fields(env=CPU_ENV))
    exp_id = record(repo, tmp_path, "--summary", "Non-temporal stores", "--pid", parent.id[:10])

    exp = Store(repo).get_experiment(exp_id)
    assert exp.protocol["device"] == "cpu"
    assert not any(UNSYNCHRONISED in reason for reason in suspect_reasons(exp))


@pytest.mark.parametrize("machine", ["cpu_machine", "gpu_machine"])
def test_the_device_given_wins_over_the_env(
    repo: Path, store: Store, tmp_path: Path, machine: str, request: pytest.FixtureRequest
) -> None:
    """``--protocol device=cpu`` is what the record says, whatever its env names and
    whatever the machine it is made on."""
    request.getfixturevalue(machine)
    parent = store.create_experiment(**experiment_fields(env=GPU_ENV))
    exp_id = record(
        repo,
        tmp_path,
        "--summary",
        "Non-temporal stores",
        "--pid",
        parent.id[:10],
        "--protocol",
        "device=cpu",
    )
    exp = Store(repo).get_experiment(exp_id)
    assert exp.protocol["device"] == "cpu"
    assert not any(UNSYNCHRONISED in reason for reason in suspect_reasons(exp))
