"""CREATE STREAM ... USING <any Spark streaming source> (issue 19, point 4), with a real Python streaming data
source (``tests.pysources``, Spark 4's DataSourceStreamReader) feeding windowed streaming tables on both paths:
its columns taken by name, and (Kafka's shape) the declared columns parsed from its ``value`` with
``OPTIONS ('value.format' 'json')``. The panes are those of tests/test_streaming.py for the same rows."""

from __future__ import annotations

from pathlib import Path

import pytest

import sqlwin
from sqlwin.errors import SqlwinError
from sqlwin.streaming import catalog
from tests import pysources
from tests.streamtools import rows_of
from tests.test_streaming import BATCHES, at

pytestmark = pytest.mark.slow

COLUMNS = "k STRING, v INT, ts TIMESTAMP, WATERMARK FOR ts AS ts - INTERVAL 2 SECONDS"


@pytest.fixture()
def source(spark, tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setenv("SQLWIN_STREAMING_DIR", str(tmp_path / "root"))
    pysources.register(spark)
    yield pysources.BatchWriter(tmp_path / "in")
    for table in catalog.all_tables():
        table.stop()
        catalog.remove_table(table.name)


def test_a_python_data_source_feeds_both_paths(spark, source) -> None:
    folder = source.folder
    sqlwin.sql(spark, f"CREATE STREAM py_cols ({COLUMNS}) USING {pysources.NAME} OPTIONS (folder '{folder}')")
    sqlwin.sql(spark, f"CREATE STREAM py_kafka ({COLUMNS}) USING {pysources.NAME} "
                      f"OPTIONS (folder '{folder}', shape 'value', 'value.format' 'json')")
    sqlwin.sql(spark, """CREATE STREAMING TABLE py_native AS SELECT window_start, window_end, k, SUM(v) AS s,
        COUNT(*) AS c FROM TUMBLE(TABLE py_cols, DESCRIPTOR(ts), INTERVAL 10 SECONDS) GROUP BY window_start,
        window_end, k""")
    sqlwin.sql(spark, """CREATE STREAMING TABLE py_custom AS SELECT window_start, window_end, k, SUM(v) AS s,
        COUNT(*) AS c FROM TUMBLE(TABLE py_kafka, DESCRIPTOR(ts), INTERVAL 10 SECONDS) GROUP BY window_start,
        window_end, k ALLOWED LATENESS INTERVAL 5 SECONDS LATE ROWS TO py_late""")
    native, custom = catalog.find_table("py_native"), catalog.find_table("py_custom")
    assert (native.path, custom.path) == ("native", "custom")
    source.feed(BATCHES, native, custom)
    panes = ["window_start", "k", "s", "c", "pane_index", "pane_timing", "is_final"]
    assert rows_of(spark.table("py_native"), panes) == [  # lateness 0: a@3 (W = 10) and a@8 (W = 28) dropped
        (at(0), "a", 3, 2, 0, "ON_TIME", True), (at(0), "b", 3, 1, 0, "ON_TIME", True),
        (at(10), "a", 4, 1, 0, "ON_TIME", True)]
    assert rows_of(spark.table("py_custom"), [*panes, "micro_batch"]) == [
        (at(0), "a", 3, 2, 0, "ON_TIME", False, 2),
        (at(0), "a", 8, 3, 1, "LATE", False, 3),
        (at(0), "b", 3, 1, 0, "ON_TIME", False, 2),
        (at(10), "a", 4, 1, 0, "ON_TIME", True, 5),
    ]
    assert rows_of(spark.table("py_late"), ["k", "v", "ts", "watermark", "reason", "micro_batch"]) == [
        ("a", 7, at(8), at(28), "late", 6)]


def test_a_source_without_the_declared_columns_is_an_error_at_create_stream(spark, source) -> None:
    with pytest.raises(SqlwinError) as err:
        sqlwin.sql(spark, f"CREATE STREAM py_bad (k STRING, price INT, ts TIMESTAMP) USING {pysources.NAME} "
                          f"OPTIONS (folder '{source.folder}')")
    assert "USING sqlwin_test_batches: the source has no column price (its columns: k, v, ts); to parse the " \
           "columns from its value, add OPTIONS ('value.format' 'json')" in str(err.value)
    assert err.value.line == 1
    with pytest.raises(SqlwinError, match=r"USING nosuch: \[DATA_SOURCE_NOT_FOUND\]"):
        sqlwin.sql(spark, f"CREATE STREAM py_none ({COLUMNS}) USING nosuch")
