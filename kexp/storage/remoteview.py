"""What a git remote's branches hold, as a sync compares with them: one ``git ls-remote``
asked once (never stale remote-tracking branches), their commits this clone holds, and
the questions :mod:`kexp.storage.sync` asks of them."""

from __future__ import annotations

import dataclasses
from typing import Any

from kexp.gitops import commits as gitcommits
from kexp.gitops import divergence as gitdivergence
from kexp.gitops import git as kgit
from kexp.gitops import remotes as gitremotes


@dataclasses.dataclass
class RemoteView:
    """The remote's branches a sync compares with, as the remote has them now (``git
    ls-remote``, asked once; never stale remote-tracking branches, nor another remote's):
    a dry run asks too, and changes nothing but fetching the commits this clone lacks
    (objects alone: no ref of this clone moves), so that every branch is compared as the
    remote has it (one whose commit cannot be fetched counts as holding nothing)."""

    repo: Any
    remote: str
    folder: str
    _listed: dict[str, str] | None = None
    _held: set[str] | None = None
    _said_default: str | None = None
    _default: tuple[str | None] | None = None

    def listed(self) -> dict[str, str]:
        """Each branch's commit on the remote."""
        if self._listed is None:
            self._listed, self._said_default = gitremotes.remote_branches(self.repo, self.remote)
            tips = sorted(set(self._listed.values()))
            self._held = gitremotes.held_commits(self.repo, tips)
            lacking = sorted(b for b, tip in self._listed.items() if tip not in self._held)
            if lacking:  # another agent pushed since this clone last fetched
                gitremotes.fetch_objects(self.repo, self.remote, lacking)
                self._held = gitremotes.held_commits(self.repo, tips)
        return self._listed

    def default(self) -> str | None:
        """The remote's default branch (where pull requests land): the branch its
        ``HEAD`` names now; else as this clone last knew it (``REMOTE/HEAD``); else
        ``main`` or ``master``; else its only branch; None: none of these (each must be
        a branch the remote has: a bare repository made by ``git init`` names ``master``
        while its one branch is ``trunk``)."""
        listed = self.listed()
        if self._default is None:
            named = (self._said_default, gitremotes.default_branch(self.repo, self.remote))
            found = next((b for b in (*named, "main", "master") if b in listed), None)
            only = next(iter(listed)) if len(listed) == 1 else None
            self._default = (found or only,)
        return self._default[0]

    def fetch(self, branch: str) -> None:
        """Fetch the remote's ``branch`` when this clone lacks its commit, so that it
        can be compared (a dry run fetches nothing)."""
        tip = self.listed().get(branch)
        if (
            tip is not None
            and tip not in (self._held or ())
            and gitremotes.fetch_branch(self.repo, self.remote, branch) == tip
        ):
            self._held = {*(self._held or ()), tip}

    def track(self, besides: str) -> dict[str, tuple[int, bool]]:
        """Bring this clone's remote-tracking branches of the remote's other branches
        (all but ``besides``) to their commits on the remote, as ``git fetch REMOTE``
        does (:meth:`listed` fetched the commits), so that reads across refs see them:
        each one moved → (how many commits it gained, whether it is new here)."""
        before = gitremotes.tracking_branches(self.repo, self.remote)
        tips = {name: tip for name, tip in self.branches().items() if name != besides}
        moved = gitremotes.track_branches(self.repo, self.remote, tips, before)
        known = list(dict.fromkeys(before.values()))
        return {
            name: (
                gitdivergence.count_commits(
                    self.repo, tips[name], [before[name]] if name in before else known
                ),
                name not in before,
            )
            for name in moved
        }

    def branches(self) -> dict[str, str]:
        """Each branch's commit, of those this clone holds."""
        listed = self.listed()
        return {name: tip for name, tip in listed.items() if tip in (self._held or ())}

    def lacks(self, commit: str, *, besides: str | None = None) -> bool:
        """Whether publishing ``commit`` brings the remote's branches (but ``besides``)
        a change of an experiment file none of them holds."""
        tips = list(dict.fromkeys(t for n, t in self.branches().items() if n != besides))
        return bool(gitdivergence.unpublished_paths(self.repo, commit, tips, self.folder))

    def landed(self, commit: str) -> bool:
        """Whether the remote's default branch holds every experiment change of
        ``commit`` (a side branch's pull request merged, or squashed, there): another
        side branch holding them (one stacked on it) is not a landing."""
        tip = self.branches().get(self.default() or "")
        if tip is None:
            return False
        return not gitdivergence.unpublished_paths(self.repo, commit, [tip], self.folder)

    def merged(self, commit: str) -> bool:
        """Whether the remote's default branch holds every commit of ``commit``, as far
        as this clone holds them: a pull request merged with its commits (not squashed)."""
        tip = self.branches().get(self.default() or "")
        return tip is not None and gitdivergence.count_commits(self.repo, commit, [tip]) == 0

    def ahead(self, commit: str, base: str | None) -> int:
        """How many commits ``commit`` has that ``base`` has not; without a ``base`` (a
        branch new on the remote), that none of the remote's branches has."""
        others = [base] if base else list(dict.fromkeys(self.branches().values()))
        return gitdivergence.count_commits(self.repo, commit, others)

    def known_tip(self, branch: str) -> str | None:
        """The remote's commit of ``branch`` as far as this clone knows it: the remote's
        when held here, else its remote-tracking branch (as last fetched); None when the
        remote has no such branch."""
        tip = self.listed().get(branch)
        if tip is None or tip in (self._held or ()):
            return tip
        return gitcommits.ref_commit(self.repo, f"refs/remotes/{self.remote}/{branch}")

    def removed(self, paths: list[str], head: str, *, among: set[str]) -> set[str]:
        """Of ``paths`` (files ``head``, the checkout's commit, holds and the working
        tree lacks), those one of the remote's branches ``among`` (the side branches
        this clone published to) removed: its tip lacks the file its merge base with
        ``head`` holds (a removal published there, on its way through its pull
        request)."""
        found: set[str] = set()
        for name, tip in self.branches().items():
            if name not in among or found >= set(paths):
                continue
            lacking = [p for p in paths if p not in gitcommits.path_blobs(self.repo, tip, paths)]
            for since in kgit.merge_bases(self.repo, tip, head) if lacking else ():
                found |= gitcommits.path_blobs(self.repo, since, lacking).keys()
        return found

    def held(self, paths: list[str]) -> set[str]:
        """The working tree's files among ``paths`` that a branch holds alike."""
        if not paths:
            return set()
        tips = list(dict.fromkeys(self.branches().values()))
        return gitdivergence.held_files(self.repo, paths, tips)
