"""What the user meant by the timings they gave (trial J, round 23): do_bench's
quantiles are no samples, do_bench's milliseconds are not read as microseconds without
a word, and the one kernel being optimized can be named in an nsys summary (or ncu
profile) of several. Each is recorded with ``kexp add`` (or the MCP ``record`` tool)
in a real store, as the user ran it, and checked against the file's own numbers."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

from conftest import run_kexp

from kexp import Store

CAMPAIGN = ("--operator", "csrc/softmax.cu: softmax_fwd", "--dtype", "fp16", "--env", "H100")


def files(repo: Path) -> list[Path]:
    return sorted((repo / "experiments").rglob("*.md"))


def add(repo: Path, base: str, cand: str, *extra: str) -> tuple[int, str, str]:
    """``kexp add --json`` of ``base`` and ``cand`` written in ``repo``."""
    (repo / "base.in").write_text(base, encoding="utf-8")
    (repo / "cand.in").write_text(cand, encoding="utf-8")
    done = run_kexp(
        "add", "--summary", "Tiled rows - x", *CAMPAIGN, "--baseline", "base.in",
        "--candidate", "cand.in", "--json", *extra, cwd=repo,
    )  # fmt: skip
    return done.returncode, done.stdout, done.stderr


def refused(repo: Path, base: str, cand: str, *extra: str) -> str:
    """The one-line error of a ``kexp add`` that must write nothing."""
    before = files(repo)
    status, _, err = add(repo, base, cand, *extra)
    assert status != 0 and "Traceback" not in err, err
    assert len(err.strip().splitlines()) == 1, err
    assert files(repo) == before
    return err


def recorded(repo: Path, base: str, cand: str, *extra: str) -> tuple[dict[str, Any], str]:
    """The record of a ``kexp add`` that succeeds, and its stderr (the warnings)."""
    status, out, err = add(repo, base, cand, *extra)
    assert status == 0, err
    return Store(repo).get_experiment(json.loads(out)["id"]).to_dict(), err


# --- do_bench quantiles ----------------------------------------------------------------


def test_do_bench_quantiles_give_each_configurations_median_alone_never_an_interval(
    repo: Path,
) -> None:
    """``json.dump({cfg: do_bench(fn, quantiles=[0.5, 0.2, 0.8])})`` is [p50, p20, p80]
    in ms: it was stored as 3 samples a side, ``baseline_n: 3`` and a 95 % interval
    made of quantiles."""
    base = {"r4096_c1024": [0.0200, 0.0195, 0.0206], "r4096_c4096": [0.0700, 0.0690, 0.0712]}
    cand = {"r4096_c1024": [0.0170, 0.0166, 0.0175], "r4096_c4096": [0.0595, 0.0588, 0.0603]}
    exp, err = recorded(repo, json.dumps(base), json.dumps(cand), "--unit", "ms")
    assert not exp.get("score_ci") and not exp.get("samples"), exp
    ratios = [base[c][0] / cand[c][0] for c in base]  # the medians, the first of each
    assert exp["score"] == round(math.exp(sum(map(math.log, ratios)) / 2), 4)
    for result in exp["results"]:
        assert result["baseline"] == round(base[result["config"]][0] * 1000, 6), result
        assert "baseline_n" not in result and "candidate_n" not in result, result
    assert "summaries without raw samples" in exp["raw_result"]
    (line,) = [line for line in err.splitlines() if "quantiles" in line]
    assert "median is taken alone, without an interval" in line, line
    assert 'return_mode="all"' in line, line
