"""Crashes: SIGKILL at random moments during create, update, delete, fmt and import.

Each scenario runs the real operation in a child process (a batch of library calls, as
an agent's script makes them, or the real ``kexp`` command) and kills it with SIGKILL at
a random moment: once it has done a random number of items (counted by the batch, or
seen on disk for a command), plus a random few milliseconds, so that kills land
anywhere in the writing of an item, whatever the machine's speed. It repeats (seeded,
so a failure reproduces), and after every kill:

* every experiment file is byte for byte either its old or its new version (never a
  mix, never cut short), and no file appears that the operation would not write;
* the store validates, and a strict query reads every file;
* whatever temporary file the killed writer left is hidden from queries.

Then the interrupted operation is run again, and must complete: the store ends exactly
as an uninterrupted run leaves it (computed first, in another folder).
"""

from __future__ import annotations

import json
import os
import random
import re
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from conftest import experiment_fields
from test_races import CONTEXT

from kexp import ExperimentNotFoundError, KexpError, Store
from kexp.core.model import LEGACY_FIELDS
from kexp.output.legacyimport import import_legacy
from kexp.storage.fmt import canonical_text, format_files

SEED = 20261129
KILLS = 6
COMMIT = "3f2c9e1a7b8d4c6e5f0a1b2c3d4e5f6a7b8c9d0e"
Snapshot = dict[str, bytes]
#: Counts the items a run has done so far (its argument: the number at its start).
Progress = Callable[[int], int]


def new_store(folder: Path) -> Path:
    (folder / "experiments").mkdir(parents=True)
    return folder


def files_of(root: Path) -> Snapshot:
    """Every experiment file of the store (relative path -> bytes)."""
    store = Store(root)
    return {str(p.relative_to(root)): p.read_bytes() for p in store.paths()}


def hidden_files(root: Path) -> list[Path]:
    return [p for p in (root / "experiments").rglob(".*") if p.is_file()]


def assert_consistent(root: Path, allowed: dict[str, set[bytes]]) -> Snapshot:
    """Each file is one of its allowed versions; the store validates; queries read it all."""
    now = files_of(root)
    for relative, data in now.items():
        assert relative in allowed, f"{relative} should not exist"
        assert data in allowed[relative], f"{relative} is neither its old nor its new version"
    store = Store(root)
    assert [p for p in store.validate() if p.severity == "error"] == []
    assert len(store.list_experiments(strict=True)) == len(now)
    for leftover in hidden_files(root):  # a killed writer's temporary file: never listed
        assert leftover.name.endswith(".tmp")
    return now


class Operation:
    """An operation to kill: a batch in a child process, or a ``kexp`` command."""

    def __init__(self, start: Callable[[Any], Any], progress: Callable[[Any], int]) -> None:
        self._start = start
        self._progress = progress

    def run(self, after_items: int | None, delay: float = 0.0) -> bool:
        """Run it; SIGKILL it ``delay`` seconds after it has done ``after_items`` items
        (None: let it finish). Returns whether it was killed while running."""
        counter = CONTEXT.Value("i", 0)
        process = self._start(counter)
        baseline = self._progress(counter)
        while _exit_code(process) is None and (
            after_items is None or self._progress(counter) - baseline < after_items
        ):
            time.sleep(0.001)
        deadline = time.monotonic() + delay
        while time.monotonic() < deadline and _exit_code(process) is None:
            time.sleep(0.0005)
        running = after_items is not None and _exit_code(process) is None
        if running:
            os.kill(process.pid, signal.SIGKILL)
        if isinstance(process, subprocess.Popen):
            process.wait(timeout=300)
        else:
            process.join(timeout=300)
        code = _exit_code(process)
        if running and code == 0:
            running = False  # it finished between the last look and the kill
        assert code == (-signal.SIGKILL if running else 0), f"the operation failed (exit {code})"
        return running


def _exit_code(process: Any) -> int | None:
    return process.poll() if isinstance(process, subprocess.Popen) else process.exitcode


def in_child(target: Callable[..., None], *args: Any) -> Operation:
    """``target(*args, counter)`` in a child process; it counts the items it has done."""

    def start(counter: Any) -> Any:
        process = CONTEXT.Process(target=target, args=(*args, counter))
        process.start()
        return process

    return Operation(start, lambda counter: int(counter.value))


