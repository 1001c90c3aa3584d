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

# (schema query with TVFs inside, specs planned so far) -> columns, or None when unknown
SchemaResolver = Callable[[exp.Expr, list[WindowSpec]], "tuple[Column, ...] | None"]

_ids = count(1)


class QueryPlanner:
    """Binds every window TVF of one statement, resolving each input schema through the engine."""

    def __init__(self, resolve_schema: SchemaResolver | None):
        self.resolve_schema = resolve_schema
        self.planned: dict[int, WindowSpec] = {}
        self.calls: dict[int, WindowTVF] = {}
        self._in_progress: set[int] = set()

    def plan(self, node: exp.Expr) -> WindowedQuery:
        for call in node.find_all(WindowTVF):
            call.meta.setdefault(SPEC_KEY, next(_ids))
            self.calls[spec_key(call)] = call
        for key in sorted(self.calls, key=lambda k: -_depth(self.calls[k])):
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
        query = exp.select(exp.Star()).from_(_as_source(data.this))
        ctes = _visible_ctes(call)
        if ctes:
            query.set("with_", exp.With(expressions=[c.copy() for c in ctes]))
        for inner in query.find_all(WindowTVF):  # plan what the schema query itself needs first
            original = self.calls.get(spec_key(inner))
            if original is not None:
                self._ensure(original)
        try:
            return self.resolve_schema(query, list(self.planned.values()))
        except SqlwinError as err:
            raise SqlwinError.at(data, f"{call.kind}: cannot read the input: {err.message}") from None

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


def _depth(node: exp.Expr) -> int:
    depth = 0
    while node.parent is not None:
        node, depth = node.parent, depth + 1
    return depth


def _as_source(node: exp.Expr) -> exp.Expr:
    source = node.copy()
    if isinstance(source, exp.Select):
        source = source.subquery()
    if isinstance(source, exp.Subquery) and not source.alias:
        source.set("alias", exp.TableAlias(this=exp.to_identifier("__q")))
    return source


def _visible_ctes(node: exp.Expr) -> list[exp.CTE]:
    """CTEs in scope at ``node``: those of enclosing WITH clauses (earlier ones only, inside a CTE)."""
    found: list[exp.CTE] = []
    child, parent = node, node.parent
    while parent is not None:
        with_ = parent.args.get("with_") if isinstance(parent, exp.Query) else None
        if isinstance(with_, exp.With):
            ctes = list(with_.expressions)
            inside = next((i for i, c in enumerate(ctes) if child is c or _contains(c, child)), None)
            found = ctes[:inside] + found if inside is not None else ctes + found
        child, parent = parent, parent.parent
    return found


def _contains(ancestor: exp.Expr, node: exp.Expr) -> bool:
    while node is not None:
        if node is ancestor:
            return True
        node = node.parent
    return False


def _aggregates(select: exp.Expr) -> bool:
    if select.find(exp.Group) is not None:
        return True
    return any(agg.find_ancestor(exp.Window) is None for agg in select.find_all(exp.AggFunc))
