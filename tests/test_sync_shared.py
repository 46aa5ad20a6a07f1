"""``kexp sync --branch`` on a side branch shared by two clones, where Bob brought in the
file Alice published there as kexp advises (``git restore --source origin/kexp/shared``)
and has no branch of his own yet: what Alice changed there since is never overwritten.
Real git: a bare repository on disk as the remote, two clones."""

from __future__ import annotations

import json
import re
import subprocess
from pathlib import Path

import pytest
from conftest import git, run_kexp
from test_sync import clone, make_remote, record

SHARED = "kexp/shared"


def _shared(tmp_path: Path) -> tuple[Path, Path, Path, str, str]:
    """Alice publishes X to the side branch; Bob fetches and brings X's file in as the
    refused ``kexp update`` says (run as printed); Alice then corrects X to 1.04 and
    publishes it. (remote, alice, bob, X's id, X's path)."""
    remote, base = make_remote(tmp_path)
    alice = clone(remote, tmp_path / "alice")
    bob = clone(remote, tmp_path / "bob")
    made = record(alice, base, "Unroll by 4 - +2%", score=1.02)
    assert run_kexp("sync", "--branch", SHARED, cwd=alice).returncode == 0
    assert made.path is not None
    path = made.path.relative_to(alice).as_posix()
    git(bob, "fetch", "-q")
    refused = run_kexp("update", made.id, "--set", "score=1.06", "--reason", "b", cwd=bob)
    said = re.search(r"\((git restore [^)]*)\)", refused.stderr)
    assert refused.returncode != 0 and said is not None, refused.stderr
    subprocess.run(["bash", "-c", said.group(1)], cwd=bob, check=True)
    fixed = run_kexp("update", made.id, "--set", "score=1.04", "--reason",
                     "a: fixed the timer", cwd=alice)  # fmt: skip
    assert fixed.returncode == 0, fixed.stderr
    assert run_kexp("sync", "--branch", SHARED, cwd=alice).returncode == 0
    return remote, alice, bob, made.id, path


def _on_branch(remote: Path, path: str) -> str:
    return git(remote, "show", f"{SHARED}:{path}")


@pytest.mark.parametrize("way", ["publish your version", "take theirs"])
def test_a_correction_over_one_made_since_this_clone_fetched_stops_and_settles_as_said(
    tmp_path: Path, way: str
) -> None:
    """Bob corrects X to 1.06 on the version he brought in, and syncs: it stops naming
    X (Alice's 1.04 and her note were overwritten, silently), the branch untouched; each
    way the line gives, run as printed, settles it."""
    remote, _, bob, exp_id, path = _shared(tmp_path)
    assert run_kexp("update", exp_id, "--set", "score=1.06", "--reason", "b: remeasured",
                    cwd=bob).returncode == 0  # fmt: skip

    refused = run_kexp("sync", "--branch", SHARED, cwd=bob)
    assert refused.returncode != 0
    assert path in refused.stderr and "changed both here and on" in refused.stderr
    assert "score: 1.04" in _on_branch(remote, path)
    command = re.search(rf"to {way}.*?, run (.*?) and (kexp|the same) sync", refused.stderr)
    assert command is not None, refused.stderr
    subprocess.run(["bash", "-c", command.group(1)], cwd=bob, check=True)
    done = run_kexp("sync", "--branch", SHARED, cwd=bob)
    assert done.returncode == 0, done.stderr
    kept = "1.06" if way == "publish your version" else "1.04"
    assert f"score: {kept}" in _on_branch(remote, path)
    assert f"score: {kept}" in (bob / path).read_text()


def test_a_file_brought_in_and_left_as_it_was_never_undoes_a_correction(tmp_path: Path) -> None:
    """Bob leaves X as he brought it in (1.02) and records an experiment of his own:
    his sync publishes his, and X stays as Alice corrected it (it went back to 1.02)."""
    remote, _, bob, exp_id, path = _shared(tmp_path)
    base = git(bob, "rev-parse", "HEAD")
    mine = record(bob, base, "Vectorize loads - +5%", score=1.05)

    done = run_kexp("sync", "--branch", SHARED, cwd=bob)
    assert done.returncode == 0, done.stderr
    on_branch = _on_branch(remote, path)
    assert "score: 1.04" in on_branch and "a: fixed the timer" in on_branch
    listed = git(remote, "ls-tree", "-r", "--name-only", SHARED, "--", "experiments")
    assert f"/{mine.id}-" in listed and f"/{exp_id}-" in listed


