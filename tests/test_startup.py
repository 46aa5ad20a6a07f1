"""Start-up cost: ``import kexp``, ``kexp --version`` and ``kexp --help`` load no heavy module.

Each check runs a real, fresh Python process (this one has imported everything already)
and looks at the modules it imported, from ``-X importtime`` or ``sys.modules``.
"""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

#: What ``import kexp`` and the CLI's --help/--version must not load: YAML, the schema
#: checkers, GitPython, and the library behind them.
HEAVY = (
    "yaml",
    "jsonschema",
    "fastjsonschema",
    "git",
    "kexp.storage.store",
    "kexp.format.fileformat",
    "kexp.storage.history",
    "kexp.storage.cache",
    "kexp.storage.listing",
    "kexp.core.model",
    "mcp",
    "pydantic",
    "pyarrow",
    "kexp.cli.mcp",
    "kexp.measure.timings",
)


def _python(*args: str) -> subprocess.CompletedProcess[str]:
    env = {key: value for key, value in os.environ.items() if key != "PYTHONPROFILEIMPORTTIME"}
    return subprocess.run(
        [sys.executable, *args], capture_output=True, text=True, env=env, timeout=120
    )


def _imported(stderr: str) -> set[str]:
    """The modules named by ``-X importtime`` lines."""
    return {
        line.rsplit("|", 1)[1].strip()
        for line in stderr.splitlines()
        if line.startswith("import time:") and "|" in line
    }


@pytest.mark.parametrize("option", ["--version", "-V", "--help", "-h"])
def test_version_and_help_load_no_heavy_module(option: str) -> None:
    result = _python("-X", "importtime", "-m", "kexp", option)
    assert result.returncode == 0, result.stderr[-2000:]
    modules = _imported(result.stderr)
    assert "click" in modules and "kexp.cli.main" in modules  # the parse worked
    assert not [name for name in HEAVY if name in modules]
    # Of kexp itself only the package, the CLI, the command modules, the version (one
    # constant) and the output formats --format offers (the standard library only).
    allowed = {"kexp", "kexp.__main__", "kexp.cli.main", "kexp.cli.commands", "kexp.core.version"}
    allowed |= {"kexp.format.outputs", "kexp.cli", "kexp.core", "kexp.format"}  # + faces
    extra = {
        name
        for name in modules
        if name.startswith("kexp.")
        and name not in allowed
        and not name.startswith("kexp.cli.commands.")
    }
    assert not extra
    if option in ("--version", "-V"):
        assert "kexp, version" in result.stdout
    else:
        assert "Commands:" in result.stdout


@pytest.mark.parametrize(
    ("command", "module"),
    [("skill", "agents"), ("context", "agents"), ("similar", "agents"), ("add", "record")],
)
def test_commands_beside_mcp_never_load_the_mcp_sdk(command: str, module: str) -> None:
    """The agents' commands share a module with kexp mcp: loading them (their help)
    imports no part of the MCP SDK, nor the timing readers."""
    code = (
        "import sys\n"
        "from kexp.cli.main import main\n"
        f"sys.argv = ['kexp', {command!r}, '--help']\n"
        "try:\n"
        "    main()\n"
        "except SystemExit:\n"
        "    pass\n"
        "print('MODULES', *sorted(sys.modules))\n"
    )
    result = _python("-c", code)
    assert result.returncode == 0, result.stderr[-2000:]
    (line,) = [line for line in result.stdout.splitlines() if line.startswith("MODULES ")]
    modules = set(line.split()[1:])
    assert f"kexp.cli.commands.{module}" in modules  # the command's module was loaded
    assert not [name for name in modules if name.split(".")[0] in ("mcp", "pydantic", "pyarrow")]
    assert "kexp.cli.mcp" not in modules and "kexp.measure.timings" not in modules


def test_help_still_lists_every_command_with_its_short_help() -> None:
    from kexp.cli.main import main

    shown = _python("-m", "kexp", "--help").stdout
    lines = shown.splitlines()
    for name, command in main.commands.items():
        line = next((line for line in lines if line.split()[:1] == [name]), "")
        assert command.get_short_help_str(limit=200)[:30] in line, name


