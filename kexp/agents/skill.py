"""The agent skill ``kernel-exp-history``: where it lives, its text and how to install it; and
the client configuration that starts ``kexp mcp``.

The Python twin of ``kexp skill install [--claude | --cursor | --dir DIR]`` is
:func:`install_skill`. It copies the skill folder (``SKILL.md`` and ``references/``)
into ``.claude/skills/`` or ``.cursor/skills/`` of the project (the git repository
holding the working directory, else the working directory), or into any skills folder.
Installing again replaces the skill's files with this version's; other files there are
left alone.

With ``--mcp``, :func:`install_mcp_config` adds the ``kexp`` server to the client's
project configuration, ``.mcp.json`` (Claude Code) or ``.cursor/mcp.json`` (Cursor):
merged into the file (other servers and keys kept), replaced atomically.
"""

from __future__ import annotations

import importlib.util
import json
import os
import shlex
import shutil
import subprocess
import sys
import warnings
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from kexp.core.advice import INSTALL_MCP_SDK, OWN_MCP_CONFIG, UNTRACK_MCP_CONFIG
from kexp.core.errors import KexpError, KexpWarning
from kexp.storage import atomic

#: The skill's name: its folder name and the ``name`` in its front-matter.
SKILL_NAME = "kernel-exp-history"
#: Where each agent looks for project skills, relative to the project.
TARGETS = {"claude": Path(".claude") / "skills", "cursor": Path(".cursor") / "skills"}

_PACKAGED = Path(__file__).parent.parent / "_data" / "skill" / SKILL_NAME
_SOURCE_TREE = Path(__file__).parents[2] / "skill" / SKILL_NAME


def skill_source() -> Path:
    """The skill folder shipped with kexp (packaged, or the source tree when editable)."""
    for folder in (_PACKAGED, _SOURCE_TREE):
        if (folder / "SKILL.md").is_file():
            return folder
    raise KexpError(
        f"the {SKILL_NAME} skill is missing from this kexp installation "
        f"(looked in {_PACKAGED} and {_SOURCE_TREE}); reinstall kexp"
    )


def skill_text() -> str:
    """The skill's text, its SKILL.md: what ``kexp skill show`` prints."""
    return (skill_source() / "SKILL.md").read_text(encoding="utf-8")


def skill_files() -> list[Path]:
    """The skill's files, relative to its folder (caches and hidden files left out)."""
    source = skill_source()
    return sorted(
        path.relative_to(source)
        for path in source.rglob("*")
        if path.is_file()
        and not any(
            part.startswith(".") or part == "__pycache__" for part in path.relative_to(source).parts
        )
    )


def project_root(start: Path | str | None = None) -> Path:
    """The top of the git repository holding ``start`` (default: the working
    directory), else ``start`` itself."""
    here = Path(start or Path.cwd()).resolve()
    for folder in (here, *here.parents):
        if (folder / ".git").exists():
            return folder
    return here


def skill_destination(
    target: str = "claude",
    *,
    directory: Path | str | None = None,
    project: Path | str | None = None,
) -> Path:
    """Where :func:`install_skill` puts the skill folder.

    ``directory`` (a skills folder) wins; otherwise ``target`` (``claude`` or
    ``cursor``) under the project root (see :func:`project_root`).
    """
    if directory is not None:
        return Path(directory) / SKILL_NAME
    if target not in TARGETS:
        raise KexpError(f"unknown skill target {target!r}: use {', '.join(TARGETS)} or a directory")
    return project_root(project) / TARGETS[target] / SKILL_NAME


#: The Python reference, relative to the skill's folder, and the folder its docstring
#: tells an agent to put on ``sys.path`` as shipped (the Claude Code install's).
REFERENCE = Path("references") / "kexp_agent.py"
_SHIPPED_REFERENCES = f"{TARGETS['claude'].as_posix()}/{SKILL_NAME}/references"


def _reference_here(data: bytes, destination: Path, project: Path | str | None) -> bytes:
    """The reference's text naming the folder it is installed in (relative to the
    project when inside it, else absolute) where it tells an agent how to import it."""
    folder = (destination / REFERENCE.parent).resolve()
    top = project_root(project)
    here = folder.relative_to(top).as_posix() if folder.is_relative_to(top) else str(folder)
    return data.replace(f'"{_SHIPPED_REFERENCES}"'.encode(), json.dumps(here).encode())


