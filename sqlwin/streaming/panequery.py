"""Spark SQL for the two halves of a micro-batch of the custom path, built once per query.

- ``assign_sql``: the micro-batch's rows with their windows (the batch backend's own window TVF plan),
  the carrier's WHERE applied, and the columns the operator needs: ``__k<i>`` (pane keys), ``__key``
  (the keys as JSON, hashable in Python), ``__ws``/``__we`` (window bounds in epoch microseconds).
- ``pane_sql``: the user's query over the *pane relation*: per fired pane, its stored rows (or one row
  of NULLs for an empty pane) with the window bounds, the keys and ``pane_index``/``pane_timing``/
  ``is_final``. The carrier groups by the pane columns as well, and ``COUNT(*)`` counts real rows only,
  so an empty pane aggregates as an empty group (GRAMMAR 4: ``COUNT(*)`` = 0, ``SUM`` = NULL). Each item the
  user did not alias is aliased with the name Spark gives it in the batch query (``item_names``), as the
  rewrite would otherwise leave Spark naming the rewritten expression.

Rows never pass through Python: the operator only sees per-window counts.
"""

from __future__ import annotations

import logging
from typing import Any

from sqlglot import exp

from sqlwin import diagnostics
from sqlwin.backends.spark_batch import SparkBatchCompiler
from sqlwin.core.panes import MAX_TIME, MIN_TIME
from sqlwin.dialect.nodes import TableArg
from sqlwin.errors import SqlwinError
from sqlwin.plan.windows import WindowKind
from sqlwin.streaming import analysis, partitioned
from sqlwin.streaming.context import Views
from sqlwin.streaming.partials import Decomposition
from sqlwin.streaming.shape import (
    PANE_COLUMNS,
    StreamingShape,
    ancestors,
    count_star_to_present,
    find_carrier,
    is_star,
    key_index,
    mark_carrier,
    reading,
    strip_clauses,
    top_select,
    within,
)

D = "spark"
INTERNAL = ("__key", "__ws", "__we", "__mb", "__present")
PLACEHOLDER = "__sqlwin_star"  # a star of the carrier, in the query that names its items (one column)
log = logging.getLogger(__name__)


