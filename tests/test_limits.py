"""The size rule: no write stores a file over ``max_file_bytes``, and the same bytes get
the same verdict wherever they are read from (a file, a commit, a pull request).

Each write path a user has is driven for real (the library, ``kexp add``, ``kexp
import``, ``kexp new`` with an editor script, ``kexp update``), and what the user would
notice is checked: the refusal names the limit and says what to do, and nothing lands
in the store. A file that is already too large (written by hand, or by an older kexp)
can still be made smaller or deleted.
"""

from __future__ import annotations

import dataclasses
import json
import shlex
import sys
from pathlib import Path

import pytest
from conftest import experiment_fields, git, run_kexp

from kexp import Store
from kexp.core.errors import ValidationError
from kexp.core.settings import DEFAULT_SETTINGS

LIMIT = DEFAULT_SETTINGS.max_file_bytes
#: A profile of 5.2 MB: over the 4 MiB limit.
HUGE_PROFILE = "profile line\n" * 400_000


def experiment_files(root: Path) -> list[Path]:
    """Every file under experiments/ (temporary files included), sorted."""
    return sorted(p for p in (root / "experiments").rglob("*") if p.is_file())


def kexp(root: Path, *args: str, **kwargs: str | dict[str, str]) -> tuple[int, str, str]:
    result = run_kexp(*args, cwd=root, env={"KEXP_ROOT": str(root)}, **kwargs)  # type: ignore[arg-type]
    output = result.stdout + result.stderr
    assert "Traceback" not in output and "internal error" not in output, output
    return result.returncode, result.stdout, result.stderr


def assert_refused_for_size(text: str) -> None:
    """The refusal a user reads: the code, the limit and the hint."""
    assert "error[file-too-large]" in text, text
    assert f"the limit is {LIMIT}" in text, text
    assert "move large logs or profiles out of the experiment" in text, text


def test_no_write_stores_a_file_over_the_limit(repo: Path, store: Store, tmp_path: Path) -> None:
    """create_experiment, kexp add, kexp import, kexp new and an update that grows a
    file are each refused with the limit and a hint; the store is unchanged."""
    before = experiment_files(repo)
    with pytest.raises(ValidationError) as refused:
        store.create_experiment(**experiment_fields(profiling_info=HUGE_PROFILE))
    assert_refused_for_size(str(refused.value))
    assert experiment_files(repo) == before

    big = tmp_path / "profile.txt"
    big.write_text(HUGE_PROFILE)
    code, _, err = kexp(
        repo, "add", "--summary", "Unrolled by 4 - +2%", "--score", "1.02",
        "--operator", "cache.cu: k", "--dtype", "bf16", "--env", "MI300X",
        "--profiling-file", str(big),
    )  # fmt: skip
    assert code == 1
    assert_refused_for_size(err)
    assert experiment_files(repo) == before

    record = {
        "id": "a1f0c3d2e4b50001", "pid": "", "score": 1.02, "raw_result": "r",
        "dtype_sig": "bf16", "env": "MI300X", "is_buggy": False, "error_message": "",
        "change_summary": "Huge description - +2%", "detailed_description": "x" * 6_000_000,
        "code_change": "", "base_commit": "9c1d2e3f4a5b6c7d8e9f0a1b2c3d4e5f6a7b8c9d",
        "operator_sig": "cache.cu: k", "profiling_info": "", "status": "done",
        "created_at": "2026-10-02T09:10:00.000007Z",
    }  # fmt: skip
    database = tmp_path / "kernel_experiments_db.json"
    database.write_text(json.dumps({record["id"]: record}))
    for dry_run in ([], ["--dry-run"]):
        code, out, _ = kexp(repo, "import", str(database), "--no-check-commits", *dry_run)
        assert code == 1, out
        assert "its file would be too large" in out and f"the limit is {LIMIT}" in out, out
        assert "1 not imported" in out and "a bug in kexp" not in out, out
    assert experiment_files(repo) == before

    editor = tmp_path / "editor.py"
    editor.write_text(
        "import sys\nfrom pathlib import Path\n"
        "draft = Path(sys.argv[-1])\ntext = draft.read_text()\n"
        "for old, new in [('change_summary:\\n', 'change_summary: Big - x\\n'),"
        " ('operator_sig:\\n', 'operator_sig: k.cu\\n'),"
        " ('dtype_sig:\\n', 'dtype_sig: bf16\\n')]:\n"
        "    text = text.replace(old, new, 1)\n"
        f"draft.write_text(text + '\\n## Appendix\\n\\n' + {HUGE_PROFILE[:26]!r} * 400_000)\n"
    )
    result = run_kexp(
        "new",
        cwd=repo,
        env={"KEXP_ROOT": str(repo), "EDITOR": f"{shlex.quote(sys.executable)} {editor}"},
        input="n\n",
    )
    assert result.returncode == 1, result.stderr
    assert_refused_for_size(result.stderr)
    assert "your text is kept in" in result.stderr  # the draft is not lost
    assert experiment_files(repo) == before

    exp = store.create_experiment(**experiment_fields())
    written = experiment_files(repo)
    with pytest.raises(ValidationError) as refused:
        store.update_experiment(exp.id, profiling_info=HUGE_PROFILE)
    assert_refused_for_size(str(refused.value))
    code, _, err = kexp(repo, "update", exp.id, "--set-file", f"profiling_info={big}")
    assert code == 1
    assert_refused_for_size(err)
    assert experiment_files(repo) == written
    assert store.get_experiment(exp.id).profiling_info == ""


