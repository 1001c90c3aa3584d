"""Plan CREATE STREAM (source and replay forms) and CREATE STREAMING TABLE (GRAMMAR 3 and 5)."""

from __future__ import annotations

from sqlglot import exp

from sqlwin.dialect import nodes as n
from sqlwin.errors import SqlwinError
from sqlwin.plan import statements as st
from sqlwin.planner.values import interval_micros


def plan_watermark(node: n.WatermarkDef, columns: set[str] | None) -> st.WatermarkSpec:
    """``WATERMARK FOR ts AS ts [- INTERVAL ...]``: bounded out-of-orderness only, as in Flink."""
    column = node.this.name
    if columns is not None and column.lower() not in columns:
        raise SqlwinError.at(node.this, f"WATERMARK FOR {column}: no such column")
    expr = node.expression
    if isinstance(expr, exp.Column) and expr.name.lower() == column.lower():
        return st.WatermarkSpec(column, 0)
    if isinstance(expr, exp.Sub) and isinstance(expr.this, exp.Column) and expr.this.name.lower() == column.lower():
        delay = interval_micros(expr.expression, "WATERMARK delay")
        if delay < 0:
            raise SqlwinError.at(expr.expression, "WATERMARK delay must not be negative")
        return st.WatermarkSpec(column, delay)
    raise SqlwinError.at(expr, f"WATERMARK FOR {column} expects `{column}` or `{column} - INTERVAL ...`")


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
    names = {c.name.lower() for c in columns}
    fmt = node.args.get("format")
    fmt_name = fmt.name.lower() if fmt else "json"
    # any Spark streaming source: sqlwin.streaming.sources asks Spark for it when the stream is created
    wm = node.args.get("watermark")
    idle_us = _idle_timeout(node.args.get("idle_timeout"))
    return st.CreateStream(name=node.this.sql("spark"), columns=tuple(columns),
                           watermark=plan_watermark(wm, names) if wm else None, proctime_column=proctime,
                           format=fmt_name, options=_options(node), idle_timeout=idle_us, node=node)


def _idle_timeout(idle: exp.Expr | None) -> int | None:
    idle_us = interval_micros(idle, "IDLE TIMEOUT") if idle is not None else None
    if idle_us is not None and idle_us <= 0:
        raise SqlwinError.at(idle, "IDLE TIMEOUT must be positive")
    return idle_us


def plan_replay_stream(node: n.CreateReplayStream) -> st.CreateReplayStream:
    source = node.args["source"]
    return st.CreateReplayStream(
        name=node.this.sql("spark"), source=source.this if isinstance(source, n.TableArg) else source,
        arrival_order=tuple(node.args.get("arrival_order") or ()), micro_batch_by=node.args.get("micro_batch"),
        watermark=plan_watermark(node.args["watermark"], None), processing_time_by=node.args.get("processing_time"),
        idle_timeout=_idle_timeout(node.args.get("idle_timeout")), node=node)


def plan_streaming_table(node: n.CreateStreamingTable, query: st.WindowedQuery) -> st.CreateStreamingTable:
    fmt = node.args.get("format")
    return st.CreateStreamingTable(name=node.this.sql("spark"), format=fmt.name.lower() if fmt else None,
                                   options=_options(node), query=query, node=node.this)
