"""Streaming queries of several window TVFs, split into stages as Flink chains its window operators.

- **Cascaded windows** (Flink's cascading window aggregation): a window TVF over a window aggregation's
  ``window_time`` (or ``window_end``). The inner aggregation is a stage of its own; its panes are the outer
  stage's input stream, and its watermark is the outer's (``core.panes.ForwardedWatermark``). The outer sees
  each inner window once, with everything the inner counted (on time and within its ALLOWED LATENESS), when
  the inner window is final: the inner stage runs as ``EMIT FINAL``, and the watermark it forwards is its own
  minus its lateness, so those panes are never late for the outer windows. An EMIT clause belongs on the outer
  query (its panes are the result); on the inner one it is an error.
- **Window joins** (Flink's window join): two window queries (a window TVF or a window aggregation each, over
  one stream each, the same window on both sides) joined on their ``window_start`` and ``window_end``, or more
  joined in a chain (``L JOIN M ON ... JOIN R ON ...``, each ON equating the window of the query it joins with
  one joined before, as Flink chains binary window joins). Each side is a stage (it drops its own late rows, by
  its own watermark); the join (``windowjoin``) keeps their panes and runs the user's join over a window once
  the watermarks of every side have passed its end.

Each stage is analysed as the one-window streaming query it is (``shape.analyse``), over the stream it reads or
over the stage it reads (a *derived* stream: a view named for the stage). ``analyse_query`` is where every
streaming query statement is analysed.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field

from sqlglot import exp

from sqlwin.dialect.nodes import SELECT_CLAUSE_KEYS, TableArg
from sqlwin.errors import SqlwinError
from sqlwin.plan import triggers as tp
from sqlwin.plan.statements import CreateReplayStream, CreateStream, WatermarkSpec, WindowedQuery
from sqlwin.plan.windows import WindowSpec
from sqlwin.streaming import partitioned
from sqlwin.streaming.intervaljoin import StreamRange, as_window_join, seconds_text
from sqlwin.streaming.shape import (
    LatenessClauses,
    StreamingShape,
    analyse,
    ancestors,
    bounds_through,
    in_from,
    is_star,
    keep_joined_windows_apart,
    refuse_result_limit,
    top_select,
    within,
)
from sqlwin.streaming.windowrank import as_window_rank

HIDDEN_BOUNDS = ("__sqlwin_ws", "__sqlwin_we")  # a join side's window, whatever the side calls it
HIDDEN_PANE = ("__sqlwin_pi", "__sqlwin_pt", "__sqlwin_fin")  # the join's pane of that window
JOIN_BATCH = "__sqlwin_jb"  # the join's micro-batch, where a side's view holds several (``by_micro_batch``)
PANES = ("pane_index", "pane_timing", "is_final")
_MARK = "sqlwin_stage"


@dataclass
class Stage:
    """One window operator: a one-window streaming query over a stream, or over its upstream stage's panes."""

    index: int
    shape: StreamingShape
    upstream: Stage | None = None  # a cascade's inner stage, whose panes this stage reads
    stream_index: int | None = None  # which of the statement's streams it reads (None: its upstream's panes)
    derived: str | None = None  # the view its upstream's panes are read by
    owns_clause: bool = False  # it is the window aggregation the statement's EMIT / lateness clauses follow
    keys: int = 0  # a join side: hidden key columns (__sqlwin_k<i>) its panes carry
    shift: tuple[int, int] = (0, 0)  # a join side: what its windows' bounds move by to be the join's (µs)

    @property
    def lateness(self) -> int:
        return self.shape.lateness


@dataclass
class JoinSide:
    stage: Stage
    alias: str  # the name the join reads the side by
    view: str  # the view of its released panes (filled per micro-batch)


@dataclass
class WindowJoin:
    sides: list[JoinSide]
    statement: exp.Expr  # the user's statement with each side read from its view, with pane columns
    partners: dict[str, str] = field(default_factory=dict)  # a joined side's alias -> the side its ON's window is
    delay: int = 0  # a window is joined once the watermark passes its end plus this (µs; ``intervaljoin``)


