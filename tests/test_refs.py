"""Reading across refs (``--refs``, ``--all-refs``): the working tree plus the store at
every matching ref, read from git objects, with real clones of a bare remote: one
entry per experiment, its newest version.

The truth is what the files hold (read with git from each branch), never kexp's own
report.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import subprocess
from pathlib import Path

import pytest
from conftest import git, run_kexp
from test_sync import CLONES, PER_CLONE, _run_clones, clone, make_remote, record

from kexp import ExperimentNotFoundError, GitError, Store
from kexp.storage.repeats import tried_before
from kexp.storage.retrieval import similar
from kexp.storage.rows import LOCAL
from kexp.storage.sync import sync


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
            if made_by[record_["id"]] == index:  # its own: in its working tree
                assert record_["ref"] == LOCAL
                assert record_["refs"][0] == LOCAL
                assert f"origin/kexp/agent-{index}" in record_["refs"]
            else:
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
    across = Store(alice, refs=["origin/*"], all_refs=True)
    found = across.list_experiments()
    assert [e.id for e in found] == [exp.id]
    where = found[0].where
    assert where is not None
    # main, checked out, is the working tree's commit: not another place beside local.
    assert set(where.refs) == {LOCAL, "origin/main"} and not where.other_versions
    assert where.ref == LOCAL  # the working tree holds it
    # Bob, who never pulled, sees it on origin/main.
    seen = Store(bob, refs=["origin/*"])
    assert [e.id for e in seen.top_experiments()] == [exp.id]
    assert seen.get_experiment(exp.id[:8]).where.ref == "origin/main"
    assert Store(bob).list_experiments() == []  # his own store: still nothing


def test_corrections_on_two_branches_give_one_entry_the_newest_and_say_so(
    tmp_path: Path,
) -> None:
    """Two agents correct one experiment on branches forked from main: each correction
    is newer than main's version (it changed since their merge base), and of the two,
    which both changed since they parted, the later commit's is taken, and said."""
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
    git(alice, "checkout", "-q", "main")  # the working tree holds main's version
    across = Store(alice, refs=["origin/fix-*"])
    (found,) = across.list_experiments()
    assert found.score == 1.017  # bob's: the later of the two corrections
    where = found.where
    assert where is not None and where.ref == "origin/fix-bob" and where.diverged
    assert where.other_versions == (LOCAL, "origin/fix-alice")
    assert "origin/fix-alice" in where.note and "later commit" in where.note
    # Alice's branch alone: her correction is newer than main's (the working tree's).
    only_hers = Store(alice, refs=["origin/fix-alice"])
    (hers,) = only_hers.list_experiments()
    assert hers.score == 1.021 and hers.where is not None and not hers.where.diverged
    assert hers.where.other_versions == (LOCAL,) and "older version" in hers.where.note
    shown = run_kexp("show", exp.id[:10], "--refs", "origin/fix-*", cwd=alice)
    assert shown.returncode == 0, shown.stderr
    assert "1.0170" in shown.stdout and "1.0210" not in shown.stdout
    assert "origin/fix-alice" in shown.stdout
    data = json.loads(run_kexp("show", exp.id[:10], "--refs", "origin/fix-*", "--json",
                               cwd=alice).stdout)  # fmt: skip
    assert data["score"] == 1.017 and data["ref"] == "origin/fix-bob"
    assert data["other_versions"] == [LOCAL, "origin/fix-alice"] and data["diverged"]


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
        Store(alice, refs=[pattern])
    shown = run_kexp("list", "--refs", pattern, cwd=alice)
    assert shown.returncode == 2 and shown.stderr.count("\n") == 1
    assert "not a ref pattern" in shown.stderr
    assert not Path("/tmp/HACKED").exists()


def test_rev_and_refs_together_are_a_usage_error(tmp_path: Path) -> None:
    remote, _ = make_remote(tmp_path)
    alice = clone(remote, tmp_path / "alice")
    shown = run_kexp("top", "--rev", "HEAD", "--all-refs", cwd=alice)
    assert shown.returncode == 2 and "not both" in shown.stderr


