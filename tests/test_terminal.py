"""The kexp command as a person at a terminal meets it: help, the pager, tables at 80
columns, colors, refusals and messages that say what happened. A real pseudo-terminal
(the pty module) stands in for the terminal where a TTY matters."""

from __future__ import annotations

import fcntl
import json
import os
import pty
import re
import select
import struct
import subprocess
import sys
import termios
import time
from collections.abc import Callable
from pathlib import Path

import pytest
from conftest import REPO_ROOT, run_kexp
from reportcheck import truth

from kexp import KernelExperiment, Store
from kexp.format.fileformat import key_insight

MakeExperiment = Callable[..., KernelExperiment]
ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")
GREEN = "\x1b[32m"


def in_terminal(
    args: list[str],
    cwd: Path,
    env: dict[str, str] | None = None,
    *,
    rows: int = 24,
    columns: int = 80,
    answer: bytes | None = None,
) -> tuple[int, str]:
    """Run ``kexp ARGS`` in a pseudo-terminal of ``rows`` × ``columns``; its exit status
    and everything it showed there (stdout and stderr together)."""
    full_env = {**os.environ, "TERM": "xterm", **(env or {})}
    for name in ("COLUMNS", "LINES", "NO_COLOR", "PAGER", "KEXP_PAGER", "LESS"):
        if env is None or name not in env:
            full_env.pop(name, None)
    leader, follower = pty.openpty()
    fcntl.ioctl(follower, termios.TIOCSWINSZ, struct.pack("HHHH", rows, columns, 0, 0))
    process = subprocess.Popen(
        [sys.executable, "-m", "kexp", *args],
        cwd=cwd,
        env=full_env,
        stdin=follower,
        stdout=follower,
        stderr=follower,
        close_fds=True,
    )
    os.close(follower)
    chunks: list[bytes] = []
    deadline = time.monotonic() + 60
    answered = answer is None
    while time.monotonic() < deadline:
        ready, _, _ = select.select([leader], [], [], 0.5)
        if not ready:
            if process.poll() is not None:
                break
            continue
        try:
            data = os.read(leader, 65536)
        except OSError:  # EIO: the command exited and closed the terminal
            break
        if not data:
            break
        chunks.append(data)
        if not answered and b"?" in data:
            os.write(leader, answer or b"")
            answered = True
    os.close(leader)
    return process.wait(timeout=30), b"".join(chunks).decode("utf-8", "replace")


def recording_pager(tmp_path: Path) -> tuple[str, Path]:
    """A pager command that keeps what it was given (and the LESS it saw) in a file."""
    record = tmp_path / "paged.json"
    script = tmp_path / "pager.py"
    script.write_text(
        "import json, os, sys\n"
        f"json.dump({{'text': sys.stdin.read(), 'less': os.environ.get('LESS')}}, "
        f"open({str(record)!r}, 'w'))\n"
    )
    return f"{sys.executable} {script}", record


def many_experiments(make_experiment: MakeExperiment, count: int = 40) -> None:
    for number in range(count):
        make_experiment(
            score=0.95 + number / 200,
            change_summary=f"Attempt {number} on the cache kernel - {number / 10:.1f}%",
        )


# --- help ---------------------------------------------------------------------------------


@pytest.mark.parametrize("args", [[], ["skill"]])
def test_bare_command_prints_its_help(args: list[str], tmp_path: Path) -> None:
    done = run_kexp(*args, cwd=tmp_path)
    assert done.returncode == 0 and done.stderr == ""
    help_text = run_kexp(*args, "--help", cwd=tmp_path).stdout
    assert done.stdout == help_text
    lines = done.stdout.splitlines()
    assert lines[0].startswith("Usage: kexp") and "Commands:" in lines
    assert "kexp: error" not in done.stdout


# --- the pager ------------------------------------------------------------------------------


