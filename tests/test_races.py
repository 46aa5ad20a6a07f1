"""Races: real processes writing and reading one store at once; nothing lost, nothing
half-written.

Every worker is a separate Python process, as parallel agents are; they wait at a
barrier so their writes really overlap. Processes are forked from a fresh fork server
that has imported this module once ('forkserver'): no state of the test process (open
git processes, locks) is inherited, and no worker pays for the imports again. The random
choices are seeded, so a failure reproduces.

- Many writers: parallel creates (also of one explicit id), updates of different fields,
  updates while creating, a held lock timing out, a crashed writer's temporary file.
- Many writers at once, as on a machine where dozens of agents record their iterations
  (marked slow): 32 processes at the same moment: creators, writers updating one shared
  experiment, writers updating their own, deleters, and readers that list, rank and read
  every file the whole time. Afterwards: nothing lost, nothing duplicated, every update
  applied (none undone by a stale copy), no deleted experiment back, no reader ever saw a
  partial or invalid file or a value going back in time, and the store validates.
- A writer killed with SIGKILL while it holds an experiment's lock delays the next writer
  by milliseconds, not seconds. A parent deleted while a child of it is recorded: exactly
  one of the two succeeds.
- ``kexp fmt`` and files that come and go while it runs (another process, git, rm).
"""

from __future__ import annotations

import fcntl
import multiprocessing
import os
import queue
import random
import re
import signal
import subprocess
import sys
import time
import traceback
from collections.abc import Callable
from multiprocessing.synchronize import Barrier, Event
from pathlib import Path
from typing import Any

import pytest
from conftest import experiment_fields, git, run_kexp

from kexp import ExperimentNotFoundError, KexpError, LockTimeoutError, Settings, Store
from kexp.format.validate import check_bytes
from kexp.storage.locking import exclusive_lock

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


def test_a_lock_timeout_under_a_second_is_said_as_it_is(repo: Path, store: Store) -> None:
    """``kexp update`` waiting on a lock held elsewhere, with ``lock_timeout_s = 0.3`` in
    kexp.toml, gives up saying the figure it waited ("for over 0.3 s", not "0 s")."""
    exp = store.create_experiment(**experiment_fields())
    lock_path = store.cache_dir / "locks" / f"{exp.id}.lock"
    (repo / "kexp.toml").write_text("lock_timeout_s = 0.3\n", encoding="utf-8")
    held = CONTEXT.Event()
    holder = CONTEXT.Process(target=_hold_lock, args=(str(lock_path), held))
    holder.start()
    try:
        assert held.wait(timeout=60)
        done = run_kexp("update", exp.id, "--set", "score=1.5", cwd=repo, process=True)
    finally:
        holder.kill()
        holder.join(timeout=30)
    assert done.returncode != 0
    said = done.stderr.strip()
    assert f"has held {lock_path} for over 0.3 s; try again" in said and "\n" not in said, said


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


# --- many writers at once, killed writers, lineage ---------------------------------------

CREATORS, SHARED_UPDATERS, OWN_UPDATERS, DELETERS, READERS = 8, 8, 8, 4, 4
STRESS_WORKERS = CREATORS + SHARED_UPDATERS + OWN_UPDATERS + DELETERS + READERS
CREATES_EACH = 12
ROUNDS = 5
VICTIMS_EACH = 6
#: One field of the shared experiment per shared updater.
SHARED_FIELDS = (
    "raw_result",
    "profiling_info",
    "code_change",
    "error_message",
    "detailed_description",
    "env",
    "dtype_sig",
    "operator_sig",
)
ROUND_RE = re.compile(r"round (\d+) by (\S+)")


def _stamp(round_: int, who: str) -> str:
    return f"round {round_} by {who}"


# --- workers (module level, so the fork server can run them) ---------------------------


def _creator(root: str, worker: int, parent: str, head: str, barrier: Barrier) -> list[str]:
    store = Store(root)
    barrier.wait(timeout=120)
    created = []
    for number in range(CREATES_EACH):
        exp = store.create_experiment(
            **experiment_fields(
                change_summary=f"Creator {worker} try {number} - +1%",
                pid=parent if number % 2 else "",
                measured_against="parent" if number % 2 else "",
                base_commit=head,
                author=f"creator {worker}",
            )
        )
        created.append(exp.id)
    return created