@dataclass
class StagedShape(LatenessClauses):
    """A streaming query of several windows: its stages (upstream first) and, for a window join, the join."""

    query: WindowedQuery
    streams: list = field(default_factory=list)
    stages: list[Stage] = field(default_factory=list)
    join: WindowJoin | None = None
    text: str = ""
    why: str = ""
    window: WindowSpec | None = None  # as StreamingShape: no one window is the query's
    keys: list = field(default_factory=list)
    processing_time: bool = False

    @property
    def stream(self) -> CreateStream | CreateReplayStream:
        return self.streams[0]

    @property
    def time_column(self) -> str:
        wm = self.stream.watermark
        return wm.column if wm is not None else ""

    @property
    def final(self) -> Stage:
        return self.stages[-1]


def analyse_query(query: WindowedQuery, streams: dict, text: str = "") -> StreamingShape | StagedShape:
    """Every streaming query statement: one window (``shape.analyse``) or several (stages), a stream joined
    with its own window query by a time range as the window join it equals (``intervaljoin``)."""
    ranged = as_window_join(query, streams)
    if ranged is not None:
        return analyse_staged(*ranged, streams, text)
    if len(query.windows) <= 1:
        return analyse(query, streams, text)
    return analyse_staged(query, None, streams, text)


def analyse_staged(query: WindowedQuery, ranged: StreamRange | None, streams: dict,
                   text: str) -> StagedShape | StreamingShape:
    refuse_result_limit(query)
    node = query.node
    top = node.expression if isinstance(node, exp.Insert) else node
    tables = [t for t in node.find_all(exp.Table) if t.name.lower() in streams]
    read = [streams[n] for n in sorted({t.name.lower() for t in tables})]
    replays = [r for r in read if isinstance(r, CreateReplayStream)]
    if replays and len(replays) < len(read):
        raise SqlwinError.at(tables[0], "this query joins a live stream with a replay stream: a replay runs over "
                                        "tables, a live stream runs continuously; replay both (CREATE STREAM ... FROM "
                                        "TABLE) or run both live")
    if len(replays) > 1 and (len({r.micro_batch_by is None for r in replays}) > 1 or
                             len({r.processing_time_by is None for r in replays}) > 1):
        raise SqlwinError.at(tables[0], "replay streams read side by side cut their micro-batches alike: MICRO BATCH "
                                        "BY on every one of them or on none, and PROCESSING TIME BY on every one or "
                                        "on none")
    for stream in read:
        if stream.watermark is None:
            raise SqlwinError.at(next(t for t in tables if t.name.lower() == stream.name.lower()),
                                 f"stream {stream.name} has no WATERMARK: the windows over it never close; declare "
                                 "WATERMARK FOR ts AS ts - INTERVAL ...")
    specs = query.windows
    for spec in specs:
        _wrap_joined_tvf(spec.node)
    ctes = {c.alias_or_name.lower(): c.this for c in top.find_all(exp.CTE)}
    carriers = [_carrier(spec) for spec in specs]
    clause = next((s for s in node.find_all(exp.Select) if any(s.args.get(k) for k in SELECT_CLAUSE_KEYS)), None)
    if clause is not None and not any(clause is c for c in carriers):
        raise SqlwinError.at(clause, "in a query of several windows, EMIT / ALLOWED LATENESS / LATE ROWS TO belong "
                                     "to one window aggregation (the SELECT that reads its window TVF)")
    inner_of: dict[int, int] = {}
    for i, spec in enumerate(specs):
        body = _body(_data(spec).this, ctes)
        inner = [j for j, c in enumerate(carriers) if j != i and body is not None and within(c, body)]
        if not inner:
            continue
        j = next((j for j in inner if carriers[j] is body), None)
        if j is None:
            raise SqlwinError.at(_data(spec), "the input of a cascaded window is the inner window aggregation "
                                              "itself: TABLE(SELECT ... FROM TUMBLE(...) GROUP BY window_start, "
                                              "window_end, ...), or a CTE that is that SELECT")
        _check_cascade(spec, specs[j], carriers[j])
        inner_of[i] = j
    tops = [i for i in range(len(specs)) if i not in inner_of.values()]
    builder = _Builder(query, streams, read, text, specs, carriers, inner_of, clause)
    if len(tops) == 1:
        stages = builder.chain(tops[0], top)
        return StagedShape(query, read, stages, None, text, "cascaded windows")
    return builder.window_join(tops, node, top, ctes, ranged)


