"""The DuckDB oracle against hand-worked tables (GRAMMAR section 1; Flink docs' Bid example).

Every case compiles a query whose table ``w`` is a window TVF, re-parses the generated SQL, runs
it on an in-memory DuckDB and compares the rows (as a multiset) with a table written out here.
"""

from __future__ import annotations

import dataclasses
from collections import Counter
from datetime import datetime, timedelta
from decimal import Decimal

import pytest
import sqlglot
from sqlglot import exp

from sqlwin.backends.duckdb import DuckDBCompiler
from sqlwin.core.timeunits import MICROS_PER_DAY, MICROS_PER_HOUR, MICROS_PER_MINUTE, MICROS_PER_SECOND
from sqlwin.dialect.nodes import WindowTVF
from sqlwin.errors import SqlwinError
from sqlwin.plan.windows import Column, Relation, Rows, TimeType, WindowKind, WindowSpec

MIN, SEC, HOUR, DAY = MICROS_PER_MINUTE, MICROS_PER_SECOND, MICROS_PER_HOUR, MICROS_PER_DAY
MS = timedelta(milliseconds=1)
TUMBLE, HOP, CUMULATE, SESSION = WindowKind.TUMBLE, WindowKind.HOP, WindowKind.CUMULATE, WindowKind.SESSION

BID_COLUMNS = (Column("bidtime", "timestamp"), Column("price", "decimal(10,2)"), Column("item", "string"))
BIDS = Relation(exp.to_table("bids"), BID_COLUMNS)
AGG = "SELECT window_start, window_end, SUM(price) FROM w GROUP BY window_start, window_end"
AGG_ITEM = "SELECT window_start, window_end, item, SUM(price) FROM w GROUP BY window_start, window_end, item"


def T(text: str) -> datetime:
    return datetime.fromisoformat(text)


def bid(hhmm: str) -> datetime:
    return T(f"2020-04-15 {hhmm}")


def D(text: str) -> Decimal:
    return Decimal(text)


def run(con, spec: WindowSpec | dict[str, WindowSpec], query: str = "SELECT * FROM w") -> Counter:
    """Compile ``query`` with its table ``w`` (or each table named in ``spec``) replaced by a
    window TVF planned as ``spec``, re-parse the SQL, run it, and count the rows."""
    tree = sqlglot.parse_one(query, read="duckdb")
    planned = []
    for name, one in (spec if isinstance(spec, dict) else {"w": spec}).items():
        tvf = WindowTVF(this=one.kind.value, expressions=[])
        next(t for t in tree.find_all(exp.Table) if t.name == name).replace(tvf)
        planned.append(dataclasses.replace(one, node=tvf, alias=name))
    sql = DuckDBCompiler().compile(tree, planned).sql(dialect="duckdb")
    assert sqlglot.parse_one(sql, read="duckdb").sql(dialect="duckdb") == sql  # valid DuckDB SQL
    return Counter(tuple(tuple(v) if isinstance(v, list) else v for v in row) for row in con.sql(sql).fetchall())


def bids_table(con, rows) -> None:
    con.execute("CREATE TABLE bids (bidtime TIMESTAMP, price DECIMAL(10, 2), item VARCHAR)")
    if rows:
        con.executemany("INSERT INTO bids VALUES (?, ?, ?)", rows)


@pytest.fixture()
def flink_bids(duck):
    """Flink's documentation table ``Bid``."""
    bids_table(duck, [(bid("08:05"), 4, "C"), (bid("08:07"), 2, "A"), (bid("08:09"), 5, "D"),
                      (bid("08:11"), 3, "B"), (bid("08:13"), 1, "E"), (bid("08:17"), 6, "F")])
    return duck


def times_table(con, stamps) -> Relation:
    """A one-column table ``ev(ts)``; the relation to window it."""
    con.execute("CREATE TABLE ev (ts TIMESTAMP)")
    con.executemany("INSERT INTO ev VALUES (?)", [(s if s is None else T(s),) for s in stamps])
    return Relation(exp.to_table("ev"), (Column("ts", "timestamp"),))


def spans(con, spec: WindowSpec) -> Counter:
    """(ts, window_start, window_end) of every output row, checking window_time on the way."""
    rows = run(con, spec, "SELECT ts, window_start, window_end, window_time FROM w")
    assert all(wt == we - MS for _, _, we, wt in rows)
    return Counter({(ts, ws, we): n for (ts, ws, we, _), n in rows.items()})


