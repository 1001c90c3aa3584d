"""A stream joined with its own window query by a time range, run as the window join it equals.

Nexmark q7 as Nexmark writes it joins the bids to each window's highest price by the bid's time::

    SELECT b.auction, b.price, b.bidder, b.date_time
    FROM bids b
    JOIN (SELECT MAX(price) AS maxprice, window_end AS date_time
          FROM TUMBLE(TABLE bids, DESCRIPTOR(date_time), INTERVAL '10' SECONDS)
          GROUP BY window_start, window_end) b1 ON b.price = b1.maxprice
    WHERE b.date_time BETWEEN b1.date_time - INTERVAL '10' SECONDS AND b1.date_time

Each row of the window query stands for one window, and the range bounds the stream's time ``t`` by one bound
``X`` of it (``window_start``, ``window_end`` or ``window_time``, through the query's aliases): ``X + lo <= t <=
X + hi``. A TUMBLE's or HOP's bounds are one slide apart, so the rows a window can join are a HOP window of the
stream: its slide, ``hi - lo`` (plus one microsecond) long, starting at ``X + lo``. The stream's side is read
through that HOP (``StreamRange.spec``), its windows renamed to the windows they meet (``shift``), and the two
sides join as a window join (``stages``, ``windowjoin``): a window's rows meet once both sides' watermarks have
passed the later of its end and the end of its range (``delay``). The user's range stays in the statement, so
the join's rows are the user's; the batch query gives the same rows (``check_as_batch`` runs it as written).

Each side drops its own late rows, as in every window join: the window query a row behind its window's end,
the stream's side a row behind the end of a window's range (the row cannot meet that window any more).
An inner join only: an outer join would emit a stream row once per window its range reaches.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from decimal import Decimal

from sqlglot import exp

from sqlwin.backends.base import SPEC_KEY, spec_key
from sqlwin.dialect import parse_one
from sqlwin.dialect.nodes import WindowTVF
from sqlwin.errors import SqlwinError
from sqlwin.plan.statements import WindowedQuery
from sqlwin.plan.windows import WindowKind, WindowSpec
from sqlwin.planner.query import new_window_key
from sqlwin.planner.values import interval_micros, is_constant_interval
from sqlwin.streaming.shape import ancestors, bounds_through, within

_BOUNDS = ("window_start", "window_end", "window_time")
_WINDOW_TIME = 1_000  # window_time is window_end - 1 ms


@dataclass
class StreamRange:
    """The stream's side of a join by a time range: the HOP it is read through and how its windows meet."""

    alias: str  # the name the statement reads the stream by
    spec: WindowSpec  # the HOP of each window's range
    shift: tuple[int, int]  # added to the HOP's start and end: the window it meets (µs)
    delay: int  # the range ends this long after its window (µs, >= 0)


def as_window_join(query: WindowedQuery, streams: dict) -> tuple[WindowedQuery, StreamRange] | None:
    """The window join a statement joining a stream with its own window query by a time range equals (the
    stream's relation replaced by the HOP of the ranges, in place), or None where it is not that statement."""
    if len(query.windows) != 1 or query.windows[0].node is None:
        return None
    node = query.node.copy()  # the plan stays as planned: this may be analysed again
    key = spec_key(query.windows[0].node)
    spec = dataclasses.replace(query.windows[0], node=next(t for t in node.find_all(WindowTVF) if spec_key(t) == key))
    outside = [t for t in node.find_all(exp.Table) if t.name.lower() in streams and
               not any(isinstance(a, WindowTVF) for a in ancestors(t))]
    if len(outside) != 1 or not isinstance(outside[0].parent, (exp.From, exp.Join)):
        return None
    table = outside[0]
    select = table.parent.parent
    if not isinstance(select, exp.Select) or len(select.args.get("joins") or []) != 1:
        return None
    join = select.args["joins"][0]
    other = join.this if table.parent is not join else select.args["from_"].this
    ctes = {c.alias_or_name.lower(): c.this for c in node.find_all(exp.CTE)}
    body = ctes.get(other.name.lower()) if isinstance(other, exp.Table) and not other.db else other
    if body is None or not within(spec.node, body):
        return None
    stream = streams[table.name.lower()]
    alias = table.alias_or_name
    if (join.args.get("kind") or "").upper() not in ("", "INNER") or join.args.get("side"):
        raise SqlwinError.at(join, f"stream {table.name} joined with a window query by a time range: an inner join "
                                   "only (an outer join would emit a row of the stream once for every window its "
                                   "range reaches)")
    data = spec.relation.node
    if not isinstance(data, exp.Table) or data.name.lower() != table.name.lower() or stream.watermark is None:
        raise SqlwinError.at(table, f"stream {table.name} is read outside the window TVF: a streaming query joins a "
                                    "stream's rows with a window query over the same stream (by a time range, or "
                                    "ON window_start and window_end: a window join)")
    if spec.kind not in (WindowKind.TUMBLE, WindowKind.HOP) or spec.is_count_based:
        raise SqlwinError.at(spec.node, f"stream {table.name} joined with a window query by a time range: the "
                                        "window is a TUMBLE or HOP of time (its windows' bounds one slide apart)")
    bound, lo, hi = _range(select, join, alias, stream.watermark.column, other.alias_or_name,
                           bounds_through(spec.node.find_ancestor(exp.Select), body, _BOUNDS))
    size = int(spec.size)  # type: ignore[arg-type]
    slide = int(spec.slide) if spec.kind is WindowKind.HOP else size  # type: ignore[arg-type]
    at = {"window_start": -size, "window_end": 0, "window_time": -_WINDOW_TIME}[bound] + lo  # range start - end
    length = hi - lo + 1
    name = exp.Table(this=table.this.copy(), db=table.args.get("db"), catalog=table.args.get("catalog"))
    hop = _hop(name.sql(dialect="spark"), exp.to_identifier(spec.time_col).sql(dialect="spark"), slide, length,
               (spec.offset + size + at) % slide)
    ranged = dataclasses.replace(spec, kind=WindowKind.HOP, size=length, slide=slide, step=None,
                                 offset=(spec.offset + size + at) % slide, alias=alias, node=hop)
    columns = [exp.column(c, quoted=True) for c in spec.relation.column_names] or [exp.Star()]
    table.replace(exp.Subquery(this=exp.Select(expressions=columns).from_(hop, copy=False),
                               alias=exp.TableAlias(this=exp.to_identifier(alias))))
    side = StreamRange(alias, ranged, (-at - size, -at - length), max(0, at + length))
    return dataclasses.replace(query, node=node, windows=[spec, ranged]), side


