"""The operator's own durable state, one version per micro-batch, beside Spark's checkpoint.

``<location>/sqlwin/`` (any URI: ``sqlwin.streaming.storage``):
- ``begin/<n>.json``: the processing time chosen for micro-batch n, written before it runs, so that a
  re-run after a crash sees the same clock (processing-time triggers and PROCTIME stay exactly-once);
- ``state/<n>.json``: after micro-batch n committed: the watermark, every window's pane state, the rows
  kept per micro-batch, counters. Its presence, whole, is the commit: a re-run of n finds it and does
  nothing. It is written once under its final name (no rename: object stores have no atomic one); a file a
  crash tore is not a commit (``storage.read_json``), and the state before it is kept until it is whole;
- ``state/<n>.<name>.parquet``: a table saved with the commit of micro-batch n, written before ``<n>.json``
  (the columnar pane driver's windows);
- ``rows/<n>/``: parquet, the rows micro-batch n added to open windows (Spark reads them to compute
  panes; they are deleted once no window needs them, so state shrinks back when windows expire).
"""

from __future__ import annotations

import time
from typing import Any

from sqlwin.streaming import storage


def now_micros() -> int:
    return int(time.time() * 1_000_000)


class StateStore:
    def __init__(self, location: str):
        self.root = storage.join(storage.qualify(location), "sqlwin")
        self._read: tuple[int, dict] | None = None  # the commit last_committed read, for load
        self._make_folders()

    def _make_folders(self) -> None:
        for sub in ("begin", "state", "rows"):
            storage.makedirs(storage.join(self.root, sub))

    def __setstate__(self, state: dict) -> None:
        """Unpickled on a Spark Connect server (``sqlwin.streaming.connect``): its folders are made there."""
        self.__dict__.update(state)
        self._read = None
        self._make_folders()

    def _file(self, kind: str, batch: int) -> str:
        return storage.join(self.root, kind, f"{batch}.json")

    def _committed(self) -> list[int]:
        names = storage.listdir(storage.join(self.root, "state"))
        return sorted((int(n[:-5]) for n in names if n.endswith(".json") and n[:-5].isdigit()), reverse=True)

    def last_committed(self) -> int:
        """The newest micro-batch whose commit file is whole."""
        for batch in self._committed():
            data = storage.read_json(self._file("state", batch))
            if data is not None:
                self._read = (batch, data)
                return batch
        return -1

    def load(self, batch: int) -> dict:
        if self._read is not None and self._read[0] == batch:
            return self._read[1]
        data = storage.read_json(self._file("state", batch))
        if data is None:
            raise FileNotFoundError(self._file("state", batch))
        return data

    def begin(self, batch: int, processing_time: int) -> int:
        """The processing time of ``batch``: the one recorded by an earlier attempt, else ``processing_time``."""
        path = self._file("begin", batch)
        recorded = storage.read_json(path)
        if recorded is not None:
            return int(recorded["processing_time"])
        storage.write_json(path, {"processing_time": processing_time})
        return processing_time

    def save_table(self, batch: int, name: str, table: Any) -> None:
        """An Arrow table that belongs to the state of ``batch``: written whole before its commit, as parquet
        (a Spark Connect client reads it through Spark: ``connect.CommittedState``)."""
        storage.write_parquet(self.table_path(batch, name), table)

    def table_path(self, batch: int, name: str) -> str:
        return storage.join(self.root, "state", f"{batch}.{name}.parquet")

    def load_table(self, batch: int, name: str) -> Any:
        return storage.read_parquet(self.table_path(batch, name))

    def commit(self, batch: int, state: dict) -> None:
        storage.write_json(self._file("state", batch), state)
        for kind in ("state", "begin"):
            folder = storage.join(self.root, kind)
            for name in storage.listdir(folder):
                number = name.split(".", 1)[0]
                if number.isdigit() and int(number) < batch:
                    storage.delete(storage.join(folder, name))

    def scratch_file(self, kind: str, batch: int) -> str:
        """``<kind>/<batch>.parquet``, a file only micro-batch ``batch`` reads (the files of others removed)."""
        folder = storage.join(self.root, kind)
        name = f"{batch}.parquet"
        for other in storage.listdir(folder):
            if other != name:
                storage.delete(storage.join(folder, other))
        return storage.join(folder, name)

    def scratch_frame(self, spark: Any, kind: str, batch: int, table: Any, schema: str) -> Any:
        """The Arrow ``table`` the driver holds as Spark reads it, through ``scratch_file``: as a local DataFrame,
        tens of thousands of rows cost seconds per micro-batch (made row by row on the driver, and the optimizer
        evaluates expressions over a LocalRelation row by row every time a query over it is planned)."""
        path = self.scratch_file(kind, batch)
        storage.write_parquet(path, table)
        return spark.read.schema(schema).parquet(path)

    def rows_path(self, batch: int) -> str:
        return storage.join(self.root, "rows", str(batch))

    def write_rows(self, batch: int, table: Any) -> None:
        """``rows/<n>/`` from an Arrow table in this process, replacing the folder as Spark's overwrite does. A
        torn file of a crashed attempt is never read: only committed batches' rows are (``_restore`` deletes
        the others), and a re-run writes the folder again."""
        folder = self.rows_path(batch)
        storage.delete(folder)
        storage.write_parquet(storage.join(folder, "part-00000.parquet"), table)

    def drop_rows(self, batch: int) -> None:
        storage.delete(self.rows_path(batch))

    def row_batches_on_disk(self) -> list[int]:
        return sorted(int(n) for n in storage.listdir(storage.join(self.root, "rows")) if n.isdigit())
