"""The client configuration ``kexp skill install --mcp`` writes, as a client uses it: the
server launched exactly as the file says (command, args, env) by the MCP SDK's own stdio
client, from another folder, with a PATH that has neither this kexp nor its virtual
environment (a client started from a desktop or another shell), or another ``kexp``."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from conftest import experiment_fields, git, init_repo

pytest.importorskip("mcp")
import anyio
from mcp import ClientSession, StdioServerParameters, stdio_client

from kexp import Store
from kexp.agents.skill import MCP_CONFIGS
from kexp.cli.main import main

#: The kexp command installed beside the tests' Python (a virtual environment's).
KEXP = Path(sys.executable).parent / "kexp"
#: A PATH without the virtual environment (git, sh: the system's).
SYSTEM_PATH = "/usr/bin:/bin"


def launch(entry: dict[str, Any], cwd: Path, path: str, workspace: Path) -> list[Any]:
    """Start the server as ``entry`` says (``${workspaceFolder}`` read as Cursor reads
    it) in ``cwd`` with ``PATH=path``: the names of its tools and its answer to ``top``."""
    given = entry.get("env", {}).items()
    env = {name: value.replace("${workspaceFolder}", str(workspace)) for name, value in given}
    params = StdioServerParameters(
        command=entry["command"], args=entry["args"], env={**env, "PATH": path}, cwd=str(cwd)
    )
    answers: list[Any] = []

    async def main() -> None:
        async with stdio_client(params) as (read, write), ClientSession(read, write) as session:
            await session.initialize()
            answers.append(sorted(tool.name for tool in (await session.list_tools()).tools))
            result = await session.call_tool("top", {})
            text = result.content[0].text  # type: ignore[union-attr]
            answers.append(json.loads(text) if not result.is_error else text)

    anyio.run(main)
    return answers


@pytest.mark.skipif(not KEXP.is_file(), reason="no kexp command beside this Python")
@pytest.mark.parametrize("client", ["claude", "cursor"])
def test_the_written_configuration_starts_this_kexp_whatever_the_clients_path(
    tmp_path: Path, client: str
) -> None:
    """The trial: the configuration said ``"command": "kexp"``, which a client started
    outside the activated virtual environment cannot find (or finds another kexp), and a
    store in a folder below got a relative ``--root``, wrong from any other folder."""
    project = init_repo(tmp_path / "proj")
    (project / "src").mkdir()
    store = project / "perf"
    (store / "experiments").mkdir(parents=True)
    made = Store(store).create_experiment(**experiment_fields())
    other = tmp_path / "other-bin"  # another kexp on the PATH, which must not serve
    other.mkdir()
    (other / "kexp").write_text("#!/bin/sh\necho 'another kexp' >&2\nexit 3\n")
    (other / "kexp").chmod(0o755)
    path = f"{other}:{SYSTEM_PATH}"

    installed = subprocess.run(
        [str(KEXP), "skill", "install", f"--{client}", "--mcp"],
        cwd=store,
        env={"HOME": str(tmp_path), "PATH": path},
        capture_output=True,
        text=True,
        check=False,
    )
    assert installed.returncode == 0, installed.stderr
    config = project / MCP_CONFIGS[client]
    entry = json.loads(config.read_text(encoding="utf-8"))["mcpServers"]["kexp"]
    said = [line for line in installed.stdout.splitlines() if line.startswith(f"wrote {config}")]
    assert len(said) == 1 and entry["command"] in said[0], installed.stdout

    # Claude Code started in src/, Cursor from elsewhere: the server serves perf/.
    tools, top = launch(entry, project / "src" if client == "claude" else tmp_path, path, project)
    assert {"consult", "record", "top", "sync"} <= set(tools)
    assert [row["id"] for row in top] == [made.id]


def test_a_root_that_holds_no_store_is_said_to_be_wrong(tmp_path: Path) -> None:
    """A server started on a --root that is not the store (a relative one read from
    another folder) says the root is wrong, never to kexp init a second, empty store."""
    project = init_repo(tmp_path / "proj")
    (project / "src").mkdir()
    (project / "perf" / "experiments").mkdir(parents=True)
    entry = {"command": sys.executable, "args": ["-m", "kexp", "mcp", "--root", "perf"]}
    tools, said = launch(entry, project / "src", os.environ["PATH"], project)
    assert "top" in tools and isinstance(said, str)
    assert "the root is wrong" in said and str(project / "src" / "perf") in said
    assert "kexp init" not in said and "\n" not in said.strip()


def test_skill_install_mcp_without_the_sdk_says_how_to_install_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Without the MCP SDK the client's launch would exit 2: the install warns, in one
    line, with the pip command for the Python the configuration runs."""
    project = init_repo(tmp_path / "proj")
    (project / "experiments").mkdir()
    monkeypatch.chdir(project)
    for name in [n for n in sys.modules if n == "mcp" or n.startswith("mcp.")]:
        monkeypatch.setitem(sys.modules, name, None)  # as if never installed
    monkeypatch.setitem(sys.modules, "mcp", None)
    result = CliRunner().invoke(main, ["skill", "install", "--claude", "--mcp"])
    assert result.exit_code == 0, result.output
    assert (project / ".mcp.json").is_file()
    warned = [line for line in result.stderr.splitlines() if "warning" in line]
    assert len(warned) == 1, result.stderr
    assert 'pip install "kexp[mcp]"' in warned[0] and sys.executable in warned[0]


