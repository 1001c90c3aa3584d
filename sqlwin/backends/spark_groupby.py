"""Aggregate-aware rewrite for Spark: group time windows by one struct instead of two columns.

Flink's idiom ``GROUP BY window_start, window_end, k`` makes Spark hash two timestamp keys where
its own ``GROUP BY window(ts, ...), k`` hashes one struct; measured at 5M rows that is ~12% of the
query. When an aggregation reads a single TUMBLE/HOP derived table directly and groups by both
bounds, the derived table also yields ``__w = named_struct(start, end)``, the aggregation groups by
``__w`` and reads the bounds back from it. Same rows, same names, same types.

A static-gap SESSION is routed too (``SessionRoute``): its per-row plan needs three window passes
to give every row its bounds, then the user's aggregation; grouped by session, the bounds are
aggregates of the group, so one sort and two pipelined window passes name each session and a hash
aggregation finishes it (measured below Spark's own ``session_window``, which pre-aggregates on
nearly unique keys before its shuffle). Routed only when the answer cannot differ: the grouping
keys besides the bounds are exactly the SESSION's partition keys, there is no WHERE (it would drop
rows after sessions formed), and no bound is read per row except ``window_start``.

A count window (TUMBLE ROWS n, HOP ROWS m, ROWS n) is routed the same way (``CountRoute``): its
per-row plan numbers the rows (one sort), then gives every row its window's bounds with a second
window function partitioned by (keys, window number) (a second sort), then the user's aggregation.
Grouped by (keys, window_index), the bounds are aggregates of the group (MIN / MAX of the row
times, the very definition the per-row plan uses), so the second window pass goes; TUMBLE ROWS also
drops its per-partition row count, keeping only complete windows with ``HAVING COUNT(*) = n``.
Routed only when the grouping keys are exactly the partition keys and ``window_index`` (two windows
of one partition may share both bounds when times tie, so the bounds alone do not name a window),
there is no WHERE, every bound read is grouped by, and none but ``window_index`` is read per row.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from sqlglot import exp

MARK = "sqlwin_window_struct"  # meta flag on the derived tables this rewrite may touch
SESSION_MARK = "sqlwin_session_route"  # meta: the SessionRoute of a static-gap SESSION derived table
COUNT_MARK = "sqlwin_count_route"  # meta: the CountRoute of a TUMBLE ROWS / HOP ROWS, ROWS derived table
BOUNDS = ("window_start", "window_end", "window_time")
COUNT_BOUNDS = (*BOUNDS, "window_index")


@dataclass(frozen=True)
class SessionRoute:
    """What an aggregation grouped by session needs instead of the per-row plan.

    ``body`` yields every input column plus ``key`` (unique per session within a partition);
    ``group_bounds`` give each bound over the group (may use aggregates), ``row_bounds`` the bounds
    known per row (usable inside aggregates); both refer to ``body``'s columns unqualified."""

    body: exp.Select
    key: str
    partition_by: tuple[str, ...]
    group_bounds: dict[str, exp.Expr]
    row_bounds: dict[str, exp.Expr] = field(default_factory=dict)


@dataclass(frozen=True)
class CountRoute:
    """What an aggregation grouped by count window needs instead of the per-row plan.

    ``body`` yields every input column plus ``key`` (the window number within a partition) for the
    rows of complete windows only, unless ``having`` (a condition over the group) keeps those;
    ``bounds`` give each of ``COUNT_BOUNDS`` over a group, all referring to ``body``'s columns
    unqualified; ``window_index`` is the key itself, so it is right per row too."""

    body: exp.Select
    key: str
    partition_by: tuple[str, ...]
    bounds: dict[str, exp.Expr]
    having: exp.Expr | None = None


def group_by_window_struct(derived_tables: list[exp.Expr]) -> None:
    """Rewrite the queries that read ``derived_tables`` (just put in place of window TVFs) directly in
    their FROM; only those can qualify, so the rest of the statement is never searched."""
    for derived in derived_tables:
        source = derived.parent
        select = source.parent if isinstance(source, exp.From) else None
        if isinstance(select, exp.Select) and select.args.get("from_") is source:
            _rewrite(select)


