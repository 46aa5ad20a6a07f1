"""A pull-request review as data: the experiments a change added, corrected and removed
(:class:`ReviewedExperiment`, with the fields each correction changed), the problems it
brings, the lessons it adds and the lineage it touches (:class:`Review`). Built by
:func:`kexp.review.build.review`; rendered by :mod:`kexp.review.render`."""

from __future__ import annotations

import dataclasses
import json
from typing import TYPE_CHECKING, Any

from kexp.core.outcome import shown_score
from kexp.core.problems import Problem, has_errors, sort_problems

if TYPE_CHECKING:
    from kexp.agents.lessons import Lesson
    from kexp.review.graph import LineageGraph

__all__ = [
    "KINDS",
    "BehindBase",
    "BestChange",
    "ControlDemotion",
    "FieldChange",
    "LostLesson",
    "Review",
    "ReviewedExperiment",
    "TriedBefore",
    "short_value",
]

#: The kinds of change a review lists, in its order.
KINDS = ("added", "corrected", "removed")


@dataclasses.dataclass
class FieldChange:
    """One field a correction changed: old → new (None: absent on that side).

    Long or multi-line text gets ``diff``: the lines of a unified diff (without the file
    headers), at most :data:`kexp.review.entry.MAX_DIFF_LINES`; ``diff_omitted`` counts the
    lines left out.
    """

    field: str
    old: Any
    new: Any
    diff: list[str] | None = None
    diff_omitted: int = 0

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready data (stable keys)."""
        return {
            "field": self.field,
            "old": self.old,
            "new": self.new,
            "diff": self.diff,
            "diff_omitted": self.diff_omitted,
        }


@dataclasses.dataclass
class TriedBefore:
    """An experiment of the base side whose code change an added one repeats (the same
    once normalised, or a near-duplicate: :func:`kexp.storage.repeats.repeats_in`, as
    ``kexp add`` warns of it): its outcome, why it was retired ("" when it was not) and
    whether it is a dead end of its lineage there."""

    id: str
    outcome: str
    change_summary: str
    identical: bool = True
    similarity: float = 1.0
    retired: str = ""
    dead_end: bool = False

    @property
    def failed(self) -> bool:
        """Whether it is a lesson not to repeat: retired, a failure or a dead end."""
        return bool(self.retired) or self.dead_end or self.outcome not in _SUCCESSES


#: The outcomes of a step that is no lesson to heed when tried again.
_SUCCESSES = frozenset({"improvement", "pending", "control"})


@dataclasses.dataclass
class ReviewedExperiment:
    """One experiment a change added, corrected or removed, as a reviewer sees it.

    For a removed experiment the values are those it had on the base side (its rank
    too). ``valid`` is False when the file is not a valid experiment: then ``outcome``
    is ``"invalid"`` and the values are whatever could be read. ``cumulative_score`` is
    the speedup over the operator's reference (:mod:`kexp.core.campaign`); ``delta`` and
    ``delta_pct`` its change against the parent's. ``rank`` is the position by
    cumulative score among the store's ranked experiments (not pending, not buggy, not
    a control) of its campaign: the same ``operator_sig``, ``dtype_sig`` and ``env``
    (1 = best; ties share a rank), out of ``rank_of``; ``new_best`` is set when an added
    or corrected experiment is now its campaign's current best, the best tip whose
    measurement is believable (a suspect one above it is no best until checked:
    :func:`kexp.storage.query.believable_best`), and beats the base side's
    (``previous_best_*``: that best; None when there was none). A suspect one above the
    current best that beats the base side's is not a new best: ``suspect`` says why.
    """

    id: str
    kind: str  # 'added', 'corrected' or 'removed'
    path: str  # relative to the repository root, with '/'
    old_path: str | None  # where a corrected file was before a move; None otherwise
    valid: bool
    change_summary: str
    operator_sig: str
    dtype_sig: str
    score: float | None
    outcome: str
    pid: str
    parent_score: float | None = None
    delta: float | None = None
    delta_pct: float | None = None
    #: The score's 95 % interval (None without one); ``delta_pct_ci``: the interval of
    #: ``delta_pct`` when this experiment and its parent both have one.
    score_ci: list[float] | None = None
    delta_pct_ci: list[float] | None = None
    #: How it was measured, in words: the protocol and the samples per configuration.
    measured: str = ""
    rank: int | None = None
    rank_of: int = 0
    new_best: bool = False
    #: A dead end of its lineage, as ``kexp tree`` marks it: built on without doing
    #: better, or a step of a branch that never beat its fork point (no success).
    dead_end: bool = False
    previous_best_id: str | None = None
    previous_best_score: float | None = None
    #: A recorded env of its operator and dtype that is its env spelt otherwise (its
    #: campaign may be that one's, split by the spelling); "" when none is.
    env_spelt_otherwise: str = ""
    key_insight: str = ""
    measured_against: str = ""
    cumulative_score: float | None = None
    cumulative_ci: list[float] | None = None
    #: Why there is no cumulative score ("" when there is one).
    cumulative_reason: str = ""
    #: An A/A run (the noise floor): shown as ``control``, never as its outcome.
    control: bool = False
    #: The environment it ran in (its campaign is operator × dtype × env).
    env: str = ""
    previous_best_cumulative: float | None = None
    #: Why the measurement is implausible, when it would be a new best.
    suspect: list[str] = dataclasses.field(default_factory=list)
    changes: list[FieldChange] = dataclasses.field(default_factory=list)
    problems: list[Problem] = dataclasses.field(default_factory=list)
    #: What the base branch did to this experiment since the merge base, when it changed
    #: it too ('corrected' or 'removed'; None: it did not): the two sides conflict, and
    #: the reviewer decides which is right. ``base_changes``: the fields it corrected.
    base_kind: str | None = None
    base_changes: list[FieldChange] = dataclasses.field(default_factory=list)
    #: The run's status ("" when unreadable): a timed-out run measured nothing, whatever
    #: its score and outcome.
    status: str = ""
    #: Who recorded it (its ``author``; "" when it names none): whose experiment a
    #: correction changes.
    author: str = ""
    #: For a correction of an experiment the base's history removed and the change
    #: brings back: the commit that removed the version it is compared with ("": none).
    removed_in: str = ""
    #: For a correction whose score, changed without a note, is put back to the value it
    #: had before a commit of the base side changed it (a revert, a correction dropped):
    #: that commit ("": none) and its subject.
    puts_back: str = ""
    puts_back_subject: str = ""
    #: For an added experiment: the base side's experiments whose code change it repeats.
    tried_before: list[TriedBefore] = dataclasses.field(default_factory=list)

    @property
    def shown_score(self) -> float | None:
        """The score a view prints: None without one, or when it is no measurement,
        whatever the outcome (:func:`kexp.core.outcome.shown_score`); the JSON keeps
        ``score``."""
        return None if self.score is None else shown_score(self.score, self.status)

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready data (stable keys)."""
        data = dataclasses.asdict(self)
        data["changes"] = [c.to_dict() for c in self.changes]
        data["base_changes"] = [c.to_dict() for c in self.base_changes]
        data["problems"] = [p.to_dict() for p in self.problems]
        return data


