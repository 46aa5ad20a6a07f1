"""Timing files the user's tools wrote that kexp misread (trial J): each is recorded
with ``kexp add`` in a real store, as the user ran it, and what is recorded (or the
one-line refusal, nothing written) is checked against the file's own numbers."""

from __future__ import annotations

import json
import math
import random
import shutil
from pathlib import Path
from typing import Any

from conftest import run_kexp
from timing_files import COMMON, as_pytest_benchmark, times

from kexp import Store

CAMPAIGN = ("--operator", "csrc/softmax.cu: softmax_fwd", "--dtype", "fp16", "--env", "H100")


def files(repo: Path) -> list[Path]:
    return sorted((repo / "experiments").rglob("*.md"))


def add(repo: Path, base: str, cand: str, *extra: str) -> tuple[int, str, str]:
    """``kexp add --json`` of ``base`` and ``cand`` written in ``repo``: (exit status,
    stdout, stderr)."""
    (repo / "base.in").write_text(base, encoding="utf-8")
    (repo / "cand.in").write_text(cand, encoding="utf-8")
    # each record a try of its own (one summary twice would be tried before, warned)
    summary = f"Tiled rows, try {len(files(repo)) + 1} - x"
    done = run_kexp(
        "add", "--summary", summary, *CAMPAIGN, "--baseline", "base.in",
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


def recorded(repo: Path, base: str, cand: str, *extra: str) -> tuple[dict[str, object], str]:
    """The record (``kexp show --json``'s fields) of a ``kexp add`` that succeeds, and
    its stderr (the warnings)."""
    status, out, err = add(repo, base, cand, *extra)
    assert status == 0, err
    return Store(repo).get_experiment(json.loads(out)["id"]).to_dict(), err


def geomean(ratios: list[float]) -> float:
    return math.exp(sum(math.log(r) for r in ratios) / len(ratios))


# --- CSV: a header, cells ------------------------------------------------------------


def test_a_config_time_csv_without_a_header_reads_every_line(repo: Path) -> None:
    base = {"r4096_c1024": 20.0, "r4096_c4096": 70.0}
    cand = {"r4096_c1024": 10.0, "r4096_c4096": 70.0}
    exp, _ = recorded(
        repo, *("".join(f"{c},{t}\n" for c, t in side.items()) for side in (base, cand))
    )
    assert [r["config"] for r in exp["results"]] == list(base)  # type: ignore[union-attr]
    assert exp["score"] == round(geomean([base[c] / cand[c] for c in base]), 4)


def test_unquoted_thousands_separators_are_refused_naming_the_row(repo: Path) -> None:
    base = "config,time_us\nr4096_c4096,1,234.5\nr4096_c4096,1,236.0\nr4096_c4096,1,233.1\n"
    cand = "config,time_us\nr4096_c4096,987.5\nr4096_c4096,988.0\nr4096_c4096,986.1\n"
    said = refused(repo, base, cand)
    assert "base.in:2" in said and "3 cells" in said and '"1,234.5"' in said, said
    quoted = base.replace(",1,", ',"1,').replace(".5\n", '.5"\n').replace(".0\n", '.0"\n')
    quoted = quoted.replace(".1\n", '.1"\n')
    exp, _ = recorded(repo, quoted, cand)
    assert exp["score"] == round(1234.5 / 987.5, 4)


def test_a_headerless_table_is_refused_and_so_is_a_row_split_by_a_comma(repo: Path) -> None:
    (repo / "t.csv").write_text("r64,20.0,18.0\nr64,20.2,18.1\n", encoding="utf-8")
    (repo / "u.csv").write_text("config,baseline,candidate\nr64,1,020.0,18.0\n", encoding="utf-8")
    for name, what in (("t.csv", "not a header"), ("u.csv", "4 cells")):
        done = run_kexp("add", "--summary", "x - y", *CAMPAIGN, "--timings", name, cwd=repo)
        assert done.returncode != 0 and what in done.stderr, done.stderr
        assert len(done.stderr.strip().splitlines()) == 1, done.stderr
    assert files(repo) == []


def test_a_unit_in_the_header_is_a_unit_given(repo: Path) -> None:
    """Times under 0.5 us are refused as a unit assumed; in a time_ns column, they
    were refused saying no unit was given."""
    base = "config,time_ns\nc64,410\nc64,412\nc64,409\n"
    cand = "config,time_ns\nc64,380\nc64,382\nc64,379\n"
    exp, err = recorded(repo, base, cand)
    assert exp["score"] == round(410 / 380, 4), err
    assert "no unit was given" not in err


# --- nsys ----------------------------------------------------------------------------

NSYS_HEADER = (
    "Processing [report1.sqlite] with [/opt/nvidia/nsight-systems/2024.2.1/host-linux-x64/"
    "reports/cuda_gpu_kern_sum.py]... \n"
    "Time (%),Total Time (ns),Instances,Avg (ns),Med (ns),Min (ns),Max (ns),StdDev (ns),Name\n"
)
SOFTMAX = '"void softmax_fwd<__half, 1024>(__half *, const __half *, int, int)"'
FILL = (
    '"void at::native::vectorized_elementwise_kernel<4, at::native::FillFunctor<c10::Half>, '
    'at::detail::Array<char *, 1>>(int, T2, T3)"'
)


def kern_sum(softmax_ns: str, fill_ns: str) -> str:
    """``nsys stats --report cuda_gpu_kern_sum --format csv`` of a PyTorch script: the
    softmax and the fill kernel that made its input, medians ``*_ns``."""
    return (
        NSYS_HEADER
        + f'92.1,"2,048,512",100,"{softmax_ns}","{softmax_ns}","20,160","21,344",215.3,{SOFTMAX}\n'
        + f'7.9,"175,840",100,"{fill_ns}","{fill_ns}","1,728","1,824",19.2,{FILL}\n'
    )


def test_an_nsys_summary_of_several_kernels_warns_that_they_are_averaged(repo: Path) -> None:
    exp, err = recorded(repo, kern_sum("20,480.0", "1,760.0"), kern_sum("17,024.0", "1,760.0"))
    assert exp["score"] == round(geomean([20480 / 17024, 1760 / 1760]), 4)
    (line,) = [line for line in err.splitlines() if "2 kernels" in line]
    assert "void softmax_fwd<__half, 1024>" in line and "FillFunctor" in line, line
    assert "geometric mean" in line and "--kernel NAME" in line, line


# --- do_bench JSON -------------------------------------------------------------------


def test_do_bench_quantiles_are_warned_not_taken_for_samples_silently(repo: Path) -> None:
    """``json.dump({cfg: do_bench(fn, quantiles=[0.5, 0.2, 0.8])})``: [p50, p20, p80]."""
    base = {"r4096_c1024": [0.0200, 0.0195, 0.0206], "r4096_c4096": [0.0700, 0.0690, 0.0712]}
    cand = {"r4096_c1024": [0.0170, 0.0166, 0.0175], "r4096_c4096": [0.0595, 0.0588, 0.0603]}
    _, err = recorded(repo, json.dumps(base), json.dumps(cand), "--unit", "ms")
    (line,) = [line for line in err.splitlines() if "quantiles" in line]
    assert "3 values" in line and 'return_mode="all"' in line, line
    runs = [
        {c: [v * (1 + 0.01 * (i % k)) for i, v in enumerate(vs * 5)] for c, vs in base.items()}
        for k in (3, 4)
    ]
    _, err = recorded(repo, *map(json.dumps, runs), "--unit", "ms", "--tag", "control")
    assert "quantiles" not in err, err
    typed = [{c: sorted(vs) for c, vs in side.items()} for side in (base, cand)]  # in order
    _, err = recorded(repo, *map(json.dumps, typed), "--unit", "ms")
    assert "quantiles" not in err, err


def test_an_empty_json_object_is_refused_naming_the_file(repo: Path) -> None:
    said = refused(repo, "{}", json.dumps({"r64": [0.02, 0.021, 0.0205]}), "--unit", "ms")
    assert "base.in" in said and "{config: [times]}" in said, said


# --- one run as both sides -----------------------------------------------------------


def test_one_run_given_as_both_sides_is_refused_even_as_a_control(
    repo: Path, bench_json: dict[str, Any]
) -> None:
    """One pytest-benchmark run holding both versions (n8 the old code, n64 the new),
    given as both sides: it scored 1.0000 'within noise'; a copy of one run as well."""
    rng = random.Random(5)
    run = as_pytest_benchmark(bench_json, {"n8": times(rng, 2e-4), "n64": times(rng, 1.5e-4)})
    (repo / "two.json").write_text(run, encoding="utf-8")
    shutil.copy(repo / "two.json", repo / "copy.json")
    for cand, extra, what in (
        ("two.json", (), "the same file (two.json)"),
        ("two.json", ("--tag", "control"), "the same file (two.json)"),
        ("copy.json", (), "the same samples"),
    ):
        args = ("--baseline", "two.json", "--candidate", cand, *extra)
        done = run_kexp("add", "--summary", "Both - x", *COMMON, *args, cwd=repo)
        assert done.returncode != 0 and what in done.stderr, done.stderr
        assert "two runs of the same code" in done.stderr, done.stderr
        assert len(done.stderr.strip().splitlines()) == 1, done.stderr
    assert files(repo) == []
    other = as_pytest_benchmark(bench_json, {"n8": times(rng, 2e-4), "n64": times(rng, 1.5e-4)})
    (repo / "other.json").write_text(other, encoding="utf-8")
    args = ("--baseline", "two.json", "--candidate", "other.json", "--tag", "control")
    done = run_kexp("add", "--summary", "A/A - x", *COMMON, *args, cwd=repo)
    assert done.returncode == 0, done.stderr


def gpu_trace(durations_ns: list[str]) -> str:
    """``nsys stats --report cuda_gpu_trace --format csv``: a row per launch."""
    header = (
        "Start (ns),Duration (ns),CorrId,GrdX,GrdY,GrdZ,BlkX,BlkY,BlkZ,Reg/Trd,StcSMem (MB),"
        "DymSMem (MB),Bytes (MB),Throughput (MBps),SrcMemKd,DstMemKd,Device,Ctx,Strm,Name\n"
    )
    rows = [
        f'"1,002,{345 + 45 * i},123","{ns}",{123 + 2 * i},4096,1,1,128,1,1,32,0.000,0.004,,,,,'
        f"NVIDIA H100 80GB HBM3 (0),1,7,{SOFTMAX}\n"
        for i, ns in enumerate(durations_ns)
    ]
    return header + "".join(rows)


def api_sum() -> str:
    """``nsys stats --report cuda_api_sum --format csv``."""
    return (
        "Time (%),Total Time (ns),Num Calls,Avg (ns),Med (ns),Min (ns),Max (ns),StdDev (ns),Name\n"
        '80.1,"2,100,000",100,"21,000.0","20,900.0","20,100","25,000",300.0,cudaDeviceSynchronize\n'
        '19.9,"520,000",100,"5,200.0","5,100.0","4,900","7,000",120.0,cudaLaunchKernel\n'
    )


def test_other_nsys_reports_are_refused_naming_the_kernel_summary(repo: Path) -> None:
    trace = gpu_trace(["20,480", "20,512", "20,448"]), gpu_trace(["17,024", "17,056", "16,992"])
    for base, cand, report in ((*trace, "cuda_gpu_trace"), (api_sum(), api_sum(), "cuda_api_sum")):
        said = refused(repo, base, cand)
        assert report in said and "--report cuda_gpu_kern_sum" in said, said


def test_an_nsys_output_of_two_reports_reads_the_kernel_table_alone(repo: Path) -> None:
    """``nsys stats --report cuda_gpu_kern_sum,cuda_gpu_mem_time_sum --format csv``."""

    def both(total: str, median: str) -> str:
        kernels = NSYS_HEADER + f"100.0,{total},100,{median},{median},{median},{median},20.0,k\n"
        return (
            kernels.replace(
                "\nTime", "\n\n ** CUDA GPU Kernel Summary (cuda_gpu_kern_sum):\n\nTime"
            )
            + "\nProcessing [r.sqlite] with [/opt/nvidia/reports/cuda_gpu_mem_time_sum.py]... \n\n"
            + " ** CUDA GPU MemOps Summary (by Time) (cuda_gpu_mem_time_sum):\n\n"
            + "Time (%),Total Time (ns),Count,Avg (ns),Med (ns),Min (ns),Max (ns),StdDev (ns),"
            + "Operation\n100.0,5000,2,2500.0,2500.0,2400,2600,141.4,[CUDA memcpy Host-to-Device]\n"
        )

    exp, _ = recorded(repo, both("2048000", "20480.0"), both("1702400", "17024.0"))
    assert exp["score"] == round(20480 / 17024, 4)
    assert [r["config"] for r in exp["results"]] == ["k"]  # type: ignore[union-attr]


# --- ncu -----------------------------------------------------------------------------

NCU_RAW = (
    '"ID","Process ID","Process Name","Host Name","Kernel Name","Context","Stream","Block Size",'
    '"Grid Size","Device","CC","gpu__time_duration.sum",'
    '"dram__throughput.avg.pct_of_peak_sustained_elapsed"\n'
    '"","","","","","","","","","","","nsecond","%"\n'
    '"0","12345","python3","node1","softmax_fwd","1","7","(128, 1, 1)","(4096, 1, 1)","0","9.0",'
    '"20,480","85.21"\n'
    '"1","12345","python3","node1","softmax_fwd","1","7","(128, 1, 1)","(4096, 1, 1)","0","9.0",'
    '"20,512","85.10"\n'
)


def test_ncu_page_raw_is_nsight_compute_output_as_page_details_is(repo: Path) -> None:
    said = refused(repo, NCU_RAW, NCU_RAW.replace("20,480", "17,024"))
    assert "Nsight Compute output" in said and "--profiling-file" in said, said
    (repo / "ncu_raw.csv").write_text(NCU_RAW, encoding="utf-8")
    done = run_kexp(
        "add", "--summary", "Unroll 4 - +2%", "--score", "1.02", *CAMPAIGN,
        "--profiling-file", "ncu_raw.csv", "--json", cwd=repo,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    kept = Store(repo).get_experiment(json.loads(done.stdout)["id"]).profiling_info
    assert "2 metric(s) of 2 launch(es)" in kept, kept
    assert "| gpu__time_duration.sum | nsecond | 20,480 | 20,512 |" in kept, kept
    assert "- #0: softmax_fwd (grid (4096, 1, 1), block (128, 1, 1))" in kept, kept


# --- configurations that differ ------------------------------------------------------


def test_a_kernel_renamed_between_the_sides_is_said_as_names_that_differ(
    repo: Path, bench_json: dict[str, Any]
) -> None:
    """A template argument in an nsys kernel's name, or a pytest-benchmark test
    renamed: the error said the candidate may have crashed (pytest-benchmark's way)."""
    block = NSYS_HEADER + '100.0,"2,048,000",100,"{0}","{0}","{0}","{0}",200.0,"void k<{1}>(int)"\n'
    said = refused(repo, block.format("20,480.0", 1024), block.format("17,024.0", 2048))
    assert "void k<1024>(int)" in said and "void k<2048>(int)" in said, said
    assert "names differ" in said and "same name on both sides" in said, said
    assert "pytest-benchmark" not in said and "--buggy" not in said, said
    rng = random.Random(7)
    base = json.loads(
        as_pytest_benchmark(bench_json, {"n8": times(rng, 2e-4), "n64": times(rng, 1.5e-4)})
    )
    cand = json.loads(
        as_pytest_benchmark(bench_json, {"n8": times(rng, 2e-4), "n64": times(rng, 1.4e-4)})
    )
    for bench in cand["benchmarks"]:
        bench["param"] = bench["param"].replace("n", "len")
        bench["name"] = bench["name"].replace("[n", "[len")
    said = refused(repo, json.dumps(base), json.dumps(cand))
    assert "names differ" in said and "--buggy" not in said, said


def test_a_timings_file_given_as_profiling_info_is_warned(repo: Path) -> None:
    do_bench = json.dumps({"r4096": [0.0201, 0.0199, 0.0203, 0.0200]})
    for name, text, form in (
        ("t.json", do_bench, "timings JSON"),
        ("k.csv", kern_sum("20,480.0", "1,760.0"), "nsys stats cuda_gpu_kern_sum"),
        ("notes.txt", "registers 48 -> 40, occupancy 50% -> 75%\n", None),
    ):
        (repo / name).write_text(text, encoding="utf-8")
        done = run_kexp(  # (each its own change: one summary twice is tried before, warned)
            "add", "--summary", f"Unroll 4, {name} - +2%", "--score", "1.02", *CAMPAIGN,
            "--profiling-file", name, "--json", cwd=repo,
        )  # fmt: skip
        assert done.returncode == 0, done.stderr
        assert Store(repo).get_experiment(json.loads(done.stdout)["id"]).profiling_info == (
            text.rstrip("\n")
        )
        if form is None:
            assert done.stderr == "", done.stderr
            continue
        (line,) = done.stderr.strip().splitlines()
        assert f"a timings file ({form})" in line and "--baseline FILE --candidate FILE" in line


# --- what kind of file ---------------------------------------------------------------


def test_a_bare_do_bench_float_or_list_says_to_name_its_configuration(repo: Path) -> None:
    for base, cand in (
        ("0.0201", "0.0171"),
        ("[0.0201, 0.0199, 0.0203]", "[0.017, 0.0171, 0.0169]"),
    ):
        said = refused(repo, base + "\n", cand + "\n", "--unit", "ms")
        assert "base.in" in said and "without the configuration" in said, said
        assert "{config: [times]}" in said and "}}" not in said, said


def test_a_file_of_one_side_given_as_a_table_says_so(
    repo: Path, bench_json: dict[str, Any]
) -> None:
    rng = random.Random(9)
    run = as_pytest_benchmark(bench_json, {"n8": times(rng, 2e-4), "n64": times(rng, 1.5e-4)})
    for name, text, form in (
        ("pb.json", run, "pytest-benchmark"),
        ("nsys.csv", kern_sum("20,480.0", "1,760.0"), "nsys stats cuda_gpu_kern_sum"),
        ("cells.csv", "config,baseline,candidate\nc1024,20.1us,17.1us\n", None),
    ):
        (repo / name).write_text(text, encoding="utf-8")
        done = run_kexp("add", "--summary", "x - y", *CAMPAIGN, "--timings", name, cwd=repo)
        assert done.returncode != 0 and "Traceback" not in done.stderr, done.stderr
        (line,) = done.stderr.strip().splitlines()
        if form is None:
            assert "'20.1us' is not a number" in line and "in the column's header" in line, line
        else:
            assert f"{name} is {form} output, one side's timings" in line, line
            assert "--baseline FILE --candidate FILE" in line, line
    assert files(repo) == []


# --- the command's options -----------------------------------------------------------


def test_timings_piped_on_stdin_and_a_score_in_percent(repo: Path) -> None:
    rows = [(0.0201, 17.1), (0.0200, 17.0), (0.0199, 16.9)]
    table = "config,baseline_ms,candidate_us\n" + "".join(f"c1024,{b},{c}\n" for b, c in rows)
    args = ("add", "--summary", "Piped - x", *CAMPAIGN, "--timings", "-", "--json")
    done = run_kexp(*args, cwd=repo, input=table, process=True)
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["score"] == round(20.0 / 17.0, 4)
    both = ("add", "--summary", "Piped - x", *CAMPAIGN, "--baseline", "-", "--candidate", "-")
    done = run_kexp(*both, cwd=repo, input=table, process=True)
    assert done.returncode != 0 and "stdin ('-') is one input" in done.stderr, done.stderr
    done = run_kexp("add", "--summary", "By hand - x", *CAMPAIGN, "--score", "18%", cwd=repo)
    assert done.returncode != 0 and "1.18 for 18% faster" in done.stderr, done.stderr
    assert len(files(repo)) == 1


def test_an_error_names_the_files_line_blank_lines_counted(repo: Path) -> None:
    text = "config,time_us\n\nr64,20.0\n\nr64,20.1\nr64,fast\n"
    said = refused(repo, text, text.replace("fast", "19.0"))
    assert "base.in:6 (r64): 'fast' is not a number" in said, said
    nameless = NSYS_HEADER.replace("\nTime", "\n\n\nTime") + '100.0,"2,048,000",100,"20,480.0",'
    nameless += '"20,480.0","20,160","21,344",215.3,""\n'
    said = refused(repo, nameless, nameless)
    line = nameless.splitlines().index(nameless.splitlines()[-1]) + 1
    assert f"base.in:{line} (no name): the kernel has no name" in said, said


def test_remeasure_takes_stdin_for_one_option_alone(repo: Path) -> None:
    base = "config,time_us\n" + "".join(f"c1024,{t}\n" for t in (20.1, 20.0, 19.9))
    cand = "config,time_us\n" + "".join(f"c1024,{t}\n" for t in (17.1, 17.0, 16.9))
    status, out, err = add(repo, base, cand)
    assert status == 0, err
    exp_id = json.loads(out)["id"]
    args = ("remeasure", exp_id, "--baseline", "-", "--candidate", "-")
    done = run_kexp(*args, cwd=repo, input=base, process=True)
    assert done.returncode != 0 and "stdin ('-') is one input" in done.stderr, done.stderr
    args = ("remeasure", exp_id, "--baseline", "-", "--candidate", "cand.in", "--json")
    done = run_kexp(*args, cwd=repo, input=base.replace("20.0", "20.05"), process=True)
    assert done.returncode == 0, done.stderr


def test_a_protocol_given_over_what_the_timing_files_state_is_said(
    repo: Path, bench_json: dict[str, Any]
) -> None:
    """pytest-benchmark files (a wall clock, timed on this machine's CPU) recorded with
    ``--protocol timer=do_bench``: the file's timer is replaced, and said so."""
    rng = random.Random(7)
    base = as_pytest_benchmark(bench_json, {"n8": times(rng, 2e-4), "n64": times(rng, 1.5e-4)})
    cand = as_pytest_benchmark(bench_json, {"n8": times(rng, 1.6e-4), "n64": times(rng, 1.2e-4)})
    record, err = recorded(repo, base, cand, "--protocol", "timer=do_bench")
    assert record["protocol"]["timer"] == "do_bench"  # type: ignore[index]
    (line,) = [line for line in err.splitlines() if "protocol given replaces" in line]
    assert "timer 'wall_clock' (given 'do_bench')" in line, line
