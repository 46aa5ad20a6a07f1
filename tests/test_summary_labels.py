"""A corrected score whose summary names its outcome beside the figure (trial Q05):
``kexp update ID --set score=1.05`` restated ``- -2.32% (regression)`` as ``- +5.00%
(regression)`` beside outcome improvement, in every view. The word follows the figure it
labels, in the case it was written in; a word of the *What* is left alone."""

from __future__ import annotations

import json
import random
import re
from pathlib import Path

import pytest

from tests.conftest import run_kexp


@pytest.mark.parametrize(
    ("summary", "old", "new", "restated", "outcome"),
    [
        ("Split-K with 2 splits - -2.32% (regression)", "0.9768", "1.05",
         "Split-K with 2 splits - +5.00% (improvement)", "improvement"),
        ("Unroll by 4 - +3.0% (Improvement)", "1.03", "0.995",
         "Unroll by 4 - -0.5% (Marginal)", "marginal"),
        ("Fix regression in tiling - 1.25x IMPROVEMENT", "1.25", "0.90",
         "Fix regression in tiling - 0.90x REGRESSION", "regression"),
        ("Swizzle smem - +0.4% (within noise)", "1.004", "1.2",
         "Swizzle smem - +20.0% (improvement)", "improvement"),
        ("Vectorize - +8% (improvement)", "1.08", "1.12",
         "Vectorize - +12% (improvement)", "improvement"),
    ],
)  # fmt: skip
def test_a_corrected_score_restates_the_outcome_its_summary_names(
    repo: Path, summary: str, old: str, new: str, restated: str, outcome: str
) -> None:
    added = run_kexp(
        "add", "--summary", summary, "--score", old, "--operator", "k.cu: f",
        "--dtype", "bf16", "--env", "H100", "--detailed-description", "x", "--json",
        cwd=repo, process=True,
    )  # fmt: skip
    assert added.returncode == 0, added.stderr
    exp_id = json.loads(added.stdout)["id"]
    done = run_kexp(
        "update", exp_id, "--set", f"score={new}", "--reason", "wrong baseline",
        cwd=repo, process=True,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    listed = run_kexp(
        "list", "--fields", "id,score,outcome,change_summary", "--json", cwd=repo, process=True
    )
    (row,) = json.loads(listed.stdout)
    assert (row["outcome"], row["change_summary"]) == (outcome, restated)


def timings(path: Path, time: float, seed: int) -> str:
    """Nine samples of two configurations around ``time`` microseconds, within ±0.5 %."""
    draw = random.Random(seed)
    samples = {
        config: [time * scale * (1 + draw.uniform(-0.005, 0.005)) for _ in range(9)]
        for config, scale in (("M1", 1.0), ("M2", 3.0))
    }
    path.write_text(json.dumps(samples))
    return str(path)


def test_a_remeasured_score_restates_the_outcome_its_summary_names(
    repo: Path, tmp_path: Path
) -> None:
    """kexp remeasure restates the figure as the update does: the outcome word with it."""
    added = run_kexp(
        "add", "--json", "--summary", "Swizzle smem - +30% (improvement)",
        "--operator", "k.cu: f", "--dtype", "bf16", "--env", "H100",
        "--baseline", timings(tmp_path / "b1.json", 20.0, 1),
        "--candidate", timings(tmp_path / "c1.json", 20.0 / 1.3, 2),
        cwd=repo, process=True,
    )  # fmt: skip
    assert added.returncode == 0, added.stderr
    exp_id = json.loads(added.stdout)["id"]
    again = run_kexp(
        "remeasure", exp_id, "--baseline", timings(tmp_path / "b2.json", 20.0, 3),
        "--candidate", timings(tmp_path / "c2.json", 20.0 / 0.7, 4),
        cwd=repo, process=True,
    )  # fmt: skip
    assert again.returncode == 0, again.stderr
    listed = run_kexp("list", "--json", cwd=repo, process=True)
    (row,) = json.loads(listed.stdout)
    assert row["outcome"] != "improvement", row
    words = re.findall(r"\((\w+)\)", row["change_summary"])
    assert words == [row["outcome"]], row
