"""One read path: every command sees every ref, from one cache (issue 24), and the
cache's answers hold after an edit in place and after damage (issue 28, items 1 and 4).

Two agents on two clones of one bare remote, as agents work: one records and syncs,
the other only fetches, then consults (``kexp context``, ``kexp similar``) and records
(``kexp add``). The truth is what the files hold, on disk and on each ref (read with
git), never kexp's own report.
"""

from __future__ import annotations

import json
import shutil
import sqlite3
import subprocess
import time
import warnings
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from conftest import experiment_fields, git
from test_sync import clone, make_remote, record

import kexp
import kexp.storage.retrieval  # used as kexp.storage.retrieval: imported, not by chance
from kexp import Store
from kexp.cli.main import main
from kexp.core.errors import NearDuplicateWarning
from kexp.storage.dedupe import code_shingles, shingle_similarity
from kexp.storage.sync import sync

#: The cache's racy window (ns): a file changed this recently is read again.
RACY_NS = 2_000_000_000

OPERATOR = "csrc/kernels/cache_kernels.cu: reshape_and_cache_flash"

#: Agent A's dead end: the copy loop parallelised with OpenMP threads.
OPENMP = """\
--- a/csrc/kernels/cache_kernels.cu
+++ b/csrc/kernels/cache_kernels.cu
@@ -210,6 +210,7 @@ void reshape_and_cache_flash(
   const int64_t block_stride = key_cache.stride(0);
+  #pragma omp parallel for num_threads(8)
   for (int64_t token = 0; token < num_tokens; ++token) {
     const int64_t slot = slot_mapping[token];
     copy_token(key, key_cache, slot, token, head_size);
-    copy_token(value, value_cache, slot, token, head_size);
+    copy_token(value, value_cache, slot, token, head_size); // both caches per thread
+    omp_set_dynamic(0);
   }
"""

#: Agent B's variant of it: the same idea, the thread count and a comment changed.
OPENMP_VARIANT = """\
--- a/csrc/kernels/cache_kernels.cu
+++ b/csrc/kernels/cache_kernels.cu
@@ -210,6 +210,7 @@ void reshape_and_cache_flash(
   const int64_t block_stride = key_cache.stride(0);
+  #pragma omp parallel for num_threads(16)
   for (int64_t token = 0; token < num_tokens; ++token) {
     const int64_t slot = slot_mapping[token];
     copy_token(key, key_cache, slot, token, head_size);
-    copy_token(value, value_cache, slot, token, head_size);
+    copy_token(value, value_cache, slot, token, head_size); // both caches per thread
+    omp_set_dynamic(0);
   }
"""


def invoke(root: Path, *args: str, columns: int | None = None) -> Any:
    """``kexp --root ROOT ARGS`` in this process (click's runner)."""
    env = {"COLUMNS": str(columns)} if columns else {"COLUMNS": ""}
    return CliRunner().invoke(main, ["--root", str(root), *args], env=env)


def dead_end(root: Path, base: str) -> kexp.KernelExperiment:
    return record(
        root,
        base,
        "OpenMP threads for the cache copy - -93.4% (dead end)",
        score=0.066,
        operator_sig=OPERATOR,
        detailed_description="**Approach**: parallelise the per-token copy loop with "
        "OpenMP threads\n\n**Key insight**: thread start-up dwarfs a copy this small",
        code_change=OPENMP,
    )


@pytest.fixture
def agents(tmp_path: Path) -> tuple[Path, Path, str]:
    """Two clones (alice, bob) of one remote, and the remote's first commit."""
    remote, base = make_remote(tmp_path)
    return clone(remote, tmp_path / "alice"), clone(remote, tmp_path / "bob"), base


# --- the consult call and the next record see what other agents synced -----------------


