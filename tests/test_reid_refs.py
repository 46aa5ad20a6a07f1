"""``kexp re-id`` in a team: whether an id is the file's alone, and who builds on it, is
read across refs, as every read is, not from the working tree alone. Bob built on
Alice's experiment on his pull request's branch: re-id of hers in her clone broke his
lineage, silently; it is refused, naming his experiment and branch. Bob's branch made an
experiment of its own with her id (two branches made one id): that is what re-id is
for, and it gives hers a fresh one, his child notwithstanding. Real git: a bare
repository on disk as the remote, two clones, the commands as the users type them."""

from __future__ import annotations

from pathlib import Path

from conftest import experiment_fields, git, run_kexp
from test_sync import clone, make_remote, record

from kexp import Store


def test_re_id_of_an_experiment_another_branch_builds_on_is_refused(tmp_path: Path) -> None:
    remote, base = make_remote(tmp_path)
    alice = clone(remote, tmp_path / "alice")
    bob = clone(remote, tmp_path / "bob")
    parent = record(alice, base, "Online softmax - +10%", score=1.10)
    assert parent.path is not None
    assert run_kexp("sync", cwd=alice).returncode == 0
    assert run_kexp("sync", cwd=bob).returncode == 0  # (brings Alice's in)
    child = record(bob, base, "Online softmax, two rows a warp - +3%", score=1.03, pid=parent.id)
    assert run_kexp("sync", "--branch", "kexp/bob", cwd=bob).returncode == 0
    git(alice, "fetch", "-q")
    before = parent.path.read_bytes()

    refused = run_kexp("re-id", str(parent.path), cwd=alice)
    assert refused.returncode == 2, refused.stdout
    assert child.id[:10] in refused.stderr and "origin/kexp/bob" in refused.stderr
    assert "Traceback" not in refused.stderr and len(refused.stderr.splitlines()) == 1
    assert parent.path.read_bytes() == before


def test_re_id_of_an_id_another_branch_made_too_gives_this_file_a_fresh_one(
    tmp_path: Path,
) -> None:
    remote, base = make_remote(tmp_path)
    alice = clone(remote, tmp_path / "alice")
    bob = clone(remote, tmp_path / "bob")
    hers = record(alice, base, "Online softmax - +10%", score=1.10)
    assert hers.path is not None
    fields = experiment_fields(change_summary="Split-K GEMM - +4%", base_commit=base, score=1.04)
    his = Store(bob).create_experiment(**{**fields, "id": hers.id})
    record(bob, base, "Split-K GEMM, K=4 - +2%", score=1.02, pid=his.id)
    assert run_kexp("sync", "--branch", "kexp/bob", cwd=bob).returncode == 0
    git(alice, "fetch", "-q")

    done = run_kexp("re-id", str(hers.path), cwd=alice)
    assert done.returncode == 0, done.stderr
    assert not hers.path.exists()
    slug = hers.path.name.split("-", 1)[1]  # the name after the id, which re-id keeps
    (moved,) = (alice / "experiments").rglob(f"*-{slug}")
    assert not moved.name.startswith(hers.id)


def test_an_agent_gives_a_copied_file_a_fresh_id_with_the_re_id_tool(repo: Path) -> None:
    """An agent copied an experiment's file to start the next one: ``show`` of the id
    fails, naming the command re-id, "which no tool is" (the agent could not act on
    it). It names the re_id tool and its path, which the agent calls as said: one of
    the two files gets a fresh id, and ``show`` answers. A file that is no experiment's
    is a tool error of one line, nothing changed."""
    import json
    import re
    import shutil

    from test_mcp import Agent, run_agent

    made = Store(repo).create_experiment(**experiment_fields())
    assert made.path is not None
    copy = made.path.with_name(made.path.name.replace(".md", "-copy.md"))
    shutil.copyfile(made.path, copy)

    async def work(agent: Agent) -> None:
        failed, texts = await agent.call("show", exp_id=made.id[:10])
        assert failed and len(texts[0].splitlines()) == 1, texts
        said = re.search(r'the re_id tool with path: "([^"]+)"', texts[0])
        assert said is not None, texts
        failed, texts = await agent.call("re_id", path=said.group(1))
        assert not failed, texts
        done = json.loads(texts[0])
        assert done["old_id"] == made.id and done["id"] != made.id
        assert Path(done["path"]).is_file() and not Path(done["old_path"]).exists()
        shown = await agent.json("show", exp_id=made.id[:10])
        assert shown["id"] == made.id
        failed, texts = await agent.call("re_id", path="README.md")
        assert failed and len(texts) == 1 and "not in this store" in texts[0], texts
        failed, texts = await agent.call("re_id", path="nowhere.md")
        assert failed and len(texts) == 1 and "give the absolute path" in texts[0], texts

    (repo / "README.md").write_text("The project.\n", encoding="utf-8")  # no experiment
    run_agent(repo, work)
    assert len(list((repo / "experiments").rglob(f"{made.id}-*.md"))) == 1


