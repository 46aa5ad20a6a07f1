"""``python -m kexp`` runs the ``kexp`` command."""

from kexp.cli.main import main

main(prog_name="kexp")  # "Usage: kexp", and shell completion as for the kexp script
