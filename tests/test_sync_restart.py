"""An agent restarts from an earlier iteration: it records two steps on its branch
(each committed with its kernel change), publishes them with ``kexp sync --branch``,
then switches to a new branch at the first step's commit, changes the kernel another
way, records that, and publishes it to the same side branch. The side branch's code
line (the second step's kernel) is one the checkout left: the sync never merges it
into what it publishes. Its pull request merged (a merge commit, squashed, rebased) and
the branch deleted, the branch starts again from the checkout's commit; kept on the
remote, or not merged yet, nothing changes and one line says how to publish the new
line as a pull request of its own, which runs as printed. Real git: a bare repository
on disk as the remote, the pull request merged in another clone and pushed."""

from __future__ import annotations

import re
import shlex
from pathlib import Path

import pytest
from conftest import git, run_kexp
from test_sync import clone, make_remote, record

from kexp import KernelExperiment

KERNEL = "kernel.cu"


def step(root: Path, line: str, summary: str, **fields: object) -> KernelExperiment:
    """Change the kernel (one line added), record the step, commit the kernel."""
    with (root / KERNEL).open("a") as file:
        file.write(line + "\n")
    exp = record(root, git(root, "rev-parse", "HEAD"), summary, **fields)
    git(root, "commit", "-q", "-am", summary)  # the kernel alone: the file is untracked
    return exp


def land(remote: Path, forge: Path, branch: str, how: str) -> None:
    """Merge ``branch``'s pull request into the remote's ``main`` from the clone
    ``forge`` as a forge does (``how``: a merge commit, squashed, or rebased: its
    commits copied onto main), the branch kept on the remote."""
    clone(remote, forge)
    if how == "merge commit":
        git(forge, "merge", "-q", "--no-ff", "--no-edit", f"origin/{branch}")
    elif how == "squashed":
        git(forge, "merge", "-q", "--squash", f"origin/{branch}")
        git(forge, "commit", "-q", "-m", f"{branch} (#1)")
    else:
        commits = git(forge, "rev-list", "--reverse", f"main..origin/{branch}").split()
        git(forge, "cherry-pick", "--allow-empty", *commits)  # another committer: new hashes
    git(forge, "push", "-q", "origin", "main")


def restarted(tmp_path: Path, how: str) -> tuple[Path, Path, KernelExperiment, str]:
    """The story up to the second sync: (the remote, the agent's clone on ``restart``,
    its experiment there, the kernel there). ``how`` the pull request of the first
    sync was merged ("open": not merged; "... deleted": the branch deleted after)."""
    remote, _ = make_remote(tmp_path)
    agent = clone(remote, tmp_path / "agent", branch="work")
    first = step(agent, "// step1", "Unrolled by 4 - +20%", score=1.2)
    step(agent, "// step2", "Unrolled by 8 - +10%", score=1.1, pid=first.id)
    done = run_kexp("sync", "--branch", "kexp/agent", cwd=agent)
    assert done.returncode == 0, done.stderr
    if how != "open":
        land(remote, tmp_path / "forge", "kexp/agent", how.removesuffix(", deleted"))
        if how.endswith("deleted"):
            git(remote, "branch", "-D", "kexp/agent")
    git(agent, "fetch", "-q")
    git(agent, "switch", "-q", "-c", "restart", "HEAD~1")
    other = step(agent, "// other direction", "Vectorized loads - +30%", score=1.3, pid=first.id)
    return remote, agent, other, (agent / KERNEL).read_text()


def remote_refs(remote: Path) -> str:
    return git(remote, "for-each-ref", "--format=%(refname) %(objectname)")


@pytest.mark.parametrize("how", ["merge commit", "squashed", "rebased", "open"])
def test_a_restart_published_where_the_old_code_line_stays_is_refused_with_a_new_branch(
    tmp_path: Path, how: str
) -> None:
    """The side branch still holds the code line the checkout left (its pull request
    merged and the branch kept, as forges keep it; or not merged yet): publishing there
    would merge that code into the new line, or put the new experiment on code it was
    not measured on, and kexp never force-pushes. The sync changes nothing (no local
    branch, record or remote ref moves) and says, in one line, to publish under a new
    branch name; that command, run as printed, opens the new line's own pull request:
    the checkout's kernel and the new experiment."""
    remote, agent, other, kernel = restarted(tmp_path, how)
    before = git(agent, "for-each-ref", "--format=%(refname) %(objectname)")
    on_remote = remote_refs(remote)

    dry = run_kexp("sync", "--branch", "kexp/agent", "--dry-run", cwd=agent)
    done = run_kexp("sync", "--branch", "kexp/agent", cwd=agent)
    assert done.returncode != 0 and dry.returncode == done.returncode
    assert dry.stderr == done.stderr  # the dry run says it first
    said = done.stderr.strip()
    assert len(said.splitlines()) == 1, said
    assert "git merge" not in said and "git -c merge" not in said, said  # no merge
    assert git(agent, "for-each-ref", "--format=%(refname) %(objectname)") == before
    assert remote_refs(remote) == on_remote
    assert KERNEL in said, said  # the code that clashes is named

    command = re.search(r"kexp sync --branch \S+", said)
    assert command, said
    args = shlex.split(command.group(0))[1:]
    assert args[-1] != "kexp/agent"
    followed = run_kexp(*args, cwd=agent)
    assert followed.returncode == 0, followed.stderr
    branch = args[-1]
    assert git(remote, "show", f"{branch}:{KERNEL}") + "\n" == kernel
    path = Path(str(other.path)).relative_to(agent).as_posix()
    assert other.id in git(remote, "show", f"{branch}:{path}")
    assert git(agent, "rev-parse", "restart") == git(agent, "rev-parse", f"{branch}~1")