class _Builder:
    """Builds the stages of one statement (its parts found by ``analyse_staged``)."""

    def __init__(self, query: WindowedQuery, streams: dict, read: list, text: str, specs: list[WindowSpec],
                 carriers: list[exp.Select], inner_of: dict[int, int], clause: exp.Select | None):
        self.query, self.streams, self.read, self.text = query, streams, read, text
        self.specs, self.carriers, self.inner_of, self.clause = specs, carriers, inner_of, clause
        self.stages: list[Stage] = []

    def chain(self, i: int, statement: exp.Expr, *, feeds_outer: bool = False) -> list[Stage]:
        """The stages of window ``i`` read by ``statement`` (upstream first): its inner window's, then its own."""
        upstream = None
        if i in self.inner_of:
            self.chain(self.inner_of[i], self.carriers[self.inner_of[i]], feeds_outer=True)
            upstream = self.stages[-1]
        for k, spec in enumerate(self.specs):
            spec.node.meta[_MARK] = k
        copy = statement.copy()
        tvf = next(t for t in copy.find_all(type(self.specs[i].node)) if t.meta.get(_MARK) == i)
        streams = dict(self.streams)
        derived = None
        if upstream is not None:
            derived = f"__sqlwin_stage_{len(self.stages)}_in"
            _data_of(tvf).set("this", exp.to_table(derived))
            _drop_unread_ctes(copy)
            streams[derived] = CreateStream(derived, (), WatermarkSpec(self.specs[i].time_col, 0), None, "stage",
                                            {}, None, None)
        owns_clause = self.clause is not None and self.carriers[i] is self.clause
        emit, lateness, evict = (self.query.emit, self.query.lateness, self.query.evict) if owns_clause else \
            (tp.EmitSpec(), tp.LatenessSpec(), None)
        if feeds_outer:
            if emit.explicit:
                raise SqlwinError.at(self.clause.args["emit"], "EMIT on the inner aggregation of cascaded windows: "
                                                               "the outer windows read each inner window once, when "
                                                               "it is final; put EMIT on the outer query")
            emit = tp.EmitSpec(tp.EmitFinal(), tp.AccumulationMode.ACCUMULATING, True)
        sub = WindowedQuery(node=copy, windows=[dataclasses.replace(self.specs[i], node=tvf)], emit=emit,
                            lateness=lateness, evict=evict, streams=self.query.streams)
        shape = analyse(sub, streams, self.text)
        index = None if upstream is not None else self.read.index(shape.stream)
        stage = Stage(len(self.stages), shape, upstream, index, derived, owns_clause)
        self.stages.append(stage)
        return self.stages

    def window_join(self, tops: list[int], node: exp.Expr, top: exp.Expr, ctes: dict,
                    ranged: StreamRange | None = None) -> StagedShape | StreamingShape:
        """Two or more window queries joined in one SELECT (Flink chains binary window joins: ``L JOIN M ON
        ... JOIN R ON ...``, each ON equating the window of the query it joins with one joined before; a window's
        rows of all of them meet once every side's watermark has passed its end, which is what the chain emits).
        ``ranged``: a stream joined with its window query by a time range (``intervaljoin``), its side the HOP
        of the ranges, which meets the window query's windows by the range, not ON."""
        carriers = [self.carriers[i] for i in tops]
        select = next(s for s in ancestors(carriers[0]) if isinstance(s, exp.Select) and
                      all(within(c, s) for c in carriers[1:]))
        joins = select.args.get("joins") or []
        relations = [_relation_of(c, select) for c in carriers]
        if len(joins) != len(tops) - 1 or any(r is None for r in relations):
            raise SqlwinError.at(select, "a streaming query of several window queries joins them in one SELECT: FROM "
                                         "(window query) L JOIN (window query) R ON L.window_start = R.window_start "
                                         "AND L.window_end = R.window_end [JOIN (window query) ... ON ...] (Flink's "
                                         "window join)")
        for join in joins:
            if join.args.get("kind") and join.args["kind"].upper() not in ("INNER", "OUTER"):
                raise SqlwinError.at(join, f"a streaming window join is INNER, LEFT, RIGHT or FULL; not "
                                           f"{join.args['kind'].upper()}")
        first = self.specs[tops[0]]
        for i in tops[1:] if ranged is None else []:
            other = self.specs[i]
            if (first.kind, first.size, first.slide, first.step, first.offset, first.gap) != \
                    (other.kind, other.size, other.slide, other.step, other.offset, other.gap):
                raise SqlwinError.at(other.node, "every side of a streaming window join uses the same window "
                                                 "(Flink's window join): the windows they join are the same windows")
        bodies = [_body(r, ctes) for r in relations]
        aliases = [r.alias_or_name for r in relations]
        bounds = [bounds_through(c, body) for c, body in zip(carriers, bodies, strict=True)]
        for found, relation in zip(bounds, relations, strict=True):
            if ranged is None and set(found.values()) != {"window_start", "window_end"}:
                raise SqlwinError.at(relation, "each side of a streaming window join selects its window_start and "
                                               "window_end (Flink's window join joins on them)")
        partners = {}
        for join in joins:
            joined = next((n for n, r in enumerate(relations) if r is join.this), -1)
            partners[aliases[joined]] = aliases[1 - joined] if ranged is not None else \
                aliases[_check_on(join, aliases, bounds, joined)]
        keep_joined_windows_apart(select, {name: bound for found in bounds for name, bound in found.items()},
                                  (ranged.spec if ranged is not None else first).kind)
        ranked = as_window_rank(self.query, self.specs, self.carriers, tops, select, relations) \
            if len(tops) == 2 and ranged is None else None
        if ranked is not None:  # the rows of a window at its own MAX / MIN: one window operator, not a join
            shape = analyse(ranked[0], self.streams, self.text)
            shape.rewritten = "a window join with the window's own MAX/MIN, run as a window Top-N (RANK() = 1)"
            shape.top_rows = ranked[1]
            return shape
        sides = []
        for n, (i, body) in enumerate(zip(tops, bodies, strict=True)):
            stage = self.chain(i, body)[-1]
            if stage.shape.query.emit.mode is tp.AccumulationMode.DISCARDING:
                raise SqlwinError.at(self.clause.args["emit"], "DISCARDING panes in a window join: the join of a "
                                                               "window reads each side's latest pane, which must hold "
                                                               "the whole window (ACCUMULATING)")
            carrier = stage.shape.carrier
            if stage.owns_clause and carrier is not top_select(stage.shape.query.node):
                raise SqlwinError.at(self.clause, "EMIT / ALLOWED LATENESS on a window join's side apply where the "
                                                  "side is the window aggregation itself")
            if ranged is not None and self.specs[i] is ranged.spec:
                stage.shift = ranged.shift
            _hide(stage.shape, carrier, stage.shift)
            stage.keys = len(stage.shape.keys)
            sides.append(JoinSide(stage, aliases[n], f"__sqlwin_join_side_{n}"))
        statement = _join_statement(node, relations, sides, select, same_window=ranged is not None)
        return StagedShape(self.query, self.read, self.stages, WindowJoin(sides, statement, partners,
                                                                          ranged.delay if ranged else 0),
                           self.text, "window join" if ranged is None else "a stream joined by a time range")