# ------------------------------------------------------------------ Flink documentation: Bid


@pytest.mark.parametrize("partition_by", [(), ("item",)])  # PARTITION BY does not change time windows
def test_flink_tumble(flink_bids, partition_by):
    spec = WindowSpec(TUMBLE, BIDS, "bidtime", TimeType.TIMESTAMP, size=10 * MIN, partition_by=partition_by)
    assert run(flink_bids, spec, AGG) == Counter({
        (bid("08:00"), bid("08:10"), D("11.00")): 1,
        (bid("08:10"), bid("08:20"), D("10.00")): 1,
    })


def test_flink_tumble_output_columns(flink_bids):
    spec = WindowSpec(TUMBLE, BIDS, "bidtime", size=10 * MIN)
    rel = DuckDBCompiler().window_relation(dataclasses.replace(spec, alias="w"))
    result = flink_bids.sql(exp.select("*").from_(rel).sql(dialect="duckdb"))
    assert result.columns == ["bidtime", "price", "item", "window_start", "window_end", "window_time"]
    assert [str(t) for t in result.types][3:] == ["TIMESTAMP"] * 3
    assert (bid("08:05"), D("4.00"), "C", bid("08:00"), bid("08:10"), T("2020-04-15 08:09:59.999")) \
        in result.fetchall()


def test_flink_hop(flink_bids):
    spec = WindowSpec(HOP, BIDS, "bidtime", size=10 * MIN, slide=5 * MIN)
    assert run(flink_bids, spec, AGG) == Counter({
        (bid("08:00"), bid("08:10"), D("11.00")): 1,
        (bid("08:05"), bid("08:15"), D("15.00")): 1,
        (bid("08:10"), bid("08:20"), D("10.00")): 1,
        (bid("08:15"), bid("08:25"), D("6.00")): 1,
    })


def test_flink_cumulate(flink_bids):
    spec = WindowSpec(CUMULATE, BIDS, "bidtime", size=10 * MIN, step=2 * MIN)
    assert run(flink_bids, spec, AGG) == Counter({
        (bid("08:00"), bid("08:06"), D("4.00")): 1,
        (bid("08:00"), bid("08:08"), D("6.00")): 1,
        (bid("08:00"), bid("08:10"), D("11.00")): 1,
        (bid("08:10"), bid("08:12"), D("3.00")): 1,
        (bid("08:10"), bid("08:14"), D("4.00")): 1,
        (bid("08:10"), bid("08:16"), D("4.00")): 1,
        (bid("08:10"), bid("08:18"), D("10.00")): 1,
        (bid("08:10"), bid("08:20"), D("10.00")): 1,
    })


def test_flink_session_per_item(flink_bids):
    spec = WindowSpec(SESSION, BIDS, "bidtime", gap=5 * MIN, partition_by=("item",))
    assert run(flink_bids, spec, AGG_ITEM) == Counter({
        (bid("08:07"), bid("08:12"), "A", D("2.00")): 1,
        (bid("08:05"), bid("08:10"), "C", D("4.00")): 1,
        (bid("08:09"), bid("08:14"), "D", D("5.00")): 1,
        (bid("08:11"), bid("08:16"), "B", D("3.00")): 1,
        (bid("08:13"), bid("08:18"), "E", D("1.00")): 1,
        (bid("08:17"), bid("08:22"), "F", D("6.00")): 1,
    })


def test_flink_session_unpartitioned(flink_bids):
    spec = WindowSpec(SESSION, BIDS, "bidtime", gap=5 * MIN)
    assert run(flink_bids, spec, AGG) == Counter({(bid("08:05"), bid("08:22"), D("21.00")): 1})


def test_flink_session_max_duration(flink_bids):
    # C 08:05 opens; A, D, B join (before 08:12 and within reach); E at 08:13 >= 08:05 + 7 min opens
    # a new session that F joins. Ends: min(08:16, 08:12) and min(08:22, 08:20).
    spec = WindowSpec(SESSION, BIDS, "bidtime", gap=5 * MIN, max_duration=7 * MIN)
    assert run(flink_bids, spec, AGG) == Counter({
        (bid("08:05"), bid("08:12"), D("14.00")): 1,
        (bid("08:13"), bid("08:20"), D("7.00")): 1,
    })


