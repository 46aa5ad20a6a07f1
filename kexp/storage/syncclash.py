"""When a sync's merge clashes: the conflict said in one line, with the commands that
settle it as written from the current folder (a merge by hand in the checkout, without
git's directory renames; the removal kept or the correction taken; for a branch made
beside the checkout, that branch set to the remote's and one version published), each
run as printed by the tests (``tests/test_sync_layout.py``, ``test_sync_guards.py``,
``test_advice_followed.py``); and a side branch whose code line the checkout left (it
restarted from an earlier commit), published under a new branch name
(``test_sync_restart.py``)."""

from __future__ import annotations

import os
import re
import shlex
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

from kexp.core.advice import (
    KEEP_REMOVAL,
    MERGE_BY_HAND,
    REMOVE_THERE,
    SETTLE_BESIDE,
    SHARE_MEANWHILE,
    SYNC_BRANCH_AGAIN,
    SYNC_CODE_CLASHES,
    SYNC_NEW_BRANCH,
    SYNC_REWRITTEN,
    TAKE_CORRECTION,
    Advice,
)
from kexp.core.errors import SyncConflictError
from kexp.gitops import commits as gitcommits
from kexp.gitops import git as kgit
from kexp.gitops import merge as gitmerge
from kexp.storage.published import kept_back
from kexp.storage.syncresult import listing

if TYPE_CHECKING:
    from kexp.storage.remoteview import RemoteView
    from kexp.storage.snapshot import StoreLocation


def conflict_said(
    location: StoreLocation,
    local: str,
    remote_tip: str,
    remote: str,
    target: str,
    alike: list[str],
    exc: SyncConflictError,
    *,
    beside: bool,
    view: RemoteView | None = None,
) -> SyncConflictError:
    """The clash ``exc`` of merging the local branch (at ``local``) with ``remote``'s
    ``target`` (at ``remote_tip``), said with what settles it: for a branch made
    ``beside`` the checkout (``--branch``), its experiments' clash settled there
    (:func:`_settle_beside`); an experiment removed on one side and corrected on the
    other (:func:`_removed_and_corrected`); else the same experiment corrected on both
    sides, or git's words for another clash (a file where the other side has a folder),
    with the merge by hand that works (:func:`merge_by_hand`, given ``alike``); for a
    branch made beside the checkout whose code clashes (given the ``view``), the code
    line published under a new branch name (:func:`line_left`: a merge by hand in the
    checkout would merge the side branch into it)."""
    if beside and all(location.is_experiment(p) for p in exc.paths):
        return _settle_beside(location, local, remote_tip, remote, target, exc)
    code = [p for p in exc.paths if not p.startswith(f"{location.folder}/")]
    if beside and view is not None and code:
        return line_left(location, view, target, f"{remote}/{target}", remote_tip, code)
    if exc.conflicts and all(c.startswith("CONFLICT (modify/delete)") for c in exc.conflicts):
        return _removed_and_corrected(location, local, remote_tip, f"{remote}/{target}", exc)
    corrected = all(location.is_experiment(p) for p in exc.paths) and all(
        line.startswith(("CONFLICT (content)", "CONFLICT (add/add)")) for line in exc.conflicts
    )
    what = (
        f"{listing(exc.paths)} changed both here and on {remote}/{target} (the same "
        "experiment corrected on both sides)"
        if corrected
        else f"merging {remote}/{target} clashes here, git says: "
        + " ".join(exc.conflicts or [f"{listing(exc.paths)} changed on both sides"])
    )
    return SyncConflictError(
        f"kexp sync stopped: {what}; nothing was changed (the local commit "
        f"{local[:12]} is kept, the remote is untouched): "
        + merge_by_hand(location, f"{remote}/{target}", alike, MERGE_BY_HAND)
        + (f"; {SHARE_MEANWHILE}" if corrected and not beside else ""),
        exc.paths,
        exc.conflicts,
    )


