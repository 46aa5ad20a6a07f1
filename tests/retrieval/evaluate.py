"""The retrieval figures: recall@5 of ``kexp similar`` and precision of the "tried
before" check, on a labelled fixture.

Run it from the repository root, with kexp installed::

    python tests/retrieval/evaluate.py            # the figures, as a Markdown table
    python tests/retrieval/evaluate.py --misses   # and every pair that missed

The fixture: ``corpus.yaml`` (46 experiments on nine kernels, written by hand) becomes a
store in a temporary folder, with 1,000 experiments of the benchmark's generator
(``bench/generate.py``: the same kernels and techniques) as distractors. ``pairs.yaml``
holds labelled pairs (a query and an experiment): the same idea in other words (a
``--text`` plan), the same change with renamed variables, with its hunks reordered, or
taken on another base (a ``--diff``), and unrelated queries that share words or lines
with an experiment.

The figures:

* **recall@5**: of the related pairs, the share whose experiment is among the first 5
  that :func:`kexp.storage.retrieval.similar` returns for the query;
* **MRR**: the mean of 1 / rank of that experiment (0 when not in the first 10);
* **near-duplicate precision and recall**: :func:`kexp.storage.repeats.tried_before` (what a
  create warns with) for every diff query: a report of the pair's experiment for a
  related pair is right, every other report (another experiment, or the experiment of
  an unrelated pair) is wrong;
* **unrelated first**: unrelated text queries whose experiment came first anyway.
"""

from __future__ import annotations

import argparse
import dataclasses
import re
import sys
import tempfile
import warnings
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import yaml

from kexp import KernelExperiment, Store, init_store
from kexp.format.fileformat import serialize
from kexp.storage.repeats import tried_before
from kexp.storage.retrieval import similar
from kexp.storage.store import slugify

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent.parent / "bench"))
#: Recall is counted in the first this many results.
TOP_K = 5
#: Synthetic experiments of the benchmark's generator added to the store as distractors
#: (the same kernels and techniques, other words and diffs).
BACKGROUND = 1000


@dataclasses.dataclass(frozen=True)
class Pair:
    """One labelled query: what is asked, and the experiment it is (not) about."""

    kind: str
    target: str
    related: bool
    text: str | None
    diff: str | None


def load_corpus() -> list[dict[str, Any]]:
    """The fixture's experiments, as written in ``corpus.yaml``."""
    loaded: list[dict[str, Any]] = yaml.safe_load((HERE / "corpus.yaml").read_text("utf-8"))
    return loaded


def experiment_of(index: int, item: dict[str, Any]) -> KernelExperiment:
    """The experiment of one corpus entry (id and time fixed by its position)."""
    description = (
        f"**Approach**: {item['approach']}\n\n"
        f"**Result**: {item['summary'].split(' - ', 1)[-1]}\n\n"
        f"**Why it worked/failed**: {item['why']}\n\n"
        f"**Key insight**: {item['insight']}"
    )
    return KernelExperiment(
        id=f"6ac00000{index:08x}",
        created_at=f"2026-10-{1 + index // 24:02d}T{index % 24:02d}:00:00Z",
        change_summary=item["summary"],
        score=float(item["score"]),
        status=item.get("status", "done"),
        is_buggy=bool(item.get("buggy", False)),
        error_message=item.get("error", ""),
        operator_sig=item["operator"],
        dtype_sig=item["dtype"],
        env=item["env"],
        base_commit="0f54a8d954a292dd879f37334f90573ddeb49278",
        detailed_description=description,
        code_change=item["diff"],
    )


def _write(root: Path, exp: KernelExperiment) -> None:
    folder = root / "experiments" / exp.created_at[:4] / exp.created_at[5:7]
    folder.mkdir(parents=True, exist_ok=True)
    name = f"{exp.id}-{slugify(exp.change_summary)}.md"
    (folder / name).write_text(serialize(exp), encoding="utf-8")


