"""A pull request reviewed for what it does to others' experiments: a score edited by
hand with no reason, a parent removed under its children. A team's forge on disk (a
bare repository as the remote, a clone each), experiments recorded with ``kexp add``,
pull requests as branches, and CI's ``kexp validate --changed`` and ``kexp review`` run
as processes; each piece of advice they give is followed to see that it settles it."""

from __future__ import annotations

import json
import shlex
import subprocess
from pathlib import Path

from conftest import git, run_kexp
from test_sync import clone, make_remote

OPERATOR = "csrc/k.cu: k"


def recorded(root: Path, *args: str) -> str:
    """``kexp add`` in ``root``: the id of the experiment recorded."""
    done = run_kexp("add", "--json", "--description", "x", *args, cwd=root)
    assert done.returncode == 0, done.stderr
    return str(json.loads(done.stdout)["id"])


def person(remote: Path, folder: Path) -> Path:
    """A clone of ``remote`` whose git identity is the folder's name (``alice``)."""
    clone(remote, folder)
    git(folder, "config", "user.name", folder.name)
    return folder


def _file(root: Path, exp_id: str) -> Path:
    return next((root / "experiments").rglob(f"{exp_id}-*.md"))


def _run(root: Path, command: str) -> None:
    """Run a shell command a hint gives, as a reviewer pastes it, in ``root``."""
    done = subprocess.run(command, shell=True, cwd=root, capture_output=True, text=True)
    assert done.returncode == 0, (command, done.stderr)


def _hinted(output: str, start: str, end: str) -> str:
    """The command of a hint: from ``start`` to just before ``end``."""
    at = output.index(start)
    return output[at : output.index(end, at)]


def test_a_score_edited_by_hand_in_anothers_experiment_is_flagged_with_whose_it_is(
    tmp_path: Path,
) -> None:
    """bob's pull request changes alice's score 1.08 → 1.18 by hand, with no correction
    note and the summary still "+8%": CI's check warns on the score line, naming alice,
    the summary and how to record the correction with its reason; the review says whose
    experiment it is and that no reason was given. Following the advice (the file put
    back, ``kexp update --reason``) leaves nothing to warn of."""
    remote, _ = make_remote(tmp_path)
    alice = person(remote, tmp_path / "alice")
    exp_id = recorded(
        alice,
        *("--summary", "Block swizzle - +8%", "--score", "1.08", "--operator", OPERATOR),
        *("--dtype", "bf16", "--env", "H100"),
    )
    git(alice, "add", "-A")
    git(alice, "commit", "-q", "-m", "alice: swizzle")
    git(alice, "push", "-q", "origin", "main")

    bob = person(remote, tmp_path / "bob")
    git(bob, "checkout", "-q", "-b", "kexp/bob")
    path = _file(bob, exp_id)
    path.write_text(path.read_text().replace("score: 1.08\n", "score: 1.18\n"))
    git(bob, "commit", "-q", "-am", "tweak")

    checked = run_kexp("validate", "--changed", "origin/main", cwd=bob, process=True)
    said = checked.stdout + checked.stderr
    assert "Traceback" not in said
    flagged = [line for line in said.splitlines() if "score-without-note" in line]
    assert len(flagged) == 1, said
    relative = path.relative_to(bob).as_posix()
    assert flagged[0].startswith(f"{relative}:5:")  # the score line
    assert "1.08 → 1.18" in flagged[0] and "alice's experiment" in flagged[0]
    assert "'Block swizzle - +8%'" in flagged[0]  # the summary that disagrees
    assert f"git restore --source origin/main -- :/{relative}" in said
    assert f"kexp update {exp_id[:10]} --set score=SCORE --reason TEXT" in said

    review = run_kexp("review", "origin/main", "HEAD", cwd=bob).stdout
    assert "Recorded by alice." in review
    assert "**Score changed without a reason**" in review
    assert f"`{exp_id}`, alice's experiment: score `1.08` → `1.18`" in review

    # The advice followed: the file put back, the correction made with its reason.
    _run(bob, _hinted(said, "git restore", ")"))
    fixed = run_kexp(
        "update", exp_id, "--set", "score=1.18", "--reason", "re-timed on an idle GPU", cwd=bob
    )
    assert fixed.returncode == 0, fixed.stderr
    git(bob, "commit", "-q", "-am", "correct alice's score, with the reason")
    again = run_kexp("validate", "--changed", "origin/main", cwd=bob)
    assert "score-without-note" not in again.stdout + again.stderr, again.stdout
    assert again.returncode == 0
    review = run_kexp("review", "origin/main", "HEAD", cwd=bob).stdout
    assert "without a reason" not in review and "Recorded by alice." in review


