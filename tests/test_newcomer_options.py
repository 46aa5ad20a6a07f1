"""What a newcomer's trial of kexp add, validate and the views tripped on: the option
a missing field is given with, a root recorded without its campaign, the field names
taken as options, the legends. Each a test that failed before its fix."""

from __future__ import annotations

import json
import re
from itertools import pairwise
from pathlib import Path

import pytest
from click.testing import CliRunner, Result
from conftest import REPO_ROOT, git
from test_newcomer import bundled_copy
from test_skill import run_python

from kexp import Store
from kexp.cli.main import main
from kexp.core.errors import EnvWarning
from kexp.measure.intake import record

BASE = '{"b8": [10.0, 10.1, 10.2, 9.9, 10.0]}\n'
CAND = '{"b8": [9.0, 9.1, 9.2, 8.9, 9.0]}\n'


def kexp(repo: Path, *args: str, input: str | None = None) -> Result:
    """``kexp`` in ``repo``, on a terminal 80 columns wide."""
    env = {"COLUMNS": "80"}
    return CliRunner().invoke(main, ["--root", str(repo), *args], input=input, env=env)


def timings(repo: Path) -> tuple[str, ...]:
    (repo / "base.json").write_text(BASE)
    (repo / "cand.json").write_text(CAND)
    return ("--baseline", str(repo / "base.json"), "--candidate", str(repo / "cand.json"))


def one_line(result: Result) -> str:
    """The one line of an error, checked to be one line starting ``kexp: error:``."""
    lines = result.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith("kexp: error: "), result.stderr
    return lines[0]


# --- a field left out names the option that gives it ---------------------------------------


def test_add_of_timings_alone_with_an_empty_stdin_names_the_summary_option(
    repo: Path, store: Store
) -> None:
    """An agent's or CI's stdin is no terminal but empty: it is not the document."""
    result = kexp(repo, "add", *timings(repo), input="")
    assert result.exit_code == 2, result.output
    said = one_line(result)
    assert "--summary TEXT" in said and "stdin" not in said, said
    more = kexp(repo, "add", *timings(repo), "--operator", "k.cu: k", input="")
    assert more.exit_code == 2 and "--summary TEXT" in one_line(more), more.stderr
    assert "experiments/" not in more.stderr  # no path of a file never written
    assert store.list_experiments() == []


def test_a_document_without_a_summary_names_the_field_and_the_option(repo: Path) -> None:
    result = kexp(repo, "add", input="score: 1.02\noperator_sig: 'k.cu: k'\n")
    assert result.exit_code == 2, result.output
    said = one_line(result)
    assert "change_summary" in said and "--summary TEXT" in said, said


def test_a_field_refused_at_add_is_hinted_with_its_option(repo: Path) -> None:
    result = kexp(repo, "add", "--summary", "x" * 90, "--score", "1.1")
    assert result.exit_code == 1, result.output
    lines = result.stderr.splitlines()
    (hint,) = [after for line, after in pairwise(lines) if "summary-too-long" in line]
    assert "(kexp add --summary)" in hint, result.stderr


def test_add_without_a_score_names_the_options_that_give_it(repo: Path) -> None:
    result = kexp(repo, "add", "--summary", "x - y", input="")
    assert result.exit_code == 2, result.output
    said = one_line(result)
    assert "--score X" in said and "--baseline FILE --candidate FILE" in said, said


# --- a root recorded without its campaign is warned of ------------------------------------


def test_a_root_without_operator_dtype_and_env_is_warned_of_at_add_and_in_validate(
    repo: Path, store: Store
) -> None:
    result = kexp(repo, "add", "--summary", "Try - +10%", *timings(repo), "--json")
    assert result.exit_code == 0, result.output
    exp_id = json.loads(result.stdout)["id"]
    (said,) = [line for line in result.stderr.splitlines() if "kexp: warning:" in line]
    assert "empty operator_sig, dtype_sig and env" in said, said
    assert "--operator, --dtype and --env" in said and f"kexp update {exp_id}" in said
    checked = kexp(repo, "validate")
    assert "warning[campaign-missing] operator_sig:" in checked.stdout, checked.output
    assert "--operator, --dtype and --env" in checked.stdout
    # A step takes its parent's; a root given them all is in its campaign: nothing said.
    step = kexp(repo, "add", "--summary", "Step - +1%", "--score", "1.01", "--pid", exp_id)
    assert step.exit_code == 0 and "empty" not in step.stderr, step.output
    given = ("--operator", "k.cu: k", "--dtype", "bf16", "--env", "H100")
    root = kexp(repo, "add", "--summary", "Other - +2%", "--score", "1.02", *given)
    assert root.exit_code == 0 and "warning" not in root.stderr, root.output
    assert kexp(repo, "validate").stdout.count("campaign-missing") == 1


