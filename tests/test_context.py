"""kexp context: one packet, deterministic, within its budget, true to the files."""

from __future__ import annotations

import json
import random
import shutil
import sys
import warnings
from pathlib import Path
from typing import Any

import pytest
from conftest import REPO_ROOT, experiment_fields, git, init_repo, run_kexp
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kexp import KernelExperiment, KexpError, Store, init_store
from kexp.agents.context import CHARS_PER_TOKEN, START, START_NEW, context, count_tokens
from kexp.format.fileformat import serialize
from kexp.storage.store import slugify

CACHE_OP = "csrc/kernels/cache_kernels.cu: reshape_and_cache_flash"
NORM_OP = "csrc/layernorm_kernels.cu: rms_norm_kernel"
BASE = "0f54a8d954a292dd879f37334f90573ddeb49278"


def _history() -> list[KernelExperiment]:
    """A campaign on the cache kernel (bf16 on MI300X, a lineage, failures, a parameter
    sweep with results) and a little on another kernel, dtype and env."""
    made: list[KernelExperiment] = []

    def add(summary: str, score: float, insight: str, **fields: Any) -> KernelExperiment:
        exp = _experiment(len(made), summary, score, insight, **fields)
        made.append(exp)
        return exp

    root = add("Replace div/mod with a 2-D loop - +3.01%", 1.0301, "Avoid integer division")
    vec = add(
        "Vectorize copies to 128-bit - +11.67%",
        1.1167,
        "16-byte accesses are the lever",
        pid=root.id,
        results=[
            {"config": "t256", "baseline": 6.3, "candidate": 5.88, "speedup": 1.0714},
            {"config": "t4096", "baseline": 23.75, "candidate": 20.9, "speedup": 1.1364},
        ],
        score_ci=[1.10, 1.13],
    )
    add(
        "Stage the KV tile through LDS - -7.07% (conflicts)",
        0.9293,
        "No LDS for a pure copy",
        pid=vec.id,
    )
    add(
        "Unroll head loop by 8 - +0.36%, within noise",
        1.0036,
        "Unroll from the trip count",
        pid=vec.id,
        results=[{"config": "t256", "baseline": 5.88, "candidate": 5.9, "speedup": 0.9966}],
    )
    add("Unroll head loop by 8 - -1.2%", 0.988, "Unroll 8 costs VGPRs", pid=vec.id)
    add(
        "Load slots as int64x2 - memory access fault",
        0.0,
        "Never assume alignment",
        pid=vec.id,
        is_buggy=True,
        status="failed",
        error_message="illegal memory access",
    )
    add(
        "Nontemporal stores for the cache - +4.1%",
        1.041,
        "Streaming stores for write-once",
        pid=vec.id,
    )
    add("Planned: prefetch slot_mapping - pending", 0.0, "", status="new")
    add("Vectorize copies on fp16 - +0.5%", 1.005, "fp16 rows are short", dtype_sig="fp16")
    add(
        "Warp-shuffle reduction - +4.43%",
        1.0443,
        "Shuffles before shared memory",
        operator_sig=NORM_OP,
        dtype_sig="fp16",
        env="A100, CUDA 12.4",
    )
    return made


def _experiment(
    n: int, summary: str, score: float, insight: str, *, month: int = 10, **fields: Any
) -> KernelExperiment:
    """The ``n``-th experiment of a history: an hour apart (in the id), a day apart (in
    ``created_at``), on the 2026 ``month``."""
    return KernelExperiment.from_dict(
        experiment_fields(
            id=f"{0x6AC10000 + (month - 10) * 0x10000 + 3600 * n:08x}{n:08x}",
            created_at=f"2026-{month:02d}-{1 + n:02d}T08:00:00Z",
            change_summary=summary,
            score=score,
            base_commit=BASE,
            author="test",
            detailed_description=f"**Approach**: {summary}\n\n**Key insight**: {insight}",
            **fields,
        )
    )


def _write_store(root: Path, experiments: list[KernelExperiment]) -> Store:
    init_store(root)
    for exp in experiments:
        folder = root / "experiments" / exp.created_at[:4] / exp.created_at[5:7]
        folder.mkdir(parents=True, exist_ok=True)
        name = f"{exp.id}-{slugify(exp.change_summary)}.md"
        (folder / name).write_text(serialize(exp), encoding="utf-8")
    return Store(root, code_repo=root)


