"""Every id a view prints names one experiment: a user copies it into the next command.

A script recording a sweep makes many ids in one second; two of them share their first
10 characters one time in 256 (an id is 8 hex of seconds and 8 random), so views that
print 10 characters must print more where another id of the store, shown or not,
shares them. The truth is what the store's file names hold.
"""

from __future__ import annotations

import re
import warnings
from datetime import datetime, timezone
from pathlib import Path

import pytest
from conftest import experiment_fields, run_kexp
from hypothesis import given
from hypothesis import strategies as st

from kexp import Store
from kexp.core import ids
from kexp.core.errors import KexpError
from kexp.core.ids import ID_LENGTH, SHOWN_LENGTH

#: 2026-11-02 09:15:00 UTC, the second of the sweep.
SECOND = int(datetime(2026, 11, 2, 9, 15, tzinfo=timezone.utc).timestamp())
ROPE = "csrc/rope.cu: rotary_embedding"
NORM = "csrc/layernorm.cu: layer_norm"


def made_in_the_sweep(tail: str) -> str:
    return f"{SECOND:08x}{tail}"


def record(store: Store, exp_id: str, operator: str, summary: str, **fields: object) -> str:
    created = datetime.fromtimestamp(SECOND, timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
    values = experiment_fields(
        id=exp_id, created_at=created, operator_sig=operator, change_summary=summary
    )
    values.update(fields)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return store.create_experiment(**values).id


@pytest.fixture
def sweep(store: Store) -> Store:
    """A rope campaign and a layer-norm sweep recorded in the same second: every rope
    experiment shares its first 10 characters with a layer-norm one (the reference its
    first 14), so no view of rope alone shows the twin that makes 10 too few."""
    ref = record(store, made_in_the_sweep("a0000001"), ROPE, "reference: rotary in fp32 math",
                 score=1.0, measured_against="reference")  # fmt: skip
    step = record(store, made_in_the_sweep("b1000002"), ROPE, "vectorize rotary loads",
                  score=1.25, pid=ref, measured_against="parent")  # fmt: skip
    record(store, made_in_the_sweep("c2000003"), ROPE, "unroll rotary by 8 - slower",
           score=0.91, pid=step, measured_against="parent")  # fmt: skip
    record(store, made_in_the_sweep("d3000004"), ROPE, "A/A rotary control", score=1.0,
           tags=["control"])  # fmt: skip
    for tail in ("a00000ff", "b1ffffff", "c2ffffff", "d3ffffff"):
        record(store, made_in_the_sweep(tail), NORM, f"layer norm sweep point {tail}",
               score=1.01, measured_against="reference")  # fmt: skip
    return store


VIEWS = [
    ("top", "--operator", "rope"),
    ("list", "--operator", "rope"),
    ("tree", "--operator", "rope"),
    ("lessons", "--operator", "rope"),
    ("stats", "--operator", "rope"),
    ("similar", "--text", "rotary loads", "--operator", "rope"),
    ("context", "--operator", "rope", "--text", "rotary loads"),
]


def printed_ids(output: str, every: set[str]) -> set[str]:
    """The id prefixes (10 characters or more) a view printed."""
    tokens = set(re.findall(r"\b[0-9a-f]{10,16}\b", output))
    return {t for t in tokens if any(exp_id.startswith(t) for exp_id in every)}


@pytest.mark.parametrize("view", VIEWS, ids=lambda view: view[0])
def test_every_printed_id_names_one_experiment(sweep: Store, view: tuple[str, ...]) -> None:
    every = {path.name[:16] for path in (sweep.root / "experiments").rglob("*.md")}
    result = run_kexp(*view, cwd=sweep.root)
    assert result.returncode == 0, result.stderr
    printed = printed_ids(result.stdout, every)
    assert printed, f"kexp {' '.join(view)} printed no id:\n{result.stdout}"
    for shown in printed:
        named = [exp_id for exp_id in every if exp_id.startswith(shown)]
        assert len(named) == 1, f"kexp {' '.join(view)} printed {shown}, the start of {named}"
        show = run_kexp("show", shown, "--brief", cwd=sweep.root)
        assert show.returncode == 0 and named[0] in show.stdout, show.stderr


def test_ids_apart_in_10_characters_are_printed_at_10(store: Store) -> None:
    """No twin: the views keep their 10 characters (the README's examples show them)."""
    record(store, made_in_the_sweep("a0000001"), ROPE, "reference", score=1.0,
           measured_against="reference")  # fmt: skip
    record(store, made_in_the_sweep("b1000002"), NORM, "norm", score=1.0,
           measured_against="reference")  # fmt: skip
    result = run_kexp("top", cwd=store.root)
    assert sorted(printed_ids(result.stdout, {made_in_the_sweep("a0000001")})) == [
        made_in_the_sweep("a0")
    ]


def test_the_library_says_how_many_characters_tell_ids_apart(sweep: Store) -> None:
    """``Store.shown_id_length`` answers from the ids the last read saw."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        rope = sweep.list_experiments(operator="rope")
    length = sweep.shown_id_length(exp.id for exp in rope)
    assert length == 15  # the reference and its twin share 14
    for exp in rope:
        assert sweep.resolve_id(exp.id[:length]) == exp.id
    with pytest.raises(KexpError):
        sweep.resolve_id(rope[0].id[:14])


def test_a_twin_on_another_ref_widens_what_a_read_across_refs_prints(
    tmp_path: Path, sweep: Store
) -> None:
    """Read across refs, the ids of every ref count: an id printed by ``top --all-refs``
    is one that ``show --all-refs`` resolves."""
    from conftest import git

    root = sweep.root
    git(root, "add", "experiments")
    git(root, "commit", "-q", "-m", "sweep")
    git(root, "checkout", "-q", "-b", "kexp/other")
    record(sweep, made_in_the_sweep("b10000ee"), NORM, "other agent's norm point",
           score=1.02, measured_against="reference")  # fmt: skip
    git(root, "add", "experiments")
    git(root, "commit", "-q", "-m", "other")
    git(root, "checkout", "-q", "main")
    every = {
        line.rsplit("/", 1)[-1][:16]
        for ref in ("main", "kexp/other")
        for line in git(root, "ls-tree", "-r", "--name-only", ref, "experiments").splitlines()
        if line.endswith(".md") and not line.endswith("README.md")
    }
    result = run_kexp("top", "--operator", "rope", "--all-refs", cwd=root)
    assert result.returncode == 0, result.stderr
    for shown in printed_ids(result.stdout, every):
        named = [exp_id for exp_id in every if exp_id.startswith(shown)]
        assert len(named) == 1, f"top --all-refs printed {shown}, the start of {named}"


#: Ids made in one second share their first 8 characters; a tail of two letters makes
#: them share many more (as ids of a sweep do by chance, 1 pair in 256 sharing 10).
SWEEP_IDS = st.text("ab", min_size=8, max_size=8).map(lambda tail: f"6ae85494{tail}")


@given(st.lists(SWEEP_IDS, min_size=1, unique=True), st.data())
def test_distinct_length_is_the_fewest_characters_that_name_one_id(
    every: list[str], data: st.DataObject
) -> None:
    """The printed prefix of each shown id starts no other id; one character fewer
    (above the minimum of 10) would start another for some shown id."""
    shown = data.draw(st.lists(st.sampled_from(every), min_size=1, unique=True))
    length = ids.distinct_length(shown, every)
    assert SHOWN_LENGTH <= length <= ID_LENGTH
    for exp_id in shown:
        assert [other for other in every if other.startswith(exp_id[:length])] == [exp_id]
    if length > SHOWN_LENGTH:
        shorter = length - 1
        assert any(
            sum(other.startswith(exp_id[:shorter]) for other in every) > 1 for exp_id in shown
        )


def test_show_advises_reading_the_samples_by_an_id_that_names_one_experiment(
    store: Store,
) -> None:
    """``kexp show``'s advice to read the raw timings (``kexp show ID --field
    samples``) gives an id that names the experiment shown, not its twin of the same
    second (sharing 12 characters); one without a twin keeps 10."""
    from kexp.measure.record import record_iteration

    fields = experiment_fields(operator_sig=ROPE, change_summary="vectorize rotary loads")
    del fields["score"]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        exp = record_iteration(store, baseline={"b8": [10.0, 10.1, 10.2]},
                               candidate={"b8": [9.0, 9.1, 9.2]},
                               id=made_in_the_sweep("b1c20002"), **fields)  # fmt: skip
    assert exp.samples
    record(store, made_in_the_sweep("b1c2ffff"), NORM, "layer norm sweep point", score=1.01)
    shown = run_kexp("show", exp.id, cwd=store.root)
    assert shown.returncode == 0, shown.stderr
    (advised,) = re.findall(r"kexp show ([0-9a-f]+) --field samples", shown.stdout)
    assert advised == exp.id[:13], shown.stdout
    samples = run_kexp("show", advised, "--field", "samples", cwd=store.root)
    assert samples.returncode == 0 and samples.stdout.strip() == exp.samples.strip()
    alone = made_in_the_sweep("0a000003")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        record_iteration(store, baseline={"b8": [10.0, 10.1, 10.2]},
                         candidate={"b8": [9.0, 9.1, 9.2]}, id=alone, **fields)  # fmt: skip
    shown = run_kexp("show", alone, cwd=store.root)
    assert f"kexp show {alone[:10]} --field samples" in shown.stdout, shown.stdout
