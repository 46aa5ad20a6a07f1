"""A fast reader for canonical front-matter, with YAML's exact semantics or no answer.

Reading 100,000 files through a YAML parser takes many seconds, but files kexp wrote
are simple: one ``key: value`` line per field, values plain, single-quoted, or flow
lists of plain words. :func:`read_simple_front_matter` reads exactly that subset and
returns the same values the full reader (:mod:`kexp.yamlio`) would; for anything else
(comments, block lists, escapes, special characters, a value YAML would retype) it
returns ``None`` and the caller falls back to the full reader. Plain scalars are
resolved with PyYAML's own implicit resolvers, so ``yes``, ``1e3`` or ``0o17`` mean
what YAML says they mean.
"""

from __future__ import annotations

import re
from typing import Any

import yaml

_KEY_LINE = re.compile(r"([A-Za-z_][A-Za-z0-9_]*): (.*)")
# A plain scalar we accept: starts with a safe character, no tab, no ': ' or ' #', no
# trailing space or colon (checked in _plain_value). Anything else: fall back.
_PLAIN = re.compile(r"[A-Za-z0-9_./(+~\-][^\t]*")
_PLAIN_ITEM = re.compile(r"[A-Za-z0-9_./(+~\-][^\t'\"\[\]{},#&*!|>%@`:]*")
_SINGLE_QUOTED = re.compile(r"'((?:[^'\n]|'')*)'")
_FLOAT_SIMPLE = re.compile(r"-?[0-9]+\.[0-9]+")
_INT_SIMPLE = re.compile(r"-?(?:0|[1-9][0-9]*)")
_STR = "tag:yaml.org,2002:str"
_CONSTRUCTOR = yaml.constructor.SafeConstructor()
_RESOLVERS = yaml.resolver.Resolver.yaml_implicit_resolvers


def _tag_of_plain(value: str) -> str:
    for tag, pattern in _RESOLVERS.get(value[:1], []):
        if pattern.match(value):
            return str(tag)
    return _STR


def _plain_value(value: str, keep_text: bool) -> Any:
    """The value of a plain scalar, or raise ``_Unsure``."""
    if value.endswith((" ", ":")) or ": " in value or " #" in value:
        raise _Unsure
    if value[0] == "-" and (len(value) == 1 or value[1] == " "):
        raise _Unsure  # a block sequence entry, not a scalar
    tag = _tag_of_plain(value)
    if tag == _STR:
        return value
    if keep_text:
        raise _Unsure  # the full reader keeps it as text and warns; let it
    if tag.endswith(":float"):
        if _FLOAT_SIMPLE.fullmatch(value):
            return float(value)
        return _CONSTRUCTOR.construct_yaml_float(yaml.ScalarNode(tag, value))
    if tag.endswith(":int"):
        if len(value) > 300:
            raise _Unsure  # the full reader refuses numbers too large for a float
        if _INT_SIMPLE.fullmatch(value):
            return int(value)
        return _CONSTRUCTOR.construct_yaml_int(yaml.ScalarNode(tag, value))
    if tag.endswith(":bool") and value in ("true", "false"):
        return value == "true"
    raise _Unsure  # null, timestamps, yes/no booleans: leave them to the full reader


class _Unsure(Exception):
    """The line is outside the simple subset."""


def _value(text: str, keep_text: bool) -> Any:
    if not text:
        raise _Unsure
    first = text[0]
    if first == "'":
        match = _SINGLE_QUOTED.fullmatch(text)
        if match is None:
            raise _Unsure
        return match.group(1).replace("''", "'")
    if first == "[":
        if not text.endswith("]"):
            raise _Unsure
        inner = text[1:-1]
        if not inner:
            return []
        items = inner.split(", ")
        values = []
        for item in items:
            if not _PLAIN_ITEM.fullmatch(item):
                raise _Unsure
            values.append(_plain_value(item, keep_text))
        return values
    if not _PLAIN.fullmatch(text):
        raise _Unsure
    return _plain_value(text, keep_text)


def read_simple_front_matter(text: str, string_fields: frozenset[str]) -> dict[str, Any] | None:
    """The front-matter mapping of ``text`` if it is in the simple subset, else None.

    When a mapping is returned it equals what :func:`kexp.yamlio.read_mapping` returns
    for the same text (with no warnings to report).
    """
    values: dict[str, Any] = {}
    try:
        for line in text.split("\n"):
            if not line:
                continue
            match = _KEY_LINE.fullmatch(line)
            if match is None:
                return None
            key, raw = match.group(1), match.group(2)
            if key in values or _tag_of_plain(key) != _STR or not line.isprintable():
                return None
            values[key] = _value(raw, key in string_fields)
    except (_Unsure, ValueError, yaml.YAMLError):
        return None
    return values
