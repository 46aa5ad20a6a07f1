"""The fan-out layout (``experiments/<YYYY>/<MM>/<xx>/``) and ``kexp migrate-layout``.

Real git repositories (a bare one on disk as the remote), real files; the truth is read
from the files and from git (``git ls-files``, ``git ls-tree``), never from kexp.
"""

from __future__ import annotations

import collections
import datetime as dt
import json
import os
import random
import re
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from conftest import experiment_fields, git, init_repo
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kexp import ExperimentNotFoundError, KernelExperiment, KexpError, Store
from kexp.cli.main import main
from kexp.format.fileformat import serialize
from kexp.output.legacyimport import import_legacy
from kexp.storage.layout import FANOUT_DIGITS, folder_parts
from kexp.storage.migration import migrate_layout
from kexp.storage.store import slugify

FORGE_LIMIT = 1000
_NAME = re.compile(r"([0-9a-f]{16})-[a-z0-9-]*\.md")
COMMIT = "9c1d2e3f4a5b6c7d8e9f0a1b2c3d4e5f6a7b8c9d"


def experiment(
    exp_id: str, created_at: str = "2026-11-02T10:00:00Z", **fields: Any
) -> KernelExperiment:
    return KernelExperiment(
        **experiment_fields(id=exp_id, created_at=created_at, base_commit=COMMIT, **fields)
    )


def place(root: Path, folder: str, exp: KernelExperiment) -> Path:
    """Write ``exp``'s file into ``experiments/<folder>/`` by hand (as an earlier kexp
    or a person did)."""
    path = root / "experiments" / folder / f"{exp.id}-{slugify(exp.change_summary)}.md"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(serialize(exp), encoding="utf-8")
    return path


def files_on_disk(root: Path) -> dict[str, bytes]:
    """Path below experiments/ → bytes, of every experiment file."""
    top = root / "experiments"
    return {
        p.relative_to(top).as_posix(): p.read_bytes()
        for p in top.rglob("*.md")
        if _NAME.fullmatch(p.name)
    }


def by_id(files: dict[str, bytes]) -> dict[str, list[bytes]]:
    found: dict[str, list[bytes]] = collections.defaultdict(list)
    for path, data in files.items():
        match = _NAME.fullmatch(path.rsplit("/", 1)[-1])
        assert match
        found[match.group(1)].append(data)
    return dict(found)


def is_fanned_out(path: str) -> bool:
    """Whether a path below experiments/ is ``YYYY/MM/xx/<id>-<slug>.md`` with the right
    ``xx``."""
    parts = path.split("/")
    match = _NAME.fullmatch(parts[-1])
    return (
        len(parts) == 4
        and bool(re.fullmatch(r"[0-9]{4}", parts[0]))
        and bool(re.fullmatch(r"0[1-9]|1[0-2]", parts[1]))
        and match is not None
        and parts[2] == match.group(1)[-FANOUT_DIGITS:]
    )


def index_blobs(root: Path) -> dict[str, str]:
    """Path below experiments/ → blob, of the index's experiment entries (git's view)."""
    found = {}
    for line in git(root, "ls-files", "-s", "--", "experiments").splitlines():
        meta, path = line.split("\t")
        if _NAME.fullmatch(path.rsplit("/", 1)[-1]):
            found[path.removeprefix("experiments/")] = meta.split()[1]
    return found


def blob_of(data: bytes) -> str:
    import hashlib

    return hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest()


def random_id(rng: random.Random) -> str:
    return f"{rng.getrandbits(64):016x}"


# --- where new files go ---------------------------------------------------------------


