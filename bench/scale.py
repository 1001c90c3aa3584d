"""State that scales with the number of keys (issue 17, point 3): sqlwin's custom path vs hand-written Spark
streaming, at 1k and at 1M keys, in one run.

    python -m bench.scale [--keys 1000,1000000] [--files 4] [--rows 500000] [--repeat 2] [--emit "EMIT ..."]

The input is ``--files`` parquet files of ``--rows`` rows, keys drawn from ``--keys`` distinct values, every
event time within the first hour, so one 1-hour TUMBLE window per key stays open for the whole run (at 1M keys
and 4 x 500k rows: about 865k open (key, window) pairs), and a last one-row file that moves the watermark past
it. Each engine reads the files as a stream, one file per micro-batch, each processed before the next is
dropped in. Engines:

- ``spark``: ``withWatermark`` + ``groupBy(window(ts, '1 hour'), k)``, append mode, parquet file sink, the
  baseline of every ratio;
- ``custom``: a sqlwin streaming table on the custom path (``ALLOWED LATENESS`` 5 minutes, ``LATE ROWS TO``),
  its windows' state where ``--state`` puts it (``auto``: in the driver up to 250,000 open windows, in Spark
  beyond, ``sqlwin.streaming.keyedstate``);
- ``driver`` (``--engines spark,custom,driver``): the same with ``sqlwin.streaming.state=driver``, the
  windows' state in the driver's Python as before.

``--emit`` appends an EMIT clause to sqlwin's query (say ``"EMIT WITH TRIGGER AFTER WATERMARK EARLY EVERY
INTERVAL '2' SECONDS"``, processing-time early firings): the check then compares the ON_TIME panes, which
accumulate every row of their window whatever fired before.

Printed per key count: the median time of a *steady* micro-batch (every data file after the first, as Spark's
progress reports it: ``durationMs.triggerExecution``), the
ratio to Spark's, and the driver's Python resident memory before the run and at its largest during it
(``/proc/self/status``), so that what grows with the keys is visible. Targets (the issue): a steady
micro-batch at most 1.25x Spark's at 1M keys and 1.1x at 1k keys, and the driver's memory flat (within 150 MB)
from 1k to 1M keys. Results are checked first: both engines' final panes equal the batch query's.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import tempfile
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import duckdb

import sqlwin
from bench.streaming import load, settle
from sqlwin.session import local_session
from sqlwin.streaming import catalog

T0 = "2024-01-01 00:00:00"
SCHEMA = "ts TIMESTAMP, k STRING, v INT"
SELECT = ("SELECT window_start, window_end, k, SUM(v) AS s, COUNT(*) AS c "
          "FROM TUMBLE(TABLE {src}, DESCRIPTOR(ts), INTERVAL 1 HOUR) GROUP BY window_start, window_end, k")


def rss_mb() -> float:
    """This process's resident memory (the driver's Python; Spark's JVM is another process)."""
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return float("nan")


class PeakMemory:
    """The largest resident memory seen while a run goes on (sampled every 50 ms by a thread)."""

    def __init__(self) -> None:
        self.peak = rss_mb()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._sample, daemon=True)

    def _sample(self) -> None:
        while not self._stop.wait(0.05):
            self.peak = max(self.peak, rss_mb())

    def __enter__(self) -> PeakMemory:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()
        self.peak = max(self.peak, rss_mb())


@dataclass
class Run:
    batches: list[float]  # seconds per data micro-batch
    flush: float
    rss_before: float
    rss_peak: float
    result: list[tuple] = field(default_factory=list)

    @property
    def steady(self) -> float:
        return statistics.median(self.batches[1:] or self.batches)


