"""How fast the pages of a kexp report open: first contentful paint in headless Chromium.

Usage (after ``kexp report -o DIR``; needs Playwright and Chromium, as the browser tests)::

    python bench/report_paint.py DIR [--repeat 5] [--chromium /usr/bin/chromium]

Opens, from disk, the overview, the largest operator page and the largest experiment
page (at its first experiment) ``--repeat`` times each, every time in a new page of one browser
(a page cache warm, as a person clicking through), and prints per page its size, the
median first contentful paint (``performance`` paint timing) and the median time until
the ``load`` event, with the number of chart markers drawn one element each and of the
page's elements. Exit status 1 if
a page logged an error.
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import sys
import tempfile
from pathlib import Path

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
FIRST_CONTENTFUL_PAINT = """() => new Promise(resolve => {
  const found = performance.getEntriesByName('first-contentful-paint');
  if (found.length) { resolve(found[0].startTime); return; }
  new PerformanceObserver(list => {
    for (const entry of list.getEntries()) {
      if (entry.name === 'first-contentful-paint') resolve(entry.startTime);
    }
  }).observe({type: 'paint', buffered: true});
})"""
LOAD_TIME = "() => performance.getEntriesByType('navigation')[0].loadEventEnd"
#: Chart markers drawn one element each (a large operator's are paths of many: not counted).
MARKERS = "() => document.querySelectorAll('.pt, .nd, rect.hm').length"
#: Every element of the page: what the browser lays out.
ELEMENTS = "() => document.getElementsByTagName('*').length"


def pages_of(report: Path) -> list[tuple[str, Path, str]]:
    """The overview, the largest operator page, the largest experiment page (at its
    first experiment): (name, file, fragment)."""
    import re

    operators = sorted((report / "op").glob("*.html"), key=lambda p: p.stat().st_size)
    experiments = max((report / "e").glob("*.html"), key=lambda p: p.stat().st_size)
    first = re.search(r'<section class="exp" id="([0-9a-f]{16})">', experiments.read_text())
    return [
        ("overview", report / "index.html", ""),
        ("largest operator page", operators[-1], ""),
        (
            "largest experiment page, at one experiment",
            experiments,
            first.group(1) if first else "",
        ),
    ]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("report", type=Path, help="a folder written by kexp report")
    parser.add_argument("--repeat", type=int, default=5, help="loads per page (median)")
    parser.add_argument("--chromium", default=shutil.which("chromium") or "/usr/bin/chromium")
    args = parser.parse_args(argv)
    from playwright.sync_api import sync_playwright

    status = 0
    profile = tempfile.mkdtemp(prefix="kexp-paint-")
    print(
        "| page | size MB | first contentful paint ms (median) | load ms (median) | markers "
        "| elements |"
    )
    print("|---|---:|---:|---:|---:|---:|")
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch_persistent_context(
            profile,
            executable_path=args.chromium,
            headless=True,
            args=CHROMIUM_ARGS,
            viewport={"width": 1280, "height": 900},
        )
        for name, path, fragment in pages_of(args.report):
            paints, loads, markers, elements = [], [], 0, 0
            for _ in range(args.repeat):
                page = browser.new_page()
                errors: list[str] = []
                page.on(
                    "console", lambda m, e=errors: e.append(m.text) if m.type == "error" else None
                )
                page.on("pageerror", lambda x, e=errors: e.append(str(x)))
                page.goto(path.as_uri() + (f"#{fragment}" if fragment else ""), timeout=120_000)
                paints.append(float(page.evaluate(FIRST_CONTENTFUL_PAINT)))
                loads.append(float(page.evaluate(LOAD_TIME)))
                markers = int(page.evaluate(MARKERS))
                elements = int(page.evaluate(ELEMENTS))
                if errors:
                    print(f"{name}: {errors[:3]}", file=sys.stderr)
                    status = 1
                page.close()
            print(
                f"| {name} | {path.stat().st_size / 1e6:.2f} | {statistics.median(paints):.0f} | "
                f"{statistics.median(loads):.0f} | {markers:,} | {elements:,} |"
            )
        browser.close()
    shutil.rmtree(profile, ignore_errors=True)
    return status


if __name__ == "__main__":
    sys.exit(main())