def test_an_agent_that_only_fetched_sees_the_dead_end_when_it_consults(
    agents: tuple[Path, Path, str],
) -> None:
    alice, bob, base = agents
    dead = dead_end(alice, base)
    record(alice, base, "Vectorized copies to 128-bit - +11.7%", score=1.117,
           operator_sig=OPERATOR)  # fmt: skip
    sync(Store(alice), branch="kexp/alice")
    git(bob, "fetch", "-q")

    packet = invoke(bob, "context", "--operator", "cache", "--all-refs", "--text",
                    "parallelise the copy loop with OpenMP")  # fmt: skip
    assert packet.exit_code == 0, packet.output
    assert dead.id[:10] in packet.output
    found = invoke(bob, "similar", "--refs", "origin/*", "--text", "OpenMP threads", "--json")
    assert found.exit_code == 0, found.output
    assert dead.id in [match["id"] for match in json.loads(found.stdout)]
    # Where each was found, as kexp top says it: the REF column, the JSON's ref.
    assert {m["id"]: m["ref"] for m in json.loads(found.stdout)}[dead.id] == "origin/kexp/alice"
    table = invoke(bob, "similar", "--all-refs", "--text", "OpenMP threads", columns=200)
    assert table.output.splitlines()[0].split()[:2] == ["ID", "REF"], table.output
    (line,) = [line for line in table.output.splitlines() if line.startswith(dead.id[:10])]
    assert "origin/kexp/alice" in line, line
    # Without refs, bob's own store has never seen it.
    assert dead.id[:10] not in invoke(bob, "context", "--operator", "cache").output
    # The Python twins take the refs too.
    with_refs = Store(bob, refs=["origin/*"])
    assert dead.id in [
        m.id for m in kexp.storage.retrieval.similar(with_refs, text="OpenMP threads")
    ]
    assert dead.id[:10] in kexp.agents.context.context(with_refs, operator="cache").text


def test_the_consult_call_says_on_which_branch_the_best_and_the_dead_end_are(
    agents: tuple[Path, Path, str],
) -> None:
    """Alice syncs a better step and a dead end to her branch; Bob fetches and consults:
    the packet names where each is (the code to fetch for the best), not only its id."""
    alice, bob, base = agents
    dead = dead_end(alice, base)
    best = record(alice, base, "Vectorized copies to 128-bit - +11.7%", score=1.117,
                  operator_sig=OPERATOR)  # fmt: skip
    sync(Store(alice), branch="kexp/alice")
    git(bob, "fetch", "-q")
    packet = invoke(bob, "context", "--operator", "cache", "--all-refs", columns=200)
    assert packet.exit_code == 0, packet.output
    for exp in (best, dead):
        (line,) = [
            line for line in packet.output.splitlines() if line.startswith(f"- {exp.id[:10]}")
        ]
        assert line.endswith("on origin/kexp/alice"), line
    data = json.loads(invoke(bob, "context", "--operator", "cache", "--all-refs", "--json").stdout)
    assert data["best"]["id"] == best.id and data["best"]["ref"] == "origin/kexp/alice"
    assert [e["ref"] for e in data["failures"]] == ["origin/kexp/alice"]
    # Read from the working tree alone, nothing says where: it is here.
    record(bob, base, "Nontemporal stores - +4.1%", score=1.041, operator_sig=OPERATOR)
    mine = json.loads(invoke(bob, "context", "--operator", "cache", "--json").stdout)
    assert "ref" not in mine["best"]


