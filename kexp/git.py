"""All git access, through GitPython, imported lazily (GitPython is slow to import).

Nothing in this module imports :mod:`git` at import time: every function imports it
when called, so ``import kexp`` and queries that need no git never pay for it.

Every failure becomes a :class:`kexp.errors.GitError` whose message says what to do
(not a repository, git missing, unknown or ambiguous revision). Revision strings from
users are checked by :func:`check_revision` before git sees them: nothing that could be
read as an option, a path or a range gets through. Bulk work (reading 100,000 blobs,
checking thousands of commits) uses one long-running ``git cat-file`` process, never a
process per object.
"""

from __future__ import annotations

import contextlib
import dataclasses
import re
import subprocess
import threading
from collections.abc import Callable, Iterable, Iterator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, overload

from kexp.errors import GitError, KexpError, NoCommitsError

if TYPE_CHECKING:
    import git

#: What may follow a ref name in a revision: ancestors (``~2``, ``^``, ``^2``), a peel
#: (``^{commit}``, ``^{}``), a reflog entry or the upstream (``@{1}``, ``@{u}``).
_REVISION_SUFFIXES = re.compile(
    r"(?:~[0-9]*|\^[0-9]*|\^\{(?:commit|tree|blob|tag|object|)\}|@\{(?:[0-9]+|u|upstream|push)\})*"
)
#: Characters no ref name holds (git check-ref-format, rule 4, 5 and 10).
_NOT_IN_REF_NAMES = frozenset(" ~^:?*[\\\x7f") | {chr(code) for code in range(0x20)}
#: Unicode categories refused although git takes them: invisible or not text
#: (controls, format and bidirectional controls, surrogates, separators).
_INVISIBLE_CATEGORIES = frozenset({"Cc", "Cf", "Cs", "Co", "Zs", "Zl", "Zp"})
_MAX_REVISION_CHARS = 256
_HEX = re.compile(r"[0-9a-fA-F]+")
_NULL_SHA = re.compile(r"0+")
#: Above this many candidate commits, ancestry is decided by one ``git rev-list`` walk
#: instead of one ``git merge-base --is-ancestor`` per commit.
_ANCESTOR_CHECKS_PER_PROCESS = 24
#: How much of a blob too large to keep is read at a time (to be dropped).
_SKIP_CHUNK = 1 << 20

GIT_MISSING_HINT = (
    "install git and make sure it is on PATH (or point GIT_PYTHON_GIT_EXECUTABLE at it)"
)


def check_revision(revision: str) -> str:
    """Return ``revision`` if it is a plain revision (hash, branch, tag, ``HEAD~2``).

    A revision is a ref name as ``git check-ref-format --allow-onelevel`` accepts it
    (``fix#1``, ``v1,2`` and ``feature/ünïcode`` are; ``@`` is ``HEAD``), followed by
    any of ``~N``, ``^N``, ``^{type}``, ``@{N}``, ``@{upstream}``. Refused before git
    ever sees them: non-strings, empty strings, a leading ``-`` (an option such as
    ``--output=/tmp/x``), white space and control characters (a newline), ``:`` (a path
    in a tree, ``HEAD:experiments``), ``..`` (a range, ``a..b``), every other name git
    refuses (``a//b``, ``.hidden``, ``x.lock``, ``a@{b``), and invisible characters
    (bidirectional controls) although git would take them.
    """
    if not isinstance(revision, str) or not _is_revision(revision):
        raise GitError(
            f"{revision!r} is not a revision kexp accepts: give a commit hash, branch, tag "
            "or an expression like HEAD~2 (no options, paths, ranges or spaces)"
        )
    return revision


def _is_revision(revision: str) -> bool:
    if not revision or len(revision) > _MAX_REVISION_CHARS:
        return False
    cut = min(
        (at for at in (revision.find("~"), revision.find("^"), revision.find("@{")) if at >= 0),
        default=len(revision),
    )
    name, suffixes = revision[:cut], revision[cut:]
    return (name == "@" or is_ref_name(name)) and bool(_REVISION_SUFFIXES.fullmatch(suffixes))


def is_ref_name(name: str) -> bool:
    """Whether ``name`` is a ref name ``git check-ref-format --allow-onelevel`` accepts,
    and none that git would read as an option (a leading ``-``) or that holds invisible
    characters."""
    import unicodedata

    if (
        not name
        or name.startswith(("-", "/"))
        or name.endswith(("/", "."))
        or "//" in name
        or ".." in name
        or "@{" in name
        or name == "@"
        or not _NOT_IN_REF_NAMES.isdisjoint(name)
    ):
        return False
    if any(part.startswith(".") or part.endswith(".lock") for part in name.split("/")):
        return False
    return name.isascii() or all(
        unicodedata.category(ch) not in _INVISIBLE_CATEGORIES for ch in name
    )


def is_hex(text: str, min_length: int = 4, max_length: int = 64) -> bool:
    """Whether ``text`` is a hexadecimal string of a plausible hash length."""
    return min_length <= len(text) <= max_length and bool(_HEX.fullmatch(text))


# --- opening repositories and running git ----------------------------------------


def _import_git() -> Any:
    try:
        import git
    except ImportError as exc:
        reason = str(exc).strip().splitlines()[0] if str(exc).strip() else "import failed"
        raise GitError(f"git is not usable ({reason}); {GIT_MISSING_HINT}") from None
    return git


