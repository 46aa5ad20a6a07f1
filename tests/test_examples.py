"""Every example of README.md, the pages of docs/, the skill's SKILL.md and every
command's ``--help`` runs verbatim on the bundled store (issue 28, item 11: agents run
examples as written, so an id in one must exist there, and a note beside a command is a
``#`` comment).

The shell blocks run in bash and the Python blocks in Python, in the order the documents
give them, in one clone of this repository's store with the files the examples name
(the timings, the notes, a code change, a remote to fetch). The few lines that are not
about a store (installing, the test suite, shell start-up files) are listed in
:data:`NOT_RUN` with why; any other line runs.

The help pages' examples (``kexp --help``, and every command's and subcommand's, found by
walking the click command tree) run line by line, each in a scratch copy of that clone of
its own, with the files they name (``kexp new``'s editor, ``gh`` and ``~`` included); the
only example paragraph not run is a configuration file's text (:data:`NOT_COMMANDS`).
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import click
import pytest
from click.testing import CliRunner
from conftest import REPO_ROOT, git, init_repo

from kexp.cli.main import main

#: The README, then docs/ (detail the README links to), then the skill: their examples run
#: in this order in one clone.
DOCUMENTS = [
    REPO_ROOT / "README.md",
    *sorted((REPO_ROOT / "docs").glob("*.md")),
    *sorted((REPO_ROOT / "skill").glob("*/SKILL.md")),
]
#: Lines not run, with why (each must still be in a document: a test checks).
NOT_RUN = {
    'pip install -e ".[test]" && kexp top': "installs kexp",
    "pytest": "the test suite itself",
    'pip install -e ".[dev]"': "installs kexp",
    "pytest -m slow": "the test suite itself",
    "pytest -n 0 tests/test_store.py": "the test suite itself",
    "HYPOTHESIS_PROFILE=explore pytest": "the test suite itself",
    "ruff check kexp kernel_exp_dataclass.py tests bench && mypy": "the linters, run by CI",
    "bash .ci/run": "CI itself",
    "python bench/run.py --sizes 1000,10000": "the benchmark (minutes)",
    'eval "$(_KEXP_COMPLETE=bash_source kexp)"': "a line for a shell's start-up file",
    'eval "$(_KEXP_COMPLETE=zsh_source kexp)"': "a line for a shell's start-up file",
    "_KEXP_COMPLETE=fish_source kexp | source": "a line for a shell's start-up file",
}
#: A record for ``kexp add < iteration.yaml``, as an agent writes one.
ITERATION = """\
change_summary: Unroll head loop by 2 - +0.4%
score: 1.004
operator_sig: 'csrc/kernels/cache_kernels.cu: reshape_and_cache_flash'
dtype_sig: bf16
env: MI300X, ROCm 7.0.0
detailed_description: "**Approach**: unroll 2.\\n\\n**Key insight**: within noise."
"""


def examples(document: Path) -> list[tuple[str, str]]:
    """(language, code) of every shell and Python block, in order."""
    text = document.read_text(encoding="utf-8")
    found = re.findall(r"^```(\w*)\n(.*?)^```", text, re.MULTILINE | re.DOTALL)
    return [(lang, code) for lang, code in found if lang in ("sh", "bash", "python")]


def shell_lines(code: str) -> list[str]:
    """The commands of a shell block: continuations joined, comments dropped."""
    joined = re.sub(r"\\\n\s*", "", code)
    lines = [re.sub(r"\s+#.*$", "", line).strip() for line in joined.splitlines()]
    return [line for line in lines if line and not line.startswith("#")]


#: The baseline times (us) of the bundled experiment the remeasure examples name: a new
#: round is timed like the first (kexp refuses times several times off the earlier ones).
REMEASURED = {"t256_h8_d128": 5.87, "t1024_h8_d128": 8.57, "t4096_h8_d128": 20.44,
              "t4096_h32_d128": 73.95, "t16384_h8_d128": 75.1}  # fmt: skip


def timings(configs: list[str], scale: float) -> str:
    return json.dumps({c: [round(REMEASURED.get(c, 10.0) * scale * (1 + i / 1000), 4)
                           for i in range(5)] for c in configs})  # fmt: skip


@pytest.fixture
def checkout(tmp_path: Path) -> Path:
    """A clone of the bundled store as an agent has it: a remote to fetch, benchmark
    output, notes, and an uncommitted change to the kernel."""
    seed = init_repo(tmp_path / "seed")
    shutil.copytree(REPO_ROOT / "experiments", seed / "experiments")
    git(seed, "add", "experiments")
    git(seed, "commit", "-q", "-m", "the bundled store")
    git(tmp_path, "clone", "-q", "--bare", str(seed), str(tmp_path / "remote.git"))
    root = tmp_path / "work"
    git(tmp_path, "clone", "-q", str(tmp_path / "remote.git"), str(root))
    for key, value in (("user.name", "Agent"), ("user.email", "a@example.com")):
        git(root, "config", key, value)
    bench = root / "bench"
    bench.mkdir()
    # The configurations of the bundled experiment the remeasure example names.
    configs = ["t256_h8_d128", "t1024_h8_d128", "t4096_h8_d128", "t4096_h32_d128",
               "t16384_h8_d128"]  # fmt: skip
    (bench / "baseline.json").write_text(timings(configs, 1.0))
    (bench / "candidate.json").write_text(timings(configs, 0.98))
    (bench / "baseline2.json").write_text(timings(configs, 1.0))
    (bench / "candidate2.json").write_text(timings(configs, 0.985))
    (root / "iteration.yaml").write_text(ITERATION)
    (root / "notes.md").write_text("**Approach**: unroll 4.\n\n**Key insight**: it helps.\n")
    (root / "rocprof.txt").write_text("VGPRs 48 -> 56\n")
    (root / "err.txt").write_text("wrong results against the fp32 reference\n")
    (root / "kernel.cu").write_text("__global__ void k() { /* unrolled by 4 */ }\n")
    return root


def run(
    language: str, code: str, cwd: Path, extra: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    """Run a block in bash (-e, pipefail) or Python, with this repository's kexp first on
    PATH; ``extra`` adds to the environment (a PATH there goes first: stand-in tools)."""
    extra = dict(extra or {})
    environment = {**os.environ, "PYTHONIOENCODING": "utf-8", "COLUMNS": "100"}
    environment.pop("KEXP_ROOT", None)
    environment["PYTHONPATH"] = str(REPO_ROOT)
    first = [extra.pop("PATH")] if "PATH" in extra else []
    environment["PATH"] = os.pathsep.join(
        [*first, str(Path(sys.executable).parent), environment["PATH"]]
    )
    environment.update(extra)
    if language == "python":
        command = [sys.executable, "-c", code]
    else:
        command = ["bash", "-c", "set -eo pipefail\n" + code]
    return subprocess.run(
        command, cwd=cwd, env=environment, capture_output=True, text=True, encoding="utf-8",
        timeout=300,
    )  # fmt: skip


def test_every_example_runs_verbatim_on_the_bundled_store(checkout: Path) -> None:
    skipped: set[str] = set()
    ran = 0
    for document in DOCUMENTS:
        for language, code in examples(document):
            if language != "python":
                lines = shell_lines(code)
                skipped |= {line for line in lines if line in NOT_RUN}
                code = "\n".join(line for line in lines if line not in NOT_RUN)
                if not code:
                    continue
            result = run(language, code, checkout)
            where = f"{document.relative_to(REPO_ROOT)}:\n{code}\n---\n{result.stderr}"
            assert result.returncode == 0, where
            assert "Traceback" not in result.stderr and "internal error" not in result.stderr
            assert "no experiment with id" not in result.stderr, where
            ran += 1
    assert skipped == set(NOT_RUN)  # each line not run is still an example
    assert ran >= 15


def test_every_id_in_the_examples_is_in_the_bundled_store() -> None:
    """An id (a prefix of 10 hex, as listings print them) in any example is a bundled
    experiment's: the check that says which id is wrong."""
    bundled = {p.name[:16] for p in (REPO_ROOT / "experiments").rglob("*.md")}
    for document in DOCUMENTS:
        for _, code in examples(document):
            for prefix in re.findall(r"(?<![0-9a-f])[0-9a-f]{10}(?![0-9a-f])", code):
                assert any(i.startswith(prefix) for i in bundled), (document.name, prefix)


