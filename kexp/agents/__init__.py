"""What agents read before an iteration: the lessons, the context packet, the
skill. Imports core, format, gitops and storage.
"""