def test_the_cache_answers_as_a_cold_read_does(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import kexp.storage.parallel

    monkeypatch.setattr(kexp.storage.parallel, "PARALLEL_MIN_FILES", 2)  # the cold read forks
    remote, base = make_remote(tmp_path)
    alice, bob = clone(remote, tmp_path / "alice"), clone(remote, tmp_path / "bob")
    for n in range(6):
        record(alice if n % 2 else bob, base, f"Try {n} - +{n}%", score=1 + n / 100)
    sync(Store(alice))
    sync(Store(bob))
    git(alice, "fetch", "-q")

    def answer() -> list[tuple[str, float, str]]:
        across = Store(alice, refs=["origin/*"])
        return [(e.id, e.score, e.code_change) for e in across.top_experiments(10)]

    cold = answer()
    cache = list((alice / ".kexp").glob("cache-*.sqlite"))
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


def test_a_store_read_with_refs_writes_to_the_working_tree_only(tmp_path: Path) -> None:
    remote, base = make_remote(tmp_path)
    alice, bob = clone(remote, tmp_path / "alice"), clone(remote, tmp_path / "bob")
    exp = record(alice, base, "Unrolled by 4 - +1.9%")
    theirs = record(bob, base, "Vectorized - +3.0%", score=1.03)
    sync(Store(bob), branch="kexp/bob")
    git(alice, "fetch", "-q")
    across = Store(alice, all_refs=True)
    assert across.update_experiment(exp.id, score=2.0).score == 2.0
    assert Store(alice).get_experiment(exp.id).score == 2.0
    with pytest.raises(ExperimentNotFoundError):
        across.update_experiment(theirs.id, score=2.0)  # only on bob's branch
    with pytest.raises(ExperimentNotFoundError):
        across.delete_experiment(theirs.id)
    assert across.get_experiment(theirs.id).score == 1.03


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
    across = run_kexp(*arguments, "--all-refs", cwd=alice)
    assert across.returncode == 0, across.stderr
    warned = [line for line in across.stderr.splitlines() if earlier.id in line]
    assert warned and f"{earlier.id} on origin/kexp/bob" in warned[0]
    plain = run_kexp(*arguments, cwd=alice)
    assert plain.returncode == 0, plain.stderr
    assert earlier.id not in plain.stderr  # alice's own store has never seen it
    # Both were recorded all the same; the Python twin warns as well.
    assert len(Store(alice).list_experiments()) == 2
    store = Store(alice, refs=["origin/*"])
    with pytest.warns(UserWarning, match=earlier.id):
        store.create_experiment(
            change_summary="Unroll 4, third time - +1.7%", score=1.017, status="done",
            operator_sig="csrc/cache.cu: k", dtype_sig="bf16", env="MI250X",
            base_commit=base, code_change=DIFF,
        )  # fmt: skip
    repeats = tried_before(store, DIFF)
    assert earlier.id in [r.id for r in repeats]
    assert next(r for r in repeats if r.id == earlier.id).ref == "origin/kexp/bob"


def test_a_search_across_refs_posts_what_earlier_commands_added_and_keeps_it(
    tmp_path: Path,
) -> None:
    """A search across refs runs in a transaction undone at its end (the FTS table
    holds the refs' versions for it alone): the docs earlier commands added are posted
    before it, and stay posted (not posted again, then undone, by every search across
    refs); its answers are the same each time."""
    import sqlite3

    remote, base = make_remote(tmp_path)
    alice, bob = clone(remote, tmp_path / "alice"), clone(remote, tmp_path / "bob")
    earlier = record(bob, base, "Unrolled by 4 - +1.9%", code_change=DIFF)
    sync(Store(bob), branch="kexp/bob")
    git(alice, "fetch", "-q")
    mine = record(alice, base, "Unrolled by 4 here - +1.8%", code_change=DIFF)
    across = Store(alice, refs=["origin/*"])

    def posted() -> int:
        (file,) = across.cache_dir.glob("cache-*.sqlite")
        with contextlib.closing(sqlite3.connect(file)) as connection:
            found = connection.execute("SELECT posted FROM shingle_order").fetchone()
        return 0 if found is None else int(found[0])

    answers, posts = [], []
    for _ in range(3):
        answers.append([(m.id, m.similarity) for m in similar(across, diff=DIFF)])
        posts.append(posted())
    assert answers[0] == answers[1] == answers[2]
    assert {earlier.id, mine.id} <= {found for found, _ in answers[0]}
    assert posts[0] == 0 and posts[1] == posts[2] > 0  # posted by the second, and kept


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
                    mine.id: LOCAL}  # fmt: skip
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

