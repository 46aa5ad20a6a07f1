"""The front-matter keys an import from the predecessor writes (``legacy_*``), and
the warning validation gives for each.

:mod:`kexp.output.legacy` keeps there what a record held that did not fit kexp's format (the
original value of a field that holds a stand-in, the database key, the keys that were
absent or unknown), so that an export gives the record back. Validation
(:func:`kexp.format.validate.check_document`) recognises these keys: each gets one
``legacy-value`` warning saying how to settle it, never the ``unknown-field`` warning
of a misspelt key.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

from kexp.core.advice import CORRECT_FIELD
from kexp.core.ids import is_valid_id
from kexp.core.model import LEGACY_FIELDS
from kexp.core.problems import Problem

if TYPE_CHECKING:
    from kexp.format.fileformat import Document

#: Prefix of the front-matter keys that keep original values (``legacy_base_commit``).
LEGACY_PREFIX = "legacy_"
#: Front-matter key keeping a record's database key when it is no id.
KEY_FIELD = "legacy_key"
#: Front-matter key listing the record's keys that were absent.
MISSING_FIELD = "legacy_missing"
#: Front-matter key keeping the record's keys kexp does not know, with their values.
EXTRA_FIELD = "legacy_extra"


def describe_value(value: Any) -> str:
    """``repr(value)``, cut to 60 characters."""
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def is_legacy_key(name: str) -> bool:
    """Whether a front-matter key is one the import keeps original values in."""
    if name in (KEY_FIELD, MISSING_FIELD, EXTRA_FIELD):
        return True
    return name.startswith(LEGACY_PREFIX) and name[len(LEGACY_PREFIX) :] in LEGACY_FIELDS


def without_stand_ins(extra: dict[str, Any], corrected: Iterable[str]) -> dict[str, Any]:
    """``extra`` (an experiment's unknown front-matter keys) once the ``corrected``
    fields hold the truth: their ``legacy_<field>`` originals dropped, and they are no
    longer listed in ``legacy_missing`` (the export then writes the corrected values)."""
    fields = set(corrected)
    stand_ins = {LEGACY_PREFIX + field for field in fields & set(LEGACY_FIELDS)}
    kept = {key: value for key, value in extra.items() if key not in stand_ins}
    missing = kept.get(MISSING_FIELD)
    if isinstance(missing, list) and fields & set(missing):
        left = [name for name in missing if name not in fields]
        if left:
            kept[MISSING_FIELD] = left
        else:
            del kept[MISSING_FIELD]
    return kept


def legacy_problems(doc: Document) -> list[Problem]:
    """One warning (code ``legacy-value``) per value the import kept aside in a file.

    For validation, in place of the ``unknown-field`` warning on these keys: it says
    which field holds a stand-in, and how to settle it.
    """
    problems: list[Problem] = []
    own_id = doc.fields.get("id")
    exp_id = own_id if isinstance(own_id, str) and own_id else "ID"
    for name, value in doc.fields.items():
        if not is_legacy_key(name):
            continue
        if name == KEY_FIELD:
            message = f"the predecessor's database key {describe_value(value)}, which is no id"
            hint = "kept so that 'kexp export --format legacy' gives the key back"
        elif name == MISSING_FIELD:
            message = f"the predecessor's record had no {describe_value(value)}"
            hint = "kept so that the export leaves these keys out again"
        elif name == EXTRA_FIELD:
            message = "keys of the predecessor's record that kexp does not know"
            hint = "kept so that the export gives them back"
        elif name == LEGACY_PREFIX + "pid" and isinstance(value, str) and is_valid_id(value):
            message = (
                f"the predecessor's pid {describe_value(value)}, a valid id, was not linked "
                "by the import (no such experiment was in the store then, or it made a "
                "loop): pid is empty"
            )
            hint = (
                "import the database holding that experiment (kexp import links it then), "
                f"or set pid ({CORRECT_FIELD.say(id=exp_id, field='pid')} drops this line)"
            )
        else:
            field = name[len(LEGACY_PREFIX) :]
            message = (
                f"the predecessor's {field} {describe_value(value)} did not fit the format: "
                f"{field} holds a stand-in"
            )
            hint = (
                f"correct {field}, then delete this line "
                f"({CORRECT_FIELD.say(id=exp_id, field=field)} does both; the export uses it "
                "while present)"
            )
        line, column = doc.position((name,))
        problems.append(
            Problem(doc.path, line, column, "warning", "legacy-value", name, message, hint)
        )
    return problems
