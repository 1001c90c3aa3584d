"""The columnar pane driver (``sqlwin.core.columnar``) against ``PaneDriver``, window by window.

Both run the same micro-batch histories (new-row counts per window, a watermark that moves, a processing time
that moves, windows that get rows after they closed or expired), the way the streaming operator drives them,
which steps the windows that got rows and those whose timers (event or processing time) are due; every micro-batch
must fire the same panes (index, timing, is_final, and the micro-batches whose rows they read), expire
the same windows, and leave the same windows open, closed and due.
"""

from __future__ import annotations

import pandas as pd
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from sqlwin.core.columnar import ColumnarPanes, ComparisonTrigger, EachStep
from sqlwin.core.panes import MAX_TIME, MIN_TIME, PaneDriver
from sqlwin.plan import triggers as plan
from sqlwin.streaming.engines import WindowStates

TRIGGERS = {
    "default": plan.EmitSpec(),
    "final": plan.EmitSpec(plan.EmitFinal()),
    "never": plan.EmitSpec(plan.Never()),
    "watermark": plan.EmitSpec(plan.AfterWatermark()),
    "early2": plan.EmitSpec(plan.AfterWatermark(early=plan.Repeatedly(plan.AfterCount(2)))),
    "late2": plan.EmitSpec(plan.AfterWatermark(late=plan.AfterCount(2))),
    "early3_late1": plan.EmitSpec(plan.AfterWatermark(early=plan.AfterCount(3), late=plan.AfterCount(1))),
    "changes": plan.emit_changes(),
    # processing-time early and late firings (Beam's pastFirstElementInPane().plusDelayOf(d), alignedTo)
    "early_every_4": plan.EmitSpec(plan.AfterWatermark(early=plan.Repeatedly(plan.AfterProcessingTime(4)))),
    "early_0_late_3": plan.EmitSpec(plan.AfterWatermark(early=plan.AfterProcessingTime(0),
                                                        late=plan.AfterProcessingTime(3))),
    "early_aligned_late2": plan.EmitSpec(plan.AfterWatermark(early=plan.AfterProcessingTime(1, 5, 2),
                                                             late=plan.AfterCount(2))),
    "early2_late_aligned": plan.EmitSpec(plan.AfterWatermark(early=plan.AfterCount(2),
                                                             late=plan.Repeatedly(plan.AfterProcessingTime(0, 4)))),
    # a count or processing-time trigger alone: repeated (EVERY n ROWS, EVERY interval) or once (it closes)
    # AFTER ANY / AFTER ALL of a count and a delay
    "early_any_late_all": plan.EmitSpec(plan.AfterWatermark(
        early=plan.AfterAny((plan.AfterCount(2), plan.AfterProcessingTime(3))),
        late=plan.Repeatedly(plan.AfterAll((plan.AfterProcessingTime(0, 4), plan.AfterCount(2)))))),
    "early_all_late_any": plan.EmitSpec(plan.AfterWatermark(
        early=plan.AfterAll((plan.AfterCount(3), plan.AfterProcessingTime(1, 5, 2))),
        late=plan.AfterAny((plan.AfterProcessingTime(2),)))),
    "any_repeated": plan.EmitSpec(plan.Repeatedly(plan.AfterAny((plan.AfterProcessingTime(4), plan.AfterCount(3))))),
    "all_once": plan.EmitSpec(plan.AfterAll((plan.AfterCount(2), plan.AfterProcessingTime(2)))),
    # REPEATEDLY t UNTIL AFTER WATERMARK: AFTER WATERMARK EARLY t
    "every_2_rows_until_watermark": plan.EmitSpec(plan.OrFinally(plan.Repeatedly(plan.AfterCount(2)),
                                                                 plan.AfterWatermark())),
    "any_until_watermark": plan.EmitSpec(plan.OrFinally(
        plan.Repeatedly(plan.AfterAny((plan.AfterCount(3), plan.AfterProcessingTime(2)))), plan.AfterWatermark())),
    # t alone UNTIL AFTER COUNT m: a last pane at the m-th row, then closed (also when t would not fire then)
    "every_2_rows_until_5": plan.EmitSpec(plan.OrFinally(plan.Repeatedly(plan.AfterCount(2)), plan.AfterCount(5))),
    "any_until_4": plan.EmitSpec(plan.OrFinally(
        plan.Repeatedly(plan.AfterAny((plan.AfterCount(3), plan.AfterProcessingTime(2)))), plan.AfterCount(4))),
    "every_3_units_until_3": plan.EmitSpec(plan.OrFinally(plan.Repeatedly(plan.AfterProcessingTime(3)),
                                                          plan.AfterCount(3))),
    "count_4_once_until_2": plan.EmitSpec(plan.OrFinally(plan.AfterCount(4), plan.AfterCount(2))),
    # AFTER EACH: its steps in order, each seeing only the rows after the previous one fired
    "each_2_then_3": plan.EmitSpec(plan.AfterEach((plan.AfterCount(2), plan.AfterCount(3)))),
    "each_delay_then_every_2": plan.EmitSpec(plan.AfterEach((plan.AfterProcessingTime(2),
                                                             plan.Repeatedly(plan.AfterCount(2))))),
    "each_repeated": plan.EmitSpec(plan.Repeatedly(plan.AfterEach((
        plan.AfterCount(1), plan.AfterAny((plan.AfterCount(3), plan.AfterProcessingTime(2))))))),
    "each_all_then_aligned_until_6": plan.EmitSpec(plan.OrFinally(plan.AfterEach((
        plan.AfterAll((plan.AfterCount(2), plan.AfterProcessingTime(1))), plan.AfterProcessingTime(1, 4, 1),
        plan.AfterCount(2))), plan.AfterCount(6))),
    "every_2_rows": plan.EmitSpec(plan.Repeatedly(plan.AfterCount(2))),
    "count_3_once": plan.EmitSpec(plan.AfterCount(3)),
    "every_3_units": plan.EmitSpec(plan.Repeatedly(plan.AfterProcessingTime(3))),
    "processing_time_once_aligned": plan.EmitSpec(plan.AfterProcessingTime(1, 4, 1)),
}
MODES = list(plan.AccumulationMode)
WINDOWS = [(k, s, s + 10) for k in ("a", "b") for s in (0, 5, 10, 20)]  # overlapping, like HOP


