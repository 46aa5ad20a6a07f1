"""The numbers of a plan count in `kexp similar`: "unroll by 8" is not "unroll by 4"
(kernel work is full of numbers that mean something: unroll 4 or 8, 128-bit loads,
num_warps=8, BLOCK 64), while the numbers of measurements (+1.88%, 1.0188x, ROCm 7.0.0)
are no words of a plan."""

from __future__ import annotations

import json
import shutil
import warnings
from collections.abc import Callable
from pathlib import Path

import pytest
from conftest import REPO_ROOT, git, run_kexp

from kexp import KernelExperiment, Store
from kexp.storage import doctext
from kexp.storage.retrieval import similar

#: The bundled store's two unroll steps of the cache kernel: by 4, then by 8 (whose
#: summary says "instead of 4", whose description holds 4 and 8 as measurements too).
BY_4 = "Unroll head loop by 4 (#pragma unroll 4) - +1.88%"
BY_8 = "Unroll head loop by 8 instead of 4 - +0.36%, within noise"


def _ranked(repo: Path, plan: str) -> list[str]:
    result = run_kexp("similar", "--text", plan, "-n", "10", "--json", cwd=repo)
    assert result.returncode == 0, result.stderr
    return [match["change_summary"] for match in json.loads(result.stdout)]


def test_the_skills_own_query_ranks_the_experiment_with_its_number_first(repo: Path) -> None:
    """The skill's example, "unroll the head loop by 8", on a clone of the bundled
    store: the by-8 step first, and for "by 4" the by-4 step first. Before, numbers
    weighed nothing (every description holds 4 and 8) and both plans ranked alike."""
    shutil.rmtree(repo / "experiments")
    shutil.copytree(REPO_ROOT / "experiments", repo / "experiments")
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", "the bundled experiments")

    for plan, first, second in [
        ("unroll the head loop by 8", BY_8, BY_4),
        ("unroll by 8", BY_8, BY_4),
        ("unroll the head loop by 4", BY_4, BY_8),
        ("unroll by 4", BY_4, BY_8),
    ]:
        ranked = _ranked(repo, plan)
        assert ranked.index(first) < ranked.index(second), (plan, ranked)


@pytest.mark.parametrize(
    ("plan", "wanted"),
    [
        ("set num_warps=8 for decode", "warps8"),
        ("try 8 warps in decode", "warps8"),
        ("num_warps=4 for decode", "warps4"),
        ("copy rows with 128-bit loads", "bits128"),
        ("copy rows with 64-bit loads", "bits64"),
        ("load 64 bits per row", "bits64"),
    ],
)
def test_a_plans_number_picks_the_experiment_that_tried_it_out_of_its_measurements(
    store: Store, make_experiment: Callable[..., KernelExperiment], plan: str, wanted: str
) -> None:
    """Experiments alike but for a number, among others, every description holding
    the numbers as measurements: the plan's number decides which comes first, ahead
    (not by a tie)."""
    measured = (
        "Timed 4 shapes over 8 runs at 64 and 128 tokens: +4.8%, 1.064x, 8.128 us; "
        "VGPRs 64 -> 128, occupancy 8 -> 4 waves."
    )

    def step(summary: str, insight: str, code: str) -> KernelExperiment:
        with warnings.catch_warnings():  # one-line changes alike: near-duplicates
            warnings.simplefilter("ignore")
            return make_experiment(
                change_summary=summary,
                detailed_description=f"**Approach**: {measured}\n\n**Key insight**: {insight}",
                code_change=f"@@ -10 +10 @@\n-  old_config();\n+  {code}\n",
            )

    steps = {
        "warps8": ("Decode with num_warps=8 - +1.2%", "8 warps hide latency", "w = 8;"),
        "warps4": ("Decode with num_warps=4 - -0.8%", "4 warps hide latency", "w = 4;"),
        "bits128": ("Copy rows with 128-bit loads - +6.4%", "128-bit is wide", "v = ld(p, 128);"),
        "bits64": ("Copy rows with 64-bit loads - +2.1%", "64-bit is wide", "v = ld(p, 64);"),
    }
    for summary, insight, code in [
        ("Fuse the residual add - +3.1%", "one pass less over memory", "x += r;"),
        ("Shared memory tile for the keys - -2.2%", "bank conflicts ate the gain", "t = s;"),
        ("Exit early on padding tokens - +0.9%", "padding is rare", "if (p) return;"),
        ("Scalar registers for slot math - +1.7%", "uniform values in SGPRs", "s = rfl(s);"),
        ("Exp2 with folded scale - +0.4%", "one multiply saved", "e = exp2f(e);"),
        ("Larger partition size - -1.3%", "more partials to reduce", "n = m;"),
    ]:
        step(summary, insight, code)
    made = {name: step(*made) for name, made in steps.items()}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        matches = similar(store, text=plan)
    ranked = [(m.change_summary, m.relevance) for m in matches]
    assert len(matches) > 1 and matches[0].id == made[wanted].id, ranked
    assert matches[0].relevance > matches[1].relevance, ranked  # not first by a tie


