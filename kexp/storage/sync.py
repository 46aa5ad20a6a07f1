"""``kexp sync``: publish what this machine recorded, and take in what others published.

One sync commits the experiment files under ``experiments/`` and its README (never the
user's other changes, nor other files there: those are named and left),
fetches the remote branch, merges it in when both sides moved (experiment files are
distinct, so this does not conflict; a real conflict, the same file changed on both
sides, stops before anything changes, naming the file), and pushes. A push the remote
rejects because another clone pushed first is retried (fetch, merge, push) a bounded
number of times with a growing, jittered pause; a lock on the remote's branch a few
times, briefly, then named; any other refusal (a hook that declines) is said at once in
the remote's words. What it would publish is validated first, as ``kexp validate
--changed`` validates a branch (:func:`refuse_invalid`): an error stops it before
anything is committed; so is a merge with the remote's branch before it is pushed (each
side valid, together not: one removed the parent the other built on). Never a
force-push. Nothing new and the remote up to date: nothing
is committed or pushed. A sync of the checked-out branch fetches the remote's branch
first: a file it holds as the working tree has it (a side branch's pull request merged
there; ``git pull`` refuses to overwrite the untracked files ``branch`` left) is not
committed again, the merge takes it in; a file another of the remote's branches holds
alike, or a removal another branch made, is left uncommitted (on its way through that
branch's pull request); an untracked
file the remote's branch holds with other content stops the sync, naming it, before
anything changes. Two syncs in one clone take turns, in one working tree or two of its
worktrees (a lock in the git folder they share): the second waits for the first.

The current branch is published, or with ``branch`` another one (``kexp/<name>``):
then the commit is made beside the checkout (with a temporary index), and neither the
working tree, the index nor the checked-out branch changes. A side branch can be shared
by several clones: a file it holds that the working tree lacks is removed from it only
when this clone removed it (its checkout tracks it, or this clone published it there
and the branch still holds that version: :mod:`kexp.storage.published`), never another
clone's. Removals are said apart from what is committed (``SyncResult.removed``).
"""

from __future__ import annotations

import dataclasses
import os
import random
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from kexp.core.advice import (
    MERGE_TO_FIX,
    PROPOSE_AGAIN,
    SYNC_BRANCH,
    SYNC_FIX_ALL,
    SYNC_FIX_CHANGED,
    SYNC_FOR_REVIEW,
    SYNC_REMOTE,
)
from kexp.core.errors import (
    GitError,
    KexpError,
    LockTimeoutError,
    NoCommitsError,
    SyncConflictError,
    ValidationError,
)
from kexp.format.fieldmerge import merge_fields, noting
from kexp.format.rules import README_NAME, id_from_name
from kexp.gitops import commits as gitcommits
from kexp.gitops import divergence as gitdivergence
from kexp.gitops import git as kgit
from kexp.gitops import merge as gitmerge
from kexp.gitops import remotes as gitremotes
from kexp.gitops.rewrites import rewritten_on
from kexp.storage.publishcheck import first_error, unexplained_scores
from kexp.storage.published import Record, choose_removals, record_path, unlanded
from kexp.storage.remoteview import RemoteView
from kexp.storage.sidebranch import SideBranch, refuse_left, side_base, with_checkout
from kexp.storage.stalecopies import take_in_locked, take_in_stale
from kexp.storage.syncclash import conflict_said, invalid_beside, kept_there, merge_by_hand
from kexp.storage.synclineage import left_out, lineage_among
from kexp.storage.syncresult import Fetched, SyncResult, Unlanded, listing
from kexp.storage.takenin import take_in

if TYPE_CHECKING:
    from kexp.storage.snapshot import StoreLocation
    from kexp.storage.store import Store

#: How many times a sync tries to push before it gives up (each after a fetch).
DEFAULT_ATTEMPTS = 20
#: How many pushes in a row may meet a lock on the remote's branch before the lock is
#: reported (a push in progress holds it for milliseconds; a killed one leaves it).
LOCKED_ATTEMPTS = 3
#: How long a sync waits for another sync of the same clone to finish (seconds).
SYNC_WAIT_S = 600.0
#: The first pause after a rejected push, in seconds (doubled each time, jittered).
DEFAULT_BACKOFF = 0.1
_MAX_PAUSE = 5.0


