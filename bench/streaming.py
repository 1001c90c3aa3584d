"""Streaming benchmark: sqlwin streaming tables vs a hand-written native Spark streaming query, in one run.

    python -m bench.streaming [--files 3] [--rows 1000000] [--repeat 3] [--profile]

The input is ``--files`` parquet files of ``--rows`` rows (100 keys, one hour of event time per file, in
order, plus 100 rows per file that are already past the lateness: every engine drops them) and a last
one-row file far in the future that moves the watermark past every window. Each engine reads the files
as a stream with ``maxFilesPerTrigger 1`` (one micro-batch per file) and runs until everything available
is processed; per round every engine gets a fresh input folder and checkpoint, and the engines run
interleaved round by round (a busy moment hits all alike), medians reported. Engines:

- ``native``: a sqlwin streaming table on the native path (default emission, lateness 0);
- ``spark``: the same aggregation written by hand (``withWatermark`` + ``groupBy(window(), k)``, append
  mode, parquet file sink), the baseline of every ratio;
- ``custom``: sqlwin on the custom path (``ALLOWED LATENESS`` 5 minutes, ``LATE ROWS TO``);
- ``replay`` and ``batch``: replay of the same rows (``MICRO BATCH BY`` file, so one micro-batch per
  file) vs the batch query over the same table.

Results are checked before any time counts: every engine's final ON_TIME panes equal the hand-written
query's output, which equals the batch query over the rows that are not late. State is read after the
data files (windows open) and after the last file (every window expired): Spark's ``numRowsTotal``, and
the custom path's stored rows and open windows. ``--profile`` adds the time of each phase of the custom
operator's micro-batch (method wrappers, no change to sqlwin).
"""

from __future__ import annotations

import argparse
import collections
import functools
import os
import shutil
import statistics
import subprocess
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import duckdb

import sqlwin
from sqlwin.session import local_session
from sqlwin.streaming import catalog

SPAN_S = 3600  # event time per file
LATE_PER_FILE = 100  # rows per file (after the first) that every engine drops as late
KEYS = 100
T0 = "2024-01-01 00:00:00"
SCHEMA = "ts TIMESTAMP, k STRING, v INT, b INT"
SELECT = ("SELECT window_start, window_end, k, SUM(v) AS s, COUNT(*) AS c "
          "FROM TUMBLE(TABLE {src}, DESCRIPTOR(ts), INTERVAL 10 MINUTES) GROUP BY window_start, window_end, k")
RESULT = ["window_start", "window_end", "k", "s", "c"]


# -- data ---------------------------------------------------------------------------------------
@dataclass
class Workload:
    """The data files, written once; each run gets hard links to them in a fresh folder."""

    root: Path
    files: list[Path]
    flush: Path
    rows: int  # every input row of a full run (data files and the flush file)

    @classmethod
    def make(cls, root: Path, files: int, rows: int) -> Workload:
        data = root / "data"
        data.mkdir(parents=True)
        con = duckdb.connect()
        con.execute("SET TimeZone = 'UTC'")
        paths = []
        for i in range(files):
            late = "" if i == 0 else f"""UNION ALL SELECT
                    TIMESTAMP '{T0}' + to_microseconds(CAST(({i - 1} * {SPAN_S} + random() * 300) * 1e6 AS BIGINT)),
                    'k' || CAST(floor(random() * {KEYS}) AS INT), CAST(floor(random() * 100) AS INT), {i}
                  FROM range({LATE_PER_FILE})"""
            path = data / f"part-{i:03d}.parquet"
            # TIMESTAMPTZ is stored as a UTC instant, which Spark reads as TIMESTAMP
            con.execute(f"""COPY (SELECT CAST(ts AS TIMESTAMPTZ) AS ts, k, v, b FROM (
                SELECT TIMESTAMP '{T0}' + to_microseconds(CAST(({i} * {SPAN_S} + random() * {SPAN_S}) * 1e6
                                                               AS BIGINT)) AS ts,
                       'k' || CAST(floor(random() * {KEYS}) AS INT) AS k, CAST(floor(random() * 100) AS INT) AS v,
                       {i} AS b
                FROM range({rows}) {late})) TO '{path}' (FORMAT parquet)""")
            paths.append(path)
        flush = root / "flush.parquet"
        con.execute(f"""COPY (SELECT CAST(TIMESTAMP '{T0}' + INTERVAL 30 DAY AS TIMESTAMPTZ) AS ts, 'zz' AS k,
                                     0 AS v, {files} AS b) TO '{flush}' (FORMAT parquet)""")
        con.close()
        return cls(root, paths, flush, files * rows + (files - 1) * LATE_PER_FILE + 1)

    def fresh_input(self, tag: str) -> Path:
        folder = self.root / "runs" / tag / "in"
        folder.mkdir(parents=True)
        return folder

    def feed(self, folder: Path, files: int | None, process: Callable[[], None]) -> float:
        """Drop the data files in one at a time, each processed (with the no-data micro-batch it causes)
        before the next; returns the seconds it took.

        One at a time, as files arriving over time are: Spark judges late rows by the watermark of the
        micro-batch before, so with files queued up a row is late only two micro-batches after the one
        that moved the watermark past its window (see the report), and the engines would differ."""
        start = time.perf_counter()
        for path in self.files[:files]:
            os.link(path, folder / path.name)
            process()
        return time.perf_counter() - start

    def flush_all(self, folder: Path, process: Callable[[], None]) -> float:
        start = time.perf_counter()
        os.link(self.flush, folder / "part-999.parquet")
        process()
        return time.perf_counter() - start


