"""What ``kexp sync --branch`` removes from a side branch, and the record it keeps of
what this clone published there.

A side branch can be shared by several clones: a file another clone published is
absent from this working tree, and must never be removed by this clone's sync. So a
file the branch holds and the working tree lacks is removed only when this clone
removed it:

* its checkout's ``HEAD`` tracks the file (``git status`` says it is deleted), or
* this clone published it to the branch earlier: each sync keeps, per side branch, the
  (path, blob) of the files it committed there, in a small file in the git folder
  (:func:`record_path`), written atomically;

and only while the branch holds that version still (the one ``HEAD`` or the record
has): a file another clone corrected there since is kept, and said. A record that is
missing or cannot be read removes nothing beyond ``HEAD``'s files (never fatal), and
is written again by the next sync.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from pathlib import Path

    import git

#: The record's format (a record of another version is ignored, as a damaged one is).
RECORD_VERSION = 1


def record_path(repo: git.Repo, branch: str) -> Path:
    """The file recording what this working tree committed to the side branch
    ``branch`` (a checked name): ``<its git folder>/kexp/published/<branch,
    percent-encoded>``. One per working tree: two worktrees of one clone hold their own
    files, and each removes only what it published."""
    from urllib.parse import quote

    from kexp.gitops import commits as gitcommits

    return gitcommits.worktree_git_dir(repo) / "kexp" / "published" / quote(branch, safe="")


@dataclasses.dataclass
class Record:
    """What this clone committed to one side branch: path → blob."""

    files: dict[str, str]
    #: Whether the file was there but could not be read (it is written again).
    damaged: bool = False

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
        try:
            data = json.loads(record_path(repo, branch).read_text(encoding="utf-8"))
        except FileNotFoundError:
            return cls({})
        except (OSError, UnicodeDecodeError, ValueError):
            return cls({}, damaged=True)
        files = data.get("files") if isinstance(data, dict) else None
        if (
            not isinstance(data, dict)
            or data.get("version") != RECORD_VERSION
            or not isinstance(files, dict)
            or not all(isinstance(k, str) and isinstance(v, str) for k, v in files.items())
        ):
            return cls({}, damaged=True)
        return cls(dict(files))

    def updated(self, committed: Mapping[str, str], removed: Sequence[str]) -> Record:
        """The record once a commit added or changed ``committed`` (path → blob) and
        removed ``removed``."""
        files = {p: b for p, b in self.files.items() if p not in set(removed)}
        files.update(committed)
        return Record(files)

    def write(self, repo: git.Repo, branch: str) -> None:
        """Write the record atomically; a failure to write is not fatal (a record not
        written only means fewer removals published later)."""
        import contextlib

        from kexp.storage import atomic

        path = record_path(repo, branch)
        text = json.dumps({"version": RECORD_VERSION, "files": dict(sorted(self.files.items()))})
        with contextlib.suppress(OSError):
            path.parent.mkdir(parents=True, exist_ok=True)
            atomic.replace(path, text + "\n")


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
    tree) to remove: those ``head`` (the checkout's commit) tracks or ``record`` holds,
    while ``base`` and ``tip()`` (the remote's branch, as far as known; asked only when
    there is such a file) hold the version ``head`` or the record has, or (``tip()``)
    none. Another clone's files are left."""
    from kexp.gitops import commits as gitcommits

    ours: dict[str, set[str]] = {p: set() for p in gone}
    if head is not None:
        for p, blob in gitcommits.path_blobs(repo, head, list(gone)).items():
            ours[p].add(blob)
    for p in gone:
        if p in record.files:
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