def sync(
    store: Store,
    *,
    branch: str | None = None,
    remote: str = "origin",
    message: str | None = None,
    dry_run: bool = False,
    attempts: int = DEFAULT_ATTEMPTS,
    backoff: float = DEFAULT_BACKOFF,
    sleep: Callable[[float], None] = time.sleep,
) -> SyncResult:
    """Publish ``store``'s experiments to ``remote`` (see the module's description).

    ``branch`` (default: the checked-out one) is where they go; ``message`` the commit
    message; ``dry_run`` says what it would commit, make, merge in and push (the
    remote's branches as they are now, their commits as last fetched), changing nothing;
    ``attempts`` bounds the pushes tried.
    Raises :class:`~kexp.core.errors.SyncConflictError` naming the files on a real
    conflict (nothing changed: the local commit is kept, the remote untouched),
    :class:`~kexp.core.errors.GitError` for refused names and failures, and for a push the
    remote refuses (in its words). Another sync of the same store is waited
    for (:data:`SYNC_WAIT_S`).
    """
    # lazy: not every command that imports this module needs these
    from kexp.storage.locking import exclusive_lock
    from kexp.storage.snapshot import StoreLocation

    # One for the clone, shared by its worktrees: they share its branches (an agent per
    # worktree, syncing one side branch) and its remote-tracking ones.
    lock = gitcommits.common_git_dir(StoreLocation.of(store.root).repo) / "kexp" / "sync.lock"
    try:
        with exclusive_lock(lock, SYNC_WAIT_S):
            return _sync(store, branch, remote, message, dry_run, attempts, backoff, sleep)
    except LockTimeoutError:
        raise LockTimeoutError(
            f"another kexp sync of this clone (in one of its worktrees) has been running for "
            f"over {SYNC_WAIT_S:.0f} s (a live process: it holds {lock}): let it finish, then "
            "run kexp sync again"
        ) from None


