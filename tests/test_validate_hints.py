"""``kexp validate``'s text names a hint once where many problems share it: the bundled
store's 16 experiments, their commits not in the clone, printed the same three-line
``git fetch`` hint 16 times, each with its own commit. The first says it; the others
point up to it; ``--format json`` and ``--format github`` keep each problem whole.
Real processes, in a real git repository."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

from conftest import run_kexp

from kexp import KernelExperiment

#: Commits no repository of the test holds.
UNKNOWN = (
    "1a9ce95259021eed91a300ccc29993b07972a923",
    "75530935b5c1051a908209e2b690bc27e74a8a05",
    "abcdefabcdefabcdefabcdefabcdefabcdefabcd",
)  # fmt: skip  (one with no digit)


def unknown_bases(make_experiment: Callable[..., KernelExperiment]) -> list[KernelExperiment]:
    """Three experiments, each on a commit the repository lacks (made in another clone)."""
    made = []
    for at, commit in enumerate(UNKNOWN):
        exp = make_experiment(change_summary=f"Unrolled by {2 + at} - +1%")
        assert exp.path is not None
        text = exp.path.read_text(encoding="utf-8")
        here = f"base_commit: {exp.base_commit}\n"
        assert here in text
        exp.path.write_text(text.replace(here, f"base_commit: {commit}\n", 1))
        made.append(exp)
    return made


def test_a_hint_many_problems_share_is_printed_once(
    repo: Path, make_experiment: Callable[..., KernelExperiment]
) -> None:
    unknown_bases(make_experiment)
    checked = run_kexp("validate", cwd=repo, process=True)
    assert checked.returncode == 0, checked.stderr  # (warnings)
    lines = checked.stdout.splitlines()
    warned = [line for line in lines if "warning[base-commit-unknown]" in line]
    assert sorted(c for c in UNKNOWN if any(c in line for line in warned)) == sorted(UNKNOWN)
    assert len(warned) == 3, checked.stdout
    hints = [line for line in lines if line.startswith("  hint: ")]
    assert len(hints) == 1, checked.stdout
    first = lines.index(warned[0])
    assert lines[first + 1] == hints[0]
    assert "git fetch origin" in hints[0], hints[0]
    assert lines[first + 2] == (
        "  (the same hint, with their own values, for the 2 other base-commit-unknown "
        "problem(s) below)"
    ), checked.stdout
    assert checked.stderr.strip() == "3 file(s) checked: 0 error(s), 3 warning(s)"

    problems = json.loads(run_kexp("validate", "--format", "json", cwd=repo).stdout)
    assert len(problems) == 3
    for problem in problems:  # each whole, with its own commit
        (commit,) = [c for c in UNKNOWN if c in problem["message"]]
        assert f"git fetch origin {commit}" in problem["hint"], problem
    annotations = run_kexp("validate", "--format", "github", cwd=repo).stdout.splitlines()
    assert len(annotations) == 3
    for line in annotations:
        (commit,) = {c for c in UNKNOWN if c in line}
        assert f"(hint: fetch the commit if a remote holds it (git fetch origin {commit}" in line


def test_hints_that_differ_are_each_printed(
    repo: Path, make_experiment: Callable[..., KernelExperiment]
) -> None:
    """Two problems of one kind whose hints differ beyond their own values (a wrong type
    in two fields) each keep their hint."""
    exp = make_experiment()
    assert exp.path is not None
    text = exp.path.read_text(encoding="utf-8")
    text = text.replace("score: 1.019", "score: fast")
    text = text.replace("dtype_sig: bf16", "dtype_sig: [bf16]")
    exp.path.write_text(text, encoding="utf-8")
    checked = run_kexp("validate", cwd=repo, process=True)
    assert checked.returncode == 1
    assert checked.stdout.count("\n  hint: ") == 2, checked.stdout
    assert "the same hint" not in checked.stdout
