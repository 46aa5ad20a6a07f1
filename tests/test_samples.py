"""Repeated timings end to end: recorded, kept, validated, queried, remeasured, shown."""

from __future__ import annotations

import json
import math
import random
import warnings
from pathlib import Path
from typing import Any

import pytest
from conftest import experiment_fields, init_repo, run_kexp, unwrapped
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, rule

from kexp import Store
from kexp.core.errors import RemeasureWarning, RepeatedChangeWarning, TimingsWarning
from kexp.core.model import outcome_of
from kexp.format.fileformat import parse, serialize
from kexp.format.quickcheck import quick_fields
from kexp.format.samples import parse_samples, pooled, summarize
from kexp.format.validate import check_bytes, read_and_check
from kexp.measure.record import (
    MeasurementError,
    SuspectMeasurementWarning,
    read_table,
    record_iteration,
)
from kexp.measure.remeasure import remeasure
from kexp.measure.timings import read_timings

CONFIGS = ("b8_s1024", "b32_s2048", "b64_s4096")
TRUE_TIMES = {"b8_s1024": 12.3, "b32_s2048": 55.5, "b64_s4096": 210.0}


def timings(
    rng: random.Random, speedup: float = 1.0, n: int = 30, cv: float = 0.02
) -> tuple[dict[str, list[float]], dict[str, list[float]]]:
    """Baseline and candidate samples (us) per configuration, log-normal noise."""
    base = {c: [t * math.exp(rng.gauss(0, cv)) for _ in range(n)] for c, t in TRUE_TIMES.items()}
    cand = {
        c: [t / speedup * math.exp(rng.gauss(0, cv)) for _ in range(n)]
        for c, t in TRUE_TIMES.items()
    }
    return base, cand


def fields(**overrides: Any) -> dict[str, Any]:
    # The summary states no figure: the score is the timings'.
    data = experiment_fields(**{"change_summary": "Unrolled the inner loop by 4", **overrides})
    data.pop("score", None)
    data.pop("raw_result", None)
    return data


def problems_of(path: Path) -> list[tuple[str, str]]:
    return [(p.severity, p.code) for p in read_and_check(path).problems]


def test_an_agent_recording_a_noisy_aa_pair_gets_marginal(store: Store) -> None:
    rng = random.Random(1)
    base, _ = timings(rng, n=8, cv=0.05)
    cand = {c: [t * math.exp(rng.gauss(0, 0.05)) for t in [TRUE_TIMES[c]] * 8] for c in base}
    # a lucky draw: the candidate looks 2-3 % faster on every configuration
    cand = {c: [v * 0.975 for v in values] for c, values in cand.items()}

    exp = record_iteration(store, baseline=base, candidate=cand, **fields())

    assert exp.score > store.settings.improvement_above  # today's rule: an improvement
    assert exp.score_ci[0] <= 1.0 <= exp.score_ci[1]
    assert exp.outcome == "marginal"
    assert exp.raw_result.startswith("Iteration 1 Results - MARGINAL:")
    assert "MARGINAL (within noise)" in unwrapped(exp.raw_result)


def test_samples_are_summarised_in_the_front_matter_and_kept_in_a_section(store: Store) -> None:
    base, cand = timings(random.Random(2), speedup=1.05)

    exp = record_iteration(
        store, baseline=base, candidate=cand, protocol={"timer": "cuda_events"}, **fields()
    )

    assert exp.path is not None
    text = exp.path.read_text(encoding="utf-8")
    front, body = text.split("\n---\n", 1)
    assert "score_ci: [" in front and "baseline_n: 30" in front and "baseline_iqr: " in front
    assert "[12." not in front  # no raw sample in the front-matter
    assert body.rstrip().endswith("```") and "\n## Samples\n" in body
    assert exp.outcome == "improvement" and exp.score_ci[0] > 1
    result = exp.results[0]
    assert result["baseline"] == pytest.approx(sorted(base["b8_s1024"])[14:16][0], rel=0.05)
    assert set(result) == {
        "config",
        "baseline",
        "candidate",
        "speedup",
        "unit",
        "baseline_n",
        "candidate_n",
        "baseline_iqr",
        "candidate_iqr",
    }
    # the file is valid, canonical, and read back the same by both readers
    assert problems_of(exp.path) == []
    doc = parse(exp.path.read_bytes(), exp.path)
    assert serialize(doc.to_experiment()) == text
    quick = quick_fields(exp.path.read_bytes(), exp.path)
    assert quick == check_bytes(exp.path.read_bytes(), exp.path).document.fields  # type: ignore[union-attr]
    # the samples give the front-matter
    summary = summarize(pooled(parse_samples(exp.samples)))
    assert summary.results == exp.results
    assert summary.score == exp.score and summary.score_ci == exp.score_ci


