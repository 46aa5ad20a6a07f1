"""What an agent reads before its next iteration, in one call: ``kexp context``.

:func:`context` gives one packet, Markdown or JSON, for an operator (and optionally a
dtype and an env, each a case-insensitive substring as in queries) and, optionally, the
plan of the next iteration (``text``) or its diff. Sections, in this order:

1. **Tried before**: with a diff, the experiments whose code change is the same or a
   near-duplicate (:func:`kexp.storage.repeats.tried_before`'s measure), with their outcome.
2. **Current best** for operator × dtype × env: the best *tip*, as ``kexp top`` ranks
   it (the best cumulative score, the speedup over the operator's reference; buggy,
   pending and controls left out) whose measurement is believable, as ``kexp review``
   names a new best (:func:`kexp.storage.query.believable_best`); the suspect tips
   above it beside it (**higher, but suspect**: verify before building on them); and
   **the path to it**: from the root, each step with its score and the cumulative score
   it reaches: the code to build on. Every experiment entry whose measurement is suspect
   is marked as ``kexp top`` marks it, its reasons in JSON ``suspect``.
3. **Related failures** (buggy, regression, interference), **within noise** (marginal:
   remeasure or move on; a dead end, as ``kexp tree`` marks it, is in "do not repeat")
   and **related successes** on the operator: most related to the
   plan first (:mod:`kexp.storage.retrieval`), else those of the same dtype and env first, then
   the newest failures and the best successes; each with its summary, score (and
   interval), outcome and key insight.
4. **Do not repeat**: the other changes already tried on operator × dtype × env (an
   experiment listed above is not listed again), grouped by what was changed (the
   summary before `` - ``), with how often and how each ended.
5. **Not tried yet**: the dtypes and envs of the store (and the dtype and env asked
   for) never tried or never improved on this operator, with the dtype or env asked for
   when given (an env tried only with other dtypes is said so, with how often), and the
   configurations (of ``results``) no experiment improved.
6. **Left out**: how many entries of each section did not fit (and insight lines cut),
   and where to read them.

When no recorded operator matches ``operator`` (a typo, the kernel named in other words)
in a store that holds experiments, the packet says so and names **the operators
recorded**, the closest first, instead of sections 2 to 5.

Controls (tag ``control``, A/A runs) are listed nowhere: the newest one here is the
measured noise floor, on the packet's first lines ("A/A on this env: 1.039 [0.839,
1.287]").

The packet never exceeds its budget of tokens, counted as the characters of the
rendered text divided by :data:`CHARS_PER_TOKEN`, rounded up (a common rule of thumb
for English and code; an exact count depends on the model's tokenizer). Entries are
kept in order of importance (the tried-before list, the best, the suspect tips above
it, its parent and the lineage's root, the three most related failures and successes,
...) while the whole, with its "left out" note, fits; an entry too long whole is kept
on its first line, and one that does not fit even so ends its section (each keeps the
head of its ranking).
The same files and arguments give the same bytes: every order has a tie-break, nothing
depends on the clock or on the cache's history.
"""

from __future__ import annotations

import dataclasses
import itertools
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from kexp.agents.packet import (
    CHARS_PER_TOKEN,
    MAX_TEXT_CHARS,
    SECTIONS,
    Entry,
    Packet,
    count_tokens,
    cut,
    fit,
)
from kexp.core.campaign import Derivation
from kexp.core.cumulative import Derived
from kexp.core.errors import KexpError
from kexp.core.outcome import (
    NOTHING_MEASURED,
    UNMEASURED_OUTCOMES,
    describe_control,
    latest_control,
)
from kexp.format.suspect import SUSPECT_LABEL, suspect_reasons
from kexp.storage.doctext import score_interval
from kexp.storage.lineage import dead_end
from kexp.storage.query import believed_best, chronological
from kexp.storage.repeats import repeats_in
from kexp.storage.retrieval import Search, asked, searching
from kexp.storage.rows import LOCAL

if TYPE_CHECKING:
    from kexp.storage.dedupe import Repeat
    from kexp.storage.rows import Row, Sighting
    from kexp.storage.sources import Found
    from kexp.storage.store import Store

