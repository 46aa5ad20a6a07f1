"""Rounds of one experiment that disagree beyond their intervals are not pooled into a
falsely tight interval.

A trial's ``kexp remeasure`` pooled a round of about 1.0x with an earlier round of
1.57x (its baseline timed under load) into 1.1224 [1.113, 1.132], still an
improvement, without a word: the samples of the two rounds are not one population.
Now the rounds' intervals, disjoint, are named in a warning with each round's figures
and the step to take, and ``score_ci`` holds every round's interval (no confident
change); the raw result says so and the file stays valid. Rounds that agree pool as
before.

Timing files are pytest-benchmark's JSON (a real run's, its raw ``data`` set to known
timings, :func:`timing_files.write`).
"""

from __future__ import annotations

import json
import random
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from conftest import run_kexp
from test_noise_rounds import git, kexp_ok, warnings_of
from timing_files import COMMON, times, write

from kexp import Store
from kexp.core.model import KernelExperiment, outcome_of
from kexp.format.samples import parse_samples, pooled, summarize

#: Each configuration's true baseline time (seconds).
CONFIGS = {"n8": 2.0e-6, "n64": 8.0e-6}


class Rounds:
    """Rounds of timings written as pytest-benchmark files: each call gives the
    ``--baseline FILE --candidate FILE`` options of one round."""

    def __init__(self, folder: Path, template: dict[str, Any], seed: int) -> None:
        self.folder, self.template = folder, template
        self.rng = random.Random(seed)
        self.count: Iterator[int] = iter(range(100))

    def __call__(self, speedup: float, load: tuple[float, float] = (1.0, 1.0)) -> list[str]:
        """A round whose candidate is ``speedup`` times faster, each baseline sample
        slower by a factor drawn in ``load`` (the baseline timed under load)."""
        n = next(self.count)
        rng = self.rng
        base = {c: [t * rng.uniform(*load) for t in times(rng, s)] for c, s in CONFIGS.items()}
        cand = {c: times(self.rng, s / speedup) for c, s in CONFIGS.items()}
        return [
            "--baseline", write(self.folder / f"b{n}.json", self.template, base),
            "--candidate", write(self.folder / f"c{n}.json", self.template, cand),
        ]  # fmt: skip


def test_a_round_that_disagrees_widens_the_interval_and_is_named(
    repo: Path, tmp_path: Path, bench_json: dict[str, Any]
) -> None:
    """Round 1's baseline ran under load (1.3-1.9x slower, every sample), round 2 timed
    the same code clean (1.0x). Pooled they gave a narrow interval around 1.1, called
    an improvement without a warning. Now a warning gives both rounds' figures and the
    steps, the interval holds both rounds (no improvement called), and a third clean
    round names round 1 as the one to replace; replaced, the interval is narrow again."""
    round_of = Rounds(tmp_path, bench_json, seed=31)
    added = kexp_ok(
        repo, "add", "--summary", "unrolled - faster", *COMMON,
        *round_of(1.0, load=(1.3, 1.9)), "--json",
    )  # fmt: skip
    exp_id = json.loads(added.stdout)["id"]
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", "the experiment")

    second = kexp_ok(repo, "remeasure", exp_id, *round_of(1.0))

    store = Store(repo)
    exp = store.get_experiment(exp_id)
    rounds = parse_samples(exp.samples)
    plain = summarize(pooled(rounds))  # what the rounds' samples pooled alone give
    narrow = plain.score_ci
    as_was = KernelExperiment(score=plain.score, score_ci=narrow, status="done")
    assert outcome_of(as_was, store.settings) == "improvement"  # falsely confident
    assert exp.score == plain.score  # the score is the pooled samples' still
    alone = [summarize(r.timings).score_ci for r in rounds]
    assert alone[0][0] > 1.4 and alone[1][0] < 1.0 < alone[1][1]
    low, high = exp.score_ci
    assert low <= alone[1][0] and high >= alone[0][1]  # it holds both rounds
    assert outcome_of(exp, store.settings) != "improvement"
    (warned,) = warnings_of(second)
    assert f"the rounds of {exp_id[:10]} disagree beyond their intervals" in warned, warned
    for number, ends in enumerate(alone, 1):
        assert f"round {number}: " in warned and f"{ends[0]:.4f}, {ends[1]:.4f}]" in warned
    assert f"pooled they give [{narrow[0]:.4f}, {narrow[1]:.4f}]" in warned, warned
    assert f"score_ci holds every round's: [{low:.4f}, {high:.4f}]" in warned, warned
    assert f"kexp remeasure {exp_id} --baseline ... --candidate ..." in warned, warned
    assert f"kexp remeasure {exp_id} --replace-round 2 " in warned, warned
    assert "**Rounds disagree** (rounds 1 and 2" in exp.raw_result
    checked = run_kexp("validate", cwd=repo)
    assert checked.returncode == 0 and "warning" not in checked.stdout, checked.stdout

    # A third round tells which one is off: round 1, disagreeing with both others.
    git(repo, "commit", "-q", "-am", "round 2")
    third = kexp_ok(repo, "remeasure", exp_id, *round_of(1.0))
    (warned,) = warnings_of(third)
    assert "Round 1 disagrees with the others" in warned, warned
    assert f"kexp remeasure {exp_id} --replace-round 1 " in warned, warned

    # Followed: round 1 replaced by a clean round, the rounds agree, no warning.
    git(repo, "commit", "-q", "-am", "round 3")
    replaced = kexp_ok(
        repo, "remeasure", exp_id, "--replace-round", "1", "--reason", "baseline under load",
        *round_of(1.0),
    )  # fmt: skip
    assert not warnings_of(replaced), replaced.stderr
    exp = store.get_experiment(exp_id)
    assert exp.score_ci == summarize(pooled(parse_samples(exp.samples))).score_ci
    assert exp.score_ci[0] <= 1 <= exp.score_ci[1]