def open_repo(path: Path | str) -> git.Repo:
    """The git repository containing ``path``. Raises :class:`GitError` if there is none."""
    gitpython = _import_git()
    try:
        repo: git.Repo = gitpython.Repo(path, search_parent_directories=True)
    except (gitpython.InvalidGitRepositoryError, gitpython.NoSuchPathError):
        raise GitError(
            f"{path} is not inside a git repository: run 'git init' there, or point "
            "KEXP_CODE_REPO at the repository holding the kernel code"
        ) from None
    except gitpython.GitCommandNotFound:
        raise GitError(f"git was not found; {GIT_MISSING_HINT}") from None
    return repo


def find_repo(path: Path | str) -> git.Repo | None:
    """Like :func:`open_repo` but None when ``path`` is not in a repository (or git is
    not usable)."""
    try:
        return open_repo(path)
    except GitError:
        return None


def toplevel(repo: git.Repo) -> Path:
    """The root folder of ``repo``'s working tree. Raises :class:`GitError` for a bare one."""
    if not repo.working_tree_dir:
        raise GitError(f"{repo.git_dir} is a bare repository: kexp needs a working tree")
    return Path(repo.working_tree_dir).resolve()


def _version(repo: git.Repo) -> tuple[int, ...]:
    """git's version, as GitPython reports it (cached by GitPython)."""
    try:
        return tuple(int(part) for part in repo.git.version_info[:3])
    except Exception:  # pragma: no cover - an unparsable version string
        return (0,)


def _where(repo: git.Repo | Worktree) -> str:
    return str(repo.working_tree_dir or repo.git_dir)


def _executable() -> str:
    gitpython = _import_git()
    return str(gitpython.Git.GIT_PYTHON_GIT_EXECUTABLE or "git")


#: git's words for a lock file it could not create (another process holds it, or a
#: killed one left it behind).
_LOCK_EXISTS = re.compile(r"Unable to create '([^'\n]+\.lock)': File exists")


def _translate(repo: git.Repo | Worktree, action: str, stderr: str) -> GitError:
    """A :class:`GitError` for a failed git command, with a hint at the fix."""
    text = stderr.strip()
    lowered = text.lower()
    where = _where(repo)
    if "dubious ownership" in lowered:
        found = re.search(r"repository at '([^']*)'", text)
        folder = found.group(1) if found else where
        return GitError(
            f"git refuses to work in {folder}: 'detected dubious ownership' (the repository "
            "is owned by another user); if you trust it, run: git config --global --add "
            f"safe.directory {folder}"
        )
    if "not a git repository" in lowered:
        return GitError(f"{where} is not a git repository: run 'git init' there")
    lock = _LOCK_EXISTS.search(text)
    if lock is not None:
        return GitError(
            f"git {action} failed in {where}: git could not create {lock.group(1)}, which "
            "exists: another git process is working in this repository (an editor opened "
            "by git commit?), or one was killed and left it behind; if no git process is "
            f"running here, delete {lock.group(1)} and try again"
        )
    detail = f": {text.splitlines()[-1]}" if text else ""
    return GitError(f"git {action} failed in {where}{detail}")


def run_git(
    repo: git.Repo,
    *args: str,
    ok_codes: Sequence[int] = (0,),
) -> tuple[int, str]:
    """Run ``git ARGS`` in ``repo`` (through GitPython); returns (exit status, stdout).

    Arguments are passed as a list (no shell). An exit status outside ``ok_codes``
    raises :class:`GitError`. Callers pass only checked revisions and ``--`` before
    paths.
    """
    gitpython = _import_git()
    command = [_executable(), "-c", "core.quotepath=off", "-c", "log.showSignature=false", *args]
    try:
        status, stdout, stderr = repo.git.execute(
            command,
            with_extended_output=True,
            with_exceptions=False,
            strip_newline_in_stdout=False,
        )
    except gitpython.GitCommandNotFound:
        raise GitError(f"git was not found; {GIT_MISSING_HINT}") from None
    if status not in ok_codes:
        raise _translate(repo, args[0] if args else "", str(stderr))
    return int(status), str(stdout)


# --- revisions ---------------------------------------------------------------------


def resolve_commit(repo: git.Repo, revision: str) -> str:
    """The full hash of the commit ``revision`` names in ``repo``.

    Accepts a short or full hash, branch, tag, remote branch (``origin/main``) or an
    expression like ``HEAD~2``. Raises :class:`GitError` for a refused, unknown or
    ambiguous revision.
    """
    check_revision(revision)
    gitpython = _import_git()
    # check_revision already refused a leading '-'; --end-of-options (git >= 2.24) makes
    # sure git itself never reads the revision as an option either.
    end_of_options = ["--end-of-options"] if _version(repo) >= (2, 24) else []
    command = [_executable(), "rev-parse", "--verify", *end_of_options, f"{revision}^{{commit}}"]
    try:
        status, stdout, stderr = repo.git.execute(
            command, with_extended_output=True, with_exceptions=False
        )
    except gitpython.GitCommandNotFound:
        raise GitError(f"git was not found; {GIT_MISSING_HINT}") from None
    if status == 0 and str(stdout).strip():
        return str(stdout).strip()
    text = str(stderr)
    if "is ambiguous" in text:
        candidates = [
            line.split("hint:", 1)[1].strip()
            for line in text.splitlines()
            if line.startswith("hint:   ")
        ]
        listing = f" ({'; '.join(candidates)})" if candidates else ""
        raise GitError(
            f"revision {revision!r} is ambiguous in {_where(repo)}{listing}: "
            "give more characters of the hash"
        )
    if "dubious ownership" in text or "not a git repository" in text:
        raise _translate(repo, "rev-parse", text)
    if "expected commit type" in text:
        raise GitError(
            f"revision {revision!r} in {_where(repo)} is not a commit: give a commit hash, "
            "branch or tag"
        )
    hint = (
        "fetch it ('git fetch --unshallow' in this shallow clone)"
        if is_shallow(repo)
        else "'git fetch' if it comes from another clone"
    )
    raise GitError(
        f"unknown revision {revision!r} in {_where(repo)}: check the spelling (git branch -a, "
        f"git tag, git log --oneline list them), or {hint}"
    )