@dataclass
class Run:
    seconds: float
    state_open: int  # state rows after the data files (windows open)
    state_after: int  # state rows after the last file moved the watermark past every window
    open_windows: int = -1  # custom path: windows in sqlwin's state while open
    windows_after: int = -1
    result: list[tuple] = field(default_factory=list)
    late_rows: int = -1


def sorted_rows(df: Any) -> list[tuple]:
    return sorted(tuple(r) for r in df.where("k <> 'zz'").select(*RESULT).collect())


# -- engines ------------------------------------------------------------------------------------
class Engines:
    """One method per engine; each takes a fresh input folder and returns a Run."""

    def __init__(self, spark: Any, work: Workload):
        self.spark = spark
        self.work = work
        self.n = 0
        self.last_table = ""  # the sink of the last sqlwin streaming table run

    def _tag(self, engine: str) -> str:
        self.n += 1
        return f"{engine}_{self.n}"

    def stream(self, folder: Path, tag: str) -> str:
        name = f"s_{tag}"
        sqlwin.sql(self.spark, f"CREATE STREAM {name} ({SCHEMA}, WATERMARK FOR ts AS ts - INTERVAL 1 MINUTE) "
                               f"USING parquet OPTIONS (path '{folder}', maxFilesPerTrigger '1')")
        return name

    def sqlwin_table(self, tail: str, files: int | None, on_time_only: bool = False) -> Run:
        """A sqlwin streaming table over ``SELECT`` plus ``tail`` (lateness, late rows, EMIT)."""
        tag = self._tag("t")
        folder = self.work.fresh_input(tag)
        os.environ["SQLWIN_STREAMING_DIR"] = str(folder.parent / "root")
        src = self.stream(folder, tag)
        out, late = f"out_{tag}", f"late_{tag}"
        start = time.perf_counter()
        sqlwin.sql(self.spark, f"CREATE STREAMING TABLE {out} AS {SELECT.format(src=src)} "
                               f"{tail.format(late=late)}")
        table = catalog.find_table(out)
        try:
            settle_table = functools.partial(settle, table.query)
            seconds = time.perf_counter() - start + self.work.feed(folder, files, settle_table)
            opened = table.status()
            seconds += self.work.flush_all(folder, settle_table)
            after = table.status()
        finally:
            table.stop()
            catalog.remove_table(out)
        self.last_table = out
        result = self.spark.table(out)
        if on_time_only:
            result = result.where("pane_timing = 'ON_TIME'")
        late_rows = self.spark.table(late).count() if "LATE ROWS TO" in tail else opened.late_rows_dropped
        windows = (opened.open_windows, after.open_windows) if table.path == "custom" else (-1, -1)
        return Run(seconds, opened.state_rows, after.state_rows, *windows, sorted_rows(result), late_rows)

    def native(self, files: int | None = None) -> Run:
        return self.sqlwin_table("", files)

    def custom(self, files: int | None = None) -> Run:
        return self.sqlwin_table("ALLOWED LATENESS INTERVAL 5 MINUTES LATE ROWS TO {late}", files, on_time_only=True)

    def spark_native(self, files: int | None = None) -> Run:
        """The hand-written query a Spark user would write for the same result."""
        from pyspark.sql import functions as F

        tag = self._tag("spark")
        folder = self.work.fresh_input(tag)
        out, checkpoint = folder.parent / "out", folder.parent / "checkpoint"
        start = time.perf_counter()
        rows = self.spark.readStream.schema(SCHEMA).option("maxFilesPerTrigger", 1).parquet(str(folder))
        result = rows.withWatermark("ts", "1 minute").groupBy(F.window("ts", "10 minutes"), "k") \
            .agg(F.sum("v").alias("s"), F.count(F.lit(1)).alias("c")) \
            .select(F.col("window.start").alias("window_start"), F.col("window.end").alias("window_end"), "k", "s",
                    "c")
        query = result.writeStream.outputMode("append").format("parquet").option("path", str(out)) \
            .option("checkpointLocation", str(checkpoint)).start()
        try:
            seconds = time.perf_counter() - start + self.work.feed(folder, files, functools.partial(settle, query))
            opened = state_rows(query)
            seconds += self.work.flush_all(folder, functools.partial(settle, query))
            after = state_rows(query)
            dropped = sum(o.get("numRowsDroppedByWatermark", 0) for p in query.recentProgress
                          for o in p.get("stateOperators") or [])
        finally:
            query.stop()
        return Run(seconds, opened, after, result=sorted_rows(self.spark.read.parquet(str(out))), late_rows=dropped)

    def replay_table(self, files: int | None) -> str:
        view = f"bench_rows_{files or 'all'}"
        paths = [str(p) for p in self.work.files[:files]]
        self.spark.read.schema(SCHEMA).parquet(*paths).createOrReplaceTempView(view)
        return view

    def replay(self, files: int | None = None) -> Run:
        view = self.replay_table(files)
        name = f"r_{self._tag('replay')}"
        start = time.perf_counter()
        sqlwin.sql(self.spark, f"CREATE STREAM {name} FROM TABLE {view} ARRIVAL ORDER BY b, ts MICRO BATCH BY b "
                               "WATERMARK FOR ts AS ts - INTERVAL 1 MINUTE")
        panes = sqlwin.sql(self.spark, SELECT.format(src=name))
        result = sorted_rows(panes)
        return Run(time.perf_counter() - start, -1, -1, result=result)

    def batch(self, files: int | None = None) -> Run:
        view = self.replay_table(files)
        start = time.perf_counter()
        sqlwin.sql(self.spark, SELECT.format(src=view)).write.format("noop").mode("overwrite").save()
        return Run(time.perf_counter() - start, -1, -1)

    def batch_on_time(self, files: int | None = None) -> list[tuple]:
        """The batch query over the rows that are not late (a file's rows before its hour): the expected panes."""
        view = self.replay_table(files)
        on_time = f"{view}_on_time"
        self.spark.table(view).where(f"ts >= TIMESTAMP '{T0}' + make_dt_interval(0, 0, 0, b * {SPAN_S})") \
            .createOrReplaceTempView(on_time)
        return sorted_rows(sqlwin.sql(self.spark, SELECT.format(src=on_time)))


