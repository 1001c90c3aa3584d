"""``sqlwin run FILE.sql`` as a long-lived service: the streaming tables a script started, watched until they end.

A streaming query lives in the process that started it, so the CLI stays while any of its tables runs, with a
live status per table (a rich table redrawn in place on a terminal; off one, a plain line whenever a table
commits a micro-batch or changes state, for a process manager's log). SIGINT and SIGTERM stop every table the
way ``STOP STREAMING TABLE`` does (a micro-batch in flight ends uncommitted and runs again on restart:
``sqlwin.streaming.stopping``) and the CLI exits 0; a table that fails stops the others and the CLI exits 1 with
its error in the statement's terms. Under ``--available-now`` every table reads what its sources hold, with the
no-data micro-batches that fire due windows (``StreamingTable.catching_up``), and the CLI exits when all are done.
"""

from __future__ import annotations

import datetime as dt
import signal
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from sqlwin.diagnostics import runtime_failure
from sqlwin.display import note, report_sqlwin_error
from sqlwin.streaming import catalog

if TYPE_CHECKING:
    from rich.console import Console

REFRESH_SECONDS = 1.0
HEADERS = {"status": "status", "micro_batches": "batches", "rows_in": "rows in", "input_rows_per_second": "rows/s",
           "watermark": "watermark", "open_windows": "windows", "state_rows": "state", "late_rows_dropped": "late",
           "last_micro_batch": "last batch"}  # short: the table fits an 80-column terminal
COLUMNS = ("status", "micro_batches", "rows_in", "input_rows_per_second", "watermark", "open_windows",
           "state_rows", "late_rows_dropped", "last_micro_batch")


@dataclass
class Origin:
    """Where a streaming table's statement is: its file's name and text, and the statement's 0-based start."""

    name: str
    text: str
    start: tuple[int, int] | None


@contextmanager
def stop_signals(signals: tuple[signal.Signals, ...] = (signal.SIGINT, signal.SIGTERM),
                 event: threading.Event | None = None) -> Iterator[threading.Event]:
    """An event that the ``signals`` set (instead of killing the process) while the body runs; ``event``: one an
    outer ``stop_signals`` made (``sqlwin run`` takes SIGTERM from its start, SIGINT once its script ran). A
    second SIGINT raises KeyboardInterrupt, as Ctrl-C pressed twice does in most tools: what the first asked to end
    gracefully (a statement's Python part, a table's micro-batch) is not waited for."""
    event = event if event is not None else threading.Event()
    names: list[str] = getattr(event, "names", [])

    def handler(signum: int, frame: Any) -> None:
        name = signal.Signals(signum).name
        if name == "SIGINT" and name in names:  # Ctrl-C again: no more waiting for a graceful end
            raise KeyboardInterrupt
        names.append(name)
        event.set()

    previous = {s: signal.signal(s, handler) for s in signals}
    event.names = names  # type: ignore[attr-defined]
    try:
        yield event
    finally:
        for s, h in previous.items():
            signal.signal(s, h)


def watch(out: Console, err: Console, origins: dict[str, Origin], stop: threading.Event, *,
          refresh: float = REFRESH_SECONDS, live: bool | None = None) -> int:
    """Watch every streaming table of the process until none runs, ``stop`` is set (then stop them all) or one
    fails (then stop the others); the exit status: 0, or 1 after a failure (reported to ``err``)."""
    tables = catalog.all_tables()
    if not tables:
        return 0
    # not "none is active": a table may have failed (or, under --available-now, ended with a no-data micro-batch
    # still to run) while the script's later statements ran; the loop reports the one and runs the other
    if not any(_catching_up(t) for t in tables) and not any(t.status().status == "failed" for t in tables):
        return 0
    live = out.is_terminal if live is None else live
    view = LiveView(out) if live else PlainView(out)
    failed: list[Any] = []
    with view:
        try:
            while True:
                running = [t for t in tables if _catching_up(t)]
                statuses = [t.status() for t in tables]
                view.show(statuses)
                failed = [t for t, s in zip(tables, statuses, strict=True) if s.status == "failed"]
                if failed or stop.is_set() or not running:
                    break
                stop.wait(refresh)
        except Exception:
            if not stop.is_set():
                raise
            return _spark_gone(out)  # the signal reached Spark's JVM too (its process group): it is gone
        if failed or stop.is_set():
            try:
                for table in tables:
                    table.stop()
                view.show([t.status() for t in tables])
            except Exception:
                if not failed:
                    return _spark_gone(out)
    if failed:
        for table in failed:
            _report(err, table, origins.get(table.name.lower()))
        return 1
    if stop.is_set():
        note_stopped(out, stop, len(tables))
    return 0


