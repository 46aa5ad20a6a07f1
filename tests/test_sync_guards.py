"""``kexp sync`` never changes the code of the remote's default branch, whatever the
change is (a file's mode, a submodule's commit), however the remote names its default
branch, and whatever this clone last fetched of the other branches (a pull request's
branch another agent pushed to since). Found by an attacker; real git: a bare
repository on disk as the remote, clones of it, a real submodule."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest
from conftest import git, init_repo, run_kexp
from test_sync import clone, make_remote, record, remote_ids


def test_a_mode_change_committed_on_main_is_not_pushed_there(tmp_path: Path) -> None:
    """``chmod +x`` of a script, committed on main: kexp sync pushed it with the
    experiment, saying the commit changed nothing in the end (only contents were
    compared)."""
    remote, _ = make_remote(tmp_path)
    alice = clone(remote, tmp_path / "alice")
    main = git(remote, "rev-parse", "main")
    git(alice, "update-index", "--chmod=+x", "kernel.cu")
    git(alice, "commit", "-q", "-m", "kernel.cu: executable (local convenience)")
    record(alice, git(alice, "rev-parse", "HEAD"), "Unroll - +2%", score=1.02)

    refused = run_kexp("sync", cwd=alice)
    assert refused.returncode != 0
    assert "kernel.cu: executable" in refused.stderr, refused.stderr
    assert git(remote, "rev-parse", "main") == main


def test_a_submodule_bump_committed_on_main_is_not_pushed_there(tmp_path: Path) -> None:
    """A submodule moved to a newer commit, committed on main ("trying it"): pushed by
    kexp sync as a change that cancelled out (a submodule holds no file content)."""
    library = init_repo(tmp_path / "cutlass")
    seed = init_repo(tmp_path / "seed")
    git(seed, "-c", "protocol.file.allow=always", "submodule", "-q", "add", str(library),
        "third_party/cutlass")  # fmt: skip
    (seed / "experiments").mkdir()
    (seed / "experiments" / "README.md").write_text("The experiments.\n")
    git(seed, "add", "-A")
    git(seed, "commit", "-q", "-m", "store, with cutlass")
    remote = tmp_path / "remote.git"
    git(tmp_path, "clone", "-q", "--bare", str(seed), str(remote))
    (library / "kernel.cu").write_text("__global__ void k2() {}\n")
    git(library, "commit", "-q", "-am", "cutlass v2")
    alice = clone(remote, tmp_path / "alice")
    git(alice, "-c", "protocol.file.allow=always", "submodule", "-q", "update", "--init")
    git(alice / "third_party" / "cutlass", "pull", "-q", "origin", "main")
    git(alice, "commit", "-q", "-am", "bump cutlass to v2 (trying it)")
    record(alice, git(alice, "rev-parse", "HEAD"), "Unroll - +2%", score=1.02)
    pinned = git(remote, "ls-tree", "main", "third_party/cutlass")

    refused = run_kexp("sync", cwd=alice)
    assert refused.returncode != 0
    assert "bump cutlass" in refused.stderr, refused.stderr
    assert git(remote, "ls-tree", "main", "third_party/cutlass") == pinned


def test_a_remote_whose_head_names_no_branch_still_guards_its_default(tmp_path: Path) -> None:
    """A bare repository made with ``git init --bare`` names ``master`` (never made)
    while the team's one branch is ``trunk``: kexp sync knew no default branch and
    pushed a work-in-progress kernel commit to trunk with the experiment."""
    remote = tmp_path / "remote.git"
    git(tmp_path, "init", "-q", "--bare", "-b", "master", str(remote))
    seed = init_repo(tmp_path / "seed")
    (seed / "experiments").mkdir()
    (seed / "experiments" / "README.md").write_text("The experiments.\n")
    git(seed, "add", "-A")
    git(seed, "commit", "-q", "-m", "store")
    git(seed, "push", "-q", str(remote), "main:trunk")
    alice = tmp_path / "alice"
    git(tmp_path, "clone", "-q", "-b", "trunk", str(remote), str(alice))
    git(alice, "config", "user.name", "Alice")
    git(alice, "config", "user.email", "alice@example.com")
    kernel = git(remote, "show", "trunk:kernel.cu")
    with (alice / "kernel.cu").open("a") as file:
        file.write("// persistent grid\n")
    git(alice, "commit", "-q", "-am", "softmax: persistent grid (WIP)")
    record(alice, git(alice, "rev-parse", "HEAD~1"), "Persistent grid - +7%", score=1.07)

    refused = run_kexp("sync", cwd=alice)
    assert refused.returncode != 0
    assert "persistent grid (WIP)" in refused.stderr, refused.stderr
    assert git(remote, "show", "trunk:kernel.cu") == kernel


def test_a_side_branch_moved_since_the_last_fetch_still_holds_back_its_files(
    tmp_path: Path,
) -> None:
    """Alice publishes her experiment on a shared side branch (its pull request open);
    Bob pushes his there too. Alice's next kexp sync on main, without a fetch between,
    pushed her experiment to main past review: the side branch's new commit was not
    in her clone, and a branch whose commit cannot be read counted as holding nothing."""
    remote, base = make_remote(tmp_path)
    alice = clone(remote, tmp_path / "alice")
    bob = clone(remote, tmp_path / "bob")
    mine = record(alice, base, "Alice unroll - +2%", score=1.02)
    assert run_kexp("sync", "--branch", "kexp/shared", cwd=alice).returncode == 0
    record(bob, base, "Bob vectorize - +3%", score=1.03)
    assert run_kexp("sync", "--branch", "kexp/shared", cwd=bob).returncode == 0
    assert mine.id in remote_ids(remote, "kexp/shared")

    done = run_kexp("sync", cwd=alice)
    assert done.returncode == 0, done.stderr
    assert remote_ids(remote, "main") == []
    assert mine.path is not None and mine.path.exists()  # her file stays where it was


def test_a_kernel_edit_in_the_way_of_the_sync_is_set_aside_as_said(tmp_path: Path) -> None:
    """Alice's uncommitted kernel edit while Bob pushed a kernel fix to main: the sync
    could not bring her checkout up to date and said "commit the changes to the files
    named", which led, step by step, to a push held back (her code then on main's way).
    The advice, run as printed, sets the edit aside, syncs and brings it back."""
    import re
    import subprocess

    remote, base = make_remote(tmp_path)
    alice = clone(remote, tmp_path / "alice")
    bob = clone(remote, tmp_path / "bob")
    (bob / "kernel.cu").write_text("// bob's fix\n" + (bob / "kernel.cu").read_text())
    git(bob, "commit", "-q", "-am", "kernel: bob's fix")
    git(bob, "push", "-q", "origin", "main")
    with (alice / "kernel.cu").open("a") as file:
        file.write("// alice's work in progress\n")
    mine = record(alice, base, "Alice unroll - +1%", score=1.01)

    refused = run_kexp("sync", cwd=alice)
    assert refused.returncode != 0
    command = re.search(r"bring them back after it \((.*)\)$", refused.stderr.strip())
    assert command is not None, refused.stderr
    env = {**os.environ, "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}"}
    subprocess.run(["bash", "-c", command.group(1)], cwd=alice, check=True, env=env)

    assert remote_ids(remote) == [mine.id]
    kernel = (alice / "kernel.cu").read_text()
    assert "bob's fix" in kernel and "alice's work in progress" in kernel
    assert git(remote, "show", "main:kernel.cu").count("alice") == 0


def test_sync_branch_main_from_a_feature_branch_takes_none_of_its_code(tmp_path: Path) -> None:
    """Alice on a feature branch (a kernel commit) publishes her experiment with ``kexp
    sync --branch main``: her local main was moved onto the feature's kernel commit (the
    side branches' restart rule), the push held back blaming main, and the advised ``git
    push`` failed. Main takes the experiment alone, locally and on the remote."""
    remote, base = make_remote(tmp_path)
    alice = clone(remote, tmp_path / "alice")
    git(alice, "switch", "-q", "-c", "feature")
    with (alice / "kernel.cu").open("a") as file:
        file.write("// persistent grid\n")
    git(alice, "commit", "-q", "-am", "softmax: persistent grid")
    mine = record(alice, base, "Persistent grid - +7%", score=1.07)
    kernel = git(remote, "show", "main:kernel.cu")

    done = run_kexp("sync", "--branch", "main", cwd=alice)
    assert done.returncode == 0, done.stderr
    assert remote_ids(remote) == [mine.id]
    assert git(remote, "show", "main:kernel.cu") == kernel
    assert git(alice, "rev-parse", "main~1") == base  # the experiment alone, on main


@pytest.mark.parametrize("way", ["publish your version", "take theirs"])
def test_a_clash_on_a_side_branch_is_settled_beside_the_checkout_as_said(
    tmp_path: Path, way: str
) -> None:
    """Alice published X with ``--branch kexp/shared``; Bob corrected it there; Alice
    corrected it too. Her sync advised ``git merge origin/kexp/shared`` in her main
    checkout: refused (her untracked X), and without it a merge of the side branch into
    main. Each way the line gives, run as printed, settles it on the side branch, the
    checkout untouched."""
    import re
    import subprocess

    remote, base = make_remote(tmp_path)
    alice = clone(remote, tmp_path / "alice")
    bob = clone(remote, tmp_path / "bob")
    mine = record(alice, base, "Unroll 4 - +2%", score=1.02)
    assert run_kexp("sync", "--branch", "kexp/shared", cwd=alice).returncode == 0
    assert mine.path is not None
    path = mine.path.relative_to(alice).as_posix()
    git(bob, "fetch", "-q")
    git(bob, "restore", "--source", "origin/kexp/shared", "--", path)
    for root, score in ((bob, "1.03"), (alice, "1.01")):
        done = run_kexp("update", mine.id, "--set", f"score={score}", "--reason", "rerun",
                        cwd=root)  # fmt: skip
        assert done.returncode == 0, done.stderr
        if root == bob:
            assert run_kexp("sync", "--branch", "kexp/shared", cwd=bob).returncode == 0
    head = git(alice, "rev-parse", "HEAD")

    refused = run_kexp("sync", "--branch", "kexp/shared", cwd=alice)
    assert refused.returncode != 0
    said = refused.stderr.strip()
    command = re.search(rf"to {way}.*?, run (.*?) and (kexp|the same) sync", said)
    assert command is not None, said
    subprocess.run(["bash", "-c", command.group(1)], cwd=alice, check=True)
    done = run_kexp("sync", "--branch", "kexp/shared", cwd=alice)
    assert done.returncode == 0, done.stderr

    kept = "1.01" if way == "publish your version" else "1.03"
    assert f"score: {kept}" in git(remote, "show", f"kexp/shared:{path}")
    assert f"score: {kept}" in (alice / path).read_text()
    assert git(alice, "rev-parse", "HEAD") == head  # the checkout untouched
