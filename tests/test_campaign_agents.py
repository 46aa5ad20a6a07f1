"""A campaign of two agents on one kernel through ``kexp mcp``, as the skill and the
server's instructions have them work: agent A consults before each of a dozen
iterations, records each one with its parent (a crash, a timeout, a regression, a
change within noise and a remeasure, a correction included) and syncs as it goes;
agent B, on a second clone of the same bare remote, fetches, consults once and records.

Every answer is held to the truth computed here from the files and git (front-matter
read with PyYAML, the pid chain walked by hand, the remote's tree listed with git),
never to kexp's own report. The MCP SDK's own client drives ``kexp mcp`` (the helpers
of ``test_mcp.py``).
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from conftest import git, run_kexp
from test_sync import clone, make_remote, remote_ids

from kexp.core.outcome import judge

pytest.importorskip("mcp")
from test_mcp import Agent, run_agent

OPERATOR = "csrc/rmsnorm.cu: rms_norm_kernel"
ENV = "H100, CUDA 12.4"
WHERE = {"operator": "rms_norm", "dtype": "bf16", "env": "H100"}
#: Baseline timings (µs), five a configuration: a candidate is these over a speedup.
BASE = {"t1024": [10.0, 10.1, 9.9, 10.0, 10.05], "t4096": [40.0, 40.2, 39.8, 40.1, 39.9]}
CRASH_DIFF = """\
--- a/csrc/rmsnorm.cu
+++ b/csrc/rmsnorm.cu
@@ -1,2 +1,2 @@
-#pragma unroll 4
+#pragma unroll 8
   for (int i = 0; i < n; ++i) acc += x[i] * x[i];
"""
#: What a listing prints of an id: 10 characters or more.
_PRINTED_ID = re.compile(r"\b([0-9a-f]{10,16})\b")


def faster(speedup: float, shift: float = 0.0) -> dict[str, list[float]]:
    """The baseline's timings (each moved by ``shift``) run ``speedup`` times faster."""
    return {c: [round((t + shift) / speedup, 4) for t in times] for c, times in BASE.items()}


#: The speed of each step's code over BASE (the original code): a step is timed against
#: its parent's code, as the skill says (a step's baseline is its parent's candidate).
VEC = 1.10
SHUF = VEC * 1.05
STAGED = SHUF * 0.93
FUSE = SHUF * 1.08


def fields(summary: str, **overrides: Any) -> dict[str, Any]:
    """The record tool's fields of one iteration, its four paragraphs written."""
    what = summary.split(" - ")[0]
    return {
        "change_summary": summary,
        "operator_sig": OPERATOR,
        "dtype_sig": "bf16",
        "env": ENV,
        "detailed_description": f"**Approach**: {what}.\n\n**Result**: {summary}.\n\n"
        f"**Why it worked/failed**: see the profile.\n\n**Key insight**: {what} lesson.",
        "protocol": {"timer": "cuda_events", "warmup": 10},
        **overrides,
    }


# --- the truth, from the files ----------------------------------------------------------


def records(root: Path) -> dict[str, dict[str, Any]]:
    """Every experiment file's front-matter under ``root/experiments``, by id."""
    found: dict[str, dict[str, Any]] = {}
    for path in sorted((root / "experiments").rglob("*.md")):
        text = path.read_text(encoding="utf-8")
        if not text.startswith("---\n"):
            continue
        front = yaml.safe_load(text[4 : text.index("\n---\n", 4)])
        assert front["id"] not in found, f"two files of {front['id']}"
        found[front["id"]] = front
    return found


def measured(front: dict[str, Any]) -> bool:
    """Whether a record's score is a measurement that ranks (not buggy, pending, a
    control, or a run that measured nothing)."""
    return (
        not front["is_buggy"]
        and front["status"] not in ("new", "running")
        and front["score"] > 0
        and "control" not in (front.get("tags") or [])
    )


def cumulative(found: dict[str, dict[str, Any]], exp_id: str) -> float | None:
    """The speedup over the reference: the steps multiplied along the pid chain back to
    a root or a score measured against the reference (None when one of them measured
    nothing)."""
    product, front = 1.0, found[exp_id]
    while True:
        if not measured(front):
            return None
        product *= front["score"]
        if not front.get("pid") or front.get("measured_against") == "reference":
            return product
        front = found[front["pid"]]


