"""A review (:mod:`kexp.review.model`) rendered: as a Markdown comment for the pull
request (:func:`render_markdown`, GitHub-flavoured, with a Mermaid lineage graph) and as
JSON-ready data (:func:`to_json`: the same content).

Every experiment text is escaped (:func:`md_text`, :func:`md_code`, :func:`md_block`):
it cannot alter the comment, link, mention anyone, or end its Mermaid graph.
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from kexp.agents.lessons import LESSON_GROUPS
from kexp.core.advice import (
    CORRECT_FIELD,
    REVIEW_WHOLE,
    REVIEW_WHOLE_AT,
    REVIEW_WHOLE_WORKING_TREE,
    REVIEW_WHOLE_WORKING_TREE_AT,
)
from kexp.core.outcome import NOTHING_MEASURED
from kexp.format.outputs import markdown_table
from kexp.format.samples import describe_interval
from kexp.review.fit import Listing, Part, fit
from kexp.review.graph import render_mermaid
from kexp.review.model import (
    KINDS,
    BestChange,
    ControlDemotion,
    FieldChange,
    LostLesson,
    short_value,
)
from kexp.storage.scorechange import SCORE_WITHOUT_NOTE

if TYPE_CHECKING:
    from kexp.agents.lessons import Lesson
    from kexp.review.graph import LineageGraph
    from kexp.review.model import Review, ReviewedExperiment

__all__ = [
    "COMMENT_MARKER",
    "defuse_links",
    "md_block",
    "md_code",
    "md_text",
    "render_markdown",
    "to_json",
]

#: The HTML comment that starts every review, so a bot can find and update its comment.
COMMENT_MARKER = "<!-- kexp-review -->"


# --- JSON ------------------------------------------------------------------------------


def to_json(result: Review) -> dict[str, Any]:
    """The review as JSON-ready data: the same content as :func:`render_markdown`."""
    return {
        "base": result.base,
        "merge_base": result.merge_base,
        "head": result.head,
        "head_commit": result.head_commit,
        "base_commit": result.base_commit or result.merge_base,
        "summary": {
            "added": len(result.added),
            "corrected": len(result.corrected),
            "removed": len(result.removed),
            "errors": sum(p.severity == "error" for p in result.problems),
            "warnings": sum(p.severity == "warning" for p in result.problems),
            "new_best": [e.id for e in result.new_bests],
            "suspect": [e.id for e in result.suspects],
            "tried_before": [e.id for e in result.tried_before],
            "changed_on_base": [e.id for e in result.changed_on_base],
            "best_changes": [c.to_dict() for c in result.best_changes],
            "demoted_by_control": [d.to_dict() for d in result.demoted_by_control],
            "lessons_lost": [lost.to_dict() for lost in result.lessons_lost],
            "already_on_base": list(result.already_on_base),
            "behind_base": [b.id for b in result.behind_base],
            "moved": len(result.moved),
        },
        "added": [e.to_dict() for e in result.added],
        "corrected": [e.to_dict() for e in result.corrected],
        "removed": [e.to_dict() for e in result.removed],
        "moved": [e.to_dict() for e in result.moved],
        "behind_base": [b.to_dict() for b in result.behind_base],
        "problems": {
            "changed_files": [p.to_dict() for p in result.file_problems],
            "store_wide": [p.to_dict() for p in result.store_problems],
            "preexisting_store_wide": [p.to_dict() for p in result.preexisting_store_problems],
        },
        "lessons": {
            group: [lesson.to_dict() for lesson in items] for group, items in result.lessons.items()
        },
        "lineage": result.lineage.to_dict(),
    }


# --- Markdown: escaping ----------------------------------------------------------------

_HTML = {"&": "&amp;", "<": "&lt;", ">": "&gt;"}
#: Characters with a meaning in (GitHub-flavoured) Markdown inside a line: emphasis,
#: code, links and images, tables, strikethrough, headings, math.
_MARKDOWN_PUNCTUATION = frozenset("\\`*_[]|~#!$")
#: Bidirectional overrides and isolates: they could make text read other than it is.
_BIDI = frozenset("\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069")
_BACKTICKS = re.compile(r"`+")


def _visible(ch: str) -> str:
    """A control or bidirectional-override character as U+FFFD; others as they are."""
    code = ord(ch)
    if code < 0x20 or 0x7F <= code < 0xA0 or ch in _BIDI:
        return "\ufffd"
    return ch


def md_text(value: Any, *, limit: int | None = None) -> str:
    """``value`` as inline Markdown text on one line that renders as exactly that text.

    Line breaks become spaces; ``& < >`` become entities (no HTML passes through);
    Markdown punctuation is backslash-escaped (no emphasis, links, images, code, math,
    or table cells); control characters become U+FFFD; what a forge would turn into a
    live link or a notification (a bare URL, a ``www.`` host, an e-mail address, an
    ``@user`` or ``@org/team`` mention, an issue reference) gets an invisible
    zero-width space that breaks it (see :func:`defuse_links`). Safe in a table cell.
    ``limit`` cuts the text to that many characters, ending in "…".
    """
    out: list[str] = []
    for ch in _one_line(value, limit):
        if ch in _HTML:
            out.append(_HTML[ch])
        elif ch in _MARKDOWN_PUNCTUATION:
            out.append("\\" + ch)
        else:
            out.append(_visible(ch))
    return defuse_links("".join(out))


#: A zero-width space, as an entity: it renders as nothing, yet no autolink, mention
#: or reference survives it (they are recognised on the rendered text).
_BREAK = "&#8203;"
#: What GitHub-flavoured Markdown and the forge link: a URL scheme before "://" (or a
#: scheme used without slashes), "www.", "@" before a name (mentions, e-mail
#: addresses), "#" (escaped) or "GH-" before digits (issue references).
_LIVE = re.compile(
    r"(?i)(?<![a-z0-9+.-])(?:[a-z][a-z0-9+.-]*(?=://)|mailto(?=:)|xmpp(?=:))"
    r"|(?<![a-z0-9_-])www(?=\.)"
    r"|@(?=[a-z0-9_])"
    r"|\\#(?=[0-9])"
    r"|(?<![a-z0-9_])gh(?=-[0-9])"
)


def defuse_links(text: str) -> str:
    """Markdown text (as :func:`md_text` escapes it) in which nothing is linked or
    mentioned by the forge: a zero-width space after each URL scheme, ``www``, ``@``,
    ``#`` or ``GH`` that would start one. The text reads the same."""
    return _LIVE.sub(lambda match: match.group() + _BREAK, text)


