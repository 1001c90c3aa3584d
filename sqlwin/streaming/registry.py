"""The registry of the streaming tables a ``sqlwin serve`` runs, so that the server started again on the same
streaming root resumes them (issue 19, point 3).

One file per table, ``<root>/_sqlwin_registry/<name>.json``, written whole through the storage layer
(``storage.write_json``: a crash leaves a file its reader rejects, never half of one): the statement that started
the table as written (CREATE STREAMING TABLE or INSERT INTO), the CREATE STREAM statements of the streams it
reads (streams are views of the connection that made them, gone with the server), the session settings they
depend on, and whether it runs. ``STOP STREAMING TABLE`` marks it stopped, ``DROP STREAMING TABLE`` removes it;
a server that stops or dies leaves it running, so the next server resumes it: the same statements on the same
folders, which resume from the table's checkpoint with nothing lost or counted twice
(``sqlwin.streaming.tables``). Only a server keeps a registry (``enable``): a script's tables end with its run.

A table whose query fails is marked failed (``watch``: its status as ``SHOW STREAMING TABLES`` showed it, the error
in the statement's terms), as Flink keeps a failed job FAILED until the user acts: a server started again does
not start it (it would fail again at every start) but lists it, failed, with that error (``FailedTable``). Its
statement run again (the cause fixed) resumes it from its checkpoint and records it anew, unmarked. A table
that a server started again cannot start (``not_resumed``) is marked failed the same way.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import threading
from typing import Any

from sqlwin.streaming import storage

FOLDER = "_sqlwin_registry"
CONF_KEYS = ("sqlwin.streaming.dir", "sqlwin.file_dir", "spark.sql.session.timeZone")  # replayed on resume

_lock = threading.Lock()
_root: str | None = None  # the streaming root of this process's registry; None: no registry


def enable(root: str) -> None:
    global _root
    _root = root


def disable() -> None:
    global _root
    _root = None


def enabled() -> bool:
    return _root is not None


def _file(root: str, name: str) -> str:
    return storage.join(root, FOLDER, f"{name.lower()}.json")


def record(spark: Any, name: str, statement: str, streams: list[str], folders: list[str],
           outputs: list[dict] | None = None) -> None:
    """A table just started by ``statement`` (reading the streams made by ``streams``, writing ``folders``: its
    checkpoint folder and its outputs', which DROP ... PURGE deletes even when no catalog view names them any
    more; ``outputs``: its catalog views, ``output_record``): running."""
    if _root is None:
        return
    conf = {}
    for key in CONF_KEYS:
        try:
            value = spark.conf.get(key, None)
        except Exception:  # a key the session refuses to show
            value = None
        if value is not None:
            conf[key] = str(value)
    with _lock:
        storage.write_json(_file(_root, name), {"name": name, "statement": statement, "streams": streams,
                                               "conf": conf, "folders": folders, "outputs": outputs or [],
                                               "running": True})


def output_record(sink: Any) -> dict | None:
    """What defines the catalog view of a table's output (``BatchSink``) again, from its folder alone: a server
    started again gives a table it does not run (stopped, failed) its views back (``restore_views``)."""
    if sink.catalog_view is None or sink.schema is None:
        return None
    view, entry = sink.catalog_view
    return {"name": sink.name, "view": view, "role": entry.role, "location": entry.location, "path": sink.path,
            "format": sink.format, "options": sink.options, "schema": sink.schema.json()}


def restore_views(spark: Any, entry: dict) -> list[dict]:
    """The catalog views of a table the registry knows but the server does not run (stopped, or failed): its
    outputs stay tables every client reads by name, as before the restart (an in-memory catalog starts empty;
    a metastore's views are brought up to the folders' files). Each view names the committed files, as a
    running table's does (``BatchSink.register``). Returns the outputs whose folder is gone (deleted by hand):
    they get no view, which would make the folder again, empty, and show a table without its rows (a metastore's
    view of such an output, which names files that are gone, is dropped)."""
    from pyspark.sql.types import StructType

    from sqlwin.streaming import tableviews
    from sqlwin.streaming.sinks import BatchSink

    gone = []
    for out in entry.get("outputs", []):
        if not storage.exists(out["path"]):
            gone.append(out)
            kept = tableviews.entry_at(spark, out["view"])
            if kept is not None and kept.table.lower() == entry["name"].lower():
                tableviews.drop(spark, out["view"])
            continue
        sink = BatchSink(out["name"], out["path"], out["format"], None, out["options"])
        sink.schema = StructType.fromJson(json.loads(out["schema"]))
        sink.catalog_view = (out["view"], tableviews.Entry(entry["name"], out["role"], out["location"], out["path"]))
        sink.register(spark)
    return gone


def watch(table: Any) -> None:
    """Once the query of ``table`` (a ``StreamingTable`` just started and recorded) fails, mark it failed: a
    thread of its own waits for the query's end (no Spark listener: nothing runs per micro-batch)."""
    if _root is None or table.query is None:
        return
    threading.Thread(target=_await_failure, args=(table,), name=f"sqlwin-registry-{table.name}",
                     daemon=True).start()


