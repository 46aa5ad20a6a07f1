"""kexp report: the static HTML site, read back page by page and compared with the truth
read from the files. (The same pages in a real browser: test_report_browser.py.)"""

from __future__ import annotations

import datetime as dt
import hashlib
import json
import os
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import hypothesis.strategies as st
import pytest
from conftest import REPO_ROOT, experiment_fields, init_repo, run_kexp
from hypothesis import HealthCheck, settings
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, rule
from reportcheck import (
    ALLOWED_TAGS,
    RAW_CONTROL,
    SAFE_HREF,
    elements,
    linked_ids,
    scored,
    section,
    section_elements,
    sections,
    truth,
    with_class,
)

import kexp
from kexp import KernelExperiment, KexpError, Store
from kexp.agents.lessons import LESSON_GROUPS
from kexp.output.html import MARKER, PAGES, build_report
from kexp.output.html.pages import experiment_href, experiment_path, operator_slug

NOW = dt.datetime(2026, 11, 30, 12, 0, tzinfo=dt.timezone.utc)
MakeExperiment = Callable[..., KernelExperiment]
#: Text that would run script or change the page if any of it were not escaped.
HOSTILE = (
    '<script>window.pwned=1</script><img src=x onerror="window.pwned=2">'
    '<svg onload=window.pwned=3><a href="javascript:window.pwned=4">x</a>'
    "</textarea></title></style>]]><!-- \u202eevil\u202c \u2066iso\u2069 \x1b[31m\x07 & &amp;"
)


def files_of(folder: Path) -> dict[str, bytes]:
    return {
        p.relative_to(folder).as_posix(): p.read_bytes()
        for p in sorted(folder.rglob("*"))
        if p.is_file()
    }


def cells(page: Path, table_id: str) -> list[list[str]]:
    """The text of every body row of a table on a page."""
    html = page.read_text(encoding="utf-8")
    start = html.index(f'id="{table_id}"')
    body = html[start : html.index("</table>", start)]
    rows = []
    for row in re.findall(r"<tr>(.*?)</tr>", body.split("<tbody>", 1)[1], re.S):
        cells_html = re.findall(r"<td[^>]*>(.*?)</td>", row, re.S)
        rows.append([re.sub(r"<[^>]+>", "", c) for c in cells_html])
    return rows


def experiment_ids(html: str) -> set[str]:
    """The experiments an HTML text links to."""
    return set(re.findall(r"\.html#([0-9a-f]{16})\"", html))


# --- the bundled store --------------------------------------------------------------


def test_the_bundled_store_gets_every_page_type(tmp_path: Path) -> None:
    result = build_report(Store(REPO_ROOT), tmp_path / "site", now=NOW)
    facts = truth(REPO_ROOT)
    site = tmp_path / "site"
    assert result.index == site / "index.html" and result.index.is_file()
    assert result.experiments == len(facts)
    assert set(sections(site)) == set(facts)
    assert len(list((site / "e").iterdir())) == len({i[-3:] for i in facts})
    operators = {f["operator_sig"] for f in facts.values()}
    assert {p.stem for p in (site / "op").glob("*.html")} == {operator_slug(o) for o in operators}
    counts = {row[0]: int(row[1].replace(",", "")) for row in cells(result.index, "outcomes")}
    for outcome, count in counts.items():
        assert count == sum(f["outcome"] == outcome for f in facts.values()), outcome
    assert (site / MARKER).is_file()


def test_the_report_counts_what_stats_counts_controls_apart(
    store: Store, tmp_path: Path, make_experiment: MakeExperiment
) -> None:
    """An A/A control is the noise floor, not an improvement: the overview's outcomes,
    the operators' table and the cells never improved count it as ``kexp stats`` does."""
    from kexp.storage.stats import stats

    # (beyond twice the controls' 4 % drift: a change the A/A of the env does not hold)
    make_experiment(score=1.15, change_summary="Unrolled the inner loop by 4 - +15%")
    make_experiment(score=0.8, change_summary="Slower - -20%")
    make_experiment(score=1.03, tags=["control"], change_summary="A/A - control")
    make_experiment(score=1.04, tags=["control"], dtype_sig="fp8", change_summary="A/A fp8 - x")
    result = build_report(store, tmp_path / "site", now=NOW)
    counted = stats(store).by_outcome
    shown = {r[0]: int(r[1].replace(",", "")) for r in cells(result.index, "outcomes")}
    assert shown == {k: v for k, v in counted.items() if k != "total"}
    assert shown["control"] == 2 and shown["improvement"] == 1
    (operator_row,) = cells(result.index, "operators")
    # the experiments, then their outcomes as a bar, its tooltip and its text
    said = "improvement 1, regression 1, control 2"
    assert operator_row[1] == f"4 {said}{said}"
    # the fp8 cell holds a control alone: never improved
    assert operator_row[3] == "1"
    # the operator's experiments table shows a control as one, not as marginal
    (page,) = (tmp_path / "site" / "op").glob("*.html")
    shown = {row[-1]: row[4] for row in cells(page, "experiments")}
    assert shown["A/A - control"] == shown["A/A fp8 - x"] == "control", shown


