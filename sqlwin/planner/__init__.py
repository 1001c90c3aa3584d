"""AST -> typed plan. ``plan_statement`` is the only entry point the pipeline uses."""

from __future__ import annotations

from sqlglot import exp

from sqlwin.dialect import nodes as n
from sqlwin.plan import statements as st
from sqlwin.planner.query import QueryPlanner, SchemaResolver
from sqlwin.planner.streams import plan_create_stream, plan_replay_stream, plan_streaming_table


def has_sqlwin_syntax(node: exp.Expr) -> bool:
    """Whether anything in the statement is sqlwin's rather than plain Spark SQL."""
    for sub in node.walk():
        if isinstance(sub, n.ALL_NODES):
            return True
        if isinstance(sub, exp.Select) and any(sub.args.get(k) for k in n.SELECT_CLAUSE_KEYS):
            return True
    return False


def plan_statement(node: exp.Expr, resolve_schema: SchemaResolver | None, text: str = "") -> object:
    """One parsed statement -> one plan object of ``sqlwin.plan.statements``."""
    if isinstance(node, n.ExplainStatement):
        mode = (node.args.get("mode") or "").upper()
        return st.Explain(rewrite=mode == "REWRITE", statement=plan_statement(node.this, resolve_schema))
    if isinstance(node, n.CreateStream):
        return plan_create_stream(node)
    if isinstance(node, n.CreateReplayStream):
        return plan_replay_stream(node)
    if isinstance(node, n.CreateStreamingTable):
        return plan_streaming_table(node, QueryPlanner(resolve_schema).plan(node.expression))
    if isinstance(node, n.ShowStreamingTables):
        return st.ShowStreamingTables()
    if isinstance(node, n.StopStreamingTable):
        return st.StopStreamingTable(node.this.sql("spark"))
    if isinstance(node, n.DropStreamingTable):
        return st.DropStreamingTable(node.this.name, bool(node.args.get("purge")))
    if not has_sqlwin_syntax(node):
        return st.Passthrough(text, node)
    return QueryPlanner(resolve_schema).plan(node)
