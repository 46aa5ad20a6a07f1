"""One experiment as an entry of the context packet (:mod:`kexp.agents.context`): its
lines and its data, for the best and the suspect tips above it, the path to the best, the
failures, the results within noise and the successes, and the changes tried before.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from kexp.agents.packet import SECTION_LIMITS, Entry, cut
from kexp.core.advice import CORRECT_FIELD
from kexp.core.outcome import NOTHING_MEASURED
from kexp.core.spelling import canonical
from kexp.core.suspicion import folded
from kexp.format.suspect import SUSPECT_LABEL, suspect_reasons
from kexp.storage.doctext import score_interval
from kexp.storage.operators import part_of
from kexp.storage.rows import LOCAL

if TYPE_CHECKING:
    from kexp.core.campaign import Derivation
    from kexp.core.cumulative import Derived
    from kexp.storage.dedupe import Repeat
    from kexp.storage.rows import Row, Sighting


def contains_wanted(value: str, wanted: str | None, column: str | None = None) -> bool:
    """Whether a filter ``wanted`` of ``column`` (``dtype_sig``, ``env``; None: either)
    reads ``value`` (None: anything is; :func:`kexp.storage.operators.part_of`: a part of
    it, in any case or spelling)."""
    columns = (column,) if column else ("dtype_sig", "env")
    return wanted is None or any(part_of(name, wanted, value) for name in columns)


def lineage_entries(
    chain: list[Row], derivation: Derivation, short: Callable[[str], str], settings: Any
) -> list[Entry]:
    """The path to the best (``chain``, root first) as entries: each step's score and the
    cumulative score it reaches, the best's parent and the root kept first."""
    entries = []
    last = len(chain) - 1
    for position, doc in enumerate(chain):
        derived = derivation.of(doc)
        cumulative = derived.cumulative_score
        over = "reference" if position == 0 or derived.steps == 1 else "parent"
        reached = "-" if cumulative is None else f"{cumulative:.4f}x"
        shown = derived.shown_score
        step = f"{derived.outcome} ({NOTHING_MEASURED})"  # an ancestor that timed out
        if shown is not None:
            step = f"{shown:.4f}x over {over}"
        suspect = suspect_reasons(doc, settings, derived)  # an ancestor's (the best is not)
        if position == last:  # the best, shown whole above (a first step too)
            line = f"{position + 1}. the best (above): {step} → {reached}"
        else:
            line = (
                f"{position + 1}. {short(doc.id)} {step} → {reached} — "
                f"{_marked(doc.change_summary, suspect)}"
            )
        sighting = doc.sighting()
        mark = _unmerged_mark(sighting)
        line += (f" ({mark})" if mark else "") + _on_ref(sighting)
        # The best's parent and the root first, then the steps nearest the best.
        distance = last - position
        if position == 0:
            priority = (3, 0)
        elif distance == 1:
            priority = (3, 1)
        elif distance == 0:
            priority = (2, 1)
        else:
            priority = (7, distance)
        entries.append(
            Entry(
                "lineage",
                priority,
                (position,),
                (line,),
                {
                    "step": position + 1,
                    "id": doc.id,
                    "score": doc.score,
                    "measured_against": over,
                    "cumulative_score": cumulative,
                    "outcome": derived.outcome,
                    "change_summary": doc.change_summary,
                    **({} if sighting is None else {"ref": sighting.ref}),
                    **(
                        {"unmerged": sighting.unmerged.to_dict()}
                        if sighting is not None and sighting.unmerged is not None
                        else {}
                    ),
                    **({"suspect": suspect} if suspect else {}),
                },
            )
        )
    limit = SECTION_LIMITS["lineage"]
    return entries if len(entries) <= limit else [entries[0], *entries[-(limit - 1) :]]


def crossed_machines(chain: list[Row], derived: Derived) -> dict[str, Any] | None:
    """Where the steps the cumulative score of ``chain``'s last multiplies (``chain``
    root first, ``derived`` the last's) cross machines: the step nearest the last whose
    env is not its parent's (``id``, ``env``, ``parent``, ``parent_env``) and how many
    more do (``more``); None when they were all measured on one (``kexp validate``'s
    ``env-differs-from-parent``)."""
    multiplied = chain[max(0, len(chain) - derived.steps) :] if derived.steps > 1 else []
    crossings = [
        (parent, step)
        for parent, step in itertools.pairwise(multiplied)
        if canonical("env", step.env) != canonical("env", parent.env)  # not spelt otherwise
    ]
    if not crossings:
        return None
    parent, step = crossings[-1]
    return {
        "id": step.id,
        "env": step.env.strip(),
        "parent": parent.id,
        "parent_env": parent.env.strip(),
        "more": len(crossings) - 1,
    }


