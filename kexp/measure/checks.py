"""Checks of timings before they are recorded: what a careful engineer would catch.

* :func:`check_round_scale`: a new round of :func:`kexp.measure.remeasure.remeasure` whose
  times are many times those of the earlier rounds (``Settings.remeasure_scale_above``:
  a round written in milliseconds read as microseconds, or other code) is refused,
  naming the unit that would make them agree, before it is pooled and the
  experiment's score is lost in it.
* :func:`implausible_control`: a control (an A/A run) remeasured into an interval that
  excludes 1, or far wider than its earlier noise floor: the round's two sides were not
  timed alike, and the floor every step is judged against moved.
* :func:`throttled_rounds`: a control's round whose samples were mostly set aside as
  load spikes when pooled (a throttled round, a third of the samples): the pooled floor
  looks fine, so the round is named on its own, with the step that replaces it.
* :func:`rounds_disagree`: an experiment's rounds whose intervals do not overlap
  (:func:`kexp.core.noise.dispute`): pooled, they would give a narrow interval around
  a score between them; it is widened to hold them all, and the round that disagrees
  is named, with the step that replaces it (or a round to add that tells which).
* :func:`modes_hint`: a side whose timings fall in two modes (the GPU's clocks not
  locked): the score's interval is widened to hold both; lock the clocks.
  :func:`rounds_modes_hint`: the same of a remeasured experiment's rounds, the new one
  and the earlier ones, each on its own and pooled (each round at another clock speed).
* :func:`unit_hint`: timings of a file that does not say its unit, every one near
  zero as read: milliseconds (do_bench's) read as microseconds, most likely.
  :func:`check_assumed_unit`: the same when no unit was given either (microseconds
  assumed) is refused: nothing is written, the unit is said instead.
* :func:`resolution_hint`: a configuration whose repeated timings are all one value
  (a kernel shorter than the timer's resolution): its interval of no width claims a
  precision the timings do not have.
* :func:`few_samples_hint`: a configuration timed fewer than 3 times a side (do_bench's
  default return, one number): the score has no interval, its outcome rests on the
  thresholds alone; how to give every timing.
* :func:`replaced_round_held`: a round replaced by a new one (``kexp remeasure
  --replace-round``) needs a reason and the file committed as it is, so that the round
  stays in git history.
* :func:`summary_contradiction`: a ``change_summary`` stating a speedup the score
  contradicts (``+12.5%`` beside 0.8956).
* :func:`drift_notes`: a step whose interval leaves out 1 but stays within the drift
  the A/A control of its env measured is said to be within noise, with why; a step
  timed by a tool that times one side a run (pytest-benchmark), with no control on its
  env, is told that its interval covers one run only, and how to measure the drift.
* :func:`samples_too_large`: an experiment refused as too large because of its raw
  samples (pytest-benchmark keeps every round, 200,000 of a fast function) is said as
  such, with what to do, instead of "move large logs out of the experiment".
"""

from __future__ import annotations

import math
import re
import statistics
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from kexp.core.advice import (
    CORRECT_FIELD,
    RECORD_CONTROL,
    RECORD_IN_UNIT,
    RECORD_WITH_UNIT,
    REMEASURE,
    REMEASURE_IN_UNIT,
    REPLACE_ROUND,
    SET_FAILED,
)
from kexp.core.errors import MeasurementError, ValidationError
from kexp.core.noise import MIN_SAMPLES, estimate, rounded_interval, two_modes
from kexp.core.outcome import drift_of, measured_drift, measured_nothing
from kexp.core.settings import DEFAULT_SETTINGS, Settings
from kexp.format.suspect import UNIT_TO_US
from kexp.measure.timings import IN_PYTHON, csv_times, plain_json

if TYPE_CHECKING:
    from kexp.format.samples import Round

Sides = tuple[Sequence[float], Sequence[float]]


