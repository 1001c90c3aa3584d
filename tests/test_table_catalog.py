"""Streaming tables are tables (issue 19, point 2): a streaming table's panes and late rows are views of the
session catalog, read by name from any session; DROP STREAMING TABLE [PURGE] removes them.

The stream is fed file by file (tests/streamtools.py), each file processed whole before the next; the panes are
the hand-worked ones of tests/test_streaming.py (BATCHES), compacted every 2 micro-batches so that a reader of the
catalog view reads a compacted file and folders, each row once. JDBC connections reading by name:
tests/test_streaming_server.py.
"""

from __future__ import annotations

import json
import os
import shutil
import threading

import pytest

import sqlwin
from sqlwin.dialect import parse_one
from sqlwin.errors import SqlwinError
from sqlwin.streaming import catalog
from sqlwin.streaming.compaction import SinkLog
from tests.streamtools import Feeder, rows_of
from tests.test_streaming import BATCHES, at

pytestmark = pytest.mark.slow

PANES = ["window_start", "k", "s", "c", "pane_index", "pane_timing", "is_final", "micro_batch"]
LATE = ["k", "v", "ts", "window_start", "window_end", "watermark", "reason", "micro_batch"]
QUERY = """SELECT window_start, window_end, k, SUM(v) AS s, COUNT(*) AS c
    FROM TUMBLE(TABLE cat_s, DESCRIPTOR(ts), INTERVAL 10 SECONDS) GROUP BY window_start, window_end, k"""
CUSTOM = [(at(0), "a", 3, 2, 0, "ON_TIME", False, 2), (at(0), "a", 8, 3, 1, "LATE", False, 3),
          (at(0), "b", 3, 1, 0, "ON_TIME", False, 2), (at(10), "a", 4, 1, 0, "ON_TIME", True, 5)]


def test_dialect_round_trip() -> None:
    for text in ("DROP STREAMING TABLE out", "DROP STREAMING TABLE out PURGE"):
        assert parse_one(text).sql(dialect="sqlwin") == text
    with pytest.raises(SqlwinError, match="line 1, col"):
        parse_one("DROP STREAMING out")


