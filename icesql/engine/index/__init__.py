"""The key index of an upsert sink: KEY -> (data file, row position) of every live row.

An upsert that replaces or deletes a key whose row lives in an older data file marks that row's
position in a position-delete file (Iceberg format v2) instead of writing an equality delete,
which several readers apply slowly or not at all. To know where the row lives, the sink keeps
this index, beside the table's data (``<table>/data/icesql-index/<sink id>/``; Parquet files,
as an S3 Tables bucket accepts under ``data/``):

* **sharded by a hash of the key**: Spark's own hash partitioning of the KEY columns picks the
  shard (``repartition(N, *key)``), so one task per shard loads only its shard, looks up the
  batch's keys, writes the new rows and the deletes, and writes the shard's change;
* **versioned with the sink's progress**: a batch writes a delta per shard (keys removed, rows
  added with their file and position); a manifest per progress lists each shard's chain (a base
  and its deltas) and is written before the batch is staged, named by progress and sink version,
  so the manifest of the progress the table holds is the index of the table; chains are merged
  into a new base when they grow;
* **a cache of the table, never its truth**: when other writers committed since the snapshot the
  index describes (an append, a rewrite by icesql's maintenance or anyone else, S3 Tables' own
  maintenance included), the index follows their commits (``follow``: the entries of the files
  they removed go, the live rows of the files they added come in); when it cannot (equality
  deletes by another writer, snapshots expired in between, a manifest missing or naming a missing
  file, most of the table moved) it is rebuilt from the table: key columns of the live data files,
  minus every delete file. A position is never deleted from a file the index does not know to
  hold that key's row.

Modules: ``store`` (files, manifests, versions), ``shard`` (load, look up, apply), ``build``
(rebuild from the table), ``follow`` (other writers' commits into the index), ``task`` (the
``mapInArrow`` body of a batch's shard).
"""
