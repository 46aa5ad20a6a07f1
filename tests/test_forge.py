"""A team's forge, end to end: a bare repository on disk as the remote, clones for two
agents and a reviewer, branches pushed and merged with real git, and kexp's answers at
each step (``kexp sync``, ``kexp validate``, ``kexp review``) held to the files and to
git itself."""

from __future__ import annotations

import json
import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from conftest import REPO_ROOT, experiment_fields, git, init_repo, run_kexp
from test_sync import clone, make_remote

from kexp import Store, ValidationError


def _record(root: Path, **fields: object) -> str:
    return Store(root).create_experiment(**experiment_fields(**fields)).id


def _two_clones(tmp_path: Path) -> tuple[Path, Path, str]:
    """Two clones of one remote holding one experiment, pushed by the first. Returns
    (the first clone, the second, the experiment's id)."""
    remote, _ = make_remote(tmp_path)
    lead = clone(remote, tmp_path / "lead")
    exp_id = _record(lead, change_summary="Unroll 4 - +20%", score=1.2)
    git(lead, "add", "experiments")
    git(lead, "commit", "-q", "-m", "seed")
    git(lead, "push", "-q", "origin", "main")
    return lead, clone(remote, tmp_path / "other"), exp_id


def _conflicting_clones(tmp_path: Path) -> tuple[Path, Path, str]:
    """Two clones of one remote whose ``main`` each corrected the score of the same
    experiment; the first pushed, the second merged and stopped on the conflict. Returns
    (the second clone, its conflicted file, the experiment's id)."""
    lead, other, exp_id = _two_clones(tmp_path)
    run_kexp("update", exp_id, "--set", "score=1.22", cwd=other)
    git(other, "commit", "-q", "-am", "other: 1.22")
    git(other, "push", "-q", "origin", "main")
    run_kexp("update", exp_id, "--set", "score=1.25", cwd=lead)
    git(lead, "commit", "-q", "-am", "lead: 1.25")
    git(lead, "fetch", "-q")
    merged = next((lead / "experiments").rglob(f"{exp_id}-*.md"))
    result = subprocess.run(
        ["git", "merge", "-q", "origin/main"], cwd=lead, capture_output=True, text=True
    )
    assert result.returncode != 0 and "<<<<<<<" in merged.read_text()
    return lead, merged, exp_id


def test_sync_in_the_middle_of_a_merge_says_to_finish_it_and_leaves_the_conflict(
    tmp_path: Path,
) -> None:
    """A merge stopped on a conflict, then ``kexp sync``: it refuses in one line saying
    to finish the merge, and the conflict stays a conflict (the file unmerged in the
    index), so git itself still refuses to commit the markers."""
    lead, conflicted, _ = _conflicting_clones(tmp_path)
    before = git(lead, "ls-files", "-u")
    assert before  # unmerged
    done = run_kexp("sync", cwd=lead)
    assert done.returncode != 0
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1, done.stderr
    assert "merge" in lines[0] and "in progress" in lines[0]
    assert conflicted.relative_to(lead).as_posix() in lines[0]
    assert "git commit" in lines[0] and "kexp sync again" in lines[0]
    assert git(lead, "ls-files", "-u") == before  # still unmerged: nothing staged
    beside = run_kexp("sync", "--branch", "kexp/lead", cwd=lead)  # would publish the markers
    assert beside.returncode != 0 and "in progress" in beside.stderr
    assert git(lead, "branch", "--list", "kexp/lead") == ""
    commit = subprocess.run(
        ["git", "commit", "-q", "-m", "x"], cwd=lead, capture_output=True, text=True
    )
    assert commit.returncode != 0  # git still guards the conflict
    assert git(lead, "rev-parse", "origin/main") == git(
        tmp_path / "remote.git", "rev-parse", "main"
    )


def test_sync_after_resolving_but_before_committing_the_merge_says_to_commit(
    tmp_path: Path,
) -> None:
    """The conflict resolved and staged, the merge not committed yet: ``kexp sync`` says
    to finish the merge (git would refuse its partial commit in git's words)."""
    lead, conflicted, _ = _conflicting_clones(tmp_path)
    git(lead, "checkout", "--theirs", "--", str(conflicted))
    git(lead, "add", str(conflicted))
    done = run_kexp("sync", cwd=lead)
    assert done.returncode != 0
    line = done.stderr.strip()
    assert "\n" not in line and "a merge is in progress" in line
    assert "finish it: git add each file and git commit" in line
    assert "unmerged" not in line


