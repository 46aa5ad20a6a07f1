"""``kexp.update_experiment`` is ``kexp update ID --set FIELD=VALUE ...`` in one call,
its ``--reason`` too (trial P, finding 08): ``reason=`` was refused as "not a field", so
a notebook's score correction carried no dated note (``validate`` and ``sync`` later
call such a change unexplained)."""

from __future__ import annotations

import re
import shutil
from pathlib import Path

import pytest
from conftest import run_kexp

import kexp
from kexp import Store
from kexp.core.errors import KexpError

REASON = "re-measured on an idle GPU"


@pytest.fixture
def tiling(repo: Path) -> str:
    done = run_kexp(
        "add", "--summary", "Tiling - +15%", "--score", "1.15", "--operator", "k.py: f",
        "--dtype", "bf16", "--env", "H100", "--description", "**Key insight**: x", "--json",
        cwd=repo,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    return str(Store(repo).list_experiments()[0].id)


def undated(text: str) -> str:
    return re.sub(r"\*\*Correction \([^)]*\)\*\*", "**Correction (DATE)**", text)


def test_reason_writes_the_dated_note_kexp_update_reason_writes(
    repo: Path, tiling: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    twin = tmp_path / "twin"
    shutil.copytree(repo, twin)
    by_cli = run_kexp("update", tiling, "--set", "score=1.18", "--reason", REASON, cwd=twin)
    assert by_cli.returncode == 0, by_cli.stderr
    monkeypatch.setenv("KEXP_ROOT", str(repo))
    updated = kexp.update_experiment(tiling, score=1.18, reason=REASON)
    assert (updated.score, updated.change_summary) == (1.18, "Tiling - +18%")
    assert "score 1.15 → 1.18" in updated.detailed_description
    assert updated.detailed_description.endswith(f"Reason: {REASON}")
    path = updated.path
    assert path is not None
    written = path.read_text(encoding="utf-8")
    assert undated(written) == undated((twin / path.relative_to(repo)).read_text("utf-8"))


def test_an_empty_reason_is_refused_and_nothing_is_written(
    repo: Path, tiling: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("KEXP_ROOT", str(repo))
    path = Store(repo).get_experiment(tiling).path
    assert path is not None
    before = path.read_bytes()
    with pytest.raises(KexpError, match="the reason of a correction must not be empty"):
        kexp.update_experiment(tiling, score=1.18, reason="  ")
    assert path.read_bytes() == before