def _unit_that_fits(ratio: float, unit: str) -> str | None:
    """The unit in which times read as ``unit`` would be ``1 / ratio`` times as large
    (within 30 %), if one is."""
    given = UNIT_TO_US.get(unit)
    if given is None:
        return None
    for name, factor in UNIT_TO_US.items():
        if name != unit and abs(math.log(factor / given * ratio)) < math.log(1.3):
            return name
    return None


def check_round_scale(
    exp_id: str,
    earlier: Mapping[str, Sides],
    new: Mapping[str, Sides],
    unit: str,
    limit: float,
) -> None:
    """Refuse a new round whose median time of a configuration (either side) is more
    than ``limit`` times that of the earlier rounds, or less than its inverse (the
    setting ``remeasure_scale_above``): pooled, it would make the score and its
    interval meaningless. ``earlier`` and ``new`` hold (baseline, candidate) samples in
    microseconds per configuration; ``unit`` is the unit the new round was read in."""
    worst: tuple[float, str, str, float, float] | None = None
    for config, sides in new.items():
        if config not in earlier:
            continue
        pairs = zip(("baseline", "candidate"), sides, earlier[config], strict=True)
        for name, now, before in pairs:
            if not now or not before:
                continue
            old, found = statistics.median(before), statistics.median(now)
            ratio = found / old
            if worst is None or abs(math.log(ratio)) > abs(math.log(worst[0])):
                worst = (ratio, config, name, found, old)
    if worst is None or 1 / limit <= worst[0] <= limit:
        return
    ratio, config, side, found, old = worst
    # two figures: about 1000 times, 1/3.5 of
    size = f"{_two_figures(ratio)} times" if ratio > 1 else f"1/{_two_figures(1 / ratio)} of"
    fits = _unit_that_fits(ratio, unit)
    if fits is not None:
        advice = (
            f"read in {fits} instead of {unit} they agree: give the unit {fits} "
            f"({REMEASURE_IN_UNIT.say(unit=fits)})"
            + ("; triton's do_bench returns milliseconds" if fits == "ms" else "")
            + " (if the earlier rounds were read in the wrong unit, record the experiment "
            "again)"
        )
    else:
        advice = "check that the new round timed the same kernels and configurations"
    raise MeasurementError(
        f"the new round's times are {size} those of the earlier rounds of {exp_id} "
        f"({config}, {side}: median {found:.4g} us now, {old:.4g} us before): {advice}; "
        "nothing was changed"
    )


#: How many times its earlier width (on the log scale) a control's interval may grow
#: when a round is pooled with it before kexp warns: pooling a round like the earlier
#: ones narrows the interval (by about 1/√2), so twice the width means a round several
#: times as noisy as the earlier ones.
CONTROL_WIDENING = 2.0


def implausible_control(before: Sequence[float], after: Sequence[float]) -> list[str]:
    """Why a control's interval ``after`` a round was pooled is implausible for an A/A
    run (empty when it is plausible): it excludes 1 (the same code timed faster on one
    side), or it is more than :data:`CONTROL_WIDENING` times as wide as ``before``
    (its interval before; either may be empty: no interval)."""
    if len(after) != 2:
        return []
    reasons = []
    low, high = after
    if low > 1 or high < 1:
        reasons.append("its interval excludes 1")
    if len(before) == 2 and before[0] > 0 and low > 0:
        width, was = math.log(high / low), math.log(before[1] / before[0])
        if was > 0 and width > CONTROL_WIDENING * was:
            reasons.append(f"its interval is {_two_figures(width / was)} times as wide as before")
    return reasons


