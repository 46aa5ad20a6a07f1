"""The same files, git state and options answer the same, whatever the cache's history.

A hypothesis state machine works on a store in a real git repository as people and
agents do: experiments created through the library (with and without a code change and
its timings, with a parent, buggy, controls, measured against the parent or the
reference), some right after ``.kexp/`` was removed (a write, not a read, starts the
cache), corrected (``update_experiment``), deleted, edited in place (the same inode, as
an editor saves; also keeping the size), made invalid, copied to a second folder (a
duplicate id), committed, edits discarded (``git checkout``) or stashed and popped, and
made or corrected by another agent in a second clone that pushes to a bare remote,
fetched here (two versions of one experiment on two refs). After every step each read
command is run twice: in the repository with its cache grown step by step (one
long-lived ``.kexp/``), and in a copy of the repository made now, ``.git`` included but
without ``.kexp/`` (a cache made at once). Both must print the same: ``top`` (both
rankings), ``list``, ``tree``, ``lessons``, ``stats``, ``show ID``, ``context
--text``/``--diff``, ``similar --text``/``--diff``/``ID``, ``validate``, ``export``,
each also with ``--all-refs``; ``top``, ``list``, ``stats``, ``context --text`` and
``similar --text`` with ``--refs PATTERN`` (``origin/*``, ``origin/agent-*``, which
matches nothing until a fetch, ``refs/remotes/origin/*``, ``main`` and another pattern
given together); ``review origin/main`` (the working tree against the merge base) and
``review FIRST HEAD`` (HEAD against the first commit, which holds no store), Markdown
byte for byte; ``log ID``, ``top --rev HEAD``. ``report`` writes the same pages (the
grown one into the folder it wrote at the last step, reusing the pages it may; the time
it was made normalised), and ``export --format parquet`` the same tables (the grown one
replacing the last step's export), compared as DuckDB reads them: columns, types and
rows (the files' bytes are not the content). The slow variant also reads ``top --by
score``, ``show ID`` with ``--refs``, ``review FIRST`` and ``review main origin/agent-b
--json`` (a ref as the head) after every step.

Only the store's absolute path is normalised (it is in error messages: "no experiment
with id X in /tmp/.../experiments"; the Parquet export's message names its own folder,
which differs); every other path kexp prints is relative to the store, and no output
holds a time of the run. No pause is needed: the cache reads a file changed within its
racy window again, so a step right after an edit is a harder case, not a wrong one.

What the model found is below it as plain tests: at a scale it does not reach (more
than 200 experiments equally relevant to a query), ``similar --text`` in a cache grown
step by step left out an experiment a cache made at once shows (the candidates were cut
among equals by the docs' numbers); and ``report`` written over an earlier one kept a
stale page of an experiment held by two files (its pages' keys were kept by id).
"""

from __future__ import annotations

import contextlib
import itertools
import re
import shutil
import subprocess
import tempfile
import warnings
from pathlib import Path

import duckdb
import pytest
from conftest import edit_in_place, experiment_fields, git, init_repo, past_racy_window, run_kexp
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, rule

from kexp import KexpError, Store

WORDS = ("tile", "unroll", "vectorize", "prefetch", "shuffle")
OPERATORS = ("attn.cu: paged_attention", "gemm.cu: fp8_gemm")
LINES = (
    "  for (int i = threadIdx.x; i < n; i += blockDim.x) {",
    "    out[i] = in[i] * scale;",
    "  float4 v = reinterpret_cast<const float4*>(in)[i];",
    "  __shared__ float tile[32][33];",
    "  acc += __shfl_xor_sync(0xffffffff, acc, 16);",
    "  #pragma unroll 4",
    "  __syncthreads();",
)
SCORES = (0.0, 0.95, 1.0, 1.01, 1.08, 1.2)


def _diff(lines: list[int]) -> str:
    body = "".join(f"+{LINES[i]}\n" for i in lines)
    return f"--- a/k.cu\n+++ b/k.cu\n@@ -1,1 +1,{len(lines)} @@\n-  old();\n{body}"


