"""What a streaming query is made of, read once from its plan: the stream it reads, its window, the
SELECT that consumes the window (the *carrier*), the keys of its panes, and which path runs it.

Two paths (``choose_path``):

- **native**: Spark's own streaming aggregation (``withWatermark`` + ``window()`` + append mode), used
  where its semantics are the contract's: a TUMBLE/HOP (slide <= size) aggregation with the default
  emission or EMIT FINAL, ALLOWED LATENESS 0, no LATE ROWS TO, no evictor, no idle timeout. Each window
  then has exactly one pane (index 0, ON_TIME, final) and Spark drops exactly the rows sqlwin would.
- **custom**: everything else. sqlwin's micro-batch operator (``sqlwin.streaming.operator``) decides
  lateness and drives the pure pane driver (``sqlwin.core.panes``); Spark assigns windows, keeps the
  rows and computes every pane's aggregates natively.

A pane's result is the user's own query over the rows of that pane (``PaneQuery``): the window TVF is
replaced by a relation holding, per fired pane, its rows (or one empty row for an empty pane) and its
``pane_index``/``pane_timing``/``is_final``; the carrier groups by those too.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import reduce
from typing import Any

from sqlglot import exp

from sqlwin.backends.spark_groupby import window_bound
from sqlwin.dialect.nodes import SELECT_CLAUSE_KEYS, TableArg
from sqlwin.errors import SqlwinError
from sqlwin.plan import triggers as tp
from sqlwin.plan.statements import CreateReplayStream, CreateStream, WindowedQuery
from sqlwin.plan.windows import WindowKind, WindowSpec
from sqlwin.planner.grouping import alike
from sqlwin.streaming.countwindows import check_count_query
from sqlwin.streaming.evictors import check_evictor

PANE_COLUMNS = ("pane_index", "pane_timing", "is_final")
WINDOW_BOUNDS = ("window_start", "window_end")


class LatenessClauses:
    """What a streaming query's ALLOWED LATENESS and LATE ROWS TO say (every shape of query has them)."""

    query: WindowedQuery

    @property
    def lateness(self) -> int:
        return self.query.lateness.allowed

    @property
    def late_rows_to(self) -> str | None:
        return self.query.lateness.late_rows_to


@dataclass(frozen=True)
class TopRows:
    """The rows a statement that keeps each window's top rows (``RANK() OVER (PARTITION BY window_start,
    window_end[, keys] ORDER BY column) = 1`` over the rows whose column and keys are not NULL: the window Top-N
    of ``windowrank``) can ever output, among one micro-batch's: a row at the top of its window is at the top of
    its own micro-batch's rows of that window (no row anywhere is ahead of it), so a pane, which ranks the rows of
    some micro-batches, ranks the same rows first among those tops as among all. The operator stores only them
    (Flink's window Top-N keeps only its top rows per window, too)."""

    partition: tuple[str, ...]  # the window's bounds and keys: columns of the window TVF
    column: str  # the TVF column the rows are ranked by
    order: str  # "DESC" (the MAX) or "ASC" (the MIN)

    def of(self, rows: Any) -> Any:
        """The top rows of each window (and keys) among ``rows``, a micro-batch's accepted (row, window) pairs:
        those equal to their partition's MAX (MIN), the ``RANK() = 1`` ones, by an aggregate joined back (which
        adaptive execution broadcasts where it is small, as it is per window) rather than a sort of every row."""
        from pyspark.sql import functions as F

        value = F.col(f"`{self.column}`")
        kept = rows.where(reduce(lambda a, b: a & b, [value.isNotNull(), *[F.col(f"`{c}`").isNotNull()
                                                                          for c in self.partition[2:]]]))
        names = [f"__sqlwin_top_by{i}" for i in range(len(self.partition))]
        top = (F.max if self.order == "DESC" else F.min)(value).alias("__sqlwin_top")
        tops = kept.groupBy(*[F.col(f"`{c}`").alias(n) for c, n in zip(self.partition, names, strict=True)]) \
            .agg(top)
        on = reduce(lambda a, b: a & b, [F.col(f"`{c}`") == F.col(n) for c, n in zip(self.partition, names,
                                                                                     strict=True)])
        return kept.join(tops, on & (value == F.col("__sqlwin_top"))).drop(*names, "__sqlwin_top")


