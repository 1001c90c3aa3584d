"""A window join of a stream's window TVF with that window's own MAX (or MIN), run as a window Top-N.

Nexmark q7 in Flink's window-join form keeps the rows of each window whose column equals the window's largest::

    SELECT B.auction, B.price, B.bidder, B.date_time
    FROM (SELECT * FROM TUMBLE(TABLE bids, DESCRIPTOR(date_time), INTERVAL '10' SECONDS)) B
    JOIN (SELECT MAX(price) AS maxprice, window_start, window_end
          FROM TUMBLE(TABLE bids, DESCRIPTOR(date_time), INTERVAL '10' SECONDS)
          GROUP BY window_start, window_end) B1
    ON B.window_start = B1.window_start AND B.window_end = B1.window_end AND B.price = B1.maxprice

Both sides read the same stream through the same window, so they see the same rows and the same watermark:
they drop the same late rows, and a window's join fires when its (single) pane does. With the default
emission and no ALLOWED LATENESS each side has one pane per window, and the join's result for a window is
its rows whose column equals the window's MAX over the non-NULL values: exactly the rows ranked first by
``RANK() OVER (PARTITION BY window_start, window_end[, keys] ORDER BY col DESC)`` among the rows whose column
and keys are not NULL (ties all rank first; a window whose values are all NULL has no MAX and no such row; the
join's ``=`` matches no NULL key). So the statement becomes that window Top-N over one window TVF: one window
operator instead of two stages and a join (each side reading the stream, the rows stored once per side, a
third operator joining them).

Any other shape (an EMIT clause, lateness, other aggregates, other join conditions, other clauses around the
join) runs as the window join it is (``stages``).
"""

from __future__ import annotations

import dataclasses

import sqlglot
from sqlglot import exp

from sqlwin.plan.statements import WindowedQuery
from sqlwin.plan.windows import WindowSpec
from sqlwin.streaming.shape import TopRows, top_select, within

RANK = "__sqlwin_rank"
_AGGREGATES = {exp.Max: "DESC", exp.Min: "ASC"}


@dataclasses.dataclass
class _Side:
    alias: str
    carrier: exp.Select  # the SELECT that reads the side's window TVF
    outputs: dict[str, str] | None  # output name -> the TVF column it is (None: SELECT *)


def as_window_rank(query: WindowedQuery, specs: list[WindowSpec], carriers: list[exp.Select],
                   tops: list[int], select: exp.Select,
                   relations: list[exp.Expr]) -> tuple[WindowedQuery, TopRows] | None:
    """The window Top-N equal to the window join ``select`` of ``relations`` (each reading one of the window TVFs
    ``specs[tops[n]]``, by carrier), with the rows it can output, or None where the join is not of that form."""
    node = query.node
    top = top_select(node)
    if top is not select or query.emit.explicit or query.lateness.allowed or query.lateness.late_rows_to or \
            query.evict is not None or any(select.args.get(k) for k in ("group", "having", "distinct", "order",
                                                                         "limit", "qualify", "windows", "with_")):
        return None
    join = select.args["joins"][0]
    if (join.args.get("kind") or "").upper() not in ("", "INNER") or join.args.get("side") or \
            join.args.get("using"):
        return None
    a, b = (specs[i] for i in tops)
    if _unaliased(a.node) != _unaliased(b.node):
        return None
    if not all(isinstance(r, exp.Subquery) and r.this is carriers[i] for r, i in zip(relations, tops, strict=True)):
        return None
    for rows_n, agg_n in ((0, 1), (1, 0)):
        rows = _rows_side(relations[rows_n].alias_or_name, carriers[tops[rows_n]], specs[tops[rows_n]])
        found = _aggregate_side(carriers[tops[agg_n]])
        if rows is None or found is None:
            continue
        name, (column, order), keys = found
        mapping = _on_mapping(join.args.get("on"), rows, relations[agg_n].alias_or_name, name, column, keys)
        if mapping is None:
            continue
        return _rewrite(query, specs[tops[rows_n]], rows, relations[agg_n].alias_or_name, mapping, column, order,
                        keys)
    return None


