"""Score from measurements: timings files in, score/results/raw_result out, one-call recording."""

from __future__ import annotations

import json
import math
import warnings
from pathlib import Path

import pytest

from kexp import Store
from kexp.format.validate import read_and_check
from kexp.measure.record import (
    Measurement,
    MeasurementError,
    SuspectMeasurementWarning,
    load_measurements,
    read_table,
    record_iteration,
)
from kexp.measure.scoring import geometric_mean, score_measurements
from kexp.measure.timings import read_timings

BASELINE = {"cache_b8_s1024": 12.30, "cache_b8_s4096": 40.0, "cache_b32_s2048": 55.5}
CANDIDATE = {"cache_b8_s1024": 12.0, "cache_b8_s4096": 39.0, "cache_b32_s2048": 54.0}


def write_json(path: Path, data: object) -> Path:
    path.write_text(json.dumps(data), encoding="utf-8")
    return path


def expected_score() -> float:
    speedups = [BASELINE[c] / CANDIDATE[c] for c in BASELINE]
    return math.exp(sum(math.log(s) for s in speedups) / len(speedups))


def test_two_json_files_give_the_geometric_mean_and_per_config_results(tmp_path: Path) -> None:
    found = load_measurements(
        baseline=write_json(tmp_path / "base.json", BASELINE),
        candidate=write_json(tmp_path / "cand.json", CANDIDATE),
    )

    scored = score_measurements(found, iteration=3)

    assert scored.score == round(expected_score(), 4)
    assert [r["config"] for r in scored.results] == list(BASELINE)
    assert scored.results[0] == {
        "config": "cache_b8_s1024",
        "baseline": 12.3,
        "candidate": 12.0,
        "speedup": 1.025,
        "unit": "us",
    }
    lines = scored.raw_result.splitlines()
    assert lines[0] == "Iteration 3 Results - SUCCESS:"
    assert lines[2] == f"**Overall**: {scored.score:.4f}x speedup = +2.61% IMPROVEMENT"
    assert lines[4] == "**Per-kernel breakdown**:"
    assert lines[5] == "- cache_b8_s1024: 1.0250x (+2.50%)  12.30 -> 12.00 µs"
    assert len(lines) == 8


def test_pytest_benchmark_files_are_read_in_seconds_and_stored_in_microseconds(
    tmp_path: Path,
) -> None:
    def bench(times: dict[str, float]) -> dict[str, object]:
        return {
            "machine_info": {},
            "benchmarks": [
                {"name": name, "stats": {"median": t / 1e6, "mean": 2 * t / 1e6}}
                for name, t in times.items()
            ],
        }

    base = write_json(tmp_path / "base.json", bench(BASELINE))
    cand = write_json(tmp_path / "cand.json", bench(CANDIDATE))

    assert read_timings(base).times == {c: [t] for c, t in BASELINE.items()}
    assert read_timings(base, stat="mean").times["cache_b8_s4096"] == [80.0]
    found = load_measurements(baseline=base, candidate=cand)
    assert score_measurements(found).score == round(expected_score(), 4)


def test_a_csv_table_with_units_in_its_header(tmp_path: Path) -> None:
    table = tmp_path / "timings.csv"
    table.write_text(
        "Config,Baseline_ms,Candidate (ms),notes\nb8,0.0123,0.0120,first\n\nb32,0.0555,0.054,\n",
        encoding="utf-8",
    )

    found = read_table(table)

    assert found == [Measurement("b8", 12.3, 12.0), Measurement("b32", 55.5, 54.0)]


def test_csv_timings_per_side_and_sample_lists(tmp_path: Path) -> None:
    (tmp_path / "base.csv").write_text("config,time_us\nb8,12.3\nb32,55.5\n", encoding="utf-8")
    samples = {"b8": [12.1, 11.9, 12.0, 50.0, 12.0], "b32": [54]}
    rows = [f"{config},{t}" for config, times in samples.items() for t in times]
    (tmp_path / "cand.csv").write_text("config,time_us\n" + "\n".join(rows), encoding="utf-8")

    found = load_measurements(baseline=tmp_path / "base.csv", candidate=tmp_path / "cand.csv")

    assert found == [Measurement("b8", 12.3, 12.0), Measurement("b32", 55.5, 54.0)]
    cand = write_json(tmp_path / "cand.json", samples)  # a kind of file of its own
    with pytest.raises(MeasurementError, match="timings CSV and the candidate timings JSON"):
        load_measurements(baseline=tmp_path / "base.csv", candidate=cand)


@pytest.mark.parametrize(
    ("base", "cand", "message"),
    [
        ({"a": 1.0, "b": 2.0}, {"a": 1.0, "c": 2.0}, "only in the baseline: b; only in the cand"),
        ({"a": 1.0}, {"a": 0}, "must be a positive number"),
        ({"a": 1.0}, {"a": "fast"}, "is not a number"),
        ({}, {}, "no configurations"),
        ([1, 2], {"a": 1.0}, r"a bare list of times.*\{config: \[times\]\}"),
    ],
)
def test_timings_that_cannot_be_paired_are_clear_errors(
    tmp_path: Path, base: object, cand: object, message: str
) -> None:
    with pytest.raises(MeasurementError, match=message):
        load_measurements(
            baseline=write_json(tmp_path / "b.json", base),
            candidate=write_json(tmp_path / "c.json", cand),
        )


