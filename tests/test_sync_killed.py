"""``kexp sync --branch`` killed (SIGKILL) at the points a git hook in the clone
chooses, then run again, on a side branch another clone shares: nothing another clone
published or corrected there is ever undone. Real git: a bare repository on disk as
the remote, two clones, real ``kexp`` processes; the kill is made by a
``reference-transaction`` hook the moment git moves the clone's branch, so the point is
the same on every run."""

from __future__ import annotations

import re
from pathlib import Path

from conftest import git, run_kexp
from test_sync import clone, make_remote, record, remote_ids

SHARED = "kexp/shared"

#: A reference-transaction hook that kills the ``kexp sync`` process above it (SIGKILL)
#: once git has moved ``refs/heads/kexp/shared`` in this clone.
_KILL_ON_BRANCH_MOVE = """#!/bin/sh
moved=$(cat)  # (read whole in every state: git must not meet a closed pipe)
[ "$1" = committed ] || exit 0
case "$moved" in *" refs/heads/kexp/shared"*) ;; *) exit 0 ;; esac
pid=$PPID
while [ "${pid:-1}" -gt 1 ]; do
  case "$(ps -o args= -p "$pid")" in
    *"-m kexp sync --branch"*) kill -9 "$pid"; exit 0 ;;
  esac
  pid=$(ps -o ppid= -p "$pid" | tr -d ' ')
done
exit 0
"""


def _score(text: str) -> str:
    found = re.search(r"^score: (\S+)$", text, re.MULTILINE)
    assert found is not None, text
    return found.group(1)


def test_a_sync_killed_as_it_moves_the_branch_never_undoes_another_clones_correction(
    tmp_path: Path,
) -> None:
    """Alice's sync of X to the shared branch is killed the moment it moves her local
    branch; run again, it publishes X. Bob brings X in as kexp advises, corrects it to
    1.04 and publishes that. Alice goes on recording and syncing: X stays 1.04 on the
    branch (her old 1.02 was published over it, silently, two syncs later: her record
    of what she published was never written), and her working tree takes 1.04 in."""
    remote, base = make_remote(tmp_path)
    alice = clone(remote, tmp_path / "alice")
    bob = clone(remote, tmp_path / "bob")
    made = record(alice, base, "Unroll by 4 - +2%", score=1.02)
    assert made.path is not None
    path = made.path.relative_to(alice).as_posix()

    hook = alice / ".git" / "hooks" / "reference-transaction"
    hook.write_text(_KILL_ON_BRANCH_MOVE)
    hook.chmod(0o755)
    killed = run_kexp("sync", "--branch", SHARED, cwd=alice, process=True)
    assert killed.returncode == -9, killed.stderr  # (killed where the hook says)
    hook.unlink()
    again = run_kexp("sync", "--branch", SHARED, cwd=alice, process=True)
    assert again.returncode == 0, again.stderr
    assert _score(git(remote, "show", f"{SHARED}:{path}")) == "1.02"

    git(bob, "fetch", "-q")
    git(bob, "restore", "--source", f"origin/{SHARED}", "--", path)
    fixed = run_kexp("update", made.id, "--set", "score=1.04", "--reason",
                     "b: fixed the timer", cwd=bob, process=True)  # fmt: skip
    assert fixed.returncode == 0, fixed.stderr
    assert run_kexp("sync", "--branch", SHARED, cwd=bob, process=True).returncode == 0
    assert _score(git(remote, "show", f"{SHARED}:{path}")) == "1.04"

    for n, summary in enumerate(["Vectorize loads - +3%", "Tile by 64 - +1%"]):
        record(alice, base, summary, score=1.03 - n / 50)
        done = run_kexp("sync", "--branch", SHARED, cwd=alice, process=True)
        assert done.returncode == 0, done.stderr
        on_branch = git(remote, "show", f"{SHARED}:{path}")
        assert _score(on_branch) == "1.04" and "b: fixed the timer" in on_branch
    assert _score((alice / path).read_text()) == "1.04"
    listed = git(remote, "ls-tree", "-r", "--name-only", SHARED, "--", "experiments")
    assert len(re.findall(r"/[0-9a-f]{16}-", listed)) == 3  # X and Alice's two


#: A reference-transaction hook that kills the git process that moved
#: ``refs/heads/main`` (SIGKILL) once it has: a ``git commit`` killed there leaves its
#: ``index.lock`` behind, as one killed with its ``kexp sync`` does.
_KILL_GIT_ON_MAIN_MOVE = """#!/bin/sh
moved=$(cat)
[ "$1" = committed ] || exit 0
case "$moved" in *" refs/heads/main"*) kill -9 "$PPID" ;; esac
exit 0
"""