def _sync(
    store: Store,
    branch: str | None,
    remote: str,
    message: str | None,
    dry_run: bool,
    attempts: int,
    backoff: float,
    sleep: Callable[[float], None],
) -> SyncResult:
    """:func:`sync`, holding the clone's sync lock."""
    # lazy: not every command that imports this module needs kexp.storage.snapshot
    from kexp.storage.snapshot import StoreLocation

    if branch is not None:
        gitcommits.check_branch_name(branch)
    if not isinstance(remote, str) or not kgit.is_ref_name(remote):
        raise GitError(
            f"{remote!r} is not a remote name kexp accepts: give the name of a configured "
            "remote (git remote lists them)"
        )
    if isinstance(attempts, bool) or not isinstance(attempts, int) or attempts < 1:
        raise KexpError(f"attempts must be a positive whole number, not {attempts!r}")
    location = StoreLocation.of(store.root)
    repo, folder = location.repo, location.folder
    if remote not in gitcommits.remote_names(repo):
        raise GitError(
            f"{location.toplevel} has no remote {remote!r}: add it (git remote add "
            f"{remote} URL) or give the remote to publish to {SYNC_REMOTE}"
        )
    checked_out = gitcommits.current_branch(repo)
    target = branch or checked_out
    if target is None:
        raise GitError(
            "HEAD is detached (no branch checked out): check out a branch, or give the "
            f"branch to publish to {SYNC_BRANCH}"
        )
    gitcommits.check_branch_name(target)
    in_checkout = target == checked_out
    unfinished = gitcommits.unfinished_operation(repo)
    if unfinished is not None and (
        in_checkout or any(_inside(p, folder) for p in unfinished.unmerged)
    ):
        # Staging a conflicted file would mark it resolved, markers and all.
        raise SyncConflictError(
            f"kexp sync did nothing: {unfinished.describe(str(location.toplevel))}; then run "
            "kexp sync again",
            unfinished.unmerged,
        )
    local = start = gitcommits.ref_commit(repo, f"refs/heads/{target}")
    had_branch = local is not None
    kept_record: Record | None = None  # (a side branch's record as the sync found it)
    brought: list[str] = []  # (another clone's corrections taken into the working tree)
    view = RemoteView(repo, remote, folder)

    def publishable(path: str) -> bool:
        return _publishable(path, location)

    left = tuple(
        sorted(
            p
            for p in gitcommits.changed_paths(repo, folder)
            if _inside(p, folder) and not publishable(p) and not _hidden(p, folder)
        )
    )

    commit: str | None = None
    pending: str | None = None  # a dry run's commit beside the checkout, not on the branch
    if in_checkout:
        others = [p for p in gitcommits.staged_paths(repo) if not _inside(p, folder)]
        if others:
            raise KexpError(
                f"the index holds staged changes outside {folder}/ ({listing(others)}): "
                "kexp sync commits only experiment files; commit those changes first, or "
                "unstage them (git restore --staged PATH)"
            )
        changed = sorted(p for p in gitcommits.changed_paths(repo, folder) if publishable(p))
        # The remote's branch first: what it holds as the working tree has it is not
        # committed again (a side branch's pull request merged there), nor what another
        # of its branches holds alike (on its way there through a pull request).
        incoming = (
            view.known_tip(target) if dry_run else gitremotes.fetch_branch(repo, remote, target)
        )
        taken, elsewhere = _landed(location, view, target, changed, incoming, local)
        paths = [p for p in changed if p not in taken | elsewhere]
        present = [p for p in changed if os.path.lexists(location.toplevel / p)]
        needed = lineage_among(location, elsewhere & set(present), paths + present)
        if needed and target == view.default():
            raise ValidationError(_STACKED.format(target=target, files=listing(sorted(needed))), [])
        paths = sorted({*paths, *needed})  # (a copy of what another branch holds)
        held_unlanded = _unlanded(location, view, target, paths, not dry_run)
        paths = [p for p in paths if not any(p in u.files for u in held_unlanded)]
        removed = [p for p in paths if not os.path.lexists(location.toplevel / p)]
        if paths or local != gitcommits.ref_commit(repo, f"refs/remotes/{remote}/{target}"):
            refuse_invalid(store, remote, target)
        if paths and not dry_run:
            commit = gitcommits.commit_paths(repo, paths, message or _message(paths))
            local = commit
        paths = [p for p in paths if p not in set(removed)]
        kept: list[str] = []
    else:
        incoming, taken = None, set()
        if not dry_run and local is not None:
            # The remote's default branch as the remote has it now (and the checkout's):
            # a pull request of this branch merged there (squashed, the branch deleted or
            # kept) restarts the branch.
            for landing in {view.default(), checked_out} - {None, target}:
                view.fetch(str(landing))
        if Record.exists(repo, target):  # what another clone corrected there since
            there = view.known_tip(target)
            # (or rewrote there: amended and force-pushed; the local branch follows it)
            redone = bool(there and local and rewritten_on(repo, there, local))
            since = there if redone else local
            brought = (
                take_in(location, remote, target, there, since, dry_run=True, rewritten=redone)
                if dry_run
                else take_in_locked(store, location, remote, target, there, since, rewritten=redone)
            )
            if redone and (
                dry_run or gitcommits.update_branch(repo, target, str(there), str(local))
            ):
                local = there  # (after the take-in: a stop leaves the branch as it was)
        stale = take_in_stale(  # (copies brought in by hand, corrected there since)
            store, location, view.known_tip(target), _checkout_commit(repo, checked_out),
            dry_run=dry_run,
        )  # fmt: skip
        brought += [p for p in stale if p not in brought]  # (a dry run finds them twice)
        record = Record.read(repo, target)
        kept_record = record if Record.exists(repo, target) else None
        made, paths, removed, kept, base, remote_base, held_unlanded = _commit_beside(
            location, view, target, local, checked_out, message, dry_run, record,
            frozenset(brought) if dry_run else frozenset(),
        )  # fmt: skip
        paths = [p for p in paths if p not in stale]  # (a dry run's: taken in, not committed)
        published = made or local
        if published is not None and published != gitcommits.ref_commit(
            repo, f"refs/remotes/{remote}/{target}"
        ):
            refuse_invalid(store, remote, target, published)
        if made is not None:
            if dry_run:
                pending = made
            else:  # recorded before the branch moves: a sync killed between never
                # forgets what it published (another clone's correction is then taken in)
                record.updated(gitcommits.path_blobs(repo, made, paths), removed).write(
                    repo, target
                )
                if not gitcommits.update_branch(repo, target, made, local):
                    _put_back(repo, target, local, local, kept_record)
                    raise GitError(
                        f"branch {target} moved while kexp sync was committing to it: run "
                        "kexp sync again"
                    )
                commit = local = made
        elif record.damaged and not dry_run:
            record.write(repo, target)  # written again, holding nothing
        if (
            made is None
            and local is None
            and base is not None
            and (remote_base is not None or view.lacks(base))
        ):
            # Nothing new in the working tree: take the remote's branch, or make it at
            # the checkout's commit when that holds experiments the remote lacks (else it
            # would be an empty pull request: no branch is made), checked first.
            if remote_base is None:
                refuse_invalid(store, remote, target, base)
            if not dry_run:
                gitcommits.update_branch(repo, target, base, None)
            local = base
    if dry_run:  # the plan as the remote's branch is now, its commits as last fetched
        tip = pending or local
        unmade = 1 if in_checkout and (paths or removed) else 0  # the checkout's commit
        known = view.known_tip(target)
        step = _plan(
            view, tip, known, fresh=bool(unmade or pending), unmade=unmade,
            in_checkout=in_checkout, had_branch=had_branch,
            gained=known != view.listed().get(target),
        )  # fmt: skip
        code: list[str] = []
        carry: list[str] = []
        alone = False
        if step.push and tip and known and target == view.default():
            code = gitdivergence.code_brought(repo, known, tip, folder)
            carry = [] if code else gitdivergence.commits_outside(repo, tip, known, folder)
            # Code history alone (squash-merged, or reverted), no file changed: no push.
            alone = bool(carry) and not unmade and not _changes(repo, tip, known, folder)
        aside = kept_there(location, remote, target, None if in_checkout else known or tip)
        return SyncResult(  # a dry run merges, pushes and makes nothing: it would
            remote, target, True, tuple(paths), None, False, False, 0, local, 0, 0, left,
            removed=tuple(removed), not_removed=tuple(kept), held_back=tuple(code),
            carried=() if alone else tuple(carry), left_off=tuple(carry) if alone else (),
            kept_back=aside[0], kept_back_advice=aside[1], taken_in=tuple(brought),
            unlanded=held_unlanded, would_merge=step.merge,
            would_push=step.push and not (code or alone),
            commits_to_push=0 if code or alone else step.commits,
            would_make_branch=not had_branch and (tip is not None or bool(unmade)),
            on_remote=known is not None,
        )  # fmt: skip

    checkout = None if in_checkout else _checkout_commit(repo, checked_out)
    merged = pushed = False
    by_field: list[str] = []  # (the files both sides corrected, merged field by field)
    tried = rejected = commits_pushed = locked = 0
    held: tuple[str, ...] = ()
    carried: tuple[str, ...] = ()
    for attempt in range(attempts):
        if attempt == 0 and in_checkout:
            remote_tip = incoming  # fetched a moment ago
        else:
            remote_tip = gitremotes.fetch_branch(repo, remote, target)
        step = _plan(
            view, local, remote_tip, fresh=commit is not None, in_checkout=in_checkout,
            had_branch=had_branch,
        )  # fmt: skip
        if step.merge and remote_tip is not None:
            new = remote_tip
            if local is not None and not kgit.is_ancestor(repo, local, remote_tip):
                # (by hand, the files the remote's branch holds alike go first)
                alike = [p for p in sorted(taken) if os.path.lexists(location.toplevel / p)]
                try:
                    if not in_checkout:  # (another clone's code line, pushed meanwhile)
                        refuse_left(location, view, target, remote_tip, checkout)
                    new = _merge(location, view, local, remote_tip, target, alike,
                                 beside=not in_checkout, by_field=by_field)  # fmt: skip
                except SyncConflictError as exc:
                    if not in_checkout and not all(_inside(p, folder) for p in exc.paths):
                        _put_back(repo, target, start, local, kept_record)  # (said so)
                    raise
                _refuse_invalid_merge(store, location, remote, target, remote_tip, new, local,
                                      alike, beside=not in_checkout)  # fmt: skip
            if in_checkout:
                gitcommits.fast_forward_checkout(repo, new, alike=sorted(taken))
            elif not gitcommits.update_branch(repo, target, new, local):
                raise GitError(
                    f"branch {target} moved while kexp sync was merging into it: run "
                    "kexp sync again"
                )
            local, merged = new, True
        if not step.push or local is None:
            break  # the remote has everything, or nothing here is news to it
        if remote_tip is not None and target == view.default():
            code = gitdivergence.code_brought(repo, remote_tip, local, folder)
            if code:  # kexp sync publishes experiments, never code, where reviews land
                held = _hold_back(view, remote, target, folder, local, code, merged)
                break
            carried = tuple(gitdivergence.commits_outside(repo, local, remote_tip, folder))
            if carried and not _changes(repo, local, remote_tip, folder):
                break  # code history alone, no file changed: left off (said)
        tried += 1
        try:
            outcome = gitremotes.push_branch(repo, remote, local, target)
        except GitError as exc:
            raise GitError(
                f"{exc}: nothing was pushed (the commit {local[:12]} is kept on {target}); "
                "settle it with whoever runs the remote, then run kexp sync again"
            ) from None
        if outcome.pushed:
            pushed, commits_pushed = True, step.commits
            if not in_checkout:
                Record.note_pushed(repo, target)  # (no longer "never published")
            break
        rejected += 1
        locked = locked + 1 if outcome.lock else 0
        if locked >= LOCKED_ATTEMPTS:
            raise GitError(
                f"{remote} could not lock the branch {target} for the push, {locked} times: "
                f"{outcome.lock} exists on the remote (a push in progress holds it for a "
                "moment; one that stays was left by a git process killed there, and whoever "
                f"runs the remote must delete it); the commit {local[:12]} is kept on "
                f"{target}: run kexp sync again later"
            )
        if attempt + 1 < attempts:
            sleep(min(_MAX_PAUSE, backoff * 2 ** min(attempt, 8)) * random.uniform(0.5, 1.5))
    else:
        raise GitError(
            f"the push to {remote}/{target} was rejected {rejected} time(s) (other clones "
            f"kept pushing first): run kexp sync again; the commit {str(local)[:12]} is "
            "kept on the branch"
        )
    if merged and not in_checkout:  # (corrected there while this sync ran)
        brought = sorted(
            {
                *brought,
                *take_in_locked(store, location, remote, target, local, stop=False),
                *take_in_stale(store, location, local, checkout),
            }
        )
    # What reads across refs see: the branches the remote had as the sync began, and
    # the one it pushed to (made by its push, maybe).
    gitremotes.prune_tracking(repo, remote, {*view.listed(), target})
    fetched = tuple(Fetched(b, n, new) for b, (n, new) in view.track(besides=target).items())
    aside = kept_there(location, remote, target, None if in_checkout else local)
    return SyncResult(
        remote, target, False, tuple(paths), commit, merged, pushed, commits_pushed, local,
        tried, rejected, left, created_branch=not had_branch and local is not None,
        removed=tuple(removed), not_removed=tuple(kept), held_back=held,
        carried=carried if pushed else (), left_off=() if pushed else carried,
        kept_back=aside[0], kept_back_advice=aside[1],
        taken_in=tuple(brought), unlanded=held_unlanded, fetched=fetched,
        merged_by_field=tuple(sorted(set(by_field))),
        unexplained=unexplained_scores(store, remote_tip, local) if pushed else (),
        on_remote=pushed or remote_tip is not None,
    )  # fmt: skip


