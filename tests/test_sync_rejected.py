"""After a side branch's pull request is rejected: Carol published her experiments with
``kexp sync --branch kexp/carol``; the lead closes the pull request unmerged and the forge
deletes the branch; Carol goes back to ``main`` and runs ``kexp sync``, as
docs/team.md says. Her rejected experiments, untracked in her checkout, must not reach
``main`` unreviewed: the sync holds them back, says so in one line with what to do,
and deletes nothing; what landed (merged or squashed) and what she never published go
to main as before. Real git: a bare repository on disk as the remote, the lead's clone
as the forge."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest
from conftest import git, run_kexp
from test_sync import clone, make_remote, record, remote_ids
from test_sync_landed import land, relative

from kexp import Store

#: What the line of a branch held back starts with (the branch, the remote, main).
HELD = (
    "held back {n} experiment file(s) published on kexp/carol, which origin no longer has "
    "and which did not land on main: "
)
#: What it says to do.
ADVICE = "kexp sync --branch kexp/carol proposes them again; to drop them, remove the files"


def delete_branch(remote: Path, branch: str) -> None:
    """The forge deletes ``branch`` (a pull request closed, or merged)."""
    git(remote, "branch", "-D", branch)


def kexp(root: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """``kexp ARGS`` in ``root``, which must succeed."""
    done = run_kexp(*args, cwd=root)
    assert done.returncode == 0, done.stderr
    return done


def rejected(tmp_path: Path, on: str = "main") -> tuple[Path, Path, str, list[str], list[str]]:
    """Carol's two experiments (a step and its child) published to kexp/carol from her
    branch ``on``, whose pull request the lead closed unmerged and the forge deleted;
    fetched and pruned: (the remote, Carol's clone, the base commit, their paths, their
    ids)."""
    remote, base = make_remote(tmp_path)
    carol = clone(remote, tmp_path / "carol", on)
    first = record(carol, base, "Double-buffered smem - +15%", score=1.15)
    second = record(carol, base, "Swizzle - +12%", score=1.12, pid=first.id)
    kexp(carol, "sync", "--branch", "kexp/carol")
    assert sorted(remote_ids(remote, "kexp/carol")) == sorted([first.id, second.id])
    delete_branch(remote, "kexp/carol")
    git(carol, "fetch", "-q", "--prune")
    paths = [relative(carol, first.path), relative(carol, second.path)]
    return remote, carol, base, paths, [first.id, second.id]


def test_a_rejected_pull_request_s_experiments_are_held_back_from_main(tmp_path: Path) -> None:
    """``kexp sync`` on main commits and pushes nothing of the rejected branch: one
    line says what it held back and what to do (the dry run the same); the files are
    kept, untracked; main's history is as it was."""
    remote, carol, _, paths, _ids = rejected(tmp_path)
    main = git(remote, "rev-parse", "main")

    planned = kexp(carol, "sync", "--dry-run").stdout
    assert (
        planned.splitlines()[0]
        == "would hold back"
        + HELD.format(n=2)[len("held back") :]
        + ", ".join(sorted(paths))
        + "; "
        + ADVICE
        + " (kexp rm ID)"
    ), planned
    assert "would commit" not in planned and "would push" not in planned, planned

    done = kexp(carol, "sync").stdout
    assert done.splitlines() == [
        HELD.format(n=2) + ", ".join(sorted(paths)) + "; " + ADVICE + " (kexp rm ID)"
    ], done
    assert git(remote, "rev-parse", "main") == main  # nothing pushed
    assert git(carol, "rev-parse", "HEAD") == main  # nothing committed
    assert remote_ids(remote, "main") == []
    assert git(carol, "status", "--porcelain", "--untracked-files=all") == "\n".join(
        f"?? {path}" for path in sorted(paths)
    )
    answer = json.loads(kexp(carol, "sync", "--json").stdout)
    assert answer["unlanded"] == [
        {
            "branch": "kexp/carol",
            "files": sorted(paths),
            "advice": ADVICE + " (kexp rm ID)",
            "published": True,
        }
    ], answer
    assert answer["committed"] == [] and not answer["pushed"] and not answer["up_to_date"]


def test_a_held_back_experiment_edited_afterwards_is_held_back_still(tmp_path: Path) -> None:
    """Carol corrects one of the rejected experiments on main: the same experiment,
    held back still."""
    remote, carol, _, _paths, ids = rejected(tmp_path)
    main = git(remote, "rev-parse", "main")
    Store(carol).update_experiment(ids[0], score=1.14)

    done = kexp(carol, "sync").stdout
    assert done.startswith(HELD.format(n=2)), done
    assert git(remote, "rev-parse", "main") == main


