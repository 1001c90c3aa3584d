"""Bad input gets a SqlwinError naming line, column and what was expected (GRAMMAR 6), before
anything runs. Positions are 1-based and point at the offending argument or call."""

from __future__ import annotations

import pytest

import sqlwin
from sqlwin import SqlwinError

CATALOG = {"t": {"ts": "timestamp", "k": "string", "v": "int", "s": "string"}}

CASES = [
    # a comment that swallows the SELECT list (Spark's own error quoted the generated SQL)
    ("SELECT -- window_start, COUNT(*) AS n\nFROM TUMBLE(TABLE t, DESCRIPTOR(ts), INTERVAL '10' MINUTES) "
     "GROUP BY window_start, window_end",
     "line 2, col 1: expected a column or an expression after SELECT, got 'FROM'"),
    ("SELECT * FROM HOP(TABLE t, DESCRIPTOR(ts))",
     "line 1, col 15: HOP expects (TABLE t, DESCRIPTOR(col), slide, size [, offset]); got 2 arguments"),
    ("SELECT *\nFROM TUMBLE(TABLE t, DESCRIPTOR(nope), INTERVAL '10' MINUTES)",
     "line 2, col 22: TUMBLE: DESCRIPTOR column 'nope' is not a column of the input; it has ts, k, v, s"),
    ("SELECT * FROM TUMBLE(TABLE t, DESCRIPTOR(s), INTERVAL '10' MINUTES)",
     "line 1, col 31: TUMBLE: time column 's' must be TIMESTAMP or TIMESTAMP_NTZ, but it is STRING"),
    ("SELECT * FROM TUMBLE(TABLE t, DESCRIPTOR(ts), INTERVAL '0' MINUTES)",
     "line 1, col 47: TUMBLE size must be positive"),
    ("SELECT * FROM TUMBLE(TABLE t, DESCRIPTOR(ts), INTERVAL '-5' MINUTES)", "TUMBLE size must be positive"),
    ("SELECT * FROM HOP(TABLE t, DESCRIPTOR(ts), INTERVAL '0' MINUTES, INTERVAL '5' MINUTES)",
     "HOP slide must be positive"),
    ("SELECT * FROM CUMULATE(TABLE t, DESCRIPTOR(ts), INTERVAL '3' MINUTES, INTERVAL '10' MINUTES)",
     "line 1, col 71: CUMULATE size (INTERVAL '10' MINUTE) must be a multiple of step (INTERVAL '3' MINUTE)"),
    ("SELECT * FROM TUMBLE(TABLE t, DESCRIPTOR(ts), INTERVAL '10' MINUTES, INTERVAL '-10' MINUTES)",
     "line 1, col 70: TUMBLE: |offset| (INTERVAL '10' MINUTE) must be less than the window size"),
    ("SELECT * FROM TUMBLE(TABLE t, DESCRIPTOR(ts), INTERVAL '1' MONTH)", "MONTH intervals have no fixed length"),
    ("SELECT * FROM CUMULATE(TABLE t, DESCRIPTOR(ts), ROWS 2, ROWS 10)", "CUMULATE counts time, not rows"),
    ("SELECT * FROM SESSION(TABLE t, DESCRIPTOR(ts), ROWS 2)", "line 1, col 48: SESSION gap must be an INTERVAL"),
    ("SELECT * FROM TUMBLE(TABLE t, DESCRIPTOR(ts), ROWS 0)", "ROWS n must be a positive integer, got 0"),
    ("SELECT * FROM TUMBLE(TABLE t, DESCRIPTOR(ts), ROWS 3, INTERVAL '1' MINUTE)",
     "line 1, col 55: TUMBLE: offset applies to time-based windows"),
    ("SELECT * FROM TUMBLE(TABLE t PARTITION BY k, DESCRIPTOR(ts), INTERVAL '1' MINUTE)",
     "PARTITION BY applies to SESSION and count (ROWS) windows"),
    ("SELECT * FROM SESSION(TABLE t PARTITION BY zz, DESCRIPTOR(ts), INTERVAL '1' MINUTE)",
     "line 1, col 44: SESSION: PARTITION BY column 'zz' is not a column of the input"),
    ("SELECT * FROM TUMBLE(TABLE t, DESCRIPTOR(ts), SIZE => INTERVAL '1' MINUTE, SIZE => INTERVAL '1' MINUTE)",
     "TUMBLE: parameter SIZE given twice"),
    ("SELECT * FROM TUMBLE(TABLE t, DESCRIPTOR(ts), SIZZE => INTERVAL '1' MINUTE)", "TUMBLE has no parameter SIZZE"),
    ("SELECT * FROM TUMBLE(t, DESCRIPTOR(ts), INTERVAL '1' MINUTE)",
     "line 1, col 22: TUMBLE: expected TABLE name or TABLE(subquery) as the first argument"),
    ("SELECT * FROM TUMBLE(TABLE t, ts, INTERVAL '1' MINUTE)", "expected DESCRIPTOR(time_column)"),
    ("SELECT * FROM TUMBLE(TABLE t, DESCRIPTOR(ts), 10)", "TUMBLE size must be an INTERVAL"),
    ("SELECT * FROM TUMBLE(TABLE t, DESCRIPTOR(ts), INTERVAL '10' MINUTES) EMIT FINAL",
     "line 1, col 70: EMIT, ALLOWED LATENESS, LATE ROWS TO and EVICT apply to an aggregation"),
    ("SELECT k, COUNT(*) FROM t GROUP BY k EMIT WITH TRIGGER AFTER WATERMARK",
     "line 1, col 38: AFTER WATERMARK needs event-time windows"),
    ("SELECT k, COUNT(*) FROM t GROUP BY k EMIT FINAL", "EMIT FINAL needs event-time windows"),
    ("SELECT k, COUNT(*) FROM t GROUP BY k EMIT WITH TRIGGER AFTER COUNT 0", "AFTER COUNT must be a positive integer"),
    ("SELECT k, COUNT(*) FROM t GROUP BY k ALLOWED LATENESS INTERVAL '1' MINUTE",
     "the global window, which needs an EMIT WITH TRIGGER clause"),
    ("SELECT * FROM TUMBLE(TABLE t, DESCRIPTOR(ts), INTERVAL '10' MINUTES", "line 1, col 68: expected ')'"),
    # GRAMMAR 3: punctuated and processing-time-lag watermarks
    ("CREATE STREAM s (ts TIMESTAMP,\n  WATERMARK FOR ts AS PROCTIME() - INTERVAL '0' SECOND) USING json",
     "line 2, col 45: the lag of WATERMARK ... AS PROCTIME() - lag must be a positive interval"),
    ("CREATE STREAM s (ts TIMESTAMP, WATERMARK FOR ts AS PROCTIME() - INTERVAL '-5' SECOND) USING json",
     "line 1, col 74: the lag of WATERMARK ... AS PROCTIME() - lag must be a positive interval"),
    ("CREATE STREAM s (ts TIMESTAMP, WATERMARK FOR ts AS PROCTIME() - 5) USING json",
     "line 1, col 65: WATERMARK lag must be an INTERVAL"),
    ("CREATE STREAM s (ts TIMESTAMP, WATERMARK FOR ts AS PROCTIME()) USING json",
     "line 1, col 52: WATERMARK FOR ts AS PROCTIME() needs a lag: `PROCTIME() - INTERVAL ...`"),
    ("CREATE STREAM s (ts TIMESTAMP, WATERMARK FOR ts AS PROCTIME() + INTERVAL '5' SECOND) USING json",
     "line 1, col 52: WATERMARK FOR ts AS PROCTIME() needs a lag"),
    ("CREATE STREAM s (ts TIMESTAMP, WATERMARK FOR ts AS PROCTIME() - INTERVAL 5 SECONDS ON ROWS WHERE ts IS NULL) "
     "USING json", "line 1, col 98: ON ROWS WHERE: a PROCTIME() watermark follows the clock, not the rows"),
    ("CREATE STREAM s (ts TIMESTAMP, k STRING, WATERMARK FOR ts AS ts ON ROWS WHERE k = 'm') USING json\n"
     "WITH IDLE TIMEOUT INTERVAL 5 SECONDS",
     "line 2, col 19: WITH IDLE TIMEOUT does not apply to a punctuated watermark (ON ROWS WHERE)"),
    ("CREATE STREAM r FROM TABLE t ARRIVAL ORDER BY ts WATERMARK FOR ts AS PROCTIME() - INTERVAL 5 SECONDS "
     "WITH IDLE TIMEOUT INTERVAL 5 SECONDS", "WITH IDLE TIMEOUT does not apply to a PROCTIME() watermark"),
    ("CREATE STREAM s (ts TIMESTAMP, k STRING, WATERMARK FOR ts AS ts ON ROWS k = 'm') USING json",
     "line 1, col 65: expected ON ROWS WHERE condition"),
    ("CREATE STREAM s (ts TIMESTAMP, k STRING, WATERMARK FOR ts AS ts ON ROWS WHERE) USING json",
     "line 1, col 78: expected a condition after ON ROWS WHERE"),
    ("CREATE STREAM s (ts TIMESTAMP, k STRING, WATERMARK FOR ts AS ts ON ROWS WHERE MAX(k) = 'm') USING json",
     "line 1, col 79: a punctuated watermark reads each row on its own: no aggregate, window function or subquery"),
    ("CREATE STREAM s (ts TIMESTAMP, k STRING, pt AS PROCTIME(),\n  WATERMARK FOR ts AS pt ON ROWS WHERE k = 'm') "
     "USING json", "line 2, col 23: a punctuated watermark reads the rows as they arrive, not the PROCTIME() column"),
    ("CREATE STREAM s (ts TIMESTAMP, k STRING,\n  WATERMARK FOR tz AS tz) USING json",
     "line 2, col 17: WATERMARK FOR tz: no such column; did you mean ts? (the stream has ts, k)"),
    ("CREATE STREAM r FROM TABLE t ARRIVAL ORDER BY ROW_NUMBER() OVER (ORDER BY ts) WATERMARK FOR ts AS ts",
     "line 1, col 47: ARRIVAL ORDER BY reads each row on its own: no aggregate, window function or subquery"),
    ("CREATE STREAM s (ts TIMESTAMP, k STRING, WATERMARK FOR ts AS k) USING json",
     "line 1, col 62: WATERMARK FOR ts expects `ts`, `ts - INTERVAL ...`, `expr ON ROWS WHERE condition`"),
    # intervals of no fixed length, in any of Spark's forms; day-time ranges Spark cannot read either
    ("SELECT * FROM TUMBLE(TABLE t, DESCRIPTOR(ts), INTERVAL '1-2' YEAR TO MONTH)",
     "line 1, col 47: YEAR TO MONTH intervals have no fixed length"),
    ("CREATE STREAM s (ts TIMESTAMP,\n  WATERMARK FOR ts AS ts - INTERVAL 1 DAY 1 MONTH) USING json",
     "line 2, col 43: MONTH intervals have no fixed length"),  # at the part of no fixed length
    ("SELECT * FROM TUMBLE(TABLE t, DESCRIPTOR(ts), INTERVAL '0:70' HOUR TO MINUTE)",
     "line 1, col 47: interval '0:70': minute 70 is outside [0, 59]"),
    ("SELECT * FROM TUMBLE(TABLE t, DESCRIPTOR(ts), INTERVAL '1 0:10' HOUR TO MINUTE)",
     "line 1, col 47: cannot read interval '1 0:10' as HOUR TO MINUTE: expected '[+|-]h:m'"),
    ("SELECT * FROM TUMBLE(TABLE t, DESCRIPTOR(ts), INTERVAL '1' MINUTE TO HOUR)",
     "line 1, col 47: unknown interval range MINUTE TO HOUR"),
]


