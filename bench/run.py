"""kexp's benchmark: kexp against its predecessor's JSON file and SQLite, at size N.

Usage (from the repository root)::

    python bench/run.py --sizes 1000,10000 --repeat 3
    python bench/run.py --sizes 100000 --cases 'python-pass,kexp-*,predecessor,sqlite,show'

For each N it generates (or reuses, from ``--data-dir``) a deterministic store of N
experiments with the same data as a predecessor JSON file and a SQLite table
(``bench/generate.py``), then times every case in a fresh process, ``--repeat`` times,
measuring wall time and the process's peak resident memory (``ru_maxrss`` from
``os.wait4`` on that one process, under a tiny wrapper: see :data:`WRAPPER`). It prints,
per N, a Markdown table of medians with their ratios to the predecessor's load + top 20,
and the issue's targets checked.
Every case's answer is checked too (the same top 20 scores, the filter's match count,
the right experiment shown), so a fast but wrong answer does not pass.
"""

from __future__ import annotations

import argparse
import compileall
import contextlib
import dataclasses
import datetime as dt
import fnmatch
import json
import os
import platform
import re
import shlex
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import generate
from generate import Dataset

BENCH_DIR = Path(__file__).resolve().parent
BASELINES = BENCH_DIR / "baselines.py"
CACHE_DIR = ".kexp"
#: Keep at most this much of a case's stdout (for checks and the JSON report).
MAX_OUTPUT = 1 << 20

# --- running one process -------------------------------------------------------------


@dataclasses.dataclass
class Run:
    """One timed process."""

    seconds: float
    cpu_seconds: float
    max_rss_mib: float
    returncode: int | None
    timed_out: bool
    stdout: str = dataclasses.field(repr=False)
    stderr: str = dataclasses.field(repr=False)

    @property
    def ok(self) -> bool:
        """Whether the process finished in time with exit status 0."""
        return not self.timed_out and self.returncode == 0


def _rss_mib(maxrss: int) -> float:
    # Linux reports KiB, macOS bytes.
    return maxrss / (1024 * 1024) if sys.platform == "darwin" else maxrss / 1024


#: The tiny wrapper every timed command runs under (``python -S -I -c WRAPPER REPORT
#: CMD...``): it forks, execs the command, reaps it with ``os.wait4`` and writes the
#: command's wall time, CPU time (user + system), peak RSS and exit status to REPORT.
#:
#: Why a wrapper: Linux carries a process's peak RSS across ``exec`` from the memory it
#: had before, and ``subprocess`` starts children with ``vfork``, which lends them the
#: parent's memory, so a child started straight from this (larger) process would report
#: at least this process's peak. The wrapper is a bare interpreter (about 9 MiB, less
#: than ``python -c pass``) and uses a real ``fork``, so the peak reported is the
#: command's own (for commands whose peak is above the wrapper's). Its own start-up is
#: not timed.
WRAPPER = """\
import os, sys, time
report, argv = sys.argv[1], sys.argv[2:]
start = time.perf_counter()
pid = os.fork()
if pid == 0:
    try:
        os.execvp(argv[0], argv)
    except OSError as exc:
        os.write(2, f"cannot run {argv[0]}: {exc}\\n".encode())
    os._exit(127)
_, status, usage = os.wait4(pid, 0)
elapsed = time.perf_counter() - start
with open(report, "w") as handle:
    cpu = usage.ru_utime + usage.ru_stime
    code = os.waitstatus_to_exitcode(status)
    handle.write(f"{elapsed!r} {cpu!r} {usage.ru_maxrss} {code}\\n")
"""


def measure(argv: Sequence[str], *, cwd: Path, env: dict[str, str], timeout: float) -> Run:
    """Run ``argv`` once under :data:`WRAPPER`: its wall time, peak RSS and output.

    A command still running after ``timeout`` seconds is killed with its process group
    and reported as timed out.
    """
    with tempfile.TemporaryDirectory(prefix="kexp-bench-") as scratch:
        report = Path(scratch, "report")
        out_path, err_path = Path(scratch, "stdout"), Path(scratch, "stderr")
        with out_path.open("wb") as out, err_path.open("wb") as err:
            started = time.perf_counter()
            process = subprocess.Popen(
                [sys.executable, "-S", "-I", "-c", WRAPPER, str(report), *argv],
                cwd=cwd,
                env=env,
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=err,
                start_new_session=True,
            )
            try:
                process.wait(timeout)
                timed_out = False
            except subprocess.TimeoutExpired:
                timed_out = True
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(process.pid, signal.SIGKILL)
                process.wait()
            wall = time.perf_counter() - started
        stdout = out_path.read_bytes()[:MAX_OUTPUT].decode("utf-8", "replace")
        stderr = err_path.read_bytes()[:MAX_OUTPUT].decode("utf-8", "replace")
        if timed_out or not report.is_file():
            if timed_out:
                return Run(wall, 0.0, 0.0, None, True, stdout, stderr)
            failure = f"\nbench wrapper failed (exit {process.returncode})"
            return Run(wall, 0.0, 0.0, process.returncode, False, stdout, stderr + failure)
        seconds, cpu, maxrss, status = report.read_text(encoding="utf-8").split()
        return Run(
            float(seconds), float(cpu), _rss_mib(int(maxrss)), int(status), False, stdout, stderr
        )


# --- the cases -------------------------------------------------------------------------


@dataclasses.dataclass
class Workspace:
    """Writable copies of a data set for the write cases (the data set itself is only
    read: other benchmark runs may be reading it).

    ``store`` is a copy of the store (its git repository too), ``pr`` a second working
    tree of it on the branch ``bench-pr``, which adds 10 experiments to ``main``;
    ``empty`` an empty store each import starts from; ``json_copy`` a copy of the
    predecessor's file, which its write baselines rewrite; ``legacy`` 5,000 of the
    predecessor's records, for imports; ``diff`` a unified diff for ``kexp add``."""

    folder: Path
    store: Path
    pr: Path
    empty: Path
    json_copy: Path | None  # None: the data set has no predecessor's file
    legacy: Path | None
    diff: Path
    base_commit: str
    parent: str
    added: list[str]
    state: dict[str, str] = dataclasses.field(default_factory=dict)


@dataclasses.dataclass
class Context:
    """What a case needs to build its command and check its answer."""

    dataset: Dataset
    kexp: list[str]
    env: dict[str, str]
    workspace: Workspace | None = None
    #: What the contexts of the builds compared in one run (``--against``) share: the
    #: writable copies, made once (``dataclasses.replace`` keeps this dict).
    shared: dict[str, Workspace] = dataclasses.field(default_factory=dict)

    @property
    def root(self) -> str:
        """The store root, as given to ``kexp --root``."""
        return str(self.dataset.store)

    def kexp_args(self, *args: str) -> list[str]:
        """A ``kexp`` command line on this data set's store."""
        return [*self.kexp, "--root", self.root, *args]

    def work(self) -> Workspace:
        """The writable copies (made on first use: a minute at N = 100,000; copies made
        for another build's context are shared, their caches warmed for this build)."""
        if self.workspace is None:
            made = self.shared.get("workspace")
            if made is None:
                made = self.shared["workspace"] = make_workspace(self)
            else:
                warm_workspace(self, made.store, made.pr)
            self.workspace = made
        return self.workspace


Check = Callable[[Context, Run], str]


def _scores_from_pairs(stdout: str) -> list[str]:
    """Scores from lines of ``<id> <score> ...``."""
    return [line.split()[1] for line in stdout.splitlines() if len(line.split()) >= 2]


def _scores_from_table(stdout: str) -> list[str]:
    """Scores from ``kexp top``'s table (``# ID SCORE ...``), or its JSON with ``--json``."""
    scores: list[str] = []
    for line in stdout.splitlines():
        cells = line.split()
        if len(cells) >= 3 and cells[0].isdigit():
            try:
                scores.append(f"{float(cells[2]):.4f}")
            except ValueError:
                continue
    return scores


def _compare_top(expected: list[str], found: list[str]) -> str:
    if found == expected:
        return "ok"
    if not found:
        return "WRONG: no scores in the output"
    return f"WRONG: top scores {found[:3]}... expected {expected[:3]}..."


def check_top_table(ctx: Context, run: Run) -> str:
    """``kexp top`` printed the expected top 20 scores (its ranking: the steps that
    improved first)."""
    return _compare_top(ctx.dataset.meta["kexp_top_scores"], _scores_from_table(run.stdout))


def check_top_pairs(ctx: Context, run: Run) -> str:
    """A baseline printed the expected top 20 scores (by score)."""
    return _compare_top(ctx.dataset.meta["top_scores"], _scores_from_pairs(run.stdout))


def check_kexp_top_pairs(ctx: Context, run: Run) -> str:
    """kexp's API, or a query of its export, printed ``kexp top``'s top 20 scores."""
    return _compare_top(ctx.dataset.meta["kexp_top_scores"], _scores_from_pairs(run.stdout))


def check_count(ctx: Context, run: Run) -> str:
    """The floor programs saw every file."""
    first = run.stdout.split()
    if first and first[0] == str(ctx.dataset.n):
        return "ok"
    return f"WRONG: saw {first[0] if first else 'no'} files, expected {ctx.dataset.n}"


def check_list(ctx: Context, run: Run) -> str:
    """The filtered list has as many rows as experiments match."""
    rows = 0
    for line in run.stdout.splitlines():
        cells = line.split()
        if cells and len(cells[0]) >= 8 and all(c in "0123456789abcdef" for c in cells[0]):
            rows += 1
    expected = ctx.dataset.meta["filter_count"]
    return "ok" if rows == expected else f"WRONG: {rows} rows, expected {expected}"


def check_stats(ctx: Context, run: Run) -> str:
    """``kexp stats --json`` counted every experiment."""
    try:
        total = json.loads(run.stdout)["total"]
    except (ValueError, KeyError, TypeError):
        return "WRONG: not the stats' JSON"
    return "ok" if total == ctx.dataset.n else f"WRONG: {total} counted, expected {ctx.dataset.n}"


def check_show(ctx: Context, run: Run) -> str:
    """``kexp show PREFIX`` showed the experiment with that id."""
    wanted = ctx.dataset.meta["show_id"]
    first = run.stdout.split()
    return "ok" if first and first[0] == wanted else f"WRONG: expected {wanted} first"


def check_validate(ctx: Context, run: Run) -> str:
    """``kexp validate`` found no error; its summary line is the note."""
    lines = [line for line in run.stderr.splitlines() if "checked" in line]
    return lines[-1].strip() if lines else "ok"


def check_context(ctx: Context, run: Run) -> str:
    """``kexp context`` printed a packet naming the current best."""
    return "ok" if "## Current best" in run.stdout else "WRONG: no current best in the packet"