def head_commit(repo: git.Repo) -> str:
    """The full hash of ``HEAD``. Raises :class:`NoCommitsError` on a repository with no
    commits, :class:`GitError` when git refuses (a repository owned by another user:
    what git said and how to trust it).

    Asked of ``git rev-parse`` (not of GitPython's object database, whose helper
    process dies when git refuses: a broken pipe, and no words)."""
    status, output = run_git(repo, "rev-parse", "--verify", "-q", "HEAD^{commit}", ok_codes=(0, 1))
    if status == 0 and output.strip():
        return output.strip()
    raise NoCommitsError(
        f"{_where(repo)} has no commits yet: commit the code first, or give base_commit"
    )


def is_shallow(repo: git.Repo) -> bool:
    """Whether ``repo`` is a shallow clone (part of its history was never fetched)."""
    return (Path(repo.common_dir) / "shallow").is_file()


def fetch_hint(repo: git.Repo, commit: str) -> str:
    """How to get ``commit`` into ``repo`` (a shallow clone needs deepening)."""
    if is_shallow(repo):
        return (
            "this is a shallow clone: fetch the full history with 'git fetch --unshallow' "
            f"(or 'git fetch --depth=<N>'), or fetch the commit: git fetch origin {commit}"
        )
    return (
        f"fetch the commit (git fetch origin {commit}, or git fetch --all); if the kernels "
        "live in another repository, set KEXP_CODE_REPO to it; or correct base_commit if "
        "it was mistyped"
    )


@dataclasses.dataclass(frozen=True)
class ObjectInfo:
    """What a name (a full or abbreviated hash) refers to in a repository."""

    name: str
    status: Literal["found", "missing", "ambiguous"]
    sha: str = ""
    type: str = ""


def lookup_objects(repo: git.Repo, names: Iterable[str]) -> dict[str, ObjectInfo]:
    """Look up many hashes (full or abbreviated) at once: one ``git cat-file`` process.

    Only hexadecimal names are accepted (others are reported ``missing`` without asking
    git). Returns a mapping from each distinct name to its :class:`ObjectInfo`.
    """
    given = list(names)
    wanted = sorted({n for n in given if is_hex(n)})
    found: dict[str, ObjectInfo] = {n: ObjectInfo(n, "missing") for n in given if not is_hex(n)}
    if not wanted:
        return found
    lines = _batch_lines(repo, ["cat-file", "--batch-check=%(objectname) %(objecttype)"], wanted)
    for name, line in zip(wanted, lines, strict=True):
        parts = line.split()
        if len(parts) == 2 and parts[1] == "missing":
            found[name] = ObjectInfo(name, "missing")
        elif len(parts) == 2 and parts[1] == "ambiguous":
            found[name] = ObjectInfo(name, "ambiguous")
        elif len(parts) == 2:
            found[name] = ObjectInfo(name, "found", parts[0], parts[1])
        else:  # pragma: no cover - unexpected git output
            raise GitError(f"unexpected output from git cat-file in {_where(repo)}: {line!r}")
    return found


def is_ancestor(repo: git.Repo, commit: str, tip: str) -> bool:
    """Whether ``commit`` is an ancestor of (or equal to) ``tip``; both full hashes."""
    status, _ = run_git(repo, "merge-base", "--is-ancestor", commit, tip, ok_codes=(0, 1))
    return status == 0


def ancestors_among(repo: git.Repo, tip: str, commits: Iterable[str]) -> set[str]:
    """The commits of ``commits`` (full hashes present in ``repo``) reachable from ``tip``.

    A few candidates are checked one by one; many are found with a single walk of
    ``tip``'s history that stops as soon as every candidate has been seen.
    """
    candidates = set(commits)
    if not candidates:
        return set()
    if len(candidates) <= _ANCESTOR_CHECKS_PER_PROCESS:
        return {c for c in candidates if is_ancestor(repo, c, tip)}
    found: set[str] = set()
    for line in _stream_lines(repo, ["rev-list", tip]):
        sha = line.strip()
        if sha in candidates:
            found.add(sha)
            if len(found) == len(candidates):
                break
    return found


# --- the working tree --------------------------------------------------------------


def dirty_paths(repo: git.Repo, *, ignore: Path | None = None) -> list[str]:
    """Tracked files with uncommitted changes (staged or not), relative to the repository.

    Untracked files do not count (build outputs would make every tree dirty). Changes
    under ``ignore`` (the experiment store itself) do not count.
    """
    _, output = run_git(repo, "status", "--porcelain", "--untracked-files=no", "-z")
    entries = iter(entry for entry in output.split("\0") if entry)
    paths: list[str] = []
    for entry in entries:
        if len(entry) <= 3:
            continue
        paths.append(entry[3:])
        if entry[0] in "RC":  # a rename or copy is followed by its source path
            next(entries, None)
    if ignore is not None and repo.working_tree_dir:
        try:
            prefix = Path(ignore).resolve().relative_to(toplevel(repo))
        except ValueError:
            prefix = None
        if prefix is not None and str(prefix) != ".":
            paths = [p for p in paths if not Path(p).is_relative_to(prefix)]
    return paths


