"""The report's experiment pages: one section per experiment (its fields, lineage links,
results and every section of its file), several experiments to a page."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from kexp.core.model import SECTION_HEADINGS, KernelExperiment
from kexp.output.html.markup import diff, one_line, page, preformatted, prose, table, text
from kexp.output.html.pages import (
    PAGE_DIGITS,
    Site,
    badge,
    counted_as,
    cumulative_text,
    score_interval,
    score_text,
)


def experiment_page_context(site: Site, exp: KernelExperiment) -> str:
    """Everything :func:`experiment_page` shows that the experiment's file does not hold:
    with the file's bytes, it decides the page (a report reuses a page of the previous
    one when both are the same). Keep it in step with :func:`experiment_page`."""

    def brief(other: KernelExperiment) -> tuple[Any, ...]:
        return (
            other.id,
            other.score,
            other.outcome,
            other.change_summary,
            score_interval(other),
            site.found_on(other),  # marked beside its link
        )

    parent = site.by_id.get(exp.pid) if exp.pid else None
    return repr(
        (
            exp.to_dict(),  # the front-matter as listed (the body comes from the file)
            exp.extra_fields,
            exp.outcome,
            exp.derived,  # its cumulative score depends on every ancestor
            site.relative_path(exp),
            site.page_footer,
            site.id_length,  # the ids it prints: wider when another id shares their start
            brief(parent) if parent is not None else None,
            [brief(kid) for kid in site.children.get(exp.id, [])],
            [other in site.by_id for other in exp.combines],
            site.operator_of(exp),
            site.found_on(exp),
            [site.found_on(site.by_id[i]) for i in exp.combines if i in site.by_id],
        )
    )


def _value_text(value: Any) -> str:
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, (list, dict)):
        return text(json.dumps(value, ensure_ascii=False))
    return text(value)


def experiment_section(site: Site, exp: KernelExperiment) -> str:
    """One experiment: its fields, lineage links, results and every section of its file,
    as the ``<section id="ID">`` of its page."""
    root = "../"
    parent = site.by_id.get(exp.pid) if exp.pid else None
    # The id and the operator (a link) head the section, in its "where" line.
    rows: list[tuple[str, str]] = [
        ("score", f"<b>{score_text(exp)}</b> {badge(counted_as(exp))}"),
        *([("why", text(exp.derived.drift))] if exp.derived.drift else []),
        ("measured against", text(exp.measured_against or ("parent" if exp.pid else "reference"))),
        ("cumulative", cumulative_text(exp) + (" (control)" if exp.is_control else "")),
        ("status", text(exp.status) + (" (buggy)" if exp.is_buggy else "")),
        ("dtype", text(exp.dtype_sig)),
        ("env", text(exp.env)),
        ("base commit", text(exp.base_commit)),
        ("created", text(exp.created_at)),
    ]
    if exp.pid:
        rows.append(("parent", site.experiment_link(exp.pid, root, exp.pid)))
    if exp.combines:
        rows.append(("combines", ", ".join(site.experiment_link(i, root, i) for i in exp.combines)))
    if exp.tags:
        rows.append(("tags", ", ".join(text(tag) for tag in exp.tags)))
    if exp.author:
        rows.append(("author", text(exp.author)))
    for key, value in exp.extra_fields.items():
        rows.append((str(key), _value_text(value)))
    path = site.relative_path(exp)
    if path:
        rows.append(("file", f"<code>{text(path)}</code>"))
    found = site.found_on(exp, every=True)
    if found:
        rows.append(("where", f'<span class="ref">{text(found)}</span>'))
    note = exp.where.note if site.reads_refs and exp.where is not None else ""
    if note:  # other versions, removals, unmerged work under it: as kexp show says
        rows.append(("note", text(note)))
    parts = [
        f"<h1>{one_line(exp.change_summary) or '(no summary)'}</h1>",
        '<table class="fields">'
        + "".join(f"<tr><th>{text(k)}</th><td>{v}</td></tr>" for k, v in rows)
        + "</table>",
    ]
    links = []
    if parent is not None:
        links.append(
            f"<p>Parent: {site.experiment_link(parent.id, root)} {score_text(parent)} "
            f"{badge(counted_as(parent))} {one_line(parent.change_summary)}</p>"
        )
    kids = site.children.get(exp.id, [])
    if kids:
        items = "".join(
            f"<li>{site.experiment_link(kid.id, root)} {score_text(kid)} {badge(counted_as(kid))} "
            f"{one_line(kid.change_summary)}</li>"
            for kid in kids
        )
        links.append(f"<p>Children ({len(kids)}):</p><ul>{items}</ul>")
    if links:
        parts += ["<h2>Lineage</h2>", *links]
    if exp.results:
        result_rows = [
            [
                text(r.get("config", "")),
                text(r.get("baseline", "")),
                text(r.get("candidate", "")),
                text(r.get("speedup", "")),
            ]
            for r in exp.results
        ]
        parts += [
            "<h2>Results</h2>",
            table(
                ["config", "baseline", "candidate", "speedup"],
                result_rows,
                numeric=(1, 2, 3),
                sortable=False,
            ),
        ]
    if exp.preamble.strip():
        parts.append(f'<div class="prose">{prose(exp.preamble)}</div>')
    for field, heading in SECTION_HEADINGS.items():
        value = getattr(exp, field)
        if not value:
            continue
        if field == "detailed_description":
            body = f'<div class="prose">{prose(value)}</div>'
        elif field == "code_change":
            body = diff(value)
        else:
            body = preformatted(value)
        parts.append(f"<h2>{text(heading)}</h2>{body}")
    for heading, value in exp.extra_sections:
        parts.append(f'<h2>{one_line(heading)}</h2><div class="prose">{prose(value)}</div>')
    crumbs = [
        site.operator_link(site.operator_of(exp), root, None),
        text(exp.id),
    ]
    return (
        f'<section class="exp" id="{text(exp.id)}"><p class="where">{" › ".join(crumbs)}</p>'
        + "".join(parts)
        + "</section>"
    )


def experiment_page(site: Site, experiments: Sequence[KernelExperiment]) -> str:
    """The page of the experiments whose ids end alike (:data:`PAGE_DIGITS`): a section
    each, oldest first; a link to one (``#ID``) shows that one only."""
    suffix = experiments[0].id[-PAGE_DIGITS:] if experiments else ""
    return page(
        f"kexp: experiments …{suffix}",
        "".join(experiment_section(site, exp) for exp in experiments),
        root="../",
        crumbs=[("../index.html", "Overview")],
        footer=site.page_footer,
    )