@pytest.mark.parametrize("seed", [32, 33])
def test_rounds_that_agree_pool_as_before(
    repo: Path, tmp_path: Path, bench_json: dict[str, Any], seed: int
) -> None:
    """Two clean rounds of a true 1.10x speedup: no warning, the interval the pooled
    samples give (narrower than either round's), an improvement. (Seed 32's second
    round, its n8 candidate samples leaving a gap by chance, was taken for two clock
    states: a warning to lock the clocks.)"""
    round_of = Rounds(tmp_path, bench_json, seed=seed)
    added = kexp_ok(
        repo, "add", "--summary", "unrolled - faster", *COMMON, *round_of(1.1), "--json"
    )
    exp_id = json.loads(added.stdout)["id"]

    second = kexp_ok(repo, "remeasure", exp_id, *round_of(1.1))

    assert not warnings_of(second), second.stderr
    store = Store(repo)
    exp = store.get_experiment(exp_id)
    rounds = parse_samples(exp.samples)
    assert exp.score_ci == summarize(pooled(rounds)).score_ci
    width = exp.score_ci[1] / exp.score_ci[0]
    assert all(width < (ci := summarize(r.timings).score_ci)[1] / ci[0] for r in rounds)
    assert outcome_of(exp, store.settings) == "improvement"
    assert "Rounds disagree" not in exp.raw_result


def test_a_clean_round_is_not_taken_for_two_modes(
    repo: Path, tmp_path: Path, bench_json: dict[str, Any]
) -> None:
    """A clean round (1 % CV, 15 samples a side, a true 1.10x speedup) whose baseline
    samples of n8 happen to leave a gap: two_modes took them for two clock states, so
    kexp add widened the interval and warned to lock the clocks. A gap in 15 clean
    samples is now asked to be wider (6.5 times the spread, not 5) before it is a mode:
    no warning, the interval the samples give."""
    round_of = Rounds(tmp_path, bench_json, seed=38)
    added = kexp_ok(
        repo, "add", "--summary", "unrolled - faster", *COMMON, *round_of(1.1), "--json"
    )

    assert "two modes" not in added.stderr, added.stderr
    exp = Store(repo).get_experiment(json.loads(added.stdout)["id"])
    assert "two modes" not in exp.raw_result, exp.raw_result
    samples = pooled(parse_samples(exp.samples))
    assert exp.score_ci == summarize(samples, modes=False).score_ci
    assert outcome_of(exp) == "improvement"


def test_a_file_recorded_by_the_first_two_modes_rule_still_validates(
    repo: Path, tmp_path: Path, bench_json: dict[str, Any]
) -> None:
    """The same round as the first rule (a gap of 5 times the spread at every size)
    recorded it, with the wider interval: kexp validate accepts it as it is."""
    round_of = Rounds(tmp_path, bench_json, seed=38)
    added = kexp_ok(
        repo, "add", "--summary", "unrolled - faster", *COMMON, *round_of(1.1), "--json"
    )
    exp_id = json.loads(added.stdout)["id"]
    store = Store(repo)
    together = pooled(parse_samples(store.get_experiment(exp_id).samples))
    then = summarize(together, rule=1)
    assert then.score_ci != summarize(together).score_ci  # the first rule widened it
    store.update_experiment(exp_id, score=then.score, score_ci=then.score_ci, results=then.results)

    checked = run_kexp("validate", cwd=repo)

    assert checked.returncode == 0, checked.stdout
    assert "samples-mismatch" not in checked.stdout, checked.stdout


@pytest.mark.parametrize("seed", [41, 42])
def test_a_disturbed_round_of_a_regression_is_no_confident_regression(
    repo: Path, tmp_path: Path, bench_json: dict[str, Any], seed: int
) -> None:
    """The other way: a round whose candidate side ran under load (a false regression,
    0.7x) pooled with a clean 1.0x round is no regression either."""
    round_of = Rounds(tmp_path, bench_json, seed=seed)
    added = kexp_ok(repo, "add", "--summary", "reordered loads", *COMMON, *round_of(0.7), "--json")
    exp_id = json.loads(added.stdout)["id"]

    second = kexp_ok(repo, "remeasure", exp_id, *round_of(1.0))

    exp = Store(repo).get_experiment(exp_id)
    assert exp.score_ci[0] <= 0.71 and exp.score_ci[1] >= 1.0
    assert outcome_of(exp) != "regression"
    (warned,) = warnings_of(second)
    assert "disagree beyond their intervals" in warned, warned
