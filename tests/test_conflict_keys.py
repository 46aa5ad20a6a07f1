"""A merge conflict resolved by deleting only git's marker lines: every field both sides
changed is left twice, and ``kexp validate`` reports each of them in one run, not one
per run. Two clones of a bare remote correct the same experiment, a real ``git merge``
conflicts, and the person resolving it keeps both sides."""

from __future__ import annotations

import json
import re
import subprocess
from pathlib import Path

from conftest import git, run_kexp
from test_sync import clone, make_remote


def test_a_conflict_resolved_by_deleting_the_markers_reports_every_key_given_twice(
    tmp_path: Path,
) -> None:
    remote, _ = make_remote(tmp_path)
    lead = clone(remote, tmp_path / "lead")
    added = run_kexp(
        *("add", "--json", "--summary", "TMA - +6%", "--score", "1.06", "--description", "x"),
        *("--operator", "csrc/k.cu: k", "--dtype", "bf16", "--env", "H100"),
        cwd=lead,
    )
    assert added.returncode == 0, added.stderr
    exp_id = json.loads(added.stdout)["id"]
    git(lead, "add", "-A")
    git(lead, "commit", "-q", "-m", "tma")
    git(lead, "push", "-q", "origin", "main")
    other = clone(remote, tmp_path / "other")
    for root, score in ((other, "1.07"), (lead, "1.05")):  # the summary's figure follows
        assert run_kexp("update", exp_id, "--set", f"score={score}", cwd=root).returncode == 0
        git(root, "commit", "-q", "-am", f"score {score}")
    git(other, "push", "-q", "origin", "main")
    git(lead, "fetch", "-q")
    merged = subprocess.run(["git", "merge", "-q", "origin/main"], cwd=lead, capture_output=True)
    assert merged.returncode != 0
    path = next((lead / "experiments").rglob(f"{exp_id}-*.md"))
    text = path.read_text()
    assert "<<<<<<<" in text
    # Resolved by deleting the marker lines only: both sides' lines stay.
    path.write_text(re.sub(r"^(<{7}|={7}|>{7}).*\n", "", text, flags=re.MULTILINE))

    checked = run_kexp("validate", str(path.relative_to(lead)), cwd=lead, process=True)
    assert checked.returncode == 1
    errors = [line for line in checked.stdout.splitlines() if "error[" in line]
    assert len(errors) == 2, checked.stdout
    assert "duplicate key 'change_summary'" in errors[0]
    assert "duplicate key 'score'" in errors[1]
    assert "2 error(s)" in checked.stderr
