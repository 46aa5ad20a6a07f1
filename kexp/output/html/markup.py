"""HTML for the report: escaping, experiment text rendered readably, the page shell.

Every piece of text from an experiment goes through :func:`text` (or a function built
on it), which escapes ``& < > " '`` and writes control characters and bidirectional
controls as visible escapes (``\\u202e``), so no text can add markup, run script, or
display as something other than what it is. Prose is rendered from a small, safe part
of Markdown (paragraphs, bullet and numbered lists, headings, fenced code, ``**bold**``
and inline code) on text already escaped: no HTML passes through and nothing becomes a
link. A Markdown library would be the usual choice, but the ones measured (markdown-it-py,
mistune) take 0.8 to 1 ms per experiment (2 KB of Markdown): 80 to 100 s at 100,000
experiments, beyond the report's whole time budget; this renderer takes 0.07 ms.

Every page carries a strict Content-Security-Policy: scripts and styles only from the
report's own files (no inline script, no inline style, no network), so even markup
that escaped escaping could not run.
"""

from __future__ import annotations

import html
import re
from collections.abc import Iterable, Sequence

#: The policy of every page: the report's own stylesheet and script, nothing else.
CONTENT_SECURITY_POLICY = (
    "default-src 'none'; style-src 'self'; script-src 'self'; img-src 'self'; "
    "base-uri 'none'; form-action 'none'"
)
#: Characters shown as escapes: C0 controls but tab and newline, DEL, C1 controls, the
#: bidirectional marks, embeddings, overrides and isolates, and the byte-order mark.
_UNSAFE = re.compile(
    "[\x00-\x08\x0b-\x1f\x7f-\x9f\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069\ufeff]"
)
#: Any character :func:`text` changes.
_SPECIAL = re.compile("[&<>\"'" + _UNSAFE.pattern[1:-1] + "]")
_BOLD = re.compile(r"\*\*(?=\S)(.+?)(?<=\S)\*\*")
_CODE = re.compile(r"`([^`\n]+)`")
_BULLET = re.compile(r"^(\s*)[-*+]\s+(.*)$")
_NUMBERED = re.compile(r"^(\s*)\d{1,9}[.)]\s+(.*)$")
_HEADING = re.compile(r"^(#{1,6})\s+(.*?)\s*#*\s*$")
_FENCE = re.compile(r"^\s{0,3}(`{3,}|~{3,})")


def _escape_control(match: re.Match[str]) -> str:
    code = ord(match.group())
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"


def text(value: object) -> str:
    """``value`` as HTML text, safe in element content and in quoted attribute values."""
    plain = value if type(value) is str else str(value)
    if _SPECIAL.search(plain) is None:
        return plain  # the common case for short values, answered by one search
    escaped = html.escape(plain, quote=True)
    if _UNSAFE.search(escaped) is None:
        return escaped
    return _UNSAFE.sub(_escape_control, escaped)


def one_line(value: object, limit: int | None = None) -> str:
    """``value`` on one line (white space collapsed), cut to ``limit`` characters with "…",
    as HTML text."""
    flat = " ".join(str(value).split())
    if limit is not None and len(flat) > limit:
        flat = flat[: max(0, limit - 1)] + "…"
    return text(flat)


def _inline(escaped: str) -> str:
    """Inline code and bold in text already escaped (the markers are plain characters)."""
    parts = _CODE.split(escaped)
    out: list[str] = []
    for index, part in enumerate(parts):
        if index % 2:
            out.append(f"<code>{part}</code>")
        else:
            out.append(_BOLD.sub(r"<strong>\1</strong>", part))
    return "".join(out)


def prose(value: str) -> str:
    """Markdown-like text as HTML: paragraphs, lists, headings, fenced code, bold, code.

    Anything else (links, images, HTML, tables) stays as the text written.
    """
    lines = text(value.replace("\r\n", "\n")).split("\n")
    out: list[str] = []
    paragraph: list[str] = []
    items: list[str] = []
    list_tag = ""

    def flush() -> None:
        nonlocal list_tag
        if paragraph:
            out.append("<p>" + "<br>".join(_inline(line) for line in paragraph) + "</p>")
            paragraph.clear()
        if items:
            out.append(f"<{list_tag}>" + "".join(items) + f"</{list_tag}>")
            items.clear()
            list_tag = ""

    index = 0
    while index < len(lines):
        line = lines[index]
        fence = _FENCE.match(line)
        if fence is not None:
            flush()
            marker = fence.group(1)
            body: list[str] = []
            index += 1
            while index < len(lines) and not lines[index].strip().startswith(marker):
                body.append(lines[index])
                index += 1
            out.append("<pre>" + "\n".join(body) + "</pre>")
            index += 1
            continue
        if not line.strip():
            flush()
        elif (heading := _HEADING.match(line)) is not None:
            flush()
            level = min(6, len(heading.group(1)) + 2)
            out.append(f"<h{level}>{_inline(heading.group(2))}</h{level}>")
        elif (item := _BULLET.match(line) or _NUMBERED.match(line)) is not None:
            tag = "ul" if _BULLET.match(line) else "ol"
            if paragraph or (items and tag != list_tag):
                flush()
            list_tag = tag
            items.append(f"<li>{_inline(item.group(2))}</li>")
        elif items and line.startswith((" ", "\t")):
            items[-1] = items[-1][: -len("</li>")] + "<br>" + _inline(line.strip()) + "</li>"
        else:
            if items:
                flush()
            paragraph.append(line)
        index += 1
    flush()
    return "".join(out)


