"""How much an agent reads: ``kexp top --brief --json`` against the predecessor's answer.

Usage (from the repository root)::

    python bench/brief_ratio.py --sizes 200,1000
    python bench/brief_ratio.py --data-dir /work/bench-data --sizes 1000

For each N it takes the benchmark's data set (``bench/generate.py``: a kexp store and
the same experiments as the predecessor's JSON database) and compares, in characters:

* the predecessor's ``repr(top_experiments(20))``: what an agent printed with the old
  helpers (every record, buggy and pending ones too, sorted by score, the best 20, each
  a dict of exactly ``base_commit, change_summary, detailed_description, dtype_sig,
  env, id, operator_sig, profiling_info, raw_result, score``), computed from the JSON
  database as those helpers did;
* the standard output of ``kexp --root STORE top --brief --json`` (the form the skill
  recommends), run as a process;
* and ``kexp top --json`` (lean, whole records) and ``kexp top --json --full`` for
  reference.

It checks that every record of the brief output carries its experiment's key insight
(when the experiment has one) and prints the ratios; the target is brief ≤ 0.3 ×
the predecessor. Exit status 1 when the target is missed or an insight is missing.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

import generate

from kexp.format.fileformat import key_insight

TARGET = 0.3
PREDECESSOR_KEYS = (
    "base_commit",
    "change_summary",
    "detailed_description",
    "dtype_sig",
    "env",
    "id",
    "operator_sig",
    "profiling_info",
    "raw_result",
    "score",
)


def predecessor_top(db: dict[str, dict[str, Any]], n: int = 20) -> list[dict[str, Any]]:
    """The predecessor's ``top_experiments(n)``: every record by score, best first."""
    records = sorted(db.values(), key=lambda r: r["score"], reverse=True)[: max(0, n)]
    return [{key: record[key] for key in PREDECESSOR_KEYS} for record in records]


def kexp_output(store: Path, code: Path, *args: str) -> str:
    """The standard output of ``kexp --root STORE top ARGS``."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("KEXP_")}
    env["KEXP_CODE_REPO"] = str(code)
    kexp = Path(sys.executable).with_name("kexp")
    command = [str(kexp)] if kexp.exists() else [sys.executable, "-m", "kexp"]
    result = subprocess.run(
        [*command, "--root", str(store), "top", *args],
        capture_output=True,
        text=True,
        env=env,
        check=True,
    )
    return result.stdout


def measure(folder: Path) -> tuple[dict[str, Any], list[str]]:
    """The figures of one data set, and the problems found."""
    db = json.loads((folder / generate.JSON_NAME).read_text(encoding="utf-8"))
    old = len(repr(predecessor_top(db)))
    store, code = folder / "store", folder / "code"
    brief = kexp_output(store, code, "--brief", "--json")
    lean = kexp_output(store, code, "--json")
    full = kexp_output(store, code, "--json", "--full")
    problems = []
    for record in json.loads(brief):
        wanted = key_insight(db[record["id"]]["detailed_description"])
        if wanted and record.get("key_insight") != wanted:
            problems.append(f"{record['id']}: the key insight is missing or differs")
    figures = {
        "experiments": len(db),
        "predecessor_repr": old,
        "brief_json": len(brief),
        "json": len(lean),
        "json_full": len(full),
        "brief_ratio": len(brief) / old,
        "json_ratio": len(lean) / old,
        "full_ratio": len(full) / old,
    }
    if figures["brief_ratio"] > TARGET:
        problems.append(f"brief/predecessor is {figures['brief_ratio']:.3f} > {TARGET}")
    return figures, problems


def main(argv: list[str] | None = None) -> int:
    """Command line: measure each size and print a Markdown table."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    generate.add_data_options(parser)
    args = parser.parse_args(argv)
    print(
        "| N | predecessor repr (chars) | `top --brief --json` | ratio | `top --json` | ratio "
        "| `top --json --full` | ratio |"
    )
    print("|---:|---:|---:|---:|---:|---:|---:|---:|")
    failed = False
    for n in args.sizes:
        dataset = generate.ensure_dataset(
            n,
            args.data_dir,
            args.seed,
            git=args.git,
            per_month=args.per_month,
            log=lambda message: print(message, file=sys.stderr),
        )
        figures, problems = measure(dataset.folder)
        print(
            f"| {n:,} | {figures['predecessor_repr']:,} | {figures['brief_json']:,} | "
            f"{figures['brief_ratio']:.3f} | {figures['json']:,} | {figures['json_ratio']:.3f} "
            f"| {figures['json_full']:,} | {figures['full_ratio']:.3f} |"
        )
        for problem in problems:
            print(f"N={n}: {problem}", file=sys.stderr)
        failed = failed or bool(problems)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
