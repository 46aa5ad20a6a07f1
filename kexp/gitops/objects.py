"""Refs, trees, objects and status read without GitPython (reading across refs, the
snapshot), built on :func:`kexp.gitops.git.git_command` (all git access goes through it)."""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from kexp.core.errors import GitError
from kexp.gitops.git import MAX_REVISION_CHARS, Worktree, git_command, is_hex, is_ref_name

if TYPE_CHECKING:
    import git


@dataclasses.dataclass(frozen=True)
class RefInfo:
    """A branch, remote-tracking branch or tag, with the commit it names."""

    name: str  # the full name: refs/remotes/origin/agent-1
    short: str  # as git abbreviates it: origin/agent-1
    commit: str
    date: int  # the commit's committer date (seconds since the epoch)


def list_refs(repo: git.Repo | Worktree) -> list[RefInfo]:
    """Every branch, remote-tracking branch and tag naming a commit (annotated tags
    peeled), in git's order; symbolic refs (``origin/HEAD``) left out."""
    output = git_command(
        repo, "for-each-ref",
        "--format=%(refname)%00%(refname:short)%00%(objecttype)%00%(objectname)%00"
        "%(*objectname)%00%(committerdate:unix)%00%(*committerdate:unix)%00%(symref)",
        "refs/heads", "refs/remotes", "refs/tags",
    ).stdout  # fmt: skip
    found: list[RefInfo] = []
    for line in output.splitlines():
        parts = line.split("\0")
        if len(parts) != 8 or parts[7]:
            continue
        name, short, kind, sha, peeled, date, peeled_date, _ = parts
        if kind == "tag":
            sha, date = peeled, peeled_date
        elif kind != "commit":
            continue
        if is_hex(sha, 40) and is_ref_name(name):
            found.append(RefInfo(name, short, sha, int(date) if date.isdigit() else 0))
    return found


def check_ref_pattern(pattern: str) -> str:
    """``pattern`` if it is a ref name with ``*`` wildcards (``origin/*``,
    ``refs/remotes/origin/agent-*``); :class:`GitError` otherwise, before git sees it."""
    if (
        not isinstance(pattern, str)
        or not pattern
        or len(pattern) > MAX_REVISION_CHARS
        or not is_ref_name(pattern.replace("*", "x"))
    ):
        raise GitError(
            f"{pattern!r} is not a ref pattern kexp accepts: give a branch or ref name, "
            "with * for any characters (origin/*, refs/remotes/origin/agent-*)"
        )
    return pattern


def object_names(repo: git.Repo | Worktree, names: Sequence[str]) -> list[tuple[str, str] | None]:
    """(hash, type) of each object name (``HEAD``, ``HEAD:experiments``, a hash), None
    for one that does not resolve; one ``git cat-file --batch-check``. The names are
    made by kexp (no line breaks)."""
    if any("\n" in name or "\r" in name for name in names):
        raise GitError("an object name holds a line break")
    if not names:
        return []
    output = git_command(
        repo, "cat-file", "--batch-check=%(objectname) %(objecttype)",
        stdin="".join(f"{name}\n" for name in names),
    ).stdout  # fmt: skip
    found: list[tuple[str, str] | None] = []
    for line in output.splitlines()[: len(names)]:
        parts = line.split()
        found.append((parts[0], parts[1]) if len(parts) == 2 and is_hex(parts[0], 40) else None)
    return found + [None] * (len(names) - len(found))


def blobs_held(repo: git.Repo | Worktree, hashes: Sequence[str], folder: Path) -> set[str]:
    """Those of the blob ``hashes`` that git holds: the ones the index names under
    ``folder`` (a working tree's files as git checked them out or added them: one ``git
    ls-files``, cheaper than looking each up), the others looked up (one ``git cat-file
    --batch-check``, none when the index names them all)."""
    wanted = set(hashes)
    top = Path(repo.working_tree_dir).resolve() if repo.working_tree_dir else None
    place = Path(folder).resolve()
    held: set[str] = set()
    if top is not None and place.is_relative_to(top):  # else looked up, not listed
        inside = place.relative_to(top).as_posix()
        listed = git_command(repo, "ls-files", "-z", "--stage", "--", f":(literal){inside}").stdout
        # Each entry: "MODE SHA STAGE\tPATH", the mode six digits.
        held = {entry[7:47] for entry in listed.split("\0") if entry[6:7] == " "} & wanted
    rest = [name for name in hashes if name not in held]
    found = object_names(repo, rest)
    return held | {name for name, got in zip(rest, found, strict=True) if got and got[1] == "blob"}


def merge_base(repo: git.Repo | Worktree, first: str, second: str) -> str | None:
    """The best common ancestor of two commits (full hashes); None when they share none."""
    if not (is_hex(first, 40) and is_hex(second, 40)):
        raise GitError("merge_base takes full commit hashes")
    found = git_command(repo, "merge-base", first, second, ok_codes=(0, 1)).stdout.strip()
    return found if is_hex(found, 40) else None


def history_rewrites(repo: Worktree) -> tuple[str, ...]:
    """What changes what git says of ancestry (merge bases) and of a commit's files
    without any commit changing: a shallow clone's boundary commits (``--deepen``,
    ``--unshallow`` move it) and the replace refs (``git replace``); () for a complete
    history without replacements. One git process."""
    replaced = git_command(
        repo, "for-each-ref", "--format=%(refname) %(objectname)", "refs/replace"
    ).stdout.split("\n")
    git_dir = Path(repo.git_dir)
    common = git_dir / "commondir"  # a linked worktree's: the repository's own folder
    if common.is_file():
        git_dir = (git_dir / common.read_text(encoding="utf-8").strip()).resolve()
    shallow = git_dir / "shallow"
    boundary = shallow.read_text(encoding="utf-8").split() if shallow.is_file() else []
    return (*(f"replace {line}" for line in replaced if line), *(f"shallow {c}" for c in boundary))


