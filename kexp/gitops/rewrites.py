"""Commits rewritten after they were published: copied with the same patch (``git
cherry``: a rebase, or an amend of the message alone) or rewritten with another (an
amend), told apart for ``kexp sync --branch``; built on
:func:`kexp.gitops.git.git_command` (all git access goes through it)."""

from __future__ import annotations

from collections.abc import Collection
from typing import TYPE_CHECKING

from kexp.gitops.git import git_command

if TYPE_CHECKING:
    import git


def _code_commits(repo: git.Repo, tip: str, base: str, folder: str) -> list[str]:
    """The commits of ``tip`` that ``base`` lacks (merges aside) changing a file outside
    ``folder`` (a checked name), newest first."""
    return git_command(
        repo, "log", "--no-merges", "--format=%H", tip, "--not", base, "--",
        f":(top,exclude,literal){folder}",
    ).stdout.split()  # fmt: skip


def patch_copies(repo: git.Repo, tip: str, base: str, folder: str) -> set[str]:
    """The commits of ``tip`` that ``base`` lacks (merges aside) changing a file outside
    ``folder`` (a checked name) whose change ``base`` holds as a commit of its own with
    the same patch id (``git cherry``'s ``-``): copied by a rebase or a ``git commit
    --amend`` that changed nothing but the message or the commit it sits on."""
    code = _code_commits(repo, tip, base, folder)
    if not code:
        return set()
    cherry = git_command(repo, "cherry", base, tip).stdout.splitlines()
    return {line[2:].strip() for line in cherry if line.startswith("- ")} & set(code)


def rewritten_commits(
    repo: git.Repo, tip: str, base: str, folder: str, skip: Collection[str] = ()
) -> list[tuple[str, str]]:
    """The commits of ``tip`` that ``base`` lacks (merges aside; those in ``skip``
    aside) changing a file outside ``folder`` (a checked name) that ``base`` holds
    rewritten: a commit of ``base``'s that ``tip`` lacks, with the same author, author
    date and subject (``git commit --amend`` and ``git rebase`` keep them), and
    another patch. Pairs (the commit, its rewrite), each as ``abbreviated-hash
    subject``, newest first."""
    code = [c for c in _code_commits(repo, tip, base, folder) if c not in skip]
    if not code:
        return []
    shape = "%H%x00%h %s%x00%an <%ae> %at %s"

    def commits(*args: str) -> list[tuple[str, str, str]]:
        out = git_command(repo, "log", "--no-merges", f"--format={shape}", *args).stdout
        return [
            (h, shown, key) for h, shown, key in (line.split("\0") for line in out.splitlines())
        ]

    rewrites = {key: shown for _, shown, key in reversed(commits(base, "--not", tip))}
    mine = {h: (shown, key) for h, shown, key in commits("--no-walk=unsorted", *code)}
    return [
        (mine[h][0], rewrites[mine[h][1]]) for h in code if h in mine and mine[h][1] in rewrites
    ]
