"""Pane engines: which panes a micro-batch fires, given the new rows each window accepted.

The operator hands its engine the accepted new-row counts per window and asks it which panes fire and how
many windows expired, which stored micro-batches a later pane may still read, which windows are closed
(their late rows are dropped as ``window closed``), whether a timer is due and when the next ones come; the
engine commits its windows with the micro-batch. Two engines answer the same questions (a micro-batch's
panes have one interface either way: ``FiredPaneList``, ``FiredPanes``):

- ``WindowStates``: ``sqlwin.core.panes.PaneDriver`` per (key, window), the windows' state a dict that the
  assigners whose windows merge or are numbered edit (sessions; count windows, ``countwindows.CountWindowPanes``);
- ``ColumnarEngine``: ``sqlwin.core.columnar.ColumnarPanes``, every window at once, for the triggers whose
  every decision is a comparison, where a fused scan hands it the counts as a frame (``SessionColumns``: that of
  SESSION windows, which the session assigner merges on its table, ``sqlwin.core.sessionmerge``).

The operator's assigner chooses its engine once, when the operator starts or restores (``pane_engine``).
"""

from __future__ import annotations

from typing import Any

from sqlwin.core.columnar import ColumnarPanes, ComparisonTrigger, FiredPanes
from sqlwin.core.panes import MAX_TIME, FiredPaneList, PaneDriver, WindowKey, WindowState
from sqlwin.streaming.committer import Commit, Durable

Fired = FiredPaneList | FiredPanes  # the panes of a micro-batch: PaneDriver's, or the columnar ones
COUNT_COLUMNS = ["key", "start", "end", "n"]


class WindowStates(Durable):
    """The pane driver run window by window over a dict of their states (``state/<n>.json``'s ``windows``)."""

    changed = False  # a step that changes a window also fires, expires, or follows rows or a moved watermark

    def __init__(self, driver: PaneDriver):
        self.driver = driver
        self.windows: dict[WindowKey, WindowState] = {}

    def __len__(self) -> int:
        return len(self.windows)

    @staticmethod
    def accepted(*columns: Any) -> dict[WindowKey, int]:
        """New-row counts per window from (key, start, end, n) Arrow columns (none: no window)."""
        if not columns:
            return {}
        keys, starts, ends, counts = (c.to_pylist() for c in columns)
        return dict(zip(zip(keys, starts, ends, strict=True), counts, strict=True))

    def drive(self, accepted: dict[WindowKey, int], batch: int, watermark: int, processing_time: int,
              token: int) -> tuple[FiredPaneList, int]:
        """The pane driver over the windows that got rows and those whose timers are due: (panes, expired).
        ``token`` is what a pane records for the rows this micro-batch added: where they are stored."""
        fired = FiredPaneList()
        expired = 0
        due = [w for w, s in self.windows.items() if w not in accepted and self.is_due(s, watermark, processing_time)]
        for window in [*accepted, *due]:
            state = self.windows.get(window) or self.driver.new_window(window[1], window[2])
            count = accepted.get(window, 0)
            outcome = self.driver.process(state, [token] if count else [], watermark, processing_time, count=count)
            if outcome.pane is not None:
                fired.append(window, outcome.pane)
            if outcome.expired:
                expired += 1
                self.windows.pop(window, None)
            else:
                self.windows[window] = state
        return fired, expired

    def is_due(self, state: WindowState, watermark: int, processing_time: int) -> bool:
        timers = self.driver.timers(state)
        return ((timers.event_time is not None and watermark >= timers.event_time)
                or (timers.processing_time is not None and processing_time >= timers.processing_time))

    def any_due(self, watermark: int, processing_time: int) -> bool:
        return any(self.is_due(s, watermark, processing_time) for s in self.windows.values())

    def closed(self) -> list[WindowKey]:
        """The tombstones: windows whose trigger finished, which drop their late rows as ``window closed``."""
        return [k for k, s in self.windows.items() if s.closed and not s.expired]

    def live_batches(self, stored: set[int]) -> set[int]:
        """Of the ``stored`` micro-batches, those a later pane may read: some open window's tokens."""
        return {b for s in self.windows.values() for b in (*s.emitted, *s.pending)} & stored

    def timers(self, now: int) -> tuple[list[int], list[int]]:
        """The processing-time timers after ``now`` and the event-time timers before +infinity."""
        timers = [self.driver.timers(s) for s in self.windows.values()]
        return ([t.processing_time for t in timers if t.processing_time is not None and t.processing_time > now],
                [t.event_time for t in timers if t.event_time is not None and t.event_time < MAX_TIME])

    def snapshot(self, commit: Commit) -> dict:
        return {"columnar": False, "windows": [[k, s, e, st.to_row()] for (k, s, e), st in self.windows.items()]}

    def restore(self, commit: Commit) -> None:
        """From ``snapshot``'s rows, or from the dicts of commits written before them (``WindowState.to_dict``)."""
        self.windows = {(k, s, e): WindowState.from_dict(st) if isinstance(st, dict) else WindowState.from_row(st)
                        for k, s, e, st in commit.data["windows"]}