def throttled_rounds(exp_id: str, rounds: Sequence[Round]) -> str | None:
    """What to say of a control (``exp_id``) whose rounds, pooled, set aside at least
    half of some round's samples of a side as load spikes (the first such round, and
    what it gives alone), with the step that replaces it; None when no round was
    (one round: none)."""
    if len(rounds) < 2:
        return None
    # lazy: a remeasure's, as kexp.measure.remeasure imports it
    from kexp.format.samples import pooled, set_aside, summarize

    together = pooled(rounds)
    summary = summarize(together)
    for number, measured in enumerate(rounds, 1):
        for config, stats in zip(together, summary.configs, strict=True):
            sides = zip(("baseline", "candidate"), (stats.baseline, stats.candidate), strict=True)
            for (name, side), samples in zip(sides, measured.timings[config], strict=True):
                count = set_aside(side, samples)
                if not samples or 2 * count < len(samples):
                    continue
                alone = estimate(list(measured.timings.values()))
                figure = f"{alone.score:.4f}"
                if alone.interval is not None:
                    figure += f" [{alone.interval[0]:.4f}, {alone.interval[1]:.4f}]"
                return (
                    f"control {exp_id[:10]} is an A/A run, yet {count} of round {number}'s "
                    f"{len(samples)} {name} samples of {config} were set aside as load "
                    f"spikes when its {len(rounds)} rounds were pooled (round {number} alone "
                    f"gives {figure}): that round was throttled or timed under load, and the "
                    "noise floor leaves it out without a word. Commit the file, time the A/A "
                    f"again and replace the round: {REPLACE_ROUND.say(id=exp_id, n=number)}"
                )
    return None


def rounds_disagree(exp_id: str, rounds: Sequence[Round]) -> str | None:
    """What to say of experiment ``exp_id`` whose ``rounds`` disagree (intervals that
    do not overlap, :func:`kexp.core.noise.dispute`): each round's figures, the narrow
    interval they would give pooled and the one recorded, and what to do: replace the
    round that disagrees with the others, or add a round that tells which one does.
    None when they agree."""
    from kexp.format.samples import pooled, round_figures, summarize  # lazy: a remeasure's

    found = summarize(pooled(rounds), rounds=rounds).dispute
    if found is None:
        return None
    narrow, wide = (rounded_interval(*ends) for ends in (found.pooled, found.interval))
    text = (
        f"the rounds of {exp_id[:10]} disagree beyond their intervals ({round_figures(found)}): "
        "a round was disturbed (load, a throttled clock, other code), its samples and the "
        f"others' are not one population; pooled they give [{narrow[0]:.4f}, "
        f"{narrow[1]:.4f}], narrower than their disagreement, so score_ci holds every "
        f"round's: [{wide[0]:.4f}, {wide[1]:.4f}], a change called only if every round "
        "calls it. "
    )
    odd = found.odd
    if odd is not None:
        return text + (
            f"Round {odd + 1} disagrees with the others: commit the file, time it again and "
            f"replace it: {REPLACE_ROUND.say(id=exp_id, n=odd + 1)}"
        )
    first, last = found.pairs[-1]
    return text + (
        f"Add a round to tell which of rounds {first + 1} and {last + 1} is off "
        f"({REMEASURE.say(id=exp_id)}: the round that disagrees with the others is then "
        f"named); or, if you know round {last + 1} was disturbed, commit the file, time it "
        f"again and replace it: {REPLACE_ROUND.say(id=exp_id, n=last + 1)}"
    )


#: What a score's interval does when a side's samples fall in two modes.
_WIDENED = (
    "so the median lies in either and the score's interval is widened to hold both, no "
    "speedup or regression called with confidence"
)
#: How to take timings in one clock state.
_LOCK = "lock the clocks (sudo nvidia-smi -lgc MHZ,MHZ; -rgc resets them), time it again"