def test_subquery_relation(flink_bids):
    sub = sqlglot.parse_one("(SELECT * FROM bids WHERE price > 2)", read="duckdb")
    spec = WindowSpec(TUMBLE, Relation(sub, BID_COLUMNS), "bidtime", size=10 * MIN)
    assert run(flink_bids, spec, AGG) == Counter({
        (bid("08:00"), bid("08:10"), D("9.00")): 1,
        (bid("08:10"), bid("08:20"), D("9.00")): 1,
    })


def test_window_join_two_tvfs(flink_bids):
    sub = sqlglot.parse_one("(SELECT * FROM bids WHERE price > 2)", read="duckdb")
    specs = {"l": WindowSpec(TUMBLE, BIDS, "bidtime", size=10 * MIN),
             "r": WindowSpec(TUMBLE, Relation(sub, BID_COLUMNS), "BIDTIME", size=10 * MIN)}
    query = ("SELECT l.window_start, l.window_end, COUNT(*) FROM l JOIN r ON l.window_start = r.window_start"
             " AND l.window_end = r.window_end GROUP BY ALL")
    assert run(flink_bids, specs, query) == Counter({(bid("08:00"), bid("08:10"), 6): 1,
                                                     (bid("08:10"), bid("08:20"), 6): 1})


@pytest.mark.parametrize("spec", [
    WindowSpec(TUMBLE, Relation(exp.to_table("bids")), "bidtime", size=10 * MIN),
    WindowSpec(HOP, Relation(exp.to_table("bids")), "bidtime", size=10 * MIN, slide=5 * MIN),
    WindowSpec(CUMULATE, Relation(exp.to_table("bids")), "bidtime", size=10 * MIN, step=2 * MIN),
    WindowSpec(SESSION, Relation(exp.to_table("bids")), "bidtime", gap=5 * MIN, partition_by=("item",)),
    WindowSpec(SESSION, Relation(exp.to_table("bids")), "bidtime", gap=5 * MIN, max_duration=7 * MIN),
], ids=["tumble", "hop", "cumulate", "session", "session_max"])
def test_unknown_schema_keeps_star(flink_bids, spec):
    rel = DuckDBCompiler().window_relation(spec)  # alias None: a fixed alias is used
    result = flink_bids.sql(exp.select("*").from_(rel).sql(dialect="duckdb"))
    assert result.columns == ["bidtime", "price", "item", "window_start", "window_end", "window_time"]


# ------------------------------------------------------------------ alignment: offsets, edges, pre-1970


def test_tumble_day_offset_minus_8_hours(duck):
    rel = times_table(duck, ["2020-04-15 15:59:59.999999", "2020-04-15 16:00:00", "2020-04-15 00:00:00",
                             "1969-12-31 15:59:59", "1969-12-31 16:00:00", None])
    spec = WindowSpec(TUMBLE, rel, "ts", size=DAY, offset=-8 * HOUR)
    assert spans(duck, spec) == Counter({
        (T("2020-04-15 15:59:59.999999"), T("2020-04-14 16:00"), T("2020-04-15 16:00")): 1,
        (T("2020-04-15 16:00:00"), T("2020-04-15 16:00"), T("2020-04-16 16:00")): 1,
        (T("2020-04-15 00:00:00"), T("2020-04-14 16:00"), T("2020-04-15 16:00")): 1,
        (T("1969-12-31 15:59:59"), T("1969-12-30 16:00"), T("1969-12-31 16:00")): 1,
        (T("1969-12-31 16:00:00"), T("1969-12-31 16:00"), T("1970-01-01 16:00")): 1,
    })


def test_tumble_positive_offset_and_boundaries(duck):
    rel = times_table(duck, ["2020-01-01 00:04:59.999999", "2020-01-01 00:05:00", "2020-01-01 00:15:00"])
    spec = WindowSpec(TUMBLE, rel, "ts", size=10 * MIN, offset=5 * MIN)
    assert spans(duck, spec) == Counter({
        (T("2020-01-01 00:04:59.999999"), T("2019-12-31 23:55"), T("2020-01-01 00:05")): 1,
        (T("2020-01-01 00:05:00"), T("2020-01-01 00:05"), T("2020-01-01 00:15")): 1,
        (T("2020-01-01 00:15:00"), T("2020-01-01 00:15"), T("2020-01-01 00:25")): 1,
    })


