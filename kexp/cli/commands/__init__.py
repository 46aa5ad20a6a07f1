"""The ``kexp`` subcommands, by kind: :mod:`~kexp.cli.commands.read` (top, list, show, tree,
log, export), :mod:`~kexp.cli.commands.summaries` (lessons, stats),
:mod:`~kexp.cli.commands.write` (new, add, update, rm, fmt) and :mod:`~kexp.cli.commands.admin`
(validate, init, env). :mod:`kexp.cli.main` assembles them.
"""
