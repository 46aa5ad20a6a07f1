"""Where an experiment's code came from: ``base_commit`` in the code repository.

The code repository is the one whose kernels were changed: the store's own repository
unless configured (``Store(root, code_repo=...)`` or ``$KEXP_CODE_REPO``). This module
fills ``base_commit`` and ``author`` on create, checks that ``base_commit`` resolves
(validation), and answers the git-valued query filters (``reachable_from``, a revision
given as ``base_commit``). All git access goes through :mod:`kexp.gitops.git`, imported only
when one of these functions runs.

**Uncommitted code.** When ``base_commit`` is taken from ``HEAD`` while tracked files of
the code repository have uncommitted changes (outside the store), what was measured is
not exactly ``HEAD``: kexp warns (:class:`UncommittedBaseWarning`, naming the changed
files) and records it in the experiment as the tag :data:`UNCOMMITTED_TAG`
(``uncommitted-base``), so that ``tags=["uncommitted-base"]`` finds such experiments.
Untracked files do not count; neither does a ``base_commit`` given explicitly.
"""

from __future__ import annotations

import dataclasses
import warnings
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Protocol, TypeVar

from kexp.core.advice import BASE_COMMIT_AND_DIFF, COMMIT_FIRST
from kexp.core.errors import CodeRepoWarning, GitError, NoCommitsError, UncommittedBaseWarning
from kexp.core.problems import Problem, Severity
from kexp.gitops import git as kgit

if TYPE_CHECKING:
    from kexp.core.model import KernelExperiment
    from kexp.format.validate import CheckedFile

#: The tag recording that an experiment's code had uncommitted changes on top of its
#: ``base_commit``.
UNCOMMITTED_TAG = "uncommitted-base"
_FULL_HASH_LENGTHS = (40, 64)
_SHOWN_DIRTY_PATHS = 5


class _HasBase(Protocol):
    @property
    def base_commit(self) -> str: ...


_E = TypeVar("_E", bound=_HasBase)


def fill_from_git(
    exp: KernelExperiment,
    code_repo: Path,
    *,
    store_dir: Path | None = None,
    explicit: bool = False,
    stacklevel: int = 2,
) -> None:
    """Fill ``base_commit`` and ``author`` of a new experiment from the code repository.

    * no ``base_commit``: the full hash of ``HEAD``; if tracked files (outside
      ``store_dir``) have uncommitted changes, an :class:`UncommittedBaseWarning` is
      issued and the tag ``uncommitted-base`` is added to ``tags``.
    * a ``base_commit`` that is not a full hash (short hash, branch, tag, ``HEAD~1``):
      resolved to the full hash. An unknown abbreviated hash, or a value that is not a
      revision at all, is kept as given (validation reports it); an unknown revision
      name (``mian``) raises :class:`GitError`.
    * no ``author``: the author git writes on a commit (``GIT_AUTHOR_NAME``, else
      ``author.name``, else ``user.name``: :func:`kexp.gitops.git.author_name`).

    Without a code repository nothing is filled (a :class:`CodeRepoWarning` says why
    when it matters: ``base_commit`` is missing, or the repository was configured
    explicitly).
    """
    given = exp.base_commit.strip() if isinstance(exp.base_commit, str) else ""
    # A revision name to resolve (not a hash, and not something validation refuses).
    named = bool(given) and not kgit.is_hex(given, 7) and _is_revision(given)
    needs_git = not given or not _is_full_hash(given) or not exp.author
    if not needs_git:
        return
    if _is_full_hash(given) and kgit.in_work_tree(code_repo):
        # Only the author is missing: ask git for it without opening the repository.
        exp.author = kgit.author_name(code_repo)
        return
    try:
        repo = kgit.open_repo(code_repo)
    except GitError as exc:
        if named:
            raise GitError(
                f"base_commit {given!r} cannot be resolved: {exc}; or give the full hash"
            ) from None
        if not given or explicit:
            what = "base_commit and author were" if not given else "author was"
            warnings.warn(
                f"{what} not filled in from git: {exc}; or give base_commit explicitly",
                CodeRepoWarning,
                stacklevel=stacklevel + 1,
            )
        return
    if not given:
        try:
            exp.base_commit = kgit.head_commit(repo)
        except NoCommitsError:  # nothing to measure on yet: said before anything is written
            raise NoCommitsError(
                f"{kgit.toplevel(repo)} has no commits yet, so no base_commit for the "
                f"experiment: {COMMIT_FIRST}"
            ) from None
        else:
            dirty = kgit.dirty_paths(repo, ignore=store_dir)
            if dirty:
                shown = ", ".join(dirty[:_SHOWN_DIRTY_PATHS])
                more = len(dirty) - _SHOWN_DIRTY_PATHS
                if more > 0:
                    shown += f" and {more} more"
                warnings.warn(
                    f"{kgit.toplevel(repo)} has uncommitted changes ({shown}): the "
                    f"experiment measured code that is not base_commit "
                    f"{exp.base_commit[:12]} (HEAD); it is tagged '{UNCOMMITTED_TAG}'. "
                    "Give base_commit yourself (the commit the change was made on: git "
                    "rev-parse HEAD before committing it) with the diff against it as "
                    f"code_change (git diff HEAD; {BASE_COMMIT_AND_DIFF})",
                    UncommittedBaseWarning,
                    stacklevel=stacklevel + 1,
                )
                if UNCOMMITTED_TAG not in exp.tags:
                    exp.tags = [*exp.tags, UNCOMMITTED_TAG]
    elif named or (kgit.is_hex(given, 7) and not _is_full_hash(given)):
        try:
            exp.base_commit = kgit.resolve_commit(repo, given)
        except GitError:
            if named:
                raise
            # An abbreviated hash git does not know: kept; validation reports it.
    if not exp.author:
        exp.author = kgit.author_name(code_repo)