def test_outputs_are_catalog_views_read_by_name_from_any_session(spark, tmp_path, monkeypatch) -> None:
    monkeypatch.setenv("SQLWIN_STREAMING_DIR", str(tmp_path / "root"))
    folder = tmp_path / "in"
    sqlwin.sql(spark, f"CREATE STREAM cat_s (k STRING, v INT, ts TIMESTAMP, WATERMARK FOR ts AS ts - INTERVAL 2 "
                      f"SECONDS) USING json OPTIONS (path '{folder}')")
    try:
        sqlwin.sql(spark, f"CREATE STREAMING TABLE cat_out OPTIONS (compaction_batches '2') AS {QUERY} "
                          "ALLOWED LATENESS INTERVAL 5 SECONDS LATE ROWS TO cat_late")
        table = catalog.find_table("cat_out")
        other = spark.newSession()  # another session: no stream cat_s, no temp view of the tables
        failures: list[str] = []
        done = threading.Event()

        def read_all_along() -> None:
            """The views are changed in place at every commit: a reader always finds them, never in a gap between
            a drop and a create (Spark's CREATE OR REPLACE VIEW), and the files they name are there."""
            while not done.is_set():
                try:
                    other.table("cat_out").schema  # noqa: B018 (resolving the view and its files is the check)
                except Exception as err:  # any failure of a reader is a finding
                    failures.append(str(err).splitlines()[0])
                done.wait(0.2)

        reader = threading.Thread(target=read_all_along)
        reader.start()
        try:
            Feeder(folder).feed(BATCHES, table)
        finally:
            done.set()
            reader.join()
        assert failures == []
        assert not other.catalog.tableExists("cat_s")
        for name in ("cat_out", "cat_late"):
            found = other.catalog.getTable(name)
            assert (found.tableType, found.isTemporary) == ("VIEW", False), name
        # micro-batches 2 and 3 compacted when 5 was written: one compacted file and the folder 5, each row once
        assert SinkLog(str(tmp_path / "root" / "cat_out" / "data")).newest().through == 4
        assert rows_of(other.sql("SELECT * FROM cat_out"), PANES) == CUSTOM
        assert rows_of(other.table("cat_late"), LATE) == [("a", 7, at(8), at(0), at(10), at(28), "late", 6)]

        # the names stay the table's: another table may not take them, from any session
        sqlwin.sql(other, f"CREATE STREAM cat_s (k STRING, v INT, ts TIMESTAMP, WATERMARK FOR ts AS ts) USING json "
                          f"OPTIONS (path '{folder}')")
        with pytest.raises(SqlwinError, match="LATE ROWS TO cat_out: the running streaming table cat_out writes its "
                                              "panes there"):
            sqlwin.sql(other, f"CREATE STREAMING TABLE cat_x AS {QUERY} "
                              "ALLOWED LATENESS INTERVAL 5 SECONDS LATE ROWS TO cat_out")
        sqlwin.sql(spark, "STOP STREAMING TABLE cat_out")
        with pytest.raises(SqlwinError, match=r"line 1, col 24: CREATE STREAMING TABLE cat_late: cat_late holds the "
                                              "late rows of streaming table cat_out; DROP STREAMING TABLE cat_out "
                                              "first, or choose another name"):
            sqlwin.sql(spark, f"CREATE STREAMING TABLE cat_late AS {QUERY}")

        # DROP: stopped or running, its views go; PURGE: its folder too
        assert sqlwin.sql(spark, "DROP STREAMING TABLE cat_out").collect()[0][0] == "streaming table cat_out dropped"
        assert not spark.catalog.tableExists("cat_out") and not spark.catalog.tableExists("cat_late")
        assert (tmp_path / "root" / "cat_out" / "data").is_dir()
        assert catalog.find_table("cat_out") is None
        with pytest.raises(SqlwinError, match="DROP STREAMING TABLE cat_out: no such streaming table"):
            sqlwin.sql(spark, "DROP STREAMING TABLE cat_out")
        # started again on its folder, it resumes and defines its views again; DROP ... PURGE from another session
        sqlwin.sql(spark, f"CREATE STREAMING TABLE cat_out OPTIONS (compaction_batches '2') AS {QUERY} "
                          "ALLOWED LATENESS INTERVAL 5 SECONDS LATE ROWS TO cat_late")
        again = catalog.find_table("cat_out")
        again.process_all_available()
        assert rows_of(other.table("cat_out"), PANES) == CUSTOM
        sqlwin.sql(other, "DROP STREAMING TABLE cat_out PURGE")
        assert not again.is_active and not (tmp_path / "root" / "cat_out").exists()
        assert not spark.catalog.tableExists("cat_out") and not spark.catalog.tableExists("cat_late")
        assert [r.name for r in sqlwin.sql(spark, "SHOW STREAMING TABLES").collect()] == []
    finally:
        for table in catalog.all_tables():
            table.stop()
            catalog.remove_table(table.name)
        for name in ("cat_out", "cat_late"):
            spark.sql(f"DROP VIEW IF EXISTS default.{name}")


@pytest.mark.parametrize("fmt", ["parquet", "json"])
def test_a_view_reads_its_folders_as_one_relation_whatever_the_path(spark, tmp_path, fmt) -> None:
    """The view names its folders in one glob (one schema inference per read, not one per folder); the sink's
    own path is taken literally, glob characters and all, and a folder not named is not read."""
    from pyspark.sql.types import IntegerType, LongType, StructField, StructType

    from sqlwin.streaming.tableviews import view_query

    sink = tmp_path / "we[ir]d{a,b}*?" / "data"
    for batch in (3, 4, 5, 10):
        spark.range(batch).selectExpr("id", "id * 2 AS v").write.format(fmt).save(str(sink / f"micro_batch={batch}"))
    compacted = tmp_path / "c{1}" / "compacted"
    for name, batches in (("c-0", (0, 1)), ("c-2", (2,))):
        spark.createDataFrame([(b, b, b) for b in batches], "id long, v long, micro_batch int") \
            .write.format(fmt).save(str(compacted / name))
    schema = StructType([StructField("id", LongType()), StructField("v", LongType()),
                         StructField("micro_batch", IntegerType())])
    query = view_query(fmt, {}, schema, str(sink), [(3, ""), (4, ""), (10, "")],
                       [str(compacted / "c-0"), str(compacted / "c-2")])
    assert query.count("SELECT") == 2
    rows = sorted(tuple(r) for r in spark.sql(query).collect())
    assert rows == sorted([(0, 0, 0), (1, 1, 1), (2, 2, 2)]
                          + [(i, 2 * i, b) for b in (3, 4, 10) for i in range(b)])  # micro_batch=5 not named
    empty = view_query(fmt, {}, schema, str(sink), [], [])
    assert spark.sql(empty).count() == 0


