"""Committed operator state written by an earlier sqlwin, resumed by this one.

Users resume their checkpoints with a newer sqlwin, so ``state/<n>.json`` (and the tables saved with it) must
mean the same to every version. Each case runs one query's micro-batches through ``MicroBatchOperator.step``
(as a streaming table does: a no-data micro-batch after one that moved the watermark, the end of input last)
and records the state committed after the ``CUT``-th data micro-batch and every pane and late row of the run.

``python tests/statecompat.py OUT.json`` records every case with the sqlwin it imports:
tests/fixtures/committed_state_v1.json was recorded so by sqlwin before its operator was split into roles
(commit 63ffd9f); tests/test_committed_state.py resumes each case from it.
"""

from __future__ import annotations

import datetime as dt
import json
import os
import sys
from pathlib import Path
from typing import Any

SECOND = 1_000_000
T0 = dt.datetime(2024, 1, 1)
CUT = 2  # the state committed after micro-batches 0..CUT of the table is what the next run resumes

# (k, v, ts seconds, mb): five micro-batches of the table; rows behind the watermark (W = max ts - 2 s) in 2 and 4
ROWS = [("a", 1, 1, 0), ("a", 2, 3, 0), ("b", 5, 4, 0), ("a", 3, 6, 0),
        ("a", 4, 7, 1), ("b", 6, 8, 1), ("a", 1, 9, 1),
        ("a", 2, 12, 2), ("a", 7, 2, 2), ("b", 1, 5, 2),
        ("a", 3, 14, 3), ("b", 2, 16, 3), ("a", 5, 17, 3), ("a", 9, 25, 3),
        ("a", 4, 11, 4), ("a", 6, 40, 4), ("a", 1, 8, 4)]

TUMBLE = "TUMBLE(TABLE {src}, DESCRIPTOR(ts), INTERVAL 10 SECONDS)"
CASES = {
    # rows kept (COUNT(DISTINCT) does not split), PaneDriver per window
    "rows": f"""SELECT window_start, window_end, k, COUNT(DISTINCT v) AS d, SUM(v) AS s FROM {TUMBLE}
        GROUP BY window_start, window_end, k ALLOWED LATENESS INTERVAL 10 SECONDS LATE ROWS TO {{late}}
        EMIT WITH TRIGGER AFTER WATERMARK EARLY EVERY 2 ROWS LATE EVERY 1 ROWS""",
    # partial aggregates read by one Spark job, the columnar pane driver (its windows saved as a table)
    "columnar": f"""SELECT window_start, window_end, k, SUM(v) AS s, COUNT(*) AS c FROM {TUMBLE}
        GROUP BY window_start, window_end, k ALLOWED LATENESS INTERVAL 5 SECONDS LATE ROWS TO {{late}}""",
    "global": """SELECT k, SUM(v) AS s, COUNT(*) AS c FROM {src} GROUP BY k EMIT WITH TRIGGER EVERY 2 ROWS""",
    "sessions": """SELECT window_start, window_end, k, SUM(v) AS s, COUNT(*) AS c
        FROM SESSION(TABLE {src} PARTITION BY k, DESCRIPTOR(ts), INTERVAL 3 SECONDS)
        GROUP BY window_start, window_end, k ALLOWED LATENESS INTERVAL 10 SECONDS LATE ROWS TO {late}""",
    "max_sessions": """SELECT window_start, window_end, k, SUM(v) AS s, COUNT(*) AS c
        FROM SESSION(TABLE {src} PARTITION BY k, DESCRIPTOR(ts), INTERVAL 3 SECONDS, INTERVAL 6 SECONDS)
        GROUP BY window_start, window_end, k ALLOWED LATENESS INTERVAL 10 SECONDS LATE ROWS TO {late}""",
    "count_windows": """SELECT window_start, window_end, k, SUM(v) AS s, COUNT(*) AS c
        FROM TUMBLE(TABLE {src} PARTITION BY k, DESCRIPTOR(ts), ROWS 2)
        GROUP BY window_start, window_end, k LATE ROWS TO {late}""",
    "evicted": """SELECT window_start, window_end, k, SUM(v) AS s, COUNT(*) AS c
        FROM HOP(TABLE {src}, DESCRIPTOR(ts), INTERVAL 5 SECONDS, INTERVAL 10 SECONDS)
        GROUP BY window_start, window_end, k ALLOWED LATENESS INTERVAL 10 SECONDS LATE ROWS TO {late}
        EVICT KEEP LAST 3 ROWS EMIT WITH TRIGGER AFTER WATERMARK EARLY EVERY 2 ROWS LATE EVERY 1 ROWS ACCUMULATING""",
}


