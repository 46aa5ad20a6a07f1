"""The kexp command, driven through click's runner (and a few real subprocesses);
results are checked through the Python API.
"""

from __future__ import annotations

import csv
import io
import json
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner, Result

from kexp import KernelExperiment, Store
from kexp.cli.main import main
from kexp.output.export import RECORD_FIELDS
from tests.conftest import REPO_ROOT, experiment_fields, git, run_kexp

ANSI = re.compile(r"\x1b\[")


def kexp(repo: Path, *args: str, input: str | None = None, **env: str) -> Result:
    """Run ``kexp --root REPO ARGS`` in-process; stdout and stderr kept apart."""
    return CliRunner().invoke(main, ["--root", str(repo), *args], input=input, env=env or None)


def error_line(result: Result) -> str:
    """The one ``kexp: error:`` line of a failed command (exactly one is required)."""
    lines = [line for line in result.stderr.splitlines() if line.startswith("kexp: error:")]
    assert len(lines) == 1, result.stderr
    return lines[0]


# --- help, version, README ---------------------------------------------------------


def readme_command_section() -> str:
    text = (REPO_ROOT / "README.md").read_text(encoding="utf-8")
    start = text.index("## The kexp command")
    end = text.find("\n## ", start + 1)
    return text[start : end if end != -1 else len(text)]


@pytest.mark.parametrize("name", sorted(main.commands))
def test_every_command_has_help_with_an_example_and_a_readme_entry(name: str) -> None:
    result = CliRunner().invoke(main, [name, "--help"])
    assert result.exit_code == 0, result.output
    command = main.commands[name]
    assert command.help and command.short_help != ""
    assert "Example" in result.output
    assert f"`kexp {name}" in readme_command_section()


def test_version_and_group_help() -> None:
    result = CliRunner().invoke(main, ["--version"])
    assert result.exit_code == 0 and "kexp, version" in result.output
    result = CliRunner().invoke(main, ["-h"])
    assert result.exit_code == 0 and "Examples" in result.output


# --- add -----------------------------------------------------------------------------


def add_args(**overrides: str) -> list[str]:
    fields = {
        "--summary": "Unrolled the inner loop by 4 - +1.90%",
        "--score": "1.019",
        "--operator": "csrc/kernels/cache_kernels.cu: reshape_and_cache_flash",
        "--dtype": "bf16",
        "--env": "MI300X, ROCm 7.0.0",
    }
    fields.update(overrides)
    return [item for pair in fields.items() for item in pair]


def test_add_from_flags_records_a_full_iteration_in_one_call(repo: Path, store: Store) -> None:
    (repo / "notes.md").write_text("**Approach**: unroll\n\n**Key insight**: it helps\n")
    (repo / "change.diff").write_text("--- a/kernel.cu\n+++ b/kernel.cu\n@@ -1 +1 @@\n-x\n+y\n")
    result = kexp(
        repo,
        "add",
        *add_args(),
        "--tag",
        "cache",
        "--tag",
        "unroll",
        "--description-file",
        str(repo / "notes.md"),
        "--diff-file",
        str(repo / "change.diff"),
        "--raw-result",
        "Iteration 1 Results - SUCCESS",
        "--json",
    )
    assert result.exit_code == 0, result.stderr
    printed = json.loads(result.stdout)
    assert set(printed) == {"id", "path", "score", "score_ci", "outcome", "cumulative_score"}
    exp = store.get_experiment(printed["id"])
    assert exp.path is not None and exp.path.resolve() == (Path.cwd() / printed["path"]).resolve()
    assert exp.change_summary == "Unrolled the inner loop by 4 - +1.90%"
    assert exp.score == 1.019 and exp.status == "done" and exp.tags == ["cache", "unroll"]
    assert exp.detailed_description.endswith("**Key insight**: it helps")
    assert exp.code_change.startswith("--- a/kernel.cu")
    assert exp.raw_result == "Iteration 1 Results - SUCCESS"
    assert exp.base_commit == git(repo, "rev-parse", "HEAD")
    assert exp.author == "Test Engineer"


def test_add_prints_id_and_path(repo: Path, store: Store) -> None:
    result = kexp(repo, "add", *add_args())
    assert result.exit_code == 0, result.stderr
    verb, exp_id, path = result.stdout.split()
    assert verb == "recorded" and store.path_of(exp_id).resolve() == Path(path).resolve()


def test_add_from_yaml_on_stdin(repo: Path, store: Store) -> None:
    document = (
        "change_summary: Vectorized the store - -2.0%\n"
        "score: 0.98\n"
        "status: done\n"
        "operator_sig: 'csrc/kernels/cache_kernels.cu: reshape_and_cache_flash'\n"
        "dtype_sig: bf16\n"
        "env: MI300X\n"
        "base_commit: " + git(repo, "rev-parse", "--short", "HEAD") + "\n"
        "tags: [cache]\n"
        "detailed_description: |\n"
        "  **Approach**: vector stores\n"
        "\n"
        "  **Key insight**: bank conflicts\n"
    )
    result = kexp(repo, "add", input=document)
    assert result.exit_code == 0, result.stderr
    (exp,) = store.list_experiments()
    assert exp.score == 0.98 and exp.outcome == "regression"
    assert exp.base_commit == git(repo, "rev-parse", "HEAD")  # resolved to the full hash
    assert (
        exp.detailed_description
        == "**Approach**: vector stores\n\n**Key insight**: bank conflicts\n"
    )


def test_add_from_json_with_parent_prefix_and_flags_winning(
    repo: Path, store: Store, make_experiment: Callable[..., KernelExperiment]
) -> None:
    parent = make_experiment()
    document = json.dumps(
        {**experiment_fields(), "pid": parent.id[:8], "score": 1.5, "outcome": "ignored"}
    )
    result = kexp(repo, "add", "--score", "1.05", "--file", "-", "--json", input=document)
    assert result.exit_code == 0, result.stderr
    exp = store.get_experiment(json.loads(result.stdout)["id"])
    assert exp.pid == parent.id and exp.score == 1.05


def test_add_from_a_markdown_experiment_file(repo: Path, store: Store, tmp_path: Path) -> None:
    source = tmp_path / "draft.md"
    source.write_text(
        "---\n"
        "change_summary: Fused two kernels - +4%\n"
        "score: 1.04\n"
        "status: done\n"
        "is_buggy: false\n"
        "operator_sig: fused.cu\n"
        "dtype_sig: fp16\n"
        "env: H100\n"
        "---\n\n"
        "## Detailed description\n\n**Key insight**: fewer launches\n\n"
        "## Code change\n\n```diff\n+fused\n```\n"
    )
    result = kexp(repo, "add", "--file", str(source))
    assert result.exit_code == 0, result.stderr
    (exp,) = store.list_experiments()
    assert exp.code_change == "+fused" and exp.dtype_sig == "fp16"
    assert exp.detailed_description == "**Key insight**: fewer launches"


