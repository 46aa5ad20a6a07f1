"""The local clone as ``kexp sync`` changes it: branch names and refs, the working
tree's state (an operation stopped halfway, changed files), the commits kexp makes and
the branches it moves; built on :func:`kexp.gitops.git.git_command` (all git access
goes through it). Merges are :mod:`kexp.gitops.merge`, a remote's branches
:mod:`kexp.gitops.remotes`."""

from __future__ import annotations

import contextlib
import dataclasses
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

from kexp.core.advice import SET_ASIDE
from kexp.core.errors import GitError
from kexp.gitops.git import (
    LOCK_EXISTS,
    MAX_REVISION_CHARS,
    git_command,
    head_commit,
    is_hex,
    is_ref_name,
    toplevel,
    translate_error,
)
from kexp.gitops.objects import object_names

if TYPE_CHECKING:
    from pathlib import Path

    import git


def check_branch_name(name: str) -> str:
    """``name`` if it can name a branch (``kexp/alice``); :class:`GitError` otherwise,
    before git sees it (options, ranges, ``HEAD``, ``refs/...``, invisible characters)."""
    if (
        not isinstance(name, str)
        or not is_ref_name(name)
        or name == "HEAD"
        or name.startswith("refs/")
        or len(name) > MAX_REVISION_CHARS
    ):
        raise GitError(
            f"{name!r} is not a branch name kexp accepts: give a plain branch name such as "
            "kexp/alice (letters, digits, '-', '_', '.', '/'; no options, spaces or ranges)"
        )
    return name


def current_branch(repo: git.Repo) -> str | None:
    """The checked-out branch's short name (None when ``HEAD`` is detached)."""
    found = git_command(repo, "symbolic-ref", "-q", "--short", "HEAD", ok_codes=(0, 1))
    return found.stdout.strip() or None if found.status == 0 else None


def ref_commit(repo: git.Repo, ref: str) -> str | None:
    """The commit a full ref name (``refs/heads/x``) points at, None when it does not
    exist. ``ref`` must be made of checked names."""
    if not ref.startswith("refs/") or not is_ref_name(ref):
        raise GitError(f"{ref!r} is not a full ref name")
    found = git_command(repo, "rev-parse", "-q", "--verify", f"{ref}^{{commit}}", ok_codes=(0, 1))
    return found.stdout.strip() or None


def remote_names(repo: git.Repo) -> list[str]:
    """The configured remotes (``git remote``)."""
    return git_command(repo, "remote").stdout.split()


def staged_paths(repo: git.Repo) -> list[str]:
    """Paths whose staged content differs from ``HEAD`` (relative to the root)."""
    if not _has_head(repo):
        output = git_command(repo, "ls-files", "-z").stdout
    else:
        output = git_command(repo, "diff", "--cached", "--name-only", "--no-renames", "-z").stdout
    return [p for p in output.split("\0") if p]


def _has_head(repo: git.Repo) -> bool:
    return git_command(repo, "rev-parse", "-q", "--verify", "HEAD", ok_codes=(0, 1)).status == 0


#: Files in the git folder that mark an operation stopped halfway, with the operation
#: in words and how to finish it (or give it up).
_UNFINISHED = (
    ("MERGE_HEAD", "a merge", "git add each file and git commit (or git merge --abort)"),
    ("CHERRY_PICK_HEAD", "a cherry-pick", "git add each file and git cherry-pick --continue"),
    ("REVERT_HEAD", "a revert", "git add each file and git revert --continue"),
    ("rebase-merge", "a rebase", "git add each file and git rebase --continue"),
    ("rebase-apply", "a rebase (or git am)", "git add each file and git rebase --continue"),
)


@dataclasses.dataclass(frozen=True)
class Unfinished:
    """A merge (rebase, cherry-pick, revert) stopped halfway in a working tree."""

    #: The operation in words (``a merge``); empty when only unmerged files tell.
    what: str
    #: How to finish it, in git commands.
    finish: str
    #: The files still unmerged (holding conflict markers), relative to the root.
    unmerged: tuple[str, ...]

    def describe(self, where: str) -> str:
        """One clause for a message: what is in progress and how to finish it."""
        what = self.what or "a merge"
        files = f" (unmerged: {', '.join(self.unmerged[:5])}" if self.unmerged else ""
        if len(self.unmerged) > 5:
            files += f" and {len(self.unmerged) - 5} more"
        files += ")" if self.unmerged else ""
        fix = "resolve the conflict in each file (remove the <<<<<<< ======= >>>>>>> lines), "
        return f"{what} is in progress in {where}{files}: " + (
            fix + self.finish if self.unmerged else f"finish it: {self.finish}"
        )