def _server_gone(spark, stream: str) -> None:
    """After a test of a restarted server: no registry, no table running, its stream dropped."""
    from sqlwin.streaming import registry

    registry.disable()
    for table in catalog.all_tables():
        table.stop()
        catalog.remove_table(table.name)
    catalog.drop_stream(spark, stream)


def test_a_table_a_restarted_server_cannot_start_is_listed_failed_and_not_tried_again(spark, tmp_path,
                                                                                     monkeypatch) -> None:
    """The registry of a restarted ``sqlwin serve`` names a table whose statement now fails (its stream is not
    there): the server lists it failed with that error (``SHOW STREAMING TABLES``) and marks it so, as a query
    that failed, so the next start reports it without failing the same way again; its statement run again (the
    cause fixed) starts it, unmarked. The real server killed and started again: tests/test_server_resume.py."""
    import json

    from sqlwin.server import resume_streaming_tables
    from sqlwin.streaming import registry

    root = tmp_path / "root"
    monkeypatch.setenv("SQLWIN_STREAMING_DIR", str(root))
    statement = ("CREATE STREAMING TABLE gone_out AS SELECT window_start, COUNT(*) AS c FROM TUMBLE(TABLE gone_s, "
                 "DESCRIPTOR(ts), INTERVAL 10 SECONDS) GROUP BY window_start, window_end")
    entry = root / registry.FOLDER / "gone_out.json"
    registry.enable(str(root))
    try:
        registry.record(spark, "gone_out", statement, [], [])
        first = resume_streaming_tables(spark)
        assert len(first) == 1 and first[0].startswith("streaming table gone_out not resumed: ") and \
            "gone_s" in first[0] and first[0].endswith("or DROP STREAMING TABLE gone_out)"), first
        shown = {r[0]: r for r in sqlwin.sql(spark, "SHOW STREAMING TABLES").collect()}["gone_out"]
        assert shown.status == "failed" and "gone_s" in shown.error, shown
        assert "gone_s" in json.loads(entry.read_text())["failed"]["error"]
        catalog.remove_table("gone_out")  # as a server started again
        again = resume_streaming_tables(spark)
        assert len(again) == 1 and again[0].startswith("streaming table gone_out not resumed: it failed: "), again
        assert catalog.find_table("gone_out").status().status == "failed"
        folder = tmp_path / "gone_in"
        folder.mkdir()
        sqlwin.sql(spark, f"CREATE STREAM gone_s (ts TIMESTAMP, WATERMARK FOR ts AS ts) USING json "
                          f"OPTIONS (path '{folder}')")
        sqlwin.sql(spark, statement)
        assert catalog.find_table("gone_out").status().status == "running"
        assert "failed" not in json.loads(entry.read_text())
    finally:
        _server_gone(spark, "gone_s")