def install_skill(
    target: str = "claude",
    *,
    directory: Path | str | None = None,
    project: Path | str | None = None,
) -> list[Path]:
    """Copy the skill into an agent's skills folder; returns the files written.

    ``target`` is ``claude`` (``.claude/skills/``) or ``cursor`` (``.cursor/skills/``)
    of the project; ``directory`` installs into that skills folder instead. Each file
    is replaced atomically.
    """
    source = skill_source()
    destination = skill_destination(target, directory=directory, project=project)
    written: list[Path] = []
    try:
        for relative in skill_files():
            path = destination / relative
            path.parent.mkdir(parents=True, exist_ok=True)
            data = (source / relative).read_bytes()
            if relative == REFERENCE:
                data = _reference_here(data, destination, project)
            atomic.replace(path, data)
            written.append(path)
    except OSError as exc:
        raise KexpError(
            f"cannot install the skill into {destination}: {exc.strerror or exc}"
        ) from None
    return written


#: Where each client reads a project's MCP servers, relative to the project.
MCP_CONFIGS = {"claude": Path(".mcp.json"), "cursor": Path(".cursor") / "mcp.json"}
#: The name of kexp's server in a client's configuration.
MCP_SERVER_NAME = "kexp"


def server_command() -> list[str]:
    """The absolute command that runs this kexp: the Python running it with ``-m kexp``
    (a virtual environment's, pipx's or the system's alike), so that a client started
    outside the activated environment runs it, and never another ``kexp`` on its PATH.
    The interpreter's path is kept as it is (a venv's ``python`` is a link that
    resolving would leave the venv by)."""
    if sys.executable:
        return [os.path.abspath(sys.executable), "-m", "kexp"]
    found = shutil.which("kexp")  # an embedded Python that cannot name itself
    return [os.path.abspath(found) if found else "kexp"]


def mcp_server_entry(
    target: str = "claude",
    *,
    project: Path | str | None = None,
    store: Path | str | None = None,
    command: Sequence[str] | None = None,
) -> dict[str, Any]:
    """The ``mcpServers`` entry that runs ``kexp mcp`` for ``target``'s client.

    The command is ``command`` (default :func:`server_command`: this kexp, by its
    absolute path). Claude Code starts a project's servers in the folder it was started
    in and has no variable naming the project, so the store is named by its absolute
    path (``--root``); Cursor's working directory is its own, so the store is named by
    ``KEXP_ROOT`` from ``${workspaceFolder}`` (its absolute path when outside the
    project). Without a store (None) the server finds one where it runs.
    """
    if target not in MCP_CONFIGS:
        raise KexpError(f"unknown client {target!r}: use {', '.join(MCP_CONFIGS)}")
    program, *rest = command if command is not None else server_command()
    entry: dict[str, Any] = {"command": program, "args": [*rest, "mcp"]}
    top = project_root(project)
    folder = Path(store).resolve() if store is not None else None
    if target == "claude":
        if folder is not None:
            entry["args"] += ["--root", str(folder)]
    elif folder is None or folder.is_relative_to(top):
        where = folder.relative_to(top).as_posix() if folder is not None else "."
        entry["env"] = {"KEXP_ROOT": "${workspaceFolder}" + ("" if where == "." else f"/{where}")}
    else:
        entry["env"] = {"KEXP_ROOT": str(folder)}
    return entry


def server_line(entry: dict[str, Any]) -> str:
    """What a client runs for ``entry``, in one line: its command and arguments, after
    its environment (``KEXP_ROOT=... /venv/bin/python -m kexp mcp``)."""
    env = [f"{name}={value}" for name, value in entry.get("env", {}).items()]
    return shlex.join([*env, entry["command"], *entry.get("args", [])])


def installed_server(path: Path | str) -> str:
    """What the client configuration at ``path`` runs for kexp's server, in one line
    (:func:`server_line`)."""
    data = json.loads(Path(path).read_text(encoding="utf-8-sig"))
    return server_line(data["mcpServers"][MCP_SERVER_NAME])


def mcp_sdk_missing() -> bool:
    """Whether the MCP SDK ``kexp mcp`` needs is missing beside this kexp (the
    Python :func:`server_command` names)."""
    try:
        return importlib.util.find_spec("mcp") is None
    except (ImportError, ValueError):
        return True


