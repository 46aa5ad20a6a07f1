"""The ``## Raw result`` kexp writes keeps to 80 characters a line.

A campaign's raw results had lines of 100 to 200 characters (a breakdown line with the
samples set aside per round, an overall line judged over a parent, rounds that
disagree, a suspect measurement): past the width the rest of a file keeps, and hard to
read in a terminal or a diff. A campaign recorded with ``kexp`` (a control remeasured,
steps on a parent, load spikes, two clock states, a disputed round, a suspect
measurement, a long configuration name) now has every raw-result line of its files
at 80 characters or fewer, and each says what it said before, wrapped.
"""

from __future__ import annotations

import json
import random
import re
from pathlib import Path

from conftest import git, run_kexp, unwrapped

COMMON = ("--operator", "csrc/attn.cu: attention", "--dtype", "bf16", "--env", "H100, CUDA 12.4",
          "--unit", "us")  # fmt: skip
#: Each configuration's true baseline time (microseconds): a long name among them.
CONFIGS = {"b8": 2.0, "batch64_seq4096_heads32_dim128_causal_bf16_paged_kv": 850.0}


class Timings:
    """Seeded timing files (``{config: [us, ...]}`` JSON, 15 samples a side)."""

    def __init__(self, folder: Path, seed: int) -> None:
        self.folder, self.rng, self.count = folder, random.Random(seed), 0

    def side(self, factor: float = 1.0, spiked: int = 0, clocks: bool = False) -> str:
        """A file of times ``factor`` times the configurations', ``spiked`` samples of
        each slowed 1.5-3x (load), or each in a 1.3x slower clock state half the time."""
        rng = self.rng
        data = {}
        for config, base in CONFIGS.items():
            times = [base * factor * rng.lognormvariate(0, 0.01) for _ in range(15)]
            for index in range(spiked):
                times[index * 2] *= rng.uniform(1.5, 3.0)
            if clocks:
                times = [t * (1.3 if rng.random() < 0.5 else 1.0) for t in times]
            data[config] = times
        self.count += 1
        path = self.folder / f"t{self.count}.json"
        path.write_text(json.dumps(data), encoding="utf-8")
        return str(path)

    def pair(self, speedup: float, **baseline: object) -> list[str]:
        """``--baseline F --candidate F`` of a candidate ``speedup`` times faster."""
        base = self.side(**baseline)  # type: ignore[arg-type]
        return ["--baseline", base, "--candidate", self.side(1 / speedup)]


def kexp_ok(repo: Path, *args: str) -> str:
    done = run_kexp(*args, cwd=repo)
    assert done.returncode == 0, done.stderr
    return done.stdout


def added(repo: Path, *args: str) -> str:
    exp_id: str = json.loads(kexp_ok(repo, "add", *COMMON, *args, "--json"))["id"]
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", f"experiment {exp_id}")
    return exp_id


def raw_results(repo: Path) -> dict[str, str]:
    """Each experiment file's ``## Raw result`` section, as the file holds it."""
    found = {}
    for path in sorted((repo / "experiments").rglob("*.md")):
        text = path.read_text(encoding="utf-8")
        section = re.search(r"^## Raw result\n(.*?)(?=^## |\Z)", text, re.S | re.M)
        assert section is not None, text
        found[path.name] = section.group(1).strip("\n")
    return found


def test_every_raw_result_line_of_a_campaign_keeps_to_80_characters(
    repo: Path, tmp_path: Path
) -> None:
    timed = Timings(tmp_path, seed=5)
    control = added(repo, "--summary", "A/A control", "--tag", "control", *timed.pair(1.0))
    kexp_ok(repo, "remeasure", control, *timed.pair(1.0))
    git(repo, "commit", "-q", "-am", "control round 2")
    kexp_ok(repo, "remeasure", control, *timed.pair(1.0, factor=1.3))  # a throttled round
    git(repo, "commit", "-q", "-am", "control round 3")
    root = added(repo, "--summary", "Tiled loads - faster", *timed.pair(1.5, spiked=6))
    child = added(
        repo, "--summary", "Unrolled by 2 - faster", "--pid", root,
        "--measured-against", "reference", *timed.pair(1.6),
    )  # fmt: skip
    kexp_ok(repo, "remeasure", child, *timed.pair(1.6, spiked=5))
    git(repo, "commit", "-q", "-am", "round 2")
    kexp_ok(repo, "remeasure", child, *timed.pair(1.2))  # a round that disagrees
    git(repo, "commit", "-q", "-am", "round 3")
    added(repo, "--summary", "Vector stores - same", *timed.pair(1.0, clocks=True))
    added(repo, "--summary", "Fused epilogue - faster", *timed.pair(6.0))  # suspect

    found = raw_results(repo)

    assert len(found) == 5
    for name, text in found.items():
        long = [line for line in text.splitlines() if len(line) > 80]
        assert not long, f"{name}:\n" + "\n".join(long)
    said = "\n".join(unwrapped(text) for text in found.values())
    for words in (
        "5 / 15 set aside as load spikes (round 2: 5 / 0, round 3: 0 / 15); candidate in",
        f"over parent {root[:10]} (1.4968x): 1.0726x = +7.26% MARGINAL (within noise)",
        "**Rounds disagree** (rounds 1 and 2; rounds 1 and 3; rounds 2 and 3: their",
        "baseline in two modes, 2.014 and 2.612 µs (67% slow): clocks not locked",
        "**suspect: verify correctness**: score 5.956x is above the plausibility ceiling",
        "- batch64_seq4096_heads32_dim128_causal_bf16_paged_kv: ",
        "MARGINAL (within noise)",
    ):
        assert words in said, (words, said)


def test_the_guidance_for_the_raw_result_says_what_kexp_writes(repo: Path, tmp_path: Path) -> None:
    """The raw result's guidance (``kexp new``'s template, the skill's field table and
    its Python reference) said "one line per configuration", while kexp wraps a line
    over 80 characters: a configuration's breakdown item can take two lines. It says
    "one item per configuration", a line over 80 characters wrapped, its continuation
    indented by two; and what kexp writes is so: one ``- config:`` item each, every
    other breakdown line a continuation."""
    from kexp.core.fields import FIELD

    skill = Path(__file__).parent.parent / "skill" / "kernel-exp-history"
    reference = (skill / "references" / "kexp_agent.py").read_text(encoding="utf-8")
    row = next(
        line
        for line in (skill / "SKILL.md").read_text(encoding="utf-8").splitlines()
        if line.startswith("| `raw_result` |")
    )
    note = " ".join(FIELD["raw_result"].note.split())
    for guidance in (note, row, " ".join(reference.split())):
        assert "line per configuration" not in guidance
        assert "item per configuration" in guidance and "80 characters" in guidance

    timed = Timings(tmp_path, seed=7)
    added(repo, "--summary", "Tiled loads - faster", *timed.pair(1.5))
    (text,) = raw_results(repo).values()
    breakdown = text.split("**Per-kernel breakdown**:\n", 1)[1].splitlines()
    items = [line for line in breakdown if line.startswith("- ")]
    assert [item.split(":")[0][2:] for item in items] == list(CONFIGS)
    assert len(breakdown) > len(items)  # (the long configuration's item is wrapped)
    assert all(line.startswith("  ") for line in breakdown if not line.startswith("- "))
