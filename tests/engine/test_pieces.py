"""How the Arrow path cuts a micro-batch into tasks (``files.pieces``), without Spark."""

from __future__ import annotations

from icesql.engine.sources.files.pieces import Piece, Work, balance, group


def files(*sizes: int) -> list[Piece]:
    return [Piece(i, f"/in/f{i}.parquet", n) for i, n in enumerate(sizes)]


def task_bytes(works: list[Work]) -> list[int]:
    return [w.bytes for w in works]


def test_four_files_of_about_half_a_share_make_one_task_per_core() -> None:
    # the benchmark's input: 4 files of ~17.7 MB, 2 cores, target = half the batch; grouping
    # alone makes 3 tasks (2 + 1 + 1 files: the third waits for a core and a worker of its own)
    pieces = files(17_684_462, 17_725_838, 17_703_460, 17_727_106)
    target = sum(p.size for p in pieces) // 2
    works = group(pieces, target)
    assert [len(w.pieces) for w in works] == [2, 1, 1]
    balanced = balance(works, 2)
    assert [[p.path for p in w.pieces] for w in balanced] == [
        ["/in/f0.parquet", "/in/f1.parquet"],
        ["/in/f2.parquet", "/in/f3.parquet"],
    ]


def test_balance_keeps_every_piece_once_in_order() -> None:
    pieces = files(*(m * 1_000_000 for m in (9, 1, 30, 5, 5, 12, 7)))
    for parallelism in (2, 3, 4, 5):
        works = group(pieces, 30_000_000)
        balanced = balance(works, parallelism)
        # every piece once, in the order grouping put them (a big file is a task of its own)
        assert [p for w in balanced for p in w.pieces] == [p for w in works for p in w.pieces]
        assert sorted(p.seq for w in works for p in w.pieces) == [p.seq for p in pieces]
        if parallelism < len(works) < 2 * parallelism:
            assert len(balanced) <= parallelism
            # no task is bigger than its share plus half of the biggest work
            share = sum(task_bytes(works)) / parallelism
            assert max(task_bytes(balanced)) <= share + max(task_bytes(works)) / 2
        else:
            assert balanced == works


def test_one_wave_or_many_waves_are_left_alone() -> None:
    one_wave = group(files(40_000_000, 40_000_000), 40_000_000)
    assert balance(one_wave, 2) == one_wave
    many = group(files(*([40_000_000] * 9)), 40_000_000)
    assert len(balance(many, 2)) == 9  # Spark hands them out to free cores as they finish