def _changes(repo: Any, tip: str, remote_tip: str, folder: str) -> bool:
    """Whether pushing ``tip`` (merged with ``remote_tip`` first, when it is not its
    descendant; its code ``remote_tip``'s) changes an experiment file there."""
    return bool(gitdivergence.unpublished_paths(repo, tip, [remote_tip], folder))


def _hold_back(
    view: RemoteView,
    remote: str,
    target: str,
    folder: str,
    local: str,
    code: list[str],
    merged: bool,
) -> tuple[str, ...]:
    """The push held back by the code commits ``code`` of ``target`` (the remote's
    default branch): returned when the remote's branches hold every experiment change
    of ``local`` (nothing of the checkout's experiments waits); else raises a
    :class:`~kexp.core.errors.KexpError` naming them and the ways on."""
    if not view.lacks(local, besides=None):
        return tuple(code)
    brought = f"{remote}/{target}'s experiments merged in; " if merged else ""
    raise KexpError(
        f"kexp sync did not push to {remote}/{target} ({brought}the experiments are "
        f"committed on {target}, kept): {target} holds {len(code)} commit(s) changing "
        f"files outside {folder}/ ({listing(code)}), and kexp sync publishes experiments "
        f"alone: push those yourself once they are meant for {target} (git push) and run "
        f"kexp sync again, or {SYNC_FOR_REVIEW}"
    )


