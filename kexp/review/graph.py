"""The lineage graph a review draws: the experiments a change touches, their ancestors
and children, as data and as a Mermaid flowchart (every label escaped, so no
experiment text can end the label or the block)."""

from __future__ import annotations

import dataclasses
import re
from typing import Any

from kexp.core.outcome import NOTHING_MEASURED, shown_score

__all__ = ["LineageGraph", "LineageNode", "mermaid_id", "mermaid_text", "render_mermaid"]


@dataclasses.dataclass
class LineageNode:
    """One experiment in the lineage graph of a review.

    ``kind`` is ``added``, ``corrected`` or ``removed`` for an experiment the change
    touches, ``context`` for an ancestor or child drawn to show where it belongs.
    """

    id: str
    pid: str
    kind: str
    score: float
    outcome: str
    change_summary: str
    new_best: bool = False
    #: The run's status: a timed-out run measured nothing, whatever its score.
    status: str = ""

    @property
    def shown_score(self) -> float | None:
        """The score a view prints: None when it is no measurement, whatever the outcome
        (:func:`kexp.core.outcome.shown_score`); the JSON keeps ``score``."""
        return shown_score(self.score, self.status)

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready data (stable keys)."""
        return dataclasses.asdict(self)


@dataclasses.dataclass
class LineageGraph:
    """The lineage a change touches: its experiments, their ancestors and children.

    ``edges`` are ``(parent id, child id)`` pairs; ``omitted`` counts the relatives left
    out to keep the graph readable (:data:`kexp.review.headlines.MAX_GRAPH_NODES`).
    """

    nodes: list[LineageNode]
    edges: list[tuple[str, str]]
    omitted: int = 0

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready data (stable keys), with the Mermaid text as ``mermaid``."""
        return {
            "nodes": [n.to_dict() for n in self.nodes],
            "edges": [{"parent": a, "child": b} for a, b in self.edges],
            "omitted": self.omitted,
            "mermaid": render_mermaid(self) if self.nodes else "",
        }


# --- Mermaid ---------------------------------------------------------------------------

_MERMAID_SAFE = re.compile(r"[A-Za-z0-9 .,:+\-/()]")
_CLASS_STYLES = {
    "added": "fill:#dafbe1,stroke:#1a7f37,color:#000",
    "corrected": "fill:#fff8c5,stroke:#9a6700,color:#000",
    "removed": "fill:#ffebe9,stroke:#cf222e,stroke-dasharray:5 3,color:#000",
    "context": "fill:#f6f8fa,stroke:#8c959f,color:#000",
}


def mermaid_text(value: Any) -> str:
    """Text for inside a quoted Mermaid label: anything but a few plain characters is
    written as a Mermaid entity (``#35;``), so no text can end the label or the block."""
    return "".join(
        ch if _MERMAID_SAFE.fullmatch(ch) else f"#{ord(ch)};" for ch in " ".join(str(value).split())
    )


def mermaid_id(exp_id: str) -> str:
    """A Mermaid node id for an experiment id: ``e`` and the id's letters and digits."""
    return "e" + re.sub(r"[^0-9a-zA-Z]", "_", exp_id)


def render_mermaid(graph: LineageGraph) -> str:
    """The lineage graph as a Mermaid flowchart (top-down, parents above children).

    Every label is quoted and escaped with :func:`mermaid_text`; node ids are letters
    and digits only.
    """
    lines = ["flowchart TD"]
    for node in graph.nodes:
        shown = node.shown_score
        scored = f"{node.outcome} ({NOTHING_MEASURED})"
        if shown is not None:
            scored = f"{shown:.4f} {node.outcome}"
        label = [mermaid_text(node.id), mermaid_text(scored)]
        if node.kind == "removed":
            label.append("removed")
        if node.new_best:
            label.append("new best")
        lines.append(f'  {mermaid_id(node.id)}["{"<br/>".join(label)}"]')
    for parent, child in graph.edges:
        lines.append(f"  {mermaid_id(parent)} --> {mermaid_id(child)}")
    for kind, style in _CLASS_STYLES.items():
        members = [mermaid_id(n.id) for n in graph.nodes if n.kind == kind]
        if members:
            lines.append(f"  classDef {kind} {style}")
            lines.append(f"  class {','.join(members)} {kind}")
    return "\n".join(lines)