@dataclass
class StreamingShape(LatenessClauses):
    """A streaming query, analysed: everything the operator, the native path and replay need."""

    query: WindowedQuery
    stream: CreateStream | CreateReplayStream
    window: WindowSpec | None  # None: the global window
    carrier: exp.Select
    source_alias: str  # the name the carrier reads the window relation (or the stream) by
    keys: list[exp.Expr] = field(default_factory=list)  # the pane keys: GROUP BY minus window bounds
    aggregated: bool = True
    streams: list = field(default_factory=list)  # every stream the query reads (``stream`` is the first)
    processing_time: bool = False  # windows over a PROCTIME() column: the watermark is the processing clock
    text: str = ""  # the statement as the user wrote it: where a failure while running is reported
    rewritten: str = ""  # how sqlwin runs a statement it rewrote (``windowrank``), for ``why``
    top_rows: TopRows | None = None  # the only rows a pane can output, where the statement keeps a window's top

    @property
    def time_column(self) -> str:
        if self.window is not None:
            return self.window.time_col
        wm = self.stream.watermark
        return wm.column if wm is not None else ""


def analyse(query: WindowedQuery, streams: dict[str, CreateStream | CreateReplayStream],
            text: str = "") -> StreamingShape:
    """Check the query is one the streaming operator runs and find its parts; errors point at the SQL
    (``text``: the statement as written, kept for the failures that can only happen while it runs)."""
    refuse_result_limit(query)
    node = query.node
    tables = [t for t in node.find_all(exp.Table) if t.name.lower() in streams]
    names = sorted({t.name.lower() for t in tables})
    read = [streams[n] for n in names]
    if not read:  # at the first table it reads (a query's own position is its first column's)
        body = node.expression if isinstance(node, exp.Insert) else node
        raise SqlwinError.at(next(body.find_all(exp.Table), body),
                             "a streaming table's query reads a stream (CREATE STREAM); this one reads none: run it "
                             "as a batch query")
    if len(read) > 1 and any(isinstance(r, CreateReplayStream) for r in read):
        raise SqlwinError.at(tables[0], "a query reads one replay stream; replay several tables as one (UNION ALL "
                                        "them in the CREATE STREAM ... FROM TABLE)")
    missing = [r.name for r in read if r.watermark is None]
    if len(read) > 1 and missing:
        raise SqlwinError.at(tables[0], f"stream {missing[0]} has no WATERMARK: a query over several streams "
                                        "takes the minimum of their watermarks")
    stream = read[0]
    if len(query.windows) > 1:
        raise SqlwinError.at(query.windows[1].node, "internal: a query of several windows reached the analysis "
                                                    "of one window (stages.analyse_query splits it)")
    if query.windows:
        spec = query.windows[0]
        tvf = spec.node
        _read_only_by_the_window(tables, tvf)
        carrier = tvf.find_ancestor(exp.Select)
        if carrier is None or not in_from(tvf, carrier):
            raise SqlwinError.at(tvf, "in a streaming query the window TVF must be read directly by a SELECT")
        if carrier.args.get("joins"):
            join = carrier.args["joins"][0]
            if any(t.name.lower() in streams for t in join.find_all(exp.Table)):
                raise SqlwinError.at(join, "a streaming window query cannot join other tables in the SELECT that "
                                           "reads the window TVF; join window queries on window_start and "
                                           "window_end (a window join)")
            # a table joins the stream's rows in the TVF's input (the windows are then those of the joined rows),
            # or the window query's result above it
            raise SqlwinError.at(join.this, "a streaming window query cannot join other tables in the SELECT that "
                                            "reads the window TVF; to join the stream's rows with a table, join it "
                                            "in the TVF's input: TUMBLE(TABLE (SELECT s.*, t.c FROM s JOIN t ON "
                                            "...), DESCRIPTOR(ts), ...), or join the window query's result with it")
        alias = spec.alias
        window: WindowSpec | None = spec
        data = tvf.find(TableArg)
        if spec.kind is WindowKind.SESSION and spec.max_duration is not None and (
                len(read) > 1 or data is None or not isinstance(data.this, exp.Table)):
            raise SqlwinError.at(data or tvf, "in a streaming query, SESSION with MAX_DURATION reads its stream "
                                              "directly (TABLE s): its sessions are cut again from the kept rows")
    else:
        table = tables[0]
        carrier = table.find_ancestor(exp.Select)
        if not query.global_window or carrier is None:
            raise without_window(table, streams[table.name.lower()])
        alias = table.alias_or_name
        window = None
    proctime = getattr(stream, "proctime_column", None)
    in_processing_time = window is not None and proctime is not None and \
        window.time_col.lower() == proctime.lower()
    if in_processing_time and len(read) > 1:
        raise SqlwinError.at(window.node, "processing-time windows read one stream")
    if stream.watermark is None and window is not None and not in_processing_time:
        raise SqlwinError.at(window.node, f"stream {stream.name} has no WATERMARK: event-time windows over it "
                                          "never close; declare WATERMARK FOR ts AS ts - INTERVAL ...")
    if window is not None and stream.watermark is not None and len(read) == 1 and not in_processing_time and \
            window.time_col.lower() != stream.watermark.column.lower():
        raise SqlwinError.at(window.node, f"DESCRIPTOR({window.time_col}) must be the stream's watermark column "
                                          f"{stream.watermark.column}")
    group = carrier.args.get("group")
    aggregated = group is not None or any(
        a.find_ancestor(exp.Window) is None for a in carrier.find_all(exp.AggFunc))
    keys: list[exp.Expr] = []
    # a wrong or missing GROUP BY is pointed at: its keys, else the first aggregate (not the SELECT's first column)
    grouping = group or next((a for a in carrier.find_all(exp.AggFunc) if a.find_ancestor(exp.Window) is None),
                             carrier)
    if aggregated:
        grouped = list(group.expressions) if group is not None else []
        bounds = {window_bound(g, alias) for g in grouped} - {None}
        if window is not None and not set(WINDOW_BOUNDS) <= bounds:
            raise SqlwinError.at(grouping, "a streaming window aggregation must GROUP BY window_start, "
                                           "window_end (and its keys), as in Flink")
        keys = [g for g in grouped if window_bound(g, alias) is None]
        if window is not None and window.kind is WindowKind.SESSION:
            names = sorted(k.name.lower() for k in keys if isinstance(k, exp.Column))
            if len(names) != len(keys) or names != sorted(p.lower() for p in window.partition_by):
                raise SqlwinError.at(grouping, "a streaming SESSION aggregation groups by window_start, "
                                               "window_end and exactly the SESSION's PARTITION BY columns")
    elif window is not None and query.emit.explicit:
        raise SqlwinError.at(carrier.args.get("emit") or carrier, "EMIT applies to an aggregation")
    elif window is not None and window.kind is WindowKind.SESSION:
        raise SqlwinError.at(window.node, "in a streaming query, SESSION windows feed an aggregation "
                                          "(GROUP BY window_start, window_end and the PARTITION BY columns)")
    if window is not None:
        _keep_windows_apart(carrier, window.node, aggregated)
    shape = StreamingShape(query, stream, window, carrier, alias, keys, aggregated, read, in_processing_time, text)
    if window is not None and window.is_count_based:
        check_count_query(shape)
    if query.evict is not None:
        if window is not None and window.is_count_based:
            evict = next(s.args["evict"] for s in node.find_all(exp.Select) if s.args.get("evict"))
            raise SqlwinError.at(evict, "EVICT over count windows does not run in streaming queries in this "
                                        "version of sqlwin; run it over a table (batch)")
        check_evictor(shape)
    return shape


