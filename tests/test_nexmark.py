"""The Nexmark benchmark's queries give the same rows on every engine: sqlwin/Spark, hand-written Spark and
DuckDB in batch; sqlwin streaming tables, hand-written Structured Streaming and replay over a stream.

A correctness test, not a timing: a benchmark whose engines disagree measures nothing, so every
query of ``bench/nexmark`` runs here on a tiny generated data set with much disorder and lateness.
The streaming engines' reference (``expected``) is itself checked against a pandas count of the bids
that are in time.
"""

from __future__ import annotations

import duckdb
import pytest

from bench.nexmark import generator, streams, suite

# 2k events over 100 s of event time: several windows, sessions and count windows per key
CONFIG = generator.Config(events=2000, seed=7, rate=20, disorder_fraction=0.2, late_fraction=0.02)
FEED_EVENTS = 1000  # two stream files (micro-batches): the second one's late bids are dropped
STREAMING = [q for q in suite.QUERIES if q.stream is not None]


@pytest.fixture(scope="module")
def ctx(spark, tmp_path_factory):
    root = generator.generate(tmp_path_factory.mktemp("nexmark"), CONFIG)
    con = duckdb.connect()
    con.execute("SET TimeZone = 'UTC'")
    context = suite.Context(spark, con, root, CONFIG.events, feed_events=FEED_EVENTS)
    suite.register_tables(context)
    yield context
    con.close()
    for table in suite.TABLES:  # other modules name their own tables "bids" too
        spark.catalog.dropTempView(table)


def test_generator_is_deterministic_and_disordered(tmp_path) -> None:
    import pyarrow.parquet as pq

    a = generator.generate(tmp_path / "a", CONFIG)
    b = generator.generate(tmp_path / "b", CONFIG)
    for table in suite.TABLES:
        ta, tb = pq.read_table(a / table), pq.read_table(b / table)
        assert ta.equals(tb), table
    bids = pq.read_table(a / "bids").to_pandas()
    assert len(bids) == CONFIG.events * 46 // 50
    assert bids["seq"].is_monotonic_increasing and not bids["date_time"].is_monotonic_increasing
    behind = bids["date_time"].cummax() - bids["date_time"]
    assert (behind.dt.total_seconds() >= CONFIG.late_min_s - 5).sum() > 0  # some late rows


@pytest.mark.parametrize("query", suite.QUERIES, ids=[q.name for q in suite.QUERIES])
def test_engines_agree(ctx, query: suite.Query) -> None:
    suite.register_tables(ctx)  # in case another module replaced a view of the same name
    results = {name: suite.normalize(suite.ENGINES[name].result(query, ctx)) for name in suite.BATCH_ENGINES}
    reference = results[suite.REFERENCE]
    assert len(reference) > 0, f"{query.name} is empty on this data: the comparison would prove nothing"
    for name, got in results.items():
        assert suite.differences(got, reference) is None, \
            f"{query.name}: {name} differs from {suite.REFERENCE}: {suite.differences(got, reference)}"


def test_streaming_capable_queries() -> None:
    """Every query runs in the streaming columns; q7 as a window join (its batch form, an interval join, is batch
    only in sqlwin: README), the others as written; q8 reads two streams, persons and auctions."""
    assert [q.name for q in STREAMING] == [q.name for q in suite.QUERIES]
    assert all(suite.ENGINES[n].reference == streams.EXPECTED for n in suite.STREAM_ENGINES)
    by_name = {q.name: q for q in suite.QUERIES}
    assert [n for n, q in by_name.items() if q.stream_sql != q.sql] == ["q7_highest_bid"]
    assert "BETWEEN" in by_name["q7_highest_bid"].sql and "BETWEEN" not in by_name["q7_highest_bid"].stream_sql
    assert streams.tables_of(by_name["q8_new_users"].stream_sql) == ["persons", "auctions"]


def test_expected_keeps_exactly_the_bids_in_time(ctx) -> None:
    """The streaming reference, recomputed by hand: a bid of file f counts in its 10-second window unless the
    watermark in force (the largest date_time of the files before f, minus 5 s) has passed the window's end plus
    the query's 1 minute of lateness; some bids of the second file are dropped so, and the rest all count."""
    import pandas as pd
    import pyarrow.parquet as pq

    query = next(q for q in STREAMING if q.name == "trigger_early_late")
    got = suite.ENGINES[streams.EXPECTED].result(query, ctx)
    bids = pq.read_table(ctx.root / "bids").to_pandas()
    bids["file"] = bids["seq"] // FEED_EVENTS
    tops = bids.groupby("file")["date_time"].max()
    watermark = tops.cummax().shift(1) - pd.Timedelta(seconds=streams.DELAY_S)
    window_end = bids["date_time"].dt.floor("10s") + pd.Timedelta(seconds=10)
    in_force = bids["file"].map(watermark)
    kept = in_force.isna() | (window_end + pd.Timedelta(minutes=1) > in_force)
    assert (~kept).sum() > 0 and kept.sum() > 0
    assert int(got["num"].sum()) == int(kept.sum())


