"""Scores that know their noise: medians, dispersion and a 95 % interval from samples.

Pure statistics (no files, no store): the standard library's ``math`` and
``statistics`` only.

**The score.** For each configuration the speedup is the baseline's median time over
the candidate's median time, each median that of the run's samples once its outliers
are set aside; the score is the geometric mean of these speedups (as with single
numbers, where each "median" is the one number).

**Load spikes.** On a shared machine a run picks up spikes: samples slowed by another
process, a preemption, a clock drop. They are set aside by Rosner's generalized ESD
test on the log times, at the slow end alone (a spike never makes a sample faster: a
fast clock state is no spike), looking for fewer than half of a side's samples
(:func:`max_outliers`; a sample without outliers loses one with probability
:data:`OUTLIER_ALPHA`, 1 %, whatever its size). Up to :data:`SPIKES_HANDLED` (40 %)
of a side's samples may be spikes and neither the score nor its interval moves
(``python -m kexp.measure.simulation`` measures it): the median of every sample would
drift towards the spikes (to the clean run's 83rd percentile with 40 % of them on one
side, a false speedup when they hit the baseline) and the spread of every sample would
call a clear speedup within noise. Method 1 (:data:`METHOD`) looked for a fifth and
took the median of every sample; validation still accepts a file it wrote.

**Two modes.** Timings of a GPU whose clocks are not locked may fall in two modes
(boost on, boost off), near half of them each: the median lies in either, and whether
it is the fast one or the slow one differs between two runs of the same code, a false
speedup or regression as large as the gap. :func:`two_modes` finds them (each mode a
quarter of the samples or more, their gap many times their spread, more times with
fewer than 25 samples: a few clean samples leave a gap by chance); such a side's
log-median gets a standard error no smaller than the gap over √2 (half of it is the
error of a median that lies in either mode), so the interval holds a swap between the
modes (the simulation's two-clock-state figures measure it).

**Rounds that disagree.** Rounds of one experiment pooled sample by sample are taken
for one population; when two rounds' own intervals do not overlap (:func:`dispute`),
one was disturbed as a whole (load all along, a throttled clock), and the pooled
interval, narrow around a score between them, is widened to hold every round's.

**The interval.** The score's logarithm is the mean of the configurations'
``log(median baseline) - log(median candidate)``. Each log-median gets a standard
error from the samples kept (``k`` of them):

1. the spread ``s`` is the standard deviation of the kept log times (``k - 1``
   degrees of freedom: as efficient as it gets for the Gaussian bulk);
2. the variance of the median is ``c(k) s^2 / k``, where ``c(k)`` is the exact
   small-sample factor of the median of ``k`` normal samples
   (:func:`median_variance_factor`: 1.43 at k = 5, pi/2 for large k).

The variances add up over sides and configurations; the interval is Student's t on
the log scale, with Welch-Satterthwaite degrees of freedom
(:func:`score_interval`). It needs no random numbers (the same samples always give the
same interval, to the last digit), costs a sort per configuration, and gets wider
when there are few samples and narrower as rounds are pooled. A bootstrap was the
alternative: in pure Python 2,000 resamples cost seconds for 20 configurations of 100
samples, it needs a seed to write the same file twice, and its percentile interval of
a median of few samples is coarse (the median of 5 resampled values takes only 5).
``python -m kexp.measure.simulation`` measures what this method promises (false alarms on A/A
pairs, coverage, power, pooling); docs/noise.md quotes its figures.
"""

from __future__ import annotations

import dataclasses
import functools
import math
import statistics
from collections.abc import Sequence

