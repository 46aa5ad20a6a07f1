"""What the user meant by the timings they gave (trial J, round 23): do_bench's
quantiles are no samples, do_bench's milliseconds are not read as microseconds without
a word, and the one kernel being optimized can be named in an nsys summary (or ncu
profile) of several. Each is recorded with ``kexp add`` (or the MCP ``record`` tool)
in a real store, as the user ran it, and checked against the file's own numbers."""

from __future__ import annotations

import json
import math
import random
from pathlib import Path
from typing import Any

import pytest
from conftest import run_kexp
from test_timings_misread import CAMPAIGN, files, recorded, refused

from kexp import Store
from kexp.core.errors import TimingsWarning
from kexp.measure.record import record_iteration
from kexp.measure.timings import kernel_named
from tests.test_mcp import Agent, record_fields, run_agent

NCU = Path(__file__).parent / "timing_files" / "ncu_details.csv"


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


# --- a unit assumed --------------------------------------------------------------------


def gemm(centre: float, seed: int) -> str:
    """do_bench(fn, return_mode="all") of a 4096^3 fp16 GEMM: 30 timings in ms."""
    rng = random.Random(seed)
    return json.dumps(
        {"m4096_n4096_k4096": [round(centre * (1 + rng.gauss(0, 0.004)), 5) for _ in range(30)]}
    )


def test_milliseconds_that_read_as_a_plausible_microsecond_time_are_not_recorded_unsaid(
    repo: Path,
) -> None:
    """A 1.2 ms GEMM timed by do_bench, recorded without --unit, was 1.2 us in the
    results, without a word (and a later remeasure --unit ms was refused as 1000x)."""
    base, cand = gemm(1.20, 1), gemm(1.05, 2)
    said = refused(repo, base, cand)
    assert "nothing was written" in said and "assumed" in said, said
    assert "--unit ms" in said and "--unit us" in said, said
    exp, err = recorded(repo, base, cand, "--unit", "ms")
    (result,) = exp["results"]
    assert 1150 < result["baseline"] < 1250 and 1000 < result["candidate"] < 1100, result
    assert "kexp: warning" not in err, err
    exp, _ = recorded(repo, base, cand, "--tag", "tiny", "--unit", "us")  # said so: kept
    assert exp["results"][0]["baseline"] < 2, exp["results"]
    # times no millisecond reading makes doubtful are recorded without a word
    exp, err = recorded(repo, gemm(2.71, 3), gemm(2.60, 4))
    assert 2.6 < exp["results"][0]["baseline"] < 2.8 and err == "", err


def test_a_teams_setting_moves_the_line_below_which_a_unit_must_be_given(repo: Path) -> None:
    """``unit_ambiguous_below_us`` in kexp.toml is the line a record without a unit is
    held to (a team of sub-2 us kernels lowers it)."""
    base, cand = gemm(1.20, 1), gemm(1.05, 2)
    refused(repo, base, cand)
    (repo / "kexp.toml").write_text("unit_ambiguous_below_us = 1.0\n", encoding="utf-8")
    exp, _ = recorded(repo, base, cand)
    assert 1.15 < exp["results"][0]["baseline"] < 1.25, exp["results"]


def test_the_record_tool_refuses_a_plausible_microsecond_time_in_its_words(
    repo: Path,
) -> None:
    base = {"m4096": json.loads(gemm(1.20, 1))["m4096_n4096_k4096"]}
    cand = {"m4096": json.loads(gemm(1.05, 2))["m4096_n4096_k4096"]}
    said: dict[str, list[str]] = {}

    async def work(agent: Agent) -> None:
        failed, said["texts"] = await agent.call(
            "record", baseline=base, candidate=cand, **record_fields()
        )
        assert failed, said["texts"]

    run_agent(repo, work)
    (refusal,) = said["texts"]
    assert 'call record again with unit: "ms"' in refusal, refusal
    assert "--unit" not in refusal and "\n" not in refusal.strip(), refusal
    assert files(repo) == []


# --- the kernel being optimized ----------------------------------------------------------

NSYS_HEADER = (
    "Processing [report1.sqlite] with [/opt/nvidia/nsight-systems/2024.2.1/host-linux-x64/"
    "reports/cuda_gpu_kern_sum.py]... \n"
    "Time (%),Total Time (ns),Instances,Avg (ns),Med (ns),Min (ns),Max (ns),StdDev (ns),Name\n"
)
FILL = (
    '"void at::native::vectorized_elementwise_kernel<4, at::native::FillFunctor<c10::Half>, '
    'at::detail::Array<char *, 1>>(int, T2, T3)"'
)


def kern_sum(softmax_ns: str, fill_ns: str, block: int = 1024) -> str:
    """``nsys stats --report cuda_gpu_kern_sum --format csv`` of a PyTorch script: the
    softmax kernel (its template's block size ``block``) and the fill kernel that made
    its input."""
    softmax = f'"void softmax_fwd<__half, {block}>(__half *, const __half *, int, int)"'
    return (
        NSYS_HEADER
        + f'92.1,"2,048,512",100,"{softmax_ns}","{softmax_ns}","20,160","21,344",215.3,{softmax}\n'
        + f'7.9,"175,840",100,"{fill_ns}","{fill_ns}","1,728","1,824",19.2,{FILL}\n'
    )