def best_tip(found: dict[str, dict[str, Any]]) -> str:
    """The id of the best cumulative score of a step that improved (the campaign's best
    tip: one within noise or a regression is never the best)."""
    scored = {
        i: c
        for i, f in found.items()
        if (c := cumulative(found, i)) is not None
        and judge(f["status"], f.get("is_buggy"), False, f["score"], f.get("score_ci"))
        == "improvement"
    }
    return max(scored, key=lambda i: scored[i])


def section(packet: str, title: str) -> str:
    """The text of one ``## title`` section of a context packet ("" when absent)."""
    start = packet.find(f"## {title}")
    if start < 0:
        return ""
    end = packet.find("\n## ", start + 1)
    return packet[start : len(packet) if end < 0 else end]


def printed_ids(text: str) -> list[str]:
    return _PRINTED_ID.findall(text)


# --- agent A's campaign -----------------------------------------------------------------


class Campaign:
    """Agent A's iterations: consult, record with its parent, sync now and then; each
    answer checked against the files of A's clone."""

    def __init__(self, agent: Agent, root: Path, base: str) -> None:
        self.agent, self.root, self.base = agent, root, base
        self.ids: dict[str, str] = {}  # label -> full id, from the files
        self.printed: list[str] = []  # the ids the last packet printed

    async def consult(self, plan: str) -> str:
        """The packet, checked: its current best is the best tip of the files, and each
        id it prints names one experiment of them."""
        failed, texts = await self.agent.call("consult", plan=plan, **WHERE)
        assert not failed, texts
        packet = texts[0]
        found = records(self.root)
        assert f"{len(found)} experiment(s) on this operator" in packet
        if any(cumulative(found, i) is not None for i in found):
            best = section(packet, "Current best")
            assert printed_ids(best)[0] == best_tip(found)[: len(printed_ids(best)[0])], packet
        for printed in printed_ids(packet):
            assert len([i for i in found if i.startswith(printed)]) == 1, printed
        self.printed = printed_ids(packet)
        return packet

    async def record(self, label: str, parent: str | None, **given: Any) -> dict[str, Any]:
        """Record one iteration on ``parent`` (a label), given by its id as the last
        packet printed it; checked against the file written."""
        pid = self.as_printed(parent) if parent else ""
        failed, texts = await self.agent.call("record", pid=pid, base_commit=self.base, **given)
        assert not failed, texts
        answer: dict[str, Any] = json.loads(texts[0])
        front = records(self.root)[answer["id"]]
        assert (front["score"], front.get("pid", "")) == (
            answer["score"],
            self.ids[parent] if parent else "",
        )
        self.ids[label] = answer["id"]
        return {"answer": answer, "warnings": texts[1:]}

    def as_printed(self, label: str) -> str:
        """An experiment's id as the last packet printed it."""
        return next(p for p in self.printed if self.ids[label].startswith(p))

    async def sync(self, remote: Path) -> None:
        """Share; the remote's main then holds every experiment of the clone."""
        answer = await self.agent.json("sync")
        assert answer["pushed"] or answer["up_to_date"], answer
        assert sorted(remote_ids(remote)) == sorted(records(self.root))


