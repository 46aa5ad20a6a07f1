"""A step measured against the reference beside the outcome judged against its parent,
as kexp similar prints them: the row says what the outcome judges (its cumulative score
over its parent's), so a +10% over the reference on a +25% parent reads as the
regression it is, and SCORE stays kexp top's."""

from __future__ import annotations

import json
from pathlib import Path

from conftest import run_kexp

OP = "csrc/k.cu: k"


def add(repo: Path, *options: str) -> str:
    done = run_kexp(
        "add", "--json", "--operator", OP, "--dtype", "bf16", "--env", "H100",
        "--description", "x", *options, cwd=repo,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    return str(json.loads(done.stdout)["id"])


def test_similar_says_what_the_outcome_judges_beside_tops_score(repo: Path) -> None:
    root = add(repo, "--summary", "Vectorized loads - +25%", "--score", "1.25",
               "--measured-against", "reference")  # fmt: skip
    step = add(repo, "--summary", "Vectorized loads 8-wide - +10%", "--score", "1.10",
               "--pid", root, "--measured-against", "reference")  # fmt: skip
    over = add(repo, "--summary", "Vectorized loads 4-wide - +4%", "--score", "1.04",
               "--pid", root, "--measured-against", "parent")  # fmt: skip
    text = run_kexp("similar", "--text", "vectorized loads", cwd=repo, env={"COLUMNS": "80"})
    lines = text.stdout.splitlines()
    assert lines[0].split()[:6] == ["ID", "RELEVANCE", "SCORE", "VS", "PARENT", "OUTCOME"]
    rows = {line.split()[0]: line.split()[1:5] for line in lines[1:]}
    assert rows[step[:10]][1:] == ["1.1000", "0.8800", "regression"], text.stdout
    assert rows[over[:10]][1:] == ["1.0400", "1.0400", "improvement"], text.stdout
    assert rows[root[:10]][1:] == ["1.2500", "-", "improvement"], text.stdout
    assert all(len(line) <= 80 for line in lines)
    top = run_kexp("top", "--json", cwd=repo)
    tops = {exp["id"]: exp["score"] for exp in json.loads(top.stdout)}
    found = json.loads(run_kexp("similar", "--text", "vectorized loads", "--json", cwd=repo).stdout)
    assert {m["id"]: m["score"] for m in found} == tops  # one answer: top's SCORE
    assert {m["id"]: m.get("vs_parent") for m in found} == {root: None, step: 0.88, over: 1.04}