def test_tumble_before_1970(duck):
    rel = times_table(duck, ["1969-12-31 23:55:00.000001", "1969-12-31 23:59:59.999999",
                             "1970-01-01 00:00:00", "1900-03-01 12:34:56"])
    spec = WindowSpec(TUMBLE, rel, "ts", size=10 * MIN)
    assert spans(duck, spec) == Counter({
        (T("1969-12-31 23:55:00.000001"), T("1969-12-31 23:50"), T("1970-01-01 00:00")): 1,
        (T("1969-12-31 23:59:59.999999"), T("1969-12-31 23:50"), T("1970-01-01 00:00")): 1,
        (T("1970-01-01 00:00:00"), T("1970-01-01 00:00"), T("1970-01-01 00:10")): 1,
        (T("1900-03-01 12:34:56"), T("1900-03-01 12:30"), T("1900-03-01 12:40")): 1,
    })


def test_hop_slide_not_dividing_size(duck):
    # Starts are multiples of 4 min; 08:09 lies in those starting in (07:59, 08:09].
    rel = times_table(duck, ["2020-04-15 08:09", "2020-04-15 08:08"])
    spec = WindowSpec(HOP, rel, "ts", size=10 * MIN, slide=4 * MIN)
    assert spans(duck, spec) == Counter({
        (bid("08:09"), bid("08:00"), bid("08:10")): 1,
        (bid("08:09"), bid("08:04"), bid("08:14")): 1,
        (bid("08:09"), bid("08:08"), bid("08:18")): 1,
        (bid("08:08"), bid("08:00"), bid("08:10")): 1,
        (bid("08:08"), bid("08:04"), bid("08:14")): 1,
        (bid("08:08"), bid("08:08"), bid("08:18")): 1,
    })


def test_hop_with_gaps(duck):
    # slide 5 > size 2: windows [08:00, 08:02), [08:05, 08:07), ...; 08:02 and 08:03 fall in gaps.
    rel = times_table(duck, ["2020-04-15 08:01:59.999999", "2020-04-15 08:02", "2020-04-15 08:03",
                             "2020-04-15 08:05"])
    spec = WindowSpec(HOP, rel, "ts", size=2 * MIN, slide=5 * MIN)
    assert spans(duck, spec) == Counter({
        (T("2020-04-15 08:01:59.999999"), bid("08:00"), bid("08:02")): 1,
        (bid("08:05"), bid("08:05"), bid("08:07")): 1,
    })


def test_hop_offset_and_before_1970(duck):
    # size 1 h, slide 30 min, offset 10 min: starts at hh:10 and hh:40.
    rel = times_table(duck, ["1969-12-31 23:40", "1969-12-31 23:39:59.999999"])
    spec = WindowSpec(HOP, rel, "ts", size=HOUR, slide=30 * MIN, offset=10 * MIN)
    assert spans(duck, spec) == Counter({
        (T("1969-12-31 23:40"), T("1969-12-31 23:10"), T("1970-01-01 00:10")): 1,
        (T("1969-12-31 23:40"), T("1969-12-31 23:40"), T("1970-01-01 00:40")): 1,
        (T("1969-12-31 23:39:59.999999"), T("1969-12-31 22:40"), T("1969-12-31 23:40")): 1,
        (T("1969-12-31 23:39:59.999999"), T("1969-12-31 23:10"), T("1970-01-01 00:10")): 1,
    })


def test_cumulate_offset_before_1970(duck):
    # 1-day windows aligned at 16:00 (offset -8 h), growing by 6 h.
    rel = times_table(duck, ["1969-12-31 21:59:59", "1969-12-31 22:00"])
    spec = WindowSpec(CUMULATE, rel, "ts", size=DAY, step=6 * HOUR, offset=-8 * HOUR)
    start = T("1969-12-31 16:00")
    assert spans(duck, spec) == Counter({
        (T("1969-12-31 21:59:59"), start, T("1969-12-31 22:00")): 1,
        (T("1969-12-31 21:59:59"), start, T("1970-01-01 04:00")): 1,
        (T("1969-12-31 21:59:59"), start, T("1970-01-01 10:00")): 1,
        (T("1969-12-31 21:59:59"), start, T("1970-01-01 16:00")): 1,
        (T("1969-12-31 22:00"), start, T("1970-01-01 04:00")): 1,
        (T("1969-12-31 22:00"), start, T("1970-01-01 10:00")): 1,
        (T("1969-12-31 22:00"), start, T("1970-01-01 16:00")): 1,
    })


# ------------------------------------------------------------------ SESSION


