"""kexp fmt and files that come and go while it runs (another process, git, rm)."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

from conftest import experiment_fields

from kexp import Store


def test_files_deleted_while_kexp_fmt_runs_are_no_problem(store: Store, repo: Path) -> None:
    """kexp fmt lists the files, then formats each under its lock: one deleted after it
    was listed (here: while fmt waits for its lock, held by this process) is simply
    gone, not an error, and is not brought back."""
    exps = [
        store.create_experiment(**experiment_fields(change_summary=f"Try {n} - +{n}%"))
        for n in range(3)
    ]
    paths = sorted(e.path for e in exps if e.path is not None)
    for path in paths:  # a comment in the front-matter: not canonical
        path.write_text(path.read_text().replace("---\n", "---\n# a hand note\n", 1))
    first, second, third = paths
    first_text = first.read_bytes()
    second_id = second.name[:16]
    with store.lock(second_id):
        formatting = subprocess.Popen(
            [sys.executable, "-m", "kexp", "fmt"],
            cwd=repo,
            env={**os.environ, "KEXP_ROOT": str(repo)},
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        deadline = time.monotonic() + 60
        while first.read_bytes() == first_text:  # fmt is at the second file, waiting
            assert time.monotonic() < deadline and formatting.poll() is None
            time.sleep(0.01)
        second.unlink()
    out, err = formatting.communicate(timeout=60)
    assert formatting.returncode == 0, out + err
    assert "error" not in err and "Traceback" not in err, err
    assert "2 file(s) reformatted" in err
    assert not second.exists()
    assert "# a hand note" not in third.read_text()
