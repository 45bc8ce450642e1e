"""The Arrow-native data plane of FILES sources.

Spark stays the engine: a streaming query over the ``icesql_files`` Python data source
(``source``) discovers the files (``listing``, through pyarrow's filesystems: local paths and
S3), keeps its offsets in Spark's checkpoint with icesql's durable file log (``log``), and
schedules one task per piece of work (``pieces``: big files split by row group or byte range,
small ones grouped). The executors read each piece with Arrow (``decode``), and the sink's task
(``task``) casts the rows to the table schema, splits them by the partition spec and writes the
data files; no row passes through the JVM. Input Arrow cannot read exactly as Spark would (a
malformed record, an unusual timestamp) falls back to Spark's own parsers for that file
(``fallback``), and is counted.
"""
