"""Many real processes writing one store at once: nothing lost, nothing half-written.

Every worker is a separate Python process, as parallel agents are; they wait at a
barrier so their writes really overlap. Processes are forked from a fresh fork server
that has imported this module once ('forkserver'): no state of the test process (open
git processes, locks) is inherited, and no worker pays for the imports again.
"""

from __future__ import annotations

import multiprocessing
import queue
import re
import time
import traceback
from collections.abc import Callable
from multiprocessing.synchronize import Barrier, Event
from pathlib import Path
from typing import Any

import pytest
from conftest import experiment_fields, git

from kexp import KexpError, LockTimeoutError, Settings, Store
from kexp.locking import exclusive_lock
from kexp.validate import check_bytes

CONTEXT = multiprocessing.get_context("forkserver")
CONTEXT.set_forkserver_preload([__name__])
WORKERS = 8
CREATES_PER_WORKER = 50
UPDATE_ROUNDS = 6
#: One front-matter or body field per updating worker.
UPDATED_FIELDS = (
    "raw_result",
    "profiling_info",
    "code_change",
    "error_message",
    "detailed_description",
    "env",
    "dtype_sig",
    "operator_sig",
)
VALUE_RE = re.compile(r"(?P<field>[a-z_]+) by worker (?P<worker>\d+), round (?P<round>\d+)")


def _value(field: str, worker: int, round_: int) -> str:
    return f"{field} by worker {worker}, round {round_}"


# --- worker bodies (module level: spawned processes import them) ------------------------


def _guarded(target: Callable[..., Any], results: Any, index: int, *args: Any) -> None:
    try:
        results.put((index, "ok", target(*args)))
    except BaseException:
        results.put((index, "error", traceback.format_exc()))


def _create_many(
    root: str, worker: int, count: int, barrier: Barrier, base_commit: str = ""
) -> list[str]:
    """Create ``count`` experiments; with ``base_commit`` (and so an author) given, git
    is not asked for them, and the store's own write path is what runs in parallel."""
    store = Store(root)
    given = {"base_commit": base_commit, "author": f"Agent {worker}"} if base_commit else {}
    barrier.wait(timeout=60)
    created = []
    for number in range(count):
        exp = store.create_experiment(
            **experiment_fields(
                change_summary=f"Worker {worker} try {number} - +1.9%",
                raw_result=f"worker {worker} try {number}",
                **given,
            )
        )
        created.append(exp.id)
    return created


def _create_same_id(
    root: str, worker: int, exp_ids: list[str], barrier: Barrier, base_commit: str
) -> list[str]:
    store = Store(root)
    won = []
    for exp_id in exp_ids:
        barrier.wait(timeout=60)
        try:
            store.create_experiment(
                **experiment_fields(
                    id=exp_id,
                    change_summary=f"Worker {worker} claims - x",
                    base_commit=base_commit,
                    author=f"Agent {worker}",
                )
            )
        except KexpError:
            continue
        won.append(exp_id)
    return won


def _update_one_field(root: str, worker: int, exp_id: str, rounds: int, barrier: Barrier) -> int:
    store = Store(root)
    field = UPDATED_FIELDS[worker]
    barrier.wait(timeout=60)
    for round_ in range(rounds):
        store.update_experiment(exp_id, **{field: _value(field, worker, round_)})
    return rounds


def _hold_lock(lock_path: str, held: Event) -> None:
    """Take an experiment's write lock and keep it until killed."""
    with exclusive_lock(Path(lock_path), timeout_s=10):
        held.set()
        time.sleep(600)


def _read_until_stopped(root: str, stop: Event, watched_id: str) -> dict[str, Any]:
    """List (strict) and read every file until told to stop; report what was seen."""
    store = Store(root)
    iterations = 0
    files_read = 0
    problems: list[str] = []
    last_round: dict[str, int] = {}
    while not stop.is_set() or iterations == 0:
        try:
            experiments = store.list_experiments(strict=True)
        except KexpError as exc:
            problems.append(f"list_experiments(strict=True) failed: {exc}")
            experiments = []
        for path in store.paths():
            data = path.read_bytes()
            files_read += 1
            checked = check_bytes(data, path)
            if not checked.ok or not data.endswith(b"\n"):
                problems.append(f"{path} was read half-written or invalid: {data[-80:]!r}")
        for exp in experiments:
            if exp.id != watched_id:
                continue
            for field in UPDATED_FIELDS:
                match = VALUE_RE.fullmatch(getattr(exp, field))
                if match is None:
                    continue
                round_ = int(match["round"])
                if round_ < last_round.get(field, -1):
                    problems.append(f"{field} went back from round {last_round[field]} to {round_}")
                last_round[field] = round_
        iterations += 1
        time.sleep(0.01)  # leave the writers some of the CPU
    return {"iterations": iterations, "files_read": files_read, "problems": problems}