async def run_campaign(agent: Agent, root: Path, base: str, remote: Path) -> dict[str, str]:
    """A's twelve iterations: the chain vectorize -> shuffle -> fuse -> persistent (the
    best tip), a crash, a timeout, a regression and a step built on it, a change within
    noise remeasured, a regression corrected to buggy, and a second root that is the
    best single step but not the best tip."""
    run = Campaign(agent, root, base)
    packet = await run.consult("vectorize loads to 128-bit")
    assert "Nothing recorded here yet" in packet
    await run.record("vectorize", None, baseline=BASE, candidate=faster(VEC),
                     **fields("Vectorize loads to 128-bit - +10%"))  # fmt: skip
    await run.consult("warp shuffle reduction")
    await run.record("shuffle", "vectorize", baseline=faster(VEC), candidate=faster(SHUF),
                     **fields("Warp-shuffle row reduction - +5%"))  # fmt: skip
    await run.sync(remote)
    await run.consult("unroll the sum loop by 8")
    await run.record(
        "crash", "shuffle", score=0.0, status="failed", is_buggy=True, code_change=CRASH_DIFF,
        error_message="RuntimeError: CUDA error: an illegal memory access was encountered",
        **fields("Unroll sum loop by 8 - crash, illegal memory access"),
    )  # fmt: skip
    await run.consult("stage the row in shared memory")
    await run.record("staged", "shuffle", baseline=faster(SHUF), candidate=faster(STAGED),
                     **fields("Stage row in shared memory - -7% (bank conflicts)"))  # fmt: skip
    await run.consult("autotune launch bounds")
    await run.record(
        "timeout", "shuffle", score=0.0, status="timeout",
        raw_result="Autotuning timed out after 600 s (48 of 96 configurations).",
        **fields("Autotune launch bounds - timeout after 600 s"),
    )  # fmt: skip
    await run.consult("unroll the sum loop by 2")
    await run.record("noise", "shuffle", baseline=faster(SHUF), candidate=faster(SHUF * 1.003),
                     **fields("Unroll sum loop by 2 - +0.3% (within noise)"))  # fmt: skip
    again = await agent.json(
        "remeasure", exp_id=run.ids["noise"], baseline=faster(SHUF, shift=0.02),
        candidate=faster(SHUF * 1.003, shift=0.02),
    )  # fmt: skip
    front = records(root)[run.ids["noise"]]
    assert (again["outcome"], again["score_ci"]) == ("marginal", front["score_ci"])
    await run.consult("fuse the residual add")
    await run.record("fuse", "shuffle", baseline=faster(SHUF), candidate=faster(FUSE),
                     **fields("Fuse residual add into rms_norm - +8%"))  # fmt: skip
    await run.sync(remote)
    await run.consult("persistent kernel over rows")
    await run.record("persistent", "fuse", baseline=faster(FUSE), candidate=faster(FUSE * 1.02),
                     **fields("Persistent kernel over rows - +2%"))  # fmt: skip
    await run.consult("accumulate in fp32 registers")
    await run.record("accumulate", "fuse", baseline=faster(FUSE), candidate=faster(FUSE * 0.97),
                     **fields("fp32 accumulate in registers - -3%"))  # fmt: skip
    await run.consult("pad the shared memory row")
    await run.record("padded", "staged", baseline=faster(STAGED),
                     candidate=faster(STAGED * 1.15),
                     **fields("Pad shared memory row - +15% over staged"))  # fmt: skip
    await run.consult("cooperative groups rewrite")
    await run.record("groups", None, baseline=BASE, candidate=faster(1.20),
                     **fields("Cooperative groups rewrite - +20%"))  # fmt: skip
    corrected = await agent.json(
        "update", exp_id=run.as_printed("accumulate"),
        changes={"is_buggy": True, "error_message": "max abs error 0.31 > 1e-2 at row 7"},
        reason="the fp32 reference check failed",
    )  # fmt: skip
    assert corrected["changed"] == ["is_buggy", "error_message"]
    await run.sync(remote)
    await run.consult("what next")
    return run.ids


@pytest.fixture
def two_clones(tmp_path: Path) -> tuple[Path, str, Path, Path]:
    """(the bare remote, its main's commit, A's clone, B's clone)."""
    remote, base = make_remote(tmp_path)
    return remote, base, clone(remote, tmp_path / "alice"), clone(remote, tmp_path / "bob")


