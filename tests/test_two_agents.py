"""Two agents on two clones of one bare remote, each on a branch of its own, as the
README's "Many machines at once" has them work: what one reads of the other's work
(``--all-refs``) says what it is, and what it advises can be done.

The truth is what git and the files hold, never kexp's own report.
"""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest
from conftest import git, run_kexp
from test_advice_followed import DIFF, OPERATOR, follow
from test_sync import clone, make_remote, record

from kexp import Store, ValidationError
from kexp.storage.sync import sync


def commit(root: Path, message: str, when: str) -> None:
    """Commit the store's files at a given time (the order of the two agents' commits
    decides which of two diverged versions is shown)."""
    git(root, "add", "experiments")
    dated = {"GIT_COMMITTER_DATE": when, "GIT_AUTHOR_DATE": when}
    subprocess.run(["git", "commit", "-q", "-m", message], cwd=root, check=True,
                   env={**os.environ, **dated})  # fmt: skip


def softmax(root: Path, base: str, summary: str, **fields: object) -> str:
    fields = {"operator_sig": OPERATOR, "dtype_sig": "fp32", "env": "H100", **fields}
    return record(root, base, summary, **fields).id


def test_a_version_changed_on_two_branches_is_said_diverged_never_older(tmp_path: Path) -> None:
    """Alice remeasures X on her branch while Bob retags it on main, both after their
    commits parted: Bob's (the later commit's) is shown, and every view says the other
    is a diverged version, not an older one."""
    remote, base = make_remote(tmp_path)
    alice = clone(remote, tmp_path / "alice")
    x = softmax(alice, base, "Vectorize loads with float4 - +10%", score=1.1026)
    softmax(alice, base, "Unroll row loop by 4 - +2%", score=1.02)
    sync(Store(alice))
    bob = clone(remote, tmp_path / "bob")
    git(alice, "checkout", "-q", "-b", "kexp/alice")
    Store(alice).update_experiment(x, score=1.0888)
    commit(alice, "remeasured", "2026-01-01T00:00:00Z")
    git(alice, "push", "-q", "origin", "kexp/alice")
    Store(bob).update_experiment(x, tags=["vectorize", "float4"])
    commit(bob, "retagged", "2026-02-01T00:00:00Z")
    git(bob, "push", "-q", "origin", "main")
    git(bob, "fetch", "-q")
    # The truth: both changed X since their merge base.
    assert git(bob, "diff", "--stat", "origin/main...origin/kexp/alice", "--", "experiments")
    assert git(bob, "diff", "--stat", "origin/kexp/alice...origin/main", "--", "experiments")

    for command in ("top", "list"):
        shown = run_kexp(command, "--all-refs", cwd=bob)
        assert shown.returncode == 0, shown.stderr
        (line,) = [line for line in shown.stdout.splitlines() if x[:10] in line]
        assert "1.1026" in line and "older" not in line and "diverged" in line
        data = json.loads(run_kexp(command, "--all-refs", "--json", cwd=bob).stdout)
        (found,) = [r for r in data if r["id"] == x]
        assert found["diverged"] and found["other_versions"] == ["origin/kexp/alice"]
        assert "older" not in found["note"]
    shown = run_kexp("show", x[:10], "--all-refs", cwd=bob)
    assert "both changed since their commits parted" in shown.stdout

    # The one consult call builds on Bob's version and says there is another.
    packet = run_kexp("context", "--operator", "softmax", "--all-refs", cwd=bob)
    assert packet.returncode == 0, packet.stderr
    best = packet.stdout.split("## Current best", 1)[1].split("##", 1)[0]
    assert x[:10] in best and "diverged" in best and "origin/kexp/alice" in best
    data = json.loads(
        run_kexp("context", "--operator", "softmax", "--all-refs", "--json", cwd=bob).stdout
    )
    assert data["best"]["id"] == x and data["best"]["other_versions"] == ["origin/kexp/alice"]
    # Read without refs, nothing is said of other places but what was not read there.
    plain = run_kexp("context", "--operator", "softmax", cwd=bob)
    elsewhere = [line for line in plain.stdout.splitlines() if "origin/" in line]
    assert "diverged" not in plain.stdout and len(elsewhere) == 1, plain.stdout
    assert elsewhere[0].startswith("not read: 1 experiment file(s)"), elsewhere