@dataclasses.dataclass
class BehindBase:
    """An experiment the branch adds that the base's tip holds already, corrected since
    (squash-merged, then corrected: the tip's version holds every correction note of the
    branch's and more, each field they differ in named by one): the branch holds the
    version before those corrections, no change of its own. ``changes``: what the base
    corrected, the branch's value → the tip's."""

    id: str
    path: str
    change_summary: str
    changes: list[FieldChange]

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready data (stable keys)."""
        return {
            "id": self.id,
            "path": self.path,
            "change_summary": self.change_summary,
            "changes": [c.to_dict() for c in self.changes],
        }


#: Why a best tip moved when no control the change brings judged it: the corrections or
#: removals of the change.
CORRECTIONS_OR_REMOVALS = "the corrections or removals here"


@dataclasses.dataclass
class BestChange:
    """A campaign (operator × dtype × env) whose best tip the change moves other than by
    a new best: a correction or removal (of it or of an ancestor) dethrones or lowers it,
    or an A/A control the change brings (``control_id``) finds steps that were
    improvements within its drift (``judged_by_control``: each one's id, its outcome now,
    ``marginal``, and the ``drift`` reason). ``reason`` says which, in words."""

    operator_sig: str
    before_id: str | None
    before_cumulative: float | None
    after_id: str | None
    after_cumulative: float | None
    dtype_sig: str = ""
    env: str = ""
    reason: str = CORRECTIONS_OR_REMOVALS
    control_id: str | None = None
    judged_by_control: list[dict[str, str]] = dataclasses.field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready data (stable keys)."""
        return dataclasses.asdict(self)


