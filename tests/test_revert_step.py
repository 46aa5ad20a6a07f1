"""Recording the revert of a failed step: it is said to revert its parent.

The trial: an agent reverted num_stages=4 (a regression) with ``git revert`` and
recorded the revert as a step on it; kexp warned that the change was a near-duplicate
of an old success (num_warps=8, the code before the step: "read that experiment before
measuring it again") and never that it undid its parent.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from conftest import git, run_kexp

COMMON = ("--operator", "kernels/softmax.py: softmax", "--dtype", "fp16", "--env", "H100")
LAUNCH = (
    "    softmax_kernel[(n_rows,)](y, x, x.stride(0), y.stride(0), n_cols, "
    "BLOCK_SIZE=BLOCK_SIZE, {})\n"
)
KERNEL = (
    "def softmax(x):\n"
    "    n_rows, n_cols = x.shape\n"
    "    y = torch.empty_like(x)\n"
    "    BLOCK_SIZE = triton.next_power_of_2(n_cols)\n"
    "{}"
    "    return y\n"
)


def launch(repo: Path, arguments: str, message: str) -> str:
    """The kernel's launch given ``arguments``, committed: the commit's diff."""
    path = repo / "kernels" / "softmax.py"
    path.parent.mkdir(exist_ok=True)
    path.write_text(KERNEL.format(LAUNCH.format(arguments)))
    git(repo, "add", "kernels")
    git(repo, "commit", "-qm", message)
    return git(repo, "diff", "HEAD~1", "HEAD", "--", "kernels") + "\n"


def record(repo: Path, summary: str, score: str, diff: str, *more: str) -> tuple[str, str]:
    """``kexp add`` of a step: (its id, what it warned)."""
    (repo / "step.diff").write_text(diff)
    done = run_kexp(
        "add", "--summary", summary, *COMMON, "--score", score, "--diff-file", "step.diff",
        *more, cwd=repo, process=True,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    return done.stdout.split()[1].rstrip(":"), done.stderr


def test_the_revert_of_its_parent_is_said_to_revert_it(repo: Path) -> None:
    launch(repo, "num_warps=4", "kernel")
    warps = launch(repo, "num_warps=8", "num_warps=8")
    stages = launch(repo, "num_warps=8, num_stages=4", "num_stages=4")
    git(repo, "revert", "--no-edit", "HEAD")
    revert = git(repo, "diff", "HEAD~1", "HEAD", "--", "kernels") + "\n"
    first, _ = record(repo, "num_warps=8 - +9%", "1.09", warps)
    step, _ = record(repo, "num_stages=4 - -7%", "0.93", stages, "--pid", first)

    _, said = record(repo, "Revert num_stages=4 - +7.5%", "1.075", revert, "--pid", step)

    (line,) = [w for w in said.splitlines() if "warning" in w]
    assert line == (
        f"kexp: warning: this code_change reverts {step}, its parent (regression: "
        f"'num_stages=4 - -7%'): it undoes that diff, back to the code of {first}, its "
        f"grandparent (its speedup is over the step it undoes, not over {first})"
    )
    assert "near-duplicate" not in said

    # On another parent, the same diff reverts nothing: its near-duplicate is said.
    _, other = record(repo, "Drop num_stages - +7.5%", "1.075", revert, "--pid", first)
    assert "near-duplicate" in other and "reverts" not in other


STAGES = "--- a/k.py\n+++ b/k.py\n@@ -1 +1 @@\n-num_warps=8\n+num_warps=8, num_stages=4\n"
UNDO = "--- a/k.py\n+++ b/k.py\n@@ -1 +1 @@\n-num_warps=8, num_stages=4\n+num_warps=8\n"


def test_a_revert_like_no_other_change_is_said_to_revert_its_parent(repo: Path) -> None:
    """The trial's repro: the revert resembles no other experiment's change (no
    near-duplicate warning to stand in for), by ``kexp add`` and by MCP ``record``."""
    first, _ = record(repo, "H5 vectorize - +4%", "1.04", "")
    step, _ = record(repo, "num_stages=4 - -10%", "0.90", STAGES, "--pid", first)
    _, said = record(repo, "Revert num_stages=4 - +11%", "1.11", UNDO, "--pid", step)
    assert f"reverts {step}, its parent" in said
    assert f"back to the code of {first}, its grandparent" in said

    # Over MCP, on another try of the same step: the revert tried before (on the first
    # try) is named too.
    pytest.importorskip("mcp")
    from test_mcp import Agent, run_agent

    again, _ = record(repo, "num_stages=4 again - -10%", "0.90", STAGES, "--pid", first)

    async def work(agent: Agent) -> None:
        fields = {"change_summary": "Revert num_stages=4 - +11%", "score": 1.11}
        failed, texts = await agent.call("record", pid=again, code_change=UNDO, **fields)
        told = "\n".join(texts)
        assert not failed and f"reverts {again}, its parent" in told
        assert "read that experiment" in told and f"reverts {step}" not in told

    run_agent(repo, work)
