"""The pane driver: turns trigger firings into panes for one (key, window) per micro-batch (GRAMMAR 3-4).

Flink's roles, Beam's rules. A ``PaneDriver`` is built once per query from the plan (trigger, mode,
lateness, evictor); it keeps no per-window data. Each (key, window) has a ``WindowState`` of plain data
that the caller stores (``to_dict``/``from_dict``). A streaming operator, per micro-batch, with ``W`` the
watermark in force (computed at the end of the previous batch) and ``P`` the batch's processing time::

    for (key, start, end), rows in this batch's rows by window, plus every window whose timers are due:
        state = stored state, or driver.new_window(start, end)
        out = driver.process(state, rows, W, P)      # out.pane: aggregate over out.pane.rows
        out.dropped -> metrics / LATE ROWS TO         # (row, 'late' | 'window closed')
        if out.expired: delete the state  else: store state.to_dict(), register driver.timers(state)

``WindowPanes`` is that loop over in-memory states (replay executor, tests). Rows are opaque: ids,
tuples, anything the caller aggregates later. Each call emits at most one pane:

- ``rows``: ACCUMULATING, every row kept so far; DISCARDING, the rows since the previous pane.
- ``timing`` (GRAMMAR 4, Beam's PaneInfo): EARLY while ``W < window_end``; ON_TIME only for the one pane
  fired *because* the watermark reached the end (AFTER WATERMARK's end-of-window firing, EMIT FINAL's pane),
  in a window that received a row before its end; every other pane is LATE, including count and
  processing-time firings after the end (a trigger without AFTER WATERMARK has no ON_TIME pane).
- A firing without new rows emits nothing, except the ON_TIME pane (Beam ``FIRE_ALWAYS``): so an empty
  pane only ever comes from AFTER WATERMARK reaching the end of a window that has rows, or from an
  evictor that evicted every row before the window function.
- ``EVICT`` (Flink): at every pane the evictor runs over the pane's contents (ACCUMULATING: every row kept
  so far; DISCARDING: the rows since the previous pane) in arrival order; EVICT BEFORE aggregates what it
  left, EVICT AFTER aggregates everything; evicted rows leave the window for good (``retain``).
- ``is_final`` is true exactly when the trigger finished with this firing (the window then closes:
  later rows are dropped as ``window closed``) or when the pane is emitted in the call where the window
  expires (``W >= cleanup_time``; what is left is emitted then, as Beam does at garbage collection, which
  is how NEVER and EMIT FINAL fire). Otherwise it is false, and no empty final pane is invented.

Time is integer microseconds (``sqlwin.core.timeunits``); ``MIN_TIME``/``MAX_TIME`` stand for -/+infinity
(the watermark before any row / at end of input, the end of the global window).
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from sqlwin.core.triggers import TriggerContext, TriggerState, build_machine
from sqlwin.errors import SqlwinError
from sqlwin.plan import triggers as plan

MIN_TIME = -(2**63)
MAX_TIME = 2**63 - 1
GLOBAL_WINDOW = (MIN_TIME, MAX_TIME)

DROP_LATE = "late"  # the watermark had reached window_end + allowed lateness
DROP_CLOSED = "window closed"  # the window's trigger had finished
_OPEN = object()  # marks an open session among a batch's new rows


def cleanup_time(window_end: int, allowed_lateness: int) -> int:
    """When a window expires (Flink ``cleanupTime``): the one place lateness meets the window end.

    Rows are still added while ``watermark < cleanup_time``; at ``watermark >= cleanup_time`` the window
    emits what is left (``NEVER``, ``EMIT FINAL``) and its state can go. The global window expires only
    at the end of input (``MAX_TIME``)."""
    if window_end >= MAX_TIME - allowed_lateness:
        return MAX_TIME
    return window_end + allowed_lateness


@dataclass(frozen=True)
class Pane:
    """One firing of one window. ``rows`` is the aggregate's input (everything so far when
    ACCUMULATING, only ``new_rows`` when DISCARDING); ``evicted`` are rows an evictor removed."""

    index: int
    timing: plan.PaneTiming
    is_final: bool
    rows: tuple
    new_rows: tuple
    evicted: tuple = ()


WindowKey = tuple[str, int, int]  # (keys as JSON, window start, window end), microseconds
FIRED_COLUMNS = ("key", "start", "end", "pane_index", "pane_timing", "is_final", "tokens")


def fired_table(columns: Sequence[Any]) -> Any:
    """The panes of a micro-batch as one Arrow table (``FIRED_COLUMNS``), the form Spark reads them in.
    ``tokens`` lists the micro-batches whose stored rows a pane reads."""
    import pyarrow as pa

    types = [pa.string(), pa.int64(), pa.int64(), pa.int32(), pa.string(), pa.bool_(), pa.list_(pa.int64())]
    arrays = [c if isinstance(c, pa.Array) else pa.array(c, t) for c, t in zip(columns, types, strict=True)]
    return pa.table(arrays, names=list(FIRED_COLUMNS))


@dataclass
class FiredPaneList:
    """The panes a per-window driver (``PaneDriver``) fired in one micro-batch, one per window. The columnar
    driver's ``FiredPanes`` answers the same three questions: how many, which micro-batches they read, and
    the panes as a table."""

    pairs: list[tuple[WindowKey, Pane]] = field(default_factory=list)

    def __len__(self) -> int:
        return len(self.pairs)

    def __iter__(self) -> Iterator[tuple[WindowKey, Pane]]:
        return iter(self.pairs)

    def append(self, window: WindowKey, pane: Pane) -> None:
        self.pairs.append((window, pane))

    def batches(self, batch: int) -> set[int]:
        """Every micro-batch some pane reads (a pane's ``rows`` are the micro-batches that added to it)."""
        return {b for _, p in self.pairs for b in p.rows}

    def to_arrow(self, batch: int) -> Any:
        records = [(k, s, e, p.index, p.timing.value, p.is_final, sorted(set(p.rows)))
                   for (k, s, e), p in self.pairs]
        return fired_table([list(c) for c in zip(*records, strict=True)] if records else [[] for _ in FIRED_COLUMNS])


@dataclass(frozen=True)
class Dropped:
    row: Any
    reason: str  # DROP_LATE or DROP_CLOSED


@dataclass(frozen=True)
class BatchOutcome:
    pane: Pane | None
    dropped: tuple[Dropped, ...] = ()
    expired: bool = False  # the window is past its cleanup time: the caller may delete its state


@dataclass(frozen=True)
class Timers:
    """The next instants at which a window must be processed even without rows (None: no timer)."""

    event_time: int | None
    processing_time: int | None


@dataclass
class WindowState:
    """Everything one (key, window) needs between micro-batches, as plain data."""

    start: int
    end: int
    trigger: TriggerState = field(default_factory=TriggerState)
    emitted: list = field(default_factory=list)  # rows already in a pane (kept only when ACCUMULATING)
    pending: list = field(default_factory=list)  # rows since the previous pane
    next_index: int = 0
    non_early_emitted: bool = False  # an ON_TIME or LATE pane was emitted
    had_on_time_rows: bool = False  # a row arrived while watermark < end (so an ON_TIME pane exists)
    closed: bool = False  # the trigger finished: a tombstone until the cleanup time
    expired: bool = False
    # the end-of-window timer went off (the window was evaluated at watermark >= end): as in Beam, a timer
    # fires once, so afterwards only rows, processing-time timers and the expiry make the trigger look again
    end_timer_fired: bool = False

    def to_dict(self) -> dict:
        return {"start": self.start, "end": self.end, "trigger": self.trigger.to_dict(),
                "emitted": list(self.emitted), "pending": list(self.pending), "next_index": self.next_index,
                "non_early_emitted": self.non_early_emitted, "had_on_time_rows": self.had_on_time_rows,
                "closed": self.closed, "expired": self.expired,
                # added after the first format: written when set, and a commit without it reads as not set
                **({"end_timer_fired": True} if self.end_timer_fired else {})}

    @classmethod
    def from_dict(cls, data: dict) -> WindowState:
        fields = dict(data)
        fields["trigger"] = TriggerState.from_dict(data["trigger"])
        fields["emitted"], fields["pending"] = list(data["emitted"]), list(data["pending"])
        return cls(**fields)

    def to_row(self) -> list:
        """``to_dict``'s content by position, the flags as bits and an untouched trigger as null: a snapshot of
        60,000 open count windows took 0.35 s as dicts (0.55 s with their JSON, 17 MB) per micro-batch."""
        trigger = self.trigger.to_dict() if self.trigger.nodes or self.trigger.finished else None
        flags = (self.non_early_emitted | self.had_on_time_rows << 1 | self.closed << 2 | self.expired << 3
                 | self.end_timer_fired << 4)
        return [self.start, self.end, trigger, list(self.emitted), list(self.pending), self.next_index, flags]

    @classmethod
    def from_row(cls, row: list) -> WindowState:
        start, end, trigger, emitted, pending, next_index, flags = row
        return cls(start, end, TriggerState.from_dict(trigger) if trigger else TriggerState(), list(emitted),
                   list(pending), next_index, bool(flags & 1), bool(flags & 2), bool(flags & 4), bool(flags & 8),
                   bool(flags & 16))


class Evictor:
    """Flink's evictors over a window's contents at each firing (``EvictingWindowOperator``): CountEvictor
    keeps the last n rows in arrival order, TimeEvictor the rows with ``ts > max ts - interval``, DeltaEvictor
    the rows whose delta to the last row is below the threshold. A row is kept only when its condition holds,
    so a row whose time or DELTA value is NULL is evicted.

    ``arrival(row)``: the row's place in arrival order, for contents that are not already in that order
    (merged sessions hold each merging window's rows one after the other); None: the order given."""

    def __init__(self, spec: plan.EvictSpec, row_time: Callable[[Any], int | None] | None = None,
                 delta: Callable[[Any, Any], float | None] | None = None, threshold: float | None = None,
                 arrival: Callable[[Any], Any] | None = None):
        self.spec = spec
        self.row_time = row_time
        self.delta = delta
        self.threshold = threshold
        self.arrival = arrival
        ev = spec.evictor
        if isinstance(ev, plan.KeepLastInterval) and row_time is None:
            raise ValueError("KEEP LAST interval needs row_time(row) -> micros")
        if isinstance(ev, plan.DeltaEvictor) and (delta is None or threshold is None):
            raise ValueError("DELTA(expr) < threshold needs delta(row, last_row) and the threshold value")

    @property
    def before(self) -> bool:
        return self.spec.before

    def split(self, rows: Sequence) -> tuple[list, list]:
        """The contents in arrival order, split into (kept, evicted)."""
        ordered = sorted(rows, key=self.arrival) if self.arrival is not None else list(rows)
        keep = self.keep(ordered)
        return ([r for r, k in zip(ordered, keep, strict=True) if k],
                [r for r, k in zip(ordered, keep, strict=True) if not k])

    def keep(self, rows: Sequence) -> list[bool]:
        """Which rows stay (CountEvictor, TimeEvictor, DeltaEvictor); ``rows`` in arrival order."""
        ev = self.spec.evictor
        if not rows:
            return []
        if isinstance(ev, plan.KeepLastRows):
            return [i >= len(rows) - ev.n for i in range(len(rows))]
        if isinstance(ev, plan.KeepLastInterval):
            times = [self.row_time(r) for r in rows]  # type: ignore[misc]
            known = [t for t in times if t is not None]
            if not known:
                return [False] * len(rows)
            newest = max(known)
            return [t is not None and t > newest - ev.micros for t in times]
        last = rows[-1]
        deltas = [self.delta(r, last) for r in rows]  # type: ignore[misc]
        return [d is not None and d < self.threshold for d in deltas]  # type: ignore[operator]


class PaneDriver:
    """Per query: the trigger machine, accumulation mode, lateness and evictor; per call: one window."""

    def __init__(self, emit: plan.EmitSpec | None = None, lateness: plan.LatenessSpec | int = 0, *,
                 global_window: bool = False, evictor: Evictor | None = None):
        self.emit = emit or plan.EmitSpec()
        self.lateness = lateness.allowed if isinstance(lateness, plan.LatenessSpec) else lateness
        if self.lateness < 0:
            raise SqlwinError("ALLOWED LATENESS must not be negative")
        if global_window and plan.uses_watermark(self.emit.trigger):
            raise SqlwinError("a trigger on the watermark (AFTER WATERMARK, EMIT FINAL, EMIT CHANGES) cannot "
                              "fire in the global window, which never ends; use AFTER COUNT or AFTER PROCESSING TIME")
        self.global_window = global_window
        self.machine = build_machine(self.emit.trigger)
        # EMIT FINAL's one pane is its expiry pane, fired because the watermark passed end + lateness
        self._fires_at_expiry = isinstance(self.emit.trigger, plan.EmitFinal)
        self.accumulating = self.emit.mode is plan.AccumulationMode.ACCUMULATING
        self.evictor = evictor

    # --- per window --------------------------------------------------------------------------------
    def new_window(self, start: int, end: int) -> WindowState:
        return WindowState(start, end)

    def cleanup_time(self, state: WindowState) -> int:
        return cleanup_time(state.end, self.lateness)

    def timers(self, state: WindowState) -> Timers:
        """Timers a streaming operator registers for this window: the trigger's, and its expiry."""
        cleanup = self.cleanup_time(state)
        if state.expired:
            return Timers(None, None)
        if state.closed:
            return Timers(cleanup, None)
        event, proc = self.machine.timers(self._context(state, MIN_TIME, MIN_TIME))
        if state.end_timer_fired:  # the trigger's event-time timer is the window's end: gone off already
            event = None
        return Timers(cleanup if event is None else min(event, cleanup), proc)

    def process(self, state: WindowState, rows: Iterable, watermark: int, processing_time: int,
                count: int | None = None) -> BatchOutcome:
        """One micro-batch for one window: ``rows`` arrived in it (maybe none: a timer or no-data batch).

        ``count``: how many input rows ``rows`` stands for, when the caller passes tokens rather than rows
        (the Spark operator passes one token per micro-batch and keeps the rows themselves in Spark).

        ``watermark`` is the one in force for the batch (computed at the end of the previous batch):
        it classifies the rows and drives the trigger, which is evaluated once, after all rows are in.
        Without rows and without a due timer the call changes nothing.
        """
        expiring = watermark >= self.cleanup_time(state)
        added, dropped = self._classify(state, list(rows), expiring)
        ctx = self._context(state, watermark, processing_time)
        if added:
            state.pending.extend(added)
            state.had_on_time_rows = state.had_on_time_rows or watermark < state.end
            ctx.new_rows = len(added) if count is None else count
            self.machine.on_element(ctx)
        pane = None
        live = not (state.closed or state.expired)
        if live and (added or expiring or self._timer_due(ctx, state)) and self.machine.should_fire(ctx):
            finished = self.machine.on_fire(ctx)
            pane = self._emit(state, watermark, final=finished or expiring, fired=True,
                              by_watermark=ctx.end_of_window or (expiring and self._fires_at_expiry))
            if finished:
                self._close(state)
        # the end-of-window timer goes off once: a sub-trigger that starts after it (the second AFTER WATERMARK
        # of an AFTER EACH) waits for a row, so a call without one changes nothing, as Beam's trigger does
        state.end_timer_fired = state.end_timer_fired or watermark >= state.end
        self.machine.on_time_passed(ctx)  # and so does a processing-time timer
        if expiring and not state.expired:
            if pane is None and state.pending:
                pane = self._emit(state, watermark, final=True, fired=False, by_watermark=self._fires_at_expiry)
            self._close(state)
            state.expired = True
        return BatchOutcome(pane, dropped, state.expired)

    def merge(self, states: Sequence[WindowState], start: int, end: int, watermark: int,
              processing_time: int) -> tuple[WindowState, tuple[Dropped, ...]]:
        """Merge session windows into ``[start, end)`` (Beam ``onMerge``): rows and counts add up, the
        earliest timers win. A window closed in any merging window stays closed (Beam ORs the finished
        bits); the unemitted rows of the others are then returned as dropped (``window closed``)."""
        merged = WindowState(start, end)
        if any(s.closed for s in states):
            merged.closed = True
            return merged, tuple(Dropped(r, DROP_CLOSED) for s in states for r in s.pending)
        for s in states:
            merged.emitted.extend(s.emitted)
            merged.pending.extend(s.pending)
        # GRAMMAR 4 (Beam: "the merge result window gets to start fresh if it is new"): a window with new
        # bounds numbers its panes from 0; one that keeps the bounds of a merging window keeps its numbering.
        same = next((s for s in states if (s.start, s.end) == (start, end)), None)
        merged.next_index = same.next_index if same is not None else 0
        merged.non_early_emitted = same.non_early_emitted if same is not None else False
        merged.had_on_time_rows = any(s.had_on_time_rows for s in states)
        self.machine.on_merge(self._context(merged, watermark, processing_time), [s.trigger for s in states])
        return merged, ()

    # --- internals ---------------------------------------------------------------------------------
    def _context(self, state: WindowState, watermark: int, processing_time: int) -> TriggerContext:
        return TriggerContext(state.trigger, state.end, watermark, processing_time)

    def _classify(self, state: WindowState, rows: list, expiring: bool) -> tuple[list, tuple[Dropped, ...]]:
        """Late past the cleanup time (checked first: an expired window keeps no tombstone), then closed."""
        if state.expired or expiring:
            return [], tuple(Dropped(r, DROP_LATE) for r in rows)
        if state.closed:
            return [], tuple(Dropped(r, DROP_CLOSED) for r in rows)
        return rows, ()

    def _timer_due(self, ctx: TriggerContext, state: WindowState) -> bool:
        event, proc = self.machine.timers(ctx)
        return (event is not None and not state.end_timer_fired and ctx.watermark >= event) or \
            (proc is not None and ctx.processing_time >= proc)

    def _timing(self, state: WindowState, watermark: int, by_watermark: bool) -> plan.PaneTiming:
        """GRAMMAR 4 (Beam's PaneInfo): EARLY while ``W < window_end``; ON_TIME only for the one pane fired
        *because* the watermark reached the end (AFTER WATERMARK's end-of-window firing, or the expiry pane
        of EMIT FINAL), and only for a window that received a row before its end; every other pane fired
        after the end is LATE, count and processing-time firings included."""
        if state.non_early_emitted:  # first: a merged session can end after the watermark again
            return plan.PaneTiming.LATE
        if watermark < state.end:
            return plan.PaneTiming.EARLY
        if by_watermark and state.had_on_time_rows:
            return plan.PaneTiming.ON_TIME
        return plan.PaneTiming.LATE

    def _emit(self, state: WindowState, watermark: int, final: bool, fired: bool, by_watermark: bool) -> Pane | None:
        """Make the pane, or none: a firing without new rows emits only the ON_TIME pane (FIRE_ALWAYS)."""
        timing = self._timing(state, watermark, by_watermark)
        if not state.pending and not (fired and timing is plan.PaneTiming.ON_TIME):
            return None
        new_rows = tuple(state.pending)
        contents = state.emitted + state.pending if self.accumulating else list(state.pending)
        rows, evicted = tuple(contents), ()
        if self.evictor is not None:
            kept, gone = self.evictor.split(contents)
            rows, evicted = self.pane_input(contents, kept), tuple(gone)
            contents = kept
        self.retain(state, contents)
        pane = Pane(state.next_index, timing, final, rows, new_rows, evicted)
        state.next_index += 1
        state.non_early_emitted = state.non_early_emitted or timing is not plan.PaneTiming.EARLY
        return pane

    # --- eviction (Flink's EvictingWindowOperator.emitWindowContents) --------------------------------
    def pane_input(self, contents: Sequence, kept: Sequence) -> tuple:
        """What the pane aggregates: the rows left by the evictor (EVICT BEFORE, the default) or every row
        of the contents (EVICT AFTER: the evictor runs after the window function)."""
        return tuple(kept) if self.evictor is None or self.evictor.before else tuple(contents)

    def retain(self, state: WindowState, kept: Sequence) -> None:
        """After a pane: an ACCUMULATING window keeps the rows the evictor left (evicted rows are gone for good:
        later panes never see them); a DISCARDING one keeps nothing. The Spark operator, which evicts in Spark,
        calls this with the rows (tokens) that still hold a kept row."""
        state.emitted = list(kept) if self.accumulating else []
        state.pending = []

    def _close(self, state: WindowState) -> None:
        """The trigger finished or the window expired: keep only the tombstone."""
        state.closed = True
        state.emitted, state.pending = [], []
        state.trigger = TriggerState()


class WindowPanes:
    """Every window's state in memory, keyed ``(key, start, end)``: the operator loop of the module
    docstring, for the replay executor and the tests."""

    def __init__(self, driver: PaneDriver):
        self.driver = driver
        self.states: dict[tuple[Hashable, int, int], WindowState] = {}

    def process(self, rows: Mapping[tuple[Hashable, int, int], Sequence], watermark: int,
                processing_time: int) -> list[tuple[tuple[Hashable, int, int], BatchOutcome]]:
        """One micro-batch: the windows that got rows, then those whose timers are due."""
        due = [w for w, s in self.states.items() if w not in rows and self._due(s, watermark, processing_time)]
        outcomes = []
        for window in [*rows, *due]:
            state = self.states.get(window) or self.driver.new_window(window[1], window[2])
            outcome = self.driver.process(state, rows.get(window, ()), watermark, processing_time)
            if outcome.expired:
                self.states.pop(window, None)
            else:
                self.states[window] = state
            outcomes.append((window, outcome))
        return outcomes

    def assign_sessions(self, rows: Iterable[tuple[Hashable, Any, int]], gap: int, watermark: int,
                        processing_time: int) -> tuple[dict[tuple[Hashable, int, int], list], list[Dropped]]:
        """SESSION windows for a batch of ``(key, row, ts)``: a row opens ``[ts, ts + gap)`` and the sessions
        of a key that overlap or touch merge, open ones included (``PaneDriver.merge``). As in Beam, a row
        whose own ``[ts, ts + gap)`` is past its cleanup time is dropped as late before merging. Returns the
        rows per (merged) window, for ``process``, and the rows dropped."""
        dropped: list[Dropped] = []
        spans: dict[Hashable, list[tuple[int, int, Any]]] = {}
        for key, row, ts in rows:
            if watermark >= cleanup_time(ts + gap, self.driver.lateness):
                dropped.append(Dropped(row, DROP_LATE))
            else:
                spans.setdefault(key, []).append((ts, ts + gap, row))
        groups: dict[tuple[Hashable, int, int], list] = {}
        for key, new in spans.items():
            items = sorted([(w[1], w[2], _OPEN) for w in self.states if w[0] == key] + new, key=lambda i: i[:2])
            clusters: list[list] = []
            for start, end, item in items:
                if clusters and start <= clusters[-1][1]:  # overlapping or touching
                    clusters[-1][1] = max(clusters[-1][1], end)
                    clusters[-1][2].append((start, end, item))
                else:
                    clusters.append([start, end, [(start, end, item)]])
            for start, end, members in clusters:
                window = (key, start, end)
                old = [(key, s, e) for s, e, item in members if item is _OPEN]
                if old and old != [window]:
                    merged, lost = self.driver.merge([self.states.pop(w) for w in old], start, end, watermark,
                                                     processing_time)
                    self.states[window] = merged
                    dropped.extend(lost)
                added = [item for _, _, item in members if item is not _OPEN]
                if added:
                    groups[window] = added
        return groups, dropped

    def _due(self, state: WindowState, watermark: int, processing_time: int) -> bool:
        timers = self.driver.timers(state)
        return ((timers.event_time is not None and watermark >= timers.event_time)
                or (timers.processing_time is not None and processing_time >= timers.processing_time))


class WatermarkTracker:
    """``WATERMARK FOR ts AS ts - delay``: max ts seen minus the delay, never backwards; it advances
    between micro-batches (``after_batch``) and goes to +infinity at the end of input.

    ``WITH IDLE TIMEOUT d`` (GRAMMAR 3): once no row has arrived for ``d`` of processing time, the
    watermark follows the processing-time clock as if event time kept pace with it: at processing time
    ``p``, ``W = max(W, max_ts + (p - p_last) - delay)``, ``p_last`` being when the last row arrived. So a
    window ending at ``e`` closes ``max(d, e - max_ts + delay)`` of processing time after the last row.

    A punctuated watermark (``ON ROWS WHERE``) is this tracker with delay 0 fed only the marker rows' values.
    ``PROCTIME() - INTERVAL lag`` (``lag`` set): the watermark in force for a micro-batch at processing time
    ``p`` is ``p - lag`` (``at_clock``, at its start), whatever its rows say (Flink's TimeLagWatermarkGenerator).
    """

    def __init__(self, delay: int = 0, idle_timeout: int | None = None, lag: int | None = None):
        self.delay = delay
        self.idle_timeout = idle_timeout
        self.lag = lag
        self.current = MIN_TIME
        self.max_ts: int | None = None
        self.last_row_at: int | None = None  # processing time of the micro-batch that brought the last row

    def at_clock(self, processing_time: int | None) -> int:
        """A PROCTIME() - lag watermark at ``processing_time`` (never backwards); others do not move."""
        if self.lag is not None and processing_time is not None:
            self.advance_to(processing_time - self.lag)
        return self.current

    def after_batch(self, timestamps: Iterable[int], processing_time: int | None = None) -> int:
        if self.lag is not None:  # the rows' times do not move it
            return self.at_clock(processing_time)
        ts = [t for t in timestamps if t is not None]
        if ts:
            self.max_ts = max(ts) if self.max_ts is None else max(self.max_ts, *ts)
            self.advance_to(self.max_ts - self.delay)
            self.last_row_at = processing_time
        else:
            self.advance_idle(processing_time)
        return self.current

    def advance_idle(self, processing_time: int | None) -> int:
        """The idle rule alone: where the watermark is at ``processing_time`` if no row comes."""
        if self.idle_at(processing_time):
            self.advance_to(self.max_ts + (processing_time - self.last_row_at) - self.delay)  # type: ignore[operator]
        return self.current

    def idle_at(self, processing_time: int | None) -> bool:
        return (self.idle_timeout is not None and processing_time is not None and self.max_ts is not None
                and self.last_row_at is not None and processing_time - self.last_row_at >= self.idle_timeout)

    def wake_time(self, event_timer: int | None) -> int | None:
        """The processing time at which idleness (or the clock, for a PROCTIME() watermark) moves the watermark
        to ``event_timer`` (None: never)."""
        if self.lag is not None:
            return event_timer + self.lag if event_timer is not None and event_timer < MAX_TIME else None
        if self.idle_timeout is None or self.max_ts is None or self.last_row_at is None or event_timer is None:
            return None
        if event_timer >= MAX_TIME:
            return None
        return self.last_row_at + max(self.idle_timeout, event_timer - self.max_ts + self.delay)

    def advance_to(self, watermark: int) -> int:
        self.current = max(self.current, min(watermark, MAX_TIME))
        return self.current

    def end_of_input(self) -> int:
        self.current = MAX_TIME
        return self.current

    def to_dict(self) -> dict:
        return {"current": self.current, "max_ts": self.max_ts, "last_row_at": self.last_row_at}

    def restore(self, data: dict) -> None:
        self.current = data.get("current", MIN_TIME)
        self.max_ts = data.get("max_ts")
        self.last_row_at = data.get("last_row_at")


def combined(marks: Sequence[tuple[int, bool]]) -> int:
    """The watermark of several inputs, each ``(watermark, idle)``: the smallest of those that are not idle (all
    idle: the largest), so an idle input does not hold the others back (GRAMMAR 3)."""
    active = [w for w, idle in marks if not idle]
    return min(active) if active else max(w for w, _ in marks)


class QueryWatermark:
    """The watermark of a query over several streams (GRAMMAR 3): the minimum of theirs (Flink, and Spark's
    default policy), where a stream that is idle (no row for its IDLE TIMEOUT of processing time, counted
    from its last row or from the query's first micro-batch) does not hold the others back. Never goes back.
    With one stream it is that stream's watermark."""

    def __init__(self, trackers: list[WatermarkTracker]):
        self.trackers = trackers
        self.current = MIN_TIME
        self.started_at: int | None = None

    def idle(self, tracker: WatermarkTracker, processing_time: int | None) -> bool:
        if tracker.idle_timeout is None or processing_time is None:
            return False
        since = tracker.last_row_at if tracker.last_row_at is not None else self.started_at
        return since is not None and processing_time - since >= tracker.idle_timeout

    def all_idle(self, processing_time: int | None) -> bool:
        """Whether every stream is idle at ``processing_time``: then this query's watermark (a window join's side)
        does not hold back a window join over it and another query (``combined``)."""
        return all(self.idle(t, processing_time) for t in self.trackers)

    def idle_from(self) -> int | None:
        """The processing time from which every stream is idle if no row comes (None: a stream has no IDLE
        TIMEOUT, or the query has not started)."""
        starts = [t.last_row_at if t.last_row_at is not None else self.started_at for t in self.trackers]
        if any(s is None or t.idle_timeout is None for s, t in zip(starts, self.trackers, strict=True)):
            return None
        return max(s + t.idle_timeout for s, t in zip(starts, self.trackers, strict=True))  # type: ignore[operator]

    def lift(self, watermark: int) -> int:
        """Never below ``watermark`` from now on: a window join's watermark, which went on without this side while
        it was idle, so that the rows it brings later for windows the join emitted are its late rows."""
        self.current = max(self.current, min(watermark, MAX_TIME))
        return self.current

    def _combine(self, processing_time: int | None) -> int:
        self.current = max(self.current, combined([(t.current, self.idle(t, processing_time))
                                                   for t in self.trackers]))
        return self.current

    def advance_idle(self, processing_time: int | None) -> int:
        if self.started_at is None:
            self.started_at = processing_time
        for tracker in self.trackers:
            tracker.advance_idle(processing_time)
        return self._combine(processing_time)

    def at_clock(self, processing_time: int | None) -> int:
        """At the start of a micro-batch at ``processing_time``: the PROCTIME() - lag streams' watermarks, and so
        the query's, follow the clock (nothing changes for a query without one)."""
        if not any(t.lag is not None for t in self.trackers):
            return self.current
        if self.started_at is None:
            self.started_at = processing_time
        for tracker in self.trackers:
            tracker.at_clock(processing_time)
        return self._combine(processing_time)

    def after_batch(self, max_ts: list[int | None], processing_time: int | None) -> int:
        """``max_ts[i]``: the largest time stream i brought in the micro-batch (None: no row)."""
        if self.started_at is None:
            self.started_at = processing_time
        for tracker, ts in zip(self.trackers, max_ts, strict=True):
            tracker.after_batch([ts] if ts is not None else [], processing_time)
        return self._combine(processing_time)

    def end_of_input(self) -> int:
        for tracker in self.trackers:
            tracker.end_of_input()
        self.current = MAX_TIME
        return self.current

    def wake_time(self, event_timer: int | None, after: int | None = None) -> int | None:
        """The first processing time after ``after`` at which idleness may move the query watermark towards
        ``event_timer``: a stream's own idle advance reaching it, or a stream becoming idle (and so no
        longer holding the others back)."""
        times = [t.wake_time(event_timer) for t in self.trackers]
        starts = [(t.last_row_at if t.last_row_at is not None else self.started_at) for t in self.trackers]
        times += [s + t.idle_timeout for s, t in zip(starts, self.trackers, strict=True)
                  if s is not None and t.idle_timeout is not None]
        times = [t for t in times if t is not None and (after is None or t > after)]
        return min(times) if times else None

    def to_dict(self) -> dict:
        return {"current": self.current, "started_at": self.started_at,
                "streams": [t.to_dict() for t in self.trackers]}

    def restore(self, data: dict) -> None:
        self.current = data.get("current", MIN_TIME)
        self.started_at = data.get("started_at")
        for tracker, saved in zip(self.trackers, data.get("streams", []), strict=False):
            tracker.restore(saved)


class ForwardedWatermark:
    """The watermark of a window operator fed by another one (a cascade's outer windows, a window join): Flink
    forwards a watermark downstream *after* the records its firing emitted, so those records meet the
    watermark before it. Here the upstream's watermark of a micro-batch is handed over (``forward``) before
    the downstream runs that micro-batch over the upstream's panes, and takes effect at its end
    (``after_batch``): the panes are never late for the windows they feed, and the windows they complete
    fire in the next micro-batch, as every window does. The downstream's own rows' times never move it."""

    def __init__(self) -> None:
        self.current = MIN_TIME
        self.pending = MIN_TIME
        self.trackers: list[WatermarkTracker] = []

    def forward(self, watermark: int) -> None:
        self.pending = max(self.pending, min(watermark, MAX_TIME))

    def after_batch(self, max_ts: list[int | None], processing_time: int | None) -> int:
        self.current = max(self.current, self.pending)
        return self.current

    def advance_idle(self, processing_time: int | None) -> int:
        return self.current

    def at_clock(self, processing_time: int | None) -> int:
        return self.current

    def end_of_input(self) -> int:
        self.current = self.pending = MAX_TIME
        return self.current

    def wake_time(self, event_timer: int | None, after: int | None = None) -> int | None:
        return None

    def all_idle(self, processing_time: int | None) -> bool:
        return False  # its upstream's watermark, forwarded: its streams' idleness is the upstream's

    def idle_from(self) -> int | None:
        return None

    def lift(self, watermark: int) -> int:
        self.current = max(self.current, min(watermark, MAX_TIME))  # never above it: a join's is the smallest
        return self.current

    def to_dict(self) -> dict:
        return {"current": self.current, "pending": self.pending}

    def restore(self, data: dict) -> None:
        self.current = data.get("current", MIN_TIME)
        self.pending = data.get("pending", self.current)
