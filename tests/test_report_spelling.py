"""One name per operator, dtype and env in every place a read shows it (trial T, T01):
``k.py:f`` recorded twice on env A and ``k.py: f`` once on env B is one operator with
two campaigns. ``kexp report`` named the operator's page by the spelling most written
over all its experiments (``k.py:f``) but each cell by the one most written in that cell
(``k.py: f`` on B), then looked up the page of ``k.py: f``: an internal error (exit 3,
KeyError), no report. Now every name is chosen once, over everything a read shows
(:func:`kexp.core.spelling.campaign_names`), and each page, cell and row takes it."""

from __future__ import annotations

import json
import re
from pathlib import Path

from conftest import run_kexp
from test_spellings_case import add


def links(html: str) -> list[str]:
    """The operator pages a page links to."""
    return re.findall(r'href="(?:\.\./)?(op/[^"#]+\.html)"', html)


def test_report_of_an_operator_spelt_one_way_on_one_env_and_another_on_another(
    repo: Path,
) -> None:
    add(repo, "k.py:f", "a - +10%", 1.1, env="A")
    add(repo, "k.py:f", "b - +20%", 1.2, env="A")
    minority = add(repo, "k.py: f", "c - +20%", 1.2, env="B")
    done = run_kexp("report", "--output", str(repo / "site"), cwd=repo, process=True)
    assert done.returncode == 0, done.stderr
    site = repo / "site"
    pages = sorted(p.relative_to(site).as_posix() for p in (site / "op").glob("*.html"))
    assert len(pages) == 1, pages  # one operator, whatever its spelling
    index = (site / "index.html").read_text(encoding="utf-8")
    assert "in 2 operator × dtype × env cells" in re.sub(r"<[^>]+>", "", index), index
    # Each cell of the frontier links to that one page, named as the page is.
    assert set(links(index)) == set(pages), links(index)
    assert "k.py: f" not in index, "a cell named otherwise than its operator's page"
    operator_page = (site / pages[0]).read_text(encoding="utf-8")
    assert "<h1>k.py:f</h1>" in operator_page
    # The minority spelling's step links to its operator's page too.
    page = next(p for p in (site / "e").glob("*.html") if minority in p.read_text("utf-8"))
    html = page.read_text(encoding="utf-8")
    crumb = html[html.index(f'id="{minority}"') :].split("</p>", 1)[0]
    assert links(crumb) == pages, crumb


def test_stats_names_one_env_one_way_in_every_campaign(repo: Path) -> None:
    # The env spelt "ROCm-6.2" on one kernel's only step, "ROCm 6.2" twice on another's.
    add(repo, "x.py:f", "x - +10%", 1.1, env="MI300X ROCm-6.2")
    add(repo, "y.py:g", "y - +10%", 1.1, env="MI300X ROCm 6.2")
    add(repo, "y.py:g", "z - +20%", 1.2, env="MI300X ROCm 6.2")
    stats = json.loads(run_kexp("stats", "--json", cwd=repo).stdout)
    assert {best["env"] for best in stats["best"]} == {"MI300X ROCm 6.2"}, stats["best"]


def test_context_advises_writing_the_name_stats_shows(repo: Path) -> None:
    # bf16 in three spellings: "bfloat16" most written, as stats names the campaign.
    for dtype in ("BF16", "bf16", "bfloat16", "bfloat16"):
        done = run_kexp(
            "add", "--summary", f"{dtype} - +10%", "--score", "1.1", "--operator", "k.py:f",
            "--dtype", dtype, "--env", "H100", "--measured-against", "reference", cwd=repo,
        )  # fmt: skip
        assert done.returncode == 0, done.stderr
    stats = json.loads(run_kexp("stats", "--json", cwd=repo).stdout)
    (shown,) = {best["dtype_sig"] for best in stats["best"]}
    asked = ("context", "--operator", "k.py:f", "--dtype", "bf16", "--env", "H100", "--json")
    (note,) = json.loads(run_kexp(*asked, cwd=repo).stdout)["context"]["spelt_as_one"]
    assert note.startswith(f"dtype {shown!r} read as one with"), (shown, note)
    assert f"write VALUE {shown!r} on the 2 spelt otherwise" in note, note


def test_context_names_each_value_a_filter_matched_as_stats_does(repo: Path) -> None:
    for dtype in ("BF16", "bf16", "bfloat16", "bfloat16", "fp16"):
        done = run_kexp(
            "add", "--summary", f"{dtype} - +10%", "--score", "1.1", "--operator", "k.py:f",
            "--dtype", dtype, "--env", "H100", "--measured-against", "reference", cwd=repo,
        )  # fmt: skip
        assert done.returncode == 0, done.stderr
    stats = json.loads(run_kexp("stats", "--json", cwd=repo).stdout)
    shown = {best["dtype_sig"] for best in stats["best"]}
    asked = ("context", "--operator", "k.py:f", "--dtype", "16", "--json")
    (several,) = json.loads(run_kexp(*asked, cwd=repo).stdout)["context"]["several"]
    assert {m["value"] for m in several["matched"]} == shown == {"bfloat16", "fp16"}, several