def test_the_library_record_warns_of_a_root_without_its_dtype(repo: Path, store: Store) -> None:
    fields = {"change_summary": "Try - +2%", "score": 1.02, "operator_sig": "k.cu: k"}
    with pytest.warns(EnvWarning, match=r"has an empty dtype_sig and env: "):
        record(store, fields)


# --- the README says where the error line is ------------------------------------------------


def test_the_readme_says_the_error_line_comes_first_as_it_does(repo: Path, store: Store) -> None:
    given = ("--operator", "k.cu: k", "--dtype", "bf16", "--env", "X")
    added = kexp(repo, "add", "--summary", "x - +1%", "--score", "1.01", *given, "--json")
    exp_id = json.loads(added.stdout)["id"]
    (path,) = (repo / "experiments").rglob(f"{exp_id}-*.md")
    path.write_text(path.read_text().replace("operator_sig: 'k.cu: k'", "operator_sig: 'k.cu: k"))
    lines = kexp(repo, "show", exp_id).stderr.splitlines()
    assert lines[0].startswith("kexp: error: ") and lines[-1].startswith("  hint: "), lines
    readme = " ".join((REPO_ROOT / "README.md").read_text(encoding="utf-8").split())
    assert "Every error starts with one line `kexp: error: ...`" in readme


# --- the field names are options too ------------------------------------------------------


def test_add_takes_each_option_spelt_as_the_field_it_sets(repo: Path, store: Store) -> None:
    fields = {
        "--change-summary": "Unroll - crash",
        "--operator-sig": "k.cu: k",
        "--dtype-sig": "bf16",
        "--env": "H100",
        "--tags": "unroll",
        "--detailed-description": "**Approach**: unroll",
        "--error-message": "illegal memory access",
    }
    args = [item for pair in fields.items() for item in pair]
    result = kexp(repo, "add", *args, "--score", "0", "--status", "failed", "--buggy")
    assert result.exit_code == 0, result.output
    (exp,) = store.list_experiments()
    assert (exp.change_summary, exp.operator_sig, exp.dtype_sig) == tuple(args[1:6:2])
    assert exp.tags == ["unroll"] and exp.error_message == "illegal memory access"
    assert exp.detailed_description == "**Approach**: unroll"
    shown = kexp(repo, "add", "--help").stdout
    assert "--summary TEXT" in shown and "--change-summary" not in shown.split("Options:")[1]
    (repo / "err.txt").write_text("boom\n")
    both = kexp(repo, "add", "--error", "x", "--error-file", str(repo / "err.txt"))
    assert "give --error or --error-file, not both" in one_line(both), both.stderr


# --- the skill: shown, and its best is kexp top's --------------------------------------------


def test_skill_show_prints_the_skill(repo: Path) -> None:
    result = kexp(repo, "skill", "show")
    assert result.exit_code == 0, result.output
    skill = REPO_ROOT / "skill" / "kernel-exp-history" / "SKILL.md"
    assert result.stdout == skill.read_text(encoding="utf-8")


def test_the_skills_best_and_failures_are_kexp_tops_and_the_outcomes(tmp_path: Path) -> None:
    """The skill ranked only by the raw score (one step's speedup over its parent) and
    called a score below 0.98 a failure (the predecessor's examples, kept verbatim);
    its own example ranks as kexp top does, and finds failures by their outcome."""
    root = bundled_copy(tmp_path / "bundled")
    text = (REPO_ROOT / "skill" / "kernel-exp-history" / "SKILL.md").read_text(encoding="utf-8")
    blocks = re.findall(r"```python\n(.*?)```", text, re.DOTALL)
    (block,) = [b for b in blocks if "# kexp top --operator cache" in b]
    shown = run_python(block, root)
    assert shown.returncode == 0, shown.stderr
    lines = shown.stdout.splitlines()
    best = [line.split(" - ", 1)[1] for line in lines if not line.startswith("  ❌")]
    listed = kexp(root, "top", "--operator", "cache", "-n", "5", "--format", "json")
    top = json.loads(listed.stdout)
    assert best == [record["change_summary"] for record in top], (best, top)
    assert lines[0].startswith(f"  {top[0]['cumulative_score']:.4f}x improvement")
    failed = ("regression", "interference", "buggy", "failed")
    failures = [e for e in Store(root).list_experiments() if e.outcome in failed]
    assert sum(line.startswith("  ❌") for line in lines) == len(failures) > 0


# --- every mark and column a view prints is explained ------------------------------------


