"""The ``kexp new`` draft: a prefilled experiment file with guidance comments.

:func:`prefill` chooses the starting values (a new id, ``created_at``, ``base_commit``
from git, ``env`` detected or taken from the parent), :func:`draft_text` writes them as
an experiment file with the recording guidance as comments, and :func:`read_draft`
turns the saved text back into an experiment, with problems reported at the draft's
own lines. The editor loop itself lives in the command.
"""

from __future__ import annotations

import dataclasses
import re
import textwrap
from pathlib import Path
from typing import TYPE_CHECKING

from kexp.core.errors import KexpError
from kexp.core.fields import BODY_FIELDS, FIELDS
from kexp.core.model import KernelExperiment, attach
from kexp.core.problems import Problem
from kexp.format.fileformat import DIFF_INFO, FileFormatError, parse, render_section_text
from kexp.format.validate import check_document
from kexp.format.yamlio import render_field

if TYPE_CHECKING:
    from kexp.core.settings import Settings
    from kexp.format.fileformat import Document
    from kexp.storage.store import Store

#: Guidance comments start with this and end with ``-->``; they are removed on save.
GUIDANCE_OPEN = "<!-- kexp:"
GUIDANCE_CLOSE = "-->"
_WIDTH = 88
#: The labels of a detailed description, as the recording guidance asks for them.
DESCRIPTION_LABELS = ("Approach", "Result", "Why it worked/failed", "Key insight")

_HEADER = """\
# kexp new: describe the experiment, then save and close the editor to record it.
# Comment lines ('#') and the 'kexp:' notes below are removed when you save.
# Save an empty file to abort. If the file has problems, you can edit it again.
"""
#: The front-matter a template offers: every field but those kexp fills or computes.
_TEMPLATE_FIELDS = tuple(f for f in FIELDS if f.in_front_matter and f.template)
#: The sections a template offers: every one but the raw samples kexp writes.
_TEMPLATE_SECTIONS = tuple(f for f in FIELDS if not f.in_front_matter and f.template)
_GUIDANCE_BLOCK = re.compile(re.escape(GUIDANCE_OPEN) + r".*?" + re.escape(GUIDANCE_CLOSE), re.S)
_BLANK_FIELD = re.compile(
    r"(pid|change_summary|operator_sig|dtype_sig|env|base_commit|author)[ \t]*:[ \t]*"
)
_EMPTY_LABEL = re.compile(
    r"^\s*\*\*(?:" + "|".join(re.escape(label) for label in DESCRIPTION_LABELS) + r")\*\*:\s*$"
)


def prefill(
    store: Store,
    parent: KernelExperiment | None = None,
    *,
    env: str | None = None,
    now: str | None = None,
) -> KernelExperiment:
    """The starting values of a new experiment.

    A new id and ``created_at``; ``base_commit`` from the code repository's ``HEAD``
    (left empty when there is none); from ``parent``: ``pid``, ``operator_sig``,
    ``dtype_sig`` and ``env``; otherwise ``env`` as given, else detected
    (:func:`kexp.measure.envinfo.detect_env`). ``measured_against``: ``parent`` with a parent
    (each change measured against the code it was made on), else ``reference``.
    """
    # A new id and created_at (with microseconds, as every writer stamps it) from one
    # reading of the clock, made when the object is built.
    exp = KernelExperiment(status="done")
    if now:
        exp.created_at = now
    exp.measured_against = "reference"
    if parent is not None:
        exp.measured_against = "parent"
        exp.pid = parent.id
        exp.operator_sig = parent.operator_sig
        exp.dtype_sig = parent.dtype_sig
        exp.env = parent.env
    if env is not None:
        exp.env = env
    elif parent is None:
        # lazy: not every command that imports this module needs kexp.measure.envinfo
        from kexp.measure.envinfo import detect_env

        exp.env = detect_env().describe()
    exp.base_commit = _head(store)
    return exp


def _head(store: Store) -> str:
    # lazy: not every command that imports this module needs kexp.gitops.git
    from kexp.gitops import git as kgit

    repo = kgit.find_repo(store.code_repo)
    if repo is None:
        return ""
    try:
        return kgit.head_commit(repo)
    except KexpError:
        return ""


def _note(text: str) -> str:
    wrapped = textwrap.wrap(f"{GUIDANCE_OPEN} {text} {GUIDANCE_CLOSE}", _WIDTH)
    return "\n".join(wrapped)