# --- the examples of every command's --help -------------------------------------------

#: The example paragraphs of a help page that are no commands, by page: a file's text.
NOT_COMMANDS = {"kexp mcp": "Example (.mcp.json of a project, for Claude Code):"}
#: ``kexp new``'s editor: fills in what the template leaves empty and saves.
EDITOR = """\
import re, sys
from pathlib import Path

draft = Path(sys.argv[-1])
text = draft.read_text()
for field, value in (("change_summary", "Unroll head loop by 4 - +2%"), ("score", "1.02"),
                     ("operator_sig", "'csrc/cache.cu: reshape_and_cache'"), ("dtype_sig", "bf16")):
    text = re.sub(rf"^{field}:( 0\\.0)?$", f"{field}: {value}", text, count=1, flags=re.M)
draft.write_text(text.replace("**Key insight**: ", "**Key insight**: it hides latency", 1))
"""
#: ``gh``, as the review example calls it: a comment must have a body (the one kexp printed).
GH = """\
#!/bin/sh
for last; do :; done
case "$last" in *"kexp review"*) exit 0 ;; esac
echo "gh: no review in the comment's body" >&2
exit 1
"""


def help_pages() -> list[tuple[str, str]]:
    """(command, its --help as printed) of kexp and every command and subcommand."""
    pages: list[tuple[str, str]] = []

    def walk(command: click.Command, path: list[str]) -> None:
        result = CliRunner().invoke(main, [*path, "--help"], terminal_width=100)
        assert result.exit_code == 0, (path, result.output)
        pages.append((" ".join(["kexp", *path]), result.output))
        if isinstance(command, click.Group):
            context = click.Context(command)
            for name in command.list_commands(context):
                found = command.get_command(context, name)
                assert found is not None, name
                walk(found, [*path, name])

    walk(main, [])
    return pages


