"""A removal merged into the remote's default branch, read across refs (``--all-refs``)
by a clone that fetched it and has not pulled: the experiment is removed (the default
branch's newest state), and said to be held in the working tree from before that
removal. Real clones of a bare remote; the forge's merge is ``git merge --no-ff`` in a
third clone, pushed."""

from __future__ import annotations

import json
from pathlib import Path

from conftest import git
from test_refs_removed import DEAD_END, invoke, seeded
from test_sync import clone, published

from kexp import Store


def _removal_merged_on_main(tmp_path: Path) -> tuple[str, str, Path]:
    """A dead end and a good step on main; C removes the dead end on the branch rm-x,
    pushed; the forge merges it into main (``--no-ff``); B, cloned before, fetches and
    does not pull: (dead end's id, the good one's, B)."""
    remote, _, (dead, good) = published(tmp_path, *seeded(0.98))
    b, c = clone(remote, tmp_path / "b"), clone(remote, tmp_path / "c")
    git(c, "switch", "-q", "-c", "rm-x")
    Store(c).delete_experiment(dead.id)
    git(c, "commit", "-q", "-am", "Remove the dead end")
    git(c, "push", "-q", "origin", "rm-x")
    forge = clone(remote, tmp_path / "forge")
    git(forge, "merge", "-q", "--no-ff", "origin/rm-x", "-m", "Merge pull request: rm X")
    git(forge, "push", "-q", "origin", "main")
    git(b, "fetch", "-q")
    # The truth, from git: the default branch lacks it; B's checkout holds it.
    assert git(b, "symbolic-ref", "--short", "refs/remotes/origin/HEAD") == "origin/main"
    assert dead.id not in git(b, "ls-tree", "-r", "--name-only", "origin/main")
    assert list((b / "experiments").rglob(f"{dead.id}-*.md"))
    return dead.id, good.id, b


def test_a_removal_merged_into_the_default_branch_is_read_as_removed(tmp_path: Path) -> None:
    """B's ``--all-refs`` reads count, rank and teach the dead end no more; ``show``
    says where it was removed and that the working tree holds it from before (it said
    "removed on origin/main, not ... on the default branch"); B's own copy reads as it
    is without ``--all-refs``."""
    dead, good, b = _removal_merged_on_main(tmp_path)
    assert [e.id for e in Store(b, all_refs=True).list_experiments()] == [good]
    stats = json.loads(invoke(b, "stats", "--all-refs", "--json").stdout)
    assert stats["total"] == 1, stats
    lessons = invoke(b, "lessons", "--all-refs").output
    assert dead[:10] not in lessons and "registers hold the row" not in lessons, lessons
    shown = invoke(b, "show", dead, "--all-refs")
    assert shown.exit_code == 2
    said = " ".join(shown.output.split())
    assert (
        "removed on origin/main, the default branch (the working tree holds it from before "
        "that removal)" in said
    ), said
    assert "not here nor on the default branch" not in said
    here = invoke(b, "show", dead)
    assert here.exit_code == 0 and DEAD_END in here.output, here.output


def test_an_uncommitted_correction_after_the_default_branchs_removal_is_read(
    tmp_path: Path,
) -> None:
    """B corrects the dead end after main removed it (uncommitted): the working tree's
    edit is the newest state, read across refs as ever."""
    dead, good, b = _removal_merged_on_main(tmp_path)
    Store(b).update_experiment(dead, score=0.97)
    found = {e.id: e for e in Store(b, all_refs=True).list_experiments()}
    assert sorted(found) == sorted([dead, good]) and found[dead].score == 0.97
