"""What a streaming query may be (``sqlwin.streaming.shape.analyse``), checked without Spark: the plans of a
``CREATE STREAM`` and of a query over it, as the streaming statements hand them to ``analyse``."""

from __future__ import annotations

import pytest

from sqlwin import dialect
from sqlwin.errors import SqlwinError
from sqlwin.planner import plan_statement
from sqlwin.streaming.shape import analyse, choose_path

STREAM = ("CREATE STREAM bids (auction BIGINT, price BIGINT, date_time TIMESTAMP, "
          "WATERMARK FOR date_time AS date_time - INTERVAL '5' SECONDS) USING parquet OPTIONS (path '/nowhere')")
Q7 = """SELECT b.auction, b.price, b.date_time
FROM bids b
JOIN (
  SELECT MAX(price) AS maxprice, window_end AS date_time
  FROM TUMBLE(TABLE bids, DESCRIPTOR(date_time), INTERVAL '10' SECONDS)
  GROUP BY window_start, window_end
) b1 ON b.price = b1.maxprice"""


def shape_of(text: str):
    streams = {"bids": plan_statement(dialect.parse_one(STREAM), None)}
    return analyse(plan_statement(dialect.parse_one(text), None), streams)


@pytest.mark.parametrize(("text", "at"), [
    (Q7, (2, 6)),  # Nexmark q7: the stream joined with its own window aggregation
    ("WITH recent AS (SELECT * FROM bids WHERE price > 0)\nSELECT window_start, COUNT(*) FROM "
     "TUMBLE(TABLE recent, DESCRIPTOR(date_time), INTERVAL '10' SECONDS) GROUP BY window_start, window_end", (1, 31)),
])
def test_a_stream_read_outside_its_window_tvf_is_refused(text: str, at: tuple[int, int]) -> None:
    """The error points at the first character of the stream's name."""
    with pytest.raises(SqlwinError, match="stream bids is read outside the window TVF") as info:
        shape_of(text)
    assert (info.value.line, info.value.col) == at
    if text.startswith("WITH"):  # the CTE the TVF reads: the error says to write its query as the TVF's input
        assert info.value.message == (
            "stream bids is read outside the window TVF, in recent, which the window TVF reads: a streaming query "
            "reads its stream only in a window TVF's input; write recent's query there, as in TUMBLE(TABLE (SELECT "
            "... FROM bids ...), DESCRIPTOR(...), ...) (a table may be joined in it)")


def test_a_stream_read_by_its_window_tvf_inside_a_larger_query_is_accepted() -> None:
    """Nexmark q5: a CTE aggregates the window, the rest of the query reads the CTE (custom path)."""
    shape = shape_of("""WITH auction_bids AS (
      SELECT auction, COUNT(*) AS num, window_start AS starttime, window_end AS endtime
      FROM HOP(TABLE bids, DESCRIPTOR(date_time), INTERVAL '2' SECONDS, INTERVAL '10' SECONDS)
      GROUP BY auction, window_start, window_end
    ), max_bids AS (SELECT MAX(num) AS maxn, starttime, endtime FROM auction_bids GROUP BY starttime, endtime)
    SELECT a.auction, a.num FROM auction_bids a JOIN max_bids m
      ON a.starttime = m.starttime AND a.endtime = m.endtime AND a.num >= m.maxn""")
    assert choose_path(shape) == ("custom", "a query around the aggregation")


@pytest.mark.parametrize(("subquery", "carried"), [
    # a join with a table that names its columns: the stream's label added to the SELECT
    ("SELECT b.auction, b.date_time, d.name FROM bids b JOIN dims d ON b.auction = d.id",
     "SELECT b.auction, b.date_time, d.name, b.__lbl FROM bids AS b JOIN dims AS d ON b.auction = d.id"),
    # a star over the stream passes it already: nothing added
    ("SELECT * FROM bids WHERE price > 0", "SELECT * FROM bids WHERE price > 0"),
    ("SELECT b.*, d.name FROM dims d JOIN bids b ON b.auction = d.id",
     "SELECT b.*, d.name FROM dims AS d JOIN bids AS b ON b.auction = d.id"),
    # nested: carried through each SELECT between the stream and the TVF
    ("SELECT x.auction, x.date_time FROM (SELECT auction, date_time FROM bids) x",
     "SELECT x.auction, x.date_time, x.__lbl FROM (SELECT auction, date_time, bids.__lbl FROM bids) AS x"),
    # rows combined, or a stream read twice: not carried (the replay steps micro-batch by micro-batch)
    ("SELECT auction, MAX(date_time) AS date_time FROM bids GROUP BY auction", None),
    ("SELECT DISTINCT auction, date_time FROM bids", None),
    ("SELECT auction, date_time, ROW_NUMBER() OVER (ORDER BY price) AS r FROM bids", None),
    ("SELECT a.auction, a.date_time FROM bids a JOIN bids b ON a.auction = b.auction", None),
    ("SELECT auction, date_time FROM bids UNION ALL SELECT auction, date_time FROM bids", None),
])
def test_the_micro_batch_label_is_carried_through_a_subquery_that_names_its_columns(subquery, carried):
    from sqlglot import exp

    from sqlwin.streaming.plannedreplay import carry_label

    node = dialect.parse_one(f"SELECT * FROM ({subquery}) t").find(exp.Subquery)
    assert carry_label(node, {"bids"}, "__lbl") == (carried is not None)
    if carried is not None:
        assert node.this.sql() == carried


