"""Raw samples: the ``## Samples`` section, its rounds, and what they give.

An experiment measured with repeated timings keeps, per configuration, the summary a
reviewer needs in its front-matter (``results``: medians, sample counts, interquartile
ranges, the speedup; ``score`` and ``score_ci``) and, at the end of its file, the raw
timings in a ``## Samples`` section: one JSON line per round of measurement and
configuration, in microseconds::

    ## Samples

    Raw timings in microseconds, one line per round and configuration ...

    ```jsonl
    {"round": 1, "config": "b8", "unit": "us", "baseline": [12.3, 12.4], "candidate": [12.1, 12.0]}
    ```

``kexp remeasure`` adds a round; the results are those of every round's samples
pooled (:func:`pooled`). Validation recomputes them from the section and warns when
the front-matter disagrees (:func:`sample_findings`) with what the samples give by the
method of :mod:`kexp.core.noise` and by the one before it (:data:`~kexp.core.noise.METHOD`
1), which files recorded earlier hold.
"""

from __future__ import annotations

import dataclasses
import json
import math
from collections.abc import Mapping, Sequence
from typing import Any, Literal, TypeGuard

from kexp.core.advice import EMPTY_SCORE_CI, REMEASURE, RESTORE_SCORE
from kexp.core.noise import (
    MODES_RULE,
    ConfigEstimate,
    Dispute,
    SideStats,
    dispute,
    estimate,
    rounded_interval,
)
from kexp.core.settings import DEFAULT_SETTINGS
from kexp.format.rules import score_results_mismatch
from kexp.format.suspect import UNIT_TO_US

#: The first line of a ``## Samples`` section kexp writes.
SAMPLES_INTRO = (
    "Raw timings in microseconds, one line per round and configuration: kexp computes "
    "`results`, `score` and `score_ci` from them; `kexp remeasure` adds a round."
)
#: Significant digits a sample is kept with (far below any timer's resolution).
SAMPLE_DIGITS = 6
#: The validation codes of this module's findings.
BAD_SAMPLES = "bad-samples"
SAMPLES_MISMATCH = "samples-mismatch"
BAD_INTERVAL = "score-ci-outside"
#: (absolute, relative) disagreement between a recorded statistic and the one
#: recomputed from the samples above which validation warns: a little more than the
#: rounding of each (4 decimals for speedups and intervals, 4 significant digits for
#: interquartile ranges, 12 for medians; counts are exact).
_TOLERANCES = {
    "baseline": (0.0, 1e-9),
    "candidate": (0.0, 1e-9),
    "speedup": (1.5e-4, 0.0),
    "baseline_n": (0.0, 0.0),
    "candidate_n": (0.0, 0.0),
    "baseline_iqr": (1e-12, 1e-3),
    "candidate_iqr": (1e-12, 1e-3),
    "score_ci": (1.5e-4, 0.0),
}


class SamplesError(ValueError):
    """A ``## Samples`` section that cannot be read; ``line`` is 1-based in the text."""

    def __init__(self, line: int, message: str) -> None:
        self.line = line
        super().__init__(message)


def kept_sample(value: float) -> float:
    """A sample as it is kept: :data:`SAMPLE_DIGITS` significant digits."""
    return float(f"{value:.{SAMPLE_DIGITS}g}")


@dataclasses.dataclass(frozen=True)
class Round:
    """One round of measurement: (baseline, candidate) samples per configuration, in
    microseconds, in the order measured."""

    timings: dict[str, tuple[tuple[float, ...], tuple[float, ...]]]


def render_samples(rounds: Sequence[Round]) -> str:
    """The text of the ``## Samples`` section for ``rounds`` (numbered from 1)."""
    lines = [SAMPLES_INTRO, "", "```jsonl"]
    for number, measured in enumerate(rounds, 1):
        for config, (base, cand) in measured.timings.items():
            record = {
                "round": number,
                "config": config,
                "unit": "us",
                "baseline": list(base),
                "candidate": list(cand),
            }
            lines.append(json.dumps(record, ensure_ascii=False))
    lines.append("```")
    return "\n".join(lines)


