"""Across refs, where a version is found, as a team lead reads it (trial Q04): the
checked-out branch is the working tree's commit, so ``local`` stands for it in
``other_versions`` as in ``refs``; ``removed_on`` is a list in ``kexp top --json`` as in
the exports, empty when no side branch removed it."""

from __future__ import annotations

import json
from pathlib import Path

from tests.conftest import git, run_kexp


def kexp(repo: Path, *args: str) -> str:
    done = run_kexp(*args, cwd=repo, process=True)
    assert done.returncode == 0, done.stderr
    return done.stdout


def test_the_checked_out_branch_is_local_in_other_versions_and_removed_on_a_list(
    repo: Path,
) -> None:
    common = ("--operator-sig", "k.cu: f", "--dtype-sig", "bf16", "--env", "H100")
    root = json.loads(
        kexp(repo, "add", "--change-summary", "Root - +10.0%", "--score", "1.1",
             "--measured-against", "reference", "--detailed-description", "x", "--json",
             *common)
    )["id"]  # fmt: skip
    kexp(repo, "add", "--pid", root, "--measured-against", "parent", "--change-summary",
         "Child - +5.0%", "--score", "1.05", "--detailed-description", "y", *common)  # fmt: skip
    git(repo, "add", "-A")
    git(repo, "commit", "-qm", "two")
    branch = git(repo, "branch", "--show-current")
    git(repo, "checkout", "-qb", "side")
    kexp(repo, "update", root, "--set", "score=1.2", "--reason", "remeasured")
    git(repo, "commit", "-qam", "corrected on side")
    git(repo, "checkout", "-q", branch)

    lines = kexp(repo, "export", "--format", "jsonl", "--all-refs").splitlines()
    places = {r["id"]: (r["ref"], r["refs"], r["other_versions"]) for r in map(json.loads, lines)}
    assert places[root] == ("side", ["side"], ["local"])
    assert all(branch not in refs + others for _, refs, others in places.values()), places

    top = json.loads(kexp(repo, "top", "--all-refs", "--json"))
    assert {row["id"] for row in top} == set(places)
    assert [row["removed_on"] for row in top] == [[], []], top
