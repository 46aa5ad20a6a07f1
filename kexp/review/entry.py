"""What a reviewer sees of one changed file: its fields, what is derived of it, its rank
in its campaign and whether it is a new best, and each field a correction changed (long
values as a diff).
"""

from __future__ import annotations

import difflib
import json
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from kexp.core.cumulative import change_percent, cumulative_change
from kexp.core.model import BODY_FIELDS, KernelExperiment
from kexp.core.noise import ratio_interval, rounded_interval
from kexp.core.outcome import is_control, measured_against_parent
from kexp.core.problems import sort_problems
from kexp.format.fileformat import key_insight
from kexp.format.samples import describe_protocol, sample_count
from kexp.format.suspect import suspect_reasons
from kexp.format.validate import CheckedFile
from kexp.review.model import FieldChange, ReviewedExperiment, short_value
from kexp.review.side import Side, campaign_of
from kexp.storage.lineage import is_scored

if TYPE_CHECKING:
    from kexp.storage.history import ExperimentChange


#: A changed value longer than this (or with a line break) is shown as a diff.
LONG_VALUE_CHARS = 80


#: Lines of a field's diff shown before the rest is summarised.
MAX_DIFF_LINES = 24


#: Longest line of a field's diff (longer ones are cut, ending in "…").
LONG_DIFF_LINE_CHARS = 300


#: A reviewed experiment and, when its file is valid, the experiment itself.
Reviewed = tuple["ReviewedExperiment", "KernelExperiment | None"]


def reviewed_entry(
    kind: str,
    change: ExperimentChange,
    checked: CheckedFile,
    exp: KernelExperiment | None,
    side: Side,
    then: Side,
    relative: Callable[[Path | None], str | None],
) -> ReviewedExperiment:
    """What a reviewer sees of one changed file (``exp``: its experiment when valid)."""
    old_path = relative(change.old_path) if kind in ("corrected", "moved") else None
    entry = ReviewedExperiment(
        id=change.id,
        kind=kind,
        path=relative(checked.path) or str(checked.path),
        old_path=old_path,
        valid=exp is not None,
        change_summary="",
        operator_sig="",
        dtype_sig="",
        score=None,
        outcome="invalid",
        pid="",
        changes=[field_change(name, old, new) for name, (old, new) in change.fields.items()],
        problems=sort_problems(checked.problems) if kind != "removed" else [],
        removed_in=change.removed_in if kind == "corrected" else "",
    )
    if exp is None:
        if checked.document is None:
            # Unreadable (conflict markers, bad YAML): its fields are not "absent", its
            # problems say why none could be read.
            entry.changes = []
        fields = checked.document.fields if checked.document is not None else {}
        entry.change_summary = as_text(fields.get("change_summary"))
        entry.operator_sig = as_text(fields.get("operator_sig"))
        entry.dtype_sig = as_text(fields.get("dtype_sig"))
        entry.env = as_text(fields.get("env"))
        entry.pid = as_text(fields.get("pid"))
        entry.author = as_text(fields.get("author"))
        score = fields.get("score")
        if isinstance(score, (int, float)) and not isinstance(score, bool):
            entry.score = float(score)
        return entry
    entry.change_summary = exp.change_summary
    entry.operator_sig = exp.operator_sig
    entry.dtype_sig = exp.dtype_sig
    entry.env = exp.env
    entry.score = float(exp.score)
    entry.outcome = exp.outcome
    entry.status = exp.status
    entry.control = is_control(exp)
    entry.pid = exp.pid
    entry.author = exp.author
    entry.key_insight = key_insight(exp.detailed_description)
    entry.score_ci = list(exp.score_ci) if len(exp.score_ci) == 2 else None
    entry.measured = _measured(exp)
    entry.measured_against = exp.measured_against
    cumulative = exp.cumulative_score
    entry.cumulative_score = cumulative
    entry.cumulative_ci = None if exp.cumulative_ci is None else list(exp.cumulative_ci)
    entry.cumulative_reason = exp.cumulative_reason
    parent = side.get(exp.pid) if exp.pid else None
    if parent is not None:
        entry.parent_score = float(parent.score)
        before = parent.cumulative_score
        if cumulative is not None and before is not None:
            # The change of the speedup over the reference: for a step measured against
            # its parent, the step itself.
            entry.delta, entry.delta_pct = cumulative_change(before, cumulative)
            if before > 0:
                if measured_against_parent(exp) and entry.score_ci:
                    entry.delta_pct_ci = [change_percent(v) for v in entry.score_ci]
                elif exp.cumulative_ci is not None and parent.cumulative_ci is not None:
                    low, high = rounded_interval(  # outwards: it holds the change said
                        *ratio_interval(cumulative, exp.cumulative_ci, before, parent.cumulative_ci)
                    )
                    entry.delta_pct_ci = [change_percent(low), change_percent(high)]
    if is_scored(exp) and exp.derived.ranked and cumulative is not None:
        rivals = side.scored_on(campaign_of(exp))
        mine = (exp.derived.can_be_best, cumulative)
        entry.rank = 1 + sum(1 for key, _ in rivals if key > mine)
        entry.rank_of = len(rivals)
        entry.dead_end = side.dead_end(exp)
    if (
        kind != "removed"
        and entry.rank is not None
        and cumulative is not None
        and exp.derived.can_be_best  # a step within noise is never a new best
    ):
        # The current best is the best tip whose measurement is believable (a suspect
        # one above it is no best until checked): a believable step that is it, or a
        # suspect one above it, is measured against the best before.
        current = side.best_on(campaign_of(exp))
        reasons = suspect_reasons(exp, exp.settings)
        if current is None:
            ahead = True
        elif reasons:
            ahead = cumulative > (current.cumulative_score or 0.0)
        else:
            ahead = cumulative >= (current.cumulative_score or 0.0)
        previous = then.best_on(campaign_of(exp)) if ahead else None
        if previous is None and ahead:
            entry.env_spelt_otherwise = side.spelt_otherwise(campaign_of(exp)) or ""
        if previous is not None:
            entry.previous_best_id = previous.id
            entry.previous_best_score = float(previous.score)
            entry.previous_best_cumulative = previous.cumulative_score
        best = ahead and (
            previous is None
            or (
                (previous.id != exp.id or bool(reasons))
                and cumulative > (previous.cumulative_score or 0.0)
            )
        )
        if best and reasons:
            entry.suspect = reasons  # never celebrated: verify correctness first
        else:
            entry.new_best = best
    return entry