def parse_samples(text: str) -> list[Round]:
    """The rounds of a ``## Samples`` section's text (lines not starting with ``{`` are
    prose and fences). Raises :class:`SamplesError` naming the line."""
    rounds: list[dict[str, tuple[tuple[float, ...], tuple[float, ...]]]] = []
    starts: list[int] = []  # the line each round starts on
    for number, line in enumerate(text.split("\n"), 1):
        stripped = line.strip()
        if not stripped.startswith("{"):
            continue
        try:
            record = json.loads(stripped)
        except json.JSONDecodeError as exc:
            raise SamplesError(number, f"not a JSON object: {exc.msg}") from None
        if not isinstance(record, dict):  # pragma: no cover - a '{' line is an object
            raise SamplesError(number, "not a JSON object")
        index = record.get("round")
        if isinstance(index, bool) or not isinstance(index, int) or index < 1:
            raise SamplesError(number, "'round' must be a round number 1, 2, ...")
        if index not in (len(rounds), len(rounds) + 1) or index == 0:
            raise SamplesError(
                number,
                f"round {index} is out of order: rounds are numbered 1, 2, ... and each "
                "round's lines follow the last round's",
            )
        if index == len(rounds) + 1:
            rounds.append({})
            starts.append(number)
        config = record.get("config")
        if not isinstance(config, str) or not config or "\n" in config:
            raise SamplesError(number, "'config' must be the configuration's name")
        if config in rounds[-1]:
            raise SamplesError(number, f"configuration {config!r} appears twice in round {index}")
        unit = record.get("unit", "us")
        scale = UNIT_TO_US.get(unit) if isinstance(unit, str) else None
        if scale is None:
            raise SamplesError(number, f"unknown unit {unit!r}; use one of {', '.join(UNIT_TO_US)}")
        sides = []
        for side in ("baseline", "candidate"):
            values = record.get(side)
            if not isinstance(values, list) or not values:
                raise SamplesError(number, f"{config}: '{side}' must be a list of timings")
            # One pass for the common case (JSON numbers kexp wrote), then the culprit.
            if not (
                all(type(v) is float or type(v) is int for v in values)
                and min(values) > 0
                and max(values) < math.inf
            ):
                bad = next(
                    v
                    for v in values
                    if isinstance(v, bool)
                    or not isinstance(v, (int, float))
                    or not (math.isfinite(v) and v > 0)
                )
                raise SamplesError(
                    number, f"{config}: {side} timing {bad!r} is not a positive number"
                )
            if scale == 1.0:
                sides.append(tuple(map(float, values)))
            else:
                sides.append(tuple(kept_sample(v * scale) for v in values))
        unknown = sorted(set(record) - {"round", "config", "unit", "baseline", "candidate"})
        if unknown:
            raise SamplesError(number, f"unknown key(s) {', '.join(map(repr, unknown))}")
        rounds[-1][config] = (sides[0], sides[1])
    if not rounds:
        raise SamplesError(1, "no samples: one JSON line per round and configuration")
    for index, measured in enumerate(rounds[1:], 2):
        if set(measured) != set(rounds[0]):
            raise SamplesError(
                starts[index - 1],
                f"round {index} measured other configurations than round 1 (pooling "
                "needs the same configurations in every round)",
            )
    return [Round(timings) for timings in rounds]


def pooled(rounds: Sequence[Round]) -> dict[str, tuple[list[float], list[float]]]:
    """Every round's samples together, per configuration (the first round's order)."""
    together: dict[str, tuple[list[float], list[float]]] = {}
    for measured in rounds:
        for config, (base, cand) in measured.timings.items():
            pool = together.setdefault(config, ([], []))
            pool[0].extend(base)
            pool[1].extend(cand)
    return together


#: How many samples each side of each configuration needs for two rounds alike, in the
#: same order, to be one measurement given twice, not two coarse measurements (a
#: whole-microsecond timer) that came out alike.
COPY_SAMPLES = 5