def fits(text: str) -> list[str]:
    lines = text.splitlines()
    assert all(len(line) <= 80 for line in lines), [ln for ln in lines if len(ln) > 80]
    return lines


def test_the_tree_legend_explains_best_and_control(tmp_path: Path) -> None:
    root = bundled_copy(tmp_path / "bundled")
    shown = fits(kexp(root, "tree").stdout)
    assert any("[best]" in line for line in shown[:-6])  # a mark the trees use
    assert any(line.startswith("[best]: the best tip") for line in shown), shown
    assert not any("[control]" in line for line in shown)  # none in the bundled store
    store = Store(root)
    store.create_experiment(
        change_summary="A/A same code - noise", score=1.0, operator_sig="k.cu: k",
        dtype_sig="bf16", env="H100", tags=["control"], base_commit="a" * 40,
    )  # fmt: skip
    shown = fits(kexp(root, "tree").stdout)
    assert any("[control]: an A/A run" in line for line in shown), shown


def test_top_across_refs_explains_its_ref_column(repo: Path) -> None:
    given = ("--operator", "k.cu: k", "--dtype", "bf16", "--env", "H100")
    assert kexp(repo, "add", "--summary", "x - +1%", "--score", "1.01", *given).exit_code == 0
    git(repo, "add", "-A")
    git(repo, "commit", "-qm", "recorded")
    shown = fits(kexp(repo, "top", "--all-refs").stdout)
    assert "REF" in shown[0] and "local" in shown[1], shown
    assert shown[-1].startswith("REF: local (the working tree") and "+N: " in shown[-1]
    assert "REF" not in kexp(repo, "top").stdout


def test_similar_explains_code_and_vs_parent_and_show_the_reference(tmp_path: Path) -> None:
    root = bundled_copy(tmp_path / "bundled")
    best = Store(root).top_experiments(1)[0]
    shown = fits(kexp(root, "similar", best.id[:10], "-n", "3").stdout)
    assert shown[-1].startswith("CODE: ") and "VS PARENT: " in shown[-1], shown
    planned = fits(kexp(root, "similar", "--text", "unroll", "-n", "3").stdout)
    assert planned[-1].startswith("VS PARENT: "), planned
    said = " ".join(kexp(root, "show", best.id[:10]).stdout.split())
    assert "the speedup over the reference, the operator's original code" in said


# --- one precision for a score, whatever the view ------------------------------------------


def test_top_list_and_show_print_a_score_and_its_interval_alike(repo: Path, store: Store) -> None:
    """top and list printed ``1.036 [1.035, 1.036]``, show ``1.0359 [1.0354, 1.0364]``:
    an interval narrower than 0.001 read as none, and one score as two numbers."""
    (repo / "base.json").write_text('{"b8": [10.0, 10.001, 10.002, 9.999, 10.0]}\n')
    (repo / "cand.json").write_text('{"b8": [9.65, 9.651, 9.652, 9.649, 9.65]}\n')
    given = ("--operator", "k.cu: k", "--dtype", "bf16", "--env", "H100")
    files = ("--baseline", str(repo / "base.json"), "--candidate", str(repo / "cand.json"))
    added = kexp(repo, "add", "--summary", "Tile - +3.6%", *files, *given, "--json")
    exp = store.get_experiment(json.loads(added.stdout)["id"])
    low, high = exp.score_ci
    assert high - low < 0.001
    said = f"{exp.score:.4f} [{low:.4f}, {high:.4f}]"
    for view in (["top"], ["list"], ["top", "--all-refs"], ["show", exp.id]):
        shown = fits(kexp(repo, *view).stdout)
        assert any(said in line for line in shown), (view, shown)
    assert f"{exp.cumulative_score:.4f}" in kexp(repo, "top").stdout


def test_the_mcp_record_tool_warns_of_a_root_without_env_in_the_tools_words(
    repo: Path,
) -> None:
    pytest.importorskip("mcp")
    from test_mcp import Agent, run_agent

    said: list[str] = []

    async def work(agent: Agent) -> None:
        fields = {"change_summary": "Try - +2%", "score": 1.02, "operator_sig": "k.cu: k"}
        failed, texts = await agent.call("record", dtype_sig="bf16", **fields)
        assert not failed, texts
        said.extend(texts[1:])

    git(repo, "add", "-A")
    git(repo, "commit", "-qm", "the store", "--allow-empty")
    run_agent(repo, work)
    (warning,) = said
    assert "has an empty env: " in warning, warning
    assert "the record tool's operator_sig, dtype_sig and env" in warning
    assert "--" not in warning  # no option of the command: the tools' words
