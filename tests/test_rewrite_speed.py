"""Rewriting a long statement costs a few parses of it, not a search of the whole tree per SELECT or per
window; the shortcuts that make it so print exactly what sqlglot prints, and look each table up once.

The cost is counted, not timed (speed is measured in ``bench/rewrite.py``; a timed ratio failed in CI on a busy
machine): the characters tokenized, the nodes built, the nodes whose children a traversal visits and the nodes
printed, all deterministic. A search of the whole tree per SELECT grows with the square of the statement.
"""

from __future__ import annotations

import collections
import gc
from collections.abc import Iterator
from contextlib import contextmanager

import pytest
import sqlglot
from sqlglot import exp, generator, tokens

import sqlwin
from bench.rewrite import union
from sqlwin import dialect
from sqlwin.backends.sparksql import holds, spark_sql
from sqlwin.gcpause import collector_paused
from tests.test_robustness import CATALOG


@contextmanager
def counted_work() -> Iterator[collections.Counter]:
    """Counts sqlglot's units of work while the block runs: every traversal (``walk``, ``find_all``, ``dfs``,
    ``bfs``) asks a node for its children once, every node built (parsed or copied) runs the base constructor,
    every node printed goes through ``Generator.sql``."""
    work: collections.Counter = collections.Counter()
    tokenize, build, children, render = (tokens.Tokenizer.tokenize, exp.Expr.__init__, exp.Expr.iter_expressions,
                                         generator.Generator.sql)

    def counted_tokenize(self, sql: str):
        work["tokenized"] += len(sql)
        return tokenize(self, sql)

    def counted_build(self, **args):
        work["built"] += 1
        build(self, **args)

    def counted_children(self, reverse: bool = False):
        work["visited"] += 1
        return children(self, reverse)

    def counted_render(self, expression, key=None, comment=True):
        work["printed"] += 1
        return render(self, expression, key, comment)

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(tokens.Tokenizer, "tokenize", counted_tokenize)
        patch.setattr(exp.Expr, "__init__", counted_build)
        patch.setattr(exp.Expr, "iter_expressions", counted_children)
        patch.setattr(generator.Generator, "sql", counted_render)
        yield work


def _rewrite_work(n: int) -> tuple[collections.Counter, int, int]:
    """The work of rewriting an ``n``-branch UNION ALL, with the statement's length and its tree's size."""
    text = union(n)
    size = sum(1 for _ in dialect.parse_one(text).walk())
    with counted_work() as work:
        sqlwin.rewrite(text, catalog=CATALOG)
    return work, len(text), size


def test_rewriting_a_long_union_costs_a_few_parses_of_it() -> None:
    """Measured: the text tokenized once, ~7.4 nodes built, ~9 visited and ~7.7 printed per node of the tree."""
    work, length, size = _rewrite_work(300)
    assert work["tokenized"] <= 2 * length, (work, length)
    assert all(work[unit] <= 12 * size for unit in ("built", "visited", "printed")), (work, size)


def test_rewriting_is_linear_in_the_statement_size() -> None:
    """400 branches vs 100: linear is 4x (measured 4.0x for every unit), quadratic 16x."""
    small, _, _ = _rewrite_work(100)
    large, _, _ = _rewrite_work(400)
    assert all(large[unit] <= 4.2 * small[unit] for unit in ("tokenized", "built", "visited", "printed")), (
        small, large)


CORPUS = [
    "SELECT a FROM t WHERE 5 > ANY(arr)",
    "SELECT a FROM (SELECT a, arr FROM (SELECT * FROM t) AS x WHERE 1 = ANY(arr)) AS y WHERE 2 < ANY(arr)",
    "SELECT a FROM t WHERE x = ANY (SELECT y FROM u)",
    "SELECT ANY(b) FROM t",
    "SELECT a FROM t QUALIFY ROW_NUMBER() OVER (PARTITION BY b ORDER BY c) = 1",
    "SELECT * FROM (SELECT a FROM t QUALIFY ROW_NUMBER() OVER (ORDER BY a) = 1) AS s WHERE 3 = ANY(arr)",
    "SELECT * FROM UNNEST(ARRAY(1, 2)) AS x(a)",
    "SELECT a FROM t CROSS JOIN UNNEST(arr) AS u(e)",
    "SELECT a FROM t UNION ALL SELECT b FROM u WHERE 1 = ANY(arr) ORDER BY 1 LIMIT 3",
    "WITH c AS (SELECT STRUCT(1 AS start, 2 AS end) AS w) SELECT w.start FROM c",
    "SELECT NAMED_STRUCT('start', 1, 'end', 2) AS w",
]


