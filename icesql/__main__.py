"""``python -m icesql``: the same as the ``icesql`` command."""

import sys

from icesql.cli import main

sys.exit(main())
