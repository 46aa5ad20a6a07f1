"""A fast reader for canonical front-matter, with YAML's exact semantics or no answer.

Reading 100,000 files through a YAML parser takes many seconds, but files kexp wrote
are simple: one ``key: value`` line per field, values plain, single-quoted, flow
lists of plain or single-quoted words, or flow mappings of such values (``protocol``).
:func:`read_simple_front_matter` reads exactly that subset (and, when asked, block lists
of one-line flow mappings: the ``results`` field) and returns the same values the full
reader (:mod:`kexp.format.yamlio`) would; for anything else (comments, escapes, special
characters, a value YAML would retype) it returns ``None`` and the caller falls back to
the full reader. Plain scalars are resolved with PyYAML's own implicit resolvers, so
``yes``, ``1e3`` or ``0o17`` mean what YAML says they mean.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Callable
from typing import Any

# A key YAML reads as an implicit (simple) key: at most 1024 characters up to the ':'
# (longer is a syntax error), so keys are kept far shorter.
_KEY = r"[A-Za-z_][A-Za-z0-9_]{0,127}"
_KEY_LINE = re.compile(_KEY + r": (.*)")
_BLOCK_KEY_LINE = re.compile(_KEY + r":")
# One item of a block list (at column 0, after a 'key:' line): a one-line flow mapping.
_MAPPING_ITEM_LINE = re.compile(r"- \{(.*)\}")
_QUOTED = r"'([^'\n]*(?:''[^'\n]*)*)'"
# A plain scalar in a flow collection: no flow indicators, quotes, ':' or '#'.
_PLAIN_ITEM_TEXT = r"[A-Za-z0-9_./(+~\-][^\t'\"\[\]{},#&*!|>%@`:]*"
_SINGLE_QUOTED = re.compile(_QUOTED)
# One item of a flow list, then ', ' and the next item, or the end.
_FLOW_ITEM = re.compile(r"(?:" + _QUOTED + r"|(" + _PLAIN_ITEM_TEXT + r"))(?:, (?=.)|$)")
# One 'key: value' of a flow mapping (the value quoted, a simple float, or plain), then
# ', ' and the next entry, or the end.
_FLOW_ENTRY = re.compile(
    r"(" + _KEY + r"): (?:" + _QUOTED + r"|(-?[0-9]+\.[0-9]+)|(" + _PLAIN_ITEM_TEXT + r"))"
    r"(?:, (?=.)|$)"
)
_FLOAT_SIMPLE = re.compile(r"-?[0-9]+\.[0-9]+")
# Hex digits with at least one letter (ids, commit hashes): no implicit resolver matches
# them (a float needs '.', a timestamp '-', an int only digits, '0x' or '0b' + bits).
_HEX_WORD = re.compile(r"(?!0b)[0-9a-f]*[a-f][0-9a-f]*")
_INT_SIMPLE = re.compile(r"-?(?:0|[1-9][0-9]*)")
_STR = "tag:yaml.org,2002:str"
#: The first characters PyYAML registers implicit resolvers for (YAML 1.1's bool, int,
#: float, null, timestamp, merge and value tags): a plain scalar starting with another
#: character is a string. Spelled out so that reading needs no PyYAML; a test checks it
#: against PyYAML's table.
RESOLVED_FIRST_CHARACTERS = frozenset("!&*+-.0123456789<=FNOTYfnoty~")


#: The plain words YAML 1.1 (PyYAML's implicit resolvers) reads as booleans or null; every
#: other plain scalar starting with a letter is a string (a test checks it with PyYAML).
_YEAR_DASH = re.compile("[0-9][0-9][0-9][0-9]-")
_BOOL_WORDS = "yes Yes YES no No NO true True TRUE false False FALSE on On ON off Off OFF"
_WORD_TAGS = {
    **dict.fromkeys(_BOOL_WORDS.split(" "), "tag:yaml.org,2002:bool"),
    **dict.fromkeys(("null", "Null", "NULL"), "tag:yaml.org,2002:null"),
}


@functools.lru_cache(maxsize=1)
def _yaml() -> tuple[Any, dict[Any, Any], type[Exception]]:
    """PyYAML's scalar constructor, implicit resolvers and error, imported on first use
    (most canonical files need none of them)."""
    # lazy: PyYAML, only for what the fast path cannot read
    import yaml

    resolvers = yaml.resolver.Resolver.yaml_implicit_resolvers
    return yaml.constructor.SafeConstructor(), resolvers, yaml.YAMLError


# Characters a plain scalar may not start with (YAML's indicators, blanks); '-', '?' and
# ':' may when no space follows (checked in _plain_value). A first character no implicit
# resolver is registered for makes a plain scalar a string, whatever follows.
_NOT_PLAIN_FIRST = frozenset(" \t,[]{}#&*!|>'\"%@`")
# The commonest lines the line cache misses in files kexp wrote, by value: 2: an id or a
# commit hash (hex digits with a letter; see _HEX_WORD); 3: a quoted text without quotes
# inside (a timestamp); 4: a number with a decimal point (a score); 5: a plain text
# starting with a character no resolver is registered for (a summary; checked further).
_COMMON_LINE = re.compile(
    r"(" + _KEY + r"): (?:((?!0b)[0-9a-f]*[a-f][0-9a-f]*)|'([^'\n]*)'|(-?[0-9]+\.[0-9]+)"
    r"|([^\s"
    + re.escape("".join(sorted(_NOT_PLAIN_FIRST | set("-?:") | RESOLVED_FIRST_CHARACTERS)))
    + r"][^\n]*))"
)
_DIGITS = "0123456789"
#: Whether a key resolves to a string (keys repeat: field names), bounded in size.
_KEY_IS_STR: dict[str, bool] = {}
_KEY_CACHE_SIZE = 4096
#: The tag of each plain scalar resolved, and per ``keep_text`` (False, True) the value
#: of each plain flow-list item read (list items repeat: tags); emptied when full.
_TAGS: dict[str, str] = {}
_ITEMS: tuple[dict[str, Any], dict[str, Any]] = ({}, {})
_CACHE_SIZE = 8192
#: Per set of string fields, ``key: value`` lines already read (most lines of a store
#: repeat: status, is_buggy, dtype_sig, env, tags, author...): their key, value (a list
#: kept as a tuple) and whether it is a list; emptied when full.
_LINE_CACHES: dict[
    tuple[frozenset[str], Callable[[str, Any], bool] | None], dict[str, tuple[str, Any, bool]]
] = {}
_LINE_CACHE_SIZE = 16384


def _tag_of_plain(value: str) -> str:
    tag = _TAGS.get(value)
    if tag is None:
        tag = _STR
        if value[:1].isalpha():
            # Only YAML 1.1's bool and null words resolve from a letter: no PyYAML needed
            # for the commonest plain words (done, false, fp16, tags...).
            tag = _WORD_TAGS.get(value, _STR)
        elif value[0] in _DIGITS and " " in value and not _YEAR_DASH.match(value):
            pass  # ints and floats hold no space; only a timestamp (YYYY-...) may
        else:
            for resolved, pattern in _yaml()[1].get(value[:1], []):
                if pattern.match(value):
                    tag = str(resolved)
                    break
        if len(_TAGS) >= _CACHE_SIZE:
            _TAGS.clear()
        _TAGS[value] = tag
    return tag


def _construct(kind: str, tag: str, value: str) -> Any:
    """PyYAML's value of a plain int or float scalar (``_Unsure`` if it refuses it)."""
    # lazy: PyYAML, only for what the fast path cannot read
    import yaml

    constructor, _, error = _yaml()
    try:
        return getattr(constructor, f"construct_yaml_{kind}")(yaml.ScalarNode(tag, value))
    except error:
        raise _Unsure from None


