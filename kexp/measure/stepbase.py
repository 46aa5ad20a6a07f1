"""The baseline of a step on a parent: the parent's code, as ``measured_against: parent``
says, or the code the parent was measured against given again (its baseline file: the
reference, or the grandparent's code). A step timed so is no step over its parent: its
score counts the parent's own step a second time in the cumulative score. What a record
of such a step is told (:func:`step_baseline`), and when it is certain (the parent's
baseline samples, sample for sample, the reference's), recorded against the reference."""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Sequence
from typing import TYPE_CHECKING

from kexp.core.advice import REMOVE_NEW, SET_REFERENCE
from kexp.core.outcome import is_control, judge
from kexp.format.suspect import UNIT_TO_US

if TYPE_CHECKING:
    from kexp.core.model import KernelExperiment
    from kexp.measure.measurements import Measurement

__all__ = ["StepBaseline", "step_baseline"]

#: The outcomes of a parent whose baseline and candidate are told apart by its medians:
#: a change (within noise, a baseline near either is no sign of which code it timed).
_CHANGES = ("improvement", "regression")


@dataclasses.dataclass(frozen=True)
class StepBaseline:
    """A step's baseline that is not its parent's code (:func:`step_baseline`)."""

    #: The parent's id.
    parent: str
    #: The code the parent was measured against: ``the reference`` or its parent's id.
    against: str
    #: Whether the baseline's samples are the parent's baseline's, sample for sample
    #: (else its medians are nearer the parent's baseline's than its candidate's).
    copied: bool
    #: The baseline's medians, the parent's baseline's and its candidate's (its code).
    medians: tuple[str, str, str]
    #: Whether the step is recorded against the reference for it (certain: copied, the
    #: parent measured against the reference, and no ``measured_against`` given).
    settled: bool = False

    def said(self, exp_id: str) -> str:
        """The one-line warning for the step ``exp_id``, with what to do."""
        ours, base, code = self.medians
        parent = self.parent[:10]
        if self.copied:
            found = (
                f"its baseline's samples are those of {parent}'s baseline, sample for sample: "
                f"the code {parent} was measured against ({self.against}), not {parent}'s"
            )
        else:
            found = (
                f"its baseline's medians ({ours}) are nearer {parent}'s baseline's ({base}) "
                f"than its candidate's ({code}, {parent}'s code): the baseline looks like the "
                f"code {parent} was measured against ({self.against})"
            )
        if self.settled:
            return (
                f"{exp_id}: {found}; recorded measured against the reference, its score the "
                f"speedup over the reference (a step over {parent} is timed with {parent}'s "
                "code as the baseline)"
            )
        twice = f"no step over {parent}: its cumulative score would count {parent}'s step twice"
        if self.against == "the reference":
            fix = (
                f"if it is the reference, {SET_REFERENCE.say(id=exp_id)}; else time {parent}'s "
                f"code as the baseline and record it again ({REMOVE_NEW.say(id=exp_id)} first)"
            )
        else:
            fix = (
                f"time {parent}'s code as the baseline and record it again "
                f"({REMOVE_NEW.say(id=exp_id)} first)"
            )
        return f"{exp_id}: {found}, so its score is {twice}; {fix}"


def step_baseline(
    parent: KernelExperiment, measurements: Sequence[Measurement], *, given: bool
) -> StepBaseline | None:
    """Whether the baseline of ``measurements``, a step on ``parent`` measured against
    it, timed the code ``parent`` was measured against instead of ``parent``'s: its
    samples are a round of ``parent``'s baseline, sample for sample (each side at least
    :data:`kexp.format.samples.COPY_SAMPLES`), or ``parent``'s own timings are a change
    (an improvement or a regression, by its score and interval alone: nothing is derived
    of it) and the baseline's medians are nearer its baseline's than its
    candidate's (by the geometric mean over the configurations both timed). ``given``:
    whether ``measured_against: parent`` was said, not taken by default (a copy of a
    reference baseline is then not settled). None when the baseline is the parent's code,
    or nothing tells."""
    against = "the reference" if parent.measured_against == "reference" or not parent.pid else (
        f"its parent {parent.pid[:10]}'s code"
    )  # fmt: skip
    ours = {m.config: m for m in measurements}
    theirs = _medians(parent, ours)
    if not theirs:
        return None
    medians = (
        _shown([ours[config].baseline for config in theirs]),
        _shown([base for base, _ in theirs.values()]),
        _shown([cand for _, cand in theirs.values()]),
    )
    copied = _copied(parent, ours)
    if copied is None:
        return None  # the parent's candidate's samples: its code
    if copied:
        settled = not given and against == "the reference"
        return StepBaseline(parent.id, against, True, medians, settled)
    # Its own timings' verdict (its baseline against its candidate), nothing derived of it.
    own = judge(parent.status, parent.is_buggy, False, parent.score, parent.score_ci,
                parent.settings, control=is_control(parent))  # fmt: skip
    if own not in _CHANGES:
        return None
    logs = [
        (math.log(ours[c].baseline / base), math.log(ours[c].baseline / cand))
        for c, (base, cand) in theirs.items()
    ]
    near_base = abs(math.fsum(b for b, _ in logs))
    near_code = abs(math.fsum(c for _, c in logs))
    if near_base >= near_code:
        return None
    return StepBaseline(parent.id, against, False, medians)


def _medians(
    parent: KernelExperiment, ours: dict[str, Measurement]
) -> dict[str, tuple[float, float]]:
    """The parent's (baseline, candidate) medians in microseconds, of the configurations
    ``ours`` timed too."""
    found = {}
    for result in parent.results:
        config = str(result.get("config"))
        scale = UNIT_TO_US.get(str(result.get("unit", "us")))
        base, cand = result.get("baseline"), result.get("candidate")
        if config not in ours or scale is None or ours[config].baseline <= 0:
            continue
        if all(_positive(v) for v in (base, cand)):
            found[config] = (float(base) * scale, float(cand) * scale)  # type: ignore[arg-type]
    return found


def _positive(value: object) -> bool:
    """Whether ``value`` is a positive number (not a bool)."""
    return isinstance(value, (int, float)) and not isinstance(value, bool) and value > 0


def _copied(parent: KernelExperiment, ours: dict[str, Measurement]) -> bool | None:
    """True when the baseline samples of ``ours`` are a round of ``parent``'s baseline
    samples, sample for sample; None when they are a round of its candidate's (its code);
    False otherwise."""
    from kexp.format.samples import COPY_SAMPLES, SamplesError, kept_sample, parse_samples

    if not parent.samples.strip():
        return False
    try:
        rounds = parse_samples(parent.samples)
    except SamplesError:
        return False
    sides = {c: tuple(map(kept_sample, m.baseline_samples)) for c, m in ours.items()}
    if any(len(side) < COPY_SAMPLES for side in sides.values()):
        return False
    for measured in rounds:
        timings = measured.timings
        if not all(config in timings for config in sides):
            continue
        if all(timings[config][1] == side for config, side in sides.items()):
            return None
        if all(timings[config][0] == side for config, side in sides.items()):
            return True
    return False


def _shown(times: Sequence[float]) -> str:
    """Medians as a message says them: ``20.00, 70.00 us``."""
    return f"{', '.join(f'{t:.2f}' for t in times)} us"
