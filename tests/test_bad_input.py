"""Malformed and hostile input, in one place: every bad file is reported at the right
line with a hint, reading a store runs no code and never leaves it, and whatever the
bytes, only kexp's own errors come out.

1. The corpus of bad files (``tests/corpus/bad/``, ``expected.json`` names the problem
   each must produce) and bad stores built here (store-wide problems, a file too large to
   keep in the repository): each case is checked in the library
   (``kexp.format.validate.check_bytes``, or the store) and through the command (``kexp
   validate PATH`` in a store in a temporary folder): exit code 1, a ``path:line:col:
   error[code]`` line, a ``hint:`` line, never a traceback.
2. A store is untrusted input (merged branches, forks, hand edits): hostile stores read
   the ways a user does (the library and the command), then what the user would notice:
   no code ran, nothing outside the store was read or written, the hostile file is
   reported with a clear error (never a traceback, a hang, or a crash), git never saw a
   hostile string, a terminal shows escape sequences as text.
3. Fuzzing the parser: reading a file (:func:`kexp.format.validate.check_bytes`, as every query
   does) and putting it in canonical form (:func:`kexp.storage.fmt.canonical_text`, as
   ``kexp fmt`` does) turn any input into problems with a code, a position and a hint, or
   a :class:`~kexp.storage.fmt.NotFormattable` error: never another exception. A file that
   reads as valid survives a round trip. Inputs: arbitrary bytes and text, valid files
   with random edits, the corpus with random edits, and front-matter built from YAML's
   own punctuation. Hypothesis derandomizes the search, so a failure reproduces.

(The format of valid files, round trips and minimal updates: ``test_fileformat.py``.)
"""

from __future__ import annotations

import dataclasses
import json
import os
import pty
import select
import shutil
import subprocess
import sys
import time
import warnings
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
from conftest import experiment_fields, git, init_repo, run_kexp
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from kexp import KexpError, Store
from kexp.core.errors import GitError, InvalidExperimentWarning, ValidationError
from kexp.core.problems import Problem
from kexp.core.settings import DEFAULT_SETTINGS
from kexp.format.fileformat import FileFormatError, parse
from kexp.format.validate import CheckedFile, check_bytes, read_and_check
from kexp.storage.fmt import NotFormattable, canonical_text, format_files

ID = "6749f3a0c2d41e7b"
OTHER = "6749f3a1d4e5f6a7"
THIRD = "6749f3a2a1b2c3d4"
COMMIT = "3f2c9e1a7b8d4c6e5f0a1b2c3d4e5f6a7b8c9d0e"
NAME = f"experiments/2026/11/{ID}-unrolled.md"


def text_of(exp_id: str, *, summary: str = "Unrolled the inner loop by 4 - +1.90%") -> str:
    """A valid experiment file (no git needed: base_commit is given); its front-matter
    lines are numbered in the comment below."""
    return f"""\
---
id: {exp_id}
pid: ''
change_summary: {summary}
score: 1.019
status: done
is_buggy: false
operator_sig: 'csrc/kernels/cache_kernels.cu: reshape_and_cache_flash'
dtype_sig: bf16
env: MI300X, ROCm 7.0.0
base_commit: {COMMIT}
created_at: '2026-11-29T15:52:36Z'
---

## Detailed description

**Approach**: unroll by 4.

## Raw result

Iteration 1 Results - SUCCESS
"""


#: A valid experiment. Line numbers: 2 id, 3 pid, 4 change_summary, 5 score, 6 status,
#: 7 is_buggy, 8 operator_sig, 9 dtype_sig, 10 env, 11 base_commit, 12 created_at,
#: 13 closing ---.
GOOD = text_of(ID)


def sub(old: str, new: str, text: str = GOOD) -> str:
    """``text`` with one exact piece replaced (the piece must be there)."""
    assert text.count(old) == 1, old
    return text.replace(old, new)


def with_id(exp_id: str, pid: str = "") -> str:
    text = sub(f"id: {ID}", f"id: {exp_id}")
    return sub("pid: ''", f"pid: {pid}" if pid else "pid: ''", text)


def make_store(root: Path, files: dict[str, bytes]) -> Path:
    (root / "experiments").mkdir(parents=True)
    for relative, data in files.items():
        path = root / relative
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(data)
    return root


def plain_store(tmp_path: Path, name: str = "store") -> Path:
    return make_store(tmp_path / name, {})


def place(root: Path, relative: str, data: str | bytes) -> Path:
    path = root / relative
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data.encode() if isinstance(data, str) else data)
    return path


