"""What a newcomer tripped on (issue 28, item 11; and item 10's remeasure message): each
a test that failed before its fix."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from click.testing import CliRunner, Result
from conftest import REPO_ROOT, experiment_fields, git, init_repo
from test_clear_errors import _without_privileges, assert_one_clear_line
from test_clear_errors import kexp as kexp_process
from test_report_browser import browser, open_page  # noqa: F401 (fixtures)

from kexp import Store
from kexp.cli.main import main
from kexp.core.ids import SHOWN_LENGTH
from kexp.output.html import build_report
from kexp.output.legacy import sidecar_path
from kexp.storage.lineage import lineage_forest, lineage_of
from kexp.storage.location import init_store


def kexp(repo: Path, *args: str, input: str | None = None, **env: str) -> Result:
    return CliRunner().invoke(main, ["--root", str(repo), *args], input=input, env=env or None)


def bundled_copy(folder: Path) -> Path:
    """A git repository holding a copy of the bundled store."""
    root = init_repo(folder)
    shutil.copytree(REPO_ROOT / "experiments", root / "experiments")
    git(root, "add", "experiments")
    git(root, "commit", "-q", "-m", "the bundled store")
    return root


# --- a store you cannot write -------------------------------------------------------------


def test_update_in_a_store_you_cannot_write_is_one_clear_line(tmp_path: Path) -> None:
    root = tmp_path / "store"
    init_store(root)
    exp = Store(root).create_experiment(**experiment_fields(base_commit="a" * 40, author="A"))
    shutil.rmtree(root / ".kexp")  # a fresh clone: no cache folder yet
    before = exp.path.read_bytes()
    folders = [root, root / "experiments", *(p for p in root.rglob("*") if p.is_dir())]
    for folder in folders:
        folder.chmod(0o555)
    try:
        prefix = _without_privileges()
        result = kexp_process(root, "update", exp.id, "--set", "score=2.0", prefix=prefix)
        assert result.returncode == 2, result.stderr
        assert_one_clear_line(
            result.stderr, f"cannot create kexp's cache folder {root / '.kexp'}", "permissions"
        )
        listed = kexp_process(root, "list", prefix=prefix)  # reading needs no write
        assert listed.returncode == 0 and exp.id[:SHOWN_LENGTH] in listed.stdout, listed.stderr
    finally:
        for folder in folders:
            folder.chmod(0o755)
    assert exp.path.read_bytes() == before


# --- the predecessor's module ---------------------------------------------------------------


def test_the_predecessor_module_inserts_its_sample_outside_a_git_repository(
    tmp_path: Path,
) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    environment = {**os.environ, "PYTHONPATH": str(REPO_ROOT)}
    environment.pop("KEXP_ROOT", None)
    result = subprocess.run(
        [sys.executable, "-m", "kernel_exp_dataclass"], cwd=outside, env=environment,
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    found = re.fullmatch(r"Inserted sample experiment with id: ([0-9a-f]{16})\n", result.stdout)
    assert found is not None, result.stdout
    assert Store(outside).get_experiment(found.group(1)).base_commit == "0" * 40
    # Inside a repository, the sample's base is HEAD, as any experiment's.
    inside = init_repo(tmp_path / "inside")
    result = subprocess.run(
        [sys.executable, "-m", "kernel_exp_dataclass"], cwd=inside, env=environment,
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    (sample,) = Store(inside).list_experiments()
    assert sample.base_commit == git(inside, "rev-parse", "HEAD")


# --- ids at 10 characters --------------------------------------------------------------------


def test_show_prints_its_commands_with_ids_of_ten_characters(repo: Path, store: Store) -> None:
    from kexp.measure.record import record_iteration

    exp = record_iteration(
        store,
        baseline={"b8": [10.0, 10.1, 10.2]},
        candidate={"b8": [9.0, 9.1, 9.2]},
        **{k: v for k, v in experiment_fields().items() if k not in ("score", "change_summary")},
        change_summary="Unrolled the inner loop by 4",  # the timings' score: no figure
    )
    shown = kexp(repo, "show", exp.id[:SHOWN_LENGTH])
    assert shown.exit_code == 0, shown.output
    assert f"kexp show {exp.id[:10]} --field samples" in shown.stdout
    assert SHOWN_LENGTH == 10


# --- the legacy sidecar ---------------------------------------------------------------------


def test_the_legacy_sidecar_is_file_kexp_json_and_an_import_without_it_says_so(
    repo: Path, store: Store, tmp_path: Path
) -> None:
    exp = store.create_experiment(**experiment_fields(tags=["cache", "unroll"]))
    database = tmp_path / "db.json"
    assert kexp(repo, "export", "--format", "legacy", "-o", str(database)).exit_code == 0
    assert sidecar_path(database) == tmp_path / "db.json.kexp.json"
    assert sidecar_path(database).is_file()

    def imported(folder: str, *args: str) -> tuple[Result, Store]:
        target = init_store(tmp_path / folder)
        return kexp(target, "import", str(database), "--no-check-commits", *args), Store(target)

    result, copy = imported("with")
    assert result.exit_code == 0, result.output
    assert copy.get_experiment(exp.id).tags == ["cache", "unroll"]
    # The name earlier versions gave it is still read.
    sidecar_path(database).rename(tmp_path / "db.kexp.json")
    result, copy = imported("earlier")
    assert copy.get_experiment(exp.id).tags == ["cache", "unroll"]
    (tmp_path / "db.kexp.json").unlink()
    # None at all: kexp says what is lost.
    result, copy = imported("without")
    assert copy.get_experiment(exp.id).tags == []
    assert "no sidecar: 1 record(s) were made by kexp" in result.stdout
    assert "db.json.kexp.json" in result.stdout
    # The predecessor's own records (random ids) are not kexp's: nothing to say.
    record = json.loads(database.read_text())
    record[exp.id]["id"] = "0123456789abcdef"
    database.write_text(json.dumps({"0123456789abcdef": record[exp.id]}))
    result, _ = imported("predecessor")
    assert "no sidecar" not in result.stdout


# --- kexp tree's width ----------------------------------------------------------------------


def test_tree_fits_80_columns(tmp_path: Path) -> None:
    root = bundled_copy(tmp_path / "repo")
    store = Store(root)
    parent = store.get_experiment("6ac8bc7624")
    for depth in range(14):  # a long lineage, and a suspect score at its end
        parent = store.create_experiment(
            **experiment_fields(
                pid=parent.id,
                change_summary=f"Step {depth} of a long campaign on the flash cache kernel - +1%",
                score=5.0 if depth == 13 else 1.01,
                base_commit="a" * 40,
            )
        )
    # its sibling: a line without the suspect's and the best's marks, at the same depth
    store.create_experiment(
        **experiment_fields(pid=parent.pid, change_summary="Step 13 again - +1%", score=1.01)
    )
    nodes = [node for tree in lineage_forest(store) for node in tree.walk()]
    parents = {node.experiment.id[:10]: node.experiment.pid for node in nodes}
    for args in (["tree"], ["tree", parent.id], ["tree", "--operator", "cache"]):
        result = kexp(root, "--no-pager", *args, COLUMNS="80")
        assert result.exit_code == 0, result.output
        lines = result.stdout.splitlines()
        assert len(lines) > 5 and max(len(line) for line in lines) <= 80, result.stdout
        assert parent.id[:10] in result.stdout
        # The children of one parent keep one lead, whatever their marks: siblings line up.
        columns: dict[str, set[int]] = {}
        for line in lines:
            found = re.search(r"[0-9a-f]{10}", line)
            if found and found.group() in parents and not line.startswith("best tip"):
                columns.setdefault(parents[found.group()], set()).add(found.start())
        assert all(len(at) == 1 for at in columns.values()), (columns, result.stdout)


def test_a_tree_of_one_id_marks_what_the_whole_tree_marks(tmp_path: Path) -> None:
    """``kexp tree ID`` leaves out the ancestors' other branches, but its best path, best
    tip and dead ends are the whole tree's: the best is never a marginal step of the
    part shown; when the best tip is not shown, a line says which it is."""
    root = bundled_copy(tmp_path / "repo")
    store = Store(root)
    whole = {n.experiment.id: n for tree in lineage_forest(store) for n in tree.walk()}
    tips = {n.experiment.id: tree.best_tip for tree in lineage_forest(store) for n in tree.walk()}
    for exp_id in whole:
        shown = lineage_of(store, exp_id)
        assert shown.best_tip is not None and tips[exp_id] is not None
        assert shown.best_tip.id == tips[exp_id].id
        for node in shown.walk():
            same = whole[node.experiment.id]
            assert (node.on_best_path, node.is_best, node.dead_end, node.delta) == (
                same.on_best_path, same.is_best, same.dead_end, same.delta
            ), (exp_id, node.experiment.id)  # fmt: skip
    best = store.top_experiments(1, operator="cache")[0]
    out = kexp(root, "--no-pager", "tree", "6ace1417ea").stdout  # a marginal step: not the best
    assert "[best]" not in out and best.id[:10] not in out.split("best tip")[0]
    assert f"best tip of this tree, not shown: {best.id[:10]} " in out
    assert f"(kexp tree {best.id[:10]})" in out
    out = kexp(root, "--no-pager", "tree", best.id[:10]).stdout
    assert "[best]" in out and "best tip of this tree" not in out


# --- stats across refs -----------------------------------------------------------------------


def test_stats_across_refs_counts_each_experiment_once(repo: Path, store: Store) -> None:
    exp = store.create_experiment(**experiment_fields())
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", "one")
    git(repo, "checkout", "-q", "-b", "fix")
    store.update_experiment(exp.id, score=0.95)  # a correction on a branch
    git(repo, "commit", "-q", "-am", "corrected")
    git(repo, "checkout", "-q", "main")

    # One entry per experiment (issue 24): its newest version, the branch's correction
    # (it changed since the commit both share), with where the older one is.
    listed = json.loads(kexp(repo, "list", "--all-refs", "--json").stdout)
    assert len(listed) == 1 and listed[0]["score"] == 0.95, listed
    assert listed[0]["ref"] == "fix" and "local" in listed[0]["other_versions"], listed
    result = kexp(repo, "stats", "--all-refs", "--json")
    assert result.exit_code == 0, result.output
    counted = json.loads(result.stdout)
    assert counted["total"] == 1
    # The newest version is the one counted: a regression, no best tip.
    assert counted["best"] == []
    assert counted["by_outcome"]["improvement"] == 0 and counted["by_outcome"]["regression"] == 1


# --- the report's outcome bar ----------------------------------------------------------------


def test_the_outcome_bar_draws_a_pending_slice(
    store: Store,
    tmp_path: Path,
    open_page: Callable[..., Any],  # noqa: F811
) -> None:
    store.create_experiment(**experiment_fields())
    store.create_experiment(**experiment_fields(change_summary="Running - later", status="new"))
    site = tmp_path / "site"
    build_report(store, site)
    page = open_page(site / "index.html", "outcome-bar-pending")
    drawn = page.eval(
        """() => Array.from(document.querySelectorAll('svg.bar rect.seg')).map(r => {
             const style = getComputedStyle(r);
             const box = r.getBoundingClientRect();
             return [r.classList[1], style.fill, box.width];
           })"""
    )
    slices = {name: (fill, width) for name, fill, width in drawn}
    assert set(slices) == {"o-improvement", "o-pending"}
    fill, width = slices["o-pending"]
    assert width > 100 and fill not in ("none", "rgb(255, 255, 255)", "")
    assert fill != slices["o-improvement"][0]


# --- kexp add ---------------------------------------------------------------------------------


ADD = ["add", "--summary", "Unroll by 4 - +2%", "--score", "1.02", "--operator", "k.cu",
       "--dtype", "bf16", "--env", "MI300X"]  # fmt: skip


def test_add_diff_from_git_records_the_base_its_diff_is_against(repo: Path, store: Store) -> None:
    (repo / "kernel.cu").write_text("__global__ void k() { /* unrolled */ }\n")
    result = kexp(repo, *ADD, "--diff-from-git", "--json")
    assert result.exit_code == 0, result.output
    assert "uncommitted" not in result.stderr
    exp = store.get_experiment(json.loads(result.stdout)["id"])
    assert "uncommitted-base" not in exp.tags
    assert exp.base_commit == git(repo, "rev-parse", "HEAD")
    assert "+__global__ void k() { /* unrolled */ }" in exp.code_change


def test_add_of_the_json_export_says_to_feed_one_record_per_add(repo: Path, store: Store) -> None:
    store.create_experiment(**experiment_fields())
    exported = kexp(repo, "export", "--format", "json").stdout
    result = kexp(repo, "add", input=exported)
    assert result.exit_code == 1
    assert "list of 1 record(s)" in result.stderr and "one record per kexp add" in result.stderr
    assert "--format jsonl" in result.stderr and "must be a mapping" not in result.stderr
    assert len(store.list_experiments()) == 1


def test_buggy_without_an_error_names_the_options_to_give_it(repo: Path, store: Store) -> None:
    result = kexp(repo, *ADD, "--buggy")
    assert result.exit_code == 1
    assert "--error TEXT" in result.stderr and "--error-file FILE" in result.stderr
    assert store.list_experiments() == []


# --- kexp init, context, show -----------------------------------------------------------------


def test_init_twice_says_the_store_is_there_already(tmp_path: Path) -> None:
    first = CliRunner().invoke(main, ["init", str(tmp_path)])
    assert first.exit_code == 0 and first.stdout.startswith("initialised kexp store in")
    again = CliRunner().invoke(main, ["init", str(tmp_path)])
    assert again.exit_code == 0
    assert "initialised" not in again.stdout and "a kexp store already" in again.stdout


def test_a_budget_too_small_names_the_smallest_that_works(tmp_path: Path) -> None:
    root = bundled_copy(tmp_path / "repo")
    context = ["context", "--operator", "reshape_and_cache", "--dtype", "bf16"]
    result = kexp(root, *context, "--budget", "10")
    assert result.exit_code == 2
    smallest = int(re.search(r"give --budget (\d+) or more", result.stderr).group(1))  # type: ignore[union-attr]
    fits = kexp(root, *context, "--budget", str(smallest))
    assert fits.exit_code == 0, fits.output
    assert kexp(root, *context, "--budget", str(smallest - 1)).exit_code == 2


def test_show_of_an_experiment_on_another_branch_suggests_all_refs(
    repo: Path, store: Store
) -> None:
    (repo / "experiments" / "README.md").write_text("The experiments.\n")
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", "store")
    git(repo, "checkout", "-q", "-b", "agent-1")
    exp = store.create_experiment(**experiment_fields())
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", "on a branch")
    git(repo, "checkout", "-q", "main")
    result = kexp(repo, "show", exp.id[:10])
    assert result.exit_code == 2
    assert "agent-1" in result.stderr and "the same command with --all-refs" in result.stderr
    assert kexp(repo, "show", exp.id[:10], "--all-refs").exit_code == 0
    # An id nowhere: the usual error.
    missing = kexp(repo, "show", "0123456789")
    assert missing.exit_code == 2 and "--all-refs" not in missing.stderr


# --- kexp remeasure (issue 28, item 10) ---------------------------------------------------------


def test_remeasure_names_the_rounds_not_the_files_for_other_configurations(
    repo: Path, store: Store, tmp_path: Path
) -> None:
    first = {"b8": [10.0, 10.1, 10.2], "b16": [20.0, 20.1, 20.2]}
    from kexp.measure.record import record_iteration

    exp = record_iteration(
        store,
        baseline=first,
        candidate={c: [t * 0.9 for t in v] for c, v in first.items()},
        **{k: v for k, v in experiment_fields().items() if k not in ("score", "change_summary")},
        change_summary="Unrolled the inner loop by 4",  # the timings' score: no figure
    )
    more = {**first, "b32": [40.0, 40.1, 40.2]}
    faster = {c: [t * 0.9 for t in v] for c, v in more.items()}  # one run is never both sides
    for name, data in (("base.json", more), ("cand.json", faster)):
        (tmp_path / name).write_text(json.dumps(data))
    result = kexp(
        repo, "remeasure", exp.id[:10],
        "--baseline", str(tmp_path / "base.json"), "--candidate", str(tmp_path / "cand.json"),
    )  # fmt: skip
    assert result.exit_code == 2
    assert "not in the earlier rounds: b32" in result.stderr
    assert "baseline and candidate" not in result.stderr