def _wrap_joined_tvf(tvf: exp.Expr) -> None:
    """``FROM TUMBLE(...) L JOIN TUMBLE(...) R``, the window join as batch queries write it: each joined TVF is
    read as ``(SELECT * FROM TUMBLE(...)) L``, a window query of its own (the same TVF node, moved)."""
    select = tvf.find_ancestor(exp.Select)
    if not isinstance(tvf.parent, (exp.From, exp.Join)) or select is None or not select.args.get("joins"):
        return
    alias = tvf.args.get("alias")
    tvf.set("alias", None)
    wrapper = exp.Subquery(this=exp.Select(expressions=[exp.Star()]), alias=alias)
    tvf.replace(wrapper)
    wrapper.this.set("from_", exp.From(this=tvf))


def _carrier(spec: WindowSpec) -> exp.Select:
    tvf = spec.node
    carrier = tvf.find_ancestor(exp.Select)
    if carrier is None or not in_from(tvf, carrier):
        raise SqlwinError.at(tvf, "in a streaming query each window TVF is read directly by a SELECT")
    if carrier.args.get("joins"):
        raise SqlwinError.at(carrier.args["joins"][0], "a streaming window query cannot join other tables in the "
                                                      "SELECT that reads the window TVF; join window queries on "
                                                      "window_start and window_end (a window join)")
    return carrier