def _is_revision(text: str) -> bool:
    try:
        kgit.check_revision(text)
    except GitError:
        return False
    return True


def _is_full_hash(text: str) -> bool:
    return len(text) in _FULL_HASH_LENGTHS and kgit.is_hex(text, 40) and text == text.lower()


def base_commit_problems(
    checked: Sequence[CheckedFile], code_repo: Path, *, strict: bool = False
) -> list[Problem]:
    """Validation problems of ``base_commit`` values that do not resolve in ``code_repo``.

    All values are looked up at once (one git process). A commit that is not in the
    repository (a shallow clone, or an upstream commit never fetched) is a warning that
    says how to fetch it, an error with ``strict=True``; a hash naming something other
    than a commit, or an ambiguous abbreviation, is an error. Without a code repository
    nothing is checked.
    """
    values: dict[str, list[CheckedFile]] = {}
    for item in checked:
        if item.document is None:
            continue
        value = item.document.fields.get("base_commit")
        if isinstance(value, str):
            values.setdefault(value, []).append(item)
    problems: list[Problem] = []
    for value, (severity, code, message, hint) in unresolved_base_commits(
        values, code_repo, strict=strict
    ).items():
        for item in values[value]:
            assert item.document is not None
            line, column = item.document.position(("base_commit",))
            problems.append(
                Problem(str(item.path), line, column, severity, code, "base_commit", message, hint)
            )
    return problems


