"""The store and the Python API, in real git repositories in temporary folders."""

from __future__ import annotations

import dataclasses
import datetime as dt
import difflib
import re
import time
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from conftest import edit_in_place, experiment_fields, git

import kexp
from kexp import (
    AmbiguousIdError,
    DeleteRefusedError,
    ExperimentNotFoundError,
    InvalidExperimentWarning,
    InvalidIdError,
    KernelExperiment,
    KexpError,
    Settings,
    Store,
    StoreNotFoundError,
    ValidationError,
    find_root,
)
from kexp.core.errors import StaleMeasurementWarning
from kexp.storage.cache import RACY_NS
from kexp.storage.store import slugify

MakeExperiment = Callable[..., KernelExperiment]

ID_RE = re.compile(r"[0-9a-f]{16}")
#: The predecessor's created_at: UTC, with microseconds.
CREATED_AT_RE = re.compile(r"\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{6}Z")
BAD_IDS = ["../../etc", "zzzz", "../../../etc/passwd", "abcd/../../x", "", " ", "abc", "-abcd"]


def snapshot(folder: Path, *, skip: tuple[str, ...] = ()) -> dict[str, bytes]:
    """Every file under ``folder`` (hidden ones included) with its bytes."""
    found: dict[str, bytes] = {}
    for path in sorted(folder.rglob("*")):
        relative = path.relative_to(folder)
        if relative.parts[0] in skip or not path.is_file():
            continue
        found[str(relative)] = path.read_bytes()
    return found


def leftover_temporaries(root: Path) -> list[Path]:
    return [p for p in root.rglob("*") if p.name.endswith(".tmp")]


def line_changes(before: str, after: str) -> tuple[list[str], list[str]]:
    """The removed and the added lines between two texts."""
    diff = list(difflib.ndiff(before.splitlines(), after.splitlines()))
    removed = [line[2:] for line in diff if line.startswith("- ")]
    added = [line[2:] for line in diff if line.startswith("+ ")]
    return removed, added


def ids_of(experiments: list[KernelExperiment]) -> list[str]:
    return [e.id for e in experiments]


# --- discovery ---------------------------------------------------------------------------


def test_kexp_root_names_the_default_store(
    repo: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, make_experiment: MakeExperiment
) -> None:
    exp = make_experiment()
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)
    monkeypatch.setenv("KEXP_ROOT", str(repo))
    assert find_root() == repo.resolve()
    assert ids_of(kexp.list_experiments()) == [exp.id]
    assert kexp.get_experiment(exp.id[:6]).id == exp.id


