"""``python -m kexp`` runs the ``kexp`` command."""

from kexp.cli import main

main()
