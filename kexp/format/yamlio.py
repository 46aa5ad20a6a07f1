"""Safe YAML for front-matter: a strict reader with positions, and the canonical writer.

The reader composes the YAML node graph (libyaml when present) and builds values itself,
so it can refuse what PyYAML would accept silently: duplicate keys, aliases (and so alias
bombs), tags outside the plain JSON-like set, and non-string keys. Strings are never
retyped: a plain scalar in a string field is kept exactly as written, even when YAML
would read it as a number or a timestamp (the caller is told, to warn).

The writer renders one field at a time, always the same way: block mapping at the top,
flow style for lists and mappings of scalars, strings quoted only when YAML (1.1 or 1.2)
needs it, and double-quoted (one line, escaped) whenever a string holds a line break.
"""

from __future__ import annotations

import dataclasses
import functools
import re
import sys
import warnings
from collections.abc import Iterator, Sequence
from typing import TYPE_CHECKING, Any, NamedTuple

if TYPE_CHECKING:
    import yaml

_TAG = "tag:yaml.org,2002:"
_STR, _INT, _FLOAT, _BOOL, _NULL, _TIMESTAMP = (
    _TAG + name for name in ("str", "int", "float", "bool", "null", "timestamp")
)
_SEQ, _MAP = _TAG + "seq", _TAG + "map"
_ALLOWED_SCALAR_TAGS = frozenset({_STR, _INT, _FLOAT, _BOOL, _NULL, _TIMESTAMP})
_LINE_BREAK = re.compile("[\n\r\x85\u2028\u2029]")
#: Deepest nesting of lists and mappings accepted in front-matter (``results`` needs 3).
#: Deeper is refused before it can exhaust the stack: libyaml composes recursively in C
#: (a 200 KB file of ``[`` crashes the interpreter) and scans deep flow nesting in
#: quadratic time.
MAX_DEPTH = 32
#: Above this many characters that can open a collection (``[{-:?``), the nesting depth
#: is measured from the tokens, stopping at :data:`MAX_DEPTH`, before composing.
_DEPTH_SCAN_ABOVE = 200
#: Longest integer accepted, in characters: an integer a float can hold has 309 digits.
#: Longer ones are refused before Python converts them (which is slow, or an error).
_MAX_INT_CHARS = 400


class _Yaml(NamedTuple):
    """What the reader needs from PyYAML, imported on first use: reading canonical
    files (:mod:`kexp.format.fastpath`) and answering queries from the cache need none of it."""

    loader: Any  # libyaml's CSafeLoader when PyYAML was built with it
    have_libyaml: bool
    openers: tuple[type[Any], ...]
    closers: tuple[type[Any], ...]
    constructor: Any


@functools.lru_cache(maxsize=1)
def _yaml() -> _Yaml:
    # lazy: PyYAML, only for what the fast path cannot read
    import yaml

    try:
        # lazy: PyYAML, only for what the fast path cannot read
        from yaml import CSafeLoader as loader

        have_libyaml = True
    except ImportError:
        from yaml import SafeLoader as loader  # type: ignore[assignment]

        have_libyaml = False
        warnings.warn(
            "PyYAML is installed without libyaml, so front-matter kexp cannot read by its "
            "fast path is parsed in pure Python, about 7 times slower (slow on big stores); "
            "install a PyYAML wheel built with libyaml (pip install --force-reinstall pyyaml)",
            RuntimeWarning,
            stacklevel=3,
        )
    return _Yaml(
        loader,
        have_libyaml,
        (
            yaml.BlockMappingStartToken,
            yaml.BlockSequenceStartToken,
            yaml.FlowMappingStartToken,
            yaml.FlowSequenceStartToken,
        ),
        (yaml.BlockEndToken, yaml.FlowMappingEndToken, yaml.FlowSequenceEndToken),
        yaml.constructor.SafeConstructor(),
    )


def have_libyaml() -> bool:
    """Whether PyYAML was built with libyaml (its C parser, about 7 times faster)."""
    return _yaml().have_libyaml


