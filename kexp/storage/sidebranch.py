"""Which commit ``kexp sync --branch`` makes a side branch's next commit on: the branch
as it is, with the checkout's newer code brought in (a campaign's steps stacked: the
branch follows the checkout's commits), started again from the checkout when its pull
request landed, or refused when the branch holds code the checkout's line does not (the
checkout restarted from an earlier commit, or another line was published there:
:func:`kexp.storage.syncclash.line_left`; a published commit amended with another change:
:func:`kexp.storage.syncclash.rewritten_left`; one rebased with the same patch is no left
code) or whose merge with the checkout's code clashes
(:func:`kexp.storage.syncclash.checkout_clashes`)."""

from __future__ import annotations

import contextlib
import dataclasses
from typing import TYPE_CHECKING, Any

from kexp.core.errors import SyncConflictError
from kexp.format.rules import id_from_name
from kexp.gitops import divergence as gitdivergence
from kexp.gitops import git as kgit
from kexp.gitops import merge as gitmerge
from kexp.gitops import rewrites
from kexp.storage.syncclash import checkout_clashes, code_clash, line_left, rewritten_left

if TYPE_CHECKING:
    from kexp.storage.remoteview import RemoteView
    from kexp.storage.snapshot import StoreLocation


@dataclasses.dataclass(frozen=True)
class SideBranch:
    """The side branch ``target`` a sync publishes to, as this sync sees it: ``local``
    (its commit here, or None), ``remote_base`` (the remote's, when new here), the
    checkout's commit, and whether it is a dry run (which fetches nothing)."""

    location: StoreLocation
    view: RemoteView
    target: str
    local: str | None
    remote_base: str | None
    checkout: str | None
    dry_run: bool


def side_base(branch: SideBranch) -> tuple[str | None, bool]:
    """(The commit the side branch's next commit builds on, as the branch holds it (its
    ``local`` commit here; the ``remote_base``, when new here; else the checkout's
    commit), whether the branch starts again from the checkout).
    A branch whose experiments the checkout or the remote's other branches hold already
    (its pull request merged) starts again from the checkout's commit, but the remote's
    default branch (``--branch main`` from a feature branch), which takes no code from the
    checkout. The checkout's newer code is brought in apart (:func:`with_checkout`)."""
    location, view, target = branch.location, branch.view, branch.target
    local, checkout = branch.local, branch.checkout
    repo = location.repo
    base = local or branch.remote_base or checkout
    if starts_again(branch):
        return checkout, True  # its code line left, its pull request landed, the branch deleted
    if (
        local is not None
        and checkout is not None
        and local != checkout
        and target != view.default()  # never the checkout's code onto the default branch
        and (kgit.is_ancestor(repo, local, checkout) or view.landed(local))
    ):
        base = checkout
        if not kgit.is_ancestor(repo, local, checkout) and view.merged(local):
            # Merged with its commits on the remote, not here yet: start from both, so
            # that what it published stays on it (a correction of it is a correction).
            with contextlib.suppress(SyncConflictError):
                again = f"Start {target} again from the checkout, keeping what it published"
                base = gitmerge.merge_commits(
                    repo, checkout, local, again, folder=location.folder, id_of=id_from_name
                )
        elif not kgit.is_ancestor(repo, local, checkout):
            # Squashed on the remote (the branch kept, so the push merges it in): start
            # from the checkout's branch as the remote has it, which holds the squash,
            # so that the next pull request does not add what landed a second time.
            base = landed_base(repo, view, checkout, local)
    return base, False


def with_checkout(
    location: StoreLocation, view: RemoteView, target: str, on: str | None, checkout: str | None
) -> str | None:
    """``on`` (a commit of the side branch ``target``'s line) with the checkout's code
    when the checkout has commits it lacks: the checkout itself when it descends from
    ``on``, else a merge of the checkout into ``on`` (the branch keeps what it published
    and fast-forwards; :func:`side_base` made sure it holds no code the checkout's line
    lacks). ``on`` as it is for the remote's default branch. Raises
    :class:`~kexp.core.errors.SyncConflictError` when the merge clashes
    (:func:`kexp.storage.syncclash.checkout_clashes`): the new experiments are never
    published on the branch's old code."""
    repo = location.repo
    if on is None or checkout is None or target == view.default():
        return on
    if kgit.is_ancestor(repo, checkout, on):
        return on  # it holds the checkout's code already
    if kgit.is_ancestor(repo, on, checkout):
        return checkout
    try:
        return gitmerge.merge_commits(
            repo, on, checkout, f"kexp sync: the checkout's code onto {target}",
            folder=location.folder, id_of=id_from_name,
        )  # fmt: skip
    except SyncConflictError as exc:
        raise checkout_clashes(location, view, target, on, exc) from None


