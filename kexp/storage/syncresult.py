"""What one ``kexp sync`` did, or would do: :class:`SyncResult`, said for people and as
JSON (``kexp sync --json``, the MCP ``sync`` tool)."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any

from kexp.core.advice import CORRECT_SCORE, READ_FETCHED

#: How many paths a line names before "and N more".
SHOWN_PATHS = 5


@dataclasses.dataclass(frozen=True)
class Unlanded:
    """Experiment files a sync of the remote's default branch held back: this clone
    published them (or what they build on) on the side ``branch``, which the remote no
    longer has (or never had: the sync that committed them stopped before its push), and
    they did not land (:func:`kexp.storage.published.unlanded`)."""

    branch: str
    files: tuple[str, ...]
    #: What to do: propose them again, or drop them (:data:`~kexp.core.advice.PROPOSE_AGAIN`).
    advice: str
    #: Whether a sync of this clone pushed the branch (False: the one that committed them
    #: stopped before its push, killed or refused: the remote never had the branch).
    published: bool = True

    def line(self, remote: str, target: str, held: str) -> str:
        """The line that says it, ``held`` ("held back", or a dry run's "would hold back")."""
        where = (
            f"published on {self.branch}, which {remote} no longer has"
            if self.published
            else f"committed to {self.branch}, which was never published to {remote} (the "
            "sync that committed them stopped before its push: the push did not happen)"
        )
        return (
            f"{held} {len(self.files)} experiment file(s) {where} and which did not land on "
            f"{target}: {listing(list(self.files))}; {self.advice}"
        )


@dataclasses.dataclass(frozen=True)
class Fetched:
    """One of the remote's other branches whose commits a sync fetched (another agent's
    branch, pushed since this clone last fetched it): its remote-tracking branch moved
    (or was made), so that reads across refs see it."""

    branch: str
    #: How many commits it gained (new here: how many none of the branches known had).
    commits: int
    #: Whether this clone had no remote-tracking branch of it before.
    new: bool = False

    def said(self) -> str:
        """``kexp/b (2 new commit(s))``, ``kexp/c (new here, 3 commit(s))``."""
        return f"{self.branch} ({'new here, ' if self.new else ''}{self.commits} new commit(s))"


@dataclasses.dataclass(frozen=True)
class SyncResult:
    """What one sync did (or, with ``dry_run``, would do)."""

    remote: str
    branch: str
    dry_run: bool
    #: The experiment files added or changed by the commit (repository paths), or, in a
    #: dry run, that would be (the files it removes are in ``removed``).
    committed: tuple[str, ...]
    #: The commit made of them (None: nothing new to commit, or a dry run).
    commit: str | None
    #: Whether the remote's commits were merged in (or fast-forwarded to); never in a dry
    #: run (``would_merge``).
    merged: bool
    #: Whether this sync pushed (the remote branch now points at ``head``); never in a
    #: dry run, which pushes nothing (``would_push``).
    pushed: bool
    #: How many commits the push brought to the remote (a dry run: 0, ``commits_to_push``).
    commits_pushed: int
    #: The branch's commit after the sync (None: the branch has no commit); in a dry run,
    #: its commit before the one the sync would make.
    head: str | None
    #: How many pushes were tried, and how many of them were rejected (and retried).
    push_attempts: int
    rejected_pushes: int
    #: Files under ``experiments/`` changed here that are not experiment files (nor its
    #: README): not committed, left as they are.
    left: tuple[str, ...] = ()
    #: Whether this sync made the branch here (a side branch new to this clone); never in
    #: a dry run (``would_make_branch``).
    created_branch: bool = False
    #: The experiment files the commit removes from the branch (deleted here), or, in a
    #: dry run, would.
    removed: tuple[str, ...] = ()
    #: Files removed here that a side branch keeps: this clone published them there,
    #: and another clone corrected them there since (:mod:`kexp.storage.published`).
    not_removed: tuple[str, ...] = ()
    #: Files ``kexp rm`` removed here that another clone published to the side branch,
    #: which keeps them (a sync removes only what this clone published there), and what
    #: removes them there too (:func:`kexp.storage.syncclash.remove_there`).
    kept_back: tuple[str, ...] = ()
    kept_back_advice: str = ""
    #: Experiment files of a side branch that another clone corrected there since this
    #: clone published them, unchanged here: taken into the working tree (a dry run:
    #: would be; :mod:`kexp.storage.takenin`).
    taken_in: tuple[str, ...] = ()
    #: The checkout's commits (``hash subject``) that change files outside
    #: ``experiments/``, for which the push to the remote's default branch was held
    #: back (kexp sync publishes experiments, not code).
    held_back: tuple[str, ...] = ()
    #: The commits pushed to the remote's default branch that change files outside
    #: ``experiments/`` with no change to them in the end (reverted, or squashed
    #: there already): the remote's other files are as they were (a dry run: that
    #: the push would carry, as last fetched).
    carried: tuple[str, ...] = ()
    #: The commits of the remote's default branch here that change files outside
    #: ``experiments/`` with no change to them in the end (squash-merged there, or
    #: reverted), left off it because the push would publish no experiment: code history
    #: alone (a dry run: would be).
    left_off: tuple[str, ...] = ()
    #: The experiment files held back from the remote's default branch, by side branch:
    #: published there by this clone, the branch deleted since, not landed (a pull
    #: request closed unmerged; kept here, uncommitted).
    unlanded: tuple[Unlanded, ...] = ()
    #: What a dry run found the sync would do with the remote's branch: merge it in,
    #: push (how many commits), make the branch here (always false in a real sync,
    #: which says what it did in ``merged``, ``pushed``, ``created_branch``).
    would_merge: bool = False
    would_push: bool = False
    commits_to_push: int = 0
    would_make_branch: bool = False
    #: Whether the remote has the branch once the sync is done (a dry run: as last
    #: fetched); False: a branch never pushed that held nothing to publish.
    on_remote: bool = True
    #: The remote's other branches fetched (their remote-tracking branches moved), as
    #: ``git fetch REMOTE`` would: what other agents pushed, now read across refs
    #: (:meth:`kexp.storage.remoteview.RemoteView.track`); never in a dry run.
    fetched: tuple[Fetched, ...] = ()
    #: Experiment files both sides corrected, in different fields, merged field by field
    #: (:mod:`kexp.format.fieldmerge`: each field as the side that changed it has it,
    #: both correction notes kept); never in a dry run.
    merged_by_field: tuple[str, ...] = ()
    #: The scores it pushed changed with no correction note saying why (a hand edit; a
    #: warning, as ``kexp validate --changed`` gives it), ``path:line: score: message``.
    unexplained: tuple[str, ...] = ()

    @property
    def up_to_date(self) -> bool:
        """Whether this clone is up to date with the remote's branch once the sync is
        done: everything published (a dry run, which does nothing: nothing to commit,
        remove, merge or push now), and nothing waits on the user: no commits held back
        (``held_back``) or left off (``left_off``), no files held back (``unlanded``),
        none the branch keeps that were removed here (``kept_back``, ``not_removed``)."""
        waiting = (
            self.held_back or self.left_off or self.unlanded or self.kept_back or self.not_removed
        )
        return not waiting and (self._idle or not self.dry_run)

    @property
    def _idle(self) -> bool:
        """Whether the sync committed, removed, merged and pushed nothing (or would)."""
        return not (
            self.committed
            or self.removed
            or self.merged
            or self.pushed
            or self.would_merge
            or self.would_push
            or self.taken_in
        )

    def to_dict(self, said: Callable[[str], str] = str) -> dict[str, Any]:
        """The result as JSON-ready data (``kexp sync --json``), its advice ``said``
        (the MCP tools' words: :func:`kexp.core.advice.for_tools`)."""
        data = dataclasses.asdict(self)
        for key in ("committed", "removed", "not_removed", "kept_back", "left", "held_back",
                    "carried", "left_off", "taken_in", "merged_by_field",
                    "unexplained"):  # fmt: skip
            data[key] = list(getattr(self, key))
        data["unlanded"] = [
            {
                "branch": u.branch,
                "files": list(u.files),
                "advice": said(u.advice),
                "published": u.published,
            }
            for u in self.unlanded
        ]
        data["up_to_date"] = self.up_to_date
        return data

    def lines(self) -> list[str]:
        """What the sync did, for people."""
        where = f"{self.remote}/{self.branch}"
        files = len(self.committed)
        left = (
            [
                f"left {len(self.left)} file(s) under experiments/ uncommitted, which are "
                f"not experiment files: {listing(list(self.left))}"
            ]
            if self.left
            else []
        )
        kept = (
            [
                f"kept {len(self.not_removed)} experiment file(s) removed here on "
                f"{self.branch}: corrected there by another clone since this clone "
                f"published them (merge {where} in to see): {listing(list(self.not_removed))}"
            ]
            if self.not_removed
            else []
        )
        if self.kept_back:
            kept.append(
                f"kept {len(self.kept_back)} experiment file(s) removed here on "
                f"{self.branch}, which another clone published: "
                f"{listing(list(self.kept_back))}; {self.kept_back_advice}"
            )
        if self.taken_in:
            kept.append(
                f"{'would take' if self.dry_run else 'took'} {where}'s newer version of "
                f"{len(self.taken_in)} experiment file(s) into the working tree (another "
                "clone corrected them there; unchanged here since this clone published or "
                f"brought them in): {listing(list(self.taken_in))}"
            )
        if self.dry_run:
            return self._planned_lines() + left + kept
        made = [f"made the branch {self.branch} here"] if self.created_branch else []
        held = [self._held_back_line("pushed")] if self.held_back else []
        held += [self._left_off_line("pushed")] if self.left_off else []
        unlanded = [u.line(self.remote, self.branch, "held back") for u in self.unlanded]
        if self._idle:
            up = [self._up_to_date_line()]
            if held:
                up = [f"not up to date with {where}, though no experiment is to commit"]
            elif unlanded or kept:
                up = []  # (the held and kept back say it)
            return [*made, *unlanded, *up, *held, *left, *kept, *self._fetched_lines()]
        left = unlanded + left
        found = [*left, *kept, *made]
        if self.commit:
            done = [f"committed {files} experiment file(s)"] if files else []
            if self.removed:
                done.append(f"removed {len(self.removed)} experiment file(s)")
            found.append(f"{' and '.join(done)} as {self.commit[:12]}")
            found += shown(self.removed)
        if self.merged:
            found.append(f"merged the experiments of {where}")
            if self.merged_by_field:
                found.append(
                    f"  {len(self.merged_by_field)} experiment file(s) corrected both here "
                    f"and on {where}, in different fields: merged field by field (both "
                    f"correction notes kept): {listing(list(self.merged_by_field))}"
                )
        if self.pushed:
            retried = (
                f" after {self.rejected_pushes} rejected push(es)" if self.rejected_pushes else ""
            )
            found.append(f"pushed {self.commits_pushed} commit(s) to {where}{retried}")
            found += self._carried_lines()
            if self.unexplained:
                found.append(
                    f"warning: published {len(self.unexplained)} score(s) changed with no "
                    f"correction note saying why (score-without-note): "
                    f"{'; '.join(self.unexplained)}; say why with " + CORRECT_SCORE.say(id="ID")
                )
        return found + held + self._fetched_lines()

    def _fetched_lines(self) -> list[str]:
        """The other branches fetched, for people (none: no line)."""
        if not self.fetched:
            return []
        named = ", ".join(f.said() for f in self.fetched[:SHOWN_PATHS])
        more = len(self.fetched) - SHOWN_PATHS
        return [
            f"fetched what {self.remote}'s other branches gained: {named}"
            + (f" and {more} more" if more > 0 else "")
            + f"; {READ_FETCHED}"
        ]

    def _up_to_date_line(self) -> str:
        """Nothing to commit or push: up to date with the remote's branch, or, where the
        branch has no commit here and none is made (nor would be, from the remote's), a
        branch the remote does not have yet either (a side branch named before anything
        was published to it), or a branch here the remote does not have (never pushed)
        that holds nothing to publish."""
        if self.head is None and not (self.created_branch or self.would_make_branch):
            return (
                f"nothing to publish: {self.branch} is not on {self.remote} yet (nor here); "
                "the first sync with an experiment to publish makes it"
            )
        if not self.on_remote and not (self.pushed or self.would_push):
            return (
                f"nothing to publish: {self.branch} is not on {self.remote}, and it holds "
                f"no experiment {self.remote}'s branches lack, so it was not pushed; the first "
                "sync with an experiment to publish pushes it"
            )
        return f"up to date with {self.remote}/{self.branch}: nothing to commit or push"

    def _carried_lines(self) -> list[str]:
        """The code commits a push to the default branch carries (none: no line)."""
        if not self.carried:
            return []
        return [
            f"  {len(self.carried)} of them change files outside experiments/, with no "
            "change to them in the end (reverted, or there already: squash-merged or "
            "cherry-picked), carried into its history (so that an experiment's base commit "
            f"among them resolves there): {listing(list(self.carried))}"
        ]

    def _left_off_line(self, pushed: str) -> str:
        where = f"{self.remote}/{self.branch}"
        return (
            f"{pushed} nothing: {self.branch} holds {len(self.left_off)} commit(s) changing "
            f"files outside experiments/ with no change to them in the end ({where} holds "
            "them squash-merged, or they were reverted) and no experiment to publish: "
            f"to leave them off {where}, move {self.branch} to it (git reset --keep "
            f"{where}: no file changes); to push them all the same, git push {self.remote} "
            f"{self.branch}: {listing(list(self.left_off))}"
        )

    def _held_back_line(self, pushed: str) -> str:
        return (
            f"{pushed} nothing: {self.branch} holds {len(self.held_back)} commit(s) changing "
            "files outside experiments/, which kexp sync does not publish: push them "
            f"yourself (git push {self.remote} {self.branch}) once they are meant for "
            f"{self.remote}/{self.branch}: {listing(list(self.held_back))}"
        )

    def _planned_lines(self) -> list[str]:
        """What a dry run found the sync would do, for people."""
        where = f"{self.remote}/{self.branch}"
        files = len(self.committed)
        found = []
        if files:
            found.append(f"would commit {files} experiment file(s) to {self.branch}")
            found += shown(self.committed)
        if self.removed:
            found.append(f"would remove {len(self.removed)} experiment file(s) from {self.branch}")
            found += shown(self.removed)
        if self.would_make_branch:
            at = f" at {self.head[:12]}" if self.head and not (files or self.removed) else ""
            found.append(f"would make the branch {self.branch}{at}")
        if self.would_merge:
            found.append(f"would merge in what {where} gained")
        if self.would_push:
            found.append(f"would push {self.commits_to_push} commit(s) to {where}")
            found += self._carried_lines()
        if self.left_off:
            found.append(self._left_off_line("would push"))
        if self.held_back:  # with experiments to publish, the sync stops there
            stops = self.committed or self.removed
            found.append(
                self._held_back_line(
                    "would stop before the push, pushing" if stops else "would push"
                )
            )
        found[:0] = [u.line(self.remote, self.branch, "would hold back") for u in self.unlanded]
        if self.up_to_date:
            found.append(self._up_to_date_line())
        elif self._idle and (self.held_back or self.left_off):
            found.insert(0, f"not up to date with {where}, though no experiment is to commit")
        found.append(
            f"(as {self.remote}'s branches are now, their commits as last fetched: the sync "
            "fetches first, and merges in what the branch gained)"
        )
        return found


def shown(paths: tuple[str, ...]) -> list[str]:
    """``paths`` one a line, indented, the first few."""
    more = [f"  ... and {len(paths) - SHOWN_PATHS} more"] if len(paths) > SHOWN_PATHS else []
    return [f"  {path}" for path in paths[:SHOWN_PATHS]] + more


def listing(paths: list[str]) -> str:
    """``paths`` on one line, the first few, then how many more."""
    named = ", ".join(paths[:SHOWN_PATHS])
    more = len(paths) - SHOWN_PATHS
    return named + (f" and {more} more" if more > 0 else "")
