"""``top``'s one fast path: the answer kept for an unchanged working tree
(:mod:`kexp.storage.answers`) is the ranking of the files, whatever happened before.

Each answer is compared with the files' own, read by kexp without its cache; whether
the kept answer was used is seen by counting how often what is derived of the whole
store was worked out (the plain path derives it once a ranking).
"""

from __future__ import annotations

import os
import re
import shutil
import sqlite3
import subprocess
import sys
import warnings
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from conftest import edit_in_place, experiment_fields, git, past_racy_window
from test_sync import clone, make_remote, record

import kexp.storage.cache
import kexp.storage.derivedof
import kexp.storage.listing
import kexp.storage.sources
from kexp import KernelExperiment, KexpError, Store
from kexp.core.campaign import derive
from kexp.storage.sources import WorkingTree
from kexp.storage.sync import sync

MakeExperiment = Callable[..., KernelExperiment]

#: The rankings asked (keyword arguments of ``top_experiments``).
QUESTIONS: list[dict[str, Any]] = [
    {"max_results": 5, "brief": True},
    {"max_results": 5},  # the bodies read: the first one's answer (the same rows)
    {"by": "score", "brief": True},
    {"by": "low", "max_results": 3, "brief": True},
    {"dtype": "fp8", "brief": True},
    {"include_buggy": True, "include_pending": True, "brief": True},
    {"tags": "control", "brief": True},
    {"since": "2020-01-01", "operator": "gemm", "brief": True},
    {"strict": True, "brief": True},  # the broken file raises (before any ranking)
]
#: How many of them are ranked (not the kept answer) just after the files settled: the
#: one reading bodies takes the first one's answer (the same rows), the strict one
#: raises first; and while a file is within the racy window (read again by every read:
#: no answer is kept).
RANKED = len(QUESTIONS) - 2
RANKED_WHILE_RACY = len(QUESTIONS) - 1


@pytest.fixture
def derived(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[int]]:
    """How many times the reader derived what is known of the whole store."""
    calls = [0]

    def counted(*args: Any, **kwargs: Any) -> Any:
        calls[0] += 1
        return derive(*args, **kwargs)

    monkeypatch.setattr(kexp.storage.derivedof, "derive", counted)  # derived_of
    monkeypatch.setattr(kexp.storage.sources, "derive", counted)  # Found.derivation
    yield calls


def _campaign(make: MakeExperiment) -> list[KernelExperiment]:
    first = make(score=1.05, change_summary="Vectorise loads - +5%")
    second = make(score=1.12, change_summary="Unroll by 4 - +12%", pid=first.id,
                  measured_against="parent")  # fmt: skip
    made = [first, second]
    made.append(make(score=1.03, change_summary="Prefetch - +3%", pid=second.id,
                     measured_against="parent"))  # fmt: skip
    made.append(make(score=1.2, change_summary="Tile the gemm - +20%", operator_sig="g.cu: gemm"))
    made.append(make(score=1.01, change_summary="A/A run - +1%", tags=["control"]))
    made.append(make(score=0.0, change_summary="Crash", is_buggy=True, status="failed",
                     error_message="illegal address"))  # fmt: skip
    made.append(make(score=1.4, change_summary="Planned", status="new"))
    made += [make(score=1.0 + n / 50, change_summary=f"Try {n} - +{2 * n}%",
                  dtype_sig="fp8" if n % 2 else "bf16") for n in range(5)]  # fmt: skip
    broken = made[0].path.parent / f"{'ab' * 8}-broken.md"  # warned about by every read
    broken.write_text("---\nid: not closed\n")
    return made


