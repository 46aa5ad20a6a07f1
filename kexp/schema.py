"""The JSON Schema of the front-matter: where it lives and how its errors read.

A valid document is recognised by a validator compiled from the schema with
fastjsonschema (about 20 times faster than jsonschema, which matters when a cold cache
checks 100,000 files); only a document it rejects is run through jsonschema, whose
errors carry the paths and keywords the report is built from. Neither is imported
until a file has to be checked, so queries served from the cache pay for neither.
"""

from __future__ import annotations

import functools
import json
from pathlib import Path
from typing import TYPE_CHECKING, Any

from kexp.problems import Problem

if TYPE_CHECKING:
    from kexp.fileformat import Document

_PACKAGED = Path(__file__).parent / "_data" / "experiment.schema.json"
_SOURCE_TREE = Path(__file__).parent.parent / "schema" / "experiment.schema.json"

#: How to fix each field, shown as the ``hint:`` line of a problem.
FIELD_HINTS = {
    "id": "ids are 16 lowercase hex digits; let kexp create them (kexp add, create_experiment)",
    "pid": "write the parent's full 16-hex id, or pid: '' when there is no parent",
    "change_summary": "one line of at most 80 characters, '<What> - <Result>'; put the "
    "details in '## Detailed description'",
    "score": "write the speedup ratio as a plain number, e.g. 'score: 1.18' "
    "(0 when nothing could be measured)",
    "status": "use one of: new, running, done, failed, timeout",
    "is_buggy": "write true or false",
    "operator_sig": "name the files and kernels affected, e.g. 'csrc/x.cu: my_kernel'",
    "dtype_sig": "write the data type, e.g. bf16",
    "env": "describe GPU, driver and versions, e.g. 'MI300X, ROCm 7.0.0' (see kexp env)",
    "base_commit": "write the full hash of the commit the change was made on (git rev-parse HEAD)",
    "created_at": "write a quoted UTC time such as '2026-11-29T15:52:36Z'",
    "tags": "write a list of short labels, e.g. tags: [cache, unroll]",
    "author": "write a name",
    "combines": "write a list of full experiment ids, e.g. combines: [6749f3a0c2d41e7b]",
    "results": "write a list of {config: NAME, baseline: US, candidate: US, speedup: X}",
}

_CODES = {
    "required": "missing-field",
    "type": "wrong-type",
    "enum": "not-allowed",
    "pattern": "bad-format",
    "maxLength": "too-long",
    "minLength": "empty-value",
    "minimum": "out-of-range",
    "exclusiveMinimum": "out-of-range",
    "uniqueItems": "duplicate-item",
}
_TYPE_NAMES = {
    "string": "text",
    "number": "a number",
    "boolean": "true or false",
    "array": "a list",
    "object": "a mapping",
}


def schema_path() -> Path:
    """The schema file: packaged with kexp, or in the source tree for editable installs."""
    return _PACKAGED if _PACKAGED.is_file() else _SOURCE_TREE


@functools.lru_cache(maxsize=1)
def load_schema() -> dict[str, Any]:
    """The experiment front-matter JSON Schema (2020-12) as a dict."""
    with schema_path().open(encoding="utf-8") as handle:
        schema: dict[str, Any] = json.load(handle)
    return schema


@functools.lru_cache(maxsize=1)
def _validator() -> Any:
    import jsonschema

    return jsonschema.Draft202012Validator(load_schema())


def _describe(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str):
        return f"the text {value!r}" if len(value) <= 60 else "a text"
    if isinstance(value, list):
        return "a list"
    if isinstance(value, dict):
        return "a mapping"
    if value is None:
        return "empty"
    return repr(value)


@functools.lru_cache(maxsize=1)
def _fast_validator() -> Any:
    import fastjsonschema

    # fastjsonschema implements drafts 4 to 7; the schema uses only keywords whose
    # meaning is the same in draft 7 and 2020-12.
    schema = dict(load_schema(), **{"$schema": "http://json-schema.org/draft-07/schema#"})
    return fastjsonschema.compile(schema)


def is_schema_valid(fields: Any) -> bool:
    """Whether ``fields`` satisfies the schema (fast; no report)."""
    import fastjsonschema

    try:
        _fast_validator()(fields)
    except fastjsonschema.JsonSchemaException:
        return False
    return True


def schema_problems(doc: Document) -> list[Problem]:
    """Every schema violation of a document's front-matter, positioned and with hints."""
    if is_schema_valid(doc.fields):
        return []
    from jsonschema.exceptions import relevance

    problems: list[Problem] = []
    for error in sorted(_validator().iter_errors(doc.fields), key=relevance):
        path = tuple(error.absolute_path)
        keyword = str(error.validator)
        if keyword == "required" and path:
            # A key missing inside a list item (results[0] without 'speedup'): point at
            # the item.
            dotted = ".".join(str(p) for p in path)
            line, column = doc.position(path)
            for name in [k for k in error.validator_value if k not in error.instance]:
                problems.append(
                    Problem(
                        doc.path,
                        line,
                        column,
                        "error",
                        "missing-field",
                        f"{dotted}.{name}",
                        f"{dotted} has no {name!r}",
                        FIELD_HINTS.get(str(path[0]), "see schema/experiment.schema.json"),
                    )
                )
            continue
        if keyword == "required":
            missing = [k for k in error.validator_value if k not in error.instance]
            for name in missing:
                problems.append(
                    Problem(
                        doc.path,
                        1,
                        1,
                        "error",
                        "missing-field",
                        name,
                        f"required field {name!r} is missing",
                        f"add a '{name}:' line to the front-matter; {FIELD_HINTS.get(name, '')}",
                    )
                )
            continue
        field = ".".join(str(p) for p in path)
        top = str(path[0]) if path else ""
        line, column = doc.position(path)
        problems.append(
            Problem(
                doc.path,
                line,
                column,
                "error",
                _code(top, keyword),
                field,
                _message(keyword, error.validator_value, error.instance, field),
                FIELD_HINTS.get(top, "see schema/experiment.schema.json"),
            )
        )
    return list(dict.fromkeys(problems))  # one error per missing key, not one per key pair


def _code(field: str, keyword: str) -> str:
    if field == "change_summary" and keyword == "pattern":
        return "summary-multiline"
    if field == "change_summary" and keyword == "maxLength":
        return "summary-too-long"
    return _CODES.get(keyword, f"schema-{keyword}")


def _message(keyword: str, expected: Any, value: Any, field: str) -> str:
    name = field or "front-matter"
    if keyword == "type":
        wanted = _TYPE_NAMES.get(str(expected), str(expected))
        return f"{name} must be {wanted}, not {_describe(value)}"
    if keyword == "enum":
        allowed = ", ".join(str(v) for v in expected)
        return f"{name} is {_describe(value)}; allowed: {allowed}"
    if keyword == "pattern":
        if field == "change_summary":
            return "change_summary must be one line"
        return f"{name} has the wrong format: {_describe(value)}"
    if keyword == "maxLength":
        return f"{name} is {len(value)} characters long; at most {expected} allowed"
    if keyword == "minLength":
        return f"{name} must not be empty"
    if keyword in ("minimum", "exclusiveMinimum"):
        bound = "at least" if keyword == "minimum" else "greater than"
        return f"{name} must be {bound} {expected}, not {value!r}"
    if keyword == "uniqueItems":
        return f"{name} lists the same item twice"
    return f"{name}: {keyword} {expected!r} not satisfied by {_describe(value)}"
