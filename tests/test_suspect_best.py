"""A suspect measurement is no best until checked: ``kexp review`` and ``kexp context``
name the same current best, the best tip whose measurement is believable, and the
suspect one beside it (``kexp top`` ranks it, marked).

The store is a team's: a bare repository as the remote, a clone, a pull request branch
made with the ``kexp`` commands a user runs.
"""

from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from conftest import git, init_repo, run_kexp

from kexp.core.campaign import derive
from kexp.format.suspect import suspect_reasons

OPERATOR = "kernels/softmax.cu: softmax"
CEILING = "score 5x is above the plausibility ceiling 3x"
#: Where the first step of a campaign was measured.
FP16_H100 = ("--operator", OPERATOR, "--dtype", "fp16", "--env", "H100")


def add(repo: Path, summary: str, score: float, *options: str) -> str:
    """Record an experiment as an agent does; its id."""
    done = run_kexp(
        "add", "--summary", summary, "--score", str(score),
        "--description", "**Approach**: a.\n\n**Key insight**: k.", "--json", *options, cwd=repo,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    return str(json.loads(done.stdout)["id"])


def team_repo(tmp_path: Path, *, suspect: bool = True) -> tuple[Path, dict[str, str]]:
    """main (pushed to a bare remote): a first step (1.05); branch ``pr``: a step on it
    (1.02 over its parent: 1.071) and, unless ``suspect`` is False, another one
    skipping the work (5.0 over its parent: 5.25, above the 3x ceiling)."""
    tmp_path.mkdir(parents=True, exist_ok=True)
    remote = tmp_path / "remote.git"
    git(tmp_path, "init", "-q", "--bare", "-b", "main", str(remote))
    repo = init_repo(tmp_path / "dev")
    git(repo, "remote", "add", "origin", str(remote))
    assert run_kexp("init", ".", cwd=repo).returncode == 0
    made = {"first": add(repo, "Vectorize loads - +5%", 1.05, *FP16_H100)}
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", "first step")
    git(repo, "push", "-q", "-u", "origin", "main")
    git(repo, "switch", "-q", "-c", "pr")
    on_parent = ("--pid", made["first"], "--measured-against", "parent")
    made["unroll"] = add(repo, "Unroll by 4 - +2%", 1.02, *on_parent)
    if suspect:
        made["skip"] = add(repo, "Skip the reduction - +400%", 5.0, *on_parent)
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", "PR")
    return repo, made


def headline(markdown: str) -> list[str]:
    """The review's headline: its lines between the counts and the first table."""
    lines = markdown.splitlines()
    start = next(i for i, line in enumerate(lines) if " added · " in line)
    end = next(i for i, line in enumerate(lines) if i > start and not line.strip())
    return [line.rstrip() for line in lines[start:end]]


def test_review_calls_the_believable_step_the_new_best_and_the_suspect_one_unchecked(
    tmp_path: Path,
) -> None:
    repo, made = team_repo(tmp_path)
    done = run_kexp("review", "main", "pr", cwd=repo)
    assert done.returncode == 0, done.stderr
    lines = headline(done.stdout)
    assert not [line for line in lines if "Best changed" in line], lines  # nothing removed
    (new,) = [line for line in lines if "**New best**" in line]
    assert f"`{made['unroll']}` reaches 1.0710" in new and made["skip"] not in new, new
    (warned,) = [line for line in lines if "suspect: verify correctness" in line]
    assert f"`{made['skip']}` reaches 5.2500" in warned, warned
    assert "not a new best until checked" in warned and CEILING in warned, warned
    (row,) = [line for line in done.stdout.splitlines() if line.startswith(f"| `{made['unroll']}`")]
    assert row.endswith("of 3, new best (those above are suspect)** |"), row  # ranked #2
    # The same pull request without the suspect step gets the same New best line.
    plain, theirs = team_repo(tmp_path / "plain", suspect=False)
    alone = run_kexp("review", "main", "pr", cwd=plain).stdout
    (same,) = [line for line in headline(alone) if "**New best**" in line]

    def anonymous(line: str, ids: dict[str, str]) -> str:
        return line.replace(ids["unroll"], "UNROLL").replace(ids["first"], "FIRST")

    assert anonymous(same, theirs) == anonymous(new, made)
    data = json.loads(run_kexp("review", "main", "pr", "--format", "json", cwd=repo).stdout)
    summary = data["summary"]
    assert summary["new_best"] == [made["unroll"]]
    assert summary["suspect"] == [made["skip"]]
    assert summary["best_changes"] == []


@pytest.mark.parametrize("where", ["pr", "merged"])
def test_context_builds_on_the_believable_best_and_names_the_suspect_beside_it(
    tmp_path: Path, where: str
) -> None:
    repo, made = team_repo(tmp_path)
    if where == "merged":  # on main, as the next agent's clone has it
        git(repo, "switch", "-q", "main")
        git(repo, "merge", "-q", "pr")
    done = run_kexp("context", "--operator", "softmax", cwd=repo)
    assert done.returncode == 0, done.stderr
    text = done.stdout
    best = text.split("## Current best\n", 1)[1].split("\n## ", 1)[0]
    assert best.startswith(f"- {made['unroll'][:10]}"), best
    assert made["skip"][:10] not in best
    suspect = text.split("\n## ", 2)[2]
    assert suspect.startswith("Higher, but suspect: verify correctness"), text
    suspect = suspect.split("\n## ", 1)[0]
    assert made["skip"][:10] in suspect and "5.2500x" in suspect and CEILING in suspect
    assert "[suspect: verify correctness]" in suspect
    assert text.count(made["skip"][:10]) == 1, text  # not again in related successes

    data = json.loads(run_kexp("context", "--operator", "softmax", "--json", cwd=repo).stdout)
    assert data["best"]["id"] == made["unroll"] and "suspect" not in data["best"]
    (above,) = data["suspect_best"]
    assert (above["id"], above["cumulative_score"], above["suspect"]) == (
        made["skip"], 5.25, [CEILING],
    )  # fmt: skip
    steps = [step["id"] for step in data["lineage"]]
    assert steps == [made["first"], made["unroll"]]
    assert all("suspect" not in step for step in data["lineage"])


def test_context_marks_a_suspect_related_entry_as_top_does(tmp_path: Path) -> None:
    repo, made = team_repo(tmp_path, suspect=False)
    bf16 = ("--operator", OPERATOR, "--dtype", "bf16", "--env", "H100")
    other = add(repo, "Skip the bf16 reduction - +300%", 4.0, *bf16)
    text = run_kexp("context", "--operator", "softmax", "--dtype", "fp16", cwd=repo).stdout
    successes = text.split("## Related successes\n", 1)[1].split("\n## ", 1)[0]
    (line,) = [line for line in successes.splitlines() if other[:10] in line]
    assert "[suspect: verify correctness] Skip the bf16 reduction" in line, line
    assert "Higher, but suspect" not in text  # another dtype: not above this best
    data = json.loads(
        run_kexp("context", "--operator", "softmax", "--dtype", "fp16", "--json", cwd=repo).stdout
    )
    (entry,) = [e for e in data["successes"] if e["id"] == other]
    assert entry["suspect"] == ["score 4x is above the plausibility ceiling 3x"]
    assert data["best"]["id"] == made["unroll"]
    assert data["suspect_best"] == []
    top = run_kexp("top", "--dtype", "bf16", cwd=repo, env={"KEXP_PAGER": "cat"}).stdout
    assert "[suspect: verify correctness] Skip the bf16 reduction" in top


def test_context_without_a_believable_best_says_so(tmp_path: Path) -> None:
    repo = init_repo(tmp_path / "dev")
    assert run_kexp("init", ".", cwd=repo).returncode == 0
    only = add(repo, "Skip the reduction - +400%", 5.0, *FP16_H100)
    text = run_kexp("context", "--operator", "softmax", cwd=repo).stdout
    best = text.split("## Current best\n", 1)[1].split("\n## ", 1)[0]
    assert only[:10] not in best and "suspect" in best, best
    assert only[:10] in text.split("## Higher, but suspect", 1)[1]
    data = json.loads(run_kexp("context", "--operator", "softmax", "--json", cwd=repo).stdout)
    assert data["best"] is None and data["suspect_best"][0]["id"] == only
    assert data["lineage"] == []


#: The reason of a believable step whose cumulative score multiplies a suspect one's.
def built_on(suspect_id: str) -> str:
    return f"cumulative built on suspect {suspect_id} (its own score is not suspect)"


def tainted_repo(tmp_path: Path) -> tuple[Path, dict[str, str]]:
    """:func:`team_repo`'s pull request plus a believable step (1.02) on the suspect one:
    its cumulative score (5.355) multiplies the suspect 5.0."""
    repo, made = team_repo(tmp_path)
    on_skip = ("--pid", made["skip"], "--measured-against", "parent")
    made["on_skip"] = add(repo, "Prefetch - +2%", 1.02, *on_skip)
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", "a step on the suspect one")
    return repo, made


def test_a_step_built_on_a_suspect_one_is_no_best_anywhere(tmp_path: Path) -> None:
    repo, made = tainted_repo(tmp_path)
    reason = built_on(made["skip"])
    # kexp context: the believable best stays; the step on the suspect one is beside it.
    data = json.loads(run_kexp("context", "--operator", "softmax", "--json", cwd=repo).stdout)
    assert data["best"]["id"] == made["unroll"], data["best"]
    above = {e["id"]: e["suspect"] for e in data["suspect_best"]}
    assert above == {made["on_skip"]: [reason], made["skip"]: [CEILING]}
    text = run_kexp("context", "--operator", "softmax", cwd=repo).stdout
    best = text.split("## Current best\n", 1)[1].split("\n## ", 1)[0]
    assert best.startswith(f"- {made['unroll'][:10]}"), best
    assert reason in text.split("## Higher, but suspect", 1)[1]
    # kexp review: the believable step is the new best; the one on the suspect unchecked.
    summary = json.loads(run_kexp("review", "main", "pr", "--format", "json", cwd=repo).stdout)[
        "summary"
    ]
    assert summary["new_best"] == [made["unroll"]]
    assert sorted(summary["suspect"]) == sorted([made["on_skip"], made["skip"]])
    review = run_kexp("review", "main", "pr", cwd=repo).stdout
    (warned,) = [
        line
        for line in headline(review)
        if made["on_skip"] in line and "suspect: verify correctness" in line
    ]
    assert reason in warned, warned
    # kexp top / list / tree mark it as a suspect step is marked, JSON gives the reason.
    listed = {"KEXP_PAGER": "cat"}
    top = run_kexp("top", cwd=repo, env=listed).stdout
    (row,) = [line for line in top.splitlines() if made["on_skip"][:10] in line]
    assert "[suspect: verify correctness] Prefetch" in row, top
    tree = run_kexp("tree", cwd=repo, env=listed).stdout
    (node,) = [line for line in tree.splitlines() if "Prefetch" in line]
    assert "[suspect" in node, tree
    rows = json.loads(run_kexp("list", "--json", cwd=repo).stdout)
    suspect = {r["id"]: r.get("suspect", []) for r in rows}  # left out: believable
    assert suspect[made["on_skip"]] == [reason]
    assert suspect[made["unroll"]] == [] and suspect[made["first"]] == []
    # kexp validate judges the file's own score: no warning for the step on top.
    checked = run_kexp("validate", "--format", "json", cwd=repo)
    flagged = [p for p in json.loads(checked.stdout) if p["code"] == "suspect"]
    assert len(flagged) == 1 and made["skip"][:10] in json.dumps(flagged), flagged


def test_stats_names_the_believable_best_and_the_suspect_ones_above(tmp_path: Path) -> None:
    repo, made = tainted_repo(tmp_path)
    data = json.loads(run_kexp("stats", "--json", cwd=repo).stdout)
    (best,) = data["best"]
    assert (best["id"], best["cumulative_score"], best["suspect"]) == (made["unroll"], 1.071, [])
    assert [a["id"] for a in best["suspect_above"]] == [made["on_skip"], made["skip"]]
    assert best["suspect_above"][0]["suspect"] == [built_on(made["skip"])]
    text = run_kexp("stats", cwd=repo, env={"KEXP_PAGER": "cat"}).stdout
    (line,) = [line for line in text.splitlines() if "Unroll by 4" in line]
    assert made["unroll"][:10] in line and "suspect" not in line, line
    (above,) = [line for line in text.splitlines() if "2 suspect above" in line]
    assert made["on_skip"][:10] in above and "cumulative built on suspect" in above, text


def step(exp_id: str, score: float, pid: str = "", **fields: Any) -> SimpleNamespace:
    """A record as derivation reads it (a row's attributes)."""
    plain = {
        "measured_against": "parent" if pid else "reference", "status": "done", "tags": [],
        "results": [],
    }  # fmt: skip
    return SimpleNamespace(
        id=exp_id, pid=pid, score=score, is_buggy=False, combines=[], score_ci=[],
        protocol=None, **{**plain, **fields},
    )  # fmt: skip


def test_the_derivation_carries_a_suspect_step_up_its_products_only() -> None:
    records = [
        step("root", 1.05),
        step("skip", 5.0, "root"),
        step("aa", 1.0, "skip", tags=["control"]),  # its code is skip's
        step("on_aa", 1.02, "aa"),
        step("again", 4.0, "on_aa"),  # suspect itself, and built on skip
        step("fresh", 1.2, "on_aa", measured_against="reference"),  # its own product
        step("zero", 1.01, "root", results=[{"config": "n", "baseline": 9.0, "candidate": 0.1}]),
        step("on_zero", 1.02, "zero"),
    ]
    chain = [step(f"c{i}", 1.01, f"c{i - 1}" if i else "on_aa") for i in range(3000)]
    derivation = derive([*records, *chain])
    below = {r.id: derivation.of(r).built_on_suspect for r in records}
    assert below == {
        "root": "", "skip": "", "aa": "", "on_aa": "skip", "again": "skip", "fresh": "",
        "zero": "", "on_zero": "zero",
    }  # fmt: skip
    assert derivation.of(chain[-1]).built_on_suspect == "skip"  # 3000 steps up, no recursion
    assert suspect_reasons(records[4], derived=derivation.of(records[4])) == [
        "score 4x is above the plausibility ceiling 3x",
        "cumulative built on suspect skip",
    ]
    # Another file of an id, on another parent, is judged with its own front-matter.
    twin = step("on_zero", 1.02, "root")
    assert derivation.of(twin).built_on_suspect == ""
