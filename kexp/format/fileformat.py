"""Reading and writing one experiment file: YAML front-matter plus ``## `` sections.

* :func:`parse` turns bytes into a :class:`Document` (values, positions, raw pieces), or
  raises :class:`FileFormatError` with a ``path:line:col`` problem.
* :func:`serialize` writes an experiment in canonical form.
* :func:`render_update` rewrites only the pieces of a document whose values changed, so
  an update's diff touches only the lines of the changed fields.
* Characters that YAML refuses or reads as a line break (control characters, a lone CR,
  NEL, LS, PS) are an error in the front-matter; any text is fine in the body.

Body layout (canonical): after the closing ``---`` a blank line, the preamble (if any),
then each non-empty section as ``## Heading``, a blank line, the text, a blank line; the
file ends with one newline after the last text. A text that could be misread (a
``## `` line or an unclosed fence) is wrapped in a ``kexp-verbatim`` fence; the code
change is always in a ``diff`` fence longer than any backtick run inside it.
"""

from __future__ import annotations

import codecs
import dataclasses
import difflib
import functools
import re
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from kexp.core.fields import STRING_FIELDS as STRING_FIELDS
from kexp.core.inputs import require_text
from kexp.core.model import (
    BODY_FIELDS,
    FRONT_MATTER_FIELDS,
    OPTIONAL_FIELDS,
    SECTION_HEADINGS,
    KernelExperiment,
    experiment_from_fields,
)
from kexp.core.problems import Problem
from kexp.format.fastpath import read_simple_front_matter
from kexp.format.yamlio import (
    CONFLICT_HINT,
    CONFLICT_MESSAGE,
    YamlMapping,
    YamlReadError,
    conflict_marker_line,
    read_mapping,
    render_field,
)

VERBATIM_INFO = "kexp-verbatim"
DIFF_INFO = "diff"
FIELD_BY_HEADING = {heading.lower(): name for name, heading in SECTION_HEADINGS.items()}
#: Characters YAML refuses (control characters, a BOM inside the text) or reads as a line
#: break although the file's lines are split on LF only (a lone CR, NEL, LS, PS).
FRONT_MATTER_BAD_CHAR = re.compile(
    # The characters outside YAML's printable set, listed (a negated class of the
    # printable ones takes milliseconds to compile at every start).
    "\r(?!\n)|[\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f\u2028\u2029\ud800-\udfff\ufeff\ufffe\uffff]"
)
_LINE_BREAK_NAMES = {"\r": "a carriage return", "\x85": "NEL", "\u2028": "LS", "\u2029": "PS"}
_LINE_BREAK_ESCAPES = {"\r": "\\r", "\x85": "\\N", "\u2028": "\\L", "\u2029": "\\P"}
_INTERESTING_FIRST = frozenset(" `~#")
_FENCE_OPEN = re.compile(r" {0,3}(`{3,}|~{3,})(.*)")
_BACKTICK_RUN = re.compile(r"`+")


class FileFormatError(Exception):
    """A file cannot be read as an experiment; ``problem`` says where and why."""

    def __init__(self, problem: Problem, more: Sequence[Problem] = ()) -> None:
        self.problem = problem
        #: Further problems of the same read (every key given twice, not the first only).
        self.more = tuple(more)
        super().__init__(problem.format())

    @property
    def problems(self) -> list[Problem]:
        """Every problem the read found: :attr:`problem`, then :attr:`more`."""
        return [self.problem, *self.more]


@dataclasses.dataclass
class Section:
    """One ``## `` section: its heading, known field (or None) and raw text segment."""

    heading: str
    field: str | None
    line: int  # 1-based line of the heading
    raw: str  # from the heading line to the next heading, in "middle" form
    text: str  # the decoded value