from hypothesis import HealthCheck, example, given  # noqa: E402
from hypothesis import settings as hypothesis_settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

_OPERATIONS = st.lists(
    st.tuples(
        st.sampled_from(
            [
                "record",
                "correct",
                "commit",
                "branch",
                "bob",
                "fetch",
                "rm",
                "merge",
                "back",
                "bobrm",
            ]
        ),
        st.integers(0, 50),
    ),
    min_size=1,
    max_size=16,
)


def _place_files(root: Path, refs: list[str]) -> dict[str, dict[str, tuple[str, bytes]]]:
    """Each place (the working tree, each ref) → id → (path, file content): read with
    git and from disk (not with kexp)."""
    import re
    import subprocess

    name = re.compile(r"experiments/\d{4}/\d{2}/(?:[0-9a-f]{2}/)?([0-9a-f]{16})-[a-z0-9-]*\.md")
    places: dict[str, dict[str, tuple[str, bytes]]] = {LOCAL: {}}
    for path in (root / "experiments").rglob("*.md"):
        relative = path.relative_to(root).as_posix()
        match = name.fullmatch(relative)
        if match:
            places[LOCAL][match.group(1)] = (relative, path.read_bytes())
    for ref in refs:
        places[ref] = {}
        listing = git(root, "ls-tree", "-r", "--name-only", ref, "--", "experiments")
        for line in listing.splitlines():
            match = name.fullmatch(line)
            if match:
                data = subprocess.run(["git", "show", f"{ref}:{line}"], cwd=root,
                                      capture_output=True, check=True).stdout  # fmt: skip
                places[ref][match.group(1)] = (line, data)
    return places


def _content_at(root: Path, commit: str, path: str) -> bytes | None:
    import subprocess

    found = subprocess.run(["git", "show", f"{commit}:{path}"], cwd=root, capture_output=True)
    return found.stdout if found.returncode == 0 else None


def _newest(root: Path, holders: dict[bytes, list[str]], path: str) -> bytes:
    """The newest of an experiment's contents (content → the places holding it), by the
    rule: the working tree's when it is not HEAD's; else, each content at the commit
    that last changed its file (of its places, the newest; of two as new, the
    descendant), the one changed on top of the other's change; else the one whose
    history held the other's content; else the one changed later, then the earlier
    place."""
    order = [LOCAL, *sorted({p for places in holders.values() for p in places} - {LOCAL})]

    def rev(place: str) -> str:
        return "HEAD" if place == LOCAL else place

    def descends(commit: str, other: str) -> bool:
        done = subprocess.run(["git", "merge-base", "--is-ancestor", other, commit], cwd=root)
        return done.returncode == 0

    def changed(places: list[str]) -> tuple[str, int]:
        best = ("", -1)
        for place in sorted(places, key=order.index):
            found = git(root, "log", "-1", "--format=%H %ct", rev(place), "--", path).split()
            sha, date = found[0], int(found[1])
            if date > best[1] or (date == best[1] and sha != best[0] and descends(sha, best[0])):
                best = (sha, date)
        return best

    def held(places: list[str], content: bytes) -> bool:
        blob = subprocess.run(["git", "hash-object", "--stdin"], cwd=root, input=content,
                              capture_output=True, check=True).stdout.decode().strip()  # fmt: skip
        return any(
            blob in git(root, "log", "--format=", "--raw", "--no-abbrev", rev(p), "--", path)
            for p in places
        )

    def uncommitted(content: bytes, places: list[str]) -> bool:
        return LOCAL in places and _content_at(root, "HEAD", path) != content

    contents = sorted(holders, key=lambda c: min(order.index(p) for p in holders[c]))
    best = contents[0]
    for other in contents[1:]:
        if uncommitted(other, holders[other]) or uncommitted(best, holders[best]):
            if uncommitted(other, holders[other]):
                best = other
            continue
        mine, theirs = changed(holders[best]), changed(holders[other])
        if mine[0] != theirs[0] and descends(theirs[0], mine[0]):
            best = other
        elif mine[0] != theirs[0] and descends(mine[0], theirs[0]):
            continue
        elif held(holders[other], best) != held(holders[best], other):
            if held(holders[other], best):
                best = other
        elif theirs[1] > mine[1]:
            best = other
    return best


