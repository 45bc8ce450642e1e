"""SELECT: routed to DuckDB over the tables' Arrow rows, or run on Spark."""
