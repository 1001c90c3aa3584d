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
"""

from __future__ import annotations

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


def record(spark: Any, name: str, statement: str, streams: list[str], folders: list[str]) -> None:
    """A table just started by ``statement`` (reading the streams made by ``streams``, writing ``folders``: its
    checkpoint folder and its outputs', which DROP ... PURGE deletes even when no catalog view names them any
    more): running."""
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
                                               "conf": conf, "folders": folders, "running": True})


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
