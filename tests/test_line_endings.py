"""An update keeps a file's line endings and BOM: a file saved on Windows (CRLF, with a
UTF-8 BOM) changes only in the lines of the fields an update changes, so two
corrections of different fields on two branches merge in git without a conflict."""

from __future__ import annotations

import codecs
import subprocess
from pathlib import Path

from conftest import experiment_fields, git

from kexp import Store


def as_windows_file(path: Path) -> bytes:
    """Rewrite ``path`` with CRLF line endings and a BOM, but one line of the raw result
    left with a lone LF (a hand edit): the bytes written."""
    text = path.read_text().replace("\n", "\r\n")
    text = text.replace("second line\r\n", "second line\n", 1)
    data = codecs.BOM_UTF8 + text.encode()
    path.write_bytes(data)
    return data


def changed_lines(before: bytes, after: bytes) -> list[tuple[bytes, bytes]]:
    old, new = before.split(b"\n"), after.split(b"\n")
    assert len(old) == len(new), (before, after)
    return [(a, b) for a, b in zip(old, new, strict=True) if a != b]


def test_an_update_of_a_crlf_file_keeps_its_endings_and_merges_in_git(
    repo: Path, store: Store
) -> None:
    exp = store.create_experiment(
        **experiment_fields(raw_result="first line\nsecond line\nthird line")
    )
    assert exp.path is not None
    original = as_windows_file(exp.path)
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", "an experiment saved on Windows")

    git(repo, "checkout", "-q", "-b", "rescore")
    store.update_experiment(exp.id, score=1.031)
    rescored = exp.path.read_bytes()
    assert rescored.startswith(codecs.BOM_UTF8)
    assert changed_lines(original, rescored) == [(b"score: 1.019\r", b"score: 1.031\r")]
    git(repo, "commit", "-q", "-am", "re-measured")

    git(repo, "checkout", "-q", "main")
    store.update_experiment(exp.id, env="MI300X, ROCm 7.1.0")
    moved = exp.path.read_bytes()
    assert changed_lines(original, moved) == [
        (b"env: MI300X, ROCm 7.0.0\r", b"env: MI300X, ROCm 7.1.0\r")
    ]
    git(repo, "commit", "-q", "-am", "the environment was ROCm 7.1")

    merged = subprocess.run(
        ["git", "merge", "--no-edit", "rescore"], cwd=repo, capture_output=True, text=True
    )
    assert merged.returncode == 0, merged.stdout + merged.stderr
    both = exp.path.read_bytes()
    assert changed_lines(original, both) == [
        (b"score: 1.019\r", b"score: 1.031\r"),
        (b"env: MI300X, ROCm 7.0.0\r", b"env: MI300X, ROCm 7.1.0\r"),
    ]
    again = store.get_experiment(exp.id)
    assert (again.score, again.env) == (1.031, "MI300X, ROCm 7.1.0")
    assert again.raw_result == "first line\nsecond line\nthird line"


def test_new_lines_in_a_crlf_file_end_in_crlf(store: Store) -> None:
    """A field added by an update, and a text of several lines replaced, are written
    with the file's CRLF endings."""
    exp = store.create_experiment(**experiment_fields())
    assert exp.path is not None
    exp.path.write_bytes(exp.path.read_bytes().replace(b"\n", b"\r\n"))
    store.update_experiment(exp.id, tags=["unroll", "cache"], profiling_info="a\nb")
    data = exp.path.read_bytes()
    assert b"\n" not in data.replace(b"\r\n", b"")
    assert b"\r\ntags: [unroll, cache]\r\n" in data
    assert b"## Profiling info\r\n\r\na\r\nb\r\n" in data
    assert store.get_experiment(exp.id).profiling_info == "a\nb"
