"""A model of everyday use: every answer kexp gives equals the files, read with PyYAML.

A hypothesis state machine does what people, agents and git do to a store, in random
order, with real pauses between some steps (none, under the cache's 2-second "racily
clean" window, over it): create, update and delete through the library, ``kexp import``
of predecessor records, a first experiment in a new month and a new year folder, a file
written or deleted by hand, an edit in place of the same size, an edit followed by
``os.utime`` back to the old modification time (what ``tar -x``, ``rsync -t`` and
``cp -a`` leave), a rename, a move into a folder named ``*.md``, a duplicate id (as a
merge leaves), a file made invalid, ``git checkout`` / ``git stash`` / ``git reset
--hard`` to trees with other files, a folder removed, two processes writing at once, a
bit flipped in the cache. After every step, what ``list``, ``top``, ``get``/``show`` (by
id prefix), prefix resolution (``--pid``) and the children of an experiment answer
equals the truth: the files under ``experiments/`` parsed here with PyYAML, by rules
written here, not by kexp's parser.

``test_everyday_use_fast`` runs in the default suite; ``test_everyday_use_slow``
(marked ``slow``: ``pytest -m slow``, which ``.ci/run`` runs) takes more steps and
longer pauses: ``KEXP_MODEL_STEPS`` steps (default 600; thousands locally).
"""

from __future__ import annotations

import datetime as dt
import json
import os
import random
import re
import shutil
import subprocess
import sys
import tempfile
import time
import warnings
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
import yaml
from conftest import git, init_repo
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import (
    RuleBasedStateMachine,
    invariant,
    precondition,
    rule,
)

from kexp import (
    AmbiguousIdError,
    ExperimentNotFoundError,
    KernelExperiment,
    KexpError,
    Store,
    ValidationError,
)

NAME = re.compile(r"([0-9a-f]{16})(?:-[a-z0-9-]*)?\.md")
HEX = re.compile(r"[0-9a-f]+")
REQUIRED = (
    "id",
    "pid",
    "change_summary",
    "score",
    "status",
    "is_buggy",
    "operator_sig",
    "dtype_sig",
    "env",
    "base_commit",
    "created_at",
)
STATUSES = ("new", "running", "done", "failed", "timeout")
OPERATORS = ("attn.cu: paged_attention", "gemm.cu: fp8_gemm", "cache.cu: reshape_and_cache")
OLD_NS = 1_500_000_000 * 10**9
MAX_FILES = 36


# --- the truth: the files, read with PyYAML -------------------------------------------


@dataclass
class File:
    """One experiment file as the truth sees it."""

    path: str  # relative to experiments/
    name_id: str
    fields: dict[str, Any] | None  # None: not a valid experiment

    @property
    def order(self) -> tuple[str, ...]:
        return tuple(self.path.split(os.sep))


def _error_message(body: str) -> str:
    match = re.search(r"^## Error message\n(.*?)(?=^## |\Z)", body, re.MULTILINE | re.DOTALL)
    return match.group(1).strip() if match else ""


def _valid_fields(name_id: str, text: str) -> dict[str, Any] | None:
    """The front-matter when the file is a valid experiment by the schema's and the
    per-file checks' rules (for what this model writes), else None."""
    if not text.startswith("---\n"):
        return None
    end = text.find("\n---\n", 3)
    if end < 0:
        return None
    strings = (
        "id",
        "pid",
        "change_summary",
        "operator_sig",
        "dtype_sig",
        "env",
        "base_commit",
        "created_at",
    )
    try:
        found = yaml.safe_load(text[4:end])
        root = yaml.compose(text[4:end])
    except yaml.YAMLError:
        return None
    if not isinstance(found, dict) or any(key not in found for key in REQUIRED):
        return None
    # DESIGN's rule: a plain scalar in a string field is the text written (an
    # all-digit id stays "6000000000000000", with a warning), not what YAML retypes.
    for key_node, value_node in root.value:
        if (
            key_node.value in strings
            and isinstance(value_node, yaml.ScalarNode)
            and not value_node.style
        ):
            found[key_node.value] = value_node.value
    if any(not isinstance(found[key], str) for key in strings):
        return None
    score = found["score"]
    if isinstance(score, bool) or not isinstance(score, (int, float)) or score < 0:
        return None
    if found["status"] not in STATUSES or not isinstance(found["is_buggy"], bool):
        return None
    if found["id"] != name_id or (found["pid"] and not re.fullmatch(r"[0-9a-f]{16}", found["pid"])):
        return None
    if not re.fullmatch(r"[0-9a-f]{7,64}", found["base_commit"]):
        return None
    if not re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?Z", found["created_at"]):
        return None
    summary = found["change_summary"]
    if not summary or len(summary) > 80 or "\n" in summary:
        return None
    combines = found.get("combines") or []
    if not isinstance(combines, list) or any(
        not isinstance(c, str) or not re.fullmatch(r"[0-9a-f]{16}", c) for c in combines
    ):
        return None
    if found["is_buggy"] and not _error_message(text[end + 5 :]):
        return None
    found["combines"] = combines
    return found


