"""A control that ages a drifted one out of the window of the newest (the largest drift of
the env's ``control_drift_window`` newest judges its steps) promotes the steps it judged
``marginal``: ``kexp add`` says so, naming them, as it says the other direction; and a
hand-typed score judged ``marginal`` by a control says so in the plain output too.

The trial (M): the 5th quiet A/A flipped a step marginal -> improvement, the new current
best, without a word; ``kexp add`` of the step said 'marginal' only under ``--json``.
"""

from __future__ import annotations

import json
from pathlib import Path

from conftest import run_kexp

KERNEL = ("--operator", "k.cu: gemm", "--dtype", "bf16", "--env", "H100")


def add(repo: Path, summary: str, score: str, *more: str) -> tuple[str, str]:
    done = run_kexp(
        "add", "--summary", summary, "--score", score, *KERNEL, *more, cwd=repo, process=True
    )
    assert done.returncode == 0, done.stderr
    (recorded,) = [line for line in done.stdout.splitlines() if line.startswith("recorded ")]
    return recorded.split()[1], done.stderr


def outcome(repo: Path, exp_id: str) -> str:
    done = run_kexp("show", exp_id, "--json", cwd=repo, process=True)
    return str(json.loads(done.stdout)["outcome"])


def test_a_control_that_ages_the_drifted_one_out_names_the_steps_it_promotes(
    repo: Path,
) -> None:
    drifted, _ = add(repo, "A/A old - 6% drift", "0.94", "--tag", "control")
    step, said = add(repo, "Swizzle - +5%", "1.05")
    assert outcome(repo, step) == "marginal"
    assert f"{step}: 1.0500 is within the A/A control {drifted[:10]}" in said, said
    assert "marginal, within noise" in said, said
    for n in range(1, 5):  # the drifted control still among the 5 newest: nothing said
        _, said = add(repo, f"A/A {n} - quiet", "0.999", "--tag", "control")
        assert "no longer within" not in said, said
        assert outcome(repo, step) == "marginal"
    control, said = add(repo, "A/A 5 - quiet", "0.999", "--tag", "control")
    assert outcome(repo, step) == "improvement"
    assert f"control {control}: 1 step(s) recorded on its env are no longer within" in said
    assert f"({drifted} aged out of the 5 newest)" in said, said
    assert f"judged by their own numbers now: {step} (improvement 1.0500)" in said, said
