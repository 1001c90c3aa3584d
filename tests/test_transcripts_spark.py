"""The trigger transcript corpus (tests/fixtures/trigger_transcripts.yaml) on Spark: replayed with
``CREATE STREAM ... FROM TABLE`` and run as a real streaming query fed one file per micro-batch.

Three executors, one corpus (GRAMMAR 3-4, issue 7 point 2): the pure engine (tests/test_triggers.py),
replay and a streaming table must give the corpus's panes and dropped rows, and replay and streaming
the same ``micro_batch`` numbers. Spark's micro-batches are not quite the corpus's steps: a micro-batch
that moves the watermark is followed by a no-data micro-batch (where the windows it closed fire), and a
micro-batch that does nothing takes no number. So a case runs on Spark only if every empty step is such a
no-data micro-batch (replay makes micro-batches from rows only; a streaming table can also be given an
empty file) and every no-data micro-batch the corpus does not list fires nothing. ``spark_batches``
decides that by simulating the watermark, and the pure engine, run on Spark's micro-batches, gives the
expected ``micro_batch`` numbers; cases that cannot run are listed with the reason in ``EXCLUDED``.
"""

from __future__ import annotations

import datetime as dt
import itertools
from dataclasses import dataclass, field
from pathlib import Path

import pytest

import sqlwin
from sqlwin.core.panes import GLOBAL_WINDOW, WatermarkTracker, WindowPanes
from sqlwin.core.timeunits import UNIT_MICROS, normalize_unit
from sqlwin.errors import SqlwinError
from sqlwin.streaming import catalog
from tests.streamtools import Feeder, start_clocked
from tests.test_triggers import CASES, assign, build_driver, parse_row

EPOCH = dt.datetime(1970, 1, 1)
BY_NAME = {c["name"]: c for c in CASES}

# Cases that cannot run on Spark, and why (checked by test_runnable_cases: nothing else is left out).
WHY_FIRE = "a no-data micro-batch Spark runs after a watermark move fires panes the corpus expects later"
WHY_EMPTY = "an empty step that is not the no-data micro-batch after a watermark move"
NO_INJECTION = "watermark: explicit (no watermark injection on Spark)"
EXCLUDED: dict[str, dict[str, str]] = {"streaming": {
    "explicit_watermark": NO_INJECTION,
    "early_and_end_in_one_batch": WHY_FIRE,  # the ON_TIME pane fires before the rows of the next step come
    "lateness_boundary": WHY_FIRE,  # likewise (lateness_boundary_exact is its Spark form)
    "after_watermark_without_late_closes": WHY_FIRE,
}}
EXCLUDED["replay"] = {**EXCLUDED["streaming"], **{name: WHY_EMPTY for name in (
    # processing-time firings in micro-batches without rows: a streaming table gets an empty file for them
    "after_any_once", "repeatedly_after_any", "every_interval", "processing_time_aligned_with_offset",
    "processing_time_delay_then_aligned", "early_processing_time_then_empty_final_on_time")}}
# The streaming executor runs at ~1-4 s per micro-batch on a loaded machine: a representative subset
# (every kind of window, both modes, late and closed drops, empty panes, merges, processing time).
STREAMING_SUBSET = [
    "default_trigger_with_lateness", "early_late_discarding_fire_always", "after_count_finishes_and_closes",
    "until_binds_loosest", "every_interval", "repeatedly_after_any", "session_merge_after_on_time",
    "session_merge_into_closed", "emit_final",
    # evictors: time (EARLY panes, then the ON_TIME one in a no-data micro-batch), delta, sessions merging
    "evict_keep_last_interval", "evict_delta_arrival_order", "evict_session_merge_arrival_order",
]


class Excluded(Exception):
    """The case cannot run on this executor (the message says why)."""


@dataclass
class Batch:
    """One micro-batch as Spark runs it."""

    kind: str  # rows | empty (an empty file) | no-data (after a watermark move) | end (end of input)
    clock: int  # processing time, microseconds
    rows: list[tuple[str, str, int]] = field(default_factory=list)  # (key, id, ts micros)
    step: int | None = None  # the corpus step it runs; None: a no-data micro-batch the corpus does not list


def unit_of(case: dict) -> int:
    return UNIT_MICROS[normalize_unit(case.get("time_unit", "SECOND"))]