def modes_hint(
    samples: Mapping[str, Sides], exp_id: str | None = None, number: int = 1
) -> str | None:
    """What to say when a side of a configuration (``samples``: baseline and candidate
    samples per configuration) falls in two modes (:func:`kexp.core.noise.two_modes`):
    the GPU ran at two clock speeds, the score's interval was widened to hold a swap
    between them; lock the clocks and time it again (``exp_id``: a remeasured
    experiment, whose round ``number`` is replaced so)."""
    for config, sides in samples.items():
        for name, side in zip(("baseline", "candidate"), sides, strict=True):
            found = two_modes(sorted(side))
            if found is None:
                continue
            again = (
                f"replace the round ({REPLACE_ROUND.say(id=exp_id, n=number)})"
                if exp_id is not None
                else "record it"
            )
            return (
                f"{config}: the {name} timings fall in two modes, {found.fast:.4g} us and "
                f"{found.slow:.4g} us ({found.slow_share:.0%} of them the slow one): the GPU "
                f"ran at two clock speeds (clocks not locked, boost on and off), {_WIDENED}; "
                f"{_LOCK} and {again}"
            )
    return None


def rounds_modes_hint(
    exp_id: str, rounds: Sequence[Round], number: int, *, pooled_too: bool = True
) -> str | None:
    """What to say when a remeasured experiment's samples fall in two modes
    (:func:`kexp.core.noise.two_modes`): the first round whose own samples of a side do
    (round ``number``, the new one, first; then the earlier ones, which stay in the
    pool), named with the step that replaces it; else (``pooled_too``) a side whose
    rounds pooled do, each round at one clock speed but not all at the same one: the
    rounds in the mode fewer rounds ran in are named. Whether the score's interval was
    widened is what the pooled samples, which it is computed from, say. None when no
    samples fall in two modes."""
    from kexp.format.samples import pooled  # lazy: a remeasure's

    together = pooled(rounds)
    names = ("baseline", "candidate")
    order = [number, *(n for n in range(1, len(rounds) + 1) if n != number)]
    for n in order:
        for config, sides in rounds[n - 1].timings.items():
            for index, (name, side) in enumerate(zip(names, sides, strict=True)):
                found = two_modes(sorted(side))
                if found is None:
                    continue
                widened = two_modes(sorted(together[config][index])) is not None
                effect = (
                    _WIDENED
                    if widened
                    else "so its median lies in either (pooled with the other rounds, too few "
                    "of the samples are slow to be a mode: the interval is not widened)"
                )
                return (
                    f"{config}: round {n}'s {name} timings fall in two modes, "
                    f"{found.fast:.4g} us and {found.slow:.4g} us ({found.slow_share:.0%} of "
                    "them the slow one): the GPU ran at two clock speeds (clocks not "
                    f"locked, boost on and off), {effect}; {_LOCK} and replace round {n} "
                    f"({REPLACE_ROUND.say(id=exp_id, n=n)})"
                )
    if not pooled_too:
        return None
    for config, both in together.items():
        for index, (name, pool) in enumerate(zip(names, both, strict=True)):
            found = two_modes(sorted(pool))
            if found is None:
                continue
            split = math.sqrt(found.fast * found.slow)
            slow = [
                n
                for n, measured in enumerate(rounds, 1)
                if statistics.median(measured.timings[config][index]) > split
            ]
            fast = [n for n in range(1, len(rounds) + 1) if n not in slow]
            fewer = len(slow) < len(fast) or (len(slow) == len(fast) and number in slow)
            odd = slow if fewer else fast
            return (
                f"{config}: the {name} timings of the {len(rounds)} rounds pooled fall in two "
                f"modes, {found.fast:.4g} us and {found.slow:.4g} us: {_rounds(slow)} ran in "
                f"the slow one, {_rounds(fast)} in the fast one (the GPU ran at another clock "
                f"speed in each: clocks not locked), {_WIDENED}; {_LOCK} and replace "
                f"{_rounds(odd)} ({REPLACE_ROUND.say(id=exp_id, n=odd[0])})"
            )
    return None


def _rounds(numbers: Sequence[int]) -> str:
    """``round 2``, ``rounds 1 and 3``, ``rounds 1, 2 and 4``."""
    if len(numbers) == 1:
        return f"round {numbers[0]}"
    return f"rounds {', '.join(map(str, numbers[:-1]))} and {numbers[-1]}"


