"""The cache never answers differently from the files: each attack that once made it.

Every test here reproduces a way the cache (``.kexp/cache-*.sqlite``) gave an
answer the files do not hold, and checks the answer against the files, read either by
kexp without its cache or, for the bit flips, by PyYAML directly.
"""

from __future__ import annotations

import contextlib
import os
import random
import shutil
import sqlite3
import subprocess
import sys
import tempfile
import textwrap
import time
import warnings
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from conftest import experiment_fields, past_racy_window

import kexp.storage.cache
import kexp.storage.cachefile
from kexp import ExperimentNotFoundError, KernelExperiment, KexpError, Store
from kexp.core.settings import DEFAULT_SETTINGS
from kexp.storage.cachefile import file_name
from kexp.storage.sources import WorkingTree

MakeExperiment = Callable[..., KernelExperiment]
OLD_NS = 1_600_000_000 * 10**9  # a modification time long past


def _uncached(store: Store) -> Store:
    plain = Store(store.root, source=WorkingTree(store.experiments_dir, cacheable=False))
    return plain


def _answers(store: Store) -> dict[str, Any]:
    """What a user sees: every listed experiment (id, path, score, outcome) in order,
    the top 5, and the children of each id."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        listed = store.list_experiments(brief=True)
        top = store.top_experiments(5, brief=True)
    rel = store.experiments_dir
    return {
        "list": [
            (e.id, str(Path(e.path or "").relative_to(rel)), e.score, e.outcome) for e in listed
        ],
        "top": [(e.id, e.score, e.outcome) for e in top],
    }


# --- a racily clean row written by another process ------------------------------------

#: Patches sqlite3.connect so that this process waits, right before its first
#: ``BEGIN IMMEDIATE`` (after it read the files it will write rows for), until the file
#: named by argv[2] exists; argv[3] is created when it waits.
_PAUSED_READER = textwrap.dedent(
    """
    import os, sqlite3, sys, time
    root, go, ready = sys.argv[1], sys.argv[2], sys.argv[3]
    real = sqlite3.connect
    state = {"armed": True}

    class Paused(sqlite3.Connection):
        def execute(self, sql, *args):
            if state["armed"] and sql.startswith("BEGIN IMMEDIATE"):
                state["armed"] = False
                open(ready, "w").close()
                deadline = time.monotonic() + 60
                while not os.path.exists(go) and time.monotonic() < deadline:
                    time.sleep(0.01)
            return super().execute(sql, *args)

    def connect(*args, **kwargs):
        kwargs.setdefault("factory", Paused)
        return real(*args, **kwargs)

    sqlite3.connect = connect
    from kexp import Store
    print(sorted((e.id, e.score) for e in Store(root).list_experiments(brief=True)))
    """
)


def test_a_racily_clean_row_read_earlier_by_another_process_is_not_taken(
    store: Store, make_experiment: MakeExperiment, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Another process reads a file just written (racily clean), then this process
    updates it and queries; the other process's row, with the old value, lands between
    this process's write of the cache and its read: the answer must be this process's
    own update, not the older value (a read going back in time)."""
    exp = make_experiment(score=1.0, change_summary="Shared - +0%")
    make_experiment(score=1.5, change_summary="Other - +50%")
    assert {e.id: e.score for e in store.list_experiments(brief=True)}[exp.id] == 1.0
    scratch = Path(tempfile.mkdtemp(prefix="kexp-race-"))
    go, ready = scratch / "go", scratch / "ready"
    other = subprocess.Popen(
        [sys.executable, "-c", _PAUSED_READER, str(store.root), str(go), str(ready)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        deadline = time.monotonic() + 60
        while not ready.exists():
            assert other.poll() is None, other.communicate()
            assert time.monotonic() < deadline, "the other process never read the files"
            time.sleep(0.01)
        # The other process has read the file (score 1.0) and waits to write its rows.
        store.update_experiment(exp.id, score=2.0)

        real_connect = sqlite3.connect
        armed = {"on": True}

        class LetTheOtherWrite(sqlite3.Connection):
            def execute(self, sql: str, *args: Any) -> sqlite3.Cursor:  # type: ignore[override]
                cursor = super().execute(sql, *args)
                if armed["on"] and sql == "COMMIT":
                    # This process wrote its rows: now the other one writes its own.
                    armed["on"] = False
                    go.touch()
                    other.wait(timeout=60)
                return cursor

        def connect(*args: Any, **kwargs: Any) -> sqlite3.Connection:
            kwargs.setdefault("factory", LetTheOtherWrite)
            return real_connect(*args, **kwargs)

        monkeypatch.setattr(sqlite3, "connect", connect)
        # A store of its own: its cache is opened (with this factory) for this query.
        scores = {e.id: e.score for e in Store(store.root).list_experiments(brief=True)}
        monkeypatch.undo()
        assert not armed["on"], "this process wrote no rows (the scenario did not happen)"
        assert scores[exp.id] == 2.0  # its own update, just made: never the older value
    finally:
        go.touch()
        other.wait(timeout=60)
        shutil.rmtree(scratch, ignore_errors=True)
    assert other.returncode == 0, other.stderr.read() if other.stderr else ""
    assert {e.id: e.score for e in store.list_experiments(brief=True)}[exp.id] == 2.0


# --- coarse timestamps: an edit that puts the old modification time back --------------


class _Coarse:
    """A stat result with whole-second timestamps, as on file systems that keep no
    more (ext4 with 128-byte inodes, FAT, many network file systems)."""

    def __init__(self, info: os.stat_result) -> None:
        self._info = info

    def __getattr__(self, name: str) -> Any:
        value = getattr(self._info, name)
        if name in ("st_mtime_ns", "st_ctime_ns", "st_atime_ns"):
            return value - value % 10**9
        return value


@contextlib.contextmanager
def _coarse_timestamps() -> Iterator[None]:
    real_stat, real_fstat = os.stat, os.fstat
    os.stat = lambda *a, **k: _Coarse(real_stat(*a, **k))  # type: ignore[assignment,misc,return-value]
    os.fstat = lambda *a, **k: _Coarse(real_fstat(*a, **k))  # type: ignore[assignment,misc,return-value]
    try:
        yield
    finally:
        os.stat, os.fstat = real_stat, real_fstat  # type: ignore[misc]


def _edit_in_place(path: Path, old: bytes, new: bytes) -> None:
    """Replace ``old`` by ``new`` (same length) in the file itself (same inode), then set
    the old modification time back, as ``tar -x``, ``rsync -t`` and ``cp -a`` do."""
    assert len(old) == len(new)
    data = path.read_bytes()
    at = data.index(old)
    with open(path, "r+b") as handle:
        handle.seek(at)
        handle.write(new)
    os.utime(path, ns=(OLD_NS, OLD_NS))


def _start_of_a_second() -> None:
    """Wait for a new second to begin, so the next steps share one (coarse) timestamp."""
    time.sleep(1 - time.time() % 1 + 0.02)


def _restored_mtime_scenario(store: Store, path: Path, exp_id: str) -> None:
    os.utime(path, ns=(OLD_NS, OLD_NS))
    past_racy_window()
    assert {e.id: e.score for e in store.list_experiments(brief=True)}[exp_id] == 1.25
    _start_of_a_second()
    _edit_in_place(path, b"score: 1.25\n", b"score: 1.26\n")
    assert {e.id: e.score for e in store.list_experiments(brief=True)}[exp_id] == 1.26
    # The same second: size, inode, modification time and (whole-second) change time
    # are all as they were when the cache read the file.
    _edit_in_place(path, b"score: 1.26\n", b"score: 1.27\n")
    assert {e.id: e.score for e in store.list_experiments(brief=True)}[exp_id] == 1.27
    past_racy_window()
    assert {e.id: e.score for e in store.list_experiments(brief=True)}[exp_id] == 1.27


def test_an_edit_restoring_the_mtime_is_seen_with_whole_second_timestamps(
    store: Store, make_experiment: MakeExperiment
) -> None:
    exp = make_experiment(score=1.25)
    assert exp.path is not None
    with _coarse_timestamps():
        _restored_mtime_scenario(store, exp.path, exp.id)


def _mount_coarse_file_system(where: Path) -> Path | None:
    """An ext4 file system with 128-byte inodes (whole-second timestamps, what mke2fs
    still picks for small volumes) mounted at ``where``, or None when this machine does
    not let the tests mount one."""
    if os.geteuid() != 0 or shutil.which("mkfs.ext4") is None:
        return None
    image = where.with_suffix(".img")
    where.mkdir()
    with open(image, "wb") as handle:
        handle.truncate(16 * 2**20)
    made = subprocess.run(
        ["mkfs.ext4", "-q", "-F", "-I", "128", str(image)], capture_output=True, check=False
    )
    if made.returncode != 0:
        return None
    mounted = subprocess.run(
        ["mount", "-o", "loop", str(image), str(where)], capture_output=True, check=False
    )
    return where if mounted.returncode == 0 else None


def test_an_edit_restoring_the_mtime_is_seen_on_ext4_with_128_byte_inodes(
    tmp_path: Path,
) -> None:
    mounted = _mount_coarse_file_system(tmp_path / "coarse")
    if mounted is None:
        pytest.skip("cannot mount a loop file system here (needs root and loop devices)")
    try:
        (mounted / "experiments").mkdir()
        store = Store(mounted)
        fields = experiment_fields(score=1.25, base_commit="9c1d2e3f4a5b6c7d")
        exp = store.create_experiment(**fields)
        assert exp.path is not None
        probe = mounted / "probe"
        probe.write_text("x")
        assert probe.stat().st_mtime_ns % 10**9 == 0  # whole seconds indeed
        _restored_mtime_scenario(store, exp.path, exp.id)
    finally:
        subprocess.run(["umount", str(mounted)], capture_output=True, check=False)


# --- two kexp builds of one version ---------------------------------------------------


def _build_of_kexp(where: Path, *, env_max_length: int | None = None) -> Path:
    """A copy of this kexp's package and schema in ``where`` (a second build), its
    schema changed to limit ``env`` to ``env_max_length`` characters if given."""
    from kexp.format.schema import schema_path

    package = Path(kexp.storage.cache.__file__).parent.parent  # the kexp under test
    shutil.copytree(package, where / "kexp", ignore=shutil.ignore_patterns("*.pyc", "_data"))
    (where / "schema").mkdir()
    shutil.copy(schema_path(), where / "schema" / "experiment.schema.json")
    if env_max_length is not None:
        schema = where / "schema" / "experiment.schema.json"
        text = schema.read_text(encoding="utf-8")
        old = '"description": "GPU model, driver, ROCm/CUDA and framework versions.",'
        assert old in text
        schema.write_text(text.replace(old, f'{old} "maxLength": {env_max_length},'))
        subprocess.run(
            [sys.executable, "-m", "kexp.format.schema"],
            env={**os.environ, "PYTHONPATH": str(where)},
            cwd=where,  # not this checkout: python -m puts the working folder first
            check=True,
            capture_output=True,
        )
    return where


def _listed_with(build: Path, root: Path) -> tuple[list[str], str]:
    code = (
        "import sys; from kexp import Store; "
        "print([e.id for e in Store(sys.argv[1]).list_experiments()])"
    )
    found = subprocess.run(
        [sys.executable, "-c", code, str(root)],
        env={**os.environ, "PYTHONPATH": str(build)},
        cwd=build,
        capture_output=True,
        text=True,
        check=True,
    )
    return eval(found.stdout), found.stderr


def test_two_builds_of_one_version_never_share_a_cache(
    store: Store, make_experiment: MakeExperiment, tmp_path: Path
) -> None:
    """A build whose schema refuses what another accepts (an editable install after a
    schema edit, or after ``git pull`` of kexp, both with the same version string)
    must not serve the other's verdicts from the cache."""
    exp = make_experiment(env="MI300X, ROCm 7.0.0")
    first = _build_of_kexp(tmp_path / "first")
    second = _build_of_kexp(tmp_path / "second", env_max_length=6)
    assert _listed_with(first, store.root)[0] == [exp.id]
    listed, stderr = _listed_with(second, store.root)
    assert listed == [] and "env" in stderr  # the second build's own verdict
    assert _listed_with(first, store.root)[0] == [exp.id]
    # A source change alone (a comment in a checking module) gets a cache of its own too.
    third = _build_of_kexp(tmp_path / "third")
    validate = third / "kexp" / "format" / "validate.py"
    validate.write_text(validate.read_text() + "\n# another build\n")
    names = set()
    for build in (first, third):
        found = subprocess.run(
            [
                sys.executable,
                "-c",
                "from kexp.storage.cachefile import file_name; from kexp.core.settings import "
                "DEFAULT_SETTINGS; print(file_name(DEFAULT_SETTINGS))",
            ],
            env={**os.environ, "PYTHONPATH": str(build)},
            cwd=build,
            capture_output=True,
            text=True,
            check=True,
        )
        names.add(found.stdout.strip())
    assert len(names) == 2


# --- a folder named like a Markdown file ----------------------------------------------


def test_a_folder_whose_name_ends_in_md_is_walked(
    store: Store, make_experiment: MakeExperiment
) -> None:
    exp = make_experiment(change_summary="Archived one - +1%")
    assert exp.path is not None
    archive = store.experiments_dir / "archive.md" / "old.md"
    archive.mkdir(parents=True)
    moved = archive / exp.path.name
    exp.path.rename(moved)
    expected = _answers(_uncached(store))
    assert [item[0] for item in expected["list"]] == [exp.id]
    assert _answers(store) == expected  # the cache is built
    assert _answers(store) == expected  # and used
    assert store.get_experiment(exp.id[:12]).path == moved
    past_racy_window()
    assert _answers(store) == expected


def test_folders_replaced_under_a_warm_cache_answer_as_their_files(
    store: Store, make_experiment: MakeExperiment, tmp_path: Path
) -> None:
    """Folders and files are stat-ed by their paths from experiments/: a cached folder
    replaced by a link to another folder (not walked) or by a file, and the year folder
    moved away and back with a file edited meanwhile, answer as the files do."""
    made: list[Any] = []
    while len(made) < 3:  # three folders: an id's fan-out folder is random (1/256 alike)
        n = len(made) + 1
        exp = make_experiment(change_summary=f"Step {n} - +{n}%", score=1 + n / 100)
        if exp.path is not None and exp.path.parent in {m.path.parent for m in made}:
            store.delete_experiment(exp.id)
        else:
            made.append(exp)
    paths = [exp.path for exp in made]
    assert all(path is not None for path in paths)
    assert len({path.parent for path in paths if path is not None}) == 3
    assert _answers(store) == _answers(_uncached(store))
    past_racy_window()
    assert _answers(store) == _answers(_uncached(store))  # the cache warm
    linked, filed, _ = (path.parent for path in paths if path is not None)
    elsewhere = tmp_path / "elsewhere"
    shutil.copytree(linked, elsewhere)
    shutil.rmtree(linked)
    linked.symlink_to(elsewhere, target_is_directory=True)
    shutil.rmtree(filed)
    filed.write_text("not a folder\n")
    year = store.experiments_dir / paths[2].relative_to(store.experiments_dir).parts[0]
    year.rename(tmp_path / "away")
    edited = tmp_path / "away" / paths[2].relative_to(year)
    edited.write_text(edited.read_text().replace("score: 1.03", "score: 1.3"))
    (tmp_path / "away").rename(year)
    expected = _answers(_uncached(store))
    assert [item[3] for item in expected["list"]] == ["improvement"]
    assert [item[2] for item in expected["list"]] == [1.3]
    assert _answers(store) == expected
    past_racy_window()
    assert _answers(store) == expected


# --- duplicate ids --------------------------------------------------------------------


@pytest.mark.filterwarnings("ignore::kexp.core.errors.DuplicateIdWarning")  # twins made on purpose
@pytest.mark.parametrize("copy_into", ["the same folder", "an earlier folder", "a later folder"])
def test_duplicate_ids_give_the_same_answers_cached_and_uncached(
    store: Store, make_experiment: MakeExperiment, copy_into: str
) -> None:
    """After a merge two files can hold one id (with different scores): which one
    counts for an experiment that combines it, and the order they are listed in, must
    not depend on the cache."""
    twin = make_experiment(score=1.2, change_summary="Twin - +20%")
    assert twin.path is not None
    folder = {
        "the same folder": twin.path.parent,
        "an earlier folder": store.experiments_dir / "2001" / "01",
        "a later folder": store.experiments_dir / "2099" / "12",
    }[copy_into]
    folder.mkdir(parents=True, exist_ok=True)
    copy = folder / f"{twin.id}-twin-copy.md"
    copy.write_text(twin.path.read_text().replace("score: 1.2\n", "score: 0.5\n"))
    combined = make_experiment(score=0.9, change_summary="Combined - -10%", combines=[])
    assert combined.path is not None
    text = combined.path.read_text()
    combined.path.write_text(text.replace("status: done", f"combines: [{twin.id}]\nstatus: done"))
    combined_too = make_experiment(score=1.0, change_summary="Also combined - 0%")
    assert combined_too.path is not None
    text = combined_too.path.read_text()
    combined_too.path.write_text(
        text.replace("status: done", f"combines: [{twin.id}]\nstatus: done")
    )
    expected = _answers(_uncached(store))
    for _ in range(2):  # built, then used
        assert _answers(store) == expected
    past_racy_window()
    for _ in range(2):
        assert _answers(store) == expected
    plain = _uncached(store)
    for exp_id in (combined.id, combined_too.id):
        assert store.get_experiment(exp_id).outcome == plain.get_experiment(exp_id).outcome
        listed = {e.id: e.outcome for e in store.list_experiments(brief=True)}
        assert listed[exp_id] == store.get_experiment(exp_id).outcome
    with pytest.raises(KexpError, match="more than one file"):
        store.get_experiment(twin.id)


# --- no cache folder possible ---------------------------------------------------------


@contextlib.contextmanager
def _not_writable(paths: list[Path]) -> Iterator[None]:
    """``paths`` made unwritable for this process: by their mode for a user, by the
    immutable attribute for root (whom no mode refuses); skips the test where neither
    works."""
    if os.geteuid() != 0:
        modes = {path: path.stat().st_mode for path in paths}
        for path in paths:
            path.chmod(modes[path] & ~0o222)
        try:
            yield
        finally:
            for path, mode in modes.items():
                path.chmod(mode)
        return
    chattr = shutil.which("chattr")
    if chattr is None:
        pytest.skip("running as root without chattr: cannot make a folder unwritable")
    done: list[Path] = []
    try:
        for path in paths:
            if subprocess.run([chattr, "+i", str(path)], capture_output=True).returncode:
                pytest.skip("running as root where chattr +i is refused")
            done.append(path)
        yield
    finally:
        for path in done:
            subprocess.run([chattr, "-i", str(path)], capture_output=True)


@pytest.mark.parametrize("cache_folder", ["cannot be made", "is another user's"])
def test_a_store_one_may_read_but_not_write_answers_from_memory(
    store: Store, make_experiment: MakeExperiment, cache_folder: str
) -> None:
    """A store readable but not writable (as another user): ``kexp list``, ``top`` and
    ``show`` answer from the files, with the cache in memory: no "internal error"."""
    made = [make_experiment(score=1 + n / 10, change_summary=f"T {n} - +{n}%") for n in range(3)]
    cache = store.root / ".kexp"
    if cache_folder == "is another user's":
        store.list_experiments()  # this user's .kexp/, with its cache
        locked = [store.root, cache, *cache.iterdir()]
    else:
        shutil.rmtree(cache, ignore_errors=True)
        locked = [store.root]
    with _not_writable(locked):
        for args, wanted in (
            (["list"], made[0].id[:8]),
            (["top"], made[2].id[:8]),
            (["show", made[1].id[:12]], made[1].id),
            (["list", "--json"], made[1].id),
        ):
            for _ in range(2):
                result = subprocess.run(
                    [sys.executable, "-m", "kexp", "--root", str(store.root), *args],
                    capture_output=True,
                    text=True,
                    timeout=120,
                    cwd=store.root,
                )
                assert result.returncode == 0, result.stderr
                assert "internal error" not in result.stderr
                assert wanted in result.stdout
        assert not (store.root / ".kexp").exists() or cache_folder != "cannot be made"


# --- damage -------------------------------------------------------------------------


def _flip_bits_store(store: Store, make_experiment: MakeExperiment) -> None:
    parent = make_experiment(score=1.05, change_summary="Parent - +5%")
    child = make_experiment(score=1.12, change_summary="Child - +12%", pid=parent.id)
    make_experiment(score=1.02, change_summary="Grandchild - +2%", pid=child.id)
    make_experiment(score=1.09, change_summary="Combined - +9%", combines=[parent.id, child.id])
    make_experiment(score=0.7, change_summary="Slower - -30%", operator_sig="other.cu: k")
    make_experiment(
        score=0.0,
        change_summary="Crash - illegal address",
        is_buggy=True,
        status="failed",
        error_message="HIP error: illegal memory access",
    )
    make_experiment(score=1.3, change_summary="Planned - not run", status="new")
    for n in range(6):
        make_experiment(
            score=1.0 + n / 50,
            change_summary=f"Try {n} - +{2 * n}%",
            dtype_sig="fp8" if n % 2 else "bf16",
        )
    broken = store.experiments_dir / "2020" / "01" / f"{'ab' * 8}-broken.md"
    broken.parent.mkdir(parents=True)
    broken.write_text("---\nid: not closed\n")


def _damage_answers(store: Store) -> dict[str, Any]:
    """The answers of :func:`_answers` and more, with the warnings each query gave (the
    broken file is warned about by every query that reads it: cached or not, the same)."""
    answers = _answers(store)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        store.list_experiments(brief=True)
        answers["warnings"] = sorted(str(w.message) for w in caught)
        del caught[:]
        answers["top-filtered"] = [e.id for e in store.top_experiments(3, dtype="fp8", brief=True)]
        ids = [item[0] for item in answers["list"]]
        for exp_id in ids[:4]:
            answers[f"children {exp_id}"] = [e.id for e in store.children(exp_id)]
            answers[f"get {exp_id}"] = store.get_experiment(exp_id[:12]).score
        try:
            store.get_experiment("0123456789abcdef")
        except ExperimentNotFoundError:
            answers["missing"] = "not found"
        answers["warnings of the other queries"] = [
            (w.category.__name__, str(w.message)) for w in caught
        ]
    return answers


def test_bit_flips_in_the_cache_never_change_an_answer(
    store: Store, make_experiment: MakeExperiment
) -> None:
    """The cache defends against damage: one bit flipped anywhere in its file, then
    every answer is still the files' (never a wrong answer, never an error)."""
    _flip_bits_store(store, make_experiment)
    past_racy_window()
    expected = _damage_answers(_uncached(store))
    assert _damage_answers(store) == expected
    index = store.cache_dir / file_name(DEFAULT_SETTINGS)
    pristine = index.read_bytes()
    rng = random.Random(20261201)
    flips = int(os.environ.get("KEXP_BIT_FLIPS", "150"))
    for trial in range(flips):
        damaged = bytearray(pristine)
        at = rng.randrange(len(damaged) * 8)
        damaged[at // 8] ^= 1 << (at % 8)
        for left in store.cache_dir.glob(index.name + "-*"):
            left.unlink()
        index.unlink(missing_ok=True)
        index.write_bytes(bytes(damaged))
        try:
            assert _damage_answers(store) == expected, f"flip {trial}: bit {at}"
        except AssertionError:
            raise
        except Exception as exc:  # any error escaping is a failure too
            raise AssertionError(f"flip {trial}: bit {at}: {exc!r}") from exc


def test_the_fingerprint_names_the_sources_and_the_schema() -> None:
    first = kexp.storage.cachefile.code_fingerprint()
    assert first == kexp.storage.cachefile.code_fingerprint() and len(first) == 16
    assert "sources=" + first in kexp.storage.cachefile.header(DEFAULT_SETTINGS)


def test_a_delete_sees_every_file_added_or_replaced_since_the_last_query(
    store: Store, make_experiment: MakeExperiment
) -> None:
    """The delete's check of who names an experiment refreshes the cache lightly (its
    folders, not every file): a child written since the last query, by kexp or by hand,
    or a file replaced to name it, refuses the delete at once; an edit in place by
    another program counts once a query has read it."""
    parent = make_experiment(change_summary="Parent - +1%")
    other = make_experiment(change_summary="Other - +1%")
    past_racy_window()
    store.list_experiments()
    assert other.path is not None
    # A child written by hand into a new month folder.
    child = store.experiments_dir / "2031" / "05" / f"{'c' * 16}-child.md"
    child.parent.mkdir(parents=True)
    child.write_text(
        other.path.read_text().replace(other.id, "c" * 16).replace("pid: ''", f"pid: {parent.id}")
    )
    with pytest.raises(KexpError, match="parent of"):
        store.delete_experiment(parent.id)
    child.unlink()
    # A file replaced by a version that combines the parent (how editors save).
    replacement = other.path.with_name(f".{other.path.name}.new")
    replacement.write_text(
        other.path.read_text().replace("status: done", f"combines: [{parent.id}]\nstatus: done")
    )
    replacement.replace(other.path)
    with pytest.raises(KexpError, match="combined by"):
        store.delete_experiment(parent.id)
    # An edit in place (same inode): seen once a query has run.
    text = other.path.read_text().replace(f"combines: [{parent.id}]\n", "")
    with open(other.path, "r+") as handle:
        handle.write(text)
        handle.truncate()
    past_racy_window()
    store.list_experiments()
    store.delete_experiment(parent.id)
    assert not (parent.path and parent.path.exists())


def test_reviews_and_changed_validation_through_the_cache_equal_reading_every_file(
    repo: Path, store: Store, make_experiment: MakeExperiment
) -> None:
    """``kexp validate --changed`` and ``kexp review`` read the store at the head through
    the query cache (also at a revision, when the working tree holds exactly its files):
    the same problems and the same review as reading every file, with store-wide
    problems (a duplicate id, a dangling pid, an invalid file) before and after."""
    from conftest import git

    from kexp.review.build import check_changes, render_markdown, review

    parent = make_experiment(score=1.1, change_summary="Parent - +10%")
    make_experiment(score=1.2, change_summary="Child - +20%", pid=parent.id)
    dangling = make_experiment(score=0.9, change_summary="Orphan - -10%")
    assert dangling.path is not None
    dangling.path.write_text(dangling.path.read_text().replace("pid: ''", f"pid: {'e' * 16}"))
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", "base")
    git(repo, "checkout", "-q", "-b", "branch")
    make_experiment(score=1.3, change_summary="New - +30%", pid=parent.id)
    twin = store.experiments_dir / "2001" / "01" / parent.path.name if parent.path else None
    assert twin is not None and parent.path is not None
    twin.parent.mkdir(parents=True)
    twin.write_text(parent.path.read_text())
    broken = store.experiments_dir / "2001" / "01" / f"{'b' * 16}-broken.md"
    broken.write_text("---\nid: broken\n")
    plain = _uncached(store)

    def same() -> None:
        assert check_changes(store, "main").problems == check_changes(plain, "main").problems
        assert render_markdown(review(store, "main")) == render_markdown(review(plain, "main"))

    same()
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", "branch")
    same()
    for head in ("HEAD", "main"):
        cached, read = review(store, "main", head), review(plain, "main", head)
        assert render_markdown(cached) == render_markdown(read)
    past_racy_window()
    same()
