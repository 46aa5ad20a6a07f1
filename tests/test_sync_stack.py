"""An agent iterates a kernel and publishes each step to its side branch: commit the
kernel, record the experiment, ``kexp sync --branch kexp/agent-a``, again and again. The
side branch (its pull request) follows the checkout's commits: after every step it holds
the newest kernel and every experiment, and it only ever moves forward (never a
force-push). Shared by two clones working on one code line; its first pull request
squash-merged, then the next step. A checkout that restarted from an earlier commit is
told apart by its commits, not by whether the code clashes. Real git: a bare repository
on disk as the remote, the CLI as the agent runs it."""

from __future__ import annotations

import re
import shlex
from pathlib import Path

import pytest
from conftest import git, run_kexp
from test_sync import clone, make_remote, record
from test_sync_restart import land

from kexp import KernelExperiment

KERNEL = "kernel.cu"
BRANCH = "kexp/agent-a"


def step(root: Path, line: str, summary: str, pid: str | None = None) -> KernelExperiment:
    """One iteration: change the kernel, commit it, record the experiment on that commit."""
    with (root / KERNEL).open("a") as file:
        file.write(line + "\n")
    git(root, "commit", "-q", "-am", summary)
    fields = {"pid": pid} if pid else {}
    return record(root, git(root, "rev-parse", "HEAD"), summary, **fields)


def change(root: Path, name: str, summary: str, pid: str | None = None) -> KernelExperiment:
    """One iteration on a file of its own: write ``name``, commit it, record the step."""
    (root / name).write_text(f"// {summary}\n")
    git(root, "add", name)
    git(root, "commit", "-q", "-m", summary)
    fields = {"pid": pid} if pid else {}
    return record(root, git(root, "rev-parse", "HEAD"), summary, **fields)


def publish(root: Path, branch: str = BRANCH) -> None:
    done = run_kexp("sync", "--branch", branch, cwd=root)
    assert done.returncode == 0, done.stderr


def published_ids(remote: Path, branch: str = BRANCH) -> str:
    return git(remote, "ls-tree", "-r", "--name-only", branch, "--", "experiments")


def agent_clone(tmp_path: Path) -> tuple[Path, Path]:
    """A remote and the agent's clone of it, on its own code line ``work``."""
    remote, _ = make_remote(tmp_path)
    return remote, clone(remote, tmp_path / "agent", branch="work")


def assert_kernel_published(remote: Path, root: Path, branch: str = BRANCH) -> None:
    """``branch`` on the remote holds the kernel of ``root``'s working tree."""
    assert git(remote, "show", f"{branch}:{KERNEL}") + "\n" == (root / KERNEL).read_text()


def refs(root: Path, *patterns: str) -> str:
    """Each ref of ``root`` (matching ``patterns``) and the commit it names."""
    return git(root, "for-each-ref", "--format=%(refname) %(objectname)", *patterns)


def refused_with_its_dry_run(root: Path) -> str:
    """``kexp sync --branch`` and its dry run refuse alike, in one line: that line."""
    dry = run_kexp("sync", "--branch", BRANCH, "--dry-run", cwd=root)
    done = run_kexp("sync", "--branch", BRANCH, cwd=root)
    assert done.returncode != 0 and dry.returncode == done.returncode, done.stdout
    assert dry.stderr == done.stderr
    said = done.stderr.strip()
    assert len(said.splitlines()) == 1, said
    return said


def follow(said: str, root: Path) -> str:
    """Run the ``kexp sync --branch NEW`` that ``said`` names, as printed: NEW."""
    command = re.search(r"kexp sync --branch \S+", said)
    assert command, said
    args = shlex.split(command.group(0))[1:]
    followed = run_kexp(*args, cwd=root)
    assert followed.returncode == 0, followed.stderr
    return args[-1]


