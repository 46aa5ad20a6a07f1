"""Log and diff: the commits that touched the store's files, what changed between two
revisions; built on :mod:`kexp.gitops.git`'s runner (all git access goes through it)."""

from __future__ import annotations

import contextlib
import dataclasses
import shlex
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path, PurePosixPath
from typing import TYPE_CHECKING

from kexp.core.advice import DIFF_FILE
from kexp.core.errors import GitError, InputError, KexpError
from kexp.core.inputs import describe_non_text, first_non_text
from kexp.format.notes import CORRECTION_START
from kexp.format.rules import id_from_name
from kexp.gitops.git import (
    NULL_SHA,
    find_worktree,
    git_command,
    git_version,
    run_git,
    start_git,
)

if TYPE_CHECKING:
    import git


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
    #: The parents' hashes (two or more: a merge).
    parents: tuple[str, ...] = ()


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
        *(["--diff-merges=first-parent"] if git_version(repo) >= (2, 31) else []),
        "--reverse",
        "--no-show-signature",
        "--encoding=UTF-8",
        "--format=%x1e%H%x00%P%x00%an%x00%ae%x00%aI%x00%B",
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
        sha, parents, author, email, date, message = (token[1:], *tokens[i + 1 : i + 6])
        i += 6
        files: list[FileChange] = []
        while i < len(tokens) and tokens[i].lstrip("\n").startswith(":"):
            change, i = _raw_entry(tokens, i)
            files.append(change)
        commits.append(
            CommitInfo(
                sha, author, email, date, message.strip(), tuple(files), tuple(parents.split())
            )
        )
    return commits


def ids_in_history(repo: git.Repo, revision: str, folder: str, prefix: str) -> list[str]:
    """The experiment ids starting with ``prefix`` (a checked id prefix: hex alone) of
    the files under ``folder`` that any commit reachable from ``revision`` (a full hash)
    added, changed or removed: what an id prefix names in the history, when the tree no
    longer holds it (a ``git revert``, ``kexp rm``). Sorted, each once."""
    _, output = run_git(
        repo, "log", "-z", "--no-renames", "--name-only", "--format=", revision, "--",
        f":(glob){folder}/**/{prefix}*.md",
    )  # fmt: skip
    found = {id_from_name(path.strip("\n")) for path in output.split("\0")}
    return sorted(exp_id for exp_id in found if exp_id and exp_id.startswith(prefix))


def id_pathspecs(folder: str, exp_id: str) -> list[str]:
    """The pathspecs of experiment ``exp_id``'s file under ``folder`` (checked names),
    whatever its slug or fan-out folder."""
    return [f":(glob){folder}/**/{exp_id}-*.md", f":(glob){folder}/**/{exp_id}.md"]


def commits_beyond(
    repo: git.Repo, revision: str, refs: Sequence[str] | None, pathspecs: Sequence[str]
) -> dict[str, str]:
    """The commits that touched ``pathspecs`` which ``refs`` (full ref names, checked;
    None: every branch and remote-tracking branch) hold and ``revision`` (a full hash)
    lacks, each with the ref it was reached by (as ``git log --source`` names it, its
    full name), newest first."""
    if refs is not None and not refs:
        return {}
    _, output = run_git(
        repo, "log", "--source", "--format=%H%x00%S",
        *(refs if refs is not None else ["--branches", "--remotes"]),
        "--not", revision, "--", *pathspecs,
    )  # fmt: skip
    found: dict[str, str] = {}
    for line in output.splitlines():
        sha, _, ref = line.partition("\0")
        if sha and ref and ref != "HEAD":
            found.setdefault(sha, ref)
    return found


def removed_by(repo: git.Repo, revision: str, folder: str, exp_id: str) -> tuple[str, str] | None:
    """The newest commit reachable from ``revision`` (a full hash) that deleted experiment
    ``exp_id``'s file under ``folder``, as (full hash, subject); None when none did (a
    removal not committed, or a file never there)."""
    _, output = run_git(
        repo, "log", "-1", "--no-renames", "--diff-filter=D", "--format=%H%x00%s", revision,
        "--", f":(glob){folder}/**/{exp_id}-*.md", f":(glob){folder}/**/{exp_id}.md",
    )  # fmt: skip
    sha, _, subject = output.strip().partition("\0")
    return (sha, subject) if sha else None