def refuse_result_limit(query: WindowedQuery) -> None:
    """LIMIT and OFFSET cut a finished result. A streaming query's result is the log of its panes, appended as
    windows fire: run per micro-batch they would keep n rows of each micro-batch's panes, not the batch answer,
    so they are errors. (ORDER BY keeps every row: it orders the rows within each micro-batch.)"""
    for node in query.node.find_all(exp.Select, exp.SetOperation, exp.Subquery):
        for key, word in (("limit", "LIMIT"), ("offset", "OFFSET")):
            clause = node.args.get(key)
            if clause is not None:
                raise SqlwinError.at(clause, f"{word} in a streaming query: its result is the log of its panes, "
                                             "appended as windows fire, so it would cut each micro-batch's panes; "
                                             "limit the streaming table when reading it, or rank within each "
                                             "window with ROW_NUMBER() OVER (PARTITION BY window_start, "
                                             "window_end ORDER BY ...)")


def choose_path(shape: StreamingShape) -> tuple[str, str]:
    """('native' | 'custom', why): native only where Spark's append-mode aggregation equals the contract."""
    q, w = shape.query, shape.window
    reasons: list[str] = []
    if not isinstance(shape, StreamingShape):  # several windows (``stages``): sqlwin chains its operators
        return "custom", shape.why
    if isinstance(shape.stream, CreateReplayStream):
        return "custom", "replay"
    if len(shape.streams) > 1:
        reasons.append("several streams")
    if w is None:
        reasons.append("global window")
    elif w.is_count_based:
        reasons.append("count windows")
    elif w.kind not in (WindowKind.TUMBLE, WindowKind.HOP):
        reasons.append(f"{w.kind.value} windows")
    elif w.kind is WindowKind.HOP and isinstance(w.slide, int) and isinstance(w.size, int) and w.slide > w.size:
        reasons.append("HOP with slide > size")
    if shape.rewritten:
        reasons.append(shape.rewritten)
    if not shape.aggregated:
        reasons.append("not an aggregation")
    if q.emit.explicit and not isinstance(q.emit.trigger, tp.EmitFinal):
        reasons.append("EMIT WITH TRIGGER")
    if q.lateness.allowed:
        reasons.append("ALLOWED LATENESS > 0")
    if q.lateness.late_rows_to:
        reasons.append("LATE ROWS TO")
    if q.evict is not None:
        reasons.append("EVICT")
    stream = shape.stream
    if isinstance(stream, CreateStream) and (stream.idle_timeout or stream.proctime_column):
        reasons.append("IDLE TIMEOUT" if stream.idle_timeout else "PROCTIME column")
    watermarks = [s.watermark for s in (shape.streams or [stream]) if s.watermark is not None]
    if any(w.punctuated for w in watermarks):  # Spark's withWatermark follows every row's own time
        reasons.append("punctuated watermark (ON ROWS WHERE)")
    if any(w.follows_clock for w in watermarks):
        reasons.append("PROCTIME() watermark")
    top = q.node.expression if isinstance(q.node, exp.Insert) else q.node
    if shape.carrier is not top:
        reasons.append("a query around the aggregation")
    if top.args.get("order") is not None:  # Spark cannot sort a streaming aggregation in append mode
        reasons.append("ORDER BY")
    filters = [w for w in top.find_all(exp.Where) if not isinstance(w.parent, exp.Filter)]  # not SUM(v) FILTER
    if shape.carrier is top and (filters or top.find(exp.Join) is not None):
        # Spark's optimizer pushes a filter that does not read the watermark column below withWatermark (and a
        # join's inferred IS NOT NULL on its keys): the rows it removes would no longer move the watermark, where
        # GRAMMAR 3's watermark is the largest time the stream brought (measured: WHERE v > 0 held a native
        # table's watermark back and never fired a window that the custom path fired)
        reasons.append("a WHERE or JOIN over the stream's rows")
    if reasons:
        return "custom", ", ".join(reasons)
    return "native", "Spark's streaming aggregation in append mode"


