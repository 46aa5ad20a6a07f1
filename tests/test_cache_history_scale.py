"""The cache-history model at scale: the same answers whatever the cache's history, in a
store of thousands of experiments, where the paths that only start at scale run.

:mod:`test_cache_history`'s model (its rules, reused here) keeps its stores tiny. This
one works on a store of 4,700 experiments in a real git repository, made once (files
written as kexp writes them, committed) and copied for each history: 1,500 committed
first and the cache grown on them (docs made, then posted in an order decided from
them), then 3,200 more pushed by another agent and pulled (more than the two-process
threshold, and more than double the docs the order was decided from). Of them, 588 are
equally relevant to "swizzle" (the same words and lengths; their code changes are the
orders of one set of lines: identical to, or near-duplicates of, each other), and
exactly ``COMMON_MIN`` hold "shuffle" (a query's fourth rarest word: kept at 1,000,
left out at 1,001).

Steps follow: creates (also of the tied class), corrections, edits in place, deletes,
commits, another agent's pushes and corrections fetched (and, in the written-out
history, a ref on which it edited every experiment), ``.kexp/`` removed before a
create, and ``kexp add`` of a change tried before (its warning on stderr, output and
status compared with a copy's). After every step a subset of the read commands
(``similar --text`` with the tie-heavy and the common-word queries, ``similar --diff``,
``context --text``/``--diff``, ``top``, ``similar ID``, most also with ``--all-refs``)
answers the same in the repository with its long-lived ``.kexp/`` and in a copy
without it. One history is written out, step by step (``kexp report`` compared too,
at its start and end); another is hypothesis's (``KEXP_SCALE_STEPS``, default 8).

The commands run in this process (``run_kexp``), so spies count what ran: more than
``CANDIDATES`` text candidates (the ties with the last kept), words left out of a query
as too common, the work split between two processes (the listing's stat and cold
read, the docs made, the postings made, the words made again, the report's pages), the
postings' order decided again over the whole store, and docs not posted yet compared
directly. Each test fails when what it must reach did not run.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import json
import os
import random
import shutil
import sys
import tempfile
from collections import Counter
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

import pytest
from conftest import experiment_fields, git, init_repo, run_kexp
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import initialize, invariant, rule
from test_cache_history import (
    LINES,
    OPERATORS,
    SameAnswersWhateverTheHistory,
    _answer,
    _diff,
    _pages,
    _quietly,
)

import kexp.storage.parallel as parallel
from kexp import KernelExperiment, KexpError, Store
from kexp.format.fileformat import serialize
from kexp.storage import postings
from kexp.storage.cache import Cache
from kexp.storage.retrieval import CANDIDATES, COMMON_MIN, Search

#: Experiments committed before the cache was grown, and pulled after.
FIRST, LATER = 1_500, 3_200
#: Every this many experiments one is of the tied class.
TIED_EVERY = 8
#: The words of the tied class (none elsewhere in the store) and of its code changes.
TIED_WORD = "swizzle"
TIED_LINES = (3, 6, 1)
#: The word held by exactly COMMON_MIN experiments of the store as made.
EDGE_WORD = "shuffle"
OTHER_WORDS = ("tile", "unroll", "vectorize", "prefetch")
#: The tied class's permutations of its lines.
ORDERS = ((3, 6, 1), (3, 1, 6), (6, 3, 1), (6, 1, 3), (1, 3, 6), (1, 6, 3))
START = dt.datetime(2025, 1, 1, tzinfo=dt.timezone.utc)


# --- the store, made once ------------------------------------------------------------------


def _tied_fields(n: int, order: Sequence[int], exp_id: str) -> dict[str, Any]:
    """An experiment of the tied class: the same words and lengths as every other one
    (the number in the summary is one word; either operator is four words), its code
    change ``order`` of the lines."""
    return experiment_fields(
        id=exp_id,
        change_summary=f"Swizzle the bank layout, try {n}",
        detailed_description=(
            "**Approach**: swizzle the bank layout\n\n**Key insight**: a swizzle avoids "
            "bank conflicts"
        ),
        operator_sig=OPERATORS[n // TIED_EVERY % 2],
        score=(1.01, 1.05, 1.08, 0.97)[n % 4],
        code_change=_diff(list(order)),
    )


def _base_fields(n: int, rng: random.Random, holds_edge: bool) -> dict[str, Any]:
    """The fields of the store's ``n``-th experiment (in order of creation)."""
    exp_id = f"6ab{n:05x}{(n * 2654435761) & 0xFFFFFFFF:08x}"
    created = (START + dt.timedelta(minutes=55 * n)).strftime("%Y-%m-%dT%H:%M:%SZ")
    if n % TIED_EVERY == 0:
        fields = _tied_fields(n, ORDERS[(n // TIED_EVERY) % len(ORDERS)], exp_id)
    else:
        word = EDGE_WORD if holds_edge else rng.choice(OTHER_WORDS)
        other = rng.choice(OTHER_WORDS)
        lines = rng.sample(range(len(LINES)), rng.randint(1, 4))
        buggy = rng.random() < 0.1
        fields = experiment_fields(
            id=exp_id,
            change_summary=f"{word.capitalize()} the {other} loop, try {n}",
            detailed_description=(
                f"**Approach**: {word} then {other}\n\n**Key insight**: {other} helps the {word}"
            ),
            operator_sig=OPERATORS[n % 2],
            score=0.0 if buggy else rng.choice((0.95, 1.0, 1.01, 1.08, 1.2)),
            is_buggy=buggy,
            error_message=f"{word} crash" if buggy else "",
            code_change=_diff(lines),
        )
    return {**fields, "created_at": created, "author": "Test Engineer"}


def _write(root: Path, numbers: range, edge: set[int], rng: random.Random) -> None:
    """Write the experiments ``numbers`` into ``root``'s store as kexp writes them."""
    (root / "experiments").mkdir(exist_ok=True)
    store = Store(root)
    head = git(root, "rev-parse", "HEAD")
    for n in numbers:
        exp = KernelExperiment.from_dict({**_base_fields(n, rng, n in edge), "base_commit": head})
        path = store.path_for(exp)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(serialize(exp), encoding="utf-8")


def _commit(root: Path, message: str) -> None:
    git(root, "add", "-A", "experiments")
    git(root, "commit", "-q", "-m", message)


def make_template(top: Path) -> Path:
    """The repository, its remote and another agent's clone, in ``top``: FIRST
    experiments committed and the cache grown on them (docs made, then posted by a
    later command), then LATER more pushed by the other agent and pulled."""
    total = FIRST + LATER
    rng = random.Random(20261129)
    untied = [n for n in range(total) if n % TIED_EVERY]
    edge = set(rng.sample(untied, COMMON_MIN))
    root = init_repo(top / "repo")
    remote = top / "remote.git"
    git(top, "init", "-q", "--bare", "-b", "main", str(remote))
    git(root, "remote", "add", "origin", str(remote))
    _write(root, range(FIRST), edge, rng)
    _commit(root, "the first experiments")
    git(root, "push", "-q", "origin", "main")
    diff = top / "query.diff"
    diff.write_text(_diff(list(TIED_LINES)))
    for command in (["top"], ["similar", "--diff", str(diff)], ["similar", "--diff", str(diff)]):
        assert run_kexp(*command, cwd=root).returncode == 0
    other = top / "other"
    git(top, "clone", "-q", str(remote), str(other))
    for name, value in (("user.name", "Other Agent"), ("user.email", "other@example.com")):
        git(other, "config", name, value)
    git(other, "config", "commit.gpgsign", "false")
    _write(other, range(FIRST, total), edge, rng)
    _commit(other, "the other agent's experiments")
    git(other, "push", "-q", "origin", "main")
    git(root, "pull", "-q", "--ff-only", "origin", "main")
    for folder in (root, other):
        git(folder, "gc", "-q")
    return top


# --- what ran: spies ---------------------------------------------------------------------


class Seen:
    """What the commands did, by the side they ran in (``grown``: the repository with
    its long-lived cache, its rules' writes included; ``fresh``: a copy without it)."""

    def __init__(self) -> None:
        self.side = "grown"
        #: (side, the caller of in_two_processes) → how many times it was worth two
        #: processes, and how many it forked.
        self.split: Counter[tuple[str, str]] = Counter()
        self.forked: Counter[tuple[str, str]] = Counter()
        #: The most text candidates kept (more than CANDIDATES: ties with the last).
        self.most_candidates = 0
        #: The words left out of queries as too common; EDGE_WORD kept or left out.
        self.dropped: Counter[str] = Counter()
        self.edge: Counter[str] = Counter()
        #: (side, how many docs) of each order of the postings decided.
        self.orders: list[tuple[str, int]] = []
        #: side → the most docs not posted yet that a near-duplicate question compared.
        self.unposted: Counter[str] = Counter()

    @contextlib.contextmanager
    def on(self, side: str) -> Iterator[None]:
        before, self.side = self.side, side
        try:
            yield
        finally:
            self.side = before

    def spy(self, monkeypatch: pytest.MonkeyPatch) -> None:
        """Count what runs from now on (wrapping kexp's functions)."""
        seen = self
        forkable = parallel._forkable

        def counted_forkable() -> bool:
            caller = sys._getframe(2).f_code.co_name  # the caller of in_two_processes
            seen.split[seen.side, caller] += 1
            able = forkable()
            seen.forked[seen.side, caller] += able
            return able

        text_matches = Search.text_matches

        def counted_text_matches(search: Search, *args: Any, **kwargs: Any) -> dict[str, float]:
            found = text_matches(search, *args, **kwargs)
            seen.most_candidates = max(seen.most_candidates, len(found))
            return found

        telling_words = Search.telling_words

        def counted_telling_words(search: Search, words: Sequence[str]) -> list[str]:
            kept = telling_words(search, words)
            held = search._cache.word_counts(list(dict.fromkeys(words)))
            seen.dropped.update(w for w, n in held.items() if n and w not in kept)
            if EDGE_WORD in held and len(held) > 3:
                state = "kept" if EDGE_WORD in kept else "left out"
                seen.edge[f"{state} at {held[EDGE_WORD]}"] += 1
            return kept

        order_of = postings.order_of

        def counted_order_of(shingle_sets: Any) -> dict[int, int]:
            sets = list(shingle_sets)
            seen.orders.append((seen.side, len(sets)))
            return order_of(sets)

        near_candidates = Cache.near_candidates

        def counted_near_candidates(cache: Cache, *args: Any) -> list[tuple[bytes, bytes]]:
            (unposted,) = cache._rows(
                "SELECT COUNT(*) FROM docs WHERE doc > "
                "(SELECT COALESCE(MAX(posted), 0) FROM shingle_order)"
            )[0]
            seen.unposted[seen.side] = max(seen.unposted[seen.side], int(unposted))
            return near_candidates(cache, *args)

        monkeypatch.setattr(parallel, "_forkable", counted_forkable)
        monkeypatch.setattr(Search, "text_matches", counted_text_matches)
        monkeypatch.setattr(Search, "telling_words", counted_telling_words)
        monkeypatch.setattr(postings, "order_of", counted_order_of)
        monkeypatch.setattr(Cache, "near_candidates", counted_near_candidates)

    def check_split(self, side: str, caller: str) -> None:
        """``caller`` ran in two processes on ``side`` (asked to, where one cannot fork)."""
        assert self.split[side, caller], (side, caller, self.split)
        if _can_fork():
            assert self.forked[side, caller], (side, caller, self.forked)


def _can_fork() -> bool:
    return len(os.sched_getaffinity(0)) > 1 and not os.environ.get("KEXP_NO_FORK")


# --- the model ---------------------------------------------------------------------------


class SameAnswersAtScale(SameAnswersWhateverTheHistory):
    """:class:`SameAnswersWhateverTheHistory` on a store of thousands (see the module
    documentation): its rules but those that reach no path of scale (invalid files,
    copies, stashes), two more, and a subset of its reads."""

    #: The folder :func:`make_template` made, and the spies (set by the test).
    template: Path
    seen: Seen

    make_invalid = duplicate = stash_and_back = None  # type: ignore[assignment]

    @initialize()
    def make_repositories(self) -> None:
        self.folder = tempfile.TemporaryDirectory(prefix="kexp-scale-model-")
        top = Path(self.folder.name)
        shutil.copytree(self.template, top, symlinks=True, dirs_exist_ok=True)
        self.root, self.remote, self.other = top / "repo", top / "remote.git", top / "other"
        for clone in (self.root, self.other):
            git(clone, "remote", "set-url", "origin", str(self.remote))
        self.diff_file = top / "query.diff"
        self.near_file = top / "near.diff"
        self.near_file.write_text(_diff([*TIED_LINES, 5]))
        self.store = Store(self.root)
        self.made.append(next(p.name[:16] for p in self.store.paths() if TIED_WORD in p.name))

    def _some_path(self, index: int) -> Path | None:
        """Any of the store's files (the model's indices are small)."""
        paths = self.store.paths()
        return paths[index * 92821 % len(paths)] if paths else None

    @rule(order=st.sampled_from(ORDERS))
    def create_tied(self, order: tuple[int, ...]) -> None:
        """A new experiment of the tied class (its change identical to, or a
        near-duplicate of, many)."""
        n = next(self.counter)
        fields = _tied_fields(n, order, f"6ac{n:04x}000000000")
        exp = _quietly(self.store.create_experiment, **fields)  # type: ignore[no-untyped-call]
        self.made.append(exp.id)

    @rule(index=st.integers(0, 50))
    def delete_made(self, index: int) -> None:
        """Delete one of the experiments made here (its doc maybe not posted yet)."""
        if self.made[1:]:
            with contextlib.suppress(KexpError):  # deleted already
                self.store.delete_experiment(self.made[1:][index % len(self.made[1:])], force=True)

    @rule(order=st.sampled_from(ORDERS), extra=st.sampled_from([None, 0, 5]), refs=st.booleans())
    def add_tried_before(self, order: tuple[int, ...], extra: int | None, refs: bool) -> None:
        """``kexp add`` of a change tried before (identical to many, or a near-duplicate
        of many; ``refs``: on any ref too): the same warning, output and status as in a
        copy without the cache."""
        n = next(self.counter)
        fields = _tied_fields(n, order, f"6ac{n:04x}000000000")
        fields["code_change"] = _diff([*order, *([] if extra is None else [extra])])
        added = START + dt.timedelta(days=400, minutes=n)  # after the store's; never today
        fields["created_at"] = added.strftime("%Y-%m-%dT%H:%M:%SZ")
        fresh = self._fresh_copy()
        options = ["--all-refs"] if refs else []
        with self.seen.on("fresh"):
            made = _add(fresh, json.dumps(fields), options)
        grown = _add(self.root, json.dumps(fields), options)
        assert made == grown
        status, _, warned = grown
        # (the same change on a base commit whose code is the same: measured again)
        said = ("already tried in", "near-duplicate", "the same measurement again")
        assert status == 0 and any(words in warned for words in said)
        self.made.append(fields["id"])

    def other_agent_reviews_everything(self) -> None:
        """The other agent merges main, edits every experiment (a word added to its key
        insight), adds a hundred and pushes: a ref whose every version is newer, more
        contents than the working tree's, only git holds them (not a rule: each read
        with refs then takes seconds)."""
        git(self.other, "pull", "-q", "--no-rebase", "--no-edit", "origin", "main")
        for path in sorted((self.other / "experiments").rglob("*.md")):
            text = path.read_text(encoding="utf-8")
            path.write_text(text.replace("**Key insight**: ", "**Key insight**: reviewed ", 1))
        total = FIRST + LATER
        _write(self.other, range(total, total + 100), set(), random.Random(total))
        git(self.other, "add", "-A", "experiments")
        git(self.other, "commit", "-q", "-m", "another agent's review of everything")
        git(self.other, "push", "-q", "-f", "origin", "HEAD:agent-b")

    # --- what every read answers ----------------------------------------------------------

    def _fresh_copy(self) -> Path:
        fresh = Path(self.folder.name, "fresh")
        shutil.rmtree(fresh, ignore_errors=True)
        shutil.copytree(self.root, fresh, symlinks=True, ignore=shutil.ignore_patterns(".kexp"))
        return fresh

    def _commands(self) -> list[list[str]]:
        diff, near = str(self.diff_file), str(self.near_file)
        # Each also with --all-refs: the first six, and similar ID.
        commands = [
            # First: in the copy, a question comparing the docs it made itself.
            ["similar", "--diff", diff, "-n", "300", "--json"],
            ["similar", "--text", TIED_WORD, "-n", "300", "--json"],
            ["similar", "--text", f"{TIED_WORD} bank layout {EDGE_WORD} loop", "--json"],
            ["context", "--operator", "attn", "--text", f"{TIED_WORD} {EDGE_WORD}", "--json"],
            ["context", "--operator", "attn", "--diff", near, "--json"],
            ["top", "--json"],
            ["similar", "--text", TIED_WORD, "--operator", "gemm", "-n", "300"],
            ["similar", "--diff", near, "-n", "300", "--json"],
            ["top", "--by", "score"],
        ]
        everywhere = commands[:6]
        for exp_id in dict.fromkeys(self.made[:1] + self.made[-1:]):
            commands.append(["similar", exp_id, "--json"])
            everywhere.append(commands[-1])
        return commands + [[*command, "--all-refs"] for command in everywhere]

    @invariant()
    def a_cache_made_at_once_answers_the_same(self) -> None:
        if not hasattr(self, "store"):
            return
        fresh = self._fresh_copy()
        for command in self._commands():
            grown = _answer(command, self.root)
            with self.seen.on("fresh"):
                made = _answer(command, fresh)
            assert made == grown, command

    def the_report_is_the_same(self) -> None:
        """``kexp report`` writes the same pages (but the time they were made) in both:
        the grown one into the folder it wrote before (reusing the pages it may)."""
        fresh = self._fresh_copy()
        grown_pages = Path(self.folder.name, "report-grown")
        made_pages = Path(self.folder.name, "report-fresh")
        shutil.rmtree(made_pages, ignore_errors=True)
        for root, pages, side in ((self.root, grown_pages, "grown"), (fresh, made_pages, "fresh")):
            with self.seen.on(side):
                assert run_kexp("report", "-o", str(pages), cwd=root).returncode == 0
        made = _pages(made_pages)
        assert "index.html" in made
        assert made == _pages(grown_pages)


def _add(root: Path, document: str, options: Sequence[str]) -> tuple[int, str, str]:
    """What ``kexp add --json OPTIONS`` of ``document`` (on stdin) answers in ``root``."""
    result = run_kexp("add", "--json", *options, cwd=root, input=document)
    return tuple(  # type: ignore[return-value]
        part.replace(str(root), "<root>") if isinstance(part, str) else part
        for part in (result.returncode, result.stdout, result.stderr)
    )


# --- the tests -------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def template(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return make_template(tmp_path_factory.mktemp("scale-template"))


@pytest.fixture
def seen(template: Path, monkeypatch: pytest.MonkeyPatch) -> Seen:
    """The spies, counting from now on; the model set to copy ``template``."""
    found = Seen()
    found.spy(monkeypatch)
    monkeypatch.setattr(SameAnswersAtScale, "template", template, raising=False)
    monkeypatch.setattr(SameAnswersAtScale, "seen", found, raising=False)
    return found


def _index_of(machine: SameAnswersAtScale, wanted: Callable[[str], bool]) -> int:
    """An index the model's rules take that names a file whose name is ``wanted``."""
    for index in range(51):
        path = machine._some_path(index)
        if path is not None and wanted(path.name):
            return index
    raise AssertionError("no such file among the rules' indices")


@pytest.mark.slow
def test_a_history_at_scale_reaches_every_path_of_scale(seen: Seen) -> None:
    """One history, step by step, through every path of scale (about 100 s)."""
    machine = SameAnswersAtScale()
    check = machine.a_cache_made_at_once_answers_the_same
    try:
        machine.make_repositories()
        check()  # the grown cache takes in the 3,200 pulled
        machine.the_report_is_the_same()
        machine.create_tied(ORDERS[0])
        check()  # it is posted by the command after the create
        machine.add_tried_before(ORDERS[2], None, refs=False)  # identical to many
        machine.add_tried_before(ORDERS[0], 5, refs=False)  # a near-duplicate of many
        machine.correct_score(_index_of(machine, lambda name: TIED_WORD in name), 1.2)
        machine.create(EDGE_WORD, "tile", [0, 2], OPERATORS[0], 1.08, None, "")
        check()  # EDGE_WORD held by COMMON_MIN + 1
        machine.delete_made(len(machine.made[1:]) - 1)  # the last create
        machine.edit_in_place(_index_of(machine, lambda name: TIED_WORD in name), "tile")
        check()
        machine.commit(push=True)
        machine.other_agent_pushes(TIED_WORD, [3, 6, 1], 1.2)
        machine.other_agent_corrects(3, 1.08)
        machine.fetch()
        check()
        machine.add_tried_before(ORDERS[1], 0, refs=True)
        machine.delete(7)
        machine.create_tied(ORDERS[4])
        machine.other_agent_reviews_everything()
        machine.fetch()
        machine.create_with_no_cache("prefetch", [3, 6], OPERATORS[1])
        check()  # the docs a write made without their words, and the ref's made
        machine.the_report_is_the_same()
    finally:
        machine.teardown()
    assert seen.most_candidates > CANDIDATES
    assert "loop" in seen.dropped
    assert seen.edge[f"kept at {COMMON_MIN}"] and seen.edge[f"left out at {COMMON_MIN + 1}"]
    for side in ("grown", "fresh"):
        for caller in ("_refresh", "_read_all", "add_docs", "posted"):
            seen.check_split(side, caller)
    for side in ("grown", "fresh"):
        for caller in ("_experiment_pages", "_operator_pages"):
            seen.check_split(side, caller)
    seen.check_split("grown", "_made_again")
    assert seen.split["grown", "add_docs"] >= 3  # the pulled, the write's, the ref's
    total = FIRST + LATER
    # The order decided again: over the pulled (the docs of FIRST more than doubled),
    # after .kexp/ was removed, and over the ref's docs (doubled again).
    grown = [n for side, n in seen.orders if side == "grown"]
    assert grown[0] == total and len(grown) >= 3 and max(grown) >= 2 * total, grown
    assert seen.unposted["grown"] >= LATER and seen.unposted["fresh"] >= total


@pytest.mark.slow
def test_same_answers_whatever_the_history_at_scale(seen: Seen) -> None:
    """The model at scale, with hypothesis choosing the steps (``KEXP_SCALE_STEPS``,
    default 8: about a minute)."""
    steps = int(os.environ.get("KEXP_SCALE_STEPS", "8"))
    test = SameAnswersAtScale.TestCase
    test.settings = settings(
        max_examples=max(1, steps // 8),
        stateful_step_count=min(8, steps),
        deadline=None,
        suppress_health_check=[HealthCheck.too_slow],
    )
    test("runTest").runTest()
    # What every example reaches: the pulled experiments taken in, the tied class.
    assert seen.most_candidates > CANDIDATES
    assert "loop" in seen.dropped
    for caller in ("add_docs", "posted"):
        seen.check_split("grown", caller)
        seen.check_split("fresh", caller)