def path_history_blobs(repo: git.Repo | Worktree, commit: str, paths: Sequence[str]) -> set[str]:
    """Every blob that ``paths`` (repository paths) held in the history of ``commit`` (a
    full hash), by any commit that changed them: what that commit's versions descend
    from. One git process."""
    if not is_hex(commit, 40):
        raise GitError(f"{commit!r} is not a full commit hash")
    if not paths:
        return set()
    output = git_command(
        repo, "log", "--format=", "--raw", "--no-abbrev", "--no-renames", commit, "--",
        *paths, env={"GIT_LITERAL_PATHSPECS": "1"},
    ).stdout  # fmt: skip
    found: set[str] = set()
    for line in output.splitlines():
        if line.startswith(":"):
            fields = line.split("\t", 1)[0].split()
            found.update(blob for blob in fields[2:4] if is_hex(blob, 40) and blob.strip("0"))
    return found


#: What one commit changed of some paths: (path, the blob before it (one per parent of
#: a merge; "" where there was none), the blob after it ("": removed)).
PathChange = tuple[str, tuple[str, ...], str]


def path_changes(
    repo: git.Repo | Worktree,
    commit: str | Sequence[str],
    paths: Sequence[str],
    *,
    exclude: str | None = None,
) -> list[tuple[str, int, list[PathChange]]]:
    """The commits of the history of ``commit`` (or of several commits), less that of
    ``exclude`` when given, that changed ``paths`` (repository paths), newest first,
    each as (hash, committer date, what it changed of them): a merge's changes are
    those it made against every parent (a merge taking one side's file changed
    nothing). One git process."""
    tips = [commit] if isinstance(commit, str) else list(commit)
    if not all(is_hex(tip, 40) for tip in tips) or (
        exclude is not None and not is_hex(exclude, 40)
    ):
        raise GitError("path_changes takes full commit hashes")
    if not paths or not tips:
        return []
    output = git_command(
        repo, "log", "--format=%x00%H %ct", "--raw", "--no-abbrev", "--no-renames", "-c",
        *tips, *((f"^{exclude}",) if exclude else ()), "--", *paths,
        env={"GIT_LITERAL_PATHSPECS": "1"},
    ).stdout  # fmt: skip
    found: list[tuple[str, int, list[PathChange]]] = []
    for chunk in output.split("\0")[1:]:
        head, _, body = chunk.partition("\n")
        sha, _, date = head.partition(" ")
        if not is_hex(sha, 40):
            continue
        changes: list[PathChange] = []
        for line in body.splitlines():
            if not line.startswith(":"):
                continue
            info, _, path = line.partition("\t")
            parents = len(info) - len(info.lstrip(":"))
            blobs = [
                "" if not blob.strip("0") else blob
                for blob in info.split()[parents + 1 : 2 * parents + 2]
            ]
            if len(blobs) == parents + 1 and all(is_hex(b, 40) for b in blobs if b):
                changes.append((path, tuple(blobs[:-1]), blobs[-1]))
        found.append((sha, int(date) if date.isdigit() else 0, changes))
    return found


def reflog_commits(repo: git.Repo | Worktree, ref: str, limit: int) -> list[str]:
    """The commits ``ref`` (a full ref name) named before, newest first, as its reflog
    keeps them (at most ``limit`` entries read; none without a reflog). One git
    process."""
    if not is_ref_name(ref):
        raise GitError(f"{ref!r} is not a ref name")
    found = git_command(repo, "log", "-g", f"-n{limit}", "--format=%H", ref, "--", ok_codes=None)
    if found.status != 0:
        return []
    return [sha for sha in dict.fromkeys(found.stdout.split()) if is_hex(sha, 40)]


def save_blobs(repo: git.Repo | Worktree, paths: Sequence[Path]) -> list[str]:
    """Write the files ``paths`` into the repository's objects as they are (no filters):
    their blob hashes, in order (``git cat-file blob HASH`` gives each back)."""
    if not paths:
        return []
    return git_command(
        repo, "hash-object", "-w", "--no-filters", "--stdin-paths",
        stdin="".join(f"{path}\n" for path in paths),
    ).stdout.split()  # fmt: skip


def head_info(repo: git.Repo | Worktree) -> tuple[str, int] | None:
    """(commit, committer date) of ``HEAD``; None in a repository without commits."""
    found = git_command(repo, "log", "-1", "--format=%H %ct", "HEAD", ok_codes=None)
    parts = found.stdout.split()
    if found.status != 0 or len(parts) != 2 or not is_hex(parts[0], 40):
        return None
    return parts[0], int(parts[1]) if parts[1].isdigit() else 0


def parse_tree(data: bytes) -> list[tuple[str, str, str]]:
    """(mode, name, object hash) of each entry of a raw git tree object."""
    entries: list[tuple[str, str, str]] = []
    at = 0
    while at < len(data):
        space = data.index(b" ", at)
        zero = data.index(b"\0", space)
        mode = data[at:space].decode("ascii")
        name = data[space + 1 : zero].decode("utf-8", "surrogateescape")
        entries.append((mode, name, data[zero + 1 : zero + 21].hex()))
        at = zero + 21
    return entries