# --- helpers -------------------------------------------------------------------------------


class Workers:
    """Start processes running ``_guarded`` targets; collect their results or tracebacks."""

    def __init__(self) -> None:
        self.results: Any = CONTEXT.Queue()
        self.processes: list[Any] = []

    def start(self, target: Callable[..., Any], *args: Any) -> int:
        index = len(self.processes)
        process = CONTEXT.Process(target=_guarded, args=(target, self.results, index, *args))
        process.start()
        self.processes.append(process)
        return index

    def collect(self, count: int, timeout_s: float = 180) -> dict[int, Any]:
        """The next ``count`` results; fails on a worker's error, death or a timeout."""
        deadline = time.monotonic() + timeout_s
        collected: dict[int, Any] = {}
        errors: list[str] = []
        while len(collected) + len(errors) < count:
            try:
                index, kind, value = self.results.get(timeout=1.0)
            except queue.Empty:
                dead = [p.exitcode for p in self.processes if p.exitcode not in (None, 0)]
                if dead or time.monotonic() > deadline:
                    self.kill()
                    pytest.fail(f"workers died (exit codes {dead}) or timed out; {errors}")
                continue
            if kind == "ok":
                collected[index] = value
            else:
                errors.append(f"worker {index} failed:\n{value}")
        if errors:
            self.kill()
            pytest.fail("\n".join(errors))
        return collected

    def kill(self) -> None:
        for process in self.processes:
            if process.is_alive():
                process.kill()

    def join(self) -> None:
        for process in self.processes:
            process.join(timeout=30)
        self.kill()
        assert [p.exitcode for p in self.processes] == [0] * len(self.processes)


def temporary_files(root: Path) -> list[Path]:
    return [p for p in root.rglob("*") if p.name.endswith(".tmp")]


# --- tests -------------------------------------------------------------------------------------


def test_parallel_creates_lose_nothing(repo: Path, store: Store) -> None:
    seed = store.create_experiment(**experiment_fields(change_summary="Seed - baseline"))
    workers = Workers()
    barrier = CONTEXT.Barrier(WORKERS)
    stop = CONTEXT.Event()
    head = git(repo, "rev-parse", "HEAD")
    reader = workers.start(_read_until_stopped, str(repo), stop, seed.id)
    writers = [
        workers.start(_create_many, str(repo), worker, CREATES_PER_WORKER, barrier, head)
        for worker in range(WORKERS)
    ]
    created = workers.collect(len(writers))
    stop.set()
    seen = workers.collect(1)[reader]
    workers.join()

    all_ids = [exp_id for worker in writers for exp_id in created[worker]]
    assert len(all_ids) == WORKERS * CREATES_PER_WORKER
    assert len(set(all_ids)) == len(all_ids)
    paths = store.paths()
    assert len(paths) == len(all_ids) + 1
    assert {p.name.split("-")[0] for p in paths} == {*all_ids, seed.id}
    assert store.validate() == []
    experiments = store.list_experiments(strict=True)
    assert {e.id for e in experiments} == {*all_ids, seed.id}
    assert {e.base_commit for e in experiments} == {head}
    summaries = {e.change_summary for e in experiments}
    assert {
        f"Worker {w} try {n} - +1.9%" for w in range(WORKERS) for n in range(CREATES_PER_WORKER)
    } <= summaries
    assert seen["problems"] == []
    assert seen["iterations"] >= 2
    assert temporary_files(repo) == []


def test_parallel_creates_with_the_same_explicit_id_create_one_file(
    repo: Path, store: Store
) -> None:
    exp_ids = [f"6749f3a0{n:08x}" for n in range(6)]
    workers = Workers()
    barrier = CONTEXT.Barrier(WORKERS)
    head = git(repo, "rev-parse", "HEAD")
    for worker in range(WORKERS):
        workers.start(_create_same_id, str(repo), worker, exp_ids, barrier, head)
    won = workers.collect(WORKERS)
    workers.join()

    winners = sorted(exp_id for ids in won.values() for exp_id in ids)
    assert winners == exp_ids  # each id claimed exactly once
    assert sorted(p.name[:16] for p in store.paths()) == exp_ids
    assert store.validate() == []
    assert temporary_files(repo) == []