def _shared_updater(root: str, worker: int, shared: str, barrier: Barrier) -> int:
    store = Store(root)
    field = SHARED_FIELDS[worker]
    barrier.wait(timeout=120)
    for round_ in range(ROUNDS):
        store.update_experiment(shared, **{field: _stamp(round_, field)})
    return ROUNDS


def _own_updater(root: str, worker: int, own: str, victim: str, barrier: Barrier) -> str:
    """Update one's own experiment every round, and a victim a deleter is deleting."""
    store = Store(root)
    barrier.wait(timeout=120)
    victim_outcome = "updated"
    for round_ in range(ROUNDS):
        store.update_experiment(own, score=1.0 + round_ / 100, raw_result=_stamp(round_, "own"))
        if victim_outcome == "updated":
            try:
                store.update_experiment(victim, raw_result=_stamp(round_, "victim"))
            except ExperimentNotFoundError:
                victim_outcome = "gone"
    return victim_outcome


def _deleter(root: str, victims: list[str], protected: str, seed: int, barrier: Barrier) -> int:
    store = Store(root)
    rng = random.Random(seed)
    barrier.wait(timeout=120)
    for victim in victims:
        time.sleep(rng.uniform(0, 0.05))
        store.delete_experiment(victim)
    try:
        store.delete_experiment(protected)  # the parent of others: refused
    except KexpError as exc:
        assert "parent" in str(exc)
        return len(victims)
    raise AssertionError(f"deleted {protected}, the parent of other experiments")


def _reader(
    root: str, shared: str, owned: list[str], stop: Event, barrier: Barrier
) -> dict[str, Any]:
    """List, rank and read everything until told to stop; report anything wrong seen."""
    store = Store(root)
    problems: list[str] = []
    last: dict[str, int] = {}
    iterations = files = 0
    barrier.wait(timeout=120)

    def seen(key: str, text: str) -> None:
        match = ROUND_RE.search(text)
        if match is None:
            return
        round_ = int(match[1])
        if round_ < last.get(key, -1):
            problems.append(f"{key} went back from round {last[key]} to {round_}")
        last[key] = max(round_, last.get(key, -1))

    while not stop.is_set() or iterations < 2:
        try:
            experiments = store.list_experiments(strict=True)
            store.top_experiments(5, strict=True, brief=True)
            exp = store.get_experiment(shared)
        except KexpError as exc:
            problems.append(f"a query failed: {exc}")
            experiments, exp = [], None
        if exp is not None:
            for field in SHARED_FIELDS:
                seen(field, getattr(exp, field))
        for item in experiments:
            if item.id in owned:
                seen(item.id, item.raw_result)
        for path in store.paths():
            try:
                data = path.read_bytes()
            except FileNotFoundError:
                continue  # deleted since it was listed
            files += 1
            checked = check_bytes(data, path)
            if not checked.ok:
                problems.append(f"{path} read invalid: {[p.format() for p in checked.problems]}")
        iterations += 1
        time.sleep(0.02)
    return {"problems": problems, "iterations": iterations, "files": files}


def _update_forever(root: str, exp_id: str, started: Event) -> None:
    store = Store(root)
    round_ = 0
    while True:
        store.update_experiment(exp_id, raw_result=_stamp(round_, "doomed"), score=1 + round_ / 1e4)
        round_ += 1
        if round_ == 3:
            started.set()


