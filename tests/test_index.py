"""The cache (.kexp/cache-*.sqlite) is never wrong: every way a file can change is seen."""

from __future__ import annotations

import itertools
import os
import re
import sqlite3
import subprocess
import sys
import threading
import time
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from conftest import experiment_fields, git, past_racy_window

import kexp.storage.cache as cache_module
import kexp.storage.listing as listing_module
from kexp import ExperimentNotFoundError, InvalidExperimentWarning, KernelExperiment, Store
from kexp.core.model import FRONT_MATTER_FIELDS
from kexp.core.settings import DEFAULT_SETTINGS
from kexp.storage.cachefile import file_name, pack_group
from kexp.storage.sources import WorkingTree

INDEX_FILE = file_name(DEFAULT_SETTINGS)
OLD = 1_600_000_000  # a modification time far in the past (seconds)


def _age(path: Path) -> None:
    """Make ``path`` look old enough to be cached (not racily clean)."""
    os.utime(path, ns=(OLD * 10**9, OLD * 10**9))


def _scores(store: Store) -> dict[str, float]:
    return {e.id: e.score for e in store.list_experiments(brief=True)}


def _uncached(store: Store) -> dict[str, float]:
    plain = Store(store.root, source=WorkingTree(store.experiments_dir, cacheable=False))
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
    past_racy_window()
    assert _scores(store) == _uncached(store)
    index = store.cache_dir / INDEX_FILE
    assert index.is_file()
    before = index.stat().st_mtime_ns
    assert _scores(store) == _uncached(store)
    assert index.stat().st_mtime_ns == before  # nothing changed: not rewritten


def test_a_listings_rows_asked_again_are_the_same_and_the_callers_own(
    store: Store, aged: list[KernelExperiment]
) -> None:
    """A listing keeps the rows it found (``review`` asks for them twice): asked again,
    they equal a read without the cache, and each answer is a list of its caller's
    (what one caller changes in it, the next answer does not hold)."""
    listing = store.found().listing
    assert listing is not None
    rows, invalid = listing.rows()
    truth = sorted(_uncached(store).items())
    assert sorted((row.id, row.score) for row in rows) == truth
    rows.clear()
    invalid.append(("made up", None))
    again, invalid_again = listing.rows()
    assert sorted((row.id, row.score) for row in again) == truth
    assert ("made up", None) not in invalid_again
    assert [path for path, row in listing.records()] == [row.path for row in again]


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
        b"garbage that is not an SQLite database" * 100,
        b"SQLite format 3\x00\x10\x00",  # a truncated SQLite file
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


def _unsealed(name: bytes, record: bytes) -> Any:
    import marshal
    import zlib

    assert zlib.crc32(record[4:], zlib.crc32(name)) == int.from_bytes(record[:4], "little")
    return marshal.loads(record[4:])


def _sealed(name: bytes, value: Any) -> bytes:
    import marshal
    import zlib

    payload = marshal.dumps(value)
    return zlib.crc32(payload, zlib.crc32(name)).to_bytes(4, "little") + payload


def _rewrite(index: Path, table: str, change: Callable[[Any], Any]) -> None:
    """Rewrite every folder's record in ``table`` (``folders``: its listing; ``packs``:
    the records of its files; both kept in groups of folders) with ``change`` and a
    matching checksum, as a program that knows the layout would (another kexp build,
    say)."""
    with sqlite3.connect(index) as db:
        for group, record in db.execute(f"SELECT grp, record FROM {table}").fetchall():
            name = b"%s %d" % (table.encode(), group)
            values = {f: change(p) for f, p in _unsealed(name, record).items()}
            db.execute(
                f"UPDATE {table} SET record = ? WHERE grp = ?", (_sealed(name, values), group)
            )
    db.close()