def md_code(value: Any, *, in_table: bool = False, limit: int | None = None) -> str:
    """``value`` as an inline code span on one line, whatever backticks it holds.

    The span's fence is one backtick longer than the longest run inside; in a table
    cell ``|`` is escaped as GitHub-flavoured Markdown requires (text with a backslash
    is given as escaped text instead: a table cannot hold it in a code span). Empty
    text is ``—``; ``limit`` as in :func:`md_text`.
    """
    text = "".join(_visible(ch) for ch in _one_line(value, limit))
    if not text:
        return "—"
    if in_table and "\\" in text:
        # GitHub's table rows treat backslash-pipe as an escaped pipe even inside a code
        # span, and a backslash cannot be escaped there: use escaped text instead.
        return md_text(text)
    longest = max((len(run) for run in _BACKTICKS.findall(text)), default=0)
    fence = "`" * (longest + 1)
    pad = " " if text.startswith("`") or text.endswith("`") else ""
    if in_table:
        text = text.replace("|", "\\|")
    return f"{fence}{pad}{text}{pad}{fence}"


def _one_line(value: Any, limit: int | None) -> str:
    text = " ".join(str(value).split())
    if limit is not None and len(text) > limit:
        text = text[: max(0, limit - 1)] + "…"
    return text


def md_block(text: str, language: str = "text") -> str:
    """``text`` as a fenced code block whose fence no line inside can close."""
    body = "\n".join("".join(_visible(ch) for ch in line) for line in text.splitlines())
    longest = max((len(run) for run in _BACKTICKS.findall(body)), default=0)
    fence = "`" * max(3, longest + 1)
    return f"{fence}{language}\n{body}\n{fence}"


# --- Markdown: the comment -------------------------------------------------------------

_TABLE_HEADER = (
    "id",
    "summary",
    "operator",
    "dtype",
    "score",
    "cumulative",
    "Δ vs parent",
    "outcome",
    "rank on operator",
)
#: Longest text in a table cell (an invalid file may hold anything).
_CELL_CHARS = 200
_OUTCOME_ICONS = {
    "improvement": "🟢",
    "marginal": "⚪",
    "regression": "🔴",
    "interference": "🟠",
    "buggy": "🐞",
    "failed": "⛔",
    "pending": "⏳",
    "invalid": "❌",
    "control": "🧪",
}


