"""Plan a query: every window TVF in it (innermost first), and its streaming clauses."""

from __future__ import annotations

from collections.abc import Callable
from itertools import count

from sqlglot import exp

from sqlwin.backends.base import SPEC_KEY, spec_key
from sqlwin.dialect.nodes import SELECT_CLAUSE_KEYS, TableArg, WindowTVF
from sqlwin.errors import SqlwinError
from sqlwin.plan.statements import WindowedQuery
from sqlwin.plan.triggers import EmitFinal, uses_watermark
from sqlwin.plan.windows import Column, Relation, WindowSpec
from sqlwin.planner.clauses import plan_emit, plan_evict, plan_lateness
from sqlwin.planner.windows import WindowBuilder, bind_arguments, data_argument

# (schema query with TVFs inside, specs planned so far) -> columns, or None when unknown; the query is
# built for the call and may be changed by it
SchemaResolver = Callable[[exp.Expr, list[WindowSpec]], "tuple[Column, ...] | None"]

_ids = count(1)


def new_window_key() -> int:
    """A key no planned window TVF has (``SPEC_KEY``): for a window TVF sqlwin writes itself."""
    return next(_ids)


class QueryPlanner:
    """Binds every window TVF of one statement, resolving each input schema through the engine."""

    def __init__(self, resolve_schema: SchemaResolver | None):
        self.resolve_schema = resolve_schema
        self.planned: dict[int, WindowSpec] = {}
        self.calls: dict[int, WindowTVF] = {}
        self._in_progress: set[int] = set()
        self._cte_memo: dict[int, list[exp.CTE]] = {}
        self._table_schemas: dict[tuple[tuple[str, bool], ...], tuple[Column, ...] | None] = {}

    def plan(self, node: exp.Expr) -> WindowedQuery:
        for call in node.find_all(WindowTVF):  # breadth first: reversed, innermost come first
            call.meta.setdefault(SPEC_KEY, next(_ids))
            self.calls[spec_key(call)] = call
        for key in reversed(self.calls):
            self._ensure(self.calls[key])
        windows = [self.planned[k] for k in self.calls]
        return self._clauses(node, windows)

    # -- window TVFs --------------------------------------------------------------------------
    def _ensure(self, call: WindowTVF) -> WindowSpec:
        key = spec_key(call)
        if key in self.planned:
            return self.planned[key]
        if key in self._in_progress:
            raise SqlwinError.at(call, "window TVF refers to itself")
        self._in_progress.add(key)
        bound = bind_arguments(call).values
        data = data_argument(bound["data"], call.kind)
        relation = Relation(data.this, self._columns(call, data))
        spec = WindowBuilder(call, relation, self._alias(call, data)).build()
        self.planned[key] = spec
        self._in_progress.discard(key)
        return spec

    def _columns(self, call: WindowTVF, data: TableArg) -> tuple[Column, ...] | None:
        if self.resolve_schema is None:
            return None
        ctes = _referenced(data.this, _visible_ctes(call, self._cte_memo))
        table = None if ctes else _table_key(data.this)  # a catalog table: looked up once per statement
        if table in self._table_schemas:
            return self._table_schemas[table]
        query = exp.select(exp.Star()).from_(_as_source(data.this), copy=False)
        if ctes:
            query.set("with_", exp.With(expressions=[c.copy() for c in ctes]))
        for inner in query.find_all(WindowTVF):  # plan what the schema query itself needs first
            original = self.calls.get(spec_key(inner))
            if original is not None:
                self._ensure(original)
        inner = dict.fromkeys(spec_key(c) for c in query.find_all(WindowTVF))  # only these: linear, not quadratic
        try:
            columns = self.resolve_schema(query, [self.planned[k] for k in inner if k in self.planned])
        except SqlwinError as err:
            error = SqlwinError.at(data, f"{call.kind}: cannot read the input: {err.message}")
            error.spark_error = getattr(err, "spark_error", None)  # type: ignore[attr-defined]
            raise error from None
        if table is not None:
            self._table_schemas[table] = columns
        return columns

    def _alias(self, call: WindowTVF, data: TableArg) -> str:
        alias = call.args.get("alias")
        if alias is not None and alias.name:
            return alias.name
        if isinstance(data.this, exp.Table) and not data.this.args.get("alias"):
            return data.this.name
        return f"__w{spec_key(call)}"

    # -- streaming clauses --------------------------------------------------------------------
    def _clauses(self, node: exp.Expr, windows: list[WindowSpec]) -> WindowedQuery:
        carriers = [s for s in node.find_all(exp.Select) if any(s.args.get(k) for k in SELECT_CLAUSE_KEYS)]
        if len(carriers) > 1:
            raise SqlwinError.at(carriers[1], "only one query of a statement may carry EMIT / ALLOWED LATENESS / "
                                              "LATE ROWS TO / EVICT clauses")
        query = WindowedQuery(node=node, windows=windows)
        if not carriers:
            query.aggregated = _aggregates(node)
            return query
        select = carriers[0]
        query.emit = plan_emit(select.args.get("emit"))
        query.lateness = plan_lateness(select)
        query.evict = plan_evict(select.args.get("evict"))
        query.aggregated = _aggregates(select)
        clause = next(select.args[k] for k in SELECT_CLAUSE_KEYS if select.args.get(k))
        if not query.aggregated:
            raise SqlwinError.at(clause, "EMIT, ALLOWED LATENESS, LATE ROWS TO and EVICT apply to an aggregation "
                                         "(GROUP BY or an aggregate function); this query has none")
        query.global_window = not list(select.find_all(WindowTVF)) and not windows
        if query.global_window and select.args.get("emit") is None:
            raise SqlwinError.at(clause, "an aggregation without a window TVF runs in the global window, which "
                                         "needs an EMIT WITH TRIGGER clause")
        if query.global_window and uses_watermark(query.emit.trigger):
            what = "EMIT FINAL" if isinstance(query.emit.trigger, EmitFinal) else "AFTER WATERMARK"
            raise SqlwinError.at(select.args["emit"], f"{what} needs event-time windows: the global window never "
                                                      "ends, so the watermark never passes it; use a window TVF or "
                                                      "a trigger such as EVERY 100 ROWS")
        return query


