"""What ``kexp sync --branch`` removes from a side branch, and the record it keeps of
what this clone published there.

A side branch can be shared by several clones: a file another clone published is
absent from this working tree, and must never be removed by this clone's sync. Nor is
a file absent only because the checkout is at a commit that lacks it (``git switch``
back to a work branch after the pull request merged and ``kexp sync`` made the files
main's, or to a parent commit): a removal is one the user made. So a file the branch
holds and the working tree lacks is removed only when this clone removed it:

* its checkout's ``HEAD`` tracks the file (``git status`` says it is deleted:
  ``kexp rm``, ``git rm`` or any deletion), or
* this clone published it to the branch earlier (each sync keeps, per side branch, the
  (path, blob) of the files it committed there, in a small file in the git folder:
  :func:`record_path`, written atomically) and ``kexp rm`` deleted it while ``HEAD``
  did not track it (:func:`note_removal` marks it in the record);

and only while the branch holds that version still (the one ``HEAD`` or the record
has): a file another clone corrected there since is kept, and said. A record that is
missing or cannot be read removes nothing beyond ``HEAD``'s files (never fatal), and
is written again by the next sync.

The records tell a sync of the remote's default branch too what this clone published
on side branches: an experiment published on a branch the remote no longer has, which
did not land on the default branch (a pull request closed unmerged, the branch
deleted), is held back from it (:func:`unlanded`), never deleted; and whether a sync
ever pushed there (``pushed``: one stopped before its first push committed to a branch
the remote never had, and is said so).
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from pathlib import Path

    import git

    from kexp.storage.remoteview import RemoteView

#: The record's format (a record of another version is ignored, as a damaged one is).
RECORD_VERSION = 1


def records_folder(repo: git.Repo) -> Path:
    """The folder of this working tree's records: ``<its git folder>/kexp/published``."""
    from kexp.gitops import commits as gitcommits

    return gitcommits.worktree_git_dir(repo) / "kexp" / "published"


def record_path(repo: git.Repo, branch: str) -> Path:
    """The file recording what this working tree committed to the side branch
    ``branch`` (a checked name): ``<its git folder>/kexp/published/<branch,
    percent-encoded>``. One per working tree: two worktrees of one clone hold their own
    files, and each removes only what it published."""
    from urllib.parse import quote

    return records_folder(repo) / quote(branch, safe="")


@dataclasses.dataclass
class Record:
    """What this clone committed to one side branch: path → blob; and those of its
    files ``kexp rm`` deleted here while the checkout's ``HEAD`` did not track them."""

    files: dict[str, str]
    #: Whether the file was there but could not be read (it is written again).
    damaged: bool = False
    #: The files of ``files`` that ``kexp rm`` deleted here, untracked (to remove).
    removed: set[str] = dataclasses.field(default_factory=set)
    #: Whether a sync of this working tree ever pushed to the branch (the record is
    #: written before the push: a sync stopped before it never published the branch;
    #: one stopped after it is noted later, from the remote-tracking branch).
    pushed: bool = False

    @staticmethod
    def exists(repo: git.Repo, branch: str) -> bool:
        """Whether this working tree published to the side branch ``branch`` (a name
        the remote lists) and keeps its record."""
        from kexp.core.errors import GitError
        from kexp.gitops.commits import check_branch_name

        try:
            return record_path(repo, check_branch_name(branch)).is_file()
        except GitError:
            return False

    @classmethod
    def read(cls, repo: git.Repo, branch: str) -> Record:
        """The record of ``branch``; empty when there is none, or it cannot be read."""
        return cls.load(record_path(repo, branch))

    @classmethod
    def load(cls, path: Path) -> Record:
        """The record in the file ``path``; empty when there is none, or it cannot be
        read."""
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
        except FileNotFoundError:
            return cls({})
        except (OSError, UnicodeDecodeError, ValueError):
            return cls({}, damaged=True)
        files = data.get("files") if isinstance(data, dict) else None
        removed = data.get("removed", []) if isinstance(data, dict) else None
        # (a record written before kexp kept it says nothing: taken as pushed)
        pushed = data.get("pushed", True) if isinstance(data, dict) else None
        if (
            not isinstance(data, dict)
            or data.get("version") != RECORD_VERSION
            or not isinstance(files, dict)
            or not all(isinstance(k, str) and isinstance(v, str) for k, v in files.items())
            or not isinstance(removed, list)
            or not all(isinstance(p, str) for p in removed)
            or not isinstance(pushed, bool)
        ):
            return cls({}, damaged=True)
        return cls(dict(files), removed={p for p in removed if p in files}, pushed=pushed)

    def updated(self, committed: Mapping[str, str], removed: Sequence[str]) -> Record:
        """The record once a commit added or changed ``committed`` (path → blob) and
        removed ``removed``."""
        files = {p: b for p, b in self.files.items() if p not in set(removed)}
        files.update(committed)
        return Record(
            files,
            removed={p for p in self.removed - committed.keys() if p in files},
            pushed=self.pushed,
        )

    @classmethod
    def note_pushed(cls, repo: git.Repo, branch: str) -> None:
        """Note in the record of the side branch ``branch`` (when there is one) that a
        sync pushed to it: it was published (a sync of the default branch that holds back
        what did not land says the remote no longer has it, not that it never had it)."""
        if cls.exists(repo, branch):
            record = cls.read(repo, branch)
            if not record.pushed and not record.damaged:
                dataclasses.replace(record, pushed=True).write(repo, branch)

    def write(self, repo: git.Repo, branch: str) -> None:
        """Write the record atomically; a failure to write is not fatal (a record not
        written only means fewer removals published later)."""
        self.write_to(record_path(repo, branch))

    def write_to(self, path: Path) -> None:
        """Write the record to the file ``path`` atomically (a failure is not fatal)."""
        import contextlib

        from kexp.storage import atomic

        data = {
            "version": RECORD_VERSION,
            "files": dict(sorted(self.files.items())),
            "removed": sorted(self.removed),
            "pushed": self.pushed,
        }
        with contextlib.suppress(OSError):
            path.parent.mkdir(parents=True, exist_ok=True)
            atomic.replace(path, json.dumps(data) + "\n")


