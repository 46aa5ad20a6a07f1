"""A step within the drift the A/A control of its env measured is within noise.

A newcomer timed one function three times with pytest-benchmark (runs a, b, c). The A/A
control (a vs b) scored 0.978 [0.978, 0.979]: kexp warned that the setup is biased. A
step of no code change (a vs c) was then recorded a ``regression``, 0.977 [0.976,
0.978]: an interval covers the noise within one run, and pytest-benchmark times one
side a run, so the drift between runs was in the score and in no interval. Now the
newest control of the env judges its steps (``Settings.control_drift_reach`` times its
drift): such a step is ``marginal`` wherever the outcome is derived, and says why; a
step timed so on an env without a control is told its interval covers one run only.

Timing files are pytest-benchmark's JSON (a real run's, its raw ``data`` set to fixed
timings, :func:`timing_files.write`): each run's samples are 0.2 % CV around a time
the run sets, so every verdict is decided by the runs' drift, never by chance.
"""

from __future__ import annotations

import json
import random
from pathlib import Path
from typing import Any

import pytest
from conftest import run_kexp
from test_noise_rounds import git, kexp_ok, warnings_of
from timing_files import write

from kexp import Store
from kexp.core.campaign import derive, derive_for
from kexp.storage.reader import StoreReader

#: Each configuration's time (seconds) in a run without drift.
CONFIGS = {"n8": 2.0e-6, "n64": 8.0e-6}
#: The fields of every step: the same operator and dtype.
KERNEL = ("--operator", "bench.py: sum", "--dtype", "fp32")


def run(folder: Path, template: dict[str, Any], name: str, factor: float, seed: int) -> str:
    """One pytest-benchmark run's file: every time ``factor`` times the configuration's
    (the run's drift, or a faster kernel), 15 samples of 0.2 % CV."""
    rng = random.Random(seed)
    timings = {
        config: [seconds * factor * rng.lognormvariate(0, 0.002) for _ in range(15)]
        for config, seconds in CONFIGS.items()
    }
    return write(folder / f"{name}.json", template, timings)


def runs(folder: Path, template: dict[str, Any]) -> dict[str, str]:
    """Run a ran 2.5 % fast (the drift), b, c and e not; d timed a kernel 1.15x faster."""
    return {
        "a": run(folder, template, "a", 0.975, 1),
        "b": run(folder, template, "b", 1.0, 2),
        "c": run(folder, template, "c", 1.0, 3),
        "d": run(folder, template, "d", 1.0 / 1.15, 4),
        "e": run(folder, template, "e", 1.0, 5),
    }


def add(repo: Path, summary: str, env: str, base: str, cand: str, *more: str) -> Any:
    """``kexp add`` of a step timed by ``base`` and ``cand``: its id, and the run."""
    done = kexp_ok(
        repo, "add", "--summary", summary, *KERNEL, "--env", env,
        "--baseline", base, "--candidate", cand, *more, "--json",
    )  # fmt: skip
    return json.loads(done.stdout)["id"], done


def outcomes(repo: Path, *args: str) -> dict[str, str]:
    """Each experiment's outcome as ``kexp list`` gives it."""
    listed = json.loads(kexp_ok(repo, "list", "--json", *args).stdout)
    return {e["id"]: e["outcome"] for e in listed}


def test_a_step_within_the_controls_drift_is_marginal_everywhere(
    repo: Path, tmp_path: Path, bench_json: dict[str, Any]
) -> None:
    """The control (a vs b) drifted 2.5 %; the step of no change (a vs c), whose narrow
    interval leaves out 1 by as much, was a regression. Now it is marginal in every
    read (list, its filter, show, stats, tree, the Python API) with the reason said, and
    the record says so; a 1.15x step on the env stays an improvement, and the same
    drift on an env without a control is not judged by this one."""
    f = runs(tmp_path, bench_json)
    control, _ = add(repo, "A/A same code", "cpu test", f["a"], f["b"], "--tag", "control")
    same, done = add(repo, "no change at all", "cpu test", f["a"], f["c"])
    faster, _ = add(repo, "unrolled - faster", "cpu test", f["a"], f["d"])
    elsewhere, _ = add(repo, "no change elsewhere", "laptop", f["a"], f["c"])

    store = Store(repo)
    exp = store.get_experiment(same)
    high = exp.score_ci[1]
    assert high < 0.99  # the interval leaves out 1: once a regression
    assert exp.outcome == "marginal"
    assert "within the A/A control" in exp.derived.drift
    assert "'cpu test'" in exp.derived.drift
    said = " ".join(warnings_of(done))
    assert "within the A/A control" in said and "marginal" in said
    printed = json.loads(done.stdout)
    assert printed["outcome"] == "marginal"
    assert printed["outcome_reason"] == exp.derived.drift

    listed = outcomes(repo)
    assert listed[same] == "marginal"
    assert listed[faster] == "improvement"
    assert listed[elsewhere] == "regression"
    assert listed[control] == "control"
    assert same not in outcomes(repo, "--outcome", "regression")
    assert same in outcomes(repo, "--outcome", "marginal")
    shown = json.loads(kexp_ok(repo, "show", same, "--json").stdout)
    assert shown["outcome"] == "marginal"
    stats = kexp_ok(repo, "stats", "--env", "cpu test", "--json").stdout
    assert '"regression": 1' not in stats.replace(" ", "")
    tree = json.loads(kexp_ok(repo, "tree", same, "--json").stdout)
    assert '"outcome": "marginal"' in json.dumps(tree)
    assert '"outcome": "regression"' not in json.dumps(tree)