def test_a_pull_request_removing_a_parent_says_it_removed_it_not_to_fix_the_child(
    tmp_path: Path,
) -> None:
    """A pull request whose only change deletes A2, the parent of A3: the error on A3
    (untouched) says this change removed A2, names its file and how to put it back, not
    to rewrite A3's pid; the removal counts as a file checked. Putting it back as said
    passes the check."""
    remote, _ = make_remote(tmp_path)
    lead = person(remote, tmp_path / "lead")
    first = recorded(
        lead,
        *("--summary", "Tiling - +12%", "--score", "1.12", "--operator", OPERATOR),
        *("--dtype", "bf16", "--env", "H100"),
    )
    parent = recorded(lead, "--summary", "Swizzle - +8%", "--score", "1.08", "--pid", first)
    child = recorded(lead, "--summary", "TMA - +6%", "--score", "1.06", "--pid", parent)
    git(lead, "add", "-A")
    git(lead, "commit", "-q", "-m", "three steps")
    git(lead, "push", "-q", "origin", "main")
    git(lead, "checkout", "-q", "-b", "pr")
    removed = _file(lead, parent).relative_to(lead).as_posix()
    git(lead, "rm", "-q", removed)
    git(lead, "commit", "-q", "-m", "rm")

    checked = run_kexp("validate", "--changed", "origin/main", cwd=lead, process=True)
    assert checked.returncode == 1
    said = checked.stdout + checked.stderr
    assert "Traceback" not in said
    errors = [line for line in said.splitlines() if "error[" in line]
    assert len(errors) == 1 and "dangling-pid" in errors[0], said
    assert errors[0].startswith(_file(lead, child).relative_to(lead).as_posix())
    assert f"parent {parent} is removed by this change ({removed})" in errors[0]
    assert f"git restore --source origin/main -- :/{removed}" in said
    assert "set pid: ''" not in said and "never recorded" not in said
    assert "1 changed file(s) checked (1 removed)" in checked.stderr

    _run(lead, _hinted(said, "git restore", ")"))
    git(lead, "add", "-A")
    git(lead, "commit", "-q", "-m", "keep the parent")
    assert run_kexp("validate", "--changed", "origin/main", cwd=lead).returncode == 0


def test_a_copy_a_pull_request_adds_is_the_file_advised_a_new_id_and_reads_warn(
    tmp_path: Path,
) -> None:
    """A pull request adds a copy of main's experiment that keeps its id: CI's advice to
    give a file a new id names only the copy, never main's established file (following
    it settles the duplicate, main's id kept); meanwhile plain reads (list, stats) of
    the tree holding both warn once, on one line, that the id is held by two files and
    what to do."""
    remote, _ = make_remote(tmp_path)
    lead = person(remote, tmp_path / "lead")
    exp_id = recorded(
        lead,
        *("--summary", "Fused residual - +4%", "--score", "1.04", "--operator", OPERATOR),
        *("--dtype", "fp16", "--env", "H100"),
    )
    git(lead, "add", "-A")
    git(lead, "commit", "-q", "-m", "c")
    git(lead, "push", "-q", "origin", "main")
    git(lead, "checkout", "-q", "-b", "pr")
    original = _file(lead, exp_id)
    copy = original.with_name(f"{exp_id}-copy-bf16.md")
    copy.write_text(original.read_text().replace("score: 1.04\n", "score: 1.02\n"))
    git(lead, "add", "-A")
    git(lead, "commit", "-q", "-m", "dup")

    checked = run_kexp("validate", "--changed", "origin/main", cwd=lead, process=True)
    said = checked.stdout + checked.stderr
    assert checked.returncode == 1 and "duplicate-id" in said, said
    assert "held by" not in said  # validation says it of each file: no read's warning too
    hints = [line for line in said.splitlines() if "hint:" in line]
    assert len(hints) == 2, said  # one for each file, each naming the copy alone
    for hint in hints:
        assert f"kexp re-id {copy}" in hint and f"kexp re-id {original}" not in hint, hint

    for command in (("list",), ("stats",), ("list", "--json")):
        read = run_kexp(*command, cwd=lead, process=True)
        assert read.returncode == 0, read.stderr
        warned = [line for line in read.stderr.splitlines() if "held by 2 files" in line]
        assert len(warned) == 1 and read.stderr.strip() == warned[0], read.stderr
        relative = [p.relative_to(lead).as_posix() for p in (original, copy)]
        assert exp_id in warned[0] and all(p in warned[0] for p in relative)
        assert "kexp re-id PATH" in warned[0]
    assert len(json.loads(run_kexp("list", "--json", cwd=lead).stdout)) == 2

    advice = shlex.split(_hinted(said, "kexp re-id", ")"))  # the advice followed
    assert run_kexp(*advice[1:], cwd=lead).returncode == 0
    git(lead, "add", "-A")
    git(lead, "commit", "-q", "-m", "re-id the copy")
    assert run_kexp("validate", "--changed", "origin/main", cwd=lead).returncode == 0
    assert original.is_file() and exp_id in original.read_text()
    assert "held by" not in run_kexp("list", cwd=lead, process=True).stderr