def test_conflict_markers_are_a_merge_conflict_and_the_children_keep_their_pid(
    tmp_path: Path,
) -> None:
    """A reviewer's merge stopped on the same experiment corrected on two branches:
    ``kexp validate`` names the conflict at its ``<<<<<<<`` line with how to settle it
    (not a YAML syntax error about a missing ':'), and the experiments built on it are
    not reported (their parent is in the store, its file broken), never told to set
    ``pid: ''`` (which would cut the lineage the campaign's cumulative score is made of)."""
    lead, conflicted, exp_id = _conflicting_clones(tmp_path)
    git(lead, "merge", "--abort")
    child = _record(lead, change_summary="Child - +5%", pid=exp_id, measured_against="parent")
    git(lead, "add", "experiments")
    git(lead, "commit", "-q", "-m", "child")
    subprocess.run(["git", "merge", "-q", "origin/main"], cwd=lead, capture_output=True)
    text = conflicted.read_text()
    marker_line = text.splitlines().index("<<<<<<< HEAD") + 1
    done = run_kexp("validate", cwd=lead)
    assert done.returncode == 1
    name = conflicted.relative_to(lead).as_posix()
    assert f"{name}:{marker_line}:1: error[merge-conflict]" in done.stdout
    assert "yaml-syntax" not in done.stdout
    # The child's parent is in the store (its file is broken): nothing to fix in the child.
    assert "dangling-pid" not in done.stdout and child not in done.stdout
    assert "set pid: ''" not in done.stdout
    assert conflicted.read_text() == text  # nothing changed
    review = run_kexp("review", "origin/main", cwd=lead)
    assert review.returncode == 0
    assert "merge-conflict" in review.stdout
    assert "*(absent)*" not in review.stdout  # its fields are unreadable, not removed


def _branches_of_a_team(tmp_path: Path) -> tuple[Path, Path, str, str]:
    """A remote whose ``main`` holds a campaign (a root and a step); alice corrected the
    step's score on ``kexp/alice`` and it was merged into ``main``; bob, forked before,
    corrected the same score and removed the root's other child on ``kexp/bob``.
    Returns (the reviewer's clone, fetched; the remote; the step's id; the removed id)."""
    remote, _ = make_remote(tmp_path)
    lead = clone(remote, tmp_path / "lead")
    root = _record(
        lead, change_summary="Vectorized - +10%", score=1.1, measured_against="reference"
    )
    step = _record(
        lead, change_summary="Unroll 4 - +20%", score=1.2, pid=root, measured_against="parent"
    )
    gone = _record(
        lead, change_summary="Shuffle - -10%", score=0.9, pid=root, measured_against="parent"
    )
    wide = _record(
        lead, change_summary="Wide loads - +19%", score=1.19, pid=root, measured_against="parent"
    )
    git(lead, "add", "experiments")
    git(lead, "commit", "-q", "-m", "campaign")
    git(lead, "push", "-q", "origin", "main")
    alice = clone(remote, tmp_path / "alice", "kexp/alice")
    bob = clone(remote, tmp_path / "bob", "kexp/bob")
    run_kexp("update", step, "--set", "score=1.22", "--reason", "L2 flushed", cwd=alice)
    git(alice, "commit", "-q", "-am", "alice: 1.22")
    git(alice, "push", "-q", "origin", "kexp/alice")
    run_kexp("update", step, "--set", "score=1.18", "--reason", "slower", cwd=bob)
    run_kexp("rm", gone, "--yes", cwd=bob)
    git(bob, "commit", "-q", "-am", "bob: 1.18, rm")
    git(bob, "push", "-q", "origin", "kexp/bob")
    reviewer = clone(remote, tmp_path / "reviewer")
    git(reviewer, "merge", "-q", "--no-ff", "origin/kexp/alice", "-m", "Merge alice")
    git(reviewer, "push", "-q", "origin", "main")
    (reviewer / "wide-id").write_text(wide)
    return reviewer, remote, step, gone


def test_review_says_when_the_base_branch_corrected_the_same_experiment_since_the_fork(
    tmp_path: Path,
) -> None:
    """Bob's pull request corrects a score that alice's, merged meanwhile, corrected
    too: the review (Markdown and JSON) says so, with both sides' values, since the
    reviewer must decide which measurement is right; a review with nothing changed on
    the base says nothing of the kind."""
    reviewer, _, step, _ = _branches_of_a_team(tmp_path)
    md = run_kexp("review", "origin/main", "origin/kexp/bob", cwd=reviewer).stdout
    lines = [line for line in md.splitlines() if "Changed on both sides" in line]
    assert len(lines) == 1 and step in lines[0]
    assert "`1.2` → `1.22`" in lines[0] and "`1.2` → `1.18`" in lines[0]
    data = json.loads(
        run_kexp(
            "review", "origin/main", "origin/kexp/bob", "--format", "json", cwd=reviewer
        ).stdout
    )
    assert data["summary"]["changed_on_base"] == [step]
    (corrected,) = data["corrected"]
    assert corrected["base_kind"] == "corrected"
    changes = {c["field"]: (c["old"], c["new"]) for c in corrected["base_changes"]}
    assert changes["score"] == (1.2, 1.22)  # (its summary's figure followed it)
    # Against the merge base itself nothing changed on the base side.
    fork = git(reviewer, "merge-base", "origin/kexp/bob", "HEAD~1")
    quiet = run_kexp("review", fork, "origin/kexp/bob", cwd=reviewer).stdout
    assert "Changed on both sides" not in quiet


