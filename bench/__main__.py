"""The Nexmark benchmark: sqlwin on Spark vs hand-written native Spark vs DuckDB, batch and streaming.

    python -m bench --quick                 # batch engines at 1M events (< 5 minutes on 2 cores)
    python -m bench --sizes 1M,3M,10M       # scaling: every query at each size, plus a time/size plot
    python -m bench --queries q5_hot_items,q11_user_sessions --rounds 3
    python -m bench --engines sqlwin-stream,native-stream,replay,sqlwin   # the streaming columns only

For every size it generates (or reuses) the Nexmark parquet, then for every query checks that each
engine returns the same rows as its reference (sorted, floats within 1e-9): DuckDB for the batch
engines; for the streaming engines (sqlwin streaming tables, hand-written Structured Streaming, replay)
DuckDB over the (row, window) pairs the watermark keeps. Only then are the engines timed in interleaved
rounds and medians reported. Results go to ``--out`` (default ``bench/results``): ``nexmark_<tag>.csv``
(every round), ``nexmark_<tag>.md`` (the table), ``nexmark_<tag>_<size>.png`` (bars per query and
engine, ratios) and, for several sizes, ``nexmark_<tag>_scaling.png``. The exit status is 1 when any
engine failed or disagreed.
"""

from __future__ import annotations

import argparse
import os
import platform
import sys
import tempfile
import time
import warnings
from pathlib import Path

QUICK_EVENTS = "1M"
RESULTS = Path(__file__).parent / "results"


def machine(measurements: list | None = None) -> str:
    """One line naming the machine and its load, for the saved table."""
    cpu = platform.processor() or platform.machine()
    try:
        with open("/proc/cpuinfo") as f:
            cpu = next(line.split(":", 1)[1].strip() for line in f if line.startswith("model name"))
    except (OSError, StopIteration):
        pass
    mem = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2**30 if hasattr(os, "sysconf") else 0
    import duckdb
    import pyspark

    from bench.nexmark.report import load_summary

    return (f"{os.cpu_count()} cores ({cpu}), {mem:.0f} GB RAM, {platform.system()}, Python "
            f"{platform.python_version()}, pyspark {pyspark.__version__} (local[2]), duckdb {duckdb.__version__}; "
            f"{load_summary(measurements or [])}")