def test_a_score_edited_in_a_file_the_change_also_moved_is_put_back_where_it_was(
    tmp_path: Path,
) -> None:
    """bob's pull request moves alice's file to a folder of his own and edits its score:
    the score warning's advice moves it back before restoring it (restored where it was
    while the moved copy stays, the store would hold the experiment twice, one id in two
    files). Followed, with the correction made by kexp, it leaves one file and nothing
    to warn of."""
    remote, _ = make_remote(tmp_path)
    alice = person(remote, tmp_path / "alice")
    exp_id = recorded(
        alice,
        *("--summary", "Block swizzle - +8%", "--score", "1.08", "--operator", OPERATOR),
        *("--dtype", "bf16", "--env", "H100"),
    )
    git(alice, "add", "-A")
    git(alice, "commit", "-q", "-m", "alice: swizzle")
    git(alice, "push", "-q", "origin", "main")

    bob = person(remote, tmp_path / "bob")
    git(bob, "checkout", "-q", "-b", "kexp/bob")
    path = _file(bob, exp_id)
    (bob / "experiments" / "gemm").mkdir()
    moved = bob / "experiments" / "gemm" / f"{exp_id}.md"
    git(bob, "mv", str(path), str(moved))
    moved.write_text(moved.read_text().replace("score: 1.08\n", "score: 1.18\n"))
    git(bob, "commit", "-q", "-am", "tidy and tweak")

    checked = run_kexp("validate", "--changed", "origin/main", cwd=bob, process=True)
    said = checked.stdout + checked.stderr
    assert "score-without-note" in said and "moved-file" in said, said
    old, new = path.relative_to(bob).as_posix(), moved.relative_to(bob).as_posix()
    assert f"git mv {new} {old} && git restore --source origin/main -- :/{old}" in said

    advice = said[said.index("put the file back") :]
    _run(bob, _hinted(advice, "mkdir -p", ")"))
    assert sorted((bob / "experiments").rglob(f"{exp_id}*.md")) == [path]
    whole = run_kexp("validate", cwd=bob)
    assert "duplicate-id" not in whole.stdout + whole.stderr, whole.stdout
    fixed = run_kexp("update", exp_id, "--set", "score=1.18", "--reason", "re-timed", cwd=bob)
    assert fixed.returncode == 0, fixed.stderr
    git(bob, "commit", "-q", "-am", "correct alice's score, with the reason")
    again = run_kexp("validate", "--changed", "origin/main", cwd=bob)
    assert "score-without-note" not in again.stdout and "moved-file" not in again.stdout
    assert again.returncode == 0, again.stdout