def _two_figures(value: float) -> str:
    """``value`` to two significant figures, as a plain number (1000, 3.5)."""
    return f"{float(f'{value:.2g}'):g}"


def samples_too_large(error: ValidationError, samples: str, *, pooled: bool = False) -> None:
    """Raise a :class:`MeasurementError` saying what to do when ``error`` refused an
    experiment as too large (``file-too-large``) and its ``## Samples`` section
    (``samples``) takes most of it; otherwise return. ``pooled``: the samples are
    the rounds of a remeasure."""
    too_large = [p for p in error.problems if p.code == "file-too-large"]
    if not too_large or not samples:
        return
    size = len(samples.encode("utf-8"))
    if pooled:
        advice = (
            "its rounds cannot be pooled in one file; record the new round as an experiment "
            "of its own without raw samples (keep_samples=False, the no-samples option)"
        )
    else:
        advice = (
            "record it without them (keep_samples=False, the no-samples option: the "
            "medians, counts and the interval are kept; kexp remeasure cannot pool with "
            "them), or time fewer "
            "rounds (pytest-benchmark: --benchmark-max-time=0.1)"
        )
    raise MeasurementError(
        f"the raw samples take {size:,} bytes: {too_large[0].message}; {advice}; "
        "nothing was written"
    ) from None


#: The forms of timings (:attr:`kexp.measure.timings.Timings.form`) read in the unit
#: given, the file not stating one: plain JSON, a CSV, dicts given in Python.
UNSTATED_UNIT_FORMS = frozenset({plain_json.NAME, csv_times.NAME, IN_PYTHON})
#: The units from the smallest up, as the unit option takes them.
UNITS = ("ns", "us", "ms", "s")


def unit_hint(times: Sequence[float], unit: str, near_zero: float) -> str | None:
    """What to say when some of ``times`` (medians in microseconds, read from a file
    in ``unit``, a unit the file does not state) are below ``near_zero`` microseconds,
    too short for a kernel: that they may be in the next larger unit, and how to say
    so."""
    if not times or min(times) >= near_zero or unit not in UNITS[:-1]:
        return None
    larger = UNITS[UNITS.index(unit) + 1]
    return (
        f"times as short as {min(times):.4g} us as read in {unit}, the unit the files do "
        f"not state: if they are {larger}"
        + (" (triton's do_bench returns milliseconds)" if larger == "ms" else "")
        + f", the results hold times 1000x too short: {RECORD_IN_UNIT.say(unit=larger)}"
    )


def protocol_overrides(stated: Mapping[str, Any], given: Mapping[str, Any]) -> str | None:
    """What to say when the ``protocol`` given replaces values the timing files
    ``stated`` (their timer, device...): each one, as the files said it."""
    replaced = [
        f"{key} {stated[key]!r} (given {value!r})"
        for key, value in given.items()
        if key in stated and stated[key] != value
    ]
    if not replaced:
        return None
    return (
        f"the protocol given replaces what the timing files state: {', '.join(replaced)}; "
        "the files' values are what timed the kernel, unless the files are wrong"
    )


