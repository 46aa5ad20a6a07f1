"""The store: where its files' bytes come from (the working tree, a git revision,
refs), the one scan, the cache, the listing, atomic writes, locks, the
:class:`~kexp.storage.store.Store` and its reading half, history, sync, lineage,
stats, fmt, layout migration, and the related-work index the Store's create asks
(retrieval, doctext, repeats, dedupe). Imports core, format and gitops.
"""
