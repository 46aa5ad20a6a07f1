"""Tried before, as a user at the command meets it: the same measurement recorded
again, the same change for another dtype or parent, a verdict recorded after its pending
run, a change given with or without context lines. Each advised command is taken from
the message and run as printed; the truth is read from the files (``kexp list
--json``). Real git repositories, the command through click's runner."""

from __future__ import annotations

import json
import re
import shlex
from pathlib import Path

import pytest
from conftest import git, run_kexp

DIFF = """\
diff --git a/csrc/k.cu b/csrc/k.cu
--- a/csrc/k.cu
+++ b/csrc/k.cu
@@ -10,7 +10,7 @@ __global__ void k_attn(scalar_t* out)
   const int lane = threadIdx.x % 32;
   float acc = 0.f;
   for (int i = lane; i < n; i += 32) {
-#pragma unroll 2
+#pragma unroll 8
     acc += in[i] * w[i];
   }
   out[blockIdx.x] = acc;
"""
#: The same change as ``git diff -U0`` gives it: no context lines.
DIFF_U0 = """\
diff --git a/csrc/k.cu b/csrc/k.cu
index 1111111..2222222 100644
--- a/csrc/k.cu
+++ b/csrc/k.cu
@@ -13 +13 @@ __global__ void k_attn(scalar_t* out)
-#pragma unroll 2
+#pragma unroll 8
"""
KERNEL = ["--operator", "csrc/k.cu: k", "--env", "H100"]


def write(folder: Path, name: str, content: object) -> str:
    path = folder / name
    path.write_text(content if isinstance(content, str) else json.dumps(content))
    return str(path)


def add(repo: Path, *args: str) -> tuple[str, str]:
    """``kexp add --json`` of ``args``: the new id and what it warned."""
    done = run_kexp("add", *KERNEL, "--json", *args, cwd=repo)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)["id"], done.stderr


def listed(repo: Path) -> dict[str, dict[str, object]]:
    done = run_kexp("list", "--json", cwd=repo)
    assert done.returncode == 0, done.stderr
    return {e["id"]: e for e in json.loads(done.stdout)}


def run_as_printed(command: str, repo: Path, **files: str) -> None:
    """Run a command a message printed; ``...`` after an option is the file given in
    ``files`` under the option's name."""
    words = shlex.split(command)
    for at, word in enumerate(words):
        if word == "..." and words[at - 1].startswith("--"):
            words[at] = files[words[at - 1][2:]]
    assert words[0] == "kexp", command
    done = run_kexp(*words[1:], cwd=repo)
    assert done.returncode == 0, (command, done.stderr)


def test_a_measurement_recorded_again_is_pooled_once_as_the_warning_says(repo: Path) -> None:
    """The same diff, base commit and env recorded again with new timings is written
    all the same; the warning's advice, run as printed (the new record removed, then its
    timings added as a round of the first), leaves one experiment with two rounds, not
    the second round counted twice."""
    diff = write(repo, "d.diff", DIFF)
    base, cand = [12.1, 12.3, 12.2, 12.4, 12.0], [11.1, 11.3, 11.2, 11.4, 11.0]
    first, _ = add(repo, "--summary", "Unroll 8 - +9%", "--dtype", "bf16", "--diff-file", diff,
                   "--baseline", write(repo, "b.json", {"s": base}),
                   "--candidate", write(repo, "c.json", {"s": cand}))  # fmt: skip
    b2 = write(repo, "b2.json", {"s": [t + 0.05 for t in base]})
    c2 = write(repo, "c2.json", {"s": [t + 0.4 for t in cand]})
    second, warned = add(repo, "--summary", "Unroll 8 again - +1%", "--dtype", "bf16",
                         "--diff-file", diff, "--baseline", b2, "--candidate", c2)  # fmt: skip
    advice = re.search(r"instead \((kexp rm \S+ --yes), then (kexp remeasure .+? \.\.\.),", warned)
    assert advice, warned
    assert advice.group(1) == f"kexp rm {second} --yes", warned
    for command in advice.groups():
        run_as_printed(command, repo, baseline=b2, candidate=c2)
    (only,) = listed(repo).values()
    assert only["id"] == first
    assert [e["baseline_n"] for e in only["results"]] == [10]  # type: ignore[index]


