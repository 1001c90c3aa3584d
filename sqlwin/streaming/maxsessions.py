"""SESSION windows with MAX_DURATION in the custom streaming path (GRAMMAR 1).

A max-duration session is cut from its *natural* session (the rows of a key whose spans ``[ts, ts + gap)``
overlap or touch) by a scan in ts order: a row at or past ``start + max_duration`` starts a new session.
So a row that arrives inside a natural session can move every later cut of it: windows split and
regroup, which Beam's merging windows (union only) do not express. Per micro-batch, with ``W`` the
watermark in force:

1. A row whose own window ``[ts, ts + min(gap, max_duration))`` is past ``W - lateness`` is dropped as
   late (as for other sessions). The others are kept, whatever the carrier's WHERE says (a row filtered
   out still shapes the sessions), in ``max_sessions/rows/<n>``.
2. The micro-batch's natural sessions merge with the open natural sessions of their key (``clusters``);
   each cluster that got rows is cut again, by the batch backend's own SESSION plan over all its kept rows.
3. Each new window takes over the pane state of the old window with its bounds, or else merges the states
   of the old windows it shares rows with (``PaneDriver.merge``: a window with new bounds numbers its
   panes from 0; the rows a pane reads are found by key and time, as for every session).

A cluster is forgotten once the watermark is past its reach plus the lateness (its windows have expired),
and its rows' files are deleted at the start of the next micro-batch (``count_windows`` does the same).
"""

from __future__ import annotations

from collections import defaultdict
from typing import Any

from sqlwin.core.panes import DROP_CLOSED, DROP_LATE, MIN_TIME
from sqlwin.streaming import storage
from sqlwin.streaming.committer import Commit
from sqlwin.streaming.context import OperatorContext
from sqlwin.streaming.sessions import SessionAssigner, _clusters


