"""Session windows on the columnar pane engine (``sqlwin.core.sessionmerge``) against ``PaneDriver``.

The reference is the per-window path the streaming operator runs for sessions: ``SessionAssigner._merge``
(clusters of overlapping or touching sessions, ``PaneDriver.merge`` with Beam's ``on_merge``) and
``WindowStates`` (``PaneDriver.process`` per window). Both get the same micro-batch histories: rows of a few
keys at generated times, late rows dropped before merging as the Spark side drops them, the micro-batch's own
sessions, a watermark and a processing time that move; every micro-batch must fire the same panes (index,
timing, is_final, and the micro-batches whose rows they read) and leave the same sessions open and due.
"""

from __future__ import annotations

from types import SimpleNamespace

import pandas as pd
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from sqlwin.core.columnar import ColumnarPanes, ComparisonTrigger
from sqlwin.core.panes import MAX_TIME, MIN_TIME, PaneDriver, cleanup_time
from sqlwin.core.sessionmerge import merge_sessions, merges_sessions
from sqlwin.plan import triggers as plan
from sqlwin.streaming.engines import WindowStates
from sqlwin.streaming.sessions import SessionAssigner, _clusters, never_finishes

GAP = 3
ACC, DIS = plan.AccumulationMode.ACCUMULATING, plan.AccumulationMode.DISCARDING
TRIGGERS = {  # (trigger, modes): triggers that never finish
    "default": (plan.EmitSpec(), [ACC]),
    "final": (plan.EmitSpec(plan.EmitFinal()), [ACC, DIS]),
    "never": (plan.EmitSpec(plan.Never()), [ACC, DIS]),
    "early2_late1": (plan.EmitSpec(plan.AfterWatermark(early=plan.AfterCount(2), late=plan.AfterCount(1))), [ACC]),
    "early_every_3_late_2": (plan.EmitSpec(plan.AfterWatermark(early=plan.Repeatedly(plan.AfterProcessingTime(3)),
                                                               late=plan.AfterCount(2))), [ACC]),
    "early_any_late_delay": (plan.EmitSpec(plan.AfterWatermark(
        early=plan.AfterAny((plan.AfterCount(3), plan.AfterProcessingTime(2))),
        late=plan.AfterAll((plan.AfterCount(2), plan.AfterProcessingTime(1, 4))))), [ACC]),
    "every_2_rows": (plan.EmitSpec(plan.Repeatedly(plan.AfterCount(2))), [ACC]),
    "every_3_units": (plan.EmitSpec(plan.Repeatedly(plan.AfterProcessingTime(3))), [ACC]),
    "any_repeated": (plan.EmitSpec(plan.Repeatedly(plan.AfterAny((plan.AfterProcessingTime(2),
                                                                   plan.AfterCount(3))))), [ACC]),
}


def micro_batch_sessions(rows: list[tuple[str, int]], watermark: int, lateness: int) -> list[tuple]:
    """What Spark hands the assigner: the rows not late (their own span past its cleanup time: dropped before
    merging), as the micro-batch's own sessions (key, start, end, rows)."""
    spans = []
    for key in sorted({k for k, _ in rows}):
        kept = [(ts, ts + GAP, 1) for k, ts in rows if k == key and watermark < cleanup_time(ts + GAP, lateness)]
        spans += [(key, s, e, sum(n for *_, n in members)) for s, e, members in _clusters(kept)]
    return spans


def run_both(emit: plan.EmitSpec, lateness: int, history: list) -> list[set]:
    """Both engines over ``history``; returns each micro-batch's panes (they are equal)."""
    trigger = ComparisonTrigger.of(emit)
    accumulating = emit.mode is ACC
    assert trigger is not None and never_finishes(emit.trigger) and merges_sessions(trigger, accumulating)
    driver = PaneDriver(emit, lateness)
    scalar = WindowStates(driver)
    assigner = SimpleNamespace(op=SimpleNamespace(windows=scalar.windows, driver=driver))
    columnar = ColumnarPanes(trigger, lateness, accumulating)
    stored: list[tuple[str, int, int, int]] = []  # (key, start, end, micro-batch) of every stored session
    watermark, now = MIN_TIME, 0
    panes_of: list[set] = []
    for batch, (advance, rows, clock) in enumerate(history):
        now += clock
        spans = micro_batch_sessions(rows, watermark, lateness)
        stored += [(k, s, e, batch) for k, s, e, _ in spans]
        accepted, closed, lost = SessionAssigner._merge(assigner, spans, watermark, now)
        assert not closed and not lost
        fired, expired = scalar.drive(accepted, batch, watermark, now, batch)
        expected = {(*w, p.index, p.timing.value, p.is_final, frozenset(p.rows)) for w, p in fired}
        counts = merge_sessions(columnar, pd.DataFrame(spans, columns=["key", "start", "end", "n"]), watermark)
        # (an open session of a key with new rows elsewhere is in ``accepted`` with 0 rows: it changes nothing)
        assert dict(zip(zip(counts["key"], counts["start"], counts["end"], strict=True), counts["n"], strict=True)) == \
            {w: n for w, n in accepted.items() if n}
        panes, gone = columnar.step(counts, batch, watermark, now)
        got = set()
        for r in panes.frame.itertuples(index=False):  # the pane reads its key's sessions within its bounds
            read = frozenset(b for k, s, e, b in stored if k == r.key and r.start <= s and e <= r.end
                             and 0 <= r.lo <= b <= batch)
            got.add((r.key, r.start, r.end, r.pane_index, r.pane_timing, bool(r.is_final), read))
        assert got == expected, f"micro-batch {batch} at watermark {watermark}, processing time {now}"
        panes_of.append(got)
        assert gone == expired
        assert sorted(columnar.table.index) == sorted(scalar.windows)
        for later in (0, 1, 3):
            assert columnar.any_due(watermark, now + later) == scalar.any_due(watermark, now + later)
        proc, events = scalar.timers(now)
        assert columnar.earliest_timer() == min(events, default=None)
        assert columnar.earliest_processing_timer(now) == min(proc, default=None)
        watermark = MAX_TIME if advance is None else (advance if watermark == MIN_TIME else watermark + advance)
    return panes_of


