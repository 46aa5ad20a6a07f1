"""The house rules, read from the source: packages by role whose imports run
downwards in one order (``PACKAGE_ORDER``), no module over ``MAX_LINES`` lines, no
import back up into ``kexp/__init__.py``; imports run downwards (no circle among kexp's
modules, counting every import: at the top, inside functions, for type checkers only),
and no module uses another module's private (``_name``) names."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = ROOT / "kexp"

#: Private-looking names of the standard library's own API (namedtuple's methods,
#: os._exit, sys._getframe): not kexp's.
STDLIB_PRIVATE = frozenset({"_make", "_replace", "_fields", "_asdict", "_exit", "_getframe"})


def module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def kexp_modules() -> dict[str, Path]:
    found = {module_name(path): path for path in sorted(PACKAGE.rglob("*.py"))}
    found[module_name(ROOT / "kernel_exp_dataclass.py")] = ROOT / "kernel_exp_dataclass.py"
    return found


MODULES = kexp_modules()


def is_private(name: str) -> bool:
    return name.startswith("_") and not (name.startswith("__") and name.endswith("__"))


def resolve(importer: str, node: ast.ImportFrom) -> str:
    """The absolute module an ``from ... import`` names."""
    if not node.level:
        return node.module or ""
    package = importer.split(".")
    is_package = MODULES[importer].name == "__init__.py"
    base = package if is_package else package[:-1]
    base = base[: len(base) - (node.level - 1)]
    return ".".join([*base, *([node.module] if node.module else [])])


def imports_of(name: str, tree: ast.Module) -> set[str]:
    """The kexp modules ``name`` imports, wherever the import stands."""
    found: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names if alias.name in MODULES)
        elif isinstance(node, ast.ImportFrom):
            module = resolve(name, node)
            for alias in node.names:
                submodule = f"{module}.{alias.name}"
                if submodule in MODULES:
                    found.add(submodule)
                elif module in MODULES:
                    found.add(module)
    found.discard(name)
    return found


def circles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for other in sorted(graph.get(node, ())):
            if other not in index:
                visit(other)
                low[node] = min(low[node], low[other])
            elif other in on_stack:
                low[node] = min(low[node], index[other])
        if low[node] == index[node]:
            component = []
            while True:
                item = stack.pop()
                on_stack.discard(item)
                component.append(item)
                if item == node:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return found


def package_face(name: str) -> bool:
    """``kexp/__init__.py``: the public face, which names (lazily) what the modules
    below define; a module asking it for ``default_store`` does not make a circle."""
    return name == "kexp"


def private_uses(name: str, tree: ast.Module) -> list[str]:
    """Where module ``name`` imports or uses another kexp module's private name."""
    own: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            own.add(node.name)
        elif isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
            own.add(node.id)
        elif isinstance(node, ast.Attribute) and isinstance(node.ctx, ast.Store):
            own.add(node.attr)
        elif isinstance(node, ast.arg):
            own.add(node.arg)
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
            own.add(node.target.id)
    aliases: set[str] = set()  # names bound to kexp modules
    found: list[str] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom):
            module = resolve(name, node)
            if not module.startswith("kexp"):
                continue
            for alias in node.names:
                if f"{module}.{alias.name}" in MODULES:
                    aliases.add(alias.asname or alias.name)
                elif is_private(alias.name):
                    found.append(f"{name}:{node.lineno}: imports {module}.{alias.name}")
        elif isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name in MODULES:
                    aliases.add(alias.asname or alias.name.split(".")[0])
    for node in ast.walk(tree):
        if not isinstance(node, ast.Attribute) or not is_private(node.attr):
            continue
        if node.attr in STDLIB_PRIVATE:
            continue
        value = node.value
        if isinstance(value, ast.Name) and value.id in aliases:
            found.append(f"{name}:{node.lineno}: uses {value.id}.{node.attr}")
        elif isinstance(value, ast.Name) and value.id in ("self", "cls"):
            continue
        elif node.attr not in own:
            # A private attribute this module neither defines nor sets: another module's.
            found.append(f"{name}:{node.lineno}: uses .{node.attr} of another module")
    return found


TREES = {name: ast.parse(path.read_text(encoding="utf-8")) for name, path in MODULES.items()}


def test_no_import_circle_among_kexp_modules() -> None:
    graph = {
        name: {other for other in imports_of(name, tree) if not package_face(other)}
        for name, tree in TREES.items()
    }
    assert circles(graph) == []


