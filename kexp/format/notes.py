"""The correction notes kexp appends to an experiment's ``detailed_description``
(``**Correction (2026-11-30)**: status done → failed. Reason: wrong results.``), read
back: what a later reader (a tried-before warning) says of why an experiment was
retired."""

from __future__ import annotations

import re

__all__ = ["CORRECTION_START", "retired_reason"]

#: How a correction note's line begins (``**Correction (2026-11-30)**: score 1.0 → 1.1.
#: Reason: ...``: :func:`kexp.measure.corrections.correction_note` writes it).
CORRECTION_START = "**Correction ("

#: One note: its date, what it changed and its reason (the reason runs to the line's end).
_NOTE = re.compile(
    r"^\*\*Correction \((?P<day>[^)]*)\)\*\*:\s*(?P<what>.*?)\.\s+Reason:\s*(?P<reason>.*)$",
    re.MULTILINE,
)
#: What a note says when it changes the status (``status done → failed``): the new one.
_STATUS = re.compile(r"\bstatus \S+ → (?P<status>[\w-]+)")


def retired_reason(description: str) -> str:
    """The reason of the last correction note that changed the status, when it set it to
    ``failed`` (the experiment retired: ``kexp update ID --set status=failed --reason
    ...``); "" when no note did, or a later one set it back (put back to ``done``)."""
    reason = ""
    for match in _NOTE.finditer(description or ""):
        changed = _STATUS.search(match["what"])
        if changed is not None:
            failed = changed["status"] == "failed"
            reason = match["reason"].strip().rstrip(".") if failed else ""
    return reason