def _key_is_str(key: str) -> bool:
    known = _KEY_IS_STR.get(key)
    if known is None:
        known = _tag_of_plain(key) == _STR
        if len(_KEY_IS_STR) < _KEY_CACHE_SIZE:
            _KEY_IS_STR[key] = known
    return known


def _plain_value(value: str, keep_text: bool) -> Any:
    """The value of a plain scalar, or raise ``_Unsure``."""
    if value[-1] in " :" or ": " in value or " #" in value:
        raise _Unsure
    first = value[0]
    if first in "-?:" and (len(value) == 1 or value[1] == " "):
        raise _Unsure  # a block sequence entry, a complex key or a value: not a scalar
    if first not in RESOLVED_FIRST_CHARACTERS:
        return value
    if first in _DIGITS and _HEX_WORD.fullmatch(value):
        return value
    if (first in _DIGITS or first == "-") and _FLOAT_SIMPLE.fullmatch(value):
        # The float resolver comes first for a digit or '-' and matches this shape.
        if keep_text:
            raise _Unsure
        return float(value)
    tag = _tag_of_plain(value)
    if tag == _STR:
        return value
    if keep_text:
        raise _Unsure  # the full reader keeps it as text and warns; let it
    if tag.endswith(":float"):
        return _construct("float", tag, value)
    if tag.endswith(":int"):
        if len(value) > 300:
            raise _Unsure  # the full reader refuses numbers too large for a float
        if _INT_SIMPLE.fullmatch(value):
            return int(value)
        return _construct("int", tag, value)
    if tag.endswith(":bool") and value in ("true", "false"):
        return value == "true"
    raise _Unsure  # null, timestamps, yes/no booleans: leave them to the full reader


class _Unsure(Exception):
    """The line is outside the simple subset."""


def _flow_list(inner: str, keep_text: bool) -> list[Any]:
    if not inner:
        return []
    known = _ITEMS[keep_text]
    if "'" not in inner:
        # Items read before (tags repeat): a plain item holds no ',', so splitting on
        # ', ' gives the items the scanner below would find.
        values = [known.get(item) for item in inner.split(", ")]
        if None not in values:
            return values
    values = []
    pos, end = 0, len(inner)
    while pos < end:
        match = _FLOW_ITEM.match(inner, pos)
        if match is None:
            raise _Unsure
        quoted = match.group(1)
        if quoted is not None:
            values.append(quoted.replace("''", "'"))
        else:
            item = match.group(2)
            value = known[item] = _plain_value(item, keep_text)
            values.append(value)
        pos = match.end()
    if len(known) >= _CACHE_SIZE:
        known.clear()
    return values


