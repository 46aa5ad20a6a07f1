"""``kexp lessons --all-refs`` and ``kexp tree --all-refs`` say where each experiment was
found, as ``top``'s REF column and ``show`` do, at 80 columns and in ``--json``."""

from __future__ import annotations

import json
from pathlib import Path

from click.testing import CliRunner
from conftest import git
from test_sync import clone, make_remote, record

from kexp import Store
from kexp.cli.main import main
from kexp.storage.sync import sync

NARROW = {"COLUMNS": "80", "KEXP_PAGER": "cat"}


def _kexp(root: Path, *args: str) -> str:
    done = CliRunner().invoke(main, ["--root", str(root), *args], env=NARROW)
    assert done.exit_code == 0, done.output
    return done.stdout


def test_lessons_and_tree_across_refs_name_the_ref_of_each_entry(tmp_path: Path) -> None:
    remote, base = make_remote(tmp_path)
    alice, bob = clone(remote, tmp_path / "alice"), clone(remote, tmp_path / "bob")
    parent = record(bob, base, "Unrolled by 4 - +1.9%")
    spill = record(
        bob, base, "Unrolled by 16 with a long summary that fills the line - -3.0% (spills)",
        score=0.97, pid=parent.id, measured_against="reference",
    )  # fmt: skip
    sync(Store(bob), branch="kexp/bob")
    mine = record(alice, base, "Vectorized stores - -2.0%", score=0.98)
    git(alice, "fetch", "-q")

    text = _kexp(alice, "lessons", "--all-refs")
    lines = text.splitlines()
    assert all(len(line) <= 80 for line in lines), text
    at = next(i for i, line in enumerate(lines) if spill.id[:10] in line)
    assert lines[at + 2].startswith("      On: "), text  # under its 2-line summary
    assert lines[at + 3].startswith("          MI300X"), text  # its campaign, wrapped
    assert lines[at + 4].startswith(f"      Over parent {parent.id[:10]}: "), text
    assert lines[at + 5] == "      Ref: origin/kexp/bob", text  # under its campaign
    at = next(i for i, line in enumerate(lines) if mine.id[:10] in line)
    assert lines[at + 3] == "      Ref: local", text
    assert "Ref:" not in _kexp(alice, "lessons")  # one place read: nothing to tell apart
    found = json.loads(_kexp(alice, "lessons", "--all-refs", "--json"))
    assert {(x["id"], x["ref"]) for x in found["regression"]} == {
        (spill.id, "origin/kexp/bob"), (mine.id, "local"),
    }  # fmt: skip

    text = _kexp(alice, "tree", "--all-refs")
    lines = text.splitlines()
    assert all(len(line) <= 80 for line in lines), text
    for exp in (parent, spill):
        (line,) = [x for x in lines if exp.id[:10] in x]
        assert line.rstrip().endswith("@1"), text
    (line,) = [x for x in lines if mine.id[:10] in x]
    assert "@" not in line, text
    assert "@1: found on origin/kexp/bob" in lines, text
    assert "no @: found in the working tree (local)" in lines, text
    assert "@1" not in _kexp(alice, "tree")
    trees = json.loads(_kexp(alice, "tree", "--all-refs", "--json"))
    refs = {tree["id"]: tree["ref"] for tree in trees}
    assert refs == {parent.id: "origin/kexp/bob", mine.id: "local"}