def test_each_step_of_the_path_to_the_best_says_on_which_branch_it_is(
    agents: tuple[Path, Path, str],
) -> None:
    """Bob's first step is on main; Alice builds two steps on it and syncs them to her
    branch; Bob fetches and consults across refs: the path's step only her branch holds
    ends with ``on origin/kexp/alice``, as the best's own line does (and ``ref`` in the
    JSON), and his own step, which his working tree holds, names no ref."""
    alice, bob, base = agents
    root = record(bob, base, "num_warps 4 -> 8 - +10%", score=1.1, operator_sig=OPERATOR,
                  measured_against="reference")  # fmt: skip
    sync(Store(bob))
    git(alice, "pull", "-q")
    step = record(alice, base, "evict_first on input load - +8%", score=1.08,
                  operator_sig=OPERATOR, pid=root.id, measured_against="parent")  # fmt: skip
    best = record(alice, base, "exp2 with log2(e) prescale - +5%", score=1.05,
                  operator_sig=OPERATOR, pid=step.id, measured_against="parent")  # fmt: skip
    sync(Store(alice), branch="kexp/alice")
    git(bob, "fetch", "-q")
    packet = invoke(bob, "context", "--operator", "cache", "--all-refs", columns=200)
    assert packet.exit_code == 0, packet.output
    lines = packet.output.splitlines()
    heading = "## Path to the best (root first; each step's score → cumulative)"
    path = lines[lines.index(heading) + 1 :]
    assert path[0].startswith(f"1. {root.id[:10]} ") and " on origin/" not in path[0], path
    assert path[1].startswith(f"2. {step.id[:10]} "), path
    assert path[1].endswith(" on origin/kexp/alice"), path
    assert path[2].startswith("3. the best (above)") and path[2].endswith(" on origin/kexp/alice")
    (line,) = [line for line in lines if line.startswith(f"- {best.id[:10]}")]
    assert line.endswith(" on origin/kexp/alice"), line
    data = json.loads(invoke(bob, "context", "--operator", "cache", "--all-refs", "--json").stdout)
    assert [(s["id"], s["ref"]) for s in data["lineage"]] == [
        (root.id, "local"), (step.id, "origin/kexp/alice"), (best.id, "origin/kexp/alice")
    ]  # fmt: skip


def test_the_next_record_is_warned_of_a_near_duplicate_on_another_ref(
    agents: tuple[Path, Path, str], tmp_path: Path
) -> None:
    alice, bob, base = agents
    similarity = shingle_similarity(code_shingles(OPENMP), code_shingles(OPENMP_VARIANT))
    assert 0.5 <= similarity < 1.0  # a near-duplicate, not the same change
    dead = dead_end(alice, base)
    sync(Store(alice), branch="kexp/alice")
    git(bob, "fetch", "-q")
    (tmp_path / "variant.diff").write_text(OPENMP_VARIANT)
    arguments = ["add", "--summary", "OpenMP, 16 threads - -98%", "--score", "0.0195",
                 "--operator", OPERATOR, "--dtype", "bf16", "--env", "MI300X",
                 "--base-commit", base, "--diff-file", str(tmp_path / "variant.diff")]  # fmt: skip
    added = invoke(bob, *arguments, "--all-refs")
    assert added.exit_code == 0, added.output
    warned = [line for line in added.output.splitlines() if dead.id in line]
    assert warned and "similarity" in warned[0] and "origin/kexp/alice" in warned[0]
    # The Python twin warns the same way.
    with pytest.warns(UserWarning, match=dead.id):
        Store(bob, all_refs=True).create_experiment(
            **experiment_fields(change_summary="OpenMP, 12 threads - -97%", score=0.03,
                                base_commit=base, code_change=OPENMP_VARIANT)
        )  # fmt: skip


# --- one experiment, one entry: the newest version ---------------------------------------


def _correct_on_a_branch(clone_root: Path, exp_id: str, branch: str, **changes: Any) -> None:
    """Correct an experiment on a new branch of ``clone_root`` and push it."""
    git(clone_root, "checkout", "-q", "-b", branch)
    Store(clone_root).update_experiment(exp_id, **changes)
    git(clone_root, "add", "experiments")
    git(clone_root, "commit", "-q", "-m", f"correct {exp_id[:10]}")
    git(clone_root, "push", "-q", "origin", branch)