def without_window(table: exp.Table, stream: CreateStream | CreateReplayStream, *,
                   started: bool = True) -> SqlwinError:
    """A stream read by a query with neither a window TVF nor EMIT (README, Limits): the error at the stream's
    name, saying what to write instead; for a replay stream, where its batch answer is (the table it replays);
    for a live one, unless ``started`` (CREATE STREAMING TABLE, INSERT INTO), how a query over it runs."""
    time = stream.watermark.column if stream.watermark is not None else "ts"
    message = (f"a query over a stream needs a window TVF (TUMBLE, HOP, CUMULATE, SESSION), as in FROM "
               f"TUMBLE(TABLE {table.name}, DESCRIPTOR({time}), INTERVAL '1' MINUTE) ... GROUP BY window_start, "
               "window_end, or an aggregation with EMIT WITH TRIGGER (the global window)")
    if isinstance(stream, CreateReplayStream):
        source = f"read the table it replays, {stream.source.sql('spark')}, instead of {table.name}" \
            if isinstance(stream.source, exp.Table) else "run the query of its FROM TABLE instead"
        message += f"; for the batch answer over all the rows of replay stream {table.name}, {source}"
    elif not started:
        message += "; a query over a live stream runs continuously, as CREATE STREAMING TABLE name AS <query>"
    return SqlwinError.at(table, message)