def _hop(stream: str, time_col: str, slide: int, size: int, offset: int) -> WindowTVF:
    intervals = ", ".join(f"INTERVAL '{seconds_text(m)}' SECONDS" for m in (slide, size, offset))
    call = parse_one(f"SELECT * FROM HOP(TABLE {stream}, DESCRIPTOR({time_col}), {intervals})").find(WindowTVF)
    call.meta[SPEC_KEY] = new_window_key()
    return call


def seconds_text(micros: int) -> str:
    """Microseconds as the text of an INTERVAL ... SECONDS."""
    return str(Decimal(micros) / Decimal(1_000_000))


def _range(select: exp.Select, join: exp.Join, alias: str, time_col: str, other: str,
           bounds: dict[str, str]) -> tuple[str, int, int]:
    """(the window bound, lo, hi): the ON and WHERE bound the stream's time as ``X + lo <= t <= X + hi``."""
    lows: list[tuple[str, int]] = []
    highs: list[tuple[str, int]] = []
    for c in _conjuncts(join.args.get("on")) + _conjuncts(select.args.get("where")):
        if isinstance(c, exp.Between) and _is_time(c.this, alias, time_col):
            lows.append(_offset(c.args["low"], other, bounds, 0))
            highs.append(_offset(c.args["high"], other, bounds, 0))
            continue
        if not isinstance(c, (exp.GT, exp.GTE, exp.LT, exp.LTE)):
            continue
        left, right, kind = c.this, c.expression, type(c)
        if _is_time(right, alias, time_col):
            left, right = right, left
            kind = {exp.GT: exp.LT, exp.GTE: exp.LTE, exp.LT: exp.GT, exp.LTE: exp.GTE}[kind]
        if not _is_time(left, alias, time_col):
            continue
        if kind in (exp.GT, exp.GTE):
            lows.append(_offset(right, other, bounds, 1 if kind is exp.GT else 0))
        else:
            highs.append(_offset(right, other, bounds, -1 if kind is exp.LT else 0))
    lows = [b for b in lows if b is not None]
    highs = [b for b in highs if b is not None]
    named = {b for b, _ in lows + highs}
    if not lows or not highs or len(named) != 1:
        raise SqlwinError.at(join.args.get("on") or join, f"a stream joined with its window query by a time range "
                                                          f"bounds {alias}.{time_col} on both sides by one bound of "
                                                          f"the window ({alias}.{time_col} BETWEEN {other}.window_end"
                                                          f" - INTERVAL ... AND {other}.window_end, as Nexmark q7)")
    lo, hi = max(n for _, n in lows), min(n for _, n in highs)
    if hi < lo:
        raise SqlwinError.at(join.args.get("on") or join, "the time range of this join is empty: no row of "
                                                          f"{alias} can meet a window")
    return named.pop(), lo, hi


def _conjuncts(node: exp.Expr | None) -> list[exp.Expr]:
    """The terms ANDed in an ON or a WHERE."""
    if node is None:
        return []
    node = (node.this if isinstance(node, exp.Where) else node).unnest()
    return [t for c in node.flatten() for t in _conjuncts(c)] if isinstance(node, exp.And) else [node]


def _is_time(node: exp.Expr, alias: str, time_col: str) -> bool:
    return isinstance(node, exp.Column) and node.name.lower() == time_col.lower() and \
        node.table.lower() == alias.lower()


def _offset(node: exp.Expr, other: str, bounds: dict[str, str], nudge: int) -> tuple[str, int] | None:
    """``other.X [+|- INTERVAL]`` as (the window bound X is, its interval in µs plus ``nudge``), else None."""
    if isinstance(node, exp.Paren):
        return _offset(node.this, other, bounds, nudge)
    column, micros = node, 0
    if isinstance(node, (exp.Add, exp.Sub)):
        column, interval = node.this, node.expression
        if isinstance(node, exp.Add) and is_constant_interval(column):
            column, interval = interval, column
        if not is_constant_interval(interval):
            return None
        micros = interval_micros(interval, "the join's time range")
        micros = -micros if isinstance(node, exp.Sub) else micros
    if not isinstance(column, exp.Column) or column.table.lower() != other.lower() or \
            column.name.lower() not in bounds:
        return None
    return bounds[column.name.lower()], micros + nudge
