"""The advice that brings in an experiment another place holds, run exactly as printed.

A write names an experiment (its ``pid``, the one ``kexp remeasure`` adds a round to)
that only a branch of the remote holds; the refusal, and the tried-before warning of the
same measurement recorded again, say what brings it in. Each command is parsed from the
message and run as written, in the state a team's clones are really in: the files a
clone published with ``kexp sync --branch`` are untracked in its checkout, and once
another branch holds them alike (a pull request merged into main, an agent's side branch
started from that main) ``git merge`` of that branch refuses ("untracked working tree
files would be overwritten by merge"). Real git: a bare repository on disk as the
remote, two clones; the truth read from git and the files."""

from __future__ import annotations

import json
import re
import shlex
import subprocess
from pathlib import Path
from typing import Any

import pytest
from conftest import git, run_kexp
from test_sync import clone, make_remote, record, remote_ids
from test_sync_landed import land

from kexp import Store, ValidationError
from kexp.measure.record import record_iteration
from kexp.storage.sync import sync

OPERATOR = "csrc/softmax.cu: softmax"
DIFF = """\
--- a/csrc/softmax.cu
+++ b/csrc/softmax.cu
@@ -1,3 +1,3 @@
-  float x = in[i];
+  float4 x = reinterpret_cast<const float4*>(in)[i];
   acc += x;
"""
BASELINE = {"r64": [10.0, 10.1, 9.9, 10.05], "r128": [20.0, 20.2, 19.9, 20.1]}
CANDIDATE = {"r64": [9.1, 9.0, 9.2, 9.05], "r128": [18.2, 18.1, 18.3, 18.0]}
#: A step's candidate on a parent timed as CANDIDATE: the same speedup, sample by sample.
STEP = {
    c: [round(t * t / b, 4) for t, b in zip(v, BASELINE[c], strict=True)]
    for c, v in CANDIDATE.items()
}
#: What a message advises to run first: the restore of a file, a merge, the sync.
ADVISED = re.compile(r"(?:\(|, then )(git (?:-C \S+ )?(?:restore|merge) [^;,)]+|kexp sync)[;,)]")


def softmax(root: Path, base: str, summary: str, **fields: Any) -> str:
    """An experiment measured from timings (a round can be added to it); a step on a
    parent (``pid``) is timed against the parent's code (its candidate)."""
    fields = {"operator_sig": OPERATOR, "dtype_sig": "fp32", "env": "H100", **fields}
    sides = (CANDIDATE, STEP) if fields.get("pid") else (BASELINE, CANDIDATE)
    return record_iteration(Store(root), change_summary=summary, base_commit=base,
                            baseline=sides[0], candidate=sides[1], **fields).id  # fmt: skip


def follow(said: str, cwd: Path) -> str:
    """Run the command ``said`` advises, exactly as printed, in ``cwd``; it must succeed.
    Returns the command."""
    named = ADVISED.search(said)
    assert named, said
    command = shlex.split(named.group(1))
    if command[0] == "git":
        done = subprocess.run(command, cwd=cwd, capture_output=True, text=True)
    else:
        done = run_kexp(*command[1:], cwd=cwd)
    assert done.returncode == 0, (named.group(1), done.stderr)
    return named.group(1)


def file_of(root: Path, exp_id: str) -> Path:
    (path,) = (root / "experiments").rglob(f"{exp_id}-*.md")
    return path


def bob_started_from_alices_landed_work(tmp_path: Path) -> tuple[Path, Path, Path, str, str]:
    """Alice published an experiment to kexp/alice and her pull request was merged
    (squashed); Bob synced main, then recorded on kexp/bob from there; Alice fetched.
    Her published file is untracked in her checkout and alike on origin/kexp/bob, so a
    ``git merge origin/kexp/bob`` refuses. The remote, Alice, Bob, the base commit and
    Alice's experiment."""
    remote, base = make_remote(tmp_path)
    alice, bob = clone(remote, tmp_path / "alice"), clone(remote, tmp_path / "bob")
    hers = record(alice, base, "Unrolled by 4 - +1.9%").id
    sync(Store(alice), branch="kexp/alice")
    land(remote, tmp_path / "forge", "kexp/alice", "squashed")
    sync(Store(bob))  # Bob's main holds Alice's experiment now
    assert hers in [p.name[:16] for p in (bob / "experiments").rglob("*.md")]
    return remote, alice, bob, base, hers