def _fields(
    n: int,
    word: str,
    other: str,
    lines: list[int],
    operator: str,
    score: float,
    pid: str = "",
    kind: str = "",
) -> dict[str, object]:
    buggy = score == 0.0
    extra: dict[str, object] = {}
    if lines and not buggy:  # a measured change: its configuration's timings
        extra["results"] = [
            {"config": f"n{len(lines)}", "baseline": 2.0, "candidate": 2.0 / score,
             "speedup": score, "unit": "us", "baseline_n": 5, "note": word},
        ]  # fmt: skip
    if kind == "control":
        extra["tags"] = ["control"]
    elif kind and pid:
        extra["measured_against"] = kind  # parent or reference
    return experiment_fields(
        **extra,
        id=f"6ac{n:04x}000000000",
        pid=pid,
        change_summary=f"{word.capitalize()} the {other} loop, try {n}",
        detailed_description=(
            f"**Approach**: {word} then {other}\n\n**Key insight**: {other} helps the {word}"
        ),
        operator_sig=operator,
        score=score,
        is_buggy=buggy,
        error_message=f"{word} crash" if buggy else "",
        code_change=_diff(lines) if lines else "",
    )


def _quietly(call, *args, **kwargs):  # type: ignore[no-untyped-def]
    """``call(...)`` with kexp's warnings silenced (a near-duplicate change, a parent
    not measured against: errors in this suite, expected here)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return call(*args, **kwargs)


def _answer(command: list[str], root: Path) -> tuple[int, str, str]:
    """What ``kexp COMMAND`` answers in ``root``: exit status, stdout and stderr, with
    the store's absolute path (in the messages of errors: "no experiment with id X in
    ROOT/experiments") written ``<root>``."""
    result = run_kexp(*command, "--no-pager", cwd=root)
    return tuple(  # type: ignore[return-value]
        part.replace(str(root), "<root>") if isinstance(part, str) else part
        for part in (result.returncode, result.stdout, result.stderr)
    )


