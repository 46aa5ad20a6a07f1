"""kexp for agents: the helpers and the experiment schema, in one importable file.

Import it from anywhere kexp is installed::

    import sys
    sys.path.insert(0, ".claude/skills/kernel-exp-history/references")
    from kexp_agent import list_experiments, top_experiments, record_iteration

or read it: every field, rule and helper an agent needs is documented below.

**The predecessor's helpers**, exactly as the single-JSON-file tool had them (they act
on the store found from the working directory or ``$KEXP_ROOT``; with none, reads
return nothing and the first create makes one in the working directory):

* ``KernelExperiment(score, raw_result, dtype_sig, env, is_buggy, error_message,
  change_summary, detailed_description, code_change, base_commit, operator_sig,
  profiling_info, status, id, pid, created_at)`` — ``id`` and ``created_at`` are made
  when it is built, so ``pid=parent.id`` works right after ``create_experiment(parent)``;
* ``create_experiment(exp) -> None`` — validates, writes; ``ValueError`` if ``exp.id``
  exists already;
* ``get_experiment(exp_id) -> KernelExperiment | None`` — full ids only;
* ``list_experiments() -> list[KernelExperiment]`` — every experiment, in id order;
* ``top_experiments(max_results=20) -> list[dict]`` — every experiment (buggy and
  pending ones too: see the ``is_buggy``, ``status`` and ``outcome`` keys), best score
  first;
* ``update_experiment(exp_id, **changes) -> KernelExperiment`` — ``KeyError`` if unknown;
* ``delete_experiment(exp_id) -> None`` — ``KeyError`` if unknown;
* ``test_insert_example()``, ``DB_PATH``, ``Status``.

An invalid value (a score that is not a number >= 0, a ``pid`` naming no experiment)
raises ``kexp.ValidationError`` (a ``ValueError``) naming the field, and nothing is
written. kexp's own functions (``import kexp``) also take a 10-character id prefix and
leave buggy and pending experiments out of ``top_experiments``.

**kexp's additions:**

* ``context(operator=..., dtype=..., env=..., text=..., diff=..., budget=4000)`` — what
  to read before the next iteration, in one packet (``.text``: Markdown, or JSON with
  ``output="json"``): the best and its lineage, related failures and successes with
  their key insights, what not to repeat, what was never tried;
* ``similar(text=... | diff=... | exp_id=...)`` — the experiments most related to a
  plan, a diff or an experiment;
* ``record_iteration(baseline=..., candidate=..., **fields) -> KernelExperiment`` —
  one call per iteration: timings in, ``score``/``results``/``raw_result`` computed,
  validated and written (see :mod:`kexp.measure.record`); ``status`` defaults to ``done``
  (``create_experiment`` and ``KernelExperiment`` default to ``new``: pending, left
  out of ``top_experiments`` until it is set);
* ``ancestors(exp_id)``, ``children(exp_id)`` — lineage through ``pid``;
* ``find_repeats(code_change)`` — earlier experiments with the same change;
  ``tried_before(code_change)`` — those and the near-duplicates (the same change with
  other variable names or its hunks in another order), as a create warns of them;
* ``suspect_reasons(exp)`` — why a measurement looks too good to be true.

Filters (keyword arguments, combinable): ``operator``, ``dtype``, ``env``, ``text``
(case-insensitive substring), ``base_commit`` (prefix), ``status``, ``outcome``,
``is_buggy``, ``min_score``, ``max_score``, ``pid``, ``tags``, ``since``, ``until``.
"""

from __future__ import annotations

import importlib.machinery
import importlib.util
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

import kexp
from kexp import KernelExperiment, ancestors, children, context, similar
from kexp.storage.dedupe import normalize_code_change
from kexp.measure.record import load_measurements, record_iteration
from kexp.measure.scoring import score_measurements
from kexp.core.model import OUTCOMES, STATUSES
from kexp.format.suspect import SUSPECT_LABEL, is_suspect, suspect_reasons