def test_each_step_of_a_campaign_publishes_its_code_with_every_experiment(
    tmp_path: Path,
) -> None:
    """Three steps, each a kernel commit, an experiment and a sync: after each, the side
    branch holds the checkout's kernel as committed (the code the experiment was measured
    on) and every experiment so far; the checkout's commit is in its history, and the
    branch moved forward from the last push."""
    remote, agent = agent_clone(tmp_path)
    done: list[KernelExperiment] = []
    pushed = None
    for n in range(1, 4):
        pid = done[-1].id if done else None
        done.append(step(agent, f"// step {n}", f"Step {n} - +{n}0%", pid=pid))
        publish(agent)
        assert_kernel_published(remote, agent)
        tip = git(remote, "rev-parse", BRANCH)
        git(agent, "fetch", "-q")
        assert git(agent, "merge-base", "--is-ancestor", "HEAD", f"origin/{BRANCH}") == ""
        if pushed is not None:  # a fast-forward of the last push
            assert git(remote, "merge-base", "--is-ancestor", pushed, tip) == ""
        pushed = tip
        listed = published_ids(remote)
        assert all(exp.id in listed for exp in done), listed
    assert git(agent, "status", "--porcelain", "--untracked-files=no") == ""  # untouched
    valid = run_kexp("validate", "--rev", f"origin/{BRANCH}", cwd=agent)
    assert valid.returncode == 0, valid.stdout + valid.stderr


def test_two_clones_on_one_code_line_share_the_side_branch(tmp_path: Path) -> None:
    """Alice and Bob share the kernel's line through the remote's ``work`` branch and
    publish their experiments to one side branch in turns; Bob makes the branch new in
    his clone. After each turn the branch holds the newest kernel and everyone's
    experiments."""
    remote, _ = make_remote(tmp_path)
    alice = clone(remote, tmp_path / "alice", branch="work")
    bob = clone(remote, tmp_path / "bob")
    first = step(alice, "// alice 1", "Alice's first step - +10%")
    git(alice, "push", "-q", "origin", "work")
    publish(alice)

    git(bob, "fetch", "-q")
    git(bob, "switch", "-q", "-c", "work", "origin/work")
    second = step(bob, "// bob 2", "Bob's step - +20%")
    git(bob, "push", "-q", "origin", "work")
    publish(bob)
    assert_kernel_published(remote, bob)

    git(alice, "pull", "-q", "--ff-only", "origin", "work")
    third = step(alice, "// alice 3", "Alice's second step - +30%", pid=first.id)
    publish(alice)
    assert_kernel_published(remote, alice)
    listed = published_ids(remote)
    assert all(exp.id in listed for exp in (first, second, third)), listed


@pytest.mark.parametrize("how", ["branch kept", "branch deleted", "main pulled"])
def test_the_step_after_a_squash_merged_pull_request_publishes_its_code(
    tmp_path: Path, how: str
) -> None:
    """The first step's pull request squash-merged into main (the branch kept, or
    deleted; or the agent pulls main into its line, as git advises, before the next
    step); the agent publishes the second step to the same branch: the branch holds the
    second step's kernel and both experiments. With main pulled, its pull request adds
    no more than the second step. The third step follows as the second did."""
    remote, agent = agent_clone(tmp_path)
    first = step(agent, "// step 1", "Step 1 - +10%")
    publish(agent)
    land(remote, tmp_path / "forge", BRANCH, "squashed")
    if how == "branch deleted":
        git(remote, "branch", "-D", BRANCH)
    if how == "main pulled":
        Path(str(first.path)).unlink()  # (main holds it as it is: the merge brings it back)
        git(agent, "pull", "-q", "--no-rebase", "--no-edit", "origin", "main")
        assert Path(str(first.path)).exists()
    second = step(agent, "// step 2", "Step 2 - +20%", pid=first.id)
    publish(agent)
    assert_kernel_published(remote, agent)
    listed = published_ids(remote)
    assert first.id in listed and second.id in listed, listed
    if how == "main pulled":
        added = git(remote, "diff", "--name-only", f"main...{BRANCH}", "--", "experiments")
        assert second.id in added and first.id not in added, added
    third = step(agent, "// step 3", "Step 3 - +30%", pid=second.id)
    publish(agent)  # (the branch holds main's squash now: main's, not a left line)
    assert_kernel_published(remote, agent)
    assert third.id in published_ids(remote)


