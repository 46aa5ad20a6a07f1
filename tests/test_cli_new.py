"""``kexp new``: the editor flow, with a real tiny editor script set as $EDITOR."""

from __future__ import annotations

import datetime as dt
import json
import re
import shlex
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner, Result

import kexp.core.ids
from kexp import KernelExperiment, Store
from kexp.cli.main import main
from kexp.measure.envinfo import detect_env
from tests.conftest import experiment_fields, git, run_kexp

# The editor: each run takes the next step from a JSON list in $KEXP_TEST_EDITS, saves a
# copy of the draft it was given (seen-N.md), then replaces text in the draft, writes
# new text, or fails.
EDITOR = """\
import json, os, sys
from pathlib import Path

draft = Path(sys.argv[-1])
state = Path(os.environ["KEXP_TEST_EDITS"])
steps = json.loads(state.read_text())
step = steps.pop(0)
state.write_text(json.dumps(steps))
number = len(list(state.parent.glob("seen-*.md")))
(state.parent / f"seen-{number}.md").write_text(draft.read_text())
if "exit" in step:
    sys.exit(step["exit"])
if "write" in step:
    draft.write_text(step["write"])
else:
    text = draft.read_text()
    for old, new in step["replace"]:
        assert old in text, old
        text = text.replace(old, new, 1)
    draft.write_text(text)
"""

FILL = [
    ["change_summary:\n", "change_summary: Unrolled the loop by 4 - +2%\n"],
    ["score: 0.0\n", "score: 1.02\n"],
    ["operator_sig:\n", "operator_sig: 'cache.cu: reshape_and_cache'\n"],
    ["dtype_sig:\n", "dtype_sig: bf16\n"],
    ["**Key insight**: ", "**Key insight**: unrolling hides latency"],
]


