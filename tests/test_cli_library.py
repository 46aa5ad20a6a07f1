"""The library twins of the kexp commands: lineage, lessons, stats, envinfo, intake,
corrections, formatting, export, template, progress.
"""

from __future__ import annotations

import datetime as dt
import io
import json
from collections.abc import Callable
from pathlib import Path

import pytest

from kexp import KernelExperiment, Store, ValidationError
from kexp.agents.lessons import group_lessons, lessons
from kexp.core.errors import ExperimentNotFoundError, KexpError, StaleMeasurementWarning
from kexp.core.progress import reporting, track
from kexp.format.fileformat import key_insight
from kexp.measure.corrections import correct, correction_note, parse_assignments, parse_value
from kexp.measure.envinfo import (
    EnvInfo,
    detect_env,
    parse_amd_smi_static,
    parse_compiler,
    parse_cpuinfo,
    parse_cuda_version,
    parse_lscpu,
    parse_nvidia_smi_query,
    parse_os_release,
    parse_rocm_smi_driver,
    parse_rocm_smi_products,
    parse_rocm_version,
)
from kexp.measure.intake import diff_against, parse_document, record
from kexp.measure.template import (
    draft_text,
    is_empty_draft,
    prefill,
    read_draft,
    relocate,
    strip_guidance,
)
from kexp.output.export import RECORD_FIELDS, export, sort_experiments, to_record, write_records
from kexp.storage.fmt import NotFormattable, canonical_text, format_files
from kexp.storage.lineage import build_forest, lineage_forest, lineage_of
from kexp.storage.stats import stats
from tests.conftest import git

# --- lineage -------------------------------------------------------------------------


def exp(id_: str, pid: str = "", score: float = 1.0, **fields: object) -> KernelExperiment:
    if pid:  # scores over the reference: each is its own cumulative score
        fields.setdefault("measured_against", "reference")
    return KernelExperiment(
        id=id_ * 16 if len(id_) == 1 else id_,
        pid=pid * 16 if len(pid) == 1 else pid,
        score=score,
        status=str(fields.pop("status", "done")),
        created_at=f"2026-01-01T00:00:0{id_[0] if id_[0].isdigit() else 0}Z",
        **fields,  # type: ignore[arg-type]
    )


def test_forest_deltas_best_path_and_dead_ends() -> None:
    forest = build_forest(
        [
            exp("1", score=1.0),
            exp("2", "1", 1.1),
            exp("3", "2", 1.05),  # leaf below its parent: not a dead end itself
            exp("4", "1", 0.9),
            exp("5", "4", 0.95),  # improved on 4: 4 is not a dead end
            exp("6", "1", 2.0, is_buggy=True, error_message="x"),  # buggy: not the best
            exp("7", "", 1.3),  # a second root
        ]
    )
    assert [t.experiment.id[0] for t in forest] == ["1", "7"]
    nodes = {n.experiment.id[0]: n for t in forest for n in t.walk()}
    assert [k for k, n in nodes.items() if n.on_best_path] == ["1", "2", "7"]
    assert [k for k, n in nodes.items() if n.dead_end] == []  # 2 is the best of its tree
    assert nodes["2"].delta == pytest.approx(0.1) and nodes["2"].delta_pct == pytest.approx(10)
    assert nodes["6"].delta is None and nodes["1"].delta is None
    assert nodes["7"].is_best and nodes["2"].is_best


def test_forest_keeps_experiments_in_a_pid_cycle() -> None:
    forest = build_forest([exp("1", "2"), exp("2", "1"), exp("3", "3")])
    ids = sorted(n.experiment.id[0] for t in forest for n in t.walk())
    assert ids == ["1", "2", "3"]


@pytest.mark.filterwarnings("ignore::kexp.core.errors.NoMatchWarning")  # matching none, on purpose
def test_lineage_of_and_forest_from_a_store(
    store: Store, make_experiment: Callable[..., KernelExperiment]
) -> None:
    root = make_experiment(score=1.0)
    side = make_experiment(pid=root.id, score=1.1)
    mid = make_experiment(pid=root.id, score=1.2)
    leaf = make_experiment(pid=mid.id, score=1.3)
    tree = lineage_of(store, mid.id[:12])
    assert [n.experiment.id for n in tree.walk()] == [root.id, mid.id, leaf.id]
    assert side.id not in json.dumps(tree.to_dict())
    (whole,) = lineage_forest(store)
    assert len(list(whole.walk())) == 4
    assert lineage_forest(store, operator="nothing-like-this") == []