def test_a_corrected_experiment_counts_once_and_ranks_by_its_correction(
    agents: tuple[Path, Path, str],
) -> None:
    alice, bob, base = agents
    stale = record(alice, base, "Fused the two copies - +30%", score=1.30)
    other = record(alice, base, "Vectorized stores - +10%", score=1.10)
    sync(Store(alice))  # both on main
    git(bob, "pull", "-q")
    # Bob remeasures: the fusion was a fluke, and a regression in truth.
    _correct_on_a_branch(bob, stale.id, "kexp/bob", score=0.97,
                         change_summary="Fused the two copies - -3% (remeasured)")  # fmt: skip
    git(alice, "fetch", "-q")

    top = invoke(alice, "top", "--all-refs", "--json")
    assert top.exit_code == 0, top.output
    records = json.loads(top.stdout)
    # One entry each: the corrected version, ranked by its score, below the other.
    assert [(r["id"], r["score"]) for r in records] == [(other.id, 1.10), (stale.id, 0.97)]
    listed = json.loads(invoke(alice, "list", "--all-refs", "--json").stdout)
    assert sorted((r["id"], r["score"]) for r in listed) == sorted(
        [(stale.id, 0.97), (other.id, 1.10)]
    )
    corrected = next(r for r in listed if r["id"] == stale.id)
    assert corrected["ref"] == "origin/kexp/bob"
    assert "local" in corrected["other_versions"]
    stats = json.loads(invoke(alice, "stats", "--all-refs", "--json").stdout)
    assert stats["total"] == 2
    assert stats["by_outcome"]["regression"] == 1 and stats["by_outcome"]["improvement"] == 1
    shown = json.loads(invoke(alice, "show", stale.id[:10], "--all-refs", "--json").stdout)
    assert shown["score"] == 0.97
    # The Python twins answer the same.
    across = Store(alice, all_refs=True)
    assert [e.id for e in across.top_experiments()] == [other.id, stale.id]
    assert across.get_experiment(stale.id).score == 0.97
    assert len(across.list_experiments()) == 2


def test_an_uncommitted_edit_is_the_newest_version(agents: tuple[Path, Path, str]) -> None:
    alice, bob, base = agents
    exp = record(alice, base, "Unrolled by 4 - +1.9%")
    sync(Store(alice))
    git(bob, "pull", "-q")
    _correct_on_a_branch(bob, exp.id, "kexp/bob", score=1.021)
    git(alice, "fetch", "-q")
    Store(alice).update_experiment(exp.id, score=1.5)  # not committed: the newest
    across = Store(alice, all_refs=True)
    assert [(e.id, e.score) for e in across.list_experiments()] == [(exp.id, 1.5)]


def _bob_removes_a_bogus_record(
    alice: Path, bob: Path, base: str, tmp_path: Path
) -> tuple[kexp.KernelExperiment, kexp.KernelExperiment, Path]:
    """Alice publishes a bogus record and a good one on main; Bob pulls, removes the
    bogus one and pushes his branch; Carol clones: (bogus, good, Carol's clone)."""
    bogus = record(alice, base, "Fused everything - +40% (bogus)", score=1.40)
    good = record(alice, base, "Vectorized stores - +10%", score=1.10)
    sync(Store(alice))
    git(bob, "pull", "-q")
    git(bob, "checkout", "-q", "-b", "kexp/bob")
    Store(bob).delete_experiment(bogus.id)
    git(bob, "commit", "-q", "-am", "remove the bogus record")
    git(bob, "push", "-q", "origin", "kexp/bob")
    return bogus, good, clone(tmp_path / "remote.git", tmp_path / "carol")


def test_an_experiment_removed_on_a_side_branch_is_read_where_main_holds_it(
    agents: tuple[Path, Path, str], tmp_path: Path
) -> None:
    """Alice publishes a bogus record and a good one on main; Bob pulls, removes the
    bogus one and publishes to his branch (a pull request under review); Carol fetches:
    her working tree and main hold it, so every read across refs still ranks, counts and
    offers it, noting that origin/kexp/bob removed it (the removal waits on review).
    Alice's own uncommitted removal is her newest state: gone; a branch that never held
    it (not merged yet) removes nothing."""
    alice, bob, base = agents
    bogus, good, carol = _bob_removes_a_bogus_record(alice, bob, base, tmp_path)
    late = record(carol, base, "Nontemporal stores - +4%", score=1.04)  # not on any ref
    for root in (carol, alice):
        git(root, "fetch", "-q")
        top = json.loads(invoke(root, "top", "--all-refs", "--json").stdout)
        row = next(r for r in top if r["id"] == bogus.id)
        assert row["ref"] == "local" and row["removed_on"] == ["origin/kexp/bob"], row
        stats = json.loads(invoke(root, "stats", "--all-refs", "--json").stdout)
        assert stats["total"] == (3 if root == carol else 2)  # bogus, good (and late)
        packet = invoke(root, "context", "--operator", "cache", "--all-refs").output
        assert bogus.id[:10] in packet
    assert late.id in [e.id for e in Store(carol, all_refs=True).list_experiments()]
    # An uncommitted removal in the working tree is the newest state...
    Store(alice).delete_experiment(good.id)
    assert good.id not in [e.id for e in Store(alice, all_refs=True).list_experiments()]
    # ... unless another place corrected it since: that correction is newer.
    _correct_on_a_branch(carol, good.id, "kexp/carol", score=1.12)
    git(alice, "fetch", "-q")
    found = {e.id: e.score for e in Store(alice, all_refs=True).list_experiments()}
    assert found.get(good.id) == 1.12, found


