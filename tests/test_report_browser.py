"""kexp report in a real browser: headless Chromium (Debian's ``chromium``), driven by
Playwright's Python package, opens the pages from disk as a user would.

Each page type must load with no console error, draw one marker per experiment, run
nothing from a hostile experiment (which must read as text), and sort and filter its
tables. Screenshots of every page are kept in ``$KEXP_TEST_ARTIFACTS`` (default
``.artifacts/`` of the repository), printed at the end of the run.

``.ci/run`` installs Chromium and Playwright; where they are missing these tests are
skipped, unless ``KEXP_REQUIRE_BROWSER`` is set (as CI does), which makes that a failure.
"""

from __future__ import annotations

import datetime as dt
import itertools
import json
import math
import os
import re
import shutil
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from conftest import REPO_ROOT, experiment_fields, git, run_kexp
from reportcheck import scored, truth
from test_report import HOSTILE, hostile_store

from kexp import KernelExperiment, Store
from kexp.output.html import build_report
from kexp.output.html.pages import experiment_path, operator_slug

NOW = dt.datetime(2026, 11, 30, 12, 0, tzinfo=dt.timezone.utc)
#: Chromium's flags on a machine with no display, no sandbox and no network.
CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]
ARTIFACTS = Path(os.environ.get("KEXP_TEST_ARTIFACTS") or REPO_ROOT / ".artifacts") / "report"


def _chromium() -> str | None:
    for candidate in (
        os.environ.get("KEXP_CHROMIUM"),
        shutil.which("chromium"),
        "/usr/bin/chromium",
    ):
        if candidate and Path(candidate).is_file():
            return candidate
    return None


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    executable = _chromium()
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        executable = None
    if executable is None:
        reason = "headless Chromium and Playwright are needed (bash .ci/run installs them)"
        if os.environ.get("KEXP_REQUIRE_BROWSER"):
            pytest.fail(reason)
        pytest.skip(reason)
    profile = tempfile.mkdtemp(prefix="kexp-chromium-")
    with sync_playwright() as playwright:
        context = playwright.chromium.launch_persistent_context(
            profile,
            executable_path=executable,
            headless=True,
            args=CHROMIUM_ARGS,
            viewport={"width": 1280, "height": 900},
        )
        yield context
        context.close()
    shutil.rmtree(profile, ignore_errors=True)


@pytest.fixture(scope="module", autouse=True)
def artifacts() -> Iterator[Path]:
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    yield ARTIFACTS
    print(f"\nreport screenshots: {ARTIFACTS}")


class Opened:
    """A page opened from disk, with what the browser said while loading it."""

    def __init__(self, context: Any, path: Path, shot: str, fragment: str = "") -> None:
        self.errors: list[str] = []
        self.dialogs: list[str] = []
        self.requests: list[str] = []
        self.page = context.new_page()
        self.page.on(
            "console",
            lambda m: self.errors.append(f"{m.type}: {m.text}") if m.type == "error" else None,
        )
        self.page.on("pageerror", lambda e: self.errors.append(f"page error: {e}"))
        self.page.on("dialog", lambda d: (self.dialogs.append(d.message), d.dismiss()))
        self.page.on("request", lambda r: self.requests.append(r.url))
        self.page.goto(path.as_uri() + (f"#{fragment}" if fragment else ""))
        self.page.wait_for_load_state("load")
        self.page.screenshot(path=str(ARTIFACTS / f"{shot}.png"), full_page=True)

    def count(self, selector: str) -> int:
        return int(self.page.locator(selector).count())

    def eval(self, script: str) -> Any:
        return self.page.evaluate(script)

    def close(self) -> None:
        self.page.close()


@pytest.fixture
def open_page(browser: Any) -> Iterator[Callable[..., Opened]]:
    opened: list[Opened] = []

    def open_one(path: Path, shot: str, fragment: str = "") -> Opened:
        page = Opened(browser, path, shot, fragment)
        opened.append(page)
        return page

    yield open_one
    for page in opened:
        page.close()


def _only_local(requests: list[str], site: Path) -> None:
    for url in requests:
        assert url.startswith(site.as_uri() + "/"), url


#: Markers drawn inside their chart's area (a marker off the chart is not seen).
_DRAWN = """selector => Array.from(document.querySelectorAll(selector)).filter(element => {
  const box = element.getBoundingClientRect();
  const chart = element.closest('svg').getBoundingClientRect();
  return box.width > 0 && box.height > 0 && box.left >= chart.left - 1 &&
    box.right <= chart.right + 1 && box.top >= chart.top - 1 && box.bottom <= chart.bottom + 1;
}).length"""


