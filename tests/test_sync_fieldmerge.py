"""Two agents on one branch correct one experiment apart: corrections of different
fields (each with its dated note) merge at ``kexp sync``, field by field; the same field
corrected otherwise on both sides still stops the sync, nothing lost. Real git: a bare
repository on disk as the remote, one clone per agent; the agents through the MCP SDK's
own client on ``kexp mcp`` subprocesses, or real ``kexp`` processes."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from conftest import git, run_kexp
from test_sync import clone, make_remote, record

pytest.importorskip("mcp")
from test_mcp import Agent, run_agent

OP = "kernels/gemm.cu: gemm_bf16"


def _corrected_on_both(tmp_path: Path) -> tuple[Path, Path, Path, str, str]:
    """A bare remote whose main holds one experiment (1.43), and two clones of it:
    (the remote, alice, bob, the experiment's id, its path in the repository)."""
    remote, base = make_remote(tmp_path)
    alice, bob = clone(remote, tmp_path / "alice"), clone(remote, tmp_path / "bob")
    made = record(alice, base, "Tile - +43%", score=1.43, operator_sig=OP, env="H100")
    assert made.path is not None
    assert run_kexp("sync", cwd=alice, process=True).returncode == 0
    assert run_kexp("sync", cwd=bob, process=True).returncode == 0
    return remote, alice, bob, made.id, made.path.relative_to(alice).as_posix()


def test_corrections_of_different_fields_by_two_mcp_agents_merge_at_sync(
    tmp_path: Path,
) -> None:
    """Alice corrects the score, Bob the tags, each with a reason, both on main. Bob's
    sync merges the two (before: it stopped with 'merge by hand (git ... merge
    origin/main)', on every later call too, so his next record, a dead end, stayed
    unshared): main holds Alice's score, Bob's tags and both notes, and Bob's dead end."""
    remote, alice, bob, exp_id, path = _corrected_on_both(tmp_path)

    async def alice_corrects(agent: Agent) -> None:
        await agent.json("update", exp_id=exp_id[:10], changes={"score": 1.4}, reason="a rerun")
        assert (await agent.json("sync"))["pushed"]

    async def bob_corrects(agent: Agent) -> None:
        await agent.json("update", exp_id=exp_id[:10], changes={"tags": ["tiling"]}, reason="b")
        done = await agent.json("sync")
        assert done["merged"] and done["pushed"], done
        assert done["merged_by_field"] == [path], done
        dead = await agent.json(
            "record", change_summary="cp.async - -6% (dead end)", operator_sig=OP,
            dtype_sig="bf16", env="H100", score=0.94,
        )  # fmt: skip
        assert (await agent.json("sync"))["pushed"]
        assert dead["id"] in git(remote, "ls-tree", "-r", "--name-only", "main")

    run_agent(alice, alice_corrects)
    run_agent(bob, bob_corrects)
    merged = git(remote, "show", f"main:{path}")
    assert re.search(r"^score: 1\.4$", merged, re.MULTILINE), merged
    assert re.search(r"^tags: \[tiling\]$", merged, re.MULTILINE), merged
    notes = re.findall(r"^\*\*Correction \(.*Reason: (.*)$", merged, re.MULTILINE)
    assert notes == ["a rerun", "b"], merged
    assert (bob / path).read_text().rstrip("\n") == merged  # the checkout took it in
    checked = run_kexp("validate", cwd=bob, process=True)
    assert checked.returncode == 0, checked.stdout + checked.stderr


@pytest.mark.parametrize(
    ("alice_sets", "bob_sets"),
    [
        (["score=1.4"], ["score=1.45"]),
        (["detailed_description=Tiled 64x64."], ["detailed_description=Tiled 128x64."]),
    ],
    ids=["same-field", "same-text-rewritten"],
)
def test_the_same_field_corrected_otherwise_on_both_sides_still_stops_the_sync(
    tmp_path: Path, alice_sets: list[str], bob_sets: list[str]
) -> None:
    """No field-level merge picks a side: the sync stops naming the file, the remote
    keeps Alice's version and Bob's commit keeps his."""
    remote, alice, bob, exp_id, path = _corrected_on_both(tmp_path)
    for root, sets in ((alice, alice_sets), (bob, bob_sets)):
        options = [part for value in sets for part in ("--set", value)]
        fixed = run_kexp("update", exp_id, *options, cwd=root, process=True)
        assert fixed.returncode == 0, fixed.stderr
    assert run_kexp("sync", cwd=alice, process=True).returncode == 0
    theirs = git(remote, "rev-parse", "main")
    stopped = run_kexp("sync", cwd=bob, process=True)
    assert stopped.returncode != 0 and path in stopped.stderr, stopped.stderr
    assert git(remote, "rev-parse", "main") == theirs
    assert git(bob, "show", f"HEAD:{path}") == (bob / path).read_text().rstrip("\n")


def test_an_mcp_agent_stopped_by_a_real_conflict_is_told_a_tool_way_to_share(
    tmp_path: Path,
) -> None:
    """Alice and Bob correct the same score otherwise: Bob's sync on main stops (a real
    conflict), and says, in the tools' words, how to publish his experiments meanwhile
    (before: 'merge by hand (git ... merge origin/main)' alone, which no tool does, so
    his next records stayed unshared); following it publishes his dead end, which
    Alice's sync then fetches."""
    remote, alice, bob, exp_id, _ = _corrected_on_both(tmp_path)
    fixed = run_kexp("update", exp_id, "--set", "score=1.4", cwd=alice, process=True)
    assert fixed.returncode == 0, fixed.stderr
    assert run_kexp("sync", cwd=alice, process=True).returncode == 0

    async def bob_works(agent: Agent) -> None:
        await agent.json("update", exp_id=exp_id[:10], changes={"score": 1.45}, reason="b")
        dead = await agent.json(
            "record", change_summary="cp.async - -6% (dead end)", operator_sig=OP,
            dtype_sig="bf16", env="H100", score=0.94,
        )  # fmt: skip
        failed, texts = await agent.call("sync")
        assert failed and "--" not in texts[0], texts
        assert 'call sync with branch: "kexp/<name>"' in texts[0], texts
        shared = await agent.json("sync", branch="kexp/bob")
        assert shared["pushed"], shared
        assert dead["id"] in git(remote, "ls-tree", "-r", "--name-only", "kexp/bob")

    run_agent(bob, bob_works)
    done = run_kexp("sync", "--json", cwd=alice, process=True)
    assert {"branch": "kexp/bob", "commits": 1, "new": True} in json.loads(done.stdout)["fetched"]


@pytest.mark.parametrize("beside_a_correction", [False, True], ids=["alone", "field-merged"])
def test_a_score_edited_by_hand_is_published_with_a_warning(
    tmp_path: Path, beside_a_correction: bool
) -> None:
    """Bob edits the score line by hand, no correction note (kexp validate --changed warns
    score-without-note: a warning, the same file as a kexp update without --reason), alone
    or while Alice corrected the tags: his sync publishes it and says so, naming the file
    and the change (before: without a word, field-merged beside Alice's note too)."""
    remote, alice, bob, exp_id, path = _corrected_on_both(tmp_path)
    if beside_a_correction:
        fixed = run_kexp("update", exp_id, "--set", "tags=tiling", "--reason", "a", cwd=alice)
        assert fixed.returncode == 0, fixed.stderr
        assert run_kexp("sync", cwd=alice, process=True).returncode == 0
    (bob / path).write_text((bob / path).read_text().replace("score: 1.43", "score: 2.9"))
    done = run_kexp("sync", cwd=bob, process=True)
    assert done.returncode == 0, done.stderr
    warned = [line for line in done.stdout.splitlines() if "score-without-note" in line]
    assert len(warned) == 1 and path in warned[0] and "1.43 → 2.9" in warned[0], done.stdout
    assert "kexp update ID --set score=SCORE --reason TEXT" in warned[0]
    published = git(remote, "show", f"main:{path}")
    assert re.search(r"^score: 2\.9$", published, re.MULTILINE), published
    assert ("tags: [tiling]" in published) == beside_a_correction
    as_json = run_kexp("sync", "--json", cwd=bob, process=True)  # nothing new: no warning
    assert json.loads(as_json.stdout)["unexplained"] == [], as_json.stdout


def test_a_score_correction_merges_beside_a_description_rewritten_on_the_other_side(
    tmp_path: Path,
) -> None:
    """Alice corrects the score (her note appended to the description), Bob rewrites the
    description (kexp update --set-file, with his reason): only Bob rewrote the text, so
    his sync merges field by field (before: it stopped, 'merge by hand'): Alice's score,
    Bob's text, both notes (Alice's first), nothing lost."""
    remote, _ = make_remote(tmp_path)
    alice, bob = clone(remote, tmp_path / "alice"), clone(remote, tmp_path / "bob")
    added = run_kexp(
        "add", "--summary", "Tile - +43%", "--score", "1.43", "--operator", OP, "--dtype",
        "bf16", "--env", "H100", "--description", "Tiles 64x64.", "--json", cwd=alice,
        process=True,
    )  # fmt: skip
    assert added.returncode == 0, added.stderr
    exp_id, path = json.loads(added.stdout)["id"], json.loads(added.stdout)["path"]
    assert (alice / path).is_file(), path
    for root in (alice, bob):
        assert run_kexp("sync", cwd=root, process=True).returncode == 0
    fixed = run_kexp("update", exp_id, "--set", "score=1.40", "--reason", "a rerun", cwd=alice)
    assert fixed.returncode == 0, fixed.stderr
    assert run_kexp("sync", cwd=alice, process=True).returncode == 0
    (tmp_path / "d.txt").write_text("Tiles 64x64, 2 warps per tile.\n")
    rewritten = run_kexp(
        "update", exp_id, "--set-file", f"detailed_description={tmp_path / 'd.txt'}",
        "--reason", "b detail", cwd=bob,
    )  # fmt: skip
    assert rewritten.returncode == 0, rewritten.stderr
    done = run_kexp("sync", "--json", cwd=bob, process=True)
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["merged_by_field"] == [path], done.stdout
    merged = git(remote, "show", f"main:{path}")
    assert re.search(r"^score: 1\.4$", merged, re.MULTILINE), merged
    assert "Tiles 64x64, 2 warps per tile." in merged
    notes = re.findall(r"^\*\*Correction \(.*Reason: (.*)$", merged, re.MULTILINE)
    assert notes == ["a rerun", "b detail"], merged
    checked = run_kexp("validate", cwd=bob, process=True)
    assert checked.returncode == 0, checked.stdout + checked.stderr