def removals(repo: git.Repo, revision: str, folder: str) -> list[tuple[str, FileChange]]:
    """Every file under ``folder`` a commit reachable from ``revision`` (a full hash)
    deleted, newest first, each with that commit's hash: one ``git log`` whose output is
    the removals alone (few)."""
    _, output = run_git(
        repo, "log", "-z", "--raw", "--no-abbrev", "--no-renames", "--diff-filter=D",
        "--format=%x1e%H", revision, "--", folder,
    )  # fmt: skip
    found: list[tuple[str, FileChange]] = []
    tokens = output.split("\0")
    i, sha = 0, ""
    while i < len(tokens):
        token = tokens[i].lstrip("\n")
        if token.startswith("\x1e"):
            sha = token[1:].strip()
            i += 1
        elif token.startswith(":"):
            change, i = _raw_entry(tokens, i)
            found.append((sha, change))
        else:
            i += 1
    return found


#: The suffixes of the untracked files a working tree's diff takes in as new (source
#: code, build files); another untracked file (a log, a profiler's dump) is left out.
SOURCE_SUFFIXES = frozenset(
    {
        *(".py", ".pyi", ".pyx", ".pxd", ".cu", ".cuh", ".c", ".cc", ".cpp", ".cxx"),
        *(".h", ".hh", ".hpp", ".hxx", ".inl", ".inc", ".hip", ".cl", ".metal", ".ptx"),
        *(".s", ".asm", ".ll", ".mlir", ".td", ".rs", ".go", ".jl", ".sh", ".cmake"),
        *(".mk", ".bzl", ".bazel"),
    }
)
#: The names of untracked files taken in as new though their suffix is not a source's.
SOURCE_NAMES = frozenset(
    {"CMakeLists.txt", "Makefile", "makefile", "GNUmakefile", "BUILD", "meson.build"}
)


@dataclasses.dataclass(frozen=True)
class WorkingDiff:
    """A working tree's diff (:func:`working_tree_diff`): its ``text``, the untracked
    files it took in as new (``taken``) and those it left out, each with why
    (``left_out``: not source code, or larger than an experiment may be)."""

    text: str
    taken: tuple[str, ...] = ()
    left_out: tuple[tuple[str, str], ...] = ()


def working_tree_diff(
    repo: git.Repo, commit: str, *, exclude: Path | None = None, max_bytes: int | None = None
) -> WorkingDiff:
    """``git diff`` of the working tree of ``repo`` against ``commit``: its tracked files
    and its untracked ones that are not ignored and are source code (by suffix,
    :data:`SOURCE_SUFFIXES`; at most ``max_bytes`` each), as new files (as ``git add
    -N`` shows them, added in a copy of the index: the repository's own is left alone),
    leaving out the folder ``exclude`` when it is inside the repository. A diff that is
    not UTF-8 text (a file in another encoding) is refused (:class:`InputError`): kexp
    records text."""
    args = ["--no-color", "--no-ext-diff", commit, "--", "."]
    top = Path(str(repo.working_tree_dir)).resolve()
    if exclude is not None and exclude.resolve().is_relative_to(top):
        args.append(f":(exclude){exclude.resolve().relative_to(top).as_posix()}")
    import git

    taken, left_out = _untracked(repo, top, args[args.index("--") + 1 :], max_bytes)
    try:
        with _new_files_added(repo, taken) as env:
            diff = str(repo.git.diff(*args, env=env))
    except git.GitCommandError as exc:
        raise KexpError(
            f"git diff against {commit[:12]} failed in {top}: {str(exc.stderr).strip()}"
        ) from None
    at = first_non_text(diff)
    if at is not None:
        start = diff.rfind("\ndiff --git ", 0, at) + 1
        header = diff[start : diff.find("\n", start)].split(" b/", 1)
        where = f" in {header[1]}" if len(header) == 2 else ""
        command = " ".join(["git diff", *(shlex.quote(arg) for arg in args)])
        raise InputError(
            f"the git diff against {commit[:12]} is not UTF-8 text "
            f"({describe_non_text(diff[at])}{where}): save it as UTF-8 ({command} | iconv "
            f"-f latin1 -t utf-8 > change.diff) and {DIFF_FILE}"
        )
    return WorkingDiff(diff, tuple(taken), tuple(left_out))