def test_session_touching_merges_and_null_keys(duck):
    duck.execute("CREATE TABLE s (ts TIMESTAMP, k VARCHAR)")
    duck.executemany("INSERT INTO s VALUES (?, ?)", [
        (bid("08:00"), "a"), (bid("08:05"), "a"),                       # touches: one session
        (T("2020-04-15 08:10:00.000001"), "a"),                         # 1 us too late: new session
        (bid("08:00"), None), (bid("08:03"), None), (bid("08:07"), None),  # NULL keys: own partition
        (None, "a"), (None, None),                                      # no window
        (T("1969-12-31 23:58"), "b"), (T("1970-01-01 00:03"), "b"),     # across the epoch
    ])
    rel = Relation(exp.to_table("s"), (Column("ts", "timestamp"), Column("k", "string")))
    spec = WindowSpec(SESSION, rel, "ts", gap=5 * MIN, partition_by=("k",))
    query = "SELECT k, window_start, window_end, COUNT(*) FROM w GROUP BY ALL"
    assert run(duck, spec, query) == Counter({
        ("a", bid("08:00"), bid("08:10"), 2): 1,
        ("a", T("2020-04-15 08:10:00.000001"), T("2020-04-15 08:15:00.000001"), 1): 1,
        (None, bid("08:00"), bid("08:12"), 3): 1,
        ("b", T("1969-12-31 23:58"), T("1970-01-01 00:08"), 2): 1,
    })


def test_session_two_keys(duck):
    duck.execute("CREATE TABLE s (ts TIMESTAMP, k1 INT, k2 INT)")
    duck.executemany("INSERT INTO s VALUES (?, ?, ?)", [
        (bid("08:00"), 1, None), (bid("08:01"), 1, None), (bid("08:01"), 1, 2), (bid("08:01"), None, None)])
    rel = Relation(exp.to_table("s"), (Column("ts", "timestamp"), Column("k1", "int"), Column("k2", "int")))
    spec = WindowSpec(SESSION, rel, "ts", gap=MIN, partition_by=("k1", "k2"))
    query = "SELECT k1, k2, window_start, window_end, COUNT(*) FROM w GROUP BY ALL"
    assert run(duck, spec, query) == Counter({
        (1, None, bid("08:00"), bid("08:02"), 2): 1,
        (1, 2, bid("08:01"), bid("08:02"), 1): 1,
        (None, None, bid("08:01"), bid("08:02"), 1): 1,
    })


DYNAMIC_GAP = sqlglot.parse_one(
    "CASE WHEN kind = 'long' THEN INTERVAL '10' MINUTES WHEN kind = 'zero' THEN INTERVAL '0' MINUTES "
    "WHEN kind = 'negative' THEN INTERVAL '-1' MINUTES WHEN kind = 'short' THEN INTERVAL '1' MINUTE END",
    read="spark")


def dynamic_table(con, rows) -> Relation:
    con.execute("CREATE TABLE g (ts TIMESTAMP, kind VARCHAR)")
    con.executemany("INSERT INTO g VALUES (?, ?)", [(bid(t), k) for t, k in rows])
    return Relation(exp.to_table("g"), (Column("ts", "timestamp"), Column("kind", "string")))


def test_session_dynamic_gap(duck):
    rel = dynamic_table(duck, [
        ("08:00", "long"),      # [08:00, 08:10)
        ("08:05", "short"),     # inside
        ("08:10", "short"),     # touches 08:10: joins, end 08:11
        ("08:11", "zero"),      # gap 0: no window (though it would touch)
        ("08:11", "negative"),  # gap < 0: no window
        ("08:11", "other"),     # gap NULL: no window
        ("08:12", "short"),     # 08:12 > 08:11: new session
    ])
    spec = WindowSpec(SESSION, rel, "ts", gap=DYNAMIC_GAP)
    assert spans(duck, spec) == Counter({
        (bid("08:00"), bid("08:00"), bid("08:11")): 1,
        (bid("08:05"), bid("08:00"), bid("08:11")): 1,
        (bid("08:10"), bid("08:00"), bid("08:11")): 1,
        (bid("08:12"), bid("08:12"), bid("08:13")): 1,
    })


