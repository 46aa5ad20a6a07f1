"""The front ends: the ``kexp`` command (:mod:`kexp.cli.main`, one module of
:mod:`kexp.cli.commands` per kind of command) and the MCP server
(:mod:`kexp.cli.mcp`). The top: nothing in kexp imports it.
"""