def test_long_output_on_a_terminal_goes_through_the_pager(
    repo: Path, make_experiment: MakeExperiment, tmp_path: Path
) -> None:
    many_experiments(make_experiment)
    pager, record = recording_pager(tmp_path)
    status, shown = in_terminal(["list"], repo, {"KEXP_PAGER": pager})
    assert status == 0
    paged = json.loads(record.read_text())
    assert paged["less"] == "FRX"  # as git: quit if it fits, keep colors, no clearing
    text = ANSI.sub("", paged["text"])
    assert all(f"Attempt {n} on the cache kernel" in text for n in range(40))
    assert "Attempt" not in shown  # all of it went to the pager
    assert GREEN in paged["text"]  # colors kept for the pager (less -R shows them)


def test_pager_choice_and_no_pager(
    repo: Path, make_experiment: MakeExperiment, tmp_path: Path
) -> None:
    many_experiments(make_experiment)
    pager, record = recording_pager(tmp_path)
    status, _ = in_terminal(["list"], repo, {"PAGER": pager, "LESS": "-S"})
    assert status == 0 and json.loads(record.read_text())["less"] == "-S"  # $LESS kept
    record.unlink()
    status, _ = in_terminal(["list"], repo, {"PAGER": "false", "KEXP_PAGER": pager})
    assert status == 0 and record.exists()  # KEXP_PAGER wins
    record.unlink()
    for env, args in (
        ({"KEXP_PAGER": pager}, ["--no-pager", "list"]),
        ({"KEXP_PAGER": "cat"}, ["list"]),
        ({"KEXP_PAGER": "", "PAGER": pager}, ["list"]),
    ):
        status, shown = in_terminal(args, repo, env)
        assert status == 0 and "Attempt 39 on the cache kernel" in shown, env
        assert not record.exists(), env


def test_output_that_fits_or_is_piped_is_not_paged(
    repo: Path, make_experiment: MakeExperiment, tmp_path: Path
) -> None:
    make_experiment()
    pager, record = recording_pager(tmp_path)
    status, shown = in_terminal(["list"], repo, {"KEXP_PAGER": pager})
    assert status == 0 and "Unrolled the inner loop" in shown and not record.exists()
    many_experiments(make_experiment)
    piped = run_kexp("list", cwd=repo, env={"KEXP_PAGER": pager})
    assert piped.returncode == 0 and "Attempt 39" in piped.stdout and not record.exists()


def test_a_pager_that_cannot_start_leaves_the_output_on_the_terminal(
    repo: Path, make_experiment: MakeExperiment
) -> None:
    many_experiments(make_experiment)
    status, shown = in_terminal(["list"], repo, {"KEXP_PAGER": "/nonexistent/pager"})
    assert status == 0
    assert "Attempt 0 on the cache kernel" in shown and "Attempt 39 on the cache" in shown


# --- 80 columns -----------------------------------------------------------------------------


def joined(text: str) -> str:
    return " ".join(text.split())


@pytest.mark.parametrize("command", [["top"], ["list"], ["stats"]])
def test_tables_at_80_columns_keep_kernel_names_and_summaries(command: list[str]) -> None:
    done = run_kexp(*command, cwd=REPO_ROOT, env={"COLUMNS": "80"})
    assert done.returncode == 0
    lines = done.stdout.splitlines()
    assert all(len(line) <= 80 for line in lines), max(lines, key=len)
    facts = truth(REPO_ROOT).values()
    text = joined(done.stdout)
    for fields in facts:
        kernel = fields["operator_sig"].rsplit(": ", 1)[-1]
        if len(kernel) <= 80 - 46:  # what is left beside the id, score, outcome, dtype
            assert kernel in done.stdout, kernel
    if command != ["stats"]:
        for fields in facts:
            if command == ["list"] or fields["outcome"] not in ("buggy", "pending"):
                assert joined(fields["change_summary"]) in text, fields["change_summary"]