def matches_working_tree(repo: git.Repo, commit: str, folder: str) -> bool:
    """Whether the working tree's ``folder`` holds exactly the files of ``commit``:
    ``HEAD`` is ``commit``, and ``git status`` shows nothing under ``folder`` (changed,
    staged, untracked or ignored)."""
    if head_commit(repo) != commit:
        return False
    _, output = run_git(
        repo, "status", "--porcelain", "-z", "--untracked-files=all", "--ignored", "--", folder
    )
    return not output.strip("\0")


def configured_user_name(path: Path | str) -> str | None:
    """git's configured ``user.name`` for the repository holding ``path`` ("" when none
    is set), from the ``git`` command itself, without importing GitPython (a new
    experiment whose ``base_commit`` is given needs nothing else of git); None when
    ``path`` is in no repository or git cannot be run."""
    import os

    git_command = os.environ.get("GIT_PYTHON_GIT_EXECUTABLE") or "git"
    try:
        inside = subprocess.run(
            [git_command, "-C", str(path), "rev-parse", "--is-inside-work-tree"],
            capture_output=True, text=True, check=False,
        )  # fmt: skip
        if inside.returncode != 0 or inside.stdout.strip() != "true":
            return None
        found = subprocess.run(
            [git_command, "-C", str(path), "config", "--get", "user.name"],
            capture_output=True, text=True, check=False,
        )  # fmt: skip
    except OSError:
        return None
    return found.stdout.strip() if found.returncode == 0 else ""


def user_name(repo: git.Repo) -> str:
    """git's configured ``user.name`` (or "" when none is set)."""
    try:
        return str(repo.config_reader().get_value("user", "name", default=""))
    except Exception:
        return ""


def untracked_files(repo: git.Repo, folder: str) -> list[str]:
    """Untracked, not ignored files under ``folder`` (relative to the repository root)."""
    _, output = run_git(
        repo, "ls-files", "-z", "--others", "--exclude-standard", "--full-name", "--", folder
    )
    return [p for p in output.split("\0") if p]


@dataclasses.dataclass(frozen=True)
class IndexEntry:
    """One entry of the index (``git ls-files --stage``)."""

    path: str  # relative to the repository root, with '/'
    mode: str
    sha: str
    stage: int  # 0, or 1-3 for a file with an unresolved merge conflict
    skip_worktree: bool  # left out of a sparse checkout


def index_entries(repo: git.Repo | Worktree, pathspecs: Sequence[str]) -> list[IndexEntry]:
    """The index's entries matching ``pathspecs`` (git pathspecs, e.g. ``:(glob)...``):
    one ``git ls-files --stage``."""
    output = git_command(repo, "ls-files", "-z", "--stage", "-t", "--", *pathspecs).stdout
    found: list[IndexEntry] = []
    for record in output.split("\0"):
        meta, tab, path = record.partition("\t")
        parts = meta.split()
        if tab and len(parts) == 4 and parts[3].isdigit():
            tag, mode, sha, stage = parts
            found.append(IndexEntry(path, mode, sha, int(stage), tag == "S"))
    return found


def move_index_entries(repo: git.Repo | Worktree, moves: Sequence[tuple[IndexEntry, str]]) -> None:
    """Move each index entry to its new path (relative to the repository root), blob and
    mode kept, as ``git mv`` moves it in the index: git sees a rename. One ``git
    update-index --index-info`` (the whole change or none of it), then one ``--refresh``
    (the moved entries get the files' stat data, as after ``git mv``)."""
    if not moves:
        return
    lines = []
    for entry, new_path in moves:
        lines.append(f"0 {'0' * len(entry.sha)}\t{entry.path}\0")  # mode 0: remove
        lines.append(f"{entry.mode} {entry.sha} 0\t{new_path}\0")
    git_command(repo, "update-index", "-z", "--index-info", stdin="".join(lines))
    git_command(repo, "update-index", "-q", "--refresh", ok_codes=(0, 1))


# --- trees, blobs, history -----------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class TreeEntry:
    """One file in a commit's tree."""

    path: str  # relative to the repository root, with '/'
    mode: str  # '100644', '100755', '120000' (symbolic link), '160000' (submodule)
    sha: str
    size: int  # -1 when unknown (submodules)


def list_tree(repo: git.Repo, commit: str, folder: str) -> list[TreeEntry]:
    """Every file under ``folder`` (relative to the root, '' for all) in ``commit``'s tree.

    One ``git ls-tree`` process; ``commit`` must be a full hash.
    """
    args = ["ls-tree", "-r", "-z", "--long", "--full-tree", commit]
    if folder:
        args += ["--", folder]
    _, output = run_git(repo, *args)
    entries: list[TreeEntry] = []
    for record in output.split("\0"):
        if not record:
            continue
        meta, _, path = record.partition("\t")
        parts = meta.split()
        if len(parts) != 4:
            continue
        mode, _kind, sha, size = parts
        entries.append(TreeEntry(path, mode, sha, int(size) if size.isdigit() else -1))
    return entries


@overload
def iter_blobs(
    repo: git.Repo | Worktree, shas: Sequence[str]
) -> Iterator[tuple[str, bytes | None]]: ...


