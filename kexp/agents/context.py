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
   is marked as ``kexp top`` marks it, its reasons in JSON ``suspect``. A best whose
   cumulative score multiplies steps measured on two machines (an ``env`` not its
   parent's: ``kexp validate``'s ``env-differs-from-parent``) says which step crossed,
   and what to do, on its second line (JSON ``crossed_machines``).
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

A filter that is a part of several recorded values reads the one it names exactly
(:func:`kexp.storage.operators.matching`), and says so in the words every read warns
with (:func:`kexp.storage.operators.read_alone`; JSON ``read_alone``); where several are
left, the packet names each with its own best (JSON ``several``) and every entry names
its own.

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

This module gathers the packet; one experiment's entry is :mod:`kexp.agents.entries`, the
sections over many (do not repeat, not tried, the operators recorded)
:mod:`kexp.agents.sections`, the budget and the rendering :mod:`kexp.agents.packet`.
"""

from __future__ import annotations

import dataclasses
import itertools
from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, Any

from kexp.agents.entries import (
    crossed_line,
    crossed_machines,
    experiment_entry,
    lineage_entries,
    ported_line,
    repeat_entry,
)
from kexp.agents.packet import (
    CHARS_PER_TOKEN,
    MAX_TEXT_CHARS,
    SECTION_LIMITS,
    SECTIONS,
    Entry,
    Packet,
    count_tokens,
    fit,
)
from kexp.agents.sections import (
    do_not_repeat,
    known_operators,
    not_tried,
    several_envs,
    several_matched,
    spelt_as_one,
    with_unread,
)
from kexp.core.errors import KexpError
from kexp.core.outcome import (
    UNMEASURED_OUTCOMES,
    describe_control,
    floor_control,
    time_key,
)
from kexp.format.suspect import suspect_reasons
from kexp.storage.lineage import dead_end_ids
from kexp.storage.operators import (
    COLUMNS,
    folded,
    matched_as,
    matching,
    named_closest,
    part_of,
    read_alone,
)
from kexp.storage.query import believed_best, chronological
from kexp.storage.repeats import repeats_in
from kexp.storage.retrieval import Search, asked, searching
from kexp.storage.unread import unread_fetched

if TYPE_CHECKING:
    from kexp.storage.rows import Row
    from kexp.storage.sources import Found
    from kexp.storage.store import Store

#: The default budget, in tokens.
DEFAULT_BUDGET = 4000
#: Output formats of :func:`context`.
FORMATS = ("markdown", "json")
#: What a packet says where nothing is recorded yet: how a campaign starts.
_HOW_TO_START = (
    "an A/A run (the same code as baseline and candidate, tagged control: this machine's "
    "noise), then your first change measured against the original code (measured_against: "
    "reference); measure each later change against the code it was made on (its parent: "
    "pid)."
)
START = f"Nothing recorded here yet. Start with {_HOW_TO_START}"
#: How a campaign starts, said where the dtype or env asked for is recorded nowhere on
#: the operator (:data:`UNMATCHED`): perhaps a new one, perhaps spelt otherwise.
START_NEW = "If this {asked} is new here, start its campaign with " + _HOW_TO_START
#: What a packet says where no recorded operator matches the one asked for.
NO_MATCH = (
    "No recorded operator matches {operator!r} (a part of operator_sig, in any case): the "
    "{n} experiment(s) recorded are on {m} operator(s), the closest below; give one of "
    "them, or a part of it, as the operator."
)
#: What a packet says where the dtype or env asked for matches none of the operator's
#: experiments (an env spelt otherwise than recorded: ``CPU`` for ``AMD EPYC ...``), in
#: place of :data:`START`, which would call the operator's campaign not begun.
UNMATCHED = (
    "No experiment on this operator has {a} {name} matching {value!r} ({how}): its "
    "{count} {name}(s), the closest first: {named}. Give one of them, or {part}, as the "
    "{name}."
)
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
    "START_NEW",
    "UNMATCHED",
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
    # What fetched branches hold that a read of the working tree alone did not see: a
    # line of its own, never kept (it changes with a git fetch, not with the files).
    unread = unread_fetched(store, operator=operator, dtype=dtype or "", env=env or "")
    header = with_unread(header, unread)
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
    # The operator's experiments: those of the one it names exactly, of several it is a
    # part of (else of every one, each line naming its own, the mix said).
    candidates = [row for row in search.rows if part_of("operator_sig", operator, row.operator_sig)]
    operators = matching(candidates, "operator_sig", operator)
    named = {key for key, _, _ in operators}
    everything_here = chronological(
        r for r in candidates if folded("operator_sig", r.operator_sig) in named
    )
    asked = {
        column: matching(everything_here, column, value)
        for column, value in (("dtype_sig", dtype), ("env", env))
        if value
    }
    # A filter read alone, the value recorded exactly, said as every read says it.
    alone = [
        note
        for pool, column, value in (
            (candidates, "operator_sig", operator),
            (everything_here, "dtype_sig", dtype),
            (everything_here, "env", env),
        )
        if value and (note := read_alone(pool, column, value)[1]) is not None
    ]

    def is_here(row: Row) -> bool:
        return all(
            any(folded(column, getattr(row, column)) == key for key, _, _ in found)
            for column, found in asked.items()
        )

    # What each line names of its own: a dtype or env the filter matches several of (or
    # none asked), as of one the filter does not match.
    dtype_shown = _label(dtype, asked.get("dtype_sig"))
    env_shown = _label(env, asked.get("env"))
    by_id = search.first_rows()
    # What is derived of them and of their ancestors (outcome, cumulative score,
    # control), as every query derives it over the whole store: a cumulative score
    # depends on ancestors on any operator.
    ancestors = _ancestors(everything_here, by_id)
    derivation = search.derived([*everything_here, *ancestors])
    controls = [d for d in everything_here if derivation.of(d).control]
    on_operator = [d for d in everything_here if not derivation.of(d).control]
    here = [d for d in on_operator if is_here(d)]
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
        entries.append(repeat_entry(repeat, rank, short, across=across))

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
            experiment_entry(
                "suspect_best",
                row,
                search.lesson(row)[0],
                outcomes[row.path],
                (2, 2 + rank),
                (rank,),
                dtype_shown,
                env_shown,
                derivation.of(row),
                short,
                suspect=suspects[row.path],
                operator_named=len(operators) > 1,
            )
        )
    on_lineage: set[str] = {d.path for d, _ in above}
    if best is not None:
        entry = experiment_entry(
            "best",
            best,
            search.lesson(best)[0],
            outcomes[best.path],
            (2, 0),
            (0,),
            dtype_shown,
            env_shown,
            derivation.of(best),
            short,
            operator_named=len(operators) > 1,
        )
        chain = _lineage(by_id, best)
        # Its cumulative score multiplies steps measured on two machines: said first.
        crossed = crossed_machines(chain, derivation.of(best))
        if crossed is not None:
            entry = dataclasses.replace(
                entry,
                lines=(entry.lines[0], crossed_line(crossed, short), *entry.lines[1:]),
                data={**entry.data, "crossed_machines": crossed},
            )
        entries.append(entry)
        on_lineage |= {d.path for d in chain}
        entries += lineage_entries(chain, derivation, short, settings)

    relevance = _relevance(search, plan, diff, operator) if (plan or diff) else {}
    others = [d for d in on_operator if d.path not in on_lineage]
    failures = [d for d in others if outcomes[d.path] in _FAILURES]
    # Within noise, worth a remeasure, or a success: not a dead end (as kexp tree marks
    # it: built on without doing better, or a branch below its fork point), which is
    # already tried ("do not repeat").
    ends = dead_end_ids(everything_here, derivation)
    dead = {d.path for d in others if d.id in ends}
    marginal = [d for d in others if outcomes[d.path] == "marginal" and d.path not in dead]
    # A success built on a retired step left the ranking with it (its code holds that
    # step's change), but its own change was never tried on what replaced it: one to
    # port, said so, never one "not to repeat".
    successes = [d for d in others if outcomes[d.path] == "improvement" and d.path not in dead]

    def closeness(doc: Row) -> tuple[float, bool]:
        return (-relevance.get(doc.path, 0.0), doc.path not in here_paths)

    # Stable sorts, the least significant key first.
    failures.sort(key=lambda d: (d.id, d.path))
    failures.sort(key=lambda d: time_key(d.created_at), reverse=True)  # newest first
    failures.sort(key=closeness)
    marginal.sort(key=lambda d: (d.id, d.path))
    marginal.sort(key=lambda d: time_key(d.created_at), reverse=True)  # newest first
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
            entry = experiment_entry(
                name,
                row,
                insight,
                outcomes[row.path],
                (tier, rank),
                (rank,),
                dtype_shown,
                env_shown,
                derivation.of(row),
                short,
                error=error if name == "failures" else "",
                suspect=suspects[row.path],
                operator_named=len(operators) > 1,
                retired=search.retired(row) if name == "failures" else "",
            )
            on_retired = derivation.built_on_retired(row) if name == "successes" else ""
            if on_retired:
                entry = dataclasses.replace(
                    entry,
                    lines=(entry.lines[0], ported_line(short(on_retired)), *entry.lines[1:]),
                    data={**entry.data, "built_on_retired": on_retired},
                )
            entries.append(entry)

    # Each experiment once: what is listed above is not repeated in "do not repeat".
    listed = on_lineage | {d.path for found in chosen.values() for d in found}
    entries += do_not_repeat(
        [d for d in here if d.path not in listed], outcomes, relevance, short, dead
    )
    configs = [d for d in here if outcomes[d.path] not in UNMEASURED_OUTCOMES]
    results = [_speedups(d) for d in configs]
    # No recorded operator matches (a typo, another name): which there are, closest
    # first; nothing of its dtypes and envs, which were not looked for.
    no_match = not everything_here and bool(search.rows)
    if no_match:
        entries += known_operators(search.rows, operator)
    else:
        entries += not_tried(search, on_operator, outcomes, results, dtype, env, settings)
    unmatched = _unmatched(everything_here, dtype, env)
    start = START_NEW.format(asked=" and ".join(unmatched)) if unmatched else START

    controls_here = [d for d in controls if is_here(d)]
    floor = floor_control(controls_here, settings.control_drift_window)
    header = {
        "operator": operator,
        "dtype": dtype,
        "env": env,
        "plan": plan or None,
        "diff_lines": _changed_lines(diff) if diff else None,
        "experiments_on_operator": len(on_operator),
        "controls_on_operator": len(controls),
        "experiments_here": len(here),
        "improved_here": sum(1 for d in here if outcomes[d.path] == "improvement"),
        "within_noise_here": sum(1 for d in here if outcomes[d.path] == "marginal"),
        "failures_here": sum(1 for d in here if outcomes[d.path] in _FAILURES),
        "pending_here": sum(1 for d in here if outcomes[d.path] == "pending"),
        "no_match": NO_MATCH.format(
            operator=operator,
            n=len(search.rows),
            m=len({folded("operator_sig", row.operator_sig) for row in search.rows}),
        )
        if no_match
        else None,
        "unmatched": list(unmatched.values()) or None,
        "read_alone": alone or None,
        # Two spellings of one value read as one, which stats and tree count apart.
        "spelt_as_one": spelt_as_one({"operator_sig": operators, **asked}, everything_here, short)
        or None,
        "start": None if here or controls_here or no_match else start,
        "envs": several_envs([*here, *controls_here], env),
        "several": several_matched(
            {
                "operator": (operator, operators),
                "dtype": (dtype, asked.get("dtype_sig", [])),
                "env": (env, asked.get("env", [])),
            },
            measured,
            derivation,
            settings,
            short,
            everything_here,  # named as the spelt-as-one note names them
        )
        or None,
        "noise_floor": None
        if floor is None
        else {
            "id": floor.id,
            "score": floor.score,
            "score_ci": list(floor.score_ci) or None,
            "text": describe_control(floor, "" if env else floor.env),
        },
    }
    return header, entries


def _label(value: str | None, found: list[tuple[str, str, int]] | None) -> str | None:
    """What an entry is given of the dtype or env asked for (``value``; ``found``: the
    values it matched): the one it matched (a line of another names its own), None
    where it matched several (every line names its own), else ``value``."""
    if value is None or not found:
        return value
    return found[0][1] if len(found) == 1 else None


def _unmatched(rows: list[Row], dtype: str | None, env: str | None) -> dict[str, str]:
    """What the packet says of the ``dtype`` and ``env`` asked for that match none of
    ``rows`` (the operator's experiments, controls too; none: the operator is not
    recorded, said otherwise), naming the closest recorded (:data:`UNMATCHED`), by the
    name of each."""
    said = {}
    for name, value in (("dtype", dtype), ("env", env)):
        column = COLUMNS[name]
        if not rows or not value or any(part_of(column, value, getattr(r, column)) for r in rows):
            continue
        count, named = named_closest(rows, name, value)
        a = "an" if name == "env" else "a"
        how, part = matched_as(column, value)
        said[name] = UNMATCHED.format(
            a=a, name=name, value=value, how=how, part=part, count=count, named=named
        )
    return said


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


def _relevance(search: Search, plan: str, diff: str, operator: str) -> dict[str, float]:
    found = search.rank(text=plan, code_change=diff, operator=operator, limit=1000)
    return {match.path: match.relevance for match in found}


def _changed_lines(diff: str) -> int:
    return sum(
        1
        for line in diff.splitlines()
        if line[:1] in ("+", "-") and not line.startswith(("+++ ", "--- "))
    )
