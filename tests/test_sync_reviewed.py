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
from pathlib import Path

from conftest import git, run_kexp
from test_sync import clone, make_remote, record

BRANCH = "kexp/agent-1"
HERS = "Online softmax - +10%"
THEIRS = "Online softmax, single pass over rows - +10%"


def _reviewed(tmp_path: Path) -> tuple[Path, Path, str, str]:
    """Alice records an experiment on main and publishes it with ``kexp sync --branch``;
    the lead corrects its summary on the pull request's branch, commits and pushes.
    (remote, alice, its id, its repository path)."""
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
    git(lead, "commit", "-q", "-am", "review: clarify the summary")
    git(lead, "push", "-q", "origin", f"review:{BRANCH}")
    return remote, alice, made.id, made.path.relative_to(alice).as_posix()


def _on_branch(remote: Path, path: str) -> str:
    return git(remote, "show", f"{BRANCH}:{path}")


def test_reads_across_refs_take_the_reviewers_version_before_the_author_syncs(
    tmp_path: Path,
) -> None:
    """In Alice's clone, fetched, her file as she published it is no edit: show and
    top across refs take the lead's version (they took hers, "an older version on
    origin/kexp/agent-1"), naming hers as the older."""
    _, alice, exp_id, _ = _reviewed(tmp_path)
    git(alice, "fetch", "-q")

    shown = run_kexp("show", exp_id, "--all-refs", "--json", cwd=alice)
    assert shown.returncode == 0, shown.stderr
    found = json.loads(shown.stdout)
    assert found["change_summary"] == THEIRS
    assert f"origin/{BRANCH}" not in found.get("note", "")
    top = run_kexp("top", "--all-refs", "--json", cwd=alice)
    assert top.returncode == 0, top.stderr
    (row,) = [r for r in json.loads(top.stdout) if r["id"] == exp_id]
    assert (row["change_summary"], row["ref"]) == (THEIRS, f"origin/{BRANCH}")
    assert "local" in row["other_versions"] and not row["diverged"]
