"""An experiment whose pull request was merged, then reverted (``git revert -m1``), in a
clone of a bare remote whose side branch still holds it: ``kexp log ID`` (a prefix, as
listings print it) follows the file up to the commit that removed it, and ``kexp show ID
--all-refs`` names that commit, not a ``kexp rm`` nobody ran. The truth is git's."""

from __future__ import annotations

import json
from pathlib import Path

from conftest import git, run_kexp
from test_sync import clone, make_remote, record

from kexp import Store


def _merged_then_reverted(tmp_path: Path) -> tuple[Path, str, str, str]:
    """A lead's clone whose main merged feat/splitk (one experiment, pushed) and then
    reverted the merge: (the clone, the experiment's id, the commit adding it, the
    revert's commit)."""
    remote, base = make_remote(tmp_path)
    lead = clone(remote, tmp_path / "lead")
    parent = record(lead, base, "Tiling - +30%", score=1.30)
    git(lead, "add", "-A")
    git(lead, "commit", "-q", "-m", "tiling")
    git(lead, "switch", "-q", "-c", "feat/splitk")
    step = record(lead, base, "Split-K - +25%", score=1.25, pid=parent.id)
    git(lead, "add", "-A")
    git(lead, "commit", "-q", "-m", "split-k")
    added = git(lead, "rev-parse", "HEAD")
    git(lead, "push", "-q", "-u", "origin", "feat/splitk")
    git(lead, "switch", "-q", "main")
    git(lead, "merge", "-q", "--no-ff", "-m", "Merge PR splitk", "feat/splitk")
    git(lead, "revert", "-m1", "--no-edit", "HEAD")
    git(lead, "push", "-q", "origin", "main")
    git(lead, "fetch", "-q")
    revert = git(lead, "rev-parse", "HEAD")
    # The truth, from git: main lost it, the side branch holds it, the revert removed it.
    assert not list((lead / "experiments").rglob(f"{step.id}-*.md"))
    assert step.id in git(lead, "ls-tree", "-r", "--name-only", "origin/feat/splitk")
    deleted = git(lead, "log", "--format=%H", "--diff-filter=D", "--", "experiments")
    assert deleted.split() == [revert]
    return lead, step.id, added, revert


def test_log_follows_a_reverted_experiment_up_to_its_removal(tmp_path: Path) -> None:
    """``kexp log PREFIX`` of the reverted experiment: its history on main, the commit
    that added it, then the revert that deleted it (text and JSON)."""
    lead, exp_id, added, revert = _merged_then_reverted(tmp_path)
    shown = run_kexp("log", exp_id[:10], cwd=lead, process=True)
    assert shown.returncode == 0, shown.stderr
    assert f"{added[:12]} " in shown.stdout and f"{revert[:12]} " in shown.stdout, shown.stdout
    said = f'removed in {revert[:12]} by Agent lead: Revert "Merge PR splitk" (experiments/'
    assert said in shown.stdout, shown.stdout
    data = json.loads(run_kexp("log", exp_id[:10], "--json", cwd=lead, process=True).stdout)
    assert [(e["commit"], e["action"]) for e in data] == [(added, "added"), (revert, "deleted")]
    # The library alike; an id no commit ever held is still not found, said in one line.
    assert [e.commit for e in Store(lead).history(exp_id[:10])] == [added, revert]
    missing = run_kexp("log", "0123456789", cwd=lead, process=True)
    assert missing.returncode == 2 and "no experiment with id 0123456789" in missing.stderr
    assert "Traceback" not in missing.stderr


def test_show_across_refs_names_the_commit_that_removed_it(tmp_path: Path) -> None:
    """``kexp show PREFIX --all-refs``: the working tree's removal is its newest state,
    said as the revert commit that made it (hash and subject) and where its history is,
    not as a ``kexp rm``."""
    lead, exp_id, _, revert = _merged_then_reverted(tmp_path)
    shown = run_kexp("show", exp_id[:10], "--all-refs", cwd=lead, process=True)
    assert shown.returncode == 2, shown.stdout
    said = shown.stderr
    assert f'removed by commit {revert[:12]} (Revert "Merge PR splitk")' in said, said
    assert f"kexp log {exp_id[:10]}" in said and "kexp rm" not in said, said
    assert len(said.strip().splitlines()) == 1 and "Traceback" not in said


def test_log_of_a_removal_reads_as_one_line(tmp_path: Path) -> None:
    """``kexp rm`` and a commit saying why: ``kexp log ID`` printed every field of the
    removal as ``→ (absent)``. It reads as one line: removed in the commit, by its
    author, with the commit's reason; the JSON keeps the fields."""
    remote, base = make_remote(tmp_path)
    lead = clone(remote, tmp_path / "lead")
    step = record(lead, base, "Split-K - +25%", score=1.25)
    git(lead, "add", "-A")
    git(lead, "commit", "-q", "-m", "split-k")
    assert run_kexp("rm", step.id, "--yes", cwd=lead).returncode == 0
    git(lead, "add", "-A")
    git(lead, "commit", "-q", "-m", "drop split-k: timed the wrong kernel")
    removal = git(lead, "rev-parse", "HEAD")
    author = git(lead, "log", "-1", "--format=%an")
    shown = run_kexp("log", step.id[:10], cwd=lead, process=True)
    assert shown.returncode == 0, shown.stderr
    assert "(absent)" not in shown.stdout, shown.stdout
    entry = shown.stdout.split("\n\n")[-1].splitlines()
    assert entry[0].startswith(f"{removal[:12]} "), shown.stdout
    assert entry[1:] == [
        f"    removed in {removal[:12]} by {author}: drop split-k: timed the wrong kernel "
        f"({git(lead, 'log', '-1', '--format=', '--name-only', removal)})"
    ], shown.stdout
    data = json.loads(run_kexp("log", step.id[:10], "--json", cwd=lead, process=True).stdout)
    assert data[-1]["action"] == "deleted" and data[-1]["changes"]["score"]["new"] is None
