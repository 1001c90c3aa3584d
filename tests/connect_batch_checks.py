"""The batch checks of tests/test_connect.py over one Spark Connect session: native and arrow-UDTF plans
against DuckDB, errors with line and column, and the plain-SQL table functions. Run by the client scripts
(``CLIENT`` in tests/test_connect.py for ``remote("local[2]")``, tests/connect_streaming_client.py against the
module's server); values come back as JSON."""

from __future__ import annotations

from typing import Any

import duckdb

import sqlwin
from tests.difftools import EVENTS, load, on_duckdb, on_spark
from tests.test_differential import BID_COLUMNS, BIDS, EDGE


def batch_checks(spark: Any, mode: str) -> dict[str, Any]:
    """``mode`` "full": every plan; "quick": the native plan and one arrow UDTF."""
    out: dict[str, Any] = {"session": type(spark).__module__}
    sqlwin.register(spark)
    duck = duckdb.connect()
    duck.execute("SET TimeZone = 'UTC'")
    load(spark, duck, "bids", BID_COLUMNS, BIDS)
    load(spark, duck, "edge", EVENTS, EDGE)
    queries = [
        ("SELECT window_start, window_end, SUM(price) FROM TABLE(TUMBLE(TABLE bids, DESCRIPTOR(bidtime), "
         "INTERVAL '10' MINUTES)) GROUP BY window_start, window_end", ("auto",)),
        ("SELECT * FROM SESSION(TABLE edge PARTITION BY k, DESCRIPTOR(ts), INTERVAL '4' MINUTES, "
         "INTERVAL '6' MINUTES)", ("auto",)),  # max_duration: the arrow UDTF
    ]
    if mode == "full":
        queries[0] = (queries[0][0], ("auto", "udtf"))
        queries += [
            ("SELECT * FROM HOP(TABLE edge, DESCRIPTOR(ts), ROWS 1, INTERVAL '5' MINUTES)", ("auto",)),  # arrow UDTF
            ("SELECT * FROM SESSION(TABLE edge PARTITION BY k, DESCRIPTOR(ts), INTERVAL '5' MINUTES)",
             ("auto", "udtf")),
            ("SELECT * FROM TUMBLE(TABLE edge PARTITION BY k, DESCRIPTOR(ts), ROWS 2)", ("auto", "udtf")),
        ]
    out["results"] = []
    for sql, plans in queries:
        oracle = on_duckdb(duck, sql)
        for plan in plans:
            got = on_spark(spark, sql, plan)
            out["results"].append({"sql": sql, "plan": plan, "rows": len(oracle), "same": got == oracle,
                                   "spark": repr(got), "duckdb": repr(oracle)})
    out["errors"] = []
    for sql in ["SELECT *\nFROM HOP(TABLE edge, DESCRIPTOR(ts), INTERVAL '5' MINUTES)",
                "SELECT * FROM TUMBLE(TABLE edge,\n  DESCRIPTOR(nope), INTERVAL '10' MINUTES)"]:
        try:
            sqlwin.sql(spark, sql).collect()
            out["errors"].append(None)
        except sqlwin.SqlwinError as e:
            out["errors"].append([str(e), e.line, e.col])
    plain = "SELECT COUNT(*) FROM tumble(TABLE(edge), 'ts', INTERVAL 10 MINUTES)"
    out["plain_sql"] = [spark.sql(plain).collect()[0][0],
                        sqlwin.sql(spark, "SELECT COUNT(*) FROM TUMBLE(TABLE edge, DESCRIPTOR(ts), "
                                          "INTERVAL '10' MINUTES)").collect()[0][0]]
    duck.close()
    return out