# --- analytics: docs/parquet.md's DuckDB queries over a Parquet export -----------------


def _parquet_page_queries() -> dict[str, str]:
    """The SQL blocks of docs/parquet.md (the Parquet view's page, linked from the
    README) that start with ``-- kexp``, by their first line."""
    text = (REPO_ROOT / "docs" / "parquet.md").read_text(encoding="utf-8")
    blocks = re.findall(r"```sql\n(.*?)```", text, flags=re.S)
    return {b.splitlines()[0]: b for b in blocks if b.startswith("-- kexp")}


def _campaign_store(repo: Path) -> dict[str, str]:
    """A store of two operators on two envs: lineages measured against parents and the
    reference, a buggy step and its child, a pending one, regressions by three
    authors, and controls (one an A/A run that reads as a regression). Returns the
    ids by name."""
    store = Store(repo)
    ids: dict[str, str] = {}
    attn, gemm = "csrc/attn.cu: paged_attention", "csrc/gemm.cu: gemm"

    def make(name: str, day: int, **fields: object) -> None:
        for key in ("pid",):
            if key in fields:
                fields[key] = ids[str(fields[key])]
        values = experiment_fields(
            change_summary=f"{name} - step",
            created_at=f"2026-{10 + day // 28}-{1 + day % 28:02d}T00:00:00Z",
            **fields,
        )
        ids[name] = store.create_experiment(**values).id

    make("a0", 0, score=1.0, measured_against="reference", operator_sig=attn, author="ann")
    make(
        "a1",
        1,
        score=1.1,
        pid="a0",
        measured_against="parent",
        operator_sig=attn,
        author="ann",
        score_ci=[1.05, 1.15],
    )
    make("a2", 2, score=1.2, pid="a1", measured_against="parent", operator_sig=attn, author="ben")
    # (regressions beyond twice the 3 % drift of ca2, the env's newest control)
    make("a3", 3, score=0.9, pid="a2", measured_against="parent", operator_sig=attn, author="ben")
    make(
        "a4",
        30,
        score=1.45,
        pid="a2",
        measured_against="reference",
        operator_sig=attn,
        author="cat",
    )
    make("a5", 31, score=1.05, pid="a4", measured_against="parent", operator_sig=attn, author="cat")
    make("a6", 32, score=1.6, pid="a1", measured_against="parent", operator_sig=attn, author="ann")
    make(
        "a7",
        33,
        score=0.0,
        status="failed",
        is_buggy=True,
        error_message="NaN",
        pid="a2",
        measured_against="parent",
        operator_sig=attn,
        author="ann",
    )
    make("a8", 34, score=1.3, pid="a7", measured_against="parent", operator_sig=attn, author="ben")
    make(
        "a9",
        35,
        score=1.9,
        status="running",
        pid="a6",
        measured_against="parent",
        operator_sig=attn,
        author="ben",
    )
    make(
        "a10", 36, score=0.93, pid="a6", measured_against="parent", operator_sig=attn, author="ann"
    )
    make(
        "ca1",
        4,
        score=1.03,
        tags=["control"],
        operator_sig=attn,
        author="ann",
        score_ci=[0.97, 1.09],
    )
    make(
        "ca2",
        29,
        score=0.97,
        tags=["control"],
        operator_sig=attn,
        author="ben",
        score_ci=[0.95, 0.99],
    )
    make("ch1", 30, score=1.005, tags=["control"], operator_sig=attn, env="H100", author="ben")
    make(
        "g0",
        10,
        score=1.2,
        measured_against="reference",
        operator_sig=gemm,
        env="H100",
        dtype_sig="fp16",
        author="ben",
    )
    make(
        "g1",
        11,
        score=0.9,
        pid="g0",
        measured_against="parent",
        operator_sig=gemm,
        env="H100",
        dtype_sig="fp16",
        author="ben",
    )
    make(
        "g2",
        12,
        score=1.1,
        pid="g0",
        measured_against="parent",
        operator_sig=gemm,
        env="H100",
        dtype_sig="fp16",
        author="cat",
    )
    make(
        "g3",
        13,
        score=0.985,
        pid="g2",
        measured_against="parent",
        operator_sig=gemm,
        env="H100",
        dtype_sig="fp16",
        author="cat",
    )
    return ids


