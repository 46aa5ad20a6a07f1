"""Don't believe blindly: measurements too good (or too small) to be true.

An experiment is *suspect* when its ``score`` is above the plausibility ceiling
(``Settings.suspect_score_above``, 3.0x by default), when one of its ``results`` has a
speedup above it (a score measured against the reference on a parent: its step, over
the parent's cumulative score, known where the lineage is read, never in a file
alone), when a measured baseline or candidate time is near zero (below
``Settings.suspect_time_below_us``), or when its ``protocol`` says a host wall clock
timed a short GPU kernel (below ``Settings.suspect_wall_clock_below_us``) without
device synchronisation (a kernel that ran on the CPU, ``protocol.device: cpu``, needs
none; one whose device is not said may be a GPU's): the usual signs of a kernel that
skipped its work, wrote wrong results, or a timer read before the GPU finished. Such an
experiment is flagged ``suspect: verify correctness`` in validation (a warning) and in
listings.

Buggy experiments are not flagged: they are already known to be wrong.

A cumulative score built on a suspect step (a step measured over a suspect parent, or
over a step that is) is suspect too, in listings, ``kexp context``, ``kexp review`` and
``kexp stats`` alike: "cumulative built on suspect ID (its own score is not suspect)"
(:attr:`kexp.core.cumulative.Derived.built_on_suspect`, one rule where cumulative scores
are made). Validation judges a file's own values only.

* :func:`suspect_reasons` / :func:`is_suspect` for an experiment (listings);
* :func:`suspect_problems` for a parsed file (validation warnings, code ``suspect``,
  positioned at the offending value; :func:`suspect_fields` says whether a file's
  front-matter has any).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from kexp.core.problems import Problem
from kexp.core.settings import DEFAULT_SETTINGS, Settings
from kexp.core.suspicion import UNIT_TO_US, Measured, findings

__all__ = [
    "SUSPECT_CODE",
    "SUSPECT_LABEL",
    "UNIT_TO_US",
    "built_on_reason",
    "is_suspect",
    "suspect_fields",
    "suspect_problems",
    "suspect_reasons",
]

if TYPE_CHECKING:
    from kexp.format.fileformat import Document


#: The flag shown next to a suspect experiment in listings.
SUSPECT_LABEL = "suspect: verify correctness"
#: The validation code of a suspect measurement (a warning).
SUSPECT_CODE = "suspect"


def built_on_reason(suspect_id: str, own: bool = False) -> str:
    """The reason of a cumulative score that multiplies the suspect step ``suspect_id``'s
    score (``own``: the step's own measurement is suspect too)."""
    said = "" if own else " (its own score is not suspect)"
    return f"cumulative built on suspect {suspect_id}{said}"


def suspect_reasons(
    exp: Measured, settings: Settings = DEFAULT_SETTINGS, derived: Any = None
) -> list[str]:
    """Why ``exp``'s measurements are implausible (empty when they are believable): an
    experiment's, or a query's row of one (``derived``: what its store derived of it,
    :class:`kexp.core.cumulative.Derived`; an experiment's own by default). Its own values
    judged, and its cumulative score: one built on a suspect step (its
    ``built_on_suspect``) is no better checked than that step, whatever its own score."""
    if derived is None:
        derived = getattr(exp, "derived", None)
    found = [
        reason
        for _, reason in findings(
            exp.score,
            exp.results,
            exp.is_buggy,
            settings,
            getattr(exp, "protocol", None),
            over=getattr(derived, "parent_cumulative", None),
        )
    ]
    below = getattr(derived, "built_on_suspect", "")
    if below and exp.is_buggy is not True:
        found.append(built_on_reason(below, own=bool(found)))
    return found


def is_suspect(exp: Measured, settings: Settings = DEFAULT_SETTINGS) -> bool:
    """Whether ``exp`` should be flagged ``suspect: verify correctness``."""
    return bool(suspect_reasons(exp, settings))


def suspect_fields(fields: Mapping[str, Any], settings: Settings = DEFAULT_SETTINGS) -> bool:
    """Whether a file whose front-matter holds ``fields`` is suspect (validation then
    warns, :func:`suspect_problems`)."""
    return bool(
        findings(
            fields.get("score"),
            fields.get("results"),
            fields.get("is_buggy"),
            settings,
            fields.get("protocol"),
            step_unknown=_over_reference_on_parent(fields),
        )
    )


def _over_reference_on_parent(fields: Mapping[str, Any]) -> bool:
    """Whether a file's score is over the reference though made on a parent: its step
    (its score over the parent's cumulative score), which the ceiling judges, is known
    where the lineage is read (listings, ``kexp context``, ``kexp review``), not in the
    file alone."""
    return bool(fields.get("pid")) and fields.get("measured_against") == "reference"


def suspect_problems(doc: Document, settings: Settings = DEFAULT_SETTINGS) -> list[Problem]:
    """Validation warnings (code ``suspect-measurement``) for one parsed experiment file."""
    fields = doc.fields
    problems: list[Problem] = []
    for path, reason in findings(
        fields.get("score"),
        fields.get("results"),
        fields.get("is_buggy"),
        settings,
        fields.get("protocol"),
        step_unknown=_over_reference_on_parent(fields),
    ):
        line, column = doc.position(path)
        problems.append(
            Problem(
                doc.path,
                line,
                column,
                "warning",
                SUSPECT_CODE,
                ".".join(str(p) for p in path),
                f"{SUSPECT_LABEL}: {reason}",
                "check the candidate's output against the baseline's and re-measure with "
                "synchronised timing (GPU events, do_bench); set is_buggy: true if the "
                "results are wrong",
            )
        )
    return problems