def _data(spec: WindowSpec) -> TableArg:
    return _data_of(spec.node)


def _data_of(tvf: exp.Expr) -> TableArg:
    for arg in tvf.expressions:
        value = arg.expression if isinstance(arg, exp.Kwarg) else arg
        if isinstance(value, TableArg):
            return value
    raise SqlwinError.at(tvf, "a window TVF reads TABLE t")


def _body(node: exp.Expr, ctes: dict) -> exp.Expr | None:
    """The query a relation reads: a subquery's SELECT, a CTE's, or None for a table."""
    if isinstance(node, exp.Subquery):
        return _body(node.this, ctes)
    if isinstance(node, exp.Table) and not node.db and node.name.lower() in ctes:
        return ctes[node.name.lower()]
    return node if isinstance(node, exp.Query) else None


def _check_cascade(outer: WindowSpec, inner: WindowSpec, carrier: exp.Select) -> None:
    """The outer window reads the inner window's time (Flink: a window's rowtime, ``window_time``), and the inner
    query is a window aggregation (whose windows fire as the watermark passes)."""
    item = next((e for e in carrier.expressions if e.alias_or_name.lower() == outer.time_col.lower()), None)
    column = item.unalias() if item is not None else None
    if not isinstance(column, exp.Column) or column.name.lower() not in ("window_time", "window_end"):
        raise SqlwinError.at(outer.node, f"DESCRIPTOR({outer.time_col}): the outer window of cascaded windows reads "
                                         "the inner window's window_time (or window_end), as Flink's cascading window "
                                         "aggregation does")
    if carrier.args.get("group") is None:
        raise SqlwinError.at(carrier, "the inner query of cascaded windows is a window aggregation (GROUP BY "
                                      "window_start, window_end, ...): its windows fire into the outer ones")


def _relation_of(carrier: exp.Select, select: exp.Select) -> exp.Expr | None:
    """The relation (a subquery, or a CTE's name) of ``select``'s FROM or JOIN that reads ``carrier``."""
    sources = [select.args["from_"].this] if select.args.get("from_") else []
    sources += [j.this for j in select.args.get("joins") or []]
    ctes = {c.alias_or_name.lower(): c.this for w in [select, *ancestors(select)] if isinstance(w, exp.Query)
            for c in (w.args.get("with_").expressions if w.args.get("with_") else [])}
    for source in sources:
        if isinstance(source, exp.Subquery) and within(carrier, source):
            return source
        body = ctes.get(source.name.lower()) if isinstance(source, exp.Table) else None
        if body is not None and within(carrier, body):
            return source
    return None


