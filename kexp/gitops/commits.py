"""Commits, merges, fetches and pushes for ``kexp sync``, built on
:func:`kexp.gitops.git.git_command` (all git access goes through it)."""

from __future__ import annotations

import contextlib
import dataclasses
import re
from collections.abc import Callable, Collection, Sequence
from typing import TYPE_CHECKING

from kexp.core.advice import SET_ASIDE
from kexp.core.errors import GitError
from kexp.gitops.git import (
    LOCK_EXISTS,
    MAX_REVISION_CHARS,
    git_command,
    git_version,
    head_commit,
    is_hex,
    is_ref_name,
    merge_bases,
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


#: Git settings of the merges kexp makes: no directory-rename detection. An experiment's
#: file never moves by folder; in the fan-out layout a side that removed the only
#: experiment of a shard folder and added one much like it elsewhere looks to git like a
#: renamed folder, and a file the other side added to that folder would be moved there
#: ("CONFLICT (file location)", the merge stopped). (``merge.renames=false`` would keep
#: files apart too, but git's merge-ort, 2.39 at least, looks for renames regardless:
#: :func:`merge_commits` checks for what they would do to experiment files.)
_NO_FOLDER_MOVES = ("merge.directoryRenames=false",)


def merge_commits(
    repo: git.Repo,
    ours: str,
    theirs: str,
    message: str,
    *,
    folder: str | None = None,
    id_of: Callable[[str], str | None] = lambda path: None,
    theirs_on: str | None = None,
) -> str:
    """A merge commit of ``ours`` and ``theirs`` (full hashes), made without touching
    the working tree, the index or any branch (``git merge-tree --write-tree``, git >=
    2.38). Raises :class:`~kexp.core.errors.SyncConflictError` naming the conflicting
    files; the files under ``folder`` (a checked name: the store's) are matched by their
    paths, never as renamed but to a path of the same id (``id_of``: the experiment's id
    of a path, or None; a move of the store's layout): one side's change of a file the
    other removed is a conflict (git would apply it to a file much like it that the
    other side added, silently), and
    git's conflicts among them that only its renames make (a file both sides removed, one
    of them adding one much like it) are none: each file is taken from the side that
    changed it.

    ``theirs_on`` (an ancestor of ``ours``): merge ``theirs`` as if it had been made on
    that commit (what it has in common with ``ours`` when it holds a squash of ``ours``'
    earlier commits, which git cannot see): the merge's base is that commit, through a
    stand-in commit of ``theirs``' tree on it (``git merge-tree --merge-base`` needs git
    2.40); the merge commit's parents are ``ours`` and ``theirs``."""
    from kexp.core.errors import SyncConflictError

    if git_version(repo) < (2, 38):
        raise GitError(
            "kexp sync merges with 'git merge-tree --write-tree' (git 2.38 or newer): upgrade git"
        )
    parent = theirs
    if theirs_on is not None:
        theirs = git_command(
            repo, "commit-tree", f"{theirs}^{{tree}}", "-p", theirs_on, "-m", message
        ).stdout.strip()
    forked = None if folder is None else _changes_of_sides(repo, ours, theirs, folder)
    sides = None if forked is None else forked[1:]
    clashes = {} if sides is None else _changed_where_removed(ours, theirs, *sides, id_of)
    dropped: list[str] = []
    if forked is not None:
        dropped, moved_clashes = _removed_where_moved(repo, ours, theirs, *forked, id_of)
        clashes |= moved_clashes
    if clashes:
        raise SyncConflictError(
            f"conflict: {', '.join(clashes)} removed on one side and changed on the other",
            list(clashes),
            list(clashes.values()),
        )
    found = git_command(
        repo, "merge-tree", "--write-tree", "--name-only", ours, theirs, ok_codes=(0, 1),
        config=_NO_FOLDER_MOVES,
    )  # fmt: skip
    # The tree, the conflicted files (one a line), an empty line, git's messages.
    lines = found.stdout.splitlines()
    if found.status == 1:
        end = lines.index("", 1) if "" in lines[1:] else len(lines)
        conflicted = sorted({line for line in lines[1:end] if line.strip()})
        said = [line for line in lines[end + 1 :] if line.startswith("CONFLICT (")]
        inside = folder is not None and all(p.startswith(f"{folder}/") for p in conflicted)
        tree = _by_path(repo, lines[0].strip(), ours, theirs, folder, *sides) if (
            inside and sides is not None and folder is not None
        ) else None  # fmt: skip
        if tree is not None:
            return _commit_tree(repo, _without(repo, tree, dropped), ours, parent, message)
        raise SyncConflictError(
            f"conflict: {', '.join(conflicted)} changed both here and on the remote",
            conflicted,
            said,
        )
    return _commit_tree(repo, _without(repo, lines[0].strip(), dropped), ours, parent, message)


def _commit_tree(repo: git.Repo, tree: str, ours: str, theirs: str, message: str) -> str:
    return git_command(
        repo, "commit-tree", tree, "-p", ours, "-p", theirs, "-m", message
    ).stdout.strip()


Changes = dict[str, str]


def _changes_of_sides(
    repo: git.Repo, ours: str, theirs: str, folder: str
) -> tuple[str, Changes, Changes] | None:
    """The commit the two forked from, and what each side changed under ``folder`` since
    (path → git's status letter); None when they share no commit."""
    bases = merge_bases(repo, ours, theirs)
    if not bases:
        return None
    return (
        bases[0],
        _changes_since(repo, bases[0], ours, folder),
        _changes_since(repo, bases[0], theirs, folder),
    )


def _by_path(
    repo: git.Repo, merged: str, ours: str, theirs: str, folder: str, mine: Changes,
    other: Changes,
) -> str | None:  # fmt: skip
    """The tree ``merged`` (git's merge of ``ours`` and ``theirs``, whose conflicts are
    all under ``folder``) with ``folder`` merged by path: ``ours``' files, and those
    ``theirs`` changed alone as ``theirs`` has them; None when a file changed on both
    sides otherwise (a conflict)."""
    import os
    import tempfile

    entries = (_entries(repo, ours, folder), _entries(repo, theirs, folder))
    if any(entries[0].get(p) != entries[1].get(p) for p in mine.keys() & other.keys()):
        return None
    files = {*entries[0], *(p for p in other.keys() - mine.keys() if p in entries[1])}
    files -= {p for p in other.keys() - mine.keys() if p not in entries[1]}
    if any(path[:at] in files for path in files for at in _slashes(path)):
        return None  # a file where the other side has a folder
    taken = "".join(
        f"{entries[1][p][0]} {entries[1][p][1]}\t{p}\0"
        if p in entries[1]
        else f"0 {'0' * 40}\t{p}\0"
        for p in sorted(other.keys() - mine.keys())
    )
    with tempfile.TemporaryDirectory() as scratch:
        env = {"GIT_INDEX_FILE": os.path.join(scratch, "index")}
        git_command(repo, "read-tree", merged, env=env)
        git_command(repo, "rm", "-r", "-q", "--cached", "--ignore-unmatch", "--",
                    f":(top,literal){folder}", env=env)  # fmt: skip
        if entries[0]:
            git_command(repo, "read-tree", f"--prefix={folder}/", f"{ours}:{folder}", env=env)
        if taken:
            git_command(repo, "update-index", "-z", "--index-info", env=env, stdin=taken)
        return git_command(repo, "write-tree", env=env).stdout.strip()


def _slashes(path: str) -> list[int]:
    return [at for at, char in enumerate(path) if char == "/"]


def _entries(repo: git.Repo, commit: str, folder: str) -> dict[str, tuple[str, str]]:
    """Path → (mode, object) of every file ``commit`` holds under ``folder``."""
    listed = git_command(
        repo, "ls-tree", "-r", "-z", "--full-tree", commit, "--", f":(top,literal){folder}"
    ).stdout.split("\0")[:-1]
    found = {}
    for line in listed:
        head, _, path = line.partition("\t")
        mode, _, oid = head.split(" ")
        found[path] = (mode, oid)
    return found


def _changed_where_removed(
    ours: str, theirs: str, mine: Changes, other: Changes, id_of: Callable[[str], str | None]
) -> dict[str, str]:
    """Each file one side removed since the two forked (not moved: that side added no
    file of its id, ``id_of``) and the other changed (edited, or its mode; ``mine`` and
    ``other``: their changes), with git's words for it."""
    added = [{id_of(p) for p, how in side.items() if how == "A"} - {None} for side in (mine, other)]
    found = {}
    for path in sorted(mine.keys() & other.keys()):
        if {mine[path], other[path]} in ({"D", "M"}, {"D", "T"}):
            if id_of(path) in added[0 if mine[path] == "D" else 1]:
                continue  # moved on that side: git's rename carries the change there
            gone, kept = (ours, theirs) if mine[path] == "D" else (theirs, ours)
            found[path] = (
                f"CONFLICT (modify/delete): {path} deleted in {gone[:12]} and modified in "
                f"{kept[:12]}"
            )
    return found


def _removed_where_moved(
    repo: git.Repo, ours: str, theirs: str, base: str, mine: Changes, other: Changes,
    id_of: Callable[[str], str | None],
) -> tuple[list[str], dict[str, str]]:  # fmt: skip
    """The files one side moved (removed a path of an experiment's id and added another
    of it: a change of the store's layout) where the other side removed that experiment
    (a path of its id gone, none added): each moved file as it was is dropped, the
    removal kept (the move carries no change); one the move also changed is a conflict,
    with git's words for a removal against a change (git would take the moved file
    silently, or call it rename/delete). Returns (dropped paths, conflicts)."""
    dropped: list[str] = []
    found: dict[str, str] = {}
    for mover, gone, side, where in ((mine, other, ours, theirs), (other, mine, theirs, ours)):
        kept = {id_of(p) for p, how in gone.items() if how == "A"}
        removed = {id_of(p) for p, how in gone.items() if how == "D"} - kept - {None}
        left = {id_of(p): p for p, how in mover.items() if how == "D" and id_of(p) in removed}
        moved = sorted(p for p, how in mover.items() if how == "A" and id_of(p) in left)
        if not moved:
            continue
        now = path_blobs(repo, side, moved)
        was = path_blobs(repo, base, [left[id_of(p)] for p in moved])
        for path in moved:
            if now.get(path) == was.get(left[id_of(path)]):
                dropped.append(path)
            else:
                found[path] = (
                    f"CONFLICT (modify/delete): {path} (moved from {left[id_of(path)]}) "
                    f"deleted in {where[:12]} and modified in {side[:12]}"
                )
    return dropped, found


def _without(repo: git.Repo, tree: str, paths: Sequence[str]) -> str:
    """``tree`` (a tree's hash) without the files at ``paths``."""
    import os
    import tempfile

    if not paths:
        return tree
    with tempfile.TemporaryDirectory() as scratch:
        env = {"GIT_INDEX_FILE": os.path.join(scratch, "index")}
        git_command(repo, "read-tree", tree, env=env)
        git_command(repo, "update-index", "-z", "--force-remove", "--stdin", env=env,
                    stdin="".join(f"{p}\0" for p in paths))  # fmt: skip
        return git_command(repo, "write-tree", env=env).stdout.strip()


def _changes_since(repo: git.Repo, base: str, tip: str, folder: str) -> dict[str, str]:
    """Path → git's status letter (A, D, M, T) of the files under ``folder`` that ``tip``
    changed since ``base`` (renames not looked for)."""
    listed = git_command(
        repo, "diff", "--no-renames", "--name-status", "-z", base, tip, "--",
        f":(top,literal){folder}",
    ).stdout.split("\0")[:-1]  # fmt: skip
    return {listed[i + 1]: listed[i][:1] for i in range(0, len(listed) - 1, 2)}


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
    ``folder`` (a checked name), as ``abbreviated-hash subject``, newest first."""
    found = git_command(
        repo, "log", "--no-merges", "--format=%h %s", tip, "--not", base, "--",
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
