"""A corpus of bad experiment files: each is reported at the right line, with a hint.

The single files live in ``tests/corpus/bad/`` (``expected.json`` names the problem each
must produce); problems of a store (several files) and a file too large to keep in the
repository are built here.

Every case is checked twice: in the library (``kexp.validate.check_bytes``, or the store
for store-wide problems) and through the real command, ``python -m kexp validate PATH``
in a subprocess on a store in a temporary folder: exit code 1, a ``path:line:col:
error[code]`` line, a ``hint:`` line, and never a traceback. The commands of the corpus
run in parallel (one process per case) to keep the suite fast.
"""

from __future__ import annotations

import dataclasses
import json
import subprocess
import time
from pathlib import Path

import pytest

from kexp import Store
from kexp.problems import Problem
from kexp.settings import DEFAULT_SETTINGS
from kexp.validate import check_bytes, read_and_check
from tests.conftest import run_kexp

ID = "6749f3a0c2d41e7b"
OTHER = "6749f3a1d4e5f6a7"
NAME = f"experiments/2026/11/{ID}-unrolled.md"

#: A valid experiment; its front-matter lines are numbered in the comments below.
GOOD = f"""\
---
id: {ID}
pid: ''
change_summary: Unrolled the inner loop by 4 - +1.90%
score: 1.019
status: done
is_buggy: false
operator_sig: 'csrc/kernels/cache_kernels.cu: reshape_and_cache_flash'
dtype_sig: bf16
env: MI300X, ROCm 7.0.0
base_commit: 3f2c9e1a7b8d4c6e5f0a1b2c3d4e5f6a7b8c9d0e
created_at: '2026-11-29T15:52:36Z'
---

## Detailed description

**Approach**: unroll by 4.

## Raw result

Iteration 1 Results - SUCCESS
"""
# Line numbers in GOOD: 2 id, 3 pid, 4 change_summary, 5 score, 6 status, 7 is_buggy,
# 8 operator_sig, 9 dtype_sig, 10 env, 11 base_commit, 12 created_at, 13 closing ---.


def sub(old: str, new: str, text: str = GOOD) -> str:
    """``text`` with one exact piece replaced (the piece must be there)."""
    assert text.count(old) == 1, old
    return text.replace(old, new)


def with_id(exp_id: str, pid: str = "") -> str:
    text = sub(f"id: {ID}", f"id: {exp_id}")
    return sub("pid: ''", f"pid: {pid}" if pid else "pid: ''", text)


BILLION_LAUGHS = (
    f"---\nid: {ID}\n"
    'a: &a ["lol","lol","lol","lol","lol","lol","lol","lol","lol"]\n'
    + "".join(
        f"{name}: &{name} [{', '.join([f'*{prev}'] * 9)}]\n"
        for prev, name in zip("abcdefgh", "bcdefghi", strict=True)
    )
    + "---\n"
)


@dataclasses.dataclass
class Case:
    """One bad store: its files, the file to validate, and the problem expected there."""

    name: str
    files: dict[str, bytes]
    code: str
    line: int
    column: int | None = None
    target: str = NAME
    #: Found only when the whole store is checked (Store.validate), not in one file.
    store_wide: bool = False


def case(name: str, text: str | bytes, code: str, line: int, column: int | None = None) -> Case:
    data = text.encode() if isinstance(text, str) else text
    return Case(name, {NAME: data}, code, line, column)


#: The corpus: one bad file per kind of problem (tests/corpus/bad/*.md), and in
#: expected.json the problem each must produce (code, line, column), what it is about,
#: and where it lies in the store (``path``, default NAME).
CORPUS = Path(__file__).parent / "corpus" / "bad"
EXPECTED = json.loads((CORPUS / "expected.json").read_text(encoding="utf-8"))
CORPUS_CASES = [
    Case(
        name.removesuffix(".md"),
        {entry.get("path", NAME): (CORPUS / name).read_bytes()},
        entry["code"],
        entry["line"],
        entry.get("column"),
        target=entry.get("path", NAME),
    )
    for name, entry in EXPECTED.items()
]

