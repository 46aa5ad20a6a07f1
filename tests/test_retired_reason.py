"""A step retired as the skill says (``kexp update ID --set status=failed --reason
...``): why it was retired reaches every read an agent consults, not only ``kexp
show``'s correction note (trial S, finding 08; trial R, finding 05). An agent told
only "failed" beside the old key insight ("build on it") cannot tell a wrong kernel
from a slow one."""

from __future__ import annotations

import json
from pathlib import Path

from conftest import run_kexp

KERNEL = ["--operator", "csrc/k.cu: k", "--dtype", "bf16", "--env", "MI300X, ROCm 7.0.0"]
INSIGHT = "fewer blocks, less tail; build on it"
WHY = "abandoned: wrong results for odd token counts"


def _retired(repo: Path) -> str:
    """A measured step on a root, then retired with a reason: its id."""
    done = run_kexp("add", *KERNEL, "--json", "--summary", "Root - +10%", "--score", "1.1",
                    "--description", "**Key insight**: a root.", cwd=repo)  # fmt: skip
    assert done.returncode == 0, done.stderr
    root = json.loads(done.stdout)["id"]
    done = run_kexp("add", "--json", "--summary", "Two tokens per block - +3.0%", "--score",
                    "1.03", "--pid", root, "--description", f"**Key insight**: {INSIGHT}.",
                    cwd=repo)  # fmt: skip
    assert done.returncode == 0, done.stderr
    step = json.loads(done.stdout)["id"]
    done = run_kexp("update", step, "--set", "status=failed", "--reason", WHY, cwd=repo)
    assert done.returncode == 0, done.stderr
    return str(step)


def test_lessons_say_why_a_step_was_retired(repo: Path) -> None:
    step = _retired(repo)
    done = run_kexp("lessons", env={"COLUMNS": "80"}, cwd=repo)
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    at = next(n for n, line in enumerate(lines) if step[:10] in line)
    block = " ".join(" ".join(lines[at : at + 8]).split())
    assert f"Retired: {WHY}" in block, done.stdout
    done = run_kexp("lessons", "--json", cwd=repo)
    (lesson,) = [x for group in json.loads(done.stdout).values() for x in group
                 if x["id"] == step]  # fmt: skip
    assert lesson["retired"] == WHY, lesson


def test_context_says_why_a_step_was_retired(repo: Path) -> None:
    """The consult step (``kexp context``, its ``--json`` the MCP consult tool's answer)
    listed the retired step as "failed" with its key insight "build on it", never why."""
    step = _retired(repo)
    done = run_kexp("context", "--operator", "csrc/k.cu", cwd=repo)
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    at = next(n for n, line in enumerate(lines) if step[:10] in line)
    assert lines[at + 1] == f"  retired: {WHY}", done.stdout
    done = run_kexp("context", "--operator", "csrc/k.cu", "--json", cwd=repo)
    (failure,) = [f for f in json.loads(done.stdout)["failures"] if f["id"] == step]
    assert failure["retired"] == WHY and failure["key_insight"].startswith(INSIGHT), failure


def test_a_success_built_on_a_retired_step_is_one_to_port_not_to_avoid(repo: Path) -> None:
    """A good step built on the step later retired left the ranking with it (its code
    holds the retired change) and was listed under "Do not repeat (already tried here)",
    though its own change was never tried on what replaced the retired step: the agent
    was told to avoid the change it should port next (trial S, finding 09)."""
    step = _retired(repo)
    done = run_kexp("add", "--json", "--summary", "Hoist head strides - +4.0%", "--score",
                    "1.04", "--pid", step, "--measured-against", "parent",
                    "--description", "**Key insight**: fewer address computations.",
                    cwd=repo)  # fmt: skip
    assert done.returncode == 0, done.stderr
    child = json.loads(done.stdout)["id"]
    done = run_kexp("context", "--operator", "csrc/k.cu", "--json", cwd=repo)
    packet = json.loads(done.stdout)
    (success,) = [s for s in packet["successes"] if s["id"] == child]
    assert success["built_on_retired"] == step, success
    assert all(child not in group["ids"] for group in packet["do_not_repeat"]), packet
    text = run_kexp("context", "--operator", "csrc/k.cu", cwd=repo).stdout
    lines = text.splitlines()
    at = next(n for n, line in enumerate(lines) if child[:10] in line)
    assert lines[at + 1].startswith(f"  built on retired {step[:10]}"), text
    assert "port it onto the current best" in lines[at + 1], text


def test_a_step_put_back_is_no_longer_said_retired(repo: Path) -> None:
    """A retired step put back (``--set status=done --reason ...``): the tried-before
    warning of the same change went on saying "retired because: ..." beside
    "improvement" (trial T, finding 04)."""
    diff = repo / "d.diff"
    diff.write_text("--- a/csrc/k.cu\n+++ b/csrc/k.cu\n@@ -1 +1 @@\n-int a = 1;\n+int a = 2;\n")
    done = run_kexp("add", *KERNEL, "--json", "--summary", "A is two - +5%", "--score", "1.05",
                    "--diff-file", str(diff), "--description", "**Key insight**: x.",
                    cwd=repo)  # fmt: skip
    step = json.loads(done.stdout)["id"]
    for status, why in (("failed", WHY), ("done", "the odd-count failure was the test's")):
        done = run_kexp("update", step, "--set", f"status={status}", "--reason", why, cwd=repo)
        assert done.returncode == 0, done.stderr
    done = run_kexp("add", *KERNEL, "--summary", "A is two again", "--score", "1.04",
                    "--dtype", "fp16", "--diff-file", str(diff), "--description", "y",
                    cwd=repo)  # fmt: skip
    assert f"already tried in {step}" in done.stderr, done.stderr
    assert "retired" not in done.stderr, done.stderr