def render_markdown(
    result: Review, *, max_chars: int | None = None, root: str | None = None
) -> str:
    """The review as a Markdown comment for the pull request (GitHub-flavoured, with a
    Mermaid lineage graph). Text from experiments is escaped throughout.

    What a reviewer must act on comes first: the headline, the validation problems, then
    the experiments (in each section the invalid, suspect, unexplained, new bests and
    failures first), the corrections' details, the lessons and the lineage. With
    ``max_chars`` (a forge's limit on a comment), each long section lists its first
    entries and says in one line how many more there are and the command that shows
    them all (:mod:`kexp.review.fit`); no section is cut in the middle. ``root``: the
    store's folder the review was run with (``--root DIR``), which that command names."""
    everything = _whole_command(result, root)
    headline = _headline(result, everything)
    problems, store = _validation(result, everything)
    parts: list[Part] = [COMMENT_MARKER, "## kexp review", headline, problems, store]
    tables: list[Listing] = []
    details: list[Listing] = []
    for kind, title in zip(KINDS, ("Added", "Corrected", "Removed"), strict=True):
        entries = _first_to_act_on(getattr(result, kind))
        if not entries:
            continue
        what = f"{title.lower()} experiment(s)"
        parts.append(f"### {title} ({len(entries)})")
        table = _listing(_table_rows(entries), _table_of, f"{what} not listed", everything)
        notes = _measurements(entries)
        measured = _listing(notes, _measured_with, "measurement note(s)", everything)
        tables.append(table)
        details.append(measured)
        parts += [table, measured]
        if kind == "corrected":
            corrections = _listing(
                _corrections(entries), _GAP.join, "correction(s) not detailed", everything
            )
            details.insert(0, corrections)
            parts.append(corrections)
    if result.moved:
        parts.append(f"### Moved ({len(result.moved)})")
        moves = _listing(_moves(result.moved), "\n".join, "move(s) not listed", everything)
        details.append(moves)
        parts.append(moves)
    if result.lessons:
        lessons = _lessons(result.lessons, everything)
        tables.append(lessons)
        parts.append(lessons)
    if result.lineage.nodes:
        lineage = _lineage_section(result.lineage, everything)
        details.append(lineage)
        parts.append(lineage)
    head = "the working tree" if result.head is None else md_code(result.head)
    tip = ""
    if result.base_commit and result.base_commit != result.merge_base:
        tip = f"; ranked as merged into its tip {md_code(result.base_commit[:12])}"
    parts.append(
        f"<sub>kexp review: {head} compared with {md_code(result.base)} (merge base "
        f"{md_code(result.merge_base[:12])}{tip}).</sub>"
    )
    # Room: the headline, the errors, the tables, then the warnings and the details.
    errors = sum(p.severity == "error" for p in result.file_problems)
    plan = [(headline, None), (problems, errors), (store, None)]
    plan += [(table, None) for table in tables]
    plan += [(problems, None)] + [(detail, None) for detail in details]
    return fit(parts, max_chars, plan)


_GAP = "\n\n"


def _whole_command(result: Review, root: str | None = None) -> str:
    """The command that prints the whole review (run with ``--root root`` when given),
    as an inline code span."""
    base, head = result.base, result.head
    if root is not None:
        at = shlex.quote(root)  # a folder's name may hold spaces
        if head is None:
            return md_code(REVIEW_WHOLE_WORKING_TREE_AT.say(root=at, base=base))
        return md_code(REVIEW_WHOLE_AT.say(root=at, base=base, head=head))
    if head is None:
        return md_code(REVIEW_WHOLE_WORKING_TREE.say(base=base))
    return md_code(REVIEW_WHOLE.say(base=base, head=head))


def _left_out(left: int, what: str, everything: str) -> str:
    """The line that counts the entries of a section left out to fit the comment."""
    return f"*… and {left:,} more {what}: {everything} shows them all.*"


def _listing(
    items: Sequence[str],
    write: Callable[[Sequence[str]], str],
    what: str,
    everything: str,
) -> Listing:
    """A section of ``items`` written by ``write`` ("" when none is shown), followed by
    the count of those left out."""

    def render(shown: Sequence[str], left: int) -> str:
        text = write(shown) if shown else ""
        if not left:
            return text
        return f"{text}{_GAP if text else ''}{_left_out(left, what, everything)}"

    return Listing(items, render)


