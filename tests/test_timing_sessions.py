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
import re
from pathlib import Path
from typing import Any

import pytest
from conftest import run_kexp, run_pytest_benchmark

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


@pytest.fixture(scope="module")
def many_rounds(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """pytest-benchmark files of thousands of rounds a benchmark, as it times a fast
    function by default (a second of rounds: 10,000 to 200,000 of them)."""
    folder = tmp_path_factory.mktemp("many-rounds")
    options = ("--benchmark-min-rounds=4000", "--benchmark-max-time=0.000001")
    return (
        run_pytest_benchmark(folder, BENCH, "baseline", *options),
        run_pytest_benchmark(folder, BENCH, "candidate", *options),
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
        "add",
        "--summary",
        "sum of half the range - faster",
        *COMMON,
        "--baseline",
        str(base),
        "--candidate",
        str(cand),
        cwd=repo,
    )
    assert done.returncode == 0, done.stderr
    checked = run_kexp("validate", cwd=repo)
    assert checked.returncode == 0, checked.stdout + checked.stderr
    # One a removal was a fifth of the samples; how many now depends on the real noise
    # of the run timed (a statistic between the first and last critical values costs
    # its own): 30 to 80 here, on a quiet machine and under load, against the bound.
    samples = sum(rounds_of(base).values()) + sum(rounds_of(cand).values())
    assert len(calls) < samples / 40, (len(calls), samples)


def do_bench_lists(
    seed: int, speed: float, configs: dict[str, float], n: int = 60, cv: float = 0.02
) -> dict[str, list[float]]:
    """What ``{config: triton.testing.do_bench(fn, return_mode="all")}`` gives: per
    configuration a list of milliseconds (log-normal noise of ``cv``)."""
    import random

    rng = random.Random(seed)
    return {
        config: [round(ms * speed * rng.lognormvariate(0, cv), 6) for _ in range(n)]
        for config, ms in configs.items()
    }


SHAPES = {"b1_s128": 0.0123, "b8_s1024": 0.0871, "b32_s4096": 1.234}


def write_json(path: Path, data: Any) -> Path:
    path.write_text(json.dumps(data), encoding="utf-8")
    return path


def recorded_id(stdout: str) -> str:
    """The id ``kexp add`` printed (``recorded ID PATH``)."""
    return stdout.split()[1].rstrip(":")


def test_a_remeasure_round_in_milliseconds_read_as_microseconds_is_refused(
    repo: Path, tmp_path: Path
) -> None:
    """do_bench lists are milliseconds: recorded with --unit ms, then a second round
    given without it. kexp pooled the round 1000x too fast with the first: the score's
    interval went from [1.05, 1.06] to [0.72, 1.54], the outcome from improvement to
    marginal, the file rewritten, with no word. Now refused, naming --unit ms, the
    file unchanged."""
    files = {
        name: write_json(tmp_path / f"{name}.json", do_bench_lists(seed, speed, SHAPES))
        for name, seed, speed in (("b1", 1, 1.0), ("c1", 2, 0.95), ("b2", 3, 1.0), ("c2", 4, 0.95))
    }
    added = run_kexp(
        "add",
        "--summary",
        "vectorized loads - faster",
        *COMMON,
        "--unit",
        "ms",
        "--protocol",
        "timer=do_bench",
        "--baseline",
        str(files["b1"]),
        "--candidate",
        str(files["c1"]),
        cwd=repo,
    )
    assert added.returncode == 0, added.stderr
    exp_id = recorded_id(added.stdout)
    (path,) = (repo / "experiments").rglob(f"{exp_id}-*.md")
    before = path.read_bytes()

    again = run_kexp(
        "remeasure",
        exp_id,
        "--baseline",
        str(files["b2"]),
        "--candidate",
        str(files["c2"]),
        cwd=repo,
    )
    assert again.returncode != 0
    assert path.read_bytes() == before
    (line,) = again.stderr.strip().splitlines()
    assert "unit='ms'" in line and "nothing was changed" in line and "Traceback" not in line

    right = run_kexp(
        "remeasure",
        exp_id,
        "--baseline",
        str(files["b2"]),
        "--candidate",
        str(files["c2"]),
        "--unit",
        "ms",
        "--json",
        cwd=repo,
    )
    assert right.returncode == 0, right.stderr
    assert json.loads(right.stdout)["outcome"] == "improvement"


def test_raw_samples_too_large_for_the_file_say_to_record_without_them(
    repo: Path, many_rounds: tuple[Path, Path]
) -> None:
    """pytest-benchmark times a fast function 200,000 rounds by default: the raw samples
    took 4.6 MB, over max_file_bytes, and kexp add answered "move large logs or profiles
    out of the experiment" (there are none). Now it says the samples are what is large
    and to record with --no-samples or time fewer rounds; nothing written. The same
    store's limit is lowered here to make 4,000 rounds too many."""
    (repo / "kexp.toml").write_text("max_file_bytes = 60000\n", encoding="utf-8")
    base, cand = many_rounds
    refused = run_kexp(
        "add",
        "--summary",
        "sum of half the range - faster",
        *COMMON,
        "--baseline",
        str(base),
        "--candidate",
        str(cand),
        cwd=repo,
    )
    assert refused.returncode != 0
    (line,) = refused.stderr.strip().splitlines()
    assert "raw samples" in line and "no-samples" in line and "--benchmark-max-time" in line
    assert "nothing was written" in line
    assert not list((repo / "experiments").rglob("*-*.md"))

    kept = run_kexp(
        "add",
        "--summary",
        "sum of half the range - faster",
        *COMMON,
        "--baseline",
        str(base),
        "--candidate",
        str(cand),
        "--no-samples",
        "--json",
        cwd=repo,
    )
    assert kept.returncode == 0, kept.stderr


def noisy_table(path: Path) -> Path:
    """A ``config,baseline,candidate`` CSV in nanoseconds: 8 noisy rows (15 % CV, one
    baseline run 3x slow) of a candidate 3 % faster, too few to tell."""
    import random

    rng = random.Random(9)
    lines = ["config,baseline,candidate"]
    for config, us in (("m1024", 10.0), ("m4096", 40.0)):
        for i in range(8):
            base = us * rng.lognormvariate(0, 0.15) * (3 if i == 3 else 1)
            cand = us * 0.97 * rng.lognormvariate(0, 0.15)
            lines.append(f"{config},{base * 1000:.0f},{cand * 1000:.0f}")
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def test_add_from_timings_answers_the_score_its_interval_and_what_next(
    repo: Path, tmp_path: Path
) -> None:
    """kexp add with timings computed a score, an interval and an outcome, and printed
    only "recorded ID PATH": an agent had to run kexp show to learn that its noisy run
    was within noise. Now the answer says the score and interval (checked here against
    the raw rows), the outcome, and with an interval holding 1, to remeasure."""
    import math
    import statistics

    table = noisy_table(tmp_path / "noisy.csv")
    rows = [line.split(",") for line in table.read_text(encoding="utf-8").split()[1:]]
    speedups = []
    for config in ("m1024", "m4096"):
        base = [float(r[1]) for r in rows if r[0] == config]
        cand = [float(r[2]) for r in rows if r[0] == config]
        del base[3]  # the run 3x slow: an outlier, set aside
        speedups.append(statistics.median(base) / statistics.median(cand))
    truth = round(math.exp(statistics.fmean(map(math.log, speedups))), 4)

    done = run_kexp(
        "add",
        "--summary",
        "tiled gemm - within noise",
        *COMMON,
        "--table",
        str(table),
        "--unit",
        "ns",
        cwd=repo,
    )
    assert done.returncode == 0, done.stderr
    first, second = done.stdout.strip().splitlines()
    exp_id = recorded_id(first)
    assert second.split()[:2] == ["score", f"{truth:.4f}"]
    low, high = (float(x) for x in second.split("[")[1].split("]")[0].split(","))
    assert low < 1 < high and low < truth < high
    assert "marginal" in second and f"kexp remeasure {exp_id}" in second

    as_json = run_kexp(  # on another machine (on this one: the same record made again)
        "add",
        "--summary",
        "tiled gemm again - within noise",
        *COMMON[:-1],
        "cpu test 2",
        "--table",
        str(table),
        "--unit",
        "ns",
        "--json",
        cwd=repo,
    )
    answer = json.loads(as_json.stdout)
    assert (answer["score"], answer["score_ci"], answer["outcome"]) == (
        truth,
        [low, high],
        "marginal",
    )
    # The same timings as an A/A run (tag control): the noise floor, nothing to remeasure
    # (on a third machine: on either of the others, the same record made again).
    control = run_kexp(
        "add",
        "--summary",
        "A/A run - same code",
        *COMMON[:-1],
        "cpu test 3",
        "--tag",
        "control",
        "--table",
        str(table),
        "--unit",
        "ns",
        cwd=repo,
    )
    assert control.returncode == 0, control.stderr
    line = control.stdout.strip().splitlines()[1]
    assert "remeasure" not in line and "A/A" in line and "noise floor" in line, line


def test_do_bench_milliseconds_read_as_microseconds_are_named_as_such(
    repo: Path, tmp_path: Path
) -> None:
    """do_bench lists recorded without --unit ms: kexp warned "suspect: verify
    correctness ... near zero", never what went wrong. Now they are refused (no unit
    given, times below any kernel launch as microseconds), in one line saying that the
    times may be milliseconds and how to record them."""
    base = write_json(tmp_path / "b.json", do_bench_lists(1, 1.0, SHAPES))
    cand = write_json(tmp_path / "c.json", do_bench_lists(2, 0.95, SHAPES))
    done = run_kexp(
        "add",
        "--summary",
        "vectorized loads - faster",
        *COMMON,
        "--protocol",
        "timer=do_bench",
        "--baseline",
        str(base),
        "--candidate",
        str(cand),
        cwd=repo,
    )
    assert done.returncode != 0 and len(done.stderr.splitlines()) == 1, done.stderr
    said = [line for line in done.stderr.splitlines() if "--unit ms (unit='ms'" in line]
    assert len(said) == 1 and "do_bench returns milliseconds" in said[0]

    right = run_kexp(
        "add",
        "--summary",
        "vectorized loads - faster again",
        *COMMON,
        "--unit",
        "ms",
        "--protocol",
        "timer=do_bench",
        "--baseline",
        str(base),
        "--candidate",
        str(cand),
        cwd=repo,
    )
    assert right.returncode == 0 and right.stderr == "", right.stderr


def test_sides_timed_by_different_tools_are_one_error_before_any_warning(
    repo: Path, tmp_path: Path
) -> None:
    """A KernelBench baseline given with do_bench lists as the candidate: kexp warned
    "KernelBench timings are summaries ...: recorded without an interval", then refused
    with a list of every configuration of both. Now one line: the two tools, and to
    time both sides with the same one; no warning of a recording that did not happen."""
    cand = write_json(tmp_path / "c.json", do_bench_lists(2, 0.95, SHAPES))
    for base in (FILES / "kernelbench_baseline.json", FILES / "nsys_kern_sum_baseline.csv"):
        refused = run_kexp(
            "add",
            "--summary",
            "mixed tools - x",
            *COMMON,
            "--unit",
            "ms",
            "--baseline",
            str(base),
            "--candidate",
            str(cand),
            cwd=repo,
        )
        assert refused.returncode != 0
        (line,) = refused.stderr.strip().splitlines()
        assert "same tool" in line and "timings JSON" in line and "recorded" not in line
    assert not list((repo / "experiments").rglob("*-*.md"))


def test_sides_of_different_tools_or_clocks_are_refused_whatever_they_share(
    repo: Path, tmp_path: Path
) -> None:
    """A pytest-benchmark baseline (a host wall clock, seconds) and a do_bench candidate
    (milliseconds) of the same configurations: kexp recorded a 6.9x step, flagged
    suspect but written (trial 20); only tools without a configuration in common were
    refused. Now one rule: different tools, or one tool's different clocks, are one
    line saying to time both sides with the same tool, and nothing is written."""
    options = ("--benchmark-min-rounds=5", "--benchmark-max-time=0.000001")
    base = run_pytest_benchmark(tmp_path, BENCH, "baseline", *options)
    configs = [b["param"] for b in json.loads(base.read_text(encoding="utf-8"))["benchmarks"]]
    cand = write_json(tmp_path / "c.json", do_bench_lists(5, 1.0, dict.fromkeys(configs, 0.01)))
    cpu = run_pytest_benchmark(
        tmp_path / "cpu", BENCH, "candidate", *options, "--benchmark-timer=time.process_time"
    )
    for candidate, unit, names in (
        (cand, ("--unit", "ms"), ("pytest-benchmark", "timings JSON")),
        (cpu, (), ("wall_clock", "timer other")),
    ):
        refused = run_kexp(
            "add", "--summary", "mixed tools - x", *COMMON, *unit,
            "--baseline", str(base), "--candidate", str(candidate), cwd=repo,
        )  # fmt: skip
        assert refused.returncode != 0, refused.stdout
        (line,) = refused.stderr.strip().splitlines()
        assert "same tool" in line and all(n in line for n in names), line
        assert "Traceback" not in refused.stderr
    assert not list((repo / "experiments").rglob("*-*.md"))


@pytest.mark.parametrize("samples", [1, 2, 3])
def test_too_few_timings_for_an_interval_say_how_to_give_every_timing(
    repo: Path, tmp_path: Path, samples: int
) -> None:
    """do_bench's default return is one number a configuration (a mean): kexp recorded
    it an "improvement" without an interval and without a word (trial 20), where nsys
    and KernelBench summaries warn. Now one timing or two on a side warn that the
    score has no interval, and how to give every timing (return_mode="all"); three a
    side give an interval, without the warning."""
    lists = {"base": do_bench_lists(1, 1.0, SHAPES, n=samples)}
    lists["cand"] = do_bench_lists(2, 0.95, SHAPES, n=samples)
    files = {name: write_json(tmp_path / f"{name}.json", data) for name, data in lists.items()}
    if samples == 1:  # exactly what do_bench returns by default: a number, not a list
        for name, data in lists.items():
            write_json(files[name], {config: times[0] for config, times in data.items()})

    done = run_kexp(
        "add", "--summary", "vectorized loads - faster", *COMMON, "--unit", "ms",
        "--baseline", str(files["base"]), "--candidate", str(files["cand"]), "--json",
        cwd=repo,
    )  # fmt: skip

    assert done.returncode == 0, done.stderr
    recorded = json.loads(done.stdout)
    said = [line for line in done.stderr.splitlines() if "too few for an interval" in line]
    if samples >= noise.MIN_SAMPLES:
        assert recorded["score_ci"] and said == [], done.stderr
        return
    assert recorded["score_ci"] == []
    (line,) = said
    assert f"{next(iter(SHAPES))}: {samples} timing(s) on a side" in line, line
    assert 'return_mode="all"' in line and "without one" in line, line


def test_timings_all_one_value_say_the_timer_is_too_coarse(repo: Path, tmp_path: Path) -> None:
    """A 2 us kernel timed by CUDA events: every sample is 2.048 us, both sides. kexp
    recorded "1.0000 [1.0000, 1.0000]", an interval of no width (a noise floor of
    zero, were it a control), without a word. Now a warning says the timer's
    resolution hides the noise and what to time instead; no remeasure is advised
    (another round of the same values cannot narrow anything)."""
    import random

    rng = random.Random(3)
    tick = 0.001024

    def quantized(ms: float) -> list[float]:
        return [round(round(ms * rng.lognormvariate(0, 0.03) / tick) * tick, 6) for _ in range(50)]

    base = write_json(tmp_path / "b.json", {"tiny": quantized(0.00205)})
    cand = write_json(tmp_path / "c.json", {"tiny": quantized(0.00200)})
    assert len(set(json.loads(base.read_text())["tiny"])) == 1
    done = run_kexp(
        "add",
        "--summary",
        "tiny kernel - x",
        *COMMON,
        "--unit",
        "ms",
        "--protocol",
        "timer=cuda_events",
        "--baseline",
        str(base),
        "--candidate",
        str(cand),
        cwd=repo,
    )
    assert done.returncode == 0, done.stderr
    (line,) = done.stderr.strip().splitlines()
    assert "tiny: every baseline timing is 2.048 us" in line and "resolution" in line
    assert "remeasure" not in done.stdout


#: A benchmark whose candidate crashes on one configuration (CRASH set).
CRASHING_BENCH = """
import os

import pytest


@pytest.mark.parametrize("cfg", ["small", "large"])
def test_k(benchmark, cfg):
    if os.environ.get("CRASH") and cfg == "large":
        raise RuntimeError("CUDA error: an illegal memory access was encountered")
    benchmark.pedantic(sum, args=(range(2000),), rounds=5, iterations=1)
"""


def test_a_candidate_that_crashed_on_one_configuration_is_said_with_how_to_record_it(
    repo: Path, tmp_path: Path
) -> None:
    """pytest-benchmark leaves a benchmark that failed out of its JSON: kexp add said
    only that the sides measured different configurations (trial 17). Now it says the
    candidate may have failed there, and the failure's record it prints (the skill's
    way: --status failed --buggy --score 0 --error-file) runs with its placeholders
    filled in."""
    import shlex
    import subprocess
    import sys

    (tmp_path / "test_k.py").write_text(CRASHING_BENCH, encoding="utf-8")
    sides = {}
    for side, crash in (("base", ""), ("cand", "1")):
        sides[side] = tmp_path / f"{side}.json"
        ran = subprocess.run(
            [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "no:xdist",
             "-o", "addopts=", "test_k.py", f"--benchmark-json={sides[side]}"],
            cwd=tmp_path, env={"PATH": "/usr/bin:/bin", "CRASH": crash},
            capture_output=True, text=True, timeout=300,
        )  # fmt: skip
        assert ran.returncode == (1 if crash else 0), ran.stdout + ran.stderr
    assert "large" not in sides["cand"].read_text()

    said = run_kexp(
        "add", "--summary", "Split rows - crash on large", *COMMON,
        "--baseline", str(sides["base"]), "--candidate", str(sides["cand"]), cwd=repo,
    )  # fmt: skip
    assert said.returncode != 0 and not list((repo / "experiments").rglob("*-*.md"))
    (line,) = said.stderr.strip().splitlines()
    assert "only in the baseline: large" in line and "candidate may have failed" in line, line
    printed = re.search(r"(kexp add [^()]*--error-file FILE[^()]*?) \(FILE", line)
    assert printed is not None, line
    command = printed.group(1)
    for flag in ("--status failed", "--buggy", "--score 0"):
        assert flag in command, command
    (tmp_path / "err.txt").write_text("CUDA error: an illegal memory access was encountered\n")
    values = {"TEXT": "'Split rows - crash on large'", "FILE": str(tmp_path / "err.txt"),
              "OP": "'bench.py: sum'", "DTYPE": "fp32", "ENV": "'cpu test'"}  # fmt: skip
    words = [values.get(word, word) for word in command.split()]
    done = run_kexp(*shlex.split(" ".join(words))[1:], "--json", cwd=repo)
    assert done.returncode == 0, done.stderr
    recorded = json.loads(done.stdout)
    assert (recorded["outcome"], recorded["score"]) == ("buggy", 0), recorded


@pytest.mark.parametrize(
    ("timer", "recorded"),
    [(None, "wall_clock"), ("time.process_time", "other"), ("time.perf_counter", "wall_clock")],
)
def test_pytest_benchmark_timed_with_a_cpu_clock_is_not_recorded_as_a_wall_clock(
    repo: Path, tmp_path: Path, timer: str | None, recorded: str
) -> None:
    """An agent timed its CPU stand-in with ``--benchmark-timer=time.process_time``
    (steadier on a loaded machine): pytest-benchmark's JSON names the timer
    (``options.timer: process_time``), but kexp recorded ``timer: wall_clock``, and
    ``kexp show`` and ``kexp review`` said it was measured so (trial 18). Now a timer
    other than a wall clock is ``timer: other``, with one warning saying what it
    measured; the default timer, named or not, is still a wall clock, without one. A
    CPU clock timed CPU work: ``device: cpu`` (as when it was taken for a wall clock on
    a machine without a GPU), whatever the machine; ``--protocol device=gpu`` wins."""
    options = ("--benchmark-min-rounds=5", "--benchmark-max-time=0.000001")
    if timer is not None:
        options += (f"--benchmark-timer={timer}",)
    base = run_pytest_benchmark(tmp_path, BENCH, "baseline", *options)
    cand = run_pytest_benchmark(tmp_path, BENCH, "candidate", *options)
    named = json.loads(cand.read_text(encoding="utf-8"))["benchmarks"][0]["options"]["timer"]
    assert named == (timer or "time.perf_counter").rsplit(".", 1)[-1]
    done = run_kexp(
        "add", "--summary", "sum of half the range - faster", *COMMON,
        "--baseline", str(base), "--candidate", str(cand), "--json", cwd=repo,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    exp_id = json.loads(done.stdout)["id"]
    shown = run_kexp("show", exp_id, "--json", "--fields", "protocol", cwd=repo)
    protocol = json.loads(shown.stdout)["protocol"]
    assert protocol["timer"] == recorded, shown.stdout
    timer_lines = [line for line in done.stderr.splitlines() if "timed with" in line]
    if recorded == "wall_clock":
        assert timer_lines == [], done.stderr
        return
    assert protocol.get("device") == "cpu", shown.stdout
    (line,) = timer_lines
    assert "process_time (the CPU time of the process" in line, line
    assert "recorded as protocol timer other, device cpu" in line, line
    assert "time.perf_counter" in line, line
    told = run_kexp(
        "add", "--summary", "sum of half the range - faster", *COMMON, "--protocol",
        "device=gpu", "--baseline", str(base), "--candidate", str(cand), "--json",
        "--operator", "bench.py: sum2", cwd=repo,
    )  # fmt: skip
    assert told.returncode == 0, told.stderr
    told_id = json.loads(told.stdout)["id"]
    shown = run_kexp("show", told_id, "--json", "--fields", "protocol", cwd=repo)
    assert json.loads(shown.stdout)["protocol"]["device"] == "gpu", shown.stdout


def test_timings_given_inline_beside_a_tools_file_warn_to_time_both_alike(
    repo: Path, tmp_path: Path
) -> None:
    """An agent gives pytest-benchmark's file as the baseline and its own timings of the
    candidate inline (a JSON object: no tool named): kexp recorded them silently, though
    the rule is to time both sides with the same tool and clock. It records them with a
    one-line warning naming the baseline's tool and saying to time both sides alike;
    both sides inline (one program timed both) warn of nothing of the kind."""
    pytest.importorskip("mcp")
    from test_mcp import Agent, run_agent

    options = ("--benchmark-min-rounds=5", "--benchmark-max-time=0.000001")
    base = run_pytest_benchmark(tmp_path, BENCH, "baseline", *options)
    timed = {b["param"]: b["stats"]["data"] for b in json.loads(base.read_text())["benchmarks"]}
    mine = {c: [s * 1e6 * 0.9 for s in samples] for c, samples in timed.items()}  # (µs)
    fields = {
        "change_summary": "Sum once - x", "operator_sig": "bench.py: sum", "dtype_sig": "fp32",
        "env": "cpu test", "unit": "us",
    }  # fmt: skip

    async def work(agent: Agent) -> None:
        failed, texts = await agent.call("record", baseline=str(base), candidate=mine, **fields)
        assert not failed, texts
        said = [t for t in texts[1:] if "same tool" in t]
        assert len(said) == 1 and len(said[0].splitlines()) == 1, texts
        assert "pytest-benchmark" in said[0] and "candidate" in said[0], said
        both = [{c: [s * 1e6 * f for s in samples] for c, samples in timed.items()}
                for f in (1.0, 0.85)]  # fmt: skip
        failed, texts = await agent.call("record", baseline=both[0], candidate=both[1], **fields)
        assert not failed and not [t for t in texts[1:] if "same tool" in t], texts

    run_agent(repo, work)
    assert len(list((repo / "experiments").rglob("*-*.md"))) == 2
