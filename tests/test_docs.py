"""The documents a newcomer reads hold to what they describe: the module map of
docs/architecture.md names every module there is (and none that is gone), and every
relative link of the README, docs/, bench/README.md and the skill reaches a file and,
with an anchor, one of its headings."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from conftest import REPO_ROOT

DOCUMENTS = sorted(
    [
        REPO_ROOT / "README.md",
        REPO_ROOT / "bench" / "README.md",
        *(REPO_ROOT / "docs").glob("*.md"),
        *(REPO_ROOT / "skill").glob("*/SKILL.md"),
    ]
)
#: A Markdown link ``[text](target)``, outside code spans.
LINK = re.compile(r"\[[^\]]*\]\(([^)\s]+)\)")


def module_map() -> set[str]:
    """The paths the map of docs/architecture.md names (``core/campaign.py``,
    ``measure/timings/``), read from its indented tree."""
    text = (REPO_ROOT / "docs" / "architecture.md").read_text(encoding="utf-8")
    tree = text.split("\n```\nkexp/\n", 1)[1].split("\n```", 1)[0]
    named: set[str] = set()
    folders: list[str] = []
    for line in tree.splitlines():
        match = re.match(r"( +)(\S+)(\s|$)", line)
        if match is None or not match.group(2).endswith((".py", "/")):
            continue  # a description's continuation line
        depth = len(match.group(1)) // 2 - 1
        folders[depth:] = []
        name = "".join(folders) + match.group(2)
        named.add(name)
        if name.endswith("/"):
            folders.append(match.group(2))
    return named


def modules() -> set[str]:
    """The modules of kexp and of its packages, and their subpackages as folders."""
    root = REPO_ROOT / "kexp"
    found = {p.name for p in root.glob("*.py")}
    for package in root.iterdir():
        if package.is_dir() and (package / "__init__.py").exists():
            found.add(f"{package.name}/")
            for inner in package.iterdir():
                if inner.suffix == ".py" and inner.name != "__init__.py":
                    found.add(f"{package.name}/{inner.name}")
                elif inner.is_dir() and (inner / "__init__.py").exists():
                    found.add(f"{package.name}/{inner.name}/")
    return found


def test_the_module_map_names_every_module_and_no_other() -> None:
    named, there = module_map(), modules()
    assert there - named == set(), "modules missing from docs/architecture.md"
    assert {n for n in named - there if not n.endswith("__init__.py")} == set(), (
        "docs/architecture.md names modules that do not exist"
    )


def slug(heading: str) -> str:
    """GitHub's anchor of a heading: lower case, punctuation dropped, spaces as hyphens."""
    text = re.sub(r"`", "", heading.strip().lower())
    text = re.sub(r"[^\w\- ]", "", text)
    return text.replace(" ", "-")


def anchors(document: Path) -> set[str]:
    text = document.read_text(encoding="utf-8")
    text = re.sub(r"^```.*?^```", "", text, flags=re.MULTILINE | re.DOTALL)
    return {slug(h) for h in re.findall(r"^#+ (.+)$", text, re.MULTILINE)}


@pytest.mark.parametrize("document", DOCUMENTS, ids=lambda p: str(p.relative_to(REPO_ROOT)))
def test_every_relative_link_reaches_a_file_and_its_heading(document: Path) -> None:
    text = document.read_text(encoding="utf-8")
    text = re.sub(r"^```.*?^```", "", text, flags=re.MULTILINE | re.DOTALL)
    text = re.sub(r"`[^`\n]*`", "", text)
    broken = []
    for target in LINK.findall(text):
        if re.match(r"[a-z]+:", target):
            continue  # a web address
        path, _, anchor = target.partition("#")
        reached = (document.parent / path).resolve() if path else document
        missing = anchor and reached.suffix == ".md" and anchor not in anchors(reached)
        if not reached.exists() or missing:
            broken.append(target)
    assert broken == [], f"{document.name}: links that reach nothing"


def test_an_installed_kexp_says_where_its_documentation_is(tmp_path: Path) -> None:
    """The trial: the README ``kexp init`` writes sent a user who installed kexp from a
    wheel to "the kexp repository you installed it from"; it names what the installed
    kexp has (its help, the skill) and where the rest is, and the source distribution
    ships the docs/ the README links to."""
    from kexp.storage.location import init_store

    text = (init_store(tmp_path) / "experiments" / "README.md").read_text(encoding="utf-8")
    assert "repository you installed it from" not in text
    assert "`kexp --help`" in text and "`kexp skill install`" in text and "docs/" in text
    try:
        import tomllib
    except ImportError:  # Python 3.10
        import tomli as tomllib  # type: ignore[no-redef]
    project = tomllib.loads((REPO_ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    shipped = project["tool"]["hatch"]["build"]["targets"]["sdist"]["include"]
    readme = (REPO_ROOT / "README.md").read_text(encoding="utf-8")
    linked = {target.split("/")[0] for target in LINK.findall(readme) if "://" not in target}
    linked -= {target for target in linked if target.startswith("#")}
    assert linked <= set(shipped), linked - set(shipped)
