"""What :mod:`kexp.core.noise` promises, measured by simulation: ``python -m
kexp.measure.simulation``.

Samples are drawn from known distributions, as GPU timings behave: log-normal noise of
1 to 5 % coefficient of variation around a true time, 1 to 20 configurations of 5 to
100 samples a side, and slow outliers (a preempted run, a clock drop: up to 5 % of
samples, 1.2 to 3 times slower). Every trial is seeded: the same command prints the
same figures. These properties are measured:

* **false alarms** on A/A pairs (candidate = baseline): the share of experiments whose
  outcome is ``improvement`` or ``regression`` (the promise: at most 5 %), next to the
  share today's thresholds alone (no interval) would call so;
* **coverage**: the share of 95 % intervals that hold the true geometric mean of the
  configurations' speedups (each drawn between 0.8 and 1.25; the promise: 93 to 97 %);
* **power**: the share of experiments with a true 3 % speedup (30 samples, 2 % CV)
  found to be an ``improvement`` (the promise: at least 90 %);
* **pooling**: the mean width of the interval after 1, 2 and 3 rounds of measurement
  (the promise: never wider on average);
* **load spikes**: experiments of 2 configurations, 15 samples a side at 1 to 3 % CV,
  whose baseline runs met load: 40 % of each baseline's samples
  (:data:`kexp.core.noise.SPIKES_HANDLED`) 1.2 to 3 times slower. A/A pairs called
  improvement or regression (the promise: at most 5 %), and a true 5 % speedup found
  an ``improvement`` (the promise: at least 90 %; method 1, which took every sample's
  median and spread, called nearly all of them within noise);
* **two clock states**: experiments of 2 configurations, 30 samples a side at 1 to 3 %
  CV, each sample timed in the slow state (1.1 to 1.5 times slower: clocks not
  locked) with probability 1/2. A/A pairs called improvement or regression (the
  promise: at most 5 %; without the rule of :func:`kexp.core.noise.two_modes`, about
  70 %), and a true 50 % speedup found an ``improvement``.
* **clean runs taken for two modes**: A/A experiments drawn from the ranges, 5 to 50
  samples a side: the share of sides, and of experiments with a side, that
  :func:`kexp.core.noise.two_modes` takes for two clock states (the promise: at most 1 %
  of experiments), their interval widened and clocks blamed for nothing.
* **rounds that disagree**: rounds of the same code (trials drawn from the ranges, 2
  and 3 rounds) whose intervals do not overlap (:func:`kexp.core.noise.dispute`): the
  share widened as if a round were disturbed (the promise: at most 2 %).

``tests/test_simulation.py`` holds these promises over 1,000 trials each (a larger run
is marked ``slow``).
"""

from __future__ import annotations

import argparse
import dataclasses
import math
import random
from collections.abc import Sequence

from kexp.core.model import KernelExperiment, outcome_of
from kexp.core.noise import (
    MODES_RULE,
    SPIKES_HANDLED,
    dispute,
    estimate,
    rounded_interval,
    two_modes,
)
from kexp.core.settings import DEFAULT_SETTINGS, Settings
from kexp.format.outputs import markdown_table

#: The ranges a trial is drawn from.
CONFIGS = (1, 20)
SAMPLES = (5, 100)
CV = (0.01, 0.05)
OUTLIER_RATE = (0.0, 0.05)
OUTLIER_SLOWDOWN = (1.2, 3.0)
TRUE_SPEEDUP = (0.8, 1.25)


@dataclasses.dataclass(frozen=True)
class Trial:
    """The shape of one simulated experiment."""

    configs: int
    samples: int
    cv: float
    outlier_rate: float


def draw_trial(rng: random.Random) -> Trial:
    """A trial drawn from the ranges above."""
    return Trial(
        rng.randint(*CONFIGS),
        rng.randint(*SAMPLES),
        rng.uniform(*CV),
        rng.uniform(*OUTLIER_RATE),
    )