def test_an_experiment_on_another_agents_branch_is_named_with_where_it_is(
    tmp_path: Path,
) -> None:
    """Bob's consult names Alice's experiment as the best to build on; a write naming
    it (its pid, a remeasure) says which branch holds it and how to bring it in (its
    file copied, not a merge of her branch), and after that the same write succeeds."""
    remote, base = make_remote(tmp_path)
    alice, bob = clone(remote, tmp_path / "alice"), clone(remote, tmp_path / "bob")
    hers = softmax(alice, base, "Vectorize loads with float4 - +10%", score=1.10,
                   code_change=DIFF)  # fmt: skip
    sync(Store(alice), branch="kexp/alice")
    git(bob, "fetch", "-q")
    packet = json.loads(
        run_kexp("context", "--operator", "softmax", "--all-refs", "--json", cwd=bob).stdout
    )
    assert packet["best"]["id"] == hers  # the advice: build on it

    child = ["add", "--pid", hers[:10], "--summary", "Unroll by 4 on float4 - +2%",
             "--score", "1.02", "--operator", OPERATOR, "--dtype", "fp32", "--env", "H100",
             "--base-commit", base]  # fmt: skip
    for refs in ((), ("--all-refs",)):
        refused = run_kexp(*child, *refs, cwd=bob)
        assert refused.returncode != 0 and not Store(bob).list_experiments()
        assert "origin/kexp/alice" in refused.stderr, refused.stderr
        assert "git restore --source origin/kexp/alice -- " in refused.stderr
        assert "git merge" not in refused.stderr
    with pytest.raises(ValidationError) as refused_in_python:  # the library says it too
        record(bob, base, "Unroll by 4 on float4 - +2%", pid=hers, operator_sig=OPERATOR)
    problems = refused_in_python.value.problems
    (problem,) = [p for p in problems if p.code == "dangling-pid"]
    assert "restore --source origin/kexp/alice -- " in problem.hint
    timings = tmp_path / "round.csv"
    timings.write_text("config,baseline,candidate\nr64,10.0,9.1\nr64,10.1,9.0\nr64,9.9,9.2\n")
    again = run_kexp("remeasure", hers[:10], "--table", str(timings), cwd=bob)
    assert again.returncode != 0 and "git restore --source origin/kexp/alice" in again.stderr

    # The tried-before warning of the same measurement again names the merge too.
    (tmp_path / "change.diff").write_text(DIFF)
    same = ["add", "--summary", "Vectorize loads, again - +9%", "--score", "1.09",
            "--operator", OPERATOR, "--dtype", "fp32", "--env", "H100",
            "--base-commit", base, "--diff-file", str(tmp_path / "change.diff")]  # fmt: skip
    warned = run_kexp(*same, "--all-refs", cwd=bob)
    assert warned.returncode == 0, warned.stderr
    (line,) = [line for line in warned.stderr.splitlines() if f"kexp remeasure {hers}" in line]
    assert "git restore --source origin/kexp/alice -- " in line
    Store(bob).delete_experiment(json.loads(run_kexp("list", "--json", cwd=bob).stdout)[0]["id"])

    # Following the advice, as printed, works.
    follow(refused.stderr, bob)
    made = run_kexp(*child, "--json", cwd=bob)
    assert made.returncode == 0, made.stderr
    assert Store(bob).get_experiment(json.loads(made.stdout)["id"]).pid == hers


def test_stats_counts_controls_apart_as_context_does(tmp_path: Path) -> None:
    """An A/A control (tag ``control``) is the noise floor, never an outcome: ``kexp
    stats`` counts it in a column of its own, and its outcome counts agree with the
    consult's."""
    remote, base = make_remote(tmp_path)
    alice, bob = clone(remote, tmp_path / "alice"), clone(remote, tmp_path / "bob")
    first = softmax(alice, base, "Vectorize loads with float4 - +10%", score=1.10)
    softmax(alice, base, "Unroll row loop by 4 - +2%", score=1.02, pid=first,
            measured_against="parent")  # fmt: skip
    softmax(alice, base, "Shared memory staging - -5%", score=0.95, pid=first,
            measured_against="parent")  # fmt: skip
    sync(Store(alice), branch="kexp/alice")
    # (a drift of 0.4 %: the steps of the env lie beyond twice it)
    softmax(bob, base, "A/A control run on H100", score=1.004, tags=["control"])
    git(bob, "fetch", "-q")

    counted = json.loads(run_kexp("stats", "--all-refs", "--json", cwd=bob).stdout)
    packet = json.loads(
        run_kexp("context", "--operator", "softmax", "--all-refs", "--json", cwd=bob).stdout
    )["context"]
    here = counted["by_operator"][OPERATOR]
    assert here["improvement"] == packet["improved_here"] == 2
    assert here["regression"] == 1 and here["marginal"] == 0
    assert here["control"] == counted["by_outcome"]["control"] == 1
    assert here["total"] == counted["total"] == packet["experiments_here"] + 1 == 4
    table = run_kexp("stats", "--all-refs", cwd=bob, env={"COLUMNS": "200"})
    header, row = table.stdout.splitlines()[2:4]
    cells = dict(zip(header.split(), row.split()[-len(header.split()) :], strict=True))
    assert (cells["TOTAL"], cells["IMPROVED"], cells["CONTROL"]) == ("4", "2", "1")