@pytest.mark.parametrize("how", ["merge commit, deleted", "squashed, deleted"])
def test_a_restart_after_the_branch_was_merged_and_deleted_starts_it_again(
    tmp_path: Path, how: str
) -> None:
    """The pull request merged and its branch deleted: the branch starts again from the
    checkout's commit (a fresh pull request), with the checkout's kernel, never the
    left code line merged in, and says no more than it did."""
    remote, agent, other, kernel = restarted(tmp_path, how)

    done = run_kexp("sync", "--branch", "kexp/agent", cwd=agent)
    assert done.returncode == 0, done.stderr
    assert git(remote, "show", f"kexp/agent:{KERNEL}") + "\n" == kernel
    assert git(remote, "rev-parse", "kexp/agent~1") == git(agent, "rev-parse", "restart")
    assert git(remote, "log", "-1", "--format=%s", "kexp/agent").startswith("kexp sync: ")
    path = Path(str(other.path)).relative_to(agent).as_posix()
    assert other.id in git(remote, "show", f"kexp/agent:{path}")


def test_a_clashing_code_line_published_to_the_same_branch_meanwhile_moves_nothing_here(
    tmp_path: Path,
) -> None:
    """Two agents publish their first steps to one new side branch at the same moment,
    from kernel lines that clash: Bob's push lands while Alice's sync commits (a hook of
    her clone pushes it as her branch is made, so the race is the same every run). Her
    sync stops with nothing changed here (no local branch made, no record kept) and one
    line that names the kernel file and a new branch name, not a merge by hand in her
    checkout (which would merge the side branch into main); run as printed, it
    publishes her line as a pull request of its own."""
    remote, _ = make_remote(tmp_path)
    alice, bob = clone(remote, tmp_path / "alice"), clone(remote, tmp_path / "bob")
    step(bob, "// bob's line", "Vectorized loads - +5%", score=1.05)
    git(bob, "add", "experiments")
    git(bob, "commit", "-q", "-m", "Bob's step")
    mine = step(alice, "// alice's line", "Unrolled by 4 - +20%", score=1.2)
    kernel = (alice / KERNEL).read_text()
    hook = alice / ".git" / "hooks" / "reference-transaction"
    hook.write_text(
        "#!/bin/sh\n"
        '[ "$1" = committed ] || exit 0\n'
        'grep -q " refs/heads/kexp/shared$" || exit 0\n'
        f"[ -e {shlex.quote(str(tmp_path / 'pushed'))} ] && exit 0\n"
        f"touch {shlex.quote(str(tmp_path / 'pushed'))}\n"
        "unset GIT_DIR GIT_INDEX_FILE GIT_WORK_TREE GIT_PREFIX\n"
        f"exec git -C {shlex.quote(str(bob))} push -q origin HEAD:kexp/shared\n"
    )
    hook.chmod(0o755)
    before = git(alice, "for-each-ref", "--format=%(refname) %(objectname)", "refs/heads")

    done = run_kexp("sync", "--branch", "kexp/shared", cwd=alice)
    assert (tmp_path / "pushed").exists()  # Bob's push came first
    assert done.returncode != 0
    said = done.stderr.strip()
    assert len(said.splitlines()) == 1 and KERNEL in said, said
    assert "git merge" not in said and "git -c merge" not in said, said
    assert git(alice, "for-each-ref", "--format=%(refname) %(objectname)", "refs/heads") == before
    assert not list((alice / ".git" / "kexp" / "published").glob("*"))

    command = re.search(r"kexp sync --branch \S+", said)
    assert command, said
    args = shlex.split(command.group(0))[1:]
    followed = run_kexp(*args, cwd=alice)
    assert followed.returncode == 0, followed.stderr
    assert git(remote, "show", f"{args[-1]}:{KERNEL}") + "\n" == kernel
    path = Path(str(mine.path)).relative_to(alice).as_posix()
    assert mine.id in git(remote, "show", f"{args[-1]}:{path}")
