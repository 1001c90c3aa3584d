"""Exactly-once sinks: each micro-batch's output goes to its own folder ``micro_batch=<n>``.

Spark re-runs an unfinished micro-batch after a crash with the same batch id and the same input, and
sqlwin's operator recomputes the same output from the same committed state; writing a batch replaces
its folder, so a batch written twice is still there once. Readers see the folders as a table with a
``micro_batch`` column (Spark's partition discovery), which is also the pane log's ``micro_batch``.
"""

from __future__ import annotations

from typing import Any

from sqlwin.streaming import storage

FORMATS = ("parquet", "json", "memory")


class BatchSink:
    """A table of per-micro-batch folders under ``path``, shown to the session as temp view ``name``."""

    def __init__(self, name: str, path: str, fmt: str = "parquet"):
        self.name = name
        self.path = storage.qualify(path)  # any URI, kept as given (sqlwin.streaming.storage)
        # "memory" keeps Spark's meaning (a table for this process) but is stored as parquet files,
        # so that the same exactly-once writer serves every format.
        self.format = "parquet" if fmt == "memory" else fmt
        self.schema: Any = None
        storage.makedirs(self.path)

    def batch_path(self, batch: int) -> str:
        return storage.join(self.path, f"micro_batch={batch}")

    def write(self, df: Any, batch: int) -> None:
        target = self.batch_path(batch)
        df.write.mode("overwrite").format(self.format).save(target)

    def wrote_nothing(self, batch: int) -> bool:
        """Whether the folder ``write`` just made for ``batch`` holds no row, read from the files themselves
        (parquet footers; a JSON file with a row is not empty), not by another Spark job."""
        folder = self.batch_path(batch)
        files = [storage.join(folder, f) for f in storage.listdir(folder) if not f.startswith(("_", "."))]
        if self.format == "parquet":
            return all(storage.parquet_rows(f) == 0 for f in files)
        return all(storage.size(f) == 0 for f in files)

    def clear(self, batch: int) -> None:
        """Remove a batch's folder left by an attempt that crashed (the retry may write nothing)."""
        storage.delete(self.batch_path(batch))

    def set_schema(self, schema: Any) -> None:
        from pyspark.sql.types import IntegerType, StructField, StructType

        fields = [f for f in schema.fields if f.name != "micro_batch"]
        self.schema = StructType([*fields, StructField("micro_batch", IntegerType(), True)])

    def register(self, spark: Any) -> None:
        """(Re)define the temp view: a fresh file listing, so it shows every committed batch."""
        if self.schema is None:
            return
        self.read(spark).createOrReplaceTempView(self.name)

    def read(self, spark: Any) -> Any:
        return spark.read.format(self.format).schema(self.schema).load(self.path)
