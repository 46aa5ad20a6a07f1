"""One campaign, whatever its spelling (trial P, finding 04): agent A records a kernel as
``kernels/gemm.py: gemm_fwd``, ``bf16``, ``MI300X ROCm 6.2``; agent B goes on from A's
best step as ``kernels/gemm.py:gemm_fwd``, ``torch.bfloat16``, ``MI300X ROCm-6.2``. Every
read's filter already read them as one, but ``kexp stats`` counted two campaigns (two
bests), ``kexp tree`` marked B's step as measured on another machine, ``kexp context``
said "Measured on 2 envs" and "crossed machines", an A/A control under one spelling did
not judge the steps under the other, and a root recorded under the other got no word of
the campaign it most likely builds on. Now a campaign is keyed by kexp's spelling
(:func:`kexp.core.spelling.campaign_key`) wherever one is grouped, and named by the
spelling most written."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from conftest import run_kexp

from kexp import Store

A = {"operator": "kernels/gemm.py: gemm_fwd", "dtype": "bf16", "env": "MI300X ROCm 6.2"}
B = {"operator": "kernels/gemm.py:gemm_fwd", "dtype": "torch.bfloat16", "env": "MI300X ROCm-6.2"}


def add(root: Path, who: dict[str, str], summary: str, score: float, *extra: str) -> str:
    """Record a step as the agent ``who`` spells its campaign; its id."""
    options = [item for name, value in who.items() for item in (f"--{name}", value)]
    done = run_kexp(
        "add", "--json", "--summary", summary, "--score", str(score), *options,
        "--description", "**Approach**: a\n\n**Key insight**: d", *extra, cwd=root,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    return str(json.loads(done.stdout)["id"])


@pytest.fixture
def campaign(repo: Path, store: Store) -> tuple[Path, list[str]]:
    """A's root and step, then B's step on A's: the ids, root first."""
    root = add(repo, A, "Tiling 128x64 - +20%", 1.2, "--measured-against", "reference")
    step = add(repo, A, "BLOCK_K 64 - +10%", 1.1, "--pid", root)
    tip = add(repo, B, "Vectorized loads - +5%", 1.05, "--pid", step, "--author", "agent-b")
    return repo, [root, step, tip]


def test_stats_counts_one_campaign_named_by_its_spelling_most_written(
    campaign: tuple[Path, list[str]],
) -> None:
    root, ids = campaign
    stats = json.loads(run_kexp("stats", "--json", cwd=root).stdout)
    assert list(stats["by_operator"]) == [A["operator"]], stats["by_operator"]
    (best,) = stats["best"]
    assert best["id"] == ids[-1] and best["count"] == 3, best
    assert best["cumulative_score"] == pytest.approx(1.2 * 1.1 * 1.05), best
    assert (best["operator_sig"], best["dtype_sig"], best["env"]) == tuple(A.values()), best
    text = run_kexp("stats", cwd=root).stdout
    assert text.count(ids[-1][:10]) == 1 and B["env"] not in text, text


def test_tree_shows_one_machine_and_context_one_campaign(
    campaign: tuple[Path, list[str]],
) -> None:
    root, ids = campaign
    tree = run_kexp("tree", cwd=root)
    assert tree.returncode == 0 and "[env:" not in tree.stdout, tree.stdout
    assert all(exp_id[:10] in tree.stdout for exp_id in ids), tree.stdout
    asked = ("context", "--operator", "gemm_fwd", "--text", "next step")
    text = run_kexp(*asked, cwd=root, process=True).stdout
    assert "Measured on 2 envs" not in text and "crossed machines" not in text, text
    data = json.loads(run_kexp(*asked, "--json", cwd=root).stdout)
    assert data["best"]["id"] == ids[-1], data["best"]
    assert data["best"]["cumulative_score"] == pytest.approx(1.386), data["best"]
    # Each spelling of the campaign finds its one current best, composed over all steps.
    for who in (A, B):
        top = run_kexp("top", "--json", "--dtype", who["dtype"], "--env", who["env"], cwd=root)
        first = json.loads(top.stdout)[0]
        assert first["id"] == ids[-1] and first["cumulative_score"] == pytest.approx(1.386)


def test_the_spelt_as_one_note_no_longer_says_stats_counts_two(
    campaign: tuple[Path, list[str]],
) -> None:
    root, _ = campaign
    asked = ("context", "--operator", "gemm_fwd", "--dtype", "bf16", "--text", "next step")
    data = json.loads(run_kexp(*asked, "--json", cwd=root).stdout)
    notes = data["context"]["spelt_as_one"]
    assert notes and all("count as campaigns of their own" not in n for n in notes), notes
    assert all("one campaign in every read" in note for note in notes), notes


def test_a_control_under_one_spelling_judges_the_steps_under_the_other(
    repo: Path, store: Store
) -> None:
    add(repo, B, "A/A same code - 6% drift", 0.94, "--tag", "control")
    step = add(repo, A, "Swizzle - +5%", 1.05)
    shown = json.loads(run_kexp("show", step, "--json", cwd=repo).stdout)
    assert shown["outcome"] == "marginal", shown


def test_a_root_under_another_spelling_is_told_of_the_campaign_it_builds_on(
    campaign: tuple[Path, list[str]],
) -> None:
    root, ids = campaign
    other = {"operator": A["operator"], "dtype": "bfloat16", "env": "AMD MI300X ROCm 6.2"}
    done = run_kexp(
        "add", "--summary", "Split-K - +3%", "--score", "1.03",
        *[item for name, value in other.items() for item in (f"--{name}", value)], cwd=root,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert f"have a campaign, best tip {ids[-1]}" in done.stderr, done.stderr


def test_lessons_take_one_insight_of_one_campaign_together_whatever_its_spelling(
    repo: Path, store: Store
) -> None:
    for who, summary in ((A, "BLOCK_N 256 - failed (spills)"), (B, "BLOCK_N 256 again - spills")):
        add(repo, who, summary, 0, "--status", "failed", "--buggy", "--error", "ptxas: spill",
            "--description", "**Key insight**: BLOCK_N 256 spills registers")  # fmt: skip
    text = run_kexp("lessons", cwd=repo).stdout
    assert "Key insight (2 lessons): BLOCK_N 256 spills registers" in text, text
    assert "BLOCK_N 256 - failed" not in text, text  # the newest stands for both


def test_a_filter_matching_several_envs_names_each_machine_once(
    campaign: tuple[Path, list[str]],
) -> None:
    root, ids = campaign
    other = add(root, {**A, "env": "MI300X ROCm 6.3"}, "Tiling on 6.3 - +8%", 1.08)
    asked = ("context", "--operator", "gemm_fwd", "--env", "MI300X", "--text", "next step")
    data = json.loads(run_kexp(*asked, "--json", cwd=root).stdout)
    (note,) = data["context"]["several"]
    named = {entry["value"]: entry["best"] for entry in note["matched"]}
    assert named == {A["env"]: ids[-1], "MI300X ROCm 6.3": other}, note
    assert note["text"].startswith("'MI300X' matches 2 envs"), note["text"]


def test_the_report_has_one_operator_page_and_one_cell(
    campaign: tuple[Path, list[str]], tmp_path: Path
) -> None:
    root, _ = campaign
    done = run_kexp("report", "-o", str(tmp_path / "site"), cwd=root)
    assert done.returncode == 0, done.stderr
    assert "on 1 operator(s)" in done.stderr, done.stderr
    index = (tmp_path / "site" / "index.html").read_text(encoding="utf-8")
    assert "in 1 operator × dtype × env cell," in index, index