def test_single_numbers_are_recorded_as_before(store: Store) -> None:
    with pytest.warns(TimingsWarning, match="a: 1 timing") as said:  # no interval: said so
        exp = record_iteration(
            store, baseline={"a": 12.3, "b": 40.0}, candidate={"a": 12.0, "b": 39.0}, **fields()
        )
    assert [str(w.message).count("too few for an interval") for w in said] == [1]
    assert exp.score_ci == [] and exp.samples == ""
    assert exp.results[0] == {
        "config": "a",
        "baseline": 12.3,
        "candidate": 12.0,
        "speedup": 1.025,
        "unit": "us",
    }
    assert exp.path is not None
    assert "score_ci" not in exp.path.read_text() and "## Samples" not in exp.path.read_text()


def read_sample_timings(path: Path, unit: str = "us") -> dict[str, list[float]]:
    return read_timings(path, unit=unit).times


def test_every_input_form_gives_samples(tmp_path: Path) -> None:
    # CSV with several rows per configuration
    (tmp_path / "t.csv").write_text("config,time_ms\na,0.010\na,0.012\nb,0.020\nb,0.021\n")
    assert read_sample_timings(tmp_path / "t.csv") == {"a": [10.0, 12.0], "b": [20.0, 21.0]}
    # pytest-benchmark JSON with its raw data (seconds)
    bench = {
        "benchmarks": [
            {"name": "a", "stats": {"median": 1e-5, "iterations": 10, "data": [1e-5, 1.1e-5]}},
        ]
    }
    (tmp_path / "b.json").write_text(json.dumps(bench))
    assert read_sample_timings(tmp_path / "b.json") == {"a": [10.0, 11.0]}
    # a list per configuration in ms (triton.testing.do_bench(return_mode="all"))
    (tmp_path / "d.json").write_text(json.dumps({"a": [0.01, 0.011]}))
    assert read_sample_timings(tmp_path / "d.json", unit="ms") == {"a": [10.0, 11.0]}
    # a table: each row a sample of both sides
    (tmp_path / "table.csv").write_text("config,baseline,candidate\na,10,9\na,11,9.5\na,10.5,9.2\n")
    (found,) = read_table(tmp_path / "table.csv")
    assert found.baseline_samples == (10.0, 11.0, 10.5) and found.baseline == 10.5
    with pytest.raises(MeasurementError, match="unknown unit"):
        read_sample_timings(tmp_path / "d.json", unit="fortnights")


class FakeTorchMeasurement:
    """What torch.utils.benchmark.Timer(...).blocked_autorange() returns (the parts
    kexp reads): per-run times in seconds, and the calls each run averages."""

    def __init__(self, times: list[float], number_per_run: int) -> None:
        self.times = times
        self.number_per_run = number_per_run


