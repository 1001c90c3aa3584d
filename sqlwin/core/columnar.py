"""The pane driver over every window at once, for the triggers whose decisions are comparisons.

Flink SQL runs its window aggregations with default emission on a slicing window operator, not on the
generic ``WindowOperator`` with a trigger object per window; this is sqlwin's counterpart. For
``AFTER WATERMARK [EARLY t] [LATE t]`` where each of ``t`` is ``EVERY n ROWS`` or a processing-time delay
(``AFTER PROCESSING TIME DELAY d [ALIGNED TO p]``, ``EVERY interval``: Beam's most common early firings), the
default trigger among them, such a ``t`` alone (``EVERY n ROWS``, ``EVERY interval``, ``AFTER COUNT n``),
``AFTER ANY`` or ``AFTER ALL`` of a count and a delay in either place, ``REPEATEDLY t UNTIL AFTER WATERMARK``
(which is ``AFTER WATERMARK EARLY t``), ``AFTER EACH`` of such ``t`` (repeated or once: a stage number says
which runs), any of those alone ``UNTIL AFTER COUNT m``, ``EMIT FINAL`` and ``NEVER``,
a window's state is a handful of numbers (counts since the last early or late firing or since it opened, the
processing time an early or late firing is due, whether the end-of-window firing happened, the next pane index,
...), and every transition ``PaneDriver.process`` makes for one micro-batch is a comparison of those numbers
with the window's new row count, the watermark and the micro-batch's processing time. numpy evaluates them for
all windows together: a micro-batch costs a few array operations, not a Python call per (key, window), and the
state is a table, saved as one parquet file.

The rules are ``PaneDriver``'s, written as array expressions (each step below names the method it
mirrors); ``tests/test_columnar_panes.py`` checks, on generated histories, that both give the same panes
window by window. The windows may be TUMBLE, HOP, CUMULATE or a key's global window (which ends at the end of
input only). Any other trigger (other UNTILs and composites, AFTER EACH of anything else), sessions, count windows
and evictors run on ``PaneDriver``.

A pane's input is given as a range of micro-batches ``[lo, batch]`` (``lo`` < 0: none): the window's rows
stored by those micro-batches (ACCUMULATING: since its first row; DISCARDING: since its previous pane).
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

import numpy as np
import pandas as pd

from sqlwin.core.panes import MAX_TIME, MIN_TIME, fired_table
from sqlwin.core.triggers import align_up
from sqlwin.plan import triggers as plan

KEY = ["key", "start", "end"]
# one column per field of a window's state (panes.WindowState, flattened for this family of triggers)
STATE = {
    "cleanup": np.int64,  # end + allowed lateness (MAX_TIME when that overflows)
    "late": np.bool_,  # AFTER WATERMARK's end-of-window firing happened (its "late" node)
    "early_count": np.int64,  # rows since the last early firing (EARLY EVERY n ROWS)
    # rows since the last late firing (LATE EVERY n ROWS); without AFTER WATERMARK, which has no late firings,
    # rows since the window opened (UNTIL AFTER COUNT m: Beam's orFinally count, which main's firings do not reset)
    "late_count": np.int64,
    "early_at": np.int64,  # when the early processing-time firing is due (MAX_TIME: not set)
    "late_at": np.int64,  # when the late processing-time firing is due (MAX_TIME: not set)
    "closed": np.bool_,  # the trigger finished: a tombstone until the cleanup time
    "pending": np.bool_,  # rows arrived since the previous pane
    "next_index": np.int64,
    "non_early": np.bool_,  # an ON_TIME or LATE pane was emitted
    "on_time_rows": np.bool_,  # a row arrived while watermark < end
    "lo": np.int64,  # the first micro-batch the next pane reads (-1: none)
    "last": np.int64,  # the last micro-batch that brought rows (-1: none)
    "stage": np.int64,  # AFTER EACH: the step that runs (the others have finished, or wait their turn)
}
# what a NULL of a column stands for (a state column written before the column existed: an earlier version's),
# and what a closed window's is
UNSET = {"early_at": MAX_TIME, "late_at": MAX_TIME, "stage": 0}
# an ``early_at``/``late_at`` whose time came without the sub-trigger firing (AFTER ALL waits for its count):
# satisfied, but no timer any more (``AfterProcessingTimeMachine.on_time_passed``)
GONE_OFF = MIN_TIME
EARLY, ON_TIME, LATE = (t.value for t in (plan.PaneTiming.EARLY, plan.PaneTiming.ON_TIME, plan.PaneTiming.LATE))


@dataclass(frozen=True)
class ComparisonTrigger:
    """A trigger of the family: AFTER WATERMARK with its optional early and late sub-triggers (a count, or a
    processing-time delay), such a sub-trigger alone (``alone``), or the expiry pane only (``EMIT FINAL``, whose
    expiry pane is ON_TIME, and ``NEVER``, whose is LATE)."""

    watermark: bool
    early: int | None = None  # EARLY EVERY n ROWS
    late: int | None = None  # LATE EVERY n ROWS
    final: bool = False  # EMIT FINAL
    early_after: plan.AfterProcessingTime | None = None  # EARLY AFTER PROCESSING TIME ... / EVERY interval
    late_after: plan.AfterProcessingTime | None = None  # LATE AFTER PROCESSING TIME ... / EVERY interval
    # without AFTER WATERMARK (``watermark`` False): AFTER COUNT n or AFTER PROCESSING TIME alone, as ``early`` or
    # ``early_after``, before and after the window's end alike; REPEATEDLY (``repeats``) or once (it then closes)
    repeats: bool = True
    # a count and a processing-time delay together: AFTER ALL of them (both needed), else AFTER ANY (the first)
    early_all: bool = False
    late_all: bool = False
    # ``t UNTIL AFTER COUNT m`` with ``t`` alone: the window fires a last time and closes at its m-th row
    until: int | None = None
    # AFTER EACH (t1, t2, ...) (Beam's ``AfterEach.inOrder``), each ``t`` a count, a delay or AFTER ANY/ALL of
    # both: its steps, run one after the other (``stage``; then ``early``/``early_after`` are unset)
    # and, with ``repeats`` (REPEATEDLY around it), from the first again after the last
    each: tuple[EachStep, ...] = ()

    @classmethod
    def of(cls, emit: plan.EmitSpec) -> ComparisonTrigger | None:
        """The family member ``emit`` is, or None (the trigger needs ``PaneDriver``)."""
        trigger = emit.trigger
        if isinstance(trigger, plan.EmitFinal):
            return cls(False, final=True)
        if isinstance(trigger, plan.Never):
            return cls(False)
        if isinstance(trigger, plan.OrFinally) and isinstance(trigger.main, plan.Repeatedly) and \
                trigger.until == plan.AfterWatermark():
            # REPEATEDLY t UNTIL AFTER WATERMARK (Beam's ``Repeatedly.forever(t).orFinally(pastEndOfWindow())``)
            # fires as t until the end-of-window firing, which closes the window: AFTER WATERMARK EARLY t
            trigger = plan.AfterWatermark(early=trigger.main)
        if isinstance(trigger, plan.OrFinally) and isinstance(trigger.until, plan.AfterCount):
            # t UNTIL AFTER COUNT m (Beam's ``orFinally(elementCountAtLeast(m))``), t a count or a delay alone
            main = cls.of(plan.EmitSpec(trigger.main, emit.mode))
            if main is None or not main.alone or main.until is not None:
                return None
            return replace(main, until=trigger.until.n)
        if isinstance(trigger, plan.AfterEach) or (isinstance(trigger, plan.Repeatedly) and
                                                   isinstance(trigger.trigger, plan.AfterEach)):
            each = trigger.trigger if isinstance(trigger, plan.Repeatedly) else trigger
            steps = [EachStep.of(t) for t in each.triggers]
            if not steps or None in steps:
                return None
            return cls(False, repeats=isinstance(trigger, plan.Repeatedly), each=tuple(steps))
        if not isinstance(trigger, plan.AfterWatermark):
            alone = _sub(trigger)  # EVERY n ROWS, EVERY interval, AFTER COUNT n, AFTER PROCESSING TIME ...
            if alone is None or alone[:2] == (None, None):
                return None
            return cls(False, alone[0], early_after=alone[1], repeats=isinstance(trigger, plan.Repeatedly),
                       early_all=alone[2])
        early, late = _sub(trigger.early), _sub(trigger.late)
        if early is None or late is None:
            return None
        return cls(True, early[0], late[0], early_after=early[1], late_after=late[1], early_all=early[2],
                   late_all=late[2])

    @property
    def alone(self) -> bool:
        """A count or processing-time trigger without AFTER WATERMARK (its firings are all of one kind)."""
        return not self.watermark and (self.early is not None or self.early_after is not None or bool(self.each))

    @property
    def processing_time(self) -> bool:
        """Whether a window may fire on a processing-time timer (else its timer columns stay unset, unread)."""
        return self.early_after is not None or self.late_after is not None or \
            any(s.after is not None for s in self.each)


@dataclass(frozen=True)
class EachStep:
    """One step of AFTER EACH: a count (``n``), a processing-time delay (``after``) or AFTER ANY/ALL (``both``) of
    the two; ``repeats`` (REPEATEDLY t) never finishes, so the steps after it never run."""

    n: int | None
    after: plan.AfterProcessingTime | None
    both: bool
    repeats: bool

    @classmethod
    def of(cls, trigger: plan.Trigger) -> EachStep | None:
        sub = _sub(trigger)
        if sub is None or sub[:2] == (None, None):
            return None
        return cls(*sub, repeats=isinstance(trigger, plan.Repeatedly))


def _sub(trigger: plan.Trigger | None) -> tuple[int | None, plan.AfterProcessingTime | None, bool] | None:
    """An early/late sub-trigger as (``n`` of ``AFTER COUNT n``, ``AFTER PROCESSING TIME``, whether both are
    needed), either or both absent (they repeat, wrapped in REPEATEDLY or not); AFTER ANY or AFTER ALL of at most
    one of each (Beam's ``AfterFirst``/``AfterAll`` of ``elementCountAtLeast`` and ``pastFirstElementInPane``):
    a firing resets both. None for any other sub-trigger."""
    if trigger is None:
        return None, None, False
    if isinstance(trigger, plan.Repeatedly):
        trigger = trigger.trigger
    if isinstance(trigger, (plan.AfterAny, plan.AfterAll)):
        counts = [t for t in trigger.triggers if isinstance(t, plan.AfterCount)]
        delays = [t for t in trigger.triggers if isinstance(t, plan.AfterProcessingTime)]
        if not trigger.triggers or len(counts) > 1 or len(delays) > 1 or \
                len(counts) + len(delays) != len(trigger.triggers):
            return None
        return (counts[0].n if counts else None, delays[0] if delays else None,
                isinstance(trigger, plan.AfterAll))
    if isinstance(trigger, plan.AfterCount):
        return trigger.n, None, False
    if isinstance(trigger, plan.AfterProcessingTime):
        return None, trigger, False
    return None


def _ready(count: np.ndarray, n: int | None, at: np.ndarray, after: plan.AfterProcessingTime | None, both: bool,
           pt: int) -> np.ndarray | bool:
    """Whether a sub-trigger would fire (``should_fire``): its count reached, its processing time due, either
    (AFTER ANY) or both (AFTER ALL); False without either."""
    parts = ([count >= n] if n is not None else []) + ([pt >= at] if after is not None else [])
    if len(parts) < 2:
        return parts[0] if parts else False
    return parts[0] & parts[1] if both else parts[0] | parts[1]


def due_at(spec: plan.AfterProcessingTime, processing_time: int) -> int:
    """When a processing-time sub-trigger set by a row of a micro-batch at ``processing_time`` is due
    (``AfterProcessingTimeMachine.on_element``: the delay, then the grid)."""
    at = processing_time + spec.delay
    return align_up(at, spec.align_to, spec.align_offset) if spec.align_to is not None else at


@dataclass
class Step:
    """What one micro-batch did to a set of windows (arrays aligned with them): the panes emitted (``emit``,
    with each pane's index, timing, finality and first micro-batch read ``lo``), the windows processed (new
    rows or a due timer) and those that expired."""

    emit: np.ndarray
    index: np.ndarray
    timing: np.ndarray
    is_final: np.ndarray
    lo: np.ndarray
    processed: np.ndarray
    expiring: np.ndarray


def fresh_state(ends: np.ndarray, lateness: int) -> dict[str, np.ndarray]:
    """The state of windows opened now (PaneDriver.new_window), one per end in ``ends``."""
    limit = MAX_TIME - lateness
    state = {c: np.zeros(len(ends), t) for c, t in STATE.items()}
    state["cleanup"] = np.where(ends >= limit, MAX_TIME, np.where(ends >= limit, 0, ends) + lateness)
    state["lo"][:] = -1
    state["last"][:] = -1
    for name, unset in UNSET.items():
        state[name][:] = unset
    return state


def timers_of(trigger: ComparisonTrigger, end: np.ndarray, col: dict[str, np.ndarray]) -> np.ndarray:
    """Each window's event-time timer (PaneDriver.timers): its end before AFTER WATERMARK's end-of-window
    firing, else its cleanup time."""
    return np.where(trigger.watermark & ~col["late"] & ~col["closed"], end, col["cleanup"])


def processing_timers_of(col: dict[str, np.ndarray]) -> np.ndarray:
    """Each window's processing-time timer (MAX_TIME: none): its early sub-trigger's before the end-of-window
    firing, its late one's after it (a closed window has neither)."""
    at = np.where(col["late"], col["late_at"], col["early_at"])
    return np.where(at == GONE_OFF, MAX_TIME, at)


def advance(trig: ComparisonTrigger, accumulating: bool, col: dict[str, np.ndarray], end: np.ndarray,
            counts: np.ndarray, batch: int, w: int, pt: int) -> Step:
    """One micro-batch for the windows whose state is ``col`` (edited in place; the expired ones' rows are
    left for the caller to drop), ``counts`` their new rows, ``w`` the watermark, ``pt`` the micro-batch's
    processing time: PaneDriver.process for every window with new rows or a due timer, as array expressions.
    The driver's ``ColumnarPanes`` and the executors' keyed state (``sqlwin.streaming.keyedstate``) both step
    their windows with it."""
    cleanup, late, closed = col["cleanup"], col["late"], col["closed"]
    # the windows processed: new rows, or a due timer
    processed = (counts > 0) | (w >= timers_of(trig, end, col))
    if trig.processing_time:
        processed |= pt >= processing_timers_of(col)
    expiring = processed & (w >= cleanup)
    # _classify: rows of an expiring or closed window are dropped (the caller classified them already)
    added = processed & (counts > 0) & ~expiring & ~closed
    col["pending"] |= added
    col["on_time_rows"] |= added & (w < end)
    col["lo"] = np.where(added & (col["lo"] < 0), batch, col["lo"])
    col["last"] = np.where(added, batch, col["last"])
    # on_element: rows feed the early trigger before the end-of-window firing, the late one after it
    if trig.early is not None or trig.each:  # (``late`` is never set without AFTER WATERMARK: every row feeds it)
        col["early_count"] += np.where(added & ~late, counts, 0)
    if trig.late is not None:
        col["late_count"] += np.where(added & late, counts, 0)
    # a processing-time sub-trigger is set by the first row of its pane
    if trig.early_after is not None:
        col["early_at"] = np.where(added & ~late & (col["early_at"] == MAX_TIME), due_at(trig.early_after, pt),
                                   col["early_at"])
    if trig.late_after is not None:
        col["late_at"] = np.where(added & late & (col["late_at"] == MAX_TIME), due_at(trig.late_after, pt),
                                  col["late_at"])
    stage = col["stage"]
    if trig.processing_time and trig.each:  # the running step's delay (none: MAX_TIME, never due)
        due = np.array([MAX_TIME if s.after is None else due_at(s.after, pt) for s in trig.each])[stage]
        col["early_at"] = np.where(added & (col["early_at"] == MAX_TIME), due, col["early_at"])
    # should_fire / on_fire
    reached = w >= end
    if trig.watermark:
        early_ready = _ready(col["early_count"], trig.early, col["early_at"], trig.early_after, trig.early_all, pt)
        late_ready = _ready(col["late_count"], trig.late, col["late_at"], trig.late_after, trig.late_all, pt)
        timer_due = ~late & reached
        if trig.processing_time:
            timer_due = timer_due | (pt >= processing_timers_of(col))
        should = np.where(late, late_ready, reached | early_ready)
        fire = processed & ~closed & (added | expiring | timer_due) & should
        fire_late, fire_early, fire_end = fire & late, fire & ~late & ~reached, fire & ~late & reached
        finished = fire_end if trig.late is None and trig.late_after is None else np.zeros(len(end), bool)
    elif trig.alone:  # the count or the processing-time trigger itself: every firing is its own
        if trig.each:  # AfterEachMachine: the running step decides
            ready = np.zeros(len(end), bool)
            for i, s in enumerate(trig.each):
                ready |= (stage == i) & _ready(col["early_count"], s.n, col["early_at"], s.after, s.both, pt)
        else:
            ready = _ready(col["early_count"], trig.early, col["early_at"], trig.early_after, trig.early_all, pt)
        until: np.ndarray | bool = False
        if trig.until is not None:  # OrFinallyMachine: UNTIL's count fires a last pane, and the window closes
            col["late_count"] += np.where(added, counts, 0)
            until = col["late_count"] >= trig.until
            ready = ready | until
        fire = processed & ~closed & (added | expiring | (pt >= col["early_at"])) & ready  # (a count sets no timer)
        fire_early, fire_late, fire_end = fire, np.zeros(len(end), bool), np.zeros(len(end), bool)
        if trig.each:  # a step that fired and does not repeat is done: the next runs, after the last none
            moves = fire & ~np.array([s.repeats for s in trig.each])[stage]
            done = moves & (stage == len(trig.each) - 1) & (not trig.repeats)
            col["stage"] = np.where(moves, (stage + 1) % len(trig.each), stage)
            finished = fire & (until | done)
        else:
            finished = fire & until if trig.repeats else fire
    else:
        fire = fire_late = fire_early = fire_end = finished = np.zeros(len(end), bool)
    col["early_count"] = np.where(fire_early | fire_end, 0, col["early_count"])
    col["late_count"] = np.where(fire_late | fire_end, 0, col["late_count"])
    col["early_at"] = np.where(fire_early | fire_end, MAX_TIME, col["early_at"])
    col["late_at"] = np.where(fire_late | fire_end, MAX_TIME, col["late_at"])
    col["late"] = late | fire_end
    # _timing / _emit: a firing emits if it has new rows or is ON_TIME; an expiring window that did not
    # fire emits what is pending (its expiry pane: ON_TIME for EMIT FINAL)
    pending = col["pending"]
    on_time_ok = col["on_time_rows"] & ~col["non_early"]
    fire_timing = np.where(col["non_early"], LATE, np.where(~reached, EARLY,
                                                             np.where(fire_end & on_time_ok, ON_TIME, LATE)))
    emit_fire = fire & (pending | (fire_timing == ON_TIME))
    emit_expiry = expiring & ~fire & pending
    expiry_timing = np.where(on_time_ok & trig.final, ON_TIME, LATE)
    emit = emit_fire | emit_expiry
    timing = np.where(emit_fire, fire_timing, expiry_timing)
    is_final = np.where(emit_fire, finished | expiring, True)
    step = Step(emit, col["next_index"].copy(), timing, is_final, col["lo"].copy(), processed, expiring)
    col["next_index"] = col["next_index"] + emit
    col["non_early"] |= emit & (timing != EARLY)
    col["pending"] = pending & ~emit
    if not accumulating:
        col["lo"] = np.where(emit, -1, col["lo"])
    # _close: a finished trigger leaves a tombstone; an expiring window is gone
    close = finished | expiring
    col["closed"] |= close
    col["pending"] &= ~close
    col["lo"] = np.where(close, -1, col["lo"])
    for name in ("early_count", "late_count"):
        col[name] = np.where(close, 0, col[name])
    for name, unset in UNSET.items():
        col[name] = np.where(close, unset, col[name])
    col["late"] &= ~close
    if trig.processing_time:  # a processing-time timer goes off once
        for name in ("early_at", "late_at"):
            col[name] = np.where(col[name] <= pt, GONE_OFF, col[name])
    return step


@dataclass
class FiredPanes:
    """The panes of one micro-batch: ``key, start, end, pane_index, pane_timing, is_final, lo``."""

    frame: pd.DataFrame

    @classmethod
    def empty(cls) -> FiredPanes:
        return cls(pd.DataFrame({"key": np.array([], object), "start": np.array([], np.int64),
                                 "end": np.array([], np.int64), "pane_index": np.array([], np.int32),
                                 "pane_timing": np.array([], object), "is_final": np.array([], bool),
                                 "lo": np.array([], np.int64)}))

    def __len__(self) -> int:
        return len(self.frame)

    def batches(self, batch: int) -> set[int]:
        """Every micro-batch some pane reads."""
        lows = self.frame["lo"].to_numpy()
        lows = lows[lows >= 0]
        return set(range(int(lows.min()), batch + 1)) if len(lows) else set()

    def to_arrow(self, batch: int) -> Any:
        """The panes as ``fired_table``: a pane reads the micro-batches ``[lo, batch]`` (none when ``lo`` is
        -1), built as one list array without a Python object per pane."""
        import pyarrow as pa

        frame = self.frame
        lo = frame["lo"].to_numpy(np.int64)
        lengths = np.where(lo >= 0, batch - lo + 1, 0)
        offsets = np.concatenate([[0], np.cumsum(lengths)]).astype(np.int32)
        values = np.arange(offsets[-1], dtype=np.int64) + np.repeat(np.where(lo >= 0, lo, 0) - offsets[:-1],
                                                                    lengths)
        return fired_table([frame["key"].to_numpy(object), frame["start"].to_numpy(), frame["end"].to_numpy(),
                            frame["pane_index"].to_numpy(), frame["pane_timing"].to_numpy(object),
                            frame["is_final"].to_numpy(), pa.ListArray.from_arrays(offsets, values)])


class ColumnarPanes:
    """Every open window's state as columns (indexed by key, start, end), stepped one micro-batch at a time."""

    def __init__(self, trigger: ComparisonTrigger, lateness: int, accumulating: bool):
        self.trigger = trigger
        self.lateness = lateness
        self.accumulating = accumulating
        self.table = self._empty()
        self.processed = 0  # the windows the last step processed (new rows or a due timer)

    @staticmethod
    def _empty() -> pd.DataFrame:
        index = pd.MultiIndex.from_arrays([pd.Series([], dtype="str"), np.array([], np.int64),
                                           np.array([], np.int64)], names=KEY)
        return pd.DataFrame({c: np.array([], t) for c, t in STATE.items()}, index=index)

    def __len__(self) -> int:
        return len(self.table)

    # -- one micro-batch (PaneDriver.process for every window with new rows or a due timer) ----------
    def step(self, new: pd.DataFrame, batch: int, watermark: int, processing_time: int) -> tuple[FiredPanes, int]:
        """``new``: the windows that got rows (columns key, start, end, n > 0); returns the panes fired and
        how many windows expired (their state is gone)."""
        self._open(new)
        t = self.table
        self.processed = 0
        if not len(t):
            return self._panes(t, np.zeros(0, bool), [], [], []), 0
        counts = new.set_index(KEY)["n"].reindex(t.index, fill_value=0).to_numpy(np.int64) if len(new) else \
            np.zeros(len(t), np.int64)
        end = t.index.get_level_values("end").to_numpy(np.int64)
        col = {c: t[c].to_numpy(copy=True) for c in STATE}
        step = advance(self.trigger, self.accumulating, col, end, counts, batch, watermark, processing_time)
        fired = self._panes(t, step.emit, step.index, step.timing, step.is_final, step.lo)
        for name, values in col.items():
            t[name] = values
        self.table = t[~step.expiring]
        self.processed = int(step.processed.sum())
        return fired, int(step.expiring.sum())

    def _open(self, new: pd.DataFrame) -> None:
        """New windows enter with a fresh state (PaneDriver.new_window)."""
        if not len(new):
            return
        index = pd.MultiIndex.from_frame(new[KEY])
        fresh = index.difference(self.table.index) if len(self.table) else index
        if not len(fresh):
            return
        state = fresh_state(fresh.get_level_values("end").to_numpy(np.int64), self.lateness)
        opened = pd.DataFrame(state, index=fresh)
        self.table = pd.concat([self.table, opened]) if len(self.table) else opened

    @staticmethod
    def _panes(t: pd.DataFrame, emit: np.ndarray, index: Any, timing: Any, is_final: Any,
               lo: Any = None) -> FiredPanes:
        if not emit.any():
            return FiredPanes.empty()
        keys = t.index[emit]
        return FiredPanes(pd.DataFrame({
            "key": keys.get_level_values("key").to_numpy(object),
            "start": keys.get_level_values("start").to_numpy(np.int64),
            "end": keys.get_level_values("end").to_numpy(np.int64),
            "pane_index": np.asarray(index)[emit].astype(np.int32),
            "pane_timing": np.asarray(timing)[emit].astype(object),
            "is_final": np.asarray(is_final)[emit].astype(bool),
            "lo": np.asarray(lo)[emit].astype(np.int64)}))

    # -- what the operator asks between micro-batches --------------------------------------------
    def timers(self) -> np.ndarray:
        """Each window's event-time timer (PaneDriver.timers)."""
        t = self.table
        return timers_of(self.trigger, t.index.get_level_values("end").to_numpy(np.int64),
                         {c: t[c].to_numpy() for c in ("late", "closed", "cleanup")})

    def processing_timers(self) -> np.ndarray:
        """Each window's processing-time timer (MAX_TIME: none)."""
        return processing_timers_of({c: self.table[c].to_numpy() for c in ("late", "early_at", "late_at")})

    def any_due(self, watermark: int, processing_time: int) -> bool:
        if not len(self.table):
            return False
        due = watermark >= self.timers()
        if self.trigger.processing_time:
            due |= processing_time >= self.processing_timers()
        return bool(due.any())

    def earliest_timer(self) -> int | None:
        """The earliest event-time timer before +infinity (None: none)."""
        timers = self.timers()
        timers = timers[timers < MAX_TIME]
        return int(timers.min()) if len(timers) else None

    def earliest_processing_timer(self, after: int) -> int | None:
        """The earliest processing-time timer after ``after`` (None: none)."""
        if not self.trigger.processing_time:
            return None
        timers = self.processing_timers()
        timers = timers[(timers > after) & (timers < MAX_TIME)]
        return int(timers.min()) if len(timers) else None

    def are_closed(self, windows: pd.MultiIndex) -> np.ndarray:
        """Which of ``windows`` (key, start, end) are tombstones, as an array."""
        closed = self.table["closed"].to_numpy()
        if not closed.any():
            return np.zeros(len(windows), bool)
        return windows.isin(self.table.index[closed])

    def closed(self) -> list[tuple[str, int, int]]:
        """The tombstones: windows whose trigger finished (their late rows are dropped as ``window closed``)."""
        keys = self.table.index[self.table["closed"].to_numpy()]
        return [(str(k), int(s), int(e)) for k, s, e in keys]

    def live_batches(self, batches: set[int]) -> set[int]:
        """Of ``batches``, those a later pane may still read: inside some window's ``[lo, last]``."""
        lo, last = self.table["lo"].to_numpy(), self.table["last"].to_numpy()
        held = lo >= 0
        lo, last = lo[held], last[held]
        return {b for b in batches if bool(((lo <= b) & (b <= last)).any())}

    # -- saved with the operator's commit -------------------------------------------------------
    def to_arrow(self) -> Any:
        import pyarrow as pa

        return pa.Table.from_pandas(self.table.reset_index(), preserve_index=False)

    def restore(self, table: Any) -> None:
        frame = table.to_pandas()
        if not len(frame):
            self.table = self._empty()
            return
        frame["key"] = frame["key"].astype("str")
        for name, unset in UNSET.items():  # a table an earlier version saved, without the column
            frame[name] = frame[name].fillna(unset) if name in frame else unset
        self.table = frame.set_index(KEY).astype(STATE)
