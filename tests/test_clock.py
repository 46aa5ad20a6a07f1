"""Recording at the turn of a month and of a year, on a clock the tests control.

kexp reads the time for new ids and ``created_at`` from one function,
:func:`kexp.core.ids.current_time`; these tests set it to a chosen moment (the last second
of a year, of a month) and let it run on in step with real time, so that the cache sees
real pauses between the steps, as a user's commands would have.
"""

from __future__ import annotations

import datetime as dt
import time
from collections.abc import Callable
from pathlib import Path

import pytest
from conftest import experiment_fields, past_racy_window

import kexp.core.ids
from kexp import Store
from kexp.cli.main import main


class Clock:
    """A clock set to a chosen moment, running on with real time."""

    def __init__(self) -> None:
        self._offset = 0.0

    def set(self, moment: str) -> None:
        wanted = dt.datetime.fromisoformat(moment.replace("Z", "+00:00")).timestamp()
        self._offset = wanted - time.time()

    def __call__(self) -> float:
        return time.time() + self._offset


@pytest.fixture
def clock(monkeypatch: pytest.MonkeyPatch) -> Clock:
    controlled = Clock()
    monkeypatch.setattr(kexp.core.ids, "current_time", controlled)
    return controlled


def _listed(store: Store) -> list[tuple[str, str]]:
    return [
        (e.id, str(Path(e.path or "").relative_to(store.experiments_dir)))
        for e in store.list_experiments(brief=True)
    ]


def _add(store: Store, summary: str, capsys: pytest.CaptureFixture[str]) -> str:
    """``kexp add`` (in this process, on the controlled clock); the id it printed."""
    code = main(
        [
            "--root",
            str(store.root),
            "add",
            "--summary",
            summary,
            "--score",
            "1.019",
            "--status",
            "done",
            "--operator",
            "k.cu: k",
            "--dtype",
            "bf16",
            "--env",
            "MI300X",
            "--base-commit",
            "9c1d2e3f4a5b6c7d8e9f0a1b2c3d4e5f6a7b8c9d",
            "--json",
        ],
        standalone_mode=False,
    )
    assert code in (None, 0)
    out = capsys.readouterr().out
    import json

    return str(json.loads(out)["id"])


@pytest.mark.parametrize(
    ("last_second", "old_folder", "new_folder"),
    [
        ("2026-12-31T23:59:59Z", "2026/12", "2027/01"),
        ("2026-11-30T23:59:59Z", "2026/11", "2026/12"),
        ("2028-02-29T23:59:59Z", "2028/02", "2028/03"),
    ],
)
def test_experiments_recorded_across_a_month_boundary_stay_listed_in_order(
    store: Store,
    clock: Clock,
    capsys: pytest.CaptureFixture[str],
    last_second: str,
    old_folder: str,
    new_folder: str,
) -> None:
    """One experiment in the last second of a month (of a year), the next in the first
    second of the next: each lands in its own month's folder, named by its created_at
    and its id's time, and every later query (after real pauses) lists both, in order."""
    clock.set(last_second.replace("59:59Z", "59:58.2Z"))
    before = store.create_experiment(
        **experiment_fields(change_summary="Last but one - +1%", score=1.019)
    )
    assert before.created_at.startswith(last_second.replace("59:59Z", "59:58."))
    clock.set(last_second.replace("59:59Z", "59:59.2Z"))
    also_before = _add(store, "Last one - +1%", capsys)
    past_racy_window()  # the clock moves on by as much: into the next month
    after = _add(store, "First one - +1%", capsys)
    assert _listed(store)[0][1].startswith(old_folder + "/")
    past_racy_window()
    listed = _listed(store)
    assert [exp_id for exp_id, _ in listed] == [before.id, also_before, after]
    # experiments/<YYYY>/<MM>/<last two hex digits of the id>/<id>-<slug>.md
    assert [path.rsplit("/", 2)[0] for _, path in listed] == [old_folder, old_folder, new_folder]
    for exp_id, path in listed:
        assert path.split("/")[2] == exp_id[-2:]
        exp = store.get_experiment(exp_id[:12])
        assert exp.created_at[:7].replace("-", "/") == path[:7]
        assert int(exp_id[:8], 16) == int(
            dt.datetime.fromisoformat(exp.created_at.replace("Z", "+00:00")).timestamp()
        )
    assert [e.id for e in store.top_experiments(5)] == sorted(
        [before.id, also_before, after], key=lambda i: -int(i[:8], 16)
    )
    past_racy_window()
    assert _listed(store) == listed


def test_the_clock_is_read_once_for_a_new_experiment(
    store: Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A clock that ticks into the next year between two readings: the id, created_at
    and the folder of a new experiment still name one moment."""
    ticks = iter(
        [
            dt.datetime(2026, 12, 31, 23, 59, 59, 999000, dt.timezone.utc).timestamp(),
            *[dt.datetime(2027, 1, 1, 0, 0, 0, tzinfo=dt.timezone.utc).timestamp()] * 100,
        ]
    )
    ticking: Callable[[], float] = lambda: next(ticks)  # noqa: E731
    monkeypatch.setattr(kexp.core.ids, "current_time", ticking)
    exp = store.create_experiment(**experiment_fields())
    assert exp.path is not None
    assert exp.created_at.startswith("2026-12-31T23:59:59.")
    assert exp.path.parent == store.experiments_dir / "2026" / "12" / exp.id[-2:]
    last = dt.datetime(2026, 12, 31, 23, 59, 59, tzinfo=dt.timezone.utc)
    assert exp.id.startswith(f"{int(last.timestamp()):08x}")
