"""``kernel_exp_dataclass`` and ``kexp.update_experiment`` on steps an agent recorded from
timings (each with its ``score_ci``): an old caller's new score, a record written back
after an ancestor was retired, a suspect step in ``top_experiments``, and the step
column of ``kexp tree`` for what an old caller appended (trial O).
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from conftest import git, run_kexp
from test_compat_scores import old_caller
from test_compat_stale import add, timings

import kexp
from kexp import Store
from kexp.core.errors import KexpWarning


@pytest.fixture
def chain(repo: Path) -> dict[str, str]:
    """A measured root (1.8x over the original code), a step over it (1.25x) and a step
    over that (about 1.29x), each recorded from timings by ``kexp add``, committed."""
    reference = timings(repo, "r.json", 180)
    root = add(repo, "root - 1.8x", timings(repo, "b.json", 100), "--measured-against",
               "reference", baseline=reference)  # fmt: skip
    mid = add(repo, "mid - 1.25x", timings(repo, "m.json", 80), "--pid", root)
    tip = add(repo, "tip - 1.29x", timings(repo, "t.json", 62), "--pid", mid,
              baseline="m.json")  # fmt: skip
    git(repo, "add", "-A")
    git(repo, "commit", "-qm", "exps")
    return {"root": root, "mid": mid, "tip": tip}


NEW_SCORE = """\
import kernel_exp_dataclass as k
updated = k.update_experiment({exp_id!r}, score=1.50)
print(updated.score, updated.measured_against, updated.score_ci)
"""


def test_an_old_callers_new_score_on_a_measured_step_is_recorded_over_the_reference(
    repo: Path, chain: dict[str, str]
) -> None:
    tip = chain["tip"]
    assert Store(repo).get_experiment(tip).score_ci  # its step's interval, over the parent
    result = old_caller(NEW_SCORE.format(exp_id=tip), repo)
    assert result.returncode == 0, result.stderr
    assert result.stdout.split() == ["1.5", "reference", "[]"]
    said = [line for line in result.stderr.splitlines() if "Warning" in line]
    assert len(said) == 1 and "KexpWarning" in said[0], result.stderr
    assert tip[:10] in said[0] and "score_ci" in said[0]
    stored = Store(repo).get_experiment(tip)
    assert (stored.score, stored.measured_against, stored.score_ci) == (1.5, "reference", [])
    assert stored.change_summary == "tip - 1.29x"  # only what the caller gave changed


def test_an_old_callers_new_score_outside_a_roots_interval_drops_it(
    repo: Path, chain: dict[str, str]
) -> None:
    root = chain["root"]
    result = old_caller(NEW_SCORE.format(exp_id=root), repo)
    assert result.returncode == 0, result.stderr
    assert result.stdout.split() == ["1.5", "reference", "[]"]
    said = [line for line in result.stderr.splitlines() if "Warning" in line]
    assert len(said) == 1 and root[:10] in said[0] and "score_ci" in said[0], result.stderr
    assert Store(repo).get_experiment(root).score_ci == []


def test_the_python_api_and_kexp_update_write_a_new_score_alike(
    repo: Path, chain: dict[str, str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    twin = tmp_path / "twin"
    shutil.copytree(repo, twin)
    tip = chain["tip"]
    by_cli = run_kexp("update", tip, "--set", "score=1.50", cwd=twin, process=True)
    assert by_cli.returncode == 0, by_cli.stderr
    monkeypatch.setenv("KEXP_ROOT", str(repo))
    with pytest.warns(KexpWarning) as said:
        updated = kexp.update_experiment(tip, score=1.50)
    assert updated.score == 1.5 and updated.score_ci == []
    path = Store(repo).get_experiment(tip).path
    assert path is not None
    relative = path.relative_to(repo)
    assert path.read_bytes() == (twin / relative).read_bytes()
    # the same warning the command prints
    assert [str(w.message) for w in said] == [
        line.removeprefix("kexp: warning: ") for line in by_cli.stderr.splitlines()
    ]


WRITE_BACK = """\
import json, subprocess, sys
import kernel_exp_dataclass as k
record = k.get_experiment({exp_id!r}).to_dict()
subprocess.run([sys.executable, "-m", "kexp", "update", {ancestor!r}, "--set",
                {correction!r}, "--reason", "abandoned"], check=True, capture_output=True)