def test_a_record_is_judged_by_the_controls_its_read_before_the_write_found(
    repo: Path, tmp_path: Path, bench_json: dict[str, Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The record's answer (marginal: within the control's drift) comes of the controls
    the read before the write found: the store is not searched for them again."""
    f = runs(tmp_path, bench_json)
    add(repo, "A/A same code", "cpu test", f["a"], f["b"], "--tag", "control")
    searched: list[str] = []

    def control_rows(self: StoreReader) -> list[Any]:
        searched.append("again")
        return []

    monkeypatch.setattr(StoreReader, "control_rows", control_rows)
    same, done = add(repo, "no change at all", "cpu test", f["a"], f["c"])
    assert json.loads(done.stdout)["outcome"] == "marginal"
    assert searched == []
    # A step on it, timed against its code (c): its parent's kernel read, nothing derived
    # of the parent.
    _, done = add(repo, "unrolled on it", "cpu test", f["c"], f["d"], "--pid", same)
    assert json.loads(done.stdout)["outcome"] == "improvement"
    assert searched == []
    # Its code timed again (e): whether the baseline is the parent's code is told by the
    # parent's own timings, nothing derived of it.
    _, done = add(repo, "unrolled again on it", "cpu test", f["e"], f["d"], "--pid", same)
    assert "baseline" not in done.stderr, done.stderr
    assert searched == []


def test_a_review_judges_the_step_by_the_control_on_the_base(
    repo: Path, tmp_path: Path, bench_json: dict[str, Any]
) -> None:
    """The control is committed on the base, the step added on the branch: the review
    (which derives what the change touches and what it depends on) calls the step
    marginal, as the store does, not a regression."""
    f = runs(tmp_path, bench_json)
    add(repo, "A/A same code", "cpu test", f["a"], f["b"], "--tag", "control")
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", "the control")
    git(repo, "tag", "base")
    same, _ = add(repo, "no change at all", "cpu test", f["a"], f["c"])
    review = json.loads(kexp_ok(repo, "review", "base", "--json").stdout)
    text = json.dumps(review)
    assert same in text
    assert '"outcome": "marginal"' in text
    assert '"outcome": "regression"' not in text


def test_derived_over_a_part_is_derived_over_the_whole(
    repo: Path, tmp_path: Path, bench_json: dict[str, Any]
) -> None:
    """What is derived of a step over it and what it depends on (a review, a read
    across refs) is what the whole store gives it: its env's control is taken in."""
    f = runs(tmp_path, bench_json)
    add(repo, "A/A same code", "cpu test", f["a"], f["b"], "--tag", "control")
    same, _ = add(repo, "no change at all", "cpu test", f["a"], f["c"])
    rows = Store(repo).found().rows
    wanted = [row for row in rows if row.id == same]
    whole, part = derive(rows), derive_for(rows, wanted)
    assert whole[same] == part[same]
    assert whole[same].outcome == "marginal"


def test_a_step_timed_a_side_a_run_without_a_control_says_its_interval_is_one_run(
    repo: Path, tmp_path: Path, bench_json: dict[str, Any]
) -> None:
    """pytest-benchmark times one side a run: with no control on the env, the step's
    narrow interval (a regression, a vs c) is told it covers one run only, and how to
    measure the drift; once a control is recorded, the step is judged by it instead."""
    f = runs(tmp_path, bench_json)
    first, done = add(repo, "no change at all", "cpu test", f["a"], f["c"])
    said = [line for line in warnings_of(done) if first in line]
    assert len(said) == 1
    assert "one pytest-benchmark run of each side" in said[0]
    assert 'kexp add --summary "A/A" --tag control' in said[0]
    assert f"kexp remeasure {first}" in said[0]
    # A step 1.15x faster clears any common drift (5 %): nothing to tell it.
    clear, done = add(repo, "tile 64", "cpu test", f["b"], f["d"])
    assert not [line for line in warnings_of(done) if clear in line], warnings_of(done)

    add(repo, "A/A same code", "cpu test", f["a"], f["b"], "--tag", "control")
    _, again = add(repo, "no change again", "cpu test", f["a"], f["e"])
    told = " ".join(warnings_of(again))
    assert "one pytest-benchmark run" not in told
    assert "within the A/A control" in told
    assert outcomes(repo)[first] == "marginal"  # judged by the control recorded since


def test_a_control_timed_by_another_clock_judges_no_step_in_the_store_or_a_review(
    repo: Path, tmp_path: Path, bench_json: dict[str, Any]
) -> None:
    """The env's only control was timed by do_bench (so its protocol says), the step
    by pytest-benchmark's wall clock: the control's drift is not the step's tool's, so
    the step stays a regression, in the store and in a review alike."""
    f = runs(tmp_path, bench_json)
    add(
        repo, "A/A same code", "cpu test", f["a"], f["b"],
        "--tag", "control", "--protocol", "timer=do_bench",
    )  # fmt: skip
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", "the control")
    git(repo, "tag", "base")
    same, _ = add(repo, "no change at all", "cpu test", f["a"], f["c"])
    assert outcomes(repo)[same] == "regression"
    text = json.dumps(json.loads(kexp_ok(repo, "review", "base", "--json").stdout))
    assert '"outcome": "regression"' in text
    assert '"outcome": "marginal"' not in text


def test_a_review_of_a_control_alone_says_it_turned_the_best_marginal(
    repo: Path, tmp_path: Path, bench_json: dict[str, Any]
) -> None:
    """A step on main recorded an improvement (b vs a: the 2.5 % drift); a branch adds
    only the A/A control that finds it within twice its drift. The review said the best
    changed "by the corrections or removals here" (there are none) and its JSON gave no
    reason. Now both name the control added here, the step and its new outcome; and
    ``kexp add`` of the control says in one line which steps it turned marginal."""
    f = runs(tmp_path, bench_json)
    step, _ = add(repo, "no change at all", "cpu test", f["b"], f["a"])
    assert outcomes(repo)[step] == "improvement"
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", "a step")
    git(repo, "tag", "base")
    control, done = add(repo, "A/A same code", "cpu test", f["a"], f["b"], "--tag", "control")
    said = [line for line in warnings_of(done) if step in line]
    assert len(said) == 1, warnings_of(done)
    assert "marginal now" in said[0] and control in said[0], said[0]
    assert outcomes(repo)[step] == "marginal"

    text = kexp_ok(repo, "review", "base").stdout
    (line,) = [line for line in text.splitlines() if "Best changed" in line]
    assert "corrections or removals" not in line, line
    assert f"A/A control `{control}` added here" in line, line
    assert step in line and "marginal" in line and "drift" in line, line
    (change,) = json.loads(kexp_ok(repo, "review", "base", "--json").stdout)["summary"][
        "best_changes"
    ]
    assert change["before_id"] == step and change["after_id"] is None
    assert change["control_id"] == control and "added here" in change["reason"]
    (judged,) = change["judged_by_control"]
    assert judged["id"] == step and judged["outcome"] == "marginal"
    assert "within the A/A control" in judged["drift"]


def test_lessons_prints_the_noise_floor_to_four_decimals_in_80_columns(
    repo: Path, tmp_path: Path, bench_json: dict[str, Any]
) -> None:
    """``kexp lessons``' noise floor printed 3 decimals (1.031 [1.029, 1.033]) where
    every other view prints 4, and a biased control's line ran past 80 columns."""
    f = runs(tmp_path, bench_json)
    control, _ = add(repo, "A/A same code", "cpu test", f["a"], f["b"], "--tag", "control")
    exp = Store(repo).get_experiment(control)
    low, high = exp.score_ci
    printed = run_kexp("lessons", cwd=repo, env={"COLUMNS": "80"}, process=True).stdout
    floor = f"A/A on this env: {exp.score:.4f} [{low:.4f}, {high:.4f}]"
    assert printed.startswith(floor), printed
    assert all(len(line) <= 80 for line in printed.splitlines()), printed
    assert "biased" in printed and control[:10] in printed.replace("\n    ", " ")


def test_a_lucky_control_does_not_switch_the_rule_off_for_its_env(
    repo: Path, tmp_path: Path, bench_json: dict[str, Any]
) -> None:
    """The env's first A/A control drifted 2.5 % (a vs b); a second one, timed again,
    was lucky (b vs e: no drift). The step of no change (a vs c) was judged by the
    newest alone, a regression again. Now the largest drift of the env's recent
    controls judges it: marginal, and the reason names the controls it read."""
    f = runs(tmp_path, bench_json)
    drifted, _ = add(repo, "A/A same code", "cpu test", f["a"], f["b"], "--tag", "control")
    lucky, _ = add(repo, "A/A again", "cpu test", f["b"], f["e"], "--tag", "control")
    same, done = add(repo, "no change at all", "cpu test", f["a"], f["c"])
    assert outcomes(repo)[same] == "marginal"
    reason = Store(repo).get_experiment(same).derived.drift
    assert drifted[:10] in reason and lucky[:10] in reason, reason
    said = " ".join(warnings_of(done))
    assert drifted[:10] in said and lucky[:10] in said, said
    rows = Store(repo).found().rows
    part = derive_for(rows, [row for row in rows if row.id == same])
    assert part[same] == derive(rows)[same]
    # The noise floor lessons and context show is the control that judges, not the
    # lucky newest one (they once disagreed with the rule).
    floor = kexp_ok(repo, "lessons").stdout.split("\n\n", 1)[0]  # the noise floors
    assert f"control {drifted[:10]}" in floor and lucky[:10] not in floor, floor
    packet = json.loads(kexp_ok(repo, "context", "--operator", "bench.py: sum", "--json").stdout)
    assert packet["context"]["noise_floor"]["id"] == drifted, packet["context"]


def test_a_review_names_every_step_a_control_demotes_not_only_the_best(
    repo: Path, tmp_path: Path, bench_json: dict[str, Any]
) -> None:
    """On main, a step 1.15x faster (the campaign's best) and a step of no change that
    recorded an improvement (b vs a: the 2.5 % drift). A branch adds the A/A control
    that finds the second within its drift: it is marginal now, yet the review said
    nothing of it (only a control demoting the best got a headline). Now a headline
    and the JSON's ``demoted_by_control`` name the control and the step."""
    f = runs(tmp_path, bench_json)
    best, _ = add(repo, "unrolled - faster", "cpu test", f["a"], f["d"])
    step, _ = add(repo, "no change at all", "cpu test", f["b"], f["a"])
    assert outcomes(repo)[step] == "improvement"
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", "two steps")
    git(repo, "tag", "base")
    control, _ = add(repo, "A/A same code", "cpu test", f["a"], f["b"], "--tag", "control")
    assert outcomes(repo)[step] == "marginal" and outcomes(repo)[best] == "improvement"

    text = kexp_ok(repo, "review", "base").stdout
    assert "Best changed" not in text
    (line,) = [line for line in text.splitlines() if step in line and control in line]
    assert "added here" in line and "was improvement" in line and "marginal" in line, line
    assert best not in line, line
    summary = json.loads(kexp_ok(repo, "review", "base", "--json").stdout)["summary"]
    (demoted,) = summary["demoted_by_control"]
    assert demoted["control_id"] == control and demoted["how"] == "added"
    (judged,) = demoted["steps"]
    assert judged["id"] == step and judged["was"] == "improvement"
    assert judged["outcome"] == "marginal" and "within the A/A control" in judged["drift"]


def test_a_pytest_benchmark_control_is_told_the_drift_it_measures_not_to_fix_it(
    repo: Path, tmp_path: Path, bench_json: dict[str, Any]
) -> None:
    """The A/A of two pytest-benchmark runs (a 2.5 % drift, its interval leaving out 1)
    is what docs/timings.md asks for: the record says the drift between the runs and
    the reach it gives the env's steps (trial J: it was told its setup is biased, to fix
    it and time the A/A again, which the tool, one side a run, cannot)."""
    f = runs(tmp_path, bench_json)
    control, done = add(repo, "A/A same code", "cpu test", f["a"], f["b"], "--tag", "control")
    drift = 1 / Store(repo).get_experiment(control).score  # run a ran 2.5 % fast
    (said,) = [line for line in warnings_of(done) if "warning: control" in line]
    assert f"drifted {(drift - 1) * 100:.1f} % apart" in said, said
    assert "not a biased setup" in said and "fix it" not in said, said
    assert f"within {(drift**2 - 1) * 100:.1f} % of 1" in said, said