def _front_matter(repo: Path) -> dict[str, dict[str, object]]:
    """Each experiment file's front-matter, read with PyYAML: the truth."""
    import yaml

    found = {}
    for path in (repo / "experiments").rglob("*.md"):
        if path.name != "README.md":
            fields = yaml.safe_load(path.read_text(encoding="utf-8").split("---\n")[1])
            found[fields["id"]] = fields
    return found


def test_the_documented_duckdb_queries_answer_as_kexp_and_the_files_do(
    repo: Path, tmp_path: Path
) -> None:
    """An analyst runs docs/parquet.md's queries verbatim over ``kexp export --format
    parquet``: per-outcome counts with controls apart, each operator's best tip by the
    composed score, regressions per author, the noise floors and the path to a tip
    each answer as ``kexp stats`` / ``kexp lessons`` do, and as the files say."""
    import duckdb

    ids = _campaign_store(repo)
    names = {v: k for k, v in ids.items()}
    files = _front_matter(repo)
    out = tmp_path / "pq"
    assert run_kexp("export", "--format", "parquet", "-o", str(out), cwd=repo).returncode == 0
    queries = _parquet_page_queries()
    assert len(queries) == 6, list(queries)

    def run(first: str, tip: str = "") -> list[tuple[object, ...]]:
        (sql,) = [q for line, q in queries.items() if line.startswith(first)]
        return duckdb.sql(sql.replace("DIR", str(out)).replace("'TIP'", f"'{tip}'")).fetchall()

    stats = json.loads(run_kexp("stats", "--json", cwd=repo).stdout)
    lessons = json.loads(run_kexp("lessons", "--json", cwd=repo).stdout)
    top = json.loads(run_kexp("top", "--json", cwd=repo).stdout)
    assert [row[0] for row in run("-- kexp top")] == [e["id"] for e in top]

    counted = {(op, outcome): n for op, outcome, n in run("-- kexp stats: experiments")}
    expected = {
        (op, outcome): n
        for op, by in stats["by_operator"].items()
        for outcome, n in by.items()
        if n and outcome != "total"
    }
    assert counted == expected
    assert counted[("csrc/attn.cu: paged_attention", "control")] == 3
    assert counted[("csrc/attn.cu: paged_attention", "regression")] == 2  # not ca2

    best = {
        (op, dt, env): (round(score, 9), names[tip])
        for op, dt, env, score, tip in run("-- kexp stats: each")
    }
    assert best == {
        (b["operator_sig"], b["dtype_sig"], b["env"]): (
            round(b["cumulative_score"], 9),
            names[b["id"]],
        )
        for b in stats["best"]
    }
    attn = [
        v
        for (op, dt, _), v in best.items()
        if (op, dt) == ("csrc/attn.cu: paged_attention", "bf16")
    ]
    assert attn == [(1.76, "a6")]  # 1.0·1.1·1.6

    per_author = dict(run("-- kexp lessons: regressions"))
    truth: dict[str, int] = {}
    for lesson in lessons["regression"]:
        author = str(files[lesson["id"]]["author"])
        truth[author] = truth.get(author, 0) + 1
    assert per_author == truth == {"ann": 1, "ben": 2, "cat": 1}

    floors = [(env, names[c], score, ci) for env, c, score, ci in run("-- kexp lessons: the")]
    assert floors == [  # (no interval: [] in JSON, NULL in Parquet)
        (f["env"], names[f["id"]], f["score"], f["score_ci"] or None)
        for f in lessons["noise_floor"]
    ]
    assert floors == [
        ("H100", "ch1", 1.005, None),
        ("MI300X, ROCm 7.0.0", "ca2", 0.97, [0.95, 0.99]),
    ]

    path = run("-- kexp context", tip=ids["a5"])
    assert [names[str(row[0])] for row in path] == ["a0", "a1", "a2", "a4", "a5"]
    composed = 1.0
    for exp_id, score, against, cumulative, _ in path:
        step = files[str(exp_id)]
        assert (score, against) == (step["score"], step.get("measured_against"))
        composed = float(score) if against == "reference" else composed * float(score)
        assert cumulative == pytest.approx(composed)
    assert composed == pytest.approx(1.45 * 1.05)


