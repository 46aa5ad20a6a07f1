"""Validation of one file: schema plus the semantic checks a schema cannot express, one
report.

The schema (structure and types), file name vs id, finite score, a buggy experiment's
error message, a real ``created_at``, ``score`` vs ``results``, ``score_ci`` holding the
score and the ``## Samples`` section vs ``results`` (see :mod:`kexp.format.samples`),
unknown fields, a root without its campaign (operator, dtype, env). The file is read by
:mod:`kexp.format.reading`; the checks across the store's files are
:mod:`kexp.format.storechecks`.
"""

from __future__ import annotations

import dataclasses
import math
from pathlib import Path

from kexp.core.advice import CAMPAIGN_OPTIONS, ERROR_MESSAGE
from kexp.core.model import KernelExperiment
from kexp.core.problems import Problem, has_errors
from kexp.core.settings import DEFAULT_SETTINGS, Settings
from kexp.format.fileformat import Document, FileFormatError, parse
from kexp.format.legacykeys import is_legacy_key, legacy_problems
from kexp.format.reading import error_problem, read_or_problem, size_problem
from kexp.format.rules import (
    KNOWN_FIELDS,
    TIMESTAMP,
    campaign_missing,
    encoded_size,
    id_from_name,
    is_real_time,
    listed,
    missing_measured_against,
    score_results_mismatch,
)
from kexp.format.suspect import suspect_problems

#: The validation code of a child that does not say what its score is measured against.
MEASURED_AGAINST_MISSING = "measured-against-missing"
#: The validation code of a root without operator_sig, dtype_sig or env.
CAMPAIGN_MISSING = "campaign-missing"


@dataclasses.dataclass
class CheckedFile:
    """The outcome of reading and checking one file."""

    path: Path
    document: Document | None
    problems: list[Problem]

    @property
    def ok(self) -> bool:
        """Whether the file holds a valid experiment (warnings allowed)."""
        return self.document is not None and not has_errors(self.problems)

    def experiment(self) -> KernelExperiment:
        """The experiment; only meaningful when :attr:`ok`."""
        assert self.document is not None
        return self.document.to_experiment()


def read_and_check(path: Path, settings: Settings = DEFAULT_SETTINGS) -> CheckedFile:
    """Read one file (refusing oversize files and symbolic links) and check it."""
    data = read_or_problem(path, settings)
    if isinstance(data, Problem):
        return CheckedFile(path, None, [data])
    return check_bytes(data, path, settings)


def check_bytes(
    data: bytes | str, path: Path, settings: Settings = DEFAULT_SETTINGS
) -> CheckedFile:
    """Parse and check the text of one experiment file.

    Canonical front-matter is read by the fast path; a file with any problem is read
    again exactly, so every problem is reported at its line. Text over
    ``settings.max_file_bytes`` is one ``file-too-large`` problem, wherever it comes
    from: a file, a git blob, or what a write is about to store (every write checks
    its text here first, so none can store a file that reads would refuse).
    """
    oversize = encoded_size(data, settings.max_file_bytes)
    if oversize is not None:
        return CheckedFile(path, None, [size_problem(path, oversize, settings.max_file_bytes)])
    try:
        doc = parse(data, path, fast=True)
        if doc.exact_positions:
            return CheckedFile(path, doc, check_document(doc, settings))
        problems = check_document(doc, settings)
        if not problems:
            return CheckedFile(path, doc, problems)
        doc = parse(data, path)
    except FileFormatError as exc:
        return CheckedFile(path, None, exc.problems)
    return CheckedFile(path, doc, check_document(doc, settings))


def _warning(
    path: Path | str, line: int, column: int, code: str, field: str, message: str, hint: str
) -> Problem:
    return Problem(str(path), line, column, "warning", code, field, message, hint)