@overload
def iter_blobs(
    repo: git.Repo | Worktree, shas: Sequence[str], *, max_bytes: int
) -> Iterator[tuple[str, bytes | int | None]]: ...


def iter_blobs(
    repo: git.Repo | Worktree, shas: Sequence[str], *, max_bytes: int | None = None
) -> Iterator[tuple[str, bytes | int | None]]:
    """Yield ``(sha, content)`` for each blob hash, in order, from one ``git cat-file
    --batch`` process (``None`` for a hash that is not in the repository).

    With ``max_bytes``, a blob larger than that is not kept: its size (an ``int``) is
    yielded instead of its content, and it streams past in small pieces (a hostile
    commit's 8 GiB blob costs no memory).

    The hashes are written to git by a helper thread while the contents are read, so
    100,000 blobs stream through without a process (or a round trip) per blob.
    """
    for sha in shas:
        if not is_hex(sha, 4):
            raise GitError(f"{sha!r} is not an object hash")
    if not shas:
        return
    batch = _Batch(repo, ["cat-file", "--batch"], shas)
    completed = False
    try:
        for sha in shas:
            header = batch.stdout.readline()
            if not header:
                raise batch.failure()
            parts = header.split()
            if len(parts) == 2 and parts[1] in (b"missing", b"ambiguous"):
                yield sha, None
                continue
            size = int(parts[2])
            if max_bytes is not None and size > max_bytes:
                left = size + 1  # the content and the newline after it
                while left > 0:
                    piece = batch.stdout.read(min(left, _SKIP_CHUNK))
                    if not piece:
                        raise batch.failure()
                    left -= len(piece)
                yield sha, size
                continue
            data = batch.stdout.read(size)
            batch.stdout.read(1)  # the newline after the content
            yield sha, data
        completed = True
    finally:
        batch.close(completed=completed)


@dataclasses.dataclass(frozen=True)
class FileChange:
    """One file's change in a commit or diff (from ``git --raw`` output)."""

    status: str  # 'A', 'M', 'D', 'T', 'R' (rename; 'C' copy)
    path: str  # the path afterwards (for 'D', the deleted path)
    old_path: str  # the path before ('' for 'A')
    old_sha: str  # '' when there was no file before
    new_sha: str  # '' when there is none afterwards, or it is only in the working tree


@dataclasses.dataclass(frozen=True)
class CommitInfo:
    """A commit, with the files it changed (restricted to the requested paths)."""

    sha: str
    author: str
    author_email: str
    date: str  # author date, ISO 8601 with offset
    message: str
    files: tuple[FileChange, ...]


def log_files(repo: git.Repo, revision: str, pathspecs: Sequence[str]) -> list[CommitInfo]:
    """Commits reachable from ``revision`` that touched ``pathspecs``, oldest first.

    Renames within the pathspecs are detected (``-M``); a merge is diffed against its
    first parent. ``revision`` must already be a full hash; pathspecs are passed after
    ``--``.
    """
    _, output = run_git(
        repo,
        "log",
        "-z",
        "--raw",
        "--no-abbrev",
        "-M",
        # A merge that changed the file itself (a conflict resolution) is diffed against
        # its first parent (git >= 2.31; older git shows no diff for merges).
        *(["--diff-merges=first-parent"] if _version(repo) >= (2, 31) else []),
        "--reverse",
        "--no-show-signature",
        "--encoding=UTF-8",
        "--format=%x1e%H%x00%an%x00%ae%x00%aI%x00%B",
        revision,
        "--",
        *pathspecs,
    )
    commits: list[CommitInfo] = []
    tokens = output.split("\0")
    i = 0
    while i < len(tokens):
        token = tokens[i]
        if not token.startswith("\x1e"):
            i += 1
            continue
        sha, author, email, date, message = (token[1:], *tokens[i + 1 : i + 5])
        i += 5
        files: list[FileChange] = []
        while i < len(tokens) and tokens[i].lstrip("\n").startswith(":"):
            change, i = _raw_entry(tokens, i)
            files.append(change)
        commits.append(CommitInfo(sha, author, email, date, message.strip(), tuple(files)))
    return commits


def working_tree_diff(repo: git.Repo, commit: str, *, exclude: Path | None = None) -> str:
    """``git diff`` of the working tree of ``repo`` against ``commit`` (tracked files),
    leaving out the folder ``exclude`` when it is inside the repository."""
    args = ["--no-color", "--no-ext-diff", commit, "--", "."]
    top = Path(str(repo.working_tree_dir)).resolve()
    if exclude is not None and exclude.resolve().is_relative_to(top):
        args.append(f":(exclude){exclude.resolve().relative_to(top).as_posix()}")
    import git

    try:
        return str(repo.git.diff(*args))
    except git.GitCommandError as exc:
        raise KexpError(
            f"git diff against {commit[:12]} failed in {top}: {str(exc.stderr).strip()}"
        ) from None


def diff_files(repo: git.Repo, base: str, head: str | None, folder: str) -> list[FileChange]:
    """Files under ``folder`` that differ between ``base`` and ``head`` (full hashes).

    ``head`` None compares with the working tree (tracked files only: see
    :func:`untracked_files`). No rename detection: callers match files by name.
    """
    args = ["diff", "-z", "--raw", "--no-abbrev", "--no-renames", "--no-ext-diff", base]
    if head is not None:
        args.append(head)
    _, output = run_git(repo, *args, "--", folder)
    tokens = output.split("\0")
    changes: list[FileChange] = []
    i = 0
    while i < len(tokens):
        if tokens[i].lstrip("\n").startswith(":"):
            change, i = _raw_entry(tokens, i)
            changes.append(change)
        else:
            i += 1
    return changes


