"""Revisions: every name git accepts as a branch or tag works in kexp, and nothing git
could misread (an option, a path, a range) gets through.

The names are made with git in a real repository and used as users do (``--rev``,
``review``, ``Store.at``); the rule itself is compared with ``git check-ref-format``
on generated names.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest
from conftest import experiment_fields, git, run_kexp
from hypothesis import given, settings
from hypothesis import strategies as st

from kexp import Store
from kexp.core.errors import GitError
from kexp.gitops import git as kgit

NAMES = ["fix#1", "v1,2", "feature/ünïcode", "release+1", "a{b}", "it's", "50%", "x=y;z"]


def test_branch_and_tag_names_git_accepts_are_revisions(repo: Path, store: Store) -> None:
    exp = store.create_experiment(**experiment_fields())
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", "one experiment")
    for name in NAMES:
        git(repo, "check-ref-format", "--branch", name)  # git takes it
        git(repo, "branch", name)
    git(repo, "tag", "v1,2-tag")
    for name in [*NAMES, "v1,2-tag", "fix#1~0", "feature/ünïcode^{commit}"]:
        result = run_kexp("list", "--rev", name, "--json", cwd=repo, env={"KEXP_ROOT": str(repo)})
        assert result.returncode == 0, (name, result.stderr)
        assert [e["id"] for e in json.loads(result.stdout)] == [exp.id], name
        assert [e.id for e in store.at(name).list_experiments()] == [exp.id]
    review = run_kexp("review", "fix#1", "feature/ünïcode", cwd=repo, env={"KEXP_ROOT": str(repo)})
    assert review.returncode == 0, review.stderr
    assert "No experiment added, corrected or removed." in review.stdout


# Characters that matter to git's rules, a few letters, and none that kexp refuses
# beyond git's rules (invisible ones) or that start a suffix (~ ^ and @{).
_ALPHABET = "ab/.-_#,+!%&=;'\"<>|$`:?*[]\\ {}\t\x01\x7fé€"
_NAMES = st.text(_ALPHABET, min_size=1, max_size=12).filter(
    lambda name: not name.startswith("-") and "@{" not in name
)


@settings(max_examples=300, deadline=None)
@given(name=_NAMES)
def test_kexp_accepts_exactly_the_ref_names_git_accepts(name: str) -> None:
    """On names without an option's leading dash: kexp's rule is git check-ref-format's."""
    git_says = subprocess.run(
        ["git", "check-ref-format", "--allow-onelevel", name], capture_output=True
    ).returncode
    assert kgit.is_ref_name(name) == (git_says == 0), name


@pytest.mark.parametrize(
    "revision",
    ["-x", "--output=/tmp/x", "a..b", "HEAD:k.cu", "main\u202e", "a\u2028b", "x@{-1}", "@{1}"],
    ids=repr,
)
def test_what_git_would_misread_is_still_refused(revision: str) -> None:
    with pytest.raises(GitError, match="not a revision kexp accepts"):
        kgit.check_revision(revision)
