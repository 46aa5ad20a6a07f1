"""How the MCP server (:mod:`kexp.cli.mcp`) runs a tool: its arguments checked before
anything is read (:class:`ToolServer`), one call at a time on the store opened anew,
its warnings collected and kexp's errors given as one-line tool errors in the tools'
words (:class:`ToolCalls`)."""

from __future__ import annotations

import os
import threading
import warnings
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, TypeVar

from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp.types import (
    CallToolResult,
    ContentBlock,
    InputRequiredResult,
    TextContent,
    Tool,
    ToolAnnotations,
)

from kexp.cli.commands.terminal import json_text
from kexp.cli.toolargs import Arguments
from kexp.core.advice import WRONG_ROOT, for_tools
from kexp.core.errors import KexpError, StoreNotFoundError, ValidationError
from kexp.core.version import __version__
from kexp.storage.sources import EXPERIMENTS_DIR
from kexp.storage.store import Store

__all__ = ["ToolCalls", "ToolServer", "one_line"]


_F = TypeVar("_F", bound=Callable[..., CallToolResult])


def one_line(exc: BaseException) -> str:
    """kexp's message on one line, its advice in the tools' words (``all_refs: true``,
    not ``--all-refs``); a validation error with each problem and its hint."""
    if isinstance(exc, ValidationError):
        problems = [p for p in exc.problems if p.severity == "error"] or exc.problems
        details = "; ".join(
            f"{p.field + ': ' if p.field else ''}{p.message}" + (f" ({p.hint})" if p.hint else "")
            for p in problems
        )
        text = f"{exc.args[0]}: {details}" if details else str(exc.args[0])
    else:
        text = str(exc)
    return for_tools(" ".join(text.split()))