def _raw_entry(tokens: list[str], i: int) -> tuple[FileChange, int]:
    meta = tokens[i].lstrip("\n")[1:].split()
    _, _, old_sha, new_sha, status = meta[:5]
    kind = status[:1]
    if kind in "RC":
        old_path, path = tokens[i + 1], tokens[i + 2]
        i += 3
    else:
        path = tokens[i + 1]
        old_path = "" if kind == "A" else path
        i += 2
    return (
        FileChange(
            kind,
            path,
            old_path,
            "" if _NULL_SHA.fullmatch(old_sha) else old_sha,
            "" if _NULL_SHA.fullmatch(new_sha) else new_sha,
        ),
        i,
    )


# --- long-running git processes -------------------------------------------------------


class _Batch:
    """``git ARGS`` fed ``lines`` on stdin by a thread, with stderr drained by another
    (so neither pipe can fill up and block git)."""

    def __init__(self, repo: git.Repo | Worktree, args: list[str], lines: Sequence[str]) -> None:
        import os

        for line in lines:
            if "\n" in line or "\r" in line:
                raise GitError(f"{line!r} contains a line break")
        self.repo = repo
        self.action = args[0]
        try:
            self.proc: Any = subprocess.Popen(
                [_light_executable(), *args],
                cwd=repo.working_tree_dir or repo.git_dir,
                env={**os.environ, "GIT_TERMINAL_PROMPT": "0"},
                stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
            )  # fmt: skip
        except OSError:
            raise GitError(f"git was not found; {GIT_MISSING_HINT}") from None
        self.stdout: Any = self.proc.stdout
        self._errors: list[bytes] = []
        self._lines = lines
        self._threads = [
            threading.Thread(target=self._feed, daemon=True),
            threading.Thread(target=self._drain, daemon=True),
        ]
        for thread in self._threads:
            thread.start()

    def _feed(self) -> None:
        try:
            for start in range(0, len(self._lines), 512):
                chunk = "".join(f"{line}\n" for line in self._lines[start : start + 512])
                self.proc.stdin.write(chunk.encode("utf-8"))
            self.proc.stdin.close()
        except (BrokenPipeError, ValueError, OSError):
            pass

    def _drain(self) -> None:
        self._errors.append(self.proc.stderr.read())

    def failure(self) -> GitError:
        """The error to raise when git stopped answering."""
        self.close(completed=True)
        return _translate(self.repo, self.action, b"".join(self._errors).decode("utf-8", "replace"))

    def close(self, *, completed: bool) -> int:
        """Wait for git (or stop it, when the caller stopped early); its exit status."""
        if not completed and self.proc.poll() is None:
            self.proc.kill()
        for thread in self._threads:
            thread.join()
        status = int(self.proc.wait())
        for stream in (self.proc.stdout, self.proc.stdin, self.proc.stderr):
            if stream is not None and not stream.closed:
                stream.close()
        return status


def _batch_lines(repo: git.Repo | Worktree, args: list[str], lines: Sequence[str]) -> list[str]:
    """Feed ``lines`` to one ``git ARGS`` process; one output line per input line."""
    batch = _Batch(repo, args, lines)
    completed = False
    try:
        output: list[str] = []
        for _ in lines:
            line = batch.stdout.readline()
            if not line:
                raise batch.failure()
            output.append(line.decode("utf-8", "replace").rstrip("\n"))
        completed = True
        return output
    finally:
        batch.close(completed=completed)


def _stream_lines(repo: git.Repo | Worktree, args: list[str]) -> Iterator[str]:
    """Yield the output lines of ``git ARGS`` as git writes them (stops git when the
    caller stops)."""
    batch = _Batch(repo, args, [])
    completed = False
    try:
        for raw in batch.stdout:
            yield raw.decode("utf-8", "replace")
        completed = True
        if batch.close(completed=True) != 0:
            raise batch.failure()
    finally:
        batch.close(completed=completed)


# --- publishing: commits, merges and pushes for kexp sync -----------------------------


@dataclasses.dataclass(frozen=True)
class GitResult:
    """What one git command gave: its exit status and output."""

    status: int
    stdout: str
    stderr: str


def git_command(
    repo: git.Repo | Worktree,
    *args: str,
    env: dict[str, str] | None = None,
    stdin: str | None = None,
    ok_codes: Sequence[int] | None = (0,),
) -> GitResult:
    """Run ``git ARGS`` in ``repo``'s working tree (or git folder) with extra ``env``
    variables and ``stdin``; an exit status outside ``ok_codes`` (None: any is fine)
    raises :class:`GitError`. Arguments are a list (no shell); callers pass checked
    names and give paths through ``--pathspec-from-file``."""
    import os

    where = repo.working_tree_dir or repo.git_dir
    command = [_light_executable(), "-c", "core.quotepath=off", *args]
    environment = {**os.environ, "GIT_TERMINAL_PROMPT": "0", **(env or {})}
    try:
        done = subprocess.run(
            command, cwd=where, env=environment, input=stdin, capture_output=True,
            text=True, encoding="utf-8", errors="replace", check=False,
        )  # fmt: skip
    except OSError:
        raise GitError(f"git was not found; {GIT_MISSING_HINT}") from None
    if ok_codes is not None and done.returncode not in ok_codes:
        raise _translate(repo, args[0] if args else "", done.stderr or done.stdout)
    return GitResult(done.returncode, done.stdout, done.stderr)