def copied_round(rounds: Sequence[Round], new: Round) -> str | None:
    """Why ``new`` cannot be pooled with ``rounds`` (the earlier rounds) when it repeats
    one of them sample for sample, in the same order, each side holding at least
    :data:`COPY_SAMPLES` samples (pooling a copy narrows the interval without measuring
    anything), or None: the rule a record made again is refused by
    (:func:`kexp.storage.repeats.refuse_copy`). (A round in another unit:
    :func:`kexp.measure.checks.check_round_scale`.)"""
    sides = [side for pair in new.timings.values() for side in pair]
    if any(len(side) < COPY_SAMPLES for side in sides):
        return None
    for number, earlier in enumerate(rounds, 1):
        if earlier.timings == new.timings:
            return (
                f"the new round's timings are round {number}'s, sample for sample: pooling "
                "a copy narrows the interval without measuring anything; measure again "
                "and give the new timings"
            )
    return None


@dataclasses.dataclass(frozen=True)
class Summary:
    """What samples give: the ``results`` entries, ``score`` and ``score_ci``."""

    results: list[dict[str, Any]]
    score: float
    #: Empty when some side has fewer than :data:`kexp.core.noise.MIN_SAMPLES` samples.
    score_ci: list[float]
    #: Each configuration's statistics, in the order of ``results``.
    configs: tuple[ConfigEstimate, ...] = ()
    #: Rounds whose intervals do not overlap (``score_ci`` widened to hold them all).
    dispute: Dispute | None = None


def summarize(
    samples: Mapping[str, tuple[Sequence[float], Sequence[float]]],
    *,
    legacy: bool = False,
    modes: bool = True,
    rule: int = MODES_RULE,
    rounds: Sequence[Round] = (),
    two_sided: bool = False,
) -> Summary:
    """``results`` (median, count and interquartile range per side, the median
    speedup), the ``score`` (their geometric mean, 4 decimals) and its ``score_ci``
    (``legacy``: as :data:`kexp.core.noise.METHOD` 1 computed them; ``modes=False``:
    as before two modes widened a side's interval, :func:`kexp.core.noise.two_modes`;
    ``rule``: that function's; ``two_sided``: load spikes looked for at both ends of
    a side's samples, the fast end too, as before they were looked for among the slow
    samples alone, :func:`kexp.core.noise.side_stats`).
    ``rounds``: the rounds ``samples`` pool; when two disagree
    (:func:`kexp.core.noise.dispute`), ``score_ci`` holds every round's interval."""
    found = estimate(
        list(samples.values()), legacy=legacy, modes=modes, rule=rule, two_sided=two_sided
    )
    results = []
    for config, stats in zip(samples, found.configs, strict=True):
        results.append(
            {
                "config": config,
                "baseline": _tidy(stats.baseline.median),
                "candidate": _tidy(stats.candidate.median),
                "speedup": round(stats.speedup, 4),
                "unit": "us",
                "baseline_n": stats.baseline.n,
                "candidate_n": stats.candidate.n,
                "baseline_iqr": _spread(stats.baseline.iqr),
                "candidate_iqr": _spread(stats.candidate.iqr),
            }
        )
    disputed = None
    if len(rounds) > 1 and not legacy:
        alone = [
            estimate(list(r.timings.values()), modes=modes, rule=rule, two_sided=two_sided)
            for r in rounds
        ]
        disputed = dispute(alone, found.interval)
    ends = disputed.interval if disputed is not None else found.interval
    interval = list(rounded_interval(*ends)) if ends else []
    return Summary(results, round(found.score, 4), interval, found.configs, disputed)


def set_aside(side: SideStats, samples: Sequence[float]) -> int:
    """How many of ``samples`` (a round's, of a side whose pooled statistics are
    ``side``) lie outside the samples kept: set aside as load spikes."""
    low, high = side.kept
    return sum(1 for v in samples if v < low or v > high) if side.outliers else 0