#: The default budget, in tokens.
DEFAULT_BUDGET = 4000
#: Output formats of :func:`context`.
FORMATS = ("markdown", "json")
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
#: What a packet says where nothing is recorded yet: how a campaign starts.
START = (
    "Nothing recorded here yet. Start with an A/A run (the same code as baseline and "
    "candidate, tagged control: this machine's noise), then your first change measured "
    "against the original code (measured_against: reference); measure each later change "
    "against the code it was made on (its parent: pid)."
)
#: What a packet says where no recorded operator matches the one asked for.
NO_MATCH = (
    "No recorded operator matches {operator!r} (a part of operator_sig, in any case): the "
    "{n} experiment(s) recorded are on {m} operator(s), the closest below; give one of "
    "them, or a part of it, as the operator."
)
#: How many known operators a packet names when none matches.
KNOWN_OPERATORS = 5
_FAILURES = frozenset({"buggy", "failed", "regression", "interference"})
#: :func:`context` and its settings, and (from :mod:`kexp.agents.packet`) the budget's
#: rule and the sections.
__all__ = [
    "CHARS_PER_TOKEN",
    "DEFAULT_BUDGET",
    "FORMATS",
    "MAX_TEXT_CHARS",
    "NO_MATCH",
    "SECTIONS",
    "START",
    "Entry",
    "Packet",
    "context",
    "count_tokens",
]


def context(
    store: Store,
    *,
    operator: str,
    dtype: str | None = None,
    env: str | None = None,
    text: str | None = None,
    diff: str | None = None,
    budget: int = DEFAULT_BUDGET,
    output: str = "markdown",
) -> Packet:
    """The context packet for the next iteration on ``operator`` (see the module
    documentation): deterministic, at most ``budget`` tokens, Markdown or JSON."""
    if output not in FORMATS:
        raise KexpError(f"unknown format {output!r}; formats are: {', '.join(FORMATS)}")
    if not operator or not operator.strip():
        raise KexpError("give the operator (a substring of operator_sig, as for kexp top)")
    if budget <= 0:
        raise KexpError(f"the budget must be a positive number of tokens, not {budget}")

    def gather(found: Found) -> tuple[dict[str, Any], list[tuple[Any, ...]]]:
        with searching(store, found=found) as search:
            header, entries = _gather(search, store, operator, dtype, env, text or "", diff or "")
        return header, [dataclasses.astuple(entry) for entry in entries]

    # Kept for files nobody changed since (the read's one fast path): the packet of the
    # same question is made of it, whatever the budget and format.
    question = ("context", operator, dtype, env, text or "", diff or "")
    header, kept = asked(store, lambda: store.answered(question, gather))
    return fit(header, [Entry(*entry) for entry in kept], budget, output)


# --- gathering ---------------------------------------------------------------------------