BIDS = (("auction", "bigint"), ("price", "bigint"), ("date_time", "timestamp"))
WINDOW = "FROM TUMBLE(TABLE bids, DESCRIPTOR(date_time), INTERVAL '10' SECONDS)"


def keys_of(text: str) -> list[str]:
    """The pane keys of ``text`` over ``bids``, its GROUP BY spelled out first (``planner.grouping``)."""
    from sqlwin.plan.windows import Column
    from sqlwin.planner.grouping import spell_out_query

    streams = {"bids": plan_statement(dialect.parse_one(STREAM), None)}
    query = plan_statement(dialect.parse_one(text), lambda _query, _specs: tuple(Column(*c) for c in BIDS))
    spell_out_query(query.node, query.windows, {"bids": [name for name, _ in BIDS]})
    return [k.sql(dialect="sqlwin") for k in analyse(query, streams).keys]  # as the user writes them


@pytest.mark.parametrize(("text", "keys"), [
    # ordinals of the SELECT list, the window bounds among them
    (f"SELECT window_start, window_end, auction % 2, COUNT(*) {WINDOW} GROUP BY 1, 2, 3", ["auction % 2"]),
    # SELECT aliases that name no input column; an alias that does (price) is the input's column, as in Spark
    (f"SELECT window_start AS ws, window_end AS we, auction + 1 AS a, price * 2 AS price, COUNT(*) {WINDOW} "
     "GROUP BY ws, we, a, price", ["auction + 1", "price"]),
    # ALL: every item without an aggregate (a constant groups nothing)
    (f"SELECT window_start, window_end, 'x' AS c, upper(auction) AS u, MAX(price) + 1 {WINDOW} GROUP BY ALL",
     ["UPPER(auction)"]),
])
def test_group_by_ordinals_aliases_and_all_are_the_keys_they_stand_for(text: str, keys: list[str]) -> None:
    assert keys_of(text) == keys


def test_what_spark_refuses_in_a_group_by_is_left_for_its_error() -> None:
    """An ordinal out of range or of an aggregate stays as written: ``check_as_batch`` reports Spark's error."""
    from sqlwin.planner.grouping import spell_out

    select = dialect.parse_one("SELECT k, COUNT(*) AS c FROM t GROUP BY 3, 2, c, k")
    spell_out(select, {"k", "v"})
    assert select.sql() == "SELECT k, COUNT(*) AS c FROM t GROUP BY 3, 2, c, k"


@pytest.mark.parametrize(("a", "b", "same"), [
    ("K", "k", True), ("`k`", "k", True), ("UPPER(`K`)", "upper(k)", True), ("myudf(K)", "MYUDF(k)", True),
    ("k = 'A'", "K = 'a'", False), ("t.k", "k", False), ("k + 1", "k + 2", False),
])
def test_keys_compare_names_as_spark_does(a: str, b: str, same: bool) -> None:
    from sqlwin.planner.grouping import alike

    assert alike(dialect.parse_one(a), dialect.parse_one(b)) is same


SIDES = {n: plan_statement(dialect.parse_one(
    f"CREATE STREAM {n} (k STRING, v BIGINT, ts TIMESTAMP, WATERMARK FOR ts AS ts - INTERVAL '2' SECONDS) "
    "USING parquet OPTIONS (path '/nowhere')"), None) for n in ("l", "r")}
