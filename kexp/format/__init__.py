"""One experiment as text: the YAML reader and writer, the fast path, the file
format, the schema, the per-file rules and checks (validate, quickcheck), the samples
section, suspect values, the output formats. Imports only :mod:`kexp.core`.
"""