#: The outcomes a section lists before the other valid experiments (a failure).
_FAILURES = frozenset({"regression", "interference", "buggy", "failed"})


def _first_to_act_on(entries: Sequence[ReviewedExperiment]) -> list[ReviewedExperiment]:
    """``entries``, those a reviewer must act on first (invalid, suspect, a score changed
    without a reason, a new best, a failure), else in their order."""

    def urgency(entry: ReviewedExperiment) -> int:
        if not entry.valid:
            return 0
        if entry.suspect:
            return 1
        if _unexplained(entry) or any(t.failed for t in entry.tried_before):
            return 2
        if entry.new_best:
            return 3
        return 4 if entry.outcome in _FAILURES else 5

    return sorted(entries, key=urgency)


def _headline(result: Review, everything: str) -> Listing:
    counts = (
        f"**{len(result.added)} added · {len(result.corrected)} corrected · "
        f"{len(result.removed)} removed**"
    )
    if result.moved:
        counts = f"{counts[:-2]} · {len(result.moved)} moved**"
    if not result.experiments and not result.moved:
        counts = "**No experiment added, corrected or removed.**"
    errors = sum(p.severity == "error" for p in result.problems)
    warnings = sum(p.severity == "warning" for p in result.problems)
    if errors:
        verdict = f"❌ {errors} validation error(s), {warnings} warning(s): see Validation"
    elif warnings:
        verdict = f"⚠️ no validation errors, {warnings} warning(s)"
    else:
        verdict = "✅ validation passed"
    first = f"{counts} — {verdict}"
    lines: list[str] = []
    for entry in result.suspects:
        reasons = md_text("; ".join(entry.suspect), limit=_CELL_CHARS)
        lines.append(
            f"⚠️ **suspect: verify correctness** on {_campaign(entry)}: "
            f"{_best_note(entry)}; not a new best until checked ({reasons})"
        )
    lines += [_lost_note(lost) for lost in result.lessons_lost]
    for entry in result.changed_on_base:
        lines.append(_base_note(result, entry))
    for entry in result.corrected:
        if _unexplained(entry):
            lines.append(_unexplained_line(entry))
    for entry in result.tried_before:
        if not entry.new_best and any(t.failed for t in entry.tried_before):
            lines.append(
                f"🔁 **Tried before**: {md_code(entry.id)} ({md_text(entry.outcome)}), "
                f"{_tried_note(entry)}: read it before accepting this measurement"
            )
    for entry in result.new_bests:
        tried = f"; {_tried_note(entry)}" if entry.tried_before else ""
        lines.append(f"🏆 **New best** on {_campaign(entry)}: {_best_note(entry)}{tried}")
    for change in result.best_changes:
        lines.append(_best_change_note(change))
    lines += [_demotion_note(demotion) for demotion in result.demoted_by_control]
    if result.already_on_base:
        ids = ", ".join(md_code(exp_id) for exp_id in result.already_on_base)
        lines.append(
            f"♻️ {len(result.already_on_base)} change(s) of the branch are on "
            f"{md_code(result.base)} already, the same (merged before, as a squash merge "
            f"does), and not listed again: {ids}"
        )
    there = md_code(result.base)
    for behind in result.behind_base:
        lines.append(
            f"⏪ **Older here**: {md_code(behind.id)} "
            f"({md_text(behind.change_summary, limit=_CELL_CHARS)}) is on {there} already, "
            f"corrected there since ({_fields_said(behind.changes)}): this branch holds it "
            f"as it was before, no change of this pull request, and not listed; its file "
            f"conflicts when merged: keep {there}'s (merge {there} into the branch)"
        )

    def render(shown: Sequence[str], left: int) -> str:
        more = [_left_out(left, "note(s) like these", everything)] if left else []
        return "  \n".join([first, *shown, *more])

    return Listing(lines, render)


def _lost_note(lost: LostLesson) -> str:
    """The headline's line on a failure's lesson the change loses."""
    what = f"{md_code(lost.id)} ({md_text(lost.outcome)}, {md_text(lost.change_summary)})"
    said = f"“{md_text(lost.key_insight, limit=_CELL_CHARS)}”" if lost.key_insight else ""
    if lost.how == "removed":
        insight = f"; its key insight was {said}" if said else ""
        return (
            f"📕 **Lesson lost**: Removed: {what}: a failure removed is a lesson lost"
            f"{insight}; keep it unless it is wrong (correct it instead)"
        )
    return (
        f"📕 **Lesson lost**: Key insight removed: {what}: was {said or 'empty'}; a failure "
        "without its key insight teaches nothing"
    )