@pytest.mark.usefixtures("gpu_machine")
def test_the_protocol_is_filled_where_the_timings_tell_it(store: Store, tmp_path: Path) -> None:
    torch_base = {"a": FakeTorchMeasurement([1.0e-4, 1.01e-4, 0.99e-4, 1.02e-4], 100)}
    torch_cand = {"a": FakeTorchMeasurement([0.9e-4, 0.91e-4, 0.92e-4, 0.9e-4], 100)}
    exp = record_iteration(
        store, baseline=torch_base, candidate=torch_cand, **fields(protocol={"l2_flushed": True})
    )
    assert exp.protocol == {"timer": "torch_benchmark", "repetitions": 100, "l2_flushed": True}
    assert exp.results[0]["baseline_n"] == 4

    def bench(scale: float) -> dict[str, Any]:
        data = [scale * 2e-4 * (1 + 0.01 * i) for i in range(6)]
        return {"benchmarks": [{"name": "a", "stats": {"iterations": 5, "data": data}}]}

    (tmp_path / "base.json").write_text(json.dumps(bench(1.0)))
    (tmp_path / "cand.json").write_text(json.dumps(bench(0.9)))
    exp = record_iteration(
        store,
        baseline=tmp_path / "base.json",
        candidate=tmp_path / "cand.json",
        # (another change: the same summary again would be tried before, warned)
        **fields(change_summary="Unrolled the inner loop by 2", protocol={"synchronized": True}),
    )
    # (the env names a GPU, MI300X: the wall clock timed it)
    assert exp.protocol == {
        "timer": "wall_clock",
        "repetitions": 5,
        "synchronized": True,
        "device": "gpu",
    }


@pytest.mark.usefixtures("gpu_machine")
def test_an_unsynchronised_wall_clock_on_a_tiny_kernel_is_suspect(store: Store) -> None:
    base, cand = {"a": [5.0, 5.1, 4.9, 5.05]}, {"a": [4.0, 4.1, 3.9, 4.05]}
    with pytest.warns(SuspectMeasurementWarning, match="wall clock without device synchron"):
        exp = record_iteration(
            store, baseline=base, candidate=cand, **fields(protocol={"timer": "wall_clock"})
        )
    assert "**suspect: verify correctness**" in exp.raw_result
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        for protocol in ({"timer": "wall_clock", "synchronized": True}, {"timer": "cuda_events"}):
            record_iteration(
                store,
                baseline=base,
                candidate=cand,
                **fields(change_summary=f"{protocol} - x", protocol=protocol),
            )


def test_validation_checks_the_interval_and_the_samples(store: Store) -> None:
    base, cand = timings(random.Random(3), speedup=1.03, n=10)
    exp = record_iteration(store, baseline=base, candidate=cand, **fields())
    assert exp.path is not None
    path = exp.path
    original = path.read_text(encoding="utf-8")
    low = exp.score_ci[0]

    # a hand-edited median disagrees with the samples: a warning at that value
    edited = original.replace(f"baseline: {exp.results[1]['baseline']}", "baseline: 99.0", 1)
    path.write_text(edited, encoding="utf-8")
    found = read_and_check(path).problems
    assert [(p.severity, p.code, p.field) for p in found] == [
        ("warning", "samples-mismatch", "results")
    ]
    assert edited.splitlines()[found[0].line - 1].startswith("- {config: b32_s2048")
    assert quick_fields(path.read_bytes(), path) is None  # not sure: the full check says why

    # an interval that does not hold the score is an error
    path.write_text(original.replace(f"score_ci: [{low}", "score_ci: [1.5", 1), encoding="utf-8")
    codes = problems_of(path)
    assert ("error", "score-ci-outside") in codes and ("warning", "samples-mismatch") in codes

    # a broken samples line is an error at its line
    lines = original.split("\n")
    at = next(i for i, line in enumerate(lines) if line.startswith('{"round": 1, "config": "b32'))
    lines[at] = lines[at].replace('"baseline": [', '"baseline": ["fast", ')
    path.write_text("\n".join(lines), encoding="utf-8")
    (problem,) = read_and_check(path).problems
    assert problem.code == "bad-samples" and problem.line == at + 1
    assert "b32_s2048: baseline timing 'fast' is not a positive number" in problem.message

    # a score_ci of one number breaks the schema
    path.write_text(original.replace(f"score_ci: [{low}, ", "score_ci: [", 1), encoding="utf-8")
    assert ("error", "wrong-length") in problems_of(path)


