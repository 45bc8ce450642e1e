"""Where icesql keeps its own files beside a table's data: the key index and Spark Connect's drop box
(maintenance spares both).
"""

from __future__ import annotations

DROPBOX_DIRECTORY = "data/icesql-staging"  # Spark Connect's drop box (backends.spark.dropbox)
INDEX_ROOT = "data/icesql-index"  # the key index of upsert sinks (index.store)
