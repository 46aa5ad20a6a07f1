"""The ``kexp`` subcommands, by kind: :mod:`~kexp.commands.read` (top, list, show, tree,
log, export), :mod:`~kexp.commands.summaries` (lessons, stats),
:mod:`~kexp.commands.write` (new, add, update, rm, fmt) and :mod:`~kexp.commands.admin`
(validate, init, env). :mod:`kexp.cli` assembles them.
"""