class Editor:
    """Drives ``kexp new`` with the editor script and a list of steps."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder
        folder.mkdir()
        self.script = folder / "editor.py"
        self.script.write_text(EDITOR)
        self.state = folder / "steps.json"

    @property
    def env(self) -> dict[str, str]:
        return {
            "EDITOR": f"{shlex.quote(sys.executable)} {shlex.quote(str(self.script))}",
            "KEXP_TEST_EDITS": str(self.state),
        }

    def run(
        self,
        repo: Path,
        *steps: dict[str, Any],
        args: tuple[str, ...] = (),
        input: str | None = None,
    ) -> Result:
        self.state.write_text(json.dumps(list(steps)))
        return CliRunner().invoke(
            main, ["--root", str(repo), "new", *args], input=input, env=self.env
        )

    def seen(self, number: int = 0) -> str:
        return (self.folder / f"seen-{number}.md").read_text()


@pytest.fixture
def editor(tmp_path: Path) -> Editor:
    return Editor(tmp_path / "editor")


def drafts(repo: Path) -> list[Path]:
    return sorted((repo / ".kexp" / "drafts").glob("*.md"))


def test_new_records_the_edited_template(repo: Path, store: Store, editor: Editor) -> None:
    result = editor.run(repo, {"replace": FILL}, args=("--json",))
    assert result.exit_code == 0, result.stderr
    exp = store.get_experiment(json.loads(result.stdout)["id"])
    template = editor.seen()
    # prefilled: id, created_at, base_commit, env; headings and guidance as comments
    assert f"id: {exp.id}\n" in template
    assert re.search(r"created_at: '\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{6}Z'", template)
    assert exp.base_commit == git(repo, "rev-parse", "HEAD") and exp.base_commit in template
    assert exp.env == detect_env().describe()
    for heading in (
        "Detailed description",
        "Raw result",
        "Profiling info",
        "Error message",
        "Code change",
    ):
        assert f"## {heading}\n" in template
    assert "<!-- kexp:" in template and "# change_summary:" in template
    # recorded: the edits, without the guidance or the empty sections
    assert exp.change_summary == "Unrolled the loop by 4 - +2%" and exp.score == 1.02
    assert exp.operator_sig == "cache.cu: reshape_and_cache" and exp.status == "done"
    assert exp.detailed_description == (
        "**Approach**:\n\n**Result**:\n\n**Why it worked/failed**:\n\n"
        "**Key insight**: unrolling hides latency"
    )
    assert exp.raw_result == exp.profiling_info == exp.error_message == exp.code_change == ""
    assert exp.path is not None
    stored = exp.path.read_text()
    assert "<!--" not in stored and "\n# " not in stored and "## Raw result" not in stored
    assert drafts(repo) == []
    assert store.validate() == []


def test_new_shows_problems_and_offers_to_edit_again(
    repo: Path, store: Store, editor: Editor
) -> None:
    invalid = {"replace": [*FILL[:1], ["score: 0.0\n", "score: fast\n"]]}
    fix = {"replace": [["score: fast\n", "score: 1.01\n"]]}
    result = editor.run(repo, invalid, fix, input="y\n")
    assert result.exit_code == 0, result.stderr
    assert "kexp: the experiment was not recorded:" in result.stderr
    line = editor.seen(1).splitlines().index("score: fast") + 1
    assert re.search(rf"new-[0-9a-f]+\.md:{line}:\d+: error\[wrong-type\] score:", result.stderr)
    assert "Edit it again?" in result.stderr
    (exp,) = store.list_experiments()
    assert exp.score == 1.01 and exp.change_summary == "Unrolled the loop by 4 - +2%"


def test_new_declined_keeps_the_draft_and_from_resumes_it(
    repo: Path, store: Store, editor: Editor
) -> None:
    invalid = {"replace": [*FILL[:1], ["score: 0.0\n", "score: fast\n"]]}
    result = editor.run(repo, invalid, input="n\n")
    assert result.exit_code == 1
    assert "nothing was recorded; your text is kept in" in result.stderr
    assert store.paths() == []
    (draft,) = drafts(repo)
    assert "change_summary: Unrolled the loop by 4 - +2%" in draft.read_text()
    kept = draft.read_text()
    result = editor.run(
        repo, {"replace": [["score: fast\n", "score: 1.03\n"]]}, args=("--from", str(draft))
    )
    assert result.exit_code == 0, result.stderr
    (exp,) = store.list_experiments()
    assert exp.score == 1.03
    assert drafts(repo) == []  # the draft resumed is recorded: not kept
    # The same text again (a copy kept by hand): said recorded already, in the CLI's words.
    copy = repo.parent / "copy.md"
    copy.write_text(kept.replace("score: fast\n", "score: 1.03\n"))
    result = editor.run(repo, {"replace": []}, args=("--from", str(copy)), input="n\n")
    assert result.exit_code == 1
    assert f"experiment {exp.id} is recorded already (kexp show {exp.id[:10]})" in result.stderr
    assert "KernelExperiment" not in result.stderr and "delete its id: line" in result.stderr


def test_new_saved_empty_aborts(repo: Path, store: Store, editor: Editor) -> None:
    result = editor.run(repo, {"write": ""})
    assert result.exit_code == 1
    assert "aborted: the file was saved empty; nothing was recorded" in result.stderr
    assert store.paths() == [] and drafts(repo) == []
    only_comments = "---\n# nothing\n---\n<!-- kexp: x -->\n"
    assert editor.run(repo, {"write": only_comments.replace("---\n", "")}).exit_code == 1


def test_new_pid_prefills_from_the_parent(
    repo: Path, store: Store, editor: Editor, make_experiment: Callable[..., KernelExperiment]
) -> None:
    parent = make_experiment(operator_sig="gemm.cu: matmul", dtype_sig="fp8", env="H100, CUDA 12.4")
    steps = {"replace": [FILL[0], FILL[1]]}
    result = editor.run(repo, steps, args=("--pid", parent.id[:10], "--json"))
    assert result.exit_code == 0, result.stderr
    exp = store.get_experiment(json.loads(result.stdout)["id"])
    assert (exp.pid, exp.operator_sig, exp.dtype_sig, exp.env) == (
        parent.id,
        "gemm.cu: matmul",
        "fp8",
        "H100, CUDA 12.4",
    )


def test_every_writer_stamps_microseconds_so_steps_made_in_one_second_sort_in_order(
    repo: Path, store: Store, editor: Editor, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An agent records a step with ``kexp add``, drafts its child with ``kexp new``,
    and records a grandchild, all in one second. ``kexp add`` wrote ``created_at``
    with microseconds, ``kexp new``'s template whole seconds: ``…:36Z`` sorts as text
    after ``…:36.700000Z``, so ``kexp list --sort created_at`` put the child last.
    Every writer (``kexp add``, ``kexp new``, the library, a ``KernelExperiment``
    built) writes microseconds, the predecessor's precision, so the order is the order
    they were made in; and ``--sort created_at`` sorts by time, not text, so a file an
    older kexp wrote with whole seconds sorts in its place too."""
    moment = [dt.datetime(2026, 11, 29, 15, 52, 36, 100000, dt.timezone.utc).timestamp()]
    monkeypatch.setattr(kexp.core.ids, "current_time", lambda: moment[0])

    def add(*args: str) -> str:
        result = CliRunner().invoke(
            main,
            ["--root", str(repo), "add", "--score", "1.02", "--operator", "k.cu: k",
             "--dtype", "bf16", "--env", "MI300X", "--description", "d", "--json", *args],
        )  # fmt: skip
        assert result.exit_code == 0, result.output
        return str(json.loads(result.stdout)["id"])

    first = add("--summary", "Unroll 4 - +2%")
    moment[0] += 0.3
    result = editor.run(repo, {"replace": FILL[:2]}, args=("--pid", first, "--json"))
    assert result.exit_code == 0, result.stderr
    child = json.loads(result.stdout)["id"]
    moment[0] += 0.3
    grandchild = add("--summary", "Unroll 8 - +1%", "--pid", child)
    moment[0] += 0.2
    library = store.create_experiment(**experiment_fields(pid=grandchild))
    built = KernelExperiment(score=1.0, status="done")
    made = [first, child, grandchild, library.id]
    stamps = [store.get_experiment(exp_id).created_at for exp_id in made]
    # A file an older kexp new wrote in that second (whole seconds: .000000) sorts first.
    older = store.create_experiment(**experiment_fields(created_at="2026-11-29T15:52:36Z"))
    assert older.created_at == "2026-11-29T15:52:36Z"  # a value given is kept as it is
    assert stamps == [
        "2026-11-29T15:52:36.100000Z",
        "2026-11-29T15:52:36.400000Z",
        "2026-11-29T15:52:36.700000Z",
        "2026-11-29T15:52:36.900000Z",
    ]
    assert re.fullmatch(r"2026-11-29T15:52:36\.9\d{5}Z", built.created_at), built.created_at
    assert re.search(r"created_at: '2026-11-29T15:52:36\.400000Z'", editor.seen())
    listed = CliRunner().invoke(
        main, ["--root", str(repo), "list", "--sort", "created_at", "--json"]
    )
    assert listed.exit_code == 0, listed.output
    assert [e["id"] for e in json.loads(listed.stdout)] == [older.id, *made]
    assert [e.id for e in store.list_experiments()] == [older.id, *made]


