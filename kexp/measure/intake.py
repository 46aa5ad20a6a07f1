"""Recording experiments from documents and flags: the library side of ``kexp add``.

* :func:`parse_document` reads the fields of a new experiment from a YAML or JSON
  mapping, or from an experiment file (Markdown with front-matter), strictly: duplicate
  keys, unknown fields and non-mappings are errors at their line.
* :func:`record` is the Python twin of ``kexp add``: it resolves id prefixes in ``pid``
  and ``combines``, computes the score from timings when given, and creates the
  experiment (validated first; nothing is written if it is invalid).
* :func:`diff_against` is the ``git diff`` of the code repository against a commit;
  :func:`take_git_diff` records it as the change (``kexp add --diff-from-git``, the
  ``record`` tool's ``diff_from_git``).
"""

from __future__ import annotations

import json
import warnings
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from kexp.core.advice import TAKE_UNTRACKED
from kexp.core.errors import KexpWarning, MeasurementError, ValidationError
from kexp.core.fields import STRING_FIELDS
from kexp.core.model import ALL_FIELDS, BODY_FIELDS, KernelExperiment
from kexp.core.problems import Problem
from kexp.format.fileformat import FileFormatError, parse
from kexp.format.yamlio import YamlReadError, read_mapping

if TYPE_CHECKING:
    from kexp.storage.store import Store

#: Keys a document may hold besides the fields: derived values, ignored so that the
#: output of ``kexp show --json`` (or one record of ``kexp export``) can be fed back.
IGNORED_KEYS = frozenset(
    {
        "outcome",
        "outcome_reason",
        "suspect",
        "path",
        "cumulative_score",
        "cumulative_ci",
        "cumulative_reason",
    }
)
_DOCUMENT_TEXT_FIELDS = STRING_FIELDS | frozenset(BODY_FIELDS)


def _invalid(source: str, line: int, column: int, code: str, message: str, hint: str) -> None:
    raise ValidationError(
        f"{source} is not a valid experiment document",
        [Problem(source, line, column, "error", code, "", message, hint)],
    )


class _DuplicateKey(ValueError):
    def __init__(self, key: str) -> None:
        self.key = key
        super().__init__(key)