class ColumnarEngine(Durable):
    """``ColumnarPanes`` over a frame of counts; its windows are saved as a table with the commit."""

    changed = False
    placeable = True  # ``keyedstate.Placement`` may move its windows to Spark (KeyedPanes steps them there)

    def __init__(self, panes: ColumnarPanes):
        self.panes = panes

    @classmethod
    def of(cls, driver: PaneDriver) -> ColumnarEngine | None:
        """The engine for ``driver``'s trigger, if every decision of that trigger is a comparison."""
        trigger = ComparisonTrigger.of(driver.emit)
        return cls(ColumnarPanes(trigger, driver.lateness, driver.accumulating)) if trigger else None

    @staticmethod
    def continues(committed: dict | None) -> bool:
        """Whether it goes on from ``committed``: not from windows PaneDriver saved (an earlier version's)."""
        return committed is None or bool(committed.get("columnar")) or not committed["windows"]

    def __len__(self) -> int:
        return len(self.panes)

    @staticmethod
    def accepted(*columns: Any) -> Any:
        """New-row counts per window as a frame (key, start, end, n) from Arrow columns (none: no window)."""
        import pandas as pd

        if not columns:
            return pd.DataFrame({n: [] for n in COUNT_COLUMNS}).astype({"start": "int64", "end": "int64", "n": "int64"})
        return pd.DataFrame({n: c.to_numpy(zero_copy_only=False) for n, c in zip(COUNT_COLUMNS, columns, strict=True)})

    def drive(self, accepted: Any, batch: int, watermark: int, processing_time: int,
              token: int) -> tuple[FiredPanes, int]:
        """As ``WindowStates.drive``; a pane reads the micro-batches ``[lo, token]`` since its window's first
        (a streaming table's ``token`` is ``batch``; a planned replay's, the table micro-batch stepped)."""
        return self.panes.step(accepted, token, watermark, processing_time)

    def any_due(self, watermark: int, processing_time: int) -> bool:
        return self.panes.any_due(watermark, processing_time)

    def closed(self) -> list[WindowKey]:
        return self.panes.closed()

    def live_batches(self, stored: set[int]) -> set[int]:
        return self.panes.live_batches(stored)

    def timers(self, now: int) -> tuple[list[int], list[int]]:
        """The earliest processing-time timer after ``now`` and the earliest event-time one (each list holds
        one or none: the operator asks for the earliest only)."""
        earliest, processing = self.panes.earliest_timer(), self.panes.earliest_processing_timer(now)
        return [processing] if processing is not None else [], [earliest] if earliest is not None else []

    def snapshot(self, commit: Commit) -> dict:
        commit.save_table("windows", self.panes.to_arrow())  # before the commit: it is part of it
        return {"columnar": True, "windows": []}

    def restore(self, commit: Commit) -> None:
        if commit.data.get("columnar"):
            self.panes.restore(commit.table("windows"))


class SessionColumns(ColumnarEngine):
    """The columnar engine of SESSION windows, which merge (``sqlwin.core.sessionmerge``) in the driver: the
    executors' step (``KeyedPanes``) joins a window's state by its bounds, which a merge changes."""

    placeable = False