def _as_source(node: exp.Expr) -> exp.Expr:
    source = node.copy()
    if isinstance(source, exp.Select):
        source = source.subquery()
    if isinstance(source, exp.Subquery) and not source.alias:
        source.set("alias", exp.TableAlias(this=exp.to_identifier("__q")))
    return source


TABLE_NAME_PARTS = {"this", "db", "catalog"}


def _table_key(node: exp.Expr) -> tuple[tuple[str, bool], ...] | None:
    """A plain table name (``db.t``, no alias, sample or time travel) as written, else None."""
    if not isinstance(node, exp.Table) or {k for k, v in node.args.items() if v is not None} - TABLE_NAME_PARTS:
        return None
    parts = [node.args.get(k) for k in ("catalog", "db", "this")]
    if not all(p is None or isinstance(p, exp.Identifier) for p in parts):
        return None
    return tuple((p.name, bool(p.args.get("quoted"))) for p in parts if p is not None)


def _visible_ctes(node: exp.Expr, memo: dict[int, list[exp.CTE]]) -> list[exp.CTE]:
    """CTEs in scope at ``node``: those of enclosing WITH clauses (earlier ones only, inside a CTE).

    ``memo`` keeps, per ancestor, what its children (other than its WITH) see, so planning every
    TVF of a deep tree (a long UNION ALL) walks each ancestor once, not once per TVF.
    """
    chain: list[tuple[exp.Expr, exp.Expr]] = []
    child, parent = node, node.parent
    while parent is not None and not (id(parent) in memo and child is not parent.args.get("with_")):
        chain.append((child, parent))
        child, parent = parent, parent.parent
    found = memo[id(parent)] if parent is not None else []
    for i in range(len(chain) - 1, -1, -1):  # outermost first: outer CTEs precede inner ones
        child, parent = chain[i]
        with_ = parent.args.get("with_") if isinstance(parent, exp.Query) else None
        if isinstance(with_, exp.With):
            ctes = list(with_.expressions)
            if child is with_ and i > 0:  # inside CTE number k: only the CTEs before it
                cte = chain[i - 1][0]
                ctes = ctes[: next((k for k, c in enumerate(ctes) if c is cte), len(ctes))]
            found = found + ctes
        if child is not with_:
            memo[id(parent)] = found
    return found


def _referenced(query: exp.Expr, ctes: list[exp.CTE]) -> list[exp.CTE]:
    """The CTEs ``query`` reads, directly or through other CTEs (in their order)."""
    names = {t.name.lower() for t in query.find_all(exp.Table) if not t.args.get("db")}
    kept: set[int] = set()
    for i in range(len(ctes) - 1, -1, -1):  # a CTE can only read the ones before it
        if ctes[i].alias.lower() in names:
            kept.add(i)
            names |= {t.name.lower() for t in ctes[i].find_all(exp.Table) if not t.args.get("db")}
    return [c for i, c in enumerate(ctes) if i in kept]


def _aggregates(select: exp.Expr) -> bool:
    if select.find(exp.Group) is not None:
        return True
    return any(agg.find_ancestor(exp.Window) is None for agg in select.find_all(exp.AggFunc))