def _gather(
    search: Search,
    store: Store,
    operator: str,
    dtype: str | None,
    env: str | None,
    plan: str,
    diff: str,
) -> tuple[dict[str, Any], list[Entry]]:
    settings = store.settings
    # The operator's experiments, as every query reads them.
    wanted = operator.lower()
    everything_here = chronological(
        row for row in search.rows if wanted in row.operator_sig.lower()
    )
    by_id = search.first_rows()
    # What is derived of them and of their ancestors (outcome, cumulative score,
    # control), as every query derives it over the whole store: a cumulative score
    # depends on ancestors on any operator.
    ancestors = _ancestors(everything_here, by_id)
    derivation = search.derived([*everything_here, *ancestors])
    controls = [d for d in everything_here if derivation.of(d).control]
    on_operator = [d for d in everything_here if not derivation.of(d).control]
    here = [d for d in on_operator if _holds(d.dtype_sig, dtype) and _holds(d.env, env)]
    here_paths = {d.path for d in here}
    outcomes = {d.path: derivation.of(d).outcome for d in on_operator}
    entries: list[Entry] = []

    repeats = repeats_in(search, store, diff) if diff else []
    # Ids as short as every id read allows (each names one experiment).
    length = store.shown_id_length(
        [*(row.id for row in itertools.chain(everything_here, ancestors)), *(r.id for r in repeats)]
    )

    def short(exp_id: str) -> str:
        return exp_id[:length]

    across = store.source.places is not None  # read with refs: each entry says where
    for rank, repeat in enumerate(repeats[: SECTION_LIMITS["tried_before"]]):
        entries.append(_repeat_entry(repeat, rank, short, across=across))

    measured = [d for d in here if outcomes[d.path] not in UNMEASURED_OUTCOMES]
    # kexp top's first whose measurement is believable (None: none improved, or every
    # one that did is suspect), and the suspect tips above it: named beside it, as kexp
    # review names them, never built on before they are checked.
    best, above = believed_best(measured, derivation=derivation, settings=settings)
    suspects = {d.path: suspect_reasons(d, settings, derivation.of(d)) for d in on_operator}
    above = above[: SECTION_LIMITS["suspect_best"]]
    search.read_lessons(d for d, _ in above)
    for rank, (row, _) in enumerate(above):
        entries.append(
            _experiment_entry(
                "suspect_best",
                row,
                search.lesson(row)[0],
                outcomes[row.path],
                (2, 2 + rank),
                (rank,),
                dtype,
                env,
                derivation.of(row),
                short,
                suspect=suspects[row.path],
            )
        )
    on_lineage: set[str] = {d.path for d, _ in above}
    if best is not None:
        entries.append(
            _experiment_entry(
                "best",
                best,
                search.lesson(best)[0],
                outcomes[best.path],
                (2, 0),
                (0,),
                dtype,
                env,
                derivation.of(best),
                short,
            )
        )
        chain = _lineage(by_id, best)
        on_lineage |= {d.path for d in chain}
        entries += _lineage_entries(chain, derivation, short, settings)

    relevance = _relevance(search, plan, diff, operator) if (plan or diff) else {}
    others = [d for d in on_operator if d.path not in on_lineage]
    failures = [d for d in others if outcomes[d.path] in _FAILURES]
    # Within noise, worth a remeasure: not a dead end (built on, nothing built on it did
    # better, as kexp tree marks it), which is already tried ("do not repeat").
    dead = _dead_ends(
        [d for d in others if outcomes[d.path] == "marginal"], everything_here, derivation
    )
    marginal = [d for d in others if outcomes[d.path] == "marginal" and d.path not in dead]
    successes = [d for d in others if outcomes[d.path] == "improvement"]

    def closeness(doc: Row) -> tuple[float, bool]:
        return (-relevance.get(doc.path, 0.0), doc.path not in here_paths)

    # Stable sorts, the least significant key first.
    failures.sort(key=lambda d: (d.id, d.path))
    failures.sort(key=lambda d: _moment(d.created_at), reverse=True)  # newest first
    failures.sort(key=closeness)
    marginal.sort(key=lambda d: (d.id, d.path))
    marginal.sort(key=lambda d: _moment(d.created_at), reverse=True)  # newest first
    marginal.sort(key=closeness)
    # What a success's line leads with: its speedup over the reference, else its step.
    successes.sort(key=lambda d: (-(derivation.of(d).cumulative_score or d.score), d.id, d.path))
    successes.sort(key=closeness)
    chosen = {
        name: found[: SECTION_LIMITS[name]]
        for name, found in (
            ("failures", failures),
            ("marginal", marginal),
            ("successes", successes),
        )
    }
    search.read_lessons(d for found in chosen.values() for d in found)
    for name, found in chosen.items():
        for rank, row in enumerate(found):
            tier = (6 if rank < 3 else 9) if name == "marginal" else (4 if rank < 3 else 8)
            insight, error = search.lesson(row)
            entries.append(
                _experiment_entry(
                    name,
                    row,
                    insight,
                    outcomes[row.path],
                    (tier, rank),
                    (rank,),
                    dtype,
                    env,
                    derivation.of(row),
                    short,
                    error=error if name == "failures" else "",
                    suspect=suspects[row.path],
                )
            )

    # Each experiment once: what is listed above is not repeated in "do not repeat".
    listed = on_lineage | {d.path for found in chosen.values() for d in found}
    entries += _do_not_repeat(
        [d for d in here if d.path not in listed], outcomes, relevance, short, dead
    )
    configs = [d for d in here if outcomes[d.path] not in UNMEASURED_OUTCOMES]
    results = [_speedups(d) for d in configs]
    # No recorded operator matches (a typo, another name): which there are, closest
    # first; nothing of its dtypes and envs, which were not looked for.
    no_match = not everything_here and bool(search.rows)
    if no_match:
        entries += _known_operators(search.rows, operator)
    else:
        entries += _not_tried(search, on_operator, outcomes, results, dtype, env, settings)

    controls_here = [d for d in controls if _holds(d.dtype_sig, dtype) and _holds(d.env, env)]
    floor = latest_control(controls_here)
    header = {
        "operator": operator,
        "dtype": dtype,
        "env": env,
        "plan": plan or None,
        "diff_lines": _changed_lines(diff) if diff else None,
        "experiments_on_operator": len(on_operator),
        "experiments_here": len(here),
        "improved_here": sum(1 for d in here if outcomes[d.path] == "improvement"),
        "within_noise_here": sum(1 for d in here if outcomes[d.path] == "marginal"),
        "failures_here": sum(1 for d in here if outcomes[d.path] in _FAILURES),
        "pending_here": sum(1 for d in here if outcomes[d.path] == "pending"),
        "no_match": NO_MATCH.format(
            operator=operator,
            n=len(search.rows),
            m=len({row.operator_sig.lower() for row in search.rows}),
        )
        if no_match
        else None,
        "start": None if here or controls_here or no_match else START,
        "noise_floor": None
        if floor is None
        else {
            "id": floor.id,
            "score": floor.score,
            "score_ci": list(floor.score_ci) or None,
            "text": describe_control(floor),
        },
    }
    return header, entries


