"""Timing files as the tools write them, sniffed and read, then recorded in a real store.

pytest-benchmark files come from running pytest-benchmark on a small CPU function here;
the torch.utils.benchmark files were written by torch (``timing_files/README.md``);
KernelBench, nsys and ncu files follow those tools' formats. Every expectation is read
from the files themselves (the truth), not typed in.
"""

from __future__ import annotations

import csv
import io
import json
import math
import statistics
import warnings
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from conftest import experiment_fields, run_pytest_benchmark, unwrapped

from kexp import Store
from kexp.cli.main import main
from kexp.core.errors import MeasurementError, TimingsWarning
from kexp.format.suspect import suspect_reasons
from kexp.measure.record import record_iteration
from kexp.measure.remeasure import remeasure
from kexp.measure.timings import FORMATS, profiling_info, read_timings, readers, sniff

FILES = Path(__file__).parent / "timing_files"

#: The note a pytest-benchmark step within a common drift of 1 gets with no control on
#: its env (real timings fall either side of it).
ONE_RUN_NOTE = r".*covers the noise within one pytest-benchmark run"

#: The benchmark pytest-benchmark times: a softmax on a few rows, in pure Python (a
#: CPU kernel), the candidate a little faster than the baseline.
BENCH = """
import math
import os

import pytest


def softmax(rows, cols, fast):
    x = [[(i * cols + j) % 7 / 7 for j in range(cols)] for i in range(rows)]
    out = []
    for row in x:
        top = max(row)
        e = list(map(math.exp, [v - top for v in row])) if fast else [
            math.exp(v - top) for v in row
        ]
        total = math.fsum(e) if not fast else sum(e)
        out.append([v / total for v in e])
    return out


@pytest.mark.parametrize("rows,cols", [(2, 16), (4, 16)], ids=["r2_c16", "r4_c16"])
def test_softmax(benchmark, rows, cols):
    benchmark(softmax, rows, cols, os.environ["SIDE"] == "candidate")
"""


def run_both_outputs(folder: Path, side: str) -> tuple[Path, Path]:
    """Run pytest-benchmark on :data:`BENCH` as ``side``: the ``--benchmark-json`` file
    and the ``--benchmark-save`` file (saved without ``--benchmark-save-data``)."""
    json_file = run_pytest_benchmark(
        folder,
        BENCH,
        side,
        f"--benchmark-save={side}",
        f"--benchmark-storage=file://{folder / 'saved'}",
        "--benchmark-min-rounds=5",
        "--benchmark-max-time=0.005",
    )
    (saved,) = (folder / "saved").glob(f"*/*_{side}.json")
    return json_file, saved