def install_mcp_config(
    target: str = "claude", *, project: Path | str | None = None, store: Path | str | None = None
) -> Path:
    """Add (or replace) the ``kexp`` server in ``target``'s project configuration
    (:data:`MCP_CONFIGS`), keeping every other server and key; returns the file.

    A file that is not a JSON object (or whose ``mcpServers`` is not one) is an error,
    and nothing is written. Without the MCP SDK beside this kexp the file is written,
    with a :class:`~kexp.core.errors.KexpWarning` saying how to install it (the
    client's ``kexp mcp`` would exit until then).
    """
    entry = mcp_server_entry(target, project=project, store=store)
    path = project_root(project) / MCP_CONFIGS[target]
    data: dict[str, Any] = {}
    if path.exists():
        try:
            data = json.loads(path.read_text(encoding="utf-8-sig") or "{}")
        except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
            raise KexpError(f"cannot read {path} as JSON ({exc}): fix or move it first") from None
        if not isinstance(data, dict) or not isinstance(data.get("mcpServers", {}), dict):
            raise KexpError(
                f'{path} is not a client configuration ({{"mcpServers": {{...}}}}): '
                "fix or move it first"
            )
    data.setdefault("mcpServers", {})[MCP_SERVER_NAME] = entry
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        atomic.replace(path, json.dumps(data, indent=2, ensure_ascii=False) + "\n")
    except OSError as exc:
        raise KexpError(f"cannot write {path}: {exc.strerror or exc}") from None
    if mcp_sdk_missing():
        warnings.warn(
            KexpWarning(
                f"the MCP SDK is not installed beside this kexp, so the client's kexp mcp "
                f"will exit: {INSTALL_MCP_SDK.say(python=shlex.quote(sys.executable or 'python'))}"
            ),
            stacklevel=2,
        )
    return path


def _git(top: Path, *args: str) -> subprocess.CompletedProcess[str] | None:
    """``git args`` in ``top`` (None: no git to run)."""
    try:
        return subprocess.run(
            ["git", *args], cwd=top, capture_output=True, text=True, check=False, timeout=30
        )
    except (OSError, subprocess.SubprocessError):
        return None


def keep_local(path: Path, target: str = "claude") -> str:
    """Keep the client configuration at ``path`` out of git, and say so in one line.

    It names this machine's Python and (Claude Code's) this checkout's store by their
    absolute paths: committed, a teammate's client on this machine serves this
    checkout's store, and on another machine does not start. So it is added to the
    repository's ``.git/info/exclude`` (local, never committed) unless git ignores it
    already; a file git tracks is left alone, and the line says how to stop tracking it.
    """
    top = project_root(path.parent.parent if path.parent.name == ".cursor" else path.parent)
    relative = path.resolve().relative_to(top).as_posix()
    own = OWN_MCP_CONFIG.say(client=target)
    paths = "its Python, the store" if target == "claude" else "its Python"
    said = f"{relative} holds this machine's paths ({paths}): not for committing, {own}"
    if not (top / ".git").exists():
        return said
    tracked = _git(top, "ls-files", "--error-unmatch", "--", relative)
    if tracked is None:
        return said
    if tracked.returncode == 0:
        untrack = UNTRACK_MCP_CONFIG.say(path=relative)
        return f"{said}; git tracks it: {untrack}"
    ignored = _git(top, "check-ignore", "-q", "--", relative)
    if ignored is not None and ignored.returncode == 0:
        return f"{said}; git ignores it already"
    where = _git(top, "rev-parse", "--git-path", "info/exclude")
    if where is None or where.returncode != 0:
        return said
    exclude = top / where.stdout.strip()
    try:
        exclude.parent.mkdir(parents=True, exist_ok=True)
        old = exclude.read_text(encoding="utf-8") if exclude.exists() else ""
        line = f"/{relative}"
        if line not in old.splitlines():
            with exclude.open("a", encoding="utf-8") as out:
                out.write(("" if not old or old.endswith("\n") else "\n") + line + "\n")
    except OSError:
        return said
    return f"{said}; kept out of git by .git/info/exclude (local, never committed)"


def foreign_config(root: Path, here: Path | None = None) -> str | None:
    """Why a server started in ``here`` (default: the working directory) on the store
    ``root`` serves another checkout's store: the client's project configuration there
    (``.mcp.json``) names ``root``, a store of another checkout whose own configuration
    names it too (the file was written there and committed: a clone's copy). None when
    it does not, or cannot be told."""
    there = project_root(here)
    theirs = project_root(root)
    if there == theirs:
        return None

    def names_root(top: Path) -> bool:
        try:
            data = json.loads((top / MCP_CONFIGS["claude"]).read_text(encoding="utf-8-sig"))
            args = list(data["mcpServers"][MCP_SERVER_NAME]["args"])
            return Path(args[args.index("--root") + 1]).resolve() == root.resolve()
        except (OSError, ValueError, TypeError, KeyError, IndexError, AttributeError):
            return False

    if not (names_root(there) and names_root(theirs)):
        return None
    config = there / MCP_CONFIGS["claude"]
    return (
        f"{config} starts kexp mcp on {root}, the store of another checkout ({theirs}), "
        f"not this one ({there}): the file holds the paths of the machine and checkout it "
        f"was written in, committed to git: "
        f"{UNTRACK_MCP_CONFIG.say(path=MCP_CONFIGS['claude'].as_posix())}"
    )
