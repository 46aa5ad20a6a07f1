"""The sections of the context packet (:mod:`kexp.agents.context`) that sum up many
experiments: the changes not to repeat, grouped; the dtypes, envs and configurations not
tried yet (or never improved); and, when no operator matches, the operators recorded;
the notes on the values a filter read (several, or one spelt several ways).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from kexp.agents.entries import contains_wanted
from kexp.agents.packet import SECTION_LIMITS, Entry, cut
from kexp.core.advice import ASK_ONE_ENV, CORRECT_FIELD, NARROW_FILTER
from kexp.core.outcome import UNMEASURED_OUTCOMES, time_key
from kexp.core.spelling import canonical, folded, usual_spelling
from kexp.storage.operators import closest_operators, distinct, matching, part_of, spelled
from kexp.storage.query import believed_best

if TYPE_CHECKING:
    from kexp.core.campaign import Derivation
    from kexp.storage.retrieval import Search
    from kexp.storage.rows import Row


#: How many known operators a packet names when none matches.
KNOWN_OPERATORS = 5


def _what(summary: str) -> str:
    """What an experiment changed: its summary before `` - `` (the result)."""
    return summary.split(" - ", 1)[0].strip().rstrip(".,;:")


def do_not_repeat(
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
        docs.sort(key=lambda d: time_key(d.created_at), reverse=True)
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


#: What a packet read from the working tree alone says, where fetched branches hold
#: experiment files it did not read (its ``unread`` line), in place of how a campaign
#: starts: nothing recorded in the files read is not nothing recorded.
UNREAD_START = (
    "Nothing recorded here in this checkout's files, but fetched branches hold "
    "experiment files it has not read (see 'not read'): read across refs before "
    "starting a campaign here; they may hold it."
)


def with_unread(header: dict[str, Any], unread: str | None) -> dict[str, Any]:
    """``header`` with the ``unread`` line (what fetched branches hold, not read): where
    there is one, :data:`UNREAD_START` in place of how a campaign starts."""
    start = UNREAD_START if unread and header.get("start") else header.get("start")
    return {**header, "start": start, "unread": unread}


#: The column of a dtype or env, by its name in the packet.
_COLUMN = {"dtype": "dtype_sig", "env": "env"}


def not_tried(
    search: Search,
    on_operator: list[Row],
    outcomes: dict[str, str],
    results: list[tuple[tuple[str, float], ...]],
    dtype: str | None,
    env: str | None,
    settings: Any,
) -> list[Entry]:
    """The dtypes and envs never tried, or never improved, on the operator (those asked
    for first; with ``env`` given, only the envs it matches: another machine's is not
    the asker's to try, nor a part of the operator's env it reads; with ``dtype`` given,
    no dtype only other operators have), and the configurations of ``results`` no
    experiment improved."""
    entries: list[Entry] = []
    rank = 0
    for column, wanted, wanted_other, label, other_label in (
        ("dtype_sig", dtype, env, "dtype", "env"),
        ("env", env, dtype, "env", "dtype"),
    ):
        # Tried on the operator (with the other of dtype and env, when given), and
        # tried on it at all (with any other: what "never tried" must not deny), each
        # value in kexp's spelling (torch.bfloat16 was tried where bf16 was).
        tried: dict[str, list[Row]] = {}
        anywhere: dict[str, list[Row]] = {}
        other_column = _COLUMN[other_label]
        for doc in on_operator:
            value = spelled(column, getattr(doc, column))
            anywhere.setdefault(value, []).append(doc)
            if contains_wanted(getattr(doc, other_column), wanted_other, other_column):
                tried.setdefault(value, []).append(doc)
        listed = _one_spelling(distinct(search.rows, column), column)[:40]
        # The operator's env(s) the filter reads (kexp context's "here"): what the
        # packet's counts are of, so no part of one is "never tried" (MI300X of
        # "MI300X, ROCm 7.0.0"), nor another machine's env (not this agent's to try).
        read = {key for key, _, _ in matching(on_operator, column, wanted)} if wanted else set()
        spelt = {spelled(column, key) for key in read}
        if column == "env" and wanted:
            listed = [
                item
                for item in listed
                if contains_wanted(item[0], wanted, column)
                and (
                    spelled(column, item[0]) in spelt
                    or not any(part_of(column, item[0], key) for key in read)
                )
            ]
        elif wanted:  # another kernel's dtype, never this one's: no campaign to read
            listed = [item for item in listed if spelled(column, item[0]) in anywhere]
        if wanted and not any(contains_wanted(value, wanted, column) for value, _, _ in listed):
            # Asked for, and in no experiment of the store: never tried, said as such.
            listed.insert(0, (wanted.lower(), wanted, 0))
        for value, shown, _ in listed:
            found = tried.get(spelled(column, value), [])
            if any(outcomes[d.path] == "improvement" for d in found):
                continue
            measured = [d.score for d in found if outcomes[d.path] not in UNMEASURED_OUTCOMES]
            elsewhere = [] if found else anywhere.get(spelled(column, value), [])
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


def _one_spelling(values: list[tuple[str, str, int]], column: str) -> list[tuple[str, str, int]]:
    """``values`` (:func:`kexp.storage.operators.distinct`'s) with the first of each
    value in kexp's spelling (:func:`kexp.storage.operators.spelled`) alone."""
    seen: set[str] = set()
    kept = []
    for item in values:
        key = spelled(column, item[0])
        if key not in seen:
            seen.add(key)
            kept.append(item)
    return kept


def _one_campaign(
    values: list[tuple[str, str, int]], column: str, rows: Sequence[Row]
) -> list[tuple[str, str, int]]:
    """``values`` (:func:`kexp.storage.operators.distinct`'s) of one campaign in kexp's
    spelling as one, by it: (its spelling, its name: the spelling most written among
    ``rows``, as every read names it (:func:`usual_spelling`), how many experiments)."""
    groups: dict[str, list[tuple[str, str, int]]] = {}
    for item in values:
        groups.setdefault(canonical(column, item[0]), []).append(item)
    written: dict[str, list[str]] = {}
    for row in rows:
        value = getattr(row, column).strip()
        written.setdefault(canonical(column, value), []).append(value)
    return [
        (
            key,
            usual_spelling(column, written.get(key, ())) or max(found, key=lambda item: item[2])[1],
            sum(item[2] for item in found),
        )
        for key, found in sorted(groups.items())
    ]


#: How many ids of experiments spelt otherwise a note names.
NAMED_IDS = 3


def spelt_as_one(
    filters: dict[str, list[tuple[str, str, int]]],
    rows: Sequence[Row],
    short: Callable[[str], str],
) -> list[str]:
    """For each filter (its column: the values it read, as
    :func:`kexp.storage.operators.matching` gives them) that read two spellings of one
    value as one (``bf16`` and ``bfloat16``: one campaign, as every read keys it): a line
    naming them, and how to write them one way on those of ``rows`` spelt otherwise."""
    notes = []
    for column, found in filters.items():
        groups: dict[str, list[tuple[str, str, int]]] = {}
        for item in found:
            groups.setdefault(spelled(column, item[0]), []).append(item)
        for mine, spellings in groups.items():
            if len(spellings) < 2:
                continue
            # The name every read shows it by (stats, tree, the report) is the one to keep.
            of_mine = [row for row in rows if spelled(column, getattr(row, column)) == mine]
            kept = usual_spelling(column, (getattr(row, column).strip() for row in of_mine))
            kept_key = folded(column, kept)
            ids = sorted(
                {r.id for r in of_mine if folded(column, getattr(r, column).strip()) != kept_key}
            )
            if not ids:
                continue
            name = {"operator_sig": "operator", "dtype_sig": "dtype"}.get(column, column)
            named = ", ".join(repr(s) for k, s, _ in spellings if folded(column, k) != kept_key)
            listed = ", ".join(short(exp_id) for exp_id in ids[:NAMED_IDS])
            more = f" and {len(ids) - NAMED_IDS} more" if len(ids) > NAMED_IDS else ""
            notes.append(
                f"{name} {kept!r} read as one with {named} (one {name} in kexp's "
                "spelling: one campaign in every read); to write it one way (as grep and "
                f"the files read it), write VALUE {kept!r} on the {len(ids)} spelt "
                f"otherwise ({listed}{more}): "
                f"{CORRECT_FIELD.say(id=short(ids[0]), field=column)}"
            )
    return notes


def several_envs(rows: Sequence[Row], env: str | None) -> str | None:
    """What a packet asked for with no ``env`` says of an operator measured (``rows``)
    on several: its best and its A/A are each one env's, and how to ask for one."""
    spellings: dict[str, list[str]] = {}  # one machine spelt otherwise is one env
    for row in rows:
        spellings.setdefault(canonical("env", row.env), []).append(row.env.strip())
    if env or len(spellings) < 2:
        return None
    envs = sorted(usual_spelling("env", found) for found in spellings.values())
    named = "; ".join(repr(e) for e in envs[:4]) + ("; ..." if len(envs) > 4 else "")
    return (
        f"Measured on {len(envs)} envs ({named}): each is a campaign of its own, "
        f"the current best below is one env's; {ASK_ONE_ENV}."
    )


#: The field each filter of :func:`several_matched` is a part of.
_FIELDS = {"operator": "operator_sig", "dtype": "dtype_sig", "env": "env"}
#: How many of the values a filter matched a note names, each with its best.
NAMED_VALUES = 4


def several_matched(
    filters: dict[str, tuple[str | None, list[tuple[str, str, int]]]],
    measured: Sequence[Row],
    derivation: Derivation,
    settings: Any,
    short: Callable[[str], str],
    rows: Sequence[Row] = (),
) -> list[dict[str, Any]]:
    """For each filter (name: (value asked, the values it matched,
    :func:`kexp.storage.operators.matching`)) that matched several: a note naming them
    (each by its spelling most written among ``rows``, as :func:`spelt_as_one` names
    it), each with its own best among ``measured`` (as the packet's current best is
    chosen): each is a campaign of its own, and the packet's best is the best of them
    all."""
    notes = []
    for name, (value, found) in filters.items():
        column = _FIELDS[name]
        if not value or len({spelled(column, key) for key, _, _ in found}) < 2:
            continue  # one value (its spellings too: bf16 and bfloat16 are one dtype)
        said: list[str] = []
        matched: list[dict[str, Any]] = []
        for key, shown, count in _one_campaign(found, column, rows):
            best, _ = believed_best(
                [d for d in measured if canonical(column, getattr(d, column)) == key],
                derivation=derivation,
                settings=settings,
            )
            score = None if best is None else derivation.of(best).cumulative_score
            matched.append(
                {
                    "value": shown,
                    "experiments": count,
                    "best": None if best is None else best.id,
                    "best_cumulative_score": score,
                }
            )
            if len(said) < NAMED_VALUES:
                mine = (
                    "no best"
                    if best is None or score is None
                    else f"best {score:.4f}x {short(best.id)}"
                )
                said.append(f"{cut(shown)!r} ({mine})")
        values = len(matched)
        more = f" and {values - NAMED_VALUES} more" if values > NAMED_VALUES else ""
        text = (
            f"{value!r} matches {values} {name}s: {'; '.join(said)}{more}. Each is a "
            f"campaign of its own: the current best below is the best of them all, and "
            f"each line names its {name}; {NARROW_FILTER}."
        )
        notes.append({"filter": name, "value": value, "matched": matched, "text": text})
    return notes


def known_operators(rows: Sequence[Row], operator: str) -> list[Entry]:
    """The operators recorded (their most common spelling), the closest to ``operator``
    first (:func:`kexp.storage.operators.closest_operators`)."""
    ranked = closest_operators(rows, operator)
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
