"""New file names keep the sense of the summary's figure; old names stay.

The trial: "-7%" became ``-7-regression.md`` (read as +7), and a cut "+15%" ended
``-1.md`` (read as a collision's suffix). A new file's slug says ``minus-7pct`` and
``plus-15pct`` and is never cut inside a number; a file named before keeps its name
through every write.
"""

from __future__ import annotations

from pathlib import Path

from conftest import git, run_kexp

COMMON = ("--operator", "kernel.cu: k", "--dtype", "fp16", "--env", "H100")


def added(repo: Path, summary: str, score: str) -> Path:
    done = run_kexp("add", "--summary", summary, *COMMON, "--score", score, cwd=repo, process=True)
    assert done.returncode == 0, done.stderr
    exp_id = done.stdout.split()[1].rstrip(":")
    (path,) = (repo / "experiments").rglob(f"{exp_id}-*.md")
    return path


def test_new_file_names_keep_the_sign_and_the_percent(repo: Path) -> None:
    down = added(repo, "num_stages=4 software pipelining - -7% (regression)", "0.93")
    up = added(repo, "Vectorize loads to 128-bit with tl.multiple_of - +15%", "1.15")

    assert down.name.endswith("-num-stages-4-software-pipelining-minus-7pct.md"), down.name
    assert up.name.endswith("-vectorize-loads-to-128-bit-with-tl-plus-15pct.md"), up.name
    assert run_kexp("validate", cwd=repo).returncode == 0


def test_a_file_named_before_keeps_its_name_through_every_write(repo: Path) -> None:
    path = added(repo, "num_stages=4 software pipelining - -7% (regression)", "0.93")
    exp_id = path.name[:16]
    old = path.with_name(f"{exp_id}-num-stages-4-software-pipelining-7-regression.md")
    path.rename(old)  # as the version before this one named it
    git(repo, "add", "experiments")
    git(repo, "commit", "-qm", "record")

    fixed = run_kexp("update", exp_id, "--set", "score=0.92", "--reason", "re-timed", cwd=repo)
    formatted = run_kexp("fmt", cwd=repo)
    checked = run_kexp("validate", cwd=repo)

    assert fixed.returncode == 0 and formatted.returncode == 0, fixed.stderr + formatted.stderr
    assert [p.name for p in (repo / "experiments").rglob(f"{exp_id}-*.md")] == [old.name]
    assert "score: 0.92" in old.read_text()
    assert checked.returncode == 0 and old.name not in checked.stdout, checked.stdout
