"""A sink's lifecycle: the runner, committing, the batch writer, dead letters, supervision, the pre-
check of a bounded run.
"""