def test_a_removal_of_another_clones_file_is_said_kept_and_removed_as_said(
    tmp_path: Path,
) -> None:
    """Bob brings X in as advised and ``kexp rm``s it: his ``kexp sync --branch`` keeps
    X on the branch (another clone published it), says so (it said "up to date ...:
    nothing to commit or push", in JSON too) with the command that removes it there,
    which, run as printed, does; his next sync is quiet and keeps nothing back."""
    remote, _, bob, exp_id, path = _shared(tmp_path)
    assert run_kexp("rm", exp_id, "--yes", cwd=bob).returncode == 0

    done = run_kexp("sync", "--branch", SHARED, "--json", cwd=bob)
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["kept_back"] == [path]
    assert json.loads(done.stdout)["up_to_date"] is False  # (X waits on him)
    said = run_kexp("sync", "--branch", SHARED, cwd=bob).stdout
    assert f"kept 1 experiment file(s) removed here on {SHARED}" in said, said
    assert "up to date" not in said, said
    assert path in _listed(remote)
    command = re.search(rf"to remove them from {SHARED} too, run (.*)$", said.strip())
    assert command is not None, said
    subprocess.run(["bash", "-c", command.group(1)], cwd=bob, check=True)
    assert path not in _listed(remote)

    again = run_kexp("sync", "--branch", SHARED, "--json", cwd=bob)
    assert again.returncode == 0, again.stderr
    assert json.loads(again.stdout)["kept_back"] == []
    assert json.loads(again.stdout)["up_to_date"] is True
    assert path not in _listed(remote)


def _listed(remote: Path) -> str:
    return git(remote, "ls-tree", "-r", "--name-only", SHARED, "--", "experiments")


@pytest.mark.parametrize("fetched", [False, True])
def test_a_copy_brought_in_is_never_published_over_a_correction_made_since(
    tmp_path: Path, fetched: bool
) -> None:
    """Bob leaves X as he brought it in (1.02; Alice has corrected it to 1.04 since),
    records an experiment and syncs, twice; ``fetched``: a plain ``git fetch`` (his
    editor's) ran before. X was published back to 1.02, silently: at his second sync
    (his copy differed from the branch he had merged), or at once after the fetch (his
    copy differed from the branch as fetched). Now X stays 1.04 on the branch, and his
    copy is taken in, said."""
    remote, _, bob, exp_id, path = _shared(tmp_path)
    if fetched:
        git(bob, "fetch", "-q")
    base = git(bob, "rev-parse", "HEAD")
    mine = [record(bob, base, "Vectorize loads - +5%", score=1.05).id]
    planned = run_kexp("sync", "--branch", SHARED, "--dry-run", "--json", cwd=bob)
    assert planned.returncode == 0, planned.stderr
    if fetched:  # (as last fetched: the dry run says what the sync then does)
        assert json.loads(planned.stdout)["taken_in"] == [path]
    assert path not in json.loads(planned.stdout)["committed"]
    done = run_kexp("sync", "--branch", SHARED, cwd=bob)
    assert done.returncode == 0, done.stderr
    mine += [record(bob, base, "Tile by 64 - +1%", score=1.01).id]
    again = run_kexp("sync", "--branch", SHARED, cwd=bob)
    assert again.returncode == 0, again.stderr
    on_branch = _on_branch(remote, path)
    assert "score: 1.04" in on_branch and "a: fixed the timer" in on_branch
    assert "score: 1.04" in (bob / path).read_text()
    assert path in done.stdout and "into the working tree" in done.stdout, done.stdout
    listed = _listed(remote)
    assert all(f"/{i}-" in listed for i in [exp_id, *mine])


def test_a_dry_run_whose_only_change_is_a_stale_copy_says_what_the_sync_does(
    tmp_path: Path,
) -> None:
    """Bob's only change is the copy he brought in, which Alice has corrected since (he
    fetched): the sync takes her version in and makes his branch, committing and
    pushing nothing. The dry run said it would push a commit (the copy, left out of
    what it listed, was committed all the same); it says what the sync then does."""
    remote, _, bob, _, path = _shared(tmp_path)
    git(bob, "fetch", "-q")
    planned = run_kexp("sync", "--branch", SHARED, "--dry-run", cwd=bob)
    answer = json.loads(run_kexp("sync", "--branch", SHARED, "--dry-run", "--json", cwd=bob).stdout)
    before = git(remote, "rev-parse", SHARED)
    done = json.loads(run_kexp("sync", "--branch", SHARED, "--json", cwd=bob).stdout)
    assert git(remote, "rev-parse", SHARED) == before
    assert (done["committed"], done["pushed"], done["taken_in"]) == ([], False, [path]), done
    assert (answer["committed"], answer["would_push"], answer["commits_to_push"]) == (
        done["committed"], done["pushed"], done["commits_pushed"]
    ), answer  # fmt: skip
    assert answer["taken_in"] == [path] and answer["would_make_branch"], answer
    assert "would push" not in planned.stdout and "would commit" not in planned.stdout
    assert "would take" in planned.stdout and path in planned.stdout, planned.stdout