def _read_only_by_the_window(tables: list[exp.Table], tvf: exp.Expr) -> None:
    """A stream read anywhere but in the window TVF (a self-join such as Nexmark q7, a CTE feeding the TVF) has
    no streaming meaning here: a live run would read it as a stream inside each micro-batch, a replay as the
    whole table, future rows included."""
    read = tvf.find(TableArg)
    read_name = read.this.name.lower() if read is not None and isinstance(read.this, exp.Table) else None
    for table in tables:
        if any(parent is tvf for parent in ancestors(table)):
            continue
        cte = next((p for p in ancestors(table) if isinstance(p, exp.CTE)), None)
        if cte is not None and cte.alias_or_name.lower() == read_name:  # WITH c AS (... s ...) ... TUMBLE(TABLE c
            raise SqlwinError.at(table, f"stream {table.name} is read outside the window TVF, in {cte.alias_or_name}, "
                                        "which the window TVF reads: a streaming query reads its stream only in a "
                                        f"window TVF's input; write {cte.alias_or_name}'s query there, as in "
                                        f"TUMBLE(TABLE (SELECT ... FROM {table.name} ...), DESCRIPTOR(...), ...) "
                                        "(a table may be joined in it)")
        raise SqlwinError.at(table, f"stream {table.name} is read outside the window TVF: a streaming query "
                                    "reads its stream only through window TVFs; to join its rows with a window "
                                    "query, join the stream's window TVF with it ON window_start and window_end "
                                    "(a window join; other joins of streams run in batch queries only)")


def _keep_windows_apart(carrier: exp.Select, tvf: exp.Expr, aggregated: bool) -> None:
    """Above the window TVF, what combines rows must keep each window apart, as Flink's window aggregation,
    window Top-N and window deduplication do: panes are computed as their windows fire, so a DISTINCT, an OVER
    or (above the aggregation) a GROUP BY across windows would combine only the windows that fire together,
    not give the batch answer. The bounds are followed through the SELECTs that nest the TVF, aliases included
    (the carrier's own GROUP BY is checked with the aggregation). An aggregation that nests the window
    aggregation and keeps windows apart is refused too: its panes would need pane columns of their own."""
    bounds = {b: b for b in WINDOW_BOUNDS}  # name in scope -> the window bound it carries
    inner = "the window aggregation" if aggregated else "the windowed rows"
    for select in (a for a in ancestors(tvf) if isinstance(a, exp.Select)):
        where = _combines_windows(select, "the windowed rows", inner, select is not carrier, bounds)
        if where is not None:
            instead = ("compute it in a CTE joined back to the window aggregation on window_start, window_end (as "
                       "Nexmark q5 does), or over the streaming table") if aggregated else \
                ("aggregate in the SELECT that reads the window TVF (its WHERE can filter the rows first)")
            raise SqlwinError.at(where, f"an aggregation around {inner} does not run in streaming queries in this "
                                        f"version of sqlwin: {instead}")
        bounds = bounds_out(select, bounds)