def check_document(doc: Document, settings: Settings = DEFAULT_SETTINGS) -> list[Problem]:
    """Schema and per-file semantic problems of a parsed document."""
    # lazy: not every command that imports this module needs kexp.format.schema
    from kexp.format.schema import schema_problems

    problems = list(doc.problems)
    problems.extend(schema_problems(doc))
    fields = doc.fields
    path = doc.path

    def at(name: str) -> tuple[int, int]:
        return doc.position((name,))

    name_id = id_from_name(path)
    file_id = fields.get("id")
    if name_id is not None and isinstance(file_id, str) and file_id != name_id:
        problems.append(
            error_problem(
                path,
                *at("id"),
                "id-mismatch",
                "id",
                f"id {file_id!r} differs from the id in the file name ({name_id})",
                "ids never change: restore the id, or rename the file to "
                f"{file_id}-<slug>.md if the id is right",
            )
        )
    score = fields.get("score")
    if isinstance(score, float) and not math.isfinite(score):
        problems.append(
            error_problem(
                path,
                *at("score"),
                "score-not-finite",
                "score",
                f"score must be a finite number, not {score}",
                "write the measured speedup, or 0 when nothing was measured",
            )
        )
    if fields.get("is_buggy") is True and not doc.body_values()["error_message"].strip():
        problems.append(
            error_problem(
                path,
                *at("is_buggy"),
                "buggy-without-error",
                "error_message",
                "is_buggy is true but there is no '## Error message' section",
                f"give the error type and message ({ERROR_MESSAGE}; in a file, a "
                "'## Error message' section), or set is_buggy: false",
            )
        )
    created = fields.get("created_at")
    stamp = TIMESTAMP.fullmatch(created) if isinstance(created, str) else None
    # Only the date and time of day: Python 3.10's fromisoformat refuses fractions of
    # other than 3 or 6 digits, and the schema checks the shape.
    if stamp is not None and not is_real_time(stamp.group(1)):
        problems.append(
            error_problem(
                path,
                *at("created_at"),
                "bad-timestamp",
                "created_at",
                f"created_at {created!r} is not a real date and time",
                "write a UTC time such as '2026-11-29T15:52:36Z'",
            )
        )
    mismatch = score_results_mismatch(score, fields.get("results"), settings.score_tolerance)
    if mismatch is not None:
        problems.append(
            _warning(
                path,
                *at("score"),
                "score-results-mismatch",
                "score",
                f"score {score} differs from the geometric mean of results' "
                f"speedups ({mismatch:.4f}) by more than "
                f"{settings.score_tolerance:.1%}",
                "correct score or results (kexp computes score from timings)",
            )
        )
    if missing_measured_against(fields):
        problems.append(
            _warning(
                path,
                *at("pid"),
                MEASURED_AGAINST_MISSING,
                "measured_against",
                "it has a parent but does not say what its score is a speedup over "
                "(measured_against); it counts as a step over the parent",
                "write 'measured_against: parent' when score is the speedup over the "
                "parent experiment's code (what kexp records from timings), or "
                "'measured_against: reference' when it is over the operator's original "
                "code (as the predecessor's records were)",
            )
        )
    missing = campaign_missing(fields)
    if missing:
        problems.append(
            _warning(
                path,
                *at(missing[0]),
                CAMPAIGN_MISSING,
                missing[0],
                f"a root (no pid) with an empty {listed(missing)}: in no operator's "
                "campaign (top, stats and context group by them)",
                f"write {listed(missing)} (when recording: {CAMPAIGN_OPTIONS})",
            )
        )
    problems.extend(suspect_problems(doc, settings))
    problems.extend(_sample_problems(doc))
    problems.extend(legacy_problems(doc))
    for key in fields:
        if key not in KNOWN_FIELDS and not is_legacy_key(key):
            problems.append(
                _warning(
                    path,
                    *at(key),
                    "unknown-field",
                    key,
                    f"unknown field {key!r} (kept, but kexp does not use it)",
                    "check the spelling against schema/experiment.schema.json",
                )
            )
    return problems


def _sample_problems(doc: Document) -> list[Problem]:
    """``score_ci`` must hold the score; the ``## Samples`` section must be readable and
    give the ``results``, ``score`` and ``score_ci`` recorded (see :mod:`kexp.format.samples`)."""
    fields = doc.fields
    samples = doc.body_values()["samples"]
    if "score_ci" not in fields and not samples:
        return []
    # lazy: not every command that imports this module needs kexp.format.samples
    from kexp.format.samples import sample_findings

    problems = []
    for finding in sample_findings(fields, samples):
        if finding.section_line is not None:
            # The section's text starts on the second line after its heading.
            line, column = doc.section_line("samples") + 1 + finding.section_line, 1
        elif finding.path:
            line, column = doc.position(finding.path)
        else:
            line, column = doc.section_line("samples"), 1
        problems.append(
            Problem(
                doc.path,
                line,
                column,
                finding.severity,
                finding.code,
                finding.field,
                finding.message,
                finding.hint,
            )
        )
    return problems