@dataclasses.dataclass
class Document:
    """A parsed experiment file: every value, where it is, and the raw text around it."""

    path: str
    front_matter: YamlMapping
    #: Raw front-matter text before the first key (comments), and per key its raw lines.
    fm_prefix: str
    fm_raw: dict[str, str]
    preamble_raw: str  # in "middle" form
    preamble: str
    sections: list[Section]
    #: Non-fatal problems found while reading (e.g. values YAML would retype).
    problems: list[Problem]
    fm_first_line: int = 2  # 1-based file line of the first YAML line
    #: False when read by the fast path: front-matter positions are then unknown.
    exact_positions: bool = True
    #: The text a fast-path document was read from (to read it again exactly).
    source: str | None = dataclasses.field(default=None, repr=False)
    _exact: Document | None = dataclasses.field(default=None, repr=False, compare=False)

    def exact(self) -> Document:
        """This document with exact front-matter positions (itself when it has them)."""
        if self.exact_positions or self.source is None:
            return self
        if self._exact is None:
            self._exact = parse(self.source, self.path)
        return self._exact

    @property
    def fields(self) -> dict[str, Any]:
        """Front-matter values as read (before any validation)."""
        return self.front_matter.values

    def position(self, path: tuple[str | int, ...]) -> tuple[int, int]:
        """1-based (line, column) in the file of the front-matter value at ``path``."""
        if not self.exact_positions and self.source is not None:
            return self.exact().position(path)
        line, column = self.front_matter.locate(path)
        if not path or path[0] not in self.front_matter.values:
            return (1, 1)
        return (line + self.fm_first_line, column + 1)

    def section_line(self, field: str) -> int:
        """1-based line of a body field's heading (or of the closing ``---``)."""
        for section in self.sections:
            if section.field == field:
                return section.line
        return self.fm_first_line + self.fm_line_count

    @property
    def fm_line_count(self) -> int:
        return (self.fm_prefix + "".join(self.fm_raw.values())).count("\n")

    def body_values(self) -> dict[str, str]:
        """Known body fields' texts (absent sections are ``""``)."""
        values = dict.fromkeys(BODY_FIELDS, "")
        for section in self.sections:
            if section.field is not None:
                values[section.field] = section.text
        return values

    def to_experiment(self) -> KernelExperiment:
        """Build the :class:`KernelExperiment` (call after validation for typed values)."""
        exp = experiment_from_fields(self.fields, Path(self.path))
        for name, text in self.body_values().items():
            setattr(exp, name, text)
        exp.preamble = self.preamble
        exp.extra_sections = [(s.heading, s.text) for s in self.sections if s.field is None]
        return exp


def _problem(
    path: str, line: int, column: int, code: str, message: str, hint: str, field: str = ""
) -> Problem:
    return Problem(path, line, column, "error", code, field, message, hint)


def decode(data: bytes, path: str) -> str:
    """Decode file bytes: strip a UTF-8 BOM, refuse invalid UTF-8, undo CRLF endings.

    CRLF is converted only when the file itself uses CRLF line endings (its first line
    ends with CRLF), so a ``\\r\\n`` inside a text value of an LF file is kept.
    """
    if data.startswith(codecs.BOM_UTF8):
        data = data[len(codecs.BOM_UTF8) :]
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = data.count(b"\n", 0, exc.start) + 1
        line_start = data.rfind(b"\n", 0, exc.start) + 1
        # Columns count characters, as everywhere else (the line's start is valid UTF-8).
        column = len(data[line_start : exc.start].decode("utf-8", "replace")) + 1
        raise FileFormatError(
            _problem(
                path,
                line,
                column,
                "invalid-utf8",
                f"the file is not valid UTF-8 (byte 0x{data[exc.start]:02x})",
                "save the file as UTF-8 (it was probably written in another encoding, "
                "such as Latin-1 or UTF-16): retype or re-save the text at this position",
            )
        ) from None
    first_end = text.find("\n")
    if first_end > 0 and text[first_end - 1] == "\r":
        text = text.replace("\r\n", "\n")
    return text