def _settle_beside(
    location: StoreLocation,
    local: str,
    remote_tip: str,
    remote: str,
    target: str,
    exc: SyncConflictError,
) -> SyncConflictError:
    """The clash of experiments published with ``--branch`` (their files in the working
    tree, the branch beside the checkout) with what another clone pushed to ``target``
    since, with the commands that settle it as written: the branch set to the remote's,
    then the working tree's version published (kept) or the remote's taken into the
    working tree. (A merge by hand in the checkout would merge the side branch into it.)"""
    git, shown = in_checkout(location)
    reset = shlex.join([*git, "branch", "-f", target, remote_tip[:12]])
    theirs = gitcommits.path_blobs(location.repo, remote_tip, exc.paths)
    taken = [p for p in exc.paths if p in theirs]
    gone = [p for p in exc.paths if p not in theirs]
    take = [reset]
    if taken:
        take.append(
            shlex.join([*git, "restore", "--source", remote_tip[:12], "--"])
            + " "
            + shlex.join(shown(p) for p in taken)
        )
    if gone:
        take.append(shlex.join(["rm", "-f", "--", *(shown(p) for p in gone)]))
    return SyncConflictError(
        f"kexp sync stopped: {listing(exc.paths)} changed both here and on "
        f"{remote}/{target} since this clone published or fetched it; nothing was changed (the "
        f"local branch {target} keeps its commit {local[:12]}, the remote is untouched): "
        + SETTLE_BESIDE.say(
            ref=f"{remote}/{target}", keep=reset, take=" && ".join(take), branch=target
        ),
        exc.paths,
        exc.conflicts,
    )


def _removed_and_corrected(
    location: StoreLocation, local: str, remote_tip: str, ref: str, exc: SyncConflictError
) -> SyncConflictError:
    """The conflict of experiments one side removed and the other corrected (``ref``, at
    ``remote_tip``), with the commands that settle it as written (a merge by hand would
    not: git takes a file much like the removed one, added beside its removal, for it
    renamed, and applies the correction to it)."""
    git, shown = in_checkout(location)

    def run(*args: str, files: list[str], then: str) -> str:
        """``git ARGS -- FILES && git commit -m THEN``, as printed for the current folder."""
        named = shlex.join([*git, *args, "--", *(shown(p) for p in files)])
        return f"{named} && {shlex.join([*git, 'commit', '-q', '-m', then])}"

    here = sorted(gitcommits.path_blobs(location.repo, local, exc.paths))  # corrected here
    there = [p for p in exc.paths if p not in here]  # removed here, corrected on ref
    steps = []
    if here:
        restore = [*git, "restore", "-SW", "--source", local[:12], "--"]
        steps.append(
            KEEP_REMOVAL.say(
                ref=ref,
                files=listing(here),
                command=run("rm", "-q", files=here, then=f"Keep the removal {ref} made"),
                restore=shlex.join([*restore, *(shown(p) for p in here)]),
            )
        )
    if there:
        source = ("restore", "-SW", "--source", remote_tip[:12])
        steps.append(
            TAKE_CORRECTION.say(
                ref=ref,
                files=listing(there),
                command=run(*source, files=there, then=f"Take the correction {ref} made"),
            )
        )
    return SyncConflictError(
        f"kexp sync stopped: {listing(exc.paths)} removed on one side and corrected on the "
        f"other ({ref}); nothing was changed (the local commit {local[:12]} is kept, the "
        f"remote is untouched): " + "; ".join(steps),
        exc.paths,
        exc.conflicts,
    )


def kept_there(
    location: StoreLocation, remote: str, branch: str, commit: str | None
) -> tuple[tuple[str, ...], str]:
    """The files ``kexp rm`` removed here that another clone published to the side
    branch ``branch``, which its commit ``commit`` (None: none, or not a side branch)
    keeps (:func:`kexp.storage.published.kept_back`), and what removes them there too
    (:func:`remove_there`; "" when there are none)."""
    found = kept_back(location.repo, commit, location.toplevel)
    return tuple(found), remove_there(location, remote, branch, found) if found else ""