def test_session_max_duration_cut_and_touch(duck):
    # gap 5, max 10: 08:10 = start + max_duration starts a new session; 08:15 touches its end.
    rel = times_table(duck, ["2020-04-15 08:00", "2020-04-15 08:04", "2020-04-15 08:08", "2020-04-15 08:10",
                             "2020-04-15 08:15", "2020-04-15 08:21", None])
    spec = WindowSpec(SESSION, rel, "ts", gap=5 * MIN, max_duration=10 * MIN)
    assert spans(duck, spec) == Counter({
        (bid("08:00"), bid("08:00"), bid("08:10")): 1,   # min(08:13, 08:10)
        (bid("08:04"), bid("08:00"), bid("08:10")): 1,
        (bid("08:08"), bid("08:00"), bid("08:10")): 1,
        (bid("08:10"), bid("08:10"), bid("08:20")): 1,   # min(08:20, 08:20)
        (bid("08:15"), bid("08:10"), bid("08:20")): 1,
        (bid("08:21"), bid("08:21"), bid("08:26")): 1,
    })


def test_session_max_duration_dynamic_gap(duck):
    rel = dynamic_table(duck, [("08:00", "long"), ("08:09", "short"), ("08:11", "zero"), ("08:12", "short")])
    spec = WindowSpec(SESSION, rel, "ts", gap=DYNAMIC_GAP, max_duration=9 * MIN)
    assert spans(duck, spec) == Counter({
        (bid("08:00"), bid("08:00"), bid("08:09")): 1,  # min(08:10, 08:00 + 9 min)
        (bid("08:09"), bid("08:09"), bid("08:10")): 1,  # 08:09 >= 08:00 + 9 min: new session
        (bid("08:12"), bid("08:12"), bid("08:13")): 1,  # 08:12 > 08:10: new session
    })


# ------------------------------------------------------------------ count windows (Storm)

# Numbered by ts, then usr, then v, ascending, NULLS FIRST; the NULL-ts row is not numbered:
#   r0 10:00:00 NULL 9 | r1 10:00:00 a 5 | r2 10:00:00 b 2 | r3 10:00:05 a 1 | r4 10:00:07 c 3
#   r5 10:00:09 a NULL | r6 10:00:09 a 0 | r7 10:00:21 a 1
CLICKS = [("10:00:00", "b", 2), ("10:00:00", "a", 5), ("10:00:00", None, 9), ("10:00:05", "a", 1),
          ("10:00:07", "c", 3), (None, "z", 0), ("10:00:09", "a", None), ("10:00:09", "a", 0),
          ("10:00:21", "a", 1)]
CLICK_COLUMNS = (Column("ts", "timestamp"), Column("usr", "string"), Column("v", "int"))


def ck(hms: str) -> datetime:
    return T(f"2021-06-01 {hms}")


R = {i: (ck(t), u, v) for i, (t, u, v) in enumerate([
    ("10:00:00", None, 9), ("10:00:00", "a", 5), ("10:00:00", "b", 2), ("10:00:05", "a", 1),
    ("10:00:07", "c", 3), ("10:00:09", "a", None), ("10:00:09", "a", 0), ("10:00:21", "a", 1)])}


@pytest.fixture()
def clicks(duck):
    duck.execute("CREATE TABLE clicks (ts TIMESTAMP, usr VARCHAR, v INT)")
    duck.executemany("INSERT INTO clicks VALUES (?, ?, ?)",
                     [(None if t is None else ck(t), u, v) for t, u, v in CLICKS])
    return duck


def count_windows(con, **kwargs) -> Counter:
    spec = WindowSpec(relation=Relation(exp.to_table("clicks"), CLICK_COLUMNS), time_col="ts", **kwargs)
    rows = run(con, spec)
    assert all(wt == we - MS for *_, we, wt, _ in rows)
    return Counter({(*r[:3], ws, we, idx): n for (*r, ws, we, _, idx), n in rows.items()})


def held(rows: list[int], start: datetime, end: datetime, index: int) -> Counter:
    return Counter((*R[i], start, end, index) for i in rows)


def test_tumble_rows(clicks):
    # Windows [0, 3) and [3, 6); r6, r7 would start an incomplete third window: not emitted.
    assert count_windows(clicks, kind=TUMBLE, size=Rows(3)) == (
        held([0, 1, 2], ck("10:00:00"), ck("10:00:00.001"), 0)
        + held([3, 4, 5], ck("10:00:05"), ck("10:00:09.001"), 1))


