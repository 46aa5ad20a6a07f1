"""Write torch_benchmark_{baseline,candidate}.json beside this file with
torch.utils.benchmark (needs torch; kexp's tests only read the files)."""

import dataclasses
import json
from pathlib import Path

import torch
import torch.utils.benchmark as benchmark


def main() -> None:
    torch.manual_seed(0)
    here = Path(__file__).parent
    sides = (
        ("baseline", "torch.softmax(x.clone(), dim=-1)"),
        ("candidate", "torch.softmax(x, dim=-1)"),
    )
    for side, stmt in sides:
        results = []
        for rows, cols in ((64, 1024), (128, 1024)):
            timer = benchmark.Timer(
                stmt=stmt,
                globals={"x": torch.randn(rows, cols), "torch": torch},
                label="softmax",
                sub_label=f"r{rows}_c{cols}",
                description=side,
            )
            results.append(dataclasses.asdict(timer.blocked_autorange(min_run_time=0.1)))
        path = here / f"torch_benchmark_{side}.json"
        path.write_text(json.dumps(results, indent=1) + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()
