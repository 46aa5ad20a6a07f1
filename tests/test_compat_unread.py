"""The predecessor's reads on a fresh clone whose teammates' experiments are on fetched
branches only (trial O, O08): agent A synced its campaign to ``origin/kexp/agentA``;
agent B cloned and called ``kernel_exp_dataclass.top_experiments()``, got ``[]`` and no
word that fetched branches held experiments it did not read, where ``kexp context``
says so. The return values stay the predecessor's (COMPAT.md); a warning, the way the
old module tells its callers things, says what ``kexp context`` says, once."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest
from conftest import git, run_kexp
from test_compat import run_python
from test_sync import clone, make_remote

#: The agent's script: every read of the old module, twice (one process).
READS = """\
import warnings
warnings.simplefilter("always")
import kernel_exp_dataclass as k
print(k.top_experiments(5), k.list_experiments(), k.top_experiments(5))
"""


def add(root: Path, summary: str, score: float) -> str:
    done = run_kexp(
        "add", "--json", "--summary", summary, "--score", str(score), "--status", "done",
        "--operator", "k.py: fused_attention_fwd", "--dtype", "bf16", "--env", "H100",
        "--measured-against", "reference", cwd=root,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    return str(json.loads(done.stdout)["id"])


def warned(result: subprocess.CompletedProcess[str]) -> list[str]:
    assert result.returncode == 0, result.stderr
    assert "Traceback" not in result.stderr, result.stderr
    return [line for line in result.stderr.splitlines() if "KexpWarning" in line]


@pytest.fixture
def clones(tmp_path: Path) -> tuple[Path, Path, list[str]]:
    """(A, B, A's ids): A's two experiments synced to kexp/agentA; B a fresh clone."""
    remote, _ = make_remote(tmp_path)
    a = clone(remote, tmp_path / "a")
    ids = [add(a, "Tiling 128x64 - +15%", 1.15), add(a, "BLOCK_N 64 -> 128 - +10%", 1.1)]
    synced = run_kexp("sync", "--branch", "kexp/agentA", cwd=a, process=True)
    assert synced.returncode == 0, synced.stderr
    return a, clone(remote, tmp_path / "b"), ids


def test_reads_on_a_fresh_clone_say_once_what_fetched_branches_hold(
    clones: tuple[Path, Path, list[str]],
) -> None:
    _, b, _ = clones
    result = run_python(READS, b)
    assert result.stdout.splitlines() == ["[] [] []"]  # the predecessor's answers
    (line,) = warned(result)  # once, though the script reads three times
    assert "kernel_exp_dataclass: top_experiments() read this checkout's files alone" in line
    # the line kexp context prints, word for word
    context = run_kexp("context", "--operator", "fused_attention_fwd", cwd=b, process=True)
    (unread,) = [s for s in context.stdout.splitlines() if s.startswith("not read: ")]
    assert "(origin/kexp/agentA: 2); read across refs: add --all-refs" in unread
    assert unread in line
    assert f"kexp.Store({str(b.resolve())!r}, all_refs=True)" in line


def test_nothing_is_said_where_every_fetched_experiment_is_merged(
    clones: tuple[Path, Path, list[str]],
) -> None:
    _, b, _ = clones
    git(b, "merge", "-q", "--ff-only", "origin/kexp/agentA")
    result = run_python(READS, b)
    assert warned(result) == []
    assert result.stdout.count("Tiling 128x64") == 3


def test_an_id_only_a_fetched_branch_holds_is_none_with_where_it_is(
    clones: tuple[Path, Path, list[str]],
) -> None:
    _, b, ids = clones
    code = (
        "import warnings; warnings.simplefilter('always')\n"
        "import kernel_exp_dataclass as k\n"
        f"print(k.get_experiment({ids[0]!r}))\n"
    )
    result = run_python(code, b)
    assert result.stdout.splitlines() == ["None"]
    (general, where) = warned(result)
    assert "not read: 2 experiment file(s)" in general
    assert f"get_experiment({ids[0]!r}) is None in this checkout's files" in where
    assert "on origin/kexp/agentA, not in your working tree" in where
    assert "git restore --source origin/kexp/agentA" in where
    # An id no branch holds: None, and nothing more than the line above.
    missing = run_python(code.replace(ids[0], "0123456789abcdef"), b)
    assert missing.stdout.splitlines() == ["None"]
    assert len(warned(missing)) == 1


def test_a_write_to_an_id_only_a_fetched_branch_holds_says_how_to_bring_it_in(
    clones: tuple[Path, Path, list[str]],
) -> None:
    _, b, ids = clones
    for call in (f"update_experiment({ids[0]!r}, tags=['x'])", f"delete_experiment({ids[0]!r})"):
        code = (
            "import kernel_exp_dataclass as k\n"
            f"try:\n    k.{call}\nexcept KeyError as e:\n    print('KeyError', e.args[0])\n"
        )
        result = run_python(code, b)
        assert result.returncode == 0, result.stderr
        assert result.stdout.startswith(f"KeyError experiment {ids[0]} is on origin/kexp/agentA")
        assert "git restore --source origin/kexp/agentA" in result.stdout, (call, result.stdout)
    assert not list((b / "experiments").rglob(f"{ids[0]}-*.md"))  # nothing written


def test_nothing_is_said_once_the_advised_restore_brought_them_in(
    clones: tuple[Path, Path, list[str]],
) -> None:
    """Trial T, T06: after ``git restore --source origin/kexp/agentA`` (the advice of
    get_experiment, uncommitted) the working tree holds A's files as the branch does:
    every new process still warned they were not read, while returning them."""
    _, b, ids = clones
    git(b, "restore", "--source", "origin/kexp/agentA", "--", "experiments")
    result = run_python(READS, b)
    assert warned(result) == []
    assert result.stdout.count("Tiling 128x64") == 3 and ids[1] in result.stdout
