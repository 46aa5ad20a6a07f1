"""A removal read across refs (``--all-refs``) with real clones of a bare remote: a
removal waiting on another agent's side branch (a pull request under review) does not
hide an experiment that the reader's working tree or the remote's default branch
holds; it is shown, noting the ref that removed it. The reader's own removal, and one
the default branch made, still hide it. The truth is what the files hold (read with
git), never kexp's own report.
"""

from __future__ import annotations

import csv
import io
import json
from pathlib import Path
from typing import Any

from click.testing import CliRunner
from conftest import git
from test_sync import clone, published

from kexp import Store
from kexp.cli.main import main

#: The dead end: a regression with its key insight (what the consult offers).
DEAD_END = "Stage row through smem - regression"
INSIGHT = "**Approach**: stage it\n\n**Key insight**: registers hold the row; do not stage it"


def seeded(dead_score: float) -> tuple[tuple[str, dict[str, Any]], ...]:
    """What the publisher records (:func:`test_sync.published`): the dead end (its score
    ``dead_score``, its key insight) and a good step."""
    return (
        (DEAD_END, {"score": dead_score, "detailed_description": INSIGHT}),
        ("Vectorized loads - +3%", {"score": 1.03}),
    )


def invoke(root: Path, *args: str) -> Any:
    """``kexp --root ROOT ARGS`` in this process (click's runner)."""
    return CliRunner().invoke(main, ["--root", str(root), *args], env={"COLUMNS": ""})


def _removed_on_a_side_branch(tmp_path: Path) -> tuple[str, str, Path, Path, str]:
    """Seed publishes a dead end and a good step on main; A removes the dead end on a
    side branch it pushes (unmerged); B clones and fetches: (dead end's id, the good
    one's, A, B, the remote's first commit: an empty store)."""
    remote, base, (dead, good) = published(tmp_path, *seeded(0.85))
    a, b = clone(remote, tmp_path / "a"), clone(remote, tmp_path / "b")
    git(a, "switch", "-q", "-c", "kexp/a")
    gone = next((a / "experiments").rglob(f"{dead.id}-*.md")).relative_to(a)
    git(a, "rm", "-q", str(gone))
    git(a, "commit", "-q", "-m", "tidy (unreviewed)")
    git(a, "push", "-q", "origin", "kexp/a")
    git(b, "fetch", "-q")
    # The truth, from git: B's checkout and main hold it; the side branch does not.
    assert dead.id in git(b, "ls-tree", "-r", "--name-only", "origin/main", "--", "experiments")
    assert dead.id not in git(b, "ls-tree", "-r", "--name-only", "origin/kexp/a")
    assert list((b / "experiments").rglob(f"{dead.id}-*.md"))
    return dead.id, good.id, a, b, base


def test_a_removal_on_an_unmerged_side_branch_hides_nothing_the_reader_holds(
    tmp_path: Path,
) -> None:
    """B's checkout (and main) hold A's dead end, which A removed on a side branch under
    review: every ``--all-refs`` read of B counts, ranks and offers it (stats, top,
    lessons, the consult), noting that origin/kexp/a removed it."""
    dead, good, _, b, _ = _removed_on_a_side_branch(tmp_path)
    stats = json.loads(invoke(b, "stats", "--all-refs", "--json").stdout)
    assert stats["total"] == 2, stats
    top = json.loads(invoke(b, "top", "--all-refs", "--json", "-n", "10").stdout)
    assert sorted(r["id"] for r in top) == sorted([dead, good]), top
    row = next(r for r in top if r["id"] == dead)
    assert row["ref"] == "local" and row["removed_on"] == ["origin/kexp/a"], row
    assert "removed on origin/kexp/a" in row["note"], row
    lessons = invoke(b, "lessons", "--all-refs").output
    assert dead[:10] in lessons and "registers hold the row" in lessons, lessons
    packet = invoke(
        b, "context", "--operator", "reshape_and_cache_flash", "--text",
        "stage the row through smem", "--all-refs",
    ).output  # fmt: skip
    assert dead[:10] in packet and "registers hold the row" in packet, packet
    assert "Nothing recorded here yet" not in packet, packet
    shown = invoke(b, "show", dead, "--all-refs")
    assert shown.exit_code == 0 and DEAD_END in shown.output, shown.output
    # The library says so too: one entry each, the removal noted on the sighting.
    found = {e.id: e for e in Store(b, all_refs=True).list_experiments()}
    assert sorted(found) == sorted([dead, good])
    where = found[dead].where
    assert where is not None and where.removed_on == ("origin/kexp/a",), where
    assert found[good].where is not None and found[good].where.removed_on == ()


def test_a_side_branch_removal_hides_nothing_the_default_branch_holds(tmp_path: Path) -> None:
    """A reader whose checkout is older than the dead end (it forked before main got
    it) still sees it across refs: main, the remote's default branch, holds it; the
    removal waits on origin/kexp/a."""
    dead, good, _, b, base = _removed_on_a_side_branch(tmp_path)
    git(b, "switch", "-q", "-c", "kexp/b", base)
    assert [p.name for p in (b / "experiments").rglob("*.md")] == ["README.md"]
    ids = sorted(e.id for e in Store(b, all_refs=True).list_experiments())
    assert ids == sorted([dead, good])
    stats = json.loads(invoke(b, "stats", "--all-refs", "--json").stdout)
    assert stats["total"] == 2, stats


