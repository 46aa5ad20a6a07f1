"""What fetched branches hold that this checkout has not taken in: the experiment files
commits on remote-tracking branches added or changed, not reachable from ``HEAD``, with
the blob of each one's newest version there. Two git processes (``for-each-ref``, one
``log`` over every such branch), whatever the store's size: cheap enough for every read
of the working tree alone to say it."""

from __future__ import annotations

from typing import TYPE_CHECKING

from kexp.gitops.git import git_command

if TYPE_CHECKING:
    import git

    from kexp.gitops.git import Worktree

#: Where git keeps the remote-tracking branches.
_TRACKING = "refs/remotes/"


def fetched_not_merged(repo: git.Repo | Worktree, folder: str) -> dict[str, dict[str, str]]:
    """The experiment files (``.md`` under ``folder``, a repository path) that commits
    of remote-tracking branches added or changed and ``HEAD`` does not reach, by the
    branch (``origin/kexp/b``) each was first found on, each with the blob of its newest
    version among those commits; empty without any such branch, commit or ``HEAD``."""
    listed = git_command(repo, "for-each-ref", "--format=%(refname)", _TRACKING)
    refs = [r for r in listed.stdout.splitlines() if r and not r.endswith("/HEAD")]
    if not refs:
        return {}
    found = git_command(
        repo, "log", "--format=%x00%S", "--raw", "--no-abbrev", "--no-renames",
        "--diff-filter=AM", "--source", "--end-of-options", *refs, "^HEAD", "--",
        f":(top,literal){folder.strip('/')}/",
        ok_codes=None,
    )  # fmt: skip
    if found.status != 0:  # no HEAD yet (an unborn branch): nothing to compare
        return {}
    seen: set[str] = set()
    by_ref: dict[str, dict[str, str]] = {}
    ref = ""
    for line in found.stdout.splitlines():
        if line.startswith("\0"):
            ref = line[1:].removeprefix(_TRACKING)
            continue
        # ":OLDMODE NEWMODE OLDBLOB NEWBLOB STATUS\tPATH", the newest version first
        status, _, path = line.partition("\t")
        fields = status.split()
        if len(fields) != 5 or not path.endswith(".md") or path.endswith("/README.md"):
            continue
        if path not in seen:
            seen.add(path)
            by_ref.setdefault(ref, {})[path] = fields[3]
    return by_ref