class MaxDurationSessions(SessionAssigner):
    STATE_KEY = "max_sessions"  # its part of the operator's committed state (``state/<n>.json``)

    def keeps_partials(self) -> bool:
        return False  # a cut session does not hold whole micro-batch sessions: the rows are re-cut

    def __init__(self, operator: OperatorContext):
        super().__init__(operator)
        self.root = storage.join(operator.store.root, "max_sessions")
        self.view = f"{operator.views.batch}_maxs"
        self.clusters: dict[str, list[list]] = {}  # key -> [[start, reach, [batches of its kept rows]], ...]
        self.kept: dict[str, int] = {}  # batch -> rows kept in max_sessions/rows/<batch>

    def snapshot(self, commit: Commit) -> dict:
        return {self.STATE_KEY: {"clusters": self.clusters, "kept": self.kept}}

    def restore(self, commit: Commit) -> None:
        data = commit.data.get(self.STATE_KEY)
        if data:
            self.clusters, self.kept = data["clusters"], data["kept"]

    def delete_uncommitted(self) -> None:
        self._delete_unreferenced()

    @property
    def state_rows(self) -> int:
        return sum(self.kept.values())

    def _path(self, batch: int | str) -> str:
        return storage.join(self.root, "rows", str(batch))

    def _delete_unreferenced(self) -> None:
        for name in storage.listdir(storage.join(self.root, "rows")):
            if name not in self.kept:
                storage.delete(self._path(name))

    # -- a micro-batch ------------------------------------------------------------------------
    def assign_rows(self, spark: Any, batch: int, watermark: int) -> dict:
        from pyspark.sql import functions as F

        op = self.op
        spec = op.shape.window
        self._forget(watermark)
        ts = F.col(f"`{spec.time_col}`")
        ts_us = F.unix_micros(ts)
        gap = self.gap(spark)
        own_end = ts_us + F.least(gap, F.lit(spec.max_duration))
        rows = spark.table(op.views.batch)
        late_parts: list = []
        valid = ts.isNotNull() & (gap > 0)
        late = F.coalesce(valid & (own_end <= F.lit(max(watermark - op.shape.lateness, MIN_TIME))), F.lit(False))
        rows = rows.withColumn("__late", late).persist()
        cached = [rows]
        try:
            late_count = rows.where("__late").count()
            if late_count:
                late_parts.append(rows.where("__late").select(
                    *[F.col(f"`{c}`") for c in op.relation_columns], ts.alias("window_start"),
                    F.timestamp_micros(own_end).alias("window_end"), F.lit(DROP_LATE).alias("reason")))
            columns = [c for c in rows.columns if c != "__late"]
            kept = rows.where(~F.col("__late")).select(*columns)
            kept.createOrReplaceTempView(op.views.batch)
            spans = kept.where(F.coalesce(valid, F.lit(False))).select(
                F.expr(self._key_json()).alias("__key"), ts_us.alias("__ts"), (ts_us + gap).alias("__end"))
            spans.createOrReplaceTempView(f"{self.view}_spans")
            natural = spark.sql(_NATURAL.format(spans=f"{self.view}_spans")).collect()
            if natural:
                kept.write.mode("overwrite").parquet(self._path(batch))
                self.kept[str(batch)] = sum(int(r["n"]) for r in natural)
            affected = self._merge_clusters(natural, batch)
            accepted: dict = {}
            closed_count = 0
            if affected:
                windows = self._cut(spark, affected)
                kept.createOrReplaceTempView(op.views.batch)
                assigned = spark.sql(op.query.assign_sql).persist()
                cached.append(assigned)
                accepted, closed_count = self._reconcile(spark, assigned, affected, windows, batch, watermark,
                                                         late_parts)
            op.write_late(late_parts, batch, watermark, late_count + closed_count)
        finally:
            for df in cached:
                df.unpersist()
        return accepted

    def _key_json(self) -> str:
        """``__key`` of a stream row, as the assignment computes it from the pane keys (the PARTITION BY)."""
        keys = self.op.shape.keys
        if not keys:
            return "'{}'"
        fields = ", ".join(f"'__k{i}', `{k.name}`" for i, k in enumerate(keys))
        return f"TO_JSON(NAMED_STRUCT({fields}))"

    def _forget(self, watermark: int) -> None:
        """Clusters whose windows have all expired (reach + lateness <= W), and files no cluster needs."""
        lateness = self.op.shape.lateness
        for key in list(self.clusters):
            alive = [c for c in self.clusters[key] if c[1] + lateness > watermark]
            if alive:
                self.clusters[key] = alive
            else:
                del self.clusters[key]
        needed = {str(b) for cs in self.clusters.values() for c in cs for b in c[2]}
        self.kept = {b: n for b, n in self.kept.items() if b in needed}
        self._delete_unreferenced()

    def _merge_clusters(self, natural: list, batch: int) -> list[tuple[str, int, int, list[int]]]:
        """The micro-batch's natural sessions merged into the open clusters; returns the clusters that got
        rows: (key, start, reach, batches)."""
        by_key: dict[str, list] = defaultdict(list)
        for r in natural:
            by_key[r["__key"]].append((int(r["s"]), int(r["e"]), (True, [batch])))
        affected = []
        for key, new in by_key.items():
            old = [(s, e, (False, list(bs))) for s, e, bs in self.clusters.get(key, [])]
            merged = []
            for start, reach, members in _clusters(old + new):
                batches = sorted({b for _, _, (_, bs) in members for b in bs})
                merged.append([start, reach, batches])
                if any(fresh for _, _, (fresh, _) in members):
                    affected.append((key, start, reach, batches))
            self.clusters[key] = merged
        return affected

    def _cut(self, spark: Any, affected: list) -> dict[str, list[tuple[int, int]]]:
        """The windows of the affected clusters, by the batch backend's SESSION plan over all their rows."""
        from pyspark.sql import functions as F

        op = self.op
        files = [self._path(b) for b in sorted({b for *_, bs in affected for b in bs}) if str(b) in self.kept]
        ranges = spark.createDataFrame([(s, e) for _, s, e, _ in affected], "__cs bigint, __ce bigint")
        spec = op.shape.window
        us = F.unix_micros(F.col(f"`{spec.time_col}`"))
        rows = spark.read.parquet(*files)
        inside = rows.join(F.broadcast(ranges), (us >= F.col("__cs")) & (us < F.col("__ce")), "left_semi")
        inside.createOrReplaceTempView(op.views.batch)
        windows: dict[str, list[tuple[int, int]]] = defaultdict(list)
        wanted = {(k, s, e) for k, s, e, _ in affected}
        for r in spark.sql(op.query.assign_sql).select("__key", "__ws", "__we").distinct().collect():
            key, ws, we = r["__key"], int(r["__ws"]), int(r["__we"])
            if any(k == key and s <= ws < e for k, s, e in wanted):
                windows[key].append((ws, we))
        return windows

    def _reconcile(self, spark: Any, assigned: Any, affected: list, windows: dict, batch: int, watermark: int,
                   late_parts: list) -> tuple[dict, int]:
        """New windows of the affected clusters take over or merge the old windows' pane state; the micro-batch's
        rows are counted into them (or dropped, if the window's trigger had finished)."""
        from pyspark.sql import functions as F

        op = self.op
        marks = [(k, ws, we) for k, ws_we in windows.items() for ws, we in ws_we]
        counts: dict[tuple, int] = {}
        if marks:
            frame = spark.createDataFrame(marks, "__key string, __cs bigint, __ce bigint")
            joined = assigned.join(F.broadcast(frame), (assigned["__key"] == frame["__key"]) &
                                   (F.col("__ts") >= F.col("__cs")) & (F.col("__ts") < F.col("__ce")))
            for r in joined.groupBy(frame["__key"], "__cs", "__ce").count().collect():
                counts[(r[0], int(r["__cs"]), int(r["__ce"]))] = int(r["count"])
        accepted: dict = {}
        closed: dict = {}
        lost: list = []
        for key, start, reach, _ in affected:
            old = [w for w in op.windows if w[0] == key and start <= w[1] < reach]
            states = {w: op.windows.pop(w) for w in old}
            for ws, we in sorted(windows.get(key, [])):
                window = (key, ws, we)
                new_rows = counts.get(window, 0)
                if window in states:
                    state = states[window]
                else:
                    sharing = [states[w] for w in old if w[1] < we and ws < w[2]]
                    state = op.driver.merge(sharing, ws, we, watermark, op.current_processing_time)[0] \
                        if sharing else None
                    if state is not None and state.closed:
                        lost += [(key, max(s.start, ws), min(s.end, we), sorted(set(s.pending)), ws, we)
                                 for s in sharing if s.pending and not s.closed]
                if state is None and not new_rows:
                    continue
                if state is not None:
                    op.windows[window] = state
                if state is not None and state.closed:
                    if new_rows:
                        closed[window] = new_rows
                else:
                    accepted[window] = new_rows
        stored = assigned
        closed_count = sum(closed.values())
        if closed:
            frame = spark.createDataFrame(list(closed), "__key string, __cs bigint, __ce bigint")
            hit = (assigned["__key"] == frame["__key"]) & (F.col("__ts") >= F.col("__cs")) & \
                (F.col("__ts") < F.col("__ce"))
            gone = assigned.join(F.broadcast(frame), hit).select(
                *[F.col(f"`{c}`") for c in op.relation_columns], F.timestamp_micros("__cs").alias("window_start"),
                F.timestamp_micros("__ce").alias("window_end"), F.lit(DROP_CLOSED).alias("reason"))
            late_parts.append(gone)
            stored = assigned.join(F.broadcast(frame), hit, "left_anti")
        if lost:
            earlier = self._stored_rows_of(spark, lost).persist()
            closed_count += earlier.count()
            late_parts.append(earlier)
        if sum(accepted.values()):
            op.rows.write(stored, batch, sum(accepted.values()))
        return {w: n for w, n in accepted.items() if n or w in op.windows}, closed_count


# The micro-batch's natural sessions per key (no max_duration): a span starts a new one when its ts is past
# the reach of every earlier span of its key (touching spans join), as the batch backend's SESSION plan.
_NATURAL = """
SELECT __key, MIN(__ts) AS s, MAX(__end) AS e, COUNT(*) AS n FROM (
  SELECT *, SUM(__new) OVER (PARTITION BY __key ORDER BY __ts, __new DESC
                             ROWS BETWEEN UNBOUNDED PRECEDING AND CURRENT ROW) AS __sid FROM (
    SELECT *, CASE WHEN __ts <= MAX(__end) OVER (PARTITION BY __key ORDER BY __ts
                                                  ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING)
              THEN 0 ELSE 1 END AS __new FROM {spans}))
GROUP BY __key, __sid
"""