def check_similar(ctx: Context, run: Run) -> str:
    """``kexp similar`` printed ranked experiments."""
    rows = [line for line in run.stdout.splitlines()[1:] if line.strip()]
    return "ok" if rows else "WRONG: nothing related found"


def check_created(ctx: Context, run: Run) -> str:
    """The create took place; the note is how long ``create_experiment`` took."""
    if "created in" not in run.stdout:
        return "WRONG: nothing created"
    return f"create_experiment {run.stdout.split('created in', 1)[1].split()[0]} s"


def check_created_warned(ctx: Context, run: Run) -> str:
    """:func:`check_created`, and the show experiment was named as tried before."""
    note = check_created(ctx, run)
    if not note.startswith("WRONG") and ctx.dataset.meta["show_id"] not in run.stdout:
        return f"WRONG: the near-duplicate was not reported ({note})"
    if "check alone" in run.stdout:
        note += f"; the check alone {run.stdout.split('check alone', 1)[1].split()[0]} s"
    return note


def check_ok(ctx: Context, run: Run) -> str:
    """Nothing to check beyond the exit status."""
    return "ok"


def check_clean(ctx: Context, run: Run) -> str:
    """``git status --porcelain`` printed nothing (the store is committed)."""
    return "ok" if not run.stdout.strip() else f"WRONG: {len(run.stdout.splitlines())} changes"


#: The plan of the ``context`` and ``similar`` cases.
PLAN = "vectorize the bf16 copy with 128-bit stores"

#: Create one experiment (with the show experiment's diff, variables renamed, when the
#: last argument is "yes"), print how long the create took and what it was warned of,
#: and remove the file again.
_CREATE = """\
import re, sys, time, warnings
import kexp
store = kexp.Store(sys.argv[1])
diff = ""
if sys.argv[3] == "yes":
    original = store.get_experiment(sys.argv[2]).code_change
    diff = re.sub(r"\\bi\\b", "ii", re.sub(r"\\btoken_idx\\b", "tok", original))
exp = kexp.KernelExperiment(
    change_summary="Benchmark create - not kept", score=1.0, status="done",
    operator_sig="bench: create", dtype_sig="bf16", env="bench",
    created_at="2026-11-28T12:00:00Z", code_change=diff,
)
with warnings.catch_warnings(record=True) as caught:
    warnings.simplefilter("always")
    start = time.perf_counter()
    made = store.create_experiment(exp)
    seconds = time.perf_counter() - start
made.path.unlink()
print(f"created in {seconds:.4f} s")
if diff:  # the check alone, as the create ran it (the created file is gone again)
    from kexp.storage.repeats import tried_before
    start = time.perf_counter()
    tried_before(store, diff, exclude=[made.id])
    print(f"check alone {time.perf_counter() - start:.4f} s")
for warning in caught:
    print("warned:", str(warning.message)[:300])
"""

_TOP_API = (
    "import sys, kexp\n"
    "for e in kexp.Store(sys.argv[1]).top_experiments():\n"
    "    print(e.id, f'{e.score:.4f}', e.change_summary)\n"
)


@dataclasses.dataclass(frozen=True)
class Case:
    """One thing to time.

    ``cache``: ``cold`` removes the store's ``.kexp/`` before every timed run; ``warm``
    makes sure an untimed ``kexp top`` has run since the cache was last removed;
    ``retrieval`` also an untimed ``kexp similar`` (which builds the retrieval index);
    ``none`` does nothing.
    """

    name: str
    description: str
    argv: Callable[[Context], list[str] | None]
    check: Check = check_ok
    cache: str = "none"
    #: Untimed, before each run (a write case makes what it then changes).
    prepare: Callable[[Context], None] | None = None
    #: What the page cache is warmed with before each run: "store" (the data set's
    #: experiment files), "work" (the writable copy's), "pr", "json-copy", "none".
    reads: str = "store"


def report_folder(ctx: Context) -> Path:
    """Where the ``report`` case writes (outside the data set, removed after the case)."""
    return Path(tempfile.gettempdir()) / f"kexp-bench-report-{ctx.dataset.folder.name}"


#: The issue's limit on the overview page of ``kexp report`` at N = 100,000 (its time,
#: at most 60 s, is read off the table).
REPORT_OVERVIEW_BYTES = 2_000_000


def check_report(ctx: Context, run: Run) -> str:
    """``kexp report --json`` wrote a page per experiment; its sizes, and the limits."""
    folder = report_folder(ctx)
    try:
        written = json.loads(run.stdout)
        on_disk = disk_usage(folder)
    except ValueError:
        return "WRONG: no JSON from kexp report --json"
    finally:
        shutil.rmtree(folder, ignore_errors=True)
    if written.get("experiments") != ctx.dataset.n:
        return f"WRONG: {written.get('experiments')} experiments, expected {ctx.dataset.n}"
    overview_ok = written["overview_bytes"] <= REPORT_OVERVIEW_BYTES
    store = store_on_disk(ctx.dataset)
    disk = (
        f", {on_disk / 1e6:.0f} MB on disk = {on_disk / store:.2f} × the store's "
        f"{store / 1e6:.0f} MB"
        if on_disk  # (the folder is gone when the other report case was checked first)
        else ""
    )
    return (
        f"{written['pages']:,} pages, {written['total_bytes'] / 1e6:.0f} MB{disk}; overview "
        f"{written['overview_bytes'] / 1e6:.2f} MB (≤ 2 MB: {'PASS' if overview_ok else 'FAIL'}); "
        f"largest operator page {written['largest_operator_bytes'] / 1e6:.1f} MB"
    )


def parquet_folder(ctx: Context) -> Path:
    """Where the Parquet cases export (outside the data set, removed at the end)."""
    return Path(tempfile.gettempdir()) / f"kexp-bench-parquet-{ctx.dataset.folder.name}"