def encode_like(original: bytes, text: str) -> bytes:
    """``text`` (LF line endings, as :func:`render_update` writes it) as the bytes of a
    new version of the file ``original``: its UTF-8 BOM kept, and its CRLF line endings.

    In a CRLF file (as :func:`decode` tells one) every line whose text did not change
    keeps its bytes exactly (a lone LF too) and new lines end in CRLF, so that an update
    changes only the lines of the fields it changes, and two updates of different
    fields merge in git. An LF file is written as ``text`` is.
    """
    bom = codecs.BOM_UTF8 if original.startswith(codecs.BOM_UTF8) else b""
    raw = original[len(bom) :].decode("utf-8", "surrogatepass")
    first_end = raw.find("\n")
    if not (first_end > 0 and raw[first_end - 1] == "\r"):
        return bom + text.encode("utf-8")
    old = split_lines(raw)
    old_lf = [line[:-2] + "\n" if line.endswith("\r\n") else line for line in old]
    new = split_lines(text)
    # The common head and tail first (most of a file: cheap), then the rest matched.
    head = 0
    while head < min(len(old_lf), len(new)) and old_lf[head] == new[head]:
        head += 1
    tail = 0
    while (
        tail < min(len(old_lf), len(new)) - head
        and old_lf[len(old_lf) - 1 - tail] == new[len(new) - 1 - tail]
    ):
        tail += 1
    middle = difflib.SequenceMatcher(
        None, old_lf[head : len(old_lf) - tail], new[head : len(new) - tail]
    )
    out = old[:head]
    for op, a1, a2, b1, b2 in middle.get_opcodes():
        if op == "equal":
            out.extend(old[head + a1 : head + a2])
        else:
            out.extend(
                line[:-1] + "\r\n" if line.endswith("\n") else line
                for line in new[head + b1 : head + b2]
            )
    out.extend(old[len(old) - tail :] if tail else [])
    return bom + "".join(out).encode("utf-8")


def split_lines(text: str) -> list[str]:
    """Split on ``\\n`` only (never on other Unicode line breaks), keeping the endings."""
    parts = text.split("\n")
    lines = [part + "\n" for part in parts[:-1]]
    if parts[-1]:
        lines.append(parts[-1])
    return lines


def named_parents(data: bytes) -> list[str]:
    """The ids the ``pid`` and ``combines`` of the experiment file ``data`` name (none
    when it cannot be read as one)."""
    try:
        fields = parse(data).fields
    except (FileFormatError, ValueError):
        return []
    combines = fields.get("combines")
    named = [fields.get("pid"), *(combines if isinstance(combines, list) else [])]
    return [exp_id for exp_id in named if isinstance(exp_id, str) and exp_id]