class SameAnswersWhateverTheHistory(RuleBasedStateMachine):
    """A store worked on step by step; every read answers as a cache made at once."""

    thorough = False  # a few more reads after every step (the slow variant)

    def __init__(self) -> None:
        super().__init__()
        self.counter = itertools.count()
        self.made: list[str] = []  # ids created here or by the other agent, in order

    @initialize()
    def make_repositories(self) -> None:
        self.folder = tempfile.TemporaryDirectory(prefix="kexp-history-model-")
        top = Path(self.folder.name)
        self.root = init_repo(top / "repo")
        (self.root / "experiments").mkdir()
        self.remote = top / "remote.git"
        git(top, "init", "-q", "--bare", "-b", "main", str(self.remote))
        git(self.root, "remote", "add", "origin", str(self.remote))
        git(self.root, "push", "-q", "origin", "main")
        self.first = git(self.root, "rev-parse", "HEAD")  # the initial kernel, no store
        self.other = top / "other"
        git(top, "clone", "-q", str(self.remote), str(self.other))
        git(self.other, "config", "user.name", "Other Agent")
        git(self.other, "config", "user.email", "other@example.com")
        git(self.other, "config", "commit.gpgsign", "false")
        (self.other / "experiments").mkdir()
        self.diff_file = top / "query.diff"
        self.diff_file.write_text(_diff([3, 6, 1]))
        self.store = Store(self.root)

    def teardown(self) -> None:
        if hasattr(self, "folder"):
            self.folder.cleanup()

    # --- what users do ------------------------------------------------------------------

    def _some_path(self, index: int) -> Path | None:
        paths = self.store.paths()
        return paths[index % len(paths)] if paths else None

    @rule(
        word=st.sampled_from(WORDS),
        other=st.sampled_from(WORDS),
        lines=st.lists(st.integers(0, len(LINES) - 1), max_size=4),
        operator=st.sampled_from(OPERATORS),
        score=st.sampled_from(SCORES),
        parent=st.none() | st.integers(0, 50),
        kind=st.sampled_from(["", "control", "parent", "reference"]),
    )
    def create(
        self,
        word: str,
        other: str,
        lines: list[int],
        operator: str,
        score: float,
        parent: int | None,
        kind: str,
    ) -> None:
        pid = ""
        if parent is not None and (path := self._some_path(parent)) is not None:
            pid = path.name[:16]
        n = next(self.counter)
        exp = _quietly(
            self.store.create_experiment,
            **_fields(n, word, other, lines, operator, score, pid, kind),
        )
        self.made.append(exp.id)

    @rule(index=st.integers(0, 50), score=st.sampled_from(SCORES[1:]))
    def correct_score(self, index: int, score: float) -> None:
        path = self._some_path(index)
        if path is not None:
            exp_id = path.name[:16]
            with contextlib.suppress(KexpError):  # an invalid file, a duplicate id
                if not self.store.get_experiment(exp_id).is_buggy:
                    _quietly(self.store.update_experiment, exp_id, score=score)

    @rule(index=st.integers(0, 50), word=st.sampled_from(WORDS))
    def correct_summary(self, index: int, word: str) -> None:
        path = self._some_path(index)
        if path is not None:
            exp_id = path.name[:16]
            with contextlib.suppress(KexpError):
                _quietly(self.store.update_experiment, exp_id, change_summary=f"Retry the {word}")

    @rule(index=st.integers(0, 50), word=st.sampled_from(WORDS))
    def edit_in_place(self, index: int, word: str) -> None:
        path = self._some_path(index)
        if path is not None:
            edit_in_place(
                path, lambda text: text.replace("**Key insight**: ", f"**Key insight**: {word} ", 1)
            )

    @rule(index=st.integers(0, 50), score=st.sampled_from(("1.01", "1.08", "0.95")))
    def edit_score_same_size(self, index: int, score: str) -> None:
        """An edit in place that keeps the file's size: the score's digits."""
        path = self._some_path(index)
        if path is not None:
            edit_in_place(
                path,
                lambda text: re.sub(
                    r"^score: [01]\.\d\d$", f"score: {score}", text, count=1, flags=re.MULTILINE
                ),
            )

    @rule()
    def time_passes(self) -> None:
        """The user comes back later: every file is past the racy window, so the reads
        after it keep, then take, the answers of an unchanged store
        (:mod:`kexp.storage.answers`), which a fresh copy works out."""
        past_racy_window()

    @rule()
    def discard_edits(self) -> None:
        """``git checkout HEAD -- experiments``: committed files back as committed (a
        content the cache saw before comes back)."""
        if git(self.root, "ls-files", "experiments"):
            git(self.root, "checkout", "-q", "HEAD", "--", "experiments")

    @rule(index=st.integers(0, 50))
    def delete(self, index: int) -> None:
        path = self._some_path(index)
        if path is not None:
            with contextlib.suppress(KexpError):
                _quietly(self.store.delete_experiment, path.name[:16], force=True)

    @rule(index=st.integers(0, 50))
    def make_invalid(self, index: int) -> None:
        """A file whose front matter no longer parses (a bad merge, a typo)."""
        path = self._some_path(index)
        if path is not None:
            edit_in_place(path, lambda text: text.replace("\nstatus: ", "\nstatus: [", 1))

    @rule(index=st.integers(0, 50))
    def duplicate(self, index: int) -> None:
        """The same experiment in a second folder (what a merge of two layouts leaves)."""
        path = self._some_path(index)
        if path is not None:
            copy = self.root / "experiments" / "copies" / path.name
            if copy != path:
                copy.parent.mkdir(exist_ok=True)
                shutil.copy2(path, copy)

    @rule()
    def stash_and_back(self) -> None:
        """``git stash`` then ``git stash pop``: the edits gone for a read, then back."""
        if git(self.root, "status", "--porcelain", "--untracked-files=no", "experiments"):
            git(self.root, "stash", "-q")
            self.a_cache_made_at_once_answers_the_same()
            git(self.root, "stash", "pop", "-q")

    @rule(
        word=st.sampled_from(WORDS),
        lines=st.lists(st.integers(0, len(LINES) - 1), min_size=1, max_size=4),
        operator=st.sampled_from(OPERATORS),
    )
    def create_with_no_cache(self, word: str, lines: list[int], operator: str) -> None:
        """``.kexp/`` gone (``git clean -fdx``, a fresh clone), then a create: a write,
        not a read, starts the cache again (its docs keep no words git can give back)."""
        shutil.rmtree(self.root / ".kexp", ignore_errors=True)
        self.create(word, "fresh", lines, operator, 1.01, None, "")

    @rule(push=st.booleans())
    def commit(self, push: bool) -> None:
        git(self.root, "add", "-A", "experiments")
        if git(self.root, "status", "--porcelain", "--", "experiments"):
            git(self.root, "commit", "-q", "-m", "experiments")
        if push:
            git(self.root, "push", "-q", "origin", "main")

    @rule(
        word=st.sampled_from(WORDS),
        lines=st.lists(st.integers(0, len(LINES) - 1), max_size=4),
        score=st.sampled_from(SCORES),
    )
    def other_agent_pushes(self, word: str, lines: list[int], score: float) -> None:
        n = next(self.counter)
        exp = _quietly(
            Store(self.other).create_experiment,
            **_fields(n, word, "shared", lines, OPERATORS[n % 2], score),
        )
        self.made.append(exp.id)
        git(self.other, "add", "-A", "experiments")
        git(self.other, "commit", "-q", "-m", "another agent's experiment")
        git(self.other, "push", "-q", "-f", "origin", "HEAD:agent-b")

    @rule(index=st.integers(0, 50), score=st.sampled_from(SCORES[1:]))
    def other_agent_corrects(self, index: int, score: float) -> None:
        """The other agent merges what was pushed to main and corrects one of those
        experiments on its branch: two versions of it, on two refs."""
        git(self.other, "fetch", "-q", "origin")
        merged = subprocess.run(
            ["git", "merge", "-q", "--no-edit", "origin/main"],
            cwd=self.other,
            check=False,
            capture_output=True,
        )
        if merged.returncode:  # both corrected one experiment: this agent gives way
            git(self.other, "merge", "--abort")
            git(self.other, "reset", "-q", "--hard", "origin/main")
        other = Store(self.other)
        paths = other.paths()
        if not paths:
            return
        exp_id = paths[index % len(paths)].name[:16]
        with contextlib.suppress(KexpError):  # an invalid file, a duplicate id
            if not other.get_experiment(exp_id).is_buggy:
                _quietly(other.update_experiment, exp_id, score=score)
        git(self.other, "add", "-A", "experiments")
        if git(self.other, "status", "--porcelain", "--", "experiments"):
            git(self.other, "commit", "-q", "-m", "another agent's correction")
            git(self.other, "push", "-q", "-f", "origin", "HEAD:agent-b")

    @rule()
    def fetch(self) -> None:
        git(self.root, "fetch", "-q", "origin")

    # --- what every read answers --------------------------------------------------------

    def _commands(self) -> list[list[str]]:
        word = WORDS[len(self.made) % len(WORDS)]
        commands = [
            ["top"],
            ["top", "--by", "score", "--json", "--full"],
            ["list", "--json", "--full"],
            ["tree"],
            ["tree", "--json"],
            ["lessons", "--json"],
            ["stats"],
            ["stats", "--json"],
            ["context", "--operator", "attn", "--text", f"{word} loop"],
            ["context", "--operator", "gemm", "--text", "tile shuffle", "--json"],
            ["similar", "--text", f"{word} loop", "--json"],
            ["similar", "--text", "unroll prefetch"],
            ["similar", "--diff", str(self.diff_file), "--json"],
            ["similar", "--diff", str(self.diff_file), "--operator", "gemm"],
            ["context", "--operator", "attn", "--diff", str(self.diff_file), "--json"],
            ["validate", "--format", "json"],
            ["export", "--format", "jsonl"],
        ]
        for exp_id in dict.fromkeys(self.made[:1] + self.made[-2:]):
            commands += [["show", exp_id, "--json", "--full"], ["similar", exp_id, "--json"]]
        everywhere = [[*command, "--all-refs"] for command in commands if command[0] != "export"]
        # --refs PATTERN: origin/main (pushed at the start), origin/agent-b (once fetched:
        # until then a pattern naming it matches nothing, and warns), main, repeated.
        some_refs = [
            ["top", "--refs", "origin/*"],
            ["list", "--json", "--full", "--refs", "refs/remotes/origin/*"],
            ["stats", "--json", "--refs", "origin/agent-*"],
            ["context", "--operator", "attn", "--text", f"{word} loop", "--refs", "origin/*"],
            ["similar", "--text", f"{word} loop", "--refs", "main", "--refs", "origin/agent-*"],
        ]
        # kexp review: the working tree, or HEAD (read through the cache when the working
        # tree holds its files), against the merge base with a ref or the first commit.
        reviews = [["review", "origin/main"], ["review", self.first, "HEAD"]]
        if self.thorough:
            some_refs += [["top", "--by", "score", "--json", "--refs", "origin/agent-*"]]
            some_refs += [["show", i, "--json", "--refs", "origin/*"] for i in self.made[-1:]]
            # and the other agent's branch against main (unknown until fetched)
            reviews += [["review", self.first], ["review", "main", "origin/agent-b", "--json"]]
        # kexp log (git's history of a file) and a read at a revision take no --all-refs.
        at_head = [["top", "--rev", "HEAD", "--json"]]
        if self.made:
            at_head.append(["log", self.made[0], "--json"])
        return commands + everywhere + some_refs + reviews + at_head

    @invariant()
    def a_cache_made_at_once_answers_the_same(self) -> None:
        if not hasattr(self, "store"):
            return
        fresh = Path(self.folder.name, "fresh")
        shutil.rmtree(fresh, ignore_errors=True)
        shutil.copytree(self.root, fresh, symlinks=True, ignore=shutil.ignore_patterns(".kexp"))
        for command in self._commands():
            grown = _answer(command, self.root)
            made = _answer(command, fresh)
            assert made == grown, command
        # The report (its pages reused while unchanged: the grown one's folder is kept
        # from step to step) is the same files, but for the time it was made.
        grown_pages = Path(self.folder.name, "report-grown")
        made_pages = Path(self.folder.name, "report-fresh")
        shutil.rmtree(made_pages, ignore_errors=True)
        for root, pages in ((self.root, grown_pages), (fresh, made_pages)):
            assert run_kexp("report", "-o", str(pages), cwd=root).returncode == 0
        made = _pages(made_pages)
        assert "index.html" in made
        assert made == _pages(grown_pages)
        # The Parquet export (the grown one replacing the last step's) holds the same
        # rows, read back by DuckDB: the files' bytes may differ, their content not.
        grown_tables = Path(self.folder.name, "parquet-grown")
        made_tables = Path(self.folder.name, "parquet-fresh")
        shutil.rmtree(made_tables, ignore_errors=True)
        exports = [
            _answer(["export", "--format", "parquet", "-o", str(tables)], root)
            for root, tables in ((self.root, grown_tables), (fresh, made_tables))
        ]
        assert exports[0][0] == 0, exports[0]
        assert exports[1] == tuple(
            part.replace(str(grown_tables), str(made_tables)) if isinstance(part, str) else part
            for part in exports[0]
        )
        assert _tables(made_tables) == _tables(grown_tables)