def spike_words(config: str, stats: ConfigEstimate, rounds: Sequence[Round]) -> str:
    """What a raw result's line of ``config`` says of the samples set aside as load
    spikes (baseline / candidate, and per round when ``rounds`` are several) and of
    two modes a side fell in (:func:`kexp.core.noise.two_modes`); empty when neither."""
    parts = []
    sides = (stats.baseline, stats.candidate)
    if stats.baseline.outliers or stats.candidate.outliers:
        text = f"{stats.baseline.outliers} / {stats.candidate.outliers} set aside as load spikes"
        if len(rounds) > 1:
            per_round = []
            for number, measured in enumerate(rounds, 1):
                counts = [
                    set_aside(s, t) for s, t in zip(sides, measured.timings[config], strict=True)
                ]
                if any(counts):
                    per_round.append(f"round {number}: {counts[0]} / {counts[1]}")
            text += f" ({', '.join(per_round)})"
        parts.append(text)
    for name, side in zip(("baseline", "candidate"), sides, strict=True):
        if side.modes is not None:
            fast, slow, share = side.modes.fast, side.modes.slow, side.modes.slow_share
            parts.append(
                f"{name} in two modes, {fast:.4g} and {slow:.4g} µs ({share:.0%} slow): "
                "clocks not locked"
            )
    return "; ".join(parts)


def round_figures(found: Dispute) -> str:
    """Each round's score and interval: ``round 1: 1.5700 [1.5600, 1.5800], round 2:
    1.0010 [0.9950, 1.0070]``."""
    return ", ".join(
        f"round {number}: "
        + describe_interval(score, rounded_interval(*interval) if interval else ())
        for number, (score, interval) in enumerate(found.figures, 1)
    )


def dispute_words(found: Dispute) -> str:
    """What a raw result says of rounds that disagree (:func:`kexp.core.noise.dispute`)."""
    pairs = "; ".join(f"rounds {a + 1} and {b + 1}" for a, b in found.pairs)
    return (
        f"**Rounds disagree** ({pairs}: their intervals do not overlap): "
        f"{round_figures(found)}; the interval holds them all"
    )


def _tidy(value: float) -> float:
    return float(f"{value:.12g}")


def _spread(value: float) -> float:
    return float(f"{value:.4g}")


def sample_count(result: Mapping[str, Any]) -> tuple[int, int] | None:
    """(baseline, candidate) sample counts of a ``results`` entry, None for single
    numbers."""
    counts = result.get("baseline_n"), result.get("candidate_n")
    if all(isinstance(c, int) and not isinstance(c, bool) for c in counts):
        return (int(counts[0]), int(counts[1]))  # type: ignore[arg-type]
    return None


# --- validation -----------------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class Finding:
    """A problem with ``score_ci`` or the samples: where (a front-matter path, or a line
    of the ``## Samples`` section when ``section_line`` is set), and what."""

    severity: Literal["error", "warning"]
    code: str
    field: str
    path: tuple[str | int, ...]
    message: str
    hint: str
    section_line: int | None = None