def check_assumed_unit(
    times: Sequence[float],
    near_zero: float,
    ambiguous_below: float = DEFAULT_SETTINGS.unit_ambiguous_below_us,
) -> None:
    """Refuse (:class:`MeasurementError`) ``times`` (medians in microseconds, the unit
    assumed: neither the files nor the caller stated one) of which one is below
    ``near_zero`` microseconds (``Settings.suspect_time_below_us``, 0.5: below any GPU
    kernel's launch, so no kernel's time per call), or below ``ambiguous_below``
    (``Settings.unit_ambiguous_below_us``, 2: what few kernels take, and what
    milliseconds read as microseconds give, a 1.2 ms GEMM timed by do_bench read as
    1.2 us): milliseconds (triton's do_bench's) read as microseconds, most likely.
    Nothing is recorded; the message says how to give the unit."""
    if not times or min(times) >= max(near_zero, ambiguous_below):
        return
    if min(times) < near_zero:
        why = f"are below any GPU kernel launch ({near_zero:g} us)"
    else:
        why = (
            f"are what few kernels take (under {ambiguous_below:g} us), and what "
            f"{min(times):.4g} ms read as microseconds gives, so the unit must be given"
        )
    raise MeasurementError(
        f"nothing was written: times as short as {min(times):.4g} us, read in us (assumed: "
        f"no unit was given and the timings do not state one), {why}; in ms (triton's "
        f"do_bench returns milliseconds), {RECORD_WITH_UNIT.say(unit='ms')}; truly in us, "
        f"{RECORD_WITH_UNIT.say(unit='us')}"
    )


def resolution_hint(samples: Mapping[str, Sides]) -> str | None:
    """What to say when a configuration's repeated timings (``samples``: baseline and
    candidate samples per configuration) are one value a side, 3 or more each: the
    timer's resolution hides the kernel's noise, and the score's interval has no
    width for it."""
    flat = [
        config
        for config, sides in samples.items()
        if all(len(side) >= 3 and len(set(side)) == 1 for side in sides)
    ]
    if not flat:
        return None
    config = flat[0]
    base, cand = (side[0] for side in samples[config])
    more = f" (and {len(flat) - 1} more configuration(s))" if len(flat) > 1 else ""
    return (
        f"{config}: every baseline timing is {base:g} us and every candidate timing "
        f"{cand:g} us{more}: the timer's resolution is coarser than the kernel's noise, "
        "so the interval's width says nothing of it; time several launches per sample "
        "(a longer do_bench rep, CUDA events around a loop) or a larger problem"
    )


def few_samples_hint(samples: Mapping[str, Sides]) -> str | None:
    """What to say when a configuration has fewer than :data:`MIN_SAMPLES` timings on a
    side (``samples``: baseline and candidate samples per configuration): the score gets
    no interval, its outcome rests on the thresholds alone (as a summary's, which its
    reader warns of), and how to give every timing."""
    few = {
        config: min(len(side) for side in sides)
        for config, sides in samples.items()
        if min(len(side) for side in sides) < MIN_SAMPLES
    }
    if not few:
        return None
    config, count = next(iter(few.items()))
    more = f" (and {len(few) - 1} more configuration(s))" if len(few) > 1 else ""
    return (
        f"{config}: {count} timing(s) on a side{more}, too few for an interval ({MIN_SAMPLES} "
        "a side are needed): the score was recorded without one, its outcome judged by "
        "the thresholds alone, noise unseen; time each side repeatedly and give every "
        'timing: triton\'s do_bench(fn, return_mode="all") returns them (its default '
        "is one number), pytest-benchmark --benchmark-json keeps them, a CSV takes a row "
        "per timing"
    )


def done_without_measure(exp_id: str, status: str, is_buggy: bool, score: float) -> str | None:
    """The warning for a run recorded ``done`` with score 0 and not buggy: it measured
    nothing, yet reads as a regression (a speedup of 0); None for any other."""
    if status != "done" or is_buggy or not measured_nothing(score):
        return None
    return (
        f"experiment {exp_id} is done with score 0, which reads as a regression (a speedup "
        "of 0): a run that measured nothing has status failed or timeout (and is_buggy "
        f"when it crashed or gave wrong results); correct it with {SET_FAILED.say(id=exp_id)}"
    )