def test_add_diff_from_git_takes_the_working_tree_diff_without_the_store(
    repo: Path, store: Store
) -> None:
    (repo / "kernel.cu").write_text("__global__ void k() { /* unrolled */ }\n")
    result = kexp(repo, "add", *add_args(), "--diff-from-git", "--json")
    assert result.exit_code == 0, result.stderr
    exp = store.get_experiment(json.loads(result.stdout)["id"])
    assert "+__global__ void k() { /* unrolled */ }" in exp.code_change
    assert "experiments/" not in exp.code_change
    # The diff is against HEAD, and HEAD is recorded as its base: the change measured is
    # recorded, so the experiment is not "uncommitted-base" (test_newcomer.py).
    assert "uncommitted" not in result.stderr and "uncommitted-base" not in exp.tags
    assert exp.base_commit == git(repo, "rev-parse", "HEAD")


def test_an_empty_diff_is_said_to_be_empty_however_it_is_given(repo: Path, store: Store) -> None:
    """Recorded all the same (the measurement is worth keeping), with one warning: from
    git (no change in the working tree) and from a file alike."""
    result = kexp(repo, "add", *add_args(), "--diff-from-git")
    assert result.exit_code == 0 and "git diff is empty" in result.stderr, result.output
    (repo / "empty.diff").write_text("\n")
    result = kexp(repo, "add", *add_args(), "--diff-file", str(repo / "empty.diff"))
    assert result.exit_code == 0, result.output
    assert "the diff (" in result.stderr and "is empty: no code change recorded" in result.stderr
    assert [e.code_change for e in store.list_experiments()] == ["", ""]


@pytest.mark.parametrize(
    ("document", "message"),
    [
        ("change_summary: [unclosed\n", "YAML syntax error"),
        ("score: 1.0\nscore: 2.0\n", "duplicate key 'score'"),
        ('{"score": 1.0, "score": 2.0}', "duplicate key 'score'"),
        ('{"score": 1.0,}', "JSON syntax error"),
        ("- a\n- b\n", "must be a mapping"),
        ("socre: 1.0\n", "unknown field(s): socre"),
        ("", "the document is empty"),
    ],
)
def test_add_refuses_an_invalid_document_on_stdin(
    repo: Path, store: Store, document: str, message: str
) -> None:
    result = kexp(repo, "add", input=document)
    assert result.exit_code == 1
    assert error_line(result).startswith("kexp: error: <stdin> is not a valid experiment")
    assert message in result.stderr
    assert store.paths() == []


def test_add_refuses_an_invalid_experiment_and_writes_nothing(repo: Path, store: Store) -> None:
    result = kexp(repo, "add", *add_args(**{"--summary": "x" * 81}), "--buggy")
    assert result.exit_code == 1
    assert "was not recorded" in error_line(result)
    assert "too-long" in result.stderr and "buggy-without-error" in result.stderr
    assert store.paths() == []


def test_add_with_an_unknown_parent_is_a_one_line_error(repo: Path, store: Store) -> None:
    result = kexp(repo, "add", *add_args(), "--pid", "abcdef12")
    assert result.exit_code == 2
    assert "no experiment with id abcdef12" in error_line(result)
    assert store.paths() == []


# --- top, list, show -------------------------------------------------------------------


@pytest.fixture
def populated(store: Store, make_experiment: Callable[..., KernelExperiment]) -> Store:
    """Five experiments: improvement, regression, marginal, buggy, pending."""
    make_experiment(id="6749f3a000000001", score=1.05, tags=["cache"])
    make_experiment(id="6749f3a000000002", score=0.95, change_summary="Vectorized - -5%")
    make_experiment(id="6749f3a000000003", score=1.0, dtype_sig="fp16", operator_sig="gemm.cu")
    make_experiment(
        id="6749f3a000000004",
        score=0.0,
        is_buggy=True,
        error_message="Segfault",
        change_summary="Crashed - segfault",
    )
    make_experiment(id="6749f3a000000005", score=1.2, status="running")
    return store


def test_top_json_gives_the_best_with_stable_keys(repo: Path, populated: Store) -> None:
    result = kexp(repo, "top", "--json")
    assert result.exit_code == 0, result.stderr
    records = json.loads(result.stdout)
    assert [r["id"][-1] for r in records] == ["1", "3", "2"]  # buggy and pending left out
    # Lean by default: keys in the stable order, empty optional fields and path left out.
    assert all(list(r) == [k for k in RECORD_FIELDS if k in r] for r in records)
    assert all("path" not in r and "error_message" not in r and "suspect" not in r for r in records)
    assert records[0]["tags"] == ["cache"] and "tags" not in records[1]
    full = json.loads(kexp(repo, "top", "--json", "--full").stdout)
    assert all(tuple(r) == RECORD_FIELDS for r in full)
    assert full[1]["tags"] == [] and full[0]["path"].endswith(".md")
    assert [{k: v for k, v in r.items() if k in records[i]} for i, r in enumerate(full)] == records
    brief = json.loads(kexp(repo, "top", "--json", "--brief").stdout)
    assert list(brief[0]) == [
        "id",
        "change_summary",
        "score",
        "cumulative_score",
        "outcome",
        "key_insight",
        "operator_sig",
        "dtype_sig",
        "env",
    ]
    assert brief[0]["key_insight"] == "unrolling helps" and brief[0]["outcome"] == "improvement"
    front = json.loads(kexp(repo, "top", "--json", "--front-matter").stdout)
    assert "detailed_description" not in front[0] and front[0]["pid"] == ""
    assert "raw_result" not in front[0] and "outcome" in front[0]
    some = json.loads(kexp(repo, "top", "--json", "--fields", "score,id", "-n", "1").stdout)
    assert some == [{"score": 1.05, "id": "6749f3a000000001"}]
    asked = json.loads(kexp(repo, "top", "--json", "--fields", "id,tags,path", "-n", "2").stdout)
    assert asked[1]["tags"] == [] and asked[1]["path"].endswith(".md")


def test_top_limits_to_twenty_by_default(
    repo: Path, store: Store, make_experiment: Callable[..., KernelExperiment]
) -> None:
    for n in range(22):
        make_experiment(id=f"6749f3a0000001{n:02x}", score=1.0 + n / 100)
    records = json.loads(kexp(repo, "top", "--json").stdout)
    assert len(records) == 20 and records[0]["score"] == 1.21


def test_top_table_is_ranked_and_aligned(repo: Path, populated: Store) -> None:
    result = kexp(repo, "top")
    lines = result.stdout.splitlines()
    assert lines[0].split() == [
        "#",
        "ID",
        "CUMULATIVE",
        "SCORE",
        "OUTCOME",
        "DTYPE",
        "OPERATOR",
        "SUMMARY",
    ]
    rank, shown_id, cumulative, score = lines[1].split()[:4]
    assert (rank, cumulative, score) == ("1", "1.0500", "1.0500")
    # Ids are shown as long as needed to tell the listed ones apart (at least 10).
    assert len(shown_id) >= 10 and "6749f3a000000001".startswith(shown_id)
    shown = [line.split()[1] for line in lines[1:]]
    assert len(set(shown)) == len(shown)
    assert len({line.index("OUTCOME") for line in lines[:1]} | {lines[1].index("improvement")}) == 1
    assert lines[1].rindex("1.0500") + len("1.0500") == lines[0].index(" SCORE") + len(" SCORE")
    assert lines[1].index("1.0500") + len("1.0500") == lines[0].index("CUMULATIVE") + len(
        "CUMULATIVE"
    )