@dataclasses.dataclass(frozen=True)
class _Step:
    """What a sync does with the remote's branch (:func:`_plan`): the real run acts on
    it, a dry run reports it."""

    #: Merge the remote's branch in: a merge commit, or a fast-forward to it when this
    #: side has nothing it lacks (with no commit here, the checkout takes it).
    merge: bool = False
    #: Push, bringing the remote ``commits`` commits (a merge commit counted).
    push: bool = False
    commits: int = 0


def _plan(
    view: RemoteView,
    tip: str | None,
    remote_tip: str | None,
    *,
    fresh: bool,
    in_checkout: bool,
    had_branch: bool,
    unmade: int = 0,
    gained: bool = False,
) -> _Step:
    """What a sync does with the branch whose commit here is ``tip`` (None: none) and
    the remote's ``remote_tip`` (None: the remote lacks the branch). ``fresh``: the
    sync commits something; ``unmade``: how many commits it would make on ``tip`` that
    are not made (a dry run's commit in the checkout); ``gained``: the remote's branch
    moved past ``remote_tip`` (a dry run knows it only as last fetched). A branch the
    remote lacks is pushed only with something new, or when it is new here and holds
    experiments the remote's branches lack (never an empty pull request)."""
    if tip is None and not unmade:  # nothing here: the checkout takes the remote's
        return _Step(merge=in_checkout and remote_tip is not None)
    if remote_tip is None:
        if fresh or not (in_checkout or had_branch) or (tip is not None and view.lacks(tip)):
            return _Step(push=True, commits=unmade + (view.ahead(tip, None) if tip else 0))
        return _Step()
    if tip == remote_tip and not unmade and not gained:
        return _Step()  # the remote has everything
    ahead = unmade + (view.ahead(tip, remote_tip) if tip else 0)
    merge = gained or tip is None or not kgit.is_ancestor(view.repo, remote_tip, tip)
    return _Step(merge, ahead > 0, ahead + 1 if merge and ahead > 0 else ahead)