def settle(query: Any, deadline_s: float = 30.0) -> None:
    """Process everything available, then wait for the no-data micro-batch that fires the windows.

    ``processAllAvailable`` returns once the source's offsets are processed, but Spark runs the no-data
    batch (eviction, output) after that, racing the next file and the state read: wait until it ran.
    sqlwin's custom path runs the no-data micro-batch a micro-batch makes due inside that micro-batch, and
    asks for any other through its tick source, whose offsets ``processAllAvailable`` waits for: it is done
    then (waiting for a no-data progress it never makes would wait for Spark's idle event, 10 s a file)."""
    query.processAllAvailable()
    if custom_path(query.lastProgress or {}):
        return
    end = time.monotonic() + deadline_s
    while time.monotonic() < end:
        progress = query.lastProgress or {}
        if data_rows(progress) == 0 and not query.status.get("isTriggerActive"):
            return
        time.sleep(0.02)
    print(f"warning: no no-data micro-batch after {deadline_s}s", flush=True)


def custom_path(progress: dict) -> bool:
    """Whether the query is sqlwin's custom path: one of its sources is its tick source."""
    return any(_is_ticks(s) for s in progress.get("sources") or [])


def _is_ticks(source: dict) -> bool:
    return f"{os.sep}ticks]" in (source.get("description") or "")


