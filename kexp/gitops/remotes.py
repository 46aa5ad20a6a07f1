"""A remote's branches as kexp sync meets them: listed, fetched, pruned and pushed to;
built on :func:`kexp.gitops.git.git_command` (all git access goes through it)."""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Collection, Mapping, Sequence
from typing import TYPE_CHECKING

from kexp.core.errors import GitError
from kexp.gitops.commits import check_branch_name, ref_commit
from kexp.gitops.git import (
    LOCK_EXISTS,
    git_command,
    is_ancestor,
    is_hex,
    is_ref_name,
    translate_error,
)
from kexp.gitops.objects import object_names

if TYPE_CHECKING:
    import git


def remote_branches(repo: git.Repo, remote: str) -> tuple[dict[str, str], str | None]:
    """``remote``'s branches as it has them now (one ``git ls-remote``): name → commit,
    and its default branch (what its ``HEAD`` names; None when it names none).
    ``remote`` is a checked name."""
    listed = git_command(
        repo, "ls-remote", "--symref", "--end-of-options", remote, "HEAD", "refs/heads/*"
    )
    branches: dict[str, str] = {}
    default = None
    for line in listed.stdout.splitlines():
        tip, _, ref = line.partition("\t")
        if tip.startswith("ref: refs/heads/") and ref == "HEAD":
            default = tip.removeprefix("ref: refs/heads/")
        elif ref.startswith("refs/heads/"):
            branches[ref.removeprefix("refs/heads/")] = tip
    return branches, default


def held_commits(repo: git.Repo, commits: Sequence[str]) -> set[str]:
    """Those of ``commits`` (full hashes) this clone holds."""
    found = object_names(repo, [f"{c}^{{commit}}" for c in commits])
    return {c for c, kind in zip(commits, found, strict=True) if kind is not None}


def fetch_branch(repo: git.Repo, remote: str, branch: str) -> str | None:
    """Fetch ``branch`` from ``remote`` into ``refs/remotes/REMOTE/BRANCH``; the commit
    it points at, None when the remote has no such branch."""
    check_branch_name(branch)
    if not is_ref_name(remote):
        raise GitError(f"{remote!r} is not a remote name")
    tracking = f"refs/remotes/{remote}/{branch}"
    found = git_command(
        repo, "fetch", "-q", "--no-tags", "--end-of-options", remote,
        f"+refs/heads/{branch}:{tracking}", ok_codes=None,
    )  # fmt: skip
    if found.status != 0:
        if "couldn't find remote ref" in found.stderr.lower():
            # Gone from the remote (merged and deleted, or another remote's URL): its
            # remote-tracking branch goes too, as git fetch --prune does.
            git_command(repo, "update-ref", "-d", tracking)
            return None
        raise translate_error(repo, "fetch", found.stderr)
    return ref_commit(repo, tracking)


def prune_tracking(repo: git.Repo, remote: str, listed: Collection[str]) -> list[str]:
    """Delete the remote-tracking branches of ``remote`` (a checked name) whose branch
    it no longer has (``listed``: its branches now, one ``git ls-remote``), as ``git
    fetch --prune`` does, each only if it did not move meanwhile; the names deleted."""
    found = git_command(
        repo, "for-each-ref", "--format=%(objectname) %(refname)", f"refs/remotes/{remote}/"
    ).stdout.split("\n")  # fmt: skip
    prefix = f"refs/remotes/{remote}/"
    stale = [
        (ref, tip)
        for tip, _, ref in (line.partition(" ") for line in found if line)
        if ref.removeprefix(prefix) not in listed and ref != f"{prefix}HEAD"
    ]
    for ref, tip in stale:
        git_command(repo, "update-ref", "-d", ref, tip, ok_codes=None)
    return [ref.removeprefix("refs/remotes/") for ref, _ in stale]


def tracking_branches(repo: git.Repo, remote: str) -> dict[str, str]:
    """This clone's remote-tracking branches of ``remote`` (a checked name): the
    branch's name → its commit (``REMOTE/HEAD`` left out)."""
    prefix = f"refs/remotes/{remote}/"
    found = git_command(repo, "for-each-ref", "--format=%(objectname) %(refname)", prefix)
    pairs = (line.partition(" ") for line in found.stdout.splitlines() if line)
    return {ref.removeprefix(prefix): tip for tip, _, ref in pairs if ref != f"{prefix}HEAD"}


def track_branches(
    repo: git.Repo, remote: str, tips: Mapping[str, str], before: Mapping[str, str]
) -> list[str]:
    """Point this clone's remote-tracking branch of each of ``remote``'s branches
    ``tips`` (name → its commit on the remote, held here) at that commit, as ``git fetch
    REMOTE`` does, each only if it is still as ``before`` (:func:`tracking_branches`);
    the names of those moved (or made)."""
    wanted = sorted(
        (name, tip, before.get(name) or "0" * 40)
        for name, tip in tips.items()
        if before.get(name) != tip and is_ref_name(name) and is_hex(tip, 40)
    )
    message = f"kexp sync: fetch {remote}"
    lines = "".join(f"update refs/remotes/{remote}/{n}\0{tip}\0{was}\0" for n, tip, was in wanted)
    if (
        not wanted
        or git_command(
            repo, "update-ref", "-z", "--stdin", "-m", message, stdin=lines, ok_codes=None
        ).status
        == 0
    ):  # (one transaction; one that moved meanwhile fails it: one by one)
        return [name for name, _, _ in wanted]
    moved = []
    for name, tip, was in wanted:
        done = git_command(
            repo, "update-ref", "-m", message, f"refs/remotes/{remote}/{name}", tip, was,
            ok_codes=None,
        )  # fmt: skip
        if done.status == 0:
            moved.append(name)
    return moved