@pytest.mark.parametrize(("sql", "message"), CASES)
def test_errors_name_line_and_column(sql, message):
    with pytest.raises(SqlwinError) as err:
        sqlwin.rewrite(sql, catalog=CATALOG)
    assert message in str(err.value)
    assert str(err.value).startswith("line ")
    assert err.value.line is not None and err.value.col is not None


def test_global_window_with_trigger_is_accepted():
    sql = "SELECT k, COUNT(*) FROM t GROUP BY k EMIT WITH TRIGGER EVERY 100 ROWS DISCARDING"
    assert sqlwin.rewrite(sql, catalog=CATALOG) == "SELECT k, COUNT(*) FROM t GROUP BY k"


def test_batch_emit_returns_final_results_sql():
    sql = ("SELECT window_start, COUNT(*) FROM TUMBLE(TABLE t, DESCRIPTOR(ts), INTERVAL '1' MINUTE) "
           "GROUP BY window_start, window_end ALLOWED LATENESS INTERVAL '5' MINUTES "
           "EMIT WITH TRIGGER AFTER WATERMARK EARLY EVERY 2 ROWS ACCUMULATING")
    out = sqlwin.rewrite(sql, catalog=CATALOG)
    assert "EMIT" not in out.upper() and "LATENESS" not in out.upper()