def remove_there(location: StoreLocation, remote: str, branch: str, paths: list[str]) -> str:
    """:data:`~kexp.core.advice.REMOVE_THERE` with the commands, as written from the
    current folder, that remove ``paths`` (repository paths) from ``remote``'s side
    branch ``branch`` in a worktree made for it in the git folder, and push."""
    git, _ = in_checkout(location)
    scratch = str(gitcommits.worktree_git_dir(location.repo) / "kexp" / "remove-there")
    there = ["git", "-C", scratch]
    steps = [
        [*git, "fetch", "-q", remote, branch],
        [*git, "worktree", "add", "-q", "--detach", scratch, f"{remote}/{branch}"],
        [*there, "rm", "-q", "--", *paths],
        [*there, "commit", "-q", "-m", f"Remove {len(paths)} experiment file(s)"],
        [*there, "push", "-q", remote, f"HEAD:refs/heads/{branch}"],
        [*git, "worktree", "remove", scratch],
    ]
    return REMOVE_THERE.say(branch=branch, command=" && ".join(shlex.join(s) for s in steps))


def in_checkout(location: StoreLocation) -> tuple[list[str], Callable[[str], str]]:
    """How a command printed for the current folder runs git in the checkout (``git``,
    or ``git -C TOP`` from outside it), and names a repository path there."""
    top = location.toplevel.resolve()
    here = Path.cwd().resolve()
    if here == top or top in here.parents:
        return ["git"], lambda path: os.path.relpath(top / path, here)
    return ["git", "-C", str(top)], lambda path: str(top / path)


def merge_by_hand(location: StoreLocation, ref: str, alike: list[str], advice: Advice) -> str:
    """``advice`` naming the commands that merge ``ref`` in the checkout by hand, as
    written from the current folder, without git's directory-rename detection (as kexp
    merges: :func:`kexp.gitops.merge.merge_commits`): ``git merge`` refuses while files
    ``ref`` holds as the working tree has them (``alike``: repository paths; the files
    ``kexp sync --branch`` published, untracked here, once their pull request landed) are
    untracked or changed here ("untracked working tree files would be overwritten by
    merge"), so they are removed first; the merge brings them back as they are."""
    git, shown = in_checkout(location)
    merge = [*git, "-c", "merge.directoryRenames=false", "merge", ref]
    if not alike:
        return advice.say(command=shlex.join(merge))
    paths = [shown(p) for p in alike]
    return (
        advice.say(command=f"{shlex.join(['rm', '--', *paths])} && {shlex.join(merge)}")
        + f" ({ref} holds the {len(alike)} file(s) removed as they are here: the merge "
        "brings them back)"
    )


def invalid_beside(
    location: StoreLocation, target: str, ref: str, remote_tip: str, merged: str
) -> str:
    """What settles a merge of the side branch ``target`` with ``ref`` (at
    ``remote_tip``) that would publish an invalid experiment (``merged``), as written
    from the current folder: the branch set to the remote's, the experiments this clone
    removed that the remote's branch holds (another clone's builds on them) brought back
    into the working tree, and the sync run again (a merge by hand in the checkout would
    merge the side branch into it)."""
    git, shown = in_checkout(location)
    folder = location.folder

    def files(commit: str) -> set[str]:
        return {e.path for e in kgit.list_tree(location.repo, commit, folder)}

    gone = sorted(p for p in files(remote_tip) - files(merged) if location.is_experiment(p))
    reset = shlex.join([*git, "branch", "-f", target, remote_tip[:12]])
    again = SYNC_BRANCH_AGAIN.say(branch=target)
    if not gone:
        return f"run {reset} ({target} as {ref} has it), fix the working tree's files, {again}"
    restore = shlex.join(
        [*git, "restore", "--source", remote_tip[:12], "--", *(shown(p) for p in gone)]
    )
    return (
        f"to keep what {ref} builds on ({listing(gone)}, removed here), run {reset} && "
        f"{restore}, {again}"
    )


def code_clash(location: StoreLocation, checkout: str, tip: str) -> list[str]:
    """The files outside the store's folder on which merging ``tip`` into ``checkout``
    (as a sync merges: :func:`kexp.gitops.merge.merge_commits`) clashes: the two hold
    code lines changed otherwise since they parted (the checkout restarted from an
    earlier commit of ``tip``'s line); [] when they merge there cleanly."""
    try:
        gitmerge.merge_commits(location.repo, checkout, tip, "kexp sync: a trial merge")
    except SyncConflictError as exc:
        return [p for p in exc.paths if not p.startswith(f"{location.folder}/")]
    return []