def help_examples() -> list[tuple[str, str]]:
    """(command, example) of every help page, in order: the lines of its paragraphs
    headed "Example:" or "Examples:", continuations joined, a ``# note`` left out."""
    found: list[tuple[str, str]] = []
    for page, text in help_pages():
        for header, body in re.findall(r"^  (Examples?\b.*:)\n((?:    .*\n?)+)", text, re.M):
            if NOT_COMMANDS.get(page) == header:
                json.loads(body)  # the file's text, as the header says
                continue
            assert header in ("Example:", "Examples:"), (page, header)
            found += [(page, line) for line in shell_lines(body)]
    return found


def test_every_help_page_has_examples() -> None:
    """The walk finds every command (each page gives examples), so none goes unrun."""
    pages = {page for page, _ in help_pages()}
    assert {"kexp", "kexp show", "kexp skill", "kexp skill install"} <= pages
    assert {page for page, _ in help_examples()} == pages - set(NOT_COMMANDS)


def test_every_id_in_the_help_examples_is_in_the_bundled_store() -> None:
    """An id (a prefix of 10 hex, as listings print them) or a file name in a help
    example is a bundled experiment's: the check that says which id is wrong."""
    bundled = {p.name[:16] for p in (REPO_ROOT / "experiments").rglob("*.md")}
    for page, line in help_examples():
        for prefix in re.findall(r"(?<![0-9a-f])[0-9a-f]{10,16}(?![0-9a-f])", line):
            assert any(i.startswith(prefix) for i in bundled), (page, line)
        for path in re.findall(r"experiments/\S+\.md", line):  # a glob as a shell has it
            assert len(list(REPO_ROOT.glob(path))) == 1, (page, line)