def _poison_scores(index: Path, header: str | None = None) -> None:
    """Set every cached score to 99.0 (checksums kept right), and the header if given."""

    def poison(pack: Any) -> Any:
        names, keys, records = pack
        return (
            names,
            keys,
            [
                (error, None if values is None else (*values[:3], 99.0, *values[4:]))
                for error, values in records
            ],
        )

    _rewrite(index, "packs", poison)
    if header is not None:
        with sqlite3.connect(index) as db:
            db.execute("UPDATE meta SET value = ? WHERE key = 'header'", (header,))
        db.close()


def test_a_cache_from_another_version_is_rebuilt(
    store: Store, aged: list[KernelExperiment]
) -> None:
    _scores(store)
    index = store.cache_dir / INDEX_FILE
    with sqlite3.connect(index) as db:
        (header,) = db.execute("SELECT value FROM meta WHERE key = 'header'").fetchone()
    db.close()
    # Same shape, but every score changed: a cache of another version must not be used.
    _poison_scores(index, header.replace("kexp=", "kexp=0.0.0-other"))
    assert 99.0 not in _scores(store).values()
    assert _scores(store) == _uncached(store)


def test_a_row_that_does_not_match_its_file_makes_the_cache_rebuilt(
    store: Store, aged: list[KernelExperiment]
) -> None:
    """A cache changed behind kexp's back (records of other versions of the files, a
    folder's records missing) is found out by the signature of each file, or taken as
    missing: the files are read."""
    _scores(store)
    index = store.cache_dir / INDEX_FILE

    def elsewhere(listing: Any) -> Any:
        # Every file claims to have been read at another signature.
        listed_at, subfolders, names, signatures, keys = listing
        return listed_at, subfolders, names, bytes(len(signatures)), keys

    _poison_scores(index)
    _rewrite(index, "folders", elsewhere)
    assert _scores(store) == _uncached(store)
    assert [e.id for e in store.top_experiments(1)] == [aged[2].id]
    _poison_scores(index)
    with sqlite3.connect(index) as db:
        db.execute("DELETE FROM packs")
    db.close()
    assert [e.id for e in store.top_experiments(1)] == [aged[2].id]
    assert _scores(store) == _uncached(store)


