"""An agent's campaign on one kernel, step by step, as the README and the skill tell it
to work: each test is a step where kexp's answer was not true, or did not say what to
do, and holds the answer to what git and the files hold.

Real git repositories, real files; the command in-process through click's CliRunner.
"""

from __future__ import annotations

import json
import math
import random
import re
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner, Result
from conftest import experiment_fields, git, unwrapped

from kexp import Store
from kexp.agents.context import context
from kexp.cli.main import main
from kexp.core.errors import ExperimentExistsError
from kexp.measure.record import record_iteration

OPERATOR = "csrc/softmax.cu: softmax"
CONFIGS = {"n1024": 10.0, "n4096": 35.0, "n16384": 130.0}


def kexp(repo: Path, *args: str, input: str | None = None) -> Result:
    return CliRunner().invoke(main, ["--root", str(repo), "--no-pager", *args], input=input)


def timings(factor: float, seed: int, samples: int = 20) -> dict[str, list[float]]:
    """Timings in microseconds, ``samples`` a configuration, 1 % noise."""
    rng = random.Random(seed)
    return {
        config: [round(base * factor * (1 + rng.gauss(0, 0.01)), 5) for _ in range(samples)]
        for config, base in CONFIGS.items()
    }


def write(path: Path, data: Any) -> str:
    path.write_text(json.dumps(data), encoding="utf-8")
    return str(path)


def softmax_fields(**overrides: Any) -> dict[str, Any]:
    fields = experiment_fields(operator_sig=OPERATOR, dtype_sig="fp32", env="H100, CUDA 12.4")
    fields.pop("score")
    fields["change_summary"] = "Unrolled the inner loop by 4"  # the timings' score: no figure
    return {**fields, **overrides}


# --- remeasure: a round is a new measurement, in the earlier rounds' unit ---------------------


def _marginal(store: Store, tmp_path: Path) -> tuple[str, str, str]:
    """A within-noise step recorded from timings; the files of its first round."""
    base = write(tmp_path / "base.json", timings(1.0, 1))
    cand = write(tmp_path / "cand.json", timings(0.995, 2))
    exp = record_iteration(store, baseline=base, candidate=cand, **softmax_fields())
    return exp.id, base, cand