def _unaliased(tvf: exp.Expr) -> exp.Expr:
    copy = tvf.copy()
    copy.set("alias", None)
    return copy


_CLAUSES = ("where", "having", "distinct", "order", "limit", "qualify", "windows", "joins", "with_", "lateness",
            "late_rows_to", "evict", "emit")  # none on a side: it is its window TVF's rows, or one aggregate of them


def _plain(select: exp.Select) -> bool:
    return not any(select.args.get(k) for k in _CLAUSES)


def _rows_side(alias: str, carrier: exp.Select, spec: WindowSpec) -> _Side | None:
    """The side that passes the window's rows on: SELECT * or plain columns of the TVF (a ``*`` names the
    stream's columns and the window's, where the stream's schema is known)."""
    if not _plain(carrier) or carrier.args.get("group") or carrier.find(exp.Window, exp.AggFunc) is not None:
        return None
    if len(carrier.expressions) == 1 and isinstance(carrier.expressions[0], exp.Star):
        if spec.relation.columns is None:
            return _Side(alias, carrier, None)
        names = [*(c.name.lower() for c in spec.relation.columns), "window_start", "window_end", "window_time"]
        return _Side(alias, carrier, {n: n for n in names})
    outputs = {}
    for item in carrier.expressions:
        column = item.unalias()
        if not isinstance(column, exp.Column) or isinstance(column.this, exp.Star):
            return None
        outputs[item.alias_or_name.lower()] = column.name.lower()
    return _Side(alias, carrier, outputs)


def _aggregate_side(carrier: exp.Select) -> tuple[str, tuple[str, str], dict[str, str]] | None:
    """(the aggregate's output name, (the TVF column it takes, the rank's order), output name -> TVF column of
    the window bounds and keys) for ``SELECT MAX(col) AS m, window_start, window_end[, k...] FROM TVF GROUP BY
    window_start, window_end[, k...]``."""
    group = carrier.args.get("group")
    if group is None or not _plain(carrier):
        return None
    grouped = []
    for g in group.expressions:
        if not isinstance(g, exp.Column):
            return None
        grouped.append(g.name.lower())
    if "window_start" not in grouped or "window_end" not in grouped or len(set(grouped)) != len(grouped):
        return None
    aggregate, passed = None, {}
    for item in carrier.expressions:
        value = item.unalias()
        kind = type(value)
        if kind in _AGGREGATES and isinstance(value.this, exp.Column) and not value.expressions:
            if aggregate is not None:
                return None
            aggregate = (item.alias_or_name.lower(), (value.this.name.lower(), _AGGREGATES[kind]))
        elif isinstance(value, exp.Column) and value.name.lower() in grouped:
            passed[item.alias_or_name.lower()] = value.name.lower()
        else:
            return None
    if aggregate is None or set(passed.values()) != set(grouped):
        return None
    return aggregate[0], aggregate[1], passed


def _on_mapping(on: exp.Expr | None, rows: _Side, agg_alias: str, agg_name: str, column: str,
                keys: dict[str, str]) -> dict[str, str] | None:
    """Each output of the aggregate side as the rows side's output it equals, if ON equates exactly the bounds,
    the keys and the aggregate with the rows side's column: {aggregate-side name: rows-side name}."""
    if on is None:
        return None
    conjuncts = list(on.flatten()) if isinstance(on, exp.And) else [on]
    mapping: dict[str, str] = {}
    for eq in conjuncts:
        if not isinstance(eq, exp.EQ) or not all(isinstance(c, exp.Column) for c in (eq.this, eq.expression)):
            return None
        sides = {_which(c, rows.alias, agg_alias): c.name.lower() for c in (eq.this, eq.expression)}
        if set(sides) != {"rows", "agg"}:
            return None
        mine, theirs = sides["rows"], sides["agg"]
        underlying = _column_of(rows, mine)
        wanted = column if theirs == agg_name else keys.get(theirs)
        if underlying is None or wanted is None or underlying != wanted or theirs in mapping:
            return None
        mapping[theirs] = mine
    if set(mapping) != {agg_name, *keys}:
        return None
    return mapping