def parse(data: bytes | str, path: str | Path = "<string>", *, fast: bool = False) -> Document:
    """Parse an experiment file. Raises :class:`FileFormatError` if it cannot be read.

    ``fast=True`` reads canonical front-matter (one simple ``key: value`` line per
    field) without the YAML parser (:mod:`kexp.format.fastpath`; same values). Such a
    document knows no positions within the front-matter (``exact_positions`` is
    False): parse again without ``fast`` to report a problem at its line.
    """
    path = str(path)
    text = decode(data, path) if isinstance(data, bytes) else data
    conflict = conflict_marker_line(text) if "<<<<<<<" in text else None
    if conflict is not None:  # a merge stopped on this file: anywhere, not only in YAML
        raise FileFormatError(
            _problem(path, conflict + 1, 1, "merge-conflict", CONFLICT_MESSAGE, CONFLICT_HINT)
        )
    lines = split_lines(text)
    if not lines or lines[0].rstrip("\r\n").rstrip(" \t") != "---":
        raise FileFormatError(
            _problem(
                path,
                1,
                1,
                "no-front-matter",
                "the file does not start with a '---' line opening the YAML front-matter",
                "start the file with '---', one 'field: value' per line, then '---' "
                "(see experiments/README.md, or create files with kexp)",
            )
        )
    close = next(
        (i for i in range(1, len(lines)) if lines[i].rstrip("\r\n").rstrip(" \t") == "---"),
        None,
    )
    if close is None:
        raise FileFormatError(
            _problem(
                path,
                1,
                1,
                "unterminated-front-matter",
                "the front-matter opened on line 1 is never closed",
                "add a line '---' after the last field",
            )
        )
    yaml_text = "".join(lines[1:close])
    bad = FRONT_MATTER_BAD_CHAR.search(yaml_text)
    if bad is not None:
        raise FileFormatError(_bad_character(path, yaml_text, bad.start()))
    simple = read_simple_front_matter(yaml_text, STRING_FIELDS) if fast else None
    if simple is not None and len(simple) == close - 1:
        preamble_raw, sections = _parse_body(lines, close + 1, path)
        return Document(
            path=path,
            front_matter=YamlMapping(simple, {}, {}, [], []),
            fm_prefix="",
            fm_raw=dict(zip(simple, lines[1:close], strict=True)),
            preamble_raw=preamble_raw,
            preamble=unwrap(decode_segment(preamble_raw), VERBATIM_INFO),
            sections=sections,
            problems=[],
            exact_positions=False,
            source=text,
        )
    try:
        mapping = read_mapping(yaml_text, STRING_FIELDS, first_line=2)
    except YamlReadError as exc:
        first, *more = (
            _problem(
                path,
                issue.line + 2,
                issue.column + 1,
                issue.code,
                issue.message,
                issue.hint,
                issue.field,
            )
            for issue in (exc.issue, *exc.more)
        )
        raise FileFormatError(first, more) from None
    problems = [
        Problem(
            path,
            node.start_mark.line + 2,
            node.start_mark.column + 1,
            "warning",
            "yaml-implicit-type",
            field,
            f"unquoted {node.value!r} is read by other YAML tools as {kind}; "
            "kexp keeps it as the text written",
            f"quote it: '{node.value}' (kexp fmt does this)",
        )
        for field, node, kind in mapping.retyped
    ]
    fm_prefix, fm_raw = _front_matter_pieces(lines[1:close], mapping)
    preamble_raw, sections = _parse_body(lines, close + 1, path)
    preamble = decode_segment(preamble_raw)
    return Document(
        path=path,
        front_matter=mapping,
        fm_prefix=fm_prefix,
        fm_raw=fm_raw,
        preamble_raw=preamble_raw,
        preamble=unwrap(preamble, VERBATIM_INFO),
        sections=sections,
        problems=problems,
    )


def _bad_character(path: str, yaml_text: str, index: int) -> Problem:
    """The problem of a character YAML would refuse or read as a line break."""
    char = yaml_text[index]
    line = yaml_text.count("\n", 0, index) + 2
    column = index - (yaml_text.rfind("\n", 0, index) + 1) + 1
    if char in _LINE_BREAK_NAMES:
        message = (
            f"the front-matter holds {_LINE_BREAK_NAMES[char]} (U+{ord(char):04X}), which YAML "
            "reads as a line break in the middle of this line"
        )
        escape = _LINE_BREAK_ESCAPES[char]
    else:
        message = (
            f"the front-matter holds the invisible character U+{ord(char):04X}, "
            "which YAML does not allow"
        )
        escape = f"\\u{ord(char):04x}"
    hint = f"remove it, or write the value double-quoted with the escape {escape} instead"
    return _problem(path, line, column, "bad-character", message, hint)


def _front_matter_pieces(yaml_lines: list[str], mapping: YamlMapping) -> tuple[str, dict[str, str]]:
    """Split front-matter lines into a prefix and each key's raw lines (file order)."""
    starts = [(node.start_mark.line, key) for key, node in mapping.key_nodes.items()]
    starts.sort()
    if not starts:
        return "".join(yaml_lines), {}
    prefix = "".join(yaml_lines[: starts[0][0]])
    raw: dict[str, str] = {}
    for index, (start, key) in enumerate(starts):
        end = starts[index + 1][0] if index + 1 < len(starts) else len(yaml_lines)
        raw[key] = "".join(yaml_lines[start:end])
    return prefix, raw