def _await_failure(table: Any) -> None:
    with contextlib.suppress(Exception):  # the query failed (its status says how), or the server stops under the wait
        table.query.awaitTermination()
    if _root is None:  # the server stops: its queries end with its Spark, which is no failure of theirs
        return
    try:
        status = table.status()
    except Exception:  # Spark is gone: the server stops
        return
    if status.status == "failed":
        mark_failed(table, status)


def mark_failed(table: Any, status: Any) -> None:
    """Table ``table`` failed with ``status`` (its ``Status``): a server started again lists it, not starts it.
    Nothing if the registry no longer runs it (dropped, or started again since: its new entry stays unmarked)."""
    from sqlwin.streaming import catalog

    with _lock:
        if _root is None or catalog.find_table(table.name) is not table:
            return
        entry = storage.read_json(_file(_root, table.name))
        if entry is not None:
            storage.write_json(_file(_root, table.name), {**entry, "failed": dataclasses.asdict(status)})


def not_resumed(spark: Any, entry: dict, error: str) -> FailedTable:
    """A table of the registry that a server started again could not start (``error``: its statement or a
    stream's failed, say a stream's source is gone): marked failed with that error, as a query that failed, so
    that the next server lists it rather than fail the same way at every start; listed failed now."""
    failed = {"error": error}
    with _lock:
        if _root is not None:
            storage.write_json(_file(_root, entry["name"]), {**entry, "failed": failed})
    return FailedTable(spark, {**entry, "failed": failed})


class FailedTable:
    """A table the registry marks failed, in a server started again: not started, and listed by SHOW STREAMING
    TABLES as its failed query showed it (status ``failed``, its counters and its error). Its statement run again
    replaces it (``StreamingTable.start`` replaces a table that does not run); DROP STREAMING TABLE forgets it."""

    def __init__(self, spark: Any, entry: dict):
        self.name: str = entry["name"]
        self.spark = spark
        self.shown: dict = entry.get("failed") or {}

    @property
    def is_active(self) -> bool:
        return False

    @property
    def error(self) -> str:
        return str(self.shown.get("error") or "failed")

    def status(self) -> Any:
        from sqlwin.streaming.tables import Status

        shown = {f.name: self.shown.get(f.name) for f in dataclasses.fields(Status) if f.name in self.shown}
        counters = {"micro_batches": 0, "rows_in": 0, "watermark": None, "state_rows": 0, "open_windows": 0,
                    "late_rows_dropped": 0, "path": ""}
        return Status(**{**counters, **shown, "name": self.name, "status": "failed", "error": self.error})

    def stop(self) -> None:  # nothing runs
        pass


def set_running(name: str, running: bool) -> None:
    if _root is None:
        return
    with _lock:
        entry = storage.read_json(_file(_root, name))
        if entry is not None and entry.get("running") != running:
            storage.write_json(_file(_root, name), {**entry, "running": running})


def remove(name: str) -> dict | None:
    """Forget table ``name``; its entry, if the registry knew it."""
    if _root is None:
        return None
    with _lock:
        entry = storage.read_json(_file(_root, name))
        if entry is None and storage.exists(_file(_root, name)):
            entry = {}  # a torn entry: known, its folders not
        storage.delete(_file(_root, name))
        return entry


def entries(root: str) -> list[dict]:
    """Every whole entry of the registry under ``root``, by name."""
    folder = storage.join(root, FOLDER)
    found = [storage.read_json(storage.join(folder, n)) for n in sorted(storage.listdir(folder))
             if n.endswith(".json") and not n.startswith(".")]
    return [e for e in found if e is not None]
