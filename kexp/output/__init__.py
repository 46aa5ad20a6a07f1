"""What is shown or exported: the static HTML report (html/), export, the
predecessor's JSON database (legacy, legacyimport, legacyexport), Parquet, the read
commands' JSON (replies).
Imports the packages below it.
"""
