"""All git access, through GitPython, imported lazily (GitPython is slow to import).

Every failure becomes a :class:`kexp.errors.GitError` whose message says what to do.
Revision strings are checked before git sees them: nothing that could be read as an
option, a path or a range gets through.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import TYPE_CHECKING

from kexp.errors import GitError

if TYPE_CHECKING:
    import git

_SAFE_REVISION = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_./~^@{}+-]*")


def check_revision(revision: str) -> str:
    """Return ``revision`` if it is a plain revision (hash, branch, tag, ``HEAD~2``).

    Refused: empty strings, anything starting with ``-`` (an option), whitespace or
    control characters, ``:`` (a path in a tree), ``..`` (a range).
    """
    if (
        not isinstance(revision, str)
        or not _SAFE_REVISION.fullmatch(revision)
        or ".." in revision
        or revision.endswith((".", "/", ".lock"))
        or ("@{" in revision and not re.fullmatch(r".*@\{[0-9]+\}", revision))
    ):
        raise GitError(
            f"{revision!r} is not a revision kexp accepts: give a commit hash, branch, tag "
            "or an expression like HEAD~2 (no options, paths, ranges or spaces)"
        )
    return revision


def open_repo(path: Path | str) -> git.Repo:
    """The git repository containing ``path``. Raises :class:`GitError` if there is none."""
    try:
        import git
    except ImportError as exc:  # pragma: no cover - git executable missing
        raise GitError(
            f"git is not usable: {exc}; install git and make sure it is on PATH"
        ) from None
    try:
        return git.Repo(path, search_parent_directories=True)
    except (git.InvalidGitRepositoryError, git.NoSuchPathError):
        raise GitError(
            f"{path} is not inside a git repository: run 'git init' there, or point "
            "KEXP_CODE_REPO at the repository holding the kernel code"
        ) from None


def find_repo(path: Path | str) -> git.Repo | None:
    """Like :func:`open_repo` but None when ``path`` is not in a repository."""
    try:
        return open_repo(path)
    except GitError:
        return None


def resolve_commit(repo: git.Repo, revision: str) -> str:
    """The full hash of the commit ``revision`` names in ``repo``."""
    import git

    check_revision(revision)
    try:
        return str(repo.commit(revision).hexsha)
    except (git.BadName, ValueError, git.GitCommandError) as exc:
        text = str(exc)
        if "ambiguous" in text.lower():
            raise GitError(
                f"revision {revision!r} is ambiguous in {repo.working_dir}: give more characters"
            ) from None
        raise GitError(
            f"unknown revision {revision!r} in {repo.working_dir}: check the spelling, or "
            "'git fetch' if the commit comes from another clone"
        ) from None


def head_commit(repo: git.Repo) -> str:
    """The full hash of ``HEAD``. Raises :class:`GitError` on a repository with no commits."""
    try:
        return str(repo.head.commit.hexsha)
    except ValueError:
        raise GitError(
            f"{repo.working_dir} has no commits yet: commit the code first, or give base_commit"
        ) from None


def dirty_paths(repo: git.Repo, *, ignore: Path | None = None) -> list[str]:
    """Tracked files with uncommitted changes (staged or not), relative to the repository.

    Changes under ``ignore`` (the experiment store itself) do not count.
    """
    import git

    try:
        output = repo.git.status("--porcelain", "--untracked-files=no", "-z")
    except git.GitCommandError as exc:
        raise GitError(f"git status failed in {repo.working_dir}: {exc.stderr.strip()}") from None
    entries = [entry for entry in output.split("\0") if entry]
    paths = [entry[3:] for entry in entries if len(entry) > 3]
    if ignore is not None and repo.working_dir:
        try:
            prefix = Path(ignore).resolve().relative_to(Path(repo.working_dir).resolve())
        except ValueError:
            prefix = None
        if prefix is not None and str(prefix) != ".":
            paths = [p for p in paths if not Path(p).is_relative_to(prefix)]
    return paths


def is_dirty(repo: git.Repo, *, ignore: Path | None = None) -> bool:
    """Whether tracked files (outside ``ignore``) have uncommitted changes."""
    return bool(dirty_paths(repo, ignore=ignore))


def user_name(repo: git.Repo) -> str:
    """git's configured ``user.name`` (or "" when none is set)."""
    try:
        return str(repo.config_reader().get_value("user", "name", default=""))
    except Exception:
        return ""