def test_a_file_already_over_the_limit_can_be_made_smaller_or_deleted(
    repo: Path, store: Store
) -> None:
    """A 5.2 MB file on disk is invalid for every reader, but an update that makes it
    small again succeeds (only its lines change), and so does a delete."""
    small = dataclasses.replace(DEFAULT_SETTINGS, max_file_bytes=10 * LIMIT)
    roomy = Store(repo, settings=small)
    exp = roomy.create_experiment(**experiment_fields(profiling_info=HUGE_PROFILE))
    assert exp.path is not None and exp.path.stat().st_size > LIMIT
    with pytest.warns(UserWarning, match="file-too-large"):
        assert store.list_experiments() == []
    with pytest.raises(ValidationError, match="file-too-large"):
        store.get_experiment(exp.id)
    updated = store.update_experiment(exp.id, profiling_info="moved to profiles/unroll4.txt")
    assert updated.profiling_info == "moved to profiles/unroll4.txt"
    assert store.get_experiment(exp.id).score == exp.score
    text = exp.path.read_text()
    assert "profile line" not in text and text.count("\n") < 40

    other = roomy.create_experiment(**experiment_fields(raw_result=HUGE_PROFILE))
    code, out, _ = kexp(repo, "rm", other.id, "--yes")
    assert code == 0, out
    assert other.path is not None and not other.path.exists()


def commit_all(repo: Path, message: str) -> None:
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", message)


def test_the_same_bytes_get_the_same_size_verdict_from_every_source(
    repo: Path, store: Store
) -> None:
    """A branch commits a 5 MB and a 50 MB experiment file (by hand, past kexp). The
    working tree, the revision, the changed files and both kinds of review each
    report one file-too-large per file, and nothing else about them."""
    store.create_experiment(**experiment_fields())
    commit_all(repo, "one experiment")
    git(repo, "checkout", "-q", "-b", "huge")
    sizes = {"6749f3a0c2d41e7b": 5_200_000, "6749f3a1d4e5f6a7": 50_000_000}
    for exp_id, size in sizes.items():
        path = repo / f"experiments/2026/11/{exp_id}-huge.md"
        path.parent.mkdir(parents=True, exist_ok=True)
        head = f"---\nid: {exp_id}\n---\n\n## Raw result\n\n"
        path.write_text(head + "x" * (size - len(head)))
    commit_all(repo, "huge experiments")

    def verdicts(problems: list[dict[str, object]]) -> dict[str, list[object]]:
        found: dict[str, list[object]] = {}
        for problem in problems:
            name = Path(str(problem["file"])).name[:16]
            if name in sizes:
                found.setdefault(name, []).append((problem["code"], problem["message"]))
        return found

    expected = {
        exp_id: [("file-too-large", f"the file is {size} bytes; the limit is {LIMIT} "
                  "(the max_file_bytes setting)")]
        for exp_id, size in sizes.items()
    }  # fmt: skip
    for args in (
        ["validate", "--format", "json"],
        ["validate", "--format", "json", "--rev", "HEAD"],
        ["validate", "--format", "json", "--changed", "main"],
    ):
        code, out, _ = kexp(repo, *args)
        assert code == 1
        assert verdicts(json.loads(out)) == expected, args
    for args in (["review", "main", "--json"], ["review", "main", "HEAD", "--json"]):
        code, out, _ = kexp(repo, *args)
        review = json.loads(out)
        assert verdicts(review["problems"]["changed_files"]) == expected, args
        assert review["summary"]["errors"] == 2, args
    for args in (["review", "main"], ["review", "main", "HEAD"]):
        _, out, _ = kexp(repo, *args)
        assert "❌ 2 validation error(s)" in out and "validation passed" not in out, args
        assert out.count("error[file-too-large]") == 2 and "missing-field" not in out, args