class Scalar:
    """The operator's per-window pane engine (``sqlwin.streaming.engines.WindowStates``: ``PaneDriver`` per
    window), one token per micro-batch."""

    def __init__(self, emit: plan.EmitSpec, lateness: int, global_window: bool = False):
        self.engine = WindowStates(PaneDriver(emit, lateness, global_window=global_window))
        self.driver = self.engine.driver

    @property
    def windows(self) -> dict:
        return self.engine.windows

    def due(self, state, watermark: int, now: int) -> bool:
        return self.engine.is_due(state, watermark, now)

    def step(self, new: dict, batch: int, watermark: int, now: int) -> tuple[set, int]:
        fired, expired = self.engine.drive(new, batch, watermark, now, batch)
        return {(*w, p.index, p.timing.value, p.is_final, frozenset(p.rows)) for w, p in fired}, expired


def columnar_step(panes: ColumnarPanes, new: dict, batch: int, watermark: int, now: int,
                  stored: dict) -> tuple[set, int]:
    frame = pd.DataFrame([(k, s, e, n) for (k, s, e), n in new.items()], columns=["key", "start", "end", "n"])
    result, expired = panes.step(frame, batch, watermark, now)
    fired = set()
    for r in result.frame.itertuples(index=False):
        # the pane reads [lo, batch]: the batches of that range in which the window's rows were stored
        tokens = frozenset(b for b in stored.get((r.key, r.start, r.end), ()) if r.lo >= 0 and r.lo <= b <= batch)
        fired.add((r.key, r.start, r.end, r.pane_index, r.pane_timing, bool(r.is_final), tokens))
    return fired, expired


def run_both(emit: plan.EmitSpec, mode: plan.AccumulationMode, lateness: int, history: list,
             global_window: bool = False) -> None:
    """``history``: per micro-batch (watermark advance or None for the end, new-row counts per window, and
    optionally the processing time's advance: 1 if not given)."""
    emit = plan.EmitSpec(emit.trigger, mode, emit.explicit)
    trigger = ComparisonTrigger.of(emit)
    assert trigger is not None
    scalar = Scalar(emit, lateness, global_window)
    columnar = ColumnarPanes(trigger, lateness, mode is plan.AccumulationMode.ACCUMULATING)
    stored: dict = {}  # window -> batches whose rows the window kept (the operator's stored partial rows)
    watermark = MIN_TIME
    now = 0
    for batch, (advance, new, *clock) in enumerate(history):
        watermark = MAX_TIME if advance is None else (advance if watermark == MIN_TIME else watermark + advance)
        now += clock[0] if clock else 1
        for window in new:  # stored only when accepted: the window is not closed and not past its cleanup
            state = scalar.windows.get(window)
            accepted = not (state is not None and state.closed) and watermark < scalar.driver.cleanup_time(
                state or scalar.driver.new_window(window[1], window[2]))
            if accepted:
                stored.setdefault(window, set()).add(batch)
        expected = scalar.step(new, batch, watermark, now)
        got = columnar_step(columnar, new, batch, watermark, now, stored)
        assert got == expected, f"micro-batch {batch} at watermark {watermark}, processing time {now}"
        assert len(columnar) == len(scalar.windows)
        assert sorted(columnar.closed()) == sorted(w for w, s in scalar.windows.items() if s.closed)
        for later in (0, 1, 3, 6):  # due now, or at a later processing time
            assert columnar.any_due(watermark, now + later) == any(scalar.due(s, watermark, now + later)
                                                                   for s in scalar.windows.values())
        timers = [scalar.driver.timers(s) for s in scalar.windows.values()]
        assert columnar.earliest_timer() == min((t.event_time for t in timers if t.event_time is not None
                                                 and t.event_time < MAX_TIME), default=None)
        assert columnar.earliest_processing_timer(now) == min((t.processing_time for t in timers if
                                                               t.processing_time is not None and
                                                               t.processing_time > now), default=None)
        restored = ColumnarPanes(trigger, lateness, columnar.accumulating)
        restored.restore(columnar.to_arrow())
        pd.testing.assert_frame_equal(restored.table, columnar.table)
        columnar = restored