def _check_on(join: exp.Join, aliases: list[str], bounds: list[dict[str, str]], joined: int) -> int:
    """ON equates the window_start and the window_end of the side it joins (``joined``) with those of a side
    joined before (Flink's window join; each JOIN of a chain is one): that side."""
    found: dict[str, set[int]] = {"window_start": set(), "window_end": set()}
    on = join.args.get("on")
    for eq in (on.find_all(exp.EQ) if on is not None else []):
        left, right = eq.this, eq.expression
        if not (isinstance(left, exp.Column) and isinstance(right, exp.Column)):
            continue
        named = [_side_bound(c, aliases, bounds) for c in (left, right)]
        if None in named or named[0][0] == named[1][0] or named[0][1] != named[1][1]:
            continue
        sides = {named[0][0], named[1][0]}
        if joined in sides:
            found[named[0][1]] |= sides - {joined}
    partners = found["window_start"] & found["window_end"]
    if not partners:
        raise SqlwinError.at(on if on is not None else join,
                             "a streaming window join joins ON L.window_start = R.window_start AND L.window_end = "
                             "R.window_end (Flink's window join): a window's join result is emitted once the "
                             "watermarks of both sides pass its end")
    return min(partners)


def _side_bound(column: exp.Column, aliases: list[str], bounds: list[dict[str, str]]) -> tuple[int, str] | None:
    name = column.name.lower()
    sides = [n for n, a in enumerate(aliases) if column.table.lower() == a.lower()] if column.table else \
        [n for n in range(len(bounds)) if name in bounds[n]]
    if len(sides) != 1 or name not in bounds[sides[0]]:
        return None
    return sides[0], bounds[sides[0]][name]


def _hide(shape: StreamingShape, carrier: exp.Select, shift: tuple[int, int] = (0, 0)) -> None:
    """A join side's panes carry its window (and keys) under names of sqlwin's own; ``shift`` moves the window's
    bounds to the join's (``Stage.shift``)."""
    top = top_select(shape.query.node)
    bounds = bounds_through(carrier, top)
    names = {v: k for k, v in bounds.items()}
    for bound, hidden, by in zip(("window_start", "window_end"), HIDDEN_BOUNDS, shift, strict=True):
        if bound not in names and top is not carrier:
            raise SqlwinError.at(top, "the window query a stream joins by a time range passes window_start and "
                                      "window_end on (or is the window query itself)")
        column = exp.column(names.get(bound, bound))
        moved = exp.Add(this=column, expression=exp.Interval(this=exp.Literal.string(seconds_text(by)),
                                                             unit=exp.Var(this="SECOND"))) if by else column
        top.append("expressions", exp.alias_(moved, hidden))
    if top is carrier:
        for k, key in enumerate(shape.keys):
            top.append("expressions", exp.alias_(key.copy(), f"__sqlwin_k{k}"))


def _join_statement(node: exp.Expr, relations: list[exp.Expr], sides: list[JoinSide], select: exp.Select,
                    same_window: bool = False) -> exp.Expr:
    """The user's statement over the sides' views, with the join's pane columns (``pane_index``, ``pane_timing``,
    ``is_final``: one pane per window) selected after the user's columns, through every SELECT up to the top.
    ``same_window``: the user's ON does not equate the windows (a join by a time range), so the join adds it:
    the views hold every window joined in the micro-batch, and a row meets the other side's rows of its own."""
    for n, relation in enumerate(relations):
        relation.meta[_MARK] = f"side{n}"
    select.meta[_MARK] = "join"
    copy = top_select(node).copy()
    for relation in relations:
        relation.meta.pop(_MARK, None)
    select.meta.pop(_MARK, None)
    for n, side in enumerate(sides):
        found = next(r for r in copy.find_all(exp.Subquery, exp.Table) if r.meta.get(_MARK) == f"side{n}")
        found.replace(exp.Table(this=exp.to_identifier(side.view), alias=exp.TableAlias(
            this=exp.to_identifier(side.alias))))
    _drop_unread_ctes(copy)
    join = next(s for s in copy.find_all(exp.Select) if s.meta.get(_MARK) == "join")
    if same_window:
        on = join.args["joins"][0]
        on.set("on", exp.and_(on.args.get("on"), *(exp.EQ(this=exp.column(h, sides[0].alias), expression=exp.column(
            h, sides[1].alias)) for h in HIDDEN_BOUNDS)))
    items = []
    for e in join.expressions:
        if is_star(e):
            qualifier = e.table if isinstance(e, exp.Column) and e.table else None
            names = [qualifier] if qualifier else [s.alias for s in sides]
            items += [exp.Var(this=f"{q}.* EXCEPT ({_hidden_of(sides, q)})") for q in names]
        else:
            items.append(e)
    join.set("expressions", items)
    panes = [exp.alias_(exp.func("COALESCE", *(exp.column(h, table=s.alias) for s in sides)), p)
             for h, p in zip(HIDDEN_PANE, PANES, strict=True)]
    _add_panes(join, panes)
    for outer in (a for a in ancestors(join) if isinstance(a, exp.Select)):
        if not any(is_star(e) for e in outer.expressions):
            _add_panes(outer, [exp.column(p) for p in PANES])
    return copy


