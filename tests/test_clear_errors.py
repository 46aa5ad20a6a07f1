"""Failures a user can run into are one clear line that says what to do, never
"internal error": a lock folder kexp may not write, a full disk (and no temporary file
left behind), a database that is not what ``kexp import`` expects, filter values that
are not UTF-8.

The conditions are real: the lock folder's permissions are enforced by the kernel (for
root too, in a user namespace of its own), the full disk is a small tmpfs filled up (in
a mount namespace of its own) or, where none can be mounted, a file size limit
(RLIMIT_FSIZE), and every command is the real ``kexp`` in a subprocess.
"""

from __future__ import annotations

import json
import os
import resource
import shutil
import stat
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path

import pytest
from conftest import experiment_fields, git, run_kexp

from kexp import KexpError, Store, init_store

COMMIT = "3f2c9e1a7b8d4c6e5f0a1b2c3d4e5f6a7b8c9d0e"
ADD = [
    "add", "--summary", "Unrolled by 8 - +3%", "--score", "1.03", "--operator", "k.cu",
    "--dtype", "bf16", "--env", "MI300X", "--base-commit", COMMIT, "--author", "Ada",
    "--description", "**Key insight**: " + "unrolling hides latency. " * 40,
]  # fmt: skip


def plain_store(root: Path) -> Store:
    init_store(root)
    store = Store(root)
    store.create_experiment(**experiment_fields(base_commit=COMMIT, author="Ada"))
    return store