def window_bound(node: exp.Expr, alias: str, names: tuple[str, ...] = BOUNDS) -> str | None:
    if isinstance(node, exp.Column) and node.name.lower() in names and node.table in ("", alias):
        return node.name.lower()
    return None


def inside_aggregate(node: exp.Expr, select: exp.Select) -> bool:
    """Within ``select`` (not above it): is ``node`` an aggregate's argument or in a subquery?"""
    parent = node.parent
    while parent is not None and parent is not select:
        if isinstance(parent, (exp.AggFunc, exp.Subquery)):
            return True
        parent = parent.parent
    return False


def struct_bound(struct: exp.Column, name: str) -> exp.Expr:
    """``window_start``, ``window_end`` or ``window_time`` read from a ``window()``-shaped struct column."""
    end = exp.Dot(this=struct.copy(), expression=exp.to_identifier("end"))
    if name == "window_start":
        return exp.Dot(this=struct.copy(), expression=exp.to_identifier("start"))
    if name == "window_end":
        return end
    return exp.Sub(this=end, expression=exp.Interval(this=exp.Literal.string("1"), unit=exp.var("MILLISECOND")))


def replace_window_bounds(select: exp.Select, alias: str, bound: Callable[[str, bool], exp.Expr | None],
                          clauses: tuple[str, ...] = ("having", "qualify", "order"),
                          names: tuple[str, ...] = BOUNDS) -> None:
    """Rewrite ``select``'s references to the bounds of its window relation ``alias``, in the SELECT list
    and in ``clauses``: each becomes ``bound(name, in_aggregate)`` (None keeps it), where ``in_aggregate``
    says it is read per row (an aggregate's argument, or in a subquery). A bound selected bare keeps its
    output name; a bound inside an expression, if it becomes an operator, keeps its own precedence."""

    def swap(node: exp.Expr) -> exp.Expr:
        name = window_bound(node, alias, names)
        value = bound(name, inside_aggregate(node, select)) if name else None
        if value is None:
            return node
        operator = isinstance(value, (exp.Binary, exp.Unary)) and not isinstance(value, exp.Dot)
        return exp.paren(value, copy=False) if operator else value

    items = []
    for item in select.expressions:
        name = window_bound(item, alias, names)
        value = bound(name, False) if name else None
        kept = exp.alias_(value, item.name, copy=False) if value is not None else None  # named as written
        items.append(kept if kept is not None else item.transform(swap, copy=False))
    select.set("expressions", items)
    for key in clauses:
        part = select.args.get(key)
        if part is not None:
            select.set(key, part.transform(swap, copy=False))


def renames_an_item(select: exp.Select, alias: str, replaced: Callable[[str, bool], bool],
                    names: tuple[str, ...] = BOUNDS) -> bool:
    """Would ``replace_window_bounds`` change an item the user did not name, other than a bare bound (which keeps
    its name)? ``replaced(name, in_aggregate)``: whether a bound read there is replaced. Spark names such an item
    after the expression it analyses, so it would name the rewritten one (``__w.start + INTERVAL ...`` for
    ``window_start + INTERVAL 1 MINUTE``): GRAMMAR 6 wants the user's text."""
    for item in select.expressions:
        if isinstance(item, (exp.Alias, exp.Aliases)) or window_bound(item, alias, names):
            continue
        for column in item.find_all(exp.Column):
            name = window_bound(column, alias, names)
            if name and replaced(name, inside_aggregate(column, select)):
                return True
    return False


def _group_window_time(select: exp.Select, alias: str, group: exp.Group) -> None:
    """The per-row plan kept for an aggregation grouped by both bounds: ``window_time`` (``window_end`` less
    1 ms, so the same groups) grouped by too where the query reads it per group, as the rewrites let it."""
    grouped = {window_bound(g, alias) for g in group.expressions}
    if "window_time" in grouped:
        return
    derived = select.args["from_"].this
    if any(window_bound(c, alias) == "window_time" and not inside_aggregate(c, select) and not _under(c, derived)
           for c in select.find_all(exp.Column)):
        group.append("expressions", exp.column("window_time", alias))


