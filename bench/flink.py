"""sqlwin's streaming custom path vs Apache Flink 2.3 on the same TUMBLE aggregation over the same CSV files
(issue 17, point 3), side by side in one run, with hand-written Spark streaming as a third column.

    python -m bench.flink [--files 4] [--rows 1000000] [--repeat 3] [--flink-python PATH]

Flink runs as PyFlink's local mini-cluster, streaming mode, parallelism 2, in its own virtual environment
(``pip install apache-flink==2.3.0`` into ``.venv-flink``, made on first use; it needs Java 17, as Spark does):
its Python process runs the SQL below and times the job from submission to its last result row, after a
warm-up job in the same process (the mini-cluster's start is not counted, as Spark's session start is not).
The input is ``--files`` CSV files of ``--rows`` rows (100 keys, one hour of event time per file, in order)
plus, for Spark, a one-row file far in the future that closes every window (Flink ends a bounded input with
the largest watermark). sqlwin reads the files as a stream, one file per micro-batch, all present when the table
starts; the custom path is the one with ``ALLOWED LATENESS`` and ``LATE ROWS TO``. The watermark's delay
covers the whole input (files + 1 hours): Flink's file source reads the files in parallel and in no set order,
so with a short delay the rows of a file read after a later one are late and dropped, and the engines would
not compute the same windows; with it, every engine's answer is the batch query's.

Results are checked before any time counts: every engine's ON_TIME panes equal the batch query's.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import duckdb

import sqlwin
from bench.streaming import load, settle
from sqlwin.session import local_session
from sqlwin.streaming import catalog

ROOT = Path(__file__).resolve().parents[1]
T0 = "2024-01-01 00:00:00"
KEYS = 100
SCHEMA = "ts TIMESTAMP, k STRING, v INT"
SELECT = ("SELECT window_start, window_end, k, SUM(v) AS s, COUNT(*) AS c "
          "FROM TUMBLE(TABLE {src}, DESCRIPTOR(ts), INTERVAL 10 MINUTES) GROUP BY window_start, window_end, k")

FLINK_JOB = r'''
import json, sys, time
from pyflink.table import EnvironmentSettings, TableEnvironment

env = TableEnvironment.create(EnvironmentSettings.in_streaming_mode())
env.get_config().set("parallelism.default", "2")
query = ("SELECT window_start, window_end, k, SUM(v) AS s, COUNT(*) AS c FROM TABLE(TUMBLE(TABLE {src}, "
         "DESCRIPTOR(ts), INTERVAL '10' MINUTES)) GROUP BY window_start, window_end, k")


def run(src, path):
    env.execute_sql(f"CREATE TEMPORARY TABLE {src} (ts TIMESTAMP(3), k STRING, v INT, WATERMARK FOR ts AS "
                    f"ts - INTERVAL '{DELAY_H}' HOUR) WITH ('connector' = 'filesystem', 'path' = '{path}', "
                    "'format' = 'csv')")
    start = time.perf_counter()
    with env.execute_sql(query.format(src=src)).collect() as results:
        rows = [[str(r[0]), str(r[1]), r[2], int(r[3]), int(r[4])] for r in results]
    return time.perf_counter() - start, rows


DELAY_H = int(sys.argv[1])
run("warm", sys.argv[2])
out = []
for i, path in enumerate(sys.argv[3:]):
    seconds, rows = run(f"src{i}", path)
    out.append({"seconds": seconds, "rows": rows})
print("RESULT " + json.dumps(out), flush=True)
'''


def flink_python(given: str | None) -> str:
    """PyFlink's interpreter: ``--flink-python``, else ``.venv-flink`` (created, with apache-flink, if absent)."""
    if given:
        return given
    venv = ROOT / ".venv-flink"
    python = venv / "bin" / "python"
    if not python.exists():
        print("creating .venv-flink with apache-flink 2.3.0 (once)", flush=True)
        subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
        subprocess.run([str(python), "-m", "pip", "install", "--quiet", "apache-flink==2.3.0"], check=True)
    return str(python)