def test_a_burst_of_5000_imported_records_of_one_day_fills_no_folder_past_1000(
    store: Store,
) -> None:
    """5,000 of the predecessor's records made on one day (its ids are random): the
    import spreads them over the month's 256 folders."""
    rng = random.Random(27)
    db = {}
    for n in range(5000):
        exp_id = random_id(rng)
        record = {
            **experiment(exp_id).to_legacy_dict(),
            "created_at": f"2026-10-02T{n // 3600:02d}:{n // 60 % 60:02d}:{n % 60:02d}.{n:06d}Z",
            "change_summary": f"Burst {n} - +1%",
        }
        db[exp_id] = record
    report = import_legacy(db, store, check_commits=False)
    assert len(report.imported) == 5000
    files = files_on_disk(store.root)
    assert sorted(by_id(files)) == sorted(db)
    assert all(is_fanned_out(path) for path in files)
    per_folder = collections.Counter(path.rsplit("/", 1)[0] for path in files)
    assert max(per_folder.values()) <= FORGE_LIMIT
    assert set(per_folder) == {f"2026/10/{x:02x}" for x in range(256)}
    # What every folder lists, months and years included, stays within a forge's view.
    listed = [len(os.listdir(folder)) for folder, _, _ in os.walk(store.experiments_dir)]
    assert max(listed) <= FORGE_LIMIT


