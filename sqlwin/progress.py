"""A live progress line for Spark jobs, fed by ``SparkContext.statusTracker()``.

Used by the CLI around anything that runs Spark jobs (collecting a result, CREATE ... AS).
It draws only on an interactive stderr (never in pipes, CI or tests), so output stays clean.
"""

from __future__ import annotations

import os
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

POLL_SECONDS = 0.25
SHOW_AFTER_SECONDS = 0.7  # fast statements never flash a progress line


def progress_wanted() -> bool:
    """True when a progress line may be drawn: stderr is a terminal and we are not under CI/tests."""
    if os.environ.get("CI") or os.environ.get("PYTEST_CURRENT_TEST") or os.environ.get("SQLWIN_NO_PROGRESS"):
        return False
    return sys.stderr.isatty()


def job_status(spark: SparkSession) -> tuple[str, int, int] | None:
    """(description, completed tasks, total tasks) over the active stages, or None when idle."""
    tracker = spark.sparkContext.statusTracker()
    jobs = tracker.getActiveJobsIds()
    stages = [info for sid in tracker.getActiveStageIds() if (info := tracker.getStageInfo(sid))]
    if not jobs and not stages:
        return None
    done = sum(s.numCompletedTasks for s in stages)
    total = sum(s.numTasks for s in stages)
    active = sum(s.numActiveTasks for s in stages)
    ids = ",".join(str(s.stageId) for s in sorted(stages, key=lambda s: s.stageId)) or "-"
    desc = (f"job {','.join(map(str, sorted(jobs))) or '-'} · stage {ids} · "
            f"{active} running task{'s' if active != 1 else ''}")
    return desc, done, total


@contextmanager
def spark_progress(spark: SparkSession, enabled: bool | None = None) -> Iterator[None]:
    """Show a transient rich progress line on stderr while the body runs Spark jobs."""
    if enabled is None:
        enabled = progress_wanted()
    if not enabled:
        yield
        return
    from rich.console import Console
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, SpinnerColumn, TextColumn, TimeElapsedColumn

    stop = threading.Event()
    progress = Progress(SpinnerColumn(), TextColumn("{task.description}"), BarColumn(),
                        MofNCompleteColumn(), TimeElapsedColumn(),
                        console=Console(stderr=True), transient=True)

    def poll() -> None:
        started = time.monotonic()
        task = None
        while not stop.wait(POLL_SECONDS):
            if time.monotonic() - started < SHOW_AFTER_SECONDS:
                continue
            try:
                status = job_status(spark)
            except Exception:  # the JVM may be shutting down; progress is best effort
                return
            if task is None:
                progress.start()
                task = progress.add_task("starting Spark job", total=None)
            if status is None:
                progress.update(task, description="waiting for Spark", total=None)
            else:
                desc, done, total = status
                progress.update(task, description=desc, completed=done, total=total or None)
        if task is not None:
            progress.stop()

    thread = threading.Thread(target=poll, name="sqlwin-progress", daemon=True)
    thread.start()
    try:
        yield
    finally:
        stop.set()
        thread.join(timeout=2)