def assert_one_clear_line(stderr: str, *phrases: str) -> None:
    lines = [line for line in stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith("kexp: error: "), stderr
    assert "Traceback" not in stderr and "internal error" not in stderr, stderr
    for phrase in phrases:
        assert phrase in lines[0], (phrase, stderr)


def kexp(
    root: Path,
    *args: str | bytes,
    prefix: Sequence[str] = (),
    env: dict[str, str] | None = None,
    **kwargs: object,
) -> subprocess.CompletedProcess[str]:
    env = env or {**os.environ, "KEXP_ROOT": str(root)}
    return subprocess.run(
        [*prefix, sys.executable, "-m", "kexp", *args],
        cwd=root,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        **kwargs,  # type: ignore[call-overload]
    )


def temporary_files(root: Path) -> list[Path]:
    return [p for p in (root / "experiments").rglob("*") if p.name.endswith(".tmp")]


# --- no permission ---------------------------------------------------------------------


def _without_privileges() -> list[str]:
    """How to run a command that root's privileges do not help (a user namespace of its
    own: the kernel then enforces permission bits on root's files too)."""
    if os.geteuid() != 0:
        return []
    unshare = shutil.which("unshare")
    if unshare is None or subprocess.run([unshare, "-U", "true"]).returncode != 0:
        pytest.skip("running as root without user namespaces: permissions cannot bind")
    return [unshare, "-U"]


def test_a_lock_folder_kexp_may_not_write_is_a_clear_error(tmp_path: Path) -> None:
    root = tmp_path / "store"
    store = plain_store(root)
    (exp,) = store.list_experiments()
    assert exp.path is not None
    locks = store.cache_dir / "locks"
    locks.mkdir(exist_ok=True)  # creates may have made it (claim locks)
    locks.chmod(stat.S_IRUSR | stat.S_IXUSR | stat.S_IRGRP | stat.S_IXGRP)
    before = exp.path.read_bytes()
    try:
        prefix = _without_privileges()
        for args in (["update", exp.id, "--set", "score=2.0"], ["fmt"], ["rm", exp.id, "-y"]):
            result = kexp(root, *args, prefix=prefix)
            assert result.returncode == 2, result.stderr
            assert_one_clear_line(
                result.stderr,
                f"cannot create the lock file {locks}/",
                "Permission denied",
                f"kexp writes its locks in {locks} (check its owner and permissions",
            )
    finally:
        locks.chmod(0o755)
    assert exp.path.read_bytes() == before


# --- a full disk -------------------------------------------------------------------------


def _tmpfs_available() -> bool:
    unshare = shutil.which("unshare")
    if unshare is None:
        return False
    probe = subprocess.run(
        [unshare, "-rm", "sh", "-c", "mount -t tmpfs -o size=64k tmpfs /tmp"],
        capture_output=True,
    )
    return probe.returncode == 0


FULL_DISK_SCRIPT = """\
set -e
mount -t tmpfs -o size=256k tmpfs "$DISK"
cp -a "$SOURCE/." "$DISK/"
export KEXP_ROOT="$DISK"
cd "$DISK"
"$PYTHON" -m kexp list > /dev/null   # the cache is built while there is room
dd if=/dev/zero of="$DISK/filler" bs=4096 2> /dev/null || true   # the disk is full
set +e
"$PYTHON" -m kexp "$@" > "$OUT/stdout" 2> "$OUT/stderr"
echo $? > "$OUT/returncode"
"$PYTHON" -m kexp update "$ID" --set raw_result="$(printf 'longer %.0s' $(seq 200))" \
    > "$OUT/update.stdout" 2> "$OUT/update.stderr"
echo $? > "$OUT/update.returncode"
find "$DISK/experiments" -name '*.tmp' > "$OUT/leftovers"
find "$DISK/experiments" -name '*.md' ! -name README.md | sort > "$OUT/files"
cp "$DISK/$FILE" "$OUT/after.md"
"""


@pytest.mark.parametrize("disk", ["tmpfs", "file-size-limit"])
def test_a_full_disk_is_a_clear_error_and_leaves_no_temporary_file(
    tmp_path: Path, disk: str
) -> None:
    source = tmp_path / "store"
    store = plain_store(source)
    (exp,) = store.list_experiments()
    assert exp.path is not None
    before = exp.path.read_bytes()
    relative = exp.path.relative_to(source)
    if disk == "tmpfs":
        if not _tmpfs_available():
            pytest.skip("no mount namespace here to mount a small tmpfs in")
        mount_point, out = tmp_path / "disk", tmp_path / "out"
        mount_point.mkdir()
        out.mkdir()
        env = {
            **os.environ, "DISK": str(mount_point), "SOURCE": str(source), "OUT": str(out),
            "PYTHON": sys.executable, "ID": exp.id, "FILE": str(relative),
        }  # fmt: skip
        subprocess.run(
            ["unshare", "-rm", "sh", "-c", FULL_DISK_SCRIPT, "sh", *ADD],
            env=env,
            check=True,
            timeout=180,
        )
        results = [
            ((out / "returncode").read_text(), (out / "stderr").read_text()),
            ((out / "update.returncode").read_text(), (out / "update.stderr").read_text()),
        ]
        leftovers = (out / "leftovers").read_text().split()
        files = [Path(line).name for line in (out / "files").read_text().split()]
        after = (out / "after.md").read_bytes()
        hint = "free some space on that disk"
    else:
        Store(source).list_experiments()  # the cache is built while there is room

        def limited() -> None:  # files may grow to 300 bytes: writes past that fail
            resource.setrlimit(resource.RLIMIT_FSIZE, (300, 300))

        added = kexp(source, *ADD, preexec_fn=limited)
        updated = kexp(
            source, "update", exp.id, "--set", "raw_result=" + "longer " * 200,
            preexec_fn=limited,
        )  # fmt: skip
        results = [
            (str(added.returncode), added.stderr),
            (str(updated.returncode), updated.stderr),
        ]
        leftovers = [str(p) for p in temporary_files(source)]
        files = [p.name for p in sorted((source / "experiments").rglob("*-*.md"))]
        after = exp.path.read_bytes()
        hint = "the system refuses a file this large"
    for returncode, stderr in results:
        assert returncode.strip() == "2", stderr
        assert_one_clear_line(stderr, "cannot write", "nothing was changed", hint)
    assert leftovers == []
    assert files == [exp.path.name]  # nothing added
    assert after == before  # nothing changed


# --- kexp import of what is not the predecessor's database ---------------------------------


def legacy_record(exp_id: str, **overrides: object) -> dict[str, object]:
    record: dict[str, object] = {
        "id": exp_id, "pid": "", "score": 1.02, "raw_result": "r", "dtype_sig": "bf16",
        "env": "MI300X", "is_buggy": False, "error_message": "", "change_summary": "x - y",
        "detailed_description": "d", "code_change": "", "base_commit": COMMIT,
        "operator_sig": "k.cu", "profiling_info": "", "status": "done",
        "created_at": "2026-10-02T09:10:00.000007Z",
    }  # fmt: skip
    record.update(overrides)
    return record


@pytest.mark.parametrize(
    ("content", "phrases"),
    [
        (
            b'{"a": ' + b"[" * 100_000 + b"]" * 100_000 + b"}",
            ["the JSON is nested too deep to read"],
        ),
        (
            b'{"a1f0c3d2e4b50001": {"score": 1' + b"0" * 5000 + b"}}",
            ["not JSON kexp can read", "digits"],
        ),
        (b'{"a": "caf\xe9"}', ["is not UTF-8 text (byte 0xe9 at offset 10)", "re-save"]),
    ],
    ids=["nested-100000-deep", "5000-digit-integer", "not-utf8"],
)
def test_a_database_kexp_cannot_read_is_a_clear_error(
    tmp_path: Path, content: bytes, phrases: list[str]
) -> None:
    root = tmp_path / "store"
    init_store(root)
    database = tmp_path / "db.json"
    database.write_bytes(content)
    result = run_kexp("import", str(database), cwd=root, env={"KEXP_ROOT": str(root)})
    assert result.returncode == 2
    assert_one_clear_line(result.stderr, str(database), *phrases)


def test_records_a_file_cannot_hold_are_reported_and_the_rest_imported(tmp_path: Path) -> None:
    """A lone surrogate (a JSON escape of half a character) in a value or in a key, and
    a value nested 50 deep: those records are not imported, each with a note saying
    why and what to do; the good record is."""
    root = tmp_path / "store"
    init_store(root)
    deep: object = "bottom"
    for _ in range(50):
        deep = [deep]
    database = {
        "a1f0c3d2e4b50001": legacy_record("a1f0c3d2e4b50001"),
        "a1f0c3d2e4b50002": legacy_record("a1f0c3d2e4b50002", env="MI300X \ud83d"),
        "bad key \udcff": legacy_record("a1f0c3d2e4b50003"),
        "a1f0c3d2e4b50004": legacy_record("a1f0c3d2e4b50004", bench={"runs": deep}),
    }
    source = tmp_path / "db.json"
    source.write_text(json.dumps(database), encoding="utf-8")  # ASCII: \\ud83d escapes
    result = run_kexp(
        "import", str(source), "--no-check-commits", cwd=root, env={"KEXP_ROOT": str(root)}
    )
    output = result.stdout + result.stderr
    assert result.returncode == 1, output
    assert "Traceback" not in output and "a bug in kexp" not in output, output
    assert "a1f0c3d2e4b50002: env: holds a lone surrogate (\\ud83d" in output
    assert "bad key \\udcff: holds a lone surrogate (\\udcff" in output
    assert "a1f0c3d2e4b50004: legacy_extra.bench.runs: a value is nested more than 32" in output
    assert "imported 1, skipped 0 (already in the store), 3 needing attention" in output
    assert [e.id for e in Store(root).list_experiments()] == ["a1f0c3d2e4b50001"]


def test_a_json_document_nested_too_deep_for_kexp_add_is_a_clear_error(tmp_path: Path) -> None:
    root = tmp_path / "store"
    init_store(root)
    document = '{"raw_result": ' + "[" * 100_000 + "]" * 100_000 + "}"
    result = run_kexp("add", cwd=root, env={"KEXP_ROOT": str(root)}, input=document)
    assert result.returncode == 1
    assert "error[json-too-deep]" in result.stderr and "Traceback" not in result.stderr


# --- filter values that are not UTF-8 ---------------------------------------------------


def test_filter_values_that_are_not_utf8_are_a_clear_error(tmp_path: Path) -> None:
    root = tmp_path / "store"
    store = plain_store(root)
    for command, option in [
        ("list", "--operator"),
        ("list", "--env"),
        ("top", "--dtype"),
        ("export", "--operator"),
    ]:
        result = kexp(root, command, option, b"caf\xe9")
        assert result.returncode == 2, result.stderr
        assert_one_clear_line(result.stderr, "filter b'caf\\xe9' is not valid UTF-8 text")
    for name in ("operator", "env", "dtype", "text"):
        with pytest.raises(KexpError, match="not valid UTF-8 text"):
            store.list_experiments(**{name: "caf\udce9"})
        with pytest.raises(KexpError, match="not valid UTF-8 text"):
            store.top_experiments(**{name: "\ud800"})
    with pytest.raises(KexpError, match="not valid UTF-8 text"):
        store.list_experiments(tags=["ok", "\udcff"])


def test_a_diff_of_a_file_in_another_encoding_is_a_clear_error_and_its_way_out_works(
    tmp_path: Path,
) -> None:
    """A kernel source in Latin-1 (a comment with an accent): ``--diff-from-git`` says
    what to run instead, records nothing; what it says to run records the experiment."""
    root = tmp_path / "store"
    init_store(root)
    for args in (["init", "-q"], ["config", "user.name", "r"], ["config", "user.email", "r@x"]):
        subprocess.run(["git", *args], cwd=root, check=True)
    (root / "k.cu").write_bytes(b"int x; // caf\xe9\n")
    subprocess.run(["git", "add", "-A"], cwd=root, check=True)
    subprocess.run(["git", "commit", "-qm", "k"], cwd=root, check=True)
    (root / "k.cu").write_bytes(b"int y; // caf\xe9 encore\n")
    add = ["add", "--summary", "y - x", "--score", "1.0", "--operator", "k.cu: k",
           "--dtype", "fp32", "--env", "H100", "--base-commit", "HEAD"]  # fmt: skip
    result = kexp(root, *add, "--diff-from-git")
    assert result.returncode == 2, result.stderr
    assert_one_clear_line(result.stderr, "not UTF-8 text (the byte 0xe9 in k.cu)")
    assert Store(root).paths() == []
    command = result.stderr.split("save it as UTF-8 (", 1)[1].split(") and give", 1)[0]
    subprocess.run(command, shell=True, cwd=root, check=True)
    result = kexp(root, *add, "--diff-file", "change.diff")
    assert result.returncode == 0, result.stderr
    (exp,) = Store(root).list_experiments()
    assert "caf\u00e9 encore" in exp.code_change and "experiments/" not in exp.code_change


@pytest.mark.parametrize(
    ("field", "value", "said"),
    [
        ("code_change", "+int y; // caf\udce9\n", "code_change is not UTF-8 text (the byte 0xe9"),
        ("change_summary", "caf\udce9 - x", "change_summary is not UTF-8 text (the byte 0xe9"),
        ("tags", ["ok", "\ud83d"], "tags is not UTF-8 text (a lone surrogate (\\ud83d)"),
        ("extra_fields", {"note": "\udcff"}, "extra_fields is not UTF-8 text (the byte 0xff"),
    ],
)
def test_a_value_that_is_not_text_is_refused_before_anything_is_written(
    tmp_path: Path, field: str, value: object, said: str
) -> None:
    """The library (an agent's script) gives a string decoded with ``surrogateescape``:
    one clear error, no file written, none changed; never a ``UnicodeEncodeError``."""
    root = tmp_path / "store"
    store = plain_store(root)
    (first,) = store.paths()
    before = first.read_bytes()
    with pytest.raises(KexpError) as raised:
        store.create_experiment(**experiment_fields(base_commit=COMMIT, **{field: value}))
    assert said in str(raised.value) and "\n" not in str(raised.value)
    assert store.paths() == [first]
    if field != "extra_fields":  # (not a field an update sets)
        (exp,) = store.list_experiments()
        with pytest.raises(KexpError, match="is not UTF-8 text"):
            store.update_experiment(exp.id, **{field: value})
    assert first.read_bytes() == before


# --- git refuses a repository owned by another user ----------------------------------------


def test_a_repository_owned_by_another_user_says_what_git_said_and_how_to_trust_it(
    repo: Path, store: Store
) -> None:
    """git's safe.directory refusal reaches the user as git's words and the command that
    fixes it; never "has no commits yet", never an exit without a word (kexp used to
    write to git's helper process after git had refused and died: a broken pipe)."""
    exp = store.create_experiment(**experiment_fields())
    git_env: dict[str, str] = {}
    if os.geteuid() == 0:  # really owned by another user
        for folder, dirs, files in os.walk(repo):
            for name in [folder, *(os.path.join(folder, n) for n in dirs + files)]:
                os.lchown(name, 65534, 65534)
    else:  # git's own switch: it refuses as for a repository of another user
        git_env["GIT_TEST_ASSUME_DIFFERENT_OWNER"] = "1"
    from_git = [a for a in ADD if a not in ("--base-commit", COMMIT, "--author", "Ada")]
    commands = [from_git] * 8 + [  # the broken pipe came in about a third of the runs
        ["validate"],
        ["list", "--rev", "HEAD"],
        ["review", "main"],
        ["log", exp.id],
        ["list", "--reachable-from", "HEAD"],
    ]
    for args in commands:
        result = kexp(repo, *args, env={**os.environ, "KEXP_ROOT": str(repo), **git_env})
        output = result.stdout + result.stderr
        assert result.returncode == 2, (args, output)
        assert "no commits yet" not in output, (args, output)
        assert_one_clear_line(
            result.stderr,
            f"git refuses to work in {repo}: 'detected dubious ownership'",
            f"run: git config --global --add safe.directory {repo}",
        )


def test_a_first_record_before_the_first_commit_says_to_commit_first(tmp_path: Path) -> None:
    """A newcomer runs ``git init`` and ``kexp init``, then records before committing
    anything: one line says the repository has no commits yet and what to do (commit the
    code, or give --base-commit), not a warning and then an invalid file whose hint
    (``git rev-parse HEAD``) fails there too; nothing is written. The advice, taken,
    records it."""
    subprocess.run(["git", "init", "-q", str(tmp_path)], check=True)
    init_store(tmp_path)
    from_git = [a for a in ADD if a not in ("--base-commit", COMMIT)]
    result = kexp(tmp_path, *from_git)
    assert result.returncode == 2, result.stderr
    assert_one_clear_line(result.stderr, "has no commits yet", "commit", "--base-commit")
    assert list((tmp_path / "experiments").rglob("*.md")) == [
        tmp_path / "experiments" / "README.md"
    ]
    git(tmp_path, "add", "-A")
    git(tmp_path, "commit", "-q", "-m", "the kernel")
    assert kexp(tmp_path, *from_git).returncode == 0


@pytest.mark.parametrize("output_format", ["legacy", "json", "csv"])
def test_an_export_into_a_folder_that_does_not_exist_names_the_file_and_the_folder(
    tmp_path: Path, output_format: str
) -> None:
    """``kexp export -o missing/db.json``: one line naming the file asked for (not the
    sidecar beside it) and the missing folder, and what to do; nothing written."""
    plain_store(tmp_path / "store")
    target = tmp_path / "missing" / "db.json"
    done = run_kexp("export", "--format", output_format, "-o", str(target),
                    cwd=tmp_path / "store")  # fmt: skip
    assert done.returncode != 0
    assert_one_clear_line(done.stderr, f"cannot write {target}", f"{target.parent} does not exist")
    assert not target.parent.exists()