def test_an_experiment_removed_on_a_newer_branch_asked_for_by_id_is_said_removed(
    agents: tuple[Path, Path, str], tmp_path: Path
) -> None:
    """Alice published a bogus record and a step on it on her side branch; Bob removed
    the bogus one on his, made from hers; Carol, who fetched (neither her checkout nor
    main holds it), asks for it by id across refs (show, tree, similar; the library's
    get_experiment): one clear line saying where it was removed, not an internal error;
    Bob's own clone names the commit of his that removed it (Alice's branch still holds
    it: it is not "not in the store"). Across refs the step's parent is said removed."""
    alice, bob, base = agents
    bogus = record(alice, base, "Fused everything - +40% (bogus)", score=1.40)
    child = record(alice, base, "Fused more - +2%", score=1.02, pid=bogus.id,
                   measured_against="parent")  # fmt: skip
    sync(Store(alice), branch="kexp/alice")
    git(bob, "fetch", "-q")
    git(bob, "checkout", "-q", "-b", "kexp/bob", "origin/kexp/alice")
    Store(bob).delete_experiment(bogus.id, force=True)
    git(bob, "commit", "-q", "-am", "remove the bogus record")
    git(bob, "push", "-q", "origin", "kexp/bob")
    carol = clone(tmp_path / "remote.git", tmp_path / "carol")
    # (Bob's working tree removed it by a commit of his branch: that commit is named)
    removal = git(bob, "rev-parse", "--short=12", "HEAD")
    for root, where in ((carol, "on origin/kexp/bob"), (bob, f"by commit {removal}")):
        for args in (("show", bogus.id, "--all-refs"), ("tree", bogus.id[:10], "--all-refs"),
                     ("similar", bogus.id, "--refs", "origin/*")):  # fmt: skip
            result = invoke(root, *args)
            lines = result.output.strip().splitlines()
            assert result.exit_code == 2, (args, result.output)  # as any id not found
            assert len(lines) == 1 and lines[0].startswith("kexp: error: "), (args, lines)
            assert f"{bogus.id} was removed {where}" in lines[0], (args, lines)
        with pytest.raises(kexp.ExperimentNotFoundError, match=f"removed {where}"):
            Store(root, all_refs=True).get_experiment(bogus.id)
    seen = Store(carol, all_refs=True).get_experiment(child.id)
    assert seen.cumulative_reason == f"parent {bogus.id[:10]} was removed on origin/kexp/bob"
    checked = invoke(carol, "validate", "--all-refs").output
    assert f"parent {bogus.id} was removed on origin/kexp/bob" in checked, checked
    assert "is not in the store" not in checked, checked


def test_a_row_in_the_working_tree_is_labelled_local(agents: tuple[Path, Path, str]) -> None:
    alice, bob, base = agents
    mine = record(alice, base, "Unrolled by 4 - +1.9%")
    sync(Store(alice), branch="kexp/alice")
    theirs = record(bob, base, "Vectorized - +3.0%", score=1.03)
    sync(Store(bob), branch="kexp/bob")
    git(alice, "fetch", "-q")
    records = json.loads(invoke(alice, "top", "--all-refs", "--json").stdout)
    where = {r["id"]: r["ref"] for r in records}
    assert where == {mine.id: "local", theirs.id: "origin/kexp/bob"}
    refs = {r["id"]: r["refs"] for r in records}
    assert "local" in refs[mine.id] and "origin/kexp/alice" in refs[mine.id]