def test_a_path_is_cut_from_the_left_and_the_kernel_kept() -> None:
    from kexp.cli.commands.terminal import shorten_operator

    operator = "csrc/kernels/cache_kernels.cu: reshape_and_cache_flash"
    assert shorten_operator(operator, 100) == operator
    assert shorten_operator(operator, 40) == "…che_kernels.cu: reshape_and_cache_flash"
    assert shorten_operator(operator, 25) == "reshape_and_cache_flash"
    assert shorten_operator(operator, 10) == "reshape_a…"
    assert shorten_operator("csrc/deep/path/file.cu", 12) == "…ath/file.cu"


def test_lessons_wrap_key_insights_instead_of_cutting_them() -> None:
    done = run_kexp("lessons", cwd=REPO_ROOT, env={"COLUMNS": "80"})
    assert done.returncode == 0
    assert all(len(line) <= 80 for line in done.stdout.splitlines())
    assert "…" not in done.stdout
    text = joined(done.stdout)
    store = Store(REPO_ROOT)
    lessons = [
        e
        for e in store.list_experiments()
        if e.outcome in ("buggy", "regression", "marginal", "interference")
    ]
    assert lessons
    for exp in lessons:
        assert joined(key_insight(exp.detailed_description)) in text
        assert joined(exp.change_summary) in text


def test_at_80_columns_every_line_fits_and_no_word_is_cut(repo: Path) -> None:
    """An A/A run on a long env and a timed regression, read across refs (a REF column)
    at 80 columns: the A/A line wraps, and ``top`` keeps the outcome and the kernel's
    name whole (a column with no room goes under its row, named)."""
    import random

    env, operator = "H100 SXM5, CUDA 12.4, triton 3.1", "kernels/softmax.py: softmax_kernel"
    for name, seed, scale in (("b", 1, 1.0), ("c", 2, 1.0), ("c2", 3, 1.17)):
        draw = random.Random(seed)
        times = [round(scale * draw.gauss(1, 0.01), 4) for _ in range(15)]
        (repo / f"{name}.json").write_text(json.dumps({"c": times}))
    common = ("--unit", "ms", "--operator", operator, "--dtype", "fp16", "--env", env)
    for summary, candidate, extra in (
        ("A/A control", "c.json", ("--tag", "control", "--description", "x")),
        ("Stage row through smem - regression", "c2.json", ("--description", "x")),
    ):
        done = run_kexp("add", "--summary", summary, "--baseline", "b.json", "--candidate",
                        candidate, *common, *extra, cwd=repo)  # fmt: skip
        assert done.returncode == 0, done.stderr
    for command in (("lessons", "--all-refs"), ("top", "--all-refs"), ("top",)):
        done = run_kexp(*command, cwd=repo, env={"COLUMNS": "80", "KEXP_PAGER": "cat"})
        assert done.returncode == 0, done.stderr
        lines = done.stdout.splitlines()
        assert all(len(line) <= 80 for line in lines), (command, done.stdout)
        assert "…" not in done.stdout, (command, done.stdout)
        if command[0] == "lessons":
            assert env in joined(done.stdout), done.stdout
        else:
            assert "regression" in lines[1] and f"operator: {operator}" in done.stdout