def _light_executable() -> str:
    """The git program, without importing GitPython when it is not loaded yet (the
    variable it reads, else ``git``)."""
    import os
    import sys

    if "git" in sys.modules:
        return _executable()
    return os.environ.get("GIT_PYTHON_GIT_EXECUTABLE") or "git"


def check_branch_name(name: str) -> str:
    """``name`` if it can name a branch (``kexp/alice``); :class:`GitError` otherwise,
    before git sees it (options, ranges, ``HEAD``, ``refs/...``, invisible characters)."""
    if (
        not isinstance(name, str)
        or not is_ref_name(name)
        or name == "HEAD"
        or name.startswith("refs/")
        or len(name) > _MAX_REVISION_CHARS
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
    write: bool = True,
) -> tuple[str | None, list[str]]:
    """A commit on top of ``parent`` (None: a first commit) holding its tree plus the
    working tree's new and changed files under ``folder`` (deleted files are not
    published, but those ``moved(present, gone)`` names: files moved to a path among
    the present ones), made with a temporary index: neither the real index, the working
    tree nor any branch changes. ``message`` makes the message from the paths; ``keep``
    chooses the paths; ``write`` False makes no commit. Returns (the commit or None when
    nothing differs or ``write`` is False, the paths it holds)."""
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
        paths = sorted(present | set(moved(sorted(present), sorted(gone)) if moved else ()))
        if not paths or not write:
            return None, paths
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
    return commit, paths


def merge_commits(repo: git.Repo, ours: str, theirs: str, message: str) -> str:
    """A merge commit of ``ours`` and ``theirs`` (full hashes), made without touching
    the working tree, the index or any branch (``git merge-tree --write-tree``, git >=
    2.38). Raises :class:`~kexp.errors.SyncConflictError` naming the conflicting files."""
    from kexp.errors import SyncConflictError

    if _version(repo) < (2, 38):
        raise GitError(
            "kexp sync merges with 'git merge-tree --write-tree' (git 2.38 or newer): upgrade git"
        )
    found = git_command(
        repo, "merge-tree", "--write-tree", "--name-only", ours, theirs, ok_codes=(0, 1)
    )
    # The tree, the conflicted files (one a line), an empty line, git's messages.
    lines = found.stdout.splitlines()
    if found.status == 1:
        end = lines.index("", 1) if "" in lines[1:] else len(lines)
        conflicted = sorted({line for line in lines[1:end] if line.strip()})
        said = [line for line in lines[end + 1 :] if line.startswith("CONFLICT (")]
        raise SyncConflictError(
            f"conflict: {', '.join(conflicted)} changed both here and on the remote",
            conflicted,
            said,
        )
    tree = lines[0].strip()
    return git_command(
        repo, "commit-tree", tree, "-p", ours, "-p", theirs, "-m", message
    ).stdout.strip()