def test_a_biased_control_is_a_control_everywhere_and_says_its_setup_is_biased(
    repo: Path, tmp_path: Path
) -> None:
    """An A/A control whose interval left out 1 (its candidate timed 3 % slower: the
    sides not timed alike) was listed by ``list --outcome regression`` and drawn a
    regression in ``tree`` and the report, while ``stats`` counted it a control
    (trial 20). Now its outcome is ``control`` in every view, and where the control is
    shown (the record, the context's noise floor) it says the timing setup is biased."""
    import random

    rng = random.Random(12)
    base = [0.0142 * rng.lognormvariate(0, 0.005) for _ in range(40)]
    cand = [0.0142 * 1.03 * rng.lognormvariate(0, 0.005) for _ in range(40)]
    for name, times in (("b", base), ("c", cand)):
        (tmp_path / f"{name}.json").write_text(json.dumps({"r64": times}), encoding="utf-8")
    added = run_kexp(
        "add", "--summary", "A/A - noise", "--operator", "k.py: k", "--dtype", "fp16",
        "--env", "H100", "--tag", "control", "--unit", "ms", "--baseline",
        str(tmp_path / "b.json"), "--candidate", str(tmp_path / "c.json"), cwd=repo,
    )  # fmt: skip
    assert added.returncode == 0, added.stderr
    exp = Store(repo).get_experiment(added.stdout.split()[1])
    assert exp.score_ci[1] < 1  # the interval leaves out 1, as an A/A run's cannot
    said = added.stderr  # the record's warning, on every write path
    assert "interval leaves out 1" in said and "biased" in said, said
    assert "biased" not in added.stdout, added.stdout  # said once, not twice

    def listed(*outcome: str) -> list[str]:
        found = run_kexp("list", "--outcome", *outcome, "--json", cwd=repo)
        assert found.returncode == 0, found.stderr
        return [e["id"] for e in json.loads(found.stdout)]

    assert listed("regression") == [] and listed("control") == [exp.id]
    assert exp.outcome == "control"
    counted = json.loads(run_kexp("stats", "--json", cwd=repo).stdout)["by_outcome"]
    assert counted["control"] == 1 and counted["regression"] == 0
    tree = run_kexp("tree", cwd=repo, env={"COLUMNS": "200"}).stdout
    (line,) = [t for t in tree.splitlines() if exp.id[:10] in t]
    assert "control" in line and "regression" not in line, line
    build_report(Store(repo), tmp_path / "site", now=NOW)
    page = (tmp_path / "site" / experiment_path(exp.id)).read_text(encoding="utf-8")
    assert "regression" not in page, page
    packet = run_kexp("context", "--operator", "k.py: k", "--json", cwd=repo)
    floor = json.loads(packet.stdout)["context"]["noise_floor"]
    assert floor["id"] == exp.id and "biased" in floor["text"], floor


def test_each_operator_page_names_its_cells_best_tip_by_its_cumulative_score(
    tmp_path: Path,
) -> None:
    store = Store(REPO_ROOT)
    build_report(store, tmp_path / "site", now=NOW)
    experiments = {e.id[:10]: e for e in store.list_experiments(brief=True)}
    for page in sorted((tmp_path / "site" / "op").glob("*.html")):
        html = page.read_text(encoding="utf-8")
        start = html.index('id="cells"')
        header = re.findall(r"<th[^>]*>(.*?)</th>", html[start : html.index("</thead>", start)])
        column = header.index("best cumulative")
        for row in cells(page, "cells"):
            best = experiments[row[column + 1]]
            assert row[column] == f"{best.cumulative_score:.4f}", page.name


def test_overview_stays_small_and_points_to_the_operator_pages(tmp_path: Path) -> None:
    result = build_report(Store(REPO_ROOT), tmp_path / "site", now=NOW)
    overview = result.index.read_text(encoding="utf-8")
    # per-operator data lives on the operator pages, not in the overview
    assert "chart score-chart" not in overview and "chart lineage" not in overview
    for page in (tmp_path / "site" / "op").glob("*.html"):
        assert f'href="op/{page.name}"' in overview


# --- what the pages say, against the truth ---------------------------------------------


def _cell_store(make_experiment: MakeExperiment) -> dict[str, KernelExperiment]:
    """Scores over the reference: each is its own cumulative score."""
    made = {}
    ref = "reference"
    made["a1"] = make_experiment(operator_sig="k.cu: alpha", dtype_sig="bf16", score=1.05)
    made["a2"] = make_experiment(
        operator_sig="k.cu: alpha",
        dtype_sig="bf16",
        score=1.20,
        pid=made["a1"].id,
        measured_against=ref,
    )
    made["a3"] = make_experiment(
        operator_sig="k.cu: alpha",
        dtype_sig="bf16",
        score=1.00,
        pid=made["a2"].id,
        measured_against=ref,
    )
    made["a4"] = make_experiment(
        operator_sig="k.cu: alpha",
        dtype_sig="bf16",
        score=0.0,
        is_buggy=True,
        error_message="crash",
        pid=made["a2"].id,
        measured_against=ref,
    )
    made["b1"] = make_experiment(operator_sig="k.cu: alpha", dtype_sig="fp8", score=0.97)
    made["b2"] = make_experiment(operator_sig="k.cu: alpha", dtype_sig="fp8", score=1.004)
    made["c1"] = make_experiment(
        operator_sig="k.cu: beta", dtype_sig="bf16", score=0.0, status="new"
    )
    made["d1"] = make_experiment(operator_sig="k.cu: beta", dtype_sig="bf16", env="H100", score=1.3)
    return made


def test_frontier_and_cells_never_improved(
    repo: Path, store: Store, make_experiment: MakeExperiment, tmp_path: Path
) -> None:
    made = _cell_store(make_experiment)
    result = build_report(store, tmp_path / "site", now=NOW)
    frontier = {(r[0], r[1], r[2]): (r[3], r[5]) for r in cells(result.index, "frontier")}
    env = made["a1"].env
    # A cell's best tip is a step that improved: fp8's best result is within noise.
    assert frontier == {
        ("k.cu: alpha", "bf16", env): ("1.2000", made["a2"].id[:10]),
        ("k.cu: beta", "bf16", "H100"): ("1.3000", made["d1"].id[:10]),
    }
    never = {(r[0], r[1], r[2]): r[4] for r in cells(result.index, "never")}
    # fp8 has only a regression and a marginal result; beta/bf16 only a pending one
    assert never == {("k.cu: alpha", "fp8", env): "1.0040", ("k.cu: beta", "bf16", env): "—"}


def test_operator_page_draws_one_point_and_one_node_per_experiment(
    repo: Path, store: Store, make_experiment: MakeExperiment, tmp_path: Path
) -> None:
    made = _cell_store(make_experiment)
    build_report(store, tmp_path / "site", now=NOW)
    facts = truth(repo)
    page = tmp_path / "site" / "op" / f"{operator_slug('k.cu: alpha')}.html"
    found = elements(page)
    alpha = [i for i, f in facts.items() if f["operator_sig"] == "k.cu: alpha"]
    assert sorted(linked_ids(found, "pt")) == sorted(alpha)
    assert sorted(linked_ids(found, "nd")) == sorted(alpha)
    points = dict(zip(linked_ids(found, "pt"), with_class(found, "pt"), strict=True))
    assert points[made["a4"].id].tag == "path" and "o-buggy" in points[made["a4"].id].classes
    assert "o-regression" in points[made["b1"].id].classes
    nodes = dict(zip(linked_ids(found, "nd"), with_class(found, "nd"), strict=True))
    # a2 is the best: the path a1 -> a2 is drawn; nothing built on it scored higher, but
    # the best is never a dead end; it is ringed as the operator's best
    assert {i for i, n in nodes.items() if "bp" in n.classes} == {made["a1"].id, made["a2"].id}
    assert {i for i, n in nodes.items() if "de" in n.classes} == set()
    assert {i for i, n in nodes.items() if "top" in n.classes} == {made["a2"].id}
    assert len(with_class(found, "best", "polyline")) == 1
    lessons = [e for e in found if e.tag == "ul" and "lessons" in e.classes]
    lesson_text = " ".join(e.text for e in lessons)
    for key in ("a3", "a4", "b1", "b2"):
        assert made[key].id[:10] in lesson_text
    assert "Key insight: unrolling helps" in lesson_text