def _flow_mapping(inner: str) -> dict[str, Any]:
    mapping: dict[str, Any] = {}
    pos, end = 0, len(inner)
    while pos < end:
        match = _FLOW_ENTRY.match(inner, pos)
        if match is None:
            raise _Unsure
        key = match.group(1)
        if key in mapping or not _key_is_str(key):
            raise _Unsure
        kind = match.lastindex
        if kind == 2:
            mapping[key] = match.group(2).replace("''", "'")
        elif kind == 3:
            mapping[key] = float(match.group(3))
        else:
            # Values inside a mapping are typed, even under a string field.
            mapping[key] = _plain_value(match.group(4), False)
        pos = match.end()
    return mapping


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
        if text[-1] != "]":
            raise _Unsure
        return _flow_list(text[1:-1], keep_text)
    if first == "{":
        if text[-1] != "}":
            raise _Unsure
        return _flow_mapping(text[1:-1])
    if first in _NOT_PLAIN_FIRST or "\t" in text:
        raise _Unsure
    return _plain_value(text, keep_text)


def read_simple_front_matter(
    text: str,
    string_fields: frozenset[str],
    *,
    block_lists: bool = False,
    accept: Callable[[str, Any], bool] | None = None,
) -> dict[str, Any] | None:
    """The front-matter mapping of ``text`` if it is in the simple subset, else None.

    When a mapping is returned it equals what :func:`kexp.format.yamlio.read_mapping` returns
    for the same text (with no warnings to report). With ``block_lists``, a ``key:``
    line followed directly by ``- {flow mapping}`` lines (how ``results`` is written)
    is read too; without it every value is on its key's line.

    ``accept(key, value)``, when given, must hold for every value, else None is
    returned. Its answer is remembered with the line read (a line always reads the
    same), so a line seen in an earlier text is not checked again.
    """
    cache_key = (string_fields, accept)
    cache = _LINE_CACHES.get(cache_key)
    if cache is None or len(cache) >= _LINE_CACHE_SIZE:
        if len(_LINE_CACHES) >= 8:
            _LINE_CACHES.clear()
        cache = _LINE_CACHES[cache_key] = {}
    values: dict[str, Any] = {}
    # The list of the block list being read, and whether it has no item yet.
    items: list[Any] | None = None
    empty = False
    block_keys: list[str] = []  # the keys of block lists (checked once read)
    cached = cache.get
    try:
        for line in text.split("\n"):
            known = cached(line)
            if known is not None:
                key, value, is_list = known
                if is_list:
                    value = list(value)
            elif not line:
                if empty:
                    return None  # 'key:' with no item on the next line: null, or odd
                items = None
                continue
            elif line[0] == "-":
                if items is None or not line.isprintable():
                    return None
                match = _MAPPING_ITEM_LINE.fullmatch(line)
                if match is None:
                    return None
                items.append(_flow_mapping(match.group(1)))
                empty = False
                continue
            else:
                match = _COMMON_LINE.fullmatch(line)
                if match is not None:
                    key = match.group(1)
                    kind = match.lastindex
                    if kind == 2:
                        value = match.group(2)
                    elif kind == 3:
                        value = match.group(3)
                        if not value.isprintable():
                            return None
                    elif kind == 5:
                        value = match.group(5)
                        if (
                            value[-1] in " :"
                            or ": " in value
                            or " #" in value
                            or not value.isprintable()
                        ):
                            return None  # a comment, a mapping, tabs...: not simple
                    elif key in string_fields:
                        return None  # the full reader keeps it as text and warns
                    else:
                        value = float(match.group(4))
                    if not (_KEY_IS_STR.get(key) or _key_is_str(key)):
                        return None
                    if accept is not None and not accept(key, value):
                        return None
                    cache[line] = (key, value, False)
                elif not line.isprintable():
                    return None
                else:
                    match = _KEY_LINE.fullmatch(line)
                    if match is None:
                        if empty or not (block_lists and _BLOCK_KEY_LINE.fullmatch(line)):
                            return None
                        key = line[:-1]
                        if key in values or not _key_is_str(key):
                            return None
                        items = values[key] = []
                        block_keys.append(key)
                        empty = True
                        continue
                    raw = match.group(1)
                    key = line[: len(line) - len(raw) - 2]
                    if not _key_is_str(key):
                        return None
                    value = _value(raw, key in string_fields)
                    if accept is not None and not accept(key, value):
                        return None
                    if type(value) is list:
                        cache[line] = (key, tuple(value), True)
                    elif type(value) is not dict:  # a mapping is not shared between files
                        cache[line] = (key, value, False)
            if empty or key in values:
                return None
            items = None
            values[key] = value
    except (_Unsure, ValueError):
        return None
    if empty:
        return None
    if accept is not None and block_keys:
        for key in block_keys:
            if not accept(key, values[key]):
                return None
    return values