def _removals(
    root: Path, places: dict[str, dict[str, tuple[str, bytes]]], defaults: list[str]
) -> tuple[set[str], dict[str, list[str]]]:
    """The experiments hidden by a removal, and those a ref removed that are read all the
    same (id → those refs), by the rule: a place removed an experiment when it lacks it
    and the merge base of its commit with each holder's holds the holder's very content
    (an uncommitted file of the working tree is never removed); the working tree's
    removal hides it, and a default branch's unless another default branch holds it; a
    ref's only when neither the working tree nor a default branch holds it."""
    held_at: dict[str, dict[str, bytes]] = {}

    def content_in(commit: str, exp_id: str) -> bytes | None:
        if commit not in held_at:
            listing = git(root, "ls-tree", "-r", "--name-only", commit, "--", "experiments")
            held_at[commit] = {}
            for line in listing.splitlines():
                match = re.search(r"/([0-9a-f]{16})-[a-z0-9-]*\.md$", line)
                if match:
                    held_at[commit][match.group(1)] = _content_at(root, commit, line) or b""
        return held_at[commit].get(exp_id)

    def commit(place: str) -> str:
        return git(root, "rev-parse", "HEAD" if place == LOCAL else place)

    hidden: set[str] = set()
    noted: dict[str, list[str]] = {}
    for exp_id in sorted({i for files in places.values() for i in files}):
        holders = {p: files[exp_id][1] for p, files in places.items() if exp_id in files}
        if len(holders) == len(places):
            continue
        if (
            LOCAL in holders
            and _content_at(root, "HEAD", places[LOCAL][exp_id][0]) != (holders[LOCAL])
        ):
            continue  # an uncommitted file of the working tree: the newest
        removers = [
            place
            for place in places
            if place not in holders
            and all(
                content_in(git(root, "merge-base", commit(place), commit(h)), exp_id) == data
                for h, data in holders.items()
            )
        ]
        kept = LOCAL in holders or any(d in holders for d in defaults)
        by_default = any(d in removers for d in defaults) and not any(
            d in holders for d in defaults
        )
        if LOCAL in removers or (removers and not kept) or by_default:
            hidden.add(exp_id)
        elif removers:
            noted[exp_id] = sorted(removers)
    return hidden, noted