def test_heatmap_has_one_cell_per_configuration_result(
    store: Store, make_experiment: MakeExperiment, tmp_path: Path
) -> None:
    results = [
        {"config": "t256", "baseline": 2.0, "candidate": 1.8, "speedup": 1.1111},
        {"config": "t1024", "baseline": 4.0, "candidate": 4.2, "speedup": 0.9524},
    ]
    first = make_experiment(score=1.0294, results=results)
    make_experiment(score=1.05, results=results[:1], pid=first.id)
    make_experiment(score=1.01)
    build_report(store, tmp_path / "site", now=NOW)
    page = tmp_path / "site" / "op" / f"{operator_slug(first.operator_sig)}.html"
    found = elements(page)
    rects = with_class(found, "hm", "rect")
    assert len(rects) == 3
    assert {r.text for r in rects} >= {f"{first.id[:10]} t1024: 0.9524× (4 → 4.2)"}
    # faster in green, slower in red
    fills = {
        r.text.split(" ")[1].rstrip(":"): r.attrs["fill"]
        for r in rects
        if r.text.startswith(first.id[:10])
    }
    green, red = fills["t256"], fills["t1024"]
    assert int(green[3:5], 16) > int(green[1:3], 16)
    assert int(red[1:3], 16) > int(red[3:5], 16)


def _add_front_matter(exp: KernelExperiment, line: str) -> None:
    assert exp.path is not None
    text = exp.path.read_text(encoding="utf-8")
    head, rest = text[4:].split("\n---\n", 1)
    exp.path.write_text(f"---\n{head}\n{line}\n---\n{rest}", encoding="utf-8")


def test_score_intervals_are_shown_and_drawn_as_whiskers(
    store: Store, make_experiment: MakeExperiment, tmp_path: Path
) -> None:
    with_ci = make_experiment(score=1.02)
    _add_front_matter(with_ci, "score_ci: [1.01, 1.03]")
    other = make_experiment(score=1.04, pid=with_ci.id, measured_against="reference")
    _add_front_matter(other, "score_ci: [1.035, 1.046]")
    make_experiment(score=1.01)
    build_report(store, tmp_path / "site", now=NOW)
    page = tmp_path / "site" / "op" / f"{operator_slug(with_ci.operator_sig)}.html"
    whiskers = [e for e in elements(page) if e.tag == "path" and e.classes == {"ci"}]
    assert len(whiskers) == 1
    assert whiskers[0].attrs["d"].count("V") == 2  # one vertical whisker each
    overview = (tmp_path / "site" / "index.html").read_text(encoding="utf-8")
    assert '1.0400 <span class="ci">[1.0350, 1.0460]</span>' in overview  # the frontier
    experiment = section(tmp_path / "site" / experiment_path(with_ci.id), with_ci.id)
    assert "[1.0100, 1.0300]" in experiment


def test_experiment_page_links_parent_children_and_renders_the_file(
    store: Store, make_experiment: MakeExperiment, tmp_path: Path
) -> None:
    parent = make_experiment(score=1.02)
    child = make_experiment(
        score=1.05,
        pid=parent.id,
        detailed_description="**Approach**: unroll `k` by 4\n\n- one\n- two\n\n"
        "**Key insight**: registers",
        code_change="--- a/k.cu\n+++ b/k.cu\n@@ -1 +1 @@\n-old\n+new",
    )
    grandchild = make_experiment(score=1.06, pid=child.id)
    build_report(store, tmp_path / "site", now=NOW)
    html = section(tmp_path / "site" / experiment_path(child.id), child.id)
    assert f'href="../{experiment_href(parent.id)}"' in html
    assert f'href="../{experiment_href(grandchild.id)}"' in html
    assert "<strong>Approach</strong>: unroll <code>k</code> by 4" in html
    assert "<ul><li>one</li><li>two</li></ul>" in html
    assert "<del>-old</del>" in html and "<ins>+new</ins>" in html
    assert f'href="../op/{operator_slug(child.operator_sig)}.html"' in html


# --- hostile text ---------------------------------------------------------------------


def hostile_store(repo: Path) -> tuple[Store, list[KernelExperiment]]:
    """Experiments with hostile text in every field, body, unknown key, section, result."""
    store = Store(repo)
    fields: dict[str, Any] = {
        "change_summary": "X" + HOSTILE[:70],
        "score": 1.5,
        "status": "done",
        "operator_sig": HOSTILE,
        "dtype_sig": HOSTILE,
        "env": HOSTILE,
        "detailed_description": HOSTILE
        + "\n\n**Key insight**: "
        + HOSTILE
        + "\n\n```\n"
        + HOSTILE
        + "\n```\n# "
        + HOSTILE,
        "raw_result": HOSTILE,
        "profiling_info": HOSTILE,
        "code_change": "+" + HOSTILE + "\n-" + HOSTILE + "\n@@ " + HOSTILE,
        "tags": [HOSTILE],
        "author": HOSTILE,
        "results": [{"config": HOSTILE, "baseline": 1.0, "candidate": 0.9, "speedup": 1.1}],
    }
    first = store.create_experiment(**fields)
    second = store.create_experiment(
        **{
            **fields,
            "score": 0.5,
            "pid": first.id,
            "combines": [first.id],
            # another change: its added line differs (the same changed lines with another
            # context line are the same small change, a near-duplicate)
            "code_change": fields["code_change"].replace("\n-", " 2\n-", 1),
        }
    )
    third = store.create_experiment(
        **{
            **fields,
            "score": 0.0,
            "is_buggy": True,
            "error_message": HOSTILE,
            "pid": second.id,
            "code_change": fields["code_change"].replace("\n-", " 3\n-", 1),
        }
    )
    assert first.path is not None
    text = first.path.read_text(encoding="utf-8")
    quoted = json.dumps(HOSTILE)
    text = text.replace("\n---\n", f"\n{quoted}: {quoted}\nnotes: {quoted}\n---\n{HOSTILE}\n\n", 1)
    first.path.write_text(text + f"\n## {HOSTILE}\n\n{HOSTILE}\n", encoding="utf-8")
    return store, [first, second, third]