def test_the_readers_own_removal_and_the_default_branchs_still_hide_it(tmp_path: Path) -> None:
    """The reader's own ``kexp rm`` is its newest state: gone across refs, though main
    holds it. Once the removal lands on main (the default branch) and the reader's
    checkout moved past it, a stale side branch still holding it does not bring it
    back."""
    dead, good, a, b, base = _removed_on_a_side_branch(tmp_path)
    Store(b).delete_experiment(dead)
    assert [e.id for e in Store(b, all_refs=True).list_experiments()] == [good]
    shown = invoke(b, "show", dead, "--all-refs")
    assert shown.exit_code == 2 and "was removed in the working tree" in shown.output
    git(b, "checkout", "-q", "--", "experiments")  # the removal undone: shown again
    assert sorted(e.id for e in Store(b, all_refs=True).list_experiments()) == sorted([dead, good])
    # The removal lands on main; B keeps a stale branch holding it and moves on.
    git(b, "branch", "stale")
    git(a, "push", "-q", "origin", "kexp/a:main")
    git(b, "pull", "-q")
    assert dead in git(b, "ls-tree", "-r", "--name-only", "stale", "--", "experiments")
    assert [e.id for e in Store(b, all_refs=True).list_experiments()] == [good]
    # A reader on an older checkout that never held it: main's removal hides it too.
    git(b, "switch", "-q", "-c", "kexp/b", base)
    assert [e.id for e in Store(b, all_refs=True).list_experiments()] == [good]


def test_the_text_views_mark_what_a_side_branch_removes(tmp_path: Path) -> None:
    """B reads across refs the dead end that A removed on a side branch: every text view
    that says where an experiment was found marks it, at 80 columns (the REF column of
    top, list and similar: "removed elsewhere"; show, the consult and the MCP server's
    consult: "removed on origin/kexp/a"), and leaves the good step unmarked."""
    from test_mcp import Agent, run_agent

    dead, good, _, b, _ = _removed_on_a_side_branch(tmp_path)
    narrow = {"COLUMNS": "80", "KEXP_PAGER": "cat"}
    for command in (
        ("top", "--all-refs", "-n", "10"),
        ("list", "--all-refs"),
        ("similar", "--all-refs", "--text", "stage the row through smem loads"),
    ):
        done = CliRunner().invoke(main, ["--root", str(b), *command], env=narrow)
        assert done.exit_code == 0, done.output
        lines = done.stdout.splitlines()
        assert all(len(line) <= 80 for line in lines), (command, done.stdout)
        assert "removed elsewhere" in next(line for line in lines if dead[:10] in line), lines
        kept = [line for line in lines if good[:10] in line]
        assert kept and all("removed" not in line for line in kept), lines
    shown = invoke(b, "show", dead, "--all-refs").output
    assert "removed on origin/kexp/a" in shown, shown
    assert "removed" not in invoke(b, "show", good, "--all-refs").output

    def entries(packet: str) -> dict[str, str]:
        """Each experiment's line of a consult, by id."""
        return {i: next(ln for ln in packet.splitlines() if ln.startswith(f"- {i[:10]} "))
                for i in (dead, good)}  # fmt: skip

    packet = invoke(
        b, "context", "--operator", "reshape_and_cache_flash", "--text",
        "stage the row through smem", "--all-refs",
    ).output  # fmt: skip
    said = entries(packet)
    assert "removed on origin/kexp/a" in said[dead] and "removed" not in said[good], packet
    data = json.loads(invoke(
        b, "context", "--operator", "reshape_and_cache_flash", "--all-refs", "--json"
    ).stdout)  # fmt: skip
    listed = [v for value in data.values() for v in (value if isinstance(value, list) else [value])]
    found = [e for e in listed if isinstance(e, dict) and e.get("id") == dead]
    assert found and all(e["removed_on"] == ["origin/kexp/a"] for e in found), data

    async def work(agent: Agent) -> None:
        failed, texts = await agent.call(
            "consult", operator="reshape_and_cache_flash", plan="stage the row through smem",
            all_refs=True,
        )  # fmt: skip
        assert not failed, texts
        told = entries(texts[0])
        assert "removed on origin/kexp/a" in told[dead] and "removed" not in told[good], texts

    run_agent(b, work)


def test_the_exports_say_which_side_branch_removes_it(tmp_path: Path) -> None:
    """Trial K08: a lead exports B's store across refs for SQL. The dead end A removed
    on its side branch carries ``removed_on`` (as ``kexp top --all-refs --json`` says)
    in JSON Lines, CSV and the Parquet table DuckDB reads; the good step an empty one."""
    import pytest

    duckdb = pytest.importorskip("duckdb")
    pytest.importorskip("pyarrow")
    dead, good, _, b, _ = _removed_on_a_side_branch(tmp_path)
    top = json.loads(invoke(b, "top", "--all-refs", "--json", "-n", "10").stdout)
    said = {r["id"]: r.get("removed_on", []) for r in top}
    assert said == {dead: ["origin/kexp/a"], good: []}

    lines = invoke(b, "export", "--format", "jsonl", "--all-refs").stdout.splitlines()
    assert {r["id"]: r["removed_on"] for r in map(json.loads, lines)} == said
    table = invoke(b, "export", "--format", "csv", "--all-refs").stdout
    cells = {r["id"]: r["removed_on"] for r in csv.DictReader(io.StringIO(table))}
    assert cells == {dead: "origin/kexp/a", good: ""}
    out = tmp_path / "pq"
    assert invoke(b, "export", "--format", "parquet", "--all-refs", "-o", str(out)).exit_code == 0
    found = duckdb.sql(
        f"SELECT id, removed_on FROM read_parquet('{out}/experiments/**/*.parquet', "
        "hive_partitioning=true) WHERE len(removed_on) > 0"
    ).fetchall()
    assert found == [(dead, ["origin/kexp/a"])]