def kexp_command(root: Path, *args: str, progress: Callable[[], int]) -> Operation:
    """The real ``kexp ARGS`` on the store ``root``; ``progress`` reads its work on disk."""
    env = {**os.environ, "KEXP_ROOT": str(root), "NO_COLOR": "1"}

    def start(counter: Any) -> subprocess.Popen[bytes]:
        return subprocess.Popen(
            [sys.executable, "-m", "kexp", *args],
            cwd=root,
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )

    return Operation(start, lambda counter: progress())


def crash_repeatedly(
    name: str,
    operation: Operation,
    root: Path,
    allowed: dict[str, set[bytes]],
    most_items: int,
    partial: Callable[[Snapshot], bool],
    finished: Callable[[Snapshot], bool] | None = None,
) -> None:
    """Kill the operation ``KILLS`` times, each after a random number of items (up to
    ``most_items``) and a random few milliseconds, checking the store after each. Most
    kills must interrupt it, and one must leave it partly done (``partial``). An
    operation that resumes (``finished``: its work is all done) may get through the rest
    before a slow look at its progress sees it: once done, no later run can be
    interrupted, and none is made."""
    rng = random.Random(f"{SEED}-{name}")
    interrupted = runs = 0
    states: list[Snapshot] = []
    for _ in range(KILLS):
        if finished is not None and states and finished(states[-1]):
            break
        runs += 1
        interrupted += operation.run(rng.randint(0, most_items), rng.uniform(0, 0.01))
        states.append(assert_consistent(root, allowed))
    assert interrupted >= max(runs - 1, 2), f"only {interrupted} of {runs} kills interrupted {name}"
    assert any(map(partial, states)), f"no kill left {name} partly done"


def some_but_not_all(total: int) -> Callable[[Snapshot], bool]:
    return lambda files: 0 < len(files) < total


def count_files(root: Path) -> Callable[[], int]:
    return lambda: sum(1 for _ in (root / "experiments").rglob("[0-9a-f]*.md"))


# --- batches run in a child (module level, so the fork server can run them) ------------


def _create_batch(root: str, specs: list[dict[str, Any]], done: Any = None) -> None:
    store = Store(root)
    for spec in specs:
        try:
            store.create_experiment(**spec)
        except KexpError as exc:
            if "already exists" not in str(exc):
                raise
        if done is not None:
            done.value += 1


def _update_batch(root: str, exp_ids: list[str], rounds: int, done: Any = None) -> None:
    store = Store(root)
    for round_ in range(rounds):
        for exp_id in exp_ids:
            store.update_experiment(exp_id, raw_result=f"round {round_}", score=1 + round_ / 100)
            if done is not None:
                done.value += 1


def _delete_batch(root: str, exp_ids: list[str], done: Any = None) -> None:
    store = Store(root)
    for exp_id in exp_ids:
        try:
            store.delete_experiment(exp_id)
        except ExperimentNotFoundError:
            continue
        if done is not None:
            done.value += 1


def _specs(count: int) -> list[dict[str, Any]]:
    """Experiments with fixed ids and times (so every run writes the same bytes); every
    third is the child of the one before."""
    specs = []
    for n in range(count):
        exp_id = f"6749f3a0{n:08x}"
        specs.append(
            experiment_fields(
                id=exp_id,
                pid=f"6749f3a0{n - 1:08x}" if n % 3 == 2 else "",
                change_summary=f"Crash-tested change {n} - +1%",
                created_at="2026-11-29T15:52:36Z",
                base_commit=COMMIT,
                author="agent",
                raw_result=f"result {n}\n" * 20,
            )
        )
    return specs


# --- scenarios ------------------------------------------------------------------------


@pytest.mark.slow  # crash tests: pytest -m slow (.ci/run)
def test_killed_creates(tmp_path: Path) -> None:
    specs = _specs(100)
    reference = new_store(tmp_path / "reference")
    _create_batch(str(reference), specs)
    expected = files_of(reference)
    root = new_store(tmp_path / "store")
    allowed = {relative: {data} for relative, data in expected.items()}
    operation = in_child(_create_batch, str(root), specs)
    crash_repeatedly("create", operation, root, allowed, 12, some_but_not_all(len(expected)))
    assert operation.run(None) is False  # run again: completes
    assert files_of(root) == expected


