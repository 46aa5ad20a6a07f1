"""Agents that record the same timings at once: the check that no experiment holds this
measurement already ("the same record made again?") and the write are one step, so
exactly one record is written and every other is refused. The check ran before the
store's locks: 8 agents recording through ``kexp mcp`` wrote two identical records in
about one run of 5. Here real processes (forked, each its own ``Store``, the real files
and locks) start their records together at a barrier, round after round: before the
fix, 8 processes over 3 rounds wrote a duplicate in every run measured (20 of 20)."""

from __future__ import annotations

import multiprocessing
import warnings
from pathlib import Path
from typing import Any

from kexp import Store
from kexp.core.errors import ExperimentExistsError
from kexp.measure.record import record_iteration

#: Processes recording the same timings at once, and rounds of them.
WRITERS = 8
ROUNDS = 3


def _record_once(
    root: str, barrier: Any, answers: Any, fields: dict[str, Any], timings: dict[str, Any]
) -> None:
    """One agent: waits for the others, then records; says what became of it."""
    warnings.simplefilter("ignore")  # a repeat's or a timing's warning: not the question
    store = Store(root)
    barrier.wait()
    try:
        exp = record_iteration(store, **timings, **fields)
    except ExperimentExistsError as exc:
        answers.put(("refused", str(exc)))
    except Exception as exc:  # anything else is the test's failure, said in the parent
        answers.put(("error", f"{type(exc).__name__}: {exc}"))
    else:
        answers.put(("written", exp.id))


def test_the_same_timings_recorded_at_once_are_written_once(repo: Path) -> None:
    # The last of the writers waits for the others' checks: on a loaded machine, longer
    # than the default lock timeout.
    (repo / "kexp.toml").write_text("lock_timeout_s = 600\n", encoding="utf-8")
    store = Store(repo)
    context = multiprocessing.get_context("fork")
    for round_ in range(ROUNDS):
        parent = store.create_experiment(
            change_summary=f"round {round_} parent - +2%", score=1.02, status="done",
            operator_sig="csrc/softmax.cu: softmax_kernel", dtype_sig="bf16", env="H100",
        )  # fmt: skip
        base = [t + round_ for t in (10.0, 10.2, 10.1, 10.3, 10.2, 10.4)]  # 5 or more: a copy
        timings = {
            "baseline": {"n1024": base},
            "candidate": {"n1024": [t * 0.95 for t in base]},
        }
        barrier = context.Barrier(WRITERS)
        answers = context.Queue()
        writers = [
            context.Process(
                target=_record_once,
                args=(
                    str(repo),
                    barrier,
                    answers,
                    {"change_summary": f"parallel {n} - x", "pid": parent.id},
                    timings,
                ),
            )
            for n in range(WRITERS)
        ]
        for writer in writers:
            writer.start()
        said = [answers.get(timeout=120) for _ in writers]
        for writer in writers:
            writer.join(timeout=120)
        assert [kind for kind, _ in said if kind == "error"] == [], said
        written = [text for kind, text in said if kind == "written"]
        refused = [text for kind, text in said if kind == "refused"]
        assert len(written) == 1, f"round {round_}: {len(written)} identical records: {said}"
        assert all("holds this measurement already" in text for text in refused), refused
        children = [e for e in store.list_experiments() if e.pid == parent.id]
        assert [e.id for e in children] == written