def preformatted(value: str) -> str:
    """Text shown as written (monospace, lines kept)."""
    return f"<pre>{text(value)}</pre>"


def _diff_kind(line: str) -> str:
    """The element marking a line of a unified diff ("" for a context line)."""
    if line.startswith(("+++", "---", "diff ", "index ")):
        return "b"
    if line.startswith("+"):
        return "ins"
    if line.startswith("-"):
        return "del"
    return "i" if line.startswith("@@") else ""


def diff(value: str) -> str:
    """A code change: unified-diff lines marked as added, removed or headers; a run of
    lines of one kind is one element (a report holds 100,000 diffs)."""
    out: list[str] = []
    run: list[str] = []
    kind = ""
    for line in [*text(value).split("\n"), None]:
        line_kind = _diff_kind(line) if line is not None else None
        if line_kind != kind or line is None:
            if run:
                joined = "\n".join(run)
                out.append(f"<{kind}>{joined}</{kind}>" if kind else joined)
            run, kind = [], line_kind or ""
        if line is not None:
            run.append(line)
    return '<pre class="diff">' + "\n".join(out) + "</pre>"


def page(
    title: str,
    body: str,
    *,
    root: str,
    crumbs: Sequence[tuple[str, str]] = (),
    script: bool = False,
    footer: str = "",
) -> str:
    """A whole page: ``root`` is the relative way up to the report's folder ("", "../").

    ``title`` is plain text (escaped here); ``body`` is HTML; ``crumbs`` are (href, plain
    text) links shown above the body, the last one the page itself.
    """
    nav = []
    for href, label in crumbs:
        nav.append(f'<a href="{text(href)}">{one_line(label, 80)}</a>' if href else one_line(label))
    script_tag = f'<script src="{root}assets/report.js" defer></script>' if script else ""
    return (
        "<!DOCTYPE html>\n"
        '<html lang="en"><head><meta charset="utf-8">'
        f'<meta http-equiv="Content-Security-Policy" content="{CONTENT_SECURITY_POLICY}">'
        '<meta name="referrer" content="no-referrer">'
        '<meta name="viewport" content="width=device-width, initial-scale=1">'
        f"<title>{one_line(title, 120)}</title>"
        f'<link rel="stylesheet" href="{root}assets/report.css">{script_tag}'
        "</head><body>"
        f'<nav class="crumbs">{" › ".join(nav)}</nav>'
        f"<main>{body}</main>"
        f"<footer>{footer}</footer>"
        "</body></html>\n"
    )


def table(
    headers: Sequence[str],
    rows: Iterable[Sequence[str]],
    *,
    table_id: str = "",
    numeric: Sequence[int] = (),
    sortable: bool = True,
) -> str:
    """An HTML table: ``headers`` are plain text, ``rows`` cells of HTML; columns at the
    indexes ``numeric`` are right-aligned and sort as numbers."""
    head = "".join(
        f"<th{' class=num' if i in numeric else ''}>{text(h)}</th>" for i, h in enumerate(headers)
    )
    body = "".join(
        "<tr>"
        + "".join(
            f"<td{' class=num' if i in numeric else ''}>{cell}</td>" for i, cell in enumerate(row)
        )
        + "</tr>"
        for row in rows
    )
    classes = "sortable" if sortable else ""
    ident = f' id="{text(table_id)}"' if table_id else ""
    return (
        f'<table{ident} class="{classes}"><thead><tr>{head}</tr></thead>'
        f"<tbody>{body}</tbody></table>"
    )


def filter_box(table_id: str, placeholder: str = "filter rows") -> str:
    """A text box that hides the rows of table ``table_id`` not containing its text."""
    return (
        f'<input class="filter" type="search" data-filter="{text(table_id)}" '
        f'placeholder="{text(placeholder)}" aria-label="{text(placeholder)}">'
    )
