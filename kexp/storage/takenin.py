"""What ``kexp sync --branch`` takes into the working tree from the side branch: another
clone's newer version of an experiment this clone published there (a reviewer's
correction committed on the pull request's branch).

The working tree's file is compared with what this clone published (the record of
:mod:`kexp.storage.published`) and with the branch's: unchanged here since and changed
there, the branch's version is written into the working tree (and recorded), so that
the next edit is made on it and no sync publishes the older version over it; changed on
both sides (and the local branch not set to the remote's by hand), the sync stops
before anything changes, naming the files and what settles them. A file the working
tree holds as the branch does is recorded as such."""

from __future__ import annotations

import shlex
from pathlib import Path
from typing import TYPE_CHECKING

from kexp.core.advice import SETTLE_BESIDE
from kexp.core.errors import SyncConflictError
from kexp.gitops import commits as gitcommits
from kexp.gitops import git as kgit
from kexp.gitops import objects as gitobjects
from kexp.storage import atomic
from kexp.storage.published import Record
from kexp.storage.rows import content_key
from kexp.storage.syncclash import in_checkout
from kexp.storage.syncresult import listing

if TYPE_CHECKING:
    from kexp.storage.snapshot import StoreLocation


def take_in(
    location: StoreLocation,
    remote: str,
    target: str,
    tip: str | None,
    local: str | None = None,
    *,
    dry_run: bool = False,
    stop: bool = True,
    rewritten: bool = False,
) -> list[str]:
    """Bring the side branch ``target``'s versions at ``tip`` (the remote's branch, or
    the branch once merged) into the working tree where its file is as this clone
    published it and ``tip`` holds a version made on it: the files taken in (a dry run:
    those it would take, nothing written). A file changed both here and at ``tip``
    since this clone published it is the merge's to settle while the local branch (at
    ``local``) holds the version this clone published (its commit of the working tree's
    is merged with ``tip``'s, line by line, and taken in once merged); when the branch
    moved past it (brought up to date with git), with ``stop``, raises
    :class:`~kexp.core.errors.SyncConflictError` naming those files, before anything
    changes (the working tree's versions saved in git's objects, and said, so that
    neither is lost): committed there, the working tree's would undo ``tip``'s.
    ``rewritten``: ``tip`` holds a rewrite of every commit of the local branch it lacks
    (a reviewer amended the published commit and force-pushed): its versions count as
    made on this clone's although its history lacks them."""
    repo, top = location.repo, location.toplevel
    record = Record.read(repo, target)
    paths = sorted(p for p in record.files if p not in record.removed)
    if tip is None or not paths:
        return []
    theirs = gitcommits.path_blobs(repo, tip, paths)
    based = gitcommits.path_blobs(repo, local, paths) if local else {}
    seen: dict[str, str] = {}
    changed: dict[str, str] = {}  # changed at tip since this clone published: path → here
    for path, blob in theirs.items():
        try:
            here = content_key((top / path).read_bytes()).hex()
        except OSError:
            continue  # removed here, or not a file: the sync's removals see to it
        published = record.files[path]
        if here == blob != published:
            seen[path] = blob  # taken in by hand: this clone holds the branch's now
        elif here != blob != published:
            changed[path] = here
    # (only where tip descends from it: a commit made here whose push failed never
    # reached the branch, and is the merge's to settle)
    held = gitobjects.path_history_blobs(repo, tip, sorted(changed)) if changed else set()
    after = {p: here for p, here in changed.items() if rewritten or record.files[p] in held}
    taken = [p for p, here in after.items() if here == record.files[p]]
    clashes = [p for p, here in after.items() if p not in taken and based.get(p) != record.files[p]]
    if clashes and stop:
        raise _changed_both(location, remote, target, str(tip), clashes)
    if dry_run or not (taken or seen):
        return taken
    contents = dict(kgit.iter_blobs(repo, [theirs[p] for p in taken]))
    for path in taken:
        data = contents.get(theirs[path])
        if data is not None:
            atomic.replace(top / path, data)
            seen[path] = theirs[path]
    record.files.update(seen)
    record.write(repo, target)
    return [p for p in taken if p in seen]


def _changed_both(
    location: StoreLocation, remote: str, target: str, tip: str, paths: list[str]
) -> SyncConflictError:
    """The stop of a sync whose side branch ``target`` holds, at ``tip``, another clone's
    correction of ``paths`` that this clone changed too since it published them, with
    the commands that settle it as written: the working tree's version published over
    it (theirs taken in and synced, so that this clone has seen it, then yours put back
    from git's objects), or theirs taken instead."""
    git, shown = in_checkout(location)
    here = Path.cwd().resolve()
    kexp = ["kexp"] if location.root == here or location.root in here.parents else [
        "kexp", "--root", str(location.root)
    ]  # fmt: skip
    mine = gitobjects.save_blobs(location.repo, [location.toplevel / p for p in paths])
    take = shlex.join([*git, "restore", "--source", tip[:12], "--", *map(shown, paths)])
    sync = shlex.join([*kexp, "sync", "--branch", target])
    back = [f"{shlex.join([*git, 'cat-file', 'blob', b])} > {shlex.quote(shown(p))}"
            for p, b in zip(paths, mine, strict=True)]  # fmt: skip
    keep = " && ".join([take, sync, *back])
    ref = f"{remote}/{target}"
    saved = ", ".join(f"{shown(p)} as {b[:12]}" for p, b in zip(paths, mine, strict=True))
    return SyncConflictError(
        f"kexp sync stopped: {listing(paths)} changed both here and on {ref} (another "
        "clone corrected it there) since this clone published it; nothing was changed "
        f"(your version is kept as it is, and saved in git: {saved}; the remote is "
        "untouched): " + SETTLE_BESIDE.say(ref=ref, keep=keep, take=take, branch=target),
        paths,
    )
