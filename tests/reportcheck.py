"""Reading the HTML report back as a user's browser would see its structure, and the truth
about a store read straight from its files (YAML front-matter, not kexp's reader)."""

from __future__ import annotations

import dataclasses
import re
from html.parser import HTMLParser
from pathlib import Path
from typing import Any

import yaml

#: Every element the report may contain: anything else came from experiment text.
ALLOWED_TAGS = frozenset(
    [
        "html",
        "head",
        "meta",
        "title",
        "link",
        "script",
        "body",
        "nav",
        "main",
        "footer",
        "h1",
        "h2",
        "h3",
        "h4",
        "h5",
        "h6",
        "p",
        "br",
        "b",
        "i",
        "strong",
        "code",
        "pre",
        "ins",
        "del",
        "span",
        "div",
        "a",
        "ul",
        "ol",
        "li",
        "table",
        "thead",
        "tbody",
        "tr",
        "th",
        "td",
        "details",
        "summary",
        "input",
        "svg",
        "path",
        "circle",
        "rect",
        "text",
        "polyline",
        "section",
        "g",
    ]
)
#: Every link the report may hold: its own pages and assets, relative.
SAFE_HREF = re.compile(
    r"(?:\.\./)*(?:index\.html|op/[a-z0-9-]+\.html|e/[0-9a-f]{3}\.html#[0-9a-f]{16}|"
    r"assets/report\.(?:css|js))"
)
#: Characters that must never reach a page raw (controls, bidirectional controls).
RAW_CONTROL = re.compile(
    "[\x00-\x08\x0b-\x0c\x0e-\x1f\x7f-\x9f\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069]"
)


@dataclasses.dataclass
class Element:
    tag: str
    attrs: dict[str, str]
    text: str = ""

    @property
    def classes(self) -> set[str]:
        return set(self.attrs.get("class", "").split())


class _Collector(HTMLParser):
    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.elements: list[Element] = []
        self.open: list[Element] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        element = Element(tag, {k: v or "" for k, v in attrs})
        self.elements.append(element)
        if tag not in ("meta", "link", "br", "input"):
            self.open.append(element)

    def handle_startendtag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.elements.append(Element(tag, {k: v or "" for k, v in attrs}))

    def handle_endtag(self, tag: str) -> None:
        for index in range(len(self.open) - 1, -1, -1):
            if self.open[index].tag == tag:
                del self.open[index:]
                return

    def handle_data(self, data: str) -> None:
        for element in self.open:
            element.text += data


def elements(path: Path) -> list[Element]:
    """Every element of a page, with the text inside it (entities decoded)."""
    collector = _Collector()
    collector.feed(path.read_text(encoding="utf-8"))
    collector.close()
    return collector.elements


def with_class(found: list[Element], name: str, tag: str | None = None) -> list[Element]:
    return [e for e in found if name in e.classes and (tag is None or e.tag == tag)]


def linked_ids(found: list[Element], marker_class: str) -> list[str]:
    """The experiment ids the markers of ``marker_class`` link to (in page order): the
    markers sit inside ``<a href=...>``, so each marker follows its link."""
    ids = []
    last_href = ""
    for element in found:
        if element.tag == "a":
            last_href = element.attrs.get("href", "")
        elif marker_class in element.classes:
            match = re.search(r"#([0-9a-f]{16})$", last_href)
            assert match is not None, f"marker without a link: {element}"
            ids.append(match.group(1))
    return ids


def sections(site: Path) -> dict[str, Path]:
    """Every experiment of a report: its id and the page holding its section."""
    found = {}
    for page in sorted((site / "e").glob("*.html")):
        for exp_id in re.findall(r'<section class="exp" id="([0-9a-f]{16})">', page.read_text()):
            assert exp_id not in found, exp_id
            found[exp_id] = page
    return found


def section(page: Path, exp_id: str) -> str:
    """The HTML of one experiment's section of its page."""
    html = page.read_text(encoding="utf-8")
    start = html.index(f'<section class="exp" id="{exp_id}">')
    return html[start : html.index("</section>", start) + len("</section>")]


def section_elements(page: Path, exp_id: str) -> list[Element]:
    collector = _Collector()
    collector.feed(section(page, exp_id))
    collector.close()
    return collector.elements


# --- the truth, from the files ----------------------------------------------------------


def front_matter(path: Path) -> dict[str, Any]:
    text = path.read_text(encoding="utf-8")
    _, head, _ = text.split("---\n", 2)
    data = yaml.safe_load(head)
    assert isinstance(data, dict)
    return data


def truth(root: Path) -> dict[str, dict[str, Any]]:
    """Every experiment of a store by id: its front-matter and its outcome, derived from
    the files with the documented rules (thresholds 0.99 and 1.01)."""
    found = {}
    for path in sorted((root / "experiments").rglob("*.md")):
        if not re.match(r"[0-9a-f]{16}-", path.name):
            continue
        fields = front_matter(path)
        found[fields["id"]] = fields
    for fields in found.values():
        fields["cumulative"] = cumulative(fields, found)
    for fields in found.values():
        fields["outcome"] = _outcome(fields, found)
    return found


def cumulative(
    fields: dict[str, Any], everything: dict[str, dict[str, Any]], seen: tuple[str, ...] = ()
) -> float | None:
    """The speedup over the reference, by its definition: the product of the scores
    along the pid chain back to a root or a reference measurement (None when an
    experiment on it is buggy, pending or missing, or measured nothing)."""
    if fields["status"] in ("new", "running") or fields["is_buggy"] or fields["score"] <= 0:
        return None
    if "control" in (fields.get("tags") or []):
        return None
    if not fields["pid"] or fields.get("measured_against") == "reference":
        return float(fields["score"])
    parent = everything.get(fields["pid"])
    if parent is None or fields["pid"] in seen:
        return None
    before = cumulative(parent, everything, (*seen, fields["id"]))
    return None if before is None else before * float(fields["score"])


def _outcome(fields: dict[str, Any], everything: dict[str, dict[str, Any]]) -> str:
    if fields["status"] in ("new", "running"):
        return "pending"
    if fields["is_buggy"]:
        return "buggy"
    if fields["status"] in ("failed", "timeout") and not float(fields["score"]) > 0:
        return "failed"  # the run measured nothing: not a regression to 0
    combined = [i for i in fields.get("combines") or [] if i in everything]
    own = fields["cumulative"]
    if own is not None:
        known = [everything[i]["cumulative"] for i in combined]
        known = [v for v in known if v is not None]
        if known and own < max(known):
            return "interference"
    elif combined and fields["score"] < max(everything[i]["score"] for i in combined):
        return "interference"
    if fields["score"] < 0.99:
        return "regression"
    if fields["score"] > 1.01:
        return "improvement"
    return "marginal"


def scored(fields: dict[str, Any]) -> bool:
    return fields["outcome"] not in ("buggy", "failed", "pending")