def draw_samples(
    rng: random.Random, n: int, true_time: float, cv: float, outlier_rate: float
) -> list[float]:
    """``n`` timings: log-normal around ``true_time`` (its median) with coefficient of
    variation ``cv``, each an outlier (slower by a uniform factor) with ``outlier_rate``."""
    sigma = math.sqrt(math.log1p(cv * cv))
    gauss, exp, uniform = rng.gauss, math.exp, rng.random
    times = [true_time * exp(gauss(0.0, sigma)) for _ in range(n)]
    low, high = OUTLIER_SLOWDOWN
    for index in range(n):
        if uniform() < outlier_rate:
            times[index] *= low + (high - low) * uniform()
    return times


def draw_experiment(
    rng: random.Random, trial: Trial, speedups: Sequence[float], rounds: int = 1
) -> list[list[tuple[list[float], list[float]]]]:
    """``rounds`` rounds of (baseline, candidate) samples per configuration, the
    candidate ``speedups[i]`` times faster than the baseline on configuration ``i``."""
    times = [math.exp(rng.uniform(math.log(5.0), math.log(5000.0))) for _ in speedups]
    return [
        [
            (
                draw_samples(rng, trial.samples, base, trial.cv, trial.outlier_rate),
                draw_samples(rng, trial.samples, base / speedup, trial.cv, trial.outlier_rate),
            )
            for base, speedup in zip(times, speedups, strict=True)
        ]
        for _ in range(rounds)
    ]


def _true_speedups(rng: random.Random, configs: int) -> list[float]:
    """True speedups per configuration, log-uniform in :data:`TRUE_SPEEDUP`."""
    low, high = (math.log(v) for v in TRUE_SPEEDUP)
    return [math.exp(rng.uniform(low, high)) for _ in range(configs)]


def outcome(
    pairs: Sequence[tuple[Sequence[float], Sequence[float]]],
    settings: Settings = DEFAULT_SETTINGS,
    *,
    legacy: bool = False,
    modes: bool = True,
) -> tuple[str, str]:
    """The outcome of an experiment measured so, with its interval and (as today)
    with its score alone, as :func:`kexp.core.model.outcome_of` derives them from the
    rounded values a file holds (``legacy``: by method 1 of :mod:`kexp.core.noise`;
    ``modes=False``: without its rule for two modes)."""
    found = estimate(pairs, legacy=legacy, modes=modes)
    score = round(found.score, 4)
    assert found.interval is not None
    with_interval = KernelExperiment(
        score=score, score_ci=list(rounded_interval(*found.interval)), status="done"
    )
    alone = KernelExperiment(score=score, status="done")
    return outcome_of(with_interval, settings), outcome_of(alone, settings)


@dataclasses.dataclass(frozen=True)
class Figures:
    """The measured rates (fractions) and mean interval widths."""

    trials: int
    false_alarms: float
    false_alarms_without_interval: float
    small_false_alarms: float
    small_false_alarms_without_interval: float
    coverage: float
    power: float
    power_without_interval: float
    widths: tuple[float, ...]
    #: Power (with the interval) with :data:`POWER_SAMPLES` samples a side.
    power_by_samples: tuple[float, ...] = ()
    #: A/A pairs whose baselines met load (:func:`under_load`): called improvement or
    #: regression; and by method 1 of :mod:`kexp.core.noise`.
    loaded_false_alarms: float = 0.0
    #: A true :data:`LOADED_SPEEDUP` whose baselines met load: found an improvement;
    #: and by method 1.
    loaded_power: float = 0.0
    loaded_power_legacy: float = 0.0
    #: A/A pairs timed in two clock states (:func:`two_clock_states`): called
    #: improvement or regression; and without the rule for two modes.
    bimodal_false_alarms: float = 0.0
    bimodal_false_alarms_without_modes: float = 0.0
    #: A true :data:`BIMODAL_SPEEDUP` timed so: found an improvement.
    bimodal_power: float = 0.0
    #: Rounds of the same code (2, 3 of them) found to disagree (:func:`disputed`).
    disputed: tuple[float, ...] = ()
    #: Clean sides, and clean experiments, taken for two modes (:func:`clean_modes`).
    clean_modes: tuple[float, ...] = ()


#: The sample counts whose power :func:`measure` reports.
POWER_SAMPLES = (5, 10, 30)
#: The true speedup whose power under load :func:`measure` reports.
LOADED_SPEEDUP = 1.05
#: The range of the slow clock state's slowdown, and the true speedup whose power in
#: two clock states :func:`measure` reports.
CLOCK_SLOWDOWN = (1.1, 1.5)
BIMODAL_SPEEDUP = 1.5
#: The sample counts of the clean runs :func:`clean_modes` draws (those kexp sees most).
CLEAN_SAMPLES = (5, 50)
#: A small, noisy experiment: one configuration of 5 samples a side at 5 % CV.
SMALL_TRIAL = Trial(1, 5, 0.05, 0.0)