#: Plain scalars that YAML 1.2 readers (yq, ruamel.yaml, JavaScript and Go libraries) read
#: as numbers although PyYAML's YAML 1.1 rules keep them as strings: an all-digit hash
#: with an 8 or 9 after a leading 0 (``0123456789``), or one like ``1234e56``. The writer
#: quotes them; the reader keeps them as text without a warning (PyYAML reads them so).
_YAML12_INT = re.compile(r"[-+]?[0-9]+|0o[0-7]+|0x[0-9a-fA-F]+")
_YAML12_FLOAT = re.compile(
    r"[-+]?(?:\.[0-9]+|[0-9]+(?:\.[0-9]*)?)(?:[eE][-+]?[0-9]+)?"
    r"|[-+]?\.(?:inf|Inf|INF)|\.(?:nan|NaN|NAN)"
)


@dataclasses.dataclass
class YamlIssue:
    """A problem found while reading YAML, at a 0-based position within the YAML text."""

    line: int
    column: int
    code: str
    field: str
    message: str
    hint: str
    fatal: bool = True


class YamlReadError(Exception):
    """The YAML text cannot be read at all (syntax, tags, aliases, ...)."""

    def __init__(self, issue: YamlIssue, more: Sequence[YamlIssue] = ()) -> None:
        self.issue = issue
        #: Further issues of the same kind found in the same read (every key given
        #: twice, not only the first), so that one run reports them all.
        self.more = tuple(more)
        super().__init__(issue.message)


@dataclasses.dataclass
class YamlMapping:
    """A top-level mapping read from YAML, with the node of every key and value."""

    values: dict[str, Any]
    key_nodes: dict[str, yaml.Node]
    value_nodes: dict[str, yaml.Node]
    issues: list[YamlIssue]
    #: Fields whose plain scalars YAML would retype (kept as written; callers warn).
    retyped: list[tuple[str, yaml.Node, str]]
    #: Whether the mapping is in block style (``key: value`` lines), not ``{...}``.
    block: bool = True

    def locate(self, path: tuple[str | int, ...]) -> tuple[int, int]:
        """0-based (line, column) of the value at a JSON path, or of its nearest parent."""

        if not path or path[0] not in self.value_nodes:
            return (0, 0)
        key = str(path[0])
        node: yaml.Node = self.value_nodes[key]
        best = self.key_nodes[key].start_mark
        for step in path[1:]:
            child = _child(node, step)
            if child is None:
                break
            node = child
            best = node.start_mark
        if len(path) > 1:
            best = node.start_mark
        return (best.line, best.column)


def _child(node: yaml.Node, step: str | int) -> yaml.Node | None:
    # lazy: PyYAML, only for what the fast path cannot read
    import yaml

    if isinstance(node, yaml.SequenceNode) and isinstance(step, int):
        return node.value[step] if 0 <= step < len(node.value) else None
    if isinstance(node, yaml.MappingNode):
        for key_node, value_node in node.value:
            if key_node.value == step:
                return value_node  # type: ignore[no-any-return]
    return None


