"""``kexp sync``'s own errors (issue 28, items 5 to 7): a push the remote refuses is said
at once in the remote's words, a lock names its file (and a live sync in the same clone
is waited for), and only experiment files and the folder's README are published.

Real git everywhere: a bare remote on disk, a real pre-receive hook, a real stale
``.lock`` file, real ``kexp sync`` processes.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
from click.testing import CliRunner
from conftest import git
from test_sync import clone, make_remote, record, remote_ids

from kexp import GitError, Store, SyncConflictError
from kexp.cli.main import main
from kexp.storage.sync import sync

HOOK_MESSAGE = "policy: experiments need a ticket number (PERF-123)"


def write_hook(folder: Path, name: str, body: str) -> None:
    hook = folder / "hooks" / name
    hook.parent.mkdir(parents=True, exist_ok=True)
    hook.write_text("#!/bin/sh\n" + body)
    hook.chmod(0o755)


def test_a_push_the_remote_refuses_is_said_at_once_in_its_words(tmp_path: Path) -> None:
    remote, base = make_remote(tmp_path)
    alice = clone(remote, tmp_path / "alice")
    write_hook(remote, "pre-receive", f"echo '{HOOK_MESSAGE}' >&2\nexit 1\n")
    record(alice, base, "Unrolled by 4 - +1.9%")
    before = git(remote, "rev-parse", "main")

    pauses: list[float] = []
    with pytest.raises(GitError) as caught:
        sync(Store(alice), sleep=pauses.append)
    message = str(caught.value)
    assert HOOK_MESSAGE in message and "pre-receive hook declined" in message
    assert "other clones" not in message
    assert pauses == []  # not retried
    assert git(remote, "rev-parse", "main") == before
    assert git(alice, "log", "-1", "--format=%s").startswith("kexp sync")  # commit kept

    result = CliRunner().invoke(main, ["--root", str(alice), "sync"])
    assert result.exit_code == 2, result.output
    assert HOOK_MESSAGE in result.stderr and "Traceback" not in result.output


def test_a_stale_ref_lock_on_the_remote_is_named_after_a_few_quick_tries(tmp_path: Path) -> None:
    remote, base = make_remote(tmp_path)
    alice = clone(remote, tmp_path / "alice")
    lock = remote / "refs" / "heads" / "main.lock"
    lock.parent.mkdir(parents=True, exist_ok=True)
    lock.write_text("")  # left by a git process killed on the remote
    record(alice, base, "Unrolled by 4 - +1.9%")

    pauses: list[float] = []
    with pytest.raises(GitError) as caught:
        sync(Store(alice), sleep=pauses.append)
    message = str(caught.value)
    assert "refs/heads/main.lock" in message and "other clones" not in message
    assert len(pauses) <= 4 and sum(pauses) < 5
    lock.unlink()
    assert sync(Store(alice)).pushed


def test_a_stale_index_lock_is_named_with_what_to_do(tmp_path: Path) -> None:
    remote, base = make_remote(tmp_path)
    alice = clone(remote, tmp_path / "alice")
    record(alice, base, "Unrolled by 4 - +1.9%")
    (alice / ".git" / "index.lock").write_text("")
    with pytest.raises(GitError) as caught:
        sync(Store(alice))
    message = str(caught.value)
    assert str(alice / ".git" / "index.lock") in message
    assert not message.endswith("remove the file manually to continue.")
    assert "no git process" in message


def test_two_syncs_in_one_clone_both_publish(tmp_path: Path) -> None:
    """The second sync waits for the first (a live kexp process), instead of failing on
    the index lock the first one's commit holds."""
    remote, base = make_remote(tmp_path)
    alice = clone(remote, tmp_path / "alice")
    started = tmp_path / "hook-started"
    # The first sync's commit runs this hook while git holds the index lock.
    write_hook(alice / ".git", "pre-commit", f"touch '{started}'\nsleep 3\n")
    first_exp = record(alice, base, "Unrolled by 4 - +1.9%")
    command = [sys.executable, "-m", "kexp", "sync"]
    environment = {**os.environ, "PYTHONPATH": str(Path(__file__).parent.parent)}
    first = subprocess.Popen(
        command, cwd=alice, env=environment, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
        text=True,
    )  # fmt: skip
    deadline = time.monotonic() + 60
    while not started.exists():
        assert first.poll() is None and time.monotonic() < deadline, first.communicate()
        time.sleep(0.02)
    second_exp = record(alice, base, "Vectorized stores - +3.0%", score=1.03)
    second = subprocess.run(command, cwd=alice, env=environment, capture_output=True, text=True)
    _, err = first.communicate(timeout=60)
    assert first.returncode == 0, err
    assert second.returncode == 0, second.stderr
    assert sorted(remote_ids(remote)) == sorted([first_exp.id, second_exp.id])


