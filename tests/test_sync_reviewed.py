"""A reviewer's correction committed on a pull request's branch that ``kexp sync --branch``
published from another clone (the author's checkout stays on main, her experiment files
untracked in her working tree): her next sync takes it into her working tree, so that
her next edit is made on it and nothing publishes her older version over it; an edit of
hers made on the older version stops the sync, naming the file, nothing lost on either
side; and a read across refs in her clone takes the reviewer's version for the newest
before she syncs. Real git: a bare repository on disk as the remote, the author's and
the reviewer's clones, the reviewer committing and pushing as a forge user does."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import git, run_kexp
from test_sync import clone, make_remote, record

BRANCH = "kexp/agent-1"
HERS = "Online softmax - +10%"
THEIRS = "Online softmax, single pass over rows - +10%"


def _reviewed(
    tmp_path: Path, rewrite: bool = False, message: str | None = None
) -> tuple[Path, Path, str, str]:
    """Alice records an experiment on main and publishes it with ``kexp sync --branch``;
    the lead corrects its summary on the pull request's branch, commits and pushes
    (``rewrite``: amends Alice's commit instead, and force-pushes, as a reviewer who
    keeps a pull request to one commit does; ``message``: the amended commit's new
    message). (remote, alice, its id, its repository path)."""
    remote, base = make_remote(tmp_path)
    alice = clone(remote, tmp_path / "alice")
    lead = clone(remote, tmp_path / "lead")
    made = record(alice, base, HERS, score=1.10)
    assert made.path is not None
    assert run_kexp("sync", "--branch", BRANCH, cwd=alice).returncode == 0
    git(lead, "fetch", "-q")
    git(lead, "switch", "-q", "-c", "review", f"origin/{BRANCH}")
    fixed = run_kexp("update", made.id, "--set", f"change_summary={THEIRS}", cwd=lead)
    assert fixed.returncode == 0, fixed.stderr
    if rewrite:
        if message is None:
            git(lead, "commit", "-q", "-a", "--amend", "--no-edit")
        else:
            git(lead, "commit", "-q", "-a", "--amend", "-m", message)
        git(lead, "push", "-q", "--force", "origin", f"review:{BRANCH}")
    else:
        git(lead, "commit", "-q", "-am", "review: clarify the summary")
        git(lead, "push", "-q", "origin", f"review:{BRANCH}")
    return remote, alice, made.id, made.path.relative_to(alice).as_posix()


def _on_branch(remote: Path, path: str) -> str:
    return git(remote, "show", f"{BRANCH}:{path}")


@pytest.mark.parametrize(
    ("rewrite", "message"),
    [(False, None), (True, None), (True, "Review: online softmax, summary clarified")],
    ids=["commit", "amend-force-push", "amend-new-message-force-push"],
)
def test_the_reviewers_correction_reaches_the_working_tree_and_survives_an_update(
    tmp_path: Path, rewrite: bool, message: str | None
) -> None:
    """Alice syncs (a dry run first says it would, changing nothing): the lead's
    summary comes into her working tree (it said "merged" and left her file as it
    was; after a force-push, it stopped: "changed both here and on" the branch, which
    she never edited; after an amend with a new message, its subject changed, too); she
    adds a tag and syncs: the branch holds the lead's summary and her tag (her older
    summary was pushed over the lead's, silently), published without a force-push of
    hers."""
    remote, alice, exp_id, path = _reviewed(tmp_path, rewrite, message)
    planned = run_kexp("sync", "--branch", BRANCH, "--dry-run", "--json", cwd=alice)
    assert planned.returncode == 0, planned.stderr
    plan = json.loads(planned.stdout)
    assert plan["taken_in"] == [path]
    assert plan["would_push"] is False and plan["committed"] == [], plan
    assert f"change_summary: {HERS}" in (alice / path).read_text()

    done = run_kexp("sync", "--branch", BRANCH, cwd=alice)
    assert done.returncode == 0, done.stderr
    assert f"change_summary: {THEIRS}" in (alice / path).read_text()
    assert f"origin/{BRANCH}'s newer version of 1 experiment file(s)" in done.stdout
    assert path in done.stdout

    assert run_kexp("update", exp_id, "--set", "tags=rowwise", cwd=alice).returncode == 0
    again = run_kexp("sync", "--branch", BRANCH, cwd=alice)
    assert again.returncode == 0, again.stderr
    on_branch = _on_branch(remote, path)
    assert f"change_summary: {THEIRS}" in on_branch and "rowwise" in on_branch
    assert (alice / path).read_text() == on_branch + "\n"
    assert git(remote, "rev-parse", BRANCH) == git(alice, "rev-parse", BRANCH)


def test_an_untouched_file_is_taken_in_when_the_sync_publishes_another(tmp_path: Path) -> None:
    """Alice records a second experiment and syncs: hers is published, the first comes
    in as the lead corrected it, and the branch keeps the lead's text."""
    remote, alice, _, path = _reviewed(tmp_path)
    second = record(alice, git(alice, "rev-parse", "HEAD"), "Two rows per warp - +3%", score=1.03)

    done = run_kexp("sync", "--branch", BRANCH, cwd=alice)
    assert done.returncode == 0, done.stderr
    assert f"change_summary: {THEIRS}" in (alice / path).read_text()
    assert f"change_summary: {THEIRS}" in _on_branch(remote, path)
    assert f"/{second.id}-" in git(remote, "ls-tree", "-r", "--name-only", BRANCH)