def kexp(
    root: Path, *args: str, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    """The command, pinned to ``root``; never a traceback, never an internal error."""
    result = run_kexp(*args, cwd=root, env={"KEXP_ROOT": str(root), "NO_COLOR": "1", **(env or {})})
    output = result.stdout + result.stderr
    assert "Traceback" not in output, output
    assert result.returncode in (0, 1, 2), (result.returncode, output)
    return result


def kexp_validate(root: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return kexp(root, "validate", *args)


def snapshot(folder: Path) -> dict[str, tuple[bytes | str, int]]:
    """Every entry below ``folder``: its content (or link target) and modification time."""
    found: dict[str, tuple[bytes | str, int]] = {}
    for path in sorted(folder.rglob("*")):
        if ".kexp" in path.parts:
            continue  # the store's cache (locks, index)
        info = path.lstat()
        if path.is_symlink():
            found[str(path)] = (os.readlink(path), info.st_mtime_ns)
        elif path.is_file():
            found[str(path)] = (path.read_bytes(), info.st_mtime_ns)
    return found


# === 1. the corpus of bad files and bad stores ===========================================


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


def test_python_tag_command_prints_nothing_it_was_told_to(
    command_results: dict[str, subprocess.CompletedProcess[str]],
) -> None:
    assert "hi" not in command_results["python-tag"].stdout.split()


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


# === 2. hostile stores ==================================================================

# --- YAML tags ------------------------------------------------------------------------

UNSAFE_TAGS = [
    "!!python/object/apply:os.system ['touch {marker}']",
    "!!python/object/new:os.system ['touch {marker}']",
    "!!python/object/apply:subprocess.check_output [['touch', '{marker}']]",
    "!!python/name:os.system",
    "!!python/module:os",
    "!!python/object:builtins.dict {{}}",
]


def test_yaml_tags_never_run_code(tmp_path: Path) -> None:
    """Files carrying Python object tags are refused by every reader; none runs code."""
    root = plain_store(tmp_path)
    marker = tmp_path / "code-ran"
    exp_ids = [f"6749f3a0{n:08x}" for n in range(len(UNSAFE_TAGS))]
    for exp_id, tag in zip(exp_ids, UNSAFE_TAGS, strict=True):
        hostile = text_of(exp_id).replace("env: MI300X, ROCm 7.0.0", f"env: {tag}")
        path = place(root, f"experiments/2026/11/{exp_id}-tag.md", hostile.format(marker=marker))
        problems = read_and_check(path).problems
        assert [p.code for p in problems] == ["yaml-unsafe-tag"], problems
        assert problems[0].line == 10
    store = Store(root)
    with pytest.warns(InvalidExperimentWarning):
        assert store.list_experiments() == []
    with pytest.raises(ValidationError):
        store.get_experiment(exp_ids[0])
    with pytest.raises(ValidationError):
        store.update_experiment(exp_ids[0], score=2.0)
    assert all(r.status == "error" for r in format_files(store=store))
    for args in (["list"], ["validate"], ["fmt"], ["export"], ["show", exp_ids[0]]):
        kexp(root, *args)
    result = kexp(root, "validate")
    assert result.returncode == 1
    assert result.stdout.count("error[yaml-unsafe-tag]") == len(UNSAFE_TAGS)
    assert not marker.exists()


def test_a_python_tag_prints_nothing_in_this_process(
    tmp_path: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    """A tag that would run ``echo hi``: reading the file here prints nothing."""
    echo = sub("env: MI300X, ROCm 7.0.0", "env: !!python/object/apply:os.system ['echo hi']")
    assert not check_bytes(echo.encode(), tmp_path / NAME).ok
    assert "hi" not in capfd.readouterr().out.split()


# --- symbolic links -------------------------------------------------------------------


def test_symbolic_links_never_lead_out_of_the_store(tmp_path: Path) -> None:
    """A symlinked file and a symlinked folder under experiments/ point outside the
    store: nothing reads through them, and nothing writes through them."""
    root = plain_store(tmp_path)
    real = place(root, f"experiments/2026/11/{ID}-real.md", text_of(ID))
    outside = tmp_path / "outside"
    secret = place(outside, f"{OTHER}-secret.md", text_of(OTHER, summary="SECRET file - x"))
    place(outside, f"2026-12/{THIRD}-hidden.md", text_of(THIRD, summary="HIDDEN folder - x"))
    linked_file = root / f"experiments/2026/11/{OTHER}-secret.md"
    linked_file.symlink_to(secret)
    (root / "experiments/2026/12").symlink_to(outside / "2026-12", target_is_directory=True)
    before = snapshot(outside)

    store = Store(root)
    assert store.paths() == [real, linked_file]  # the folder link is not walked
    with pytest.warns(InvalidExperimentWarning, match="symbolic link"):
        assert [e.id for e in store.list_experiments()] == [ID]
    with pytest.raises(ValidationError, match="symbolic link"):
        store.get_experiment(OTHER)
    with pytest.raises(KexpError):
        store.get_experiment(THIRD)  # not in the store
    with pytest.raises(ValidationError, match="symbolic link"):
        store.update_experiment(OTHER, score=2.0)
    # A new experiment of December would land in the linked folder: refused.
    with pytest.raises(KexpError, match="symbolic link"):
        store.create_experiment(
            **experiment_fields(created_at="2026-12-01T00:00:00Z", base_commit=COMMIT)
        )
    assert [r.status for r in format_files(store=store)] == ["unchanged", "error"]

    listed = kexp(root, "list", "--json")
    assert [e["id"] for e in json.loads(listed.stdout)] == [ID]
    assert "symbolic link" in listed.stderr
    validated = kexp(root, "validate")
    assert validated.returncode == 1
    assert f"{OTHER}-secret.md:1:1: error[symlink]" in validated.stdout
    assert THIRD not in validated.stdout + validated.stderr
    kexp(root, "fmt")
    exported = kexp(root, "export")
    assert "SECRET" not in exported.stdout and "HIDDEN" not in exported.stdout
    assert snapshot(outside) == before
    assert linked_file.is_symlink()

    # The cache folder (locks, index) committed as a link: nothing is written through it.
    shutil.rmtree(root / ".kexp")
    (root / ".kexp").symlink_to(outside, target_is_directory=True)
    with pytest.raises(KexpError, match="symbolic link"):
        Store(root).list_experiments()
    with pytest.raises(KexpError, match="symbolic link"):
        Store(root).update_experiment(ID, score=2.0)
    assert "symbolic link" in kexp(root, "list").stderr
    assert snapshot(outside) == before


def test_links_to_endless_files_do_not_hang_anything(tmp_path: Path) -> None:
    """An experiment name linked to /dev/zero, or a FIFO: every reader returns at once."""
    root = plain_store(tmp_path)
    place(root, f"experiments/2026/11/{ID}-real.md", text_of(ID))
    (root / f"experiments/2026/11/{OTHER}-zero.md").symlink_to("/dev/zero")
    os.mkfifo(root / f"experiments/2026/11/{THIRD}-fifo.md")
    store = Store(root)
    started = time.monotonic()
    with pytest.warns(InvalidExperimentWarning):
        assert [e.id for e in store.list_experiments()] == [ID]
    assert {p.code for p in store.validate()} == {"symlink", "unreadable"}
    assert [r.status for r in format_files(store=store)] == ["unchanged", "error", "error"]
    # A create with a code change scans the store's files for the same change.
    store.create_experiment(**experiment_fields(base_commit=COMMIT, code_change="-a\n+b\n"))
    assert time.monotonic() - started < 10
    for args in (["list"], ["validate"], ["fmt"], ["show", OTHER], ["show", THIRD]):
        kexp(root, *args)


# --- YAML bombs -------------------------------------------------------------------------

#: 1 KB of front-matter whose aliases expand to 9**9 = 387,420,489 strings.
LAUGHS = 'a: &a ["lol","lol","lol","lol","lol","lol","lol","lol","lol"]\n' + "".join(
    f"{name}: &{name} [{', '.join([f'*{prev}'] * 9)}]\n"
    for prev, name in zip("abcdefgh", "bcdefghi", strict=True)
)
#: The same with mappings and merge keys, and aliases as keys.
MERGES = "a: &a {x: 1, y: 2}\n" + "".join(
    f"{name}: &{name} {{<<: [{', '.join([f'*{prev}'] * 9)}]}}\n"
    for prev, name in zip("abcdefgh", "bcdefghi", strict=True)
)


@pytest.mark.parametrize("bomb", [LAUGHS, MERGES, "&k key: 1\n*k : 2\n"], ids=["seq", "map", "key"])
def test_alias_bombs_are_refused_in_well_under_a_second(bomb: str, tmp_path: Path) -> None:
    """Nine levels of nine (387,420,489 strings if expanded), and aliases as keys."""
    root = plain_store(tmp_path)
    text = text_of(ID).replace("---\n\n", bomb + "---\n\n", 1)
    assert len(bomb) < 1024
    path = place(root, f"experiments/2026/11/{ID}-bomb.md", text)
    started = time.perf_counter()
    problems = read_and_check(path).problems
    with pytest.warns(InvalidExperimentWarning, match="alias|tag"):
        assert Store(root).list_experiments() == []
    assert time.perf_counter() - started < 0.5
    assert problems[0].code in ("yaml-alias", "yaml-unsafe-tag"), problems
    if bomb == LAUGHS:
        assert [p.code for p in problems] == ["yaml-alias"]


def test_deep_nesting_is_refused_without_a_crash(tmp_path: Path) -> None:
    """200 KB of '[' used to crash the interpreter (libyaml recurses in C)."""
    root = plain_store(tmp_path)
    depth = 100_000
    for exp_id, value in [
        (ID, "[" * depth + "]" * depth),
        (OTHER, "{a: " * depth + "}" * depth),
        (THIRD, "\n" + "".join(" " * n + "- \n" for n in range(1, 600))),
    ]:
        hostile = text_of(exp_id).replace("env: MI300X, ROCm 7.0.0", f"env: {value}")
        place(root, f"experiments/2026/11/{exp_id}-deep.md", hostile)
    started = time.perf_counter()
    problems = Store(root).validate()
    assert time.perf_counter() - started < 5
    assert [p.code for p in problems] == ["yaml-too-deep"] * 3
    assert [p.line for p in problems][:2] == [10, 10]  # flow nesting: on the env line
    result = kexp(root, "validate")
    assert result.returncode == 1
    assert result.stdout.count("error[yaml-too-deep]") == 3


# --- size, encoding, NUL, long lines --------------------------------------------------


def test_files_over_the_limit_are_refused_without_being_read(tmp_path: Path) -> None:
    root = plain_store(tmp_path)
    huge = root / f"experiments/2026/11/{ID}-huge.md"
    huge.parent.mkdir(parents=True)
    with huge.open("wb") as handle:
        handle.write(text_of(ID).encode())
        handle.truncate(8 * 1024**3)  # a sparse 8 GiB file: reading it whole would show
    store = Store(root)
    started = time.perf_counter()
    (problem,) = read_and_check(huge).problems
    assert (problem.code, problem.line) == ("file-too-large", 1)
    assert str(DEFAULT_SETTINGS.max_file_bytes) in problem.message
    with pytest.raises(ValidationError, match="limit"):
        store.update_experiment(ID, score=2.0)
    assert [r.status for r in format_files(store=store)] == ["error"]
    assert time.perf_counter() - started < 2
    assert huge.stat().st_size == 8 * 1024**3

    # The limit is a setting.
    small = place(root, f"experiments/2026/11/{OTHER}-small.md", text_of(OTHER))
    limited = dataclasses.replace(DEFAULT_SETTINGS, max_file_bytes=100)
    assert read_and_check(small).ok
    (problem,) = read_and_check(small, limited).problems
    assert problem.code == "file-too-large"
    assert f"the file is {small.stat().st_size} bytes; the limit is 100" in problem.message
    result = kexp(root, "validate")
    assert f"{ID}-huge.md:1:1: error[file-too-large]" in result.stdout
    assert "  hint: move large logs" in result.stdout


def test_invalid_utf8_nul_bytes_and_a_10_mb_line(tmp_path: Path) -> None:
    root = plain_store(tmp_path)
    ten_mb = 10 * 1024 * 1024
    files = {
        "6749f3a000000001-latin1.md": text_of("6749f3a000000001")
        .encode()
        .replace(b"SUCCESS", b"SUCC\xe8S"),
        "6749f3a000000002-nul-front.md": text_of("6749f3a000000002")
        .encode()
        .replace(b"MI300X", b"MI\x00300X"),
        "6749f3a000000003-nul-body.md": text_of("6749f3a000000003").encode() + b"\x00\x00\n",
        "6749f3a000000004-long-body.md": text_of("6749f3a000000004").encode() + b"x" * ten_mb,
        "6749f3a000000005-long-env.md": text_of("6749f3a000000005")
        .encode()
        .replace(b"MI300X", b"M" * ten_mb),
        "6749f3a000000006-one-line.md": b"-" * ten_mb,
    }
    paths = {name: place(root, f"experiments/2026/11/{name}", data) for name, data in files.items()}
    codes = {name: [p.code for p in read_and_check(path).problems] for name, path in paths.items()}
    assert codes == {
        "6749f3a000000001-latin1.md": ["invalid-utf8"],
        "6749f3a000000002-nul-front.md": ["bad-character"],
        "6749f3a000000003-nul-body.md": [],  # any text is fine in the body
        "6749f3a000000004-long-body.md": ["file-too-large"],
        "6749f3a000000005-long-env.md": ["file-too-large"],
        "6749f3a000000006-one-line.md": ["file-too-large"],
    }
    # With a limit above 10 MB the long lines are parsed: no crash, in seconds.
    roomy = dataclasses.replace(DEFAULT_SETTINGS, max_file_bytes=16 * 1024 * 1024)
    started = time.perf_counter()
    assert read_and_check(paths["6749f3a000000004-long-body.md"], roomy).ok
    assert read_and_check(paths["6749f3a000000005-long-env.md"], roomy).ok
    assert [
        p.code for p in read_and_check(paths["6749f3a000000006-one-line.md"], roomy).problems
    ] == ["no-front-matter"]
    assert time.perf_counter() - started < 15
    listed = kexp(root, "list", "--json")
    assert [e["id"] for e in json.loads(listed.stdout)] == ["6749f3a000000003"]
    assert listed.stderr.count("kexp: warning: skipped invalid experiment file") == 5
    validated = kexp(root, "validate")
    assert validated.returncode == 1
    assert validated.stdout.count(" error[") == 5


# --- ids and git ----------------------------------------------------------------------

HOSTILE_IDS = [
    "../../../../tmp/kexp-escape",
    f"{ID}/../../escape",
    f"{ID}\x00",
    f"{ID}\n../../escape",
    "/etc/passwd",
    "~/.ssh/id_rsa",
    "-rf",
    "6749f3a0c2d41e7b6749",
]


@pytest.mark.parametrize("hostile", HOSTILE_IDS, ids=repr)
def test_ids_are_checked_before_any_path_is_built(hostile: str, tmp_path: Path) -> None:
    root = plain_store(tmp_path)
    place(root, f"experiments/2026/11/{ID}-real.md", text_of(ID))
    store = Store(root)
    before = snapshot(tmp_path)
    calls: list[Callable[[], object]] = [
        lambda: store.get_experiment(hostile),
        lambda: store.update_experiment(hostile, score=2.0),
        lambda: store.delete_experiment(hostile),
        lambda: store.path_of(hostile),
        lambda: store.lock(hostile).__enter__(),
        lambda: store.create_experiment(**experiment_fields(id=hostile, base_commit=COMMIT)),
        lambda: store.create_experiment(**experiment_fields(pid=hostile, base_commit=COMMIT)),
        lambda: store.list_experiments(pid=hostile),
    ]
    for call in calls:
        with pytest.raises(KexpError):
            call()
    assert snapshot(tmp_path) == before
    if "\x00" not in hostile:
        result = kexp(root, "show", hostile)
        assert result.returncode == 2
        assert "kexp: error:" in result.stderr


HOSTILE_REVISIONS = [
    "--output=PWNED",
    "-oPWNED",
    "--upload-pack=touch PWNED",
    "HEAD:experiments",
    "main..HEAD",
    "HEAD --output=PWNED",
    "$(touch PWNED)",
    "HEAD\n--output=PWNED",
]


def test_hostile_strings_never_reach_git(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Revisions from users and commit hashes from files are checked before git runs:
    GIT_TRACE records every git command, and none carries a hostile string."""
    root = init_repo(tmp_path / "repo")
    head = git(root, "rev-parse", "HEAD")
    place(root, f"experiments/2026/11/{ID}-real.md", text_of(ID).replace(COMMIT, head))
    for n, hostile in enumerate(HOSTILE_REVISIONS[:3]):
        exp_id = f"6749f3a0{n:08x}"
        text = text_of(exp_id).replace(f"base_commit: {COMMIT}", f"base_commit: '{hostile}'")
        place(root, f"experiments/2026/11/{exp_id}-hostile-commit.md", text)
    git(root, "add", "experiments")
    git(root, "commit", "-q", "-m", "experiments")
    trace = tmp_path / "git-trace.log"
    monkeypatch.setenv("GIT_TRACE", str(trace))
    store = Store(root)
    for hostile in HOSTILE_REVISIONS:
        for call in (
            lambda hostile=hostile: store.at(hostile),
            lambda hostile=hostile: store.changes(hostile),
            lambda hostile=hostile: store.history(ID, revision=hostile),
            lambda hostile=hostile: store.list_experiments(reachable_from=hostile),
            lambda hostile=hostile: store.list_experiments(base_commit=hostile),
        ):
            with pytest.raises(GitError), warnings.catch_warnings():
                warnings.simplefilter("ignore", InvalidExperimentWarning)
                call()
    problems = store.validate()
    assert {p.code for p in problems if p.severity == "error"} == {"bad-format"}
    for args in (
        ["validate"],
        ["list", "--base-commit", "--output=PWNED"],
        ["log", ID, "--rev", "-oPWNED"],
    ):
        kexp(root, *args, env={"GIT_TRACE": str(trace)})
    assert trace.exists()  # git did run, for the valid requests
    logged = trace.read_text(errors="replace")
    assert "PWNED" not in logged and "HEAD:experiments" not in logged
    assert not list(tmp_path.rglob("PWNED"))


# --- terminal output ------------------------------------------------------------------

#: Escape sequences that would clear the screen, set the window title, move the cursor,
#: overwrite text, ring the bell, or reverse the text's display order.
FORGERIES = {
    "change_summary": "\x1b[2J\x1b]0;pwned\x07Fake summary\u202e - x",
    "operator_sig": "op\x9b31m\x1b[8m",
    "dtype_sig": "bf16\x08\x08fp8",
    "env": "\rMI300X\x1b[1A",
    "author": "a\x1b]8;;https://evil.example\x07link",
    "tags": ["t\x1b[0m", "\u2066iso"],
    "detailed_description": "**Key insight**: \x1b[31mred\x07\r\nover\x00written",
    "raw_result": "ok\x1b[1A\x1b[2K\x1bc",
    "error_message": "E\x1bP+q\x1b\\\x7f",
}


def _terminal_output(args: list[str], cwd: Path) -> bytes:
    """What ``kexp ARGS`` writes to a terminal (a pseudo-terminal), colors off; long output
    goes through a pager that passes it on unchanged (as less -R would show it)."""
    env = {
        **os.environ,
        "KEXP_ROOT": str(cwd),
        "NO_COLOR": "1",
        "TERM": "xterm",
        "COLUMNS": "200",
        "KEXP_PAGER": "cat -u",
    }
    leader, follower = pty.openpty()
    process = subprocess.Popen(
        [sys.executable, "-m", "kexp", *args],
        cwd=cwd,
        env=env,
        stdin=follower,
        stdout=follower,
        stderr=follower,
        close_fds=True,
    )
    os.close(follower)
    chunks: list[bytes] = []
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        ready, _, _ = select.select([leader], [], [], 1.0)
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
    os.close(leader)
    assert process.wait(timeout=30) in (0, 1), b"".join(chunks)
    # The terminal turns each newline into CR LF: that CR is the terminal's, not kexp's.
    return b"".join(chunks).replace(b"\r\n", b"\n")


def test_text_from_experiments_cannot_forge_terminal_output(tmp_path: Path) -> None:
    root = init_repo(tmp_path / "repo")
    (root / "experiments").mkdir()
    store = Store(root)
    parent = store.create_experiment(**experiment_fields(score=1.2))
    exp = store.create_experiment(
        **experiment_fields(score=0.5, is_buggy=True, pid=parent.id, **FORGERIES)
    )
    # An unknown field with a hostile name, so that validation quotes it.
    assert exp.path is not None
    exp.path.write_bytes(
        exp.path.read_bytes().replace(b"---\n\n", b'"\\e[31mx\\u202e": 1\n---\n\n', 1)
    )
    git(root, "add", "experiments")
    git(root, "commit", "-q", "-m", "hostile")
    commands = [
        ["show", exp.id],
        ["show", exp.id, "--field", "raw_result"],
        ["list"],
        ["list", "--fields", "id,author,tags,env,dtype_sig"],
        ["top", "--include-buggy"],
        ["lessons"],
        ["tree"],
        ["stats"],
        ["validate"],
        ["log", exp.id],
        ["export", "--format", "csv"],
    ]
    with ThreadPoolExecutor(max_workers=4) as pool:
        outputs = list(pool.map(lambda args: _terminal_output(args, root), commands))
    for args, output in zip(commands, outputs, strict=True):
        text = output.decode("utf-8")
        forged = [ch for ch in text if (ch < " " and ch not in "\n\t") or "\x7f" <= ch < "\xa0"]
        forged += [ch for ch in text if ch in "\u202e\u2066"]
        assert forged == [], (args, text)
    shown = outputs[0].decode()
    assert "\\x1b[2J\\x1b]0;pwned\\x07Fake summary\\u202e - x" in shown
    assert "\\x1b[31mred\\x07\\x0d" in shown
    assert "Fake summary" in outputs[2].decode()  # the listing shows it too, defused


#: Bidirectional controls (and the line and paragraph separators) a terminal obeys.
_BIDI_AND_SEPARATORS = (
    "\u061c\u200e\u200f\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069\u2028\u2029"
)


def test_json_output_cannot_forge_terminal_output(tmp_path: Path) -> None:
    """Every --json output (and validate --format json) writes bidirectional controls
    and other control characters as JSON escapes: the same data, nothing raw."""
    root = init_repo(tmp_path / "repo")
    (root / "experiments").mkdir()
    store = Store(root)
    parent = store.create_experiment(**experiment_fields(score=1.2))
    hostile = {
        **FORGERIES,
        "change_summary": "Fake\u2067 summary\u202e - x\u061c",
        "profiling_info": "line\u2028separated\u2029paragraph",
    }
    exp = store.create_experiment(
        **experiment_fields(score=0.5, is_buggy=True, pid=parent.id, **hostile)
    )
    assert exp.path is not None
    exp.path.write_bytes(  # a hostile unknown field, which validation quotes
        exp.path.read_bytes().replace(b"---\n\n", b'"x\\u202e\\u2066y": 1\n---\n\n', 1)
    )
    git(root, "add", "experiments")
    git(root, "commit", "-q", "-m", "hostile")
    commands = [
        ["list", "--json"],
        ["show", exp.id, "--json"],
        ["top", "--include-buggy", "--json"],
        ["lessons", "--json"],
        ["log", exp.id, "--json"],
        ["validate", "--format", "json"],
    ]
    with ThreadPoolExecutor(max_workers=3) as pool:
        outputs = list(pool.map(lambda args: _terminal_output(args, root), commands))
    for args, output in zip(commands, outputs, strict=True):
        text = output.decode("utf-8")
        forged = [ch for ch in text if (ch < " " and ch not in "\n\t") or "\x7f" <= ch < "\xa0"]
        forged += [ch for ch in text if ch in _BIDI_AND_SEPARATORS]
        assert forged == [], (args, forged)
        assert json.loads(text) is not None, args  # still JSON, the escapes decoding to it
    shown = json.loads(outputs[1].decode())
    assert shown["change_summary"] == hostile["change_summary"]
    assert "\\u202e" in outputs[1].decode()


# === 3. fuzzing the parser ==============================================================

FUZZ_PATH = Path(f"experiments/2026/11/{ID}-fuzzed.md")

#: The seed of the edits: a valid file with a list and a table of results.
FUZZ_GOOD = f"""\
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
tags: [cache, unroll]
results:
- {{config: small, baseline: 2.0, candidate: 1.96, speedup: 1.019}}
---

## Detailed description

**Approach**: unroll by 4.

## Raw result

Iteration 1 Results - SUCCESS

## Code change

```diff
-  for (int i = 0; i < n; ++i)
+  #pragma unroll 4
```
"""

FUZZ = settings(
    max_examples=300,
    deadline=None,
    derandomize=True,
    database=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)

#: Pieces of YAML syntax, so that generated front-matter reaches the parser's corners.
# fmt: off
YAML_PIECES = [
    "\n", " ", "  ", "\t", ":", ": ", "- ", "? ", ",", "[", "]", "{", "}", "'", '"',
    "#", "&a ", "*a", "&b ", "*b", "!!python/object:os.system ", "!!str ", "!!int ",
    "!!binary ", "!!set ", "!custom ", "!<tag:x> ", "|", ">", "|-", "%YAML 1.1\n",
    "%TAG ! tag:x\n", "---", "...", "<<: ", "~", "null", "true", "no", ".nan", ".inf",
    "-.inf", "0x1f", "0o17", "017", "0123456789", "1e309", "9" * 400, "1_000",
    "190:20:30", "2026-11-29", "2026-11-29T15:52:36Z", "\\u0000", "\\e", '"\\x1b[31m"',
    "id", "pid", "score", "status", "results", "tags", "combines", "created_at",
    "speedup", "config", "\u00e9", "\u2028", "\u0085", "\x00", "\x1b", "\r", "\r\n",
    "\ufeff", "\ud7ff", "\U0001f600", "`", "```", "## ", "## Raw result\n",
]
# fmt: on


def _checked(data: bytes | str) -> CheckedFile:
    checked = check_bytes(data, FUZZ_PATH)
    assert isinstance(checked, CheckedFile)
    for problem in checked.problems:
        assert isinstance(problem, Problem)
        assert problem.code and problem.message and problem.hint, problem
        assert problem.line >= 1 and problem.column >= 1, problem
        assert problem.severity in ("error", "warning"), problem
        problem.format()
    return checked


def _fast_reader_agrees(data: bytes | str) -> None:
    """The fast reader of canonical front-matter gives the full reader's values or none."""
    try:
        fast = parse(data, FUZZ_PATH, fast=True).fields
    except FileFormatError:
        fast = None
    try:
        full = parse(data, FUZZ_PATH).fields
    except FileFormatError:
        full = None
    if fast is None or full is None:
        assert fast is full, (fast, full)
    else:
        assert repr(fast) == repr(full)  # repr: nan equals nan


def _survives(data: bytes | str) -> None:
    """Reading, checking and formatting ``data`` raise nothing but kexp's own errors."""
    _fast_reader_agrees(data)
    checked = _checked(data)
    try:
        text = canonical_text(data, FUZZ_PATH)
    except NotFormattable:
        assert not checked.ok or any(p.severity == "error" for p in checked.problems)
        return
    assert checked.ok
    again = _checked(text)
    assert again.ok, [p.format() for p in again.problems]
    assert again.experiment() == checked.experiment()
    assert canonical_text(text, FUZZ_PATH) == text


@st.composite
def edited_good_files(draw: st.DrawFn) -> bytes:
    """A valid file with a few random edits: bytes or text inserted, deleted, replaced."""
    data = bytearray(FUZZ_GOOD.encode())
    for _ in range(draw(st.integers(1, 4))):
        position = draw(st.integers(0, len(data)))
        kind = draw(st.sampled_from(["insert", "delete", "replace", "piece"]))
        if kind == "insert":
            data[position:position] = draw(st.binary(min_size=1, max_size=8))
        elif kind == "delete":
            del data[position : position + draw(st.integers(1, 20))]
        elif kind == "replace":
            data[position : position + 1] = draw(st.binary(min_size=1, max_size=2))
        else:
            data[position:position] = draw(st.sampled_from(YAML_PIECES)).encode(
                "utf-8", "surrogatepass"
            )
    return bytes(data)


@st.composite
def yaml_front_matter(draw: st.DrawFn) -> str:
    """A front-matter made of YAML punctuation, keys and values, then a body."""
    pieces = draw(st.lists(st.sampled_from(YAML_PIECES), max_size=40))
    front = "".join(pieces)
    body = draw(st.sampled_from(["", "\n## Raw result\n\nx\n", "\n```\n## Raw result\n"]))
    return f"---\n{front}\n---\n{body}"


@FUZZ
@given(st.binary(max_size=600))
@example(b"")
@example(b"---\n")
@example(b"\xef\xbb\xbf---\r\n---\r\n")
@example(b"---\nscore: " + b"9" * 5000 + b"\n---\n")
@example(b"---\na: " + b"[" * 3000 + b"]" * 3000 + b"\n---\n")
def test_arbitrary_bytes(data: bytes) -> None:
    _survives(data)


@FUZZ
@given(st.text(max_size=400))
def test_arbitrary_text(text: str) -> None:
    _survives(text)
    _survives("---\n" + text)
    _survives(f"---\n{text}\n---\n")


@FUZZ
@given(edited_good_files())
def test_valid_file_with_random_edits(data: bytes) -> None:
    _survives(data)


CORPUS_FILES = sorted(CORPUS.glob("*.md"))


@FUZZ
@given(st.sampled_from(CORPUS_FILES), st.data())
def test_bad_files_of_the_corpus_with_random_edits(path: Path, data: st.DataObject) -> None:
    original = path.read_bytes()
    edited = bytearray(original)
    for _ in range(data.draw(st.integers(0, 3))):
        position = data.draw(st.integers(0, len(edited)))
        edited[position:position] = data.draw(st.sampled_from(YAML_PIECES)).encode(
            "utf-8", "surrogatepass"
        )
    _survives(bytes(edited))


@FUZZ
@given(yaml_front_matter())
@example("---\nscore: 1\nresults: [{speedup: " + "9" * 400 + "}]\n---\n")
@example("---\na: " + "- " * 2000 + "x\n---\n")
@example("---\n&a a: 1\n*a : 2\n---\n")
@example("---\n:: !!int \n---\n")
@example("---\na: !!bool maybe\nb: !!float x\n---\n")
def test_yaml_made_of_punctuation(text: str) -> None:
    _survives(text)
    # The same front-matter under a valid one's keys: the values reach the schema checks.
    _survives(FUZZ_GOOD.replace("tags: [cache, unroll]\n", text.split("---\n")[1]))


def test_good_file_is_valid() -> None:
    """The seed of the edits is itself valid (else the edits would test nothing)."""
    checked = _checked(FUZZ_GOOD)
    assert checked.ok, [p.format() for p in checked.problems]


def test_folders_and_files_named_in_other_bytes_are_read_by_every_command(
    repo: Path, store: Store
) -> None:
    """A folder or file whose name is not UTF-8 (made by a tool with another encoding)
    is read by every command, from the cache too (SQLite's text cannot hold the lone
    surrogates Python reads such a name as)."""
    moved = store.create_experiment(**experiment_fields(change_summary="Moved - +2%"))
    kept = store.create_experiment(**experiment_fields(change_summary="Kept - +1%"))
    assert moved.path is not None
    odd = os.path.join(os.fsencode(repo / "experiments"), b"caf\xe9")
    os.mkdir(odd)
    os.rename(moved.path, os.path.join(odd, moved.id.encode() + b"-r\xe9sum\xe9.md"))
    with open(os.path.join(odd, b"notes-\xff.txt"), "w") as handle:
        handle.write("not an experiment\n")
    for _ in range(2):  # the second time from the cache the first one wrote
        result = run_kexp("list", "--json", cwd=repo)
        assert result.returncode == 0, result.stderr
        assert sorted(e["id"] for e in json.loads(result.stdout)) == sorted([moved.id, kept.id])
        result = run_kexp("similar", "--text", "Moved", "--json", cwd=repo)
        assert result.returncode == 0, result.stderr
        assert moved.id in result.stdout
    assert Store(repo).get_experiment(moved.id).path.parent == Path(os.fsdecode(odd))


_ESCAPED = [chr(code) for code in range(0xDC80, 0xDD00)]  # bytes not UTF-8, as Python reads them


@given(
    st.lists(st.characters() | st.sampled_from(_ESCAPED), max_size=12)
    .map("".join)
    .filter(lambda name: not name.startswith("/"))
)
def test_every_folder_name_is_stored_as_text_sqlite_holds_and_read_back(name: str) -> None:
    """The cache's names of folders (relative: none starts with "/"): SQLite's text
    holds them (no lone surrogates), and each gives back the folder it was made of."""
    from kexp.storage.names import folder_name, stored_name

    stored = stored_name(name)
    stored.encode()  # SQLite's text: UTF-8
    assert folder_name(stored) == name


def test_a_folder_named_in_other_bytes_on_another_ref_is_read_across_refs(
    repo: Path, store: Store
) -> None:
    """Reading across refs: a ref holding a folder and a file whose names are not UTF-8
    (the working tree does not) is read by the reads across refs and at the revision."""
    kept = store.create_experiment(**experiment_fields(change_summary="Kept - +1%"))
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", "base")
    git(repo, "checkout", "-q", "-b", "other")
    moved = store.create_experiment(**experiment_fields(change_summary="Moved - +2%"))
    assert moved.path is not None
    odd = os.path.join(os.fsencode(repo / "experiments"), b"caf\xe9")
    os.mkdir(odd)
    os.rename(moved.path, os.path.join(odd, moved.id.encode() + b"-r\xe9sum\xe9.md"))
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", "odd names")
    git(repo, "checkout", "-q", "main")
    for _ in range(2):  # the second time from the cache the first one wrote
        result = run_kexp("list", "--json", "--all-refs", cwd=repo)
        assert result.returncode == 0, result.stderr
        assert sorted(e["id"] for e in json.loads(result.stdout)) == sorted([moved.id, kept.id])
        result = run_kexp("similar", "--text", "Moved", "--all-refs", "--json", cwd=repo)
        assert result.returncode == 0, result.stderr
        assert moved.id in result.stdout
        result = run_kexp("validate", "--rev", "other", cwd=repo)
        assert result.returncode == 0, result.stdout + result.stderr