def read_mapping(text: str, string_fields: frozenset[str], *, first_line: int = 1) -> YamlMapping:
    """Read ``text`` as one YAML mapping, strictly. Raises :class:`YamlReadError`.

    ``string_fields`` are top-level keys whose plain scalars (and list items) are kept
    exactly as written, whatever type YAML would give them. ``first_line`` is the line
    number of the text's first line in its file, for line numbers quoted in messages
    (issue positions stay 0-based within ``text``).
    """
    # lazy: PyYAML, only for what the fast path cannot read
    import yaml

    if sum(map(text.count, "[{-:?")) > _DEPTH_SCAN_ABOVE:
        _check_depth(text)
    loader = _yaml().loader(text)
    try:
        root = loader.get_single_node()
    except RecursionError:  # pragma: no cover - pure-Python PyYAML on deep nesting
        raise YamlReadError(_too_deep(0, 0, "")) from None
    except yaml.MarkedYAMLError as exc:
        if "nesting depth" in str(exc.problem or ""):
            # libyaml ≥ 0.2.6 (PyYAML 6.0.4 wheels) stops deep nesting itself, scanning
            # ahead before kexp's own depth check sees a token.
            mark = exc.problem_mark or exc.context_mark
            line, column = (mark.line, mark.column) if mark else (0, 0)
            line, column = _deep_flow_position(text) or (line, column)
            raise YamlReadError(_too_deep(line, column, "")) from None
        raise YamlReadError(_syntax_issue(exc, text, first_line)) from None
    except yaml.YAMLError as exc:
        raise YamlReadError(
            YamlIssue(0, 0, "yaml-syntax", "", f"YAML error: {exc}", "fix the front-matter")
        ) from None
    finally:
        loader.dispose()
    if root is None:
        return YamlMapping({}, {}, {}, [], [])
    if not isinstance(root, yaml.MappingNode):
        raise YamlReadError(
            YamlIssue(
                root.start_mark.line,
                root.start_mark.column,
                "front-matter-not-mapping",
                "",
                "front-matter must be a mapping of field names to values",
                "write one 'field: value' per line",
            )
        )
    try:
        return _build(root, string_fields, first_line)
    except YamlReadError as exc:
        if exc.issue.code == "yaml-alias":
            # The node an alias refers to is the anchored one: point at the alias instead.
            alias = next((t for t in _tokens(text) if isinstance(t, yaml.AliasToken)), None)
            if alias is not None:
                exc.issue.line, exc.issue.column = alias.start_mark.line, alias.start_mark.column
        raise


def _too_deep(line: int, column: int, field: str) -> YamlIssue:
    return YamlIssue(
        line,
        column,
        "yaml-too-deep",
        field,
        f"lists and mappings are nested more than {MAX_DEPTH} levels deep here",
        "front-matter holds flat values, lists, and 'results' items: remove the nesting",
    )


def _deep_flow_position(text: str) -> tuple[int, int] | None:
    """0-based (line, column) of the first ``[`` or ``{`` nested deeper than
    :data:`MAX_DEPTH` (quoted text skipped), or None. The top-level block mapping
    counts as one level, as in :func:`_check_depth`."""
    depth = 0 if text.lstrip().startswith("{") else 1
    line, column, quote = 0, 0, ""
    for char in text:
        if quote:
            quote = "" if char == quote else quote
        elif char in "'\"":
            quote = char
        elif char in "[{":
            depth += 1
            if depth > MAX_DEPTH:
                return line, column
        elif char in "]}":
            depth = max(0, depth - 1)
        if char == "\n":
            line, column = line + 1, 0
        else:
            column += 1
    return None


def _check_depth(text: str) -> None:
    """Refuse nesting deeper than :data:`MAX_DEPTH`, reading tokens only that far."""
    depth = 0
    openers, closers = _yaml().openers, _yaml().closers
    for token in _tokens(text):
        if isinstance(token, openers):
            depth += 1
            if depth > MAX_DEPTH:
                mark = token.start_mark
                raise YamlReadError(_too_deep(mark.line, mark.column, ""))
        elif isinstance(token, closers):
            depth -= 1


def _tokens(text: str) -> Iterator[yaml.Token]:
    """The YAML tokens of ``text``, up to its first error."""
    # lazy: PyYAML, only for what the fast path cannot read
    import yaml

    try:
        yield from yaml.scan(text, Loader=_yaml().loader)
    except yaml.YAMLError:
        return


def _duplicate_keys(root: yaml.MappingNode, first_line: int) -> list[YamlIssue]:
    """A ``yaml-duplicate-key`` issue for every top-level key given again (a conflict
    resolved by deleting only git's marker lines leaves several), in the text's order."""
    # lazy: PyYAML, only for what the fast path cannot read
    import yaml

    first: dict[str, yaml.Node] = {}
    nodes: set[int] = set()
    issues: list[YamlIssue] = []
    for key_node, _ in root.value:
        if not isinstance(key_node, yaml.ScalarNode) or id(key_node) in nodes:
            continue  # not a field name, or an alias of one: the builder says so
        nodes.add(id(key_node))
        key = key_node.value
        if key not in first:
            first[key] = key_node
            continue
        line = first[key].start_mark.line + first_line
        issues.append(
            YamlIssue(
                key_node.start_mark.line,
                key_node.start_mark.column,
                "yaml-duplicate-key",
                key,
                f"duplicate key {key!r} (first given on line {line})",
                "keep one of the two lines; YAML readers silently keep only the last",
            )
        )
    return issues


