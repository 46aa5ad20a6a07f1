"""What one line of commits holds that another lacks: the experiment files a publication
brings, the code outside the store it brings or leaves, the commits counted; built on
:func:`kexp.gitops.git.git_command` (all git access goes through it)."""

from __future__ import annotations

from collections.abc import Collection, Sequence
from typing import TYPE_CHECKING

from kexp.gitops.git import git_command, toplevel
from kexp.gitops.objects import object_names

if TYPE_CHECKING:
    import git


def unpublished_paths(repo: git.Repo, commit: str, tips: Sequence[str], folder: str) -> list[str]:
    """The files under ``folder`` that publishing ``commit`` would bring to a remote
    whose branches point at ``tips``: changed (added, edited or deleted) on ``commit``'s
    side since it forked from every one of them, and not alike in that one. A commit
    each change of which some branch holds (level, behind, ahead by code alone, squashed
    or merged from several branches) brings none. ``folder`` is a checked name."""
    if not tips:
        return sorted(
            p for p in git_command(
                repo, "ls-tree", "-r", "--name-only", commit, "--", f":(literal){folder}"
            ).stdout.splitlines()
        )  # fmt: skip
    if count_commits(repo, commit, tips) == 0:
        return []  # every commit of it is on one of the branches
    spec = f":(literal){folder}"
    pending: set[str] | None = None
    for tip in tips:
        differing = set(
            git_command(
                repo, "diff", "--no-renames", "--name-only", tip, commit, "--", spec
            ).stdout.splitlines()
        )
        forked = git_command(repo, "merge-base", tip, commit, ok_codes=(0, 1))
        if forked.status == 0:  # else no common history: every difference counts
            differing &= set(
                git_command(
                    repo, "diff", "--no-renames", "--name-only", forked.stdout.strip(), commit,
                    "--", spec,
                ).stdout.splitlines()
            )  # fmt: skip
        pending = differing if pending is None else pending & differing
        if not pending:
            return []
    return sorted(pending or ())


def held_files(repo: git.Repo, paths: Sequence[str], tips: Sequence[str]) -> set[str]:
    """The working tree's files among ``paths`` (repository paths) that one of the
    commits ``tips`` holds alike (the same blob at the same path)."""
    if not paths or not tips:
        return set()
    top = toplevel(repo)
    blobs = git_command(
        repo, "hash-object", "--no-filters", "--stdin-paths",
        stdin="".join(f"{top / p}\n" for p in paths),
    ).stdout.split()  # fmt: skip
    held: set[str] = set()
    for tip in tips:
        found = object_names(repo, [f"{tip}:{p}" for p in paths])
        held.update(
            p for p, blob, there in zip(paths, blobs, found, strict=True)
            if there is not None and there[0] == blob
        )  # fmt: skip
    return held


def changed_both_ways(repo: git.Repo, seen: str, tip: str, folder: str) -> list[str]:
    """The working tree's files under ``folder`` that ``tip`` changed since ``seen`` (a
    commit before it) and the working tree holds otherwise than ``tip`` does: changed
    here too, or as ``seen`` had them."""
    spec = f":(top,literal){folder}"
    changed = git_command(
        repo, "diff", "--no-renames", "--name-only", "-z", seen, tip, "--", spec
    ).stdout.split("\0")[:-1]
    top = toplevel(repo)
    present = [p for p in changed if (top / p).is_file()]
    return sorted(set(present) - held_files(repo, present, [tip]))


def code_brought(repo: git.Repo, remote_tip: str, tip: str, folder: str) -> list[str]:
    """The commits (``abbreviated-hash subject``, newest first) by which pushing ``tip``
    (merged with ``remote_tip`` first, when it is not its descendant) changes files
    outside ``folder`` (a checked name) on the remote: the files ``tip``'s side changed
    since the two forked and holds otherwise than ``remote_tip`` (changes that cancel
    out, or that the remote holds already, squashed, change nothing); a merge that
    changed one itself counts. Empty: the push leaves every other file as it is."""
    forked = git_command(repo, "merge-base", tip, remote_tip, ok_codes=(0, 1)).stdout.strip()
    since = forked or remote_tip
    spec = f":(top,exclude,literal){folder}"
    changed = git_command(repo, "diff", "--no-renames", "--name-only", "-z", since, tip, "--", spec)
    paths = changed.stdout.split("\0")[:-1]
    if not paths:
        return []
    # Of those, the ones the two tips hold otherwise: content, mode or a submodule's commit.
    differing = git_command(
        repo, "diff", "--no-renames", "--name-only", "-z", remote_tip, tip, "--", *paths,
        env={"GIT_LITERAL_PATHSPECS": "1"},
    ).stdout.split("\0")[:-1]  # fmt: skip
    if not differing:
        return []
    found = git_command(
        repo, "log", "--format=%h %s", tip, "--not", remote_tip, "--",
        *(f":(top,literal){p}" for p in differing),
    ).stdout.splitlines()  # fmt: skip
    return found or [f"{tip[:7]} (changing {', '.join(differing[:3])})"]


def commits_outside(repo: git.Repo, tip: str, base: str, folder: str) -> list[str]:
    """The commits of ``tip`` that ``base`` lacks (merges aside) changing a file outside
    ``folder`` (a checked name), as ``abbreviated-hash subject``, newest first: every
    one, also behind a merge that left those files as one of its parents had them (a
    squash merge's branch merged in), which git's history simplification would hide."""
    found = git_command(
        repo, "log", "--no-merges", "--full-history", "--format=%h %s", tip, "--not", base, "--",
        f":(top,exclude,literal){folder}",
    ).stdout  # fmt: skip
    return found.splitlines()


def code_left(
    repo: git.Repo,
    tip: str,
    bases: Sequence[str],
    folder: str,
    *,
    first_parent: bool = False,
    skip: Collection[str] = (),
) -> list[str]:
    """The files outside ``folder`` (a checked name) that the commits of ``tip`` which
    none of ``bases`` holds (merges aside; with ``first_parent``, those of ``tip``'s
    first-parent line alone; those in ``skip`` aside) change: code their lines lack,
    sorted."""
    line = ["--first-parent"] if first_parent else []
    spec = f":(top,exclude,literal){folder}"
    commits: list[str] = [tip, "--not", *bases]
    if skip:
        listed = git_command(
            repo, "log", "--no-merges", *line, "--format=%H", *commits, "--", spec
        ).stdout.split()  # fmt: skip
        commits = ["--no-walk=unsorted", *(c for c in listed if c not in skip)]
        if len(commits) == 1:
            return []
    found = git_command(
        repo, "log", "--no-merges", *line, "--format=", "--name-only", "-z", *commits, "--", spec
    ).stdout  # fmt: skip
    return sorted({p.strip("\n") for p in found.split("\0") if p.strip("\n")})


def count_commits(repo: git.Repo, tip: str, others: Sequence[str]) -> int:
    """How many commits ``tip`` has that none of ``others`` has (all of them without
    ``others``)."""
    args = ["rev-list", "--count", tip, *(["--not", *others] if others else [])]
    return int(git_command(repo, *args).stdout.strip() or 0)