record["change_summary"] = "tip - 1.29x (verified)"
try:
    k.update_experiment(record["id"], **record)
    print("written")
except ValueError as exc:
    print(str(exc))
"""


@pytest.mark.parametrize(
    ("correction", "said"),
    [
        ("status=failed", "retired (status failed)"),  # the step's speedup now unknown
        ("score=1.1", "its score corrected from 1.25"),  # its speedup now another
    ],
)
def test_a_record_read_before_its_ancestor_changed_is_refused_as_stale(
    repo: Path, chain: dict[str, str], correction: str, said: str
) -> None:
    tip, mid = chain["tip"], chain["mid"]
    path = Store(repo).get_experiment(tip).path
    assert path is not None
    before = path.read_bytes()
    code = WRITE_BACK.format(exp_id=tip, ancestor=mid, correction=correction)
    result = old_caller(code, repo)
    assert result.returncode == 0, result.stderr
    (line,) = result.stdout.splitlines()
    assert "read it again" in line and mid[:10] in line and said in line, line
    assert "by hand" not in line and "score_ci" not in line
    assert path.read_bytes() == before  # nothing written


SUSPECT_TOP = """\
import json, kernel_exp_dataclass as k
print(json.dumps(k.top_experiments(3)))
"""


def test_old_callers_top_flags_a_suspect_step_in_an_extra_key(
    repo: Path, chain: dict[str, str]
) -> None:
    added = run_kexp(
        "add", "--pid", chain["tip"], "--score", "3.6", "--summary", "Skip rescale - +260%",
        "--description", "**Key insight**: x", "--json", cwd=repo, process=True,
    )  # fmt: skip
    assert added.returncode == 0, added.stderr
    suspect = json.loads(added.stdout)["id"]
    result = old_caller(SUSPECT_TOP, repo)
    assert result.returncode == 0, result.stderr
    top = json.loads(result.stdout)
    # COMPAT's order (by score, highest first, whatever is wrong with it) and its keys,
    # in its order, first; the flag is one of kexp's extra keys.
    assert [row["id"] for row in top] == [suspect, chain["tip"], chain["mid"]]
    assert list(top[0])[:10] == [
        "base_commit", "change_summary", "detailed_description", "dtype_sig", "env", "id",
        "operator_sig", "profiling_info", "raw_result", "score",
    ]  # fmt: skip
    assert top[0]["suspect"] and "3.6" in top[0]["suspect"][0]
    assert [row["suspect"] for row in top[1:]] == [[], []]


APPEND_CHILD = """\
import kernel_exp_dataclass as k
p = k.get_experiment({exp_id!r})
c = k.KernelExperiment(round(p.score * 1.02, 4), "manual", p.dtype_sig, p.env, False, "",
    "Old script: fold the scale - +2% on top", "**Key insight**: x", "", p.base_commit,
    p.operator_sig, "", "done", pid=p.id)
k.create_experiment(c)
print(c.id)
"""


def test_kexp_tree_shows_the_step_score_of_an_old_callers_child(
    repo: Path, chain: dict[str, str]
) -> None:
    result = old_caller(APPEND_CHILD.format(exp_id=chain["tip"]), repo)
    assert result.returncode == 0, result.stderr
    child = result.stdout.strip()
    tree = run_kexp("tree", chain["root"], cwd=repo, process=True)
    assert tree.returncode == 0, tree.stderr
    (line,) = [line for line in tree.stdout.splitlines() if child[:10] in line]
    cumulative, step, delta = line.split(child[:10])[1].split()[:3]
    assert float(cumulative) > 2.8  # 1.8 x 1.25 x 1.29 x 1.02 over the original code
    assert step == "1.0200" and delta == "Δ"