def _build(root: yaml.MappingNode, string_fields: frozenset[str], first_line: int) -> YamlMapping:
    twice = _duplicate_keys(root, first_line)
    if twice:
        raise YamlReadError(twice[0], twice[1:])
    builder = _Builder(string_fields)
    builder.check_tag(root, "")
    result = YamlMapping({}, {}, {}, builder.issues, builder.retyped, not root.flow_style)
    for key_node, value_node in root.value:
        key = builder.key(key_node, "")  # none given twice: _duplicate_keys said so
        result.key_nodes[key] = key_node
        result.value_nodes[key] = value_node
        result.values[key] = builder.value(value_node, key, key in string_fields, top=True)
    return result


#: What a file that still holds git's conflict markers is.
CONFLICT_MESSAGE = (
    "unresolved merge conflict: git's <<<<<<< ======= >>>>>>> lines are still in the file"
)
#: How to settle a file that still holds git's conflict markers.
CONFLICT_HINT = (
    "keep the right version of the lines between <<<<<<< and >>>>>>> and delete the "
    "marker lines (the experiment's other lines stay as they are), then git add the file"
)
_CONFLICT_START = re.compile(r"^<{7}(?: |$)", re.MULTILINE)
_CONFLICT_MIDDLE = re.compile(r"^={7}$", re.MULTILINE)
_CONFLICT_END = re.compile(r"^>{7}(?: |$)", re.MULTILINE)


def conflict_marker_line(text: str) -> int | None:
    """The 0-based line of the first ``<<<<<<<`` of a whole git conflict block
    (``<<<<<<<``, then ``=======``, then ``>>>>>>>``, each at the start of a line) in
    ``text``; None when there is none."""
    start = _CONFLICT_START.search(text)
    if start is None:
        return None
    middle = _CONFLICT_MIDDLE.search(text, start.end())
    if middle is None or _CONFLICT_END.search(text, middle.end()) is None:
        return None
    return text.count("\n", 0, start.start())


def _syntax_issue(exc: yaml.MarkedYAMLError, text: str, first_line: int) -> YamlIssue:
    """A syntax error, placed where the mistake most likely is (not where YAML gave up)."""
    conflict = conflict_marker_line(text)
    if conflict is not None:
        # git's conflict markers, left by a merge: YAML only sees a key without ':'.
        return YamlIssue(
            conflict, 0, "merge-conflict", "", CONFLICT_MESSAGE, CONFLICT_HINT,
        )  # fmt: skip
    mark = exc.problem_mark or exc.context_mark
    if exc.context and exc.context.startswith("while scanning") and exc.context_mark:
        # An unclosed quote, a key without ':' ...: the token starts at the mistake.
        mark = exc.context_mark
    line, column = (mark.line, mark.column) if mark else (0, 0)
    problem = exc.problem or ""
    if exc.context:
        # e.g. "while parsing a flow sequence", which may have started lines above.
        context = exc.context
        if exc.context_mark is not None and exc.context_mark.line != line:
            context += f" started on line {exc.context_mark.line + first_line}"
        problem = f"{problem} ({context})" if problem else context
    hint = (
        "check quoting and indentation on this line; quote values that contain "
        "': ' or start with a special character"
    )
    runaway = _runaway_quote(text, line)
    if runaway is not None:
        # A quoted value that ran on over the following lines: its closing quote is
        # missing, and YAML only noticed lines later.
        end = runaway.end_mark.line + first_line
        problem = f"the quoted value on this line runs on to line {end} ({problem})"
        line, column = runaway.start_mark.line, runaway.start_mark.column
        hint = "add the missing closing quote on this line"
    return YamlIssue(line, column, "yaml-syntax", "", f"YAML syntax error: {problem or exc}", hint)


