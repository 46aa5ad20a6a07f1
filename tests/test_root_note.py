"""A step recorded without its parent where a campaign is: told, naming the best tip.

The trial: the README's "For agents" example, run as written, recorded "Unroll head
loop by 2" with no pid on reshape_and_cache_flash, whose campaign reaches 1.1803x: a root
(cumulative 1.004 "over the reference") that nothing warned of.
"""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import pytest
import yaml
from conftest import REPO_ROOT, git, init_repo, run_kexp
from test_examples import examples, run

from kexp import Store

OPERATOR = ("--operator", "k.cu: softmax", "--dtype", "fp16", "--env", "H100")


def add(repo: Path, summary: str, score: str, *more: str) -> tuple[str, str]:
    """``kexp add`` as a process: (the id, what it warned)."""
    done = run_kexp(
        "add", "--summary", summary, *OPERATOR, "--score", score, *more, cwd=repo, process=True
    )
    assert done.returncode == 0, done.stderr
    return done.stdout.split()[1].rstrip(":"), done.stderr


def test_a_root_where_a_campaign_is_names_its_best_tip(repo: Path) -> None:
    first, said = add(repo, "Tile loads - +10%", "1.10", "--measured-against", "reference")
    assert "is a root" not in said  # the first of its kernel: nothing to build on
    tip, _ = add(repo, "Vectorize - +5%", "1.05", "--pid", first)

    forgot, said = add(repo, "Unroll by 2 - +3%", "1.03")

    (line,) = [w for w in said.splitlines() if "is a root" in w]
    assert f"best tip {tip} (cumulative 1.1550x, 'Vectorize - +5%')" in line, line
    advised = re.search(r"kexp (update \w+ --set pid=\w+ --set measured_against=parent)$", line)
    assert advised, line
    done = run_kexp(*advised[1].split(), cwd=repo, process=True)  # followed as written
    assert done.returncode == 0, done.stderr
    assert Store(repo).get_experiment(forgot).pid == tip

    # A fresh start said to be one (over the reference), another env: no note.
    _, said = add(repo, "Rewrite - +2%", "1.02", "--measured-against", "reference")
    assert "is a root" not in said
    done = run_kexp(
        "add", "--summary", "Unroll by 2 - +3%", "--operator", "k.cu: softmax", "--dtype",
        "fp16", "--env", "MI300X", "--score", "1.03", cwd=repo, process=True,
    )  # fmt: skip
    assert done.returncode == 0 and "is a root" not in done.stderr, done.stderr


def test_the_readme_agent_example_records_its_step_on_the_best_tip(tmp_path: Path) -> None:
    """The README's "For agents" block, run as written on the bundled store."""
    store = init_repo(tmp_path / "store")
    shutil.copytree(REPO_ROOT / "experiments", store / "experiments")
    git(store, "add", "experiments")
    git(store, "commit", "-qm", "the bundled store")
    readme = REPO_ROOT / "README.md"
    (code,) = [code for _, code in examples(readme) if "cat > iteration.yaml" in code]

    done = run("sh", code, store)

    assert done.returncode == 0, done.stderr
    assert "is a root" not in done.stderr, done.stderr
    recorded = yaml.safe_load((store / "iteration.yaml").read_text(encoding="utf-8"))
    exp = Store(store).get_experiment(done.stdout[done.stdout.index('"id": "') + 7 :][:16])
    best = Store(store).get_experiment("6aca6c49dc")
    assert (exp.pid, exp.measured_against) == (best.id, "parent"), recorded
    assert exp.cumulative_score is not None and exp.cumulative_score > 1.18


def test_the_mcp_record_tool_says_it_and_the_advice_works_as_written(repo: Path) -> None:
    pytest.importorskip("mcp")
    from test_mcp import Agent, run_agent

    first, _ = add(repo, "Tile loads - +10%", "1.10", "--measured-against", "reference")
    tip, _ = add(repo, "Vectorize - +5%", "1.05", "--pid", first)
    fields = {"operator_sig": "k.cu: softmax", "dtype_sig": "fp16", "env": "H100"}

    async def work(agent: Agent) -> None:
        failed, texts = await agent.call(
            "record", change_summary="Unroll by 2 - +3%", score=1.03, **fields
        )
        assert not failed, texts
        (said,) = [t for t in texts[1:] if "is a root" in t]
        advised = re.search(r'the update tool with exp_id: "(\w+)" and changes: (\{.*?\})', said)
        assert advised and "--set" not in said, said
        done = await agent.json("update", exp_id=advised[1], changes=json.loads(advised[2]))
        assert done["changed"] == ["pid", "measured_against"], done

    run_agent(repo, work)
    (root,) = [e for e in Store(repo).list_experiments() if e.change_summary.startswith("Unroll")]
    assert (root.pid, root.measured_against) == (tip, "parent")