def test_re_id_of_the_file_a_teammate_builds_on_beside_a_copy_is_refused(
    tmp_path: Path,
) -> None:
    """Alice published her experiment; Bob built on it on his pull request's branch.
    Alice copied her file to start a new experiment (two files, one id) and ran re-id
    on the original: it went ahead, silently, and Bob's child named the copy, another
    experiment. It is refused in one line naming his child, his branch, and the
    re-id of the copy instead (or --force); done as said, his lineage holds. With
    --force, the original gets a fresh id all the same."""
    import shutil

    remote, base = make_remote(tmp_path)
    alice = clone(remote, tmp_path / "alice")
    bob = clone(remote, tmp_path / "bob")
    parent = record(alice, base, "Online softmax - +10%", score=1.10)
    assert parent.path is not None
    assert run_kexp("sync", cwd=alice).returncode == 0
    assert run_kexp("sync", cwd=bob).returncode == 0  # (brings Alice's in)
    child = record(bob, base, "Online softmax, two rows a warp - +3%", score=1.03, pid=parent.id)
    assert run_kexp("sync", "--branch", "kexp/bob", cwd=bob).returncode == 0
    git(alice, "fetch", "-q")
    copy = parent.path.with_name(parent.path.name.replace(".md", "-next.md"))
    shutil.copyfile(parent.path, copy)
    before = {p: p.read_bytes() for p in (alice / "experiments").rglob("*.md")}

    refused = run_kexp("re-id", str(parent.path), cwd=alice)
    assert refused.returncode == 2, refused.stdout
    (line,) = refused.stderr.strip().splitlines()
    assert child.id[:10] in line and "origin/kexp/bob" in line, line
    shown = copy.relative_to(alice).as_posix()
    assert f"kexp re-id {shown}" in line and "--force" in line and "Traceback" not in line, line
    assert {p: p.read_bytes() for p in (alice / "experiments").rglob("*.md")} == before

    forced_copy = tmp_path / "forced"
    shutil.copytree(alice / "experiments", forced_copy)
    done = run_kexp("re-id", shown, cwd=alice)
    assert done.returncode == 0, done.stderr
    assert parent.path.read_bytes() == before[parent.path] and not copy.exists()
    assert Store(alice).get_experiment(parent.id).path == parent.path

    shutil.rmtree(alice / "experiments")
    shutil.copytree(forced_copy, alice / "experiments")
    forced = run_kexp("re-id", "--force", str(parent.path), cwd=alice)
    assert forced.returncode == 0, forced.stderr
    assert not parent.path.exists() and copy.exists()


def test_an_agent_refused_a_re_id_is_told_the_force_argument_and_it_works(repo: Path) -> None:
    """An agent's re_id of a parent whose id no other file holds is refused in the
    tools' words (``force: true``, not ``--force``); called with force as said, the
    file gets a fresh id and its child names no experiment."""
    import json
    import re

    from test_mcp import Agent, run_agent

    made = Store(repo).create_experiment(**experiment_fields())
    assert made.path is not None
    child = Store(repo).create_experiment(
        **experiment_fields(change_summary="Unroll by 8 - +1%", score=1.01, pid=made.id)
    )

    async def work(agent: Agent) -> None:
        failed, texts = await agent.call("re_id", path=str(made.path))
        assert failed and len(texts[0].splitlines()) == 1 and "--force" not in texts[0], texts
        said = re.search(r'the re_id tool with path: "([^"]+)" and force: true', texts[0])
        assert said is not None and child.id[:10] in texts[0], texts
        failed, texts = await agent.call("re_id", path=said.group(1), force=True)
        assert not failed, texts
        assert json.loads(texts[0])["old_id"] == made.id

    run_agent(repo, work)
    assert not made.path.exists()
    assert Store(repo).get_experiment(child.id).pid == made.id  # (now naming no experiment)
