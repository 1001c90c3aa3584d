"""No traceback on any input: deep nesting, unrepresentable numbers, and random or mutated statements only ever
succeed or raise SqlwinError (within a time bound); on Spark, what sqlwin accepts runs or fails with an error in
the user's own terms. Huge statements: tests/test_rewrite_speed.py."""

from __future__ import annotations

import datetime as dt
import re
import time

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import sqlwin
from sqlwin.errors import SqlwinError

CATALOG = {"bids": {"ts": "timestamp", "k": "string", "v": "int", "price": "double"},
           "ntz": {"ts": "timestamp_ntz", "k": "string", "v": "bigint"}}
TUMBLE = "TUMBLE(TABLE bids, DESCRIPTOR(ts), INTERVAL '10' MINUTES)"
INTERNAL = re.compile(r"(?<![\w`])`?__\w")


def rewrite(text: str) -> str:
    return sqlwin.rewrite(text, catalog=CATALOG)


# -- nesting ----------------------------------------------------------------------------------------
@pytest.mark.parametrize("text", [
    "SELECT " + "(" * 3000 + "v" + ")" * 3000 + " FROM " + TUMBLE,
    "SELECT * FROM " + "(SELECT * FROM " * 300 + TUMBLE + ")" * 300,
    "SELECT * FROM " + "TUMBLE(TABLE(SELECT * FROM " * 200 + "bids"
    + "), DESCRIPTOR(ts), INTERVAL '10' MINUTES)" * 200,
    f"SELECT COUNT(*) FROM {TUMBLE} GROUP BY window_start, window_end EMIT WITH TRIGGER "
    + "REPEATEDLY " * 3000 + "AFTER COUNT 1",
    f"SELECT * FROM {TUMBLE} WHERE " + "NOT " * 5000 + "true",
    f"SELECT * FROM {TUMBLE} WHERE v = " + "- " * 5000 + "1",
], ids=["parens", "subqueries", "tvfs", "trigger", "not", "minus"])
def test_deep_nesting_is_a_positioned_error(text: str) -> None:
    start = time.process_time()
    with pytest.raises(SqlwinError, match="nested too deeply") as info:
        rewrite(text)
    assert info.value.line == 1 and info.value.col and info.value.col > 1
    assert time.process_time() - start < 5


def test_moderate_nesting_still_works() -> None:
    assert "UNION" not in rewrite("SELECT " + "(" * 20 + "v" + ")" * 20 + " FROM " + TUMBLE)
    nested = "SELECT * FROM " + "(SELECT * FROM " * 10 + TUMBLE + ")" * 10
    assert "PMOD" in rewrite(nested)


# -- numbers ----------------------------------------------------------------------------------------
@pytest.mark.parametrize(("text", "message", "at"), [
    ("SELECT * FROM TUMBLE(TABLE bids, DESCRIPTOR(ts), INTERVAL '100000000000000000000' DAYS)",
     "interval is too large", "INTERVAL '1000"),
    ("SELECT * FROM TUMBLE(TABLE bids, DESCRIPTOR(ts), ROWS 100000000000000000000)", "too large", "1000"),
    ("SELECT * FROM HOP(TABLE bids, DESCRIPTOR(ts), ROWS 1, ROWS 18446744073709551616)", "too large", "1844"),
    (f"SELECT COUNT(*) FROM {TUMBLE} GROUP BY window_start, window_end "
     "ALLOWED LATENESS INTERVAL '100000000' DAYS", "ALLOWED LATENESS: interval is too large", "INTERVAL '1000"),
    (f"SELECT COUNT(*) FROM {TUMBLE} GROUP BY window_start, window_end "
     "EMIT WITH TRIGGER AFTER COUNT 99999999999999999999", "AFTER COUNT is too large", "9999"),
    ("SELECT * FROM TUMBLE(TABLE bids, DESCRIPTOR(ts), INTERVAL '1' HOUR, "
     "INTERVAL '-99999999999999999' SECONDS)", "interval is too large", "INTERVAL '-"),
])
def test_unrepresentable_numbers_are_planning_errors(text: str, message: str, at: str) -> None:
    with pytest.raises(SqlwinError, match=message) as info:
        rewrite(text)
    assert (info.value.line, info.value.col) == (1, text.index(at) + 1)


def test_largest_supported_interval_plans() -> None:
    assert "PMOD" in rewrite("SELECT * FROM TUMBLE(TABLE bids, DESCRIPTOR(ts), INTERVAL '11574074' DAYS)")