def make_files(root: Path, keys: int, files: int, rows: int) -> tuple[list[Path], Path]:
    data = root / f"data_{keys}"
    data.mkdir(parents=True)
    con = duckdb.connect()
    con.execute("SET TimeZone = 'UTC'")
    paths = []
    for i in range(files):
        path = data / f"part-{i:03d}.parquet"
        con.execute(f"""COPY (SELECT CAST(TIMESTAMP '{T0}' + to_microseconds(CAST(random() * 3500e6 AS BIGINT))
                                         AS TIMESTAMPTZ) AS ts,
                                    'k' || CAST(floor(random() * {keys}) AS BIGINT) AS k,
                                    CAST(floor(random() * 100) AS INT) AS v
                             FROM range({rows})) TO '{path}' (FORMAT parquet)""")
        paths.append(path)
    flush = data / "flush.parquet"
    con.execute(f"COPY (SELECT CAST(TIMESTAMP '{T0}' + INTERVAL 2 DAY AS TIMESTAMPTZ) AS ts, 'zz' AS k, 0 AS v) "
                f"TO '{flush}' (FORMAT parquet)")
    con.close()
    return paths, flush


class Engines:
    def __init__(self, spark: Any, root: Path, files: list[Path], flush: Path):
        self.spark, self.root, self.files, self.flush = spark, root, files, flush
        self.n = 0

    def _folder(self, engine: str) -> Path:
        self.n += 1
        folder = self.root / "runs" / f"{engine}_{len(self.files)}_{self.files[0].parent.name}_{self.n}"
        (folder / "in").mkdir(parents=True)
        return folder

    def _feed(self, into: Path, query: Any) -> tuple[list[float], float]:
        """Drop the files in one at a time, each processed before the next; returns the time of each data
        micro-batch as Spark measured it (``durationMs.triggerExecution``: the micro-batch itself, not the
        wait for Spark's next progress event) and that of the flush."""
        for path in self.files:
            os.link(path, into / path.name)
            settle(query)
        os.link(self.flush, into / "part-999.parquet")
        settle(query)
        times = [p["durationMs"]["triggerExecution"] / 1000 for p in query.recentProgress if p["numInputRows"]]
        return times[:len(self.files)], times[len(self.files)] if len(times) > len(self.files) else float("nan")

    def spark_native(self) -> Run:
        from pyspark.sql import functions as F

        folder = self._folder("spark")
        rows = self.spark.readStream.schema(SCHEMA).option("maxFilesPerTrigger", 1).parquet(str(folder / "in"))
        result = rows.withWatermark("ts", "1 minute").groupBy(F.window("ts", "1 hour"), "k") \
            .agg(F.sum("v").alias("s"), F.count(F.lit(1)).alias("c")) \
            .select(F.col("window.start").alias("window_start"), F.col("window.end").alias("window_end"), "k", "s",
                    "c")
        before = rss_mb()
        with PeakMemory() as memory:
            query = result.writeStream.outputMode("append").format("parquet").option("path", str(folder / "out")) \
                .option("checkpointLocation", str(folder / "checkpoint")).start()
            try:
                batches, flush = self._feed(folder / "in", query)
            finally:
                query.stop()
        out = self.spark.read.parquet(str(folder / "out"))
        return Run(batches, flush, before, memory.peak, summary(out))

    def custom(self, state: str = "auto", emit: str = "") -> Run:
        """The custom path, its windows' state where ``state`` (``sqlwin.streaming.state``) puts it."""
        self.spark.conf.set("sqlwin.streaming.state", state)
        folder = self._folder(f"custom_{state}")
        tag = f"scale_{self.files[0].parent.name}_{self.n}"
        os.environ["SQLWIN_STREAMING_DIR"] = str(folder / "root")
        sqlwin.sql(self.spark, f"CREATE STREAM s_{tag} ({SCHEMA}, WATERMARK FOR ts AS ts - INTERVAL 1 MINUTE) "
                               f"USING parquet OPTIONS (path '{folder / 'in'}', maxFilesPerTrigger '1')")
        before = rss_mb()
        with PeakMemory() as memory:
            sqlwin.sql(self.spark, f"CREATE STREAMING TABLE out_{tag} AS {SELECT.format(src=f's_{tag}')} "
                                   f"ALLOWED LATENESS INTERVAL 5 MINUTES LATE ROWS TO late_{tag} {emit}")
            table = catalog.find_table(f"out_{tag}")
            assert table.path == "custom", table.why
            try:
                batches, flush = self._feed(folder / "in", table.query)
            finally:
                table.stop()
                catalog.remove_table(f"out_{tag}")
        out = self.spark.table(f"out_{tag}").where("pane_timing = 'ON_TIME'")
        return Run(batches, flush, before, memory.peak, summary(out))

    def batch(self) -> list[tuple]:
        self.spark.read.schema(SCHEMA).parquet(*map(str, self.files)).createOrReplaceTempView("scale_rows")
        return summary(sqlwin.sql(self.spark, SELECT.format(src="scale_rows")))