def check_parquet(ctx: Context, run: Run) -> str:
    """The Parquet export holds every experiment; its size and files."""
    folder = parquet_folder(ctx)
    try:
        marker = json.loads((folder / "_kexp_export.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return "WRONG: no kexp export written"
    if marker.get("experiments") != ctx.dataset.n:
        return f"WRONG: {marker.get('experiments')} experiments, expected {ctx.dataset.n}"
    size = sum(p.stat().st_size for p in folder.rglob("*.parquet"))
    return (
        f"{len(marker['files']):,} Parquet files, {size / 1e6:.0f} MB, "
        f"{marker['results']:,} result rows"
    )


def _ensure_parquet(ctx: Context) -> None:
    """The export the DuckDB case reads, made once (untimed) if no case made it."""
    if not (parquet_folder(ctx) / "_kexp_export.json").is_file():
        _run_quietly(
            ctx.kexp_args("export", "--format", "parquet", "-o", str(parquet_folder(ctx))), ctx.env
        )


#: kexp top's question asked of the Parquet export by DuckDB (argv: the export's folder).
_DUCKDB_TOP = (
    "import sys, duckdb\n"
    "rows = duckdb.sql(f\"SELECT id, score FROM read_parquet('{sys.argv[1]}/experiments/**/"
    "*.parquet', hive_partitioning=true) WHERE NOT is_buggy AND status NOT IN ('new', "
    "'running') AND NOT coalesce(list_contains(tags, 'control'), false) ORDER BY "
    "cumulative_score IS NOT NULL DESC, (cumulative_score IS NOT NULL AND outcome = "
    "'improvement') DESC, coalesce(cumulative_score, score) DESC, score DESC, "
    'created_at DESC, id LIMIT 20").fetchall()\n'
    "for exp_id, score in rows:\n"
    "    print(exp_id, f'{score:.4f}')\n"
)


def _ten_files(ctx: Context) -> None:
    """Record 10 experiments in the store's copy (untimed), for the commit case."""
    work = ctx.work()
    made = _run_quietly(
        [sys.executable, "-c", _ADD_TEN, str(work.store), work.base_commit, work.parent],
        ctx.env,
    ).split()
    paths = []
    for exp_id in made:
        found = list((work.store / "experiments").glob(f"*/*/{exp_id[-2:]}/{exp_id}-*.md"))
        paths += [p.relative_to(work.store).as_posix() for p in found]
    work.state["ten"] = "\n".join(paths)


def _commit_ten(ctx: Context) -> list[str]:
    work = ctx.work()
    return [
        "sh", "-c", 'cd "$1" && shift && git add -- "$@" && git -c user.name=bench '
        '-c user.email=b@example.com commit -q -m "10 experiments"', "sh", str(work.store),
        *work.state.get("ten", "").split("\n"),
    ]  # fmt: skip


def check_committed(ctx: Context, run: Run) -> str:
    """The commit holds the 10 files."""
    work = ctx.work()
    shown = _run_quietly(
        ["git", "-C", str(work.store), "show", "--name-only", "--format=", "HEAD"], ctx.env
    ).split()
    wanted = work.state["ten"].split("\n")
    return "ok" if sorted(shown) == sorted(wanted) else f"WRONG: committed {len(shown)} files"


def _clone_target(ctx: Context) -> Path:
    return ctx.work().folder / "clone"


def _remove_clone(ctx: Context) -> None:
    shutil.rmtree(_clone_target(ctx), ignore_errors=True)
    os.sync()


def check_cloned(ctx: Context, run: Run) -> str:
    """The clone's working tree holds every experiment file."""
    target = _clone_target(ctx)
    count = sum(
        1
        for _, _, files in os.walk(target / "experiments")
        for name in files
        if name != "README.md"
    )
    shutil.rmtree(target, ignore_errors=True)
    return "ok" if count == ctx.dataset.n else f"WRONG: {count} files checked out"


def _git_status(ctx: Context) -> list[str] | None:
    if not (ctx.dataset.store / ".git").exists():
        return None
    return ["git", "-C", ctx.root, "status", "--porcelain"]


# --- the write cases ---------------------------------------------------------------------

#: A unified diff of the size the data set's experiments carry (about 1.5 KB).
BENCH_DIFF = """\
diff --git a/csrc/kernels/cache_kernels.cu b/csrc/kernels/cache_kernels.cu
index 1a2b3c4..5d6e7f8 100644
--- a/csrc/kernels/cache_kernels.cu
+++ b/csrc/kernels/cache_kernels.cu
@@ -212,14 +212,18 @@ __global__ void reshape_and_cache_flash_kernel(
   const int64_t slot_idx = slot_mapping[token_idx];
   const int64_t block_idx = slot_idx / block_size;
   const int64_t block_offset = slot_idx % block_size;
-  for (int i = threadIdx.x; i < n; i += blockDim.x) {
-    const int64_t src_key_idx = token_idx * key_stride + i;
-    const int64_t src_value_idx = token_idx * value_stride + i;
+  #pragma unroll 4
+  for (int i = threadIdx.x * 8; i < n; i += blockDim.x * 8) {
+    const int64_t src_key_idx = token_idx * key_stride + i;
+    const int64_t src_value_idx = token_idx * value_stride + i;
+    const uint4 k8 = *reinterpret_cast<const uint4*>(&key[src_key_idx]);
+    const uint4 v8 = *reinterpret_cast<const uint4*>(&value[src_value_idx]);
     const int head_idx = i / head_size;
     const int head_offset = i % head_size;
     const int64_t tgt_key_value_idx = block_idx * block_stride +
                                       block_offset * page_stride +
                                       head_idx * head_stride + head_offset;
-    key_cache[tgt_key_value_idx] = key[src_key_idx];
-    value_cache[tgt_key_value_idx] = value[src_value_idx];
+    *reinterpret_cast<uint4*>(&key_cache[tgt_key_value_idx]) = k8;
+    *reinterpret_cast<uint4*>(&value_cache[tgt_key_value_idx]) = v8;
   }
 }
"""

#: Records a new experiment through the library (argv: store, base commit, then
#: "code_change" and a diff file, or "pid" and an id); prints its id.
_CREATE_API = (
    "import sys, kexp\n"
    "store = kexp.Store(sys.argv[1])\n"
    "extra = {'code_change': open(sys.argv[4]).read()} if sys.argv[3] == 'code_change' "
    "else {'pid': sys.argv[4]}\n"
    "exp = store.create_experiment(change_summary='Bench: vectorized stores - +1.9%',\n"
    "    score=1.019, status='done', operator_sig='csrc/kernels/cache_kernels.cu: bench',\n"
    "    dtype_sig='bf16', env='MI300X, ROCm 7.0.0', base_commit=sys.argv[2], **extra)\n"
    "print(exp.id)\n"
)
#: Updates (argv: store, id) or deletes (argv: store, file holding the id) through the
#: library; prints the id.
_UPDATE_API = (
    "import sys, kexp\n"
    "exp = kexp.Store(sys.argv[1]).update_experiment(sys.argv[2], score=float(sys.argv[3]))\n"
    "print(exp.id, exp.score)\n"
)
_DELETE_API = (
    "import sys, kexp\n"
    "exp_id = open(sys.argv[2]).read().strip()\n"
    "kexp.Store(sys.argv[1]).delete_experiment(exp_id)\n"
    "print(exp_id)\n"
)
#: Adds 10 experiments on the branch bench-pr (argv: working tree, base commit, pid).
_ADD_TEN = (
    "import sys, kexp\n"
    "store = kexp.Store(sys.argv[1])\n"
    "for n in range(10):\n"
    "    e = store.create_experiment(change_summary=f'PR try {n} - +{n}.1%', score=1 + n / 90,\n"
    "        status='done', operator_sig='csrc/kernels/cache_kernels.cu: bench',\n"
    "        dtype_sig='bf16', env='MI300X, ROCm 7.0.0', base_commit=sys.argv[2],\n"
    "        pid=sys.argv[3], detailed_description='**Approach**: bench')\n"
    "    print(e.id)\n"
)
#: A repeat check on a store (argv: store), which builds the retrieval index it asks
#: (as a create's tried-before check does).
_REPEATS = (
    "import sys, kexp\n"
    "from kexp.storage.repeats import find_repeats\n"
    "find_repeats(kexp.Store(sys.argv[1]), '+ a change that was never tried, x = y + 1;')\n"
)
#: The number of predecessor records each import case imports.
IMPORT_RECORDS = 5000


def _run_quietly(argv: Sequence[str], env: dict[str, str], cwd: Path | None = None) -> str:
    found = subprocess.run(
        list(argv), env=env, cwd=cwd, capture_output=True, text=True, check=False
    )
    if found.returncode != 0:
        raise SystemExit(f"run.py: {shlex.join(argv)} failed: {_tail(found.stderr)}")
    return found.stdout


def make_workspace(ctx: Context) -> Workspace:
    """Copy the data set for the write cases (see :class:`Workspace`), with warm caches."""
    dataset = ctx.dataset
    folder = Path(tempfile.mkdtemp(prefix=f"kexp-bench-n{dataset.n}-"))
    _log(f"N={dataset.n:,}: copying the store for the write cases into {folder} ...")
    store = folder / "store"
    _run_quietly(["cp", "-a", str(dataset.store), str(store)], ctx.env)
    shutil.rmtree(store / CACHE_DIR, ignore_errors=True)
    if (store / ".git").exists():  # the copies' inodes and change times are new: the
        # index is refreshed (each file hashed once) as a clone's would be, not by the
        # first timed git command
        subprocess.run(
            ["git", "-C", str(store), "update-index", "-q", "--refresh"],
            env=ctx.env,
            capture_output=True,
            check=False,
        )
    base_commit = "9c1d2e3f4a5b6c7d8e9f0a1b2c3d4e5f6a7b8c9d"
    if dataset.code_repo is not None:
        base_commit = _run_quietly(
            ["git", "-C", str(dataset.code_repo), "rev-parse", "HEAD"], ctx.env
        ).strip()
    parent = str(dataset.meta["show_id"])
    pr = folder / "pr"
    added: list[str] = []
    if (store / ".git").exists():
        _run_quietly(
            ["git", "-C", str(store), "worktree", "add", "-q", "-b", "bench-pr", str(pr), "HEAD"],
            ctx.env,
        )
        added = _run_quietly(
            [sys.executable, "-c", _ADD_TEN, str(pr), base_commit, parent], ctx.env
        ).split()
        identity = ["-c", "user.name=kexp bench", "-c", "user.email=bench@example.com"]
        _run_quietly(["git", "-C", str(pr), "add", "experiments"], ctx.env)
        _run_quietly(
            ["git", "-C", str(pr), *identity, "commit", "-q", "-m", "10 experiments"], ctx.env
        )
    warm_workspace(ctx, store, pr)
    json_copy = legacy = None
    if dataset.json_path.is_file():
        json_copy = folder / "kernel_experiments_db.json"
        shutil.copyfile(dataset.json_path, json_copy)
        with dataset.json_path.open(encoding="utf-8") as handle:
            database = json.load(handle)
        chosen = dict(sorted(database.items())[:IMPORT_RECORDS])
        del database
        legacy = folder / f"legacy-{IMPORT_RECORDS}.json"
        with legacy.open("w", encoding="utf-8") as handle:
            json.dump(chosen, handle, indent=2, sort_keys=True)
    diff = folder / "change.diff"
    diff.write_text(BENCH_DIFF, encoding="utf-8")
    return Workspace(
        folder, store, pr, folder / "empty", json_copy, legacy, diff, base_commit, parent, added
    )


def warm_workspace(ctx: Context, store: Path, pr: Path) -> None:
    """Warm the writable copies' caches for ``ctx``'s build: the write cases measure a
    store in use."""
    for root in (store, pr):
        if root.exists():
            _run_quietly([*ctx.kexp, "--root", str(root), "top"], ctx.env)
    # The repeat check's index (the retrieval index) is built once (the first check after
    # a clone pays it, as the first query pays the cache): before the timed runs.
    _run_quietly([sys.executable, "-c", _REPEATS, str(store)], ctx.env)


#: The refs cases: REFS remote-tracking branches (origin/agent-N), each the store plus
#: REF_UNIQUE experiments of its own (copies of others under new ids): mostly shared.
REFS = 10
REF_UNIQUE = 100


def make_refs(store: Path, env: dict[str, str]) -> None:
    """Make ``refs/remotes/origin/agent-0`` ... in ``store``'s repository (see
    :data:`REFS`), with git's plumbing (a temporary index; the checkout is untouched)."""
    import hashlib

    files = sorted((store / "experiments").rglob("*.md"))
    files = [f for f in files if re.fullmatch(r"[0-9a-f]{16}-.*\.md", f.name)]
    head = _run_quietly(["git", "-C", str(store), "rev-parse", "HEAD"], env).strip()
    identity = {
        "GIT_AUTHOR_NAME": "kexp bench",
        "GIT_AUTHOR_EMAIL": "bench@example.com",
        "GIT_COMMITTER_NAME": "kexp bench",
        "GIT_COMMITTER_EMAIL": "bench@example.com",
    }
    with tempfile.TemporaryDirectory() as scratch:
        for ref in range(REFS):
            index = {**env, **identity, "GIT_INDEX_FILE": str(Path(scratch) / f"index-{ref}")}
            _run_quietly(["git", "-C", str(store), "read-tree", head], index)
            copies, places = [], []
            for source in files[ref * REF_UNIQUE : (ref + 1) * REF_UNIQUE]:
                old = source.name[:16]
                new = hashlib.sha1(f"{old}-{ref}".encode()).hexdigest()[:16]
                text = source.read_bytes().replace(old.encode(), new.encode(), 1)
                copy = Path(scratch) / f"{new}{source.name[16:]}"
                copy.write_bytes(text)
                copies.append(str(copy))
                places.append(f"{source.parent.relative_to(store).as_posix()}/{copy.name}")
            blobs = subprocess.run(
                ["git", "-C", str(store), "hash-object", "-w", "--stdin-paths"],
                input="\n".join(copies) + "\n",
                text=True,
                env=env,
                check=True,
                capture_output=True,
            ).stdout.split()
            lines = "".join(f"100644 {b}\t{p}\n" for b, p in zip(blobs, places, strict=True))
            subprocess.run(
                ["git", "-C", str(store), "update-index", "--index-info"],
                input=lines,
                text=True,
                env=index,
                check=True,
            )
            tree = _run_quietly(["git", "-C", str(store), "write-tree"], index).strip()
            commit = _run_quietly(
                ["git", "-C", str(store), "commit-tree", tree, "-p", head, "-m", f"agent {ref}"],
                index,
            ).strip()
            _run_quietly(
                ["git", "-C", str(store), "update-ref", f"refs/remotes/origin/agent-{ref}", commit],
                env,
            )


def _refs_warm(ctx: Context) -> None:
    """The blob cache of the refs cases filled once (untimed)."""
    _ensure_refs(ctx)
    work = ctx.work()
    if _held(ctx, "refs-warm") not in work.state:
        _run_quietly(_work_kexp(ctx, "top", "--refs", "origin/*"), ctx.env)
        work.state[_held(ctx, "refs-warm")] = "yes"


def _ensure_refs(ctx: Context) -> None:
    """The refs of the refs cases, made on first use (:func:`make_refs`)."""
    work = ctx.work()
    if work.state.get("refs") != "made" and (work.store / ".git").exists():
        make_refs(work.store, ctx.env)
        work.state["refs"] = "made"


def _refs_cold(ctx: Context) -> None:
    """No cache at all: the working tree read, every ref's trees and distinct blobs
    read and parsed again."""
    _ensure_refs(ctx)
    _remove_work_cache(ctx)


def _first_write(ctx: Context) -> None:
    """The writable copy as after a clone: no ``.kexp/``."""
    _remove_work_cache(ctx)


def _first_add_done(ctx: Context) -> None:
    """The writable copy as after a clone and its first ``kexp add`` with a diff (which
    made the docs without the words git can give back)."""
    _remove_work_cache(ctx)
    _run_quietly(_add_with_diff(ctx), ctx.env)


def _remove_work_cache(ctx: Context) -> None:
    """Remove the writable copy's ``.kexp/``, and forget what its state said the cache
    held (the refs' blobs read, the retrieval index built), for every build."""
    work = ctx.work()
    shutil.rmtree(work.store / CACHE_DIR, ignore_errors=True)
    work.state["removals"] = str(int(work.state.get("removals", "0")) + 1)
    for name in [name for name in work.state if name.startswith(("refs-warm:", "consulted:"))]:
        del work.state[name]


def _held(ctx: Context, what: str) -> str:
    """The name, in the writable copy's state, of what its cache holds for ``ctx``'s
    build (each build has its own cache file)."""
    return f"{what}:{ctx.env.get('PYTHONPATH', '')}"


def check_refs_top(ctx: Context, run: Run) -> str:
    """``kexp top --refs`` listed 20 experiments, each with where it was found."""
    rows = [line for line in run.stdout.splitlines()[1:] if line.strip()]
    named = [line for line in rows if "agent-" in line or " local" in line]
    if len(rows) != 20 or len(named) != 20:
        return f"WRONG: {len(rows)} rows, {len(named)} with a ref"
    return "ok"


#: The sizes on disk (allocated blocks) of a store's ``.kexp/`` and ``experiments/``:
#: of ``.kexp/``, this kexp's own cache file (with its journal) and what is not a cache
#: file, so that another build's cache beside it (``--against``: one workspace for
#: both) is not counted.
_SIZES = (
    "import os, sys\n"
    "from kexp import Store\n"
    "try:\n"
    "    from kexp.storage.cachefile import file_name\n"
    "except ImportError:  # a build before kexp.storage.cachefile (--against)\n"
    "    from kexp.storage.cache import file_name\n"
    "own = file_name(Store(sys.argv[1]).settings)\n"
    "def size(top, counted=lambda name: True):\n"
    "    total = 0\n"
    "    for folder, _, names in os.walk(top):\n"
    "        for name in filter(counted, names):\n"
    "            total += os.lstat(os.path.join(folder, name)).st_blocks * 512\n"
    "    return total\n"
    "mine = lambda name: name.startswith(own) or not name.startswith('cache-')\n"
    "print(size(os.path.join(sys.argv[1], '.kexp'), mine), size(os.path.join(sys.argv[1], "
    "'experiments')))\n"
)


def check_sizes(ctx: Context, run: Run) -> str:
    """The cache's size and the store's, on disk, after every query filled the cache."""
    try:
        cache, store = (int(part) for part in run.stdout.split()[:2])
    except ValueError:
        return "WRONG: no sizes printed"
    return (
        f"`.kexp/` {cache / 2**20:.1f} MiB, experiments/ {store / 2**20:.1f} MiB: "
        f"ratio {cache / store:.3f}"
    )


def remove_workspace(ctx: Context) -> None:
    """Remove the writable copies (those shared with another build's context too)."""
    made = ctx.shared.pop("workspace", None) or ctx.workspace
    if made is not None:
        shutil.rmtree(made.folder, ignore_errors=True)
    ctx.workspace = None


def _work_kexp(ctx: Context, *args: str) -> list[str]:
    return [*ctx.kexp, "--root", str(ctx.work().store), *args]


def _add_with_diff(ctx: Context) -> list[str]:
    work = ctx.work()
    return _work_kexp(
        ctx,
        "add",
        "--summary",
        "Bench: vectorized stores - +1.9%",
        "--score",
        "1.019",
        "--operator",
        "csrc/kernels/cache_kernels.cu: bench",
        "--dtype",
        "bf16",
        "--env",
        "MI300X, ROCm 7.0.0",
        "--base-commit",
        work.base_commit,
        "--diff-file",
        str(work.diff),
        "--json",
    )


def _create_with(what: str) -> Callable[[Context], list[str]]:
    def argv(ctx: Context) -> list[str]:
        work = ctx.work()
        value = str(work.diff) if what == "code_change" else work.parent
        return [sys.executable, "-c", _CREATE_API, str(work.store), work.base_commit, what, value]

    return argv


def _update(ctx: Context) -> list[str]:
    work = ctx.work()
    score = "1.5" if work.state.get("score") != "1.5" else "1.25"
    work.state["score"] = score
    return [sys.executable, "-c", _UPDATE_API, str(work.store), work.parent, score]


def _warm_work(ctx: Context) -> None:
    """The writable copy's caches warm for ``ctx``'s build, warmed again (untimed) when a
    cold case removed them since (``--against``: each build's cold case removes both
    builds' caches): the warm write cases measure a store in use."""
    work = ctx.work()
    removals = work.state.get("removals", "0")
    if work.state.setdefault(_held(ctx, "warmed-after"), "0") != removals:
        warm_workspace(ctx, work.store, work.pr)
        work.state[_held(ctx, "warmed-after")] = removals


def _make_leaf(ctx: Context) -> None:
    """Record an experiment (untimed) for the delete case to delete."""
    _warm_work(ctx)
    work = ctx.work()
    found = _run_quietly(
        [sys.executable, "-c", _CREATE_API, str(work.store), work.base_commit, "pid", work.parent],
        ctx.env,
    ).split()
    (work.folder / "to-delete").write_text(found[-1], encoding="utf-8")


def _context_args(ctx: Context, root: str) -> list[str]:
    """``kexp context`` for the data set's operator, dtype bf16, MI300X and the plan."""
    return [
        *ctx.kexp,
        "--root",
        root,
        "context",
        "--operator",
        ctx.dataset.meta["filter_operator"],
        "--dtype",
        ctx.dataset.meta["filter_dtype"],
        "--env",
        "MI300X",
        "--text",
        PLAN,
    ]


def _record_step(ctx: Context) -> None:
    """Record an experiment in the writable copy (untimed), as an agent does before it
    consults again; the first time (for this build), consult once untimed: the retrieval
    index is then built, as in a store in use."""
    work = ctx.work()
    if _held(ctx, "consulted") not in work.state:
        _run_quietly(_context_args(ctx, str(work.store)), ctx.env)
        work.state[_held(ctx, "consulted")] = "yes"
    _run_quietly(
        [sys.executable, "-c", _CREATE_API, str(work.store), work.base_commit, "pid", work.parent],
        ctx.env,
    )


def _delete(ctx: Context) -> list[str]:
    work = ctx.work()
    return [sys.executable, "-c", _DELETE_API, str(work.store), str(work.folder / "to-delete")]


def _empty_store(ctx: Context) -> None:
    """A new empty store for an import to fill: a new folder each run (deleting the last
    one's 5,000 files would keep the file system busy during the next), and everything
    written so far synced, so that no run pays for the writeback of another."""
    work = ctx.work()
    runs = int(work.state.get("imports", "0")) + 1
    work.state["imports"] = str(runs)
    work.empty = work.folder / f"empty-{runs}"
    (work.empty / "experiments").mkdir(parents=True)
    os.sync()


def _import(*extra: str) -> Callable[[Context], list[str] | None]:
    def argv(ctx: Context) -> list[str] | None:
        work = ctx.work()
        if work.legacy is None:  # a data set without the predecessor's file
            return None
        return [*ctx.kexp, "--root", str(work.empty), "import", str(work.legacy), *extra]

    return argv


def _on_pr(*args: str) -> Callable[[Context], list[str] | None]:
    def argv(ctx: Context) -> list[str] | None:
        work = ctx.work()
        if not work.pr.exists():
            return None
        return [*ctx.kexp, "--root", str(work.pr), *args]

    return argv


def _baseline_write(program: str) -> Callable[[Context], list[str] | None]:
    def argv(ctx: Context) -> list[str] | None:
        copy = ctx.work().json_copy
        return [sys.executable, str(BASELINES), program, str(copy)] if copy else None

    return argv


def check_new_id(ctx: Context, run: Run) -> str:
    """A write printed the id of the experiment it wrote (also as JSON)."""
    found = re.search(r"\b[0-9a-f]{16}\b", run.stdout)
    return "ok" if found else "WRONG: no id printed"


def check_imported(ctx: Context, run: Run) -> str:
    """The import wrote every record."""
    wanted = f"imported {IMPORT_RECORDS},"
    lines = [line for line in (run.stdout + run.stderr).splitlines() if "imported" in line]
    if any(wanted in line for line in lines):
        return f"{IMPORT_RECORDS / run.seconds:,.0f} records/s (first run)"
    return f"WRONG: {lines[-1] if lines else 'no summary'}"


def check_changed(ctx: Context, run: Run) -> str:
    """``validate --changed`` checked the 10 files the branch adds."""
    lines = [line for line in run.stderr.splitlines() if "checked" in line]
    return lines[-1].strip() if lines else "ok"


def check_review(ctx: Context, run: Run) -> str:
    """The review names every experiment the branch adds."""
    work = ctx.work()
    missing = [exp_id for exp_id in work.added if exp_id[:8] not in run.stdout]
    return "ok" if not missing else f"WRONG: {len(missing)} added experiments not named"


CASES: tuple[Case, ...] = (
    Case(
        "python-pass",
        "`python -c pass`: interpreter start-up, the unit of the start-up target",
        lambda c: [sys.executable, "-c", "pass"],
    ),
    Case(
        "python-bare",
        "`python -S -c pass`: start-up without `site` (no .pth files), for reference",
        lambda c: [sys.executable, "-S", "-c", "pass"],
    ),
    Case(
        "python-click",
        '`python -c "import click"`: the unit of the `--help` target',
        lambda c: [sys.executable, "-c", "import click"],
        reads="none",
    ),
    Case("kexp-version", "`kexp --version`", lambda c: [*c.kexp, "--version"]),
    Case("kexp-help", "`kexp --help`", lambda c: [*c.kexp, "--help"]),
    Case(
        "read-all",
        "floor: `os.scandir` walk + read every file's bytes (Python)",
        lambda c: [sys.executable, str(BASELINES), "read-all", c.root],
        check_count,
    ),
    Case(
        "stat-all",
        "floor: `os.scandir` walk + `os.stat` every file (Python)",
        lambda c: [sys.executable, str(BASELINES), "stat-all", c.root],
        check_count,
    ),
    Case("git-status", "`git status --porcelain` of the store", _git_status, check_clean),
    Case(
        "predecessor",
        "predecessor: `json.load` of the one JSON file + objects + top 20",
        lambda c: (
            [sys.executable, str(BASELINES), "predecessor", str(c.dataset.json_path)]
            if c.dataset.json_path.is_file()
            else None
        ),
        check_top_pairs,
    ),
    Case(
        "sqlite",
        "SQLite: connect + `ORDER BY score DESC LIMIT 20` (indexed)",
        lambda c: (
            [sys.executable, str(BASELINES), "sqlite", str(c.dataset.sqlite_path)]
            if c.dataset.sqlite_path.is_file()
            else None
        ),
        check_top_pairs,
    ),
    Case(
        "top-cli-cold",
        "`kexp top`, no cache (`.kexp/` removed before each run)",
        lambda c: c.kexp_args("top"),
        check_top_table,
        "cold",
    ),
    Case(
        "top-api-cold",
        "`kexp.Store(root).top_experiments()` in `python -c`, no cache",
        lambda c: [sys.executable, "-c", _TOP_API, c.root],
        check_kexp_top_pairs,
        "cold",
    ),
    Case(
        "show-cold",
        "`kexp show <8-char prefix>`, no cache",
        lambda c: c.kexp_args("show", c.dataset.meta["show_prefix"]),
        check_show,
        "cold",
    ),
    Case(
        "top-cli-warm",
        "`kexp top`, cache warm (after an untimed `kexp top`)",
        lambda c: c.kexp_args("top"),
        check_top_table,
        "warm",
    ),
    Case(
        "top-api-warm",
        "`kexp.Store(root).top_experiments()`, cache warm",
        lambda c: [sys.executable, "-c", _TOP_API, c.root],
        check_kexp_top_pairs,
        "warm",
    ),
    Case(
        "show",
        "`kexp show <8-char prefix>`, cache warm",
        lambda c: c.kexp_args("show", c.dataset.meta["show_prefix"]),
        check_show,
        "warm",
    ),
    Case(
        "list-filtered",
        "`kexp list --operator reshape_and_cache --dtype bf16`, cache warm",
        lambda c: c.kexp_args(
            "list",
            "--operator",
            c.dataset.meta["filter_operator"],
            "--dtype",
            c.dataset.meta["filter_dtype"],
        ),
        check_list,
        "warm",
    ),
    Case(
        "stats",
        "`kexp stats --json`, cache warm",
        lambda c: c.kexp_args("stats", "--json"),
        check_stats,
        "warm",
    ),
    Case(
        "tree",
        "`kexp tree --operator reshape_and_cache --json`, cache warm",
        lambda c: c.kexp_args("tree", "--operator", c.dataset.meta["filter_operator"], "--json"),
        check_ok,
        "warm",
    ),
    Case(
        "tree-id",
        "`kexp tree <8-char prefix> --json` (one experiment's lineage), cache warm",
        lambda c: c.kexp_args("tree", c.dataset.meta["show_prefix"], "--json"),
        check_ok,
        "warm",
    ),
    Case(
        "lessons",
        "`kexp lessons --json`, cache warm (every lesson's file read)",
        lambda c: c.kexp_args("lessons", "--json"),
        check_ok,
        "warm",
    ),
    Case(
        "validate",
        "`kexp validate` of the whole store, cache warm",
        lambda c: c.kexp_args("validate"),
        check_validate,
        "warm",
    ),
    Case(
        "report",
        "`kexp report -o DIR --json` into a new folder, cache warm",
        lambda c: c.kexp_args("report", "-o", str(report_folder(c)), "--json"),
        check_report,
        "warm",
    ),
    Case(
        "report-again",
        "`kexp report -o DIR --json` over the report of the same store "
        "(unchanged pages reused), cache warm",
        lambda c: c.kexp_args("report", "-o", str(report_folder(c)), "--json"),
        check_report,
        "warm",
    ),
    Case(
        "context",
        "`kexp context --operator reshape_and_cache --dtype bf16 --env MI300X "
        "--text PLAN`, caches warm (retrieval index built)",
        lambda c: _context_args(c, c.root),
        check_context,
        "retrieval",
    ),
    Case(
        "similar",
        "`kexp similar --text PLAN`, caches warm (retrieval index built)",
        lambda c: c.kexp_args("similar", "--text", PLAN),
        check_similar,
        "retrieval",
    ),
    Case(
        "context-after-add",
        "the same `kexp context` in the writable copy just after an "
        "experiment was recorded there (untimed), as an agent consults after each step",
        lambda c: _context_args(c, str(c.work().store)),
        check_context,
        prepare=_record_step,
        reads="work",
    ),
    Case(
        "create-nocheck",
        "`Store.create_experiment` of one experiment without a code change "
        "(no tried-before check), in `python -c`; the file is removed after",
        lambda c: [sys.executable, "-c", _CREATE, c.root, c.dataset.meta["show_id"], "no"],
        check_created,
        "retrieval",
    ),
    Case(
        "create-check",
        "the same create with a code change: the show experiment's diff with "
        "renamed variables (a near-duplicate to find)",
        lambda c: [sys.executable, "-c", _CREATE, c.root, c.dataset.meta["show_id"], "yes"],
        check_created_warned,
        "retrieval",
    ),
    Case(
        "predecessor-create",
        "predecessor's create: `json.load`, add a record, `json.dump` of the whole file",
        _baseline_write("predecessor-create"),
        reads="json-copy",
    ),
    Case(
        "predecessor-update",
        "predecessor's update: load, change a score, dump",
        _baseline_write("predecessor-update"),
        reads="json-copy",
    ),
    Case(
        "predecessor-delete",
        "predecessor's delete: load, remove a record, dump",
        _baseline_write("predecessor-delete"),
        reads="json-copy",
    ),
    Case(
        "write-add-diff",
        "`kexp add` with `--diff-file` (1.5 KB) and `--base-commit`, cache warm",
        _add_with_diff,
        check_new_id,
        prepare=_warm_work,
        reads="work",
    ),
    Case(
        "write-create-code",
        "`Store.create_experiment(code_change=...)` in `python -c`",
        _create_with("code_change"),
        check_new_id,
        prepare=_warm_work,
        reads="work",
    ),
    Case(
        "write-create-pid",
        "`Store.create_experiment(pid=...)` in `python -c`",
        _create_with("pid"),
        check_new_id,
        prepare=_warm_work,
        reads="work",
    ),
    Case(
        "write-update",
        "`Store.update_experiment(id, score=...)` in `python -c`",
        _update,
        check_new_id,
        prepare=_warm_work,
        reads="work",
    ),
    Case(
        "write-delete",
        "`Store.delete_experiment(id)` of a leaf in `python -c` (recorded untimed before each run)",
        _delete,
        check_new_id,
        prepare=_make_leaf,
        reads="work",
    ),
    Case(
        "write-import",
        f"`kexp import` of {IMPORT_RECORDS:,} predecessor records into an "
        "empty store, `--no-check-commits`",
        _import("--no-check-commits"),
        check_imported,
        prepare=_empty_store,
        reads="none",
    ),
    Case(
        "write-import-commits",
        f"`kexp import` of {IMPORT_RECORDS:,} records, checking "
        "every `base_commit` in the code repository",
        _import(),
        check_imported,
        prepare=_empty_store,
        reads="none",
    ),
    Case(
        "pr-validate-changed",
        "`kexp validate --changed main` on a branch adding 10 experiments, cache warm",
        _on_pr("validate", "--changed", "main"),
        check_changed,
        reads="pr",
    ),
    Case(
        "pr-review",
        "`kexp review main` of that branch (its working tree), cache warm",
        _on_pr("review", "main"),
        check_review,
        reads="pr",
    ),
    Case(
        "pr-review-head",
        "`kexp review main HEAD` (the commit, as CI runs it; the working tree holds its files)",
        _on_pr("review", "main", "HEAD"),
        check_review,
        reads="pr",
    ),
    Case(
        "git-commit-10",
        "`git add` + `git commit` of 10 new experiment files in the "
        "store's copy (recorded untimed before each run)",
        lambda c: _commit_ten(c) if (c.work().store / ".git").exists() else None,
        check_committed,
        prepare=_ten_files,
        reads="work",
    ),
    Case(
        "git-clone",
        "`git clone` of the store (local: objects hard-linked; the checkout writes every file)",
        lambda c: (
            ["git", "clone", "-q", c.root, str(_clone_target(c))]
            if (c.dataset.store / ".git").exists()
            else None
        ),
        check_cloned,
        prepare=_remove_clone,
        reads="none",
    ),
    Case(
        "parquet-floor",
        "floor: pyarrow writes export-parquet's partitions (operator × month, zstd) from the "
        "predecessor's JSON, each table from Python lists",
        lambda c: (
            [sys.executable, str(BASELINES), "parquet-floor", str(c.dataset.json_path)]
            if c.dataset.json_path.is_file()
            else None
        ),
        check_count,
        reads="none",
    ),
    Case(
        "export-parquet",
        "`kexp export --format parquet -o DIR`, cache warm",
        lambda c: c.kexp_args("export", "--format", "parquet", "-o", str(parquet_folder(c))),
        check_parquet,
        "warm",
    ),
    Case(
        "duckdb-top",
        "DuckDB: `kexp top`'s top 20 over the Parquet export "
        "(`read_parquet(..., hive_partitioning=true)`, a new process)",
        lambda c: [sys.executable, "-c", _DUCKDB_TOP, str(parquet_folder(c))],
        check_kexp_top_pairs,
        prepare=_ensure_parquet,
        reads="none",
    ),
    Case(
        "first-add",
        "`kexp add` with a diff (the tried-before check) as the first command "
        "after a clone (`.kexp/` removed before each run)",
        _add_with_diff,
        check_new_id,
        prepare=_first_write,
        reads="work",
    ),
    Case(
        "first-similar",
        "`kexp similar --text PLAN` as the first command after a clone "
        "(`.kexp/` removed before each run)",
        lambda c: c.kexp_args("similar", "--text", PLAN),
        check_similar,
        "cold",
    ),
    Case(
        "first-context",
        "`kexp context ... --text PLAN` as the first command after a "
        "clone (`.kexp/` removed before each run)",
        lambda c: _context_args(c, c.root),
        check_context,
        "cold",
    ),
    Case(
        "context-after-first-add",
        "`kexp context ... --text PLAN` in the writable copy "
        "just after the first `kexp add` with a diff after a clone (untimed: `.kexp/` "
        "removed, then the add)",
        lambda c: _context_args(c, str(c.work().store)),
        check_context,
        prepare=_first_add_done,
        reads="work",
    ),
    Case(
        "add-after-first-add",
        "`kexp add` with a diff just after the first one after a "
        "clone (untimed: `.kexp/` removed, then the first add): it posts the docs the first "
        "add made",
        _add_with_diff,
        check_new_id,
        prepare=_first_add_done,
        reads="work",
    ),
    Case(
        "cache-size",
        "the size on disk of `.kexp/` (every cache filled: after `kexp top` "
        "and `kexp similar`) and of `experiments/`",
        lambda c: [sys.executable, "-c", _SIZES, c.root],
        check_sizes,
        "retrieval",
    ),
    Case(
        "top-refs-cold",
        f"`kexp top --refs 'origin/*'`: the working tree and {REFS} refs "
        f"of N experiments ({REF_UNIQUE} of each ref's own), no cache at all",
        lambda c: _work_kexp(c, "top", "--refs", "origin/*"),
        check_refs_top,
        prepare=_refs_cold,
        reads="work",
    ),
    Case(
        "top-refs-warm",
        f"`kexp top --refs 'origin/*'` over the same {REFS} refs, cache warm",
        lambda c: _work_kexp(c, "top", "--refs", "origin/*"),
        check_refs_top,
        prepare=_refs_warm,
        reads="work",
    ),
)
CASE_NAMES = tuple(case.name for case in CASES)


def select_cases(patterns: str | None) -> list[Case]:
    """The cases named by a comma-separated list of names or shell patterns, in order."""
    if not patterns:
        return list(CASES)
    wanted = [p.strip() for p in patterns.split(",") if p.strip()]
    for pattern in wanted:
        if not any(fnmatch.fnmatchcase(name, pattern) for name in CASE_NAMES):
            raise SystemExit(f"run.py: no case matches {pattern!r}; cases: {', '.join(CASE_NAMES)}")
    return [c for c in CASES if any(fnmatch.fnmatchcase(c.name, p) for p in wanted)]


# --- running the cases ---------------------------------------------------------------------


@dataclasses.dataclass
class CaseResult:
    """All runs of one case at one N."""

    case: Case
    runs: list[Run] = dataclasses.field(default_factory=list)
    note: str = ""
    skipped: str = ""

    @property
    def timed_out(self) -> bool:
        """Whether a run (or the warm-up) ran past the timeout."""
        return any(run.timed_out for run in self.runs)

    @property
    def failed(self) -> bool:
        """Whether a run exited with a non-zero status."""
        return any(not run.timed_out and run.returncode != 0 for run in self.runs)

    @property
    def good(self) -> list[Run]:
        """Runs that finished in time with status 0."""
        return [run for run in self.runs if run.ok]

    @property
    def median(self) -> float | None:
        """Median wall time of the good runs (None when there are none)."""
        good = self.good
        return statistics.median(r.seconds for r in good) if good and not self.failed else None

    @property
    def cpu_median(self) -> float | None:
        """Median CPU time (user + system) of the good runs."""
        good = self.good
        return statistics.median(r.cpu_seconds for r in good) if good and not self.failed else None

    @property
    def peak_rss(self) -> float | None:
        """Largest peak RSS (MiB) over the good runs."""
        good = self.good
        return max(r.max_rss_mib for r in good) if good else None

    def to_dict(self) -> dict[str, Any]:
        """The result as JSON-ready data."""
        return {
            "case": self.case.name,
            "description": self.case.description,
            "median_s": self.median,
            "median_cpu_s": self.cpu_median,
            "peak_rss_mib": self.peak_rss,
            "timed_out": self.timed_out,
            "failed": self.failed,
            "note": self.note,
            "skipped": self.skipped,
            "runs": [
                {
                    "seconds": round(r.seconds, 4),
                    "cpu_seconds": round(r.cpu_seconds, 4),
                    "max_rss_mib": round(r.max_rss_mib, 1),
                    "returncode": r.returncode,
                    "timed_out": r.timed_out,
                }
                for r in self.runs
            ],
        }


def _log(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


def _remove_cache(ctx: Context) -> None:
    shutil.rmtree(ctx.dataset.store / CACHE_DIR, ignore_errors=True)


def _read_through(path: Path) -> None:
    with contextlib.suppress(OSError), path.open("rb") as handle:
        while handle.read(1 << 20):
            pass


def warm_inputs(ctx: Context, case: Case) -> None:
    """Read what ``case`` reads, untimed, just before it runs: the page cache is then
    warm for every timed run (this machine's kernel evicts pages idle for a minute, so
    one warm-up at the start is not enough at N = 100,000)."""
    if case.name == "report":  # every run writes a new report, as the first one does
        shutil.rmtree(report_folder(ctx), ignore_errors=True)
    if case.name == "report-again" and not (report_folder(ctx) / ".kexp-report.json").is_file():
        measure(
            ctx.kexp_args("report", "-o", str(report_folder(ctx))),
            cwd=ctx.dataset.folder,
            env=ctx.env,
            timeout=600,
        )  # the earlier report, untimed
    if case.name.startswith(("python-", "kexp-")) or case.reads == "none":
        return
    if case.name == "predecessor":
        _read_through(ctx.dataset.json_path)
    elif case.name == "sqlite":
        _read_through(ctx.dataset.sqlite_path)
    elif case.reads == "json-copy":
        _read_through(ctx.work().json_copy)
    else:
        roots = {
            "store": ctx.dataset.store,
            "work": ctx.work().store if case.reads == "work" else None,
            "pr": ctx.work().pr if case.reads == "pr" else None,
        }
        root = roots.get(case.reads)
        if root is None:
            return
        for folder, _, files in os.walk(root / "experiments"):
            for name in files:
                _read_through(Path(folder) / name)
    if case.cache == "retrieval" and case.name != "cache-size":  # they read kexp's cache too
        for path in sorted((ctx.dataset.store / CACHE_DIR).glob("*.sqlite")):
            _read_through(path)


def _tail(text: str, lines: int = 3) -> str:
    return " | ".join(text.strip().splitlines()[-lines:])


def run_builds(
    contexts: Sequence[Context], cases: Sequence[Case], repeat: int, timeout: float
) -> list[list[CaseResult]]:
    """Time every case ``repeat`` times in each context (one per build of kexp), in
    rounds: the results of each context.

    Each round runs every case once, in the order of :data:`CASES` (baselines, then the
    cold cases, then one untimed ``kexp top`` and the warm cases), so a change in the
    machine's load during the run touches every case alike; with two builds, each case
    runs in both, one after the other, the first build first in odd rounds and second in
    even ones, so that a pair of runs sees the same machine. A case that fails or times
    out is not run again in that context.
    """
    every = [[CaseResult(case) for case in cases] for _ in contexts]
    for ctx, results in zip(contexts, every, strict=True):
        for result in results:
            if result.case.argv(ctx) is None:
                result.skipped = "not applicable"
    warmup_failed = [""] * len(contexts)
    for round_number in range(1, repeat + 1):
        cache_warm = [False] * len(contexts)
        retrieval_warm = [False] * len(contexts)
        for index in range(len(cases)):
            order = list(range(len(contexts)))
            if round_number % 2 == 0:
                order.reverse()
            for which in order:
                ctx, result = contexts[which], every[which][index]
                case = result.case
                if result.skipped or any(not run.ok for run in result.runs):
                    continue
                if case.cache == "cold":
                    _remove_cache(ctx)  # every build's cache
                    cache_warm = [False] * len(contexts)
                    retrieval_warm = [False] * len(contexts)
                if case.cache in ("warm", "retrieval") and not cache_warm[which]:
                    if warmup_failed[which]:
                        result.note = warmup_failed[which]
                        continue
                    warm = measure(
                        ctx.kexp_args("top"), cwd=ctx.dataset.folder, env=ctx.env, timeout=timeout
                    )
                    if not warm.ok:
                        warmup_failed[which] = "warm-up `kexp top` " + (
                            f"timed out (> {timeout:g} s)"
                            if warm.timed_out
                            else f"failed: {_tail(warm.stderr)}"
                        )
                        result.note = warmup_failed[which]
                        _log(f"  round {round_number}: {warmup_failed[which]}")
                        continue
                    cache_warm[which] = True
                if case.cache == "retrieval" and not retrieval_warm[which]:
                    measure(
                        ctx.kexp_args("similar", "--text", PLAN),
                        cwd=ctx.dataset.folder,
                        env=ctx.env,
                        timeout=timeout,
                    )
                    retrieval_warm[which] = True
                if case.prepare is not None:
                    case.prepare(ctx)
                argv = case.argv(ctx)
                assert argv is not None
                warm_inputs(ctx, case)
                run = measure(argv, cwd=ctx.dataset.folder, env=ctx.env, timeout=timeout)
                result.runs.append(run)
                state = (
                    "timed out"
                    if run.timed_out
                    else f"{run.seconds:.3f} s (CPU {run.cpu_seconds:.3f} s), "
                    f"{run.max_rss_mib:.0f} MiB" + ("" if run.ok else f", exit {run.returncode}")
                )
                build = f" [{'AB'[which]}]" if len(contexts) > 1 else ""
                _log(f"  round {round_number}/{repeat}{build} {case.name:<20} {state}")
    for ctx, results in zip(contexts, every, strict=True):
        for result in results:
            if result.skipped or not result.runs:
                continue
            if result.timed_out:
                result.note = f"timed out (> {timeout:g} s)"
            elif result.failed:
                bad = next(r for r in result.runs if not r.ok)
                result.note = f"exit {bad.returncode}: {_tail(bad.stderr)}"
            else:
                result.note = result.case.check(ctx, result.runs[0])
    return every


# --- reporting -------------------------------------------------------------------------

#: (name, case, unit case, what is compared, limit): the issues' targets at N = 100,000.
#: "time" and "memory" are ratios to the unit case; "seconds" is a limit in seconds.
TARGETS: tuple[tuple[str, str, str | None, str, float], ...] = (
    ("warm `kexp top` ≤ 0.2 × predecessor", "top-cli-warm", "predecessor", "time", 0.2),
    ("cold `kexp top` ≤ 2 × predecessor", "top-cli-cold", "predecessor", "time", 2.0),
    # Issue 24's: one read path, one cache.
    ("cold `kexp top` ≤ 1 × predecessor", "top-cli-cold", "predecessor", "time", 1.0),
    (
        "warm `kexp top` ≤ 1 × a Python walk that stats every file",
        "top-cli-warm",
        "stat-all",
        "time",
        1.0,
    ),
    (
        "the first `kexp add` with a diff after a clone ≤ 2 × cold `kexp top`",
        "first-add",
        "top-cli-cold",
        "time",
        2.0,
    ),
    (
        "the first `kexp similar` after a clone ≤ 2 × cold `kexp top`",
        "first-similar",
        "top-cli-cold",
        "time",
        2.0,
    ),
    ("`.kexp/` ≤ 0.5 × `experiments/` on disk", "cache-size", None, "size", 0.5),
    ("warm `kexp show ID` (prefix) ≤ 0.05 × predecessor", "show", "predecessor", "time", 0.05),
    ("cold `kexp show ID` (prefix) ≤ 0.05 × predecessor", "show-cold", "predecessor", "time", 0.05),
    (
        "peak memory of warm `kexp top` ≤ 0.1 × predecessor's",
        "top-cli-warm",
        "predecessor",
        "memory",
        0.1,
    ),
    (
        "peak memory of cold `kexp top` ≤ 0.1 × predecessor's",
        "top-cli-cold",
        "predecessor",
        "memory",
        0.1,
    ),
    ('`kexp --help` ≤ 1.2 × `python -c "import click"`', "kexp-help", "python-click", "time", 1.2),
    (
        '`kexp --version` ≤ 1.2 × `python -c "import click"`',
        "kexp-version",
        "python-click",
        "time",
        1.2,
    ),
    # Issue 18's, in seconds: "seconds" compares the median with the limit, "added" the
    # median minus that of the unit case (the same create without the check).
    ("warm `kexp context` ≤ 1 s", "context", "context", "seconds", 1.0),
    ("warm `kexp similar` ≤ 0.5 s", "similar", "similar", "seconds", 0.5),
    (
        "near-duplicate check adds ≤ 0.1 s to a create",
        "create-check",
        "create-nocheck",
        "added",
        0.1,
    ),
    (
        "`kexp add` with a diff ≤ 0.05 × predecessor's create",
        "write-add-diff",
        "predecessor-create",
        "time",
        0.05,
    ),
    (
        "`create_experiment` with `code_change` ≤ 0.05 × predecessor's create",
        "write-create-code",
        "predecessor-create",
        "time",
        0.05,
    ),
    (
        "`create_experiment` with `pid` ≤ 0.05 × predecessor's create",
        "write-create-pid",
        "predecessor-create",
        "time",
        0.05,
    ),
    (
        "`update_experiment` ≤ 0.05 × predecessor's update",
        "write-update",
        "predecessor-update",
        "time",
        0.05,
    ),
    (
        "`delete_experiment` ≤ 0.05 × predecessor's delete",
        "write-delete",
        "predecessor-delete",
        "time",
        0.05,
    ),
    (
        f"`kexp import` of {IMPORT_RECORDS:,} records ≥ 2,000 records/s (≤ "
        f"{IMPORT_RECORDS / 2000:g} s)",
        "write-import",
        None,
        "seconds",
        IMPORT_RECORDS / 2000,
    ),
    ("`kexp validate --changed` of 10 added ≤ 2 s", "pr-validate-changed", None, "seconds", 2.0),
    ("`kexp review` of 10 added ≤ 2 s", "pr-review", None, "seconds", 2.0),
    # Issue 19's: a query across 10 refs of N mostly shared experiments.
    (
        "warm `kexp top --refs 'origin/*'` (10 refs) ≤ 2 × warm `kexp top`",
        "top-refs-warm",
        "top-cli-warm",
        "time",
        2.0,
    ),
)


def _fmt(value: float | None, digits: int = 3) -> str:
    return "—" if value is None else f"{value:.{digits}f}"


def _ratio(a: float | None, b: float | None) -> float | None:
    return None if a is None or b is None or b <= 0 else a / b


def case_table(results: Sequence[CaseResult], timeout: float) -> list[str]:
    """The Markdown table of one N."""
    by_name = {r.case.name: r for r in results}
    pred = by_name.get("predecessor")
    pred_time = pred.median if pred else None
    pred_cpu = pred.cpu_median if pred else None
    pred_rss = pred.peak_rss if pred else None
    lines = [
        "| case | median s | × predecessor | CPU s | × pred. CPU | peak RSS MiB "
        "| × pred. RSS | runs | check |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---|",
    ]
    for result in results:
        if result.skipped:
            lines.append(f"| {result.case.name} | — | — | — | — | — | — | 0 | {result.skipped} |")
            continue
        median, cpu, rss = result.median, result.cpu_median, result.peak_rss
        if result.timed_out:
            time_cell = f"> {timeout:g}"
            ratio = _ratio(timeout, pred_time)
            ratio_cell = f"> {ratio:.2f}" if ratio is not None else "—"
        else:
            time_cell = _fmt(median)
            ratio_cell = _fmt(_ratio(median, pred_time), 2)
        lines.append(
            f"| {result.case.name} | {time_cell} | {ratio_cell} | {_fmt(cpu)} | "
            f"{_fmt(_ratio(cpu, pred_cpu), 2)} | {_fmt(rss, 0)} | "
            f"{_fmt(_ratio(rss, pred_rss), 2)} | {len(result.good)} | "
            f"{result.note.replace('|', '/')} |"
        )
    return lines


def comparison_table(this: Sequence[CaseResult], other: Sequence[CaseResult]) -> list[str]:
    """Each case timed in two builds in one run (``--against``): the medians, and the
    median over the rounds of this build's run ÷ the other's (the two runs of a round
    are back to back, on the same machine)."""
    lines = [
        "| case | this s | other s | this ÷ other | CPU this ÷ other | pairs |",
        "|---|---:|---:|---:|---:|---:|",
    ]
    for mine, theirs in zip(this, other, strict=True):
        if mine.skipped or theirs.skipped:
            continue
        pairs = [(a, b) for a, b in zip(mine.runs, theirs.runs, strict=False) if a.ok and b.ok]
        wall = [a.seconds / b.seconds for a, b in pairs if b.seconds > 0]
        cpu = [a.cpu_seconds / b.cpu_seconds for a, b in pairs if b.cpu_seconds > 0]
        lines.append(
            f"| {mine.case.name} | {_fmt(mine.median)} | {_fmt(theirs.median)} | "
            f"{_fmt(statistics.median(wall) if wall else None, 2)} | "
            f"{_fmt(statistics.median(cpu) if cpu else None, 2)} | {len(pairs)} |"
        )
    return lines


def target_table(results: Sequence[CaseResult], timeout: float) -> list[str]:
    """The targets, checked with this run's measurements (wall time; CPU shown too)."""
    by_name = {r.case.name: r for r in results}
    lines = [
        "| target | measured ratio | CPU-time ratio | result |",
        "|---|---:|---:|---|",
    ]
    for title, name, unit_name, kind, limit in TARGETS:
        result = by_name.get(name)
        unit = by_name.get(unit_name) if unit_name is not None else result
        if result is None or unit is None or result.skipped or unit.skipped:
            lines.append(f"| {title} | — | — | not measured |")
            continue
        if kind in ("seconds", "added"):
            lines.append(_seconds_row(title, result, unit, kind, limit))
            continue
        if kind == "size":
            found = re.search(r"ratio ([0-9.]+)", result.note)
            if found is None:
                lines.append(f"| {title} | — | — | not measured: {result.note} |")
            else:
                ratio = float(found.group(1))
                verdict = "PASS" if ratio <= limit else "FAIL"
                lines.append(f"| {title} | {ratio:.3f} | — | {verdict} |")
            continue
        unit_value = unit.median if kind == "time" else unit.peak_rss
        cpu_ratio = _ratio(result.cpu_median, unit.cpu_median) if kind == "time" else None
        wrong = result.note.startswith("WRONG")
        if result.timed_out and kind == "time":
            bound = _ratio(timeout, unit_value)
            if bound is None:
                verdict, shown = "not measured", "—"
            else:
                verdict = "FAIL (timed out)" if bound > limit else "unknown (timed out)"
                shown = f"> {bound:.2f}"
        else:
            value = result.median if kind == "time" else result.peak_rss
            ratio = _ratio(value, unit_value)
            if ratio is None:
                verdict, shown = f"not measured{': ' + result.note if result.note else ''}", "—"
            else:
                verdict = "PASS" if ratio <= limit and not wrong else "FAIL"
                if wrong:
                    verdict += " (wrong answer)"
                shown = f"{ratio:.3f}"
        cpu_cell = "—" if cpu_ratio is None else f"{cpu_ratio:.3f}"
        lines.append(f"| {title} | {shown} | {cpu_cell} | {verdict.replace('|', '/')} |")
    return lines


def _seconds_row(title: str, result: CaseResult, unit: CaseResult, kind: str, limit: float) -> str:
    """A target in seconds: the median (``added``: minus the unit case's), wall and CPU."""
    wall, cpu = result.median, result.cpu_median
    if kind == "added":
        wall = None if wall is None or unit.median is None else wall - unit.median
        cpu = None if cpu is None or unit.cpu_median is None else cpu - unit.cpu_median
    if result.timed_out or wall is None:
        return f"| {title} | — | — | not measured{': ' + result.note if result.note else ''} |"
    wrong = result.note.startswith("WRONG") or unit.note.startswith("WRONG")
    verdict = ("PASS" if wall <= limit else "FAIL") + (" (wrong answer)" if wrong else "")
    cpu_cell = "—" if cpu is None else f"{cpu:.3f} s"
    return f"| {title} | {wall:.3f} s | {cpu_cell} | {verdict} |"


def _git_describe() -> str:
    try:
        head = subprocess.run(
            ["git", "-C", str(BENCH_DIR), "rev-parse", "--short", "HEAD"],
            capture_output=True,
            text=True,
            check=True,
        ).stdout.strip()
        dirty = subprocess.run(
            ["git", "-C", str(BENCH_DIR), "status", "--porcelain", "--", "../kexp"],
            capture_output=True,
            text=True,
            check=True,
        ).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return "unknown"
    return head + (" + uncommitted changes in kexp/" if dirty else "")


def kexp_package(env: dict[str, str]) -> Path:
    """The ``kexp`` package folder that processes with this environment import."""
    found = subprocess.run(
        [sys.executable, "-c", "import kexp; print(kexp.__file__)"],
        env=env,
        cwd=tempfile.gettempdir(),
        capture_output=True,
        text=True,
        check=True,
    )
    return Path(found.stdout.strip()).resolve().parent


def kexp_fingerprint(package: Path) -> str:
    """A hash of kexp's source files: shows whether kexp changed while the benchmark ran."""
    import hashlib

    digest = hashlib.sha256()
    for path in sorted(package.rglob("*.py")):
        digest.update(str(path.relative_to(package)).encode())
        digest.update(path.read_bytes())
    return digest.hexdigest()[:12]


def _cpu_model() -> str:
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as handle:
            for line in handle:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown CPU"


def _memory_gib() -> str:
    try:
        pages = os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    except (ValueError, OSError, AttributeError):
        return "?"
    return f"{pages / 2**30:.0f} GiB"


def environment_lines(
    kexp_cmd: Sequence[str],
    repeat: int,
    timeout: float,
    package: Path,
    fingerprint: str,
    from_src: bool,
) -> list[str]:
    """Where and how the numbers were measured."""
    version_file = package / "core" / "version.py"  # where kexp keeps its version
    if not version_file.is_file():
        version_file = package / "__init__.py"  # kexp before its packages by role
    init = version_file.read_text(encoding="utf-8")
    found = re.search(r"__version__ = [\"']([^\"']+)", init)
    version = found.group(1) if found else "?"
    origin = "PYTHONPATH, --kexp-src" if from_src else f"commit {_git_describe()}"
    now = dt.datetime.now(dt.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    return [
        f"- date: {now}; machine: {os.cpu_count()} CPUs ({_cpu_model()}), {_memory_gib()} RAM, "
        f"{platform.system()} {platform.release()}",
        f"- Python {platform.python_version()}; kexp {version} from {package} ({origin}; "
        f"source fingerprint {fingerprint})",
        f"- kexp command: `{shlex.join(kexp_cmd)}`; repeats: {repeat} (median); "
        f"timeout per run: {timeout:g} s; page cache warm (what a case reads is read once, "
        "untimed, before each run)",
    ]


def disk_usage(folder: Path) -> int:
    """Bytes ``folder`` takes on disk (its files' and folders' blocks, as ``du``)."""
    total = 0
    for parent, _, files in os.walk(folder):
        for name in [*files, "."]:  # each folder counted once, as its own "."
            with contextlib.suppress(OSError):
                total += os.lstat(os.path.join(parent, name)).st_blocks * 512
    return total


_STORE_DISK: dict[Path, int] = {}


def store_on_disk(dataset: Dataset) -> int:
    """Bytes the data set's ``experiments/`` takes on disk (measured once)."""
    if dataset.store not in _STORE_DISK:
        _STORE_DISK[dataset.store] = disk_usage(dataset.store / "experiments")
    return _STORE_DISK[dataset.store]


def dataset_line(dataset: Dataset, load: tuple[float, float]) -> str:
    """One line describing a data set."""
    meta = dataset.meta
    return (
        f"{meta['n']:,} experiment files of {meta['mean_file_bytes']:,} B on average "
        f"({meta['store_bytes'] / 1e6:.0f} MB in {meta['shards']} folders, the largest "
        f"holding {meta['largest_shard']}; {store_on_disk(dataset) / 1e6:.0f} MB on disk, "
        f"folders included); predecessor JSON {meta['json_bytes'] / 1e6:.0f} MB; "
        f"SQLite {meta['sqlite_bytes'] / 1e6:.0f} MB; load average {load[0]:.2f} before, "
        f"{load[1]:.2f} after"
    )


_CANONICAL_CHECK = """\
import random, sys
from pathlib import Path
from kexp.format.fileformat import parse, serialize
files = sorted(p for p in Path(sys.argv[1], "experiments").rglob("*.md") if p.name != "README.md")
sample = random.Random(0).sample(files, min(200, len(files)))
changed = [p for p in sample if serialize(parse(p.read_bytes(), p).to_experiment()).encode()
           != p.read_bytes()]
print(len(changed), len(sample), *changed[:1])
"""


def canonical_warning(ctx: Context) -> str:
    """A warning when the data set's files are no longer canonical for the kexp measured.

    kexp may read canonical files by a faster path, so files written by an older
    serializer could make it look slower than it is.
    """
    try:
        found = subprocess.run(
            [sys.executable, "-c", _CANONICAL_CHECK, ctx.root],
            env=ctx.env,
            cwd=ctx.dataset.folder,
            capture_output=True,
            text=True,
            check=True,
            timeout=300,
        )
        changed, checked, *example = found.stdout.split()
    except (subprocess.SubprocessError, ValueError) as exc:
        return f"could not check that the files are canonical for this kexp ({exc})"
    if changed == "0":
        return ""
    return (
        f"WARNING: {changed} of {checked} sampled files are not in this kexp's canonical "
        f"form (e.g. {example[0] if example else '?'}): regenerate the data (--regenerate, "
        "and bump GENERATOR_VERSION in generate.py)"
    )


def base_environment(kexp_src: Path | None) -> dict[str, str]:
    """The environment of every timed process: no KEXP_* from the caller, wide tables."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("KEXP_")}
    env.update({"COLUMNS": "200", "NO_COLOR": "1", "PYTHONWARNINGS": "ignore"})
    if kexp_src is not None:
        env["PYTHONPATH"] = os.pathsep.join(
            p for p in (str(kexp_src.resolve()), os.environ.get("PYTHONPATH")) if p
        )
    return env


def child_environment(dataset: Dataset, base: dict[str, str]) -> dict[str, str]:
    """:func:`base_environment` plus the data set's code repository."""
    env = dict(base)
    if dataset.code_repo is not None:
        env["KEXP_CODE_REPO"] = str(dataset.code_repo)
    return env


def default_kexp_command() -> list[str]:
    """The installed ``kexp`` console script of this Python, else ``python -m kexp``."""
    script = Path(sys.executable).with_name("kexp")
    if script.is_file() and os.access(script, os.X_OK):
        return [str(script)]
    return [sys.executable, "-m", "kexp"]


def main(argv: Sequence[str] | None = None) -> int:
    """Command line."""
    parser = argparse.ArgumentParser(
        description="Time kexp against its predecessor's JSON file and SQLite.",
        epilog="cases: " + ", ".join(CASE_NAMES),
    )
    generate.add_data_options(parser)
    parser.add_argument("--repeat", type=int, default=3, help="timed runs per case (median)")
    parser.add_argument(
        "--cases",
        help="comma-separated case names or patterns, e.g. "
        "'predecessor,sqlite,top-*' (default: all)",
    )
    parser.add_argument(
        "--timeout",
        type=float,
        default=600.0,
        help="seconds one run may take before it is killed (default 600)",
    )
    parser.add_argument(
        "--kexp",
        dest="kexp_cmd",
        help="the kexp command to time (default: this Python's kexp script)",
    )
    parser.add_argument(
        "--kexp-src",
        type=Path,
        help="import kexp from this folder (holding kexp/ and schema/) "
        "instead of the installed one, e.g. one commit's sources: "
        "git archive HEAD kexp schema | tar -x -C DIR",
    )
    parser.add_argument(
        "--against",
        type=Path,
        help="also time the kexp in this folder (as --kexp-src), each case "
        "back to back with the one measured, in alternating order; the "
        "report adds its table and each case's ratio of the two",
    )
    parser.add_argument("--markdown", type=Path, help="also write the report to this file")
    parser.add_argument(
        "--json", dest="json_path", type=Path, help="write every run's numbers to this file"
    )
    parser.add_argument("--list-cases", action="store_true", help="list the cases and exit")
    args = parser.parse_args(argv)
    if args.list_cases:
        for case in CASES:
            print(f"{case.name:<20} {case.description}")
        return 0
    if not hasattr(os, "wait4"):
        parser.error("this benchmark needs os.wait4 (Linux or macOS)")
    cases = select_cases(args.cases)
    kexp_cmd = shlex.split(args.kexp_cmd) if args.kexp_cmd else default_kexp_command()
    for option, folder in (("--kexp-src", args.kexp_src), ("--against", args.against)):
        if folder is not None and not (folder / "kexp" / "__init__.py").is_file():
            parser.error(f"{option} {folder} holds no kexp/__init__.py")
    base_env = base_environment(args.kexp_src)
    package = kexp_package(base_env)
    # Byte-compile the measured kexp, as pip does when it installs a package: where
    # PYTHONDONTWRITEBYTECODE is set, every run would otherwise compile it from source.
    compileall.compile_dir(str(package), quiet=1)
    fingerprint = kexp_fingerprint(package)
    report = [
        "# kexp benchmark",
        "",
        *environment_lines(
            kexp_cmd, args.repeat, args.timeout, package, fingerprint, args.kexp_src is not None
        ),
    ]
    against_env = None if args.against is None else base_environment(args.against)
    if against_env is not None:
        other_package = kexp_package(against_env)
        compileall.compile_dir(str(other_package), quiet=1)
        report.append(
            f"- compared against the kexp in {other_package} (source fingerprint "
            f"{kexp_fingerprint(other_package)}), run by run (`--against`)"
        )
    header_end = len(report)
    raw: dict[str, Any] = {"sizes": {}}
    exit_status = 0
    for n in args.sizes:
        dataset = generate.ensure_dataset(
            n,
            args.data_dir,
            args.seed,
            git=args.git,
            per_month=args.per_month,
            baselines=args.baselines,
            layout=args.layout,
            verify_every=args.verify_every,
            force=args.regenerate,
            log=_log,
        )
        ctx = Context(dataset, kexp_cmd, child_environment(dataset, base_env))
        contexts = [ctx]
        if against_env is not None:
            contexts.append(dataclasses.replace(ctx, env=child_environment(dataset, against_env)))
        _log(f"N={n:,}: warming the page cache and bytecode ...")
        for warm in (CASES[CASE_NAMES.index("read-all")], CASES[CASE_NAMES.index("kexp-version")]):
            measure(warm.argv(ctx) or [], cwd=dataset.folder, env=ctx.env, timeout=args.timeout)
        canonical = canonical_warning(ctx)
        if canonical:
            _log(canonical)
        load_before = os.getloadavg()[0]
        try:
            results, *others = run_builds(contexts, cases, args.repeat, args.timeout)
        finally:
            remove_workspace(ctx)
            shutil.rmtree(parquet_folder(ctx), ignore_errors=True)
        load_after = os.getloadavg()[0]
        report += [
            "",
            f"## N = {n:,}",
            "",
            dataset_line(dataset, (load_before, load_after)),
            "",
            *([canonical, ""] if canonical else []),
            *case_table(results, args.timeout),
            "",
            *(
                [
                    f"The kexp compared against (`--against {args.against}`), in the same run:",
                    "",
                    *case_table(others[0], args.timeout),
                    "",
                    "Each case in the two builds (this ÷ other: the median of the rounds' ratios):",
                    "",
                    *comparison_table(results, others[0]),
                    "",
                ]
                if others
                else []
            ),
            f"Targets (the issue sets them at N = 100,000; shown for N = {n:,}):",
            "",
            *target_table(results, args.timeout),
        ]
        raw["sizes"][str(n)] = {
            "dataset": dataset.meta,
            "load_average": [load_before, load_after],
            "results": [r.to_dict() for r in results],
            **({"against": [r.to_dict() for r in others[0]]} if others else {}),
        }
        if any(
            r.note.startswith("WRONG") or r.failed for group in (results, *others) for r in group
        ):
            exit_status = 1
    final = kexp_fingerprint(package)
    if final != fingerprint:
        report.insert(
            header_end,
            f"- WARNING: kexp's source changed during the run (fingerprint "
            f"{fingerprint} → {final}): the numbers mix versions",
        )
        _log(f"warning: kexp's source changed during the run ({fingerprint} → {final})")
    text = "\n".join(report) + "\n"
    print(text)
    if args.markdown:
        args.markdown.write_text(text, encoding="utf-8")
    if args.json_path:
        args.json_path.write_text(json.dumps(raw, indent=2) + "\n", encoding="utf-8")
    return exit_status


if __name__ == "__main__":
    sys.exit(main())
