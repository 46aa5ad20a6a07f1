"""A step on a parent whose baseline is not the parent's code.

Trial J: an agent's second step (``kexp add --pid``) gave the original code's timings
as ``--baseline``, the very file its parent was measured against. The speedup over the
reference was recorded as a step over the parent, so the cumulative score multiplied
the parent's step in twice (1.6147 for a true 1.2903) and ranked it best, without a
word. Now the parent's baseline samples given again are recorded against the reference
(certain: the score is its speedup over the reference), and a baseline whose medians are
the parent's baseline's, not its candidate's, is warned of with the fix.

Timings as do_bench writes them (``{config: [ms, ...]}``), 50 samples a side of 0.3 % CV.
"""

from __future__ import annotations

import json
import random
import statistics
from pathlib import Path

from conftest import git, run_kexp

#: Each configuration's time (ms) in the reference code.
REFERENCE = {"c1024": 0.0200, "c4096": 0.0700}
KERNEL = ("--operator", "csrc/softmax.cu: softmax_fwd", "--dtype", "fp16", "--env", "H100 SXM")


def do_bench(folder: Path, name: str, factor: float, seed: int) -> str:
    """``{config: do_bench(fn, return_mode="all")}`` of a kernel ``factor`` times the
    reference's time."""
    rng = random.Random(seed)
    timings = {
        config: [round(ms * factor * (1 + rng.gauss(0, 0.003)), 6) for _ in range(50)]
        for config, ms in REFERENCE.items()
    }
    path = folder / f"{name}.json"
    path.write_text(json.dumps(timings), encoding="utf-8")
    return str(path)


def add(repo: Path, *args: str) -> tuple[dict[str, object], list[str]]:
    """``kexp add --json ...``: its record and its warnings."""
    done = run_kexp("add", "--json", "--unit", "ms", *args, cwd=repo)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout), [ln for ln in done.stderr.splitlines() if "warning" in ln]


def shown(repo: Path, exp_id: str) -> dict[str, object]:
    done = run_kexp("show", exp_id, "--json", cwd=repo)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def median_ratio(base: str, cand: str) -> float:
    """The geometric mean of the median speedups: the score kexp computes from them."""
    b, c = (json.loads(Path(p).read_text()) for p in (base, cand))
    ratios = [statistics.median(b[k]) / statistics.median(c[k]) for k in b]
    return float(statistics.geometric_mean(ratios))


def campaign(repo: Path, tmp_path: Path) -> tuple[str, str, str]:
    """The first step, measured against the reference; the code of the next committed.
    Its id, the reference's file and the first step's (the parent's code)."""
    ref = do_bench(tmp_path, "ref", 1.0, 1)
    v1 = do_bench(tmp_path, "v1", 0.80, 2)
    first, _ = add(repo, "--summary", "Vectorized loads - faster", *KERNEL, "--measured-against",
                   "reference", "--baseline", ref, "--candidate", v1)  # fmt: skip
    (repo / "k.cu").write_text("// v2\n")
    git(repo, "add", "k.cu")
    git(repo, "commit", "-qm", "v2")
    return str(first["id"]), ref, v1


def test_the_parents_reference_baseline_given_again_is_recorded_against_the_reference(
    repo: Path, tmp_path: Path
) -> None:
    """The step gives its parent's own baseline file (the reference) as ``--baseline``:
    recorded measured against the reference, so its cumulative score is its score (the
    speedup over the reference), not that score times the parent's; said in one line."""
    parent, ref, _ = campaign(repo, tmp_path)
    v2 = do_bench(tmp_path, "v2", 0.775, 3)
    step, said = add(repo, "--summary", "Warp shuffle - faster", "--pid", parent,
                     "--baseline", ref, "--candidate", v2)  # fmt: skip
    over_reference = median_ratio(ref, v2)
    record = shown(repo, str(step["id"]))
    assert record["measured_against"] == "reference", record
    assert abs(float(record["cumulative_score"]) - over_reference) < 1e-3, record  # type: ignore[arg-type]
    ours = [line for line in said if parent[:10] in line and "sample for sample" in line]
    assert len(ours) == 1 and "recorded measured against the reference" in ours[0], said
    # The campaign's best is this step at its speedup over the reference, not 1.29 x 1.25.
    top = json.loads(run_kexp("top", "--json", cwd=repo).stdout)
    assert top[0]["id"] == step["id"], top
    assert abs(top[0]["cumulative_score"] - over_reference) < 1e-3, top


def test_a_parent_given_by_hand_is_kept_and_the_copy_is_warned_of_with_the_fix(
    repo: Path, tmp_path: Path
) -> None:
    """``--measured-against parent`` said: kept as said, but the warning says the
    baseline is the parent's baseline, sample for sample, and gives the update."""
    parent, ref, _ = campaign(repo, tmp_path)
    v2 = do_bench(tmp_path, "v2", 0.775, 3)
    step, said = add(repo, "--summary", "Warp shuffle - faster", "--pid", parent, "--baseline",
                     ref, "--candidate", v2, "--measured-against", "parent")  # fmt: skip
    assert shown(repo, str(step["id"]))["measured_against"] == "parent"
    fix = f"kexp update {step['id']} --set measured_against=reference"
    assert [line for line in said if "sample for sample" in line and fix in line], said


def test_the_reference_timed_again_as_a_steps_baseline_is_warned_of(
    repo: Path, tmp_path: Path
) -> None:
    """The reference timed again (other samples, the same medians) as the step's
    baseline: nothing certain, so recorded as said, with a warning that names the
    medians (the baseline's, the parent's baseline's and candidate's) and the fix."""
    parent, _, _ = campaign(repo, tmp_path)
    again = do_bench(tmp_path, "ref-again", 1.0, 4)
    v2 = do_bench(tmp_path, "v2", 0.775, 3)
    step, said = add(repo, "--summary", "Warp shuffle - faster", "--pid", parent,
                     "--baseline", again, "--candidate", v2)  # fmt: skip
    assert shown(repo, str(step["id"]))["measured_against"] == "parent"
    ours = [line for line in said if "nearer" in line]
    assert len(ours) == 1, said
    results = shown(repo, parent)["results"]
    code = ", ".join(f"{r['candidate']:.2f}" for r in results)  # type: ignore[attr-defined]
    assert f"{code} us" in ours[0] and "kexp update" in ours[0], ours


def test_the_parents_code_as_the_baseline_is_a_step_told_nothing(
    repo: Path, tmp_path: Path
) -> None:
    """The parent's code as the baseline (its candidate file, or timed again): a step
    over the parent, recorded so, with no word of its baseline."""
    parent, _, v1 = campaign(repo, tmp_path)
    v1_again = do_bench(tmp_path, "v1-again", 0.80, 5)
    for number, base in enumerate((v1, v1_again)):
        v2 = do_bench(tmp_path, f"v2-{number}", 0.775, 6 + number)
        step, said = add(repo, "--summary", f"Warp shuffle {number} - faster", "--pid", parent,
                         "--baseline", base, "--candidate", v2)  # fmt: skip
        assert shown(repo, str(step["id"]))["measured_against"] == "parent"
        assert not [line for line in said if "baseline" in line], said