def draft_text(exp: KernelExperiment) -> str:
    """The draft ``kexp new`` opens: the fields of ``exp``, the section headings, and the
    guidance as comments (removed by :func:`strip_guidance`).
    """
    lines = ["---\n", _HEADER]
    for field in _TEMPLATE_FIELDS:
        name = field.name
        if field.note:
            wrapped = textwrap.wrap(f"{name}: {field.note}", _WIDTH - 2)
            lines.extend(f"# {line}\n" for line in wrapped)
        value = getattr(exp, name)
        lines.append(f"{name}:\n" if value == "" else render_field(name, value))
    lines.append("---\n")
    for section in _TEMPLATE_SECTIONS:
        name = section.name
        lines.append(f"\n## {section.heading}\n\n{_note(section.note)}\n")
        text = getattr(exp, name)
        if name == "detailed_description" and not text:
            text = "\n\n".join(f"**{label}**: " for label in DESCRIPTION_LABELS)
        if text:
            shown = render_section_text(name, text) if name == "code_change" else text
            lines.append(f"\n{shown}\n")
    return "".join(lines)


def strip_guidance(text: str) -> str:
    """``text`` with every ``<!-- kexp: ... -->`` note blanked out, keeping line numbers."""
    return _GUIDANCE_BLOCK.sub(lambda m: "\n" * m.group(0).count("\n"), text)


def _quote_blank_fields(text: str) -> str:
    """Give text fields left blank (``change_summary:``) the empty string, line for line."""
    lines = text.split("\n")
    if not lines or lines[0].rstrip("\r") != "---":
        return text
    for index in range(1, len(lines)):
        line = lines[index].rstrip("\r")
        if line == "---":
            break
        match = _BLANK_FIELD.fullmatch(line)
        if match:
            lines[index] = f"{match.group(1)}: ''"
    return "\n".join(lines)


def is_empty_draft(text: str) -> bool:
    """Whether a saved draft holds nothing but comments and white space (abort)."""
    content = strip_guidance(text)
    return not any(
        line.strip() and not line.lstrip().startswith("#") for line in content.splitlines()
    )


def _tidy(field: str, text: str) -> str:
    """A section's text without surrounding blank lines, or the label skeleton."""
    lines = text.split("\n")
    while lines and not lines[0].strip():
        lines.pop(0)
    while lines and not lines[-1].strip():
        lines.pop()
    if field == "detailed_description":
        lines = [line.rstrip() if _EMPTY_LABEL.match(line) else line for line in lines]
    tidy = "\n".join(lines)
    if field == "detailed_description" and all(
        not line.strip() or _EMPTY_LABEL.match(line) for line in lines
    ):
        return ""
    if field == "code_change":
        match = re.fullmatch(r"(`{3,})" + DIFF_INFO + r"[ \t]*\n?(.*?)\n?\1", tidy, re.S)
        if match is not None:
            return match.group(2)
    return tidy


def read_draft(
    text: str, path: Path, settings: Settings | None = None
) -> tuple[KernelExperiment | None, list[Problem], Document | None]:
    """Read a saved draft: the experiment (None if it cannot be read), every problem
    (at the draft's own lines), and the parsed document (to :func:`relocate` problems).
    """
    cleaned = _quote_blank_fields(strip_guidance(text))
    try:
        doc = parse(cleaned, path)
    except FileFormatError as exc:
        return None, [exc.problem], None
    problems = check_document(doc) if settings is None else check_document(doc, settings)
    # An id prefix in pid/combines is fine here: the command resolves it before recording.
    problems = [p for p in problems if not _is_id_prefix_problem(p, doc)]
    exp = doc.to_experiment()
    for name in BODY_FIELDS:
        setattr(exp, name, _tidy(name, getattr(exp, name)))
    attach(exp, path=None)
    exp.extra_sections = [(h, _tidy("", t)) for h, t in exp.extra_sections]
    exp.preamble = _tidy("", exp.preamble)
    return exp, problems, doc


def _is_id_prefix_problem(problem: Problem, doc: Document) -> bool:
    if problem.code != "bad-format" or not (
        problem.field == "pid" or problem.field.startswith("combines.")
    ):
        return False
    name, _, index = problem.field.partition(".")
    value = doc.fields.get(name)
    if index.isdigit() and isinstance(value, list) and int(index) < len(value):
        value = value[int(index)]
    return isinstance(value, str) and re.fullmatch(r"[0-9a-f]{4,16}", value) is not None


def relocate(problems: list[Problem], doc: Document) -> list[Problem]:
    """Problems found in the stored form of a draft, moved to the draft's file and lines."""
    moved = []
    for problem in problems:
        field = problem.field.split(".")[0]
        if field in BODY_FIELDS:
            line, column = doc.section_line(field), 1
        elif field:
            line, column = doc.position((field,))
        else:
            line, column = 1, 1
        moved.append(dataclasses.replace(problem, path=doc.path, line=line, column=column))
    return moved
