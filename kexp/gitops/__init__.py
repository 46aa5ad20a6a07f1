"""All git access: the one runner of git (:mod:`kexp.gitops.git`) and what is built
only on it (log, commits, merges, remotes, divergence, objects), provenance
(``base_commit`` in the code repository). Imports :mod:`kexp.core` and :mod:`kexp.format`.
"""