def sample_findings(fields: Mapping[str, Any], samples_text: str) -> list[Finding]:
    """Problems of ``score_ci`` (it must hold ``score``) and of the ``## Samples``
    section (readable; ``results``, ``score`` and ``score_ci`` as the samples give
    them) of a file with front-matter ``fields``."""
    found: list[Finding] = []
    score = fields.get("score")
    interval = fields.get("score_ci")
    if _is_pair(interval) and _is_number(score):
        low, high = interval
        if not low <= score <= high:
            exp_id = fields.get("id")
            exp_id = exp_id if isinstance(exp_id, str) and exp_id else "ID"
            hint = (
                f"empty it ({EMPTY_SCORE_CI.say(id=exp_id)}), then measure again for an "
                f"interval around the score ({REMEASURE.say(id=exp_id)}); or write "
                "[low, high] around the score by hand"
            )
            measured = score_results_mismatch(
                score, fields.get("results"), DEFAULT_SETTINGS.score_tolerance
            )
            if measured is not None and low <= measured <= high:
                # the score, not the interval, left the measurement it comes from
                hint = (
                    f"its results give {measured:.4f}, inside score_ci: a score edited by "
                    f"hand? put it back ({RESTORE_SCORE.say(id=exp_id, score=f'{measured:.4f}')}"
                    f"), or measure again ({REMEASURE.say(id=exp_id)}); emptying score_ci "
                    "would leave a score its own measurement contradicts"
                )
            found.append(
                Finding(
                    "error",
                    BAD_INTERVAL,
                    "score_ci",
                    ("score_ci",),
                    f"score_ci [{low:g}, {high:g}] does not hold the score {score:g}",
                    hint,
                )
            )
    if not samples_text.strip():
        return found
    try:
        rounds = parse_samples(samples_text)
    except SamplesError as exc:
        return [
            *found,
            Finding(
                "error",
                BAD_SAMPLES,
                "samples",
                (),
                f"the Samples section cannot be read: line {exc.line}: {exc}",
                'one JSON line per round and configuration: {"round": 1, "config": '
                'NAME, "baseline": [US, ...], "candidate": [US, ...]}',
                exc.line,
            ),
        ]
    together = pooled(rounds)
    disagreements = _disagreements(fields, summarize(together, rounds=rounds))
    # every method before, newest first, looked for load spikes at both ends
    earlier: tuple[dict[str, Any], ...] = (
        {"rounds": rounds},  # before spikes were looked for among the slow samples alone
        {},  # before rounds that disagree widened the interval
        {"rounds": rounds, "rule": 1},  # when few samples asked no wider gap of two modes
        {"modes": False},  # before two modes widened the interval
    )
    for how in earlier:
        if disagreements and not _disagreements(fields, summarize(together, two_sided=True, **how)):
            disagreements = []
    if disagreements and not _disagreements(fields, summarize(together, legacy=True)):
        disagreements = []  # recorded before outliers were set aside from the median
    found.extend(disagreements)
    return found


def _disagreements(fields: Mapping[str, Any], summary: Summary) -> list[Finding]:
    hint = (
        "results, score and score_ci are computed from the samples: correct them to "
        "what the samples give (or the samples, if they are wrong)"
    )
    results = fields.get("results")
    if not isinstance(results, list) or [
        r.get("config") if isinstance(r, dict) else None for r in results
    ] != [r["config"] for r in summary.results]:
        configs = ", ".join(r["config"] for r in summary.results)
        return [
            Finding(
                "warning",
                SAMPLES_MISMATCH,
                "results",
                ("results",),
                f"results do not list the configurations of the samples ({configs})",
                hint,
            )
        ]
    found = []
    for index, (recorded, computed) in enumerate(zip(results, summary.results, strict=True)):
        for key, value in computed.items():
            if key in ("config", "unit"):
                continue
            if not _close(recorded.get(key), value, _TOLERANCES[key]):
                found.append(
                    Finding(
                        "warning",
                        SAMPLES_MISMATCH,
                        "results",
                        ("results", index, key) if key in recorded else ("results", index),
                        f"{computed['config']}: {key} {_show(recorded.get(key))} differs from "
                        f"the samples' {value:g}",
                        hint,
                    )
                )
    interval = fields.get("score_ci")
    ends = zip(interval, summary.score_ci, strict=True) if _is_pair(interval) else None
    score = fields.get("score")
    if _is_number(score) and not _close(score, summary.score, _TOLERANCES["speedup"]):
        # A corrected score (kexp update, which drops the old interval): the samples are
        # the earlier measurement's, and their interval is not the score's. That the
        # score and the measurement's results disagree is said on its own.
        return found
    if summary.score_ci and not (
        ends is not None and all(_close(a, b, _TOLERANCES["score_ci"]) for a, b in ends)
    ):
        low, high = summary.score_ci
        found.append(
            Finding(
                "warning",
                SAMPLES_MISMATCH,
                "score_ci",
                ("score_ci",) if "score_ci" in fields else ("score",),
                f"score_ci {_show(interval)} differs from the samples' [{low:g}, {high:g}]",
                hint,
            )
        )
    return found