def note_removal(repo: git.Repo, path: str) -> None:
    """Note that ``kexp rm`` deleted ``path`` (a repository path) here: in each record
    of this working tree that holds it, while the checkout's ``HEAD`` does not track it
    (then ``git status`` shows the deletion, and the record needs none), so that the
    next ``kexp sync --branch`` of that branch removes it there. Never fatal: a note not
    written only means a removal not published."""
    import contextlib

    from kexp.core.errors import KexpError
    from kexp.gitops import commits as gitcommits
    from kexp.gitops import git as kgit

    with contextlib.suppress(KexpError, OSError):
        folder = records_folder(repo)
        records = [
            (found, record)
            for found in (sorted(folder.iterdir()) if folder.is_dir() else [])
            if found.is_file()
            and not found.name.startswith(".")  # a record being written
            and path in (record := Record.load(found)).files
        ]
        if path in gitcommits.path_blobs(repo, kgit.head_commit(repo), [path]):
            return
        if not records:  # another clone's, brought in: a sync says it keeps it there
            _write_paths(removed_here_path(repo), {*removed_here(repo), path})
            return
        for found, record in records:
            if path not in record.removed:
                record.removed.add(path)
                record.write_to(found)


def published_branches(repo: git.Repo) -> dict[str, Record]:
    """Each side branch this working tree published to (a record it keeps), with what
    it published there (records that cannot be read, or hold nothing, left out)."""
    from urllib.parse import unquote

    folder = records_folder(repo)
    found: dict[str, Record] = {}
    for path in sorted(folder.iterdir()) if folder.is_dir() else []:
        if path.is_file() and not path.name.startswith("."):  # (a record being written)
            record = Record.load(path)
            if record.files:
                found[unquote(path.name)] = record
    return found