def test_review_says_when_a_correction_dethrones_the_operators_best(tmp_path: Path) -> None:
    """Bob lowers the score of the step the campaign's best tip is: another experiment
    is now the best (1.1·1.19 = 1.309 beats 1.1·1.18 = 1.298). The review says the best
    changed, from which to which, as a reviewer must decide whether to accept that;
    the table alone showed a rank."""
    reviewer, _, step, _ = _branches_of_a_team(tmp_path)
    wide = (reviewer / "wide-id").read_text()
    fork = git(reviewer, "merge-base", "origin/kexp/bob", "HEAD~1")
    md = run_kexp("review", fork, "origin/kexp/bob", cwd=reviewer).stdout
    (line,) = [line for line in md.splitlines() if "Best changed" in line]
    assert f"was `{step}` (1.3200), now `{wide}` (1.3090)" in line
    data = json.loads(
        run_kexp("review", fork, "origin/kexp/bob", "--format", "json", cwd=reviewer).stdout
    )
    (change,) = data["summary"]["best_changes"]
    assert (change["before_id"], change["after_id"]) == (step, wide)
    assert change["after_cumulative"] == pytest.approx(1.1 * 1.19)


def test_conflict_markers_in_a_section_are_a_merge_conflict_in_every_read(
    tmp_path: Path,
) -> None:
    """Two agents rewrote the same experiment's key insight; the merge stopped on the
    description, the front-matter untouched. The file was valid to kexp (its markers in
    the Markdown body), so ``git commit -a`` then ``kexp sync`` published them. Now
    ``kexp validate`` names the conflict at its ``<<<<<<<`` line, a query skips the file
    with that error, and a write refuses such text."""
    lead, other, exp_id = _two_clones(tmp_path)
    for root, insight in ((other, "registers bound it"), (lead, "the loop trip count bounds it")):
        path = next((root / "experiments").rglob(f"{exp_id}-*.md"))
        path.write_text(path.read_text().replace("unrolling helps", insight), encoding="utf-8")
        git(root, "commit", "-q", "-am", insight)
    git(other, "push", "-q", "origin", "main")
    git(lead, "fetch", "-q")
    merged = subprocess.run(["git", "merge", "-q", "origin/main"], cwd=lead, capture_output=True)
    assert merged.returncode != 0
    conflicted = next((lead / "experiments").rglob(f"{exp_id}-*.md"))
    text = conflicted.read_text()
    front_matter_end = text.index("\n---\n", 4)
    marker = text.index("<<<<<<<")
    assert marker > front_matter_end  # the conflict is in the body alone
    marker_line = text[:marker].count("\n") + 1
    name = conflicted.relative_to(lead).as_posix()
    done = run_kexp("validate", cwd=lead)
    assert done.returncode == 1, done.stdout
    assert f"{name}:{marker_line}:1: error[merge-conflict]" in done.stdout, done.stdout
    top = run_kexp("top", cwd=lead)
    assert "merge-conflict" in top.stderr and exp_id[:10] not in top.stdout
    pasted = "**Key insight**:\n<<<<<<< HEAD\nregisters\n=======\ntrip count\n>>>>>>> main\n"
    with pytest.raises(ValidationError, match="merge conflict"):
        Store(lead).create_experiment(**experiment_fields(detailed_description=pasted))
    assert conflicted.read_text() == text


def _state(root: Path) -> tuple[str, str, str]:
    """What a refused sync must leave as it was: the branch, the index and working tree
    (git's status), and the remote-tracking branch."""
    return (
        git(root, "rev-parse", "HEAD"),
        git(root, "status", "--porcelain", "--untracked-files=all"),
        git(root, "branch", "--list", "kexp/*"),
    )