__all__ = [
    "DB_PATH",
    "FAILURE_CATEGORIES",
    "FIELDS",
    "OUTCOMES",
    "SCORE_RULES",
    "STATUSES",
    "SUSPECT_LABEL",
    "KernelExperiment",
    "Status",
    "ancestors",
    "children",
    "context",
    "create_experiment",
    "delete_experiment",
    "describe_schema",
    "find_repeats",
    "get_experiment",
    "is_suspect",
    "list_experiments",
    "load_measurements",
    "normalize_code_change",
    "record_iteration",
    "score_measurements",
    "similar",
    "suspect_reasons",
    "test_insert_example",
    "top_experiments",
    "tried_before",
    "update_experiment",
]


def _installed_helpers() -> ModuleType:
    """kexp's ``kernel_exp_dataclass`` module (the predecessor's helpers, re-exported)."""
    here = Path(__file__).resolve().parent
    loaded = sys.modules.get("kernel_exp_dataclass")
    if loaded is not None and Path(getattr(loaded, "__file__", "") or ".").resolve().parent != here:
        return loaded
    search = [p for p in sys.path if Path(p or ".").resolve() != here]
    spec = importlib.machinery.PathFinder.find_spec("kernel_exp_dataclass", search)
    if spec is None or spec.loader is None:
        raise ImportError(
            "kexp's kernel_exp_dataclass module was not found: install kexp "
            "(pip install kexp, or pip install -e . in its repository)"
        )
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


_helpers = _installed_helpers()
list_experiments = _helpers.list_experiments
top_experiments = _helpers.top_experiments
get_experiment = _helpers.get_experiment
create_experiment = _helpers.create_experiment
update_experiment = _helpers.update_experiment
delete_experiment = _helpers.delete_experiment
test_insert_example = _helpers.test_insert_example
DB_PATH = _helpers.DB_PATH
Status = _helpers.Status


def find_repeats(code_change: str) -> list[Any]:
    """Earlier experiments (in the default store) whose code change is this one."""
    from kexp.storage.repeats import find_repeats as find

    return find(kexp.default_store(), code_change)


def tried_before(code_change: str) -> list[Any]:
    """Earlier experiments (in the default store) whose code change is this one or a
    near-duplicate of it (``similarity`` and ``identical`` say which)."""
    from kexp.storage.repeats import tried_before as find

    return find(kexp.default_store(), code_change)


#: Every field of an experiment: what it holds and how to write it. The short fields
#: are the YAML front-matter of the file; the long texts are its ``## `` sections.
FIELDS: dict[str, str] = {
    "id": "16 lowercase hex, made when the KernelExperiment is built (creation time "
    "first). kexp commands take it as kexp prints it (10 characters or more: a unique "
    "prefix); these helpers the full id.",
    "pid": "Id of the experiment this iteration builds on, or '' for a first try.",
    "change_summary": "One line, at most 80 characters: '<What> - <Result>' or "
    "'<What> - <Why it failed>', e.g. 'Vectorize bf16 copies to 128-bit - +11.67%'.",
    "score": "Speedup vs the baseline, the geometric mean over configurations (1.18 = "
    "18% faster); 0 when nothing could be measured. A number >= 0, finite. From "
    "repeated timings: the geometric mean of the configurations' median speedups.",
    "measured_against": "What score is a speedup over: 'parent' (the parent "
    "experiment's code, the commit you made the change on: measure every change against "
    "it; record_iteration writes it when pid is given) or 'reference' (the operator's "
    "original code; the predecessor's records, and a first try). kexp multiplies the "
    "steps along the lineage into cumulative_score, the speedup over the reference, "
    "which ranks the best tips.",
    "score_ci": "Optional [low, high]: the score's 95% interval, computed by "
    "record_iteration from repeated timings (3+ samples a side and configuration). "
    "With it, improvement needs low > 1 and regression high < 1: else marginal.",
    "status": "new, running, done, failed or timeout. KernelExperiment and "
    "create_experiment default to new (pending: left out of top_experiments); "
    "record_iteration and 'kexp add' default to done.",
    "is_buggy": "true when the change crashed or gave wrong results (then error_message "
    "is required).",
    "operator_sig": "'path/to/file: kernel_name' for every kernel affected.",
    "dtype_sig": "Data type(s): fp16, bf16, fp8, 'bf16 -> fp8', ...",
    "env": "GPU model, driver, ROCm/CUDA and framework versions ('kexp env' detects them).",
    "base_commit": "Commit the change was made on (7-64 hex), not the commit of the "
    "change: for uncommitted work give HEAD (git rev-parse HEAD) and 'git diff HEAD' as "
    "code_change. Filled from HEAD only when missing (a dirty tree then warns and tags "
    "uncommitted-base).",
    "created_at": "ISO 8601 UTC ending in Z, made when the KernelExperiment is built.",
    "tags": "Optional list of short labels: technique and kernel family. 'control' "
    "marks an A/A run (the same code both sides): the noise floor, never ranked.",
    "author": "Optional; filled from git user.name.",
    "combines": "Optional list of ids this experiment merges. Only with it is a "
    "combination scoring below its best part an 'interference' (an imported record "
    "saying 'interference' in its summary is marginal or regression until it is set).",
    "protocol": "Optional: how the timings were measured, {timer: cuda_events|hip_events|"
    "do_bench|torch_benchmark|wall_clock|other, synchronized, warmup, repetitions, "
    "l2_flushed, clocks_locked, device: gpu|cpu}; filled from what the timing files tell.",
    "results": "Optional list of {config, baseline, candidate, speedup, unit} per "
    "configuration; record_iteration fills it from timings (from samples: medians, plus "
    "baseline_n/candidate_n counts and baseline_iqr/candidate_iqr spreads).",
    "detailed_description": "Four paragraphs: **Approach**, **Result**, **Why it "
    "worked/failed**, **Key insight**.",
    "raw_result": "'Iteration N Results - SUCCESS|MARGINAL|REGRESSION:', the **Overall** "
    "line, then '**Per-kernel breakdown**:' with one '- config: 1.0172x (+1.72%)  "
    "5.90 -> 5.80 µs' item per configuration (a line over 80 characters wrapped, its "
    "continuation indented by two); how it was measured; the correctness check.",
    "profiling_info": "Profiler evidence: tool, counters, registers, occupancy, "
    "bandwidth, bank conflicts, spills; or 'Not profiled' and why.",
    "error_message": "When is_buggy: the error type and message, verbatim.",
    "code_change": "The whole diff (git diff).",
    "samples": "The '## Samples' section: raw timings, one JSON line per round and "
    "configuration; written by record_iteration, extended by kexp remeasure. Not by hand.",
}

