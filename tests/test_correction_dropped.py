"""A correction a later change undid: ``kexp validate`` (and ``--changed``, ``review``)
warns.

The trial: ``kexp remeasure --replace-round`` needs the file committed; the agent's next
``git commit -a`` of kernel code swept the correction into the code commit, and a
``git revert`` of that code put the score back (1.0995 → 0.9543) with nothing said.
The file lost its correction note, and its score is again the value the note replaced.
"""

from __future__ import annotations

import shlex
import subprocess
from pathlib import Path

from conftest import git, run_kexp

COMMON = ("--operator", "kernel.cu: k", "--dtype", "fp16", "--env", "H100")


def corrected_then_reverted(repo: Path) -> tuple[str, Path]:
    """An experiment recorded (0.9543) and committed, its score corrected (1.0995), the
    correction swept into a code commit by ``git commit -a``, and that commit reverted."""
    done = run_kexp("add", "--summary", "persistent - x", *COMMON, "--score", "0.9543", cwd=repo)
    assert done.returncode == 0, done.stderr
    exp_id = done.stdout.split()[1].rstrip(":")
    git(repo, "add", "experiments")
    git(repo, "commit", "-qm", "record")
    fixed = run_kexp(
        "update", exp_id, "--set", "score=1.0995", "--reason", "clocks unlocked", cwd=repo
    )
    assert fixed.returncode == 0, fixed.stderr
    with (repo / "kernel.cu").open("a") as handle:
        handle.write("// num_stages=4\n")
    git(repo, "commit", "-qam", "code: num_stages=4")  # sweeps the correction in
    git(repo, "revert", "--no-edit", "HEAD")
    (path,) = (repo / "experiments").rglob(f"{exp_id}-*.md")
    return exp_id, path


def test_a_revert_that_undoes_a_correction_is_warned_with_the_command_that_restores_it(
    repo: Path,
) -> None:
    exp_id, path = corrected_then_reverted(repo)
    assert "score: 0.9543" in path.read_text()  # what the revert did

    done = run_kexp("validate", cwd=repo, process=True)

    assert done.returncode == 0, done.stderr  # a warning: nothing is refused
    assert "Traceback" not in done.stderr
    (line,) = [w for w in done.stdout.splitlines() if "correction-dropped" in w]
    revert = git(repo, "rev-parse", "HEAD")[:12]
    assert f"commit {revert} ('Revert \"code: num_stages=4\"') removed its correction" in line
    assert "(score 0.9543 → 1.0995), and its score is back to 0.9543" in line
    (hint,) = [w for w in done.stdout.splitlines() if "hint: bring it back" in w]
    assert f"kexp update {exp_id[:10]} --set score=SCORE --reason TEXT" in hint

    # The advice followed, as written: the file as it was before the revert.
    restore = hint.split("(git checkout ", 1)[1].split(")", 1)[0]
    subprocess.run(["git", "checkout", *shlex.split(restore)], cwd=repo / "experiments", check=True)
    assert "score: 1.0995" in path.read_text()
    assert "correction-dropped" not in run_kexp("validate", cwd=repo).stdout  # uncommitted
    git(repo, "commit", "-qm", "restore the correction", "--", "experiments")
    assert "correction-dropped" not in run_kexp("validate", cwd=repo).stdout


def test_the_warning_stays_through_other_edits_until_a_new_correction_is_recorded(
    repo: Path,
) -> None:
    exp_id, _ = corrected_then_reverted(repo)
    assert run_kexp("update", exp_id, "--set", "tags=revert", cwd=repo).returncode == 0
    git(repo, "commit", "-qam", "tag it")

    assert "correction-dropped" in run_kexp("validate", cwd=repo).stdout

    again = ["update", exp_id, "--set", "score=0.97", "--reason", "the revert was right"]
    assert run_kexp(*again, cwd=repo).returncode == 0
    assert "correction-dropped" not in run_kexp("validate", cwd=repo).stdout


def test_a_note_removed_in_the_working_tree_is_warned_before_it_is_committed(
    repo: Path,
) -> None:
    done = run_kexp("add", "--summary", "persistent - x", *COMMON, "--score", "0.9543", cwd=repo)
    exp_id = done.stdout.split()[1].rstrip(":")
    run_kexp("update", exp_id, "--set", "score=1.0995", "--reason", "clocks unlocked", cwd=repo)
    git(repo, "add", "experiments")
    git(repo, "commit", "-qm", "record and correct")
    (path,) = (repo / "experiments").rglob(f"{exp_id}-*.md")
    text = path.read_text()
    kept = [line for line in text.splitlines(True) if not line.startswith("**Correction (")]
    path.write_text("".join(kept))

    out = run_kexp("validate", cwd=repo).stdout

    assert "warning[correction-dropped] score: a change not committed yet removed" in out
    assert "(git checkout HEAD -- :/experiments/" in out


def test_validate_changed_and_review_warn_of_a_change_that_drops_a_correction(
    repo: Path,
) -> None:
    corrected_then_reverted(repo)
    before = git(repo, "rev-parse", "HEAD~1")

    checked = run_kexp("validate", "--changed", before, cwd=repo, process=True)
    reviewed = run_kexp("review", before, cwd=repo, process=True)

    for out in (checked.stdout, reviewed.stdout):
        assert "correction-dropped" in out, out
        assert "this change removed its correction of" in out
        assert "and its score is back to 0.9543" in out
    assert checked.returncode == 0 and reviewed.returncode == 0