def test_hostile_text_renders_as_text_on_every_page(repo: Path, tmp_path: Path) -> None:
    store, made = hostile_store(repo)
    exp = store.get_experiment(made[0].id)
    assert exp.extra_sections and exp.preamble and len(exp.extra_fields) == 2  # all read
    build_report(store, tmp_path / "site", now=NOW)
    pages = sorted((tmp_path / "site").rglob("*.html"))
    assert len(pages) == len({exp.id[-3:] for exp in made}) + 1 + 1
    for page in pages:
        raw = page.read_text(encoding="utf-8")
        assert RAW_CONTROL.search(raw) is None, page
        found = elements(page)
        for element in found:
            assert element.tag in ALLOWED_TAGS, (page, element)
            for name, value in element.attrs.items():
                assert not name.startswith("on"), (page, element)
                if name in ("href", "src"):
                    assert SAFE_HREF.fullmatch(value), (page, value)
                if name == "stroke":  # a campaign's colour, computed: never text
                    assert re.fullmatch("#[0-9a-f]{6}", value), (page, value)
                assert name in (
                    "href",
                    "src",
                    "rel",
                    "class",
                    "id",
                    "title",
                    "charset",
                    "content",
                    "http-equiv",
                    "name",
                    "lang",
                    "type",
                    "placeholder",
                    "aria-label",
                    "aria-hidden",
                    "data-filter",
                    "viewbox",
                    "width",
                    "height",
                    "role",
                    "d",
                    "cx",
                    "cy",
                    "r",
                    "x",
                    "y",
                    "fill",
                    "stroke",
                    "points",
                    "text-anchor",
                    "transform",
                    "defer",
                    "open",
                ), (page, name)
        scripts = [e for e in found if e.tag == "script"]
        assert all(e.attrs.get("src", "").endswith("assets/report.js") for e in scripts)
        assert all(not e.text.strip() for e in scripts)
    shown = HOSTILE.replace("\u202e", "\\u202e").replace("\u202c", "\\u202c")
    shown = shown.replace("\u2066", "\\u2066").replace("\u2069", "\\u2069")
    shown = shown.replace("\x1b", "\\x1b").replace("\x07", "\\x07")
    found = section_elements(tmp_path / "site" / experiment_path(made[0].id), made[0].id)
    assert [e.text for e in found if e.tag == "h1"] == [" ".join(("X" + shown[:70]).split())]
    body = " ".join(e.text for e in found if e.tag == "section")
    assert body.count(shown) >= 8  # every field and section, as text


def test_hostile_operator_names_make_safe_file_names(repo: Path, tmp_path: Path) -> None:
    store, _ = hostile_store(repo)
    build_report(store, tmp_path / "site", now=NOW)
    names = [p.name for p in (tmp_path / "site" / "op").iterdir()]
    assert len(names) == 1 and re.fullmatch(r"[a-z0-9-]+-[0-9a-f]{8}\.html", names[0])


# --- the output folder ----------------------------------------------------------------


def test_a_folder_that_holds_other_files_is_never_replaced(
    store: Store, make_experiment: MakeExperiment, tmp_path: Path
) -> None:
    make_experiment()
    mine = tmp_path / "mine"
    mine.mkdir()
    (mine / "thesis.tex").write_text("years of work")
    with pytest.raises(KexpError, match="not empty and holds no report"):
        build_report(store, mine)
    assert files_of(mine) == {"thesis.tex": b"years of work"}
    a_file = tmp_path / "file.html"
    a_file.write_text("x")
    with pytest.raises(KexpError, match="not a folder"):
        build_report(store, a_file)
    assert a_file.read_text() == "x"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["file.html", "mine", "repo"]


def test_a_new_report_replaces_the_previous_one_whole(
    store: Store, make_experiment: MakeExperiment, tmp_path: Path
) -> None:
    first = make_experiment(score=1.02)
    site = tmp_path / "site"
    build_report(store, site, now=NOW)
    store.delete_experiment(first.id)
    second = make_experiment(score=1.03)
    empty = tmp_path / "empty"
    empty.mkdir()
    build_report(store, empty, now=NOW)  # an empty folder is fine too
    build_report(store, site, now=NOW)
    assert files_of(site) == files_of(empty)
    assert second.id in sections(site) and first.id not in sections(site)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["empty", "repo", "site"]