def _is_number(value: Any) -> TypeGuard[float]:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _is_pair(value: Any) -> TypeGuard[list[float]]:
    return isinstance(value, list) and len(value) == 2 and all(map(_is_number, value))


def _close(recorded: Any, computed: float, tolerance: tuple[float, float]) -> bool:
    if not _is_number(recorded):
        return False
    absolute, relative = tolerance
    return bool(abs(recorded - computed) <= absolute + relative * abs(computed))


def _show(value: Any) -> str:
    if value is None:
        return "(absent)"
    return json.dumps(value)


# --- describing -------------------------------------------------------------------------


def describe_interval(score: float, interval: Sequence[float], digits: int = 4) -> str:
    """``1.0320 [1.0110, 1.0540]`` (the score alone without an interval)."""
    if len(interval) == 2:
        low, high = interval
        return f"{score:.{digits}f} [{low:.{digits}f}, {high:.{digits}f}]"
    return f"{score:.{digits}f}"


def describe_score(score: float | None, interval: Sequence[float] = (), digits: int = 4) -> str:
    """A score as a view prints it, given its record's shown score
    (:attr:`kexp.core.cumulative.Derived.shown_score`): :func:`describe_interval`, or
    ``-`` for None, a score that records no measurement (a run that crashed, timed out
    or was not run), never a speedup an agent could take for a result."""
    if score is None:
        return "-"
    return describe_interval(score, interval, digits)


def describe_protocol(protocol: Mapping[str, Any]) -> str:
    """How timings were measured, in words: ``cuda_events, warm-up 10, 100 repetitions
    a sample, L2 flushed, clocks locked`` ("" when unknown)."""
    parts = []
    if "timer" in protocol:
        parts.append(str(protocol["timer"]))
    if "synchronized" in protocol:
        parts.append("synchronized" if protocol["synchronized"] else "not synchronized")
    if "warmup" in protocol:
        parts.append(f"warm-up {protocol['warmup']}")
    if "repetitions" in protocol:
        parts.append(f"{protocol['repetitions']} repetition(s) a sample")
    if "l2_flushed" in protocol:
        parts.append("L2 flushed" if protocol["l2_flushed"] else "L2 not flushed")
    if "clocks_locked" in protocol:
        parts.append("clocks locked" if protocol["clocks_locked"] else "clocks not locked")
    if "device" in protocol:
        parts.append(f"on the {str(protocol['device']).upper()}")
    parts.extend(f"{k}={v}" for k, v in protocol.items() if k not in _PROTOCOL_WORDS)
    return ", ".join(parts)


_PROTOCOL_WORDS = frozenset(
    {"timer", "synchronized", "warmup", "repetitions", "l2_flushed", "clocks_locked", "device"}
)


def describe_result(result: Mapping[str, Any]) -> str | None:
    """A ``results`` entry measured with samples, in words: ``b8: 1.0092x  12.35 ->
    12.23 us (n 60/60, IQR 0.31/0.42)``; None for single numbers."""
    counts = sample_count(result)
    if counts is None:
        return None
    unit = result.get("unit", "us")
    text = f"{result.get('config')}: {result.get('speedup')}x  "
    text += f"{result.get('baseline')} -> {result.get('candidate')} {unit}"
    text += f" (n {counts[0]}/{counts[1]}"
    spreads = result.get("baseline_iqr"), result.get("candidate_iqr")
    if all(_is_number(s) for s in spreads):
        text += f", IQR {spreads[0]:g}/{spreads[1]:g}"
    return text + ")"


def describe_samples(text: str) -> str:
    """The ``## Samples`` section in one line: rounds and samples per configuration."""
    try:
        rounds = parse_samples(text)
    except SamplesError as exc:
        return f"(cannot be read: line {exc.line}: {exc})"
    together = pooled(rounds)
    counts = sorted({(len(b), len(c)) for b, c in together.values()})
    sizes = ", ".join(f"{b} / {c}" for b, c in counts)
    return (
        f"{len(rounds)} round(s) of {len(together)} configuration(s): {sizes} samples "
        "(baseline / candidate) per configuration"
    )
