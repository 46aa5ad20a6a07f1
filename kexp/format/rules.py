"""The per-file rules written once: what both the full check
(:func:`kexp.format.validate.check_document`) and the quick check
(:func:`kexp.format.quickcheck.quick_fields`) decide a file by.

The name of an experiment file, the shape and reality of a timestamp, the size limit,
the fields kexp knows, ``score`` vs ``results``, and :func:`warns_if_valid`: which
valid files :func:`~kexp.format.validate.check_document` warns about (the quick check says
nothing of those, so the full check runs for them).
"""

from __future__ import annotations

import datetime as dt
import math
import os
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from kexp.core.model import ALL_FIELDS
from kexp.core.outcome import UNMEASURED_OUTCOMES, judge
from kexp.core.settings import DEFAULT_SETTINGS, Settings
from kexp.core.spelling import canonical
from kexp.format.suspect import suspect_fields

#: File names of experiments: ``<id>-<anything>.md`` (or ``<id>.md``). The slug is
#: only text: kexp writes ``[a-z0-9-]`` (:func:`slugify`), a hand-named file is read too.
#: The one rule every listing of a store applies (working tree, cache, revisions, refs,
#: changes, sync).
EXPERIMENT_NAME = re.compile(r"([0-9a-f]{16})(?:-[^/]*)?\.md", re.DOTALL)
#: The names kexp gives experiment files: ``<id>-<slug>.md`` with :func:`slugify`'s slug.
KEXP_NAME = re.compile(r"[0-9a-f]{16}(?:-[a-z0-9-]*)?\.md")
#: The one Markdown file of ``experiments/`` that is not an experiment (at its top).
README_NAME = "README.md"
_SLUG_CHARS = re.compile(r"[^a-z0-9]+")
_LEADING_ID = re.compile(r"([0-9a-fA-F]{16})(?![0-9a-fA-F])[-_ .]*(.*)", re.DOTALL)
TIMESTAMP = re.compile(r"([0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2})(?:\.[0-9]+)?Z")


def id_from_name(path: Path | str) -> str | None:
    """The id in an experiment file's name, or None if the name is not an experiment's."""
    name = path.name if isinstance(path, Path) else os.path.basename(path)
    match = EXPERIMENT_NAME.fullmatch(name)
    return match.group(1) if match else None


#: A percentage in a summary (``-7%``, ``+1.90 %``, ``−3%``, ``25%``): its sign (a ``-``
#: after a letter or digit is a hyphen, ``128-bit``), its number and decimals.
_PERCENT = re.compile(r"(?<![\w.])([+\-−]?)(\d+)(?:\.(\d+))?\s?%")
_SIGN_WORDS = {"+": "plus ", "-": "minus ", "−": "minus "}


def _spelled(match: re.Match[str]) -> str:
    """A percentage in words a slug keeps: ``-7%`` ``minus 7pct``, ``+1.90%``
    ``plus 1p90pct`` (the sign and the point that ``[a-z0-9-]`` would lose)."""
    sign, whole, decimals = match.groups()
    number = f"{whole}p{decimals}" if decimals else whole
    return f" {_SIGN_WORDS.get(sign, '')}{number}pct "


#: The most of a slug too long that its result (``<What> - <Result>``) keeps.
_RESULT_LENGTH = 20


def _slug_words(text: str) -> str:
    return _SLUG_CHARS.sub("-", _PERCENT.sub(_spelled, text).lower()).strip("-")


def _cut(slug: str, length: int) -> str:
    """``slug`` cut to ``length`` between words (a first word longer is cut short)."""
    if len(slug) <= length:
        return slug
    cut = slug[: length + 1].rpartition("-")[0]
    return (cut or slug[:length]).rstrip("-")


def slugify(summary: str, max_length: int = 48) -> str:
    """The file-name slug of a change summary: lowercase ``[a-z0-9-]``, ≤ 48 chars.

    A percentage keeps its sense (``-7%``: ``minus-7pct``, ``+1.90%``: ``plus-1p90pct``)
    and a slug too long is cut between words, never inside one (a number cut short,
    ``-1`` of ``+15%``, reads as another figure, or a collision's suffix), the start of
    its result (``<What> - <Result>``) kept: what the change did is cut instead."""
    slug = _slug_words(summary)
    if len(slug) > max_length:
        what, separator, result = summary.rpartition(" - ")
        kept = _cut(_slug_words(result), _RESULT_LENGTH) if separator else ""
        what_slug = _cut(_slug_words(what), max_length - len(kept) - 1) if kept else ""
        slug = f"{what_slug}-{kept}" if what_slug else _cut(slug, max_length)
    return slug or "experiment"