def test_table_is_fitted_to_the_terminal_width(repo: Path, populated: Store) -> None:
    result = kexp(repo, "list", COLUMNS="60")
    assert all(len(line) <= 60 for line in result.stdout.splitlines())
    assert "…" in result.stdout


def test_list_filters_sort_limit(repo: Path, populated: Store) -> None:
    def ids(*args: str) -> list[str]:
        result = kexp(repo, "list", "--json", "--fields", "id", *args)
        assert result.exit_code == 0, result.stderr
        return [r["id"][-1] for r in json.loads(result.stdout)]

    assert ids() == ["1", "2", "3", "4", "5"]
    assert ids("--outcome", "regression", "--outcome", "buggy") == ["2", "4"]
    assert ids("--dtype", "fp16") == ["3"]
    assert ids("--operator", "GEMM") == ["3"]
    assert ids("--tag", "cache") == ["1"]
    assert ids("--min-score", "1.0", "--max-score", "1.1") == ["1", "3"]
    assert ids("--not-buggy", "--status", "done") == ["1", "2", "3"]
    assert ids("--sort", "-score") == ["5", "1", "3", "2", "4"]
    assert ids("--sort", "score", "--reverse", "-n", "2") == ["5", "1"]
    assert ids("-n", "2") == ["4", "5"]  # the newest
    assert ids("--text", "segfault") == ["4"]


def test_list_csv_and_jsonl(repo: Path, populated: Store) -> None:
    result = kexp(repo, "list", "--format", "csv", "--fields", "id,score,tags,is_buggy")
    rows = list(csv.DictReader(io.StringIO(result.stdout)))
    assert rows[0] == {
        "id": "6749f3a000000001",
        "score": "1.05",
        "tags": '["cache"]',
        "is_buggy": "false",
    }
    lines = kexp(repo, "list", "--format", "jsonl", "--brief").stdout.splitlines()
    assert len(lines) == 5 and json.loads(lines[3])["outcome"] == "buggy"