def keep_joined_windows_apart(join: exp.Select, bounds: dict[str, str], kind: WindowKind) -> None:
    """``_keep_windows_apart`` for the SELECT of a window join and those around it (``bounds``: the sides' names
    in scope for the window bounds, ``kind`` the windows joined): the join's rows come per window as it fires, so
    an aggregation, DISTINCT or OVER must keep windows apart, or it would combine only the windows joined
    together (an aggregation that does runs: its panes are the join's). One bound keeps them apart where it
    alone names a window (either of a TUMBLE's or HOP's, a CUMULATE's end), as a FULL join's
    ``COALESCE(L.window_start, R.window_start)`` often is all a query passes on."""
    alone = {WindowKind.TUMBLE: frozenset(WINDOW_BOUNDS), WindowKind.HOP: frozenset(WINDOW_BOUNDS),
             WindowKind.CUMULATE: frozenset({"window_end"})}.get(kind, frozenset())
    for select in (join, *(a for a in ancestors(join) if isinstance(a, exp.Select))):
        _combines_windows(select, "a window join", "a window join", True, bounds, alone)
        bounds = bounds_out(select, bounds)


def _combines_windows(select: exp.Select, rows: str, inner: str, aggregation: bool, bounds: dict[str, str],
                      alone: frozenset[str] = frozenset()) -> exp.Expr | None:
    """Refuses a window function or a DISTINCT over ``rows``, or (``aggregation``) an aggregation over ``inner``,
    of ``select`` itself whose expressions do not keep windows apart (``_keeps_apart`` with ``bounds`` and
    ``alone``); returns where an aggregation that keeps them apart is (or None)."""

    def apart(expressions: list) -> bool:
        return _keeps_apart(expressions, bounds, alone)

    for over in _own(select, exp.Window):
        if not apart(over.args.get("partition_by") or []):
            raise SqlwinError.at(over, f"in a streaming query a window function over {rows} must PARTITION BY "
                                       "window_start, window_end (as Flink's window Top-N): its panes are computed "
                                       "as windows fire, so across windows it would rank only the windows that fire "
                                       "together")
    if select.args.get("distinct") and not any(is_star(e) for e in select.expressions) and \
            not apart(select.expressions):
        raise SqlwinError.at(select, f"in a streaming query SELECT DISTINCT over {rows} must select window_start "
                                     "and window_end: rows are emitted per window as it fires")
    group = select.args.get("group")
    aggregates = [a for a in _own(select, exp.AggFunc) if a.find_ancestor(exp.Window) is None]
    if not aggregation or (group is None and not aggregates):
        return None
    where = group or aggregates[0]
    if not apart(group.expressions if group else []):
        raise SqlwinError.at(where, f"in a streaming query an aggregation over {inner} must GROUP BY "
                                    "window_start, window_end: its panes are computed as windows fire, so "
                                    "across windows it would combine only the windows that fire together")
    return where


def _own(select: exp.Select, kind: type) -> list:
    """The ``kind`` nodes of ``select`` itself, not of the queries nested in it."""
    return [x for x in select.find_all(kind) if x.find_ancestor(exp.Select) is select]


def is_star(e: exp.Expr) -> bool:
    return isinstance(e, exp.Star) or (isinstance(e, exp.Column) and isinstance(e.this, exp.Star))


def _keeps_apart(expressions: list, bounds: dict[str, str], alone: frozenset[str] = frozenset()) -> bool:
    """Whether ``expressions`` name both window bounds (columns, possibly qualified or aliased), or one of
    ``alone``, the bounds that name a window on their own."""
    named = {bounds.get(e.unalias().name.lower()) for e in expressions if isinstance(e.unalias(), exp.Column)}
    return set(WINDOW_BOUNDS) <= named or bool(named & alone)


def bounds_out(select: exp.Select, bounds: dict[str, str]) -> dict[str, str]:
    """The names under which ``select`` passes the window bounds on to the query around it."""
    out: dict[str, str] = {}
    for e in select.expressions:
        value = e.unalias()
        if is_star(e):
            out.update(bounds)
        elif isinstance(value, exp.Column) and value.name.lower() in bounds:
            out[e.alias_or_name.lower()] = bounds[value.name.lower()]
        elif isinstance(value, exp.Coalesce) and isinstance(e, exp.Alias):  # a FULL join's COALESCE(L.ws, R.ws)
            parts = [value.this, *value.expressions]
            found = {bounds.get(p.name.lower()) if isinstance(p, exp.Column) else None for p in parts}
            if len(found) == 1 and None not in found:
                out[e.alias_or_name.lower()] = found.pop()
    return out