def _holds(value: str, wanted: str | None) -> bool:
    return wanted is None or wanted.lower() in value.lower()


def _speedups(row: Row) -> tuple[tuple[str, float], ...]:
    """(config, speedup) of every entry of ``results`` that has both."""
    return tuple(
        (str(r["config"]), float(r["speedup"]))
        for r in row.results
        if isinstance(r, dict)
        and "config" in r
        and isinstance(r.get("speedup"), (int, float))
        and not isinstance(r.get("speedup"), bool)
    )


def _moment(created_at: str) -> str:
    """A key sorting ISO 8601 UTC timestamps in time order (fractions padded)."""
    stamp = created_at.rstrip("Z")
    whole, _, fraction = stamp.partition(".")
    return f"{whole}.{fraction.ljust(9, '0')}"


def _ancestors(rows: Iterable[Row], by_id: Mapping[str, Row]) -> list[Row]:
    """The ancestors of ``rows`` by ``pid``, as :func:`_lineage` walks them (the first
    row of each id: one of ``rows`` may not be it), each once; a cycle or a parent not
    in the store ends a line."""
    seen: set[str] = set()
    found: list[Row] = []
    for row in rows:
        pid = row.pid
        while pid and pid not in seen and (parent := by_id.get(pid)) is not None:
            seen.add(pid)
            found.append(parent)
            pid = parent.pid
    return found


def _dead_ends(rows: list[Row], family: list[Row], derivation: Derivation) -> set[str]:
    """The paths of ``rows`` that are dead ends (:func:`kexp.storage.lineage.dead_end`)
    among their descendants in ``family`` (the operator's experiments)."""
    kids: dict[str, list[Row]] = {}
    if rows:
        for row in family:
            if row.pid:
                kids.setdefault(row.pid, []).append(row)
    found = set()
    for row in rows:
        below: list[Row] = []
        queue, seen = [row.id], {row.id}
        while queue:
            for child in kids.get(queue.pop(), []):
                if child.id not in seen:
                    seen.add(child.id)
                    below.append(child)
                    queue.append(child.id)
        if dead_end(derivation.of(row), [derivation.of(d) for d in below]):
            found.add(row.path)
    return found


def _lineage(by_id: Mapping[str, Row], best: Row) -> list[Row]:
    """The path from the root to ``best`` (root first; stops at a cycle or a parent
    that is not in the store; ``by_id``: the first row of each id)."""
    chain = [best]
    seen = {best.id}
    current = best
    while current.pid and current.pid not in seen:
        parent = by_id.get(current.pid)
        if parent is None:
            break
        chain.append(parent)
        seen.add(parent.id)
        current = parent
    chain.reverse()
    return chain