def test_kexp_root_wins_over_the_working_directory(
    repo: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    other = tmp_path / "other"
    (other / "experiments").mkdir(parents=True)
    monkeypatch.chdir(other)
    monkeypatch.setenv("KEXP_ROOT", str(repo))
    assert find_root() == repo.resolve()


def test_kexp_root_without_a_store_says_how_to_create_one(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("KEXP_ROOT", str(tmp_path / "nothing-here"))
    with pytest.raises(StoreNotFoundError, match="kexp init"):
        find_root()


def test_nearest_ancestor_holding_experiments_from_a_nested_folder(
    repo: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    nested = repo / "csrc" / "kernels" / "deep"
    nested.mkdir(parents=True)
    monkeypatch.chdir(nested)
    assert find_root() == repo.resolve()
    created = kexp.create_experiment(**experiment_fields())
    assert created.path is not None
    assert created.path.is_relative_to(repo.resolve() / "experiments")
    assert ids_of(kexp.list_experiments()) == [created.id]


def test_the_nearest_store_wins_over_one_further_up(
    repo: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    inner = repo / "sub" / "project"
    (inner / "experiments").mkdir(parents=True)
    (inner / "src").mkdir()
    monkeypatch.chdir(inner / "src")
    assert find_root() == inner.resolve()


def test_store_found_from_inside_experiments(
    repo: Path, monkeypatch: pytest.MonkeyPatch, make_experiment: MakeExperiment
) -> None:
    exp = make_experiment()
    assert exp.path is not None
    monkeypatch.chdir(exp.path.parent)
    assert find_root() == repo.resolve()


def test_missing_store_is_a_clear_error(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    lonely = tmp_path / "no" / "store" / "here"
    lonely.mkdir(parents=True)
    monkeypatch.chdir(lonely)
    with pytest.raises(StoreNotFoundError) as caught:
        find_root()
    assert "kexp init" in str(caught.value)
    assert str(lonely.resolve()) in str(caught.value)
    with pytest.raises(StoreNotFoundError, match="kexp init"):
        kexp.list_experiments()
    with pytest.raises(StoreNotFoundError, match="kexp init"):
        Store(lonely)


# --- create --------------------------------------------------------------------------------


def test_create_fills_id_time_path_commit_and_author(repo: Path, store: Store) -> None:
    before = int(time.time())
    exp = store.create_experiment(**experiment_fields())
    after = int(time.time())

    assert ID_RE.fullmatch(exp.id)
    assert before <= int(exp.id[:8], 16) <= after
    assert CREATED_AT_RE.fullmatch(exp.created_at)
    created = dt.datetime.strptime(exp.created_at, "%Y-%m-%dT%H:%M:%S.%fZ")
    assert before - 1 <= created.replace(tzinfo=dt.timezone.utc).timestamp() <= after + 1

    expected = (
        repo.resolve()
        / "experiments"
        / exp.created_at[:4]
        / exp.created_at[5:7]
        / exp.id[-2:]
        / f"{exp.id}-unrolled-the-inner-loop-by-4-plus-1p90pct.md"
    )
    assert exp.path == expected
    assert expected.is_file()
    assert exp.base_commit == git(repo, "rev-parse", "HEAD")
    assert len(exp.base_commit) == 40
    assert exp.author == "Test Engineer"

    text = expected.read_text(encoding="utf-8")
    assert f"id: {exp.id}\n" in text
    assert f"base_commit: {exp.base_commit}\n" in text
    assert store.get_experiment(exp.id) == exp


def test_ids_sort_by_creation_time(store: Store) -> None:
    first = store.create_experiment(**experiment_fields())
    time.sleep(1.05)
    second = store.create_experiment(**experiment_fields())
    assert first.id < second.id


@pytest.mark.parametrize(
    ("summary", "slug"),
    [
        ("Unrolled the inner loop by 4 - +1.90%", "unrolled-the-inner-loop-by-4-plus-1p90pct"),
        ("  LDS   double buffering -- OK!  ", "lds-double-buffering-ok"),
        (
            "Vectorized key store with 16-byte writes - +1.12%",
            "vectorized-key-store-with-16-byte-plus-1p12pct",
        ),
        ("ÄÖÜ ünïcode ✓ - ok", "n-code-ok"),
        # The sign and the % kept (the trial's "-7%" read "7", as a speedup):
        (
            "num_stages=4 software pipelining - -7% (regression)",
            "num-stages-4-software-pipelining-minus-7pct",
        ),
        ("Tile - −3.5 %", "tile-minus-3p5pct"),
        ("Cut registers by 25% - 12% faster", "cut-registers-by-25pct-12pct-faster"),
        ("Widen to 128-bit loads - +3%", "widen-to-128-bit-loads-plus-3pct"),
        # Too long: cut between words, the result kept (a cut "+15%" ended "-1", read
        # as another figure or a collision's suffix).
        (
            "Vectorize loads to 128-bit with tl.multiple_of - +15%",
            "vectorize-loads-to-128-bit-with-tl-plus-15pct",
        ),
        (
            "Fused unroll + vectorized store into cache kernel - -0.63% (interference)",
            "fused-unroll-vectorized-store-into-minus-0p63pct",
        ),
        ("✓✓✓", "experiment"),
        ("../../etc/passwd", "etc-passwd"),
    ],
)
def test_slug_of_the_change_summary(store: Store, summary: str, slug: str) -> None:
    assert slugify(summary) == slug
    exp = store.create_experiment(**experiment_fields(change_summary=summary))
    assert exp.path is not None
    assert exp.path.name == f"{exp.id}-{slug}.md"
    assert exp.path.parent.parent.parent.parent == store.experiments_dir


@pytest.mark.parametrize(
    "summary",
    [
        "x" * 80,
        "a-" * 40,
        "Tiled the softmax reduction across 4 waves with LDS staging - +3.1% on long seqs",
    ],
)
def test_slugs_are_short_and_clean(summary: str) -> None:
    slug = slugify(summary)
    assert re.fullmatch(r"[a-z0-9]+(-[a-z0-9]+)*", slug)
    assert len(slug) <= 48


def test_explicit_short_base_commit_is_stored_as_the_full_hash(repo: Path, store: Store) -> None:
    first = git(repo, "rev-parse", "HEAD")
    git(repo, "commit", "-q", "--allow-empty", "-m", "second")
    exp = store.create_experiment(**experiment_fields(base_commit=first[:8]))
    assert exp.base_commit == first
    assert store.get_experiment(exp.id).base_commit == first


def test_explicit_id_is_kept(store: Store) -> None:
    exp = store.create_experiment(**experiment_fields(id="6749f3a0c2d41e7b"))
    assert exp.id == "6749f3a0c2d41e7b"
    assert exp.path is not None and exp.path.name.startswith("6749f3a0c2d41e7b-")


def test_explicit_id_already_used_is_refused(store: Store, make_experiment: MakeExperiment) -> None:
    existing = make_experiment()
    before = snapshot(store.experiments_dir)
    with pytest.raises(KexpError, match=existing.id):
        store.create_experiment(**experiment_fields(id=existing.id, change_summary="Other - x"))
    assert snapshot(store.experiments_dir) == before


@pytest.mark.parametrize("bad_id", ["../../etc/passwd", "ZZZZ", "6749F3A0C2D41E7B", "6749f3a0"])
def test_explicit_invalid_id_is_refused(store: Store, bad_id: str) -> None:
    with pytest.raises(InvalidIdError):
        store.create_experiment(**experiment_fields(id=bad_id))
    assert snapshot(store.experiments_dir) == {}


@pytest.mark.parametrize(
    "overrides",
    [
        {"score": -1.0},
        {"score": float("nan")},
        {"status": "finished"},
        {"change_summary": "two\nlines"},
        {"change_summary": "x" * 81},
        {"is_buggy": True, "error_message": ""},
        {"pid": "0123456789abcdef"},
        {"combines": ["0123456789abcdef"]},
    ],
    ids=lambda o: ",".join(o),
)
def test_invalid_experiment_is_not_written(
    repo: Path, store: Store, make_experiment: MakeExperiment, overrides: dict[str, object]
) -> None:
    make_experiment()
    before = snapshot(repo, skip=(".git",))
    with pytest.raises(ValidationError) as caught:
        store.create_experiment(**experiment_fields(**overrides))
    assert caught.value.problems
    assert snapshot(repo, skip=(".git",)) == before
    assert leftover_temporaries(repo) == []


def test_create_refuses_unknown_fields(store: Store) -> None:
    with pytest.raises(KexpError, match="scroe"):
        store.create_experiment(**experiment_fields(scroe=1.5))
    with pytest.raises(KexpError, match="scroe"):
        store.create_experiment(KernelExperiment(**experiment_fields()), scroe=1.5)
    assert store.paths() == []


def test_create_from_a_dict_with_derived_values(store: Store) -> None:
    first = store.create_experiment(**experiment_fields())
    data = first.to_dict(include_derived=True)
    data.update(id="", created_at="")
    second = store.create_experiment(**data)
    assert second.id != first.id
    assert second.change_summary == first.change_summary


def test_create_from_a_kernel_experiment_object(store: Store) -> None:
    draft = KernelExperiment(**experiment_fields())
    exp = store.create_experiment(draft)
    assert exp.id == draft.id and exp.created_at == draft.created_at  # made when built
    assert (draft.path, draft.base_commit) == (None, "")  # the caller's object is not modified
    assert store.get_experiment(exp.id).change_summary == draft.change_summary


# --- get -------------------------------------------------------------------------------------


def test_get_by_full_id_and_by_unique_prefix(store: Store, make_experiment: MakeExperiment) -> None:
    exp = make_experiment(id="6749f3a0c2d41e7b")
    make_experiment(id="5749f3a0c2d41e7b")
    for key in ("6749f3a0c2d41e7b", "6749f3a0c2d4", "6749", "6749F3A0"):
        found = store.get_experiment(key)
        assert found.id == exp.id
        assert found.path == exp.path
    assert store.resolve_id("5749") == "5749f3a0c2d41e7b"


def test_short_prefix_is_refused(store: Store, make_experiment: MakeExperiment) -> None:
    exp = make_experiment()
    with pytest.raises(InvalidIdError, match="at least 4"):
        store.get_experiment(exp.id[:3])


def test_ambiguous_prefix_lists_both_ids(store: Store, make_experiment: MakeExperiment) -> None:
    one = make_experiment(id="6749f3a000000001")
    two = make_experiment(id="6749f3a000000002")
    for prefix in ("6749", "6749f3a0", "6749f3a00000000"):
        with pytest.raises(AmbiguousIdError) as caught:
            store.get_experiment(prefix)
        assert one.id in str(caught.value) and two.id in str(caught.value)
        assert caught.value.candidates == [one.id, two.id]
    assert store.get_experiment("6749f3a000000002").id == two.id


def test_unknown_id_is_not_found(store: Store, make_experiment: MakeExperiment) -> None:
    make_experiment(id="6749f3a000000001")
    with pytest.raises(ExperimentNotFoundError) as caught:
        store.get_experiment("ffff")
    assert isinstance(caught.value, KeyError)
    with pytest.raises(ExperimentNotFoundError):
        store.get_experiment("6749f3a000000003")


@pytest.mark.parametrize("bad_id", BAD_IDS)
def test_malformed_ids_are_rejected_before_any_path_is_built(
    repo: Path, store: Store, make_experiment: MakeExperiment, bad_id: str
) -> None:
    exp = make_experiment()
    # A valid-looking experiment where path traversal would lead.
    decoy = repo / "etc"
    decoy.mkdir()
    (decoy / "passwd").write_text("root:x:0:0\n")
    before = snapshot(repo, skip=(".git",))
    for call in (
        lambda: store.get_experiment(bad_id),
        lambda: store.update_experiment(bad_id, score=2.0),
        lambda: store.delete_experiment(bad_id),
        lambda: store.children(bad_id),
        lambda: store.ancestors(bad_id),
        lambda: store.descendants(bad_id),
        lambda: store.path_of(bad_id),
    ):
        with pytest.raises(InvalidIdError):
            call()
    if bad_id:  # pid="" selects experiments without a parent
        with pytest.raises(InvalidIdError):
            store.list_experiments(pid=bad_id)
    assert snapshot(repo, skip=(".git", ".kexp")) == {
        k: v for k, v in before.items() if not k.startswith(".kexp")
    }
    assert store.get_experiment(exp.id).score == exp.score


# --- update ------------------------------------------------------------------------------------


def test_update_changes_only_the_lines_of_changed_fields(
    store: Store, make_experiment: MakeExperiment
) -> None:
    exp = make_experiment()
    assert exp.path is not None
    before = exp.path.read_text(encoding="utf-8")

    updated = store.update_experiment(exp.id[:6], score=1.05)
    after = exp.path.read_text(encoding="utf-8")
    assert updated.score == 1.05
    assert updated.path == exp.path
    assert line_changes(before, after) == (["score: 1.019"], ["score: 1.05"])

    store.update_experiment(exp.id, raw_result="Iteration 1 Results - SUCCESS (rerun)")
    again = exp.path.read_text(encoding="utf-8")
    assert line_changes(after, again) == (
        ["Iteration 1 Results - SUCCESS"],
        ["Iteration 1 Results - SUCCESS (rerun)"],
    )

    store.update_experiment(exp.id, profiling_info="rocprof: VALU busy 71%", tags=["cache"])
    last = exp.path.read_text(encoding="utf-8")
    removed, added = line_changes(again, last)
    assert removed == []
    assert set(added) <= {"## Profiling info", "", "rocprof: VALU busy 71%", "tags: [cache]"}
    assert "## Profiling info" in added and "rocprof: VALU busy 71%" in added

    final = store.get_experiment(exp.id)
    assert final.score == 1.05
    assert final.raw_result == "Iteration 1 Results - SUCCESS (rerun)"
    assert final.profiling_info == "rocprof: VALU busy 71%"
    assert final.tags == ["cache"]
    assert final.detailed_description == exp.detailed_description
    assert final.created_at == exp.created_at
    assert final.path == exp.path  # the path never changes, even when the summary does
    store.update_experiment(exp.id, change_summary="Renamed - still here")
    assert store.get_experiment(exp.id).path == exp.path
    assert [p.name for p in store.paths()] == [exp.path.name]


def test_update_with_no_real_change_keeps_the_file_byte_identical(
    store: Store, make_experiment: MakeExperiment
) -> None:
    exp = make_experiment()
    assert exp.path is not None
    before = exp.path.read_bytes()
    store.update_experiment(exp.id, score=exp.score, env=exp.env)
    assert exp.path.read_bytes() == before


def test_update_of_an_unknown_field_is_refused(
    store: Store, make_experiment: MakeExperiment
) -> None:
    exp = make_experiment()
    assert exp.path is not None
    before = exp.path.read_bytes()
    with pytest.raises(KexpError, match="speedup"):
        store.update_experiment(exp.id, speedup=2.0)
    with pytest.raises(KexpError):
        store.update_experiment(exp.id, outcome="improvement")
    assert exp.path.read_bytes() == before


def test_changing_the_id_is_refused(store: Store, make_experiment: MakeExperiment) -> None:
    exp = make_experiment()
    assert exp.path is not None
    before = exp.path.read_bytes()
    with pytest.raises(KexpError, match="id"):
        store.update_experiment(exp.id, id="0123456789abcdef")
    assert exp.path.read_bytes() == before
    assert store.get_experiment(exp.id).id == exp.id


@pytest.mark.parametrize(
    "changes",
    [
        {"score": -0.5},
        {"score": float("inf")},
        {"score": "fast"},
        {"status": "finished"},
        {"is_buggy": True},
        {"change_summary": "line one\nline two"},
        {"change_summary": "y" * 81},
        {"pid": "0123456789abcdef"},
        {"combines": ["0123456789abcdef"]},
        {"created_at": "yesterday"},
        {"base_commit": "not a hash"},
    ],
    ids=lambda c: ",".join(c),
)
def test_invalid_update_leaves_the_file_byte_identical(
    repo: Path, store: Store, make_experiment: MakeExperiment, changes: dict[str, object]
) -> None:
    exp = make_experiment()
    assert exp.path is not None
    before = exp.path.read_bytes()
    with pytest.raises(ValidationError) as caught:
        store.update_experiment(exp.id, **changes)
    assert caught.value.problems
    assert exp.path.read_bytes() == before
    assert leftover_temporaries(repo) == []


def test_update_of_a_missing_experiment(store: Store, make_experiment: MakeExperiment) -> None:
    make_experiment(id="6749f3a000000001")
    with pytest.raises(ExperimentNotFoundError):
        store.update_experiment("6749f3a000000002", score=2.0)


def test_pid_and_combines_take_id_prefixes(store: Store, make_experiment: MakeExperiment) -> None:
    parent = make_experiment(id="6749f3a0c2d41e7b")
    other = make_experiment(id="5749f3a0c2d41e7b")
    child = store.create_experiment(**experiment_fields(pid="6749f3", combines=["6749", "5749F3"]))
    assert child.pid == parent.id
    assert child.combines == [parent.id, other.id]
    assert child.path is not None
    assert f"pid: {parent.id}\n" in child.path.read_text(encoding="utf-8")
    updated = store.update_experiment(child.id, pid="5749", combines=[])
    assert (updated.pid, updated.combines) == (other.id, [])
    assert ids_of(store.children(other.id)) == [child.id]
    with pytest.raises(ExperimentNotFoundError):
        store.update_experiment(child.id, pid="ffff")
    with pytest.raises(ExperimentNotFoundError):
        store.create_experiment(**experiment_fields(combines=["ffff"]))
    make_experiment(id="6749f3a000000000")
    with pytest.raises(AmbiguousIdError):
        store.create_experiment(**experiment_fields(pid="6749"))
    assert store.get_experiment(child.id).pid == other.id


def test_pid_cycle_is_refused(store: Store, make_experiment: MakeExperiment) -> None:
    parent = make_experiment()
    child = make_experiment(pid=parent.id)
    assert parent.path is not None
    before = parent.path.read_bytes()
    with pytest.raises(ValidationError):
        store.update_experiment(parent.id, pid=child.id)
    assert parent.path.read_bytes() == before


# --- delete ----------------------------------------------------------------------------------


def test_delete_removes_the_file(store: Store, make_experiment: MakeExperiment) -> None:
    exp = make_experiment(id="6749f3a0c2d41e7b")
    keep = make_experiment(id="5749f3a0c2d41e7b")
    assert exp.path is not None
    assert store.delete_experiment("6749f3") == exp.path
    assert not exp.path.exists()
    with pytest.raises(ExperimentNotFoundError):
        store.get_experiment(exp.id)
    assert ids_of(store.list_experiments()) == [keep.id]
    with pytest.raises(ExperimentNotFoundError):
        store.delete_experiment(exp.id)


def test_delete_refuses_while_children_point_at_it(
    store: Store, make_experiment: MakeExperiment
) -> None:
    parent = make_experiment()
    child = make_experiment(pid=parent.id)
    assert parent.path is not None
    with pytest.raises(KexpError, match=child.id):
        store.delete_experiment(parent.id)
    assert parent.path.exists()
    store.delete_experiment(parent.id, force=True)
    assert not parent.path.exists()
    assert store.get_experiment(child.id).pid == parent.id


def test_delete_refuses_while_others_combine_it(
    store: Store, make_experiment: MakeExperiment
) -> None:
    part = make_experiment()
    other = make_experiment()
    combo = make_experiment(combines=[part.id, other.id])
    with pytest.raises(KexpError, match=combo.id):
        store.delete_experiment(part.id)
    assert part.path is not None and part.path.exists()
    assert store.validate() == []
    store.delete_experiment(combo.id)
    store.delete_experiment(part.id)
    assert store.validate() == []


def test_remove_experiment_is_kexp_rm_in_one_call(
    store: Store, make_experiment: MakeExperiment, monkeypatch: pytest.MonkeyPatch
) -> None:
    """What ``kexp rm`` does, as one library call (also ``kexp.remove_experiment`` on the
    default store): refused before asking while others name it as parent or combine it
    (nothing deleted, the question never asked), the question asked with the removal to
    be made, nothing deleted when it is answered no, deleted when yes (or not asked)."""
    parent = make_experiment(change_summary="Vectorized loads - +2%")
    child = make_experiment(pid=parent.id)
    combo = make_experiment(combines=[child.id])
    asked: list[kexp.Removal] = []

    def answer(yes: bool) -> Callable[[kexp.Removal], bool]:
        def confirm(removal: kexp.Removal) -> bool:
            asked.append(removal)
            return yes

        return confirm

    refused = store.remove_experiment(parent.id, confirm=answer(True))
    assert (refused.id, refused.path, refused.deleted) == (parent.id, parent.path, False)
    assert refused.refused == (
        f"{parent.id} is the parent of 1 experiment(s) ({child.id[:10]}): deleting it would "
        "leave them pointing nowhere"
    )
    assert "combined by 1 experiment(s)" in store.remove_experiment(child.id).refused
    assert asked == [] and parent.path is not None and parent.path.exists()

    declined = store.remove_experiment(parent.id, force=True, confirm=answer(False))
    assert not declined.deleted and not declined.refused and parent.path.exists()
    assert [(r.id, r.summary, r.deleted) for r in asked] == [
        (parent.id, "Vectorized loads - +2%", False)
    ]
    removed = store.remove_experiment(parent.id, force=True, confirm=answer(True))
    assert removed.deleted and removed.path == parent.path and not parent.path.exists()
    monkeypatch.setenv("KEXP_ROOT", str(store.root))
    done = kexp.remove_experiment(combo.id)  # not asked
    assert done.deleted and done.refused == "" and not Path(str(combo.path)).exists()
    assert ids_of(store.list_experiments()) == [child.id]


def test_delete_refuses_for_children_in_folders_the_cache_holds_unchanged(
    store: Store, make_experiment: MakeExperiment
) -> None:
    """The check a delete makes reads only the folders' records that may name the id:
    children and combinations in other months' folders, unchanged since the cache last
    saw them, are found (and an experiment that only mentions the id is not one). With a
    real pause: files changed within the last 2 s are read again."""
    parent = make_experiment(created_at="2025-01-10T08:00:00Z")
    child = make_experiment(pid=parent.id, created_at="2025-03-10T08:00:00Z")
    combo = make_experiment(combines=[parent.id], created_at="2025-05-10T08:00:00Z")
    make_experiment(
        change_summary=f"Read {parent.id} first - +1%", created_at="2025-07-10T08:00:00Z"
    )
    make_experiment(created_at="2025-09-10T08:00:00Z")
    time.sleep(RACY_NS / 1e9 + 0.1)  # the files settle: the cache keeps them as they are
    assert len(store.top_experiments(10)) == 5  # the cache holds every folder
    with pytest.raises(DeleteRefusedError, match=child.id):
        store.delete_experiment(parent.id)
    assert store.dependents(parent.id) == ([child.id], [combo.id])
    store.delete_experiment(child.id)
    with pytest.raises(DeleteRefusedError, match=combo.id):
        store.delete_experiment(parent.id)
    store.delete_experiment(combo.id)
    assert len(store.top_experiments(10)) == 3
    store.delete_experiment(parent.id)
    assert len(store.top_experiments(10)) == 2


def test_delete_refuses_for_a_pid_set_in_place_by_an_editor(
    store: Store, make_experiment: MakeExperiment
) -> None:
    """A user sets a ``pid`` by hand in an editor that saves in place (the folder's own
    signature unchanged), then deletes the parent at once: the delete sees the child,
    as any read would, however recently the cache last looked."""
    parent = make_experiment(created_at="2025-01-10T08:00:00Z")
    other = make_experiment(created_at="2025-01-11T08:00:00Z")
    time.sleep(RACY_NS / 1e9 + 0.1)  # settled: the cache keeps every signature
    assert len(store.top_experiments(10)) == 2
    assert other.path is not None
    edit_in_place(
        other.path,
        lambda text: text.replace("\npid: ''\n", f"\npid: {parent.id}\n", 1),
    )
    with pytest.raises(DeleteRefusedError, match=other.id):
        store.delete_experiment(parent.id)
    assert parent.path is not None and parent.path.exists()
    assert store.get_experiment(other.id).pid == parent.id


# --- queries ---------------------------------------------------------------------------------


@dataclasses.dataclass
class Catalog:
    """Five experiments spread over operators, dtypes, GPUs, times and outcomes."""

    a: KernelExperiment
    b: KernelExperiment
    c: KernelExperiment
    d: KernelExperiment
    e: KernelExperiment
    first_commit: str
    second_commit: str


@pytest.fixture
def catalog(repo: Path, store: Store) -> Catalog:
    first = git(repo, "rev-parse", "HEAD")
    git(repo, "commit", "-q", "--allow-empty", "-m", "second")
    second = git(repo, "rev-parse", "HEAD")
    cache = "csrc/kernels/cache_kernels.cu: reshape_and_cache_flash"
    a = store.create_experiment(
        **experiment_fields(
            id="aaaa0000000000a1",
            change_summary="Unrolled the store loop by 4 - +5.0%",
            score=1.05,
            operator_sig=cache,
            dtype_sig="bf16",
            env="MI300X, ROCm 7.0.0",
            tags=["cache", "unroll"],
            created_at="2026-01-10T10:00:00Z",
            base_commit=first,
        )
    )
    b = store.create_experiment(
        **experiment_fields(
            id="bbbb0000000000b2",
            change_summary="Swapped head loop - -5% (broke coalescing)",
            score=0.95,
            status="failed",
            operator_sig="csrc/attention/paged_attention.cu: paged_attention_v2",
            dtype_sig="fp16",
            env="MI250X, ROCm 6.2.1",
            tags=["attention"],
            created_at="2026-02-15T12:00:00Z",
            base_commit=first,
            pid=a.id,
            measured_against="reference",
        )
    )
    c = store.create_experiment(
        **experiment_fields(
            id="cccc0000000000c3",
            change_summary="FP8 copy_blocks rewrite - wrong results",
            score=1.0,
            is_buggy=True,
            error_message="AssertionError: max abs diff 0.5",
            operator_sig="csrc/kernels/cache_kernels.cu: copy_blocks",
            dtype_sig="fp8_e4m3",
            env="H100, CUDA 12.4",
            tags=["cache"],
            created_at="2026-03-01T00:00:00Z",
            base_commit=first,
        )
    )
    d = store.create_experiment(
        **experiment_fields(
            id="dddd0000000000d4",
            change_summary="Vectorized key store - measuring",
            score=0.0,
            status="new",
            operator_sig=cache,
            dtype_sig="BF16",
            env="MI300X, ROCm 7.0.0",
            tags=["cache", "vectorize"],
            created_at="2026-03-20T23:59:59Z",
            base_commit=second,
            pid=a.id,
            measured_against="reference",
        )
    )
    e = store.create_experiment(
        **experiment_fields(
            id="eeee0000000000e5",
            change_summary="Wider loads in paged attention - +20%",
            score=1.2,
            operator_sig="csrc/attention/paged_attention.cu: paged_attention_v2",
            dtype_sig="fp16",
            env="MI250X, ROCm 6.2.1",
            created_at="2026-04-01T08:30:00Z",
            base_commit=second,
            pid=b.id,
            measured_against="reference",
        )
    )
    return Catalog(a, b, c, d, e, first, second)


def test_list_returns_everything_oldest_first(store: Store, catalog: Catalog) -> None:
    c = catalog
    assert ids_of(store.list_experiments()) == [c.a.id, c.b.id, c.c.id, c.d.id, c.e.id]
    assert all(e.path is not None and e.path.is_file() for e in store.list_experiments())


@pytest.mark.filterwarnings("ignore::kexp.core.errors.NoMatchWarning")  # one matches nothing
@pytest.mark.parametrize(
    ("filters", "expected"),
    [
        ({"operator": "cache_kernels"}, "acd"),
        ({"operator": "CACHE_KERNELS.CU"}, "acd"),
        ({"operator": "paged"}, "be"),
        ({"operator": "no-such-kernel"}, ""),
        ({"dtype": "bf16"}, "ad"),
        ({"dtype": "FP8"}, "c"),
        ({"dtype": "fp"}, "bce"),
        ({"env": "mi300x"}, "ad"),
        ({"env": "rocm 6.2"}, "be"),
        ({"env": "CUDA"}, "c"),
        ({"status": "done"}, "ace"),
        ({"status": "failed"}, "b"),
        ({"status": ["new", "failed"]}, "bd"),
        ({"status": "timeout"}, ""),
        ({"outcome": "improvement"}, "ae"),
        ({"outcome": "regression"}, "b"),
        ({"outcome": "buggy"}, "c"),
        ({"outcome": "pending"}, "d"),
        ({"outcome": ["pending", "buggy"]}, "cd"),
        ({"outcome": "marginal"}, ""),
        ({"is_buggy": True}, "c"),
        ({"is_buggy": False}, "abde"),
        ({"min_score": 1.0}, "ace"),
        ({"min_score": 1.05}, "ae"),
        ({"max_score": 1.0}, "bcd"),
        ({"max_score": 0.95}, "bd"),
        ({"min_score": 0.95, "max_score": 1.05}, "abc"),
        ({"tags": "cache"}, "acd"),
        ({"tags": ["cache", "unroll"]}, "a"),
        ({"tags": ["cache", "attention"]}, ""),
        ({"since": "2026-02-15"}, "bcde"),
        ({"since": "2026-02-15T12:00:00Z"}, "bcde"),
        ({"since": "2026-02-15T12:00:01Z"}, "cde"),
        ({"until": "2026-02-15"}, "ab"),
        ({"until": "2026-02-15T11:59:59Z"}, "a"),
        ({"until": "2026-03-20"}, "abcd"),
        ({"since": dt.date(2026, 3, 1), "until": dt.date(2026, 3, 31)}, "cd"),
        ({"since": dt.datetime(2026, 3, 1, 0, 0, 1, tzinfo=dt.timezone.utc)}, "de"),
        ({"since": "2026-03-01T01:00:00+01:00"}, "cde"),
        ({"operator": "cache", "status": "done"}, "ac"),
        ({"operator": "cache", "is_buggy": False, "min_score": 1.0}, "a"),
        ({"dtype": "fp16", "env": "mi250x", "outcome": "improvement"}, "e"),
        ({"tags": "cache", "until": "2026-03-01", "max_score": 1.0}, "c"),
        ({"operator": None, "dtype": None}, "abcde"),
    ],
    ids=lambda v: repr(v) if isinstance(v, dict) else str(v),
)
def test_list_filters(
    store: Store, catalog: Catalog, filters: dict[str, Any], expected: str
) -> None:
    wanted = [getattr(catalog, name).id for name in expected]
    assert ids_of(store.list_experiments(**filters)) == wanted


def test_base_commit_filter_takes_a_prefix(store: Store, catalog: Catalog) -> None:
    c = catalog
    assert ids_of(store.list_experiments(base_commit=c.first_commit)) == [c.a.id, c.b.id, c.c.id]
    assert ids_of(store.list_experiments(base_commit=c.second_commit[:7])) == [c.d.id, c.e.id]
    assert ids_of(store.list_experiments(base_commit=c.second_commit[:7].upper())) == [
        c.d.id,
        c.e.id,
    ]
    assert store.list_experiments(base_commit="ffffffffff") == [] or c.first_commit.startswith(
        "ffffffffff"
    )


def test_pid_filter_takes_an_id_or_a_prefix(store: Store, catalog: Catalog) -> None:
    c = catalog
    assert ids_of(store.list_experiments(pid=c.a.id)) == [c.b.id, c.d.id]
    assert ids_of(store.list_experiments(pid=c.a.id[:5])) == [c.b.id, c.d.id]
    assert ids_of(store.list_experiments(pid=c.b.id)) == [c.e.id]
    assert store.list_experiments(pid=c.e.id) == []
    assert ids_of(store.list_experiments(pid=c.a.id, status="new")) == [c.d.id]


def test_empty_pid_filter_selects_experiments_without_a_parent(
    store: Store, catalog: Catalog
) -> None:
    c = catalog
    assert ids_of(store.list_experiments(pid="")) == [c.a.id, c.c.id]


@pytest.mark.parametrize(
    "field",
    [
        "change_summary",
        "operator_sig",
        "dtype_sig",
        "env",
        "author",
        "detailed_description",
        "raw_result",
        "profiling_info",
        "error_message",
        "code_change",
    ],
)
def test_text_filter_searches_every_field(
    store: Store, catalog: Catalog, make_experiment: MakeExperiment, field: str
) -> None:
    value = "-\n+ QuokkaWide loads" if field == "code_change" else "with QuokkaWide loads"
    target = make_experiment(**{field: value})
    assert ids_of(store.list_experiments(text="quokkawide")) == [target.id]
    assert ids_of(store.list_experiments(text="QUOKKAWIDE LOADS")) == [target.id]


def test_text_filter_finds_ids_tags_and_commits(store: Store, catalog: Catalog) -> None:
    c = catalog
    assert ids_of(store.list_experiments(text=c.c.id)) == [c.c.id]
    assert ids_of(store.list_experiments(text="vectorize")) == [c.d.id]
    assert ids_of(store.list_experiments(text=c.second_commit[:12])) == [c.d.id, c.e.id]
    assert ids_of(store.list_experiments(text="max abs diff", is_buggy=True)) == [c.c.id]
    assert ids_of(store.list_experiments(text="coalescing")) == [c.b.id]


def test_text_filter_finds_unknown_sections_and_combined_ids(
    store: Store, make_experiment: MakeExperiment
) -> None:
    part = make_experiment()
    combo = make_experiment(combines=[part.id])
    noted = make_experiment(extra_sections=[("Reviewer notes", "Check the Wombat shapes")])
    assert ids_of(store.list_experiments(text="wombat")) == [noted.id]
    assert ids_of(store.list_experiments(text="reviewer notes")) == [noted.id]
    assert sorted(ids_of(store.list_experiments(text=part.id))) == sorted([part.id, combo.id])


@pytest.mark.parametrize(("value", "expected"), [("true", "c"), ("no", "abde"), (0, "abde")])
def test_is_buggy_filter_accepts_words(
    store: Store, catalog: Catalog, value: object, expected: str
) -> None:
    wanted = [getattr(catalog, name).id for name in expected]
    assert ids_of(store.list_experiments(is_buggy=value)) == wanted


def test_order_with_fractional_seconds(store: Store, make_experiment: MakeExperiment) -> None:
    whole = make_experiment(created_at="2026-10-02T09:10:05Z")
    later = make_experiment(created_at="2026-10-02T09:10:05.5Z")
    latest = make_experiment(created_at="2026-10-02T09:10:05.55Z")
    earlier = make_experiment(created_at="2026-10-02T09:10:04.999999Z")
    assert ids_of(store.list_experiments()) == [earlier.id, whole.id, later.id, latest.id]
    assert ids_of(store.top_experiments()) == [latest.id, later.id, whole.id, earlier.id]


@pytest.mark.parametrize(
    "filters",
    [
        {"colour": "red"},
        {"status": "finished"},
        {"outcome": "great"},
        {"min_score": "fast"},
        {"since": "last tuesday"},
        {"is_buggy": "maybe"},
    ],
    ids=lambda f: ",".join(f),
)
def test_bad_filters_are_errors(store: Store, catalog: Catalog, filters: dict[str, Any]) -> None:
    with pytest.raises(KexpError):
        store.list_experiments(**filters)


def test_top_experiments_rank_by_score_and_leave_out_buggy_and_pending(
    store: Store, catalog: Catalog
) -> None:
    c = catalog
    assert ids_of(store.top_experiments()) == [c.e.id, c.a.id, c.b.id]
    assert ids_of(store.top_experiments(2)) == [c.e.id, c.a.id]
    assert ids_of(store.top_experiments(max_results=1)) == [c.e.id]
    assert store.top_experiments(max_results=0) == []
    # By score, the buggy c (1.0) ranks above b (0.95); by the cumulative score (the
    # default), a buggy experiment has none and comes after every measured one.
    assert ids_of(store.top_experiments(include_buggy=True, by="score")) == [
        c.e.id,
        c.a.id,
        c.c.id,
        c.b.id,
    ]
    assert ids_of(store.top_experiments(include_buggy=True)) == [c.e.id, c.a.id, c.b.id, c.c.id]
    assert ids_of(store.top_experiments(include_pending=True)) == [c.e.id, c.a.id, c.b.id, c.d.id]
    assert ids_of(store.top_experiments(include_buggy=True, include_pending=True, by="score")) == [
        c.e.id,
        c.a.id,
        c.c.id,
        c.b.id,
        c.d.id,
    ]
    assert ids_of(store.top_experiments(include_buggy=True, include_pending=True)) == [
        c.e.id,
        c.a.id,
        c.b.id,
        c.c.id,
        c.d.id,
    ]
    assert ids_of(store.top_experiments(is_buggy=True)) == [c.c.id]
    assert ids_of(store.top_experiments(status="new")) == [c.d.id]
    assert ids_of(store.top_experiments(outcome="buggy")) == [c.c.id]
    assert ids_of(store.top_experiments(outcome="pending")) == [c.d.id]
    assert ids_of(store.top_experiments(operator="cache")) == [c.a.id]
    assert ids_of(store.top_experiments(operator="cache", include_buggy=True)) == [c.a.id, c.c.id]


def test_top_experiments_default_limit_is_twenty(
    store: Store, make_experiment: MakeExperiment
) -> None:
    for index in range(23):
        make_experiment(score=1.0 + index / 100, change_summary=f"Try {index} - ok")
    top = store.top_experiments()
    assert len(top) == 20
    assert [e.score for e in top] == sorted((e.score for e in top), reverse=True)
    assert top[0].change_summary == "Try 22 - ok"


def test_top_experiments_break_ties_newest_first(
    store: Store, make_experiment: MakeExperiment
) -> None:
    old = make_experiment(score=1.1, created_at="2026-01-01T00:00:00Z")
    new = make_experiment(score=1.1, created_at="2026-02-01T00:00:00Z")
    assert ids_of(store.top_experiments()) == [new.id, old.id]


def test_module_functions_use_the_default_store(
    repo: Path, monkeypatch: pytest.MonkeyPatch, catalog: Catalog
) -> None:
    c = catalog
    monkeypatch.chdir(repo)
    assert ids_of(kexp.top_experiments()) == [c.e.id, c.a.id, c.b.id]
    assert ids_of(kexp.top_experiments(1)) == [c.e.id]
    assert ids_of(kexp.list_experiments(operator="paged")) == [c.b.id, c.e.id]
    assert ids_of(kexp.children(c.a.id)) == [c.b.id, c.d.id]
    assert ids_of(kexp.ancestors(c.e.id)) == [c.b.id, c.a.id]
    # kexp update in one call: the summary's figure follows, the raw result is said stale
    with pytest.warns(StaleMeasurementWarning, match="raw_result still holds"):
        updated = kexp.update_experiment(c.a.id, score=1.06)
    assert kexp.get_experiment(c.a.id).score == updated.score == 1.06
    assert updated.change_summary == "Unrolled the store loop by 4 - +6.0%"
    kexp.delete_experiment(c.e.id)
    assert c.e.id not in ids_of(kexp.list_experiments())
    assert kexp.validate() == []


# --- outcome -----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("fields", "outcome"),
    [
        ({"score": 0.5}, "regression"),
        ({"score": 0.9899}, "regression"),
        ({"score": 0.99}, "marginal"),
        ({"score": 1.0}, "marginal"),
        ({"score": 1.01}, "marginal"),
        ({"score": 1.0101}, "improvement"),
        ({"score": 0.0, "status": "failed"}, "failed"),  # measured nothing: not slower
        ({"score": 0.0, "status": "timeout"}, "failed"),
        ({"score": 1.5, "status": "new"}, "pending"),
        ({"score": 1.5, "status": "running"}, "pending"),
        ({"score": 1.5, "is_buggy": True, "error_message": "segfault"}, "buggy"),
        ({"score": 1.5, "status": "running", "is_buggy": True, "error_message": "x"}, "pending"),
    ],
)
def test_outcome_derivation(
    store: Store, make_experiment: MakeExperiment, fields: dict[str, object], outcome: str
) -> None:
    exp = make_experiment(**fields)
    assert exp.outcome == outcome
    assert store.get_experiment(exp.id).outcome == outcome
    assert ids_of(store.list_experiments(outcome=outcome)) == [exp.id]
    assert exp.path is not None
    assert "outcome" not in exp.path.read_text(encoding="utf-8")


def test_outcome_thresholds_come_from_settings(
    repo: Path, store: Store, make_experiment: MakeExperiment
) -> None:
    exp = make_experiment(score=0.995)
    assert store.get_experiment(exp.id).outcome == "marginal"

    strict = Store(repo, settings=Settings(regression_below=1.0, improvement_above=1.05))
    assert ids_of(strict.list_experiments(outcome="regression")) == [exp.id]
    assert strict.list_experiments(outcome="marginal") == []
    assert strict.get_experiment(exp.id).outcome == "regression"
    assert [e.outcome for e in strict.list_experiments()] == ["regression"]
    assert strict.update_experiment(exp.id, score=1.04).outcome == "marginal"
    assert strict.create_experiment(**experiment_fields(score=1.02)).outcome == "marginal"
    assert ids_of(strict.list_experiments(outcome="marginal")) == ids_of(
        store.list_experiments(outcome="improvement")
    )


def test_interference_when_a_combination_scores_below_its_best_part(
    store: Store, make_experiment: MakeExperiment
) -> None:
    unroll = make_experiment(score=1.05, change_summary="Unroll - +5%")
    vectorize = make_experiment(score=1.03, change_summary="Vectorize - +3%")
    worse = make_experiment(
        score=1.04,
        change_summary="Unroll + vectorize - +4% (interference)",
        combines=[unroll.id, vectorize.id],
    )
    better = make_experiment(
        score=1.08, change_summary="Unroll + vectorize v2 - +8%", combines=[unroll.id, vectorize.id]
    )
    assert store.get_experiment(worse.id).outcome == "interference"
    assert store.get_experiment(better.id).outcome == "improvement"
    assert ids_of(store.list_experiments(outcome="interference")) == [worse.id]
    outcomes = {e.id: e.outcome for e in store.list_experiments()}
    assert outcomes == {
        unroll.id: "improvement",
        vectorize.id: "improvement",
        worse.id: "interference",
        better.id: "improvement",
    }
    assert worse.path is not None
    text = worse.path.read_text(encoding="utf-8")
    assert "outcome:" not in text and "interference:" not in text  # derived, never stored


# --- lineage ---------------------------------------------------------------------------------


def test_ancestors_children_and_descendants(store: Store, make_experiment: MakeExperiment) -> None:
    root = make_experiment(change_summary="Root - baseline", created_at="2026-01-01T00:00:00Z")
    first = make_experiment(pid=root.id, created_at="2026-01-02T00:00:00Z")
    second = make_experiment(pid=root.id, created_at="2026-01-03T00:00:00Z")
    grandchild = make_experiment(pid=first.id, created_at="2026-01-04T00:00:00Z")
    great = make_experiment(pid=grandchild.id, created_at="2026-01-05T00:00:00Z")
    unrelated = make_experiment()

    assert ids_of(store.ancestors(great.id)) == [grandchild.id, first.id, root.id]
    assert ids_of(store.ancestors(second.id)) == [root.id]
    assert store.ancestors(root.id) == []
    assert ids_of(store.children(root.id)) == [first.id, second.id]
    assert ids_of(store.children(first.id)) == [grandchild.id]
    assert store.children(great.id) == []
    assert ids_of(store.descendants(root.id)) == [first.id, second.id, grandchild.id, great.id]
    assert ids_of(store.descendants(grandchild.id)) == [great.id]
    assert store.descendants(unrelated.id) == []
    with pytest.raises(ExperimentNotFoundError):
        store.children("ffffffffffffffff")


def test_lineage_of_a_hand_made_cycle_terminates(
    store: Store, make_experiment: MakeExperiment
) -> None:
    first = make_experiment()
    second = make_experiment(pid=first.id)
    assert first.path is not None
    text = first.path.read_text(encoding="utf-8")
    first.path.write_text(text.replace("pid: ''", f"pid: {second.id}"), encoding="utf-8")
    assert ids_of(store.ancestors(second.id)) == [first.id]
    assert ids_of(store.ancestors(first.id)) == [second.id]
    assert ids_of(store.descendants(first.id))[0] == second.id  # and it ends
    # Neither says what it is measured against (a warning each); the cycle is the error.
    assert {p.code for p in store.validate()} == {"lineage-cycle", "measured-against-missing"}
    for exp in (first, second):
        found = store.get_experiment(exp.id)
        assert found.cumulative_score is None
        assert found.cumulative_reason == "it is in a pid cycle"


# --- invalid and foreign files -------------------------------------------------------------------

BROKEN = """\
---
id: {id}
pid: ''
change_summary: Hand-edited - broken
score: fast
status: done
is_buggy: false
operator_sig: x
dtype_sig: bf16
env: MI300X
base_commit: 3f2c9e1a7b8d4c6e5f0a1b2c3d4e5f6a7b8c9d0e
created_at: '2026-11-29T15:52:36Z'
---
"""


def test_invalid_file_is_skipped_with_a_warning_and_strict_raises(
    store: Store, make_experiment: MakeExperiment
) -> None:
    good = make_experiment(score=1.2)
    broken = store.experiments_dir / "2026" / "11" / "6749f3a0c2d41e7b-hand-edited.md"
    broken.parent.mkdir(parents=True, exist_ok=True)
    broken.write_text(BROKEN.format(id="6749f3a0c2d41e7b"), encoding="utf-8")

    with pytest.warns(InvalidExperimentWarning) as caught:
        found = store.list_experiments()
    assert ids_of(found) == [good.id]
    messages = [str(w.message) for w in caught]
    assert len(messages) == 1
    assert str(broken) in messages[0]
    assert "score" in messages[0]

    with pytest.warns(InvalidExperimentWarning, match="6749f3a0c2d41e7b-hand-edited.md"):
        assert ids_of(store.top_experiments()) == [good.id]

    with pytest.raises(ValidationError) as strict:
        store.list_experiments(strict=True)
    assert str(broken) in str(strict.value)
    with pytest.raises(ValidationError):
        store.top_experiments(strict=True)
    with pytest.raises(ValidationError):
        store.get_experiment("6749f3a0")
    assert any(str(broken) in p.path for p in store.validate())


def test_file_whose_name_and_id_disagree_is_skipped(
    store: Store, make_experiment: MakeExperiment
) -> None:
    good = make_experiment()
    assert good.path is not None
    copy = good.path.with_name("0123456789abcdef-copy.md")
    copy.write_bytes(good.path.read_bytes())
    with pytest.warns(InvalidExperimentWarning, match="0123456789abcdef-copy.md"):
        assert ids_of(store.list_experiments()) == [good.id]


def test_other_files_under_experiments_are_ignored_and_untouched(
    store: Store, make_experiment: MakeExperiment
) -> None:
    """Queries and writes leave other files alone; validation names the Markdown files
    among them that kexp never reads (the README aside: see test_stray_files.py)."""
    exp = make_experiment()
    foreign = {
        "README.md": "# Experiments\n\nRead me.\n",
        "notes.txt": "todo: try unroll 8\n",
        "2026/11/summary.md": "---\nid: nope\n---\n",
        "data/results.csv": "config,speedup\nb8,1.02\n",
        "2026/11/6749f3a0c2d41e7b.txt": "not markdown\n",
        "2026/11/6749F3A0C2D41E7B-upper.md": "uppercase is not an id\n",
    }
    for name, text in foreign.items():
        path = store.experiments_dir / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")

    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert ids_of(store.list_experiments()) == [exp.id]
        assert sorted((Path(p.path).name, p.code) for p in store.validate()) == [
            ("6749F3A0C2D41E7B-upper.md", "stray-file"),
            ("summary.md", "stray-file"),
        ]
        other = make_experiment(change_summary="Another - ok")
        store.update_experiment(other.id, score=1.5)
        store.delete_experiment(other.id)
    assert store.paths() == [exp.path]
    for name, text in foreign.items():
        assert (store.experiments_dir / name).read_text(encoding="utf-8") == text


def test_nothing_is_written_outside_experiments_and_the_cache(
    repo: Path, store: Store, make_experiment: MakeExperiment
) -> None:
    (repo / ".gitignore").write_text("*.o\n")
    git(repo, "add", ".gitignore")
    git(repo, "commit", "-q", "-m", "ignore objects")
    outside = (".git", "experiments", ".kexp")
    before = snapshot(repo, skip=outside)

    parent = make_experiment()
    exp = make_experiment(pid=parent.id)
    store.update_experiment(exp.id, score=1.3, raw_result="rerun", tags=["x"])
    store.delete_experiment(exp.id)
    store.delete_experiment(parent.id)
    store.list_experiments()
    store.validate()

    assert snapshot(repo, skip=outside) == before
    top_level = {p.name for p in repo.iterdir()}
    assert top_level <= {".git", ".gitignore", "experiments", ".kexp", "kernel.cu"}
    status = git(repo, "status", "--porcelain", "--untracked-files=all", "--ignored=no")
    assert ".kexp" not in status
    assert leftover_temporaries(repo) == []


def test_cache_folder_is_git_ignored(
    repo: Path, store: Store, make_experiment: MakeExperiment
) -> None:
    exp = make_experiment()
    store.update_experiment(exp.id, score=1.4)  # takes a lock: creates .kexp/
    assert (repo / ".kexp").is_dir()
    status = git(repo, "status", "--porcelain", "--untracked-files=all")
    assert ".kexp" not in status
    assert exp.path is not None
    assert str(exp.path.relative_to(repo.resolve())) in status
    git(repo, "add", "--all")
    assert ".kexp" not in git(repo, "diff", "--cached", "--name-only")