def test_an_edit_made_before_syncing_is_merged_with_the_correction_and_taken_in(
    tmp_path: Path,
) -> None:
    """Alice tags her copy before she syncs, the lead's correction unseen: the sync
    merges the two (other lines) and her file becomes the merge (it kept her older
    summary, which her next edit and sync pushed over the lead's)."""
    remote, alice, exp_id, path = _reviewed(tmp_path)
    assert run_kexp("update", exp_id, "--set", "tags=rowwise", cwd=alice).returncode == 0

    done = run_kexp("sync", "--branch", BRANCH, cwd=alice)
    assert done.returncode == 0, done.stderr
    on_branch = _on_branch(remote, path)
    assert f"change_summary: {THEIRS}" in on_branch and "rowwise" in on_branch
    assert (alice / path).read_text() == on_branch + "\n"
    assert run_kexp("update", exp_id, "--set", "tags=rowwise,fused", cwd=alice).returncode == 0
    assert run_kexp("sync", "--branch", BRANCH, cwd=alice).returncode == 0
    on_branch = _on_branch(remote, path)
    assert f"change_summary: {THEIRS}" in on_branch and "fused" in on_branch


@pytest.mark.parametrize("way", ["publish your version", "take theirs"])
def test_an_edit_made_on_the_older_version_stops_the_sync_and_settles_as_said(
    tmp_path: Path, way: str
) -> None:
    """Alice brings her local branch up to date with git (git fetch origin B:B), then
    tags her copy, made on her summary: the sync stops naming the file (it committed
    her copy on the lead's and pushed her older summary over it, silently); the branch
    keeps the lead's version, her file hers, saved in git too; each way the line gives,
    run as printed, settles it."""
    remote, alice, exp_id, path = _reviewed(tmp_path)
    git(alice, "fetch", "-q", "origin", f"{BRANCH}:{BRANCH}")
    assert run_kexp("update", exp_id, "--set", "tags=rowwise", cwd=alice).returncode == 0
    mine = (alice / path).read_text()

    refused = run_kexp("sync", "--branch", BRANCH, cwd=alice)
    assert refused.returncode != 0
    assert path in refused.stderr and "changed both here and on" in refused.stderr
    assert "Traceback" not in refused.stderr
    assert f"change_summary: {THEIRS}" in _on_branch(remote, path)
    assert (alice / path).read_text() == mine
    saved = re.search(r" as ([0-9a-f]{12})", refused.stderr)
    assert saved is not None, refused.stderr
    assert git(alice, "cat-file", "blob", saved.group(1)) + "\n" == mine
    command = re.search(rf"to {way}.*?, run (.*?) and (kexp|the same) sync", refused.stderr)
    assert command is not None, refused.stderr
    path_with_kexp = f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}"
    subprocess.run(["bash", "-c", command.group(1)], cwd=alice, check=True,
                   env={**os.environ, "PATH": path_with_kexp})  # fmt: skip
    done = run_kexp("sync", "--branch", BRANCH, cwd=alice)
    assert done.returncode == 0, done.stderr

    on_branch = _on_branch(remote, path)
    assert (alice / path).read_text() == on_branch + "\n"
    if way == "publish your version":
        assert on_branch + "\n" == mine
        return
    assert f"change_summary: {THEIRS}" in on_branch and "rowwise" not in on_branch
    assert run_kexp("update", exp_id, "--set", "tags=rowwise", cwd=alice).returncode == 0
    assert run_kexp("sync", "--branch", BRANCH, cwd=alice).returncode == 0
    on_branch = _on_branch(remote, path)
    assert f"change_summary: {THEIRS}" in on_branch and "rowwise" in on_branch