@pytest.mark.skipif(not KEXP.is_file(), reason="no kexp command beside this Python")
def test_the_configuration_holds_this_machines_paths_and_is_kept_out_of_git(
    tmp_path: Path,
) -> None:
    """The trial: .mcp.json names Alice's python and her checkout's absolute --root;
    nothing said not to commit it, so ``git add -A`` did, and Bob, cloning on the same
    machine, started a server that recorded into Alice's store. Now the install says in
    one line that the file is this machine's, and keeps it (and Cursor's) out of git
    (.git/info/exclude: local, never committed); a file committed all the same does not
    serve Bob Alice's store: each call says whose it is and what to run."""
    alice = init_repo(tmp_path / "alice")
    run = {"env": {"HOME": str(tmp_path), "PATH": SYSTEM_PATH}, "capture_output": True}
    subprocess.run([str(KEXP), "init"], cwd=alice, check=True, **run)  # type: ignore[call-overload]
    said = []
    for client in ("claude", "cursor"):
        done = subprocess.run(
            [str(KEXP), "skill", "install", f"--{client}", "--mcp"],
            cwd=alice, text=True, check=True, **run,
        )  # type: ignore[call-overload]  # fmt: skip
        config = MCP_CONFIGS[client].as_posix()
        lines = [line for line in done.stdout.splitlines() if "not for committing" in line]
        assert len(lines) == 1 and lines[0].startswith(config), done.stdout
        assert ".git/info/exclude" in lines[0] and "each teammate" in lines[0], lines[0]
        said.append(lines[0])
    exclude = (alice / ".git" / "info" / "exclude").read_text(encoding="utf-8")
    assert "/.mcp.json" in exclude.splitlines() and "/.cursor/mcp.json" in exclude.splitlines()
    git(alice, "add", "-A")
    assert ".mcp.json" not in git(alice, "diff", "--cached", "--name-only"), "staged"
    assert "skills" in git(alice, "diff", "--cached", "--name-only")  # the skill is shared
    git(alice, "commit", "-q", "-m", "the skill")

    # Committed all the same (forced): Bob's clone on this machine serves no one's store.
    git(alice, "add", "-f", ".mcp.json")
    git(alice, "commit", "-q", "-m", "the config, forced")
    bob = tmp_path / "bob"
    git(tmp_path, "clone", "-q", str(alice), str(bob))
    entry = json.loads((bob / ".mcp.json").read_text(encoding="utf-8"))["mcpServers"]["kexp"]
    assert str(alice) in entry["args"]  # Alice's checkout, by its absolute path
    tools, top = launch(entry, bob, SYSTEM_PATH, bob)
    assert "record" in tools and isinstance(top, str), top
    assert str(alice) in top and str(bob) in top and "kexp skill install" in top, top
    for store in (alice, bob):  # no experiment written anywhere (README.md: the store's)
        assert [p.name for p in (store / "experiments").rglob("*.md")] == ["README.md"]

    # Installing again in a checkout that tracks the file says so, and how to stop.
    again = subprocess.run(
        [str(KEXP), "skill", "install", "--claude", "--mcp"],
        cwd=alice, text=True, check=True, **run,
    )  # type: ignore[call-overload]  # fmt: skip
    assert "git rm --cached .mcp.json" in again.stdout + again.stderr, again