def test_the_ref_column_tells_two_agents_branches_apart_at_80_columns(
    tmp_path: Path,
) -> None:
    remote, base = make_remote(tmp_path)
    names = ("kexp/agent-7f3a", "kexp/agent-9c1e")
    made = {}
    for number, branch in enumerate(names):
        agent = clone(remote, tmp_path / f"agent{number}")
        exp = record(agent, base, f"Idea {number} of a long summary - +{number + 1}%",
                     score=1.01 + number / 100)  # fmt: skip
        sync(Store(agent), branch=branch)
        made[exp.id] = branch
    reader = clone(remote, tmp_path / "reader")
    table = invoke(reader, "top", "--all-refs", columns=80)
    assert table.exit_code == 0, table.output
    lines = table.output.splitlines()
    assert all(len(line) <= 80 for line in lines), lines
    for exp_id, branch in made.items():
        row = next(line for line in lines if exp_id[:10] in line)
        assert branch.rsplit("-", 1)[1] in row, row  # the distinguishing tail is shown


# --- the cache: an edit in place, and damage --------------------------------------------


def _rewrite_in_place(path: Path, old: str, new: str) -> None:
    """Rewrite a file in place (same inode), as most editors save."""
    text = path.read_text()
    assert old in text
    inode = path.stat().st_ino
    with open(path, "r+", encoding="utf-8") as handle:
        handle.seek(0)
        handle.write(text.replace(old, new))
        handle.truncate()
    assert path.stat().st_ino == inode


def test_similar_finds_an_experiment_edited_in_place_by_its_new_words_at_once(
    store: Store, make_experiment: Any
) -> None:
    target = make_experiment(
        change_summary="Stage the tile through shared memory - -4%",
        score=0.96,
        detailed_description="**Approach**: stage the tile through LDS\n\n"
        "**Key insight**: bank conflicts on the transposed read",
    )
    make_experiment(change_summary="Vectorized stores - +3%", score=1.03)
    time.sleep(RACY_NS / 1e9 + 0.3)  # the files and their folder settled

    def ids(text: str) -> list[str]:
        return [match.id for match in kexp.storage.retrieval.similar(store, text=text)]

    assert target.id in ids("bank conflicts")
    # Rewritten in place within the cache's racy window of the read above.
    assert target.path is not None
    _rewrite_in_place(Path(target.path), "bank conflicts on the transposed read",
                      "swizzled addressing removes the serialization")  # fmt: skip
    assert target.id in ids("swizzled addressing")
    assert target.id not in ids("bank conflicts")
    result = invoke(store.root, "similar", "--text", "swizzled serialization", "--json")
    assert target.id in [m["id"] for m in json.loads(result.stdout)]


def _damage_every_row(database: Path) -> None:
    """Overwrite the text and blob values of the first row of every table with garbage."""
    connection = sqlite3.connect(database)
    try:
        tables = [
            name
            for (name, sql) in connection.execute(
                "SELECT name, sql FROM sqlite_master WHERE type = 'table'"
            )
            if "VIRTUAL" not in (sql or "").upper()
            and not name.startswith("sqlite_")
            and "fts" not in name
        ]
        for table in tables:
            columns = connection.execute(f"PRAGMA table_info({table})").fetchall()
            keys = [column for _, column, _, _, _, primary in columns if primary]
            first = connection.execute(
                f"SELECT {', '.join(keys) or 'rowid'} FROM {table} LIMIT 1"
            ).fetchone()
            if first is None:
                continue
            where = " AND ".join(f"{key} = ?" for key in keys or ["rowid"])
            for _, column, kind, _, _, primary in columns:
                if primary or kind.upper() not in ("TEXT", "BLOB", ""):
                    continue
                garbage: Any = b"{\x00garbage" if kind.upper() == "BLOB" else "{garbage"
                connection.execute(
                    f"UPDATE {table} SET {column} = ? WHERE {where}", (garbage, *first)
                )
        connection.commit()
    finally:
        connection.close()


def _flip_bits(database: Path) -> None:
    """Flip one bit in every 512 bytes past the file's header."""
    data = bytearray(database.read_bytes())
    for at in range(100 + 37, len(data), 512):
        data[at] ^= 1 << (at % 8)
    database.write_bytes(bytes(data))