def make_files(root: Path, files: int, rows: int) -> tuple[list[Path], Path]:
    """CSV files without a header (Flink's csv format has none), timestamps as both engines parse them."""
    data = root / "data"
    data.mkdir(parents=True)
    con = duckdb.connect()
    paths = []
    for i in range(files):
        path = data / f"part-{i:03d}.csv"
        con.execute(f"""COPY (SELECT strftime(TIMESTAMP '{T0}' + to_microseconds(CAST(({i} * 3600 + random() * 3600)
                                                                                    * 1e6 AS BIGINT)),
                                              '%Y-%m-%d %H:%M:%S.%g') AS ts,
                                    'k' || CAST(floor(random() * {KEYS}) AS INT) AS k,
                                    CAST(floor(random() * 100) AS INT) AS v
                             FROM range({rows})) TO '{path}' (FORMAT csv, HEADER false)""")
        paths.append(path)
    flush = data / "part-999.csv"
    flush.write_text("2024-02-01 00:00:00.000,zz,0\n")
    con.close()
    return paths, flush


def run_flink(python: str, inputs: list[Path], warm: Path, delay_h: int) -> list[dict]:
    script = inputs[0].parent / "flink_job.py"
    script.write_text(FLINK_JOB)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYSPARK", "SPARK_"))}
    done = subprocess.run([python, str(script), str(delay_h), str(warm), *map(str, inputs)], capture_output=True,
                          text=True,
                          env=env, timeout=3600)
    for line in done.stdout.splitlines():
        if line.startswith("RESULT "):
            return json.loads(line[len("RESULT "):])
    raise SystemExit(f"Flink failed (exit {done.returncode}):\n{done.stdout[-2000:]}\n{done.stderr[-4000:]}")


def normal(rows: list) -> list[tuple]:
    """Result rows compared across engines: bounds as text to the second, the keys, the sums."""
    return sorted((str(r[0])[:19], str(r[1])[:19], r[2], int(r[3]), int(r[4])) for r in rows if r[2] != "zz")