class ToolServer(MCPServer[Any]):
    """The SDK's server, its tools' arguments checked first
    (:class:`kexp.cli.toolargs.Arguments`: JSON of the listed types, never converted)
    and listed as the only ones (``additionalProperties: false``)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.arguments: dict[str, Arguments] = {}
        #: Resolves a call's ``exp_id`` (raising kexp's error for an id no experiment
        #: has), to say that first when other arguments are wrong too.
        self.resolve: Callable[[dict[str, Any]], object] | None = None

    def register(self, annotations: ToolAnnotations, name: str | None = None) -> Callable[[_F], _F]:
        """A decorator adding a function as a tool named ``name`` (default: the
        function's), its text answer as it is."""

        def add(fn: _F) -> _F:
            self.add_tool(fn, name=name, annotations=annotations, structured_output=False)
            self.arguments[name or fn.__name__] = Arguments(fn)
            return fn

        return add

    async def list_tools(self) -> list[Tool]:
        listed = await super().list_tools()
        for tool in listed:
            tool.input_schema = {**tool.input_schema, "additionalProperties": False}
        return listed

    async def call_tool(
        self, name: str, arguments: dict[str, Any], context: Context[Any, Any] | None = None
    ) -> CallToolResult | InputRequiredResult:
        checks = self.arguments.get(name)
        if checks is not None:
            try:
                checks.check(arguments)
            except KexpError as exc:
                unknown = self._id_problem(arguments)
                said = f"{unknown}; and {exc}" if unknown else str(exc)
                raise ToolError(f"Error executing tool {name}: {said}") from None
        return await super().call_tool(name, arguments, context)

    def _id_problem(self, arguments: dict[str, Any]) -> str | None:
        """What is wrong with a call's ``exp_id`` (no experiment has it, several do, it
        is no id), in one line; None when it names one experiment, or there is none."""
        if self.resolve is None or not isinstance(arguments.get("exp_id"), str):
            return None
        try:
            self.resolve(arguments)
        except KexpError as exc:
            return one_line(exc)
        return None


class ToolCalls:
    """The tools' bodies, on one store, one call at a time."""

    def __init__(self, root: Path | None) -> None:
        self.root = root
        self._lock = threading.Lock()
        self._started_in = os.getcwd()

    def _in_working_directory(self) -> None:
        """Back in the folder the server was started in when that folder was removed and
        made again (a checkout removed and cloned again at its path): the store found
        from it, and the relative paths an agent gives, are the new folder's."""
        try:
            os.getcwd()
        except FileNotFoundError:
            try:
                os.chdir(self._started_in)
            except OSError:
                raise KexpError(
                    f"the folder this server was started in, {self._started_in}, is gone "
                    "(removed): clone or restore the store there again, or restart the "
                    "server in the store's folder"
                ) from None

    def store(self, refs: list[str] | None = None, all_refs: bool = False) -> Store:
        """The store (opened anew each call: files may change between calls), read with
        the store at ``refs`` or, ``all_refs``, at every branch (one entry per
        experiment: its newest version). A ``--root`` that holds no store is said to be
        wrong (the client's configuration), never a store to make there."""
        if self.root is not None and not (self.root / EXPERIMENTS_DIR).is_dir():
            raise StoreNotFoundError(
                f"kexp mcp --root {self.root} names {self.root.resolve()} (the server runs in "
                f"{Path.cwd()}), which holds no {EXPERIMENTS_DIR}/ folder: {WRONG_ROOT}"
            )
        if self.root is not None:  # a clone's committed copy of another's configuration
            from kexp.agents.skill import foreign_config

            foreign = foreign_config(self.root)
            if foreign is not None:
                raise KexpError(foreign)
        return Store(self.root, refs=refs or (), all_refs=all_refs)

    def resolve(self, arguments: dict[str, Any]) -> str:
        """The full id a call's ``exp_id`` names, read where the call reads (its
        ``refs`` or ``all_refs`` when they are well formed); kexp's error otherwise."""
        refs = arguments.get("refs")
        if not (isinstance(refs, list) and all(isinstance(r, str) for r in refs)):
            refs = None
        all_refs = arguments.get("all_refs") is True
        with self._lock:
            return self.store(refs, all_refs).resolve_id(arguments["exp_id"])

    def path(self, value: str) -> Path:
        """A path an agent gave: as it is when it exists, else below the store; a
        relative path found in neither is an error naming both folders (the server's
        working directory is not the agent's)."""
        given = Path(value).expanduser()
        if given.is_absolute() or given.exists():
            return given
        root = self.store().root
        candidate = root / given
        if candidate.exists():
            return candidate
        here = Path.cwd()
        folders = (
            f"the server's working directory, the store's folder ({root})"
            if here.resolve() == root.resolve()
            else f"the server's working directory ({here}) nor in the store's folder ({root})"
        )
        raise KexpError(
            f"{value}: no such file in {folders}, which relative paths are read from: give "
            "the absolute path"
        )

    def timings(self, value: dict[str, Any] | str | None) -> dict[str, Any] | Path | None:
        return self.path(value) if isinstance(value, str) else value

    @contextmanager
    def call(self) -> Iterator[list[str]]:
        """Run one tool: alone, its warnings collected, kexp's errors as tool errors."""
        with self._lock, warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            found: list[str] = []
            try:
                self._in_working_directory()
                yield found
            except KexpError as exc:
                raise ToolError(one_line(exc)) from None
            except OSError as exc:  # a file the agent named
                raise ToolError(f"{exc.filename or ''}: {exc.strerror or exc}") from None
            except Exception as exc:
                raise ToolError(
                    f"internal error (a bug in kexp {__version__}, please report it): "
                    f"{type(exc).__name__}: {one_line(exc)}"
                ) from exc
            found.extend(
                for_tools(" ".join(str(w.message).split()))
                for w in caught
                if not issubclass(w.category, (DeprecationWarning, PendingDeprecationWarning))
            )

    def answer(self, run: Callable[[], Any]) -> CallToolResult:
        """The result as the command prints it (JSON, or the text itself), then one
        ``kexp: warning: ...`` text per warning."""
        with self.call() as found:
            result = run()
        text = result if isinstance(result, str) else json_text(result)
        content: list[ContentBlock] = [TextContent(type="text", text=text)]
        content += [TextContent(type="text", text=f"kexp: warning: {w}") for w in found]
        return CallToolResult(content=content)