def bounds_through(carrier: exp.Select, body: exp.Expr,
                   bounds: tuple[str, ...] = WINDOW_BOUNDS) -> dict[str, str]:
    """The names under which ``body`` (the carrier, or SELECTs around it) passes the window's ``bounds`` on."""
    names = {b: b for b in bounds}
    for select in [carrier, *(a for a in ancestors(carrier) if isinstance(a, exp.Select) and within(a, body))]:
        names = bounds_out(select, names)
        if select is body:
            break
    return names


def ancestors(node: exp.Expr):
    parent = node.parent
    while parent is not None:
        yield parent
        parent = parent.parent


def within(node: exp.Expr, ancestor: exp.Expr) -> bool:
    return node is ancestor or any(a is ancestor for a in ancestors(node))


def top_select(node: exp.Expr) -> exp.Expr:
    """A statement's query (an INSERT's, or the statement itself)."""
    return node.expression if isinstance(node, exp.Insert) else node


def in_from(node: exp.Expr, select: exp.Select) -> bool:
    parent = node.parent
    while parent is not None and parent is not select:
        if isinstance(parent, (exp.Subquery, exp.Select)):
            return False
        parent = parent.parent
    return parent is select


def strip_clauses(node: exp.Expr) -> exp.Expr:
    for select in node.find_all(exp.Select):
        for key in SELECT_CLAUSE_KEYS:
            select.set(key, None)
    return node


def key_index(shape: StreamingShape, node: exp.Expr) -> int | None:
    """The pane key ``node`` is, as Spark resolves names (``SELECT K ... GROUP BY k``: the same key)."""
    for i, key in enumerate(shape.keys):
        if node == key or alike(node, key):
            return i
    return None


CARRIER = "sqlwin_carrier"  # meta mark: finds the carrier again in a copy of the statement


def reading(node: exp.Expr, views: dict[str, str]) -> exp.Expr:
    """``node`` (a table or a query, changed in place) with each table named in ``views`` (lower-case name ->
    view) read from its view instead, under its own alias so the query's references still resolve."""
    for table in [node] if isinstance(node, exp.Table) else list(node.find_all(exp.Table)):
        if table.name.lower() in views:
            renamed = exp.Table(this=exp.to_identifier(views[table.name.lower()]),
                                alias=exp.TableAlias(this=exp.to_identifier(table.alias_or_name)))
            if table is node:
                node = renamed
            else:
                table.replace(renamed)
    return node


def mark_carrier(shape: StreamingShape) -> None:
    shape.carrier.meta[CARRIER] = True


def find_carrier(root: exp.Expr) -> exp.Select:
    for select in root.find_all(exp.Select):
        if select.meta.get(CARRIER):
            return select
    raise SqlwinError.at(root, "internal: the window query was not found in the statement")


def replace_keys(node: exp.Expr, shape: StreamingShape, alias: str, select: exp.Select) -> exp.Expr:
    """Inside the carrier: each pane-key expression becomes ``alias.__k<i>`` (filled for empty panes)."""

    def swap(n: exp.Expr) -> exp.Expr:
        i = key_index(shape, n)
        if i is not None and not isinstance(n.parent, exp.Group):
            return exp.column(f"__k{i}", alias)
        return n

    return node.transform(swap, copy=False)


def count_star_to_present(node: exp.Expr, alias: str) -> None:
    """``COUNT(*)`` counts ``__present`` (NULL in an empty pane's one row), so an empty group counts 0."""
    for count in list(node.find_all(exp.Count)):
        arg = count.this
        if isinstance(arg, exp.Star) or (isinstance(arg, exp.Literal) and not count.args.get("distinct")):
            count.set("this", exp.column("__present", alias))


def as_spark_sql(node: exp.Expr) -> str:
    return node.sql(dialect="spark")
