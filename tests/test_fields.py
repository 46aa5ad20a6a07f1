"""The field table (:mod:`kexp.core.fields`) against the schema, the dataclass and the rows:
what is declared once must agree with every place that still spells a field out."""

from __future__ import annotations

import ast
import dataclasses
import json
from pathlib import Path
from typing import Any

from kexp.core.fields import (
    ARGUMENTS,
    FIELD,
    FIELDS,
    FRONT_MATTER_FIELDS,
    ITEM_TYPES,
    LEGACY_FIELDS,
    SCHEMA_TYPES,
)
from kexp.core.model import KernelExperiment
from kexp.storage import rows

ROOT = Path(__file__).resolve().parent.parent
SCHEMAS = sorted((ROOT / "schema").glob("*.json"))
#: The Python type of each kind of value in the dataclass, and in a cache row.
_PYTHON = {
    "text": "str",
    "number": "float",
    "boolean": "bool",
    "texts": "list[str]",
    "numbers": "list[float]",
    "records": "list[dict[str, Any]]",
    "mapping": "dict[str, Any]",
}
_ROW = {
    "texts": "tuple[str, ...]",
    "numbers": "tuple[float, ...]",
    "records": "tuple[dict[str, Any], ...]",
    "mapping": "dict[str, Any] | None",
}


def _schema_type(spec: dict[str, Any]) -> str:
    if "enum" in spec:
        kinds = {type(v) for v in spec["enum"]}
        assert kinds == {str}, spec
        return "string"
    return str(spec["type"])


def test_every_schema_property_is_a_field_of_the_same_type_and_requiredness() -> None:
    assert SCHEMAS
    for path in SCHEMAS:
        schema = json.loads(path.read_text(encoding="utf-8"))
        properties = schema["properties"]
        assert list(properties) == list(FRONT_MATTER_FIELDS), path.name
        assert set(schema["required"]) == {f.name for f in FIELDS if f.required}, path.name
        for name, spec in properties.items():
            field = FIELD[name]
            assert field.in_front_matter, name
            assert _schema_type(spec) == SCHEMA_TYPES[field.kind], name
            if field.kind in ITEM_TYPES:
                assert spec["items"]["type"] == ITEM_TYPES[field.kind], name


def test_body_fields_are_sections_never_required() -> None:
    body = [f for f in FIELDS if not f.in_front_matter]
    assert body and all(f.kind == "text" and not f.required and f.default == "" for f in body)
    assert len({f.heading.lower() for f in body}) == len(body)


def test_the_dataclass_has_the_table_fields_in_argument_order_with_their_defaults() -> None:
    assert sorted(ARGUMENTS) == sorted(FIELD)
    declared = [f for f in dataclasses.fields(KernelExperiment) if f.name in FIELD]
    assert [f.name for f in declared] == list(ARGUMENTS)
    assert [f.name for f in dataclasses.fields(KernelExperiment)][: len(ARGUMENTS)] == list(
        ARGUMENTS
    )
    blank = KernelExperiment(id="", created_at="")
    for name in ARGUMENTS:
        field = FIELD[name]
        assert declared[ARGUMENTS.index(name)].type == _PYTHON[field.kind], name
        assert getattr(blank, name) == field.default, name
        assert type(getattr(blank, name)) is type(field.default), name


def test_the_legacy_fields_are_table_fields() -> None:
    assert set(LEGACY_FIELDS) <= set(FIELD)
    assert len(set(LEGACY_FIELDS)) == len(LEGACY_FIELDS)


def test_a_row_is_the_front_matter_in_table_order_then_path_key_where() -> None:
    assert rows.Row._fields == (*FRONT_MATTER_FIELDS, "extra_fields", "path", "key", "where")


def test_the_rows_typed_view_names_table_fields_in_order_with_their_types() -> None:
    """The typed view mypy reads (``_RowValues`` in kexp/storage/rows.py) may leave a new field
    out, but what it names must be in the row's order and of the table's type."""
    tree = ast.parse(Path(rows.__file__).read_text(encoding="utf-8"))
    view = next(
        node
        for node in ast.walk(tree)
        if isinstance(node, ast.ClassDef) and node.name == "_RowValues"
    )
    named = {
        node.target.id: ast.unparse(node.annotation)
        for node in view.body
        if isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name)
    }
    order = list(rows.Row._fields)
    assert [order.index(name) for name in named] == sorted(order.index(name) for name in named)
    for name, annotation in named.items():
        if name in FIELD:
            kind = FIELD[name].kind
            assert annotation == _ROW.get(kind, _PYTHON[kind]), name


def test_a_rows_values_for_absent_optional_fields_are_the_table_defaults() -> None:
    values = rows.values_of({"id": "a" * 16})
    for index, name in enumerate(FRONT_MATTER_FIELDS):
        field = FIELD[name]
        if not field.required:
            assert values[index] == field.absent(), name