@pytest.mark.slow  # crash tests: pytest -m slow (.ci/run)
def test_killed_updates(tmp_path: Path) -> None:
    rounds = 4
    specs = _specs(12)
    exp_ids = [spec["id"] for spec in specs]
    reference = new_store(tmp_path / "reference")
    _create_batch(str(reference), specs)
    root = tmp_path / "store"
    shutil.copytree(reference, root)
    versions = {relative: [data] for relative, data in files_of(reference).items()}
    store = Store(reference)
    for round_ in range(rounds):  # every version a file goes through
        for exp_id in exp_ids:
            store.update_experiment(exp_id, raw_result=f"round {round_}", score=1 + round_ / 100)
        for relative, data in files_of(reference).items():
            versions[relative].append(data)
    allowed = {relative: set(datas) for relative, datas in versions.items()}

    def partial(files: Snapshot) -> bool:  # the files are not all at the same round
        return len({versions[r].index(data) for r, data in files.items()}) > 1

    operation = in_child(_update_batch, str(root), exp_ids, rounds)
    crash_repeatedly("update", operation, root, allowed, rounds * len(specs) - 1, partial)
    assert operation.run(None) is False  # run again: completes
    assert files_of(root) == files_of(reference)


@pytest.mark.slow  # crash tests: pytest -m slow (.ci/run)
def test_killed_deletes(tmp_path: Path) -> None:
    specs = _specs(60)
    root = new_store(tmp_path / "store")
    _create_batch(str(root), specs)
    before = files_of(root)
    allowed = {relative: {data} for relative, data in before.items()}
    # Children before their parents (a parent's delete is refused while it has children).
    order = [spec["id"] for spec in reversed(specs)]
    operation = in_child(_delete_batch, str(root), order)
    crash_repeatedly("delete", operation, root, allowed, 8, some_but_not_all(len(before)))
    assert operation.run(None) is False  # run again: completes
    assert files_of(root) == {}
    assert Store(root).validate() == []


def _untidy(text: str) -> bytes:
    """A valid file as a person might leave it: keys out of order, a comment, CRLF."""
    lines = text.split("\n")
    score = next(i for i, line in enumerate(lines) if line.startswith("score:"))
    moved = lines.pop(score)
    close = lines.index("---", 1)
    lines.insert(close, moved)
    lines.insert(1, "# written by hand")
    return "\r\n".join(lines).encode()


def _legacy_database(count: int) -> dict[str, dict[str, Any]]:
    """The predecessor's database: every fourth record starts a chain of parents."""
    database = {}
    for n in range(count):
        exp_id = f"a1f0c3d2{n:08x}"
        record: dict[str, Any] = dict.fromkeys(LEGACY_FIELDS, "")
        record.update(
            id=exp_id,
            pid=f"a1f0c3d2{n - 1:08x}" if n % 4 else "",
            score=1 + n / 1000,
            is_buggy=False,
            status="done",
            change_summary=f"Imported change {n} - +{n / 10:.1f}%",
            detailed_description="**Approach**: x\n\n**Key insight**: y",
            raw_result=f"Iteration {n} Results - SUCCESS",
            dtype_sig="bf16",
            env="MI300X, ROCm 7.0.0",
            operator_sig="csrc/kernels/cache_kernels.cu: reshape_and_cache_flash",
            base_commit=COMMIT,
            created_at=f"2026-10-{1 + n % 28:02d}T09:10:00.{n:06d}Z",
        )
        database[exp_id] = record
    return database


