"""What ``kexp review`` tells the reviewer of a pull request beyond its own files: an
added experiment whose code change the base tried before (and retired), a score put back
by a revert, a branch that holds an experiment as it was before the base corrected it.
A team's forge on disk (a bare repository as the remote, a clone each), experiments
recorded with ``kexp add`` / ``kexp update``, pull requests as branches."""

from __future__ import annotations

import json
from pathlib import Path

from conftest import git, init_repo, run_kexp
from test_review_reasons import person, recorded
from test_sync import make_remote

OPERATOR = "kernels/softmax.py: softmax_kernel"
UNROLL = (
    "diff --git a/kernels/softmax.py b/kernels/softmax.py\n"
    "--- a/kernels/softmax.py\n+++ b/kernels/softmax.py\n"
    "@@ -1 +1,2 @@\n # softmax\n+unroll_rows = 4\n"
)
CAMPAIGN = ("--operator", OPERATOR, "--dtype", "fp16", "--env", "MI300X")


def _push(root: Path, branch: str, message: str) -> None:
    git(root, "add", "-A", "experiments")
    git(root, "commit", "-q", "-m", message)
    git(root, "push", "-q", "origin", f"HEAD:{branch}")


def test_a_pull_request_repeating_a_retired_step_is_told_so_not_only_a_new_best(
    tmp_path: Path,
) -> None:
    """main retired U (unroll by 4: wrong results, with the reason); alice's pull request
    adds an experiment with U's very code change. ``kexp add`` warned her; the review
    tells the reviewer too: the headline's new best and the added experiment's row say it
    was tried before in U, U's outcome and why U was retired."""
    remote, _ = make_remote(tmp_path)
    lead = person(remote, tmp_path / "lead")
    diff = tmp_path / "unroll.diff"
    diff.write_text(UNROLL)
    base = recorded(lead, "--summary", "Online softmax - +15%", "--score", "1.15",
                "--measured-against", "reference", *CAMPAIGN)  # fmt: skip
    retired = recorded(lead, "--summary", "Unroll rows by 4 - +5%", "--score", "1.05",
                   "--pid", base, "--diff-file", str(diff))  # fmt: skip
    reason = "wrong results when rows are not a multiple of 4"
    done = run_kexp("update", retired, "--set", "status=failed", "--reason", reason, cwd=lead)
    assert done.returncode == 0, done.stderr
    _push(lead, "main", "softmax history")

    alice = person(remote, tmp_path / "alice")
    again = recorded(alice, "--summary", "Unroll softmax rows x4 - +4%", "--score", "1.04",
                 "--pid", base, "--diff-file", str(diff))  # fmt: skip
    _push(alice, "kexp/alice", "x4")
    git(lead, "fetch", "-q")

    said = run_kexp("review", "origin/main", "origin/kexp/alice", cwd=lead)
    assert said.returncode == 0, said.stderr
    text = said.stdout
    note = f"tried before: `{retired}` (failed; retired because: {reason})"
    best = next(line for line in text.splitlines() if "**New best**" in line)
    assert f"`{again}`" in best and note in best, text
    row = next(line for line in text.splitlines() if line.startswith(f"| `{again}`"))
    assert note in row, row
    data = json.loads(run_kexp("review", "origin/main", "origin/kexp/alice", "--json",
                               cwd=lead).stdout)  # fmt: skip
    (added,) = data["added"]
    assert [t["id"] for t in added["tried_before"]] == [retired]
    assert added["tried_before"][0]["retired"] == reason
    assert data["summary"]["tried_before"] == [again]


def test_the_review_of_a_revert_says_the_score_is_put_back_not_to_ask_for_a_reason(
    tmp_path: Path,
) -> None:
    """alice's pull request corrected E 1.10 → 1.07 (with its reason) and was merged;
    the lead reverts the merge. The review of the revert says E's score is put back to
    its value before alice's correction, naming that commit, instead of asking E's
    author for a reason the revert's commit gives."""
    remote, _ = make_remote(tmp_path)
    lead = person(remote, tmp_path / "lead")
    exp = recorded(lead, "--summary", "Tiles 128 - +10%", "--score", "1.10",
               "--measured-against", "reference", *CAMPAIGN)  # fmt: skip
    _push(lead, "main", "E")
    alice = person(remote, tmp_path / "alice")
    done = run_kexp("update", exp, "--set", "score=1.07", "--reason", "remeasured", cwd=alice)
    assert done.returncode == 0, done.stderr
    _push(alice, "kexp/alice", "correct E")
    corrected = git(alice, "rev-parse", "HEAD")
    git(lead, "fetch", "-q")
    git(lead, "merge", "-q", "--no-ff", "origin/kexp/alice", "-m", "Merge PR 1")
    merged = git(lead, "rev-parse", "HEAD")
    git(lead, "revert", "-m", "1", "--no-edit", "HEAD")

    text = run_kexp("review", merged, "HEAD", cwd=lead).stdout
    assert "correction-dropped" in text  # the revert, as the check sees it
    assert "without a reason" not in text and "ask for the reason" not in text, text
    put_back = next(line for line in text.splitlines() if "**Score put back**" in line)
    assert f"`{exp}`" in put_back and "`1.07` → `1.1`" in put_back, put_back
    # The commit undone: alice's correction, or the merge that brought it (git's log
    # order of commits made in one second is either)
    named = {f"`{corrected[:12]}` (correct E)", f"`{merged[:12]}` (Merge PR 1)"}
    assert any(f"before commit {commit}" in put_back for commit in named), put_back