#: The confidence level of ``score_ci``.
LEVEL = 0.95
#: Fewest samples per side and configuration for an interval (with fewer, the spread
#: of a configuration cannot be estimated and the score has no interval).
MIN_SAMPLES = 3
#: The chance that Gaussian samples without outliers lose one to the outlier test.
OUTLIER_ALPHA = 0.01
#: The share of a side's samples that may be load spikes (slower by 20 % or more) with
#: the score and its interval kept to the rest (the simulation holds this promise).
SPIKES_HANDLED = 0.4
#: Two modes (:func:`two_modes`): the fewest samples a side to tell them apart, the
#: least share of the side's samples each holds, and how many times the larger mode's
#: spread (the standard deviation of its log times) the gap between their centres is.
MODES_MIN_SAMPLES = 10
MODE_SHARE = 0.25
MODE_SEPARATION = 5.0
#: ... and how many times the other's spread the larger one may be: two clock states
#: are as tight as each other; load spikes (slowed by anything from 1.2 to 3 times)
#: are spread far wider than the clean run.
MODE_SPREADS = 3.0
#: With fewer samples than this, the separation asked grows as the square root of
#: ``MODES_FULL_SAMPLES / n`` (7.9 times at 10 samples, 6.5 at 15): the best split of a
#: few clean samples finds a gap by chance, and a small group's spread is unsure. With
#: 5 times at every size, 1 % of clean 10-sample sides were taken for two modes
#: (docs/noise.md). ``MODES_RULE`` is 2 since; 1 asked 5 times at every size, which a
#: file recorded before may hold.
MODES_FULL_SAMPLES = 25
MODES_RULE = 2
#: The method's version: 2 sets aside fewer than half of a side's samples as outliers
#: and takes the median of the rest; 1 looked for a fifth and took every sample's
#: median (``legacy=True``), which a file recorded before may hold.
METHOD = 2
#: ``n * Var(median of n normal samples) / sigma^2`` is ``pi/2 - a / (n + b)`` with
#: these ``(a, b)`` for odd and even ``n`` (fitted to exact quadrature for n = 3..120,
#: within 0.06 %; tests/test_noise.py checks it against the quadrature).
_ODD_FACTOR = (0.6903, 0.08)
_EVEN_FACTOR = (2.2311, 1.9)


#: Decimals of ``score`` and of the ends of ``score_ci`` in a file.
SCORE_DIGITS = 4


class NoiseError(ValueError):
    """Samples that no statistic can be computed from (none, or not positive)."""


def median_variance_factor(n: int) -> float:
    """``n * Var(median) / sigma^2`` for ``n`` samples of a normal distribution.

    1 for n = 1 and 2 (the median is then the mean), 1.346 for 3, 1.193 for 4, 1.434
    for 5, tending to pi/2 (the median's asymptotic efficiency, 64 %).
    """
    if n < 1:
        raise NoiseError("no samples")
    if n <= 2:
        return 1.0
    a, b = _ODD_FACTOR if n % 2 else _EVEN_FACTOR
    return math.pi / 2 - a / (n + b)


def _spread_without_outliers(
    deviations: Sequence[float], most: int, *, two_sided: bool = False
) -> tuple[int, int, float]:
    """``(low, high, spread)`` of sorted log times (less their median): how many are
    outliers at each end, found by Rosner's generalized ESD test looking for at most
    ``most``, and the standard deviation of the rest. A load spike only makes a sample
    slower: outliers are looked for at the slow end alone (``low`` is 0), so the fast
    mode of a side in two clock states is never set aside as spikes (it was: 13 of 30
    samples, the median moved to the slow mode); ``two_sided``: at either end, as kexp
    did before (a file recorded then validates as it is).

    The outliers are the most removals whose statistic passed its critical value (a
    crowd of load spikes that hides itself at the first removals is still found at the
    last). A critical value falls as removals go on (it grows with the samples left),
    so one below the last critical value fails and one above the first passes without
    computing its own: thousands of samples (pytest-benchmark keeps every round) cost
    a few critical values, not one a removal.
    """
    n = len(deviations)
    lo, hi = 0, n - 1
    total = math.fsum(deviations)
    squares = math.fsum(d * d for d in deviations)
    # (low end, high end, sum, sum of squares) after each removal, and its statistic.
    kept = [(lo, hi, total, squares)]
    statistics_: list[float] = []
    for step in range(1, most + 1):
        count = n - step + 1
        mean = total / count
        variance = (squares - total * mean) / (count - 1)
        if variance <= 0:
            break
        if two_sided and mean - deviations[lo] > deviations[hi] - mean:
            removed, lo = deviations[lo], lo + 1
        else:
            removed, hi = deviations[hi], hi - 1
        statistics_.append(abs(removed - mean) / math.sqrt(variance))
        total -= removed
        squares -= removed * removed
        kept.append((lo, hi, total, squares))
    outliers = 0
    if statistics_:
        lowest = esd_critical_value(n, len(statistics_))
        highest = esd_critical_value(n, 1)
        for step in range(len(statistics_), 0, -1):
            statistic = statistics_[step - 1]
            if statistic <= lowest:
                continue
            if statistic > highest or statistic > esd_critical_value(n, step):
                outliers = step
                break
    lo, hi, total, squares = kept[outliers]
    count = n - outliers
    variance = max(0.0, (squares - total * total / count) / (count - 1))
    return lo, n - 1 - hi, math.sqrt(variance)