@pytest.mark.slow  # crash tests: pytest -m slow (.ci/run)
def test_killed_fmt(tmp_path: Path) -> None:
    root = new_store(tmp_path / "store")
    _create_batch(str(root), _specs(80))
    originals = {}
    allowed: dict[str, set[bytes]] = {}
    for relative, data in files_of(root).items():
        untidy = _untidy(data.decode())
        (root / relative).write_bytes(untidy)
        canonical = canonical_text(untidy, root / relative).encode()
        assert canonical != untidy
        originals[relative] = untidy
        allowed[relative] = {untidy, canonical}
    reference = tmp_path / "reference"
    shutil.copytree(root, reference)
    assert kexp_command(reference, "fmt", progress=lambda: 0).run(None) is False
    expected = files_of(reference)
    assert all(expected[r] in allowed[r] and expected[r] != originals[r] for r in expected)

    def rewritten() -> int:  # files replaced so far (a new inode each)
        return sum(1 for r in originals if (root / r).stat().st_ino != inodes[r])

    inodes = {r: (root / r).stat().st_ino for r in originals}

    def partial(files: Snapshot) -> bool:  # some files rewritten, others not yet
        return len({files[r] == originals[r] for r in files}) == 2

    operation = kexp_command(root, "fmt", progress=rewritten)
    crash_repeatedly("fmt", operation, root, allowed, 15, partial)
    # Leftovers of killed writers: an hour old ones are swept by the next full fmt, a
    # fresh one (a writer may still own it) is kept, and so is a file that is not kexp's.
    found = sorted((root / "experiments/2026/11").rglob("*-*.md"))  # in its fan-out folder
    folder, name = found[0].parent, found[0].name
    stale = folder / f".{name}.0123456789ab.tmp"
    fresh = folder / f".{name}.ba9876543210.tmp"
    notes = folder / ".notes.tmp"
    for path in (stale, fresh, notes):
        path.write_bytes(b"---\nhalf")
    hour_ago = time.time() - 3700
    os.utime(stale, (hour_ago, hour_ago))
    os.utime(notes, (hour_ago, hour_ago))
    assert operation.run(None) is False  # run again: completes
    assert files_of(root) == expected
    assert not stale.exists() and fresh.exists() and notes.exists()
    checked = format_files(store=Store(root), check=True)
    assert {r.status for r in checked} == {"unchanged"}


@pytest.mark.slow  # crash tests: pytest -m slow (.ci/run)
def test_killed_import(tmp_path: Path) -> None:
    # Enough records for several of the import's batches (each written and synced,
    # then linked in place): kills land while some are in place and others are not.
    records = 3000
    source = tmp_path / "kernel_experiments_db.json"
    source.write_text(json.dumps(_legacy_database(records), indent=2, sort_keys=True))
    reference = new_store(tmp_path / "reference")
    import_legacy(source, Store(reference), check_commits=False)
    expected = files_of(reference)
    assert len(expected) == records

    root = new_store(tmp_path / "store")
    allowed = {relative: {data} for relative, data in expected.items()}
    operation = kexp_command(
        root, "import", str(source), "--no-check-commits", progress=count_files(root)
    )
    crash_repeatedly(
        "import", operation, root, allowed, 60, some_but_not_all(len(expected)),
        finished=lambda files: len(files) == len(expected),
    )  # fmt: skip
    assert operation.run(None) is False  # run again: completes, skipping what is there
    assert files_of(root) == expected


# --- the promises of docs/guarantees.md (the README's "Guarantees" sums them up) ------


def test_every_guarantee_in_the_docs_names_tests_that_exist() -> None:
    """Each guarantee of docs/guarantees.md (a ``###`` heading; the README's
    "Guarantees" section links to the page) names its tests, each as ``file.py::name``
    or a whole file: they must exist."""
    tests = Path(__file__).parent
    readme = (tests.parent / "README.md").read_text(encoding="utf-8")
    summary = readme.split("\n## Guarantees\n", 1)[1].split("\n## ", 1)[0]
    assert "docs/guarantees.md" in summary
    document = (tests.parent / "docs" / "guarantees.md").read_text(encoding="utf-8")
    guarantees = document.split("\n### ")[1:]
    assert len(guarantees) >= 10
    for guarantee in guarantees:
        text = guarantee.split("\n## ", 1)[0]
        names = re.findall(r"`(?:tests/)?(test_\w+\.py)(?:::(\w+))?`", text)
        assert names, guarantee.splitlines()[0]
        assert not re.search(r"`::\w+`", text), "a test named without its file"
        for module, function in names:
            source = (tests / module).read_text(encoding="utf-8")
            if function:
                assert f"def {function}(" in source, f"{module}::{function} is not a test"