def test_a_kept_branch_after_a_squash_merge_is_not_blamed_for_the_bases_correction(
    tmp_path: Path,
) -> None:
    """alice's first pull request (E, 1.10) is squash-merged, the reviewer correcting E
    to 1.05 with its reason in the squash; alice adds F on E on her kept branch. The
    review of her next pull request lists F alone: E is no correction of hers (her branch
    holds the version before main's correction: the note says so), nobody is asked for
    a reason, and F's cumulative is over main's E (1.05 × 1.03)."""
    remote, _ = make_remote(tmp_path)
    alice = person(remote, tmp_path / "alice")
    git(alice, "checkout", "-q", "-b", "kexp/alice")
    first = recorded(alice, "--summary", "Tiles 128 - +10%", "--score", "1.10",
                 "--measured-against", "reference", *CAMPAIGN)  # fmt: skip
    _push(alice, "kexp/alice", "E")
    lead = person(remote, tmp_path / "lead")
    git(lead, "fetch", "-q")
    git(lead, "merge", "-q", "--squash", "origin/kexp/alice")
    done = run_kexp("update", first, "--set", "score=1.05", "--reason", "quiet box", cwd=lead)
    assert done.returncode == 0, done.stderr
    _push(lead, "main", "PR 1 (squashed, corrected)")
    second = recorded(alice, "--summary", "Stages 4 - +3%", "--score", "1.03", "--pid", first)
    _push(alice, "kexp/alice", "F")
    git(lead, "fetch", "-q")

    text = run_kexp("review", "origin/main", "origin/kexp/alice", cwd=lead).stdout
    assert "**1 added · 0 corrected · 0 removed**" in text, text
    assert "without a reason" not in text and "score-without-note" not in text, text
    best = next(line for line in text.splitlines() if "**New best**" in line)
    assert f"`{second}` reaches 1.0815" in best, best
    behind = next(line for line in text.splitlines() if f"`{first}`" in line and "⏪" in line)
    assert "`score` `1.1` → `1.05`" in behind, behind
    data = json.loads(run_kexp("review", "origin/main", "origin/kexp/alice", "--json",
                               cwd=lead).stdout)  # fmt: skip
    assert [e["id"] for e in data["added"]] == [second] and not data["corrected"]
    assert data["added"][0]["cumulative_score"] == 1.0815
    assert data["summary"]["behind_base"] == [first]


def test_the_first_experiments_of_a_store_the_base_lacks_are_reviewed(tmp_path: Path) -> None:
    """The pull request that makes the store (``kexp init``) and adds an experiment with
    a code change: the base has no store to have tried it in, and the review says what
    it adds, not an error."""
    repo = init_repo(tmp_path / "repo")
    git(repo, "switch", "-q", "-c", "pr")
    assert run_kexp("init", ".", cwd=repo).returncode == 0
    diff = tmp_path / "unroll.diff"
    diff.write_text(UNROLL)
    first = recorded(repo, "--summary", "Unroll rows by 4 - +5%", "--score", "1.05",
                 "--measured-against", "reference", "--diff-file", str(diff),
                 *CAMPAIGN)  # fmt: skip
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", "the store")
    done = run_kexp("review", "main", "pr", cwd=repo)
    assert done.returncode == 0, done.stderr
    assert "**1 added · 0 corrected · 0 removed**" in done.stdout and first in done.stdout
    assert "tried before" not in done.stdout


def test_a_repeat_of_a_regression_is_called_out_though_no_new_best(tmp_path: Path) -> None:
    """main holds a regression (two rows per warp: 0.95); bob's pull request adds the
    same change again, with a regression too, on the same parent: the headline says it
    was tried before, with the earlier outcome, and the row says so."""
    remote, _ = make_remote(tmp_path)
    lead = person(remote, tmp_path / "lead")
    diff = tmp_path / "unroll.diff"
    diff.write_text(UNROLL)
    base = recorded(lead, "--summary", "Online softmax - +15%", "--score", "1.15",
                "--measured-against", "reference", *CAMPAIGN)  # fmt: skip
    slower = recorded(lead, "--summary", "Unroll rows by 4 - -5%", "--score", "0.95",
                  "--pid", base, "--diff-file", str(diff))  # fmt: skip
    _push(lead, "main", "softmax history")
    bob = person(remote, tmp_path / "bob")
    again = recorded(bob, "--summary", "Unroll by 4 again - -4%", "--score", "0.96",
                 "--pid", base, "--diff-file", str(diff))  # fmt: skip
    _push(bob, "kexp/bob", "again")
    git(lead, "fetch", "-q")

    text = run_kexp("review", "origin/main", "origin/kexp/bob", cwd=lead).stdout
    assert "**New best**" not in text
    line = next(line for line in text.splitlines() if "**Tried before**" in line)
    assert f"`{again}` (regression), tried before: `{slower}` (regression" in line, line
    row = next(line for line in text.splitlines() if line.startswith(f"| `{again}`"))
    assert f"tried before: `{slower}` (regression" in row, row
