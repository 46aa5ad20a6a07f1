"""All git access: the one runner of git (GitPython, imported lazily, as it is slow to
import; ``git`` processes), revision checks and the low-level reads. Higher-level
functions built only on this runner live beside it (:mod:`kexp.gitops.log`,
:mod:`kexp.gitops.commits`, :mod:`kexp.gitops.merge`, :mod:`kexp.gitops.remotes`,
:mod:`kexp.gitops.divergence`, :mod:`kexp.gitops.objects`); no other module runs git.

Nothing in this module imports :mod:`git` at import time: every function imports it
when called, so ``import kexp`` and queries that need no git never pay for it.

Every failure becomes a :class:`kexp.core.errors.GitError` whose message says what to do
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

from kexp.core.errors import GitError, NoCommitsError

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
MAX_REVISION_CHARS = 256
_HEX = re.compile(r"[0-9a-fA-F]+")
NULL_SHA = re.compile(r"0+")
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
    if not revision or len(revision) > MAX_REVISION_CHARS:
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


def git_version(repo: git.Repo) -> tuple[int, ...]:
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
LOCK_EXISTS = re.compile(r"Unable to create '([^'\n]+\.lock)': File exists")


def translate_error(repo: git.Repo | Worktree, action: str, stderr: str) -> GitError:
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
    lock = LOCK_EXISTS.search(text)
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
    """Run ``git ARGS`` in ``repo``; returns (exit status, stdout).

    Arguments are passed as a list (no shell). An exit status outside ``ok_codes``
    raises :class:`GitError`. Callers pass only checked revisions and ``--`` before
    paths.
    """
    return start_git(repo, *args, ok_codes=ok_codes).result()


class StartedGit:
    """A git command running while the caller does other work (:func:`start_git`)."""

    def __init__(self, repo: git.Repo, args: Sequence[str], ok_codes: Sequence[int]) -> None:
        import os

        self._repo = repo
        self._action = args[0] if args else ""
        self._ok_codes = ok_codes
        command = [_executable(), "-c", "core.quotepath=off", "-c", "log.showSignature=false"]
        # As GitPython runs git: its messages in English (translate_error reads them).
        environment = {**os.environ, "LANGUAGE": "C", "LC_ALL": "C", "GIT_TERMINAL_PROMPT": "0"}
        try:
            self._process = subprocess.Popen(
                [*command, *args], cwd=repo.working_dir, env=environment,
                stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
            )  # fmt: skip
        except OSError:
            if not os.path.isdir(repo.working_dir):
                raise GitError(
                    f"the repository {repo.working_dir} is gone (moved or removed while kexp "
                    "ran): run kexp again where it is now"
                ) from None
            raise GitError(f"git was not found; {GIT_MISSING_HINT}") from None

    def __enter__(self) -> StartedGit:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def close(self) -> None:
        """Stop the command if it still runs (its result no longer wanted: a caller that
        failed meanwhile) and reap it; nothing once :meth:`result` was read."""
        process = self._process
        if process.poll() is None:
            process.kill()
        for stream in (process.stdout, process.stderr):
            if stream is not None:
                stream.close()
        process.wait()

    def result(self) -> tuple[int, str]:
        """Wait for the command: (exit status, stdout); an exit status outside the
        accepted ones raises :class:`GitError`."""
        stdout, stderr = self._process.communicate()
        status = self._process.returncode
        if status not in self._ok_codes:
            error = stderr.decode("utf-8", "surrogateescape")
            raise translate_error(self._repo, self._action, error)
        return status, stdout.decode("utf-8", "surrogateescape")


def start_git(repo: git.Repo, *args: str, ok_codes: Sequence[int] = (0,)) -> StartedGit:
    """Start ``git ARGS`` in ``repo`` and return at once: :meth:`StartedGit.result`
    waits for it (what :func:`run_git` does at once). The command writes what it finds
    to a pipe; one that finds more than a pipe holds waits to be read. Used in a
    ``with`` block, it is stopped at the block's end if its result was not read."""
    return StartedGit(repo, args, ok_codes)


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
    end_of_options = ["--end-of-options"] if git_version(repo) >= (2, 24) else []
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
        raise translate_error(repo, "rev-parse", text)
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
        f"fetch the commit if a remote holds it (git fetch origin {commit}, or git fetch "
        "--all); one made on a branch never pushed is only in its author's clone, where no "
        "fetch finds it: its author pushes that branch (git push origin BRANCH); if the "
        "kernels live in another repository, set KEXP_CODE_REPO to it; or correct "
        "base_commit if it was mistyped"
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


def merge_bases(repo: git.Repo, first: str, second: str) -> list[str]:
    """Every merge base of ``first`` and ``second`` (full hashes; more than one after a
    criss-cross merge, none when the histories share no commit)."""
    _, output = run_git(repo, "merge-base", "--all", first, second, ok_codes=(0, 1))
    return output.split()


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


