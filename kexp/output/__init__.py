"""What is shown or exported: the static HTML report (html/), export, the
predecessor's JSON database (legacy, legacyimport, legacyexport), Parquet.
Imports the packages below it.
"""
