"""Benchmark workers: each function runs in its own child process (see ``entry.py``).

They import only what their interpreter has: the ``spark_*`` ones run under the harness venv
(PySpark 3.5 + Iceberg Java) or the project venv (PySpark 4); the others need pyarrow, pyiceberg
or duckdb. Each returns a result dict that ``entry.py`` prints as ``RESULT {json}``.
"""