def test_a_failed_build_keeps_the_previous_report(
    store: Store, make_experiment: MakeExperiment, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    make_experiment()
    site = tmp_path / "site"
    build_report(store, site, now=NOW)
    before = files_of(site)
    make_experiment(score=1.2)

    def broken(*args: Any) -> str:
        raise RuntimeError("disk full")

    monkeypatch.setattr("kexp.output.html.overview_page", broken)
    with pytest.raises(RuntimeError):
        build_report(store, site, now=NOW)
    assert files_of(site) == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["repo", "site"]


def test_default_output_is_in_the_cache_folder(
    store: Store, make_experiment: MakeExperiment
) -> None:
    make_experiment()
    result = build_report(store)
    assert result.output == store.cache_dir.resolve() / "report"
    assert result.index.is_file()


# --- one fast path: two processes --------------------------------------------------------


def test_two_processes_write_the_same_report_as_one(
    repo: Path,
    make_experiment: MakeExperiment,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    no_racy_window: None,
) -> None:
    """(Without the racy window both reports keep the same pages for reuse: with it, one
    built more than 2 s after the files were written kept them and the other did not,
    and the reports differed in .kexp-report-pages.json on a loaded machine.)"""
    import kexp.storage.parallel

    parent = None
    for number in range(12):
        parent = make_experiment(
            score=1.0 + number / 100,
            pid=parent.id if parent and number % 3 else "",
            is_buggy=number == 5,
            error_message="crash" if number == 5 else "",
            detailed_description=f"**Key insight**: lesson {number}",
            dtype_sig=("bf16", "fp8")[number % 2],
        )
    store = Store(repo)
    monkeypatch.setenv("KEXP_NO_FORK", "1")
    build_report(store, tmp_path / "one", now=NOW)
    monkeypatch.delenv("KEXP_NO_FORK")
    monkeypatch.setattr(kexp.storage.parallel, "PARALLEL_MIN_FILES", 1)
    monkeypatch.setattr(kexp.storage.parallel, "_forkable", lambda: True)
    build_report(store, tmp_path / "two", now=NOW)
    one, two = files_of(tmp_path / "one"), files_of(tmp_path / "two")
    assert one == two
    assert "lesson 5" in "".join(v.decode() for k, v in one.items() if k.startswith("op/"))


@pytest.fixture
def no_racy_window(monkeypatch: pytest.MonkeyPatch) -> None:
    """Files written a moment ago count as settled (kexp's writes replace a file, so its
    inode changes with every write: none can hide behind an equal signature)."""
    import kexp.output.html

    monkeypatch.setattr(kexp.output.html, "RACY_NS", 0)


def test_a_second_report_reuses_the_pages_that_did_not_change(
    store: Store, make_experiment: MakeExperiment, tmp_path: Path, no_racy_window: None
) -> None:
    # the last three hex digits of an id name its page: one page each here
    parent = make_experiment(score=1.02, id="6749f3a0c2d41111")
    child = make_experiment(score=1.05, pid=parent.id, id="6749f3a0c2d42222")
    other = make_experiment(score=1.1, dtype_sig="fp8", id="6749f3a0c2d43333")
    elsewhere = make_experiment(score=1.2, operator_sig="t.py: gemm", id="6749f3a0c2d45555")
    site = tmp_path / "site"
    build_report(store, site, now=NOW)
    operator_pages = {
        op: site / "op" / f"{operator_slug(op)}.html"
        for op in (parent.operator_sig, elsewhere.operator_sig)
    }
    operator_inodes = {op: page.stat().st_ino for op, page in operator_pages.items()}

    def inodes() -> dict[str, int]:
        return {
            exp.id: (site / experiment_path(exp.id)).stat().st_ino for exp in (parent, child, other)
        }

    first = inodes()
    build_report(store, site, now=NOW)
    assert inodes() == first  # nothing changed: every page linked, none written
    make_experiment(score=1.07, pid=child.id, id="6749f3a0c2d44444")  # child's page lists it
    store.update_experiment(other.id, change_summary="Retuned tiles - +10%")
    build_report(store, site, now=NOW)
    now = inodes()
    assert now[parent.id] == first[parent.id]
    assert now[child.id] != first[child.id] and now[other.id] != first[other.id]
    after = {op: page.stat().st_ino for op, page in operator_pages.items()}
    assert after[elsewhere.operator_sig] == operator_inodes[elsewhere.operator_sig]
    assert after[parent.operator_sig] != operator_inodes[parent.operator_sig]
    fresh = tmp_path / "fresh"
    build_report(store, fresh, now=NOW)
    assert files_of(site) == files_of(fresh)


def test_a_reused_page_prints_an_id_wider_once_another_shares_its_start(
    store: Store, make_experiment: MakeExperiment, tmp_path: Path, no_racy_window: None
) -> None:
    """An id is printed as wide as the store's ids need: a page is written again when an
    experiment elsewhere comes to share the start of an id it prints."""
    parent = make_experiment(score=1.02, id="6749f3a0c2d41111")
    child = make_experiment(score=1.05, pid=parent.id, id="0123456789abc222")
    site = tmp_path / "site"
    build_report(store, site, now=NOW)

    def printed() -> list[str]:
        found = section_elements(site / experiment_path(child.id), child.id)
        return [e.text for e in with_class(found, "id", "a")]

    assert printed() == [parent.id, "6749f3a0c2"]  # its parent: the field, the lineage
    make_experiment(score=1.1, operator_sig="t.py: gemm", id="6749f3a0c2ffff33")
    build_report(store, site, now=NOW)
    assert printed() == [parent.id, "6749f3a0c2d"]
    fresh = tmp_path / "fresh"
    build_report(store, fresh, now=NOW)
    assert files_of(site) == files_of(fresh)


def test_experiments_whose_ids_end_alike_share_a_page(
    store: Store, make_experiment: MakeExperiment, tmp_path: Path
) -> None:
    made = [make_experiment(score=1.0 + n / 100, id=f"6749f3a{n}c2d41abc") for n in range(3)]
    build_report(store, tmp_path / "site", now=NOW)
    assert [p.name for p in (tmp_path / "site" / "e").iterdir()] == ["abc.html"]
    assert list(sections(tmp_path / "site")) == [e.id for e in made]  # oldest first
    css = (tmp_path / "site" / "assets" / "report.css").read_text()
    assert "body:has(section.exp:target) section.exp:not(:target) { display: none; }" in css


def test_a_file_changed_in_place_is_rendered_again(
    store: Store, make_experiment: MakeExperiment, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import kexp.output.html

    exp = make_experiment(raw_result="timings: 1.019x")
    assert exp.path is not None
    site = tmp_path / "site"
    build_report(store, site, now=NOW)
    before = (site / experiment_path(exp.id)).stat().st_ino
    build_report(store, site, now=NOW)  # written a moment ago: no key, written again
    assert (site / experiment_path(exp.id)).stat().st_ino != before
    monkeypatch.setattr(kexp.output.html, "RACY_NS", 0)
    build_report(store, site, now=NOW)
    # the same size, the same modification time, the same inode: only ctime tells
    info = exp.path.stat()
    with exp.path.open("r+b") as handle:
        text = handle.read().replace(b"timings: 1.019x", b"timings: 1.021x")
        handle.seek(0)
        handle.write(text)
    os.utime(exp.path, ns=(info.st_atime_ns, info.st_mtime_ns))
    build_report(store, site, now=NOW)
    assert "timings: 1.021x" in section(site / experiment_path(exp.id), exp.id)


def test_pages_of_other_code_are_not_reused(
    store: Store, make_experiment: MakeExperiment, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import kexp.output.html

    monkeypatch.setattr(kexp.output.html, "RACY_NS", 0)
    exp = make_experiment()
    site = tmp_path / "site"
    build_report(store, site, now=NOW)
    build_report(store, site, now=NOW)
    before = (site / experiment_path(exp.id)).stat().st_ino
    build_report(store, site, now=NOW)
    assert (site / experiment_path(exp.id)).stat().st_ino == before  # reused
    monkeypatch.setattr(kexp.output.html, "_layout_digest", lambda: "another kexp")
    build_report(store, site, now=NOW)
    assert (site / experiment_path(exp.id)).stat().st_ino != before
    (site / kexp.output.html.PAGES).write_text("{broken")
    build_report(store, site, now=NOW)  # an unreadable list of keys: every page written
    assert exp.id in sections(site)


def test_with_bodies_reads_what_a_whole_listing_reads(repo: Path, tmp_path: Path) -> None:
    store, _ = hostile_store(repo)
    for extra in range(3):
        store.create_experiment(**experiment_fields(score=1.0 + extra / 10))
    whole = store.list_experiments()
    assert list(store.with_bodies(store.list_experiments(brief=True))) == whole
    for exp, read in zip(whole, store.with_bodies(store.list_experiments(brief=True)), strict=True):
        assert (read.preamble, read.extra_sections, read.extra_fields) == (
            exp.preamble,
            exp.extra_sections,
            exp.extra_fields,
        )
        assert read.path == exp.path and read.outcome == exp.outcome


def test_with_bodies_warns_about_a_file_gone_since_it_was_listed(
    store: Store, make_experiment: MakeExperiment
) -> None:
    exp = make_experiment()
    listed = store.list_experiments(brief=True)
    assert exp.path is not None
    exp.path.unlink()
    with pytest.warns(kexp.InvalidExperimentWarning, match="could not read the text"):
        found = list(store.with_bodies(listed))
    assert [e.id for e in found] == [exp.id] and found[0].detailed_description == ""


# --- filters, the CLI, the Python twin -------------------------------------------------------


def test_filters_choose_the_experiments_of_the_report(
    store: Store, make_experiment: MakeExperiment, tmp_path: Path
) -> None:
    made = _cell_store(make_experiment)
    result = build_report(store, tmp_path / "site", operator="beta", now=NOW)
    assert result.experiments == 2 and result.operators == 1
    assert set(sections(tmp_path / "site")) == {made["c1"].id, made["d1"].id}
    assert "operator=beta" in result.index.read_text(encoding="utf-8")


def test_cli_writes_the_report_and_prints_where(
    repo: Path, make_experiment: MakeExperiment, tmp_path: Path
) -> None:
    exp = make_experiment()
    done = run_kexp("report", "-o", str(tmp_path / "out"), cwd=repo)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == str((tmp_path / "out" / "index.html").resolve())
    assert "wrote a report of 1 experiment(s) on 1 operator(s)" in done.stderr
    assert exp.id in sections(tmp_path / "out")
    as_json = run_kexp("report", "-o", str(tmp_path / "out"), "--json", cwd=repo)
    assert json.loads(as_json.stdout)["pages"] == 3


def test_ids_the_report_prints_name_one_experiment_as_the_commands_do(
    repo: Path, tmp_path: Path
) -> None:
    """The predecessor's ids may share their first 10 characters (an imported campaign of
    7 does): the report prints them as wide as ``kexp list`` does, so each id it shows,
    given to ``kexp show``, names one experiment (not "ambiguous")."""
    from test_legacy import record, write_database

    db: dict[str, Any] = {}
    parent = ""
    for n, score in enumerate([0.9819, 1.0112, 1.019, 1.0031, 1.0004, 0.9937, 0.97], start=1):
        exp_id = f"a1f0c3d2e4b5{n:04x}"
        db[exp_id] = record(exp_id, pid=parent, score=score, change_summary=f"Step {n} - x")
        parent = exp_id
    db["b7e21f0a9c3d4e15"] = record("b7e21f0a9c3d4e15", operator_sig="gemm.py: gemm")
    source = write_database(tmp_path / "kernel_experiments_db.json", db)
    done = run_kexp("import", str(source), "--no-check-commits", cwd=repo)
    assert done.returncode == 0, done.stderr
    done = run_kexp("report", "-o", str(tmp_path / "site"), cwd=repo)
    assert done.returncode == 0, done.stderr
    listed = run_kexp("--no-pager", "list", cwd=repo).stdout
    widths = {len(i) for i in re.findall(r"(?<![0-9a-f])a1f0c3d2e4[0-9a-f]*(?![0-9a-f])", listed)}
    printed: set[str] = set()
    for page in (tmp_path / "site").rglob("*.html"):
        html = page.read_text(encoding="utf-8")
        printed |= set(re.findall(r"(?<![0-9a-f])a1f0c3d2e4[0-9a-f]*(?![0-9a-f])", html))
    ambiguous = {shown for shown in printed if sum(i.startswith(shown) for i in db) != 1}
    assert not ambiguous, f"the report prints ids that name several experiments: {ambiguous}"
    (page,) = (tmp_path / "site" / "op").glob("reshape-and-cache*.html")
    lessons = [e.text for e in with_class(elements(page), "id", "a")]
    assert lessons and {len(shown) for shown in lessons} == widths == {16}
    shown = run_kexp("show", lessons[0], cwd=repo)
    assert shown.returncode == 0 and lessons[0] in shown.stdout, shown.stderr


def test_cli_refuses_a_folder_it_did_not_write_with_one_line(
    repo: Path, make_experiment: MakeExperiment, tmp_path: Path
) -> None:
    make_experiment()
    (tmp_path / "docs").mkdir()
    (tmp_path / "docs" / "keep.md").write_text("mine")
    done = run_kexp("report", "-o", str(tmp_path / "docs"), cwd=repo)
    assert done.returncode == 2
    assert done.stderr.count("\n") == 1 and done.stderr.startswith("kexp: error: ")
    assert (tmp_path / "docs" / "keep.md").read_text() == "mine"


def test_python_twin_reports_the_default_store(
    repo: Path, make_experiment: MakeExperiment, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    make_experiment()
    monkeypatch.setenv("KEXP_ROOT", str(repo))
    result = kexp.report(tmp_path / "twin", dtype="bf16")
    assert result.experiments == 1 and result.index.is_file()


# --- model-based: the report of a store that changes, against the files ---------------------

OPERATORS = ("k.cu: alpha", "k.cu: beta", "t.py: gamma")


class ReportMachine(RuleBasedStateMachine):
    """Experiments are added, corrected and deleted; every report then written into the
    same folder shows what the files hold."""

    def __init__(self) -> None:
        super().__init__()
        self.base: Path | None = None

    @initialize()
    def make_store(self) -> None:
        import tempfile

        import kexp.output.html

        self.racy_ns = kexp.output.html.RACY_NS
        kexp.output.html.RACY_NS = 0  # reuse pages at once (see no_racy_window)

        self.base = Path(tempfile.mkdtemp(prefix="kexp-report-model-"))
        self.root = init_repo(self.base / "repo")
        (self.root / "experiments").mkdir()
        self.store = Store(self.root)
        self.site = self.base / "site"
        self.count = 0

    @rule(
        operator=st.sampled_from(OPERATORS),
        dtype=st.sampled_from(("bf16", "fp8")),
        score=st.sampled_from((0.9, 0.995, 1.0, 1.02, 1.1, 1.3)),
        kind=st.sampled_from(("done", "done", "done", "buggy", "pending", "timeout")),
        parent=st.integers(min_value=0, max_value=50),
        with_parent=st.booleans(),
        against=st.sampled_from(("parent", "reference")),
    )
    def add(
        self,
        operator: str,
        dtype: str,
        score: float,
        kind: str,
        parent: int,
        with_parent: bool,
        against: str,
    ) -> None:
        ids = sorted(truth(self.root))
        self.count += 1
        self.store.create_experiment(
            **experiment_fields(
                operator_sig=operator,
                dtype_sig=dtype,
                score=0.0 if kind == "timeout" else score,
                status={"pending": "new", "timeout": "timeout"}.get(kind, "done"),
                is_buggy=kind == "buggy",
                error_message="crash" if kind == "buggy" else "",
                pid=ids[parent % len(ids)] if ids and with_parent else "",
                measured_against=against if ids and with_parent else "",
                change_summary=f"Attempt {self.count} <b>{operator}</b> - {score}",
            )
        )

    @rule(which=st.integers(min_value=0, max_value=50), score=st.sampled_from((0.8, 1.05, 1.4)))
    def correct(self, which: int, score: float) -> None:
        ids = sorted(truth(self.root))
        if ids:
            self.store.update_experiment(ids[which % len(ids)], score=score)

    @rule(which=st.integers(min_value=0, max_value=50))
    def delete_a_leaf(self, which: int) -> None:
        facts = truth(self.root)
        leaves = sorted(i for i in facts if not any(f["pid"] == i for f in facts.values()))
        if leaves:
            self.store.delete_experiment(leaves[which % len(leaves)])

    @rule(operator=st.sampled_from((None, *OPERATORS)))
    def report_of_some(self, operator: str | None) -> None:
        """A report of some experiments written over the last one, then the whole again:
        the pages it reuses are the pages it would write."""
        filters = {"operator": operator} if operator else {}
        build_report(self.store, self.site, now=NOW, **filters)
        fresh = self.base / "fresh" if self.base else self.site
        build_report(self.store, fresh, now=NOW, **filters)
        assert files_of(self.site) == files_of(fresh)

    @invariant()
    def report_shows_the_files(self) -> None:
        if self.base is None:
            return
        result = build_report(self.store, self.site, now=NOW)
        fresh = self.base / "fresh"
        build_report(self.store, fresh, now=NOW)
        assert files_of(self.site) == files_of(fresh)  # reused pages == written pages
        facts = truth(self.root)
        assert result.experiments == len(facts)
        assert set(sections(self.site)) == set(facts)
        counts = {r[0]: int(r[1]) for r in cells(result.index, "outcomes")}
        counted = [  # a control (an A/A run) is counted apart, never as an outcome
            "control" if "control" in (f.get("tags") or []) else f["outcome"]
            for f in facts.values()
        ]
        assert counts == {
            o: counted.count(o)
            for o in (
                "improvement", "marginal", "regression", "interference", "buggy", "failed",
                "pending", "control",
            )
        }  # fmt: skip
        # the best tip: of the steps that improved, the highest cumulative score, then
        # the highest score, then the newest, then the smallest id (as documented)
        ranked = sorted(facts)
        ranked.sort(key=lambda i: facts[i]["created_at"], reverse=True)
        ranked.sort(key=lambda i: facts[i]["score"], reverse=True)
        ranked.sort(key=lambda i: facts[i]["cumulative"] or 0.0, reverse=True)
        best: dict[tuple[str, str, str], str] = {}
        for exp_id in ranked:
            f = facts[exp_id]
            if scored(f) and f["cumulative"] is not None and f["outcome"] == "improvement":
                best.setdefault((f["operator_sig"], f["dtype_sig"], f["env"]), exp_id)
        frontier = {(r[0], r[1], r[2]): r[5] for r in cells(result.index, "frontier")}
        assert frontier == {key: exp_id[:10] for key, exp_id in best.items()}
        for operator in {f["operator_sig"] for f in facts.values()}:
            page = self.site / "op" / f"{operator_slug(operator)}.html"
            found = elements(page)
            mine = sorted(i for i, f in facts.items() if f["operator_sig"] == operator)
            assert sorted(linked_ids(found, "pt")) == mine
            assert sorted(linked_ids(found, "nd")) == mine
        for exp_id, f in facts.items():
            html = section(self.site / experiment_path(exp_id), exp_id)
            linked = experiment_ids(html) - {exp_id}
            kids = {i for i, g in facts.items() if g["pid"] == exp_id}
            assert linked == kids | ({f["pid"]} if f["pid"] else set())

    def teardown(self) -> None:
        if self.base is not None:
            import shutil

            import kexp.output.html

            kexp.output.html.RACY_NS = self.racy_ns

            shutil.rmtree(self.base, ignore_errors=True)


TestReportMachine = ReportMachine.TestCase
TestReportMachine.settings = settings(
    max_examples=8,
    stateful_step_count=10,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)


def test_report_build_is_deterministic(
    store: Store, make_experiment: MakeExperiment, tmp_path: Path
) -> None:
    parent = make_experiment()
    make_experiment(pid=parent.id, score=1.1)
    build_report(store, tmp_path / "a", now=NOW)
    build_report(store, tmp_path / "b", now=NOW)
    digest = {k: hashlib.sha256(v).hexdigest() for k, v in files_of(tmp_path / "a").items()}
    assert digest == {k: hashlib.sha256(v).hexdigest() for k, v in files_of(tmp_path / "b").items()}
    assert os.listdir(tmp_path / "a" / "assets") and sorted(os.listdir(tmp_path / "a")) == [
        PAGES,
        MARKER,
        "assets",
        "e",
        "index.html",
        "op",
    ]


def test_a_lineage_deeper_than_the_recursion_limit(tmp_path: Path) -> None:
    """Agents iterate: a chain of 1,200 experiments (each built on the one before) is
    drawn whole, and kexp tree prints it (nothing recurses once per generation)."""
    import sys

    from kexp.format.fileformat import serialize

    root = tmp_path / "store"
    folder = root / "experiments" / "2026" / "11"
    folder.mkdir(parents=True)
    depth = max(1200, sys.getrecursionlimit() + 200)
    previous = ""
    for number in range(depth):
        exp = KernelExperiment(
            **{
                **experiment_fields(score=1.0 + (number % 50) / 1000),
                "id": f"6749f3a0{number:08x}",
                "pid": previous,
                "base_commit": "3f2c9e1a7b8d4c6e5f0a1b2c3d4e5f6a7b8c9d0e",
                "created_at": f"2026-11-{1 + number // 100:02d}T00:{number % 100 // 60:02d}:"
                f"{number % 60:02d}Z",
            }
        )
        (folder / f"{exp.id}-iteration.md").write_text(serialize(exp), encoding="utf-8")
        previous = exp.id
    store = Store(root)
    build_report(store, tmp_path / "site", now=NOW)
    page = tmp_path / "site" / "op" / f"{operator_slug(experiment_fields()['operator_sig'])}.html"
    found = elements(page)
    assert len(linked_ids(found, "nd")) == depth
    assert len(linked_ids(found, "pt")) == depth
    done = run_kexp("tree", cwd=root)
    assert done.returncode == 0, done.stderr
    # and the legend after a blank: 3 lines, and a 4th for the [best] mark the tip carries
    assert len(done.stdout.splitlines()) == depth + 5


# --- a large operator -----------------------------------------------------------------


def test_a_large_operator_is_paged_and_drawn_whole(
    store: Store,
    make_experiment: MakeExperiment,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    no_racy_window: None,
) -> None:
    """Past the page sizes (made small here), an operator's table and lessons go on
    further pages: every experiment in one row, every lesson once, every page linked
    from the others; its charts still draw every experiment (as paths, past the linked
    limit), the lineage path to the best as links; a second report reuses all its pages."""
    import kexp.output.html.pages as pages_module
    import kexp.output.html.svg as svg_module

    monkeypatch.setattr(pages_module, "ROWS_PER_PAGE", 4)
    monkeypatch.setattr(pages_module, "LESSONS_PER_PAGE", 3)
    monkeypatch.setattr(svg_module, "MAX_LINKED", 5)
    made, parent = [], ""
    for n, score in enumerate([1.02, 1.05, 0.9, 0.0, 1.1, 1.0, 1.2, 0.95, 1.3, 1.15, 0.5]):
        exp = make_experiment(
            score=score, pid=parent, is_buggy=score == 0.0,
            error_message="boom" if score == 0.0 else "", change_summary=f"Step {n} - x",
        )  # fmt: skip
        made.append(exp)
        parent = exp.id if score >= 1.0 else parent
    site = tmp_path / "site"
    build_report(store, site, now=NOW)
    slug = operator_slug(made[0].operator_sig)
    table_pages = [site / "op" / f"{slug}.html"] + [
        site / "op" / f"{slug}--experiments-{n}.html" for n in (2, 3)
    ]
    assert not (site / "op" / f"{slug}--experiments-4.html").exists()
    rows = [row for page in table_pages for row in cells(page, "experiments")]
    assert [row[0] for row in rows] == [exp.id[:10] for exp in made]
    lesson_pages = [site / "op" / f"{slug}.html", site / "op" / f"{slug}--lessons-2.html"]
    lessons = [e.text for page in lesson_pages for e in elements(page) if e.tag == "li"]
    facts = truth(store.root)
    lesson_ids = [i for i, f in facts.items() if f["outcome"] in LESSON_GROUPS]
    assert len(lesson_ids) > 3  # more than one page of them
    assert sorted(text[:10] for text in lessons) == sorted(i[:10] for i in lesson_ids)
    for page in [*table_pages, *lesson_pages]:
        for href in re.findall(r'href="\.\./(op/[^"#]+)"', page.read_text()):
            assert (site / href).is_file(), href
    main = elements(site / "op" / f"{slug}.html")
    dense = [e for e in main if e.tag == "path" and "pts" in e.classes]
    drawn = sum(e.attrs["d"].count("M") for e in dense) + len(linked_ids(main, "pt"))
    assert drawn == len(made)
    nodes = [e for e in main if e.tag == "path" and e.classes & {"nds"} and "de" not in e.classes]
    linked_nodes = linked_ids(main, "nd")
    assert sum(e.attrs["d"].count("M") for e in nodes) + len(linked_nodes) == len(made)
    best = max((e for e in made if not e.is_buggy), key=lambda e: e.score)
    assert best.id in linked_nodes and best.id in linked_ids(main, "pt")
    before = {p.name: p.stat().st_ino for p in (site / "op").iterdir()}
    build_report(store, site, now=NOW)
    assert {p.name: p.stat().st_ino for p in (site / "op").iterdir()} == before


def test_a_ref_pattern_matching_nothing_reads_the_working_tree_in_plain_words(
    repo: Path, tmp_path: Path
) -> None:
    """Trial K10: ``kexp report --refs 'origin/nosuch*'`` (no such ref: a warning) wrote
    "read from the working tree and 0 refs: " on every page, a dangling colon naming
    nothing. Each page says it read the working tree and that no ref matched."""
    from conftest import git

    added = run_kexp("add", "--summary", "A - +5%", "--score", "1.05", "--operator",
                     "k.cu: k", "--dtype", "bf16", "--env", "H100", cwd=repo)  # fmt: skip
    assert added.returncode == 0, added.stderr
    git(repo, "add", "-A")
    git(repo, "commit", "-qm", "a")
    out = tmp_path / "rep"
    done = run_kexp("report", "--refs", "origin/nosuch*", "-o", str(out), cwd=repo, process=True)
    assert done.returncode == 0 and "origin/nosuch*" in done.stderr, done.stderr
    pages = sorted(out.rglob("*.html"))
    assert len(pages) == 3, pages  # the overview, the operator's page, the experiment's
    for page in pages:
        words = " ".join(" ".join(e.text.split()) for e in elements(page) if e.tag == "footer")
        assert "the working tree (no ref matched)" in words, (page, words)
        assert "0 refs" not in page.read_text(encoding="utf-8"), page
    lead = [e.text for e in elements(out / "index.html") if "lead" in e.classes]
    assert any("read from the working tree (no ref matched)." in t for t in lead), lead