# -- random and mutated statements ------------------------------------------------------------------
COLUMNS = ["ts", "k", "v", "price", "window_start", "window_end", "window_time", "nope"]
INTERVALS = ["INTERVAL '10' MINUTES", "INTERVAL '1' HOUR", "INTERVAL '5' MINUTES", "INTERVAL '0' SECONDS",
             "INTERVAL '-1' HOUR", "INTERVAL '90' SECOND", "ROWS 3", "ROWS 0", "INTERVAL '1' MONTH", "5"]
TVFS = ["TUMBLE(TABLE {t}, DESCRIPTOR({c}), {a})", "HOP(TABLE {t}, DESCRIPTOR({c}), {a}, {b})",
        "CUMULATE(TABLE {t}, DESCRIPTOR({c}), {a}, {b})", "SESSION(TABLE {t} PARTITION BY k, DESCRIPTOR({c}), {a})",
        "TABLE(TUMBLE(TABLE {t}, DESCRIPTOR({c}), {a}, {b}))"]
TAILS = ["", " GROUP BY window_start, window_end", " GROUP BY window_start, window_end, k",
         " GROUP BY window_start, window_end EMIT FINAL", " GROUP BY window_start, window_end ALLOWED LATENESS {a}",
         " GROUP BY window_start, window_end EMIT WITH TRIGGER AFTER WATERMARK EARLY EVERY 2 ROWS",
         " WHERE v > 1", " ORDER BY window_start LIMIT 3", " EMIT CHANGES"]
SELECTS = ["*", "window_start, window_end, COUNT(*) AS n", "window_start, {c}", "{c}, SUM(v) AS s",
           "window_start, window_end, k, MAX(price) AS m"]


@st.composite
def statements(draw: st.DrawFn) -> str:
    tvf = draw(st.sampled_from(TVFS)).format(t=draw(st.sampled_from(["bids", "ntz", "(SELECT * FROM bids)", "nosuch"])),
                                             c=draw(st.sampled_from(COLUMNS)), a=draw(st.sampled_from(INTERVALS)),
                                             b=draw(st.sampled_from(INTERVALS)))
    select = draw(st.sampled_from(SELECTS)).format(c=draw(st.sampled_from(COLUMNS)))
    tail = draw(st.sampled_from(TAILS)).format(a=draw(st.sampled_from(INTERVALS)))
    return f"SELECT {select} FROM {tvf}{tail}"


@st.composite
def mutated(draw: st.DrawFn) -> str:
    words = re.findall(r"\w+|'[^']*'|\S", draw(statements()))
    for _ in range(draw(st.integers(1, 4))):
        i = draw(st.integers(0, len(words) - 1))
        op = draw(st.sampled_from(["drop", "dup", "swap", "insert"]))
        if op == "drop" and len(words) > 1:
            del words[i]
        elif op == "dup":
            words.insert(i, words[i])
        elif op == "swap":
            j = draw(st.integers(0, len(words) - 1))
            words[i], words[j] = words[j], words[i]
        else:
            words.insert(i, draw(st.sampled_from(["(", ")", ",", "TABLE", "ROWS", "EMIT", "'", "--", "/*", ";",
                                                  "DESCRIPTOR", "INTERVAL", "9" * 30, "`", "\"", "\\", "é"])))
    return " ".join(words)


def _only_sqlwin_errors(text: str) -> None:
    start = time.process_time()
    try:
        rewrite(text)
    except SqlwinError as err:
        assert str(err)
    assert time.process_time() - start < 2, text


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(statements())
def test_generated_statements_succeed_or_raise_sqlwin_error(text: str) -> None:
    _only_sqlwin_errors(text)


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.one_of(mutated(), st.text(max_size=200)))
def test_mutated_statements_succeed_or_raise_sqlwin_error(text: str) -> None:
    _only_sqlwin_errors(text)


@pytest.fixture(scope="module")
def tables(spark):
    t = dt.datetime
    rows = [(t(2024, 5, 1, 10, 1), "x", 1, 1.0), (t(2024, 5, 1, 10, 12), "y", 2, 2.5),
            (t(2024, 5, 1, 10, 14), "x", 3, 4.0)]
    spark.createDataFrame(rows, "ts timestamp, k string, v int, price double").createOrReplaceTempView("bids")
    spark.createDataFrame([(r[0], r[1], r[2]) for r in rows], "ts timestamp_ntz, k string, v bigint"
                          ).createOrReplaceTempView("ntz")
    return spark


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow,
                                                                   HealthCheck.function_scoped_fixture])
@given(statements())
def test_accepted_statements_run_on_spark_or_fail_in_user_terms(tables, text: str) -> None:
    try:
        rows = sqlwin.sql(tables, text).limit(5).collect()
    except SqlwinError as err:
        assert err.line is not None and err.col is not None, str(err)
        assert not INTERNAL.search(err.message), str(err)
        return
    assert isinstance(rows, list)