def unfinished_operation(repo: git.Repo) -> Unfinished | None:
    """The merge, rebase, cherry-pick or revert stopped halfway in ``repo``'s working
    tree (a conflict to resolve), None when there is none."""
    import os

    names = [name for name, _, _ in _UNFINISHED]
    args = [arg for name in names for arg in ("--git-path", name)]
    paths = git_command(repo, "rev-parse", *args).stdout.splitlines()
    top = toplevel(repo)
    output = git_command(repo, "ls-files", "-u", "-z").stdout
    unmerged = tuple(sorted({e.split("\t", 1)[1] for e in output.split("\0") if "\t" in e}))
    for (_, what, finish), path in zip(_UNFINISHED, paths, strict=False):
        if os.path.lexists(top / path):
            return Unfinished(what, finish, unmerged)
    if unmerged:
        return Unfinished("", _UNFINISHED[0][2], unmerged)
    return None


def changed_paths(repo: git.Repo, folder: str) -> list[str]:
    """Files under ``folder`` that differ from ``HEAD`` in the working tree: new
    (untracked, not ignored), changed or deleted, relative to the repository root."""
    output = git_command(
        repo, "status", "--porcelain", "-z", "--untracked-files=all", "--no-renames",
        "--", f":(literal){folder}",
    ).stdout  # fmt: skip
    return [entry[3:] for entry in output.split("\0") if len(entry) > 3]


def commit_paths(repo: git.Repo, paths: Sequence[str], message: str) -> str:
    """Stage ``paths`` (new, changed or deleted files) and commit exactly them (nothing
    else the index holds) on the current branch; the new commit's hash. A path whose
    deletion is staged already (``git rm``, the old name of a ``git mv``) is in neither
    the working tree nor the index: it is committed as it is."""
    import os

    listing = "".join(f"{p}\0" for p in paths)
    spec = ("--pathspec-from-file=-", "--pathspec-file-nul")
    literal = {"GIT_LITERAL_PATHSPECS": "1"}
    top = toplevel(repo)
    on_disk = [os.path.lexists(top / p) for p in paths]
    present = "".join(f"{p}\0" for p, there in zip(paths, on_disk, strict=True) if there)
    missing = "".join(f"{p}\0" for p, there in zip(paths, on_disk, strict=True) if not there)
    if present:
        git_command(repo, "add", "-A", *spec, env=literal, stdin=present)
    if missing:  # deleted: staged as such unless it is already
        git_command(
            repo, "rm", "-q", "--cached", "--ignore-unmatch", *spec, env=literal, stdin=missing
        )
    git_command(
        repo, "commit", "-q", "--no-edit", "-m", message, "--only", *spec,
        env=literal, stdin=listing,
    )  # fmt: skip
    return head_commit(repo)


def commit_files_onto(
    repo: git.Repo,
    parent: str | None,
    folder: str,
    message: Callable[[list[str]], str],
    *,
    keep: Callable[[str], bool] | None = None,
    moved: Callable[[list[str], list[str]], list[str]] | None = None,
    leave: Callable[[list[str]], set[str]] | None = None,
    remove: Callable[[list[str]], list[str]] | None = None,
    write: bool = True,
) -> tuple[str | None, list[str], list[str]]:
    """A commit on top of ``parent`` (None: a first commit) holding its tree plus the
    working tree's new and changed files under ``folder``, less the files ``parent``
    holds that the working tree lacks (gone) which ``moved(present, gone)`` names (files
    moved to a path among the present ones) or ``remove(gone)`` names (the others are
    kept as ``parent`` has them), made with a temporary index: neither the real index,
    the working tree nor any branch changes. ``message`` makes the message from the
    paths; ``keep`` chooses the paths, and ``leave(present)`` names those of the present
    files to leave out; ``write`` False makes no commit. Returns (the commit or None when
    nothing differs or ``write`` is False, the files it adds or changes, those it
    removes)."""
    import os
    import tempfile

    handle, index = tempfile.mkstemp(prefix="kexp-index-", dir=repo.git_dir)
    os.close(handle)
    os.unlink(index)
    env = {"GIT_INDEX_FILE": index, "GIT_LITERAL_PATHSPECS": "1"}
    try:
        if parent is None:
            git_command(repo, "read-tree", "--empty", env=env)
        else:
            git_command(repo, "read-tree", parent, env=env)
        listed = git_command(
            repo, "ls-files", "-z", "--others", "--modified", "--exclude-standard",
            "--", folder, env=env,
        ).stdout  # fmt: skip
        top = toplevel(repo)
        present: set[str] = set()
        gone: set[str] = set()
        for p in listed.split("\0"):
            if p and (keep is None or keep(p)):
                (present if (top / p).is_file() else gone).add(p)
        if leave is not None:
            present -= leave(sorted(present))
        removed = set(moved(sorted(present), sorted(gone)) if moved else ())
        if remove is not None:
            removed |= set(remove(sorted(gone - removed))) & gone
        paths = sorted(present | removed)
        if not paths or not write:
            return None, sorted(present), sorted(removed)
        git_command(
            repo, "add", "--pathspec-from-file=-", "--pathspec-file-nul",
            env=env, stdin="".join(f"{p}\0" for p in paths),
        )  # fmt: skip
        tree = git_command(repo, "write-tree", env=env).stdout.strip()
    finally:
        with contextlib.suppress(OSError):
            os.unlink(index)
    parents = ["-p", parent] if parent else []
    commit = git_command(repo, "commit-tree", tree, *parents, "-m", message(paths)).stdout.strip()
    return commit, sorted(present), sorted(removed)