def test_a_tree_of_one_id_reads_the_store_once(
    store: Store, make_experiment: Callable[..., KernelExperiment], monkeypatch: pytest.MonkeyPatch
) -> None:
    """``kexp tree ID`` at 100,000 experiments took 8 to 10 s: it read the store three
    times and looked at every folder's names four more. One read answers it whole."""
    import kexp.storage.listing
    import kexp.storage.sources
    from tests.conftest import run_kexp

    root = make_experiment(score=1.0)
    mid = make_experiment(pid=root.id, score=1.2)
    make_experiment(pid=mid.id, score=1.3)
    make_experiment(pid=root.id, score=1.1)
    reads: list[str] = []
    read, walk = kexp.storage.sources.WorkingTree.read, kexp.storage.listing.find_folders

    def counted_read(*args: object, **kwargs: object) -> object:
        reads.append("read")
        return read(*args, **kwargs)  # type: ignore[arg-type]

    def counted_walk(*args: object, **kwargs: object) -> object:
        reads.append("names")
        return walk(*args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(kexp.storage.sources.WorkingTree, "read", counted_read)
    monkeypatch.setattr(kexp.storage.listing, "find_folders", counted_walk)
    tree = lineage_of(store, mid.id[:12])
    assert reads == ["read"]
    assert tree.focus == mid.id
    reads.clear()
    shown = run_kexp("tree", mid.id[:10], cwd=store.root)
    assert shown.returncode == 0 and reads == ["read"], shown.stderr
    assert f"{mid.id[:10]}" in shown.stdout and "<" in shown.stdout


# --- lessons, stats --------------------------------------------------------------------


@pytest.mark.parametrize(
    ("description", "insight"),
    [
        ("**Approach**: a\n\n**Key insight**: b c", "b c"),
        ("**Key insight:** b", "b"),
        ("- **Key Insight**: b", "b"),
        ("Key insights: b", "b"),
        ("**Key insight**:\n\n  spread over the next line\n", "spread over the next line"),
        ("**Approach**: a. **Key insight**: b c", "b c"),  # within a paragraph
        ("**Approach**: a. **Key insight:** b **Result**: 0.96x", "b"),  # up to the next label
        ("**Key insight**: b **Result:** c", "b"),
        ("**Key insight**: `__init__: x` stays", "`__init__: x` stays"),
        ("**Approach**: a **Key insight**:\n\nb", "b"),
        ("**Approach**: the key insight: is not one unless bold", ""),
        ("**Approach**: nothing else", ""),
        ("", ""),
    ],
)
def test_key_insight(description: str, insight: str) -> None:
    assert key_insight(description) == insight


def test_lessons_and_stats_from_a_store(
    store: Store, make_experiment: Callable[..., KernelExperiment]
) -> None:
    make_experiment(score=1.2)
    make_experiment(score=1.005, dtype_sig="fp16")
    make_experiment(score=0.5, status="running")
    found = lessons(store)
    assert [len(found[g]) for g in found] == [0, 0, 0, 1, 0]
    assert found["marginal"][0].key_insight == "unrolling helps"
    result = stats(store)
    assert result.total == 3 and result.by_outcome["pending"] == 1
    # fp16's one result is within noise: no best tip there.
    assert [(b.dtype_sig, b.score) for b in result.best] == [("bf16", 1.2)]
    assert json.loads(json.dumps(result.to_dict()))["by_outcome"]["improvement"] == 1
    assert group_lessons([]) == {
        "buggy": [], "failed": [], "regression": [], "marginal": [], "interference": []
    }  # fmt: skip


# --- envinfo ---------------------------------------------------------------------------

NVIDIA_QUERY = "NVIDIA H200, 570.86.15\nNVIDIA H200, 570.86.15\n"
NVIDIA_HEADER = (
    "+-----------------------------------------------------------------------------+\n"
    "| NVIDIA-SMI 570.86.15    Driver Version: 570.86.15    CUDA Version: 12.8     |\n"
)
NVCC = "Cuda compilation tools, release 12.4, V12.4.131\nBuild cuda_12.4.r12.4/compiler\n"
ROCM_SMI = (
    "============================ ROCm System Management Interface ============================\n"
    "GPU[0]\t\t: Card Series: \t\tAMD Instinct MI300X VF\n"
    "GPU[0]\t\t: Card Model: \t\t0x74b5\n"
    "GPU[1]\t\t: Card Series: \t\tAMD Instinct MI300X VF\n"
)
AMD_SMI = "GPU: 0\n    ASIC:\n        MARKET_NAME: MI300X\n        VENDOR_ID: 0x1002\n"


def test_env_parsers() -> None:
    assert parse_nvidia_smi_query(NVIDIA_QUERY) == (["NVIDIA H200", "NVIDIA H200"], "570.86.15")
    assert parse_nvidia_smi_query("No devices were found\n") == ([], "")
    assert parse_cuda_version(NVIDIA_HEADER) == "12.8"
    assert parse_cuda_version(NVCC) == "12.4"
    assert parse_cuda_version("") == ""
    assert parse_rocm_smi_products(ROCM_SMI) == ["AMD Instinct MI300X VF"] * 2
    assert parse_amd_smi_static(AMD_SMI) == ["MI300X"]
    assert parse_rocm_smi_driver("Driver version: 6.8.5\n") == "6.8.5"
    assert parse_rocm_version("AMDSMI Tool: 24.6.2 | ROCm version: 6.2.0 |") == "6.2.0"
    assert parse_rocm_version("7.0.0-38\n") == "7.0.0"
    assert parse_rocm_version("garbage") == ""


def test_env_describe_counts_gpus_and_leaves_out_unknown_parts() -> None:
    info = EnvInfo(
        gpus=["NVIDIA H200"] * 8, driver="570.86.15", cuda="12.8", packages={"torch": "2.6.0"}
    )
    assert info.describe() == "8x NVIDIA H200, driver 570.86.15, CUDA 12.8, torch 2.6.0"
    assert EnvInfo(gpus=["MI300X"], rocm="7.0.0").describe() == "MI300X, ROCm 7.0.0"
    assert EnvInfo().describe() == ""
    host = EnvInfo(
        cuda="12.4",
        packages={"torch": "2.6.0"},
        cpu="AMD EPYC 9654 96-Core Processor",
        cores=96,
        compiler="gcc 12.2.0",
        os="Ubuntu 22.04.4 LTS",
        python="3.11.9",
    )
    assert host.describe() == (
        "CUDA 12.4, torch 2.6.0, AMD EPYC 9654 96-Core Processor (96 cores), gcc 12.2.0, "
        "Ubuntu 22.04.4 LTS, Python 3.11.9"
    )


#: /proc/cpuinfo of a machine with two sockets of two cores, two threads each.
CPUINFO = "".join(
    f"processor\t: {n}\nvendor_id\t: GenuineIntel\n"
    f"model name\t: Intel(R) Xeon(R) Platinum 8480+\nphysical id\t: {n // 4}\n"
    f"core id\t\t: {n % 4 // 2}\ncpu cores\t: 2\n\n"
    for n in range(8)
)
LSCPU = (
    "Architecture:             aarch64\n"
    "  Model name:             Neoverse-V2\n"
    "    Thread(s) per core:   1\n"
)
OS_RELEASE = 'PRETTY_NAME="Ubuntu 22.04.4 LTS"\nNAME="Ubuntu"\nVERSION_ID="22.04"\n'
#: The first lines of ``cc --version`` on common machines.
COMPILERS = {
    "cc (Debian 12.2.0-14+deb12u1) 12.2.0\nCopyright (C) 2022 Free Software Foundation, Inc.": (
        "gcc 12.2.0"
    ),
    "cc (Ubuntu 11.4.0-1ubuntu1~22.04) 11.4.0\n": "gcc 11.4.0",
    "gcc (GCC) 13.2.1 20230801\n": "gcc 13.2.1",
    "Ubuntu clang version 18.1.3 (1ubuntu1)\nTarget: x86_64-pc-linux-gnu\n": "clang 18.1.3",
    "Apple clang version 15.0.0 (clang-1500.3.9.4)\nTarget: arm64-apple-darwin23.5.0\n": (
        "Apple clang 15.0.0"
    ),
    "": "",
}


def test_host_parsers() -> None:
    assert parse_cpuinfo(CPUINFO) == ("Intel(R) Xeon(R) Platinum 8480+", 4)
    assert parse_cpuinfo("processor\t: 0\nmodel name\t: AMD EPYC\n") == ("AMD EPYC", 0)
    assert parse_lscpu(LSCPU) == "Neoverse-V2"
    assert parse_os_release(OS_RELEASE) == "Ubuntu 22.04.4 LTS"
    for text, expected in COMPILERS.items():
        assert parse_compiler(text) == expected


def test_detect_env_describes_a_machine_without_a_gpu() -> None:
    """What this machine is, read from the sources themselves."""
    import os
    import platform
    import shutil
    import subprocess

    info = detect_env()
    assert info.python == platform.python_version()
    assert info.cores >= 1 and info.cpu and info.os
    if shutil.which("cc"):
        first = subprocess.run(["cc", "--version"], capture_output=True, text=True).stdout
        assert info.compiler == parse_compiler(first) != ""
    if Path("/etc/os-release").is_file():
        assert info.os == parse_os_release(Path("/etc/os-release").read_text())
    text = info.describe()
    assert f"Python {info.python}" in text and info.os in text and info.cpu in text
    assert info.cores <= (os.cpu_count() or 1)


# --- intake ----------------------------------------------------------------------------


def test_parse_document_positions_and_kinds(tmp_path: Path) -> None:
    with pytest.raises(ValidationError) as caught:
        parse_document("score: 1.0\nstatus: done\nscore: 2.0\n")
    (problem,) = caught.value.problems
    assert (problem.line, problem.code) == (3, "yaml-duplicate-key")
    with pytest.raises(ValidationError) as caught:
        parse_document('{\n  "score": 1.0\n  "status": "done"\n}', "doc.json")
    assert (caught.value.problems[0].path, caught.value.problems[0].line) == ("doc.json", 3)
    with pytest.raises(ValidationError, match="not a valid experiment"):
        parse_document('{"score": NaN}')
    assert parse_document("base_commit: 0123456\n") == {"base_commit": "0123456"}
    assert parse_document('{"score": 1.5, "outcome": "x", "path": "y"}') == {"score": 1.5}
    fields = parse_document(
        "---\nscore: 2\n---\n\n<!-- kexp: note -->\n## Raw result\n\nok\n\n## Notes\n\nmine\n"
    )
    assert fields == {"score": 2, "raw_result": "ok", "extra_sections": [("Notes", "mine")]}


def test_record_resolves_prefixes_and_diff_against(
    repo: Path, store: Store, make_experiment: Callable[..., KernelExperiment]
) -> None:
    a = make_experiment()
    b = make_experiment()
    (repo / "kernel.cu").write_text("changed\n")
    from tests.conftest import experiment_fields

    fields = experiment_fields(pid=a.id[:12], combines=[a.id[:14], b.id], measured_against="parent")
    _, fields["code_change"] = diff_against(store)  # the diff, without its base
    with pytest.warns(UserWarning, match="uncommitted"):
        new = record(store, fields)
    assert new.pid == a.id and new.combines == [a.id, b.id]
    assert "+changed" in new.code_change and "-__global__" in new.code_change
    head = git(repo, "rev-parse", "HEAD")
    assert diff_against(store, head[:8]) == (head, new.code_change)
    with pytest.raises(ExperimentNotFoundError):
        record(store, experiment_fields(pid="ffffffff"))
    with pytest.raises(KexpError, match="unknown revision"):
        diff_against(store, "feedbeef")


# --- corrections -----------------------------------------------------------------------


def test_parse_values() -> None:
    assert parse_assignments(["score=1.5", "is_buggy=YES", "tags=a, b,", "env=x=y"]) == {
        "score": 1.5,
        "is_buggy": True,
        "tags": ["a", "b"],
        "env": "x=y",
    }
    assert parse_value("combines", '["a", "b"]') == ["a", "b"]
    assert parse_value("results", '[{"config": "c", "speedup": 1.1}]')[0]["speedup"] == 1.1
    for bad in (["score=x"], ["is_buggy=maybe"], ["nope=1"], ["score"], ["score=1", "score=2"]):
        with pytest.raises(KexpError):
            parse_assignments(bad)


def test_correction_note_and_correct(
    store: Store, make_experiment: Callable[..., KernelExperiment]
) -> None:
    old = make_experiment()
    note = correction_note(
        old,
        {"score": 1.1, "raw_result": "new", "status": "done"},
        " measured\n again ",
        today=dt.date(2026, 12, 1),
    )
    assert note == (
        "**Correction (2026-12-01)**: score 1.019 → 1.1; raw_result rewritten. "
        "Reason: measured again"
    )
    with pytest.warns(StaleMeasurementWarning, match="raw_result still holds"):
        updated = correct(store, old.id, {"score": 1.1}, "re-measured")
    assert updated.detailed_description.startswith(old.detailed_description + "\n\n**Correction (")
    assert correct(store, old.id, {"status": "failed"}).detailed_description == (
        updated.detailed_description
    )
    with pytest.raises(KexpError, match="nothing to change"):
        correct(store, old.id, {}, "why")
    with pytest.raises(KexpError, match="must not be empty"):
        correct(store, old.id, {"score": 1.0}, "  ")


# --- formatting ------------------------------------------------------------------------


def test_canonical_text_and_format_files(
    store: Store, make_experiment: Callable[..., KernelExperiment]
) -> None:
    exp = make_experiment(tags=["x"])
    assert exp.path is not None
    canonical = exp.path.read_text()
    messy = "\ufeff" + canonical.replace("tags: [x]", "tags:\n  - x").replace("\n", "\r\n")
    exp.path.write_bytes(messy.encode())
    assert canonical_text(exp.path.read_bytes(), exp.path) == canonical
    (checked,) = format_files(store=store, check=True)
    assert checked.status == "would-reformat" and exp.path.read_bytes() == messy.encode()
    (done,) = format_files([exp.path.parent], store=store)
    assert done.status == "reformatted" and exp.path.read_text() == canonical
    (again,) = format_files([exp.path])
    assert again.status == "unchanged" and not again.changed
    with pytest.raises(NotFormattable, match="has errors"):
        canonical_text(canonical.replace("score: 1.019", "score: [1]"), exp.path)


# --- export ----------------------------------------------------------------------------


def test_records_sorting_and_writers(
    store: Store, make_experiment: Callable[..., KernelExperiment]
) -> None:
    a = make_experiment(score=1.1)
    b = make_experiment(score=0.9, tags=["t"], results=[{"config": "c", "speedup": 0.9}])
    assert [e.id for e in sort_experiments([a, b], "-outcome")] == [b.id, a.id]
    assert [e.id for e in sort_experiments([a, b], "score")] == [b.id, a.id]
    with pytest.raises(KexpError, match="unknown field"):
        sort_experiments([a], "speed")
    assert tuple(to_record(a)) == RECORD_FIELDS
    assert "raw_result" not in to_record(a, brief=True)
    assert list(to_record(a, ["score", "id"])) == ["score", "id"]
    out = io.StringIO()
    write_records([to_record(b, ["id", "tags", "results", "is_buggy"])], out, "csv")
    assert out.getvalue().splitlines()[1] == (
        f'{b.id},"[""t""]","[{{""config"": ""c"", ""speedup"": 0.9}}]",false'
    )
    out = io.StringIO()
    assert export(store, out, "jsonl", min_score=1.0) == 1
    assert json.loads(out.getvalue())["path"].startswith("experiments/")
    with pytest.raises(KexpError, match="unknown format"):
        export(store, io.StringIO(), "xml")


# --- template --------------------------------------------------------------------------


def test_draft_round_trip_and_guidance(
    repo: Path, store: Store, make_experiment: Callable[..., KernelExperiment]
) -> None:
    parent = make_experiment()
    start = prefill(store, parent, now="2026-11-29T10:00:00Z")
    assert start.pid == parent.id and start.env == parent.env
    assert start.base_commit == git(repo, "rev-parse", "HEAD")
    start.code_change = "+x"
    text = draft_text(start)
    assert strip_guidance(text).count("\n") == text.count("\n")
    assert "<!--" not in strip_guidance(text)
    filled = text.replace("change_summary:\n", "change_summary: Tried it - +1%\n")
    got, problems, doc = read_draft(filled, repo / "new-x.md")
    assert problems == [] and got is not None and doc is not None
    assert got.code_change == "+x" and got.detailed_description == ""
    assert got.change_summary == "Tried it - +1%" and got.created_at == "2026-11-29T10:00:00Z"
    assert is_empty_draft("# only\n<!-- kexp: a\nb -->\n \n") and not is_empty_draft(text)
    broken = filled.replace("status: done", "status: finished")
    _, problems, doc = read_draft(broken, repo / "new-x.md")
    assert [p.code for p in problems] == ["not-allowed"]
    assert problems[0].line == broken.splitlines().index("status: finished") + 1
    assert doc is not None
    moved = relocate([problems[0]], doc)
    assert moved[0].path == str(repo / "new-x.md")


def test_progress_track_without_and_with_a_reporter() -> None:
    assert list(track([1, 2])) == [1, 2]
    seen: list[tuple[int, int]] = []
    with reporting(lambda done, total: seen.append((done, total))):
        assert list(track(["a", "b"])) == ["a", "b"]
    assert seen == [(0, 2), (1, 2), (2, 2)]
    assert list(track([3])) == [3]  # the reporter is gone after the block