def test_an_index_lock_a_killed_git_left_is_named_when_the_sync_merges(tmp_path: Path) -> None:
    """Alice's sync commits her experiment and its git is killed, leaving ``index.lock``;
    Bob has published meanwhile. Alice's next sync must merge Bob's in: it named the
    lock with the wrong advice ("move those files away"); it names the lock file and
    says to delete it when no git process runs, which, done, lets the sync publish."""
    remote, base = make_remote(tmp_path)
    alice = clone(remote, tmp_path / "alice")
    bob = clone(remote, tmp_path / "bob")
    made = [record(bob, base, "Vectorize loads - +3%", score=1.03).id]
    assert run_kexp("sync", cwd=bob, process=True).returncode == 0
    made += [record(alice, base, "Unroll by 4 - +2%", score=1.02).id]
    hook = alice / ".git" / "hooks" / "reference-transaction"
    hook.write_text(_KILL_GIT_ON_MAIN_MOVE)
    hook.chmod(0o755)
    killed = run_kexp("sync", cwd=alice, process=True)
    assert killed.returncode != 0
    hook.unlink()
    lock = alice / ".git" / "index.lock"
    assert lock.exists()

    stopped = run_kexp("sync", cwd=alice, process=True)
    assert stopped.returncode != 0
    said = stopped.stderr.strip()
    assert str(lock) in said and "no git process" in said and "\n" not in said, said
    assert "move those files away" not in said
    lock.unlink()
    done = run_kexp("sync", cwd=alice, process=True)
    assert done.returncode == 0, done.stderr
    assert sorted(remote_ids(remote)) == sorted(made)


def test_a_side_branch_sync_killed_before_its_first_push_is_said_never_published(
    tmp_path: Path,
) -> None:
    """Alice's first ``kexp sync --branch`` is killed as it moves her local branch: the
    push never happened. Back on main, ``kexp sync`` holds her experiment back, saying
    the branch was never published to origin (not one origin "no longer has"), with
    the same advice; once it is published and the forge deletes it, "no longer has"."""
    remote, base = make_remote(tmp_path)
    alice = clone(remote, tmp_path / "alice")
    made = record(alice, base, "Unroll by 4 - +2%", score=1.02)
    assert made.path is not None
    path = made.path.relative_to(alice).as_posix()
    hook = alice / ".git" / "hooks" / "reference-transaction"
    hook.write_text(_KILL_ON_BRANCH_MOVE)
    hook.chmod(0o755)
    killed = run_kexp("sync", "--branch", SHARED, cwd=alice, process=True)
    assert killed.returncode == -9, killed.stderr
    hook.unlink()
    assert SHARED not in git(remote, "branch", "--list")

    advice = f"kexp sync --branch {SHARED} proposes them again; to drop them, remove the files"
    for dry in (("--dry-run",), ()):
        said = run_kexp("sync", *dry, cwd=alice, process=True)
        assert said.returncode == 0, said.stderr
        (line,) = [line for line in said.stdout.splitlines() if path in line]
        assert "no longer has" not in line, line
        assert f"{SHARED}, which was never published to origin" in line, line
        assert "push did not happen" in line and advice in line, line
    assert run_kexp("sync", "--branch", SHARED, cwd=alice, process=True).returncode == 0
    git(remote, "branch", "-D", SHARED)  # (the pull request closed unmerged)
    said = run_kexp("sync", cwd=alice, process=True)
    (line,) = [line for line in said.stdout.splitlines() if path in line]
    assert f"{SHARED}, which origin no longer has" in line and advice in line, line


#: A reference-transaction hook that kills the ``kexp sync`` process above it (SIGKILL)
#: once its push has moved ``refs/remotes/origin/kexp/shared`` here: the remote holds
#: the branch, and kexp has not yet noted that it pushed.
_KILL_AFTER_PUSH = _KILL_ON_BRANCH_MOVE.replace(
    'case "$moved" in *" refs/heads/kexp/shared"*) ;; *) exit 0 ;; esac',
    'echo "$moved" | grep -Eq " [0-9a-f]*[1-9a-f][0-9a-f]* refs/remotes/origin/kexp/shared$"'
    " || exit 0  # (made or moved, not deleted)",
)
assert _KILL_AFTER_PUSH != _KILL_ON_BRANCH_MOVE


def test_a_side_branch_sync_killed_after_its_push_is_not_said_never_published(
    tmp_path: Path,
) -> None:
    """Alice's first ``kexp sync --branch`` is killed once git has pushed the branch,
    before kexp notes the push. The pull request is closed unmerged (the branch
    deleted): back on main, each ``kexp sync`` (a dry run, then two real ones, the
    first of which prunes the remote-tracking branch) says origin no longer has the
    branch, never that it was never published, which is false."""
    remote, base = make_remote(tmp_path)
    alice = clone(remote, tmp_path / "alice")
    made = record(alice, base, "Unroll by 4 - +2%", score=1.02)
    assert made.path is not None
    path = made.path.relative_to(alice).as_posix()
    hook = alice / ".git" / "hooks" / "reference-transaction"
    hook.write_text(_KILL_AFTER_PUSH)
    hook.chmod(0o755)
    killed = run_kexp("sync", "--branch", SHARED, cwd=alice, process=True)
    assert killed.returncode == -9, killed.stderr
    hook.unlink()
    assert path in git(remote, "ls-tree", "-r", "--name-only", SHARED)  # (pushed)
    git(remote, "branch", "-D", SHARED)  # (the pull request closed unmerged)

    advice = f"kexp sync --branch {SHARED} proposes them again; to drop them, remove the files"
    for dry in (("--dry-run",), (), ()):
        said = run_kexp("sync", *dry, cwd=alice, process=True)
        assert said.returncode == 0, said.stderr
        (line,) = [line for line in said.stdout.splitlines() if path in line]
        assert "never published" not in line, line
        assert f"{SHARED}, which origin no longer has" in line and advice in line, line
