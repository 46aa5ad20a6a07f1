"""One experiment as text: the YAML reader and writer, the fast path, the file
format, the schema, reading a file safely, the per-file rules and checks (validate,
quickcheck), the store-wide checks over each file's links, the samples section, suspect
values, the output formats. Imports only :mod:`kexp.core`.
"""