def test_a_resumed_table_that_runs_is_reported_running_whatever_failed_after_its_start(spark, tmp_path,
                                                                                       monkeypatch) -> None:
    """A registry entry whose statement starts its table and then fails (here: recording the table again in the
    registry, as on a full disk): the table runs, so the server says it resumed it and what failed, and lists it
    running, not failed; its entry is left as it was (the next server resumes it again)."""
    import json

    from sqlwin.server import resume_streaming_tables
    from sqlwin.streaming import registry

    root = tmp_path / "root"
    monkeypatch.setenv("SQLWIN_STREAMING_DIR", str(root))
    folder = tmp_path / "in"
    folder.mkdir()
    stream = (f"CREATE STREAM after_s (ts TIMESTAMP, WATERMARK FOR ts AS ts) USING json OPTIONS (path '{folder}')")
    statement = ("CREATE STREAMING TABLE after_out AS SELECT window_start, COUNT(*) AS c FROM TUMBLE(TABLE after_s, "
                 "DESCRIPTOR(ts), INTERVAL 10 SECONDS) GROUP BY window_start, window_end")
    registry.enable(str(root))
    try:
        sqlwin.sql(spark, stream)
        registry.record(spark, "after_out", statement, [stream], [])
        entry = json.loads((root / registry.FOLDER / "after_out.json").read_text())
        catalog.drop_stream(spark, "after_s")  # a server started again: the stream comes from the entry

        def full(*args, **kwargs):
            raise OSError("No space left on device")

        monkeypatch.setattr(registry, "record", full)
        messages = resume_streaming_tables(spark)
        assert messages == ["resumed streaming table after_out, but: No space left on device"], messages
        shown = {r[0]: r for r in sqlwin.sql(spark, "SHOW STREAMING TABLES").collect()}["after_out"]
        assert shown.status == "running" and shown.error is None, shown
        assert json.loads((root / registry.FOLDER / "after_out.json").read_text()) == entry
    finally:
        _server_gone(spark, "after_s")


def test_a_restarted_server_gives_the_tables_it_does_not_run_their_views_back(spark, tmp_path, monkeypatch) -> None:
    """A streaming table stopped (or failed) in a server that then stops: the next server on the same root does not
    start it, and its outputs are still tables every client reads by name, the same rows (an in-memory catalog
    starts empty: its views dropped here, as a restart drops them). The views name the committed files, compacted
    ones included."""
    from sqlwin.server import resume_streaming_tables
    from sqlwin.streaming import registry

    root = tmp_path / "root"
    monkeypatch.setenv("SQLWIN_STREAMING_DIR", str(root))
    folder = tmp_path / "in"
    registry.enable(str(root))
    try:
        sqlwin.sql(spark, f"CREATE STREAM cat_s (k STRING, v INT, ts TIMESTAMP, WATERMARK FOR ts AS ts - INTERVAL 2 "
                          f"SECONDS) USING json OPTIONS (path '{folder}')")
        sqlwin.sql(spark, f"CREATE STREAMING TABLE cat_kept OPTIONS (compaction_batches '2') AS {QUERY} "
                          "ALLOWED LATENESS INTERVAL 5 SECONDS LATE ROWS TO cat_kept_late")
        Feeder(folder).feed(BATCHES, catalog.find_table("cat_kept"))
        sqlwin.sql(spark, "STOP STREAMING TABLE cat_kept")
        catalog.remove_table("cat_kept")  # the server stops: its process's tables and its catalog's views go
        for name in ("cat_kept", "cat_kept_late"):
            spark.sql(f"DROP VIEW default.{name}")
        assert resume_streaming_tables(spark) == []  # stopped: not started, nothing to say
        other = spark.newSession()
        assert rows_of(other.table("cat_kept"), PANES) == CUSTOM
        assert rows_of(other.table("cat_kept_late"), LATE) == [("a", 7, at(8), at(0), at(10), at(28), "late", 6)]
        assert catalog.find_table("cat_kept") is None
        # its late rows' folder deleted by hand: no view over it (which would make it again, empty), and said so;
        # the view of it that a metastore would have kept (here: not dropped as a restart would) is dropped
        spark.sql("DROP VIEW default.cat_kept")
        outputs = {o["name"]: o for o in json.loads((root / registry.FOLDER / "cat_kept.json").read_text())["outputs"]}
        late = outputs["cat_kept_late"]["path"]
        shutil.rmtree(late)
        assert resume_streaming_tables(spark) == [f"streaming table cat_kept: the view of cat_kept_late not restored: "
                                                  f"its folder {late} is gone"]
        assert rows_of(other.table("cat_kept"), PANES) == CUSTOM
        assert not spark.catalog.tableExists("cat_kept_late") and not os.path.exists(late)
    finally:
        _server_gone(spark, "cat_s")
        for name in ("cat_kept", "cat_kept_late"):
            spark.sql(f"DROP VIEW IF EXISTS default.{name}")