def _best_change_note(change: BestChange) -> str:
    """The headline's line on an operator whose best tip a correction or removal moved."""

    def tip(exp_id: str | None, score: float | None) -> str:
        if exp_id is None:
            return "none"
        return f"{md_code(exp_id)} ({score:.4f})" if score is not None else md_code(exp_id)

    before = tip(change.before_id, change.before_cumulative)
    after = tip(change.after_id, change.after_cumulative)
    cause = md_text(change.reason)
    if change.control_id is not None:  # an A/A control found steps within its drift
        judged = change.judged_by_control
        steps = ", ".join(f"{md_code(s['id'])} (now {md_code(s['outcome'])})" for s in judged)
        here = change.reason.split(",", 1)[0].removeprefix(f"the A/A control {change.control_id}")
        drift = judged[0]["drift"].split("'s ", 1)[-1].split(": an interval", 1)[0]
        cause = (
            f"the A/A control {md_code(change.control_id)}"
            f"{' ' + md_text(here.strip()) if here.strip() else ''}, which judges {steps} "
            f"within its {md_text(drift, limit=_CELL_CHARS)}"
        )
    return (
        f"{_best_move(change)} **Best changed** on {_campaign(change)} by {cause}: was "
        f"{before}, now {after}"
    )


#: The steps a control's headline names at most (the rest are counted).
_DEMOTED_NAMED = 5


def _demotion_note(demotion: ControlDemotion) -> str:
    """The headline's line on an A/A control the change brings that turns steps of its
    env ``marginal``, whether or not one of them was the best."""
    steps = demotion.steps
    named = ", ".join(
        f"{md_code(s['id'])} (was {md_text(s['was'])})" for s in steps[:_DEMOTED_NAMED]
    )
    more = len(steps) - _DEMOTED_NAMED
    named += f" and {more} more" if more > 0 else ""
    drift = steps[0]["drift"].split("'s ", 1)[-1].split(": an interval", 1)[0]
    on = f" on {md_text(repr(demotion.env))}" if demotion.env.strip() else ""
    return (
        f"🎚️ **Demoted by a control**{on}: the A/A control {md_code(demotion.control_id)} "
        f"{md_text(demotion.how)} here finds {len(steps)} step(s) within its "
        f"{md_text(drift, limit=_CELL_CHARS)}, now {md_code('marginal')}: {named}"
    )


def _best_move(change: BestChange) -> str:
    """The icon of a best tip's move: up, down (or gone), or to another tip at the same
    score."""
    old, new = change.before_cumulative, change.after_cumulative
    if new is not None and (old is None or new > old):
        return "📈"
    if old is not None and (new is None or new < old):
        return "📉"
    return "🔀"


def _fields_said(changes: Sequence[FieldChange]) -> str:
    """The fields of a correction, old → new (long ones by name only)."""
    said = [
        f"{md_code(c.field)} {_value(c.old)} → {_value(c.new)}"
        if c.diff is None
        else f"{md_code(c.field)} (text)"
        for c in changes
    ]
    return ", ".join(said) or "its text"


def _base_note(result: Review, entry: ReviewedExperiment) -> str:
    """The headline's line on an experiment changed on both sides since they parted."""
    there = md_code(result.base)
    if entry.base_kind == "removed":
        theirs = f"removed on {there}"
    else:
        theirs = f"corrected on {there} ({_fields_said(entry.base_changes)})"
    ours = (
        "removed here"
        if entry.kind == "removed"
        else f"corrected here ({_fields_said(entry.changes)})"
    )
    return (
        f"⚔️ **Changed on both sides**: {md_code(entry.id)} was {theirs} since this branch "
        f"forked, and {ours}: the merge conflicts or keeps one; decide which is right "
        f"(merge {there} into the branch and keep the right version)"
    )


def _unexplained(entry: ReviewedExperiment) -> bool:
    """Whether a correction changed the score by hand, with no correction note."""
    return any(p.code == SCORE_WITHOUT_NOTE for p in entry.problems)


