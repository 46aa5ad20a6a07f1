"""The query cache (.kexp/index-v1) is never wrong: every way a file can change is seen."""

from __future__ import annotations

import os
import subprocess
import sys
import warnings
from collections.abc import Callable
from pathlib import Path

import pytest
from conftest import experiment_fields, git

from kexp import InvalidExperimentWarning, KernelExperiment, Store
from kexp.index import INDEX_FILE

OLD = 1_600_000_000  # a modification time far in the past (seconds)


def _age(path: Path) -> None:
    """Make ``path`` look old enough to be cached (not racily clean)."""
    os.utime(path, ns=(OLD * 10**9, OLD * 10**9))


def _scores(store: Store) -> dict[str, float]:
    return {e.id: e.score for e in store.list_experiments(brief=True)}


def _uncached(store: Store) -> dict[str, float]:
    plain = Store(store.root)
    plain._cached = False
    return {e.id: e.score for e in plain.list_experiments()}


@pytest.fixture
def aged(store: Store, make_experiment: Callable[..., KernelExperiment]) -> list[KernelExperiment]:
    made = [
        make_experiment(score=1.0 + n / 100, change_summary=f"Try {n} - +{n}%") for n in range(3)
    ]
    for exp in made:
        assert exp.path is not None
        _age(exp.path)
    return made


def test_the_cache_is_built_and_then_used(store: Store, aged: list[KernelExperiment]) -> None:
    assert _scores(store) == _uncached(store)
    index = store.cache_dir / INDEX_FILE
    assert index.is_file()
    before = index.stat().st_mtime_ns
    assert _scores(store) == _uncached(store)
    assert index.stat().st_mtime_ns == before  # nothing changed: not rewritten


def test_an_edit_in_place_with_the_same_size_and_mtime_is_seen(
    store: Store, aged: list[KernelExperiment]
) -> None:
    _scores(store)  # cache every file
    path = aged[0].path
    assert path is not None
    text = path.read_text()
    assert "score: 1.0\n" in text
    path.write_text(text.replace("score: 1.0\n", "score: 2.0\n"))  # same size
    _age(path)  # same modification time as before, to the nanosecond
    assert _scores(store)[aged[0].id] == 2.0


def test_a_file_changed_in_the_same_tick_it_was_cached_is_seen(
    store: Store, make_experiment: Callable[..., KernelExperiment]
) -> None:
    exp = make_experiment(score=1.5)
    assert exp.path is not None
    stamp = exp.path.stat().st_mtime_ns
    assert _scores(store)[exp.id] == 1.5  # racily clean: not cached
    exp.path.write_text(exp.path.read_text().replace("score: 1.5\n", "score: 2.5\n"))
    os.utime(exp.path, ns=(stamp, stamp))
    assert _scores(store)[exp.id] == 2.5


def test_delete_and_rename_are_seen(store: Store, aged: list[KernelExperiment]) -> None:
    _scores(store)
    first, second = aged[0].path, aged[1].path
    assert first is not None and second is not None
    first.unlink()
    renamed = second.with_name(second.name.replace(".md", "-renamed.md"))
    second.rename(renamed)
    found = {e.id: e.path for e in store.list_experiments(brief=True)}
    assert aged[0].id not in found
    assert found[aged[1].id] == renamed


def test_a_checkout_of_another_branch_is_seen(
    repo: Path, store: Store, aged: list[KernelExperiment]
) -> None:
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", "three experiments")
    git(repo, "checkout", "-q", "-b", "other")
    store.update_experiment(aged[2].id, score=3.0)
    store.delete_experiment(aged[0].id)
    git(repo, "commit", "-q", "-am", "correct and remove")
    assert _scores(store) == _uncached(store)
    git(repo, "checkout", "-q", "main")
    assert _scores(store) == _uncached(store)
    assert _scores(store)[aged[2].id] == 1.02 and aged[0].id in _scores(store)


def test_another_process_write_is_seen(store: Store, aged: list[KernelExperiment]) -> None:
    _scores(store)
    code = (
        "import sys; from kexp import Store; s = Store(sys.argv[1]); "
        "s.update_experiment(sys.argv[2], score=4.0); "
        "s.create_experiment(**eval(sys.argv[3]))"
    )
    fields = experiment_fields(change_summary="Made elsewhere - +9%", score=1.09)
    subprocess.run(
        [sys.executable, "-c", code, str(store.root), aged[1].id, repr(fields)], check=True
    )
    scores = _scores(store)
    assert scores[aged[1].id] == 4.0 and 1.09 in scores.values() and len(scores) == 4


@pytest.mark.parametrize(
    "damage",
    [
        b"",
        b"garbage that is not marshal data",
        b"\xe3\x00\x00\x00",  # a truncated marshal object
    ],
)
def test_a_corrupt_cache_is_rebuilt_silently(
    store: Store, aged: list[KernelExperiment], damage: bytes
) -> None:
    _scores(store)
    (store.cache_dir / INDEX_FILE).write_bytes(damage)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert _scores(store) == _uncached(store)


def test_a_cache_from_another_version_is_rebuilt(
    store: Store, aged: list[KernelExperiment]
) -> None:
    import marshal

    _scores(store)
    index = store.cache_dir / INDEX_FILE
    header, entries = marshal.loads(index.read_bytes())
    # Same shape, but every score changed: a cache of another version must not be used.
    poisoned = {k: (*v[:4], (*v[4][:3], 99.0, *v[4][4:]), v[5]) for k, v in entries.items()}
    index.write_bytes(marshal.dumps((header.replace("kexp=", "kexp=0.0.0-other"), poisoned)))
    assert 99.0 not in _scores(store).values()


def test_a_file_that_became_invalid_is_skipped_with_a_warning(
    store: Store, aged: list[KernelExperiment]
) -> None:
    _scores(store)
    path = aged[0].path
    assert path is not None
    path.write_text(path.read_text().replace("status: done", "status: finished"))
    with pytest.warns(InvalidExperimentWarning, match=path.name):
        assert aged[0].id not in _scores(store)


def test_the_cache_folder_is_ignored_by_git(
    repo: Path, store: Store, aged: list[KernelExperiment]
) -> None:
    _scores(store)
    assert (store.cache_dir / INDEX_FILE).is_file()
    status = git(repo, "status", "--porcelain", "--untracked-files=all")
    assert ".kexp" not in status


def test_top_reads_only_the_files_it_returns(store: Store, aged: list[KernelExperiment]) -> None:
    _scores(store)
    best = store.top_experiments(1)
    assert [e.id for e in best] == [aged[2].id]
    assert best[0].detailed_description  # the one returned is complete
    brief = store.top_experiments(1, brief=True)
    assert brief[0].detailed_description == "" and brief[0].score == best[0].score


def test_read_commands_import_neither_git_nor_jsonschema(
    store: Store, aged: list[KernelExperiment]
) -> None:
    code = (
        "import sys\n"
        "from kexp.cli import main\n"
        "for args in (['top'], ['list', '--operator', 'cache'], ['show', sys.argv[1][:8]]):\n"
        "    try:\n"
        "        main(['--root', sys.argv[2], *args], standalone_mode=False)\n"
        "    except SystemExit:\n"
        "        pass\n"
        "print('MODULES', 'git' in sys.modules, 'jsonschema' in sys.modules)\n"
    )
    for _ in range(2):  # cold, then warm
        result = subprocess.run(
            [sys.executable, "-c", code, aged[0].id, str(store.root)],
            capture_output=True,
            text=True,
            check=True,
        )
        assert "MODULES False False" in result.stdout, result.stdout + result.stderr