def crossed_line(crossed: dict[str, Any], short: Callable[[str], str]) -> str:
    """The line an entry says :func:`crossed_machines`' finding in, with what to do."""
    more = f" (and {crossed['more']} more step(s))" if crossed["more"] else ""
    fix = CORRECT_FIELD.say(id=short(crossed["id"]), field="pid")
    return (
        f"  crossed machines: {short(crossed['id'])} was measured on {cut(crossed['env'])!r}, "
        f"its parent {short(crossed['parent'])} on {cut(crossed['parent_env'])!r}{more}: this "
        "cumulative score multiplies scores of two machines; measure the parent's code on "
        f"{cut(crossed['env'])!r} and make that record the step's parent ({fix}), or "
        "measure the step against the reference"
    )


def ported_line(retired: str) -> str:
    """The line a success built on a retired step (``retired``, its id as shown) says
    under its first: its change is one to port, never measured on what replaced that
    step."""
    return (
        f"  built on retired {retired}: its change was never measured without that step; "
        "port it onto the current best and measure it there"
    )


def experiment_entry(
    section: str,
    doc: Row,
    insight: str,
    outcome: str,
    priority: tuple[int, int],
    order: tuple[Any, ...],
    dtype: str | None,
    env: str | None,
    derived: Derived,
    short: Callable[[str], str],
    *,
    error: str = "",
    suspect: Sequence[str] = (),
    operator_named: bool = False,
    retired: str = "",
) -> Entry:
    """One experiment's lines (and data); ``error``: a failure's, shown when no key
    insight says what it taught; ``suspect``: why its measurement is implausible (marked
    as ``kexp top`` marks it, the reasons on the next line); ``operator_named``: the
    line names its operator (the one asked for matched several); ``retired``: why it
    was retired (said above its key insight, written before it was found wrong)."""
    interval = score_interval(doc)
    score = f"{doc.score:.4f}x"
    if interval is not None:
        score += f" [{interval[0]:.4f}, {interval[1]:.4f}]"
    cumulative = derived.cumulative_score
    if (
        section in ("best", "suspect_best", "successes")
        and cumulative is not None
        and derived.steps > 1
    ):
        # A success: its speedup over the reference first, then its own step.
        reached = f"{cumulative:.4f}x"
        if derived.cumulative_ci is not None:
            low, high = derived.cumulative_ci
            reached += f" [{low:.4f}, {high:.4f}]"
        score = f"{reached} over the reference (this step {score})"
    elif section == "successes" and cumulative is None and doc.pid:
        score += " over its parent"  # (a bare score reads as over the reference)
    where = [doc.operator_sig] if operator_named else []
    # The dtype and env of its own, where not the ones the packet is for.
    if dtype is None or doc.dtype_sig.lower() != dtype.lower():
        where.append(doc.dtype_sig)
    if env is None or doc.env.lower() != env.lower():
        where.append(doc.env if env is None else f"another env: {doc.env}")
    # Read across refs: the refs that removed it, where it was found when not in the
    # working tree (the code to fetch), and for the best, another version that changed
    # too (diverged).
    sighting = doc.sighting()
    where.append(_removed(sighting))
    where.append(_unmerged_mark(sighting))
    place = f" ({'; '.join(w for w in where if w)})" if any(where) else ""
    place += _on_ref(sighting)
    said = _scored(score, outcome, derived.shown_score)
    lines = [f"- {short(doc.id)} {said} — {_marked(doc.change_summary, suspect)}{place}"]
    if derived.drift:  # why a change is within noise: the A/A control of its env
        lines.append(f"  why: {cut(derived.drift)}")
    if suspect:  # said once: the near-zero times of every configuration in one reason
        lines.append(f"  suspect: {cut('; '.join(folded(suspect)))}")
    if retired:
        lines.append(f"  retired: {cut(retired)}")
    if insight:
        lines.append(f"  insight: {cut(insight)}")
    elif error:
        lines.append(f"  error: {cut(error)}")
    if section in ("best", "suspect_best") and sighting is not None and sighting.unmerged:
        lines.append(f"  {cut(sighting.unmerged.said)}")
    diverged = section == "best" and sighting is not None and sighting.diverged
    if diverged and sighting is not None:
        places = [p if p != "local" else "your working tree" for p in sighting.diverged_on]
        shown = ", ".join(places[:2]) + (f" and {len(places) - 2} more" if places[2:] else "")
        which = "the working tree's edit" if sighting.ref == "local" else "the later commit's"
        lines.append(
            f"  diverged: another version on {cut(shown)} changed there too since they "
            f"parted (this is {which})"
        )
    data: dict[str, Any] = {"id": doc.id, "score": doc.score, "outcome": outcome}
    if derived.drift:  # as kexp add --json says it
        data["outcome_reason"] = derived.drift
    data["change_summary"] = doc.change_summary
    if interval is not None:
        data["score_ci"] = list(interval)
    data["cumulative_score"] = cumulative
    if derived.cumulative_ci is not None:
        data["cumulative_ci"] = list(derived.cumulative_ci)
    if cumulative is None:  # why, as kexp add --json says it
        data["cumulative_reason"] = derived.cumulative_reason
    if retired:
        data["retired"] = retired
    if insight:
        data["key_insight"] = insight
    elif error:
        data["error"] = error
    if suspect:  # as kexp top --json says it (left out when believable)
        data["suspect"] = list(suspect)
    data["dtype_sig"] = doc.dtype_sig
    data["env"] = doc.env
    if sighting is not None:
        data["ref"] = sighting.ref
        if sighting.removed_on:
            data["removed_on"] = list(sighting.removed_on)
        if sighting.unmerged is not None:
            data["unmerged"] = sighting.unmerged.to_dict()
    if diverged and sighting is not None:
        data.update(
            other_versions=list(sighting.other_versions),
            diverged=True,
            diverged_on=list(sighting.diverged_on),
        )
    return Entry(section, priority, order, tuple(lines), data)