def assert_merge_refuses(alice: Path, ref: str) -> None:
    """The truth: ``git merge ref`` refuses in Alice's checkout, changing nothing."""
    merged = subprocess.run(["git", "merge", "--no-edit", ref], cwd=alice,
                            capture_output=True, text=True)  # fmt: skip
    assert merged.returncode != 0, merged.stdout
    assert "untracked working tree files would be overwritten" in merged.stderr, merged.stderr


@pytest.mark.parametrize("how", ["kexp add", "python"])
def test_a_parent_on_another_agents_side_branch_is_brought_in_as_advised(
    tmp_path: Path, how: str
) -> None:
    """Alice builds on Bob's step, which only his side branch holds (its parent too):
    the write is refused, naming a command that, run as written (from her checkout, or
    from anywhere when the library said it), brings in his two files alone, never his
    branch; the same write then succeeds, and so does a round added to his step (its
    parent is there too); nothing of hers or his is lost."""
    remote, alice, bob, base, hers = bob_started_from_alices_landed_work(tmp_path)
    first = softmax(bob, base, "Vectorize loads with float4 - +10%")
    step = softmax(bob, base, "Unroll by 4 on float4 - +10%", pid=first,
                   measured_against="parent")  # fmt: skip
    sync(Store(bob), branch="kexp/bob")
    git(alice, "fetch", "-q")
    assert_merge_refuses(alice, "origin/kexp/bob")
    head = git(alice, "rev-parse", "HEAD")
    mine = file_of(alice, hers).read_bytes()

    child = ["add", "--pid", step[:10], "--summary", "Warp shuffle on unrolled - +2%",
             "--score", "1.02", "--measured-against", "parent", "--operator", OPERATOR,
             "--dtype", "fp32", "--env", "H100", "--base-commit", base]  # fmt: skip
    if how == "kexp add":
        refused = run_kexp(*child, cwd=alice)
        assert refused.returncode != 0 and "origin/kexp/bob" in refused.stderr
        said = refused.stderr
        follow(said, alice)
    else:  # the library's hint, followed from another folder
        with pytest.raises(ValidationError) as refused_in_python:
            record(alice, base, "Warp shuffle on unrolled - +2%", pid=step,
                   operator_sig=OPERATOR, measured_against="parent")  # fmt: skip
        (problem,) = [p for p in refused_in_python.value.problems if p.code == "dangling-pid"]
        said = problem.hint
        follow(said, tmp_path)
    assert "origin/kexp/bob" in said and "git merge" not in said, said
    made = run_kexp(*child, "--json", cwd=alice)
    assert made.returncode == 0, made.stderr
    made_id = json.loads(made.stdout)["id"]
    assert Store(alice).get_experiment(made_id).pid == step

    # His two files, as his branch holds them; hers as it was; her checkout not merged.
    for exp_id in (first, step):
        path = file_of(alice, exp_id).relative_to(alice).as_posix()
        assert (
            file_of(alice, exp_id).read_text()
            == git(alice, "show", f"origin/kexp/bob:{path}") + "\n"
        )
    assert file_of(alice, hers).read_bytes() == mine
    assert git(alice, "rev-parse", "HEAD") == head
    assert git(alice, "diff", "--cached", "--name-only") == ""
    assert "origin/kexp/bob" not in git(alice, "branch", "-r", "--merged", "HEAD").split()
    (tmp_path / "b.json").write_text(
        json.dumps({c: [t * 1.01 for t in v] for c, v in BASELINE.items()})
    )
    (tmp_path / "c.json").write_text(
        json.dumps({c: [t * 1.01 for t in v] for c, v in CANDIDATE.items()})
    )
    again = run_kexp("remeasure", step[:10], "--baseline", str(tmp_path / "b.json"),
                     "--candidate", str(tmp_path / "c.json"), cwd=alice)  # fmt: skip
    assert again.returncode == 0, again.stderr

    assert file_of(alice, hers).read_bytes() == mine
    assert sorted(remote_ids(remote, "kexp/bob")) == sorted([hers, first, step])


