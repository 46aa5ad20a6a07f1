"""A best is one campaign's: operator × dtype × env.

An fp16 and a bf16 campaign on one operator are two races, as ``kexp stats``, ``kexp
context`` and the report's frontier keep them: ``kexp review`` ranks a step and calls a
new best within its own campaign, and the report's operator page draws a best tip and a
best so far per campaign.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

from conftest import git, init_repo, run_kexp

OPERATOR = "kernels/softmax.py: softmax_kernel"


def record(repo: Path, summary: str, score: float, dtype: str) -> str:
    """Record an experiment as the CLI does; its id."""
    done = run_kexp(
        "add", "--summary", summary, "--score", str(score), "--operator", OPERATOR,
        "--dtype", dtype, "--env", "H100", "--description", "x", "--json", cwd=repo,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    return str(json.loads(done.stdout)["id"])


def commit_all(repo: Path, message: str) -> None:
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", message)


def campaign_repo(tmp_path: Path) -> tuple[Path, dict[str, str]]:
    """main: an fp16 best (2.0); branch pr: bf16's first best (1.5), a better fp16 (2.53)."""
    repo = init_repo(tmp_path / "repo")
    assert run_kexp("init", ".", cwd=repo).returncode == 0
    made = {"fp16": record(repo, "fp16 vectorize", 2.0, "fp16")}
    commit_all(repo, "main")
    git(repo, "switch", "-q", "-c", "pr")
    made["bf16"] = record(repo, "bf16 vectorize", 1.5, "bf16")
    made["fp16 next"] = record(repo, "fp16 unroll", 2.53, "fp16")
    commit_all(repo, "pr")
    return repo, made


def test_review_ranks_and_calls_a_new_best_within_its_dtype(tmp_path: Path) -> None:
    repo, made = campaign_repo(tmp_path)
    done = run_kexp("review", "main", "pr", "--format", "json", cwd=repo)
    assert done.returncode == 0, done.stderr
    data = json.loads(done.stdout)
    added = {e["id"]: e for e in data["added"]}
    bf16 = added[made["bf16"]]
    # bf16's first best is the best of the bf16 campaign, not #2 behind fp16's
    assert (bf16["rank"], bf16["rank_of"], bf16["new_best"]) == (1, 1, True)
    assert bf16["previous_best_id"] is None
    fp16 = added[made["fp16 next"]]
    assert (fp16["rank"], fp16["rank_of"], fp16["new_best"]) == (1, 2, True)
    assert fp16["previous_best_id"] == made["fp16"]  # fp16's best before, not bf16's
    markdown = run_kexp("review", "main", "pr", cwd=repo).stdout
    news = [line for line in markdown.splitlines() if "**New best**" in line]
    assert len(news) == 2, markdown
    (on_bf16,) = [line for line in news if made["bf16"] in line]
    assert "(bf16, H100)" in on_bf16 and "first scored experiment" in on_bf16
    (on_fp16,) = [line for line in news if made["fp16 next"] in line]
    assert "(fp16, H100)" in on_fp16
    assert f"the best before was `{made['fp16']}` (2.0000)" in on_fp16


def test_a_removal_moves_the_best_of_its_own_dtype_only(tmp_path: Path) -> None:
    repo, made = campaign_repo(tmp_path)
    git(repo, "switch", "-q", "main")
    git(repo, "merge", "-q", "pr")
    git(repo, "switch", "-q", "-c", "drop")
    assert run_kexp("rm", made["bf16"], "--yes", cwd=repo).returncode == 0
    commit_all(repo, "drop")
    done = run_kexp("review", "main", "drop", "--format", "json", cwd=repo)
    assert done.returncode == 0, done.stderr
    (change,) = json.loads(done.stdout)["summary"]["best_changes"]
    assert (change["dtype_sig"], change["before_id"], change["after_id"]) == (
        "bf16", made["bf16"], None,
    )  # fmt: skip


def test_the_operator_page_draws_a_best_per_dtype(tmp_path: Path) -> None:
    repo, made = campaign_repo(tmp_path)
    done = run_kexp("report", "-o", str(tmp_path / "site"), cwd=repo)
    assert done.returncode == 0, done.stderr
    (page,) = (tmp_path / "site" / "op").glob("*.html")
    html = page.read_text(encoding="utf-8")
    tips = re.search(r"Best tips, one per dtype × env:</p><ul>(.*?)</ul>", html)
    assert tips is not None, html[:3000]
    assert made["bf16"][:10] in tips.group(1) and made["fp16 next"][:10] in tips.group(1)
    assert made["fp16"][:10] not in tips.group(1)
    # one best-so-far line per dtype: bf16's starts at its own first best
    assert len(re.findall(r'<path class="sofar[ "]', html)) == 2


def test_a_dtype_spelt_otherwise_is_one_campaign_and_shown_by_its_usual_name(
    tmp_path: Path,
) -> None:
    """main's best is bf16 (2.0); the branch adds a step spelt torch.bfloat16 (2.53) and
    removes nothing: one campaign, as kexp stats and tree keep it: ranked 1 of 2, a new
    best over the bf16 one (not the first of a campaign of its own)."""
    repo = init_repo(tmp_path / "repo")
    assert run_kexp("init", ".", cwd=repo).returncode == 0
    first = record(repo, "bf16 vectorize", 2.0, "bf16")
    commit_all(repo, "main")
    git(repo, "switch", "-q", "-c", "pr")
    second = record(repo, "bf16 unroll", 2.53, "torch.bfloat16")
    commit_all(repo, "pr")
    data = json.loads(run_kexp("review", "main", "pr", "--json", cwd=repo).stdout)
    (added,) = data["added"]
    assert added["id"] == second
    assert (added["rank"], added["rank_of"], added["new_best"]) == (1, 2, True)
    assert added["previous_best_id"] == first
    # the best moved by a removal is named by its usual spelling
    git(repo, "switch", "-q", "main")
    git(repo, "merge", "-q", "pr")
    git(repo, "switch", "-q", "-c", "drop")
    assert run_kexp("rm", second, "--yes", cwd=repo).returncode == 0
    commit_all(repo, "drop")
    done = run_kexp("review", "main", "drop", "--format", "json", cwd=repo)
    (change,) = json.loads(done.stdout)["summary"]["best_changes"]
    named = (change["operator_sig"], change["dtype_sig"], change["env"])
    assert named == (OPERATOR, "bf16", "H100")
    assert (change["before_id"], change["after_id"]) == (second, first)