def test_hop_rows_rows(clicks):
    # Window k closes at row 2k - 1 and holds rows [max(0, 2k - 3), 2k).
    assert count_windows(clicks, kind=HOP, slide=Rows(2), size=Rows(3)) == (
        held([0, 1], ck("10:00:00"), ck("10:00:00.001"), 1)
        + held([1, 2, 3], ck("10:00:00"), ck("10:00:05.001"), 2)
        + held([3, 4, 5], ck("10:00:05"), ck("10:00:09.001"), 3)
        + held([5, 6, 7], ck("10:00:09"), ck("10:00:21.001"), 4))


def test_hop_rows_time(clicks):
    # Window k closes at row 2k - 1, ends 1 ms after it, spans 5 s, holds rows up to the closing one.
    assert count_windows(clicks, kind=HOP, slide=Rows(2), size=5 * SEC) == (
        held([0, 1], ck("09:59:55.001"), ck("10:00:00.001"), 1)           # not r2: after the closing row
        + held([3], ck("10:00:00.001"), ck("10:00:05.001"), 2)            # r0..r2 are before the start
        + held([3, 4, 5], ck("10:00:04.001"), ck("10:00:09.001"), 3)
        + held([7], ck("10:00:16.001"), ck("10:00:21.001"), 4))


def test_hop_time_rows(clicks):
    # Boundaries every 5 s after a bucket holding a row: 10:00:05, :10, :25 (none at :15, :20).
    assert count_windows(clicks, kind=HOP, slide=5 * SEC, size=Rows(2)) == (
        held([1, 2], ck("10:00:00"), ck("10:00:05"), 0)
        + held([5, 6], ck("10:00:09"), ck("10:00:10"), 1)
        + held([6, 7], ck("10:00:09"), ck("10:00:25"), 2))


def test_hop_time_rows_offset(clicks):
    # Boundaries at 3 s past each 5 s: buckets [09:58, :03) [:03, :08) [:08, :13) [:18, :23).
    assert count_windows(clicks, kind=HOP, slide=5 * SEC, size=Rows(3), offset=3 * SEC) == (
        held([0, 1, 2], ck("10:00:00"), ck("10:00:03"), 0)
        + held([2, 3, 4], ck("10:00:00"), ck("10:00:08"), 1)
        + held([4, 5, 6], ck("10:00:07"), ck("10:00:13"), 2)
        + held([5, 6, 7], ck("10:00:09"), ck("10:00:23"), 3))


@pytest.fixture()
def keyed(duck):
    duck.execute("CREATE TABLE p (ts TIMESTAMP, k VARCHAR, v INT)")
    duck.executemany("INSERT INTO p VALUES (?, ?, ?)", [
        (ck("00:00:01"), None, 1), (ck("00:00:02"), "x", 2), (ck("00:00:03"), None, 3),
        (ck("00:00:04"), "x", 4), (ck("00:00:05"), None, 5), (None, None, 6)])
    return duck


def keyed_windows(con, **kwargs) -> Counter:
    rel = Relation(exp.to_table("p"), (Column("ts", "timestamp"), Column("k", "string"), Column("v", "int")))
    spec = WindowSpec(relation=rel, time_col="ts", partition_by=("k",), **kwargs)
    query = "SELECT k, window_index, window_start, window_end, list(v ORDER BY v) FROM w GROUP BY ALL"
    return run(con, spec, query)


def test_count_windows_per_partition_with_null_key(keyed):
    s = ck
    assert keyed_windows(keyed, kind=HOP, slide=Rows(1), size=Rows(2)) == Counter({
        (None, 1, s("00:00:01"), s("00:00:01.001"), (1,)): 1,
        (None, 2, s("00:00:01"), s("00:00:03.001"), (1, 3)): 1,
        (None, 3, s("00:00:03"), s("00:00:05.001"), (3, 5)): 1,
        ("x", 1, s("00:00:02"), s("00:00:02.001"), (2,)): 1,
        ("x", 2, s("00:00:02"), s("00:00:04.001"), (2, 4)): 1,
    })
    assert keyed_windows(keyed, kind=TUMBLE, size=Rows(2)) == Counter({
        (None, 0, s("00:00:01"), s("00:00:03.001"), (1, 3)): 1,
        ("x", 0, s("00:00:02"), s("00:00:04.001"), (2, 4)): 1,
    })
    assert keyed_windows(keyed, kind=HOP, slide=2 * SEC, size=Rows(2)) == Counter({
        (None, 0, s("00:00:01"), s("00:00:02"), (1,)): 1,
        (None, 1, s("00:00:01"), s("00:00:04"), (1, 3)): 1,
        (None, 2, s("00:00:03"), s("00:00:06"), (3, 5)): 1,
        ("x", 0, s("00:00:02"), s("00:00:04"), (2,)): 1,
        ("x", 1, s("00:00:02"), s("00:00:06"), (2, 4)): 1,
    })
    assert keyed_windows(keyed, kind=HOP, slide=Rows(1), size=3 * SEC) == Counter({
        (None, 1, T("2021-05-31 23:59:58.001"), s("00:00:01.001"), (1,)): 1,
        (None, 2, s("00:00:00.001"), s("00:00:03.001"), (1, 3)): 1,
        (None, 3, s("00:00:02.001"), s("00:00:05.001"), (3, 5)): 1,
        ("x", 1, T("2021-05-31 23:59:59.001"), s("00:00:02.001"), (2,)): 1,
        ("x", 2, s("00:00:01.001"), s("00:00:04.001"), (2, 4)): 1,
    })