def test_a_note_beside_a_help_example_is_a_comment() -> None:
    """A note after a command is a ``# comment``, so the line pasted into a shell runs:
    no words after a run of spaces (an aligned note without its '#')."""
    for page, line in help_examples():
        assert not re.search(r"\S {2,}\S", line), (page, line)


@pytest.fixture
def help_checkout(checkout: Path, tmp_path: Path) -> tuple[Path, dict[str, str]]:
    """The checkout with the files the help examples name (timings, a record, a diff, a
    log, the predecessor's database in ~), and the environment they run in: a home of
    their own, an editor for kexp new, a stand-in for gh."""
    bench = checkout / "bench"
    # The configurations of the bundled experiment kexp remeasure's example names.
    configs = list(json.loads((bench / "baseline.json").read_text()))
    (bench / "base.json").write_text(timings(configs, 1.0))
    (bench / "cand.json").write_text(timings(configs, 0.98))
    (bench / "base2.json").write_text(timings(configs, 1.0))
    (bench / "cand2.json").write_text(timings(configs, 0.985))
    (checkout / "experiment.yaml").write_text(ITERATION)
    (checkout / "bench.log").write_text("t256_h8_d128: 10.01 us -> 9.81 us\n")
    (checkout / "change.diff").write_text(
        "--- a/csrc/kernels/cache_kernels.cu\n+++ b/csrc/kernels/cache_kernels.cu\n"
        "@@ -1 +1 @@\n-  const int64_t slot_idx = slot_mapping[token_idx];\n"
        "+  const int64_t slot_idx = __builtin_amdgcn_readfirstlane(slot_mapping[token_idx]);\n"
    )
    home = tmp_path / "home"
    home.mkdir()
    record = {
        "id": "6b0c1d2e3f405162", "pid": "", "score": 1.0112, "raw_result": "", "dtype_sig": "bf16",
        "env": "MI300X, ROCm 7.0.0", "is_buggy": False, "error_message": "",
        "change_summary": "Vectorized key store with 16-byte writes - +1.12%",
        "detailed_description": "**Approach**: uint4 stores.\n\n**Key insight**: alignment.",
        "code_change": "", "base_commit": git(checkout, "rev-parse", "HEAD"),
        "operator_sig": "csrc/kernels/cache_kernels.cu: reshape_and_cache_flash",
        "profiling_info": "", "status": "done", "created_at": "2026-10-02T09:11:03.001007Z",
    }  # fmt: skip
    database = json.dumps({record["id"]: record}, indent=2, sort_keys=True)
    (home / "kernel_experiments_db.json").write_text(database)
    tools = tmp_path / "tools"
    tools.mkdir()
    (tools / "editor.py").write_text(EDITOR)
    (tools / "gh").write_text(GH)
    (tools / "gh").chmod(0o755)
    editor = f"{sys.executable} {tools / 'editor.py'}"
    return checkout, {"HOME": str(home), "EDITOR": editor, "PATH": str(tools)}


def test_every_help_example_runs_verbatim_on_the_bundled_store(
    help_checkout: tuple[Path, dict[str, str]], tmp_path: Path
) -> None:
    """Each example line of each --help, as written (less its # note), exits 0 in a
    scratch copy of the checkout of its own: what one writes (rm, update, sync, fmt,
    migrate-layout) no other reads, whatever the order."""
    checkout, environment = help_checkout
    failures = []
    examples_run = help_examples()
    for number, (page, line) in enumerate(examples_run):
        scratch = tmp_path / "runs" / str(number)
        shutil.copytree(checkout, scratch, symlinks=True)
        result = run("sh", line, scratch, environment)
        problems = [
            what
            for what, bad in (
                (f"exit {result.returncode}", result.returncode != 0),
                ("a traceback", "Traceback" in result.stderr),
                ("an internal error", "internal error" in result.stderr),
                ("an error", "kexp: error" in result.stderr),
            )
            if bad
        ]
        if problems:
            failures.append(f"{page} --help: {line}\n  {', '.join(problems)}: {result.stderr}")
    assert not failures, f"{len(failures)} of {len(examples_run)} failed:\n" + "\n".join(failures)
    assert len(examples_run) >= 60