def by_micro_batch(join: WindowJoin) -> exp.Expr:
    """The join's statement over side views that hold several of the join's micro-batches (``JOIN_BATCH``, as
    a planned replay computes them all at once): each JOIN also equates the micro-batch of the side it joins
    and of the side whose window its ON equates (so rows of two micro-batches never meet, and an outer join's
    unmatched rows stay unmatched), the join's output carries it as ``micro_batch``, and everything above the
    join is partitioned by it (``partitioned``: a GROUP BY or window function over the join's rows sees one
    micro-batch's at a time). ``NotPartitionable`` where that cannot be done."""
    statement = join.statement.copy()
    select = next(s for s in statement.find_all(exp.Select) if s.meta.get(_MARK) == "join")
    for item in select.expressions:  # a side's star (``_join_statement``'s) leaves the micro-batch out too
        if isinstance(item, exp.Var) and item.this.endswith(")") and ".* EXCEPT (" in item.this:
            item.set("this", f"{item.this[:-1]}, {JOIN_BATCH})")
    for j in select.args.get("joins") or []:
        joined = j.this.alias_or_name
        j.set("on", exp.and_(j.args.get("on"), exp.EQ(this=exp.column(JOIN_BATCH, joined),
                                                       expression=exp.column(JOIN_BATCH, join.partners[joined]))))
    batch = exp.func("COALESCE", *(exp.column(JOIN_BATCH, table=s.alias) for s in join.sides))
    for window in list(select.find_all(exp.Window)):  # the join's own window functions
        if window.find_ancestor(exp.Select) is select:
            window.append("partition_by", batch.copy())
    _add_panes(select, [exp.alias_(batch, "micro_batch")])
    partitioned.partition_by(statement, select, "micro_batch", carrier_windows=False)
    return statement


def _hidden_of(sides: list[JoinSide], alias: str) -> str:
    """The columns of sqlwin's own that a side's view has besides the side's (a star does not select them)."""
    side = next(s for s in sides if s.alias.lower() == alias.lower())
    return ", ".join([*HIDDEN_BOUNDS, *HIDDEN_PANE, *(f"__sqlwin_k{k}" for k in range(side.stage.keys))])


def _add_panes(select: exp.Select, panes: list[exp.Expr]) -> None:
    for pane in panes:
        select.append("expressions", pane)
    group = select.args.get("group")
    if group is not None:
        for pane in panes:
            group.append("expressions", pane.unalias().copy())


def _drop_unread_ctes(query: exp.Expr) -> None:
    """The CTEs nothing reads any more (a stage or a view reads them now), taken out of ``query``'s WITH."""
    with_ = query.args.get("with_")
    if with_ is None:
        return
    read = {t.name.lower() for t in query.find_all(exp.Table) if t.find_ancestor(exp.With) is None}
    kept = [c for c in with_.expressions if c.alias_or_name.lower() in read]
    if kept:
        with_.set("expressions", kept)
    else:
        query.set("with_", None)