def test_spark_catalog_reports_missing_table(spark):
    with pytest.raises(SqlwinError, match=r"line 1, col \d+: TUMBLE: cannot read the input: .*nosuch"):
        sqlwin.sql(spark, "SELECT * FROM TUMBLE(TABLE nosuch, DESCRIPTOR(ts), INTERVAL '1' MINUTE)")


def test_input_with_window_columns_is_rejected():
    cat = {"w": {"ts": "timestamp", "window_start": "timestamp"}}
    with pytest.raises(SqlwinError, match="already has column"):
        sqlwin.rewrite("SELECT * FROM TUMBLE(TABLE w, DESCRIPTOR(ts), INTERVAL '1' MINUTE)", catalog=cat)


def test_count_window_needs_schema():
    with pytest.raises(SqlwinError, match="needs its schema"):
        sqlwin.rewrite("SELECT * FROM TUMBLE(TABLE t, DESCRIPTOR(ts), ROWS 3)")


S, M, H, D = 1_000_000, 60_000_000, 3_600_000_000, 86_400_000_000
# Spark's interval literals of a fixed length, with their lengths (worked by hand; Spark 4.3 gives the same)
INTERVAL_FORMS = [
    ("INTERVAL '10' MINUTE", 10 * M),
    ("INTERVAL '1' DAY", D),
    ("INTERVAL 2 WEEKS", 14 * D),
    ("INTERVAL '0:10' HOUR TO MINUTE", 10 * M),
    ("INTERVAL '100:10' HOUR TO MINUTE", 100 * H + 10 * M),
    ("INTERVAL '1 2' DAY TO HOUR", D + 2 * H),
    ("INTERVAL '1 2:03' DAY TO MINUTE", D + 2 * H + 3 * M),
    ("INTERVAL '+1 2:03:04.5' DAY TO SECOND", D + 2 * H + 3 * M + 4 * S + S // 2),
    ("INTERVAL '2:03:04' HOUR TO SECOND", 2 * H + 3 * M + 4 * S),
    ("INTERVAL '3:04.25' MINUTE TO SECOND", 3 * M + 4 * S + S // 4),
    ("INTERVAL 9 MINUTES 60 SECONDS", 10 * M),
    ("INTERVAL '1' DAY '2' HOUR", D + 2 * H),
    ("INTERVAL 1 DAY 2 HOURS 3 MILLISECONDS 4 MICROSECONDS", D + 2 * H + 3_004),
    ("INTERVAL 1 MINUTE -30 SECONDS", 30 * S),
    ("INTERVAL '1 day -2 hours'", 22 * H),
]
# every place an interval is written, and where its plan keeps the value
INTERVAL_PLACES = [
    ("SELECT window_start, COUNT(*) FROM TUMBLE(TABLE t, DESCRIPTOR(ts), {i}) GROUP BY window_start, window_end",
     lambda plan: plan.windows[0].size),
    ("CREATE STREAM s (ts TIMESTAMP, WATERMARK FOR ts AS ts - {i}) USING json", lambda plan: plan.watermark.delay),
    ("CREATE STREAM s FROM TABLE t ARRIVAL ORDER BY ts WATERMARK FOR ts AS ts - {i} WITH IDLE TIMEOUT {i}",
     lambda plan: plan.idle_timeout),
    ("SELECT window_start, COUNT(*) FROM TUMBLE(TABLE t, DESCRIPTOR(ts), INTERVAL 1 HOUR) GROUP BY window_start, "
     "window_end ALLOWED LATENESS {i} LATE ROWS TO late EVICT KEEP LAST {i}",
     lambda plan: (plan.lateness.allowed, plan.evict.evictor.micros)),
    ("SELECT k, COUNT(*) FROM t GROUP BY k EMIT WITH TRIGGER EVERY {i} DISCARDING",
     lambda plan: plan.emit.trigger.trigger.delay),
]


@pytest.mark.parametrize(("form", "micros"), INTERVAL_FORMS)
def test_every_fixed_length_interval_form_is_accepted_wherever_an_interval_is(form, micros):
    from sqlwin.dialect import parse_one
    from sqlwin.planner import plan_statement

    for sql, value in INTERVAL_PLACES:
        plan = plan_statement(parse_one(sql.format(i=form)), None)
        assert value(plan) in (micros, (micros, micros)), sql


@pytest.mark.parametrize("offset", ["INTERVAL '-1:30' HOUR TO MINUTE", "INTERVAL -'1:30' HOUR TO MINUTE",
                                    "-INTERVAL 1 HOUR 30 MINUTES", "INTERVAL -1 HOUR -30 MINUTES"])
def test_a_signed_interval_form_is_negative(offset):
    from sqlwin.dialect import parse_one
    from sqlwin.planner import plan_statement

    sql = f"SELECT * FROM TUMBLE(TABLE t, DESCRIPTOR(ts), INTERVAL 1 DAY, {offset})"
    assert plan_statement(parse_one(sql), None).windows[0].offset == -90 * M


def test_a_multi_unit_interval_is_one_value_in_the_sql_spark_runs(spark):
    """sqlwin writes the query's SQL again: ``end - INTERVAL 1 MINUTE 30 SECONDS`` must stay ``end - (1 min 30 s)``,
    not become ``(end - 1 min) + 30 s``."""
    rows = sqlwin.sql(spark, "SELECT window_end - INTERVAL 1 MINUTE 30 SECONDS AS e, COUNT(*) AS n FROM "
                             "TUMBLE(TABLE (SELECT TIMESTAMP'2024-01-01 00:00:05' AS ts), DESCRIPTOR(ts), "
                             "INTERVAL '0:10' HOUR TO MINUTE) GROUP BY window_start, window_end").collect()
    assert [(r.e.isoformat(), r.n) for r in rows] == [("2024-01-01T00:08:30", 1)]
