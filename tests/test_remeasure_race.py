"""Agents that remeasure and correct one experiment at once: every round and every dated
correction note lands. ``remeasure`` read the experiment, pooled its rounds and wrote
under the lock only at the end, and a correction with a reason read the description it
added its note to before the lock: two ``kexp mcp`` servers on one clone, each
remeasuring one experiment 6 times and re-tagging it 6 times, answered 24 successes and
kept 8 of the 12 rounds and 9 of the 12 notes.

Real processes (forked, each its own ``Store``, the real files and locks) start together
while the test holds the experiment's lock; it lets go once every one of them is waiting
for that lock (each says so as it first asks for it). Before the fix every process had
read the file by then, so all but one wrote over the others: the race is not left to
chance, it is made to happen every run. After it, each one reads the file only once it
holds the lock: none can write over another."""

from __future__ import annotations

import multiprocessing
import re
import warnings
from contextlib import AbstractContextManager
from pathlib import Path
from typing import Any

import kexp.storage.store as store_module
from kexp import Store
from kexp.measure.corrections import apply_correction
from kexp.measure.record import record_iteration
from kexp.measure.remeasure import remeasure

#: Processes remeasuring, and processes correcting the tags with a reason, at once.
REMEASURERS = 4
TAGGERS = 4


def _waiting_says(lock_path: str, waiting: Any) -> None:
    """Make this process say (once) when it first asks for the experiment's lock."""
    taken = store_module.exclusive_lock
    said = []

    def saying(path: Path, timeout_s: float) -> AbstractContextManager[None]:
        if str(path) == lock_path and not said:
            said.append(True)
            waiting.release()
        return taken(path, timeout_s)

    store_module.exclusive_lock = saying  # type: ignore[assignment]


def _agent(
    root: str, exp_id: str, n: int, go: Any, waiting: Any, answers: Any, lock_path: str
) -> None:
    """One agent: once told to go, remeasures (n < REMEASURERS) or re-tags with a reason."""
    warnings.simplefilter("ignore")  # the rounds' verdicts: not the question
    _waiting_says(lock_path, waiting)
    store = Store(root)
    go.wait()
    try:
        if n < REMEASURERS:
            base = [10.0 + n + i / 10 for i in range(6)]  # each round its own timings
            remeasure(
                store,
                exp_id,
                baseline={"n1024": base},
                candidate={"n1024": [t * 0.9 for t in base]},
                reason=f"round of agent {n}",
            )
        else:
            apply_correction(store, exp_id, {"tags": [f"agent{n}"]}, f"tagged by agent {n}")
    except Exception as exc:  # the test's failure, said in the parent
        answers.put(f"agent {n}: {type(exc).__name__}: {exc}")
    else:
        answers.put("")


def test_rounds_and_notes_written_at_once_all_land(repo: Path) -> None:
    (repo / "kexp.toml").write_text("lock_timeout_s = 600\n", encoding="utf-8")
    store = Store(repo)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        exp = record_iteration(
            store,
            baseline={"n1024": [10.0, 10.2, 10.1, 10.3, 10.2, 10.4]},
            candidate={"n1024": [9.0, 9.2, 9.1, 9.3, 9.2, 9.4]},
            change_summary="Vectorized loads - +10%",
            operator_sig="csrc/softmax.cu: softmax_kernel",
            dtype_sig="bf16",
            env="H100",
        )
    lock_path = str(store.cache_dir / "locks" / f"{exp.id}.lock")
    context = multiprocessing.get_context("fork")
    agents = REMEASURERS + TAGGERS
    go, waiting, answers = context.Event(), context.Semaphore(0), context.Queue()
    processes = [
        context.Process(target=_agent, args=(str(repo), exp.id, n, go, waiting, answers, lock_path))
        for n in range(agents)
    ]
    for process in processes:  # started before the lock is taken: none inherits it
        process.start()
    with store.lock(exp.id):
        go.set()
        for _ in processes:  # every agent asks for the lock before any gets it
            assert waiting.acquire(timeout=120)
    said = [answers.get(timeout=300) for _ in processes]
    for process in processes:
        process.join(timeout=120)
    assert [text for text in said if text] == []

    final = store.get_experiment(exp.id)
    rounds = sorted({int(n) for n in re.findall(r'"round": (\d+)', final.samples)})
    assert rounds == list(range(1, REMEASURERS + 2))  # round 1 and every agent's
    notes = final.detailed_description
    for n in range(REMEASURERS):
        assert f"Reason: round of agent {n}" in notes
    for n in range(REMEASURERS, agents):
        assert f"Reason: tagged by agent {n}" in notes
    assert len(re.findall(r"\*\*Correction \(", notes)) == agents
    assert final.raw_result.count("Results") >= REMEASURERS + 1
    assert store.validate() == []