def line_left(
    location: StoreLocation, view: RemoteView, target: str, where: str, tip: str, paths: list[str]
) -> SyncConflictError:
    """The refusal to publish to the side branch ``target`` (``where`` holds it, at
    ``tip``) a code line that left the branch's: ``paths`` changed by commits of the
    branch the checkout does not descend from (where they clash: :func:`code_clash`;
    :func:`kexp.storage.sidebranch.code_left`): merging would bring the branch's code
    into that line, and publishing on the branch's code would put experiments on code
    they were not measured on, so the line goes under a new branch name, a pull request
    of its own."""
    default = view.default()
    if default is not None and view.landed(tip):
        why = (
            f"its pull request landed on {view.remote}/{default}, and publishing there "
            "would merge that code into yours (kexp never force-pushes)"
        )
    else:
        why = (
            "its pull request is not merged, and publishing there would put your "
            "experiments on code they were not measured on, or merge the two lines"
        )
    return SyncConflictError(
        f"kexp sync did nothing: {where} holds code your checkout's line does not "
        f"({listing(paths)} changed by commits your checkout does not descend from: it "
        f"restarted from an earlier commit, or another line was published there); {why}: "
        + SYNC_NEW_BRANCH.say(branch=new_branch_name(location, view, target)),
        paths,
    )


def checkout_clashes(
    location: StoreLocation, view: RemoteView, target: str, on: str, exc: SyncConflictError
) -> SyncConflictError:
    """The refusal to publish to the side branch ``target`` (at ``on``) when merging the
    checkout's code onto it clashes (``exc``: the branch changed the same code otherwise,
    by commits the checkout holds rebased with the same patch, or main's merged in):
    publishing on the branch's old code would put the experiments on code they were not
    measured on, so they stay in the working tree and go under a new branch name."""
    code = [p for p in exc.paths if not p.startswith(f"{location.folder}/")] or exc.paths
    return SyncConflictError(
        f"kexp sync did nothing: merging your checkout's code onto {target} (at "
        f"{on[:12]}) clashes in {listing(code)}, which {target} holds changed otherwise; "
        "publishing there on its old code would put your experiments on code they were "
        "not measured on: " + SYNC_CODE_CLASHES.say(branch=new_branch_name(location, view, target)),
        exc.paths,
        exc.conflicts,
    )


def rewritten_left(
    location: StoreLocation,
    view: RemoteView,
    target: str,
    where: str,
    rewritten: list[tuple[str, str]],
    paths: list[str],
) -> SyncConflictError:
    """The refusal to publish to the side branch ``target`` (``where`` holds it) whose
    commits the checkout holds rewritten with another change (``rewritten``: pairs of
    the published commit and its rewrite, ``abbreviated-hash subject``; ``paths``: the
    code they change): a merge would publish both versions, and kexp never
    force-pushes, so the rewritten line goes under a new branch name."""
    (old, new), more = rewritten[0], len(rewritten) - 1
    others = f" (and {more} more commit(s) so)" if more else ""
    return SyncConflictError(
        f"kexp sync did nothing: {where} holds {old}, which it published and your checkout "
        f"holds rewritten as {new}{others}, amended or rebased with another change "
        f"({listing(paths)}); publishing there would merge the old version with the new "
        "one, and kexp never force-pushes: "
        + SYNC_REWRITTEN.say(branch=new_branch_name(location, view, target)),
        paths,
    )


def new_branch_name(location: StoreLocation, view: RemoteView, target: str) -> str:
    """A name for a new side branch beside ``target`` that neither this clone nor the
    remote has: ``target-2`` (``kexp/a-3`` beside ``kexp/a-2``), counting up."""
    found = re.fullmatch(r"(.+)-([0-9]+)", target)
    stem, n = (found.group(1), int(found.group(2)) + 1) if found else (target, 2)
    taken = set(view.listed())
    while (name := f"{stem}-{n}") in taken or gitcommits.ref_commit(
        location.repo, f"refs/heads/{name}"
    ):
        n += 1
    return name