def test_new_with_an_unknown_parent_typed_in_is_shown_as_a_problem(
    repo: Path, store: Store, editor: Editor
) -> None:
    steps = {"replace": [*FILL, ["pid:\n", "pid: abcdef12\n"]]}
    result = editor.run(repo, steps, input="n\n")
    assert result.exit_code == 1
    assert "no experiment with id abcdef12" in result.stderr
    assert store.paths() == [] and len(drafts(repo)) == 1


def test_new_editor_failure_is_one_line_and_keeps_the_draft(
    repo: Path, store: Store, editor: Editor
) -> None:
    result = editor.run(repo, {"exit": 3})
    assert result.exit_code == 2
    (line,) = [x for x in result.stderr.splitlines() if x.startswith("kexp: error:")]
    assert "the editor failed" in line and ".kexp/drafts/new-" in line
    assert store.paths() == [] and len(drafts(repo)) == 1


def test_new_in_a_real_subprocess(repo: Path, store: Store, editor: Editor) -> None:
    editor.state.write_text(json.dumps([{"replace": FILL}]))
    result = run_kexp("new", cwd=repo, env=editor.env)
    assert result.returncode == 0, result.stderr
    verb, exp_id, path = result.stdout.split()
    assert verb == "recorded" and store.get_experiment(exp_id).score == 1.02
    assert (repo / path).is_file()


def test_new_without_an_editor_outside_a_terminal_says_what_to_do(repo: Path, store: Store) -> None:
    result = CliRunner().invoke(main, ["--root", str(repo), "new"])
    assert result.exit_code == 2
    assert "no editor: set $VISUAL or $EDITOR" in result.stderr
    assert store.paths() == [] and drafts(repo) == []