def _fence_state(lines: list[str], start: int = 0) -> tuple[list[int], bool]:
    """Indices of ``## `` heading lines outside fences, and whether a fence is left open."""
    headings: list[int] = []
    fence = ""
    for index in range(start, len(lines)):
        line = lines[index]
        # Only a line starting with a space, a backtick, a tilde or '#' can open or
        # close a fence or be a heading: skip the rest cheaply (most lines of a diff).
        if not line or line[0] not in _INTERESTING_FIRST:
            continue
        line = line.rstrip("\n").rstrip("\r")
        if fence:
            stripped = line.lstrip(" ")
            if (
                len(line) - len(stripped) <= 3
                and stripped.startswith(fence)
                and stripped.rstrip(" \t").strip(fence[0]) == ""
            ):
                fence = ""
            continue
        match = _FENCE_OPEN.fullmatch(line)
        if match and not (match.group(1)[0] == "`" and "`" in match.group(2)):
            fence = match.group(1)
        elif line == "##" or line.startswith("## "):
            headings.append(index)
    return headings, bool(fence)


def decode_segment(raw: str) -> str:
    """Undo the blank-line framing of a segment in "middle" form."""
    if raw.startswith("\n"):
        raw = raw[1:]
    if raw.endswith("\n"):
        raw = raw[:-1]
    if raw.endswith("\n"):
        raw = raw[:-1]
    return raw


def _parse_body(lines: list[str], start: int, path: str) -> tuple[str, list[Section]]:
    headings, _ = _fence_state(lines, start)
    bounds = [*headings, len(lines)]
    preamble_raw = "".join(lines[start : bounds[0]])
    sections: list[Section] = []
    seen: dict[str, int] = {}
    for index, heading_line in enumerate(headings):
        heading = lines[heading_line].rstrip("\n").rstrip("\r")[2:].strip()
        raw_content = "".join(lines[heading_line + 1 : bounds[index + 1]])
        field = FIELD_BY_HEADING.get(heading.lower())
        if field is not None and field in seen:
            raise FileFormatError(
                _problem(
                    path,
                    heading_line + 1,
                    1,
                    "duplicate-section",
                    f"section '## {heading}' appears twice (first on line {seen[field]})",
                    "merge the two sections into one",
                    field,
                )
            )
        if field is not None:
            seen[field] = heading_line + 1
        sections.append(
            Section(heading, field, heading_line + 1, lines[heading_line] + raw_content, "")
        )
    # Put the last segment in "middle" form: as if another heading followed it.
    if sections:
        sections[-1].raw += "\n"
    else:
        preamble_raw += "\n"
    for section in sections:
        content = decode_segment(section.raw.split("\n", 1)[1])
        info = DIFF_INFO if section.field == "code_change" else VERBATIM_INFO
        section.text = unwrap(content, info)
    return preamble_raw, sections


def unwrap(content: str, info: str) -> str:
    """The text inside a fence with info string ``info`` spanning all of ``content``
    (``content`` itself when a run of backticks inside is as long as the fence)."""
    match = _fenced(info).fullmatch(content)
    if match is None:
        return content
    fence, inner = match.groups()
    return content if fence in inner else inner


@functools.lru_cache(maxsize=8)
def _fenced(info: str) -> re.Pattern[str]:
    """A fence with info string ``info`` spanning a whole text, and its content."""
    return re.compile(r"(`{3,})" + re.escape(info) + r"[ \t]*\n(.*)\n\1", re.DOTALL)


def _fence(text: str, info: str) -> str:
    longest = max((len(run) for run in _BACKTICK_RUN.findall(text)), default=0)
    ticks = "`" * max(3, longest + 1)
    return f"{ticks}{info}\n{text}\n{ticks}"


def _is_plain_safe(text: str) -> bool:
    """Whether ``text`` can stand in a section as is and be read back unchanged."""
    headings, open_fence = _fence_state(split_lines(text))
    return not headings and not open_fence and unwrap(text, VERBATIM_INFO) == text