@pytest.mark.parametrize("other", ["dtype", "pid"])
def test_the_same_change_for_another_dtype_or_parent_is_another_experiment(
    repo: Path, other: str
) -> None:
    """The same templated diff measured for bf16, then for fp16 (or on another parent)
    with the same timings (a whole-microsecond timer reads them alike) is recorded: it
    is not the bf16 record made again, nor a round of it."""
    diff = write(repo, "d.diff", DIFF)
    timings = ["--baseline", write(repo, "b.json", {"s1": [12] * 6, "s2": [40] * 6}),
               "--candidate", write(repo, "c.json", {"s1": [11] * 6, "s2": [38] * 6})]  # fmt: skip
    parent, _ = add(repo, "--summary", "Vectorize - +2%", "--dtype", "bf16", "--score", "1.02")
    first, _ = add(repo, "--summary", "Unroll 8 - +5%", "--dtype", "bf16", "--diff-file", diff,
                   *timings)  # fmt: skip
    again = ["--dtype", "fp16"] if other == "dtype" else ["--dtype", "bf16", "--pid", parent]
    second, warned = add(repo, "--summary", "Unroll 8 there - +5%", "--diff-file", diff,
                         *again, *timings)  # fmt: skip
    assert "already tried in" in warned and "same measurement" not in warned, warned
    assert {first, second} <= set(listed(repo))


def test_a_pending_runs_verdict_is_recorded_on_it_as_the_refusal_says(repo: Path) -> None:
    """A run recorded pending (status running) with its timings, then its verdict (wrong
    output: buggy) with the same timings, is refused as the same timings recorded again;
    the advice, run as printed, records the verdict on the pending run."""
    base, cand = {"s": [12.1, 12.3, 12.2, 12.4, 12.0]}, {"s": [11.1, 11.3, 11.2, 11.4, 11.0]}
    timings = ["--baseline", write(repo, "b.json", base),
               "--candidate", write(repo, "c.json", cand)]  # fmt: skip
    pending, _ = add(repo, "--summary", "Unroll 4 - running", "--status", "running",
                     "--dtype", "bf16", *timings)  # fmt: skip
    refused = run_kexp("add", *KERNEL, "--summary", "Unroll 4 - wrong output", "--buggy",
                       "--error", "max abs diff 3.2", "--dtype", "bf16", *timings,
                       cwd=repo)  # fmt: skip
    assert refused.returncode != 0 and refused.stderr.count("\n") == 1, refused.stderr
    advice = re.search(r"(kexp update \S+ --set .*?error_message=FILE)", refused.stderr)
    assert advice, refused.stderr
    error = write(repo, "error.txt", "max abs diff 3.2\n")
    run_as_printed(advice.group(1).replace("=FILE", f"={error}"), repo)
    (only,) = listed(repo).values()
    assert (only["id"], only["outcome"], only["status"]) == (pending, "buggy", "done")


@pytest.mark.parametrize("order", [(DIFF, DIFF_U0), (DIFF_U0, DIFF)])
def test_the_same_line_given_without_context_lines_is_tried_before(
    repo: Path, order: tuple[str, str]
) -> None:
    """The same ``#pragma unroll`` line, file and base, recorded once from ``git diff``
    and once from ``git diff -U0`` (no context lines), either first: the second is
    warned of the first."""
    first, _ = add(repo, "--summary", "Unroll 8 - -4%", "--score", "0.96", "--dtype", "bf16",
                   "--diff-file", write(repo, "d1.diff", order[0]))  # fmt: skip
    _, warned = add(repo, "--summary", "Unroll 8 again - -4%", "--score", "0.96",
                    "--dtype", "bf16", "--diff-file", write(repo, "d2.diff", order[1]))  # fmt: skip
    assert f"near-duplicate (shingles of the changed lines, variables renamed) of {first}" in (
        warned
    ), warned


