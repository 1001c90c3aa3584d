"""A streaming table's outputs as entries of the session catalog: every session, JDBC connection and process
that shares the catalog reads them by name.

Each output (the sink, and the ``LATE ROWS TO`` table) is a catalog VIEW, ``CREATE OR REPLACE``d whenever the
sink's files change (each micro-batch, from ``BatchSink.register``). Its definition names the files a reader must
read and nothing else: the newest whole manifest's compacted folders and the ``micro_batch=<n>`` folders above
its ``through`` (``sqlwin.streaming.compaction``), each read as ``fmt.`folder` WITH (options)`` with every column
cast to the sink's type, ``UNION ALL``.

Why a view and not an external table over the sink's folder: a table over the folder lists every
``micro_batch=<n>`` folder on disk, including those a compaction has already merged into a compacted file (they
stay for older readers until the next compaction): their rows would be read twice, and the compacted files
(under ``_sqlwin_sink/``, which Spark's listing skips) not at all. Re-pointing a table at commit cannot help:
a table has one location, the committed rows are in several. The view names exactly those, is replaced
atomically in the catalog (a reader resolves the old or the new definition, both whole), and the files it names
stay until a later compaction, as for the sink's own reader.

The views carry table properties (``sqlwin.streaming_table``, ``sqlwin.role``, ``sqlwin.location``,
``sqlwin.sink``) so that sqlwin recognises its own entries: the name rules let a table take over its own view
again (a restart), and ``DROP STREAMING TABLE`` finds the folder of a table this process does not run.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from sqlglot import exp

from sqlwin.streaming import storage
from sqlwin.streaming.compaction import Manifest, batch_numbers

PROPERTY = "sqlwin.streaming_table"
# read options that make every file format give the sink's values back exactly, before the casts
_READ_OPTIONS = {"json": {"primitivesAsString": "true"}, "csv": {"inferSchema": "false"}}


@dataclass(frozen=True)
class Entry:
    """A sqlwin view of the catalog: which streaming table made it, as what, and where its files are."""

    table: str
    role: str  # sink | late_rows
    location: str  # the streaming table's folder
    sink: str  # the folder of this output's files


def qualified(database: str, name: str) -> str:
    return f"{_ident(database)}.{_ident(name)}"


def current_database(spark: Any) -> str:
    return str(spark.catalog.currentDatabase())


def view_query(fmt: str, options: dict[str, str], schema: Any, folders: list[tuple[int, str]],
               compacted: list[str]) -> str:
    """The view's query: the union of the files named (``folders``: (micro-batch, folder) above the manifest;
    ``compacted``: the manifest's folders), each column cast to ``schema``'s type."""
    read = {**options, **_READ_OPTIONS.get(fmt, {})}
    with_options = ""
    if read:
        pairs = ", ".join(f"{_string(k)} = {_string(v)}" for k, v in sorted(read.items()))
        with_options = f" WITH ({pairs})"

    def select(folder: str, batch: int | None) -> str:
        columns = [f"CAST({_ident(f.name)} AS {f.dataType.simpleString()}) AS {_ident(f.name)}"
                   if not (f.name == "micro_batch" and batch is not None) else f"{batch} AS micro_batch"
                   for f in schema.fields]
        return f"SELECT {', '.join(columns)} FROM {_ident(fmt)}.{_ident(folder)}{with_options}"

    parts = [select(folder, None) for folder in compacted] + [select(folder, batch) for batch, folder in folders]
    if not parts:
        columns = ", ".join(f"CAST(NULL AS {f.dataType.simpleString()}) AS {_ident(f.name)}" for f in schema.fields)
        parts = [f"SELECT {columns} WHERE FALSE"]
    return "\nUNION ALL\n".join(parts)


def define(spark: Any, view: str, entry: Entry, query: str, first: bool) -> None:
    """Give the catalog view ``view`` the definition ``query``. Spark's ``CREATE OR REPLACE VIEW`` drops the view
    and creates it again, so a reader in between would not find it: a view that exists is changed in place
    (``ALTER VIEW ... AS``, one ``alterTable`` of the catalog: a reader resolves the old definition or the new
    one), and only a missing one is created; ``first``: this run's first definition (its properties set)."""
    properties = ", ".join(f"{_string(k)} = {_string(v)}" for k, v in (
        (PROPERTY, entry.table), ("sqlwin.role", entry.role), ("sqlwin.location", entry.location),
        ("sqlwin.sink", entry.sink)))
    if first and not spark.catalog.tableExists(view):
        comment = _string(f"sqlwin streaming table {entry.table}: "
                          f"{'its panes' if entry.role == 'sink' else 'its late rows'}")
        spark.sql(f"CREATE VIEW {view} COMMENT {comment} TBLPROPERTIES ({properties}) AS\n{query}")
        return
    if first:
        spark.sql(f"ALTER VIEW {view} SET TBLPROPERTIES ({properties})")
    spark.sql(f"ALTER VIEW {view} AS\n{query}")


def listing(path: str, manifest: Manifest | None, compacted_path: Any,
            known_whole: set[int]) -> tuple[list[tuple[int, str]], list[str]]:
    """The folders a reader reads now: (micro-batch, folder) above the manifest that a write job finished
    (``whole``; ``known_whole``: the micro-batches found whole before, added to), and the manifest's compacted
    folders (a manifest names only finished ones)."""
    through = manifest.through if manifest is not None else -1
    folders = []
    for m in batch_numbers(path):
        folder = storage.join(path, f"micro_batch={m}")
        if m > through and (m in known_whole or whole(folder)):
            known_whole.add(m)
            folders.append((m, folder))
    compacted = [compacted_path(f.name) for f in manifest.files] if manifest is not None else []
    return folders, compacted


def whole(folder: str) -> bool:
    """Whether a write job finished the folder: its commit marker (``_SUCCESS``), or, where a committer writes
    none, a data file and no ``_temporary``. A job that failed or was killed leaves neither, and a direct read of
    such a folder fails (no file to infer a schema from): a crash's leftover, which the micro-batch's re-run
    replaces."""
    names = storage.listdir(folder)
    if "_SUCCESS" in names:
        return True
    return "_temporary" not in names and any(not n.startswith(("_", ".")) for n in names)


def find_entry(spark: Any, database: str, name: str) -> Entry | None:
    """The sqlwin view ``database.name`` of the catalog, or None (no such object, or not sqlwin's)."""
    try:
        rows = spark.sql(f"SHOW TBLPROPERTIES {qualified(database, name)}").collect()
    except Exception:  # no such table or view
        return None
    found = {str(r[0]): str(r[1]) for r in rows}
    if PROPERTY not in found:
        return None
    return Entry(found[PROPERTY], found.get("sqlwin.role", "sink"), found.get("sqlwin.location", ""),
                 found.get("sqlwin.sink", ""))


def entries_of(spark: Any, database: str, table: str) -> list[tuple[str, Entry]]:
    """Every sqlwin view of streaming table ``table`` in ``database``: (view name, entry)."""
    out = []
    for row in spark.sql(f"SHOW VIEWS IN {_ident(database)}").collect():
        if row["isTemporary"]:
            continue
        entry = find_entry(spark, database, row["viewName"])
        if entry is not None and entry.table.lower() == table.lower():
            out.append((str(row["viewName"]), entry))
    return out


def drop(spark: Any, database: str, name: str) -> None:
    spark.sql(f"DROP VIEW IF EXISTS {qualified(database, name)}")


def _ident(name: str) -> str:
    return exp.to_identifier(name, quoted=True).sql(dialect="spark")


def _string(value: str) -> str:
    return exp.Literal.string(value).sql(dialect="spark")
