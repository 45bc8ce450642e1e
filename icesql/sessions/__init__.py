"""The parts of ``icesql.Session`` (``icesql.session``), one job per module."""
