"""The in-process backend: Spark's micro-batch loop and frame operations run in this process."""