def test_remeasure_refuses_a_round_that_repeats_an_earlier_one(
    repo: Path, store: Store, tmp_path: Path
) -> None:
    """The agent remeasures a marginal step, then passes the same timing files again:
    pooling a round with a copy of itself narrows the interval without measuring
    anything, so kexp refuses it in one line, and the file keeps its two real rounds.
    (The same samples in another order are a new round, as a record's are: a coarse
    timer's, ``tests/test_tried_before_cli.py``.)"""
    exp_id, _, _ = _marginal(store, tmp_path)
    base2 = write(tmp_path / "base2.json", timings(1.0, 3))
    cand2 = write(tmp_path / "cand2.json", timings(0.995, 4))
    first = kexp(repo, "remeasure", exp_id[:10], "--baseline", base2, "--candidate", cand2)
    assert first.exit_code == 0, first.output
    path = store.get_experiment(exp_id).path
    assert path is not None
    before = Path(path).read_bytes()
    again = kexp(repo, "remeasure", exp_id[:10], "--baseline", base2, "--candidate", cand2)
    assert again.exit_code == 2, again.output
    lines = [line for line in again.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith("kexp: error: "), again.stderr
    assert "round 2" in lines[0] and "measure again" in lines[0], lines[0]
    assert Path(path).read_bytes() == before


def test_remeasure_refuses_a_round_in_another_unit(
    repo: Path, store: Store, tmp_path: Path
) -> None:
    """The first round was recorded in microseconds; the agent's new round is the same
    kind of numbers, given with ``--unit ms``: pooled, the medians were a thousand times
    the first round's and the interval [0.34, 3.05]. kexp says which configuration is
    off by how much, and to check the unit; nothing is written."""
    exp_id, _, _ = _marginal(store, tmp_path)
    path = store.get_experiment(exp_id).path
    assert path is not None
    before = Path(path).read_bytes()
    base2 = write(tmp_path / "base2.json", timings(1.0, 3))
    cand2 = write(tmp_path / "cand2.json", timings(0.995, 4))
    result = kexp(
        repo, "remeasure", exp_id[:10], "--baseline", base2, "--candidate", cand2, "--unit", "ms"
    )
    assert result.exit_code == 2, result.output
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith("kexp: error: "), result.stderr
    assert "n1024" in lines[0] and "1000" in lines[0] and "--unit" in lines[0], lines[0]
    assert Path(path).read_bytes() == before
    # In the right unit the same files are a round like any other.
    right = kexp(repo, "remeasure", exp_id[:10], "--baseline", base2, "--candidate", cand2)
    assert right.exit_code == 0, right.output
    git(repo, "status", "--short")


# --- one file broken by hand: its error, and nothing false about the others -------------------


def test_a_parent_file_broken_by_hand_is_one_error_not_its_children_dangling(
    repo: Path, store: Store
) -> None:
    """The agent's editor saved the unroll step with a Latin-1 byte. ``kexp validate``
    says so at that file; the steps built on it and the combination naming it name an
    experiment that is in the store (its file is there, broken): no "parent ... is not
    in the store" errors that would send the agent to rewrite correct pids."""
    root = store.create_experiment(**softmax_fields(score=1.25, status="done"))
    middle = store.create_experiment(
        **softmax_fields(
            pid=root.id,
            score=1.08,
            status="done",
            measured_against="parent",
            change_summary="Unroll by 4 - +8%",
        )
    )
    store.create_experiment(
        **softmax_fields(
            pid=middle.id,
            score=1.12,
            status="done",
            measured_against="parent",
            change_summary="Warp shuffle reduction - +12%",
        )
    )
    store.create_experiment(
        **softmax_fields(
            pid=root.id,
            score=1.01,
            status="done",
            measured_against="parent",
            combines=[root.id, middle.id],
            change_summary="Combine - +1%",
        )
    )
    assert middle.path is not None
    children = [str(e.path) for e in store.list_experiments() if e.pid == middle.id]
    broken = Path(middle.path)
    broken.write_bytes(broken.read_bytes() + b"\n\xe9t\xe9\n")
    result = kexp(repo, "validate")
    assert result.exit_code == 1, result.output
    errors = [line for line in result.output.splitlines() if ": error[" in line]
    assert len(errors) == 1, result.output
    assert str(broken.relative_to(repo)) in errors[0] and "invalid-utf8" in errors[0]
    assert "not in the store" not in result.output
    # Checking the files built on it alone says the same.
    alone = kexp(repo, "validate", *children)
    assert alone.exit_code == 0 and "not in the store" not in alone.output, alone.output
    # Every query says what is true of the steps below it: their parent is invalid.
    shown = kexp(repo, "top", "--json", "--fields", "id,cumulative_reason")
    assert "invalid-utf8" in shown.stderr, shown.stderr
    reasons = {r["id"]: r.get("cumulative_reason", "") for r in json.loads(shown.stdout)}
    below = [reasons[Path(c).name[:16]] for c in children]
    assert below == [f"parent {middle.id[:10]} is invalid (kexp validate says why)"], reasons


# --- kexp add: lists as --set takes them -------------------------------------------------------


def test_add_takes_comma_separated_tags_and_combines_as_update_set_does(
    repo: Path, store: Store
) -> None:
    """``kexp update --set tags=a,b`` makes two tags; ``kexp add --tag regs,cache`` made
    one tag 'regs,cache' that ``kexp list --tag regs`` never finds, and ``--combines
    A,B`` was refused as one bad id. Both read a list the same way now."""
    one = store.create_experiment(**softmax_fields(score=1.1, status="done"))
    two = store.create_experiment(**softmax_fields(score=1.2, status="done"))
    result = kexp(
        repo, "add", "--summary", "Combine both - +3%", "--score", "1.03",
        "--operator", OPERATOR, "--dtype", "fp32", "--env", "H100", "--pid", one.id[:10],
        "--measured-against", "parent", "--tag", "regs,cache", "--tag", "combo",
        "--combines", f"{one.id[:10]},{two.id[:10]}", "--json",
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    made = store.get_experiment(json.loads(result.stdout)["id"])
    assert made.tags == ["regs", "cache", "combo"]
    assert made.combines == [one.id, two.id]
    found = kexp(repo, "list", "--tag", "regs", "--json", "--fields", "id")
    assert [r["id"] for r in json.loads(found.stdout)] == [made.id]
    # The filter reads a list the same way: --tag regs,combo is --tag regs --tag combo.
    for command in ("list", "top"):
        both = kexp(repo, command, "--tag", "regs,combo", "--json", "--fields", "id")
        assert [r["id"] for r in json.loads(both.stdout)] == [made.id], both.output
        none = kexp(repo, command, "--tag", "regs,nothing", "--json", "--fields", "id")
        assert json.loads(none.stdout) == [], none.output


# --- kexp stats before the first step: what there is, said truly ------------------------------


def test_stats_with_a_control_alone_does_not_call_it_buggy_or_pending(
    repo: Path, store: Store, tmp_path: Path
) -> None:
    """The campaign starts with an A/A control (the skill's advice): ``kexp stats`` said
    "every experiment is buggy or pending" of a store holding one measured control."""
    base = write(tmp_path / "base.json", timings(1.0, 1))
    again = write(tmp_path / "again.json", timings(1.0, 2))
    control = softmax_fields(tags=["control"], change_summary="A/A - noise floor")
    record_iteration(store, baseline=base, candidate=again, **control)
    result = kexp(repo, "stats")
    assert result.exit_code == 0, result.output
    assert "buggy or pending" not in result.output
    assert "no best yet" in result.output and "controls" in result.output


# --- the second agent: a branch of its own ------------------------------------------------------


def test_sync_to_a_new_branch_counts_the_commits_the_remote_did_not_have(tmp_path: Path) -> None:
    """Agent A synced three iterations to main; agent B clones, records one, and syncs
    to its own new branch: one commit reached the remote, and kexp says so (it said
    "pushed 4 commit(s)", counting A's commits the remote holds already)."""
    from test_sync import clone, make_remote, record

    remote, base = make_remote(tmp_path)
    alice = clone(remote, tmp_path / "alice")
    for summary in ("Vectorize - +25%", "Unroll by 4 - +8%", "Shuffle - +12%"):
        record(alice, base, summary)
        assert kexp(alice, "sync").exit_code == 0
    bob = clone(remote, tmp_path / "bob", "kexp/bob")
    record(bob, base, "Two rows per warp - +9%")
    result = kexp(bob, "sync", "--branch", "kexp/bob", "--json")
    assert result.exit_code == 0, result.output
    new = int(git(bob, "rev-list", "--count", "kexp/bob", "--not", "origin/main"))
    assert new == 1
    assert json.loads(result.stdout)["commits_pushed"] == new


def test_context_after_a_timed_out_first_try_does_not_call_it_buggy_or_pending(
    repo: Path, store: Store
) -> None:
    """The first try on the kernel timed out (status timeout, score 0, as the skill's
    failure table says): the packet named it the "Current best" (0.0000x, a path to it
    reaching "-"), the code to build on. Nothing has a cumulative score: there is no
    best yet, and the packet says why without calling it buggy or pending."""
    store.create_experiment(
        **softmax_fields(score=0.0, status="timeout", change_summary="Autotune - timed out")
    )
    result = kexp(repo, "context", "--operator", "softmax", "--dtype", "fp32", "--env", "H100")
    assert result.exit_code == 0, result.output
    best = result.stdout.split("## Current best\n", 1)[1].split("\n\n", 1)[0]
    assert "buggy or pending" not in best and "measured nothing" in best, best
    assert "Autotune" not in best and "## Path to the best" not in result.stdout
    data = context(store, operator="softmax").data
    assert data["best"] is None and data["lineage"] == [], data


# --- a run that timed out: a failure to learn from, not a regression to 0 ----------------------


def test_a_timed_out_run_is_a_failure_not_a_regression_in_every_view(
    repo: Path, store: Store
) -> None:
    """The skill records a timed-out autotune as status timeout, score 0. Every view
    called it a regression ("0.0000 regression" in lessons, REGRESSED in stats, a
    related failure "0.0000x regression" in context): it measured nothing, so it is
    ``failed``, its own lesson group and column; a slower step stays a regression."""
    reference = store.create_experiment(
        **softmax_fields(score=1.25, status="done", measured_against="reference")
    )
    timed_out = store.create_experiment(
        **softmax_fields(pid=reference.id, score=0.0, status="timeout",
                         measured_against="parent",
                         change_summary="Autotune block size over 64..1024 - timed out")
    )  # fmt: skip
    slower = store.create_experiment(
        **softmax_fields(pid=reference.id, score=0.93, status="done",
                         measured_against="parent", change_summary="Stage through smem - -7%")
    )  # fmt: skip
    assert store.get_experiment(timed_out.id).outcome == "failed"
    assert store.get_experiment(slower.id).outcome == "regression"
    lessons = json.loads(kexp(repo, "lessons", "--json").stdout)
    assert [e["id"] for e in lessons["failed"]] == [timed_out.id]
    assert [e["id"] for e in lessons["regression"]] == [slower.id]
    counts = json.loads(kexp(repo, "stats", "--json").stdout)["by_outcome"]
    assert (counts["failed"], counts["regression"], counts["improvement"]) == (1, 1, 1)
    table = kexp(repo, "stats").output
    assert "FAILED" in table.splitlines()[2], table
    packet = context(store, operator="softmax").text
    failures = packet.split("## Related failures", 1)[1].split("##", 1)[0]
    assert f"{timed_out.id[:10]} failed (nothing measured)" in failures, packet
    listed = json.loads(kexp(repo, "list", "--outcome", "failed", "--json").stdout)
    assert [e["id"] for e in listed] == [timed_out.id]


# --- children measured against the reference: judged over their parent too ------------------


def test_a_reference_measured_child_within_noise_of_its_parent_is_not_the_new_best(
    repo: Path, store: Store, tmp_path: Path
) -> None:
    """The agent times every iteration against the operator's original code: the first
    change at 2.1x, then a child of it at 2.105x whose interval [2.0, 2.2] holds its
    parent's 2.1. Over the reference the child is far past 1, but over the code it was
    made on it changed nothing: it is marginal, and the parent stays the best in
    ``kexp top``, ``kexp show`` and the context packet. A child that really beats its
    parent (2.5x over the reference) is an improvement and the new best."""
    reference = write(tmp_path / "reference.json", timings(1.0, 1))
    first = write(tmp_path / "first.json", timings(1 / 2.1, 2))
    parent = record_iteration(
        store, baseline=reference, candidate=first, **softmax_fields(change_summary="Tile - +110%")
    )
    assert parent.outcome == "improvement"
    added = kexp(
        repo, "add", "--json", "--summary", "Unroll by 2 - +0.2%", "--score", "2.105",
        "--pid", parent.id, "--measured-against", "reference", "--operator", OPERATOR,
        "--dtype", "fp32", "--env", "H100, CUDA 12.4", "--description", "unroll",
    )  # fmt: skip
    assert added.exit_code == 0, added.output
    child = json.loads(added.stdout)["id"]
    ci = kexp(repo, "update", child[:10], "--set", "score_ci=[2.0, 2.2]", "--reason", "timed")
    assert ci.exit_code == 0, ci.output
    shown = json.loads(kexp(repo, "show", child[:10], "--json").stdout)
    assert shown["outcome"] == "marginal", shown
    assert store.get_experiment(child).outcome == "marginal"
    top = json.loads(kexp(repo, "top", "--json").stdout)
    assert top[0]["id"] == parent.id, [(e["id"], e["outcome"]) for e in top]
    packet = context(store, operator="softmax", output="json").data
    assert packet["best"]["id"] == parent.id
    # A child that beats its parent, timed against the reference too, is the new best.
    better = write(tmp_path / "better.json", timings(1 / 2.5, 3))
    best = record_iteration(
        store,
        baseline=reference,
        candidate=better,
        **softmax_fields(
            change_summary="Vector loads - +151% on the tile",
            pid=parent.id,
            measured_against="reference",
        ),
    )
    assert best.outcome == "improvement"
    top = json.loads(kexp(repo, "top", "--json").stdout)
    assert top[0]["id"] == best.id


def _judged(raw_result: str) -> tuple[str, str]:
    """The first line of a raw result and its **Overall** line (unwrapped)."""
    lines = unwrapped(raw_result).splitlines()
    return lines[0], lines[2]


def test_add_prints_the_parent_figure_a_reference_measured_step_is_judged_over(
    repo: Path, store: Store, tmp_path: Path
) -> None:
    """The agent's step on its 2.1x parent, timed against the original code: ``kexp add``
    printed "score 2.1020 [...]: marginal", naming no figure the 2.1x reads as marginal
    against. The line now names the parent and its cumulative score, and the step's
    speedup over it, that the outcome is judged on."""
    reference = write(tmp_path / "reference.json", timings(1.0, 1))
    parent = record_iteration(
        store,
        baseline=reference,
        candidate=write(tmp_path / "first.json", timings(1 / 2.1, 2)),
        **softmax_fields(change_summary="Tile - +110%"),
    )
    assert parent.cumulative_score is not None
    added = kexp(
        repo, "add", "--summary", "Unroll by 2 - +0.1%", "--pid", parent.id,
        "--measured-against", "reference",
        "--baseline", reference, "--candidate", write(tmp_path / "c.json", timings(1 / 2.102, 3)),
    )  # fmt: skip
    assert added.exit_code == 0, added.output
    child = store.get_experiment(added.stdout.split()[1])
    line = added.stdout.splitlines()[1]
    ratio = child.score / parent.cumulative_score
    said = f"; {ratio:.4f}x over parent {parent.id[:10]} ({parent.cumulative_score:.4f}x)"
    assert said in line and line.endswith(": marginal"), line


def test_a_reference_measured_childs_raw_result_judges_it_over_its_parent(
    repo: Path, store: Store, tmp_path: Path
) -> None:
    """The agent times a child of its 2.1x step against the original code again: 2.102x.
    kexp judged it marginal over its parent (not the new best), yet the raw result
    ``kexp add`` wrote began "Iteration 2 Results - SUCCESS" and its overall line said
    IMPROVEMENT: the file told the next reader the opposite of every view. Its first
    line now says the campaign's word, and the overall line both speedups; a root's
    raw result is as before, a child that beats its parent a success, one slower than
    its parent a regression (however far above the reference), and so is a round
    remeasured."""
    reference = write(tmp_path / "reference.json", timings(1.0, 1))
    parent = record_iteration(
        store,
        baseline=reference,
        candidate=write(tmp_path / "first.json", timings(1 / 2.1, 2)),
        **softmax_fields(change_summary="Tile - +110%"),
    )
    first, overall = _judged(parent.raw_result)
    assert first == "Iteration 1 Results - SUCCESS:" and overall.endswith("IMPROVEMENT"), overall
    assert "parent" not in overall
    added = kexp(
        repo, "add", "--summary", "Unroll by 2 - +0.1%", "--pid", parent.id[:10],
        "--measured-against", "reference", "--description", "unroll",
        "--baseline", reference, "--candidate", write(tmp_path / "c.json", timings(1 / 2.102, 3)),
    )  # fmt: skip
    assert added.exit_code == 0, added.output
    assert added.stdout.splitlines()[1].endswith(": marginal"), added.stdout
    child = store.get_experiment(added.stdout.split()[1])
    assert child.outcome == "marginal"
    first, overall = _judged(child.raw_result)
    assert first == "Iteration 2 Results - MARGINAL:", child.raw_result
    assert f"over parent {parent.id[:10]} ({parent.cumulative_score:.4f}x):" in overall, overall
    assert overall.endswith("% MARGINAL"), overall
    assert "IMPROVEMENT" not in child.raw_result
    # Remeasured, the pooled round is judged over the parent too.
    again = kexp(
        repo, "remeasure", child.id[:10],
        "--baseline", write(tmp_path / "r2.json", timings(1.0, 4)),
        "--candidate", write(tmp_path / "c2.json", timings(1 / 2.102, 5)),
    )  # fmt: skip
    assert again.exit_code == 0, again.output
    pooled = store.get_experiment(child.id)
    assert pooled.outcome == "marginal"
    assert "Round 2 pooled with round 1 Results - MARGINAL:" in pooled.raw_result
    assert "IMPROVEMENT" not in pooled.raw_result
    # Through the library: beating the parent is a success, falling below it a regression.
    for factor, words, outcome in (
        (2.5, ("SUCCESS:", "IMPROVEMENT"), "improvement"),
        (1.6, ("REGRESSION:", "REGRESSION"), "regression"),
    ):
        step = record_iteration(
            store,
            baseline=reference,
            candidate=timings(1 / factor, 6),
            # (each its own change: one summary twice on a parent is tried before, warned)
            **softmax_fields(
                pid=parent.id, measured_against="reference", change_summary=f"Variant {outcome}"
            ),
        )
        assert step.outcome == outcome
        first, overall = _judged(step.raw_result)
        assert first.endswith(f"Results - {words[0]}"), step.raw_result
        assert f"over parent {parent.id[:10]} (" in overall, overall
        assert overall.endswith(f"= {words[1]}") or overall.endswith(f" {words[1]}"), overall
    # A child measured against its parent (its code the baseline) is judged by its own
    # score, as before.
    over_parent = record_iteration(
        store,
        baseline=str(tmp_path / "first.json"),
        candidate=timings(1 / (2.1 * 1.2), 7),
        **softmax_fields(pid=parent.id, measured_against="parent"),
    )
    first, overall = _judged(over_parent.raw_result)
    assert first.endswith("SUCCESS:") and "parent" not in overall, over_parent.raw_result


# --- remeasuring a control: the noise floor does not move without a word ---------------------


def _noisy(factor: float, seed: int, spread: float, samples: int = 20) -> dict[str, list[float]]:
    """Timings in microseconds with a log-normal ``spread`` (0.3: about 30 %)."""
    rng = random.Random(seed)
    return {
        config: [round(base * factor * math.exp(rng.gauss(0, spread)), 5) for _ in range(samples)]
        for config, base in CONFIGS.items()
    }


def test_remeasuring_a_control_into_an_implausible_floor_is_warned_with_what_to_do(
    repo: Path, store: Store, tmp_path: Path
) -> None:
    """The agent's A/A control measured the noise floor at ±0.5 %; a later round of it,
    timed on a throttled clock, pools to an interval far wider than before (and one that
    can exclude 1): every step is now judged against a floor that moved. ``kexp
    remeasure`` says so in a warning naming the old and new floor and what to do; a
    round timed alike is pooled without a word. (The throttled round is longer than the
    two before it together: a round of fewer samples than 40 % of the pooled ones is set
    aside as load spikes, :data:`kexp.core.noise.SPIKES_HANDLED`, and moves no floor.)"""
    control = record_iteration(
        store,
        baseline=timings(1.0, 1, 10),
        candidate=timings(1.0, 2, 10),
        **softmax_fields(change_summary="A/A control - noise floor", tags=["control"]),
    )
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", "the control")
    alike = kexp(
        repo, "remeasure", control.id[:10],
        "--baseline", write(tmp_path / "b2.json", timings(1.0, 3, 10)),
        "--candidate", write(tmp_path / "c2.json", timings(1.0, 4, 10)),
    )  # fmt: skip
    assert alike.exit_code == 0, alike.output
    assert "warning" not in alike.stderr, alike.stderr
    git(repo, "commit", "-q", "-am", "the control's second round")
    before = store.get_experiment(control.id).score_ci
    throttled = kexp(
        repo, "remeasure", control.id[:10],
        "--baseline", write(tmp_path / "b3.json", _noisy(1.0, 5, 0.02, 40)),
        "--candidate", write(tmp_path / "c3.json", _noisy(1 / 2.2, 6, 0.5, 40)),
    )  # fmt: skip
    assert throttled.exit_code == 0, throttled.output
    after = store.get_experiment(control.id).score_ci
    assert math.log(after[1] / after[0]) > 4 * math.log(before[1] / before[0])
    lines = [line for line in throttled.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith("kexp: warning: control "), lines
    warned = lines[0]
    assert f"{before[0]:.4f}, {before[1]:.4f}" in warned and f"{after[0]:.4f}" in warned
    assert "times as wide as before" in warned and "git checkout -- " in warned, warned
    # The advice works: the round is dropped, the floor is the earlier one again.
    path = warned.split("git checkout -- ")[1].split(" ")[0]
    git(repo, "checkout", "--", path)
    assert store.get_experiment(control.id).score_ci == before


# --- remeasuring a step: its summary states the figure measured --------------------------------


def test_a_remeasured_steps_summary_states_the_pooled_score_not_the_first_rounds(
    repo: Path, store: Store, tmp_path: Path
) -> None:
    """The first round of a step ran on a lucky clock: 1.25x, and the agent wrote the
    summary ``Tile the loads - +25%``. Two more rounds pool to about 1.0x: ``kexp
    show``, ``kexp list`` and ``top`` show the summary with the pooled figure (the
    correction note says what it was), not the "+25%" nobody measured any more."""
    step = record_iteration(
        store,
        baseline=timings(1.0, 1),
        candidate=timings(1 / 1.25, 2),
        **softmax_fields(change_summary="Tile the loads - +25%"),
    )
    for seed in (3, 5):
        again = kexp(
            repo, "remeasure", step.id[:10],
            "--baseline", write(tmp_path / f"b{seed}.json", timings(1.0, seed)),
            "--candidate", write(tmp_path / f"c{seed}.json", timings(1.0, seed + 1)),
        )  # fmt: skip
        assert again.exit_code == 0, again.output
    pooled = store.get_experiment(step.id)
    assert 1.0 < pooled.score < 1.05, pooled.score
    figure = f"+{(pooled.score - 1) * 100:.0f}%"
    assert pooled.change_summary == f"Tile the loads - {figure}"
    shown = json.loads(kexp(repo, "show", step.id[:10], "--json").stdout)
    assert shown["change_summary"] == pooled.change_summary
    assert "Tile the loads - +25%" in shown["detailed_description"]  # the note says so
    assert figure in kexp(repo, "list").stdout and "+25%" not in kexp(repo, "list").stdout


# --- remeasure refused: the advice given works as written -------------------------------------


def _advice(error: str, command: str) -> list[str]:
    """The words of the ``kexp <command> ...`` an error advises, as a list of arguments
    (up to the first ``(`` or ``;``, or the end)."""
    start = error.index(f"kexp {command} ")
    words = re.split(r" \(|;", error[start:])[0].split()
    return words[2:]


def test_remeasuring_a_crashed_step_advises_commands_that_work(
    repo: Path, store: Store, tmp_path: Path
) -> None:
    """A step crashed (HIP error: score 0, buggy); the agent fixes the kernel and asks
    ``kexp remeasure`` of the crashed step. kexp refuses (there is nothing to pool with)
    and advises a command: run as written, its placeholders filled, it records the fixed
    code as a new step on the crashed one's parent (not a score pasted onto the crash,
    which would stay buggy). A run that timed out, and a step recorded with a hand-typed
    score, have no timings to pool either; the update each is advised works as written
    too (the timed-out one's says status done as well)."""
    parent = record_iteration(
        store, baseline=timings(1.0, 1), candidate=timings(1 / 1.2, 2),
        **softmax_fields(change_summary="Tile - +20%"),
    )  # fmt: skip
    crashed = store.create_experiment(
        **softmax_fields(
            change_summary="Fused pass - HIP error",
            pid=parent.id,
            measured_against="parent",
            score=0.0,
            is_buggy=True,
            status="failed",
            error_message="HIP error: an illegal memory access was encountered",
        )
    )
    base, cand = (
        write(tmp_path / "b.json", timings(1.0, 3)),
        write(tmp_path / "c.json", timings(0.9, 4)),
    )
    refused = kexp(repo, "remeasure", crashed.id[:10], "--baseline", base, "--candidate", cand)
    assert refused.exit_code == 2, refused.output
    lines = [line for line in refused.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith("kexp: error: "), refused.stderr
    assert "kexp add " in lines[0], lines[0]  # not a score pasted onto the crash
    advised = _advice(lines[0], "add")
    filled = {
        "TEXT": "Fused pass, index fixed - +11%",
        "OP": crashed.operator_sig,
        "DTYPE": crashed.dtype_sig,
        "ENV": crashed.env,
        "F": iter([base, cand]),
    }
    args = [next(filled["F"]) if w == "F" else filled.get(w, w) for w in advised]  # type: ignore[arg-type]
    followed = kexp(repo, "add", "--json", *args)
    assert followed.exit_code == 0, (advised, followed.output)
    fixed = store.get_experiment(json.loads(followed.stdout)["id"])
    assert fixed.pid == parent.id and fixed.outcome == "improvement", fixed
    assert fixed.operator_sig == OPERATOR
    assert store.get_experiment(crashed.id).outcome == "buggy"  # on record as it happened

    # A run that timed out, the same code later run to the end: what it measured goes on
    # the same record, as the update advised.
    timed_out = store.create_experiment(
        **softmax_fields(change_summary="Autotune - timeout after 600 s", score=0.0,
                         status="timeout", pid=parent.id, measured_against="parent")
    )  # fmt: skip
    refused = kexp(repo, "remeasure", timed_out.id[:10], "--baseline", base, "--candidate", cand)
    assert refused.exit_code == 2, refused.output
    advised = _advice(refused.stderr, "update")
    filled = {"score=SCORE": "score=1.04", "TEXT": "autotuned again with an 1800 s limit"}
    followed = kexp(repo, "update", *[filled.get(w, w) for w in advised])
    assert followed.exit_code == 0, (advised, followed.output)
    measured = store.get_experiment(timed_out.id)
    assert (measured.score, measured.status, measured.outcome) == (1.04, "done", "improvement")

    typed = store.create_experiment(
        **softmax_fields(change_summary="Vector loads - +5%", score=1.05, pid=parent.id,
                         measured_against="parent")
    )  # fmt: skip
    refused = kexp(repo, "remeasure", typed.id[:10], "--baseline", base, "--candidate", cand)
    assert refused.exit_code == 2, refused.output
    advised = _advice(refused.stderr, "update")
    filled = {"score=SCORE": "score=1.04", "TEXT": "timed again by hand"}
    followed = kexp(repo, "update", *[filled.get(w, w) for w in advised])
    assert followed.exit_code == 0, (advised, followed.output)
    assert store.get_experiment(typed.id).score == 1.04


# --- raw_result's "Iteration N": one answer, whatever the store is read with -------------------


def test_the_iteration_in_raw_result_does_not_depend_on_reading_other_branches(
    repo: Path, store: Store, tmp_path: Path
) -> None:
    """Another agent's branch holds two iterations on the kernel; this branch one. The
    agent records its next iteration from timings, with ``--all-refs`` (to be warned of
    a change the other agent tried) or without: ``raw_result`` (the predecessor's field,
    "Iteration N Results") says the same N either way."""
    add = ["add", "--json", "--operator", OPERATOR, "--dtype", "fp32", "--env", "H100"]
    git(repo, "checkout", "-q", "-b", "kexp/bob")
    for n in (1, 2):
        assert kexp(repo, *add, "--summary", f"Bob {n} - +1%", "--score", "1.01").exit_code == 0
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", "bob's iterations")
    git(repo, "checkout", "-q", "main")
    (repo / "experiments").mkdir(exist_ok=True)  # main has none committed yet
    tile = kexp(repo, *add, "--summary", "Tile - +1%", "--score", "1.01")
    assert tile.exit_code == 0, tile.output
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", "one iteration")
    base = write(tmp_path / "b.json", timings(1.0, 1))
    cand = write(tmp_path / "c.json", timings(0.9, 2))
    said = []
    for refs in ([], ["--all-refs"]):
        result = kexp(repo, *add, *refs, "--summary", "Unroll - +11%",
                      "--baseline", base, "--candidate", cand)  # fmt: skip
        assert result.exit_code == 0, result.output
        exp = store.get_experiment(json.loads(result.stdout)["id"])
        said.append(exp.raw_result.splitlines()[0])
        Path(exp.path or "").unlink()
    assert said[0] == said[1], said
    assert said[0].startswith("Iteration 2 Results"), said


def test_an_a_a_control_is_no_iteration_in_raw_result(
    repo: Path, store: Store, tmp_path: Path
) -> None:
    """The campaign starts with an A/A control, as the skill advises, then the agent's
    first step, each recorded from timings. ``raw_result`` (the predecessor's field)
    called the control "Iteration 1" and the first step "Iteration 2": a control
    measures the noise, not a step. The control's says it is the A/A control; the first
    step is iteration 1."""
    add = ["add", "--json", "--operator", OPERATOR, "--dtype", "fp32", "--env", "H100"]
    base = write(tmp_path / "b.json", timings(1.0, 1))
    same = write(tmp_path / "a.json", timings(1.0, 2))
    control = kexp(repo, *add, "--tag", "control", "--summary", "A/A - noise floor",
                   "--baseline", base, "--candidate", same)  # fmt: skip
    assert control.exit_code == 0, control.output
    cand = write(tmp_path / "c.json", timings(0.9, 3))
    step = kexp(repo, *add, "--summary", "Unroll - +11%", "--baseline", base, "--candidate", cand)
    assert step.exit_code == 0, step.output
    said = [
        store.get_experiment(json.loads(r.stdout)["id"]).raw_result.splitlines()[0]
        for r in (control, step)
    ]
    assert said[0].startswith("A/A control Results"), said
    assert said[1].startswith("Iteration 1 Results"), said


# --- a step on a parent: the parent's kernel, dtype and env unless it says otherwise -------------


def test_a_step_recorded_on_a_parent_takes_its_kernel_dtype_and_env_unless_given(
    repo: Path, store: Store
) -> None:
    """An agent records its next step with ``kexp add --pid`` and the measurement,
    without repeating the kernel: the step was recorded with no operator, dtype or env
    (no error), so it left the parent's campaign (``kexp top --operator``, context).
    It takes the parent's now, as ``kexp new --pid`` prefills them; those given win."""
    kernel = ["--operator", OPERATOR, "--dtype", "fp32", "--env", "H100, CUDA 12.4"]
    parent = kexp(repo, "add", "--json", *kernel, "--summary", "Tile - +5%", "--score", "1.05")
    parent_id = json.loads(parent.stdout)["id"]
    step = kexp(repo, "add", "--json", "--pid", parent_id[:10], "--measured-against", "parent",
                "--summary", "Unroll - +2%", "--score", "1.02")  # fmt: skip
    assert step.exit_code == 0, step.output
    made = store.get_experiment(json.loads(step.stdout)["id"])
    assert (made.operator_sig, made.dtype_sig, made.env) == (OPERATOR, "fp32", "H100, CUDA 12.4")
    assert made.id in [e.id for e in store.top_experiments(operator=OPERATOR)]
    other = kexp(repo, "add", "--json", "--pid", parent_id, "--measured-against", "parent",
                 "--dtype", "bf16", "--summary", "bf16 - +1%", "--score", "1.01")  # fmt: skip
    made = store.get_experiment(json.loads(other.stdout)["id"])
    assert (made.operator_sig, made.dtype_sig, made.env) == (OPERATOR, "bf16", "H100, CUDA 12.4")


def test_the_same_record_made_again_is_refused_and_the_store_keeps_one(
    repo: Path, store: Store, tmp_path: Path
) -> None:
    """An agent's record call is retried (a client timeout, a script run again): the
    same code change, base, env and timing files a second time. It was written (after a
    warning that read as if it was not), and the copy ranked first. Now the second call
    writes nothing and says, in one line, which experiment holds the measurement and
    how to measure it again; the library raises the same. Other timings of the same
    change are a new measurement: recorded, with the remeasure warning."""
    (repo / "kernel.cu").write_text("__global__ void k() { /* unrolled by 4 */ }\n")
    base = write(tmp_path / "base.json", timings(1.0, 1))
    cand = write(tmp_path / "cand.json", timings(0.9, 2))
    args = ["add", "--json", "--summary", "Unroll 4 - +11%", "--baseline", base,
            "--candidate", cand, "--measured-against", "reference", "--operator", OPERATOR,
            "--dtype", "fp32", "--env", "H100, CUDA 12.4", "--base-commit", "HEAD",
            "--diff-from-git"]  # fmt: skip
    first = kexp(repo, *args)
    assert first.exit_code == 0, first.output
    first_id = json.loads(first.stdout)["id"]

    again = kexp(repo, *args)
    assert again.exit_code != 0, again.output
    assert again.stderr.count("\n") == 1, again.stderr
    assert first_id in again.stderr and "kexp remeasure" in again.stderr, again.stderr
    assert [e.id for e in store.list_experiments()] == [first_id]
    with pytest.raises(ExperimentExistsError, match=first_id):
        record_iteration(
            store, baseline=base, candidate=cand, base_commit=git(repo, "rev-parse", "HEAD"),
            code_change=store.get_experiment(first_id).code_change,
            **softmax_fields(change_summary="Unroll 4 - +11%", measured_against="reference"),
        )  # fmt: skip
    assert len(store.list_experiments()) == 1

    other = write(tmp_path / "cand2.json", timings(0.9, 3))
    new = kexp(repo, *args[:7], other, *args[8:])
    assert new.exit_code == 0, new.output
    assert "same measurement again" in new.stderr, new.stderr
    assert len(store.list_experiments()) == 2


def test_a_retry_without_a_code_change_is_refused_and_the_store_keeps_one(
    repo: Path, store: Store, tmp_path: Path
) -> None:
    """An agent times a launch setting on its parent's code (no diff: the kernel file is
    unchanged), records it, its call times out and it runs the same ``kexp add`` again:
    the same timing files, operator, dtype, env and parent. It was recorded twice (the
    copy a second experiment of the campaign). Now the second call writes nothing and
    says, in one line, which experiment holds the measurement and how to measure it
    again; a new measurement of the same setting is recorded."""
    kernel = ["--operator", OPERATOR, "--dtype", "fp32", "--env", "H100, CUDA 12.4"]
    parent = kexp(repo, "add", "--json", *kernel, "--summary", "Tile - +5%", "--score", "1.05")
    parent_id = json.loads(parent.stdout)["id"]
    base = write(tmp_path / "base.json", timings(1.0, 1))
    cand = write(tmp_path / "cand.json", timings(0.9, 2))
    args = ["add", "--json", "--summary", "256 threads - +11%", "--pid", parent_id,
            "--measured-against", "parent", *kernel,
            "--baseline", base, "--candidate", cand]  # fmt: skip
    first = kexp(repo, *args)
    assert first.exit_code == 0, first.output
    first_id = json.loads(first.stdout)["id"]

    again = kexp(repo, *args)
    assert again.exit_code != 0, again.output
    assert again.stderr.count("\n") == 1, again.stderr
    assert first_id in again.stderr and "kexp remeasure" in again.stderr, again.stderr
    assert sorted(e.id for e in store.list_experiments()) == sorted([parent_id, first_id])

    other = write(tmp_path / "cand2.json", timings(0.9, 3))
    new = kexp(repo, *args[:-1], other)
    assert new.exit_code == 0, new.output
    assert len(store.list_experiments()) == 3


def test_a_coarse_second_measurement_alike_is_recorded_not_refused_as_a_copy(
    repo: Path, store: Store, tmp_path: Path
) -> None:
    """Bob measures Alice's change again with a coarse timer, three samples a side, and
    the values come out as hers in another order: a real second measurement, recorded
    (with the remeasure warning), not refused as the same record made again."""
    (repo / "kernel.cu").write_text("__global__ void k() { /* unrolled by 4 */ }\n")
    first = {"n": [[20, 21, 20], [19, 19, 20]]}
    again = {"n": [[20, 20, 21], [19, 20, 19]]}
    made = []
    for name, sides in (("a", first), ("b", again)):
        base = write(tmp_path / f"{name}-base.json", {"n": sides["n"][0]})
        cand = write(tmp_path / f"{name}-cand.json", {"n": sides["n"][1]})
        done = kexp(repo, "add", "--json", "--summary", "Unroll 4 - +3%", "--baseline", base,
                    "--candidate", cand, "--measured-against", "reference", "--operator",
                    OPERATOR, "--dtype", "fp32", "--env", "H100", "--base-commit", "HEAD",
                    "--diff-from-git")  # fmt: skip
        assert done.exit_code == 0, done.output
        made.append(json.loads(done.stdout)["id"])
    assert len(set(made)) == 2 and len(store.list_experiments()) == 2
