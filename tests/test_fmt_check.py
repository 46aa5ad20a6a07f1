"""``kexp fmt --check`` in CI: a valid file that is not as kexp writes it (two lines of
its front-matter swapped by hand) fails the step, which says what fixes it, in the log
and, with ``--format github``, as an annotation on the file. Real processes, as a CI job
runs them, in a real git repository."""

from __future__ import annotations

import os
import re
import shlex
from collections.abc import Callable
from pathlib import Path

from conftest import run_kexp

from kexp import KernelExperiment


def swapped(exp: KernelExperiment) -> Path:
    """The experiment's file with its ``status:`` and ``score:`` lines swapped."""
    assert exp.path is not None
    return swap_lines(exp.path)


def swap_lines(path: Path) -> Path:
    """The file ``path`` with its ``status:`` and ``score:`` lines swapped."""
    lines = path.read_text(encoding="utf-8").split("\n")
    status = next(i for i, line in enumerate(lines) if line.startswith("status:"))
    score = next(i for i, line in enumerate(lines) if line.startswith("score:"))
    lines[status], lines[score] = lines[score], lines[status]
    path.write_text("\n".join(lines), encoding="utf-8")
    return path


def test_a_failed_check_says_to_run_kexp_fmt_and_that_fixes_it(
    repo: Path, make_experiment: Callable[..., KernelExperiment]
) -> None:
    """The step failed with only the path and "1 file(s) would be reformatted": the
    reader of the log had to know kexp to fix it. The last line says the command; run
    as printed, the next check passes."""
    make_experiment()
    path = swapped(make_experiment(change_summary="Vectorized stores - +2%"))
    checked = run_kexp("fmt", "--check", cwd=repo, process=True)
    assert checked.returncode == 1, checked.stderr
    assert checked.stdout.split() == [path.relative_to(repo).as_posix()], checked.stdout
    said = checked.stderr.strip().splitlines()[-1]
    advised = re.fullmatch(
        r"1 file\(s\) would be reformatted, 1 already canonical: run (kexp fmt) to "
        r"rewrite it in canonical form",
        said,
    )
    assert advised is not None, checked.stderr
    done = run_kexp(*shlex.split(advised.group(1))[1:], cwd=repo, process=True)
    assert done.returncode == 0, done.stderr
    again = run_kexp("fmt", "--check", cwd=repo, process=True)
    assert again.returncode == 0 and "run kexp fmt" not in again.stderr, again.stderr


def test_a_failed_check_in_a_github_workflow_annotates_the_file(
    repo: Path, make_experiment: Callable[..., KernelExperiment]
) -> None:
    """``--format github``, as ``kexp validate`` has: one workflow annotation per file
    not in canonical form, naming it and the command that fixes it; the exit code as
    without it."""
    make_experiment()
    path = swapped(make_experiment(change_summary="Vectorized stores - +2%"))
    shown = path.relative_to(repo).as_posix()
    checked = run_kexp("fmt", "--check", "--format", "github", cwd=repo, process=True)
    assert checked.returncode == 1, checked.stderr
    assert checked.stdout.splitlines() == [
        f"::error file={shown},line=1,col=1,title=kexp not-canonical::[not-canonical] not in "
        f"the canonical form kexp writes (hint: run kexp fmt {shown})"
    ], checked.stdout
    assert run_kexp("fmt", cwd=repo, process=True).returncode == 0
    clean = run_kexp("fmt", "--check", "--format", "github", cwd=repo, process=True)
    assert clean.returncode == 0 and clean.stdout == "", clean.stdout


def test_the_command_a_failed_check_gives_repeats_root_and_runs_from_where_the_user_is(
    repo: Path, tmp_path: Path, make_experiment: Callable[..., KernelExperiment]
) -> None:
    """The user, in another folder, checks the store with ``--root``: the command the
    last line gives and the annotation's hint said ``kexp fmt`` alone, which from there
    finds no store. Each repeats ``--root`` as given, and the last line's, run as
    printed from that folder, fixes the file."""
    make_experiment()
    path = swapped(make_experiment(change_summary="Vectorized stores - +2%"))
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    root = os.path.relpath(repo, elsewhere)
    checked = run_kexp("--root", root, "fmt", "--check", cwd=elsewhere, process=True)
    assert checked.returncode == 1, checked.stderr
    advised = re.search(r": run (.+) to rewrite it in canonical form$", checked.stderr.strip())
    assert advised is not None, checked.stderr
    done = run_kexp(*shlex.split(advised.group(1))[1:], cwd=elsewhere, process=True)
    assert done.returncode == 0, done.stderr
    assert run_kexp("fmt", "--check", cwd=repo, process=True).returncode == 0

    swap_lines(path)
    annotated = run_kexp(
        "fmt", "--check", "--format", "github", "--root", root, cwd=elsewhere, process=True
    )
    hint = re.search(r"\(hint: run (.+)\)$", annotated.stdout.strip())
    assert hint is not None, annotated.stdout
    fixed = run_kexp(*shlex.split(hint.group(1))[1:], cwd=elsewhere, process=True)
    assert fixed.returncode == 0, fixed.stderr
    assert run_kexp("fmt", "--check", cwd=repo, process=True).returncode == 0
