"""The context packet fitted to its budget and rendered: what :mod:`kexp.agents.context`
gathers (entries of sections, each with its importance) kept in order of importance while
the rendered whole, with its "left out" note, fits the budget; Markdown or JSON.

The budget counts tokens as the characters of the rendered text divided by
:data:`CHARS_PER_TOKEN`, rounded up (a common rule of thumb for English and code; an
exact count depends on the model's tokenizer).
"""

from __future__ import annotations

import dataclasses
import json
import math
from typing import Any

from kexp.core.advice import LARGER_BUDGET, READ_MORE
from kexp.core.errors import BudgetTooSmallError

__all__ = [
    "CHARS_PER_TOKEN",
    "MAX_TEXT_CHARS",
    "SECTIONS",
    "SECTION_LIMITS",
    "Entry",
    "Packet",
    "count_tokens",
    "cut",
    "fit",
]

#: Characters per token of the budget.
CHARS_PER_TOKEN = 4
#: Sections in the order they are printed, with their Markdown headings.
SECTIONS = {
    "operators": "Recorded operators (the closest first)",
    "tried_before": "Tried before (your diff)",
    "best": "Current best",
    "suspect_best": "Higher, but suspect: verify correctness before building on it",
    "lineage": "Path to the best (root first; each step's score → cumulative)",
    "failures": "Related failures",
    "marginal": "Within noise: remeasure or move on",
    "successes": "Related successes",
    "do_not_repeat": "Do not repeat (already tried here)",
    "not_tried": "Not tried yet, or never improved, on this operator",
}
#: How many entries of each section are considered at most (the budget keeps fewer).
SECTION_LIMITS = {
    "tried_before": 5,
    "suspect_best": 3,
    "lineage": 60,
    "failures": 15,
    "marginal": 10,
    "successes": 15,
    "do_not_repeat": 20,
    "not_tried": 24,
}
#: A key insight (or summary) longer than this is cut, ending in "…".
MAX_TEXT_CHARS = 240


def count_tokens(text: str) -> int:
    """The tokens ``text`` counts for in a budget: ⌈characters / 4⌉."""
    return math.ceil(len(text) / CHARS_PER_TOKEN)


@dataclasses.dataclass(frozen=True)
class Entry:
    """One entry of a section: its Markdown lines and its JSON data."""

    section: str
    #: Importance: lower is kept first.
    priority: tuple[int, int]
    #: Position within the section, as printed.
    order: tuple[Any, ...]
    lines: tuple[str, ...]
    data: dict[str, Any]
    #: Kept on its first line alone (its insight or error left out for the budget).
    brief: bool = False


@dataclasses.dataclass(frozen=True)
class Packet:
    """The rendered context (``text``), what it holds (``data``) and its size."""

    text: str
    data: dict[str, Any]
    tokens: int
    budget: int
    #: Entries of each section that did not fit.
    left_out: dict[str, int]


def cut(text: str) -> str:
    """``text`` on one line, cut to :data:`MAX_TEXT_CHARS` (ending in "…")."""
    text = " ".join(text.split())
    return text if len(text) <= MAX_TEXT_CHARS else text[: MAX_TEXT_CHARS - 1] + "…"


# --- fitting the budget ----------------------------------------------------------------


#: What an entry's data says on the lines after its first, left out with them.
_DETAIL = ("retired", "key_insight", "error")


def fit(header: dict[str, Any], entries: list[Entry], budget: int, output: str) -> Packet:
    """Keep entries in order of importance while the rendered whole fits the budget: an
    entry too long whole is kept on its first line, and one that does not fit even so
    ends its section (what is kept of a section is the head of its ranking)."""
    everything = {name: 0 for name in SECTIONS}
    for entry in entries:
        everything[entry.section] += 1
    kept: list[Entry] = []
    text = _render(header, kept, everything, budget, output)
    if count_tokens(text) > budget:
        # The smallest budget the heading fits (the heading names the budget: grow it
        # until its own digits fit too).
        smallest = count_tokens(text)
        while count_tokens(_render(header, kept, everything, smallest, output)) > smallest:
            smallest = count_tokens(_render(header, kept, everything, smallest, output))
        raise BudgetTooSmallError(budget, count_tokens(text), smallest, CHARS_PER_TOKEN)
    closed: set[str] = set()  # sections an entry of which did not fit
    for entry in sorted(
        entries, key=lambda e: (e.priority, list(SECTIONS).index(e.section), e.order)
    ):
        if entry.section in closed:
            continue  # a section keeps the head of its ranking, never a shorter one below
        if entry.section == "lineage" and not any(e.section == "best" for e in kept):
            continue  # the path to a best left out would lead nowhere
        tries = [entry]
        if len(entry.lines) > 1:  # without its insight (or error, or divergence)
            data = {k: v for k, v in entry.data.items() if k not in _DETAIL}
            tries.append(dataclasses.replace(entry, lines=entry.lines[:1], data=data, brief=True))
        for trying in tries:
            trial = [*kept, trying]
            left = _left_out(everything, trial)
            if count_tokens(_render(header, trial, left, budget, output)) <= budget:
                kept = trial
                break
        else:
            if entry.section != "lineage":  # the path's steps are kept by distance
                closed.add(entry.section)
    left = _left_out(everything, kept)
    text = _render(header, kept, left, budget, output)
    data = _data(header, kept, left, budget)
    return Packet(text, data, count_tokens(text), budget, {k: v for k, v in left.items() if v})


def _left_out(everything: dict[str, int], kept: list[Entry]) -> dict[str, int]:
    """How many entries of each section are left out, and (``details``) how many kept
    entries lost their lines after the first."""
    left = dict(everything)
    for entry in kept:
        left[entry.section] -= 1
    left["details"] = sum(entry.brief for entry in kept)
    return left


