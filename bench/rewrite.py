"""The compiler's speed: rewriting a long statement against parsing it, in CPU time, side by side in one run.

    python -m bench.rewrite [--branches 300,1500,3000] [--rounds 3]

The statement is a UNION ALL of ``n`` windowed aggregations (each its own TUMBLE). Prints, for each size, the best
CPU time of parsing it (sqlglot with sqlwin's dialect) and of ``sqlwin.rewrite`` (parse, validate, plan, compile to
Spark SQL), their ratio, and the growth from the smallest size (linear: the sizes' ratio). ``tests/test_rewrite_speed
.py`` checks the same thing deterministically, by counting sqlglot's units of work instead of timing them.
"""

from __future__ import annotations

import argparse
import gc
import time
from collections.abc import Callable

import sqlwin
from sqlwin import dialect

CATALOG = {"bids": {"ts": "timestamp", "k": "string", "v": "bigint", "price": "double"}}


def union(n: int) -> str:
    return " UNION ALL ".join(f"SELECT window_start, COUNT(*) AS c FROM TUMBLE(TABLE bids, DESCRIPTOR(ts), "
                              f"INTERVAL '{i + 1}' MINUTES) GROUP BY window_start, window_end" for i in range(n))


def best_cpu(fn: Callable[[], object], rounds: int) -> float:
    """The best of ``rounds`` runs in this thread's CPU time, with the cyclic collector off (as sqlwin compiles)."""
    best = float("inf")
    for _ in range(rounds):
        gc.collect()
        gc.disable()
        try:
            start = time.thread_time()
            fn()
            best = min(best, time.thread_time() - start)
        finally:
            gc.enable()
    return best


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--branches", default="300,1500,3000")
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    sizes = [int(n) for n in args.branches.split(",")]
    first: tuple[int, float] | None = None
    print(f"{'branches':>8} {'chars':>9} {'parse s':>8} {'rewrite s':>9} {'rewrite/parse':>13} {'growth':>7}")
    for n in sizes:
        text = union(n)
        parse = best_cpu(lambda text=text: dialect.parse(text), args.rounds)
        rewrite = best_cpu(lambda text=text: sqlwin.rewrite(text, catalog=CATALOG), args.rounds)
        first = first or (n, rewrite)
        growth = f"{rewrite / first[1]:.1f}x/{n / first[0]:.0f}x"
        print(f"{n:>8} {len(text):>9} {parse:>8.3f} {rewrite:>9.3f} {rewrite / parse:>12.1f}x {growth:>7}")


if __name__ == "__main__":
    main()
