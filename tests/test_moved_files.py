"""Experiment files moved by hand in a pull request, in a clone of a bare remote: the
review counts a move whose bytes are the same as moved (never a correction of a
"reformatted" file). The truth is git's."""

from __future__ import annotations

import json
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