def test_bundled_store_pages_load_clean_and_draw_every_experiment(
    tmp_path: Path, open_page: Callable[..., Opened]
) -> None:
    site = tmp_path / "site"
    build_report(Store(REPO_ROOT), site, now=NOW)
    facts = truth(REPO_ROOT)
    overview = open_page(site / "index.html", "bundled-overview")
    assert overview.errors == [] and overview.dialogs == []
    _only_local(overview.requests, site)
    assert overview.count("#frontier tbody tr") == len(
        {
            (f["operator_sig"], f["dtype_sig"], f["env"])
            for f in facts.values()
            if f["outcome"] not in ("buggy", "pending")
        }
    )
    for number, operator in enumerate(sorted({f["operator_sig"] for f in facts.values()})):
        shown = sum(f["operator_sig"] == operator for f in facts.values())
        page = open_page(
            site / "op" / f"{operator_slug(operator)}.html", f"bundled-operator-{number}"
        )
        assert page.errors == [], operator
        _only_local(page.requests, site)
        assert page.count("svg.score-chart .pt") == shown
        assert page.count("svg.lineage .nd") == shown
        assert page.eval(f"({_DRAWN})('svg.score-chart .pt')") == shown
        assert page.eval(f"({_DRAWN})('svg.lineage .nd')") == shown
        with_results = [
            f for f in facts.values() if f["operator_sig"] == operator and f.get("results")
        ]
        assert page.count("svg.heatmap rect.hm") == sum(len(f["results"]) for f in with_results)
    for number, exp_id in enumerate(sorted(facts)[:3]):
        page = open_page(site / experiment_path(exp_id), f"bundled-experiment-{number}", exp_id)
        assert page.errors == []
        assert (
            page.eval("document.querySelector('section:target h1').textContent")
            == facts[exp_id]["change_summary"]
        )


def test_tables_sort_and_filter_in_the_browser(
    tmp_path: Path, open_page: Callable[..., Opened]
) -> None:
    site = tmp_path / "site"
    build_report(Store(REPO_ROOT), site, now=NOW)
    page = open_page(site / "index.html", "bundled-overview-sorted")
    scores = (
        "Array.from(document.querySelectorAll('#frontier tbody tr')).map(r => "
        "parseFloat(r.cells[3].textContent))"
    )
    header = page.page.locator("#frontier thead th", has_text="best cumulative")
    header.click()
    ascending = page.eval(scores)
    assert ascending == sorted(ascending)
    header.click()
    assert page.eval(scores) == sorted(ascending, reverse=True)
    total = page.count("#frontier tbody tr")
    page.page.fill("input[data-filter=frontier]", "fp8")
    visible = page.eval(
        "Array.from(document.querySelectorAll('#frontier tbody tr'))"
        ".filter(r => getComputedStyle(r).display !== 'none').map(r => r.textContent)"
    )
    assert 0 < len(visible) < total and all("fp8" in row for row in visible)
    page.page.screenshot(path=str(ARTIFACTS / "bundled-overview-filtered.png"))
    assert page.errors == []


def test_a_hostile_experiment_runs_nothing_and_reads_as_text(
    repo: Path, tmp_path: Path, open_page: Callable[..., Opened]
) -> None:
    store, made = hostile_store(repo)
    site = tmp_path / "site"
    build_report(store, site, now=NOW)
    pages: list[tuple[Path, str, str]] = [(site / "index.html", "hostile-overview", "")]
    pages += [(p, "hostile-operator", "") for p in (site / "op").glob("*.html")]
    pages += [
        (site / experiment_path(exp.id), f"hostile-experiment-{n}", exp.id)
        for n, exp in enumerate(made)
    ]
    shown = HOSTILE
    for raw, escaped in (
        ("\u202e", "\\u202e"),
        ("\u202c", "\\u202c"),
        ("\u2066", "\\u2066"),
        ("\u2069", "\\u2069"),
        ("\x1b", "\\x1b"),
        ("\x07", "\\x07"),
    ):
        shown = shown.replace(raw, escaped)
    for path, shot, fragment in pages:
        page = open_page(path, shot, fragment)
        for link in page.page.locator("a").all()[:40]:
            link.hover()  # tooltips and hover styles run nothing either
        assert page.errors == [], (shot, page.errors)
        assert page.dialogs == [], shot
        assert page.eval("typeof window.pwned") == "undefined", shot
        _only_local(page.requests, site)
        assert (
            page.eval(
                "Array.from(document.querySelectorAll('*')).flatMap(e => "
                "Array.from(e.attributes).map(a => a.name)).filter(n => n.startsWith('on'))"
            )
            == []
        ), shot
        assert page.count("a[href^='javascript'], img, iframe, object, embed, form") == 0
        assert page.count("script") == (0 if "experiment" in shot else 1)
    page = open_page(site / experiment_path(made[0].id), "hostile-experiment-text", made[0].id)
    texts = page.eval(
        "Array.from(document.querySelectorAll('section:target td, "
        "section:target pre')).map(e => e.textContent)"
    )
    assert sum(shown in t for t in texts) >= 8  # fields, sections, results: as text
    assert page.eval("document.querySelector('section:target h1').textContent") == " ".join(
        ("X" + shown[:70]).split()
    )
    # bidirectional controls are shown, not obeyed: the text reads left to right
    assert "\u202e" not in page.eval("document.body.innerText")