def false_alarms(trials: int, seed: int = 1, trial: Trial | None = None) -> tuple[float, float]:
    """Share of A/A experiments called improvement or regression: (with the interval,
    with today's thresholds alone). Each trial is drawn from the ranges, or is
    ``trial``."""
    rng = random.Random(seed)
    alarms = [0, 0]
    for _ in range(trials):
        shape = trial or draw_trial(rng)
        (pairs,) = draw_experiment(rng, shape, [1.0] * shape.configs)
        for index, found in enumerate(outcome(pairs)):
            alarms[index] += found in ("improvement", "regression")
    return alarms[0] / trials, alarms[1] / trials


def coverage(trials: int, seed: int = 2) -> float:
    """Share of intervals that hold the true geometric mean of the speedups."""
    rng = random.Random(seed)
    held = 0
    for _ in range(trials):
        trial = draw_trial(rng)
        speedups = _true_speedups(rng, trial.configs)
        truth = math.exp(math.fsum(map(math.log, speedups)) / len(speedups))
        (pairs,) = draw_experiment(rng, trial, speedups)
        interval = estimate(pairs).interval
        assert interval is not None
        held += interval[0] <= truth <= interval[1]
    return held / trials


def power(
    trials: int,
    seed: int = 3,
    *,
    speedup: float = 1.03,
    samples: int = 30,
    cv: float = 0.02,
    configs: int = 1,
) -> tuple[float, float]:
    """Share of experiments with a true ``speedup`` found to be an improvement (with the
    interval, with today's thresholds alone)."""
    rng = random.Random(seed)
    found = [0, 0]
    for _ in range(trials):
        trial = Trial(configs, samples, cv, rng.uniform(*OUTLIER_RATE))
        (pairs,) = draw_experiment(rng, trial, [speedup] * configs)
        for index, result in enumerate(outcome(pairs)):
            found[index] += result == "improvement"
    return found[0] / trials, found[1] / trials


def pooling(trials: int, seed: int = 4, rounds: int = 3) -> tuple[float, ...]:
    """Mean relative width (``high / low - 1``) of the interval after 1, 2, ...
    ``rounds`` rounds, each round's samples pooled with the earlier ones."""
    rng = random.Random(seed)
    totals = [0.0] * rounds
    for _ in range(trials):
        trial = draw_trial(rng)
        speedups = _true_speedups(rng, trial.configs)
        drawn = draw_experiment(rng, trial, speedups, rounds)
        pooled: list[tuple[list[float], list[float]]] = [([], []) for _ in speedups]
        for number, measured in enumerate(drawn):
            for (base, cand), (new_base, new_cand) in zip(pooled, measured, strict=True):
                base.extend(new_base)
                cand.extend(new_cand)
            interval = estimate(pooled).interval
            assert interval is not None
            totals[number] += interval[1] / interval[0] - 1
    return tuple(total / trials for total in totals)


def spike(rng: random.Random, times: list[float], share: float) -> list[float]:
    """``times`` with ``round(share * len(times))`` of them, drawn at random, load
    spikes: slower by a uniform factor of :data:`OUTLIER_SLOWDOWN`."""
    low, high = OUTLIER_SLOWDOWN
    spiked = list(times)
    for index in rng.sample(range(len(times)), round(share * len(times))):
        spiked[index] *= low + (high - low) * rng.random()
    return spiked


def under_load(
    trials: int,
    seed: int = 7,
    *,
    speedup: float = 1.0,
    share: float = SPIKES_HANDLED,
    legacy: bool = False,
) -> dict[str, float]:
    """Outcomes (their shares) of experiments of 2 configurations, 15 samples a side at
    1 to 3 % CV, a true ``speedup``, whose baseline runs met load: ``share`` of each
    baseline's samples are spikes (:func:`spike`), the candidate's none."""
    rng = random.Random(seed)
    counts: dict[str, int] = {}
    for _ in range(trials):
        trial = Trial(2, 15, rng.uniform(0.01, 0.03), 0.0)
        (pairs,) = draw_experiment(rng, trial, [speedup] * trial.configs)
        loaded = [(spike(rng, base, share), cand) for base, cand in pairs]
        found = outcome(loaded, legacy=legacy)[0]
        counts[found] = counts.get(found, 0) + 1
    return {name: count / trials for name, count in counts.items()}