def _lineage_entries(
    chain: list[Row], derivation: Derivation, short: Callable[[str], str], settings: Any
) -> list[Entry]:
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
        line += _on_ref(sighting)
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
                    **({"suspect": suspect} if suspect else {}),
                },
            )
        )
    limit = SECTION_LIMITS["lineage"]
    return entries if len(entries) <= limit else [entries[0], *entries[-(limit - 1) :]]


def _relevance(search: Search, plan: str, diff: str, operator: str) -> dict[str, float]:
    found = search.rank(text=plan, code_change=diff, operator=operator, limit=1000)
    return {match.path: match.relevance for match in found}


def _experiment_entry(
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
) -> Entry:
    """One experiment's lines (and data); ``error``: a failure's, shown when no key
    insight says what it taught; ``suspect``: why its measurement is implausible (marked
    as ``kexp top`` marks it, the reasons on the next line)."""
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
    where = []
    if not _holds(doc.dtype_sig, dtype) or dtype is None:
        where.append(doc.dtype_sig)
    if not _holds(doc.env, env) or env is None:
        where.append(doc.env)
    # Read across refs: the refs that removed it, where it was found when not in the
    # working tree (the code to fetch), and for the best, another version that changed
    # too (diverged).
    sighting = doc.sighting()
    where.append(_removed(sighting))
    place = f" ({'; '.join(w for w in where if w)})" if any(where) else ""
    place += _on_ref(sighting)
    said = _scored(score, outcome, derived.shown_score)
    lines = [f"- {short(doc.id)} {said} — {_marked(doc.change_summary, suspect)}{place}"]
    if suspect:
        lines.append(f"  suspect: {cut('; '.join(suspect))}")
    if insight:
        lines.append(f"  insight: {cut(insight)}")
    elif error:
        lines.append(f"  error: {cut(error)}")
    diverged = section == "best" and sighting is not None and sighting.diverged
    if diverged and sighting is not None:
        places = [p if p != "local" else "your working tree" for p in sighting.other_versions]
        shown = ", ".join(places[:2]) + (f" and {len(places) - 2} more" if places[2:] else "")
        lines.append(
            f"  diverged: other versions on {cut(shown)}; one changed there too since "
            "they parted (this is the later commit's)"
        )
    data: dict[str, Any] = {
        "id": doc.id,
        "score": doc.score,
        "outcome": outcome,
        "change_summary": doc.change_summary,
    }
    if interval is not None:
        data["score_ci"] = list(interval)
    data["cumulative_score"] = cumulative
    if derived.cumulative_ci is not None:
        data["cumulative_ci"] = list(derived.cumulative_ci)
    if cumulative is None:  # why, as kexp add --json says it
        data["cumulative_reason"] = derived.cumulative_reason
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
    if diverged and sighting is not None:
        data.update(other_versions=list(sighting.other_versions), diverged=True)
    return Entry(section, priority, order, tuple(lines), data)


def _marked(summary: str, suspect: Sequence[str]) -> str:
    """A summary on an entry's line, flagged ``[suspect: verify correctness]`` as
    ``kexp top`` flags it when its measurement is suspect."""
    return f"[{SUSPECT_LABEL}] {cut(summary)}" if suspect else cut(summary)


def _on_ref(sighting: Sighting | None) -> str:
    """What ends an entry read from a ref, not the working tree: `` on REF`` (the code to
    fetch); nothing for the working tree's."""
    return "" if sighting is None or sighting.local else f" on {cut(sighting.ref)}"


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