def starts_again(branch: SideBranch) -> bool:
    """Whether the side branch (its ``local`` commit here; the ``remote_base``, when new
    here) starts again from the checkout's commit alone: it holds code commits the
    checkout's line does not (:func:`code_left`: the checkout restarted from an earlier
    commit), its pull request landed and the remote deleted it; a merge would bring the
    left line in. Raises :class:`~kexp.core.errors.SyncConflictError`
    when the branch holds such code and stays (kept on the remote, or not merged):
    :func:`kexp.storage.syncclash.line_left`."""
    location, view, target = branch.location, branch.view, branch.target
    local, checkout = branch.local, branch.checkout
    if checkout is None or target == view.default():
        return False
    there = branch.remote_base
    if local is not None:  # (listed, its commit fetched)
        there = view.known_tip(target) if branch.dry_run else view.branches().get(target)
    default = view.default()
    upstream = view.branches().get(default) if default else None
    for tip, where in ((there, f"{view.remote}/{target}"), (local, target)):
        left = [] if tip is None else code_left(location, tip, checkout, upstream)
        if left and there is None and view.landed(tip or ""):
            return True
        if left:
            raise refusal(location, view, target, where, str(tip), checkout, left)
    return False


def refuse_left(
    location: StoreLocation, view: RemoteView, target: str, tip: str, checkout: str | None
) -> None:
    """Raise :func:`kexp.storage.syncclash.line_left` when the remote's side branch
    ``target``, at ``tip`` (pushed by another clone while this sync ran), holds code the
    checkout's line left (:func:`code_left`): a merge would publish it with this clone's
    experiments."""
    if checkout is None or target == view.default():
        return
    default = view.default()
    left = code_left(location, tip, checkout, view.branches().get(default) if default else None)
    if left:
        raise refusal(location, view, target, f"{view.remote}/{target}", tip, checkout, left)


def refusal(
    location: StoreLocation,
    view: RemoteView,
    target: str,
    where: str,
    tip: str,
    checkout: str,
    left: list[str],
) -> SyncConflictError:
    """The refusal to publish to the side branch ``target`` (``where`` holds it, at
    ``tip``) whose code the checkout's line left (``left``: the files): a commit of it
    the checkout holds amended or rebased with another change (the same author, date
    and subject: :func:`kexp.gitops.rewrites.rewritten_commits`) is named
    (:func:`kexp.storage.syncclash.rewritten_left`); else the line left
    (:func:`kexp.storage.syncclash.line_left`)."""
    repo, folder = location.repo, location.folder
    copies = rewrites.patch_copies(repo, tip, checkout, folder)
    rewritten = rewrites.rewritten_commits(repo, tip, checkout, folder, skip=copies)
    if rewritten:
        return rewritten_left(location, view, target, where, rewritten, left)
    return line_left(location, view, target, where, tip, left)


def code_left(
    location: StoreLocation, tip: str, checkout: str, upstream: str | None = None
) -> list[str]:
    """The code files of a side branch's commit ``tip`` that the checkout's line left:
    changed by commits of ``tip`` the checkout does not descend from (merges aside) on
    the branch's own line (its first parents), or that the remote's default branch (at
    ``upstream``) lacks too, named where they clash with the checkout's
    (:func:`kexp.storage.syncclash.code_clash`), unless the checkout holds every
    experiment of ``tip`` (its pull request squashed there and pulled); the default
    branch's other commits (merged onto the branch when it started again after a squash)
    count only where they clash. [] when the checkout descends from ``tip`` (or ``tip``
    from the checkout)."""
    repo = location.repo
    if tip == checkout or kgit.is_ancestor(repo, tip, checkout):
        return []
    if kgit.is_ancestor(repo, checkout, tip):
        return []
    folder = location.folder
    bases = [checkout] if upstream is None else [checkout, upstream]
    copies = rewrites.patch_copies(repo, tip, checkout, folder)  # rebased, the same patch
    left = gitdivergence.code_left(
        repo, tip, bases, folder, skip=copies
    ) or gitdivergence.code_left(
        repo, tip, [checkout], folder, first_parent=True, skip=copies
    )  # (its own line: the default branch's commits merged in come by second parents)
    if copies and not left:
        return []  # every code commit of it the checkout holds rebased: merged on
    if left and gitdivergence.unpublished_paths(repo, tip, [checkout], location.folder):
        return code_clash(location, checkout, tip) or left
    return code_clash(location, checkout, tip)


def landed_base(repo: Any, view: RemoteView, checkout: str, squashed: str | None = None) -> str:
    """The commit a side branch whose pull request was squashed starts again from: the
    remote's default branch (which holds the squash), merged with the checkout when both
    moved; the checkout alone when the remote has no default branch, or the two
    conflict. ``squashed``: the side branch's commit here (what was squashed): the
    merge takes the default branch as made on the last commit of the checkout that it
    holds, so that the checkout's code squashed there is not a rival change of itself."""
    default = view.default()
    upstream = view.branches().get(default) if default else None
    if upstream is None or kgit.is_ancestor(repo, upstream, checkout):
        return checkout
    if kgit.is_ancestor(repo, checkout, upstream):
        return upstream
    shared = None if squashed is None else kgit.merge_bases(repo, squashed, checkout)
    with contextlib.suppress(SyncConflictError):
        message = f"Start again from {view.remote}/{default}, which holds what landed"
        return gitmerge.merge_commits(
            repo, checkout, upstream, message, folder=view.folder, id_of=id_from_name,
            theirs_on=shared[0] if shared else None,
        )  # fmt: skip
    return checkout