def test_a_campaign_and_a_second_agent_through_kexp_mcp_match_the_files(
    two_clones: tuple[Path, str, Path, Path],
) -> None:
    remote, base, alice, bob = two_clones
    ids: dict[str, str] = {}

    async def agent_a(agent: Agent) -> None:
        ids.update(await run_campaign(agent, alice, base, remote))
        found = records(alice)
        best = best_tip(found)
        assert best == ids["persistent"]  # not the best single step (groups, 1.20)

        ranked = await agent.json("top", operator="rms_norm")
        truth = {i: cumulative(found, i) for i in found}
        assert ranked[0]["id"] == best
        for row in ranked:
            assert row["cumulative_score"] == pytest.approx(truth[row["id"]], abs=1e-4)
        # The steps that improved first, then the others measured, by cumulative score.
        scored = [
            (r["outcome"] == "improvement", r["cumulative_score"])
            for r in ranked
            if r["cumulative_score"] is not None
        ]
        assert scored == sorted(scored, reverse=True)
        assert not {ids["crash"], ids["accumulate"]} & {r["id"] for r in ranked}  # buggy

        listed = await agent.json("list", operator="rms_norm")
        assert sorted(r["id"] for r in listed) == sorted(found)  # experiments, not versions
        for row in listed:
            assert row["score"] == found[row["id"]]["score"]

        forest = await agent.json("tree", operator="rms_norm", brief=False)

        def walk(nodes: list[dict[str, Any]]) -> Iterator[dict[str, Any]]:
            for node in nodes:
                yield node
                yield from walk(node["children"])

        nodes = list(walk(forest))
        assert sorted(n["id"] for n in nodes) == sorted(found)
        for node in nodes:
            assert node["pid"] == found[node["id"]].get("pid", "")
            want = truth[node["id"]]
            assert (node["cumulative_score"] is None) == (want is None)
            if want is not None:
                assert node["cumulative_score"] == pytest.approx(want, abs=1e-4)

        lessons = await agent.json("lessons", operator="rms_norm")
        grouped = {k: sorted(e["id"] for e in v) for k, v in lessons.items()}
        assert grouped == {
            "buggy": sorted([ids["crash"], ids["accumulate"]]),
            "failed": [ids["timeout"]],
            "regression": [ids["staged"]],
            "marginal": [ids["noise"]],
            "interference": [],
        }
        for label in ("timeout", "noise"):
            shown = await agent.json("show", exp_id=ids[label])
            assert shown["id"] == ids[label] and shown["score"] == found[ids[label]]["score"]
        related = await agent.json("similar", text="unroll the sum loop", operator="rms_norm")
        assert {ids["crash"], ids["noise"]} <= {m["id"] for m in related[:2]}

    run_agent(alice, agent_a)
    truth = records(alice)
    # Recorded as the skill's table of failures says: nothing to warn of (a timeout with
    # a parent measured nothing: what its score 0 is a speedup over does not arise).
    checked = run_kexp("validate", cwd=alice)
    assert checked.returncode == 0 and "warning[" not in checked.stdout, checked.stdout
    assert f"{len(truth)} file(s) checked: 0 error(s), 0 warning(s)" in checked.stderr

    def full(text: str) -> list[str]:
        """The full ids of the ids ``text`` prints (each names exactly one)."""
        named = [[i for i in truth if i.startswith(p)] for p in printed_ids(text)]
        assert all(len(n) == 1 for n in named), named
        return [n[0] for n in named]

    # B fetches and consults once, across the refs: A's dead ends and A's best tip.
    git(bob, "fetch", "-q")

    async def agent_b(agent: Agent) -> None:
        failed, texts = await agent.call(
            "consult", plan="unroll the sum loop by 8", diff=CRASH_DIFF, all_refs=True, **WHERE
        )
        assert not failed, texts
        packet = texts[0]
        assert f"{len(truth)} experiment(s) on this operator" in packet
        assert full(section(packet, "Current best")) == [ids["persistent"]]
        assert full(section(packet, "Tried before")) == [ids["crash"]], packet
        failures = full(section(packet, "Related failures"))
        assert set(failures) == {ids[k] for k in ("crash", "accumulate", "timeout", "staged")}

        # B tries it anyway, recording across the refs as the skill says: warned, the
        # warning naming A's crash.
        failed, texts = await agent.call(
            "record", score=0.0, status="failed", is_buggy=True, code_change=CRASH_DIFF,
            error_message="RuntimeError: CUDA error: an illegal memory access was encountered",
            base_commit=base, all_refs=True, **fields("Unroll the sum loop by 8 - crash"),
        )  # fmt: skip
        assert not failed, texts
        warned = [t for t in texts[1:] if ids["crash"] in t]
        assert warned and all(t.startswith("kexp: warning: ") for t in warned), texts
        # A crash measured nothing: no round of it to add (remeasure refuses it), and no
        # speedup of 0 to read.
        assert not any("remeasure" in t or "0.0000" in t for t in warned), warned
        assert any("nothing measured" in t for t in warned), warned

        # B builds on A's best tip, its id as the packet printed it: a write needs its
        # parent in the working tree, and the error says what to call (the sync tool,
        # which merges what A pushed), not a command.
        tip = printed_ids(section(packet, "Current best"))[0]
        step = fields("Two rows per warp - +3%", pid=tip, base_commit=base)
        failed, texts = await agent.call(
            "record", baseline=BASE, candidate=faster(1.03), all_refs=True, **step
        )
        assert failed and "call sync" in texts[0] and "kexp sync" not in texts[0], texts
        assert (await agent.json("sync"))["pushed"]
        built = await agent.json("record", baseline=BASE, candidate=faster(1.03), **step)
        ids["rows"] = built["id"]
        assert records(bob)[built["id"]]["pid"] == ids["persistent"]

    run_agent(bob, agent_b)

    # The command reads the same, across the refs; B's step is the campaign's best tip.
    everything = {**truth, **records(bob)}
    assert best_tip(everything) == ids["rows"]
    stats = run_kexp("stats", "--all-refs", "--json", cwd=bob)
    assert stats.returncode == 0, stats.stderr
    counted = json.loads(stats.stdout)
    assert counted["total"] == len(everything) == 13  # experiments, not versions
    assert {k: v for k, v in counted["by_outcome"].items() if v and k != "total"} == {
        "improvement": 7, "marginal": 1, "regression": 1, "buggy": 3, "failed": 1
    }  # fmt: skip
    assert [b["id"] for b in counted["best"]] == [ids["rows"]]
    assert counted["best"][0]["cumulative_score"] == pytest.approx(
        cumulative(everything, ids["rows"]), abs=1e-4
    )

    # A syncs (B's synced records merged in), corrects one experiment B holds too, and
    # syncs again; B fetches. B's working tree holds the old version, origin/main the
    # new: across the refs each is one experiment, read at its newest version.
    async def corrects(agent: Agent) -> None:
        await agent.json("sync")
        await agent.json("update", exp_id=ids["padded"], changes={"tags": ["smem", "verified"]},
                         reason="checked against the fp32 reference")  # fmt: skip
        assert (await agent.json("sync"))["pushed"]

    run_agent(alice, corrects)
    git(bob, "fetch", "-q")
    assert "verified" not in (records(bob)[ids["padded"]].get("tags") or [])

    async def rereads(agent: Agent) -> None:
        listed = await agent.json("list", all_refs=True)
        assert sorted(r["id"] for r in listed) == sorted(everything)
        shown = await agent.json("show", exp_id=ids["padded"], all_refs=True)
        assert "verified" in shown["tags"] and shown["ref"] == "origin/main", shown
        failed, texts = await agent.call("consult", all_refs=True, **WHERE)
        assert not failed, texts
        assert f"{len(everything)} experiment(s) on this operator" in texts[0], texts

    run_agent(bob, rereads)
    again = json.loads(run_kexp("stats", "--all-refs", "--json", cwd=bob).stdout)
    assert again["total"] == len(everything)


