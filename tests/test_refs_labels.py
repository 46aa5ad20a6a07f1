"""Which place a read across refs (``--all-refs``) names for each experiment: ``local``
when the working tree holds that version, else the remote's default branch when it holds
it, else a side branch; one rule for ``top``, ``list``, ``similar`` and ``context``.
Real clones of a bare remote, real ``kexp`` processes; the truth read from git."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from conftest import edit_in_place, git, run_kexp
from test_sync import clone, make_remote, record

from kexp import Store
from kexp.storage.sync import sync

OPERATOR = "csrc/k.cu: k"


def _kexp_json(root: Path, *args: str) -> Any:
    done = run_kexp(*args, "--json", cwd=root, process=True)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def _merged_then_side_branch_syncs_again(tmp_path: Path) -> tuple[Path, str, str, str]:
    """Alice's pull request merged (``--no-ff``), Bob's squash-merged; Bob records a
    next step and syncs ``--branch kexp/bob`` again, which merges main (and so Alice's
    experiment) into his branch. Dave fetches: (Dave, Alice's id, Bob's first, next)."""
    remote, base = make_remote(tmp_path)
    alice, bob = clone(remote, tmp_path / "alice"), clone(remote, tmp_path / "bob")
    dave, lead = clone(remote, tmp_path / "dave"), clone(remote, tmp_path / "lead")
    a = record(alice, base, "Tiling - +20%", score=1.2, operator_sig=OPERATOR, dtype_sig="bf16")
    sync(Store(alice), branch="kexp/alice")
    b = record(bob, base, "Other - +10%", score=1.1, operator_sig=OPERATOR, dtype_sig="fp16")
    sync(Store(bob), branch="kexp/bob")
    git(lead, "fetch", "-q")
    git(lead, "merge", "-q", "--no-ff", "-m", "PR alice", "origin/kexp/alice")
    git(lead, "merge", "-q", "--squash", "origin/kexp/bob")
    git(lead, "commit", "-q", "-m", "PR bob, squashed")
    git(lead, "push", "-q", "origin", "main")
    b2 = record(
        bob, base, "Next - +5%", score=1.05, pid=b.id, measured_against="parent",
        operator_sig=OPERATOR, dtype_sig="fp16",
    )  # fmt: skip
    sync(Store(bob), branch="kexp/bob")
    git(dave, "fetch", "-q")
    # The truth, from git: Alice's file is on main and, alike, on Bob's branch (merged
    # in with main); Bob's next step is on his branch alone; Dave's checkout has none.
    on_main = git(dave, "ls-tree", "-r", "origin/main", "--", "experiments")
    on_bob = git(dave, "ls-tree", "-r", "origin/kexp/bob", "--", "experiments")
    alices = [line for line in on_main.splitlines() if a.id in line]
    assert len(alices) == 1 and alices[0] in on_bob.splitlines()
    assert b2.id in on_bob and b2.id not in on_main
    assert not list((dave / "experiments").rglob(f"{a.id}-*.md"))
    return dave, a.id, b.id, b2.id


def test_a_merged_experiment_is_named_on_the_default_branch_not_a_side_branch(
    tmp_path: Path,
) -> None:
    """A version the remote's default branch holds is labelled with it (the repro: it
    read ``origin/kexp/bob +2`` once Bob's branch held main, and ``context`` sent Dave
    to Bob's branch for Alice's merged code); what only a side branch holds names it."""
    dave, a, b, b2 = _merged_then_side_branch_syncs_again(tmp_path)
    for command in ("top", "list"):
        refs = {row["id"]: row["ref"] for row in _kexp_json(dave, command, "--all-refs")}
        assert refs[a] == "origin/main", (command, refs)
        assert refs[b] == "origin/main", (command, refs)
        assert refs[b2] == "origin/kexp/bob", (command, refs)
    similar = _kexp_json(dave, "similar", a, "--all-refs")
    matches = similar if isinstance(similar, list) else similar["matches"]
    refs = {row["id"]: row["ref"] for row in matches}
    assert refs.get(b) == "origin/main", similar
    context = _kexp_json(dave, "context", "--operator", "k", "--dtype", "bf16", "--all-refs")
    assert context["best"]["id"] == a and context["best"]["ref"] == "origin/main", context
    text = run_kexp("context", "--operator", "k", "--all-refs", cwd=dave, process=True).stdout
    assert "origin/kexp/bob" not in "".join(
        line for line in text.splitlines() if a[:10] in line or b[:10] in line
    ), text
    # The library says the same: exp.where.
    where = {e.id: e.where for e in Store(dave, all_refs=True).list_experiments()}
    assert where[a] is not None and where[a].ref == "origin/main"


def _unreviewed_edit_of_a_merged_score(tmp_path: Path) -> tuple[Path, list[str], float, float]:
    """Main holds Alice's chain A1 (1.12 over the reference) → A2 (1.08) → A3 (1.06);
    Bob's pull request branch ``kexp/bob-edit`` hand-edits A2's score to 1.18. The
    lead, on main, pulls (fetching Bob's branch): (the lead, the ids, main's
    cumulative score of A3 and the one the branch's A2 gives, both from git)."""
    remote, base = make_remote(tmp_path)
    alice, bob = clone(remote, tmp_path / "alice"), clone(remote, tmp_path / "bob")
    lead = clone(remote, tmp_path / "lead")
    a1 = record(alice, base, "Tiling - +12%", score=1.12, operator_sig=OPERATOR)
    a2 = record(alice, base, "Swizzle - +8%", score=1.08, pid=a1.id,
                measured_against="parent", operator_sig=OPERATOR)  # fmt: skip
    a3 = record(alice, base, "TMA - +6%", score=1.06, pid=a2.id,
                measured_against="parent", operator_sig=OPERATOR)  # fmt: skip
    sync(Store(alice))
    git(bob, "pull", "-q")
    git(bob, "switch", "-q", "-c", "kexp/bob-edit")
    path = next((bob / "experiments").rglob(f"{a2.id}-*.md"))
    path.write_text(path.read_text().replace("score: 1.08\n", "score: 1.18\n"))
    git(bob, "commit", "-q", "-am", "A2 remeasured")
    git(bob, "push", "-q", "origin", "kexp/bob-edit")
    git(lead, "pull", "-q")

    def scores(ref: str) -> list[float]:
        found = []
        for exp in (a1, a2, a3):
            assert exp.path is not None
            relative = exp.path.relative_to(alice).as_posix()
            text = git(lead, "show", f"{ref}:{relative}")
            found.append(float(text.split("\nscore: ", 1)[1].split("\n", 1)[0]))
        return found

    mains, bobs = scores("origin/main"), scores("origin/kexp/bob-edit")
    assert mains[1] != bobs[1] and (mains[0], mains[2]) == (bobs[0], bobs[2])
    return lead, [a1.id, a2.id, a3.id], mains[0] * mains[1] * mains[2], bobs[0] * bobs[1] * bobs[2]


def test_an_unmerged_edit_ranked_is_said_with_mains_numbers_in_every_view(
    tmp_path: Path,
) -> None:
    """The branch's newer A2 is ranked (the design: the newer version by ancestry), but
    nothing passes it off as main's: A2 reads ``unmerged`` and names Bob's branch, A3
    (its own file local) ``built on unmerged``, and ``show``, ``context``, ``--json`` and
    the Parquet export give main's numbers beside the ranked ones (the repro: context's
    current best and top said 1.4009 for a row labelled ``local``, unmarked)."""
    lead, (a1, a2, a3), mains, ranked = _unreviewed_edit_of_a_merged_score(tmp_path)
    rows = {row["id"]: row for row in _kexp_json(lead, "top", "--all-refs")}
    assert abs(rows[a3]["cumulative_score"] - ranked) < 1e-9  # ranked: the newer version
    assert rows[a2]["ref"] == "origin/kexp/bob-edit"
    assert rows[a2]["unmerged"]["own"] is True and rows[a2]["unmerged"]["score"] == 1.08
    assert rows[a3]["ref"] == "local" and rows[a3]["unmerged"]["own"] is False
    assert rows[a3]["unmerged"]["refs"] == ["origin/kexp/bob-edit"]
    assert abs(rows[a3]["unmerged"]["cumulative_score"] - mains) < 1e-9
    assert "unmerged" not in rows[a1]
    for command in ("top", "list"):
        text = run_kexp(command, "--all-refs", cwd=lead, process=True).stdout
        lines = {i: line for line in text.splitlines() for i in (a1, a2, a3) if i[:10] in line}
        assert "(built on unmerged)" in lines[a3] and "origin/kexp/bob-edit" in lines[a2], text
        assert "(unmerged; older elsewhere)" in lines[a2] and "unmerged" not in lines[a1], text
    shown = run_kexp("show", a3, "--all-refs", cwd=lead, process=True).stdout
    assert "origin/kexp/bob-edit" in shown and f"{mains:.4f}" in shown, shown
    context = run_kexp("context", "--operator", "k", "--all-refs", cwd=lead, process=True)
    best = context.stdout.split("## Current best", 1)[1].split("\n## ", 1)[0]
    assert a3[:10] in best and f"{ranked:.4f}x" in best, best
    assert "built on unmerged" in best and f"{mains:.4f}" in best, best
    assert "origin/kexp/bob-edit" in best, best
    data = _kexp_json(lead, "context", "--operator", "k", "--all-refs")
    assert abs(data["best"]["unmerged"]["cumulative_score"] - mains) < 1e-9, data["best"]
    # Without --all-refs the lead reads main's numbers alone, unmarked.
    alone = {row["id"]: row for row in _kexp_json(lead, "top")}
    assert abs(alone[a3]["cumulative_score"] - mains) < 1e-9 and "unmerged" not in alone[a3]


def test_the_parquet_export_across_refs_says_what_top_says(tmp_path: Path) -> None:
    """The Parquet export read across refs carries the same numbers as ``top`` and the
    same refs, with main's cumulative score beside the ranked one."""
    pq = pytest.importorskip("pyarrow.parquet")
    lead, (a1, a2, a3), mains, ranked = _unreviewed_edit_of_a_merged_score(tmp_path)
    out = tmp_path / "out"
    done = run_kexp("export", "--all-refs", "--format", "parquet", "-o", str(out), cwd=lead,
                    process=True)  # fmt: skip
    assert done.returncode == 0, done.stderr
    table = pq.read_table(next(out.rglob("experiments/**/*.parquet"))).to_pylist()
    exported = {row["id"]: row for row in table}
    top = {row["id"]: row for row in _kexp_json(lead, "top", "--all-refs")}
    for exp_id in (a1, a2, a3):
        assert exported[exp_id]["cumulative_score"] == top[exp_id]["cumulative_score"]
        assert exported[exp_id]["ref"] == top[exp_id]["ref"]
    assert exported[a3]["unmerged_on"] == ["origin/kexp/bob-edit"]
    assert abs(exported[a3]["default_cumulative_score"] - mains) < 1e-9
    assert exported[a1]["unmerged_on"] == [] and exported[a1]["default_cumulative_score"] is None
    assert abs(exported[a3]["cumulative_score"] - ranked) < 1e-9


def test_a_step_judged_over_an_unmerged_parent_is_marked_built_on_unmerged(
    tmp_path: Path,
) -> None:
    """Main holds a root (1.20) and its child measured against the reference (1.19:
    judged over the root's cumulative score, a regression there); Bob's pull request
    branch remeasures the root at 1.10. Read across refs, the child's outcome flips to
    an improvement because of Bob's unmerged score: it is marked ``built on unmerged``
    naming his branch, though its own file is ``local`` (the repro: ``improvement``,
    ``ref: local``, unmarked)."""
    remote, base = make_remote(tmp_path)
    alice, bob = clone(remote, tmp_path / "alice"), clone(remote, tmp_path / "bob")
    lead = clone(remote, tmp_path / "lead")
    root = record(alice, base, "Root - +20%", score=1.20, operator_sig=OPERATOR)
    child = record(alice, base, "Child - +19% over the reference", score=1.19, pid=root.id,
                   measured_against="reference", operator_sig=OPERATOR)  # fmt: skip
    sync(Store(alice))
    git(bob, "pull", "-q")
    git(bob, "switch", "-q", "-c", "kexp/bob-edit")
    path = next((bob / "experiments").rglob(f"{root.id}-*.md"))
    path.write_text(path.read_text().replace("score: 1.2\n", "score: 1.1\n"))
    git(bob, "commit", "-q", "-am", "root remeasured")
    git(bob, "push", "-q", "origin", "kexp/bob-edit")
    git(lead, "pull", "-q")
    alone = {row["id"]: row for row in _kexp_json(lead, "top")}
    rows = {row["id"]: row for row in _kexp_json(lead, "top", "--all-refs")}
    assert rows[root.id]["score"] == 1.1 and rows[root.id]["unmerged"]["own"] is True
    assert rows[child.id]["outcome"] != alone[child.id]["outcome"]  # flipped by Bob's score
    assert rows[child.id]["ref"] == "local" and rows[child.id]["unmerged"]["own"] is False
    assert rows[child.id]["unmerged"]["refs"] == ["origin/kexp/bob-edit"]


def _refs_holding_from_git(root: Path, path: str) -> list[str]:
    """The branches and remote-tracking branches (short names) whose tree holds ``path``
    (relative to the repository), but the checked-out branch: read from git alone."""
    checked_out = git(root, "symbolic-ref", "--short", "HEAD")
    names = git(root, "for-each-ref", "--format=%(refname:short) %(symref)",
                "refs/heads", "refs/remotes").splitlines()  # fmt: skip
    held = []
    for line in names:
        name, _, symref = line.partition(" ")
        if symref or name == checked_out:  # origin/HEAD is a name for origin/main
            continue
        if git(root, "ls-tree", "--name-only", name, "--", path):
            held.append(name)
    return sorted(held)


def test_the_checked_out_branch_is_the_working_tree_not_another_place(tmp_path: Path) -> None:
    """Trial K09: read across refs, a row the working tree holds counted the branch
    checked out (its commit is the working tree's) as another place: ``local +1`` with
    no other branch, ``local +5`` for 3 agent branches, and the report read "1 ref:
    main". The count names only other refs, the truth read from git; the report says
    which branch the working tree is; the branch's older version of an uncommitted
    edit is still said."""
    from reportcheck import elements

    remote, base = make_remote(tmp_path)
    lead = clone(remote, tmp_path / "lead")
    a = record(lead, base, "Tiling - +20%", score=1.2, operator_sig=OPERATOR)
    git(lead, "add", "experiments")
    git(lead, "commit", "-q", "-m", "tiling")
    assert a.path is not None
    path = a.path.relative_to(lead).as_posix()
    # No remote branch holds it yet: the checked-out main alone does, beside the tree.
    assert _refs_holding_from_git(lead, path) == []
    rows = {row["id"]: row for row in _kexp_json(lead, "top", "--all-refs")}
    assert rows[a.id]["ref"] == "local" and rows[a.id]["refs"] == ["local"], rows
    table = run_kexp("top", "--all-refs", cwd=lead, process=True).stdout
    assert [line.split()[2] for line in table.splitlines() if a.id[:10] in line] == ["local"]
    # Pushed; an agent branches off main and publishes a step of its own; fetched.
    git(lead, "push", "-q", "origin", "main")
    agent = clone(remote, tmp_path / "agent", branch="kexp/agent-1")
    step = record(agent, base, "Unroll - +5%", score=1.05, pid=a.id,
                  measured_against="parent", operator_sig=OPERATOR)  # fmt: skip
    git(agent, "add", "experiments")
    git(agent, "commit", "-q", "-m", "unroll")
    git(agent, "push", "-q", "origin", "kexp/agent-1")
    git(lead, "fetch", "-q")
    others = _refs_holding_from_git(lead, path)
    assert others == ["origin/kexp/agent-1", "origin/main"]
    rows = {row["id"]: row for row in _kexp_json(lead, "top", "--all-refs")}
    assert rows[a.id]["refs"] == ["local", *others], rows
    assert rows[step.id]["ref"] == "origin/kexp/agent-1", rows
    table = run_kexp("top", "--all-refs", cwd=lead, process=True).stdout
    mine = [line for line in table.splitlines() if a.id[:10] in line]
    assert len(mine) == 1 and f" local +{len(others)} " in mine[0], table
    # The report says what it read: the working tree (branch main) and the other refs.
    out = tmp_path / "report"
    done = run_kexp("report", "--all-refs", "-o", str(out), cwd=lead, process=True)
    assert done.returncode == 0, done.stderr
    lead_text = " ".join(
        " ".join(e.text.split()) for e in elements(out / "index.html") if "lead" in e.classes
    )
    assert (
        "read from the working tree (branch main) and 2 other refs: "
        "origin/kexp/agent-1, origin/main." in lead_text
    ), lead_text
    # An uncommitted edit: the branch checked out holds the older version, said so.
    edit_in_place(
        tmp_path / "lead" / path, lambda text: text.replace("score: 1.2\n", "score: 1.25\n")
    )
    rows = {row["id"]: row for row in _kexp_json(lead, "top", "--all-refs")}
    assert rows[a.id]["refs"] == ["local"], rows
    assert "main" in rows[a.id]["other_versions"], rows