def _untracked(
    repo: git.Repo, top: Path, pathspecs: Sequence[str], max_bytes: int | None
) -> tuple[list[str], list[tuple[str, str]]]:
    """The untracked files of ``pathspecs`` that are not ignored: those a diff takes in
    (source code, at most ``max_bytes``), and those it leaves out with why."""
    listed = git_command(
        repo, "ls-files", "-z", "--others", "--exclude-standard", "--", *pathspecs
    ).stdout
    taken: list[str] = []
    left_out: list[tuple[str, str]] = []
    for name in sorted(name for name in listed.split("\0") if name):
        path = PurePosixPath(name)
        if path.suffix.lower() not in SOURCE_SUFFIXES and path.name not in SOURCE_NAMES:
            left_out.append((name, "not source code"))
            continue
        try:
            size = (top / name).lstat().st_size
        except OSError:  # gone meanwhile
            continue
        if max_bytes is not None and size > max_bytes:
            left_out.append((name, f"{size / 1024:,.0f} KB, over max_file_bytes"))
        else:
            taken.append(name)
    return taken, left_out


@contextlib.contextmanager
def _new_files_added(repo: git.Repo, new: Sequence[str]) -> Iterator[dict[str, str]]:
    """The environment of a git command that sees the untracked files ``new`` as ``git
    add -N`` adds them: an index of its own (``GIT_INDEX_FILE``, a copy of the
    repository's, removed at the block's end)."""
    import shutil
    import tempfile

    if not new:
        yield {}
        return
    with tempfile.TemporaryDirectory(prefix="kexp-index-") as folder:
        index = Path(folder) / "index"
        own = Path(repo.git_dir) / "index"
        if own.is_file():  # its time too: git tells a racily clean entry by it
            shutil.copy2(own, index)
        env = {"GIT_INDEX_FILE": str(index)}
        git_command(
            repo, "add", "-N", "--pathspec-from-file=-", "--pathspec-file-nul",
            env={**env, "GIT_LITERAL_PATHSPECS": "1"}, stdin="\0".join(new),
        )  # fmt: skip
        yield env


@contextlib.contextmanager
def changed_files(
    repo: git.Repo, base: str, head: str | None, folder: str
) -> Iterator[Callable[[], list[FileChange]]]:
    """Files under ``folder`` that differ between ``base`` and ``head`` (full hashes;
    None: the working tree, where untracked files that are not ignored are added ones),
    listed by git while the ``with`` block runs: the function given waits for them (git
    is stopped at the block's end if they were not asked for).

    No rename detection: callers match files by name.
    """
    args = ["diff", "-z", "--raw", "--no-abbrev", "--no-renames", "--no-ext-diff", base]
    with contextlib.ExitStack() as started:
        diff = started.enter_context(
            start_git(repo, *args, *([head] if head is not None else []), "--", folder)
        )
        others = None
        if head is None:  # the two walks of the working tree at once
            untracked = ("ls-files", "-z", "--others", "--exclude-standard", "--full-name")
            others = started.enter_context(start_git(repo, *untracked, "--", folder))

        def result() -> list[FileChange]:
            tokens = diff.result()[1].split("\0")
            changes: list[FileChange] = []
            i = 0
            while i < len(tokens):
                if tokens[i].lstrip("\n").startswith(":"):
                    change, i = _raw_entry(tokens, i)
                    changes.append(change)
                else:
                    i += 1
            if others is not None:
                paths = others.result()[1].split("\0")
                changes += [FileChange("A", path, "", "", "") for path in paths if path]
            return changes

        yield result


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
            "" if NULL_SHA.fullmatch(old_sha) else old_sha,
            "" if NULL_SHA.fullmatch(new_sha) else new_sha,
        ),
        i,
    )


def committed_as_is(path: Path) -> str | None:
    """The commit that last changed ``path`` when the working tree's file is as that
    commit holds it (tracked, nothing staged or changed since); None when it is not
    (changes not committed, a file git does not track, no repository)."""
    try:
        tree = find_worktree(path.parent)
    except GitError:
        return None
    name = str(path.resolve().relative_to(Path(tree.working_tree_dir).resolve()))
    literal = {"GIT_LITERAL_PATHSPECS": "1"}
    status = git_command(tree, "status", "--porcelain", "-z", "--", name, env=literal)
    tracked = git_command(tree, "ls-files", "-z", "--", name, env=literal)
    if status.stdout.strip("\0") or not tracked.stdout.strip("\0"):
        return None
    last = git_command(tree, "log", "-1", "--format=%H", "--", name, env=literal, ok_codes=None)
    return last.stdout.strip() or None


