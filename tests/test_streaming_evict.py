"""EVICT (GRAMMAR 4, Flink evictors) on streaming tables and in replay.

The Flink semantics themselves are hand-worked in the transcript corpus (tests/fixtures/trigger_transcripts.yaml,
``evict_*``), run by the pure engine, replay and a streaming table (tests/test_transcripts_spark.py). Here:

- a streaming table fed file by file gives exactly the panes and dropped rows of the replay of the same files
  (HOP with early/late firings and KEEP LAST n ROWS, crashed inside sqlwin's commit and restarted; TUMBLE with
  EVICT AFTER DELTA; the global window), and the global window's state shrinks as rows are evicted;
- with one pane per window (the default trigger, lateness 0), replay's panes are the batch query over the rows
  the evictor keeps, written with window functions, on Spark and on DuckDB;
- what cannot run is an error before anything starts.
"""

from __future__ import annotations

import datetime as dt
import os
import re

import pytest

import sqlwin
from sqlwin.errors import SqlwinError
from sqlwin.streaming import catalog
from sqlwin.streaming.state import StateStore
from tests.streamtools import T0, Feeder, rows_of, ts

pytestmark = pytest.mark.slow


def row(k: str, v: int, seconds: float) -> dict:
    return {"k": k, "v": v, "ts": ts(seconds)}


# One file per micro-batch, rows of a file in time order (a live stream's arrival order within a micro-batch).
# W = max ts - 2 s; lateness 10 s. Micro-batches: f0 -> 0 (W -> 4, nothing to fire: no no-data micro-batch;
# b's first pane holds 1 row); f1 -> 1 (W -> 10), no-data 2 fires HOP [-5, 5) and [0, 10) on time; f2 -> 3 brings
# late rows within the lateness (a@2, b@5); f3 -> 4 (W -> 23), no-data 5; f4 -> 6 a late row within the lateness
# (a@11: HOP [5, 15) expires at 25 > 23); f5 -> 7 (W -> 38), no-data 8; f6 -> 9 a row past it (a@8: HOP [0, 10)
# and [5, 15) expired at 20 and 25 <= 38).
FILES = [
    [row("a", 1, 1), row("a", 2, 3), row("b", 5, 4), row("a", 3, 6)],
    [row("a", 4, 7), row("b", 6, 8), row("a", 1, 9), row("a", 2, 12)],
    [row("a", 7, 2), row("b", 1, 5)],
    [row("a", 3, 14), row("b", 2, 16), row("a", 5, 17), row("a", 9, 25)],
    [row("a", 4, 11)],
    [row("a", 6, 40)],
    [row("a", 1, 8)],
]

HOP_KEEP_LAST = """SELECT window_start, window_end, k, SUM(v) AS s, COUNT(*) AS c
FROM HOP(TABLE {src}, DESCRIPTOR(ts), INTERVAL 5 SECONDS, INTERVAL 10 SECONDS)
GROUP BY window_start, window_end, k
ALLOWED LATENESS INTERVAL 10 SECONDS LATE ROWS TO {late}
EVICT KEEP LAST 3 ROWS
EMIT WITH TRIGGER AFTER WATERMARK EARLY EVERY 2 ROWS LATE EVERY 1 ROWS ACCUMULATING"""

TUMBLE_DELTA_AFTER = """SELECT window_start, window_end, k, array_sort(collect_list(v)) AS vs, COUNT(*) AS c
FROM TUMBLE(TABLE {src}, DESCRIPTOR(ts), INTERVAL 10 SECONDS)
GROUP BY window_start, window_end, k
ALLOWED LATENESS INTERVAL 10 SECONDS
EVICT AFTER DELTA(v) < 3
EMIT WITH TRIGGER EVERY 2 ROWS ACCUMULATING"""

GLOBAL_KEEP_LAST = """SELECT k, SUM(v) AS s, COUNT(*) AS c FROM {src} GROUP BY k
EVICT KEEP LAST 2 ROWS EMIT WITH TRIGGER EVERY 1 ROWS"""

PANE = ["pane_index", "pane_timing", "is_final", "micro_batch"]


@pytest.fixture()
def root(tmp_path, monkeypatch):
    monkeypatch.setenv("SQLWIN_STREAMING_DIR", str(tmp_path / "root"))
    yield tmp_path
    for table in catalog.all_tables():
        table.stop()
        catalog.remove_table(table.name)