def make_store(
    root: Path, corpus: list[dict[str, Any]], background: int = BACKGROUND
) -> tuple[Store, dict[str, str]]:
    """A store holding the corpus and ``background`` experiments of the benchmark's
    generator (files written as kexp writes them), and the id of each corpus name."""
    import generate  # bench/generate.py

    init_store(root)
    ids: dict[str, str] = {}
    for index, item in enumerate(corpus):
        exp = experiment_of(index, item)
        _write(root, exp)
        ids[item["name"]] = exp.id
    for exp in generate.synthetic_experiments(background):
        _write(root, exp)
    return Store(root), ids


# --- turning a corpus diff into a query -------------------------------------------------


def _hunks(diff: str) -> tuple[list[str], list[list[str]]]:
    """A diff's header lines, and its hunks (each starting with its ``@@`` line)."""
    header: list[str] = []
    hunks: list[list[str]] = []
    for line in diff.splitlines():
        if line.startswith("@@"):
            hunks.append([line])
        elif hunks:
            hunks[-1].append(line)
        else:
            header.append(line)
    return header, hunks


def renamed(diff: str, names: dict[str, str]) -> str:
    """``diff`` with every identifier in ``names`` renamed (whole words, code lines)."""
    header, hunks = _hunks(diff)
    # A variable, not a member of the same name (``x.x``: only the first is renamed).
    pattern = re.compile(r"(?<![.>])\b(" + "|".join(map(re.escape, names)) + r")\b")
    out = list(header)
    for hunk in hunks:
        out.append(hunk[0])
        out += [pattern.sub(lambda m: names[m.group(1)], line) for line in hunk[1:]]
    return "\n".join(out) + "\n"


def reordered(diff: str, order: list[int]) -> str:
    """``diff`` with its hunks in the given order."""
    header, hunks = _hunks(diff)
    return "\n".join(header + [line for i in order for line in hunks[i]]) + "\n"


def rebased(diff: str, spaces: int) -> str:
    """``diff`` as taken on another base: line numbers moved by 17, code indented by
    ``spaces`` more."""
    header, hunks = _hunks(diff)

    def moved(match: re.Match[str]) -> str:
        return f"{match.group(1)}{int(match.group(2)) + 17}"

    out = list(header)
    for hunk in hunks:
        out.append(re.sub(r"([-+])(\d+)", moved, hunk[0]))
        out += [line[:1] + " " * spaces + line[1:] if line else line for line in hunk[1:]]
    return "\n".join(out) + "\n"


def load_pairs(corpus: list[dict[str, Any]]) -> list[Pair]:
    """The labelled pairs of ``pairs.yaml``, their diff queries built."""
    diffs = {item["name"]: item["diff"] for item in corpus}
    pairs = []
    for item in yaml.safe_load((HERE / "pairs.yaml").read_text("utf-8")):
        kind, target = item["kind"], item["target"]
        diff = item.get("diff")
        if kind in ("renamed", "reordered", "rebased"):
            diff = diffs[target]
            if "order" in item:
                diff = reordered(diff, item["order"])
            if "rename" in item:
                diff = renamed(diff, item["rename"])
            if "reindent" in item:
                diff = rebased(diff, item["reindent"])
        pairs.append(Pair(kind, target, kind != "unrelated", item.get("text"), diff))
    return pairs


# --- the figures ------------------------------------------------------------------------


@dataclasses.dataclass
class Figures:
    """What :func:`evaluate` measured."""

    pairs: int = 0
    related: int = 0
    hits: int = 0
    reciprocal_ranks: float = 0.0
    by_kind: dict[str, list[int]] = dataclasses.field(default_factory=dict)
    near_right: int = 0
    near_wrong: int = 0
    near_related_pairs: int = 0
    unrelated_text: int = 0
    unrelated_first: int = 0
    misses: list[str] = dataclasses.field(default_factory=list)

    @property
    def recall(self) -> float:
        """recall@5 over the related pairs."""
        return self.hits / self.related if self.related else 0.0

    @property
    def mrr(self) -> float:
        """Mean reciprocal rank over the related pairs (first 10)."""
        return self.reciprocal_ranks / self.related if self.related else 0.0

    @property
    def near_precision(self) -> float:
        """Of the near-duplicate reports, the share that were right."""
        reported = self.near_right + self.near_wrong
        return self.near_right / reported if reported else 1.0

    @property
    def near_recall(self) -> float:
        """Of the related diff pairs, the share whose experiment was reported."""
        return self.near_right / self.near_related_pairs if self.near_related_pairs else 0.0