def render_section_text(field: str | None, text: str) -> str:
    """The text of a section as written in the file (fenced when it must be)."""
    if field == "code_change":
        return _fence(text, DIFF_INFO)
    return text if _is_plain_safe(text) else _fence(text, VERBATIM_INFO)


def _section_segment(heading: str, field: str | None, text: str) -> str:
    return f"## {heading}\n\n{render_section_text(field, text)}\n\n"


def _preamble_segment(text: str) -> str:
    return f"\n{render_section_text(None, text)}\n\n" if text else "\n"


def _is_empty(value: Any) -> bool:
    return value is None or value == "" or value == [] or value == {}


def _front_matter_values(exp: KernelExperiment) -> dict[str, Any]:
    values: dict[str, Any] = {}
    for name in FRONT_MATTER_FIELDS:
        value = getattr(exp, name)
        if name in OPTIONAL_FIELDS and _is_empty(value):
            continue
        values[name] = value
    values.update(exp.extra_fields)
    return values


def _join(front_matter: str, segments: list[str]) -> str:
    body = "".join(segments)
    if body.endswith("\n"):
        body = body[:-1]
    return f"---\n{front_matter}---\n{body}"


def require_texts(exp: KernelExperiment) -> None:
    """Refuse (:class:`~kexp.core.errors.InputError`) an experiment a value of which is
    not UTF-8 text (a diff of a file in another encoding, read with ``surrogateescape``):
    a file cannot hold it."""
    for name in (*FRONT_MATTER_FIELDS, *BODY_FIELDS, "preamble", "extra_sections"):
        require_text(name, getattr(exp, name))
    require_text("extra_fields", exp.extra_fields)


def serialize(exp: KernelExperiment) -> str:
    """The canonical text of an experiment file (:func:`require_texts`: its values are
    text)."""
    require_texts(exp)
    front_matter = "".join(render_field(k, v) for k, v in _front_matter_values(exp).items())
    segments = [_preamble_segment(exp.preamble)]
    for name in BODY_FIELDS:
        text = getattr(exp, name)
        if text:
            segments.append(_section_segment(SECTION_HEADINGS[name], name, text))
    segments.extend(_section_segment(h, None, t) for h, t in exp.extra_sections)
    return _join(front_matter, segments)