def test_the_cache_knows_the_interval_and_derives_outcomes_from_it(store: Store) -> None:
    rng = random.Random(4)
    noisy = record_iteration(store, **_pair(rng, 1.02, n=5, cv=0.05), **fields())
    clear = record_iteration(
        store, **_pair(rng, 1.02, n=60, cv=0.005), **fields(change_summary="clear - x")
    )
    single = store.create_experiment(**experiment_fields(score=1.05))

    store.list_experiments()  # builds the cache
    rows = {e.id: e for e in store.list_experiments(brief=True)}
    assert rows[noisy.id].score_ci == noisy.score_ci and rows[clear.id].protocol == {}
    assert rows[noisy.id].outcome == "marginal" and rows[clear.id].outcome == "improvement"
    improved = {e.id for e in store.list_experiments(outcome="improvement")}
    assert improved == {clear.id, single.id}
    assert next(e.id for e in store.top_experiments(by="low")) == single.id  # 1.05, no interval
    by_low = store.top_experiments(by="low")
    lows = [e.score_ci[0] if e.score_ci else e.score for e in by_low]
    assert lows == sorted(lows, reverse=True) and by_low[0].detailed_description
    with pytest.raises(Exception, match="cannot rank by"):
        store.top_experiments(by="luck")


def _pair(rng: random.Random, speedup: float, n: int, cv: float) -> dict[str, Any]:
    base, cand = timings(rng, speedup, n=n, cv=cv)
    return {"baseline": base, "candidate": cand}


def test_remeasure_pools_rounds_and_records_the_correction(store: Store) -> None:
    rng = random.Random(6)
    exp = record_iteration(store, **_pair(rng, 1.0, n=10, cv=0.03), **fields())
    second = _pair(rng, 1.0, n=10, cv=0.03)

    again = remeasure(store, exp.id, **second)

    rounds = parse_samples(again.samples)
    assert len(rounds) == 2 and again.results[0]["baseline_n"] == 20
    width = math.log(again.score_ci[1] / again.score_ci[0])
    assert width < math.log(exp.score_ci[1] / exp.score_ci[0]) * 1.2
    note = again.detailed_description.rsplit("\n\n", 1)[-1]
    assert note.startswith("**Correction (")
    assert f"score {exp.score} → {again.score}" in note or exp.score == again.score
    assert "score_ci" in note and "results rewritten" in note and "samples rewritten" in note
    assert note.endswith("Reason: remeasured: round 2 pooled with the earlier ones")
    assert again.raw_result.startswith(exp.raw_result)
    assert "Round 2 pooled with round 1 Results" in again.raw_result
    assert again.path is not None and problems_of(again.path) == []

    with pytest.raises(MeasurementError, match="only in the candidate: extra"):
        remeasure(
            store,
            exp.id,
            baseline=second["baseline"],
            candidate={**second["candidate"], "extra": [1.0, 2.0, 3.0]},
        )


def test_remeasure_pools_single_numbers_and_refuses_what_it_cannot_pool(store: Store) -> None:
    with pytest.warns(TimingsWarning, match="too few for an interval"):
        single = record_iteration(store, baseline={"a": 10.0}, candidate={"a": 9.0}, **fields())
    again = remeasure(store, single.id, baseline={"a": [10.2, 9.9]}, candidate={"a": [9.1, 8.9]})
    assert [len(b) for b, _ in parse_samples(again.samples)[0].timings.values()] == [1]
    assert again.results[0]["baseline_n"] == 3 and again.score_ci  # 1 + 2 samples a side

    unkept = record_iteration(
        store,
        baseline={"a": [10.0, 10.1, 9.9]},
        candidate={"a": [9.0, 9.1, 8.9]},
        keep_samples=False,
        **fields(change_summary="unkept - x"),
    )
    assert unkept.score_ci and unkept.samples == ""
    with pytest.raises(MeasurementError, match="without its raw samples"):
        remeasure(store, unkept.id, baseline={"a": 10.0}, candidate={"a": 9.0})
    bare = store.create_experiment(**experiment_fields())
    with pytest.raises(MeasurementError, match="no per-configuration timings"):
        remeasure(store, bare.id, baseline={"a": 10.0}, candidate={"a": 9.0})