def summary_contradiction(
    exp_id: str,
    summary: str,
    score: float,
    cumulative: float | None,
    settings: Settings,
    interval: Sequence[float] = (),
) -> str | None:
    """The warning for a ``change_summary`` whose result states a speedup (``+12.5%``)
    on the other side of the thresholds than the ``score`` measured (0.8956, a
    regression), or the reverse, or one the score is not beyond rounding (``-13%``
    beside 0.6582, ``+13%`` beside 1.0315: :func:`states`); None when they agree, or
    the summary states none, or it states the ``cumulative`` score (over the
    operator's reference), or one within the score's 95 % ``interval`` (as honest as
    the score: +8.0% beside 1.0814 [1.0727, 1.0902])."""
    from kexp.measure.corrections import stated_speedup  # lazy: a record's, after it

    stated = stated_speedup(summary)
    if stated is None or not score > 0:
        return None
    written, ratio = stated
    if len(interval) == 2 and interval[0] <= ratio <= interval[1]:
        return None  # what was measured, as closely as it was
    above, below = settings.improvement_above, settings.regression_below
    fix = f"correct the summary ({CORRECT_FIELD.say(id=exp_id, field='change_summary')})"
    if ratio > above and score < below:
        word = "a regression"
    elif ratio < below and score > above:
        word = "an improvement"
    else:
        if states(written, ratio, score):
            return None
        if cumulative is not None and states(written, ratio, cumulative):
            return None  # it states the speedup over the reference
        return (
            f"experiment {exp_id}: its change_summary states {written} ({ratio:.4f}x) but "
            f"its score is {score:.4f} ({(score - 1) * 100:+.2f}%): every listing shows them "
            f"side by side; {fix}, or the score if it is the one mistyped"
        )
    if cumulative is not None and (cumulative > above) == (ratio > above):
        return None  # it may state the speedup over the reference
    return (
        f"experiment {exp_id}: its change_summary states {written} ({ratio:.4f}x) but its "
        f"score is {score:.4f}, {word}: every listing shows them side by side; {fix}, or "
        "the timings if they were swapped"
    )


def states(written: str, ratio: float, value: float) -> bool:
    """Whether a summary's figure (``written``: ``+13%``, ``1.25x``, ``12% slower``;
    ``ratio`` what it states) states ``value`` at its decimals, rounded or cut short:
    less than one unit of its last place apart (``+3%`` states 1.0315, ``+13%`` does
    not)."""
    number = re.search(r"\d+(?:\.(\d+))?", written)
    decimals = len(number[1] or "") if number else 0
    unit = 10.0**-decimals
    if "%" in written:
        return abs((ratio - value) * 100) < unit
    return abs(ratio - value) < unit


def base_commit_problem(base_commit: str, code_repo: Path) -> tuple[str, str] | None:
    """What ``kexp validate`` says of a ``base_commit`` the code repository does not
    resolve to a commit: (severity, its message and hint) — a warning when the commit
    is not there (fetch it, or set ``KEXP_CODE_REPO``), an error when the value names
    something else (a tree, an ambiguous abbreviation); None when it resolves, or there
    is no code repository."""
    from kexp.gitops.provenance import unresolved_base_commits

    found = unresolved_base_commits([base_commit], code_repo).get(base_commit)
    if found is None:
        return None
    severity, _, message, hint = found
    return severity, f"{message}: {hint}"


def replaced_round_held(
    exp_id: str, path: Path | None, rounds: int, number: int, reason: str | None
) -> str:
    """The commit holding experiment ``exp_id``'s file (``path``) as it is, whose round
    ``number`` (of ``rounds``) a new one replaces for ``reason``; refused
    (:class:`MeasurementError`, saying what to do) without a reason, a round ``number``,
    or that commit (the round replaced would leave no trace)."""
    from kexp.core.problems import display_path  # lazy: a replacement's, seldom needed
    from kexp.gitops.log import committed_as_is

    if not 1 <= number <= rounds:
        raise MeasurementError(
            f"{exp_id} has {rounds} round(s) of measurement, no round {number}: replace one "
            f"of them ({REPLACE_ROUND.say(id=exp_id, n=rounds)} replaces the last)"
        )
    if not (reason or "").strip():
        raise MeasurementError(
            f"replacing round {number} of {exp_id} needs the reason its timings were wrong "
            f"(files swapped, taken under load): {REPLACE_ROUND.say(id=exp_id, n=number)}"
        )
    held = committed_as_is(path) if path is not None else None
    if held is None:
        shown = display_path(path or "")
        raise MeasurementError(
            f"{exp_id} was not remeasured: its file has changes not committed (or is not in "
            f"git), and the round replaced would leave no trace; commit it first (git add "
            f"{shown} && git commit), then {REPLACE_ROUND.say(id=exp_id, n=number)}"
        )
    return held