def test_two_variables_set_alike_are_two_changes(repo: Path) -> None:
    """``int tile = 32`` to 64 in one kernel, then ``int vec = 32`` to 64 in another of
    the same file: two ideas, not the same changed lines (their names tell them apart)."""
    d1 = """\
--- a/csrc/k.cu
+++ b/csrc/k.cu
@@ -10,3 +10,3 @@ __global__ void k_attn(float* out)
   const int lane = threadIdx.x % 32;
-  int tile = 32;
+  int tile = 64;
   float acc = 0.f;
"""
    d2 = """\
--- a/csrc/k.cu
+++ b/csrc/k.cu
@@ -80,3 +80,3 @@ __global__ void k_norm(half* x)
   for (int r = 0; r < rows; ++r) {
-    int vec = 32;
+    int vec = 64;
     load_row(x, r);
"""
    add(repo, "--summary", "Tile 64 in attn - -4%", "--score", "0.96", "--dtype", "bf16",
        "--diff-file", write(repo, "d1.diff", d1))  # fmt: skip
    _, warned = add(repo, "--summary", "Vector width 64 in norm - +3%", "--score", "1.03",
                    "--dtype", "bf16", "--diff-file", write(repo, "d2.diff", d2))  # fmt: skip
    assert "near-duplicate" not in warned, warned
    assert git(repo, "status", "--porcelain")  # both recorded


def test_a_timed_out_runs_measurement_is_recorded_as_remeasure_advises(repo: Path) -> None:
    """``kexp remeasure`` of a run that timed out (its score, 1.0 here, never read) is
    refused; the update it advises, run as printed, records the measurement: ``show``
    gives the new score, not "nothing measured"."""
    timed_out, _ = add(repo, "--summary", "Unroll 16 - timeout", "--score", "1.0",
                       "--status", "timeout", "--dtype", "bf16")  # fmt: skip
    refused = run_kexp("remeasure", timed_out[:10],
                       "--baseline", write(repo, "b.json", {"s": [12.1, 12.3, 12.2]}),
                       "--candidate", write(repo, "c.json", {"s": [11.1, 11.3, 11.2]}),
                       cwd=repo)  # fmt: skip
    assert refused.returncode != 0 and refused.stderr.count("\n") == 1, refused.stderr
    advice = re.search(r"(kexp update \S+ --set .*--reason TEXT)", refused.stderr)
    assert advice, refused.stderr
    said = advice.group(1).replace("SCORE", "1.08").replace("TEXT", "'ran to the end'")
    run_as_printed(said, repo)
    shown = run_kexp("show", timed_out[:10], "--json", cwd=repo)
    exp = json.loads(shown.stdout)
    assert (exp["score"], exp["outcome"]) == (1.08, "improvement"), shown.stdout


def test_a_timed_out_runs_measurement_is_recorded_as_the_remeasure_tool_advises(
    repo: Path,
) -> None:
    """The same through the MCP tools: the remeasure tool's refusal names the update
    tool's changes, which, made as said, record the measurement."""
    pytest.importorskip("mcp")
    import anyio
    from mcp import Client

    from kexp.cli.mcp import build_server

    timed_out, _ = add(repo, "--summary", "Unroll 16 - timeout", "--score", "1.0",
                       "--status", "timeout", "--dtype", "bf16")  # fmt: skip
    said: list[str] = []

    async def work() -> None:
        async with Client(build_server(repo)) as client:
            refused = await client.call_tool(
                "remeasure",
                {"exp_id": timed_out, "baseline": {"s": [12.1, 12.3]},
                 "candidate": {"s": [11.1, 11.2]}},
            )  # fmt: skip
            assert refused.is_error
            said.append(refused.content[0].text)  # type: ignore[union-attr]
            changes = re.search(r"changes: (\{.*?\})", said[0])
            assert changes, said[0]
            done = await client.call_tool(
                "update",
                {"exp_id": timed_out, "reason": "ran to the end",
                 "changes": json.loads(changes.group(1).replace("SCORE", "1.08"))},
            )  # fmt: skip
            assert not done.is_error, done.content

    anyio.run(work)
    assert f'the update tool with exp_id: "{timed_out}"' in said[0], said[0]
    exp = json.loads(run_kexp("show", timed_out[:10], "--json", cwd=repo).stdout)
    assert (exp["score"], exp["outcome"]) == (1.08, "improvement")