def is_stray(relative: str) -> bool:
    """Whether a file of ``experiments/`` (``relative``: its path below the folder, with
    '/') is a Markdown file kexp does not read: a ``.md`` name (in any case) that is
    neither an experiment's nor the folder's README. Hidden files and files in hidden
    folders (writers' temporary files, editors' swap files) are never strays."""
    name = relative.rsplit("/", 1)[-1]
    return (
        name[-3:].lower() == ".md"
        and relative != README_NAME
        and EXPERIMENT_NAME.fullmatch(name) is None
        and not any(part.startswith(".") for part in relative.split("/"))
    )


def canonical_name(name: str, exp_id: str | None = None, summary: str | None = None) -> str:
    """The name kexp would give a file now named ``name``: ``<id>-<slug>.md``, with the
    id of its front-matter (``exp_id``) or the one its name starts with, and the slug of
    ``summary`` (else of the rest of the name). ``<id>-<slug>.md`` with the words to
    fill in when no id is known."""
    stem = name[:-3] if name[-3:].lower() == ".md" else name
    leading = _LEADING_ID.fullmatch(stem)
    if exp_id is None and leading is not None:
        exp_id = leading.group(1).lower()
    rest = leading.group(2) if leading is not None else stem
    if exp_id is None:
        return "<id>-<slug>.md"
    slug = slugify(summary) if summary else _SLUG_CHARS.sub("-", rest.lower()).strip("-")
    return f"{exp_id}-{slug[:48].rstrip('-')}.md" if slug else f"{exp_id}.md"


def encoded_size(data: bytes | str, limit: int) -> int | None:
    """The size in bytes of ``data`` as a file holds it (UTF-8) when it is over
    ``limit``, else None (text well under the limit is not encoded to find out)."""
    if isinstance(data, bytes):
        return len(data) if len(data) > limit else None
    if len(data) * 4 <= limit:  # at most 4 bytes a character
        return None
    size = len(data) if len(data) > limit else len(data.encode("utf-8", "surrogatepass"))
    return size if size > limit else None


#: Days already checked by :func:`is_real_time` (they repeat), bounded in size.
_REAL_DAYS: dict[str, bool] = {}
_REAL_DAYS_SIZE = 4096


def is_real_time(stamp: str) -> bool:
    """Whether ``YYYY-MM-DDTHH:MM:SS`` (digits where the letters are) is a real date and
    time: what ``datetime.strptime(stamp, "%Y-%m-%dT%H:%M:%S")`` accepts."""
    day = _REAL_DAYS.get(stamp[:10])
    if day is None:
        try:
            dt.date(int(stamp[0:4]), int(stamp[5:7]), int(stamp[8:10]))
            day = True
        except ValueError:
            day = False
        if len(_REAL_DAYS) >= _REAL_DAYS_SIZE:
            _REAL_DAYS.clear()
        _REAL_DAYS[stamp[:10]] = day
    # Two digits each: comparing the texts compares the numbers.
    return day and stamp[11:13] < "24" and stamp[14:16] < "60" and stamp[17:19] < "60"


def score_results_mismatch(score: Any, results: Any, tolerance: float) -> float | None:
    """The geometric mean of ``results`` speedups when ``score`` disagrees with it."""
    if not isinstance(results, list) or not results or isinstance(score, bool):
        return None
    if not isinstance(score, (int, float)):
        return None
    speedups: list[float] = []
    for item in results:
        value = item.get("speedup") if isinstance(item, dict) else None
        if not isinstance(value, (int, float)) or isinstance(value, bool):
            return None
        if not (value > 0 and math.isfinite(value)):
            return None
        speedups.append(float(value))
    mean = math.exp(sum(math.log(s) for s in speedups) / len(speedups))
    if abs(score - mean) > tolerance * mean:
        return mean
    return None


#: Every field kexp knows: any other is an ``unknown-field`` warning.
KNOWN_FIELDS = frozenset(ALL_FIELDS)