def test_a_million_experiments_a_year_fill_no_folder_past_1000() -> None:
    """1,000,000 ids as kexp makes them (the second, then random digits), spread over a
    year: the largest folder stays far below a forge's limit."""
    rng = random.Random(1_000_000)
    start = dt.datetime(2026, 1, 1, tzinfo=dt.timezone.utc).timestamp()
    per_folder: collections.Counter[tuple[str, str, str]] = collections.Counter()
    for _ in range(1_000_000):
        moment = start + rng.random() * 365 * 86400
        exp_id = f"{int(moment):08x}{rng.getrandbits(32):08x}"
        stamp = dt.datetime.fromtimestamp(moment, dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
        per_folder[folder_parts(exp_id, stamp, stamp)] += 1
    assert sum(per_folder.values()) == 1_000_000
    assert len(per_folder) == 12 * 256
    assert max(per_folder.values()) < 500  # mean 326; a binomial spread


def test_new_experiments_go_to_the_fanned_out_folder_and_never_move(store: Store) -> None:
    exp = store.create_experiment(**experiment_fields())
    assert exp.path is not None
    relative = exp.path.relative_to(store.experiments_dir).as_posix()
    assert is_fanned_out(relative)
    assert relative.startswith(exp.created_at[:7].replace("-", "/") + "/")
    store.update_experiment(exp.id, created_at="2025-01-01T00:00:00Z", score=1.2)
    assert store.get_experiment(exp.id).path == exp.path


# --- both layouts read as one ------------------------------------------------------------


def test_month_layout_fanned_out_layout_and_both_mixed_read_as_one_store(
    store: Store, tmp_path: Path
) -> None:
    old = [experiment(f"6a00000000000{n:03x}", score=1.0 + n / 100) for n in range(6)]
    for exp in old[:3]:
        place(store.root, "2026/11", exp)
    for exp in old[3:]:
        place(store.root, f"2026/11/{exp.id[-2:]}", exp)
    child = store.create_experiment(**experiment_fields(pid=old[0].id, score=1.5))
    ids = {e.id for e in old} | {child.id}
    assert {e.id for e in store.list_experiments()} == ids
    assert store.top_experiments(1)[0].id == child.id
    assert [p for p in store.validate() if p.severity == "error"] == []
    assert {e.id for e in store.children(old[0].id)} == {child.id}
    # An update of a month-layout file stays where it is.
    path = store.path_of(old[1].id)
    store.update_experiment(old[1].id, score=2.0)
    assert store.path_of(old[1].id) == path
    assert store.top_experiments(1)[0].id == old[1].id


# --- kexp migrate-layout -------------------------------------------------------------------


def old_store(root: Path, count: int = 6, seed: int = 1) -> list[KernelExperiment]:
    """``count`` experiments in month folders, committed."""
    rng = random.Random(seed)
    made = []
    for n in range(count):
        month = 10 + n % 2
        exp = experiment(
            random_id(rng),
            created_at=f"2026-{month:02d}-0{1 + n % 9}T10:00:00Z",
            change_summary=f"Step {n} - +{n}%",
            score=1.0 + n / 100,
        )
        place(root, f"2026/{month}", exp)
        made.append(exp)
    git(root, "add", "experiments")
    git(root, "commit", "-q", "-m", "experiments in the month layout")
    return made


def test_migrate_layout_moves_every_month_file_as_git_mv_and_log_follows(
    repo: Path, store: Store
) -> None:
    made = old_store(repo)
    before = files_on_disk(repo)
    git(repo, "commit", "-q", "--allow-empty", "-m", "nothing")
    store.update_experiment(made[0].id, score=1.5)
    git(repo, "commit", "-q", "-am", "a correction")
    before = files_on_disk(repo)
    head = git(repo, "rev-parse", "HEAD")

    dry = CliRunner().invoke(main, ["--root", str(repo), "migrate-layout", "--dry-run", "--json"])
    assert dry.exit_code == 0, dry.output
    planned = json.loads(dry.output)
    assert planned["dry_run"] and len(planned["moved"]) == len(made)
    assert files_on_disk(repo) == before
    assert git(repo, "status", "--porcelain") == ""

    done = CliRunner().invoke(main, ["--root", str(repo), "migrate-layout"])
    assert done.exit_code == 0, done.output
    assert f"moved {len(made)} experiment file(s)" in done.output
    after = files_on_disk(repo)
    assert by_id(after) == by_id(before)  # every file once, its bytes unchanged
    assert all(is_fanned_out(path) for path in after)
    assert {p["to"] for p in planned["moved"]} == {f"experiments/{p}" for p in after}
    # git sees renames only (what git mv stages), with the same blobs.
    status = git(repo, "status", "--porcelain").splitlines()
    assert len(status) == len(made) and all(line.startswith("R  ") for line in status)
    assert index_blobs(repo) == {path: blob_of(data) for path, data in after.items()}
    git(repo, "commit", "-q", "-m", "kexp migrate-layout")
    assert git(repo, "rev-parse", "HEAD~1") == head
    history = store.history(made[0].id)
    assert [h.action for h in history] == ["added", "modified", "renamed"]
    assert history[1].changes["score"] == (made[0].score, 1.5)
    assert is_fanned_out(history[-1].path.removeprefix("experiments/"))
    # Idempotent: nothing left to move.
    again = migrate_layout(store)
    assert again.moved == () and files_on_disk(repo) == after
    assert git(repo, "status", "--porcelain") == ""


def test_migrate_layout_outside_git_renames_the_files(tmp_path: Path) -> None:
    root = tmp_path / "plain"
    made = [experiment(f"6a0000000000a{n:03x}") for n in range(4)]
    for exp in made:
        place(root, "2026/11", exp)
    (root / "experiments" / "2026" / "11" / "notes.md").write_text("my notes\n")
    place(root, "mine", experiment("6a0000000000b000"))
    before = files_on_disk(root)
    result = Store(root)
    moved = migrate_layout(result)
    assert not moved.in_git and len(moved.moved) == 4
    after = files_on_disk(root)
    assert by_id(after) == by_id(before)
    assert sum(is_fanned_out(p) for p in after) == 4
    assert "mine/6a0000000000b000-unrolled-the-inner-loop-by-4-plus-1p90pct.md" in after
    assert (root / "experiments" / "2026" / "11" / "notes.md").read_text() == "my notes\n"


def test_migrate_layout_refuses_a_taken_name_and_moves_nothing(repo: Path, store: Store) -> None:
    made = old_store(repo, count=3)
    other = experiment(made[1].id, change_summary=made[1].change_summary, score=9.0)
    place(repo, f"2026/{made[1].created_at[5:7]}/{made[1].id[-2:]}", other)
    before = files_on_disk(repo)
    with pytest.raises(KexpError, match="moved nothing"):
        migrate_layout(store)
    assert files_on_disk(repo) == before
    result = CliRunner().invoke(main, ["--root", str(repo), "migrate-layout"])
    assert result.exit_code != 0
    assert "moved nothing" in result.output and "Traceback" not in result.output


def test_migrate_layout_refuses_an_unresolved_merge(repo: Path, store: Store) -> None:
    (made,) = old_store(repo, count=1)
    git(repo, "checkout", "-q", "-b", "other")
    store.update_experiment(made.id, score=2.0)
    git(repo, "commit", "-q", "-am", "other")
    git(repo, "checkout", "-q", "main")
    store.update_experiment(made.id, score=3.0)
    git(repo, "commit", "-q", "-am", "main")
    with pytest.raises(Exception):  # noqa: B017 - git says it conflicts
        git(repo, "merge", "-q", "other")
    before = files_on_disk(repo)
    with pytest.raises(KexpError, match="unresolved merge conflict"):
        migrate_layout(store)
    assert files_on_disk(repo) == before


@settings(
    max_examples=25,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(
    st.lists(
        st.tuples(
            st.sampled_from(["month", "fanned", "mine"]),
            st.sampled_from(["committed", "untracked", "staged"]),
            st.sampled_from(["none", "linked", "disk-moved", "gone"]),
        ),
        min_size=1,
        max_size=8,
    ),
    st.randoms(use_true_random=False),
)
def test_migrate_layout_converges_from_any_state_and_loses_nothing(
    tmp_path_factory: pytest.TempPathFactory, files: list[tuple[str, str, str]], rng: random.Random
) -> None:
    """Files in any layout, tracked or not, and a migration cut short anywhere (a file
    under both names, a file moved on disk but not in the index, one deleted by the
    user): running it brings every file of the month layout to its folder, every
    experiment once with its bytes, and git's index to the same moves."""
    root = init_repo(tmp_path_factory.mktemp("s") / "repo")
    expected: dict[str, bytes] = {}  # id -> bytes on disk at the end
    expected_index: dict[str, str] = {}  # id -> blob in the index at the end
    plans = []
    for n, (layout, tracking, crash) in enumerate(files):
        exp = experiment(f"{rng.getrandbits(56):014x}{n:02x}", change_summary=f"File {n} - x")
        folder = {"month": "2026/11", "fanned": f"2026/11/{exp.id[-2:]}", "mine": "mine"}[layout]
        path = place(root, folder, exp)
        plans.append((exp, layout, tracking, crash, path))
    for _, _, tracking, _, path in plans:
        if tracking in ("committed", "staged"):
            git(root, "add", str(path))
    git(root, "commit", "-q", "--allow-empty", "-m", "some committed")
    for exp, _, tracking, _, path in plans:
        if tracking == "staged":  # staged changes, not committed
            path.write_text(
                serialize(experiment(exp.id, change_summary=exp.change_summary, score=3.0))
            )
            git(root, "add", str(path))
    for exp, layout, tracking, crash, path in plans:
        target = root / "experiments" / "2026" / "11" / exp.id[-2:] / path.name
        if layout == "month" and crash == "linked":  # cut short after the link
            target.parent.mkdir(exist_ok=True)
            os.link(path, target)
        elif layout == "month" and crash == "disk-moved":  # before the index moved
            target.parent.mkdir(exist_ok=True)
            os.rename(path, target)
        elif crash == "gone" and tracking != "untracked":  # deleted by its user
            path.unlink()
        data = None
        for candidate in (path, target):
            if candidate.exists():
                data = candidate.read_bytes()
        if data is not None:
            expected[exp.id] = data
        if tracking != "untracked":
            blob = git(root, "ls-files", "-s", "--", str(path.relative_to(root))).split()[1]
            expected_index[exp.id] = blob

    migrate_layout(Store(root))

    after = files_on_disk(root)
    assert {k: v[0] for k, v in by_id(after).items()} == expected
    assert all(len(v) == 1 for v in by_id(after).values())
    for path in after:
        assert not re.fullmatch(r"2026/11/[^/]+\.md", path)  # none left in the month folder
    index = index_blobs(root)
    assert {_NAME.fullmatch(p.rsplit("/", 1)[-1]).group(1): b for p, b in index.items()} == (  # type: ignore[union-attr]
        expected_index
    )
    for path in index:
        assert not re.fullmatch(r"2026/11/[^/]+\.md", path)
    assert migrate_layout(Store(root)).moved == ()


def test_an_update_racing_with_a_move_writes_nothing(
    store: Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An update that read the file before it moved does not bring it back at its old
    name (which would leave the experiment twice)."""
    (made,) = old_store(store.root, count=1)
    old_path = store.path_of(made.id)
    import kexp.storage.store as store_module

    render = store_module.render_update

    def moving(*args: Any, **kwargs: Any) -> str:
        migrate_layout(store)  # between the update's read and its write
        return render(*args, **kwargs)

    monkeypatch.setattr(store_module, "render_update", moving)
    with pytest.raises(ExperimentNotFoundError, match="moved or deleted meanwhile"):
        store.update_experiment(made.id, score=4.0)
    assert not old_path.exists()
    assert [e.score for e in store.list_experiments()] == [made.score]


# --- sync and merges across layouts ----------------------------------------------------------


def make_remote(tmp_path: Path) -> tuple[Path, list[KernelExperiment]]:
    """A bare repository whose main holds a store in the month layout."""
    seed = init_repo(tmp_path / "seed")
    made = old_store(seed, count=8)
    remote = tmp_path / "remote.git"
    git(tmp_path, "clone", "-q", "--bare", str(seed), str(remote))
    return remote, made


def clone(remote: Path, folder: Path) -> Path:
    git(remote.parent, "clone", "-q", str(remote), str(folder))
    git(folder, "config", "user.name", f"Agent {folder.name}")
    git(folder, "config", "user.email", f"{folder.name}@example.com")
    git(folder, "config", "commit.gpgsign", "false")
    return folder


def tree_ids(remote: Path, branch: str = "main") -> dict[str, list[str]]:
    """id → the paths holding it in the branch's tree (read by git)."""
    found: dict[str, list[str]] = collections.defaultdict(list)
    listing = git(remote, "ls-tree", "-r", "--name-only", branch, "--", "experiments")
    for line in listing.splitlines():
        match = _NAME.fullmatch(line.rsplit("/", 1)[-1])
        if match:
            found[match.group(1)].append(line)
    return dict(found)


def test_sync_and_merge_of_branches_in_different_layouts_lose_nothing(tmp_path: Path) -> None:
    """Clone A migrates and syncs; clone B, still in the month layout, corrects an
    experiment A moved, adds one by hand in the month layout and one with kexp, and
    syncs: the merge is clean, every experiment is on the remote once, B's correction
    in the moved file; A's next sync brings it all."""
    remote, made = make_remote(tmp_path)
    a = clone(remote, tmp_path / "a")
    b = clone(remote, tmp_path / "b")

    assert len(Store(a).list_experiments()) == len(made)
    migrate_layout(Store(a))
    kexp_sync(a)
    assert all(
        is_fanned_out(p.removeprefix("experiments/"))
        for paths in tree_ids(remote).values()
        for p in paths
    )

    corrected = Store(b).update_experiment(made[2].id, score=7.5)
    by_hand = experiment("6a0000000000c001", change_summary="By hand - +1%")
    place(b, "2026/11", by_hand)
    recorded = Store(b).create_experiment(**experiment_fields(change_summary="New - +2%"))
    kexp_sync(b)

    on_remote = tree_ids(remote)
    assert sorted(on_remote) == sorted({e.id for e in made} | {by_hand.id, recorded.id})
    assert all(len(paths) == 1 for paths in on_remote.values())
    moved_path = on_remote[made[2].id][0]
    assert is_fanned_out(moved_path.removeprefix("experiments/"))
    assert "score: 7.5" in git(remote, "show", f"main:{moved_path}")
    assert corrected.score == 7.5

    kexp_sync(a)
    store_a = Store(a)
    assert {e.id for e in store_a.list_experiments()} == set(on_remote)
    assert store_a.get_experiment(made[2].id).score == 7.5
    assert [p for p in store_a.validate() if p.severity == "error"] == []
    # The last month-layout file moves too, and the remote takes it.
    assert [m[0] for m in migrate_layout(store_a).moved] == [on_remote[by_hand.id][0]]
    kexp_sync(a)
    assert all(
        is_fanned_out(paths[0].removeprefix("experiments/")) and len(paths) == 1
        for paths in tree_ids(remote).values()
    )


def test_sync_to_another_branch_publishes_the_moves_whole(tmp_path: Path) -> None:
    """``kexp sync --branch`` (the checkout untouched) after a migration: the agent's
    branch holds each experiment once, at its new path (not twice)."""
    remote, made = make_remote(tmp_path)
    a = clone(remote, tmp_path / "a")
    git(a, "push", "-q", "origin", "main:kexp/a")
    migrate_layout(Store(a))
    result = CliRunner().invoke(main, ["--root", str(a), "sync", "--branch", "kexp/a"])
    assert result.exit_code == 0, result.output
    on_branch = tree_ids(remote, "kexp/a")
    assert sorted(on_branch) == sorted(e.id for e in made)
    assert all(
        len(paths) == 1 and is_fanned_out(paths[0].removeprefix("experiments/"))
        for paths in on_branch.values()
    )


def kexp_sync(root: Path) -> None:
    result = CliRunner().invoke(main, ["--root", str(root), "sync"])
    assert result.exit_code == 0, result.output


@pytest.mark.parametrize("committed", [True, False])
def test_refs_in_the_month_layout_and_a_migrated_tree_read_as_one_store(
    repo: Path, store: Store, committed: bool
) -> None:
    """A branch still in the month layout (an agent that never migrated) and a migrated
    working tree (the moves committed, or only staged), read across refs (issue 24's one
    read path): each experiment once, matched by id whatever its path; a move is no
    change (the same content in both is one version), so the branch's correction is the
    newest version (it was taken for a divergence, and lost to the moved file)."""
    made = old_store(repo)
    # The agent corrects one experiment on its branch, in the month layout.
    git(repo, "checkout", "-q", "-b", "agent")
    Store(repo).update_experiment(made[2].id, score=3.0)
    git(repo, "commit", "-q", "-am", "a correction in the month layout")
    git(repo, "checkout", "-q", "-")
    migrate_layout(store)
    if committed:
        git(repo, "commit", "-q", "-m", "kexp migrate-layout")
    assert all(is_fanned_out(path) for path in files_on_disk(repo))
    listing = git(repo, "ls-tree", "-r", "--name-only", "agent", "--", "experiments")
    on_branch = [p.removeprefix("experiments/") for p in listing.splitlines()]
    assert not any(is_fanned_out(p) for p in on_branch if p != "README.md")

    across = Store(repo, refs=["agent"])
    listed = across.list_experiments()
    assert sorted(e.id for e in listed) == sorted(e.id for e in made)
    assert across.top_experiments(1)[0].id == made[2].id
    assert across.get_experiment(made[2].id).score == 3.0
    for exp in listed:  # the same content at another path is no other version
        assert exp.where is not None
        assert exp.where.other_versions == (() if exp.id != made[2].id else ("local",))
    assert Store(repo).get_experiment(made[2].id).score == made[2].score
