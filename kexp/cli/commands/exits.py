"""The kexp command's exit codes (apart, so that ``kexp --help`` imports nothing else)."""

EXIT_OK, EXIT_PROBLEMS, EXIT_USAGE, EXIT_BUG = 0, 1, 2, 3
