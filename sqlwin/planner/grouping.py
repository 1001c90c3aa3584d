"""GROUP BY keys spelled out as Spark resolves them, and keys compared as Spark compares names.

Spark accepts ``GROUP BY 1, 2`` (ordinals of the SELECT list), ``GROUP BY alias`` (a SELECT alias that names no
input column) and ``GROUP BY ALL`` (every SELECT item without an aggregate). A query whose keys are read by
sqlwin (the streaming paths: the window bounds among them, the rest the panes' keys) has them replaced by the
expressions they stand for first (``spell_out``). Names are case-insensitive in Spark (``spark.sql.caseSensitive``
is off by default, and backquotes do not change that): ``alike`` compares two expressions so.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping

from sqlglot import exp

from sqlwin.plan.windows import WindowSpec


def spell_out(select: exp.Select, columns: Collection[str] | None) -> None:
    """``select``'s GROUP BY (changed in place) with ordinals, SELECT aliases and ALL replaced by the expressions
    they stand for. ``columns``: the names ``select`` reads from its FROM (lower case), or None when unknown (then
    a name is never read as an alias). What Spark refuses (an ordinal out of range or of an aggregate) is left as
    written, for Spark's own error."""
    group = select.args.get("group")
    if group is None:
        return
    items = list(select.expressions)
    if group.args.get("all"):
        if not any(_is_star(e) for e in items):
            group.set("all", None)
            group.set("expressions", [e.unalias().copy() for e in items if _grouped_by_all(e)])
        return
    group.set("expressions", [_spelled(key, items, columns) for key in group.expressions])


def _spelled(key: exp.Expr, items: list[exp.Expr], columns: Collection[str] | None) -> exp.Expr:
    """The expression a GROUP BY key stands for: its SELECT item for an ordinal or an alias, else itself."""
    item = None
    if isinstance(key, exp.Literal) and key.is_int and 1 <= int(key.name) <= len(items):
        item = items[int(key.name) - 1]
    elif isinstance(key, exp.Column) and not key.table and columns is not None and key.name.lower() not in columns:
        named = [e for e in items if isinstance(e, exp.Alias) and e.alias.lower() == key.name.lower()]
        item = named[0] if len(named) == 1 else None
    if item is None or _is_star(item) or _has_aggregate(item):
        return key
    return item.unalias().copy()


def _grouped_by_all(item: exp.Expr) -> bool:
    """GROUP BY ALL's keys: the items without an aggregate (constants, which group nothing, left out)."""
    return not _has_aggregate(item) and item.find(exp.Column) is not None


def _has_aggregate(node: exp.Expr) -> bool:
    return any(a.find_ancestor(exp.Window) is None for a in node.find_all(exp.AggFunc))


def _is_star(e: exp.Expr) -> bool:
    return isinstance(e, exp.Star) or (isinstance(e, exp.Column) and isinstance(e.this, exp.Star))


def alike(a: object, b: object) -> bool:
    """Whether ``a`` and ``b`` are the same expression to Spark: names (identifiers and function names) compared
    without case, quoted or not; everything else (string literals among it) exactly."""
    if isinstance(a, exp.Expr) and isinstance(b, exp.Expr):
        if type(a) is not type(b):
            return False
        if isinstance(a, (exp.Identifier, exp.Anonymous)) and a.name.lower() != b.name.lower():
            return False
        skip = {"this", "quoted"} if isinstance(a, exp.Identifier) else {"this"} if isinstance(a, exp.Anonymous) \
            else set()
        keys = {k for k, v in a.args.items() if v not in (None, [], False)} | \
            {k for k, v in b.args.items() if v not in (None, [], False)}
        return all(alike(a.args.get(k), b.args.get(k)) for k in keys - skip)
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(alike(x, y) for x, y in zip(a, b, strict=True))
    return a == b


def spell_out_query(node: exp.Expr, windows: list[WindowSpec], tables: Mapping[str, Collection[str]]) -> None:
    """``spell_out`` every GROUP BY of ``node``: a SELECT reading a window TVF reads its input's columns and the
    window's, one reading a table named in ``tables`` (lower-case name -> lower-case columns) reads those."""
    read = {id(w.node): w for w in windows if w.node is not None}
    for select in list(node.find_all(exp.Select)):
        if select.args.get("group") is not None:
            spell_out(select, _input_columns(select, read, tables))


def _input_columns(select: exp.Select, windows: Mapping[int, WindowSpec],
                   tables: Mapping[str, Collection[str]]) -> set[str] | None:
    """The lower-case names ``select`` reads from its one FROM relation, or None when they are not known."""
    source = select.args["from_"].this if select.args.get("from_") is not None else None
    if source is None or select.args.get("joins"):
        return None
    spec = windows.get(id(source))
    if spec is not None:
        known = spec.relation.columns is not None
        return {c.lower() for c in (*spec.relation.column_names, *spec.output_window_columns)} if known else None
    if isinstance(source, exp.Table) and not source.args.get("db") and source.name.lower() in tables:
        return set(tables[source.name.lower()])
    return None