_GENERATED = re.compile(rb"generated \d{4}-\d\d-\d\d \d\d:\d\d UTC")


def _pages(folder: Path) -> dict[str, bytes]:
    """Every file of a report folder (relative path → bytes, the time it was made
    written ``<time>``) but the report's own record of the pages it made (a hidden
    file, which pages it may reuse: a cache, history by design)."""
    return {
        str(path.relative_to(folder)): _GENERATED.sub(b"generated <time>", path.read_bytes())
        for path in sorted(folder.rglob("*"))
        if path.is_file() and not path.name.startswith(".")
    }


def _tables(folder: Path) -> dict[str, tuple[list[tuple[str, str]], list[tuple[object, ...]]]]:
    """Each table of a Parquet export as DuckDB reads it: its columns (name, type) and
    its rows, every column ordering them (an id may be in two files)."""
    tables = {}
    with duckdb.connect() as connection:
        for table in ("experiments", "results"):
            rows = connection.sql(
                f"SELECT * FROM read_parquet('{folder}/{table}/**/*.parquet', "
                "hive_partitioning=true) ORDER BY ALL"
            )
            columns = [
                (name, str(kind)) for name, kind in zip(rows.columns, rows.types, strict=True)
            ]
            tables[table] = (columns, rows.fetchall())
    return tables