def test_sync_commits_experiment_files_and_the_readme_only(tmp_path: Path) -> None:
    remote, base = make_remote(tmp_path)
    alice = clone(remote, tmp_path / "alice")
    exp = record(alice, base, "Unrolled by 4 - +1.9%")
    other = record(alice, base, "Vectorized stores - +3.0%", score=1.03)
    hand_named = Path(str(other.path)).with_name(f"{other.id}-Vectorized_Stores.md")
    Path(str(other.path)).rename(hand_named)
    experiments = alice / "experiments"
    (experiments / "README.md").write_text("The experiments of team A.\n")
    left = {
        "experiments/notes.txt": b"try unroll 8 next\n",
        "experiments/core": b"\0" * (3 << 20),
        "experiments/UNROLL.md": b"# my own notes\n",
        "experiments/2026/todo/plan.md": b"- profile\n",
    }
    for relative, data in left.items():
        (alice / relative).parent.mkdir(parents=True, exist_ok=True)
        (alice / relative).write_bytes(data)

    dry = sync(Store(alice), dry_run=True)
    assert dry.left == tuple(sorted(left))
    result = sync(Store(alice))
    expected = sorted(
        [
            Path(str(exp.path)).relative_to(alice).as_posix(),
            hand_named.relative_to(alice).as_posix(),
            "experiments/README.md",
        ]
    )
    assert list(result.committed) == expected
    published = git(remote, "ls-tree", "-r", "--name-only", "main", "--", "experiments")
    assert published.splitlines() == expected
    assert result.left == tuple(sorted(left))
    assert any("left 4 file(s)" in line and "notes.txt" in line for line in result.lines())
    status = git(alice, "status", "--porcelain", "-uall").splitlines()
    assert sorted(line[3:] for line in status) == sorted(left)

    # Publishing to a side branch leaves them too.
    bob = clone(remote, tmp_path / "bob")
    (bob / "experiments" / "notes.txt").write_text("mine\n")
    record(bob, base, "Bob's try - +1%", score=1.01)
    side = sync(Store(bob), branch="kexp/bob")
    assert side.left == ("experiments/notes.txt",) and len(side.committed) == 1


def test_a_file_against_a_folder_is_not_called_a_corrected_experiment(tmp_path: Path) -> None:
    """Issue 28, item 10: a merge clash of a file with a folder of the same name is said
    in git's words, not as "the same experiment corrected on both sides"."""
    remote, base = make_remote(tmp_path)
    alice, bob = clone(remote, tmp_path / "alice"), clone(remote, tmp_path / "bob")
    exp = record(alice, base, "Unrolled by 4 - +1.9%")
    year = Path(str(exp.path)).relative_to(alice).parts[1]
    (bob / "experiments" / year).write_text("a file where alice has a folder\n")
    git(bob, "add", "experiments")
    git(bob, "commit", "-q", "-m", "by hand")
    git(bob, "push", "-q", "origin", "main")

    with pytest.raises(SyncConflictError) as caught:
        sync(Store(alice))
    message = str(caught.value)
    assert "corrected on both sides" not in message
    assert f"experiments/{year}" in message and "file/directory" in message


def test_a_file_of_the_users_that_the_merge_would_overwrite_is_named(tmp_path: Path) -> None:
    """Another clone pushed a file to main that Alice holds untracked (her own notes,
    not an experiment): the sync cannot bring her checkout up to date and says so in
    one line naming the file (git's first line alone named none), changing nothing."""
    remote, _ = make_remote(tmp_path)
    alice, bob = clone(remote, tmp_path / "alice"), clone(remote, tmp_path / "bob")
    (bob / "tuning.txt").write_text("block=256\n")
    git(bob, "add", "tuning.txt")
    git(bob, "commit", "-q", "-m", "tuning notes")
    git(bob, "push", "-q", "origin", "main")
    (alice / "tuning.txt").write_text("my own notes\n")
    head = git(alice, "rev-parse", "HEAD")
    with pytest.raises(GitError, match=r"overwritten by merge: tuning\.txt\)") as caught:
        sync(Store(alice))
    assert "\n" not in str(caught.value) and "kexp sync again" in str(caught.value)
    assert (alice / "tuning.txt").read_text() == "my own notes\n"
    assert git(alice, "rev-parse", "HEAD") == head