def test_a_coarse_timers_second_round_alike_in_another_order_is_pooled(repo: Path) -> None:
    """A whole-microsecond timer: round 2 reads the values of round 1 in another order
    (3 samples a side). It is a new measurement, as the record path judges one (a copy
    is the same samples in the same order, 5 a side): ``kexp remeasure`` pools it."""
    first, _ = add(repo, "--summary", "Unroll 4 - +5%", "--dtype", "bf16",
                   "--baseline", write(repo, "b.json", {"s": [40, 41, 40]}),
                   "--candidate", write(repo, "c.json", {"s": [38, 38, 39]}))  # fmt: skip
    done = run_kexp("remeasure", first[:10],
                    "--baseline", write(repo, "b2.json", {"s": [41, 40, 40]}),
                    "--candidate", write(repo, "c2.json", {"s": [39, 38, 38]}),
                    cwd=repo)  # fmt: skip
    assert done.returncode == 0, done.stderr
    (only,) = listed(repo).values()
    assert [e["baseline_n"] for e in only["results"]] == [6]  # type: ignore[index]


@pytest.mark.parametrize("said_by", ["validate", "rm", "update"])
def test_two_files_with_one_id_are_told_apart_by_the_steps_printed(
    repo: Path, said_by: str
) -> None:
    """Two clones recorded the same id; merged, both files are in the store. The
    ``kexp re-id`` that ``kexp validate``'s hint (or the refusal of ``kexp rm``/``kexp
    update`` of the id) prints (it printed sed and mv steps), run as printed, gives one
    file a new id and its name: the store validates, both experiments are listed, and
    the id names one again."""
    import shlex

    doc = (
        "id: 1234567890abcdef\nchange_summary: {}\nscore: {}\n"
        'operator_sig: "csrc/k.cu: k"\ndtype_sig: bf16\nenv: H100\n'
        'created_at: "2026-12-06T10:00:00Z"\n'
    )
    add_doc = run_kexp("add", input=doc.format("Unroll by 4 - +2%", 1.02), cwd=repo)
    assert add_doc.returncode == 0, add_doc.stderr
    (first,) = (repo / "experiments").rglob("1234567890abcdef-*.md")
    text = first.read_text().replace("Unroll by 4 - +2%", "Vectorize loads - -3%")
    (first.parent / "1234567890abcdef-vectorize-loads-3.md").write_text(text)
    if said_by == "validate":
        told = run_kexp("validate", cwd=repo)
        said = re.search(r"for this one: (kexp re-id .*)\)$", told.stdout, re.MULTILINE)
    else:
        args = ["rm", "1234567890", "--yes"] if said_by == "rm" else ["update", "1234567890",
                "--set", "score=1.03"]  # fmt: skip
        told = run_kexp(*args, cwd=repo)
        said = re.search(r"with it \((kexp re-id .*)\)$", told.stderr, re.MULTILINE)
    assert told.returncode != 0 and said, told.stdout + told.stderr
    done = run_kexp(*shlex.split(said.group(1))[1:], cwd=repo)
    assert done.returncode == 0, done.stderr
    checked = run_kexp("validate", cwd=repo)
    assert checked.returncode == 0, checked.stdout + checked.stderr
    summaries = {e["change_summary"]: e["id"] for e in listed(repo).values()}
    assert set(summaries) == {"Unroll by 4 - +2%", "Vectorize loads - -3%"}
    assert "1234567890abcdef" in summaries.values()
    assert run_kexp("update", "1234567890", "--set", "score=1.03", cwd=repo).returncode == 0