def test_the_listing_label_of_an_older_version_still_says_older(tmp_path: Path) -> None:
    """A correction made on one branch only is newer than what the fork holds: the
    listing says the other place holds an older version."""
    remote, base = make_remote(tmp_path)
    alice = clone(remote, tmp_path / "alice")
    x = softmax(alice, base, "Vectorize loads with float4 - +10%", score=1.10)
    sync(Store(alice))
    git(alice, "checkout", "-q", "-b", "kexp/alice")
    Store(alice).update_experiment(x, score=1.0888)
    commit(alice, "remeasured", "2026-01-01T00:00:00Z")
    git(alice, "push", "-q", "origin", "kexp/alice")
    git(alice, "checkout", "-q", "main")
    shown = run_kexp("list", "--all-refs", cwd=alice)
    (line,) = [line for line in shown.stdout.splitlines() if x[:10] in line]
    assert "1.0888" in line and "older elsewhere" in line and "diverged" not in line


def test_an_uncommitted_edit_beside_a_teammates_correction_is_said_diverged(
    tmp_path: Path,
) -> None:
    """Alice publishes X to her side branch; Bob takes it, corrects it and publishes his
    own branch; Alice then edits X in her working tree (a tag) and fetches. Her edit is
    the version read, but Bob's correction is no older version: it changed what Alice
    never had, so every view says the versions diverged (the older one is Alice's own
    published copy, which her edit started from)."""
    remote, base = make_remote(tmp_path)
    alice = clone(remote, tmp_path / "alice")
    x = softmax(alice, base, "Warps 8 - +3%", score=1.03)
    sync(Store(alice), branch="kexp/alice")
    bob = clone(remote, tmp_path / "bob")
    git(bob, "fetch", "-q")
    git(bob, "restore", "--source", "origin/kexp/alice", "--", "experiments")
    fixed = run_kexp("update", x[:10], "--set", "score=1.16", "--reason", "quiet machine", cwd=bob)
    assert fixed.returncode == 0, fixed.stderr
    sync(Store(bob), branch="kexp/bob")
    Store(alice).update_experiment(x, tags=["alice-local"])
    git(alice, "fetch", "-q")
    # The truth: Bob's version is one Alice's clone never held.
    bobs = git(alice, "ls-tree", "-r", "--name-only", "origin/kexp/bob", "--", "experiments")
    (path,) = [p for p in bobs.split() if x in p]
    assert "1.16" in git(alice, "show", f"origin/kexp/bob:{path}")
    assert "1.16" not in git(alice, "log", "-p", "HEAD", "--branches", "--", path)

    data = json.loads(run_kexp("show", x[:10], "--all-refs", "--json", cwd=alice).stdout)
    assert data["ref"] == "local" and data["diverged"], data
    # Only Bob's version diverged; Alice's own published copies are older ones.
    assert data["diverged_on"] == ["origin/kexp/bob"], data
    older, apart = data["note"].split("; another version on ")
    assert older == "an older version on kexp/alice, origin/kexp/alice", data["note"]
    assert apart.startswith("origin/kexp/bob: both changed") and "working tree's edit" in apart
    shown = run_kexp("top", "--all-refs", cwd=alice)
    (line,) = [line for line in shown.stdout.splitlines() if x[:10] in line]
    assert "diverged" in line and "older" not in line, line
    packet = run_kexp("context", "--operator", "softmax", "--all-refs", cwd=alice).stdout
    best = packet.split("## Current best", 1)[1].split("##", 1)[0]
    assert "diverged: another version on origin/kexp/bob changed" in best, best
    assert "working tree's edit" in best and "kexp/alice" not in best.split("diverged")[1]


def test_an_uncommitted_edit_of_ones_own_published_copy_is_the_newer_one(
    tmp_path: Path,
) -> None:
    """Alice edits X after publishing it to her side branch: the branch's copy is the
    one her edit started from, an older version, not a diverged one."""
    remote, base = make_remote(tmp_path)
    alice = clone(remote, tmp_path / "alice")
    x = softmax(alice, base, "Warps 8 - +3%", score=1.03)
    sync(Store(alice), branch="kexp/alice")
    Store(alice).update_experiment(x, tags=["alice-local"])
    data = json.loads(run_kexp("show", x[:10], "--all-refs", "--json", cwd=alice).stdout)
    assert data["ref"] == "local" and not data["diverged"], data
    assert "older version" in data["note"], data
