"""Issue 18: the front end is linear in its input. ``check`` and ``exec`` of 8,000 statements
take at most 16x the time of 1,000 (4,000 and 500 in the default run) - linear is 8x, quadratic 64x; the margin is for a machine
that is busy with something else (they were quadratic: 58 s for 4,000); a 50 MB string
literal parses in under 300 MB and checks in under 1 GB (it took 8.7 GB and 10.4 GB).

``benchmarks/hardening.py`` prints the same figures (results in benchmarks/RESULTS_hardening.md).
Times are CPU seconds of this process, the best of three, so that other work on the machine
disturbs them little.
"""

from __future__ import annotations

import pytest

from benchmarks.hardening import memory, script, timings
from icesql.syntax.parser import parse


# the default run: 500 and 4,000 statements (the same 8x growth); -m slow: the sizes
# benchmarks/hardening.py measures (50 s)
@pytest.mark.timeout(900)
@pytest.mark.parametrize(("small_n", "big_n"), [(500, 4000), pytest.param(1000, 8000, marks=pytest.mark.slow)])
def test_check_and_exec_time_grow_linearly_with_the_script(small_n: int, big_n: int) -> None:
    parse(script(20))  # the grammar, loaded before anything is timed
    small = timings(small_n, runs=3, only=("check", "exec"))
    big = timings(big_n, runs=3, only=("check", "exec"))
    for what in ("check", "exec"):
        assert big[what] <= 16 * small[what], (what, small, big)


@pytest.mark.timeout(300)
@pytest.mark.parametrize(("what", "limit_mib"), [("parse", 300), ("check", 1024)])
def test_a_fifty_megabyte_literal_fits_in_memory(what: str, limit_mib: int) -> None:
    result = memory(what, 50)
    # the whole process at its peak: interpreter, grammar, the literal itself and the work
    assert int(result["peak"]) < limit_mib * 2**20, result