def test_a_sync_of_two_files_with_one_id_says_one_problem(tmp_path: Path) -> None:
    """Two clones recorded the same id and one merged the other's by hand: its sync
    refuses naming the shared id once, not "(and 1 more)" for the second file of it."""
    from test_sync import clone, make_remote

    remote, _ = make_remote(tmp_path)
    alice, bob = clone(remote, tmp_path / "alice"), clone(remote, tmp_path / "bob")
    doc = (
        "id: 1234567890abcdef\nchange_summary: {}\nscore: {}\n"
        'operator_sig: "csrc/k.cu: k"\ndtype_sig: bf16\nenv: H100\n'
        'created_at: "2026-12-06T10:00:00Z"\n'
    )
    assert run_kexp("add", input=doc.format("Unroll by 4 - +2%", 1.02), cwd=alice).returncode == 0
    assert run_kexp("sync", cwd=alice).returncode == 0
    assert run_kexp("add", input=doc.format("Vectorize - -3%", 0.97), cwd=bob).returncode == 0
    git(bob, "add", "-A")
    git(bob, "commit", "-qm", "vectorize")
    git(bob, "pull", "-q", "--no-rebase", "--no-edit", "origin", "main")
    refused = run_kexp("sync", cwd=bob)
    assert refused.returncode != 0 and "error[duplicate-id]" in refused.stderr, refused.stderr
    assert "more)" not in refused.stderr, refused.stderr


@pytest.mark.parametrize("bound", ["nan", "NaN", "inf", "-inf"])
def test_a_score_bound_that_is_no_number_is_refused(repo: Path, bound: str) -> None:
    """``--min-score nan`` (``top --max-score``, the list and top tools' ``min_score``)
    bounds nothing: refused in one line, as ``abc`` is, not "(no experiments match)"; to
    the tools, the text ``"nan"`` is no number (JSON's types are kept; JSON has no NaN)."""
    pytest.importorskip("mcp")
    import anyio
    from mcp import Client

    from kexp.cli.mcp import build_server

    add(repo, "--summary", "Unroll by 4 - +2%", "--score", "1.02", "--dtype", "bf16")
    for command, flag in (("list", "--min-score"), ("top", "--max-score")):
        refused = run_kexp(command, flag, bound, cwd=repo)
        assert refused.returncode == 2 and refused.stderr.count("\n") == 1, refused.stderr
        assert "no score bound" in refused.stderr, refused.stderr
    said: list[str] = []

    async def work() -> None:
        async with Client(build_server(repo)) as client:
            for tool in ("list", "top"):
                answer = await client.call_tool(tool, {"min_score": bound})
                assert answer.is_error, answer.content
                said.append(answer.content[0].text)  # type: ignore[union-attr]

    anyio.run(work)
    assert all("argument 'min_score' must be a number" in text for text in said), said
    assert all("\n" not in text for text in said), said


def test_a_retired_steps_reason_is_in_the_tried_before_warning(repo: Path) -> None:
    """A step retired as wrong (``kexp update ID --set status=failed --reason ...``), then
    its change tried again for another dtype: the warning said "failed" and its summary
    (a +5% step), not why it was retired, so the agent could not tell a wrong kernel
    from a slow one without reading the file (trial R, finding 05)."""
    diff = write(repo, "d.diff", DIFF)
    first, _ = add(repo, "--summary", "Unroll 8 - +5%", "--dtype", "bf16", "--score", "1.05",
                   "--diff-file", diff)  # fmt: skip
    why = "wrong results when rows are not a multiple of 8"
    done = run_kexp("update", first, "--set", "status=failed", "--reason", why, cwd=repo)
    assert done.returncode == 0, done.stderr
    _, warned = add(repo, "--summary", "Unroll 8 again", "--dtype", "fp16", "--score", "1.04",
                    "--diff-file", diff)  # fmt: skip
    assert f"already tried in {first}" in warned, warned
    assert why in " ".join(warned.split()), warned
