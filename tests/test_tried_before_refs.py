"""Tried before across a sync and across refs, as agents meet it: the same change
measured again after ``kexp sync`` moved ``HEAD`` (a commit of ``experiments/`` alone)
is still the same measurement, one after a code commit is not; an entry of ``kexp
context --diff --all-refs`` found on another agent's branch says which. A bare remote
on disk, clones, ``kexp sync`` for real."""

from __future__ import annotations

import json
import re
from pathlib import Path

from conftest import git, run_kexp
from test_sync import clone, make_remote

KERNEL = ["--operator", "kernel.cu: k", "--dtype", "fp16", "--env", "H100"]
DESCRIPTION = ["--description", "**Approach**: a.\n\n**Key insight**: b."]
#: The kernel as the change leaves it (the seed's is ``__global__ void k() {}``).
CHANGED = "__global__ void k() {\n  float acc = 0.f;\n  acc += acc;\n}\n"


def timings(folder: Path, name: str, scale: float) -> list[str]:
    """``--baseline B --candidate C`` files of 8 samples a side, the candidate ``scale``
    times faster, each sample set apart by ``name`` (a new round, not a copy)."""
    shift = sum(map(ord, name)) % 7 / 100
    base = [10.0 + shift + i / 50 for i in range(8)]
    (folder / f"{name}-b.json").write_text(json.dumps({"s": base}))
    # (the candidate's samples in another order: a run of its own, never a copy)
    (folder / f"{name}-c.json").write_text(json.dumps({"s": [t / scale for t in base[::-1]]}))
    return ["--baseline", str(folder / f"{name}-b.json"),
            "--candidate", str(folder / f"{name}-c.json")]  # fmt: skip


def record(clone_dir: Path, files: list[str], base: str = "HEAD") -> tuple[int, str, str]:
    """``kexp add`` of the kernel's change on ``base`` (``--diff-from-git``; for a commit
    git cannot find, ``git diff``'s output as ``--diff-file``): the exit status, the new
    id ("" when refused) and what it said on stderr."""
    diff = ["--diff-from-git"]
    if base != "HEAD":
        (clone_dir / "change.diff").write_text(git(clone_dir, "diff") + "\n")
        diff = ["--diff-file", str(clone_dir / "change.diff")]
    done = run_kexp("add", *KERNEL, "--summary", "Add instead of multiply - +4%", *DESCRIPTION,
                    "--base-commit", base, *diff, "--json", *files, cwd=clone_dir)  # fmt: skip
    made = json.loads(done.stdout)["id"] if done.returncode == 0 else ""
    return done.returncode, made, done.stderr


def agent(tmp_path: Path, name: str = "a") -> Path:
    """A clone of a new remote (:func:`make_remote`) with the kernel changed, not
    committed; timing files kept out of git."""
    remote, _ = make_remote(tmp_path)
    here = clone(remote, tmp_path / name)
    (here / ".git" / "info" / "exclude").write_text("*.json\n*.diff\n")
    (here / "kernel.cu").write_text(CHANGED)
    return here


def test_the_same_change_measured_again_after_a_sync_is_a_round_to_add(tmp_path: Path) -> None:
    """Record, ``kexp sync`` (it commits ``experiments/`` alone: ``HEAD`` moves, the code
    does not), record the same change again: it warned "already tried ... read that
    experiment" (another base commit), so that the loop record-sync got past the advice
    against re-running until it wins. It is the same measurement again, as before the
    sync: the warning says to add a round, and the advice run as printed pools it; the
    same timing files given again (a retried call) are refused, as before a sync."""
    here = agent(tmp_path)
    code, first, _ = record(here, timings(here, "r1", 1.04))
    assert code == 0
    before = git(here, "rev-parse", "HEAD")
    synced = run_kexp("sync", cwd=here)
    assert synced.returncode == 0, synced.stderr
    assert git(here, "rev-parse", "HEAD") != before  # the sync moved HEAD
    assert git(here, "diff", "--name-only", before, "HEAD", "--", ":!experiments") == ""

    code, _, said = record(here, timings(here, "r1", 1.04))  # the same files again
    assert code != 0 and f"experiment {first}" in said and "holds this measurement" in said, said

    second_round = timings(here, "r2", 1.05)
    code, second, warned = record(here, second_round)
    assert code == 0
    assert "it is the same measurement again" in warned, warned
    assert f"{git(here, 'rev-parse', 'HEAD')[:12]} differs from its {before[:12]} only in" in warned
    advice = re.search(r"instead \((kexp rm \S+ --yes), then (kexp remeasure \S+)", warned)
    assert advice and advice.groups() == (f"kexp rm {second} --yes", f"kexp remeasure {first}")
    assert run_kexp("rm", second, "--yes", cwd=here).returncode == 0
    pooled = run_kexp("remeasure", first, *second_round, cwd=here)
    assert pooled.returncode == 0, pooled.stderr
    (only,) = json.loads(run_kexp("list", "--json", cwd=here).stdout)
    assert only["id"] == first and only["results"][0]["baseline_n"] == 16


