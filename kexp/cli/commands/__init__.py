"""The ``kexp`` subcommands, by kind: :mod:`~kexp.cli.commands.read` (top, list, show, tree,
log, export), :mod:`~kexp.cli.commands.summaries` (lessons, stats),
:mod:`~kexp.cli.commands.record` (add, remeasure), :mod:`~kexp.cli.commands.draft` (new),
:mod:`~kexp.cli.commands.edit` (update, re-id, fmt), :mod:`~kexp.cli.commands.remove` (rm)
and :mod:`~kexp.cli.commands.admin` (validate, init, env). :mod:`kexp.cli.main` assembles
them.
"""
