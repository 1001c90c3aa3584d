"""One query for the panes of many micro-batches: the statement partitioned by the micro-batch.

A streaming table computes each micro-batch's fired panes on their own: the user's statement runs over one
micro-batch's panes at a time. Where the statement only reads each pane row by row, one query over every
micro-batch's panes gives the same rows. Where it relates rows of different panes (an aggregation over the
window aggregation, a join of two relations derived from the panes, a window function, DISTINCT), the same
query is still right if each of those operators also partitions by the micro-batch: a GROUP BY gains the
micro-batch column, a join of two pane relations gains the equality of their micro-batches, a window function
its PARTITION BY, and DISTINCT sees the column. Replay uses this to compute every micro-batch's panes in one
Spark job (``PlannedReplay._panes``) where it would otherwise run one per micro-batch.

The rewrite walks the statement's scopes (sqlglot's ``traverse_scope``, innermost first); a scope is *pane*
when it reads the pane relation or another pane scope. Where partitioning cannot reproduce the per-micro-batch
answer (LIMIT/OFFSET, a set operation or an expression subquery over the panes, a pane relation on the
null-supplying side of an outer join, a ``*`` over two pane relations), ``NotPartitionable`` says so and the
caller computes each micro-batch on its own.
"""

from __future__ import annotations

from sqlglot import exp
from sqlglot.optimizer.scope import Scope, traverse_scope


class NotPartitionable(Exception):
    """The statement relates panes in a way one partitioned query cannot reproduce."""


def partition_by(root: exp.Expr, carrier: exp.Select, column: str, carrier_windows: bool = True) -> None:
    """Partition every operator of ``root`` above ``carrier`` (whose output already has ``column``, and whose
    own GROUP BY is partitioned by it) by ``column``; edits ``root`` in place. ``carrier_windows``: the
    carrier's own window functions too, by its FROM's ``column`` (a caller whose carrier has no such source
    partitions them itself)."""
    panes = {id(carrier)}
    for scope in traverse_scope(root):
        node = scope.expression
        if node is carrier:
            if carrier_windows:
                _partition_windows(carrier, exp.column(column, carrier.args["from_"].this.alias_or_name or None))
            continue
        if any(id(s.expression) in panes for s in scope.subquery_scopes):
            raise NotPartitionable("an expression subquery reads the panes")
        if any(id(s.expression) in panes for s in scope.set_operation_scopes):
            raise NotPartitionable("a set operation over the panes")
        sources = _pane_sources(scope, panes)
        if sources:
            panes.add(id(node))
            _partition_select(node, sources, column)


def relation_reads(root: exp.Expr, carrier: exp.Select) -> int:
    """How many times ``root`` reads the pane relation that ``carrier`` reads: a CTE over the panes read twice
    reads it twice (Spark inlines CTEs), so the relation is worth materializing once."""
    reads = {id(carrier): 1}
    for scope in traverse_scope(root):
        if scope.expression is not carrier:
            used = [reads[id(s.expression)] for s in (*_sources(scope), *scope.subquery_scopes,
                                                      *scope.set_operation_scopes) if id(s.expression) in reads]
            if used:
                reads[id(scope.expression)] = sum(used)
    return reads.get(id(root), 1)


def _sources(scope: Scope) -> list[Scope]:
    return [source for _, source in scope.selected_sources.values() if isinstance(source, Scope)]


def _pane_sources(scope: Scope, panes: set[int]) -> list[str]:
    """The names (aliases) of the scope's sources that are pane scopes, in FROM/JOIN order."""
    return [name for name, (_, source) in scope.selected_sources.items()
            if isinstance(source, Scope) and id(source.expression) in panes]


def _partition_select(select: exp.Select, pane_sources: list[str], column: str) -> None:
    if select.args.get("limit") or select.args.get("offset"):
        raise NotPartitionable("LIMIT/OFFSET over the panes")
    first = _join_on_batches(select, set(pane_sources), column)
    batch = exp.column(column, first or None)
    _pass_batch(select, pane_sources, first, column)
    group = select.args.get("group")
    aggregated = any(a.find_ancestor(exp.Window) is None and a.find_ancestor(exp.Select) is select
                     for item in select.expressions for a in item.find_all(exp.AggFunc))
    if group is not None:
        group.append("expressions", batch.copy())
    elif aggregated:
        select.set("group", exp.Group(expressions=[batch.copy()]))
    _partition_windows(select, batch)


def _join_on_batches(select: exp.Select, panes: set[str], column: str) -> str:
    """Adds ``first.column = other.column`` to the join of every later pane source; returns the first pane
    source (whose micro-batch the select passes on). Outer joins must keep the pane side."""
    joined = [select.args["from_"].this.alias_or_name]
    first = joined[0] if joined[0] in panes else None
    for join in select.args.get("joins") or []:
        name = join.this.alias_or_name
        side = (join.side or "").upper()
        if name in panes:
            if first is None:
                if side:
                    raise NotPartitionable("a pane relation on the null-supplying side of an outer join")
                first = name
            else:
                if side in ("RIGHT", "FULL") or join.args.get("using"):
                    raise NotPartitionable("a RIGHT/FULL join or USING between pane relations")
                same = exp.EQ(this=exp.column(column, first or None), expression=exp.column(column, name or None))
                on = join.args.get("on")
                join.set("on", exp.and_(on, same) if on is not None else same)
        elif first is not None and side in ("RIGHT", "FULL"):
            raise NotPartitionable("a pane relation on the null-supplying side of an outer join")
        joined.append(name)
    if first is None:
        raise NotPartitionable("the panes are read only through an outer join's null-supplying side")
    return first


def _pass_batch(select: exp.Select, pane_sources: list[str], first: str, column: str) -> None:
    """The select's output carries ``first``'s micro-batch: a ``*`` over one pane source passes it; a pane
    column the caller appended unqualified is qualified (two pane sources have it)."""
    covered = [s for item in select.expressions for s in _star_sources(item, pane_sources)]
    if len(covered) > 1:
        raise NotPartitionable("a * over two pane relations")
    kept = [e for e in select.expressions
            if not (isinstance(e, exp.Column) and not e.table and e.name == column)]
    if not covered:
        kept.append(exp.alias_(exp.column(column, first or None), column))
    select.set("expressions", kept)


def _star_sources(item: exp.Expr, pane_sources: list[str]) -> list[str]:
    if isinstance(item, exp.Star):
        return list(pane_sources)
    if isinstance(item, exp.Column) and isinstance(item.this, exp.Star):
        return [item.table] if item.table in pane_sources else []
    return []


def _partition_windows(select: exp.Select, batch: exp.Expr) -> None:
    """Every window function of the select (not of its subqueries) partitioned by the micro-batch too."""
    for window in list(select.find_all(exp.Window)):
        if window.find_ancestor(exp.Select) is select and not _partitioned(window, batch):
            window.append("partition_by", batch.copy())


def _partitioned(window: exp.Window, batch: exp.Expr) -> bool:
    return any(p == batch for p in window.args.get("partition_by") or [])