def _runaway_quote(text: str, error_line: int) -> yaml.Token | None:
    """A quoted scalar that starts lines above ``error_line`` and ends on it, if any."""
    # lazy: PyYAML, only for what the fast path cannot read
    import yaml

    for token in _tokens(text):
        if token.start_mark.line >= error_line:
            break
        if (
            isinstance(token, yaml.ScalarToken)
            and token.style in ("'", '"')
            and token.end_mark.line == error_line
        ):
            return token
    return None


class _Builder:
    """Builds Python values from YAML nodes, refusing aliases and unsafe tags."""

    def __init__(self, string_fields: frozenset[str]) -> None:

        self.string_fields = string_fields
        self.seen: set[int] = set()
        self.issues: list[YamlIssue] = []
        self.retyped: list[tuple[str, yaml.Node, str]] = []

    def fail(self, node: yaml.Node, code: str, field: str, message: str, hint: str) -> None:
        raise YamlReadError(
            YamlIssue(node.start_mark.line, node.start_mark.column, code, field, message, hint)
        )

    def check_tag(self, node: yaml.Node, field: str) -> None:
        # lazy: PyYAML, only for what the fast path cannot read
        import yaml

        if id(node) in self.seen:
            self.fail(
                node,
                "yaml-alias",
                field,
                "YAML aliases (*name) are not allowed in front-matter",
                "write the value out in full instead of referring to an anchor",
            )
        self.seen.add(id(node))
        allowed = (
            _ALLOWED_SCALAR_TAGS
            if isinstance(node, yaml.ScalarNode)
            else {_SEQ}
            if isinstance(node, yaml.SequenceNode)
            else {_MAP}
        )
        if node.tag not in allowed:
            self.fail(
                node,
                "yaml-unsafe-tag",
                field,
                f"YAML tag {node.tag!r} is not allowed: front-matter holds only plain "
                "strings, numbers, booleans, lists and mappings",
                "remove the '!' tag and write a plain value",
            )

    def key(self, node: yaml.Node, field: str) -> str:
        # lazy: PyYAML, only for what the fast path cannot read
        import yaml

        self.check_tag(node, field)
        if not isinstance(node, yaml.ScalarNode) or node.tag != _STR:
            self.fail(
                node,
                "yaml-bad-key",
                field,
                f"key {_key_text(node)} is not a field name",
                "keys are plain field names such as 'score' or 'change_summary'",
            )
        return str(node.value)

    def value(
        self, node: yaml.Node, field: str, keep_text: bool, top: bool = False, depth: int = 2
    ) -> Any:
        # lazy: PyYAML, only for what the fast path cannot read
        import yaml

        self.check_tag(node, field)
        if depth > MAX_DEPTH and not isinstance(node, yaml.ScalarNode):
            issue = _too_deep(node.start_mark.line, node.start_mark.column, field)
            raise YamlReadError(issue)
        if isinstance(node, yaml.ScalarNode):
            # Plain style is None from PyYAML's composer but "" from libyaml's.
            if keep_text and not node.style:
                # A plain scalar in a string field: keep it exactly as written.
                if node.tag != _STR and (node.tag != _NULL or node.value):
                    self.retyped.append((field, node, _tag_name(node.tag)))
                return node.value
            return self.scalar(node, field)
        if isinstance(node, yaml.SequenceNode):
            return [self.value(item, field, keep_text, depth=depth + 1) for item in node.value]
        mapping: dict[str, Any] = {}
        for key_node, value_node in node.value:
            key = self.key(key_node, field)
            if key in mapping:
                self.fail(
                    key_node,
                    "yaml-duplicate-key",
                    f"{field}.{key}",
                    f"duplicate key {key!r}",
                    "keep only one of the two",
                )
            mapping[key] = self.value(value_node, f"{field}.{key}", False, depth=depth + 1)
        return mapping

    def scalar(self, node: yaml.ScalarNode, field: str = "") -> Any:
        tag = node.tag
        if tag in (_STR, _TIMESTAMP):
            return node.value
        if tag == _NULL:
            return None
        number = None
        try:
            if tag == _BOOL:
                return _yaml().constructor.construct_yaml_bool(node)
            if tag == _FLOAT:
                return _yaml().constructor.construct_yaml_float(node)
            if len(node.value) <= _MAX_INT_CHARS:
                number = _yaml().constructor.construct_yaml_int(node)
        except (ValueError, IndexError, KeyError):
            # Only an explicit tag (!!int, !!float, !!bool) on another value gets here.
            self.fail(
                node,
                "yaml-bad-value",
                field,
                f"{_shorten(node.value)!r} is not {_tag_name(tag)}",
                "remove the '!!' tag, or write a value of that type",
            )
        if number is None or abs(number) > sys.float_info.max:
            self.fail(
                node,
                "yaml-number-too-large",
                field,
                f"the number {_shorten(node.value)} is too large to be a measurement",
                "write a plain number below 1e308 (quote it if it is meant as text)",
            )
        return number


