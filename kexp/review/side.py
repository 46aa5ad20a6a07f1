"""One side of a change under review: the valid experiments before it, or after it (as
merging the branch into the base branch's tip gives them), in the order the store lists
them; most kept as their front-matter facts, each derived as the store derives it.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from kexp.core.campaign import derive_for, versions_of
from kexp.core.collector import collector_paused
from kexp.core.cumulative import Derived
from kexp.core.model import KernelExperiment, attach
from kexp.core.outcome import UNMEASURED_OUTCOMES, time_key
from kexp.core.spelling import campaign_key, campaign_names
from kexp.format.filelinks import links_of
from kexp.format.rules import folded_env
from kexp.format.suspect import suspect_reasons
from kexp.format.validate import CheckedFile
from kexp.storage.changed import Facts, HeadScan, facts_of
from kexp.storage.lineage import dead_end_records
from kexp.storage.listing import path_order
from kexp.storage.query import believable_best

if TYPE_CHECKING:
    from kexp.core.settings import Settings
    from kexp.storage.history import Changes


class Side:
    """The valid experiments of one side of a change, in the order the store lists them.

    Of most, only their :class:`Facts` are kept; an experiment is made of them when it
    is asked for (its long texts empty). The experiments the change touches are
    ``whole`` (by their number in ``facts``); ``read(paths)`` reads others whole, each
    (None: not valid). What is derived of each (outcome, interference, cumulative score)
    is derived among the side's experiments, as the store's queries do
    (:func:`kexp.core.campaign.derive`). A review of many changes asks of many
    campaigns: :meth:`prime` answers for them all at once.
    """

    def __init__(
        self,
        facts: list[Facts],
        whole: Mapping[int, KernelExperiment],
        settings: Settings,
        read: Callable[[Sequence[str]], list[KernelExperiment | None]],
    ) -> None:
        self.facts = facts
        self.settings = settings
        self._read = read
        self._versions = versions_of(facts)
        #: The number of the first experiment of each id.
        self.first: dict[str, int] = self._versions.first
        self._derived: dict[int, Derived] = {}
        self._whole = dict(whole)
        self._derive(self._whole)
        for number, exp in self._whole.items():
            attach(exp, derived=self._derived[number])
        self._by_path = {facts[number].path: number for number in self._whole}
        self._made: dict[int, KernelExperiment] = {}
        self._children: dict[str, list[int]] | None = None
        self._children_sorted: set[str] = set()
        self._scored: dict[Campaign, list[tuple[Any, int]]] = {}
        self._on: dict[Campaign, list[int]] | None = None
        self._best: dict[Campaign, KernelExperiment | None] = {}
        #: Why the measurement of an experiment read whole is suspect (by its number).
        self._suspected: dict[int, list[str]] = {}

    def prime(self, campaigns: Iterable[Campaign]) -> None:
        """Make ready what :meth:`scored_on` and :meth:`best_on` answer for each of
        ``campaigns``: their experiments derived together (one derivation, not one a
        campaign), and the files their best needs read whole, read in one go."""
        campaigns = [c for c in dict.fromkeys(campaigns) if c not in self._best]
        on = self._campaigns()
        self._derive(number for campaign in campaigns for number in on.get(campaign, ()))
        wanted: dict[int, str] = {}
        for campaign in campaigns:
            for number in self._improved(campaign):
                if suspect_reasons(self.experiment(number), self.settings):
                    continue  # suspect of its score alone: the next one is asked
                if number not in self._whole and number not in self._suspected:
                    wanted[number] = self.facts[number].path
                break
        read = self._read(list(wanted.values())) if wanted else []
        for number, exp in zip(wanted, read, strict=True):
            self._suspected[number] = [] if exp is None else suspect_reasons(exp, self.settings)

    def _campaigns(self) -> dict[Campaign, list[int]]:
        """The numbers of each campaign's experiments, in order (one pass, kept)."""
        if self._on is None:
            on: dict[Campaign, list[int]] = {}
            for number, item in enumerate(self.facts):
                on.setdefault(campaign_of(item), []).append(number)
            self._on = on
        return self._on

    def _derive(self, numbers: Iterable[int]) -> None:
        """Derive the experiments ``numbers`` (those not derived yet), over them and what
        they depend on (:func:`kexp.core.campaign.derive_for`): as over the whole side."""
        wanted = [number for number in numbers if number not in self._derived]
        if not wanted:
            return
        facts = self.facts
        derivation = derive_for(
            facts, [facts[number] for number in wanted], self.settings, self._versions
        )
        for number in wanted:
            self._derived[number] = derivation.of(facts[number])

    def derived_all(self, numbers: Iterable[int]) -> list[Derived]:
        """What is derived of each experiment of ``numbers``, derived together."""
        numbers = list(numbers)
        self._derive(numbers)
        return [self._derived[number] for number in numbers]

    def derived(self, number: int) -> Derived:
        """What is derived of the experiment ``number``."""
        self._derive((number,))
        return self._derived[number]

    def experiment(self, number: int) -> KernelExperiment:
        """The experiment numbered ``number`` (whole if the change touches it)."""
        exp = self._whole.get(number) or self._made.get(number)
        if exp is None:
            exp = self._made[number] = self._light(number)
        return exp

    def _light(self, number: int) -> KernelExperiment:
        item = self.facts[number]
        exp = KernelExperiment(
            id=item.id,
            pid=item.pid,
            score=item.score,
            is_buggy=item.is_buggy,
            change_summary=item.change_summary,
            operator_sig=item.operator_sig,
            dtype_sig=item.dtype_sig,
            env=item.env,
            status=item.status,
            created_at=item.created_at,
            combines=_ids(item.combines),
            score_ci=list(item.score_ci or ()),
            measured_against=item.measured_against or "",
            tags=list(item.tags or ()),
        )
        return attach(exp, self.settings, path=Path(item.path), derived=self.derived(number))

    def get(self, exp_id: str) -> KernelExperiment | None:
        """The first experiment with id ``exp_id`` (None when there is none)."""
        number = self.first.get(exp_id)
        return None if number is None else self.experiment(number)

    def whole(self, exp_id: str) -> KernelExperiment | None:
        """:meth:`get`, read whole (its long texts too)."""
        number = self.first.get(exp_id)
        if number is None or number in self._whole:
            return None if number is None else self._whole[number]
        (exp,) = self._read([self.facts[number].path])
        if exp is None:  # pragma: no cover - it was valid when the store was read
            return self.experiment(number)
        return attach(exp, self.settings, derived=self.derived(number))

    def at_path(self, path: str) -> KernelExperiment | None:
        """The experiment the change touches in the file ``path`` (None: not valid)."""
        number = self._by_path.get(path)
        return None if number is None else self._whole[number]

    def children(self, exp_id: str) -> list[int]:
        """The numbers of the experiments whose ``pid`` is ``exp_id``, oldest first."""
        if self._children is None:
            self._children = self._children_index()
        found = self._children.get(exp_id, [])
        if exp_id not in self._children_sorted:
            facts = self.facts
            # oldest first, in time order whatever the precision; ties: path order
            found.sort(key=lambda n: (time_key(facts[n].created_at), facts[n].id))
            self._children_sorted.add(exp_id)
        return found

    @collector_paused()  # a list a parent, none in a cycle
    def _children_index(self) -> dict[str, list[int]]:
        """Each parent's children, in path order (sorted by time when asked for)."""
        index: dict[str, list[int]] = {}
        for number, item in enumerate(self.facts):
            if item.pid:
                index.setdefault(item.pid, []).append(number)
        return index

    def scored_on(self, campaign: Campaign) -> list[tuple[tuple[bool, Any], int]]:
        """(rank key, number) of the ranked experiments of ``campaign`` (exact
        ``operator_sig``, ``dtype_sig`` and ``env``: scored, not a control, a cumulative
        score known), in order; the rank key is ``kexp top``'s (whether the step
        improved, its cumulative score)."""
        found = self._scored.get(campaign)
        if found is None:
            on = self._campaigns().get(campaign, [])
            self._derive(on)
            derived = self._derived
            found = self._scored[campaign] = [
                ((derived[number].can_be_best, derived[number].cumulative_score), number)
                for number in on
                # is_scored of the experiment: its outcome is the one derived
                if derived[number].ranked and derived[number].outcome not in UNMEASURED_OUTCOMES
            ]
        return found

    def best_on(self, campaign: Campaign) -> KernelExperiment | None:
        """The current best of ``campaign``: the best tip (the best cumulative score of a
        step that improved, :func:`kexp.storage.query.best_tip`) whose measurement is
        believable (:func:`kexp.storage.query.believable_best`); None when there is none."""
        if campaign not in self._best:
            found = believable_best(self._improved(campaign), self._suspect)[0]
            self._best[campaign] = None if found is None else self.experiment(found)
        return self._best[campaign]

    def _improved(self, campaign: Campaign) -> list[int]:
        """The numbers of the steps of ``campaign`` that improved, best first (ties:
        the first listed)."""
        improved = [(key[1], number) for key, number in self.scored_on(campaign) if key[0]]
        improved.sort(key=lambda e: -float(e[0]))
        return [number for _, number in improved]

    def members(self, campaign: Campaign) -> list[Facts]:
        """The facts of ``campaign``'s experiments on this side, in order."""
        return [self.facts[number] for number in self._campaigns().get(campaign, [])]

    def spelt_otherwise(self, campaign: Campaign) -> str | None:
        """An env of the side's experiments of ``campaign``'s operator and dtype (by
        key) that is ``campaign``'s env spelt otherwise (``H100 SXM, CUDA 12.4`` beside
        ``h100 sxm cuda12.4``: :func:`kexp.format.rules.folded_env`), as it is shown
        (:func:`kexp.core.spelling.campaign_names`); None when none is."""
        operator, dtype, env = campaign
        folded = folded_env(env)
        if not folded:
            return None
        found = sorted(
            campaign_names(self.members(other))[other][2]
            for other in self._campaigns()
            if other[:2] == (operator, dtype)
            and other[2] != env
            and other[2].strip()
            and folded_env(other[2]) == folded
        )
        return found[0] if found else None

    def dead_end(self, exp: KernelExperiment) -> bool:
        """Whether ``exp`` (one of the side's) is a dead end of its lineage, as ``kexp
        tree`` marks it (:func:`kexp.storage.lineage.dead_end_records`, its whole tree)."""
        root, seen = exp.id, {exp.id}
        pid = exp.pid
        while pid and pid not in seen and pid in self.first:  # up to a root or a cycle
            seen.add(pid)
            root = pid
            pid = self.facts[self.first[pid]].pid
        members = list(self._versions.get(root))
        queue, taken = [root], {root}
        while queue:  # the tree below its root (a pid cycle walked once)
            for child in self.children(queue.pop()):
                members.append(child)
                if self.facts[child].id not in taken:
                    taken.add(self.facts[child].id)
                    queue.append(self.facts[child].id)
        members = list(dict.fromkeys(members))
        self._derive(members)  # together: one derivation for the tree
        found = dead_end_records([self.experiment(number) for number in members])
        return any(end is exp for end in found)

    def _suspect(self, number: int) -> list[str]:
        """Why the measurement of the experiment ``number`` is implausible: of its score
        alone, else of it read whole (its results and protocol are not in its facts)."""
        exp = self.experiment(number)
        reasons = suspect_reasons(exp, self.settings)
        if reasons or number in self._whole:
            return reasons
        if number not in self._suspected:
            (whole,) = self._read([self.facts[number].path])
            self._suspected[number] = [] if whole is None else suspect_reasons(whole, self.settings)
        return self._suspected[number]