KEYS = st.sampled_from(["a", "b"])
history = st.lists(st.tuples(st.one_of(st.integers(0, 6), st.none()),
                             st.lists(st.tuples(KEYS, st.integers(0, 30)), max_size=5),
                             st.integers(0, 4)), min_size=1, max_size=10)
CASES = [(name, mode) for name, (_, modes) in TRIGGERS.items() for mode in modes]


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(case=st.sampled_from(CASES), lateness=st.sampled_from([0, 4, 10]), history=history)
def test_merging_sessions_equals_pane_driver(case: tuple, lateness: int, history: list) -> None:
    name, mode = case
    run_both(plan.EmitSpec(TRIGGERS[name][0].trigger, mode), lateness, history)


@pytest.mark.parametrize("case", CASES, ids=[f"{n}-{m.value}" for n, m in CASES])
def test_hand_made_history(case: tuple) -> None:
    """Sessions that grow, bridge two open ones (one past its end-of-window firing, one before it: the merged
    window is before it and numbers its panes from 0), and merge once the watermark passed both ends (the merged
    window is past its end-of-window firing too); with the default trigger, the panes are the hand-worked ones."""
    name, mode = case
    run_both(plan.EmitSpec(TRIGGERS[name][0].trigger, mode), 10, HAND_MADE)


# (watermark advance after the micro-batch, rows (key, ts), processing time advance); gap 3, lateness 10
HAND_MADE = [
    (0, [("a", 1), ("a", 2), ("b", 5)], 1),  # a [1, 5), b [5, 8); W -> 0
    (6, [("a", 8), ("b", 6)], 2),  # a [8, 11) beside [1, 5); b [6, 9) grows b to [5, 9); W -> 6
    (3, [("b", 7)], 1),  # W 6: a [1, 5) fires ON_TIME; b grows to [5, 10); W -> 9
    (4, [("a", 5)], 3),  # W 9: a [5, 8) bridges [1, 5) (fired) and [8, 11) (not yet): a [1, 11); W -> 13
    (1, [("a", 11)], 1),  # W 13: a grows to [1, 14) by touching; b [5, 10) fires ON_TIME; W -> 14
    (None, [("b", 10)], 1),  # W 14: b [10, 13) touches [5, 10) (fired), W >= 13: b [5, 13) LATE; a [1, 14) ON_TIME
    (None, [], 1),  # W +inf: both expire, with nothing pending
]


def test_hand_made_history_default_panes() -> None:
    """HAND_MADE's panes with the default trigger (ON_TIME at the end, LATE at every late row), worked by hand:
    (key, start, end, pane_index, timing, is_final, micro-batches read)."""
    panes = run_both(plan.EmitSpec(), 10, HAND_MADE)
    assert panes == [
        set(), set(),
        {("a", 1, 5, 0, "ON_TIME", False, frozenset({0}))},
        set(),  # a [1, 11): new bounds, before its end (11 > 9): nothing fires
        {("b", 5, 10, 0, "ON_TIME", False, frozenset({0, 1, 2}))},
        {("a", 1, 14, 0, "ON_TIME", False, frozenset({0, 1, 3, 4})),
         ("b", 5, 13, 0, "LATE", False, frozenset({0, 1, 2, 5}))},  # new bounds: index 0, but past the end
        set(),
    ]


def test_which_triggers() -> None:
    """Triggers that finish, AFTER EACH and DISCARDING panes before the expiry stay on PaneDriver."""
    def of(trigger: plan.Trigger, mode: plan.AccumulationMode = ACC) -> bool:
        found = ComparisonTrigger.of(plan.EmitSpec(trigger, mode))
        return found is not None and merges_sessions(found, mode is ACC)

    assert of(plan.AfterWatermark(late=plan.AfterCount(1))) and of(plan.EmitFinal(), DIS)
    assert not of(plan.AfterWatermark(late=plan.AfterCount(1)), DIS)
    assert not of(plan.Repeatedly(plan.AfterEach((plan.AfterCount(1), plan.AfterCount(2)))))
    assert not of(plan.OrFinally(plan.Repeatedly(plan.AfterCount(2)), plan.AfterCount(5)))


