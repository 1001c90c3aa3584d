"""Partial-aggregate state for the custom streaming path.

A window's pane is the user's aggregation over the rows of some micro-batches (its *tokens*). When every
aggregate of the query is decomposable (``COUNT``, ``SUM``, ``MIN``, ``MAX``, ``AVG``, optionally with
``FILTER``), the operator does not need the rows: per micro-batch, Spark aggregates the new rows of each
(key, window) into one row of partial aggregates, and a pane combines the partial rows of its tokens
(``SUM`` of partial counts, ``MIN`` of partial minima, ...). State is then one row per key, window and
micro-batch instead of one per input row, and a pane reads a handful of rows: the Flink/Beam accumulator
model (``AggregateFunction.merge``, ``CombineFn.mergeAccumulators``).

Anything else (``DISTINCT`` aggregates, user-defined or holistic aggregates, a query that is not an
aggregation, SESSION windows whose rows move between sessions, evictors) keeps raw rows. Each final
aggregate is cast to the type Spark gives the aggregate over raw rows, so the result schema is the same.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from sqlglot import exp

DECOMPOSABLE = (exp.Count, exp.Sum, exp.Min, exp.Max, exp.Avg)
CLAUSES = ("expressions", "having", "qualify", "order")


@dataclass
class AggregateUnit:
    """One aggregate call of the carrier (with its FILTER, if any), and how it splits into partials."""

    node: exp.Expr  # the aggregate, or the Filter around it
    index: int

    @property
    def aggregate(self) -> exp.Expr:
        return self.node.this if isinstance(self.node, exp.Filter) else self.node

    def _wrap(self, agg: exp.Expr) -> exp.Expr:
        if isinstance(self.node, exp.Filter):
            return exp.Filter(this=agg, expression=self.node.expression.copy())
        return agg

    def partials(self) -> list[tuple[str, exp.Expr]]:
        """(column, partial aggregate over one micro-batch's rows of a window) pairs."""
        agg = self.aggregate
        name = f"__p{self.index}"
        if isinstance(agg, exp.Avg):
            return [(f"{name}s", self._wrap(exp.Sum(this=agg.this.copy()))),
                    (f"{name}c", self._wrap(exp.Count(this=agg.this.copy())))]
        return [(name, self.node.copy())]

    def final(self, alias: str, type_sql: str) -> exp.Expr:
        """The aggregate over the partial rows of a pane's tokens (one NULL row for an empty pane)."""
        agg = self.aggregate
        name = f"__p{self.index}"
        if isinstance(agg, exp.Count):
            value: exp.Expr = exp.func("COALESCE", exp.Sum(this=exp.column(name, alias)), exp.Literal.number(0))
        elif isinstance(agg, exp.Sum):
            value = exp.Sum(this=exp.column(name, alias))
        elif isinstance(agg, exp.Min):
            value = exp.Min(this=exp.column(name, alias))
        elif isinstance(agg, exp.Max):
            value = exp.Max(this=exp.column(name, alias))
        else:  # AVG = SUM / COUNT of the pane's partial sums and counts
            total = exp.Sum(this=exp.column(f"{name}s", alias))
            count = exp.func("NULLIF", exp.Sum(this=exp.column(f"{name}c", alias)), exp.Literal.number(0))
            value = exp.Div(this=exp.Cast(this=total, to=exp.DataType.build("double")), expression=count)
        return exp.Cast(this=value, to=exp.DataType.build(type_sql, dialect="spark"))


def aggregate_units(carrier: exp.Select) -> list[AggregateUnit] | None:
    """The carrier's aggregates in a fixed order (the same on every copy of the statement), or None when one
    of them is not decomposable (the query then keeps raw rows)."""
    units: list[AggregateUnit] = []
    for key in CLAUSES:
        value = carrier.args.get(key)
        for root in value if isinstance(value, list) else [value] if value is not None else []:
            if any(True for _ in root.find_all(exp.Select, exp.Subquery, exp.Anonymous)):
                return None  # scalar subqueries, user-defined functions (maybe UDAFs): raw rows
            for node in root.find_all(exp.AggFunc):
                if isinstance(node.parent, exp.Window) and node.parent.this is node:
                    continue  # an analytic function over the groups, not a group aggregate
                nested = node.find_ancestor(exp.AggFunc) is not None and not _window_over(node)
                if not isinstance(node, DECOMPOSABLE) or isinstance(node.this, exp.Distinct) or \
                        node.args.get("expressions") or nested:
                    return None
                units.append(AggregateUnit(node.parent if isinstance(node.parent, exp.Filter) else node,
                                           len(units)))
    return units


def _window_over(node: exp.Expr) -> bool:
    """``SUM(SUM(v)) OVER (...)``: the inner aggregate's only aggregate ancestor is the analytic function."""
    parent = node.find_ancestor(exp.AggFunc)
    return parent is not None and isinstance(parent.parent, exp.Window) and parent.parent.this is parent


@dataclass
class Decomposition:
    """The partial aggregates of a query and the Spark SQL that computes them per micro-batch."""

    units: list[AggregateUnit]
    raw_types: list[str]  # the type of each aggregate over raw rows (the final one is cast to it)

    @property
    def columns(self) -> list[str]:
        return [name for unit in self.units for name, _ in unit.partials()]

    def partial_sql(self, view: str, alias: str, keys: int, extra: tuple[str, ...] = (),
                    key_after: str | None = None, measures: tuple[str, ...] = ()) -> str:
        """Per (key, window, status[, extra]): the row count ``__n`` and every partial aggregate of the rows.

        ``key_after``: the rows have no ``__key``; it is this expression of the ``__k<i>`` columns (and
        ``extra``), computed once per group instead of once per row. ``measures``: more aggregates (``expr AS
        name``) the caller needs of each group."""
        group = ["__ws", "__we", "__status", *[f"__k{i}" for i in range(keys)], *extra]
        if key_after is None:
            group.insert(0, "__key")
        items = [*group, "COUNT(*) AS __n"]
        items += [f"{expr.sql(dialect='spark')} AS `{name}`" for unit in self.units
                  for name, expr in unit.partials()]
        items += measures
        sql = f"SELECT {', '.join(items)} FROM {view} AS `{alias}` GROUP BY {', '.join(group)}"
        return sql if key_after is None else f"SELECT {key_after} AS __key, * FROM ({sql})"

    def rewrite(self, carrier: exp.Select, alias: str) -> None:
        """Replace each aggregate of (a copy of) the carrier by its final form over the partial rows."""
        units = aggregate_units(carrier)
        assert units is not None and len(units) == len(self.units)
        for unit, type_sql in zip(units, self.raw_types, strict=True):
            unit.node.replace(unit.final(alias, type_sql))


def raw_types_sql(units: list[AggregateUnit], view: str, alias: str) -> str:
    """A query whose schema is each aggregate's type over raw rows (analysed, never run)."""
    items = [f"{u.node.sql(dialect='spark')} AS __r{u.index}" for u in units]
    return f"SELECT {', '.join(items)} FROM {view} AS `{alias}`"


def decompose(carrier: exp.Select, spark: Any, view: str, alias: str) -> Decomposition | None:
    """The query's decomposition, or None (raw rows) when an aggregate does not split or AVG is not over a
    number (decimal and interval averages keep raw rows: their rounding is not that of SUM / COUNT)."""
    units = aggregate_units(carrier)
    if not units:
        return None
    schema = spark.sql(raw_types_sql(units, view, alias)).schema
    types = [f.dataType.simpleString() for f in schema.fields]
    for unit, type_sql in zip(units, types, strict=True):
        if isinstance(unit.aggregate, exp.Avg) and type_sql != "double":
            return None
    return Decomposition(units, types)
