"""Scoring measurements: the geometric mean of the configurations' speedups, the
verdict in words, the raw result's text and what judges a step over its parent
(:func:`score_measurements`, :func:`parent_judge`); :mod:`kexp.measure.record` records
what this scores."""

from __future__ import annotations

import dataclasses
import math
import textwrap
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from kexp.core.errors import KexpError, MeasurementError
from kexp.core.ids import SHOWN_LENGTH
from kexp.core.model import KernelExperiment, outcome_of
from kexp.core.outcome import SCORED_OUTCOMES, judged_over_parent
from kexp.core.settings import DEFAULT_SETTINGS, Settings
from kexp.format.suspect import SUSPECT_LABEL, suspect_reasons
from kexp.measure.measurements import Measurement, sides_of
from kexp.storage.store import Store

if TYPE_CHECKING:
    from kexp.format.samples import Round


@dataclasses.dataclass(frozen=True)
class Scored:
    """The fields computed from measurements."""

    score: float
    results: list[dict[str, Any]]
    raw_result: str
    measurements: tuple[Measurement, ...]
    #: The score's 95 % interval (empty without enough samples).
    score_ci: list[float] = dataclasses.field(default_factory=list)
    #: The ``## Samples`` section (empty without samples, or when not kept).
    samples: str = ""

    def fields(self) -> dict[str, Any]:
        """``score``, ``results`` and ``raw_result`` (and ``score_ci`` and ``samples``
        when measured with samples), ready for ``create_experiment``."""
        data: dict[str, Any] = {
            "score": self.score,
            "results": self.results,
            "raw_result": self.raw_result,
        }
        if self.score_ci:
            data["score_ci"] = self.score_ci
        if self.samples:
            data["samples"] = self.samples
        return data


# --- scoring -------------------------------------------------------------------------


def geometric_mean(values: Iterable[float]) -> float:
    """The geometric mean of positive numbers."""
    numbers = [float(v) for v in values]
    if not numbers:
        raise MeasurementError("the geometric mean of nothing is undefined")
    if any(not (v > 0 and math.isfinite(v)) for v in numbers):
        raise MeasurementError("the geometric mean needs positive, finite numbers")
    return math.exp(math.fsum(math.log(v) for v in numbers) / len(numbers))


#: The longest line of the raw result kexp writes (a longer one is wrapped).
RAW_RESULT_WIDTH = 80


def wrapped(text: str, width: int = RAW_RESULT_WIDTH) -> str:
    """``text`` with each line longer than ``width`` wrapped at spaces as Markdown reads
    it the same: a list item's continuation indented by two, a paragraph's not (a word
    longer than ``width`` alone is cut)."""
    lines = []
    for line in text.split("\n"):
        if len(line) <= width:
            lines.append(line)
            continue
        indent = "  " if line.startswith("- ") else ""
        lines.extend(
            textwrap.wrap(
                line,
                width,
                subsequent_indent=indent,
                break_on_hyphens=False,
                replace_whitespace=False,
            )
        )
    return "\n".join(lines)


def _time(microseconds: float) -> str:
    return f"{microseconds:.2f}" if microseconds >= 1 else f"{microseconds:.4g}"


def _percent(speedup: float) -> str:
    return f"{(speedup - 1) * 100:+.2f}%"


def verdict(
    score: float, settings: Settings = DEFAULT_SETTINGS, interval: Sequence[float] = ()
) -> tuple[str, str]:
    """The words of the raw-result header and overall line: (``SUCCESS``, ``IMPROVEMENT``),
    (``MARGINAL``, ``MARGINAL``) or (``REGRESSION``, ``REGRESSION``); with an
    ``interval``, as the outcome is derived (a score past a threshold whose interval
    holds 1 is ``MARGINAL``, "within noise")."""
    found = outcome_of(
        KernelExperiment(score=score, score_ci=list(interval), status="done"), settings
    )
    return _words(found, score, settings, within_noise=bool(interval))


def _words(
    outcome: str, score: float, settings: Settings, *, within_noise: bool
) -> tuple[str, str]:
    """:func:`verdict`'s words for an ``outcome`` (improvement, marginal or regression)
    of a speedup ``score``: a marginal score past a threshold is "within noise" when
    ``within_noise`` (an interval holding 1 made it marginal)."""
    if outcome == "improvement":
        return "SUCCESS", "IMPROVEMENT"
    if outcome == "regression":
        return "REGRESSION", "REGRESSION"
    beyond = score > settings.improvement_above or score < settings.regression_below
    return "MARGINAL", "MARGINAL (within noise)" if within_noise and beyond else "MARGINAL"


@dataclasses.dataclass(frozen=True)
class OverParent:
    """A step measured against the reference, judged over its parent as the campaign
    judges it (:func:`kexp.core.outcome.judged_over_parent`): what its raw result's
    first line says."""

    #: The parent's id.
    pid: str
    #: The parent's cumulative score (its speedup over the reference).
    parent_score: float
    #: The step's outcome over its parent: improvement, marginal or regression.
    outcome: str


#: What judges a score and its interval over a parent (:class:`OverParent`), or None
#: when it is not judged so.
ParentJudge = Callable[[float, Sequence[float]], "OverParent | None"]


