"""Every example of README.md and the skill's SKILL.md runs verbatim on the bundled store
(issue 28, item 11: agents run examples as written, so an id in one must exist there).

The shell blocks run in bash and the Python blocks in Python, in the order the documents
give them, in one clone of this repository's store with the files the examples name
(the timings, the notes, a code change, a remote to fetch). The few lines that are not
about a store (installing, the test suite, shell start-up files) are listed in
:data:`NOT_RUN` with why; any other line runs.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import REPO_ROOT, git, init_repo

DOCUMENTS = [REPO_ROOT / "README.md", *sorted((REPO_ROOT / "skill").glob("*/SKILL.md"))]
#: Lines not run, with why (each must still be in a document: a test checks).
NOT_RUN = {
    'pip install -e ".[test]" && kexp top': "installs kexp",
    "pytest": "the test suite itself",
    'pip install -e ".[dev]"': "installs kexp",
    "pytest -m slow": "the test suite itself",
    "pytest -n 0 tests/test_store.py": "the test suite itself",
    "HYPOTHESIS_PROFILE=explore pytest": "the test suite itself",
    "ruff check kexp tests && mypy": "the linters, run by CI",
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


def timings(configs: list[str], scale: float) -> str:
    return json.dumps({c: [round(10.0 * scale * (1 + i / 1000), 4) for i in range(5)]
                       for c in configs})  # fmt: skip


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


def run(language: str, code: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    environment = {**os.environ, "PYTHONIOENCODING": "utf-8", "COLUMNS": "100"}
    environment.pop("KEXP_ROOT", None)
    environment["PYTHONPATH"] = str(REPO_ROOT)
    environment["PATH"] = os.pathsep.join([str(Path(sys.executable).parent), environment["PATH"]])
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
