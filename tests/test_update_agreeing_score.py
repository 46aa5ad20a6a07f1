"""A score corrected to a value its measurement still gives keeps its interval.

Trial J: ``kexp update ID --set score=1.0490`` on a step measured 1.0486 [1.0467, 1.0505]
(results: 1.0487; ``kexp validate``: no warning) was told that its results "now
contradict" the score, its ``score_ci`` was dropped, and its summary's ``+5%`` was said to
state the old score (it states 1.049 too). Now a score inside the interval, that the
results give within ``score_tolerance``, is corrected without a word and keeps its
interval; one outside it is warned of and its interval dropped, as before.

Timings as do_bench writes them (``{config: [ms, ...]}``), 40 samples of 0.3 % CV.
"""

from __future__ import annotations

import json
from pathlib import Path

from conftest import run_kexp
from test_drift_reason_views import KERNEL, do_bench


def recorded(repo: Path, tmp_path: Path) -> dict[str, object]:
    v0, v1 = do_bench(tmp_path, "v0", 0.0200, 5), do_bench(tmp_path, "v1", 0.01905, 6)
    done = run_kexp("add", "--json", "--unit", "ms", "--summary", "Vectorized loads - +5%",
                    *KERNEL, "--baseline", v0, "--candidate", v1, cwd=repo)  # fmt: skip
    assert done.returncode == 0, done.stderr
    return json.loads(run_kexp("show", json.loads(done.stdout)["id"], "--json", cwd=repo).stdout)


def test_a_score_rounded_within_its_interval_is_corrected_without_a_word(
    repo: Path, tmp_path: Path
) -> None:
    exp = recorded(repo, tmp_path)
    score, (low, high) = float(exp["score"]), exp["score_ci"]  # type: ignore[arg-type, misc]
    rounded = round(score, 3) if round(score, 3) != score else round(score + 0.0004, 4)
    assert low <= rounded <= high and rounded != score  # within the measurement's interval
    done = run_kexp("update", str(exp["id"]), "--set", f"score={rounded}",
                    "--reason", "rounded as the table says", cwd=repo)  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert "warning" not in done.stderr, done.stderr
    after = json.loads(run_kexp("show", str(exp["id"]), "--json", cwd=repo).stdout)
    assert after["score"] == rounded and after["score_ci"] == [low, high], after
    assert after["change_summary"] == "Vectorized loads - +5%"
    checked = run_kexp("validate", cwd=repo)
    assert "0 warning(s)" in checked.stdout + checked.stderr


def test_a_score_outside_its_interval_is_still_said_to_be_contradicted(
    repo: Path, tmp_path: Path
) -> None:
    exp = recorded(repo, tmp_path)
    done = run_kexp("update", str(exp["id"]), "--set", "score=1.10", "--reason", "typo?", cwd=repo)
    assert done.returncode == 0, done.stderr
    assert "contradict" in done.stderr and "score_ci" in done.stderr, done.stderr
    after = json.loads(run_kexp("show", str(exp["id"]), "--json", cwd=repo).stdout)
    assert "score_ci" not in after, after
