"""Drive streaming tables deterministically: rows arrive as files dropped one at a time, and each file is
fully processed (with the no-data micro-batches it causes) before the next one is written."""

from __future__ import annotations

import datetime as dt
import json
import os
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

T0 = dt.datetime(2024, 1, 1)


class ManualClock:
    """The processing-time clock of a streaming table under test: set by the test before each micro-batch
    (epoch microseconds)."""

    def __init__(self, now: int = 0) -> None:
        self.now = now

    def __call__(self) -> int:
        return self.now


def start_clocked(spark: Any, statement: str, now: int = 0) -> tuple[Any, ManualClock]:
    """A ``CREATE STREAMING TABLE`` started on a ``ManualClock`` (at ``now``), and the clock."""
    from sqlwin.pipeline import compile_statement
    from sqlwin.streaming.statements import start_table

    created = compile_statement(statement, "spark", catalog=spark, spark=spark).plan
    clock = ManualClock(now)
    return start_table(spark, created.name, created.query, created.format, created.options, clock=clock), clock


def ts(seconds: float) -> str:
    return (T0 + dt.timedelta(seconds=seconds)).isoformat(sep=" ")


class Feeder:
    """Writes micro-batches of rows as JSON-lines files into a stream's folder."""

    def __init__(self, folder: Path):
        self.folder = Path(folder)
        self.folder.mkdir(parents=True, exist_ok=True)
        self.count = 0

    def write(self, rows: Iterable[dict]) -> None:
        # written beside the folder, then renamed into it: a listing of the folder never meets a file that is
        # about to be renamed (Hadoop's local file system then fails the listing: "cannot access .f00000.tmp")
        staging = self.folder.parent / f".{self.folder.name}.staging"
        staging.mkdir(exist_ok=True)
        tmp = staging / f"f{self.count:05d}.tmp"
        with open(tmp, "w") as f:
            for row in rows:
                f.write(json.dumps(row) + "\n")
        os.replace(tmp, self.folder / f"f{self.count:05d}.json")  # the source sees whole files only
        self.count += 1

    def feed(self, batches: Iterable[Iterable[dict]], *tables) -> None:
        for rows in batches:
            self.write(rows)
            for table in tables:
                table.process_all_available()


def rows_of(df, columns: list[str] | None = None) -> list[tuple]:
    data = df.select(*columns) if columns else df
    return sorted(tuple(r) for r in data.collect())


@contextmanager
def stream_env(spark: Any, tmp_path: Path, monkeypatch: Any, test_name: str) -> Iterator[tuple[str, Feeder, Path]]:
    """A stream ``s_<test>`` (k, v, ts; watermark 2 s) over a fresh folder, with its own streaming root:
    (stream name, its feeder, the root); every streaming table the test started is stopped afterwards."""
    import sqlwin
    from sqlwin.streaming import catalog

    monkeypatch.setenv("SQLWIN_STREAMING_DIR", str(tmp_path / "root"))
    name = f"s_{test_name.split('[')[0][5:]}"[:40]
    folder = tmp_path / "in"
    folder.mkdir()
    sqlwin.sql(spark, f"CREATE STREAM {name} (k STRING, v INT, ts TIMESTAMP, "
                      f"WATERMARK FOR ts AS ts - INTERVAL 2 SECONDS) USING json OPTIONS (path '{folder}')")
    try:
        yield name, Feeder(folder), tmp_path / "root"
    finally:
        for table in catalog.all_tables():
            table.stop()
            catalog.remove_table(table.name)