@pytest.fixture
def history(tmp_path: Path) -> Store:
    return _write_store(tmp_path / "store", _history())


def _packet(store: Store, **options: Any) -> str:
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no file of the fixture is invalid or warned of
        return context(store, **{"operator": "reshape_and_cache", **options}).text


def test_the_packet_holds_the_best_its_lineage_and_the_failures(history: Store) -> None:
    text = _packet(history, dtype="bf16", env="MI300X", text="stage through shared memory")

    # Each step measured against its parent: the best tip is the nontemporal stores on
    # top of the vectorized copies (1.0301 × 1.1167 × 1.041 over the reference).
    best = history.top_experiments(1, operator="reshape_and_cache", dtype="bf16", env="MI300X")[0]
    assert best.change_summary.startswith("Nontemporal stores for the cache")
    section = text.split("## Current best\n", 1)[1]
    reached = 1.0301 * 1.1167 * 1.041
    assert section.startswith(
        f"- {best.id[:10]} {reached:.4f}x over the reference (this step 1.0410x) improvement"
    )
    assert "insight: Streaming stores for write-once" in section
    lineage = text.split("## Path to the best", 1)[1].split("\n## ", 1)[0]
    parent, root = history.ancestors(best.id)
    assert f"1. {root.id[:10]} 1.0301x over reference → 1.0301x — Replace" in lineage
    assert f"2. {parent.id[:10]} 1.1167x over parent → {1.0301 * 1.1167:.4f}x — Vector" in lineage
    assert f"3. the best (above): 1.0410x over parent → {reached:.4f}x" in lineage
    failures = text.split("## Related failures\n", 1)[1].split("\n## ", 1)[0]
    # The plan is about LDS: that failure comes first; every failure is one.
    assert failures.splitlines()[0].endswith("Stage the KV tile through LDS - -7.07% (conflicts)")
    assert "insight: No LDS for a pure copy" in failures
    for line in failures.splitlines():
        if not line.startswith("  "):
            assert any(o in line for o in ("regression", "buggy", "interference"))
    noise = text.split("## Within noise: remeasure or move on\n", 1)[1].split("\n## ", 1)[0]
    assert "marginal — Unroll head loop by 8 - +0.36%, within noise" in noise
    # Each experiment once: everything tried here is listed above, nothing to repeat.
    assert "## Do not repeat" not in text
    not_tried = text.split("## Not tried yet", 1)[1].split("\n## ", 1)[0]
    assert "- dtype fp16: tried 1×, no improvement (best 1.0050x)" in not_tried  # on MI300X
    assert "configuration t256" not in not_tried  # 1.0714x once
    assert "Planned: prefetch" not in text  # pending: listed nowhere


def test_what_was_never_tried_or_never_improved_is_listed(history: Store) -> None:
    text = _packet(history)

    not_tried = text.split("## Not tried yet", 1)[1]
    assert "- dtype fp16: tried 1×, no improvement (best 1.0050x)" in not_tried
    assert "- env A100, CUDA 12.4: never tried" in not_tried
    assert "- dtype bf16" not in not_tried  # improved here
    packet = context(history, operator="reshape_and_cache", dtype="bf16", output="json")
    kinds = {(e["kind"], e["value"]) for e in packet.data["not_tried"]}
    assert ("configuration", "t256") not in kinds  # 1.0714x once
    assert packet.data["best"]["cumulative_score"] == pytest.approx(1.0301 * 1.1167 * 1.041)


def test_an_env_tried_in_another_dtype_is_not_said_never_tried(repo: Path) -> None:
    """Asked for bf16 on an operator whose H100 env holds fp16 improvements: the env
    is said tried there with fp16, never with bf16, and bf16 itself never tried."""
    operator, env = "kernels/softmax.py: softmax_kernel", "H100 SXM5, CUDA 12.4"
    for summary, score in (("Vectorize loads - +15%", "1.15"), ("Unroll 4 - +10%", "1.10")):
        done = run_kexp(
            "add", "--summary", summary, "--score", score, "--operator", operator,
            "--dtype", "fp16", "--env", env, "--description", "x", cwd=repo,
        )  # fmt: skip
        assert done.returncode == 0, done.stderr
    asked = ("context", "--operator", "softmax", "--dtype", "bf16", "--env", "H100")
    text = run_kexp(*asked, cwd=repo).stdout
    not_tried = text.split("## Not tried yet", 1)[1].split("\n## ", 1)[0]
    assert "never tried with dtype bf16; tried 2× with dtype fp16 (2 improved)" in not_tried
    assert f"- env {env}: never tried\n" not in not_tried
    assert "- dtype bf16: never tried" in not_tried
    data = json.loads(run_kexp(*asked, "--json", cwd=repo).stdout)
    (on_env,) = [e for e in data["not_tried"] if e["kind"] == "env"]
    assert on_env["tried"] == 0
    assert on_env["tried_with_other"] == {"tried": 2, "improved": 2, "dtype": ["fp16"]}
    assert {"kind": "dtype", "value": "bf16", "tried": 0, "best_score": None} in data["not_tried"]


