"""A store is untrusted input: merged branches, forks, hand edits. Reading it is safe.

Each test builds a hostile store in a temporary folder and reads it the ways a user does
(the library, and the real ``kexp`` command in a subprocess), then checks what the user
would notice: no code ran, nothing outside the store was read or written, the hostile
file is reported with a clear error (never a traceback, a hang, or a crash), git never
saw a hostile string, and a terminal shows escape sequences as text.
"""

from __future__ import annotations

import dataclasses
import json
import os
import pty
import select
import shutil
import subprocess
import sys
import time
import warnings
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
from conftest import experiment_fields, git, init_repo, run_kexp

from kexp import KexpError, Store
from kexp.errors import GitError, InvalidExperimentWarning, ValidationError
from kexp.formatting import format_files
from kexp.settings import DEFAULT_SETTINGS
from kexp.validate import read_and_check

ID = "6749f3a0c2d41e7b"
OTHER = "6749f3a1d4e5f6a7"
THIRD = "6749f3a2a1b2c3d4"
COMMIT = "3f2c9e1a7b8d4c6e5f0a1b2c3d4e5f6a7b8c9d0e"


def text_of(exp_id: str, *, summary: str = "Unrolled the inner loop by 4 - +1.90%") -> str:
    """A valid experiment file (no git needed: base_commit is given)."""
    return f"""\
---
id: {exp_id}
pid: ''
change_summary: {summary}
score: 1.019
status: done
is_buggy: false
operator_sig: 'csrc/kernels/cache_kernels.cu: reshape_and_cache_flash'
dtype_sig: bf16
env: MI300X, ROCm 7.0.0
base_commit: {COMMIT}
created_at: '2026-11-29T15:52:36Z'
---

## Raw result

Iteration 1 Results - SUCCESS
"""


def place(root: Path, relative: str, data: str | bytes) -> Path:
    path = root / relative
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data.encode() if isinstance(data, str) else data)
    return path


def plain_store(tmp_path: Path, name: str = "store") -> Path:
    root = tmp_path / name
    (root / "experiments").mkdir(parents=True)
    return root