def test_a_remeasure_pooling_too_few_timings_for_an_interval_says_so(store: Store) -> None:
    """Two rounds of one timing a side pool into two: still no interval, and the
    remeasure says so (with how to give every timing), as the record did."""
    with pytest.warns(TimingsWarning, match="a: 1 timing"):
        single = record_iteration(store, baseline={"a": 10.0}, candidate={"a": 9.0}, **fields())
    with pytest.warns(TimingsWarning, match="a: 2 timing") as said:
        again = remeasure(store, single.id, baseline={"a": 10.1}, candidate={"a": 9.1})
    assert again.score_ci == [] and 'return_mode="all"' in str(said[0].message)


def test_recording_the_same_measurement_again_says_to_remeasure(store: Store) -> None:
    diff = "--- a/k.cu\n+++ b/k.cu\n@@ -1 +1 @@\n-old line\n+new line\n"
    first = store.create_experiment(**experiment_fields(code_change=diff))
    with pytest.warns(RemeasureWarning, match=f"kexp remeasure {first.id}"):
        store.create_experiment(**experiment_fields(code_change=diff))
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        store.create_experiment(**experiment_fields(code_change=diff, env="H100, CUDA 12.4"))
    kinds = [type(w.message) for w in caught]
    assert RepeatedChangeWarning in kinds and RemeasureWarning not in kinds