def render_update(doc: Document, exp: KernelExperiment) -> str:
    """Text of ``doc`` with ``exp``'s values, rewriting only the pieces that changed.

    Front-matter fields are replaced line by line; a front-matter that is not one
    ``key: value`` block at column 0 (flow style, indented) is rewritten canonically
    when any field changes. A kept hand-written segment that leaves a code fence open is
    rewritten canonically when another segment now follows it.
    """
    require_texts(exp)
    new_values = _front_matter_values(exp)
    pieces: list[tuple[str, str]] = []  # (key, raw text) in file order
    for key, raw in doc.fm_raw.items():
        if key not in new_values:
            continue  # removed (an optional field emptied, or an extra key dropped)
        if render_field(key, new_values[key]) == render_field(key, doc.fields[key]):
            pieces.append((key, raw))
        else:
            pieces.append((key, render_field(key, new_values[key])))
    order = {name: index for index, name in enumerate(FRONT_MATTER_FIELDS)}
    for key, value in new_values.items():
        if key in doc.fm_raw:
            continue
        rendered = (key, render_field(key, value))
        rank = order.get(key, len(order))
        position = next(
            (i for i, (k, _) in enumerate(pieces) if order.get(k, len(order)) > rank),
            len(pieces),
        )
        pieces.insert(position, rendered)
    front_matter = doc.fm_prefix + "".join(raw for _, raw in pieces)
    if not _line_based(doc) and front_matter != doc.fm_prefix + "".join(doc.fm_raw.values()):
        # A flow-style ({...}) or indented front-matter cannot be patched line by line:
        # rewrite it canonically (keeping leading comments).
        prefix = doc.fm_prefix if _only_comments(doc.fm_prefix) else ""
        front_matter = prefix + "".join(render_field(k, v) for k, v in new_values.items())

    old_body = doc.body_values()
    # Each segment as (raw text kept from the file, canonical text of the same value).
    segments = [
        (doc.preamble_raw, _preamble_segment(exp.preamble))
        if exp.preamble == doc.preamble
        else (_preamble_segment(exp.preamble),) * 2
    ]
    old_extra = [(s.heading, s.text) for s in doc.sections if s.field is None]
    keep_extra = old_extra == exp.extra_sections
    body: list[tuple[str | None, tuple[str, str]]] = []
    for section in doc.sections:
        if section.field is None:
            if keep_extra:
                canonical = _section_segment(section.heading, None, section.text)
                body.append((None, (section.raw, canonical)))
            continue
        new_text = getattr(exp, section.field)
        heading = SECTION_HEADINGS[section.field]
        if new_text == old_body[section.field]:
            canonical = _section_segment(heading, section.field, new_text)
            body.append((section.field, (section.raw, canonical)))
        elif new_text:
            body.append((section.field, (_section_segment(heading, section.field, new_text),) * 2))
    present = {name for name, _ in body if name}
    for index, name in enumerate(BODY_FIELDS):
        text = getattr(exp, name)
        if name in present or not text:
            continue
        later = set(BODY_FIELDS[index + 1 :])
        following = [i for i, (f, _) in enumerate(body) if f in later]
        known = [i for i, (f, _) in enumerate(body) if f is not None]
        position = following[0] if following else (known[-1] + 1 if known else 0)
        body.insert(position, (name, (_section_segment(SECTION_HEADINGS[name], name, text),) * 2))
        present.add(name)
    segments.extend(segment for _, segment in body)
    if not keep_extra:
        segments.extend((_section_segment(h, None, t),) * 2 for h, t in exp.extra_sections)
    # A hand-written last segment may leave a code fence open (it then runs to the end of
    # the file); if anything now follows it, it must be written in canonical form, or the
    # fence would swallow the headings after it.
    return _join(
        front_matter,
        [
            canonical if index + 1 < len(segments) and _leaves_fence_open(raw) else raw
            for index, (raw, canonical) in enumerate(segments)
        ],
    )


def _line_based(doc: Document) -> bool:
    """Whether every front-matter key starts a line (block style, not indented)."""
    nodes = doc.front_matter.key_nodes.values()
    return doc.front_matter.block and all(node.start_mark.column == 0 for node in nodes)


def _only_comments(text: str) -> bool:
    return all(not line.strip() or line.lstrip().startswith("#") for line in text.splitlines())


def _leaves_fence_open(raw: str) -> bool:
    return _fence_state(split_lines(raw))[1]


_KEY_INSIGHT = re.compile(
    r"^\s*(?:[-*+]\s+)?(?:\*\*|__)?key\s+insights?\s*(?::\s*(?:\*\*|__)|(?:\*\*|__)\s*:|:)"
    r"\s*(?P<rest>.*)$",
    re.IGNORECASE,
)
#: The label in bold further on in a line (``**Approach**: ... **Key insight**: ...``).
_KEY_INSIGHT_INLINE = re.compile(
    r"(?<!\S)(?:\*\*|__)key\s+insights?\s*(?::\s*(?:\*\*|__)|(?:\*\*|__)\s*:)\s*(?P<rest>.*)$",
    re.IGNORECASE,
)
#: A bold label after the insight on its line (``**Result**:``): where the insight ends.
_NEXT_LABEL = re.compile(r"\s\*\*[A-Za-z][^*:\n]{0,40}(?::\s*\*\*|\*\*\s*:)")
#: A template's text left unfilled (the predecessor's ``None yet.``): no insight.
_PLACEHOLDER = re.compile(
    r"(?:none(?: yet)?|n/?a|tbd|todo|tba|-+|\.\.\.|…|\(none\)|not analy[sz]ed yet)[.!]?",
    re.IGNORECASE,
)


