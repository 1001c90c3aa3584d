"""Spark SQL text of a compiled tree: the text sqlglot's Spark generator prints, without searching
the tree once per SELECT.

Before printing each SELECT, sqlglot's Spark generator runs four rewrites on it. Three look only at
the SELECT's own clauses (QUALIFY, DISTINCT ON, UNNEST in FROM/JOIN); ``any_to_exists`` searches the
SELECT's whole subtree for ``x op ANY(array)``, nested queries included. Every compiled window TVF is
a derived table, so SELECTs nest and each node was searched once per enclosing SELECT (measured: a
third of the time of printing a 1,000-branch UNION ALL). sqlwin builds no ANY, so the compiler tells
whether its input held one (``holds``, over the user's much smaller tree); without one, the other
three rewrites run as in sqlglot and the search is skipped.
"""

from __future__ import annotations

from sqlglot import exp, transforms
from sqlglot.dialects.dialect import Dialect
from sqlglot.generators.spark import SparkGenerator

_SPARK = Dialect.get_or_raise("spark")  # one instance for every print


class _SparkWithoutAnyRewrite(SparkGenerator):
    """Spark's generator for trees known to hold no ``exp.Any``: ``any_to_exists`` would find nothing."""

    TRANSFORMS = {
        **SparkGenerator.TRANSFORMS,
        exp.Select: transforms.preprocess([transforms.eliminate_qualify, transforms.eliminate_distinct_on,
                                           transforms.unnest_to_explode]),
    }


def spark_sql(node: exp.Expr, may_hold_any: bool = True) -> str:
    """``node.sql(dialect="spark", copy=False)``: like it, it may rewrite ``node`` while printing.
    ``may_hold_any=False`` promises that no node of ``node`` is an ``exp.Any``."""
    generator = SparkGenerator if may_hold_any else _SparkWithoutAnyRewrite
    return generator(dialect=_SPARK).generate(node, copy=False)


def holds(root: exp.Expr, kind: type[exp.Expr]) -> bool:
    """Whether any node of ``root`` is a ``kind`` (one pass over ``args``, no generator per node)."""
    stack = [root]
    while stack:
        node = stack.pop()
        if isinstance(node, kind):
            return True
        for value in node.args.values():
            if isinstance(value, exp.Expr):
                stack.append(value)
            elif type(value) is list:
                stack.extend(v for v in value if isinstance(v, exp.Expr))
    return False
