"""Class data sharing for the JVMs of a test run: the classes a Spark JVM loads to run sqlwin, parsed and verified
once, into an archive that every JVM of the run maps at start instead.

The suite starts many JVMs besides its sessions' (the SIGKILL tests' drivers, standalone daemons and executors,
Thrift and Connect servers, CLI and service runs), and on 2 cores their start-up is a large part of its CPU: a
local session that answers one query took 8.7-11.6 core-seconds here and 7.2-9.8 s, and 5.3-6.1 core-seconds and
4.3-5.1 s with the archive (Java 17's dynamic AppCDS, ``-XX:ArchiveClassesAtExit`` then
``-XX:SharedArchiveFile``). Sharing classes changes nothing that runs: a JVM whose class path does not match the
archive's (another venv's pyspark, a jar that changed) loads its classes from the jars as before, silently.

The archive is built once per set of jars (its name is a digest of the JVM and of pyspark's jars, so it is never
used with other ones), in the temporary folder, by one JVM that runs a small sqlwin workload (batch queries, Python
UDTFs, both streaming paths over JSON files, a Parquet sink) and writes the archive as it exits. tests/conftest.py
builds it before the suite's processes start and hands it to them through ``ARCHIVE_ENV`` (``off`` there: none)."""

from __future__ import annotations

import contextlib
import hashlib
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ARCHIVE_ENV = "SQLWIN_TEST_CLASS_ARCHIVE"
# a class path that does not match warns on stdout, where the CLI tests read their output
_QUIET = "-Xlog:cds=off,cds+dynamic=off"

WORKLOAD = """
import json, os, sys
sys.path.insert(0, {root!r})
import sqlwin
from sqlwin.session import local_session
from sqlwin.streaming import catalog

work = {work!r}
os.environ["SQLWIN_STREAMING_DIR"] = os.path.join(work, "root")
spark = local_session("class-archive", conf={{"spark.sql.codegen.wholeStage": "false"}})
folder = os.path.join(work, "in")
os.makedirs(folder)
for i, rows in enumerate([[("a", 1, 1), ("b", 2, 3), ("a", 3, 12), ("a", 4, 2), ("b", 5, 40)]]):
    with open(os.path.join(folder, f"f{{i}}.json"), "w") as f:
        f.writelines(json.dumps({{"k": k, "v": v, "ts": f"2024-01-01 00:00:{{s:02d}}"}}) + "\\n" for k, v, s in rows)
sqlwin.sql(spark, "CREATE STREAM s (k STRING, v INT, ts TIMESTAMP, WATERMARK FOR ts AS ts - INTERVAL 2 SECONDS) "
                  f"USING json OPTIONS (path '{{folder}}')")
sqlwin.sql(spark, f"CREATE TABLE t (k STRING, v INT, ts TIMESTAMP) USING json OPTIONS (path '{{folder}}')")
query = ("SELECT window_start, window_end, k, SUM(v) AS s, COUNT(*) AS c "
         "FROM TUMBLE(TABLE s, DESCRIPTOR(ts), INTERVAL 10 SECONDS) GROUP BY window_start, window_end, k")
sqlwin.sql(spark, f"CREATE STREAMING TABLE custom_out AS {{query}} ALLOWED LATENESS INTERVAL 5 SECONDS "
                  "LATE ROWS TO late_out EMIT WITH TRIGGER AFTER WATERMARK EARLY EVERY 2 ROWS")
sqlwin.sql(spark, f"CREATE STREAMING TABLE native_out AS {{query}}")
for table in catalog.all_tables():
    table.process_all_available()
spark.sql("SELECT * FROM custom_out").collect()
spark.sql("SELECT * FROM native_out").collect()
for table in catalog.all_tables():
    table.stop()
batch = ["SELECT window_start, k, SUM(v) FROM SESSION(TABLE t PARTITION BY k, DESCRIPTOR(ts), INTERVAL 5 SECONDS) "
         "GROUP BY window_start, k",
         "SELECT window_start, window_end, COUNT(*) FROM CUMULATE(TABLE t, DESCRIPTOR(ts), INTERVAL 5 SECONDS, "
         "INTERVAL 20 SECONDS) GROUP BY window_start, window_end",
         "SELECT * FROM (SELECT *, ROW_NUMBER() OVER (PARTITION BY window_start ORDER BY v DESC) AS r "
         "FROM HOP(TABLE t, DESCRIPTOR(ts), INTERVAL 5 SECONDS, INTERVAL 10 SECONDS)) WHERE r <= 1"]
for sql in batch:
    sqlwin.sql(spark, sql).collect()
sqlwin.sql(spark, batch[0]).write.parquet(os.path.join(work, "parquet"))
spark.range(10).toPandas()
print("WORKLOAD DONE", flush=True)
"""