def restarted(tmp_path: Path) -> tuple[Path, Path, KernelExperiment]:
    """Two steps published; the agent restarts from the first step's commit and changes
    another file (no line of the kernel clashes); (the remote, the clone, the new step)."""
    remote, agent = agent_clone(tmp_path)
    first = step(agent, "// step 1", "Step 1 - +10%")
    step(agent, "// step 2", "Step 2 - +20%", pid=first.id)
    publish(agent)
    git(agent, "switch", "-q", "-c", "restart", "HEAD~1")
    (agent / "tune.h").write_text("#define TILE 64\n")
    git(agent, "add", "tune.h")
    git(agent, "commit", "-q", "-m", "Tile 64")
    other = record(agent, git(agent, "rev-parse", "HEAD"), "Tile 64 - +30%", pid=first.id)
    return remote, agent, other


def test_a_restart_whose_code_does_not_clash_is_not_published_on_the_old_line(
    tmp_path: Path,
) -> None:
    """The side branch holds the second step's kernel, a commit the restarted checkout
    does not descend from: publishing there would put the new experiment on code it was
    not measured on. Nothing changes; one line names a new branch, and that command,
    run as printed, publishes the new line (its code, not the left step's)."""
    remote, agent, other = restarted(tmp_path)
    before = git(remote, "rev-parse", BRANCH)
    done = run_kexp("sync", "--branch", BRANCH, cwd=agent)
    assert done.returncode != 0
    said = done.stderr.strip()
    assert len(said.splitlines()) == 1 and KERNEL in said, said
    assert git(remote, "rev-parse", BRANCH) == before
    new = follow(said, agent)
    assert_kernel_published(remote, agent, new)
    assert git(remote, "show", f"{new}:tune.h") == "#define TILE 64"
    assert other.id in published_ids(remote, new)


def test_a_restart_whose_code_does_not_clash_starts_a_landed_deleted_branch_again(
    tmp_path: Path,
) -> None:
    """The same restart once the branch's pull request merged and the remote deleted it:
    the branch starts again from the checkout, without the left step's kernel."""
    remote, agent, other = restarted(tmp_path)
    land(remote, tmp_path / "forge", BRANCH, "merge commit")
    git(remote, "branch", "-D", BRANCH)
    git(agent, "fetch", "-q")
    publish(agent)
    assert git(remote, "rev-parse", f"{BRANCH}~1") == git(agent, "rev-parse", "restart")
    assert_kernel_published(remote, agent)
    assert other.id in published_ids(remote)


def test_main_s_code_brought_onto_the_branch_after_a_squash_is_not_a_left_line(
    tmp_path: Path,
) -> None:
    """The first step's pull request squash-merged, the branch kept, and a teammate's
    commit on main besides; each step changes a file of its own, so the second sync
    starts the branch again from main merged with the checkout (the squash and the
    teammate's commit on it, neither in the checkout). The third step is published on:
    main's commits are not a line the checkout left."""
    remote, agent = agent_clone(tmp_path)
    first = change(agent, "tile.h", "Tile 64 - +10%")
    publish(agent)
    land(remote, tmp_path / "forge", BRANCH, "squashed")
    notes_on_main(tmp_path / "forge")
    second = change(agent, "unroll.h", "Unroll 8 - +20%", pid=first.id)
    publish(agent)
    assert git(remote, "show", f"{BRANCH}:unroll.h") == "// Unroll 8 - +20%"
    third = change(agent, "vector.h", "Vector loads - +30%", pid=second.id)
    publish(agent)
    assert git(remote, "show", f"{BRANCH}:vector.h") == "// Vector loads - +30%"
    assert git(remote, "show", f"{BRANCH}:NOTES.md") == "Teammate's notes."
    listed = published_ids(remote)
    assert second.id in listed and third.id in listed, listed