def replay(spark, query: str, name: str, files: list[list[dict]], late: str = "late_r") -> list[tuple]:
    """The query replayed over ``files``: one micro-batch per file, rows in file order."""
    data = [(r["k"], r["v"], dt.datetime.fromisoformat(r["ts"]), i, j) for i, rows in enumerate(files)
            for j, r in enumerate(rows)]
    schema = "k string, v int, ts timestamp, file int, line int"
    spark.createDataFrame(data, schema).createOrReplaceTempView(f"t_{name}")
    sqlwin.sql(spark, f"CREATE STREAM r_{name} FROM TABLE t_{name} ARRIVAL ORDER BY file, line MICRO BATCH BY file "
                      "WATERMARK FOR ts AS ts - INTERVAL 2 SECONDS")
    return rows_of(sqlwin.sql(spark, query.format(src=f"r_{name}", late=late)))


def without_end_of_input(replayed: list[tuple], streamed: list[tuple]) -> list[tuple]:
    """Replay's panes but those the end of input fires (a live stream has no end): after the live run's last."""
    last = max(r[-1] for r in streamed)
    assert len({r[-1] for r in replayed if r[-1] > last}) <= 1  # the end of input is one micro-batch
    return [r for r in replayed if r[-1] <= last]


def test_streaming_equals_replay_with_a_crash_inside_the_commit(spark, root, monkeypatch):
    folder = root / "in"
    sqlwin.sql(spark, "CREATE STREAM s_ev (k STRING, v INT, ts TIMESTAMP, WATERMARK FOR ts AS ts - INTERVAL 2 SECONDS) "
                      f"USING json OPTIONS (path '{folder}')")
    feeder = Feeder(folder)
    hop_sql = f"CREATE STREAMING TABLE ev_hop AS {HOP_KEEP_LAST.format(src='s_ev', late='ev_hop_late')}"
    sqlwin.sql(spark, hop_sql)
    sqlwin.sql(spark, f"CREATE STREAMING TABLE ev_delta AS {TUMBLE_DELTA_AFTER.format(src='s_ev')}")
    sqlwin.sql(spark, f"CREATE STREAMING TABLE ev_global AS {GLOBAL_KEEP_LAST.format(src='s_ev')}")
    hop, delta, glob = (catalog.find_table(n) for n in ("ev_hop", "ev_delta", "ev_global"))
    assert {hop.path, delta.path, glob.path} == {"custom"} and "EVICT" in hop.why

    # ev_hop dies inside sqlwin's commit of micro-batch 3, f2's (after its sink, evicted rows and late rows are
    # written)
    crash = {"at": 3, "done": False}
    commit = StateStore.commit

    def crashing_commit(self, batch, data):
        if batch == crash["at"] and "ev_hop" in self.root and not crash["done"]:
            crash["done"] = True
            raise RuntimeError("crash inside the commit")
        commit(self, batch, data)

    monkeypatch.setattr(StateStore, "commit", crashing_commit)
    for rows in FILES:
        feeder.write(rows)
        for table in (delta, glob):
            table.process_all_available()
        try:
            hop.process_all_available()
        except SqlwinError:
            assert crash["done"] and hop.status().status == "failed"
            hop.stop()
            sqlwin.sql(spark, hop_sql)  # the same statement on the same folder resumes
            hop = catalog.find_table("ev_hop")
            hop.process_all_available()
    assert crash["done"]

    columns = ["window_start", "window_end", "k", "s", "c", *PANE]
    streamed = rows_of(spark.table("ev_hop"), columns)
    replayed = replay(spark, HOP_KEEP_LAST, "hop", FILES)
    assert streamed == without_end_of_input(replayed, streamed)
    assert rows_of(spark.table("ev_hop_late"), ["k", "v", "ts", "reason", "micro_batch"]) == \
        rows_of(spark.table("late_r"), ["k", "v", "ts", "reason", "micro_batch"])
    held: dict[tuple, int] = {}  # rows per (HOP window start, key) in the input: up to 6
    for r in (r for rows in FILES for r in rows):
        second = int(r["ts"][-2:])
        for start in (second // 5 * 5 - 5, second // 5 * 5):
            held[(start, r["k"])] = held.get((start, r["k"]), 0) + 1
    assert max(held.values()) > 3 and max(r[4] for r in streamed) == 3  # KEEP LAST 3 ROWS

    columns = ["window_start", "window_end", "k", "vs", "c", *PANE]
    streamed = rows_of(spark.table("ev_delta"), columns)
    assert streamed == without_end_of_input(replay(spark, TUMBLE_DELTA_AFTER, "delta", FILES), streamed)

    columns = ["k", "s", "c", *PANE]
    streamed = rows_of(spark.table("ev_global"), columns)
    assert streamed == without_end_of_input(replay(spark, GLOBAL_KEEP_LAST, "global", FILES), streamed)
    assert {r[2] for r in streamed} == {1, 2}
    # state shrinks: only the micro-batches holding each key's last 2 rows are kept, and the evicted sets
    # naming rows of deleted micro-batches are gone
    last_two = {k: [i for i, rows in enumerate(FILES) for r in rows if r["k"] == k][-2:] for k in ("a", "b")}
    live = {i for batches in last_two.values() for i in batches}
    operator = glob.operator
    assert len(operator.rows.by_batch) == len(live)
    assert glob.status().state_rows == sum(len(FILES[i]) for i in live) < sum(len(rows) for rows in FILES)
    evicted = sorted(int(n) for n in os.listdir(os.path.join(operator.store.root, "evicted")))
    assert evicted == sorted(operator.evictor.live) and len(evicted) < len(FILES)
    assert all(set(named) & set(operator.rows.by_batch) for named in operator.evictor.live.values())


# One pane per window (the default trigger, lateness 0): the evictor runs once, over every row of the window
# in arrival order. Rows arrive out of time order (seq), three per micro-batch; the delay keeps every row.
ARRIVALS = [("a", 5, 7), ("a", 1, 2), ("b", 4, 3), ("a", 8, 9), ("a", 2, 1), ("b", 7, 8), ("a", 6, 4),
            ("b", 9, 5), ("a", 3, 12), ("a", 7, 17), ("a", 4, 11), ("b", 2, 19), ("a", 9, 15), ("b", 5, 13),
            ("a", 2, 14), ("a", 6, 18)]
EVICTORS = {
    "KEEP LAST 2 ROWS": "ROW_NUMBER() OVER (PARTITION BY window_start, k ORDER BY seq DESC) <= 2",
    "KEEP LAST INTERVAL '3' SECONDS":
        "ts > MAX(ts) OVER (PARTITION BY window_start, k) - INTERVAL 3 SECONDS",
    "DELTA(v) < 4": "ABS(v - FIRST_VALUE(v) OVER (PARTITION BY window_start, k ORDER BY seq DESC)) < 4",
}


@pytest.mark.parametrize("evictor", list(EVICTORS))
def test_replay_final_panes_are_the_batch_query_over_kept_rows(spark, duck, root, evictor):
    tag = f"final_{list(EVICTORS).index(evictor)}"
    data = [(k, v, T0 + dt.timedelta(seconds=s), seq, seq // 3) for seq, (k, v, s) in enumerate(ARRIVALS)]
    spark.createDataFrame(data, "k string, v int, ts timestamp, seq int, mb int").createOrReplaceTempView(f"t_{tag}")
    sqlwin.sql(spark, f"CREATE STREAM r_{tag} FROM TABLE t_{tag} ARRIVAL ORDER BY seq MICRO BATCH BY mb "
                      "WATERMARK FOR ts AS ts - INTERVAL 1 HOUR")
    replayed = sqlwin.sql(spark, f"""SELECT window_start, k, SUM(v) AS s, COUNT(*) AS c
        FROM TUMBLE(TABLE r_{tag}, DESCRIPTOR(ts), INTERVAL 10 SECONDS) GROUP BY window_start, window_end, k
        EVICT {evictor}""")
    panes = rows_of(replayed, ["window_start", "k", "s", "c", "pane_index", "pane_timing", "is_final"])
    assert {p[4:] for p in panes} == {(0, "ON_TIME", True)}
    batch = f"""SELECT window_start, k, SUM(v) AS s, COUNT(*) AS c FROM (
          SELECT *, {EVICTORS[evictor]} AS keep FROM TUMBLE(TABLE t_{tag}, DESCRIPTOR(ts), INTERVAL 10 SECONDS))
        WHERE keep GROUP BY window_start, window_end, k"""
    on_spark = rows_of(sqlwin.sql(spark, batch))
    duck.register(f"t_{tag}", spark.table(f"t_{tag}").toPandas())
    on_duckdb = sorted(tuple(r) for r in duck.execute(sqlwin.rewrite(batch, target="duckdb", catalog=spark)).fetchall())
    assert [p[:4] for p in panes] == on_spark == [(w.replace(tzinfo=None), *rest) for w, *rest in on_duckdb]
    assert any(c < n for (_, _, _, c), n in zip(on_spark, _window_sizes(), strict=True))


def _window_sizes() -> list[int]:
    """Rows per (10 s window, key) of ARRIVALS, in (window_start, k) order."""
    sizes: dict[tuple, int] = {}
    for k, _, s in ARRIVALS:
        sizes[(s // 10, k)] = sizes.get((s // 10, k), 0) + 1
    return [sizes[w] for w in sorted(sizes)]


@pytest.mark.parametrize(("clauses", "message"), [
    ("EVICT KEEP LAST INTERVAL '1' MINUTE EMIT WITH TRIGGER EVERY 2 ROWS",
     "KEEP LAST interval keeps rows by their event time, and the global window has none here"),
    ("EVICT DELTA(k) < 3 EMIT WITH TRIGGER EVERY 2 ROWS", "DELTA(expr) needs a number; k is STRING"),
    ("EVICT DELTA(v) < 'x' EMIT WITH TRIGGER EVERY 2 ROWS", "the threshold must be a number"),
    ("EVICT DELTA(SUM(v)) < 3 EMIT WITH TRIGGER EVERY 2 ROWS", "no aggregate or window function"),
])
def test_evictors_that_cannot_run_are_errors_before_start(spark, root, clauses, message):
    sqlwin.sql(spark, f"CREATE STREAM s_bad (k STRING, v INT) USING json OPTIONS (path '{root / 'bad'}')")
    with pytest.raises(SqlwinError, match=re.escape(message)) as err:
        sqlwin.sql(spark, f"CREATE STREAMING TABLE bad AS SELECT k, COUNT(*) AS c FROM s_bad GROUP BY k {clauses}")
    assert err.value.line == 1 and err.value.col is not None
    assert catalog.find_table("bad") is None


def test_evictor_state_for_spark_connect(spark, root):
    """Over Spark Connect the operator is pickled to the server with its evictor (sqlwin.streaming.connect): no
    DataFrame goes along (the evicted sets' folder is Spark's to make, where it writes one), and the client's read-only
    restore of the committed state (its status) deletes nothing on disk, where the operator's own restore
    deletes an uncommitted attempt's evicted set."""
    from sqlwin.pipeline import compile_statement
    from sqlwin.streaming.connect import CommittedState
    from sqlwin.streaming.evictors import SparkEvictor
    from sqlwin.streaming.operator import MicroBatchOperator
    from sqlwin.streaming.shape import analyse
    from sqlwin.streaming.sinks import BatchSink
    from sqlwin.streaming.statements import streams_read

    spark.createDataFrame([("a", 1, T0, 0)], "k string, v int, ts timestamp, seq int").createOrReplaceTempView("t_pk")
    sqlwin.sql(spark, "CREATE STREAM r_pk FROM TABLE t_pk ARRIVAL ORDER BY seq WATERMARK FOR ts AS ts")
    query = compile_statement(GLOBAL_KEEP_LAST.format(src="r_pk"), "spark", catalog=spark, spark=spark).plan
    folder = root / "pk"
    operator = MicroBatchOperator(spark, analyse(query, streams_read(spark, query.node)), str(folder),
                                  BatchSink("pk_out", str(folder / "data")), None, "pk")
    operator.step(spark, spark.table("t_pk"), 0)  # micro-batch 0: one pane, committed
    state = operator.evictor.__getstate__()
    assert "_rows" not in state and operator.evictor._rows is not None
    clone = SparkEvictor.__new__(SparkEvictor)
    clone.__setstate__(state)
    assert clone._rows is None and clone.folder == operator.evictor.folder

    os.makedirs(os.path.join(clone.folder, "1"))  # as if micro-batch 1 were being evicted, not committed yet
    CommittedState(spark, operator.store.root).refresh(operator)
    assert os.listdir(clone.folder) == ["1"] and operator.next_batch == 1
    operator._restore()
    assert os.listdir(clone.folder) == []


def test_replay_evicts_in_sessions_with_a_dynamic_gap(spark, root):
    """Hand-worked: a dynamic-gap session grows by merging; KEEP LAST 2 ROWS over its rows in arrival order."""
    rows = [("a", 1, T0, 0), ("a", 9, T0 + dt.timedelta(seconds=2), 1), ("a", 2, T0 + dt.timedelta(seconds=10), 2)]
    spark.createDataFrame(rows, "k string, v int, ts timestamp, seq int").createOrReplaceTempView("t_dyn")
    sqlwin.sql(spark, "CREATE STREAM r_dyn FROM TABLE t_dyn ARRIVAL ORDER BY seq "
                      "WATERMARK FOR ts AS ts - INTERVAL 100 SECONDS")
    out = sqlwin.sql(spark, """SELECT window_start, window_end, k, array_sort(collect_list(v)) AS vs
        FROM SESSION(TABLE r_dyn PARTITION BY k, DESCRIPTOR(ts),
                     CASE WHEN v > 5 THEN INTERVAL 10 SECONDS ELSE INTERVAL 3 SECONDS END)
        GROUP BY window_start, window_end, k
        EVICT KEEP LAST 2 ROWS EMIT WITH TRIGGER EVERY 1 ROWS""")

    def at(s: int) -> dt.datetime:
        return T0 + dt.timedelta(seconds=s)

    # [0, 3) holds 1; 9 (gap 10 s) merges it into [0, 12); 2 at 10 s (gap 3 s) grows it to [0, 13): 1 leaves
    assert rows_of(out) == [(at(0), at(3), "a", [1], 0, "EARLY", False, 0),
                            (at(0), at(12), "a", [1, 9], 0, "EARLY", False, 1),
                            (at(0), at(13), "a", [2, 9], 0, "EARLY", False, 2)]