@pytest.mark.slow  # scale: pytest -m slow (.ci/run)
def test_a_larger_store_draws_every_experiment(
    repo: Path, tmp_path: Path, open_page: Callable[..., Opened]
) -> None:
    store = Store(repo)
    made: list[KernelExperiment] = []
    for number in range(120):
        parent = made[(number * 7) % len(made)].id if made and number % 5 else ""
        made.append(
            store.create_experiment(
                **experiment_fields(
                    score=0.85 + (number * 37 % 60) / 100,
                    pid=parent,
                    dtype_sig=("bf16", "fp16", "fp8")[number % 3],
                    is_buggy=number % 11 == 0,
                    error_message="crash" if number % 11 == 0 else "",
                    status="new" if number % 13 == 0 else "done",
                    change_summary=f"Attempt {number} - {number % 7}%",
                    code_change=f"+line {number}",
                    results=[
                        {
                            "config": f"t{size}",
                            "baseline": 10.0,
                            "candidate": 9.0 + number % 3,
                            "speedup": round(10.0 / (9.0 + number % 3), 4),
                        }
                        for size in (256, 1024, 4096)
                    ]
                    if number % 4 == 0
                    else [],
                )
            )
        )
    site = tmp_path / "site"
    build_report(store, site, now=NOW)
    page = open_page(site / "op" / f"{operator_slug(made[0].operator_sig)}.html", "larger-operator")
    assert page.errors == []
    assert page.count("svg.score-chart .pt") == 120
    assert page.eval(f"({_DRAWN})('svg.score-chart .pt')") == 120
    assert page.count("svg.lineage .nd") == 120
    assert page.eval(f"({_DRAWN})('svg.lineage .nd')") == 120
    assert page.count("svg.heatmap rect.hm") == 30 * 3
    assert page.count("svg.score-chart path.pt.o-buggy") == sum(
        1 for n in range(120) if n % 11 == 0 and n % 13 != 0
    )
    overview = open_page(site / "index.html", "larger-overview")
    assert overview.errors == []


def test_a_link_to_an_experiment_shows_that_experiment_only(
    store: Store, tmp_path: Path, open_page: Callable[..., Opened]
) -> None:
    made = [
        store.create_experiment(
            **experiment_fields(
                score=1.0 + n / 100,
                id=f"6749f3a{n}c2d41abc",
                pid=f"6749f3a{n - 1}c2d41abc" if n else "",
                change_summary=f"Attempt {n} - +{n}%",
            )
        )
        for n in range(3)
    ]
    site = tmp_path / "site"
    build_report(store, site, now=NOW)
    visible = (
        "Array.from(document.querySelectorAll('section.exp')).filter("
        "s => getComputedStyle(s).display !== 'none').map(s => s.id)"
    )
    page = open_page(site / "e" / "abc.html", "shared-page-one", made[1].id)
    assert page.errors == [] and page.eval(visible) == [made[1].id]
    page.page.click(f"section[id='{made[1].id}'] a[href$='#{made[2].id}']")  # its child
    assert page.eval(visible) == [made[2].id]
    page.page.screenshot(path=str(ARTIFACTS / "shared-page-child.png"))
    everything = open_page(site / "e" / "abc.html", "shared-page-all")
    assert everything.eval(visible) == [e.id for e in made]