class PaneQuery:
    def __init__(self, shape: StreamingShape, spark: Any, views: Views):
        self.shape = shape
        self.spark = spark
        self.views = views
        self._item_names: list[str | None] | None = None
        self.compiler = SparkBatchCompiler(spark)
        mark_carrier(shape)
        self.assign_sql = self._assign_sql()
        self.decomposition: Decomposition | None = None  # set by the operator: partial aggregates, or raw rows

    # -- assignment ---------------------------------------------------------------------------
    def _source(self) -> tuple[exp.Expr, str]:
        """The carrier's FROM (its window TVF) reading the micro-batch views instead of the streams, and its
        alias."""
        shape = self.shape
        carrier = find_carrier(shape.query.node.copy())
        views = {st.name.lower(): self.views.batch_of(i) for i, st in enumerate(shape.streams or [shape.stream])}
        return reading(carrier.args["from_"].this.copy(), views), shape.source_alias

    def input_sql(self, view: str) -> str:
        """The window TVF's input (a subquery over the stream, such as a join with a table) over ``view`` in
        place of the stream: the relation's rows for some of the stream's rows."""
        shape = self.shape
        node = find_carrier(shape.query.node.copy()).args["from_"].this.find(TableArg).this
        node = reading(node, {st.name.lower(): view for st in shape.streams or [shape.stream]})
        if isinstance(node, exp.Subquery):
            node = node.this
        relation = node if isinstance(node, exp.Table) else node.subquery("__input")
        return self.compiler.render(self.compiler.compile(exp.select("*").from_(relation), []))

    def _key_json(self) -> exp.Expr:
        """``__key``: the keys as JSON, from the ``__k<i>`` columns."""
        if not self.shape.keys:
            return exp.Literal.string("{}")
        struct = exp.func("NAMED_STRUCT", *[a for i in range(len(self.shape.keys))
                                            for a in (exp.Literal.string(f"__k{i}"), exp.column(f"__k{i}"))])
        return exp.func("TO_JSON", struct)

    def _assign_sql(self) -> str:
        shape = self.shape
        source, alias = self._source()
        select = exp.select(exp.Column(this=exp.Star(), table=exp.to_identifier(alias))).from_(source)
        keys = [k.copy() for k in shape.keys]
        for i, key in enumerate(keys):
            select.select(exp.alias_(key, f"__k{i}"), copy=False)
        key_json = self._key_json()
        self.key_json_sql = key_json.sql(D)  # ``__key`` from the ``__k<i>`` columns (also after a GROUP BY)
        where = shape.carrier.args.get("where")
        if where is not None:
            select.set("where", where.copy())
        if shape.window is not None:
            ws = self.compiler.to_us(exp.column("window_start"), shape.window)
            we = self.compiler.to_us(exp.column("window_end"), shape.window)
        else:
            ws, we = exp.Literal.number(MIN_TIME), exp.Literal.number(MAX_TIME)
        outer = exp.select(exp.Star(), exp.alias_(key_json, "__key"), exp.alias_(ws, "__ws"),
                           exp.alias_(we, "__we")).from_(select.subquery("__a"))
        if shape.window is not None and shape.window.kind is WindowKind.SESSION:
            # sessions move: stored rows belong to the session of their key that contains their time
            outer.select(exp.alias_(self.compiler.to_us(exp.column(shape.window.time_col), shape.window), "__ts"),
                         copy=False)
        specs = [shape.window] if shape.window is not None else []
        compiled = self.compiler.compile(outer, specs)
        return self.compiler.render(compiled)

    def session_partials_sql(self, decomposition: Decomposition) -> str:
        """Per session of the micro-batch (``assign_sql``'s rows, each key's own sessions): ``__key``,
        ``__ws``, ``__we``, the ``__k<i>`` keys, the row count ``__n`` and the partial aggregates, the columns
        ``MicroBatchOperator.partials_of`` gives. Written as one aggregation grouped by the session, which the
        batch backend plans without per-row bounds when that cannot change the answer (a static gap, no
        WHERE: ``spark_groupby.SessionRoute``); otherwise it is the per-row plan grouped, as before."""
        shape = self.shape
        assert shape.window is not None and shape.window.kind is WindowKind.SESSION
        source, alias = self._source()
        keys = [k.copy() for k in shape.keys]
        bounds = [exp.column("window_start", alias), exp.column("window_end", alias)]
        partials = [exp.alias_(e, name) for unit in decomposition.units for name, e in unit.partials()]
        grouped = exp.select(*[exp.alias_(k.copy(), f"__k{i}") for i, k in enumerate(keys)],
                             *[exp.alias_(b.copy(), b.name) for b in bounds],
                             exp.alias_(exp.Count(this=exp.Star()), "__n"), *partials).from_(source)
        where = shape.carrier.args.get("where")
        if where is not None:
            grouped.set("where", where.copy())
        grouped = grouped.group_by(*keys, *bounds)
        outer = exp.select(exp.alias_(self._key_json(), "__key"),
                           exp.alias_(self.compiler.to_us(exp.column("window_start"), shape.window), "__ws"),
                           exp.alias_(self.compiler.to_us(exp.column("window_end"), shape.window), "__we"),
                           *[exp.column(f"__k{i}") for i in range(len(keys))], exp.column("__n"),
                           *[exp.column(name) for name in decomposition.columns]).from_(grouped.subquery("__g"))
        return self.compiler.render(self.compiler.compile(outer, [shape.window]))

    # -- panes --------------------------------------------------------------------------------
    def relation_sql(self, row_columns: list[str], key_ddl: str, extra: tuple[str, ...] = (),
                     ranges: bool = False, inner: bool = False) -> str:
        """The pane relation over the fired-panes view and the stored-rows view (``extra``: more columns of
        the fired-panes view passed through, e.g. replay's ``micro_batch``). A pane reads the micro-batches in
        its ``tokens``, or (``ranges``) those from ``__lo`` to ``__hi``; one that reads none is one row of
        NULLs (an empty pane). ``inner``: every pane that reads a micro-batch finds rows there (a planned
        replay's: none is evicted), so those panes are an inner join, which Spark may broadcast (a LEFT JOIN
        can only broadcast the stored rows), and the empty ones are added apart."""
        v = self.views
        shape = self.shape
        items = [f"r.`{c}`" for c in row_columns]
        if shape.window is not None:
            spec = shape.window
            us = {"window_start": exp.column("__ws", "p"), "window_end": exp.column("__we", "p"),
                  "window_time": exp.Sub(this=exp.column("__we", "p"), expression=exp.Literal.number(1000))}
            for name, value in us.items():
                items.append(f"{self.compiler.from_us(value, spec).sql(D)} AS `{name}`")
        rest = ["r.__present AS __present", "p.pane_index AS pane_index", "p.pane_timing AS pane_timing",
                "p.is_final AS is_final", *[f"p.`{c}` AS `{c}`" for c in extra]]
        keys = [f"COALESCE(r.`__k{i}`, p.__kk.`__k{i}`) AS `__k{i}`" for i in range(len(shape.keys))]
        # a pane that finds rows takes its key from them (a stored row's key columns are the key its JSON
        # names, NULLs included), so an inner join parses the fired panes' keys only for the empty ones
        found = [*items, *[f"r.`__k{i}` AS `__k{i}`" for i in range(len(shape.keys))], *rest]
        items += [*keys, *rest]
        fired = f"(SELECT *, FROM_JSON(__key, '{key_ddl}') AS __kk FROM {v.fired})" if shape.keys else v.fired
        if shape.window is not None and shape.window.kind is WindowKind.SESSION and self.decomposition is not None:
            bounds = "r.__ws >= p.__ws AND r.__we <= p.__we"  # a micro-batch session lies whole in one session
        elif shape.window is not None and shape.window.kind is WindowKind.SESSION:
            bounds = "r.__ts >= p.__ws AND r.__ts < p.__we"
        elif shape.window is not None and shape.window.is_count_based:
            bounds = "TRUE"  # a count window is named by __key alone (sqlwin.streaming.countwindows)
        else:
            bounds = "r.__ws = p.__ws AND r.__we = p.__we"
        reads = "r.__mb BETWEEN p.__lo AND p.__hi" if ranges else "ARRAY_CONTAINS(p.tokens, r.__mb)"
        on = f"ON r.__key = p.__key AND {bounds} AND {reads}"
        if not inner:
            return f"SELECT {', '.join(items)} FROM {fired} AS p LEFT JOIN {v.rows} AS r {on}"
        some = "__lo <= __hi" if ranges else "SIZE(tokens) > 0"
        return (f"SELECT {', '.join(found)} FROM (SELECT * FROM {v.fired} AS f WHERE {some}) AS p JOIN {v.rows} AS r "
                f"{on} UNION ALL SELECT {', '.join(items)} FROM (SELECT * FROM {fired} AS f WHERE NOT ({some})) AS p "
                f"LEFT JOIN (SELECT * FROM {v.rows} WHERE FALSE) AS r {on}")

    relation_reads = 1  # how many times the statement the last pane_sql call made reads the pane relation

    def pane_sql(self, extra: tuple[str, ...] = (), partition_by: str | None = None) -> str:
        """The user's statement, reading the pane relation instead of the window TVF (or the stream); the pane
        columns (and ``extra`` ones of the relation) are kept up to the result. ``partition_by``: one of
        ``extra`` (the micro-batch) by which every operator relating panes is partitioned, so that one query
        over the panes of several micro-batches computes each micro-batch's on their own
        (``sqlwin.streaming.partitioned``; ``NotPartitionable`` where it cannot)."""
        columns = (*PANE_COLUMNS, *extra)
        shape = self.shape
        alias = shape.source_alias
        root = shape.query.node
        if isinstance(root, exp.Insert):
            root = root.expression
        root = strip_clauses(root.copy())
        carrier = find_carrier(root)
        carrier.args["from_"].set("this", exp.Table(this=exp.to_identifier(self.views.relation),
                                                    alias=exp.TableAlias(this=exp.to_identifier(alias))))
        carrier.set("where", None)
        if shape.aggregated:
            self._name_items(carrier)
            self._rewrite_aggregation(carrier, alias, columns)
        else:
            self._expand_stars(carrier, alias, columns)
            for name in columns:
                carrier.select(exp.column(name, alias), copy=False)
        self._pass_pane_columns_up(carrier, root, columns)
        self.relation_reads = partitioned.relation_reads(root, carrier)
        if partition_by is not None:
            partitioned.partition_by(root, carrier, partition_by)
        return root.sql(dialect=D)

    def item_names(self) -> list[str | None]:
        """The carrier's items' names in the batch query (``item_names``), asked of Spark once."""
        if self._item_names is None:
            self._item_names = item_names(self.spark, self.shape)
        return self._item_names

    def _name_items(self, carrier: exp.Select) -> None:
        """Each item of (a copy of) the carrier that the user did not name is aliased with the name Spark gives
        it in the batch query: the rewrite of its aggregates and keys would otherwise leave Spark naming the
        rewritten expression (``CAST(coalesce(sum(__p0), 0) AS BIGINT)`` for ``COUNT(*)``)."""
        carrier.set("expressions", [item if name is None else exp.alias_(item, exp.to_identifier(name, quoted=True))
                                    for item, name in zip(carrier.expressions, self.item_names(), strict=True)])

    def _expand_stars(self, carrier: exp.Select, alias: str, columns: tuple[str, ...]) -> None:
        """A ``*`` of the window's rows selects the user's columns only: the pane relation's own (the pane
        columns, appended after them, ``__present`` and the keys) are left out."""
        own = ["__present", *(f"__k{i}" for i in range(len(self.shape.keys))), *columns]
        hidden = ", ".join(f"`{c}`" for c in own)
        carrier.set("expressions", [
            exp.Var(this=f"`{alias}`.* EXCEPT ({hidden})") if is_star(e) else e for e in carrier.expressions])

    def _rewrite_aggregation(self, carrier: exp.Select, alias: str, columns: tuple[str, ...]) -> None:
        shape = self.shape
        group = carrier.args.get("group")
        if self.decomposition is not None:  # aggregates over the pane's partial rows
            self.decomposition.rewrite(carrier, alias)

        def swap(n: exp.Expr) -> exp.Expr:
            i = key_index(shape, n)
            return exp.column(f"__k{i}", alias) if i is not None else n

        new_items = []
        for item in carrier.expressions:
            i = key_index(shape, item)
            if i is not None:  # a bare key: keep its output name
                new_items.append(exp.alias_(exp.column(f"__k{i}", alias), item.alias_or_name))
            else:
                new_items.append(item.transform(swap))
        carrier.set("expressions", new_items)
        having = carrier.args.get("having")
        if having is not None:
            carrier.set("having", having.transform(swap))
        if group is None:
            group = exp.Group(expressions=[])
            carrier.set("group", group)
        exprs = [exp.column(f"__k{key_index(shape, g)}", alias) if key_index(shape, g) is not None else g
                 for g in group.expressions]
        if shape.window is not None:  # window_time is window_end's: selectable as in the batch query
            exprs.append(exp.column("window_time", alias))
        group.set("expressions", exprs + [exp.column(n, alias) for n in columns])
        if self.decomposition is None:
            count_star_to_present(carrier, alias)
        for name in columns:
            carrier.select(exp.column(name, alias), copy=False)

    @staticmethod
    def _pass_pane_columns_up(carrier: exp.Select, root: exp.Expr, columns: tuple[str, ...]) -> None:
        """Queries around the carrier keep the pane columns (appended where they list columns)."""
        node: exp.Expr | None = carrier.parent
        while node is not None:
            if isinstance(node, exp.Select) and not any(
                    isinstance(e, exp.Star) or (isinstance(e, exp.Column) and isinstance(e.this, exp.Star))
                    for e in node.expressions):
                for name in columns:
                    node.select(exp.column(name), copy=False)
            if node is root:
                break
            node = node.parent