def test_numbers_are_words_of_plans_and_measurements_are_not() -> None:
    """What the index and a query take for numbers: alone, before letters, after ``=``
    or ``_``, in ``128-bit``; not a decimal, a percentage, a version, nor a word's
    digits (``fp16``, ``float4``); a query asks for them as the index holds them."""
    text = "unroll 8x, 128-bit, num_warps=8, BLOCK_M 64 fp16 float4 +2.5% 1.0188x 7.0.0 (8%)"
    assert doctext.numbers_of(text) == ["8", "128", "8", "64"]
    words = doctext.query_words(text)
    assert [word for word in words if word.isdigit()] == ["8", "128", "64"]
    assert not {"2", "5", "1", "0188", "7", "0"} & set(words)
    assert doctext.fts_phrase("8") != doctext.fts_phrase("unroll") == '"unroll"'


#: The description template every experiment of a campaign fills (trial O, finding 09:
#: its words say nothing of the step).
TEMPLATE = "**Approach**: a\n\n**Result**: b\n\n**Why it worked/failed**: c\n\n**Key insight**: d"


def _add(repo: Path, *args: str) -> str:
    result = run_kexp("add", "--json", "--description", TEMPLATE, *args, cwd=repo)
    assert result.returncode == 0, result.stderr
    exp_id: str = json.loads(result.stdout)["id"]
    return exp_id


def test_the_dead_end_whose_number_the_plan_names_ranks_first(repo: Path) -> None:
    """Trial O, finding 09: a campaign on an attention kernel whose descriptions are the
    template, its successes tiled 128x64 and widened BLOCK_N to 128, its dead end
    BLOCK_N 128 -> 256 (register spills). The plan "increase the key tile width to 256"
    shares one word with the tiling success ("tile") and one number with the dead end
    (256): the dead end comes first, ahead. Before, "tile" was asked three times
    (its synonyms "tiling" and "tiled" are the index's one term "tile") and a number
    weighed a third of a summary's word: the tiling success came first."""
    operator = ("--operator", "kernels/attn/fused_attn.py: fused_attention_fwd")
    place = (*operator, "--dtype", "bf16", "--env", "H100 SXM5 80GB, CUDA 12.4")
    tiled = _add(repo, *place, "--score", "1.15", "--summary", "Tiling 128x64 - +15%")
    wider = _add(repo, "--pid", tiled, "--score", "1.10", "--summary", "BLOCK_N 64 -> 128 - +10%")
    _add(repo, "--pid", wider, "--score", "1.03", "--summary", "exp2 softmax - +3%")
    dead = _add(
        repo,
        *("--pid", wider, "--score", "0", "--status", "failed", "--buggy"),
        *("--error", "ptxas: spill stores; out of resources"),
        *("--summary", "BLOCK_N 128 -> 256 - failed (register spills)"),
        *("--diff", "-BLOCK_N = 128\n+BLOCK_N = 256\n"),
    )

    result = run_kexp("similar", "--text", "increase the key tile width to 256", "--json", cwd=repo)
    assert result.returncode == 0, result.stderr
    ranked = [(m["change_summary"], m["relevance"]) for m in json.loads(result.stdout)]
    assert json.loads(result.stdout)[0]["id"] == dead, ranked
    assert ranked[0][1] > ranked[1][1], ranked  # not first by a tie


