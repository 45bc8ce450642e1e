"""A table's files and metadata through pyiceberg, without Spark: schemas, table creation and
evolution, data and delete files in every format, delete reading.
"""