def test_what_carol_never_published_is_pushed_past_what_is_held_back(tmp_path: Path) -> None:
    """A new experiment of Carol's on another kernel goes to main; one building on the
    rejected work is held back with it (main would name a parent it lacks)."""
    remote, carol, base, paths, ids = rejected(tmp_path)
    new = record(carol, base, "Vectorized loads - +3%", score=1.03)
    child = record(carol, base, "Swizzle, wider - +2%", score=1.02, pid=ids[1])

    done = kexp(carol, "sync").stdout.splitlines()
    assert (
        done[0]
        == HELD.format(n=3)
        + ", ".join(sorted([*paths, relative(carol, child.path)]))
        + "; "
        + ADVICE
        + " (kexp rm ID)"
    ), done
    assert any(line.startswith("pushed 1 commit(s) to origin/main") for line in done), done
    assert remote_ids(remote, "main") == [new.id]
    assert Store(carol).get_experiment(child.id).pid == ids[1]  # kept here


def test_the_advice_to_propose_again_or_drop_works_as_written(tmp_path: Path) -> None:
    """What the line says: ``kexp sync --branch kexp/carol`` proposes them again (the
    branch is back on the remote, main untouched); ``kexp rm`` of each drops them, and
    the next sync is up to date."""
    remote, carol, _, _paths, ids = rejected(tmp_path)
    main = git(remote, "rev-parse", "main")
    assert ADVICE in kexp(carol, "sync").stdout

    kexp(carol, "sync", "--branch", "kexp/carol")
    assert sorted(remote_ids(remote, "kexp/carol")) == sorted(ids)
    assert git(remote, "rev-parse", "main") == main
    assert "held back" not in kexp(carol, "sync").stdout  # on its way through a review

    delete_branch(remote, "kexp/carol")
    for exp_id in reversed(ids):  # the child first
        kexp(carol, "rm", "--yes", exp_id)
    done = kexp(carol, "sync").stdout
    assert done.splitlines() == ["up to date with origin/main: nothing to commit or push"], done
    assert git(remote, "rev-parse", "main") == main


def test_what_is_held_back_goes_to_main_once_committed_by_hand(tmp_path: Path) -> None:
    """docs/team.md: a user who wants them on main without review commits them with
    git; ``kexp sync`` then pushes them."""
    remote, carol, _, _, ids = rejected(tmp_path)
    assert kexp(carol, "sync").stdout.startswith(HELD.format(n=2))
    git(carol, "add", "experiments")
    git(carol, "commit", "-q", "-m", "Take the swizzle work without review")

    done = kexp(carol, "sync").stdout
    assert done.splitlines() == ["pushed 1 commit(s) to origin/main"], done
    assert sorted(remote_ids(remote, "main")) == sorted(ids)


@pytest.mark.parametrize("how", ["merge commit", "squashed"])
def test_a_landed_branch_deleted_after_the_merge_holds_nothing_back(
    tmp_path: Path, how: str
) -> None:
    """The pull request merged (a merge commit, or squashed) and the forge deleted the
    branch: ``kexp sync`` on main brings main in and pushes the new experiment Carol
    recorded since, as before; nothing is held back."""
    remote, base = make_remote(tmp_path)
    carol = clone(remote, tmp_path / "carol")
    first = record(carol, base, "Double-buffered smem - +15%", score=1.15)
    kexp(carol, "sync", "--branch", "kexp/carol")
    land(remote, tmp_path / "forge", "kexp/carol", how)
    delete_branch(remote, "kexp/carol")
    git(carol, "fetch", "-q", "--prune")
    new = record(carol, base, "Vectorized loads - +3%", score=1.03)

    answer = json.loads(kexp(carol, "sync", "--dry-run", "--json").stdout)
    assert answer["unlanded"] == [] and answer["committed"] == [relative(carol, new.path)]
    answer = json.loads(kexp(carol, "sync", "--json").stdout)
    assert answer["unlanded"] == [], answer
    assert answer["committed"] == [relative(carol, new.path)] and answer["pushed"], answer
    assert sorted(remote_ids(remote, "main")) == sorted([first.id, new.id])
    assert git(carol, "status", "--porcelain", "--untracked-files=all") == ""