def _unexplained_note(entry: ReviewedExperiment) -> str:
    """What a reviewer reads of a score changed with no correction note: whose
    experiment it is, the change, and that nothing says why."""
    whose = f"{md_text(entry.author)}'s experiment" if entry.author else "an experiment"
    score = next((c for c in entry.changes if c.field == "score"), None)
    moved = f" {_value(score.old)} → {_value(score.new)}" if score is not None else ""
    return (
        f"{md_code(entry.id)}, {whose}: score{moved} with no correction note saying why "
        "(a correction made with kexp records one); ask for the reason"
    )


#: The earlier experiments a tried-before note names at most (the rest are counted).
_TRIED_NAMED = 3


def _tried_note(entry: ReviewedExperiment) -> str:
    """``tried before: ID (OUTCOME; retired because: REASON)`` for the base side's
    experiments whose code change an added one repeats."""
    said = []
    for tried in entry.tried_before[:_TRIED_NAMED]:
        parts = [] if tried.identical else [f"a near-duplicate, similarity {tried.similarity:.2f}"]
        parts.append(md_text(tried.outcome) + (", dead end" if tried.dead_end else ""))
        if tried.retired:
            parts.append(f"retired because: {md_text(tried.retired, limit=_CELL_CHARS)}")
        said.append(f"{md_code(tried.id)} ({'; '.join(parts)})")
    more = len(entry.tried_before) - _TRIED_NAMED
    return "tried before: " + ", ".join(said) + (f" and {more} more" if more > 0 else "")


def _unexplained_line(entry: ReviewedExperiment, *, title: bool = True) -> str:
    """The line on a score changed with no correction note: put back to the value a
    commit of the base side replaced (a revert, a correction dropped: that commit says
    why), else changed without a reason (ask the author)."""
    if not entry.puts_back:
        said = "✋ **Score changed without a reason**: " if title else "✋ "
        return said + _unexplained_note(entry)
    whose = f"{md_text(entry.author)}'s experiment" if entry.author else "an experiment"
    score = next((c for c in entry.changes if c.field == "score"), None)
    moved = f" {_value(score.old)} → {_value(score.new)}" if score is not None else ""
    subject = f" ({md_text(entry.puts_back_subject, limit=_CELL_CHARS)})"
    return (
        f"↩️ {'**Score put back**: ' if title else ''}{md_code(entry.id)}, {whose}: "
        f"score{moved}, its value before commit {md_code(entry.puts_back[:12])}"
        f"{subject if entry.puts_back_subject else ''} changed it: this change undoes that "
        "change (a revert, or a correction dropped); keep it only if that change was wrong"
    )


def _best_note(entry: ReviewedExperiment) -> str:
    score = f"{entry.score:.4f}" if entry.score is not None else "?"
    if entry.cumulative_score is not None and entry.cumulative_score != entry.score:
        text = (
            f"{md_code(entry.id)} reaches {entry.cumulative_score:.4f} over the reference "
            f"(this step {score})"
        )
    else:
        text = f"{md_code(entry.id)} scores {score}"
    before = entry.previous_best_cumulative
    if entry.previous_best_id is not None and before is not None:
        text += f"; the best before was {md_code(entry.previous_best_id)} ({before:.4f})"
    else:
        text += " (the first scored experiment of this operator × dtype × env)"
        if entry.env_spelt_otherwise:
            text += (
                f"; env {md_code(entry.env_spelt_otherwise)} is recorded, "
                "spelt otherwise: if it is that machine, write that spelling "
                f"({md_code(CORRECT_FIELD.say(id=entry.id, field='env'))}), a campaign "
                "of its own until then"
            )
    return text


def _campaign(item: ReviewedExperiment | BestChange) -> str:
    """The campaign (operator × dtype × env) of a headline's line, in words: a best
    is one campaign's, as ``kexp stats`` and the report's frontier keep it."""
    where = ", ".join(md_text(v, limit=_CELL_CHARS) for v in (item.dtype_sig, item.env) if v)
    return f"{md_code(item.operator_sig)} ({where})" if where else md_code(item.operator_sig)


def _table_of(rows: Sequence[str]) -> str:
    """The table of experiments with these rows (as :func:`_table_rows` writes them)."""
    return "\n".join([markdown_table(_TABLE_HEADER, [], right=(4, 5)), *rows])