def key_insight(description: str) -> str:
    """The text of the ``**Key insight**:`` label of a detailed description ("" if none):
    the rest of its line, up to a next bold label (``**Result**:``); the label may start
    a line or follow other text in it (``**Approach**: ... **Key insight**: ...``).

    When the label ends its line, the next non-blank line is the insight. A template's
    text left unfilled (``None yet.``, ``TBD``, ``N/A``) is none. Every view of the key
    insight (``kexp lessons``, ``kexp review``, the report's lessons, the consult
    packet) reads it here.
    """
    found = _key_insight(description)
    return "" if _PLACEHOLDER.fullmatch(found) else found


def _key_insight(description: str) -> str:
    lines = description.splitlines()
    for index, line in enumerate(lines):
        match = _KEY_INSIGHT.match(line) or _KEY_INSIGHT_INLINE.search(line)
        if match is None:
            continue
        rest = _NEXT_LABEL.split(match.group("rest"), maxsplit=1)[0].strip()
        if rest:
            return rest
        for following in lines[index + 1 :]:
            if following.strip():
                return following.strip()
        return ""
    return ""


#: Triton's CompilationError: ``at LINE:COLUMN:``, the kernel's source with a caret
#: under the column, then the cause (``TypeError("...")``).
_TRITON_AT = re.compile(r"CompilationError: at \d+:\d+:?$")
#: A line that names an exception (``TypeError: ...``, ``torch.OutOfMemoryError(...)``).
_EXCEPTION = re.compile(
    r"^(?:[A-Za-z_]\w*\.)*[A-Z]\w*(?:Error|Exception|Exit|Interrupt|Failure)\b(?![.\w])"
)
#: A compiler's diagnostic of an error (nvcc ``k.cu(42): error: ...``, clang/hipcc
#: ``k.hip:3:5: error: ...``, ``ptxas error   : ...``, ``fatal error: ...``).
_COMPILER_ERROR = re.compile(
    r"(?:\(\d+\)|:\d+(?::\d+)?): (?:fatal )?error\b"
    r"|^(?:(?:ptxas|nvcc|nvlink|clang|hipcc|ld(?:\.lld)?)\s+)?(?:fatal\s+)?(?:error|fatal)\s*:"
)


def _caret(line: str) -> bool:
    """Whether a line only points at a column (``^``, ``~~~^~~~``)."""
    return "^" in line and not line.strip("^~ ")


def error_line(message: str) -> str:
    """The line of an ``error_message`` that says what went wrong ("" if none): the
    cause after a Triton CompilationError's source and caret, or right after its first
    line when pasted without them (that line, ``at 10:11:``, only says where), a Python
    traceback's last line (the exception and its text), a compiler's first ``error:``
    line (before it: warnings, the files included), else the first non-blank line."""
    lines = [line.strip() for line in message.splitlines() if line.strip()]
    if not lines:
        return ""
    at = [number for number, line in enumerate(lines) if _TRITON_AT.search(line)]
    if at:
        after = lines[at[-1] + 1 :]
        carets = [number for number, line in enumerate(after) if _caret(line)]
        if carets and carets[-1] + 1 < len(after):
            return after[carets[-1] + 1]
        if not carets:  # pasted without the source and caret: the cause follows
            named = [line for line in after if _EXCEPTION.match(line)]
            if named or len(after) == 1:
                return (named or after)[-1]
        before = [line for line in lines[: at[-1]] if _EXCEPTION.match(line)]
        return before[-1] if before else lines[at[-1]]
    if any(line.startswith("Traceback (most recent call last)") for line in lines):
        if not _caret(lines[-1]):
            return lines[-1]
        named = [line for line in lines if _EXCEPTION.match(line)]
        return named[-1] if named else lines[-1]
    for line in lines:
        if _COMPILER_ERROR.search(line):
            return line
    return lines[0]