def test_another_code_line_pushed_meanwhile_is_not_merged_into_what_is_published(
    tmp_path: Path,
) -> None:
    """Bob publishes his first step, on a code line of his own, to the side branch
    while Alice's sync to it commits (a hook of her clone pushes it as her branch is
    made, so the race is the same every run); their code does not clash. Her sync stops
    with nothing changed here and one line naming a new branch, never merging Bob's code
    into what she publishes; run as printed, it publishes her line alone."""
    remote, _ = make_remote(tmp_path)
    alice, bob = clone(remote, tmp_path / "alice"), clone(remote, tmp_path / "bob")
    (bob / "tune.h").write_text("#define TILE 64\n")
    git(bob, "add", "tune.h")
    git(bob, "commit", "-q", "-m", "Tile 64")
    record(bob, git(bob, "rev-parse", "HEAD"), "Tile 64 - +5%")
    git(bob, "add", "experiments")
    git(bob, "commit", "-q", "-m", "Bob's step")
    mine = step(alice, "// alice's line", "Unrolled by 4 - +20%")
    hook = alice / ".git" / "hooks" / "reference-transaction"
    pushed = tmp_path / "pushed"
    hook.write_text(
        "#!/bin/sh\n"
        '[ "$1" = committed ] || exit 0\n'
        f'grep -q " refs/heads/{BRANCH}$" || exit 0\n'
        f"[ -e {shlex.quote(str(pushed))} ] && exit 0\n"
        f"touch {shlex.quote(str(pushed))}\n"
        "unset GIT_DIR GIT_INDEX_FILE GIT_WORK_TREE GIT_PREFIX\n"
        f"exec git -C {shlex.quote(str(bob))} push -q origin HEAD:{BRANCH}\n"
    )
    hook.chmod(0o755)
    before = refs(alice, "refs/heads")

    done = run_kexp("sync", "--branch", BRANCH, cwd=alice)
    assert pushed.exists()  # Bob's push came first
    assert done.returncode != 0
    said = done.stderr.strip()
    assert len(said.splitlines()) == 1 and "tune.h" in said, said
    assert refs(alice, "refs/heads") == before
    new = follow(said, alice)
    assert_kernel_published(remote, alice, new)
    assert "tune.h" not in git(remote, "ls-tree", "--name-only", new)
    assert mine.id in published_ids(remote, new)


def rewrite(remote: Path, agent: Path, how: str, message: str) -> None:
    """Rewrite the checkout's last commit without changing what it changes: reworded
    (``message``), or rebased onto main after a teammate's commit there (made in a
    clone beside the agent's, ``forge``)."""
    if how == "reworded":
        git(agent, "commit", "-q", "--amend", "-m", message)
    else:
        notes_on_main(clone(remote, agent.parent / "forge"))
        git(agent, "fetch", "-q")
        git(agent, "rebase", "-q", "origin/main")


def notes_on_main(forge: Path) -> None:
    """Commit a file no step changes in the clone ``forge``, on its main, and push it."""
    (forge / "NOTES.md").write_text("Teammate's notes.\n")
    git(forge, "add", "NOTES.md")
    git(forge, "commit", "-q", "-m", "Teammate's notes")
    git(forge, "push", "-q", "origin", "main")


