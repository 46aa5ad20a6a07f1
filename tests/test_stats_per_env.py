"""kexp stats on one kernel tuned on two GPUs, as a user reads it: a best per operator,
dtype and env (the campaign review and context tell apart), each machine's named."""

from __future__ import annotations

import json
from pathlib import Path

from conftest import run_kexp

OP = "csrc/k.cu: k"


def add(repo: Path, *options: str) -> tuple[str, str]:
    """``kexp add --json`` in ``repo``: the id recorded, and what it said on stderr."""
    done = run_kexp(
        "add", "--json", "--operator", OP, "--dtype", "fp16", "--description", "x",
        *options, cwd=repo,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)["id"], done.stderr


def test_stats_names_each_machines_best_of_one_kernel(repo: Path) -> None:
    h100, _ = add(repo, "--summary", "Welford - +40%", "--score", "1.4", "--env", "H100")
    root, _ = add(
        repo, "--summary", "Welford - +15%", "--score", "1.15",
        "--env", "MI300X, ROCm 7.0.0, torch 2.5.1, a long machine name",
    )  # fmt: skip
    mi300x, _ = add(repo, "--summary", "Vec - +9%", "--score", "1.09", "--pid", root,
                    "--measured-against", "parent")  # fmt: skip
    data = json.loads(run_kexp("stats", "--json", cwd=repo).stdout)
    bests = [(b["env"][:6], b["id"], round(b["cumulative_score"], 4)) for b in data["best"]]
    assert bests == [("H100", h100, 1.4), ("MI300X", mi300x, 1.2535)], bests
    text = run_kexp("stats", cwd=repo, env={"COLUMNS": "80"}).stdout
    table = text[text.index("Best cumulative score") :].splitlines()
    assert "ENV" in table[1], text
    assert any(mi300x[:10] in line and "MI300X" in line for line in table), text
    assert any(h100[:10] in line and "H100" in line for line in table), text
    assert all(len(line) <= 80 for line in text.splitlines()), text