def evaluate(store: Store, ids: dict[str, str], pairs: list[Pair]) -> Figures:
    """Ask every pair's query and count (see the module documentation)."""
    figures = Figures(pairs=len(pairs))
    for pair in pairs:
        target = ids[pair.target]
        found = [m.id for m in similar(store, text=pair.text, diff=pair.diff, limit=10)]
        rank = found.index(target) + 1 if target in found else None
        if pair.related:
            figures.related += 1
            hit = rank is not None and rank <= TOP_K
            figures.hits += hit
            figures.reciprocal_ranks += 1 / rank if rank else 0.0
            figures.by_kind.setdefault(pair.kind, [0, 0])
            figures.by_kind[pair.kind][0] += 1
            figures.by_kind[pair.kind][1] += hit
            if not hit:
                figures.misses.append(f"{pair.kind} {pair.target}: rank {rank or '> 10'}")
        elif pair.text is not None:
            figures.unrelated_text += 1
            if rank == 1:
                figures.unrelated_first += 1
                figures.misses.append(f"unrelated text ranked first: {pair.target}")
        if pair.diff is None:
            continue
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            reported = [r.id for r in tried_before(store, pair.diff)]
        if pair.related:
            figures.near_related_pairs += 1
        for exp_id in reported:
            if pair.related and exp_id == target:
                figures.near_right += 1
            else:
                figures.near_wrong += 1
                name = next(n for n, i in ids.items() if i == exp_id)
                figures.misses.append(f"{pair.kind} {pair.target}: reported {name} as tried")
        if pair.related and target not in reported:
            figures.misses.append(f"{pair.kind} {pair.target}: not reported as tried")
    return figures


def run(background: int = BACKGROUND) -> Figures:
    """Build the fixture's store in a temporary folder and evaluate every pair."""
    corpus = load_corpus()
    with tempfile.TemporaryDirectory(prefix="kexp-retrieval-") as folder:
        store, ids = make_store(Path(folder), corpus, background)
        problems = [p for p in store.validate() if p.severity == "error"]
        if problems:
            raise SystemExit(f"the fixture's corpus is invalid: {problems[0].format()}")
        return evaluate(store, ids, load_pairs(corpus))


def report(figures: Figures, background: int = BACKGROUND) -> Iterator[str]:
    """The figures as Markdown."""
    yield f"{figures.pairs} labelled pairs, {figures.related} related, over a store of "
    yield f"{len(load_corpus())} experiments and {background} synthetic distractors.\n\n"
    yield "| query | pairs | recall@5 |\n|---|---:|---:|\n"
    for kind, (count, hits) in sorted(figures.by_kind.items()):
        yield f"| {kind} | {count} | {hits / count:.2f} |\n"
    yield f"| **all related** | {figures.related} | **{figures.recall:.2f}** |\n\n"
    yield f"- MRR (first 10): {figures.mrr:.2f}\n"
    yield (
        f"- tried-before check: precision {figures.near_precision:.2f} "
        f"({figures.near_right} right, {figures.near_wrong} wrong reports), recall "
        f"{figures.near_recall:.2f} of {figures.near_related_pairs} related diffs\n"
    )
    yield (
        f"- unrelated text queries whose experiment ranked first: "
        f"{figures.unrelated_first} of {figures.unrelated_text}\n"
    )


def main(argv: list[str] | None = None) -> int:
    """Command line: print the figures (and the misses with ``--misses``)."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--misses", action="store_true", help="also list every miss")
    parser.add_argument(
        "--background",
        type=int,
        default=BACKGROUND,
        help=f"synthetic distractor experiments in the store (default {BACKGROUND})",
    )
    args = parser.parse_args(argv)
    figures = run(args.background)
    sys.stdout.write("".join(report(figures, args.background)))
    if args.misses:
        for miss in figures.misses:
            print(f"  miss: {miss}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