def test_one_experiment_moved_and_put_back_beside_the_move_is_not_advised_a_new_id(
    tmp_path: Path,
) -> None:
    """A branch moved alice's file to a folder of its own, then the old path was restored
    from main beside it: two files, one id, one experiment. Neither ``kexp validate`` nor
    ``kexp validate --changed`` advises ``kexp re-id`` (a second experiment with the same
    numbers), nor does ``kexp update``'s refusal; their advice keeps one file, and
    followed, no duplicate is left."""
    remote, _ = make_remote(tmp_path)
    alice = person(remote, tmp_path / "alice")
    exp_id = recorded(
        alice,
        *("--summary", "Block swizzle - +8%", "--score", "1.08", "--operator", OPERATOR),
        *("--dtype", "bf16", "--env", "H100"),
    )
    git(alice, "add", "-A")
    git(alice, "commit", "-q", "-m", "alice: swizzle")
    git(alice, "push", "-q", "origin", "main")

    bob = person(remote, tmp_path / "bob")
    git(bob, "checkout", "-q", "-b", "kexp/bob")
    path = _file(bob, exp_id)
    (bob / "experiments" / "gemm").mkdir()
    moved = bob / "experiments" / "gemm" / f"{exp_id}.md"
    git(bob, "mv", str(path), str(moved))
    git(bob, "commit", "-q", "-am", "tidy")
    old = path.relative_to(bob).as_posix()
    git(bob, "restore", "--source", "origin/main", "--", f":/{old}")

    for args in (("validate",), ("validate", "--changed", "origin/main")):
        checked = run_kexp(*args, cwd=bob, process=True)
        said = checked.stdout + checked.stderr
        assert "duplicate-id" in said, said
        assert "re-id" not in said, said
        assert "the same experiment twice" in said, said
    refused = run_kexp("update", exp_id, "--set", "score=1.18", "--reason", "re-timed", cwd=bob)
    assert refused.returncode != 0 and "the same experiment twice" in refused.stderr
    assert "re-id" not in refused.stderr, refused.stderr
    _run(bob, _hinted(said, "mv -f", ")"))
    assert sorted((bob / "experiments").rglob(f"{exp_id}*.md")) == [path]
    whole = run_kexp("validate", cwd=bob)
    assert "duplicate-id" not in whole.stdout + whole.stderr, whole.stdout


def test_an_experiment_removed_then_brought_back_with_another_score_is_a_correction(
    tmp_path: Path,
) -> None:
    """alice's experiment was removed (``kexp rm``) on main; bob's pull request brings it
    back, same id, with another score. Not "1 added, new best": the review and CI's check
    see the removed version corrected (score 1.08 → 1.18, no reason given), ``kexp log``
    shows the re-add's change against the version removed, and the advice (the removed
    version put back, the correction made with its reason) settles it."""
    remote, _ = make_remote(tmp_path)
    alice = person(remote, tmp_path / "alice")
    exp_id = recorded(
        alice,
        *("--summary", "Block swizzle - +8%", "--score", "1.08", "--operator", OPERATOR),
        *("--dtype", "bf16", "--env", "H100"),
    )
    git(alice, "add", "-A")
    git(alice, "commit", "-q", "-m", "alice: swizzle")
    kept = _file(alice, exp_id).read_text()
    relative = _file(alice, exp_id).relative_to(alice).as_posix()
    assert run_kexp("rm", exp_id, "--yes", cwd=alice).returncode == 0
    git(alice, "add", "-A")
    git(alice, "commit", "-q", "-m", "alice: drop swizzle")
    git(alice, "push", "-q", "origin", "main")

    bob = person(remote, tmp_path / "bob")
    git(bob, "checkout", "-q", "-b", "kexp/bob")
    path = bob / relative
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(kept.replace("score: 1.08\n", "score: 1.18\n"))
    git(bob, "add", "-A")
    git(bob, "commit", "-q", "-m", "bring swizzle back")

    log = run_kexp("log", exp_id[:10], cwd=bob).stdout
    assert f"re-added {relative}" in log and "score: 1.08 → 1.18" in log, log
    checked = run_kexp("validate", "--changed", "origin/main", cwd=bob, process=True)
    said = checked.stdout + checked.stderr
    assert "score-without-note" in said and "1.08 → 1.18" in said, said
    review = run_kexp("review", "origin/main", "HEAD", cwd=bob).stdout
    assert "**0 added · 1 corrected · 0 removed**" in review, review
    assert "New best" not in review and "**Score changed without a reason**" in review
    removal = git(bob, "log", "-1", "--format=%h", "--abbrev=12", "origin/main")
    assert f"Brought back after its removal in `{removal}`" in review, review

    _run(bob, _hinted(said, "git restore", ")"))
    assert path.read_text() == kept
    fixed = run_kexp("update", exp_id, "--set", "score=1.18", "--reason", "re-timed", cwd=bob)
    assert fixed.returncode == 0, fixed.stderr
    git(bob, "commit", "-q", "-am", "bring swizzle back, corrected with the reason")
    again = run_kexp("validate", "--changed", "origin/main", cwd=bob)
    assert "score-without-note" not in again.stdout and again.returncode == 0, again.stdout