def _ranked(store: Store, question: dict[str, Any]) -> list[Any]:
    """What a user reads of a ranking: each experiment's id, path, score, derived
    values and body, then the warnings given (or the error raised, ``strict``)."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            found = store.top_experiments(**question)
        except KexpError as exc:
            return ["error", str(exc)]
    read = [(e.id, str(e.path), e.score, e.derived, e.detailed_description) for e in found]
    return [*read, sorted(str(w.message) for w in caught)]


def _truth(store: Store, question: dict[str, Any]) -> list[tuple[Any, ...]]:
    return _ranked(Store(store.root, source=WorkingTree(store.experiments_dir, cacheable=False)),
                   question)  # fmt: skip


def _worked_out(
    questions: list[dict[str, Any]],
    asked: Callable[[dict[str, Any]], Any],
    truth: Callable[[dict[str, Any]], Any],
    calls: list[int],
) -> int:
    """Check every answer ``asked`` of ``questions`` against the ``truth`` (a read
    without the cache); how many of them were worked out (``calls`` counted, not the
    kept answer taken)."""
    worked_out = 0
    for question in questions:
        before = calls[0]
        answer = asked(question)
        worked_out += calls[0] - before
        assert answer == truth(question), question
    return worked_out


def _every_answer_is_the_files(store: Store, derived: list[int]) -> int:
    """Check every ranking of :data:`QUESTIONS`; how many of them were worked out (not
    the kept answer)."""
    return _worked_out(QUESTIONS, lambda q: _ranked(store, q), lambda q: _truth(store, q), derived)


def _another_process_records_one_and_removes(store: Store, exp_id: str) -> None:
    """Another process records an experiment and removes ``exp_id`` (kexp's own writes)."""
    code = (
        "import sys; from kexp import Store; from conftest import experiment_fields;"
        "s = Store(sys.argv[1]); s.create_experiment(**experiment_fields(score=1.6,"
        " change_summary='Split K - +60%')); s.delete_experiment(sys.argv[2])"
    )
    subprocess.run([sys.executable, "-c", code, str(store.root), exp_id],
                   check=True, cwd=Path(__file__).parent)  # fmt: skip


def test_an_unchanged_store_answers_from_the_kept_answer_which_is_the_files_ranking(
    store: Store, make_experiment: MakeExperiment, derived: list[int],
    monkeypatch: pytest.MonkeyPatch,
) -> None:  # fmt: skip
    """Asked twice of a store nobody changed (its files older than the racy window), a
    ranking is the answer kept the first time; any change (an edit in place keeping the
    size, a file added by another process, one removed) is ranked again."""
    made = _campaign(make_experiment)
    past_racy_window()
    _ranked(store, {"brief": True})  # the files settled: the cache keeps their records
    assert _every_answer_is_the_files(store, derived) == RANKED
    assert _every_answer_is_the_files(store, derived) == 0  # each one the kept answer

    with monkeypatch.context() as racy:
        # The racy window is held open while the questions are asked: on a loaded
        # machine nine rankings took longer than its 2 s, and the last ones found the
        # edit settled and kept their answers (the next check counted 5, not 7).
        racy.setattr(kexp.storage.listing, "RACY_NS", 10**15)
        # An edit in place keeping the size (as an editor saves, within the racy window).
        edit_in_place(made[1].path, lambda text: text.replace("score: 1.12", "score: 1.92"))
        assert _every_answer_is_the_files(store, derived) == RANKED_WHILE_RACY
        _another_process_records_one_and_removes(store, made[-1].id)
        assert _every_answer_is_the_files(store, derived) == RANKED_WHILE_RACY
    past_racy_window()
    _ranked(store, {"brief": True})  # settles them
    assert _every_answer_is_the_files(store, derived) == RANKED
    assert _every_answer_is_the_files(store, derived) == 0


def test_an_answer_is_kept_only_for_plain_filters(
    store: Store, make_experiment: MakeExperiment, derived: list[int]
) -> None:
    """A filter resolved against the store or git (``pid``, ``base_commit``,
    ``reachable_from``): ranked every time, and right."""
    made = _campaign(make_experiment)
    git(store.root, "add", "-A")
    git(store.root, "commit", "-q", "-m", "experiments")
    past_racy_window()
    for question in [
        {"pid": made[0].id, "brief": True},
        {"base_commit": "HEAD", "brief": True},
        {"reachable_from": "HEAD", "brief": True},
    ]:
        for _ in range(2):
            before = derived[0]
            answer = _ranked(store, question)
            assert derived[0] == before + 1, question
            assert answer == _truth(store, question), question
    names = sqlite3.connect(next(store.cache_dir.glob("cache-*.sqlite"))).execute(
        "SELECT name FROM objects WHERE name >= 'answer:' AND name < 'answer;'"
    )
    assert list(names) == []


#: The rankings asked across refs.
ACROSS: list[dict[str, Any]] = [
    {"max_results": 4},
    {"by": "score", "brief": True},
    {"include_buggy": True, "brief": True},
]


def _ranked_across(
    root: Path, question: dict[str, Any], refs: list[str] | None = None
) -> list[Any]:
    """What a user reads of a ranking across every ref of the clone at ``root`` (or
    ``refs``): each experiment's id (and how long ids print), path, score, derived
    values, body and where it was found, then the warnings given."""
    across = Store(root, refs=refs) if refs else Store(root, all_refs=True)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        found = across.top_experiments(**question)
    read = [(e.id, e.path.relative_to(root).as_posix(), e.score, e.derived,
             e.detailed_description, e.where) for e in found]  # fmt: skip
    shown = across.shown_id_length([e.id for e in found])
    return [*read, shown, sorted(str(w.message).replace(str(root), "ROOT") for w in caught)]


def _cold_across(root: Path, question: dict[str, Any], refs: list[str] | None = None) -> list[Any]:
    """The same ranking, read by kexp in a copy of the clone without its cache (from
    the copy's twin of the folder the test runs in, when that is inside the clone)."""
    copy = root.parent / f"{root.name}-cold"
    shutil.rmtree(copy, ignore_errors=True)
    shutil.copytree(root, copy, ignore=shutil.ignore_patterns(".kexp"), symlinks=True)
    here = Path.cwd()
    try:
        if here.is_relative_to(root):
            os.chdir(copy / here.relative_to(root))
        return _ranked_across(copy, question, refs)
    finally:
        os.chdir(here)
        shutil.rmtree(copy)


def _kept_answers(root: Path) -> int:
    """How many answers the clone's cache keeps."""
    with sqlite3.connect(next((root / ".kexp").glob("cache-*.sqlite"))) as connection:
        query = "SELECT count(*) FROM objects WHERE name >= 'answer:' AND name < 'answer;'"
        return int(connection.execute(query).fetchone()[0])


def test_across_refs_an_unchanged_clone_answers_from_the_kept_answer_which_is_a_cold_reads(
    tmp_path: Path, derived: list[int]
) -> None:
    """Read across refs, a ranking asked again of a clone whose working tree, ``HEAD``
    and refs nobody changed is the answer kept the first time (as a cold read ranks
    them); a fetch moving a ref, a commit, an edit in place: ranked again, and right."""
    remote, base = make_remote(tmp_path)
    alice, bob = clone(remote, tmp_path / "alice"), clone(remote, tmp_path / "bob")
    mine = [record(alice, base, f"Alice {n} - +{n}%", score=1 + n / 100) for n in range(3)]
    record(alice, base, "Crash", score=0.0, is_buggy=True, status="failed", error_message="oops")
    sync(Store(alice))
    for n in range(3):
        record(bob, base, f"Bob {n} - +{3 * n}%", score=1 + 3 * n / 100)
    sync(Store(bob), branch="kexp/bob")
    git(alice, "fetch", "-q")
    record(alice, base, "Uncommitted - +4%", score=1.04)

    def ranked_again() -> int:
        """Every question's ranking checked against a cold read: how many were ranked."""
        truths = [_cold_across(alice, question) for question in ACROSS]
        before = derived[0]
        for question, truth in zip(ACROSS, truths, strict=True):
            assert _ranked_across(alice, question) == truth, question
        return derived[0] - before

    past_racy_window()
    _ranked_across(alice, {"brief": True})  # the files settled: the cache keeps them
    assert ranked_again() == len(ACROSS)
    assert ranked_again() == 0  # each one the kept answer
    # Bob corrects one of his and records another; Alice fetches (a ref moves).
    bobs = Store(bob).top_experiments(1, brief=True)[0]
    Store(bob).update_experiment(bobs.id, score=1.5)
    record(bob, base, "Bob 9 - +9%", score=1.09)
    sync(Store(bob), branch="kexp/bob")
    git(alice, "fetch", "-q")
    assert ranked_again() == len(ACROSS)
    assert ranked_again() == 0
    # The answers kept for the refs before the fetch are forgotten: an agent that only
    # fetches and asks keeps one answer a question, not one a fetch.
    assert _kept_answers(alice) == len(ACROSS) + 1  # and the settling read's
    # Alice commits her working tree (HEAD moves; no file changes).
    git(alice, "add", "experiments")
    git(alice, "commit", "-q", "-m", "more")
    assert ranked_again() == len(ACROSS)
    assert ranked_again() == 0
    # Alice edits one in place (as an editor saves, keeping the size).
    edit_in_place(mine[1].path, lambda text: text.replace("score: 1.01", "score: 1.91"))
    past_racy_window()
    assert ranked_again() == len(ACROSS)
    assert ranked_again() == 0


def test_a_kept_answer_is_forgotten_when_the_listing_is_saved_again(
    store: Store, make_experiment: MakeExperiment
) -> None:
    """The cache holds the answers of the last generation only: a save of the listing
    forgets the others (the cache does not grow with the questions asked over time)."""
    _campaign(make_experiment)
    past_racy_window()
    _ranked(store, {"brief": True})
    database = next(store.cache_dir.glob("cache-*.sqlite"))

    def kept() -> list[str]:
        with sqlite3.connect(database) as connection:
            rows = connection.execute(
                "SELECT name FROM objects WHERE name >= 'answer:' AND name < 'answer;'"
            )
            return sorted(name for (name,) in rows)

    _ranked(store, {"brief": True})
    _ranked(store, {"by": "score", "brief": True})
    before = kept()
    assert len(before) == 2
    store.create_experiment(**experiment_fields(score=1.3, change_summary="More - +30%"))
    _ranked(store, {"brief": True})  # saves the new file's listing: its answer kept
    after = kept()
    assert len(after) == 1 and after[0] not in before


def test_no_answer_is_kept_for_a_listing_another_process_saved_over(
    store: Store, make_experiment: MakeExperiment, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A slow read ``stat``\\ s a file, another process changes it and saves the
    listing (the file settled by then), then the slow read saves what it found changed:
    its ranking saw the old file, so it is not kept for the cache's new listing (the
    next read would find every file as the cache holds it, and take a stale answer)."""
    made = _campaign(make_experiment)
    changed = made[3]  # changed before the slow read, which saves it
    other = next(e for e in made if e.path.parent != changed.path.parent and e.score > 1)
    past_racy_window()
    _ranked(store, {"brief": True})
    edit_in_place(changed.path, lambda text: re.sub(r"(?m)^score: .*$", "score: 1.3", text))
    past_racy_window()  # settled: the slow read saves its signature
    real_save = kexp.storage.cache.Cache.save_folders
    calls = [0]

    def another_process_first(self: Any, *args: Any, **kwargs: Any) -> Any:
        calls[0] += 1
        if calls[0] == 1:  # the slow read's save: its files were stat-ed before this
            edit_in_place(other.path, lambda text: re.sub(r"(?m)^score: .*$", "score: 9.9", text))
            past_racy_window()
            code = "import sys, kexp; kexp.Store(sys.argv[1]).top_experiments(brief=True)"
            subprocess.run([sys.executable, "-W", "ignore", "-c", code, str(store.root)],
                           check=True)  # fmt: skip
        return real_save(self, *args, **kwargs)

    monkeypatch.setattr(kexp.storage.cache.Cache, "save_folders", another_process_first)
    question = {"max_results": 5, "brief": True}
    _ranked(store, question)  # saw the other experiment's old score
    monkeypatch.undo()
    assert calls[0] >= 1
    assert _ranked(store, question) == _truth(store, question)


def test_a_refs_invalid_file_is_warned_of_as_from_the_folder_the_command_runs_in(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Bob's branch holds an invalid file; Alice asks across refs from her clone's top,
    then from its experiments/ folder: each warning names the file as a cold read from
    there names it (the kept answer held the words of the first folder)."""
    remote, base = make_remote(tmp_path)
    alice, bob = clone(remote, tmp_path / "alice"), clone(remote, tmp_path / "bob")
    record(alice, base, "Alice - +2%", score=1.02)
    broken = record(bob, base, "Bob - +3%", score=1.03)
    assert broken.path is not None
    broken.path.write_text(broken.path.read_text().replace("score: 1.03", "score: oops"))
    git(bob, "checkout", "-q", "-b", "kexp/bob")
    git(bob, "add", "experiments")
    git(bob, "commit", "-q", "-m", "a broken record")
    git(bob, "push", "-q", "origin", "kexp/bob")
    git(alice, "fetch", "-q")
    past_racy_window()
    for folder in (alice, alice / "experiments", alice):
        monkeypatch.chdir(folder)
        for _ in range(2):
            warm = _ranked_across(alice, {"brief": True})
            assert warm == _cold_across(alice, {"brief": True}), folder
            assert any("score must be a number" in w for w in warm[-1]), warm


def test_a_clone_deepened_after_a_read_across_refs_answers_as_a_cold_read(
    tmp_path: Path,
) -> None:
    """A shallow clone reads across refs (no merge base: the later commit's version is
    taken), then fetches the whole history: the merge base now says which version is
    newer. The answer (and the merge base) kept while it was shallow are not taken."""
    remote, base = make_remote(tmp_path)
    up = clone(remote, tmp_path / "up")
    exp = record(up, base, "X - +5%", score=1.05)
    git(up, "add", "experiments")
    git(up, "commit", "-q", "-m", "X")
    git(up, "push", "-q", "origin", "main")
    git(up, "checkout", "-q", "-b", "r1")
    Store(up).update_experiment(exp.id, score=1.5)
    git(up, "add", "experiments")
    older = {**os.environ, "GIT_COMMITTER_DATE": "2020-01-02T00:00:00Z"}
    subprocess.run(["git", "commit", "-q", "-m", "X corrected (an older date)"], cwd=up,
                   check=True, env=older)  # fmt: skip
    git(up, "push", "-q", "origin", "r1")
    git(up, "checkout", "-q", "-b", "r2", "main")
    for n in range(3):
        (up / f"pad{n}").write_text(f"{n}\n")
        git(up, "add", f"pad{n}")
        git(up, "commit", "-q", "-m", f"pad {n}")
    git(up, "push", "-q", "origin", "r2")
    shallow = tmp_path / "shallow"
    git(tmp_path, "clone", "-q", "--depth=1", "--no-single-branch", remote.as_uri(), str(shallow))
    refs = ["origin/r*"]
    past_racy_window()
    before = _ranked_across(shallow, {"brief": True}, refs)
    assert before == _cold_across(shallow, {"brief": True}, refs)
    git(shallow, "fetch", "-q", "--unshallow")
    after = _ranked_across(shallow, {"brief": True}, refs)
    assert after == _cold_across(shallow, {"brief": True}, refs)
    assert after[0][2] == 1.5  # r1's correction: it changed since the merge base


# --- the context packet, kept whole ------------------------------------------------------

#: The context packets asked (keyword arguments of ``kexp.agents.context.context``).
CONTEXTS: list[dict[str, Any]] = [
    {"operator": "reshape_and_cache"},
    {"operator": "cache", "dtype": "fp8", "text": "unroll the inner loop", "output": "json"},
    {"operator": "gemm", "diff": "--- a/g.cu\n+++ b/g.cu\n@@ -1 +1 @@\n-tile 64\n+tile 128\n"},
    {"operator": "reshape_and_cache", "budget": 300},  # the first one's, fitted smaller
    {"operator": "no such operator"},
]


@pytest.fixture
def gathered(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[int]]:
    """How many times a context packet was gathered (not taken from the kept answer)."""
    import kexp.agents.context

    calls = [0]
    real = kexp.agents.context._gather

    def counted(*args: Any, **kwargs: Any) -> Any:
        calls[0] += 1
        return real(*args, **kwargs)

    monkeypatch.setattr(kexp.agents.context, "_gather", counted)
    yield calls


def _packet(store: Store, question: dict[str, Any]) -> list[Any]:
    """What an agent reads of a context packet: its text and data, then the warnings."""
    from kexp.agents.context import context

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        packet = context(store, **question)
    return [packet.text, packet.data, sorted(str(w.message) for w in caught)]


def _packets_are_the_files(store: Store, gathered: list[int]) -> int:
    """Check every packet of :data:`CONTEXTS` against one read without the cache; how
    many of the store's were gathered (not the kept answer)."""
    cold = Store(store.root, source=WorkingTree(store.experiments_dir, cacheable=False))
    return _worked_out(CONTEXTS, lambda q: _packet(store, q), lambda q: _packet(cold, q), gathered)


def test_an_unchanged_store_answers_context_from_the_kept_packet_which_is_the_files(
    store: Store, make_experiment: MakeExperiment, gathered: list[int],
    monkeypatch: pytest.MonkeyPatch,
) -> None:  # fmt: skip
    """An agent's consult call asked again of a store nobody changed is the packet kept
    the first time (whatever the budget and format), and the files' packet; an edit in
    place keeping the size, another process's record and removal: gathered again."""
    made = _campaign(make_experiment)
    past_racy_window()
    _packet(store, CONTEXTS[0])  # the files settled: the cache keeps their records
    # The first and the fitted-smaller one ask the same question: one gathering (the
    # settling read's packet may be kept for a listing its own read then saved again:
    # the packs of the files the writes made).
    assert _packets_are_the_files(store, gathered) in (len(CONTEXTS) - 2, len(CONTEXTS) - 1)
    assert _packets_are_the_files(store, gathered) == 0  # each one the kept packet
    with monkeypatch.context() as racy:
        racy.setattr(kexp.storage.listing, "RACY_NS", 10**15)  # held open (see above)
        edit_in_place(made[1].path, lambda text: text.replace("score: 1.12", "score: 1.92"))
        assert _packets_are_the_files(store, gathered) == len(CONTEXTS)
        _another_process_records_one_and_removes(store, made[-1].id)
        assert _packets_are_the_files(store, gathered) == len(CONTEXTS)
    past_racy_window()
    _packet(store, CONTEXTS[0])  # settles them
    assert _packets_are_the_files(store, gathered) in (len(CONTEXTS) - 2, len(CONTEXTS) - 1)
    assert _packets_are_the_files(store, gathered) == 0


def test_across_refs_context_asked_again_after_a_fetch_sees_what_the_other_agent_synced(
    tmp_path: Path, gathered: list[int]
) -> None:
    """Alice's consult call across refs, asked again of an unchanged clone, is the packet
    kept; after a fetch that brings Bob's dead end, it is gathered again and names it,
    as a cold read of the clone does."""
    from kexp.agents.context import context

    remote, base = make_remote(tmp_path)
    alice, bob = clone(remote, tmp_path / "alice"), clone(remote, tmp_path / "bob")
    record(alice, base, "Alice unrolls by 4 - +2%", score=1.02)
    sync(Store(alice))
    git(bob, "pull", "-q")
    question = {"operator": "reshape_and_cache", "text": "vectorise the stores"}

    def asked() -> str:
        packet = context(Store(alice, all_refs=True), **question)
        copy = alice.parent / "alice-cold"
        shutil.rmtree(copy, ignore_errors=True)
        shutil.copytree(alice, copy, ignore=shutil.ignore_patterns(".kexp"), symlinks=True)
        try:
            assert packet.text == context(Store(copy, all_refs=True), **question).text
        finally:
            shutil.rmtree(copy)
        return packet.text

    past_racy_window()
    asked()
    before = gathered[0]
    first = asked()
    assert gathered[0] == before + 1  # the cold copy's only
    record(bob, base, "Bob vectorises the stores - slower", score=0.71)
    sync(Store(bob), branch="kexp/bob")
    git(alice, "fetch", "-q")
    before = gathered[0]
    after = asked()
    assert gathered[0] == before + 2  # a ref moved: gathered again
    assert "Bob vectorises the stores" in after and "Bob vectorises" not in first


# --- similar, kept whole -------------------------------------------------------------------

#: The searches asked (keyword arguments of ``kexp.storage.retrieval.similar``).
SEARCHES: list[dict[str, Any]] = [
    {"text": "unroll the loop"},
    {"text": "tile", "operator": "gemm", "limit": 3},
    {"diff": "--- a/g.cu\n+++ b/g.cu\n@@ -1 +1 @@\n-tile 64\n+tile 128\n", "dtype": "fp8"},
]


@pytest.fixture
def searched(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[int]]:
    """How many times the retrieval index was searched (not the kept answer taken)."""
    import kexp.storage.retrieval

    calls = [0]
    real = kexp.storage.retrieval.Search.rank

    def counted(*args: Any, **kwargs: Any) -> Any:
        calls[0] += 1
        return real(*args, **kwargs)

    monkeypatch.setattr(kexp.storage.retrieval.Search, "rank", counted)
    yield calls


def _similar(store: Store, question: dict[str, Any]) -> list[Any]:
    """What a user reads of ``kexp similar``: each match, the length ids print at, and
    the warnings given."""
    from kexp.storage.retrieval import similar

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        matches = similar(store, **question)
    shown = store.shown_id_length([match.id for match in matches])
    return [matches, shown, sorted(str(w.message) for w in caught)]


def test_similar_asked_again_of_an_unchanged_store_is_the_kept_answer_and_the_files(
    store: Store, make_experiment: MakeExperiment, searched: list[int]
) -> None:
    """``kexp similar`` asked again of a store nobody changed is the answer kept the first
    time; an experiment recorded since, or one edited in place: searched again. Each
    answer is a read without the cache's (the match an id asks for, too)."""
    made = _campaign(make_experiment)
    SEARCHES.append({"exp_id": made[1].id})
    cold = Store(store.root, source=WorkingTree(store.experiments_dir, cacheable=False))

    def searched_again() -> int:
        before = searched[0]
        for question in SEARCHES:
            answer = _similar(store, question)
            count = searched[0]
            assert answer == _similar(cold, question), question
            searched[0] = count  # the cold read's search not counted
        return searched[0] - before

    try:
        past_racy_window()
        _similar(store, SEARCHES[0])  # the files settled (its answer may not be kept: above)
        assert searched_again() in (len(SEARCHES) - 1, len(SEARCHES))
        assert searched_again() == 0
        make_experiment(score=1.3, change_summary="Unroll the loop by 16 - +30%")
        past_racy_window()
        assert searched_again() == len(SEARCHES)
        assert searched_again() == 0
        edit_in_place(made[2].path, lambda text: text.replace("Prefetch", "Unroll!!"))
        past_racy_window()
        assert searched_again() == len(SEARCHES)
    finally:
        SEARCHES.pop()


def test_similar_across_refs_asked_again_prints_ids_as_a_cold_read_does(
    tmp_path: Path, searched: list[int]
) -> None:
    """Across refs, ``similar`` asked again of an unchanged clone is the kept answer, its
    ids printed as long as a cold read prints them (ids read on Bob's branch count)."""
    remote, base = make_remote(tmp_path)
    alice, bob = clone(remote, tmp_path / "alice"), clone(remote, tmp_path / "bob")
    for n in range(3):
        record(alice, base, f"Alice unrolls by {2**n} - +{n}%", score=1 + n / 100)
    sync(Store(alice))
    for n in range(3):
        record(bob, base, f"Bob unrolls by {3**n} - +{n}%", score=1 + n / 50)
    sync(Store(bob), branch="kexp/bob")
    git(alice, "fetch", "-q")
    question = {"text": "unroll", "limit": 2}

    def asked() -> list[Any]:
        warm = _similar(Store(alice, all_refs=True), question)
        copy = alice.parent / "alice-cold"
        shutil.copytree(alice, copy, ignore=shutil.ignore_patterns(".kexp"), symlinks=True)
        try:
            assert warm == _similar(Store(copy, all_refs=True), question)
        finally:
            shutil.rmtree(copy)
        return warm

    past_racy_window()
    asked()
    before = searched[0]
    asked()
    assert searched[0] == before + 1  # the cold copy's only


def test_a_record_forgets_the_kept_answers_so_the_next_consult_reads_in_one_pass(
    store: Store, make_experiment: MakeExperiment, gathered: list[int],
    monkeypatch: pytest.MonkeyPatch,
) -> None:  # fmt: skip
    """An agent consults, records a step, consults again: the second consult finds no
    kept answer (kexp's write forgot them), so it makes its rows while the files are
    ``stat``-ed, in one pass, instead of ``stat``-ing them all first for an answer that
    cannot hold, then making every row; updates and deletes too."""
    _campaign(make_experiment)
    past_racy_window()
    for _ in range(2):
        _packet(store, CONTEXTS[0])  # the second one kept
    completed = [0]
    real = WorkingTree.completed

    def counted(*args: Any, **kwargs: Any) -> Any:
        completed[0] += 1
        return real(*args, **kwargs)

    monkeypatch.setattr(WorkingTree, "completed", counted)
    for write in (
        lambda: make_experiment(score=1.5, change_summary="Split K - +50%"),
        lambda: store.update_experiment(store.top_experiments(1)[0].id, tags=["checked"]),
        lambda: store.delete_experiment(store.top_experiments(1, by="low")[0].id, force=True),
    ):
        before, completed[0] = gathered[0], 0
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # the broken file, warned about by each read
            write()
        answer = _packet(store, CONTEXTS[0])
        assert (gathered[0], completed[0]) == (before + 1, 0)
        assert answer == _packet(Store(store.root, source=WorkingTree(
            store.experiments_dir, cacheable=False)), CONTEXTS[0])  # fmt: skip
        past_racy_window()
        _packet(store, CONTEXTS[0])  # settled (read in two passes: the file changed since)
        _packet(store, CONTEXTS[0])  # kept again


def test_ids_held_once_are_counted_once_a_listing_and_warned_of_as_the_plain_count_says(
    store: Store, make_experiment: MakeExperiment, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The count of the ids several files hold (DuplicateIdWarning) is skipped for a
    listing the cache found every id held once at (:data:`kexp.storage.idindex.HELD_ONCE`,
    by generation): every read warns as a read counting every id without the cache does,
    before a copy keeping its id is made, while it is there and once it is removed; an
    unchanged store of ids held once is counted once."""
    import kexp.storage.idindex

    counted = [0]
    plain = kexp.storage.idindex._held_twice

    def counting(*args: Any) -> Any:
        counted[0] += 1
        return plain(*args)

    monkeypatch.setattr(kexp.storage.idindex, "_held_twice", counting)
    made = [make_experiment(score=1.0 + n / 10, change_summary=f"Try {n} - +{10 * n}%")
            for n in range(3)]  # fmt: skip

    def said(reader: Store) -> list[Any]:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            listed = sorted(str(e.path) for e in reader.list_experiments(brief=True))
            top = [e.id for e in reader.top_experiments(brief=True)]
        return [listed, top, sorted(str(w.message) for w in caught)]

    def read_counted() -> int:
        """How many of a list's and a top's reads counted the ids, each read's warnings
        checked against a read without the cache's."""
        truth = said(Store(store.root, source=WorkingTree(store.experiments_dir, cacheable=False)))
        before = counted[0]
        assert said(store) == truth
        return counted[0] - before

    past_racy_window()
    said(store)  # the files settled: the cache keeps their listing
    assert read_counted() == 0  # an unchanged store of ids held once: not counted again
    copy = made[1].path.with_name(f"{made[1].id}-a-copy.md")
    shutil.copy(made[1].path, copy)
    assert read_counted() == 2  # a new listing: counted, the copy warned of
    assert any("held by 2 files" in m for m in said(store)[-1])
    past_racy_window()
    assert read_counted() == 2  # ids held twice: counted by every read, each warned
    copy.unlink()
    read_counted()
    past_racy_window()
    said(store)
    assert read_counted() == 0
    assert not any("held by" in m for m in said(store)[-1])


def test_a_steps_controls_are_kept_for_an_unchanged_store_and_read_again_once_it_changes(
    store: Store, make_experiment: Callable[..., KernelExperiment], monkeypatch: pytest.MonkeyPatch
) -> None:
    """``show`` of a step the A/A control of its env may judge searches the folders that
    may name ``control`` once: asked again of an unchanged store (another process: no
    row kept in memory), the controls kept answer it (no folder searched), with the
    outcome a read without cache gives; once the control's file is removed by hand (no
    kexp write forgot the answer), it is searched for again and the step is no longer
    judged by it."""
    step = make_experiment(score=1.02, change_summary="Unroll - +2%")
    control = make_experiment(score=0.97, change_summary="A/A run - -3%", tags=["control"])
    plain = Store(store.root, source=WorkingTree(store.experiments_dir, cacheable=False))
    searched: list[str] = []
    naming = kexp.storage.listing.Listing.rows_naming

    def counted(self: Any, text: str) -> Any:
        searched.append(text)
        return naming(self, text)

    monkeypatch.setattr(kexp.storage.listing.Listing, "rows_naming", counted)
    past_racy_window()
    assert store.get_experiment(step.id).outcome == plain.get_experiment(step.id).outcome
    assert store.get_experiment(step.id).outcome == "marginal"
    assert searched == ["control"]
    kexp.storage.listing.forget_made_rows()
    assert store.get_experiment(step.id).outcome == "marginal"
    assert searched == ["control"]
    assert control.path is not None
    control.path.unlink()
    past_racy_window()  # its folder settled: listed once more, not at every read
    assert store.get_experiment(step.id).outcome == plain.get_experiment(step.id).outcome
    assert store.get_experiment(step.id).outcome == "improvement"
    assert searched == ["control", "control"]
