"""Many writers at once, as on a machine where dozens of agents record their iterations.

32 real processes run at the same moment (a barrier starts them together): creators,
writers updating one shared experiment, writers updating their own experiments,
deleters, and readers that list, rank and read every file the whole time. Afterwards:
nothing lost, nothing duplicated, every update applied (none undone by a stale copy), no
deleted experiment back, no reader ever saw a partial or invalid file or a value going
back in time, and the store validates. A writer killed with SIGKILL while it holds an
experiment's lock delays the next writer by milliseconds, not seconds. A parent deleted
while a child of it is recorded: exactly one of the two succeeds.

Workers run in processes forked from a fork server (see ``test_concurrency``); the
random choices are seeded, so a failure reproduces.
"""

from __future__ import annotations

import fcntl
import os
import random
import re
import signal
import time
from multiprocessing.synchronize import Barrier, Event
from pathlib import Path
from typing import Any

from conftest import experiment_fields, git
from test_concurrency import CONTEXT, Workers, temporary_files

from kexp import ExperimentNotFoundError, KexpError, Store
from kexp.validate import check_bytes

CREATORS, SHARED_UPDATERS, OWN_UPDATERS, DELETERS, READERS = 8, 8, 8, 4, 4
WORKERS = CREATORS + SHARED_UPDATERS + OWN_UPDATERS + DELETERS + READERS
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


# --- tests ----------------------------------------------------------------------------


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
    barrier = CONTEXT.Barrier(WORKERS)
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
    assert len(writers) + len(readers) == WORKERS == 32
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