def clocked(rng: random.Random, times: list[float], slow: float) -> list[float]:
    """``times`` with each, with probability 1/2, timed in the slow clock state: ``slow``
    times slower."""
    return [t * slow if rng.random() < 0.5 else t for t in times]


def two_clock_states(
    trials: int, seed: int = 9, *, speedup: float = 1.0, modes: bool = True
) -> dict[str, float]:
    """Outcomes (their shares) of experiments of 2 configurations, 30 samples a side at
    1 to 3 % CV, a true ``speedup``, each sample timed in the slow clock state (slower
    by a factor of :data:`CLOCK_SLOWDOWN`, one a trial) with probability 1/2
    (``modes=False``: judged without the rule of :func:`kexp.core.noise.two_modes`)."""
    rng = random.Random(seed)
    counts: dict[str, int] = {}
    for _ in range(trials):
        trial = Trial(2, 30, rng.uniform(0.01, 0.03), 0.0)
        slow = rng.uniform(*CLOCK_SLOWDOWN)
        (pairs,) = draw_experiment(rng, trial, [speedup] * trial.configs)
        states = [(clocked(rng, base, slow), clocked(rng, cand, slow)) for base, cand in pairs]
        found = outcome(states, modes=modes)[0]
        counts[found] = counts.get(found, 0) + 1
    return {name: count / trials for name, count in counts.items()}


def clean_modes(
    trials: int,
    seed: int = 12,
    samples: tuple[int, int] = CLEAN_SAMPLES,
    rule: int = MODES_RULE,
) -> tuple[float, float]:
    """Shares of clean sides, and of clean experiments (A/A, drawn from the ranges but
    with ``samples`` a side), taken for two modes (:func:`kexp.core.noise.two_modes`
    by its ``rule``): their interval widened and a warning to lock clocks that were not
    the cause."""
    rng = random.Random(seed)
    sides = taken = found = 0
    for _ in range(trials):
        trial = dataclasses.replace(draw_trial(rng), samples=rng.randint(*samples))
        (pairs,) = draw_experiment(rng, trial, [1.0] * trial.configs)
        sides_of = [side for pair in pairs for side in pair]
        modes = sum(two_modes(sorted(side), rule=rule) is not None for side in sides_of)
        sides += len(sides_of)
        taken += modes
        found += modes > 0
    return taken / sides, found / trials


def disputed(trials: int, seed: int = 11, rounds: int = 2) -> float:
    """Share of experiments (drawn from the ranges, true speedups drawn) whose
    ``rounds`` rounds, each as good as the others, disagree: two intervals that do not
    overlap (:func:`kexp.core.noise.dispute`), the interval widened as if one round were
    disturbed."""
    rng = random.Random(seed)
    found = 0
    for _ in range(trials):
        trial = draw_trial(rng)
        drawn = draw_experiment(rng, trial, _true_speedups(rng, trial.configs), rounds)
        pooled = [
            ([t for r in drawn for t in r[i][0]], [t for r in drawn for t in r[i][1]])
            for i in range(trial.configs)
        ]
        found += dispute([estimate(r) for r in drawn], estimate(pooled).interval) is not None
    return found / trials


def measure(trials: int = 1000, seed: int = 0) -> Figures:
    """Every figure, over ``trials`` seeded trials each."""
    alarms = false_alarms(trials, seed + 1)
    small = false_alarms(trials, seed + 5, SMALL_TRIAL)
    found = power(trials, seed + 3)
    return Figures(
        trials,
        alarms[0],
        alarms[1],
        small[0],
        small[1],
        coverage(trials, seed + 2),
        found[0],
        found[1],
        pooling(trials, seed + 4),
        tuple(power(trials, seed + 6, samples=n)[0] for n in POWER_SAMPLES),
        called(under_load(trials, seed + 7)),
        under_load(trials, seed + 8, speedup=LOADED_SPEEDUP).get("improvement", 0.0),
        under_load(trials, seed + 8, speedup=LOADED_SPEEDUP, legacy=True).get("improvement", 0.0),
        called(two_clock_states(trials, seed + 9)),
        called(two_clock_states(trials, seed + 9, modes=False)),
        two_clock_states(trials, seed + 10, speedup=BIMODAL_SPEEDUP).get("improvement", 0.0),
        tuple(disputed(trials, seed + 11, rounds=n) for n in (2, 3)),
        clean_modes(trials, seed + 12),
    )