@pytest.mark.slow  # scale: 32 processes (pytest -m slow, .ci/run)
def test_32_processes_create_update_delete_and_read_at_once(repo: Path, store: Store) -> None:
    head = git(repo, "rev-parse", "HEAD")

    def make(summary: str, **fields: Any) -> str:
        fields = {"base_commit": head, "author": "setup", **fields}
        return store.create_experiment(**experiment_fields(change_summary=summary, **fields)).id

    parent = make("Parent of many - +1%")
    protected = make("Protected parent - +1%")
    make("Child of the protected one - +1%", pid=protected, measured_against="parent")
    shared = make("Shared target - +1%")
    owned = [make(f"Own target {n} - +1%") for n in range(OWN_UPDATERS)]
    victims = [
        [make(f"Victim {d}.{n} - +1%") for n in range(VICTIMS_EACH)] for d in range(DELETERS)
    ]
    before = {p.name[:16] for p in store.paths()}

    workers = Workers()
    barrier = CONTEXT.Barrier(STRESS_WORKERS)
    stop = CONTEXT.Event()
    creators = [
        workers.start(_creator, str(repo), n, parent, head, barrier) for n in range(CREATORS)
    ]
    sharers = [
        workers.start(_shared_updater, str(repo), n, shared, barrier)
        for n in range(SHARED_UPDATERS)
    ]
    owners = [
        workers.start(
            _own_updater, str(repo), n, owned[n], victims[n % DELETERS][n // DELETERS], barrier
        )
        for n in range(OWN_UPDATERS)
    ]
    deleters = [
        workers.start(_deleter, str(repo), victims[n], protected, 1000 + n, barrier)
        for n in range(DELETERS)
    ]
    readers = [
        workers.start(_reader, str(repo), shared, owned, stop, barrier) for n in range(READERS)
    ]
    writers = creators + sharers + owners + deleters
    assert len(writers) + len(readers) == STRESS_WORKERS == 32
    results = workers.collect(len(writers))
    stop.set()
    results.update(workers.collect(len(readers)))
    workers.join()

    # Nothing lost, nothing duplicated.
    created = [exp_id for n in creators for exp_id in results[n]]
    assert len(created) == len(set(created)) == CREATORS * CREATES_EACH
    deleted = {exp_id for group in victims for exp_id in group}
    names = [p.name[:16] for p in store.paths()]
    assert len(names) == len(set(names))
    assert set(names) == (before - deleted) | set(created)
    summaries = {e.change_summary for e in store.list_experiments(strict=True)}
    assert {f"Creator {w} try {n} - +1%" for w in range(CREATORS) for n in range(CREATES_EACH)} <= (
        summaries
    )
    # Every update applied, none undone by a stale copy.
    final = store.get_experiment(shared)
    for field in SHARED_FIELDS:
        assert getattr(final, field) == _stamp(ROUNDS - 1, field), field
    assert final.change_summary == "Shared target - +1%"
    for exp_id in owned:
        mine = store.get_experiment(exp_id)
        assert (mine.score, mine.raw_result) == (
            1.0 + (ROUNDS - 1) / 100,
            _stamp(ROUNDS - 1, "own"),
        )
    assert {results[n] for n in owners} <= {"updated", "gone"}  # and the victim stayed gone
    assert [results[n] for n in deleters] == [VICTIMS_EACH] * DELETERS
    # The readers never saw a half-written or invalid file, nor a value going back.
    for n in readers:
        assert results[n]["problems"] == [], results[n]["problems"][:5]
        assert results[n]["iterations"] >= 2 and results[n]["files"] > 0
    assert store.validate() == []
    assert temporary_files(repo) == []


def test_a_writer_killed_holding_the_lock_blocks_nobody(repo: Path, store: Store) -> None:
    """SIGKILL a process in the middle of updates, at a moment it holds the experiment's
    lock (it is frozen first, and killed only if the lock is taken): the next writer
    gets the lock at once, and nothing the dead writer left is read by a query."""
    exp = store.create_experiment(**experiment_fields())
    assert exp.path is not None
    lock_path = store.cache_dir / "locks" / f"{exp.id}.lock"
    rng = random.Random(20261129)
    kills = 0
    for attempt in range(40):
        started = CONTEXT.Event()
        writer = CONTEXT.Process(target=_update_forever, args=(str(repo), exp.id, started))
        writer.start()
        assert started.wait(timeout=60)
        time.sleep(rng.uniform(0, 0.05))
        os.kill(writer.pid, signal.SIGSTOP)
        fd = os.open(lock_path, os.O_RDWR)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            held = False
            fcntl.flock(fd, fcntl.LOCK_UN)
        except BlockingIOError:
            held = True
        finally:
            os.close(fd)
        os.kill(writer.pid, signal.SIGKILL)
        writer.join(timeout=30)
        assert writer.exitcode == -signal.SIGKILL
        if not held:
            continue
        kills += 1
        waited = time.monotonic()
        updated = store.update_experiment(exp.id, raw_result=f"after kill {attempt}")
        assert time.monotonic() - waited < 2.0
        assert updated.raw_result == f"after kill {attempt}"
        assert [e.id for e in store.list_experiments(strict=True)] == [exp.id]
        assert store.validate() == []
        if kills == 8:
            break
    assert kills == 8, f"the writer held the lock at only {kills} of {attempt + 1} freezes"
    # Whatever temporary files the dead writers left are hidden from every query.
    assert store.paths() == [exp.path]
    for leftover in temporary_files(repo):
        assert leftover.name.startswith(".") and leftover.parent == exp.path.parent


def _adopt(root: str, parents: list[str], head: str, barrier: Barrier) -> list[str]:
    store = Store(root)
    born = []
    for parent in parents:
        barrier.wait(timeout=120)
        try:
            exp = store.create_experiment(
                **experiment_fields(
                    pid=parent, measured_against="parent", base_commit=head, author="adopter"
                )
            )
            born.append(exp.id)
        except KexpError:
            pass  # the parent was deleted first: refused, as it should be
    return born


def _orphan(root: str, parents: list[str], barrier: Barrier) -> list[str]:
    store = Store(root)
    deleted = []
    for parent in parents:
        barrier.wait(timeout=120)
        try:
            store.delete_experiment(parent)
            deleted.append(parent)
        except KexpError:
            pass  # a child was recorded first: refused, as it should be
    return deleted


def test_a_parent_is_never_deleted_under_a_new_child(repo: Path, store: Store) -> None:
    """One process records a child of each experiment while another deletes it: either
    the child is refused (its parent is gone) or the delete is (it has a child), never
    both succeed and leave a child pointing nowhere."""
    head = git(repo, "rev-parse", "HEAD")
    parents = [
        store.create_experiment(
            **experiment_fields(change_summary=f"Parent {n} - +1%", base_commit=head)
        ).id
        for n in range(20)
    ]
    workers = Workers()
    barrier = CONTEXT.Barrier(2)
    adopter = workers.start(_adopt, str(repo), parents, head, barrier)
    deleter = workers.start(_orphan, str(repo), parents, barrier)
    results = workers.collect(2)
    workers.join()
    assert [p for p in store.validate() if p.severity == "error"] == []
    assert len(results[adopter]) + len(results[deleter]) == len(parents)


# --- kexp fmt while files come and go -------------------------------------------------------


def test_files_deleted_while_kexp_fmt_runs_are_no_problem(store: Store, repo: Path) -> None:
    """kexp fmt lists the files, then formats each under its lock: one deleted after it
    was listed (here: while fmt waits for its lock, held by this process) is simply
    gone, not an error, and is not brought back."""
    exps = [
        store.create_experiment(**experiment_fields(change_summary=f"Try {n} - +{n}%"))
        for n in range(3)
    ]
    paths = sorted(e.path for e in exps if e.path is not None)
    for path in paths:  # a comment in the front-matter: not canonical
        path.write_text(path.read_text().replace("---\n", "---\n# a hand note\n", 1))
    first, second, third = paths
    first_text = first.read_bytes()
    second_id = second.name[:16]
    with store.lock(second_id):
        formatting = subprocess.Popen(
            [sys.executable, "-m", "kexp", "fmt"],
            cwd=repo,
            env={**os.environ, "KEXP_ROOT": str(repo)},
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        deadline = time.monotonic() + 60
        while first.read_bytes() == first_text:  # fmt is at the second file, waiting
            assert time.monotonic() < deadline and formatting.poll() is None
            time.sleep(0.01)
        second.unlink()
    out, err = formatting.communicate(timeout=60)
    assert formatting.returncode == 0, out + err
    assert "error" not in err and "Traceback" not in err, err
    assert "2 file(s) reformatted" in err
    assert not second.exists()
    assert "# a hand note" not in third.read_text()
