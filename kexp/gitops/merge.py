"""The merges kexp sync makes without touching the working tree, the index or a branch
(``git merge-tree``): experiment files matched by path, never moved by git's renames;
built on :func:`kexp.gitops.git.git_command` (all git access goes through it)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

from kexp.core.errors import GitError
from kexp.gitops.commits import path_blobs
from kexp.gitops.git import git_command, git_version, iter_blobs, merge_bases

if TYPE_CHECKING:
    import git


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
    resolve: Resolver | None = None,
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
    2.40); the merge commit's parents are ``ours`` and ``theirs``.

    ``resolve`` (path, then the file as the two forked from, ``ours``' and ``theirs``'):
    a merge of a file under ``folder`` both sides changed otherwise, or None (a
    conflict): an experiment corrected on both sides, in different fields."""
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
        tree = _by_path(
            repo, lines[0].strip(), ours, theirs, folder, *sides,
            _resolved(repo, forked, ours, theirs, resolve),
        ) if inside and sides is not None and folder is not None else None  # fmt: skip
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
#: A merge of one file's three versions (path, base, ours, theirs), None: a conflict.
Resolver = Callable[[str, bytes, bytes, bytes], "str | None"]


def _resolved(
    repo: git.Repo,
    forked: tuple[str, Changes, Changes] | None,
    ours: str,
    theirs: str,
    resolve: Resolver | None,
) -> dict[str, str]:
    """Path → object of the files both sides changed (edited) since they forked that
    ``resolve`` merged, the merge written to the repository's objects."""
    if forked is None or resolve is None:
        return {}
    base, mine, other = forked
    both = sorted(p for p in mine.keys() & other.keys() if mine[p] == other[p] == "M")
    sides = [path_blobs(repo, commit, both) for commit in (base, ours, theirs)]
    found = {}
    for path in both:
        blobs = [side.get(path) for side in sides]
        if any(blob is None for blob in blobs) or blobs[1] == blobs[2]:
            continue
        texts = [data for _, data in iter_blobs(repo, [str(blob) for blob in blobs])]
        if any(data is None for data in texts):
            continue
        merged = resolve(path, *(bytes(data or b"") for data in texts))
        if merged is not None:
            found[path] = git_command(
                repo, "hash-object", "-w", "--no-filters", "--stdin", stdin=merged
            ).stdout.strip()
    return found


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
    other: Changes, resolved: dict[str, str],
) -> str | None:  # fmt: skip
    """The tree ``merged`` (git's merge of ``ours`` and ``theirs``, whose conflicts are
    all under ``folder``) with ``folder`` merged by path: ``ours``' files, those
    ``theirs`` changed alone as ``theirs`` has them, and those both changed as
    ``resolved`` holds them; None when a file changed on both sides otherwise (a
    conflict)."""
    import os
    import tempfile

    entries = (_entries(repo, ours, folder), _entries(repo, theirs, folder))
    if any(
        entries[0].get(p) != entries[1].get(p) and p not in resolved
        for p in mine.keys() & other.keys()
    ):
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
    ) + "".join(f"{entries[0][p][0]} {blob}\t{p}\0" for p, blob in sorted(resolved.items()))
    with tempfile.TemporaryDirectory() as scratch:
        env = {"GIT_INDEX_FILE": os.path.join(scratch, "index")}
        git_command(repo, "read-tree", merged, env=env)
        git_command(repo, "rm", "-r", "-q", "--cached", "-f", "--ignore-unmatch", "--",
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