def kexp(
    root: Path, *args: str, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    """The real command, pinned to ``root``; never a traceback, never an internal error."""
    result = run_kexp(*args, cwd=root, env={"KEXP_ROOT": str(root), "NO_COLOR": "1", **(env or {})})
    output = result.stdout + result.stderr
    assert "Traceback" not in output, output
    assert result.returncode in (0, 1, 2), (result.returncode, output)
    return result


def snapshot(folder: Path) -> dict[str, tuple[bytes | str, int]]:
    """Every entry below ``folder``: its content (or link target) and modification time."""
    found: dict[str, tuple[bytes | str, int]] = {}
    for path in sorted(folder.rglob("*")):
        if ".kexp" in path.parts:
            continue  # the store's cache (locks, index)
        info = path.lstat()
        if path.is_symlink():
            found[str(path)] = (os.readlink(path), info.st_mtime_ns)
        elif path.is_file():
            found[str(path)] = (path.read_bytes(), info.st_mtime_ns)
    return found


# --- YAML tags ------------------------------------------------------------------------

UNSAFE_TAGS = [
    "!!python/object/apply:os.system ['touch {marker}']",
    "!!python/object/new:os.system ['touch {marker}']",
    "!!python/object/apply:subprocess.check_output [['touch', '{marker}']]",
    "!!python/name:os.system",
    "!!python/module:os",
    "!!python/object:builtins.dict {{}}",
]


def test_yaml_tags_never_run_code(tmp_path: Path) -> None:
    """Files carrying Python object tags are refused by every reader; none runs code."""
    root = plain_store(tmp_path)
    marker = tmp_path / "code-ran"
    exp_ids = [f"6749f3a0{n:08x}" for n in range(len(UNSAFE_TAGS))]
    for exp_id, tag in zip(exp_ids, UNSAFE_TAGS, strict=True):
        hostile = text_of(exp_id).replace("env: MI300X, ROCm 7.0.0", f"env: {tag}")
        path = place(root, f"experiments/2026/11/{exp_id}-tag.md", hostile.format(marker=marker))
        problems = read_and_check(path).problems
        assert [p.code for p in problems] == ["yaml-unsafe-tag"], problems
        assert problems[0].line == 10
    store = Store(root)
    with pytest.warns(InvalidExperimentWarning):
        assert store.list_experiments() == []
    with pytest.raises(ValidationError):
        store.get_experiment(exp_ids[0])
    with pytest.raises(ValidationError):
        store.update_experiment(exp_ids[0], score=2.0)
    assert all(r.status == "error" for r in format_files(store=store))
    for args in (["list"], ["validate"], ["fmt"], ["export"], ["show", exp_ids[0]]):
        kexp(root, *args)
    result = kexp(root, "validate")
    assert result.returncode == 1
    assert result.stdout.count("error[yaml-unsafe-tag]") == len(UNSAFE_TAGS)
    assert not marker.exists()


# --- symbolic links -------------------------------------------------------------------


def test_symbolic_links_never_lead_out_of_the_store(tmp_path: Path) -> None:
    """A symlinked file and a symlinked folder under experiments/ point outside the
    store: nothing reads through them, and nothing writes through them."""
    root = plain_store(tmp_path)
    real = place(root, f"experiments/2026/11/{ID}-real.md", text_of(ID))
    outside = tmp_path / "outside"
    secret = place(outside, f"{OTHER}-secret.md", text_of(OTHER, summary="SECRET file - x"))
    place(outside, f"2026-12/{THIRD}-hidden.md", text_of(THIRD, summary="HIDDEN folder - x"))
    linked_file = root / f"experiments/2026/11/{OTHER}-secret.md"
    linked_file.symlink_to(secret)
    (root / "experiments/2026/12").symlink_to(outside / "2026-12", target_is_directory=True)
    before = snapshot(outside)

    store = Store(root)
    assert store.paths() == [real, linked_file]  # the folder link is not walked
    with pytest.warns(InvalidExperimentWarning, match="symbolic link"):
        assert [e.id for e in store.list_experiments()] == [ID]
    with pytest.raises(ValidationError, match="symbolic link"):
        store.get_experiment(OTHER)
    with pytest.raises(KexpError):
        store.get_experiment(THIRD)  # not in the store
    with pytest.raises(ValidationError, match="symbolic link"):
        store.update_experiment(OTHER, score=2.0)
    # A new experiment of December would land in the linked folder: refused.
    with pytest.raises(KexpError, match="symbolic link"):
        store.create_experiment(
            **experiment_fields(created_at="2026-12-01T00:00:00Z", base_commit=COMMIT)
        )
    assert [r.status for r in format_files(store=store)] == ["unchanged", "error"]

    listed = kexp(root, "list", "--json")
    assert [e["id"] for e in json.loads(listed.stdout)] == [ID]
    assert "symbolic link" in listed.stderr
    validated = kexp(root, "validate")
    assert validated.returncode == 1
    assert f"{OTHER}-secret.md:1:1: error[symlink]" in validated.stdout
    assert THIRD not in validated.stdout + validated.stderr
    kexp(root, "fmt")
    exported = kexp(root, "export")
    assert "SECRET" not in exported.stdout and "HIDDEN" not in exported.stdout
    assert snapshot(outside) == before
    assert linked_file.is_symlink()

    # The cache folder (locks, index) committed as a link: nothing is written through it.
    shutil.rmtree(root / ".kexp")
    (root / ".kexp").symlink_to(outside, target_is_directory=True)
    with pytest.raises(KexpError, match="symbolic link"):
        Store(root).list_experiments()
    with pytest.raises(KexpError, match="symbolic link"):
        Store(root).update_experiment(ID, score=2.0)
    assert "symbolic link" in kexp(root, "list").stderr
    assert snapshot(outside) == before


def test_links_to_endless_files_do_not_hang_anything(tmp_path: Path) -> None:
    """An experiment name linked to /dev/zero, or a FIFO: every reader returns at once."""
    root = plain_store(tmp_path)
    place(root, f"experiments/2026/11/{ID}-real.md", text_of(ID))
    (root / f"experiments/2026/11/{OTHER}-zero.md").symlink_to("/dev/zero")
    os.mkfifo(root / f"experiments/2026/11/{THIRD}-fifo.md")
    store = Store(root)
    started = time.monotonic()
    with pytest.warns(InvalidExperimentWarning):
        assert [e.id for e in store.list_experiments()] == [ID]
    assert {p.code for p in store.validate()} == {"symlink", "unreadable"}
    assert [r.status for r in format_files(store=store)] == ["unchanged", "error", "error"]
    # A create with a code change scans the store's files for the same change.
    store.create_experiment(**experiment_fields(base_commit=COMMIT, code_change="-a\n+b\n"))
    assert time.monotonic() - started < 10
    for args in (["list"], ["validate"], ["fmt"], ["show", OTHER], ["show", THIRD]):
        kexp(root, *args)


# --- YAML bombs -------------------------------------------------------------------------

#: 1 KB of front-matter whose aliases expand to 9**9 = 387,420,489 strings.
LAUGHS = 'a: &a ["lol","lol","lol","lol","lol","lol","lol","lol","lol"]\n' + "".join(
    f"{name}: &{name} [{', '.join([f'*{prev}'] * 9)}]\n"
    for prev, name in zip("abcdefgh", "bcdefghi", strict=True)
)
#: The same with mappings and merge keys, and aliases as keys.
MERGES = "a: &a {x: 1, y: 2}\n" + "".join(
    f"{name}: &{name} {{<<: [{', '.join([f'*{prev}'] * 9)}]}}\n"
    for prev, name in zip("abcdefgh", "bcdefghi", strict=True)
)


@pytest.mark.parametrize("bomb", [LAUGHS, MERGES, "&k key: 1\n*k : 2\n"], ids=["seq", "map", "key"])
def test_alias_bombs_are_refused_in_well_under_a_second(bomb: str, tmp_path: Path) -> None:
    root = plain_store(tmp_path)
    text = text_of(ID).replace("---\n\n", bomb + "---\n\n", 1)
    assert len(bomb) < 1024
    path = place(root, f"experiments/2026/11/{ID}-bomb.md", text)
    started = time.perf_counter()
    problems = read_and_check(path).problems
    with pytest.warns(InvalidExperimentWarning, match="alias|tag"):
        assert Store(root).list_experiments() == []
    assert time.perf_counter() - started < 0.5
    assert problems[0].code in ("yaml-alias", "yaml-unsafe-tag"), problems


def test_deep_nesting_is_refused_without_a_crash(tmp_path: Path) -> None:
    """200 KB of '[' used to crash the interpreter (libyaml recurses in C)."""
    root = plain_store(tmp_path)
    depth = 100_000
    for exp_id, value in [
        (ID, "[" * depth + "]" * depth),
        (OTHER, "{a: " * depth + "}" * depth),
        (THIRD, "\n" + "".join(" " * n + "- \n" for n in range(1, 600))),
    ]:
        hostile = text_of(exp_id).replace("env: MI300X, ROCm 7.0.0", f"env: {value}")
        place(root, f"experiments/2026/11/{exp_id}-deep.md", hostile)
    started = time.perf_counter()
    problems = Store(root).validate()
    assert time.perf_counter() - started < 5
    assert [p.code for p in problems] == ["yaml-too-deep"] * 3
    assert [p.line for p in problems][:2] == [10, 10]  # flow nesting: on the env line
    result = kexp(root, "validate")
    assert result.returncode == 1
    assert result.stdout.count("error[yaml-too-deep]") == 3


# --- size, encoding, NUL, long lines --------------------------------------------------


def test_files_over_the_limit_are_refused_without_being_read(tmp_path: Path) -> None:
    root = plain_store(tmp_path)
    huge = root / f"experiments/2026/11/{ID}-huge.md"
    huge.parent.mkdir(parents=True)
    with huge.open("wb") as handle:
        handle.write(text_of(ID).encode())
        handle.truncate(8 * 1024**3)  # a sparse 8 GiB file: reading it whole would show
    store = Store(root)
    started = time.perf_counter()
    (problem,) = read_and_check(huge).problems
    assert (problem.code, problem.line) == ("file-too-large", 1)
    assert str(DEFAULT_SETTINGS.max_file_bytes) in problem.message
    with pytest.raises(ValidationError, match="limit"):
        store.update_experiment(ID, score=2.0)
    assert [r.status for r in format_files(store=store)] == ["error"]
    assert time.perf_counter() - started < 2
    assert huge.stat().st_size == 8 * 1024**3

    # The limit is a setting.
    small = place(root, f"experiments/2026/11/{OTHER}-small.md", text_of(OTHER))
    limited = dataclasses.replace(DEFAULT_SETTINGS, max_file_bytes=100)
    assert read_and_check(small).ok
    (problem,) = read_and_check(small, limited).problems
    assert problem.code == "file-too-large"
    assert f"the file is {small.stat().st_size} bytes; the limit is 100" in problem.message
    result = kexp(root, "validate")
    assert f"{ID}-huge.md:1:1: error[file-too-large]" in result.stdout
    assert "  hint: move large logs" in result.stdout


def test_invalid_utf8_nul_bytes_and_a_10_mb_line(tmp_path: Path) -> None:
    root = plain_store(tmp_path)
    ten_mb = 10 * 1024 * 1024
    files = {
        "6749f3a000000001-latin1.md": text_of("6749f3a000000001")
        .encode()
        .replace(b"SUCCESS", b"SUCC\xe8S"),
        "6749f3a000000002-nul-front.md": text_of("6749f3a000000002")
        .encode()
        .replace(b"MI300X", b"MI\x00300X"),
        "6749f3a000000003-nul-body.md": text_of("6749f3a000000003").encode() + b"\x00\x00\n",
        "6749f3a000000004-long-body.md": text_of("6749f3a000000004").encode() + b"x" * ten_mb,
        "6749f3a000000005-long-env.md": text_of("6749f3a000000005")
        .encode()
        .replace(b"MI300X", b"M" * ten_mb),
        "6749f3a000000006-one-line.md": b"-" * ten_mb,
    }
    paths = {name: place(root, f"experiments/2026/11/{name}", data) for name, data in files.items()}
    codes = {name: [p.code for p in read_and_check(path).problems] for name, path in paths.items()}
    assert codes == {
        "6749f3a000000001-latin1.md": ["invalid-utf8"],
        "6749f3a000000002-nul-front.md": ["bad-character"],
        "6749f3a000000003-nul-body.md": [],  # any text is fine in the body
        "6749f3a000000004-long-body.md": ["file-too-large"],
        "6749f3a000000005-long-env.md": ["file-too-large"],
        "6749f3a000000006-one-line.md": ["file-too-large"],
    }
    # With a limit above 10 MB the long lines are parsed: no crash, in seconds.
    roomy = dataclasses.replace(DEFAULT_SETTINGS, max_file_bytes=16 * 1024 * 1024)
    started = time.perf_counter()
    assert read_and_check(paths["6749f3a000000004-long-body.md"], roomy).ok
    assert read_and_check(paths["6749f3a000000005-long-env.md"], roomy).ok
    assert [
        p.code for p in read_and_check(paths["6749f3a000000006-one-line.md"], roomy).problems
    ] == ["no-front-matter"]
    assert time.perf_counter() - started < 15
    listed = kexp(root, "list", "--json")
    assert [e["id"] for e in json.loads(listed.stdout)] == ["6749f3a000000003"]
    assert listed.stderr.count("kexp: warning: skipped invalid experiment file") == 5
    validated = kexp(root, "validate")
    assert validated.returncode == 1
    assert validated.stdout.count(" error[") == 5


# --- ids and git ----------------------------------------------------------------------

HOSTILE_IDS = [
    "../../../../tmp/kexp-escape",
    f"{ID}/../../escape",
    f"{ID}\x00",
    f"{ID}\n../../escape",
    "/etc/passwd",
    "~/.ssh/id_rsa",
    "-rf",
    "6749f3a0c2d41e7b6749",
]


@pytest.mark.parametrize("hostile", HOSTILE_IDS, ids=repr)
def test_ids_are_checked_before_any_path_is_built(hostile: str, tmp_path: Path) -> None:
    root = plain_store(tmp_path)
    place(root, f"experiments/2026/11/{ID}-real.md", text_of(ID))
    store = Store(root)
    before = snapshot(tmp_path)
    calls: list[Callable[[], object]] = [
        lambda: store.get_experiment(hostile),
        lambda: store.update_experiment(hostile, score=2.0),
        lambda: store.delete_experiment(hostile),
        lambda: store.path_of(hostile),
        lambda: store.lock(hostile).__enter__(),
        lambda: store.create_experiment(**experiment_fields(id=hostile, base_commit=COMMIT)),
        lambda: store.create_experiment(**experiment_fields(pid=hostile, base_commit=COMMIT)),
        lambda: store.list_experiments(pid=hostile),
    ]
    for call in calls:
        with pytest.raises(KexpError):
            call()
    assert snapshot(tmp_path) == before
    if "\x00" not in hostile:
        result = kexp(root, "show", hostile)
        assert result.returncode == 2
        assert "kexp: error:" in result.stderr


HOSTILE_REVISIONS = [
    "--output=PWNED",
    "-oPWNED",
    "--upload-pack=touch PWNED",
    "HEAD:experiments",
    "main..HEAD",
    "HEAD --output=PWNED",
    "$(touch PWNED)",
    "HEAD\n--output=PWNED",
]


def test_hostile_strings_never_reach_git(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Revisions from users and commit hashes from files are checked before git runs:
    GIT_TRACE records every git command, and none carries a hostile string."""
    root = init_repo(tmp_path / "repo")
    head = git(root, "rev-parse", "HEAD")
    place(root, f"experiments/2026/11/{ID}-real.md", text_of(ID).replace(COMMIT, head))
    for n, hostile in enumerate(HOSTILE_REVISIONS[:3]):
        exp_id = f"6749f3a0{n:08x}"
        text = text_of(exp_id).replace(f"base_commit: {COMMIT}", f"base_commit: '{hostile}'")
        place(root, f"experiments/2026/11/{exp_id}-hostile-commit.md", text)
    git(root, "add", "experiments")
    git(root, "commit", "-q", "-m", "experiments")
    trace = tmp_path / "git-trace.log"
    monkeypatch.setenv("GIT_TRACE", str(trace))
    store = Store(root)
    for hostile in HOSTILE_REVISIONS:
        for call in (
            lambda hostile=hostile: store.at(hostile),
            lambda hostile=hostile: store.changes(hostile),
            lambda hostile=hostile: store.history(ID, revision=hostile),
            lambda hostile=hostile: store.list_experiments(reachable_from=hostile),
            lambda hostile=hostile: store.list_experiments(base_commit=hostile),
        ):
            with pytest.raises(GitError), warnings.catch_warnings():
                warnings.simplefilter("ignore", InvalidExperimentWarning)
                call()
    problems = store.validate()
    assert {p.code for p in problems if p.severity == "error"} == {"bad-format"}
    for args in (
        ["validate"],
        ["list", "--base-commit", "--output=PWNED"],
        ["log", ID, "--rev", "-oPWNED"],
    ):
        kexp(root, *args, env={"GIT_TRACE": str(trace)})
    assert trace.exists()  # git did run, for the valid requests
    logged = trace.read_text(errors="replace")
    assert "PWNED" not in logged and "HEAD:experiments" not in logged
    assert not list(tmp_path.rglob("PWNED"))


# --- terminal output ------------------------------------------------------------------

#: Escape sequences that would clear the screen, set the window title, move the cursor,
#: overwrite text, ring the bell, or reverse the text's display order.
FORGERIES = {
    "change_summary": "\x1b[2J\x1b]0;pwned\x07Fake summary\u202e - x",
    "operator_sig": "op\x9b31m\x1b[8m",
    "dtype_sig": "bf16\x08\x08fp8",
    "env": "\rMI300X\x1b[1A",
    "author": "a\x1b]8;;https://evil.example\x07link",
    "tags": ["t\x1b[0m", "\u2066iso"],
    "detailed_description": "**Key insight**: \x1b[31mred\x07\r\nover\x00written",
    "raw_result": "ok\x1b[1A\x1b[2K\x1bc",
    "error_message": "E\x1bP+q\x1b\\\x7f",
}


def _terminal_output(args: list[str], cwd: Path) -> bytes:
    """What ``kexp ARGS`` writes to a terminal (a pseudo-terminal), colors off; long output
    goes through a pager that passes it on unchanged (as less -R would show it)."""
    env = {
        **os.environ,
        "KEXP_ROOT": str(cwd),
        "NO_COLOR": "1",
        "TERM": "xterm",
        "COLUMNS": "200",
        "KEXP_PAGER": "cat -u",
    }
    leader, follower = pty.openpty()
    process = subprocess.Popen(
        [sys.executable, "-m", "kexp", *args],
        cwd=cwd,
        env=env,
        stdin=follower,
        stdout=follower,
        stderr=follower,
        close_fds=True,
    )
    os.close(follower)
    chunks: list[bytes] = []
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        ready, _, _ = select.select([leader], [], [], 1.0)
        if not ready:
            if process.poll() is not None:
                break
            continue
        try:
            data = os.read(leader, 65536)
        except OSError:  # EIO: the command exited and closed the terminal
            break
        if not data:
            break
        chunks.append(data)
    os.close(leader)
    assert process.wait(timeout=30) in (0, 1), b"".join(chunks)
    # The terminal turns each newline into CR LF: that CR is the terminal's, not kexp's.
    return b"".join(chunks).replace(b"\r\n", b"\n")


def test_text_from_experiments_cannot_forge_terminal_output(tmp_path: Path) -> None:
    root = init_repo(tmp_path / "repo")
    (root / "experiments").mkdir()
    store = Store(root)
    parent = store.create_experiment(**experiment_fields(score=1.2))
    exp = store.create_experiment(
        **experiment_fields(score=0.5, is_buggy=True, pid=parent.id, **FORGERIES)
    )
    # An unknown field with a hostile name, so that validation quotes it.
    assert exp.path is not None
    exp.path.write_bytes(
        exp.path.read_bytes().replace(b"---\n\n", b'"\\e[31mx\\u202e": 1\n---\n\n', 1)
    )
    git(root, "add", "experiments")
    git(root, "commit", "-q", "-m", "hostile")
    commands = [
        ["show", exp.id],
        ["show", exp.id, "--field", "raw_result"],
        ["list"],
        ["list", "--fields", "id,author,tags,env,dtype_sig"],
        ["top", "--include-buggy"],
        ["lessons"],
        ["tree"],
        ["stats"],
        ["validate"],
        ["log", exp.id],
        ["export", "--format", "csv"],
    ]
    with ThreadPoolExecutor(max_workers=4) as pool:
        outputs = list(pool.map(lambda args: _terminal_output(args, root), commands))
    for args, output in zip(commands, outputs, strict=True):
        text = output.decode("utf-8")
        forged = [ch for ch in text if (ch < " " and ch not in "\n\t") or "\x7f" <= ch < "\xa0"]
        forged += [ch for ch in text if ch in "\u202e\u2066"]
        assert forged == [], (args, text)
    shown = outputs[0].decode()
    assert "\\x1b[2J\\x1b]0;pwned\\x07Fake summary\\u202e - x" in shown
    assert "\\x1b[31mred\\x07\\x0d" in shown
    assert "Fake summary" in outputs[2].decode()  # the listing shows it too, defused


#: Bidirectional controls (and the line and paragraph separators) a terminal obeys.
_BIDI_AND_SEPARATORS = (
    "\u061c\u200e\u200f\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069\u2028\u2029"
)


def test_json_output_cannot_forge_terminal_output(tmp_path: Path) -> None:
    """Every --json output (and validate --format json) writes bidirectional controls
    and other control characters as JSON escapes: the same data, nothing raw."""
    root = init_repo(tmp_path / "repo")
    (root / "experiments").mkdir()
    store = Store(root)
    parent = store.create_experiment(**experiment_fields(score=1.2))
    hostile = {
        **FORGERIES,
        "change_summary": "Fake\u2067 summary\u202e - x\u061c",
        "profiling_info": "line\u2028separated\u2029paragraph",
    }
    exp = store.create_experiment(
        **experiment_fields(score=0.5, is_buggy=True, pid=parent.id, **hostile)
    )
    assert exp.path is not None
    exp.path.write_bytes(  # a hostile unknown field, which validation quotes
        exp.path.read_bytes().replace(b"---\n\n", b'"x\\u202e\\u2066y": 1\n---\n\n', 1)
    )
    git(root, "add", "experiments")
    git(root, "commit", "-q", "-m", "hostile")
    commands = [
        ["list", "--json"],
        ["show", exp.id, "--json"],
        ["top", "--include-buggy", "--json"],
        ["lessons", "--json"],
        ["log", exp.id, "--json"],
        ["validate", "--format", "json"],
    ]
    with ThreadPoolExecutor(max_workers=3) as pool:
        outputs = list(pool.map(lambda args: _terminal_output(args, root), commands))
    for args, output in zip(commands, outputs, strict=True):
        text = output.decode("utf-8")
        forged = [ch for ch in text if (ch < " " and ch not in "\n\t") or "\x7f" <= ch < "\xa0"]
        forged += [ch for ch in text if ch in _BIDI_AND_SEPARATORS]
        assert forged == [], (args, forged)
        assert json.loads(text) is not None, args  # still JSON, the escapes decoding to it
    shown = json.loads(outputs[1].decode())
    assert shown["change_summary"] == hostile["change_summary"]
    assert "\\u202e" in outputs[1].decode()