JOIN = ("SELECT L.window_start AS ws, L.window_end AS we, L.k, L.c, R.c AS rc FROM (SELECT window_start, window_end, "
        "k, COUNT(*) AS c FROM TUMBLE(TABLE l, DESCRIPTOR(ts), INTERVAL 10 SECONDS) GROUP BY window_start, window_end, "
        "k) L JOIN (SELECT window_start, window_end, k, COUNT(*) AS c FROM TUMBLE(TABLE r, DESCRIPTOR(ts), INTERVAL "
        "10 SECONDS) GROUP BY window_start, window_end, k) R ON L.window_start = R.window_start AND L.window_end = "
        "R.window_end AND L.k = R.k")
FULL = JOIN.replace("L.window_start AS ws", "COALESCE(L.window_start, R.window_start) AS w").replace(" JOIN ",
                                                                                                   " FULL JOIN ")
CUMULATED = JOIN.replace("TUMBLE", "CUMULATE").replace("10 SECONDS)", "5 SECONDS, INTERVAL 10 SECONDS)")
JOINED_BY_K = JOIN.replace("SELECT L.window_start AS ws, L.window_end AS we, L.k, L.c, R.c AS rc", "SELECT L.k, "
                           "SUM(L.c) AS n")


@pytest.mark.parametrize(("text", "message", "col"), [
    (f"SELECT COUNT(*) AS n FROM ({JOIN}) j", "an aggregation over a window join must GROUP BY", 8),
    (f"SELECT k, SUM(c) AS n FROM ({JOIN}) j GROUP BY k", "an aggregation over a window join must GROUP BY",
     len(f"SELECT k, SUM(c) AS n FROM ({JOIN}) j GROUP BY ") + 1),  # at its first key
    (f"{JOINED_BY_K} GROUP BY L.k", "an aggregation over a window join must GROUP BY", len(JOINED_BY_K) + 13),
    (f"SELECT *, ROW_NUMBER() OVER (PARTITION BY k ORDER BY c) AS rn FROM ({JOIN}) j",
     "a window function over a window join must PARTITION BY window_start, window_end", 11),
    (f"SELECT DISTINCT k FROM ({JOIN}) j", "SELECT DISTINCT over a window join must select window_start", 17),
    # a CUMULATE's windows share their start: the start alone does not name one
    (f"SELECT ws, SUM(c) AS n FROM ({CUMULATED}) j GROUP BY ws", "an aggregation over a window join must GROUP BY",
     None),
])
def test_what_combines_a_window_joins_rows_keeps_its_windows_apart(text: str, message: str, col: int) -> None:
    """A window join's rows come per window as the window fires (as a window aggregation's panes do), so what
    combines them across windows would combine only the windows joined in the same micro-batch, not give the batch
    answer: refused at the aggregation, the OVER or the DISTINCT (Spark failed the first with MISSING_GROUP_BY on
    the pane columns sqlwin adds; the others ran, per micro-batch)."""
    from sqlwin.streaming.stages import analyse_query

    with pytest.raises(SqlwinError, match=message) as info:
        analyse_query(plan_statement(dialect.parse_one(text), None), SIDES, text)
    assert (info.value.line, info.value.col) == (1, col or text.rindex("GROUP BY ws") + 10)


@pytest.mark.parametrize("text", [
    f"SELECT ws, we, SUM(c) AS n FROM ({JOIN}) j GROUP BY ws, we",
    JOIN.replace("SELECT L.window_start AS ws, L.window_end AS we, L.k, L.c, R.c AS rc",
                 "SELECT L.window_start, R.window_end, SUM(L.c) AS n") + " GROUP BY L.window_start, R.window_end",
    f"SELECT * FROM (SELECT *, ROW_NUMBER() OVER (PARTITION BY ws, we ORDER BY c DESC) AS rn FROM ({JOIN}) j) "
    "WHERE rn <= 2",
    # one bound names a TUMBLE's window, and a FULL join's COALESCE of the sides' bounds is that bound
    f"SELECT ws, SUM(c) AS n FROM ({JOIN}) j GROUP BY ws",
    f"SELECT *, ROW_NUMBER() OVER (PARTITION BY w ORDER BY c) AS rn FROM ({FULL}) j",
])
def test_what_keeps_a_window_joins_windows_apart_runs(text: str) -> None:
    from sqlwin.streaming.stages import StagedShape, analyse_query

    assert isinstance(analyse_query(plan_statement(dialect.parse_one(text), None), SIDES, text), StagedShape)