def test_a_plans_word_counts_once_with_the_synonyms_the_index_keeps_as_it(
    store: Store, make_experiment: Callable[..., KernelExperiment]
) -> None:
    """ "tile" asks for its synonyms "tiling" and "tiled" too, which the index keeps as
    the one term "tile" (Porter stems): it counts once, as "swizzle" (no synonyms)
    does, so two experiments alike but for one of these words rank alike."""
    tiled = make_experiment(change_summary="Tile the row loads - +2%")
    swizzled = make_experiment(change_summary="Swizzle the row loads - +2%")
    make_experiment(change_summary="Fuse the residual add - +3%")
    matches = {m.id: m.relevance for m in similar(store, text="tile or swizzle the loads")}
    assert matches[tiled.id] == matches[swizzled.id], matches


def test_a_size_written_as_dimensions_is_its_numbers(
    store: Store, make_experiment: Callable[..., KernelExperiment]
) -> None:
    """``128x64`` is 128 and 64, in a summary, in code and in a plan (before, the
    ``x64`` of it was a word, and 64 no number): "tile 128x64" picks the 128x64 tiling
    out of the 128x128 and 64x64 ones, ahead."""
    assert doctext.numbers_of("Tiling 256x128, MFMA 32x32x8") == ["256", "128", "32", "32", "8"]
    assert doctext.code_words("+  tile = Tile<128x64>();\n") == "tile Tile 128 64"
    assert [w for w in doctext.query_words("a 128x64 tile") if w.isdigit()] == ["128", "64"]
    assert doctext.numbers_of("mask 0x10, bf16x2 pairs") == ["0"]  # hex, a word's digits
    made = {
        size: make_experiment(change_summary=f"Tiling {size} for the row loop - +2%")
        for size in ("128x128", "128x64", "64x64")
    }
    make_experiment(change_summary="Fuse the residual add - +3%")
    matches = similar(store, text="tile 128x64")
    ranked = [(m.change_summary, m.relevance) for m in matches]
    assert matches[0].id == made["128x64"].id, ranked
    assert matches[0].relevance > matches[1].relevance, ranked


def test_the_description_templates_labels_are_no_words_of_the_experiments(
    store: Store, make_experiment: Callable[..., KernelExperiment]
) -> None:
    """Every description repeats ``**Key insight**:``, and "keys" is the index's "key"
    (one Porter stem): were the labels indexed, every experiment would hold a plan's
    "keys" and it would weigh nothing. Two steps alike but for keys and values, among
    others: the plan about keys picks the one about keys, ahead (before, a tie)."""

    def step(summary: str) -> KernelExperiment:
        return make_experiment(change_summary=summary, detailed_description=TEMPLATE)

    keys = step("Pad the keys tile in LDS - +3%")
    step("Pad the values tile in LDS - +3%")
    for summary in ("Fuse the residual add", "Exp2 softmax", "Unroll by 4", "Scalar slots"):
        step(f"{summary} - +1%")
    matches = similar(store, text="pad the keys tile")
    ranked = [(m.change_summary, m.relevance) for m in matches]
    assert len(matches) > 1 and matches[0].id == keys.id, ranked
    assert matches[0].relevance > matches[1].relevance, ranked