def test_a_timed_out_run_measured_later_is_corrected_as_each_answer_says(repo: Path) -> None:
    """A's autotune timed out; with a longer limit it finishes. The agent follows each
    answer: remeasure refuses the timed-out record (no timings to pool with) and says to
    correct it with update; update warns that raw_result is stale, and what it advises
    must be a call that works (not remeasure again, which refused) in the tools' words;
    done as said, nothing is left to warn of."""
    base = git(repo, "rev-parse", "HEAD")

    async def work(agent: Agent) -> None:
        timed_out = await agent.json(
            "record", score=0.0, status="timeout", base_commit=base,
            raw_result="Autotuning timed out after 600 s (48 of 96 configurations).",
            **fields("Autotune launch bounds - timeout after 600 s"),
        )  # fmt: skip
        failed, texts = await agent.call(
            "remeasure", exp_id=timed_out["id"], baseline=BASE, candidate=faster(1.04)
        )
        assert failed and "the update tool" in texts[0], texts
        failed, texts = await agent.call(
            "update", exp_id=timed_out["id"], changes={"score": 1.04, "status": "done"},
            reason="autotuned again with a 1800 s limit: 1.04x",
        )  # fmt: skip
        assert not failed, texts
        (warning,) = texts[1:]
        assert "kexp " not in warning and "remeasure" not in warning, warning
        assert "the update tool" in warning and "raw_result" in warning, warning
        failed, texts = await agent.call(
            "update", exp_id=timed_out["id"],
            changes={"raw_result": "Autotuned in 1430 s: 1.04x (block 256, 2 rows/warp)."},
            reason="the finished run's output",
        )  # fmt: skip
        assert (failed, texts[1:]) == (False, []), texts

    run_agent(repo, work)


