"""Reading across refs (``--refs``, ``--all-refs``): the working tree plus the store at
every matching ref, read from git objects, with real clones of a bare remote.

The truth is what the files hold (read with git from each branch), never kexp's own
report.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest
from conftest import git, run_kexp
from test_sync import CLONES, PER_CLONE, _run_clones, clone, make_remote, record

from kexp import GitError, Store
from kexp.publish import sync
from kexp.refs import WORKING_TREE, RefsStore


def test_eight_branches_top_all_refs_lists_each_once_with_its_branch(tmp_path: Path) -> None:
    remote, base = make_remote(tmp_path)
    branches: list[str | None] = [f"kexp/agent-{i}" for i in range(CLONES)]
    roots, results = _run_clones(tmp_path, remote, base, branches)
    made_by = {exp_id: index for index, (ids, _) in results.items() for exp_id in ids}
    assert len(made_by) == CLONES * PER_CLONE
    for index in (0, CLONES - 1):  # from any clone
        root = roots[index]
        git(root, "fetch", "-q")
        shown = run_kexp("top", "--all-refs", "--json", "-n", "1000", cwd=root)
        assert shown.returncode == 0, shown.stderr
        records = json.loads(shown.stdout)
        ids = [r["id"] for r in records]
        assert sorted(ids) == sorted(made_by)  # all, each once
        for record_ in records:
            assert record_["ref"].endswith(f"kexp/agent-{made_by[record_['id']]}")
            assert "other_versions" not in record_
        table = run_kexp("top", "--all-refs", "-n", "5", cwd=root)
        assert table.returncode == 0 and "REF" in table.stdout.splitlines()[0]


def test_same_content_in_several_places_is_listed_once(tmp_path: Path) -> None:
    remote, base = make_remote(tmp_path)
    alice, bob = clone(remote, tmp_path / "alice"), clone(remote, tmp_path / "bob")
    exp = record(alice, base, "Unrolled by 4 - +1.9%")
    sync(Store(alice))
    git(bob, "fetch", "-q")
    across = RefsStore(Store(alice), ["origin/*"], all_refs=True)
    found = across.list_experiments()
    assert [e.id for e in found] == [exp.id]
    where = across.where(found[0])
    assert where is not None
    assert set(where.refs) == {WORKING_TREE, "main", "origin/main"} and not where.other_versions
    assert where.ref in ("main", "origin/main")
    # Bob, who never pulled, sees it on origin/main.
    seen = RefsStore(Store(bob), ["origin/*"])
    assert [e.id for e in seen.top_experiments()] == [exp.id]
    assert seen.where(seen.get_experiment(exp.id[:8])).ref == "origin/main"  # type: ignore[union-attr]
    assert Store(bob).list_experiments() == []  # his own store: still nothing


def test_a_correction_on_two_branches_shows_both_versions_newest_first(
    tmp_path: Path,
) -> None:
    remote, base = make_remote(tmp_path)
    alice = clone(remote, tmp_path / "alice")
    exp = record(alice, base, "Unrolled by 4 - +1.9%")
    sync(Store(alice))
    bob = clone(remote, tmp_path / "bob")
    for who, score, when in ((alice, 1.021, "2026-01-01T00:00:00Z"),
                             (bob, 1.017, "2026-02-01T00:00:00Z")):  # fmt: skip
        git(who, "checkout", "-q", "-b", f"fix-{who.name}")
        Store(who).update_experiment(exp.id, score=score)
        git(who, "add", "experiments")
        env = {"GIT_COMMITTER_DATE": when, "GIT_AUTHOR_DATE": when}
        subprocess_git(who, env, "commit", "-q", "-m", f"correct {who.name}")
        git(who, "push", "-q", "origin", f"fix-{who.name}")
    git(alice, "fetch", "-q")
    git(alice, "checkout", "-q", "main")  # the working tree holds the first version
    across = RefsStore(Store(alice), ["origin/fix-*"])
    versions = across.versions(exp.id)
    # The working tree's (main's) first, then bob's, the newer commit, then alice's.
    assert [v.score for v in versions] == [1.019, 1.017, 1.021]
    here, newest, older = (across.where(v) for v in versions)
    assert here is not None and here.ref == WORKING_TREE
    assert newest is not None and older is not None
    assert newest.ref == "origin/fix-bob" and older.ref == "origin/fix-alice"
    assert newest.other_versions == (WORKING_TREE, "origin/fix-alice")
    assert "origin/fix-alice" in newest.note
    assert sorted(e.score for e in across.list_experiments()) == [1.017, 1.019, 1.021]
    shown = run_kexp("show", exp.id[:10], "--refs", "origin/fix-*", cwd=alice)
    assert shown.returncode == 0, shown.stderr
    assert shown.stdout.index("1.0190") < shown.stdout.index("1.0170")
    assert shown.stdout.index("1.0170") < shown.stdout.index("1.0210")
    notes = [line for line in shown.stdout.splitlines() if "another version on" in line]
    assert len(notes) == 3 and "origin/fix-alice" in notes[0] and "origin/fix-bob" in notes[2]
    data = json.loads(run_kexp("show", exp.id[:10], "--refs", "origin/fix-*", "--json",
                               cwd=alice).stdout)  # fmt: skip
    assert data["score"] == 1.019 and data["ref"] == WORKING_TREE
    assert data["other_versions"] == ["origin/fix-bob", "origin/fix-alice"]


def subprocess_git(cwd: Path, env: dict[str, str], *args: str) -> None:
    import subprocess

    subprocess.run(["git", *args], cwd=cwd, env={**os.environ, **env}, check=True)


@pytest.mark.parametrize(
    "pattern",
    ["--output=/tmp/HACKED", "-x", "a..b", "x y", "refs/*:x", "a?b", "[ab]", "x\ny", "",
     "origin/\u202e*", "HEAD@{1}"],
)  # fmt: skip
def test_hostile_ref_patterns_are_refused_before_git_sees_them(
    tmp_path: Path, pattern: str
) -> None:
    remote, _ = make_remote(tmp_path)
    alice = clone(remote, tmp_path / "alice")
    with pytest.raises(GitError, match="not a ref pattern kexp accepts"):
        RefsStore(Store(alice), [pattern])
    shown = run_kexp("list", "--refs", pattern, cwd=alice)
    assert shown.returncode == 2 and shown.stderr.count("\n") == 1
    assert "not a ref pattern" in shown.stderr
    assert not Path("/tmp/HACKED").exists()


def test_rev_and_refs_together_are_a_usage_error(tmp_path: Path) -> None:
    remote, _ = make_remote(tmp_path)
    alice = clone(remote, tmp_path / "alice")
    shown = run_kexp("top", "--rev", "HEAD", "--all-refs", cwd=alice)
    assert shown.returncode == 2 and "not both" in shown.stderr


def test_the_blob_cache_answers_as_a_cold_read_does(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import kexp.index

    monkeypatch.setattr(kexp.index, "PARALLEL_MIN_FILES", 2)  # the cold read forks
    remote, base = make_remote(tmp_path)
    alice, bob = clone(remote, tmp_path / "alice"), clone(remote, tmp_path / "bob")
    for n in range(6):
        record(alice if n % 2 else bob, base, f"Try {n} - +{n}%", score=1 + n / 100)
    sync(Store(alice))
    sync(Store(bob))
    git(alice, "fetch", "-q")

    def answer() -> list[tuple[str, float, str]]:
        across = RefsStore(Store(alice), ["origin/*"])
        return [(e.id, e.score, e.code_change) for e in across.top_experiments(10)]

    cold = answer()
    cache = list((alice / ".kexp").glob("blobs-*.sqlite"))
    assert len(cache) == 1
    warm = answer()
    assert cold == warm and len(cold) == 6
    # A link planted where the cache goes is never written through.
    cache[0].unlink()
    target = tmp_path / "elsewhere.sqlite"
    cache[0].symlink_to(target)
    with pytest.raises(Exception, match="symbolic link"):
        answer()
    assert not target.exists()


def test_refs_store_corrects_and_deletes_nothing(tmp_path: Path) -> None:
    remote, base = make_remote(tmp_path)
    alice = clone(remote, tmp_path / "alice")
    exp = record(alice, base, "Unrolled by 4 - +1.9%")
    across = RefsStore(Store(alice), all_refs=True)
    with pytest.raises(Exception, match="corrects and deletes nothing"):
        across.update_experiment(exp.id, score=2.0)
    with pytest.raises(Exception, match="corrects and deletes nothing"):
        across.delete_experiment(exp.id)
    assert Store(alice).get_experiment(exp.id).score == 1.019


DIFF = """\
--- a/csrc/cache.cu
+++ b/csrc/cache.cu
@@ -1,3 +1,3 @@
-  for (int i = 0; i < n; ++i) {
+  #pragma unroll 4
+  for (int i = 0; i < n; ++i) {
"""


def test_tried_before_fires_for_a_change_recorded_on_another_branch(tmp_path: Path) -> None:
    remote, base = make_remote(tmp_path)
    alice, bob = clone(remote, tmp_path / "alice"), clone(remote, tmp_path / "bob")
    earlier = record(bob, base, "Unrolled by 4 - +1.9%", code_change=DIFF)
    sync(Store(bob), branch="kexp/bob")
    git(alice, "fetch", "-q")
    (tmp_path / "change.diff").write_text(DIFF)
    arguments = ["add", "--summary", "Unroll 4 again - +1.8%", "--score", "1.018",
                 "--operator", "csrc/cache.cu: k", "--dtype", "bf16", "--env", "MI300X",
                 "--base-commit", base, "--diff-file", str(tmp_path / "change.diff")]  # fmt: skip
    plain = run_kexp(*arguments, cwd=alice)
    assert plain.returncode == 0, plain.stderr
    assert earlier.id not in plain.stderr  # alice's own store has never seen it
    across = run_kexp(*arguments, "--all-refs", cwd=alice)
    assert across.returncode == 0, across.stderr
    warned = [line for line in across.stderr.splitlines() if earlier.id in line]
    assert warned and "origin/kexp/bob" in warned[0]
    # Both were recorded all the same; the Python twin warns as well.
    assert len(Store(alice).list_experiments()) == 2
    store = RefsStore(Store(alice), ["origin/*"])
    with pytest.warns(UserWarning, match=earlier.id):
        store.create_experiment(
            change_summary="Unroll 4, third time - +1.7%", score=1.017, status="done",
            operator_sig="csrc/cache.cu: k", dtype_sig="bf16", env="MI300X",
            base_commit=base, code_change=DIFF,
        )  # fmt: skip
    assert [r.id for r in store.tried_before(DIFF)] == [earlier.id]


def test_export_and_tree_say_where_each_experiment_was_found(tmp_path: Path) -> None:
    remote, base = make_remote(tmp_path)
    alice, bob = clone(remote, tmp_path / "alice"), clone(remote, tmp_path / "bob")
    parent = record(bob, base, "Unrolled by 4 - +1.9%")
    child = record(bob, base, "Unrolled by 8 - +2.5%", pid=parent.id, score=1.025)
    sync(Store(bob), branch="kexp/bob")
    mine = record(alice, base, "Vectorized - +3.0%", score=1.03)
    git(alice, "fetch", "-q")
    exported = run_kexp("export", "--format", "json", "--refs", "origin/*", cwd=alice)
    assert exported.returncode == 0, exported.stderr
    refs = {r["id"]: r["ref"] for r in json.loads(exported.stdout)}
    assert refs == {parent.id: "origin/kexp/bob", child.id: "origin/kexp/bob",
                    mine.id: WORKING_TREE}  # fmt: skip
    as_csv = run_kexp("export", "--format", "csv", "--all-refs", cwd=alice)
    assert as_csv.returncode == 0 and ",ref,refs" in as_csv.stdout.splitlines()[0]
    tree = run_kexp("tree", parent.id[:10], "--json", "--refs", "origin/*", cwd=alice)
    assert tree.returncode == 0, tree.stderr
    root = json.loads(tree.stdout)[0]
    assert root["id"] == parent.id and root["ref"] == "origin/kexp/bob"
    assert root["children"][0]["id"] == child.id
    assert root["children"][0]["ref"] == "origin/kexp/bob"
    failed = record(bob, base, "Unrolled by 16 - -3.0%", score=0.97, pid=child.id)
    sync(Store(bob), branch="kexp/bob")
    git(alice, "fetch", "-q")
    lessons = json.loads(run_kexp("lessons", "--json", "--all-refs", cwd=alice).stdout)
    assert [(item["id"], item["ref"]) for item in lessons["regression"]] == [
        (failed.id, "origin/kexp/bob")
    ]
    stats = json.loads(run_kexp("stats", "--json", "--all-refs", cwd=alice).stdout)
    assert stats["total"] == 4


def test_a_pattern_matching_no_ref_is_warned_about(tmp_path: Path) -> None:
    remote, base = make_remote(tmp_path)
    alice = clone(remote, tmp_path / "alice")
    exp = record(alice, base, "Unrolled by 4 - +1.9%")
    shown = run_kexp("top", "--refs", "orgin/*", "--refs", "origin/*", cwd=alice)
    assert shown.returncode == 0, shown.stderr
    assert "no ref matches 'orgin/*'" in shown.stderr and "'origin/*'" not in shown.stderr
    assert exp.id[:10] in shown.stdout


# --- against the truth, over random histories ------------------------------------------

from hypothesis import HealthCheck, given  # noqa: E402
from hypothesis import settings as hypothesis_settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

_OPERATIONS = st.lists(
    st.tuples(
        st.sampled_from(["record", "correct", "commit", "branch", "bob", "fetch"]),
        st.integers(0, 50),
    ),
    min_size=1,
    max_size=14,
)


def _truth(root: Path, refs: list[str]) -> dict[tuple[str, bytes], set[str]]:
    """(id, file content) → the places holding it: the working tree's files and each
    ref's blobs, read with git and from disk (not with kexp)."""
    import re

    name = re.compile(r"experiments/\d{4}/\d{2}/(?:[0-9a-f]{2}/)?([0-9a-f]{16})-[a-z0-9-]*\.md")
    found: dict[tuple[str, bytes], set[str]] = {}
    for path in (root / "experiments").rglob("*.md"):
        match = name.fullmatch(path.relative_to(root).as_posix())
        if match:
            found.setdefault((match.group(1), path.read_bytes()), set()).add(WORKING_TREE)
    for ref in refs:
        listing = git(root, "ls-tree", "-r", "--name-only", ref, "--", "experiments")
        for line in listing.splitlines():
            match = name.fullmatch(line)
            if match:
                import subprocess

                data = subprocess.run(["git", "show", f"{ref}:{line}"], cwd=root,
                                      capture_output=True, check=True).stdout  # fmt: skip
                found.setdefault((match.group(1), data), set()).add(ref)
    return found


@hypothesis_settings(
    max_examples=12, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(operations=_OPERATIONS)
def test_reading_across_refs_agrees_with_the_files(
    tmp_path_factory: pytest.TempPathFactory, operations: list[tuple[str, int]]
) -> None:
    """Random histories of two clones (recording, correcting, committing on branches,
    syncing, fetching): every distinct (experiment, content) of the working tree and the
    refs is listed once, with exactly the places holding it, and the versions of one
    experiment are told apart."""
    folder = tmp_path_factory.mktemp("history")
    remote, base = make_remote(folder)
    alice, bob = clone(remote, folder / "alice"), clone(remote, folder / "bob")
    branches = 0
    for step, (operation, number) in enumerate(operations):
        mine = Store(alice).list_experiments(brief=True)
        if operation == "record":
            record(alice, base, f"Alice try {step} - +{number}%", score=1 + number / 100)
        elif operation == "correct" and mine:
            exp = mine[number % len(mine)]
            Store(alice).update_experiment(exp.id, score=round(2 + step / 100 + number / 1e4, 6))
        elif operation == "commit":
            git(alice, "add", "experiments")
            if git(alice, "status", "--porcelain", "--", "experiments"):
                git(alice, "commit", "-q", "-m", f"step {step}")
        elif operation == "branch":
            branches += 1
            git(alice, "add", "experiments")
            if git(alice, "status", "--porcelain", "--", "experiments"):
                git(alice, "commit", "-q", "-m", f"step {step}")
            git(alice, "checkout", "-q", "-b", f"b{branches}")
        elif operation == "bob":
            record(bob, base, f"Bob try {step} - +{number}%", score=1 + number / 90)
            sync(Store(bob), branch="kexp/bob")
        elif operation == "fetch":
            git(alice, "fetch", "-q")
    refs = git(alice, "for-each-ref", "--format=%(refname:short)", "refs/heads",
               "refs/remotes").split()  # fmt: skip
    refs = [r for r in refs if not r.endswith("/HEAD")]
    truth = _truth(alice, refs)
    across = RefsStore(Store(alice), all_refs=True)
    listed = across.list_experiments()
    seen: dict[tuple[str, bytes], set[str]] = {}
    for exp in listed:
        where = across.where(exp)
        assert where is not None
        data = _content_of(alice, where.refs[0], exp)
        key = (exp.id, data)
        assert key not in seen  # listed once
        seen[key] = set(where.refs)
        versions = {d for (i, d) in truth if i == exp.id}
        assert bool(where.other_versions) == (len(versions) > 1)
    assert seen == truth


def _content_of(root: Path, place: str, exp: Any) -> bytes:
    """The bytes of an experiment's file at a place (the working tree or a ref)."""
    import subprocess

    relative = Path(str(exp.path)).relative_to(root).as_posix()
    if place == WORKING_TREE:
        return (root / relative).read_bytes()
    return subprocess.run(["git", "show", f"{place}:{relative}"], cwd=root,
                          capture_output=True, check=True).stdout  # fmt: skip