@pytest.mark.parametrize("how", ["reworded", "rebased onto main"])
def test_a_published_commit_rewritten_with_the_same_change_is_not_a_left_line(
    tmp_path: Path, how: str
) -> None:
    """The first step published, the agent rewrites its commit without changing what it
    changes (``git commit --amend`` of the message alone; ``git rebase`` onto a
    teammate's newer main): its patch is the published one's, so the second step is
    published on: the branch moves forward (a merge, never a force-push) and holds the
    checkout's code and both experiments; the third step follows as the second did."""
    remote, agent = agent_clone(tmp_path)
    first = change(agent, "tile.h", "Tile 64 - +10%")
    publish(agent)
    pushed = git(remote, "rev-parse", BRANCH)
    rewrite(remote, agent, how, "Tile 64 (reworded) - +10%")
    assert git(agent, "rev-parse", "HEAD") != git(remote, "rev-parse", f"{BRANCH}~1")
    second = change(agent, "unroll.h", "Unroll 8 - +20%", pid=first.id)
    publish(agent)
    tip = git(remote, "rev-parse", BRANCH)
    assert git(remote, "merge-base", "--is-ancestor", pushed, tip) == ""  # moved forward
    git(agent, "fetch", "-q")
    assert git(agent, "merge-base", "--is-ancestor", "HEAD", f"origin/{BRANCH}") == ""
    assert git(agent, "diff", "HEAD", f"origin/{BRANCH}", "--", ".", ":!experiments") == ""
    listed = published_ids(remote)
    assert first.id in listed and second.id in listed, listed
    third = change(agent, "vector.h", "Vector loads - +30%", pid=second.id)
    publish(agent)  # (the branch holds both versions of the first step now: no left line)
    assert git(remote, "show", f"{BRANCH}:vector.h") == "// Vector loads - +30%"
    assert third.id in published_ids(remote)


def test_a_published_commit_amended_with_another_change_is_refused_naming_it(
    tmp_path: Path,
) -> None:
    """The first step published, the agent amends its commit with another change (a
    bigger tile): the branch holds the published version, which a merge would publish
    beside the amended one, and kexp never force-pushes. The sync (and its dry run)
    changes nothing and says in one line which commit was rewritten and what to do;
    that command, run as printed, publishes the amended line: its code, both
    experiments."""
    remote, agent = agent_clone(tmp_path)
    first = change(agent, "tile.h", "Tile 64 - +10%")
    publish(agent)
    published = git(agent, "rev-parse", "--short", "HEAD")
    (agent / "tile.h").write_text("// Tile 128 - +10%\n")
    git(agent, "commit", "-q", "-a", "--amend", "--no-edit")
    second = change(agent, "unroll.h", "Unroll 8 - +20%", pid=first.id)
    on_remote = refs(remote)

    said = refused_with_its_dry_run(agent)
    assert published in said and git(agent, "rev-parse", "--short", "HEAD~1") in said, said
    assert "amended or rebased" in said, said
    assert refs(remote) == on_remote
    new = follow(said, agent)
    assert git(remote, "show", f"{new}:tile.h") == "// Tile 128 - +10%"
    listed = published_ids(remote, new)
    assert first.id in listed and second.id in listed, listed


@pytest.mark.parametrize("how", ["reworded", "rebased onto main"])
def test_a_checkout_whose_code_clashes_with_the_branch_s_is_not_published_on_the_old_code(
    tmp_path: Path, how: str
) -> None:
    """The first step published, the agent rewrites its commit with the same change
    (as above) and the second step changes the same kernel lines again: merging the
    checkout's code onto the branch clashes. The sync (and its dry run) never publishes
    the second experiment on the first step's kernel: nothing changes, the experiments
    stay in the working tree, and one line names the kernel and says what to do; that
    command, run as printed, publishes the checkout's kernel with both experiments."""
    remote, agent = agent_clone(tmp_path)
    first = step(agent, "// step 1", "Step 1 - +10%")
    publish(agent)
    rewrite(remote, agent, how, "Step 1 (reworded) - +10%")
    second = step(agent, "// step 2", "Step 2 - +20%", pid=first.id)
    on_remote = refs(remote)
    here = refs(agent, "refs/heads")

    said = refused_with_its_dry_run(agent)
    assert KERNEL in said, said
    assert refs(remote) == on_remote
    assert refs(agent, "refs/heads") == here
    assert Path(str(first.path)).exists() and Path(str(second.path)).exists()
    new = follow(said, agent)
    assert_kernel_published(remote, agent, new)
    listed = published_ids(remote, new)
    assert first.id in listed and second.id in listed, listed