def test_kernel_scores_the_one_kernel_named_of_an_nsys_summary_of_several(repo: Path) -> None:
    """The fill kernel that made the input diluted the softmax's speedup in a geometric
    mean, and nothing could say which kernel was the one changed."""
    base, cand = kern_sum("20,480.0", "1,760.0"), kern_sum("17,024.0", "1,760.0", 2048)
    exp, err = recorded(repo, base, cand, "--kernel", "softmax_fwd")
    assert exp["score"] == round(20480 / 17024, 4), exp["score"]
    (result,) = exp["results"]
    assert result["config"] == "softmax_fwd" and result["baseline"] == 20.48, result
    assert result["baseline_n"] == 100, result
    assert "2 kernels" not in err, err
    said = refused(repo, base, cand, "--kernel", "softmax_bwd")
    assert "no kernel named 'softmax_bwd'" in said, said
    assert "softmax_fwd<__half, 1024>" in said and "FillFunctor" in said, said
    assert "name one of them" in said, said
    said = refused(repo, base, cand, "--kernel", "void")
    assert "matches 2 kernels" in said and "give more of its name" in said, said
    said = refused(repo, base, cand)  # the template changed: names differ, and the way
    assert "their names differ" in said and "--kernel NAME" in said, said
    cand = kern_sum("17,024.0", "1,760.0")
    _, err = recorded(repo, base, cand, "--tag", "both")  # every kernel: said, with the way
    (line,) = [line for line in err.splitlines() if "2 kernels" in line]
    assert "geometric mean" in line and "--kernel NAME" in line, line


def test_a_kernel_named_for_timings_of_configurations_is_refused(repo: Path) -> None:
    plain = json.dumps({"r4096": [20.1, 20.3, 20.2]}), json.dumps({"r4096": [17.1, 17.0, 17.2]})
    said = refused(repo, *plain, "--kernel", "softmax_fwd")
    assert "configurations are no kernels" in said and "without --kernel" in said, said
    done = run_kexp(
        "add", "--summary", "Tiled rows - x", *CAMPAIGN, "--score", "1.1", "--kernel", "k",
        cwd=repo,
    )  # fmt: skip
    assert done.returncode != 0 and "nothing to pick the kernel 'k' from" in done.stderr
    assert len(done.stderr.strip().splitlines()) == 1 and files(repo) == [], done.stderr


def test_kernel_keeps_the_launches_of_the_one_kernel_of_an_ncu_profile(repo: Path) -> None:
    done = run_kexp(
        "add", "--summary", "Fused mean - +4%", *CAMPAIGN, "--score", "1.04",
        "--profiling-file", str(NCU), "--kernel", "layernorm_kernel", "--json", cwd=repo,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    kept = Store(repo).get_experiment(json.loads(done.stdout)["id"]).profiling_info
    assert "of 1 launch(es) (1 launch(es) of other kernels left out)" in kept, kept
    assert "layernorm_kernel" in kept and "softmax_kernel" not in kept, kept


def test_the_record_tool_takes_the_kernel(repo: Path) -> None:
    (repo / "base.csv").write_text(kern_sum("20,480.0", "1,760.0"), encoding="utf-8")
    (repo / "cand.csv").write_text(kern_sum("17,024.0", "1,760.0"), encoding="utf-8")
    said: dict[str, Any] = {}

    async def work(agent: Agent) -> None:
        said["answer"] = await agent.json(
            "record", baseline="base.csv", candidate="cand.csv", kernel="softmax_fwd",
            **record_fields(),
        )  # fmt: skip
        said["wrong"] = await agent.call(
            "record", baseline="base.csv", candidate="cand.csv", kernel="nope",
            **record_fields(),
        )  # fmt: skip

    run_agent(repo, work)
    assert said["answer"]["score"] == round(20480 / 17024, 4), said["answer"]
    failed, (refusal,) = said["wrong"]
    assert failed and "no kernel named 'nope'" in refusal, refusal
    assert len(files(repo)) == 1


def test_in_python_records_inside_kernel_named_score_the_one_kernel(
    repo: Path, store: Store
) -> None:
    (repo / "base.csv").write_text(kern_sum("20,480.0", "1,760.0"), encoding="utf-8")
    (repo / "cand.csv").write_text(kern_sum("17,024.0", "1,760.0"), encoding="utf-8")
    fields = {"change_summary": "Tiled rows - x", "operator_sig": "k.cu: softmax_fwd"}
    with pytest.warns(TimingsWarning, match="no raw samples"), kernel_named("softmax_fwd"):
        exp = record_iteration(
            store, baseline=repo / "base.csv", candidate=repo / "cand.csv", dtype_sig="fp16",
            env="H100", **fields,
        )  # fmt: skip
    assert exp.score == round(20480 / 17024, 4)
    assert [r["config"] for r in exp.results or []] == ["softmax_fwd"]
