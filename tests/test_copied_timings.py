"""The same timing files recorded again after a commit are no new measurement.

Trial J: an agent retried a record after new commits: the very same timing files (50
samples a side, identical), the same parent, operator, dtype and env. The retry was
refused on the same base commit, but after a commit it was recorded as a second
experiment, and ``kexp top`` listed the step twice. Now it is refused in one line that
names the experiment holding those timings and the commit they were recorded on; new
timings of the new commit are recorded.

Timings as do_bench writes them (``{config: [ms, ...]}``), 50 samples of 0.3 % CV.
"""

from __future__ import annotations

import json
import random
from pathlib import Path

from conftest import git, run_kexp

KERNEL = ("--operator", "csrc/softmax.cu: softmax_fwd", "--dtype", "fp16", "--env", "H100 SXM")


def do_bench(folder: Path, name: str, ms: float, seed: int) -> str:
    rng = random.Random(seed)
    path = folder / f"{name}.json"
    path.write_text(json.dumps({"c1024": [ms * (1 + rng.gauss(0, 0.003)) for _ in range(50)]}))
    return str(path)


def commit(repo: Path, text: str) -> None:
    (repo / "k.cu").write_text(text)
    git(repo, "add", "k.cu")
    git(repo, "commit", "-qm", text)


def ids_in_top(repo: Path) -> list[str]:
    return [r["id"] for r in json.loads(run_kexp("top", "--json", cwd=repo).stdout)]


def test_the_same_files_recorded_again_after_a_commit_are_refused(
    repo: Path, tmp_path: Path
) -> None:
    v0, v1 = do_bench(tmp_path, "v0", 0.020, 1), do_bench(tmp_path, "v1", 0.017, 2)
    first = run_kexp("add", "--json", "--unit", "ms", "--summary", "Vectorized - +17%", *KERNEL,
                     "--baseline", v0, "--candidate", v1, cwd=repo)  # fmt: skip
    parent = json.loads(first.stdout)["id"]
    commit(repo, "// v2")
    v2 = do_bench(tmp_path, "v2", 0.0165, 3)
    step = ["add", "--json", "--unit", "ms", "--summary", "Warp shuffle - +3%", "--pid", parent,
            "--baseline", v1, "--candidate", v2]  # fmt: skip
    made = run_kexp(*step, cwd=repo)
    assert made.returncode == 0, made.stderr
    step_id = json.loads(made.stdout)["id"]
    recorded_on = git(repo, "rev-parse", "HEAD")
    commit(repo, "// v3")

    again = run_kexp(*step, cwd=repo)
    assert again.returncode != 0, again.stdout
    assert again.stderr.count("\n") == 1, again.stderr
    assert step_id in again.stderr and recorded_on[:12] in again.stderr, again.stderr
    assert "kexp remeasure" in again.stderr and "Traceback" not in again.stderr
    assert sorted(ids_in_top(repo)) == sorted([parent, step_id])

    # The new commit's code timed: a new measurement, recorded.
    v3 = do_bench(tmp_path, "v3", 0.0164, 4)
    new = run_kexp(*step[:-1], v3, cwd=repo)
    assert new.returncode == 0, new.stderr
    assert len(ids_in_top(repo)) == 3


def test_the_same_change_and_files_recorded_again_after_a_commit_are_refused(
    repo: Path, tmp_path: Path
) -> None:
    """The same code change (a diff file) and the same timing files after a commit that
    touched other code: refused, naming the first."""
    diff = tmp_path / "change.diff"
    diff.write_text(
        "--- a/k.cu\n+++ b/k.cu\n@@ -1 +1 @@\n-float x = load(p);\n+float4 x = load4(p);\n"
    )
    v0, v1 = do_bench(tmp_path, "v0", 0.020, 1), do_bench(tmp_path, "v1", 0.017, 2)
    args = ["add", "--json", "--unit", "ms", "--summary", "Vectorized - +17%", *KERNEL,
            "--diff-file", str(diff), "--baseline", v0, "--candidate", v1]  # fmt: skip
    first = run_kexp(*args, cwd=repo)
    assert first.returncode == 0, first.stderr
    first_id = json.loads(first.stdout)["id"]
    commit(repo, "// other code")
    again = run_kexp(*args, cwd=repo)
    assert again.returncode != 0, again.stdout
    assert again.stderr.count("\n") == 1 and first_id in again.stderr, again.stderr
    assert ids_in_top(repo) == [first_id]