def _rewrite(select: exp.Select) -> None:
    source = select.args.get("from_")
    derived = source.this if source is not None else None
    group = select.args.get("group")
    if (not isinstance(derived, exp.Subquery) or group is None
            or select.args.get("joins") or select.args.get("laterals")
            or any(group.args.get(k) for k in ("grouping_sets", "cube", "rollup", "totals"))):
        return
    route = derived.meta.get(SESSION_MARK)
    if isinstance(route, SessionRoute):
        _route_session(select, derived, group, route)
        return
    count_route = derived.meta.get(COUNT_MARK)
    if isinstance(count_route, CountRoute):
        _route_count(select, derived, group, count_route)
        return
    if not derived.meta.get(MARK):
        return
    alias = derived.alias
    bounds = {window_bound(g, alias) for g in group.expressions}
    if not {"window_start", "window_end"} <= bounds:
        return
    # an un-aliased item computed from a bound keeps its name only where the bound is a column (the per-row plan)
    if renames_an_item(select, alias, lambda _, per_row: not per_row):
        _group_window_time(select, alias, group)
        return
    body = derived.this
    exprs = {e.alias_or_name.lower(): e for e in body.expressions}
    if not {"window_start", "window_end"} <= exprs.keys():
        return
    # STRUCT(start AS start, end AS end): what NAMED_STRUCT prints as in Spark SQL, built so directly
    struct = exp.Struct(expressions=[exp.alias_(exprs[f"window_{name}"].this.copy(), name, copy=False)
                                     for name in ("start", "end")])
    body.select(exp.alias_(struct, "__w", copy=False), copy=False)
    w = exp.column("__w", alias)
    group.set("expressions", [g for g in group.expressions if window_bound(g, alias) is None] + [w.copy()])
    replace_window_bounds(select, alias, lambda name, per_row: None if per_row else struct_bound(w, name))
    _drop_unread_bounds(select, body, alias)


def _drop_unread_bounds(select: exp.Select, body: exp.Select, alias: str) -> None:
    """Drop the bound columns ``select`` no longer reads from its window relation ``body`` (all of them once it
    groups by ``__w``): Spark prunes them anyway, but its optimizer first propagates constraints through every
    alias of the same expression, which for a window join (q8) doubled the time to plan the query."""
    own = [n for n in select.find_all(exp.Column, exp.Star) if not _under(n, body)]
    if any(isinstance(n, exp.Star) and n.find_ancestor(exp.AggFunc) is None for n in own):
        return  # a star may read them
    read = {window_bound(c, alias) for c in own if isinstance(c, exp.Column)} - {None}
    unread = set(BOUNDS) - read
    body.set("expressions", [e for e in body.expressions if e.alias_or_name.lower() not in unread])


def _qualified(node: exp.Expr, alias: str) -> exp.Expr:
    node = node.copy()
    for c in node.find_all(exp.Column):
        c.set("table", exp.to_identifier(alias))
    return node


def _clause(node: exp.Expr, select: exp.Select) -> str | None:
    """The key of ``select``'s argument that holds ``node``, or None when a subquery comes first."""
    while node.parent is not None and node.parent is not select:
        if isinstance(node.parent, (exp.Subquery, exp.Select)):
            return None
        node = node.parent
    return node.arg_key if node.parent is select else None


def _route_session(select: exp.Select, derived: exp.Subquery, group: exp.Group, route: SessionRoute) -> None:
    """Group by ``route.key`` instead of the per-row bounds, when provably the same answer."""
    alias = derived.alias
    bounds = {window_bound(g, alias) for g in group.expressions}
    others = [g for g in group.expressions if window_bound(g, alias) is None]
    partition = {k.lower() for k in route.partition_by}
    if (not {"window_start", "window_end"} <= bounds or select.args.get("where") is not None
            or not all(isinstance(g, exp.Column) and g.table in ("", alias) for g in others)
            or {g.name.lower() for g in others} != partition):
        return
    if renames_an_item(select, alias, lambda *_: True):  # the per-row plan names it as written
        _group_window_time(select, alias, group)
        return
    refs = [c for c in select.find_all(exp.Column) if window_bound(c, alias) and not _under(c, derived)]
    for c in refs:
        if _clause(c, select) not in ("expressions", "group", "having", "qualify", "order"):
            return
        if inside_aggregate(c, select) and window_bound(c, alias) not in route.row_bounds:
            return

    def bound(name: str, per_row: bool) -> exp.Expr:
        return _qualified((route.row_bounds if per_row else route.group_bounds)[name], alias)

    replace_window_bounds(select, alias, bound)
    group.set("expressions", [g.copy() for g in others] + [exp.column(route.key, alias)])
    derived.set("this", route.body.copy())
    derived.meta.pop(SESSION_MARK, None)