@pytest.mark.parametrize("damage", [_damage_every_row, _flip_bits])
def test_a_damaged_cache_is_rebuilt_and_reads_across_refs_answer_the_files(
    agents: tuple[Path, Path, str], damage: Any
) -> None:
    alice, bob, base = agents
    # Four versions of one change, two in each clone: each clone's second is a near-duplicate.
    with pytest.warns(NearDuplicateWarning):
        for n in range(4):
            record(alice if n % 2 else bob, base, f"Try {n} - +{n}%", score=1 + n / 100,
                   code_change=OPENMP.replace("8", str(n + 2)))  # fmt: skip
    sync(Store(bob), branch="kexp/bob")
    git(alice, "fetch", "-q")

    def answer() -> tuple[int, Any]:
        result = invoke(alice, "list", "--all-refs", "--json")
        if result.exit_code != 0:
            return result.exit_code, result.output
        return 0, sorted((r["id"], r["score"], r["ref"]) for r in json.loads(result.stdout))

    invoke(alice, "similar", "--all-refs", "--text", "try")  # every cache written
    truth = answer()
    assert truth[0] == 0 and len(truth[1]) == 4
    caches = sorted((alice / ".kexp").glob("*.sqlite"))
    assert caches
    for cache in caches:
        damage(cache)
    assert answer() == truth
    assert answer() == truth  # and again, from the rebuilt cache
    shutil.rmtree(alice / ".kexp")
    assert answer() == truth  # from nothing


def test_reading_across_refs_without_a_git_repository_is_a_clear_error(tmp_path: Path) -> None:
    root = tmp_path / "plain"
    kexp.init_store(root)
    result = invoke(root, "top", "--all-refs")
    assert result.exit_code == 2 or result.exit_code == 1
    assert "git" in result.output and "Traceback" not in result.output


def test_a_revision_store_and_the_working_tree_share_nothing_written(store: Store) -> None:
    """A store read at a revision writes nothing, not even to the cache."""
    store.create_experiment(**experiment_fields())
    shutil.rmtree(store.root / ".kexp", ignore_errors=True)
    git(store.root, "add", "-A")
    git(store.root, "commit", "-q", "-m", "store", "--allow-empty")
    at = store.at("HEAD")
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert len(at.list_experiments()) == 1
    assert not (store.root / ".kexp").exists() or not any(
        path.name.startswith("cache-") for path in (store.root / ".kexp").iterdir()
    )


def test_search_stays_true_when_an_old_version_left_git(tmp_path: Path) -> None:
    """The FTS table keeps no words of a content git holds (it gives them back to take
    the content out); when the old version has left git too (amended away, pruned), the
    table is filled again from the files: the search still answers the files."""
    from conftest import init_repo

    root = init_repo(tmp_path / "repo")
    (root / "experiments").mkdir()
    store = Store(root)
    exp = store.create_experiment(
        **experiment_fields(detailed_description="**Approach**: stage it\n\n**Key insight**: zebra")
    )
    other = store.create_experiment(**experiment_fields(change_summary="Other - +1%"))
    git(root, "add", "-A")
    git(root, "commit", "-q", "-m", "two experiments")

    def ids(text: str) -> list[str]:
        return [match.id for match in kexp.storage.retrieval.similar(store, text=text)]

    assert ids("zebra") == [exp.id]
    assert exp.path is not None
    old = git(root, "rev-parse", f"HEAD:{Path(exp.path).relative_to(root).as_posix()}")
    _rewrite_in_place(Path(exp.path), "zebra", "quokka")
    git(root, "commit", "-q", "-a", "--amend", "-m", "amended")
    git(root, "reflog", "expire", "--expire=now", "--all")
    git(root, "gc", "-q", "--prune=now")
    gone = subprocess.run(["git", "cat-file", "-e", old], cwd=root, capture_output=True)
    assert gone.returncode != 0  # the first version is no longer in git
    assert ids("quokka") == [exp.id]
    assert ids("zebra") == []
    assert other.id in ids("other")