def worktree_git_dir(repo: git.Repo) -> Path:
    """The git folder of this working tree (``.git``, or ``.git/worktrees/NAME`` for a
    worktree added with ``git worktree add``): an absolute path."""
    from pathlib import Path

    found = git_command(repo, "rev-parse", "--path-format=absolute", "--git-dir")
    return Path(found.stdout.strip())


def common_git_dir(repo: git.Repo) -> Path:
    """The git folder every working tree of the clone shares (``.git`` also for a
    worktree added with ``git worktree add``): an absolute path."""
    from pathlib import Path

    found = git_command(repo, "rev-parse", "--path-format=absolute", "--git-common-dir")
    return Path(found.stdout.strip())


def path_blobs(repo: git.Repo, commit: str, paths: Sequence[str]) -> dict[str, str]:
    """The blob (hash) of each of ``paths`` (repository paths) that ``commit`` (a full
    hash) holds as a file; those it lacks are left out."""
    if not is_hex(commit, 40):
        raise GitError(f"{commit!r} is not a full commit hash")
    found = object_names(repo, [f"{commit}:{p}" for p in paths])
    return {
        p: there[0]
        for p, there in zip(paths, found, strict=True)
        if there is not None and there[1] == "blob"
    }


def fast_forward_checkout(repo: git.Repo, commit: str, *, alike: Sequence[str] = ()) -> None:
    """Move the checked-out branch, index and working tree forward to ``commit`` (a
    descendant of ``HEAD``); the user's other uncommitted changes are kept (git refuses,
    changing nothing, when one would be overwritten, and the files it names are named).
    ``alike`` are files of the working tree (untracked or changed) that ``commit``
    holds as they are: taken as ``commit``'s (staged first, so that git does not
    refuse to overwrite them with themselves; unstaged again when git refuses)."""
    import os

    top = toplevel(repo)
    present = [p for p in alike if os.path.lexists(top / p)]  # a deletion needs no staging
    listing = "".join(f"{p}\0" for p in present)
    spec = ("--pathspec-from-file=-", "--pathspec-file-nul")
    literal = {"GIT_LITERAL_PATHSPECS": "1"}
    if present:
        git_command(repo, "add", *spec, env=literal, stdin=listing)
    found = git_command(repo, "merge", "-q", "--ff-only", commit, ok_codes=None)
    if found.status == 0:
        return
    said_by_git = found.stderr or found.stdout
    if LOCK_EXISTS.search(said_by_git):  # (a git killed here left its lock: named)
        raise translate_error(repo, "merge", said_by_git)
    if present:
        git_command(repo, "reset", "-q", *spec, env=literal, stdin=listing)
    detail = said_by_git.strip().splitlines()
    named = [line.strip() for line in detail if line.startswith("\t")]
    said = detail[0] if detail else "git merge --ff-only failed"
    if named:
        said = f"{said.removesuffix(':')}: {', '.join(named[:5])}"
        said += f" and {len(named) - 5} more" if len(named) > 5 else ""
    changed = bool(named) and "local changes" in detail[0]  # tracked files, edited here
    raise GitError(
        f"cannot bring the working tree up to date with the remote's commits ({said}): "
        + (_set_aside(top, named) if changed else "move those files away, then run kexp sync again")
    )


def _set_aside(top: Path, paths: list[str]) -> str:
    """The advice that sets the uncommitted changes of ``paths`` (the checkout's files,
    as git names them from ``top``) aside for a sync, and brings them back after it."""
    import shlex
    from pathlib import Path

    git = ["git"] if Path.cwd().resolve() == top.resolve() else ["git", "-C", str(top)]
    return SET_ASIDE.say(
        command=f"{shlex.join([*git, 'stash', 'push', '--', *paths])} && kexp sync && "
        f"{shlex.join([*git, 'stash', 'pop'])}"
    )


def update_branch(repo: git.Repo, branch: str, new: str, old: str | None) -> bool:
    """Point ``refs/heads/BRANCH`` at ``new`` if it still points at ``old`` (None: if it
    does not exist); whether it did."""
    check_branch_name(branch)
    expected = old or "0" * 40
    found = git_command(
        repo, "update-ref", "-m", "kexp sync", f"refs/heads/{branch}", new, expected,
        ok_codes=None,
    )  # fmt: skip
    return found.status == 0


def reset_branch(repo: git.Repo, branch: str, to: str | None, expected: str) -> bool:
    """Point ``refs/heads/BRANCH`` back at ``to`` (None: delete it) if it still points
    at ``expected``; whether it did."""
    if to is not None:
        return update_branch(repo, branch, to, expected)
    check_branch_name(branch)
    found = git_command(
        repo, "update-ref", "-m", "kexp sync", "-d", f"refs/heads/{branch}", expected,
        ok_codes=None,
    )  # fmt: skip
    return found.status == 0