def _landed(
    location: StoreLocation,
    view: RemoteView,
    target: str,
    changed: list[str],
    incoming: str | None,
    head: str | None,
) -> tuple[set[str], set[str]]:
    """Of ``changed`` (the checkout's new, changed and deleted experiment files), those
    a sync of the checkout does not commit: (those the remote's ``target``, at ``incoming``,
    holds as the working tree has them, present alike or absent from both: a side
    branch's pull request merged there, which the merge brings in; the present files
    another of the remote's branches holds alike, and the deleted ones another branch
    removed: published there). ``head`` is the
    checkout's commit. Raises :class:`~kexp.core.errors.SyncConflictError` for an
    untracked file the remote's branch holds with other content, changing nothing."""
    repo, top = location.repo, location.toplevel
    present = [p for p in changed if os.path.lexists(top / p)]
    if incoming is None:
        return set(), view.held(present)
    theirs = gitcommits.path_blobs(repo, incoming, changed)
    same = gitdivergence.held_files(repo, present, [incoming])
    tracked = gitcommits.path_blobs(repo, head, present) if head else {}
    differing = [p for p in present if p in theirs and p not in same and p not in tracked]
    if differing:
        where = f"{view.remote}/{target}"
        raise SyncConflictError(
            f"kexp sync did nothing: {where} holds another version of "
            f"{listing(differing)}, untracked here (yours is kept as it is): move yours "
            f"out of {location.folder}/, run kexp sync again to bring in {where}'s, then "
            "compare the two and put back the one to keep",
            differing,
        )
    gone = {p for p in changed if p not in set(present)}
    gone -= _moved_or_removed(location, incoming, sorted(gone - theirs.keys()), present, same)
    mine = {name for name in view.branches() if name != target and Record.exists(repo, name)}
    waiting = view.removed(sorted(gone & theirs.keys()), head, among=mine) if head else set()
    return (
        same | {p for p in gone if p not in theirs},
        view.held(sorted(set(present) - same)) | waiting,
    )


def _unlanded(
    location: StoreLocation, view: RemoteView, target: str, paths: list[str], note: bool
) -> tuple[Unlanded, ...]:
    """What a sync holds back of ``paths`` (what it would commit to ``target``, checked
    out or not), by side branch: what this clone published on one the remote no longer
    has, and did not land on its default branch
    (:func:`kexp.storage.published.unlanded`), and the files building on it (``pid``,
    ``combines``: the default branch would lack their parents). Never deleted. ``note``:
    whether to note a push found but not noted (:func:`_pushed`)."""
    present = [p for p in paths if os.path.lexists(location.toplevel / p)]
    found = unlanded(location.repo, view, target, present)
    branch_of = {p: branch for branch, files in found.items() for p in files}
    rest = [p for p in present if p not in branch_of]
    while found and rest:  # (a child's child: one more pass)
        building = {p: lineage_among(location, set(branch_of), [p]) for p in rest}
        branch_of |= {p: branch_of[min(on)] for p, on in building.items() if on}
        if len(rest) == len(rest := [p for p in rest if not building[p]]):
            break
    pushed = {branch: _pushed(location.repo, view.remote, branch, note) for branch in found}
    return tuple(
        Unlanded(branch, files, PROPOSE_AGAIN.say(branch=branch), pushed[branch])
        for branch in found
        if (files := tuple(sorted(p for p, b in branch_of.items() if b == branch)))
    )


def _pushed(repo: Any, remote: str, branch: str, note: bool) -> bool:
    """Whether a sync of this clone pushed the side ``branch``: its record says so, or
    the remote-tracking branch holds the branch's commit (a sync killed once git pushed,
    before it noted the push); then, with ``note``, the record notes it, as the
    remote-tracking branch of a branch the remote no longer has is pruned."""
    if Record.read(repo, branch).pushed:
        return True
    if not gitremotes.tracking_holds(repo, remote, branch):
        return False
    if note:
        Record.note_pushed(repo, branch)
    return True


def _moved_or_removed(
    location: StoreLocation, incoming: str, absent: list[str], present: list[str], same: set[str]
) -> set[str]:
    """Of ``absent`` (files removed here that the remote's branch, at ``incoming``, lacks
    too), those committed all the same: moved here (the working tree holds the
    experiment at a path it commits: ``present`` but not ``same``), or removed here where
    that branch moved the experiment (holds its id at another path); the merge then keeps
    the removal against the move (:func:`kexp.gitops.merge.merge_commits`)."""
    if not absent:
        return set()
    here = {id_from_name(p): p in same for p in present}
    there = {id_from_name(e.path) for e in kgit.list_tree(location.repo, incoming, location.folder)}
    return {
        p
        for p in absent
        if (found := id_from_name(p)) is not None
        and (here.get(found) is False or (found in there and found not in here))
    }