def test_show_fits_its_own_lines_at_80_columns_and_keeps_every_word(repo: Path) -> None:
    """``kexp show`` wrote lines of its own wider than 80 columns at COLUMNS=80 (trial):
    the title, ``result`` lines with counts and IQRs, a long ``file`` path, the ``##
    Samples`` summary. They wrap under their value, no word lost (a path broken after
    a ``/``, the command to read the samples whole); the Markdown body is the user's,
    as written."""
    import random

    draw = random.Random(7)
    base = {f"r{rows}_c1024": [round(draw.gauss(274.1, 40), 3) for _ in range(950)]
            for rows in (64, 128)}  # fmt: skip
    cand = {c: [round(t * 0.683, 3) for t in times[:838]] for c, times in base.items()}
    (repo / "b.json").write_text(json.dumps(base))
    (repo / "c.json").write_text(json.dumps(cand))
    summary = "Vectorized 128-bit loads with a two-stage software pipeline - +46% on r64"
    body = "**Approach**: " + ", ".join(["a line of the user's Markdown, wider than 80"] * 2)
    done = run_kexp("add", "--summary", summary, "--baseline", "b.json", "--candidate",
                    "c.json", "--operator", "csrc/attention/paged_attention_v2_kernels.cu: "
                    "paged_attention_v2_reduce_kernel", "--dtype", "bf16", "--env",
                    "H100 SXM5 80GB, CUDA 12.4, driver 550.54.15, torch 2.4.0, triton 3.0.0",
                    "--protocol", "timer=cuda_events", "--protocol", "warmup=25",
                    "--protocol", "repetitions=950", "--protocol", "l2_flushed=true",
                    "--description", body, "--json", cwd=repo)  # fmt: skip
    assert done.returncode == 0, done.stderr
    exp = Store(repo).get_experiment(json.loads(done.stdout)["id"])
    deep = repo / "csrc" / "attention" / "kernels"
    deep.mkdir(parents=True)
    shown = run_kexp("show", exp.id[:10], cwd=deep, env={"COLUMNS": "80"})
    assert shown.returncode == 0, shown.stderr
    lines = shown.stdout.splitlines()
    assert body in lines  # the Markdown body (raw_result too): the experiment's, as it is
    composed = lines[: lines.index("")] + lines[lines.index("## Samples") :]
    assert [line for line in composed if len(line) > 80] == [], shown.stdout
    text = joined(shown.stdout)
    for said in (summary, exp.operator_sig, exp.env, "cuda_events", *exp.tags):
        assert joined(said) in text, said
    for config in base:
        assert text.count(f"result {config}: ") == 1, text
    assert text.count("IQR") == 2 and "(n 950/838," in text, text
    path = os.path.relpath(exp.path, deep)
    assert len(f"  file      {path}") > 80 and path in "".join(shown.stdout.split())
    assert f"kexp show {exp.id[:10]} --field samples" in shown.stdout  # whole, on one line
    assert "2 configuration(s): 950 / 838 samples (baseline / candidate)" in text
    piped = run_kexp("show", exp.id[:10], cwd=deep)  # piped: one line each, as before
    assert f"  file      {path}" in piped.stdout.splitlines()


def test_show_colors_the_outcome_instead_of_printing_its_escape(repo: Path) -> None:
    done = run_kexp("add", "--summary", "Unroll - +5%", "--score", "1.05", "--operator",
                    "k.cu: k", "--dtype", "bf16", "--env", "H100", "--json", cwd=repo)  # fmt: skip
    exp_id = json.loads(done.stdout)["id"]
    shown = run_kexp("--color", "always", "show", exp_id, cwd=repo)
    (score,) = [line for line in shown.stdout.splitlines() if line.startswith("  score")]
    assert f"({GREEN}improvement\x1b[0m; over the reference)" in score, score
    assert "\\x1b" not in shown.stdout, shown.stdout


# --- colors ----------------------------------------------------------------------------------


def test_outcomes_are_colored_on_a_terminal_unless_no_color(
    repo: Path, make_experiment: MakeExperiment
) -> None:
    make_experiment(score=1.05)
    make_experiment(score=0.5)
    status, shown = in_terminal(["--no-pager", "list"], repo, columns=200)
    assert status == 0
    assert f"{GREEN}improvement" in shown and "\x1b[33mregression" in shown
    for env, args in (({"NO_COLOR": "1"}, ["list"]), ({}, ["--color", "never", "list"])):
        status, shown = in_terminal(["--no-pager", *args], repo, env, columns=200)
        assert status == 0 and "improvement" in shown
        assert ANSI.search(shown) is None, (env, args)
    piped = run_kexp("list", cwd=repo)
    assert "improvement" in piped.stdout and "\x1b" not in piped.stdout
    forced = run_kexp("--color", "always", "list", cwd=repo, env={"NO_COLOR": "1"})
    assert f"{GREEN}improvement" in forced.stdout