def max_outliers(n: int, *, legacy: bool = False) -> int:
    """The most outliers looked for among ``n`` samples: fewer than half (load spikes
    are the minority of a run, or they are the run), leaving at least
    :data:`MIN_SAMPLES`; ``legacy``: a fifth, as method 1 did (:data:`METHOD`)."""
    share = (n // 5 or 1) if legacy else (n - 1) // 2
    return max(0, min(share, n - MIN_SAMPLES))


@functools.lru_cache(maxsize=4096)
def esd_critical_value(n: int, step: int, alpha: float = OUTLIER_ALPHA) -> float:
    """Rosner's critical value for the ``step``-th most extreme of ``n`` samples."""
    left = n - step + 1
    t = t_quantile(1 - alpha / (2 * left), left - 2)
    return (left - 1) * t / math.sqrt((left - 2 + t * t) * left)


@dataclasses.dataclass(frozen=True)
class SideStats:
    """What one side (baseline or candidate) of one configuration's samples says."""

    n: int
    median: float
    #: Interquartile range (same unit as the samples).
    iqr: float
    #: Standard error of ``log(median)`` (None with fewer than :data:`MIN_SAMPLES`).
    log_se: float | None
    #: Degrees of freedom of ``log_se`` (samples kept minus one).
    df: int
    #: Samples set aside as outliers when estimating the spread.
    outliers: int
    #: The least and the greatest sample kept (the outliers set aside lie outside).
    kept: tuple[float, float] = (0.0, 0.0)
    #: Two modes the samples fall in (:func:`two_modes`), or None.
    modes: Modes | None = None


@dataclasses.dataclass(frozen=True)
class Modes:
    """Samples that fall in two well-separated modes (two clock states)."""

    #: The median time of the fast mode and of the slow one.
    fast: float
    slow: float
    #: The share of the samples in the slow mode.
    slow_share: float


def two_modes(values: Sequence[float], *, rule: int = MODES_RULE) -> Modes | None:
    """The two modes sorted ``values`` fall in, or None: the split of their log times
    into a fast and a slow group with the least spread within (one-dimensional
    2-means), each holding at least :data:`MODE_SHARE` of them (and 3), the gap between
    the groups' means more than :data:`MODE_SEPARATION` times the larger group's
    standard deviation (more with fewer than :data:`MODES_FULL_SAMPLES` samples; not so
    by ``rule`` 1), that no more than :data:`MODE_SPREADS` times the other's, and
    each no more than as many times the spread its median absolute deviation gives (a
    group holding stray samples). Load spikes are no mode: they spread far wider than
    the clean run, or lie between the groups. Needs :data:`MODES_MIN_SAMPLES`."""
    n = len(values)
    if n < MODES_MIN_SAMPLES:
        return None
    logs = [math.log(v) for v in values]
    sums, squares = [0.0], [0.0]
    for x in logs:
        sums.append(sums[-1] + x)
        squares.append(squares[-1] + x * x)

    def within(lo: int, hi: int) -> float:
        count = hi - lo
        total = sums[hi] - sums[lo]
        return max(0.0, squares[hi] - squares[lo] - total * total / count)

    least = max(3, math.ceil(MODE_SHARE * n))
    if n - least < least:
        return None
    # the least spread within is the most between: max of S_left^2/i + S_right^2/(n-i)
    total, split, best = sums[n], least, -math.inf
    for i in range(least, n - least + 1):
        left = sums[i]
        between = left * left / i + (total - left) ** 2 / (n - i)
        if between > best:
            split, best = i, between
    gap = (sums[n] - sums[split]) / (n - split) - sums[split] / split
    ends = ((0, split), (split, n))
    deviations = [math.sqrt(within(lo, hi) / (hi - lo - 1)) for lo, hi in ends]
    spreads = sorted(deviations)
    separation = MODE_SEPARATION
    if rule >= 2:
        separation *= max(1.0, math.sqrt(MODES_FULL_SAMPLES / n))
    if gap <= separation * spreads[1] or spreads[1] > MODE_SPREADS * spreads[0]:
        return None
    if any(
        d > MODE_SPREADS * _robust_spread(logs[lo:hi])
        for d, (lo, hi) in zip(deviations, ends, strict=True)
    ):
        return None  # a group with stray samples (spikes between the groups): no mode
    fast = float(statistics.median(values[:split]))
    return Modes(fast, float(statistics.median(values[split:])), (n - split) / n)


def _robust_spread(logs: Sequence[float]) -> float:
    """The standard deviation of normal samples with the median absolute deviation of
    ``logs`` (a stray sample does not widen it)."""
    center = statistics.median(logs)
    return 1.4826 * float(statistics.median(abs(x - center) for x in logs))


def side_stats(
    samples: Sequence[float],
    *,
    legacy: bool = False,
    modes: bool = True,
    rule: int = MODES_RULE,
    two_sided: bool = False,
) -> SideStats:
    """The run's median, interquartile range and the log-median's standard error.

    The median is that of the samples left once the outliers (load spikes, a preempted
    run) are set aside, its standard error that of the median of as many normal samples
    with their spread; the interquartile range is every sample's. Samples in two
    modes (:func:`two_modes`: clocks not locked) give a median that lies in either, so
    its standard error is at least the gap between the modes (on the log scale) over
    √2, and the interval holds a swap between them; ``modes=False``: as before this
    rule (a file recorded then); ``rule``: that of :func:`two_modes`. ``legacy``: method
    1 (:data:`METHOD`), which a file recorded before may hold: the median of every
    sample. Outliers are looked for among the slow samples alone (a spike only makes a
    sample slower); ``two_sided`` (and ``legacy``): at both ends, as before that rule.
    """
    values = sorted(float(v) for v in samples)
    n = len(values)
    if n == 0:
        raise NoiseError("no samples")
    if not all(v > 0 and math.isfinite(v) for v in values):
        raise NoiseError("samples must be positive, finite numbers")
    median = float(statistics.median(values))
    if n < 2:
        return SideStats(n, median, 0.0, None, 0, 0)
    quartiles = statistics.quantiles(values, n=4, method="inclusive")
    iqr = quartiles[2] - quartiles[0]
    if n < MIN_SAMPLES:
        return SideStats(n, median, iqr, None, 0, 0)
    center = math.log(median)
    deviations = [math.log(v) - center for v in values]  # sorted, as the values
    low, high, spread = _spread_without_outliers(
        deviations, max_outliers(n, legacy=legacy), two_sided=two_sided or legacy
    )
    kept = n - low - high
    if legacy:
        variance = median_variance_factor(n) * spread**2 / n / (kept / n) ** 2
    else:
        median = float(statistics.median(values[low : n - high]))
        variance = median_variance_factor(kept) * spread**2 / kept
    found = two_modes(values, rule=rule) if modes and not legacy else None
    if found is not None:  # the median lies in either mode: half their gap is its error,
        # and as much again for a partner side whose modes were not told apart
        variance = max(variance, math.log(found.slow / found.fast) ** 2 / 2)
    ends = (values[low], values[n - 1 - high])
    return SideStats(n, median, iqr, math.sqrt(variance), kept - 1, low + high, ends, found)


@dataclasses.dataclass(frozen=True)
class ConfigEstimate:
    """One configuration: both sides' statistics and the median speedup."""

    baseline: SideStats
    candidate: SideStats

    @property
    def speedup(self) -> float:
        """Median baseline time over median candidate time (> 1 is faster)."""
        return self.baseline.median / self.candidate.median


def config_estimate(
    baseline: Sequence[float],
    candidate: Sequence[float],
    *,
    legacy: bool = False,
    modes: bool = True,
    rule: int = MODES_RULE,
    two_sided: bool = False,
) -> ConfigEstimate:
    """The statistics of one configuration's baseline and candidate samples
    (``legacy``, ``modes``, ``rule``, ``two_sided``: see :func:`side_stats`)."""
    return ConfigEstimate(
        side_stats(baseline, legacy=legacy, modes=modes, rule=rule, two_sided=two_sided),
        side_stats(candidate, legacy=legacy, modes=modes, rule=rule, two_sided=two_sided),
    )


@dataclasses.dataclass(frozen=True)
class Estimate:
    """A score from samples: the geometric mean of median speedups and its interval."""

    score: float
    #: ``(low, high)`` at :data:`LEVEL`, or None when some side has too few samples.
    interval: tuple[float, float] | None
    configs: tuple[ConfigEstimate, ...]


def estimate(
    samples: Sequence[tuple[Sequence[float], Sequence[float]]],
    *,
    legacy: bool = False,
    modes: bool = True,
    rule: int = MODES_RULE,
    two_sided: bool = False,
) -> Estimate:
    """The score and its interval from ``(baseline samples, candidate samples)`` per
    configuration (``legacy``, ``modes``, ``rule``, ``two_sided``: see
    :func:`side_stats`)."""
    if not samples:
        raise NoiseError("no configurations")
    configs = tuple(
        config_estimate(base, cand, legacy=legacy, modes=modes, rule=rule, two_sided=two_sided)
        for base, cand in samples
    )
    log_score = math.fsum(math.log(c.speedup) for c in configs) / len(configs)
    return Estimate(math.exp(log_score), score_interval(configs), configs)


def score_interval(
    configs: Sequence[ConfigEstimate], level: float = LEVEL
) -> tuple[float, float] | None:
    """The interval of the geometric mean of the configurations' median speedups.

    Student's t on the log scale: the log score is a mean of ``k`` log ratios, its
    variance the sum of the sides' ``log_se**2`` over ``k**2``, its degrees of freedom
    Welch-Satterthwaite's. None when a side has no standard error.
    """
    if not configs:
        return None
    parts: list[tuple[float, int]] = []
    for config in configs:
        for side in (config.baseline, config.candidate):
            if side.log_se is None:
                return None
            parts.append((side.log_se**2, side.df))
    k = len(configs)
    log_score = math.fsum(math.log(c.speedup) for c in configs) / k
    variance = math.fsum(v for v, _ in parts) / k**2
    if variance == 0:
        return (math.exp(log_score), math.exp(log_score))
    spread = math.fsum((v / k**2) ** 2 / df for v, df in parts if v > 0)
    df = variance**2 / spread
    half = t_quantile(0.5 + level / 2, df) * math.sqrt(variance)
    return (math.exp(log_score - half), math.exp(log_score + half))


def ratio_interval(
    numerator: float,
    numerator_ci: Sequence[float],
    denominator: float,
    denominator_ci: Sequence[float],
) -> tuple[float, float]:
    """The interval of ``numerator / denominator`` for two independent scores with
    intervals (e.g. an experiment and its parent): their log half-widths add in
    quadrature (each interval is symmetric on the log scale)."""
    ratio = numerator / denominator
    halves = [(math.log(ci[1]) - math.log(ci[0])) / 2 for ci in (numerator_ci, denominator_ci)]
    half = math.hypot(*halves)
    return (ratio * math.exp(-half), ratio * math.exp(half))


def rounded_interval(low: float, high: float) -> tuple[float, float]:
    """An interval rounded outwards to :data:`SCORE_DIGITS` decimals, so that it still
    holds the score rounded to as many."""
    scale = 10**SCORE_DIGITS
    return (
        math.floor(round(low * scale, 6)) / scale,
        math.ceil(round(high * scale, 6)) / scale,
    )


# --- rounds that disagree -----------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class Dispute:
    """Rounds of one experiment whose intervals do not overlap (:func:`dispute`)."""

    #: Each round's score and interval (None: too few samples), in the rounds' order.
    figures: tuple[tuple[float, tuple[float, float] | None], ...]
    #: The pairs of rounds (0-based, each pair ascending) whose intervals are disjoint.
    pairs: tuple[tuple[int, int], ...]
    #: The pooled interval widened to hold every round's interval.
    interval: tuple[float, float]
    #: The pooled interval as the samples alone give it.
    pooled: tuple[float, float]

    @property
    def odd(self) -> int | None:
        """The round (0-based) that disagrees with every other round while those agree
        among themselves (3 rounds or more), or None: which one is wrong is not told."""
        measured = [i for i, (_, interval) in enumerate(self.figures) if interval is not None]
        for index in measured:
            against = {(min(index, i), max(index, i)) for i in measured if i != index}
            if len(against) >= 2 and set(self.pairs) == against:
                return index
        return None


def dispute(rounds: Sequence[Estimate], interval: tuple[float, float] | None) -> Dispute | None:
    """Rounds of one experiment (each round's own :class:`Estimate`) that disagree: two
    whose intervals do not overlap. Each interval covers its round's noise, not what
    changed between the rounds (load, a throttled clock, other code), and pooled they
    give a narrow interval around a score between the two: the ``interval`` pooled is
    then widened to hold every round's interval, no confident change called on rounds
    that disagree. None when every pair overlaps (or fewer than two rounds have an
    interval, or the pool none). Two rounds of the same code disagree so in about
    0.5 % of trials, three in about 1.2 % (``python -m kexp.measure.simulation``)."""
    if interval is None:
        return None
    pairs = []
    for first, one in enumerate(rounds):
        for second in range(first + 1, len(rounds)):
            other = rounds[second]
            if one.interval is None or other.interval is None:
                continue
            if one.interval[1] < other.interval[0] or other.interval[1] < one.interval[0]:
                pairs.append((first, second))
    if not pairs:
        return None
    ends = [interval, *(r.interval for r in rounds if r.interval is not None)]
    widened = (min(low for low, _ in ends), max(high for _, high in ends))
    figures = tuple((r.score, r.interval) for r in rounds)
    return Dispute(figures, tuple(pairs), widened, interval)


# --- Student's t -------------------------------------------------------------------------


def t_quantile(p: float, df: float) -> float:
    """The ``p`` quantile of Student's t with ``df`` degrees of freedom (``df`` may be
    fractional, as Welch-Satterthwaite's are; infinite gives the normal quantile).

    Newton's method on :func:`t_cdf`, from the Cornish-Fisher expansion (Abramowitz
    and Stegun 26.7.5), to 1e-12 relative.
    """
    if not 0 < p < 1:
        raise ValueError("p must be between 0 and 1")
    if df <= 0:
        raise ValueError("degrees of freedom must be positive")
    if p < 0.5:
        return -t_quantile(1 - p, df)
    z = statistics.NormalDist().inv_cdf(p)
    if p == 0.5 or math.isinf(df) or df > 1e7:
        return z
    z2 = z * z
    t = z + z * (z2 + 1) / (4 * df) + z * ((5 * z2 + 16) * z2 + 3) / (96 * df * df)
    if df < 2:  # the expansion is poor here: start from the exact quantile of df 1
        t = math.tan(math.pi * (p - 0.5))
    elif df < 3:  # ... or of df 2
        t = (2 * p - 1) / math.sqrt(2 * p * (1 - p))
    for _ in range(100):
        step = (t_cdf(t, df) - p) / t_density(t, df)
        t_next = max(t - step, t / 2)  # never past 0: the density's tail is flat
        if abs(t_next - t) <= 1e-12 * abs(t_next):
            return t_next
        t = t_next
    return t  # pragma: no cover - Newton converges in a few steps


def t_density(t: float, df: float) -> float:
    """The density of Student's t with ``df`` degrees of freedom."""
    log_norm = math.lgamma((df + 1) / 2) - math.lgamma(df / 2) - 0.5 * math.log(df * math.pi)
    return math.exp(log_norm - (df + 1) / 2 * math.log1p(t * t / df))


def t_cdf(t: float, df: float) -> float:
    """The distribution function of Student's t with ``df`` degrees of freedom.

    Near the centre (``t * t < df``) from the central probability ``I_x(1/2, df/2)``
    with ``x = t²/(df + t²)`` small, else from the tail ``I_x(df/2, 1/2)`` with
    ``x = df/(df + t²)``: each where its continued fraction needs no ``1 - ...`` of two
    close numbers (the tail form alone lost 3e-9 near the centre at large ``df``).
    """
    squared = t * t
    if squared < df:
        central = regularized_beta(squared / (df + squared), 0.5, df / 2)
        return 0.5 + 0.5 * central if t > 0 else 0.5 - 0.5 * central
    tail = 0.5 * regularized_beta(df / (df + squared), df / 2, 0.5)
    return 1 - tail if t > 0 else tail


def regularized_beta(x: float, a: float, b: float) -> float:
    """The regularized incomplete beta function ``I_x(a, b)`` (Lentz's continued
    fraction, as in Numerical Recipes' ``betai``)."""
    if x <= 0:
        return 0.0
    if x >= 1:
        return 1.0
    log_front = (
        math.lgamma(a + b) - math.lgamma(a) - math.lgamma(b) + a * math.log(x) + b * math.log1p(-x)
    )
    if x < (a + 1) / (a + b + 2):
        return math.exp(log_front) * _beta_fraction(x, a, b) / a
    return 1 - math.exp(log_front) * _beta_fraction(1 - x, b, a) / b


def _beta_fraction(x: float, a: float, b: float) -> float:
    tiny = 1e-300
    c, d = 1.0, 1 - (a + b) * x / (a + 1)
    d = 1 / (d if abs(d) > tiny else tiny)
    result = d
    for m in range(1, 500):
        for numerator in (
            m * (b - m) * x / ((a + 2 * m - 1) * (a + 2 * m)),
            -(a + m) * (a + b + m) * x / ((a + 2 * m) * (a + 2 * m + 1)),
        ):
            d = 1 + numerator * d
            d = 1 / (d if abs(d) > tiny else tiny)
            c = 1 + numerator / c
            c = c if abs(c) > tiny else tiny
            result *= c * d
        if abs(c * d - 1) < 1e-15:
            break
    return result