#: The overview's table of operators, as a reader sees it: per row, the operator's name
#: and how many lines it takes, and the text of each column by its header.
_OPERATOR_ROWS = """() => {
  const table = document.getElementById('operators');
  const headers = Array.from(table.tHead.rows[0].cells).map(c => c.textContent.trim());
  return Array.from(table.tBodies[0].rows).map(row => {
    const link = row.cells[0].querySelector('a');
    const cells = {};
    headers.forEach((h, i) => { cells[h] = row.cells[i]; });
    const mix = cells['experiments'].querySelector('.mix');
    return {
      name: link.title || link.textContent,
      lines: link.getClientRects().length,
      experiments: cells['experiments'].firstChild.textContent.trim(),
      best: cells['best cumulative'] ? cells['best cumulative'].textContent.trim() : '',
      said: mix ? mix.innerText.trim() : '',
      tooltip: mix && mix.querySelector('svg title') ?
        mix.querySelector('svg title').textContent : '',
      segments: mix ? Array.from(mix.querySelectorAll('rect.seg')).map(r =>
        r.getAttribute('class').split(' ').find(c => c.startsWith('o-')).slice(2)) : [],
    };
  });
}"""
#: The lines each row's operator and env take in a table of cells (by its id).
_CELL_LINES = """(id) => {
  const table = document.getElementById(id);
  if (!table) return [];
  const lines = (cell) => {
    const range = document.createRange();
    range.selectNodeContents(cell);
    const tops = new Set(Array.from(range.getClientRects()).map(r => Math.round(r.top)));
    return tops.size;
  };
  return Array.from(table.tBodies[0].rows).map(row => ({
    operator: lines(row.cells[0]), env: lines(row.cells[2]),
  }));
}"""
#: What the report counts, in its order: the outcomes, then the A/A controls.
_COUNTED = (
    "improvement",
    "marginal",
    "regression",
    "interference",
    "buggy",
    "failed",
    "pending",
    "control",
)
_LONG_OPERATOR = "csrc/attention/paged_attention_v2_kernels.cu: paged_attention_v2_reduce_kernel"


def _every_outcome(store: Store) -> None:
    """Three operators, one with an experiment of every outcome and an A/A control."""

    def make(**fields: Any) -> KernelExperiment:
        return store.create_experiment(**experiment_fields(**fields))

    first = "csrc/kernels/cache_kernels.cu: reshape_and_cache_flash"
    a = make(operator_sig=first, score=1.1, change_summary="Base - +10%")
    b = make(operator_sig=first, score=1.2, change_summary="Other - +20%")
    # both combined, 1.1 * 1.05 = 1.155 below 1.2: interference
    make(operator_sig=first, score=1.05, pid=a.id, combines=[a.id, b.id], change_summary="Both")
    make(operator_sig=first, score=1.0, pid=b.id, change_summary="Same - 0%")
    make(operator_sig=first, score=0.9, pid=b.id, change_summary="Slower - -10%")
    make(
        operator_sig=first,
        score=0.0,
        is_buggy=True,
        error_message="crash",
        change_summary="Wrong - x",
    )
    make(operator_sig=first, score=0.0, status="timeout", change_summary="Hung - x")
    make(operator_sig=first, score=0.0, status="new", change_summary="Queued - x")
    make(operator_sig=first, score=1.003, tags=["control"], change_summary="A/A - control")
    for number in range(3):
        make(
            operator_sig=_LONG_OPERATOR,
            score=1.0 + number / 20,
            dtype_sig="fp8",
            change_summary=f"Long {number} - x",
        )
    make(operator_sig="t.py: gamma", score=0.95, change_summary="Gamma - -5%")


@pytest.mark.parametrize("width", [1200, 800])
def test_the_operators_table_reads_at_a_laptops_width(
    store: Store, tmp_path: Path, open_page: Callable[..., Opened], width: int
) -> None:
    """Each operator's name on one or two lines, no table wider than the window, and its
    outcomes as one bar whose tooltip and text give the counts the files hold."""
    _every_outcome(store)
    site = tmp_path / "site"
    build_report(store, site, now=NOW)
    facts = truth(store.root)
    page = open_page(site / "index.html", f"operators-{width}")
    page.page.set_viewport_size({"width": width, "height": 900})
    page.page.locator("#operators").screenshot(path=str(ARTIFACTS / f"operators-{width}.png"))
    rows = page.eval(_OPERATOR_ROWS)
    assert [row["name"] for row in rows] == sorted({f["operator_sig"] for f in facts.values()})
    for row in rows:
        assert 1 <= row["lines"] <= 2, row
    # No table widens the page (the frontier's cells did at 800 px, wrapping letter by
    # letter): in the frontier and the cells never improved an operator and an env take
    # three lines at most, and at 1200 px the frontier fits beside the page's margins.
    assert page.eval("document.documentElement.scrollWidth") <= width
    for table in ("frontier", "never"):
        for lines in page.page.evaluate(_CELL_LINES, table):
            assert lines["operator"] <= 3 and lines["env"] <= 3, (table, lines)
    frontier = "document.getElementById('frontier')"
    if width >= 1200:
        assert page.eval(f"{frontier}.scrollWidth <= {frontier}.parentElement.clientWidth")
    assert page.eval("document.getElementById('operators').getBoundingClientRect().right") <= width
    for row in rows:
        mine = [f for f in facts.values() if f["operator_sig"] == row["name"]]
        counted = ["control" if "control" in (f.get("tags") or []) else f["outcome"] for f in mine]
        expected = [(o, counted.count(o)) for o in _COUNTED if counted.count(o)]
        assert row["experiments"] == str(len(mine))
        said = ", ".join(f"{o} {n}" for o, n in expected)
        assert row["said"] == said and row["tooltip"] == said  # the counts as text
        assert row["segments"] == [o for o, _ in expected]  # one segment per outcome there
        improved = [  # the best tip is a step that improved (gamma's regression is none)
            f["cumulative"]
            for f in mine
            if scored(f) and f["cumulative"] is not None and f["outcome"] == "improvement"
        ]
        assert row["best"] == (f"{max(improved):.4f}" if improved else "—")
    legend = page.eval("document.querySelector('.legend.mix').textContent")
    assert all(outcome in legend for outcome in _COUNTED)
    page.page.locator("#operators thead th", has_text="experiments").click()
    assert [row["experiments"] for row in page.eval(_OPERATOR_ROWS)] == ["1", "3", "9"]
    # narrower than the table: it scrolls in its own box, the page around it does not
    page.page.set_viewport_size({"width": 480, "height": 900})
    page.page.screenshot(path=str(ARTIFACTS / f"operators-{width}-then-480.png"))
    assert (
        page.eval(
            "document.getElementById('operators').parentElement.getBoundingClientRect().right"
        )
        <= 480
    )
    assert page.errors == []


