"""A team's settings: kexp.toml beside experiments/, read wherever a store is opened."""

from __future__ import annotations

import dataclasses
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner, Result

import kexp
from kexp import Store
from kexp.cli.main import main
from kexp.core.errors import SettingsFileError
from kexp.core.settings import DEFAULT_SETTINGS, RANGES, Settings, effective_settings, load_settings
from tests.conftest import experiment_fields


def kexp_cli(repo: Path, *args: str) -> Result:
    return CliRunner().invoke(main, ["--root", str(repo), *args])


@pytest.fixture
def store_with_a_small_gain(store: Store) -> Store:
    """A store holding one experiment 3 % faster: an improvement by default."""
    store.create_experiment(**experiment_fields(score=1.03))
    return store


def test_every_setting_has_a_range() -> None:
    assert set(RANGES) == {field.name for field in dataclasses.fields(Settings)}


def test_a_team_threshold_changes_every_answer_at_once(
    store_with_a_small_gain: Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    root = store_with_a_small_gain.root
    # The cache is warm with the default answer first.
    assert kexp_cli(root, "top", "--json").exit_code == 0
    assert json.loads(kexp_cli(root, "top", "--json").stdout)[0]["outcome"] == "improvement"

    (root / "kexp.toml").write_text("# GEAK's A/A noise floor\nimprovement_above = 1.05\n")

    # The CLI, the Python API and the predecessor's module all read it.
    assert json.loads(kexp_cli(root, "list", "--json").stdout)[0]["outcome"] == "marginal"
    assert [e.outcome for e in Store(root).list_experiments()] == ["marginal"]
    monkeypatch.chdir(root)
    assert [e.outcome for e in kexp.list_experiments()] == ["marginal"]
    script = "import kernel_exp_dataclass as k; print(k.top_experiments()[0]['outcome'])"
    env = {k: v for k, v in os.environ.items() if k != "KEXP_ROOT"}
    out = subprocess.run(
        [sys.executable, "-c", script], cwd=root, env=env, capture_output=True, text=True
    )
    assert out.stdout.strip() == "marginal", out.stderr


def test_kexp_settings_says_where_each_value_came_from(store: Store) -> None:
    (store.root / "kexp.toml").write_text("\n# noise\nimprovement_above = 1.05\ntop_default = 5\n")
    result = kexp_cli(store.root, "settings")
    assert result.exit_code == 0, result.output
    lines = {line.split()[0]: line for line in result.stdout.splitlines()}
    assert set(lines) == {field.name for field in dataclasses.fields(Settings)}
    assert lines["improvement_above"].split()[1:3] == ["1.05", "kexp.toml:3"]
    assert lines["top_default"].split()[1:3] == ["5", "kexp.toml:4"]
    assert lines["regression_below"].split()[1:] == ["0.99", "default"]
    as_json = {v["name"]: v for v in json.loads(kexp_cli(store.root, "settings", "--json").stdout)}
    assert as_json["improvement_above"] == {
        "name": "improvement_above",
        "value": 1.05,
        "default": 1.01,
        "origin": "kexp.toml:3",
    }
    assert [v.to_dict() for v in effective_settings(store.root)] == list(as_json.values())
    # top's default count is the team's now.
    for _ in range(7):
        store.create_experiment(**experiment_fields())
    assert len(json.loads(kexp_cli(store.root, "top", "--json").stdout)) == 5


def test_no_file_means_the_defaults(tmp_path: Path) -> None:
    assert load_settings(tmp_path) is DEFAULT_SETTINGS
    assert all(v.origin == "default" for v in effective_settings(tmp_path))


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (
            "improvment_above = 1.05\n",
            "kexp.toml:1: 'improvment_above' is not a kexp setting; "
            "did you mean 'improvement_above'?",
        ),
        (
            "\nimprovement_above = 'high'\n",
            "kexp.toml:2: improvement_above must be a number, "
            "not 'high'; for example 'improvement_above = 1.01'",
        ),
        ("improvement_above = true\n", "kexp.toml:1: improvement_above must be a number, not True"),
        ("top_default = 2.5\n", "kexp.toml:1: top_default must be a whole number, not 2.5"),
        ("min_id_prefix = 2\n", "kexp.toml:1: min_id_prefix must be between 4 and 16, not 2"),
        ("lock_timeout_s = 0\n", "kexp.toml:1: lock_timeout_s must be at least 0.001, not 0.0"),
        ("improvement_above = nan\n", "kexp.toml:1: improvement_above must be a finite number"),
        (
            "regression_below = 1.2\nimprovement_above = 1.1\n",
            "kexp.toml:2: improvement_above (1.1) must not be below regression_below (1.2)",
        ),
        ("a = 1\nimprovement_above = = 2\n", "kexp.toml:2:21: not valid TOML"),
        ("[thresholds]\nimprovement_above = 1.05\n", "'thresholds' is not a kexp setting"),
        ("\xff\n", "not UTF-8 text; save it as UTF-8"),
    ],
)
def test_a_bad_file_is_one_line_naming_file_and_line(
    store: Store, text: str, expected: str
) -> None:
    path = store.root / "kexp.toml"
    path.write_bytes(text.encode("utf-8") if not text.startswith("\xff") else b"\xff\n")
    before = path.read_bytes()
    with pytest.raises(SettingsFileError) as error:
        Store(store.root)
    assert expected in str(error.value)
    assert str(path) in str(error.value)
    result = kexp_cli(store.root, "top")
    assert result.exit_code == 2
    assert result.stderr.count("\n") == 1 and expected in result.stderr
    assert path.read_bytes() == before  # never changed


def test_a_huge_or_linked_settings_file_is_refused_unread(store: Store, tmp_path: Path) -> None:
    path = store.root / "kexp.toml"
    path.write_text("# " + "x" * 70_000 + "\n")
    with pytest.raises(SettingsFileError, match="larger than 64 KiB"):
        Store(store.root)
    path.unlink()
    outside = tmp_path / "elsewhere.toml"
    outside.write_text("improvement_above = 1.05\n")
    path.symlink_to(outside)
    with pytest.raises(SettingsFileError, match="cannot be read"):
        Store(store.root)


def test_settings_given_in_python_win_over_the_file(store: Store) -> None:
    (store.root / "kexp.toml").write_text("improvement_above = 1.05\n")
    assert Store(store.root).settings.improvement_above == 1.05
    chosen = dataclasses.replace(DEFAULT_SETTINGS, improvement_above=1.2)
    assert Store(store.root, settings=chosen).settings is chosen