def raw_result_text(
    measurements: Sequence[Measurement],
    score: float,
    *,
    iteration: int | None = None,
    settings: Settings = DEFAULT_SETTINGS,
    interval: Sequence[float] = (),
    title: str | None = None,
    note: str = "",
    over_parent: OverParent | None = None,
    details: Mapping[str, str] | None = None,
) -> str:
    """The ``raw_result`` text in the skill's format (overall, then one item per config;
    lines :func:`wrapped` at :data:`RAW_RESULT_WIDTH`);
    with samples, the interval and each configuration's sample counts too (and its
    ``details``: samples set aside as load spikes, two modes); ``note``
    (how the timings were taken) below the overall line. ``over_parent``: a step measured
    against the reference, made on a parent: the header says its outcome over the
    parent (the campaign's), and the overall line its speedup over the parent too."""
    spread = f" (95% interval {interval[0]:.4f}-{interval[1]:.4f})" if interval else ""
    if over_parent is None:
        header, overall = verdict(score, settings, interval)
        gain = f"{score:.4f}x speedup{spread} = {_percent(score)} {overall}"
    else:
        ratio = score / over_parent.parent_score
        header, overall = _words(over_parent.outcome, ratio, settings, within_noise=True)
        gain = (
            f"{score:.4f}x speedup over the reference{spread} = {_percent(score)}; "
            f"over parent {over_parent.pid[:SHOWN_LENGTH]} ({over_parent.parent_score:.4f}x): "
            f"{ratio:.4f}x = {_percent(ratio)} {overall}"
        )
    if title is None:
        title = f"Iteration {iteration} Results" if iteration is not None else "Results"
    lines = [
        f"{title} - {header}:",
        "",
        f"**Overall**: {gain}",
        "",
        *([note, ""] if note else []),
        "**Per-kernel breakdown**:",
    ]
    for m in measurements:
        counts = ""
        if m.summary:
            runs = [str(n) if n is not None else "?" for n in (m.baseline_n, m.candidate_n)]
            counts = f" (summaries of {runs[0]} / {runs[1]} runs, no raw samples)"
        elif m.has_samples:
            base, cand = len(m.baseline_samples) or 1, len(m.candidate_samples) or 1
            more = (details or {}).get(m.config)
            counts = f" (medians of {base} / {cand} samples{f'; {more}' if more else ''})"
        lines.append(
            f"- {m.config}: {m.speedup:.4f}x ({_percent(m.speedup)})  "
            f"{_time(m.baseline)} -> {_time(m.candidate)} µs{counts}"
        )
    return wrapped("\n".join(lines))


def score_measurements(
    measurements: Sequence[Measurement],
    *,
    iteration: int | None = None,
    settings: Settings = DEFAULT_SETTINGS,
    keep_samples: bool = True,
    rounds: Sequence[Round] | None = None,
    protocol: Mapping[str, Any] | None = None,
    title: str | None = None,
    note: str = "",
    over_parent: ParentJudge | None = None,
) -> Scored:
    """``score`` (geometric mean of speedups, 4 decimals), ``results`` and ``raw_result``.

    Measured with samples, ``results`` hold medians, counts and interquartile ranges,
    ``score_ci`` the score's interval and ``samples`` the ``## Samples`` section (the
    ``rounds`` given, else one round of these measurements; none when not
    ``keep_samples``). ``protocol`` (how it was measured) informs the plausibility check;
    ``note`` is a line of ``raw_result`` on how the timings were taken. ``over_parent``
    judges the score and its interval over a parent (:func:`parent_judge`): the header
    of a step measured against the reference says the campaign's word for it.
    """
    if not measurements:
        raise MeasurementError("no configurations were measured")
    interval: list[float] = []
    samples_text = ""
    details: dict[str, str] = {}
    if any(m.has_samples for m in measurements):
        # lazy: not every command that imports this module needs kexp.format.samples
        from kexp.format.samples import Round, dispute_words, render_samples, spike_words, summarize

        pooled = {m.config: sides_of(m) for m in measurements}
        summary = summarize(pooled, rounds=rounds or ())
        if summary.dispute is not None:  # the interval holds every round's
            note = "\n".join(filter(None, (note, dispute_words(summary.dispute))))
        results, score, interval = summary.results, summary.score, summary.score_ci
        for config, stats in zip(pooled, summary.configs, strict=True):
            details[config] = spike_words(config, stats, rounds or [Round(pooled)])
        if keep_samples:
            samples_text = render_samples(rounds if rounds is not None else [Round(pooled)])
    else:
        results = [m.to_result() for m in measurements]
        score = round(geometric_mean(m.speedup for m in measurements), 4)
    text = raw_result_text(
        measurements,
        score,
        iteration=iteration,
        settings=settings,
        interval=interval,
        title=title,
        note=note,
        over_parent=over_parent(score, interval) if over_parent is not None else None,
        details=details,
    )
    judged = KernelExperiment(score=score, results=results, protocol=dict(protocol or {}))
    reasons = suspect_reasons(judged, settings)
    if reasons:
        text += "\n\n" + wrapped(f"**{SUSPECT_LABEL}**: " + "; ".join(reasons))
    return Scored(score, results, text, tuple(measurements), interval, samples_text)


def parent_judge(store: Store, record: KernelExperiment) -> ParentJudge | None:
    """What judges ``record``'s score and interval (to be measured) over its parent as
    ``store``'s campaign will, once it is recorded: a step measured against the
    reference, made on a parent (:func:`kexp.core.outcome.judged_over_parent`). None
    when it is not judged so, or its parent has no cumulative score (then the campaign,
    and the raw result, judge it over the reference)."""
    if not isinstance(record.pid, str) or not judged_over_parent(record):
        return None
    try:
        parent = store.get_experiment(record.pid)
    except KexpError:  # not in the store (validation says so when it is recorded)
        return None
    parent_score = parent.cumulative_score
    if parent_score is None:
        return None

    def judge(score: float, interval: Sequence[float]) -> OverParent | None:
        step = dataclasses.replace(record, pid=parent.id, score=score, score_ci=list(interval))
        outcome = store.derived_of(step).outcome
        if outcome not in SCORED_OUTCOMES:
            return None
        return OverParent(parent.id, parent_score, outcome)

    return judge
