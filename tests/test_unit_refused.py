"""Timings in milliseconds (triton's do_bench returns them) given without a unit, in a
file or a ``{config: [samples]}`` object that does not state one (trial D, finding 6):
they were read as microseconds and recorded, and the warning told an agent on
``kexp mcp`` to remove the experiment with ``kexp rm``, which no tool does. Now times
under 0.5 us as read, below any GPU kernel's launch, are refused when no unit was given
(nothing written), in one line naming the unit argument (``unit: "ms"``) or option
(``--unit ms``); given the unit, the same timings are recorded."""

from __future__ import annotations

import json
from pathlib import Path

from tests.conftest import run_kexp
from tests.test_mcp import Agent, record_fields, run_agent

#: do_bench's milliseconds: 55-60 us kernels.
BASE = {"N1024": [0.0601, 0.0598, 0.0603, 0.0600]}
CAND = {"N1024": [0.0551, 0.0549, 0.0552, 0.0550]}


def files(repo: Path) -> list[Path]:
    return sorted((repo / "experiments").rglob("*.md"))


def test_ms_timings_without_a_unit_are_refused_by_the_record_tool(repo: Path) -> None:
    before = files(repo)
    said: dict[str, list[str]] = {}

    async def work(agent: Agent) -> None:
        failed, texts = await agent.call("record", baseline=BASE, candidate=CAND,
                                         **record_fields())  # fmt: skip
        assert failed, texts
        said["refused"] = texts
        failed, texts = await agent.call("record", baseline=BASE, candidate=CAND, unit="ms",
                                         **record_fields())  # fmt: skip
        assert not failed, texts
        said["recorded"] = texts

    run_agent(repo, work)
    (refusal,) = said["refused"]
    assert "\n" not in refusal.strip() and "nothing was written" in refusal, refusal
    assert 'call record again with unit: "ms"' in refusal, refusal
    assert "kexp" not in refusal and "--unit" not in refusal, refusal
    recorded = json.loads(said["recorded"][0])
    assert 1.05 < recorded["score"] < 1.15, recorded
    assert len(files(repo)) == len(before) + 1  # the one recorded with its unit


def test_ms_timings_without_a_unit_are_refused_by_kexp_add(repo: Path) -> None:
    before = files(repo)
    (repo / "b.json").write_text(json.dumps(BASE), encoding="utf-8")
    (repo / "c.json").write_text(json.dumps(CAND), encoding="utf-8")
    args = ["add", "--summary", "BLOCK 2048", "--operator", "k.py: softmax", "--dtype",
            "fp16", "--env", "H100", "--baseline", "b.json", "--candidate", "c.json"]  # fmt: skip
    refused = run_kexp(*args, cwd=repo)
    assert refused.returncode != 0 and "Traceback" not in refused.stderr, refused.stderr
    assert len(refused.stderr.strip().splitlines()) == 1, refused.stderr
    assert "record them again with --unit ms" in refused.stderr, refused.stderr
    assert files(repo) == before
    recorded = run_kexp(*args, "--unit", "ms", "--json", cwd=repo)
    assert recorded.returncode == 0, recorded.stderr
    assert 1.05 < json.loads(recorded.stdout)["score"] < 1.15