def _repeat_entry(
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


def _what(summary: str) -> str:
    """What an experiment changed: its summary before `` - `` (the result)."""
    return summary.split(" - ", 1)[0].strip().rstrip(".,;:")


def _do_not_repeat(
    here: list[Row],
    outcomes: dict[str, str],
    relevance: dict[str, float],
    short: Callable[[str], str],
    dead: set[str],
) -> list[Entry]:
    """The groups of changes tried; ``dead``: the paths of the dead ends among them."""
    groups: dict[str, list[Row]] = {}
    for doc in here:
        if outcomes[doc.path] == "pending":
            continue
        groups.setdefault(" ".join(_what(doc.change_summary).lower().split()), []).append(doc)
    ranked = []
    for key, docs in groups.items():
        improved = any(outcomes[d.path] == "improvement" for d in docs)
        closest = max((relevance.get(d.path, 0.0) for d in docs), default=0.0)
        ranked.append((-closest, improved, -len(docs), key, docs))
    ranked.sort(key=lambda item: item[:4])
    entries = []
    for rank, (_, _, _, _, docs) in enumerate(ranked[: SECTION_LIMITS["do_not_repeat"]]):
        docs = sorted(docs, key=lambda d: (d.id, d.path))
        docs.sort(key=lambda d: _moment(d.created_at), reverse=True)
        counts: dict[str, int] = {}
        for doc in docs:
            counts[outcomes[doc.path]] = counts.get(outcomes[doc.path], 0) + 1
        tally = ", ".join(
            f"{name} ×{n}" for name, n in sorted(counts.items(), key=lambda i: (-i[1], i[0]))
        )
        measured = [d.score for d in docs if outcomes[d.path] not in UNMEASURED_OUTCOMES]
        best = f"best {max(measured):.4f}x; " if measured else ""
        ids = ", ".join(short(d.id) for d in docs[:2]) + (", …" if len(docs) > 2 else "")
        what = _what(docs[0].change_summary)
        ends = [d.id for d in docs if d.path in dead]
        if ends:
            tally += f", {'a dead end' if len(ends) == 1 else f'{len(ends)} dead ends'}"
        line = f"- {cut(what)} — {tally} ({best}{ids})"
        data = {
            "change": what,
            "tried": len(docs),
            "outcomes": dict(sorted(counts.items())),
            "best_score": max(measured) if measured else None,
            "ids": [d.id for d in docs],
        }
        if ends:  # built on, and nothing built on them did better
            data["dead_ends"] = ends
        entries.append(Entry("do_not_repeat", (5 if rank < 5 else 9, rank), (rank,), (line,), data))
    return entries


#: The column of a dtype or env, by its name in the packet.
_COLUMN = {"dtype": "dtype_sig", "env": "env"}


def _not_tried(
    search: Search,
    on_operator: list[Row],
    outcomes: dict[str, str],
    results: list[tuple[tuple[str, float], ...]],
    dtype: str | None,
    env: str | None,
    settings: Any,
) -> list[Entry]:
    entries: list[Entry] = []
    rank = 0
    for column, wanted, wanted_other, label, other_label in (
        ("dtype_sig", dtype, env, "dtype", "env"),
        ("env", env, dtype, "env", "dtype"),
    ):
        # Tried on the operator (with the other of dtype and env, when given), and
        # tried on it at all (with any other: what "never tried" must not deny).
        tried: dict[str, list[Row]] = {}
        anywhere: dict[str, list[Row]] = {}
        other = None if wanted_other is None else wanted_other.lower()
        for doc in on_operator:
            if column == "dtype_sig":
                value, against = doc.dtype_sig, doc.env
            else:
                value, against = doc.env, doc.dtype_sig
            anywhere.setdefault(value.lower(), []).append(doc)
            if other is None or other in against.lower():
                tried.setdefault(value.lower(), []).append(doc)
        listed = _distinct(search.rows, column)[:40]
        if wanted and not any(_holds(value, wanted) for value, _, _ in listed):
            # Asked for, and in no experiment of the store: never tried, said as such.
            listed.insert(0, (wanted.lower(), wanted, 0))
        for value, shown, _ in listed:
            found = tried.get(value, [])
            if any(outcomes[d.path] == "improvement" for d in found):
                continue
            measured = [d.score for d in found if outcomes[d.path] not in UNMEASURED_OUTCOMES]
            elsewhere = [] if found else anywhere.get(value, [])
            data: dict[str, Any] = {}
            if found:
                best = f"best {max(measured):.4f}x" if measured else "nothing measured"
                status = f"tried {len(found)}×, no improvement ({best})"
            elif elsewhere:
                others = sorted({getattr(d, _COLUMN[other_label]) for d in elsewhere})
                improved = sum(outcomes[d.path] == "improvement" for d in elsewhere)
                status = (
                    f"never tried with {other_label} {cut(str(wanted_other))}; tried "
                    f"{len(elsewhere)}× with {other_label} {cut(', '.join(others))} "
                    f"({improved} improved)"
                )
                tally = {"tried": len(elsewhere), "improved": improved, other_label: others}
                data = {"tried_with_other": tally}
            else:
                status = "never tried"
            entries.append(
                Entry(
                    "not_tried",
                    (6 if rank < 6 else 9, rank),
                    (0 if label == "dtype" else 1, len(found) > 0, value),
                    (f"- {label} {cut(shown)}: {status}",),
                    {
                        "kind": label,
                        "value": shown,
                        "tried": len(found),
                        "best_score": max(measured) if measured else None,
                        **data,
                    },
                )
            )
            rank += 1
    configs: dict[str, list[float]] = {}
    for pairs in results:
        for config, speedup in pairs:
            configs.setdefault(config, []).append(speedup)
    for config in sorted(configs):
        speedups = configs[config]
        if max(speedups) > settings.improvement_above:
            continue
        entries.append(
            Entry(
                "not_tried",
                (6 if rank < 6 else 9, rank),
                (2, False, config),
                (
                    f"- configuration {config}: never improved "
                    f"(best {max(speedups):.4f}x over {len(speedups)} "
                    f"measurement{'' if len(speedups) == 1 else 's'})",
                ),
                {
                    "kind": "configuration",
                    "value": config,
                    "tried": len(speedups),
                    "best_score": max(speedups),
                },
            )
        )
        rank += 1
    return entries[: SECTION_LIMITS["not_tried"]]


def _known_operators(rows: Sequence[Row], operator: str) -> list[Entry]:
    """The operators recorded (their most common spelling), the closest to ``operator``
    first: the most of its words (by length) found in them, then the most trigrams
    shared, then the most experiments, then by name."""
    words = re.findall(r"[a-z0-9]+", operator.lower())
    wanted = _trigrams(operator)

    def closeness(known: tuple[str, str, int]) -> tuple[int, float, int, str]:
        key, _, count = known
        theirs = _trigrams(key)
        shared = len(wanted & theirs) / len(wanted | theirs) if wanted | theirs else 0.0
        return (-sum(len(w) for w in words if w in key), -round(shared, 9), -count, key)

    ranked = sorted(_distinct(rows, "operator_sig"), key=closeness)
    return [
        Entry(
            "operators",
            (1 if rank < 3 else 9, rank),
            (rank,),
            (f"- {cut(shown)} — {count} experiment(s)",),
            {"operator_sig": shown, "experiments": count},
        )
        for rank, (_, shown, count) in enumerate(ranked[:KNOWN_OPERATORS])
    ]


def _trigrams(text: str) -> set[str]:
    """The runs of three letters or digits of ``text``, lowercased, words joined by a space."""
    joined = " ".join(re.findall(r"[a-z0-9]+", text.lower()))
    return {joined[at : at + 3] for at in range(len(joined) - 2)}


def _distinct(rows: Sequence[Row], column: str) -> list[tuple[str, str, int]]:
    """(lowercased value, its most common spelling, how many experiments) of
    ``dtype_sig`` or ``env`` over the whole store, most common first."""
    counts: dict[str, int] = {}
    for row in rows:
        spelling = getattr(row, column)
        counts[spelling] = counts.get(spelling, 0) + 1
    totals: dict[str, int] = {}
    spellings: dict[str, tuple[int, str]] = {}
    for spelling, count in counts.items():
        key = spelling.lower()
        totals[key] = totals.get(key, 0) + count
        best = spellings.get(key)
        if best is None or (-count, spelling) < (-best[0], best[1]):
            spellings[key] = (count, spelling)
    return sorted(
        ((key, spellings[key][1], total) for key, total in totals.items() if total),
        key=lambda item: (-item[2], item[0]),
    )


def _changed_lines(diff: str) -> int:
    return sum(
        1
        for line in diff.splitlines()
        if line[:1] in ("+", "-") and not line.startswith(("+++ ", "--- "))
    )