def test_severities_are_colored(repo: Path, make_experiment: MakeExperiment) -> None:
    exp = make_experiment()
    assert exp.path is not None
    exp.path.write_text(exp.path.read_text().replace("score: 1.019", "score: high"))
    done = run_kexp("--color", "always", "validate", cwd=repo)
    assert done.returncode == 1
    assert re.search(r": \x1b\[31m\x1b\[1merror\x1b\[0m\[", done.stdout), done.stdout
    plain = run_kexp("validate", cwd=repo)
    assert ": error[" in plain.stdout and "\x1b" not in plain.stdout


# --- refusals and messages -------------------------------------------------------------------


def test_rm_refuses_a_parent_before_asking(
    repo: Path, store: Store, make_experiment: MakeExperiment
) -> None:
    parent = make_experiment()
    child = make_experiment(pid=parent.id)
    combined = make_experiment()
    make_experiment(combines=[combined.id], score=1.5)
    for target in (parent, combined):
        status, shown = in_terminal(["rm", target.id], repo, answer=b"y\n")
        assert status == 1
        assert "Delete" not in shown  # not asked
        assert "--force" in shown and "nothing deleted" in shown
        assert target.path is not None and target.path.exists()
    piped = run_kexp("rm", parent.id, "--yes", cwd=repo)
    assert piped.returncode == 1 and piped.stderr.count("\n") == 1
    assert piped.stderr.startswith("kexp: error: ") and "--force" in piped.stderr
    forced = run_kexp("rm", parent.id, "--yes", "--force", cwd=repo)
    assert forced.returncode == 0 and store.get_experiment(child.id).pid == parent.id


def test_update_that_changes_nothing_says_so_and_writes_nothing(
    repo: Path, make_experiment: MakeExperiment
) -> None:
    exp = make_experiment(score=1.019, tags=["cache"])
    assert exp.path is not None
    before = exp.path.read_bytes()
    done = run_kexp(
        "update",
        exp.id[:8],
        "--set",
        "score=1.019",
        "--set",
        "tags=cache",
        "--reason",
        "re-measured",
        cwd=repo,
    )
    assert done.returncode == 0
    assert done.stdout.startswith(f"nothing changed: {exp.id} already has score, tags")
    assert exp.path.read_bytes() == before  # no correction note appended
    as_json = run_kexp("update", exp.id, "--set", "score=1.019", "--json", cwd=repo)
    assert json.loads(as_json.stdout)["changed"] == []
    changed = run_kexp(
        "update",
        exp.id,
        "--set",
        "score=1.02",
        "--set",
        "tags=cache",
        "--reason",
        "again",
        cwd=repo,
    )
    assert changed.stdout.startswith(f"updated {exp.id}: score")
    assert "Correction" in exp.path.read_text() and "tags" not in changed.stdout


def legacy_database(path: Path, count: int, base_commit: str) -> Path:
    from test_legacy import record

    db = {
        f"{index:016x}": record(f"{index:016x}", base_commit=base_commit) for index in range(count)
    }
    path.write_text(json.dumps(db))
    return path


