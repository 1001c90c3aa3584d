"""The trigger engine (sqlwin.core.triggers, sqlwin.core.panes): transcripts, state machines, properties."""

from __future__ import annotations

import itertools
import json
from collections.abc import Callable
from pathlib import Path

import duckdb
import pytest
import sqlglot
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from sqlwin.core import triggers as tm
from sqlwin.core.panes import (
    DROP_CLOSED,
    DROP_LATE,
    GLOBAL_WINDOW,
    MAX_TIME,
    MIN_TIME,
    Evictor,
    PaneDriver,
    WatermarkTracker,
    WindowPanes,
    WindowState,
    cleanup_time,
)
from sqlwin.core.timeunits import UNIT_MICROS, normalize_unit, window_start
from sqlwin.dialect import parse_one
from sqlwin.errors import SqlwinError
from sqlwin.plan import triggers as plan
from sqlwin.planner.clauses import plan_emit, plan_evict, plan_lateness

CORPUS = Path(__file__).parent / "fixtures" / "trigger_transcripts.yaml"
CASES = yaml.safe_load(CORPUS.read_text())["cases"]
ON_TIME, EARLY, LATE = plan.PaneTiming.ON_TIME, plan.PaneTiming.EARLY, plan.PaneTiming.LATE


# --- the transcript runner --------------------------------------------------------------------------

def build_driver(case: dict, unit: int) -> PaneDriver:
    """Plan the case's clauses from SQL text, as a user's query would be planned."""
    clauses = []
    if case.get("lateness"):
        clauses.append(f"ALLOWED LATENESS INTERVAL '{case['lateness'] * unit}' MICROSECOND")
    if case.get("evict"):
        clauses.append(f"EVICT {case['evict']}")
    if case.get("trigger"):
        clauses.append(f"EMIT WITH TRIGGER {case['trigger']} {case.get('mode', '')}")
    elif case.get("emit"):
        clauses.append(f"EMIT {case['emit']}")
    select = parse_one("SELECT k, COUNT(*) FROM t GROUP BY k " + " ".join(clauses))
    evict = plan_evict(select.args.get("evict"))
    evictor = None
    if evict is not None:  # rows are (id, ts micros, arrival number)
        delta, threshold = duckdb_delta(evict.evictor) if isinstance(evict.evictor, plan.DeltaEvictor) else (None, None)
        evictor = Evictor(evict, row_time=lambda row: row[1], arrival=lambda row: row[2], delta=delta,
                          threshold=threshold)
    return PaneDriver(plan_emit(select.args.get("emit")), plan_lateness(select),
                      global_window=case["window"] == "global", evictor=evictor)


def duckdb_delta(evictor: plan.DeltaEvictor) -> tuple[Callable, float]:
    """``DELTA(expr) < threshold`` over a corpus row (``id``, ``ts``): ``|expr(row) - expr(last row)|``, with
    ``expr`` and the threshold evaluated by DuckDB (translated from Spark SQL), not by sqlwin."""
    con = duckdb.connect()
    con.execute("SET TimeZone = 'UTC'")
    expr = sqlglot.transpile(evictor.expr.sql("spark"), read="spark", write="duckdb")[0]
    threshold_sql = sqlglot.transpile(evictor.threshold.sql("spark"), read="spark", write="duckdb")[0]
    threshold = con.execute(f"SELECT CAST(({threshold_sql}) AS DOUBLE)").fetchone()[0]
    values: dict[tuple, float | None] = {}

    def value(row: tuple) -> float | None:
        row = tuple(row)  # rows come back from the JSON round trip of the window state as lists
        if row not in values:
            values[row] = con.execute(f"SELECT CAST(({expr}) AS DOUBLE) FROM (SELECT ?::VARCHAR AS id, "
                                      "make_timestamp(?::BIGINT) AS ts) AS t", [row[0], row[1]]).fetchone()[0]
        return values[row]

    def delta(row: tuple, last: tuple) -> float | None:
        a, b = value(row), value(last)
        return None if a is None or b is None else abs(a - b)

    return delta, threshold


def parse_row(row, unit: int) -> tuple[str, str, int]:
    """``"key:id@ts"`` / ``"id@ts"`` / ``{id, ts, key}`` -> (key, id, ts micros)."""
    if isinstance(row, dict):
        return str(row.get("key", "k")), str(row["id"]), row["ts"] * unit
    key, _, rest = row.rpartition(":")
    rid, _, ts = rest.partition("@")
    return key or "k", rid, int(ts) * unit