def note_stopped(out: Console, stop: threading.Event, tables: int) -> None:
    """What a signal stopped (``tables``: how many streaming tables; 0: it came before any started)."""
    why = "/".join(dict.fromkeys(getattr(stop, "names", []))) or "stop"
    if not tables:
        note(out, f"{why}: stopped before any streaming table started")
        return
    note(out, f"{why}: stopped {tables} streaming table{'s' if tables != 1 else ''}; "
              "started again on the same folders, they resume where they stopped")


def _spark_gone(out: Console) -> int:
    """A signal sent to the whole process group (``kill -TERM -<pgid>``, systemd's default ``KillMode``) also
    stops Spark's JVM, whose shutdown ends every query with its micro-batch in flight uncommitted: as after a
    crash, a restart runs that micro-batch again (nothing lost or doubled), so this is still a clean end."""
    note(out, "Spark's JVM was stopped by the signal too: its streaming tables ended uncommitted where they were; "
              "started again on the same folders, they resume where they stopped")
    return 0


def _catching_up(table: Any) -> bool:
    check: Callable[[], bool] | None = getattr(table, "catching_up", None)
    return check() if check is not None else bool(table.is_active)


def _report(err: Console, table: Any, origin: Origin | None) -> None:
    exc = runtime_failure(table.query.exception(), table.shape.text, f"streaming table {table.name} failed: ")
    if origin is None:
        report_sqlwin_error(err, f"streaming table {table.name}", table.shape.text, None, exc)
    else:
        report_sqlwin_error(err, origin.name, origin.text, origin.start, exc)


def cells(status: Any) -> list[str]:
    """A status's values as printed: ``-`` where there is none yet."""
    values = []
    for column in COLUMNS:
        value = getattr(status, column)
        values.append("-" if value is None else str(value))
    return values


class PlainView:
    """Off a terminal: one line per table whenever what it has done changes (not every refresh)."""

    def __init__(self, out: Console):
        self.out = out
        self.shown: dict[str, tuple] = {}

    def __enter__(self) -> PlainView:
        return self

    def __exit__(self, *exc: object) -> None:
        return None

    def show(self, statuses: list[Any]) -> None:
        for status in statuses:
            seen = (status.status, status.micro_batches, status.rows_in, status.watermark, status.late_rows_dropped)
            if self.shown.get(status.name) == seen:
                continue
            self.shown[status.name] = seen
            now = dt.datetime.now(dt.timezone.utc).strftime("%H:%M:%S")
            pairs = " ".join(f"{c}={v.replace(' ', 'T')}" for c, v in zip(COLUMNS[1:], cells(status)[1:], strict=True))
            self.out.print(f"{now} {status.name} {status.status} {pairs}", markup=False, highlight=False,
                           soft_wrap=True)
        self.out.file.flush()


class LiveView:
    """On a terminal: one rich table, a row per streaming table, redrawn in place at every refresh."""

    def __init__(self, out: Console):
        from rich.live import Live

        self.live = Live(console=out, auto_refresh=False, transient=False)

    def __enter__(self) -> LiveView:
        self.live.__enter__()
        return self

    def __exit__(self, *exc: object) -> None:
        self.live.__exit__(None, None, None)

    def show(self, statuses: list[Any]) -> None:
        from rich import box
        from rich.table import Table

        table = Table(title="streaming tables (Ctrl-C stops them; they resume when started again)",
                      title_justify="left", box=box.SIMPLE_HEAD, pad_edge=False)
        table.add_column("table")
        for column in COLUMNS:
            left = column in ("status", "watermark", "last_micro_batch")
            table.add_column(HEADERS[column], justify="left" if left else "right")
        for status in statuses:
            style = {"failed": "red", "stopped": "dim"}.get(status.status)
            values = cells(status)
            values[-1] = values[-1][-12:-4] if len(values[-1]) > 12 else values[-1]  # the time of day: HH:MM:SS
            table.add_row(status.name, *values, style=style)
        self.live.update(table, refresh=True)
