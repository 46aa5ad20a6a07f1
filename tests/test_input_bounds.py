"""Endless and huge inputs (issue 28, item 8): every input a user gives kexp (timings,
a document, a description, a diff, a predecessor database, standard input) is read
with a bound (:func:`kexp.core.inputs.read_input`) and refused in one line, never by
``MemoryError``, and nothing is written.

Each case runs ``kexp`` as a real process under a 1.5 GiB address-space limit, so that
a reader without a bound fails fast (``MemoryError``) instead of filling the machine.
"""

from __future__ import annotations

import os
import resource
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import experiment_fields

from kexp import Store

#: The address space of each kexp process (bytes).
MEMORY_LIMIT = 1536 << 20
#: Larger than any bound (a sparse file: no disk used).
HUGE = 5 << 30
ZERO = "/dev/zero"


def limited() -> None:
    resource.setrlimit(resource.RLIMIT_AS, (MEMORY_LIMIT, MEMORY_LIMIT))


def run(repo: Path, args: list[str], stdin: str | None = None) -> subprocess.CompletedProcess[str]:
    environment = {**os.environ, "PYTHONPATH": str(Path(__file__).parent.parent)}
    with open(stdin or os.devnull, "rb") as given:
        return subprocess.run(
            [sys.executable, "-m", "kexp", "--root", str(repo), *args],
            stdin=given, capture_output=True, text=True, env=environment, timeout=120,
            preexec_fn=limited,
        )  # fmt: skip


def huge_file(folder: Path, name: str, size: int) -> str:
    """A sparse file of ``size`` bytes (no disk used)."""
    path = folder / name
    with open(path, "wb") as f:
        f.truncate(size)
    return str(path)


ADD = ["add", "--summary", "Unroll - +2%", "--operator", "k.cu", "--dtype", "bf16", "--env", "X"]
SMALL = '{"b8": 10.0}\n'


def cases(repo: Path, exp_id: str, big: str, small: str) -> dict[str, tuple[list[str], str | None]]:
    """(arguments, standard input) of each way to give kexp an input, reading ``big``."""
    return {
        "add --baseline": ([*ADD, "--baseline", big, "--candidate", small], None),
        "add --candidate": ([*ADD, "--baseline", small, "--candidate", big], None),
        "add --table": ([*ADD, "--table", big], None),
        "add --description-file": ([*ADD, "--score", "1.02", "--description-file", big], None),
        "add --diff-file": ([*ADD, "--score", "1.02", "--diff-file", big], None),
        "add --file": (["add", "--file", big], None),
        "add --description-file -": ([*ADD, "--score", "1.02", "--description-file", "-"], big),
        "add < stdin": (["add"], big),
        "update --set-file": (["update", exp_id, "--set-file", f"raw_result={big}"], None),
        "remeasure --baseline": (
            ["remeasure", exp_id, "--baseline", big, "--candidate", small],
            None,
        ),
        "context --diff": (["context", "--operator", "cache", "--diff", big], None),
        "context --diff -": (["context", "--operator", "cache", "--diff", "-"], big),
        "similar --diff": (["similar", "--diff", big], None),
        "import": (["import", big], None),
    }


NAMES = list(cases(Path(), "", "", ""))


@pytest.fixture
def setting(repo: Path, store: Store, tmp_path: Path) -> tuple[str, Path, dict[str, bytes]]:
    exp = store.create_experiment(**experiment_fields())
    small = tmp_path / "small.json"
    small.write_text(SMALL)
    files = {str(p): p.read_bytes() for p in (repo / "experiments").rglob("*.md")}
    return exp.id, small, files


@pytest.mark.parametrize("name", NAMES)
@pytest.mark.parametrize("endless", [True, False], ids=["dev-zero", "huge-file"])
def test_an_endless_or_huge_input_is_refused_in_one_line(
    repo: Path, tmp_path: Path, setting: tuple[str, Path, dict[str, bytes]], name: str,
    endless: bool,
) -> None:  # fmt: skip
    exp_id, small, files = setting
    big = ZERO if endless else huge_file(tmp_path, "huge.json", HUGE)
    args, stdin = cases(repo, exp_id, big, str(small))[name]
    result = run(repo, args, stdin)
    assert result.returncode == 2, result.stderr
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("kexp: error: "), result.stderr
    assert "MemoryError" not in result.stderr
    assert "limit" in lines[0] or "not a file" in lines[0]
    now = {str(p): p.read_bytes() for p in (repo / "experiments").rglob("*.md")}
    assert now == files  # nothing written


def test_inputs_within_the_bound_still_read(repo: Path, store: Store, tmp_path: Path) -> None:
    """The bound refuses only what is over it: a timing file and a FIFO are read."""
    base, cand = tmp_path / "base.json", tmp_path / "cand.json"
    base.write_text('{"b8": 10.0, "b16": 20.0}\n')
    cand.write_text('{"b8": 9.0, "b16": 19.0}\n')
    fifo = tmp_path / "description.fifo"
    os.mkfifo(fifo)
    writer = subprocess.Popen(["sh", "-c", f"printf 'from a pipe' > '{fifo}'"])
    result = run(
        repo,
        [*ADD, "--baseline", str(base), "--candidate", str(cand), "--description-file", str(fifo)],
    )
    writer.wait(timeout=60)
    assert result.returncode == 0, result.stderr
    (exp,) = store.list_experiments()
    assert exp.detailed_description == "from a pipe" and exp.score > 1


def test_the_bound_is_exact_and_every_refusal_says_why(tmp_path: Path) -> None:
    from kexp.core.errors import InputError
    from kexp.core.inputs import read_input, read_input_text

    at = tmp_path / "at.txt"
    at.write_bytes(b"x" * 1000)
    assert read_input(at, limit=1000) == b"x" * 1000
    with pytest.raises(InputError, match=r"the table \(.*at.txt\) is 1000 bytes, over the 999"):
        read_input(at, "the table", limit=999)
    # A pipe that never ends: refused one byte past the bound.
    fifo = tmp_path / "endless.fifo"
    os.mkfifo(fifo)
    writer = subprocess.Popen(["sh", "-c", f"yes > '{fifo}'"], stderr=subprocess.DEVNULL)
    try:
        with pytest.raises(InputError, match="is over the 1 KiB limit of an input"):
            read_input(fifo, limit=1024)
    finally:
        writer.kill()
        writer.wait()
    with pytest.raises(InputError, match="not a file but a device"):
        read_input(ZERO)
    with pytest.raises(InputError, match="it is a folder"):
        read_input(tmp_path)
    with pytest.raises(InputError, match="No such file"):
        read_input(tmp_path / "missing.json")
    bad = tmp_path / "latin1.csv"
    bad.write_bytes(b"config,time\nb\xe9,1\n")
    with pytest.raises(InputError, match=r"not UTF-8 text \(byte 0xe9 at offset 13\)"):
        read_input_text(bad)
    assert read_input_text(bad, errors="replace").endswith("b\ufffd,1\n")
