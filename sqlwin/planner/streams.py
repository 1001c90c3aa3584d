"""Plan CREATE STREAM (source and replay forms) and CREATE STREAMING TABLE (GRAMMAR 3 and 5)."""

from __future__ import annotations

import difflib
from collections.abc import Sequence

from sqlglot import exp

from sqlwin.dialect import nodes as n
from sqlwin.errors import SqlwinError
from sqlwin.plan import statements as st
from sqlwin.planner.values import interval_micros


def column_named(node: exp.Expr, what: str, columns: Sequence[str], owner: str) -> str:
    """The column ``node`` names, as ``columns`` (of ``owner``: "the stream", "table t") spell it; else a
    SqlwinError at ``node``: ``what``, no such column, the nearest name and every name there is."""
    name = node.name
    found = next((c for c in columns if c.lower() == name.lower()), None)
    if found is not None:
        return found
    near = difflib.get_close_matches(name.lower(), [c.lower() for c in columns], n=1, cutoff=0.5)
    hint = f"; did you mean {next(c for c in columns if c.lower() == near[0])}?" if near else ""
    raise SqlwinError.at(node, f"{what}: no such column{hint} ({owner} has {', '.join(columns)})")


def row_wise(node: exp.Expr, what: str) -> None:
    """``what`` reads one row at a time (a punctuated watermark, as Flink's ``onEvent``; a replay's arrival order,
    micro-batch and clock): no aggregate, window function or subquery, which would read other rows."""
    other = next(node.find_all(exp.AggFunc, exp.Window, exp.Subquery, exp.Select), None)
    if other is not None:  # positioned at the expression, whose start the parser marks
        raise SqlwinError.at(node, f"{what} reads each row on its own: no aggregate, window "
                                   f"function or subquery here ({other.sql('spark')})")


def plan_watermark(node: n.WatermarkDef, columns: Sequence[str] | None) -> st.WatermarkSpec:
    """The four forms of GRAMMAR 3: ``ts``, ``ts - INTERVAL d`` (bounded out-of-orderness, as in Flink),
    ``expr ON ROWS WHERE predicate`` (punctuated: Flink's punctuated generator) and ``PROCTIME() - INTERVAL
    lag`` (Flink's TimeLagWatermarkGenerator). ``columns``: the stream's, where the statement declares them (a
    replay stream's are its table's: ``sqlwin.streaming.statements`` checks them, and the types of a punctuated
    watermark's expressions, with Spark when the stream is created)."""
    column = node.this.name
    if columns is not None:
        column_named(node.this, f"WATERMARK FOR {column}", columns, "the stream")
    expr = node.expression
    where = node.args.get("where")
    proctime = next(iter(expr.find_all(n.Proctime)), None)
    if proctime is not None:
        if where is not None:
            raise SqlwinError.at(where, "ON ROWS WHERE: a PROCTIME() watermark follows the clock, not the rows "
                                        "(a punctuated watermark is `expr ON ROWS WHERE condition` over the rows)")
        return st.WatermarkSpec(column, 0, lag=_lag(expr, column, proctime))
    if where is not None:
        for part in (where, expr):
            row_wise(part, "a punctuated watermark")
        return st.WatermarkSpec(column, 0, expression=expr, where=where)
    if isinstance(expr, exp.Column) and expr.name.lower() == column.lower():
        return st.WatermarkSpec(column, 0)
    if isinstance(expr, exp.Sub) and isinstance(expr.this, exp.Column) and expr.this.name.lower() == column.lower():
        delay = interval_micros(expr.expression, "WATERMARK delay")
        if delay < 0:
            raise SqlwinError.at(expr.expression, "WATERMARK delay must not be negative")
        return st.WatermarkSpec(column, delay)
    raise SqlwinError.at(expr, f"WATERMARK FOR {column} expects `{column}`, `{column} - INTERVAL ...`, "
                               f"`expr ON ROWS WHERE condition` (punctuated) or `PROCTIME() - INTERVAL ...`")


def _lag(expr: exp.Expr, column: str, proctime: exp.Expr) -> int:
    """``PROCTIME() - INTERVAL lag``: the lag, a positive interval."""
    if not (isinstance(expr, exp.Sub) and isinstance(expr.this, n.Proctime)):
        raise SqlwinError.at(proctime if expr is proctime else expr,
                             f"WATERMARK FOR {column} AS PROCTIME() needs a lag: `PROCTIME() - INTERVAL ...` "
                             "(a positive interval)")
    lag = interval_micros(expr.expression, "WATERMARK lag")
    if lag <= 0:
        raise SqlwinError.at(expr.expression, "the lag of WATERMARK ... AS PROCTIME() - lag must be a positive "
                                              "interval")
    return lag


