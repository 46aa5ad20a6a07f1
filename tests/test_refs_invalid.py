"""An invalid version on another agent's branch, read across refs (trial Q's leftover,
round 24): a teammate's broken edit must not hide the valid version the reader holds,
and ``kexp validate --refs`` checks the branch's own bytes."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from click.testing import CliRunner
from conftest import git
from test_sync import clone, make_remote, record

from kexp import Store
from kexp.cli.main import main
from kexp.core.errors import InvalidExperimentWarning
from kexp.storage.sync import sync

NARROW = {"COLUMNS": "80", "KEXP_PAGER": "cat"}


def _kexp(root: Path, *args: str) -> tuple[int, str, str]:
    done = CliRunner().invoke(main, ["--root", str(root), *args], env=NARROW)
    return done.exit_code, done.stdout, done.stderr


def _broken_on_bob(tmp_path: Path) -> tuple[Path, str, str]:
    """Alice and Bob share an experiment on ``main``; Bob's branch then breaks its score
    (``score: banana``) and records one of his own, broken too. Alice fetched: (her
    clone, the shared id, Bob's own id)."""
    remote, base = make_remote(tmp_path)
    alice, bob = clone(remote, tmp_path / "alice"), clone(remote, tmp_path / "bob")
    shared = record(alice, base, "Unrolled by 4 - +1.9%", score=1.19)
    sync(Store(alice))
    git(bob, "pull", "-q")
    git(bob, "checkout", "-q", "-b", "kexp/bob")
    own = record(bob, base, "Vectorized loads - +3.0%", score=1.03)
    for exp in (shared, own):
        path = Store(bob).path_of(exp.id)
        text = path.read_text()
        path.write_text(re.sub(r"(?m)^score: .*$", "score: banana", text))
    git(bob, "add", "-A")
    git(bob, "commit", "-q", "-m", "a broken edit")
    git(bob, "push", "-q", "origin", "kexp/bob")
    git(alice, "fetch", "-q")
    return alice, shared.id, own.id


def test_an_invalid_newer_version_on_a_branch_leaves_the_valid_one_read(
    tmp_path: Path,
) -> None:
    """Bob's branch holds a newer, invalid version of an experiment Alice holds valid:
    ``top --all-refs`` warned of the branch's file and then left the experiment out
    altogether (``show`` failed, ``stats`` counted nothing), as if it had never been
    recorded. The newest valid version is read instead; the invalid one is still said."""
    alice, shared, _ = _broken_on_bob(tmp_path)
    code, out, err = _kexp(alice, "top", "--all-refs")
    assert code == 0, err
    assert shared[:10] in out, out
    assert "1.1900" in out, out
    assert "at origin/kexp/bob" in err and "banana" in err, err
    code, out, err = _kexp(alice, "show", shared[:10], "--all-refs")
    assert code == 0 and "1.1900" in out, (out, err)
    with pytest.warns(InvalidExperimentWarning, match="banana"):
        ids = [e.id for e in Store(alice, all_refs=True).list_experiments()]
    assert ids == [shared], ids


def test_validate_across_refs_checks_the_branchs_own_bytes(tmp_path: Path) -> None:
    """An invalid file only Bob's branch holds was reported by ``kexp validate --refs``
    as "cannot read the file: No such file or directory" (the working tree's path was
    read), not as its own problem."""
    alice, _, own = _broken_on_bob(tmp_path)
    code, out, err = _kexp(alice, "validate", "--refs", "origin/kexp/bob")
    text = out + err
    assert code != 0, text  # an error found: validate fails
    (line,) = [x for x in text.splitlines() if own in x and "error[" in x]
    assert "error[wrong-type]" in line and "banana" in line, text
    assert "No such file" not in text, text


def test_validate_across_refs_reports_an_invalid_version_beside_the_valid_one_read(
    tmp_path: Path,
) -> None:
    """Bob's branch breaks an experiment Alice holds valid: reads take Alice's version,
    and ``kexp validate --refs`` said "0 error(s)" and passed, though the branch it was
    asked to check holds an invalid file (trial T, finding 03)."""
    alice, shared, _ = _broken_on_bob(tmp_path)
    code, out, err = _kexp(alice, "validate", "--refs", "origin/kexp/bob")
    text = out + err
    assert code != 0, text
    (line,) = [x for x in text.splitlines() if shared in x and "error[" in x]
    assert "banana" in line and "its version on origin/kexp/bob" in line, text
