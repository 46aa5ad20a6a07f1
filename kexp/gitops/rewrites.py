"""Commits rewritten after they were published: copied with the same patch (a rebase,
or an amend of the message alone: their patch ids, as ``git cherry`` compares them) or
rewritten with another (an amend), told apart for ``kexp sync --branch``; built on
:func:`kexp.gitops.git.git_command` (all git access goes through it)."""

from __future__ import annotations

from collections.abc import Collection
from typing import TYPE_CHECKING

from kexp.gitops.git import git_command

if TYPE_CHECKING:
    import git

    from kexp.gitops.git import Worktree


def _code_commits(repo: git.Repo, tip: str, base: str, folder: str) -> list[str]:
    """The commits of ``tip`` that ``base`` lacks (merges aside) changing a file outside
    ``folder`` (a checked name), newest first."""
    return git_command(
        repo, "log", "--no-merges", "--format=%H", tip, "--not", base, "--",
        f":(top,exclude,literal){folder}",
    ).stdout.split()  # fmt: skip


def patch_copies(repo: git.Repo, tip: str, base: str, folder: str) -> set[str]:
    """The commits of ``tip`` that ``base`` lacks (merges aside) changing a file outside
    ``folder`` (a checked name) whose patch id a commit of ``base`` that does not
    descend from them has too (``git rev-list --cherry-mark``'s ``=``, as ``git cherry``
    marks them): copied by a rebase, or a ``git commit --amend`` of the message alone,
    even once ``tip`` merged the copy in."""
    code = _code_commits(repo, tip, base, folder)
    marks: dict[str, bool] = {}
    for commit in code:  # newest first: one call marks its ancestors too, mostly
        if commit not in marks:
            found = git_command(
                repo, "rev-list", "--cherry-mark", "--right-only", "--no-merges",
                f"{base}...{commit}",
            ).stdout.split()  # fmt: skip
            marks.update((line[1:], line.startswith("=")) for line in found)
    return {commit for commit in code if marks.get(commit)}


def rewritten_commits(
    repo: git.Repo, tip: str, base: str, folder: str, skip: Collection[str] = ()
) -> list[tuple[str, str]]:
    """The commits of ``tip`` that ``base`` lacks (merges aside; those in ``skip``
    aside) changing a file outside ``folder`` (a checked name) that ``base`` holds
    rewritten: a commit of ``base``'s that does not descend from them, with the same
    author, author date and subject (``git commit --amend`` and ``git rebase`` keep
    them), and another patch. Pairs (the commit, its rewrite), each as
    ``abbreviated-hash subject``, newest first."""
    code = [c for c in _code_commits(repo, tip, base, folder) if c not in skip]
    if not code:
        return []
    shape = "%H%x00%h %s%x00%an <%ae> %at %s"

    def commits(*args: str) -> list[tuple[str, str, str]]:
        out = git_command(repo, "log", "--no-merges", f"--format={shape}", *args).stdout
        rows = (line.split("\0") for line in out.splitlines())
        return [(h, shown, key) for h, shown, key in rows]

    rewrites = {key: shown for _, shown, key in reversed(commits(base, "--not", *code))}
    mine = {h: (shown, key) for h, shown, key in commits("--no-walk=unsorted", *code)}
    return [
        (mine[h][0], rewrites[mine[h][1]]) for h in code if h in mine and mine[h][1] in rewrites
    ]


def rewritten_on(repo: git.Repo | Worktree, tip: str, base: str) -> bool:
    """Whether ``tip`` holds a rewrite of every commit of ``base`` it lacks (merges
    aside; at least one), as a branch force-pushed after a reviewer amended or rebased
    it has for the clone that published the commits it replaced: a commit of ``tip``'s
    that ``base`` lacks with the same author and author date and either the same
    parents and files changed (``git commit --amend`` keeps them, whatever its message
    and content) or the same subject (``git rebase`` keeps it). Another clone's commit
    on the same parent is no rewrite (another author, or another second, or files)."""
    mine = _identities(repo, base, "--not", tip)
    known = {key for keys in _identities(repo, tip, "--not", base) for key in keys}
    return bool(mine) and all(known.intersection(keys) for keys in mine)


def _identities(repo: git.Repo | Worktree, *args: str) -> list[tuple[str, str]]:
    """Each commit ``git log args`` lists (merges aside) as what a rewrite of it keeps:
    (its author, author date, parents and the files it changes), (its author, author
    date and subject)."""
    out = git_command(
        repo, "log", "--no-merges", "--format=%x00%an <%ae> %at%x01%P%x01%s", "--name-only",
        *args,
    ).stdout  # fmt: skip
    found = []
    for entry in out.split("\0")[1:]:
        head, _, paths = entry.partition("\n")
        author, parents, subject = head.split("\x01", 2)
        changed = "\n".join(sorted(line for line in paths.splitlines() if line))
        found.append((f"{author}\nparents {parents}\n{changed}", f"{author}\nsubject {subject}"))
    return found