def read_truth(experiments: Path) -> list[File]:
    """Every ``<id>-<slug>.md`` file below ``experiments/`` (as ``os.walk`` finds them:
    hidden folders skipped, any folder walked), in path order."""
    files: list[File] = []
    for folder, dirs, names in os.walk(experiments):
        dirs[:] = sorted(d for d in dirs if not d.startswith("."))
        for name in names:
            match = NAME.fullmatch(name)
            if match is None:
                continue
            path = Path(folder, name)
            try:
                text = path.read_bytes().decode("utf-8")
            except (OSError, UnicodeDecodeError):
                fields = None
            else:
                fields = _valid_fields(match.group(1), text)
            files.append(File(str(path.relative_to(experiments)), match.group(1), fields))
    files.sort(key=lambda f: f.order)
    return files


def retired(fields: dict[str, Any]) -> bool:
    """A step marked failed after it was measured, its own score no regression."""
    score = float(fields["score"])
    return fields["status"] == "failed" and score > 0 and score >= 0.99


def _time_key(created_at: str) -> tuple[str, str]:
    seconds, _, fraction = created_at.rstrip("Z").partition(".")
    return seconds, fraction.ljust(9, "0")


class Truth:
    """What every query must answer, derived from :func:`read_truth`."""

    def __init__(self, experiments: Path) -> None:
        self.files = read_truth(experiments)
        self.valid = [f for f in self.files if f.fields is not None]
        self.by_name: dict[str, list[File]] = {}
        for f in self.files:
            self.by_name.setdefault(f.name_id, []).append(f)
        self.scores: dict[str, float] = {}
        self.first: dict[str, dict[str, Any]] = {}
        for f in self.valid:  # an id of several files counts with its first valid one
            assert f.fields is not None
            self.scores.setdefault(f.name_id, float(f.fields["score"]))
            self.first.setdefault(f.name_id, f.fields)

    def cumulative(self, fields: dict[str, Any], seen: frozenset[str] = frozenset()) -> Any:
        """The speedup over the reference (None when it cannot be known): the product of
        the scores along the pid chain back to a root or a reference measurement."""
        score = float(fields["score"])
        # A run that timed out measured nothing, whatever its score; a step retired
        # (marked failed, its measurement no regression) breaks the chain.
        if fields["status"] in ("new", "running", "timeout") or fields["is_buggy"] or score <= 0:
            return None
        if retired(fields):
            return None
        if not fields["pid"] or fields.get("measured_against") == "reference":
            return score
        parent = self.first.get(fields["pid"])
        if parent is None or fields["pid"] in seen:
            return None
        before = self.cumulative(parent, seen | {fields["pid"]})
        return None if before is None else before * score

    def outcome(self, f: File) -> str:
        fields = f.fields
        assert fields is not None
        if fields["status"] in ("new", "running"):
            return "pending"
        if fields["is_buggy"]:
            return "buggy"
        if fields["status"] == "timeout" or retired(fields):
            return "failed"
        own = self.cumulative(fields, frozenset({f.name_id}))
        if own is not None:  # a merge below the best cumulative score of those it combines
            theirs = [
                self.cumulative(self.first[c], frozenset({c}))
                for c in fields["combines"]
                if c in self.first
            ]
            known = [v for v in theirs if v is not None]
            if known and own < max(known):
                return "interference"
        else:
            combined = [self.scores[c] for c in fields["combines"] if c in self.scores]
            if combined and fields["score"] < max(combined):
                return "interference"
        step = float(fields["score"])
        if fields["pid"] and fields.get("measured_against") == "reference" and step > 0:
            # Made on a parent, timed against the reference: judged over the parent.
            parent = self.first.get(fields["pid"])
            before = None if parent is None else self.cumulative(parent, frozenset({fields["pid"]}))
            if before is not None:
                step /= before
        if step < 0.99:
            return "regression"
        return "improvement" if step > 1.01 else "marginal"

    def listing(self, operator: str | None = None) -> list[tuple[Any, ...]]:
        chosen = [
            f
            for f in self.valid
            if operator is None or operator.lower() in f.fields["operator_sig"].lower()  # type: ignore[index]
        ]
        chosen.sort(key=lambda f: (_time_key(f.fields["created_at"]), f.name_id, f.order))  # type: ignore[index]
        return [(f.name_id, f.path, float(f.fields["score"]), self.outcome(f)) for f in chosen]  # type: ignore[index]

    def top(
        self, limit: int, operator: str | None = None, by: str = "cumulative"
    ) -> list[tuple[Any, ...]]:
        chosen = [
            f
            for f in self.valid
            if not f.fields["is_buggy"]  # type: ignore[index]
            and f.fields["status"] not in ("new", "running", "timeout")  # type: ignore[index]
            and not retired(f.fields)  # type: ignore[arg-type]
            and (operator is None or operator.lower() in f.fields["operator_sig"].lower())  # type: ignore[index]
        ]
        chosen.sort(key=lambda f: (f.name_id, f.order))
        chosen.sort(key=lambda f: _time_key(f.fields["created_at"]), reverse=True)  # type: ignore[index]
        chosen.sort(key=lambda f: float(f.fields["score"]), reverse=True)  # type: ignore[index]
        if by == "cumulative":  # the steps that improved first, then the others
            # measured, then those without a cumulative score, by score
            values = {id(f): self.cumulative(f.fields, frozenset({f.name_id})) for f in chosen}  # type: ignore[arg-type]

            def tier(f: Any) -> int:
                if values[id(f)] is None:
                    return 0
                return 2 if self.outcome(f) == "improvement" else 1

            chosen.sort(key=lambda f: (tier(f), values[id(f)] or 0.0), reverse=True)
        return [(f.name_id, f.path, float(f.fields["score"])) for f in chosen[:limit]]  # type: ignore[index]

    def resolve(self, prefix: str) -> str | type[Exception]:
        """The id a prefix names, or the kind of error resolving it gives."""
        found = sorted(i for i in self.by_name if i.startswith(prefix))
        if not found:
            return ExperimentNotFoundError
        if len(found) > 1:
            return AmbiguousIdError
        if len(self.by_name[found[0]]) > 1:
            return KexpError
        return found[0]

    def get(self, prefix: str) -> tuple[Any, ...] | type[Exception]:
        resolved = self.resolve(prefix)
        if not isinstance(resolved, str):
            return resolved
        f = self.by_name[resolved][0]
        if f.fields is None:
            return ValidationError
        return (
            f.name_id,
            f.path,
            float(f.fields["score"]),
            f.fields["change_summary"],
            f.fields["pid"],
            self.outcome(f),
        )

    def children(self, exp_id: str) -> list[str]:
        return [item[0] for item in self.listing() if self._pid(item[1]) == exp_id]

    def _pid(self, path: str) -> str:
        f = next(f for f in self.valid if f.path == path)
        return f.fields["pid"]  # type: ignore[index,no-any-return]

    def named(self, exp_id: str) -> bool:
        """Whether a valid experiment names ``exp_id`` as its parent or combines it."""
        return any(
            f.fields["pid"] == exp_id or exp_id in f.fields["combines"]  # type: ignore[index]
            for f in self.valid
        )


