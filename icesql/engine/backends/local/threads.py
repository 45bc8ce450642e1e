"""Tasks as threads: a mapInArrow body over each task's input, at most as many at a time as the session
has cores (Arrow's readers and writers run outside the GIL).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any


def map_in_threads(
    task: Callable[[Any], Any], inputs: Sequence[Sequence[Any]], threads: int
) -> list[list[Any]]:
    """``task`` (a ``mapInArrow`` body: Arrow batches in, Arrow batches out) over each of
    ``inputs`` (each a task's batches), at most ``threads`` at a time; the outputs in order."""
    from concurrent.futures import ThreadPoolExecutor

    def run(batches: Sequence[Any]) -> list[Any]:
        return list(task(iter(batches)))

    if len(inputs) <= 1 or threads <= 1:
        return [run(i) for i in inputs]
    with ThreadPoolExecutor(min(threads, len(inputs)), thread_name_prefix="icesql-task") as pool:
        return list(pool.map(run, inputs))