@pytest.fixture(scope="module")
def pytest_benchmark_files(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """The files pytest-benchmark wrote: ``{side}_json`` (raw data) and ``{side}_saved``
    (no raw data), for the baseline and the candidate."""
    folder = tmp_path_factory.mktemp("pytest-benchmark")
    files: dict[str, Path] = {}
    for side in ("baseline", "candidate"):
        files[f"{side}_json"], files[f"{side}_saved"] = run_both_outputs(folder, side)
    return files


def fields(**overrides: Any) -> dict[str, Any]:
    # timed here, the score is this machine's: a summary stating none (kexp add warns of
    # a figure the score contradicts)
    summary = {"change_summary": "Unrolled the inner loop by 4 - timed"}
    data = experiment_fields(**{**summary, **overrides})
    data.pop("score", None)
    data.pop("raw_result", None)
    return data


#: The env of a machine without a GPU, as kexp env names one: the CPU timed there.
CPU_ENV = "AMD EPYC 9654 (96 cores), gcc 12.2.0, Ubuntu 22.04.4 LTS, Python 3.11.9"


def benchmarks(path: Path) -> list[dict[str, Any]]:
    return list(json.loads(path.read_text(encoding="utf-8"))["benchmarks"])


# --- pytest-benchmark --------------------------------------------------------------------


@pytest.mark.usefixtures("cpu_machine")
def test_pytest_benchmark_with_raw_data_gives_samples_named_by_param(
    store: Store, pytest_benchmark_files: dict[str, Path]
) -> None:
    base, cand = pytest_benchmark_files["baseline_json"], pytest_benchmark_files["candidate_json"]
    truth = {b["param"]: [t * 1e6 for t in b["stats"]["data"]] for b in benchmarks(base)}
    assert sniff(base) == "pytest-benchmark"
    found = read_timings(base)
    assert list(found.times) == ["r2_c16", "r4_c16"] == list(truth)
    for config, samples in truth.items():
        assert found.times[config] == pytest.approx(samples, rel=1e-9)
    assert not found.summary and not found.warnings

    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no warning at all: raw samples, a CPU kernel
        # (but, as these real timings fall, that one run a side cannot show the drift)
        warnings.filterwarnings("ignore", ONE_RUN_NOTE, TimingsWarning)
        exp = record_iteration(store, baseline=base, candidate=cand, **fields(env=CPU_ENV))
    assert [r["config"] for r in exp.results] == ["r2_c16", "r4_c16"]
    assert [r["baseline_n"] for r in exp.results] == [len(truth[c]) for c in truth]
    assert len(exp.score_ci) == 2 and "## Samples" in exp.path.read_text(encoding="utf-8")
    iterations = {b["stats"]["iterations"] for b in benchmarks(cand)}
    expected: dict[str, Any] = {"timer": "wall_clock", "device": "cpu"}
    if len(iterations) == 1:
        expected["repetitions"] = iterations.pop()
    assert exp.protocol == expected
    assert not any("GPU kernel" in r for r in suspect_reasons(exp))


@pytest.mark.usefixtures("cpu_machine")
def test_pytest_benchmark_saved_without_data_warns_and_has_no_interval(
    store: Store, pytest_benchmark_files: dict[str, Path]
) -> None:
    base, cand = pytest_benchmark_files["baseline_saved"], pytest_benchmark_files["candidate_saved"]
    assert all("data" not in b["stats"] for b in benchmarks(base))
    with pytest.warns(TimingsWarning) as caught:
        exp = record_iteration(store, baseline=base, candidate=cand, **fields(env=CPU_ENV))
    messages = [str(w.message) for w in caught if issubclass(w.category, TimingsWarning)]
    assert len(messages) == 2  # one per file
    assert all("--benchmark-save-data" in m and "--benchmark-json" in m for m in messages)
    assert exp.score_ci == [] and "## Samples" not in exp.path.read_text(encoding="utf-8")
    medians = {
        side: {b["param"]: b["stats"]["median"] * 1e6 for b in benchmarks(path)}
        for side, path in (("baseline", base), ("candidate", cand))
    }
    rounds = {b["param"]: b["stats"]["rounds"] for b in benchmarks(base)}
    for result in exp.results:
        config = result["config"]
        assert result["baseline"] == pytest.approx(medians["baseline"][config], rel=1e-9)
        assert result["candidate"] == pytest.approx(medians["candidate"][config], rel=1e-9)
        assert result["baseline_n"] == rounds[config]
    speedups = [medians["baseline"][c] / medians["candidate"][c] for c in rounds]
    assert exp.score == round(math.exp(statistics.fmean(map(math.log, speedups))), 4)
    assert "summaries without raw samples" in unwrapped(exp.raw_result)
    assert "no raw samples" in unwrapped(exp.raw_result).splitlines()[-1]


def test_a_cpu_kernel_timed_by_pytest_benchmark_is_not_a_gpu_kernel(
    store: Store,
    pytest_benchmark_files: dict[str, Path],
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
) -> None:
    """Recorded on a machine without a GPU, its env naming the CPU alone, a wall clock
    timed the CPU: never flagged "a GPU kernel timed without device synchronisation". On
    a machine with a GPU, of an env naming none, kexp cannot tell, until the protocol
    says ``device: cpu``."""
    from kexp.measure import envinfo

    base, cand = pytest_benchmark_files["baseline_json"], pytest_benchmark_files["candidate_json"]
    monkeypatch.setattr(envinfo, "APPLE_GPU", False)
    monkeypatch.setattr(envinfo, "GPU_DEVICE_FILES", (str(tmp_path / "none"),))
    with warnings.catch_warnings():  # (real timings: the one-run note, as they fall)
        warnings.filterwarnings("ignore", ONE_RUN_NOTE, TimingsWarning)
        on_cpu = record_iteration(
            store, baseline=base, candidate=cand, **fields(change_summary="a - x", env=CPU_ENV)
        )
    assert on_cpu.protocol["device"] == "cpu"
    assert not any("GPU kernel" in r for r in suspect_reasons(on_cpu))

    (tmp_path / "nvidiactl").touch()
    monkeypatch.setattr(envinfo, "GPU_DEVICE_FILES", (str(tmp_path / "nvidiactl"),))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        # (each on its own machine: the same timing files on one would be the same
        # record made again, and refused)
        unknown = record_iteration(
            store, baseline=base, candidate=cand, **fields(change_summary="b - x", env="lab box")
        )
        said = record_iteration(
            store,
            baseline=base,
            candidate=cand,
            **fields(change_summary="c - x", protocol={"device": "cpu"}, env="lab box 2"),
        )
    assert "device" not in unknown.protocol
    assert any("GPU kernel" in r and "device not said" in r for r in suspect_reasons(unknown))
    assert said.protocol["device"] == "cpu"
    assert not any("GPU kernel" in r for r in suspect_reasons(said))


def test_param_names_that_repeat_fall_back_to_benchmark_names(tmp_path: Path) -> None:
    def entry(name: str, param: str | None) -> dict[str, Any]:
        return {"name": name, "param": param, "stats": {"median": 1e-5, "data": [1e-5, 2e-5]}}

    (tmp_path / "b.json").write_text(
        json.dumps({"benchmarks": [entry("test_a[r1]", "r1"), entry("test_b[r1]", "r1")]})
    )
    assert list(read_timings(tmp_path / "b.json").times) == ["test_a[r1]", "test_b[r1]"]
    (tmp_path / "c.json").write_text(
        json.dumps({"benchmarks": [entry("test_a[r1]", "r1"), entry("test_plain", None)]})
    )
    assert list(read_timings(tmp_path / "c.json").times) == ["r1", "test_plain"]


# --- torch.utils.benchmark ---------------------------------------------------------------


@pytest.mark.usefixtures("gpu_machine")
def test_torch_benchmark_json_gives_samples_per_sub_label(store: Store) -> None:
    base, cand = FILES / "torch_benchmark_baseline.json", FILES / "torch_benchmark_candidate.json"
    raw = json.loads(base.read_text(encoding="utf-8"))
    truth = {
        m["task_spec"]["sub_label"]: [t / m["number_per_run"] * 1e6 for t in m["raw_times"]]
        for m in raw
    }
    assert sniff(base) == "torch.utils.benchmark"
    found = read_timings(base)
    assert list(found.times) == list(truth) == ["r64_c1024", "r128_c1024"]
    for config, samples in truth.items():
        assert found.times[config] == pytest.approx(samples, rel=1e-9)
    runs = {m["number_per_run"] for m in raw}
    assert found.protocol == {"timer": "torch_benchmark", "repetitions": runs.pop()}

    with warnings.catch_warnings():
        warnings.simplefilter("error")
        exp = record_iteration(store, baseline=base, candidate=cand, **fields())
    assert len(exp.score_ci) == 2
    assert [r["baseline_n"] for r in exp.results] == [len(v) for v in truth.values()]


class _Touch:
    """Unpickled, it creates a file: the proof that something unpickled it."""

    def __init__(self, path: Path) -> None:
        self.path = path

    def __reduce__(self) -> tuple[Any, tuple[Path]]:
        return (Path.touch, (self.path,))


def test_torch_benchmark_results_are_never_unpickled(tmp_path: Path) -> None:
    """A pickle (torch's own way to save measurements) is refused as not JSON; nothing
    in it runs."""
    import pickle

    marker = tmp_path / "unpickled"
    (tmp_path / "m.json").write_bytes(pickle.dumps({"r64_c1024": _Touch(marker)}))
    (tmp_path / "m.pt").write_bytes(pickle.dumps([_Touch(marker)]))
    for name in ("m.json", "m.pt"):
        with pytest.raises(MeasurementError, match="not"):
            read_timings(tmp_path / name)
    assert not marker.exists()


# --- KernelBench ---------------------------------------------------------------------------


@pytest.mark.usefixtures("cpu_machine")
def test_kernelbench_summaries_are_recorded_without_an_interval(store: Store) -> None:
    base, cand = FILES / "kernelbench_baseline.json", FILES / "kernelbench_candidate.json"
    levels = {
        side: json.loads(path.read_text(encoding="utf-8"))
        for side, path in (("baseline", base), ("candidate", cand))
    }
    truth = {
        side: {
            f"{level}/{problem.removesuffix('.py')}": record
            for level, problems in data.items()
            for problem, record in problems.items()
        }
        for side, data in levels.items()
    }
    assert sniff(base) == "KernelBench"
    with pytest.warns(TimingsWarning, match="KernelBench timings are summaries"):
        exp = record_iteration(store, baseline=base, candidate=cand, **fields())
    assert [r["config"] for r in exp.results] == list(truth["baseline"])
    for result in exp.results:
        config = result["config"]
        assert result["baseline"] == pytest.approx(truth["baseline"][config]["mean"] * 1e3)
        assert result["candidate"] == pytest.approx(truth["candidate"][config]["mean"] * 1e3)
        assert result["baseline_n"] == truth["baseline"][config]["num_trials"]
    assert exp.score_ci == [] and exp.protocol == {"device": "gpu"}
    assert "KernelBench, the mean of each configuration's runs" in unwrapped(exp.raw_result)
    with pytest.warns(TimingsWarning), pytest.raises(MeasurementError, match="raw samples"):
        remeasure(store, exp.id, baseline=base, candidate=cand)


# --- nsys --------------------------------------------------------------------------------


def nsys_rows(path: Path) -> list[dict[str, str]]:
    text = path.read_text(encoding="utf-8")
    table = text[text.index('"Time (%)"') :]
    return list(csv.DictReader(io.StringIO(table)))


@pytest.mark.usefixtures("cpu_machine")
def test_nsys_kernel_summaries_are_recorded_without_an_interval(store: Store) -> None:
    base, cand = FILES / "nsys_kern_sum_baseline.csv", FILES / "nsys_kern_sum_candidate.csv"

    def number(text: str) -> float:
        return float(text.replace(",", ""))

    truth = {
        side: {row["Name"]: row for row in nsys_rows(path)}
        for side, path in (("baseline", base), ("candidate", cand))
    }
    assert sniff(base) == "nsys stats cuda_gpu_kern_sum"
    with pytest.warns(TimingsWarning) as said:
        exp = record_iteration(store, baseline=base, candidate=cand, **fields())
    messages = [str(w.message) for w in said]
    assert any("nsys kernel summaries" in m for m in messages), messages
    several = f"holds {len(truth['baseline'])} kernels, each taken as a configuration"
    assert any(several in m for m in messages), messages
    assert [r["config"] for r in exp.results] == list(truth["baseline"])
    for result in exp.results:
        rows = truth["baseline"][result["config"]], truth["candidate"][result["config"]]
        assert result["baseline"] == pytest.approx(number(rows[0]["Med (ns)"]) / 1e3)
        assert result["candidate"] == pytest.approx(number(rows[1]["Med (ns)"]) / 1e3)
        assert (result["baseline_n"], result["candidate_n"]) == tuple(
            int(number(row["Instances"])) for row in rows
        )
    assert exp.score_ci == [] and exp.protocol == {"device": "gpu"}
    assert "no raw samples" in exp.raw_result
    mean = read_timings(base, stat="mean")
    assert mean.statistic == "mean"
    assert mean.times == {
        n: [pytest.approx(number(r["Avg (ns)"]) / 1e3)] for n, r in truth["baseline"].items()
    }


def test_an_nsys_kernel_listed_twice_is_an_error(tmp_path: Path) -> None:
    text = (FILES / "nsys_kern_sum_baseline.csv").read_text(encoding="utf-8")
    last = text.rstrip("\n").splitlines()[-1]
    (tmp_path / "twice.csv").write_text(text + last + "\n", encoding="utf-8")
    with pytest.raises(MeasurementError, match="appears twice"):
        read_timings(tmp_path / "twice.csv")


# --- ncu ---------------------------------------------------------------------------------


def test_ncu_metrics_become_a_compact_profiling_table(repo: Path) -> None:
    path = FILES / "ncu_details.csv"
    text = path.read_text(encoding="utf-8")
    rows = list(csv.DictReader(io.StringIO(text[text.index('"ID"') :])))
    table = profiling_info(text)
    lines = table.splitlines()
    metrics = list(dict.fromkeys((r["Metric Name"], r["Metric Unit"]) for r in rows))
    launches = list(dict.fromkeys(r["ID"] for r in rows))
    body = [line for line in lines if line.startswith("| ") and not line.startswith("| metric")]
    assert len(body) == len(metrics)
    for line, (metric, unit) in zip(body, metrics, strict=True):
        cells = [c.strip() for c in line.strip("|").split("|")]
        values = {r["ID"]: r["Metric Value"] for r in rows if r["Metric Name"] == metric}
        assert cells == [metric, unit, *(values[launch] for launch in launches)]
    for launch in launches:
        kernel = next(r["Kernel Name"] for r in rows if r["ID"] == launch)
        assert any(line.startswith(f"- #{launch}: {kernel}") for line in lines)
    assert profiling_info("rocprofv3: VGPRs 48 -> 56") == "rocprofv3: VGPRs 48 -> 56"

    result = CliRunner().invoke(
        main,
        ["--root", str(repo), "add", "--summary", "Unroll 4 - +2%", "--score", "1.02",
         "--operator", "k.cu: k", "--dtype", "bf16", "--env", "H100",
         "--profiling-file", str(path), "--json"],
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    exp = Store(repo).get_experiment(json.loads(result.stdout)["id"])
    assert exp.profiling_info == table


def test_ncu_output_given_as_timings_is_refused_with_where_it_belongs(store: Store) -> None:
    path = FILES / "ncu_details.csv"
    with pytest.raises(MeasurementError, match=r"profiler metrics, not timings.*profiling"):
        record_iteration(store, baseline=path, candidate=path, **fields())
    assert store.list_experiments() == []


# --- plain JSON and CSV, and what every format shares ------------------------------------


@pytest.mark.usefixtures("gpu_machine")
def test_do_bench_lists_in_milliseconds(store: Store, tmp_path: Path) -> None:
    base = {"r64_c1024": [0.0124, 0.0121, 0.0123, 0.0125], "r128_c1024": [0.0231, 0.0229, 0.0233]}
    cand = {"r64_c1024": [0.0118, 0.0119, 0.0117, 0.0120], "r128_c1024": [0.0221, 0.0219, 0.022]}
    (tmp_path / "b.json").write_text(json.dumps(base))
    (tmp_path / "c.json").write_text(json.dumps(cand))
    assert sniff(tmp_path / "b.json") == "timings JSON"
    assert read_timings(tmp_path / "b.json", unit="ms").times == {
        c: [pytest.approx(t * 1e3) for t in v] for c, v in base.items()
    }
    exp = record_iteration(
        store, baseline=tmp_path / "b.json", candidate=tmp_path / "c.json", unit="ms", **fields()
    )
    assert len(exp.score_ci) == 2
    assert [r["baseline_n"] for r in exp.results] == [len(v) for v in base.values()]


@pytest.mark.parametrize(
    ("text", "what"),
    [
        ('{"r64": [1.0, 1.1], "r128": [2.0], "r64": [0.5]}', "'r64' appears twice"),
        ('{"level1": {"a.py": {"mean": 1, "num_trials": 5}, "a.py": {"mean": 2, "num_trials": 5}}}',
         "'a.py' appears twice"),
        ('{"benchmarks": [{"name": "t", "stats": {"median": 1e-5, "median": 2e-5}}]}',
         "'median' appears twice"),
    ],
)  # fmt: skip
def test_a_repeated_key_in_a_json_timings_file_is_an_error(
    store: Store, tmp_path: Path, text: str, what: str
) -> None:
    (tmp_path / "b.json").write_text(text, encoding="utf-8")
    (tmp_path / "c.json").write_text('{"r64": [1.0], "r128": [2.0]}', encoding="utf-8")
    with pytest.raises(MeasurementError, match=what):
        record_iteration(
            store, baseline=tmp_path / "b.json", candidate=tmp_path / "c.json", **fields()
        )
    assert store.list_experiments() == []


def test_a_torch_sub_label_measured_twice_is_an_error(tmp_path: Path) -> None:
    raw = json.loads((FILES / "torch_benchmark_baseline.json").read_text(encoding="utf-8"))
    (tmp_path / "t.json").write_text(json.dumps([raw[0], raw[0]]), encoding="utf-8")
    with pytest.raises(MeasurementError, match="'r64_c1024' appears twice"):
        read_timings(tmp_path / "t.json")


def test_a_summary_beside_raw_samples_reduces_them_with_a_warning(
    store: Store, tmp_path: Path
) -> None:
    base = FILES / "kernelbench_baseline.json"
    means = {c: t[0] for c, t in read_timings(base).times.items()}
    cand = {c: [t * 0.97, t * 0.95, t * 0.96] for c, t in means.items()}
    with pytest.warns(TimingsWarning) as caught:
        exp = record_iteration(store, baseline=base, candidate=cand, **fields())
    assert any(
        "candidate's raw samples were reduced to their median" in str(w.message) for w in caught
    )
    assert [r["candidate"] for r in exp.results] == [
        pytest.approx(t * 0.96) for t in means.values()
    ]
    assert [r["candidate_n"] for r in exp.results] == [3] * len(means)
    assert exp.score_ci == [] and not suspect_reasons(exp)


def test_every_format_module_is_registered_and_claims_its_own_files() -> None:
    names = {reader.__name__.rsplit(".", 1)[1] for reader in readers()}
    assert names == set(FORMATS)
    found = {
        path.name: sniff(path)
        for path in sorted(FILES.iterdir())
        if path.suffix in (".json", ".csv")
    }
    assert found == {
        "kernelbench_baseline.json": "KernelBench",
        "kernelbench_candidate.json": "KernelBench",
        "ncu_details.csv": "ncu --csv",
        "nsys_kern_sum_baseline.csv": "nsys stats cuda_gpu_kern_sum",
        "nsys_kern_sum_candidate.csv": "nsys stats cuda_gpu_kern_sum",
        "torch_benchmark_baseline.json": "torch.utils.benchmark",
        "torch_benchmark_candidate.json": "torch.utils.benchmark",
    }
