"""An id held at two paths by one ref (a pushed branch that copied an experiment's file
and edited the copy), read across refs (``--all-refs``): one experiment, one entry, the
working tree's own file said to be its own; the other file is skipped with
``kexp validate``'s words for it, and validate still names both. Real clones of a bare
remote."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from conftest import git
from test_refs_removed import invoke
from test_sync import clone, make_remote, record

from kexp import Store
from kexp.core.errors import InvalidExperimentWarning
from kexp.storage.sync import sync


def _copied_on_a_branch(tmp_path: Path) -> tuple[str, Path, str]:
    """A publishes X (1.02) on main; B copies X's file to a second name on the branch
    dup, edits the copy to 1.30 and pushes it; A fetches: (X's id, A, the copy's path)."""
    remote, base = make_remote(tmp_path)
    a = clone(remote, tmp_path / "a")
    made = record(a, base, "Unroll by 4 - +2%", score=1.02, operator_sig="csrc/k.cu: k")
    sync(Store(a))
    b = clone(remote, tmp_path / "b")
    git(b, "switch", "-q", "-c", "dup")
    original = next((b / "experiments").rglob(f"{made.id}-*.md"))
    copy = original.with_name(original.name.replace("unroll-by-4", "UNROLL-by-4"))
    copy.write_text(original.read_text().replace("score: 1.02", "score: 1.3"))
    git(b, "add", "-A")
    git(b, "commit", "-q", "-m", "a second copy, edited")
    git(b, "push", "-q", "origin", "dup")
    git(a, "fetch", "-q")
    return made.id, a, copy.relative_to(b).as_posix()


def test_an_id_at_two_paths_on_a_ref_is_one_entry_and_the_copy_is_warned(
    tmp_path: Path,
) -> None:
    """list, stats, top and context count X once (they counted two experiments, both
    "origin/dup (older elsewhere)"), as the working tree's own file; the copy is
    skipped, said a duplicate id at origin/dup; validate names both files."""
    exp_id, a, copy = _copied_on_a_branch(tmp_path)
    listed = invoke(a, "list", "--all-refs", "--json")
    rows = json.loads(listed.stdout)
    assert [r["id"] for r in rows] == [exp_id], rows
    assert rows[0]["ref"] == "local" and rows[0]["score"] == 1.02, rows
    assert "origin/dup" in rows[0]["refs"] and "other_versions" not in rows[0], rows
    warned = " ".join(listed.stderr.split())
    assert f"{Path(copy).name} at origin/dup: error[duplicate-id] id {exp_id}" in warned, warned
    assert json.loads(invoke(a, "stats", "--all-refs", "--json").stdout)["total"] == 1
    top = json.loads(invoke(a, "top", "--all-refs", "--json", "-n", "10").stdout)
    assert [r["id"] for r in top] == [exp_id], top
    packet = invoke(a, "context", "--operator", "csrc/k.cu: k", "--all-refs").stdout
    assert "1 experiment(s) on this operator" in packet, packet
    with pytest.warns(InvalidExperimentWarning, match="duplicate-id"):
        assert [e.id for e in Store(a, all_refs=True).list_experiments()] == [exp_id]
    checked = invoke(a, "validate", "--all-refs")
    assert checked.exit_code != 0
    assert checked.stdout.count("error[duplicate-id]") == 2, checked.stdout