def as_text(value: Any) -> str:
    """A front-matter value as text ("" for none)."""
    return "" if value is None else str(value)


def _measured(exp: KernelExperiment) -> str:
    """The protocol and the samples per configuration of ``exp``, in words."""
    parts = [describe_protocol(exp.protocol)] if exp.protocol else []
    counts = sorted({c for c in map(sample_count, exp.results) if c is not None})
    if counts:
        parts.append(
            "samples per configuration (baseline / candidate): "
            + ", ".join(f"{b} / {c}" for b, c in counts)
        )
    return "; ".join(parts)


def field_change(name: str, old: Any, new: Any) -> FieldChange:
    """The change of field ``name`` from ``old`` to ``new``; a long value's as a diff."""
    change = FieldChange(name, old, new)
    if name in BODY_FIELDS or _is_long(old) or _is_long(new):
        old_lines = _as_lines(old)
        new_lines = _as_lines(new)
        lines = [
            _cut(line.rstrip("\n"), LONG_DIFF_LINE_CHARS)
            for line in difflib.unified_diff(old_lines, new_lines, lineterm="", n=1)
        ][2:]  # drop the ---/+++ file headers
        change.diff = lines[:MAX_DIFF_LINES]
        change.diff_omitted = max(0, len(lines) - MAX_DIFF_LINES)
    return change


def _cut(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _is_long(value: Any) -> bool:
    text = value if isinstance(value, str) else short_value(value)
    return "\n" in text or len(text) > LONG_VALUE_CHARS


def _as_lines(value: Any) -> list[str]:
    if value is None:
        return []
    if isinstance(value, str):
        return value.splitlines()
    return json.dumps(value, indent=2, ensure_ascii=False).splitlines()