class SameAnswersWhateverTheHistoryThoroughly(SameAnswersWhateverTheHistory):
    thorough = True


def _run(examples: int, steps: int, *, thorough: bool = False) -> None:
    machine = SameAnswersWhateverTheHistoryThoroughly if thorough else SameAnswersWhateverTheHistory
    test = machine.TestCase
    test.settings = settings(
        max_examples=examples,
        stateful_step_count=steps,
        deadline=None,
        suppress_health_check=[HealthCheck.too_slow],
    )
    test("runTest").runTest()


def test_same_answers_whatever_the_history_fast() -> None:
    """The model, briefly (about 15 s: each step runs some 60 commands twice)."""
    _run(examples=4, steps=6)


@pytest.mark.slow
def test_same_answers_whatever_the_history_slow() -> None:
    """The model at length, thoroughly (``pytest -m slow``; about two minutes)."""
    _run(examples=8, steps=15, thorough=True)


# --- what the model found, at a scale it does not reach -------------------------------


def test_a_correction_leaves_similar_text_as_a_cache_made_at_once_answers(
    repo: Path, tmp_path: Path
) -> None:
    """201 experiments equally relevant to 'tile' (one more than the candidates); the
    oldest one's score corrected after a search (the score is no word of the index).
    A cache made at once shows it first (oldest first among equals); the cache that
    saw the correction leaves it out of the candidates, and the answer."""
    store = Store(repo)
    for n in range(201):
        _quietly(
            store.create_experiment,
            **experiment_fields(
                id=f"6ac{n:04x}000000000", change_summary=f"Tile the loop, try {n}"
            ),
        )
    assert "try 0\n" in run_kexp("similar", "--text", "tile", cwd=repo).stdout
    store.update_experiment("6ac0000000000000", score=1.05)

    fresh = tmp_path / "fresh"
    shutil.copytree(repo, fresh, ignore=shutil.ignore_patterns(".kexp"))
    made_at_once = run_kexp("similar", "--text", "tile", cwd=fresh).stdout
    assert "try 0\n" in made_at_once
    assert run_kexp("similar", "--text", "tile", cwd=repo).stdout == made_at_once