def called(outcomes: dict[str, float]) -> float:
    """The share of outcomes called improvement or regression."""
    return outcomes.get("improvement", 0.0) + outcomes.get("regression", 0.0)


def report(figures: Figures) -> str:
    """The figures as a Markdown table (each promise in brackets), as docs/noise.md has it."""
    widths = " → ".join(f"{w:.2%}" for w in figures.widths)
    rows = [
        ("A/A pairs called improvement or regression (≤ 5 %)", f"{figures.false_alarms:.1%}"),
        (
            "  the same, today's ±1 % thresholds alone",
            f"{figures.false_alarms_without_interval:.1%}",
        ),
        (
            "A/A pairs of 1 configuration, 5 samples, 5 % CV: improvement or regression",
            f"{figures.small_false_alarms:.1%}",
        ),
        (
            "  the same, today's ±1 % thresholds alone",
            f"{figures.small_false_alarms_without_interval:.1%}",
        ),
        ("95 % interval holds the true geometric mean (93–97 %)", f"{figures.coverage:.1%}"),
        ("true 3 % speedup, 30 samples, 2 % CV: improvement (≥ 90 %)", f"{figures.power:.1%}"),
        ("  the same, today's thresholds alone", f"{figures.power_without_interval:.1%}"),
        ("mean interval width after 1, 2, 3 rounds (never wider)", widths),
        (
            "true 3 % speedup, 2 % CV: improvement with "
            + " / ".join(map(str, POWER_SAMPLES))
            + " samples",
            " / ".join(f"{p:.0%}" for p in figures.power_by_samples),
        ),
        (
            f"A/A pairs, {SPIKES_HANDLED:.0%} of each baseline's samples load spikes: "
            "improvement or regression (≤ 5 %)",
            f"{figures.loaded_false_alarms:.1%}",
        ),
        (
            f"true {LOADED_SPEEDUP - 1:.0%} speedup, the same load: improvement (≥ 90 %)",
            f"{figures.loaded_power:.1%}",
        ),
        (
            "  the same, by method 1 (the median and spread of every sample)",
            f"{figures.loaded_power_legacy:.1%}",
        ),
        (
            "A/A pairs, half the samples in a clock state 1.1-1.5x slower: improvement or "
            "regression (≤ 5 %)",
            f"{figures.bimodal_false_alarms:.1%}",
        ),
        (
            "  the same, without the rule for two modes",
            f"{figures.bimodal_false_alarms_without_modes:.1%}",
        ),
        (
            f"true {BIMODAL_SPEEDUP - 1:.0%} speedup, the same clock states: improvement",
            f"{figures.bimodal_power:.1%}",
        ),
        (
            "rounds of the same code whose intervals do not overlap, 2 / 3 rounds (≤ 2 %)",
            " / ".join(f"{share:.1%}" for share in figures.disputed),
        ),
        (
            f"clean runs of {CLEAN_SAMPLES[0]}-{CLEAN_SAMPLES[1]} samples taken for two "
            "modes: sides / experiments (≤ 1 %)",
            " / ".join(f"{share:.2%}" for share in figures.clean_modes),
        ),
    ]
    return markdown_table((f"over {figures.trials:,} seeded trials each", "measured"), rows)


def main(argv: Sequence[str] | None = None) -> None:
    """``python -m kexp.measure.simulation [--trials N] [--seed S]``: print the figures."""
    parser = argparse.ArgumentParser(prog="python -m kexp.measure.simulation", description=__doc__)
    parser.add_argument("--trials", type=int, default=1000, help="trials per figure")
    parser.add_argument("--seed", type=int, default=0, help="base seed")
    args = parser.parse_args(argv)
    print(report(measure(args.trials, args.seed)))


if __name__ == "__main__":
    main()
