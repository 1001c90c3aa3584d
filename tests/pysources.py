"""A Python streaming data source for tests (Spark 4's ``pyspark.sql.datasource``): a folder of JSON files
``batch-<n>.json``, each a list of rows, read one file per offset, so a test decides what each micro-batch holds
by writing the next file (as ``tests.streamtools.Feeder`` does for Spark's file source).

``OPTIONS (folder '...', shape 'columns')`` gives the rows as columns ``k``, ``v``, ``ts``; ``shape 'value'`` gives
Kafka's shape, a ``key`` and the row as JSON text in ``value``. Its reader runs in Spark's Python processes, not
the test's: ``register`` ships this module by value, so they need neither the tests folder nor sqlwin.
"""

from __future__ import annotations

import datetime as dt
import json
import os
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from pyspark.sql.datasource import DataSource, DataSourceStreamReader, InputPartition

NAME = "sqlwin_test_batches"


class BatchFolder(DataSource):
    @classmethod
    def name(cls) -> str:
        return NAME

    def schema(self) -> str:
        return "key string, value string" if self.options.get("shape") == "value" else "k string, v int, ts timestamp"

    def streamReader(self, schema: Any) -> DataSourceStreamReader:
        return BatchFolderReader(self.options["folder"], self.options.get("shape", "columns"))


class BatchPartition(InputPartition):
    def __init__(self, batch: int):
        self.batch = batch


class BatchFolderReader(DataSourceStreamReader):
    def __init__(self, folder: str, shape: str):
        self.folder, self.shape = folder, shape

    def initialOffset(self) -> dict:
        return {"batch": 0}

    def latestOffset(self, start: dict | None = None, limit: Any = None) -> dict:
        """The files there are (``batch-0.json`` ... in order): what the next micro-batch may read."""
        count = 0
        while os.path.exists(os.path.join(self.folder, f"batch-{count}.json")):
            count += 1
        return {"batch": count}

    def partitions(self, start: dict, end: dict) -> list[InputPartition]:
        return [BatchPartition(i) for i in range(start["batch"], end["batch"])]

    def read(self, partition: InputPartition) -> Iterator[tuple]:
        with open(os.path.join(self.folder, f"batch-{partition.batch}.json")) as f:
            rows = json.load(f)
        for row in rows:
            if self.shape == "value":
                yield row["k"], json.dumps(row)
            else:
                yield row["k"], row["v"], dt.datetime.fromisoformat(row["ts"])

    def commit(self, end: dict) -> None:
        return None


def register(spark: Any) -> None:
    from pyspark import cloudpickle

    cloudpickle.register_pickle_by_value(sys.modules[__name__])
    spark.dataSource.register(BatchFolder)


class BatchWriter:
    """Writes the source's next file (whole: written aside, then renamed)."""

    def __init__(self, folder: Path):
        self.folder = Path(folder)
        self.folder.mkdir(parents=True, exist_ok=True)
        self.count = 0

    def write(self, rows: list[dict]) -> None:
        tmp = self.folder / f".batch-{self.count}.tmp"
        tmp.write_text(json.dumps(rows))
        os.replace(tmp, self.folder / f"batch-{self.count}.json")
        self.count += 1

    def feed(self, batches: list[list[dict]], *tables: Any) -> None:
        for rows in batches:
            self.write(rows)
            for table in tables:
                table.process_all_available()