def item_names(spark: Any, shape: StreamingShape) -> list[str | None]:
    """Per item of the carrier's SELECT list, the name Spark gives it in the batch query, or None where the user
    named it (an alias, a star): replay, a streaming table and batch then name their columns alike. Spark is
    asked, as its name comes from the analysed expression (``COUNT(*)`` is ``count(1)``, ``v % 2`` is
    ``(v % 2)``), by analysing the carrier alone as a batch query (``_naming_query``); nothing runs."""
    carrier = find_carrier(top_select(shape.query.node).copy())
    unnamed = [not _named(item) for item in carrier.expressions]
    if not any(unnamed):
        return [None] * len(unnamed)
    windows = [shape.window] if shape.window is not None else []
    streams = [s.name for s in shape.streams or [shape.stream]]
    try:
        names = analysis.batch_names(spark, _naming_query(carrier), windows, streams)
    except Exception as err:  # the batch query was analysed already (``check_as_batch``): sqlwin's own mistake
        if not diagnostics.is_spark_error(err):
            raise
        log.warning("the names of the query's columns could not be derived; Spark names the rewritten ones: %s", err)
        return [None] * len(unnamed)
    if len(names) != len(unnamed):  # an item of several columns (a generator such as posexplode): as written
        return [None] * len(unnamed)
    return [name if own else None for name, own in zip(names, unnamed, strict=True)]