def test_a_record_without_a_code_change_retried_after_a_sync_is_refused(tmp_path: Path) -> None:
    """An A/A control (no code change) recorded, ``kexp sync``, then the same call again
    (the same timing files): refused as the same record made again, as it is before a
    sync; new timings are recorded."""
    remote, _ = make_remote(tmp_path)
    here = clone(remote, tmp_path / "a")
    (here / ".git" / "info" / "exclude").write_text("*.json\n")
    files = timings(here, "aa", 1.0)

    def control(files: list[str]) -> tuple[int, str]:
        """``kexp add`` of the control: its exit status, and its id or what it said."""
        done = run_kexp("add", *KERNEL, "--summary", "A/A control - +0%", "--tag", "control",
                        *DESCRIPTION, "--json", *files, cwd=here)  # fmt: skip
        return done.returncode, json.loads(done.stdout)[
            "id"
        ] if done.returncode == 0 else done.stderr

    code, first = control(files)
    assert code == 0, first
    assert run_kexp("sync", cwd=here).returncode == 0
    code, said = control(files)
    assert code != 0 and f"experiment {first}" in said and "holds this measurement" in said, said
    assert control(timings(here, "ab", 1.0))[0] == 0
    assert len(json.loads(run_kexp("list", "--json", cwd=here).stdout)) == 2


def test_after_a_code_commit_the_same_change_is_tried_before_not_measured_again(
    tmp_path: Path,
) -> None:
    """A commit that changes code outside ``experiments/`` (another file) makes another
    base: the same change recorded on it was tried before, not the same measurement."""
    here = agent(tmp_path)
    assert record(here, timings(here, "r1", 1.04))[0] == 0
    assert run_kexp("sync", cwd=here).returncode == 0
    (here / "util.cu").write_text("int helper() { return 1; }\n")
    git(here, "add", "util.cu")
    git(here, "commit", "-qm", "helper")
    code, _, warned = record(here, timings(here, "r2", 1.05))
    assert code == 0
    assert "already tried in" in warned and "same measurement" not in warned, warned


def test_base_commits_git_cannot_find_are_the_same_base_only_when_equal(
    tmp_path: Path,
) -> None:
    """Base commits recorded on another machine (git here cannot find them) are
    compared as written: two different ones are two bases, one given twice is one."""
    here = agent(tmp_path)
    elsewhere, other = "1" * 40, "2" * 40
    assert record(here, timings(here, "r1", 1.04), base=elsewhere)[0] == 0
    code, _, warned = record(here, timings(here, "r2", 1.05), base=other)
    assert code == 0
    assert "already tried in" in warned and "same measurement" not in warned, warned
    code, _, warned = record(here, timings(here, "r3", 1.03), base=other)
    assert code == 0 and "it is the same measurement again" in warned, warned


def test_an_entry_tried_on_another_agents_branch_says_which(tmp_path: Path) -> None:
    """``kexp context --diff --all-refs`` listed an experiment found only on
    ``origin/kexp/alice`` under "Tried before (your diff)" without saying where it is,
    nor its ``ref`` in JSON, as every other entry read from a ref does (and ``kexp add
    --all-refs`` does for the same experiment). It ends with ``on origin/kexp/alice``;
    one of this clone's own says ``ref: local``, as the other entries do."""
    remote, _ = make_remote(tmp_path)
    alice, bob = clone(remote, tmp_path / "alice"), clone(remote, tmp_path / "bob")
    (alice / "kernel.cu").write_text(CHANGED)
    (bob / "kernel.cu").write_text(CHANGED)
    (tmp_path / "change.diff").write_text(git(alice, "diff") + "\n")
    done = run_kexp("add", *KERNEL, "--summary", "Alice's add - +3%", "--score", "1.03",
                    *DESCRIPTION, "--diff-from-git", "--json", cwd=alice)  # fmt: skip
    assert done.returncode == 0, done.stderr
    hers = json.loads(done.stdout)["id"]
    assert run_kexp("sync", "--branch", "kexp/alice", cwd=alice).returncode == 0
    git(bob, "fetch", "-q")
    done = run_kexp("add", *KERNEL, "--summary", "Bob's add - +2%", "--score", "1.02",
                    *DESCRIPTION, "--diff-from-git", "--json", cwd=bob)  # fmt: skip
    his = json.loads(done.stdout)["id"]

    asked = ["context", *KERNEL, "--diff", str(tmp_path / "change.diff"), "--all-refs"]
    text = run_kexp(*asked, cwd=bob).stdout
    tried = text.split("## Tried before (your diff)\n", 1)[1].split("\n\n", 1)[0].splitlines()
    (her_line,) = [line for line in tried if "Alice's add" in line]
    (his_line,) = [line for line in tried if "Bob's add" in line]
    assert her_line.endswith(" on origin/kexp/alice"), tried
    assert " on " not in his_line, tried
    data = json.loads(run_kexp(*asked, "--json", cwd=bob).stdout)["tried_before"]
    refs = {entry["id"]: entry.get("ref") for entry in data}
    assert refs == {hers: "origin/kexp/alice", his: "local"}, data
    # Read without refs: no place to name (as the other entries).
    plain = json.loads(run_kexp(*asked[:-1], "--json", cwd=bob).stdout)["tried_before"]
    assert [entry.get("ref") for entry in plain] == [None], plain