def test_parallel_updates_of_different_fields_lose_nothing(repo: Path, store: Store) -> None:
    exp = store.create_experiment(**experiment_fields(tags=["cache"]))
    assert exp.path is not None
    workers = Workers()
    barrier = CONTEXT.Barrier(WORKERS)
    stop = CONTEXT.Event()
    reader = workers.start(_read_until_stopped, str(repo), stop, exp.id)
    writers = [
        workers.start(_update_one_field, str(repo), worker, exp.id, UPDATE_ROUNDS, barrier)
        for worker in range(WORKERS)
    ]
    workers.collect(len(writers))
    stop.set()
    seen = workers.collect(1)[reader]
    workers.join()

    final = store.get_experiment(exp.id)
    for worker, field in enumerate(UPDATED_FIELDS):
        assert getattr(final, field) == _value(field, worker, UPDATE_ROUNDS - 1), field
    # Fields nobody touched are as they were.
    assert (final.score, final.change_summary, final.tags, final.created_at) == (
        exp.score,
        exp.change_summary,
        exp.tags,
        exp.created_at,
    )
    assert final.path == exp.path
    assert store.paths() == [exp.path]
    assert store.validate() == []
    assert seen["problems"] == []
    assert seen["iterations"] >= 2
    assert temporary_files(repo) == []


def test_updates_of_many_experiments_while_creating(repo: Path, store: Store) -> None:
    """Writers of different kinds at once: creates and updates of several experiments."""
    targets = [
        store.create_experiment(**experiment_fields(change_summary=f"Target {n} - ok"))
        for n in range(WORKERS // 2)
    ]
    workers = Workers()
    barrier = CONTEXT.Barrier(WORKERS)
    writers = []
    for worker in range(WORKERS):
        if worker % 2:
            writers.append(workers.start(_create_many, str(repo), worker, 10, barrier))
        else:
            target = targets[worker // 2].id
            writers.append(
                workers.start(_update_one_field, str(repo), worker, target, UPDATE_ROUNDS, barrier)
            )
    workers.collect(len(writers))
    workers.join()

    for worker in range(0, WORKERS, 2):
        field = UPDATED_FIELDS[worker]
        final = store.get_experiment(targets[worker // 2].id)
        assert getattr(final, field) == _value(field, worker, UPDATE_ROUNDS - 1)
    assert len(store.paths()) == len(targets) + 10 * (WORKERS // 2)
    assert store.validate() == []
    assert temporary_files(repo) == []


def test_a_held_lock_times_out_and_dies_with_its_holder(repo: Path, store: Store) -> None:
    exp = store.create_experiment(**experiment_fields())
    assert exp.path is not None
    before = exp.path.read_bytes()
    lock_path = store.cache_dir / "locks" / f"{exp.id}.lock"
    held = CONTEXT.Event()
    holder = CONTEXT.Process(target=_hold_lock, args=(str(lock_path), held))
    holder.start()
    try:
        assert held.wait(timeout=60)
        impatient = Store(repo, settings=Settings(lock_timeout_s=0.3))
        started = time.monotonic()
        with pytest.raises(LockTimeoutError, match="try again"):
            impatient.update_experiment(exp.id, score=1.5)
        assert 0.3 <= time.monotonic() - started < 10
        assert exp.path.read_bytes() == before
    finally:
        holder.kill()  # SIGKILL: no clean-up runs; the kernel drops the lock
        holder.join(timeout=30)
    assert store.update_experiment(exp.id, score=1.5).score == 1.5
    assert lock_path.exists()  # lock files are kept; only the lock is released


def test_a_crashed_writers_temporary_file_is_ignored(repo: Path, store: Store) -> None:
    exp = store.create_experiment(**experiment_fields())
    assert exp.path is not None
    half = exp.path.read_bytes()[:40]
    leftover = exp.path.with_name(f".{exp.path.name}.0123456789ab.tmp")
    leftover.write_bytes(half)
    assert [e.id for e in store.list_experiments(strict=True)] == [exp.id]
    assert store.validate() == []
    assert store.update_experiment(exp.id, score=1.25).score == 1.25
    assert leftover.read_bytes() == half  # not ours to delete: another writer may own it