#: A campaign: operator × dtype × env (``operator_sig``, ``dtype_sig``, ``env``) in
#: kexp's spelling (:func:`kexp.core.spelling.campaign_key`), as the report's frontier,
#: ``kexp stats`` and ``kexp context`` keep one best per campaign.
Campaign = tuple[str, str, str]


def campaign_of(item: Any) -> Campaign:
    """The campaign of an experiment, its :class:`Facts` or a reviewed entry: its key
    (``bf16`` and ``torch.bfloat16`` of one kernel on one machine are one campaign)."""
    return campaign_key(item)


def campaign_name(campaign: Campaign, *sides: Side) -> Campaign:
    """The name ``campaign`` is shown by: each column's spelling most written among its
    experiments on ``sides`` (:func:`kexp.core.spelling.campaign_names`)."""
    members = [item for side in sides for item in side.members(campaign)]
    return campaign_names(members).get(campaign, campaign)


def _ids(combines: Iterable[str | None]) -> list[str]:
    return [c for c in combines if c is not None]


@collector_paused()  # the facts of every experiment, none in a cycle
def sides(
    scan: HeadScan, pr: Changes, kept: Changes, on_base: Changes | None
) -> tuple[Side, Side, dict[str, str]]:
    """The experiments after and before the change, as merging the branch into the base
    branch's tip gives them: the tip's, plus what the branch adds or corrects (``kept``:
    its changes less those on the tip already), less what it removes; and the tip's.
    Also where each file the base branch moved since the merge base is now.

    Neither side is read again: the merge base's store is the head's (``scan``) less
    what the branch (``pr``) added or corrected, plus what it removed or corrected as it
    was; the tip's is that less what the base branch changed since (``on_base``; None:
    nothing, the tip is the merge base), plus those files as they are on the tip.
    """
    target = scan.target
    settings = target.settings
    on_tip: dict[str, CheckedFile] = {}  # the files the base branch changed, as on its tip
    moved: dict[str, str] = {}  # the base branch's moves: path at the merge base -> now
    gone: set[str] = set()  # the paths the base branch changed, removed or moved away
    if on_base is not None:
        for change in on_base:
            if change.before is not None:
                gone.add(str(change.before.path))
            if change.after is not None:
                gone.add(str(change.after.path))
                on_tip[str(change.after.path)] = change.after
            if change.old_path is not None:
                moved[str(change.old_path)] = str(change.path)

    def whole(item: CheckedFile) -> KernelExperiment:
        return attach(item.experiment(), settings, path=item.path)

    def read(paths: Sequence[str]) -> list[KernelExperiment | None]:
        elsewhere = [Path(path) for path in paths if path not in on_tip]
        checked = iter(target.check_files(elsewhere) if elsewhere else [])
        items = [on_tip[path] if path in on_tip else next(checked) for path in paths]
        return [whole(item) if item.ok else None for item in items]

    def side(facts: list[Facts], items: Mapping[str, CheckedFile]) -> Side:
        numbers = {
            number: whole(items[item.path])
            for number, item in enumerate(facts)
            if item.path in items and items[item.path].ok
        }
        return Side(facts, numbers, settings, read)

    def valid(items: Iterable[CheckedFile]) -> list[Facts]:
        return [
            facts_of(links_of(item), item.document.fields)
            for item in items
            if item.ok and item.document is not None
        ]

    after = [c.after for c in [*pr.added, *pr.modified] if c.after is not None]
    before = [c.before for c in [*pr.modified, *pr.removed] if c.before is not None]
    changed_now = {str(item.path) for item in after}
    facts = [item for item in scan.valid if item.path not in changed_now] + valid(before)
    if on_base is not None:
        facts = [item for item in facts if item.path not in gone] + valid(on_tip.values())
    if before or on_base is not None:
        facts.sort(key=_listed)  # as the store lists them (ties of the best go to the first)
    # The tip's versions of what the branch corrects or removes (those it left alone).
    was: dict[str, CheckedFile] = {}
    for item in [c.before for c in [*kept.modified, *kept.removed] if c.before is not None]:
        path = str(item.path)
        if moved.get(path, path) in on_tip:
            was[moved.get(path, path)] = on_tip[moved.get(path, path)]
        elif path not in gone:
            was[path] = item
    then = side(facts, was)
    mine = {str(c.after.path): c.after for c in [*kept.added, *kept.modified] if c.after}
    if on_base is None:  # the merge is the head
        return side(scan.valid, mine), then, moved
    drop = set(mine)
    for item in [c.before for c in [*kept.modified, *kept.removed] if c.before is not None]:
        drop |= {str(item.path), moved.get(str(item.path), str(item.path))}
    merged = [item for item in facts if item.path not in drop] + valid(mine.values())
    del facts
    merged.sort(key=_listed)
    return side(merged, mine), then, moved


def _listed(item: Facts) -> str:
    """The key that sorts experiments as a store lists them (:func:`path_order`)."""
    return path_order(item.path)