@pytest.mark.parametrize("sql", CORPUS)
def test_spark_sql_prints_what_sqlglot_prints(sql: str) -> None:
    tree = sqlglot.parse_one(sql, read="spark")
    assert spark_sql(tree.copy(), may_hold_any=holds(tree, exp.Any)) == tree.sql(dialect="spark")


def test_any_in_a_windowed_query_still_becomes_exists() -> None:
    catalog = {"bids": {"ts": "timestamp", "k": "string", "arr": "array<int>"}}
    tumble = "TUMBLE(TABLE {}, DESCRIPTOR(ts), INTERVAL '10' MINUTES)"
    grouped = sqlwin.rewrite(f"SELECT window_start, COUNT(*) AS c FROM {tumble.format('bids')} WHERE 5 > ANY(arr) "
                             "GROUP BY window_start, window_end", catalog=catalog)
    inside = sqlwin.rewrite(f"SELECT * FROM {tumble.format('(SELECT * FROM bids WHERE 3 = ANY(arr))')}",
                            catalog=catalog)
    assert "EXISTS(arr, x -> 5 > x)" in grouped and "ANY" not in grouped.upper().replace("ANY_", "")
    assert "EXISTS(arr, x -> 3 = x)" in inside


class CountingCatalog:
    """A catalog that knows two tables and counts the look-ups."""

    dialect = "spark"

    def __init__(self) -> None:
        self.calls: list[str] = []

    def schema_of(self, sql: str):
        from sqlwin.planner.catalog import DictCatalog

        self.calls.append(sql)
        return DictCatalog({**CATALOG, "asks": CATALOG["bids"]}).schema_of(sql)


def test_each_table_is_looked_up_once_per_statement() -> None:
    catalog = CountingCatalog()
    text = union(50) + " UNION ALL " + union(2).replace("TABLE bids", "TABLE asks")
    sqlwin.rewrite(text, catalog=catalog)
    assert sorted(catalog.calls) == ["SELECT * FROM asks", "SELECT * FROM bids"]
    # a CTE of the same name is another relation: looked up (and compiled) for itself
    catalog.calls.clear()
    cte = "WITH bids AS (SELECT ts, k, v, price FROM asks) " + union(2)
    assert "PMOD" in sqlwin.rewrite(cte, catalog=catalog)
    assert len(catalog.calls) == 2 and all("WITH" in c for c in catalog.calls)


def test_the_collector_is_paused_while_compiling_and_restored_after() -> None:
    assert gc.isenabled()
    with collector_paused():
        assert not gc.isenabled()
        with collector_paused():  # reentrant: the outer one decides
            pass
        assert not gc.isenabled()
    assert gc.isenabled()
    gc.disable()
    try:
        with collector_paused():
            pass
        assert not gc.isenabled()  # it was off: it stays off
    finally:
        gc.enable()
    sqlwin.rewrite(union(3), catalog=CATALOG)
    assert gc.isenabled()


def test_only_the_tree_compile_returned_skips_the_any_search() -> None:
    from sqlwin.backends.spark_batch import SparkBatchCompiler

    compiler = SparkBatchCompiler()
    plain = compiler.compile(dialect.parse_one("SELECT 1 AS a"), [])
    other = compiler.compile_node(dialect.parse_one("SELECT a FROM t WHERE 5 > ANY(arr)"))  # as countsql does
    assert compiler.render(other) == "SELECT a FROM t WHERE EXISTS(arr, x -> 5 > x)"
    assert compiler.render(plain) == "SELECT 1 AS a"
