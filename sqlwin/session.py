"""One place that builds the embedded local SparkSession (CLI, server, tests, benchmarks)."""

from __future__ import annotations

import os
import sys
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

DEFAULT_CONF: dict[str, str] = {
    "spark.sql.session.timeZone": "UTC",
    "spark.log.structuredLogging.enabled": "false",
    "spark.ui.enabled": "false",
    "spark.ui.showConsoleProgress": "false",
    "spark.sql.shuffle.partitions": "4",
    "spark.sql.catalogImplementation": "in-memory",
    "spark.driver.memory": "2g",
    "spark.sql.execution.arrow.pyspark.enabled": "true",
    "spark.python.worker.reuse": "true",
    # an idle stream under Spark's default trigger is listed every pollingDelay: Spark's 10 ms kept half a core busy
    # per idle table here (more on viewfs over the local file system: a forked `ls -ld` per file listed), and a
    # remote file system answers a listing request per poll. At 100 ms a new file is read at most 0.1 s later.
    "spark.sql.streaming.pollingDelay": "100ms",
    # pyspark's DataFrame debugging records the Python call site of every DataFrame API call in the JVM (several
    # Py4J round trips and a walk of the Python stack per ``F.col``): 2.7 ms for an ``F.lit`` and an ``F.col``
    # here, 0.9 ms without; a stepped replay of 18 micro-batches 7.3-8.0 s with, 6.3-7.4 s without. Those call
    # sites are sqlwin's own lines, never the user's: sqlwin reports errors at the user's SQL (diagnostics.py).
    "spark.python.sql.dataFrameDebugging.enabled": "false",
    # Spark keeps 100 compiled expression classes; a streaming table's micro-batch runs several queries of its
    # own shape (assignment, scan, panes, sinks), and a session runs several tables, so 100 evict each other and
    # Spark compiles them again (Janino, ~4 ms a class here): the 10 planned-vs-stepped replays of
    # tests/test_replay_planned.py compiled 1 992 classes at 100, 685 at 1 000 (a class is a few kB of metaspace)
    "spark.sql.codegen.cache.maxEntries": "1000",
}


def local_session(app_name: str = "sqlwin", conf: dict[str, Any] | None = None,
                  master: str | None = None) -> SparkSession:
    """A local SparkSession with sqlwin's defaults (UTC, readable logs, no UI), sqlwin registered."""
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    os.environ.setdefault("PYARROW_IGNORE_TIMEZONE", "1")
    # Python workers must run this interpreter (with pyarrow and sqlwin), not whatever is on PATH
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    from pyspark.sql import SparkSession

    master = master or os.environ.get("SQLWIN_MASTER", "local[2]")
    settings = {k: str(v) for k, v in {**DEFAULT_CONF, **(conf or {})}.items()}
    _launch_jvm({"spark.master": master, "spark.app.name": app_name, **settings})
    builder = SparkSession.builder.appName(app_name).master(master)
    for key, value in settings.items():
        builder = builder.config(key, value)
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel(os.environ.get("SQLWIN_SPARK_LOG_LEVEL", "ERROR"))
    from sqlwin.api import register

    register(spark)
    return spark


def _launch_jvm(settings: dict[str, str]) -> None:
    """Start Spark's JVM (if this process has none yet) with the ``spark.*`` settings only. pyspark hands every
    setting to spark-submit, which drops each other key with "Warning: Ignoring non-Spark config property" on
    stderr (sqlwin's own ``sqlwin.streaming.dir``, Hive's ``hive.*``), although the SparkContext made next gets
    them all, and so does every session of it (a Thrift server's JDBC connections too)."""
    from pyspark import SparkConf, SparkContext

    if SparkContext._gateway is not None:
        return
    launch = SparkConf(loadDefaults=False)
    for key, value in settings.items():
        if key.startswith("spark."):
            launch.set(key, value)
    SparkContext._ensure_initialized(conf=launch)
