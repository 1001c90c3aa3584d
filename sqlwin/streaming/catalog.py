"""The streams of a session and the streaming tables of the process.

``CREATE STREAM s`` registers ``s`` twice: as a Spark temp view (so every later statement of the
session, from Python, a CLI script or a JDBC connection, resolves its schema through Spark as for any
table) and here, with what a view cannot hold: the watermark, the idle timeout, the PROCTIME column,
or, for a replay stream, its arrival order and micro-batches. Streaming tables are kept per process:
``SHOW``/``STOP STREAMING TABLES`` work from any session of the process. The catalog keeps them as
``StreamingTable``s (``sqlwin.streaming.tables``, which registers each one it starts): what it and its
readers use of one is the ``RegisteredTable`` protocol here, so it does not import that module back.
A replay's ``LATE ROWS TO`` view is a temp view of its session too: kept here, by a fingerprint of the rows it
holds, so that a later replay may replace it (and nothing else of that name: ``sqlwin.streaming.names``).
"""

from __future__ import annotations

import threading
from typing import Any, Protocol

from sqlwin.plan.statements import CreateReplayStream, CreateStream

StreamDef = CreateStream | CreateReplayStream


class RegisteredTable(Protocol):
    """A running (or stopped) streaming table, as the catalog and its readers see it."""

    name: str
    spark: Any  # the session that started it

    @property
    def is_active(self) -> bool: ...

    def status(self) -> Any: ...

    def stop(self) -> None: ...


_lock = threading.RLock()
_streams: dict[tuple[str, str], StreamDef] = {}
_tables: dict[str, RegisteredTable] = {}
_stream_texts: dict[tuple[str, str], str] = {}  # CREATE STREAM as written: a server's registry replays it
_late_views: dict[tuple[str, str], int] = {}  # a replay's LATE ROWS TO view: the semantic hash of its plan
_stream_views: dict[tuple[str, str], str] = {}  # a temp view of the user's over a stream: that stream's name


def session_key(spark: Any) -> str:
    """One key per Spark session (JVM side), so JDBC connections with their own session stay apart."""
    try:
        return str(spark._jsparkSession.sessionUUID())
    except Exception:  # Spark Connect or a stand-in: the Python object is the session
        return str(id(spark))


def add_stream(spark: Any, stream: StreamDef, text: str | None = None) -> None:
    with _lock:
        key = (session_key(spark), stream.name.lower())
        _streams[key] = stream
        if text is not None:
            _stream_texts[key] = text


def stream_text(spark: Any, name: str) -> str | None:
    """The CREATE STREAM statement that made stream ``name`` of this session, as written."""
    with _lock:
        return _stream_texts.get((session_key(spark), name.lower()))


def drop_stream(spark: Any, name: str) -> None:
    with _lock:
        _streams.pop((session_key(spark), name.lower()), None)
        _stream_texts.pop((session_key(spark), name.lower()), None)


def find_stream(spark: Any, name: str) -> StreamDef | None:
    with _lock:
        return _streams.get((session_key(spark), name.lower()))


def session_streams(spark: Any) -> list[StreamDef]:
    """Every stream of this session."""
    key = session_key(spark)
    with _lock:
        return [s for (k, _), s in _streams.items() if k == key]


def set_stream_view(spark: Any, view: str, stream: str | None) -> None:
    """A temp view ``view`` made with SQL (CREATE [OR REPLACE] TEMP VIEW) reads ``stream`` (None: no stream, or
    dropped). sqlwin reads a stream by its name only (its watermark and arrivals are not in the view), so a query
    that reads the view is refused at the view's name (``sqlwin.streaming.statements``)."""
    with _lock:
        if stream is None:
            _stream_views.pop((session_key(spark), view.lower()), None)
        else:
            _stream_views[(session_key(spark), view.lower())] = stream


def stream_behind_view(spark: Any, name: str) -> str | None:
    """The stream a temp view ``name`` of this session reads (``set_stream_view``), None if it reads none."""
    with _lock:
        return _stream_views.get((session_key(spark), name.lower()))


def stream_names() -> set[str]:
    """The names of every session's streams and views over streams: the words the JDBC server sends sqlwin."""
    with _lock:
        return {name for _, name in (*_streams, *_stream_views)}


def streams_in(spark: Any, names: list[str]) -> list[StreamDef]:
    return [s for s in (find_stream(spark, n) for n in names) if s is not None]


def add_late_view(spark: Any, name: str, rows: Any) -> None:
    """Make ``rows`` the temp view ``name``, a replay's LATE ROWS TO, and remember it as sqlwin's."""
    rows.createOrReplaceTempView(name)
    with _lock:
        _late_views[(session_key(spark), name.lower())] = rows.semanticHash()


def is_late_view(spark: Any, name: str) -> bool:
    """Whether the temp view ``name`` is still the one a replay of this session made for its late rows (not
    replaced since by a view of the user's: its plan is the very one, nothing read)."""
    with _lock:
        made = _late_views.get((session_key(spark), name.lower()))
    if made is None:
        return False
    try:
        return spark.table(name).semanticHash() == made
    except Exception:  # dropped meanwhile, or a name the session cannot read
        return False


def add_table(table: RegisteredTable) -> None:
    with _lock:
        _tables[table.name.lower()] = table


def find_table(name: str) -> RegisteredTable | None:
    with _lock:
        return _tables.get(name.lower())


def remove_table(name: str) -> None:
    with _lock:
        _tables.pop(name.lower(), None)


def all_tables() -> list[RegisteredTable]:
    with _lock:
        return list(_tables.values())