def fast_forward_checkout(repo: git.Repo, commit: str) -> None:
    """Move the checked-out branch, index and working tree forward to ``commit`` (a
    descendant of ``HEAD``); the user's other uncommitted changes are kept (git refuses,
    changing nothing, when one would be overwritten)."""
    found = git_command(repo, "merge", "-q", "--ff-only", commit, ok_codes=None)
    if found.status != 0:
        detail = (found.stderr or found.stdout).strip().splitlines()
        raise GitError(
            "cannot bring the working tree up to date with the remote's experiments "
            f"({detail[0] if detail else 'git merge --ff-only failed'}): commit or stash "
            "the changes git names, then run kexp sync again"
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
            return None
        raise _translate(repo, "fetch", found.stderr)
    return ref_commit(repo, tracking)


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
        raise _translate(repo, "push", found.stderr or found.stdout)
    if _PUSH_BEHIND.search(summary) or _PUSH_BEHIND.search(words):
        return PushOutcome(False)
    lock = _LOCK_EXISTS.search(words)
    if lock is not None:
        return PushOutcome(False, lock.group(1).replace("/./", "/"))
    reason = summary.removeprefix("[remote rejected]").removeprefix("[rejected]").strip()
    shown = words if len(words) <= 600 else words[:600] + " ..."
    raise GitError(
        f"{remote} refused the push to {branch} {reason or summary}"
        + (f", saying: {shown}" if shown else "")
    )


def count_commits(repo: git.Repo, tip: str, base: str | None) -> int:
    """How many commits ``tip`` has that ``base`` has not (all of them for None)."""
    args = ["rev-list", "--count", tip] + ([f"^{base}"] if base else [])
    return int(git_command(repo, *args).stdout.strip() or 0)


# --- reading across refs ----------------------------------------------------------------


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


def tree_files(
    repo: git.Repo | Worktree, commit: str, folder: str, *, tree: bool = False
) -> list[tuple[str, str, str]]:
    """(mode, blob hash, path) of every file under ``folder`` in ``commit``'s tree: one
    ``git ls-tree`` without sizes (quicker than :func:`list_tree`). With ``tree``,
    ``commit`` is the hash of ``folder``'s own tree (the paths still start with
    ``folder``)."""
    if not is_hex(commit, 40):
        raise GitError(f"{commit!r} is not a full commit or tree hash")
    if tree:
        output = git_command(repo, "ls-tree", "-r", "-z", commit).stdout
    else:
        output = git_command(
            repo, "ls-tree", "-r", "-z", "--full-tree", commit, "--", folder
        ).stdout
    lead = f"{folder}/" if tree else ""
    found: list[tuple[str, str, str]] = []
    for record in output.split("\0"):
        meta, tab, path = record.partition("\t")
        if tab:
            mode, _, rest = meta.partition(" ")
            found.append((mode, rest.rpartition(" ")[2], lead + path))
    return found


def blob_id(data: bytes) -> str:
    """The hash git gives a blob of ``data`` (SHA-1 object format)."""
    import hashlib

    return hashlib.sha1(b"blob %d\0" % len(data) + data, usedforsecurity=False).hexdigest()


def check_ref_pattern(pattern: str) -> str:
    """``pattern`` if it is a ref name with ``*`` wildcards (``origin/*``,
    ``refs/remotes/origin/agent-*``); :class:`GitError` otherwise, before git sees it."""
    if (
        not isinstance(pattern, str)
        or not pattern
        or len(pattern) > _MAX_REVISION_CHARS
        or not is_ref_name(pattern.replace("*", "x"))
    ):
        raise GitError(
            f"{pattern!r} is not a ref pattern kexp accepts: give a branch or ref name, "
            "with * for any characters (origin/*, refs/remotes/origin/agent-*)"
        )
    return pattern


@dataclasses.dataclass(frozen=True)
class Worktree:
    """A repository known by its folders alone, without GitPython (which is slow to
    import): what :func:`git_command` and the functions built on it need."""

    working_tree_dir: str
    git_dir: str


def find_worktree(path: Path | str) -> Worktree:
    """The repository holding ``path``, from ``git rev-parse`` (no GitPython)."""
    import os

    git_command_name = os.environ.get("GIT_PYTHON_GIT_EXECUTABLE") or "git"
    try:
        found = subprocess.run(
            [git_command_name, "-C", str(path), "rev-parse", "--show-toplevel",
             "--absolute-git-dir"],
            capture_output=True, text=True, check=False,
        )  # fmt: skip
    except OSError:
        raise GitError(f"git was not found; {GIT_MISSING_HINT}") from None
    lines = found.stdout.splitlines()
    if found.returncode != 0 or len(lines) != 2:
        if "dubious ownership" in found.stderr:
            raise _translate(Worktree(str(path), str(path)), "rev-parse", found.stderr)
        raise GitError(
            f"{path} is not inside a git repository (or it is a bare one): reading across "
            "refs needs the store's git repository"
        )
    return Worktree(lines[0], lines[1])


def tree_changes(
    repo: git.Repo | Worktree, base: str, heads: Sequence[str], folder: str
) -> dict[str, list[tuple[str, str, str]]]:
    """:func:`raw_changes` from ``base`` to each of ``heads`` (full hashes), from one
    ``git diff-tree --stdin`` process: head → [(path, new mode, new blob)]."""
    wanted = list(dict.fromkeys(heads))
    if not is_hex(base, 40) or not all(is_hex(head, 40) for head in wanted):
        raise GitError("tree_changes takes full commit hashes")
    found: dict[str, list[tuple[str, str, str]]] = {head: [] for head in wanted}
    if not wanted:
        return found
    output = git_command(
        repo, "diff-tree", "--stdin", "--always", "-r", "-z", "--raw", "--no-abbrev",
        "--no-renames", "--", f":(literal){folder}",
        # "A B" on stdin is read as "commit A with parent B": the diff from B to A.
        stdin="".join(f"{head} {base}\n" for head in wanted),
    ).stdout  # fmt: skip
    tokens = output.split("\0")
    current: list[tuple[str, str, str]] | None = None
    at = 0
    while at < len(tokens):
        token = tokens[at].lstrip("\n")
        if token.startswith(":") and current is not None and at + 1 < len(tokens):
            parts = token[1:].split()
            if len(parts) >= 5:
                blob = "" if _NULL_SHA.fullmatch(parts[3]) else parts[3]
                current.append((tokens[at + 1], parts[1], blob))
            at += 2
            continue
        if token.strip():  # the header of the next pair: the head's hash
            current = found.get(token.strip())
        at += 1
    return found


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


def merge_base(repo: git.Repo | Worktree, first: str, second: str) -> str | None:
    """The best common ancestor of two commits (full hashes); None when they share none."""
    if not (is_hex(first, 40) and is_hex(second, 40)):
        raise GitError("merge_base takes full commit hashes")
    found = git_command(repo, "merge-base", first, second, ok_codes=(0, 1)).stdout.strip()
    return found if is_hex(found, 40) else None


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


def status_entries(repo: git.Repo | Worktree, folder: str) -> list[tuple[str, str, str, str]]:
    """``git status --porcelain=v2`` of ``folder`` (untracked files listed one by one,
    no renames): (kind, XY, index blob, path); kind "1" a changed file (X: the index
    against HEAD, Y: the working tree against the index), "u" an unmerged one, "?" an
    untracked one (XY and blob empty)."""
    output = git_command(
        repo, "status", "--porcelain=v2", "-z", "--untracked-files=all", "--no-renames",
        "--ignore-submodules=all", "--", f":(literal){folder}",
    ).stdout  # fmt: skip
    found: list[tuple[str, str, str, str]] = []
    for record in output.split("\0"):
        if record.startswith("1 "):
            parts = record.split(" ", 8)
            if len(parts) == 9:
                found.append(("1", parts[1], parts[7], parts[8]))
        elif record.startswith("u "):
            parts = record.split(" ", 10)
            if len(parts) == 11:
                found.append(("u", parts[1], "", parts[10]))
        elif record.startswith("? "):
            found.append(("?", "", "", record[2:]))
    return found