# --- what kexp answers ----------------------------------------------------------------


def _attempt(call: Any) -> Any:
    try:
        return call()
    except AmbiguousIdError:
        return AmbiguousIdError
    except ExperimentNotFoundError:
        return ExperimentNotFoundError
    except ValidationError:
        return ValidationError
    except KexpError:
        return KexpError


# --- the machine ----------------------------------------------------------------------


@dataclass
class Pauses:
    """Real pauses between steps: short ones below the racy window, long ones above."""

    short_max_s: float
    long_s: float
    long_each_run: int  # at most this many long pauses in one run of the machine
    taken: int = field(default=0)


class EverydayUse(RuleBasedStateMachine):
    pauses = Pauses(0.3, 2.3, 2)
    steps = 0  # counted over every run, for the report

    def __init__(self) -> None:
        super().__init__()
        self.scratch = Path(tempfile.mkdtemp(prefix="kexp-model-"))
        self.root = init_repo(self.scratch / "repo")
        (self.root / "experiments").mkdir()
        (self.root / "experiments" / "README.md").write_text("# Experiments\n")
        (self.root / ".gitignore").write_text(".kexp/\n")
        git(self.root, "add", ".gitignore", "experiments")
        git(self.root, "commit", "-q", "-m", "the store")
        self.base_commits = int(git(self.root, "rev-list", "--count", "HEAD"))
        self.store = Store(self.root)
        self.experiments = self.root / "experiments"
        self.rng = random.Random(0)
        self.counter = 0
        self.pauses.taken = 0

    def teardown(self) -> None:
        shutil.rmtree(self.scratch, ignore_errors=True)

    # helpers

    def _truth(self) -> Truth:
        return Truth(self.experiments)

    def _files(self) -> list[File]:
        return read_truth(self.experiments)

    def _pick(self, files: list[File], n: int) -> File:
        return files[n % len(files)]

    def _fields(self, n: int, **overrides: Any) -> dict[str, Any]:
        self.counter += 1
        status = ("done", "done", "done", "failed", "new", "running", "timeout")[n % 7]
        buggy = status == "failed" and n % 2 == 0
        fields: dict[str, Any] = {
            "change_summary": f"Step {self.counter} try {n % 97} - +{n % 13}%",
            "score": round(0.9 + (n % 41) / 100, 2),
            "status": status,
            "is_buggy": buggy,
            "operator_sig": OPERATORS[n % len(OPERATORS)],
            "dtype_sig": ("bf16", "fp8", "fp16")[n % 3],
            "env": "MI300X, ROCm 7.0.0",
            "base_commit": "9c1d2e3f4a5b6c7d8e9f0a1b2c3d4e5f6a7b8c9d",
            "detailed_description": "**Approach**: model step",
        }
        if buggy:
            fields["error_message"] = "HIP error: illegal memory access"
        fields.update(overrides)
        return fields

    def _count(self) -> int:
        return len(self._files())

    # --- invariants: every answer equals the truth --------------------------------

    @invariant()
    def answers_equal_the_files(self) -> None:
        EverydayUse.steps += 1
        truth = self._truth()
        rel = self.experiments
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            listed = self.store.list_experiments(brief=True)
        assert [
            (e.id, str(Path(e.path or "").relative_to(rel)), float(e.score), e.outcome)
            for e in listed
        ] == truth.listing()
        warned = sorted(
            os.path.relpath(os.path.abspath(m), rel)
            for w in caught
            for m in re.findall(
                r"skipped invalid experiment file (\S+\.md)(?=[:\s]|$)", str(w.message)
            )
        )
        assert warned == sorted(f.path for f in truth.files if f.fields is None)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            top = self.store.top_experiments(5, brief=True)
            assert [
                (e.id, str(Path(e.path or "").relative_to(rel)), float(e.score)) for e in top
            ] == truth.top(5)
            by_score = self.store.top_experiments(5, brief=True, by="score")
            assert [
                (e.id, str(Path(e.path or "").relative_to(rel)), float(e.score)) for e in by_score
            ] == truth.top(5, by="score")
            operator = OPERATORS[len(truth.files) % len(OPERATORS)].split(":")[0]
            top_op = self.store.top_experiments(3, operator=operator, brief=True)
            assert [
                (e.id, str(Path(e.path or "").relative_to(rel)), float(e.score)) for e in top_op
            ] == truth.top(3, operator)
            assert [
                (e.id, str(Path(e.path or "").relative_to(rel)), float(e.score), e.outcome)
                for e in self.store.list_experiments(operator=operator, brief=True)
            ] == truth.listing(operator)
            ids = sorted(truth.by_name)
            for exp_id in ids[:: max(1, len(ids) // 3)][:4]:
                for prefix in (exp_id, exp_id[:12], exp_id[:9]):
                    assert _attempt(lambda p=prefix: self.store.resolve_id(p)) == truth.resolve(
                        prefix
                    ), prefix
                got = _attempt(lambda i=exp_id: self.store.get_experiment(i[:12]))
                if not isinstance(got, type):
                    got = (
                        got.id,
                        str(Path(got.path).relative_to(rel)),
                        float(got.score),
                        got.change_summary,
                        got.pid,
                        got.outcome,
                    )
                assert got == truth.get(exp_id[:12]), exp_id
                if isinstance(truth.resolve(exp_id), str):
                    children = [e.id for e in self.store.list_experiments(pid=exp_id, brief=True)]
                    assert children == truth.children(exp_id)

    # --- pauses ------------------------------------------------------------------

    @rule(kind=st.sampled_from(["none", "short", "long"]), fraction=st.floats(0, 1))
    def pause(self, kind: str, fraction: float) -> None:
        if kind == "short":
            time.sleep(self.pauses.short_max_s * fraction)
        elif kind == "long" and self.pauses.taken < self.pauses.long_each_run:
            self.pauses.taken += 1
            time.sleep(self.pauses.long_s)

    # --- the library ---------------------------------------------------------------

    @precondition(lambda self: self._count() < MAX_FILES)
    @rule(n=st.integers(0, 10**6), parent=st.booleans(), combine=st.booleans())
    def create(self, n: int, parent: bool, combine: bool) -> None:
        truth = self._truth()
        unique = [i for i, fs in truth.by_name.items() if len(fs) == 1]
        overrides: dict[str, Any] = {}
        if parent and unique:
            overrides["pid"] = unique[n % len(unique)]
        if combine and len(unique) >= 2:
            pair = {unique[n % len(unique)], unique[(n // 7) % len(unique)]}
            overrides["combines"] = sorted(pair)
        exp = self.store.create_experiment(**self._fields(n, **overrides))
        assert exp.path is not None and exp.path.is_file()
        self._check_written(exp)

    def _check_written(self, exp: KernelExperiment) -> None:
        """A write hands back what a query derives of the experiment, from the files:
        its cumulative score (its parent's read) and outcome."""
        truth = self._truth()
        (written,) = truth.by_name[exp.id]
        assert written.fields is not None
        expected = truth.cumulative(written.fields, frozenset({exp.id}))
        assert exp.cumulative_score == pytest.approx(expected), (exp.id, exp.cumulative_reason)
        assert exp.outcome == truth.outcome(written), exp.id

    @precondition(lambda self: self._count() < MAX_FILES)
    @rule(n=st.integers(0, 10**6), year=st.integers(2015, 2035), month=st.integers(1, 12))
    def create_in_a_new_folder(self, n: int, year: int, month: int) -> None:
        """The first experiment of a month (and often of a year) the store has not seen."""
        stamp = f"{year:04d}-{month:02d}-{1 + n % 28:02d}T{n % 24:02d}:00:{n % 60:02d}Z"
        self.store.create_experiment(**self._fields(n, created_at=stamp))

    @precondition(lambda self: self._count() > 0)
    @rule(n=st.integers(0, 10**6), what=st.sampled_from(["score", "summary", "status", "pid"]))
    def update(self, n: int, what: str) -> None:
        truth = self._truth()
        target = self._pick(truth.files, n)
        changes: dict[str, Any] = {
            "score": {"score": round(0.8 + (n % 60) / 100, 3)},
            "summary": {"change_summary": f"Corrected {n % 1000} - +{n % 9}%"},
            "status": {"status": STATUSES[n % 5]},
            "pid": {"pid": ""},
        }[what]
        expected_refusal = len(truth.by_name[target.name_id]) > 1 or target.fields is None
        outcome = _attempt(lambda: self.store.update_experiment(target.name_id, **changes))
        assert isinstance(outcome, type) == expected_refusal, (target, outcome)
        if isinstance(outcome, KernelExperiment):
            self._check_written(outcome)

    @precondition(lambda self: self._count() > 0)
    @rule(n=st.integers(0, 10**6))
    def delete(self, n: int) -> None:
        truth = self._truth()
        target = self._pick(truth.files, n)
        refused = len(truth.by_name[target.name_id]) > 1 or truth.named(target.name_id)
        outcome = _attempt(lambda: self.store.delete_experiment(target.name_id))
        assert isinstance(outcome, type) == refused, (target, outcome)
        assert (self.experiments / target.path).exists() == refused

    @precondition(lambda self: self._count() < MAX_FILES)
    @rule(n=st.integers(0, 10**6), records=st.integers(1, 3))
    def import_predecessor_records(self, n: int, records: int) -> None:
        from kexp.output.legacyimport import import_legacy

        database = {}
        for k in range(records):
            when = dt.datetime(2014 + (n + k) % 20, 1 + (n // 3 + k) % 12, 1 + k, 8, 30, 15, 123456)
            key = f"{(n * 7919 + k * 104729) % 16**16:016x}"
            database[key] = {
                "id": key,
                "pid": "",
                "score": round(0.95 + k / 50, 3),
                "raw_result": "imported",
                "dtype_sig": "fp16",
                "env": "MI250X",
                "is_buggy": False,
                "error_message": "",
                "change_summary": f"Imported {key[:6]} - +{k}%",
                "detailed_description": "from the JSON file",
                "code_change": "",
                "base_commit": "abcdef1",
                "operator_sig": OPERATORS[k % 3],
                "profiling_info": "",
                "status": "done",
                "created_at": when.strftime("%Y-%m-%dT%H:%M:%S.%fZ"),
            }
        source = self.scratch / "kernel_experiments_db.json"
        source.write_text(json.dumps(database, indent=2, sort_keys=True))
        report = import_legacy(source, self.store, check_commits=False)
        assert not report.failed

    # --- by hand -------------------------------------------------------------------

    @precondition(lambda self: self._count() < MAX_FILES)
    @rule(n=st.integers(0, 10**6), month=st.sampled_from(["2026/11", "2030/01", "2031/07"]))
    def write_a_file_by_hand(self, n: int, month: str) -> None:
        exp_id = f"{0x60000000 + n:08x}{n * 2654435761 % 16**8:08x}"
        folder = self.experiments / month
        folder.mkdir(parents=True, exist_ok=True)
        text = (
            "---\n"
            f"id: {exp_id}\n"
            "pid: ''\n"
            f'change_summary: "By hand {n % 1000} - +{n % 7}%"\n'
            f"score: {round(0.95 + (n % 30) / 100, 2)}\n"
            f"status: {('done', 'new', 'timeout')[n % 3]}\n"
            "is_buggy: false\n"
            f'operator_sig: "{OPERATORS[n % 3]}"\n'
            "dtype_sig: bf16\n"
            'env: "MI300X"\n'
            "base_commit: 0a1b2c3d4e5f\n"
            f"created_at: '{month[:4]}-{month[5:]}-0{1 + n % 9}T12:00:00Z'\n"
            "---\n\n## Detailed description\n\nWritten by hand.\n"
        )
        (folder / f"{exp_id}-by-hand.md").write_text(text)

    @precondition(lambda self: self._count() > 0)
    @rule(n=st.integers(0, 10**6))
    def delete_a_file_by_hand(self, n: int) -> None:
        (self.experiments / self._pick(self._files(), n).path).unlink()

    def _edit_in_place(self, n: int, *, restore_mtime: bool) -> None:
        target = self.experiments / self._pick(self._files(), n).path
        data = target.read_bytes()
        info = target.stat()
        match = re.search(rb"\nscore: ([0-9])\.([0-9])", data)
        if match is not None:
            digit = str((int(match.group(2)) + 1 + n % 8) % 10).encode()
            at = match.start(2)
        else:
            match = re.search(rb"\nstatus: (done|dnoe)\n", data)
            if match is None:
                return
            digit = b"dnoe" if match.group(1) == b"done" else b"done"
            at = match.start(1)
        with open(target, "r+b") as handle:  # the same file: same inode, same size
            handle.seek(at)
            handle.write(digit)
        assert target.stat().st_size == info.st_size
        if restore_mtime:
            os.utime(target, ns=(info.st_atime_ns, info.st_mtime_ns))

    @precondition(lambda self: self._count() > 0)
    @rule(n=st.integers(0, 10**6))
    def edit_in_place_same_size(self, n: int) -> None:
        self._edit_in_place(n, restore_mtime=False)

    @precondition(lambda self: self._count() > 0)
    @rule(n=st.integers(0, 10**6))
    def edit_then_put_the_old_mtime_back(self, n: int) -> None:
        self._edit_in_place(n, restore_mtime=True)

    @precondition(lambda self: self._count() > 0)
    @rule(n=st.integers(0, 10**6))
    def old_mtime_on_a_file(self, n: int) -> None:
        """``touch -d`` far into the past (a restored backup)."""
        os.utime(self.experiments / self._pick(self._files(), n).path, ns=(OLD_NS, OLD_NS))

    @precondition(lambda self: self._count() > 0)
    @rule(n=st.integers(0, 10**6), elsewhere=st.sampled_from(["slug", "folder", "md-folder"]))
    def rename(self, n: int, elsewhere: str) -> None:
        source = self.experiments / self._pick(self._files(), n).path
        exp_id = source.name[:16]
        if elsewhere == "slug":
            target = source.with_name(f"{exp_id}-renamed-{n % 100}.md")
        elif elsewhere == "folder":
            target = self.experiments / "2029" / f"{1 + n % 12:02d}" / source.name
        else:
            target = self.experiments / "2028" / "notes.md" / source.name
        if target.exists():
            return
        target.parent.mkdir(parents=True, exist_ok=True)
        source.rename(target)

    @precondition(lambda self: 0 < self._count() < MAX_FILES)
    @rule(n=st.integers(0, 10**6), where=st.sampled_from(["same", "earlier", "later"]))
    def duplicate_an_id(self, n: int, where: str) -> None:
        """A second file with the same id, as a merge of two branches can leave."""
        source = self.experiments / self._pick(self._files(), n).path
        folder = {
            "same": source.parent,
            "earlier": self.experiments / "2000" / "01",
            "later": self.experiments / "2099" / "12",
        }[where]
        folder.mkdir(parents=True, exist_ok=True)
        target = folder / f"{source.name[:16]}-twin-{n % 10}.md"
        if not target.exists():
            text = source.read_text(errors="replace")
            target.write_text(re.sub(r"\nscore: [0-9.]+\n", f"\nscore: {n % 3}.5\n", text, count=1))

    @precondition(lambda self: self._count() < MAX_FILES)
    @rule(n=st.integers(0, 10**6))
    def write_a_broken_file(self, n: int) -> None:
        folder = self.experiments / "2027" / "03"
        folder.mkdir(parents=True, exist_ok=True)
        exp_id = f"7{n:015x}"[:16]
        (folder / f"{exp_id}-broken.md").write_text(
            f"---\nid: {exp_id}\nscore: [unclosed\n---\n" if n % 2 else "no front-matter\n"
        )

    @precondition(lambda self: self._count() > 0)
    @rule(n=st.integers(0, 10**6))
    def remove_a_folder(self, n: int) -> None:
        folder = (self.experiments / self._pick(self._files(), n).path).parent
        shutil.rmtree(folder)

    # --- git ----------------------------------------------------------------------

    def _git(self, *args: str) -> bool:
        result = subprocess.run(["git", *args], cwd=self.root, capture_output=True, text=True)
        return result.returncode == 0

    def _commit(self) -> None:
        self._git("add", "-A", "experiments")
        self._git("commit", "-q", "-m", f"step {self.counter}")
        self.counter += 1

    @rule()
    def commit(self) -> None:
        self._commit()

    @rule(branch=st.sampled_from(["main", "side", "other"]))
    def checkout(self, branch: str) -> None:
        """Commit, then switch to another branch (made here when new): its tree has
        other files."""
        self._commit()
        if not self._git("checkout", "-q", branch):
            self._git("checkout", "-q", "-b", branch)

    @rule(pop=st.booleans())
    def stash(self, pop: bool) -> None:
        if pop:
            if not self._git("stash", "pop", "-q"):
                self._git("reset", "-q", "--hard")
                self._git("clean", "-q", "-fd", "experiments")
                self._git("stash", "drop", "-q")
        else:
            self._git("stash", "push", "-q", "--include-untracked")

    @rule(back=st.integers(1, 2))
    def reset_hard(self, back: int) -> None:
        """``git reset --hard`` to an earlier commit (never one before the store)."""
        count = int(git(self.root, "rev-list", "--count", "HEAD"))
        target = f"HEAD~{back}" if count - back >= self.base_commits else "HEAD"
        self._git("reset", "-q", "--hard", target)

    # --- other processes -----------------------------------------------------------

    @precondition(lambda self: self._count() < MAX_FILES - 2)
    @rule(n=st.integers(0, 10**6))
    def two_processes_write(self, n: int) -> None:
        truth = self._truth()
        unique = [f.name_id for f in truth.valid if len(truth.by_name[f.name_id]) == 1]
        target = unique[n % len(unique)] if unique else ""
        code = (
            "import sys, json; from kexp import Store\n"
            "s = Store(sys.argv[1]); fields = json.loads(sys.argv[2])\n"
            "s.create_experiment(**fields)\n"
            "if sys.argv[3]: s.update_experiment(sys.argv[3], score=float(sys.argv[4]))\n"
        )
        workers = [
            subprocess.Popen(
                [
                    sys.executable,
                    "-c",
                    code,
                    str(self.root),
                    json.dumps(self._fields(n + k)),
                    target,
                    str(1.5 + k / 10),
                ],
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                text=True,
            )
            for k in range(2)
        ]
        for worker in workers:
            _, err = worker.communicate(timeout=120)
            assert worker.returncode == 0, err

    @rule()
    def query_from_another_process(self) -> None:
        """``kexp top --json`` in its own process, while this one keeps its cache."""
        truth = self._truth()
        result = subprocess.run(
            [sys.executable, "-m", "kexp", "--root", str(self.root), "top", "--json", "-n", "5"],
            capture_output=True,
            text=True,
            timeout=120,
            cwd=self.root,
        )
        assert result.returncode == 0, result.stderr
        assert [(e["id"], float(e["score"])) for e in json.loads(result.stdout)] == [
            (i, s) for i, _, s in truth.top(5)
        ]

    @rule(n=st.integers(0, 10**9))
    def flip_a_bit_in_the_cache(self, n: int) -> None:
        caches = sorted((self.root / ".kexp").glob("cache-*.sqlite"))
        if not caches:
            return
        data = bytearray(caches[0].read_bytes())
        if data:
            data[(n // 8) % len(data)] ^= 1 << (n % 8)
            caches[0].write_bytes(bytes(data))


def _run(machine: type[EverydayUse], examples: int, steps: int) -> None:
    EverydayUse.steps = 0
    started = time.monotonic()
    test = machine.TestCase
    test.settings = settings(
        max_examples=examples,
        stateful_step_count=steps,
        deadline=None,
        suppress_health_check=list(HealthCheck),
        print_blob=True,
    )
    test("runTest").runTest()
    print(f"model: {EverydayUse.steps} checked steps in {time.monotonic() - started:.0f} s")


@pytest.mark.filterwarnings("ignore::kexp.core.errors.DuplicateIdWarning")  # twins made on purpose
def test_everyday_use_fast() -> None:
    """The model, briefly: short pauses, at most two over the racy window a run."""

    class Fast(EverydayUse):
        pauses = Pauses(0.3, 2.3, 2)

    _run(Fast, examples=4, steps=30)


@pytest.mark.filterwarnings("ignore::kexp.core.errors.DuplicateIdWarning")  # twins made on purpose
@pytest.mark.slow
def test_everyday_use_slow() -> None:
    """The model at length: pauses up to 1.9 s and over the window, unlimited."""

    class Slow(EverydayUse):
        pauses = Pauses(1.9, 2.3, 10**6)

    steps = int(os.environ.get("KEXP_MODEL_STEPS", "600"))
    _run(Slow, examples=max(1, steps // 50), steps=50)