#: The score chart's legend keys and markers, by outcome: (a key's colour, its label),
#: and the colour each outcome's markers are drawn in (their fill, else their stroke).
_SCORE_LEGEND = """() => {
  const heading = Array.from(document.querySelectorAll('h2'))
    .find(h => h.textContent === 'Score over iterations');
  const outcome = element => Array.from(element.classList)
    .find(c => c.startsWith('o-')).slice(2);
  const keys = {};
  for (const key of heading.nextElementSibling.querySelectorAll('.key')) {
    if (!Array.from(key.classList).some(c => c.startsWith('o-'))) continue;
    const style = getComputedStyle(key);
    const clear = style.backgroundColor === 'rgba(0, 0, 0, 0)';
    keys[outcome(key)] = [clear ? style.borderTopColor : style.backgroundColor,
                          key.nextSibling.textContent.trim()];
  }
  const drawn = {};
  for (const marker of document.querySelectorAll('svg.score-chart .pt')) {
    const style = getComputedStyle(marker);
    drawn[outcome(marker)] = style.fill === 'none' ? style.stroke : style.fill;
  }
  return {keys, drawn};
}"""


def test_the_score_chart_s_legend_has_a_key_of_each_outcome_it_draws(
    store: Store, tmp_path: Path, open_page: Callable[..., Opened]
) -> None:
    """An operator's score chart draws an experiment of every outcome and an A/A
    control: its legend keys each outcome drawn in the colour its markers have. The
    control had no key (drawn as a marginal result's dot, grey as the legend's key
    would be nowhere)."""
    _every_outcome(store)
    site = tmp_path / "site"
    build_report(store, site, now=NOW)
    operator = "csrc/kernels/cache_kernels.cu: reshape_and_cache_flash"
    page = open_page(site / "op" / f"{operator_slug(operator)}.html", "score-legend")
    assert page.errors == []
    found = page.eval(_SCORE_LEGEND)
    keys, drawn = found["keys"], found["drawn"]
    assert sorted(drawn) == sorted(_COUNTED), drawn  # (every outcome is on the chart)
    for outcome, colour in drawn.items():
        assert outcome in keys, (outcome, keys)
        assert keys[outcome][0] == colour, (outcome, keys[outcome], colour)
    assert keys["control"][1].startswith("control"), keys["control"]
    assert drawn["control"] != drawn["marginal"], drawn  # told apart on the chart


