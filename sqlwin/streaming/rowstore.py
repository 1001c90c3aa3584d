"""The stored rows of the operator: ``rows/<n>/``, what micro-batch n added to open windows.

Rows never cross into Python: each micro-batch's accepted rows (or their partial aggregates) are written as
parquet, by Spark or, for partial rows the driver already holds as Arrow, by this process; a fired pane reads
the micro-batches its tokens name (minus the rows an evictor evicted). Which micro-batches are stored, and how
many rows each, is part of the commit (``state/<n>.json``'s ``rows``); a micro-batch no open window refers to
is forgotten, and its folder deleted once the commit that forgot it is on disk, so state shrinks as windows
expire.
"""

from __future__ import annotations

from typing import Any

from sqlwin.streaming.committer import Commit, Durable
from sqlwin.streaming.context import OperatorContext


class StoredRows(Durable):
    def __init__(self, operator: OperatorContext, evictor: Any):
        self.op = operator
        self.evictor = evictor  # stored rows carry their arrival order (``annotate``); panes read the survivors
        self.by_batch: dict[int, int] = {}  # micro-batch -> rows it stored
        self.dead: list[int] = []  # forgotten micro-batches, deleted once the commit is on disk

    @property
    def state_rows(self) -> int:
        return sum(self.by_batch.values())

    def write(self, rows: Any, batch: int, count: int | None) -> None:
        """Keep the rows (a DataFrame) micro-batch ``batch`` added to open windows, for the panes that read them;
        ``count`` of them (None: counted by the writing job itself)."""
        from pyspark.sql import Observation
        from pyspark.sql import functions as F

        rows = rows.withColumn("__mb", F.lit(batch).cast("bigint")).withColumn("__present", F.lit(True))
        rows = self.evictor.annotate(rows)
        observation = Observation() if count is None else None
        if observation is not None:
            rows = rows.observe(observation, F.count(F.lit(1)).alias("rows"))
        count_column = ["__n"] if "__n" in rows.columns else []  # partial rows' counts: what the keyed engine reads
        rows.select(*self.op.rows_schema.fieldNames(), *count_column).write.mode("overwrite") \
            .parquet(self.op.store.rows_path(batch))
        self.by_batch[batch] = count if observation is None else int(observation.get["rows"])

    def write_arrow(self, table: Any, batch: int, count: int) -> None:
        """``write`` for partial rows the driver already holds as Arrow (a fused scan's result): written by
        this process, not by another Spark job over the scan."""
        import numpy as np
        import pyarrow as pa

        n = table.num_rows
        own = {"__mb": pa.array(np.full(n, batch, np.int64)), "__present": pa.array(np.ones(n, np.bool_))}
        names = self.op.rows_schema.fieldNames()
        if "__n" in table.column_names:  # partial rows' counts: what the keyed engine reads, if the windows move
            own["__n"] = table["__n"].cast(pa.int64())
            names = [*names, "__n"]
        self.op.store.write_rows(batch, pa.table([own[c] if c in own else table[c] for c in names], names=names))
        self.by_batch[batch] = count

    def written(self, batch: int, count: int) -> None:
        """``rows/<batch>/`` was written by the caller's own Spark job (the keyed engine's scan)."""
        self.by_batch[batch] = count

    def read(self, spark: Any, batches: set[int] | None) -> Any:
        """The stored rows of ``batches`` that the panes read (every row an evictor evicted before left out)."""
        schema = self.op.rows_schema
        paths = [self.op.store.rows_path(b) for b in sorted(batches or ()) if b in self.by_batch]
        rows = spark.read.schema(schema).parquet(*paths) if paths else spark.createDataFrame([], schema)
        return self.evictor.surviving(spark, rows, batches)

    def forget(self, live: set[int]) -> None:
        """Forget the micro-batches not in ``live`` (no open window refers to them any more)."""
        self.dead += [b for b in self.by_batch if b not in live]
        for batch in self.dead:
            self.by_batch.pop(batch, None)

    # -- durable state ------------------------------------------------------------------------
    def snapshot(self, commit: Commit) -> dict:
        return {"rows": {str(b): n for b, n in self.by_batch.items()}}

    def restore(self, commit: Commit) -> None:
        self.by_batch = {int(b): n for b, n in commit.data["rows"].items()}
        self.dead = []

    def delete_uncommitted(self) -> None:
        for batch in self.op.store.row_batches_on_disk():
            if batch not in self.by_batch:
                self.op.store.drop_rows(batch)

    def committed(self) -> None:
        for batch in self.dead:  # only once committed: a re-run of this batch after a crash still reads them
            self.op.store.drop_rows(batch)
        self.dead = []