def main(argv: list[str] | None = None) -> int:
    from bench.nexmark import generator, report, suite
    from bench.nexmark.engines import Context

    parser = argparse.ArgumentParser(prog="python -m bench", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true",
                        help=f"{QUICK_EVENTS} events, 3 rounds, batch engines (unless --engines says otherwise)")
    parser.add_argument("--sizes", default="1M", help="comma-separated event counts, e.g. 1M,3M,10M")
    parser.add_argument("--rounds", type=int, help="timed rounds per query, median reported (default 5; --quick 3)")
    parser.add_argument("--stream-rounds", type=int, help="timed rounds of the streaming engines (default --rounds)")
    parser.add_argument("--queries", default=",".join(q.name for q in suite.QUERIES))
    parser.add_argument("--engines", help="comma-separated (default: every timed engine; --quick: the batch ones): "
                        + ", ".join(n for n, e in suite.ENGINES.items() if e.timed))
    parser.add_argument("--feed-events", type=generator.parse_size, default=Context.feed_events,
                        help="events per file of the streaming engines' input, one micro-batch each (default 250k)")
    parser.add_argument("--seed", type=int, default=42)
    parser.add_argument("--rate", type=int, default=generator.Config.rate, help="events per second of event time")
    parser.add_argument("--disorder-fraction", type=float, default=generator.Config.disorder_fraction)
    parser.add_argument("--late-fraction", type=float, default=generator.Config.late_fraction)
    parser.add_argument("--data", type=Path, default=Path(tempfile.gettempdir()) / "sqlwin-nexmark",
                        help="where generated parquet is kept (reused when the parameters match)")
    parser.add_argument("--out", type=Path, default=RESULTS)
    parser.add_argument("--tag", help="name of the result files (default: quick, or the sizes)")
    parser.add_argument("--spark-memory", default="4g")
    parser.add_argument("--profile", action="store_true",
                        help="time each phase of sqlwin's custom streaming operator (sqlwin-stream, replay)")
    parser.add_argument("--replot", type=Path, nargs="+", metavar="CSV",
                        help="redraw the table and charts of saved runs (several: merged, named by --tag)")
    args = parser.parse_args(argv)

    from rich.console import Console

    console = Console(highlight=False, width=None if sys.stdout.isatty() else 150)
    warnings.filterwarnings("ignore", message=".*PySpark does not yet fully support pandas.*")
    t0 = time.perf_counter()

    def say(msg: str) -> None:
        console.print(f"[dim]{time.perf_counter() - t0:7.1f}s[/] {msg}")

    sizes = [generator.parse_size(QUICK_EVENTS)] if args.quick else \
        [generator.parse_size(s) for s in args.sizes.split(",")]
    rounds = args.rounds or (3 if args.quick else 5)
    tag = args.tag or ("quick" if args.quick else "-".join(report.size_label(s) for s in sizes))
    wanted = set(args.queries.split(","))
    unknown = wanted - {q.name for q in suite.QUERIES}
    if unknown:
        parser.error(f"unknown queries: {', '.join(sorted(unknown))}")
    queries = [q for q in suite.QUERIES if q.name in wanted]
    default = suite.BATCH_ENGINES if args.quick else [n for n, e in suite.ENGINES.items() if e.timed]
    names = args.engines.split(",") if args.engines else default
    unknown = set(names) - set(suite.ENGINES)
    if unknown:
        parser.error(f"unknown engines: {', '.join(sorted(unknown))}")
    engines = {n: suite.ENGINES[n] for n in names}

    if args.replot:
        measurements = [m for path in args.replot for m in report.read_csv(path)]
        report.print_table(measurements, console)
        return render(measurements, args.out, args.tag or args.replot[0].stem.removeprefix("nexmark_"),
                      where=f"redrawn from a saved CSV; {report.load_summary(measurements)}")

    import duckdb

    from sqlwin.session import local_session

    say(f"starting Spark; sizes {', '.join(map(report.size_label, sizes))}, {len(queries)} queries, "
        f"engines {', '.join(engines)}, {rounds} rounds")
    spark = local_session("sqlwin-nexmark", {"spark.driver.memory": args.spark_memory})
    from bench.streaming import print_phases, profile_operator

    spent = profile_operator() if args.profile else None
    measurements: list[suite.Measurement] = []
    args.out.mkdir(parents=True, exist_ok=True)
    csv_path = args.out / f"nexmark_{tag}.csv"
    for events in sizes:
        cfg = generator.Config(events, args.seed, args.rate, args.disorder_fraction,
                               late_fraction=args.late_fraction)
        root = args.data / f"{report.size_label(events)}-seed{args.seed}"
        say(f"[bold]{report.size_label(events)} events[/]: data in {root}")
        generator.generate(root, cfg, progress=lambda done, n=events: say(f"  generated {done:,}/{n:,} events"))
        duck = duckdb.connect()
        duck.execute("SET TimeZone = 'UTC'")
        duck.execute("SET memory_limit = '4GB'")  # a shared machine: spill rather than take most of the RAM
        ctx = suite.Context(spark, duck, root, events, feed_events=args.feed_events)
        suite.register_tables(ctx)
        for i, q in enumerate(queries, 1):
            say(f"[bold]{report.size_label(events)} {q.name}[/] ({i}/{len(queries)}, {q.kind}): checking results")
            ms = suite.measure(q, ctx, rounds, engines, say=say, stream_rounds=args.stream_rounds)
            if spent:  # per query: the custom operator's phases over its checked and timed runs
                say(f"  {q.name}: custom streaming operator phases (sqlwin-stream and replay runs together)")
                print_phases(spent)
                spent.clear()
            measurements += ms
            report.write_csv(measurements, csv_path)  # after every query: a long run interrupted keeps its data
            say("  " + ", ".join(f"{m.engine} {m.median:.2f}s" if m.median is not None else f"{m.engine} {m.status}"
                                 for m in ms) + (f" ({ms[0].rows} rows)" if ms else ""))
        duck.close()
    spark.stop()

    report.print_table(measurements, console)
    report.write_csv(measurements, csv_path)
    return render(measurements, args.out, tag, say)


def render(measurements: list, out: Path, tag: str, say=print, where: str | None = None) -> int:
    """The Markdown table and the charts; the exit status (1 when an engine failed or disagreed)."""
    from bench.nexmark import report

    where = where or machine(measurements)
    out.mkdir(parents=True, exist_ok=True)
    sizes = sorted({m.events for m in measurements})
    text = f"Nexmark, {report.rounds_summary(measurements)}, seconds; {where}\n\n" + report.markdown(measurements)
    if len(sizes) > 1:
        text += "\nTime against events (exponent 1 = linear):\n\n" + report.growth(measurements)
    (out / f"nexmark_{tag}.md").write_text(text)
    for events in sizes:
        report.bar_chart(measurements, events, out / f"nexmark_{tag}_{report.size_label(events)}.png",
                         f"Nexmark, {report.size_label(events)} events ({report.rounds_summary(measurements)})")
    if len(sizes) > 1:
        report.scaling_chart(measurements, out / f"nexmark_{tag}_scaling.png", "Nexmark: time vs events")
    say(f"wrote {out}/nexmark_{tag}.* ({where})")
    return 0 if all(m.status == "ok" for m in measurements) else 1


if __name__ == "__main__":
    sys.exit(main())