def unlanded(
    repo: git.Repo, view: RemoteView, target: str, paths: Sequence[str]
) -> dict[str, list[str]]:
    """Of ``paths`` (the experiment files a sync would commit to ``target``), those it
    holds back, by side branch, when ``target`` is the remote's default branch: this
    clone published the experiment (its id) on a side branch the remote no longer
    has, and it did not land: the branch's commit here did not land
    (:meth:`~kexp.storage.remoteview.RemoteView.landed`: neither merged nor squashed;
    none here: it counts as not landed) and the default branch lacks the file (one pull
    request landed in part). A file edited since is the same experiment."""
    from kexp.format.rules import id_from_name
    from kexp.gitops import commits as gitcommits

    ids = {exp_id: p for p in paths if (exp_id := id_from_name(p)) is not None}
    mine = {
        branch: [ids[i] for i in dict.fromkeys(map(id_from_name, record.files)) if i in ids]
        for branch, record in published_branches(repo).items()
    }
    mine = {branch: files for branch, files in mine.items() if files}
    if not mine or target != view.default():
        return {}
    listed = view.listed()
    tip = view.branches().get(target)
    held: dict[str, list[str]] = {}
    for branch, files in mine.items():
        commit = gitcommits.ref_commit(repo, f"refs/heads/{branch}")
        if branch in listed or (commit is not None and view.landed(commit)):
            continue
        there = gitcommits.path_blobs(repo, tip, files) if tip else {}
        taken = {p for found in held.values() for p in found}
        files = sorted(p for p in files if p not in there and p not in taken)
        if files:
            held[branch] = files
    return held


def removed_here_path(repo: git.Repo) -> Path:
    """The file of the paths ``kexp rm`` deleted here that neither the checkout's
    ``HEAD`` nor a record held (another clone's, brought in from a side branch):
    ``<its git folder>/kexp/removed-here.json``."""
    return records_folder(repo).parent / "removed-here.json"


def removed_here(repo: git.Repo) -> set[str]:
    """The paths of :func:`removed_here_path` (none when it cannot be read)."""
    try:
        data = json.loads(removed_here_path(repo).read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, ValueError):
        return set()
    return {p for p in data if isinstance(p, str)} if isinstance(data, list) else set()


def _write_paths(path: Path, paths: set[str]) -> None:
    """Write ``paths`` to ``path`` atomically, as a JSON list."""
    import contextlib

    from kexp.storage import atomic

    with contextlib.suppress(OSError):
        path.parent.mkdir(parents=True, exist_ok=True)
        atomic.replace(path, json.dumps(sorted(paths)) + "\n")


def kept_back(repo: git.Repo, tip: str | None, top: Path) -> list[str]:
    """The files ``kexp rm`` deleted here that another clone published to a side branch
    (:func:`removed_here`), which its commit ``tip`` holds still and the working tree
    (``top``) lacks: a sync never removes another clone's file, and says so."""
    from kexp.gitops import commits as gitcommits

    noted = removed_here(repo)
    if tip is None or not noted:
        return []
    held = gitcommits.path_blobs(repo, tip, sorted(noted))
    return sorted(p for p in held if not (top / p).exists())


@dataclasses.dataclass(frozen=True)
class Removals:
    """Of the files a side branch holds and the working tree lacks, those this clone
    removed (to publish), and those it removed that the branch holds in another version
    (corrected there since: kept)."""

    removed: list[str]
    kept: list[str]


def choose_removals(
    repo: git.Repo,
    gone: Sequence[str],
    base: str,
    tip: Callable[[], str | None],
    head: str | None,
    record: Record,
) -> Removals:
    """Which of ``gone`` (files the commit ``base`` holds, absent from the working
    tree) to remove: those ``head`` (the checkout's commit) tracks, or ``record`` holds
    and notes removed by ``kexp rm`` (a file absent because the checkout is at a commit
    that lacks it is not a removal), while ``base`` and ``tip()`` (the remote's
    branch, as far as known; asked only when there is such a file) hold the version
    ``head`` or the record has, or (``tip()``) none. Another clone's files are left."""
    from kexp.gitops import commits as gitcommits

    ours: dict[str, set[str]] = {p: set() for p in gone}
    if head is not None:
        for p, blob in gitcommits.path_blobs(repo, head, list(gone)).items():
            ours[p].add(blob)
    for p in gone:
        if p in record.removed:
            ours[p].add(record.files[p])
    mine = [p for p in gone if ours[p]]
    if not mine:
        return Removals([], [])
    held = gitcommits.path_blobs(repo, base, mine)
    remote_tip = tip()
    there = (
        gitcommits.path_blobs(repo, remote_tip, mine) if remote_tip and remote_tip != base else {}
    )
    removed: list[str] = []
    kept: list[str] = []
    for p in mine:
        alike = held.get(p) in ours[p] and there.get(p, held.get(p)) in ours[p]
        (removed if alike else kept).append(p)
    return Removals(removed, kept)