def test_a_step_measured_against_the_original_code_says_so_when_recorded(repo: Path) -> None:
    """The skill: "When your baseline was the original code, say
    measured_against=reference". An agent that timed its child against the original
    code says so in its record call; its cumulative score is then its own score, not
    multiplied by its parent's."""
    base = git(repo, "rev-parse", "HEAD")

    async def work(agent: Agent) -> None:
        first = await agent.json("record", baseline=BASE, candidate=faster(1.10),
                                 base_commit=base, **fields("Vectorize loads - +10%"))  # fmt: skip
        child = await agent.json(
            "record", baseline=BASE, candidate=faster(1.15), base_commit=base,
            pid=first["id"], measured_against="reference",
            **fields("Warp-shuffle on top of vectorized loads - +15% over the original"),
        )  # fmt: skip
        found = records(repo)
        assert found[child["id"]]["measured_against"] == "reference"
        (shown,) = [r for r in await agent.json("top") if r["id"] == child["id"]]
        assert shown["cumulative_score"] == pytest.approx(cumulative(found, child["id"]))
        assert shown["cumulative_score"] == pytest.approx(child["score"])

    run_agent(repo, work)


def test_the_servers_instructions_name_the_arguments_of_the_campaigns_loop(
    two_clones: tuple[Path, str, Path, Path],
) -> None:
    """An agent with only the server's instructions: on a second clone, a consult that
    reads its working tree alone answers "Nothing recorded here yet" while the other
    agent's campaign sits on the remote; and a record without a pid starts a new root,
    so no step multiplies into a cumulative score. The instructions name both (all_refs,
    pid), each an argument of the tool they name it with."""
    _, base, alice, bob = two_clones
    run_agent(alice, lambda agent: _record_and_sync(agent, base))
    git(bob, "fetch", "-q")

    async def work(agent: Agent) -> None:
        said = (await agent.session.initialize()).instructions or ""
        tools = {
            t.name: t.input_schema["properties"] for t in (await agent.session.list_tools()).tools
        }
        for tool, argument in (("consult", "all_refs"), ("record", "pid")):
            assert argument in tools[tool]
            named = re.search(rf"\b{tool}\b[^.;]*\b{argument}\b", said)
            assert named, f"the instructions do not name {argument} with {tool}: {said}"
        alone = (await agent.call("consult", **WHERE))[1][0]
        across = (await agent.call("consult", all_refs=True, **WHERE))[1][0]
        # the working tree alone holds nothing, and says the fetched branches it has not read
        assert "Nothing recorded here in this checkout's files" in alone, alone
        assert "not read" in alone and "## Current best" in across

    run_agent(bob, work)


async def _record_and_sync(agent: Agent, base: str) -> None:
    await agent.json("record", baseline=BASE, candidate=faster(1.10), base_commit=base,
                     **fields("Vectorize loads to 128-bit - +10%"))  # fmt: skip
    assert (await agent.json("sync"))["pushed"]


def test_a_timeout_recorded_without_a_score_is_told_the_score_to_give(repo: Path) -> None:
    """The autotune timed out: the agent records it with no timings and no score. The
    error said "or score=..." (Python's words, not the tool's, and not which score):
    it says to give score 0 when nothing could be measured; done so, the run is recorded
    as failed."""
    base = git(repo, "rev-parse", "HEAD")
    timeout = fields("Autotune launch bounds - timeout after 600 s", base_commit=base)

    async def work(agent: Agent) -> None:
        failed, texts = await agent.call("record", status="timeout", **timeout)
        assert failed and "score=" not in texts[0], texts
        assert "score 0 when nothing could be measured" in texts[0], texts
        recorded = await agent.json("record", status="timeout", score=0, **timeout)
        assert recorded["outcome"] == "failed"

    run_agent(repo, work)


def test_a_run_that_measured_nothing_recorded_done_is_warned_and_corrected(repo: Path) -> None:
    """The agent records its timed-out autotune with score 0 and forgets the status (the
    tool's default is done): the run read as a regression, "0.0000" among the lessons'
    regressions, with no word said. The answer warns, naming the update to make; made
    as said, the run is a failure that measured nothing."""
    base = git(repo, "rev-parse", "HEAD")

    async def work(agent: Agent) -> None:
        failed, texts = await agent.call(
            "record", score=0, base_commit=base, **fields("Autotune launch bounds - timeout")
        )
        assert not failed, texts
        exp_id = json.loads(texts[0])["id"]
        (warning,) = texts[1:]
        assert "kexp " not in warning and "status failed or timeout" in warning, warning
        assert f'the update tool with exp_id: "{exp_id}"' in warning, warning
        await agent.json("update", exp_id=exp_id, changes={"status": "timeout"},
                         reason="the autotune timed out: nothing measured")  # fmt: skip
        lessons = await agent.json("lessons")
        assert [e["id"] for e in lessons["failed"]] == [exp_id] and not lessons["regression"]

    run_agent(repo, work)