@contextlib.contextmanager
def matches_working_tree(
    repo: git.Repo, commit: str, folder: str
) -> Iterator[Callable[[], bool] | None]:
    """Whether the working tree's ``folder`` holds exactly the files of ``commit``: None
    when ``HEAD`` is not ``commit``; else git checks while the ``with`` block runs, and
    the function given waits for it: true when ``git status`` shows nothing under
    ``folder`` (changed, staged, untracked or ignored) and no file there is one git does
    not look at (skip-worktree, as a sparse checkout leaves out, or assume-unchanged)."""
    if head_commit(repo) != commit:
        yield None
        return
    status_args = ("status", "--porcelain", "-z", "--untracked-files=all", "--ignored")
    with (
        start_git(repo, *status_args, "--", folder) as status,
        start_git(repo, "ls-files", "-z", "-v", "--", folder) as tagged,
    ):

        def same() -> bool:
            # ls-files -v tags a file git looks at "H"; "S" skip-worktree, lowercase
            # assume-unchanged.
            entries = tagged.result()[1].split("\0")
            looked_at = all(entry[:2] == "H " for entry in entries if entry)
            return not status.result()[1].strip("\0") and looked_at

        yield same


def _run_git(path: Path | str, *args: str) -> subprocess.CompletedProcess[str]:
    """``git -C path ARGS``, from the ``git`` command itself, without importing
    GitPython (raises ``OSError`` when git cannot be run)."""
    import os

    git_command = os.environ.get("GIT_PYTHON_GIT_EXECUTABLE") or "git"
    return subprocess.run(
        [git_command, "-C", str(path), *args], capture_output=True, text=True, check=False
    )


def in_work_tree(path: Path | str) -> bool:
    """Whether ``path`` is in a git working tree (False when git cannot be run), asked
    without importing GitPython."""
    try:
        inside = _run_git(path, "rev-parse", "--is-inside-work-tree")
    except OSError:
        return False
    return inside.returncode == 0 and inside.stdout.strip() == "true"


#: ``git var GIT_AUTHOR_IDENT``: ``Name <email> seconds zone``.
_IDENT = re.compile(r"(.*?) <[^<>]*> \d+ [+-]\d{4}")


def author_name(path: Path | str) -> str:
    """The author name git writes on a commit in the repository holding ``path``
    (``git var GIT_AUTHOR_IDENT``: ``GIT_AUTHOR_NAME``, else ``author.name``, else
    ``user.name``), asked without importing GitPython. Where git knows no whole identity
    (no email), the name it would take all the same; "" when none."""
    import os

    try:
        ident = _run_git(path, "var", "GIT_AUTHOR_IDENT")
        found = _IDENT.fullmatch(ident.stdout.strip()) if ident.returncode == 0 else None
        if found is not None:
            return found.group(1).strip()
        if os.environ.get("GIT_AUTHOR_NAME", "").strip():
            return os.environ["GIT_AUTHOR_NAME"].strip()
        for key in ("author.name", "user.name"):
            named = _run_git(path, "config", "--get", key)
            if named.returncode == 0 and named.stdout.strip():
                return named.stdout.strip()
    except OSError:
        pass
    return ""


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
        return translate_error(
            self.repo, self.action, b"".join(self._errors).decode("utf-8", "replace")
        )

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
    config: Sequence[str] = (),
) -> GitResult:
    """Run ``git ARGS`` in ``repo``'s working tree (or git folder) with extra ``env``
    variables, ``stdin`` and ``config`` settings (``name=value``, as ``git -c``); an exit
    status outside ``ok_codes`` (None: any is fine) raises :class:`GitError`. Arguments
    are a list (no shell); callers pass checked names and give paths through
    ``--pathspec-from-file``."""
    import os

    where = repo.working_tree_dir or repo.git_dir
    settings = [part for setting in ("core.quotepath=off", *config) for part in ("-c", setting)]
    command = [_light_executable(), *settings, *args]
    environment = {**os.environ, "GIT_TERMINAL_PROMPT": "0", **(env or {})}
    try:
        done = subprocess.run(
            command, cwd=where, env=environment, input=stdin, capture_output=True,
            text=True, encoding="utf-8", errors="replace", check=False,
        )  # fmt: skip
    except OSError:
        raise GitError(f"git was not found; {GIT_MISSING_HINT}") from None
    if ok_codes is not None and done.returncode not in ok_codes:
        raise translate_error(repo, args[0] if args else "", done.stderr or done.stdout)
    return GitResult(done.returncode, done.stdout, done.stderr)


def _light_executable() -> str:
    """The git program, without importing GitPython when it is not loaded yet (the
    variable it reads, else ``git``)."""
    import os
    import sys

    if "git" in sys.modules:
        return _executable()
    return os.environ.get("GIT_PYTHON_GIT_EXECUTABLE") or "git"


# --- reading across refs ----------------------------------------------------------------


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
            raise translate_error(Worktree(str(path), str(path)), "rev-parse", found.stderr)
        raise GitError(
            f"{path} is not inside a git repository (or it is a bare one): reading across "
            "refs needs the store's git repository"
        )
    return Worktree(lines[0], lines[1])