def _commit_beside(
    location: StoreLocation,
    view: RemoteView,
    target: str,
    local: str | None,
    checked_out: str | None,
    message: str | None,
    dry_run: bool,
    record: Record,
    taken: frozenset[str] = frozenset(),
) -> tuple[
    str | None, list[str], list[str], list[str], str | None, str | None, tuple[Unlanded, ...]
]:
    """The commit of the working tree's new experiment files for the side branch
    ``target`` (``local``: its commit here), made beside the checkout (not on the
    branch yet; in a dry run too: what would be published is checked): (the commit or
    None, the files it adds or changes, those it removes, those removed here it keeps,
    the commit the branch is on, the remote's branch when the branch is new here, what
    it holds back: :func:`_unlanded`, the remote's default branch given): on
    :func:`kexp.storage.sidebranch.side_base`, with the checkout's code commits the branch
    lacks brought in (:func:`kexp.storage.sidebranch.with_checkout`: the branch's pull
    request carries the newest code with every experiment). A file a remote branch holds
    alike is not committed: it is no news. A file the branch holds and the working tree
    lacks is removed when this clone removed it (``record``: what it published there;
    :func:`kexp.storage.published.choose_removals`), as the remote's branch is now (a
    dry run: as far as known; ``taken``: the files a dry run would take in from the
    branch first, no news)."""
    repo = location.repo
    remote_base = seen = None
    if local is None:
        seen = gitcommits.ref_commit(repo, f"refs/remotes/{view.remote}/{target}")
        remote_base = (
            view.known_tip(target)
            if dry_run
            else gitremotes.fetch_branch(repo, view.remote, target)
        )
    checkout = _checkout_commit(repo, checked_out)
    base, again = side_base(
        SideBranch(location, view, target, local, remote_base, checkout, dry_run)
    )
    onto = with_checkout(location, view, target, base, checkout)  # the checkout's new code
    parent = onto
    folder = location.folder
    if local is None and not again and _changed_since_seen(repo, seen, remote_base, folder):
        # made there, then merged: a file changed on both sides stops it
        parent = with_checkout(location, view, target, seen, checkout)
    kept: list[str] = []
    held: list[Unlanded] = []

    def leave(present: list[str]) -> set[str]:
        out = left_out(location, view.held(present), present) | (taken & set(present))
        held[:] = _unlanded(
            location, view, target, [p for p in present if p not in out], not dry_run
        )
        return out | {p for u in held for p in u.files}

    def remove(gone: list[str]) -> list[str]:
        if onto is None or not gone:
            return []

        def tip() -> str | None:  # asked only when this clone removed one of them
            if local is None:
                return remote_base
            if dry_run:
                return view.known_tip(target)
            return gitremotes.fetch_branch(repo, view.remote, target)

        chosen = choose_removals(repo, gone, onto, tip, checkout, record)
        kept.extend(chosen.kept)
        return chosen.removed

    made, paths, removed = gitcommits.commit_files_onto(
        repo,
        parent,
        location.folder,
        (lambda _: message) if message else _message,
        keep=lambda path: _publishable(path, location),
        moved=_moved_away,
        leave=leave,
        remove=remove,
    )
    return made, paths, removed, kept, base, remote_base, tuple(held)


def _changed_since_seen(repo: Any, seen: str | None, tip: str | None, folder: str) -> bool:
    """Whether the remote's side branch, at ``tip``, changed since this clone last
    fetched it (``seen``) an experiment file the working tree holds otherwise (brought in
    from ``seen`` and corrected here, or as ``seen`` had it): the commit is then made on
    ``seen`` and merged, never over the other clone's version."""
    if seen is None or tip is None or seen == tip or not kgit.is_ancestor(repo, seen, tip):
        return False
    return bool(gitdivergence.changed_both_ways(repo, seen, tip, folder))


#: Why a sync of the default branch refuses a step whose lineage waits in a pull request.
_STACKED = (
    "kexp sync did nothing: what it would publish to {target} builds on {files}, which "
    "another branch of the remote holds, on its way through a pull request, and {target} "
    f"lacks: {SYNC_FOR_REVIEW} (its pull request carries a copy of those files: land it "
    "after that one), or run kexp sync again once that lands"
)


def _checkout_commit(repo: Any, checked_out: str | None) -> str | None:
    """The commit checked out: the branch's, else (a detached HEAD) HEAD's; None in a
    repository with no commits."""
    if checked_out is not None:
        return gitcommits.ref_commit(repo, f"refs/heads/{checked_out}")
    try:
        return kgit.head_commit(repo)
    except NoCommitsError:
        return None


def refuse_invalid(store: Store, remote: str, target: str, head: str | None = None) -> None:
    """Raise :class:`~kexp.core.errors.ValidationError` when what a sync would publish
    to ``remote``'s ``target`` branch has an error, in one line: the first problem and
    what to do. ``head`` is the commit to publish (None: the working tree's files).

    What the remote has not seen is checked as ``kexp validate --changed`` checks a
    branch (:func:`kexp.storage.changed.check_changes`): the files added or corrected
    since the remote's branch (as last fetched) get every check, and the store-wide
    checks (duplicate ids, dangling ``pid``/``combines``, lineage cycles) the whole
    store, of which the problems the change brings count. A branch the remote does not
    have yet is compared with the remote's default branch (``REMOTE/HEAD``), or checked
    whole without one. Files that are not published (not named as experiments) do not
    count."""
    # lazy: not every command that imports this module needs these
    from kexp.storage.changed import check_changes
    from kexp.storage.snapshot import StoreLocation

    repo = StoreLocation.of(store.root).repo
    # The remote's branch, else its default branch (a new branch starts from it).
    known = (
        (name, commit)
        for name in (target, "HEAD")
        if (commit := gitcommits.ref_commit(repo, f"refs/remotes/{remote}/{name}")) is not None
    )
    published = next(known, None)
    if published is None:
        problems = (store if head is None else store.at(head)).validate()
        advice = SYNC_FIX_ALL.say()
    else:
        check = check_changes(store, published[1], head)
        problems = [*check.file_problems, *check.caused]
        advice = SYNC_FIX_CHANGED.say(base=f"{remote}/{published[0]}")
    found = first_error(problems)
    if found:
        raise ValidationError(
            f"kexp sync did nothing, {target} would publish an invalid experiment: {found}; "
            f"{advice}",
            [],
        )