def _check_idle(watermark: st.WatermarkSpec | None, idle: exp.Expr | None) -> None:
    """IDLE TIMEOUT advances a quiet stream's watermark by the clock from its rows' time: a punctuated
    watermark is not the rows' time, and a PROCTIME() one follows the clock already."""
    if idle is None or watermark is None or watermark.from_rows:
        return
    what = "a punctuated watermark (ON ROWS WHERE)" if watermark.punctuated else \
        "a PROCTIME() watermark, which follows the clock already"
    raise SqlwinError.at(idle, f"WITH IDLE TIMEOUT does not apply to {what}")


def _options(node: exp.Expr) -> dict[str, str]:
    out: dict[str, str] = {}
    for prop in node.args.get("options") or []:
        key = prop.this.name if isinstance(prop.this, exp.Expr) else str(prop.this)
        value = prop.args.get("value")
        out[key] = value.name if isinstance(value, exp.Expr) else str(value)
    return out


def plan_create_stream(node: n.CreateStream) -> st.CreateStream:
    columns: list[st.StreamColumn] = []
    proctime = None
    for item in node.expressions or []:
        if isinstance(item, n.ComputedColumn):
            if isinstance(item.expression, n.Proctime):
                proctime = item.this.name
            columns.append(st.StreamColumn(item.this.name, None, item.expression))
        else:
            kind = item.args.get("kind")
            columns.append(st.StreamColumn(item.name, kind.sql("spark") if kind else None))
    names = [c.name for c in columns]
    fmt = node.args.get("format")
    fmt_name = fmt.name.lower() if fmt else "json"
    # any Spark streaming source: sqlwin.streaming.sources asks Spark for it when the stream is created
    wm = node.args.get("watermark")
    watermark = plan_watermark(wm, names) if wm else None
    _check_idle(watermark, node.args.get("idle_timeout"))
    if watermark is not None and watermark.punctuated and proctime is not None:
        for part in (watermark.where, watermark.expression):
            read = next((c for c in part.find_all(exp.Column) if c.name.lower() == proctime.lower()), None)
            if read is not None:
                raise SqlwinError.at(read, f"a punctuated watermark reads the rows as they arrive, not the "
                                           f"PROCTIME() column {proctime}")
    idle_us = _idle_timeout(node.args.get("idle_timeout"))
    return st.CreateStream(name=node.this.sql("spark"), columns=tuple(columns), watermark=watermark,
                           proctime_column=proctime, format=fmt_name, options=_options(node), idle_timeout=idle_us,
                           node=node, alignment=_alignment(node.args.get("alignment"), watermark))


def _alignment(node: n.WatermarkAlignment | None, watermark: st.WatermarkSpec | None) -> st.Alignment | None:
    """GRAMMAR 3: a group's streams are held within MAX DRIFT of the group's lowest watermark, so each needs one."""
    if node is None:
        return None
    if watermark is None:
        raise SqlwinError.at(node, "WITH WATERMARK ALIGNMENT holds a stream within MAX DRIFT of its group's lowest "
                                   "watermark: the stream needs a WATERMARK FOR column AS ... among its columns")
    drift = node.expression
    drift_us = interval_micros(drift, "MAX DRIFT")
    if drift_us <= 0:
        raise SqlwinError.at(drift, "MAX DRIFT must be a positive interval")
    group = node.this.name
    if not group.strip():
        raise SqlwinError.at(node.this, "the alignment GROUP needs a name")
    return st.Alignment(group=group, drift=drift_us, node=node)


def _idle_timeout(idle: exp.Expr | None) -> int | None:
    idle_us = interval_micros(idle, "IDLE TIMEOUT") if idle is not None else None
    if idle_us is not None and idle_us <= 0:
        raise SqlwinError.at(idle, "IDLE TIMEOUT must be positive")
    return idle_us


def plan_replay_stream(node: n.CreateReplayStream) -> st.CreateReplayStream:
    source = node.args["source"]
    watermark = plan_watermark(node.args["watermark"], None)  # its column: over the table, when it is created
    _check_idle(watermark, node.args.get("idle_timeout"))
    for clause, what in [*((o, "ARRIVAL ORDER BY") for o in node.args.get("arrival_order") or ()),
                         (node.args.get("micro_batch"), "MICRO BATCH BY"),
                         (node.args.get("processing_time"), "PROCESSING TIME BY")]:
        if clause is not None:
            row_wise(clause, what)
    return st.CreateReplayStream(
        name=node.this.sql("spark"), source=source.this if isinstance(source, n.TableArg) else source,
        arrival_order=tuple(node.args.get("arrival_order") or ()), micro_batch_by=node.args.get("micro_batch"),
        watermark=watermark, processing_time_by=node.args.get("processing_time"),
        idle_timeout=_idle_timeout(node.args.get("idle_timeout")), node=node)


def plan_streaming_table(node: n.CreateStreamingTable, query: st.WindowedQuery) -> st.CreateStreamingTable:
    fmt = node.args.get("format")
    return st.CreateStreamingTable(name=node.this.sql("spark"), format=fmt.name.lower() if fmt else None,
                                   options=_options(node), query=query, node=node.this)