#: How ``score`` is measured and what it means.
SCORE_RULES = """\
score = baseline time / candidate time, geometric mean over the configurations
(1.0 = no change, > 1 faster). The baseline is the parent's code (measured_against:
parent): each step's speedup; kexp derives cumulative_score, the product of the steps
back to the reference (the operator's original code), which ranks the best tip. Same
machine, configurations and base commit for both; the median of many synchronised runs;
never drop the configurations that got slower.
0 when nothing could be measured (crash, compile error, timeout, wrong results, planned).
Outcomes are derived: improvement (> 1.01), marginal (0.99-1.01), regression (< 0.99),
buggy (is_buggy), failed (status failed/timeout with score 0, not buggy: measured
nothing), pending (status new/running), interference (a combination below the
best experiment it combines), control (tag control: an A/A run, the noise floor). With repeated timings the score has a 95% interval
(score_ci): improvement then also needs its low end above 1, regression its high end
below 1 (else marginal, within noise). Never re-run until it wins: add a round with
kexp remeasure ID (the rounds are pooled). Above 3.0x, a time near zero, or a short
kernel timed by an unsynchronised wall clock: suspect, verify correctness. Validation
warns when score and results disagree by more than 0.5%."""

#: Failure categories: (status, is_buggy, score, what error_message holds).
FAILURE_CATEGORIES: dict[str, tuple[str, bool, str, str]] = {
    "compile error": ("failed", True, "0", "the compiler error"),
    "crash": ("failed", True, "0", "the runtime error (illegal memory access, ...)"),
    "wrong results": ("failed", True, "0", "the failed check, with tolerance and where"),
    "timeout": ("timeout", False, "0", ""),
    "regression": ("done", False, "measured, < 0.99", ""),
    "no effect": ("done", False, "measured, 0.99-1.01", ""),
    "interference": ("done", False, "measured; set combines", ""),
    "planned": ("new", False, "0", ""),
}


def describe_schema() -> str:
    """Every field with its guidance, one per line (for an agent's context)."""
    return "\n".join(f"{name}: {text}" for name, text in FIELDS.items())