def summary(df: Any) -> list[tuple]:
    """A checksum of the panes (at 1M keys the rows themselves are too many to compare in Python)."""
    row = df.where("k <> 'zz'").selectExpr("COUNT(*) AS n", "SUM(s) AS s", "SUM(c) AS c",
                                           "SUM(hash(window_start, k, s, c)) AS h").collect()[0]
    return [tuple(row)]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--keys", default="1000,1000000", help="key counts, comma-separated")
    parser.add_argument("--files", type=int, default=4, help="data files = micro-batches (default 4)")
    parser.add_argument("--rows", type=int, default=500_000, help="rows per file (default 500k)")
    parser.add_argument("--repeat", type=int, default=2, help="interleaved rounds per key count (default 2)")
    parser.add_argument("--engines", default="spark,custom",
                        help="add 'driver' for the custom path with its windows' state in the driver (as before); "
                             "leave out 'spark' for sqlwin alone (no ratio)")
    parser.add_argument("--state", default="auto",
                        help="sqlwin.streaming.state of the 'custom' engine: auto (default), executors, driver")
    parser.add_argument("--emit", default="", help="an EMIT clause for sqlwin's query (default: none)")
    args = parser.parse_args()
    print(f"load before: {load()}", flush=True)
    spark = local_session("sqlwin-bench-scale", {"spark.driver.memory": "6g"})
    root = Path(tempfile.mkdtemp(prefix="sqlwin-bench-scale-"))
    lines = []
    try:
        for keys in (int(k) for k in args.keys.split(",")):
            files, flush = make_files(root, keys, args.files, args.rows)
            engines = Engines(spark, root, files, flush)
            if "spark" in args.engines:
                engines.spark_native()  # warm-up: JIT, Python workers
            runs: dict[str, list[Run]] = {"spark": [], "custom": [], "driver": []}
            for _ in range(args.repeat):
                if "spark" in args.engines:
                    runs["spark"].append(engines.spark_native())
                runs["custom"].append(engines.custom(args.state, args.emit))
                if "driver" in args.engines:
                    runs["driver"].append(engines.custom("driver", args.emit))
            runs = {name: rs for name, rs in runs.items() if rs}
            expected = engines.batch()
            for name, rs in runs.items():
                for r in rs:
                    if r.result != expected:
                        raise SystemExit(f"{name} at {keys} keys: {r.result} != batch {expected}")
            steady = {name: statistics.median(r.steady for r in rs) for name, rs in runs.items()}
            open_pairs = expected[0][0]
            for name, rs in runs.items():
                peak = max(r.rss_peak for r in rs)
                ratio = steady[name] / steady["spark"] if "spark" in steady else float("nan")
                lines.append(f"{keys:>10,}{open_pairs:>12,}{name:>8}{steady[name]:>10.2f}"
                             f"{ratio:>8.2f}{rs[0].rss_before:>12.0f}{peak:>12.0f}   "
                             + " ".join(f"{b:.2f}" for r in rs for b in r.batches))
            print(lines[-1], flush=True)
        print(f"\n{args.files} files x {args.rows:,} rows; one 1-hour TUMBLE per key, open until the last file"
              + (f"; sqlwin's {args.emit}" if args.emit else ""))
        print(f"{'keys':>10}{'open pairs':>12}{'engine':>8}{'steady s':>10}{'ratio':>8}{'rss MB pre':>12}"
              f"{'rss MB peak':>12}   micro-batches (s)")
        for line in lines:
            print(line)
        print(f"\nload after: {load()}")
    finally:
        spark.stop()
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