@pytest.mark.parametrize("where", ["origin/main", "origin/kexp/bob"])
def test_the_advice_to_remeasure_an_experiment_found_elsewhere_works_as_written(
    tmp_path: Path, where: str
) -> None:
    """Alice records the measurement Bob recorded (the same change, base commit and
    env) with --all-refs: the warning says to add a round to his experiment instead,
    after the command that brings it in: with his pull request merged (origin/main, the
    branch her checkout tracks), the sync that merges main; with it on his side branch
    alone, the copy of its file. Run as written, each succeeds, and so does the remeasure
    it advises; her own files are kept."""
    if where == "origin/main":
        remote, base = make_remote(tmp_path)
        alice, bob = clone(remote, tmp_path / "alice"), clone(remote, tmp_path / "bob")
        hers = record(alice, base, "Unrolled by 4 - +1.9%").id
        sync(Store(alice), branch="kexp/alice")
        his = softmax(bob, base, "Vectorize loads with float4 - +10%", code_change=DIFF)
        sync(Store(bob), branch="kexp/bob")
        for branch in ("kexp/alice", "kexp/bob"):
            land(remote, tmp_path / "forge", branch, "squashed")
    else:
        remote, alice, bob, base, hers = bob_started_from_alices_landed_work(tmp_path)
        his = softmax(bob, base, "Vectorize loads with float4 - +10%", code_change=DIFF)
        sync(Store(bob), branch="kexp/bob")
    git(alice, "fetch", "-q")
    assert_merge_refuses(alice, where)
    mine = file_of(alice, hers).read_bytes()

    (tmp_path / "change.diff").write_text(DIFF)
    (tmp_path / "b.json").write_text(json.dumps(BASELINE))
    (tmp_path / "c.json").write_text(
        json.dumps({c: [t * 0.99 for t in v] for c, v in CANDIDATE.items()})
    )
    same = ["add", "--summary", "Vectorize loads, again - +9%", "--score", "1.09",
            "--operator", OPERATOR, "--dtype", "fp32", "--env", "H100",
            "--base-commit", base, "--diff-file", str(tmp_path / "change.diff"),
            "--all-refs", "--json"]  # fmt: skip
    warned = run_kexp(*same, cwd=alice)
    assert warned.returncode == 0, warned.stderr
    (line,) = [line for line in warned.stderr.splitlines() if f"kexp remeasure {his}" in line]
    assert where in line and "git merge" not in line, line
    # "instead": the new record removed first, as printed
    removal = re.search(r"\((kexp rm \S+ --yes), then ", line)
    assert removal and removal.group(1) == f"kexp rm {json.loads(warned.stdout)['id']} --yes"
    assert run_kexp(*shlex.split(removal.group(1))[1:], cwd=alice).returncode == 0
    command = follow(line, alice)
    assert command == ("kexp sync" if where == "origin/main" else command)
    advised = re.search(rf"(kexp remeasure {his}) --baseline \.\.\. --candidate \.\.\.", line)
    assert advised, line
    again = run_kexp(*advised.group(1).split()[1:], "--baseline", str(tmp_path / "b.json"),
                     "--candidate", str(tmp_path / "c.json"), cwd=alice)  # fmt: skip
    assert again.returncode == 0, again.stderr
    assert len(Store(alice).get_experiment(his).results) == 2 or "round" in again.stdout
    assert file_of(alice, hers).read_bytes() == mine


def test_a_step_on_another_agents_unlanded_step_is_published_with_its_lineage(
    tmp_path: Path,
) -> None:
    """Alice brings in Bob's step as advised (its file and its parent's, alike on his
    side branch, his pull request still open) and builds on it; her ``kexp sync
    --branch kexp/alice`` publishes her step with the lineage it needs (his two files:
    her pull request stacks on his), where it refused with 'parent ... is not in the
    store' because a file another branch holds alike was left off her branch."""
    remote, alice, bob, base, _ = bob_started_from_alices_landed_work(tmp_path)
    first = softmax(bob, base, "Vectorize loads with float4 - +10%")
    step = softmax(bob, base, "Unroll by 4 on float4 - +10%", pid=first,
                   measured_against="parent")  # fmt: skip
    sync(Store(bob), branch="kexp/bob")
    git(alice, "fetch", "-q")
    child = ["add", "--pid", step[:10], "--summary", "Warp shuffle on unrolled - +2%",
             "--score", "1.02", "--measured-against", "parent", "--base-commit", base]  # fmt: skip
    follow(run_kexp(*child, cwd=alice).stderr, alice)
    made = run_kexp(*child, "--json", cwd=alice)
    assert made.returncode == 0, made.stderr
    mine = json.loads(made.stdout)["id"]

    done = run_kexp("sync", "--branch", "kexp/alice", cwd=alice)
    assert done.returncode == 0, done.stderr
    assert {mine, step, first} <= set(remote_ids(remote, "kexp/alice")), done.stdout
    assert sorted(remote_ids(remote, "kexp/bob")).count(step) == 1  # his branch untouched