def _executor_step(state: pd.DataFrame, spans: list, trigger: ComparisonTrigger, lateness: int,
                   accumulating: bool, batch: int, watermark: int, now: int, cut: int) -> tuple:
    """What Spark does around ``step_sessions``: the open sessions (``state``) and the micro-batch's own side by
    side, shuffled by key into two partitions, each sorted by (key, start, end) and handed over in Arrow batches
    of ``cut`` rows; returns (sessions, panes, windows processed, expired)."""
    import numpy as np
    import pyarrow as pa

    from sqlwin.core.columnar import STATE
    from sqlwin.streaming.keyedsessions import step_sessions
    from sqlwin.streaming.keyedstate import PANE, TALLY, WINDOW, out_schema

    nullable = {c: "Int64" if t is np.int64 else "boolean" for c, t in STATE.items()}  # NULL: not a session's
    rows = state.astype(nullable).assign(has_state=True, n=pd.array([None] * len(state), "Int64"))
    new = pd.DataFrame(spans, columns=["key", "start", "end", "n"]).assign(has_state=False).astype({"n": "Int64"})
    both = pd.concat([rows, new], ignore_index=True).astype(nullable) if len(new) else rows
    types = {np.int64: pa.int64(), np.bool_: pa.bool_()}
    schema = pa.schema([("key", pa.string()), ("start", pa.int64()), ("end", pa.int64()),
                        *[(c, types[t]) for c, t in STATE.items()], ("has_state", pa.bool_()), ("n", pa.int64())])
    out = []
    for part in ("a", "b"):  # one key per partition, and an empty one when a key has no row
        rows = both[both["key"] == part].sort_values(["key", "start", "end"])
        table = pa.Table.from_pandas(rows[schema.names], schema=schema, preserve_index=False)
        out += list(step_sessions(trigger, lateness, accumulating, batch, watermark, now,
                                  iter(table.to_batches(max_chunksize=cut))))
    frame = pa.Table.from_batches(out, out_schema()) if out else out_schema().empty_table()
    kind = frame["kind"].to_pylist()
    windows = frame.filter(pa.array([k == WINDOW for k in kind])).select(["key", "start", "end", *STATE])
    panes = frame.filter(pa.array([k == PANE for k in kind])).to_pandas()
    tally = frame.filter(pa.array([k == TALLY for k in kind])).to_pandas()
    return (windows.to_pandas().astype(dict(STATE)), {(r.key, r.start, r.end, r.pane_index, r.pane_timing, r.is_final,
                                                       r.pane_lo) for r in panes.itertuples()},
            int(tally["processed"].sum()), int(tally["expired"].sum()))


# rows closer together: most micro-batches' sessions merge with open ones, across Arrow batches
dense = st.lists(st.tuples(st.one_of(st.integers(0, 4), st.none()),
                           st.lists(st.tuples(KEYS, st.integers(0, 14)), min_size=1, max_size=5),
                           st.integers(0, 3)), min_size=2, max_size=8)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(case=st.sampled_from(CASES), lateness=st.sampled_from([0, 4, 10]), cut=st.integers(1, 4), history=dense)
def test_executor_step_equals_the_driver_engine(case: tuple, lateness: int, cut: int, history: list) -> None:
    """``keyedsessions.step_sessions`` (Spark's executors, a key's rows cut across Arrow batches anywhere) steps
    the sessions as the driver's engine does: the same sessions, panes and counts."""
    from sqlwin.core.columnar import KEY, STATE

    name, mode = case
    emit = plan.EmitSpec(TRIGGERS[name][0].trigger, mode)
    trigger = ComparisonTrigger.of(emit)
    driver = ColumnarPanes(trigger, lateness, mode is ACC)
    state = driver.table.reset_index()
    watermark, now = MIN_TIME, 0
    for batch, (advance, rows, clock) in enumerate(history):
        now += clock
        spans = micro_batch_sessions(rows, watermark, lateness)
        counts = merge_sessions(driver, pd.DataFrame(spans, columns=["key", "start", "end", "n"]), watermark)
        fired, expired = driver.step(counts, batch, watermark, now)
        if spans or driver.processed or expired:
            state, panes, processed, gone = _executor_step(state, spans, trigger, lateness, mode is ACC, batch,
                                                           watermark, now, cut)
            assert (processed, gone) == (driver.processed, expired)
            assert panes == {(r.key, r.start, r.end, r.pane_index, r.pane_timing, r.is_final, r.lo)
                             for r in fired.frame.itertuples()}
        expected = driver.table.reset_index().sort_values(KEY).reset_index(drop=True)
        got = state.sort_values(KEY).reset_index(drop=True)
        pd.testing.assert_frame_equal(got[[*KEY, *STATE]], expected[[*KEY, *STATE]], check_dtype=False)
        watermark = MAX_TIME if advance is None else (advance if watermark == MIN_TIME else watermark + advance)