def _by_section(kept: list[Entry]) -> dict[str, list[Entry]]:
    sections: dict[str, list[Entry]] = {name: [] for name in SECTIONS}
    for entry in kept:
        sections[entry.section].append(entry)
    for found in sections.values():
        found.sort(key=lambda e: e.order)
    return sections


def _data(
    header: dict[str, Any], kept: list[Entry], left: dict[str, int], budget: int
) -> dict[str, Any]:
    sections = _by_section(kept)
    data: dict[str, Any] = {"context": {k: v for k, v in header.items() if v is not None}}
    data["budget_tokens"] = budget
    for name, found in sections.items():
        if name == "best":
            data[name] = found[0].data if found else None
        else:
            data[name] = [entry.data for entry in found]
    data["left_out"] = {name: n for name, n in left.items() if n}
    return data


def _render(
    header: dict[str, Any], kept: list[Entry], left: dict[str, int], budget: int, output: str
) -> str:
    if output == "json":
        return json.dumps(_data(header, kept, left, budget), ensure_ascii=False, indent=1) + "\n"
    return _markdown(header, kept, left, budget)


_NAMES = {
    "tried_before": "tried-before entries",
    "best": "best",
    "suspect_best": "suspect higher results",
    "lineage": "lineage steps",
    "failures": "related failures",
    "marginal": "within-noise entries",
    "successes": "related successes",
    "do_not_repeat": "do-not-repeat entries",
    "not_tried": "not-tried entries",
    "operators": "operators",
    "details": "insight lines",
}


#: What the best section says when every step that improved is suspect.
_NO_BELIEVABLE_BEST = (
    "(no believable best here yet: every step that improved is suspect, below; a suspect "
    "measurement is no best until checked)"
)


def _failures(count: int) -> str:
    """The header's count of failures (buggy, failed, regression, interference): not
    "failed", which names one of those outcomes."""
    return f"{count} failure{'' if count == 1 else 's'}"


def _controls(count: int) -> str:
    """The header's mention of the operator's controls (A/A runs), which it never counts
    as experiments: none, or `` (and 1 A/A control, not counted)``."""
    if not count:
        return ""
    return f" (and {count} A/A control{'' if count == 1 else 's'}, not counted)"


def _asked(header: dict[str, Any]) -> str:
    """Which of the operator's experiments the header's counts are of ("for this dtype
    and env"): never "here", which read across refs would seem to mean this clone."""
    given = " and ".join(name for name in ("dtype", "env") if header[name])
    return f"for this {given}" if given else "for any dtype and env"


def _markdown(header: dict[str, Any], kept: list[Entry], left: dict[str, int], budget: int) -> str:
    where = " × ".join(
        [header["operator"], header["dtype"] or "any dtype", header["env"] or "any env"]
    )
    lines = [f"# kexp context: {cut(where)}", ""]
    summary = (
        f"{header['experiments_on_operator']} experiment(s) on this operator"
        + _controls(header.get("controls_on_operator", 0))
        + "; "
        f"{header['experiments_here']} of them {_asked(header)}: "
        f"{header['improved_here']} improved, {header['within_noise_here']} within noise, "
        f"{_failures(header['failures_here'])}"
        + (f", {header['pending_here']} pending." if header["pending_here"] else ".")
    )
    if header.get("no_match"):  # not "0 experiment(s) on this operator": none is it
        summary = header["no_match"]
    if header.get("unread"):  # what fetched branches hold, not read: said first
        summary = f"{header['unread']}\n{summary}"
    if header.get("noise_floor"):
        summary += f"\n{header['noise_floor']['text']}."
    if header.get("envs"):
        summary += f"\n{header['envs']}"
    for note in header.get("several") or ():
        summary += f"\n{note['text']}"
    for note in header.get("unmatched") or ():
        summary += f"\n{note}"
    for note in header.get("read_alone") or ():  # as every read says it
        summary += f"\n{note}."
    for note in header.get("spelt_as_one") or ():
        summary += f"\n{note}."
    if header.get("start"):
        summary += f"\n{header['start']}"
    if header.get("plan"):
        summary += f" Plan: {cut(header['plan'])!r}."
    if header.get("diff_lines") is not None:
        summary += f" Diff: {header['diff_lines']} changed line(s)."
    lines.append(summary)
    lines.append(f"Budget: {budget} tokens (characters / {CHARS_PER_TOKEN}).")
    sections = _by_section(kept)
    for name, heading in SECTIONS.items():
        found = sections[name]
        if not found and not (name == "best" and header["experiments_here"]):
            continue
        lines += ["", f"## {heading}"]
        if name == "best" and not found:
            lines.append(
                f"(left out: {LARGER_BUDGET})"
                if left.get("best")
                else _NO_BELIEVABLE_BEST
                if sections["suspect_best"] or left.get("suspect_best")
                else "(no best here yet: no step improved with a cumulative score; one "
                "within noise, a regression or an interference is never a best, and buggy, "
                "pending and those that measured nothing have no cumulative score)"
            )
        previous: int | None = None
        for entry in found:
            if name == "lineage":
                step = entry.order[0]
                if previous is not None and step > previous + 1:
                    lines.append(f"   … {step - previous - 1} step(s)")
                previous = step
            lines.extend(entry.lines)
    gone = {name: n for name, n in left.items() if n}
    if gone:
        lines += ["", "## Left out (budget)"]
        lines.append("- " + ", ".join(f"{n} {_NAMES[name]}" for name, n in gone.items()))
        lines.append(f"- read more: {READ_MORE}")
    return "\n".join(lines) + "\n"