#: How a correction note's line begins (:data:`kexp.format.notes.CORRECTION_START`), for
#: git's ``-G`` (a bracket: ``(`` is special in one regex dialect and not the other).
_CORRECTION_PICKAXE = r"\*\*Correction [(][0-9]"


@dataclasses.dataclass(frozen=True)
class DroppedCorrections:
    """The correction notes the last change to a file's notes removed (and did not
    write again): the change is a commit, or the uncommitted changes (``commit`` '')."""

    path: str  # the file after the change, from the repository root
    commit: str  # full hash; '' for the changes not committed
    subject: str  # the commit message's first line ('' for the changes not committed)
    notes: tuple[str, ...]  # each note removed, as its line was written


def correction_key(line: str) -> str:
    """What identifies a correction note's line: its date and what it changed (the
    words of its reason may be edited)."""
    return line.strip().split(". Reason:", 1)[0]


def dropped_corrections(repo: git.Repo, folder: str) -> dict[str, DroppedCorrections]:
    """By file name: the files under ``folder`` whose last change to their correction
    notes (the uncommitted changes, else the newest commit along the first parents of
    ``HEAD`` whose diff adds or removes a note's line; a merge diffed against its first
    parent) removed a note and wrote it nowhere in the file again: a ``git revert`` of
    a commit that also held a correction, a merge that kept the other side's file.

    A note is removed only where its file is modified, so the history's blobs are read
    only for the commits that modified a file: first the commits (tree diffs alone),
    then their diffs that touch a note (``-G``), and the uncommitted one's; a history
    that only added files (a store built by creates) costs no blob read. Nothing before
    the first commit."""
    head = git_command(repo, "rev-parse", "-q", "--verify", "HEAD^{commit}", ok_codes=None)
    if head.status != 0:
        return {}
    patch = ["-p", "--no-color", "--no-ext-diff", "--no-renames", f"-G{_CORRECTION_PICKAXE}"]
    _, uncommitted = run_git(repo, "diff", *patch, "HEAD", "--", folder)
    merges = ["--diff-merges=first-parent"] if git_version(repo) >= (2, 31) else []
    _, modifying = run_git(
        repo, "log", "--first-parent", *merges, "--diff-filter=M", "--no-renames",
        "--name-only", "--format=%x1e%H", "--", folder,
    )  # fmt: skip
    commits = [record.split("\n", 1)[0] for record in modifying.split("\x1e")[1:]]
    logged = ""
    if commits:  # newest first, as the log gave them
        logged = git_command(
            repo, "log", "--stdin", "--no-walk=unsorted", *merges, *patch,
            "--format=%x1e%H%x00%s", "--", folder, stdin="\n".join(commits) + "\n",
        ).stdout  # fmt: skip
    found: dict[str, DroppedCorrections] = {}
    seen: set[str] = set()
    changes = [("", "", uncommitted)]
    for record in logged.split("\x1e")[1:]:
        title, _, text = record.partition("\n")
        sha, _, subject = title.partition("\0")
        changes.append((sha, subject, text))
    for sha, subject, text in changes:
        for path, removed, added in _note_changes(text):
            name = path.rpartition("/")[2]
            if name in seen:
                continue
            seen.add(name)
            kept = {correction_key(line) for line in added}
            gone = tuple(line for line in removed if correction_key(line) not in kept)
            if gone:
                found[name] = DroppedCorrections(path, sha, subject, gone)
    return found


def _note_changes(patch: str) -> Iterator[tuple[str, list[str], list[str]]]:
    """Each file of a ``git diff -p`` text: its path afterwards, and the correction
    notes' lines it removed and added (a deleted file is left out)."""
    for section in patch.split("\ndiff --git "):
        path = ""
        removed: list[str] = []
        added: list[str] = []
        for line in section.splitlines():
            if line.startswith("+++ "):
                path = line[6:] if line.startswith("+++ b/") else ""
            elif line.startswith("-" + CORRECTION_START):
                removed.append(line[1:])
            elif line.startswith("+" + CORRECTION_START):
                added.append(line[1:])
        if path and (removed or added):
            yield path, removed, added