def _which(column: exp.Column, rows_alias: str, agg_alias: str) -> str | None:
    table = column.table.lower()
    return "rows" if table == rows_alias.lower() else "agg" if table == agg_alias.lower() else None


def _column_of(side: _Side, name: str) -> str | None:
    return name if side.outputs is None else side.outputs.get(name)


def _rewrite(query: WindowedQuery, spec: WindowSpec, rows: _Side, agg_alias: str, mapping: dict[str, str],
             column: str, order: str, keys: dict[str, str]) -> tuple[WindowedQuery, TopRows] | None:
    """The statement with the join replaced by the rows side, ranked within its windows and kept at rank 1;
    None where the statement names a column of the join it cannot say which side's it is."""
    node = query.node
    top = top_select(node)
    where = top.args.get("where")
    for item in [*top.expressions, *([where] if where is not None else [])]:
        if isinstance(item, exp.Star):
            return None
        for col in item.find_all(exp.Column):
            side = _side_of(col, rows, agg_alias, mapping)
            if side is None or (isinstance(col.this, exp.Star) and side != "rows"):
                return None
    marker = "sqlwin_rank_tvf"
    spec.node.meta[marker] = True
    copy = node.copy()
    spec.node.meta.pop(marker, None)
    copy_top = top_select(copy)
    tvf = next(t for t in copy.find_all(type(spec.node)) if t.meta.pop(marker, False))
    carrier = tvf.find_ancestor(exp.Select)
    side = carrier.parent
    for col in list(copy_top.find_all(exp.Column)):
        if within(col, side):
            continue
        if isinstance(col.this, exp.Star):
            col.replace(exp.Var(this=f"{col.table}.* EXCEPT ({RANK})"))
        elif _side_of(col, rows, agg_alias, mapping) == "agg":
            equal = exp.column(mapping[col.name.lower()], table=rows.alias)
            col.replace(exp.alias_(equal, col.name) if col.parent is copy_top else equal)  # its name stays
        elif not col.table:
            col.set("table", exp.to_identifier(rows.alias))
    partition = ["window_start", "window_end", *(k for k in dict.fromkeys(keys.values())
                                                  if k not in ("window_start", "window_end"))]
    rank = sqlglot.parse_one(f"RANK() OVER (PARTITION BY {', '.join(_quoted(c) for c in partition)} "
                             f"ORDER BY {_quoted(column)} {order})", dialect="spark")
    carrier.append("expressions", exp.alias_(rank, RANK))
    # the join matches no NULL: a row whose column or key is NULL has no MAX to equal, nor a partner of its key
    present = [exp.Not(this=exp.Is(this=exp.column(c), expression=exp.Null())) for c in [column, *partition[2:]]]
    carrier.set("where", exp.Where(this=exp.and_(*present)))
    copy_top.set("joins", None)
    copy_top.set("from_", exp.From(this=side))
    keep = exp.EQ(this=exp.column(RANK, table=rows.alias), expression=exp.Literal.number(1))
    kept = copy_top.args.get("where")
    copy_top.set("where", exp.Where(this=exp.and_(keep, kept.this) if kept is not None else keep))
    return WindowedQuery(node=copy, windows=[dataclasses.replace(spec, node=tvf)], emit=query.emit,
                         lateness=query.lateness, evict=query.evict, aggregated=False,
                         global_window=query.global_window, streams=query.streams), \
        TopRows(tuple(partition), column, order)


def _side_of(col: exp.Column, rows: _Side, agg_alias: str, mapping: dict[str, str]) -> str | None:
    """Which side of the join a column of the statement names ("rows" or "agg"), None where that is not clear
    (an unqualified name both sides may have) or the aggregate side's column is not one the ON equates."""
    side = _which(col, rows.alias, agg_alias) if col.table else None
    name = col.name.lower()
    if not col.table:
        in_rows = rows.outputs is not None and name in rows.outputs
        in_agg = name in mapping
        if in_rows == in_agg or (rows.outputs is None and in_agg):
            return None
        side = "rows" if in_rows else "agg"
    if side == "agg" and name not in mapping:
        return None
    return side


def _quoted(name: str) -> str:
    return exp.column(name).sql(dialect="spark", identify=True)
