"""Session windows merging on the columnar pane engine: Beam's ``onMerge`` for every merging window at once.

A micro-batch's own sessions ``(key, start, end, n)`` and the open sessions of their keys merge where they
overlap or touch (``sessions._clusters``, ``WindowPanes.assign_sessions``); windows that merge combine their
state as ``PaneDriver.merge`` and the trigger machines' ``on_merge`` do, here as grouped array operations:
counts add up, the earliest processing-time timer wins, a window keeps its pane numbering only if the merged
window has its bounds, and AFTER WATERMARK's merged window is past its end-of-window firing only if every
merging window was and the watermark has reached the new end (else its early firing state merges).

Only for triggers that never finish (``sessions.never_finishes``: no session is ever closed, so no rows are
dropped as ``window closed`` by a merge) and ACCUMULATING panes, whose input is every stored micro-batch since
the window's first (``lo``): a merged window reads from the earliest of its members', which holds exactly their
rows. DISCARDING panes read only what no earlier pane of the member read, which a range cannot say after a
merge; AFTER EACH runs one step at a time, which a merge would have to re-run. Both stay on ``PaneDriver``.
``tests/test_columnar_panes.py`` checks the merge against ``WindowPanes.assign_sessions`` on generated
histories.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from sqlwin.core.columnar import KEY, STATE, ColumnarPanes, ComparisonTrigger, fresh_state
from sqlwin.core.panes import MAX_TIME


def merges_sessions(trigger: ComparisonTrigger, accumulating: bool) -> bool:
    """Whether the columnar engine may drive session windows of ``trigger``: one that never finishes (the caller
    checks that), ACCUMULATING or firing only when the window expires, and no AFTER EACH."""
    return not trigger.each and trigger.until is None and (accumulating or not (trigger.watermark or trigger.alone))


def merge_sessions(panes: ColumnarPanes, spans: pd.DataFrame, watermark: int) -> pd.DataFrame:
    """Merge the micro-batch's sessions ``spans`` (key, start, end, n) into ``panes``' open windows (edited in
    place); returns the new-row counts per (merged) window, the frame ``ColumnarPanes.step`` takes."""
    counts = pd.DataFrame({"key": pd.Series([], dtype=object), "start": np.array([], np.int64),
                           "end": np.array([], np.int64), "n": np.array([], np.int64)})
    if not len(spans):
        return counts
    table = panes.table
    touched = table.index.get_level_values("key").isin(pd.unique(spans["key"])) if len(table) else \
        np.zeros(0, bool)
    old = table[touched].reset_index()
    items = pd.concat([old[KEY].assign(n=-1), spans[[*KEY, "n"]]], ignore_index=True)
    items["old"] = np.r_[np.arange(len(old)), np.full(len(spans), -1)]
    items = items.astype({"start": np.int64, "end": np.int64, "n": np.int64})
    items = items.sort_values(["key", "start", "end"], kind="stable").reset_index(drop=True)
    # a new cluster where the key changes or the span starts after every earlier span of the key ends
    reach = items.groupby("key", sort=False)["end"].cummax()
    before = reach.groupby(items["key"], sort=False).shift()
    cluster = (before.isna() | (items["start"] > before)).cumsum().to_numpy()
    items["cluster"] = cluster
    bounds = items.groupby("cluster").agg(key=("key", "first"), start=("start", "min"), end=("end", "max"))
    items = items.join(bounds[["start", "end"]].rename(columns={"start": "cs", "end": "ce"}), on="cluster")
    fresh = items[items["old"] < 0]
    counts = fresh.groupby("cluster").agg(n=("n", "sum")).join(bounds)[[*KEY, "n"]].reset_index(drop=True)
    members = items[items["old"] >= 0]
    # clusters whose windows change: more than one open window, or one whose bounds grow
    grows = (members["start"] != members["cs"]) | (members["end"] != members["ce"])
    changed = members.groupby("cluster")["old"].transform("size").gt(1) | grows
    merging = members[changed.to_numpy()]
    if len(merging):
        merged = _merged(panes, old.iloc[merging["old"].to_numpy()].reset_index(drop=True),
                         merging["cluster"].to_numpy(), bounds, watermark)
        keep = np.ones(len(table), bool)
        keep[np.flatnonzero(touched)[merging["old"].to_numpy()]] = False
        panes.table = pd.concat([table[keep], merged]) if keep.any() else merged
    return counts


def _merged(panes: ColumnarPanes, states: pd.DataFrame, cluster: np.ndarray, bounds: pd.DataFrame,
            watermark: int) -> pd.DataFrame:
    """The merged windows' state (``PaneDriver.merge``), one row per cluster of merging windows ``states``."""
    trig = panes.trigger
    group = pd.Series(cluster)
    ids = pd.unique(cluster)
    where = bounds.loc[ids]
    end = where["end"].to_numpy(np.int64)
    state = fresh_state(end, panes.lateness)
    by = states.assign(cluster=cluster).groupby("cluster", sort=False)

    def total(column: str, how: str) -> np.ndarray:
        return by[column].agg(how).reindex(ids).to_numpy()

    if total("closed", "any").any():
        raise AssertionError("a trigger that never finishes closed a session")
    state["pending"] = total("pending", "any")
    state["on_time_rows"] = total("on_time_rows", "any")
    lo = states["lo"].where(states["lo"] >= 0, np.iinfo(np.int64).max)
    low = lo.groupby(group.to_numpy(), sort=False).min().reindex(ids).to_numpy()
    state["lo"] = np.where(low == np.iinfo(np.int64).max, -1, low)
    state["last"] = total("last", "max")
    # a window that keeps the bounds of a merging one keeps its pane numbering (Beam: a new window starts fresh)
    same = ((states["start"].to_numpy() == where["start"].reindex(cluster).to_numpy()) &
            (states["end"].to_numpy() == where["end"].reindex(cluster).to_numpy()))
    kept = states[same].assign(cluster=cluster[same]).set_index("cluster").reindex(ids)
    state["next_index"] = kept["next_index"].fillna(0).to_numpy(np.int64)
    state["non_early"] = kept["non_early"].fillna(False).to_numpy(bool)
    # AfterWatermarkMachine.on_merge: past the end-of-window firing if every merging window was and the
    # watermark has reached the merged end; then the late sub-trigger merges, else the early one
    late = total("late", "all") & (watermark >= end) if trig.watermark else np.zeros(len(ids), bool)
    state["late"] = late
    early_count, late_count = total("early_count", "sum"), total("late_count", "sum")
    early_at, late_at = total("early_at", "min"), total("late_at", "min")
    state["early_count"] = np.where(late, 0, early_count)
    state["early_at"] = np.where(late, MAX_TIME, early_at)
    state["late_count"] = np.where(late, late_count, 0)
    state["late_at"] = np.where(late, late_at, MAX_TIME)
    index = pd.MultiIndex.from_arrays([where["key"].to_numpy(object), where["start"].to_numpy(np.int64), end],
                                      names=KEY)
    return pd.DataFrame({c: np.asarray(state[c]).astype(t) for c, t in STATE.items()}, index=index)