@pytest.mark.parametrize("given", ["prefix", "full id"])
def test_the_history_of_an_experiment_on_another_branch_is_read_as_advised(
    tmp_path: Path, given: str
) -> None:
    """Bob asks for the history of Alice's experiment (published on her side branch,
    then corrected there): ``kexp log ID`` advised ``kexp show ID --all-refs``, which
    shows no history, and ``kexp log --rev`` with a prefix looked the prefix up in his
    working tree. It names now the ``kexp log --rev REF ID`` that, run as printed, shows
    the history her branch holds: the record and the correction."""
    remote, base = make_remote(tmp_path)
    alice, bob = clone(remote, tmp_path / "alice"), clone(remote, tmp_path / "bob")
    hers = record(alice, base, "Unrolled by 4 - +1.9%", score=1.019).id
    sync(Store(alice), branch="kexp/alice")
    Store(alice).update_experiment(hers, score=1.021)
    sync(Store(alice), branch="kexp/alice")
    git(bob, "fetch", "-q")
    asked = hers[:10] if given == "prefix" else hers

    refused = run_kexp("log", asked, cwd=bob)
    said = " ".join(refused.stderr.split())
    assert refused.returncode != 0 and "origin/kexp/alice" in said, said
    assert "--all-refs" not in said, said
    advised = re.search(r"(kexp log --rev \S+ [0-9a-f]+)", said)
    assert advised, said
    assert advised.group(1) == f"kexp log --rev origin/kexp/alice {asked}", said
    shown = run_kexp(*shlex.split(advised.group(1))[1:], cwd=bob)
    assert shown.returncode == 0, shown.stderr
    assert "score: 1.019 → 1.021" in shown.stdout, shown.stdout
    entries = json.loads(run_kexp(*shlex.split(advised.group(1))[1:], "--json", cwd=bob).stdout)
    assert [entry["action"] for entry in entries] == ["added", "modified"], entries


def test_a_sync_conflict_is_merged_by_hand_as_advised(tmp_path: Path) -> None:
    """Alice and Bob corrected the same experiment on main; her pull request of another
    one (published with ``kexp sync --branch``, so untracked in her checkout) landed on
    main too. Her ``kexp sync`` stops on the conflict and said to merge by hand with
    ``git merge origin/main``, which refused ("untracked working tree files would be
    overwritten by merge"). The commands it prints now, run as printed, merge (stopping
    on the conflict alone); once she keeps a version and commits, ``kexp sync``
    publishes, and nothing of hers or his is lost."""
    remote, base = make_remote(tmp_path)
    alice, bob = clone(remote, tmp_path / "alice"), clone(remote, tmp_path / "bob")
    both = record(alice, base, "Unrolled by 4 - +1.9%", score=1.019).id
    sync(Store(alice))
    sync(Store(bob))
    landed = record(alice, base, "Vectorized stores - +2.5%", score=1.025).id
    sync(Store(alice), branch="kexp/alice")
    land(remote, tmp_path / "forge", "kexp/alice", "squashed")
    Store(bob).update_experiment(both, score=1.017)
    sync(Store(bob))  # main: his correction, her landed experiment
    Store(alice).update_experiment(both, score=1.021)
    mine = file_of(alice, landed).read_bytes()
    git(alice, "fetch", "-q")
    assert_merge_refuses(alice, "origin/main")

    stopped = run_kexp("sync", cwd=alice)
    assert stopped.returncode != 0 and stopped.stderr.count("\n") == 1, stopped.stderr
    advised = re.search(r"merge by hand \((.+?)\), keep the right version", stopped.stderr)
    assert advised, stopped.stderr
    merged = subprocess.run(advised.group(1), shell=True, cwd=alice,
                            capture_output=True, text=True)  # fmt: skip
    said = merged.stdout + merged.stderr
    assert "untracked working tree files" not in said, (advised.group(1), said)
    conflicted = git(alice, "diff", "--name-only", "--diff-filter=U")
    assert conflicted == file_of(alice, both).relative_to(alice).as_posix(), said
    assert file_of(alice, landed).read_bytes() == mine  # back, as main holds it

    git(alice, "checkout", "--theirs", "--", conflicted)  # she keeps Bob's correction
    git(alice, "commit", "-q", "-am", "Keep Bob's correction")
    done = run_kexp("sync", cwd=alice)
    assert done.returncode == 0, done.stderr
    assert sorted(remote_ids(remote, "main")) == sorted([both, landed])
    assert git(remote, "rev-parse", "main") == git(alice, "rev-parse", "HEAD")
    assert Store(alice).get_experiment(both).score == 1.017
    assert file_of(alice, landed).read_bytes() == mine
