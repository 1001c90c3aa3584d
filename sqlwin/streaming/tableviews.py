"""A streaming table's outputs as entries of the session catalog: every session, JDBC connection and process
that shares the catalog reads them by name.

Each output (the sink, and the ``LATE ROWS TO`` table) is a catalog VIEW, ``CREATE OR REPLACE``d whenever the
sink's files change (each micro-batch, from ``BatchSink.register``). Its definition names the files a reader must
read and nothing else: the newest whole manifest's compacted folders and the ``micro_batch=<n>`` folders above
its ``through`` (``sqlwin.streaming.compaction``), each set read as one ``fmt.`glob` WITH (options)`` relation
(``view_query``) with every column cast to the sink's type, ``UNION ALL``.

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

from sqlwin.dialect import SPARK_SQL_MARK
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


def view_query(fmt: str, options: dict[str, str], schema: Any, path: str, folders: list[tuple[int, str]],
               compacted: list[str]) -> str:
    """The view's query: the files named (``folders``: (micro-batch, folder) above the manifest, in the sink's
    folder ``path``; ``compacted``: the manifest's folders), each column cast to ``schema``'s type.

    Each set of folders is one relation over a glob naming exactly those folders, not one relation per folder:
    Spark runs a job to infer the schema of every file relation each time a query over the view is analysed
    (its definition, and every read), so a view of N relations cost N jobs per read and per micro-batch."""
    read = {**options, **_READ_OPTIONS.get(fmt, {})}

    def select(glob: str, extra: dict[str, str]) -> str:
        pairs = ", ".join(f"{_string(k)} = {_string(v)}" for k, v in sorted({**read, **extra}.items()))
        with_options = f" WITH ({pairs})" if pairs else ""
        columns = [f"CAST({_ident(f.name)} AS {f.dataType.simpleString()}) AS {_ident(f.name)}" for f in schema.fields]
        return f"SELECT {SPARK_SQL_MARK} {', '.join(columns)} FROM {_ident(fmt)}.{_ident(glob)}{with_options}"

    parts = []
    if compacted:  # the compacted files hold their micro_batch column
        parent = compacted[0].rsplit("/", 1)[0]
        parts.append(select(any_of(parent, [c.rsplit("/", 1)[1] for c in compacted]), {}))
    if folders:  # micro_batch is the folder's name (partition discovery below the sink's folder)
        parts.append(select(any_of(path, [f"micro_batch={m}" for m, _ in folders]), {"basePath": path}))
    if not parts:
        columns = ", ".join(f"CAST(NULL AS {f.dataType.simpleString()}) AS {_ident(f.name)}" for f in schema.fields)
        parts = [f"SELECT {SPARK_SQL_MARK} {columns} WHERE FALSE"]
    return "\nUNION ALL\n".join(parts)


def any_of(parent: str, names: list[str]) -> str:
    """A Hadoop glob matching exactly the entries ``names`` of folder ``parent`` (whose own glob characters are
    escaped: a user's path is taken literally)."""
    escaped = [_glob_literal(n) for n in names]
    return f"{_glob_literal(parent)}/{escaped[0] if len(escaped) == 1 else '{' + ','.join(escaped) + '}'}"


def _glob_literal(text: str) -> str:
    return "".join(f"\\{c}" if c in _GLOB_CHARACTERS else c for c in text)


_GLOB_CHARACTERS = frozenset("\\{}[]*?,")


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
        spark.sql(f"{SPARK_SQL_MARK} CREATE VIEW {view} COMMENT {comment} TBLPROPERTIES ({properties}) AS\n{query}")
        return
    if first:
        spark.sql(f"{SPARK_SQL_MARK} ALTER VIEW {view} SET TBLPROPERTIES ({properties})")
    spark.sql(f"{SPARK_SQL_MARK} ALTER VIEW {view} AS\n{query}")


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
    return entry_at(spark, qualified(database, name))


def entry_at(spark: Any, view: str) -> Entry | None:
    """``find_entry`` of a qualified name."""
    try:
        rows = spark.sql(f"SHOW TBLPROPERTIES {view}").collect()
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


def drop(spark: Any, view: str) -> None:
    """Drop the view ``view`` (a qualified name), if it is there."""
    spark.sql(f"DROP VIEW IF EXISTS {view}")


def _ident(name: str) -> str:
    return exp.to_identifier(name, quoted=True).sql(dialect="spark")


def _string(value: str) -> str:
    return exp.Literal.string(value).sql(dialect="spark")
