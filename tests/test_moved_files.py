"""Experiment files moved by hand in a pull request, in a clone of a bare remote: the
review counts a move whose bytes are the same as moved (never a correction of a
"reformatted" file), and ``kexp validate --changed`` and the review warn of a file moved
from where kexp put it (``moved-file``), naming the ``git mv`` that puts it back; the
moves kexp makes itself (``kexp migrate-layout``) and a move back are not warned of.
The truth is git's."""

from __future__ import annotations

import json
import re
import subprocess
from pathlib import Path

from conftest import git, run_kexp
from test_sync import clone, make_remote, record


def _tidy_branch(tmp_path: Path) -> tuple[Path, str, str, str]:
    """A clone whose main holds two experiments (pushed), on a branch chore/tidy that
    moves the second into a folder of its own by hand (``git mv``, not committed yet):
    (the clone, the id, its path before, its path after, from the clone's root)."""
    remote, base = make_remote(tmp_path)
    lead = clone(remote, tmp_path / "lead")
    parent = record(lead, base, "Tiling - +30%", score=1.30)
    step = record(lead, base, "Double buffer - +10%", score=1.10, pid=parent.id)
    git(lead, "add", "-A")
    git(lead, "commit", "-q", "-m", "two steps")
    git(lead, "push", "-q", "origin", "main")
    git(lead, "switch", "-q", "-c", "chore/tidy")
    assert step.path is not None
    old = step.path.relative_to(lead).as_posix()
    new = f"experiments/gemm/{step.id}-db.md"
    (lead / "experiments" / "gemm").mkdir()
    git(lead, "mv", old, new)
    return lead, step.id, old, new


def test_a_move_is_counted_as_moved_not_as_a_correction(tmp_path: Path) -> None:
    """The review of a branch that only moves a file (its bytes the same, as git says):
    "1 moved", the paths before and after and "content unchanged"; nothing corrected,
    nothing "reformatted"; alike before the move is committed (the working tree) and
    after, in Markdown and JSON."""
    lead, exp_id, old, new = _tidy_branch(tmp_path)
    uncommitted = run_kexp("review", "main", cwd=lead, process=True)
    git(lead, "commit", "-q", "-m", "move by hand")
    assert git(lead, "diff", "--name-status", "-M100%", "main", "HEAD") == f"R100\t{old}\t{new}"
    committed = run_kexp("review", "main", "HEAD", cwd=lead, process=True)
    for said in (uncommitted, committed):
        assert said.returncode == 0, said.stderr
        text = said.stdout
        assert "**0 added · 0 corrected · 0 removed · 1 moved**" in text, text
        assert f"`{exp_id}` Double buffer - +10%: moved from `{old}` to `{new}`" in text
        assert "content unchanged" in text and "reformatted" not in text, text
        assert "### Corrected" not in text and "### Moved (1)" in text, text
    data = json.loads(run_kexp("review", "main", "HEAD", "--json", cwd=lead, process=True).stdout)
    assert (data["summary"]["corrected"], data["summary"]["moved"]) == (0, 1), data["summary"]
    assert data["corrected"] == [] and [m["id"] for m in data["moved"]] == [exp_id]
    assert (data["moved"][0]["old_path"], data["moved"][0]["path"]) == (old, new)


def test_validate_changed_and_the_review_warn_of_a_move_and_say_how_to_undo_it(
    tmp_path: Path,
) -> None:
    """``kexp validate --changed main`` warns of the moved file in one line (its path
    before, that the path kexp chose stays) with the command that moves it back; the
    review shows the same warning. Run, that command puts the file back where git had
    it, and the warning is gone."""
    lead, _, old, new = _tidy_branch(tmp_path)
    git(lead, "commit", "-q", "-m", "move by hand")
    checked = run_kexp("validate", "--changed", "main", cwd=lead, process=True)
    assert checked.returncode == 0, checked.stderr  # a warning: nothing refused
    lines = checked.stdout.splitlines()
    warned = [line for line in lines if "warning[moved-file]" in line]
    assert len(warned) == 1 and warned[0].startswith(f"{new}:1:1:"), checked.stdout
    assert f"from {old}" in warned[0] and "chosen once and stays" in warned[0], warned
    hint = lines[lines.index(warned[0]) + 1]
    back = re.search(r"move it back, from the repository's root \((.*)\), and commit", hint)
    assert back is not None and f"git mv {new} {old}" in back.group(1), hint
    review = run_kexp("review", "main", "HEAD", cwd=lead, process=True).stdout
    assert f"{new}:1:1: warning[moved-file]" in review, review
    subprocess.run(back.group(1), shell=True, cwd=lead, check=True)
    git(lead, "commit", "-q", "-m", "moved back")
    assert old in git(lead, "ls-files", "experiments") and not (lead / new).exists()
    again = run_kexp("validate", "--changed", "main", cwd=lead, process=True)
    assert again.returncode == 0 and "moved-file" not in again.stdout, again.stdout