def test_list_rejects_an_unknown_field_or_sort_key(
    repo: Path, populated: Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    result = kexp(repo, "list", "--fields", "id,nope")
    assert result.exit_code == 2 and "unknown field(s) nope" in error_line(result)
    # A sort key is checked before the store is read (top's was checked after its whole
    # read: seconds at 100,000 experiments, for a typo).
    read: list[str] = []
    for method in ("found", "top_experiments", "list_experiments"):
        monkeypatch.setattr(Store, method, lambda *a, m=method, **k: read.append(m) or [])
    for command in ("list", "top"):
        result = kexp(repo, command, "--sort", "speed")
        assert result.exit_code == 2 and "speed" in error_line(result), command
    assert read == []


def test_show_text_json_field_and_fields(repo: Path, populated: Store) -> None:
    text = kexp(repo, "show", "6749f3a000000004").stdout
    assert "Crashed - segfault" in text and "## Error message" in text and "Segfault" in text
    brief = kexp(repo, "show", "6749f3a000000004", "--brief").stdout
    assert "## " not in brief and "buggy" in brief
    data = json.loads(kexp(repo, "show", "6749f3a000000001", "--json", "--full").stdout)
    assert tuple(data) == RECORD_FIELDS and data["outcome"] == "improvement"
    lean = json.loads(kexp(repo, "show", "6749f3a000000001", "--json").stdout)
    assert lean == {k: v for k, v in data.items() if k in lean} and "path" not in lean
    assert "error_message" not in lean and lean["tags"] == ["cache"]
    raw = kexp(repo, "show", "6749f3a000000001", "--field", "detailed_description").stdout
    assert raw == populated.get_experiment("6749f3a000000001").detailed_description + "\n"
    assert kexp(repo, "show", "6749f3a000000001", "--field", "tags").stdout == '["cache"]\n'
    some = kexp(repo, "show", "6749f3a000000001", "--fields", "score,outcome").stdout
    assert some == "score: 1.0500\noutcome: improvement\n"


def test_show_unknown_id_and_ambiguous_prefix(repo: Path, populated: Store) -> None:
    result = kexp(repo, "show", "abcdef12")
    assert result.exit_code == 2
    assert error_line(result).startswith("kexp: error: no experiment with id abcdef12")
    assert result.stdout == ""
    result = kexp(repo, "show", "6749f3a0")
    assert result.exit_code == 2
    line = error_line(result)
    assert "ambiguous" in line and "6749f3a000000001" in line and "6749f3a000000005" in line
    result = kexp(repo, "show", "xyz!")
    assert result.exit_code == 2 and "is not an experiment id" in error_line(result)


def test_control_characters_from_experiments_are_neutralised(
    repo: Path, store: Store, make_experiment: Callable[..., KernelExperiment]
) -> None:
    make_experiment(change_summary="Evil \x1b[31mred\x1b[0m - +1%", raw_result="bell\x07 \x9b2J")
    for args in (("list",), ("top",), ("tree",), ("show", store.list_experiments()[0].id)):
        out = kexp(repo, *args).stdout
        assert "\x1b" not in out and "\x07" not in out and "\x9b" not in out
        assert "\\x1b[31m" in out
    data = kexp(repo, "list", "--json").stdout
    assert "\x1b" not in data and "\x9b" not in data
    assert json.loads(data)[0]["raw_result"] == "bell\x07 \x9b2J"


def test_no_color_when_not_a_terminal_or_no_color(repo: Path, populated: Store) -> None:
    for env in ({}, {"NO_COLOR": "1"}):
        for args in (("top",), ("tree",), ("show", "6749f3a000000001"), ("stats",)):
            assert not ANSI.search(kexp(repo, *args, **env).stdout)


# --- tree, lessons, stats ------------------------------------------------------------


@pytest.fixture
def lineage(store: Store, make_experiment: Callable[..., KernelExperiment]) -> dict[str, str]:
    """root 1.00 -> a 1.05 -> (a1 1.02, a2 1.10 -> a21 1.08); root -> b 0.97 -> b1 0.96,
    every score measured against the reference (the cumulative score is the score)."""
    ids: dict[str, str] = {}

    def add(name: str, parent: str | None, score: float, **extra: Any) -> None:
        if parent:
            extra["measured_against"] = "reference"
        exp = make_experiment(
            id=f"7000000000000{len(ids):03x}",
            pid=ids[parent] if parent else "",
            score=score,
            change_summary=f"Step {name} - {score}",
            created_at=f"2026-11-29T10:00:{len(ids):02d}Z",
            **extra,
        )
        ids[name] = exp.id

    add("root", None, 1.0)
    add("a", "root", 1.05)
    add("a1", "a", 1.02)
    add("a2", "a", 1.10)
    add("a21", "a2", 1.08)
    add("b", "root", 0.97)
    add("b1", "b", 0.96)
    return ids


def test_tree_json_marks_best_path_dead_ends_and_deltas(
    repo: Path, lineage: dict[str, str]
) -> None:
    result = kexp(repo, "tree", "--json")
    assert result.exit_code == 0, result.stderr
    (root,) = json.loads(result.stdout)
    nodes = {}

    def walk(node: dict[str, Any]) -> None:
        nodes[node["id"]] = node
        for child in node["children"]:
            walk(child)

    walk(root)
    by_name = {name: nodes[i] for name, i in lineage.items()}
    assert [n for n, v in by_name.items() if v["on_best_path"]] == ["root", "a", "a2"]
    assert by_name["a2"]["is_best"]
    # a2 is the best: never a dead end, though nothing built on it is better.
    assert [n for n, v in by_name.items() if v["dead_end"]] == ["b"]
    assert by_name["a"]["delta"] == pytest.approx(0.05)
    assert by_name["a"]["delta_pct"] == pytest.approx(5.0)
    assert by_name["root"]["delta"] is None


def test_tree_text_for_one_experiment(repo: Path, lineage: dict[str, str]) -> None:
    result = kexp(repo, "tree", lineage["a2"])
    assert result.exit_code == 0, result.stderr
    lines = result.stdout.splitlines()
    shown = [line for line in lines if "Step" in line]
    # the ancestors (root, a) and the descendants (a21), no side branches
    assert [re.search(r"Step (\w+)", line).group(1) for line in shown] == ["root", "a", "a2", "a21"]  # type: ignore[union-attr]
    assert shown[2].lstrip("│├└─ ").startswith("*") and "[best]" in shown[2]
    assert "Δ  +5.00%" in shown[1] and "<" in shown[2]  # right-aligned: Δ +25.00%
    assert "<: the experiment asked for" in lines  # the legend says what < is
    forest = kexp(repo, "tree").stdout.splitlines()
    assert not any(line.startswith("<:") for line in forest)  # no experiment asked for
    # one chain (a1 and the b branch not shown): each step under the one before, at its
    # indent, without a branch
    assert [line[:4] for line in shown] == ["* 70", "* 70", "* 70", "  70"]


def read_tree(text: str) -> dict[str, str]:
    """The parent of each experiment, read back from ``kexp tree``'s text the way a reader
    reads it: a line after ``├── ``/``└── `` is a child of the line above at four
    columns less; a line without one, of the line just above (its only child); a line
    at column 0 after a blank line, a root."""
    parents: dict[str, str] = {}
    at_column: dict[int, str] = {}
    above: str | None = None
    for line in text.split("\n\ncolumns:", 1)[0].splitlines():
        if not line.strip():
            above = None
            continue
        match = re.match(r"^([│├└─ …]*?)([* ]) ([0-9a-f]{10,16}) ", line)
        assert match is not None, line
        lead, exp_id = match.group(1), match.group(3)
        column = len(lead)
        if lead.endswith(("├── ", "└── ")):
            parents[exp_id] = at_column[column - 4]
        elif above is not None:
            parents[exp_id] = above
        at_column[column] = exp_id
        above = exp_id
    return parents


def test_a_campaigns_twelve_steps_read_back_as_its_lineage_at_80_columns(
    repo: Path, make_experiment: Callable[..., KernelExperiment]
) -> None:
    """Twelve steps, each on the last, with a failure and a regression on the way: the
    tree indented each step under its parent, so at 80 columns the later steps' lines
    were cut from the left and the summaries to three letters. Each next step is in one
    column now, and the text reads back as the lineage the files hold."""
    operator = "csrc/kernels/cache_kernels.cu: reshape_and_cache_flash"
    parent = ""
    for step in range(12):
        exp = make_experiment(
            id=f"71{step:02x}000000000000",
            pid=parent,
            score=1.05,
            operator_sig=operator,
            change_summary=f"Step {step} of the campaign - +5%",
            created_at=f"2026-11-29T10:00:{step:02d}Z",
            **({"measured_against": "parent"} if parent else {}),
        )
        if step in (3, 7):  # a dead end beside the chain: a crash, a regression
            make_experiment(
                id=f"72{step:02x}000000000000",
                pid=exp.id,
                score=0.0 if step == 3 else 0.95,
                status="failed" if step == 3 else "done",
                measured_against="parent",
                operator_sig=operator,
                change_summary=f"Side {step} - no",
                created_at=f"2026-11-29T10:00:{step:02d}.5Z",
            )
        parent = exp.id
    make_experiment(id="7300000000000000", operator_sig="other.cu: k", score=1.1)
    result = run_kexp("tree", cwd=repo, env={"COLUMNS": "80"})
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert all(len(line) <= 80 for line in lines), max(lines, key=len)
    truth = {e.id[:10]: e.pid[:10] for e in Store(repo).list_experiments() if e.pid}
    assert read_tree(result.stdout) == truth
    steps = [line for line in lines if "Step " in line]
    assert [f"Step {n} of" in line for n, line in enumerate(steps)] == [True] * 12
    # a step in the column of the one before; a new indent at each branch (3 and 7) only
    assert [len(line) - len(line.lstrip("│├└─ ")) for line in steps] == [0] * 4 + [4] * 4 + [8] * 4


def summary_kept(line: str, summary: str) -> int:
    """How many characters of ``summary`` (its start) a tree line shows."""
    return max(n for n in range(len(summary) + 1) if summary[:n] in line)


def test_at_80_columns_a_tree_line_keeps_room_for_its_summary(bundled_root: Path) -> None:
    """``kexp tree`` on the bundled store at 80 columns: the best tip's line kept 16
    characters of its summary, a dead end's 12, the best asked for by id fewer (the
    numbers, the gaps and the outcome's column took the room). Every line still fits
    80 columns; the summary keeps at least 20 characters (18 beside a dead end's mark)."""
    summaries = {e.id[:10]: e.change_summary for e in Store(bundled_root).list_experiments()}
    for args in (("tree",), ("tree", "6aca6c49dc"), ("tree", "--operator", "cache")):
        result = run_kexp(*args, cwd=bundled_root, env={"COLUMNS": "80"})
        assert result.returncode == 0, result.stderr
        lines = result.stdout.splitlines()
        assert all(len(line) <= 80 for line in lines), max(lines, key=len)
        shown = {m.group(): line for line in lines if (m := re.search(r"[0-9a-f]{10}", line))}
        assert any("[best]" in line for line in shown.values()), result.stdout
        for exp_id, line in shown.items():
            if line.startswith("best tip of this tree"):
                continue
            wanted = 18 if "[dead end]" in line else 20
            kept = summary_kept(line, summaries[exp_id])
            assert kept >= min(wanted, len(summaries[exp_id])), (kept, line)
        best = next(line for line in shown.values() if "[best]" in line)
        assert re.search(r"\d\.\d{3}", best) and "Δ" in best, best


def test_tree_filtered_by_operator_and_unknown_id(
    repo: Path, lineage: dict[str, str], make_experiment: Callable[..., KernelExperiment]
) -> None:
    make_experiment(operator_sig="gemm.cu: matmul", change_summary="Other kernel - +1%")
    result = kexp(repo, "tree", "--operator", "gemm")
    assert "Other kernel" in result.stdout and "Step" not in result.stdout
    result = kexp(repo, "tree", "abcdef12")
    assert result.exit_code == 2 and "no experiment" in error_line(result)


def test_lessons_grouped_with_key_insights(
    repo: Path, store: Store, make_experiment: Callable[..., KernelExperiment]
) -> None:
    make_experiment(score=1.2)  # an improvement: not a lesson
    a = make_experiment(score=0.9, detailed_description="**Key insight**: LDS bank conflicts")
    b = make_experiment(score=1.3, change_summary="Part B - +30%")
    make_experiment(
        score=1.0,
        combines=[a.id, b.id],
        change_summary="A+B combined - +0%",
        detailed_description="**Approach**: both\n**Key insight:** they fight over registers",
    )
    make_experiment(is_buggy=True, error_message="NaN", score=0.0, change_summary="Bad - NaN")
    data = json.loads(kexp(repo, "lessons", "--json").stdout)
    assert list(data) == ["buggy", "failed", "regression", "marginal", "interference"]
    assert [x["change_summary"] for x in data["buggy"]] == ["Bad - NaN"]
    assert [x["key_insight"] for x in data["regression"]] == ["LDS bank conflicts"]
    assert data["marginal"] == []
    assert [x["key_insight"] for x in data["interference"]] == ["they fight over registers"]
    text = kexp(repo, "lessons").stdout
    assert "BUGGY (1)" in text and "INTERFERENCE (1)" in text and "MARGINAL" not in text
    assert "Key insight: LDS bank conflicts" in text
    only = json.loads(kexp(repo, "lessons", "--group", "buggy", "--json").stdout)
    assert list(only) == ["buggy"]


CRASH_DIFF = "--- a/k.cu\n+++ b/k.cu\n@@ -1 +1 @@\n-int4 v;\n+int64x2 v = load2(slot);\n"


def test_a_run_that_measured_nothing_prints_no_speedup_in_any_view(
    repo: Path, store: Store, make_experiment: Callable[..., KernelExperiment]
) -> None:
    """A crash or a timeout records score 0: a view that printed 0.0000 beside it gave
    an agent a speedup of zero to take for a result. Every text view prints ``-`` (or
    says "nothing measured"); the JSON keeps the score recorded."""
    parent = make_experiment(score=1.2, change_summary="Vectorize - +20%")
    crash = make_experiment(
        pid=parent.id,
        score=0.0,
        status="failed",
        is_buggy=True,
        error_message="GPU memory access fault",
        code_change=CRASH_DIFF,
        change_summary="Load slot as int64x2 - memory access fault",
    )
    timeout = make_experiment(
        pid=parent.id, score=0.0, status="timeout", change_summary="Unroll 16 - timed out"
    )
    unmeasured = {crash.id[:10]: "buggy", timeout.id[:10]: "failed"}

    def line_of(short: str, *args: str) -> str:
        result = kexp(repo, *args)
        assert result.exit_code == 0, result.stderr
        return next((line for line in result.stdout.splitlines() if short in line), "")

    for exp in (crash, timeout):
        short = exp.id[:10]
        for args in (("list",), ("tree",), ("lessons",), ("similar", "--text", exp.change_summary)):
            line = line_of(short, *args)
            assert "0.0000" not in line and "0.000 " not in line, (args, line)
            assert re.search(r"\s-\s", line), (args, line)  # the score's column
    for short, outcome in unmeasured.items():
        shown = kexp(repo, "show", short).stdout
        assert f"score     - ({outcome}: nothing measured)" in shown, shown
    assert [x["score"] for x in json.loads(kexp(repo, "list", "--json").stdout)][1:] == [0, 0]

    result = kexp(
        repo, "add", "--summary", "Load slot as int64x2 again", "--score", "1.1",
        "--operator", parent.operator_sig, "--dtype", "bf16", "--env", parent.env,
        "--diff-file", str(_write(repo / "again.diff", CRASH_DIFF)),
    )  # fmt: skip
    assert result.exit_code == 0, result.stderr
    (warned,) = [line for line in result.stderr.splitlines() if crash.id in line]
    assert "(nothing measured, buggy:" in warned and "score 0.0000" not in warned

    from kexp.output.html.pages import experiment_path

    assert kexp(repo, "report", "-o", str(repo / "site")).exit_code == 0
    page = (repo / "site" / experiment_path(crash.id)).read_text(encoding="utf-8")
    mine = page[page.index(f'id="{crash.id}"') :]
    assert '<b><span class="none" title="nothing measured">—</span></b>' in mine
    assert "0.0000" not in mine.split("</section>")[0]


def test_top_leaves_out_a_run_that_failed_having_measured_nothing(
    repo: Path, store: Store, make_experiment: Callable[..., KernelExperiment]
) -> None:
    """A timed-out run (score 0, not buggy: outcome failed) was ranked among "the best
    experiments", at the bottom of an agent's top 20; it is left out with the buggy ones
    (``--include-buggy`` keeps both), and the predecessor's module still lists every
    record."""
    best = make_experiment(score=1.2, change_summary="Vectorize - +20%")
    timeout = make_experiment(
        score=0.0, status="timeout", pid=best.id, change_summary="Unroll 16 - timed out"
    )
    crash = make_experiment(
        score=0.0, status="failed", is_buggy=True, error_message="fault", pid=best.id
    )
    ranked = json.loads(kexp(repo, "top", "--json").stdout)
    assert [e["id"] for e in ranked] == [best.id]
    every = json.loads(kexp(repo, "top", "--json", "--include-buggy").stdout)
    assert {e["id"] for e in every} == {best.id, timeout.id, crash.id}
    assert [e.id for e in store.top_experiments()] == [best.id]
    import kernel_exp_dataclass

    with pytest.MonkeyPatch.context() as env:
        env.setenv("KEXP_ROOT", str(repo))
        listed = kernel_exp_dataclass.top_experiments(10)
    assert {e["id"] for e in listed} == {best.id, timeout.id, crash.id}


def _write(path: Path, text: str) -> Path:
    path.write_text(text, encoding="utf-8")
    return path


def test_stats_counts_and_best(repo: Path, populated: Store) -> None:
    data = json.loads(kexp(repo, "stats", "--json").stdout)
    assert data["total"] == 5
    cache = data["by_operator"]["csrc/kernels/cache_kernels.cu: reshape_and_cache_flash"]
    assert cache["total"] == 4 and cache["buggy"] == 1 and cache["pending"] == 1
    assert data["by_outcome"]["marginal"] == 1
    # fp16's one result (1.0) is within noise: no best tip there.
    assert [(b["dtype_sig"], b["score"], b["id"]) for b in data["best"]] == [
        ("bf16", 1.05, "6749f3a000000001"),
    ]
    text = kexp(repo, "stats").stdout
    assert "5 experiment(s)" in text and "6749f3a000" in text


# --- update, rm ----------------------------------------------------------------------


def test_update_with_reason_appends_a_dated_correction_note(
    repo: Path, store: Store, make_experiment: Callable[..., KernelExperiment]
) -> None:
    exp = make_experiment()
    before = exp.path.read_text() if exp.path else ""
    result = kexp(
        repo,
        "update",
        exp.id[:10],
        "--set",
        "score=1.021",
        "--set",
        "tags=cache, unroll",
        "--reason",
        "re-measured with 200 iterations",
    )
    assert result.exit_code == 0, result.stderr
    updated = store.get_experiment(exp.id)
    assert updated.score == 1.021 and updated.tags == ["cache", "unroll"]
    note = updated.detailed_description.splitlines()[-1]
    assert re.fullmatch(
        r"\*\*Correction \(\d{4}-\d\d-\d\d\)\*\*: score 1\.019 → 1\.021; "
        r'tags \[\] → \["cache", "unroll"\]; change_summary Unrolled the inner loop by 4 - '
        r"\+1\.90% → Unrolled the inner loop by 4 - \+2\.10%\. Reason: re-measured with 200 "
        r"iterations",
        note,
    ), note
    assert updated.detailed_description.startswith(exp.detailed_description)
    after = updated.path.read_text() if updated.path else ""
    assert before.splitlines()[:3] == after.splitlines()[:3]


def test_a_new_score_that_leaves_the_measurement_behind_says_so(
    repo: Path, store: Store, make_experiment: Callable[..., KernelExperiment]
) -> None:
    results = [{"config": "t256", "baseline": 6.0, "candidate": 5.9, "speedup": 1.0169}]
    exp = make_experiment(score=1.0169, results=results)

    # (1.05: more than score_tolerance from what its results give, 1.0169)
    result = kexp(repo, "update", exp.id[:10], "--set", "score=1.05", "--reason", "re-measured")

    assert result.exit_code == 0, result.stderr
    warning = next(line for line in result.stderr.splitlines() if "kexp: warning:" in line)
    assert "results and raw_result still hold the measurement of the old score" in warning
    assert f"kexp remeasure {exp.id[:10]}" in warning
    updated = store.get_experiment(exp.id)
    assert updated.results == results and updated.score == 1.05  # left as they were
    quiet = kexp(repo, "update", exp.id[:10], "--set", "tags=cache")
    assert "warning" not in quiet.stderr


def test_update_set_file_and_json(
    repo: Path, store: Store, make_experiment: Callable[..., KernelExperiment], tmp_path: Path
) -> None:
    exp = make_experiment()
    (tmp_path / "bench.log").write_text("Iteration 2 Results - SUCCESS: 1.03x\n")
    result = kexp(
        repo,
        "update",
        exp.id,
        "--set-file",
        f"raw_result={tmp_path / 'bench.log'}",
        "--set",
        "is_buggy=no",
        "--json",
    )
    # is_buggy was already no: only the raw result changed
    assert json.loads(result.stdout)["changed"] == ["raw_result"]
    assert store.get_experiment(exp.id).raw_result == "Iteration 2 Results - SUCCESS: 1.03x"


def test_update_invalid_result_leaves_the_file_untouched(
    repo: Path, store: Store, make_experiment: Callable[..., KernelExperiment]
) -> None:
    exp = make_experiment()
    assert exp.path is not None
    before = exp.path.read_bytes()
    result = kexp(repo, "update", exp.id, "--set", "status=finished")
    assert result.exit_code == 1 and "was not updated" in error_line(result)
    result = kexp(repo, "update", exp.id, "--set", "score=fast")
    assert result.exit_code == 2 and "not a number" in error_line(result)
    result = kexp(repo, "update", exp.id, "--set", "speed=1")
    assert result.exit_code == 2 and "unknown field 'speed'" in error_line(result)
    result = kexp(repo, "update", exp.id)
    assert result.exit_code == 2 and "nothing to change" in error_line(result)
    assert exp.path.read_bytes() == before


def test_a_timed_score_corrected_by_hand_drops_the_old_interval_and_says_so(
    repo: Path, store: Store, make_experiment: Callable[..., KernelExperiment]
) -> None:
    """The skill's correction of a score, on an experiment recorded from timings: the
    interval measured with the old score is dropped (it is not the new score's, inside
    it or not) and the warning says so; one given with the score is kept."""
    exp = make_experiment(score=1.05, score_ci=[1.03, 1.07])
    result = kexp(repo, "update", exp.id, "--set", "score=1.09", "--reason", "by hand")
    assert result.exit_code == 0, result.output
    assert "score_ci [1.03, 1.07], the old measurement's interval, was dropped" in result.stderr
    fixed = store.get_experiment(exp.id)
    assert fixed.score == 1.09 and fixed.score_ci == []
    assert fixed.path is not None and "\nscore_ci:" not in fixed.path.read_text()
    result = kexp(
        repo, "update", exp.id, "--set", "score=1.08", "--set", "score_ci=[1.06, 1.1]",
        "--reason", "measured again",
    )  # fmt: skip
    assert result.exit_code == 0 and "dropped" not in result.stderr, result.output
    assert store.get_experiment(exp.id).score_ci == [1.06, 1.1]


def test_the_interval_hint_names_the_experiment_and_runs_as_printed(
    repo: Path, store: Store, make_experiment: Callable[..., KernelExperiment]
) -> None:
    """A corrected score given with an interval that does not hold it: the refusal's
    hint names the experiment's id, not a placeholder 'ID', and the update it prints,
    run as printed (with the new score), corrects the experiment."""
    exp = make_experiment(score=1.05, score_ci=[1.03, 1.07])
    result = kexp(
        repo, "update", exp.id, "--set", "score=1.12", "--set", "score_ci=[1.03, 1.07]",
        "--reason", "swapped",
    )  # fmt: skip
    assert result.exit_code == 1 and "score-ci-outside" in result.output, result.output
    assert f"kexp remeasure {exp.id} --baseline" in result.output, result.output
    printed = re.search(r"\((kexp update \S+ --set score_ci=)\)", result.output)
    assert printed is not None and printed.group(1).split()[2] == exp.id, result.output
    args = [*printed.group(1).split()[1:], "--set", "score=1.12", "--reason", "swapped"]
    result = kexp(repo, *args)
    assert result.exit_code == 0, result.output
    fixed = store.get_experiment(exp.id)
    assert fixed.score == 1.12 and fixed.score_ci == []


def test_rm_asks_unless_yes_and_protects_parents(
    repo: Path, store: Store, make_experiment: Callable[..., KernelExperiment]
) -> None:
    parent = make_experiment()
    child = make_experiment(pid=parent.id)
    result = kexp(repo, "rm", child.id, input="n\n")
    assert result.exit_code == 1 and "nothing deleted" in result.stderr
    assert len(store.paths()) == 2
    result = kexp(repo, "rm", parent.id, "--yes")
    assert result.exit_code == 1 and "parent of" in error_line(result)
    assert "--force" in error_line(result)
    result = kexp(repo, "rm", child.id, input="y\n")
    assert result.exit_code == 0 and result.stdout.startswith(f"deleted {child.id}")
    result = kexp(repo, "rm", parent.id, "-y")
    assert result.exit_code == 0 and store.paths() == []


def test_rm_is_one_library_call(
    repo: Path, store: Store, make_experiment: Callable[..., KernelExperiment],
    monkeypatch: pytest.MonkeyPatch,
) -> None:  # fmt: skip
    """``kexp rm`` prints what ``Store.remove_experiment`` answers and does nothing else
    itself (the command a thin layer over the library)."""
    from kexp.storage.store import Removal

    exp = make_experiment()
    assert exp.path is not None
    calls: list[tuple[str, bool]] = []

    def answer(with_: Removal) -> Callable[..., Removal]:
        def remove_experiment(self: Store, exp_id: str, *, force: bool = False,
                              confirm: Any = None) -> Removal:  # fmt: skip
            calls.append((exp_id, force))
            return with_

        return remove_experiment

    said = Removal(exp.id, exp.path, deleted=True)
    monkeypatch.setattr(Store, "remove_experiment", answer(said))
    result = kexp(repo, "rm", exp.id[:8], "--yes")
    assert result.exit_code == 0 and result.stdout.startswith(f"deleted {exp.id}")
    assert exp.path.exists() and calls == [(exp.id[:8], False)]  # nothing of its own
    why = f"{exp.id} is the parent of 1 experiment(s) (0123456789)"
    monkeypatch.setattr(Store, "remove_experiment", answer(Removal(exp.id, exp.path, refused=why)))
    result = kexp(repo, "rm", exp.id, "--force")
    assert result.exit_code == 1 and error_line(result).startswith(f"kexp: error: {why}; nothing")
    assert calls[-1] == (exp.id, True)


# --- fmt, validate, export -----------------------------------------------------------


def write_noncanonical(store: Store, exp: KernelExperiment) -> bytes:
    """Rewrite an experiment's file by hand: keys out of order, CRLF, unquoted digits."""
    assert exp.path is not None
    text = exp.path.read_text()
    lines = text.split("\n")
    close = lines.index("---", 1)
    front = lines[1:close]
    front.insert(0, front.pop(front.index(next(x for x in front if x.startswith("score:")))))
    messy = "\n".join(["---", *front, "---", *lines[close + 1 :]]).replace("\n", "\r\n")
    exp.path.write_bytes(messy.encode())
    return messy.encode()


def test_fmt_check_lists_and_fmt_rewrites_canonically(
    repo: Path, store: Store, make_experiment: Callable[..., KernelExperiment]
) -> None:
    exp = make_experiment()
    canonical = exp.path.read_bytes() if exp.path else b""
    tidy = make_experiment()
    messy = write_noncanonical(store, exp)
    result = kexp(repo, "fmt", "--check")
    assert result.exit_code == 1
    assert [Path(p).name for p in result.stdout.split()] == [exp.path.name if exp.path else ""]
    assert exp.path is not None and exp.path.read_bytes() == messy
    result = kexp(repo, "fmt")
    assert result.exit_code == 0 and "reformatted" in result.stdout
    assert exp.path.read_bytes() == canonical
    assert store.get_experiment(exp.id) == exp
    assert kexp(repo, "fmt", "--check").exit_code == 0
    assert kexp(repo, "fmt", "--check", str(tidy.path)).exit_code == 0


def test_fmt_leaves_invalid_files_alone(
    repo: Path, store: Store, make_experiment: Callable[..., KernelExperiment]
) -> None:
    exp = make_experiment()
    assert exp.path is not None
    broken = exp.path.read_text().replace("score: 1.019", "score: fast")
    exp.path.write_text(broken)
    result = kexp(repo, "fmt")
    assert result.exit_code == 1
    assert "not formatted, it has errors" in result.stderr
    assert exp.path.read_text() == broken


def test_validate_formats_and_exit_codes(
    repo: Path, store: Store, make_experiment: Callable[..., KernelExperiment]
) -> None:
    good = make_experiment()
    assert kexp(repo, "validate").exit_code == 0
    bad = make_experiment()
    assert bad.path is not None
    bad.path.write_text(bad.path.read_text().replace("score: 1.019", "score: fast"))
    result = kexp(repo, "validate")
    assert result.exit_code == 1
    assert re.search(r"\.md:\d+:\d+: error\[wrong-type\] score:", result.stdout)
    github = kexp(repo, "validate", "--format", "github").stdout
    assert github.startswith("::error file=") and "title=kexp wrong-type" in github
    problems = json.loads(kexp(repo, "validate", "--format", "json").stdout)
    assert problems[0]["code"] == "wrong-type" and problems[0]["severity"] == "error"
    assert kexp(repo, "validate", str(good.path)).exit_code == 0


def test_export_formats_and_output_file(repo: Path, populated: Store, tmp_path: Path) -> None:
    data = json.loads(kexp(repo, "export").stdout)
    assert len(data) == 5 and tuple(data[0]) == RECORD_FIELDS
    assert data[0]["path"].startswith("experiments/")
    lines = kexp(repo, "export", "--format", "jsonl", "--outcome", "buggy").stdout.splitlines()
    assert [json.loads(x)["id"] for x in lines] == ["6749f3a000000004"]
    target = tmp_path / "out.csv"
    result = kexp(repo, "export", "--format", "csv", "-o", str(target), "--brief")
    assert result.exit_code == 0 and "exported 5 experiment(s)" in result.stderr
    rows = list(csv.DictReader(target.open(encoding="utf-8")))
    assert len(rows) == 5 and "raw_result" not in rows[0] and rows[3]["is_buggy"] == "true"
    result = kexp(repo, "export", "-o", str(tmp_path / "missing" / "x.json"))
    assert result.exit_code == 2 and "cannot write" in error_line(result)


# --- init, env, errors ---------------------------------------------------------------


def test_init_creates_the_store(tmp_path: Path) -> None:
    result = CliRunner().invoke(main, ["init", str(tmp_path / "new")])
    assert result.exit_code == 0
    assert (tmp_path / "new" / "experiments" / "README.md").is_file()
    assert ".kexp/" in (tmp_path / "new" / ".gitignore").read_text()
    assert Store(tmp_path / "new").list_experiments() == []


def test_env_never_fails_and_omits_what_is_missing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from kexp.measure import envinfo

    # A machine with no toolkit: none on PATH, none where toolkits are installed.
    monkeypatch.setattr(envinfo, "TOOLKIT_FOLDERS", {})
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    broken = bin_dir / "nvidia-smi"  # present but failing: must be left out, not an error
    broken.write_text("#!/bin/sh\necho 'NVIDIA-SMI has failed' >&2\nexit 9\n")
    broken.chmod(0o755)
    for path in (str(tmp_path / "nothing"), str(bin_dir)):
        result = run_kexp("env", "--json", cwd=tmp_path, env={"PATH": path})
        assert result.returncode == 0, result.stderr
        data = json.loads(result.stdout)
        assert data["gpus"] == [] and data["driver"] == "" and data["cuda"] == ""
        assert "driver" not in data["env"] and "CUDA" not in data["env"]
        text = run_kexp("env", cwd=tmp_path, env={"PATH": path})
        assert text.returncode == 0 and text.stdout.strip() == data["env"]
        assert f"Python {data['python']}" in data["env"] and data["cpu"] in data["env"]


def test_detect_env_never_records_an_empty_env(repo: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from kexp.measure import envinfo

    args = ("add", "--summary", "Unroll 4 - +2%", "--score", "1.02", "--operator", "k.cu: k",
            "--dtype", "bf16", "--detect-env", "--json")  # fmt: skip
    monkeypatch.setattr(envinfo, "detect_env", lambda: envinfo.EnvInfo())
    result = kexp(repo, *args)
    assert result.exit_code == 2
    assert "could not be detected" in error_line(result) and "--env" in error_line(result)
    assert Store(repo).list_experiments() == []
    monkeypatch.setattr(envinfo, "detect_env", lambda: envinfo.EnvInfo(cpu="AMD EPYC", cores=2))
    result = kexp(repo, *args)
    assert result.exit_code == 0, result.output
    assert Store(repo).get_experiment(json.loads(result.stdout)["id"]).env == "AMD EPYC (2 cores)"


def test_global_options_may_follow_the_command(
    repo: Path, make_experiment: Callable[..., Any], tmp_path: Path
) -> None:
    exp = make_experiment()
    elsewhere = tmp_path / "elsewhere"
    (elsewhere / "experiments").mkdir(parents=True)
    runner = CliRunner()
    for args in (
        ["top", "--no-pager", "--root", str(repo), "--json"],
        ["top", "--json", f"--root={repo}", "--no-pager"],
        ["--root", str(elsewhere), "top", "--root", str(repo), "--json"],  # the later wins
        ["--no-pager", "top", "--json", "--root", str(repo), "--color", "never"],
    ):
        result = runner.invoke(main, args)
        assert result.exit_code == 0, (args, result.output)
        assert [record["id"] for record in json.loads(result.stdout)] == [exp.id], args
    result = runner.invoke(main, ["--root", str(repo), "top", "--color", "always"])
    assert result.exit_code == 0 and "\x1b[" in result.stdout
    result = runner.invoke(main, ["top", "--color", "never", "--root", str(repo)])
    assert result.exit_code == 0 and "\x1b[" not in result.stdout
    result = runner.invoke(main, ["show", exp.id[:10], "--root", str(repo), "--no-pager"])
    assert result.exit_code == 0 and exp.id in result.stdout
    result = runner.invoke(main, ["top", "--color", "sometimes", "--root", str(repo)])
    assert result.exit_code == 2 and "'sometimes' is not one of" in result.stderr
    help_text = runner.invoke(main, ["top", "--help"]).stdout
    assert "--no-pager" not in help_text  # documented once, in kexp --help


def test_missing_store_is_a_one_line_error(tmp_path: Path) -> None:
    for args in (("list",), ("top", "--json"), ("add", "--summary", "x")):
        result = run_kexp(*args, cwd=tmp_path)
        assert result.returncode == 2
        assert result.stderr.startswith("kexp: error: no kexp store found")
        assert len(result.stderr.splitlines()) == 1 and "Traceback" not in result.stderr


def test_usage_errors_are_one_line_with_exit_2(repo: Path) -> None:
    result = run_kexp("list", "--no-such-option", cwd=repo)
    assert result.returncode == 2
    (line,) = result.stderr.splitlines()
    assert re.fullmatch(
        r"kexp: error: No such option.*--no-such-option.*\(see '.* list --help'\)", line
    )
    result = run_kexp("frobnicate", cwd=repo)
    assert result.returncode == 2 and result.stderr.startswith("kexp: error: No such command")


def test_invalid_file_is_skipped_with_one_warning(
    repo: Path, store: Store, make_experiment: Callable[..., KernelExperiment]
) -> None:
    good = make_experiment()
    bad = make_experiment()
    assert bad.path is not None
    bad.path.write_text(bad.path.read_text().replace("score: 1.019", "score: fast"))
    result = kexp(repo, "list", "--json")
    assert [r["id"] for r in json.loads(result.stdout)] == [good.id]
    assert result.stderr.count("kexp: warning: skipped invalid experiment file") == 1


def test_progress_reporting_covers_validate(
    store: Store, make_experiment: Callable[..., KernelExperiment]
) -> None:
    from kexp.core.progress import reporting

    for _ in range(3):
        make_experiment()
    seen: list[tuple[int, int]] = []
    with reporting(lambda done, total: seen.append((done, total))):
        store.validate()
    assert seen[0] == (0, 3) and seen[-1] == (3, 3)


# --- timings and suspect measurements --------------------------------------------------


def test_add_computes_the_score_from_timings(repo: Path, store: Store, tmp_path: Path) -> None:
    (tmp_path / "base.json").write_text(
        json.dumps({"b8_s1024": 12.30, "b16_s2048": [20.0, 21.0, 22.0]})
    )
    (tmp_path / "cand.json").write_text(json.dumps({"b8_s1024": 12.09, "b16_s2048": 20.0}))
    args = add_args()
    del args[args.index("--score") : args.index("--score") + 2]
    result = kexp(
        repo,
        "add",
        *args,
        "--baseline",
        str(tmp_path / "base.json"),
        "--candidate",
        str(tmp_path / "cand.json"),
        "--json",
    )
    assert result.exit_code == 0, result.stderr
    exp = store.get_experiment(json.loads(result.stdout)["id"])
    assert [r["config"] for r in exp.results] == ["b8_s1024", "b16_s2048"]
    assert exp.score == pytest.approx(((12.30 / 12.09) * (21.0 / 20.0)) ** 0.5, abs=1e-4)
    assert "**Overall**" in exp.raw_result
    result = kexp(repo, "add", *args)
    assert result.exit_code == 2 and "no score" in error_line(result)


def test_suspect_measurements_are_flagged_in_listings(
    repo: Path, store: Store, make_experiment: Callable[..., KernelExperiment]
) -> None:
    exp = make_experiment(score=4.2, change_summary="Too good - +320%")
    assert "[suspect: verify correctness] Too good" in kexp(repo, "list").stdout
    assert "[suspect: verify correctness]" in kexp(repo, "tree").stdout
    assert "verify correctness: score 4.2x is above" in kexp(repo, "show", exp.id).stdout
    (record,) = json.loads(kexp(repo, "top", "--json").stdout)
    assert record["suspect"] == ["score 4.2x is above the plausibility ceiling 3x"]


def test_update_giving_a_parent_warns_that_the_score_now_counts_as_a_step(
    repo: Path, store: Store, make_experiment: Callable[..., KernelExperiment]
) -> None:
    # A root's 1.12 was a speedup over the operator's original code; with a parent and
    # no measured_against it becomes a step over the parent's 1.10 (1.232 in all).
    parent = make_experiment(score=1.10)
    child = make_experiment(score=1.12)
    result = kexp(repo, "update", child.id, "--set", f"pid={parent.id}")
    assert result.exit_code == 0, result.stderr
    (warning,) = [line for line in result.stderr.splitlines() if "kexp: warning:" in line]
    assert "no measured_against: its score 1.12 counts as a speedup over the parent" in warning
    assert f"kexp update {child.id} --set measured_against=parent" in warning
    assert "measured_against=reference" in warning
    # Said with the parent, or given a parent again: no warning.
    said = kexp(repo, "update", child.id, "--set", "measured_against=reference")
    assert said.exit_code == 0 and "warning" not in said.stderr
    other = make_experiment(score=1.05)
    both = kexp(
        repo, "update", other.id, "--set", f"pid={parent.id}", "--set", "measured_against=parent"
    )
    assert both.exit_code == 0 and "warning" not in both.stderr
    assert store.get_experiment(child.id).cumulative_score == pytest.approx(1.12)


def test_update_resolves_an_id_prefix_and_show_lists_unknown_fields(
    repo: Path, store: Store, make_experiment: Callable[..., KernelExperiment]
) -> None:
    parent = make_experiment(id="6749f3a0c2d41e7b")
    child = make_experiment()
    result = kexp(repo, "update", child.id, "--set", "pid=6749f3a0")
    assert result.exit_code == 0, result.stderr
    assert store.get_experiment(child.id).pid == parent.id
    assert child.path is not None
    child.path.write_text(child.path.read_text().replace("---\n\n", "reviewer: ana\n---\n\n", 1))
    assert "reviewer  ana" in kexp(repo, "show", child.id).stdout
