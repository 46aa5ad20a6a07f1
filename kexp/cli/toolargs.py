"""The MCP tools' arguments checked before a tool runs: each is JSON of the type the
tool's input schema lists (``score: true`` is no number, ``"1.2"`` no number either,
``"no"`` no boolean: none is converted), and an unknown one (a typo), a missing one or
one of another type is a kexp error of one line naming it and what it must be."""

from __future__ import annotations

import difflib
import json
from collections.abc import Callable
from typing import Any

import pydantic
from jsonschema import Draft202012Validator
from mcp.server.mcpserver.utilities.func_metadata import FuncMetadata, func_metadata

from kexp.core.errors import KexpError

__all__ = ["Arguments", "expected", "shown"]


#: What a JSON schema's type reads as, alone and as the items of a list.
KINDS = {
    "integer": ("an integer", "integers"),
    "number": ("a number", "numbers"),
    "string": ("a string", "strings"),
    "boolean": ("true or false", "booleans"),
    "object": ("an object", "objects"),
    "array": ("a list", "lists"),
}


def shown(value: Any, most: int = 60) -> str:
    """A value an agent gave, as JSON, cut to ``most`` characters."""
    text = json.dumps(value, ensure_ascii=False, default=str)
    return text if len(text) <= most else text[: most - 1] + "…"


def expected(schema: dict[str, Any], plural: bool = False) -> str:
    """What a value of a JSON schema must be, in words ("an integer, at least 1")."""
    if "anyOf" in schema:
        kinds = [expected(s, plural) for s in schema["anyOf"] if s.get("type") != "null"]
        return " or ".join(dict.fromkeys(kinds))
    if "enum" in schema or "const" in schema:
        values = [shown(v) for v in schema.get("enum", [schema.get("const")])]
        if len(values) == 1:
            return values[0]
        listed = ", ".join(values[:-1]) + f" or {values[-1]}"
        return listed if plural else f"one of {listed}"
    kind = schema.get("type")
    if kind not in KINDS:
        return "values of the schema" if plural else "a value of the schema"
    text = KINDS[kind][plural]
    if kind == "array" and isinstance(schema.get("items"), dict):
        text += f" of {expected(schema['items'], plural=True)}"
    if kind == "object" and schema.get("additionalProperties") not in (None, True, {}):
        text += f" of {expected(schema['additionalProperties'], plural=True)}"
    if kind == "string" and schema.get("minLength") == 1:
        text = "non-empty " + text if plural else "a non-empty string"
    bounds = []
    if "minimum" in schema:
        bounds.append(f"at least {schema['minimum']}")
    if "maximum" in schema:
        bounds.append(f"at most {schema['maximum']}")
    return text + (", " + " and ".join(bounds) if bounds and not plural else "")


class Arguments:
    """A tool's arguments, checked before the SDK reads them: an unknown one (a typo)
    or one that is missing or of another JSON type than the listed schema's is a kexp
    error of one line naming it and what it must be (the SDK would ignore the first,
    convert ``true`` or ``"1.2"`` to a number, and dump pydantic's report)."""

    def __init__(self, fn: Callable[..., Any]) -> None:
        self.metadata: FuncMetadata = func_metadata(fn, structured_output=False)
        self.schema: dict[str, Any] = self.metadata.arg_model.model_json_schema(by_alias=True)
        self.properties: dict[str, dict[str, Any]] = self.schema.get("properties", {})
        #: The schema as the tool lists it: JSON's types, a boolean no number.
        self.validator = Draft202012Validator(self.schema)

    def check(self, arguments: dict[str, Any]) -> None:
        unknown = [name for name in arguments if name not in self.properties]
        if unknown:
            names = ", ".join(repr(name) for name in unknown)
            close = difflib.get_close_matches(unknown[0], self.properties, n=1)
            advice = f" (did you mean {close[0]!r}?)" if close else ""
            raise KexpError(
                f"unknown argument{'s' if len(unknown) > 1 else ''} {names}{advice}; "
                f"the arguments are: {', '.join(self.properties)}"
            )
        # As the SDK reads them (a list or an object sent as its JSON text parsed), then
        # checked against the listed schema: pydantic would convert what JSON keeps apart.
        given = self.metadata.pre_parse_json(arguments)
        refused = self.refused(given)
        if not refused:
            try:
                self.metadata.validate_arguments(given)
            except pydantic.ValidationError as exc:
                for error in exc.errors():
                    name = str(error["loc"][0]) if error["loc"] else ""
                    refused[name] = refused.get(name, False) or error["type"] == "missing"
        if refused:
            raise KexpError(self.explain(refused, given))

    def refused(self, arguments: dict[str, Any]) -> dict[str, bool]:
        """The arguments the listed schema refuses, in its order, each with whether it
        is missing (else: of another type, or out of bounds)."""
        required = self.schema.get("required", [])
        refused = {name: True for name in required if name not in arguments}
        for error in self.validator.iter_errors(arguments):
            if error.absolute_path:
                refused.setdefault(str(error.absolute_path[0]), False)
        order = list(self.properties)
        return dict(sorted(refused.items(), key=lambda item: (not item[1], order.index(item[0]))))

    def explain(self, refused: dict[str, bool], arguments: dict[str, Any]) -> str:
        """One line: each argument refused (missing, or what it must be and what was
        given)."""
        parts = []
        for name, missing in refused.items():
            schema = self.properties.get(name, {})
            what = expected(schema)
            if missing:
                about = f" ({schema['description']})" if schema.get("description") else ""
                parts.append(f"missing argument {name!r}: give {what}{about}")
            else:
                given = shown(arguments.get(name))
                parts.append(f"argument {name!r} must be {what}, not {given}")
        return "; ".join(parts)