def _shorten(text: str, limit: int = 24) -> str:
    return text if len(text) <= limit else f"{text[:limit]}... ({len(text)} characters)"


def _yaml12_number(text: str) -> bool:
    """Whether YAML 1.2 readers take this plain scalar for a number."""
    return bool(_YAML12_INT.fullmatch(text) or _YAML12_FLOAT.fullmatch(text))


def _key_text(node: yaml.Node) -> str:
    # lazy: PyYAML, only for what the fast path cannot read
    import yaml

    if isinstance(node, yaml.ScalarNode):
        return repr(node.value)
    return "[...]" if isinstance(node, yaml.SequenceNode) else "{...}"


def _tag_name(tag: str) -> str:
    names = {_INT: "an integer", _FLOAT: "a number", _BOOL: "a boolean", _NULL: "null"}
    return names.get(tag, "a timestamp" if tag == _TIMESTAMP else tag)


def iter_nodes(node: yaml.Node) -> Iterator[yaml.Node]:
    """Every node below ``node`` (depth first), ``node`` included."""
    # lazy: PyYAML, only for what the fast path cannot read
    import yaml

    yield node
    if isinstance(node, yaml.SequenceNode):
        for item in node.value:
            yield from iter_nodes(item)
    elif isinstance(node, yaml.MappingNode):
        for key, value in node.value:
            yield from iter_nodes(key)
            yield from iter_nodes(value)


# --- writing -------------------------------------------------------------------------


@functools.lru_cache(maxsize=1)
def _dumper() -> type[yaml.SafeDumper]:
    """The canonical dumper: pure Python, so the output is the same with or without
    libyaml (made on first use, like every use of PyYAML here)."""
    # lazy: PyYAML, only for what the fast path cannot read
    import yaml

    class Dumper(yaml.SafeDumper):
        def ignore_aliases(self, data: Any) -> bool:
            return True

    Dumper.add_representer(str, _represent_str)
    Dumper.add_representer(list, _represent_list)
    Dumper.add_representer(dict, _represent_dict)
    Dumper.add_representer(_TopLevel, _represent_top)
    return Dumper


class _TopLevel(dict):  # type: ignore[type-arg]
    """Marks the one-key mapping that renders a front-matter line (always block style)."""


def _is_scalar(value: Any) -> bool:
    return not isinstance(value, (list, dict))


def _represent_str(dumper: yaml.SafeDumper, data: str) -> yaml.Node:
    if _LINE_BREAK.search(data):
        style: str | None = '"'
    elif _yaml12_number(data):
        style = "'"  # PyYAML would write it plain, and YAML 1.2 read it as a number
    else:
        style = None
    return dumper.represent_scalar(_STR, data, style=style)


def _represent_list(dumper: yaml.SafeDumper, data: list[Any]) -> yaml.Node:
    return dumper.represent_sequence(_SEQ, data, flow_style=all(map(_is_scalar, data)))


def _represent_dict(dumper: yaml.SafeDumper, data: dict[str, Any]) -> yaml.Node:
    flow = all(map(_is_scalar, data.values()))
    return dumper.represent_mapping(_MAP, data.items(), flow_style=flow)


def _represent_top(dumper: yaml.SafeDumper, data: dict[str, Any]) -> yaml.Node:
    return dumper.represent_mapping(_MAP, data.items(), flow_style=False)