def test_import_groups_alike_notes_and_exits_1_when_they_need_attention(
    repo: Path, tmp_path: Path
) -> None:
    source = legacy_database(tmp_path / "db.json", 30, "9c1d2e3f4a5b6c7d8e9f0a1b2c3d4e5f6a7b8c9d")
    done = run_kexp("import", str(source), "--dry-run", cwd=repo)
    assert done.returncode == 1
    lines = done.stdout.splitlines()
    assert len(lines) == 2, lines
    assert lines[0].startswith("kept: 30 records (0000000000000000, 0000000000000001, ")
    assert lines[0].endswith("--no-check-commits skips this check")
    assert lines[1].startswith("would import 30")
    verbose = run_kexp("import", str(source), "--dry-run", "-v", cwd=repo)
    assert verbose.returncode == 1 and len(verbose.stdout.splitlines()) == 31
    quiet = run_kexp("import", str(source), "--no-check-commits", cwd=repo)
    assert quiet.returncode == 0, quiet.stdout
    assert quiet.stdout.splitlines() == [
        "imported 30, skipped 0 (already in the store), 0 needing attention of 30"
    ]


def test_empty_jsonl_prints_zero_bytes(repo: Path, make_experiment: MakeExperiment) -> None:
    for args in (["list"], ["top"]):
        done = run_kexp(*args, "--format", "jsonl", cwd=repo)
        assert done.returncode == 0 and done.stdout == ""
    make_experiment()
    done = run_kexp("list", "--format", "jsonl", "--operator", "nothing-like-this", cwd=repo)
    assert done.stdout == ""
    one = run_kexp("list", "--format", "jsonl", cwd=repo)
    assert len(one.stdout.splitlines()) == 1 and one.stdout.endswith("\n")


@pytest.mark.parametrize("args", [["list"], ["export"], ["show", "6abf74e8"], ["tree"]])
def test_a_reader_that_stops_reading_is_no_error(args: list[str]) -> None:
    """``kexp list | head``: once head has its lines nobody reads what kexp prints (here,
    from the start, so that the test does not depend on timing)."""
    reader, writer = os.pipe()
    os.close(reader)
    done = subprocess.run(
        [sys.executable, "-m", "kexp", *args],
        cwd=REPO_ROOT,
        stdout=writer,
        stderr=subprocess.PIPE,
        text=True,
        timeout=120,
    )
    os.close(writer)
    assert done.returncode == 0 and done.stderr == ""


# --- completion, init -------------------------------------------------------------------------


def complete(words: str, cwd: Path) -> list[str]:
    done = subprocess.run(
        [sys.executable, "-m", "kexp"],
        cwd=cwd,
        env={
            **os.environ,
            "_KEXP_COMPLETE": "bash_complete",
            "COMP_WORDS": words,
            "COMP_CWORD": str(len(words.split()) - (0 if words.endswith(" ") else 1)),
        },
        capture_output=True,
        text=True,
        timeout=60,
    )
    return [line.split(",", 1)[1] for line in done.stdout.splitlines() if "," in line]


def test_shell_completion_of_ids_and_outcomes(repo: Path, make_experiment: MakeExperiment) -> None:
    made = [make_experiment(score=1.0 + n / 100) for n in range(3)]
    prefix = made[0].id[:6]
    expected = sorted(e.id for e in made if e.id.startswith(prefix))
    for words in (
        f"kexp show {prefix}",
        f"kexp rm {prefix}",
        f"kexp list --pid {prefix}",
        f"kexp update {prefix}",
    ):
        assert complete(words, repo) == expected, words
    assert complete("kexp list --outcome re", repo) == ["regression"]
    assert "improvement" in complete("kexp top --outcome ", repo)
    assert complete(f"kexp show {prefix}", repo.parent) == []  # no store there: nothing
    readme = (REPO_ROOT / "README.md").read_text()
    assert "_KEXP_COMPLETE=bash_source kexp" in readme and "--outcome" in readme


def test_init_readme_points_at_kexps_readme(tmp_path: Path) -> None:
    done = run_kexp("init", str(tmp_path / "store"), cwd=tmp_path)
    assert done.returncode == 0
    readme = (tmp_path / "store" / "experiments" / "README.md").read_text()
    assert "pypi.org" not in readme and "](http" not in readme
    assert "README" in readme and "kexp --help" in readme