def missing_measured_against(fields: Mapping[str, Any]) -> bool:
    """Whether a file with a parent does not say what its score is measured against
    (``measured_against``): a warning (the score then counts as a step over the parent,
    kexp's convention), but for a file whose score measures nothing (buggy, pending, a
    run that failed or timed out with score 0)."""
    pid = fields.get("pid")
    if not isinstance(pid, str) or not pid.strip() or fields.get("measured_against") is not None:
        return False
    status, score = fields.get("status"), fields.get("score")
    return judge(status, fields.get("is_buggy") is True, False, score, None) not in (
        UNMEASURED_OUTCOMES
    )


#: The fields that place an experiment in its campaign (an operator × dtype × env): what
#: top, stats, review and context group experiments by.
CAMPAIGN_FIELDS = ("operator_sig", "dtype_sig", "env")


def campaign_missing(fields: Mapping[str, Any]) -> list[str]:
    """The fields of :data:`CAMPAIGN_FIELDS` a root (no ``pid``: a step takes its
    parent's when recorded) leaves empty: a warning at record and in validation (it is
    in no operator's campaign). A value of another type is the schema's error."""
    pid = fields.get("pid")
    if isinstance(pid, str) and pid.strip():
        return []
    return [
        name
        for name in CAMPAIGN_FIELDS
        if fields.get(name) is None or (isinstance(fields[name], str) and not fields[name].strip())
    ]


def listed(names: list[str]) -> str:
    """``names`` in words: ``a``, ``a and b``, ``a, b and c``."""
    return " and ".join([", ".join(names[:-1]), names[-1]] if len(names) > 1 else names)


def warns_if_valid(fields: Mapping[str, Any], settings: Settings = DEFAULT_SETTINGS) -> bool:
    """Whether :func:`check_document` reports a warning for a file without errors whose
    front-matter holds ``fields``: ``score`` far from ``results``, an unknown field, a
    suspect measurement, a parent without ``measured_against``, or a root without its
    campaign (:func:`campaign_missing`).

    These are its only warnings besides those of the YAML reader (values it would retype)
    and those of the ``## Samples`` section (:mod:`kexp.format.samples`), which
    :func:`kexp.format.quickcheck.quick_fields` never accepts; a warning added to
    :func:`check_document` must be added here too (tests check the two agree).
    """
    if not KNOWN_FIELDS.issuperset(fields):
        return True
    if missing_measured_against(fields) or suspect_fields(fields, settings):
        return True
    if campaign_missing(fields):
        return True
    results = fields.get("results")
    return bool(results) and (
        score_results_mismatch(fields.get("score"), results, settings.score_tolerance) is not None
    )


#: What two spellings of one env may differ in: case, punctuation and spaces.
_NOT_FOLDED = re.compile(r"[\W_]+")
#: What is kept of them: a ``+``, and a ``-`` that ends a word (a feature on or off:
#: ``gfx90a:xnack+`` is not ``gfx90a:xnack-``).
_KEPT = re.compile(r"(\+|(?<=[^\W_])-(?![^\W_]))")


#: A vendor's name before a GPU's (nvidia-smi's ``NVIDIA H100``), at the start of a part.
_VENDOR = re.compile(r"(^|[,:/(])\s*(?:nvidia|amd instinct|amd)\s+")


def spelt_otherwise_effect(env: str, other: str) -> str:
    """What recording ``env``, ``other`` spelt otherwise (:func:`folded_env`), does: one
    campaign to every read when kexp's spelling makes them one (``MI300X ROCm-6.2``:
    :func:`kexp.core.spelling.campaign_key`), else a campaign of its own."""
    if canonical("env", env) == canonical("env", other):
        return "kexp reads both as one campaign, but grep and the files see two spellings"
    return "kexp stats, tree and review count each a campaign of its own"


def folded_env(env: str) -> str:
    """``env`` with case, punctuation, spaces and a vendor's name before a GPU's folded
    away: what two spellings of one machine share (``H100 SXM, CUDA 12.4``, ``h100 sxm
    cuda12.4`` and ``NVIDIA H100-SXM, CUDA 12.4``, as kexp's filters read them); a ``+``
    and a ``-`` that ends a word are kept (``xnack+`` and ``xnack-`` are two envs); a GPU
    as a tool names it is its model (``NVIDIA H100 80GB HBM3`` is ``H100 SXM5 80GB``:
    :func:`kexp.core.gpunames.in_model_words`)."""
    # lazy: only a check of envs needs the table of GPU names
    from kexp.core.gpunames import in_model_words

    parts = _KEPT.split(_VENDOR.sub(r"\1", in_model_words(env).casefold()))
    return "".join(part if at % 2 else _NOT_FOLDED.sub("", part) for at, part in enumerate(parts))