# every streaming query on sqlwin's streaming engines (a live stream, replay), except q5 on a live sqlwin stream (the
# slowest case, 80 s under load): replay runs q5 on the same operator, and the live stream runs the other four
# queries. The bench's own baselines are left to ``python -m bench``, whose ``measure`` checks every engine against
# the expectation before it times it (tested below, on q11): hand-written Spark streaming (``native-stream``) and
# Flink (its own venv and JVM), whose SQL translation is tested below. Of the queries added later, CI time keeps the
# count window replayed (14-19 s at load 6-7 on 2 cores); q8 live (28-36 s: two streams fed side by side), its replay
# (17-25 s) and q7's window join (27-45 s) are left to the bench; their operator paths are tested in
# tests/test_streaming_stages.py (a live join of two streams, each with its own watermark, and its side-by-side
# replay) and sql_examples/streaming/window_join.sql (q7 as a window join)
LATER = {"q7_highest_bid": (), "q8_new_users": (), "count_window": ("replay",)}
STREAM_CASES = [(q, e) for q in STREAMING for e in suite.STREAM_ENGINES
                if (q.name, e) != ("q5_hot_items", "sqlwin-stream") and e not in ("native-stream", "flink-stream")
                and (q.name not in LATER or e in LATER[q.name])]


@pytest.mark.parametrize(("query", "engine"), STREAM_CASES, ids=[f"{q.name}-{e}" for q, e in STREAM_CASES])
def test_streaming_engines_agree(ctx, query: suite.Query, engine: str) -> None:
    """Each streaming engine's final panes equal the batch query over the (row, window) pairs in time."""
    suite.register_tables(ctx)
    got = suite.normalize(suite.ENGINES[engine].result(query, ctx))
    want = suite.normalize(suite.ENGINES[streams.EXPECTED].result(query, ctx))
    assert len(want) > 0, f"{query.name} has no final pane on this data: the comparison would prove nothing"
    assert suite.differences(got, want) is None, \
        f"{query.name}: {engine} differs from {streams.EXPECTED}: {suite.differences(got, want)}"


def test_measure_checks_streaming_engines_then_times_them(ctx) -> None:
    """``measure`` checks each engine against its own reference (DuckDB; ``expected`` for streams), times
    the ones that agree in interleaved rounds, and never times the reference-only engine; with no streaming
    rounds, a streaming engine's checked run is its timing."""
    query = next(q for q in STREAMING if q.name == "q11_user_sessions")
    engines = {n: suite.ENGINES[n] for n in ("sqlwin", "native-stream", "expected")}
    ms = {m.engine: m for m in suite.measure(query, ctx, 1, engines, say=lambda _: None, stream_rounds=0)}
    assert set(ms) == {"sqlwin", "native-stream"}
    assert all(m.status == "ok" and len(m.times) == 1 and m.rows for m in ms.values()), \
        {n: (m.status, m.detail) for n, m in ms.items()}
    assert ms["native-stream"].detail == "timed: the checked run" and ms["sqlwin"].detail == ""


def test_flink_sql_translation() -> None:
    """Flink SQL for the streamed queries: window TVFs wrapped in TABLE(...), singular interval units, no
    comments; the queries Flink SQL cannot say are skipped with the reason (no Flink run)."""
    from bench.nexmark.flink_stream import Unsupported, to_flink_sql

    by_name = {q.name: q for q in suite.QUERIES}
    engine = suite.ENGINES["flink-stream"]
    q5 = to_flink_sql(by_name["q5_hot_items"].sql)
    assert "FROM TABLE(HOP(TABLE bids, DESCRIPTOR(date_time), INTERVAL '2' SECOND, INTERVAL '10' SECOND))" in q5
    assert "--" not in q5 and "SECONDS" not in q5
    q11 = to_flink_sql(by_name["q11_user_sessions"].sql)
    assert "TABLE(SESSION(TABLE bids PARTITION BY bidder, DESCRIPTOR(date_time), INTERVAL '10' SECOND))" in q11
    assert "TABLE(CUMULATE(TABLE bids, DESCRIPTOR(date_time), INTERVAL '10' SECOND, INTERVAL '1' MINUTE))" \
        in to_flink_sql(by_name["cumulate_channel"].sql)
    topn = to_flink_sql(by_name["topn_auctions"].sql)
    assert "FROM TABLE(TUMBLE(TABLE bids, DESCRIPTOR(date_time), INTERVAL '10' SECOND))" in topn
    assert to_flink_sql(topn) == topn  # already Flink's form: unchanged
    # q8: a window join of two window aggregations, as written; q7: its streaming text, a window join of the bids'
    # TUMBLE (projected in a subquery, Flink's own window join example) with the window MAX
    q8 = to_flink_sql(by_name["q8_new_users"].stream_sql)
    assert "FROM TABLE(TUMBLE(TABLE persons, DESCRIPTOR(date_time), INTERVAL '10' SECOND))" in q8
    assert "FROM TABLE(TUMBLE(TABLE auctions, DESCRIPTOR(date_time), INTERVAL '10' SECOND))" in q8
    assert "ON p.id = a.seller AND p.starttime = a.starttime AND p.endtime = a.endtime" in q8
    q7 = to_flink_sql(by_name["q7_highest_bid"].stream_sql)
    assert "FROM (SELECT * FROM TABLE(TUMBLE(TABLE bids, DESCRIPTOR(date_time), INTERVAL '10' SECOND))) B" in q7
    assert "ON B.window_start = B1.window_start AND B.window_end = B1.window_end AND B.price = B1.maxprice" in q7
    assert "BETWEEN" not in q7 and "--" not in q7
    assert engine.skip(by_name["trigger_early_late"]) == "Flink SQL has no EMIT clause (early/late firings)"
    assert engine.skip(by_name["count_window"]) == "Flink SQL has no count windows"
    assert all(engine.skip(by_name[n]) is None for n in ("q5_hot_items", "q7_highest_bid", "q8_new_users",
                                                         "q11_user_sessions", "cumulate_channel", "topn_auctions"))
    with pytest.raises(Unsupported):
        to_flink_sql("SELECT * FROM TUMBLE(TABLE bids, DESCRIPTOR(date_time), INTERVAL '1' SECOND")
