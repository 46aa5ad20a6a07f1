"""Which place a read across refs (``--all-refs``) names for each experiment: ``local``
when the working tree holds that version, else the remote's default branch when it holds
it, else a side branch; one rule for ``top``, ``list``, ``similar`` and ``context``.
Real clones of a bare remote, real ``kexp`` processes; the truth read from git."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from conftest import git, run_kexp
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