def _table_rows(entries: Sequence[ReviewedExperiment]) -> list[str]:
    """The rows of the table of experiments, one line each."""
    rows: list[list[str]] = []
    for e in entries:
        score = "—"  # none, or a run that measured nothing (a crash, a timeout)
        if e.shown_score is not None:
            score = describe_interval(e.shown_score, e.score_ci or ())
        if e.delta is not None:
            pct = f" ({e.delta_pct:+.2f}%)" if e.delta_pct is not None else ""
            if e.delta_pct is not None and e.delta_pct_ci is not None:
                low, high = e.delta_pct_ci
                pct = f" ({e.delta_pct:+.2f}% [{low:+.2f}%, {high:+.2f}%])"
            delta = f"{e.delta:+.4f}{pct} vs {md_code(e.pid, in_table=True)}"
        elif e.pid and e.cumulative_reason:
            delta = f"— ({md_text(e.cumulative_reason, limit=_CELL_CHARS)})"
        elif e.pid:
            delta = f"— (parent {md_code(e.pid, in_table=True, limit=_CELL_CHARS)})"
        else:
            delta = "— (no parent)"
        cumulative = "—"
        if e.cumulative_score is not None:
            cumulative = describe_interval(e.cumulative_score, e.cumulative_ci or ())
        shown = e.outcome  # a control's is control, as kexp stats counts it
        icon = _OUTCOME_ICONS.get(shown, "")
        outcome = f"{icon} {md_text(shown)}".strip()
        if e.rank is None:
            rank = "—"
        else:
            rank = f"#{_BREAK}{e.rank} of {e.rank_of}"  # "#1" alone would name issue 1
            if e.new_best:
                # below a suspect measurement only: it is no best until checked
                above = "" if e.rank == 1 else " (those above are suspect)"
                rank = f"**{rank}, new best{above}**"
            elif e.suspect:
                rank = f"**{rank}, suspect: verify correctness**"
            elif e.kind == "removed" and e.rank == 1:
                rank += " (was the best)"
            if e.dead_end:
                rank += ", dead end"
        if e.tried_before:
            rank += f"; {_tried_note(e)}"
        rows.append(
            [
                md_code(e.id, in_table=True),
                md_text(e.change_summary, limit=_CELL_CHARS) or "—",
                md_code(e.operator_sig, in_table=True, limit=_CELL_CHARS),
                md_code(e.dtype_sig, in_table=True, limit=_CELL_CHARS),
                score,
                cumulative,
                delta,
                outcome,
                rank,
            ]
        )
    return markdown_table(_TABLE_HEADER, rows, right=(4, 5)).split("\n")[2:]


def _measurements(entries: Sequence[ReviewedExperiment]) -> list[str]:
    """How the listed experiments were measured (those that say), one line each."""
    return [
        f"- {md_code(e.id)}: {md_text(e.measured, limit=_CELL_CHARS)}"
        for e in entries
        if e.measured
    ]


def _measured_with(lines: Sequence[str]) -> str:
    return "Measured with:\n\n" + "\n".join(lines)


def _corrections(entries: Sequence[ReviewedExperiment]) -> list[str]:
    """What each correction changed: one entry per experiment (its fields, its diffs)."""
    found: list[str] = []
    for e in entries:
        parts: list[str] = []
        title = f"#### {md_code(e.id)} {md_text(e.change_summary)}".rstrip()
        lines = [title, ""]
        if e.removed_in:
            lines.append(
                f"Brought back after its removal in {md_code(e.removed_in[:12])}: the "
                "changes are against the version removed."
            )
            lines.append("")
        if e.old_path is not None:
            lines.append(f"Moved from {md_code(e.old_path)} to {md_code(e.path)}.")
            lines.append("")
        if e.author:
            lines.append(f"Recorded by {md_text(e.author)}.")
            lines.append("")
        if _unexplained(e):
            lines.append(f"{_unexplained_line(e, title=False)}.")
            lines.append("")
        short = [c for c in e.changes if c.diff is None]
        long = [c for c in e.changes if c.diff is not None]
        for change in short:
            lines.append(f"- {md_code(change.field)}: {_value(change.old)} → {_value(change.new)}")
        if not e.changes:
            lines.append(
                "No field changed (the file's text was reformatted)."
                if e.valid
                else "Its fields cannot be read: see Validation."
            )
        parts.append("\n".join(lines).rstrip())
        for change in long:
            diff = "\n".join(change.diff or [])
            if change.diff_omitted:
                diff += f"\n… {change.diff_omitted} more line(s)"
            parts.append(f"{md_code(change.field)}:\n\n{md_block(diff, 'diff')}")
        found.append(_GAP.join(parts))
    return found