def _refuse_invalid_merge(
    store: Store,
    location: StoreLocation,
    remote: str,
    target: str,
    remote_tip: str,
    merged: str,
    local: str,
    alike: list[str],
    *,
    beside: bool = False,
) -> None:
    """Raise :class:`~kexp.core.errors.ValidationError` when the merge of ``local`` and
    the remote's ``remote_tip`` (``merged``, a commit no branch points at) brings an
    error the remote does not have: each side valid, together not (one removed the
    parent the other built on). ``alike``: as :func:`merge_by_hand` takes them; a
    branch made ``beside`` the checkout is settled there
    (:func:`kexp.storage.syncclash.invalid_beside`)."""
    # lazy: not every command that imports this module needs kexp.storage.changed
    from kexp.storage.changed import check_changes

    check = check_changes(store, remote_tip, merged)
    found = first_error([*check.file_problems, *check.caused])
    if found:
        raise ValidationError(
            f"kexp sync stopped before the push: merged with {remote}/{target}, {target} "
            f"would publish an invalid experiment: {found}; nothing was pushed (the local "
            f"commit {local[:12]} is kept, the remote is untouched): "
            + (
                invalid_beside(location, target, f"{remote}/{target}", remote_tip, merged)
                if beside
                else merge_by_hand(location, f"{remote}/{target}", alike, MERGE_TO_FIX)
            ),
            [],
        )


def _merge(
    location: StoreLocation,
    view: RemoteView,
    local: str,
    remote_tip: str,
    target: str,
    alike: list[str],
    *,
    beside: bool = False,
    by_field: list[str] | None = None,
) -> str:
    """The merge commit of the local branch and the remote's (a conflict explained: the
    same experiment corrected on both sides, or in git's words when it is another clash,
    such as a file where the other side has a folder: :func:`kexp.storage.syncclash.conflict_said`,
    given ``alike`` and whether the branch is made ``beside`` the checkout); the files
    both sides corrected in different fields, merged, noted in ``by_field``."""
    remote = view.remote
    try:
        message = f"kexp sync: merge {remote}/{target}"
        return str(
            gitmerge.merge_commits(
                location.repo,
                local,
                remote_tip,
                message,
                folder=location.folder,
                id_of=id_from_name,
                resolve=noting(merge_fields, by_field if by_field is not None else []),
            )
        )
    except SyncConflictError as exc:
        raise conflict_said(
            location, local, remote_tip, remote, target, alike, exc, beside=beside, view=view
        ) from None


def _put_back(
    repo: Any, target: str, start: str | None, now: str | None, record: Record | None
) -> None:
    """The side branch ``target`` (at ``now``) and its record as a stopped sync found
    them: at ``start`` (None: none), the ``record`` (None: none)."""
    if now is not None and now != start:
        gitcommits.reset_branch(repo, target, start, now)
    if record is None:
        record_path(repo, target).unlink(missing_ok=True)
    else:
        record.write(repo, target)


def _inside(path: str, folder: str) -> bool:
    return path.startswith(folder + "/")


def _publishable(path: str, location: StoreLocation) -> bool:
    """An experiment file of the store (:func:`kexp.format.validate.id_from_name`'s rule, not
    hidden) or its README: what a sync commits."""
    return location.is_experiment(path) or path == f"{location.folder}/{README_NAME}"


def _hidden(path: str, folder: str) -> bool:
    """Whether a file under ``folder`` is hidden (writers' temporary files are)."""
    return any(part.startswith(".") for part in path[len(folder) + 1 :].split("/"))


def _moved_away(present: list[str], gone: list[str]) -> list[str]:
    """The files of ``gone`` (deleted here) whose experiment is at one of the
    ``present`` paths: moved (``kexp migrate-layout``), so their old path goes too,
    else the branch would hold each of them twice."""
    here = {id_from_name(path) for path in present} - {None}
    return [path for path in gone if id_from_name(path) in here]


def _message(paths: list[str]) -> str:
    names = [path.rsplit("/", 1)[-1] for path in paths]
    return f"kexp sync: {len(paths)} experiment file(s)\n\n" + "\n".join(names) + "\n"