def histories(windows: list) -> st.SearchStrategy:
    return st.lists(st.tuples(
        st.one_of(st.integers(0, 12), st.none()),
        st.dictionaries(st.sampled_from(windows), st.integers(1, 4), max_size=6),
        st.integers(0, 5)), min_size=1, max_size=10)  # the processing time's advance: 0 is a tie


history = histories(WINDOWS)
# the global window of each key (GROUP BY without a window TVF): triggers that do not wait for the watermark
GLOBAL_TRIGGERS = sorted(n for n, e in TRIGGERS.items() if not plan.uses_watermark(e.trigger))


@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(name=st.sampled_from(sorted(TRIGGERS)), mode=st.sampled_from(MODES), lateness=st.sampled_from([0, 5, 15]),
       history=history)
def test_columnar_equals_pane_driver(name: str, mode: plan.AccumulationMode, lateness: int, history: list) -> None:
    run_both(TRIGGERS[name], mode, lateness, history)


@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(name=st.sampled_from(GLOBAL_TRIGGERS), mode=st.sampled_from(MODES), lateness=st.sampled_from([0, 5]),
       history=histories([(k, MIN_TIME, MAX_TIME) for k in ("a", "b")]))
def test_columnar_equals_pane_driver_in_the_global_window(name: str, mode: plan.AccumulationMode, lateness: int,
                                                          history: list) -> None:
    """A key's one window never ends: only the count and processing-time firings and the end of input fire it."""
    run_both(TRIGGERS[name], mode, lateness, history, global_window=True)


@pytest.mark.parametrize("name", sorted(TRIGGERS))
@pytest.mark.parametrize("mode", MODES)
def test_hand_made_history(name: str, mode: plan.AccumulationMode) -> None:
    """Rows before the end, the end reached (ON_TIME), late rows, rows after expiry, the end of input."""
    a, b = ("a", 0, 10), ("b", 5, 15)
    run_both(TRIGGERS[name], mode, 5, [
        (1, {a: 1, b: 2}), (2, {a: 3}), (0, {}), (9, {a: 1, b: 1}), (0, {a: 2}), (3, {b: 1}),
        (4, {a: 1, b: 1}), (0, {}), (None, {("a", 20, 30): 1}), (0, {})])


@pytest.mark.parametrize("mode", MODES)
def test_processing_time_firings_by_hand(mode: plan.AccumulationMode) -> None:
    """Early firings every 4 units of processing time after a pane's first row, a late firing 3 after the first
    late row: a timer that comes due in a micro-batch without rows fires it, one that a row set in the same
    micro-batch with delay 0 fires at once, and the end-of-window firing clears the early timer."""
    a = ("a", 0, 10)
    spec = plan.EmitSpec(plan.AfterWatermark(early=plan.AfterProcessingTime(4), late=plan.AfterProcessingTime(3)),
                         mode)
    panes = ColumnarPanes(ComparisonTrigger.of(spec), 20, mode is plan.AccumulationMode.ACCUMULATING)
    stored: dict = {}

    def step(batch: int, new: dict, watermark: int, now: int) -> set:
        for window in new:
            stored.setdefault(window, set()).add(batch)
        return {(p[3], p[4], p[5]) for p in columnar_step(panes, new, batch, watermark, now, stored)[0]}

    assert step(0, {a: 2}, 1, 100) == set() and panes.earliest_processing_timer(100) == 104
    assert step(1, {a: 1}, 2, 102) == set()  # the pane's timer stays where its first row set it
    assert step(2, {}, 2, 104) == {(0, "EARLY", False)} and panes.earliest_processing_timer(104) is None
    assert step(3, {a: 1}, 3, 105) == set() and panes.earliest_processing_timer(105) == 109
    assert step(4, {}, 10, 106) == {(1, "ON_TIME", False)}  # the end: the early timer is gone
    assert panes.earliest_processing_timer(106) is None
    assert step(5, {a: 1}, 12, 107) == set() and panes.earliest_processing_timer(107) == 110
    assert step(6, {}, 12, 111) == {(2, "LATE", False)}


