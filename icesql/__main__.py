"""``python -m icesql``: the same as the ``icesql`` command."""

from icesql.cli import entry

entry()