def test_sync_refuses_to_publish_what_kexp_validate_rejects(tmp_path: Path) -> None:
    """An experiment hand-edited to a score that is not a number, then ``kexp sync``
    (on the branch and beside it): one line naming the file, its line and the problem's
    code, saying to fix it and sync again; nothing committed, pushed or changed. A child
    whose parent does not exist, committed by hand (``git commit -a``): the store-wide
    check catches what the commit would push. Once fixed, the sync publishes."""
    _, other, exp_id = _two_clones(tmp_path)
    remote = tmp_path / "remote.git"
    published = git(remote, "rev-parse", "main")
    path = next((other / "experiments").rglob(f"{exp_id}-*.md"))
    name = path.relative_to(other).as_posix()
    good = path.read_bytes()
    bad = good.replace(b"\nscore: 1.2\n", b"\nscore: fast\n")
    path.write_bytes(bad)
    line = bad.decode().splitlines().index("score: fast") + 1
    before = _state(other)
    for args in ((), ("--branch", "kexp/other"), ("--dry-run",)):
        done = run_kexp("sync", *args, cwd=other)
        assert done.returncode == 1, (args, done.stdout, done.stderr)
        (said,) = done.stderr.strip().splitlines()
        assert f"{name}:{line}: error[" in said and "score" in said, said
        assert "kexp validate" in said and "kexp sync again" in said
        # A branch new to the remote: what it adds to the remote's default branch.
        assert f"--changed origin/{'HEAD' if '--branch' in args else 'main'}" in said, said
        assert _state(other) == before and path.read_bytes() == bad
    assert git(remote, "rev-parse", "main") == published
    assert git(remote, "branch", "--list", "kexp/*") == ""

    path.write_bytes(good)
    child = _record(other, change_summary="Child - +5%", pid=exp_id, measured_against="parent")
    child_path = next((other / "experiments").rglob(f"{child}-*.md"))
    child_path.write_text(child_path.read_text().replace(exp_id, "0123456789abcdef"))
    git(other, "add", "experiments")
    git(other, "commit", "-q", "-m", "child, by hand")
    before = _state(other)
    done = run_kexp("sync", cwd=other)
    assert done.returncode == 1
    (said,) = done.stderr.strip().splitlines()
    assert f"{child_path.relative_to(other).as_posix()}:" in said
    assert "error[dangling-pid]" in said, said
    assert _state(other) == before and git(remote, "rev-parse", "main") == published

    run_kexp("update", child, "--set", f"pid={exp_id}", cwd=other)
    assert run_kexp("validate", cwd=other).returncode == 0
    done = run_kexp("sync", cwd=other)
    assert done.returncode == 0, done.stderr
    assert git(remote, "rev-parse", "main") == git(other, "rev-parse", "HEAD")


def _validate_hook() -> dict[str, object]:
    """The ``kexp-validate`` hook as ``.pre-commit-hooks.yaml`` declares it."""
    hooks = yaml.safe_load((REPO_ROOT / ".pre-commit-hooks.yaml").read_text(encoding="utf-8"))
    (hook,) = [hook for hook in hooks if hook["id"] == "kexp-validate"]
    return dict(hook)


def _parent_removed(tmp_path: Path) -> tuple[Path, str, str]:
    """A clone whose ``main`` holds a parent and its child; the parent's file deleted
    and the deletion staged (``git rm``), nothing else. Returns (the clone, the
    parent's id, the child's id)."""
    lead, _, parent = _two_clones(tmp_path)
    child = _record(lead, change_summary="Child - +5%", pid=parent, measured_against="parent")
    git(lead, "add", "experiments")
    git(lead, "commit", "-q", "-m", "child")
    gone = next((lead / "experiments").rglob(f"{parent}-*.md"))
    git(lead, "rm", "-q", str(gone.relative_to(lead)))
    return lead, parent, child


def test_the_validate_hook_checks_a_commit_that_only_deletes_a_parent(tmp_path: Path) -> None:
    """pre-commit passes no deleted file to a hook and skips a hook none of whose files
    is staged: a commit that only deletes an experiment others name as parent ran
    nothing. The hook runs on every commit, on the change itself (no file names), so
    the deletion is checked: the child's dangling parent is an error; a commit of a
    healthy store passes. Run as pre-commit runs it: its entry, plus the staged files
    it matches only when it passes file names, and only when it always runs or one
    matched (a deletion is never one)."""
    hook = _validate_hook()
    lead, parent, _ = _parent_removed(tmp_path)

    def run_hook(root: Path) -> int:
        """pre-commit's run of the hook: its exit status (0: passed or skipped)."""
        staged = git(root, "diff", "--cached", "--name-only", "--diff-filter=ACMR").split()
        files = [f for f in staged if re.search(str(hook.get("files", "")), f)]
        if not files and not hook.get("always_run", False):
            return 0  # "(no files to check) Skipped"
        args = shlex.split(str(hook["entry"]))[1:]
        if hook.get("pass_filenames", True):
            args += files
        done = run_kexp(*args, cwd=root)
        said.append(done.stdout + done.stderr)
        return done.returncode

    said: list[str] = []
    assert run_hook(lead) == 1, said
    assert "error[dangling-pid]" in said[-1] and parent in said[-1]
    git(lead, "reset", "-q", "--hard")
    assert run_hook(lead) == 0, said  # nothing staged, a healthy store