def test_the_family() -> None:
    """Only comparison triggers: other composites stay on PaneDriver."""
    assert ComparisonTrigger.of(plan.EmitSpec()) == ComparisonTrigger(True, None, 1)
    assert ComparisonTrigger.of(plan.EmitSpec(plan.EmitFinal())) == ComparisonTrigger(False, final=True)
    every = plan.AfterProcessingTime(5)
    assert ComparisonTrigger.of(plan.EmitSpec(plan.AfterWatermark(early=plan.Repeatedly(every)))) == \
        ComparisonTrigger(True, early_after=every)
    assert ComparisonTrigger.of(plan.EmitSpec(plan.Repeatedly(plan.AfterCount(3)))) == ComparisonTrigger(False, 3)
    assert ComparisonTrigger.of(plan.EmitSpec(every)) == ComparisonTrigger(False, early_after=every, repeats=False)
    # AFTER ANY / ALL of at most one count and one delay: both columns, a flag for ALL
    assert ComparisonTrigger.of(plan.EmitSpec(plan.AfterAny((every, plan.AfterCount(2))))) == \
        ComparisonTrigger(False, 2, early_after=every, repeats=False)
    assert ComparisonTrigger.of(plan.EmitSpec(plan.AfterWatermark(
        early=plan.AfterAny((every, plan.AfterCount(2))), late=plan.AfterAll((plan.AfterCount(3), every))))) == \
        ComparisonTrigger(True, 2, 3, early_after=every, late_after=every, late_all=True)
    assert ComparisonTrigger.of(plan.EmitSpec(plan.OrFinally(plan.Repeatedly(every), plan.AfterWatermark()))) == \
        ComparisonTrigger(True, early_after=every)
    # t alone UNTIL AFTER COUNT m: t's columns and m
    every_2_until_5 = plan.OrFinally(plan.Repeatedly(plan.AfterCount(2)), plan.AfterCount(5))
    assert ComparisonTrigger.of(plan.EmitSpec(every_2_until_5)) == ComparisonTrigger(False, 2, until=5)
    assert ComparisonTrigger.of(plan.EmitSpec(plan.OrFinally(every, plan.AfterCount(1)))) == \
        ComparisonTrigger(False, early_after=every, repeats=False, until=1)
    # AFTER EACH of such triggers: a step each, REPEATEDLY around it starts it over
    each = plan.AfterEach((every, plan.Repeatedly(plan.AfterAll((plan.AfterCount(2), every)))))
    steps = (EachStep(None, every, False, False), EachStep(2, every, True, True))
    assert ComparisonTrigger.of(plan.EmitSpec(each)) == ComparisonTrigger(False, repeats=False, each=steps)
    assert ComparisonTrigger.of(plan.EmitSpec(plan.OrFinally(plan.Repeatedly(each), plan.AfterCount(4)))) == \
        ComparisonTrigger(False, each=steps, until=4)
    for other in (plan.Repeatedly(plan.Repeatedly(every)), plan.AfterEach((every, plan.AfterWatermark())),
                  plan.AfterEach((every, plan.Repeatedly(plan.Repeatedly(every)))), plan.AfterEach(()),
                  plan.AfterEach((plan.AfterEach((every,)),)), plan.AfterWatermark(early=plan.AfterEach((every,))),
                  plan.OrFinally(plan.Repeatedly(plan.AfterCount(2)), every),
                  plan.OrFinally(plan.OrFinally(plan.Repeatedly(plan.AfterCount(2)), plan.AfterCount(5)),
                                 plan.AfterCount(3)),
                  plan.OrFinally(plan.AfterWatermark(early=plan.AfterCount(2)), plan.AfterCount(5)),
                  plan.OrFinally(plan.AfterCount(2), plan.AfterWatermark()),
                  plan.OrFinally(plan.Repeatedly(plan.AfterCount(2)), plan.AfterWatermark(late=plan.AfterCount(1))),
                  plan.AfterAny((every, plan.AfterWatermark())), plan.AfterAll(()),
                  plan.AfterWatermark(early=plan.AfterAny((every, plan.Repeatedly(plan.AfterCount(2))))),
                  plan.AfterWatermark(late=plan.AfterAny((plan.AfterCount(1), plan.AfterCount(2))))):
        assert ComparisonTrigger.of(plan.EmitSpec(other)) is None
