"""A pull request: its changed files checked (changed) and reviewed (build, the
review's model, graph and rendering). Imports the packages below it.
"""
