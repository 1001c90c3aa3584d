"""Streaming over JDBC (issue 6, point 2): ``sqlwin serve`` runs streams and streaming tables for its clients.

What a user gets (GRAMMAR 3 and 5, and the server's one Spark session per connection): a stream is visible to
the later statements of the connection that created it, as a temp view is, and to no other connection; a
streaming table keeps running after its statement returns (and after its connection closes), its results are a
table of the server's catalog that every connection reads by name, and SHOW / STOP / DROP STREAMING TABLES work
from any connection of the server. Uses the server shared with tests/test_server.py.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import time
from pathlib import Path

import pytest

from sqlwin.server import ServerProcess
from tests.streamtools import Feeder, ts
from tests.test_server import _error_text, bench, server  # noqa: F401 (server: the shared fixture)

pytestmark = pytest.mark.slow

T = dt.datetime(2024, 1, 1)
QUERY = ("SELECT window_start, k, SUM(v) AS s, COUNT(*) AS c FROM TUMBLE(TABLE jdbc_s, DESCRIPTOR(ts), "
         "INTERVAL 10 SECONDS) GROUP BY window_start, window_end, k")
# no late rows: whatever micro-batches the running queries cut them into, W reaches 28 and these windows close
ROWS = [[("a", 1, 1), ("a", 2, 5)], [("b", 3, 7), ("a", 4, 12)], [("b", 5, 15)], [("a", 6, 30)]]
CLOSED = [(T, "a", 3, 2), (T, "b", 3, 1), (T + dt.timedelta(seconds=10), "a", 4, 1),
          (T + dt.timedelta(seconds=10), "b", 5, 1)]


def poll(cursor, sql: str, expected: list[tuple], timeout: float = 240) -> None:
    """Run ``sql`` until it returns ``expected`` (the streaming query runs on its own)."""
    deadline = time.monotonic() + timeout
    while (got := sorted(bench.fetch(cursor, sql))) != expected:
        assert time.monotonic() < deadline, f"after {timeout} s: {got}; {bench.fetch(cursor, 'SHOW STREAMING TABLES')}"
        time.sleep(0.5)


def shown(cursor) -> dict[str, tuple[str, str]]:
    return {r[0]: (r[1], r[2]) for r in bench.fetch(cursor, "SHOW STREAMING TABLES")}


@pytest.fixture()
def connections(server: ServerProcess, tmp_path: Path):  # noqa: F811
    a = bench.connect(server.host, server.port)
    b = bench.connect(server.host, server.port)
    yield a, b
    if "jdbc_native" in shown(b.cursor()):  # never leave it running
        b.cursor().execute("DROP STREAMING TABLE jdbc_native")
    for conn in (a, b):
        with contextlib.suppress(Exception):  # a may be closed by the test already
            conn.close()


def test_streaming_tables_over_jdbc(connections, tmp_path: Path) -> None:
    a, b = connections
    ca, cb = a.cursor(), b.cursor()
    folder = tmp_path / "in"
    ca.execute(f"CREATE STREAM jdbc_s (k STRING, v INT, ts TIMESTAMP, WATERMARK FOR ts AS ts - INTERVAL 2 SECONDS) "
               f"USING json OPTIONS (path '{folder}')")
    # checkpoints in tmp_path: the server's default root is its working directory
    assert bench.fetch(ca, f"CREATE STREAMING TABLE jdbc_native OPTIONS (checkpoint '{tmp_path / 'n'}') AS "
                           f"{QUERY}")[0][0].startswith("streaming table jdbc_native started (native path")
    feeder = Feeder(folder)
    for batch in ROWS:  # written after the statements returned: the queries run on in the server
        feeder.write({"k": k, "v": v, "ts": ts(t)} for k, v, t in batch)
    poll(ca, "SELECT window_start, k, s, c FROM jdbc_native", CLOSED)

    # another connection: its own session, so no stream jdbc_s and no view jdbc_native ...
    with pytest.raises(Exception) as info:
        cb.execute(QUERY)
    assert "TABLE_OR_VIEW_NOT_FOUND" in _error_text(info.value) and "jdbc_s" in _error_text(info.value)
    # ... but the server's streaming tables, and each one's panes by name: a view of the catalog (issue 19, 2)
    assert {k: v for k, v in shown(cb).items() if k.startswith("jdbc_")} == {"jdbc_native": ("running", "native")}
    assert sorted(bench.fetch(cb, "SELECT window_start, k, s, c FROM jdbc_native")) == CLOSED
    assert ("default", "jdbc_native", False) in {tuple(r[:3]) for r in bench.fetch(cb, "SHOW VIEWS")}
    # sqlwin's results (SHOW STREAMING TABLES, several times) come through the session's one result view, replaced
    shown(cb)
    assert [r[1] for r in bench.fetch(cb, "SHOW VIEWS") if r[1].startswith("__sqlwin_result")] == ["__sqlwin_result"]

    a.close()  # the tables outlive the connection that started them
    feeder.write([{"k": "b", "v": 7, "ts": ts(45)}])  # W -> 43: [30, 40) closes
    poll(cb, "SELECT window_start, k, s, c FROM jdbc_native",
         sorted([*CLOSED, (T + dt.timedelta(seconds=30), "a", 6, 1)]))
    cb.execute("STOP STREAMING TABLE jdbc_native")
    assert {k: v[0] for k, v in shown(cb).items() if k.startswith("jdbc_")} == {"jdbc_native": "stopped"}
    assert len(bench.fetch(cb, "SELECT * FROM jdbc_native")) == 5  # a stopped table still reads
    assert bench.fetch(cb, "DROP STREAMING TABLE jdbc_native PURGE") == [("streaming table jdbc_native dropped and "
                                                                         "its files deleted",)]
    assert "jdbc_native" not in shown(cb) and not (tmp_path / "n").exists()
    with pytest.raises(Exception) as info:
        cb.execute("SELECT * FROM jdbc_native")
    assert "TABLE_OR_VIEW_NOT_FOUND" in _error_text(info.value)


def test_plain_sql_over_a_stream_is_refused_over_jdbc_as_by_sqlwin_sql(server) -> None:  # noqa: F811
    """Plain Spark SQL naming a stream (no sqlwin keyword, so the parser sent it to sqlwin only for the stream's
    name; or with one, rewritten by sqlwin) or a view over one fails with ``sqlwin.sql``'s error, not Spark's
    (a live stream's "must be executed with writeStream.start()"; a replay's table rows as its answer)."""
    refused = ("a query over a stream needs a window TVF (TUMBLE, HOP, CUMULATE, SESSION), as in FROM TUMBLE(TABLE "
               "jdbc_plain, DESCRIPTOR(ts), INTERVAL '1' MINUTE) ... GROUP BY window_start, window_end, or an "
               "aggregation with EMIT WITH TRIGGER (the global window); for the batch answer over all the rows of "
               "replay stream jdbc_plain, read the table it replays, jdbc_plain_rows, instead of jdbc_plain")
    conn = bench.connect(server.host, server.port)
    try:
        cur = conn.cursor()
        cur.execute("CREATE TEMP VIEW jdbc_plain_rows AS SELECT 'a' AS k, TIMESTAMP'2024-01-01 00:00:01' AS ts")
        cur.execute("CREATE STREAM jdbc_plain FROM TABLE jdbc_plain_rows ARRIVAL ORDER BY ts WATERMARK FOR ts AS ts")
        for text, at in [("SELECT *\nFROM jdbc_plain", "line 2, col 6"),
                         ("SELECT k FROM jdbc_plain WHERE k <> 'STREAM'", "line 1, col 15")]:
            with pytest.raises(Exception) as info:
                cur.execute(text)
            assert _error_text(info.value) == f"Error running query: org.apache.spark.sql.AnalysisException: " \
                                              f"{at}: {refused}"
        cur.execute("CREATE TEMP VIEW jdbc_plain_view AS SELECT * FROM jdbc_plain")
        with pytest.raises(Exception) as info:
            cur.execute("SELECT k FROM jdbc_plain_view")
        assert _error_text(info.value) == (
            "Error running query: org.apache.spark.sql.AnalysisException: line 1, col 15: jdbc_plain_view is a view "
            "over the stream jdbc_plain: sqlwin reads a stream (its watermark, its arrival order) only where a query "
            "names it; write the view's query in its place, as in TUMBLE(TABLE (SELECT ... FROM jdbc_plain), "
            "DESCRIPTOR(...), ...)")
        assert bench.fetch(cur, "WITH jdbc_plain AS (SELECT 1 AS a) SELECT a FROM jdbc_plain") == [(1,)]
    finally:
        conn.close()