def _no_duplicates(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    result: dict[str, Any] = {}
    for key, value in pairs:
        if key in result:
            raise _DuplicateKey(key)
        result[key] = value
    return result


def _reject_constant(name: str) -> Any:
    raise ValueError(f"{name} is not a number kexp accepts")


def _parse_json(text: str, source: str) -> Any:
    try:
        return json.loads(text, object_pairs_hook=_no_duplicates, parse_constant=_reject_constant)
    except _DuplicateKey as exc:
        _invalid(
            source,
            1,
            1,
            "json-duplicate-key",
            f"duplicate key {exc.key!r}",
            "give each field once",
        )
    except json.JSONDecodeError as exc:
        _invalid(
            source,
            exc.lineno,
            exc.colno,
            "json-syntax",
            f"JSON syntax error: {exc.msg}",
            "check commas, quotes and brackets near this position",
        )
    except RecursionError:
        _invalid(
            source,
            1,
            1,
            "json-too-deep",
            "the JSON is nested too deep to read",
            "an experiment's values nest a few levels at most",
        )
    except ValueError as exc:  # NaN, or an integer of more digits than Python converts
        _invalid(source, 1, 1, "json-syntax", str(exc), "write finite numbers")
    return None  # pragma: no cover - _invalid always raises


def _parse_markdown(text: str, source: str) -> dict[str, Any]:
    # lazy: not every command that imports this module needs kexp.measure.template
    from kexp.measure.template import strip_guidance

    try:
        doc = parse(strip_guidance(text), source)
    except FileFormatError as exc:
        raise ValidationError(
            f"{source} is not a valid experiment document", [exc.problem]
        ) from None
    fields: dict[str, Any] = dict(doc.fields)
    for name, value in doc.body_values().items():
        if value.strip():
            fields[name] = value.strip("\n")
    if doc.preamble.strip():
        fields["preamble"] = doc.preamble
    extra = [(s.heading, s.text) for s in doc.sections if s.field is None]
    if extra:
        fields["extra_sections"] = extra
    return fields


def _refuse_list(text: str, source: str) -> None:
    """Refuse a JSON list of records (what ``kexp export --format json`` writes): one
    document records one experiment."""
    try:
        data = json.loads(text)
    except (ValueError, RecursionError):
        return  # not JSON: read as YAML, which says what is wrong
    if isinstance(data, list):
        _invalid(
            source,
            1,
            1,
            "document-is-a-list",
            f"the document is a list of {len(data)} record(s) (as kexp export --format json "
            "writes them); one document records one experiment",
            "feed one record per kexp add: the jsonl export (kexp export --format jsonl) "
            "writes one record a line",
        )


def parse_document(text: str, source: str = "<stdin>") -> dict[str, Any]:
    """The fields of a new experiment from ``text``.

    ``text`` is a JSON object, a YAML mapping, or an experiment file (it starts with a
    ``---`` line: front-matter plus ``## `` sections). Unknown keys are an error; the
    derived ``outcome`` and ``path`` are ignored. Raises :class:`ValidationError` with
    the problem's position in ``text``.
    """
    if text.startswith("\ufeff"):
        text = text[1:]
    stripped = text.lstrip()
    if not stripped:
        _invalid(
            source,
            1,
            1,
            "empty-document",
            "the document is empty",
            "give the fields as YAML or JSON, e.g. {change_summary: ..., score: 1.02}",
        )
    if stripped.startswith("["):
        _refuse_list(text, source)
    if stripped.startswith("{"):
        data = _parse_json(text, source)
    elif text.startswith("---\n") or text.startswith("---\r\n"):
        data = _parse_markdown(text, source)
    else:
        try:
            data = read_mapping(text, _DOCUMENT_TEXT_FIELDS).values
        except YamlReadError as exc:
            issue = exc.issue
            _invalid(
                source, issue.line + 1, issue.column + 1, issue.code, issue.message, issue.hint
            )
    if not isinstance(data, dict):
        _invalid(
            source,
            1,
            1,
            "document-not-mapping",
            "the document must be a mapping of field names to values",
            "write one 'field: value' per line (YAML) or a JSON object",
        )
    fields = {k: v for k, v in data.items() if k not in IGNORED_KEYS}
    allowed = set(ALL_FIELDS) | {"preamble", "extra_sections", "extra_fields"}
    unknown = sorted(str(k) for k in fields if k not in allowed)
    if unknown:
        _invalid(
            source,
            1,
            1,
            "unknown-field",
            f"unknown field(s): {', '.join(unknown)}",
            f"fields are: {', '.join(ALL_FIELDS)}",
        )
    kept = _kept_content_problem(fields)
    if kept is not None:
        _invalid(source, 1, 1, "wrong-type", kept, "give them as kexp export writes them")
    if isinstance(fields.get("extra_sections"), list):
        fields["extra_sections"] = [tuple(pair) for pair in fields["extra_sections"]]
    for name in BODY_FIELDS:
        if name in fields and not isinstance(fields[name], str):
            _invalid(
                source,
                1,
                1,
                "wrong-type",
                f"{name} must be text, not {type(fields[name]).__name__}",
                "quote the value, or use a YAML block scalar ('|')",
            )
    return fields


def _kept_content_problem(fields: dict[str, Any]) -> str | None:
    """What is wrong with the ``preamble``, ``extra_sections`` and ``extra_fields`` of a
    document (None: nothing)."""
    if "preamble" in fields and not isinstance(fields["preamble"], str):
        return "preamble must be text"
    sections = fields.get("extra_sections", [])
    if not isinstance(sections, list) or not all(
        isinstance(pair, (list, tuple))
        and len(pair) == 2
        and all(isinstance(part, str) for part in pair)
        for pair in sections
    ):
        return "extra_sections must be a list of [heading, text] pairs"
    extra = fields.get("extra_fields", {})
    if not isinstance(extra, dict):
        return "extra_fields must be a mapping of front-matter keys to values"
    known = [str(key) for key in extra if key in ALL_FIELDS]
    if known:
        return f"extra_fields holds the field(s) {', '.join(known)}: give them as fields"
    return None


def record(
    store: Store,
    fields: dict[str, Any],
    *,
    baseline: Path | str | Mapping[str, Any] | None = None,
    candidate: Path | str | Mapping[str, Any] | None = None,
    table: Path | str | None = None,
    stat: str = "median",
    unit: str | None = None,
    keep_samples: bool = True,
    parent_default: bool = True,
    kernel: str | None = None,
    profiling_file: str | None = None,
) -> KernelExperiment:
    """Record a new experiment from ``fields`` (id prefixes allowed in pid/combines).

    With timings (``baseline`` and ``candidate`` files or ``{config: times}`` dicts, or
    one ``table``; times in ``unit`` unless the file says; None: microseconds, assumed),
    ``score``, ``results`` and the ``raw_result`` breakdown are computed from them, and
    from repeated timings ``score_ci`` and the ``## Samples`` section (see
    :func:`kexp.measure.record.record_iteration`); otherwise ``score`` must be given;
    with a ``pid`` and no ``measured_against``, ``parent`` is written unless not
    ``parent_default``. ``kernel`` names the one kernel of an nsys kernel summary (the
    timings) and of ncu profiling (``profiling_info``) that is recorded
    (:func:`kexp.measure.timings.kernel_named`); with neither, it is refused.
    ``profiling_file``: the file ``profiling_info`` was read from, named in what is said
    of it. Returns the experiment with ``id``, ``created_at`` and ``path`` set; see
    :meth:`kexp.Store.create_experiment` for what is filled in and checked.
    """
    # lazy: not every command that imports this module needs kexp.measure.record
    from kexp.measure.record import record_iteration
    from kexp.measure.timings import kernel_named, kernel_unused

    with kernel_named(kernel, profiling_file):
        timed = baseline is not None or candidate is not None or table is not None
        unused = kernel_unused(timed, str(fields.get("profiling_info") or ""))
        if unused is not None:
            raise MeasurementError(unused)
        return record_iteration(
            store,
            baseline=baseline,
            candidate=candidate,
            table=table,
            stat=stat,
            unit=unit,
            keep_samples=keep_samples,
            parent_default=parent_default,
            **store.resolve_references(fields),
        )


def diff_against(store: Store, base_commit: str | None = None) -> tuple[str, str]:
    """(the full hash of ``base_commit``, ``HEAD`` when None; the ``git diff`` of the
    code repository's working tree against it, leaving out the store's
    ``experiments/`` folder): the base and the change measured on it, which a new
    experiment records together (so an uncommitted change is not ``uncommitted-base``).

    Untracked files that are not ignored and are source code are part of it, as new
    files (as ``git add -N`` shows them; the repository's index is left alone); a warning
    names them, and the untracked files left out (a log, a profiler's dump, a file over
    ``max_file_bytes``) with why.
    """
    # lazy: not every command that imports this module needs kexp.gitops.git
    from kexp.gitops import git as kgit
    from kexp.gitops import log as gitlog

    repo = kgit.open_repo(store.code_repo)
    commit = kgit.resolve_commit(repo, base_commit) if base_commit else kgit.head_commit(repo)
    found = gitlog.working_tree_diff(
        repo, commit, exclude=store.experiments_dir, max_bytes=store.settings.max_file_bytes
    )
    note = untracked_note(found.taken, found.left_out)
    if note:
        warnings.warn(note, KexpWarning, stacklevel=2)
    return commit, found.text


#: The untracked files an answer names at most in each list (the rest are counted).
NAMED_UNTRACKED = 8


def untracked_note(taken: Sequence[str], left_out: Sequence[tuple[str, str]]) -> str:
    """``the git diff took 1 untracked file in as new: kernels/fused.py; left out 2
    untracked file(s): run.log (not source code), ...: git add -N PATH takes one in``;
    "" when there were none."""

    def listed(names: Sequence[str]) -> str:
        more = len(names) - NAMED_UNTRACKED
        return ", ".join(names[:NAMED_UNTRACKED]) + (f" and {more} more" if more > 0 else "")

    said = []
    if taken:
        said.append(f"the git diff took {len(taken)} untracked file(s) in as new: {listed(taken)}")
    if left_out:
        why = [f"{name} ({reason})" for name, reason in left_out]
        said.append(
            f"{'it' if taken else 'the git diff'} left out {len(left_out)} untracked file(s): "
            f"{listed(why)}: {TAKE_UNTRACKED}"
        )
    return "; ".join(said)


def take_git_diff(store: Store, fields: dict[str, Any]) -> None:
    """Set ``fields``' ``code_change`` to the ``git diff`` against their ``base_commit``
    (``HEAD`` when none; :func:`diff_against`) and ``base_commit`` to its full hash, as
    ``kexp add --diff-from-git`` does; an empty diff is warned of (recorded all the
    same: the measurement is worth keeping)."""
    fields["base_commit"], fields["code_change"] = diff_against(
        store, fields.get("base_commit") or None
    )
    if not fields["code_change"]:
        warnings.warn("git diff is empty: no code change recorded", KexpWarning, stacklevel=2)
