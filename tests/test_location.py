"""Creating a store (``kexp init``): what it writes, and that a write cut short leaves
nothing half-written behind, in real processes on real folders."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

from kexp import init_store

#: A child that creates a store with a file-size limit too small for the README: the
#: write fails part way (EFBIG), as it would on a full disk.
INIT_WITH_A_SMALL_FILE_LIMIT = textwrap.dedent(
    """
    import resource, signal, sys
    from kexp import init_store
    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
    resource.setrlimit(resource.RLIMIT_FSIZE, (64, resource.RLIM_INFINITY))
    try:
        init_store(sys.argv[1])
    except Exception as exc:
        print(type(exc).__name__, exc)
        sys.exit(3)
    """
)


def test_a_readme_write_cut_short_leaves_no_half_readme(tmp_path: Path) -> None:
    """The README is written atomically: a failed write leaves no README (nor a
    temporary file), and the next ``init`` writes it whole, as a fresh store has it."""
    expected = (init_store(tmp_path / "fresh") / "experiments" / "README.md").read_bytes()
    assert len(expected) > 64  # the limit below cuts it
    root = tmp_path / "store"
    child = subprocess.run(
        [sys.executable, "-c", INIT_WITH_A_SMALL_FILE_LIMIT, str(root)],
        capture_output=True,
        text=True,
        check=False,
    )
    assert child.returncode == 3, (child.stdout, child.stderr)
    assert "Traceback" not in child.stderr
    assert sorted(p.name for p in (root / "experiments").iterdir()) == []
    init_store(root)
    assert (root / "experiments" / "README.md").read_bytes() == expected
    assert sorted(p.name for p in (root / "experiments").iterdir()) == ["README.md"]
