"""Table maintenance: what keeps a table a sink writes every second fast to read and small to store.

``files`` holds what the operations share: cached manifest reading, path comparison, listing and
deleting. Compaction lives in ``icesql.engine.compact`` (``icesql compact`` is its ``FULL`` mode).
"""
