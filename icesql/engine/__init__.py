"""Executor: Spark pipelines writing Iceberg (heavy imports stay in the submodules)."""