@dataclasses.dataclass
class ControlDemotion:
    """An A/A control the change adds or corrects (``how``: ``added`` or
    ``corrected``) and the steps of its env it finds within its drift: each an
    improvement or a regression before the change (``was``) and ``marginal`` now
    (``steps``: each one's ``id``, ``was``, ``outcome`` and the ``drift`` reason),
    whether or not one of them was its campaign's best."""

    control_id: str
    how: str
    env: str
    steps: list[dict[str, str]]

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready data (stable keys)."""
        return dataclasses.asdict(self)


@dataclasses.dataclass
class LostLesson:
    """A failure's lesson the change loses: the experiment removed (``how`` is
    ``removed``), or its key insight removed (``key insight removed``). Its values are
    those of the base side; ``key_insight`` is the text lost ("" when it had none)."""

    id: str
    how: str
    outcome: str
    change_summary: str
    key_insight: str

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready data (stable keys)."""
        return dataclasses.asdict(self)


@dataclasses.dataclass
class Review:
    """What a change does to the store, as a reviewer needs it (see :func:`review`)."""

    base: str  # the base revision as given
    merge_base: str  # full hash of the commit compared with
    head: str | None  # the head revision as given (None: the working tree)
    head_commit: str | None  # its full hash (None: the working tree)
    added: list[ReviewedExperiment]
    corrected: list[ReviewedExperiment]
    removed: list[ReviewedExperiment]
    #: Validation problems of the added and corrected files.
    file_problems: list[Problem]
    #: Store-wide problems the change causes (in any file, touched or not).
    store_problems: list[Problem]
    #: Store-wide problems already present at the merge base or the base branch's tip (not
    #: caused by the change).
    preexisting_store_problems: list[Problem]
    #: The failures the change adds, by group (see :data:`kexp.agents.lessons.LESSON_GROUPS`).
    lessons: dict[str, list[Lesson]]
    lineage: LineageGraph
    #: The operators whose best tip the change moves without a new best.
    best_changes: list[BestChange] = dataclasses.field(default_factory=list)
    #: The A/A controls the change adds or corrects that turn steps ``marginal``.
    demoted_by_control: list[ControlDemotion] = dataclasses.field(default_factory=list)
    #: The failures' lessons the change loses (a failure removed, a key insight removed).
    lessons_lost: list[LostLesson] = dataclasses.field(default_factory=list)
    #: Full hash of the base's tip: the ranks, the best before and after and the counts
    #: are those of merging the change into it ("": the merge base).
    base_commit: str = ""
    #: The ids of the experiments whose change (since the merge base) the base's tip
    #: holds already, the same (merged before, as a squash merge does): not listed.
    already_on_base: list[str] = dataclasses.field(default_factory=list)
    #: The experiments whose file the change moved or renamed, its bytes the same (no
    #: correction: their fields, as the head holds them).
    moved: list[ReviewedExperiment] = dataclasses.field(default_factory=list)
    #: The experiments the branch holds as they were before the base's tip corrected
    #: them (no change of the branch): not listed as its corrections.
    behind_base: list[BehindBase] = dataclasses.field(default_factory=list)

    @property
    def experiments(self) -> list[ReviewedExperiment]:
        """Every reviewed experiment: added, then corrected, then removed."""
        return [*self.added, *self.corrected, *self.removed]

    @property
    def problems(self) -> list[Problem]:
        """Every problem the review reports (changed files, then those the change causes)."""
        return sort_problems(dict.fromkeys([*self.file_problems, *self.store_problems]))

    @property
    def ok(self) -> bool:
        """Whether the change brings no validation error."""
        return not has_errors(self.problems)

    @property
    def new_bests(self) -> list[ReviewedExperiment]:
        """The added or corrected experiments that are a new best on their operator."""
        return [e for e in self.experiments if e.new_best]

    @property
    def changed_on_base(self) -> list[ReviewedExperiment]:
        """The corrected or removed experiments that the base branch changed too since
        the merge base: conflicting edits, one of which the merge loses."""
        return [e for e in self.experiments if e.base_kind is not None]

    @property
    def tried_before(self) -> list[ReviewedExperiment]:
        """The added experiments whose code change the base side tried before."""
        return [e for e in self.added if e.tried_before]

    @property
    def suspects(self) -> list[ReviewedExperiment]:
        """The added or corrected experiments that would be a new best but whose
        measurement is suspect: verify correctness first."""
        return [e for e in self.experiments if e.suspect]


def short_value(value: Any) -> str:
    """A field value on one line, as JSON for anything but text."""
    if isinstance(value, str):
        return value
    return json.dumps(value, ensure_ascii=False)