def _named(item: exp.Expr) -> bool:
    return isinstance(item, (exp.Alias, exp.Aliases)) or is_star(item)


def _naming_query(carrier: exp.Select) -> exp.Select:
    """The carrier (of a copy of the statement) alone, as a batch query whose items Spark names as it names the
    user's: its window TVF read as ``(SELECT * FROM tvf) AS alias`` (plain ``window_start``/``window_end``
    columns, as the pane relation has, where the batch plan of an aggregation reads a window struct), each star
    one placeholder column (the items stay in step with the columns), no ORDER BY (it may name items by
    position), and the CTEs of the queries around it that it may read."""
    query = carrier.copy()
    query.set("order", None)
    query.set("expressions", [exp.alias_(exp.Literal.number(0), PLACEHOLDER) if is_star(e) else e
                              for e in query.expressions])
    source = query.args["from_"].this
    if not isinstance(source, exp.Table):  # the window TVF (the global window reads the stream itself)
        alias = source.args.get("alias")
        source.set("alias", None)
        query.args["from_"].set("this", exp.Subquery(this=exp.select("*").from_(source, copy=False), alias=alias))
    scope = ctes_in_scope(carrier)
    if scope:
        own = query.args.get("with_")
        query.set("with_", exp.With(expressions=[*scope, *(own.expressions if own is not None else [])]))
    return query