class Spark:
    def __init__(self, spark: Any, files: list[Path], flush: Path, root: Path):
        self.spark, self.files, self.flush, self.root = spark, files, flush, root
        self.delay_h = len(files) + 1
        self.n = 0

    def _input(self, engine: str) -> Path:
        """A fresh folder holding every input file (hard links), as Flink's input is all there at the start."""
        self.n += 1
        folder = self.root / "runs" / f"{engine}_{self.n}"
        (folder / "in").mkdir(parents=True)
        for path in [*self.files, self.flush]:
            os.link(path, folder / "in" / path.name)
        return folder

    def custom(self) -> tuple[float, list[tuple]]:
        folder = self._input("custom")
        tag = f"fl{self.n}"
        os.environ["SQLWIN_STREAMING_DIR"] = str(folder / "root")
        sqlwin.sql(self.spark, f"CREATE STREAM s_{tag} ({SCHEMA}, WATERMARK FOR ts AS ts - INTERVAL "
                               f"{self.delay_h} HOURS) USING csv OPTIONS (path '{folder / 'in'}', header 'false', "
                               "maxFilesPerTrigger '1')")
        start = time.perf_counter()
        sqlwin.sql(self.spark, f"CREATE STREAMING TABLE o_{tag} AS {SELECT.format(src=f's_{tag}')} "
                               f"ALLOWED LATENESS INTERVAL 5 MINUTES LATE ROWS TO l_{tag}")
        table = catalog.find_table(f"o_{tag}")
        assert table.path == "custom", table.why
        try:
            settle(table.query)
            seconds = time.perf_counter() - start
        finally:
            table.stop()
            catalog.remove_table(f"o_{tag}")
        rows = self.spark.table(f"o_{tag}").where("pane_timing = 'ON_TIME'").select(
            "window_start", "window_end", "k", "s", "c").collect()
        return seconds, normal(rows)

    def hand_written(self) -> tuple[float, list[tuple]]:
        from pyspark.sql import functions as F

        folder = self._input("spark")
        start = time.perf_counter()
        rows = self.spark.readStream.schema(SCHEMA).option("maxFilesPerTrigger", 1).csv(str(folder / "in"))
        result = rows.withWatermark("ts", f"{self.delay_h} hours").groupBy(F.window("ts", "10 minutes"), "k") \
            .agg(F.sum("v").alias("s"), F.count(F.lit(1)).alias("c")) \
            .select(F.col("window.start").alias("window_start"), F.col("window.end").alias("window_end"), "k", "s",
                    "c")
        query = result.writeStream.outputMode("append").format("parquet").option("path", str(folder / "out")) \
            .option("checkpointLocation", str(folder / "checkpoint")).start()
        try:
            settle(query)
            seconds = time.perf_counter() - start
        finally:
            query.stop()
        return seconds, normal(self.spark.read.parquet(str(folder / "out")).collect())

    def batch(self) -> list[tuple]:
        self.spark.read.schema(SCHEMA).csv([str(p) for p in self.files]).createOrReplaceTempView("flink_rows")
        return normal(sqlwin.sql(self.spark, SELECT.format(src="flink_rows")).collect())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--files", type=int, default=4)
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--flink-python", default=None, help="a Python with apache-flink 2.3 (default .venv-flink)")
    args = parser.parse_args()
    python = flink_python(args.flink_python)
    print(f"load before: {load()}", flush=True)
    root = Path(tempfile.mkdtemp(prefix="sqlwin-bench-flink-"))
    try:
        files, flush = make_files(root, args.files, args.rows)
        inputs = []
        for i in range(args.repeat):  # Flink reads a folder: one per round, the same files
            folder = root / f"flink_in_{i}"
            folder.mkdir()
            # no flush row: Flink's file source may read it first (its watermark would make every row late), and
            # the end of a bounded input is the largest watermark there anyway
            for path in files:
                os.link(path, folder / path.name)
            inputs.append(folder)
        warm = root / "flink_warm"
        warm.mkdir()
        os.link(files[0], warm / files[0].name)
        # before Spark starts: neither JVM competes with the other
        flink = run_flink(python, inputs, warm, args.files + 1)
        spark = local_session("sqlwin-bench-flink", {"spark.driver.memory": "4g"})
        try:
            engines = Spark(spark, files, flush, root)
            engines.hand_written()  # warm-up
            runs: dict[str, list[tuple[float, list[tuple]]]] = {"custom": [], "spark": []}
            for _ in range(args.repeat):
                runs["spark"].append(engines.hand_written())
                runs["custom"].append(engines.custom())
            expected = engines.batch()
        finally:
            spark.stop()
        runs["flink"] = [(r["seconds"], normal(r["rows"])) for r in flink]
        for name, rs in runs.items():
            for _, rows in rs:
                if rows != expected:
                    raise SystemExit(f"{name}: {len(rows)} rows differ from the batch query's {len(expected)}: "
                                     f"{sorted(set(rows) ^ set(expected))[:5]}")
        median = {name: statistics.median(s for s, _ in rs) for name, rs in runs.items()}
        total = args.files * args.rows
        print(f"\n{args.files} CSV files x {args.rows:,} rows = {total:,} rows, {len(expected)} windows x keys, "
              "equal across engines (and to the batch query)")
        print(f"{'engine':<8}{'median s':>10}{'rows/s':>12}{'vs flink':>10}{'vs spark':>10}   rounds (s)")
        for name in ("custom", "spark", "flink"):
            rounds = " ".join(f"{s:.2f}" for s, _ in runs[name])
            print(f"{name:<8}{median[name]:>10.2f}{total / median[name]:>12,.0f}{median[name] / median['flink']:>10.2f}"
                  f"{median[name] / median['spark']:>10.2f}   {rounds}")
        print(f"\nload after: {load()}")
    finally:
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