#: The score chart's lines (lineage paths and best so far) with their tooltips, the
#: legend's keys of them and the lineage's best paths, each with the colour it is drawn
#: in (a key's: its line's stroke, or its background).
_SERIES = """() => {
  const colour = element => getComputedStyle(element).stroke;
  const lines = Array.from(document.querySelectorAll('svg.score-chart polyline.best'))
    .map(line => [line.querySelector('title')?.textContent ?? '', colour(line)]);
  const sofar = Array.from(document.querySelectorAll('svg.score-chart path.sofar'))
    .map(line => [line.querySelector('title')?.textContent ?? '', colour(line)]);
  const key = span => span.querySelector('svg path') ? colour(span.querySelector('svg path'))
    : getComputedStyle(span.querySelector('.key')).backgroundColor;
  const keys = Array.from(document.querySelectorAll('.legend.series > span')).map(span =>
    [span.textContent.trim(), key(span)]);
  const tips = Array.from(document.querySelectorAll('svg.score-chart .pt title'))
    .map(title => title.textContent);
  const lessons = Array.from(document.querySelectorAll('ul.lessons > li'))
    .map(item => item.textContent);
  const edges = Array.from(document.querySelectorAll('svg.lineage path.edge.bp')).map(colour);
  return {lines, sofar, keys, tips, lessons, edges};
}"""


def test_the_score_chart_tells_each_env_s_lineage_apart(
    store: Store, tmp_path: Path, open_page: Callable[..., Opened]
) -> None:
    """One operator tuned on two GPUs: each env's lineage path to its best is drawn in a
    colour of its own, which a legend names with its dtype and env; each marker's
    tooltip and each lesson names its env; the lineage trees draw each path in its
    colour. Both were drawn in the same green, with no legend per env, the tooltip
    naming the dtype alone and the lessons neither."""
    operator = "csrc/gemm.cu: sgemm_tiled"
    for env in ("H100, CUDA 12.4", "MI300X, ROCm 6.2"):
        parent = ""
        for score in (1.2, 1.1, 1.3, 0.9):
            exp = store.create_experiment(
                **experiment_fields(
                    operator_sig=operator, dtype_sig="fp16", env=env, score=score, pid=parent
                )
            )
            parent = exp.id
    site = tmp_path / "site"
    build_report(store, site, now=NOW)
    page = open_page(site / "op" / f"{operator_slug(operator)}.html", "score-series")
    assert page.errors == []
    found = page.eval(_SERIES)
    lines = dict(found["lines"])
    assert sorted(lines) == [
        "lineage path to the best tip: fp16 · H100, CUDA 12.4",
        "lineage path to the best tip: fp16 · MI300X, ROCm 6.2",
    ], found
    assert len(set(lines.values())) == 2, lines  # two colours
    assert sorted(found["edges"]) == sorted(lines.values()), found  # the lineage's too
    keys = dict(found["keys"])
    for label, colour in lines.items():
        assert keys[label.split(": ", 1)[1]] == colour, (keys, lines)
    assert len(found["tips"]) == 8
    assert sum("H100, CUDA 12.4" in tip for tip in found["tips"]) == 4, found["tips"]
    assert sum("MI300X, ROCm 6.2" in tip for tip in found["tips"]) == 4, found["tips"]
    assert len(found["lessons"]) == 2, found["lessons"]  # a regression on each GPU
    assert sum("(fp16 · H100, CUDA 12.4)" in item for item in found["lessons"]) == 1
    assert sum("(fp16 · MI300X, ROCm 6.2)" in item for item in found["lessons"]) == 1


def test_each_of_many_dtype_env_cells_has_a_colour_of_its_own(
    store: Store, tmp_path: Path, open_page: Callable[..., Opened]
) -> None:
    """Trial K02: one kernel tuned on ten GPUs. The legend names ten dtype × env cells,
    each in a colour no other cell has (the classes s0..s7 repeated: GPU1 and GPU9 shared
    one), and each cell's lines on the chart and path in the lineage are drawn in the
    colour its key has."""
    operator = "csrc/act.cu: gelu_tanh_and_mul_kernel"
    envs = [f"GPU{n}" for n in range(1, 11)]
    for env in envs:
        root = store.create_experiment(
            **experiment_fields(operator_sig=operator, env=env, score=1.05,
                                measured_against="reference")
        )  # fmt: skip
        store.create_experiment(
            **experiment_fields(operator_sig=operator, env=env, score=1.1, pid=root.id,
                                measured_against="parent")
        )  # fmt: skip
    site = tmp_path / "site"
    build_report(store, site, now=NOW)
    page = open_page(site / "op" / f"{operator_slug(operator)}.html", "score-many-series")
    assert page.errors == []
    found = page.eval(_SERIES)
    keys = dict(found["keys"])
    assert sorted(keys) == sorted(f"bf16 · {env}" for env in envs), found["keys"]
    assert len(set(keys.values())) == len(envs), found["keys"]  # ten colours
    for kind, title in (("lines", "lineage path to the best tip: "), ("sofar", "best so far: ")):
        drawn = dict(found[kind])
        assert sorted(drawn) == sorted(title + label for label in keys), found[kind]
        for label, colour in keys.items():
            assert drawn[title + label] == colour, (kind, label, drawn, keys)
    assert sorted(found["edges"]) == sorted(keys.values()), found
    # Trial M06: told apart at a glance, from each other and from the fixed keys (GPU3
    # #b8336a and GPU8 #c2185b were Delta E 11.9 apart; GPU1 the lineage path's green).
    fixed = page.eval(_FIXED_KEYS)
    assert len(fixed) >= 8, fixed
    for one, other in itertools.combinations(keys.items(), 2):
        assert _delta_e(one[1], other[1]) >= CLEARLY_APART, (one, other)
    for label, colour in keys.items():
        for key, drawn in fixed:
            assert _delta_e(colour, drawn) >= CLEARLY_APART, (label, colour, key, drawn)