#: The field names the fast path of :func:`render_field` knows to be plain YAML keys.
_PLAIN_KEYS = frozenset(
    ("id", "pid", "change_summary", "score", "status", "is_buggy", "operator_sig",
     "dtype_sig", "env", "base_commit", "created_at", "tags", "author", "combines")
)  # fmt: skip
#: Hex with a letter no YAML reads as a number (ids, hashes): written plain.
_PLAIN_HEX = re.compile(r"[0-9a-f]*[acdf][0-9a-f]*")
#: An ISO timestamp ending in Z: PyYAML would read it as a timestamp, so it is quoted.
_QUOTED_TIMESTAMP = re.compile(
    r"[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}(?:\.[0-9]+)?Z"
)
#: Several words of one-line text with no YAML indicator in it: written plain.
_PLAIN_WORDS = re.compile(r"[A-Za-z][A-Za-z0-9,()%+=/_.*-]* [A-Za-z0-9 ,()%+=/_.*-]*[A-Za-z0-9%)]")
#: One word (bf16, done): written plain, unless YAML reads it as a boolean or null.
_PLAIN_WORD = re.compile(r"[A-Za-z][A-Za-z0-9_.-]*[A-Za-z0-9]|[A-Za-z]")
_YAML_WORDS = frozenset(("yes", "no", "true", "false", "on", "off", "null", "y", "n"))
#: Words with ': ' in them (csrc/cache.cu: reshape_and_cache): written single-quoted.
_QUOTED_WORDS = re.compile(r"[A-Za-z][A-Za-z0-9,()%+=/_.*:-]*(?: [A-Za-z0-9,()%+=/_.*:-]+)*")


def render_field(name: str, value: Any) -> str:
    """Render one front-matter field as its canonical line(s), ending with a newline.

    PyYAML's emitter renders it (:func:`render_field_with_yaml`); values whose form
    leaves YAML no choice (hex ids, timestamps, plain words, numbers, booleans) are
    written by the same rule directly, and every other value once per process (they
    repeat: status, env, tags), so that serializing does not cost a YAML emitter per
    field. ``tests/test_yamlio_fast.py`` holds the two equal."""
    kind = type(value)
    if name in _PLAIN_KEYS:
        if kind is str:
            if _PLAIN_HEX.fullmatch(value) or (_PLAIN_WORDS.fullmatch(value) and "  " not in value):
                return f"{name}: {value}\n"
            if _PLAIN_WORD.fullmatch(value) and value.lower() not in _YAML_WORDS:
                return f"{name}: {value}\n"
            if _QUOTED_TIMESTAMP.fullmatch(value) or (
                ": " in value
                and value[-1] not in ":-"
                and _QUOTED_WORDS.fullmatch(value)
                and "  " not in value
            ):
                return f"{name}: '{value}'\n"
        elif kind is bool:
            return f"{name}: {'true' if value else 'false'}\n"
        elif kind is int:
            return f"{name}: {value}\n"
        elif kind is float and value - value == 0:  # finite
            text = repr(value).lower()
            if "." not in text and "e" in text:
                text = text.replace("e", ".0e", 1)  # as PyYAML writes 1e17
            return f"{name}: {text}\n"
    if kind in (str, int, float, bool) or value is None:
        return _render_once(name, value)
    if kind is list and all(type(item) is str for item in value):
        return _render_list_once(name, tuple(value))
    return render_field_with_yaml(name, value)


@functools.lru_cache(maxsize=4096, typed=True)
def _render_once(name: str, value: Any) -> str:
    return render_field_with_yaml(name, value)


@functools.lru_cache(maxsize=1024)
def _render_list_once(name: str, items: tuple[str, ...]) -> str:
    return render_field_with_yaml(name, list(items))


def render_field_with_yaml(name: str, value: Any) -> str:
    """:func:`render_field` by PyYAML's emitter, always (the plain path)."""
    # lazy: PyYAML, only for what the fast path cannot read
    import yaml

    return yaml.dump(
        _TopLevel({name: value}),
        Dumper=_dumper(),
        sort_keys=False,
        allow_unicode=True,
        width=float("inf"),
    )
