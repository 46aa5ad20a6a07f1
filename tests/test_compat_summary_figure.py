"""An old caller's new score beside a summary that states the old one (trial P, finding
06): ``kernel_exp_dataclass.update_experiment(id, score=1.50)`` on the "exp2 softmax -
+3%" step changes only the fields given, as COMPAT says, and left the "+3%" without a
word, where ``kexp update --set score=`` restates it and ``kexp remeasure`` warns. The
one warning of the update now says the summary still states the old figure, and how
to restate it. Each old caller runs in its own process, as the user's script does."""

from __future__ import annotations

from pathlib import Path

import pytest
from conftest import git
from test_compat_scores import add, old_caller

from kexp import Store


@pytest.fixture
def steps(repo: Path) -> dict[str, str]:
    """A root (1.15), a step over it (1.10) and one over that (1.03, "+3%"), committed."""
    root = add(repo, "Tiling - +15%", 1.15)
    block = add(repo, "BLOCK_N 128 - +10%", 1.10, root)
    exp2 = add(repo, "exp2 softmax - +3%", 1.03, block)
    git(repo, "add", "-A")
    git(repo, "commit", "-qm", "steps")
    return {"root": root, "block": block, "exp2": exp2}


def warnings_of(stderr: str) -> list[str]:
    return [line for line in stderr.splitlines() if "Warning" in line]


def update(repo: Path, exp_id: str, changes: str) -> list[str]:
    """``update_experiment(exp_id, <changes>)`` by an old script; its warnings."""
    result = old_caller(
        f"import kernel_exp_dataclass as k; k.update_experiment({exp_id!r}, {changes})", repo
    )
    assert result.returncode == 0, result.stderr
    return warnings_of(result.stderr)


def test_a_new_score_over_the_reference_warns_that_the_summary_states_the_old_one(
    repo: Path, steps: dict[str, str]
) -> None:
    exp2 = steps["exp2"]
    (said,) = update(repo, exp2, "score=1.50")  # one warning, of both things
    assert "KexpWarning" in said and "measured_against: reference" in said, said
    assert "change_summary still states the old score (+3%)" in said, said
    assert f"kexp update {exp2[:10]} --set change_summary=VALUE" in said, said
    assert f"update_experiment('{exp2}', change_summary=...)" in said, said  # its full id
    stored = Store(repo).get_experiment(exp2)
    assert (stored.score, stored.change_summary) == (1.5, "exp2 softmax - +3%")  # as given


def test_a_roots_new_score_warns_of_its_summary_alone(repo: Path, steps: dict[str, str]) -> None:
    root = steps["root"]
    (said,) = update(repo, root, "score=1.25")
    assert "change_summary still states the old score (+15%)" in said, said
    assert "measured_against" not in said, said
    assert Store(repo).get_experiment(root).change_summary == "Tiling - +15%"


@pytest.mark.parametrize(
    "changes",
    [
        'score=1.25, change_summary="Tiling - +25%"',  # restated with the score
        "score=1.15",  # its own score given back: nothing changes
        'score=1.2, change_summary="Tiling - faster"',  # no figure to go stale
    ],
)
def test_a_summary_given_or_left_true_is_not_warned_of(
    repo: Path, steps: dict[str, str], changes: str
) -> None:
    assert update(repo, steps["root"], changes) == []