def _install_validate_hook(root: Path, tmp_path: Path) -> dict[str, str]:
    """The ``kexp-validate`` hook with its own settings (its entry run by this Python)
    in ``root``'s ``.pre-commit-config.yaml``, installed by the real pre-commit; the
    environment its ``git commit`` runs in."""
    hook = _validate_hook()
    entry = [sys.executable, "-m", *shlex.split(str(hook["entry"]))]
    local = {**hook, "language": "unsupported", "entry": shlex.join(entry)}
    config = {"repos": [{"repo": "local", "hooks": [local]}]}
    (root / ".pre-commit-config.yaml").write_text(yaml.safe_dump(config), encoding="utf-8")
    env = {**os.environ, "PRE_COMMIT_HOME": str(tmp_path / "pre-commit-home")}
    subprocess.run(
        [sys.executable, "-m", "pre_commit", "install"], cwd=root, env=env, check=True,
        capture_output=True,
    )  # fmt: skip
    return env


def test_the_validate_hook_lets_a_new_repositorys_first_commit_through(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A team starts a store in a repository of its own (the kernel's code in another,
    ``KEXP_CODE_REPO``) with the hook installed: there is no HEAD to compare with
    (``--changed HEAD`` was a usage error, exit 2, and blocked the first commit). The
    first commit's change is the whole store: a valid one is made, an invalid one
    refused naming its problem."""
    pytest.importorskip("pre_commit")
    code = init_repo(tmp_path / "code")
    monkeypatch.setenv("KEXP_CODE_REPO", str(code))
    base = git(code, "rev-parse", "HEAD")
    root = tmp_path / "new"
    root.mkdir()
    git(root, "init", "-q", "-b", "main")
    git(root, "config", "user.name", "Lead")
    git(root, "config", "user.email", "lead@example.com")
    env = _install_validate_hook(root, tmp_path)
    (root / "experiments").mkdir()
    made = _record(root, change_summary="Unroll 4 - +20%", score=1.2, base_commit=base)
    broken = _record(root, change_summary="Tile 64 - +3%", score=1.03, base_commit=base)
    path = next((root / "experiments").rglob(f"{broken}-*.md"))
    path.write_text(path.read_text().replace("score: 1.03", "score: fast"), encoding="utf-8")
    git(root, "add", "-A")
    commit = subprocess.run(
        ["git", "commit", "-m", "first"], cwd=root, env=env, capture_output=True, text=True
    )
    said = commit.stdout + commit.stderr
    assert commit.returncode != 0 and "error[" in said and broken in said, said
    path.unlink()
    git(root, "add", "-A")
    commit = subprocess.run(
        ["git", "commit", "-m", "first"], cwd=root, env=env, capture_output=True, text=True
    )
    assert commit.returncode == 0, commit.stdout + commit.stderr
    assert made in git(root, "show", "--stat", "HEAD")


def test_the_validate_hook_refuses_the_deletion_under_the_real_pre_commit(
    tmp_path: Path,
) -> None:
    """The same through the real pre-commit (installed in the clone, ``git commit``),
    with the hook's own settings (its entry run by this Python): the commit that only
    deletes a parent is refused, naming the dangling parent; with the child deleted
    too, it is made."""
    pytest.importorskip("pre_commit")
    lead, parent, child = _parent_removed(tmp_path)
    env = _install_validate_hook(lead, tmp_path)
    git(lead, "add", ".pre-commit-config.yaml")
    git(lead, "commit", "-q", "--no-verify", "-m", "pre-commit", "--", ".pre-commit-config.yaml")
    head = git(lead, "rev-parse", "HEAD")
    commit = subprocess.run(
        ["git", "commit", "-m", "drop the parent"], cwd=lead, env=env, capture_output=True,
        text=True,
    )  # fmt: skip
    assert commit.returncode != 0, commit.stdout + commit.stderr
    said = commit.stdout + commit.stderr
    assert "error[dangling-pid]" in said and parent in said, said
    assert git(lead, "rev-parse", "HEAD") == head
    child_file = next((lead / "experiments").rglob(f"{child}-*.md"))
    git(lead, "rm", "-q", str(child_file.relative_to(lead)))
    commit = subprocess.run(
        ["git", "commit", "-m", "drop both"], cwd=lead, env=env, capture_output=True, text=True
    )
    assert commit.returncode == 0, commit.stdout + commit.stderr


def test_review_says_prominently_when_a_branch_loses_a_failures_lesson(tmp_path: Path) -> None:
    """A failure pushed to ``main``; another clone's branch deletes its file (``kexp
    rm``), and blanks the key insight of a second failure. ``kexp review`` says each
    lesson lost at the top ("Removed: ID (outcome, summary)", the insight lost), in the
    Markdown and in the JSON; the blanked one is not a lesson "added"."""
    lead, other, root = _two_clones(tmp_path)
    insight = "bank conflicts on the 32-wide tile ate the gain"
    tiled = _record(
        lead, change_summary="Shared memory tiling - -30%", score=0.7, pid=root,
        measured_against="parent",
        detailed_description=f"**Approach**: tile\n\n**Key insight**: {insight}",
    )  # fmt: skip
    wide = _record(
        lead, change_summary="Wide loads - -10%", score=0.9, pid=root,
        measured_against="parent",
        detailed_description="**Approach**: 128-bit loads\n\n**Key insight**: L2 bound",
    )  # fmt: skip
    git(lead, "add", "experiments")
    git(lead, "commit", "-q", "-m", "two failures")
    git(lead, "push", "-q", "origin", "main")
    git(other, "pull", "-q")
    git(other, "checkout", "-q", "-b", "kexp/other")
    assert run_kexp("rm", tiled, "--yes", cwd=other).returncode == 0
    path = next((other / "experiments").rglob(f"{wide}-*.md"))
    path.write_text(path.read_text().replace("**Key insight**: L2 bound", "**Key insight**:"))
    git(other, "commit", "-q", "-am", "tidy")
    git(other, "push", "-q", "origin", "kexp/other")
    git(lead, "fetch", "-q")

    md = run_kexp("review", "origin/main", "origin/kexp/other", cwd=lead).stdout
    headline = md.split("### ")[0]
    assert f"Removed: `{tiled}` (regression, Shared memory tiling - -30%)" in headline, md
    assert "a failure removed is a lesson lost" in headline and insight in headline
    assert f"Key insight removed: `{wide}` (regression, Wide loads - -10%)" in headline
    assert "L2 bound" in headline
    assert "Lessons added" not in md  # the blanked insight is a lesson lost, not added
    data = json.loads(
        run_kexp("review", "origin/main", "origin/kexp/other", "--json", cwd=lead).stdout
    )
    lost = {item["id"]: item for item in data["summary"]["lessons_lost"]}
    assert lost[tiled] == {
        "id": tiled, "how": "removed", "outcome": "regression",
        "change_summary": "Shared memory tiling - -30%", "key_insight": insight,
    }  # fmt: skip
    assert lost[wide]["how"] == "key insight removed" and lost[wide]["key_insight"] == "L2 bound"


def test_the_first_sync_of_a_new_branch_is_not_refused_for_what_the_remote_holds(
    tmp_path: Path,
) -> None:
    """``main`` on the remote already holds a file ``kexp validate`` rejects (pushed by
    hand with git). Another clone's first ``kexp sync --branch kexp/other`` of a valid
    experiment publishes it: only what the branch adds to the remote is checked."""
    lead, other, exp_id = _two_clones(tmp_path)
    path = next((lead / "experiments").rglob(f"{exp_id}-*.md"))
    path.write_text(path.read_text().replace("\nscore: 1.2\n", "\nscore: fast\n"))
    git(lead, "commit", "-q", "-am", "by hand")
    git(lead, "push", "-q", "origin", "main")
    git(other, "pull", "-q")
    assert run_kexp("validate", cwd=other).returncode == 1
    _record(other, change_summary="Vectorized - +3%", score=1.03)
    done = run_kexp("sync", "--branch", "kexp/other", cwd=other)
    assert done.returncode == 0, done.stderr
    assert git(tmp_path / "remote.git", "branch", "--list", "kexp/other").strip() == "kexp/other"


def test_sync_refuses_a_merge_that_leaves_a_child_without_its_parent(tmp_path: Path) -> None:
    """Each side valid alone: the first clone removed an experiment and synced; the
    second built a child on it and syncs. The merge would publish the child's dangling
    parent: refused in one line before the push, the local commit kept, the working
    tree and the remote as they were."""
    lead, other, parent = _two_clones(tmp_path)
    assert run_kexp("rm", parent, "--yes", cwd=lead).returncode == 0
    assert run_kexp("sync", cwd=lead).returncode == 0
    remote = tmp_path / "remote.git"
    published = git(remote, "rev-parse", "main")
    child = _record(other, change_summary="Child - +5%", pid=parent, measured_against="parent")
    done = run_kexp("sync", cwd=other)
    assert done.returncode == 1, done.stdout + done.stderr
    (said,) = done.stderr.strip().splitlines()
    assert "error[dangling-pid]" in said and child in said, said
    assert "git -c merge.directoryRenames=false merge origin/main" in said
    assert "kexp sync again" in said
    assert git(remote, "rev-parse", "main") == published
    assert git(other, "log", "-1", "--format=%s").startswith("kexp sync:")  # kept
    assert next((other / "experiments").rglob(f"{parent}-*.md")).is_file()  # not merged