def data_rows(progress: dict) -> int:
    """Input rows of a micro-batch, not counting the custom path's tick rows: its tick micro-batch *is* the
    no-data micro-batch. (Counting them made ``settle`` wait for Spark's idle progress event, 10 s a file.)"""
    sources = progress.get("sources")
    if sources is None:
        return progress.get("numInputRows", 1)
    return sum(s.get("numInputRows", 0) or 0 for s in sources if not _is_ticks(s))


def state_rows(query: Any) -> int:
    progress = query.lastProgress or {}
    return sum(o.get("numRowsTotal", 0) or 0 for o in progress.get("stateOperators") or [])


# -- profile of the custom operator ---------------------------------------------------------------
# each phase of a micro-batch: the methods of the operator and of its roles that run it
PHASES = {
    "_read": [("operator", "MicroBatchOperator", "_read")],
    "scan": [("timewindows", "TimeWindowAssigner", "scan"), ("sessions", "SessionAssigner", "scan")],
    "assign": [("assigner", "WindowAssigner", "assign"), ("countwindows", "CountWindowAssigner", "assign")],
    "store rows": [("rowstore", "StoredRows", "write"), ("rowstore", "StoredRows", "write_arrow")],
    "write_late": [("operator", "MicroBatchOperator", "write_late")],
    "drive": [("engines", "WindowStates", "drive"), ("engines", "ColumnarEngine", "drive"),
              ("countwindows", "CountWindowPanes", "drive")],
    "_emit": [("operator", "MicroBatchOperator", "_emit")],
    "_collect_garbage": [("operator", "MicroBatchOperator", "_collect_garbage")],
    "_commit": [("operator", "MicroBatchOperator", "_commit")],
    "step": [("operator", "MicroBatchOperator", "step")],
    # planned replay: its Spark work up front (scan, counts), then the steps above, then the panes
    "replay: plannable": [("plannedreplay", "PlannedReplay", "plannable"),
                          ("countreplay", "PlannedCountReplay", "plannable")],
    "replay: scan": [("plannedreplay", "PlannedReplay", "_stored_groups"),
                     ("plannedreplay", "PlannedReplay", "_counts"), ("countreplay", "PlannedCountReplay", "_groups")],
    "replay: panes": [("plannedreplay", "PlannedReplay", "_panes")],
    "replay: run": [("plannedreplay", "PlannedReplay", "run"), ("countreplay", "PlannedCountReplay", "run")],
}


def profile_operator() -> dict[str, list[float]]:
    """Wrap the phases of ``MicroBatchOperator.step`` (methods of the operator and its roles) with timers;
    returns the seconds of every call per phase."""
    import importlib

    spent: dict[str, list[float]] = collections.defaultdict(list)
    for phase, places in PHASES.items():
        for module, cls_name, name in places:
            cls = getattr(importlib.import_module(f"sqlwin.streaming.{module}"), cls_name)
            method = cls.__dict__.get(name)
            if method is None:
                continue

            @functools.wraps(method)
            def timed(*args: Any, _m: Callable = method, _n: str = phase, **kwargs: Any) -> Any:
                start = time.perf_counter()
                try:
                    return _m(*args, **kwargs)
                finally:
                    spent[_n].append(time.perf_counter() - start)

            setattr(cls, name, timed)
    return spent


def print_phases(spent: dict[str, list[float]] | None) -> None:
    if spent:
        print("\ncustom operator phases, seconds summed over all measured rounds (calls):")
        for name in PHASES:
            if name in spent:
                print(f"  {name:<18}{sum(spent[name]):>8.2f}  ({len(spent[name])})")


# -- the run ------------------------------------------------------------------------------------
def interleaved(fns: dict[str, Callable[[], Run]], repeat: int) -> dict[str, list[Run]]:
    runs: dict[str, list[Run]] = {name: [] for name in fns}
    for _ in range(repeat):
        for name, fn in fns.items():
            runs[name].append(fn())
    return runs