#: The timing tools that time one side a run: a baseline file and a candidate file are
#: two runs, never interleaved, so the drift between runs is in the step's score and not
#: in its interval (``pytest --benchmark-json`` runs once per side).
ONE_SIDE_A_RUN = frozenset({"pytest-benchmark"})
#: How far from 1 the drift between two runs of one side commonly reaches on a machine
#: whose clocks are not locked (trials measured 1 to 4 %): a step whose interval stays
#: beyond it is told nothing of the drift, which could not turn its verdict.
COMMON_DRIFT = 0.05


def one_run_control_note(control: Any, tool: str, settings: Settings) -> str:
    """What an A/A control timed by ``tool``, one of :data:`ONE_SIDE_A_RUN`, whose
    interval leaves out 1 is told: not a biased setup (the tool cannot time the sides
    alike, in one run) but the drift between its two runs, which it is there to
    measure, and the reach it gives its env's steps."""
    shown = f"{float(control.score):.4f}"
    interval = control.score_ci
    if interval and len(interval) == 2:
        shown += f" [{interval[0]:.4f}, {interval[1]:.4f}]"
    own = math.expm1(measured_drift(control)) * 100
    reach = math.expm1(drift_of(control, settings)) * 100
    return (
        f"A/A {shown}: its two {tool} runs drifted {own:.1f} % apart (it times one side "
        "a run: the drift between runs this control measures, not a biased setup); the "
        f"steps of this env and timer within {reach:.1f} % of 1 "
        f"({settings.control_drift_reach:g} x it) are marginal, within noise"
    )


def drift_notes(exp: Any, drift: str, has_control: bool, tool: str) -> str | None:
    """What a step recorded is told of the drift between runs: ``drift``
    (:attr:`kexp.core.cumulative.Derived.drift`) when the control of its env found its
    change within it; else, for a step whose interval leaves out 1 timed by ``tool``,
    one of :data:`ONE_SIDE_A_RUN`, with no control on its env (``has_control``), that the
    interval covers one run of each side only, and how to measure the drift; else None."""
    shown = f"{float(exp.score):.4f}"
    interval = exp.score_ci
    if interval and len(interval) == 2:
        shown += f" [{interval[0]:.4f}, {interval[1]:.4f}]"
    if drift:
        clears = " leaves out 1 but" if interval and len(interval) == 2 else ""  # typed: none
        return (
            f"{exp.id}: {shown}{clears} is {drift}: marginal, within noise; "
            f"{REMEASURE.say(id=exp.id)} pools another round"
        )
    if has_control or tool not in ONE_SIDE_A_RUN or not interval or len(interval) != 2:
        return None
    if interval[0] <= 1 <= interval[1]:
        return None
    nearest = interval[0] if interval[0] > 1 else interval[1]  # the end nearest 1
    if abs(math.log(nearest)) > math.log1p(COMMON_DRIFT):
        return None  # beyond any common drift: no run-to-run drift turns it
    return (
        f"{exp.id}: its interval {shown} covers the noise within one {tool} run of each "
        "side, not the drift between runs (it times one side a run, never interleaved), "
        f"and no A/A control on this env measures that drift: {RECORD_CONTROL} (the same "
        f"code both sides) judges every step of the env, or {REMEASURE.say(id=exp.id)} "
        "with runs of its own"
    )