def test_the_sync_tool_says_what_it_held_back_in_the_tools_words(tmp_path: Path) -> None:
    """An agent's sync tool on main: the same hold-back in its JSON, the advice in the
    tools' words (no option of ``kexp``); nothing pushed."""
    pytest.importorskip("mcp")
    from test_mcp import Agent, run_agent
    from test_mcp_replies import no_option

    remote, carol, _, paths, _ = rejected(tmp_path)
    main = git(remote, "rev-parse", "main")
    answers: list[dict[str, object]] = []

    async def work(agent: Agent) -> None:
        answers.append(await agent.json("sync", dry_run=True))
        answers.append(await agent.json("sync"))

    run_agent(carol, work)
    for answer in answers:
        (held,) = answer["unlanded"]  # type: ignore[misc]
        assert held["branch"] == "kexp/carol" and held["files"] == sorted(paths), answer
        said = no_option([held["advice"]])
        assert said.startswith('calling sync with branch: "kexp/carol" proposes them'), said
        assert answer["committed"] == [] and not answer["up_to_date"], answer
    assert git(remote, "rev-parse", "main") == main


def test_sync_branch_main_from_another_branch_holds_back_as_well(tmp_path: Path) -> None:
    """Carol works on ``work`` and publishes to main with ``kexp sync --branch main``
    (an agent's way): the rejected experiments are held back there too, in the same
    line, JSON and dry run; main, here and on the remote, is untouched, her checkout
    too. A new experiment she never published still goes to main past them."""
    remote, carol, base, paths, _ids = rejected(tmp_path, on="work")
    main = git(remote, "rev-parse", "main")
    line = HELD.format(n=2) + ", ".join(sorted(paths)) + "; " + ADVICE + " (kexp rm ID)"

    planned = kexp(carol, "sync", "--branch", "main", "--dry-run").stdout
    assert planned.splitlines()[0] == "would hold back" + line[len("held back") :], planned
    assert "would commit" not in planned and "would push" not in planned, planned
    answer = json.loads(kexp(carol, "sync", "--branch", "main", "--json").stdout)
    assert answer["unlanded"] == [
        {
            "branch": "kexp/carol",
            "files": sorted(paths),
            "advice": ADVICE + " (kexp rm ID)",
            "published": True,
        }
    ], answer
    assert answer["committed"] == [] and not answer["pushed"] and not answer["up_to_date"]
    done = kexp(carol, "sync", "--branch", "main").stdout
    assert done.splitlines() == [line], done
    assert git(remote, "rev-parse", "main") == main  # nothing pushed
    assert git(carol, "rev-parse", "main") == main  # nothing committed
    assert git(carol, "rev-parse", "--abbrev-ref", "HEAD") == "work"
    assert git(carol, "status", "--porcelain", "--untracked-files=all") == "\n".join(
        f"?? {path}" for path in sorted(paths)
    )

    new = record(carol, base, "Vectorized loads - +3%", score=1.03)
    answer = json.loads(kexp(carol, "sync", "--branch", "main", "--json").stdout)
    assert [u["files"] for u in answer["unlanded"]] == [sorted(paths)], answer
    assert answer["committed"] == [relative(carol, new.path)] and answer["pushed"], answer
    assert remote_ids(remote, "main") == [new.id]


@pytest.mark.parametrize("how", ["merge commit", "squashed"])
def test_sync_branch_main_holds_nothing_back_of_a_landed_deleted_branch(
    tmp_path: Path, how: str
) -> None:
    """From ``work``: kexp/carol merged (a merge commit, or squashed), then deleted;
    ``kexp sync --branch main`` holds nothing back and pushes the new experiment."""
    remote, base = make_remote(tmp_path)
    carol = clone(remote, tmp_path / "carol", "work")
    first = record(carol, base, "Double-buffered smem - +15%", score=1.15)
    kexp(carol, "sync", "--branch", "kexp/carol")
    land(remote, tmp_path / "forge", "kexp/carol", how)
    delete_branch(remote, "kexp/carol")
    git(carol, "fetch", "-q", "--prune")
    new = record(carol, base, "Vectorized loads - +3%", score=1.03)

    answer = json.loads(kexp(carol, "sync", "--branch", "main", "--dry-run", "--json").stdout)
    assert answer["unlanded"] == [] and answer["committed"] == [relative(carol, new.path)]
    answer = json.loads(kexp(carol, "sync", "--branch", "main", "--json").stdout)
    assert answer["unlanded"] == [], answer
    assert answer["committed"] == [relative(carol, new.path)] and answer["pushed"], answer
    assert sorted(remote_ids(remote, "main")) == sorted([first.id, new.id])