def test_the_same_files_give_the_same_bytes_whatever_the_cache_and_order(
    tmp_path: Path,
) -> None:
    experiments = _history()
    first = _write_store(tmp_path / "a", experiments)
    shuffled = list(experiments)
    random.Random(7).shuffle(shuffled)
    second = _write_store(tmp_path / "b", shuffled)
    options: dict[str, Any] = {"dtype": "bf16", "text": "unroll the copy loop", "budget": 900}

    text = _packet(first, **options)
    assert _packet(first, **options) == text
    shutil.rmtree(first.root / ".kexp")
    assert _packet(first, **options) == text  # rebuilt from nothing
    assert _packet(second, **options).replace(str(second.root), "") == text.replace(
        str(first.root), ""
    )
    as_json = context(first, operator="reshape_and_cache", output="json").text
    assert context(second, operator="reshape_and_cache", output="json").text == as_json


@settings(
    max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(budget=st.integers(150, 2500), output=st.sampled_from(["markdown", "json"]))
def test_the_packet_never_exceeds_its_budget_and_counts_what_it_left_out(
    history: Store, budget: int, output: str
) -> None:
    full = context(history, operator="reshape_and_cache", budget=100_000, output=output)
    try:
        packet = context(history, operator="reshape_and_cache", budget=budget, output=output)
    except KexpError as exc:
        assert "too small" in str(exc) and "--budget" in str(exc)
        return

    assert packet.tokens == count_tokens(packet.text) <= budget
    assert len(packet.text) <= budget * CHARS_PER_TOKEN
    for section in ("lineage", "failures", "successes", "do_not_repeat", "not_tried"):
        shown = len(packet.data[section])
        assert shown + packet.left_out.get(section, 0) == len(full.data[section])
    if packet.left_out:
        assert ("Left out" in packet.text) if output == "markdown" else packet.data["left_out"]
    else:
        budgeted = full.text.replace("Budget: 100000 tokens", f"Budget: {budget} tokens")
        budgeted = budgeted.replace('"budget_tokens": 100000', f'"budget_tokens": {budget}')
        assert packet.text == budgeted


@pytest.mark.parametrize("output", ["markdown", "json"])
def test_at_every_budget_the_best_is_the_best_or_said_to_be_left_out(
    history: Store, output: str
) -> None:
    """However small the budget, a packet never says nothing was measured when there is a
    best, never shows the path to a best it left out, and keeps the best (without its
    insight, when only that fits) before anything less important."""
    full = context(history, operator="reshape_and_cache", budget=100_000, output="json")
    best = full.data["best"]
    assert best is not None
    for budget in range(100, full.tokens + 20, 3):
        try:
            packet = context(history, operator="reshape_and_cache", budget=budget, output=output)
        except KexpError:
            continue
        shown = packet.data["best"]
        assert "nothing measured here yet" not in packet.text, budget
        if shown is None:
            assert packet.left_out["best"] == 1 and not packet.data["lineage"], budget
            if output == "markdown":
                assert "(left out: give a larger --budget)" in packet.text, budget
        else:
            assert shown["id"] == best["id"], budget
            assert shown.get("key_insight") in (None, best["key_insight"]), budget


@pytest.mark.parametrize("output", ["markdown", "json"])
def test_at_every_budget_each_section_keeps_the_head_of_its_ranking(
    history: Store, output: str
) -> None:
    """A small budget shortens a section from its end: the first-ranked failure is never
    left out for a shorter one below it (an agent would read the second-closest dead end
    as the closest); an entry too long whole is kept without its insight first."""
    full = context(history, operator="reshape_and_cache", budget=100_000, output="json")
    ranked = ("tried_before", "failures", "marginal", "successes", "do_not_repeat")
    assert len(full.data["failures"]) > 1
    for budget in range(100, full.tokens + 20, 3):
        try:
            packet = context(history, operator="reshape_and_cache", budget=budget, output=output)
        except KexpError:
            continue
        for section in ranked:
            shown, whole = packet.data[section], full.data[section]
            assert [e["id"] for e in shown] == [e["id"] for e in whole[: len(shown)]], (
                budget,
                section,
            )
            for entry, complete in zip(shown, whole, strict=False):
                brief = {k: v for k, v in complete.items() if k not in ("key_insight", "error")}
                assert entry in (complete, brief), (budget, section)


def test_a_budget_too_small_for_the_heading_is_a_clear_error(history: Store) -> None:
    with pytest.raises(KexpError, match=r"too small.*give --budget \d+ or more"):
        context(history, operator="reshape_and_cache", budget=20)


def test_a_diff_already_tried_is_named_first(history: Store, tmp_path: Path) -> None:
    diff = "@@ -1,2 +1,3 @@\n   int k = 0;\n+  acc += x[i] * w[i];\n+  out[i] = acc;\n"
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        tried = history.create_experiment(
            **experiment_fields(
                change_summary="Accumulate in registers - -2% (spills)",
                score=0.98,
                code_change=diff,
                operator_sig=CACHE_OP,
                base_commit=BASE,
                author="test",
            )
        )
    renamed = diff.replace("acc", "total")

    text = _packet(history, diff=renamed)

    section = text.split("## Tried before (your diff)\n", 1)[1].split("\n## ", 1)[0]
    assert section.startswith(f"- {tried.id[:10]} 0.9800x regression (near-duplicate, similarity")
    assert "Diff: 2 changed line(s)." in text


def test_kexp_context_prints_markdown_json_and_reads_a_diff_on_stdin(history: Store) -> None:
    root = history.root
    result = run_kexp("context", "--operator", "reshape_and_cache", "--budget", "600", cwd=root)
    assert result.returncode == 0, result.stderr
    assert result.stdout.startswith("# kexp context: reshape_and_cache × any dtype × any env")
    assert count_tokens(result.stdout.rstrip("\n")) <= 600

    data = json.loads(
        run_kexp("context", "--operator", "cache", "--dtype", "bf16", "--json", cwd=root).stdout
    )
    assert data["best"]["change_summary"].startswith("Nontemporal stores for the cache")
    piped = run_kexp(
        "context", "--operator", "cache", "--diff", "-", cwd=root, input="@@ -1 +1 @@\n+x = 1;\n"
    )
    assert piped.returncode == 0 and "Diff: 1 changed line(s)." in piped.stdout

    missing = run_kexp("context", cwd=root)
    assert missing.returncode == 2 and "--operator" in missing.stderr
    small = run_kexp("context", "--operator", "cache", "--budget", "10", cwd=root)
    assert small.returncode == 2 and len(small.stderr.splitlines()) == 1
    assert small.stderr.startswith("kexp: error: a budget of 10 tokens is too small")


def test_an_empty_diff_on_stdin_is_said_and_the_packet_printed(
    history: Store, tmp_path: Path
) -> None:
    """The skill's ``git diff | kexp context --diff -`` with nothing changed (the change
    staged, committed, or not made yet): the empty diff was left out silently, and the
    agent read a packet without its "Tried before" as if its change were new. One line
    on stderr says the diff was empty; the packet is printed, as without a diff."""
    unchanged = init_repo(tmp_path / "kernel")
    diff = git(unchanged, "diff")
    assert diff == ""
    root = history.root
    piped = run_kexp("context", "--operator", "cache", "--diff", "-", cwd=root, input=diff)
    assert piped.returncode == 0, piped.stderr
    assert piped.stdout == run_kexp("context", "--operator", "cache", cwd=root).stdout
    assert piped.stderr.splitlines() == [
        "kexp: warning: the diff (standard input) is empty: the packet is made without it"
    ], piped.stderr


def test_an_operator_no_experiment_is_on_is_said_with_the_operators_recorded(
    history: Store, tmp_path: Path
) -> None:
    """An agent names the operator in its own words ("rms norm fwd", "flash_attention"):
    no recorded operator_sig holds it. The packet says so plainly and names the operators
    recorded, the closest first (the most of its words found in them), with how many
    experiments each has; it does not say its dtype and env were never tried, nor that
    nothing is recorded (the store holds 10), and keeps within its budget, byte for byte
    the same on each call; the command and its JSON say the same. An empty store still
    says how a campaign starts."""
    text = _packet(history, operator="rms norm fwd", dtype="bf16", env="MI300X")
    lines = text.splitlines()
    assert lines[2] == (
        "No recorded operator matches 'rms norm fwd' (a part of operator_sig, in any case): "
        "the 10 experiment(s) recorded are on 2 operator(s), the closest below; give one of "
        "them, or a part of it, as the operator."
    ), text
    at = lines.index("## Recorded operators (the closest first)")
    assert lines[at + 1 : at + 3] == [
        f"- {NORM_OP} — 1 experiment(s)",
        f"- {CACHE_OP} — 9 experiment(s)",
    ], text
    assert "never tried" not in text and START not in text and "on this operator" not in text
    assert "## Not tried yet" not in text and "## Current best" not in text
    flash = _packet(history, operator="flash_attention")
    assert flash.index(CACHE_OP) < flash.index(NORM_OP), flash  # "flash" is in the first
    assert _packet(history, operator="rms norm fwd", dtype="bf16", env="MI300X") == text
    small = context(history, operator="rms norm fwd", budget=120)
    assert small.tokens <= 120 and "No recorded operator matches" in small.text
    printed = run_kexp("context", "--operator", "softmax_fwd", "--json", cwd=history.root)
    data = json.loads(printed.stdout)
    assert data["context"]["no_match"].startswith("No recorded operator matches 'softmax_fwd'")
    assert "start" not in data["context"] and data["not_tried"] == []
    assert [o["experiments"] for o in data["operators"]] == [9, 1], data["operators"]
    empty = _write_store(tmp_path / "empty", [])
    assert START in _packet(empty, operator="softmax")
    assert "No recorded operator" not in _packet(empty, operator="softmax")


def test_the_consult_tool_names_the_operators_recorded_when_none_matches(
    history: Store,
) -> None:
    """The MCP consult tool answers the packet ``kexp context`` prints: an operator in the
    agent's own words gets the operators recorded, not "Nothing recorded here yet"."""
    pytest.importorskip("mcp")
    import anyio
    from mcp import Client

    from kexp.cli.mcp import build_server

    said: list[str] = []

    async def ask() -> None:
        async with Client(build_server(history.root)) as client:
            arguments = {"operator": "softmax_fwd", "dtype": "bf16", "env": "MI300X"}
            result = await client.call_tool("consult", arguments)
            said.append(result.content[0].text)  # type: ignore[union-attr]

    anyio.run(ask)
    assert said[0] == _packet(history, operator="softmax_fwd", dtype="bf16", env="MI300X").rstrip()
    assert "No recorded operator matches 'softmax_fwd'" in said[0] and START not in said[0]
    assert f"- {CACHE_OP} — 9 experiment(s)" in said[0]


def test_kexp_context_python_twin_uses_the_default_store(
    history: Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    import kexp

    monkeypatch.setenv("KEXP_ROOT", str(history.root))
    packet = kexp.context(operator="reshape_and_cache", budget=800)
    assert packet.text == context(history, operator="reshape_and_cache", budget=800).text
    assert kexp.similar(text="unroll")[0].change_summary.startswith("Unroll head loop by 8")


def test_brief_json_costs_under_a_third_of_the_predecessors_top_20(tmp_path: Path) -> None:
    sys.path.insert(0, str(REPO_ROOT / "bench"))
    import brief_ratio
    import generate

    dataset = generate.ensure_dataset(200, tmp_path, git=False, log=lambda message: None)
    figures, problems = brief_ratio.measure(dataset.folder)

    assert problems == []
    assert figures["brief_ratio"] <= 0.3
    assert figures["json"] < figures["json_full"]


def test_a_packet_with_nothing_recorded_says_how_a_campaign_starts(
    history: Store, tmp_path: Path
) -> None:
    """An agent's first consult on a kernel (or a new env) got counts of zero and no
    word of what to do; it now says how a campaign starts: an A/A run, then a first
    step against the reference, then steps against their parents."""
    empty = _write_store(tmp_path / "empty", [])
    for store, options, start in [
        (empty, {}, START),
        (history, {"env": "H100"}, START_NEW.format(asked="env")),  # (it names those recorded)
    ]:
        text = _packet(store, **options)
        assert start in text, text
        data = context(store, operator="reshape_and_cache", output="json", **options).data
        assert data["context"]["start"] == start
    assert START not in _packet(history)
    assert (
        "start" not in context(history, operator="reshape_and_cache", output="json").data["context"]
    )


def test_the_header_counts_failures_not_the_outcome_failed(history: Store) -> None:
    """The header's count of failures (buggy, failed, regression, interference) says
    "failures": "N failed" reads as the outcome ``failed`` alone. The JSON keeps its key."""
    for options in ({"dtype": "bf16", "env": "MI300X"}, {}):
        header = _packet(history, **options).splitlines()[2]
        data = json.loads(_packet(history, output="json", **options))["context"]
        count = data["failures_here"]
        assert count > 0 and " failed" not in header, header
        said = f"{count} failure{'' if count == 1 else 's'}"
        assert f"within noise, {said}" in header, header


def test_the_header_says_what_it_counts_not_here_read_across_refs(tmp_path: Path) -> None:
    """Read across refs in a clone that holds none of them, the header said "3 of them
    here": as if this clone held them. It says which they are (the dtype and env asked
    for), as its JSON keys ``experiments_here`` ... count them."""
    from test_sync import clone, make_remote, record

    remote, base = make_remote(tmp_path)
    other = clone(remote, tmp_path / "other", branch="agent/b")
    record(other, base, "Unroll by 4 - +2%", score=1.02)
    record(other, base, "Unroll by 8 - -1%", score=0.99)
    record(other, base, "fp8 stores - +3%", score=1.03, dtype_sig="fp8")
    git(other, "add", "-A")
    git(other, "commit", "-q", "-m", "three experiments")
    git(other, "push", "-q", "origin", "agent/b")
    mine = clone(remote, tmp_path / "mine")
    assert Store(mine).list_experiments() == []  # none here, in this clone
    asked = ("context", "--operator", "reshape_and_cache", "--all-refs")
    for options, counted, said in (
        (("--dtype", "bf16", "--env", "MI300X"), 2, "2 of them for this dtype and env: "),
        (("--dtype", "bf16"), 2, "2 of them for this dtype: "),
        ((), 3, "3 of them for any dtype and env: "),
    ):
        header = run_kexp(*asked, *options, cwd=mine).stdout.splitlines()[2]
        assert header.startswith(f"3 experiment(s) on this operator; {said}"), header
        assert " here" not in header, header
        data = json.loads(run_kexp(*asked, *options, "--json", cwd=mine).stdout)["context"]
        assert data["experiments_here"] == counted


def test_a_failure_that_measured_nothing_prints_no_score(history: Store) -> None:
    """A run that crashed (buggy, score 0) or timed out measured nothing: the packet
    printed it as "0.0000x buggy", a speedup of zero an agent could read as a result.
    It says "buggy (nothing measured)"; the JSON keeps the score as recorded."""
    text = _packet(history, dtype="bf16", env="MI300X")
    failures = text.split("## Related failures\n", 1)[1].split("\n## ", 1)[0]
    crash = next(line for line in failures.splitlines() if "memory access fault" in line)
    assert "0.0000x" not in crash and " buggy (nothing measured) — " in crash, crash
    measured = next(line for line in failures.splitlines() if "LDS" in line)
    assert "0.9293x regression" in measured, measured
    data = json.loads(_packet(history, output="json", dtype="bf16", env="MI300X"))
    assert any(e["outcome"] == "buggy" and e["score"] == 0.0 for e in data["failures"]), data


def test_a_failure_without_a_key_insight_shows_the_error_it_recorded(tmp_path: Path) -> None:
    """An agent recorded a crash with its error but no key insight: the packet showed the
    summary alone, and the next agent did not learn what went wrong. The error's telling
    line is shown (a Python traceback's last), in the text and the JSON; a failure with a
    key insight shows the insight alone."""
    made = _history()
    traceback = (
        "Traceback (most recent call last):\n"
        '  File "bench.py", line 12, in <module>\n'
        "    out = kernel(x)\n"
        "RuntimeError: CUDA error: misaligned address\n"
    )
    made.append(
        KernelExperiment.from_dict(
            experiment_fields(
                id="6ad2000000000099",
                created_at="2026-11-20T08:00:00Z",
                change_summary="Vectorize slot loads to 16 bytes - crashed",
                score=0.0,
                is_buggy=True,
                status="failed",
                error_message=traceback,
                detailed_description="**Approach**: 16-byte slot loads.",
                pid=made[1].id,
                base_commit=BASE,
                author="test",
            )
        )
    )
    store = _write_store(tmp_path / "store", made)
    text = _packet(store, dtype="bf16", env="MI300X")
    failures = text.split("## Related failures\n", 1)[1].split("\n## ", 1)[0].splitlines()
    at = next(i for i, line in enumerate(failures) if "16 bytes - crashed" in line)
    assert failures[at + 1] == "  error: RuntimeError: CUDA error: misaligned address"
    fault = next(i for i, line in enumerate(failures) if "memory access fault" in line)
    assert failures[fault + 1] == "  insight: Never assume alignment"  # no error beside it
    data = json.loads(_packet(store, output="json", dtype="bf16", env="MI300X"))
    (crash,) = [e for e in data["failures"] if e["id"] == "6ad2000000000099"]
    assert crash["error"] == "RuntimeError: CUDA error: misaligned address"
    assert "key_insight" not in crash
    lessons = run_kexp("lessons", "--json", cwd=store.root)
    (lesson,) = [x for x in json.loads(lessons.stdout)["buggy"] if x["id"] == crash["id"]]
    assert lesson["error"] == crash["error"] and lesson["key_insight"] == ""
    shown = run_kexp("lessons", cwd=store.root).stdout
    assert f"(none recorded; the error: {crash['error']})" in " ".join(shown.split())
    site = tmp_path / "site"
    assert run_kexp("report", "-o", str(site), cwd=store.root).returncode == 0
    pages = "".join(p.read_text(encoding="utf-8") for p in (site / "op").glob("*.html"))
    assert f"Key insight: (none recorded; the error: {crash['error']})" in pages


def test_a_related_success_says_where_it_stands_over_the_reference(tmp_path: Path) -> None:
    """A success beside the best is a step too: its line says what it reached over the
    reference first, as the best's does, and its own step after, so that an agent does
    not read a 1.0188x step on a 1.15x parent as a kernel barely faster than the start."""
    made = _history()
    vectorized = next(exp for exp in made if exp.change_summary.startswith("Vectorize copies"))
    side = KernelExperiment.from_dict(
        experiment_fields(
            id=f"{0x6AC10000 + 3600 * 40:08x}{40:08x}",
            created_at="2026-10-28T08:00:00Z",
            change_summary="Unroll head loop by 4 - +1.88%",
            score=1.0188,
            base_commit=BASE,
            author="test",
            pid=vectorized.id,
            detailed_description="**Approach**: unroll 4\n\n**Key insight**: unroll from VGPRs",
        )
    )
    store = _write_store(tmp_path / "store", [*made, side])
    text = _packet(store, dtype="bf16", env="MI300X")
    successes = text.split("## Related successes\n", 1)[1].split("\n## ", 1)[0]
    reached = 1.0301 * 1.1167 * 1.0188
    assert (
        f"- {side.id[:10]} {reached:.4f}x over the reference (this step 1.0188x) improvement"
        " — Unroll head loop by 4" in successes
    ), successes
    packet = context(store, operator="reshape_and_cache", dtype="bf16", env="MI300X", output="json")
    listed = {entry["id"]: entry for entry in packet.data["successes"]}
    assert listed[side.id]["cumulative_score"] == pytest.approx(reached)


def test_related_successes_are_ranked_by_where_they_stand_over_the_reference(
    tmp_path: Path,
) -> None:
    """The successes are chosen and ordered (the budget keeps the first) by what their
    line leads with: a 1.02x step on a 1.30x root (1.326x over the reference, the second
    fastest kernel) comes before a 1.10x root, not after it; and a step whose cumulative
    score is unknown (its parent still running) says its score is over its parent, not a
    bare number that reads as over the reference."""
    made: list[KernelExperiment] = []

    def add(n: int, summary: str, score: float, **fields: Any) -> KernelExperiment:
        exp = _experiment(n, summary, score, summary, month=11, **fields)
        made.append(exp)
        return exp

    root = add(0, "Root - +30%", 1.30)
    add(1, "Best step - +5%", 1.05, pid=root.id, measured_against="parent")
    sibling = add(2, "Sibling step - +2%", 1.02, pid=root.id, measured_against="parent")
    for n, score in enumerate((1.10, 1.08, 1.06), start=3):
        add(n, f"Other root {n} - better", score)
    running = add(6, "Planned base - running", 0.0, status="running")
    waiting = add(
        7, "Step on a running base - +5%", 1.05, pid=running.id, measured_against="parent"
    )
    store = _write_store(tmp_path / "store", made)
    text = _packet(store)
    successes = text.split("## Related successes\n", 1)[1].split("\n## ", 1)[0]
    ids = [line.split()[1] for line in successes.splitlines() if line.startswith("- ")]
    assert ids[0] == sibling.id[:10], successes
    (line,) = [x for x in successes.splitlines() if x.startswith(f"- {waiting.id[:10]}")]
    assert "1.0500x over its parent" in line, line
    packet = context(store, operator="reshape_and_cache", output="json")
    assert packet.data["successes"][0]["id"] == sibling.id
    (said,) = [e for e in packet.data["successes"] if e["id"] == waiting.id]
    assert said["cumulative_score"] is None and running.id[:10] in said["cumulative_reason"]


def test_a_dead_end_within_noise_is_not_offered_for_a_remeasure(tmp_path: Path) -> None:
    """A step within noise that others built on without doing better is a dead end in
    ``kexp tree``: the packet does not list it under "Within noise: remeasure or move on"
    (someone moved on from it, and what was built on it failed) but with the changes
    already tried, marked a dead end; a step within noise nobody built on is still
    offered for a remeasure, and the failure built on the dead end is listed."""
    root = _experiment(
        0, "Vectorize copies to 128-bit - +10%", 1.10, "wide accesses", measured_against="reference"
    )
    dead = _experiment(
        1,
        "fp32 accumulation of the row sum - within noise",
        1.009,
        "no-op",
        pid=root.id,
        measured_against="parent",
        score_ci=[1.0064, 1.0116],
    )
    worse = _experiment(
        2,
        "fp32 exp2 output on top of fp32 sum - -5%",
        0.95,
        "keep fp32 minimal",
        pid=dead.id,
        measured_against="parent",
    )
    open_ = _experiment(
        3,
        "num_stages=4 - within noise",
        1.0096,
        "no loop to pipeline",
        pid=root.id,
        measured_against="parent",
        score_ci=[0.9991, 1.0201],
    )
    store = _write_store(tmp_path / "store", [root, dead, worse, open_])
    (tree,) = json.loads(run_kexp("tree", "--json", cwd=store.root).stdout)
    marked = {n["id"]: n["dead_end"] for n in tree["children"]}
    assert marked == {dead.id: True, open_.id: False}  # what kexp tree says

    text = _packet(store, operator="reshape_and_cache", text="accumulate the row sum in fp32")
    noise = text.split("## Within noise: remeasure or move on\n")[1].split("\n## ")[0]
    assert open_.id[:10] in noise and dead.id[:10] not in noise, noise
    assert worse.id[:10] in text.split("## Related failures\n")[1].split("\n## ")[0]
    tried = text.split("## Do not repeat (already tried here)\n")[1].split("\n## ")[0]
    assert tried.startswith("- fp32 accumulation of the row sum — marginal ×1, a dead end ("), tried
    data = context(store, operator="reshape_and_cache", output="json").data
    assert [e["id"] for e in data["marginal"]] == [open_.id]
    (group,) = [g for g in data["do_not_repeat"] if dead.id in g["ids"]]
    assert group["dead_ends"] == [dead.id]


def test_a_first_step_that_is_the_best_is_not_listed_twice(repo: Path) -> None:
    """The campaign's first iteration improved: the packet named it as the current best,
    then again, whole, as step 1 of the path to it (trial 18). Now step 1 is "the best
    (above)", as the last step of a longer path is."""
    first = run_kexp(
        "add", "--summary", "Vectorize row loads 4-wide - +57%", "--score", "1.5749",
        "--operator", "kernels/softmax.py: softmax_kernel", "--dtype", "fp32", "--env", "cpu",
        "--json", cwd=repo,
    )  # fmt: skip
    assert first.returncode == 0, first.stderr
    exp_id = json.loads(first.stdout)["id"]
    packet = run_kexp("context", "--operator", "softmax", cwd=repo)
    assert packet.returncode == 0, packet.stderr
    assert packet.stdout.count("Vectorize row loads 4-wide") == 1, packet.stdout
    assert packet.stdout.count(exp_id[:10]) == 1, packet.stdout
    path = packet.stdout.split("## Path to the best", 1)[1].split("\n\n", 1)[0]
    assert "\n1. the best (above): 1.5749x over reference → 1.5749x" in path, path