#: The least CIE76 Delta E at which two thin lines' colours are told apart at a glance
#: (about 10: hard to tell apart).
CLEARLY_APART = 20.0

#: The score chart's fixed legend keys (not the series'), each with its colour: its
#: background, else its border's.
_FIXED_KEYS = """() => Array.from(document.querySelectorAll('.legend:not(.series) .key'))
  .map(key => {
    const style = getComputedStyle(key);
    const fill = style.backgroundColor;
    const see = fill === 'rgba(0, 0, 0, 0)' || fill === 'transparent' ? style.borderTopColor : fill;
    return [key.parentElement.textContent.trim() || key.className, see];
  })"""


def _delta_e(one: str, other: str) -> float:
    """The CIE76 distance of two CSS ``rgb(r, g, b)`` colours, as the page computes them."""

    def lab(css: str) -> tuple[float, float, float]:
        rgb = [int(part) / 255 for part in re.findall(r"\d+", css)[:3]]
        r, g, b = (((c + 0.055) / 1.055) ** 2.4 if c > 0.04045 else c / 12.92 for c in rgb)
        xyz = (
            (0.4124 * r + 0.3576 * g + 0.1805 * b) / 0.95047,
            0.2126 * r + 0.7152 * g + 0.0722 * b,
            (0.0193 * r + 0.1192 * g + 0.9505 * b) / 1.08883,
        )
        x, y, z = (t ** (1 / 3) if t > 0.008856 else 7.787 * t + 16 / 116 for t in xyz)
        return 116 * y - 16, 500 * (x - y), 200 * (y - z)

    return math.dist(lab(one), lab(other))


_MARKED = """() => ({
  lead: document.querySelector('p.lead').textContent,
  footer: document.querySelector('footer') ? document.querySelector('footer').textContent : '',
  marked: Array.from(document.querySelectorAll('a.id')).map(link => {
    const next = link.nextElementSibling;
    return [link.textContent, next && next.matches('span.ref') ? next.textContent : ''];
  }),
})"""


def test_a_report_across_refs_says_what_it_read_and_marks_side_branch_work(
    repo: Path, tmp_path: Path, open_page: Callable[..., Opened]
) -> None:
    """A lead reports the working tree with every branch, and one revision: each report
    says what it read, and an experiment only a side branch holds is marked with that
    branch wherever its id is shown, as ``kexp top --all-refs`` labels it. Both read
    "N experiments (all experiments)" whatever was read, branch work unmarked."""

    def add(summary: str, score: str, *more: str) -> str:
        printed = run_kexp("add", "--summary", summary, "--score", score, "--json",
                           "--operator", "csrc/gemm.cu: sgemm", "--dtype", "fp16",
                           "--env", "H100", "--description", "x", *more, cwd=repo)  # fmt: skip
        return str(json.loads(printed.stdout)["id"])

    tiling = add("Tiling - +30%", "1.30")
    git(repo, "add", "-A")
    git(repo, "commit", "-qm", "tiling")
    git(repo, "switch", "-q", "-c", "feat/splitk")
    split = add("Split-K - +25%", "1.25", "--pid", tiling)
    git(repo, "add", "-A")
    git(repo, "commit", "-qm", "split-k")
    git(repo, "switch", "-q", "main")
    head = git(repo, "rev-parse", "feat/splitk")

    run_kexp("report", "--all-refs", "-o", str(tmp_path / "refs"), cwd=repo)
    index = open_page(tmp_path / "refs" / "index.html", "refs-index").eval(_MARKED)
    assert "read from the working tree (branch main) and 1 other ref: feat/splitk." in index["lead"]
    assert "1 of them as only another ref holds it" in index["lead"], index["lead"]
    assert [split[:10], "on feat/splitk"] in index["marked"], index  # the frontier's best
    operator = tmp_path / "refs" / "op" / f"{operator_slug('csrc/gemm.cu: sgemm')}.html"
    page = open_page(operator, "refs-operator").eval(_MARKED)
    assert "read from the working tree (branch main) and 1 other ref" in page["lead"], page
    assert [split[:10], "on feat/splitk"] in page["marked"], page
    assert [tiling[:10], ""] in page["marked"], page  # merged work: no mark
    opened = open_page(tmp_path / "refs" / experiment_path(split), "refs-experiment", split)
    rows = opened.eval(
        f"""() => Array.from(document.querySelectorAll('section[id="{split}"] tr'))
        .map(row => row.textContent)"""
    )
    assert "whereon feat/splitk" in rows, rows

    run_kexp("report", "--rev", "feat/splitk", "-o", str(tmp_path / "rev"), cwd=repo)
    index = open_page(tmp_path / "rev" / "index.html", "rev-index").eval(_MARKED)
    assert f"read from revision feat/splitk ({head[:12]})." in index["lead"], index
    assert all(mark == "" for _, mark in index["marked"]), index

    run_kexp("report", "-o", str(tmp_path / "tree"), cwd=repo)
    index = open_page(tmp_path / "tree" / "index.html", "tree-index").eval(_MARKED)
    assert "read from the working tree." in index["lead"], index