@hypothesis_settings(
    max_examples=12, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(operations=_OPERATIONS)
# Bob's side branch removes one Alice merged: her working tree holds it still.
@example(operations=[("bob", 1), ("fetch", 0), ("merge", 0), ("bobrm", 0), ("fetch", 0)])
# Alice removes one on a branch, then checks out a commit older than it.
@example(operations=[("record", 1), ("branch", 0), ("rm", 0), ("back", 0), ("fetch", 0)])
def test_reading_across_refs_agrees_with_the_files(
    tmp_path_factory: pytest.TempPathFactory, operations: list[tuple[str, int]]
) -> None:
    """Random histories of two clones (recording, correcting, removing, committing on
    branches, merging Bob's side branch, checking out an older commit, syncing,
    fetching): every experiment of the working tree and the refs that no removal hides
    is listed once, its newest content, with exactly the places holding that content,
    the places holding others and the refs whose removal it was read through."""
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
        elif operation == "rm" and mine:  # kexp rm, uncommitted until a commit step
            Store(alice).delete_experiment(mine[number % len(mine)].id)
        elif operation in ("merge", "back"):
            git(alice, "add", "experiments")
            if git(alice, "status", "--porcelain", "--", "experiments"):
                git(alice, "commit", "-q", "-m", f"step {step}")
            if operation == "back":  # a checkout older than every experiment
                branches += 1
                git(alice, "checkout", "-q", "-b", f"b{branches}", base)
            elif git(alice, "branch", "-r", "--list", "origin/kexp/bob"):
                merged = subprocess.run(["git", "merge", "-q", "--no-edit", "origin/kexp/bob"],
                                        cwd=alice, capture_output=True)  # fmt: skip
                if merged.returncode:  # a conflict (one corrected here, removed there)
                    git(alice, "merge", "--abort")
        elif operation == "bobrm":  # Bob removes one he published on his side branch
            his = Store(bob).list_experiments(brief=True)
            if his:
                Store(bob).delete_experiment(his[number % len(his)].id)
                sync(Store(bob), branch="kexp/bob")
    refs = git(alice, "for-each-ref", "--format=%(refname:short)", "refs/heads",
               "refs/remotes").split()  # fmt: skip
    refs = [r for r in refs if not r.endswith("/HEAD")]
    places = _place_files(alice, refs)
    hidden, noted = _removals(alice, places, [r for r in refs if r == "origin/main"])
    ids = sorted({exp_id for files in places.values() for exp_id in files} - hidden)
    listed = Store(alice, all_refs=True).list_experiments()
    checked_out = git(alice, "symbolic-ref", "--short", "HEAD")
    assert sorted(e.id for e in listed) == ids  # every experiment not removed, once
    for exp in listed:
        assert exp.where is not None
        assert sorted(exp.where.removed_on) == noted.get(exp.id, [])
        holders: dict[bytes, list[str]] = {}
        for place, files in places.items():
            if exp.id in files:
                holders.setdefault(files[exp.id][1], []).append(place)
        path = next(files[exp.id][0] for files in places.values() if exp.id in files)
        newest = _newest(alice, holders, path)
        where = exp.where
        assert where is not None
        # The branch checked out is the working tree's commit: one place with it.
        alike = [p for p in holders[newest] if LOCAL not in holders[newest] or p != checked_out]
        assert sorted(where.refs) == sorted(alike)
        others = sorted(p for content, held in holders.items() if content != newest for p in held)
        assert sorted(where.other_versions) == others
        assert exp.score == float(re.search(rb"\nscore: ([0-9.]+)\n", newest).group(1))  # type: ignore[union-attr]


def test_folders_hidden_moved_or_missing_on_some_refs_are_read_as_each_ref_holds_them(
    tmp_path: Path,
) -> None:
    """The refs' folders are walked together (a folder the same everywhere read once):
    a ref that hid a file in a hidden folder, one that moved files into new folders and
    one with no ``experiments/`` at all are each read as git lists them, hidden folders
    left out; a stray file on one ref alone is reported once."""
    remote, base = make_remote(tmp_path)
    alice = clone(remote, tmp_path / "alice")
    made = [record(alice, base, f"Try {n} - +{n}%", score=1 + n / 100) for n in range(3)]
    git(alice, "add", "experiments")
    git(alice, "commit", "-q", "-m", "three")
    for branch in ("hid", "moved", "none"):
        git(alice, "branch", branch)
    git(alice, "checkout", "-q", "hid")
    hidden = alice / "experiments" / ".drafts"
    hidden.mkdir()
    assert made[0].path is not None
    git(alice, "mv", str(made[0].path), str(hidden / made[0].path.name))
    (alice / "experiments" / "notes.md").write_text("Notes.\n")
    git(alice, "add", "experiments")
    git(alice, "commit", "-q", "-m", "hid one")
    git(alice, "checkout", "-q", "moved")
    for exp in made[1:]:
        assert exp.path is not None
        deeper = exp.path.parent / "deeper" / "still"
        deeper.mkdir(parents=True, exist_ok=True)  # both may share a shard folder (1 in 256)
        git(alice, "mv", str(exp.path), str(deeper / exp.path.name))
    git(alice, "commit", "-q", "-m", "moved two")
    git(alice, "checkout", "-q", "none")
    git(alice, "rm", "-q", "-r", "experiments")
    git(alice, "commit", "-q", "-m", "no store")
    git(alice, "checkout", "-q", "main")
    refs = ["hid", "moved", "none"]
    truth: dict[str, set[str]] = {}  # id → the refs holding it, from git's own listing
    for ref in refs:
        listing = git(alice, "ls-tree", "-r", "--name-only", ref, "--", "experiments")
        for line in listing.splitlines():
            parts = line.split("/")
            match = re.fullmatch(r"([0-9a-f]{16})-.*\.md", parts[-1])
            if match and not any(part.startswith(".") for part in parts[:-1]):
                truth.setdefault(match.group(1), set()).add(ref)
    assert set(truth) == {exp.id for exp in made}
    assert truth[made[0].id] == {"moved"}
    listed = Store(alice, refs=refs).list_experiments()
    # "hid" hid the first since it parted from main, which holds it as it was: the
    # working tree (main) holds it, so it is read, noting the removal; "none", a ref
    # without a store, removes nothing.
    assert sorted(exp.id for exp in listed) == sorted(exp.id for exp in made)
    for exp in listed:
        assert exp.where is not None
        assert exp.where.removed_on == (("hid",) if exp.id == made[0].id else ())
        held = set(exp.where.refs) - {LOCAL} | set(exp.where.other_versions)
        assert held == truth.get(exp.id, set())
    # Read from a checkout that never held them, the removal on "hid" (no default
    # branch holds the first) is its newest state.
    git(alice, "checkout", "-q", "-b", "older", base)
    listed = Store(alice, refs=refs).list_experiments()
    assert sorted(exp.id for exp in listed) == sorted(exp.id for exp in made[1:])
    strays = [p for p in Store(alice, refs=refs).validate() if p.code == "stray-file"]
    assert [Path(p.path).name for p in strays] == ["notes.md"]


def test_fields_name_where_each_experiment_was_found(tmp_path: Path) -> None:
    """``kexp list --all-refs --json`` says where each row was found (``ref``, ``refs``),
    but ``--fields id,ref,refs`` was refused: "unknown field(s) ref, refs" (trial 18).
    Now they are fields of a read across refs, in the order asked, as the files say;
    asked of a read of the working tree alone, one line says to read across refs, and
    ``--sort ref`` stays refused."""
    remote, base = make_remote(tmp_path)
    alice, bob = clone(remote, tmp_path / "alice"), clone(remote, tmp_path / "bob")
    mine = record(alice, base, "Unrolled by 4 - +1.9%")
    sync(Store(alice))
    theirs = record(bob, base, "Vectorized loads - +3.0%")
    git(alice, "fetch", "-q")
    shown = run_kexp(
        "list", "--all-refs", "--json", "--fields", "refs,id,ref,other_versions", cwd=alice
    )
    assert shown.returncode == 0, shown.stderr
    assert json.loads(shown.stdout) == [
        {"refs": [LOCAL, "origin/main"], "id": mine.id, "ref": LOCAL, "other_versions": []}
    ]
    csv = run_kexp("list", "--all-refs", "--format", "csv", "--fields", "id,ref", cwd=alice)
    assert csv.returncode == 0, csv.stderr
    assert csv.stdout.splitlines() == ["id,ref", f"{mine.id},local"], csv.stdout
    sync(Store(bob))
    git(alice, "fetch", "-q")
    top = run_kexp("top", "--all-refs", "--json", "--fields", "id,ref", cwd=alice)
    assert sorted((r["id"], r["ref"]) for r in json.loads(top.stdout)) == sorted(
        [(mine.id, LOCAL), (theirs.id, "origin/main")]
    ), top.stdout
    alone = run_kexp("list", "--json", "--fields", "id,ref", cwd=alice)
    assert alone.returncode != 0 and alone.stdout == ""
    (line,) = alone.stderr.strip().splitlines()
    assert "ref: where each experiment was found" in line and "--all-refs" in line, line
    sorted_by = run_kexp("list", "--all-refs", "--json", "--sort", "ref", cwd=alice)
    assert sorted_by.returncode == 2 and "unknown field(s) ref" in sorted_by.stderr


def test_the_fields_asked_for_are_the_fields_printed_across_refs(tmp_path: Path) -> None:
    """``kexp top --all-refs --fields id,score`` (and list) printed ``ref`` and ``refs``
    too, in every format (a REF column in the table): the fields asked for are what is
    printed; without --fields where each was found is added as before; asked for, it is
    printed where asked (``ref,refs``)."""
    remote, base = make_remote(tmp_path)
    alice, bob = clone(remote, tmp_path / "alice"), clone(remote, tmp_path / "bob")
    mine = record(alice, base, "Unrolled by 4 - +1.9%")
    theirs = record(bob, base, "Vectorized loads - +3.0%", score=1.03)
    sync(Store(bob))
    git(alice, "fetch", "-q")
    for command in ("top", "list"):
        asked = run_kexp(command, "--all-refs", "--json", "--fields", "id,score", cwd=alice)
        assert asked.returncode == 0, asked.stderr
        assert sorted(json.loads(asked.stdout), key=lambda r: r["id"]) == sorted(
            [{"id": mine.id, "score": 1.019}, {"id": theirs.id, "score": 1.03}],
            key=lambda r: r["id"],
        ), asked.stdout
        jsonl = run_kexp(command, "--all-refs", "--format", "jsonl", "--fields", "id,score",
                         cwd=alice)  # fmt: skip
        assert all(set(json.loads(line)) == {"id", "score"} for line in jsonl.stdout.splitlines())
        csv = run_kexp(command, "--all-refs", "--format", "csv", "--fields", "id,score", cwd=alice)
        assert csv.stdout.splitlines()[0] == "id,score", csv.stdout
        table = run_kexp(command, "--all-refs", "--fields", "id,score", cwd=alice)
        rank = ["#"] if command == "top" else []
        assert table.stdout.splitlines()[0].split() == [*rank, "ID", "SCORE"], table.stdout
        assert "REF" not in table.stdout and "origin/main" not in table.stdout, table.stdout
        both = run_kexp(command, "--all-refs", "--format", "csv", "--fields", "id,ref,refs",
                        cwd=alice)  # fmt: skip
        assert f"{theirs.id},origin/main,origin/main" in both.stdout.splitlines(), both.stdout
        where = run_kexp(command, "--all-refs", "--fields", "id,ref", cwd=alice)
        assert where.stdout.splitlines()[0].split() == [*rank, "ID", "REF"], where.stdout
        assert f"{theirs.id[:10]}  origin/main" in where.stdout, where.stdout
        unasked = json.loads(run_kexp(command, "--all-refs", "--json", cwd=alice).stdout)
        assert all({"ref", "refs"} <= set(record_) for record_ in unasked), unasked
        plain = run_kexp(command, "--all-refs", cwd=alice)
        assert "REF" in plain.stdout.splitlines()[0], plain.stdout


def test_an_invalid_newer_version_of_a_parent_on_a_branch_is_skipped_not_a_crash(
    tmp_path: Path,
) -> None:
    """An agent's branch holds an invalid newer version (a summary over the limit) of an
    experiment another builds on: every read across refs crashed (exit 3, KeyError in
    the unmerged marking); the invalid version is warned of and skipped, as an invalid
    file of the working tree is, and the rest is read."""
    remote, base = make_remote(tmp_path)
    repo = clone(remote, tmp_path / "repo")
    root = record(repo, base, "Root step - +5.0%", score=1.05, status="done")
    child = record(
        repo, base, "Child step - +2.0%", score=1.02, status="done", pid=root.id,
        measured_against="parent",
    )  # fmt: skip
    git(repo, "add", "-A")
    git(repo, "commit", "-qm", "two steps")
    git(repo, "checkout", "-qb", "agent-x")
    text = root.path.read_text(encoding="utf-8")
    root.path.write_text(
        text.replace("Root step - +5.0%", "Root step, " + "much longer " * 8 + "- +5.0%"),
        encoding="utf-8",
    )
    git(repo, "commit", "-qam", "the root's summary, too long")
    git(repo, "checkout", "-q", "main")
    for command in (("list", "--all-refs", "--json"), ("top", "--all-refs", "--json")):
        done = run_kexp(*command, cwd=repo)
        assert done.returncode == 0, done.stderr
        assert "summary-too-long" in done.stderr and "agent-x" in done.stderr, done.stderr
        assert child.id in [row["id"] for row in json.loads(done.stdout)], done.stdout