def test_bad_files_name_the_file_and_line(tmp_path: Path) -> None:
    (tmp_path / "t.csv").write_text("config,baseline,candidate\nb8,1,x\n", encoding="utf-8")
    (tmp_path / "broken.json").write_text("{", encoding="utf-8")

    with pytest.raises(MeasurementError, match=r"t\.csv:2 \(b8\): 'x' is not a number"):
        read_table(tmp_path / "t.csv")
    with pytest.raises(MeasurementError, match=r"broken\.json:1:2: not JSON"):
        read_timings(tmp_path / "broken.json")
    with pytest.raises(MeasurementError, match="no column named candidate"):
        (tmp_path / "u.csv").write_text("config,baseline\nb8,1\n", encoding="utf-8")
        read_table(tmp_path / "u.csv")


def test_verdicts_follow_the_outcome_thresholds() -> None:
    marginal = score_measurements([Measurement("a", 10.0, 9.95)])
    regression = score_measurements([Measurement("a", 10.0, 11.0)], iteration=2)

    assert marginal.raw_result.startswith("Results - MARGINAL:")
    assert "+0.50% MARGINAL" in marginal.raw_result
    assert regression.raw_result.startswith("Iteration 2 Results - REGRESSION:")
    assert "= -9.09% REGRESSION" in regression.raw_result


def test_geometric_mean() -> None:
    assert geometric_mean([1.0, 4.0]) == pytest.approx(2.0)
    with pytest.raises(MeasurementError):
        geometric_mean([])
    with pytest.raises(MeasurementError):
        geometric_mean([1.0, 0.0])


# --- recording in one call ----------------------------------------------------------


def unstated_fields() -> dict[str, str]:
    """:func:`summary_fields` with a summary that states no figure (the score is the
    timings')."""
    return {**summary_fields(), "change_summary": "Unrolled the copy loop by 4"}


def summary_fields() -> dict[str, str]:
    return {
        "change_summary": "Unrolled the copy loop by 4 - +2.61%",
        "operator_sig": "csrc/kernels/cache_kernels.cu: reshape_and_cache_flash",
        "dtype_sig": "bf16",
        "env": "MI300X, ROCm 7.0.0",
        "detailed_description": "**Approach**: unroll 4\n\n**Key insight**: cheap win",
    }


@pytest.mark.filterwarnings("ignore:.*too few for an interval")  # single numbers: no interval
def test_record_iteration_fills_score_results_and_raw_result_and_validates(
    store: Store, tmp_path: Path
) -> None:
    exp = record_iteration(
        store,
        baseline=write_json(tmp_path / "base.json", BASELINE),
        candidate=write_json(tmp_path / "cand.json", CANDIDATE),
        raw_result="Ran with rocprof off.",
        **summary_fields(),
    )

    assert exp.score == round(expected_score(), 4)
    assert exp.status == "done" and exp.outcome == "improvement"
    assert exp.raw_result.startswith("Iteration 1 Results - SUCCESS:")
    assert exp.raw_result.endswith("\n\nRan with rocprof off.")
    assert len(exp.results) == 3
    assert exp.path is not None
    problems = read_and_check(exp.path).problems
    assert [p.code for p in problems] == []  # score agrees with results: no warning
    child = record_iteration(  # the parent's code on both sides
        store,
        baseline=CANDIDATE,
        candidate=CANDIDATE,
        pid=exp.id,
        **{**summary_fields(), "change_summary": "Unroll 8 - no change"},
    )
    assert child.raw_result.startswith("Iteration 2 Results - MARGINAL:")
    assert child.score == 1.0


def test_record_iteration_needs_a_score_or_timings_not_both(store: Store) -> None:
    with pytest.raises(MeasurementError, match="no score"):
        record_iteration(store, **summary_fields())
    with pytest.raises(MeasurementError, match="not both"):
        record_iteration(store, baseline=BASELINE, candidate=CANDIDATE, score=1.1)
    with pytest.raises(MeasurementError, match="both baseline and candidate"):
        record_iteration(store, baseline=BASELINE, **summary_fields())
    assert store.paths() == []
    exp = record_iteration(store, score=0.0, status="timeout", **summary_fields())
    assert exp.status == "timeout" and exp.results == []


@pytest.mark.filterwarnings("ignore:.*too few for an interval")  # single numbers: no interval
def test_an_implausible_speedup_is_recorded_but_flagged_suspect(store: Store) -> None:
    with pytest.warns(SuspectMeasurementWarning, match="suspect: verify correctness"):
        exp = record_iteration(
            store, baseline={"a": 50.0}, candidate={"a": 10.0}, **unstated_fields()
        )

    assert exp.score == 5.0
    assert "**suspect: verify correctness**: score 5x is above" in exp.raw_result
    with warnings.catch_warnings():
        warnings.simplefilter("error", SuspectMeasurementWarning)
        # (another change: the same summary again would be tried before, warned)
        fields = {**unstated_fields(), "change_summary": "Unrolled the copy loop by 2"}
        record_iteration(store, baseline={"a": 12.0}, candidate={"a": 10.0}, **fields)


@pytest.mark.filterwarnings("ignore:.*too few for an interval")  # single numbers: no interval
def test_kexp_record_iteration_acts_on_the_default_store(
    repo: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import kexp

    monkeypatch.chdir(repo / "experiments")

    exp = kexp.record_iteration(baseline=BASELINE, candidate=CANDIDATE, **summary_fields())

    assert exp.path is not None and exp.path.is_relative_to(repo / "experiments")
    assert kexp.get_experiment(exp.id).score == round(expected_score(), 4)