@pytest.mark.parametrize("rewrite", [False, True], ids=["commit", "amend-force-push"])
def test_reads_across_refs_take_the_reviewers_version_before_the_author_syncs(
    tmp_path: Path, rewrite: bool
) -> None:
    """In Alice's clone, fetched, her file as she published it is no edit: show and
    top across refs take the lead's version (they took hers, "an older version on
    origin/kexp/agent-1"; after a force-push too, her branch's commit rewritten
    there), naming hers as the older."""
    _, alice, exp_id, _ = _reviewed(tmp_path, rewrite)
    git(alice, "fetch", "-q")

    shown = run_kexp("show", exp_id, "--all-refs", "--json", cwd=alice)
    assert shown.returncode == 0, shown.stderr
    found = json.loads(shown.stdout)
    assert found["change_summary"] == THEIRS
    # Hers is the older version (the working tree's), the branch's not called older;
    # the note says the shown version is the branch's alone (unmerged), with hers.
    assert f"an older version on origin/{BRANCH}" not in found.get("note", "")
    top = run_kexp("top", "--all-refs", "--json", cwd=alice)
    assert top.returncode == 0, top.stderr
    (row,) = [r for r in json.loads(top.stdout) if r["id"] == exp_id]
    assert (row["change_summary"], row["ref"]) == (THEIRS, f"origin/{BRANCH}")
    assert "local" in row["other_versions"] and not row["diverged"]


@pytest.mark.parametrize("way", ["publish your version", "take theirs"])
def test_an_edit_made_before_a_force_pushed_correction_stops_the_sync_and_settles(
    tmp_path: Path, way: str
) -> None:
    """The lead amends Alice's commit and force-pushes; Alice, unaware, tags her copy
    and syncs: the sync stops naming the file, her local branch and the remote as they
    were, her file kept; each way the line gives, run as printed, settles it, the
    branch then following the remote's without a force-push."""
    remote, alice, exp_id, path = _reviewed(tmp_path, rewrite=True)
    assert run_kexp("update", exp_id, "--set", "tags=rowwise", cwd=alice).returncode == 0
    mine, before = (alice / path).read_text(), git(alice, "rev-parse", BRANCH)

    refused = run_kexp("sync", "--branch", BRANCH, cwd=alice)
    assert refused.returncode != 0 and path in refused.stderr, refused.stderr
    assert git(alice, "rev-parse", BRANCH) == before and (alice / path).read_text() == mine
    assert f"change_summary: {THEIRS}" in _on_branch(remote, path)
    command = re.search(rf"to {way}.*?, run (.*?) and (kexp|the same) sync", refused.stderr)
    assert command is not None, refused.stderr
    path_with_kexp = f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}"
    subprocess.run(["bash", "-c", command.group(1)], cwd=alice, check=True,
                   env={**os.environ, "PATH": path_with_kexp})  # fmt: skip
    done = run_kexp("sync", "--branch", BRANCH, cwd=alice)
    assert done.returncode == 0, done.stderr

    on_branch = _on_branch(remote, path)
    assert (alice / path).read_text() == on_branch + "\n"
    assert (on_branch + "\n" == mine) == (way == "publish your version")
    assert f"change_summary: {THEIRS}" in on_branch or way == "publish your version"
    assert git(remote, "rev-parse", BRANCH) == git(alice, "rev-parse", BRANCH)


def test_an_amend_is_told_a_rewrite_and_another_authors_commit_on_its_parent_is_not(
    repo: Path,
) -> None:
    """What tells a reviewer's rewrite of a published commit (its version taken for the
    newest, the clone's branch moved to it) from another commit: an amend with a new
    message is one (it was not: another subject); a commit another author made on the
    same parent, changing the same file, is not (its clone's change is no rewrite of
    this one's: taking it for one would drop this one's commit)."""
    from git import Repo

    from kexp.gitops.rewrites import rewritten_on

    (repo / "experiments" / "a.md").write_text("first\n")
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", "Record a")
    mine = git(repo, "rev-parse", "HEAD")
    (repo / "experiments" / "a.md").write_text("corrected\n")
    git(repo, "commit", "-q", "-a", "--amend", "-m", "Review: a, corrected")
    amended = git(repo, "rev-parse", "HEAD")
    git(repo, "reset", "-q", "--hard", "HEAD~1")  # (which lacks experiments/)
    (repo / "experiments").mkdir(exist_ok=True)
    (repo / "experiments" / "a.md").write_text("another\n")
    git(repo, "add", "-A")
    who = ("-c", "user.name=Bob", "-c", "user.email=bob@example.com")
    git(repo, *who, "commit", "-q", "-m", "Record a")
    theirs = git(repo, "rev-parse", "HEAD")
    assert rewritten_on(Repo(repo), amended, mine)
    assert not rewritten_on(Repo(repo), theirs, mine)