CASES = [
    *CORPUS_CASES,
    Case(
        "pid-nowhere",
        {NAME: with_id(ID, pid="0000000000000000").encode()},
        "dangling-pid",
        3,
        1,
        store_wide=True,
    ),
    Case(
        "lineage-cycle",
        {
            NAME: with_id(ID, pid=OTHER).encode(),
            f"experiments/2026/11/{OTHER}-other.md": with_id(OTHER, pid=ID).encode(),
        },
        "lineage-cycle",
        3,
        1,
        store_wide=True,
    ),
    Case(
        "duplicate-id",
        {NAME: GOOD.encode(), f"experiments/2026/12/{ID}-merged-from-a-branch.md": GOOD.encode()},
        "duplicate-id",
        2,
        1,
        store_wide=True,
    ),
    # Generated: a corpus file of 4 MB has no place in the repository.
    Case(
        "file-too-large",
        {NAME: (GOOD + "x" * DEFAULT_SETTINGS.max_file_bytes).encode()},
        "file-too-large",
        1,
        1,
    ),
]


def make_store(root: Path, files: dict[str, bytes]) -> Path:
    (root / "experiments").mkdir(parents=True)
    for relative, data in files.items():
        path = root / relative
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(data)
    return root


def kexp_validate(root: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """The real command, run in the store (``KEXP_ROOT`` pins it there)."""
    return run_kexp("validate", *args, cwd=root, env={"KEXP_ROOT": str(root), "NO_COLOR": "1"})


@pytest.fixture(scope="module")
def command_results(
    tmp_path_factory: pytest.TempPathFactory,
) -> dict[str, subprocess.CompletedProcess[str]]:
    """``kexp validate TARGET`` of every case, each in its own store."""

    def run(item: Case) -> subprocess.CompletedProcess[str]:
        root = make_store(tmp_path_factory.mktemp(item.name), item.files)
        return kexp_validate(root, item.target)

    return {item.name: run(item) for item in CASES}


def test_the_corpus_lists_every_file_with_its_problem() -> None:
    files = sorted(p.name for p in CORPUS.glob("*.md"))
    assert files == sorted(EXPECTED)
    assert len(files) >= 40
    for name, entry in EXPECTED.items():
        assert set(entry) <= {"code", "line", "column", "path", "about"}, name
        assert entry["code"] and entry["line"] >= 1 and entry["about"], name


def _found(problems: list[Problem], item: Case) -> Problem:
    matches = [p for p in problems if p.code == item.code and p.path.endswith(item.target)]
    assert matches, f"no {item.code} in {[p.format() for p in problems]}"
    return matches[0]


@pytest.mark.parametrize("item", CASES, ids=[c.name for c in CASES])
def test_library_reports_the_problem(item: Case, tmp_path: Path) -> None:
    root = make_store(tmp_path, item.files)
    path = root / item.target
    if item.store_wide:
        # The file alone is fine; the store around it is not.
        assert check_bytes(path.read_bytes(), path).ok
        problems = Store(root).validate()
    elif item.code == "file-too-large":
        # The same check with a small limit, on a small file.
        small = dataclasses.replace(DEFAULT_SETTINGS, max_file_bytes=len(GOOD))
        (root / NAME).write_bytes(GOOD.encode() + b"\n")
        assert read_and_check(root / NAME).ok
        problems = read_and_check(root / NAME, small).problems
        assert str(len(GOOD) + 1) in problems[0].message
    else:
        problems = check_bytes(path.read_bytes(), path).problems
    problem = _found(problems, item)
    assert problem.severity == "error"
    assert problem.line == item.line
    if item.column is not None:
        assert problem.column == item.column
    assert problem.message and problem.hint
    for other in problems:
        assert other.hint, other.format()


@pytest.mark.parametrize("item", CASES, ids=[c.name for c in CASES])
def test_command_reports_the_problem(
    item: Case, command_results: dict[str, subprocess.CompletedProcess[str]]
) -> None:
    result = command_results[item.name]
    output = result.stdout + result.stderr
    assert "Traceback" not in output
    assert result.returncode == 1, output
    column = str(item.column) if item.column is not None else ""
    head = f"{item.target}:{item.line}:{column}"
    lines = output.splitlines()
    at = [
        i for i, line in enumerate(lines) if line.startswith(head) and f"error[{item.code}]" in line
    ]
    assert at, output
    assert lines[at[0] + 1].strip().startswith("hint: ")
    assert len(lines[at[0] + 1].strip()) > len("hint: ")


def test_unsafe_tag_runs_nothing(tmp_path: Path, capfd: pytest.CaptureFixture[str]) -> None:
    marker = tmp_path / "executed"
    text = sub(
        "env: MI300X, ROCm 7.0.0", f"env: !!python/object/apply:os.system ['touch {marker}']"
    )
    path = make_store(tmp_path / "store", {NAME: text.encode()}) / NAME
    assert not check_bytes(path.read_bytes(), path).ok
    result = kexp_validate(tmp_path / "store", NAME)
    assert result.returncode == 1
    assert not marker.exists()
    echo = sub("env: MI300X, ROCm 7.0.0", "env: !!python/object/apply:os.system ['echo hi']")
    check_bytes(echo.encode(), path)
    assert "hi" not in capfd.readouterr().out.split()


def test_python_tag_command_prints_nothing_it_was_told_to(
    command_results: dict[str, subprocess.CompletedProcess[str]],
) -> None:
    assert "hi" not in command_results["python-tag"].stdout.split()


def test_alias_bomb_fails_fast(tmp_path: Path) -> None:
    # Nine levels of nine: 387,420,489 strings if expanded.
    start = time.perf_counter()
    checked = check_bytes(BILLION_LAUGHS.encode(), tmp_path / NAME)
    assert time.perf_counter() - start < 1.0
    assert [p.code for p in checked.problems] == ["yaml-alias"]


def test_all_problems_of_a_file_at_once(tmp_path: Path) -> None:
    text = sub("status: done", "status: finished")
    text = sub("score: 1.019", "score: -2", text)
    text = sub("dtype_sig: bf16", "dtype_sig: [bf16]", text)
    root = make_store(tmp_path, {NAME: text.encode()})
    problems = check_bytes(text.encode(), root / NAME).problems
    assert sorted((p.code, p.line) for p in problems) == [
        ("not-allowed", 6),
        ("out-of-range", 5),
        ("wrong-type", 9),
    ]
    result = kexp_validate(root, NAME)
    assert result.returncode == 1
    reported = [line for line in result.stdout.splitlines() if " error[" in line]
    assert [line.split(": ")[1] for line in reported] == [
        "error[out-of-range] score",
        "error[not-allowed] status",
        "error[wrong-type] dtype_sig",
    ]
    assert [line.split(":")[1] for line in reported] == ["5", "6", "9"]
    assert result.stdout.count("\n  hint: ") == 3


def _three_problem_store(tmp_path: Path) -> Path:
    text = sub("status: done", "status: finished")
    text = sub("score: 1.019", "score: -2", text)
    text = sub("is_buggy: false", "is_buggy: true", text)
    return make_store(tmp_path, {NAME: text.encode()})


def test_json_format(tmp_path: Path) -> None:
    root = _three_problem_store(tmp_path)
    result = kexp_validate(root, "--format", "json", NAME)
    assert result.returncode == 1
    assert "Traceback" not in result.stderr
    problems = json.loads(result.stdout)
    assert [(p["line"], p["code"]) for p in problems] == [
        (5, "out-of-range"),
        (6, "not-allowed"),
        (7, "buggy-without-error"),
    ]
    for problem in problems:
        assert set(problem) >= {"file", "line", "column", "code", "field", "message", "hint"}
        assert problem["file"] == NAME
        assert problem["column"] == 1
        assert problem["severity"] == "error"
        assert problem["message"] and problem["hint"]
    assert [p["field"] for p in problems] == ["score", "status", "error_message"]


def test_github_format(tmp_path: Path) -> None:
    root = _three_problem_store(tmp_path)
    result = kexp_validate(root, "--format", "github", NAME)
    assert result.returncode == 1
    annotations = [line for line in result.stdout.splitlines() if line.startswith("::")]
    assert [a.split("::")[1].split(",col=")[0] for a in annotations] == [
        f"error file={NAME},line=5",
        f"error file={NAME},line=6",
        f"error file={NAME},line=7",
    ]
    assert all("hint: " in a for a in annotations)


def test_valid_store_passes(tmp_path: Path) -> None:
    root = make_store(tmp_path, {NAME: GOOD.encode()})
    result = kexp_validate(root)
    assert result.returncode == 0, result.stdout + result.stderr
    assert " error[" not in result.stdout


def test_warnings_alone_do_not_fail(tmp_path: Path) -> None:
    text = sub("base_commit: 3f2c9e1a7b8d4c6e5f0a1b2c3d4e5f6a7b8c9d0e", "base_commit: 1234567")
    root = make_store(tmp_path, {NAME: text.encode()})
    result = kexp_validate(root, NAME)
    assert result.returncode == 0, result.stdout + result.stderr
    assert f"{NAME}:11:14: warning[yaml-implicit-type] base_commit:" in result.stdout
    assert "  hint: quote it: '1234567'" in result.stdout


def test_symlink_and_missing_files(tmp_path: Path) -> None:
    root = make_store(tmp_path / "store", {})
    elsewhere = tmp_path / "elsewhere.md"
    elsewhere.write_text(GOOD)
    (root / NAME).parent.mkdir(parents=True)
    (root / NAME).symlink_to(elsewhere)
    missing = f"experiments/2026/11/{OTHER}-gone.md"
    result = kexp_validate(root, NAME, missing)
    assert result.returncode == 1
    assert "Traceback" not in result.stdout + result.stderr
    lines = result.stdout.splitlines()
    # Shown where the link is, not where it points.
    assert f"{NAME}:1:1: error[symlink] experiment files may not be symbolic links" in lines
    assert (
        f"{missing}:1:1: error[unreadable] cannot read the file: No such file or directory" in lines
    )
    assert "  hint: check the path (kexp list shows the experiments)" in lines


def test_complex_key_is_named_plainly(tmp_path: Path) -> None:
    text = sub("score: 1.019\n", "score: 1.019\n? [a, b]\n: x\n")
    (problem,) = check_bytes(text.encode(), tmp_path / NAME).problems
    assert (problem.code, problem.line, problem.column) == ("yaml-bad-key", 6, 3)
    assert problem.message == "key [...] is not a field name"


def test_key_missing_inside_a_list_item_names_the_item(tmp_path: Path) -> None:
    text = sub("score: 1.019\n", "score: 1.019\nresults:\n- config: large\n- speedup: 1.019\n")
    problems = check_bytes(text.encode(), tmp_path / NAME).problems
    assert sorted((p.code, p.line, p.column, p.field) for p in problems) == [
        ("missing-field", 7, 3, "results.0.speedup"),
        ("missing-field", 8, 3, "results.1.config"),
    ]
    assert all("front-matter" not in p.hint for p in problems)


@pytest.mark.parametrize(
    ("created_at", "problem"),
    [
        ("2026-11-29T15:52:36Z", None),
        ("2026-11-29T15:52:36.1Z", None),
        ("2026-11-29T15:52:36.12Z", None),
        ("2026-11-29T15:52:36.1234567Z", None),
        ("2026-02-30T15:52:36Z", "bad-timestamp"),
        ("2026-11-29T24:00:00.5Z", "bad-timestamp"),
        ("2026-11-29 15:52:36Z", "bad-format"),
        ("yesterdayZ", "bad-format"),
    ],
)
def test_created_at(created_at: str, problem: str | None, tmp_path: Path) -> None:
    text = sub("created_at: '2026-11-29T15:52:36Z'", f"created_at: '{created_at}'")
    problems = check_bytes(text.encode(), tmp_path / NAME).problems
    assert [(p.code, p.line) for p in problems] == ([(problem, 12)] if problem else [])