def assign(case: dict, ts: int, unit: int) -> tuple[int, int]:
    if case["window"] == "global":
        return GLOBAL_WINDOW
    size = case["window"]["tumble"] * unit
    start = window_start(ts, size, case["window"].get("offset", 0) * unit)
    return start, start + size


def roundtrip(state: WindowState) -> WindowState:
    """What a Spark operator does between batches: store the state as JSON and read it back."""
    data = json.loads(json.dumps(state.to_dict()))
    return WindowState.from_dict(data)


def run_transcript(case: dict) -> None:
    unit = UNIT_MICROS[normalize_unit(case.get("time_unit", "SECOND"))]
    driver = build_driver(case, unit)
    explicit = case.get("watermark") == "explicit"
    tracker = WatermarkTracker(0 if explicit else case.get("watermark", {}).get("delay", 0) * unit)
    windows = WindowPanes(driver)
    proc = 0
    seen, emitted, dropped_all = [], [], []
    arrival = itertools.count()

    def show_window(key_window):
        start, end = key_window[1:]
        return "global" if (start, end) == GLOBAL_WINDOW else [start // unit, end // unit]

    for number, step in enumerate(case["steps"]):
        where = f"{case['name']} step {number}"
        if step.get("end_of_input"):
            assert not step.get("batch") and number == len(case["steps"]) - 1, where
            tracker.end_of_input()
        watermark = tracker.current
        proc = step.get("processing_time", proc // unit) * unit
        rows = [parse_row(r, unit) for r in step.get("batch") or []]
        numbered = [(key, (rid, ts, next(arrival))) for key, rid, ts in rows]
        groups: dict[tuple, list] = {}
        panes, dropped = [], {}
        if "session" in case["window"]:
            gap = case["window"]["session"] * unit
            groups, lost = windows.assign_sessions([(k, r, r[1]) for k, r in numbered], gap, watermark, proc)
            dropped.update((d.row[0], d.reason) for d in lost)
        else:
            for key, r in numbered:
                groups.setdefault((key, *assign(case, r[1], unit)), []).append(r)
        for kw, outcome in windows.process(groups, watermark, proc):
            for d in outcome.dropped:
                dropped[d.row[0]] = d.reason
            if outcome.pane is not None:
                p = outcome.pane
                emitted.extend(r[0] for r in p.new_rows)
                panes.append({"key": kw[0], "window": show_window(kw), "index": p.index, "timing": p.timing.value,
                              "final": p.is_final, "rows": sorted(r[0] for r in p.rows)})
        windows.states = {kw: roundtrip(state) for kw, state in windows.states.items()}
        seen.extend(r[1] for r in rows)
        dropped_all.extend(dropped)
        expected = []
        for e in step.get("expect") or []:
            e = {"key": "k", **e}
            if "count" in e:
                match = [p for p in panes if p["key"] == e["key"] and p["window"] == e["window"]]
                assert match and len(match[0]["rows"]) == e["count"], where
                e = {**{k: v for k, v in e.items() if k != "count"}, "rows": match[0]["rows"]}
            expected.append({**e, "rows": sorted(str(r) for r in e["rows"])})
        key_of = lambda p: (p["key"], str(p["window"]))  # noqa: E731
        assert sorted(panes, key=key_of) == sorted(expected, key=key_of), where
        assert dropped == {str(k): v for k, v in (step.get("dropped") or {}).items()}, where
        if not step.get("end_of_input"):
            if explicit:
                if "watermark_after" in step:
                    tracker.advance_to(step["watermark_after"] * unit)
            else:
                tracker.after_batch(ts for _, _, ts in rows)
                if "watermark_after" in step:
                    assert tracker.current == step["watermark_after"] * unit, f"{where}: watermark"
    if case["steps"][-1].get("end_of_input"):
        assert not windows.states, f"{case['name']}: windows left open after the end of input"
        assert sorted(emitted + dropped_all) == sorted(seen), f"{case['name']}: a row disappeared"


@pytest.mark.parametrize("case", CASES, ids=[c["name"] for c in CASES])
def test_transcript(case):
    if "error" in case:
        with pytest.raises(SqlwinError, match=case["error"]):
            build_driver(case, UNIT_MICROS["SECOND"])
        return
    run_transcript(case)


def test_corpus_covers_every_trigger_kind():
    text = CORPUS.read_text()
    for word in ("AFTER WATERMARK", "AFTER PROCESSING TIME", "AFTER COUNT", "AFTER ANY", "AFTER ALL", "AFTER EACH",
                 "REPEATEDLY", "UNTIL", "NEVER", "EVERY", "ALIGNED TO", "emit: FINAL", "emit: CHANGES",
                 "DISCARDING", "end_of_input", "error:"):
        assert word in text, word


# --- state machines one by one ----------------------------------------------------------------------

def ctx(state=None, end=10, watermark=MIN_TIME, proc=0, new_rows=0) -> tm.TriggerContext:
    return tm.TriggerContext(state or tm.TriggerState(), end, watermark, proc, new_rows)


def feed(machine, c, n=1):
    c.new_rows = n
    machine.on_element(c)


def test_after_count():
    m = tm.build_machine(plan.AfterCount(2))
    c = ctx()
    feed(m, c)
    assert not m.should_fire(c)
    feed(m, c)
    assert m.should_fire(c)
    assert m.on_fire(c) is True and m.is_finished(c)
    m.clear(c)
    assert not m.is_finished(c) and not m.should_fire(c)


def test_after_processing_time_delay_and_alignment():
    m = tm.build_machine(plan.AfterProcessingTime(delay=5, align_to=10, align_offset=3))
    c = ctx(proc=4)
    feed(m, c)
    assert c.state.nodes[""]["fire_at"] == 13  # 4 + 5 = 9, rounded up to 13 on the grid 3, 13, 23
    assert m.timers(c) == (None, 13)
    c.processing_time = 12
    feed(m, c)  # a later row does not move the timer
    assert not m.should_fire(c)
    c.processing_time = 13
    assert m.should_fire(c) and m.on_fire(c)


@pytest.mark.parametrize(("instant", "period", "offset", "expected"),
                         [(0, 10, 0, 0), (1, 10, 0, 10), (10, 10, 0, 10), (-1, 10, 0, 0), (4, 10, 3, 13),
                          (3, 10, 3, 3)])
def test_align_up(instant, period, offset, expected):
    assert tm.align_up(instant, period, offset) == expected


def test_after_watermark_early_on_time_late():
    m = tm.build_machine(plan.AfterWatermark(early=plan.AfterCount(2), late=plan.AfterCount(1)))
    c = ctx(end=10, watermark=0)
    feed(m, c, 2)
    assert m.should_fire(c)
    assert m.on_fire(c) is False  # early firings repeat
    assert not m.should_fire(c)
    assert m.timers(c) == (10, None)
    c.watermark = 10
    assert m.should_fire(c)  # end of window, no new rows needed
    assert m.on_fire(c) is False
    assert c.state.nodes[""]["late"] == 1 and m.timers(c) == (None, None)
    assert not m.should_fire(c)
    feed(m, c)
    assert m.should_fire(c) and m.on_fire(c) is False


def test_after_watermark_alone_finishes():
    m = tm.build_machine(plan.AfterWatermark())
    c = ctx(end=10, watermark=9)
    feed(m, c)
    assert not m.should_fire(c)
    c.watermark = 10
    assert m.should_fire(c) and m.on_fire(c) is True


def test_repeatedly_resets_child():
    m = tm.build_machine(plan.Repeatedly(plan.AfterCount(2)))
    c = ctx()
    feed(m, c, 3)
    assert m.should_fire(c) and m.on_fire(c) is False
    assert not m.should_fire(c) and not c.state.finished
    feed(m, c, 2)
    assert m.should_fire(c)


def test_after_any_clears_the_child_that_did_not_fire():
    m = tm.build_machine(plan.Repeatedly(plan.AfterAny((plan.AfterCount(2), plan.AfterCount(3)))))
    c = ctx()
    feed(m, c, 2)
    m.on_fire(c)
    feed(m, c, 1)
    assert not m.should_fire(c)  # the 3-counter restarted with the pane


def test_after_all_and_after_each():
    every = tm.build_machine(plan.AfterAll((plan.AfterCount(1), plan.AfterCount(3))))
    c = ctx()
    feed(every, c, 2)
    assert not every.should_fire(c)
    feed(every, c, 1)
    assert every.should_fire(c) and every.on_fire(c) is True
    seq = tm.build_machine(plan.AfterEach((plan.AfterCount(1), plan.AfterCount(2))))
    c = ctx()
    feed(seq, c, 5)
    assert seq.on_fire(c) is False
    feed(seq, c, 1)  # the second step counts from zero
    assert not seq.should_fire(c)
    feed(seq, c, 1)
    assert seq.should_fire(c) and seq.on_fire(c) is True


def test_or_finally_and_never():
    m = tm.build_machine(plan.OrFinally(plan.Repeatedly(plan.AfterCount(1)), plan.AfterCount(3)))
    c = ctx()
    for _ in range(2):
        feed(m, c)
        assert m.should_fire(c) and m.on_fire(c) is False
    feed(m, c)
    assert m.on_fire(c) is True
    never = tm.build_machine(plan.Never())
    c = ctx(watermark=MAX_TIME, proc=MAX_TIME)
    feed(never, c, 100)
    assert not never.should_fire(c) and never.timers(c) == (None, None)


def test_build_machine_rejects_unknown():
    with pytest.raises(TypeError):
        tm.build_machine("AFTER COUNT 1")  # type: ignore[arg-type]
    with pytest.raises(ValueError):
        tm.build_machine(plan.AfterAny(()))


def test_session_merge_adds_counts_and_keeps_earliest_timer():
    driver = PaneDriver(plan.EmitSpec(plan.AfterAny((plan.AfterCount(3), plan.AfterProcessingTime(delay=10))),
                                      plan.AccumulationMode.DISCARDING, True))
    a, b = driver.new_window(0, 10), driver.new_window(5, 15)
    driver.process(a, ["x"], MIN_TIME, 100)
    driver.process(b, ["y"], MIN_TIME, 95)
    merged, dropped = driver.merge([a, b], 0, 15, MIN_TIME, 100)
    assert not dropped and merged.trigger.nodes["/0"]["count"] == 2 and driver.timers(merged).processing_time == 105
    outcome = driver.process(merged, ["z"], MIN_TIME, 100)
    assert outcome.pane is not None and sorted(outcome.pane.rows) == ["x", "y", "z"]


def test_merge_into_a_closed_window_drops_the_others_rows():
    driver = PaneDriver(plan.EmitSpec(plan.AfterCount(1)))
    a, b = driver.new_window(0, 10), driver.new_window(5, 15)
    assert driver.process(a, ["x"], MIN_TIME, 0).pane.is_final
    driver.process(b, [], MIN_TIME, 0)
    b.pending.append("y")  # as if b had an unemitted row
    merged, dropped = driver.merge([a, b], 0, 15, MIN_TIME, 0)
    assert merged.closed and [(d.row, d.reason) for d in dropped] == [("y", DROP_CLOSED)]


def test_after_watermark_merge_reopens_early_phase():
    driver = PaneDriver(plan.EmitSpec(plan.AfterWatermark(early=plan.AfterCount(5), late=plan.AfterCount(1))),
                        lateness=100)
    a = driver.new_window(0, 10)
    driver.process(a, ["x"], MIN_TIME, 0)
    assert driver.process(a, [], 10, 0).pane.timing is ON_TIME
    b = driver.new_window(8, 20)
    driver.process(b, ["y"], 10, 0)
    merged, _ = driver.merge([a, b], 0, 20, 10, 0)  # the watermark (10) is before the merged end (20)
    assert not merged.trigger.nodes.get("", {}).get("late")
    assert driver.timers(merged).event_time == 20


# --- the pane driver --------------------------------------------------------------------------------

def test_cleanup_time_is_end_plus_lateness_and_infinite_for_global():
    assert cleanup_time(10, 5) == 15
    assert cleanup_time(MAX_TIME, 0) == MAX_TIME
    assert cleanup_time(MAX_TIME - 3, 10) == MAX_TIME
    assert PaneDriver(lateness=plan.LatenessSpec(7)).cleanup_time(WindowState(0, 10)) == 17


def test_negative_lateness_is_rejected():
    with pytest.raises(SqlwinError):
        PaneDriver(lateness=-1)


def test_timers_for_an_operator():
    driver = PaneDriver(plan.EmitSpec(plan.AfterWatermark(early=plan.AfterProcessingTime(delay=30))), lateness=5)
    state = driver.new_window(0, 10)
    assert driver.timers(state).event_time == 10
    driver.process(state, ["a"], 0, 100)
    assert driver.timers(state) == type(driver.timers(state))(10, 130)
    driver.process(state, [], 10, 100)  # ON_TIME, and AFTER WATERMARK alone finishes: closed
    assert state.closed and driver.timers(state) == type(driver.timers(state))(15, None)
    assert driver.process(state, [], 15, 100).expired
    assert driver.timers(state).event_time is None


def test_a_processing_time_timer_goes_off_once():
    """``AFTER ALL (AFTER COUNT 2, AFTER PROCESSING TIME DELAY 30)``: the timer's time comes before the second
    row; the window is looked at then (nothing fires), and no longer reports the timer (else every micro-batch
    would ask for another until a row came), yet the delay stays satisfied: the second row fires it."""
    driver = PaneDriver(plan.EmitSpec(plan.Repeatedly(plan.AfterAll((plan.AfterCount(2),
                                                                     plan.AfterProcessingTime(delay=30))))))
    state = driver.new_window(0, 10)
    driver.process(state, ["a"], 0, 100)
    assert driver.timers(state).processing_time == 130
    assert driver.process(state, [], 0, 130).pane is None
    assert driver.timers(state).processing_time is None
    assert driver.process(state, [], 0, 200).pane is None  # (a call without a due timer: nothing)
    assert driver.process(state, ["b"], 0, 201).pane.rows == ("a", "b")
    driver.process(state, ["c"], 0, 202)  # the next pane's timer: 30 after its first row
    assert driver.timers(state).processing_time == 232


def test_state_round_trip_is_plain_json():
    driver = PaneDriver(plan.emit_changes(), lateness=10)
    state = driver.new_window(0, 10)
    driver.process(state, [["a", 1], ["b", 2]], 0, 0)
    data = state.to_dict()
    assert json.loads(json.dumps(data)) == data
    back = WindowState.from_dict(json.loads(json.dumps(data)))
    assert back.to_dict() == data
    assert tm.TriggerState.from_dict(state.trigger.to_dict()) == state.trigger


def test_empty_call_without_due_timer_is_a_no_op():
    driver = PaneDriver(plan.EmitSpec(plan.Repeatedly(plan.AfterCount(2))))
    state = driver.new_window(0, 10)
    driver.process(state, ["a"], 0, 0)
    before = state.to_dict()
    assert driver.process(state, [], 0, 0).pane is None and state.to_dict() == before


def test_delta_and_time_evictors():
    keep_recent = Evictor(plan.EvictSpec(plan.KeepLastInterval(5), before=True), row_time=lambda r: r)
    assert keep_recent.keep([1, 7, 3, 10]) == [False, True, False, True]
    delta = Evictor(plan.EvictSpec(plan.DeltaEvictor(None, None)), delta=lambda r, last: abs(last - r), threshold=3)
    assert delta.keep([1, 9, 8, 10]) == [False, True, True, True]
    with pytest.raises(ValueError):
        Evictor(plan.EvictSpec(plan.KeepLastInterval(5)))


def test_evictors_sort_by_arrival_and_evict_null_values():
    """Contents are evicted in arrival order (``arrival``); a row whose time or DELTA value is NULL is evicted."""
    keep_recent = Evictor(plan.EvictSpec(plan.KeepLastInterval(5)), row_time=lambda r: r[1], arrival=lambda r: r[0])
    assert keep_recent.split([(2, 10), (1, None), (0, 3), (3, 6)]) == ([(2, 10), (3, 6)], [(0, 3), (1, None)])
    assert keep_recent.split([(0, None)]) == ([], [(0, None)])
    last_two = Evictor(plan.EvictSpec(plan.KeepLastRows(2)), arrival=lambda r: r[0])
    assert last_two.split([(2, "c"), (0, "a"), (1, "b")]) == ([(1, "b"), (2, "c")], [(0, "a")])
    delta = Evictor(plan.EvictSpec(plan.DeltaEvictor(None, None)), arrival=lambda r: r[0], threshold=3,
                    delta=lambda r, last: None if r[1] is None or last[1] is None else abs(last[1] - r[1]))
    assert delta.split([(1, None), (0, 4), (2, 5)]) == ([(0, 4), (2, 5)], [(1, None)])
    assert delta.split([(0, 4), (1, None)]) == ([], [(0, 4), (1, None)])  # the last row's value is NULL


def test_evict_before_everything_fires_an_empty_pane_and_keeps_nothing():
    driver = PaneDriver(plan.EmitSpec(plan.Repeatedly(plan.AfterCount(2))),
                        evictor=Evictor(plan.EvictSpec(plan.KeepLastInterval(1)), row_time=lambda r: None))
    state = driver.new_window(*GLOBAL_WINDOW)
    pane = driver.process(state, ["a", "b"], MIN_TIME, 0).pane
    assert (pane.rows, pane.new_rows, pane.evicted) == ((), ("a", "b"), ("a", "b")) and state.emitted == []


def test_evict_after_aggregates_first():
    driver = PaneDriver(plan.EmitSpec(plan.Repeatedly(plan.AfterCount(2))),
                        evictor=Evictor(plan.EvictSpec(plan.KeepLastRows(1), before=False)))
    state = driver.new_window(*GLOBAL_WINDOW)
    first = driver.process(state, ["a", "b"], MIN_TIME, 0).pane
    assert first.rows == ("a", "b") and first.evicted == ("a",)
    second = driver.process(state, ["c", "d"], MIN_TIME, 0).pane
    assert second.rows == ("b", "c", "d") and second.evicted == ("b", "c")


def test_watermark_idle_timeout():
    """GRAMMAR 3: idle after d without rows; then W = max(W, max_ts + (p - p_last) - delay)."""
    w = WatermarkTracker(delay=2, idle_timeout=10)
    assert w.after_batch([20], processing_time=5) == 18
    assert w.after_batch([], processing_time=14) == 18  # not idle yet (9 < 10)
    assert w.after_batch([], processing_time=15) == 28  # idle: 20 + (15 - 5) - 2
    assert w.after_batch([], processing_time=35) == 48  # keeps pace with the clock
    assert w.after_batch([21], processing_time=36) == 48  # a row ends idleness; W never goes back
    assert w.after_batch([], processing_time=40) == 48
    # a window ending at e closes max(d, e - max_ts + delay) after the last row
    w2 = WatermarkTracker(delay=2, idle_timeout=10)
    w2.after_batch([20], processing_time=0)
    assert w2.wake_time(25) == 10  # e - max_ts + delay = 7 < d
    assert w2.wake_time(50) == 32
    assert w2.advance_idle(32) == 50


def test_watermark_tracker():
    w = WatermarkTracker(delay=5)
    assert w.current == MIN_TIME
    assert w.after_batch([3, 12, None]) == 7
    assert w.after_batch([1]) == 7
    assert w.after_batch([]) == 7
    assert w.advance_to(2) == 7
    assert w.end_of_input() == MAX_TIME


# --- properties ---------------------------------------------------------------------------------------

def trigger_trees(watermark: bool) -> st.SearchStrategy:
    leaves = [st.builds(plan.AfterCount, st.integers(1, 4)),
              st.builds(plan.AfterProcessingTime, st.integers(0, 20),
                        st.one_of(st.none(), st.integers(1, 15)), st.integers(0, 5)),
              st.just(plan.Never())]
    if watermark:
        leaves.append(st.just(plan.AfterWatermark()))

    def extend(children):
        options = [st.builds(plan.Repeatedly, children),
                   st.builds(plan.OrFinally, children, children),
                   *(st.builds(kind, st.lists(children, min_size=1, max_size=3).map(tuple))
                     for kind in (plan.AfterAny, plan.AfterAll, plan.AfterEach))]
        if watermark:
            optional = st.one_of(st.none(), children)
            options.append(st.builds(plan.AfterWatermark, optional, optional))
        return st.one_of(options)

    return st.recursive(st.one_of(leaves), extend, max_leaves=5)


@st.composite
def scenarios(draw):
    kind = draw(st.sampled_from(["tumble", "session", "global"]))
    trigger = draw(trigger_trees(watermark=kind != "global"))
    mode = draw(st.sampled_from(list(plan.AccumulationMode)))
    lateness = draw(st.sampled_from([0, 5, 20]))
    delay = draw(st.sampled_from([0, 3, 10]))
    batches = draw(st.lists(st.lists(st.tuples(st.sampled_from("kl"), st.integers(0, 60)), max_size=4), max_size=10))
    proc_steps = draw(st.lists(st.integers(0, 8), min_size=len(batches), max_size=len(batches)))
    return kind, trigger, mode, lateness, delay, batches, proc_steps


def simulate(kind, trigger, mode, lateness, delay, batches, proc_steps, *, serialize=False, idle_calls=False):
    """A miniature operator over TUMBLE(10), SESSION(gap 6) or the global window: returns
    {(key, window): [pane, ...]}, the dropped rows, the number of rows and the states left."""
    driver = PaneDriver(plan.EmitSpec(trigger, mode, True), lateness, global_window=kind == "global")
    windows = WindowPanes(driver)
    tracker = WatermarkTracker(delay)
    panes: dict[tuple, list] = {}
    dropped: dict[int, str] = {}
    proc, next_id = 0, 0
    for batch, step in [*zip(batches, proc_steps, strict=True), (None, 0)]:
        watermark = tracker.end_of_input() if batch is None else tracker.current
        proc += step
        rows = [(key, [next_id + i, ts], ts) for i, (key, ts) in enumerate(batch or [])]
        next_id += len(rows)
        groups: dict[tuple, list] = {}
        if kind == "session":
            groups, lost = windows.assign_sessions(rows, 6, watermark, proc)
            for d in lost:
                assert d.row[0] not in dropped
                dropped[d.row[0]] = d.reason
        for key, row, ts in rows if kind != "session" else ():
            start, stop = GLOBAL_WINDOW if kind == "global" else (ts - ts % 10, ts - ts % 10 + 10)
            groups.setdefault((key, start, stop), []).append(row)
        for kw, outcome in windows.process(groups, watermark, proc):
            for d in outcome.dropped:
                assert d.row[0] not in dropped
                dropped[d.row[0]] = d.reason
            if outcome.pane is not None:
                panes.setdefault(kw, []).append(outcome.pane)
        for state in windows.states.values() if idle_calls else ():
            # a second call in the same batch emits nothing and changes no later pane
            assert windows.driver.process(state, [], watermark, proc).pane is None
        if serialize:
            windows.states = {kw: WindowState.from_dict(json.loads(json.dumps(s.to_dict())))
                              for kw, s in windows.states.items()}
        if batch is not None:
            tracker.after_batch(ts for key, ts in batch)
    return panes, dropped, next_id, windows.states


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(scenarios())
def test_no_row_disappears_and_panes_are_well_formed(scenario):
    panes, dropped, n_rows, states = simulate(*scenario)
    kind, mode = scenario[0], scenario[2]
    assert not states  # every window expired at the end of input
    in_panes = [r[0] for ps in panes.values() for p in ps for r in p.new_rows]
    assert len(in_panes) == len(set(in_panes))  # each row is new in exactly one pane
    assert set(in_panes).isdisjoint(dropped)  # never both dropped and in a pane
    assert sorted([*in_panes, *dropped]) == list(range(n_rows))  # nothing disappears
    assert set(dropped.values()) <= {DROP_LATE, DROP_CLOSED}
    for ps in panes.values() if kind != "session" else ():  # sessions: panes move to the merged window
        assert [p.index for p in ps] == list(range(len(ps)))
        assert [p.is_final for p in ps[:-1]] == [False] * (len(ps) - 1)  # only the last pane may be final
        order = {EARLY: 0, ON_TIME: 1, LATE: 2}
        timings = [order[p.timing] for p in ps]
        assert timings == sorted(timings) and timings.count(1) <= 1
        so_far: list = []
        for p in ps:
            so_far.extend(p.new_rows)
            if mode is plan.AccumulationMode.ACCUMULATING:
                assert sorted(p.rows) == sorted(so_far)  # the last pane holds every row kept
            else:
                assert p.rows == p.new_rows  # panes partition the rows
            assert p.rows or p.timing is ON_TIME  # only the ON_TIME pane may be empty


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(scenarios())
def test_serialization_and_idle_calls_change_nothing(scenario):
    expected = simulate(*scenario)[:2]
    assert simulate(*scenario, serialize=True)[:2] == expected
    assert simulate(*scenario, idle_calls=True)[:2] == expected


def test_a_watermark_sub_trigger_started_after_the_end_waits_for_a_row():
    """Found by the property above: AFTER EACH (AFTER WATERMARK, AFTER WATERMARK), lateness 5. The first fires
    ON_TIME when the watermark reaches 40; the end-of-window timer has then gone off (Beam fires a timer once),
    so the second waits for a row: the late row at 30 fires it (a final LATE pane). It used to fire, empty, at
    the next call without rows (a no-data micro-batch), closing the window, so the late row was dropped as
    ``window closed`` or not depending on whether such a micro-batch came between."""
    both = plan.AfterEach((plan.AfterWatermark(), plan.AfterWatermark()))
    scenario = ("tumble", both, plan.AccumulationMode.ACCUMULATING, 5, 0, [[("k", 30), ("k", 40)], [], [("k", 30)]],
                [0, 0, 0])
    for idle_calls in (False, True):
        panes, dropped, _, _ = simulate(*scenario, idle_calls=idle_calls)
        assert dropped == {}
        assert [(p.index, p.timing, p.is_final, p.new_rows) for p in panes[("k", 30, 40)]] == [
            (0, ON_TIME, False, ([0, 30],)), (1, LATE, True, ([2, 30],))]


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(scenarios(), st.sampled_from(["default", "final", "never"]))
def test_one_final_pane_per_window(scenario, kind):
    """Lateness 0 with the default trigger, and EMIT FINAL / NEVER with any lateness: one result per window."""
    _, _, mode, lateness, delay, batches, proc_steps = scenario
    trigger = {"default": plan.DEFAULT_TRIGGER, "final": plan.EmitFinal(), "never": plan.Never()}[kind]
    panes, dropped, _, _ = simulate("tumble", trigger, mode, 0 if kind == "default" else lateness, delay,
                                       batches, proc_steps)
    for ps in panes.values():
        assert len(ps) == 1 and ps[0].is_final and ps[0].index == 0
        assert kind != "default" or ps[0].timing is ON_TIME
    assert set(dropped.values()) <= {DROP_LATE}


def test_global_window_rejects_watermark_triggers_directly():
    with pytest.raises(SqlwinError, match="global window"):
        PaneDriver(plan.EmitSpec(plan.Repeatedly(plan.AfterAny((plan.AfterCount(1), plan.AfterWatermark())))),
                   global_window=True)
    PaneDriver(plan.EmitSpec(plan.Never()), global_window=True)


@settings(max_examples=60, deadline=None)
@given(scenarios())
def test_only_the_watermark_firing_is_on_time(scenario):
    """GRAMMAR 4: a trigger tree without AFTER WATERMARK (and not EMIT FINAL) never emits an ON_TIME pane."""
    kind, trigger, mode, lateness, delay, batches, proc_steps = scenario
    if plan.uses_watermark(trigger):
        return
    panes = simulate(kind, trigger, mode, lateness, delay, batches, proc_steps)[0]
    assert all(p.timing is not ON_TIME for window_panes in panes.values() for p in window_panes)


def test_query_watermark_is_the_minimum_and_idle_streams_do_not_hold_back():
    from sqlwin.core.panes import QueryWatermark

    fast, slow = WatermarkTracker(delay=0, idle_timeout=10), WatermarkTracker(delay=5, idle_timeout=10)
    w = QueryWatermark([fast, slow])
    assert w.after_batch([20, None], processing_time=0) == MIN_TIME  # slow has no row yet: holds back
    assert w.after_batch([30, 12], processing_time=1) == 7  # min(30, 12 - 5)
    assert w.after_batch([40, None], processing_time=5) == 7
    assert w.after_batch([50, None], processing_time=11) == 50  # slow idle since 1: no longer holds back
    assert w.after_batch([None, 13], processing_time=12) == 50  # slow is back (8); W never goes back
    assert w.after_batch([60, 70], processing_time=13) == 60
    single = QueryWatermark([WatermarkTracker(delay=2)])
    assert single.after_batch([9], processing_time=0) == 7
    restored = QueryWatermark([WatermarkTracker(delay=0, idle_timeout=10), WatermarkTracker(delay=5, idle_timeout=10)])
    restored.restore(json.loads(json.dumps(w.to_dict())))
    assert restored.to_dict() == w.to_dict()


def test_a_window_joins_sides_combine_and_an_idle_side_is_lifted():
    """A window join's watermark (``combined``): the smallest of its sides' that are not idle, the largest if all
    are; a side that brought no row is idle once its IDLE TIMEOUT passed since its first micro-batch
    (``idle_from``), and is lifted to the join's watermark, never below what it had."""
    from sqlwin.core.panes import QueryWatermark, combined

    assert combined([(10, False), (MIN_TIME, True)]) == 10
    assert combined([(10, False), (4, False)]) == 4
    assert combined([(10, True), (4, True)]) == 10
    quiet = QueryWatermark([WatermarkTracker(delay=0, idle_timeout=60)])
    assert quiet.idle_from() is None  # not started
    assert quiet.after_batch([None], processing_time=100) == MIN_TIME
    assert (quiet.idle_from(), quiet.all_idle(159), quiet.all_idle(160)) == (160, False, True)
    assert quiet.lift(500) == 500 and quiet.lift(400) == 500  # never backwards
    assert quiet.after_batch([450], processing_time=170) == 500  # its own rows below it do not move it back
    assert (quiet.idle_from(), quiet.all_idle(200)) == (230, False)  # idle counted from its last row again
    assert QueryWatermark([WatermarkTracker(delay=0)]).idle_from() is None  # no IDLE TIMEOUT: never idle


def test_watermark_following_the_clock():
    """GRAMMAR 3, PROCTIME() - lag: the watermark in force for a micro-batch at processing time p is p - lag,
    whatever its rows say; never backwards; a window ending at e closes at processing time e + lag."""
    from sqlwin.core.panes import QueryWatermark

    w = WatermarkTracker(lag=5)
    assert w.at_clock(20) == 15
    assert w.after_batch([100], processing_time=20) == 15  # rows do not move it
    assert w.at_clock(18) == 15  # a clock that goes back does not take the watermark with it
    assert w.wake_time(30) == 35 and w.wake_time(MAX_TIME) is None
    q = QueryWatermark([WatermarkTracker(lag=5), WatermarkTracker(delay=0)])  # the minimum, as for any streams
    assert q.at_clock(20) == MIN_TIME
    assert q.after_batch([None, 12], processing_time=20) == 12
    assert q.at_clock(30) == 12  # min(30 - 5, 12)
    assert q.after_batch([None, 40], processing_time=30) == 25
    assert q.wake_time(50, after=30) == 55
    rows_only = QueryWatermark([WatermarkTracker(delay=0)])
    assert rows_only.at_clock(99) == MIN_TIME  # a query without a PROCTIME() watermark: the clock moves nothing
