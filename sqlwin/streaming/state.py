"""The operator's own durable state, one version per micro-batch, beside Spark's checkpoint.

``<location>/sqlwin/``:
- ``begin/<n>.json``: the processing time chosen for micro-batch n, written before it runs, so that a
  re-run after a crash sees the same clock (processing-time triggers and PROCTIME stay exactly-once);
- ``state/<n>.json``: after micro-batch n committed: the watermark, every window's pane state, the rows
  kept per micro-batch, counters. Its presence is the commit: a re-run of n finds it and does nothing;
- ``state/<n>.<name>.parquet``: a table saved with the commit of micro-batch n, written before ``<n>.json``
  (the columnar pane driver's windows);
- ``rows/<n>/``: parquet, the rows micro-batch n added to open windows (Spark reads them to compute
  panes; they are deleted once no window needs them, so state shrinks back when windows expire).
"""

from __future__ import annotations

import json
import os
import shutil
import time
from typing import Any


def now_micros() -> int:
    return int(time.time() * 1_000_000)


class StateStore:
    def __init__(self, location: str):
        self.root = os.path.join(os.path.abspath(location), "sqlwin")
        self._make_folders()

    def _make_folders(self) -> None:
        for sub in ("begin", "state", "rows"):
            os.makedirs(os.path.join(self.root, sub), exist_ok=True)

    def __setstate__(self, state: dict) -> None:
        """Unpickled on a Spark Connect server (``sqlwin.streaming.connect``): its folders are made there."""
        self.__dict__.update(state)
        self._make_folders()

    def _file(self, kind: str, batch: int) -> str:
        return os.path.join(self.root, kind, f"{batch}.json")

    def last_committed(self) -> int:
        batches = [int(f[:-5]) for f in os.listdir(os.path.join(self.root, "state")) if f.endswith(".json")]
        return max(batches, default=-1)

    def load(self, batch: int) -> dict:
        with open(self._file("state", batch)) as f:
            return json.load(f)

    def begin(self, batch: int, processing_time: int) -> int:
        """The processing time of ``batch``: the one recorded by an earlier attempt, else ``processing_time``."""
        path = self._file("begin", batch)
        if os.path.exists(path):
            with open(path) as f:
                return int(json.load(f)["processing_time"])
        _write_json(path, {"processing_time": processing_time})
        return processing_time

    def save_table(self, batch: int, name: str, table: Any) -> None:
        """An Arrow table that belongs to the state of ``batch``: written (durably) before its commit, as
        parquet (a Spark Connect client reads it through Spark: ``connect.CommittedState``)."""
        import pyarrow.parquet as pq

        path = self.table_path(batch, name)
        tmp = f"{path}.tmp"
        pq.write_table(table, tmp, compression="snappy")
        with open(tmp, "rb+") as f:
            os.fsync(f.fileno())
        os.replace(tmp, path)

    def table_path(self, batch: int, name: str) -> str:
        return os.path.join(self.root, "state", f"{batch}.{name}.parquet")

    def load_table(self, batch: int, name: str) -> Any:
        import pyarrow.parquet as pq

        return pq.read_table(self.table_path(batch, name))

    def commit(self, batch: int, state: dict) -> None:
        _write_json(self._file("state", batch), state)
        for kind in ("state", "begin"):
            folder = os.path.join(self.root, kind)
            for name in os.listdir(folder):
                number = name.split(".", 1)[0]
                if name.endswith((".json", ".parquet")) and number.isdigit() and int(number) < batch:
                    os.remove(os.path.join(folder, name))

    def scratch_file(self, kind: str, batch: int) -> str:
        """``<kind>/<batch>.parquet``, a file only micro-batch ``batch`` reads (the files of others removed)."""
        folder = os.path.join(self.root, kind)
        os.makedirs(folder, exist_ok=True)
        name = f"{batch}.parquet"
        for other in os.listdir(folder):
            if other != name:
                os.remove(os.path.join(folder, other))
        return os.path.join(folder, name)

    def rows_path(self, batch: int) -> str:
        return os.path.join(self.root, "rows", str(batch))

    def write_rows(self, batch: int, table: Any) -> None:
        """``rows/<n>/`` from an Arrow table in this process, replacing the folder as Spark's overwrite does
        (written under a hidden name, which Spark does not read, then renamed)."""
        import pyarrow.parquet as pq

        folder = self.rows_path(batch)
        shutil.rmtree(folder, ignore_errors=True)
        os.makedirs(folder)
        tmp = os.path.join(folder, ".part-00000.parquet")
        pq.write_table(table, tmp, compression="snappy")
        os.replace(tmp, os.path.join(folder, "part-00000.parquet"))

    def drop_rows(self, batch: int) -> None:
        shutil.rmtree(self.rows_path(batch), ignore_errors=True)

    def row_batches_on_disk(self) -> list[int]:
        return sorted(int(n) for n in os.listdir(os.path.join(self.root, "rows")) if n.isdigit())


def _write_json(path: str, data: dict) -> None:
    tmp = f"{path}.tmp"
    with open(tmp, "w") as f:
        json.dump(data, f)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)
