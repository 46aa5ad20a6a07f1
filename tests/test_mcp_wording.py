"""What the record tool says of three mistakes (trial D, finding 8), each in one line:
a score JSON cannot hold (1e400: the SDK's client sends it as null) was answered "no
score: give ... the score" though one was given; a relative timing path found nowhere
did not say where it was looked for (the server's working directory is not the
agent's); a 430 KB file given as ``profiling_file`` was kept whole without a word."""

from __future__ import annotations

import json
from pathlib import Path

from tests.test_mcp import Agent, record_fields, run_agent


def test_an_infinite_score_is_said_to_be_no_finite_number(repo: Path) -> None:
    said: list[list[str]] = []

    async def work(agent: Agent) -> None:
        failed, texts = await agent.call("record", score=1e400, **record_fields())
        assert failed, texts
        said.append(texts)

    run_agent(repo, work)
    ((refusal,),) = said
    assert "score must be a finite number" in refusal, refusal
    assert "no score" not in refusal, refusal


def test_a_relative_timing_path_found_nowhere_names_where_it_was_looked_for(
    repo: Path, tmp_path: Path
) -> None:
    elsewhere = tmp_path / "server"
    elsewhere.mkdir()
    said: list[str] = []

    async def work(agent: Agent) -> None:
        failed, texts = await agent.call(
            "record", baseline="timings/v0.json", candidate="timings/v1.json", **record_fields()
        )
        assert failed and len(texts) == 1, texts
        said.append(texts[0])

    run_agent(elsewhere, work, env={"KEXP_ROOT": str(repo), "PATH": "/usr/bin:/bin"})
    (refusal,) = said
    assert "timings/v0.json: no such file" in refusal, refusal
    assert f"the server's working directory ({elsewhere})" in refusal, refusal
    assert f"the store's folder ({repo})" in refusal and "absolute path" in refusal, refusal


def test_a_large_profiling_file_is_warned_of(repo: Path, tmp_path: Path) -> None:
    big = tmp_path / "pb_v0.json"
    big.write_text(json.dumps({"benchmarks": [{"stats": {"data": [1e-5] * 40000}}]}))
    said: list[list[str]] = []

    async def work(agent: Agent) -> None:
        failed, texts = await agent.call(
            "record", score=1.02, profiling_file=str(big), **record_fields()
        )
        assert not failed, texts
        said.append(texts[1:])

    run_agent(repo, work)
    (warnings,) = said
    large = [w for w in warnings if "profiling_info holds" in w]
    assert len(large) == 1, warnings
    assert "KB, kept whole" in large[0] and "large_profiling_bytes" in large[0], large