def test_count_window_columns(clicks):
    spec = WindowSpec(HOP, Relation(exp.to_table("clicks"), CLICK_COLUMNS), "ts", TimeType.TIMESTAMP_NTZ,
                      size=Rows(3), slide=Rows(2), alias="w")
    result = clicks.sql(exp.select("*").from_(DuckDBCompiler().window_relation(spec)).sql(dialect="duckdb"))
    assert result.columns == ["ts", "usr", "v", "window_start", "window_end", "window_time", "window_index"]
    assert [str(t) for t in result.types][3:] == ["TIMESTAMP"] * 3 + ["BIGINT"]


def test_count_window_orders_by_awkward_column_names(duck):
    duck.execute('CREATE TABLE q (ts TIMESTAMP, "select" INT, "my col" VARCHAR)')
    duck.executemany("INSERT INTO q VALUES (?, ?, ?)", [
        (ck("10:00:00"), 2, "x"), (ck("10:00:00"), 1, "z"), (ck("10:00:00"), 1, "y"), (ck("10:00:01"), 0, None)])
    rel = Relation(exp.to_table("q"), (Column("ts", "timestamp"), Column("select", "int"),
                                       Column("my col", "string")))
    query = 'SELECT window_index, list("select" ORDER BY "my col") FROM w GROUP BY ALL'
    assert run(duck, WindowSpec(TUMBLE, rel, "ts", size=Rows(2)), query) == Counter({
        (0, (1, 1)): 1,  # (1, y), (1, z)
        (1, (2, 0)): 1,  # (2, x), then the later row
    })


def test_count_window_needs_schema():
    spec = WindowSpec(TUMBLE, Relation(exp.to_table("bids")), "bidtime", size=Rows(2), alias="w")
    with pytest.raises(SqlwinError, match="schema"):
        DuckDBCompiler().window_relation(spec)


# ------------------------------------------------------------------ empty input


@pytest.mark.parametrize("kwargs", [
    {"kind": TUMBLE, "size": 10 * MIN}, {"kind": HOP, "size": 10 * MIN, "slide": 5 * MIN},
    {"kind": CUMULATE, "size": 10 * MIN, "step": 2 * MIN}, {"kind": SESSION, "gap": 5 * MIN},
    {"kind": SESSION, "gap": 5 * MIN, "max_duration": 7 * MIN}, {"kind": SESSION, "gap": DYNAMIC_GAP},
    {"kind": TUMBLE, "size": Rows(2)}, {"kind": HOP, "size": Rows(2), "slide": Rows(1)},
    {"kind": HOP, "size": MIN, "slide": Rows(1)}, {"kind": HOP, "size": Rows(2), "slide": MIN},
], ids=lambda k: "-".join(str(v.value if hasattr(v, "value") else type(v).__name__) for v in k.values()))
@pytest.mark.parametrize("contents", [[], [(None, 1, "A")]], ids=["empty", "null-ts-only"])
def test_no_rows_no_windows(duck, kwargs, contents):
    bids_table(duck, contents)
    duck.execute("ALTER TABLE bids ADD COLUMN kind VARCHAR")
    columns = (*BID_COLUMNS, Column("kind", "string"))
    spec = WindowSpec(relation=Relation(exp.to_table("bids"), columns), time_col="bidtime", **kwargs)
    assert run(duck, spec) == Counter()