def tracking_holds(repo: git.Repo, remote: str, branch: str) -> bool:
    """Whether this clone's remote-tracking branch of ``remote``'s ``branch`` (checked
    names) holds this clone's ``branch`` commit: a push of it landed there (git moves the
    remote-tracking branch once the remote took the push), or a fetch saw it there."""
    local = ref_commit(repo, f"refs/heads/{branch}")
    tracking = ref_commit(repo, f"refs/remotes/{remote}/{branch}")
    return local is not None and tracking is not None and is_ancestor(repo, local, tracking)


def fetch_objects(repo: git.Repo, remote: str, branches: Sequence[str]) -> None:
    """Fetch the commits of ``remote``'s ``branches`` (checked names) into this clone's
    objects alone: no ref moves (no remote-tracking branch, no ``FETCH_HEAD``). A branch
    gone meanwhile is no error: its commit stays unknown."""
    if not is_ref_name(remote):
        raise GitError(f"{remote!r} is not a remote name")
    specs = [f"refs/heads/{b}" for b in branches if is_ref_name(b)]
    if not specs:
        return
    found = git_command(
        repo, "fetch", "-q", "--no-tags", "--no-write-fetch-head", "--refmap=",
        "--end-of-options", remote, *specs, ok_codes=None,
    )  # fmt: skip
    if found.status != 0 and len(specs) > 1:  # one of them gone: the others one by one
        for spec in specs:
            fetch_objects(repo, remote, [spec.removeprefix("refs/heads/")])


#: What git says of a push that lost a race (the remote moved since this clone fetched
#: it, or between its advertisement and the update): worth a fetch, a merge and a retry.
_PUSH_BEHIND = re.compile(
    r"fetch first|non-fast-forward|stale info|but expected|incorrect old value|"
    r"reference already exists",
    re.IGNORECASE,
)


@dataclasses.dataclass(frozen=True)
class PushOutcome:
    """What one push did: landed (``pushed``), lost a race (neither field set: fetch,
    merge and try again), or met a ref lock on the remote (``lock``: the file)."""

    pushed: bool
    lock: str = ""


def push_branch(repo: git.Repo, remote: str, commit: str, branch: str) -> PushOutcome:
    """Push ``commit`` to ``refs/heads/BRANCH`` on ``remote``, never forced.

    A push rejected because the remote moved meanwhile, or one that met a lock on the
    remote's ref, is an outcome (the caller decides whether to try again); any other
    refusal (a hook that declines, a protected branch, no permission) raises
    :class:`GitError` in the remote's own words."""
    check_branch_name(branch)
    if not is_ref_name(remote) or not is_hex(commit, 40):
        raise GitError(f"refused push of {commit!r} to {remote!r}")
    found = git_command(
        repo, "push", "-q", "--porcelain", remote,
        f"{commit}:refs/heads/{branch}", ok_codes=None,
    )  # fmt: skip
    if found.status == 0:
        return PushOutcome(True)
    # --porcelain: "!<TAB>FROM:TO<TAB>[rejected] (fetch first)" for the refused ref.
    refused = [line.split("\t") for line in found.stdout.splitlines() if line.startswith("!")]
    summary = refused[0][2].strip() if refused and len(refused[0]) > 2 else ""
    said = [
        line[len("remote:") :].strip()
        for line in found.stderr.splitlines()
        if line.startswith("remote:") and line[len("remote:") :].strip()
    ]
    words = " ".join(said)
    if not summary:  # no ref was tried: the remote could not be reached, ...
        raise translate_error(repo, "push", found.stderr or found.stdout)
    if _PUSH_BEHIND.search(summary) or _PUSH_BEHIND.search(words):
        return PushOutcome(False)
    lock = LOCK_EXISTS.search(words)
    if lock is not None:
        return PushOutcome(False, lock.group(1).replace("/./", "/"))
    reason = summary.removeprefix("[remote rejected]").removeprefix("[rejected]").strip()
    shown = words if len(words) <= 600 else words[:600] + " ..."
    raise GitError(
        f"{remote} refused the push to {branch} {reason or summary}"
        + (f", saying: {shown}" if shown else "")
    )


def default_branch(repo: git.Repo, remote: str) -> str | None:
    """``remote``'s default branch as this clone knows it (``refs/remotes/REMOTE/HEAD``,
    which a clone sets); None when unknown. ``remote`` is a checked name."""
    prefix = f"refs/remotes/{remote}/"
    found = git_command(repo, "symbolic-ref", "-q", f"{prefix}HEAD", ok_codes=None)
    name = found.stdout.strip()
    return name[len(prefix) :] if found.status == 0 and name.startswith(prefix) else None