def test_the_commands_show_and_remeasure(repo: Path, tmp_path: Path) -> None:
    rng = random.Random(7)
    base, cand = timings(rng, 1.04, n=12)
    (tmp_path / "base.json").write_text(
        json.dumps({c: [v / 1000 for v in s] for c, s in base.items()})
    )
    (tmp_path / "cand.json").write_text(
        json.dumps({c: [v / 1000 for v in s] for c, s in cand.items()})
    )
    added = run_kexp(
        "add",
        "--summary",
        "Unroll 4 - +4%",
        "--operator",
        "k.cu: k",
        "--dtype",
        "bf16",
        "--env",
        "H200",
        "--baseline",
        str(tmp_path / "base.json"),
        "--candidate",
        str(tmp_path / "cand.json"),
        "--unit",
        "ms",
        "--protocol",
        "timer=do_bench",
        "--protocol",
        "l2_flushed=true",
        "--json",
        cwd=repo,
    )
    assert added.returncode == 0, added.stderr
    exp_id = json.loads(added.stdout)["id"]

    shown = run_kexp("show", exp_id, cwd=repo).stdout
    assert "(95% interval)" in shown and "protocol  do_bench, L2 flushed" in shown
    assert "(n 12/12, IQR " in shown and "1 round(s) of 3 configuration(s): 12 / 12" in shown
    raw = run_kexp("show", exp_id, "--field", "samples", cwd=repo).stdout
    assert raw.count('{"round": 1') == 3
    listed = run_kexp("top", "--by", "low", cwd=repo, env={"COLUMNS": "200"}).stdout
    store = Store(repo)
    exp = store.get_experiment(exp_id)
    low, high = exp.score_ci
    assert f"{exp.score:.4f} [{low:.4f}, {high:.4f}]" in listed

    base2, cand2 = timings(rng, 1.04, n=12)
    (tmp_path / "base2.json").write_text(json.dumps(base2))
    (tmp_path / "cand2.json").write_text(json.dumps(cand2))
    done = run_kexp(
        "remeasure",
        exp_id[:8],
        "--baseline",
        str(tmp_path / "base2.json"),
        "--candidate",
        str(tmp_path / "cand2.json"),
        "--reason",
        "second round, same protocol",
        cwd=repo,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith(f"remeasured {exp_id}: score ")
    again = store.get_experiment(exp_id)
    assert again.results[0]["baseline_n"] == 24
    assert again.detailed_description.endswith("Reason: second round, same protocol")
    bad = run_kexp("add", "--summary", "x - y", "--score", "1", "--protocol", "timer", cwd=repo)
    assert bad.returncode == 2 and "is not KEY=VALUE" in bad.stderr


def test_review_and_lessons_show_intervals(repo: Path) -> None:
    from conftest import git

    from kexp.agents.lessons import lessons
    from kexp.review.build import render_markdown, review

    store = Store(repo)
    git(repo, "add", "-A")
    git(repo, "commit", "-qm", "empty store", "--allow-empty")
    rng = random.Random(8)
    parent = record_iteration(store, **_pair(rng, 1.03, n=20, cv=0.01), **fields())
    # The child timed against its parent's code (1.03x faster than the reference).
    sides = {
        side: {c: [t / 1.03 for t in times] for c, times in by_config.items()}
        for side, by_config in _pair(rng, 1.035, n=20, cv=0.01).items()
    }
    child = record_iteration(
        store,
        **sides,
        **fields(pid=parent.id, change_summary="Unroll 8 - same", protocol={"timer": "hip_events"}),
    )

    result = review(store, "main")
    (entry,) = [e for e in result.added if e.id == child.id]
    assert entry.score_ci == child.score_ci and entry.delta_pct_ci is not None
    low, high = entry.delta_pct_ci
    assert low < entry.delta_pct < high  # type: ignore[operator]
    text = render_markdown(result)
    assert f"[{low:+.2f}%, {high:+.2f}%]" in text
    assert f"{child.score:.4f} [{child.score_ci[0]:.4f}, {child.score_ci[1]:.4f}]" in text
    assert (
        f"- `{child.id}`: hip\\_events; samples per configuration (baseline / candidate): 20 / 20"
        in text
    )

    within = record_iteration(
        store,
        **_pair(rng, 1.0, n=6, cv=0.04),
        # a root of its own, against the reference (not a step the campaign forgot)
        **fields(change_summary="Noise - nothing", measured_against="reference"),
    )
    (lesson,) = [x for x in lessons(store)["marginal"] if x.id == within.id]
    assert list(lesson.score_ci) == within.score_ci
    printed = run_kexp("lessons", cwd=repo).stdout
    assert f"{within.score:.4f} [{within.score_ci[0]:.4f}" in printed
    # --json: the interval where there is one; no empty one (an empty optional field)
    store.create_experiment(**fields(change_summary="Guess - nothing"), score=1.0)
    data = json.loads(run_kexp("lessons", "--json", cwd=repo).stdout)["marginal"]
    assert {x["id"]: x.get("score_ci") for x in data}[within.id] == within.score_ci
    assert [x for x in data if "score_ci" not in x and x["change_summary"] == "Guess - nothing"]


# --- the model: files as the truth ---------------------------------------------------------


class RecordAndRemeasure(RuleBasedStateMachine):
    """Agents record experiments from samples and remeasure them; every answer of the
    store (score, interval, results, outcome, ranking by the low end) equals what the
    files' ``## Samples`` sections give, and every file stays valid."""

    def __init__(self) -> None:
        super().__init__()
        self.store: Store
        self.ids: list[str] = []
        self.rounds: dict[str, int] = {}
        self.counter = 0

    @initialize()
    def make_store(self) -> None:
        import tempfile

        self.folder = tempfile.TemporaryDirectory()
        root = init_repo(Path(self.folder.name) / "repo")
        (root / "experiments").mkdir()
        self.store = Store(root)

    def teardown(self) -> None:
        self.folder.cleanup()

    @rule(
        seed=st.integers(0, 10**6),
        speedup=st.sampled_from([0.95, 1.0, 1.02, 1.1]),
        n=st.integers(3, 25),
        cv=st.sampled_from([0.005, 0.02, 0.05]),
    )
    def record(self, seed: int, speedup: float, n: int, cv: float) -> None:
        self.counter += 1
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            exp = record_iteration(
                self.store,
                **_pair(random.Random(seed), speedup, n, cv),
                **fields(change_summary=f"Change {self.counter} - measured"),
            )
        self.ids.append(exp.id)
        self.rounds[exp.id] = 1

    @rule(data=st.data(), seed=st.integers(0, 10**6), n=st.integers(1, 10))
    def add_round(self, data: st.DataObject, seed: int, n: int) -> None:
        if not self.ids:
            return
        exp_id = data.draw(st.sampled_from(self.ids))
        with warnings.catch_warnings():  # rounds that disagree warn: the files are checked
            warnings.simplefilter("ignore")
            remeasure(self.store, exp_id, **_pair(random.Random(seed), 1.0, n, 0.02))
        self.rounds[exp_id] += 1

    @invariant()
    def the_files_are_the_truth(self) -> None:
        if not self.ids:
            return
        answers = {e.id: e for e in self.store.list_experiments(brief=True)}
        assert set(answers) == set(self.ids)
        for exp_id in self.ids:
            path = self.store.path_of(exp_id)
            checked = read_and_check(path)
            assert checked.problems == [], checked.problems
            whole = checked.experiment()
            rounds = parse_samples(whole.samples)
            assert len(rounds) == self.rounds[exp_id]
            truth = summarize(pooled(rounds), rounds=rounds)
            answer = answers[exp_id]
            assert answer.score == truth.score and answer.score_ci == truth.score_ci
            assert answer.results == truth.results
            assert answer.outcome == outcome_of(whole, self.store.settings)
        ranked = self.store.top_experiments(len(self.ids), by="low", brief=True)
        lows = [e.score_ci[0] for e in ranked]
        assert lows == sorted(lows, reverse=True)


TestRecordAndRemeasure = RecordAndRemeasure.TestCase
TestRecordAndRemeasure.settings = settings(
    max_examples=8,
    stateful_step_count=6,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)


def test_the_quick_verdict_on_sampled_files_is_the_full_checks(store: Store) -> None:
    from kexp.format.rules import warns_if_valid

    base, cand = timings(random.Random(9), 1.02, n=6)
    exp = record_iteration(store, baseline=base, candidate=cand, **fields())
    assert exp.path is not None
    text = exp.path.read_text(encoding="utf-8")
    first_line = next(line for line in text.split("\n") if line.startswith('{"round": 1'))
    variants = {
        "as written": text,
        "crlf": text.replace("\n", "\r\n"),
        "median edited": text.replace("speedup: ", "speedup: 9", 1),
        "interval edited": text.replace("score_ci: [", "score_ci: [0.5", 1),
        "interval outside": text.replace("score_ci: [", "score_ci: [1.9", 1),
        "sample line broken": text.replace(first_line, first_line[:-2]),
        "a round out of order": text.replace('{"round": 1', '{"round": 3', 1),
        "samples twice": text + "\n## Samples\n\nmore\n",
        "no sample line": text.split("## Samples")[0] + "## Samples\n\nprose only\n",
        "heading inside a fence": text.replace("## Samples", "```\n## Samples\n```", 1),
        "no samples": text.split("\n## Samples")[0] + "\n",
    }
    answered = []
    for name, variant in variants.items():
        quick = quick_fields(variant.encode(), exp.path)
        checked = check_bytes(variant.encode(), exp.path)
        if quick is None:
            continue
        answered.append(name)
        assert checked.ok and checked.document is not None, name
        assert quick == checked.document.fields, name
        assert warns_if_valid(quick) == bool(checked.problems), name
    assert answered == ["as written", "crlf", "heading inside a fence", "no samples"]