def test_a_lesson_measured_against_the_reference_says_how_it_did_over_its_parent(
    repo: Path, tmp_path: Path, open_page: Callable[..., Opened]
) -> None:
    """A step measured against the reference (1.03) that is below its parent (1.30): the
    operator page's lesson says what ``kexp lessons`` says, its speedup over the parent
    (0.7923, -20.8%), not a bare 1.0300 under "regression"."""

    def add(summary: str, score: str, *more: str) -> str:
        printed = run_kexp("add", "--summary", summary, "--score", score, "--json",
                           "--operator", "csrc/gemm.cu: sgemm", "--dtype", "fp16",
                           "--env", "H100", "--description", "**Key insight**: registers",
                           *more, cwd=repo)  # fmt: skip
        return str(json.loads(printed.stdout)["id"])

    tiling = add("Tiling - +30%", "1.30")
    add("Unroll 8 - 3% over reference", "1.03", "--pid", tiling, "--measured-against", "reference")
    said = run_kexp("lessons", cwd=repo).stdout
    assert f"Over parent {tiling[:10]}: 0.7923 (-20.8%)" in said, said
    run_kexp("report", "-o", str(tmp_path / "site"), cwd=repo)
    operator = tmp_path / "site" / "op" / f"{operator_slug('csrc/gemm.cu: sgemm')}.html"
    lessons = open_page(operator, "lesson-over-parent").eval(
        "() => Array.from(document.querySelectorAll('ul.lessons li')).map(li => li.innerText)"
    )
    assert len(lessons) == 1, lessons
    assert f"Over parent {tiling[:10]}: 0.7923 (-20.8%); 1.0300 is over the reference" in (
        " ".join(lessons[0].split())
    ), lessons


def test_an_experiment_page_names_every_ref_holding_it(
    repo: Path, tmp_path: Path, open_page: Callable[..., Opened]
) -> None:
    """An experiment another branch copied (agent b built on agent a's branch): its page
    in a report across refs names both branches, as ``kexp show --all-refs`` does, not
    one of them "+1" (which hides the other, its author's maybe)."""
    git(repo, "switch", "-q", "-c", "kexp/agent-a")
    printed = run_kexp("add", "--summary", "WMMA - +40%", "--score", "1.40", "--json",
                       "--operator", "csrc/gemm.cu: sgemm", "--dtype", "fp16",
                       "--env", "H100", "--description", "x", cwd=repo)  # fmt: skip
    wmma = str(json.loads(printed.stdout)["id"])
    git(repo, "add", "-A")
    git(repo, "commit", "-qm", "wmma")
    git(repo, "switch", "-q", "-c", "kexp/agent-b")
    git(repo, "commit", "-q", "--allow-empty", "-m", "agent b's work")
    git(repo, "switch", "-q", "main")
    (repo / "experiments").mkdir(exist_ok=True)  # main holds none: git removed the folder
    shown = run_kexp("show", wmma[:10], "--all-refs", cwd=repo).stdout
    assert "kexp/agent-a, kexp/agent-b" in shown, shown

    run_kexp("report", "--all-refs", "-o", str(tmp_path / "refs"), cwd=repo)
    opened = open_page(tmp_path / "refs" / experiment_path(wmma), "refs-every-ref", wmma)
    rows = opened.eval(
        f"""() => Array.from(document.querySelectorAll('section[id="{wmma}"] tr'))
        .map(row => row.textContent)"""
    )
    assert "whereon kexp/agent-a, kexp/agent-b" in rows, rows