def prepare(spark: Any, name: str) -> None:
    """The table of the case and its replay stream (only its schema, watermark and arrival order are used)."""
    import sqlwin

    rows = [(k, v, T0 + dt.timedelta(seconds=s), mb) for k, v, s, mb in ROWS]
    spark.createDataFrame(rows, "k string, v int, ts timestamp, mb int").createOrReplaceTempView(f"sc_{name}_t")
    sqlwin.sql(spark, f"CREATE STREAM sc_{name}_s FROM TABLE sc_{name}_t ARRIVAL ORDER BY mb, v "
                      "WATERMARK FOR ts AS ts - INTERVAL 2 SECONDS")


def operator(spark: Any, name: str, folder: str) -> Any:
    """The case's operator over ``folder`` (restored from what is committed there)."""
    from sqlwin.pipeline import compile_statement
    from sqlwin.streaming.operator import MicroBatchOperator
    from sqlwin.streaming.shape import analyse
    from sqlwin.streaming.sinks import BatchSink
    from sqlwin.streaming.statements import streams_read

    text = CASES[name].format(src=f"sc_{name}_s", late=f"sc_{name}_late")
    query = compile_statement(text, "spark", catalog=spark, spark=spark).plan
    shape = analyse(query, streams_read(spark, query.node))
    late = BatchSink(f"sc_{name}_late", os.path.join(folder, "late")) if shape.late_rows_to else None
    return MicroBatchOperator(spark, shape, folder, BatchSink(f"sc_{name}_out", os.path.join(folder, "data")),
                              late, f"sc_{name}")


def drive(spark: Any, op: Any, name: str, batches: range, end: bool) -> None:
    from pyspark.sql import functions as F

    for mb in batches:
        clock = (mb + 1) * SECOND
        before = op.watermark
        op.step(spark, spark.table(f"sc_{name}_t").where(F.col("mb") == mb), clock)
        if op.watermark > before:  # the no-data micro-batch a live stream runs next
            op.step(spark, None, clock)
    if end:
        op.step(spark, None, (batches.stop + 1) * SECOND, end_of_input=True)


def as_v1(state: dict) -> dict:
    """``state/<n>.json`` with its per-window states as v1 wrote them: dicts (``WindowState.to_dict``) where this
    version writes positional rows (``to_row``), and without what the format gained since (a window's
    ``end_timer_fired``, written only when set; an old commit has none, which reads as not set). The same state,
    so a commit of this version must equal v1's once so read."""
    from sqlwin.core.panes import WindowState

    windows = state.get("windows")
    if not windows:
        return state
    plain = []
    for k, s, e, st in windows:
        st = st if isinstance(st, dict) else WindowState.from_row(st).to_dict()
        plain.append([k, s, e, {f: v for f, v in st.items() if f != "end_timer_fired"}])
    return {**state, "windows": plain}


def committed(op: Any) -> dict:
    """The newest commit: its number, ``state/<n>.json`` and the columnar windows table saved with it."""
    last = op.store.last_committed()
    state = op.store.load(last)
    table = op.store.load_table(last, "windows").to_pylist() if state.get("columnar") else None
    return {"batch": last, "state": state, "windows_table": table}


def outputs(spark: Any, op: Any) -> dict:
    def rows(df: Any) -> list:
        return sorted([None if v is None else str(v) for v in r] for r in df.collect())

    return {"panes": rows(op.sink.read(spark)),
            "late": rows(op.late_sink.read(spark)) if op.late_sink is not None else []}


def record(spark: Any, root: Path) -> dict:
    recorded = {}
    for name in CASES:
        prepare(spark, name)
        folder = str(root / name)
        op = operator(spark, name, folder)
        drive(spark, op, name, range(CUT + 1), end=False)
        cut = committed(op)
        drive(spark, op, name, range(CUT + 1, 5), end=True)
        recorded[name] = {**cut, **outputs(spark, op)}
    return recorded


if __name__ == "__main__":
    import tempfile
    import time

    os.environ["TZ"] = "UTC"
    time.tzset()
    from sqlwin.session import local_session

    session = local_session("statecompat")
    with tempfile.TemporaryDirectory() as scratch:
        result = record(session, Path(scratch))
    Path(sys.argv[1]).write_text(json.dumps(result, indent=1, sort_keys=True) + "\n", encoding="utf-8")