def spark_batches(case: dict, executor: str) -> list[Batch]:
    """The case's steps as Spark's micro-batches, or ``Excluded`` (the structural reasons only)."""
    if case.get("watermark") == "explicit":
        raise Excluded(NO_INJECTION)
    unit = unit_of(case)
    tracker = WatermarkTracker(case.get("watermark", {}).get("delay", 0) * unit)
    batches: list[Batch] = []
    clock = previous = 0
    owed = False  # the previous micro-batch moved the watermark: Spark runs a no-data one next
    for i, step in enumerate(case["steps"]):
        clock = step.get("processing_time", clock // unit) * unit
        rows = [parse_row(r, unit) for r in step.get("batch") or []]
        if step.get("end_of_input"):
            if owed:
                batches.append(Batch("no-data", previous))
            if executor == "replay" and clock != previous:
                raise Excluded("the input ends at another processing time than its last micro-batch")
            batches.append(Batch("end", clock, step=i))
            break
        if not rows and owed and clock == previous:
            batches.append(Batch("no-data", clock, step=i))
        elif not rows:
            if executor == "replay":
                raise Excluded(WHY_EMPTY)
            if owed:
                batches.append(Batch("no-data", previous))
            batches.append(Batch("empty", clock, step=i))
        else:
            if owed:
                batches.append(Batch("no-data", previous))
            batches.append(Batch("rows", clock, rows, i))
        before = tracker.current
        tracker.after_batch(ts for *_, ts in rows)
        owed, previous = tracker.current > before, clock
    return batches


def seconds(micros: int, unit: int) -> int:
    return micros // unit


def corpus_panes(case: dict, step: dict, got: list[tuple]) -> set[tuple]:
    """A step's expected panes as (key, window, index, timing, final, ids); ``count: n`` takes the ids got."""
    out = set()
    for e in step.get("expect") or []:
        window = "global" if e["window"] == "global" else tuple(e["window"])
        key = str(e.get("key", "k"))
        if "count" in e:
            match = [g for g in got if g[:2] == (key, window)]
            assert match and len(match[0][5]) == e["count"], f"{case['name']}: {e}"
            ids = match[0][5]
        else:
            ids = tuple(sorted(str(r) for r in e["rows"]))
        out.add((key, window, e["index"], e["timing"], e["final"], ids))
    return out


@dataclass
class Expected:
    panes: set[tuple]  # (key, window, index, timing, final, ids, micro_batch)
    dropped: set[tuple]  # (id, reason, micro_batch)
    end_batch: int | None  # the micro_batch number of the end of input (replay only)


def expected(case: dict, batches: list[Batch]) -> Expected:
    """Run the pure engine on Spark's micro-batches; check it against the corpus; number the micro-batches."""
    unit = unit_of(case)
    windows = WindowPanes(build_driver(case, unit))
    tracker = WatermarkTracker(case.get("watermark", {}).get("delay", 0) * unit)
    panes, dropped = set(), set()
    number, end_batch = 0, None
    arrival = itertools.count()  # rows are (id, ts, arrival number), as in tests/test_triggers.py
    for batch in batches:
        start = tracker.current
        if batch.kind == "end":
            tracker.end_of_input()
        watermark = tracker.current
        if "session" in case["window"]:
            gap = case["window"]["session"] * unit
            groups, lost = windows.assign_sessions([(k, (i, ts, next(arrival)), ts) for k, i, ts in batch.rows], gap,
                                                   watermark, batch.clock)
        else:
            groups, lost = {}, []
            for key, rid, ts in batch.rows:
                groups.setdefault((key, *assign(case, ts, unit)), []).append((rid, ts, next(arrival)))
        got, drops, expired = [], {(d.row[0], d.reason) for d in lost}, False
        for (key, start_us, end_us), outcome in windows.process(groups, watermark, batch.clock):
            drops |= {(d.row[0], d.reason) for d in outcome.dropped}
            expired = expired or outcome.expired
            if outcome.pane is not None:
                p = outcome.pane
                window = "global" if (start_us, end_us) == GLOBAL_WINDOW else (seconds(start_us, unit),
                                                                                seconds(end_us, unit))
                got.append((key, window, p.index, p.timing.value, p.is_final, tuple(sorted(r[0] for r in p.rows))))
        if batch.kind != "end":
            tracker.after_batch(ts for *_, ts in batch.rows)
        where = f"{case['name']}: micro-batch {number} (step {batch.step})"
        if batch.step is None:
            if got or drops:
                raise Excluded(WHY_FIRE)
        else:
            step = case["steps"][batch.step]
            assert set(got) == corpus_panes(case, step, got), where
            assert drops == {(str(k), v) for k, v in (step.get("dropped") or {}).items()}, where
        if batch.rows or got or expired or tracker.current > start:  # the operator's "did something"
            panes |= {(*g, number) for g in got}
            dropped |= {(*d, number) for d in drops}
            end_batch = number if batch.kind == "end" else end_batch
            number += 1
    return Expected(panes, dropped, end_batch)


def plan(case: dict, executor: str) -> tuple[list[Batch], Expected]:
    batches = spark_batches(case, executor)
    return batches, expected(case, batches)


def runnable(executor: str) -> tuple[list[str], dict[str, str]]:
    names, excluded = [], {}
    for case in CASES:
        if "error" in case:
            continue
        try:
            plan(case, executor)
            names.append(case["name"])
        except Excluded as why:
            excluded[case["name"]] = str(why)
    return names, excluded


REPLAY_CASES = runnable("replay")[0]


def test_runnable_cases():
    """Every case runs on replay and streaming but those listed in EXCLUDED, for the reason given there."""
    for executor in ("replay", "streaming"):
        names, excluded = runnable(executor)
        assert excluded == EXCLUDED[executor], executor
        assert len(names) + len(excluded) == len([c for c in CASES if "error" not in c])
    assert set(STREAMING_SUBSET) <= set(runnable("streaming")[0])


def test_evict_cases_list_rows_in_arrival_order():
    """A live stream orders a micro-batch's rows by (ts, key, id), replay by id: an evict case's batches are
    listed in an order that is both, so all three executors see the same arrival order."""
    for case in CASES:
        if case.get("evict"):
            for step in case["steps"]:
                rows = [parse_row(r, 1) for r in step.get("batch") or []]
                assert rows == sorted(rows, key=lambda r: (r[2], r[0], r[1])) == sorted(rows, key=lambda r: r[1]), \
                    case["name"]


# --- running a case on Spark -----------------------------------------------------------------------

def interval(n: int, case: dict) -> str:
    return f"INTERVAL '{n}' {normalize_unit(case.get('time_unit', 'SECOND'))}"


def case_query(case: dict, source: str, late: str) -> str:
    """The corpus header's query over ``source``, with LATE ROWS TO ``late``."""
    window = case["window"]
    if window == "global":
        head = f"SELECT key, collect_list(id) AS ids FROM {source} GROUP BY key"
    else:
        if "session" in window:
            tvf = f"SESSION(TABLE {source} PARTITION BY key, DESCRIPTOR(ts), {interval(window['session'], case)})"
        else:
            offset = f", {interval(window['offset'], case)}" if window.get("offset") else ""
            tvf = f"TUMBLE(TABLE {source}, DESCRIPTOR(ts), {interval(window['tumble'], case)}{offset})"
        head = (f"SELECT key, window_start, window_end, collect_list(id) AS ids FROM {tvf} "
                "GROUP BY key, window_start, window_end")
    clauses = [f"ALLOWED LATENESS {interval(case['lateness'], case)}"] if case.get("lateness") else []
    clauses.append(f"LATE ROWS TO {late}")
    if case.get("evict"):
        clauses.append(f"EVICT {case['evict']}")
    if case.get("trigger"):
        clauses.append(f"EMIT WITH TRIGGER {case['trigger']} {case.get('mode', '')}".rstrip())
    elif case.get("emit"):
        clauses.append(f"EMIT {case['emit']}")
    return f"{head} {' '.join(clauses)}"


def delay_sql(case: dict) -> str:
    return interval(case.get("watermark", {}).get("delay", 0), case)


def ts_of(micros: int) -> dt.datetime:
    return EPOCH + dt.timedelta(microseconds=micros)


def panes_of(df, case: dict) -> set[tuple]:
    unit = unit_of(case)
    out = set()
    for r in df.collect():
        if case["window"] == "global":
            window = "global"
        else:
            window = tuple(int((t - EPOCH).total_seconds() * 1_000_000) // unit for t in (r.window_start, r.window_end))
        out.add((r.key, window, r.pane_index, r.pane_timing, r.is_final, tuple(sorted(r.ids)), r.micro_batch))
    return out


def dropped_of(df) -> set[tuple]:
    return {(r.id, r.reason, r.micro_batch) for r in df.collect()}


REPLAYED: dict[str, tuple[set, set]] = {}


def run_replay(spark, case: dict, batches: list[Batch]) -> tuple[set, set]:
    """Replay the case: one table row per input row, numbered by its micro-batch, clocked by its processing time."""
    if case["name"] in REPLAYED:
        return REPLAYED[case["name"]]
    tag = case["name"]
    data = [(k, i, ts_of(ts), n, ts_of(b.clock)) for n, b in enumerate(x for x in batches if x.kind == "rows")
            for k, i, ts in b.rows]
    spark.createDataFrame(data, "key string, id string, ts timestamp, batch int, clock timestamp") \
        .createOrReplaceTempView(f"t_{tag}")
    sqlwin.sql(spark, f"CREATE STREAM r_{tag} FROM TABLE t_{tag} ARRIVAL ORDER BY batch, id MICRO BATCH BY batch "
                      f"PROCESSING TIME BY clock WATERMARK FOR ts AS ts - {delay_sql(case)}")
    out = sqlwin.sql(spark, case_query(case, f"r_{tag}", f"late_{tag}"))
    REPLAYED[tag] = (panes_of(out, case), dropped_of(spark.table(f"late_{tag}")))
    return REPLAYED[tag]


def run_streaming(spark, case: dict, batches: list[Batch], folder: Path) -> tuple[set, set]:
    """A streaming table over a JSON stream, one file per micro-batch with rows (an empty one for an empty step);
    Spark runs the no-data micro-batches itself; the end of input does not exist in a stream."""
    tag = case["name"]
    feeder = Feeder(folder / "in")
    sqlwin.sql(spark, f"CREATE STREAM s_{tag} (key STRING, id STRING, ts TIMESTAMP, WATERMARK FOR ts AS ts - "
                      f"{delay_sql(case)}) USING json OPTIONS (path '{feeder.folder}')")
    table, clock = start_clocked(spark, f"CREATE STREAMING TABLE o_{tag} AS "
                                        f"{case_query(case, f's_{tag}', f'sl_{tag}')}")
    try:
        assert table.path == "custom"
        for batch in batches:
            if batch.kind in ("rows", "empty"):
                clock.now = batch.clock
                feeder.write({"key": k, "id": i, "ts": ts_of(ts).isoformat(sep=" ")} for k, i, ts in batch.rows)
                table.process_all_available()
        return panes_of(spark.table(f"o_{tag}"), case), dropped_of(spark.table(f"sl_{tag}"))
    finally:
        table.stop()
        catalog.remove_table(table.name)


@pytest.fixture(autouse=True)
def streaming_dir(tmp_path, monkeypatch):
    """Replay and streaming tables keep their state under a folder of this test's own."""
    monkeypatch.setenv("SQLWIN_STREAMING_DIR", str(tmp_path / "root"))


@pytest.mark.slow
@pytest.mark.parametrize("name", REPLAY_CASES)
def test_replay_matches_corpus(spark, name):
    case = BY_NAME[name]
    batches, want = plan(case, "replay")
    panes, dropped = run_replay(spark, case, batches)
    assert panes == want.panes
    assert dropped == want.dropped


@pytest.mark.slow
@pytest.mark.parametrize("name", STREAMING_SUBSET)
def test_streaming_matches_corpus_and_replay(spark, name, tmp_path):
    case = BY_NAME[name]
    batches, want = plan(case, "streaming")
    panes, dropped = run_streaming(spark, case, batches, tmp_path)
    live = {p for p in want.panes if p[-1] != want.end_batch}
    live_dropped = {d for d in want.dropped if d[-1] != want.end_batch}
    assert panes == live
    assert dropped == live_dropped
    if name in REPLAY_CASES:
        # identical to replay, micro_batch included, but for what the end of input fires: replay gives exactly
        # its expected panes and drops (test_replay_matches_corpus), so comparing the two expectations here
        # checks the streaming table against replay without replaying the case a second time
        replayed = plan(case, "replay")[1]
        assert live == {p for p in replayed.panes if p[-1] != replayed.end_batch}
        assert live_dropped == {d for d in replayed.dropped if d[-1] != replayed.end_batch}


ERROR_CASES = [c["name"] for c in CASES if "error" in c]


@pytest.mark.slow
@pytest.mark.parametrize("name", ERROR_CASES)
def test_replay_refuses(spark, name):
    """The corpus's queries that must fail fail on replay too, before anything runs."""
    case = BY_NAME[name]
    spark.createDataFrame([("k", "a", EPOCH, 0)], "key string, id string, ts timestamp, batch int") \
        .createOrReplaceTempView(f"t_{name}")
    sqlwin.sql(spark, f"CREATE STREAM r_{name} FROM TABLE t_{name} ARRIVAL ORDER BY batch MICRO BATCH BY batch "
                      "WATERMARK FOR ts AS ts")
    with pytest.raises(SqlwinError, match=case["error"]):
        sqlwin.sql(spark, case_query(case, f"r_{name}", f"late_{name}"))


def test_spark_batches_follow_the_watermark():
    """The no-data micro-batch after a move is the corpus's empty step, or added; replay refuses other empty steps."""
    case = BY_NAME["default_trigger_no_lateness"]
    kinds = [(b.kind, b.step) for b in spark_batches(case, "replay")]
    assert kinds == [("rows", 0), ("no-data", None), ("rows", 1), ("no-data", 2), ("rows", 3), ("end", 4)]
    with pytest.raises(Excluded, match="empty step"):
        spark_batches(BY_NAME["every_interval"], "replay")
    streamed = [(b.kind, b.step) for b in spark_batches(BY_NAME["every_interval"], "streaming")]
    assert streamed[:6] == [("rows", 0), ("no-data", None), ("rows", 1), ("no-data", None), ("empty", 2),
                            ("empty", 3)]

