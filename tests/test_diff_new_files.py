"""``--diff-from-git`` (the record tool's ``diff_from_git``) with a new kernel file the
agent has not added to git (trial D, finding 7): the diff held tracked files only, so
the experiment recorded no code change at all ("git diff is empty"). Now untracked files
that are not ignored are in it, as ``git add -N`` shows them; ignored ones are not, and
the repository's index is left as it was (the file stays untracked)."""

from __future__ import annotations

import json
from pathlib import Path

from tests.conftest import git, run_kexp
from tests.test_mcp import Agent, record_fields, run_agent

FUSED = "def fused_softmax():\n    return 42\n"


def new_kernel(repo: Path) -> None:
    """A tracked kernel changed, a new one beside it, and an ignored build output."""
    (repo / "kernels").mkdir()
    (repo / "kernels" / "softmax.py").write_text("BLOCK = 1024\n")
    (repo / ".gitignore").write_text("build/\n")
    git(repo, "add", "-A")
    git(repo, "commit", "-qm", "kernels")
    (repo / "kernels" / "softmax.py").write_text("BLOCK = 2048\n")
    (repo / "kernels" / "fused.py").write_text(FUSED)
    (repo / "build").mkdir()
    (repo / "build" / "fused.so.txt").write_text("an ignored build output\n")


def test_kexp_add_diff_from_git_holds_a_new_file(repo: Path) -> None:
    new_kernel(repo)
    done = run_kexp(
        "add", "--operator", "kernels/fused.py: fused_softmax", "--dtype", "fp16", "--env",
        "H100", "--summary", "New fused kernel - +9%", "--score", "1.09", "--diff-from-git",
        "--json", cwd=repo,
    )  # fmt: skip
    assert done.returncode == 0 and "git diff is empty" not in done.stderr, done.stderr
    exp_id = json.loads(done.stdout)["id"]
    change = json.loads(run_kexp("show", exp_id, "--json", cwd=repo).stdout)["code_change"]
    assert "diff --git a/kernels/fused.py b/kernels/fused.py\nnew file mode" in change, change
    assert "+def fused_softmax():" in change and "+BLOCK = 2048" in change, change
    assert "build/" not in change and "experiments/" not in change, change
    assert "?? kernels/fused.py" in git(repo, "status", "--porcelain")  # still untracked
    assert git(repo, "diff", "--cached", "--name-only") == ""


def test_the_record_tool_diff_from_git_holds_a_new_file(repo: Path) -> None:
    new_kernel(repo)
    said: dict[str, str] = {}

    async def work(agent: Agent) -> None:
        fields = record_fields(code_change=None, diff_from_git=True)
        fields.pop("code_change")
        reply = await agent.json("record", score=1.09, **fields)
        said["id"] = reply["id"]

    run_agent(repo, work)
    text = next((repo / "experiments").rglob(f"{said['id']}-*.md")).read_text()
    assert "+++ b/kernels/fused.py" in text and "+    return 42" in text, text


def test_diff_from_git_takes_untracked_source_files_only_and_names_them(repo: Path) -> None:
    """Beside the new kernel, a stray ``run.log``, a profiler's ``trace.json`` and a
    generated source file larger than an experiment may be: every untracked file was
    taken in, and the large one refused the whole record (file-too-large). Now only
    untracked source files that fit are taken; the answer names those taken and those
    left out (with why and how to take one in), and the record is made."""
    new_kernel(repo)
    (repo / "kexp.toml").write_text("max_file_bytes = 16384\n")
    (repo / "run.log").write_text("step 1 ok\n")
    (repo / "trace.json").write_text('{"traceEvents": []}\n')
    (repo / "kernels" / "table.py").write_text("TABLE = [\n" + "    12345678,\n" * 2000 + "]\n")
    done = run_kexp(
        "add", "--operator", "kernels/fused.py: fused_softmax", "--dtype", "fp16", "--env",
        "H100", "--summary", "New fused kernel - +9%", "--score", "1.09", "--diff-from-git",
        "--json", cwd=repo,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    change = json.loads(run_kexp("show", json.loads(done.stdout)["id"], "--json", cwd=repo).stdout)[
        "code_change"
    ]
    assert "b/kernels/fused.py" in change and "+BLOCK = 2048" in change, change
    for name in ("run.log", "trace.json", "table.py"):
        assert name not in change, change
    (took,) = [line for line in done.stderr.splitlines() if "untracked" in line]
    assert "kernels/fused.py" in took, took
    left = took.split("left out", 1)[1]
    for name in ("run.log", "trace.json", "kernels/table.py", "max_file_bytes", "git add -N"):
        assert name in left, took
    assert "kernels/fused.py" not in left, took