def test_import_kexp_is_light_and_keeps_its_public_names() -> None:
    code = (
        "import sys\n"
        "import kexp\n"
        "print('LOADED', *sorted(m for m in sys.modules if m == 'kexp' or m.startswith(("
        + ", ".join(repr(f"{name}.") for name in HEAVY)
        + ")) or m in "
        + repr(HEAVY)
        + "))\n"
        "print('VERSION', kexp.__version__)\n"
        "from kexp import top_experiments, KernelExperiment, ValidationError, DEFAULT_SETTINGS\n"
        "print('STORE', kexp.Store.__module__, kexp.Store.__name__)\n"
        "print('TOP', top_experiments is kexp.top_experiments, top_experiments.__module__)\n"
        "print('MISSING', [n for n in kexp.__all__ if not hasattr(kexp, n)])\n"
        "print('DIR', sorted(set(kexp.__all__) - set(dir(kexp))))\n"
        "import kexp.format.validate\n"
        "print('VALIDATE', callable(kexp.validate), type(kexp.validate).__name__)\n"
        "print('SUBMODULE', kexp.format.__name__, kexp.gitops.__name__)\n"
    )
    result = _python("-c", code)
    assert result.returncode == 0, result.stderr
    lines = dict(line.split(" ", 1) for line in result.stdout.splitlines())
    assert lines["LOADED"] == "kexp"  # nothing heavy, nothing of the library
    import kexp

    assert lines["VERSION"] == kexp.__version__
    assert isinstance(kexp.__version__, str) and "__version__" in vars(kexp)
    assert lines["STORE"] == "kexp.storage.store Store"
    assert lines["TOP"] == "True kexp"
    assert lines["MISSING"] == "[]"
    assert lines["DIR"] == "[]"
    # The function kexp.validate is not replaced by the submodule of the same name.
    assert lines["VALIDATE"] == "True function"
    assert lines["SUBMODULE"] == "kexp.format kexp.gitops"


def test_lazy_names_are_the_library_objects() -> None:
    import kexp
    from kexp.core import errors, model, problems, settings
    from kexp.storage import history as changelog
    from kexp.storage import store

    assert kexp.Store is store.Store
    assert kexp.KernelExperiment is model.KernelExperiment
    assert kexp.DEFAULT_SETTINGS is settings.DEFAULT_SETTINGS
    assert kexp.HistoryEntry is changelog.HistoryEntry
    assert kexp.ValidationError is errors.ValidationError
    assert kexp.Problem is problems.Problem
    with pytest.raises(AttributeError):
        kexp.no_such_name  # noqa: B018


def test_add_status_choices_are_the_model_statuses() -> None:
    from kexp.cli.commands.record import _STATUSES
    from kexp.core.model import STATUSES

    assert _STATUSES == STATUSES


def test_the_command_table_is_the_commands_own() -> None:
    """``kexp --help`` lists the commands from ``kexp.cli.main.COMMAND_TABLE`` without
    importing a command module: the table holds every command of the modules, with the
    first paragraph of its help (update it when a command or its help changes)."""
    import importlib
    import pkgutil

    import kexp.cli.commands
    from kexp.cli.main import COMMAND_TABLE

    found: dict[str, tuple[str, str]] = {}
    modules = [m.name for m in pkgutil.iter_modules(kexp.cli.commands.__path__)]
    for module in modules:
        for command in getattr(
            importlib.import_module(f"kexp.cli.commands.{module}"), "COMMANDS", ()
        ):
            text = command.help or ""
            end = text.find("\n\n")
            found[command.name] = (module, " ".join((text if end < 0 else text[:end]).split()))
            assert not command.hidden and not command.deprecated and not command.short_help
    assert found == COMMAND_TABLE


@pytest.mark.parametrize("columns", ["40", "60", "80", "200", ""])
def test_the_listed_commands_are_what_click_lists(columns: str) -> None:
    """The group's help, from the table, equals click's own listing of the commands
    (their modules imported), at any terminal width; and the width is shutil's."""
    import shutil

    import click

    from kexp.cli.main import main, terminal_columns

    environment = {"COLUMNS": columns} if columns else {}
    saved = os.environ.get("COLUMNS")
    os.environ.pop("COLUMNS", None)
    os.environ.update(environment)
    try:
        assert terminal_columns() == shutil.get_terminal_size().columns
        context = main.make_context("kexp", ["--root", "."])
        lazy, eager = context.make_formatter(), context.make_formatter()
        assert lazy.width == click.HelpFormatter(max_width=100).width
        main.format_commands(context, lazy)
        click.Group.format_commands(main, context, eager)
        assert lazy.getvalue() == eager.getvalue() and "validate" in lazy.getvalue()
    finally:
        os.environ.pop("COLUMNS", None)
        if saved is not None:
            os.environ["COLUMNS"] = saved
