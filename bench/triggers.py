"""Trigger benchmark: an early/late count trigger on sqlwin's custom path vs Spark's native streaming aggregation.

    python -m bench.triggers [--files 3] [--rows 1000000] [--repeat 3] [--every 100000] [--profile]

Same data, feeding and checks as ``bench.streaming`` (one micro-batch per 1M-row parquet file, 100 keys,
10-minute TUMBLE, sum and count, interleaved rounds, medians): the sqlwin query adds
``EMIT WITH TRIGGER AFTER WATERMARK EARLY EVERY <every> ROWS LATE EVERY 1 ROWS``; the baseline is the
hand-written ``withWatermark`` + ``groupBy(window(), k)`` append-mode query. Accumulating panes, so the
ON_TIME pane of each window must equal the native query's row. Target (issue 7): at least half the
native rate. Note that a (key, window) gets ~1,700 rows here, so EVERY 100000 ROWS fires no early pane:
``--every 500`` shows the cost of early panes that do fire.
"""

from __future__ import annotations

import functools
import shutil
import tempfile
from pathlib import Path

from bench import streaming as sb


def main() -> None:
    parser_args = sb.arguments(__doc__, extra=(("--every", 100_000, "EARLY EVERY n ROWS (default 100000)"),))
    print(f"load before: {sb.load()}", flush=True)
    spark = sb.session()
    root = Path(tempfile.mkdtemp(prefix="sqlwin-bench-triggers-"))
    try:
        work = sb.Workload.make(root, parser_args.files, parser_args.rows)
        engines = sb.Engines(spark, work)
        tail = f"EMIT WITH TRIGGER AFTER WATERMARK EARLY EVERY {parser_args.every} ROWS LATE EVERY 1 ROWS"

        def trigger(files: int | None = None) -> sb.Run:
            run = engines.sqlwin_table(tail, files, on_time_only=True)
            return run

        fns = {"trigger": trigger, "spark": engines.spark_native}
        spent = sb.profile_operator() if parser_args.profile else None
        sb.interleaved({n: functools.partial(f, 1) for n, f in fns.items()}, 1)
        if spent is not None:
            spent.clear()
        runs = sb.interleaved(fns, parser_args.repeat)
        expected = engines.batch_on_time()
        sb.check(runs, expected, list(fns))
        early = spark.table(engines.last_table).where("pane_timing = 'EARLY'").count()
        print(f"{parser_args.files} files x {parser_args.rows:,} rows = {work.rows:,} rows; {tail}; "
              f"{len(expected)} ON_TIME panes equal the native rows; {early} EARLY panes in the last round")
        sb.report(runs, work.rows, "spark", {})
        sb.print_phases(spent)
        print(f"\nload after: {sb.load()}")
    finally:
        spark.stop()
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