def options() -> str:
    """The JVM options that map the run's archive (empty when there is none): for ``SPARK_SUBMIT_OPTS``,
    ``SPARK_DAEMON_JAVA_OPTS`` and ``spark.*.extraJavaOptions``."""
    path = os.environ.get(ARCHIVE_ENV)
    return f"-XX:SharedArchiveFile={path} {_QUIET}" if path else ""


def _digest(spark_home: Path) -> str:
    """The JVM and every jar the archive holds classes of, by path, size and modification time: the JVM
    refuses an archive whose jars changed, and a new name keeps a stale one from being tried at all."""
    java = Path(os.path.realpath(shutil.which("java") or "java"))
    parts = [str(java), str(java.stat().st_mtime_ns) if java.exists() else ""]
    for jar in sorted((spark_home / "jars").iterdir()):
        stat = jar.stat()
        parts.append(f"{jar}:{stat.st_size}:{stat.st_mtime_ns}")
    return hashlib.sha256("\n".join(parts).encode()).hexdigest()[:16]


def _prune(folder: Path, days: float = 3) -> None:
    """Remove the archives of other venvs that no run used for ``days`` (200 MB each). A JVM that has one mapped
    keeps it; one started later runs without it."""
    for old in folder.glob("spark-*.jsa"):
        with contextlib.suppress(OSError):
            if time.time() - old.stat().st_mtime > days * 86400:
                old.unlink()


def build(timeout: float = 600) -> Path | None:
    """The archive for pyspark's jars, built now if it is not there yet (None if it could not be built: the
    suite then runs without it, only slower)."""
    import pyspark

    root = Path(__file__).resolve().parent.parent
    spark_home = Path(pyspark.__file__).parent  # a complete SPARK_HOME (bin/, jars/)
    folder = Path(tempfile.gettempdir()) / "sqlwin-test-class-archives"
    archive = folder / f"spark-{_digest(spark_home)}.jsa"
    if archive.is_file():
        os.utime(archive)  # in use: not pruned
        return archive
    folder.mkdir(exist_ok=True)
    _prune(folder)
    work = Path(tempfile.mkdtemp(prefix="class-archive-", dir=folder))
    try:
        partial = work / "archive.jsa"
        script = work / "workload.py"
        script.write_text(WORKLOAD.format(root=str(root), work=str(work)))
        env = {**os.environ, "SPARK_HOME": str(spark_home), "PYSPARK_PYTHON": sys.executable,
               "SPARK_LOCAL_IP": "127.0.0.1", "TZ": "UTC", "PYTHONPATH": str(root),
               # C1 only: the workload's JIT work is not archived, only the classes it loads (60 core-seconds, not 86)
               "SPARK_SUBMIT_OPTS": f"-XX:TieredStopAtLevel=1 -XX:ArchiveClassesAtExit={partial} {_QUIET}"}
        env.pop(ARCHIVE_ENV, None)
        # spark-submit's JVM is the process waited for: the archive is whole when it has exited
        done = subprocess.run([str(spark_home / "bin" / "spark-submit"), "--master", "local[2]", str(script)],
                              env=env, cwd=work, capture_output=True, text=True, timeout=timeout)
        if done.returncode != 0 or "WORKLOAD DONE" not in done.stdout or not partial.is_file():
            sys.stderr.write(f"sqlwin tests: no class archive (exit {done.returncode}):\n{done.stderr[-3000:]}\n")
            return None
        os.replace(partial, archive)  # atomic: a concurrent run sees the whole archive or none
        return archive
    except (OSError, subprocess.TimeoutExpired) as exc:
        sys.stderr.write(f"sqlwin tests: no class archive: {exc}\n")
        return None
    finally:
        shutil.rmtree(work, ignore_errors=True)