def ctes_in_scope(node: exp.Expr) -> list[exp.CTE]:
    """Copies of the CTEs ``node`` may read of the queries around it (in a WITH that defines ``node``, those before
    its own), outermost first; an inner CTE hides an outer one of the same name."""
    found: list[exp.CTE] = []
    for parent in ancestors(node):
        with_ = parent.args.get("with_") if isinstance(parent, exp.Query) else None
        if with_ is not None:
            ctes = with_.expressions
            before = next((i for i, cte in enumerate(ctes) if within(node, cte)), len(ctes))
            found = [*(cte.copy() for cte in ctes[:before]), *found]
    hidden = {cte.alias_or_name.lower() for cte in (node.args.get("with_") or exp.With()).expressions}
    kept: list[exp.CTE] = []
    for cte in reversed(found):
        if cte.alias_or_name.lower() not in hidden:
            hidden.add(cte.alias_or_name.lower())
            kept.insert(0, cte)
    return kept


def key_ddl(schema: Any, count: int) -> str:
    """``__k0 TYPE, __k1 TYPE`` from the assigned rows' schema (for FROM_JSON of ``__key``)."""
    fields = {f.name: f.dataType.simpleString() for f in schema.fields}
    missing = [i for i in range(count) if f"__k{i}" not in fields]
    if missing:
        raise SqlwinError("internal: pane keys missing from the assigned rows")
    return ", ".join(f"`__k{i}` {fields[f'__k{i}']}" for i in range(count))