def test_a_pack_saved_while_another_process_writes_its_group_keeps_that_ones_pack(
    store: Store, aged: list[KernelExperiment], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The folders' packs are kept in groups, a record each: a process saving a folder's
    pack while another process, holding the write lock, writes another folder's pack of
    the same group keeps both (the group is read once the lock is taken, not before)."""
    _scores(store)  # the cache made
    # The save waits for the lock however slow this machine is (not 5 s, then memory).
    monkeypatch.setattr(cache_module, "BUSY_TIMEOUT_S", 120.0)
    cache = store.open_cache()
    try:
        packs = cache.packs(list(cache.folders()))
    finally:
        cache.close()
    folder, pack = next((folder, pack) for folder, pack in packs.items() if pack[0])
    group = pack_group(folder)
    other = next(
        f"elsewhere/{n}/" for n in itertools.count() if pack_group(f"elsewhere/{n}/") == group
    )
    failed: list[BaseException] = []

    def save() -> None:
        cache = store.open_cache()
        try:
            cache.save_folders({}, {folder: pack}, [])
        except BaseException as exc:  # pragma: no cover - reported below
            failed.append(exc)
        finally:
            cache.close()

    holder = sqlite3.connect(store.cache_dir / INDEX_FILE, isolation_level=None)
    holder.execute("BEGIN IMMEDIATE")
    saving = threading.Thread(target=save)
    saving.start()
    time.sleep(0.5)  # the save waits for the lock (or has read the group already)
    (record,) = holder.execute("SELECT record FROM packs WHERE grp = ?", (group,)).fetchone()
    name = b"packs %d" % group
    members = _unsealed(name, record)
    members[other] = pack
    holder.execute("UPDATE packs SET record = ? WHERE grp = ?", (_sealed(name, members), group))
    holder.execute("COMMIT")
    holder.close()
    saving.join()
    assert failed == []
    cache = store.open_cache()
    try:
        assert set(cache.packs([folder, other])) == {folder, other}
    finally:
        cache.close()


def test_a_doc_posted_while_another_process_writes_its_postings_group_keeps_those_postings(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The near-duplicate index's postings are kept in groups by shingle, a record
    each: a process posting a doc (the docs another command added, at its first
    near-duplicate question) while another process, holding the write lock, posts
    another doc in the same group keeps both postings (the group is read once the lock
    is taken, not before)."""
    from array import array

    from kexp.storage import postings

    monkeypatch.setattr(cache_module, "BUSY_TIMEOUT_S", 120.0)
    settings = DEFAULT_SETTINGS

    def doc(n: int, shingles: list[int]) -> tuple[bytes, None, None, bytes, None]:
        return (n.to_bytes(20, "big"), None, None, array("I", sorted(shingles)).tobytes(), None)

    def ask(cache: cache_module.Cache) -> list[tuple[bytes, bytes]]:
        cache.post_pending()
        return cache.near_candidates(lambda order: [1 << 20], 1, 1)

    first = [doc(n, [n << 20]) for n in range(1, 11)]
    cache = cache_module.Cache(tmp_path, settings)
    try:
        cache.add_docs(first)
        assert len(ask(cache)) == 10  # its own docs, not posted: each is a candidate
    finally:
        cache.close()
    cache = cache_module.Cache(tmp_path, settings)
    try:
        assert [key for key, _ in ask(cache)] == [first[0][0]]  # posted: the order decided
        cache.add_docs([doc(11, [0xABCD_0001])])
    finally:
        cache.close()
    shingle = 0xABCD_0001  # doc 11's one shingle; another posted beside it, meanwhile
    group = postings.group_of(shingle)
    failed: list[BaseException] = []

    def post() -> None:
        cache = cache_module.Cache(tmp_path, settings)
        try:
            ask(cache)  # posts doc 11, once the lock is free
        except BaseException as exc:  # pragma: no cover - reported below
            failed.append(exc)
        finally:
            cache.close()

    holder = sqlite3.connect(tmp_path / INDEX_FILE, isolation_level=None)
    holder.execute("BEGIN IMMEDIATE")
    posting = threading.Thread(target=post)
    posting.start()
    time.sleep(0.5)  # the post waits for the lock (or has read the group already)
    (meanwhile,) = postings.postings_of(99, [shingle + 1])
    name = b"postings %d" % group
    holder.execute(
        "INSERT INTO postings VALUES (?, ?)",
        (group, _sealed(name, array("Q", [meanwhile]).tobytes())),
    )
    holder.execute("COMMIT")
    posting.join()
    (record,) = holder.execute("SELECT record FROM postings WHERE grp = ?", (group,)).fetchone()
    holder.close()
    assert failed == []
    kept = list(array("Q", _unsealed(name, record)))
    assert kept == [*postings.postings_of(11, [shingle]), meanwhile]


def test_a_write_within_a_transient_transaction_is_part_of_it(
    store: Store, aged: list[KernelExperiment]
) -> None:
    """A write made while the cache is within a transient transaction (a search's FTS
    table holding other docs for one question: a repaired pack kept meanwhile, say) is
    part of it: it neither ends it nor undoes what it holds, and is undone with it."""
    _scores(store)
    cache = store.open_cache()
    try:
        packs = cache.packs(list(cache.folders()))
        with cache.transient():
            cache.save_objects({"held": 1})
            cache.save_folders({}, {"else/": next(iter(packs.values()))}, (), at_once=True)
            cache.save_objects({"held too": 2})
            assert cache.objects(["held", "held too"]) == {"held": 1, "held too": 2}
            assert "else/" in cache.packs(["else/"])
        assert cache.objects(["held", "held too"]) == {}
        assert cache.packs(["else/"]) == {}
    finally:
        cache.close()


@pytest.mark.parametrize("damage", ["missing", "another listing's"])
def test_a_folder_whose_pack_does_not_describe_it_is_read_once_and_its_pack_kept(
    store: Store, aged: list[KernelExperiment], monkeypatch: pytest.MonkeyPatch, damage: str
) -> None:
    """A folder whose pack is missing, or was written by another process for another
    listing of it, has its files read by the next query, which keeps the pack made of
    them: the query after it reads no file (it read them all, every time)."""
    past_racy_window()  # the files settled: a query reads only what it must
    _scores(store)
    expected = _uncached(store)
    index = store.cache_dir / INDEX_FILE
    if damage == "missing":
        with sqlite3.connect(index) as db:
            db.execute("DELETE FROM packs")
        db.close()
    else:
        _rewrite(index, "packs", lambda pack: (pack[0], bytes(len(pack[1])), pack[2]))
    listing_module.forget_made_rows()  # the next query is another process's
    read: list[str] = []
    reading = listing_module.read_file_and_stat

    def counted(path: str, settings: Any) -> Any:
        read.append(path)
        return reading(path, settings)

    monkeypatch.setattr(listing_module, "read_file_and_stat", counted)
    assert _scores(store) == expected
    assert sorted(Path(p).name for p in read) == sorted(e.path.name for e in aged if e.path)
    read.clear()
    assert _scores(store) == expected
    assert [e.id for e in store.top_experiments(1)] == [aged[2].id]
    assert read == []


def test_a_second_read_in_one_process_makes_the_rows_of_changed_folders_alone(
    store: Store, make_experiment: Callable[..., KernelExperiment], monkeypatch: pytest.MonkeyPatch
) -> None:
    """A process that reads the store twice (the read before a write and its
    tried-before check, an MCP server's questions) makes the rows of an unchanged folder
    once: the second read makes those of the folder whose file was edited in place, and
    sees the edit."""
    first = make_experiment(score=1.25, operator_sig="k1")
    make_experiment(score=1.5, operator_sig="k2")
    past_racy_window()
    _scores(store)
    made: list[str] = []
    making = listing_module.folder_rows

    def counted(base: str, folder: str, *args: Any) -> Any:
        made.append(folder)
        return making(base, folder, *args)

    monkeypatch.setattr(listing_module, "folder_rows", counted)
    assert _scores(store) == _uncached(store)
    assert made == []
    assert first.path is not None
    first.path.write_text(first.path.read_text().replace("score: 1.25", "score: 1.75"))
    assert _scores(store) == _uncached(store) and _scores(store)[first.id] == 1.75
    assert set(made) == {str(first.path.parent.relative_to(store.experiments_dir)) + os.sep}


def test_top_and_filters_agree_with_a_store_read_without_cache(
    store: Store, make_experiment: Callable[..., KernelExperiment]
) -> None:
    for n in range(12):
        exp = make_experiment(
            score=1.0 + (n % 5) / 10,  # ties
            operator_sig=f"ÄOp{n % 3}(x)",  # non-ASCII: lowered by Python, not SQLite
            is_buggy=n % 4 == 0,
            **({"error_message": "boom"} if n % 4 == 0 else {}),
        )
        assert exp.path is not None
        _age(exp.path)
    plain = Store(store.root, source=WorkingTree(store.experiments_dir, cacheable=False))
    for filters in (
        {},
        {"operator": "äop1"},
        {"operator": "op2", "min_score": 1.2},
        {"include_buggy": True},
        {"is_buggy": True},
        {"max_score": 1.1, "status": "done"},
        {"outcome": ["improvement", "marginal"]},
    ):
        for limit in (0, 1, 3, 20):
            cached = [(e.id, e.score) for e in store.top_experiments(limit, **filters)]
            assert cached == [(e.id, e.score) for e in plain.top_experiments(limit, **filters)]
        wanted = {k: v for k, v in filters.items() if k != "include_buggy"}
        assert [e.id for e in store.list_experiments(**wanted)] == [
            e.id for e in plain.list_experiments(**wanted)
        ]


def test_cached_front_matter_is_the_files_own(
    store: Store, make_experiment: Callable[..., KernelExperiment]
) -> None:
    """Rows hold every front-matter field as the file has it: lists, a missing author
    or tags (their defaults), results, combines and fields kexp does not know."""
    first = make_experiment(tags=["cache", "unroll"], author="agent-1")
    second = make_experiment(
        combines=[first.id],
        results=[{"config": "M=1", "baseline": 2.0, "candidate": 1.0, "speedup": 2.0}],
        score=2.0,
    )
    for exp in (first, second):
        assert exp.path is not None
        text = exp.path.read_text(encoding="utf-8")
        text = re.sub(r"\n(author|tags): [^\n]*", "", text)  # left out: defaults
        text = text.replace("\nstatus:", "\nnotes: [kept, 'as is']\nstatus:", 1)
        exp.path.write_text(text, encoding="utf-8")
        _age(exp.path)
    plain = Store(store.root, source=WorkingTree(store.experiments_dir, cacheable=False))

    def front_matter(found: list[KernelExperiment]) -> dict[str, Any]:
        return {
            e.id: ({f: getattr(e, f) for f in FRONT_MATTER_FIELDS}, e.extra_fields) for e in found
        }

    expected = front_matter(plain.list_experiments())
    assert expected[first.id][1] == {"notes": ["kept", "as is"]}
    assert expected[first.id][0]["tags"] == [] and expected[first.id][0]["author"] == ""
    assert front_matter(store.list_experiments(brief=True)) == expected  # builds the cache
    assert front_matter(store.list_experiments(brief=True)) == expected  # from the cache


def test_two_processes_build_the_same_cache_as_one(
    store: Store, make_experiment: Callable[..., KernelExperiment], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Above a size the folders are stat'ed, and the files read, by this process and a
    forked child: the answer is the same as from one process."""
    import kexp.storage.parallel

    for n in range(8):
        exp = make_experiment(score=1.0 + n / 10)
        assert exp.path is not None
        _age(exp.path)
    (store.experiments_dir / "2020" / "01").mkdir(parents=True)
    assert exp.path is not None
    notes = exp.path.with_name("NOTES.md")  # a Markdown file that is no experiment
    notes.write_text("# notes\n", encoding="utf-8")
    _age(notes)
    monkeypatch.setattr(kexp.storage.parallel, "PARALLEL_MIN_FILES", 1)
    monkeypatch.setattr(kexp.storage.parallel, "_forkable", lambda: True)
    past_racy_window()
    parallel = _scores(store)
    index = store.cache_dir / INDEX_FILE
    before = index.stat().st_mtime_ns
    assert _scores(store) == parallel
    assert index.stat().st_mtime_ns == before  # every signature kept as read: not rewritten
    index.unlink()
    monkeypatch.setenv("KEXP_NO_FORK", "1")
    monkeypatch.setattr(kexp.storage.parallel, "_forkable", lambda: False)
    assert parallel == _scores(store) == _uncached(store)


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
        "from kexp.cli.main import main\n"
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


def _age_tree(store: Store) -> None:
    """Age every experiment file and folder, so that folder listings are cached too."""
    for folder, _, names in os.walk(store.experiments_dir):
        for name in names:
            _age(Path(folder, name))
        _age(Path(folder))
    past_racy_window()


@pytest.mark.filterwarnings("ignore::kexp.core.errors.DuplicateIdWarning")  # twins made on purpose
def test_folders_listed_from_the_cache_still_see_new_renamed_and_removed_files(
    store: Store, aged: list[KernelExperiment]
) -> None:
    """An unchanged folder is not listed again; adding, renaming or removing a file
    changes the folder's own signature, which sends it back to a listing."""
    _age_tree(store)
    assert _scores(store) == _uncached(store)
    with sqlite3.connect(store.cache_dir / INDEX_FILE) as db:
        stamps = [
            listing[0]
            for group, record in db.execute("SELECT grp, record FROM folders")
            for listing in _unsealed(b"folders %d" % group, record).values()
        ]
    db.close()
    assert stamps and b"\xff" * 32 not in stamps  # every listing is cached
    first, second = aged[0].path, aged[1].path
    assert first is not None and second is not None
    copy = first.with_name(first.name.replace(aged[0].id, "0" * 16))
    copy.write_text(first.read_text().replace(aged[0].id, "0" * 16))
    assert "0" * 16 in _scores(store)
    assert store.resolve_id("0000") == "0" * 16
    second.rename(second.with_name(second.name.replace(".md", "-moved.md")))
    assert _scores(store) == _uncached(store)
    moved = store.get_experiment(aged[1].id).path
    assert moved is not None and moved.name.endswith("-moved.md")
    copy.unlink()
    assert "0" * 16 not in _scores(store)
    with pytest.raises(Exception, match="no experiment"):
        store.resolve_id("0000")
    # A file added to a new sub-folder of an unchanged folder.
    deeper = store.experiments_dir / "2001" / "01"
    deeper.mkdir(parents=True)
    (deeper / first.name).write_text(first.read_text())
    (store.experiments_dir / "2001").touch()
    found = [p for p in store.list_experiments(brief=True) if p.id == aged[0].id]
    assert len(found) == 2


def test_an_edit_in_place_in_an_unchanged_folder_is_seen(
    store: Store, aged: list[KernelExperiment]
) -> None:
    _age_tree(store)
    _scores(store)
    path = aged[2].path
    assert path is not None
    path.write_text(path.read_text().replace("score: 1.02\n", "score: 3.02\n"))
    _age(path)  # same size and modification time; the folder's signature unchanged
    _age(path.parent)
    assert _scores(store)[aged[2].id] == 3.02
    assert [e.id for e in store.top_experiments(1)] == [aged[2].id]


def test_the_answer_never_depends_on_the_forked_child(monkeypatch: pytest.MonkeyPatch) -> None:
    """A child that dies (or sends garbage) has its half done again by the parent."""
    import kexp.storage.parallel

    monkeypatch.setattr(kexp.storage.parallel, "_forkable", lambda: True)
    parent = os.getpid()

    def doubled(items: list[int]) -> list[int]:
        return [item * 2 for item in items]

    def dying(items: list[int]) -> list[int]:
        if os.getpid() != parent:
            os._exit(3)
        return doubled(items)

    expected = [item * 2 for item in range(10)]
    discarded: list[int] = []
    assert (
        kexp.storage.parallel.in_two_processes(
            doubled, list(range(10)), 10**6, None, discarded.append
        )
        == expected
    )
    assert discarded == []
    assert (
        kexp.storage.parallel.in_two_processes(
            dying, list(range(10)), 10**6, None, discarded.append
        )
        == expected
    )
    assert len(discarded) == 1 and discarded[0] != parent


@pytest.mark.parametrize("parallel", [False, True])
def test_a_cache_that_cannot_be_written_is_kept_in_memory(
    store: Store,
    aged: list[KernelExperiment],
    monkeypatch: pytest.MonkeyPatch,
    parallel: bool,
) -> None:
    """Something else in the cache file's place (here a folder): answers stay right."""
    import kexp.storage.parallel

    if parallel:
        monkeypatch.setattr(kexp.storage.parallel, "PARALLEL_MIN_FILES", 1)
        monkeypatch.setattr(kexp.storage.parallel, "_forkable", lambda: True)
    (store.cache_dir / INDEX_FILE).mkdir(parents=True)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert _scores(store) == _uncached(store)
        assert [e.id for e in store.top_experiments(1)] == [aged[2].id]
    written = sorted(p.name for p in store.cache_dir.iterdir() if p.name != "locks")
    assert written == [".gitignore", INDEX_FILE]  # the creates' locks are not the cache's


def test_leftovers_of_killed_builders_are_removed_once_stale(
    store: Store, aged: list[KernelExperiment]
) -> None:
    """Temporary and side databases of earlier kexp builds killed while building their
    cache are removed by the next build once an hour old; fresh ones (a build running
    now) stay. So are caches of other kexp versions (and of the layouts before this
    one) unused for two weeks, unless a writer of that version is in a transaction (its
    journal is there)."""
    store.cache_dir.mkdir(exist_ok=True)
    stale = store.cache_dir / ".index-00000000.sqlite.4242-0.side"
    fresh = store.cache_dir / ".index-00000000.sqlite.abcdef.tmp"
    old_cache = store.cache_dir / "index-v1"
    # Caches of other kexp versions: one unused for long, one in use, one with a journal.
    unused, used, journaled = (
        store.cache_dir / name
        for name in ("cache-00000000.sqlite", "index-00000001.sqlite", "blobs-0000000002.sqlite")
    )
    for path in (stale, fresh, old_cache, unused, used, journaled):
        path.write_bytes(b"left behind")
    journaled.with_name(journaled.name + "-journal").write_bytes(b"")
    for path in (stale, unused, journaled):
        _age(path)
    assert _scores(store) == _uncached(store)  # no cache yet: a build
    assert not stale.exists() and not old_cache.exists() and not unused.exists()
    assert fresh.exists() and used.exists() and journaled.exists()
    assert (store.cache_dir / INDEX_FILE).exists()


@pytest.mark.parametrize("first_in", ["an empty store", "a store with an experiment"])
def test_an_experiment_in_a_new_month_folder_stays_visible(
    store: Store, make_experiment: Callable[..., KernelExperiment], first_in: str
) -> None:
    """A query, then experiments written into folders the cache has not seen (a new
    year and month below a folder that holds only folders), with real time between the
    steps: every later query still lists them (they vanished once the parent folder's
    new signature was stored with its old sub-folder list)."""
    if first_in != "an empty store":
        old = make_experiment(change_summary="Old one - +1%")
        assert old.path is not None
        _age(old.path)
        _age(old.path.parent)
    assert _scores(store) == _uncached(store)
    made: list[KernelExperiment] = []
    for month in ("2031/01", "2031/02"):
        exp = make_experiment(change_summary=f"In {month} - +1%")
        assert exp.path is not None
        target = store.experiments_dir / month / exp.path.name
        target.parent.mkdir(parents=True)
        exp.path.rename(target)
        made.append(exp)
        past_racy_window()
        assert _scores(store) == _uncached(store)
        past_racy_window()
        found = _scores(store)
        assert {e.id for e in made} <= found.keys()
        assert found == _uncached(store)


def test_a_write_holding_an_experiments_lock_looks_it_up_once(
    store: Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A remeasure or update reads the experiment it holds the lock of several times
    (the record, its correction, the update): each walked every folder of the store
    (ten walks a remeasure, 0.3 s each at 100,000). Under the lock the id is looked up
    once, the same file a lookup without it finds; a file removed meanwhile is looked
    up again (and not found)."""
    exp = store.create_experiment(**experiment_fields())
    other = store.create_experiment(**experiment_fields(change_summary="Other - +2%"))
    walks: list[str] = []
    walk = listing_module.find_folders

    def counted(*args: Any, **kwargs: Any) -> Any:
        walks.append("walk")
        return walk(*args, **kwargs)

    monkeypatch.setattr(listing_module, "find_folders", counted)
    plain = store.path_of(exp.id)
    with store.editing(exp.id) as full_id:
        before = len(walks)
        assert [store.path_of(full_id) for _ in range(3)] == [plain] * 3
        assert store.get_experiment(full_id).id == exp.id
        assert len(walks) == before  # looked up once, when the lock was taken
        assert store.path_of(other.id) == store.path_of(other.id)  # others as before
        assert len(walks) == before + 2
        plain.unlink()  # by hand, meanwhile: looked up again, and not found
        with pytest.raises(ExperimentNotFoundError):
            store.path_of(full_id)