def _marked(summary: str, suspect: Sequence[str]) -> str:
    """A summary on an entry's line, flagged ``[suspect: verify correctness]`` as
    ``kexp top`` flags it when its measurement is suspect."""
    return f"[{SUSPECT_LABEL}] {cut(summary)}" if suspect else cut(summary)


def _on_ref(sighting: Sighting | None) -> str:
    """What ends an entry read from a ref, not the working tree: `` on REF`` (the code to
    fetch); nothing for the working tree's."""
    return "" if sighting is None or sighting.local else f" on {cut(sighting.ref)}"


def _unmerged_mark(sighting: Sighting | None) -> str:
    """``unmerged`` when an entry's version is a side branch's ranked over the working
    tree's or default branch's, ``built on unmerged`` when its cumulative score builds
    on such a version (``kexp top``'s marks); "" otherwise."""
    if sighting is None or sighting.unmerged is None:
        return ""
    return "unmerged" if sighting.unmerged.own else "built on unmerged"


def _removed(sighting: Sighting | None) -> str:
    """``removed on REF`` when refs removed an experiment read all the same (a removal
    waiting on a side branch: ``removed_on``); "" otherwise."""
    if sighting is None or not sighting.removed_on:
        return ""
    more = " and more" if sighting.removed_on[2:] else ""
    return f"removed on {cut(', '.join(sighting.removed_on[:2]))}{more}"


def _scored(score: str, outcome: str, shown: float | None) -> str:
    """A line's score and outcome: ``1.0410x improvement``; a run that measured nothing
    (its shown score None: crashed or not run, or timed out, whatever its score)
    ``failed (nothing measured)``, not a speedup."""
    if shown is None:
        return f"{outcome} ({NOTHING_MEASURED})"
    return f"{score} {outcome}"


def repeat_entry(
    repeat: Repeat, rank: int, short: Callable[[str], str], *, across: bool = False
) -> Entry:
    """A tried-before entry; read ``across`` refs, it says where it was found (`` on
    REF``, ``ref`` in JSON: ``local`` for the working tree's), as every entry does."""
    kind = (
        "same change"
        if repeat.identical
        else "the same changed lines, other lines around them"
        if repeat.lines_alike
        else f"near-duplicate, similarity {repeat.similarity:.2f}"
    )
    said = _scored(f"{repeat.score:.4f}x", repeat.outcome, repeat.shown_score)
    line = f"- {short(repeat.id)} {said} ({kind}) — {cut(repeat.change_summary)}"
    line += f" on {cut(repeat.ref)}" if repeat.ref else ""
    data: dict[str, Any] = {
        "id": repeat.id,
        "score": repeat.score,
        "outcome": repeat.outcome,
        "identical": repeat.identical,
        "lines_alike": repeat.lines_alike,
        "similarity": repeat.similarity,
        "change_summary": repeat.change_summary,
    }
    if across:
        data["ref"] = repeat.ref or LOCAL
    return Entry("tried_before", (1, rank), (rank,), (line,), data)