def unresolved_base_commits(
    values: Iterable[str], code_repo: Path, *, strict: bool = False
) -> dict[str, tuple[Severity, str, str, str]]:
    """The ``base_commit`` values among ``values`` that do not resolve to a commit in
    ``code_repo``, each with the (severity, code, message, hint) of its problem, in the
    order of ``values``; values that are not hashes (7+ hex digits) are left to the
    schema.

    All values are looked up at once (one git process); see
    :func:`base_commit_problems`. Without a code repository nothing is checked (empty).
    """
    wanted = list(dict.fromkeys(value for value in values if kgit.is_hex(value, 7)))
    if not wanted:
        return {}
    repo = kgit.find_repo(code_repo)
    if repo is None:
        return {}
    found = kgit.lookup_objects(repo, wanted)
    where = kgit.toplevel(repo)
    unresolved: dict[str, tuple[Severity, str, str, str]] = {}
    severity: Severity
    for value in wanted:
        info = found[value]
        if info.status == "found" and info.type == "commit":
            continue
        if info.status == "missing":
            severity = "error" if strict else "warning"
            code = "base-commit-unknown"
            message = f"base commit {value} is not in the code repository {where}"
            hint = kgit.fetch_hint(repo, value)
        elif info.status == "ambiguous":
            severity, code = "error", "base-commit-ambiguous"
            message = f"base commit {value} is ambiguous in {where}"
            hint = "write the full 40-character hash (git rev-parse <commit>)"
        else:
            severity, code = "error", "base-commit-not-commit"
            message = f"base_commit {value} names a {info.type}, not a commit, in {where}"
            hint = "write the hash of the commit the change was made on (git log --oneline)"
        unresolved[value] = (severity, code, message, hint)
    return unresolved


def strict_problems(problems: Sequence[Problem]) -> list[Problem]:
    """``problems`` with an unknown base commit made an error (``validate --strict``)."""
    return [
        dataclasses.replace(p, severity="error") if p.code == "base-commit-unknown" else p
        for p in problems
    ]


def resolve_revision(code_repo: Path, revision: str) -> str:
    """The full hash of ``revision`` in the code repository (:class:`GitError` if none)."""
    return kgit.resolve_commit(kgit.open_repo(code_repo), revision)


def base_commit_filter(code_repo: Path, value: str) -> str:
    """The value to match ``base_commit`` against, for a ``base_commit`` filter.

    A hexadecimal value is a hash prefix and is used as is (no git needed); anything
    else (``main``, ``v1.2``, ``HEAD~3``, ``origin/main``) is resolved in the code
    repository to its full hash.
    """
    text = str(value).strip()
    if kgit.is_hex(text, 1):
        return text.lower()
    return resolve_revision(code_repo, text)


def same_code(code_repo: Path, store_dir: Path, first: str, second: str) -> bool:
    """Whether base commits ``first`` and ``second`` hold the same code: equal, or two
    commits of the code repository whose trees differ only inside ``store_dir`` (the
    store's folder: ``kexp sync`` commits it alone). A value git cannot find (a commit of
    another machine), or no repository: equal values alone."""
    if first == second:
        return True
    if not (kgit.is_hex(first, 7) and kgit.is_hex(second, 7)):
        return False
    try:
        repo = kgit.find_worktree(code_repo)
    except GitError:
        return False
    try:
        folder = Path(store_dir).resolve().relative_to(Path(repo.working_tree_dir).resolve())
    except ValueError:
        folder = None  # the store is not in the code repository: every file is code
    spec = [] if folder is None or str(folder) == "." else ["--", f":(top,exclude,literal){folder}"]
    found = kgit.git_command(
        repo, "diff", "--quiet", "--no-ext-diff", "--no-textconv", f"{first}^{{commit}}",
        f"{second}^{{commit}}", *spec, ok_codes=None,
    )  # fmt: skip
    return found.status == 0


def reachable(experiments: Iterable[_E], code_repo: Path, revision: str) -> list[_E]:
    """The experiments whose ``base_commit`` is an ancestor of (or is) ``revision``.

    ``revision`` is resolved in the code repository (:class:`GitError` when it does not
    resolve); experiments whose base commit is not in the repository are left out.
    """
    repo = kgit.open_repo(code_repo)
    tip = kgit.resolve_commit(repo, revision)
    pool = list(experiments)
    hashes = {e.base_commit for e in pool if isinstance(e.base_commit, str)}
    found = kgit.lookup_objects(repo, hashes)
    full = {
        value: info.sha
        for value, info in found.items()
        if info.status == "found" and info.type == "commit"
    }
    ancestors = kgit.ancestors_among(repo, tip, set(full.values()))
    return [e for e in pool if full.get(e.base_commit) in ancestors]