# Defect: kexp report reused a stale page of an experiment held by two files (a copy in
# a second folder): the pages' keys were kept by id, so one file's key stood for both.
def test_a_report_over_an_earlier_one_shows_an_edit_of_an_id_held_twice(
    repo: Path, tmp_path: Path
) -> None:
    """One experiment in two files (a copy in a second folder), a report, then the
    first file's key insight edited in place: a report written over the first one shows
    the edit on the experiment's page, as a report made at once does (it reused the
    page: the copy's unchanged key stood for both files)."""
    store = Store(repo)
    store.create_experiment(**experiment_fields(id="6ac0000000000000"))
    (path,) = store.paths()
    copy = repo / "experiments" / "copies" / path.name
    copy.parent.mkdir()
    shutil.copy2(path, copy)
    past_racy_window()  # both files keyed in the first report: its pages may be reused
    assert run_kexp("report", "-o", str(tmp_path / "grown"), cwd=repo).returncode == 0
    edit_in_place(path, lambda text: text.replace("insight**: ", "insight**: tiled ", 1))

    assert run_kexp("report", "-o", str(tmp_path / "grown"), cwd=repo).returncode == 0
    assert run_kexp("report", "-o", str(tmp_path / "fresh"), cwd=repo).returncode == 0
    made_at_once = _pages(tmp_path / "fresh")
    assert b"tiled unrolling helps" in made_at_once["e/000.html"]
    assert _pages(tmp_path / "grown") == made_at_once