def _route_count(select: exp.Select, derived: exp.Subquery, group: exp.Group, route: CountRoute) -> None:
    """Group by (partition keys, ``route.key``) instead of the per-row bounds, when provably the same answer."""
    alias = derived.alias
    grouped = {window_bound(g, alias, COUNT_BOUNDS) for g in group.expressions} - {None}
    others = [g for g in group.expressions if window_bound(g, alias, COUNT_BOUNDS) is None]
    partition = {k.lower() for k in route.partition_by}
    if ("window_index" not in grouped or select.args.get("where") is not None
            or not all(isinstance(g, exp.Column) and g.table in ("", alias) for g in others)
            or {g.name.lower() for g in others} != partition):
        return
    if renames_an_item(select, alias, lambda *_: True, COUNT_BOUNDS):  # the per-row plan names it as written
        _group_window_time(select, alias, group)
        return
    selected = set()
    for item in select.expressions:
        if isinstance(item, exp.Star) or (isinstance(item, exp.Column) and isinstance(item.this, exp.Star)):
            return  # the derived table's columns change
        name = item.alias_or_name.lower()
        if name in COUNT_BOUNDS:
            if window_bound(item, alias, COUNT_BOUNDS) != name:
                return  # an output named like a bound: HAVING / ORDER BY may mean it rather than the bound
            selected.add(name)
    refs = [c for c in select.find_all(exp.Column) if window_bound(c, alias, COUNT_BOUNDS) and not _under(c, derived)]
    for c in refs:
        name = window_bound(c, alias, COUNT_BOUNDS)
        clause = _clause(c, select)
        if clause not in ("expressions", "group", "having", "qualify", "order"):
            return
        if name != "window_index" and (name not in grouped or _per_row(c, select)):
            return  # window_index is the key: right per row and per group
        if clause == "order" and (name not in selected or _per_row(c, select) or _under_kind(c, select, exp.Window)):
            return  # ORDER BY reads the bound as the output column of that name (below)

    def bound(name: str, per_row: bool) -> exp.Expr:
        return _qualified(route.bounds[name], alias)

    replace_window_bounds(select, alias, bound, clauses=("having", "qualify"), names=COUNT_BOUNDS)
    order = select.args.get("order")
    if order is not None:
        # Spark resolves ORDER BY over the selected columns: a bound's aggregate there may not resolve
        # (a HAVING on another aggregate puts a projection in between), the output column always does
        select.set("order", order.transform(
            lambda n: exp.column(name) if (name := window_bound(n, alias, COUNT_BOUNDS)) else n, copy=False))
    group.set("expressions", [g.copy() for g in others] + [exp.column(route.key, alias)])
    if route.having is not None:
        having = select.args.get("having")
        condition = route.having.copy()
        select.set("having", exp.Having(this=exp.and_(having.this, condition) if having else condition))
    derived.set("this", route.body.copy())
    derived.meta.pop(COUNT_MARK, None)


def _per_row(node: exp.Expr, select: exp.Select) -> bool:
    """Within ``select``: is ``node`` read per row (an aggregate's argument or FILTER, or in a subquery)?"""
    return _under_kind(node, select, (exp.AggFunc, exp.Filter, exp.Subquery))


def _under_kind(node: exp.Expr, select: exp.Select, kind: type[exp.Expr] | tuple[type[exp.Expr], ...]) -> bool:
    """Within ``select`` (not above it): has ``node`` an ancestor of ``kind``?"""
    parent = node.parent
    while parent is not None and parent is not select:
        if isinstance(parent, kind):
            return True
        parent = parent.parent
    return False


def _under(node: exp.Expr, ancestor: exp.Expr) -> bool:
    parent = node.parent
    while parent is not None:
        if parent is ancestor:
            return True
        parent = parent.parent
    return False
