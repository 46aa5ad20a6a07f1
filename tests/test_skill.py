"""The agent skill: its front-matter, its examples, its Python reference, its installation."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import REPO_ROOT, experiment_fields, git

from kexp import Store
from kexp.agents.skill import SKILL_NAME, install_skill, skill_destination, skill_source
from kexp.core.model import ALL_FIELDS, STATUSES

SKILL_DIR = REPO_ROOT / "skill" / SKILL_NAME
SKILL_MD = SKILL_DIR / "SKILL.md"
REFERENCE = SKILL_DIR / "references" / "kexp_agent.py"


def front_matter(text: str) -> dict[str, str]:
    match = re.match(r"---\n(.*?)\n---\n", text, re.DOTALL)
    assert match, "SKILL.md starts with YAML front-matter"
    import yaml

    data = yaml.safe_load(match.group(1))
    assert isinstance(data, dict)
    return data


def python_blocks(text: str) -> list[str]:
    return re.findall(r"```python\n(.*?)```", text, re.DOTALL)


def run_python(code: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    """Run ``code`` as an agent would, in ``cwd``, with kexp importable."""
    env = {**os.environ, "PYTHONIOENCODING": "utf-8"}
    env.pop("KEXP_ROOT", None)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(REPO_ROOT), env.get("PYTHONPATH")]))
    return subprocess.run(
        [sys.executable, "-c", code],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        encoding="utf-8",
        timeout=120,
    )


def test_the_skill_has_the_front_matter_agents_need() -> None:
    meta = front_matter(SKILL_MD.read_text(encoding="utf-8"))

    assert meta["name"] == SKILL_NAME == SKILL_DIR.name
    assert re.fullmatch(r"[a-z0-9-]{1,64}", meta["name"])
    description = meta["description"]
    assert 50 < len(description) <= 1024
    assert "kexp" in description and "record" in description


def test_the_skill_covers_every_field_status_and_the_recording_sections() -> None:
    text = SKILL_MD.read_text(encoding="utf-8")

    for field in ALL_FIELDS:
        assert f"`{field}`" in text, field
    for status in STATUSES:
        assert f"`{status}`" in text, status
    for paragraph in ("**Approach**", "**Result**", "**Why it worked/failed**", "**Key insight"):
        assert paragraph in text
    for heading in (
        "Consult",
        "Record one iteration",
        "Score rules",
        "Failure categories",
        "Correct a past record",
    ):
        assert re.search(rf"^## .*{heading}", text, re.MULTILINE), heading


@pytest.fixture
def agent_checkout(repo: Path) -> Path:
    """A store with some history and benchmark output, as an agent finds it."""
    store = Store(repo)
    parent = store.create_experiment(
        **experiment_fields(operator_sig="csrc/kernels/cache_kernels.cu: reshape_and_cache_flash")
    )
    store.create_experiment(
        **experiment_fields(
            pid=parent.id,
            change_summary="Stage KV tile through LDS - -7.07% (LDS conflicts)",
            score=0.9293,
            detailed_description="**Approach**: LDS\n\n**Key insight**: bank conflicts",
        )
    )
    store.create_experiment(
        **experiment_fields(
            change_summary="Unroll by 8 - crash",
            score=0.0,
            status="failed",
            is_buggy=True,
            error_message="Memory access fault",
        )
    )
    bench = repo / "bench"
    bench.mkdir()
    (bench / "baseline.json").write_text(json.dumps({"t256": 5.9, "t4096": 20.9}))
    (bench / "candidate.json").write_text(json.dumps({"t256": 5.8, "t4096": 20.5}))
    (repo / "kernel.cu").write_text("__global__ void k() { /* unrolled */ }\n")
    return repo


def test_every_python_example_in_the_skill_runs_verbatim(agent_checkout: Path) -> None:
    blocks = python_blocks(SKILL_MD.read_text(encoding="utf-8"))
    assert len(blocks) >= 6
    before = len(Store(agent_checkout).paths())

    for block in blocks:
        result = run_python(block, agent_checkout)
        assert result.returncode == 0, f"{block}\n---\n{result.stderr}"
        assert "Traceback" not in result.stderr
        # The recommended flow records uncommitted work without the uncommitted-base
        # warning (base_commit given, the diff against it).
        assert "uncommitted" not in result.stderr, result.stderr

    recorded = Store(agent_checkout).list_experiments()
    assert len(recorded) == before + 2  # the two recording examples
    measured = next(e for e in recorded if e.results)
    assert measured.score == pytest.approx(((5.9 / 5.8) * (20.9 / 20.5)) ** 0.5, abs=1e-4)
    assert "kernel.cu" in measured.code_change
    # Iteration N: the operator's experiments counted in recording order.
    earlier = [e for e in recorded if e.operator_sig == measured.operator_sig]
    number = 1 + sum(1 for e in earlier if e.created_at < measured.created_at)
    assert measured.raw_result.startswith(f"Iteration {number} Results - SUCCESS:")
    assert measured.measured_against == ("parent" if measured.pid else "")
    assert "verified" in Store(agent_checkout).top_experiments(1)[0].tags
    assert "uncommitted-base" not in measured.tags
    assert measured.base_commit == git(agent_checkout, "rev-parse", "HEAD")


def test_the_skill_starts_an_iteration_with_one_context_call() -> None:
    text = SKILL_MD.read_text(encoding="utf-8")
    loop = text.split("**The loop, every iteration:**", 1)[1].split("\n\n", 1)[0]
    assert "1. **Before**" in loop and "kexp context --operator" in loop
    first = text.split("## 1. Consult", 1)[1].split("```", 2)[1]
    assert first.startswith("sh\nkexp context --operator")


def test_what_the_skill_says_of_status_and_interference_holds(repo: Path) -> None:
    store = Store(repo)
    planned = store.create_experiment(**{**experiment_fields(), "status": "new"})
    assert planned.outcome == "pending" and store.top_experiments() == []
    best = store.create_experiment(**experiment_fields(score=1.05))
    combined = store.create_experiment(
        **experiment_fields(change_summary="Combine both - +0.7% (interference)", score=1.007)
    )
    assert store.get_experiment(combined.id).outcome == "marginal"  # no combines: no interference
    store.update_experiment(combined.id, combines=[best.id])
    assert store.get_experiment(combined.id).outcome == "interference"


def test_the_python_reference_imports_and_works_on_the_store(agent_checkout: Path) -> None:
    code = (
        "import sys\n"
        f"sys.path.insert(0, {str(REFERENCE.parent)!r})\n"
        "import kexp_agent as k\n"
        f"assert k.__file__ == {str(REFERENCE)!r}, k.__file__\n"
        "top = k.top_experiments(5)\n"
        "assert isinstance(top[0], dict) and top[0]['score'] == 1.019, top\n"
        "assert k.get_experiment('ffffffffffffffff') is None\n"
        "print(len(k.list_experiments()))\n"
        "print(k.describe_schema())\n"
    )

    result = run_python(code, agent_checkout)

    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert lines[0] == "3"
    described = {line.split(":", 1)[0] for line in lines[1:]}
    assert described == set(ALL_FIELDS)


def test_install_into_a_directory_writes_the_skill_files(tmp_path: Path) -> None:
    written = install_skill(directory=tmp_path / "skills")

    folder = tmp_path / "skills" / SKILL_NAME
    assert sorted(p.relative_to(folder).as_posix() for p in written) == [
        "SKILL.md",
        "references/kexp_agent.py",
    ]
    assert (folder / "SKILL.md").read_bytes() == SKILL_MD.read_bytes()
    # The reference as shipped, but for the folder it tells an agent to import it from.
    here = json.dumps(str((folder / "references").resolve()))
    shipped = REFERENCE.read_text(encoding="utf-8")
    expected = shipped.replace('".claude/skills/kernel-exp-history/references"', here)
    assert (folder / "references" / "kexp_agent.py").read_text(encoding="utf-8") == expected


def test_installing_again_updates_the_skill_and_keeps_other_files(tmp_path: Path) -> None:
    install_skill(directory=tmp_path)
    folder = tmp_path / SKILL_NAME
    (folder / "SKILL.md").write_text("stale", encoding="utf-8")
    (folder / "notes.md").write_text("mine", encoding="utf-8")

    install_skill(directory=tmp_path)

    assert (folder / "SKILL.md").read_bytes() == SKILL_MD.read_bytes()
    assert (folder / "notes.md").read_text(encoding="utf-8") == "mine"
    assert not [p for p in folder.rglob("*.tmp")]


def test_claude_and_cursor_targets_are_at_the_top_of_the_project(repo: Path) -> None:
    nested = repo / "csrc" / "kernels"
    nested.mkdir(parents=True)

    written = install_skill("claude", project=nested)
    install_skill("cursor", project=nested)

    assert written[0] == repo.resolve() / ".claude" / "skills" / SKILL_NAME / "SKILL.md"
    assert (repo / ".cursor" / "skills" / SKILL_NAME / "SKILL.md").is_file()
    assert skill_destination(directory="x") == Path("x") / SKILL_NAME
    assert git(repo, "status", "--porcelain", "--untracked-files=all", "csrc") == ""


@pytest.mark.parametrize("target", ["claude", "cursor", "dir"])
def test_the_installed_reference_says_to_import_it_from_where_it_was_installed(
    repo: Path, tmp_path: Path, target: str
) -> None:
    """The trial: installed with --cursor, the reference's docstring still told an agent
    to put .claude/skills/... on sys.path. The line it gives, run in the project, imports
    the file it is in (inside the project: relative to it; elsewhere: absolute)."""
    outside = tmp_path / "skills"
    if target == "dir":
        written = install_skill(directory=outside, project=repo)
    else:
        written = install_skill(target, project=repo)
    (reference,) = [p for p in written if p.name == "kexp_agent.py"]
    (line,) = re.findall(r"^ *sys\.path\.insert\(0, .*\)$", reference.read_text("utf-8"), re.M)
    folder = reference.parent.resolve()
    expected = str(folder) if target == "dir" else folder.relative_to(repo.resolve()).as_posix()
    assert line.strip() == f"sys.path.insert(0, {json.dumps(expected)})"
    code = f"import sys\n{line.strip()}\nimport kexp_agent\nprint(kexp_agent.__file__)"
    ran = subprocess.run(
        [sys.executable, "-c", code], cwd=repo, capture_output=True, text=True, check=False
    )
    assert ran.returncode == 0, ran.stderr
    assert Path(ran.stdout.strip()).resolve() == reference.resolve()
    # The shipped file itself is unchanged (the Claude Code install's path).
    assert '".claude/skills/kernel-exp-history/references"' in REFERENCE.read_text("utf-8")


def test_the_skill_source_is_the_repository_folder_in_a_checkout() -> None:
    assert (skill_source() / "SKILL.md").read_bytes() == SKILL_MD.read_bytes()


def test_the_skill_says_consult_across_refs_and_sync_after_recording() -> None:
    """Many agents at once: the skill tells them to read every branch (--all-refs) and
    to publish after recording (kexp sync), and both are real commands and options."""
    from click.testing import CliRunner

    from kexp.cli.main import main

    text = SKILL_MD.read_text(encoding="utf-8")
    loop = text[text.index("**The loop, every iteration:**") : text.index("## 1.")]
    assert "kexp sync" in loop and "--all-refs" in loop
    assert loop.index("record the iteration") < loop.index("kexp sync")
    for command in ("top", "list", "show"):
        assert "--all-refs" in CliRunner().invoke(main, [command, "--help"]).output
    assert "--branch" in CliRunner().invoke(main, ["sync", "--help"]).output


def test_the_skills_failure_query_finds_the_bundled_stores_regressions(repo: Path) -> None:
    """Trial L, R09: the predecessor's query ``e.score < 0.98 or e.is_buggy``, as the
    skill gave it, ran on cumulative scores (over the original code) and found no
    regression past 1x. The skill's failure query, run as written on the bundled store,
    finds every regression and buggy run kexp derives, and each python block runs."""
    import shutil

    shutil.rmtree(repo / "experiments")
    shutil.copytree(REPO_ROOT / "experiments", repo / "experiments")
    (block,) = [b for b in python_blocks(SKILL_MD.read_text(encoding="utf-8")) if "❌" in b
                and "failures" in b]  # fmt: skip
    result = run_python(block, repo)
    assert result.returncode == 0, result.stderr
    found = {line.strip().removeprefix("❌ ") for line in result.stdout.splitlines()
             if line.strip().startswith("❌")}  # fmt: skip
    derived = Store(repo).list_experiments(outcome=["regression", "buggy"])
    assert found == {e.change_summary for e in derived} and len(found) >= 4, result.stdout
    for other in python_blocks(SKILL_MD.read_text(encoding="utf-8")):
        if "create_experiment" in other or "record_iteration" in other or "kexp.add" in other:
            continue  # the recording examples: run by the test above, on its checkout
        ran = run_python(other, repo)
        assert ran.returncode == 0 and "Traceback" not in ran.stderr, (other, ran.stderr)
