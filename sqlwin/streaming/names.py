"""The names a streaming table writes, checked before it starts.

A streaming table's sink and its ``LATE ROWS TO`` table are views of the session catalog, shared by every session,
registered again at every commit (``sinks.BatchSink``, ``tableviews``). A view of the same name as a stream, a
table of the catalog or another streaming table's output would hide it, or two queries would take turns replacing
one view: the user would read one table's rows under another's name. The only catalog object an output may
replace is its own view, left by an earlier run of the same streaming table. Each such name is an error at the
SQL that chose it, and so is a replay's LATE ROWS TO name that would hide one of them. A replay's late rows are
a temp view of the session: besides those names, it must not replace a temp view of the session (the table a
stream replays, a view of the user's), except the late rows an earlier replay left there.
``INSERT INTO`` continues an existing sink (GRAMMAR 5): a streaming table of the process that is stopped, or
one whose folder a previous run left; a name that is neither is an error (a typo would otherwise start a
new sink silently).
"""

from __future__ import annotations

from typing import Any

from sqlglot import exp

from sqlwin.dialect import nodes as n
from sqlwin.errors import SqlwinError
from sqlwin.plan.statements import WindowedQuery
from sqlwin.streaming import catalog, storage, tableviews
from sqlwin.streaming.storage import streaming_root


def check_outputs(spark: Any, name: str, query: WindowedQuery, name_node: exp.Expr | None = None,
                  insert: bool = False) -> None:
    """Errors for a streaming table ``name`` running ``query`` (``name_node``: where the SQL names it)."""
    late = query.lateness.late_rows_to
    late_node = query.node.find(n.LateRowsTo)
    if insert:
        _check_insert_target(spark, name, name_node)
    if late is not None and late.lower() == name.lower():
        raise _error(late_node, f"LATE ROWS TO {late}: that is the streaming table's own name, where its "
                                "panes go; name another table for the late rows")
    _check_free(spark, name, name, "INSERT INTO" if insert else "CREATE STREAMING TABLE", name_node)
    if late is not None:
        _check_free(spark, name, late, "LATE ROWS TO", late_node)


def check_replay_outputs(spark: Any, query: WindowedQuery, streams: dict[str, Any] | None = None) -> None:
    """A replay writes one view, its LATE ROWS TO table: the same rules as a streaming table's, and it replaces
    no temp view of the session but an earlier replay's late rows (``streams``: those the query reads, by name,
    to say which one replays a table of that name)."""
    late = query.lateness.late_rows_to
    if late is None:
        return
    node = query.node.find(n.LateRowsTo)
    _check_free(spark, "", late, "LATE ROWS TO", node)
    if not _readable(spark, late) or catalog.is_late_view(spark, late):
        return
    replayed = [s.name for s in (streams or {}).values() if isinstance(getattr(s, "source", None), exp.Table)
                and s.source.name.lower() == late.lower()]
    what = f"the table that stream {replayed[0]} replays" if replayed else "a temporary view of this session"
    raise _error(node, f"LATE ROWS TO {late}: {late} is {what}, which the replay's late rows would replace; "
                       "choose another name")


def check_stream_name(spark: Any, name: str, node: exp.Expr | None) -> None:
    """``CREATE STREAM name``: its view must not replace a running streaming table's sink or late rows."""
    for table in _running():
        writes = _writes(table, name.lower())
        if writes:
            raise _error(node.this if node is not None else None,
                         f"CREATE STREAM {name}: the running streaming table {table.name} writes {writes} there; "
                         "choose another name")


def _running() -> list[Any]:
    """The running streaming tables of the process, whichever session started them: their views are in the
    catalog every session shares (a stopped table's views are no longer written)."""
    return [t for t in catalog.all_tables() if t.is_active]


def _writes(table: Any, key: str) -> str | None:
    """What streaming table ``table`` writes under the (lower-case) name ``key``, if anything."""
    if key == table.name.lower():
        return "its panes"
    return "its late rows" if key == (table.shape.late_rows_to or "").lower() else None


def _check_insert_target(spark: Any, name: str, node: exp.Expr | None) -> None:
    if catalog.find_table(name) is not None or storage.isdir(storage.join(streaming_root(spark), name)):
        return
    raise _error(node, f"INSERT INTO {name}: there is no streaming table {name} to continue (INSERT INTO resumes "
                       f"one that was stopped, or whose folder a previous run left); start it with CREATE "
                       f"STREAMING TABLE {name} AS <query>")


def _check_free(spark: Any, table: str, wanted: str, role: str, node: exp.Expr | None) -> None:
    """``wanted`` (the sink or late-rows name of streaming table ``table``) must not hide anything else."""
    key = wanted.lower()
    if catalog.find_stream(spark, wanted) is not None:
        raise _error(node, f"{role} {wanted}: {wanted} is a stream of this session; the table's view would hide "
                           "it: choose another name")
    for other in _running():
        if other.name.lower() == table.lower():
            continue  # the same table started again
        writes = _writes(other, key)
        if writes:
            raise _error(node, f"{role} {wanted}: the running streaming table {other.name} writes {writes} there; "
                               "choose another name")
    if not _is_catalog_table(spark, wanted):
        return
    entry = tableviews.find_entry(spark, tableviews.current_database(spark), wanted)
    own_role = "sink" if role in ("CREATE STREAMING TABLE", "INSERT INTO") else "late_rows"
    if entry is not None and table and entry.table.lower() == table.lower() and entry.role == own_role:
        return  # this table's own view, from an earlier run
    if entry is not None:
        what = "panes" if entry.role == "sink" else "late rows"
        raise _error(node, f"{role} {wanted}: {wanted} holds the {what} of streaming table {entry.table}; DROP "
                           f"STREAMING TABLE {entry.table} first, or choose another name")
    raise _error(node, f"{role} {wanted}: {wanted} is a table of the catalog, which the streaming table's view "
                       "would replace (sqlwin writes its own files); choose another name")


def _readable(spark: Any, name: str) -> bool:
    """Whether the session reads a table or view by the bare ``name`` (a temp view, or the current database's)."""
    try:
        return bool(spark.catalog.tableExists(name))
    except Exception:  # a name the catalog cannot look up
        return False


def _is_catalog_table(spark: Any, name: str) -> bool:
    """A table or view of the catalog in the current database (not a temporary view)."""
    try:
        return bool(spark.catalog.tableExists(tableviews.qualified(tableviews.current_database(spark), name)))
    except Exception:  # a name the catalog cannot look up
        return False


def _error(node: exp.Expr | None, message: str) -> SqlwinError:
    """At the name's first character."""
    if node is None:
        return SqlwinError(message)
    return SqlwinError.at(node.find(exp.Identifier) or node, message)