def check(runs: dict[str, list[Run]], expected: list[tuple], engines: list[str]) -> None:
    """Every engine's panes equal the expected ones in every round, else the timings mean nothing."""
    for name in engines:
        for i, run in enumerate(runs[name]):
            if run.result != expected:
                raise SystemExit(f"{name} round {i}: {len(run.result)} result rows differ from the expected "
                                 f"{len(expected)}; first differences: "
                                 f"{sorted(set(run.result) ^ set(expected))[:5]}")


def load() -> str:
    return subprocess.run(["uptime"], capture_output=True, text=True).stdout.strip()


def report(runs: dict[str, list[Run]], rows: int, baseline: str, pairs: dict[str, str]) -> None:
    """Medians, rows/s, ratios to the baseline (or the pair given), state sizes."""
    median = {name: statistics.median(r.seconds for r in rs) for name, rs in runs.items()}
    print(f"\n{'engine':<10}{'median s':>10}{'rows/s':>12}{'vs':>8}{'ratio':>8}{'state open':>12}"
          f"{'state after':>12}{'windows open/after':>20}   rounds (s)")
    for name, rs in runs.items():
        other = pairs.get(name, baseline)
        ratio = median[name] / median[other] if other in median and other != name else float("nan")
        last = rs[-1]
        windows = f"{last.open_windows}/{last.windows_after}" if last.open_windows >= 0 else "-"
        state = (f"{last.state_open:>12}{last.state_after:>12}" if last.state_open >= 0 else f"{'-':>12}{'-':>12}")
        print(f"{name:<10}{median[name]:>10.2f}{rows / median[name]:>12,.0f}{other:>8}{ratio:>8.2f}{state}"
              f"{windows:>20}   {' '.join(f'{r.seconds:.1f}' for r in rs)}")


def arguments(doc: str | None, extra: tuple[tuple[str, int, str], ...] = ()) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=doc, formatter_class=argparse.RawDescriptionHelpFormatter)
    for flag, default, text in extra:
        parser.add_argument(flag, type=int, default=default, help=text)
    parser.add_argument("--files", type=int, default=3, help="data files = micro-batches (default 3)")
    parser.add_argument("--rows", type=int, default=1_000_000, help="rows per file (default 1M)")
    parser.add_argument("--repeat", type=int, default=3, help="interleaved rounds (default 3)")
    parser.add_argument("--engines", nargs="+", default=None)
    parser.add_argument("--profile", action="store_true", help="time each phase of the custom operator")
    parser.add_argument("--keep", action="store_true", help="keep the data folder")
    return parser.parse_args()


def session() -> Any:
    spark = local_session("sqlwin-bench-streaming", {"spark.driver.memory": "4g"})
    return spark


def main() -> None:
    args = arguments(__doc__)
    print(f"load before: {load()}", flush=True)
    spark = session()
    root = Path(tempfile.mkdtemp(prefix="sqlwin-bench-stream-"))
    try:
        work = Workload.make(root, args.files, args.rows)
        engines = Engines(spark, work)
        all_fns: dict[str, Callable[[int | None], Run]] = {
            "native": engines.native, "spark": engines.spark_native, "custom": engines.custom,
            "replay": engines.replay, "batch": engines.batch}
        chosen = args.engines or list(all_fns)
        spent = profile_operator() if args.profile else None
        # warm-up on the first file only (JIT, Python workers), then the results on every file are checked
        interleaved({n: functools.partial(all_fns[n], 1) for n in chosen}, 1)
        if spent is not None:
            spent.clear()
        runs = interleaved({n: all_fns[n] for n in chosen}, args.repeat)
        expected = engines.batch_on_time()
        check(runs, expected, [n for n in chosen if n != "batch"])
        print(f"{args.files} files x {args.rows:,} rows (+{LATE_PER_FILE} late rows per file after the first, "
              f"+1 flush row) = {work.rows:,} rows; {len(expected)} result rows, equal across engines")
        for name in ("spark", "native", "custom"):
            if name in runs:
                print(f"{name}: late rows dropped {runs[name][-1].late_rows}")
        report(runs, work.rows, "spark", {"replay": "batch", "batch": "batch"})
        print_phases(spent)
        print(f"\nload after: {load()}")
    finally:
        spark.stop()
        if not args.keep:
            shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
