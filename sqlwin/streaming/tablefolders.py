"""Whose folder is it: the checks that keep a streaming table's folders its own.

A table's folder holds the state of the query that made it (Spark's checkpoint, sqlwin's windows), so
starting a different query on it would mix the two (10-second windows' state read by a query of 20-second
windows: panes of both sizes, silently). Flink asks for a state-compatible job to restore a savepoint, and
Spark's checkpoint only notices some changes. The folder therefore records the query it holds
(``query.json``, written when the table first starts), and a start whose query differs is refused: the same
statement, reformatted or with other OPTIONS (trigger, compaction), is the same query; another window, key,
aggregate, trigger or lateness is not.

Two tables running at once must not share a folder either (Spark stops the first query of a checkpoint it
is given again, and two sinks writing the same ``micro_batch=n`` folders replace each other's panes).
"""

from __future__ import annotations

from sqlglot import exp

from sqlwin.errors import SqlwinError
from sqlwin.streaming import catalog, storage

QUERY_RECORD = "query.json"


def query_sql(node: exp.Expr) -> str:
    """The query of a CREATE STREAMING TABLE or INSERT INTO, as sqlwin's dialect prints it: spacing, case of
    keywords and comments do not matter."""
    from sqlwin.dialect import generate

    return generate(node.expression if isinstance(node, exp.Insert) else node)


def _normal(text: str) -> str:
    """A recorded query printed again by this version (printing may change between versions; parsing it back
    and printing it gives what this version prints for the query it was)."""
    from sqlwin.dialect import generate, parse_one

    return generate(parse_one(text))


def check_query(name: str, location: str, sql: str, at: exp.Expr | None) -> None:
    """Refuse to start ``sql`` on a folder that holds the state of another query."""
    recorded = storage.read_json(storage.join(location, QUERY_RECORD))
    if recorded is None or recorded.get("query") == sql or _normal(recorded["query"]) == _normal(sql):
        return
    raise SqlwinError.at(at, f"streaming table {name}: its folder {location} holds the state of another query "
                             f"({_short(recorded['query'])}); a query cannot change under its state. DROP "
                             f"STREAMING TABLE {name} PURGE first to start it afresh, or give it another "
                             "OPTIONS (checkpoint ...)")


def record_query(location: str, sql: str) -> None:
    """After the first start: the query the folder holds the state of (a folder from before this record keeps
    the query it is started with now)."""
    path = storage.join(location, QUERY_RECORD)
    if storage.read_json(path) is None:
        storage.write_json(path, {"query": sql})


def check_folders(name: str, folders: dict[str, str], at: exp.Expr | None) -> None:
    """Refuse folders (role -> URI: the checkpoint, the sink's path, the late rows') with a glob character in
    them, and those that are, or hold, or lie inside a folder of another streaming table running in this process.

    Spark reads a file source's path as a Hadoop glob: sqlwin's reads of its own files under a table's folders
    (the tick source, stored rows, fired panes, state, the compaction's manifests) took ``out[1]`` for ``out1``
    and failed, or read nothing, and ``out*`` would read its siblings too."""
    for role, folder in folders.items():
        found = storage.glob_characters(folder)
        if found:
            raise SqlwinError.at(at, f"streaming table {name}: its {role} {folder} has {' '.join(found)} in it, which "
                                     "Spark reads as a glob pattern, not as that folder; give it a folder without "
                                     f"{' '.join(storage.GLOB_CHARACTERS)} (OPTIONS ({_option(role)} ...))")
    for other in catalog.all_tables():
        if other.name.lower() == name.lower() or not other.is_active:
            continue
        for role, mine in folders.items():
            for their_role, theirs in other.folders().items():
                if _overlap(mine, theirs):
                    raise SqlwinError.at(at, f"streaming table {name}: its {role} {mine} is also where the running "
                                             f"streaming table {other.name} keeps its {their_role} ({theirs}); "
                                             f"give {name} another OPTIONS ({_option(role)} ...)")


def _overlap(a: str, b: str) -> bool:
    """Whether folders ``a`` and ``b`` are one, or one holds the other, however each is spelled (``/x/ck`` and
    ``file:///x/ck`` are one folder: compared as given, two tables started on it)."""
    a, b = storage.place(a).rstrip("/"), storage.place(b).rstrip("/")
    return a == b or a.startswith(b + "/") or b.startswith(a + "/")


def _option(role: str) -> str:
    return "path" if role == "path" else "checkpoint"


def _short(sql: str, limit: int = 100) -> str:
    return sql if len(sql) <= limit else sql[: limit - 1] + "…"