def test_no_warning_for_kexps_own_moves_and_for_a_move_back(tmp_path: Path) -> None:
    """``kexp migrate-layout`` (month layout to fan-out) moves files where kexp puts
    them: no ``moved-file``. Nor is a move back from a folder of one's own warned of."""
    lead, exp_id, old, new = _tidy_branch(tmp_path)
    # Main's file put in the plain month layout (a store an earlier kexp wrote).
    month = "/".join([*old.split("/")[:3], old.split("/")[-1]])
    git(lead, "mv", new, month)
    git(lead, "commit", "-q", "-m", "month layout")
    git(lead, "switch", "-q", "-c", "migrate")
    done = run_kexp("migrate-layout", cwd=lead, process=True)
    assert done.returncode == 0, done.stderr
    git(lead, "commit", "-q", "-m", "kexp migrate-layout")
    assert git(lead, "diff", "--name-status", "-M100%", "chore/tidy", "HEAD") == (
        f"R100\t{month}\t{old}"
    )
    checked = run_kexp("validate", "--changed", "chore/tidy", cwd=lead, process=True)
    assert checked.returncode == 0 and "moved-file" not in checked.stdout, checked.stdout
    # A file in a folder of one's own, moved back where kexp puts it.
    git(lead, "mv", old, new)
    git(lead, "commit", "-q", "-m", "own folder")
    git(lead, "switch", "-q", "-c", "back")
    git(lead, "mv", new, old)
    git(lead, "commit", "-q", "-m", "back")
    checked = run_kexp("validate", "--changed", "migrate", cwd=lead, process=True)
    assert checked.returncode == 0 and "moved-file" not in checked.stdout, checked.stdout
    assert exp_id in git(lead, "ls-files", "--", old)


def test_plain_validate_warns_of_a_file_outside_kexps_layout_once_merged(tmp_path: Path) -> None:
    """The hand move merged into main: ``kexp validate`` (what CI runs on main) warns of
    the file outside the folders kexp puts files in, with the ``git mv`` that puts it
    back (its id's folder of its creation month), which settles it. A file in the older
    month layout (what ``kexp migrate-layout`` moves) is none."""
    lead, _, old, new = _tidy_branch(tmp_path)
    git(lead, "commit", "-q", "-m", "move by hand")
    git(lead, "switch", "-q", "main")
    git(lead, "merge", "-q", "--ff-only", "chore/tidy")
    checked = run_kexp("validate", cwd=lead, process=True)
    assert checked.returncode == 0, checked.stderr  # a warning: nothing refused
    lines = checked.stdout.splitlines()
    warned = [line for line in lines if "warning[moved-file]" in line]
    assert len(warned) == 1 and warned[0].startswith(f"{new}:1:1:"), checked.stdout
    hint = lines[lines.index(warned[0]) + 1]
    back = re.search(r"move it back, from the repository's root \((.*)\), and commit", hint)
    right = f"{old.rsplit('/', 1)[0]}/{new.rsplit('/', 1)[1]}"  # its folder, its name
    assert back is not None and f"git mv {new} {right}" in back.group(1), hint
    subprocess.run(back.group(1), shell=True, cwd=lead, check=True)
    again = run_kexp("validate", cwd=lead, process=True)
    assert again.returncode == 0 and "moved-file" not in again.stdout, again.stdout
    month = "/".join([*old.split("/")[:3], right.split("/")[-1]])  # the older layout
    git(lead, "mv", right, month)
    again = run_kexp("validate", cwd=lead, process=True)
    assert again.returncode == 0 and "moved-file" not in again.stdout, again.stdout