def _moves(entries: Sequence[ReviewedExperiment]) -> list[str]:
    """One line a file moved (or renamed), its content unchanged."""
    return [
        f"- {md_code(e.id)} {md_text(e.change_summary)}: moved from {md_code(e.old_path)} "
        f"to {md_code(e.path)}, its content unchanged"
        for e in entries
    ]


def _value(value: Any) -> str:
    if value is None:
        return "*(absent)*"
    if value == "":
        return "*(empty)*"
    return md_code(short_value(value))


def _validation(result: Review, everything: str) -> tuple[Listing, Listing]:
    """The Validation section: the changed files' problems (errors first), then the
    store-wide ones the change causes; each a listing of problems."""
    file_problems = sorted(result.file_problems, key=lambda p: p.severity != "error")
    errors = sum(p.severity == "error" for p in file_problems)
    warnings = len(file_problems) - errors

    def problems(shown: Sequence[str], left: int) -> str:
        lines = ["### Validation", ""]
        if not file_problems:
            return "\n".join([*lines, "The changed files pass every check."])
        lines.append(f"Problems in the changed files ({errors} error(s), {warnings} warning(s)):")
        if shown:
            lines += ["", md_block("\n".join(shown))]
        if left:
            lines += ["", _left_out(left, "problem(s)", everything)]
        return "\n".join(lines)

    def store(shown: Sequence[str], left: int) -> str:
        lines: list[str] = []
        if result.store_problems:
            lines.append(
                "Store-wide problems this change causes (duplicate ids, parents or combined "
                "experiments that do not exist, lineage cycles):"
            )
            if shown:
                lines += ["", md_block("\n".join(shown))]
            if left:
                lines += ["", _left_out(left, "store-wide problem(s)", everything)]
        else:
            lines.append("The change causes no store-wide problem.")
        if result.preexisting_store_problems:
            lines += [
                "",
                f"*{len(result.preexisting_store_problems)} store-wide problem(s) were there "
                "before this change (`kexp validate` lists them).*",
            ]
        return "\n".join(lines)

    return (
        Listing([p.format() for p in file_problems], problems),
        Listing([p.format() for p in result.store_problems], store),
    )


def _measured(lesson: Lesson) -> str:
    """A lesson's score in a sentence: ``0.9293``, or ``nothing measured`` (a crash, a
    timeout: a failed run, whatever its score)."""
    if lesson.shown_score is None:
        return NOTHING_MEASURED
    return describe_interval(lesson.shown_score, lesson.score_ci)


def _lessons(groups: Mapping[str, list[Lesson]], everything: str) -> Listing:
    total = sum(len(items) for items in groups.values())
    found: list[str] = []
    for group in LESSON_GROUPS:
        for lesson in groups.get(group, []):
            icon = _OUTCOME_ICONS.get(group, "")
            lines = [
                f"- {icon} **{md_text(group)}** {md_code(lesson.id)} "
                f"({_measured(lesson)}): "
                f"{md_text(lesson.change_summary)}"
            ]
            if lesson.key_insight:
                lines.append(f"  - Key insight: {md_text(lesson.key_insight)}")
            else:
                if lesson.error:
                    lines.append(f"  - Error: {md_text(lesson.error)}")
                lines.append(
                    "  - *No “Key insight” line in the description: worth asking for one.*"
                )
            found.append("\n".join(lines))

    def render(shown: Sequence[str], left: int) -> str:
        lines = [f"### Lessons added ({total})", "", *shown]
        if left:
            lines += ["", _left_out(left, "lesson(s)", everything)]
        return "\n".join(lines)

    return Listing(found, render)


def _lineage_section(graph: LineageGraph, everything: str) -> Listing:
    lines = [
        "### Lineage",
        "",
        md_block(render_mermaid(graph), "mermaid"),
        "",
        "Green: added · yellow: corrected · red, dashed: removed · grey: context.",
    ]
    if graph.omitted:
        lines[-1] += f" {graph.omitted} more relative(s) not drawn."

    def render(shown: Sequence[str], left: int) -> str:
        if shown:
            return shown[0]
        return f"### Lineage\n\n*The lineage graph is left out to fit: {everything} draws it.*"

    return Listing(["\n".join(lines)], render)