def test_no_module_uses_another_modules_private_names() -> None:
    found = [use for name, tree in TREES.items() for use in private_uses(name, tree)]
    assert found == []


@pytest.mark.parametrize(
    ("source", "expected"),
    [
        (
            "from kexp.storage.store import _write_new\n",
            ["kexp.x:1: imports kexp.storage.store._write_new"],
        ),
        (
            "from kexp.storage import store\nstore._replace_all()\n",
            ["kexp.x:2: uses store._replace_all"],
        ),
        ("def f(store):\n    return store._validate_counted()\n", ["kexp.x:2: uses ."]),
        ("class A:\n    def f(self):\n        return self._own\n", []),
        ("from kexp.storage.store import write_failure\n", []),
    ],
)
def test_the_private_name_check_can_fail(source: str, expected: list[str]) -> None:
    MODULES["kexp.x"] = PACKAGE / "x.py"
    try:
        found = private_uses("kexp.x", ast.parse(source))
    finally:
        del MODULES["kexp.x"]
    assert [f[: len(e)] for f, e in zip(found, expected, strict=False)] == expected
    assert len(found) == len(expected)


def test_the_circle_check_can_fail() -> None:
    graph = {"kexp.a": {"kexp.b"}, "kexp.b": {"kexp.c"}, "kexp.c": {"kexp.a"}, "kexp.d": set()}
    assert circles(graph) == [["kexp.a", "kexp.b", "kexp.c"]]


# --- packages by role (issue 25) ------------------------------------------------------

#: kexp's packages, bottom first: a package imports only those below it (and itself).
PACKAGE_ORDER = [
    "core",
    "format",
    "gitops",
    "storage",
    "agents",
    "measure",
    "review",
    "output",
    "cli",
]
#: The modules that stay flat in kexp/: the public face and ``python -m kexp``.
FLAT_MODULES = frozenset({"kexp", "kexp.__main__"})
#: No module is longer than this (lines).
MAX_LINES = 900


def package_of(name: str) -> str | None:
    """The package of kexp a module belongs to (None: flat, or not kexp's)."""
    parts = name.split(".")
    if parts[0] != "kexp" or len(parts) < 2 or name in FLAT_MODULES:
        return None
    is_package = name in MODULES and MODULES[name].name == "__init__.py"
    return parts[1] if len(parts) > 2 or is_package else None


def test_every_module_is_in_a_package_by_role() -> None:
    stray = [
        name
        for name in MODULES
        if name.startswith("kexp") and name not in FLAT_MODULES and package_of(name) is None
    ]
    unknown = sorted(
        {p for name in MODULES if (p := package_of(name)) not in (None, *PACKAGE_ORDER)}
    )
    assert (stray, unknown) == ([], [])


def downward_breaches(graph: dict[str, set[str]]) -> list[str]:
    """Every import from a package to one above it in :data:`PACKAGE_ORDER`."""
    rank = {package: number for number, package in enumerate(PACKAGE_ORDER)}
    found = []
    for name, imported in sorted(graph.items()):
        own = package_of(name)
        for other in sorted(imported):
            theirs = package_of(other)
            if own is not None and theirs is not None and rank[theirs] > rank[own]:
                found.append(f"{name} ({own}) imports {other} ({theirs})")
    return found


def test_imports_run_downwards_between_packages() -> None:
    graph = {name: imports_of(name, tree) for name, tree in TREES.items()}
    assert downward_breaches(graph) == []


def test_the_package_order_check_can_fail() -> None:
    graph = {"kexp.core.model": {"kexp.storage.store"}, "kexp.storage.store": {"kexp.core.ids"}}
    assert downward_breaches(graph) == [
        "kexp.core.model (core) imports kexp.storage.store (storage)"
    ]


def test_no_module_imports_the_public_face() -> None:
    """``kexp/__init__.py`` imports from every package; none imports it back."""
    found = [
        name
        for name, tree in TREES.items()
        if name.startswith("kexp.") and "kexp" in imports_of(name, tree)
    ]
    assert found == []


def test_no_module_is_longer_than_the_bound() -> None:
    long = {
        name: count
        for name, path in MODULES.items()
        if (count := len(path.read_text(encoding="utf-8").splitlines())) > MAX_LINES
    }
    assert long == {}
